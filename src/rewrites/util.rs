//! Helpers shared by the rewrite library: building element-wise nodes with
//! numpy-style ndim alignment inside a FunctionGraph, reading scalar
//! constants, and restoring a node's output shape with `second` (fill).
//!
//! Every helper creates *detached* nodes (`FunctionGraph::apply`); the
//! navigator that called the rewrite splices them in.

use crate::error::Result;
use crate::graph::{Client, DType, FunctionGraph, NodeId, TensorType, Value, VarId};
use crate::ops::{Op, ScalarOp};

/// `op` applied element-wise to `inputs`, padding lower-ndim inputs with
/// leading broadcastable dimensions (constants are reshaped in place).
pub fn elemwise(fg: &mut FunctionGraph, op: ScalarOp, inputs: &[VarId]) -> Result<VarId> {
    let ndim = inputs.iter().map(|&v| fg.ty(v).ndim()).max().unwrap_or(0);
    let padded: Vec<VarId> = inputs
        .iter()
        .map(|&v| pad_to(fg, v, ndim))
        .collect::<Result<_>>()?;
    fg.apply1(Op::elemwise(op), &padded)
}

/// `v` with leading broadcastable dimensions added up to `ndim`.
pub fn pad_to(fg: &mut FunctionGraph, v: VarId, ndim: usize) -> Result<VarId> {
    let have = fg.ty(v).ndim();
    if have >= ndim {
        return Ok(v);
    }
    let extra = ndim - have;
    if let Some(c) = fg.constant_value(v) {
        let mut shape = vec![1usize; extra];
        shape.extend_from_slice(c.shape());
        let padded = crate::map_value!(c, a => a.clone().into_shape_with_order(ndarray::IxDyn(&shape)).expect("same size"));
        return Ok(fg.constant(padded));
    }
    let order: Vec<Option<usize>> = (0..extra)
        .map(|_| None)
        .chain((0..have).map(Some))
        .collect();
    fg.apply1(
        Op::DimShuffle {
            input_ndim: have,
            new_order: order,
        },
        &[v],
    )
}

/// A 0-d constant of `dtype` holding `v`.
pub fn scalar_const(fg: &mut FunctionGraph, dtype: DType, v: f64) -> VarId {
    fg.constant(Value::scalar_f64(dtype, v))
}

/// The single value of a constant whose elements are all equal
/// (PyTensor's `unique_value`), looking through DimShuffles of constants.
pub fn unique_constant(fg: &FunctionGraph, mut v: VarId) -> Option<f64> {
    loop {
        if let Some(c) = fg.constant_value(v) {
            return c.unique_value();
        }
        match fg.owner_op(v) {
            Some(Op::DimShuffle { .. }) => v = fg.node(fg.owner(v)?).inputs[0],
            _ => return None,
        }
    }
}

/// [`unique_constant`] read exactly as an `i64`, for integer and bool
/// constants (an `i64` beyond 2^53 does not survive a trip through `f64`).
pub fn unique_int_constant(fg: &FunctionGraph, mut v: VarId) -> Option<i64> {
    loop {
        if let Some(c) = fg.constant_value(v) {
            if c.dtype().is_float() {
                return None;
            }
            let a = c.to_i64_array();
            let first = *a.iter().next()?;
            return a.iter().all(|&x| x == first).then_some(first);
        }
        match fg.owner_op(v) {
            Some(Op::DimShuffle { .. }) => v = fg.node(fg.owner(v)?).inputs[0],
            _ => return None,
        }
    }
}

/// True when `v` is a constant whose elements all equal `x`.
pub fn is_constant_equal(fg: &FunctionGraph, v: VarId, x: f64) -> bool {
    unique_constant(fg, v) == Some(x)
}

/// The node computing `v` when it is a plain Elemwise of `op`.
pub fn owner_if(fg: &FunctionGraph, v: VarId, op: ScalarOp) -> Option<NodeId> {
    let n = fg.owner(v)?;
    fg.node(n).op.is_elemwise(op).then_some(n)
}

