//! The specialize database: rules that replace general operations by
//! cheaper special ones once the graph is canonical (`x ** 2` by `sqr(x)`,
//! `-1 * x` by `neg(x)`, `x ** 3` by nested squaring, reductions of scaled
//! inputs by scaled reductions, ...).

use crate::error::Result;
use crate::graph::{Client, DType, FunctionGraph, NodeId, Value, VarId};
use crate::ops::{Op, OpKind, ReduceOp, ScalarOp};

use super::rule::Rule;
use super::shared::{
    local_dimshuffle_merge, local_fill_shape_source, local_fill_sink, local_func_inv,
};
use super::util::{
    elemwise, is_constant_equal, is_neg, neg, owner_if, scalar_const, unary, unique_constant,
    unique_int_constant, widen_operands,
};
use super::util::{finish, input};

/// Largest integer exponent expanded by nested squaring.
pub const MAX_SQUARING_EXPONENT: f64 = 512.0;

/// Every specialize rule, in registration order.
pub fn rules() -> Vec<Rule> {
    use ScalarOp::*;
    macro_rules! kinds {
        ($($s:ident),*) => { &[$(OpKind::Elemwise($s)),*] };
    }
    let mut rules = vec![
        Rule {
            name: "local_max_and_argmax",
            tracks: &[OpKind::ArgReduce, OpKind::CAReduce],
            apply: super::argreduce::local_max_and_argmax,
            fast_compile: false,
        },
        Rule {
            name: "local_pow_specialize",
            tracks: kinds!(Pow),
            apply: local_pow_specialize,
            fast_compile: false,
        },
        Rule {
            name: "local_pow_to_nested_squaring",
            tracks: kinds!(Pow),
            apply: local_pow_to_nested_squaring,
            fast_compile: false,
        },
        Rule {
            name: "local_mul_specialize",
            tracks: kinds!(Mul),
            apply: local_mul_specialize,
            fast_compile: false,
        },
        Rule {
            name: "local_add_remove_zeros",
            tracks: kinds!(Add),
            apply: local_add_remove_zeros,
            fast_compile: false,
        },
        Rule {
            name: "local_div_to_reciprocal",
            tracks: kinds!(TrueDiv),
            apply: local_div_to_reciprocal,
            fast_compile: false,
        },
        Rule {
            name: "local_mul_to_sqr",
            tracks: kinds!(Mul),
            apply: local_mul_to_sqr,
            fast_compile: false,
        },
        Rule {
            name: "local_add_neg_to_sub",
            tracks: kinds!(Add),
            apply: local_add_neg_to_sub,
            fast_compile: false,
        },
        Rule {
            name: "local_neg_div_neg",
            tracks: kinds!(Neg),
            apply: local_neg_div_neg,
            fast_compile: false,
        },
        Rule {
            name: "local_neg_sub",
            tracks: kinds!(Neg),
            apply: local_neg_sub,
            fast_compile: false,
        },
        Rule {
            name: "local_abs_merge",
            tracks: kinds!(Mul, TrueDiv),
            apply: local_abs_merge,
            fast_compile: false,
        },
        Rule {
            name: "local_elemwise_sub_zeros",
            tracks: kinds!(Sub),
            apply: local_elemwise_sub_zeros,
            fast_compile: false,
        },
        Rule {
            name: "local_softplus_pair",
            tracks: kinds!(Softplus),
            apply: local_softplus_pair,
            fast_compile: false,
        },
        Rule {
            name: "local_mul_exp_to_exp_add",
            tracks: kinds!(Mul),
            apply: local_mul_exp_to_exp_add,
            fast_compile: false,
        },
        Rule {
            name: "local_mul_pow_to_pow_add",
            tracks: kinds!(Mul),
            apply: local_mul_pow_to_pow_add,
            fast_compile: false,
        },
        Rule {
            name: "local_div_exp_to_mul_exp",
            tracks: kinds!(TrueDiv),
            apply: local_div_exp_to_mul_exp,
            fast_compile: false,
        },
    ];
    rules.extend(super::shared::sum_rules());
    rules.extend([
        Rule {
            name: "local_sum_of_neg_to_neg_of_sum",
            tracks: &[OpKind::CAReduce],
            apply: local_sum_of_neg_to_neg_of_sum,
            fast_compile: false,
        },
        // The rules above can put a function next to its inverse.
        Rule {
            name: "local_func_inv",
            tracks: &[
                OpKind::Elemwise(ScalarOp::Neg),
                OpKind::Elemwise(ScalarOp::Reciprocal),
            ],
            apply: local_func_inv,
            fast_compile: false,
        },
        // `local_elemwise_sub_zeros` makes fills that functions must fold
        // through (`exp(x) * exp(-x)` is `exp(fill(x, 0))`, then 1).
        Rule {
            name: "local_fill_sink",
            tracks: &[],
            apply: local_fill_sink,
            fast_compile: false,
        },
        Rule {
            name: "local_fill_shape_source",
            tracks: &[OpKind::Elemwise(ScalarOp::Second)],
            apply: local_fill_shape_source,
            fast_compile: false,
        },
        // The rules above create DimShuffles that must merge with their inputs.
        Rule {
            name: "local_dimshuffle_merge",
            tracks: &[OpKind::DimShuffle],
            apply: local_dimshuffle_merge,
            fast_compile: false,
        },
    ]);
    rules
}

