//! The softmax family (`softmax`, `log_softmax`; `logsumexp` has its own
//! file, `logsumexp.rs`): type inference and
//! rejected inputs, reference values (finite and correct at ±1e3, NaN and
//! infinities per lane, empty arrays), the JIT against the reference within
//! the bound of `differential_support/exact.rs`, the expression language,
//! and the stabilize rules (`log(softmax)`, the hand-written softmax).

mod common_rewrites;

use std::collections::HashMap;

use common_rewrites::*;
use kiln::eval::evaluate;
use kiln::*;
use ndarray::{ArrayD, IxDyn};

fn f64s(shape: &[usize], v: Vec<f64>) -> Value {
    Value::F64(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
}

fn eval1(x: &Tensor, y: &Tensor, v: &Value) -> Vec<f64> {
    let fg = FunctionGraph::new(std::slice::from_ref(x), std::slice::from_ref(y)).unwrap();
    evaluate(&fg, std::slice::from_ref(v)).unwrap()[0]
        .to_f64_array()
        .iter()
        .copied()
        .collect()
}

fn jit1(x: &Tensor, y: &Tensor, v: &Value, mode: &str) -> Vec<f64> {
    let f = function(std::slice::from_ref(x), std::slice::from_ref(y))
        .mode(match mode {
            "none" => kiln::rewriting::Mode::none(),
            _ => kiln::rewriting::Mode::fast_run(),
        })
        .compile()
        .unwrap();
    f.call(&[v.into()]).unwrap()[0]
        .to_f64_array()
        .iter()
        .copied()
        .collect()
}

fn assert_near(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (k, (&a, &b)) in got.iter().zip(want).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * (1.0 + b.abs());
        assert!(ok, "{what}: element {k}: got {a:e}, want {b:e}");
    }
}

#[test]
fn types_and_rejected_inputs() {
    let x = tensor("x", DType::F32, &[Some(3), None]);
    let s = x.softmax(Some(-1)).unwrap();
    assert_eq!(s.ty(), x.ty());
    assert_eq!(x.log_softmax(None).unwrap().ty(), x.ty());
    // Integers are cast to f64 first.
    let k = vector("k", DType::I32);
    assert_eq!(k.softmax(Some(0)).unwrap().dtype(), DType::F64);
    let e = x.softmax(Some(2)).unwrap_err().to_string();
    assert!(
        e.contains("softmax") && e.contains("axis 2 out of range"),
        "{e}"
    );
    // The op itself rejects integer inputs and bad axes.
    let e = Tensor::apply(
        Op::Softmax {
            axis: Some(0),
            log: false,
        },
        &[&k],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("Softmax{axis=0}") && e.contains("expects a float input"),
        "{e}"
    );
    let e = Tensor::apply(
        Op::Softmax {
            axis: Some(5),
            log: true,
        },
        &[&x],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("LogSoftmax{axis=5}") && e.contains("axis 5 out of range"),
        "{e}"
    );
}

