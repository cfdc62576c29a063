//! The canonicalize database: rules that put graphs in a standard form
//! (one mul/div or add/sub cluster per expression with folded constants,
//! DimShuffles lifted towards the inputs, fills sunk outwards, inverse pairs
//! removed, reductions merged) so that later rules see few shapes of graph.
//!
//! Value preservation follows PyTensor: a rule may turn a NaN or infinity
//! produced by cancellation into the finite value of the simplified
//! expression (`x / x` becomes 1 even where `x` is 0), never the reverse.

use smallvec::SmallVec;

use crate::error::Result;
use crate::graph::{DType, FunctionGraph, NodeId, TensorType, Value, VarId};
use crate::ops::{Op, OpKind, ReduceOp, ScalarOp};

use super::canonizer::AlgebraicCanonizer;
use super::rule::Rule;
use super::shared::{
    local_dimshuffle_lift, local_fill_shape_source, local_fill_sink, local_func_inv,
};
use super::util::{
    elemwise, is_constant_equal, match_type, owner_if, scalar_const, single_client, unique_constant,
};

const ELEMWISE_ALL: &[OpKind] = &[];

/// The element-wise kinds of the named scalar ops.
macro_rules! kinds {
    ($($s:ident),*) => { &[$(OpKind::Elemwise(ScalarOp::$s)),*] };
}

/// Every canonicalize rule, in registration order.
pub fn rules() -> Vec<Rule> {
    let mut rules = algebra_rules();
    rules.extend(structure_rules());
    rules.extend(argreduce_rules());
    rules
}

/// The rules on arithmetic: the canonizers, the distributor and the
/// rewrites of negation, zeros, powers, reciprocals and division by one.
fn algebra_rules() -> Vec<Rule> {
    vec![
        Rule {
            name: "local_useless_elemwise",
            tracks: ELEMWISE_ALL,
            apply: local_useless_elemwise,
            fast_compile: true,
        },
        Rule {
            name: "local_mul_canonizer",
            tracks: kinds!(Mul, TrueDiv, Reciprocal),
            apply: local_mul_canonizer,
            fast_compile: false,
        },
        Rule {
            name: "local_add_canonizer",
            tracks: kinds!(Add, Sub, Neg),
            apply: local_add_canonizer,
            fast_compile: false,
        },
        Rule {
            name: "local_greedy_distributor",
            tracks: kinds!(Mul, TrueDiv),
            apply: local_greedy_distributor,
            fast_compile: false,
        },
        Rule {
            name: "local_add_common_denominator",
            tracks: kinds!(Add, Sub),
            apply: local_add_common_denominator,
            fast_compile: false,
        },
        Rule {
            name: "local_neg_to_mul",
            tracks: kinds!(Neg),
            apply: local_neg_to_mul,
            fast_compile: false,
        },
        Rule {
            name: "local_sub_neg_to_add",
            tracks: kinds!(Sub),
            apply: local_sub_neg_to_add,
            fast_compile: false,
        },
        Rule {
            name: "local_mul_zero",
            tracks: kinds!(Mul),
            apply: local_mul_zero,
            fast_compile: false,
        },
        Rule {
            name: "local_pow_canonicalize",
            tracks: kinds!(Pow),
            apply: local_pow_canonicalize,
            fast_compile: false,
        },
        Rule {
            name: "local_reciprocal_canon",
            tracks: kinds!(Reciprocal),
            apply: local_reciprocal_canon,
            fast_compile: false,
        },
        Rule {
            name: "local_div_by_one",
            tracks: kinds!(TrueDiv, IntDiv),
            apply: local_div_by_one,
            fast_compile: true,
        },
    ]
}

