//! Rules that both the canonicalize and the specialize databases register:
//! DimShuffle merging and lifting (specialize's rules create DimShuffles),
//! removal of inverse pairs (`local_func_inv`), sums of scaled inputs
//! (`local_sum_prod_of_mul_or_div`), sums of broadcasts
//! (`local_sum_of_fill`) and the sizes they ask for (`local_shape_i_lift`),
//! and the fill rules (`local_fill_sink`,
//! `local_fill_shape_source`).
//!
//! They live here, below both database files, so that neither
//! `canonicalize.rs` nor `specialize.rs` imports the other. Each rule obeys
//! the rules for rules of `README.md` in every database that registers it.

use rustc_hash::FxHashSet;

use crate::error::Result;
use crate::graph::{FunctionGraph, NodeId, VarId};
use crate::ops::{Op, OpKind, ReduceOp, ScalarOp};

use super::rule::Rule;
use super::util::{
    dimshuffle, elemwise, finish, input, owner_if, scalar_const, single_client, unique_constant,
};

/// The sum rules both databases register, in this order:
/// `local_sum_prod_of_mul_or_div`, `local_sum_of_fill` and the
/// `local_shape_i_lift` that asks for the counts it needs. In canonicalize
/// too, so that a factor moved out of a sum (`sum(-1 * x) -> -1 * sum(x)`)
/// joins the enclosing mul cluster there: found only in specialize, it
/// would give a product the next canonicalize pass flattens (FAST_RUN not
/// at a fixed point).
pub fn sum_rules() -> [Rule; 3] {
    [
        Rule {
            name: "local_sum_prod_of_mul_or_div",
            tracks: &[OpKind::CAReduce],
            apply: local_sum_prod_of_mul_or_div,
            fast_compile: false,
        },
        Rule {
            name: "local_sum_of_fill",
            tracks: &[OpKind::CAReduce],
            apply: local_sum_of_fill,
            fast_compile: false,
        },
        Rule {
            name: "local_shape_i_lift",
            tracks: &[OpKind::ShapeI],
            apply: local_shape_i_lift,
            fast_compile: false,
        },
    ]
}

/// Merges nested DimShuffles, removes identity ones, and lifts DimShuffles
/// through single-client element-wise ops, as `local_dimshuffle_lift` does
/// in canonicalize: used by specialize, whose rules create DimShuffles.
pub fn local_dimshuffle_merge(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(inner) = fg.owner(fg.node(n).inputs[0]) else {
        return local_dimshuffle_identity(fg, n);
    };
    let lift = matches!(
        fg.node(inner).op,
        Op::DimShuffle { .. } | Op::Elemwise { .. }
    );
    if lift {
        local_dimshuffle_lift(fg, n)
    } else {
        local_dimshuffle_identity(fg, n)
    }
}

fn local_dimshuffle_identity(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Op::DimShuffle {
        input_ndim,
        new_order,
    } = &fg.node(n).op
    else {
        return Ok(None);
    };
    let identity =
        new_order.len() == *input_ndim && new_order.iter().enumerate().all(|(k, d)| *d == Some(k));
    Ok(identity.then(|| fg.node(n).inputs[0]))
}

/// Lifts DimShuffles towards the inputs: merges nested DimShuffles, removes
/// identity ones, and moves a DimShuffle of a single-client Elemwise onto
/// the Elemwise's inputs.
pub fn local_dimshuffle_lift(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Op::DimShuffle {
        input_ndim,
        new_order,
    } = fg.node(n).op.clone()
    else {
        return Ok(None);
    };
    let x = fg.node(n).inputs[0];
    if new_order.len() == input_ndim && new_order.iter().enumerate().all(|(k, d)| *d == Some(k)) {
        return Ok(Some(x));
    }
    let Some(inner) = fg.owner(x) else {
        return Ok(None);
    };
    match fg.node(inner).op.clone() {
        Op::DimShuffle {
            input_ndim: nd0,
            new_order: inner_order,
        } => {
            let composed: Vec<Option<usize>> = new_order
                .iter()
                .map(|d| d.and_then(|k| inner_order[k]))
                .collect();
            let src = fg.node(inner).inputs[0];
            if composed.len() == nd0 && composed.iter().enumerate().all(|(k, d)| *d == Some(k)) {
                return Ok(Some(src));
            }
            fg.apply1(
                Op::DimShuffle {
                    input_ndim: nd0,
                    new_order: composed,
                },
                &[src],
            )
            .map(Some)
        }
        Op::Elemwise { scalar, .. } if single_client(fg, x) => {
            let ins = fg.node(inner).inputs.to_vec();
            let mut lifted = Vec::with_capacity(ins.len());
            for i in ins {
                let ds = Op::DimShuffle {
                    input_ndim,
                    new_order: new_order.clone(),
                };
                lifted.push(fg.apply1(ds, &[i])?);
            }
            fg.apply1(Op::elemwise(scalar), &lifted).map(Some)
        }
        _ => Ok(None),
    }
}

