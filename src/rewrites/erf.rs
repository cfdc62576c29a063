//! Stabilize rules for the error function: complements computed directly
//! (`1 - erf(x)` -> `erfc(x)`, which keeps every digit where `erf(x)` is
//! within rounding of 1), and `log(erfc(x))` and its gradient's
//! `exp(-x²) / erfc(x)` continued by the asymptotic series of `erfc` where
//! `erfc(x)` underflows.
//!
//! Only float arguments are rewritten: the complements negate `x`, which
//! wraps for integers. Every rewrite is at least as accurate as what it
//! replaces on every input, ±inf and NaN included (README rule 2).

use crate::error::Result;
use crate::graph::{Client, DType, FunctionGraph, NodeId, VarId};
use crate::ops::{OpKind, ScalarOp};

use super::rule::Rule;
use super::util::{
    elemwise, finish, input, is_constant_equal, is_neg, neg, owner_if, scalar_const, unary,
    unique_constant,
};

/// Every rule of this file, in registration order (stabilize).
pub fn rules() -> Vec<Rule> {
    vec![
        Rule {
            name: "local_erf_complement",
            tracks: &[
                OpKind::Elemwise(ScalarOp::Add),
                OpKind::Elemwise(ScalarOp::Sub),
            ],
            apply: local_erf_complement,
            fast_compile: false,
        },
        Rule {
            name: "local_log_erfc",
            tracks: &[OpKind::Elemwise(ScalarOp::Log)],
            apply: local_log_erfc,
            fast_compile: false,
        },
        Rule {
            name: "local_grad_log_erfc_neg",
            tracks: &[OpKind::Elemwise(ScalarOp::TrueDiv)],
            apply: local_grad_log_erfc_neg,
            fast_compile: false,
        },
    ]
}

/// `c + s * f(x)` for a node of two operands, `f` being `erf` or `erfc`:
/// `(c, s, f, x)` with `s` = ±1, from `add(c, ±f(x))` (either order) or
/// `sub(c, f(x))` / `sub(f(x), c)`.
fn affine_of_erf(fg: &FunctionGraph, n: NodeId) -> Option<(f64, f64, ScalarOp, VarId)> {
    let node = fg.node(n);
    if node.inputs.len() != 2 {
        return None;
    }
    let (a, b) = (node.inputs[0], node.inputs[1]);
    // `±f(x)` read from `v`.
    let signed_erf = |v: VarId| -> Option<(f64, ScalarOp, VarId)> {
        let (sign, inner) = match is_neg(fg, v) {
            Some(inner) => (-1.0, inner),
            None => (1.0, v),
        };
        let f = fg.owner(inner)?;
        let op = fg.node(f).op.scalar_op()?;
        matches!(op, ScalarOp::Erf | ScalarOp::Erfc).then(|| (sign, op, input(fg, f, 0)))
    };
    match node.op.scalar_op()? {
        ScalarOp::Add => {
            if let (Some(c), Some((s, f, x))) = (unique_constant(fg, a), signed_erf(b)) {
                Some((c, s, f, x))
            } else {
                let (c, (s, f, x)) = (unique_constant(fg, b)?, signed_erf(a)?);
                Some((c, s, f, x))
            }
        }
        ScalarOp::Sub => {
            if let (Some(c), Some((s, f, x))) = (unique_constant(fg, a), signed_erf(b)) {
                Some((c, -s, f, x))
            } else {
                let (c, (s, f, x)) = (unique_constant(fg, b)?, signed_erf(a)?);
                Some((-c, s, f, x))
            }
        }
        _ => None,
    }
}

/// The complements of `erf` and `erfc` (PyTensor's `local_one_plus_erf`,
/// `local_one_minus_erf`, `local_erf_minus_one`, `local_one_minus_erfc`
/// and `local_erf_neg_minus_one`, as one table):
/// `1 + erf(x)` -> `erfc(-x)`, `1 - erf(x)` -> `erfc(x)`,
/// `erf(x) - 1` -> `-erfc(x)`, `-1 - erf(x)` -> `-erfc(-x)`,
/// `1 - erfc(x)` -> `erf(x)`, `erfc(x) - 1` -> `-erf(x)`.
pub fn local_erf_complement(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some((c, s, f, x)) = affine_of_erf(fg, n) else {
        return Ok(None);
    };
    if !fg.ty(x).dtype.is_float() {
        return Ok(None);
    }
    let unit = |v: f64| (v == 1.0 || v == -1.0).then_some(v > 0.0);
    let (Some(c_plus), Some(s_plus)) = (unit(c), unit(s)) else {
        return Ok(None);
    };
    // (result negated, function, argument negated)
    let (negated, g, flip) = match (c_plus, s_plus, f) {
        (true, true, ScalarOp::Erf) => (false, ScalarOp::Erfc, true),
        (true, false, ScalarOp::Erf) => (false, ScalarOp::Erfc, false),
        (false, true, ScalarOp::Erf) => (true, ScalarOp::Erfc, false),
        (false, false, ScalarOp::Erf) => (true, ScalarOp::Erfc, true),
        (true, false, ScalarOp::Erfc) => (false, ScalarOp::Erf, false),
        (false, true, ScalarOp::Erfc) => (true, ScalarOp::Erf, false),
        _ => return Ok(None),
    };
    let arg = if flip { neg(fg, x)? } else { x };
    let value = unary(fg, g, arg)?;
    let new = if negated { neg(fg, value)? } else { value };
    finish(fg, n, new)
}

