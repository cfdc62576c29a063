//! Gradients: `grad` builds the derivative of a scalar cost as an ordinary
//! graph, which FAST_RUN rewrites (merging, canonicalization, the sigmoid
//! stabilizations, fusion) and JIT-compiles like any other; here the
//! logistic loss of a linear model, its gradient checked against the closed
//! form, and a Hessian.
//!
//! Run with `cargo run --release --example gradients`.

use kiln::graph::print::pprint_outputs;
use kiln::rewriting::Mode;
use kiln::{dot, function, grad, hessian, matrix, tensor, vector, DType, FunctionGraph, Value};
use ndarray::{arr1, arr2};

fn main() -> kiln::Result<()> {
    // loss(w) = -sum(t * log(sigmoid(X w)) + (1 - t) * log(1 - sigmoid(X w)))
    let x = matrix("X", DType::F64);
    let t = vector("t", DType::F64);
    let w = vector("w", DType::F64);
    let s = dot(&x, &w)?.sigmoid();
    let loss = -(&(&t * &s.log()) + &(&(1.0 - &t) * &(1.0 - &s).log())).sum_all();
    let g = grad(&loss, std::slice::from_ref(&w))?.remove(0);

    let inputs = [x.clone(), t.clone(), w.clone()];
    let before = FunctionGraph::new(&inputs, std::slice::from_ref(&g))?;
    println!(
        "gradient as built ({} nodes):\n  {}",
        before.n_nodes(),
        pprint_outputs(&before)
    );
    let f = function(&inputs, &[loss.clone(), g.clone()])
        .mode(Mode::fast_run())
        .compile()?;
    println!(
        "after FAST_RUN ({} nodes with the loss):\n  {}",
        f.graph().n_nodes(),
        pprint_outputs(f.graph())
    );

    // Large logits: the rewritten gradient stays finite where the graph as
    // built divides 0 by 0.
    let xv = arr2(&[[1.0, 2.0], [-3.0, 0.5], [400.0, -300.0]]);
    let tv = arr1(&[1.0, 0.0, 0.0]);
    let wv = arr1(&[0.5, -1.5]);
    let out = f.call_values(&[
        Value::F64(xv.clone().into_dyn()),
        Value::F64(tv.clone().into_dyn()),
        Value::F64(wv.clone().into_dyn()),
    ])?;
    // The closed form: Xᵀ (sigmoid(X w) - t).
    let z = xv.dot(&wv);
    let resid = z.mapv(|v| 1.0 / (1.0 + (-v).exp())) - &tv;
    let exact = xv.t().dot(&resid);
    let got = out[1].to_f64_array();
    println!("gradient at logits {z}: {got} (closed form {exact})");
    assert!(got
        .iter()
        .zip(exact.iter())
        .all(|(a, b)| (a - b).abs() <= 1e-12 * b.abs().max(1.0)));

    // The Hessian of a quadratic form is constant: A + Aᵀ.
    let v = tensor("v", DType::F64, &[Some(2)]);
    let a = tensor("A", DType::F64, &[Some(2), Some(2)]);
    let q = dot(&v, &dot(&a, &v)?)?;
    let h = hessian(&q, std::slice::from_ref(&v))?.remove(0);
    let fh = function(&[v, a], &[h]).compile()?;
    let hv = fh.call_values(&[
        Value::F64(arr1(&[1.0, 2.0]).into_dyn()),
        Value::F64(arr2(&[[1.0, 2.0], [3.0, 4.0]]).into_dyn()),
    ])?;
    println!("hessian of v·A·v: {}", hv[0].to_f64_array());
    Ok(())
}
