//! `var` and `std` (numpy's, built from `mean`): the expression language
//! (`axis=`, `keepdims=`, `ddof=`, rejected keywords), values compiled
//! under FAST_RUN and as built against a closed form on random data, the
//! two-pass accuracy on data far from zero, integer and `f32` inputs, a
//! count at most `ddof`, and the gradient.

use std::collections::HashMap;

use kiln::eval::evaluate;
use kiln::rewriting::Mode;
use kiln::*;
use ndarray::{ArrayD, IxDyn};

fn f64s(shape: &[usize], v: Vec<f64>) -> Value {
    Value::F64(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
}

/// `src` over the one input `X` (`dtype`, rank 2, sizes unknown).
fn build(src: &str, dtype: DType) -> (Tensor, Tensor) {
    let x = tensor("X", dtype, &[None, None]);
    let vars = HashMap::from([("X".to_string(), x.clone())]);
    (x.clone(), build_expression(src, &vars).unwrap())
}

/// `src` at `v`: compiled under `mode`, and by the reference evaluator.
fn run(src: &str, v: &Value, mode: Mode) -> (Value, Value) {
    let (x, y) = build(src, v.dtype());
    let fg = FunctionGraph::new(std::slice::from_ref(&x), std::slice::from_ref(&y)).unwrap();
    let want = evaluate(&fg, std::slice::from_ref(v)).unwrap().remove(0);
    let f = function(std::slice::from_ref(&x), std::slice::from_ref(&y))
        .mode(mode)
        .compile()
        .unwrap();
    (f.call(&[v.into()]).unwrap().remove(0), want)
}

/// The variance of `lane` with `ddof`, in long form: the mean first, then
/// the squared deviations.
fn var_of(lane: &[f64], ddof: usize) -> f64 {
    let n = lane.len() as f64;
    let m = lane.iter().sum::<f64>() / n;
    lane.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - ddof as f64)
}

/// The rows (`axis` 1) or columns (`axis` 0) of a row-major `r x c` array.
fn lanes(v: &[f64], r: usize, c: usize, axis: usize) -> Vec<Vec<f64>> {
    if axis == 1 {
        v.chunks(c).map(<[f64]>::to_vec).collect()
    } else {
        (0..c)
            .map(|j| (0..r).map(|i| v[i * c + j]).collect())
            .collect()
    }
}

fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, (&a, &b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= tol * b.abs(),
            "{what}: element {k}: got {a:e}, want {b:e}"
        );
    }
}

fn values(v: &Value) -> Vec<f64> {
    v.to_f64_array().iter().copied().collect()
}

#[test]
fn values_match_the_long_form_over_every_axis_and_ddof() {
    let (r, c) = (37, 300);
    let mut s = 11u64;
    let data: Vec<f64> = (0..r * c)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64 * 10.0 - 3.0
        })
        .collect();
    let v = f64s(&[r, c], data.clone());
    for mode in [Mode::fast_run(), Mode::none()] {
        for ddof in [0usize, 1, 2] {
            let all = var_of(&data, ddof);
            let (got, want) = run(&format!("var(X, ddof={ddof})"), &v, mode.clone());
            assert_eq!(got.shape(), &[] as &[usize]);
            assert_close(&values(&got), &[all], 1e-12, "var(X)");
            assert_close(&values(&want), &[all], 1e-12, "var(X), reference");
            let (got, _) = run(&format!("std(X, ddof={ddof})"), &v, mode.clone());
            assert_close(&values(&got), &[all.sqrt()], 1e-12, "std(X)");
            for axis in [0usize, 1] {
                let lane_vars: Vec<f64> = lanes(&data, r, c, axis)
                    .iter()
                    .map(|l| var_of(l, ddof))
                    .collect();
                let src = format!("var(X, axis={axis}, ddof={ddof})");
                let (got, want) = run(&src, &v, mode.clone());
                assert_eq!(got.shape(), &[if axis == 0 { c } else { r }]);
                assert_close(&values(&got), &lane_vars, 1e-12, &src);
                assert_close(&values(&want), &lane_vars, 1e-12, &src);
                let src = format!("std(X, axis={axis}, keepdims=True, ddof={ddof})");
                let (got, _) = run(&src, &v, mode.clone());
                let kept = if axis == 0 { vec![1, c] } else { vec![r, 1] };
                assert_eq!(got.shape(), &kept[..]);
                let sds: Vec<f64> = lane_vars.iter().map(|v| v.sqrt()).collect();
                assert_close(&values(&got), &sds, 1e-12, &src);
            }
        }
    }
}

