//! Bad input gets a clear error naming the input; unusual but valid input
//! (non-contiguous, negative strides, empty, NaN/Inf, integer division by
//! zero) gets numpy's answer.

use kiln::linker::Arg;
use kiln::rewriting::Mode;
use kiln::*;
use ndarray::{arr1, arr2, s, ArrayD};

fn f64s(v: &[f64]) -> ArrayD<f64> {
    arr1(v).into_dyn()
}

fn compiled(ins: &[Tensor], out: Tensor) -> CompiledFunction {
    function(ins, &[out]).compile().unwrap()
}

#[test]
fn wrong_number_of_inputs() {
    let (x, y) = (vector("x", DType::F64), vector("y", DType::F64));
    let f = compiled(&[x.clone(), y.clone()], &x + &y);
    let a = f64s(&[1.0]);
    let e = f.call(&[Arg::from(&a)]).unwrap_err();
    assert_eq!(e.to_string(), "input error: expected 2 inputs, got 1");
}

#[test]
fn wrong_dtype_ndim_and_static_size_name_the_input() {
    let x = tensor("x", DType::F64, &[Some(3)]);
    let f = compiled(std::slice::from_ref(&x), x.exp());
    let ints = arr1(&[1i64, 2, 3]).into_dyn();
    assert_eq!(
        f.call(&[Arg::from(&ints)]).unwrap_err().to_string(),
        "input error: input 0 ('x') has dtype i64, expected f64"
    );
    let m = arr2(&[[1.0, 2.0, 3.0]]).into_dyn();
    assert_eq!(
        f.call(&[Arg::from(&m)]).unwrap_err().to_string(),
        "input error: input 0 ('x') has 2 dimension(s) (shape [1, 3]), expected 1 (type f64(3,))"
    );
    let four = f64s(&[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(
        f.call(&[Arg::from(&four)]).unwrap_err().to_string(),
        "input error: input 0 ('x') has size 4 in dimension 0, but its type f64(3,) requires 3"
    );
}

#[test]
fn broadcast_mismatch_names_both_inputs() {
    let (a, b) = (vector("a", DType::F64), vector("b", DType::F64));
    let f = compiled(&[a.clone(), b.clone()], &a * &b);
    let (x, y) = (f64s(&[1.0, 2.0, 3.0]), f64s(&[1.0, 2.0]));
    let e = f
        .call(&[Arg::from(&x), Arg::from(&y)])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("'a'") && e.contains("'b'") && e.contains("dimension 0"),
        "{e}"
    );
    // A size-1 dimension that is not statically broadcastable does not broadcast.
    let one = f64s(&[5.0]);
    let e = f
        .call(&[Arg::from(&x), Arg::from(&one)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("'b'"), "{e}");
}

#[test]
fn non_contiguous_negative_stride_transposed_and_empty_inputs() {
    let m = matrix("M", DType::F64);
    let v = vector("v", DType::F64);
    let out = (&m * 2.0) + &v.expand_dims(0).unwrap();
    let f = compiled(&[m.clone(), v.clone()], out.clone());
    let reference = FunctionGraph::new(&[m, v], &[out]).unwrap();
    let big = ndarray::Array2::from_shape_fn((6, 8), |(i, j)| (i * 8 + j) as f64 - 20.0);
    let cases: Vec<(ndarray::ArrayViewD<f64>, ndarray::ArrayViewD<f64>)> = vec![
        (
            big.slice(s![..;2, ..;3]).into_dyn(),
            big.slice(s![0, ..;3]).into_dyn(),
        ),
        (
            big.slice(s![..;-1, ..]).into_dyn(),
            big.slice(s![1, ..;-1]).into_dyn(),
        ),
        (big.t().into_dyn(), big.slice(s![..6, 2]).into_dyn()),
        (
            big.slice(s![..0, ..]).into_dyn(),
            big.slice(s![0, ..]).into_dyn(),
        ),
        (
            big.slice(s![.., ..0]).into_dyn(),
            big.slice(s![0, ..0]).into_dyn(),
        ),
    ];
    for (mv, vv) in cases {
        let got = f
            .call(&[Arg::from(mv.clone()), Arg::from(vv.clone())])
            .unwrap();
        let want = eval::evaluate(
            &reference,
            &[Value::F64(mv.to_owned()), Value::F64(vv.to_owned())],
        )
        .unwrap();
        assert!(
            got[0].allclose(&want[0], 0.0, 0.0),
            "{:?} vs {:?}",
            got[0],
            want[0]
        );
        assert_eq!(got[0].shape(), want[0].shape());
    }
}

#[test]
fn nan_and_inf_propagate_as_in_numpy() {
    let (x, y) = (vector("x", DType::F64), vector("y", DType::F64));
    let outs = vec![
        maximum(&x, &y).unwrap(),
        minimum(&x, &y).unwrap(),
        &x / &y,
        &x - &y,
        x.log(),
        x.exp(),
        x.sqrt(),
    ];
    let f = function(&[x.clone(), y.clone()], &outs)
        .mode(Mode::fast_run())
        .compile()
        .unwrap();
    let xs = f64s(&[f64::NAN, 1.0, 0.0, f64::INFINITY, -1.0]);
    let ys = f64s(&[1.0, f64::NAN, 0.0, f64::INFINITY, 0.0]);
    let got = f.call(&[Arg::from(&xs), Arg::from(&ys)]).unwrap();
    let get = |k: usize| got[k].to_f64_array().iter().copied().collect::<Vec<f64>>();
    let same = |a: &[f64], b: &[f64]| {
        a.iter()
            .zip(b)
            .all(|(p, q)| (p.is_nan() && q.is_nan()) || p == q)
    };
    assert!(
        same(&get(0), &[f64::NAN, f64::NAN, 0.0, f64::INFINITY, 0.0]),
        "{:?}",
        get(0)
    );
    assert!(
        same(&get(1), &[f64::NAN, f64::NAN, 0.0, f64::INFINITY, -1.0]),
        "{:?}",
        get(1)
    );
    assert!(
        same(
            &get(2),
            &[f64::NAN, f64::NAN, f64::NAN, f64::NAN, f64::NEG_INFINITY]
        ),
        "{:?}",
        get(2)
    );
    assert!(
        same(&get(3), &[f64::NAN, f64::NAN, 0.0, f64::NAN, -1.0]),
        "{:?}",
        get(3)
    );
    assert!(
        same(
            &get(4),
            &[f64::NAN, 0.0, f64::NEG_INFINITY, f64::INFINITY, f64::NAN]
        ),
        "{:?}",
        get(4)
    );
    let e = get(5);
    assert!(
        e[0].is_nan() && e[2] == 1.0 && e[3] == f64::INFINITY,
        "{e:?}"
    );
    assert!(
        (e[1] - 1f64.exp()).abs() < 1e-15 && (e[4] - (-1f64).exp()).abs() < 1e-16,
        "{e:?}"
    );
    assert!(
        same(&get(6), &[f64::NAN, 1.0, 0.0, f64::INFINITY, f64::NAN]),
        "{:?}",
        get(6)
    );
}

#[test]
fn integer_division_by_zero_gives_numpy_results_without_a_trap() {
    for dtype in [DType::I64, DType::I32, DType::I8] {
        let (a, b) = (vector("a", dtype), vector("b", dtype));
        let f = function(
            &[a.clone(), b.clone()],
            &[int_div(&a, &b).unwrap(), modulo(&a, &b).unwrap()],
        )
        .compile()
        .unwrap();
        let av = Value::I64(arr1(&[7i64, -7, 0, 5, -128]).into_dyn()).cast(dtype);
        let bv = Value::I64(arr1(&[0i64, 2, 0, -2, -1]).into_dyn()).cast(dtype);
        let got = f.call_values(&[av, bv]).unwrap();
        let q: Vec<i64> = got[0].to_i64_array().iter().copied().collect();
        let r: Vec<i64> = got[1].to_i64_array().iter().copied().collect();
        // numpy: x // 0 == 0, x % 0 == 0, floor semantics; i8: -128 // -1 wraps to -128.
        let last = if dtype == DType::I8 { -128 } else { 128 };
        assert_eq!(q, vec![0, -4, 0, -3, last], "{dtype}");
        assert_eq!(r, vec![0, 1, 0, -1, 0], "{dtype}");
    }
}

#[test]
fn expression_syntax_errors_carry_the_position() {
    let vars = std::collections::HashMap::from([("x".to_string(), vector("x", DType::F64))]);
    let e = build_expression("exp(x) + * 2", &vars).unwrap_err();
    let Error::Parse { pos, msg } = &e else {
        panic!("{e}")
    };
    assert_eq!(*pos, 9, "{msg}");
    let e = build_expression("exp(x", &vars).unwrap_err();
    assert!(matches!(e, Error::Parse { pos: 5, .. }), "{e}");
    let e = build_expression("expp(x)", &vars).unwrap_err();
    assert!(
        matches!(e, Error::Parse { pos: 0, .. }) && e.to_string().contains("expp"),
        "{e}"
    );
}

// Too-large arrays: an error naming the node, never an abort, in the
// compiled function and in the reference evaluator alike. The sizes exceed
// the 2^47-byte user address space, so the allocator refuses them under any
// overcommit policy (a 2^40-element f64 array, 8 TiB, may be granted lazily
// where overcommit is unlimited, and then fault in until the OOM killer acts).

/// Compiles `ins -> out` and returns the call's and the reference's errors.
fn both_errors(ins: &[Tensor], out: &Tensor, vals: &[Value]) -> (String, String) {
    let f = function(ins, std::slice::from_ref(out)).compile().unwrap();
    let compiled = f.call_values(vals).unwrap_err().to_string();
    let fg = FunctionGraph::new(ins, std::slice::from_ref(out)).unwrap();
    let reference = eval::evaluate(&fg, vals).unwrap_err().to_string();
    (compiled, reference)
}

fn ramp(n: usize) -> Value {
    Value::F64(ArrayD::from_shape_fn(vec![n], |i| i[0] as f64))
}

#[test]
fn alloc_of_2_pow_48_elements_is_an_out_of_memory_error() {
    let x = scalar("x", DType::F64);
    let n = Tensor::constant(Value::scalar_i64(DType::I64, 1 << 24));
    let out = alloc(&x, &[&n, &n]).unwrap();
    let (compiled, reference) = both_errors(
        std::slice::from_ref(&x),
        &out,
        &[Value::F64(ndarray::arr0(1.5).into_dyn())],
    );
    for e in [compiled, reference] {
        assert_eq!(
            e,
            "evaluation error in Alloc: cannot allocate 2251799813685248 bytes for an array \
             of shape [16777216, 16777216] (f64): out of memory"
        );
    }
}

#[test]
fn alloc_whose_element_count_overflows_is_an_error() {
    let x = scalar("x", DType::F64);
    let n = Tensor::constant(Value::scalar_i64(DType::I64, 1 << 40));
    let out = alloc(&x, &[&n, &n]).unwrap();
    let (compiled, reference) = both_errors(
        std::slice::from_ref(&x),
        &out,
        &[Value::F64(ndarray::arr0(1.5).into_dyn())],
    );
    for e in [compiled, reference] {
        assert_eq!(
            e,
            "evaluation error in Alloc: shape [1099511627776, 1099511627776] is too large to allocate"
        );
    }
}

/// Three vectors of 2^17 elements, broadcast against each other in one
/// node: 2^51 elements (2^54 bytes) that no allocator grants.
#[test]
fn broadcast_of_three_vectors_into_2_pow_51_elements_is_an_error() {
    let ins: Vec<Tensor> = ["x", "y", "z"]
        .iter()
        .map(|n| vector(n, DType::F64))
        .collect();
    let a = ins[0].dimshuffle(&[Some(0), None, None]).unwrap();
    let b = ins[1].dimshuffle(&[None, Some(0), None]).unwrap();
    let c = ins[2].dimshuffle(&[None, None, Some(0)]).unwrap();
    // One variadic node: no intermediate of a merely large size (which an
    // unlimited overcommit policy could grant lazily).
    let out = elemwise(ScalarOp::Add, &[&a, &b, &c]).unwrap();
    let n = 1 << 17;
    let vals = [ramp(n), ramp(n), ramp(n)];
    let (compiled, reference) = both_errors(&ins, &out, &vals);
    for e in [&compiled, &reference] {
        assert!(
            e.starts_with("evaluation error in ")
                && e.ends_with(
                    "cannot allocate 18014398509481984 bytes for an array of shape \
                     [131072, 131072, 131072] (f64): out of memory"
                ),
            "{e}"
        );
    }
}

/// Four vectors of 2^16 elements broadcast into 2^64 elements: the element
/// count overflows `usize`.
#[test]
fn broadcast_whose_element_count_overflows_is_an_error() {
    let ins: Vec<Tensor> = ["w", "x", "y", "z"]
        .iter()
        .map(|n| vector(n, DType::F64))
        .collect();
    let order =
        |k: usize| -> Vec<Option<usize>> { (0..4).map(|d| (d == k).then_some(0)).collect() };
    let parts: Vec<Tensor> = (0..4)
        .map(|k| ins[k].dimshuffle(&order(k)).unwrap())
        .collect();
    let refs: Vec<&Tensor> = parts.iter().collect();
    let out = elemwise(ScalarOp::Add, &refs).unwrap();
    let n = 1 << 16;
    let vals = [ramp(n), ramp(n), ramp(n), ramp(n)];
    let (compiled, reference) = both_errors(&ins, &out, &vals);
    for e in [&compiled, &reference] {
        assert!(
            e.starts_with("evaluation error in ")
                && e.ends_with("shape [65536, 65536, 65536, 65536] is too large to allocate"),
            "{e}"
        );
    }
}

/// `dot` of a column and a row (an outer product) of 2^24 elements each.
#[test]
fn dot_with_a_2_pow_48_element_result_is_an_error() {
    let (a, b) = (matrix("a", DType::F64), matrix("b", DType::F64));
    let out = dot(&a, &b).unwrap();
    let n = 1 << 24;
    let col = Value::F64(ArrayD::zeros(vec![n, 1]));
    let row = Value::F64(ArrayD::zeros(vec![1, n]));
    let (compiled, reference) = both_errors(&[a, b], &out, &[col, row]);
    for e in [&compiled, &reference] {
        assert!(
            e.starts_with("evaluation error in ")
                && e.ends_with(
                    "cannot allocate 2251799813685248 bytes for an array of shape \
                     [16777216, 16777216] (f64): out of memory"
                ),
            "{e}"
        );
    }
}

/// A reshape whose target sizes multiply past `i64`/`usize` is refused, not
/// wrapped around to a small count.
#[test]
fn reshape_to_an_overflowing_shape_is_an_error() {
    let x = vector("x", DType::F64);
    let out = x.reshape(&[1 << 32, 1 << 32, 0]).unwrap();
    let (compiled, reference) = both_errors(
        std::slice::from_ref(&x),
        &out,
        &[Value::F64(ArrayD::zeros(vec![0]))],
    );
    for e in [&compiled, &reference] {
        assert!(e.contains("cannot reshape"), "{e}");
    }
}