/// `x ** e` for `e` in {2, 1, 0, 0.5, -0.5, -1, -2}: `sqr`, `x`, `1`,
/// `abs(sqrt)`, `reciprocal(abs(sqrt))`, `reciprocal`, `reciprocal(sqr)`.
/// (`abs` clears the sign of `sqrt(-0) = -0`: `(-0) ** 0.5` is `+0`, and a
/// consumer may divide by it. `x ** 0.5` at
/// `x = -inf` is `+inf` by C99's `pow` but NaN by `sqrt`: the one documented
/// difference, as in PyTensor.) The half-integers 1.5 and 2.5, as numexpr
/// evaluates them: `abs(x) * abs(sqrt(x))` and `sqr(x) * abs(sqrt(x))`, a
/// per-element `pow` call (about 14 ns) replaced by a square root and one
/// or two products (within 2 ULP of `pow`; the same -inf difference; a
/// negative base still gives NaN through `sqrt`, `-0` gives `+0`).
pub fn local_pow_specialize(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let x = input(fg, n, 0);
    let Some(e) = unique_constant(fg, input(fg, n, 1)) else {
        return Ok(None);
    };
    let dtype = fg.ty(fg.node(n).outputs[0]).dtype;
    // Reciprocals of integers would change the dtype semantics; keep them float-only.
    let float = dtype.is_float();
    // The base is computed in the output's dtype: `u8 ** 2.0` is an f64
    // square (`sqr` of the u8 wrapped 200 to 64), `u8 ** 0.5` an f64 root
    // (`sqrt` of a u8 rounds to f32). Found by the 100,000-case
    // differential run, seed 3333.
    let x = in_dtype(fg, x, dtype)?;
    let new = if e == 2.0 {
        unary(fg, ScalarOp::Sqr, x)?
    } else if e == 1.0 {
        x
    } else if e == 0.0 {
        scalar_const(fg, dtype, 1.0)
    } else if e == 0.5 && float {
        // sqrt(-0) is -0 but (-0) ** 0.5 is +0, and `(x ** 0.5) ** -1`
        // divides by it: -inf instead of +inf (found by the 100,000-case
        // differential run, seed 5555). abs keeps NaN for negative x.
        let s = unary(fg, ScalarOp::Sqrt, x)?;
        unary(fg, ScalarOp::Abs, s)?
    } else if e == -0.5 && float {
        // sqrt(-0) is -0 and 1 / -0 is -inf, but (-0) ** -0.5 is +inf: abs
        // clears the sign of zero (and keeps NaN for negative x).
        let s = unary(fg, ScalarOp::Sqrt, x)?;
        let a = unary(fg, ScalarOp::Abs, s)?;
        unary(fg, ScalarOp::Reciprocal, a)?
    } else if (e == 1.5 || e == 2.5) && float {
        let s = unary(fg, ScalarOp::Sqrt, x)?;
        let root = unary(fg, ScalarOp::Abs, s)?;
        let whole = if e == 1.5 {
            unary(fg, ScalarOp::Abs, x)?
        } else {
            unary(fg, ScalarOp::Sqr, x)?
        };
        elemwise(fg, ScalarOp::Mul, &[whole, root])?
    } else if e == -1.0 && float {
        unary(fg, ScalarOp::Reciprocal, x)?
    } else if e == -2.0 && float {
        let s = unary(fg, ScalarOp::Sqr, x)?;
        unary(fg, ScalarOp::Reciprocal, s)?
    } else {
        return Ok(None);
    };
    finish(fg, n, new)
}

