//! Canonicalize rules for advanced indexing and joins (registered in the
//! canonicalize database): a join of one input is that input, inputs
//! statically empty along the join axis are dropped, a split into one part
//! is its input, a reduction along the join axis of inputs of size 1 there
//! is an element-wise op, and a gather (or a full overwrite) through a
//! constant `arange`-like index covering the whole axis is the identity
//! (or `y`).
//!
//! Invariant: a rule never drops a run-time check that could fail: each
//! fires only when the sizes the removed op would check are static (and
//! were therefore checked by type inference), and the replacement has the
//! node's type exactly (these ops never cast). PyTensor's counterparts are
//! `local_join_1`, `local_join_empty`, `local_useless_split`,
//! `local_reduce_join` and
//! `local_useless_subtensor` / `local_useless_inc_subtensor` for advanced
//! indices; the rules deliberately skipped are listed in
//! `src/rewrites/README.md`.

use super::rule::Rule;
use crate::error::Result;
use crate::graph::{FunctionGraph, NodeId, VarId};
use crate::ops::indexing::normalize_index;
use crate::ops::{Op, OpKind, ScalarOp};

use super::util::{dimshuffle, elemwise};

/// The rules of this file.
pub fn rules() -> Vec<Rule> {
    vec![
        Rule {
            name: "local_join_1",
            tracks: &[OpKind::Join],
            apply: local_join_1,
            fast_compile: true,
        },
        Rule {
            name: "local_join_empty",
            tracks: &[OpKind::Join],
            apply: local_join_empty,
            fast_compile: true,
        },
        Rule {
            name: "local_useless_split",
            tracks: &[OpKind::Split],
            apply: local_useless_split,
            fast_compile: true,
        },
        Rule {
            name: "local_reduce_join",
            tracks: &[OpKind::CAReduce],
            apply: local_reduce_join,
            fast_compile: false,
        },
        Rule {
            name: "local_useless_advanced_subtensor1",
            tracks: &[OpKind::AdvancedSubtensor1],
            apply: local_useless_advanced_subtensor1,
            fast_compile: false,
        },
        Rule {
            name: "local_useless_advanced_set_subtensor1",
            tracks: &[OpKind::AdvancedIncSubtensor1],
            apply: local_useless_advanced_set_subtensor1,
            fast_compile: false,
        },
    ]
}

/// The node's single output, when its type accepts `new` as a replacement.
fn replace_if_typed(fg: &FunctionGraph, n: NodeId, new: VarId) -> Option<VarId> {
    let out = fg.node(n).outputs[0];
    fg.ty(out).accepts_replacement(fg.ty(new)).then_some(new)
}

/// `Join{axis}(x)` -> `x`.
pub fn local_join_1(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let node = fg.node(n);
    if !matches!(node.op, Op::Join { .. }) || node.inputs.len() != 1 {
        return Ok(None);
    }
    Ok(replace_if_typed(fg, n, node.inputs[0]))
}

/// `Join{axis}(a, e, b)` -> `Join{axis}(a, b)` where `e` has static size 0
/// along the axis (at least one input is kept, so the rule never empties
/// the join), when the join's type stays the same: `e`'s own sizes are
/// static, so its run-time checks cannot fail.
pub fn local_join_empty(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let node = fg.node(n);
    let Op::Join { axis } = node.op else {
        return Ok(None);
    };
    let ins = node.inputs.to_vec();
    let empty = |v: &VarId| fg.ty(*v).shape[axis] == Some(0) && fg.ty(*v).static_size().is_some();
    let kept: Vec<VarId> = ins.iter().copied().filter(|v| !empty(v)).collect();
    if kept.len() == ins.len() {
        return Ok(None);
    }
    // All empty: keep the first (the join of one input then goes too).
    let kept = match (kept.is_empty(), ins.len()) {
        (true, 1) => return Ok(None),
        (true, _) => vec![ins[0]],
        _ => kept,
    };
    let new = fg.apply1(Op::Join { axis }, &kept)?;
    // Only when the kept inputs still determine every static size (so the
    // run-time checks of the new join are those of the old one).
    let out = fg.node(n).outputs[0];
    Ok((fg.ty(new) == fg.ty(out)).then_some(new))
}

