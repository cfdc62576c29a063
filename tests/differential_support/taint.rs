//! Taint: which elements of each output of a graph have a reference value
//! that the mathematics does not settle, evaluated with the reference
//! evaluator alongside the values. The sources:
//!
//! - **NaN**: an input NaN or one computed on the way (`0 / 0`). Rule 5 of
//!   `src/rewrites/README.md` lets a rewrite turn a NaN that comes only from
//!   cancellation into the finite value of the simplified expression
//!   (`x / x -> 1`, as PyTensor does); downstream of a comparison or a cast
//!   that NaN can become any finite or integer value (`neg(x < k / k)`).
//! - **Order-sensitive products**: a `Prod` reduction some of whose partial
//!   products, in some order, can leave the range 1e±150 that rule 5 and the
//!   linker's reduction contract (`src/linker/reduce.rs`) promise values
//!   in: the product of the factors larger than 1 in magnitude exceeds
//!   1e150, or that of the nonzero factors smaller than 1 falls below
//!   1e-150 (a subnormal factor has a few bits of precision, so the
//!   vectorised order and the reference's sequential one differ by far more
//!   than rounding).
//! - **Reassociation out of range**: an element of a sum, difference,
//!   product, quotient, reciprocal, reduction or matrix product some of whose
//!   operands or whose value lies outside 1e±150 (infinities included): the
//!   range within which rule 5 promises that reassociating rewrites and
//!   vectorised kernels change values by rounding only. Below it, a
//!   different order rounds through subnormals (`(M * y) * x` gives 5e-324
//!   where `M * (y * x)` gives 0, and a negative base raised to it is NaN
//!   instead of 1); above it, partial results overflow in one order only.
//! - **Ill-conditioned remainders**: a float `mod` or `floor_div` whose
//!   dividend is more than 1e4 times its divisor or whose quotient is
//!   within rounding of an integer, when an operand carries rounding the
//!   compiled code may do differently (reassociable arithmetic, a
//!   runtime-approximated function, `pow`): the remainder keeps that
//!   absolute rounding error (see `ill_conditioned_remainder`).
//! - **Ill-conditioned periodic functions**: `sin`, `cos`, `tan` of a
//!   rounded argument beyond 1e4 in magnitude, or near a pole of `tan`
//!   (see `ill_conditioned_periodic`).
//! - **Division by a computed zero**: rule 5 frees the sign of a zero,
//!   hence of the infinity a division by it gives (see
//!   `division_by_computed_zero`).
//! - **Powers of -inf**: README rule 5's `pow` exception (see
//!   `power_of_minus_infinity`), so that it holds downstream too.
//!
//! The taint is exact element-wise through Elemwise, Composite, DimShuffle,
//! Reshape, reductions and Dot; any other op taints its whole output when an
//! input is tainted.

use kiln::eval::perform;
use kiln::ops::{InplacePattern, Op};
use kiln::{DType, FunctionGraph, ReduceOp, TensorType, Value};
use ndarray::{ArrayD, IxDyn};
use std::collections::HashMap;

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
}

