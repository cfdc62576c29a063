//! `logsumexp` (`Op::LogSumExp`): type inference and rejected inputs,
//! reference values (finite and correct at ±1e3, NaN and infinities per
//! lane, empty lanes), the JIT against the reference on contiguous and
//! gathered lanes and `f32`, the expression language, the gradient, and a
//! property test over random shapes, axes, dtypes and special values
//! (lanes split over threads: `softmax.rs`, with the rest of the family).

use std::collections::HashMap;

use kiln::eval::evaluate;
use kiln::*;
use ndarray::{ArrayD, IxDyn};
use proptest::prelude::*;

fn f64s(shape: &[usize], v: Vec<f64>) -> Value {
    Value::F64(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
}

/// The reference value of `y(x)` at `v`.
fn eval1(x: &Tensor, y: &Tensor, v: &Value) -> Value {
    let fg = FunctionGraph::new(std::slice::from_ref(x), std::slice::from_ref(y)).unwrap();
    evaluate(&fg, std::slice::from_ref(v)).unwrap().remove(0)
}

/// The compiled value of `y(x)` at `v` under `mode`.
fn jit1(x: &Tensor, y: &Tensor, v: &Value, mode: kiln::rewriting::Mode) -> Value {
    let f = function(std::slice::from_ref(x), std::slice::from_ref(y))
        .mode(mode)
        .compile()
        .unwrap();
    f.call(&[v.into()]).unwrap().remove(0)
}

/// `got` against `want`: same dtype and shape, NaN where NaN, equal
/// infinities, and finite elements within `tol` relative.
fn assert_near(got: &Value, want: &Value, tol: f64, what: &str) {
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.to_f64_array(), want.to_f64_array());
    for (k, (&a, &b)) in g.iter().zip(w.iter()).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * b.abs();
        assert!(ok, "{what}: element {k}: got {a:e}, want {b:e}");
    }
}

/// `ln Σ e^v` of a lane in long form: `m + ln Σ e^(v - m)`.
fn lse(lane: &[f64]) -> f64 {
    let m = lane.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if lane.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    if m.is_infinite() {
        return m;
    }
    m + lane.iter().map(|&v| (v - m).exp()).sum::<f64>().ln()
}

#[test]
fn types_and_rejected_inputs() {
    let x = tensor("x", DType::F32, &[Some(3), None, Some(5)]);
    let op = |axis| Tensor::apply(Op::LogSumExp { axis }, &[&x]).unwrap();
    assert_eq!(op(Some(1)).ty().shape, vec![Some(3), Some(5)]);
    assert_eq!(op(Some(0)).ty().shape, vec![None, Some(5)]);
    assert_eq!(op(None).ty().shape, Vec::<Option<usize>>::new());
    assert_eq!(op(None).dtype(), DType::F32);
    // Integers are cast to f64 by the builder; the op itself refuses them.
    let k = vector("k", DType::I32);
    assert_eq!(k.logsumexp(None, false).unwrap().dtype(), DType::F64);
    let e = Tensor::apply(Op::LogSumExp { axis: Some(0) }, &[&k])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("LogSumExp{axis=0}") && e.contains("expects a float input"),
        "{e}"
    );
    let e = Tensor::apply(Op::LogSumExp { axis: Some(3) }, &[&x])
        .unwrap_err()
        .to_string();
    assert!(e.contains("axis 3 out of range"), "{e}");
    let e = x.logsumexp(Some(&[1, -2]), false).unwrap_err().to_string();
    assert!(e.contains("repeated"), "{e}");
}

#[test]
fn values_are_finite_and_correct_at_large_inputs_and_infinities() {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let rows: Vec<[f64; 3]> = vec![
        [1000.0, 1000.0, 1000.0],
        [1000.0, -1000.0, 3.0],
        [-1000.0, -1001.0, -1000.0],
        [1.0, 2.0, 3.0],
        [1000.0, -inf, 0.0],
        [-inf, -inf, -inf],
        [inf, 0.0, 1.0],
        [inf, -inf, 3.0],
        [nan, 1.0, inf],
        [1e-300, -1e-300, 0.0],
    ];
    let x = matrix("X", DType::F64);
    let v = f64s(&[rows.len(), 3], rows.iter().flatten().copied().collect());
    let want = f64s(&[rows.len()], rows.iter().map(|r| lse(r)).collect());
    let y = x.logsumexp(Some(&[1]), false).unwrap();
    assert_near(&eval1(&x, &y, &v), &want, 1e-15, "reference");
    for mode in [
        kiln::rewriting::Mode::none(),
        kiln::rewriting::Mode::fast_run(),
    ] {
        assert_near(&jit1(&x, &y, &v, mode), &want, 1e-15, "jit");
    }
    // The hand-written form becomes the op under FAST_RUN, with the same
    // values (without the rewrite, rows 0 and 2 overflow / underflow).
    let hand = x
        .exp()
        .reduce(ReduceOp::Sum, Some(&[1]), false)
        .unwrap()
        .log();
    assert_near(
        &jit1(&x, &hand, &v, kiln::rewriting::Mode::fast_run()),
        &want,
        1e-15,
        "log(sum(exp(X)))",
    );
    let want0 = 1000.0 + 3f64.ln();
    assert!((want.to_f64_array()[0] - want0).abs() <= 1e-15 * want0);
}

