//! `kiln eval`: .npy round trips for several dtypes, the summary, the
//! stabilised softplus at ±800, profiles.
mod cli_support;

use cli_support::*;
use ndarray::{ArrayD, IxDyn};

fn arr<T: Clone>(v: Vec<T>) -> ArrayD<T> {
    ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).unwrap()
}

/// Evaluates `expr` on one input `x` and reads the output as `U`.
fn eval_one<T, U>(expr: &str, x: ArrayD<T>, mode: &str) -> ArrayD<U>
where
    ArrayD<T>: ndarray_npy::WriteNpyExt,
    ArrayD<U>: ndarray_npy::ReadNpyExt,
{
    let dir = tempfile::tempdir().unwrap();
    let xp = save(dir.path(), "x", &x);
    let out = dir.path().join("out.npy");
    let text = stdout_of(
        kiln()
            .args(["eval", expr, "--mode", mode, "--in"])
            .arg(input("x", &xp))
            .arg("--out")
            .arg(&out),
    );
    assert!(text.starts_with("wrote "), "{text}");
    load::<U>(&out)
}

#[test]
fn round_trips_keep_the_dtype() {
    let r: ArrayD<i16> = eval_one("x * 2", arr(vec![-3i16, 0, 1000]), "fast_run");
    assert_eq!(r, arr(vec![-6i16, 0, 2000]));
    let r: ArrayD<u8> = eval_one("x + 1", arr(vec![0u8, 254, 255]), "none");
    assert_eq!(r, arr(vec![1u8, 255, 0]));
    let r: ArrayD<i8> = eval_one("-x", arr(vec![-5i8, 7]), "fast_compile");
    assert_eq!(r, arr(vec![5i8, -7]));
    let r: ArrayD<i32> = eval_one("x // 2", arr(vec![-3i32, 5]), "fast_run");
    assert_eq!(r, arr(vec![-2i32, 2]));
    let r: ArrayD<i64> = eval_one("x % 3", arr(vec![-1i64, 7]), "fast_run");
    assert_eq!(r, arr(vec![2i64, 1]));
    let r: ArrayD<f32> = eval_one("x * 2", arr(vec![0.25f32, -1.5]), "fast_run");
    assert_eq!(r, arr(vec![0.5f32, -3.0]));
    let r: ArrayD<f64> = eval_one("sqrt(x)", arr(vec![4.0f64, 9.0]), "none");
    assert_eq!(r, arr(vec![2.0, 3.0]));
    let r: ArrayD<bool> = eval_one("~x", arr(vec![true, false]), "fast_run");
    assert_eq!(r, arr(vec![false, true]));
    let r: ArrayD<bool> = eval_one("x > 0", arr(vec![-1.0f64, 2.0]), "fast_run");
    assert_eq!(r, arr(vec![false, true]));
    // A 2-d input keeps its shape; a reduction gives a 0-d array.
    let m = ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let r: ArrayD<f64> = eval_one("sum(x, axis=1)", m.clone(), "fast_run");
    assert_eq!(r, arr(vec![6.0, 15.0]));
    let r: ArrayD<f64> = eval_one("x.T", m, "fast_run");
    assert_eq!(r.shape(), &[3, 2]);
    assert_eq!(r[[2, 1]], 6.0);
}

#[test]
fn scalar_functions_shifts_and_xor_from_the_command_line() {
    let x = arr(vec![1i64, -5, 6, 3]);
    let r: ArrayD<i64> = eval_one("x << 62", x.clone(), "fast_run");
    assert_eq!(
        r,
        arr(vec![1i64 << 62, -(1i64 << 62), i64::MIN, -(1i64 << 62)])
    );
    let r: ArrayD<i64> = eval_one("x >> 70", x.clone(), "none");
    assert_eq!(r, arr(vec![0i64, -1, 0, 0]));
    let r: ArrayD<i64> = eval_one("x ^ 3", x.clone(), "fast_run");
    assert_eq!(r, arr(vec![2i64, -8, 5, 0]));
    let r: ArrayD<i64> = eval_one("fmod(x, 4)", x, "fast_run");
    assert_eq!(r, arr(vec![1i64, -1, 2, 3]));
    let f = arr(vec![f64::NAN, f64::INFINITY, -0.5, 2.0]);
    let r: ArrayD<bool> = eval_one("isnan(x) | isinf(x)", f.clone(), "fast_run");
    assert_eq!(r, arr(vec![true, true, false, false]));
    let r: ArrayD<f64> = eval_one("copysign(trunc(x), -1)", f.clone(), "fast_run");
    assert!(r[0].is_nan() && r[0].is_sign_negative());
    assert_eq!(
        r.slice(ndarray::s![1..]).to_vec(),
        [f64::NEG_INFINITY, -0.0, -2.0]
    );
    let r: ArrayD<f64> = eval_one("arctan2(x, -1) + hypot(x, 0)", f, "none");
    assert!(r[0].is_nan() && r[1] == f64::INFINITY);
}

#[test]
fn several_inputs_and_broadcasting() {
    let dir = tempfile::tempdir().unwrap();
    let u = save(dir.path(), "u", &arr(vec![1.0f64, 2.0]));
    let v = save(dir.path(), "v", &arr(vec![10.0f64, 20.0, 30.0]));
    let out = dir.path().join("o.npy");
    kiln()
        .args(["eval", "u[:, None] + v[None, :]", "--in"])
        .arg(input("u", &u))
        .arg("--in")
        .arg(input("v", &v))
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let r: ArrayD<f64> = load(&out);
    assert_eq!(r.shape(), &[2, 3]);
    assert_eq!(r[[1, 2]], 32.0);
}

#[test]
fn softplus_is_finite_and_correct_at_800_under_fast_run() {
    let x = arr(vec![-800.0f64, -30.0, -1.0, 0.0, 1.0, 30.0, 800.0]);
    let r: ArrayD<f64> = eval_one("log(1 + exp(x))", x.clone(), "fast_run");
    for (&xi, &yi) in x.iter().zip(r.iter()) {
        // Stable reference: max(x, 0) + log1p(exp(-|x|)).
        let want = xi.max(0.0) + (-xi.abs()).exp().ln_1p();
        assert!(yi.is_finite(), "softplus({xi}) = {yi}");
        assert!(
            (yi - want).abs() <= 1e-12 * want.abs().max(1e-300),
            "softplus({xi}) = {yi}, want {want}"
        );
    }
    assert_eq!(r[6], 800.0);
    // Without rewriting, exp overflows: the point of the stabilisation.
    let r: ArrayD<f64> = eval_one("log(1 + exp(x))", x, "none");
    assert_eq!(r[6], f64::INFINITY);
}

#[test]
fn summary_without_out() {
    let dir = tempfile::tempdir().unwrap();
    let x = save(dir.path(), "x", &arr((0..10).map(f64::from).collect()));
    let text = stdout_of(
        kiln()
            .args(["eval", "x * 2"])
            .arg("--in")
            .arg(input("x", &x)),
    );
    assert_eq!(
        text,
        "shape (10,)  dtype f64\n[0, 2, 4, ..., 14, 16, 18]\nmin 0  max 18  mean 9\n"
    );
    let text = stdout_of(
        kiln()
            .args(["eval", "x * 2", "--profile"])
            .arg("--in")
            .arg(input("x", &x)),
    );
    assert!(
        text.contains("Function profile") || text.contains("kiln eval"),
        "{text}"
    );
    assert!(text.contains("Rewriter Profile"), "{text}");
    assert!(text.contains("Run profile (one call)"), "{text}");
}
