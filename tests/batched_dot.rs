//! Batched matrix products (`BatchedDot`, numpy's `matmul`) and
//! `tensordot`: type inference and rejected inputs (messages checked),
//! reference values as numpy computes them (broadcast batches, 1-d
//! operands, empty batches, k = 0, NaN), the JIT against the reference on
//! every path of the executor (one GEMM per batch, one GEMM for a shared
//! `b`, batches over threads, integers) and on strided, transposed and
//! reversed inputs, run-time shape errors, and the expression language.

mod jit_support;

use std::collections::HashMap;

use jit_support::{assert_close, rand_f64, rand_value};
use kiln::eval::evaluate;
use kiln::linker::Arg;
use kiln::rewriting::Mode;
use kiln::*;
use ndarray::{ArrayD, IxDyn};

fn t(dtype: DType, shape: &[Option<usize>]) -> Tensor {
    tensor("x", dtype, shape)
}

fn i64s(shape: &[usize], v: Vec<i64>) -> Value {
    Value::I64(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
}

fn f64s(shape: &[usize], v: Vec<f64>) -> Value {
    Value::F64(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
}

/// The reference value of `out` for `inputs` bound to `vals`.
fn reference(inputs: &[Tensor], out: &Tensor, vals: &[Value]) -> Value {
    let fg = FunctionGraph::new(inputs, std::slice::from_ref(out)).unwrap();
    evaluate(&fg, vals).unwrap().remove(0)
}

/// The compiled value (mode `mode`) of `out` for `inputs` bound to `vals`.
fn compiled(inputs: &[Tensor], out: &Tensor, vals: &[Value], mode: Mode) -> Result<Value> {
    let f = function(inputs, std::slice::from_ref(out))
        .mode(mode)
        .compile()?;
    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
    Ok(f.call(&args)?.remove(0))
}

#[test]
fn types_and_rejected_inputs() {
    let a = t(DType::F32, &[Some(5), None, Some(2), Some(3)]);
    let b = t(DType::F32, &[Some(1), Some(3), Some(4)]);
    let c = matmul(&a, &b).unwrap();
    assert_eq!(
        c.ty(),
        &TensorType::new(DType::F32, vec![Some(5), None, Some(2), Some(4)])
    );
    assert_eq!(c.owner_op(), Some(&Op::BatchedDot));
    // A batch size known on one side only is known in the output; dtype as dot.
    let a = t(DType::I8, &[None, Some(2), Some(3)]);
    let b = t(DType::Bool, &[Some(7), Some(3), None]);
    assert_eq!(
        matmul(&a, &b).unwrap().ty(),
        &TensorType::new(DType::I8, vec![Some(7), Some(2), None])
    );
    let bb = t(DType::Bool, &[Some(2), Some(3), Some(3)]);
    assert_eq!(matmul(&bb, &bb).unwrap().dtype(), DType::I64);
    // 1-d operands are promoted and their dimension dropped.
    let s = t(DType::F64, &[Some(4), Some(2), Some(3)]);
    let v = t(DType::F64, &[Some(3)]);
    assert_eq!(
        matmul(&s, &v).unwrap().ty(),
        &TensorType::new(DType::F64, vec![Some(4), Some(2)])
    );
    let w = t(DType::F64, &[Some(2)]);
    assert_eq!(
        matmul(&w, &s).unwrap().ty(),
        &TensorType::new(DType::F64, vec![Some(4), Some(3)])
    );
    // 1-d and 2-d operands stay a Dot.
    let m = t(DType::F64, &[Some(2), Some(3)]);
    assert_eq!(matmul(&m, &v).unwrap().owner_op(), Some(&Op::Dot));
    let cases: Vec<(Result<Tensor>, &str)> = vec![
        (
            matmul(&s, &t(DType::F64, &[Some(4), Some(4), Some(5)])),
            "inner dimensions differ: 3",
        ),
        (
            matmul(&s, &t(DType::F64, &[Some(3), Some(3), Some(5)])),
            "batch dimensions differ: 4 and 3",
        ),
        (
            matmul(&s, &t(DType::F64, &[])),
            "matmul: operands must have at least 1 dimension",
        ),
        (
            Tensor::apply(Op::BatchedDot, &[&s, &v]),
            "expects operands of at least 2 dimensions",
        ),
        (
            Tensor::apply(Op::BatchedDot, &[&s]),
            "expects 2 inputs, got 1",
        ),
        (tensordot(&s, &m, 3), "axes=3 exceeds the dimensions"),
        (
            tensordot_axes(&s, &m, &[0], &[0, 1]),
            "axis lists differ in length: 1 and 2",
        ),
        (
            tensordot_axes(&s, &m, &[3], &[0]),
            "axis 3 out of range for a",
        ),
        (
            tensordot_axes(&s, &m, &[1, -2], &[0, 1]),
            "axis -2 of a repeated",
        ),
        (
            tensordot_axes(&s, &m, &[0], &[0]),
            "summed axes differ in size: axis 0",
        ),
    ];
    for (r, msg) in cases {
        let e = r
            .err()
            .unwrap_or_else(|| panic!("{msg}: accepted"))
            .to_string();
        assert!(e.contains(msg), "{msg}: {e}");
    }
}

#[test]
fn reference_values_follow_numpy() {
    let a = t(DType::I64, &[None, None, None]);
    let av = i64s(&[2, 2, 3], (0..12).map(|i| i - 5).collect());
    // np.arange(12).reshape(2,2,3)-5 @ (np.arange(6).reshape(3,2)*2-3)
    let b = t(DType::I64, &[None, None]);
    let bv = i64s(&[3, 2], (0..6).map(|i| i * 2 - 3).collect());
    let r = reference(
        &[a.clone(), b.clone()],
        &matmul(&a, &b).unwrap(),
        &[av.clone(), bv],
    );
    assert!(
        r.same_as(&i64s(&[2, 2, 2], vec![-4, -28, 5, -1, 14, 26, 23, 53])),
        "{r:?}"
    );
    // A statically size-1 batch of b broadcasts against a's 2.
    let c = t(DType::I64, &[Some(1), None, None]);
    let cv = i64s(&[1, 3, 2], (0..6).collect());
    let r = reference(
        &[a.clone(), c.clone()],
        &matmul(&a, &c).unwrap(),
        &[av.clone(), cv],
    );
    assert!(
        r.same_as(&i64s(&[2, 2, 2], vec![-20, -32, -2, -5, 16, 22, 34, 49])),
        "{r:?}"
    );
    // 1-d operands on either side.
    let v = t(DType::I64, &[None]);
    let r = reference(
        &[a.clone(), v.clone()],
        &matmul(&a, &v).unwrap(),
        &[av.clone(), i64s(&[3], vec![1, -2, 3])],
    );
    assert!(r.same_as(&i64s(&[2, 2], vec![-6, 0, 6, 12])), "{r:?}");
    let r = reference(
        &[v.clone(), a.clone()],
        &matmul(&v, &a).unwrap(),
        &[i64s(&[2], vec![2, -1]), av.clone()],
    );
    assert!(
        r.same_as(&i64s(&[2, 3], vec![-8, -7, -6, -2, -1, 0])),
        "{r:?}"
    );
    // An empty batch, and k = 0 (sums of nothing are 0).
    let x = t(DType::F64, &[None, None, None]);
    let y = t(DType::F64, &[None, None, None]);
    let xy = matmul(&x, &y).unwrap();
    let r = reference(
        &[x.clone(), y.clone()],
        &xy,
        &[f64s(&[0, 2, 3], vec![]), f64s(&[0, 3, 4], vec![])],
    );
    assert_eq!(r.shape(), &[0, 2, 4]);
    let r = reference(
        &[x.clone(), y.clone()],
        &xy,
        &[f64s(&[2, 2, 0], vec![]), f64s(&[2, 0, 3], vec![])],
    );
    assert!(r.same_as(&f64s(&[2, 2, 3], vec![0.0; 12])), "{r:?}");
    // NaN and infinities propagate as in a sum of products.
    let r = reference(
        &[x.clone(), y.clone()],
        &xy,
        &[
            f64s(&[2, 1, 2], vec![f64::NAN, 1.0, f64::INFINITY, 0.0]),
            f64s(&[2, 2, 1], vec![1.0, 2.0, 0.0, 1.0]),
        ],
    );
    let got = r.to_f64_array();
    assert!(got[[0, 0, 0]].is_nan() && got[[1, 0, 0]].is_nan(), "{r:?}");
    // np.tensordot(A, B, axes=([1, 0], [1, 2])) for A = arange(24).reshape(2,3,4)*0.5,
    // B = arange(24).reshape(4,3,2)-7.
    let p = t(DType::F64, &[Some(2), Some(3), Some(4)]);
    let q = t(DType::F64, &[None, None, None]);
    let td = tensordot_axes(&p, &q, &[1, 0], &[1, 2]).unwrap();
    assert_eq!(td.ndim(), 2);
    let r = reference(
        &[p.clone(), q.clone()],
        &td,
        &[
            f64s(&[2, 3, 4], (0..24).map(|i| i as f64 * 0.5).collect()),
            f64s(&[4, 3, 2], (0..24).map(|i| i as f64 - 7.0).collect()),
        ],
    );
    let want = [
        -110.0, 70.0, 250.0, 430.0, -123.5, 74.5, 272.5, 470.5, -137.0, 79.0, 295.0, 511.0, -150.5,
        83.5, 317.5, 551.5,
    ];
    assert!(r.same_as(&f64s(&[4, 4], want.to_vec())), "{r:?}");
}

/// Checks the JIT (mode `none` and FAST_RUN) against the reference for
/// `a @ b` with the given values: floats within a few rounding errors of
/// the sum, integers exactly.
fn check_matmul(a: &Tensor, b: &Tensor, av: &Value, bv: &Value, what: &str) {
    let out = matmul(a, b).unwrap();
    let ins = [a.clone(), b.clone()];
    let vals = [av.clone(), bv.clone()];
    let want = reference(&ins, &out, &vals);
    for mode in [Mode::none(), Mode::fast_run()] {
        let got =
            compiled(&ins, &out, &vals, mode.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(got.shape(), want.shape(), "{what}");
        let rtol = if out.dtype() == DType::F32 {
            1e-4
        } else {
            1e-12
        };
        if out.dtype().is_float() {
            assert_close(&got, &want, rtol, &format!("{what} {}", mode_name(&mode)));
        } else {
            assert!(
                got.same_as(&want),
                "{what} {}: {got:?} != {want:?}",
                mode_name(&mode)
            );
        }
    }
}

fn floats(dtype: DType, shape: &[usize], seed: u64) -> Value {
    let v = Value::F64(rand_f64(shape, seed, -2.0, 2.0));
    v.cast(dtype)
}

#[test]
fn jit_matches_the_reference_on_every_path() {
    let sym = |dtype: DType, nd: usize| tensor("x", dtype, &vec![None; nd]);
    for dtype in [DType::F64, DType::F32] {
        // (a shape, b shape): per-batch GEMMs, a shared b (one GEMM), a
        // broadcast a, rank mismatch, empty batch, k = 0, many small
        // batches (threaded), few large ones (threaded inside the GEMM).
        let cases: [(&[usize], &[usize]); 9] = [
            (&[3, 4, 5], &[3, 5, 2]),
            (&[6, 7, 5], &[5, 3]),
            (&[2, 3, 4, 5], &[5, 3]),
            (&[4, 5], &[3, 5, 2]),
            (&[2, 1, 3, 4], &[5, 4, 2]),
            (&[0, 3, 4], &[0, 4, 2]),
            (&[3, 2, 0], &[3, 0, 4]),
            (&[96, 24, 24], &[96, 24, 24]),
            (&[2, 200, 180], &[2, 180, 190]),
        ];
        for (k, (sa, sb)) in cases.iter().enumerate() {
            let a = if sa.len() == 4 && sa[1] == 1 {
                tensor("a", dtype, &[None, Some(1), None, None])
            } else {
                sym(dtype, sa.len())
            };
            let b = sym(dtype, sb.len());
            let (av, bv) = (
                floats(dtype, sa, k as u64),
                floats(dtype, sb, 50 + k as u64),
            );
            check_matmul(&a, &b, &av, &bv, &format!("{dtype} {sa:?} @ {sb:?}"));
        }
    }
    // Mixed dtypes are cast; integers wrap as in the reference.
    let a = sym(DType::I32, 3);
    let b = sym(DType::U8, 3);
    check_matmul(
        &a,
        &b,
        &rand_value(DType::I32, &[3, 4, 5], 1),
        &rand_value(DType::U8, &[3, 5, 2], 2),
        "i32 @ u8",
    );
    let c = sym(DType::F32, 2);
    check_matmul(
        &a,
        &c,
        &rand_value(DType::I32, &[3, 4, 5], 3),
        &floats(DType::F32, &[5, 2], 4),
        "i32 @ f32",
    );
}

#[test]
fn batches_split_over_threads_match_one_thread_bit_for_bit() {
    // Whole batches per thread (many small products, odd counts, one
    // batch, broadcast batches, large products sharing out evenly) and
    // each large GEMM threaded on its own (3 large batches): the
    // reference within rounding, and the same bits as with one thread.
    let cases: [(&[usize], &[usize]); 7] = [
        (&[64, 40, 40], &[64, 40, 40]),
        (&[37, 40, 30], &[37, 30, 35]),
        (&[1, 170, 160], &[1, 160, 170]),
        (&[3, 1, 40, 30], &[5, 30, 60]),
        (&[1, 40, 50], &[21, 50, 40]),
        (&[4, 130, 180], &[4, 180, 190]),
        (&[3, 130, 180], &[3, 180, 190]),
    ];
    for dtype in [DType::F64, DType::F32] {
        for (k, (sa, sb)) in cases.iter().enumerate() {
            let bc = |s: &[usize]| s.iter().map(|&d| (d == 1).then_some(1)).collect::<Vec<_>>();
            let a = tensor(
                "a",
                dtype,
                &bc(&sa[..sa.len() - 2])
                    .into_iter()
                    .chain([None, None])
                    .collect::<Vec<_>>(),
            );
            let b = tensor(
                "b",
                dtype,
                &bc(&sb[..sb.len() - 2])
                    .into_iter()
                    .chain([None, None])
                    .collect::<Vec<_>>(),
            );
            let vals = [
                floats(dtype, sa, 100 + k as u64),
                floats(dtype, sb, 200 + k as u64),
            ];
            let what = format!("{dtype} {sa:?} @ {sb:?}");
            check_matmul(&a, &b, &vals[0], &vals[1], &what);
            let out = matmul(&a, &b).unwrap();
            let ins = [a.clone(), b.clone()];
            let mut runs = Vec::new();
            for threads in [1, 2, 3] {
                kiln::linker::set_num_threads(threads);
                runs.push(compiled(&ins, &out, &vals, Mode::fast_run()).unwrap());
            }
            kiln::linker::set_num_threads(0);
            for (got, threads) in runs[1..].iter().zip([2, 3]) {
                assert!(
                    got.same_as(&runs[0]),
                    "{what}: {threads} threads differ from one"
                );
            }
        }
    }
}

#[test]
fn jit_reads_strided_transposed_and_reversed_inputs() {
    let a = tensor("a", DType::F64, &[None, None, None]);
    let b = tensor("b", DType::F64, &[None, None, None]);
    let base = rand_f64(&[4, 6, 10], 7, -2.0, 2.0);
    let other = rand_f64(&[4, 6, 5], 8, -2.0, 2.0);
    // Every other batch and column, reversed rows; b transposed in its last two axes.
    let strided = base.slice(ndarray::s![..;2, ..;-1, ..;2]).into_dyn();
    let bt = other.clone().permuted_axes(IxDyn(&[0, 2, 1]));
    let out = matmul(&a, &b).unwrap();
    let bslice = bt.slice(ndarray::s![..;2, .., ..]).into_dyn();
    let f = function(&[a.clone(), b.clone()], std::slice::from_ref(&out))
        .compile()
        .unwrap();
    // b's batches: every other one of the transposed view, to match a's 2.
    let want2 = {
        let fg = FunctionGraph::new(&[a.clone(), b.clone()], std::slice::from_ref(&out)).unwrap();
        evaluate(
            &fg,
            &[
                Value::F64(strided.to_owned()),
                Value::F64(bslice.to_owned()),
            ],
        )
        .unwrap()
        .remove(0)
    };
    let got = f
        .call(&[Arg::from(strided.view()), Arg::from(bslice.view())])
        .unwrap()
        .remove(0);
    assert_close(&got, &want2, 1e-12, "strided, reversed and transposed");
    assert_eq!(got.shape(), &[2, 6, 6]);
    // A broadcast b whose rows are not one matrix with a's (a transposed):
    // one GEMM per batch.
    let m = tensor("m", DType::F64, &[None, None]);
    let out = matmul(&a, &m).unwrap();
    let at = rand_f64(&[5, 3, 4], 9, -2.0, 2.0).permuted_axes(IxDyn(&[2, 1, 0]));
    let mv = rand_f64(&[5, 2], 10, -2.0, 2.0);
    let fg = FunctionGraph::new(&[a.clone(), m.clone()], std::slice::from_ref(&out)).unwrap();
    let want = evaluate(&fg, &[Value::F64(at.to_owned()), Value::F64(mv.clone())])
        .unwrap()
        .remove(0);
    let f = function(&[a.clone(), m.clone()], std::slice::from_ref(&out))
        .compile()
        .unwrap();
    let got = f
        .call(&[Arg::from(at.view()), Arg::from(mv.view())])
        .unwrap()
        .remove(0);
    assert_close(&got, &want, 1e-12, "transposed a, shared b");
}

#[test]
fn run_time_shape_errors_are_clear() {
    let a = tensor("a", DType::F64, &[None, None, None]);
    let b = tensor("b", DType::F64, &[None, None, None]);
    let out = matmul(&a, &b).unwrap();
    let ins = [a.clone(), b.clone()];
    for (sa, sb, msg) in [
        (
            [3usize, 2, 4],
            [3usize, 5, 2],
            "are not aligned: 4 (dim 2) != 5 (dim 1)",
        ),
        ([3, 2, 4], [2, 4, 2], "batch dimensions differ"),
        // A run-time size 1 is not broadcast (kiln's static broadcasting rule).
        ([3, 2, 4], [1, 4, 2], "batch dimensions differ"),
    ] {
        let vals = [
            f64s(&sa, vec![0.0; 24]),
            f64s(&sb, vec![1.0; sb.iter().product()]),
        ];
        let fg = FunctionGraph::new(&ins, std::slice::from_ref(&out)).unwrap();
        let e = evaluate(&fg, &vals).unwrap_err().to_string();
        assert!(e.contains(msg), "reference {sa:?} {sb:?}: {e}");
        let e = compiled(&ins, &out, &vals, Mode::fast_run())
            .unwrap_err()
            .to_string();
        assert!(e.contains(msg), "JIT {sa:?} {sb:?}: {e}");
    }
}

#[test]
fn expression_language() {
    let mut vars = HashMap::new();
    vars.insert(
        "A".to_string(),
        tensor("A", DType::F64, &[None, None, None]),
    );
    vars.insert(
        "B".to_string(),
        tensor("B", DType::F64, &[None, None, None]),
    );
    vars.insert("M".to_string(), matrix("M", DType::F64));
    vars.insert("N".to_string(), matrix("N", DType::F64));
    let show = |src: &str| {
        let t = build_expression(src, &vars).unwrap();
        let ins: Vec<Tensor> = ["A", "B", "M", "N"]
            .iter()
            .map(|n| vars[*n].clone())
            .collect();
        let fg = FunctionGraph::new(&ins, std::slice::from_ref(&t)).unwrap();
        (kiln::graph::print::pprint_outputs(&fg), t)
    };
    let (p, t) = show("A @ B");
    assert_eq!(p, "(A @ B)");
    assert_eq!(t.owner_op(), Some(&Op::BatchedDot));
    let (_, t) = show("matmul(A, M)");
    assert_eq!(t.owner_op(), Some(&Op::BatchedDot));
    // 2-d @ is still dot.
    let (p, t) = show("M @ N");
    assert_eq!((p.as_str(), t.owner_op()), ("(M @ N)", Some(&Op::Dot)));
    let (_, t) = show("tensordot(A, B)");
    assert_eq!(t.ndim(), 2);
    let (_, t) = show("tensordot(A, B, axes=1)");
    assert_eq!(t.ndim(), 4);
    let (_, t) = show("tensordot(A, M, axes=([2, 1], [0, 1]))");
    assert_eq!(t.ndim(), 1);
    let (_, t) = show("tensordot(M, N, axes=([], []))");
    assert_eq!(t.ndim(), 4);
    for (src, msg) in [
        (
            "tensordot(A, B, axis=1)",
            "unexpected keyword argument 'axis'",
        ),
        (
            "tensordot(A, B, axes=-1)",
            "axes= must be a non-negative integer",
        ),
        (
            "tensordot(A, B, axes=([0], 1))",
            "axes= must be a non-negative integer",
        ),
        ("tensordot(A, B, axes=([0], [0]), axes=1)", "'axes' twice"),
        (
            "tensordot(A, B, axes=([0, 1], [0]))",
            "axis lists differ in length",
        ),
        ("matmul(A)", "matmul() takes 2 arguments"),
        ("A @ 2", "operands must have at least 1 dimension"),
    ] {
        let e = build_expression(src, &vars).unwrap_err().to_string();
        assert!(e.contains(msg), "{src}: {e}");
    }
    // Values through the language match the Rust API.
    let a = rand_f64(&[2, 3, 4], 1, -1.0, 1.0);
    let m = rand_f64(&[4, 3], 2, -1.0, 1.0);
    let t = build_expression("tensordot(A, M, axes=([2, 1], [0, 1]))", &vars).unwrap();
    let want = tensordot_axes(&vars["A"], &vars["M"], &[2, 1], &[0, 1]).unwrap();
    let ins = [vars["A"].clone(), vars["M"].clone()];
    let vals = [Value::F64(a), Value::F64(m)];
    let got = compiled(&ins, &t, &vals, Mode::fast_run()).unwrap();
    assert_close(&got, &reference(&ins, &want, &vals), 1e-12, "tensordot");
}

fn mode_name(m: &Mode) -> &'static str {
    if *m == Mode::none() {
        "none"
    } else {
        "FAST_RUN"
    }
}