/// `x` cast to `dtype` unless it has it.
fn in_dtype(fg: &mut FunctionGraph, x: VarId, dtype: DType) -> Result<VarId> {
    if fg.ty(x).dtype == dtype {
        return Ok(x);
    }
    fg.apply1(Op::elemwise(ScalarOp::Cast(dtype)), &[x])
}

/// `x ** k` for an integer `k` with `2 < |k| <= 512` becomes products of
/// repeated squares (`x ** 3 -> x * sqr(x)`), reciprocal for negative `k`.
pub fn local_pow_to_nested_squaring(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let x = input(fg, n, 0);
    let Some(e) = unique_constant(fg, input(fg, n, 1)) else {
        return Ok(None);
    };
    let dtype = fg.ty(fg.node(n).outputs[0]).dtype;
    if e.fract() != 0.0
        || e.abs() <= 2.0
        || e.abs() > MAX_SQUARING_EXPONENT
        || (e < 0.0 && !dtype.is_float())
    {
        return Ok(None);
    }
    let mut k = e.abs() as u64;
    let mut power = in_dtype(fg, x, dtype)?;
    let mut factors = Vec::new();
    loop {
        if k & 1 == 1 {
            factors.push(power);
        }
        k >>= 1;
        if k == 0 {
            break;
        }
        power = unary(fg, ScalarOp::Sqr, power)?;
    }
    let mut new = if factors.len() == 1 {
        factors[0]
    } else {
        elemwise(fg, ScalarOp::Mul, &factors)?
    };
    if e < 0.0 {
        new = unary(fg, ScalarOp::Reciprocal, new)?;
    }
    finish(fg, n, new)
}

/// In a product: drop factors of 1, turn a factor of -1 into a `neg`, and a
/// zero factor into zeros; a single remaining factor replaces the product.
/// In a float product, negated factors (`neg(y)`, y not a constant) give
/// their sign to the product when that adds no `neg`: an even number of
/// signs cancels, and an odd one is taken by a constant factor
/// (`-0.001 * -s` is `0.001 * s`, as a mean of a stabilized loss leaves it);
/// negation is exact, so the value keeps every bit.
pub fn local_mul_specialize(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let ins = fg.node(n).inputs.to_vec();
    let dtype = fg.ty(fg.node(n).outputs[0]).dtype;
    // Negated float factors whose sign can move (an integer `neg` wraps at
    // the minimum), and the float constant that can take it (not a NaN,
    // whose sign bit would be the only thing to change).
    let negated = |fg: &FunctionGraph, i: VarId| {
        let m = owner_if(fg, i, ScalarOp::Neg)?;
        let inner = fg.node(m).inputs[0];
        let float = fg.ty(i).dtype.is_float();
        (float && fg.ty(inner) == fg.ty(i) && unique_constant(fg, inner).is_none()).then_some(inner)
    };
    let (mut negs, mut minus_ones, mut taker) = (0, 0, None);
    if dtype.is_float() {
        for &i in &ins {
            match unique_constant(fg, i) {
                Some(-1.0) => minus_ones += 1,
                Some(c) if c != 1.0 && c != 0.0 && !c.is_nan() => {
                    match (&taker, fg.constant_value(i)) {
                        (None, Some(v)) if v.dtype().is_float() => taker = Some((i, v.clone())),
                        _ => {}
                    }
                }
                _ => negs += usize::from(negated(fg, i).is_some()),
            }
        }
    }
    let move_signs = negs > 0 && ((negs + minus_ones) % 2 == 0 || taker.is_some());
    let mut negate = false;
    let mut rest = Vec::new();
    let mut changed = false;
    for &i in &ins {
        match unique_constant(fg, i) {
            Some(1.0) => changed = true,
            Some(-1.0) => {
                negate = !negate;
                changed = true;
            }
            Some(0.0) => {
                let z = scalar_const(fg, dtype, 0.0);
                return finish(fg, n, z);
            }
            _ => match negated(fg, i).filter(|_| move_signs) {
                Some(inner) => {
                    rest.push(inner);
                    negate = !negate;
                    changed = true;
                }
                None => rest.push(i),
            },
        }
    }
    if !changed {
        return Ok(None);
    }
    if let (true, Some((c, v))) = (negate && move_signs, taker) {
        // The constant takes the sign: same type, every element negated.
        let minus = Value::from_f64_array(v.dtype(), v.to_f64_array().mapv(|x| -x));
        let minus = fg.constant(minus);
        if let Some(r) = rest.iter_mut().find(|r| **r == c) {
            *r = minus;
        }
        negate = false;
    }
    // The dropped constants may have widened the product's dtype: compute
    // in that dtype (`-1 * x_u8` is `i64`, and a `u8` negation would wrap).
    match rest.len() {
        0 => {}
        1 if negate => rest = widen_operands(fg, ScalarOp::Neg, &rest, dtype)?,
        1 => {}
        _ => rest = widen_operands(fg, ScalarOp::Mul, &rest, dtype)?,
    }
    let mut new = match rest.len() {
        0 => scalar_const(fg, dtype, 1.0),
        1 => rest[0],
        _ => elemwise(fg, ScalarOp::Mul, &rest)?,
    };
    if negate {
        new = neg(fg, new)?;
    }
    finish(fg, n, new)
}

