//! Helpers shared by the integration tests.
#![allow(dead_code)]

use kiln::eval::{evaluate, perform};
use kiln::graph::Element;
use kiln::ops::Op;
use kiln::{FunctionGraph, Tensor, TensorType, Value};
use ndarray::{ArrayD, IxDyn};

/// A value of element type `T` with the given shape.
pub fn val<T: Element>(shape: &[usize], data: Vec<T>) -> Value {
    T::wrap(ArrayD::from_shape_vec(IxDyn(shape), data).expect("shape matches data"))
}

/// An `f64` value with the given shape.
pub fn f64s(shape: &[usize], data: &[f64]) -> Value {
    val(shape, data.to_vec())
}

/// A 1-d `f64` value.
pub fn vf(data: &[f64]) -> Value {
    f64s(&[data.len()], data)
}

/// A 1-d `i64` value.
pub fn vi(data: &[i64]) -> Value {
    val(&[data.len()], data.to_vec())
}

/// Runs `perform` with the values' own (fully static) types.
pub fn perf(op: &Op, inputs: &[&Value]) -> kiln::Result<Vec<Value>> {
    let types: Vec<TensorType> = inputs.iter().map(|v| v.tensor_type()).collect();
    let trefs: Vec<&TensorType> = types.iter().collect();
    perform(op, inputs, &trefs)
}

/// Runs `perform` of a single-output op with the values' own types, panicking on error.
pub fn perf1(op: &Op, inputs: &[&Value]) -> Value {
    perf(op, inputs)
        .unwrap_or_else(|e| panic!("{op}: {e}"))
        .remove(0)
}

/// Builds a FunctionGraph and evaluates it with the reference evaluator.
pub fn eval(inputs: &[Tensor], outputs: &[Tensor], values: &[Value]) -> Vec<Value> {
    let fg = FunctionGraph::new(inputs, outputs).expect("graph builds");
    fg.check_integrity().expect("integrity");
    evaluate(&fg, values).expect("evaluates")
}

/// Evaluates a single output.
pub fn eval1(inputs: &[Tensor], output: &Tensor, values: &[Value]) -> Value {
    eval(inputs, std::slice::from_ref(output), values).remove(0)
}

/// The elements as `f64`, row-major.
pub fn flat(v: &Value) -> Vec<f64> {
    v.to_f64_array().iter().copied().collect()
}

/// The elements as `i64`, row-major.
pub fn flat_i(v: &Value) -> Vec<i64> {
    v.to_i64_array().iter().copied().collect()
}

/// Equal within `rtol` (NaN equals NaN, infinities exactly, zero signs ignored).
pub fn close(got: &[f64], want: &[f64], rtol: f64) -> bool {
    got.len() == want.len()
        && got.iter().zip(want).all(|(&g, &w)| {
            (g.is_nan() && w.is_nan())
                || g == w
                || (g.is_finite() && w.is_finite() && (g - w).abs() <= rtol * w.abs())
        })
}

/// Asserts dtype, shape and `f64` elements (exactly, NaN equals NaN).
pub fn assert_value(v: &Value, dtype: kiln::DType, shape: &[usize], want: &[f64]) {
    assert_eq!(v.dtype(), dtype, "dtype of {v:?}");
    assert_eq!(v.shape(), shape, "shape of {v:?}");
    assert!(
        close(&flat(v), want, 0.0),
        "got {:?}, want {want:?}",
        flat(v)
    );
}
