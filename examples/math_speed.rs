//! In-cache speed of kiln-runtime's f64 math functions (ns per element,
//! best of 200 passes over 4096 elements), with the C library's exp as a
//! yardstick measured in the same run (the machines are noisy: compare
//! ratios). `cargo run --release --example math_speed`
use kiln_runtime::math as m;
use std::time::Instant;

fn best(f: &mut dyn FnMut()) -> f64 {
    let mut b = f64::INFINITY;
    for _ in 0..200 {
        let t = Instant::now();
        f();
        b = b.min(t.elapsed().as_nanos() as f64 / 4096.0);
    }
    b
}

fn main() {
    let n = 4096;
    let x: Vec<f64> = (0..n).map(|i| (i as f64 / n as f64) * 8.0 - 4.0).collect();
    let xp: Vec<f64> = x.iter().map(|v| v.abs() + 0.1).collect();
    let mut o = vec![0.0; n];
    type F = fn(&[f64], &mut [f64]);
    let fs: [(&str, F, bool); 7] = [
        ("exp", m::exp_f64, false),
        ("log", m::log_f64, true),
        ("log1p", m::log1p_f64, true),
        ("tanh", m::tanh_f64, false),
        ("sigmoid", m::sigmoid_f64, false),
        ("softplus", m::softplus_f64, false),
        ("expm1", m::expm1_f64, false),
    ];
    let c = best(&mut || {
        for (a, &v) in o.iter_mut().zip(&x) {
            *a = v.exp();
        }
        std::hint::black_box(&o);
    });
    println!("C library exp: {c:.3} ns/elem");
    for (name, f, pos) in fs {
        let inp = if pos { &xp } else { &x };
        let t = best(&mut || {
            f(inp, &mut o);
            std::hint::black_box(&o);
        });
        println!("{name}: {t:.3} ns/elem ({:.2}x C exp)", t / c);
    }
}
