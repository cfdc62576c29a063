//! `kiln eval`: .npy round trips for several dtypes, the summary, the
//! stabilised softplus at ±800, profiles, `A @ B` of 3-d operands.
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
fn unsigned_npy_round_trips_keep_u64_max_exactly() {
    let m = u64::MAX;
    for mode in ["none", "fast_run"] {
        let r: ArrayD<u64> = eval_one("x", arr(vec![0u64, m, 1 << 63]), mode);
        assert_eq!(r, arr(vec![0u64, m, 1 << 63]));
        let r: ArrayD<u64> = eval_one("x // 3 + (x > 9223372036854775807)", arr(vec![m, 5]), mode);
        assert_eq!(r, arr(vec![m / 3 + 1, 1]));
        let r: ArrayD<u64> = eval_one("sum(x)", arr(vec![u32::MAX, u32::MAX]), mode);
        assert_eq!(r, ndarray::arr0(2 * u32::MAX as u64).into_dyn());
        let r: ArrayD<u16> = eval_one("x - 1", arr(vec![0u16, 7]), mode);
        assert_eq!(r, arr(vec![u16::MAX, 6]));
    }
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

/// Evaluates `a @ b` from two .npy files under `mode`.
fn matmul_of(a: &ArrayD<f64>, b: &ArrayD<f64>, mode: &str) -> ArrayD<f64> {
    let dir = tempfile::tempdir().unwrap();
    let (ap, bp) = (save(dir.path(), "A", a), save(dir.path(), "B", b));
    let out = dir.path().join("o.npy");
    let text = stdout_of(
        kiln()
            .args(["eval", "A @ B", "--mode", mode, "--in"])
            .arg(input("A", &ap))
            .arg("--in")
            .arg(input("B", &bp))
            .arg("--out")
            .arg(&out),
    );
    assert!(text.starts_with("wrote "), "{text}");
    load(&out)
}

/// numpy's `matmul` of stacks, written out: `a` is `(..., m, k)`, `b` is
/// `(..., k, n)` with batch dimensions of equal size or size 1.
fn matmul_by_hand(a: &ArrayD<f64>, b: &ArrayD<f64>) -> ArrayD<f64> {
    let (na, nb) = (a.ndim(), b.ndim());
    let nd = na.max(nb);
    let pad = |s: &[usize]| {
        let mut p = vec![1; nd - s.len()];
        p.extend_from_slice(s);
        p
    };
    let (sa, sb) = (pad(a.shape()), pad(b.shape()));
    let a = a.view().into_shape_with_order(IxDyn(&sa)).unwrap();
    let b = b.view().into_shape_with_order(IxDyn(&sb)).unwrap();
    let mut shape: Vec<usize> = (0..nd - 2).map(|d| sa[d].max(sb[d])).collect();
    let (m, k, n) = (sa[nd - 2], sa[nd - 1], sb[nd - 1]);
    shape.extend([m, n]);
    ArrayD::from_shape_fn(IxDyn(&shape), |ix| {
        let pick = |s: &[usize], d: usize| if s[d] == 1 { 0 } else { ix[d] };
        (0..k)
            .map(|l| {
                let mut ia: Vec<usize> = (0..nd - 2).map(|d| pick(&sa, d)).collect();
                let mut ib: Vec<usize> = (0..nd - 2).map(|d| pick(&sb, d)).collect();
                ia.extend([ix[nd - 2], l]);
                ib.extend([l, ix[nd - 1]]);
                a[IxDyn(&ia)] * b[IxDyn(&ib)]
            })
            .sum()
    })
}

/// `kiln eval "A @ B"` with 3-d .npy operands (issue 14): stacks of equal
/// batches, a matrix shared by every batch, a batch of size 1 broadcast
/// (the .npy's static shape makes it broadcastable), operands of 4 and 3
/// dimensions; batch dimensions that differ are a clear error.
#[test]
fn batched_matmul_of_3d_npy_inputs() {
    let t = |shape: &[usize], seed: f64| {
        let k: usize = shape.iter().product();
        let d: Vec<f64> = (0..k).map(|i| ((i as f64 + seed) * 0.37).sin()).collect();
        ArrayD::from_shape_vec(IxDyn(shape), d).unwrap()
    };
    let cases: &[(&[usize], &[usize])] = &[
        (&[3, 2, 4], &[3, 4, 5]),
        (&[3, 2, 4], &[4, 5]),
        (&[2, 4], &[3, 4, 5]),
        (&[3, 2, 4], &[1, 4, 5]),
        (&[1, 2, 4], &[1, 4, 5]),
        (&[2, 1, 2, 4], &[3, 4, 2]),
    ];
    for &(sa, sb) in cases {
        let (a, b) = (t(sa, 0.5), t(sb, 2.0));
        let want = matmul_by_hand(&a, &b);
        for mode in ["none", "fast_run"] {
            let got = matmul_of(&a, &b, mode);
            assert_eq!(got.shape(), want.shape(), "{sa:?} @ {sb:?} in {mode}");
            for (g, w) in got.iter().zip(want.iter()) {
                assert!(
                    (g - w).abs() <= 1e-12,
                    "{sa:?} @ {sb:?} in {mode}: {g} vs {w}"
                );
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let a = save(dir.path(), "A", &t(&[2, 2, 4], 0.0));
    let b = save(dir.path(), "B", &t(&[3, 4, 2], 0.0));
    let out = kiln()
        .args(["eval", "A @ B", "--in"])
        .arg(input("A", &a))
        .arg("--in")
        .arg(input("B", &b))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("batch dimensions differ: 2 and 3"), "{err}");
}
