//! Taint: which elements of each output of a graph have a reference value
//! that FAST_RUN may change, because a rewrite that was applied
//! ([`Licenses`], from the compiled function's rewrite log) or the linker's
//! reduction contract licenses it. Each source names what licenses it:
//!
//! - **NaN** (licensed by a cancelling rewrite, [`CANCELLING`]): an input
//!   NaN or one computed on the way (`0 / 0`). Rule 5 of
//!   `src/rewrites/README.md` lets a rewrite turn a NaN that comes only from
//!   cancellation into the finite value of the simplified expression
//!   (`x / x -> 1`, as PyTensor does); downstream of a comparison or a cast
//!   that NaN can become any finite or integer value (`neg(x < k / k)`).
//!   With no cancelling rewrite applied, a NaN must stay NaN.
//! - **Order-sensitive products** (the linker's reduction contract,
//!   `src/linker/codegen/reduce.rs`: reductions in any order): a `Prod` reduction
//!   some of whose partial products, in some order, can leave 1e±150.
//! - **Reassociation out of range**: an element of a sum, difference,
//!   product, quotient or reciprocal (licensed by a reassociating rewrite,
//!   [`REASSOCIATING`]) or of a reduction or matrix product (the linker's
//!   contract) some of whose operands or whose value lies outside 1e±150
//!   (infinities included): the range within which rule 5 promises that
//!   reassociation changes values by rounding only. Outside it, the sign
//!   and finiteness of an infinite result are not settled either.
//! - **Ill-conditioned remainders and periodic functions** (licensed by
//!   whatever licenses the rounding of their operand): a float `mod` or
//!   `floor_div` whose dividend is more than 1e4 times its divisor, whose
//!   quotient is within rounding of an integer, or whose dividend's
//!   rounding bound (a few ULPs per term of a 300-term sum or product)
//!   exceeds the tolerance at the result, `sin`, `cos`, `tan` of a
//!   rounded argument beyond 1e4 or near a pole of `tan`.
//! - **Signs not settled** (licensed by whatever licenses the rounding of
//!   the operand, or always for a computed NaN, whose sign IEEE leaves
//!   unspecified): `copysign(a, b)` at a rounded `b` near zero or a computed
//!   NaN `b`, `arctan2(y, x)` at a rounded operand near its branch cut.
//! - **Ill-conditioned sums** (the linker's reduction contract, and any
//!   rewrite that rounds a summand differently): a float `Sum`, `Dot` or
//!   `BatchedDot` element, or an element-wise `add` / `sub` when a reassociating rewrite
//!   was applied (`(k - x) + (k' - x')` regrouped as `(k + k') - (x + x')`
//!   at `x' = -x = 1e20`), whose `Σ|terms|` is so much larger than its value that a few
//!   ULPs of rounding in the terms, or a different summation order, can
//!   move it beyond the comparison's tolerance (`sum(k / 3)` over
//!   `±i64::MAX` terms near 3e18 whose value is 210: one ULP of a term is
//!   512, `k * (1/3)` and `k / 3` round differently). Not a skip: such an
//!   element is compared within that error bound ([`Taint::slack`]), finite
//!   for finite and NaN for NaN; only the elements computed *from* it are
//!   unsettled.
//! - **Infinities created between inverses** (licensed by a rewrite removing
//!   a function and its inverse, [`INVERSES`]): the result of an exponential,
//!   logarithmic, hyperbolic or error function that takes or feeds such a
//!   function's result, infinite or NaN while its operands are finite
//!   (`log(exp(-1e300))` is `log(0) = -inf`, `log(exp(1e300))` is
//!   `log(inf)`; `log(exp(x)) -> x` gives ±1e300). `exp(1000)` of an
//!   input and not fed to such a function stays compared.
//! - **Near ties of arg-reductions** (licensed by whatever licenses the
//!   rounding of their input): an `argmax` / `argmin` lane in which a
//!   second element lies within the comparison's tolerance of the extreme.
//! - **Division by a computed zero** (licensed by a rewrite that drops the
//!   sign of a zero, [`ZERO_SIGN`]): rule 5 frees the sign of a zero, hence
//!   of the infinity a division by it gives.
//! - **`x ** ±0.5`, `x ** 1.5`, `x ** 2.5` at `x = -inf`** (licensed by `local_pow_specialize`,
//!   which makes it `sqrt`): README rule 5's documented exception.
//!
//! Rounding (not a skip, a tolerance): elements that depend on runtime
//! functions or `pow` (always), on reductions and `dot` (always), or on
//! reassociable arithmetic when a reassociating rewrite was applied.
//!
//! The taint is exact element-wise through Elemwise, Composite, DimShuffle,
//! Reshape, reductions, arg-reductions, softmax and logsumexp (per lane), cumulative
//! ops (per lane prefix), Dot and BatchedDot; any other op taints its whole output when an
//! input is tainted.

use super::exact::{batched_dot_abs, dot_abs, gamma, reduce, unit};
use kiln::eval::perform;
use kiln::ops::{InplacePattern, Op};
use kiln::{DType, FunctionGraph, ReduceOp, TensorType, Value};
use ndarray::{ArrayD, IxDyn};
use std::collections::HashMap;

/// Rewrites that can turn a NaN or infinity that comes only from
/// cancellation into a finite value (rule 5): `x * 0 -> 0`, `x - x -> 0`,
/// `x / x -> 1`, inverse-function pairs, exponent and logarithm algebra,
/// stabilisations.
pub const CANCELLING: &[&str] = &[
    "local_add_common_denominator",
    "local_mul_zero",
    "local_zero_div",
    "local_div_abs_to_sign",
    "local_mul_switch_sink",
    "local_div_switch_sink",
    "local_elemwise_sub_zeros",
    "local_add_canonizer",
    "local_mul_canonizer",
    "local_greedy_distributor",
    "local_useless_elemwise",
    "local_exp_log",
    "local_func_inv",
    "local_neg_div_neg",
    "local_pow_canonicalize",
    "local_mul_pow_to_pow_add",
    "local_mul_exp_to_exp_add",
    "local_div_exp_to_mul_exp",
    "local_sum_prod_of_mul_or_div",
    "local_log_add_exp",
    "local_log_sum_exp",
    "local_sigm_times_exp",
    "local_1msigmoid",
    "local_exp_over_1_plus_exp",
    "local_expm1",
    "local_log1p",
    "local_log1p_plusminus_exp",
    "local_reciprocal_1_plus_exp",
    "log1msigm_to_softplus",
    "log1p_neg_sigmoid",
    "logmexpm1_to_log1mexp",
    "logsigm_to_softplus",
];

