//! The `Alloc` rules (PyTensor's `tensor/rewriting/basic.py`): broadcasts
//! made explicit by `alloc(v, *sizes)` removed, merged, or moved past the
//! ops that consume them, so that less is materialised.
//!
//! - `local_useless_alloc` (canonicalize, stabilize, specialize): an
//!   `Alloc` whose value already has the requested shape is the value;
//! - `local_alloc_sink_dimshuffle` (canonicalize, stabilize, specialize):
//!   leading sizes of 1 an `Alloc` adds become a `DimShuffle` of a smaller
//!   `Alloc` (or of the value itself);
//! - `local_merge_alloc` (canonicalize, stabilize, specialize): an `Alloc`
//!   of an `Alloc` is one `Alloc`;
//! - `local_dimshuffle_alloc` (specialize): a `DimShuffle` of an `Alloc`
//!   is an `Alloc` of the shuffled value;
//! - `local_alloc_unary` (specialize): a unary element-wise op of an
//!   `Alloc` is computed on the value, then allocated;
//! - `local_elemwise_alloc` (specialize): an `Alloc` feeding an element-wise
//!   op with other inputs is replaced by its value, the op broadcasting it;
//! - `local_join_of_alloc` (specialize): a join of `Alloc`s that all
//!   broadcast a dimension other than the axis is one `Alloc` of the join
//!   of smaller `Alloc`s.
//!
//! Invariant, where kiln differs from PyTensor (which tags most of these
//! `shape_unsafe`): no rule drops a run-time size check that could fail.
//! An `Alloc` checks that its value broadcasts to its sizes; a rule removes
//! or merges that check only where a size is *proved* equal to the one it
//! would be checked against — the same size variable or equal constants,
//! a constant equal to a static size, or `Shape_i` of the very operand —
//! or where the check moves to an op that performs it just the same. A
//! size mismatch therefore stays a run-time error under every mode.

use crate::error::Result;
use crate::graph::{DType, FunctionGraph, NodeId, Value, VarId};
use crate::ops::{Op, OpKind, ScalarOp};

use super::rule::Rule;
use super::util;

/// `local_useless_alloc`, `local_alloc_sink_dimshuffle` and
/// `local_merge_alloc`: the rules PyTensor registers in canonicalize,
/// stabilize and specialize alike.
pub fn rules() -> Vec<Rule> {
    vec![
        Rule {
            name: "local_useless_alloc",
            tracks: &[OpKind::Alloc],
            apply: local_useless_alloc,
            fast_compile: false,
        },
        Rule {
            name: "local_alloc_sink_dimshuffle",
            tracks: &[OpKind::Alloc],
            apply: local_alloc_sink_dimshuffle,
            fast_compile: false,
        },
        Rule {
            name: "local_merge_alloc",
            tracks: &[OpKind::Alloc],
            apply: local_merge_alloc,
            fast_compile: false,
        },
    ]
}

/// The rules PyTensor registers in specialize only: `local_dimshuffle_alloc`,
/// `local_alloc_unary`, `local_elemwise_alloc`, `local_join_of_alloc`.
pub fn specialize_rules() -> Vec<Rule> {
    vec![
        Rule {
            name: "local_dimshuffle_alloc",
            tracks: &[OpKind::DimShuffle],
            apply: local_dimshuffle_alloc,
            fast_compile: false,
        },
        Rule {
            name: "local_alloc_unary",
            tracks: &[],
            apply: local_alloc_unary,
            fast_compile: false,
        },
        Rule {
            name: "local_elemwise_alloc",
            tracks: &[],
            apply: local_elemwise_alloc,
            fast_compile: false,
        },
        Rule {
            name: "local_join_of_alloc",
            tracks: &[OpKind::Join],
            apply: local_join_of_alloc,
            fast_compile: false,
        },
    ]
}

/// Whether `v` is computed by an `Alloc`.
fn is_alloc(fg: &FunctionGraph, v: VarId) -> bool {
    fg.owner_op(v) == Some(&Op::Alloc)
}

/// The node computing `v` when it is an `Alloc`: `(value, sizes)`.
fn alloc_parts(fg: &FunctionGraph, v: VarId) -> Option<(VarId, Vec<VarId>)> {
    if !is_alloc(fg, v) {
        return None;
    }
    let (value, sizes) = fg.node(fg.owner(v)?).inputs.split_first()?;
    Some((*value, sizes.to_vec()))
}

