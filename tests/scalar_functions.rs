//! The scalar functions numexpr and numpy users expect (`isnan`, `isinf`,
//! `isfinite`, `trunc`, `arctan2`, `hypot`, `copysign`, `fmod`, `<<`, `>>`,
//! `^`): values against numpy's documented behaviour (NaN, ±inf, -0.0,
//! subnormals, shifts by at least the bit width and by negative counts),
//! dtypes, rejected inputs, and the reference evaluator, the JIT without
//! rewrites and the JIT under FAST_RUN agreeing bit for bit.
mod common;

use std::collections::HashMap;

use common::val;
use kiln::graph::print::pprint_outputs;
use kiln::rewriting::Mode;
use kiln::{build_expression, function, tensor, DType, FunctionGraph, Tensor, Value};

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;
const TINY: f64 = 5e-324;

/// The inputs `x`, `y`, ... of `vals`, declared with their dtypes and ranks
/// (dimensions of size 1 static, so that they broadcast).
fn declare(vals: &[Value]) -> (Vec<Tensor>, HashMap<String, Tensor>) {
    let names = ["x", "y", "z"];
    let ins: Vec<Tensor> = vals
        .iter()
        .zip(names)
        .map(|(v, n)| {
            let shape: Vec<Option<usize>> =
                v.shape().iter().map(|&d| (d == 1).then_some(1)).collect();
            tensor(n, v.dtype(), &shape)
        })
        .collect();
    let vars = ins
        .iter()
        .zip(names)
        .map(|(t, n)| (n.to_string(), t.clone()))
        .collect();
    (ins, vars)
}

/// Bitwise equality of two values (dtype, shape, bits; NaN equals NaN).
fn same(a: &Value, b: &Value) -> bool {
    if a.dtype() != b.dtype() || a.shape() != b.shape() {
        return false;
    }
    if a.dtype().is_float() {
        let (a, b) = (a.to_f64_array(), b.to_f64_array());
        a.iter()
            .zip(b.iter())
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
    } else {
        a.to_i64_array() == b.to_i64_array()
    }
}

/// `src` over `vals` (named x, y, z): the reference value, after checking
/// that the JIT (mode none and FAST_RUN) computes it bit for bit.
fn run(src: &str, vals: &[Value]) -> Value {
    let (ins, vars) = declare(vals);
    let out = build_expression(src, &vars).unwrap_or_else(|e| panic!("{src}: {e}"));
    let fg = FunctionGraph::new(&ins, std::slice::from_ref(&out)).unwrap();
    let want = kiln::eval::evaluate(&fg, vals).unwrap().remove(0);
    let args: Vec<kiln::linker::Arg<'_>> = vals.iter().map(|v| v.into()).collect();
    for (name, mode) in [("none", Mode::none()), ("FAST_RUN", Mode::fast_run())] {
        let f = function(&ins, std::slice::from_ref(&out))
            .mode(mode)
            .compile()
            .unwrap_or_else(|e| panic!("{src} ({name}): {e}"));
        let got = f.call(&args).unwrap().remove(0);
        assert!(
            same(&got, &want),
            "{src} ({name}): JIT {got:?} reference {want:?}"
        );
    }
    want
}

/// The error message of building `src` over `vals`.
fn build_error(src: &str, vals: &[Value]) -> String {
    let (_, vars) = declare(vals);
    build_expression(src, &vars)
        .map(|_| ())
        .expect_err(src)
        .to_string()
}

fn f64v(x: &[f64]) -> Value {
    val(&[x.len()], x.to_vec())
}

fn f32v(x: &[f32]) -> Value {
    val(&[x.len()], x.to_vec())
}

fn i64v(x: &[i64]) -> Value {
    val(&[x.len()], x.to_vec())
}

fn i8v(x: &[i8]) -> Value {
    val(&[x.len()], x.to_vec())
}

fn u8v(x: &[u8]) -> Value {
    val(&[x.len()], x.to_vec())
}

fn boolv(x: &[bool]) -> Value {
    val(&[x.len()], x.to_vec())
}

fn bits(v: &Value) -> Vec<u64> {
    v.to_f64_array().iter().map(|x| x.to_bits()).collect()
}

fn ints(v: &Value) -> Vec<i64> {
    v.to_i64_array().iter().copied().collect()
}

/// Asserts `v` has dtype `dtype` and exactly these float elements (bits: -0.0 and NaN count).
fn assert_floats(v: &Value, dtype: DType, want: &[f64]) {
    assert_eq!(v.dtype(), dtype);
    let got = v.to_f64_array();
    for (g, w) in got.iter().zip(want) {
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "got {got:?}, want {want:?}"
        );
    }
    assert_eq!(got.len(), want.len());
}