/// Rewrites that remove a function and its inverse, or fold exponentials
/// and logarithms into each other (`log(exp(x)) -> x`, the stabilize
/// group: `log(sigmoid(x)) -> -softplus(-x)`, `log(exp(a) + exp(b))`):
/// the original's infinity or NaN from an overflow, underflow or pole on
/// the way (`log(exp(-1e300)) = -inf`) becomes the finite value of the
/// simplified expression (rule 5).
pub const INVERSES: &[&str] = &[
    "local_exp_log",
    "local_func_inv",
    "local_1msigmoid",
    "local_exp_over_1_plus_exp",
    "local_expm1",
    "local_log1p",
    "local_log1p_plusminus_exp",
    "local_reciprocal_1_plus_exp",
    "log1msigm_to_softplus",
    "log1p_neg_sigmoid",
    "logmexpm1_to_log1mexp",
    "logsigm_to_softplus",
    "local_log_add_exp",
    "local_log_sum_exp",
    "local_sigm_times_exp",
    "local_mul_exp_to_exp_add",
    "local_div_exp_to_mul_exp",
    "local_log_erfc",
];

/// Rewrites that reassociate or redistribute arithmetic (flattened sums
/// and products, constants moved through sums, powers made products,
/// `z + c * dot` made a GEMM).
pub const REASSOCIATING: &[&str] = &[
    "local_add_common_denominator",
    "local_add_canonizer",
    "local_mul_canonizer",
    "local_greedy_distributor",
    "local_sum_prod_of_mul_or_div",
    "local_mul_pow_to_pow_add",
    "local_pow_to_nested_squaring",
    "local_mul_exp_to_exp_add",
    "local_div_exp_to_mul_exp",
    "local_reduce_chain",
    "local_careduce_fusion",
    "gemm_optimizer",
];

/// Rewrites that can change the sign of a zero: `x * 0 -> 0` (`-3 * 0` is
/// `-0`), `x + 0 -> x` (`-0 + 0` is `+0`), and the canonizers' folds.
pub const ZERO_SIGN: &[&str] = &[
    "local_add_common_denominator",
    "local_mul_zero",
    "local_zero_div",
    "local_mul_switch_sink",
    "local_div_switch_sink",
    "local_add_remove_zeros",
    "local_elemwise_sub_zeros",
    "local_add_canonizer",
    "local_mul_canonizer",
    "local_greedy_distributor",
];

/// Which taint sources the applied rewrites license (module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Licenses {
    /// A [`CANCELLING`] rewrite was applied.
    pub cancellation: bool,
    /// A [`REASSOCIATING`] rewrite was applied.
    pub reassociation: bool,
    /// An [`INVERSES`] rewrite was applied.
    pub inverses: bool,
    /// A [`ZERO_SIGN`] rewrite was applied.
    pub zero_sign: bool,
    /// `local_pow_specialize` was applied.
    pub sqrt_of_pow: bool,
}

impl Licenses {
    /// The licenses of the rewrites named in `fired`.
    pub fn from_fired(fired: &std::collections::HashSet<String>) -> Licenses {
        let any = |set: &[&str]| set.iter().any(|r| fired.contains(*r));
        Licenses {
            cancellation: any(CANCELLING),
            reassociation: any(REASSOCIATING),
            inverses: any(INVERSES),
            zero_sign: any(ZERO_SIGN),
            sqrt_of_pow: fired.contains("local_pow_specialize"),
        }
    }

    /// Every license (as if every rewrite had been applied).
    pub const ALL: Licenses = Licenses {
        cancellation: true,
        reassociation: true,
        inverses: true,
        zero_sign: true,
        sqrt_of_pow: true,
    };
}

/// What the comparison needs to know about one output's elements.
pub struct Taint {
    /// Elements whose reference value the mathematics does not settle (see
    /// the module docs): any value is accepted.
    pub unsettled: ArrayD<bool>,
    /// Elements that depend on `f32` arithmetic a rewrite or kernel may
    /// reassociate or approximate differently (an `f32` sum, product,
    /// quotient, reduction, matrix product, runtime function or `pow`):
    /// compared with the `f32` tolerance even in an `f64` output.
    pub f32_rounding: ArrayD<bool>,
    /// Elements that depend on arithmetic that rounds differently once
    /// rewritten or vectorised (module docs): compared with a tolerance,
    /// the others exactly.
    pub rounding: ArrayD<bool>,
    /// Elements of an ill-conditioned sum (module docs) computed by the
    /// output's own node: a finite value may differ from the reference by
    /// up to this absolute bound (0 elsewhere).
    pub slack: ArrayD<f64>,
}

