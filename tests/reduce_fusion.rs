//! Reduction input fusion: the `FusedReduce` op (types, printing, reference
//! values), its JIT kernel against the reference evaluator (every reduction,
//! dtypes, axes, broadcast and strided inputs, sizes around the vector and
//! block boundaries, NaN), the vectorised row reductions of `CAReduce`, and
//! the `local_careduce_fusion` rewrite under FAST_RUN (before/after,
//! numerical checks, idempotence).
mod jit_support;
use std::sync::Arc;

use jit_support::*;
use kiln::graph::print::{dprint, pprint_outputs};
use kiln::linker::Modes;
use kiln::linker::{compile, Arg, CompileOptions};
use kiln::ops::{CRef, Composite, ScalarConst};
use kiln::rewrites::rewrite_graph;
use kiln::rewriting::Mode;
use kiln::{matrix, tensor, vector, DType, FunctionGraph, Op, ReduceOp, ScalarOp, Tensor, Value};

const OPS: [ReduceOp; 6] = [
    ReduceOp::Sum,
    ReduceOp::Prod,
    ReduceOp::Max,
    ReduceOp::Min,
    ReduceOp::All,
    ReduceOp::Any,
];

/// `exp(i0 - i1) * 0.5` over two inputs of `dtype`.
fn exp_sub(dtype: DType) -> Composite {
    let mut c = Composite::new(vec![dtype, dtype]);
    let d = c
        .push(ScalarOp::Sub, &[CRef::Input(0), CRef::Input(1)])
        .unwrap();
    let e = c.push(ScalarOp::Exp, &[d]).unwrap();
    let half = CRef::Const(ScalarConst::new(dtype, 0.5));
    let m = c.push(ScalarOp::Mul, &[e, half]).unwrap();
    c.outputs = vec![m];
    c
}

/// `i0 * i1 + 1` (no transcendental function: a level-0 vector program).
fn mul_add(dtype: DType) -> Composite {
    let mut c = Composite::new(vec![dtype, dtype]);
    let m = c
        .push(ScalarOp::Mul, &[CRef::Input(0), CRef::Input(1)])
        .unwrap();
    let one = CRef::Const(ScalarConst::new(dtype, 1.0));
    let a = c.push(ScalarOp::Add, &[m, one]).unwrap();
    c.outputs = vec![a];
    c
}

fn fused(op: ReduceOp, axes: Option<Vec<usize>>, pre: Composite, inputs: &[&Tensor]) -> Tensor {
    Tensor::apply(
        Op::FusedReduce {
            op,
            axes,
            pre: Arc::new(pre),
            post: None,
        },
        inputs,
    )
    .unwrap()
}

/// Relative tolerance of a reassociated reduction of `n` values of `dtype`.
fn rtol(dtype: DType) -> f64 {
    if dtype == DType::F32 {
        1e-5
    } else {
        1e-12
    }
}

/// Compiles and compares with the reference: NaN positions and infinities
/// exactly, finite values within `rtol` (sums and products reassociate).
fn check_reduction(inputs: &[Tensor], outputs: &[Tensor], vals: &[Value], what: &str) {
    let fg = FunctionGraph::new(inputs, outputs).unwrap();
    let want = kiln::eval::evaluate(&fg, vals).unwrap();
    let f = compile(&fg, &CompileOptions::default()).unwrap();
    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
    let got = f.call(&args).unwrap();
    assert!(
        f.profile.fallbacks().is_empty(),
        "{what}: everything JIT-compiled"
    );
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.dtype(), w.dtype(), "{what}: dtype");
        assert_eq!(g.shape(), w.shape(), "{what}: shape");
        if !g.dtype().is_float() {
            assert!(g.same_as(w), "{what}: got {g:?}, want {w:?}");
            continue;
        }
        let tol = rtol(g.dtype());
        for (i, (x, y)) in g
            .to_f64_array()
            .iter()
            .zip(w.to_f64_array().iter())
            .enumerate()
        {
            let ok = (x.is_nan() && y.is_nan())
                || x == y
                || (x.is_finite() && y.is_finite() && (x - y).abs() <= tol * y.abs().max(1e-300));
            assert!(ok, "{what}: element {i}: got {x:e}, want {y:e}");
        }
    }
}

#[test]
fn fused_reduce_types_names_and_errors() {
    let x = matrix("x", DType::F64);
    let m = tensor("m", DType::F64, &[None, Some(1)]);
    let y = fused(ReduceOp::Sum, Some(vec![1]), exp_sub(DType::F64), &[&x, &m]);
    assert_eq!(y.ty(), &kiln::TensorType::new(DType::F64, vec![None]));
    let op = Op::FusedReduce {
        op: ReduceOp::Max,
        axes: None,
        pre: Arc::new(exp_sub(DType::F64)),
        post: None,
    };
    assert_eq!(op.name(), "Max{axes=None}{mul(exp(sub(i0, i1)), 0.5)}");
    assert_eq!(op, op.clone(), "structural equality");
    // Bool result of All over f32 values; i64 accumulation of an integer sum.
    let xf = matrix("xf", DType::F32);
    let all = fused(ReduceOp::All, None, mul_add(DType::F32), &[&xf, &xf]);
    assert_eq!(all.ty(), &kiln::TensorType::scalar(DType::Bool));
    let xi = vector("xi", DType::I32);
    let si = fused(ReduceOp::Sum, None, mul_add(DType::I32), &[&xi, &xi]);
    assert_eq!(si.ty(), &kiln::TensorType::scalar(DType::I64));

    let err = |inputs: &[&Tensor], pre: Composite, axes: Option<Vec<usize>>| {
        Tensor::apply(
            Op::FusedReduce {
                op: ReduceOp::Sum,
                axes,
                pre: Arc::new(pre),
                post: None,
            },
            inputs,
        )
        .unwrap_err()
        .to_string()
    };
    let e = err(&[&x], exp_sub(DType::F64), Some(vec![1]));
    assert!(e.contains("expects 2 inputs, got 1"), "{e}");
    assert!(
        e.contains("Sum{axes=[1]}{"),
        "the message names the op: {e}"
    );
    let e = err(&[&x, &xf], exp_sub(DType::F64), Some(vec![1]));
    assert!(e.contains("input 1 has dtype f32"), "{e}");
    let e = err(&[&x, &m], exp_sub(DType::F64), Some(vec![2]));
    assert!(e.contains("invalid axes [2]"), "{e}");
    let mut two = exp_sub(DType::F64);
    two.outputs.push(CRef::Input(0));
    let e = err(&[&x, &m], two, None);
    assert!(e.contains("exactly one output"), "{e}");
    let v = vector("v", DType::F64);
    let e = err(&[&x, &v], exp_sub(DType::F64), None);
    assert!(e.contains("different numbers of dimensions"), "{e}");
}