/// Drops terms equal to 0 from a sum.
pub fn local_add_remove_zeros(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let ins = fg.node(n).inputs.to_vec();
    let dtype = fg.ty(fg.node(n).outputs[0]).dtype;
    let rest: Vec<VarId> = ins
        .iter()
        .copied()
        .filter(|&i| !is_constant_equal(fg, i, 0.0))
        .collect();
    if rest.len() == ins.len() {
        return Ok(None);
    }
    // The dropped zeros may have widened the sum's dtype: add in that dtype.
    let rest = if rest.len() > 1 {
        widen_operands(fg, ScalarOp::Add, &rest, dtype)?
    } else {
        rest
    };
    let new = match rest.len() {
        0 => scalar_const(fg, dtype, 0.0),
        1 => rest[0],
        _ => elemwise(fg, ScalarOp::Add, &rest)?,
    };
    finish(fg, n, new)
}

/// `1 / x -> reciprocal(x)`.
pub fn local_div_to_reciprocal(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    if !is_constant_equal(fg, input(fg, n, 0), 1.0) {
        return Ok(None);
    }
    let x = input(fg, n, 1);
    let new = unary(fg, ScalarOp::Reciprocal, x)?;
    finish(fg, n, new)
}

/// `x * x -> sqr(x)`.
pub fn local_mul_to_sqr(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let ins = fg.node(n).inputs.to_vec();
    if ins.len() != 2 || ins[0] != ins[1] {
        return Ok(None);
    }
    let new = unary(fg, ScalarOp::Sqr, ins[0])?;
    finish(fg, n, new)
}

/// `x + (-y) -> x - y` (two-term sums; a negative constant `-c` counts as `-(c)`).
/// An integer negation must have the sum's dtype: it wraps in its own
/// (`-u` of a `u8` 15 is 241), which a wider or float difference would not.
pub fn local_add_neg_to_sub(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let ins = fg.node(n).inputs.to_vec();
    if ins.len() != 2 {
        return Ok(None);
    }
    let sum_dtype = fg.ty(fg.node(n).outputs[0]).dtype;
    for (a, b) in [(ins[0], ins[1]), (ins[1], ins[0])] {
        let neg_dtype = fg.ty(b).dtype;
        if let Some(y) = is_neg(fg, b).filter(|_| neg_dtype == sum_dtype || neg_dtype.is_float()) {
            let new = elemwise(fg, ScalarOp::Sub, &[a, y])?;
            return finish(fg, n, new);
        }
        if let Some(c) = unique_constant(fg, b) {
            let scalar_like = fg.ty(b).broadcastable().iter().all(|&d| d);
            if c < 0.0 && scalar_like && unique_constant(fg, a).is_none() {
                let Some(pos) = negated_constant(fg, b, c) else {
                    continue;
                };
                let pos = fg.constant(pos);
                let new = elemwise(fg, ScalarOp::Sub, &[a, pos])?;
                return finish(fg, n, new);
            }
        }
    }
    Ok(None)
}