/// Per output of `fg`, in its logical order, its [`Taint`] under the
/// licenses `lic` (`None` when the reference evaluator rejects the inputs).
pub fn taint(fg: &FunctionGraph, inputs: &[Value], lic: &Licenses) -> Option<Vec<Taint>> {
    let nan_taint = |v: &Value| {
        if lic.cancellation {
            is_nan(v)
        } else {
            ArrayD::from_elem(IxDyn(v.shape()), false)
        }
    };
    let mut vals: HashMap<_, Value> = HashMap::new();
    let mut taint: HashMap<_, ArrayD<bool>> = HashMap::new();
    let mut single: HashMap<_, ArrayD<bool>> = HashMap::new();
    let mut rounded: HashMap<_, ArrayD<bool>> = HashMap::new();
    // Elements of an ill-conditioned sum: bounded themselves, their
    // consumers' elements unsettled.
    let mut loose: HashMap<_, ArrayD<bool>> = HashMap::new();
    let mut slack: HashMap<_, ArrayD<f64>> = HashMap::new();
    let none = |v: &Value| ArrayD::from_elem(IxDyn(v.shape()), false);
    let zero = |v: &Value| ArrayD::from_elem(IxDyn(v.shape()), 0.0);
    for (&v, x) in fg.inputs().iter().zip(inputs) {
        taint.insert(v, nan_taint(x));
        single.insert(v, none(x));
        rounded.insert(v, none(x));
        loose.insert(v, none(x));
        vals.insert(v, x.clone());
    }
    for n in fg.toposort() {
        let node = fg.node(n);
        for &i in &node.inputs {
            if let std::collections::hash_map::Entry::Vacant(e) = vals.entry(i) {
                let c = fg.constant_value(i)?.clone();
                taint.insert(i, nan_taint(&c));
                single.insert(i, none(&c));
                rounded.insert(i, none(&c));
                loose.insert(i, none(&c));
                e.insert(c);
            }
        }
        let args: Vec<&Value> = node.inputs.iter().map(|i| &vals[i]).collect();
        let types: Vec<&TensorType> = node.inputs.iter().map(|&i| fg.ty(i)).collect();
        let outs = perform(&node.op, &args, &types).ok()?;
        let ins: Vec<&ArrayD<bool>> = node.inputs.iter().map(|i| &taint[i]).collect();
        let ins_single: Vec<&ArrayD<bool>> = node.inputs.iter().map(|i| &single[i]).collect();
        let ins_rounded: Vec<&ArrayD<bool>> = node.inputs.iter().map(|i| &rounded[i]).collect();
        let ins_loose: Vec<&ArrayD<bool>> = node.inputs.iter().map(|i| &loose[i]).collect();
        let mut new = Vec::with_capacity(outs.len());
        let rounds = rounds(&node.op, lic);
        let range: Option<Vec<ArrayD<bool>>> =
            rounds.then(|| args.iter().map(|a| out_of_range(a)).collect());
        for (&o, val) in node.outputs.iter().zip(outs) {
            let mut t = propagate(&node.op, &ins, &args, &types, val.shape())?;
            t.zip_mut_with(&nan_taint(&val), |a, &b| *a |= b);
            if let Some(range) = &range {
                let flags: Vec<&ArrayD<bool>> = range.iter().collect();
                let r = propagate(&node.op, &flags, &args, &types, val.shape())?;
                t.zip_mut_with(&r, |a, &b| *a |= b);
                t.zip_mut_with(&out_of_range(&val), |a, &b| *a |= b);
            }
            let mut f = propagate(&node.op, &ins_single, &args, &types, val.shape())?;
            if (rounds || approximated(&node.op)) && val.dtype() == DType::F32 {
                f.fill(true);
            }
            let mut r = propagate(&node.op, &ins_rounded, &args, &types, val.shape())?;
            if (rounds || approximated(&node.op)) && val.dtype().is_float() {
                r.fill(true);
            }
            if let Some(ill) = ill_conditioned_remainder(&node.op, &args, &ins_rounded, val.shape())
            {
                t.zip_mut_with(&ill, |a, &b| *a |= b);
            }
            if let Some(tie) =
                near_tie(&node.op, &args, &ins_rounded).filter(|_| !val.dtype().is_float())
            {
                if tie.shape() == val.shape() {
                    t.zip_mut_with(&tie, |a, &b| *a |= b);
                } else if tie.iter().any(|&b| b) {
                    // keepdims or another layout of the lanes: the whole output.
                    t.fill(true);
                }
            }
            let computed: Vec<bool> = node.inputs.iter().map(|&i| fg.owner(i).is_some()).collect();
            if let Some(z) = division_by_computed_zero(&node.op, &args, &computed, val.shape())
                .filter(|_| lic.zero_sign)
            {
                t.zip_mut_with(&z, |a, &b| *a |= b);
            }
            let from_loose = propagate(&node.op, &ins_loose, &args, &types, val.shape())?;
            t.zip_mut_with(&from_loose, |a, &b| *a |= b);
            let (ill, bound) =
                match ill_conditioned_sum(&node.op, &args, &types, &val, lic.reassociation) {
                    Some((ill, bound)) => (ill, bound),
                    None => (none(&val), zero(&val)),
                };
            if let Some(ill) = ill_conditioned_periodic(&node.op, &args, &ins_rounded) {
                t.zip_mut_with(&ill, |a, &b| *a |= b);
            }
            if let Some(ill) = sign_sensitive(&node.op, &args, &ins_rounded, &computed, val.shape())
            {
                t.zip_mut_with(&ill, |a, &b| *a |= b);
            }
            let of_family: Vec<bool> = node
                .inputs
                .iter()
                .map(|&i| fg.owner_op(i).is_some_and(in_exp_log_family))
                .collect();
            let to_family = fg.clients(o).iter().any(|c| match c {
                kiln::graph::Client::Node(m, _) => in_exp_log_family(&fg.node(*m).op),
                kiln::graph::Client::Output(_) => false,
            });
            if lic.inverses
                && in_exp_log_family(&node.op)
                && (of_family.contains(&true) || to_family)
            {
                if let Some(c) = created_non_finite(&node.op, &args, &val) {
                    t.zip_mut_with(&c, |a, &b| *a |= b);
                }
            }
            if let Some(p) =
                power_of_minus_infinity(&node.op, &args, val.shape()).filter(|_| lic.sqrt_of_pow)
            {
                t.zip_mut_with(&p, |a, &b| *a |= b);
            }
            new.push((o, t, f, r, ill, bound, val));
        }
        for (o, t, f, r, ill, bound, val) in new {
            taint.insert(o, t);
            single.insert(o, f);
            rounded.insert(o, r);
            loose.insert(o, ill);
            slack.insert(o, bound);
            vals.insert(o, val);
        }
    }
    fg.outputs()
        .iter()
        .map(|o| match (taint.get(o), single.get(o), rounded.get(o)) {
            (Some(t), Some(f), Some(r)) => Some(Taint {
                unsettled: t.clone(),
                f32_rounding: f.clone(),
                rounding: r.clone(),
                slack: slack.get(o).cloned().unwrap_or_else(|| t.mapv(|_| 0.0)),
            }),
            _ => fg.constant_value(*o).map(|c| Taint {
                unsettled: nan_taint(c),
                f32_rounding: none(c),
                rounding: none(c),
                slack: zero(c),
            }),
        })
        .collect()
}