/// Adjusts `new` so that it can replace a variable of type `want`: casts to
/// its dtype, pads its ndim, and broadcasts it against `shape_from` (with
/// `second`) where its static shape is less specific than `want`'s.
pub fn match_type(
    fg: &mut FunctionGraph,
    new: VarId,
    want: &TensorType,
    shape_from: &[VarId],
) -> Result<VarId> {
    let mut new = new;
    if fg.ty(new).dtype != want.dtype {
        new = fg.apply1(Op::elemwise(ScalarOp::Cast(want.dtype)), &[new])?;
    }
    new = pad_to(fg, new, want.ndim())?;
    for &s in shape_from {
        if fg.ty(new).broadcastable() == want.broadcastable() {
            break;
        }
        let s_ty = fg.ty(s).clone();
        // Only inputs that carry some of the missing (non-broadcastable) dimensions help.
        let helps = (0..want.ndim().min(s_ty.ndim())).any(|d| {
            let d_new = d + want.ndim() - s_ty.ndim();
            !s_ty.is_broadcastable(d)
                && fg.ty(new).is_broadcastable(d_new)
                && !want.is_broadcastable(d_new)
        });
        if helps {
            let s = pad_to(fg, s, want.ndim())?;
            new = fg.apply1(Op::elemwise(ScalarOp::Second), &[s, new])?;
        }
    }
    Ok(new)
}

/// The node clients of `v` (ignoring graph-output uses).
pub fn node_clients(fg: &FunctionGraph, v: VarId) -> impl Iterator<Item = (NodeId, u32)> + '_ {
    fg.clients(v).iter().filter_map(|c| match *c {
        Client::Node(n, i) => Some((n, i)),
        Client::Output(_) => None,
    })
}

/// True when `v` is used by exactly one client (node or output).
pub fn single_client(fg: &FunctionGraph, v: VarId) -> bool {
    fg.clients(v).len() == 1
}

