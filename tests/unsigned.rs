//! The unsigned dtypes `u16`, `u32` and `u64`: numpy's promotion table and
//! float upgrades, weak literals (a negative one next to an unsigned tensor
//! is a type error, as numpy 2 raises), values against numpy's documented
//! behaviour (wraparound, maxima, division by zero, comparisons and
//! division above 2^63, reductions accumulating in `u64`, arg-reductions,
//! cumulative sums, gathers by unsigned indices, casts with kiln's
//! saturating rule), each computed by the reference evaluator, the JIT
//! without rewrites and the JIT under FAST_RUN bit for bit.
mod common;

use std::collections::HashMap;

use common::val;
use kiln::rewriting::Mode;
use kiln::{build_expression, function, tensor, DType, FunctionGraph, Tensor, Value};

use DType::*;

const M64: u64 = u64::MAX;
const H63: u64 = 1 << 63;

/// The inputs `x`, `y`, `z` of `vals`, declared with their dtypes and ranks.
fn declare(vals: &[Value]) -> (Vec<Tensor>, HashMap<String, Tensor>) {
    let names = ["x", "y", "z"];
    let ins: Vec<Tensor> = vals
        .iter()
        .zip(names)
        .map(|(v, n)| tensor(n, v.dtype(), &vec![None; v.ndim()]))
        .collect();
    let vars = ins
        .iter()
        .zip(names)
        .map(|(t, n)| (n.to_string(), t.clone()))
        .collect();
    (ins, vars)
}

/// Bitwise equality of dtype, shape and elements.
fn same(a: &Value, b: &Value) -> bool {
    if a.dtype() != b.dtype() || a.shape() != b.shape() {
        return false;
    }
    if a.dtype().is_float() {
        let (a, b) = (a.to_f64_array(), b.to_f64_array());
        a.iter()
            .zip(b.iter())
            .all(|(x, y)| x.to_bits() == y.to_bits())
    } else {
        a.to_i64_array() == b.to_i64_array()
    }
}

/// `src` over `vals`: the reference value, after checking that the JIT
/// (mode none and FAST_RUN) computes it bit for bit.
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

fn u64v(x: &[u64]) -> Value {
    val(&[x.len()], x.to_vec())
}

fn u32v(x: &[u32]) -> Value {
    val(&[x.len()], x.to_vec())
}

fn u16v(x: &[u16]) -> Value {
    val(&[x.len()], x.to_vec())
}

/// The elements of an integer value by their unsigned reading, and its dtype.
fn uints(v: &Value) -> (DType, Vec<u64>) {
    (v.dtype(), v.to_u64_array().iter().copied().collect())
}

fn bools(v: &Value) -> Vec<bool> {
    v.to_i64_array().iter().map(|&b| b != 0).collect()
}

#[test]
fn promotion_follows_numpy_result_type() {
    // np.result_type for every pair below (numpy 2.4).
    let table = [
        (U16, I8, I32),
        (U16, I16, I32),
        (U16, I32, I32),
        (U16, U8, U16),
        (U16, U32, U32),
        (U32, I8, I64),
        (U32, I16, I64),
        (U32, I32, I64),
        (U32, I64, I64),
        (U64, I8, F64),
        (U64, I64, F64),
        (U64, U8, U64),
        (U64, U32, U64),
        (U8, I8, I16),
        (U8, U16, U16),
        (U16, F32, F32),
        (U32, F32, F64),
        (U64, F32, F64),
        (U64, F64, F64),
        (Bool, U64, U64),
        (I16, F32, F32),
        (I32, F32, F64),
    ];
    for (a, b, want) in table {
        assert_eq!(DType::upcast(a, b), want, "{a} + {b}");
        assert_eq!(DType::upcast(b, a), want, "{b} + {a}");
    }
    // PyTensor's upgrade_to_float.
    assert_eq!(U16.upgrade_to_float(), F32);
    assert_eq!(U32.upgrade_to_float(), F64);
    assert_eq!(U64.upgrade_to_float(), F64);
    for d in [U16, U32, U64] {
        assert_eq!(DType::parse(d.name()).unwrap(), d);
        assert!(d.is_int() && d.is_unsigned() && !d.is_signed_int());
    }
    assert_eq!(DType::parse("uint32").unwrap(), U32);
    assert_eq!((U16.size_of(), U32.size_of(), U64.size_of()), (2, 4, 8));
}