#[test]
fn axes_layouts_and_f32_match_the_reference() {
    let x = tensor("X", DType::F64, &[None, None, None]);
    let data: Vec<f64> = (0..4 * 5 * 6)
        .map(|i| ((i * 37 % 101) as f64 - 50.0) / 7.0)
        .collect();
    let v = f64s(&[4, 5, 6], data);
    // Contiguous lanes (axis 2), gathered lanes (0 and 1), all elements.
    for axes in [
        Some(vec![2]),
        Some(vec![1]),
        Some(vec![0]),
        None,
        Some(vec![-1, 0, 1]),
    ] {
        for keepdims in [false, true] {
            let y = x.logsumexp(axes.as_deref(), keepdims).unwrap();
            let want = eval1(&x, &y, &v);
            for mode in [
                kiln::rewriting::Mode::none(),
                kiln::rewriting::Mode::fast_run(),
            ] {
                let got = jit1(&x, &y, &v, mode);
                assert_near(
                    &got,
                    &want,
                    1e-14,
                    &format!("axes {axes:?} keepdims {keepdims}"),
                );
            }
        }
    }
    // A transposed view: lanes of the view, not of its memory.
    let t = v.to_f64_array().permuted_axes(vec![2, 0, 1]);
    let vt = Value::F64(t.clone());
    let y = x.logsumexp(Some(&[2]), false).unwrap();
    let want = eval1(&x, &y, &Value::F64(t.as_standard_layout().into_owned()));
    assert_near(
        &jit1(&x, &y, &vt, kiln::rewriting::Mode::fast_run()),
        &want,
        1e-14,
        "view",
    );
    // f32: computed in f64, rounded once, as the reference.
    let xf = matrix("F", DType::F32);
    let vf = f64s(
        &[3, 4],
        vec![
            80.0, 90.0, -90.0, 0.5, 1.0, 2.0, 3.0, 4.0, -1e3, -1e3, 0.0, 1.0,
        ],
    )
    .cast(DType::F32);
    let yf = xf.logsumexp(Some(&[1]), false).unwrap();
    let got = jit1(&xf, &yf, &vf, kiln::rewriting::Mode::fast_run());
    assert_eq!(got.dtype(), DType::F32);
    assert_near(&got, &eval1(&xf, &yf, &vf), 0.0, "f32");
}

#[test]
fn empty_lanes_are_minus_infinity_and_no_lanes_are_empty() {
    let x = matrix("X", DType::F64);
    let y = x.logsumexp(Some(&[1]), false).unwrap();
    let e = f64s(&[3, 0], vec![]);
    let want = f64s(&[3], vec![f64::NEG_INFINITY; 3]);
    assert_near(&eval1(&x, &y, &e), &want, 0.0, "reference");
    assert_near(
        &jit1(&x, &y, &e, kiln::rewriting::Mode::fast_run()),
        &want,
        0.0,
        "jit",
    );
    let all = x.logsumexp(None, false).unwrap();
    let want = Value::F64(ArrayD::from_elem(IxDyn(&[]), f64::NEG_INFINITY));
    assert_near(
        &jit1(&x, &all, &e, kiln::rewriting::Mode::fast_run()),
        &want,
        0.0,
        "all",
    );
    let none = f64s(&[0, 4], vec![]);
    let got = jit1(&x, &y, &none, kiln::rewriting::Mode::fast_run());
    assert_eq!(got.shape(), &[0]);
}

#[test]
fn expression_language() {
    let mut vars = HashMap::new();
    vars.insert(
        "X".to_string(),
        tensor("X", DType::F64, &[None, None, None]),
    );
    let show = |src: &str| {
        let t = build_expression(src, &vars).unwrap();
        let fg = FunctionGraph::new(&[vars["X"].clone()], &[t]).unwrap();
        kiln::graph::print::pprint_outputs(&fg)
    };
    // scipy's and PyTensor's default: all elements.
    assert_eq!(show("logsumexp(X)"), "logsumexp(X)");
    assert_eq!(show("logsumexp(X, axis=-1)"), "logsumexp(X, axis=2)");
    assert_eq!(show("logsumexp(X, axis=(0, 1, 2))"), "logsumexp(X)");
    assert_eq!(
        show("logsumexp(X, axis=1, keepdims=True)"),
        "logsumexp(X, axis=1)[:, None, :]"
    );
    // Several axes but not all: the hand-written form.
    assert_eq!(
        show("logsumexp(X, axis=(0, 2))"),
        "log(sum(exp(X), axis=(0, 2)))"
    );
    let e = build_expression("logsumexp(X, axis=3)", &vars)
        .unwrap_err()
        .to_string();
    assert!(e.contains("axis 3 out of range"), "{e}");
    // The printed form reads back as the same graph.
    let t = build_expression("logsumexp(X, axis=1) * 2", &vars).unwrap();
    let fg = FunctionGraph::new(&[vars["X"].clone()], &[t]).unwrap();
    let printed = kiln::graph::print::pprint_outputs(&fg);
    assert_eq!(show(&printed), printed);
}

