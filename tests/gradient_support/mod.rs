//! Shared helpers of the gradient tests: evaluation of a graph by the
//! reference evaluator and by a FAST_RUN JIT-compiled function, central
//! finite differences in f64, and a closeness check with a stated tolerance.
#![allow(dead_code)]

use kiln::rewriting::Mode;
use kiln::{function, FunctionGraph, Tensor, Value};
use ndarray::ArrayD;

/// The outputs evaluated by the reference evaluator on the graph as built
/// (no rewriting).
pub fn reference(inputs: &[Tensor], outputs: &[Tensor], vals: &[Value]) -> Vec<ArrayD<f64>> {
    let fg = FunctionGraph::new(inputs, outputs).expect("graph");
    kiln::eval::evaluate(&fg, vals)
        .expect("reference evaluation")
        .iter()
        .map(Value::to_f64_array)
        .collect()
}

/// The outputs of the FAST_RUN JIT-compiled function.
pub fn fast_run(inputs: &[Tensor], outputs: &[Tensor], vals: &[Value]) -> Vec<ArrayD<f64>> {
    let f = function(inputs, outputs)
        .mode(Mode::fast_run())
        .compile()
        .expect("compile");
    f.call_values(vals)
        .expect("call")
        .iter()
        .map(Value::to_f64_array)
        .collect()
}

/// The gradient of the 0-d `cost` with respect to the f64 input `k` by
/// central differences on the reference evaluator, with the step
/// `h = 1e-6 * max(1, |x|)`: the truncation error is about `h² |f'''| / 6`
/// (1e-12 relative for moderate third derivatives) and the rounding error
/// about `eps |f| / h` (1e-10 relative), so 1e-6 relative agreement is a
/// safe bound for smooth functions away from their singularities.
pub fn numeric_grad(inputs: &[Tensor], cost: &Tensor, vals: &[Value], k: usize) -> ArrayD<f64> {
    let base = vals[k].to_f64_array();
    let mut g = ArrayD::<f64>::zeros(base.raw_dim());
    let f = |v: &ArrayD<f64>| -> f64 {
        let mut vs = vals.to_vec();
        vs[k] = Value::F64(v.clone());
        reference(inputs, std::slice::from_ref(cost), &vs)[0]
            .iter()
            .next()
            .copied()
            .expect("0-d cost")
    };
    for (idx, &x) in base.indexed_iter() {
        let h = 1e-6 * x.abs().max(1.0);
        let mut p = base.clone();
        p[&idx] = x + h;
        let mut m = base.clone();
        m[&idx] = x - h;
        g[&idx] = (f(&p) - f(&m)) / (2.0 * h);
    }
    g
}

/// Asserts `|a - b| <= atol + rtol * |b|` elementwise (NaN only where both are NaN).
pub fn assert_close(what: &str, a: &ArrayD<f64>, b: &ArrayD<f64>, rtol: f64, atol: f64) {
    assert_eq!(a.shape(), b.shape(), "{what}: shapes differ");
    for ((i, x), y) in a.indexed_iter().zip(b.iter()) {
        let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= atol + rtol * y.abs();
        assert!(ok, "{what}: at {i:?} got {x}, expected {y} (rtol {rtol}, atol {atol})\n got {a}\n expected {b}");
    }
}

/// A 1-d f64 value.
pub fn vec1(v: &[f64]) -> Value {
    Value::F64(ndarray::arr1(v).into_dyn())
}

/// A 0-d f64 value.
pub fn scalar(v: f64) -> Value {
    Value::F64(ndarray::arr0(v).into_dyn())
}
