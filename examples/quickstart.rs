//! Quickstart: the whole pipeline in one run — build a graph, rewrite it
//! with FAST_RUN, JIT-compile it for this CPU, run it on a million
//! elements, and print the graph before and after and the profiles.
//!
//! Run with `cargo run --release --example quickstart`.

use kiln::graph::print::pprint;
use kiln::rewriting::Mode;
use kiln::{function, vector, DType, FunctionGraph, Value};
use ndarray::{Array1, IxDyn};

fn main() -> kiln::Result<()> {
    // log(1 + exp(x)): overflows for large x unless rewritten to softplus(x).
    let x = vector("x", DType::F64);
    let y = (1.0 + x.exp()).log();

    let before = FunctionGraph::new(std::slice::from_ref(&x), std::slice::from_ref(&y))?;
    println!("before rewriting: {}", pprint(&before, before.outputs()[0]));

    let f = function(&[x], &[y])
        .mode(Mode::fast_run())
        .message("quickstart")
        .compile()?;
    println!(
        "after FAST_RUN:   {}",
        pprint(f.graph(), f.graph().outputs()[0])
    );
    println!("lowered nodes:    {:?}", f.compile_profile().nodes);

    let n = 1_000_000;
    let data = Array1::linspace(-800.0, 800.0, n)
        .into_shape_with_order(IxDyn(&[n]))
        .expect("1-d");
    let input = Value::F64(data);
    let mut outs = Vec::new();
    for _ in 0..5 {
        outs = f.call_values(std::slice::from_ref(&input))?;
    }
    let Value::F64(out) = &outs[0] else {
        unreachable!("softplus of f64 is f64")
    };
    println!(
        "softplus over {n} points in [-800, 800]: f(-800) = {:e}, f(0) = {:.6}, f(800) = {}",
        out[0],
        out[n / 2],
        out[n - 1]
    );
    assert!(
        out.iter().all(|v| v.is_finite()),
        "the stabilised graph stays finite"
    );

    println!();
    println!("{}", f.profile());
    println!("{}", f.rewrite_profile());
    Ok(())
}