/// `-c` for the constant `b` of unique value `c`, as a 0-d value of `b`'s
/// dtype: exact for integers (read as `i64`, not through `f64`), and `None`
/// when `-c` does not fit the dtype (`-(-128)` on `i8`).
fn negated_constant(fg: &FunctionGraph, b: VarId, c: f64) -> Option<Value> {
    let dtype = fg.ty(b).dtype;
    if !dtype.is_int() {
        return Some(Value::scalar_f64(dtype, -c));
    }
    let neg = unique_int_constant(fg, b)?.checked_neg()?;
    (crate::ops::composite::wrap_i64(neg, dtype) == neg).then(|| Value::scalar_i64(dtype, neg))
}

/// `-(x - y) -> y - x` when the difference has the negation's dtype
/// (`-(-c - y) -> c + y` for a negative constant).
/// Specialize makes such negations (`local_mul_specialize` turns
/// `(x - y) * -1` into `-(x - y)`) after canonicalize's add canonizer, which
/// would have folded them, has run: without this rule a second FAST_RUN
/// pass still changed the graph. Exact in every dtype (IEEE negation and
/// subtraction round symmetrically; integers wrap alike) except the sign of
/// a zero difference, which rule 5 leaves free, as the canonizer does.
pub fn local_neg_sub(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(d) = owner_if(fg, input(fg, n, 0), ScalarOp::Sub) else {
        return Ok(None);
    };
    if fg.ty(input(fg, n, 0)).dtype != fg.ty(fg.node(n).outputs[0]).dtype {
        return Ok(None);
    }
    let (a, b) = (input(fg, d, 0), input(fg, d, 1));
    // `-(-c - y) -> c + y` for a negative scalar constant, in the order the
    // add canonizer would give, so that a second pass keeps it.
    if let Some(c) = unique_constant(fg, a) {
        let scalar_like = fg.ty(a).broadcastable().iter().all(|&d| d);
        if c < 0.0 && scalar_like && unique_constant(fg, b).is_none() {
            if let Some(pos) = negated_constant(fg, a, c) {
                let pos = fg.constant(pos);
                let new = elemwise(fg, ScalarOp::Add, &[pos, b])?;
                return finish(fg, n, new);
            }
        }
    }
    let new = elemwise(fg, ScalarOp::Sub, &[b, a])?;
    finish(fg, n, new)
}

/// `-(-x / y) -> x / y` and `-(x / -y) -> x / y`.
pub fn local_neg_div_neg(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(d) = owner_if(fg, input(fg, n, 0), ScalarOp::TrueDiv) else {
        return Ok(None);
    };
    let (a, b) = (input(fg, d, 0), input(fg, d, 1));
    let new = if let Some(x) = is_neg(fg, a) {
        elemwise(fg, ScalarOp::TrueDiv, &[x, b])?
    } else if let Some(y) = is_neg(fg, b) {
        elemwise(fg, ScalarOp::TrueDiv, &[a, y])?
    } else {
        return Ok(None);
    };
    finish(fg, n, new)
}

/// `abs(x) * abs(y) -> abs(x * y)` and `abs(x) / abs(y) -> abs(x / y)`.
pub fn local_abs_merge(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(op) = fg.node(n).op.scalar_op() else {
        return Ok(None);
    };
    let ins = fg.node(n).inputs.to_vec();
    let inner: Option<Vec<VarId>> = ins
        .iter()
        .map(|&i| owner_if(fg, i, ScalarOp::Abs).map(|a| input(fg, a, 0)))
        .collect();
    let Some(inner) = inner else { return Ok(None) };
    if inner.len() < 2 {
        return Ok(None);
    }
    let p = elemwise(fg, op, &inner)?;
    let new = unary(fg, ScalarOp::Abs, p)?;
    finish(fg, n, new)
}

