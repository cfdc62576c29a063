//! Primitive forms of the ops that are sugar for a small graph of other
//! ops, so that their gradient is the gradient of that graph and they need
//! no pullback of their own: a `Composite` is its scalar graph applied
//! element-wise node by node, a `FusedReduce` is the `CAReduce` of its
//! pre-map `Composite` (then its post-map `Composite`, if any), a `Gemm` is `beta * z + alpha * dot(x, y)`.
//!
//! Invariant: the expansion computes the same values as the op (the
//! reference evaluator's `Composite` rounds after every node exactly as the
//! expansion does), and each expanded output has the op output's dtype; its
//! static shape may be narrower (an output that is directly a Composite input
//! or constant), which the driver handles by summing the seed gradient.

use crate::error::Result;
use crate::graph::Value;
use crate::ops::{CRef, Composite, Op};
use crate::tensor::{add, dot, elemwise, mul, Tensor};

/// The primitive graph computing `op` of `inputs`, one tensor per output,
/// or `None` when `op` is itself primitive (it has a pullback).
pub fn primitive_form(op: &Op, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>>> {
    match op {
        Op::Composite { composite, .. } => Some(expand_composite(composite, inputs)),
        Op::FusedReduce {
            op: r,
            axes,
            pre,
            post,
        } => Some((|| {
            let (pre_ins, extras) = crate::ops::split_fused(pre, inputs);
            let mapped = Tensor::apply(
                Op::composite((**pre).clone()),
                &pre_ins.iter().collect::<Vec<_>>(),
            )?;
            let reduced = Tensor::apply(
                Op::CAReduce {
                    op: *r,
                    axes: axes.clone(),
                },
                &[&mapped],
            )?;
            match post {
                None => Ok(vec![reduced]),
                Some(post) => {
                    let mut args = vec![&reduced];
                    args.extend(extras);
                    Ok(vec![Tensor::apply(Op::composite((**post).clone()), &args)?])
                }
            }
        })()),
        Op::Gemm { .. } => Some((|| {
            let [z, alpha, x, y, beta] = inputs else {
                unreachable!("type inference checked Gemm's five inputs")
            };
            Ok(vec![add(&mul(beta, z)?, &mul(alpha, &dot(x, y)?)?)?])
        })()),
        _ => None,
    }
}

/// A Composite's scalar graph as Elemwise nodes over `inputs`.
fn expand_composite(comp: &Composite, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    let mut nodes: Vec<Tensor> = Vec::with_capacity(comp.nodes.len());
    let get = |nodes: &Vec<Tensor>, r: CRef| match r {
        CRef::Input(i) => inputs[i as usize].clone(),
        CRef::Node(i) => nodes[i as usize].clone(),
        CRef::Const(k) if k.dtype.is_float() => {
            Tensor::constant(Value::scalar_f64(k.dtype, k.as_f64()))
        }
        CRef::Const(k) => Tensor::constant(Value::scalar_i64(k.dtype, k.as_i64())),
    };
    for n in &comp.nodes {
        let args: Vec<Tensor> = n.args.iter().map(|&a| get(&nodes, a)).collect();
        let refs: Vec<&Tensor> = args.iter().collect();
        nodes.push(elemwise(n.op, &refs)?);
    }
    Ok(comp.outputs.iter().map(|&o| get(&nodes, o)).collect())
}
