//! In-cache speed (ns per element, best of 300 passes over 4096 elements)
//! of the runtime's exp-based functions, including the logsumexp row pass
//! `sum_exp_shift_f64` and its companion row `max`, and the ISA variant in
//! use. Alternate runs of an old and a new binary and compare minima and
//! medians: absolute numbers on a shared machine are noisy.
//! `cargo run --release -p kiln-runtime --example exp_speed`
use kiln_runtime::math as m;
use std::hint::black_box;
use std::time::Instant;

/// Elements per pass (32 KiB of f64: input and output stay in L1/L2).
const N: usize = 4096;

/// Best time of 300 calls of `f`, in ns per element.
fn best(f: &mut dyn FnMut()) -> f64 {
    let mut b = f64::INFINITY;
    for _ in 0..300 {
        let t = Instant::now();
        f();
        b = b.min(t.elapsed().as_nanos() as f64 / N as f64);
    }
    b
}

fn main() {
    // Inputs of a stabilised logsumexp row (x - max in [-8, 0]) and a
    // symmetric range for the activations.
    let shifted: Vec<f64> = (0..N).map(|i| -8.0 * i as f64 / N as f64).collect();
    let sym: Vec<f64> = (0..N).map(|i| 8.0 * i as f64 / N as f64 - 4.0).collect();
    let mut o = vec![0.0; N];
    println!("isa: {:?}", m::isa());
    let s = best(&mut || {
        black_box(m::sum_exp_shift_f64(black_box(&shifted), 0.0));
    });
    println!("sum_exp_shift: {s:.3} ns/elem");
    let s = best(&mut || {
        black_box(m::extreme_f64(black_box(&shifted), true));
    });
    println!("max: {s:.3} ns/elem");
    type F = fn(&[f64], &mut [f64]);
    let fs: [(&str, F); 4] = [
        ("exp", m::exp_f64),
        ("tanh", m::tanh_f64),
        ("sigmoid", m::sigmoid_f64),
        ("softplus", m::softplus_f64),
    ];
    for (name, f) in fs {
        let t = best(&mut || {
            f(black_box(&sym), &mut o);
            black_box(&o);
        });
        println!("{name}: {t:.3} ns/elem");
    }
}
