//! Tier 1 of the differential comparison: the graph compiled with no
//! rewrites (mode `none`) against the reference evaluator, node by node.
//!
//! Every node output is made a graph output, so the compiled function
//! shows the value of every node; each node is then re-evaluated by the
//! reference (`kiln::eval::perform`) on the *compiled* values of its
//! inputs, and its compiled output must agree:
//!
//! - bit for bit (any NaN equals any NaN; the sign of a zero counts) for
//!   every op except those below;
//! - for a float `Max` or `Min` reduction, bit for bit except that a zero
//!   matches a zero of either sign (which wins a tie may differ: the
//!   linker's reduction contract);
//! - within the documented ULP bound (`runtime/ACCURACY.md`, f64 column;
//!   1 ULP for f32, whose runtime variants are exact against the rounded
//!   f64 reference while the reference's f32 functions carry std's 1 ULP)
//!   for the runtime's transcendental functions and `pow`; an infinite or
//!   NaN result must match exactly;
//! - for a float `Sum`, `Dot` and `BatchedDot`, within the error bound of summation in
//!   any order, `2 γ(n) Σ|terms|` with `γ(n) = n u / (1 - n u)`, plus half
//!   an ULP of the result; infinities and NaN must match exactly when the
//!   finite terms cannot overflow in any order. Where they can (`Σ|terms of
//!   finite factors|` beyond a quarter of the dtype's maximum, or a term of
//!   finite factors that overflows on its own), the linker's
//!   reduction contract (`src/linker/codegen/reduce.rs`: any order) licenses any
//!   value: the element is skipped and counted ([`Skip::ReductionOverflow`]);
//! - for a float `Prod`, within `2 γ(n) |ref|` when no partial product of
//!   any order can overflow or leave the normal range (the product of the
//!   factors above 1 in magnitude stays below 2^1000, that of the nonzero
//!   factors below 1 above 2^-1000); else skipped ([`Skip::ProductRange`]).
//!
//! Integer and bool arithmetic is exact everywhere. When the reference
//! rejects the inputs, so must the compiled function: with no rewrite,
//! nothing can have removed the failing check.

use std::collections::HashMap;

use kiln::eval::perform;
use kiln::linker::{compile, Arg, CompileOptions};
use kiln::{DType, FunctionGraph, Op, ReduceOp, ScalarOp, Tensor, TensorType, Value};
use ndarray::{ArrayD, IxDyn};

use super::Stats;

/// Why tier 1 skipped an element (licensed by the linker's reduction contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Skip {
    /// A float sum or dot whose finite terms can overflow in some order.
    ReductionOverflow,
    /// A float product whose partial products can leave the normal range.
    ProductRange,
}

/// The ULP bound of a runtime function from `runtime/ACCURACY.md` (f64
/// column; `None`: not a runtime function, compared exactly).
pub fn ulp_bound(op: ScalarOp, dtype: DType) -> Option<u64> {
    use ScalarOp::*;
    let f64_bound = match op {
        Exp | Expm1 | Log | Log1p | Sin | Cos | Pow | Exp2 | Hypot => 1,
        Log2 | Log10 | Tanh | ArcTan | ArcTan2 | Sinh | Cosh | ArcSinh | Erf => 2,
        // ACCURACY.md measures these against compositions of std functions
        // ("from std"), which are the reference evaluator's too and carry
        // their own ~1 ULP: at points its 1,000,000-point sample misses, the
        // kernel's 2 ULP and the reference's rounding add up to 3
        // (softplus(-2.06): compiled 0.11962501545338439, reference
        // 0.11962501545338443; found by the 100,000-case run, seed 8888).
        Sigmoid | Softplus => 3,
        Log1mexp | Tan | ArcSin | ArcCos | ArcTanh | ArcCosh => 3,
        Erfc => 6,
        _ => return None,
    };
    match dtype {
        DType::F64 => Some(f64_bound),
        DType::F32 => Some(1),
        _ => None,
    }
}