/// The rules on the structure around arithmetic: DimShuffles, fills, casts
/// of constants, inverse pairs, reductions, switches and shapes.
fn structure_rules() -> Vec<Rule> {
    let mut rules = vec![
        Rule {
            name: "local_dimshuffle_lift",
            tracks: &[OpKind::DimShuffle],
            apply: local_dimshuffle_lift,
            fast_compile: true,
        },
        Rule {
            name: "local_fill_sink",
            tracks: ELEMWISE_ALL,
            apply: local_fill_sink,
            fast_compile: false,
        },
        Rule {
            name: "local_useless_fill",
            tracks: kinds!(Second),
            apply: local_useless_fill,
            fast_compile: true,
        },
        Rule {
            name: "local_fill_shape_source",
            tracks: kinds!(Second),
            apply: local_fill_shape_source,
            fast_compile: true,
        },
        Rule {
            name: "local_upcast_elemwise_constant_inputs",
            tracks: ELEMWISE_ALL,
            apply: local_upcast_elemwise_constant_inputs,
            fast_compile: false,
        },
        Rule {
            name: "local_exp_log",
            tracks: kinds!(Exp, Log, Log1p, Expm1),
            apply: local_exp_log,
            fast_compile: false,
        },
        Rule {
            name: "local_func_inv",
            tracks: kinds!(Neg, Reciprocal, Invert, Tanh, ArcTanh, Sinh, ArcSinh, Cosh),
            apply: local_func_inv,
            fast_compile: false,
        },
        Rule {
            name: "local_reduce_chain",
            tracks: &[OpKind::CAReduce],
            apply: local_reduce_chain,
            fast_compile: false,
        },
        Rule {
            name: "local_sum_prod_all_to_none",
            tracks: &[OpKind::CAReduce],
            apply: local_sum_prod_all_to_none,
            fast_compile: true,
        },
    ];
    // Also in specialize (see `sum_rules`).
    rules.extend(super::shared::sum_rules());
    rules.extend([
        Rule {
            name: "local_useless_reduce",
            tracks: &[OpKind::CAReduce],
            apply: local_useless_reduce,
            fast_compile: true,
        },
        Rule {
            name: "local_cast_cast",
            tracks: ELEMWISE_ALL,
            apply: local_cast_cast,
            fast_compile: true,
        },
        Rule {
            name: "local_merge_switch_same_cond",
            tracks: ELEMWISE_ALL,
            apply: local_merge_switch_same_cond,
            fast_compile: false,
        },
        Rule {
            name: "local_abs_lift",
            tracks: kinds!(Abs),
            apply: local_abs_lift,
            fast_compile: false,
        },
        Rule {
            name: "local_shape_i_static",
            tracks: &[OpKind::ShapeI, OpKind::Shape],
            apply: local_shape_i_static,
            fast_compile: true,
        },
    ]);
    rules
}

/// The final rule of canonicalize: a node whose inputs are all constants is
/// replaced by its value (Alloc and custom ops are never folded: an Alloc's
/// value is cheaper to rebuild than to store).
pub fn constant_folding(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let node = fg.node(n);
    if matches!(node.op, Op::Alloc | Op::Custom(_)) || node.outputs.len() != 1 {
        return Ok(None);
    }
    let Some(values) = node
        .inputs
        .iter()
        .map(|&i| fg.constant_value(i))
        .collect::<Option<Vec<&Value>>>()
    else {
        return Ok(None);
    };
    let types: Vec<_> = node.inputs.iter().map(|&i| fg.ty(i)).collect();
    // A node that fails at run time on its constants (e.g. a shape mismatch) is left alone.
    let Ok(mut out) = crate::eval::perform(&node.op, &values, &types) else {
        return Ok(None);
    };
    let v = out.remove(0);
    Ok(Some(fg.constant(v)))
}

fn out_of(fg: &FunctionGraph, n: NodeId) -> VarId {
    fg.node(n).outputs[0]
}

fn scalar_of(fg: &FunctionGraph, n: NodeId) -> Option<ScalarOp> {
    fg.node(n).op.scalar_op()
}

/// `local_mul_canonizer`: the AlgebraicCanonizer over mul / true_div / reciprocal.
pub fn local_mul_canonizer(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    AlgebraicCanonizer::MUL.transform(fg, n)
}

/// `local_add_canonizer`: the AlgebraicCanonizer over add / sub / neg.
pub fn local_add_canonizer(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    AlgebraicCanonizer::ADD.transform(fg, n)
}

/// PyTensor's `local_greedy_distributor`: distributes the factors of a
/// product or quotient into a sum among them when that saves
/// multiplications and divisions (a division counts 2):
/// `(a / x + b / y) * x * y -> a * y + b * x`, `(a / x + b) * x -> a + b * x`,
/// `(x * y + x * z) / x -> y + z`. It never distributes `(a + b) * x` (that
/// adds work). Like the canonizer it acts only at the root of a mul/div cluster.
pub fn local_greedy_distributor(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let mul = AlgebraicCanonizer::MUL;
    let out = out_of(fg, n);
    let out_ty = fg.ty(out).clone();
    if !out_ty.dtype.is_float() || fg.clients(out).is_empty() || mul.is_cluster_inner(fg, out) {
        return Ok(None);
    }
    let (mut num, mut denum) = mul.get_num_denum(fg, out);
    if num.len() == 1 && denum.is_empty() {
        return Ok(None);
    }
    let mut change = false;
    let (mut new_num, mut new_denum) = (Vec::new(), Vec::new());
    for side in [true, false] {
        // A snapshot: distributing moves factors out of both lists.
        let candidates: SmallVec<[VarId; 8]> = if side {
            SmallVec::from_slice(&num)
        } else {
            SmallVec::from_slice(&denum)
        };
        for cand in candidates {
            let (this, other) = if side {
                (&mut num, &mut denum)
            } else {
                (&mut denum, &mut num)
            };
            let Some(pos) = this.iter().position(|&v| v == cand) else {
                continue;
            };
            this.remove(pos);
            // A factor that is no sum has nothing to distribute into; nor has
            // a sum in another dtype (an integer `-x` wraps: `-x_u8 / x` is
            // `(256 - x) / x`, not `-1`).
            let (c, factor) =
                if AlgebraicCanonizer::ADD.is_leaf(fg, cand) || fg.ty(cand).dtype != out_ty.dtype {
                    (false, cand)
                } else {
                    attempt_distribution(fg, cand, this, other, out_ty.dtype)?
                };
            change |= c;
            if side {
                new_num.push(factor);
            } else {
                new_denum.push(factor);
            }
        }
    }
    if !change {
        return Ok(None);
    }
    new_num.extend(num);
    new_denum.extend(denum);
    let new = mul.merge_num_denum(fg, &new_num, &new_denum, out_ty.dtype)?;
    // The original factors (the rewrites above only added detached nodes).
    let (leaf_num, leaf_denum) = mul.get_num_denum(fg, out);
    finish_cluster(fg, new, &out_ty, leaf_num, leaf_denum)
}