#[test]
fn values_are_finite_and_correct_at_large_inputs() {
    let x = matrix("X", DType::F64);
    let v = f64s(
        &[3, 3],
        vec![1000., -1000., 3., 1., 2., 3., -1e3, -1e3, -1e3],
    );
    let sm = x.softmax(Some(1)).unwrap();
    let lsm = x.log_softmax(Some(1)).unwrap();
    let want_sm = [
        1.0,
        0.0,
        (3.0f64 - 1000.0).exp(),
        0.09003057317038046,
        0.24472847105479764,
        0.6652409557748219,
        1.0 / 3.0,
        1.0 / 3.0,
        1.0 / 3.0,
    ];
    let ln3 = 3.0f64.ln();
    let l2 = (1.0f64 + (-1.0f64).exp() + (-2.0f64).exp()).ln();
    let want_lsm = [
        0.0,
        -2000.0,
        -997.0,
        -2.0 - l2,
        -1.0 - l2,
        -l2,
        -ln3,
        -ln3,
        -ln3,
    ];
    for mode in ["none", "fast_run"] {
        assert_near(&eval1(&x, &sm, &v), &want_sm, 1e-15, "reference softmax");
        assert_near(&jit1(&x, &sm, &v, mode), &want_sm, 1e-15, "jit softmax");
        assert_near(
            &eval1(&x, &lsm, &v),
            &want_lsm,
            1e-15,
            "reference log_softmax",
        );
        assert_near(
            &jit1(&x, &lsm, &v, mode),
            &want_lsm,
            1e-15,
            "jit log_softmax",
        );
    }
    // Along axis 0, axis None, and f32 (computed in f64, rounded once).
    let s0 = x.softmax(Some(0)).unwrap();
    assert_near(
        &jit1(&x, &s0, &v, "fast_run"),
        &eval1(&x, &s0, &v),
        1e-15,
        "axis 0",
    );
    let sn = x.log_softmax(None).unwrap();
    assert_near(
        &jit1(&x, &sn, &v, "fast_run"),
        &eval1(&x, &sn, &v),
        1e-13,
        "axis None",
    );
    let xf = matrix("F", DType::F32);
    let vf = v.cast(DType::F32);
    let sf = xf.softmax(Some(1)).unwrap();
    assert_near(
        &jit1(&xf, &sf, &vf, "fast_run"),
        &eval1(&xf, &sf, &vf),
        1e-7,
        "f32",
    );
    // NaN in a lane: the lane is NaN; +inf: NaN there, the others 0 (or
    // -inf); -inf elements are 0 (or -inf).
    let nan = f64::NAN;
    let inf = f64::INFINITY;
    let w = f64s(&[3, 2], vec![nan, 1.0, inf, 1.0, -inf, 0.0]);
    for y in [&sm, &lsm] {
        let r = eval1(&x, y, &w);
        let g = jit1(&x, y, &w, "fast_run");
        assert_near(&g, &r, 1e-15, "non-finite");
        assert!(r[0].is_nan() && r[1].is_nan() && r[2].is_nan());
    }
    assert_eq!(eval1(&x, &sm, &w)[3], 0.0);
    assert_eq!(eval1(&x, &lsm, &w)[3], -inf);
    assert_eq!(eval1(&x, &sm, &w)[4..], [0.0, 1.0]);
    assert_eq!(eval1(&x, &lsm, &w)[4..], [-inf, 0.0]);
    // Empty arrays: empty results.
    let e = f64s(&[0, 3], vec![]);
    assert!(eval1(&x, &sm, &e).is_empty() && jit1(&x, &sm, &e, "fast_run").is_empty());
    let e = f64s(&[2, 0], vec![]);
    assert!(jit1(&x, &lsm, &e, "none").is_empty());
}

#[test]
fn expression_language() {
    let mut vars = HashMap::new();
    vars.insert("X".to_string(), matrix("X", DType::F64));
    let show = |src: &str| {
        let t = build_expression(src, &vars).unwrap();
        let fg = FunctionGraph::new(&[vars["X"].clone()], &[t]).unwrap();
        kiln::graph::print::pprint_outputs(&fg)
    };
    assert_eq!(show("softmax(X)"), "softmax(X, axis=1)");
    assert_eq!(show("softmax(X, axis=0)"), "softmax(X, axis=0)");
    assert_eq!(
        show("log_softmax(X, axis=None)"),
        "log_softmax(X, axis=None)"
    );
    for (src, msg) in [
        (
            "softmax(X, keepdims=True)",
            "softmax() does not take keepdims=",
        ),
        ("softmax(X, axis=(0, 1))", "softmax() takes one axis"),
        ("log_softmax(X, axis=-3)", "axis -3 out of range"),
    ] {
        let e = build_expression(src, &vars).unwrap_err().to_string();
        assert!(e.contains(msg), "{src}: {e}");
    }
}

#[test]
fn rewrite_log_softmax() {
    check_rule(
        "local_log_softmax",
        graph("X=f64[:, :]", "log(softmax(X, axis=0))"),
        "log(softmax(X, axis=0))",
        "log_softmax(X, axis=0)",
    );
    check_no_fire("local_log_softmax", graph("X=f64[:, :]", "log(exp(X))"));
    // Where softmax underflows to 0 the original is -inf, the result finite.
    let x = vector("x", DType::F64);
    let mut fg = FunctionGraph::new(
        std::slice::from_ref(&x),
        &[x.softmax(Some(0)).unwrap().log()],
    )
    .unwrap();
    kiln::rewrites::rewrite_graph(&mut fg, &kiln::rewriting::Mode::fast_run()).unwrap();
    let v = f64s(&[2], vec![1000.0, -1000.0]);
    let got = evaluate(&fg, &[v]).unwrap()[0].to_f64_array();
    assert_eq!(got.as_slice().unwrap(), &[0.0, -2000.0]);
}