/// The taint of an output of shape `shape` of `op` from its inputs' taints
/// (`args` and `types` are the inputs' values and types).
fn propagate(
    op: &Op,
    ins: &[&ArrayD<bool>],
    args: &[&Value],
    types: &[&TensorType],
    shape: &[usize],
) -> Option<ArrayD<bool>> {
    Some(match op {
        Op::Elemwise { .. } | Op::Composite { .. } => broadcast_or(ins, shape)?,
        Op::FusedReduce {
            op,
            axes,
            pre,
            post,
        } => {
            // The pre-map's operands come first; a post-map's one-element
            // extras then taint the reduced values they are combined with.
            let (pre_ins, extras) = kiln::ops::split_fused(pre, ins);
            let full = broadcast_shape(pre_ins);
            let mut t = any_over(&broadcast_or(pre_ins, &full)?, axes.clone())?;
            if *op == ReduceOp::Prod {
                let map = Op::Composite {
                    composite: pre.clone(),
                    inplace: InplacePattern::new(),
                };
                let (pre_args, _) = kiln::ops::split_fused(pre, args);
                let (pre_types, _) = kiln::ops::split_fused(pre, types);
                let mapped = perform(&map, pre_args, pre_types).ok()?.remove(0);
                t.zip_mut_with(&order_sensitive(&mapped, axes.clone())?, |a, &b| *a |= b);
            }
            if post.is_some() {
                let mut all = vec![&t];
                all.extend(extras);
                broadcast_or(&all, shape)?
            } else {
                t
            }
        }
        Op::CAReduce { op, axes } => {
            let mut t = any_over(ins[0], axes.clone())?;
            if *op == ReduceOp::Prod {
                t.zip_mut_with(&order_sensitive(args[0], axes.clone())?, |a, &b| *a |= b);
            }
            t
        }
        Op::IncSubtensor { .. } => {
            // The taint of x with the selection's replaced by (set) or
            // or-ed with (inc: `add` of bools) that of y.
            let mut a: Vec<Value> = vec![Value::Bool(ins[0].clone()), Value::Bool(ins[1].clone())];
            a.extend(args[2..].iter().map(|&v| v.clone()));
            let refs: Vec<&Value> = a.iter().collect();
            let xt = TensorType::new(DType::Bool, types[0].shape.clone());
            let yt = TensorType::new(DType::Bool, types[1].shape.clone());
            let mut tys = vec![&xt, &yt];
            tys.extend(&types[2..]);
            as_bool(perform(op, &refs, &tys).ok()?.remove(0))
        }
        Op::DimShuffle { .. } | Op::Reshape { .. } | Op::Subtensor { .. } => {
            let mut a: Vec<Value> = vec![Value::Bool(ins[0].clone())];
            a.extend(args[1..].iter().map(|&v| v.clone()));
            let refs: Vec<&Value> = a.iter().collect();
            let bool_ty = TensorType::new(DType::Bool, types[0].shape.clone());
            let mut tys = vec![&bool_ty];
            tys.extend(&types[1..]);
            as_bool(perform(op, &refs, &tys).ok()?.remove(0))
        }
        Op::Dot | Op::BatchedDot => {
            // An element is tainted when any term of its sum has a tainted
            // factor: a tainted row of `a` or a tainted column of `b`
            // (not only where both are, which a dot of the flags would give).
            let (a, b) = (as_f64(ins[0]), as_f64(ins[1]));
            let ones = |t: &ArrayD<bool>| as_f64(&t.mapv(|_| true));
            let (one_a, one_b) = (ones(ins[0]), ones(ins[1]));
            let tys = [
                TensorType::new(DType::F64, types[0].shape.clone()),
                TensorType::new(DType::F64, types[1].shape.clone()),
            ];
            let rows = perform(op, &[&a, &one_b], &[&tys[0], &tys[1]])
                .ok()?
                .remove(0);
            let cols = perform(op, &[&one_a, &b], &[&tys[0], &tys[1]])
                .ok()?
                .remove(0);
            let (rows, cols) = (rows.to_f64_array(), cols.to_f64_array());
            ndarray::Zip::from(&rows)
                .and(&cols)
                .map_collect(|&r, &c| r > 0.0 || c > 0.0)
        }
        // The extreme and its position depend on every element of the
        // reduced lane: a tainted element may move either.
        Op::ArgReduce { axis, .. } => any_over(ins[0], axis.map(|a| vec![a]))?,
        // Every element of a softmax lane depends on the whole lane.
        // A running sum or product depends on its lane's prefix.
        Op::CumReduce { axis, .. } => {
            let counts = Value::I64(ins[0].mapv(i64::from));
            let ty = TensorType::new(DType::I64, vec![None; counts.ndim()]);
            let cum = Op::CumReduce {
                op: ReduceOp::Sum,
                axis: *axis,
            };
            perform(&cum, &[&counts], &[&ty])
                .ok()?
                .remove(0)
                .to_i64_array()
                .mapv(|c| c > 0)
        }
        Op::Softmax { axis, .. } => {
            let any = any_over(ins[0], axis.map(|a| vec![a]))?;
            match axis {
                Some(a) => any
                    .insert_axis(ndarray::Axis(*a))
                    .broadcast(IxDyn(shape))?
                    .to_owned(),
                None => ArrayD::from_elem(IxDyn(shape), any.iter().any(|&b| b)),
            }
        }
        Op::LogSumExp { axis } => any_over(ins[0], axis.map(|a| vec![a]))?,
        Op::Shape | Op::ShapeI(_) => ArrayD::from_elem(IxDyn(shape), false),
        Op::Split { .. } => {
            // The parts of x's taint; which part this output is, its shape
            // tells unless several parts have it (then their union).
            let x = Value::Bool(ins[0].clone());
            let ty = TensorType::new(DType::Bool, types[0].shape.clone());
            let parts = perform(op, &[&x, args[1]], &[&ty, types[1]]).ok()?;
            let mut t = ArrayD::from_elem(IxDyn(shape), false);
            for p in parts.into_iter().filter(|p| p.shape() == shape) {
                t.zip_mut_with(&as_bool(p), |a, &b| *a |= b);
            }
            if ins[1].iter().any(|&b| b) {
                t.fill(true);
            }
            t
        }
        Op::AdvancedSubtensor1 { .. }
        | Op::AdvancedIncSubtensor1 { .. }
        | Op::BooleanMask
        | Op::Join { .. } => {
            // The data inputs' taints move as their values do; a tainted
            // index or mask taints the whole output.
            let data: Vec<bool> = (0..ins.len())
                .map(|k| match op {
                    Op::AdvancedSubtensor1 { .. } | Op::BooleanMask => k == 0,
                    Op::AdvancedIncSubtensor1 { .. } => k < 2,
                    _ => true,
                })
                .collect();
            let a: Vec<Value> = (0..ins.len())
                .map(|k| {
                    if data[k] {
                        Value::Bool(ins[k].clone())
                    } else {
                        args[k].clone()
                    }
                })
                .collect();
            let tys: Vec<TensorType> = (0..ins.len())
                .map(|k| {
                    if data[k] {
                        TensorType::new(DType::Bool, types[k].shape.clone())
                    } else {
                        types[k].clone()
                    }
                })
                .collect();
            let refs: Vec<&Value> = a.iter().collect();
            let ty_refs: Vec<&TensorType> = tys.iter().collect();
            let mut t = as_bool(perform(op, &refs, &ty_refs).ok()?.remove(0));
            let index_tainted = (0..ins.len()).any(|k| !data[k] && ins[k].iter().any(|&b| b));
            if index_tainted {
                t.fill(true);
            }
            t
        }
        _ => ArrayD::from_elem(IxDyn(shape), ins.iter().any(|t| t.iter().any(|&b| b))),
    })
}

