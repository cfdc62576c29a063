//! Reductions, views, Alloc, Reshape, Shape, Dot against the reference
//! evaluator, on several layouts.
mod jit_support;
use jit_support::*;
use kiln::{alloc, constant, dot, tensor, DType, ReduceOp, Tensor, Value};
use ndarray::{s, ArrayD, IxDyn};

const OPS: [ReduceOp; 6] = [
    ReduceOp::Sum,
    ReduceOp::Prod,
    ReduceOp::Max,
    ReduceOp::Min,
    ReduceOp::All,
    ReduceOp::Any,
];

fn axes_sets() -> Vec<Option<Vec<isize>>> {
    vec![
        None,
        Some(vec![0]),
        Some(vec![1]),
        Some(vec![2]),
        Some(vec![0, 2]),
        Some(vec![1, 2]),
        Some(vec![0, 1]),
        Some(vec![]),
    ]
}

#[test]
fn reductions_all_ops_dtypes_axes() {
    for op in OPS {
        for dtype in DType::ALL {
            for axes in axes_sets() {
                let x = tensor("x", dtype, &[None, None, None]);
                let r = x.reduce(op, axes.as_deref(), false).unwrap();
                for (shape, transpose) in [
                    ([3usize, 4, 5], false),
                    ([2, 3, 40], false),
                    ([5, 4, 3], true),
                    ([3, 0, 2], false),
                ] {
                    if shape.contains(&0) && matches!(op, ReduceOp::Max | ReduceOp::Min) {
                        continue;
                    }
                    let mut v = rand_value(dtype, &shape, 7);
                    if dtype.is_float() && matches!(op, ReduceOp::Prod) {
                        v = Value::from_f64_array(
                            dtype,
                            v.to_f64_array()
                                .mapv(|x| if x.is_finite() { 1.0 + x / 16.0 } else { x }),
                        );
                    }
                    if transpose {
                        v = kiln::map_value!(v, a => a.reversed_axes());
                    }
                    let fg = kiln::FunctionGraph::new(
                        std::slice::from_ref(&x),
                        std::slice::from_ref(&r),
                    )
                    .unwrap();
                    let want = kiln::eval::evaluate(&fg, std::slice::from_ref(&v)).unwrap();
                    let f = kiln::linker::compile(&fg, &Default::default()).unwrap();
                    let got = f.call_values(&[v]).unwrap();
                    let what = format!("{op:?} {dtype} {axes:?} {shape:?} t={transpose}");
                    if dtype.is_float() && matches!(op, ReduceOp::Sum | ReduceOp::Prod) {
                        assert_close(&got[0], &want[0], 1e-12, &what);
                    } else {
                        assert_values(&got[0], &want[0], 0, &what);
                    }
                }
            }
        }
    }
}

#[test]
fn long_vector_sum_uses_tolerance() {
    let x = tensor("x", DType::F64, &[None]);
    let r = x.sum(&[0]).unwrap();
    let fg = kiln::FunctionGraph::new(&[x], &[r]).unwrap();
    let v = Value::from(rand_f64(&[100_003], 9, -1.0, 1.0));
    let want = kiln::eval::evaluate(&fg, std::slice::from_ref(&v)).unwrap();
    let got = kiln::linker::compile(&fg, &Default::default())
        .unwrap()
        .call_values(&[v])
        .unwrap();
    assert_close(&got[0], &want[0], 1e-11, "sum");
}