/// True when the two size variables are provably equal at run time: the
/// same variable, or constants of equal value.
fn same_size(fg: &FunctionGraph, a: VarId, b: VarId) -> bool {
    a == b
        || matches!((util::unique_int_constant(fg, a), util::unique_int_constant(fg, b)), (Some(x), Some(y)) if x == y)
}

/// True when the size variable `s` is provably the run-time size of
/// dimension `d` of `of` (counted in `of`'s own dimensions): a constant
/// equal to its static size, or `Shape_i{d}(of)`.
fn size_of_dim(fg: &FunctionGraph, s: VarId, of: VarId, d: usize) -> bool {
    if let (Some(c), Some(k)) = (util::unique_int_constant(fg, s), fg.ty(of).shape[d]) {
        return c == k as i64;
    }
    match fg.owner(s) {
        Some(n) => {
            let node = fg.node(n);
            node.op == Op::ShapeI(d) && node.inputs.len() == 1 && node.inputs[0] == of
        }
        None => false,
    }
}

/// True when `alloc(value, *sizes)` is provably `value` itself: as many
/// sizes as `value` has dimensions, each proved equal to its dimension.
fn is_useless_alloc(fg: &FunctionGraph, value: VarId, sizes: &[VarId]) -> bool {
    fg.ty(value).ndim() == sizes.len()
        && sizes
            .iter()
            .enumerate()
            .all(|(d, &s)| size_of_dim(fg, s, value, d))
}

/// A 0-d `i64` constant size.
fn size_const(fg: &mut FunctionGraph, n: i64) -> VarId {
    fg.constant(Value::scalar_i64(DType::I64, n))
}

/// `alloc(value, *sizes)`, or `value` when that is provably the same.
fn alloc_or_value(fg: &mut FunctionGraph, value: VarId, sizes: &[VarId]) -> Result<VarId> {
    if is_useless_alloc(fg, value, sizes) {
        return Ok(value);
    }
    let mut ins = vec![value];
    ins.extend_from_slice(sizes);
    fg.apply1(Op::Alloc, &ins)
}

/// `alloc(x, *sizes)` is `x` when every size is proved equal to `x`'s
/// (PyTensor drops it whenever the broadcast patterns agree, which would
/// turn a size mismatch into a value).
pub fn local_useless_alloc(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some((value, sizes)) = alloc_parts(fg, fg.node(n).outputs[0]) else {
        return Ok(None);
    };
    if !is_useless_alloc(fg, value, &sizes) {
        return Ok(None);
    }
    util::finish(fg, n, value)
}

/// `alloc(x, 1, 1, n)` for a 1-d `x` is `alloc(x, n)[None, None, :]`: the
/// leading sizes that are the constant 1 and that `x` does not have become
/// new broadcastable dimensions of a `DimShuffle`, and the `Alloc` left
/// is dropped when it is provably useless.
pub fn local_alloc_sink_dimshuffle(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some((value, sizes)) = alloc_parts(fg, fg.node(n).outputs[0]) else {
        return Ok(None);
    };
    let extra = sizes.len() - fg.ty(value).ndim();
    let ones = sizes[..extra]
        .iter()
        .take_while(|&&s| util::unique_int_constant(fg, s) == Some(1))
        .count();
    if ones == 0 {
        return Ok(None);
    }
    let rest = &sizes[ones..];
    let inner = alloc_or_value(fg, value, rest)?;
    let order: Vec<Option<usize>> = std::iter::repeat_n(None, ones)
        .chain((0..rest.len()).map(Some))
        .collect();
    let new = fg.apply1(
        Op::DimShuffle {
            input_ndim: rest.len(),
            new_order: order,
        },
        &[inner],
    )?;
    util::finish(fg, n, new)
}