/// For a float `mod`, `fmod` or `floor_div` of `a` by `b`: the elements where an
/// operand carries rounding that the compiled code may do differently
/// (`rounded`: reassociable or [`approximated`] arithmetic) and
/// either `|a| > 1e4 |b|` or `a / b` lies within a relative 1e-6 of an
/// integer. In the first case the remainder keeps the operands' absolute
/// rounding error while shrinking the value (`mod(prod(-x), -x)` with a
/// product of 43 factors near 5e7 differed by 2.4e-7 from the sequential
/// product's; `mod(-x, softplus(y))` with a tiny softplus by far more); in
/// the second the quotient's floor can step (`log1p(expm1(f)) // f`: 0 in
/// the reference, 1 once rewritten to `f // f`). Such elements are
/// unsettled. `None` for any other op.
fn ill_conditioned_remainder(
    op: &Op,
    args: &[&Value],
    rounded: &[&ArrayD<bool>],
    shape: &[usize],
) -> Option<ArrayD<bool>> {
    use kiln::ScalarOp::{Fmod, IntDiv, Mod};
    let Op::Elemwise {
        scalar: Mod | Fmod | IntDiv,
        ..
    } = op
    else {
        return None;
    };
    // A float operand makes it a float remainder (an integer one is cast).
    if !args.iter().any(|a| a.dtype().is_float()) {
        return None;
    }
    let mut ill = broadcast_or(rounded, shape)?;
    let (a, b) = (args[0].to_f64_array(), args[1].to_f64_array());
    let (a, b) = (a.broadcast(IxDyn(shape))?, b.broadcast(IxDyn(shape))?);
    // The dividend's rounding: a few ULPs per term of the longest sum or
    // product the generator builds (300 terms), at the dividend's dtype.
    let dtype = if args[0].dtype().is_float() {
        args[0].dtype()
    } else {
        args[1].dtype()
    };
    let (atol, rtol) = super::tolerance(dtype == DType::F32);
    let error = 8.0 * gamma(302, unit(dtype));
    for ((t, &x), &y) in ill.iter_mut().zip(a.iter()).zip(b.iter()) {
        let q = x / y;
        let at_a_step = (q - q.round()).abs() <= 1e-6 * q.abs().max(1.0);
        let r = x % y;
        let swamped = error * x.abs() > 0.5 * (atol + rtol * r.abs());
        *t = *t && (x.abs() > 1e4 * y.abs() || at_a_step || swamped);
    }
    Some(ill)
}

/// For an arg-reduction (`argmax`, `argmin`, `max_and_argmax`) of an input
/// whose elements round differently once compiled (`rounded`): the output
/// elements whose lane holds a near tie, a second element within the
/// comparison's tolerance of the extreme (`argmax(sin(y))` where two
/// `sin` values differ by an ULP: reference 0, compiled 82; found by the
/// 100,000-case run, seed 7777). A lane without a near tie is compared.
/// `None` for any other op.
fn near_tie(op: &Op, args: &[&Value], rounded: &[&ArrayD<bool>]) -> Option<ArrayD<bool>> {
    let Op::ArgReduce {
        op: which, axis, ..
    } = op
    else {
        return None;
    };
    if !args[0].dtype().is_float() || !rounded[0].iter().any(|&r| r) {
        return None;
    }
    let (atol, rtol) = super::tolerance(args[0].dtype() == DType::F32);
    let x = args[0].to_f64_array();
    let lanes: Vec<Vec<f64>> = match axis {
        None => vec![x.iter().copied().collect()],
        Some(a) => x
            .lanes(ndarray::Axis(*a))
            .into_iter()
            .map(|l| l.iter().copied().collect())
            .collect(),
    };
    let tie = |lane: &Vec<f64>| {
        let better = |a: f64, b: f64| match which {
            kiln::ops::ArgOp::Max => a > b,
            kiln::ops::ArgOp::Min => a < b,
        };
        let Some(best) =
            lane.iter()
                .copied()
                .filter(|v| !v.is_nan())
                .reduce(|m, v| if better(v, m) { v } else { m })
        else {
            return false;
        };
        let close = |v: f64| v == best || (v - best).abs() <= atol + rtol * best.abs();
        lane.iter().filter(|&&v| !v.is_nan() && close(v)).count() > 1
    };
    let flags: Vec<bool> = lanes.iter().map(tie).collect();
    let shape: Vec<usize> = match axis {
        None => vec![],
        Some(a) => x
            .shape()
            .iter()
            .enumerate()
            .filter(|&(d, _)| d != *a)
            .map(|(_, &n)| n)
            .collect(),
    };
    ArrayD::from_shape_vec(IxDyn(&shape), flags).ok()
}

