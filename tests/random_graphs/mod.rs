//! Random well-typed graphs shared by the property tests: a step language
//! over a pool of tensors (element-wise ops with and without constants,
//! reductions, arg-reductions (and a `max` beside an `argmax`), softmax and
//! log-softmax, cumulative sums and products, transposes, outer sums, dot, `z + c * dot(u, v)` (the Gemm
//! pattern), switch, casts), the inputs it
//! starts from, and deterministic input values mixing edge values (±0, ±inf,
//! NaN, huge, tiny, subnormal) with moderate numbers.
#![allow(dead_code)]

use kiln::ops::ArgOp;
use kiln::*;
use ndarray::{ArrayD, IxDyn};
use proptest::prelude::*;

/// Unary ops drawn from.
pub const UNARY: &[ScalarOp] = &[
    ScalarOp::Neg,
    ScalarOp::Abs,
    ScalarOp::Exp,
    ScalarOp::Log,
    ScalarOp::Log1p,
    ScalarOp::Expm1,
    ScalarOp::Sqrt,
    ScalarOp::Sqr,
    ScalarOp::Tanh,
    ScalarOp::Sigmoid,
    ScalarOp::Softplus,
    ScalarOp::Sin,
    ScalarOp::Floor,
    ScalarOp::Sign,
    ScalarOp::Reciprocal,
    ScalarOp::Erf,
];
/// Binary ops drawn from.
pub const BINARY: &[ScalarOp] = &[
    ScalarOp::Add,
    ScalarOp::Sub,
    ScalarOp::Mul,
    ScalarOp::TrueDiv,
    ScalarOp::IntDiv,
    ScalarOp::Mod,
    ScalarOp::Maximum,
    ScalarOp::Minimum,
    ScalarOp::Pow,
    ScalarOp::Lt,
    ScalarOp::Eq,
];
/// Constants combined with pool tensors.
pub const CONSTS: &[f64] = &[0.0, 1.0, -1.0, 2.0, 0.5, 3.0, -2.5];
/// Cast targets (the first four first: regression tests name them by index).
pub const DTYPES: &[DType] = &[
    DType::F64,
    DType::F32,
    DType::I64,
    DType::Bool,
    DType::U8,
    DType::I8,
    DType::I16,
    DType::I32,
];

/// One step of a random graph (indices pick from the pool modulo its size).
#[derive(Debug, Clone)]
pub enum Step {
    Unary(usize, usize),
    Binary(usize, usize, usize),
    WithConst(usize, usize, usize, bool),
    Reduce(usize, usize, usize, bool),
    Transpose(usize),
    Outer(usize, usize),
    Dot(usize, usize),
    /// `z + c * dot(u, v)`: indices of z (among the pool tensors of the
    /// product's type), u (among the float matrices), v (among the floats)
    /// and of the constant.
    Gemm(usize, usize, usize, usize),
    Switch(usize, usize, usize),
    Cast(usize, usize),
    /// An arg-reduction of a pool tensor: `argmax`, `argmin`, or `max` and
    /// `argmax` of one input as two pool tensors (which FAST_RUN merges
    /// into one `MaxAndArgmax`); the axis choice (0: `None`) and `keepdims`.
    ArgReduce(usize, usize, usize, bool),
    /// `softmax` (or with the flag `log_softmax`) of a float pool tensor;
    /// the axis choice (0: `None`).
    Softmax(usize, usize, bool),
    /// `cumsum` (or with the flag `cumprod`) of a pool tensor; the axis
    /// choice (0: `None`, flattened).
    Cumulative(usize, usize, bool),
}

/// A random step.
pub fn step() -> impl Strategy<Value = Step> {
    let i = || 0..64usize;
    prop_oneof![
        4 => (0..UNARY.len(), i()).prop_map(|(o, a)| Step::Unary(o, a)),
        5 => (0..BINARY.len(), i(), i()).prop_map(|(o, a, b)| Step::Binary(o, a, b)),
        3 => (0..BINARY.len(), i(), 0..CONSTS.len(), any::<bool>()).prop_map(|(o, a, c, l)| Step::WithConst(o, a, c, l)),
        2 => (0..4usize, i(), 0..4usize, any::<bool>()).prop_map(|(o, a, ax, k)| Step::Reduce(o, a, ax, k)),
        1 => i().prop_map(Step::Transpose),
        1 => (i(), i()).prop_map(|(a, b)| Step::Outer(a, b)),
        1 => (i(), i()).prop_map(|(a, b)| Step::Dot(a, b)),
        1 => (i(), i(), i(), 0..CONSTS.len()).prop_map(|(z, a, b, c)| Step::Gemm(z, a, b, c)),
        1 => (i(), i(), i()).prop_map(|(a, b, c)| Step::Switch(a, b, c)),
        1 => (i(), 0..DTYPES.len()).prop_map(|(a, d)| Step::Cast(a, d)),
        1 => (0..3usize, i(), 0..3usize, any::<bool>()).prop_map(|(o, a, ax, k)| Step::ArgReduce(o, a, ax, k)),
        1 => (i(), 0..3usize, any::<bool>()).prop_map(|(a, ax, l)| Step::Softmax(a, ax, l)),
        1 => (i(), 0..3usize, any::<bool>()).prop_map(|(a, ax, p)| Step::Cumulative(a, ax, p)),
    ]
}