#[test]
fn two_passes_keep_the_variance_of_data_far_from_zero() {
    // E[x²] - E[x]² would cancel every digit here: 1e16 against 2/3.
    let v = f64s(&[1, 3], vec![1e8 + 1.0, 1e8 + 2.0, 1e8 + 3.0]);
    let (got, _) = run("var(X)", &v, Mode::fast_run());
    assert_close(&values(&got), &[2.0 / 3.0], 1e-15, "var far from zero");
    let (got, _) = run("std(X, ddof=1)", &v, Mode::fast_run());
    assert_close(&values(&got), &[1.0], 1e-15, "std far from zero");
}

#[test]
fn integer_inputs_give_f64_and_f32_inputs_f32() {
    let ints = Value::I32(ArrayD::from_shape_vec(IxDyn(&[2, 2]), vec![1, 2, 3, 5]).unwrap());
    let (got, want) = run("var(X, axis=0)", &ints, Mode::fast_run());
    assert_eq!(got.dtype(), DType::F64);
    assert_eq!(want.dtype(), DType::F64);
    assert_close(&values(&got), &[1.0, 2.25], 1e-15, "int var");
    let floats =
        Value::F32(ArrayD::from_shape_vec(IxDyn(&[1, 4]), vec![1.0f32, 2.0, 4.0, 7.0]).unwrap());
    let (got, want) = run("std(X, axis=1, ddof=1)", &floats, Mode::fast_run());
    assert_eq!(got.dtype(), DType::F32);
    assert_eq!(want.dtype(), DType::F32);
    // mean 3.5, squared deviations 6.25 + 2.25 + 0.25 + 12.25 = 21, / 3.
    assert_close(&values(&got), &[7.0f64.sqrt()], 1e-6, "f32 std");
}

#[test]
fn a_count_at_most_ddof_divides_as_numpy() {
    // numpy: var([1, 2], ddof=2) is inf (21 / 0), var([3, 3], ddof=2) NaN
    // (0 / 0), var([1, 2], ddof=3) negative (0.5 / -1).
    let v = f64s(&[2, 2], vec![1.0, 2.0, 3.0, 3.0]);
    let (got, want) = run("var(X, axis=1, ddof=2)", &v, Mode::fast_run());
    for g in [&got, &want] {
        let g = values(g);
        assert_eq!(g[0], f64::INFINITY);
        assert!(g[1].is_nan(), "{g:?}");
    }
    let (got, _) = run("var(X, axis=1, ddof=3)", &v, Mode::fast_run());
    assert_eq!(values(&got)[0], -0.5);
}

#[test]
fn expression_language_keywords_and_errors() {
    let x = tensor("X", DType::F64, &[None, None]);
    let vars = HashMap::from([("X".to_string(), x.clone())]);
    let err = |src: &str| build_expression(src, &vars).unwrap_err().to_string();
    let e = err("var(X, ddof=-1)");
    assert!(e.contains("ddof= must be a non-negative integer"), "{e}");
    let e = err("std(X, ddof=1.5)");
    assert!(e.contains("ddof= must be a non-negative integer"), "{e}");
    let e = err("var(X, ddof=1, ddof=2)");
    assert!(e.contains("got keyword argument 'ddof' twice"), "{e}");
    let e = err("sum(X, ddof=1)");
    assert!(
        e.contains("unexpected keyword argument 'ddof'; expected axis= or keepdims="),
        "{e}"
    );
    let e = err("var(X, dof=1)");
    assert!(e.contains("expected axis=, keepdims= or ddof="), "{e}");
    let e = err("var(X, axis=2)");
    assert!(e.contains("out of range"), "{e}");
}

#[test]
fn gradient_of_the_variance() {
    // d/dx var(x) = 2 (x - mean(x)) / n (the mean's own derivative
    // cancels: the deviations sum to zero).
    let (x, y) = build("var(X)", DType::F64);
    let g = kiln::gradient::grad(&y, std::slice::from_ref(&x))
        .unwrap()
        .remove(0);
    let f = function(std::slice::from_ref(&x), std::slice::from_ref(&g))
        .compile()
        .unwrap();
    let data = vec![1.0, 4.0, 2.0, 9.0, -3.0, 5.0];
    let got = f.call(&[(&f64s(&[2, 3], data.clone())).into()]).unwrap();
    let m = data.iter().sum::<f64>() / 6.0;
    let want: Vec<f64> = data.iter().map(|v| 2.0 * (v - m) / 6.0).collect();
    assert_close(&values(&got[0]), &want, 1e-14, "grad var");
}