/// For a float `true_div`, `floor_div` or `mod` by `b`, or a `reciprocal`
/// of `b`: the elements where `b` is a zero computed by the graph. Rule 5
/// does not keep the sign of a zero (`x * 0 -> 0`), hence neither that of
/// an infinity obtained by dividing by it (`exp(k // (x * 0))`: reference
/// `exp(-inf) = 0` for a negative `x`, FAST_RUN `exp(+inf)`). Likewise
/// `copysign(a, b)` takes the sign of a zero `b`, and `arctan2(y, x)` that
/// of a zero `y` or `x` (`arctan2(0, -0) = pi`, `arctan2(0, 0) = 0`). A
/// zero read from an input or a constant keeps its sign, so it is compared.
/// `None` for any other op.
fn division_by_computed_zero(
    op: &Op,
    args: &[&Value],
    computed: &[bool],
    shape: &[usize],
) -> Option<ArrayD<bool>> {
    use kiln::ScalarOp::{ArcTan2, CopySign, IntDiv, Mod, Reciprocal, TrueDiv};
    let Op::Elemwise { scalar, .. } = op else {
        return None;
    };
    let ks: &[usize] = match scalar {
        TrueDiv | IntDiv | Mod | CopySign => &[1],
        Reciprocal => &[0],
        ArcTan2 => &[0, 1],
        _ => return None,
    };
    let mut out: Option<ArrayD<bool>> = None;
    for &k in ks {
        if !computed[k] || !args[k].dtype().is_float() {
            continue;
        }
        let b = args[k].to_f64_array();
        let z = b.broadcast(IxDyn(shape))?.mapv(|x| x == 0.0);
        out = Some(match out {
            Some(mut o) => {
                o.zip_mut_with(&z, |a, &b| *a |= b);
                o
            }
            None => z,
        });
    }
    out
}

/// For a float `sin`, `cos` or `tan` of `a`: the elements where `a`
/// carries rounding the compiled code may do differently (`rounded`) and
/// either `|a| > 1e4` (the function keeps the argument's absolute rounding
/// error: `sin(prod(x))` of 35 factors differed by 1.8e-7) or, for `tan`,
/// `a` sits within 1e-4 of a pole. Such elements are unsettled. `None` for
/// any other op.
fn ill_conditioned_periodic(
    op: &Op,
    args: &[&Value],
    rounded: &[&ArrayD<bool>],
) -> Option<ArrayD<bool>> {
    use kiln::ScalarOp::{Cos, Sin, Tan};
    let Op::Elemwise {
        scalar: scalar @ (Sin | Cos | Tan),
        ..
    } = op
    else {
        return None;
    };
    if !args[0].dtype().is_float() {
        return None;
    }
    let tan = *scalar == Tan;
    let mut ill = rounded[0].clone();
    for (t, &x) in ill.iter_mut().zip(args[0].to_f64_array().iter()) {
        *t = *t && (x.abs() > 1e4 || (tan && x.cos().abs() < 1e-4));
    }
    Some(ill)
}

/// For a float `copysign(a, b)` or `arctan2(y, x)`: the elements whose
/// result jumps with the sign of an operand that is not settled. For
/// `copysign`, where `b` carries rounding the compiled code may do
/// differently (`rounded`) and `|b| <= 1e-3` (within the comparison's
/// widest tolerance of zero: `copysign(1, cumsum(v))` gave -1 compiled, 1
/// in the reference, for a sum of opposite terms summed in another order),
/// or where `b` is a NaN computed by the graph (IEEE leaves the sign of a
/// computed NaN unspecified, and the comparison treats all NaNs alike).
/// For `arctan2`, where an operand carries rounding and `|y| <= 1e-3` with
/// `x <= 1e-3` (the branch cut along the negative `x` axis, where the
/// result jumps from `pi` to `-pi`, and the origin). `None` for other ops.
fn sign_sensitive(
    op: &Op,
    args: &[&Value],
    rounded: &[&ArrayD<bool>],
    computed: &[bool],
    shape: &[usize],
) -> Option<ArrayD<bool>> {
    use kiln::ScalarOp::{ArcTan2, CopySign};
    let Op::Elemwise {
        scalar: scalar @ (CopySign | ArcTan2),
        ..
    } = op
    else {
        return None;
    };
    // A float operand makes it a float op (an integer one is cast).
    if !args.iter().any(|a| a.dtype().is_float()) {
        return None;
    }
    // First and second operands: (a, b) of copysign, (y, x) of arctan2.
    let (p, q) = (args[0].to_f64_array(), args[1].to_f64_array());
    let (p, q) = (p.broadcast(IxDyn(shape))?, q.broadcast(IxDyn(shape))?);
    let (rp, rq) = (
        rounded[0].broadcast(IxDyn(shape))?,
        rounded[1].broadcast(IxDyn(shape))?,
    );
    let mut out = ArrayD::from_elem(IxDyn(shape), false);
    ndarray::Zip::from(&mut out)
        .and(&p)
        .and(&q)
        .and(&rp)
        .and(&rq)
        .for_each(|o, &p, &q, &rp, &rq| {
            *o = if *scalar == CopySign {
                (rq && q.abs() <= 1e-3) || (computed[1] && q.is_nan())
            } else {
                (rp || rq) && p.abs() <= 1e-3 && q <= 1e-3
            };
        });
    Some(out)
}