/// Inputs: x, y: f64 vectors; f: f32 vector; k: i64 vector; b: bool vector; M: f64 matrix.
pub fn inputs() -> Vec<Tensor> {
    vec![
        vector("x", DType::F64),
        vector("y", DType::F64),
        vector("f", DType::F32),
        vector("k", DType::I64),
        vector("b", DType::Bool),
        matrix("M", DType::F64),
    ]
}

/// [`inputs`] and a vector of every other dtype: u: u8, c: i8, h: i16,
/// w: i32 (so that the pool holds every dtype from the start).
pub fn inputs_every_dtype() -> Vec<Tensor> {
    let mut ins = inputs();
    ins.extend([
        vector("u", DType::U8),
        vector("c", DType::I8),
        vector("h", DType::I16),
        vector("w", DType::I32),
    ]);
    ins
}

/// Applies the steps to [`inputs`], skipping those that do not type-check;
/// returns the inputs and outputs.
pub fn build(steps: &[Step], n_out: usize) -> (Vec<Tensor>, Vec<Tensor>) {
    build_from(inputs(), steps, n_out)
}

/// Applies the steps to the pool `ins`, skipping those that do not
/// type-check; returns the inputs and outputs.
pub fn build_from(ins: Vec<Tensor>, steps: &[Step], n_out: usize) -> (Vec<Tensor>, Vec<Tensor>) {
    let mut pool: Vec<Tensor> = ins.clone();
    for s in steps {
        let n = pool.len();
        let p = |k: usize| &pool[k % n];
        let t: Result<Tensor> = match *s {
            Step::Unary(o, a) => elemwise(UNARY[o], &[p(a)]),
            Step::Binary(o, a, b) => elemwise(BINARY[o], &[p(a), p(b)]),
            Step::WithConst(o, a, c, left) => {
                let x = p(a);
                let k = weak_constant(x, CONSTS[c], CONSTS[c].fract() != 0.0);
                if left {
                    elemwise(BINARY[o], &[&k, x])
                } else {
                    elemwise(BINARY[o], &[x, &k])
                }
            }
            Step::Reduce(o, a, ax, keep) => {
                let x = p(a);
                let op = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Prod, ReduceOp::Any][o];
                let axes: Option<Vec<isize>> = match ax {
                    0 => None,
                    a => Some(vec![(a as isize - 1) % (x.ndim().max(1) as isize)]),
                };
                if x.ndim() == 0 {
                    continue;
                }
                x.reduce(op, axes.as_deref(), keep)
            }
            Step::Transpose(a) => Ok(p(a).t()),
            Step::Outer(a, b) => {
                let (u, v) = (p(a), p(b));
                if u.ndim() != 1 || v.ndim() != 1 {
                    continue;
                }
                let (Ok(cu), Ok(rv)) = (u.expand_dims(1), v.expand_dims(0)) else {
                    continue;
                };
                add(&cu, &rv)
            }
            Step::Dot(a, b) => {
                let (u, v) = (p(a), p(b));
                if !u.dtype().is_float() || !v.dtype().is_float() {
                    continue;
                }
                dot(u, v)
            }
            Step::Gemm(z, a, b, c) => {
                // A float matrix times any float operand, onto a pool
                // tensor of the product's type when there is one.
                let floats: Vec<&Tensor> = pool.iter().filter(|t| t.dtype().is_float()).collect();
                let mats: Vec<&Tensor> = floats.iter().copied().filter(|t| t.ndim() == 2).collect();
                let (u, v) = (mats[a % mats.len()], floats[b % floats.len()]);
                let Ok(d) = dot(u, v) else { continue };
                let zs: Vec<&Tensor> = pool
                    .iter()
                    .filter(|t| {
                        t.dtype() == d.dtype() && t.ty().broadcastable() == d.ty().broadcastable()
                    })
                    .collect();
                let Some(&zt) = zs.get(z % zs.len().max(1)) else {
                    continue;
                };
                let scaled = elemwise(ScalarOp::Mul, &[&weak_constant(&d, CONSTS[c], true), &d]);
                scaled.and_then(|sd| add(zt, &sd))
            }
            Step::Switch(c, a, b) => switch(p(c), p(a), p(b)),
            Step::Cast(a, d) => Ok(p(a).cast(DTYPES[d])),
            Step::ArgReduce(o, a, ax, keep) => {
                let x = p(a).clone();
                let axis = match ax {
                    0 => None,
                    a => Some((a as isize - 1) % (x.ndim().max(1) as isize)),
                };
                let op = [ArgOp::Max, ArgOp::Min, ArgOp::Max][o];
                if o == 2 {
                    let axes: Option<Vec<isize>> = axis.map(|a| vec![a]);
                    if x.ndim() == 0 {
                        continue;
                    }
                    if let Ok(m) = x.reduce(ReduceOp::Max, axes.as_deref(), keep) {
                        pool.push(m);
                    }
                }
                x.arg_reduce(op, axis, keep)
            }
            Step::Cumulative(a, ax, prod) => {
                let x = p(a);
                let axis = match ax {
                    0 => None,
                    a => Some((a as isize - 1) % (x.ndim().max(1) as isize)),
                };
                if x.ndim() == 0 && axis.is_some() {
                    continue;
                }
                let op = if prod { ReduceOp::Prod } else { ReduceOp::Sum };
                x.cumulative(op, axis)
            }
            Step::Softmax(a, ax, log) => {
                let x = p(a);
                if !x.dtype().is_float() {
                    continue;
                }
                let axis = match ax {
                    0 => None,
                    a => Some((a as isize - 1) % (x.ndim().max(1) as isize)),
                };
                if x.ndim() == 0 && axis.is_some() {
                    continue;
                }
                x.softmax_op(axis, log)
            }
        };
        if let Ok(t) = t {
            pool.push(t);
        }
    }
    let outs: Vec<Tensor> = pool[ins.len()..]
        .iter()
        .rev()
        .take(n_out)
        .cloned()
        .collect();
    let outs = if outs.is_empty() {
        vec![&ins[0] + 1.0]
    } else {
        outs
    };
    (ins, outs)
}

