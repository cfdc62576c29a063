//! The run-time checks that keep kernels inside their operands when a safe
//! API hands kiln a value that contradicts its static type: a `CustomOp`
//! whose results do not match the types it declared (count, dtype, ndim,
//! static size, size-1 broadcastable dimension) and a run-time `Reshape`
//! shape vector of the wrong length. Each is a clear error naming the op,
//! from both the compiled function and the reference evaluator, never a
//! read past a buffer.
use std::sync::Arc;

use kiln::ops::CustomOp;
use kiln::{
    eval, function, tensor, vector, DType, Error, FunctionGraph, Op, Tensor, TensorType, Value,
};
use ndarray::{ArrayD, IxDyn};

/// A user op that declares `declared` as its one output type but returns
/// `copies` copies of `returns`, whatever its input.
#[derive(Debug)]
struct Liar {
    declared: TensorType,
    returns: Value,
    copies: usize,
}

impl CustomOp for Liar {
    fn name(&self) -> String {
        "liar".into()
    }
    fn infer_types(&self, _inputs: &[TensorType]) -> kiln::Result<Vec<TensorType>> {
        Ok(vec![self.declared.clone()])
    }
    fn perform(&self, _inputs: &[&Value]) -> kiln::Result<Vec<Value>> {
        Ok(vec![self.returns.clone(); self.copies])
    }
}

fn f64s(shape: &[usize]) -> Value {
    Value::F64(ArrayD::from_elem(IxDyn(shape), 1.5))
}

/// `liar(x) + y` with `y` of `y_shape`'s rank, compiled (FAST_RUN), and
/// run on a 2,000,000-element `y` (or `y_shape`): the call and the reference
/// evaluator must both fail with an error of the op containing `expect`.
fn assert_refused(liar: Liar, y_shape: &[usize], expect: &str) {
    let declared = liar.declared.clone();
    let x = vector("x", DType::F64);
    let c = Tensor::apply(Op::Custom(Arc::new(liar)), &[&x]).unwrap();
    let y = tensor("y", declared.dtype, &vec![None; declared.ndim()]);
    let out = &c + &y;
    let ins = [x, y];
    let outs = [out];
    let xv = f64s(&[3]);
    let yv = Value::from_f64_array(declared.dtype, ArrayD::from_elem(IxDyn(y_shape), 0.5));
    let check = |e: Error, who: &str| {
        let msg = e.to_string();
        assert!(
            msg.contains("liar") && msg.contains(expect),
            "{who}: the error names the op and says {expect:?}: {msg}"
        );
    };
    let f = function(&ins, &outs).compile().unwrap();
    check(
        f.call_values(&[xv.clone(), yv.clone()]).unwrap_err(),
        "compiled",
    );
    let mut dst = vec![Value::from_f64_array(
        declared.dtype,
        ArrayD::zeros(IxDyn(y_shape)),
    )];
    check(
        f.call_into(&[(&xv).into(), (&yv).into()], &mut dst)
            .unwrap_err(),
        "call_into",
    );
    let fg = FunctionGraph::new(&ins, &outs).unwrap();
    check(eval::evaluate(&fg, &[xv, yv]).unwrap_err(), "reference");
}

const BIG: usize = 2_000_000;

#[test]
fn a_custom_op_returning_more_elements_than_its_static_size_is_an_error() {
    // Declares f64[(1)], returns 2 elements: broadcast against a long `y`,
    // the element-wise kernel would read it with stride 1.
    let liar = Liar {
        declared: TensorType::new(DType::F64, vec![Some(1)]),
        returns: f64s(&[2]),
        copies: 1,
    };
    assert_refused(liar, &[BIG], "size 2 in dimension 0 instead of 1");
}

#[test]
fn a_custom_op_returning_a_wider_static_size_is_an_error() {
    let liar = Liar {
        declared: TensorType::new(DType::F64, vec![Some(4)]),
        returns: f64s(&[3]),
        copies: 1,
    };
    assert_refused(liar, &[4], "size 3 in dimension 0 instead of 4");
}

#[test]
fn a_custom_op_returning_another_dtype_is_an_error() {
    // Declares f64, returns f32: 8-byte loads over 4-byte elements.
    let liar = Liar {
        declared: TensorType::new(DType::F64, vec![None]),
        returns: Value::F32(ArrayD::from_elem(IxDyn(&[BIG]), 1.0)),
        copies: 1,
    };
    assert_refused(liar, &[BIG], "dtype f32 instead of f64");
}

