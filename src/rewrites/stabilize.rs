//! The stabilize database: rules that replace numerically fragile
//! expressions by accurate equivalents (`log(1 + exp(x))` by
//! `softplus(x)`, `log(sum(exp(X)))` by the max-shifted form, ...).
//!
//! Each rule must be at least as accurate as what it replaces on every
//! input, including infinities: the max-shifted log-sum-exp guards an
//! infinite maximum, `log(exp(x) + exp(y))` keeps `x = y = ±inf` right.

use crate::error::Result;
use crate::graph::{FunctionGraph, NodeId, VarId};
use crate::ops::{Op, OpKind, ReduceOp, ScalarOp};

use super::mul_tree::{compute_mul, parse_mul_tree, perform_sigm_times_exp, simplify_mul};
use super::rule::Rule;
use super::util::{
    elemwise, is_1pexp, is_constant_equal, is_exp, is_neg, neg, owner_if, reciprocal_of,
    scalar_const, unary,
};
use super::util::{finish, input};

/// Every stabilize rule, in registration order.
pub fn rules() -> Vec<Rule> {
    use ScalarOp::*;
    macro_rules! kinds {
        ($($s:ident),*) => { &[$(OpKind::Elemwise($s)),*] };
    }
    vec![
        Rule {
            name: "local_log_softmax",
            tracks: kinds!(Log),
            apply: super::softmax::local_log_softmax,
            fast_compile: false,
        },
        Rule {
            name: "local_exp_log_softmax",
            tracks: kinds!(Exp),
            apply: super::softmax::local_exp_log_softmax,
            fast_compile: false,
        },
        Rule {
            name: "local_softmax_recognize",
            tracks: kinds!(TrueDiv),
            apply: super::softmax::local_softmax_recognize,
            fast_compile: false,
        },
        Rule {
            name: "local_log1p",
            tracks: kinds!(Log),
            apply: local_log1p,
            fast_compile: false,
        },
        Rule {
            name: "local_expm1",
            tracks: kinds!(Add, Sub),
            apply: local_expm1,
            fast_compile: false,
        },
        Rule {
            name: "local_log_add_exp",
            tracks: kinds!(Log),
            apply: local_log_add_exp,
            fast_compile: false,
        },
        Rule {
            name: "local_log_sum_exp",
            tracks: kinds!(Log),
            apply: local_log_sum_exp,
            fast_compile: false,
        },
        Rule {
            name: "local_exp_over_sum_exp",
            tracks: kinds!(TrueDiv),
            apply: local_exp_over_sum_exp,
            fast_compile: false,
        },
        Rule {
            name: "logsigm_to_softplus",
            tracks: kinds!(Log),
            apply: logsigm_to_softplus,
            fast_compile: false,
        },
        Rule {
            name: "log1msigm_to_softplus",
            tracks: kinds!(Log),
            apply: log1msigm_to_softplus,
            fast_compile: false,
        },
        Rule {
            name: "log1p_neg_sigmoid",
            tracks: kinds!(Log1p),
            apply: log1p_neg_sigmoid,
            fast_compile: false,
        },
        Rule {
            name: "local_log1p_plusminus_exp",
            tracks: kinds!(Log1p),
            apply: local_log1p_plusminus_exp,
            fast_compile: false,
        },
        Rule {
            name: "logmexpm1_to_log1mexp",
            tracks: kinds!(Log),
            apply: logmexpm1_to_log1mexp,
            fast_compile: false,
        },
        Rule {
            name: "local_exp_over_1_plus_exp",
            tracks: kinds!(TrueDiv),
            apply: local_exp_over_1_plus_exp,
            fast_compile: false,
        },
        Rule {
            name: "local_reciprocal_1_plus_exp",
            tracks: kinds!(Reciprocal, Pow, TrueDiv),
            apply: local_reciprocal_1_plus_exp,
            fast_compile: false,
        },
        Rule {
            name: "local_1msigmoid",
            tracks: kinds!(Sub),
            apply: local_1msigmoid,
            fast_compile: false,
        },
        Rule {
            name: "logdiffexp_to_log1mexpdiff",
            tracks: kinds!(Log),
            apply: logdiffexp_to_log1mexpdiff,
            fast_compile: false,
        },
        Rule {
            name: "local_odds_sigmoid",
            tracks: kinds!(TrueDiv),
            apply: local_odds_sigmoid,
            fast_compile: false,
        },
        Rule {
            name: "local_inv_odds_sigmoid",
            tracks: kinds!(Sub, Add),
            apply: local_inv_odds_sigmoid,
            fast_compile: false,
        },
        Rule {
            name: "local_sigmoid_binary_crossentropy",
            tracks: kinds!(Add),
            apply: local_sigmoid_binary_crossentropy,
            fast_compile: false,
        },
        Rule {
            name: "local_sigm_times_exp",
            tracks: kinds!(Mul),
            apply: local_sigm_times_exp,
            fast_compile: false,
        },
    ]
}

