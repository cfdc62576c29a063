//! Random well-typed graphs shared by the property tests: a step language
//! over a pool of tensors (element-wise ops with and without constants,
//! reductions, arg-reductions (and a `max` beside an `argmax`), softmax and
//! log-softmax, cumulative sums and products, transposes, outer sums, dot,
//! batched matrix products (`BatchedDot`, broadcast batch dimensions),
//! `z + c * dot(u, v)` (the Gemm pattern), switch, casts, basic indexing
//! and slice updates, gathers and indexed updates with indices in range
//! (negative ones too, computed from an integer pool tensor modulo the axis
//! length), joins, stacks, splits and boolean masks), the inputs it
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
    ScalarOp::Trunc,
    ScalarOp::IsNan,
    ScalarOp::IsInf,
    ScalarOp::IsFinite,
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
    ScalarOp::ArcTan2,
    ScalarOp::Hypot,
    ScalarOp::CopySign,
    ScalarOp::Fmod,
    ScalarOp::LeftShift,
    ScalarOp::RightShift,
    ScalarOp::Xor,
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
    DType::U16,
    DType::U32,
    DType::U64,
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
    /// Basic indexing and slice updates of a pool tensor: the pattern
    /// (see [`index_step`]), the tensor, and a choice within the pattern.
    Index(usize, usize, usize),
    /// `take(x, idx, axis)`: x, the integer vector the index is computed
    /// from, the axis, and whether the index counts from the end.
    Take(usize, usize, usize, bool),
    /// An indexed update of x by a vector y: x, the index source, y, the
    /// axis, and whether it overwrites (`set`).
    IncTake(usize, usize, usize, usize, bool),
    /// `stack` of two vectors along an axis, or `concatenate([m, m])` of a
    /// matrix along axis 0 (without the flag).
    Join(usize, usize, usize, bool),
    /// Part 0 or 1 of a vector split in two at half its run-time length.
    Split(usize, bool),
    /// `v[mask]` for a vector and a mask from an input vector (bool, or
    /// compared with 0).
    Mask(usize, usize),
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
    /// A batched matrix product (`matmul` of stacks, [`batched_dot_step`]):
    /// the pattern, the tensor the stacks are made of (among the pool's
    /// tensors of 2 or more dimensions) and a second one.
    BatchedDot(usize, usize, usize),
}

/// Pattern `kind` of [`Step::BatchedDot`] over `u` (`v` a second pool
/// tensor): stacks made of `u`'s rows and columns by `DimShuffle`s, so that
/// the run-time sizes agree whatever `u`'s shape, with batch dimensions
/// equal (`u[:, None, :] @ u[:, :, None]`, row-wise products), broadcast
/// from a static size 1 (`u[:, None, :] @ u.T[None]`), missing on one side
/// (`u[:, None, :] @ u.T`, one matrix shared by every batch), all of static
/// size 1 (`u[None] @ u.T[None]`), over operands of 4 and 3 dimensions, by
/// a vector (`u[:, None, :] @ v`, a 1-d `v`), row-wise products of `u` and
/// a matrix `v`, and `t @ t.T` (last two axes) for a stack `t` of 3 or
/// more dimensions.
pub fn batched_dot_step(kind: usize, u: &Tensor, v: &Tensor) -> Result<Tensor> {
    let skip = || Err(Error::Graph("no batched product of these operands".into()));
    let d = |t: &Tensor, order: &[Option<usize>]| t.dimshuffle(order);
    if u.ndim() >= 3 {
        let nd = u.ndim();
        let mut order: Vec<Option<usize>> = (0..nd - 2).map(Some).collect();
        order.extend([Some(nd - 1), Some(nd - 2)]);
        return matmul(u, &u.dimshuffle(&order)?);
    }
    if u.ndim() != 2 {
        return skip();
    }
    let (rows, cols) = (Some(0), Some(1));
    match kind {
        0 => matmul(&d(u, &[rows, None, cols])?, &d(u, &[rows, cols, None])?),
        1 => matmul(&d(u, &[rows, None, cols])?, &d(u, &[None, cols, rows])?),
        2 => matmul(&d(u, &[rows, None, cols])?, &u.t()),
        3 => matmul(&d(u, &[None, rows, cols])?, &d(u, &[None, cols, rows])?),
        4 => matmul(
            &d(u, &[None, rows, None, cols])?,
            &d(u, &[rows, cols, None])?,
        ),
        5 if v.ndim() == 1 => matmul(&d(u, &[rows, None, cols])?, v),
        6 if v.ndim() == 2 => matmul(&d(u, &[rows, None, cols])?, &d(v, &[rows, cols, None])?),
        _ => skip(),
    }
}