/// Per output of `fg`, in its logical order, its [`Taint`] (`None` when the
/// reference evaluator rejects the inputs).
pub fn taint(fg: &FunctionGraph, inputs: &[Value]) -> Option<Vec<Taint>> {
    let mut vals: HashMap<_, Value> = HashMap::new();
    let mut taint: HashMap<_, ArrayD<bool>> = HashMap::new();
    let mut single: HashMap<_, ArrayD<bool>> = HashMap::new();
    let mut rounded: HashMap<_, ArrayD<bool>> = HashMap::new();
    let none = |v: &Value| ArrayD::from_elem(IxDyn(v.shape()), false);
    for (&v, x) in fg.inputs().iter().zip(inputs) {
        taint.insert(v, is_nan(x));
        single.insert(v, none(x));
        rounded.insert(v, none(x));
        vals.insert(v, x.clone());
    }
    for n in fg.toposort() {
        let node = fg.node(n);
        for &i in &node.inputs {
            if let std::collections::hash_map::Entry::Vacant(e) = vals.entry(i) {
                let c = fg.constant_value(i)?.clone();
                taint.insert(i, is_nan(&c));
                single.insert(i, none(&c));
                rounded.insert(i, none(&c));
                e.insert(c);
            }
        }
        let args: Vec<&Value> = node.inputs.iter().map(|i| &vals[i]).collect();
        let types: Vec<&TensorType> = node.inputs.iter().map(|&i| fg.ty(i)).collect();
        let outs = perform(&node.op, &args, &types).ok()?;
        let ins: Vec<&ArrayD<bool>> = node.inputs.iter().map(|i| &taint[i]).collect();
        let ins_single: Vec<&ArrayD<bool>> = node.inputs.iter().map(|i| &single[i]).collect();
        let ins_rounded: Vec<&ArrayD<bool>> = node.inputs.iter().map(|i| &rounded[i]).collect();
        let mut new = Vec::with_capacity(outs.len());
        let range: Option<Vec<ArrayD<bool>>> =
            reassociable(&node.op).then(|| args.iter().map(|a| out_of_range(a)).collect());
        for (&o, val) in node.outputs.iter().zip(outs) {
            let mut t = propagate(&node.op, &ins, &args, &types, val.shape())?;
            t.zip_mut_with(&is_nan(&val), |a, &b| *a |= b);
            if let Some(range) = &range {
                let flags: Vec<&ArrayD<bool>> = range.iter().collect();
                let r = propagate(&node.op, &flags, &args, &types, val.shape())?;
                t.zip_mut_with(&r, |a, &b| *a |= b);
                t.zip_mut_with(&out_of_range(&val), |a, &b| *a |= b);
            }
            let mut f = propagate(&node.op, &ins_single, &args, &types, val.shape())?;
            if (reassociable(&node.op) || approximated(&node.op)) && val.dtype() == DType::F32 {
                f.fill(true);
            }
            let mut r = propagate(&node.op, &ins_rounded, &args, &types, val.shape())?;
            if (reassociable(&node.op) || approximated(&node.op)) && val.dtype().is_float() {
                r.fill(true);
            }
            if let Some(ill) = ill_conditioned_remainder(&node.op, &args, &ins_rounded, val.shape())
            {
                t.zip_mut_with(&ill, |a, &b| *a |= b);
            }
            let computed: Vec<bool> = node.inputs.iter().map(|&i| fg.owner(i).is_some()).collect();
            if let Some(z) = division_by_computed_zero(&node.op, &args, &computed, val.shape()) {
                t.zip_mut_with(&z, |a, &b| *a |= b);
            }
            if let Some(ill) = ill_conditioned_periodic(&node.op, &args, &ins_rounded) {
                t.zip_mut_with(&ill, |a, &b| *a |= b);
            }
            if let Some(p) = power_of_minus_infinity(&node.op, &args, val.shape()) {
                t.zip_mut_with(&p, |a, &b| *a |= b);
            }
            new.push((o, t, f, r, val));
        }
        for (o, t, f, r, val) in new {
            taint.insert(o, t);
            single.insert(o, f);
            rounded.insert(o, r);
            vals.insert(o, val);
        }
    }
    fg.outputs()
        .iter()
        .map(|o| match (taint.get(o), single.get(o)) {
            (Some(t), Some(f)) => Some(Taint {
                unsettled: t.clone(),
                f32_rounding: f.clone(),
            }),
            _ => fg.constant_value(*o).map(|c| Taint {
                unsettled: is_nan(c),
                f32_rounding: none(c),
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
        Op::FusedReduce { op, axes, pre } => {
            let full = broadcast_shape(ins);
            let mut t = any_over(&broadcast_or(ins, &full)?, axes.clone())?;
            if *op == ReduceOp::Prod {
                let map = Op::Composite {
                    composite: pre.clone(),
                    inplace: InplacePattern::new(),
                };
                let mapped = perform(&map, args, types).ok()?.remove(0);
                t.zip_mut_with(&order_sensitive(&mapped, axes.clone())?, |a, &b| *a |= b);
            }
            t
        }
        Op::CAReduce { op, axes } => {
            let mut t = any_over(ins[0], axes.clone())?;
            if *op == ReduceOp::Prod {
                t.zip_mut_with(&order_sensitive(args[0], axes.clone())?, |a, &b| *a |= b);
            }
            t
        }
        Op::DimShuffle { .. } | Op::Reshape { .. } => {
            let mut a: Vec<Value> = vec![Value::Bool(ins[0].clone())];
            a.extend(args[1..].iter().map(|&v| v.clone()));
            let refs: Vec<&Value> = a.iter().collect();
            let bool_ty = TensorType::new(DType::Bool, types[0].shape.clone());
            let mut tys = vec![&bool_ty];
            tys.extend(&types[1..]);
            as_bool(perform(op, &refs, &tys).ok()?.remove(0))
        }
        Op::Dot => {
            let (a, b) = (as_f64(ins[0]), as_f64(ins[1]));
            let tys = [
                TensorType::new(DType::F64, types[0].shape.clone()),
                TensorType::new(DType::F64, types[1].shape.clone()),
            ];
            let d = perform(op, &[&a, &b], &[&tys[0], &tys[1]]).ok()?.remove(0);
            d.to_f64_array().mapv(|x| x > 0.0)
        }
        Op::Shape | Op::ShapeI(_) => ArrayD::from_elem(IxDyn(shape), false),
        _ => ArrayD::from_elem(IxDyn(shape), ins.iter().any(|t| t.iter().any(|&b| b))),
    })
}

/// For a float `mod` or `floor_div` of `a` by `b`: the elements where an
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
    use kiln::ScalarOp::{IntDiv, Mod};
    let Op::Elemwise {
        scalar: Mod | IntDiv,
        ..
    } = op
    else {
        return None;
    };
    if !args.iter().all(|a| a.dtype().is_float()) {
        return None;
    }
    let mut ill = broadcast_or(rounded, shape)?;
    let (a, b) = (args[0].to_f64_array(), args[1].to_f64_array());
    let (a, b) = (a.broadcast(IxDyn(shape))?, b.broadcast(IxDyn(shape))?);
    for ((t, &x), &y) in ill.iter_mut().zip(a.iter()).zip(b.iter()) {
        let q = x / y;
        let at_a_step = (q - q.round()).abs() <= 1e-6 * q.abs().max(1.0);
        *t = *t && (x.abs() > 1e4 * y.abs() || at_a_step);
    }
    Some(ill)
}

/// For a float `true_div`, `floor_div` or `mod` by `b`, or a `reciprocal`
/// of `b`: the elements where `b` is a zero computed by the graph. Rule 5
/// does not keep the sign of a zero (`x * 0 -> 0`), hence neither that of
/// an infinity obtained by dividing by it (`exp(k // (x * 0))`: reference
/// `exp(-inf) = 0` for a negative `x`, FAST_RUN `exp(+inf)`). A zero read
/// from an input or a constant keeps its sign, so it is compared. `None`
/// for any other op.
fn division_by_computed_zero(
    op: &Op,
    args: &[&Value],
    computed: &[bool],
    shape: &[usize],
) -> Option<ArrayD<bool>> {
    use kiln::ScalarOp::{IntDiv, Mod, Reciprocal, TrueDiv};
    let Op::Elemwise { scalar, .. } = op else {
        return None;
    };
    let k = match scalar {
        TrueDiv | IntDiv | Mod => 1,
        Reciprocal => 0,
        _ => return None,
    };
    if !computed[k] || !args[k].dtype().is_float() {
        return None;
    }
    let b = args[k].to_f64_array();
    Some(b.broadcast(IxDyn(shape))?.mapv(|x| x == 0.0))
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

/// For a float `pow`: the elements whose base is `-inf`. C99 gives `+inf`
/// or `0` there, the `sqrt` / `reciprocal(sqrt)` that rewrites make of
/// `x ** ±0.5` give NaN: README rule 5's documented exception, unsettled
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
    let base = args[0].to_f64_array();
    Some(
        base.broadcast(IxDyn(shape))?
            .mapv(|x| x == f64::NEG_INFINITY),
    )
}

/// Element-wise ops whose compiled value may differ from the reference's
/// by a few ULPs: functions the vector path takes from the runtime (bounds
/// in runtime/ACCURACY.md), and `pow`, which rewrites turn into products.
fn approximated(op: &Op) -> bool {
    match op {
        Op::Elemwise { scalar, .. } => {
            *scalar == kiln::ScalarOp::Pow
                || kiln::linker::mathcalls::block_symbol(*scalar, DType::F64).is_some()
        }
        _ => false,
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
        Op::Dot | Op::Composite { .. } => true,
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