#[test]
fn dimshuffle_reshape_shape_alloc() {
    let x = tensor("x", DType::F64, &[None, None]);
    let t = x.t();
    let e = x.dimshuffle(&[Some(1), None, Some(0)]).unwrap();
    let r = x.reshape(&[-1]).unwrap();
    let r2 = t.reshape(&[3, -1]).unwrap();
    let sh = x.shape();
    let s1 = x.shape_i(1).unwrap();
    let y = &t * 2.0;
    let outs = vec![t.clone(), e, r, r2, sh, s1, y];
    for layout in ["c", "t", "strided"] {
        let v = match layout {
            "c" => rand_value(DType::F64, &[4, 6], 1),
            "t" => kiln::map_value!(rand_value(DType::F64, &[6, 4], 1), a => a.reversed_axes()),
            _ => {
                kiln::map_value!(rand_value(DType::F64, &[4, 12], 1), a => a.slice_move(s![.., ..;2]).into_dyn())
            }
        };
        check(
            std::slice::from_ref(&x),
            &outs,
            &[v],
            0,
            &format!("views {layout}"),
        );
    }
    // Alloc with a run-time shape and a broadcast value.
    let v = tensor("v", DType::I32, &[Some(1), None]);
    let n = tensor("n", DType::I64, &[]);
    let a = alloc(&v, &[&n, &constant(ArrayD::from_elem(IxDyn(&[]), 3i64))]).unwrap();
    check(
        &[v, n],
        &[a],
        &[
            rand_value(DType::I32, &[1, 3], 2),
            Value::scalar_i64(DType::I64, 5),
        ],
        0,
        "alloc",
    );
}

#[test]
fn dot_all_shapes_and_dtypes() {
    for dtype in [DType::F64, DType::F32, DType::I64, DType::I32] {
        for (sa, sb) in [
            (vec![None, None], vec![None, None]),
            (vec![None], vec![None, None]),
            (vec![None, None], vec![None]),
            (vec![None], vec![None]),
        ] {
            let a = tensor("a", dtype, &sa);
            let b = tensor("b", dtype, &sb);
            let d = dot(&a, &b).unwrap();
            let shape_a: Vec<usize> = if sa.len() == 2 { vec![5, 7] } else { vec![7] };
            let shape_b: Vec<usize> = if sb.len() == 2 { vec![7, 3] } else { vec![7] };
            let va = rand_value(dtype, &shape_a, 1);
            let vb = kiln::map_value!(rand_value(dtype, &shape_b.iter().rev().copied().collect::<Vec<_>>(), 2), a => a.reversed_axes());
            let fg = kiln::FunctionGraph::new(&[a, b], &[d]).unwrap();
            let fin = |v: &Value| {
                if dtype.is_float() {
                    Value::from_f64_array(
                        dtype,
                        v.to_f64_array()
                            .mapv(|x| if x.is_finite() { x } else { 1.0 }),
                    )
                } else {
                    v.clone()
                }
            };
            let vals = [fin(&va), fin(&vb)];
            let want = kiln::eval::evaluate(&fg, &vals).unwrap();
            let got = kiln::linker::compile(&fg, &Default::default())
                .unwrap()
                .call_values(&vals)
                .unwrap();
            assert_close(
                &got[0],
                &want[0],
                1e-5,
                &format!("dot {dtype} {sa:?} {sb:?}"),
            );
        }
    }
    // Mixed dtypes are cast first.
    let a = tensor("a", DType::F32, &[None, None]);
    let b = tensor("b", DType::I32, &[None, None]);
    let d = dot(&a, &b).unwrap();
    check(
        &[a, b],
        &[d],
        &[
            Value::from(rand_f64(&[3, 4], 1, -1.0, 1.0).mapv(|x| x as f32)),
            rand_value(DType::I32, &[4, 2], 3),
        ],
        64,
        "mixed dot",
    );
}

#[test]
fn outputs_never_alias_inputs_and_repeat_outputs() {
    let x = tensor("x", DType::F64, &[None]);
    let y = &x + 1.0;
    let fg = kiln::FunctionGraph::new(
        std::slice::from_ref(&x),
        &[x.clone(), y.clone(), y.clone(), x.t()],
    )
    .unwrap();
    let f = kiln::linker::compile(&fg, &Default::default()).unwrap();
    let v = Value::from(rand_f64(&[5], 1, 0.0, 1.0));
    let out = f.call_values(std::slice::from_ref(&v)).unwrap();
    assert!(out[0].same_as(&v) && out[3].same_as(&v) && out[1].same_as(&out[2]));
    let Value::F64(a) = &out[0] else { panic!() };
    let Value::F64(b) = &v else { panic!() };
    assert_ne!(a.as_ptr(), b.as_ptr());
    let _ = Tensor::constant;
}