/// Removes a function applied to its inverse: `neg(neg(x))`,
/// `reciprocal(reciprocal(x))`, `invert(invert(x))` (integers and bools),
/// `tanh(arctanh(x))`, `arctanh(tanh(x))`, `sinh(arcsinh(x))`,
/// `arcsinh(sinh(x))`, `cosh(arccosh(x))`.
pub fn local_func_inv(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    use ScalarOp::*;
    let Some(outer) = fg.node(n).op.scalar_op() else {
        return Ok(None);
    };
    let x_in = fg.node(n).inputs[0];
    let Some(inner_node) = fg.owner(x_in) else {
        return Ok(None);
    };
    let Some(inner) = fg.node(inner_node).op.scalar_op() else {
        return Ok(None);
    };
    let pair = matches!(
        (outer, inner),
        (Neg, Neg)
            | (Reciprocal, Reciprocal)
            | (Invert, Invert)
            | (Tanh, ArcTanh)
            | (ArcTanh, Tanh)
            | (Sinh, ArcSinh)
            | (ArcSinh, Sinh)
            | (Cosh, ArcCosh)
    );
    let x = fg.node(inner_node).inputs[0];
    let out_ty = fg.ty(fg.node(n).outputs[0]).clone();
    Ok((pair && out_ty.accepts_replacement(fg.ty(x))).then_some(x))
}