/// `x - x -> zeros` (integers, and floats: PyTensor's rule; `inf - inf` gives 0, not NaN).
pub fn local_elemwise_sub_zeros(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    if input(fg, n, 0) != input(fg, n, 1) {
        return Ok(None);
    }
    let dtype = fg.ty(fg.node(n).outputs[0]).dtype;
    let z = scalar_const(fg, dtype, 0.0);
    finish(fg, n, z)
}

/// `exp(a) * exp(b) * c -> exp(a + b) * c`.
pub fn local_mul_exp_to_exp_add(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let ins = fg.node(n).inputs.to_vec();
    let (exps, rest): (Vec<VarId>, Vec<VarId>) = ins
        .iter()
        .partition(|&&i| owner_if(fg, i, ScalarOp::Exp).is_some());
    if exps.len() < 2 {
        return Ok(None);
    }
    let args: Vec<VarId> = exps
        .iter()
        .map(|&e| input(fg, fg.owner(e).expect("exp"), 0))
        .collect();
    let s = elemwise(fg, ScalarOp::Add, &args)?;
    let e = unary(fg, ScalarOp::Exp, s)?;
    let mut factors = vec![e];
    factors.extend(rest);
    let new = if factors.len() == 1 {
        factors[0]
    } else {
        elemwise(fg, ScalarOp::Mul, &factors)?
    };
    finish(fg, n, new)
}

/// `x ** a * x ** b -> x ** (a + b)` for factors with the same base and
/// constant exponents whose sum is exact. (With variable exponents the sum
/// may round — `3 + 1e100` is even — and flip the sign of a negative base's
/// power, so the rewrite would not be value-preserving.)
pub fn local_mul_pow_to_pow_add(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let ins = fg.node(n).inputs.to_vec();
    let pows: Vec<(usize, VarId, VarId)> = ins
        .iter()
        .enumerate()
        .filter_map(|(k, &i)| {
            owner_if(fg, i, ScalarOp::Pow).map(|p| (k, input(fg, p, 0), input(fg, p, 1)))
        })
        .filter(|&(_, _, e)| {
            unique_constant(fg, e).is_some_and(|c| c.is_finite() && c.abs() < 1e15)
        })
        .collect();
    for (i, &(k1, base, e1)) in pows.iter().enumerate() {
        let same: Vec<&(usize, VarId, VarId)> =
            pows[i + 1..].iter().filter(|p| p.1 == base).collect();
        if same.is_empty() {
            continue;
        }
        let mut exps = vec![e1];
        let mut used = vec![k1];
        for p in same {
            exps.push(p.2);
            used.push(p.0);
        }
        let s = elemwise(fg, ScalarOp::Add, &exps)?;
        let p = elemwise(fg, ScalarOp::Pow, &[base, s])?;
        let mut factors = vec![p];
        factors.extend(
            ins.iter()
                .enumerate()
                .filter(|(k, _)| !used.contains(k))
                .map(|(_, &v)| v),
        );
        let new = if factors.len() == 1 {
            factors[0]
        } else {
            elemwise(fg, ScalarOp::Mul, &factors)?
        };
        return finish(fg, n, new);
    }
    Ok(None)
}

/// `x / exp(y) -> x * exp(-y)` (a multiplication is cheaper than a division).
pub fn local_div_exp_to_mul_exp(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(e) = owner_if(fg, input(fg, n, 1), ScalarOp::Exp) else {
        return Ok(None);
    };
    let x = input(fg, n, 0);
    let y = input(fg, e, 0);
    // `-y` of an integer wraps (`-3_u8` is 253): only a float negates exactly.
    if !fg.ty(y).dtype.is_float() {
        return Ok(None);
    }
    let ny = neg(fg, y)?;
    let en = unary(fg, ScalarOp::Exp, ny)?;
    let new = elemwise(fg, ScalarOp::Mul, &[x, en])?;
    finish(fg, n, new)
}