/// `log(1 + x) -> log1p(x)` (any add with a constant-1 term) and `log(1 - x) -> log1p(-x)`.
pub fn local_log1p(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let arg = input(fg, n, 0);
    let dtype = fg.ty(arg).dtype;
    if !dtype.is_float() {
        return Ok(None);
    }
    if let Some(a) = owner_if(fg, arg, ScalarOp::Add) {
        let ins = fg.node(a).inputs.to_vec();
        let Some(k) = ins.iter().position(|&i| is_constant_equal(fg, i, 1.0)) else {
            return Ok(None);
        };
        let rest: Vec<VarId> = ins
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != k)
            .map(|(_, &v)| v)
            .collect();
        if rest.is_empty() {
            return Ok(None);
        }
        let x = if rest.len() == 1 {
            rest[0]
        } else {
            elemwise(fg, ScalarOp::Add, &rest)?
        };
        let new = unary(fg, ScalarOp::Log1p, x)?;
        return finish(fg, n, new);
    }
    if let Some(s) = owner_if(fg, arg, ScalarOp::Sub) {
        let (one, x) = (input(fg, s, 0), input(fg, s, 1));
        // `-x` of an integer wraps, and `1 - x` was computed in its dtype.
        if is_constant_equal(fg, one, 1.0) && fg.ty(x).dtype.is_float() {
            let nx = neg(fg, x)?;
            let new = unary(fg, ScalarOp::Log1p, nx)?;
            return finish(fg, n, new);
        }
    }
    Ok(None)
}

/// `exp(x) - 1 -> expm1(x)`, also in the canonical form `add(-1, exp(x), ...)`.
pub fn local_expm1(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let op = fg.node(n).op.scalar_op();
    let ins = fg.node(n).inputs.to_vec();
    if op == Some(ScalarOp::Sub) {
        let Some(e) = owner_if(fg, ins[0], ScalarOp::Exp) else {
            return Ok(None);
        };
        if !is_constant_equal(fg, ins[1], 1.0) {
            return Ok(None);
        }
        let x = input(fg, e, 0);
        let new = unary(fg, ScalarOp::Expm1, x)?;
        return finish(fg, n, new);
    }
    let Some(k) = ins.iter().position(|&i| is_constant_equal(fg, i, -1.0)) else {
        return Ok(None);
    };
    let Some((j, e)) = ins
        .iter()
        .enumerate()
        .find_map(|(j, &i)| owner_if(fg, i, ScalarOp::Exp).map(|e| (j, e)))
    else {
        return Ok(None);
    };
    let x = input(fg, e, 0);
    let em1 = unary(fg, ScalarOp::Expm1, x)?;
    let mut rest: Vec<VarId> = ins
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != k && i != j)
        .map(|(_, &v)| v)
        .collect();
    rest.insert(0, em1);
    let new = if rest.len() == 1 {
        rest[0]
    } else {
        elemwise(fg, ScalarOp::Add, &rest)?
    };
    finish(fg, n, new)
}