/// `CAReduce{op, axis k}(Join{axis k}(a, b, ...))` -> `op(a', b', ...)`
/// element-wise, `a'` being `a` without its axis `k`, when every joined
/// input has static size 1 along `k` (PyTensor's `local_reduce_join`:
/// `max(stack([x, y]), axis=0)` is `maximum(x, y)`): reducing one element
/// of each input is applying the op across the inputs. The inputs must have
/// the same pattern of static-1 dimensions (so the element-wise op checks
/// exactly the sizes the join checked: it would broadcast a size-1 one the
/// join rejects), and the result the reduction's type (a sum of `i32`
/// accumulates in `i64`; `all` of numbers is not their bitwise `and`).
pub fn local_reduce_join(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Op::CAReduce { op, axes } = fg.node(n).op.clone() else {
        return Ok(None);
    };
    let joined = fg.node(n).inputs[0];
    let Some(j) = fg.owner(joined) else {
        return Ok(None);
    };
    let Op::Join { axis } = fg.node(j).op else {
        return Ok(None);
    };
    let ins = fg.node(j).inputs.to_vec();
    let nd = fg.ty(joined).ndim();
    let over_join_axis = match &axes {
        None => nd == 1,
        Some(a) => a.as_slice() == [axis],
    };
    let ones = |v: VarId| -> Vec<bool> { fg.ty(v).shape.iter().map(|s| *s == Some(1)).collect() };
    let pattern = ones(ins[0]);
    if ins.len() < 2 || !over_join_axis || !pattern[axis] || ins.iter().any(|&v| ones(v) != pattern)
    {
        return Ok(None);
    }
    // The element-wise form computes in the inputs' dtype: only when the
    // reduction does too (not `any` of floats, whose `or` would take float
    // operands, nor a sum of small integers that accumulates wider).
    let out_dtype = fg.ty(fg.node(n).outputs[0]).dtype;
    if fg.ty(joined).dtype != out_dtype {
        return Ok(None);
    }
    let scalar = op.scalar_op();
    let order: Vec<Option<usize>> = (0..nd).filter(|&d| d != axis).map(Some).collect();
    let squeezed = ins
        .iter()
        .map(|&v| dimshuffle(fg, v, nd, &order))
        .collect::<Result<Vec<_>>>()?;
    let new = if matches!(scalar, ScalarOp::Add | ScalarOp::Mul) {
        elemwise(fg, scalar, &squeezed)?
    } else {
        let mut acc = squeezed[0];
        for &v in &squeezed[1..] {
            acc = elemwise(fg, scalar, &[acc, v])?;
        }
        acc
    };
    Ok(replace_if_typed(fg, n, new))
}

/// `Split{axis, n=1}(x, sizes)` -> `x` when `x`'s axis size is static (the
/// constant or run-time size then must be that size: a constant was checked
/// by type inference; a run-time one is kept by not firing).
pub fn local_useless_split(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let node = fg.node(n);
    let Op::Split { axis, n: 1 } = node.op else {
        return Ok(None);
    };
    let (x, sizes) = (node.inputs[0], node.inputs[1]);
    if fg.ty(x).shape[axis].is_none() || fg.constant_value(sizes).is_none() {
        return Ok(None);
    }
    Ok(replace_if_typed(fg, n, x))
}

/// True when `idx` is a constant 1-d index naming every position of an
/// axis of static length `len` in order (`arange(len)`, negative entries
/// allowed: `[-3, 1, 2]` for `len = 3`).
fn is_full_arange(fg: &FunctionGraph, idx: VarId, len: Option<usize>) -> bool {
    let (Some(len), Some(v)) = (len, fg.constant_value(idx)) else {
        return false;
    };
    if v.ndim() != 1 || v.len() != len {
        return false;
    }
    v.to_i64_array()
        .iter()
        .enumerate()
        .all(|(k, &i)| normalize_index(i, len, 0) == Ok(k))
}

/// `take(x, arange(n), axis)` -> `x` where `n` is `x`'s static axis size.
pub fn local_useless_advanced_subtensor1(
    fg: &mut FunctionGraph,
    n: NodeId,
) -> Result<Option<VarId>> {
    let node = fg.node(n);
    let Op::AdvancedSubtensor1 { axis } = node.op else {
        return Ok(None);
    };
    let (x, idx) = (node.inputs[0], node.inputs[1]);
    if !is_full_arange(fg, idx, fg.ty(x).shape[axis]) {
        return Ok(None);
    }
    Ok(replace_if_typed(fg, n, x))
}

/// `advanced_set_subtensor(x, arange(n), y, axis)` -> `y` when `y` has
/// `x`'s type with every size static (so the run-time shape check of `y`
/// against `x[idx]` cannot fail).
pub fn local_useless_advanced_set_subtensor1(
    fg: &mut FunctionGraph,
    n: NodeId,
) -> Result<Option<VarId>> {
    let node = fg.node(n);
    let Op::AdvancedIncSubtensor1 { axis, set: true } = node.op else {
        return Ok(None);
    };
    let (x, y, idx) = (node.inputs[0], node.inputs[1], node.inputs[2]);
    let (tx, ty) = (fg.ty(x), fg.ty(y));
    if tx != ty || tx.static_size().is_none() || !is_full_arange(fg, idx, tx.shape[axis]) {
        return Ok(None);
    }
    Ok(replace_if_typed(fg, n, y))
}