/// `sum(c * X) -> c * sum(X)` and `sum(X / c) -> sum(X) / c` when `c` is
/// broadcastable over every reduced axis (and not an infinite constant, nor
/// a divisor with an infinite reciprocal) (`prod` likewise with `c ** n`
/// only for scalars of known count, so it is left to sums).
pub fn local_sum_prod_of_mul_or_div(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Op::CAReduce {
        op: ReduceOp::Sum,
        axes,
    } = fg.node(n).op.clone()
    else {
        return Ok(None);
    };
    let x = input(fg, n, 0);
    let Some(inner) = fg.owner(x) else {
        return Ok(None);
    };
    let Some(op @ (ScalarOp::Mul | ScalarOp::TrueDiv)) = fg.node(inner).op.scalar_op() else {
        return Ok(None);
    };
    if !fg.ty(x).dtype.is_float() || !single_client(fg, x) {
        return Ok(None);
    }
    let nd = fg.ty(x).ndim();
    let reduced: Vec<usize> = axes.clone().unwrap_or_else(|| (0..nd).collect());
    let ins = fg.node(inner).inputs.to_vec();
    let scalar_like =
        |fg: &FunctionGraph, v: VarId| reduced.iter().all(|&d| fg.ty(v).is_broadcastable(d));
    let candidates: Vec<usize> = match op {
        ScalarOp::Mul => (0..ins.len()).collect(),
        _ => vec![1],
    };
    // Infinite or NaN constants stay inside: `c * sum(X)` is NaN for an empty
    // X when c is infinite, where `sum(c * X)` is 0; so do divisors whose
    // reciprocal is infinite (`sum(X) / 0` is NaN for an empty X, and the
    // mul canonizer folds `/ 0` into `* inf`). (A variable factor that is
    // infinite at run time over an empty X has the same difference, as in
    // PyTensor.)
    let finite = |c: f64| c.is_finite() && (op == ScalarOp::Mul || (1.0 / c).is_finite());
    let outside: Vec<usize> = candidates
        .into_iter()
        .filter(|&k| scalar_like(fg, ins[k]) && unique_constant(fg, ins[k]).is_none_or(finite))
        .collect();
    if outside.is_empty() || (op == ScalarOp::Mul && outside.len() == ins.len()) {
        return Ok(None);
    }
    let inside: Vec<VarId> = ins
        .iter()
        .enumerate()
        .filter(|(k, _)| !outside.contains(k))
        .map(|(_, &v)| v)
        .collect();
    // The sum left inside must accumulate in the original's dtype: a sum of
    // the `i64` factor of `sum(k_i64 * 1.5)` would wrap where the float sum
    // does not (found by the 20,000-case differential run, seed 777).
    let inside_dtypes: Vec<_> = inside.iter().map(|&v| fg.ty(v).dtype).collect();
    if ScalarOp::Mul.output_dtype(&inside_dtypes)? != fg.ty(x).dtype {
        return Ok(None);
    }
    // Drop the reduced (broadcastable) dims of each factor moved outside.
    let order: Vec<Option<usize>> = (0..nd).filter(|d| !reduced.contains(d)).map(Some).collect();
    let mut moved = Vec::new();
    for &k in &outside {
        moved.push(dimshuffle(fg, ins[k], nd, &order)?);
    }
    let inner_val = match (op, inside.len()) {
        (_, 1) => inside[0],
        (ScalarOp::Mul, _) => elemwise(fg, ScalarOp::Mul, &inside)?,
        _ => unreachable!("a division keeps its numerator inside"),
    };
    let s = fg.apply1(
        Op::CAReduce {
            op: ReduceOp::Sum,
            axes,
        },
        &[inner_val],
    )?;
    // Constants first, as the canonical form has them; variables after the sum.
    let new = if op == ScalarOp::Mul {
        let (mut all, vars): (Vec<VarId>, Vec<VarId>) = moved
            .into_iter()
            .partition(|&v| unique_constant(fg, v).is_some());
        all.push(s);
        all.extend(vars);
        elemwise(fg, ScalarOp::Mul, &all)?
    } else {
        let mut all = vec![s];
        all.extend(moved);
        elemwise(fg, ScalarOp::TrueDiv, &all)?
    };
    finish(fg, n, new)
}

/// `f(fill(a, b), c) -> fill(a, f(b, c))`: sinks fills (`second`) out of
/// element-wise ops (canonicalize; and specialize, whose `x - x -> 0` makes
/// fills that `exp(x) * exp(-x)` must fold through).
pub fn local_fill_sink(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(op) = fg.node(n).op.scalar_op() else {
        return Ok(None);
    };
    let from_fill = |i: &VarId| owner_if(fg, *i, ScalarOp::Second).is_some();
    if op == ScalarOp::Second || !fg.node(n).inputs.iter().any(from_fill) {
        return Ok(None);
    }
    let ins = fg.node(n).inputs.to_vec();
    let mut models = Vec::new();
    let mut new_ins = Vec::with_capacity(ins.len());
    for &i in &ins {
        match owner_if(fg, i, ScalarOp::Second) {
            Some(f) => {
                let (a, b) = (fg.node(f).inputs[0], fg.node(f).inputs[1]);
                models.push(a);
                new_ins.push(b);
            }
            None => new_ins.push(i),
        }
    }
    if models.is_empty() {
        return Ok(None);
    }
    let out_ty = fg.ty(fg.node(n).outputs[0]).clone();
    let mut c = fg.apply1(Op::elemwise(op), &new_ins)?;
    for m in models {
        if fg.ty(c).broadcastable() != out_ty.broadcastable() {
            c = fg.apply1(Op::elemwise(ScalarOp::Second), &[m, c])?;
        }
    }
    Ok(out_ty.accepts_replacement(fg.ty(c)).then_some(c))
}

