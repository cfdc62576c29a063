//! Every vector path on arrays that are element-aligned but not 16-byte
//! aligned (the data of `x.slice(s![1..])`): element-wise kernels at the
//! lengths where the vector path's structure changes (f64 and f32, with a
//! broadcast operand, around block-wise math calls, the direct runtime
//! call), reductions along each axis and over all, fused reductions
//! (including the log-sum-exp row pass), broadcast rows, results written in
//! place into a mutable input and into `call_into` output arrays. Kernels
//! must not assume more alignment than the element's (no access is marked
//! aligned); each result is checked against the reference evaluator on the
//! un-rewritten graph.
mod jit_support;
use jit_support::*;
use kiln::linker::{Arg, ArgMut};
use kiln::{eval, function, matrix, scalar, vector, DType, FunctionGraph, Tensor, Value};
use ndarray::{ArrayD, ArrayViewD, ArrayViewMutD, IxDyn};

/// Lengths around every boundary of the element-wise vector path (see
/// tests/jit_vector_paths.rs).
const LENGTHS: &[usize] = &[
    1, 2, 3, 7, 8, 9, 15, 16, 17, 127, 128, 129, 255, 257, 4095, 4096, 4097, 10_001, 300_001,
];

/// A copy of `a`'s elements placed in a buffer at an element offset where
/// the data does not start on a 16-byte boundary; returns the buffer and
/// the offset.
fn misaligned<T: Copy + Default>(a: &ArrayD<T>) -> (Vec<T>, usize) {
    let size = std::mem::size_of::<T>();
    let mut buf = vec![T::default(); a.len() + 16 / size];
    let start = buf.as_ptr() as usize;
    let off = (1..16 / size)
        .find(|k| !(start + k * size).is_multiple_of(16))
        .expect("some element offset is misaligned");
    for (d, &x) in buf[off..].iter_mut().zip(a.iter()) {
        *d = x;
    }
    (buf, off)
}

fn view<'a, T>(buf: &'a (Vec<T>, usize), shape: &[usize]) -> ArrayViewD<'a, T> {
    let n: usize = shape.iter().product();
    let v = ArrayViewD::from_shape(IxDyn(shape), &buf.0[buf.1..buf.1 + n]).expect("sized");
    assert_ne!(v.as_ptr() as usize % 16, 0, "the view is misaligned");
    v
}

fn view_mut<'a, T>(buf: &'a mut (Vec<T>, usize), shape: &[usize]) -> ArrayViewMutD<'a, T> {
    let n: usize = shape.iter().product();
    let off = buf.1;
    ArrayViewMutD::from_shape(IxDyn(shape), &mut buf.0[off..off + n]).expect("sized")
}

/// An owned output array of `shape` whose data starts one element into its
/// allocation (misaligned), as `call_into` may be given.
fn misaligned_output(dtype: DType, shape: &[usize]) -> Value {
    let n: usize = shape.iter().product();
    macro_rules! shifted {
        ($t:ty, $v:ident) => {{
            let mut a = ndarray::Array1::<$t>::zeros(n + 1);
            a.slice_collapse(ndarray::s![1..]);
            let a = a.into_shape_with_order(IxDyn(shape)).expect("sized");
            assert_ne!(a.as_ptr() as usize % 16, 0, "the output is misaligned");
            Value::$v(a)
        }};
    }
    match dtype {
        DType::F32 => shifted!(f32, F32),
        _ => shifted!(f64, F64),
    }
}

fn out_ptr(v: &Value) -> usize {
    match v {
        Value::F32(a) => a.as_ptr() as usize,
        Value::F64(a) => a.as_ptr() as usize,
        _ => unreachable!("float outputs only"),
    }
}

fn rtol(dtype: DType) -> f64 {
    if dtype == DType::F32 {
        1e-5
    } else {
        1e-12
    }
}