/// `log(exp(a) + exp(b) + ...) -> m + log(s(a) + s(b) + ...)` with
/// `m = maximum(a, b, ...)` and `s(p) = switch(isinf(m), exp(m), exp(p - m))`
/// (PyTensor's form): the shift is skipped where `m` is infinite, so
/// `x = y = ±inf` stay right, and the switches inside the sum make the result
/// no longer a `log` of a sum of `exp`s, so the rule does not fire on it again.
pub fn local_log_add_exp(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let arg = input(fg, n, 0);
    let Some(a) = owner_if(fg, arg, ScalarOp::Add) else {
        return Ok(None);
    };
    let ins = fg.node(a).inputs.to_vec();
    if ins.len() < 2 {
        return Ok(None);
    }
    let args: Option<Vec<VarId>> = ins
        .iter()
        .map(|&i| owner_if(fg, i, ScalarOp::Exp).map(|e| input(fg, e, 0)))
        .collect();
    let Some(args) = args else { return Ok(None) };
    let dtype = fg.ty(fg.node(n).outputs[0]).dtype;
    // The shift `x - max` of integers wraps (and of bools is no op).
    if !dtype.is_float() || args.iter().any(|&x| !fg.ty(x).dtype.is_float()) {
        return Ok(None);
    }
    let mut m = args[0];
    for &x in &args[1..] {
        m = elemwise(fg, ScalarOp::Maximum, &[m, x])?;
    }
    let am = unary(fg, ScalarOp::Abs, m)?;
    let inf = scalar_const(fg, dtype, f64::INFINITY);
    let is_inf = elemwise(fg, ScalarOp::Eq, &[am, inf])?;
    let exp_m = unary(fg, ScalarOp::Exp, m)?;
    let terms: Vec<VarId> = args
        .iter()
        .map(|&x| {
            let d = elemwise(fg, ScalarOp::Sub, &[x, m])?;
            let e = unary(fg, ScalarOp::Exp, d)?;
            elemwise(fg, ScalarOp::Switch, &[is_inf, exp_m, e])
        })
        .collect::<Result<_>>()?;
    let s = elemwise(fg, ScalarOp::Add, &terms)?;
    let l = unary(fg, ScalarOp::Log, s)?;
    let new = elemwise(fg, ScalarOp::Add, &[m, l])?;
    finish(fg, n, new)
}

/// `log(sum(exp(X), axes))` -> `logsumexp(X, axis)` ([`Op::LogSumExp`]) when
/// `axes` is one axis or all of them, else `log(sum(exp(X - m), axes)) + m`
/// with `m = max(X, axes)`, where an infinite `m` is replaced by 0 in the
/// shift (PyTensor's form; the op computes the same shift per lane).
/// A DimShuffle between the `log` and the `sum` (`keepdims=True`, or a
/// transpose lifted there by canonicalize) is kept around the result: `log`
/// is element-wise, so `log(D(s)) = D(log(s))` for any DimShuffle `D`.
pub fn local_log_sum_exp(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let mut arg = input(fg, n, 0);
    let mut dimshuffle = None;
    if let Some(d) = fg.owner(arg) {
        if let op @ Op::DimShuffle { .. } = &fg.node(d).op {
            dimshuffle = Some(op.clone());
            arg = input(fg, d, 0);
        }
    }
    let Some(s) = fg.owner(arg) else {
        return Ok(None);
    };
    let Op::CAReduce {
        op: ReduceOp::Sum,
        axes,
    } = fg.node(s).op.clone()
    else {
        return Ok(None);
    };
    let Some(e) = owner_if(fg, input(fg, s, 0), ScalarOp::Exp) else {
        return Ok(None);
    };
    let x = input(fg, e, 0);
    let x_ty = fg.ty(x).clone();
    if !x_ty.dtype.is_float() || is_max_shifted(fg, x) {
        return Ok(None);
    }
    let ndim = x_ty.ndim();
    let lane_axis = match axes.as_deref() {
        None => Some(None),
        Some(a) if a.len() == ndim => Some(None),
        Some(&[a]) => Some(Some(a)),
        Some(_) => None,
    };
    let mut new = match lane_axis {
        // One lane axis (or all elements): the op, which shifts each lane by
        // its own maximum in one native pass.
        Some(axis) => fg.apply1(Op::LogSumExp { axis }, &[x])?,
        None => {
            let (m_safe, m_keep) = max_shift(fg, x, &axes)?;
            let shifted = elemwise(fg, ScalarOp::Sub, &[x, m_keep])?;
            let ex = unary(fg, ScalarOp::Exp, shifted)?;
            let sum = fg.apply1(
                Op::CAReduce {
                    op: ReduceOp::Sum,
                    axes,
                },
                &[ex],
            )?;
            let l = unary(fg, ScalarOp::Log, sum)?;
            elemwise(fg, ScalarOp::Add, &[l, m_safe])?
        }
    };
    if let Some(d) = dimshuffle {
        new = fg.apply1(d, &[new])?;
    }
    finish(fg, n, new)
}