/// A rebuilt cluster `new` adapted to the type `out_ty` of the cluster it
/// replaces, its shape filled from the original's non-constant leaves
/// (`num` and `denum`, the terms or factors on either side); `None` when
/// the types cannot be reconciled.
fn finish_cluster(
    fg: &mut FunctionGraph,
    new: VarId,
    out_ty: &TensorType,
    mut num: Vec<VarId>,
    denum: Vec<VarId>,
) -> Result<Option<VarId>> {
    num.extend(denum);
    num.retain(|&v| fg.constant_value(v).is_none());
    let new = match_type(fg, new, out_ty, &num)?;
    Ok(out_ty.accepts_replacement(fg.ty(new)).then_some(new))
}

/// kiln's `local_add_common_denominator` (PyTensor has none): the terms of a
/// float sum that share a divisor are summed first and divided once,
/// `a / c + b / c - d / c + e -> (a + b - d) / c + e`: one division per
/// element instead of one per term. The gradient of a `mean` divides every
/// branch by the count (`-mean(t·log σ(z) + (1 - t)·log(1 - σ(z)))`'s
/// gradient has two such quotients). A reassociation (rule 5: the sum
/// overflows first beyond 1e150). Acts at the root of an add/sub cluster,
/// on the divisor shared by the most terms (the first of them on a tie);
/// the distributor never undoes it, as splitting a quotient of a sum adds
/// divisions.
pub fn local_add_common_denominator(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let (add, mul) = (AlgebraicCanonizer::ADD, AlgebraicCanonizer::MUL);
    let out = out_of(fg, n);
    let out_ty = fg.ty(out).clone();
    if !out_ty.dtype.is_float() || fg.clients(out).is_empty() || add.is_cluster_inner(fg, out) {
        return Ok(None);
    }
    let (pos, neg) = add.get_num_denum(fg, out);
    // Each term with its sign and its factors; terms of another dtype stay
    // whole (their arithmetic is not the sum's).
    let terms: Vec<(bool, VarId, Vec<VarId>, Vec<VarId>)> = pos
        .iter()
        .map(|&t| (true, t))
        .chain(neg.iter().map(|&t| (false, t)))
        .map(|(sign, t)| {
            let (num, denum) = if fg.ty(t).dtype == out_ty.dtype {
                mul.get_num_denum(fg, t)
            } else {
                (vec![t], vec![])
            };
            (sign, t, num, denum)
        })
        .collect();
    let mut best: Option<(VarId, usize)> = None;
    for (_, _, _, denum) in &terms {
        for &c in denum {
            if best.is_some_and(|(b, _)| b == c) {
                continue;
            }
            let shared = terms.iter().filter(|t| t.3.contains(&c)).count();
            if shared >= 2 && best.is_none_or(|(_, k)| shared > k) {
                best = Some((c, shared));
            }
        }
    }
    let Some((c, _)) = best else {
        return Ok(None);
    };
    let (mut group_pos, mut group_neg) = (Vec::new(), Vec::new());
    let (mut rest_pos, mut rest_neg) = (Vec::new(), Vec::new());
    for (sign, t, num, mut denum) in terms {
        let Some(k) = denum.iter().position(|&d| d == c) else {
            if sign {
                rest_pos.push(t);
            } else {
                rest_neg.push(t);
            }
            continue;
        };
        denum.remove(k);
        let numerator = mul.merge_num_denum(fg, &num, &denum, out_ty.dtype)?;
        if sign {
            group_pos.push(numerator);
        } else {
            group_neg.push(numerator);
        }
    }
    let sum = add.merge_num_denum(fg, &group_pos, &group_neg, out_ty.dtype)?;
    let quotient = mul.merge_num_denum(fg, &[sum], &[c], out_ty.dtype)?;
    rest_pos.insert(0, quotient);
    let new = add.merge_num_denum(fg, &rest_pos, &rest_neg, out_ty.dtype)?;
    finish_cluster(fg, new, &out_ty, pos, neg)
}