/// `alloc(alloc(m, *inner), *outer)` is `alloc(m, *outer)` when, aligned
/// from the right, each inner size is the outer one (the same variable or
/// an equal constant) or the constant 1 over a dimension `m` lacks or has
/// statically of size 1. Any other pair is left alone: PyTensor inserts an
/// `Assert` there, kiln keeps the inner `Alloc`, which checks it.
pub fn local_merge_alloc(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some((a, outer)) = alloc_parts(fg, fg.node(n).outputs[0]) else {
        return Ok(None);
    };
    let Some((m, inner)) = alloc_parts(fg, a) else {
        return Ok(None);
    };
    let m_ty = fg.ty(m).clone();
    let m_off = inner.len() - m_ty.ndim();
    let o_off = outer.len() - inner.len();
    let merges = inner.iter().enumerate().all(|(k, &s_in)| {
        let s_out = outer[o_off + k];
        if same_size(fg, s_in, s_out) {
            return true;
        }
        let m_dim_is_1 = k < m_off || m_ty.is_broadcastable(k - m_off);
        util::unique_int_constant(fg, s_in) == Some(1) && m_dim_is_1
    });
    if !merges {
        return Ok(None);
    }
    let new = alloc_or_value(fg, m, &outer)?;
    util::finish(fg, n, new)
}

/// `alloc(x, n, m).T` is `alloc(x.T, m, n)`, and `alloc(x, n)[None]` is
/// `alloc(x[None], 1, n)`: the `DimShuffle` applies to the value (with
/// `x`'s missing leading dimensions made explicit) and permutes the sizes.
/// A dropped dimension must be statically 1 in the value too, else the
/// value's run-time check there would be lost and the rule does not fire.
pub fn local_dimshuffle_alloc(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Op::DimShuffle { new_order, .. } = fg.node(n).op.clone() else {
        return Ok(None);
    };
    let Some((value, sizes)) = alloc_parts(fg, fg.node(n).inputs[0]) else {
        return Ok(None);
    };
    let ndim = sizes.len();
    let padded_ty_ndim = fg.ty(value).ndim();
    let off = ndim - padded_ty_ndim;
    let kept: Vec<usize> = new_order.iter().flatten().copied().collect();
    let dropped_ok = (0..ndim)
        .filter(|d| !kept.contains(d))
        .all(|d| d < off || fg.ty(value).is_broadcastable(d - off));
    if !dropped_ok {
        return Ok(None);
    }
    let padded = util::pad_to(fg, value, ndim)?;
    let shuffled = util::dimshuffle(fg, padded, ndim, &new_order)?;
    let one = size_const(fg, 1);
    let new_sizes: Vec<VarId> = new_order
        .iter()
        .map(|d| d.map_or(one, |k| sizes[k]))
        .collect();
    let mut ins = vec![shuffled];
    ins.extend(new_sizes);
    let new = fg.apply1(Op::Alloc, &ins)?;
    util::finish(fg, n, new)
}

/// `f(alloc(x, *sizes))` for a unary element-wise `f` is
/// `alloc(f(x), *sizes)`: `f` runs once per element of `x` instead of once
/// per element of the broadcast result.
pub fn local_alloc_unary(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let node = fg.node(n);
    let Some(scalar) = node.op.scalar_op() else {
        return Ok(None);
    };
    if node.inputs.len() != 1 || !matches!(node.op, Op::Elemwise { .. }) {
        return Ok(None);
    }
    let Some((value, sizes)) = alloc_parts(fg, node.inputs[0]) else {
        return Ok(None);
    };
    let out_dtype = fg.ty(node.outputs[0]).dtype;
    let mut fx = util::unary(fg, scalar, value)?;
    if fg.ty(fx).dtype != out_dtype {
        fx = util::unary(fg, ScalarOp::Cast(out_dtype), fx)?;
    }
    let mut ins = vec![fx];
    ins.extend(sizes);
    let new = fg.apply1(Op::Alloc, &ins)?;
    util::finish(fg, n, new)
}