#[test]
fn inferred_dtypes_of_expressions() {
    let x = u32v(&[1, 2]);
    let h = u16v(&[1, 2]);
    let ty = |src: &str, vals: &[Value]| {
        let (_, vars) = declare(vals);
        build_expression(src, &vars).unwrap().dtype()
    };
    assert_eq!(
        ty("x + 1", std::slice::from_ref(&x)),
        U32,
        "a weak literal keeps u32"
    );
    assert_eq!(ty("x * 0.5", std::slice::from_ref(&x)), F64);
    assert_eq!(ty("x / x", std::slice::from_ref(&x)), F64, "true_div");
    assert_eq!(ty("exp(x)", std::slice::from_ref(&x)), F64);
    assert_eq!(ty("exp(x)", std::slice::from_ref(&h)), F32);
    assert_eq!(
        ty("sum(x)", std::slice::from_ref(&x)),
        U64,
        "numpy sums u32 in u64"
    );
    assert_eq!(ty("sum(x)", std::slice::from_ref(&h)), U64);
    assert_eq!(ty("max(x)", std::slice::from_ref(&x)), U32);
    assert_eq!(ty("cumsum(x)", std::slice::from_ref(&h)), U64);
    assert_eq!(ty("x + y", &[x.clone(), u64v(&[1])]), U64);
}

#[test]
fn negative_literals_next_to_unsigned_tensors_are_type_errors() {
    for (src, v, d) in [
        ("x + -1", u32v(&[5]), "u32"),
        ("x - -3", u16v(&[5]), "u16"),
        ("maximum(x, -1)", u64v(&[5]), "u64"),
    ] {
        let (_, vars) = declare(std::slice::from_ref(&v));
        let e = build_expression(src, &vars).unwrap_err().to_string();
        assert!(
            e.contains("type error in constant")
                && e.contains(&format!("out of range for a {d} tensor")),
            "{src}: {e}"
        );
    }
    // Shifts and bitwise ops of u64 with a signed integer have no integer
    // result dtype (numpy: f64), as numpy refuses them.
    let (_, vars) = declare(&[u64v(&[1]), val(&[1], vec![1i64])]);
    let e = build_expression("x & y", &vars).unwrap_err().to_string();
    assert!(
        e.contains("is defined for bool and integer inputs only, got u64, i64"),
        "{e}"
    );
}

#[test]
fn u64_arithmetic_above_2_63() {
    let a = u64v(&[0, 1, H63, M64, 7]);
    let b = u64v(&[3, 0, H63 + 1, 2, 2]);
    let ab = [a.clone(), b.clone()];
    assert_eq!(uints(&run("x // y", &ab)), (U64, vec![0, 0, 0, H63 - 1, 3]));
    assert_eq!(uints(&run("x % y", &ab)), (U64, vec![0, 0, H63, 1, 1]));
    assert_eq!(uints(&run("fmod(x, y)", &ab)), (U64, vec![0, 0, H63, 1, 1]));
    assert_eq!(
        uints(&run("maximum(x, y)", &ab)),
        (U64, vec![3, 1, H63 + 1, M64, 7])
    );
    assert_eq!(
        uints(&run("minimum(x, y)", &ab)),
        (U64, vec![0, 0, H63, 2, 2])
    );
    assert_eq!(bools(&run("x < y", &ab)), [true, false, true, false, false]);
    assert_eq!(bools(&run("x >= y", &ab)), [false, true, false, true, true]);
    assert_eq!(
        uints(&run("x >> 1", std::slice::from_ref(&a))),
        (U64, vec![0, 0, H63 >> 1, H63 - 1, 3]),
        "a logical shift"
    );
    assert_eq!(
        uints(&run("x >> y", &[a.clone(), u64v(&[64, 64, 65, 63, 1])])),
        (U64, vec![0, 0, 0, 1, 3]),
        "a count of 64 or more gives 0"
    );
    assert_eq!(
        uints(&run("-x", std::slice::from_ref(&a))),
        (U64, vec![0, M64, H63, 1, M64 - 6]),
        "neg wraps"
    );
    assert_eq!(
        uints(&run("abs(x)", std::slice::from_ref(&a))).1,
        [0, 1, H63, M64, 7]
    );
    assert_eq!(
        uints(&run("sign(x)", std::slice::from_ref(&a))).1,
        [0, 1, 1, 1, 1]
    );
    assert_eq!(
        uints(&run("x ** 2", std::slice::from_ref(&a))).1,
        [0, 1, 0, 1, 49]
    );
    assert_eq!(
        uints(&run("x ** y", &[u64v(&[3, 2]), u64v(&[M64, H63])])).1,
        [uint_pow(3, M64), 0],
        "exponents above 2^63 are large, not negative"
    );
    assert_eq!(
        uints(&run(
            "clip(x, 1, 9223372036854775807) + 1",
            std::slice::from_ref(&a)
        ))
        .1,
        [2, 2, H63, H63, 8]
    );
    assert_eq!(
        uints(&run("x + 1", std::slice::from_ref(&a))).1,
        [1, 2, H63 + 1, 0, 8]
    );
}