/// `x` when `v` is `-x`: `neg(x)` or `mul(-1, x)` / `mul(x, -1)` (seed 004's `is_neg`).
pub fn is_neg(fg: &FunctionGraph, v: VarId) -> Option<VarId> {
    let n = fg.owner(v)?;
    let node = fg.node(n);
    match node.op.scalar_op()? {
        ScalarOp::Neg => Some(node.inputs[0]),
        ScalarOp::Mul if node.inputs.len() == 2 => {
            let (a, b) = (node.inputs[0], node.inputs[1]);
            if is_constant_equal(fg, a, -1.0) && fg.ty(b) == fg.ty(v) {
                Some(b)
            } else if is_constant_equal(fg, b, -1.0) && fg.ty(a) == fg.ty(v) {
                Some(a)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// `Some(x)` when `v` is a reciprocal of `x` in any of the forms the
/// databases leave it: `reciprocal(x)`, `x ** -1` or `1 / x`.
pub fn reciprocal_of(fg: &FunctionGraph, v: VarId) -> Option<VarId> {
    let node = fg.node(fg.owner(v)?);
    match (node.op.scalar_op()?, node.inputs.as_slice()) {
        (ScalarOp::Reciprocal, &[x]) => Some(x),
        (ScalarOp::Pow, &[x, e]) if unique_constant(fg, e) == Some(-1.0) => Some(x),
        (ScalarOp::TrueDiv, &[one, x]) if is_constant_equal(fg, one, 1.0) => Some(x),
        _ => None,
    }
}

/// Seed 004's `is_exp`: `Some((false, x))` for `exp(x)`, `Some((true, x))` for `-exp(x)`.
pub fn is_exp(fg: &FunctionGraph, v: VarId) -> Option<(bool, VarId)> {
    if let Some(n) = owner_if(fg, v, ScalarOp::Exp) {
        return Some((false, fg.node(n).inputs[0]));
    }
    let inner = is_neg(fg, v)?;
    let n = owner_if(fg, inner, ScalarOp::Exp)?;
    Some((true, fg.node(n).inputs[0]))
}

/// Seed 004's `is_1pexp`: `Some(x)` when `v` is `1 + exp(x)` (in either order).
pub fn is_1pexp(fg: &FunctionGraph, v: VarId) -> Option<VarId> {
    let n = owner_if(fg, v, ScalarOp::Add)?;
    let ins = &fg.node(n).inputs;
    if ins.len() != 2 {
        return None;
    }
    let (one, other) = if is_constant_equal(fg, ins[0], 1.0) {
        (ins[0], ins[1])
    } else if is_constant_equal(fg, ins[1], 1.0) {
        (ins[1], ins[0])
    } else {
        return None;
    };
    let _ = one;
    let e = owner_if(fg, other, ScalarOp::Exp)?;
    Some(fg.node(e).inputs[0])
}

/// `-x` built as `neg(x)`.
pub fn neg(fg: &mut FunctionGraph, x: VarId) -> Result<VarId> {
    fg.apply1(Op::elemwise(ScalarOp::Neg), &[x])
}

/// The operands `vs` for `op` computing a value of `dtype`: unchanged when
/// `op` over them already gives `dtype`, else each cast to `dtype`. Dropping
/// a wider constant operand must not narrow the arithmetic
/// (`x_u8 * y_u8 * 1_i64` multiplies in `i64`, where `u8` would wrap).
pub fn widen_operands(
    fg: &mut FunctionGraph,
    op: ScalarOp,
    vs: &[VarId],
    dtype: DType,
) -> Result<Vec<VarId>> {
    let dtypes: Vec<DType> = vs.iter().map(|&v| fg.ty(v).dtype).collect();
    if op.output_dtype(&dtypes).ok() == Some(dtype) {
        return Ok(vs.to_vec());
    }
    vs.iter()
        .map(|&v| {
            if fg.ty(v).dtype == dtype {
                Ok(v)
            } else {
                unary(fg, ScalarOp::Cast(dtype), v)
            }
        })
        .collect()
}

/// `op(x)` for a unary scalar op.
pub fn unary(fg: &mut FunctionGraph, op: ScalarOp, x: VarId) -> Result<VarId> {
    fg.apply1(Op::elemwise(op), &[x])
}

/// `DimShuffle{order}(v)`, composed with `v`'s own DimShuffle when it has one
/// (so that no DimShuffle of a DimShuffle is built), and `v` itself when the
/// composition is the identity.
pub fn dimshuffle(
    fg: &mut FunctionGraph,
    v: VarId,
    input_ndim: usize,
    order: &[Option<usize>],
) -> Result<VarId> {
    let (src, src_ndim, composed) = match fg.owner(v).map(|n| (n, fg.node(n).op.clone())) {
        Some((
            n,
            Op::DimShuffle {
                input_ndim: nd0,
                new_order: inner,
            },
        )) => (
            fg.node(n).inputs[0],
            nd0,
            order
                .iter()
                .map(|d| d.and_then(|k| inner[k]))
                .collect::<Vec<_>>(),
        ),
        _ => (v, input_ndim, order.to_vec()),
    };
    if composed.len() == src_ndim && composed.iter().enumerate().all(|(k, d)| *d == Some(k)) {
        return Ok(src);
    }
    fg.apply1(
        Op::DimShuffle {
            input_ndim: src_ndim,
            new_order: composed,
        },
        &[src],
    )
}

/// Input `k` of node `n`.
pub fn input(fg: &FunctionGraph, n: NodeId, k: usize) -> VarId {
    fg.node(n).inputs[k]
}

/// Adapts `new` to the type of node `n`'s output (cast, pad, fill from the
/// node's inputs) and returns it as the rule's replacement, or `None` when
/// the types cannot be reconciled.
pub fn finish(fg: &mut FunctionGraph, n: NodeId, new: VarId) -> Result<Option<VarId>> {
    let out_ty = fg.ty(fg.node(n).outputs[0]).clone();
    let ins = fg.node(n).inputs.to_vec();
    let new = match_type(fg, new, &out_ty, &ins)?;
    Ok(out_ty.accepts_replacement(fg.ty(new)).then_some(new))
}
