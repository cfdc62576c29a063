//! Algebraic identities registered in canonicalize that remove work
//! outright: comparisons of a size with zero, `x / |x|` as a sign,
//! zero numerators and unit bases, zero branches of a `switch` sunk through
//! the product or quotient that consumes them, negated extrema, the
//! logarithm of a square root, transposes of a matrix product lifted
//! onto its operands, matrix products with one term as products, and
//! stacks of one matrix product made a plain `dot`.
//!
//! Each rule is exact on every input except where README rule 5 allows:
//! a NaN that comes only from cancellation (`0 / 0`, `0 * inf`, `inf / inf`)
//! becomes the simplified expression's finite value, and the sign of a zero
//! is not kept. Rules whose identity fails for wrapping integers (negations)
//! are restricted to the dtypes where it holds.

use crate::error::Result;
use crate::graph::{DType, FunctionGraph, NodeId, VarId};
use crate::ops::{Op, OpKind, ReduceOp, ScalarOp};

use super::rule::Rule;
use super::util::{
    elemwise, finish, input, is_constant_equal, is_neg, owner_if, scalar_const, unary,
    unique_int_constant,
};

/// The element-wise kinds of the named scalar ops.
macro_rules! kinds {
    ($($s:ident),*) => { &[$(OpKind::Elemwise(ScalarOp::$s)),*] };
}

/// Every rule of this file, in registration order (canonicalize).
pub fn rules() -> Vec<Rule> {
    vec![
        Rule {
            name: "local_useless_elemwise_comparison",
            tracks: kinds!(Lt, Gt, Le, Ge, Eq, Neq),
            apply: local_useless_elemwise_comparison,
            fast_compile: true,
        },
        Rule {
            name: "local_div_abs_to_sign",
            tracks: kinds!(TrueDiv),
            apply: local_div_abs_to_sign,
            fast_compile: false,
        },
        Rule {
            name: "local_zero_div",
            tracks: kinds!(TrueDiv),
            apply: local_zero_div,
            fast_compile: true,
        },
        Rule {
            name: "local_pow_one_base",
            tracks: kinds!(Pow),
            apply: local_pow_one_base,
            fast_compile: true,
        },
        Rule {
            name: "local_mul_switch_sink",
            tracks: kinds!(Mul),
            apply: local_mul_switch_sink,
            fast_compile: false,
        },
        Rule {
            name: "local_div_switch_sink",
            tracks: kinds!(TrueDiv),
            apply: local_div_switch_sink,
            fast_compile: false,
        },
        Rule {
            name: "local_max_to_min",
            tracks: kinds!(Neg, Mul),
            apply: local_max_to_min,
            fast_compile: false,
        },
        Rule {
            name: "local_log_sqrt",
            tracks: kinds!(Log),
            apply: local_log_sqrt,
            fast_compile: false,
        },
        Rule {
            name: "local_lift_transpose_through_dot",
            tracks: &[OpKind::DimShuffle],
            apply: local_lift_transpose_through_dot,
            fast_compile: false,
        },
        Rule {
            name: "local_dot_to_mul",
            tracks: &[OpKind::Dot],
            apply: local_dot_to_mul,
            fast_compile: false,
        },
        Rule {
            name: "local_batched_dot_to_dot",
            tracks: &[OpKind::BatchedDot],
            apply: local_batched_dot_to_dot,
            fast_compile: false,
        },
    ]
}

/// True when `v` is the output of `Shape` or `ShapeI` (sizes, never negative).
fn is_shape(fg: &FunctionGraph, v: VarId) -> bool {
    matches!(fg.owner_op(v), Some(Op::Shape | Op::ShapeI(_)))
}

/// A size against zero: `shape_i(x) >= 0` and `0 <= shape_i(x)` -> true,
/// `shape_i(x) < 0` and `0 > shape_i(x)` -> false (the size part of
/// PyTensor's rule of the same name; its comparisons of a value with
/// itself are `local_useless_elemwise`'s here, without the float folds
/// PyTensor makes wrongly for NaN: `x == x` is false at NaN).
pub fn local_useless_elemwise_comparison(
    fg: &mut FunctionGraph,
    n: NodeId,
) -> Result<Option<VarId>> {
    use ScalarOp::*;
    let Some(op) = fg.node(n).op.scalar_op() else {
        return Ok(None);
    };
    let (a, b) = (input(fg, n, 0), input(fg, n, 1));
    let value = if is_shape(fg, a) && unique_int_constant(fg, b) == Some(0) {
        match op {
            Ge => Some(true),
            Lt => Some(false),
            _ => None,
        }
    } else if is_shape(fg, b) && unique_int_constant(fg, a) == Some(0) {
        match op {
            Le => Some(true),
            Gt => Some(false),
            _ => None,
        }
    } else {
        None
    };
    let Some(value) = value else { return Ok(None) };
    let c = scalar_const(fg, DType::Bool, if value { 1.0 } else { 0.0 });
    finish(fg, n, c)
}