/// `a ** b` by squaring, wrapping (numpy's integer power).
fn uint_pow(a: u64, b: u64) -> u64 {
    let (mut base, mut e, mut acc) = (a, b, 1u64);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        e >>= 1;
    }
    acc
}

#[test]
fn narrow_unsigned_wrap_and_divide_by_zero() {
    let h = u16v(&[0, 65535, 40000]);
    let w = u32v(&[0, u32::MAX, 3]);
    assert_eq!(
        uints(&run("x + 1", std::slice::from_ref(&h))),
        (U16, vec![1, 0, 40001])
    );
    assert_eq!(
        uints(&run("x * x", std::slice::from_ref(&h))),
        (U16, vec![0, 1, 4096])
    );
    assert_eq!(
        uints(&run("-x", std::slice::from_ref(&w))),
        (U32, vec![0, 1, 4294967293])
    );
    assert_eq!(
        uints(&run("x * x", std::slice::from_ref(&w))),
        (U32, vec![0, 1, 9])
    );
    assert_eq!(
        uints(&run("x // 0", std::slice::from_ref(&w))),
        (U32, vec![0, 0, 0])
    );
    assert_eq!(
        uints(&run("x % 0", std::slice::from_ref(&h))),
        (U16, vec![0, 0, 0])
    );
    assert_eq!(
        uints(&run("x >> 40", std::slice::from_ref(&w))),
        (U32, vec![0, 0, 0])
    );
    // u32 with i16 computes in i64 (numpy's result dtype), exactly.
    let s = val(&[3], vec![-1i16, 2, -3]);
    let r = run("x + y", &[w.clone(), s]);
    assert_eq!(r.dtype(), I64);
    assert_eq!(
        r.to_i64_array().iter().copied().collect::<Vec<_>>(),
        [-1, u32::MAX as i64 + 2, 0]
    );
    assert_eq!(
        bools(&run("x > 65534", std::slice::from_ref(&h))),
        [false, true, false]
    );
}

#[test]
fn reductions_arg_reductions_and_cumulative_sums() {
    let a = u64v(&[0, 1, H63, M64, 7]);
    let one = std::slice::from_ref(&a);
    assert_eq!(
        uints(&run("sum(x)", one)),
        (U64, vec![H63 + 7]),
        "wraps in u64"
    );
    assert_eq!(uints(&run("max(x)", one)), (U64, vec![M64]));
    assert_eq!(uints(&run("min(x[1:])", one)), (U64, vec![1]));
    assert_eq!(
        uints(&run("prod(x)", &[u64v(&[1 << 32, (1 << 32) + 1])])),
        (U64, vec![1 << 32])
    );
    assert_eq!(uints(&run("argmax(x)", one)).1, [3]);
    assert_eq!(uints(&run("argmin(x)", one)).1, [0]);
    assert_eq!(
        uints(&run("cumsum(x)", one)),
        (U64, vec![0, 1, H63 + 1, H63, H63 + 7])
    );
    let w = u32v(&[u32::MAX, u32::MAX, 2]);
    assert_eq!(
        uints(&run("sum(x)", std::slice::from_ref(&w))),
        (U64, vec![2 * u32::MAX as u64 + 2]),
        "u32 sums accumulate in u64"
    );
    assert_eq!(
        uints(&run("max(x)", std::slice::from_ref(&w))),
        (U32, vec![u32::MAX as u64])
    );
    let m = val(&[2, 2], vec![H63, 1u64, 2, M64]);
    assert_eq!(
        uints(&run("max(x, axis=1)", std::slice::from_ref(&m))).1,
        [H63, M64]
    );
    assert_eq!(
        uints(&run("argmax(x, axis=0)", std::slice::from_ref(&m))).1,
        [0, 1]
    );
}

#[test]
fn gathers_by_unsigned_indices_and_out_of_range_u64_indices() {
    let x = val(&[4], vec![10.0f64, 11.0, 12.0, 13.0]);
    let got = run("take(x, y)", &[x.clone(), u32v(&[3, 0, 3])]);
    assert_eq!(got.to_f64_array().as_slice().unwrap(), &[13.0, 10.0, 13.0]);
    let got = run("x[y]", &[x.clone(), u64v(&[1, 2])]);
    assert_eq!(got.to_f64_array().as_slice().unwrap(), &[11.0, 12.0]);
    // A u64 index above i64::MAX is out of range, not a negative index.
    let vals = [x, u64v(&[M64])];
    let (ins, vars) = declare(&vals);
    let out = build_expression("x[y]", &vars).unwrap();
    let fg = FunctionGraph::new(&ins, std::slice::from_ref(&out)).unwrap();
    let e = kiln::eval::evaluate(&fg, &vals).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "index {M64} is out of bounds for axis 0 with size 4"
        )),
        "{e}"
    );
    let f = function(&ins, std::slice::from_ref(&out))
        .compile()
        .unwrap();
    let args: Vec<kiln::linker::Arg<'_>> = vals.iter().map(|v| v.into()).collect();
    let e = f.call(&args).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "index {M64} is out of bounds for axis 0 with size 4"
        )),
        "{e}"
    );
}

