//! Rules on the softmax family (`Op::Softmax`), registered by the
//! stabilize database (its `rules()` lists them), after PyTensor's
//! `local_logsoftmax` and `local_softmax_stabilize` family:
//!
//! - `local_log_softmax`: `log(softmax(x, axis))` -> `log_softmax(x, axis)`:
//!   where `softmax` underflows to 0 (`x_i - max < -745`) the original is
//!   `-inf`, the replacement the finite `x_i - max - log(Σ)`.
//! - `local_softmax_recognize`: a hand-written softmax,
//!   `exp(a) / sum(exp(a), axis, keepdims)` (as canonicalized:
//!   `exp(a) / DimShuffle(sum(exp(a)))`), becomes `softmax(x, axis)`, where
//!   `x` is `a` or, when `a` is already the shifted `x - max(x, axis,
//!   keepdims)`, that `x`. The original overflows to `inf / inf = NaN` at
//!   `a = 1e3`; the op shifts by the maximum and stays finite and correct.
//!   Float `a` of the output's dtype only; the reduction and the keepdims
//!   DimShuffle must cover the same axis (or all axes).
//! - `local_exp_log_softmax`: `exp(log_softmax(x))` -> `softmax(x)`.
//! - `local_log_softmax_from_logsumexp` (registered in canonicalize, through
//!   [`canonicalize_rules`]): `x - log(sum(exp(x), axis, keepdims))`, or
//!   `x - logsumexp(x, axis, keepdims)` written with the `LogSumExp` op, ->
//!   `log_softmax(x, axis)`. PyTensor has it in stabilize; here stabilize's
//!   `local_log_sum_exp` would turn the hand-written form into the op or a
//!   max-shifted graph first, so it runs before, in canonicalize. The
//!   original is `inf - inf = NaN` at `x = 1e3`.

use crate::error::Result;
use crate::graph::{FunctionGraph, NodeId, VarId};
use crate::ops::{Op, ReduceOp, ScalarOp};

use super::rule::Rule;
use super::util::{finish, owner_if};
use crate::ops::OpKind;

/// The rule of this file that canonicalize registers (the others are listed
/// by the stabilize database, `stabilize::rules`).
pub fn canonicalize_rules() -> Vec<Rule> {
    vec![Rule {
        name: "local_log_softmax_from_logsumexp",
        tracks: &[OpKind::Elemwise(ScalarOp::Sub)],
        apply: local_log_softmax_from_logsumexp,
        fast_compile: false,
    }]
}

/// `log(softmax(x))` -> `log_softmax(x)`.
pub fn local_log_softmax(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    if !fg.node(n).op.is_elemwise(ScalarOp::Log) {
        return Ok(None);
    }
    let v = fg.node(n).inputs[0];
    let Some(s) = fg.owner(v) else {
        return Ok(None);
    };
    let Op::Softmax { axis, log: false } = fg.node(s).op else {
        return Ok(None);
    };
    let x = fg.node(s).inputs[0];
    let new = fg.apply1(Op::Softmax { axis, log: true }, &[x])?;
    finish(fg, n, new)
}

/// The reductions [`keepdims_reduction`] looks through.
#[derive(Clone, Copy, PartialEq)]
enum Reduction {
    /// A `CAReduce` of this op.
    CAReduce(ReduceOp),
    /// `Op::LogSumExp`.
    LogSumExp,
}

/// When `v` is a `keepdims` DimShuffle of reduction `want` over one axis
/// (or all axes) of an `ndim`-d input: that input and the softmax axis.
fn keepdims_reduction(
    fg: &FunctionGraph,
    v: VarId,
    want: Reduction,
    ndim: usize,
) -> Option<(VarId, Option<usize>)> {
    let d = fg.owner(v)?;
    let Op::DimShuffle { new_order, .. } = &fg.node(d).op else {
        return None;
    };
    let r = fg.owner(fg.node(d).inputs[0])?;
    let axes = match (&fg.node(r).op, want) {
        (Op::CAReduce { op, axes }, Reduction::CAReduce(w)) if *op == w => axes.clone(),
        (Op::LogSumExp { axis }, Reduction::LogSumExp) => axis.map(|a| vec![a]),
        _ => return None,
    };
    if new_order.len() != ndim {
        return None;
    }
    let reduced: Vec<usize> = match axes {
        None => (0..ndim).collect(),
        Some(a) => a,
    };
    // The DimShuffle puts the kept dimensions back in order and a new
    // (broadcastable) one at each reduced axis.
    let mut k = 0;
    for (pos, o) in new_order.iter().enumerate() {
        match o {
            None if reduced.contains(&pos) => {}
            Some(i) if *i == k && !reduced.contains(&pos) => k += 1,
            _ => return None,
        }
    }
    let axis = match reduced.as_slice() {
        [a] => Some(*a),
        r if r.len() == ndim => None,
        _ => return None,
    };
    Some((fg.node(r).inputs[0], axis))
}

