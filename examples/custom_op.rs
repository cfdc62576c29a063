//! A custom op: an operation kiln does not have, defined by its typing and a
//! reference implementation (`CustomOp`), used in a graph like any other op.
//!
//! The op is a cumulative sum of a float vector. The linker JIT-compiles
//! the nodes around it and runs the custom op itself through its `perform`
//! method (the compile profile lists it as a fallback). Typing errors are
//! reported when the graph is built, naming the op.
//!
//! Run with `cargo run --release --example custom_op`.

use std::sync::Arc;

use kiln::linker::Arg;
use kiln::ops::CustomOp;
use kiln::{function, vector, DType, Op, Tensor, TensorType, Value};
use ndarray::{ArrayD, IxDyn};

/// Cumulative sum of a 1-d float vector (numpy's `cumsum`).
#[derive(Debug)]
struct CumSum;

impl CustomOp for CumSum {
    fn name(&self) -> String {
        "cumsum".into()
    }
    fn infer_types(&self, inputs: &[TensorType]) -> kiln::Result<Vec<TensorType>> {
        match inputs {
            [t] if t.dtype.is_float() && t.shape.len() == 1 => Ok(vec![t.clone()]),
            _ => Err(kiln::Error::ty(
                "cumsum",
                format!("expects one float vector, got {inputs:?}"),
            )),
        }
    }
    fn perform(&self, inputs: &[&Value]) -> kiln::Result<Vec<Value>> {
        let x = inputs[0];
        let mut acc = 0.0;
        let out = x.to_f64_array().mapv(|v| {
            acc += v;
            acc
        });
        Ok(vec![Value::from_f64_array(x.dtype(), out)])
    }
}

/// `cumsum(x)` as a tensor.
fn cumsum(x: &Tensor) -> kiln::Result<Tensor> {
    Tensor::apply(Op::Custom(Arc::new(CumSum)), &[x])
}

fn main() -> kiln::Result<()> {
    // The cumulative distribution of softmax(x): cumsum(exp(x)) / sum(exp(x)).
    let x = vector("x", DType::F64);
    let e = x.exp();
    let cdf = &cumsum(&e)? / &e.sum_all();
    let f = function(&[x], &[cdf]).compile()?;
    println!("graph: {}", f.graph());
    println!(
        "run by the reference evaluator: {:?}",
        f.compile_profile().fallbacks()
    );

    let input = ArrayD::from_shape_fn(IxDyn(&[5]), |i| i[0] as f64);
    let out = f.call(&[Arg::from(&input)])?;
    println!(
        "cdf: {:.4?}",
        out[0].to_f64_array().as_slice().expect("1-d")
    );

    // Bad input is a clear error at graph-building time.
    let err = cumsum(&vector("i", DType::I32)).expect_err("an integer vector is refused");
    println!("cumsum of an i32 vector: {err}");
    Ok(())
}
