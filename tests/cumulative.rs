//! Cumulative ops (`cumsum`, `cumprod`): type inference and rejected
//! inputs, reference values as numpy documents them (flattened C order for
//! `axis=None`, `i64` accumulation of `bool` and integers, empty arrays),
//! the JIT against the reference bit for bit on every dtype, axis and
//! layout and on any thread count, and the expression language.

mod jit_support;

use std::collections::HashMap;

use jit_support::{check, rand_value};
use kiln::eval::evaluate;
use kiln::*;
use ndarray::{ArrayD, IxDyn};

fn i64s(shape: &[usize], v: Vec<i64>) -> Value {
    Value::I64(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
}

#[test]
fn types_and_rejected_inputs() {
    let x = tensor("x", DType::I32, &[Some(2), None]);
    let c = x.cumsum(None).unwrap();
    assert_eq!(c.ty(), &TensorType::new(DType::I64, vec![None]));
    let c = x.cumprod(Some(-1)).unwrap();
    assert_eq!(c.ty(), &TensorType::new(DType::I64, vec![Some(2), None]));
    let f = tensor("f", DType::F32, &[Some(2), Some(3)]);
    assert_eq!(
        f.cumsum(None).unwrap().ty(),
        &TensorType::new(DType::F32, vec![Some(6)])
    );
    let e = x.cumsum(Some(2)).unwrap_err().to_string();
    assert!(
        e.contains("cumsum") && e.contains("axis 2 out of range"),
        "{e}"
    );
    let e = Tensor::apply(
        Op::CumReduce {
            op: ReduceOp::Max,
            axis: None,
        },
        &[&x],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("only Sum and Prod accumulate"), "{e}");
}

#[test]
fn reference_values_follow_numpy() {
    let x = matrix("X", DType::I32);
    let v = Value::I32(ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![1, 2, 3, 4, 5, 6]).unwrap());
    let run = |y: Tensor, v: &Value| {
        let fg = FunctionGraph::new(std::slice::from_ref(&x), &[y]).unwrap();
        evaluate(&fg, std::slice::from_ref(v)).unwrap().remove(0)
    };
    // np.cumsum(A) == [1, 3, 6, 10, 15, 21] (int64); axis=0; cumprod axis=1.
    assert!(run(x.cumsum(None).unwrap(), &v).same_as(&i64s(&[6], vec![1, 3, 6, 10, 15, 21])));
    assert!(run(x.cumsum(Some(0)).unwrap(), &v).same_as(&i64s(&[2, 3], vec![1, 2, 3, 5, 7, 9])));
    assert!(run(x.cumprod(Some(1)).unwrap(), &v).same_as(&i64s(&[2, 3], vec![1, 2, 6, 4, 20, 120])));
    // Flattened in C order even for a transposed input: np.cumsum(A.T).
    let t = kiln::map_value!(v.clone(), a => a.reversed_axes());
    let fg = FunctionGraph::new(std::slice::from_ref(&x), &[x.cumsum(None).unwrap()]).unwrap();
    let r = evaluate(&fg, &[t]).unwrap().remove(0);
    assert!(r.same_as(&i64s(&[6], vec![1, 5, 7, 12, 15, 21])), "{r:?}");
    // Empty arrays give empty results.
    let e = Value::I32(ArrayD::from_shape_vec(IxDyn(&[0, 3]), vec![]).unwrap());
    assert_eq!(run(x.cumsum(Some(0)).unwrap(), &e).shape(), &[0, 3]);
    assert_eq!(run(x.cumsum(None).unwrap(), &e).shape(), &[0]);
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
            outs.push(x.cumsum(axis).unwrap());
            outs.push(x.cumprod(axis).unwrap());
        }
        for shape in [[3usize, 4, 5], [1, 7, 1], [2, 0, 3], [5, 1, 9]] {
            let v = rand_value(d, &shape, 3 + k as u64);
            check(
                std::slice::from_ref(&x),
                &outs,
                &[v],
                0,
                &format!("{d} {shape:?}"),
            );
            let t = kiln::map_value!(rand_value(d, &[shape[2], shape[1], shape[0]], 9), a => a.reversed_axes());
            check(
                std::slice::from_ref(&x),
                &outs,
                &[t],
                0,
                &format!("{d} {shape:?} transposed"),
            );
            // Axes 1, 0, 2 outermost first in memory.
            let p = kiln::map_value!(rand_value(d, &[shape[1], shape[0], shape[2]], 10), a => a.permuted_axes(ndarray::IxDyn(&[1, 0, 2])));
            check(
                std::slice::from_ref(&x),
                &outs,
                &[p],
                0,
                &format!("{d} {shape:?} permuted"),
            );
        }
    }
}

/// Scans large enough to be split over threads (whole lines along the
/// innermost axis, column ranges of a block along the outer axis, whole
/// blocks along the middle one) give the reference's bits with one, two
/// and three threads.
#[test]
fn threaded_scans_match_the_reference_for_any_thread_count() {
    for (k, d) in [DType::F64, DType::F32, DType::I64].into_iter().enumerate() {
        let x = tensor("x", d, &[None, None, None]);
        let mut outs = Vec::new();
        for axis in [Some(0), Some(1), Some(2)] {
            outs.push(x.cumsum(axis).unwrap());
            outs.push(x.cumprod(axis).unwrap());
        }
        let v = rand_value(d, &[3, 300, 200], 40 + k as u64);
        for threads in [1, 2, 3] {
            kiln::linker::set_num_threads(threads);
            check(
                std::slice::from_ref(&x),
                &outs,
                std::slice::from_ref(&v),
                0,
                &format!("{d} on {threads} threads"),
            );
        }
        kiln::linker::set_num_threads(0);
    }
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
    assert_eq!(show("cumsum(X)"), "cumsum(X)");
    assert_eq!(show("cumprod(X, axis=-1)"), "cumprod(X, axis=1)");
    for (src, msg) in [
        (
            "cumsum(X, keepdims=True)",
            "cumsum() does not take keepdims=",
        ),
        ("cumsum(X, axis=(0, 1))", "cumsum() takes one axis"),
        ("cumprod(X, axis=2)", "axis 2 out of range"),
    ] {
        let e = build_expression(src, &vars).unwrap_err().to_string();
        assert!(e.contains(msg), "{src}: {e}");
    }
}