/// The shift of the max-shifted forms: `m = max(X, axes)` with an infinite
/// `m` replaced by 0, and `m` with the reduced axes put back as broadcastable
/// dimensions (to shift `X`).
fn max_shift(
    fg: &mut FunctionGraph,
    x: VarId,
    axes: &Option<Vec<usize>>,
) -> Result<(VarId, VarId)> {
    let x_ty = fg.ty(x).clone();
    let m = fg.apply1(
        Op::CAReduce {
            op: ReduceOp::Max,
            axes: axes.clone(),
        },
        &[x],
    )?;
    let am = unary(fg, ScalarOp::Abs, m)?;
    let inf = scalar_const(fg, x_ty.dtype, f64::INFINITY);
    let is_inf = elemwise(fg, ScalarOp::Eq, &[am, inf])?;
    let zero = scalar_const(fg, x_ty.dtype, 0.0);
    let m_safe = elemwise(fg, ScalarOp::Switch, &[is_inf, zero, m])?;
    let nd = x_ty.ndim();
    let order = reduced_order(nd, axes);
    let kept = order.iter().flatten().count();
    let m_keep = fg.apply1(
        Op::DimShuffle {
            input_ndim: kept,
            new_order: order,
        },
        &[m_safe],
    )?;
    Ok((m_safe, m_keep))
}

/// The DimShuffle order putting the axes reduced by `axes` (`None`: all)
/// of an `nd`-d tensor back as broadcastable dimensions.
fn reduced_order(nd: usize, axes: &Option<Vec<usize>>) -> Vec<Option<usize>> {
    let mut k = 0;
    (0..nd)
        .map(|d| {
            if axes.as_ref().is_none_or(|a| a.contains(&d)) {
                None
            } else {
                k += 1;
                Some(k - 1)
            }
        })
        .collect()
}

/// `(c * exp(X)) / sum(exp(X), axes)[kept]` (the softmax of a log-sum-exp's
/// gradient; `c` optional) `-> (c * exp(X - m)) / sum(exp(X - m), axes)[kept]`
/// with the shift of [`local_log_sum_exp`]: the same ratio, finite where
/// `exp(X)` overflows.
pub fn local_exp_over_sum_exp(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let (num, den) = (input(fg, n, 0), input(fg, n, 1));
    let Some(ds) = fg.owner(den) else {
        return Ok(None);
    };
    let Op::DimShuffle { new_order, .. } = fg.node(ds).op.clone() else {
        return Ok(None);
    };
    let s_var = input(fg, ds, 0);
    let Some(s) = fg.owner(s_var) else {
        return Ok(None);
    };
    let Op::CAReduce {
        op: ReduceOp::Sum,
        axes,
    } = fg.node(s).op.clone()
    else {
        return Ok(None);
    };
    let e = input(fg, s, 0);
    let Some(e_node) = owner_if(fg, e, ScalarOp::Exp) else {
        return Ok(None);
    };
    let x = input(fg, e_node, 0);
    if !fg.ty(x).dtype.is_float()
        || is_max_shifted(fg, x)
        || new_order != reduced_order(fg.ty(x).ndim(), &axes)
    {
        return Ok(None);
    }
    // The numerator: exp(X) itself, or a product with exp(X) as a factor.
    let factors: Vec<VarId> = if num == e {
        vec![e]
    } else {
        match fg.owner(num) {
            Some(m)
                if fg.node(m).op.is_elemwise(ScalarOp::Mul) && fg.node(m).inputs.contains(&e) =>
            {
                fg.node(m).inputs.to_vec()
            }
            _ => return Ok(None),
        }
    };
    let (_, m_keep) = max_shift(fg, x, &axes)?;
    let shifted = elemwise(fg, ScalarOp::Sub, &[x, m_keep])?;
    let e2 = unary(fg, ScalarOp::Exp, shifted)?;
    let s2 = fg.apply1(
        Op::CAReduce {
            op: ReduceOp::Sum,
            axes,
        },
        &[e2],
    )?;
    let ds_op = fg.node(ds).op.clone();
    let den2 = fg.apply1(ds_op, &[s2])?;
    let factors2: Vec<VarId> = factors
        .iter()
        .map(|&f| if f == e { e2 } else { f })
        .collect();
    let num2 = if factors2.len() == 1 {
        factors2[0]
    } else {
        elemwise(fg, ScalarOp::Mul, &factors2)?
    };
    let new = elemwise(fg, ScalarOp::TrueDiv, &[num2, den2])?;
    finish(fg, n, new)
}