/// Edge values mixed into the inputs.
pub const EDGE: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    1e300,
    -1e300,
    1e-300,
    5e-324,
    0.5,
    700.0,
    -700.0,
];

/// Integer edge values (clamped into each dtype: its minimum and maximum).
pub const INT_EDGE: &[i64] = &[0, 1, -1, i64::MIN, i64::MAX, 127, -128, 255, 2];

/// Deterministic values for `ins` (vectors of length `n`, matrices
/// `m x n`): floats as [`values`] draws them, integers mixing the dtype's
/// edges (0, ±1, its minimum and maximum, wrap points) with small numbers.
pub fn values_for(ins: &[Tensor], n: usize, m: usize, seed: u64, edges: bool) -> Vec<Value> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    ins.iter()
        .map(|t| {
            let shape: Vec<usize> = match t.ndim() {
                0 => vec![],
                1 => vec![n],
                _ => vec![m, n],
            };
            let len: usize = shape.iter().product();
            let dtype = t.dtype();
            let mut draw = || -> f64 {
                let u = next();
                let edge = edges && u < 0.25;
                if dtype.is_float() {
                    if edge {
                        EDGE[((next() * EDGE.len() as f64) as usize).min(EDGE.len() - 1)]
                    } else {
                        (next() - 0.5) * 8.0
                    }
                } else if edge {
                    let e = INT_EDGE
                        [((next() * INT_EDGE.len() as f64) as usize).min(INT_EDGE.len() - 1)];
                    let (lo, hi) = int_range(dtype);
                    e.clamp(lo, hi) as f64
                } else {
                    ((next() - 0.5) * 60.0).round()
                }
            };
            let data: Vec<f64> = (0..len).map(|_| draw()).collect();
            let a = ArrayD::from_shape_vec(IxDyn(&shape), data).expect("sized");
            if dtype.is_float() || dtype == DType::Bool {
                Value::F64(a).cast(dtype)
            } else {
                Value::from_i64_array(dtype, a.mapv(|x| x as i64))
            }
        })
        .collect()
}

/// The smallest and largest value of an integer dtype.
fn int_range(dtype: DType) -> (i64, i64) {
    match dtype {
        DType::U8 => (0, 255),
        DType::I8 => (-128, 127),
        DType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        _ => (i64::MIN, i64::MAX),
    }
}

/// Deterministic values for [`inputs`]: a mix of edge values and moderate numbers.
pub fn values(n: usize, m: usize, seed: u64, edges: bool) -> Vec<Value> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut draw = |k: usize| -> Vec<f64> {
        (0..k)
            .map(|_| {
                let u = next();
                if edges && u < 0.25 {
                    EDGE[((next() * EDGE.len() as f64) as usize).min(EDGE.len() - 1)]
                } else {
                    (next() - 0.5) * 8.0
                }
            })
            .collect()
    };
    let v = |d: Vec<f64>, shape: &[usize]| ArrayD::from_shape_vec(IxDyn(shape), d).expect("sized");
    vec![
        Value::F64(v(draw(n), &[n])),
        Value::F64(v(draw(n), &[n])),
        Value::F32(v(draw(n), &[n]).mapv(|x| x as f32)),
        Value::I64(v(draw(n), &[n]).mapv(|x| {
            if x.is_finite() {
                x.clamp(-50.0, 50.0) as i64
            } else {
                3
            }
        })),
        Value::Bool(v(draw(n), &[n]).mapv(|x| x > 0.0)),
        Value::F64(v(draw(m * n), &[m, n])),
    ]
}