/// Tries to move each of `num` and `denum` into the sum `factor`; returns
/// whether anything moved and the new factor (`num` and `denum` keep what
/// could not be distributed).
fn attempt_distribution(
    fg: &mut FunctionGraph,
    factor: VarId,
    num: &mut Vec<VarId>,
    denum: &mut Vec<VarId>,
    dtype: DType,
) -> Result<(bool, VarId)> {
    let (mul, add) = (AlgebraicCanonizer::MUL, AlgebraicCanonizer::ADD);
    let (pos, neg) = add.get_num_denum(fg, factor);
    if pos.len() == 1 && neg.is_empty() {
        return Ok((false, factor));
    }
    let mut pos_pairs: Vec<(Vec<VarId>, Vec<VarId>)> =
        pos.iter().map(|&t| mul.get_num_denum(fg, t)).collect();
    let mut neg_pairs: Vec<(Vec<VarId>, Vec<VarId>)> =
        neg.iter().map(|&t| mul.get_num_denum(fg, t)).collect();
    let mut change = false;
    for (is_num, list) in [(true, num.clone()), (false, denum.clone())] {
        for v in list {
            let (n_add, d_add) = if is_num {
                (vec![v], vec![])
            } else {
                (vec![], vec![v])
            };
            if let Some((p, q)) =
                distribute_greedy(fg, &pos_pairs, &neg_pairs, &n_add, &d_add, dtype)
            {
                pos_pairs = p;
                neg_pairs = q;
                change = true;
                let l = if is_num { &mut *num } else { &mut *denum };
                if let Some(k) = l.iter().position(|&x| x == v) {
                    l.remove(k);
                }
            }
        }
    }
    if !change {
        return Ok((false, factor));
    }
    let build =
        |fg: &mut FunctionGraph, pairs: &[(Vec<VarId>, Vec<VarId>)]| -> Result<Vec<VarId>> {
            pairs
                .iter()
                .map(|(n, d)| mul.merge_num_denum(fg, n, d, dtype))
                .collect()
        };
    let p = build(fg, &pos_pairs)?;
    let q = build(fg, &neg_pairs)?;
    Ok((true, add.merge_num_denum(fg, &p, &q, dtype)?))
}

type Pairs = Vec<(Vec<VarId>, Vec<VarId>)>;

/// Adds `num` / `denum` to every term of the sum and keeps the result when
/// it saves operations (PyTensor's `distribute_greedy`, division cost 2).
fn distribute_greedy(
    fg: &mut FunctionGraph,
    pos_pairs: &Pairs,
    neg_pairs: &Pairs,
    num: &[VarId],
    denum: &[VarId],
    dtype: DType,
) -> Option<(Pairs, Pairs)> {
    const DIV_COST: isize = 2;
    let mul = AlgebraicCanonizer::MUL;
    let extended = |n: &[VarId], d: &[VarId]| {
        let nn: SmallVec<[VarId; 16]> = n.iter().chain(num).copied().collect();
        let dd: SmallVec<[VarId; 16]> = d.iter().chain(denum).copied().collect();
        (nn, dd)
    };
    // Score first (without building): most attempts do not pay.
    let mut score = num.len() as isize + DIV_COST * denum.len() as isize;
    for (n, d) in pos_pairs.iter().chain(neg_pairs) {
        let (nn, dd) = extended(n, d);
        let (ln, ld) = mul.simplified_len(fg, &nn, &dd, dtype);
        score +=
            n.len() as isize + DIV_COST * d.len() as isize - ln as isize - DIV_COST * ld as isize;
    }
    if score <= 0 {
        return None;
    }
    let extend = |fg: &mut FunctionGraph, pairs: &Pairs| -> Pairs {
        pairs
            .iter()
            .map(|(n, d)| {
                let (nn, dd) = extended(n, d);
                mul.simplify(fg, nn.to_vec(), dd.to_vec(), dtype)
            })
            .collect()
    };
    let p = extend(fg, pos_pairs);
    let q = extend(fg, neg_pairs);
    Some((p, q))
}