/// True for `X - DimShuffle(switch(...))`: the shifted argument this rule
/// itself produces, which must not be shifted again.
fn is_max_shifted(fg: &FunctionGraph, x: VarId) -> bool {
    let Some(sub) = owner_if(fg, x, ScalarOp::Sub) else {
        return false;
    };
    let shift = input(fg, sub, 1);
    let Some(ds) = fg.owner(shift) else {
        return false;
    };
    matches!(fg.node(ds).op, Op::DimShuffle { .. })
        && owner_if(fg, input(fg, ds, 0), ScalarOp::Switch).is_some()
}

/// `log(sigmoid(x)) -> -softplus(-x)`.
pub fn logsigm_to_softplus(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(s) = owner_if(fg, input(fg, n, 0), ScalarOp::Sigmoid) else {
        return Ok(None);
    };
    let x = input(fg, s, 0);
    if !fg.ty(x).dtype.is_float() {
        return Ok(None); // `-x` of an integer wraps; of a bool it is no op
    }
    let nx = neg(fg, x)?;
    let sp = unary(fg, ScalarOp::Softplus, nx)?;
    let new = neg(fg, sp)?;
    finish(fg, n, new)
}

/// `log(1 - sigmoid(x)) -> -softplus(x)`.
pub fn log1msigm_to_softplus(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(d) = owner_if(fg, input(fg, n, 0), ScalarOp::Sub) else {
        return Ok(None);
    };
    if !is_constant_equal(fg, input(fg, d, 0), 1.0) {
        return Ok(None);
    }
    let Some(s) = owner_if(fg, input(fg, d, 1), ScalarOp::Sigmoid) else {
        return Ok(None);
    };
    let x = input(fg, s, 0);
    let sp = unary(fg, ScalarOp::Softplus, x)?;
    let new = neg(fg, sp)?;
    finish(fg, n, new)
}

/// `log1p(-sigmoid(x)) -> -softplus(x)`.
pub fn log1p_neg_sigmoid(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(inner) = is_neg(fg, input(fg, n, 0)) else {
        return Ok(None);
    };
    let Some(s) = owner_if(fg, inner, ScalarOp::Sigmoid) else {
        return Ok(None);
    };
    let x = input(fg, s, 0);
    let sp = unary(fg, ScalarOp::Softplus, x)?;
    let new = neg(fg, sp)?;
    finish(fg, n, new)
}

/// `log1p(exp(x)) -> softplus(x)` and `log1p(-exp(x)) -> log1mexp(x)`.
pub fn local_log1p_plusminus_exp(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let arg = input(fg, n, 0);
    if let Some(e) = owner_if(fg, arg, ScalarOp::Exp) {
        let x = input(fg, e, 0);
        let new = unary(fg, ScalarOp::Softplus, x)?;
        return finish(fg, n, new);
    }
    let Some(inner) = is_neg(fg, arg) else {
        return Ok(None);
    };
    let Some(e) = owner_if(fg, inner, ScalarOp::Exp) else {
        return Ok(None);
    };
    let x = input(fg, e, 0);
    let new = unary(fg, ScalarOp::Log1mexp, x)?;
    finish(fg, n, new)
}

/// `log(-expm1(x)) -> log1mexp(x)`.
pub fn logmexpm1_to_log1mexp(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(inner) = is_neg(fg, input(fg, n, 0)) else {
        return Ok(None);
    };
    let Some(e) = owner_if(fg, inner, ScalarOp::Expm1) else {
        return Ok(None);
    };
    let x = input(fg, e, 0);
    let new = unary(fg, ScalarOp::Log1mexp, x)?;
    finish(fg, n, new)
}