#[test]
fn gradient_is_the_softmax() {
    let x = matrix("X", DType::F64);
    let w = matrix("W", DType::F64);
    // d/dX sum(W[:, 0] * logsumexp(X, axis=1)) = W[:, 0, None] * softmax(X).
    let l = x.logsumexp(Some(&[1]), false).unwrap();
    let wl = build_expression(
        "sum(W[:, 0] * L)",
        &HashMap::from([("W".to_string(), w.clone()), ("L".to_string(), l)]),
    )
    .unwrap();
    let g = kiln::gradient::grad(&wl, std::slice::from_ref(&x))
        .unwrap()
        .remove(0);
    let fg = FunctionGraph::new(&[x.clone(), w.clone()], std::slice::from_ref(&g)).unwrap();
    let vx = f64s(&[2, 3], vec![1000.0, 999.0, 998.0, -1.0, 0.0, 1.0]);
    let vw = f64s(&[2, 1], vec![2.0, -0.5]);
    let got = evaluate(&fg, &[vx.clone(), vw.clone()]).unwrap().remove(0);
    let sm = |r: [f64; 3]| {
        let s: f64 = r.iter().map(|v| (v - r[2]).exp()).sum();
        r.map(|v| (v - r[2]).exp() / s)
    };
    let (a, b) = (sm([1000.0, 999.0, 998.0]), sm([-1.0, 0.0, 1.0]));
    let want = f64s(&[2, 3], [a.map(|v| 2.0 * v), b.map(|v| -0.5 * v)].concat());
    assert_near(&got, &want, 1e-15, "reference gradient");
    let f = function(&[x, w], &[g]).compile().unwrap();
    let got = f.call(&[(&vx).into(), (&vw).into()]).unwrap().remove(0);
    assert_near(&got, &want, 1e-15, "compiled gradient");
}

/// Special values mixed into the property test's inputs.
const SPECIAL: [f64; 6] = [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1e3, -1e3, 0.0];

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// JIT (FAST_RUN and no rewriting) against the reference on random
    /// shapes (empty ones included), axes, dtypes and inputs with specials:
    /// NaN where NaN, equal infinities, and finite values within the
    /// bound of `differential_support/exact.rs` for the op (f64 sums of `n`
    /// 1-ULP exps in another order, then `ln s + m`, one rounding).
    #[test]
    fn random_lanes_match_the_reference(
        shape in proptest::collection::vec(prop_oneof![0..4usize, 30..70usize], 1..4),
        axis_pick in 0..4usize,
        f32 in any::<bool>(),
        seed in any::<u64>(),
        specials in 0..4usize,
    ) {
        let dtype = if f32 { DType::F32 } else { DType::F64 };
        let x = tensor("X", dtype, &vec![None; shape.len()]);
        let axis = (axis_pick < shape.len()).then_some(axis_pick);
        let n: usize = shape.iter().product();
        let mut state = seed | 1;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let data: Vec<f64> = (0..n)
            .map(|_| {
                let r = next();
                if (r % 97) < specials as u64 {
                    SPECIAL[(r >> 8) as usize % SPECIAL.len()]
                } else {
                    ((r >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 80.0
                }
            })
            .collect();
        let v = f64s(&shape, data).cast(dtype);
        let axes: Option<Vec<isize>> = axis.map(|a| vec![a as isize]);
        let y = x.logsumexp(axes.as_deref(), false).unwrap();
        let want = eval1(&x, &y, &v);
        let lane = axis.map_or(n, |a| shape[a]);
        let unit = if f32 { f64::from(f32::EPSILON) / 2.0 } else { f64::EPSILON / 2.0 };
        let g64 = 2.0 * (lane + 4) as f64 * f64::EPSILON / 2.0;
        let bound = g64 * (2.0 * (lane.max(1) as f64).ln() + 2.0);
        for mode in [kiln::rewriting::Mode::none(), kiln::rewriting::Mode::fast_run()] {
            let got = jit1(&x, &y, &v, mode);
            prop_assert_eq!(got.dtype(), want.dtype());
            prop_assert_eq!(got.shape(), want.shape());
            let (g, w) = (got.to_f64_array(), want.to_f64_array());
            for (&a, &b) in g.iter().zip(w.iter()) {
                let ok = if a.is_nan() || b.is_nan() {
                    a.is_nan() && b.is_nan()
                } else if a.is_infinite() || b.is_infinite() {
                    a == b
                } else {
                    (a - b).abs() <= bound + 2.0 * unit * b.abs()
                };
                prop_assert!(ok, "{:?} axis {:?}: compiled {:e}, reference {:e}", shape, axis, a, b);
            }
        }
    }
}
