//! numpy's `matmul` and `tensordot` as graphs of existing ops.
//!
//! `matmul` is `Dot` when neither operand has batch dimensions (so `@` of
//! 1-d and 2-d operands is exactly `dot`), else a `BatchedDot` with 1-d
//! operands promoted to matrices by a `DimShuffle` and the promoted
//! dimension dropped again afterwards. `tensordot` moves the summed axes
//! together (`DimShuffle`), flattens both operands to matrices (`Reshape`),
//! multiplies them with one `Dot`, and reshapes to the free dimensions, as
//! numpy does. Every error names `matmul` or `tensordot` and is raised while
//! building, before any node exists.

use super::Tensor;
use crate::error::{Error, Result};
use crate::graph::{DType, Value};
use crate::ops::Op;

/// numpy's `matmul` (`a @ b`): `dot` for 1-d and 2-d operands; for an
/// operand with more dimensions, a product of stacks of matrices whose
/// leading (batch) dimensions broadcast (see [`Op::BatchedDot`]). A 1-d
/// operand is a row (left) or column (right) vector whose dimension is
/// removed from the result. 0-d operands are an error.
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (na, nb) = (a.ndim(), b.ndim());
    if na == 0 || nb == 0 {
        return Err(Error::ty(
            "matmul",
            format!(
                "operands must have at least 1 dimension, got {} and {}",
                a.ty(),
                b.ty()
            ),
        ));
    }
    if na <= 2 && nb <= 2 {
        return Tensor::apply(Op::Dot, &[a, b]);
    }
    let a2 = if na == 1 {
        a.dimshuffle(&[None, Some(0)])?
    } else {
        a.clone()
    };
    let b2 = if nb == 1 {
        b.dimshuffle(&[Some(0), None])?
    } else {
        b.clone()
    };
    let out = Tensor::apply(Op::BatchedDot, &[&a2, &b2])?;
    if na > 1 && nb > 1 {
        return Ok(out);
    }
    // Drop the promoted (size-1) dimension: -2 for a row, -1 for a column.
    let nd = out.ndim();
    let dropped = if na == 1 { nd - 2 } else { nd - 1 };
    let order: Vec<Option<usize>> = (0..nd).filter(|&d| d != dropped).map(Some).collect();
    out.dimshuffle(&order)
}

/// numpy's `tensordot(a, b, axes=n)`: the sum over the last `n` axes of
/// `a` and the first `n` axes of `b`.
pub fn tensordot(a: &Tensor, b: &Tensor, axes: usize) -> Result<Tensor> {
    if axes > a.ndim() || axes > b.ndim() {
        return Err(Error::ty(
            "tensordot",
            format!(
                "axes={axes} exceeds the dimensions of {} or {}",
                a.ty(),
                b.ty()
            ),
        ));
    }
    let axes_a: Vec<isize> = (a.ndim() - axes..a.ndim()).map(|d| d as isize).collect();
    let axes_b: Vec<isize> = (0..axes).map(|d| d as isize).collect();
    tensordot_axes(a, b, &axes_a, &axes_b)
}