#[test]
fn fused_reduce_reference_is_the_careduce_of_the_composite() {
    let x = matrix("x", DType::F64);
    let m = tensor("m", DType::F64, &[None, Some(1)]);
    let vx = Value::from(rand_f64(&[3, 5], 1, -2.0, 2.0));
    let vm = Value::from(rand_f64(&[3, 1], 2, -1.0, 1.0));
    for op in OPS {
        for axes in [None, Some(vec![0]), Some(vec![1])] {
            let y = fused(op, axes.clone(), exp_sub(DType::F64), &[&x, &m]);
            let c = Tensor::apply(Op::composite(exp_sub(DType::F64)), &[&x, &m]).unwrap();
            let r = Tensor::apply(
                Op::CAReduce {
                    op,
                    axes: axes.clone(),
                },
                &[&c],
            )
            .unwrap();
            let fg = FunctionGraph::new(&[x.clone(), m.clone()], &[y, r]).unwrap();
            let out = kiln::eval::evaluate(&fg, &[vx.clone(), vm.clone()]).unwrap();
            assert!(out[0].same_as(&out[1]), "{op:?} {axes:?}");
        }
    }
    // A run-time broadcast mismatch is an error naming the op.
    let y = fused(ReduceOp::Sum, None, exp_sub(DType::F64), &[&x, &x]);
    let fg = FunctionGraph::new(std::slice::from_ref(&x), &[y]).unwrap();
    let bad = kiln::eval::evaluate(&fg, &[Value::from(rand_f64(&[2, 2], 3, 0.0, 1.0))]);
    assert!(bad.is_ok(), "same input twice always agrees");
    // Max of an empty axis has no identity, in the JIT as in the reference.
    let y = fused(ReduceOp::Max, Some(vec![1]), exp_sub(DType::F64), &[&x, &m]);
    let fg = FunctionGraph::new(&[x.clone(), m.clone()], &[y]).unwrap();
    let vals = [
        Value::from(rand_f64(&[3, 0], 4, 0.0, 1.0)),
        Value::from(rand_f64(&[3, 1], 5, 0.0, 1.0)),
    ];
    let e = kiln::eval::evaluate(&fg, &vals).unwrap_err().to_string();
    assert!(e.contains("zero-size reduction along axis 1"), "{e}");
    let f = compile(&fg, &CompileOptions::default()).unwrap();
    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
    let e = f.call(&args).unwrap_err().to_string();
    assert!(e.contains("zero-size reduction along axis 1"), "{e}");
}