#[test]
fn casts_are_exact_or_saturate() {
    let a = u64v(&[0, 1, H63, M64, (1 << 53) + 1]);
    let one = std::slice::from_ref(&a);
    let f = run("cast(x, \"f64\")", one);
    assert_eq!(
        f.to_f64_array().as_slice().unwrap(),
        &[0.0, 1.0, H63 as f64, M64 as f64, (1u64 << 53) as f64]
    );
    // One rounding, u64 to f32 directly.
    let f = run("cast(x, \"f32\")", one);
    assert_eq!(f.dtype(), F32);
    assert_eq!(
        f.to_f64_array().as_slice().unwrap(),
        &[
            0.0,
            1.0,
            H63 as f32 as f64,
            M64 as f32 as f64,
            ((1u64 << 53) + 1) as f32 as f64
        ]
    );
    assert_eq!(
        run("cast(x, \"i64\")", one)
            .to_i64_array()
            .as_slice()
            .unwrap(),
        &[0, 1, i64::MIN, -1, (1 << 53) + 1],
        "wraps as numpy's astype"
    );
    assert_eq!(uints(&run("cast(x, \"u16\")", one)).1, [0, 1, 0, 65535, 1]);
    // Float to unsigned: kiln's documented rule is Rust's saturating `as`
    // (numpy's is implementation-defined): NaN and negatives give 0, values
    // above the range the maximum, fractions truncate.
    let fl = val(&[5], vec![-1.5f64, 1e30, 70000.5, 3.7, f64::NAN]);
    let fl = std::slice::from_ref(&fl);
    assert_eq!(
        uints(&run("cast(x, \"u16\")", fl)).1,
        [0, 65535, 65535, 3, 0]
    );
    assert_eq!(
        uints(&run("cast(x, \"u32\")", fl)).1,
        [0, u32::MAX as u64, 70000, 3, 0]
    );
    assert_eq!(uints(&run("cast(x, \"u64\")", fl)).1, [0, M64, 70000, 3, 0]);
    assert_eq!(
        uints(&run("cast(x * 1e19, \"u64\")", &[val(&[1], vec![1.5f64])])).1,
        [15_000_000_000_000_000_000]
    );
}

#[test]
fn u64_constants_round_trip_exactly() {
    let c = Value::U64(ndarray::arr0(M64).into_dyn());
    assert_eq!(c.summary(), "18446744073709551615");
    let x = tensor("x", U64, &[None]);
    let out = &x + &Tensor::constant(c.clone());
    let vals = [u64v(&[0, 1])];
    let args: Vec<kiln::linker::Arg<'_>> = vals.iter().map(|v| v.into()).collect();
    for mode in [Mode::none(), Mode::fast_run()] {
        let f = function(std::slice::from_ref(&x), std::slice::from_ref(&out))
            .mode(mode)
            .compile()
            .unwrap();
        assert_eq!(uints(&f.call(&args).unwrap()[0]).1, [M64, 0]);
    }
    // Constant folding keeps the value.
    let folded =
        Tensor::constant(c.clone()) * Tensor::constant(Value::U64(ndarray::arr0(1u64).into_dyn()));
    let f = function(&[], std::slice::from_ref(&folded))
        .compile()
        .unwrap();
    assert_eq!(uints(&f.call(&[]).unwrap()[0]).1, [M64]);
    assert_eq!(c.cast(F64).scalar_as_f64(), Some(M64 as f64));
}

#[test]
fn gradients_of_unsigned_inputs_are_float_zeros() {
    // As every integer input (PyTensor): connected, with a float zero gradient.
    let x = tensor("x", F64, &[None]);
    let k = tensor("k", U64, &[None]);
    let cost = (&x * &k.cast(F64)).sum_all();
    let g = kiln::grad(&cost, &[x.clone(), k.clone()]).unwrap();
    assert_eq!((g[0].dtype(), g[1].dtype()), (F64, F64));
    let f = function(&[x, k], &g).compile().unwrap();
    let vals = [val(&[2], vec![1.0f64, 2.0]), u64v(&[3, M64])];
    let args: Vec<kiln::linker::Arg<'_>> = vals.iter().map(|v| v.into()).collect();
    let r = f.call(&args).unwrap();
    assert_eq!(r[0].to_f64_array().as_slice().unwrap(), &[3.0, M64 as f64]);
    assert_eq!(r[1].to_f64_array().as_slice().unwrap(), &[0.0, 0.0]);
}
