//! Type inference of the data-movement ops of advanced indexing and
//! joining: `AdvancedSubtensor1` (numpy `take` along one axis),
//! `AdvancedIncSubtensor1` (`np.add.at` / indexed assignment along one
//! axis), `BooleanMask` (`x[mask]`), `Join` (`concatenate`) and `Split`.
//!
//! Invariants: every function here checks its inputs' number, dtypes and
//! dimensions and returns the message of a type error (the caller names the
//! op); static sizes are kept wherever they are known (a gather's output
//! has the index's static shape, a join's axis size is the sum of the
//! inputs' when all are known); a size known only at run time is `None`
//! (a boolean mask's output length always is). The ops' run-time checks
//! (indices in range, masks and sizes matching) are made by `perform` and
//! by the linker, which share [`normalize_index`] and [`split_sizes`].

use super::InputInfo;
use crate::types::{DType, TensorType};

/// The most outputs of a `Split` (its `view_map` numbers outputs with a `u8`).
pub const MAX_SPLIT: usize = 255;

/// A type-error message.
type Msg = std::result::Result<TensorType, String>;

/// Checks that `idx` is an integer index of at least one dimension.
fn check_index(idx: &TensorType) -> std::result::Result<(), String> {
    if idx.dtype == DType::Bool {
        return Err(format!(
            "the index must be an integer tensor, got {idx} (a boolean index is a mask: use boolean_mask)"
        ));
    }
    if !idx.dtype.is_int() {
        return Err(format!("the index must be an integer tensor, got {idx}"));
    }
    if idx.ndim() == 0 {
        return Err(format!(
            "the index must have at least one dimension, got {idx}"
        ));
    }
    Ok(())
}

/// The shape of `take(x, idx, axis)`: `x.shape[:axis] + idx.shape + x.shape[axis+1:]`.
fn gathered_shape(x: &TensorType, idx: &TensorType, axis: usize) -> Vec<Option<usize>> {
    let mut shape = x.shape[..axis].to_vec();
    shape.extend_from_slice(&idx.shape);
    shape.extend_from_slice(&x.shape[axis + 1..]);
    shape
}