/// `graph` with equal sub-expressions merged (as `merge1` does before the
/// stabilize database runs): the hand-written forms repeat `exp(...)`.
fn merged(decls: &str, src: &str) -> FunctionGraph {
    use kiln::rewriting::{GraphRewriter, MergeOptimizer};
    let mut fg = graph(decls, src);
    MergeOptimizer::new().rewrite(&mut fg).unwrap();
    fg
}

#[test]
fn rewrite_softmax_recognize() {
    check_rule(
        "local_softmax_recognize",
        merged(
            "X=f64[:, :]",
            "exp(X - max(X, axis=1, keepdims=True)) / sum(exp(X - max(X, axis=1, keepdims=True)), axis=1, keepdims=True)",
        ),
        "(exp((X - max(X, axis=1)[:, None])) / sum(exp((X - max(X, axis=1)[:, None])), axis=1)[:, None])",
        "softmax(X, axis=1)",
    );
    check_rule(
        "local_softmax_recognize",
        merged("X=f64[:, :]", "exp(X) / sum(exp(X), axis=0, keepdims=True)"),
        "(exp(X) / sum(exp(X), axis=0)[None, :])",
        "softmax(X, axis=0)",
    );
    check_rule(
        "local_softmax_recognize",
        merged("x=f64[:]", "exp(x) / sum(exp(x))"),
        "(exp(x) / sum(exp(x))[None])",
        "softmax(x, axis=0)",
    );
    // A different axis, a different numerator, or no keepdims: left alone.
    check_no_fire(
        "local_softmax_recognize",
        merged("X=f64[:, :]", "exp(X) / sum(exp(X), axis=1)"),
    );
    check_no_fire(
        "local_softmax_recognize",
        graph(
            "X=f64[:, :]; Y=f64[:, :]",
            "exp(Y) / sum(exp(X), axis=1, keepdims=True)",
        ),
    );
    // Over every axis (as canonicalize leaves it): the softmax of all elements.
    let x = matrix("X", DType::F64);
    let e = x.exp();
    let all = &e / &e.reduce(ReduceOp::Sum, None, true).unwrap();
    let mut fg = FunctionGraph::new(&[x], &[all]).unwrap();
    assert_eq!(apply_rule(&mut fg, "local_softmax_recognize"), 1);
    assert_eq!(show(&fg), "softmax(X, axis=None)");
    // FAST_RUN at ±1e3: the hand-written forms are finite and correct.
    let x = matrix("X", DType::F64);
    let hand = &x.exp() / &x.exp().reduce(ReduceOp::Sum, Some(&[1]), true).unwrap();
    let v = f64s(&[2, 2], vec![1000.0, 999.0, -1000.0, -1001.0]);
    let reference = eval1(&x, &hand, &v);
    assert!(
        reference.iter().all(|r| r.is_nan() || *r == 0.0),
        "{reference:?}"
    );
    let got = jit1(&x, &hand, &v, "fast_run");
    let p = 1.0 / (1.0 + (-1.0f64).exp());
    assert_near(
        &got,
        &[p, 1.0 - p, p, 1.0 - p],
        1e-15,
        "hand-written softmax",
    );
    let hand_log = hand.log();
    let got = jit1(&x, &hand_log, &v, "fast_run");
    let l = -(1.0 + (-1.0f64).exp()).ln();
    assert_near(
        &got,
        &[l, l - 1.0, l, l - 1.0],
        1e-15,
        "hand-written log_softmax",
    );
}

#[test]
fn rewrite_exp_log_softmax() {
    check_rule(
        "local_exp_log_softmax",
        graph("X=f64[:, :]", "exp(log_softmax(X, axis=0))"),
        "exp(log_softmax(X, axis=0))",
        "softmax(X, axis=0)",
    );
    check_no_fire(
        "local_exp_log_softmax",
        graph("X=f64[:, :]", "exp(softmax(X))"),
    );
}

