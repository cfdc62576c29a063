//! Mutable inputs: let a compiled function overwrite an input's array.
//!
//! `function(..).mutable_inputs(&[k])` allows FAST_RUN's inplace rewrites to
//! compute into input `k`'s buffer. The compiled function writes the array
//! only when the caller lends it mutably (`call_mut`); its contents are then
//! unspecified (here they hold the result, since the update is computed in
//! place). Lent read-only (`call`), the input is copied first and never
//! written. Results are always arrays the caller owns.
//!
//! Run with `cargo run --release --example mutable_inputs`.

use kiln::linker::{Arg, ArgMut};
use kiln::{function, vector, DType, Value};
use ndarray::{ArrayD, IxDyn};

fn main() -> kiln::Result<()> {
    // A gradient-descent update w - lr * g, allowed to overwrite w (input 0).
    let (w, g) = (vector("w", DType::F64), vector("g", DType::F64));
    let update = function(&[w.clone(), g.clone()], &[&w - 0.5 * &g])
        .mutable_inputs(&[0])
        .compile()?;
    println!("rewritten graph: {}", update.graph());

    let n = 8;
    let w0 = ArrayD::from_elem(IxDyn(&[n]), 1.0);
    let grad = ArrayD::from_shape_fn(IxDyn(&[n]), |i| i[0] as f64);

    // Read-only: `w` is copied first and stays untouched.
    let out = update.call(&[Arg::from(&w0), Arg::from(&grad)])?;
    println!(
        "call:     w after = {:?}",
        w0.as_slice().expect("standard layout")
    );
    println!("          result  = {:?}", values(&out[0]));

    // Lent mutably: the update may be computed in `w`'s own array.
    let mut w1 = w0.clone();
    let out = update.call_mut(&mut [ArgMut::from(&mut w1), ArgMut::from(&grad)])?;
    println!(
        "call_mut: w after = {:?}",
        w1.as_slice().expect("standard layout")
    );
    println!("          result  = {:?}", values(&out[0]));
    assert_eq!(
        values(&out[0]),
        (0..n).map(|i| 1.0 - 0.5 * i as f64).collect::<Vec<_>>()
    );
    Ok(())
}

/// The elements of an f64 result.
fn values(v: &Value) -> Vec<f64> {
    let Value::F64(a) = v else {
        unreachable!("the update of f64 vectors is f64")
    };
    a.iter().copied().collect()
}