/// `x / |x|` and `|x| / x` -> `sign(x)`, also with further factors in the
/// numerator (`c * x / |x|` -> `c * sign(x)`), for float `x`: at `x = 0`
/// and `x = ±inf` the quotient is a NaN of cancellation (rule 5).
pub fn local_div_abs_to_sign(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let (num, den) = (input(fg, n, 0), input(fg, n, 1));
    if !fg.ty(den).dtype.is_float() {
        return Ok(None);
    }
    // `x / |x|` (the denominator is `|x|`) or `|x| / x`: `x`, and the
    // numerator's factor that cancels with the denominator.
    let abs_x = owner_if(fg, den, ScalarOp::Abs);
    let x = abs_x.map_or(den, |a| input(fg, a, 0));
    let cancels = |fg: &FunctionGraph, v: VarId| match abs_x {
        Some(_) => v == x,
        None => owner_if(fg, v, ScalarOp::Abs).is_some_and(|a| input(fg, a, 0) == x),
    };
    let others: Vec<VarId> = if cancels(fg, num) {
        Vec::new()
    } else if let Some(m) = owner_if(fg, num, ScalarOp::Mul) {
        let ins = fg.node(m).inputs.to_vec();
        let Some(k) = ins.iter().position(|&v| cancels(fg, v)) else {
            return Ok(None);
        };
        ins.iter()
            .enumerate()
            .filter(|&(j, _)| j != k)
            .map(|(_, &v)| v)
            .collect()
    } else {
        return Ok(None);
    };
    if !fg.ty(x).dtype.is_float() {
        return Ok(None);
    }
    let mut factors = others;
    factors.push(unary(fg, ScalarOp::Sign, x)?);
    let new = if factors.len() == 1 {
        factors[0]
    } else {
        elemwise(fg, ScalarOp::Mul, &factors)?
    };
    finish(fg, n, new)
}

/// `0 / x` -> `0` for floats (`0 / 0` is a NaN of cancellation, and the
/// sign of the zero is not kept: rule 5), as PyTensor's `local_zero_div`.
pub fn local_zero_div(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let num = input(fg, n, 0);
    let dtype = fg.ty(fg.node(n).outputs[0]).dtype;
    if !dtype.is_float() || !is_constant_equal(fg, num, 0.0) {
        return Ok(None);
    }
    let z = scalar_const(fg, dtype, 0.0);
    finish(fg, n, z)
}

/// `1 ** x` -> `1`: exact for every `x`, NaN included (C99 `pow(1, NaN)`
/// is 1, as numpy's), and for integer exponents of any sign.
pub fn local_pow_one_base(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let base = input(fg, n, 0);
    let dtype = fg.ty(fg.node(n).outputs[0]).dtype;
    if !is_constant_equal(fg, base, 1.0) {
        return Ok(None);
    }
    let one = scalar_const(fg, dtype, 1.0);
    finish(fg, n, one)
}

/// The branches of a `switch` one of which is the constant 0: `(cond,
/// other, zero_first)`.
fn switch_with_zero(fg: &FunctionGraph, v: VarId) -> Option<(VarId, VarId, bool)> {
    let s = owner_if(fg, v, ScalarOp::Switch)?;
    let (c, t, f) = (input(fg, s, 0), input(fg, s, 1), input(fg, s, 2));
    let (other, zero_first) = if is_constant_equal(fg, t, 0.0) {
        (f, true)
    } else if is_constant_equal(fg, f, 0.0) {
        (t, false)
    } else {
        return None;
    };
    (fg.ty(other).dtype == fg.ty(v).dtype).then_some((c, other, zero_first))
}

/// `switch(c, 0, y)` (or `switch(c, y, 0)`) with `y` replaced by `inner`.
fn rebuild_switch(
    fg: &mut FunctionGraph,
    c: VarId,
    inner: VarId,
    zero_first: bool,
) -> Result<VarId> {
    let dtype = fg.ty(inner).dtype;
    let zero = scalar_const(fg, dtype, 0.0);
    let branches = if zero_first {
        [zero, inner]
    } else {
        [inner, zero]
    };
    elemwise(fg, ScalarOp::Switch, &[c, branches[0], branches[1]])
}

