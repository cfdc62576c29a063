//! Indexing rewrites (PyTensor's `tensor/rewriting/subtensor.py`),
//! registered in canonicalize:
//!
//! - `local_useless_subtensor`: `x[0:, ::1]` (every entry keeps its whole
//!   dimension, by its constants or by `x`'s static sizes) is `x`;
//! - `local_subtensor_merge`: `x[a][b]` with constant indices is one
//!   `Subtensor` (exactly when the sizes involved are static, else for
//!   non-negative bounds and positive steps, where the composition does
//!   not depend on the size);
//! - `local_subtensor_lift`: `(x + y)[i]` is `x[i] + y[i]` when the
//!   element-wise node has no other client (dimensions an input broadcasts
//!   in are kept whole, or taken at 0 for an integer index);
//! - `local_subtensor_of_dimshuffle`: `x.T[1:]` is `x[:, 1:].T`, so the
//!   view is taken first and further rules see it;
//! - `local_subtensor_of_alloc`: `alloc(v, n, m)[1:]` allocates the
//!   smaller shape directly (when the sliced sizes are static);
//! - `local_useless_inc_subtensor`: a set/inc of the whole of `x` is the
//!   element-wise `second(x, y)` / `x + y` (same run-time shape checks);
//! - `local_shape_i_of_subtensor`: the size of a dimension a `Subtensor`
//!   keeps whole is that of its input (static sizes fold already through
//!   type inference and `local_shape_i_static`).
//!
//! Guards: only constant bounds are rewritten (symbolic bounds are left
//! alone); no rule turns a run-time error (an integer index out of range)
//! into a value, so an integer index is only moved where the size it is
//! checked against stays the same.

use crate::error::Result;
use crate::graph::{FunctionGraph, NodeId, VarId};
use crate::ops::subtensor::{resolve_int, resolve_slice};
use crate::ops::{Bound, IndexEntry, Op, OpKind, ScalarOp};

use super::rule::Rule;
use super::util;

/// The indexing rules (see the module docs).
pub fn rules() -> Vec<Rule> {
    vec![
        Rule {
            name: "local_useless_subtensor",
            tracks: &[OpKind::Subtensor],
            apply: local_useless_subtensor,
            fast_compile: true,
        },
        Rule {
            name: "local_subtensor_merge",
            tracks: &[OpKind::Subtensor],
            apply: local_subtensor_merge,
            fast_compile: false,
        },
        Rule {
            name: "local_subtensor_lift",
            tracks: &[OpKind::Subtensor],
            apply: local_subtensor_lift,
            fast_compile: false,
        },
        Rule {
            name: "local_subtensor_of_dimshuffle",
            tracks: &[OpKind::Subtensor],
            apply: local_subtensor_of_dimshuffle,
            fast_compile: false,
        },
        Rule {
            name: "local_subtensor_of_alloc",
            tracks: &[OpKind::Subtensor],
            apply: local_subtensor_of_alloc,
            fast_compile: false,
        },
        Rule {
            name: "local_useless_inc_subtensor",
            tracks: &[OpKind::IncSubtensor],
            apply: local_useless_inc_subtensor,
            fast_compile: false,
        },
        Rule {
            name: "local_shape_i_of_subtensor",
            tracks: &[OpKind::ShapeI],
            apply: local_shape_i_of_subtensor,
            fast_compile: false,
        },
    ]
}

/// The index of a `Subtensor` node whose bounds are all constants.
fn const_subtensor(fg: &FunctionGraph, n: NodeId) -> Option<Vec<IndexEntry>> {
    match &fg.node(n).op {
        Op::Subtensor { idx } if fg.node(n).inputs.len() == 1 => Some(idx.clone()),
        _ => None,
    }
}

fn konst(b: Option<Bound>) -> Option<i64> {
    match b {
        Some(Bound::Const(c)) => Some(c),
        _ => None,
    }
}

/// True when `e` keeps the whole of a dimension of static size `n`.
fn keeps_whole(e: &IndexEntry, n: Option<usize>) -> bool {
    if e.is_full() {
        return true;
    }
    match (*e, n) {
        (IndexEntry::Slice { start, stop, step }, Some(n)) => {
            matches!(
                resolve_slice(n, konst(start), konst(stop), konst(step)),
                Ok((0, len, 1)) if len == n
            ) || (n == 0 && step.is_none_or(|s| s == Bound::Const(1)))
        }
        _ => false,
    }
}