#[test]
fn fused_reduce_jit_every_op_dtype_and_axes() {
    for dtype in [DType::F64, DType::F32] {
        for pre in [exp_sub(dtype), mul_add(dtype)] {
            for op in OPS {
                for (rows, cols) in [
                    (1, 1),
                    (3, 1),
                    (2, 3),
                    (5, 255),
                    (4, 256),
                    (3, 257),
                    (2, 1003),
                ] {
                    let x = tensor("x", dtype, &[None, None]);
                    let m = tensor("m", dtype, &[None, Some(1)]);
                    let vx = rand_value(dtype, &[rows, cols], (rows * 1000 + cols) as u64);
                    let vm = rand_value(dtype, &[rows, 1], 7 + rows as u64);
                    for axes in [None, Some(vec![0]), Some(vec![1]), Some(vec![0, 1])] {
                        let y = fused(op, axes.clone(), pre.clone(), &[&x, &m]);
                        check_reduction(
                            &[x.clone(), m.clone()],
                            &[y],
                            &[vx.clone(), vm.clone()],
                            &format!("{op:?} {dtype} {pre} {rows}x{cols} axes {axes:?}"),
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn fused_reduce_jit_strided_integer_and_empty_inputs() {
    // A transposed (strided) input takes the scalar path, a contiguous one the vector path.
    let x = matrix("x", DType::F64);
    let y = matrix("y", DType::F64);
    let vx = Value::from(rand_f64(&[300, 41], 21, -3.0, 3.0));
    let vy_t = rand_f64(&[41, 300], 22, -3.0, 3.0);
    let vy = Value::from(vy_t.t().to_owned());
    for op in [ReduceOp::Sum, ReduceOp::Max] {
        for axes in [Some(vec![0]), Some(vec![1]), None] {
            let r = fused(op, axes.clone(), exp_sub(DType::F64), &[&x, &y]);
            check_reduction(
                &[x.clone(), y.clone()],
                &[r],
                &[vx.clone(), vy.clone()],
                &format!("{op:?} contiguous {axes:?}"),
            );
        }
    }
    let fg = FunctionGraph::new(
        &[x.clone(), y.clone()],
        &[fused(
            ReduceOp::Sum,
            Some(vec![1]),
            mul_add(DType::F64),
            &[&x, &y],
        )],
    )
    .unwrap();
    let want = kiln::eval::evaluate(&fg, &[vx.clone(), vy.clone()]).unwrap();
    let f = compile(&fg, &CompileOptions::default()).unwrap();
    let strided = Value::from(rand_f64(&[41, 300], 23, -3.0, 3.0));
    let Value::F64(s) = &strided else {
        unreachable!()
    };
    let view = s.t();
    let got = f
        .call(&[Arg::from(&vx), Arg::F64(view.view().into_dyn())])
        .unwrap();
    let want_strided =
        kiln::eval::evaluate(&fg, &[vx.clone(), Value::from(view.to_owned())]).unwrap();
    assert_close(&got[0], &want_strided[0], 1e-12, "strided input");
    assert!(!want[0].same_as(&want_strided[0]));
    // Integer and bool pre-maps: the scalar path, exact.
    for dtype in [DType::I64, DType::I32, DType::Bool] {
        let a = tensor("a", dtype, &[None, None]);
        let b = tensor("b", dtype, &[None, None]);
        let pre = if dtype == DType::Bool {
            let mut c = Composite::new(vec![dtype, dtype]);
            let o = c
                .push(ScalarOp::Xor, &[CRef::Input(0), CRef::Input(1)])
                .unwrap();
            c.outputs = vec![o];
            c
        } else {
            mul_add(dtype)
        };
        for op in OPS {
            for axes in [None, Some(vec![1])] {
                let r = fused(op, axes.clone(), pre.clone(), &[&a, &b]);
                check_reduction(
                    &[a.clone(), b.clone()],
                    &[r],
                    &[
                        rand_value(dtype, &[4, 37], 31),
                        rand_value(dtype, &[4, 37], 32),
                    ],
                    &format!("{op:?} {dtype} {axes:?}"),
                );
            }
        }
    }
    // Empty inputs: the identity (sum 0, prod 1).
    for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Any, ReduceOp::All] {
        let r = fused(op, Some(vec![1]), mul_add(DType::F64), &[&x, &y]);
        check_reduction(
            &[x.clone(), y.clone()],
            &[r],
            &[
                Value::from(rand_f64(&[3, 0], 1, 0.0, 1.0)),
                Value::from(rand_f64(&[3, 0], 2, 0.0, 1.0)),
            ],
            &format!("{op:?} empty"),
        );
    }
}

#[test]
fn fused_full_reductions_are_chunked_over_threads() {
    // Above the parallel threshold: per-chunk partials combined in order.
    let x = vector("x", DType::F64);
    let t = vector("t", DType::F64);
    let n = 1_000_003;
    let vx = Value::from(rand_f64(&[n], 41, -4.0, 4.0));
    let vt = Value::from(rand_f64(&[n], 42, 0.0, 1.0));
    for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Any] {
        let r = fused(op, None, exp_sub(DType::F64), &[&x, &t]);
        check_reduction(
            &[x.clone(), t.clone()],
            &[r],
            &[vx.clone(), vt.clone()],
            &format!("{op:?} full"),
        );
    }
    let m = matrix("m", DType::F32);
    let vm = rand_value(DType::F32, &[700, 301], 43);
    let r = fused(ReduceOp::Max, None, mul_add(DType::F32), &[&m, &m]);
    check_reduction(
        std::slice::from_ref(&m),
        &[r],
        std::slice::from_ref(&vm),
        "f32 2-d full max (NaN)",
    );
    let r = fused(ReduceOp::Sum, Some(vec![0]), mul_add(DType::F32), &[&m, &m]);
    check_reduction(
        std::slice::from_ref(&m),
        &[r],
        &[vm],
        "f32 column sum, split over columns",
    );
}

#[test]
fn vectorised_row_reductions_match_the_reference() {
    for dtype in [DType::F64, DType::F32] {
        let x = tensor("x", dtype, &[None, None]);
        for cols in [1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 33, 1000] {
            // NaN at the start, the middle, the end, or nowhere.
            let mut a = rand_f64(&[5, cols], cols as u64, -1e3, 1e3);
            a[[1, 0]] = f64::NAN;
            a[[2, cols / 2]] = f64::NAN;
            a[[3, cols - 1]] = f64::NAN;
            a[[4, 0]] = f64::INFINITY;
            let v = Value::from_f64_array(dtype, a);
            for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min] {
                let r = Tensor::apply(
                    Op::CAReduce {
                        op,
                        axes: Some(vec![1]),
                    },
                    &[&x],
                )
                .unwrap();
                check_reduction(
                    std::slice::from_ref(&x),
                    &[r],
                    std::slice::from_ref(&v),
                    &format!("{op:?} {dtype} cols {cols}"),
                );
            }
        }
    }
}

/// `exp(i0 - shift)`: `shift` is input 1 (`None`) or an inlined constant;
/// `plain` gives `exp(i0)` (one input).
fn exp_shift(shift: Option<f64>, plain: bool) -> Composite {
    if plain {
        let mut c = Composite::new(vec![DType::F64]);
        let e = c.push(ScalarOp::Exp, &[CRef::Input(0)]).unwrap();
        c.outputs = vec![e];
        return c;
    }
    let mut c = Composite::new(vec![DType::F64, DType::F64]);
    let b = match shift {
        Some(v) => CRef::Const(ScalarConst::new(DType::F64, v)),
        None => CRef::Input(1),
    };
    let d = c.push(ScalarOp::Sub, &[CRef::Input(0), b]).unwrap();
    let e = c.push(ScalarOp::Exp, &[d]).unwrap();
    c.outputs = vec![e];
    c
}

#[test]
fn sum_of_exp_shift_rows_are_one_runtime_pass() {
    // Row sums of exp(x - m), exp(x - 0.25) and exp(x): contiguous rows
    // take the runtime's map-reduce pass (bitwise equal to calling it on
    // the row), other axes the blocked path; all match the reference.
    for cols in [1, 2, 31, 32, 33, 257, 1000] {
        let mut a = rand_f64(&[6, cols], 40 + cols as u64, -20.0, 20.0);
        a[[1, cols / 2]] = f64::NAN;
        a[[2, 0]] = f64::INFINITY;
        a[[3, cols - 1]] = f64::NEG_INFINITY;
        let vx = Value::from_f64_array(DType::F64, a.clone());
        let mut mv = rand_f64(&[6, 1], 3, -2.0, 2.0);
        mv[[4, 0]] = f64::NAN;
        mv[[5, 0]] = f64::NEG_INFINITY;
        let vm = Value::from_f64_array(DType::F64, mv.clone());
        for (shift, plain) in [(None, false), (Some(0.25), false), (None, true)] {
            let pre = exp_shift(shift, plain);
            let x = tensor("x", DType::F64, &[None, None]);
            let m = tensor("m", DType::F64, &[None, Some(1)]);
            let (ins, vals): (Vec<Tensor>, Vec<Value>) = if plain {
                (vec![x.clone()], vec![vx.clone()])
            } else {
                (vec![x.clone(), m.clone()], vec![vx.clone(), vm.clone()])
            };
            let refs: Vec<&Tensor> = ins.iter().collect();
            for axes in [Some(vec![1]), Some(vec![0]), None] {
                let y = fused(ReduceOp::Sum, axes.clone(), pre.clone(), &refs);
                check_reduction(
                    &ins,
                    std::slice::from_ref(&y),
                    &vals,
                    &format!("{pre} {cols} cols axes {axes:?}"),
                );
            }
            if cols < 16 {
                // Rows of one element are no row pass: the driver drops the
                // size-1 dimension and the kernel's scalar path computes the
                // reference's own exp. Rows shorter than 16 elements run as
                // column reductions over blocks of rows (the driver's
                // `ShortReduce`), each row's terms from the kernel's exp.
                // Both are checked against the reference above.
                continue;
            }
            let y = fused(ReduceOp::Sum, Some(vec![1]), pre.clone(), &refs);
            let fg = FunctionGraph::new(&ins, &[y]).unwrap();
            let f = compile(&fg, &CompileOptions::default()).unwrap();
            let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
            let got = f.call(&args).unwrap()[0].to_f64_array();
            for r in 0..6 {
                let c = match (shift, plain) {
                    (_, true) => 0.0,
                    (Some(v), _) => v,
                    (None, _) => mv[[r, 0]],
                };
                let row: Vec<f64> = a.index_axis(ndarray::Axis(0), r).iter().copied().collect();
                let want = kiln_runtime::math::sum_exp_shift_f64(&row, c, None);
                assert_eq!(
                    got[[r]].to_bits(),
                    want.to_bits(),
                    "{pre} row {r}: {} vs {want}",
                    got[[r]]
                );
            }
        }
    }
}

fn fast_run(inputs: &[Tensor], outputs: &[Tensor]) -> FunctionGraph {
    let mut fg = FunctionGraph::new(inputs, outputs).unwrap();
    rewrite_graph(&mut fg, &Mode::fast_run()).unwrap();
    fg
}

fn expr(src: &str, vars: &[(&str, &Tensor)]) -> Tensor {
    let map = vars
        .iter()
        .map(|(n, t)| (n.to_string(), (*t).clone()))
        .collect();
    kiln::build_expression(src, &map).unwrap()
}

/// FAST_RUN's graph computes what the reference computes on the original
/// graph, and a second FAST_RUN pass changes nothing.
fn check_rewritten(inputs: &[Tensor], outputs: &[Tensor], vals: &[Value], rtol: f64) {
    let original = FunctionGraph::new(inputs, outputs).unwrap();
    let want = kiln::eval::evaluate(&original, vals).unwrap();
    let mut fg = fast_run(inputs, outputs);
    let text = pprint_outputs(&fg);
    rewrite_graph(&mut fg, &Mode::fast_run()).unwrap();
    assert_eq!(
        pprint_outputs(&fg),
        text,
        "a second FAST_RUN pass changes nothing"
    );
    let f = kiln::function(inputs, outputs)
        .mode(Mode::fast_run())
        .compile()
        .unwrap();
    let got = f.call_values(vals).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_close(g, w, rtol, &text);
    }
}

/// Over one axis (or all), `log(sum(exp(X)))` is one `LogSumExp` node (a
/// native pass per lane, no kernel); over two axes of three it is the
/// max-shifted graph, fused into a max and one fused reduction.
#[test]
fn logsumexp_becomes_a_max_and_one_fused_pass() {
    let x = matrix("X", DType::F64);
    let y = expr("log(sum(exp(X), axis=1))", &[("X", &x)]);
    let fg = fast_run(std::slice::from_ref(&x), std::slice::from_ref(&y));
    assert_eq!(pprint_outputs(&fg), "logsumexp(X, axis=1)");
    let x = tensor("X", DType::F64, &[None, None, None]);
    let y = expr("log(sum(exp(X), axis=(1, 2)))", &[("X", &x)]);
    let before = FunctionGraph::new(std::slice::from_ref(&x), std::slice::from_ref(&y)).unwrap();
    assert_eq!(pprint_outputs(&before), "log(sum(exp(X), axis=(1, 2)))");
    let mut unfused = before.clone();
    rewrite_graph(&mut unfused, &Mode::fast_run().excluding(&["fusion"])).unwrap();
    let fg = fast_run(std::slice::from_ref(&x), std::slice::from_ref(&y));
    let text = pprint_outputs(&fg);
    let m = "where((abs(max(X, axis=(1, 2))) == inf), 0.0, max(X, axis=(1, 2)))";
    assert_eq!(
        text,
        format!("(log(sum(exp((X - {m}[:, None, None])), axis=(1, 2))) + {m})")
    );
    assert_eq!(
        fused_counts(&fg),
        (2, 1),
        "{}",
        kiln::graph::print::dprint(&fg)
    );
    assert!(
        dprint(&fg).contains("Sum{axes=[1, 2]}{exp(sub(i0, i1))} [id"),
        "{}",
        dprint(&fg)
    );
    // One pass over X for the max, one for the stabilised sum.
    let reads_x = fg
        .node_ids()
        .filter(|&n| fg.node(n).inputs.contains(&fg.inputs()[0]))
        .count();
    assert_eq!(reads_x, 2, "{text}");
    let mut vx = rand_f64(&[40, 7, 100], 51, -30.0, 30.0);
    vx[[3, 3, 3]] = 800.0; // exp overflows unless stabilised
    vx[[5, 0, 0]] = f64::NAN;
    let vx = Value::from(vx);
    // The unstabilised original overflows in row 3: compare with the unfused FAST_RUN graph.
    let want = kiln::eval::evaluate(&unfused, std::slice::from_ref(&vx)).unwrap();
    let f = kiln::function(std::slice::from_ref(&x), std::slice::from_ref(&y))
        .mode(Mode::fast_run())
        .compile()
        .unwrap();
    let got = f.call_values(std::slice::from_ref(&vx)).unwrap();
    check_nan_aware(&got[0], &want[0], 1e-12);
    let Value::F64(g) = &got[0] else {
        unreachable!()
    };
    assert!((g[3] - 800.0).abs() < 1e-9 && g[5].is_nan());
    check_rewritten(
        std::slice::from_ref(&x),
        std::slice::from_ref(&y),
        &[Value::from(rand_f64(&[33, 9, 57], 52, -5.0, 5.0))],
        1e-12,
    );
}

fn check_nan_aware(got: &Value, want: &Value, rtol: f64) {
    for (x, y) in got.to_f64_array().iter().zip(want.to_f64_array().iter()) {
        assert!(
            (x.is_nan() && y.is_nan()) || (x - y).abs() <= rtol * y.abs(),
            "{x} vs {y}"
        );
    }
}

/// The suite's cross-entropy is one fused reduction of one
/// `sigmoid_binary_crossentropy` per element (stabilize's
/// `local_sigmoid_binary_crossentropy`), whose post-map is the mean's
/// division (`local_reduce_post_fusion`).
#[test]
fn sigmoid_xent_becomes_a_single_fused_reduction() {
    let t = vector("t", DType::F64);
    let z = vector("z", DType::F64);
    let y = expr(
        "mean(-(t*log(sigmoid(z)) + (1-t)*log(1 - sigmoid(z))))",
        &[("t", &t), ("z", &z)],
    );
    let fg = fast_run(&[t.clone(), z.clone()], std::slice::from_ref(&y));
    assert_eq!(
        pprint_outputs(&fg),
        "(sum(sigmoid_binary_crossentropy(z, t)) / cast(Shape_i{0}(t, z), \"f64\"))"
    );
    assert_eq!(
        fused_counts(&fg),
        (0, 1),
        "{}",
        kiln::graph::print::dprint(&fg)
    );
    assert_eq!(fg.n_nodes(), 2, "the FusedReduce and the size");
    let vt = Value::from(rand_f64(&[5003], 61, 0.0, 1.0).mapv(|v| (v > 0.5) as i64 as f64));
    let vz = Value::from(rand_f64(&[5003], 62, -8.0, 8.0));
    check_rewritten(&[t, z], &[y], &[vt, vz], 1e-12);
}

/// A fused reduction's only consumer, element-wise over the reduced value
/// and one-element extras, becomes its post-map: means over every axis
/// set, dtypes whose sum is cast (f32) or integer (a float mean of an
/// integer sum), a max scaled by a constant, empty inputs (0 / 0 and an
/// empty reduced array); the graph is two nodes (the reduction and the
/// size) and computes what the reference computes on the original graph.
#[test]
fn elementwise_consumers_of_a_fused_reduction_become_its_post_map() {
    let x = matrix("X", DType::F64);
    let xf = matrix("Xf", DType::F32);
    let xi = matrix("Xi", DType::I64);
    let cases: [(&str, &Tensor, &str, &str); 6] = [
        (
            "mean(exp(X))",
            &x,
            "X",
            "(sum(exp(X)) / cast((Shape_i{0}(X) * Shape_i{1}(X)), \"f64\"))",
        ),
        (
            "mean(exp(X), axis=1)",
            &x,
            "X",
            "(sum(exp(X), axis=1) / cast(Shape_i{1}(X)[None], \"f64\"))",
        ),
        (
            "mean(exp(X), axis=0)",
            &x,
            "X",
            "(sum(exp(X), axis=0) / cast(Shape_i{0}(X)[None], \"f64\"))",
        ),
        (
            "mean(sqrt(Xf), axis=1)",
            &xf,
            "Xf",
            "(sum(sqrt(Xf), axis=1) / cast(Shape_i{1}(Xf)[None], \"f32\"))",
        ),
        (
            "mean(Xi * 3, axis=0)",
            &xi,
            "Xi",
            "(sum((3 * Xi), axis=0) / cast(Shape_i{0}(Xi)[None], \"f64\"))",
        ),
        (
            "max(exp(X)) * 2.5 - 1",
            &x,
            "X",
            "((2.5 * max(exp(X))) - 1.0)",
        ),
    ];
    for (src, input, name, after) in cases {
        let y = expr(src, &[(name, input)]);
        let fg = fast_run(std::slice::from_ref(input), std::slice::from_ref(&y));
        assert_eq!(pprint_outputs(&fg), after, "{src}");
        assert_eq!(fused_counts(&fg), (0, 1), "{src}: {}", dprint(&fg));
        let post = fg
            .node_ids()
            .any(|n| matches!(&fg.node(n).op, Op::FusedReduce { post: Some(_), .. }));
        assert!(post, "{src}: {}", dprint(&fg));
        let dtype = input.ty().dtype;
        for shape in [[37, 130], [1, 1], [0, 5], [4, 0]] {
            let v = rand_value(dtype, &shape, 81);
            if src.starts_with("max") && shape.contains(&0) {
                // max of nothing is an error, compiled as in the reference.
                let f = kiln::function(std::slice::from_ref(input), std::slice::from_ref(&y))
                    .mode(Mode::fast_run())
                    .compile()
                    .unwrap();
                assert!(f.call_values(std::slice::from_ref(&v)).is_err(), "{src}");
                continue;
            }
            let tol = if dtype == DType::F32 { 1e-6 } else { 1e-12 };
            check_rewritten(
                std::slice::from_ref(input),
                std::slice::from_ref(&y),
                std::slice::from_ref(&v),
                tol,
            );
        }
    }
}

/// The post-map is taken only where the reduction's value has no other
/// use and every other operand of its consumer is one element.
#[test]
fn reductions_with_other_uses_or_array_operands_keep_their_consumer() {
    let x = matrix("X", DType::F64);
    let v = vector("v", DType::F64);
    let s = x.exp().sum(&[1]).unwrap();
    // The reduced value is also returned.
    let y = &s * 2.0;
    let fg = fast_run(std::slice::from_ref(&x), &[y.clone(), s.clone()]);
    assert_eq!(fused_counts(&fg).1, 1, "{}", dprint(&fg));
    assert!(!dprint(&fg).contains("->"), "{}", dprint(&fg));
    assert_eq!(fg.n_nodes(), 2, "{}", dprint(&fg));
    // The consumer's other operand is an array.
    let y2 = &s + &v;
    let fg = fast_run(&[x.clone(), v.clone()], std::slice::from_ref(&y2));
    assert_eq!(fused_counts(&fg).1, 1, "{}", dprint(&fg));
    assert!(!dprint(&fg).contains("->"), "{}", dprint(&fg));
    assert_eq!(fg.n_nodes(), 2, "{}", dprint(&fg));
    let vals = [
        Value::from(rand_f64(&[6, 50], 91, -2.0, 2.0)),
        Value::from(rand_f64(&[6], 92, -2.0, 2.0)),
    ];
    check_rewritten(&[x.clone(), v.clone()], &[y2], &vals, 1e-12);
    check_rewritten(std::slice::from_ref(&x), &[y, s], &vals[..1], 1e-12);
}

/// The op itself: its name shows the post-map, its type is the post-map's
/// over the reduced value, and extras that are not one element of the
/// reduced value's rank are type errors.
#[test]
fn fused_reduce_post_map_types_and_errors() {
    let x = matrix("x", DType::F64);
    let n = tensor("n", DType::I64, &[Some(1)]);
    let mut post = Composite::new(vec![DType::F64, DType::I64]);
    let c = post
        .push(ScalarOp::Cast(DType::F64), &[CRef::Input(1)])
        .unwrap();
    let d = post.push(ScalarOp::TrueDiv, &[CRef::Input(0), c]).unwrap();
    post.outputs = vec![d];
    let op = Op::FusedReduce {
        op: ReduceOp::Sum,
        axes: Some(vec![0]),
        pre: Arc::new(exp_sub(DType::F64)),
        post: Some(Arc::new(post.clone())),
    };
    assert_eq!(
        op.name(),
        "Sum{axes=[0]}{mul(exp(sub(i0, i1)), 0.5)}->{true_div(i0, cast{f64}(i1))}"
    );
    let y = Tensor::apply(op.clone(), &[&x, &x, &n]).unwrap();
    assert_eq!(y.ty(), &kiln::TensorType::new(DType::F64, vec![None]));
    let vx = rand_f64(&[4, 3], 93, -1.0, 1.0);
    let vn = Value::from(ndarray::arr1(&[4i64]).into_dyn());
    check_reduction(
        &[x.clone(), n.clone()],
        &[y],
        &[Value::from(vx), vn],
        "sum then divide",
    );
    let err = |inputs: &[&Tensor]| Tensor::apply(op.clone(), inputs).unwrap_err().to_string();
    let m = vector("m", DType::I64);
    assert!(
        err(&[&x, &x, &m]).contains("one element"),
        "{}",
        err(&[&x, &x, &m])
    );
    assert!(err(&[&x, &x]).contains("post-map"), "{}", err(&[&x, &x]));
}

#[test]
fn producers_with_other_uses_are_not_fused() {
    let x = matrix("X", DType::F64);
    let e = x.exp();
    let s = e.sum(&[1]).unwrap();
    let fg = fast_run(std::slice::from_ref(&x), &[s.clone(), e.clone()]);
    assert_eq!(pprint_outputs(&fg), "sum(exp(X), axis=1)\nexp(X)");
    // Used by another node: kept, so exp is computed once.
    let y = &e.sum(&[0]).unwrap() + &e.max(&[0]).unwrap();
    let fg = fast_run(std::slice::from_ref(&x), std::slice::from_ref(&y));
    let text = pprint_outputs(&fg);
    assert!(
        text.contains("sum(exp(X), axis=0)") && text.contains("max(exp(X), axis=0)"),
        "{text}"
    );
    check_rewritten(
        std::slice::from_ref(&x),
        &[y],
        &[Value::from(rand_f64(&[17, 300], 71, -3.0, 3.0))],
        1e-12,
    );
    // A plain Elemwise producer (with a constant) and an f32 graph are fused.
    let xf = matrix("Xf", DType::F32);
    let y = expr(
        "max(Xf * 3, axis=0) + min(sqrt(Xf), axis=0)",
        &[("Xf", &xf)],
    );
    let fg = fast_run(std::slice::from_ref(&xf), std::slice::from_ref(&y));
    let text = pprint_outputs(&fg);
    assert!(text.contains("max((3.0 * Xf), axis=0)"), "{text}");
    assert!(text.contains("min(sqrt(Xf), axis=0)"), "{text}");
    assert_eq!(
        fused_counts(&fg).1,
        2,
        "{}",
        kiln::graph::print::dprint(&fg)
    );
    check_rewritten(
        std::slice::from_ref(&xf),
        &[y],
        &[rand_value(DType::F32, &[9, 130], 72)],
        1e-6,
    );
}

/// The accumulator modes of the reduction kernels `outputs` compile to
/// (no rewriting), in generation order, after checking the values of
/// every input set in `runs` against the reference.
fn kernel_modes(
    inputs: &[Tensor],
    outputs: &[Tensor],
    runs: &[Vec<Value>],
    what: &str,
) -> Vec<Modes> {
    for vals in runs {
        let shapes: Vec<_> = vals.iter().map(|v| v.shape().to_vec()).collect();
        check_reduction(inputs, outputs, vals, &format!("{what} {shapes:?}"));
    }
    let fg = FunctionGraph::new(inputs, outputs).unwrap();
    let f = compile(&fg, &CompileOptions::default()).unwrap();
    f.profile.reduce_kernels.iter().map(|(_, m)| *m).collect()
}

#[test]
fn reduction_kernels_have_only_the_modes_their_static_shapes_need() {
    let v = |shape: &[usize], seed| Value::from(rand_f64(shape, seed, -2.0, 2.0));
    // A full reduction is row-only, and its chunk partials need no kernel.
    let x = vector("x", DType::F64);
    let t = vector("t", DType::F64);
    let r = fused(ReduceOp::Sum, None, exp_sub(DType::F64), &[&x, &t]);
    let big = 300_007;
    let runs = [
        vec![v(&[big], 1), v(&[big], 2)],
        vec![v(&[1], 3), v(&[1], 4)],
    ];
    let ins = [x.clone(), t.clone()];
    assert_eq!(
        kernel_modes(&ins, &[r], &runs, "fused full sum"),
        [Modes::Row]
    );
    let r = x.max(&[0]).unwrap();
    let got = kernel_modes(
        std::slice::from_ref(&x),
        &[r],
        &[vec![v(&[big], 5)]],
        "full max",
    );
    assert_eq!(got, [Modes::Row]);

    // Unknown sizes: the reduced last axis may have size 1 at run time,
    // making the kept axis innermost (column mode).
    let m = matrix("m", DType::F64);
    let runs: Vec<Vec<Value>> = [[3, 5], [3, 1], [1, 5], [1, 1], [4, 0]]
        .iter()
        .enumerate()
        .map(|(k, s)| vec![v(s, 10 + k as u64)])
        .collect();
    let r = m.sum(&[1]).unwrap();
    let ms = std::slice::from_ref(&m);
    assert_eq!(kernel_modes(ms, &[r], &runs, "row sum"), [Modes::Both]);

    // A static last size other than 1 decides: rows of 20 are row mode.
    let w20 = tensor("w20", DType::F64, &[None, Some(20)]);
    let runs = [vec![v(&[5, 20], 19)], vec![v(&[1, 20], 18)]];
    let r = w20.sum(&[1]).unwrap();
    let got = kernel_modes(std::slice::from_ref(&w20), &[r], &runs, "[:, 20] axis 1");
    assert_eq!(got, [Modes::Row]);
    // Static rows shorter than 16 also run as column reductions over
    // blocks of rows (the driver's short reductions).
    let w = tensor("w", DType::F64, &[None, Some(4)]);
    let ws = std::slice::from_ref(&w);
    let runs = [vec![v(&[5, 4], 20)], vec![v(&[1, 4], 21)]];
    let r = w.sum(&[1]).unwrap();
    assert_eq!(
        kernel_modes(ws, &[r], &runs, "[:, 4] axis 1"),
        [Modes::Both]
    );
    let r = w.sum(&[0]).unwrap();
    assert_eq!(
        kernel_modes(ws, &[r], &runs, "[:, 4] axis 0"),
        [Modes::Column]
    );
    // Unless a dimension outside the rows is reduced too.
    let w3 = tensor("w3", DType::F64, &[None, None, Some(4)]);
    let runs = [vec![v(&[3, 5, 4], 17)]];
    let r = w3.sum(&[0, 2]).unwrap();
    let got = kernel_modes(
        std::slice::from_ref(&w3),
        &[r],
        &runs,
        "[:, :, 4] axes 0, 2",
    );
    assert_eq!(got, [Modes::Row]);
    // Or the static part of the rows is long already.
    let w4 = tensor("w4", DType::F64, &[None, Some(20), None]);
    let runs = [vec![v(&[3, 20, 2], 16)], vec![v(&[3, 20, 1], 15)]];
    let r = w4.sum(&[1, 2]).unwrap();
    let got = kernel_modes(
        std::slice::from_ref(&w4),
        &[r],
        &runs,
        "[:, 20, :] axes 1, 2",
    );
    assert_eq!(got, [Modes::Row]);
    // A statically broadcastable last axis is never innermost.
    let c = tensor("c", DType::F64, &[None, Some(1)]);
    let r = c.sum(&[0]).unwrap();
    let runs = [vec![v(&[6, 1], 22)], vec![v(&[1, 1], 23)]];
    let cs = std::slice::from_ref(&c);
    assert_eq!(kernel_modes(cs, &[r], &runs, "[:, 1] axis 0"), [Modes::Row]);
    // A static first size: the unknown reduced last axis may still be 1.
    let h = tensor("h", DType::F64, &[Some(4), None]);
    let r = h.sum(&[1]).unwrap();
    let runs = [vec![v(&[4, 3], 24)], vec![v(&[4, 1], 25)]];
    let hs = std::slice::from_ref(&h);
    assert_eq!(
        kernel_modes(hs, &[r], &runs, "[4, :] axis 1"),
        [Modes::Both]
    );

    // One (reduction, dtype) needed in both modes: the row kernel is
    // superseded by a two-mode one, and both steps compute correctly.
    let runs = [vec![v(&[5, 20], 26)], vec![v(&[1, 20], 27)]];
    let rows = w20.sum(&[1]).unwrap();
    let cols = w20.sum(&[0]).unwrap();
    let ws = std::slice::from_ref(&w20);
    let got = kernel_modes(ws, &[rows, cols], &runs, "rows and columns");
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[1], Modes::Both, "{got:?}");
}

#[test]
fn chunked_full_reductions_of_every_dtype_combine_their_partials() {
    // Above the parallel threshold every full CAReduce is chunked; the
    // partials (f64 or i64 accumulators) are folded without a kernel.
    let n = 400_009;
    for dtype in [DType::F64, DType::F32, DType::I64, DType::I32, DType::Bool] {
        let x = vector("x", dtype);
        let vx = rand_value(dtype, &[n], 50);
        for op in OPS {
            let r = x.reduce(op, None, false).unwrap();
            check_reduction(
                std::slice::from_ref(&x),
                &[r],
                std::slice::from_ref(&vx),
                &format!("{op:?} over {n} {dtype}"),
            );
        }
    }
}

/// How many `Composite` and `FusedReduce` nodes `fg` holds (`pprint` shows
/// both inline, as the expressions they compute).
fn fused_counts(fg: &FunctionGraph) -> (usize, usize) {
    let ops: Vec<&Op> = fg.node_ids().map(|n| &fg.node(n).op).collect();
    (
        ops.iter()
            .filter(|o| matches!(o, Op::Composite { .. }))
            .count(),
        ops.iter()
            .filter(|o| matches!(o, Op::FusedReduce { .. }))
            .count(),
    )
}

/// Reductions over outer axes that keep the innermost one (`sum(X,
/// axis=0)`, a middle axis of a 3-d array) are cut into chunks of rows
/// above the parallel threshold, reduced into partial accumulator arrays
/// and folded in chunk order: every op and accumulator dtype (NaN in a
/// max, wrapping i64 sums) matches the reference, and one, two and three
/// threads give the same bits (the cut depends on the shape only).
#[test]
fn outer_axis_reductions_are_chunked_by_rows_whatever_the_thread_count() {
    let x = tensor("x", DType::F64, &[None, None]);
    let y = tensor("y", DType::F64, &[None, None]);
    let x3 = tensor("x3", DType::F64, &[None, None, None]);
    let i = tensor("i", DType::I64, &[None, None]);
    let mut vx = rand_f64(&[1500, 301], 51, -2.0, 2.0);
    vx[[700, 5]] = f64::NAN;
    vx[[1400, 7]] = f64::INFINITY;
    let vx = Value::from(vx);
    let vy = Value::from(rand_f64(&[1500, 301], 52, 0.5, 1.5));
    let v3 = Value::from(rand_f64(&[3, 900, 101], 53, -1.0, 1.0));
    let big = rand_f64(&[1500, 301], 54, -1.0, 1.0).mapv(|v| (v * 9.0e18) as i64);
    let vi = Value::I64(big.into_dyn());
    let careduce = |op, axes: Vec<usize>, t: &Tensor| {
        Tensor::apply(
            Op::CAReduce {
                op,
                axes: Some(axes),
            },
            &[t],
        )
        .unwrap()
    };
    let mut cases: Vec<(String, Vec<Tensor>, Tensor, Vec<Value>)> = Vec::new();
    for op in [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Any,
        ReduceOp::All,
    ] {
        let vals = if op == ReduceOp::Prod {
            vy.clone()
        } else {
            vx.clone()
        };
        cases.push((
            format!("{op:?} axis 0"),
            vec![x.clone()],
            careduce(op, vec![0], &x),
            vec![vals],
        ));
        cases.push((
            format!("{op:?} middle axis"),
            vec![x3.clone()],
            careduce(op, vec![1], &x3),
            vec![v3.clone()],
        ));
    }
    cases.push((
        "i64 wrapping sum".into(),
        vec![i.clone()],
        careduce(ReduceOp::Sum, vec![0], &i),
        vec![vi],
    ));
    cases.push((
        "fused x * y + x".into(),
        vec![x.clone(), y.clone()],
        fused(ReduceOp::Sum, Some(vec![0]), mul_add(DType::F64), &[&x, &y]),
        vec![vx.clone(), vy.clone()],
    ));
    for (what, ins, out, vals) in &cases {
        check_reduction(ins, std::slice::from_ref(out), vals, what);
        let fg = FunctionGraph::new(ins, std::slice::from_ref(out)).unwrap();
        let f = compile(&fg, &CompileOptions::default()).unwrap();
        let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
        let mut runs = Vec::new();
        for threads in [1, 2, 3] {
            kiln::linker::set_num_threads(threads);
            runs.push(f.call(&args).unwrap().remove(0));
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

/// Permutation number `i` (mod the count) of `0..nd`, for `nd` <= 3: the
/// order of an input's axes in memory, outermost first (0: row-major).
fn memory_perm(nd: usize, i: usize) -> Vec<usize> {
    let all: &[&[usize]] = match nd {
        1 => &[&[0]],
        2 => &[&[0, 1], &[1, 0]],
        _ => &[
            &[0, 1, 2],
            &[2, 1, 0],
            &[1, 0, 2],
            &[0, 2, 1],
            &[2, 0, 1],
            &[1, 2, 0],
        ],
    };
    all[i % all.len()].to_vec()
}

/// Reference sums of `|x|` over `axes` of `v` (f64), for the error bound
/// of a reassociated float sum.
fn abs_sums(v: &Value, axes: &Option<Vec<usize>>) -> Vec<f64> {
    let a = v.to_f64_array().mapv(f64::abs);
    let axes: Vec<usize> = match axes {
        Some(ax) => ax.clone(),
        None => (0..a.ndim()).collect(),
    };
    let mut r = a;
    for &ax in axes.iter().rev() {
        r = r.sum_axis(ndarray::Axis(ax));
    }
    r.iter().copied().collect()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 96, ..Default::default() })]
    /// Chunked reductions (full, and over outer axes keeping the innermost
    /// one) on small random arrays, cut by a small parallel grain, against
    /// the reference: every op, f64 / f32 / i64 / bool inputs, any axes,
    /// inputs with NaN, infinities and signed zeros, laid out in memory in
    /// any order of their axes (row-major, transposed, permuted: the
    /// reduction then runs in that memory order). Integer, bool, max,
    /// min, any and all results exactly; float sums within the bound of a
    /// reassociated sum (2·n·eps·Σ|x|, plus the f32 result's rounding),
    /// products (of values in [0.5, 1.5), no specials) within 4·n·eps.
    #[test]
    fn chunked_reductions_match_the_reference(
        shape in proptest::collection::vec(1usize..24, 1..4),
        axes_mask in 0u8..8,
        op_i in 0usize..6,
        dtype_i in 0usize..4,
        seed in proptest::prelude::any::<u64>(),
        grain in 1usize..16,
        perm_i in 0usize..6,
    ) {
        let ops = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::Any, ReduceOp::All];
        let dtypes = [DType::F64, DType::F32, DType::I64, DType::Bool];
        let (op, dtype) = (ops[op_i], dtypes[dtype_i]);
        let nd = shape.len();
        let picked: Vec<usize> = (0..nd).filter(|d| axes_mask & (1 << d) != 0).collect();
        let axes = (!picked.is_empty() && picked.len() < nd).then_some(picked);
        // The axes' order in memory, outermost first, and the view of a
        // row-major array of the permuted shape that has `shape` and lies
        // in memory in that order.
        let perm = memory_perm(nd, perm_i);
        let stored: Vec<usize> = perm.iter().map(|&d| shape[d]).collect();
        let stored = if op == ReduceOp::Prod && dtype.is_float() {
            Value::from(rand_f64(&stored, seed, 0.5, 1.5)).cast(dtype)
        } else {
            rand_value(dtype, &stored, seed)
        };
        let inverse: Vec<usize> = (0..nd).map(|d| perm.iter().position(|&p| p == d).unwrap()).collect();
        let vals = kiln::map_value!(stored, a => a.permuted_axes(ndarray::IxDyn(&inverse)));
        proptest::prop_assert_eq!(vals.shape(), &shape[..]);
        let x = tensor("x", dtype, &vec![None; nd]);
        let out = Tensor::apply(Op::CAReduce { op, axes: axes.clone() }, &[&x]);
        // Max / min of bool and the like may be type errors: nothing to run.
        let Ok(out) = out else { return Ok(()) };
        let fg = FunctionGraph::new(std::slice::from_ref(&x), std::slice::from_ref(&out)).unwrap();
        let want = kiln::eval::evaluate(&fg, std::slice::from_ref(&vals)).unwrap();
        let opts = CompileOptions {
            parallel: kiln::linker::ParallelOptions { threshold: 1, grain },
            ..CompileOptions::default()
        };
        let f = compile(&fg, &opts).unwrap();
        let got = f.call(&[Arg::from(&vals)]).unwrap();
        let (g, w) = (&got[0], &want[0]);
        proptest::prop_assert_eq!(g.dtype(), w.dtype());
        proptest::prop_assert_eq!(g.shape(), w.shape());
        let float_sum_or_prod = g.dtype().is_float() && matches!(op, ReduceOp::Sum | ReduceOp::Prod);
        if !float_sum_or_prod {
            proptest::prop_assert!(g.same_as(w), "{:?} {:?} {:?}: got {:?}, want {:?}", op, dtype, axes, g, w);
            return Ok(());
        }
        let n = (shape.iter().product::<usize>() / w.to_f64_array().len().max(1)) as f64;
        let bound_sums = abs_sums(&vals, &axes);
        let f32_out = g.dtype() == DType::F32;
        for (k, (a, b)) in g.to_f64_array().iter().zip(w.to_f64_array().iter()).enumerate() {
            if a.is_nan() || b.is_nan() || a.is_infinite() || b.is_infinite() {
                proptest::prop_assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "element {}: {} vs {}", k, a, b);
                continue;
            }
            let rounding = if f32_out { b.abs() * f32::EPSILON as f64 } else { 0.0 };
            let tol = if op == ReduceOp::Sum {
                2.0 * n * f64::EPSILON * bound_sums[k] + rounding
            } else {
                4.0 * n * f64::EPSILON * b.abs() + rounding
            };
            proptest::prop_assert!((a - b).abs() <= tol, "{:?} {:?} {:?} element {}: {} vs {} (tol {})", op, dtype, axes, k, a, b, tol);
        }
    }
}

