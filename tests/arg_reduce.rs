//! Arg-reductions (`argmax`, `argmin`, `MaxAndArgmax`): type inference and
//! rejected inputs, reference values against numpy's documented behaviour
//! (first occurrence on ties, the first NaN wins, flattened C order for
//! `axis=None`, empty axes are errors), the JIT against the reference on
//! every dtype and layout, the expression language, and the rewrites
//! (`argmax(-x)`, exact casts, the `max`/`argmax` merge).

mod common_rewrites;
mod jit_support;

use std::collections::HashMap;

use common_rewrites::*;
use jit_support::{check, rand_f64, rand_value};
use kiln::build_expression;
use kiln::eval::evaluate;
use kiln::ops::ArgOp;
use kiln::*;
use ndarray::{ArrayD, IxDyn};

fn f64s(shape: &[usize], v: Vec<f64>) -> Value {
    Value::F64(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
}

fn i64s(shape: &[usize], v: Vec<i64>) -> Value {
    Value::I64(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
}

/// The reference value of `f(x)` on `v`.
fn reference(x: &Tensor, y: &Tensor, v: Value) -> kiln::Result<Value> {
    let fg = FunctionGraph::new(std::slice::from_ref(x), std::slice::from_ref(y))?;
    Ok(evaluate(&fg, &[v])?.remove(0))
}

#[test]
fn types_and_rejected_inputs() {
    let x = tensor("x", DType::F32, &[Some(3), None, Some(5)]);
    let a = x.argmax(Some(1)).unwrap();
    assert_eq!(a.ty(), &TensorType::new(DType::I64, vec![Some(3), Some(5)]));
    let a = x.argmin(Some(-1)).unwrap();
    assert_eq!(a.ty(), &TensorType::new(DType::I64, vec![Some(3), None]));
    assert_eq!(
        x.argmax(None).unwrap().ty(),
        &TensorType::scalar(DType::I64)
    );
    let k = x.arg_reduce(ArgOp::Max, Some(1), true).unwrap();
    assert_eq!(
        k.ty(),
        &TensorType::new(DType::I64, vec![Some(3), Some(1), Some(5)])
    );
    let k = x.arg_reduce(ArgOp::Min, None, true).unwrap();
    assert_eq!(k.ty().shape, vec![Some(1); 3]);
    let (m, i) = x.max_and_argmax(Some(0)).unwrap();
    assert_eq!(m.ty(), &TensorType::new(DType::F32, vec![None, Some(5)]));
    assert_eq!(i.ty(), &TensorType::new(DType::I64, vec![None, Some(5)]));
    // Booleans and integers are accepted.
    let b = vector("b", DType::Bool);
    assert_eq!(b.argmax(None).unwrap().dtype(), DType::I64);
    // Rejected: an axis out of range, a statically empty axis.
    let e = x.argmax(Some(3)).unwrap_err().to_string();
    assert!(
        e.contains("argmax") && e.contains("axis 3 out of range"),
        "{e}"
    );
    let e = x.argmin(Some(-4)).unwrap_err().to_string();
    assert!(e.contains("axis -4 out of range"), "{e}");
    let z = tensor("z", DType::F64, &[Some(2), Some(0)]);
    let e = z.argmax(Some(1)).unwrap_err().to_string();
    assert!(
        e.contains("attempt to get argmax of an empty sequence"),
        "{e}"
    );
    let e = z.argmin(None).unwrap_err().to_string();
    assert!(e.contains("argmin of an empty sequence"), "{e}");
    // A non-empty axis of an array with an empty other dimension is fine.
    assert_eq!(
        z.argmax(Some(0)).unwrap().ty().shape,
        vec![Some(0)],
        "numpy: argmax(zeros((2, 0)), axis=0) is []"
    );
}

#[test]
fn reference_values_follow_numpy() {
    let nan = f64::NAN;
    let x = matrix("X", DType::F64);
    let v = f64s(
        &[3, 4],
        vec![1., 5., 5., nan, 3., -1., 2., 0., 7., 7., nan, nan],
    );
    // np.argmax(X, axis=1) == [3, 0, 2]: the first NaN wins, ties keep the first.
    let r = reference(&x, &x.argmax(Some(1)).unwrap(), v.clone()).unwrap();
    assert!(r.same_as(&i64s(&[3], vec![3, 0, 2])), "{r:?}");
    // np.argmin(X, axis=0) == [0, 1, 2, 0].
    let r = reference(&x, &x.argmin(Some(0)).unwrap(), v.clone()).unwrap();
    assert!(r.same_as(&i64s(&[4], vec![0, 1, 2, 0])), "{r:?}");
    // np.argmax(X) == 3 (flattened, C order).
    let r = reference(&x, &x.argmax(None).unwrap(), v.clone()).unwrap();
    assert!(r.same_as(&i64s(&[], vec![3])), "{r:?}");
    // np.argmax(X, axis=0, keepdims=True) == [[2, 2, 2, 0]].
    let k = x.arg_reduce(ArgOp::Max, Some(0), true).unwrap();
    let r = reference(&x, &k, v.clone()).unwrap();
    assert!(r.same_as(&i64s(&[1, 4], vec![2, 2, 2, 0])), "{r:?}");
    // Flattened order of a transposed (non-standard) input: np.argmax(X.T) == 1.
    let t = f64s(&[2, 2], vec![0., 1., 2., -1.]);
    let tt = kiln::map_value!(t, a => a.reversed_axes());
    let r = reference(&x, &x.argmax(None).unwrap(), tt).unwrap();
    assert!(r.same_as(&i64s(&[], vec![1])), "{r:?}");
    // Integers compare exactly (beyond 2**53).
    let i = vector("i", DType::I64);
    let big =
        Value::I64(ArrayD::from_shape_vec(IxDyn(&[2]), vec![i64::MAX - 1, i64::MAX]).unwrap());
    let r = reference(&i, &i.argmax(None).unwrap(), big).unwrap();
    assert!(r.same_as(&i64s(&[], vec![1])), "{r:?}");
    // Empty axes are errors at run time.
    let e = reference(&x, &x.argmax(Some(1)).unwrap(), f64s(&[0, 0], vec![]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("attempt to get argmax of an empty sequence"),
        "{e}"
    );
    let r = reference(&x, &x.argmax(Some(0)).unwrap(), f64s(&[3, 0], vec![])).unwrap();
    assert_eq!(r.shape(), &[0]);
    // MaxAndArgmax: the value is the NaN-propagating max.
    let (m, i) = x.max_and_argmax(Some(1)).unwrap();
    let fg = FunctionGraph::new(std::slice::from_ref(&x), &[m, i]).unwrap();
    let out = evaluate(&fg, &[v]).unwrap();
    let mv = out[0].to_f64_array();
    assert_eq!(mv.as_slice().unwrap()[1], 3.0);
    assert!(mv.as_slice().unwrap()[0].is_nan() && mv.as_slice().unwrap()[2].is_nan());
    assert!(out[1].same_as(&i64s(&[3], vec![3, 0, 2])));
}

#[test]
fn jit_matches_the_reference_on_every_dtype_and_layout() {
    let dtypes = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F32,
        DType::F64,
    ];
    for (k, &d) in dtypes.iter().enumerate() {
        let x = tensor("x", d, &[None, None, None]);
        let mut outs = Vec::new();
        for axis in [None, Some(0), Some(1), Some(2)] {
            outs.push(x.argmax(axis).unwrap());
            outs.push(x.argmin(axis).unwrap());
            let (m, i) = x.max_and_argmax(axis).unwrap();
            outs.push(m);
            outs.push(i);
        }
        for shape in [[3usize, 4, 5], [1, 7, 1], [2, 0, 3], [5, 1, 9]] {
            if shape.contains(&0) {
                continue;
            }
            let v = rand_value(d, &shape, 11 + k as u64);
            check(
                std::slice::from_ref(&x),
                &outs,
                std::slice::from_ref(&v),
                0,
                &format!("{d} {shape:?}"),
            );
            // A non-standard layout: the transposed array.
            let t = kiln::map_value!(rand_value(d, &[shape[2], shape[1], shape[0]], 5), a => a.reversed_axes());
            check(
                std::slice::from_ref(&x),
                &outs,
                &[t],
                0,
                &format!("{d} {shape:?} transposed"),
            );
            // Axes 1, 0, 2 outermost first in memory.
            let p = kiln::map_value!(rand_value(d, &[shape[1], shape[0], shape[2]], 6), a => a.permuted_axes(ndarray::IxDyn(&[1, 0, 2])));
            check(
                std::slice::from_ref(&x),
                &outs,
                &[p],
                0,
                &format!("{d} {shape:?} permuted"),
            );
        }
        // An empty other dimension: an empty result; an empty reduced axis: an error.
        let y = tensor("y", d, &[None, None]);
        let a0 = y.argmax(Some(0)).unwrap();
        let v = rand_value(d, &[3, 0], 1);
        check(
            std::slice::from_ref(&y),
            std::slice::from_ref(&a0),
            &[v],
            0,
            "empty",
        );
        let fg =
            FunctionGraph::new(std::slice::from_ref(&y), &[y.argmin(Some(1)).unwrap()]).unwrap();
        let f = kiln::linker::compile(&fg, &Default::default()).unwrap();
        let v = rand_value(d, &[0, 0], 1);
        let e = f.call(&[(&v).into()]).unwrap_err().to_string();
        assert!(
            e.contains("attempt to get argmin of an empty sequence"),
            "{e}"
        );
    }
}

/// Inputs large enough to be split over threads: the lanes go in chunks
/// that start and end inside an outer position (a middle axis of a 3-d
/// array), split a single outer position's columns (axis 0 of a matrix) or
/// hold many short rows; each lane's result is the reference's, with ties
/// (small integers), NaNs and infinities among the values.
#[test]
fn arrays_split_over_threads_match_the_reference() {
    for (shape, seed) in [
        ([7usize, 300, 50], 1u64),
        ([1, 2000, 60], 2),
        ([60_000, 3, 1], 3),
    ] {
        for d in [DType::F64, DType::I32] {
            let x = tensor("x", d, &[None, None, None]);
            let mut outs = Vec::new();
            for axis in [Some(0), Some(1), Some(2)] {
                outs.push(x.argmax(axis).unwrap());
                let (m, i) = x.max_and_argmax(axis).unwrap();
                outs.extend([m, i]);
                outs.push(x.argmin(axis).unwrap());
            }
            let mut v = rand_value(d, &shape, seed);
            if let Value::F64(a) = &mut v {
                let len = a.len();
                for (k, s) in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, f64::NAN]
                    .into_iter()
                    .enumerate()
                {
                    a.as_slice_mut().unwrap()[(k * 7919 + 13) % len] = s;
                }
            }
            check(
                std::slice::from_ref(&x),
                &outs,
                std::slice::from_ref(&v),
                0,
                &format!("{d} {shape:?}"),
            );
            // The same values laid out in reversed axis order (scanned in
            // that memory order).
            let rev: Vec<usize> = shape.iter().rev().copied().collect();
            let stored = kiln::map_value!(v.clone(), a => a.reversed_axes().as_standard_layout().into_owned());
            assert_eq!(stored.shape(), &rev[..]);
            let t = kiln::map_value!(stored, a => a.reversed_axes());
            check(
                std::slice::from_ref(&x),
                &outs,
                &[t],
                0,
                &format!("{d} {shape:?} transposed"),
            );
        }
    }
}

/// Rows scanned in blocks (a block is tested as a whole before its
/// elements are) and whole arrays split into pieces merged in order: row
/// lengths around the block size, ties of the extreme in different blocks
/// and pieces (the first wins), NaNs in a block's middle and in two pieces
/// (the first wins), a NaN first, and a maximum of zeros whose first is
/// -0.0 (its value and index are kept). Values without the random NaNs of
/// `rand_value`, so the scans run to the rows' ends.
#[test]
fn long_rows_in_blocks_and_whole_arrays_in_pieces_match_the_reference() {
    let x = tensor("x", DType::F64, &[None, None]);
    let outs = [
        x.argmax(Some(1)).unwrap(),
        x.argmin(Some(1)).unwrap(),
        x.argmax(None).unwrap(),
        x.max_and_argmax(None).unwrap().0,
    ];
    for (rows, n) in [
        (5usize, 15usize),
        (5, 16),
        (5, 17),
        (4, 33),
        (3, 2000),
        (1, 200_003),
    ] {
        let base = rand_f64(&[rows, n], n as u64, -4.0, 4.0);
        let mut cases = vec![("plain", base.clone())];
        let mut ties = base.clone();
        for r in 0..rows {
            for at in [n / 3, n / 7, n - 1, n / 2] {
                ties[[r, at]] = 9.0;
                ties[[r, (at + 1) % n]] = -9.0;
            }
        }
        cases.push(("ties", ties));
        let mut nans = base.clone();
        for r in 0..rows {
            nans[[r, n * 3 / 4]] = f64::NAN;
            nans[[r, n / 2 + r % 2]] = f64::NAN;
        }
        cases.push(("NaNs", nans));
        let mut first = base.clone();
        first[[0, 0]] = f64::NAN;
        cases.push(("NaN first", first));
        let mut zeros = base.mapv(|v| -v.abs() - 1.0);
        for r in 0..rows {
            zeros[[r, n / 5]] = -0.0;
            zeros[[r, n / 2]] = 0.0;
        }
        cases.push(("zeros", zeros));
        for (what, a) in cases {
            let v = Value::F64(a.clone());
            check(
                std::slice::from_ref(&x),
                &outs,
                std::slice::from_ref(&v),
                0,
                &format!("{what} {rows}x{n}"),
            );
            if what == "zeros" && rows == 1 {
                let fg = FunctionGraph::new(std::slice::from_ref(&x), &outs[2..]).unwrap();
                let f = kiln::linker::compile(&fg, &Default::default()).unwrap();
                let got = f.call(&[(&v).into()]).unwrap();
                assert!(got[0].same_as(&i64s(&[], vec![(n / 5) as i64])), "{got:?}");
                let Value::F64(m) = &got[1] else {
                    panic!("f64 maximum")
                };
                let m = m.first().copied().unwrap();
                assert!(m == 0.0 && m.is_sign_negative(), "{m}");
            }
        }
    }
    // The other dtypes' scans over a whole array, in pieces.
    for d in [DType::F32, DType::I32, DType::U8] {
        let y = tensor("y", d, &[None]);
        let outs = [y.argmax(None).unwrap(), y.argmin(None).unwrap()];
        let v = Value::from_f64_array(d, rand_f64(&[150_001], 9, 0.0, 200.0).mapv(f64::floor));
        check(
            std::slice::from_ref(&y),
            &outs,
            std::slice::from_ref(&v),
            0,
            &format!("{d} whole array"),
        );
    }
}

#[test]
fn expression_language() {
    let mut vars = HashMap::new();
    vars.insert("X".to_string(), matrix("X", DType::F64));
    let t = build_expression("argmax(X, axis=1)", &vars).unwrap();
    assert_eq!(t.ty().shape, vec![None]);
    let t = build_expression("argmin(X, axis=-2, keepdims=True)", &vars).unwrap();
    assert_eq!(t.ty().shape, vec![Some(1), None]);
    let t = build_expression("argmax(X)", &vars).unwrap();
    assert_eq!(t.ty().ndim(), 0);
    let e = build_expression("argmax(X, axis=(0, 1))", &vars)
        .unwrap_err()
        .to_string();
    assert!(e.contains("argmax() takes one axis"), "{e}");
    let e = build_expression("argmax(X, axis=2)", &vars)
        .unwrap_err()
        .to_string();
    assert!(e.contains("axis 2 out of range"), "{e}");
    let fg = FunctionGraph::new(
        &[vars["X"].clone()],
        &[build_expression("argmax(X, axis=1)", &vars).unwrap()],
    )
    .unwrap();
    assert_eq!(format!("{fg}"), "FunctionGraph(Argmax{axis=1}(X))");
    assert_eq!(kiln::graph::print::pprint_outputs(&fg), "argmax(X, axis=1)");
}

const XM: &str = "X=f64[:, :]";

#[test]
fn rewrite_argmax_of_neg() {
    check_rule(
        "local_argmax_neg",
        graph(XM, "argmax(-X, axis=1)"),
        "argmax((-X), axis=1)",
        "argmin(X, axis=1)",
    );
    check_rule(
        "local_argmax_neg",
        graph(XM, "argmin(-1 * X)"),
        "argmin((-1.0 * X))",
        "argmax(X)",
    );
    // Integers wrap under negation (-i64::MIN == i64::MIN): left alone.
    check_no_fire(
        "local_argmax_neg",
        graph("I=i64[:, :]", "argmax(-I, axis=0)"),
    );
}

#[test]
fn rewrite_argmax_of_exact_cast() {
    check_rule(
        "local_argmax_exact_cast",
        graph("X=f32[:, :]", "argmax(cast(X, 'f64'), axis=0)"),
        "argmax(cast(X, \"f64\"), axis=0)",
        "argmax(X, axis=0)",
    );
    check_rule(
        "local_argmax_exact_cast",
        graph("I=i16[:]", "argmin(cast(I, 'f32'))"),
        "argmin(cast(I, \"f32\"))",
        "argmin(I)",
    );
    // Rounding casts (i64 -> f64, f64 -> f32, u8 -> i8) and rounding
    // monotonic functions (exp merges 0 and 1e-20 into a tie) are left alone.
    check_no_fire(
        "local_argmax_exact_cast",
        graph("I=i64[:]", "argmax(cast(I, 'f64'))"),
    );
    check_no_fire(
        "local_argmax_exact_cast",
        graph("x=f64[:]", "argmax(cast(x, 'f32'))"),
    );
    check_no_fire(
        "local_argmax_exact_cast",
        graph("u=u8[:]", "argmax(cast(u, 'i8'))"),
    );
    check_no_fire(
        "local_argmax_exact_cast",
        graph("x=f64[:]", "argmax(exp(x))"),
    );
    // The value: i64 above 2**53 rounds to equal f64s, so the positions differ.
    let i = vector("i", DType::I64);
    let v = Value::I64(ArrayD::from_shape_vec(IxDyn(&[2]), vec![i64::MAX - 1, i64::MAX]).unwrap());
    let r = reference(&i, &i.cast(DType::F64).argmax(None).unwrap(), v).unwrap();
    assert!(
        r.same_as(&i64s(&[], vec![0])),
        "the cast's tie moves the position: {r:?}"
    );
}

/// The number of two-output arg-reductions (`MaxAndArgmax` /
/// `MinAndArgmin`) in `fg`: the printer writes their outputs as `max(...)`
/// and `argmax(...)`, so the merge is only visible in the graph.
fn merged(fg: &FunctionGraph) -> usize {
    fg.toposort()
        .into_iter()
        .filter(|&n| {
            matches!(
                fg.node(n).op,
                Op::ArgReduce {
                    with_value: true,
                    ..
                }
            )
        })
        .count()
}

#[test]
fn rewrite_max_and_argmax() {
    // The rule at either node makes or reuses the merged node; the merged
    // node prints back as the max and argmax it computes.
    for (decls, expr, before, shown) in [
        (
            XM,
            "max(X, axis=1) + argmax(X, axis=1)",
            "(max(X, axis=1) + argmax(X, axis=1))",
            "(max(X, axis=1) + argmax(X, axis=1))",
        ),
        (
            XM,
            "min(X) * argmin(X)",
            "(min(X) * argmin(X))",
            "(min(X) * argmin(X))",
        ),
        (
            "x=f64[:]",
            "max(x, axis=0) - argmax(x)",
            "(max(x, axis=0) - argmax(x))",
            "(max(x) - argmax(x))",
        ),
    ] {
        let fg = graph(decls, expr);
        assert_eq!(merged(&fg), 0);
        let after = check_rule("local_max_and_argmax", fg, before, shown);
        assert_eq!(merged(&after), 1, "{expr}");
        assert_eq!(
            after.n_nodes(),
            2,
            "{expr}: one merged node and the combining op"
        );
    }
    // Different axes, different extremes, or a lone argmax: no merge.
    check_no_fire(
        "local_max_and_argmax",
        graph(XM, "max(X, axis=0) + argmax(X, axis=1)"),
    );
    check_no_fire(
        "local_max_and_argmax",
        graph(XM, "min(X, axis=1) + argmax(X, axis=1)"),
    );
    check_no_fire("local_max_and_argmax", graph(XM, "argmax(X, axis=1)"));
    // FAST_RUN: one node computes both, and the JIT agrees with the reference.
    let x = matrix("X", DType::F64);
    let m = x.max(&[1]).unwrap();
    let a = x.argmax(Some(1)).unwrap();
    let mut fg = FunctionGraph::new(std::slice::from_ref(&x), &[m.clone(), a.clone()]).unwrap();
    kiln::rewrites::rewrite_graph(&mut fg, &kiln::rewriting::Mode::fast_run()).unwrap();
    assert_eq!(fg.n_nodes(), 1, "{fg}");
    let v = rand_value(DType::F64, &[6, 9], 3);
    let f = function(std::slice::from_ref(&x), &[m.clone(), a.clone()])
        .compile()
        .unwrap();
    let got = f.call(&[(&v).into()]).unwrap();
    let want = evaluate(&FunctionGraph::new(&[x], &[m, a]).unwrap(), &[v]).unwrap();
    assert!(got[0].same_as(&want[0]) && got[1].same_as(&want[1]));
}