/// The output type of `AdvancedSubtensor1{axis}(x, idx)`.
pub fn take_type(axis: usize, inputs: &[InputInfo<'_>]) -> Msg {
    let [x, idx] = inputs else {
        return Err(format!("expects 2 inputs (x, idx), got {}", inputs.len()));
    };
    if axis >= x.ty.ndim() {
        return Err(format!("axis {axis} is out of range for {}", x.ty));
    }
    check_index(idx.ty)?;
    Ok(TensorType::new(
        x.ty.dtype,
        gathered_shape(x.ty, idx.ty, axis),
    ))
}

/// The output type of `AdvancedIncSubtensor1{axis}(x, y, idx)`: `x`'s type;
/// `y` has `x`'s dtype and broadcasts (numpy's rule, but a dimension
/// broadcasts only when its static size is 1) to `take(x, idx, axis)`.
pub fn inc_type(axis: usize, inputs: &[InputInfo<'_>]) -> Msg {
    let [x, y, idx] = inputs else {
        return Err(format!(
            "expects 3 inputs (x, y, idx), got {}",
            inputs.len()
        ));
    };
    if axis >= x.ty.ndim() {
        return Err(format!("axis {axis} is out of range for {}", x.ty));
    }
    check_index(idx.ty)?;
    if y.ty.dtype != x.ty.dtype {
        return Err(format!(
            "y {} must have x's dtype {} (the builder casts a y that upcasts to it)",
            y.ty, x.ty.dtype
        ));
    }
    let target = gathered_shape(x.ty, idx.ty, axis);
    if y.ty.ndim() > target.len() {
        return Err(format!(
            "y {} has more dimensions than x[idx] ({})",
            y.ty,
            target.len()
        ));
    }
    let off = target.len() - y.ty.ndim();
    for (k, &ys) in y.ty.shape.iter().enumerate() {
        if let (Some(a), Some(b)) = (ys, target[off + k]) {
            if a != 1 && a != b {
                return Err(format!(
                    "y {} does not broadcast to x[idx]'s dimension {} of size {b}",
                    y.ty,
                    off + k
                ));
            }
        }
    }
    Ok(x.ty.clone())
}

/// The output type of `BooleanMask(x, mask)`: a `k`-d boolean mask selects
/// over `x`'s first `k` dimensions, giving `(count,) + x.shape[k:]` with
/// the count known only at run time.
pub fn mask_type(inputs: &[InputInfo<'_>]) -> Msg {
    let [x, mask] = inputs else {
        return Err(format!("expects 2 inputs (x, mask), got {}", inputs.len()));
    };
    let m = mask.ty;
    if m.dtype != DType::Bool {
        return Err(format!(
            "the mask must be a bool tensor, got {m} (an integer index is take())"
        ));
    }
    if m.ndim() == 0 || m.ndim() > x.ty.ndim() {
        return Err(format!(
            "the mask {m} must have between 1 and {} dimensions (x is {})",
            x.ty.ndim(),
            x.ty
        ));
    }
    for (d, (&a, &b)) in m.shape.iter().zip(&x.ty.shape).enumerate() {
        if let (Some(a), Some(b)) = (a, b) {
            if a != b {
                return Err(format!(
                    "the mask {m} does not match x {} in dimension {d}: {a} and {b}",
                    x.ty
                ));
            }
        }
    }
    let mut shape = vec![None];
    shape.extend_from_slice(&x.ty.shape[m.ndim()..]);
    Ok(TensorType::new(x.ty.dtype, shape))
}

/// The output type of `Join{axis}(inputs...)`: one dtype and ndim for all
/// inputs; the axis size is the sum of the inputs' (when all are known),
/// every other size is the one size all inputs must have.
pub fn join_type(axis: usize, inputs: &[InputInfo<'_>]) -> Msg {
    let Some(first) = inputs.first() else {
        return Err("expects at least one input".to_string());
    };
    let (dtype, ndim) = (first.ty.dtype, first.ty.ndim());
    if axis >= ndim {
        return Err(format!("axis {axis} is out of range for {}-d inputs", ndim));
    }
    let mut shape = first.ty.shape.clone();
    for (k, i) in inputs.iter().enumerate().skip(1) {
        if i.ty.ndim() != ndim {
            return Err(format!(
                "all inputs must have {ndim} dimensions as input 0 {}, input {k} is {}",
                first.ty, i.ty
            ));
        }
        if i.ty.dtype != dtype {
            return Err(format!(
                "all inputs must have one dtype (concatenate() casts them), input 0 is {} and input {k} is {}",
                first.ty, i.ty
            ));
        }
        for (d, (out, &size)) in shape.iter_mut().zip(&i.ty.shape).enumerate() {
            if d == axis {
                *out = match (*out, size) {
                    (Some(a), Some(b)) => a.checked_add(b),
                    _ => None,
                };
                continue;
            }
            match (*out, size) {
                (Some(a), Some(b)) if a != b => {
                    return Err(format!(
                        "inputs differ in dimension {d} (not the axis {axis}): {} and {}",
                        first.ty, i.ty
                    ))
                }
                (None, Some(b)) => *out = Some(b),
                _ => {}
            }
        }
    }
    Ok(TensorType::new(dtype, shape))
}

/// The output types of `Split{axis, n}(x, sizes)`: `sizes` is a 1-d integer
/// vector of `n` entries; a constant one gives static sizes, which must be
/// non-negative and sum to `x`'s axis size when that is known.
pub fn split_types(
    axis: usize,
    n: usize,
    inputs: &[InputInfo<'_>],
) -> std::result::Result<Vec<TensorType>, String> {
    let [x, sizes] = inputs else {
        return Err(format!("expects 2 inputs (x, sizes), got {}", inputs.len()));
    };
    if n == 0 || n > MAX_SPLIT {
        return Err(format!(
            "must produce between 1 and {MAX_SPLIT} outputs, not {n}"
        ));
    }
    if axis >= x.ty.ndim() {
        return Err(format!("axis {axis} is out of range for {}", x.ty));
    }
    let s = sizes.ty;
    if s.ndim() != 1 || !s.dtype.is_int() || s.shape[0].is_some_and(|m| m != n) {
        return Err(format!(
            "the sizes must be a 1-d integer vector of length {n}, got {s}"
        ));
    }
    let known: Option<Vec<usize>> = match sizes.value {
        Some(v) => {
            let vals: Vec<i64> = v.to_i64_array().iter().copied().collect();
            Some(split_sizes(&vals, n, x.ty.shape[axis])?)
        }
        None => None,
    };
    Ok((0..n)
        .map(|k| {
            let mut shape = x.ty.shape.clone();
            shape[axis] = known.as_ref().map(|v| v[k]);
            TensorType::new(x.ty.dtype, shape)
        })
        .collect())
}

/// Checks split sizes against the number of outputs `n` and, when known,
/// the length of the split axis: each non-negative, summing to the length.
/// Shared by type inference, `perform` and the linker.
pub fn split_sizes(
    sizes: &[i64],
    n: usize,
    axis_len: Option<usize>,
) -> std::result::Result<Vec<usize>, String> {
    if sizes.len() != n {
        return Err(format!("{} sizes {sizes:?} for {n} outputs", sizes.len()));
    }
    if let Some(&bad) = sizes.iter().find(|&&s| s < 0) {
        return Err(format!("negative size {bad} in {sizes:?}"));
    }
    let total = sizes.iter().try_fold(0u64, |a, &s| a.checked_add(s as u64));
    if let Some(len) = axis_len {
        if total != Some(len as u64) {
            return Err(format!(
                "sizes {sizes:?} do not sum to the axis length {len}"
            ));
        }
    }
    Ok(sizes.iter().map(|&s| s as usize).collect())
}

/// The position along an axis of length `len` that the unsigned index `i`
/// names, or the message of the out-of-range error (as [`normalize_index`]).
pub fn normalize_unsigned_index(
    i: u64,
    len: usize,
    axis: usize,
) -> std::result::Result<usize, String> {
    match usize::try_from(i) {
        Ok(j) if j < len => Ok(j),
        _ => Err(format!(
            "index {i} is out of bounds for axis {axis} with size {len}"
        )),
    }
}

/// The position along an axis of length `len` that index `i` names
/// (negative indices count from the end, as numpy), or the message of the
/// out-of-range error. Shared by `perform` and the linker.
pub fn normalize_index(i: i64, len: usize, axis: usize) -> std::result::Result<usize, String> {
    let n = len as i64;
    let j = if i < 0 { i.wrapping_add(n) } else { i };
    if (0..n).contains(&j) {
        Ok(j as usize)
    } else {
        Err(format!(
            "index {i} is out of bounds for axis {axis} with size {len}"
        ))
    }
}