fn assert_ints(v: &Value, dtype: DType, want: &[i64]) {
    assert_eq!(v.dtype(), dtype);
    assert_eq!(ints(v), want);
}

const SPECIALS: [f64; 9] = [NAN, INF, -INF, 0.0, -0.0, 1.5, TINY, -TINY, f64::MAX];

#[test]
fn classification_of_floats() {
    let x = f64v(&SPECIALS);
    let nan = [1, 0, 0, 0, 0, 0, 0, 0, 0];
    let inf = [0, 1, 1, 0, 0, 0, 0, 0, 0];
    let fin = [0, 0, 0, 1, 1, 1, 1, 1, 1];
    assert_ints(
        &run("isnan(x)", std::slice::from_ref(&x)),
        DType::Bool,
        &nan,
    );
    assert_ints(
        &run("isinf(x)", std::slice::from_ref(&x)),
        DType::Bool,
        &inf,
    );
    assert_ints(&run("isfinite(x)", &[x]), DType::Bool, &fin);
    let x = f32v(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, 1e-45]);
    assert_ints(
        &run("isnan(x)", std::slice::from_ref(&x)),
        DType::Bool,
        &[1, 0, 0, 0, 0],
    );
    assert_ints(
        &run("isinf(x)", std::slice::from_ref(&x)),
        DType::Bool,
        &[0, 1, 1, 0, 0],
    );
    assert_ints(&run("isfinite(x)", &[x]), DType::Bool, &[0, 0, 0, 1, 1]);
}

#[test]
fn classification_of_integers_and_bools() {
    for x in [i64v(&[i64::MIN, 0, i64::MAX]), i8v(&[-128, 0, 127])] {
        assert_ints(
            &run("isnan(x)", std::slice::from_ref(&x)),
            DType::Bool,
            &[0, 0, 0],
        );
        assert_ints(
            &run("isinf(x)", std::slice::from_ref(&x)),
            DType::Bool,
            &[0, 0, 0],
        );
        assert_ints(&run("isfinite(x)", &[x]), DType::Bool, &[1, 1, 1]);
    }
    let b = boolv(&[true, false]);
    assert_ints(
        &run("isnan(x)", std::slice::from_ref(&b)),
        DType::Bool,
        &[0, 0],
    );
    assert_ints(&run("isfinite(x)", &[b]), DType::Bool, &[1, 1]);
}

#[test]
fn classification_of_integers_is_folded_by_fast_run() {
    let (ins, vars) = declare(&[i64v(&[1])]);
    for (src, want) in [
        ("isnan(x)", "False"),
        ("isinf(x)", "False"),
        ("isfinite(x)", "True"),
    ] {
        let out = build_expression(src, &vars).unwrap();
        let f = function(&ins, &[out]).compile().unwrap();
        let printed = pprint_outputs(f.graph());
        assert!(
            !printed.contains(&src[..5]) && printed.contains(want),
            "{src}: {printed}"
        );
    }
    // A float input keeps its test.
    let (ins, vars) = declare(&[f64v(&[1.0])]);
    let out = build_expression("isnan(x)", &vars).unwrap();
    let f = function(&ins, &[out]).compile().unwrap();
    assert!(pprint_outputs(f.graph()).contains("isnan"));
}

#[test]
fn trunc_rounds_toward_zero_and_keeps_integer_dtypes() {
    let x = f64v(&[
        -0.5,
        2.7,
        -2.7,
        INF,
        -INF,
        NAN,
        TINY,
        -TINY,
        4503599627370497.0,
    ]);
    let want = [
        -0.0,
        2.0,
        -2.0,
        INF,
        -INF,
        NAN,
        0.0,
        -0.0,
        4503599627370497.0,
    ];
    assert_floats(&run("trunc(x)", &[x]), DType::F64, &want);
    assert_floats(
        &run("trunc(x)", &[f32v(&[-1.5, 0.25])]),
        DType::F32,
        &[-1.0, 0.0],
    );
    assert_ints(&run("trunc(x)", &[i8v(&[-128, 5])]), DType::I8, &[-128, 5]);
    assert_ints(&run("trunc(x)", &[boolv(&[true])]), DType::Bool, &[1]);
}