/// From where `log(erfc(x))` takes its asymptotic series: `erfc` is still
/// a normal number there (it underflows past 26.5 in f64, 9.2 in f32), and
/// the series' first omitted term is below 1e-16 (f64) / 1e-10 (f32).
fn log_erfc_threshold(dtype: DType) -> f64 {
    if dtype == DType::F32 {
        9.0
    } else {
        26.0
    }
}

/// `(x, dtype)` when `v` is `erfc(x)` of a float `x` whose dtype node `n`'s
/// output keeps, and `n` is not already the guarded branch its rule built
/// (see [`already_guarded`]).
fn unguarded_erfc_argument(fg: &FunctionGraph, n: NodeId, v: VarId) -> Option<(VarId, DType)> {
    let x = input(fg, owner_if(fg, v, ScalarOp::Erfc)?, 0);
    let dtype = fg.ty(x).dtype;
    let out = fg.node(n).outputs[0];
    (dtype.is_float() && fg.ty(out).dtype == dtype && !already_guarded(fg, out, x))
        .then_some((x, dtype))
}

/// True when `v` (a `log(erfc(x))`) is the kept branch of a `switch` on
/// `x < ...`, as [`local_log_erfc`] builds it (so that the rule reaches a
/// fixed point: README rule 1).
fn already_guarded(fg: &FunctionGraph, v: VarId, x: VarId) -> bool {
    fg.clients(v).iter().any(|c| match *c {
        Client::Node(s, 1) if fg.node(s).op.is_elemwise(ScalarOp::Switch) => {
            owner_if(fg, input(fg, s, 0), ScalarOp::Lt).is_some_and(|lt| input(fg, lt, 0) == x)
        }
        _ => false,
    })
}

/// The asymptotic series of `erfc` for large `x`:
/// `erfc(x) = exp(-x²) / (x √π) · (1 + s)` with
/// `s = Σ (-1)^k (2k-1)!! / (2x²)^k, k = 1..6`, evaluated as
/// `u (-1 + u (3 + u (-15 + u (105 + u (-945 + u 10395)))))`, `u = 1 / (2x²)`.
/// Returns `(x², s)`. Past the threshold of [`log_erfc_threshold`] the first
/// omitted term is below the dtype's rounding.
fn erfc_series(fg: &mut FunctionGraph, x: VarId, dtype: DType) -> Result<(VarId, VarId)> {
    let c = |fg: &mut FunctionGraph, v: f64| scalar_const(fg, dtype, v);
    let x2 = unary(fg, ScalarOp::Sqr, x)?;
    let two = c(fg, 2.0);
    let twice = elemwise(fg, ScalarOp::Mul, &[two, x2])?;
    let u = unary(fg, ScalarOp::Reciprocal, twice)?;
    let mut s = c(fg, 10395.0);
    for k in [-945.0, 105.0, -15.0, 3.0, -1.0] {
        let t = elemwise(fg, ScalarOp::Mul, &[u, s])?;
        let ck = c(fg, k);
        s = elemwise(fg, ScalarOp::Add, &[ck, t])?;
    }
    s = elemwise(fg, ScalarOp::Mul, &[u, s])?;
    Ok((x2, s))
}