#[test]
fn rewrite_log_softmax_from_logsumexp() {
    let name = "local_log_softmax_from_logsumexp";
    check_rule(
        name,
        merged("X=f64[:, :]", "X - log(sum(exp(X), axis=1, keepdims=True))"),
        "(X - log(sum(exp(X), axis=1)[:, None]))",
        "log_softmax(X, axis=1)",
    );
    check_rule(
        name,
        merged("x=f64[:]", "x - log(sum(exp(x), keepdims=True))"),
        "(x - log(sum(exp(x))[None]))",
        "log_softmax(x, axis=0)",
    );
    // Written with the LogSumExp op.
    check_rule(
        name,
        merged("X=f64[:, :]", "X - logsumexp(X, axis=0, keepdims=True)"),
        "(X - logsumexp(X, axis=0)[None, :])",
        "log_softmax(X, axis=0)",
    );
    // Another tensor, another axis, or no keepdims: left alone.
    check_no_fire(
        name,
        merged(
            "X=f64[:, :]; Y=f64[:, :]",
            "Y - log(sum(exp(X), axis=1, keepdims=True))",
        ),
    );
    check_no_fire(
        name,
        merged(
            "X=f64[:, :]; Y=f64[:, :]",
            "Y - logsumexp(X, axis=1, keepdims=True)",
        ),
    );
    check_no_fire(
        name,
        merged("X=f64[:, :]", "X - logsumexp(X, axis=1, keepdims=True).T"),
    );
    check_no_fire(
        name,
        merged(
            "X=f64[:, :]",
            "X - log(sum(exp(X), axis=0, keepdims=True)).T",
        ),
    );
    check_no_fire(
        name,
        merged("x=f64[:]", "x - log(max(exp(x), keepdims=True))"),
    );
    // FAST_RUN at ±1e3: the original is infinite; the rewrite is exact.
    let x = matrix("X", DType::F64);
    let s = x.exp().reduce(ReduceOp::Sum, Some(&[1]), true).unwrap();
    let hand = &x - &s.log();
    let v = f64s(
        &[2, 3],
        vec![1000.0, 999.0, 998.0, -1000.0, -1001.0, -1e300],
    );
    let reference = eval1(&x, &hand, &v);
    // exp overflows (x - inf) and underflows (x - log(0)) in the original.
    assert!(
        reference[..3].iter().all(|&r| r == f64::NEG_INFINITY)
            && reference[3..].iter().all(|&r| r == f64::INFINITY),
        "{reference:?}"
    );
    let got = jit1(&x, &hand, &v, "fast_run");
    // log(1 + e^-1 + e^-2) = 0.40760596444437...
    let l = (1.0 + (-1f64).exp() + (-2f64).exp()).ln();
    let want = [
        -l,
        -1.0 - l,
        -2.0 - l,
        -(1.0 + (-1f64).exp()).ln(),
        -1.0 - (1.0 + (-1f64).exp()).ln(),
        f64::NEG_INFINITY,
    ];
    assert_near(&got[..5], &want[..5], 1e-15, "log_softmax from logsumexp");
    assert!(got[5] < -1e299, "{got:?}");
}

#[test]
fn large_arrays_split_over_threads_match_the_reference() {
    // 300 x 2000 elements: the lanes are spread over threads (both the
    // in-place rows of axis 1 and the gathered columns of axis 0), for
    // softmax, log_softmax and logsumexp.
    let (r, c) = (300, 2000);
    let data: Vec<f64> = (0..r * c)
        .map(|i| ((i * 7919 % 10007) as f64 / 10007.0 - 0.5) * 60.0)
        .collect();
    let v = f64s(&[r, c], data);
    let x = matrix("X", DType::F64);
    for axis in [Some(1), Some(0), None] {
        for log in [false, true] {
            let y = if log {
                x.log_softmax(axis).unwrap()
            } else {
                x.softmax(axis).unwrap()
            };
            let want = eval1(&x, &y, &v);
            let got = jit1(&x, &y, &v, "fast_run");
            assert_near(&got, &want, 1e-12, &format!("axis {axis:?} log {log}"));
        }
        // logsumexp runs on the same lane passes: one value per lane.
        let axes: Option<Vec<isize>> = axis.map(|a| vec![a]);
        let y = x.logsumexp(axes.as_deref(), false).unwrap();
        let (got, want) = (jit1(&x, &y, &v, "fast_run"), eval1(&x, &y, &v));
        assert_near(&got, &want, 1e-13, &format!("logsumexp axis {axis:?}"));
    }
}

