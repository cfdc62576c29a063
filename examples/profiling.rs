//! Profiles: where a compiled function spends its time.
//!
//! Three profiles come with a `CompiledFunction`: the rewrite profile (which
//! rewriters ran and what they changed), the compile profile (how each node
//! was lowered: JIT kernel, runtime call, fallback) and the function profile
//! (compile and call totals). `call_profiled` times one call per step of the
//! linker's schedule and reports the peak bytes of the buffers it allocated.
//! The example profiles the `poly` workload of the benchmark suite without
//! rewriting (one pass per operation) and with FAST_RUN (one fused kernel).
//!
//! Run with `cargo run --release --example profiling`.

use kiln::linker::Arg;
use kiln::rewriting::Mode;
use kiln::{function, vector, DType};
use ndarray::{ArrayD, IxDyn};

fn main() -> kiln::Result<()> {
    let x = vector("x", DType::F64);
    let poly = 2.0 * x.powf(3.0) - 3.0 * x.powf(2.0) + &x - 1.0;
    let n = 1_000_000;
    let input = ArrayD::from_shape_fn(IxDyn(&[n]), |i| ((i[0] * 7919) % 1000) as f64 / 250.0 - 2.0);

    for (name, mode) in [("none", Mode::none()), ("fast_run", Mode::fast_run())] {
        let f = function(std::slice::from_ref(&x), std::slice::from_ref(&poly))
            .mode(mode)
            .message(name)
            .compile()?;
        f.call(&[Arg::from(&input)])?; // warm-up
        let (_, run) = f.call_profiled(&[Arg::from(&input)])?;
        println!("== {name}: {} nodes, lowered as:", f.graph().n_nodes());
        for (node, lowering) in &f.compile_profile().nodes {
            println!("   {node:<40} {lowering:?}");
        }
        println!(
            "   one call: {:.3} ms, peak {} bytes; per step:",
            run.total.as_secs_f64() * 1e3,
            run.peak_bytes
        );
        for (node, t) in &run.nodes {
            println!("   {:>8.3} ms  {node}", t.as_secs_f64() * 1e3);
        }
        println!("{}", f.profile());
    }
    let f = function(&[x], &[poly]).compile()?;
    println!("== FAST_RUN rewrite profile\n{}", f.rewrite_profile());
    Ok(())
}