/// `steps` Horner steps `acc = acc * x + s + k` from `acc = x`.
fn horner(x: &Tensor, s: &Tensor, steps: usize) -> Tensor {
    let mut acc = x.clone();
    for k in 0..steps {
        acc = &(&(&acc * x) + s) + (k as f64 * 0.25);
    }
    acc
}

/// Element-wise programs over the vectors `x`, `y` and the scalar `s`.
fn elemwise_programs(x: &Tensor, y: &Tensor, s: &Tensor) -> Vec<(String, Tensor)> {
    let mut v = vec![
        ("exp(x)".to_string(), x.exp()),
        ("x*y+s".to_string(), &(x * y) + s),
        ("tanh(x)+y".to_string(), &x.tanh() + y),
    ];
    for steps in [1, 4, 10] {
        v.push((format!("horner{steps}"), horner(x, s, steps)));
        let inner = horner(x, s, steps) * 0.1;
        v.push((format!("exp(horner{steps})*y+s"), &(&inner.exp() * y) + s));
    }
    v
}

/// Runs the element-wise programs for `dtype` at every length through
/// `call` (misaligned inputs), `call_into` (misaligned output array) and
/// `call_mut` (in place into a misaligned mutable `x`).
fn elemwise_case<T>(dtype: DType, to_t: impl Fn(f64) -> T + Copy)
where
    T: Copy + Default + ndarray::NdFloat,
    for<'a> Arg<'a>: From<ArrayViewD<'a, T>>,
    for<'a> ArgMut<'a>: From<ArrayViewMutD<'a, T>>,
    Value: From<ArrayD<T>>,
{
    let x = vector("x", dtype);
    let y = vector("y", dtype);
    let s = scalar("s", dtype);
    for (name, out) in elemwise_programs(&x, &y, &s) {
        let ins = [x.clone(), y.clone(), s.clone()];
        let outs = [out];
        let fg = FunctionGraph::new(&ins, &outs).unwrap();
        let f = function(&ins, &outs).compile().unwrap();
        let fm = function(&ins, &outs)
            .mutable_inputs(&[0])
            .compile()
            .unwrap();
        for (k, &n) in LENGTHS.iter().enumerate() {
            let what = format!("{name} {dtype}, n = {n}");
            let vx = rand_f64(&[n], 300 + k as u64, 0.5, 1.5).mapv(to_t);
            let vy = rand_f64(&[n], 700 + k as u64, 0.5, 1.5).mapv(to_t);
            let vs = ndarray::arr0(to_t(0.75)).into_dyn();
            let want = eval::evaluate(
                &fg,
                &[
                    Value::from(vx.clone()),
                    Value::from(vy.clone()),
                    Value::from(vs.clone()),
                ],
            )
            .unwrap()
            .remove(0);
            let (bx, by) = (misaligned(&vx), misaligned(&vy));
            let args = [
                Arg::from(view(&bx, &[n])),
                Arg::from(view(&by, &[n])),
                Arg::from(vs.view()),
            ];
            let got = f.call(&args).unwrap();
            assert_close(&got[0], &want, rtol(dtype), &what);
            let mut dst = vec![misaligned_output(dtype, &[n])];
            let before = out_ptr(&dst[0]);
            f.call_into(&args, &mut dst).unwrap();
            assert_close(&dst[0], &want, rtol(dtype), &format!("{what}, call_into"));
            assert_eq!(out_ptr(&dst[0]), before, "{what}: the output array is kept");
            let mut bxm = misaligned(&vx);
            let got = fm
                .call_mut(&mut [
                    ArgMut::from(view_mut(&mut bxm, &[n])),
                    ArgMut::Ref(Arg::from(view(&by, &[n]))),
                    ArgMut::Ref(Arg::from(vs.view())),
                ])
                .unwrap();
            assert_close(&got[0], &want, rtol(dtype), &format!("{what}, in place"));
        }
    }
}

#[test]
fn elemwise_vector_paths_on_misaligned_f64_arrays_match_the_reference() {
    elemwise_case::<f64>(DType::F64, |v| v);
}

#[test]
fn elemwise_vector_paths_on_misaligned_f32_arrays_match_the_reference() {
    elemwise_case::<f32>(DType::F32, |v| v as f32);
}