/// `exp(a) / sum(exp(a), axis, keepdims)` -> `softmax`.
pub fn local_softmax_recognize(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let node = fg.node(n);
    if !node.op.is_elemwise(ScalarOp::TrueDiv) || node.inputs.len() != 2 {
        return Ok(None);
    }
    let (num, den) = (node.inputs[0], node.inputs[1]);
    let out_ty = fg.ty(node.outputs[0]).clone();
    let Some(e) = owner_if(fg, num, ScalarOp::Exp) else {
        return Ok(None);
    };
    let a = fg.node(e).inputs[0];
    let ndim = fg.ty(a).ndim();
    if fg.ty(a).dtype != out_ty.dtype || !out_ty.dtype.is_float() || fg.ty(num) != &out_ty {
        return Ok(None);
    }
    let Some((summed, axis)) =
        keepdims_reduction(fg, den, Reduction::CAReduce(ReduceOp::Sum), ndim)
    else {
        return Ok(None);
    };
    if summed != num {
        return Ok(None);
    }
    // `a = x - max(x, axis, keepdims)`: the shift is the op's own.
    let x = owner_if(fg, a, ScalarOp::Sub)
        .map(|s| (fg.node(s).inputs[0], fg.node(s).inputs[1]))
        .filter(|&(x, m)| {
            fg.ty(x) == fg.ty(a)
                && keepdims_reduction(fg, m, Reduction::CAReduce(ReduceOp::Max), ndim)
                    == Some((x, axis))
        })
        .map_or(a, |(x, _)| x);
    let axis = if ndim == 1 { Some(0) } else { axis };
    let new = fg.apply1(Op::Softmax { axis, log: false }, &[x])?;
    finish(fg, n, new)
}

/// `exp(log_softmax(x, axis))` -> `softmax(x, axis)`.
pub fn local_exp_log_softmax(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(l) = fg.owner(fg.node(n).inputs[0]) else {
        return Ok(None);
    };
    let Op::Softmax { axis, log: true } = fg.node(l).op else {
        return Ok(None);
    };
    if !fg.node(n).op.is_elemwise(ScalarOp::Exp) {
        return Ok(None);
    }
    let x = fg.node(l).inputs[0];
    let new = fg.apply1(Op::Softmax { axis, log: false }, &[x])?;
    finish(fg, n, new)
}

/// `x - log(sum(exp(x), axis, keepdims))`, or `x - logsumexp(x, axis,
/// keepdims)` with the op, -> `log_softmax(x, axis)` (see the module docs
/// for why in canonicalize). Float `x` of the output's type
/// only; the reduction and the keepdims DimShuffle must cover the same axis
/// (or all axes).
pub fn local_log_softmax_from_logsumexp(
    fg: &mut FunctionGraph,
    n: NodeId,
) -> Result<Option<VarId>> {
    let node = fg.node(n);
    if !node.op.is_elemwise(ScalarOp::Sub) {
        return Ok(None);
    }
    let (x, l) = (node.inputs[0], node.inputs[1]);
    let out_ty = fg.ty(node.outputs[0]).clone();
    if fg.ty(x) != &out_ty || !out_ty.dtype.is_float() {
        return Ok(None);
    }
    let ndim = out_ty.ndim();
    let axis = if let Some((y, axis)) = keepdims_reduction(fg, l, Reduction::LogSumExp, ndim) {
        // `x - logsumexp(x, axis, keepdims)`, as written with the op.
        if y != x {
            return Ok(None);
        }
        axis
    } else {
        let Some(log) = owner_if(fg, l, ScalarOp::Log) else {
            return Ok(None);
        };
        let sum = Reduction::CAReduce(ReduceOp::Sum);
        let Some((e, axis)) = keepdims_reduction(fg, fg.node(log).inputs[0], sum, ndim) else {
            return Ok(None);
        };
        if owner_if(fg, e, ScalarOp::Exp).is_none_or(|ex| fg.node(ex).inputs[0] != x) {
            return Ok(None);
        }
        axis
    };
    let axis = if ndim == 1 { Some(0) } else { axis };
    let new = fg.apply1(Op::Softmax { axis, log: true }, &[x])?;
    finish(fg, n, new)
}
