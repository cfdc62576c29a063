//! Reference `perform` of the data-movement ops of advanced indexing and
//! joining: `AdvancedSubtensor1` (take), `AdvancedIncSubtensor1` (inc /
//! set), `BooleanMask`, `Join` and `Split`.
//!
//! Invariants: every index is checked (through `ops::indexing::normalize_index`,
//! which the linker shares) before any element is read, so an index out of
//! range is an error naming the index and the axis size; shapes computed
//! from run-time values (a mask's shape, split sizes, join inputs) are
//! checked in full and allocations are fallible.

use ndarray::{Axis, IxDyn, Slice};

use crate::error::{Error, Result};
use crate::ops::indexing::{normalize_index, normalize_unsigned_index, split_sizes};
use crate::types::{DType, TensorType, Value};

/// The positions along an axis of length `len` named by the indices in `idx`.
fn positions(name: &str, idx: &Value, len: usize, axis: usize) -> Result<Vec<usize>> {
    if idx.dtype() == DType::U64 {
        return idx
            .to_u64_array()
            .iter()
            .map(|&i| normalize_unsigned_index(i, len, axis))
            .collect::<std::result::Result<_, _>>()
            .map_err(|m| Error::eval(name, m));
    }
    idx.to_i64_array()
        .iter()
        .map(|&i| normalize_index(i, len, axis))
        .collect::<std::result::Result<_, _>>()
        .map_err(|m| Error::eval(name, m))
}

/// `x.shape[:axis] + idx_shape + x.shape[axis+1:]`, checked to be allocatable.
fn gathered_shape(name: &str, x: &Value, idx_shape: &[usize], axis: usize) -> Result<Vec<usize>> {
    let mut shape = x.shape()[..axis].to_vec();
    shape.extend_from_slice(idx_shape);
    shape.extend_from_slice(&x.shape()[axis + 1..]);
    super::array_bytes(name, x.dtype(), &shape)?;
    Ok(shape)
}

/// `take(x, idx, axis)`.
pub fn take(name: &str, axis: usize, x: &Value, idx: &Value) -> Result<Value> {
    let pos = positions(name, idx, x.shape()[axis], axis)?;
    let shape = gathered_shape(name, x, idx.shape(), axis)?;
    Ok(crate::map_value!(x, a => {
        let sel = a.select(Axis(axis), &pos);
        sel.as_standard_layout()
            .into_owned()
            .into_shape_with_order(IxDyn(&shape))
            .expect("same number of elements")
    }))
}

/// `x` with `y` added at (or, with `set`, written to) the sub-arrays at
/// `idx` along `axis`, in index order. `types` are the static types of
/// `(x, y, idx)`: a dimension of `y` broadcasts only when its static size is 1.
pub fn inc(
    name: &str,
    axis: usize,
    set: bool,
    inputs: &[&Value],
    types: &[&TensorType],
) -> Result<Value> {
    let [x, y, idx] = inputs else {
        return Err(Error::eval(
            name,
            format!("expects 3 inputs, got {}", inputs.len()),
        ));
    };
    let pos = positions(name, idx, x.shape()[axis], axis)?;
    let target = gathered_shape(name, x, idx.shape(), axis)?;
    let ys = y.shape();
    let off = target.len().checked_sub(ys.len()).ok_or_else(|| {
        Error::eval(
            name,
            format!("y of shape {ys:?} has more dimensions than x[idx] {target:?}"),
        )
    })?;
    for (k, &n) in ys.iter().enumerate() {
        let bcast = types.get(1).is_some_and(|t| t.is_broadcastable(k));
        if n != target[off + k] && !(bcast && n == 1) {
            return Err(Error::eval(
                name,
                format!(
                    "y of shape {ys:?} does not match x[idx] of shape {target:?} in dimension {}",
                    off + k
                ),
            ));
        }
    }
    // x[idx] with the index dimensions flattened into one.
    let mut flat = x.shape().to_vec();
    flat[axis] = pos.len();
    macro_rules! typed {
        ($a:expr, $b:expr, $add:expr) => {{
            let mut out = $a.as_standard_layout().into_owned();
            let yb = $b
                .broadcast(IxDyn(&target))
                .expect("shapes checked")
                .as_standard_layout()
                .into_owned()
                .into_shape_with_order(IxDyn(&flat))
                .expect("same number of elements");
            for (j, &p) in pos.iter().enumerate() {
                let src = yb.index_axis(Axis(axis), j);
                let mut dst = out.index_axis_mut(Axis(axis), p);
                if set {
                    dst.assign(&src);
                } else {
                    dst.zip_mut_with(&src, |o, &v| *o = $add(*o, v));
                }
            }
            out
        }};
    }
    Ok(match (x, y) {
        (Value::Bool(a), Value::Bool(b)) => Value::Bool(typed!(a, b, |p: bool, q: bool| p | q)),
        (Value::U8(a), Value::U8(b)) => Value::U8(typed!(a, b, u8::wrapping_add)),
        (Value::I8(a), Value::I8(b)) => Value::I8(typed!(a, b, i8::wrapping_add)),
        (Value::I16(a), Value::I16(b)) => Value::I16(typed!(a, b, i16::wrapping_add)),
        (Value::U16(a), Value::U16(b)) => Value::U16(typed!(a, b, u16::wrapping_add)),
        (Value::U32(a), Value::U32(b)) => Value::U32(typed!(a, b, u32::wrapping_add)),
        (Value::U64(a), Value::U64(b)) => Value::U64(typed!(a, b, u64::wrapping_add)),
        (Value::I32(a), Value::I32(b)) => Value::I32(typed!(a, b, i32::wrapping_add)),
        (Value::I64(a), Value::I64(b)) => Value::I64(typed!(a, b, i64::wrapping_add)),
        (Value::F32(a), Value::F32(b)) => Value::F32(typed!(a, b, |p: f32, q: f32| p + q)),
        (Value::F64(a), Value::F64(b)) => Value::F64(typed!(a, b, |p: f64, q: f64| p + q)),
        _ => {
            return Err(Error::eval(
                name,
                format!("y has dtype {} but x has dtype {}", y.dtype(), x.dtype()),
            ))
        }
    })
}