/// `x[idx]` with every entry keeping its whole dimension is `x`.
pub fn local_useless_subtensor(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(idx) = const_subtensor(fg, n) else {
        return Ok(None);
    };
    let x = fg.node(n).inputs[0];
    let shape = fg.ty(x).shape.clone();
    if idx.iter().zip(&shape).all(|(e, &s)| keeps_whole(e, s)) {
        return util::finish(fg, n, x);
    }
    Ok(None)
}

/// The constant slice `start:stop:step` taking `len` elements from `start`
/// with `step` (numpy's bounds; `stop` omitted where it would be negative).
fn slice_entry(start: usize, len: usize, step: isize) -> IndexEntry {
    let c = |v: i64| Some(Bound::Const(v));
    if len == 0 {
        return IndexEntry::Slice {
            start: c(0),
            stop: c(0),
            step: None,
        };
    }
    let last = start as i64 + (len as i64 - 1) * step as i64;
    let stop = if step > 0 {
        c(last + 1)
    } else if last >= 1 {
        c(last - 1)
    } else {
        None
    };
    IndexEntry::Slice {
        start: c(start as i64),
        stop,
        step: if step == 1 { None } else { c(step as i64) },
    }
}

/// `inner` applied after `outer` on one dimension of static size `n`
/// (`None`: unknown), as one entry, when that can be written exactly.
fn compose(outer: IndexEntry, inner: IndexEntry, n: Option<usize>) -> Option<IndexEntry> {
    if outer.is_full() {
        return Some(inner);
    }
    let IndexEntry::Slice { start, stop, step } = outer else {
        return None;
    };
    let (a, b, s) = (konst(start), konst(stop), konst(step));
    if let Some(n) = n {
        let (s0, len0, st0) = resolve_slice(n, a, b, s).ok()?;
        return match inner {
            IndexEntry::Int(Bound::Const(i)) => {
                let k = resolve_int(len0, i).ok()?;
                Some(IndexEntry::Int(Bound::Const(
                    (s0 as isize + k as isize * st0) as i64,
                )))
            }
            IndexEntry::Slice {
                start: c,
                stop: d,
                step: t,
            } => {
                let (s1, len1, st1) = resolve_slice(len0, konst(c), konst(d), konst(t)).ok()?;
                let start = (s0 as isize + s1 as isize * st0) as usize;
                Some(slice_entry(start, len1, st0 * st1))
            }
            IndexEntry::Int(Bound::Input) => None,
        };
    }
    // Unknown size: non-negative constants and positive steps only, where
    // x[a:b:s][c:d:t] == x[a+c*s : min(b, a+d*s) : s*t].
    let a = a.unwrap_or(0);
    let s = s.unwrap_or(1);
    if a < 0 || s <= 0 || b.is_some_and(|b| b < 0) {
        return None;
    }
    match inner {
        IndexEntry::Int(Bound::Const(i)) if i >= 0 && b.is_none() => Some(IndexEntry::Int(
            Bound::Const(a.checked_add(i.checked_mul(s)?)?),
        )),
        IndexEntry::Slice {
            start: c,
            stop: d,
            step: t,
        } => {
            let (c0, d0) = (konst(c), konst(d));
            if c.is_some() && c0.is_none() || d.is_some() && d0.is_none() {
                return None;
            }
            let c0 = c0.unwrap_or(0);
            let t0 = match t {
                None => 1,
                Some(Bound::Const(t)) if t > 0 => t,
                _ => return None,
            };
            if c0 < 0 || d0.is_some_and(|d| d < 0) {
                return None;
            }
            let new_start = a.checked_add(c0.checked_mul(s)?)?;
            let inner_stop = match d0 {
                Some(d) => Some(a.checked_add(d.checked_mul(s)?)?),
                None => None,
            };
            let new_stop = match (b, inner_stop) {
                (Some(b), Some(d)) => Some(b.min(d)),
                (Some(b), None) => Some(b),
                (None, d) => d,
            };
            let new_step = s.checked_mul(t0)?;
            Some(IndexEntry::Slice {
                start: (new_start != 0).then_some(Bound::Const(new_start)),
                stop: new_stop.map(Bound::Const),
                step: (new_step != 1).then_some(Bound::Const(new_step)),
            })
        }
        _ => None,
    }
}