/// A constant slice as `(start, stop, step)`.
pub type Bounds = (Option<i64>, Option<i64>, Option<i64>);

/// Constant slices as `(start, stop, step)`, paired so that both of a pair
/// select as many elements of any length (the update patterns need it).
pub const SLICE_PAIRS: &[[Bounds; 2]] = &[
    [(Some(1), None, None), (None, Some(-1), None)],
    [(None, None, Some(-1)), (None, None, None)],
    [(Some(1), None, None), (Some(-1), Some(0), Some(-1))],
    [(Some(2), None, None), (None, Some(-2), None)],
    [
        (Some(-2), Some(-100), Some(-2)),
        (Some(-1), Some(-100), Some(-2)),
    ],
    [
        (Some(-100), Some(100), None),
        (Some(100), Some(-100), Some(-1)),
    ],
];

fn slice_idx((start, stop, step): Bounds) -> Idx {
    Idx::Slice {
        start: start.map(IdxBound::Const),
        stop: stop.map(IdxBound::Const),
        step: step.map(IdxBound::Const),
    }
}

/// Pattern `kind` of [`Step::Index`] on `t` (`c` picks within it): a
/// reversed or shifted view (`t[::-1]`, `t[:, ::-1]`, `t[1:][::-1]`, a
/// negative-step slice), an integer index (`t[0]`, `t[-1]`, `t[:, 1]`),
/// `set_subtensor` / `inc_subtensor` of one slice of a pair by the other
/// (or by a constant), and the central difference `t[2:] - t[:-2]`
/// written back into `t[1:-1]`.
pub fn index_step(kind: usize, t: &Tensor, c: usize) -> Result<Tensor> {
    if t.ndim() == 0 {
        return Err(Error::Graph("a 0-d tensor has nothing to index".into()));
    }
    let pair = SLICE_PAIRS[c % SLICE_PAIRS.len()];
    let (dst, src) = (slice_idx(pair[0]), slice_idx(pair[1]));
    match kind {
        0 => t.slice(&[src]),
        1 => t.slice(&[Idx::from(..).step(-1)]),
        2 => t.slice(&[Idx::from([0, -1, 1][c % 3])]),
        3 => t.slice(&[Idx::FULL, Idx::from(..).step([-1, 2, -2][c % 3])]),
        4 => t.slice(&[Idx::FULL, Idx::from(1)]),
        5 => t.slice(&[Idx::from(1..)])?.slice(&[Idx::from(..).step(-1)]),
        6 => set_subtensor(t, &[dst], &t.slice(&[src])?),
        7 => inc_subtensor(t, &[dst], &t.slice(&[src])?),
        8 => {
            let k = weak_constant(t, CONSTS[c % CONSTS.len()], false)?;
            if c.is_multiple_of(2) {
                set_subtensor(t, &[dst], &k)
            } else {
                inc_subtensor(t, &[dst], &k)
            }
        }
        _ => {
            let (a, m) = (t.slice(&[Idx::from(2..)])?, t.slice(&[Idx::from(..-2)])?);
            set_subtensor(t, &[Idx::range(1, -1)], &sub(&a, &m)?)
        }
    }
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
        1 => (0..10usize, i(), 0..12usize).prop_map(|(k, a, c)| Step::Index(k, a, c)),
        1 => (0..3usize, i(), 0..3usize, any::<bool>()).prop_map(|(o, a, ax, k)| Step::ArgReduce(o, a, ax, k)),
        1 => (i(), 0..3usize, any::<bool>()).prop_map(|(a, ax, l)| Step::Softmax(a, ax, l)),
        1 => (i(), 0..3usize, any::<bool>()).prop_map(|(a, ax, p)| Step::Cumulative(a, ax, p)),
    ]
}