#[test]
fn a_custom_op_returning_another_ndim_is_an_error() {
    let liar = Liar {
        declared: TensorType::new(DType::F64, vec![None]),
        returns: f64s(&[2, 3]),
        copies: 1,
    };
    assert_refused(liar, &[3], "2 dimension(s) instead of 1");
}

#[test]
fn a_custom_op_returning_another_output_count_is_an_error() {
    for copies in [0, 2] {
        let liar = Liar {
            declared: TensorType::new(DType::F64, vec![None]),
            returns: f64s(&[3]),
            copies,
        };
        assert_refused(
            liar,
            &[3],
            &format!("returned {copies} outputs, but its infer_types declares 1"),
        );
    }
}

#[test]
fn a_custom_op_matching_its_declared_type_runs() {
    let x = vector("x", DType::F64);
    let liar = Liar {
        declared: TensorType::new(DType::F64, vec![Some(1)]),
        returns: f64s(&[1]),
        copies: 1,
    };
    let c = Tensor::apply(Op::Custom(Arc::new(liar)), &[&x]).unwrap();
    let y = vector("y", DType::F64);
    let out = &c + &y;
    let f = function(&[x, y], &[out]).compile().unwrap();
    let got = f.call_values(&[f64s(&[3]), f64s(&[5])]).unwrap();
    assert!(got[0].same_as(&Value::F64(ArrayD::from_elem(IxDyn(&[5]), 3.0))));
}

/// `reshape(x, s)` to `ndim` dimensions with a run-time shape vector `s`.
fn runtime_reshape(ndim: usize) -> ([Tensor; 2], [Tensor; 1]) {
    let x = vector("x", DType::F64);
    let s = vector("s", DType::I64);
    let r = Tensor::apply(Op::Reshape { ndim }, &[&x, &s]).unwrap();
    ([x, s], [r.sum_all()])
}

#[test]
fn a_runtime_reshape_vector_of_the_wrong_length_is_an_error() {
    let (ins, outs) = runtime_reshape(2);
    let f = function(&ins, &outs).compile().unwrap();
    let fg = FunctionGraph::new(&ins, &outs).unwrap();
    let x = f64s(&[6]);
    for shape in [vec![6i64], vec![1, 2, 3], vec![]] {
        let n = shape.len();
        let s = Value::I64(ArrayD::from_shape_vec(IxDyn(&[n]), shape).unwrap());
        let want = format!("has {n} entries, but the reshape produces 2 dimension(s)");
        for (who, e) in [
            (
                "compiled",
                f.call_values(&[x.clone(), s.clone()]).unwrap_err(),
            ),
            (
                "reference",
                eval::evaluate(&fg, &[x.clone(), s]).unwrap_err(),
            ),
        ] {
            let msg = e.to_string();
            assert!(
                msg.contains("Reshape") && msg.contains(&want),
                "{who}: {msg}"
            );
        }
    }
    // The right length runs.
    let s = Value::I64(ArrayD::from_shape_vec(IxDyn(&[2]), vec![2, -1]).unwrap());
    let got = f.call_values(&[x, s]).unwrap();
    assert!(got[0].same_as(&Value::F64(ndarray::arr0(9.0).into_dyn())));
}

#[test]
fn alloc_dims_given_at_run_time_are_checked() {
    let v = vector("v", DType::F64);
    let d0 = kiln::scalar("d0", DType::I64);
    let d1 = kiln::scalar("d1", DType::I64);
    let a = kiln::alloc(&v, &[&d0, &d1]).unwrap();
    let ins = [v, d0, d1];
    let f = function(&ins, &[a]).compile().unwrap();
    let i = |n: i64| Value::I64(ndarray::arr0(n).into_dyn());
    let e = f.call_values(&[f64s(&[3]), i(2), i(-1)]).unwrap_err();
    assert!(e.to_string().contains("negative size -1"), "{e}");
    let e = f.call_values(&[f64s(&[3]), i(2), i(4)]).unwrap_err();
    assert!(e.to_string().contains("cannot broadcast"), "{e}");
    let e = f
        .call_values(&[f64s(&[3]), i(1 << 40), i(1 << 40)])
        .unwrap_err();
    assert!(e.to_string().contains("too large"), "{e}");
    let got = f.call_values(&[f64s(&[3]), i(2), i(3)]).unwrap();
    assert_eq!(got[0].shape(), &[2, 3]);
}