/// Reductions and fused reductions of a matrix `x`, some with a row `b`
/// broadcast over it.
fn reduction_programs(x: &Tensor, b: &Tensor) -> Vec<(String, Tensor)> {
    let row = b.dimshuffle(&[None, Some(0)]).unwrap();
    let mut v = Vec::new();
    for axes in [&[0isize][..], &[1], &[0, 1]] {
        v.push((format!("sum{axes:?}"), x.sum(axes).unwrap()));
        v.push((format!("max{axes:?}"), x.max(axes).unwrap()));
        v.push((
            format!("min{axes:?}"),
            x.reduce(kiln::ReduceOp::Min, Some(axes), false).unwrap(),
        ));
        v.push((
            format!("prod{axes:?}"),
            x.reduce(kiln::ReduceOp::Prod, Some(axes), false).unwrap(),
        ));
        // Fused: an element-wise pre-map folded into the reduction.
        v.push((format!("sum(x*x){axes:?}"), (x * x).sum(axes).unwrap()));
        v.push((
            format!("max(exp(x)+b){axes:?}"),
            (&x.exp() + &row).max(axes).unwrap(),
        ));
    }
    // The row pass of a stabilised log-sum-exp: sum(exp(x - max)) per row.
    let m = x.reduce(kiln::ReduceOp::Max, Some(&[1]), true).unwrap();
    v.push((
        "sum(exp(x - max(x)))[1]".into(),
        (x - &m).exp().sum(&[1]).unwrap(),
    ));
    // Broadcast row, element-wise.
    v.push(("x*b+1".into(), &(x * &row) + 1.0));
    v
}

fn reduction_case<T>(dtype: DType, to_t: impl Fn(f64) -> T + Copy)
where
    T: Copy + Default + ndarray::NdFloat,
    for<'a> Arg<'a>: From<ArrayViewD<'a, T>>,
    Value: From<ArrayD<T>>,
{
    let x = matrix("x", dtype);
    let b = vector("b", dtype);
    for (name, out) in reduction_programs(&x, &b) {
        let ins = [x.clone(), b.clone()];
        let outs = [out];
        let fg = FunctionGraph::new(&ins, &outs).unwrap();
        let f = function(&ins, &outs).compile().unwrap();
        for (k, &(r, c)) in [(1, 1), (3, 37), (37, 3), (2, 1001), (64, 130), (300, 700)]
            .iter()
            .enumerate()
        {
            let what = format!("{name} {dtype}, shape ({r}, {c})");
            let vx = rand_f64(&[r, c], 40 + k as u64, 0.5, 1.5).mapv(to_t);
            let vb = rand_f64(&[c], 90 + k as u64, 0.5, 1.5).mapv(to_t);
            let want = eval::evaluate(&fg, &[Value::from(vx.clone()), Value::from(vb.clone())])
                .unwrap()
                .remove(0);
            let (bx, bb) = (misaligned(&vx), misaligned(&vb));
            let args = [Arg::from(view(&bx, &[r, c])), Arg::from(view(&bb, &[c]))];
            let got = f.call(&args).unwrap();
            // Products of hundreds of factors: relative error grows with the count.
            let tol = if name.starts_with("prod") {
                rtol(dtype) * 1e3
            } else {
                rtol(dtype)
            };
            assert_close(&got[0], &want, tol, &what);
            if got[0].ndim() > 0 {
                let mut dst = vec![misaligned_output(dtype, want.shape())];
                f.call_into(&args, &mut dst).unwrap();
                assert_close(&dst[0], &want, tol, &format!("{what}, call_into"));
            }
        }
    }
}

#[test]
fn reductions_on_misaligned_f64_arrays_match_the_reference() {
    reduction_case::<f64>(DType::F64, |v| v);
}

#[test]
fn reductions_on_misaligned_f32_arrays_match_the_reference() {
    reduction_case::<f32>(DType::F32, |v| v as f32);
}