/// `exp(x) / (1 + exp(x)) -> sigmoid(x)`.
pub fn local_exp_over_1_plus_exp(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(e) = owner_if(fg, input(fg, n, 0), ScalarOp::Exp) else {
        return Ok(None);
    };
    let x = input(fg, e, 0);
    let Some(y) = is_1pexp(fg, input(fg, n, 1)) else {
        return Ok(None);
    };
    if x != y {
        return Ok(None);
    }
    let new = unary(fg, ScalarOp::Sigmoid, x)?;
    finish(fg, n, new)
}

/// `1 / (1 + exp(x)) -> sigmoid(-x)`, also as `reciprocal(1 + exp(x))` and
/// `(1 + exp(x)) ** -1`, and scaled: `y / (1 + exp(x)) -> y * sigmoid(-x)`
/// (finite where `exp(x)` overflows only if `y` is: `y / inf` and
/// `y * sigmoid(-inf)` are both 0 for finite `y`).
pub fn local_reciprocal_1_plus_exp(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let out = fg.node(n).outputs[0];
    let (scale, denom) = if let Some(d) = reciprocal_of(fg, out) {
        (None, d)
    } else if fg.node(n).op.is_elemwise(ScalarOp::TrueDiv) {
        (Some(input(fg, n, 0)), input(fg, n, 1))
    } else {
        return Ok(None);
    };
    let Some(x) = is_1pexp(fg, denom).filter(|&x| fg.ty(x).dtype.is_float()) else {
        return Ok(None); // `-x` of an integer wraps; of a bool it is no op
    };
    let nx = neg(fg, x)?;
    let sigmoid = unary(fg, ScalarOp::Sigmoid, nx)?;
    let new = match scale {
        Some(y) => elemwise(fg, ScalarOp::Mul, &[y, sigmoid])?,
        None => sigmoid,
    };
    finish(fg, n, new)
}

/// `1 - sigmoid(x) -> sigmoid(-x)`.
pub fn local_1msigmoid(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    if !is_constant_equal(fg, input(fg, n, 0), 1.0) {
        return Ok(None);
    }
    let Some(s) = owner_if(fg, input(fg, n, 1), ScalarOp::Sigmoid) else {
        return Ok(None);
    };
    let x = input(fg, s, 0);
    if !fg.ty(x).dtype.is_float() {
        return Ok(None); // `-x` of an integer wraps; of a bool it is no op
    }
    let nx = neg(fg, x)?;
    let new = unary(fg, ScalarOp::Sigmoid, nx)?;
    finish(fg, n, new)
}

/// In a product, `exp(x) * sigmoid(-x) -> sigmoid(x)` and
/// `exp(-x) * sigmoid(x) -> sigmoid(-x)` (seed 004's `local_sigm_times_exp`):
/// the product is parsed into a multiplication tree through nested
/// single-client `mul`/`neg` nodes, pairs are replaced anywhere in it, and
/// the simplified tree is rebuilt.
pub fn local_sigm_times_exp(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let out = fg.node(n).outputs[0];
    let mut tree = parse_mul_tree(fg, out);
    if !perform_sigm_times_exp(fg, &mut tree)? {
        return Ok(None);
    }
    let dtype = fg.ty(out).dtype;
    let new = compute_mul(fg, &simplify_mul(tree), dtype)?;
    finish(fg, n, new)
}