/// Removes element-wise nodes that compute nothing: `add(x)`, `mul(x)`,
/// `identity(x)`, `cast{d}(x)` of a `d` tensor, `maximum(x, x)`, `and(x, x)`,
/// `switch(c, x, x)`, `switch` on a constant condition, comparisons of an
/// integer tensor with itself (`x == x` is all true) and strict ones of any
/// tensor (`x < x` is false, NaN included; a float `x == x` is NaN's test
/// and stays), `isnan` / `isinf` (false) and `isfinite` (true) of an integer
/// or bool tensor, and `trunc` / `floor` / `ceil` / `round` of one (itself).
pub fn local_useless_elemwise(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    use ScalarOp::*;
    let Some(op) = scalar_of(fg, n) else {
        return Ok(None);
    };
    let node = fg.node(n);
    let ins = node.inputs.to_vec();
    let out = out_of(fg, n);
    let out_ty = fg.ty(out).clone();
    let same = ins.len() == 2 && ins[0] == ins[1];
    let new = match op {
        Add | Mul if ins.len() == 1 => ins[0],
        Identity => ins[0],
        Cast(d) if fg.ty(ins[0]).dtype == d => ins[0],
        Maximum | Minimum | And | Or if same => ins[0],
        Eq | Ge | Le if same && !fg.ty(ins[0]).dtype.is_float() => {
            let t = scalar_const(fg, DType::Bool, 1.0);
            return match_type(fg, t, &out_ty, &ins).map(Some);
        }
        // `x < x` is false for NaN too; `x != x` is NaN's own test.
        Gt | Lt if same => {
            let f = scalar_const(fg, DType::Bool, 0.0);
            return match_type(fg, f, &out_ty, &ins).map(Some);
        }
        Neq if same && !fg.ty(ins[0]).dtype.is_float() => {
            let f = scalar_const(fg, DType::Bool, 0.0);
            return match_type(fg, f, &out_ty, &ins).map(Some);
        }
        // Integers and bools are never NaN or infinite, and rounding them is exact.
        IsNan | IsInf | IsFinite if !fg.ty(ins[0]).dtype.is_float() => {
            let t = scalar_const(fg, DType::Bool, if op == IsFinite { 1.0 } else { 0.0 });
            return match_type(fg, t, &out_ty, &ins).map(Some);
        }
        Trunc | Floor | Ceil | Round if !fg.ty(ins[0]).dtype.is_float() => ins[0],
        Switch if ins[1] == ins[2] => ins[1],
        Switch => match unique_constant(fg, ins[0]) {
            Some(c) if !c.is_nan() => {
                if c != 0.0 {
                    ins[1]
                } else {
                    ins[2]
                }
            }
            _ => return Ok(None),
        },
        _ => return Ok(None),
    };
    let new = match_type(fg, new, &out_ty, &ins)?;
    Ok(out_ty.accepts_replacement(fg.ty(new)).then_some(new))
}

/// `-x -> -1 * x`, so that the mul canonizer sees signs as constants. Not
/// for a `bool` `x` (whose negation is an `i64`): the add canonizer reads
/// `-1 * x` as `-x` only when `x` has the product's type, so the sum would
/// lose the sign term it sees in `neg(x)` and regain it after specialize.
pub fn local_neg_to_mul(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let x = fg.node(n).inputs[0];
    let dtype = fg.ty(out_of(fg, n)).dtype;
    // An unsigned dtype cannot hold -1 (the constant would saturate to 0).
    if fg.ty(x).dtype != dtype || dtype.is_unsigned() {
        return Ok(None);
    }
    let m1 = scalar_const(fg, dtype, -1.0);
    elemwise(fg, ScalarOp::Mul, &[m1, x]).map(Some)
}

/// `x - (-y) -> x + y`, when the negation has the difference's dtype (an
/// integer negation under a float difference wraps at the minimum: `-MIN`
/// is `MIN`, so `x - neg(MIN)` is `x + 2^63`, not `x + MIN`; the add
/// canonizer stops at that dtype change too).
pub fn local_sub_neg_to_add(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let ins = fg.node(n).inputs.to_vec();
    let Some(neg) = owner_if(fg, ins[1], ScalarOp::Neg) else {
        return Ok(None);
    };
    let y = fg.node(neg).inputs[0];
    let out_ty = fg.ty(out_of(fg, n)).clone();
    if fg.ty(ins[1]).dtype != out_ty.dtype {
        return Ok(None);
    }
    let new = elemwise(fg, ScalarOp::Add, &[ins[0], y])?;
    match_type(fg, new, &out_ty, &ins).map(Some)
}

/// `x * 0 -> fill(x, 0)`.
pub fn local_mul_zero(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let ins = fg.node(n).inputs.to_vec();
    if !ins.iter().any(|&i| is_constant_equal(fg, i, 0.0)) {
        return Ok(None);
    }
    let out_ty = fg.ty(out_of(fg, n)).clone();
    let zero = scalar_const(fg, out_ty.dtype, 0.0);
    match_type(fg, zero, &out_ty, &ins).map(Some)
}

/// `x ** 0 -> fill(x, 1)` and `x ** 1 -> x`.
pub fn local_pow_canonicalize(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let ins = fg.node(n).inputs.to_vec();
    let out_ty = fg.ty(out_of(fg, n)).clone();
    let new = match unique_constant(fg, ins[1]) {
        Some(0.0) => scalar_const(fg, out_ty.dtype, 1.0),
        Some(1.0) => ins[0],
        _ => return Ok(None),
    };
    match_type(fg, new, &out_ty, &ins).map(Some)
}

/// `reciprocal(x) -> x ** -1` (specialize turns it back into the cheapest form).
pub fn local_reciprocal_canon(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let x = fg.node(n).inputs[0];
    let dtype = fg.ty(out_of(fg, n)).dtype;
    let m1 = scalar_const(fg, dtype, -1.0);
    elemwise(fg, ScalarOp::Pow, &[x, m1]).map(Some)
}