/// `x[a][b]` with constant indices is one `Subtensor`.
pub fn local_subtensor_merge(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(inner) = const_subtensor(fg, n) else {
        return Ok(None);
    };
    let mid = fg.node(n).inputs[0];
    let Some(m) = fg.owner(mid) else {
        return Ok(None);
    };
    let Some(outer) = const_subtensor(fg, m) else {
        return Ok(None);
    };
    let x = fg.node(m).inputs[0];
    let shape = fg.ty(x).shape.clone();
    // Walk x's dimensions; the inner index addresses the kept ones.
    let mut merged = Vec::with_capacity(shape.len());
    let mut k = 0;
    for (d, &size) in shape.iter().enumerate() {
        let o = outer.get(d).copied().unwrap_or(IndexEntry::FULL);
        if let IndexEntry::Int(_) = o {
            merged.push(o);
            continue;
        }
        let i = inner.get(k).copied().unwrap_or(IndexEntry::FULL);
        k += 1;
        let Some(e) = compose(o, i, size) else {
            return Ok(None);
        };
        merged.push(e);
    }
    while merged.last().is_some_and(IndexEntry::is_full) {
        merged.pop();
    }
    let new = fg.apply1(Op::Subtensor { idx: merged }, &[x])?;
    util::finish(fg, n, new)
}

/// `(x + y)[i]` is `x[i] + y[i]` when the element-wise node has no other client.
pub fn local_subtensor_lift(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(idx) = const_subtensor(fg, n) else {
        return Ok(None);
    };
    let e = fg.node(n).inputs[0];
    let Some(m) = fg.owner(e) else {
        return Ok(None);
    };
    let node = fg.node(m).clone();
    if !node.op.is_elementwise() || node.outputs.len() != 1 || fg.clients(e).len() != 1 {
        return Ok(None);
    }
    if !node.op.destroy_map().is_empty() {
        return Ok(None);
    }
    let out_ty = fg.ty(e).clone();
    let mut ins = Vec::with_capacity(node.inputs.len());
    for &v in &node.inputs {
        let vt = fg.ty(v).clone();
        let mine: Vec<IndexEntry> = idx
            .iter()
            .enumerate()
            .map(|(d, &entry)| {
                if vt.is_broadcastable(d) && !out_ty.is_broadcastable(d) {
                    match entry {
                        IndexEntry::Int(_) => IndexEntry::Int(Bound::Const(0)),
                        IndexEntry::Slice { .. } => IndexEntry::FULL,
                    }
                } else {
                    entry
                }
            })
            .collect();
        ins.push(fg.apply1(Op::Subtensor { idx: mine }, &[v])?);
    }
    let new = fg.apply1(node.op.clone(), &ins)?;
    util::finish(fg, n, new)
}

/// `x.dimshuffle(order)[idx]` is `x[idx'].dimshuffle(order')`.
pub fn local_subtensor_of_dimshuffle(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(idx) = const_subtensor(fg, n) else {
        return Ok(None);
    };
    let ds = fg.node(n).inputs[0];
    let Some(m) = fg.owner(ds) else {
        return Ok(None);
    };
    let Op::DimShuffle {
        input_ndim,
        new_order,
    } = fg.node(m).op.clone()
    else {
        return Ok(None);
    };
    let x = fg.node(m).inputs[0];
    let mut x_idx = vec![IndexEntry::FULL; input_ndim];
    // Output dimensions of the new DimShuffle: x's dimension or a new axis.
    let mut kept: Vec<Option<usize>> = Vec::new();
    for (k, d) in new_order.iter().enumerate() {
        let entry = idx.get(k).copied().unwrap_or(IndexEntry::FULL);
        match d {
            Some(d) => {
                x_idx[*d] = entry;
                if !matches!(entry, IndexEntry::Int(_)) {
                    kept.push(Some(*d));
                }
            }
            None => match entry {
                // A new axis has size 1: index 0 / -1 drops it.
                IndexEntry::Int(Bound::Const(0 | -1)) => {}
                IndexEntry::Slice { start, stop, step } => {
                    match resolve_slice(1, konst(start), konst(stop), konst(step)) {
                        Ok((_, 1, _)) => kept.push(None),
                        _ => return Ok(None),
                    }
                }
                _ => return Ok(None),
            },
        }
    }
    // x's dimensions the Subtensor keeps, renumbered.
    let survivors: Vec<usize> = (0..input_ndim)
        .filter(|&d| !matches!(x_idx[d], IndexEntry::Int(_)))
        .collect();
    let order: Vec<Option<usize>> = kept
        .iter()
        .map(|d| d.map(|d| survivors.iter().position(|&s| s == d).expect("kept")))
        .collect();
    while x_idx.last().is_some_and(IndexEntry::is_full) {
        x_idx.pop();
    }
    let sub = fg.apply1(Op::Subtensor { idx: x_idx }, &[x])?;
    let identity =
        order.len() == survivors.len() && order.iter().enumerate().all(|(k, d)| *d == Some(k));
    if identity {
        return util::finish(fg, n, sub);
    }
    let new = fg.apply1(
        Op::DimShuffle {
            input_ndim: survivors.len(),
            new_order: order,
        },
        &[sub],
    )?;
    util::finish(fg, n, new)
}

