//! What comes for free from the pullbacks: [`jacobian`] (by rows, one
//! vector-Jacobian product per output element), [`hessian`] (the Jacobian
//! of the gradient) and [`jvp`] (PyTensor's `Rop`, by the double-vjp trick).
//!
//! kiln has no `scan`, so a Jacobian needs the expression's length to be
//! static; its rows are stacked with one-hot constants (an `add` of
//! `e_i ⊗ row_i`), which the optdb simplifies.

use super::reverse::{grad, vjp};
use crate::error::{Error, Result};
use crate::graph::{DType, Value};
use crate::ops::ScalarOp;
use crate::tensor::{elemwise, mul, second, Tensor};

/// The Jacobian of `expression` (0-d or 1-d of static length `n`) with
/// respect to each of `wrt`: for a 1-d expression, a tensor of shape
/// `(n, *wrt.shape)` whose row `i` is the gradient of `expression[i]`; for a
/// 0-d expression, the gradient. A `wrt` the expression does not depend on
/// gets zeros.
pub fn jacobian(expression: &Tensor, wrt: &[Tensor]) -> Result<Vec<Tensor>> {
    let n = match expression.ndim() {
        0 => return vjp(std::slice::from_ref(expression), wrt, &[one_like(expression)?]),
        1 => expression.ty().shape[0].ok_or_else(|| {
            Error::Gradient(format!(
                "jacobian: the expression ({}) must have a static length (kiln has no scan to loop over its rows)",
                expression.ty()
            ))
        })?,
        _ => {
            return Err(Error::Gradient(format!(
                "jacobian: the expression must be 0-d or 1-d, got {}",
                expression.ty()
            )))
        }
    };
    if !expression.dtype().is_float() {
        return Err(Error::Gradient(format!(
            "jacobian: the expression must be of a float dtype, got {}",
            expression.ty()
        )));
    }
    let dt = expression.dtype();
    let mut rows: Vec<Vec<Tensor>> = vec![Vec::with_capacity(n); wrt.len()];
    for i in 0..n {
        let e = one_hot(dt, n, i, &[n]);
        let r = vjp(
            std::slice::from_ref(expression),
            wrt,
            &[Tensor::constant(e)],
        )?;
        for (k, g) in r.into_iter().enumerate() {
            // e_i (n, 1, ..., 1) times the row (1, *shape): row i of the result.
            let mut shape = vec![n];
            shape.extend(std::iter::repeat_n(1, g.ndim()));
            let col = Tensor::constant(one_hot(g.dtype(), n, i, &shape));
            rows[k].push(mul(&col, &g.expand_dims(0)?)?);
        }
    }
    rows.into_iter()
        .map(|r| {
            if r.len() == 1 {
                Ok(r.into_iter().next().expect("one row"))
            } else {
                elemwise(ScalarOp::Add, &r.iter().collect::<Vec<_>>())
            }
        })
        .collect()
}

/// The Hessian of the 0-d `cost` with respect to each of `wrt` (0-d or 1-d
/// of static length): the Jacobian of its gradient.
pub fn hessian(cost: &Tensor, wrt: &[Tensor]) -> Result<Vec<Tensor>> {
    wrt.iter()
        .map(|w| {
            if w.ndim() > 1 {
                return Err(Error::Gradient(format!(
                    "hessian: each wrt must be 0-d or 1-d, got {}",
                    w.ty()
                )));
            }
            let g = grad(cost, std::slice::from_ref(w))?.remove(0);
            Ok(jacobian(&g, std::slice::from_ref(w))?.remove(0))
        })
        .collect()
}

/// The Jacobian-vector product (PyTensor's `Rop`): the directional
/// derivatives of `outputs` along `tangents` (one per `wrt`, of its type).
///
/// Built by the double-vjp trick rather than forward rules: `u ↦ vjp(u) =
/// Jᵀu` is linear in the cotangent `u`, so its own vjp with cotangent `v`
/// is `J v`. The cotangent `u` is a zero tensor of each output's shape (any
/// value gives the same linear map, and zeros let the optdb fold the
/// unused first pass away).
pub fn jvp(outputs: &[Tensor], wrt: &[Tensor], tangents: &[Tensor]) -> Result<Vec<Tensor>> {
    if wrt.len() != tangents.len() {
        return Err(Error::Gradient(format!(
            "jvp: {} variables but {} tangents",
            wrt.len(),
            tangents.len()
        )));
    }
    for (w, t) in wrt.iter().zip(tangents) {
        if w.ndim() != t.ndim() {
            return Err(Error::Gradient(format!(
                "jvp: the tangent of {w:?} has type {}, not the variable's number of dimensions",
                t.ty()
            )));
        }
    }
    let us: Vec<Tensor> = outputs
        .iter()
        .map(|o| {
            if !o.dtype().is_float() {
                return Err(Error::Gradient(format!(
                    "jvp: every output must be of a float dtype, got {}",
                    o.ty()
                )));
            }
            second(o, &Tensor::constant(Value::scalar_f64(o.dtype(), 0.0)))
        })
        .collect::<Result<_>>()?;
    let g = vjp(outputs, wrt, &us)?;
    vjp(&g, &us, tangents)
}

fn one_like(t: &Tensor) -> Result<Tensor> {
    if !t.dtype().is_float() {
        return Err(Error::Gradient(format!(
            "jacobian: the expression must be of a float dtype, got {}",
            t.ty()
        )));
    }
    Ok(Tensor::constant(Value::scalar_f64(t.dtype(), 1.0)))
}

/// The `i`-th unit vector of length `n`, reshaped to `shape` (`n` elements).
fn one_hot(dtype: DType, n: usize, i: usize, shape: &[usize]) -> Value {
    let mut v = ndarray::ArrayD::<f64>::zeros(ndarray::IxDyn(&[n]));
    v[i] = 1.0;
    let v = v
        .into_shape_with_order(ndarray::IxDyn(shape))
        .expect("the shape has n elements");
    Value::from_f64_array(dtype, v)
}