/// A random step of [`step`] or (one time in three) of advanced indexing
/// and joining: gathers, indexed updates, stacks and joins, splits, masks.
/// A strategy of its own, so that [`step`]'s stream (and the cases the
/// main property draws from its fixed seed) stay as they were.
pub fn indexing_step() -> impl Strategy<Value = Step> {
    let i = || 0..64usize;
    prop_oneof![
        10 => step(),
        2 => (i(), i(), 0..2usize, any::<bool>()).prop_map(|(a, b, ax, n)| Step::Take(a, b, ax, n)),
        1 => (i(), i(), i(), 0..2usize, any::<bool>()).prop_map(|(a, b, c, ax, s)| Step::IncTake(a, b, c, ax, s)),
        1 => (i(), i(), 0..2usize, any::<bool>()).prop_map(|(a, b, ax, st)| Step::Join(a, b, ax, st)),
        1 => (i(), any::<bool>()).prop_map(|(a, p)| Step::Split(a, p)),
        1 => (i(), i()).prop_map(|(a, b)| Step::Mask(a, b)),
    ]
}

/// A random step of [`step`] or (one time in four) a batched matrix
/// product ([`Step::BatchedDot`]); a strategy of its own for the same
/// reason as [`indexing_step`].
pub fn matmul_step() -> impl Strategy<Value = Step> {
    let i = || 0..64usize;
    prop_oneof![
        9 => step(),
        3 => (0..7usize, i(), i()).prop_map(|(k, a, b)| Step::BatchedDot(k, a, b)),
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
/// w: i32, p: u16, q: u32, r: u64 (so that the pool holds every dtype from
/// the start).
pub fn inputs_every_dtype() -> Vec<Tensor> {
    let mut ins = inputs();
    ins.extend([
        vector("u", DType::U8),
        vector("c", DType::I8),
        vector("h", DType::I16),
        vector("w", DType::I32),
        vector("p", DType::U16),
        vector("q", DType::U32),
        vector("r", DType::U64),
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
                weak_constant(x, CONSTS[c], CONSTS[c].fract() != 0.0).and_then(|k| {
                    if left {
                        elemwise(BINARY[o], &[&k, x])
                    } else {
                        elemwise(BINARY[o], &[x, &k])
                    }
                })
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
                let scaled = weak_constant(&d, CONSTS[c], true)
                    .and_then(|k| elemwise(ScalarOp::Mul, &[&k, &d]));
                scaled.and_then(|sd| add(zt, &sd))
            }
            Step::Switch(c, a, b) => switch(p(c), p(a), p(b)),
            Step::Cast(a, d) => Ok(p(a).cast(DTYPES[d])),
            Step::Index(k, a, c) => index_step(k, p(a), c),
            Step::Take(a, b, ax, neg) => {
                let x = p(a);
                let Some(idx) = index_for(&ins, x, b, ax, neg) else {
                    continue;
                };
                take(x, &idx, ax as isize)
            }
            Step::IncTake(a, b, c, ax, set) => {
                let x = p(a);
                let Some(idx) = index_for(&ins, x, b, ax, false) else {
                    continue;
                };
                // A vector whose dtype upcasts into x's (its length n is the
                // last dimension of x[idx] in every case).
                let ys: Vec<&Tensor> = pool
                    .iter()
                    .filter(|t| t.ndim() == 1 && DType::upcast(x.dtype(), t.dtype()) == x.dtype())
                    .collect();
                let Some(&y) = ys.get(c % ys.len().max(1)) else {
                    continue;
                };
                if set {
                    advanced_set_subtensor1(x, ax as isize, &idx, y)
                } else {
                    advanced_inc_subtensor1(x, ax as isize, &idx, y)
                }
            }
            Step::Join(a, b, ax, stacked) => {
                let (x, y) = (p(a), p(b));
                if x.ndim() == 0 || ax >= x.ndim() + usize::from(stacked) {
                    continue;
                }
                // Never a vector longer than n: an outer product of two
                // would have (2n)^2 elements and swamp every other case.
                match (x.ndim(), y.ndim(), stacked) {
                    (1, 1, _) => stack(&[x, y], ax as isize),
                    (2, _, false) => concatenate(&[x, x], 0),
                    _ => continue,
                }
            }
            Step::Split(a, second) => {
                let x = p(a);
                if x.ndim() != 1 {
                    continue;
                }
                let len = x.shape_i(0).unwrap();
                let half = int_div(&len, &Tensor::scalar_constant(DType::I64, 2.0)).unwrap();
                let rest = sub(&len, &half).unwrap();
                let sizes = stack(&[&half, &rest], 0).unwrap();
                split_by(x, &sizes, 0).map(|parts| parts[usize::from(second)].clone())
            }
            Step::Mask(a, b) => {
                // The mask comes from an input (a bool one, or a number one
                // compared with 0): a computed mask that a rewrite may
                // license to differ would change the output's length.
                let x = p(a);
                let vecs: Vec<&Tensor> = ins.iter().filter(|t| t.ndim() == 1).collect();
                let Some(&m) = vecs.get(b % vecs.len().max(1)) else {
                    continue;
                };
                if x.ndim() != 1 {
                    continue;
                }
                if m.dtype() == DType::Bool {
                    boolean_mask(x, m)
                } else {
                    weak_constant(m, 0.0, false)
                        .and_then(|zero| gt(m, &zero))
                        .and_then(|mask| boolean_mask(x, &mask))
                }
            }
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
            Step::BatchedDot(k, a, b) => {
                // The stacks are made of a pool tensor of 2 or more
                // dimensions (the inputs hold a matrix).
                let mats: Vec<&Tensor> = pool.iter().filter(|t| t.ndim() >= 2).collect();
                batched_dot_step(k, mats[a % mats.len()], p(b))
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

/// An index into axis `axis` of `x`, in range at run time: an integer
/// input vector (the `b`-th of `ins`; never a computed one, whose values a
/// rewrite may license to differ, which would make whole outputs
/// unsettled) cast to `i64`, modulo the axis length
/// (numpy's floor modulo: in `[0, len)`), minus the length when `neg`
/// (in `[-len, -1]`); along axis 0 of a matrix, one index computed from
/// the vector's sum. Every input vector has the length `n` and a matrix's
/// axis 0 the length `m >= 1`, so the index is in range or empty (`n = 0`);
/// only an axis that is empty at run time while `n > 0` (a mask selecting
/// nothing, a split part of length 0) makes both evaluators fail alike.
fn index_for(ins: &[Tensor], x: &Tensor, b: usize, axis: usize, neg: bool) -> Option<Tensor> {
    if axis >= x.ndim() {
        return None;
    }
    let ints: Vec<&Tensor> = ins
        .iter()
        .filter(|t| t.ndim() == 1 && t.dtype().is_int())
        .collect();
    let mut k = ints.get(b % ints.len().max(1))?.cast(DType::I64);
    if x.ndim() >= 2 && axis == 0 {
        // One row (`[sum(k) mod m]`, a static size-1 index): a length-n
        // index would make an n x n gather whose size swamps the others.
        k = k.sum_all().expand_dims(0).ok()?;
    }
    let len = x.shape_i(axis).ok()?;
    let idx = modulo(&k, &len).ok()?;
    if neg {
        sub(&idx, &len).ok()
    } else {
        Some(idx)
    }
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

/// The smallest and largest value of an integer dtype; the full `i64` range
/// for `i64`, `u16`, `u32` and `u64`, whose edges then wrap (`-1` is the
/// unsigned maximum, `i64::MIN` is 0 or 2^63).
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