/// `alloc(v, dims...)[idx]` is an `Alloc` of the selection's shape, when
/// `v` broadcasts over every indexed dimension and each sliced size is static.
pub fn local_subtensor_of_alloc(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(idx) = const_subtensor(fg, n) else {
        return Ok(None);
    };
    let a = fg.node(n).inputs[0];
    let Some(m) = fg.owner(a) else {
        return Ok(None);
    };
    if fg.node(m).op != Op::Alloc {
        return Ok(None);
    }
    let ins = fg.node(m).inputs.clone();
    let (v, dims) = (ins[0], &ins[1..]);
    let (a_ty, out_ty, v_ty) = (
        fg.ty(a).clone(),
        fg.ty(fg.node(n).outputs[0]).clone(),
        fg.ty(v).clone(),
    );
    let off = dims.len() - v_ty.ndim();
    let mut new_dims = Vec::new();
    let mut v_order: Vec<Option<usize>> = Vec::new();
    let mut k = 0; // output dimension of the Subtensor
    for (d, &dim) in dims.iter().enumerate() {
        let entry = idx.get(d).copied().unwrap_or(IndexEntry::FULL);
        let vd = d.checked_sub(off);
        if !entry.is_full() && vd.is_some_and(|i| !v_ty.is_broadcastable(i)) {
            return Ok(None);
        }
        match entry {
            // The index is checked against the size only when it is static.
            IndexEntry::Int(_) if a_ty.shape[d].is_some() => {}
            IndexEntry::Int(_) => return Ok(None),
            e => {
                if e.is_full() {
                    new_dims.push(dim);
                } else {
                    let Some(size) = out_ty.shape[k] else {
                        return Ok(None);
                    };
                    new_dims.push(fg.constant(crate::graph::Value::scalar_i64(
                        crate::graph::DType::I64,
                        size as i64,
                    )));
                }
                k += 1;
                if let Some(i) = vd {
                    v_order.push(Some(i));
                }
            }
        }
    }
    let v2 = if v_order.len() == v_ty.ndim() {
        v
    } else {
        fg.apply1(
            Op::DimShuffle {
                input_ndim: v_ty.ndim(),
                new_order: v_order,
            },
            &[v],
        )?
    };
    let mut alloc_ins = vec![v2];
    alloc_ins.extend(new_dims);
    let new = fg.apply1(Op::Alloc, &alloc_ins)?;
    util::finish(fg, n, new)
}

/// A set / inc of the whole of `x` is element-wise: `second(x, y)` / `x + y`.
pub fn local_useless_inc_subtensor(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let node = fg.node(n).clone();
    let Op::IncSubtensor {
        idx,
        set,
        inplace: false,
    } = &node.op
    else {
        return Ok(None);
    };
    if node.inputs.len() != 2 {
        return Ok(None);
    }
    let (x, y) = (node.inputs[0], node.inputs[1]);
    let shape = fg.ty(x).shape.clone();
    if !idx.iter().zip(&shape).all(|(e, &s)| keeps_whole(e, s)) {
        return Ok(None);
    }
    let dt = fg.ty(x).dtype;
    let y = if fg.ty(y).dtype == dt {
        y
    } else {
        fg.apply1(Op::elemwise(ScalarOp::Cast(dt)), &[y])?
    };
    let op = if *set {
        ScalarOp::Second
    } else {
        ScalarOp::Add
    };
    let new = util::elemwise(fg, op, &[x, y])?;
    util::finish(fg, n, new)
}

/// `shape_i(x[idx], k)` is `shape_i(x, d)` when output dimension `k` is
/// input dimension `d` kept whole.
pub fn local_shape_i_of_subtensor(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Op::ShapeI(k) = fg.node(n).op else {
        return Ok(None);
    };
    let [s] = fg.node(n).inputs[..] else {
        return Ok(None);
    };
    let Some(m) = fg.owner(s) else {
        return Ok(None);
    };
    let Op::Subtensor { idx } = &fg.node(m).op else {
        return Ok(None);
    };
    let x = fg.node(m).inputs[0];
    let shape = fg.ty(x).shape.clone();
    let mut out = 0;
    for (d, &size) in shape.iter().enumerate() {
        let e = idx.get(d).copied().unwrap_or(IndexEntry::FULL);
        if matches!(e, IndexEntry::Int(_)) {
            continue;
        }
        if out == k {
            if !keeps_whole(&e, size) {
                return Ok(None);
            }
            let new = fg.apply1(Op::ShapeI(d), &[x])?;
            return util::finish(fg, n, new);
        }
        out += 1;
    }
    Ok(None)
}