/// Issue 19's accuracy audit for the softmax family: each rule's
/// hand-written input form, after FAST_RUN, at rows of ±800 and of
/// tiny values, against closed forms. Row `[800, -800, 0]` has
/// logsumexp `800 + log1p(e^-800 + e^-1600)`, which is 800 in f64
/// (e^-800 < 2^-1074), so its log_softmax is `[0, -1600, -800]` and its
/// softmax `[1, 0, 0]` (e^-800 and e^-1600 round to 0); row `[-800, 800,
/// 1]` likewise gives `[-1600, 0, -799]` and `[0, 1, 0]`; a row of
/// `±1e-300` and 0 gives `-ln 3` and `1/3` to within 1e-300 (exact in f64
/// after rounding). Without the rules, `exp(800)` overflows: NaN or -inf.
#[test]
fn softmax_family_rewrites_are_exact_at_800() {
    let x = matrix("X", DType::F64);
    let v = f64s(
        &[3, 3],
        vec![800.0, -800.0, 0.0, -800.0, 800.0, 1.0, 1e-300, -1e-300, 0.0],
    );
    let third = 1.0 / 3.0;
    let ln3 = -(3.0f64.ln());
    let soft = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, third, third, third];
    let log_soft = [0.0, -1600.0, -800.0, -1600.0, 0.0, -799.0, ln3, ln3, ln3];
    let mut vars = HashMap::new();
    vars.insert("X".to_string(), x.clone());
    for (rule, src, want) in [
        (
            "local_softmax_recognize",
            "exp(X - max(X, axis=1, keepdims=True)) / sum(exp(X - max(X, axis=1, keepdims=True)), axis=1, keepdims=True)",
            &soft,
        ),
        ("local_exp_over_sum_exp", "exp(X) / sum(exp(X), axis=1, keepdims=True)", &soft),
        ("local_log_softmax", "log(softmax(X, axis=1))", &log_soft),
        ("local_exp_log_softmax", "exp(log_softmax(X, axis=1))", &soft),
        (
            "local_log_softmax_from_logsumexp",
            "X - log(sum(exp(X), axis=1, keepdims=True))",
            &log_soft,
        ),
    ] {
        let y = build_expression(src, &vars).unwrap();
        let got = jit1(&x, &y, &v, "fast_run");
        for (k, (&a, &b)) in got.iter().zip(want.iter()).enumerate() {
            let ok = if b == 0.0 { a == 0.0 } else { (a - b).abs() <= 1e-12 * b.abs() };
            assert!(ok, "{rule} ({src}): element {k}: got {a:e}, want {b:e}; all {got:?}");
        }
    }
}