/// `switch(c, 0, y) * z` -> `switch(c, 0, y * z)` (and with the zero in
/// the other branch), as PyTensor's `local_mul_switch_sink`: where `c`
/// selects the zero the product is 0 even when `z` is NaN or infinite
/// (`0 * inf` is a NaN of cancellation; the zero's sign is not kept: rule
/// 5). This is what lets a gradient through a `switch` stay finite.
pub fn local_mul_switch_sink(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let ins = fg.node(n).inputs.to_vec();
    let out_dtype = fg.ty(fg.node(n).outputs[0]).dtype;
    for (k, &i) in ins.iter().enumerate() {
        let Some((c, y, zero_first)) = switch_with_zero(fg, i) else {
            continue;
        };
        let mut factors: Vec<VarId> = ins.clone();
        factors[k] = y;
        let product = elemwise(fg, ScalarOp::Mul, &factors)?;
        if fg.ty(product).dtype != out_dtype {
            continue;
        }
        let new = rebuild_switch(fg, c, product, zero_first)?;
        return finish(fg, n, new);
    }
    Ok(None)
}

/// `switch(c, 0, y) / z` -> `switch(c, 0, y / z)` (and with the zero in
/// the other branch), as PyTensor's `local_div_switch_sink`: where `c`
/// selects the zero the quotient is 0 even when `z` is 0 or NaN (a NaN of
/// cancellation; the zero's sign is not kept: rule 5).
pub fn local_div_switch_sink(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let (num, den) = (input(fg, n, 0), input(fg, n, 1));
    let out_dtype = fg.ty(fg.node(n).outputs[0]).dtype;
    let Some((c, y, zero_first)) = switch_with_zero(fg, num) else {
        return Ok(None);
    };
    let quotient = elemwise(fg, ScalarOp::TrueDiv, &[y, den])?;
    if fg.ty(quotient).dtype != out_dtype {
        return Ok(None);
    }
    let new = rebuild_switch(fg, c, quotient, zero_first)?;
    finish(fg, n, new)
}

/// `-max(-x)` -> `min(x)` and `-min(-x)` -> `max(x)` over the same axes
/// (PyTensor's `local_max_to_min`), for floats only: an integer negation
/// wraps (`-i64::MIN` is `i64::MIN`) and an unsigned one is not monotonic.
pub fn local_max_to_min(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let out = fg.node(n).outputs[0];
    if !fg.ty(out).dtype.is_float() {
        return Ok(None);
    }
    let Some(r) = is_neg(fg, out) else {
        return Ok(None);
    };
    let Some(Op::CAReduce { op, axes }) = fg.owner_op(r).cloned() else {
        return Ok(None);
    };
    let flipped = match op {
        ReduceOp::Max => ReduceOp::Min,
        ReduceOp::Min => ReduceOp::Max,
        _ => return Ok(None),
    };
    let reduced = input(fg, fg.owner(r).expect("a reduction's output"), 0);
    let Some(x) = is_neg(fg, reduced) else {
        return Ok(None);
    };
    if fg.ty(x).dtype != fg.ty(out).dtype {
        return Ok(None);
    }
    let new = fg.apply1(Op::CAReduce { op: flipped, axes }, &[x])?;
    finish(fg, n, new)
}

/// `log(sqrt(x))` -> `0.5 * log(x)` (PyTensor's `local_log_sqrt`): one
/// transcendental call instead of two, equal at 0, ±inf, NaN and negative
/// `x`, and the square root's rounding is gone.
pub fn local_log_sqrt(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(s) = owner_if(fg, input(fg, n, 0), ScalarOp::Sqrt) else {
        return Ok(None);
    };
    let x = input(fg, s, 0);
    let log = unary(fg, ScalarOp::Log, x)?;
    let dtype = fg.ty(log).dtype;
    if dtype != fg.ty(fg.node(n).outputs[0]).dtype {
        return Ok(None);
    }
    let half = scalar_const(fg, dtype, 0.5);
    let new = elemwise(fg, ScalarOp::Mul, &[half, log])?;
    finish(fg, n, new)
}