/// For a float `pow`: the elements whose base is `-inf` and exponent ±0.5,
/// 1.5 or 2.5. C99 gives `+inf` or `0` there, the `sqrt`-based forms that
/// `local_pow_specialize` makes of these powers give NaN: README rule 5's documented exception, unsettled
/// here so that it is accepted downstream too (`tanh(x ** 0.5)`: reference
/// 1, compiled NaN). `None` for any other op.
fn power_of_minus_infinity(op: &Op, args: &[&Value], shape: &[usize]) -> Option<ArrayD<bool>> {
    let Op::Elemwise {
        scalar: kiln::ScalarOp::Pow,
        ..
    } = op
    else {
        return None;
    };
    if !args[0].dtype().is_float() {
        return None;
    }
    let (base, exponent) = (args[0].to_f64_array(), args[1].to_f64_array());
    let (base, exponent) = (
        base.broadcast(IxDyn(shape))?,
        exponent.broadcast(IxDyn(shape))?,
    );
    Some(
        ndarray::Zip::from(&base)
            .and(&exponent)
            .map_collect(|&x, &e| {
                x == f64::NEG_INFINITY && (e.abs() == 0.5 || e == 1.5 || e == 2.5)
            }),
    )
}

/// The element-wise functions that [`INVERSES`] rewrites pair with their
/// inverses or fold into each other.
fn in_exp_log_family(op: &Op) -> bool {
    use kiln::ScalarOp::*;
    matches!(
        op,
        Op::Elemwise {
            scalar: Exp
                | Exp2
                | Expm1
                | Log
                | Log2
                | Log10
                | Log1p
                | Sigmoid
                | Softplus
                | Log1mexp
                | Sinh
                | ArcSinh
                | Cosh
                | ArcCosh
                | Tanh
                | ArcTanh
                | Erf
                | Erfc,
            ..
        }
    )
}

/// For an element-wise op: the elements where the result is infinite or
/// NaN while every operand is finite (an overflow, an underflow into a
/// pole, a pole): the infinities that an [`INVERSES`] rewrite may turn into
/// the finite value of the simplified expression. `None` for other ops.
fn created_non_finite(op: &Op, args: &[&Value], val: &Value) -> Option<ArrayD<bool>> {
    if !matches!(op, Op::Elemwise { .. }) || !val.dtype().is_float() {
        return None;
    }
    let shape = IxDyn(val.shape());
    let mut created = val.to_f64_array().mapv(|x| !x.is_finite());
    for a in args {
        let a = a.to_f64_array();
        created.zip_mut_with(&a.broadcast(shape.clone())?, |c, &x| *c &= x.is_finite());
    }
    Some(created)
}

/// For a float `Sum` (plain or fused, or running: `cumsum`), `Dot` or `BatchedDot` with value `val`: the
/// elements where the bound `8 γ(n + 2) Σ|finite terms|` (a few ULPs of
/// rounding in each of the `n` terms, and the summation order's error
/// bound) exceeds the comparison's tolerance at the value
/// ([`super::tolerance`]): cancellation has made the value ill-conditioned
/// (module docs). Returns those elements and the bound where they are set
/// (0 elsewhere); `None` for any other op.
///
/// An element-wise float `add` or `sub` counts as a sum of its operands
/// when a reassociating rewrite was applied (`reassociation`): regrouping
/// `(k - x) + (k' - x')` as `(k + k') - (x + x')` moves a value that
/// cancelled to 0 by up to the rounding of `x + x'`, within the same bound.
fn ill_conditioned_sum(
    op: &Op,
    args: &[&Value],
    types: &[&TensorType],
    val: &Value,
    reassociation: bool,
) -> Option<(ArrayD<bool>, ArrayD<f64>)> {
    if !val.dtype().is_float() {
        return None;
    }
    let finite_abs = |x: &Value| {
        x.to_f64_array()
            .mapv(|v| if v.is_finite() { v.abs() } else { 0.0 })
    };
    let (magnitude, n) = match op {
        Op::Elemwise {
            scalar: kiln::ScalarOp::Add | kiln::ScalarOp::Sub,
            ..
        } if reassociation => {
            let shape = IxDyn(val.shape());
            let mut m = ArrayD::from_elem(shape.clone(), 0.0);
            for a in args {
                m.zip_mut_with(&finite_abs(a).broadcast(shape.clone())?, |m, &x| *m += x);
            }
            (m, args.len())
        }
        Op::CAReduce {
            op: ReduceOp::Sum,
            axes,
        } => {
            let n = if val.is_empty() {
                0
            } else {
                args[0].len() / val.len()
            };
            (
                reduce(finite_abs(args[0]), axes.clone(), ReduceOp::Sum).ok()?,
                n,
            )
        }
        // A post-mapped sum's value is not the sum's: no bound is derived.
        Op::FusedReduce {
            op: ReduceOp::Sum,
            axes,
            pre,
            post: None,
        } => {
            let map = Op::Composite {
                composite: pre.clone(),
                inplace: InplacePattern::new(),
            };
            let mapped = perform(&map, args, types).ok()?.remove(0);
            let n = if val.is_empty() {
                0
            } else {
                mapped.len() / val.len()
            };
            (
                reduce(finite_abs(&mapped), axes.clone(), ReduceOp::Sum).ok()?,
                n,
            )
        }
        Op::Dot => {
            let (a, b) = (args[0].to_f64_array(), args[1].to_f64_array());
            dot_abs(&a, &b, val.shape()).ok()?
        }
        Op::BatchedDot => {
            let (a, b) = (args[0].to_f64_array(), args[1].to_f64_array());
            batched_dot_abs(&a, &b, val.shape()).ok()?
        }
        Op::CumReduce {
            op: ReduceOp::Sum,
            axis,
        } => {
            let n = match axis {
                Some(a) => args[0].shape()[*a],
                None => args[0].len(),
            };
            let abs = Value::F64(finite_abs(args[0]));
            let ty = TensorType::new(DType::F64, vec![None; abs.ndim()]);
            let m = perform(op, &[&abs], &[&ty]).ok()?.remove(0);
            (m.to_f64_array(), n)
        }
        _ => return None,
    };
    let (atol, rtol) = super::tolerance(val.dtype() == DType::F32);
    let error = 8.0 * gamma(n + 2, unit(val.dtype()));
    let ill = ndarray::Zip::from(&magnitude)
        .and(&val.to_f64_array())
        .map_collect(|&m, &v| error * m > 0.5 * (atol + rtol * v.abs()));
    let bound = ndarray::Zip::from(&magnitude)
        .and(&ill)
        .map_collect(|&m, &i| if i { error * m } else { 0.0 });
    Some((ill, bound))
}