/// Lanes shorter than a vector group (rows of 1 to 15 values) run as
/// blocks of rows in the runtime's short-row pass: along the innermost axis
/// in place, otherwise (an outer axis, a 3-d middle axis, f32) gathered in
/// blocks of scratch rows. Each case against the reference, with special
/// rows (NaN, +inf, a row of -inf only, ±800) among ordinary ones, and row
/// counts that leave partial blocks and vector groups; the largest is
/// split over threads.
#[test]
fn short_lanes_in_blocks_match_the_reference() {
    let rows_of = |rows: usize, n: usize| -> Vec<f64> {
        let mut d: Vec<f64> = (0..rows * n)
            .map(|i| ((i * 7919 % 10007) as f64 / 10007.0 - 0.5) * 20.0)
            .collect();
        let specials = [f64::NAN, f64::INFINITY, 800.0, -800.0];
        let len = d.len();
        for (k, s) in specials.into_iter().enumerate() {
            d[(3 * k + 1) * n % len] = s;
        }
        let last = (rows - 1) * n;
        d[last..].fill(f64::NEG_INFINITY);
        d
    };
    let x = matrix("X", DType::F64);
    let xf = matrix("Xf", DType::F32);
    for n in [1usize, 2, 3, 4, 5, 8, 9, 15] {
        for rows in [7usize, 300, 1000] {
            let d = rows_of(rows, n);
            let v = f64s(&[rows, n], d.clone());
            // The same lanes as columns: an outer axis, gathered.
            let t: Vec<f64> = (0..n * rows)
                .map(|i| d[(i % rows) * n + i / rows])
                .collect();
            let vt = f64s(&[n, rows], t);
            let vf = Value::F32(
                ArrayD::from_shape_vec(IxDyn(&[rows, n]), d.iter().map(|&e| e as f32).collect())
                    .unwrap(),
            );
            for (what, var, val, axis, tol) in [
                ("rows", &x, &v, 1, 1e-12),
                ("columns", &x, &vt, 0, 1e-12),
                ("f32 rows", &xf, &vf, 1, 1e-6),
            ] {
                let ys = [
                    var.softmax(Some(axis)).unwrap(),
                    var.log_softmax(Some(axis)).unwrap(),
                    var.logsumexp(Some(&[axis]), false).unwrap(),
                ];
                for (k, y) in ys.iter().enumerate() {
                    let (got, want) = (jit1(var, y, val, "fast_run"), eval1(var, y, val));
                    assert_near(&got, &want, tol, &format!("{what} {rows}x{n} output {k}"));
                }
            }
        }
    }
    // A middle axis of a 3-d array (lanes strided by the innermost size).
    let x3 = tensor("X3", DType::F64, &[None, None, None]);
    let d: Vec<f64> = (0..50 * 3 * 20)
        .map(|i| ((i * 31 % 97) as f64) * 0.3 - 14.0)
        .collect();
    let v3 = f64s(&[50, 3, 20], d);
    for y in [
        x3.softmax(Some(1)).unwrap(),
        x3.logsumexp(Some(&[1]), false).unwrap(),
    ] {
        let (got, want) = (jit1(&x3, &y, &v3, "fast_run"), eval1(&x3, &y, &v3));
        assert_near(&got, &want, 1e-12, "3-d middle axis");
    }
    // Enough rows to be split over threads.
    let v = f64s(&[200_000, 3], rows_of(200_000, 3));
    for y in [
        x.softmax(Some(1)).unwrap(),
        x.logsumexp(Some(&[1]), false).unwrap(),
    ] {
        let (got, want) = (jit1(&x, &y, &v, "fast_run"), eval1(&x, &y, &v));
        assert_near(&got, &want, 1e-12, "200000 rows of 3");
    }
}

/// Lanes gathered in blocks of neighbours (a reduced axis that is not the
/// innermost in memory) and inputs in another axis order (transposed,
/// permuted: lanes read in memory order, results laid out alike): every
/// lane's values are the lane pass's, so softmax, log_softmax and
/// logsumexp over each axis of a 3-d array, f64 and f32, equal bit for
/// bit the same call on a row-major copy, and the reference within the
/// family's bound. Inner sizes 13 and 9 cut the blocks of eight lanes
/// short at every outer position; the 2 x 300 x 140 case is split over
/// threads.
#[test]
fn lanes_in_blocks_and_in_memory_order_match_row_major_bits() {
    let x3 = |d| tensor("X", d, &[None, None, None]);
    for (shape, seed) in [
        ([3usize, 40, 13], 1u64),
        ([2, 17, 9], 2),
        ([2, 300, 140], 3),
    ] {
        let n: usize = shape.iter().product();
        let data: Vec<f64> = (0..n)
            .map(|i| (((i as u64 * 7919 + seed * 131) % 10007) as f64 / 10007.0 - 0.5) * 40.0)
            .collect();
        let base = f64s(&shape, data);
        for dtype in [DType::F64, DType::F32] {
            let x = x3(dtype);
            let row_major = base.cast(dtype);
            // The same values stored with axes (2, 0, 1) and (2, 1, 0)
            // outermost first.
            let layouts: Vec<Value> = [[2usize, 0, 1], [2, 1, 0]]
                .iter()
                .map(|perm| {
                    let stored: Vec<usize> = perm.iter().map(|&d| shape[d]).collect();
                    let inverse: Vec<usize> =
                        (0..3).map(|d| perm.iter().position(|&p| p == d).unwrap()).collect();
                    let s = kiln::map_value!(row_major.clone(), a => a.permuted_axes(IxDyn(perm)).as_standard_layout().into_owned());
                    assert_eq!(s.shape(), &stored[..]);
                    kiln::map_value!(s, a => a.permuted_axes(IxDyn(&inverse)))
                })
                .collect();
            for axis in [0isize, 1, 2] {
                let outs = [
                    x.softmax(Some(axis)).unwrap(),
                    x.log_softmax(Some(axis)).unwrap(),
                    x.logsumexp(Some(&[axis]), false).unwrap(),
                ];
                let f = function(std::slice::from_ref(&x), &outs).compile().unwrap();
                let want = f.call(&[(&row_major).into()]).unwrap();
                let fg = FunctionGraph::new(std::slice::from_ref(&x), &outs).unwrap();
                let reference = evaluate(&fg, std::slice::from_ref(&row_major)).unwrap();
                for (k, (w, r)) in want.iter().zip(&reference).enumerate() {
                    let (w, r) = (w.to_f64_array(), r.to_f64_array());
                    let (w, r): (Vec<f64>, Vec<f64>) =
                        (w.iter().copied().collect(), r.iter().copied().collect());
                    let tol = if dtype == DType::F32 { 1e-6 } else { 1e-12 };
                    assert_near(
                        &w,
                        &r,
                        tol,
                        &format!("{shape:?} {dtype} axis {axis} output {k}"),
                    );
                }
                for (j, v) in layouts.iter().enumerate() {
                    let got = f.call(&[v.into()]).unwrap();
                    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            g.same_as(w),
                            "{shape:?} {dtype} layout {j} axis {axis} output {k}"
                        );
                    }
                }
            }
        }
    }
}