#[test]
fn arctan2_follows_c99_at_zeros_and_infinities() {
    let pi = std::f64::consts::PI;
    let y = f64v(&[0.0, -0.0, 0.0, -0.0, 1.0, INF, -INF, 1.0, NAN, 1.0]);
    let x = f64v(&[-0.0, -0.0, 0.0, 0.0, INF, INF, -INF, 0.0, 1.0, -1.0]);
    let want = [
        pi,
        -pi,
        0.0,
        -0.0,
        0.0,
        pi / 4.0,
        -3.0 * pi / 4.0,
        pi / 2.0,
        NAN,
        3.0 * pi / 4.0,
    ];
    assert_floats(&run("arctan2(x, y)", &[y, x]), DType::F64, &want);
    // numpy: integers give floats (kiln: i16 -> f32, i64 -> f64).
    let v = run(
        "arctan2(x, y)",
        &[val(&[1], vec![1i16]), val(&[1], vec![1i16])],
    );
    assert_eq!(v.dtype(), DType::F32);
    let v = run("arctan2(x, y)", &[i64v(&[-1]), i64v(&[0])]);
    assert_floats(&v, DType::F64, &[-pi / 2.0]);
}

#[test]
fn hypot_avoids_overflow_and_prefers_infinity_to_nan() {
    let a = f64v(&[3.0, INF, NAN, 1e300, TINY, -5.0, -0.0]);
    let b = f64v(&[4.0, NAN, -INF, 1e300, TINY, 12.0, 0.0]);
    let got = run("hypot(x, y)", &[a, b]);
    assert_eq!(got.dtype(), DType::F64);
    let g = got.to_f64_array();
    assert_eq!(g[0], 5.0);
    assert_eq!(g[1], INF);
    assert_eq!(g[2], INF);
    assert!((g[3] / (1e300 * std::f64::consts::SQRT_2) - 1.0).abs() < 1e-15);
    assert!(g[4] > 0.0 && g[4] < 1e-320);
    assert_eq!(g[5], 13.0);
    assert_eq!(g[6].to_bits(), 0.0f64.to_bits());
    let v = run("hypot(x, y)", &[i64v(&[6]), i64v(&[8])]);
    assert_floats(&v, DType::F64, &[10.0]);
}

#[test]
fn copysign_takes_the_sign_bit() {
    let a = f64v(&[3.0, 3.0, 3.0, -INF, NAN, -0.0, TINY]);
    let b = f64v(&[-0.0, NAN, -NAN, 1.0, -1.0, 0.0, -2.0]);
    let got = run("copysign(x, y)", &[a, b]);
    let want = [-3.0, 3.0, -3.0, INF, -NAN, 0.0, -TINY];
    assert_eq!(got.dtype(), DType::F64);
    // The sign of the NaN counts too (numpy: copysign(nan, -1) is -nan).
    assert_eq!(
        bits(&got)[..4],
        want[..4].iter().map(|x| x.to_bits()).collect::<Vec<_>>()[..]
    );
    assert!(got.to_f64_array()[4].is_nan() && got.to_f64_array()[4].is_sign_negative());
    assert_eq!(bits(&got)[5..], [0.0f64.to_bits(), (-TINY).to_bits()]);
    let v = run("copysign(x, y)", &[i64v(&[1, -2]), i64v(&[-2, 0])]);
    assert_floats(&v, DType::F64, &[-1.0, 2.0]);
}

#[test]
fn fmod_of_floats_has_the_sign_of_the_dividend() {
    let a = f64v(&[-7.5, 7.5, -0.0, 5.0, INF, 1.0, -1.0, NAN, 3.0 * TINY]);
    let b = f64v(&[2.0, -2.0, 1.0, 0.0, 1.0, INF, -INF, 1.0, 2.0 * TINY]);
    let want = [-1.5, 1.5, -0.0, NAN, NAN, 1.0, -1.0, NAN, TINY];
    assert_floats(&run("fmod(x, y)", &[a, b]), DType::F64, &want);
    // Unlike `%` (numpy mod, the sign of the divisor).
    assert_floats(
        &run("x % y", &[f64v(&[-7.5]), f64v(&[2.0])]),
        DType::F64,
        &[0.5],
    );
}

#[test]
fn fmod_of_integers_truncates_and_gives_zero_for_a_zero_divisor() {
    let a = i64v(&[-7, 7, 7, i64::MIN, -7, 0]);
    let b = i64v(&[2, -2, 0, -1, -7, 3]);
    assert_ints(
        &run("fmod(x, y)", &[a, b]),
        DType::I64,
        &[-1, 1, 0, 0, 0, 0],
    );
    assert_ints(
        &run("fmod(x, y)", &[i8v(&[-128, -128]), i8v(&[-1, 3])]),
        DType::I8,
        &[0, -2],
    );
    // numpy computes fmod of bools in int8.
    assert_ints(
        &run("fmod(x, y)", &[boolv(&[true, true]), boolv(&[true, false])]),
        DType::I8,
        &[0, 0],
    );
}