/// Ops whose compiled value may differ from the reference's by a few ULPs:
/// functions the vector path takes from the runtime (bounds in
/// runtime/ACCURACY.md), `pow`, which rewrites turn into products, and the
/// softmax family and logsumexp (runtime exps, sums in another order).
fn approximated(op: &Op) -> bool {
    match op {
        // Runtime exps and a sum in another order (see `exact.rs`).
        Op::Softmax { .. } | Op::LogSumExp { .. } => true,
        Op::Elemwise { scalar, .. } => {
            *scalar == kiln::ScalarOp::Pow
                || kiln::linker::mathcalls::block_symbol(*scalar, DType::F64).is_some()
        }
        _ => false,
    }
}

/// Whether `op`'s arithmetic may round differently in the compiled code
/// under `lic`: reductions and `dot` always (the linker's contract), the
/// other [`reassociable`] ops when a reassociating rewrite was applied.
fn rounds(op: &Op, lic: &Licenses) -> bool {
    match op {
        Op::CAReduce { .. }
        | Op::FusedReduce { .. }
        | Op::Dot
        | Op::BatchedDot
        | Op::Gemm { .. } => reassociable(op),
        _ => lic.reassociation && reassociable(op),
    }
}

/// Ops whose arithmetic rewrites and kernels may reassociate (the
/// canonizers' `add`/`sub`/`mul`/`true_div`/`reciprocal`, sums and products,
/// GEMM, and Composites built of them).
fn reassociable(op: &Op) -> bool {
    use kiln::ScalarOp::*;
    match op {
        Op::Elemwise { scalar, .. } => matches!(scalar, Add | Sub | Mul | TrueDiv | Reciprocal),
        Op::CAReduce { op, .. } | Op::FusedReduce { op, .. } => {
            matches!(op, ReduceOp::Sum | ReduceOp::Prod)
        }
        Op::Dot | Op::BatchedDot | Op::Composite { .. } => true,
        _ => false,
    }
}

/// True where a float `v` is outside the range rule 5 promises values in:
/// nonzero with magnitude below 1e-150 or above 1e150 (infinities included).
fn out_of_range(v: &Value) -> ArrayD<bool> {
    if v.dtype().is_float() {
        v.to_f64_array()
            .mapv(|x| x != 0.0 && !(1e-150..=1e150).contains(&x.abs()))
    } else {
        ArrayD::from_elem(IxDyn(v.shape()), false)
    }
}

/// True where `v` is NaN (never for integer and bool values).
fn is_nan(v: &Value) -> ArrayD<bool> {
    if v.dtype().is_float() {
        v.to_f64_array().mapv(f64::is_nan)
    } else {
        ArrayD::from_elem(IxDyn(v.shape()), false)
    }
}

/// The numpy broadcast of the input shapes (inputs of one ndim).
fn broadcast_shape(ins: &[&ArrayD<bool>]) -> Vec<usize> {
    let ndim = ins.iter().map(|t| t.ndim()).max().unwrap_or(0);
    (0..ndim)
        .map(|d| {
            ins.iter()
                .map(|t| t.shape()[d])
                .find(|&s| s != 1)
                .unwrap_or(1)
        })
        .collect()
}

/// The OR of the inputs' taints broadcast to `shape`.
fn broadcast_or(ins: &[&ArrayD<bool>], shape: &[usize]) -> Option<ArrayD<bool>> {
    let mut out = ArrayD::from_elem(IxDyn(shape), false);
    for t in ins {
        out.zip_mut_with(&t.broadcast(IxDyn(shape))?, |a, &b| *a |= b);
    }
    Some(out)
}

/// `any` of `t` over `axes` (`None`: all), through the reference reduction.
fn any_over(t: &ArrayD<bool>, axes: Option<Vec<usize>>) -> Option<ArrayD<bool>> {
    let ty = TensorType::new(DType::Bool, vec![None; t.ndim()]);
    let op = Op::CAReduce {
        op: ReduceOp::Any,
        axes,
    };
    let v = Value::Bool(t.clone());
    Some(as_bool(perform(&op, &[&v], &[&ty]).ok()?.remove(0)))
}

/// Per element of the `Prod` of `x` over `axes` (`None`: all): can some
/// order of the factors give a partial product outside 1e±150 (see the
/// module docs)? Bounded through sums of logarithms of the magnitudes.
fn order_sensitive(x: &Value, axes: Option<Vec<usize>>) -> Option<ArrayD<bool>> {
    if !x.dtype().is_float() {
        // Wrapping integer products do not depend on the order.
        return any_over(&ArrayD::from_elem(IxDyn(x.shape()), false), axes);
    }
    let a = x.to_f64_array();
    let log_sum = |f: fn(f64) -> f64| -> Option<ArrayD<f64>> {
        let op = Op::CAReduce {
            op: ReduceOp::Sum,
            axes: axes.clone(),
        };
        let v = Value::F64(a.mapv(f));
        let ty = TensorType::new(DType::F64, vec![None; a.ndim()]);
        Some(perform(&op, &[&v], &[&ty]).ok()?.remove(0).to_f64_array())
    };
    let big = log_sum(|x| x.abs().max(1.0).log10())?;
    let small = log_sum(|x| {
        if x == 0.0 || x.is_nan() {
            0.0
        } else {
            x.abs().min(1.0).log10()
        }
    })?;
    Some(
        ndarray::Zip::from(&big)
            .and(&small)
            .map_collect(|&b, &s| b > 150.0 || s < -150.0),
    )
}

fn as_bool(v: Value) -> ArrayD<bool> {
    v.to_f64_array().mapv(|x| x != 0.0)
}

fn as_f64(t: &ArrayD<bool>) -> Value {
    Value::F64(t.mapv(|b| f64::from(u8::from(b))))
}