/// `x / 1 -> x` (and `x // 1 -> x` for integers).
pub fn local_div_by_one(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let ins = fg.node(n).inputs.to_vec();
    let out_ty = fg.ty(out_of(fg, n)).clone();
    if !is_constant_equal(fg, ins[1], 1.0) {
        return Ok(None);
    }
    if fg.node(n).op.is_elemwise(ScalarOp::IntDiv) && fg.ty(ins[0]).dtype.is_float() {
        return Ok(None); // floor(x / 1) is not x for floats
    }
    let new = match_type(fg, ins[0], &out_ty, &ins)?;
    Ok(out_ty.accepts_replacement(fg.ty(new)).then_some(new))
}

/// `fill(a, b) -> b` when `b` already has the output's dtype and broadcast pattern.
pub fn local_useless_fill(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let b = fg.node(n).inputs[1];
    let out_ty = fg.ty(out_of(fg, n));
    let b_ty = fg.ty(b);
    let useless = b_ty.dtype == out_ty.dtype && b_ty.broadcastable() == out_ty.broadcastable();
    Ok((useless && out_ty.accepts_replacement(b_ty)).then_some(b))
}

/// Casts constant inputs of an element-wise op to the dtype the op computes
/// in, so that later rules and fusion see uniform dtypes.
pub fn local_upcast_elemwise_constant_inputs(
    fg: &mut FunctionGraph,
    n: NodeId,
) -> Result<Option<VarId>> {
    use ScalarOp::*;
    let Some(op) = scalar_of(fg, n) else {
        return Ok(None);
    };
    if matches!(
        op,
        Cast(_) | Second | Switch | And | Or | Xor | Invert | IntDiv | Mod | Pow
    ) || op.is_comparison()
    {
        return Ok(None);
    }
    let out_dtype = fg.ty(out_of(fg, n)).dtype;
    let other_dtype = |i: &VarId| {
        fg.constant_value(*i)
            .is_some_and(|v| v.dtype() != out_dtype)
    };
    if !fg.node(n).inputs.iter().any(other_dtype) {
        return Ok(None);
    }
    let ins = fg.node(n).inputs.to_vec();
    let out_ty = fg.ty(out_of(fg, n)).clone();
    let mut changed = false;
    let mut new_ins = Vec::with_capacity(ins.len());
    for &i in &ins {
        match fg.constant_value(i) {
            Some(v) if v.dtype() != out_ty.dtype => {
                let cast = v.cast(out_ty.dtype);
                if cast.cast(v.dtype()).same_as(v) {
                    changed = true;
                    new_ins.push(fg.constant(cast));
                } else {
                    new_ins.push(i);
                }
            }
            _ => new_ins.push(i),
        }
    }
    if !changed {
        return Ok(None);
    }
    let new = fg.apply1(Op::elemwise(op), &new_ins)?;
    Ok(out_ty.accepts_replacement(fg.ty(new)).then_some(new))
}

/// `log(exp(x)) -> x`, `log1p(expm1(x)) -> x`, `exp(log(x)) -> switch(x >= 0, x, nan)`,
/// `expm1(log1p(x)) -> switch(x >= -1, x, nan)`.
pub fn local_exp_log(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    use ScalarOp::*;
    let Some(outer) = scalar_of(fg, n) else {
        return Ok(None);
    };
    let x_in = fg.node(n).inputs[0];
    let out_ty = fg.ty(out_of(fg, n)).clone();
    let Some(inner_node) = fg.owner(x_in) else {
        return Ok(None);
    };
    let Some(inner) = scalar_of(fg, inner_node) else {
        return Ok(None);
    };
    let x = fg.node(inner_node).inputs[0];
    if fg.ty(x).dtype != out_ty.dtype {
        return Ok(None);
    }
    let guarded = |fg: &mut FunctionGraph, lo: f64| -> Result<VarId> {
        let bound = scalar_const(fg, out_ty.dtype, lo);
        let cond = elemwise(fg, Ge, &[x, bound])?;
        let nan = scalar_const(fg, out_ty.dtype, f64::NAN);
        elemwise(fg, Switch, &[cond, x, nan])
    };
    let new = match (outer, inner) {
        (Log, Exp) | (Log1p, Expm1) => x,
        (Exp, Log) => guarded(fg, 0.0)?,
        (Expm1, Log1p) => guarded(fg, -1.0)?,
        _ => return Ok(None),
    };
    Ok(out_ty.accepts_replacement(fg.ty(new)).then_some(new))
}