#[test]
fn shifts_follow_numpy_beyond_the_bit_width() {
    let a = i64v(&[1, 1, 3, 1, -5, -5, 5, -5, 5]);
    let n = i64v(&[63, 64, -1, 1000, 1, 64, 100, -1, -1]);
    assert_ints(
        &run("x << y", &[a.clone(), n.clone()]),
        DType::I64,
        &[i64::MIN, 0, 0, 0, -10, 0, 0, 0, 0],
    );
    assert_ints(
        &run("x >> y", &[a, n]),
        DType::I64,
        &[0, 0, 0, 0, -3, -1, 0, -1, 0],
    );
    // Narrow dtypes: numpy computes in their width.
    let a = i8v(&[1, 1, -3, -3, 100]);
    let n = i8v(&[7, 8, 9, -1, 1]);
    assert_ints(
        &run("x << y", &[a.clone(), n.clone()]),
        DType::I8,
        &[-128, 0, 0, 0, -56],
    );
    assert_ints(&run("x >> y", &[a, n]), DType::I8, &[0, 0, -1, -1, 50]);
    let a = u8v(&[200, 200, 255]);
    let n = u8v(&[1, 9, 7]);
    assert_ints(
        &run("x << y", &[a.clone(), n.clone()]),
        DType::U8,
        &[144, 0, 128],
    );
    assert_ints(&run("x >> y", &[a, n]), DType::U8, &[100, 0, 1]);
    // numpy: bool shifts compute in int8; mixed dtypes upcast.
    assert_ints(
        &run("x << y", &[boolv(&[true]), boolv(&[true])]),
        DType::I8,
        &[2],
    );
    assert_eq!(run("x << y", &[u8v(&[3]), i8v(&[2])]).dtype(), DType::I16);
}

#[test]
fn xor_is_logical_on_bools_and_bitwise_on_integers() {
    let a = boolv(&[true, true, false, false]);
    let b = boolv(&[true, false, true, false]);
    assert_ints(&run("x ^ y", &[a, b]), DType::Bool, &[0, 1, 1, 0]);
    assert_ints(
        &run("x ^ y", &[i64v(&[6, -1]), i64v(&[3, 5])]),
        DType::I64,
        &[5, -6],
    );
}

#[test]
fn operator_precedence() {
    let v = [i64v(&[6]), i64v(&[3]), i64v(&[5])];
    // `|` < `^` < `&` < comparisons < shifts < `+ -`.
    assert_ints(&run("x ^ y & z", &v), DType::I64, &[6 ^ (3 & 5)]);
    assert_ints(&run("x | y ^ z", &v), DType::I64, &[6 | (3 ^ 5)]);
    assert_ints(&run("x << y + 1", &v), DType::I64, &[6 << 4]);
    assert_ints(&run("x >> 1 << y", &v), DType::I64, &[(6 >> 1) << 3]);
    assert_ints(&run("(x << 1) > y", &v), DType::Bool, &[1]);
    assert_ints(&run("x << 1 > y", &v), DType::Bool, &[1]);
}

#[test]
fn rejected_inputs_are_clear_errors() {
    let f = [f64v(&[1.0]), f64v(&[2.0])];
    assert!(
        build_error("x ^ y", &f).contains("xor: is defined for bool and integer inputs only"),
        "{}",
        build_error("x ^ y", &f)
    );
    assert!(build_error("x << y", &f).contains("left_shift: is defined for bool and integer"));
    assert!(build_error("x >> 2", &f).contains("right_shift: is defined for bool and integer"));
    let e = build_error("fmod(x)", &f);
    assert!(e.contains("fmod"), "{e}");
    let e = build_error("isnan(x, y)", &f);
    assert!(e.contains("isnan"), "{e}");
}

#[test]
fn broadcasting_and_empty_inputs() {
    let m = val(&[2, 3], vec![1.0, -2.0, 3.0, -4.0, 5.0, -6.0]);
    let r = val(&[1, 3], vec![2.0, -0.0, NAN]);
    let got = run("copysign(x, y)", &[m.clone(), r.clone()]);
    assert_eq!(got.shape(), &[2, 3]);
    assert_floats(&got, DType::F64, &[1.0, -2.0, 3.0, 4.0, -5.0, 6.0]);
    let got = run("hypot(x, y)", &[m, r]);
    assert_eq!(got.shape(), &[2, 3]);
    let e = val(&[0], Vec::<f64>::new());
    assert_eq!(run("arctan2(x, y)", &[e.clone(), e.clone()]).shape(), &[0]);
    assert_eq!(run("isnan(x)", &[e]).shape(), &[0]);
}
