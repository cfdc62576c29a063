//! Comparing modes: one graph compiled under NONE, FAST_COMPILE, FAST_RUN
//! and FAST_RUN without fusion, with each mode's node count, compile time
//! and run time, and a check that they compute the same values.
//!
//! The graph is a small layer `tanh(A @ W + b)` followed by the polynomial
//! `2h³ - 3h² + h - 1` of its output: FAST_RUN rewrites the powers into
//! multiplications and fuses the element-wise tail into one kernel.
//! Timings here are single calls on a small problem, for illustration;
//! `kiln bench` measures properly (medians of many runs).
//!
//! Run with `cargo run --release --example compare_modes`.

use std::time::Instant;

use kiln::linker::Arg;
use kiln::rewriting::Mode;
use kiln::{function, matrix, vector, DType};
use ndarray::{ArrayD, Dimension, IxDyn};

fn main() -> kiln::Result<()> {
    let (a, w, b) = (
        matrix("A", DType::F64),
        matrix("W", DType::F64),
        vector("b", DType::F64),
    );
    let h = (&kiln::dot(&a, &w)? + &b).tanh();
    let y = 2.0 * h.powf(3.0) - 3.0 * h.powf(2.0) + &h - 1.0;

    let ramp = |shape: &[usize], scale: f64| {
        ArrayD::from_shape_fn(IxDyn(shape), |i| {
            let k = i.slice().iter().fold(0, |acc, &d| acc * 31 + d);
            scale * ((k % 17) as f64 - 8.0)
        })
    };
    let (av, wv, bv) = (
        ramp(&[256, 128], 0.01),
        ramp(&[128, 64], 0.02),
        ramp(&[64], 0.1),
    );
    let args = [Arg::from(&av), Arg::from(&wv), Arg::from(&bv)];

    let modes = [
        ("none", Mode::none()),
        ("fast_compile", Mode::fast_compile()),
        ("fast_run", Mode::fast_run()),
        ("fast_run-fusion", Mode::fast_run().excluding(&["fusion"])),
    ];
    let mut reference = None;
    println!("mode             nodes  compile ms  run ms");
    for (name, mode) in modes {
        let t = Instant::now();
        let f = function(&[a.clone(), w.clone(), b.clone()], std::slice::from_ref(&y))
            .mode(mode)
            .compile()?;
        let compile_ms = t.elapsed().as_secs_f64() * 1e3;
        f.call(&args)?; // warm-up
        let t = Instant::now();
        let out = f.call(&args)?;
        let run_ms = t.elapsed().as_secs_f64() * 1e3;
        println!(
            "{name:<16} {:>2} → {:<2} {compile_ms:>10.2} {run_ms:>7.3}",
            f.nodes_before(),
            f.graph().n_nodes()
        );
        let values = out[0].to_f64_array();
        let reference = reference.get_or_insert_with(|| values.clone());
        let max_diff = (&values - &*reference)
            .iter()
            .fold(0.0_f64, |m, d| m.max(d.abs()));
        assert!(max_diff < 1e-12, "{name} differs from none by {max_diff:e}");
    }
    println!("every mode agrees with `none` to 1e-12");
    Ok(())
}