/// The distance in ULPs between two finite or infinite floats of `dtype`
/// (±0 are 0 apart).
pub fn ulps(a: f64, b: f64, dtype: DType) -> u64 {
    if dtype == DType::F32 {
        let o = |x: f32| {
            let b = x.to_bits() as i32;
            i64::from(if b < 0 { i32::MIN.wrapping_sub(b) } else { b })
        };
        o(a as f32).abs_diff(o(b as f32))
    } else {
        let o = |x: f64| {
            let b = x.to_bits() as i64;
            i128::from(if b < 0 { i64::MIN.wrapping_sub(b) } else { b })
        };
        u64::try_from(o(a).abs_diff(o(b))).unwrap_or(u64::MAX)
    }
}

/// Unit roundoff of a float dtype.
pub fn unit(dtype: DType) -> f64 {
    if dtype == DType::F32 {
        f64::from(f32::EPSILON) / 2.0
    } else {
        f64::EPSILON / 2.0
    }
}

/// Largest finite value of a float dtype.
fn max_of(dtype: DType) -> f64 {
    if dtype == DType::F32 {
        f64::from(f32::MAX)
    } else {
        f64::MAX
    }
}

/// `γ(n) = n u / (1 - n u)`, the relative error bound of `n` roundings.
pub fn gamma(n: usize, u: f64) -> f64 {
    let nu = n as f64 * u;
    nu / (1.0 - nu).max(1e-3)
}

