//! Rules on the arg-reductions (`Op::ArgReduce`), registered by the
//! canonicalize and specialize databases (their `rules()` list them):
//!
//! - `local_argmax_neg` (canonicalize): `argmax(-x)` -> `argmin(x)` and
//!   `argmin(-x)` -> `argmax(x)`, for float `x` only: negation is exact and
//!   reverses the order of floats (NaN stays NaN, `-0 == 0` ties stay
//!   ties), but wraps on integers (`-i64::MIN == i64::MIN`, `-1u8 == 255`).
//! - `local_argmax_exact_cast` (canonicalize): the arg-reduction of a cast
//!   that is exact and order-preserving (a widening: `bool` to anything,
//!   an integer to a wider integer of compatible signedness or to a float
//!   holding all its values, `f32` to `f64`) reduces the cast's input.
//!   Strictly increasing functions that round (`exp`, `log1p`, `x + c`,
//!   `2 * x`, `i64 -> f64`) are deliberately left alone: rounding merges
//!   distinct inputs into ties (`exp(0) == exp(1e-20) == 1`), and a tie
//!   moves the first-occurrence position, so the positions would differ.
//! - `local_max_and_argmax` (specialize): `max(x, axis)` and `argmax(x,
//!   axis)` of one input (and `min` / `argmin`) share one `MaxAndArgmax`
//!   node computing both in one pass. The rule finds or makes the merged
//!   node among `x`'s clients, so whichever of the pair it visits first
//!   creates it and the other reuses it.

use crate::error::Result;
use crate::graph::{Client, DType, FunctionGraph, NodeId, VarId};
use crate::ops::{ArgOp, Op, ReduceOp, ScalarOp};

use super::util::{finish, is_neg};

/// The plain arg-reduction of node `n`: `(op, axis, x)`.
fn plain_argreduce(fg: &FunctionGraph, n: NodeId) -> Option<(ArgOp, Option<usize>, VarId)> {
    match fg.node(n).op {
        Op::ArgReduce {
            op,
            axis,
            with_value: false,
        } => Some((op, axis, fg.node(n).inputs[0])),
        _ => None,
    }
}

/// A detached plain arg-reduction of `x`.
fn argreduce(fg: &mut FunctionGraph, op: ArgOp, axis: Option<usize>, x: VarId) -> Result<VarId> {
    fg.apply1(
        Op::ArgReduce {
            op,
            axis,
            with_value: false,
        },
        &[x],
    )
}

/// `argmax(-x)` -> `argmin(x)`, `argmin(-x)` -> `argmax(x)` for float `x`.
pub fn local_argmax_neg(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some((op, axis, v)) = plain_argreduce(fg, n) else {
        return Ok(None);
    };
    let Some(x) = is_neg(fg, v) else {
        return Ok(None);
    };
    if !fg.ty(x).dtype.is_float() || fg.ty(x).ndim() != fg.ty(v).ndim() {
        return Ok(None);
    }
    let new = argreduce(fg, op.flipped(), axis, x)?;
    finish(fg, n, new)
}

/// True when casting `from` to `to` is exact and order-preserving (every
/// value of `from` is a distinct value of `to`, in the same order).
pub fn is_exact_widening(from: DType, to: DType) -> bool {
    use DType::*;
    match (from, to) {
        _ if from == to => true,
        (Bool, _) => true,
        (U8, U16 | I16 | U32 | I32 | U64 | I64 | F32 | F64) => true,
        (U16, U32 | I32 | U64 | I64 | F32 | F64) => true,
        (U32, U64 | I64 | F64) => true,
        (I8, I16 | I32 | I64 | F32 | F64) => true,
        (I16, I32 | I64 | F32 | F64) => true,
        (I32, I64 | F64) => true,
        (F32, F64) => true,
        _ => false,
    }
}

