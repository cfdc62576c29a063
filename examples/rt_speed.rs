//! Speed of kiln-runtime's block functions vs. the C library, per element.
fn main() {
    let n = 10_000_000;
    let x: Vec<f64> = (0..n)
        .map(|i| ((i * 7919) % 1000) as f64 / 250.0 - 2.0)
        .collect();
    let mut out = vec![0.0; n];
    for _ in 0..2 {
        let t = std::time::Instant::now();
        kiln_runtime::math::exp_f64(&x, &mut out);
        println!(
            "runtime exp: {:.2} ns/elem ({:?})",
            t.elapsed().as_nanos() as f64 / n as f64,
            kiln_runtime::math::isa()
        );
        let t = std::time::Instant::now();
        for c in x.chunks(256).zip(out.chunks_mut(256)) {
            kiln_runtime::math::exp_f64(c.0, c.1);
        }
        println!(
            "runtime exp, 256-blocks: {:.2} ns/elem",
            t.elapsed().as_nanos() as f64 / n as f64
        );
        let y = vec![3.0; n];
        let t = std::time::Instant::now();
        kiln_runtime::math::pow_f64(&x, &y, &mut out);
        println!(
            "runtime pow: {:.2} ns/elem",
            t.elapsed().as_nanos() as f64 / n as f64
        );
        let t = std::time::Instant::now();
        for (o, &v) in out.iter_mut().zip(&x) {
            *o = v.exp();
        }
        println!(
            "libm exp: {:.2} ns/elem",
            t.elapsed().as_nanos() as f64 / n as f64
        );
        let t = std::time::Instant::now();
        for (o, &v) in out.iter_mut().zip(&x) {
            *o = v.powf(std::hint::black_box(3.0));
        }
        println!(
            "libm pow: {:.2} ns/elem",
            t.elapsed().as_nanos() as f64 / n as f64
        );
    }
}