/// `log(exp(x) - exp(y))` -> `switch(y == -inf, x, x + log1mexp(y - x))`
/// (PyTensor's `logdiffexp_to_log1mexpdiff`), also from the canonical
/// `add(exp(x), -exp(y))`: the difference of exponentials overflows past
/// 709 and underflows below -745 where the result is representable; the
/// switch keeps `x = y = -inf` (`-inf`, where `x + log1mexp(nan)` would be
/// NaN) and `y = -inf` exact (`x`).
pub fn logdiffexp_to_log1mexpdiff(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let arg = input(fg, n, 0);
    let Some(d) = fg.owner(arg) else {
        return Ok(None);
    };
    let ins = fg.node(d).inputs.to_vec();
    let pair = match (fg.node(d).op.scalar_op(), ins.len()) {
        (Some(ScalarOp::Sub), 2) => match (is_exp(fg, ins[0]), is_exp(fg, ins[1])) {
            (Some((false, x)), Some((false, y))) => Some((x, y)),
            _ => None,
        },
        (Some(ScalarOp::Add), 2) => match (is_exp(fg, ins[0]), is_exp(fg, ins[1])) {
            (Some((false, x)), Some((true, y))) | (Some((true, y)), Some((false, x))) => {
                Some((x, y))
            }
            _ => None,
        },
        _ => None,
    };
    let Some((x, y)) = pair else {
        return Ok(None);
    };
    let dtype = fg.ty(fg.node(n).outputs[0]).dtype;
    if !dtype.is_float() || fg.ty(x).dtype != dtype || fg.ty(y).dtype != dtype {
        return Ok(None);
    }
    let minus_inf = scalar_const(fg, dtype, f64::NEG_INFINITY);
    let y_is_minus_inf = elemwise(fg, ScalarOp::Eq, &[y, minus_inf])?;
    let diff = elemwise(fg, ScalarOp::Sub, &[y, x])?;
    let l = unary(fg, ScalarOp::Log1mexp, diff)?;
    let sum = elemwise(fg, ScalarOp::Add, &[x, l])?;
    let new = elemwise(fg, ScalarOp::Switch, &[y_is_minus_inf, x, sum])?;
    finish(fg, n, new)
}

/// `sigmoid(a) / sigmoid(-a)` -> `exp(a)` (PyTensor's `local_odds_sigmoid`
/// and `local_inv_odds_sigmoid` in the form stabilize sees, after
/// `local_1msigmoid` made `1 - sigmoid(a)` into `sigmoid(-a)`; the
/// unconverted `sigmoid(a) / (1 - sigmoid(a))` too): exact, since
/// `(1 + exp(a)) / (1 + exp(-a)) = exp(a)`, where the quotient of sigmoids
/// is `inf` or 0 once one of them rounds to 1 or underflows (`a` = ±750).
pub fn local_odds_sigmoid(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let (num, den) = (input(fg, n, 0), input(fg, n, 1));
    let Some(sn) = owner_if(fg, num, ScalarOp::Sigmoid) else {
        return Ok(None);
    };
    let a = input(fg, sn, 0);
    let dtype = fg.ty(a).dtype;
    let out = fg.node(n).outputs[0];
    if !dtype.is_float() || fg.ty(out).dtype != dtype {
        return Ok(None);
    }
    let opposite = if let Some(sd) = owner_if(fg, den, ScalarOp::Sigmoid) {
        let b = input(fg, sd, 0);
        is_neg(fg, b) == Some(a) || is_neg(fg, a) == Some(b)
    } else if let Some(d) = owner_if(fg, den, ScalarOp::Sub) {
        is_constant_equal(fg, input(fg, d, 0), 1.0)
            && owner_if(fg, input(fg, d, 1), ScalarOp::Sigmoid)
                .is_some_and(|t| input(fg, t, 0) == a)
    } else {
        false
    };
    if !opposite {
        return Ok(None);
    }
    let new = unary(fg, ScalarOp::Exp, a)?;
    finish(fg, n, new)
}

/// `1 / sigmoid(a) - 1` -> `exp(-a)`: the form canonicalize gives
/// `(1 - sigmoid(a)) / sigmoid(a)` (PyTensor's `local_inv_odds_sigmoid`),
/// also as `add(-1, 1 / sigmoid(a))`, the reciprocal as `reciprocal`,
/// `1 / s` or `s ** -1`. Exact (`1 / sigmoid(a) = 1 + exp(-a)`), where the
/// original cancels to 0 for `a` past 37 instead of `exp(-a)`.
pub fn local_inv_odds_sigmoid(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let ins = fg.node(n).inputs.to_vec();
    if ins.len() != 2 {
        return Ok(None);
    }
    let recip = match fg.node(n).op.scalar_op() {
        Some(ScalarOp::Sub) if is_constant_equal(fg, ins[1], 1.0) => ins[0],
        Some(ScalarOp::Add) if is_constant_equal(fg, ins[0], -1.0) => ins[1],
        Some(ScalarOp::Add) if is_constant_equal(fg, ins[1], -1.0) => ins[0],
        _ => return Ok(None),
    };
    let Some(sg) = reciprocal_of(fg, recip).and_then(|s| owner_if(fg, s, ScalarOp::Sigmoid)) else {
        return Ok(None);
    };
    let a = input(fg, sg, 0);
    let dtype = fg.ty(a).dtype;
    if !dtype.is_float() || fg.ty(fg.node(n).outputs[0]).dtype != dtype {
        return Ok(None);
    }
    let na = neg(fg, a)?;
    let new = unary(fg, ScalarOp::Exp, na)?;
    finish(fg, n, new)
}