/// The arg-reduction of an exact widening cast reduces the cast's input.
pub fn local_argmax_exact_cast(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some((op, axis, v)) = plain_argreduce(fg, n) else {
        return Ok(None);
    };
    let Some(c) = fg.owner(v) else {
        return Ok(None);
    };
    let Some(ScalarOp::Cast(to)) = fg.node(c).op.scalar_op() else {
        return Ok(None);
    };
    let x = fg.node(c).inputs[0];
    if !is_exact_widening(fg.ty(x).dtype, to) {
        return Ok(None);
    }
    let new = argreduce(fg, op, axis, x)?;
    finish(fg, n, new)
}

/// True when a `CAReduce` over `axes` of an `ndim`-d input reduces exactly
/// what an arg-reduction over `axis` does.
fn same_reduction(axes: &Option<Vec<usize>>, axis: Option<usize>, ndim: usize) -> bool {
    let all = |a: &Option<Vec<usize>>| match a {
        None => true,
        Some(v) => v.len() == ndim && v.iter().enumerate().all(|(k, &d)| k == d),
    };
    match axis {
        None => all(axes),
        Some(a) => axes.as_deref() == Some(&[a][..]) || (ndim == 1 && all(axes)),
    }
}

/// Merges `max(x, axis)` and `argmax(x, axis)` (or `min` and `argmin`) of
/// one `x` into one `MaxAndArgmax` node: at a plain arg-reduction with a
/// matching `CAReduce` sibling, or at a `CAReduce` with a matching
/// arg-reduction sibling, the node is replaced by the merged node's output
/// (found among `x`'s clients, or made).
pub fn local_max_and_argmax(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let node = fg.node(n);
    let x = node.inputs[0];
    let ndim = fg.ty(x).ndim();
    // What this node is: (op, the arg-reduction's axis if it is one, reduced axes if a CAReduce).
    let (op, is_arg) = match &node.op {
        Op::ArgReduce {
            op,
            with_value: false,
            ..
        } => (*op, true),
        Op::CAReduce {
            op: ReduceOp::Max, ..
        } => (ArgOp::Max, false),
        Op::CAReduce {
            op: ReduceOp::Min, ..
        } => (ArgOp::Min, false),
        _ => return Ok(None),
    };
    let matches = |fg: &FunctionGraph, m: NodeId, want_value: bool| -> Option<Option<usize>> {
        let (this, other) = (&fg.node(n).op, &fg.node(m).op);
        match (this, other) {
            (
                Op::ArgReduce { axis, .. },
                Op::CAReduce {
                    op: r, axes: ax, ..
                },
            ) if !want_value && *r == op.reduce_op() && same_reduction(ax, *axis, ndim) => {
                Some(*axis)
            }
            (
                Op::CAReduce { axes, .. },
                Op::ArgReduce {
                    op: o,
                    axis,
                    with_value,
                },
            ) if *o == op && *with_value == want_value && same_reduction(axes, *axis, ndim) => {
                Some(*axis)
            }
            (
                Op::ArgReduce { axis: a, .. },
                Op::ArgReduce {
                    op: o,
                    axis: b,
                    with_value: true,
                },
            ) if want_value && *o == op && a == b => Some(*a),
            _ => None,
        }
    };
    let siblings: Vec<NodeId> = fg
        .clients(x)
        .iter()
        .filter_map(|c| match *c {
            Client::Node(m, 0) if m != n => Some(m),
            _ => None,
        })
        .collect();
    // A merged node already there: take its output.
    let merged = siblings
        .iter()
        .find_map(|&m| matches(fg, m, true).map(|_| m));
    let merged = match merged {
        Some(m) => m,
        None => {
            // A partner to merge with: make the merged node.
            let Some(axis) = siblings.iter().find_map(|&m| matches(fg, m, false)) else {
                return Ok(None);
            };
            fg.apply(
                Op::ArgReduce {
                    op,
                    axis,
                    with_value: true,
                },
                &[x],
            )?
        }
    };
    let out = fg.node(merged).outputs[usize::from(is_arg)];
    finish(fg, n, out)
}