/// `fill(f(x), b) -> fill(x, b)` for a one-input element-wise `f` whose
/// output has `x`'s broadcast pattern: the fill reads only the shape, so
/// `f` need not run (`exp(x) / exp(x)` becomes `fill(x, 1)`, not
/// `fill(exp(x), 1)`).
pub fn local_fill_shape_source(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let (a, b) = (input(fg, n, 0), input(fg, n, 1));
    let Some(f) = fg.owner(a) else {
        return Ok(None);
    };
    if !matches!(fg.node(f).op, Op::Elemwise { .. }) || fg.node(f).inputs.len() != 1 {
        return Ok(None);
    }
    let x = input(fg, f, 0);
    if fg.ty(x).broadcastable() != fg.ty(a).broadcastable() {
        return Ok(None);
    }
    let new = fg.apply1(Op::elemwise(ScalarOp::Second), &[x, b])?;
    finish(fg, n, new)
}

/// `sum(fill(a, v), axes) -> v * n` where `v` is broadcastable over every
/// reduced axis and `n` is the number of elements summed (the product of
/// `a`'s sizes over those axes, static where known): the sum of a broadcast
/// (PyTensor's `local_opt_alloc`). Gradient graphs are full of these: the
/// pullback of `sum(M + x[None, :])` with respect to `x` is
/// `sum(fill(M, 1), axis=0)`, which read all of `M` to count its rows. The
/// result is cast to the sum's dtype and, where the sum's output is larger
/// than `v` in an unreduced dimension, broadcast to it with `Alloc`.
///
/// Integer products wrap as the repeated sum does; a float product rounds
/// once where the sum rounded `n` times. The empty sum is 0 whatever `v`
/// is, where `inf * 0` and `NaN * 0` are NaN: an infinite constant `v` is
/// left alone, and a float variable `v` summed over a run-time count gets
/// `switch(n > 0, v * n, 0)` (PyTensor's `local_opt_alloc` gives NaN there).
pub fn local_sum_of_fill(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Op::CAReduce {
        op: ReduceOp::Sum,
        axes,
    } = fg.node(n).op.clone()
    else {
        return Ok(None);
    };
    let x = input(fg, n, 0);
    let Some(f) = owner_if(fg, x, ScalarOp::Second) else {
        return Ok(None);
    };
    let (a, v) = (input(fg, f, 0), input(fg, f, 1));
    let (a_ty, v_ty) = (fg.ty(a).clone(), fg.ty(v).clone());
    let nd = v_ty.ndim();
    let reduced: Vec<usize> = axes.unwrap_or_else(|| (0..nd).collect());
    if a_ty.ndim() != nd
        || !reduced.iter().all(|&d| v_ty.is_broadcastable(d))
        || unique_constant(fg, v).is_some_and(|c| !c.is_finite())
    {
        return Ok(None);
    }
    let out_ty = fg.ty(fg.node(n).outputs[0]).clone();
    let dt = out_ty.dtype;
    // n: the static sizes folded into one constant, the others as Shape_i.
    let mut known = 1.0f64;
    let mut run_time = Vec::new();
    for &d in &reduced {
        match a_ty.shape[d] {
            Some(k) => known *= k as f64,
            None => run_time.push(fg.apply1(Op::ShapeI(d), &[a])?),
        }
    }
    let count = match run_time.len() {
        0 => None,
        1 => Some(run_time[0]),
        _ => Some(elemwise(fg, ScalarOp::Mul, &run_time)?),
    };
    let kept: Vec<Option<usize>> = (0..nd).filter(|d| !reduced.contains(d)).map(Some).collect();
    let mut value = dimshuffle(fg, v, nd, &kept)?;
    if v_ty.dtype != dt {
        value = fg.apply1(Op::elemwise(ScalarOp::Cast(dt)), &[value])?;
    }
    let mut total = if known == 0.0 {
        // Statically empty: the sum is 0 whatever `v` is.
        scalar_const(fg, dt, 0.0)
    } else {
        let mut factors = Vec::new();
        if known != 1.0 || count.is_none() {
            factors.push(scalar_const(fg, dt, known));
        }
        factors.push(value);
        if let Some(c) = count {
            factors.push(if fg.ty(c).dtype == dt {
                c
            } else {
                fg.apply1(Op::elemwise(ScalarOp::Cast(dt)), &[c])?
            });
        }
        let product = elemwise(fg, ScalarOp::Mul, &factors)?;
        match count {
            Some(c) if dt.is_float() && unique_constant(fg, v).is_none() => {
                let zero = scalar_const(fg, crate::graph::DType::I64, 0.0);
                let some = elemwise(fg, ScalarOp::Gt, &[c, zero])?;
                let nothing = scalar_const(fg, dt, 0.0);
                elemwise(fg, ScalarOp::Switch, &[some, product, nothing])?
            }
            _ => product,
        }
    };
    // Broadcast to the output's shape where `a` gives it and `v` does not.
    let out_dims: Vec<usize> = (0..nd).filter(|d| !reduced.contains(d)).collect();
    if fg.ty(total).broadcastable() != out_ty.broadcastable() {
        let mut ins = vec![total];
        for &d in &out_dims {
            let dim = match (v_ty.is_broadcastable(d), a_ty.is_broadcastable(d)) {
                (false, _) => fg.apply1(Op::ShapeI(d), &[v])?,
                (true, false) => fg.apply1(Op::ShapeI(d), &[a])?,
                (true, true) => scalar_const(fg, crate::graph::DType::I64, 1.0),
            };
            ins.push(dim);
        }
        total = fg.apply1(Op::Alloc, &ins)?;
    }
    finish(fg, n, total)
}