/// The two factors of a two-input `mul`.
fn mul_pair(fg: &FunctionGraph, v: VarId) -> Option<(VarId, VarId)> {
    let m = owner_if(fg, v, ScalarOp::Mul)?;
    match fg.node(m).inputs.as_slice() {
        &[a, b] => Some((a, b)),
        _ => None,
    }
}

/// `z` when `v` is `softplus(-z)` (`neg_arg`) or `softplus(z)`.
fn softplus_of(fg: &FunctionGraph, v: VarId, neg_arg: bool) -> Option<VarId> {
    let s = owner_if(fg, v, ScalarOp::Softplus)?;
    let x = input(fg, s, 0);
    if neg_arg {
        is_neg(fg, x)
    } else {
        Some(x)
    }
}

/// `t*softplus(-z) + (1 - t)*softplus(z) -> sigmoid_binary_crossentropy(z, t)`
/// and `t*(-softplus(-z)) + (1 - t)*(-softplus(z)) -> -sigmoid_binary_crossentropy(z, t)`,
/// in any operand order: the binary cross-entropy with logits, which
/// `logsigm_to_softplus` and `log1msigm_to_softplus` leave in the second
/// form from `t*log(sigmoid(z)) + (1 - t)*log(1 - sigmoid(z))`. One exp and
/// one log1p per element instead of two softplus (specialize's shared
/// `softplus(-|z|)` keeps two max, a subtraction and four products), and
/// as accurate: for `t` in [0, 1] the op adds non-negative terms.
pub fn local_sigmoid_binary_crossentropy(
    fg: &mut FunctionGraph,
    n: NodeId,
) -> Result<Option<VarId>> {
    let &[a, b] = fg.node(n).inputs.as_slice() else {
        return Ok(None);
    };
    // (target term, complement term): `t * S1` and `(1 - t) * S2`.
    let matched = [(a, b), (b, a)].into_iter().find_map(|(ta, tb)| {
        let (p, q) = mul_pair(fg, ta)?;
        let (r, s) = mul_pair(fg, tb)?;
        [(p, q), (q, p)].into_iter().find_map(|(t, s1)| {
            [(r, s), (s, r)].into_iter().find_map(|(c, s2)| {
                let d = owner_if(fg, c, ScalarOp::Sub)?;
                (is_constant_equal(fg, input(fg, d, 0), 1.0) && input(fg, d, 1) == t)
                    .then_some((t, s1, s2))
            })
        })
    });
    let Some((t, s1, s2)) = matched else {
        return Ok(None);
    };
    // Positive form, or both softplus negated.
    let (z, negated) = match (softplus_of(fg, s1, true), softplus_of(fg, s2, false)) {
        (Some(z1), Some(z2)) if z1 == z2 => (z1, false),
        _ => {
            let (Some(n1), Some(n2)) = (is_neg(fg, s1), is_neg(fg, s2)) else {
                return Ok(None);
            };
            match (softplus_of(fg, n1, true), softplus_of(fg, n2, false)) {
                (Some(z1), Some(z2)) if z1 == z2 => (z1, true),
                _ => return Ok(None),
            }
        }
    };
    if !fg.ty(z).dtype.is_float() || !fg.ty(t).dtype.is_float() {
        return Ok(None);
    }
    let xent = elemwise(fg, ScalarOp::SigmoidBinaryCrossentropy, &[z, t])?;
    let new = if negated { neg(fg, xent)? } else { xent };
    finish(fg, n, new)
}
