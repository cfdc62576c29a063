//! Builders of advanced indexing and joining: gathers along one axis
//! (`take`), indexed updates (`advanced_inc_subtensor1` /
//! `advanced_set_subtensor1`), boolean masks, `concatenate`, `stack` and
//! `split`.
//!
//! Invariants: axes may be negative (counted from the end, as numpy) and
//! are normalised here, so the ops only see axes in range; dtypes are
//! promoted here as numpy does (`concatenate` upcasts its inputs, an
//! update casts `y` to `x`'s dtype when that loses nothing), so the ops
//! require one dtype and never convert.

use super::Tensor;
use crate::error::{Error, Result};
use crate::graph::{DType, Value};
use crate::ops::Op;

/// `axis` (negative counts from the end) as a position among `ndim` axes.
fn norm_axis(op: &str, axis: isize, ndim: usize) -> Result<usize> {
    let n = ndim as isize;
    let a = if axis < 0 { axis + n } else { axis };
    if (0..n).contains(&a) {
        Ok(a as usize)
    } else {
        Err(Error::ty(
            op,
            format!("axis {axis} is out of range for {ndim} dimension(s)"),
        ))
    }
}

/// The sub-arrays of `x` at the integer indices `idx` along `axis`
/// (`AdvancedSubtensor1`; numpy `take(x, idx, axis)`, `x[idx]` for axis 0).
/// `idx` has any integer dtype and at least one dimension; negative
/// indices count from the end; an index out of range is a run-time error.
pub fn advanced_subtensor1(x: &Tensor, axis: isize, idx: &Tensor) -> Result<Tensor> {
    let axis = norm_axis("AdvancedSubtensor1", axis, x.ndim())?;
    Tensor::apply(Op::AdvancedSubtensor1 { axis }, &[x, idx])
}

/// numpy's `take(x, idx, axis)`: [`advanced_subtensor1`] with numpy's
/// argument order.
pub fn take(x: &Tensor, idx: &Tensor, axis: isize) -> Result<Tensor> {
    advanced_subtensor1(x, axis, idx)
}

/// `y` as an operand of an update of `x`: cast to `x`'s dtype when that
/// loses nothing (numpy's `same_kind` spirit: an `i32` into `f64` is fine,
/// an `f64` into `f32` or `i64` is an error).
fn update_operand(op: &str, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    if DType::upcast(x.dtype(), y.dtype()) != x.dtype() {
        return Err(Error::ty(
            op,
            format!(
                "y {} cannot be written into x {} without a downcast; cast it first",
                y.ty(),
                x.ty()
            ),
        ));
    }
    Ok(y.cast(x.dtype()))
}

fn inc_or_set(x: &Tensor, axis: isize, idx: &Tensor, y: &Tensor, set: bool) -> Result<Tensor> {
    let name = if set {
        "AdvancedSetSubtensor1"
    } else {
        "AdvancedIncSubtensor1"
    };
    let axis = norm_axis(name, axis, x.ndim())?;
    let y = update_operand(name, x, y)?;
    Tensor::apply(Op::AdvancedIncSubtensor1 { axis, set }, &[x, &y, idx])
}

/// A copy of `x` with `y` added to its sub-arrays at `idx` along `axis`
/// (`inc_subtensor(x[idx], y)`; duplicates accumulate as `np.add.at`).
/// `y` broadcasts to `take(x, idx, axis)` and is cast to `x`'s dtype when
/// that loses nothing.
pub fn advanced_inc_subtensor1(
    x: &Tensor,
    axis: isize,
    idx: &Tensor,
    y: &Tensor,
) -> Result<Tensor> {
    inc_or_set(x, axis, idx, y, false)
}

/// A copy of `x` with its sub-arrays at `idx` along `axis` set to `y`
/// (`set_subtensor(x[idx], y)`; for duplicates the last one wins).
pub fn advanced_set_subtensor1(
    x: &Tensor,
    axis: isize,
    idx: &Tensor,
    y: &Tensor,
) -> Result<Tensor> {
    inc_or_set(x, axis, idx, y, true)
}

/// `x[mask]` for a bool `mask` with the shape of `x`'s first `mask.ndim()`
/// dimensions: the selected sub-arrays in row-major order (1-d for a mask
/// of `x`'s shape); the length is known only at run time.
pub fn boolean_mask(x: &Tensor, mask: &Tensor) -> Result<Tensor> {
    Tensor::apply(Op::BooleanMask, &[x, mask])
}

/// numpy's `concatenate(tensors, axis)`: the inputs are upcast to one
/// dtype (numpy promotion); one input is returned as it is.
pub fn concatenate(tensors: &[&Tensor], axis: isize) -> Result<Tensor> {
    let Some(first) = tensors.first() else {
        return Err(Error::ty(
            "Join",
            "needs at least one tensor to concatenate",
        ));
    };
    let axis = norm_axis("Join", axis, first.ndim())?;
    let dtype = DType::upcast_all(tensors.iter().map(|t| t.dtype())).expect("non-empty");
    let cast: Vec<Tensor> = tensors.iter().map(|t| t.cast(dtype)).collect();
    let refs: Vec<&Tensor> = cast.iter().collect();
    Tensor::apply(Op::Join { axis }, &refs)
}

/// numpy's `stack(tensors, axis)`: the inputs (of one shape) joined along a
/// new axis (`-1` is the new last axis).
pub fn stack(tensors: &[&Tensor], axis: isize) -> Result<Tensor> {
    let Some(first) = tensors.first() else {
        return Err(Error::ty("stack", "needs at least one tensor to stack"));
    };
    let axis = norm_axis("stack", axis, first.ndim() + 1)?;
    let expanded: Vec<Tensor> = tensors
        .iter()
        .map(|t| t.expand_dims(axis as isize))
        .collect::<Result<_>>()?;
    let refs: Vec<&Tensor> = expanded.iter().collect();
    concatenate(&refs, axis as isize)
}

/// `x` split along `axis` into consecutive parts of the static `sizes`
/// (non-negative, summing to the axis length): one `Split` node, whose
/// outputs are views of `x`.
pub fn split(x: &Tensor, sizes: &[i64], axis: isize) -> Result<Vec<Tensor>> {
    let s = Tensor::constant(Value::I64(
        ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[sizes.len()]), sizes.to_vec())
            .expect("1-d"),
    ));
    split_by(x, &s, axis)
}

/// `x` split along `axis` into `sizes.len()` parts whose sizes are the
/// values of the 1-d integer tensor `sizes` (its length must be static);
/// sizes not summing to the axis length are a run-time error.
pub fn split_by(x: &Tensor, sizes: &Tensor, axis: isize) -> Result<Vec<Tensor>> {
    let axis = norm_axis("Split", axis, x.ndim())?;
    let n = match sizes.ty().shape.first() {
        Some(Some(n)) if sizes.ndim() == 1 => *n,
        _ => {
            return Err(Error::ty(
                "Split",
                format!(
                    "the sizes must be a 1-d integer vector of static length, got {}",
                    sizes.ty()
                ),
            ))
        }
    };
    Tensor::apply_multi(Op::Split { axis, n }, &[x, sizes])
}

impl Tensor {
    /// `take(self, idx, axis)`: see [`advanced_subtensor1`].
    pub fn take(&self, idx: &Tensor, axis: isize) -> Result<Tensor> {
        advanced_subtensor1(self, axis, idx)
    }
}