/// `sum(sum(x, a), b) -> sum(x, a ∪ b)` (same for every reduction) when the
/// inner reduction has no other client.
pub fn local_reduce_chain(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Op::CAReduce {
        op,
        axes: outer_axes,
    } = fg.node(n).op.clone()
    else {
        return Ok(None);
    };
    let y = fg.node(n).inputs[0];
    let Some(inner) = fg.owner(y) else {
        return Ok(None);
    };
    let Op::CAReduce {
        op: inner_op,
        axes: inner_axes,
    } = fg.node(inner).op.clone()
    else {
        return Ok(None);
    };
    if inner_op != op || !single_client(fg, y) {
        return Ok(None);
    }
    let x = fg.node(inner).inputs[0];
    let nd = fg.ty(x).ndim();
    let inner_set: Vec<usize> = inner_axes.clone().unwrap_or_else(|| (0..nd).collect());
    let kept: Vec<usize> = (0..nd).filter(|d| !inner_set.contains(d)).collect();
    let outer_set: Vec<usize> = outer_axes.unwrap_or_else(|| (0..kept.len()).collect());
    let mut all: Vec<usize> = inner_set
        .into_iter()
        .chain(outer_set.iter().map(|&k| kept[k]))
        .collect();
    all.sort_unstable();
    all.dedup();
    let axes = if all.len() == nd { None } else { Some(all) };
    let out_ty = fg.ty(out_of(fg, n)).clone();
    let new = fg.apply1(Op::CAReduce { op, axes }, &[x])?;
    Ok(out_ty.accepts_replacement(fg.ty(new)).then_some(new))
}

/// A reduction over every axis listed explicitly becomes `axes=None`.
pub fn local_sum_prod_all_to_none(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Op::CAReduce {
        op,
        axes: Some(axes),
    } = fg.node(n).op.clone()
    else {
        return Ok(None);
    };
    let x = fg.node(n).inputs[0];
    if axes.len() != fg.ty(x).ndim() || axes.is_empty() {
        return Ok(None);
    }
    fg.apply1(Op::CAReduce { op, axes: None }, &[x]).map(Some)
}

/// Removes reductions that reduce nothing: over no axis (a cast), or over
/// axes of static size 1 (dropped with a DimShuffle).
pub fn local_useless_reduce(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Op::CAReduce { op, axes } = fg.node(n).op.clone() else {
        return Ok(None);
    };
    let x = fg.node(n).inputs[0];
    let x_ty = fg.ty(x).clone();
    let out_ty = fg.ty(out_of(fg, n)).clone();
    let axes: Vec<usize> = axes.unwrap_or_else(|| (0..x_ty.ndim()).collect());
    let unit: Vec<usize> = axes
        .iter()
        .copied()
        .filter(|&a| x_ty.is_broadcastable(a))
        .collect();
    if unit.is_empty() && !axes.is_empty() {
        return Ok(None);
    }
    let order: Vec<Option<usize>> = (0..x_ty.ndim())
        .filter(|d| !unit.contains(d))
        .map(Some)
        .collect();
    let mut new = if unit.is_empty() {
        x
    } else {
        fg.apply1(
            Op::DimShuffle {
                input_ndim: x_ty.ndim(),
                new_order: order,
            },
            &[x],
        )?
    };
    let rest: Vec<usize> = axes
        .iter()
        .filter(|a| !unit.contains(a))
        .map(|&a| a - unit.iter().filter(|&&u| u < a).count())
        .collect();
    if !rest.is_empty() {
        new = fg.apply1(
            Op::CAReduce {
                op,
                axes: Some(rest),
            },
            &[new],
        )?;
    } else if matches!(op, ReduceOp::All | ReduceOp::Any) || fg.ty(new).dtype != out_ty.dtype {
        new = fg.apply1(Op::elemwise(ScalarOp::Cast(out_ty.dtype)), &[new])?;
    }
    Ok(out_ty.accepts_replacement(fg.ty(new)).then_some(new))
}

/// True when every value of `from` is exactly representable in `to`.
pub fn lossless(from: DType, to: DType) -> bool {
    use DType::*;
    if from == to || from == Bool {
        return true;
    }
    match to {
        F64 => matches!(from, U8 | I8 | U16 | I16 | U32 | I32 | F32),
        F32 => matches!(from, U8 | I8 | U16 | I16),
        I64 => matches!(from, U8 | I8 | U16 | I16 | U32 | I32),
        I32 => matches!(from, U8 | I8 | U16 | I16),
        I16 => matches!(from, U8 | I8),
        U64 => matches!(from, U8 | U16 | U32),
        U32 => matches!(from, U8 | U16),
        U16 => matches!(from, U8),
        _ => false,
    }
}

/// `cast{d2}(cast{d1}(x)) -> cast{d2}(x)` when the inner cast is lossless
/// (and `-> x` when `d2` is `x`'s dtype).
pub fn local_cast_cast(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(ScalarOp::Cast(d2)) = scalar_of(fg, n) else {
        return Ok(None);
    };
    let mid = fg.node(n).inputs[0];
    let Some(inner) = fg.owner(mid) else {
        return Ok(None);
    };
    let Some(ScalarOp::Cast(d1)) = scalar_of(fg, inner) else {
        return Ok(None);
    };
    let x = fg.node(inner).inputs[0];
    let d0 = fg.ty(x).dtype;
    if !lossless(d0, d1) {
        return Ok(None);
    }
    // Float to integer saturates where integer to integer wraps: through a
    // float, `i8 -3 -> f64 -> u8` gives 0, directly 253. Only when every
    // value of `x` fits the target do both agree.
    if d0.is_int() && d1.is_float() && d2.is_int() && !lossless(d0, d2) {
        return Ok(None);
    }
    if d0 == d2 {
        return Ok(Some(x));
    }
    fg.apply1(Op::elemwise(ScalarOp::Cast(d2)), &[x]).map(Some)
}