/// `dot(A, B).T` -> `dot(B.T, A.T)` for matrices (PyTensor's
/// `local_lift_transpose_through_dot`): the transposes move onto the
/// operands, where they merge with other DimShuffles and the GEMM reads
/// them through their strides.
pub fn local_lift_transpose_through_dot(
    fg: &mut FunctionGraph,
    n: NodeId,
) -> Result<Option<VarId>> {
    let transpose = [Some(1), Some(0)];
    let Op::DimShuffle {
        input_ndim: 2,
        new_order,
    } = &fg.node(n).op
    else {
        return Ok(None);
    };
    if new_order[..] != transpose {
        return Ok(None);
    }
    let d = input(fg, n, 0);
    let Some(Op::Dot) = fg.owner_op(d) else {
        return Ok(None);
    };
    let dot = fg.owner(d).expect("a dot's output");
    let (a, b) = (input(fg, dot, 0), input(fg, dot, 1));
    if fg.ty(a).ndim() != 2 || fg.ty(b).ndim() != 2 {
        return Ok(None);
    }
    let bt = super::util::dimshuffle(fg, b, 2, &transpose)?;
    let at = super::util::dimshuffle(fg, a, 2, &transpose)?;
    let new = fg.apply1(Op::Dot, &[bt, at])?;
    finish(fg, n, new)
}

/// `dot(a, b)` with an inner dimension of static size 1 on both operands
/// -> the broadcast product `a * b` (PyTensor's `local_dot_to_mul`): the sum
/// has one term, so the product is the whole dot, and it fuses with the
/// element-wise work around it. The matrix operand of a matrix-vector
/// product loses its size-1 axis: `(1,) . (1, n)` is `a * b[0, :]`,
/// `(m, 1) . (1,)` is `a[:, 0] * b`, `(1,) . (1,)` is `a[0] * b[0]`.
/// Unlike PyTensor, outer products (`(m, 1) . (1, n)`) are rewritten too:
/// kiln has no GER for them to wait for. Fires only when the product has the
/// dot's type (the dtype rules of the two agree).
pub fn local_dot_to_mul(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    if !matches!(fg.node(n).op, Op::Dot) {
        return Ok(None);
    }
    let (a, b) = (input(fg, n, 0), input(fg, n, 1));
    let (ta, tb) = (fg.ty(a).clone(), fg.ty(b).clone());
    let (na, nb) = (ta.ndim(), tb.ndim());
    if ta.shape.last() != Some(&Some(1)) || tb.shape.first() != Some(&Some(1)) {
        return Ok(None);
    }
    let drop_last: Vec<Option<usize>> = (0..na - 1).map(Some).collect();
    let drop_first: Vec<Option<usize>> = (1..nb).map(Some).collect();
    // A matrix operand keeps its size-1 axis when the other is a matrix
    // ((m, 1) * (1, n) is (m, n)); a vector operand keeps it when the other
    // is a matrix ((1,) * (n,) is (n,)); two vectors give a scalar.
    let a2 = if nb == 1 {
        super::util::dimshuffle(fg, a, na, &drop_last)?
    } else {
        a
    };
    let b2 = if na == 1 {
        super::util::dimshuffle(fg, b, nb, &drop_first)?
    } else {
        b
    };
    let new = elemwise(fg, ScalarOp::Mul, &[a2, b2])?;
    let out = fg.node(n).outputs[0];
    Ok((fg.ty(new) == fg.ty(out)).then_some(new))
}

/// `BatchedDot(a, b)` whose batch dimensions are all statically of size 1
/// (or that has none) -> `dot` of the operands' matrices, with the size-1
/// batch dimensions put back (PyTensor's
/// `local_batched_matmul_to_core_matmul`, for the case of one product):
/// the `Dot` then meets the transpose lifting and BlasOpt's GEMM rules.
/// Exact: one product computed by the same kernel either way; dropping an
/// operand's size-1 dimensions keeps the run-time check that they are 1.
pub fn local_batched_dot_to_dot(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let out_ty = fg.ty(fg.node(n).outputs[0]).clone();
    let batch = out_ty.ndim() - 2;
    if (0..batch).any(|d| out_ty.shape[d] != Some(1)) {
        return Ok(None);
    }
    let mut core = [input(fg, n, 0), input(fg, n, 1)];
    for v in &mut core {
        let nd = fg.ty(*v).ndim();
        *v = super::util::dimshuffle(fg, *v, nd, &[Some(nd - 2), Some(nd - 1)])?;
    }
    let dot = fg.apply1(Op::Dot, &core)?;
    let mut order = vec![None; batch];
    order.extend([Some(0), Some(1)]);
    let new = super::util::dimshuffle(fg, dot, 2, &order)?;
    finish(fg, n, new)
}