/// Lanes longer than a thread's share when there are fewer lanes than
/// threads (`softmax(X)` over all of `X`, one long row) are split into
/// chunks computed by several threads: the maximum is exact, the sum is
/// added chunk by chunk, so the values stay within the lane pass's bound of
/// the reference; NaN, `+inf` and a lane of `-inf` only follow the
/// reference's rules exactly; `f32` lanes are computed in `f64` and
/// rounded once (to within an `f32` rounding of the reference).
#[test]
fn long_lanes_split_into_chunks_match_the_reference() {
    kiln::linker::set_num_threads(2);
    let n = 200_003;
    let base: Vec<f64> = (0..n)
        .map(|i| ((i * 7919 % 10007) as f64 / 10007.0 - 0.5) * 60.0)
        .collect();
    let with = |k: usize, v: f64| {
        let mut d = base.clone();
        d[k] = v;
        d
    };
    let lanes = [
        ("ordinary", base.clone()),
        ("NaN", with(150_000, f64::NAN)),
        ("+inf", with(70_001, f64::INFINITY)),
        ("-inf only", vec![f64::NEG_INFINITY; n]),
        // Whole chunks of -inf before finite values (their terms are 0).
        ("-inf head", {
            let mut d = base.clone();
            d[..5000].fill(f64::NEG_INFINITY);
            d
        }),
        ("huge", base.iter().map(|v| v * 1e298).collect()),
    ];
    for dtype in [DType::F64, DType::F32] {
        let tol = if dtype == DType::F32 { 1e-6 } else { 1e-12 };
        let x = tensor("x", dtype, &[None, None]);
        for (what, data) in &lanes {
            let v = Value::from_f64_array(
                dtype,
                ArrayD::from_shape_vec(IxDyn(&[1, n]), data.clone()).unwrap(),
            );
            for axis in [Some(1), None] {
                for log in [false, true] {
                    let y = if log {
                        x.log_softmax(axis).unwrap()
                    } else {
                        x.softmax(axis).unwrap()
                    };
                    let (got, want) = (jit1(&x, &y, &v, "fast_run"), eval1(&x, &y, &v));
                    let what = format!("{dtype} {what} axis {axis:?} log {log}");
                    assert_near(&got, &want, tol, &what);
                }
                let axes: Option<Vec<isize>> = axis.map(|a| vec![a]);
                let y = x.logsumexp(axes.as_deref(), false).unwrap();
                let (got, want) = (jit1(&x, &y, &v, "fast_run"), eval1(&x, &y, &v));
                assert_near(
                    &got,
                    &want,
                    tol,
                    &format!("{dtype} {what} logsumexp {axis:?}"),
                );
            }
        }
    }
}