/// `f(switch(c, a, b), switch(c, x, y)) -> switch(c, f(a, x), f(b, y))`
/// when every branch has its switch's dtype.
pub fn local_merge_switch_same_cond(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Some(op) = scalar_of(fg, n) else {
        return Ok(None);
    };
    let ins = fg.node(n).inputs.to_vec();
    if op == ScalarOp::Switch || ins.len() < 2 {
        return Ok(None);
    }
    let switches: Option<Vec<NodeId>> = ins
        .iter()
        .map(|&i| owner_if(fg, i, ScalarOp::Switch))
        .collect();
    let Some(switches) = switches else {
        return Ok(None);
    };
    let cond = fg.node(switches[0]).inputs[0];
    if switches.iter().any(|&s| fg.node(s).inputs[0] != cond) {
        return Ok(None);
    }
    // `f` must keep computing in the switches' dtypes: a branch the switch
    // upcasts would make `f` compute in the branch's dtype (`k ** k` of an
    // i64 branch truncates `(-2) ** -2` to 0 where the f64 switch gives 0.25).
    let upcast = |s: NodeId| {
        let node = fg.node(s);
        let d = fg.ty(node.outputs[0]).dtype;
        node.inputs[1..].iter().any(|&b| fg.ty(b).dtype != d)
    };
    if switches.iter().any(|&s| upcast(s)) {
        return Ok(None);
    }
    let a: Vec<VarId> = switches.iter().map(|&s| fg.node(s).inputs[1]).collect();
    let b: Vec<VarId> = switches.iter().map(|&s| fg.node(s).inputs[2]).collect();
    let out_ty = fg.ty(out_of(fg, n)).clone();
    let fa = elemwise(fg, op, &a)?;
    let fb = elemwise(fg, op, &b)?;
    let new = elemwise(fg, ScalarOp::Switch, &[cond, fa, fb])?;
    let new = match_type(fg, new, &out_ty, &ins)?;
    Ok(out_ty.accepts_replacement(fg.ty(new)).then_some(new))
}

/// `abs(x * y) -> abs(x) * abs(y)`, `abs(x / y) -> abs(x) / abs(y)` when the
/// product has no other client and every factor is a float: the absolute
/// value of a signed integer wraps at its minimum (`abs(-128_i8)` is -128),
/// where the original took it of a float (`abs(c_i8 / 1.0)` is 128).
pub fn local_abs_lift(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let x = fg.node(n).inputs[0];
    let Some(inner) = fg.owner(x) else {
        return Ok(None);
    };
    let Some(op @ (ScalarOp::Mul | ScalarOp::TrueDiv)) = scalar_of(fg, inner) else {
        return Ok(None);
    };
    if !single_client(fg, x) {
        return Ok(None);
    }
    let ins = fg.node(inner).inputs.to_vec();
    if ins.iter().any(|&i| !fg.ty(i).dtype.is_float()) {
        return Ok(None);
    }
    let out_ty = fg.ty(out_of(fg, n)).clone();
    let abs: Vec<VarId> = ins
        .iter()
        .map(|&i| elemwise(fg, ScalarOp::Abs, &[i]))
        .collect::<Result<_>>()?;
    let new = elemwise(fg, op, &abs)?;
    Ok(out_ty.accepts_replacement(fg.ty(new)).then_some(new))
}

/// `Shape_i{k}(x)` and `Shape(x)` become constants when the sizes are static.
pub fn local_shape_i_static(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    if fg.node(n).inputs.len() != 1 {
        // A broadcast's size (`Shape_i` of several inputs) keeps its check.
        return Ok(None);
    }
    let x = fg.node(n).inputs[0];
    let shape = fg.ty(x).shape.clone();
    let value = match fg.node(n).op {
        Op::ShapeI(k) => match shape[k] {
            Some(s) => Value::scalar_i64(DType::I64, s as i64),
            None => return Ok(None),
        },
        Op::Shape => match shape.iter().copied().collect::<Option<Vec<usize>>>() {
            Some(s) => Value::I64(
                ndarray::ArrayD::from_shape_vec(
                    vec![s.len()],
                    s.iter().map(|&d| d as i64).collect(),
                )
                .expect("1-d"),
            ),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    Ok(Some(fg.constant(value)))
}

/// The rules on arg-reductions (defined in `argreduce.rs`).
fn argreduce_rules() -> Vec<Rule> {
    vec![
        Rule {
            name: "local_argmax_neg",
            tracks: &[OpKind::ArgReduce],
            apply: super::argreduce::local_argmax_neg,
            fast_compile: true,
        },
        Rule {
            name: "local_argmax_exact_cast",
            tracks: &[OpKind::ArgReduce],
            apply: super::argreduce::local_argmax_exact_cast,
            fast_compile: true,
        },
    ]
}