/// numpy's `tensordot(a, b, axes=(axes_a, axes_b))`: the sum over the
/// pairs of axes `axes_a[i]` of `a` and `axes_b[i]` of `b` (negative axes
/// count from the end); the result has `a`'s free axes, then `b`'s, in
/// order. The paired axes must have equal sizes; an axis may appear once.
pub fn tensordot_axes(
    a: &Tensor,
    b: &Tensor,
    axes_a: &[isize],
    axes_b: &[isize],
) -> Result<Tensor> {
    let err = |msg: String| Error::ty("tensordot", msg);
    if axes_a.len() != axes_b.len() {
        return Err(err(format!(
            "the axis lists differ in length: {} and {}",
            axes_a.len(),
            axes_b.len()
        )));
    }
    let norm = |x: &Tensor, axes: &[isize], which: &str| -> Result<Vec<usize>> {
        let nd = x.ndim() as isize;
        let mut out: Vec<usize> = Vec::with_capacity(axes.len());
        for &ax in axes {
            let d = if ax < 0 { ax + nd } else { ax };
            if !(0..nd).contains(&d) {
                return Err(err(format!(
                    "axis {ax} out of range for {which} of type {}",
                    x.ty()
                )));
            }
            if out.contains(&(d as usize)) {
                return Err(err(format!("axis {ax} of {which} repeated")));
            }
            out.push(d as usize);
        }
        Ok(out)
    };
    let (sa, sb) = (norm(a, axes_a, "a")?, norm(b, axes_b, "b")?);
    for (&x, &y) in sa.iter().zip(&sb) {
        if let (Some(p), Some(q)) = (a.ty().shape[x], b.ty().shape[y]) {
            if p != q {
                return Err(err(format!(
                    "summed axes differ in size: axis {x} of {} and axis {y} of {}",
                    a.ty(),
                    b.ty()
                )));
            }
        }
    }
    let free_a: Vec<usize> = (0..a.ndim()).filter(|d| !sa.contains(d)).collect();
    let free_b: Vec<usize> = (0..b.ndim()).filter(|d| !sb.contains(d)).collect();
    let order_a: Vec<Option<usize>> = free_a.iter().chain(&sa).map(|&d| Some(d)).collect();
    let order_b: Vec<Option<usize>> = sb.iter().chain(&free_b).map(|&d| Some(d)).collect();
    let a2 = reshape_to(
        &a.dimshuffle(&order_a)?,
        &[product(a, &free_a)?, product(a, &sa)?],
    )?;
    let b2 = reshape_to(
        &b.dimshuffle(&order_b)?,
        &[product(b, &sb)?, product(b, &free_b)?],
    )?;
    let d = Tensor::apply(Op::Dot, &[&a2, &b2])?;
    let dims: Vec<Dim> = free_a
        .iter()
        .map(|&k| dim(a, k))
        .chain(free_b.iter().map(|&k| dim(b, k)))
        .collect::<Result<_>>()?;
    reshape_to(&d, &dims)
}

/// A size: static, or a 0-d `i64` tensor computed at run time.
enum Dim {
    Static(i64),
    Symbolic(Tensor),
}

/// Dimension `d` of `x`.
fn dim(x: &Tensor, d: usize) -> Result<Dim> {
    Ok(match x.ty().shape[d] {
        Some(n) => Dim::Static(n as i64),
        None => Dim::Symbolic(x.shape_i(d)?),
    })
}

/// The product of dimensions `dims` of `x` (1 for none).
fn product(x: &Tensor, dims: &[usize]) -> Result<Dim> {
    let mut known = 1i64;
    let mut symbolic: Option<Tensor> = None;
    for &d in dims {
        match dim(x, d)? {
            Dim::Static(n) => known *= n,
            Dim::Symbolic(t) => {
                symbolic = Some(match symbolic {
                    None => t,
                    Some(s) => &s * &t,
                })
            }
        }
    }
    Ok(match symbolic {
        None => Dim::Static(known),
        Some(s) if known == 1 => Dim::Symbolic(s),
        Some(s) => Dim::Symbolic(&s * &Tensor::constant(Value::scalar_i64(DType::I64, known))),
    })
}

/// `x` reshaped to `dims`: a constant shape when every size is static, else
/// a shape vector joined from the run-time sizes.
fn reshape_to(x: &Tensor, dims: &[Dim]) -> Result<Tensor> {
    let statics: Option<Vec<i64>> = dims
        .iter()
        .map(|d| match d {
            Dim::Static(n) => Some(*n),
            Dim::Symbolic(_) => None,
        })
        .collect();
    if let Some(s) = statics {
        return x.reshape(&s);
    }
    let parts: Vec<Tensor> = dims
        .iter()
        .map(|d| match d {
            Dim::Static(n) => Tensor::constant(Value::scalar_i64(DType::I64, *n)),
            Dim::Symbolic(t) => t.clone(),
        })
        .map(|t| t.expand_dims(0))
        .collect::<Result<_>>()?;
    let refs: Vec<&Tensor> = parts.iter().collect();
    let shape = Tensor::apply(Op::Join { axis: 0 }, &refs)?;
    Tensor::apply(Op::Reshape { ndim: dims.len() }, &[x, &shape])
}