/// `log(erfc(x))` -> `switch(x < T, log(erfc(x)), -x² - log(x) - log(π)/2
/// + log1p(s))` with the series `s` of `erfc_series` (PyTensor's
/// `local_log_erfc`, with a threshold `T` and series length chosen so that
/// the series is exact to rounding wherever it is used): finite where
/// `erfc(x)` underflows to 0 (`x` = 30 gives -904.34, not -inf).
pub fn local_log_erfc(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some((x, dtype)) = unguarded_erfc_argument(fg, n, input(fg, n, 0)) else {
        return Ok(None);
    };
    let c = |fg: &mut FunctionGraph, v: f64| scalar_const(fg, dtype, v);
    let (x2, s) = erfc_series(fg, x, dtype)?;
    let tail = unary(fg, ScalarOp::Log1p, s)?;
    let log_x = unary(fg, ScalarOp::Log, x)?;
    let minus_x2 = neg(fg, x2)?;
    let minus_log_x = neg(fg, log_x)?;
    let half_log_pi = c(fg, -0.5 * std::f64::consts::PI.ln());
    let series = elemwise(
        fg,
        ScalarOp::Add,
        &[minus_x2, minus_log_x, half_log_pi, tail],
    )?;
    let threshold = c(fg, log_erfc_threshold(dtype));
    let below = elemwise(fg, ScalarOp::Lt, &[x, threshold])?;
    let erfc = unary(fg, ScalarOp::Erfc, x)?;
    let direct = unary(fg, ScalarOp::Log, erfc)?;
    let new = elemwise(fg, ScalarOp::Switch, &[below, direct, series])?;
    finish(fg, n, new)
}

/// `x` when `v` is `-x²`: `-sqr(x)`, `-(x * x)` or `-(x ** 2)`, the
/// negation as `neg` or as a product with -1 (canonicalize's form).
fn minus_square_of(fg: &FunctionGraph, v: VarId) -> Option<VarId> {
    let sq = is_neg(fg, v)?;
    let node = fg.node(fg.owner(sq)?);
    let (a, b) = match node.inputs.len() {
        1 => (node.inputs[0], None),
        2 => (node.inputs[0], Some(node.inputs[1])),
        _ => return None,
    };
    match (node.op.scalar_op()?, b) {
        (ScalarOp::Sqr, None) => Some(a),
        (ScalarOp::Mul, Some(b)) if a == b => Some(a),
        (ScalarOp::Pow, Some(b)) if is_constant_equal(fg, b, 2.0) => Some(a),
        _ => None,
    }
}

/// `[y *] exp(-x²) / erfc(x)` (the gradient of `log(erfc(x))`, up to the
/// factor `-2/√π`) -> `[y *] switch(x < T, exp(-x²) / erfc(x), x √π / (1 + s))`
/// with the series `s` of `erfc_series` and the threshold of
/// `log_erfc_threshold` (PyTensor's `local_grad_log_erfc_neg`): the
/// original is `0 / 0 = NaN` where both underflow (`x` past 26.5 in f64);
/// the series is exact to rounding past `T`.
pub fn local_grad_log_erfc_neg(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let (num, den) = (input(fg, n, 0), input(fg, n, 1));
    let Some((x, dtype)) = unguarded_erfc_argument(fg, n, den) else {
        return Ok(None);
    };
    let is_gauss = |v: VarId| {
        owner_if(fg, v, ScalarOp::Exp).is_some_and(|g| {
            fg.ty(v).dtype == dtype && minus_square_of(fg, input(fg, g, 0)) == Some(x)
        })
    };
    // The numerator: exp(-x²) itself, or a product with it as a factor.
    let (gauss, others) = if is_gauss(num) {
        (num, Vec::new())
    } else {
        let Some(m) = owner_if(fg, num, ScalarOp::Mul) else {
            return Ok(None);
        };
        let factors = fg.node(m).inputs.to_vec();
        let Some(k) = factors.iter().position(|&f| is_gauss(f)) else {
            return Ok(None);
        };
        let others: Vec<VarId> = (0..factors.len())
            .filter(|&j| j != k)
            .map(|j| factors[j])
            .collect();
        (factors[k], others)
    };
    let c = |fg: &mut FunctionGraph, v: f64| scalar_const(fg, dtype, v);
    let (_, s) = erfc_series(fg, x, dtype)?;
    let one = c(fg, 1.0);
    let one_plus_s = elemwise(fg, ScalarOp::Add, &[one, s])?;
    let sqrt_pi = c(fg, std::f64::consts::PI.sqrt());
    let x_sqrt_pi = elemwise(fg, ScalarOp::Mul, &[x, sqrt_pi])?;
    let series = elemwise(fg, ScalarOp::TrueDiv, &[x_sqrt_pi, one_plus_s])?;
    let threshold = c(fg, log_erfc_threshold(dtype));
    let below = elemwise(fg, ScalarOp::Lt, &[x, threshold])?;
    let erfc = unary(fg, ScalarOp::Erfc, x)?;
    let direct = elemwise(fg, ScalarOp::TrueDiv, &[gauss, erfc])?;
    let ratio = elemwise(fg, ScalarOp::Switch, &[below, direct, series])?;
    let new = if others.is_empty() {
        ratio
    } else {
        let mut factors = others;
        factors.push(ratio);
        elemwise(fg, ScalarOp::Mul, &factors)?
    };
    finish(fg, n, new)
}