/// Compiles `ins -> outs` with every node output exposed and no rewrite,
/// runs it on `args` (the layouts of `vals`) and checks every node against
/// the reference (module docs). `rejected`: the reference rejects `vals`,
/// so the call must fail.
pub fn check_mode_none(
    ins: &[Tensor],
    outs: &[Tensor],
    vals: &[Value],
    args: &[Arg<'_>],
    rejected: bool,
    stats: &mut Stats,
) -> Result<(), String> {
    let mut fg = FunctionGraph::new(ins, outs).map_err(|e| e.to_string())?;
    let order = fg.toposort();
    let mut exposed: Vec<_> = fg.outputs().to_vec();
    for &n in &order {
        for &o in &fg.node(n).outputs.clone() {
            if !exposed.contains(&o) {
                fg.add_output(o);
                exposed.push(o);
            }
        }
    }
    let f = compile(&fg, &CompileOptions::default()).map_err(|e| format!("none: compile: {e}"))?;
    let got = match f.call(args) {
        Ok(got) => got,
        Err(_) if rejected => return Ok(()),
        Err(e) => return Err(format!("none: call: {e}\n{fg}")),
    };
    if rejected {
        return Err(format!(
            "none: the reference rejects the inputs, the compiled graph accepts them\n{fg}"
        ));
    }
    if got.len() != exposed.len() {
        return Err(format!(
            "none: {} outputs for {} exposed variables",
            got.len(),
            exposed.len()
        ));
    }
    let mut value: HashMap<_, Value> = exposed.iter().copied().zip(got).collect();
    for (&v, x) in fg.inputs().iter().zip(vals) {
        value.insert(v, x.clone());
    }
    for &n in &order {
        let node = fg.node(n);
        let mut args = Vec::with_capacity(node.inputs.len());
        for &i in &node.inputs {
            match value.get(&i) {
                Some(x) => args.push(x),
                None => args.push(fg.constant_value(i).ok_or("an input without a value")?),
            }
        }
        let types: Vec<&TensorType> = node.inputs.iter().map(|&i| fg.ty(i)).collect();
        let want = perform(&node.op, &args, &types)
            .map_err(|e| format!("none: the reference rejects its own node {}: {e}", node.op))?;
        for (o, w) in node.outputs.iter().zip(&want) {
            let g = &value[o];
            check_node(&node.op, &args, g, w, stats)
                .map_err(|e| format!("none: {} (node {n}): {e}\n{fg}", node.op))?;
        }
    }
    Ok(())
}

/// One node's compiled output `got` against the reference `want` computed
/// from the same inputs `args` (module docs).
pub fn check_node(
    op: &Op,
    args: &[&Value],
    got: &Value,
    want: &Value,
    stats: &mut Stats,
) -> Result<(), String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Err(format!(
            "{:?}{:?} vs reference {:?}{:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    stats.compared += want.len();
    let dtype = want.dtype();
    let exact = || -> Result<(), String> {
        if super::layout::identical(got, want) {
            Ok(())
        } else {
            Err(first_difference(got, want))
        }
    };
    if !dtype.is_float() {
        return exact();
    }
    let (g, w) = (got.to_f64_array(), want.to_f64_array());
    match op {
        Op::Elemwise { scalar, .. } => match ulp_bound(*scalar, dtype) {
            Some(bound) => {
                for (k, (&a, &b)) in g.iter().zip(w.iter()).enumerate() {
                    let ok = if a.is_nan() || b.is_nan() {
                        a.is_nan() && b.is_nan()
                    } else {
                        ulps(a, b, dtype) <= bound
                    };
                    if !ok {
                        return Err(format!(
                            "element {k}: compiled {a:e}, reference {b:e} (bound {bound} ULP)"
                        ));
                    }
                }
                Ok(())
            }
            None => exact(),
        },
        Op::CAReduce {
            op: ReduceOp::Max | ReduceOp::Min,
            ..
        } => {
            // Order-independent except for which of -0.0 / +0.0 wins a tie
            // (the linker's contract, `src/linker/codegen/reduce.rs`): a
            // zero matches a zero of either sign, all else bit for bit.
            for (k, (&a, &b)) in g.iter().zip(w.iter()).enumerate() {
                let ok = a.to_bits() == b.to_bits()
                    || (a.is_nan() && b.is_nan())
                    || (a == 0.0 && b == 0.0);
                if !ok {
                    return Err(format!("element {k}: compiled {a:e}, reference {b:e}"));
                }
            }
            Ok(())
        }
        Op::CAReduce {
            op: ReduceOp::Sum,
            axes,
        } => {
            let x = args[0].to_f64_array();
            let n = if w.is_empty() { 0 } else { x.len() / w.len() };
            let sum = |a: ArrayD<f64>| reduce(a, axes.clone(), ReduceOp::Sum);
            let finite_abs = sum(x.mapv(|v| if v.is_finite() { v.abs() } else { 0.0 }))?;
            let bounds = finite_abs.mapv(|s| 2.0 * gamma(n, unit(dtype)) * s);
            within(
                &g,
                &w,
                &finite_abs,
                &bounds,
                dtype,
                Skip::ReductionOverflow,
                stats,
            )
        }
        Op::CAReduce {
            op: ReduceOp::Prod,
            axes,
        } => {
            let x = args[0].to_f64_array();
            let n = if w.is_empty() { 0 } else { x.len() / w.len() };
            let sum = |a: ArrayD<f64>| reduce(a, axes.clone(), ReduceOp::Sum);
            let mag = |v: f64| v.abs().log2();
            let big = sum(x.mapv(|v| {
                if v.is_finite() && v.abs() > 1.0 {
                    mag(v)
                } else {
                    0.0
                }
            }))?;
            let small = sum(x.mapv(|v| {
                if v.is_finite() && v != 0.0 && v.abs() < 1.0 {
                    mag(v)
                } else {
                    0.0
                }
            }))?;
            let mut flags = big.clone();
            flags.zip_mut_with(&small, |b, &s| {
                *b = if *b < 1000.0 && s > -1000.0 {
                    0.0
                } else {
                    f64::INFINITY
                }
            });
            let bounds = w.mapv(|r| 2.0 * gamma(n, unit(dtype)) * r.abs());
            within(&g, &w, &flags, &bounds, dtype, Skip::ProductRange, stats)
        }
        Op::Softmax { axis, .. } | Op::LogSumExp { axis } => {
            // Both sides compute in f64: 1-ULP exps, a sum of `n` of them in
            // another order, a division or a log, then one rounding to the
            // dtype (one ULP of an f32 result apart when the f64 values
            // straddle a rounding boundary). `log_softmax` is `(x - m) - ln s`
            // and `logsumexp` is `ln s + m`, with `ln s <= ln n`: an absolute
            // error from `ln s`.
            let log = !matches!(op, Op::Softmax { log: false, .. });
            let n = match axis {
                Some(a) => args[0].shape()[*a],
                None => args[0].len(),
            };
            let g64 = 2.0 * gamma(n + 4, unit(DType::F64));
            let ln_n = (n.max(1) as f64).ln();
            let bounds = w.mapv(|r| {
                let base = if log {
                    g64 * (r.abs() + 2.0 * ln_n + 2.0)
                } else {
                    g64 * r.abs()
                };
                base + 2.0 * unit(dtype) * r.abs()
            });
            let guard = w.mapv(|_| 0.0);
            within(
                &g,
                &w,
                &guard,
                &bounds,
                dtype,
                Skip::ReductionOverflow,
                stats,
            )
        }
        Op::Dot | Op::BatchedDot => {
            let (a, b) = (args[0].to_f64_array(), args[1].to_f64_array());
            let (finite_abs, n) = if *op == Op::Dot {
                dot_abs(&a, &b, w.shape())?
            } else {
                batched_dot_abs(&a, &b, w.shape())?
            };
            let bounds = finite_abs.mapv(|s| 2.0 * gamma(n + 1, unit(dtype)) * s);
            within(
                &g,
                &w,
                &finite_abs,
                &bounds,
                dtype,
                Skip::ReductionOverflow,
                stats,
            )
        }
        _ => exact(),
    }
}

/// Element-wise: where `guard` (`Σ|finite terms|`, or a range flag) is
/// beyond a quarter of the dtype's maximum, the element is skipped as
/// `skip`; elsewhere NaN must match NaN, an infinity the same infinity,
/// and a finite value be within `bound` plus half an ULP of the reference.
fn within(
    g: &ArrayD<f64>,
    w: &ArrayD<f64>,
    guard: &ArrayD<f64>,
    bound: &ArrayD<f64>,
    dtype: DType,
    skip: Skip,
    stats: &mut Stats,
) -> Result<(), String> {
    let limit = max_of(dtype) / 4.0;
    for (k, (((&a, &b), &s), &e)) in g
        .iter()
        .zip(w.iter())
        .zip(guard.iter())
        .zip(bound.iter())
        .enumerate()
    {
        if s.is_nan() || s > limit {
            *stats
                .skipped
                .entry(format!("tier 1: {skip:?}"))
                .or_default() += 1;
            continue;
        }
        let ok = if a.is_nan() || b.is_nan() {
            a.is_nan() && b.is_nan()
        } else if a.is_infinite() || b.is_infinite() {
            a == b
        } else {
            (a - b).abs() <= e + b.abs() * unit(dtype)
        };
        if !ok {
            return Err(format!(
                "element {k}: compiled {a:e}, reference {b:e} (bound {e:e})"
            ));
        }
    }
    Ok(())
}

/// `Σ_k |a_ik b_kj|` over the terms of finite factors of a matrix or vector
/// product with output shape `shape`, and the length of the summed axis. A
/// term whose finite factors overflow makes the sum infinite (its element is
/// then skipped): whether it becomes an infinity depends on contraction, as
/// a fused multiply-add adds the exact product to a running infinity
/// (reference `-inf`, compiled NaN for `-1e300 * 4294967294 + 1e300 *
/// 4294967267`; found by the 20,000-case run of the batched matmul
/// property, seed 6262, on u32 operands).
pub fn dot_abs(
    a: &ArrayD<f64>,
    b: &ArrayD<f64>,
    shape: &[usize],
) -> Result<(ArrayD<f64>, usize), String> {
    let a2 = match a.ndim() {
        1 => a
            .view()
            .into_shape_with_order((1, a.len()))
            .map_err(|e| e.to_string())?
            .to_owned(),
        2 => a
            .view()
            .into_dimensionality::<ndarray::Ix2>()
            .map_err(|e| e.to_string())?
            .to_owned(),
        _ => return Err("dot of more than 2 dimensions".into()),
    };
    let b2 = match b.ndim() {
        1 => b
            .view()
            .into_shape_with_order((b.len(), 1))
            .map_err(|e| e.to_string())?
            .to_owned(),
        2 => b
            .view()
            .into_dimensionality::<ndarray::Ix2>()
            .map_err(|e| e.to_string())?
            .to_owned(),
        _ => return Err("dot of more than 2 dimensions".into()),
    };
    let (p, n, q) = (a2.nrows(), a2.ncols(), b2.ncols());
    let mut s = vec![0.0; p * q];
    for i in 0..p {
        for j in 0..q {
            s[i * q + j] = (0..n)
                .filter(|&k| a2[[i, k]].is_finite() && b2[[k, j]].is_finite())
                .map(|k| (a2[[i, k]] * b2[[k, j]]).abs())
                .sum();
        }
    }
    let s = ArrayD::from_shape_vec(IxDyn(shape), s).map_err(|e| e.to_string())?;
    Ok((s, n))
}

/// [`dot_abs`] for every matrix product of a `BatchedDot` with output
/// shape `shape` (`a` and `b` broadcast over its batch dimensions as
/// numpy's `matmul` does), and the length of the summed axis.
pub fn batched_dot_abs(
    a: &ArrayD<f64>,
    b: &ArrayD<f64>,
    shape: &[usize],
) -> Result<(ArrayD<f64>, usize), String> {
    let nd = shape.len();
    if nd < 2 || a.ndim() < 2 || b.ndim() < 2 {
        return Err("a batched product of fewer than 2 dimensions".into());
    }
    let (m, n, k) = (shape[nd - 2], shape[nd - 1], a.shape()[a.ndim() - 1]);
    let batch = &shape[..nd - 2];
    let count: usize = batch.iter().product();
    let stack = |x: &ArrayD<f64>, rows: usize, cols: usize| {
        let mut full = batch.to_vec();
        full.extend([rows, cols]);
        let view = x
            .broadcast(IxDyn(&full))
            .ok_or_else(|| format!("cannot broadcast {:?} to {full:?}", x.shape()))?;
        view.as_standard_layout()
            .into_owned()
            .into_shape_with_order(IxDyn(&[count, rows, cols]))
            .map_err(|e| e.to_string())
    };
    let (sa, sb) = (stack(a, m, k)?, stack(b, k, n)?);
    let mut out = Vec::with_capacity(count * m * n);
    for t in 0..count {
        let (x, y) = (
            sa.index_axis(ndarray::Axis(0), t).to_owned(),
            sb.index_axis(ndarray::Axis(0), t).to_owned(),
        );
        out.extend(dot_abs(&x, &y, &[m, n])?.0.iter().copied());
    }
    let s = ArrayD::from_shape_vec(IxDyn(shape), out).map_err(|e| e.to_string())?;
    Ok((s, k))
}

/// The reference reduction `op` of `a` over `axes` (`None`: all), in f64.
pub fn reduce(
    a: ArrayD<f64>,
    axes: Option<Vec<usize>>,
    op: ReduceOp,
) -> Result<ArrayD<f64>, String> {
    let ty = TensorType::new(DType::F64, vec![None; a.ndim()]);
    let v = Value::F64(a);
    let op = Op::CAReduce { op, axes };
    Ok(perform(&op, &[&v], &[&ty])
        .map_err(|e| e.to_string())?
        .remove(0)
        .to_f64_array())
}

/// A message naming the first element where `got` and `want` differ.
pub fn first_difference(got: &Value, want: &Value) -> String {
    let (g, w) = (got.to_f64_array(), want.to_f64_array());
    let k = g
        .iter()
        .zip(w.iter())
        .position(|(a, b)| a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan()))
        .unwrap_or(0);
    let (a, b) = (g.iter().nth(k), w.iter().nth(k));
    format!(
        "element {k}: compiled {a:?}, reference {b:?} ({:?}{:?})",
        want.dtype(),
        want.shape()
    )
}