/// `x[mask]` for a boolean mask of `x`'s first `mask.ndim()` dimensions.
pub fn boolean_mask(name: &str, x: &Value, mask: &Value) -> Result<Value> {
    let Value::Bool(m) = mask else {
        return Err(Error::eval(
            name,
            format!("the mask has dtype {}, not bool", mask.dtype()),
        ));
    };
    let k = m.ndim();
    if k == 0 || k > x.ndim() || m.shape() != &x.shape()[..k] {
        return Err(Error::eval(
            name,
            format!(
                "the mask of shape {:?} does not match x of shape {:?} in its first {k} dimension(s)",
                m.shape(),
                x.shape()
            ),
        ));
    }
    let rows: usize = m.len();
    let selected: Vec<usize> = m
        .iter()
        .enumerate()
        .filter_map(|(r, &b)| b.then_some(r))
        .collect();
    let mut flat = vec![rows];
    flat.extend_from_slice(&x.shape()[k..]);
    let mut shape = vec![selected.len()];
    shape.extend_from_slice(&x.shape()[k..]);
    super::array_bytes(name, x.dtype(), &shape)?;
    Ok(crate::map_value!(x, a => {
        let a2 = a
            .as_standard_layout()
            .into_owned()
            .into_shape_with_order(IxDyn(&flat))
            .expect("same number of elements");
        a2.select(Axis(0), &selected)
            .as_standard_layout()
            .into_owned()
            .into_shape_with_order(IxDyn(&shape))
            .expect("same number of elements")
    }))
}

/// `concatenate(inputs, axis)`: the inputs have one dtype and ndim and equal
/// sizes in every dimension but `axis`.
pub fn join(name: &str, axis: usize, inputs: &[&Value]) -> Result<Value> {
    let Some(first) = inputs.first() else {
        return Err(Error::eval(name, "no inputs".to_string()));
    };
    let mut shape = first.shape().to_vec();
    shape[axis] = 0;
    for (k, v) in inputs.iter().enumerate() {
        let same = v.dtype() == first.dtype()
            && v.ndim() == first.ndim()
            && (0..v.ndim()).all(|d| d == axis || v.shape()[d] == first.shape()[d]);
        if !same {
            return Err(Error::eval(
                name,
                format!(
                    "input {k} ({}{:?}) does not match input 0 ({}{:?}) outside axis {axis}",
                    v.dtype(),
                    v.shape(),
                    first.dtype(),
                    first.shape()
                ),
            ));
        }
        shape[axis] += v.shape()[axis];
    }
    super::array_bytes(name, first.dtype(), &shape)?;
    macro_rules! cat {
        ($variant:ident) => {{
            let views: Vec<_> = inputs
                .iter()
                .map(|v| match v {
                    Value::$variant(a) => a.view(),
                    _ => unreachable!("dtypes checked"),
                })
                .collect();
            Value::$variant(
                ndarray::concatenate(Axis(axis), &views)
                    .expect("shapes checked")
                    .as_standard_layout()
                    .into_owned(),
            )
        }};
    }
    Ok(match first {
        Value::Bool(_) => cat!(Bool),
        Value::U8(_) => cat!(U8),
        Value::I8(_) => cat!(I8),
        Value::I16(_) => cat!(I16),
        Value::U16(_) => cat!(U16),
        Value::U32(_) => cat!(U32),
        Value::U64(_) => cat!(U64),
        Value::I32(_) => cat!(I32),
        Value::I64(_) => cat!(I64),
        Value::F32(_) => cat!(F32),
        Value::F64(_) => cat!(F64),
    })
}

/// `x` split along `axis` into `n` consecutive parts of the given sizes.
pub fn split(name: &str, axis: usize, n: usize, x: &Value, sizes: &Value) -> Result<Vec<Value>> {
    let vals: Vec<i64> = sizes.to_i64_array().iter().copied().collect();
    let sizes = split_sizes(&vals, n, Some(x.shape()[axis])).map_err(|m| Error::eval(name, m))?;
    let mut start = 0usize;
    Ok(sizes
        .iter()
        .map(|&s| {
            let part = crate::map_value!(x, a => {
                a.slice_axis(Axis(axis), Slice::from(start..start + s)).to_owned()
            });
            start += s;
            part
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::ArrayD;

    fn v(a: &[f64]) -> Value {
        Value::F64(ArrayD::from_shape_vec(IxDyn(&[a.len()]), a.to_vec()).unwrap())
    }

    #[test]
    fn take_accepts_negative_indices_and_rejects_out_of_range() {
        let x = v(&[1.0, 2.0, 3.0]);
        let idx = Value::I8(ArrayD::from_shape_vec(IxDyn(&[3]), vec![-1, 0, -3]).unwrap());
        let out = take("t", 0, &x, &idx).unwrap();
        assert_eq!(
            out.to_f64_array().iter().copied().collect::<Vec<_>>(),
            [3.0, 1.0, 1.0]
        );
        let bad = Value::I64(ArrayD::from_shape_vec(IxDyn(&[1]), vec![-4]).unwrap());
        let e = take("t", 0, &x, &bad).unwrap_err().to_string();
        assert!(
            e.contains("index -4 is out of bounds for axis 0 with size 3"),
            "{e}"
        );
    }
}
