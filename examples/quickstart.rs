//! Quickstart: build a graph, print it, evaluate it on an ndarray.
//!
//! Run with `cargo run --release --example quickstart`.

use kiln::eval::evaluate;
use kiln::graph::print::{dprint, pprint};
use kiln::{vector, DType, FunctionGraph, Value};
use ndarray::{Array1, IxDyn};

fn main() -> kiln::Result<()> {
    // log(1 + exp(x)) over a vector of f64.
    let x = vector("x", DType::F64);
    let y = (1.0 + x.exp()).log();
    let fg = FunctionGraph::new(&[x], &[y])?;

    println!("graph:   {fg}");
    println!("infix:   {}", pprint(&fg, fg.outputs()[0]));
    println!("tree:\n{}", dprint(&fg));

    let n = 1_000_000;
    let data = Array1::linspace(-5.0, 5.0, n)
        .into_dyn()
        .into_shape_with_order(IxDyn(&[n]))
        .expect("1-d");
    let out = evaluate(&fg, &[Value::F64(data)])?;
    let Value::F64(out) = &out[0] else {
        unreachable!("log of f64 is f64")
    };
    println!(
        "reference evaluation of {n} elements: first {:.6}, middle {:.6}, last {:.6}",
        out[0],
        out[n / 2],
        out[n - 1]
    );
    Ok(())
}