/// `f(alloc(x, *sizes), y)` is `f(x, y)` for an element-wise `f` of two or
/// more inputs, when the op's broadcasting still produces every size the
/// `Alloc` gave and checks what it checked. Per output dimension `d` (with
/// `x`'s missing leading dimensions statically 1), one of:
/// - the size is proved to be `x`'s own there (the `Alloc` broadcast
///   nothing in `d`, and `f` sees the same operand size);
/// - `x` is statically 1 there and the size is the constant 1;
/// - `x` is statically 1 there and the size is proved to be that of an
///   input of `f` that is not an `Alloc` (which then gives the size, and
///   `f` checks every other input against it as before).
///
/// PyTensor drops every `Alloc` input and rebuilds the shape from the
/// `Alloc`s' sizes, without their checks.
pub fn local_elemwise_alloc(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let node = fg.node(n);
    if node.inputs.len() < 2
        || !matches!(node.op, Op::Elemwise { .. })
        || !node.inputs.iter().any(|&i| is_alloc(fg, i))
    {
        return Ok(None);
    }
    let node = node.clone();
    let ndim = fg.ty(node.outputs[0]).ndim();
    let witnesses: Vec<VarId> = node
        .inputs
        .iter()
        .copied()
        .filter(|&i| !is_alloc(fg, i))
        .collect();
    let mut new_inputs = node.inputs.clone();
    let mut changed = false;
    for slot in new_inputs.iter_mut() {
        let Some((value, sizes)) = alloc_parts(fg, *slot) else {
            continue;
        };
        let off = ndim - fg.ty(value).ndim();
        let v_ty = fg.ty(value).clone();
        let droppable = sizes.iter().enumerate().all(|(d, &s)| {
            let x_is_1 = d < off || v_ty.is_broadcastable(d - off);
            if d >= off && size_of_dim(fg, s, value, d - off) {
                return true;
            }
            x_is_1
                && (util::unique_int_constant(fg, s) == Some(1)
                    || witnesses.iter().any(|&w| {
                        let w_off = ndim - fg.ty(w).ndim();
                        d >= w_off && size_of_dim(fg, s, w, d - w_off)
                    }))
        });
        if droppable {
            *slot = value;
            changed = true;
        }
    }
    if !changed {
        return Ok(None);
    }
    let Some(scalar) = node.op.scalar_op() else {
        return Ok(None);
    };
    let new = util::elemwise(fg, scalar, &new_inputs)?;
    util::finish(fg, n, new)
}

/// `concatenate([alloc(a, n, 3), alloc(b, n, 4)], axis=1)` is
/// `alloc(concatenate([alloc(a, 1, 3), alloc(b, 1, 4)], axis=1), n, 7)`
/// when every value broadcasts (is statically 1, the `Alloc`'s size not)
/// in a dimension other than the axis: those dimensions are allocated
/// once, after the join. A lifted dimension must have the same size in
/// every `Alloc` (the same variable or equal constants): PyTensor picks
/// one of them and drops the join's check that they agree.
pub fn local_join_of_alloc(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let node = fg.node(n).clone();
    let Op::Join { axis } = node.op else {
        return Ok(None);
    };
    if node.inputs.len() < 2 {
        return Ok(None);
    }
    let Some(parts) = node
        .inputs
        .iter()
        .map(|&t| alloc_parts(fg, t))
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(None);
    };
    let ndim = fg.ty(node.outputs[0]).ndim();
    let lifted: Vec<usize> = (0..ndim)
        .filter(|&d| d != axis)
        .filter(|&d| {
            parts.iter().zip(&node.inputs).all(|((value, sizes), &t)| {
                let off = ndim - fg.ty(*value).ndim();
                let v_is_1 = d < off || fg.ty(*value).is_broadcastable(d - off);
                v_is_1 && !fg.ty(t).is_broadcastable(d) && same_size(fg, sizes[d], parts[0].1[d])
            })
        })
        .collect();
    if lifted.is_empty() {
        return Ok(None);
    }
    let one = size_const(fg, 1);
    let mut pieces = Vec::with_capacity(parts.len());
    for (value, sizes) in &parts {
        let core = util::pad_to(fg, *value, ndim)?;
        let pre: Vec<VarId> = sizes
            .iter()
            .enumerate()
            .map(|(d, &s)| if lifted.contains(&d) { one } else { s })
            .collect();
        pieces.push(alloc_or_value(fg, core, &pre)?);
    }
    let joined = fg.apply1(Op::Join { axis }, &pieces)?;
    let mut post = Vec::with_capacity(ndim);
    for d in 0..ndim {
        let column: Vec<VarId> = parts.iter().map(|(_, s)| s[d]).collect();
        if d == axis {
            let consts: Option<Vec<i64>> = column
                .iter()
                .map(|&s| util::unique_int_constant(fg, s))
                .collect();
            let total = match consts {
                Some(c) => size_const(fg, c.iter().sum()),
                None => util::elemwise(fg, ScalarOp::Add, &column)?,
            };
            post.push(total);
        } else {
            let pick = column
                .iter()
                .copied()
                .find(|&s| util::unique_int_constant(fg, s).is_some())
                .unwrap_or(column[0]);
            post.push(pick);
        }
    }
    let mut ins = vec![joined];
    ins.extend(post);
    let new = fg.apply1(Op::Alloc, &ins)?;
    util::finish(fg, n, new)
}