/// `All`, `Any` and `Sum` of one class test (`isfinite`, `isnan`, `isinf`)
/// of an f64 / f32 matrix: the row pass counts the class in the runtime
/// (`kiln_count_<class>_<dtype>`), column mode takes the blocked path; both
/// equal the reference exactly. Rows with no special value, one NaN, one
/// infinity and a mix, at lengths around the 16-lane groups and over
/// three of the count's 1024-value chunks (an early stop in the second).
#[test]
fn class_test_reductions_count_in_the_runtime_exactly() {
    for dtype in [DType::F64, DType::F32] {
        for test in [ScalarOp::IsFinite, ScalarOp::IsNan, ScalarOp::IsInf] {
            let mut pre = Composite::new(vec![dtype]);
            let t = pre.push(test, &[CRef::Input(0)]).unwrap();
            pre.outputs = vec![t];
            for cols in [1usize, 15, 16, 17, 40, 2500] {
                let mut a = rand_f64(&[4, cols], cols as u64, -3.0, 3.0);
                a[[1, cols / 2]] = f64::NAN;
                a[[2, cols - 1]] = f64::NEG_INFINITY;
                a[[3, 0]] = f64::INFINITY;
                a[[3, cols / 3]] = f64::NAN;
                let v = Value::from_f64_array(dtype, a);
                let x = matrix("x", dtype);
                let outs: Vec<Tensor> = [ReduceOp::All, ReduceOp::Any, ReduceOp::Sum]
                    .into_iter()
                    .flat_map(|op| {
                        [None, Some(vec![0]), Some(vec![1])]
                            .map(|axes| fused(op, axes, pre.clone(), &[&x]))
                    })
                    .collect();
                check_reduction(&[x], &outs, &[v], &format!("{test:?} {dtype} cols={cols}"));
            }
        }
    }
}