/// `Shape_i{d}` of an element-wise result or of a DimShuffle asks its
/// inputs instead, so that a graph needing only a shape (`local_sum_of_fill`'s
/// counts, `mean`'s gradient) does not compute the array:
/// `Shape_i{d}(f(a, b, c))` is `Shape_i{d}(a, b)`, the size of the
/// broadcast of the inputs that are not statically of size 1 everywhere
/// (those cannot fail the element-wise op's check), which checks them as
/// the op would (so no run-time error is lost: `Shape_i{d}(a)` alone when
/// `a` is the only one); `Shape_i{d}(x.dimshuffle(order))` is
/// `Shape_i{order[d]}(x)` (an added dimension has static size 1, folded by
/// `local_shape_i_static`). The lift goes through nested element-wise ops
/// in one step, to the union of the first non-element-wise values on
/// every path (the broadcast of the union checks what the nested
/// broadcasts checked), and in a `Shape_i` of several inputs each
/// element-wise input is replaced the same way.
pub fn local_shape_i_lift(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Op::ShapeI(d) = fg.node(n).op else {
        return Ok(None);
    };
    let ins = fg.node(n).inputs.clone();
    if let [x] = ins[..] {
        if let Some(Op::DimShuffle { new_order, .. }) = fg.owner_op(x) {
            let Some(k) = new_order[d] else {
                return Ok(None);
            };
            let source = input(fg, fg.owner(x).expect("has an op"), 0);
            let new = fg.apply1(Op::ShapeI(k), &[source])?;
            return finish(fg, n, new);
        }
    }
    // Depth first, left to right, through every element-wise ancestor at
    // once (one rewrite, not one per level): the sources are the first
    // values on each path that are not element-wise results.
    let mut sources: Vec<VarId> = Vec::new();
    let mut lifted = false;
    let mut seen: FxHashSet<VarId> = FxHashSet::default();
    let mut stack: Vec<VarId> = ins.iter().rev().copied().collect();
    while let Some(x) = stack.pop() {
        if !seen.insert(x) || fg.ty(x).broadcastable().iter().all(|&b| b) {
            continue;
        }
        match fg.owner(x) {
            Some(m) if matches!(fg.node(m).op, Op::Elemwise { .. } | Op::Composite { .. }) => {
                lifted = true;
                stack.extend(fg.node(m).inputs.iter().rev());
            }
            _ => sources.push(x),
        }
    }
    if !lifted || sources.is_empty() {
        // Nothing element-wise to look through, or every input is of
        // static size 1 (local_shape_i_static folds the original).
        return Ok(None);
    }
    let new = fg.apply1(Op::ShapeI(d), &sources)?;
    finish(fg, n, new)
}