/// `sum(-X) -> -sum(X)`.
pub fn local_sum_of_neg_to_neg_of_sum(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Op::CAReduce {
        op: ReduceOp::Sum,
        axes,
    } = fg.node(n).op.clone()
    else {
        return Ok(None);
    };
    let x = input(fg, n, 0);
    let Some(y) = owner_if(fg, x, ScalarOp::Neg).map(|m| input(fg, m, 0)) else {
        return Ok(None);
    };
    if !super::util::single_client(fg, x) || !fg.ty(y).dtype.is_float() {
        return Ok(None);
    }
    let s = fg.apply1(
        Op::CAReduce {
            op: ReduceOp::Sum,
            axes,
        },
        &[y],
    )?;
    let new = neg(fg, s)?;
    finish(fg, n, new)
}

/// The clients of `v` that are single-input element-wise nodes of `op`
/// (their outputs).
fn unary_clients(fg: &FunctionGraph, v: VarId, op: ScalarOp) -> Vec<VarId> {
    fg.clients(v)
        .iter()
        .filter_map(|c| match *c {
            Client::Node(m, 0) if fg.node(m).op.is_elemwise(op) && fg.node(m).inputs.len() == 1 => {
                Some(fg.node(m).outputs[0])
            }
            _ => None,
        })
        .collect()
}

/// The negations of `v` in the graph: `neg(v)` and `-1 * v` clients.
fn negations(fg: &FunctionGraph, v: VarId) -> Vec<VarId> {
    fg.clients(v)
        .iter()
        .filter_map(|c| match *c {
            Client::Node(m, _) => {
                let o = fg.node(m).outputs[0];
                (is_neg(fg, o) == Some(v)).then_some(o)
            }
            Client::Output(_) => None,
        })
        .collect()
}

/// `softplus(-|x|)` when the graph already computes it.
fn shared_softplus_tail(fg: &FunctionGraph, x: VarId) -> Option<VarId> {
    for a in unary_clients(fg, x, ScalarOp::Abs) {
        for m in negations(fg, a) {
            if let Some(&t) = unary_clients(fg, m, ScalarOp::Softplus).first() {
                return Some(t);
            }
        }
    }
    None
}

/// `softplus(x)` and `softplus(-x)` both in the graph -> `max(x, 0) + t`
/// and `max(-x, 0) + t` with one shared `t = softplus(-|x|)`
/// (= log1p(exp(-|x|))): one exponential and one `log1p` per element
/// instead of two of each (the binary cross-entropy of a sigmoid has
/// exactly this pair). The runtime's `softplus(y)` is
/// `max(y, 0) + softplus(-|y|)` with that very addition, so every value
/// is kept bit for bit, NaN and ±inf included (`softplus(-x) ->
/// softplus(x) - x` would lose every digit of `softplus(-40) = 4.2e-18`).
pub fn local_softplus_pair(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let y = input(fg, n, 0);
    if !fg.ty(y).dtype.is_float() {
        return Ok(None);
    }
    // `y` is `x` or `-x`; the pair's other member is `softplus` of the other.
    let (x, negated) = match is_neg(fg, y) {
        Some(x) if fg.ty(x).dtype == fg.ty(y).dtype => (x, true),
        _ => (y, false),
    };
    // `softplus(-|x|)` is the shared tail itself.
    if negated && owner_if(fg, x, ScalarOp::Abs).is_some() {
        return Ok(None);
    }
    let tail = shared_softplus_tail(fg, x);
    let partner = if negated {
        !unary_clients(fg, x, ScalarOp::Softplus).is_empty()
    } else {
        negations(fg, x)
            .iter()
            .any(|&m| !unary_clients(fg, m, ScalarOp::Softplus).is_empty())
    };
    if tail.is_none() && !partner {
        return Ok(None);
    }
    let tail = match tail {
        Some(t) => t,
        None => {
            let a = unary(fg, ScalarOp::Abs, x)?;
            let m = neg(fg, a)?;
            unary(fg, ScalarOp::Softplus, m)?
        }
    };
    let zero = scalar_const(fg, fg.ty(y).dtype, 0.0);
    let positive = elemwise(fg, ScalarOp::Maximum, &[y, zero])?;
    let new = elemwise(fg, ScalarOp::Add, &[positive, tail])?;
    finish(fg, n, new)
}
