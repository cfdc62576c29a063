//! Reduction input fusion (`local_careduce_fusion`, in the elemwise_fusion
//! database after the FusionOptimizer): a `CAReduce` whose input is computed
//! by an element-wise node (`Elemwise` or one-output `Composite`) that has no
//! other use becomes one `FusedReduce`, which computes the element-wise
//! values inside the reduction loop (`sum(exp(X - m), axis=1)` in one pass
//! over `X`, the mapped values never stored).
//!
//! Conditions: the producer is not in place, has one output, and that
//! output's clients are the reduction and, at most, `Shape_i` queries, which
//! are answered from an input of the producer with the same extent in that
//! dimension (an input not statically broadcastable there: the fused
//! reduction still checks at run time that the inputs agree). A graph
//! output or any other client keeps the producer, so nothing is computed
//! twice. One-element constants are inlined into the pre-map as the
//! FusionOptimizer does; at least one array input must remain.
//!
//! The value is unchanged: `FusedReduce` is defined as the `CAReduce` of the
//! Composite (the reference evaluator computes it that way). A second pass
//! changes nothing: only `CAReduce` nodes are rewritten, and one whose
//! producer was refused is refused again.

use std::sync::Arc;

use crate::error::Result;
use crate::graph::{Client, DType, FunctionGraph, NodeId, ReplaceValidate, Value, VarId};
use crate::ops::{CRef, Composite, Op, ScalarConst};

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReduceFusionStats {
    /// Reductions that absorbed their producer.
    pub fused: usize,
    /// Fusions refused by validation.
    pub inconsistent: usize,
}

/// Fuses every eligible element-wise producer into its `CAReduce` consumer
/// (see the module docs).
pub fn fuse_reductions(fg: &mut FunctionGraph) -> Result<ReduceFusionStats> {
    let mut stats = ReduceFusionStats::default();
    for r in fg.toposort() {
        if !fg.contains_node(r) {
            continue;
        }
        let Some(pairs) = local_careduce_fusion(fg, r)? else {
            continue;
        };
        let ok = if fg.has_feature::<ReplaceValidate>() {
            fg.replace_all_validate(&pairs, "local_careduce_fusion")
                .is_ok()
        } else {
            fg.replace_all(&pairs, "local_careduce_fusion").is_ok()
        };
        if ok {
            stats.fused += 1;
        } else {
            stats.inconsistent += 1;
        }
    }
    Ok(stats)
}

/// The replacements fusing the producer of reduction node `r` into it: the
/// reduction's output by a detached `FusedReduce`, and each `Shape_i` query
/// of the producer's output by one of an input; `None` when not eligible.
pub fn local_careduce_fusion(
    fg: &mut FunctionGraph,
    r: NodeId,
) -> Result<Option<Vec<(VarId, VarId)>>> {
    let Op::CAReduce { op, axes } = fg.node(r).op.clone() else {
        return Ok(None);
    };
    let x = fg.node(r).inputs[0];
    let Some(p) = fg.owner(x) else {
        return Ok(None);
    };
    let producer = fg.node(p).clone();
    if producer.outputs.len() != 1 || !producer.op.destroy_map().is_empty() {
        return Ok(None);
    }
    // Clients: the reduction, and shape queries only.
    let mut shape_queries: Vec<(VarId, usize)> = Vec::new();
    for c in fg.clients(x) {
        match *c {
            Client::Node(n, _) if n == r => {}
            Client::Node(n, _) => match fg.node(n).op {
                Op::ShapeI(d) if fg.node(n).inputs.len() == 1 => {
                    shape_queries.push((fg.node(n).outputs[0], d))
                }
                _ => return Ok(None),
            },
            Client::Output(_) => return Ok(None),
        }
    }
    let Some((pre, inputs)) = pre_map(fg, &producer.op, &producer.inputs)? else {
        return Ok(None);
    };
    let fused = fg.apply1(
        Op::FusedReduce {
            op,
            axes,
            pre: Arc::new(pre),
        },
        &inputs,
    )?;
    let old = fg.node(r).outputs[0];
    if !fg.ty(old).accepts_replacement(fg.ty(fused)) {
        return Ok(None);
    }
    let mut pairs = vec![(old, fused)];
    for (q, d) in shape_queries {
        let extent = match producer
            .inputs
            .iter()
            .find(|&&i| !fg.ty(i).is_broadcastable(d))
        {
            Some(&i) => fg.apply1(Op::ShapeI(d), &[i])?,
            // Every input is statically 1 there, hence so is the output.
            None => fg.constant(Value::scalar_i64(DType::I64, 1)),
        };
        pairs.push((q, extent));
    }
    Ok(Some(pairs))
}

/// The one-output pre-map computing `op` on `args`, and its array inputs
/// (one-element constants inlined); `None` when `op` is not element-wise
/// or no array input would remain.
fn pre_map(fg: &FunctionGraph, op: &Op, args: &[VarId]) -> Result<Option<(Composite, Vec<VarId>)>> {
    match op {
        Op::Elemwise { scalar, .. } => {
            let mut inputs: Vec<VarId> = Vec::new();
            let mut c = Composite::new(Vec::new());
            let mut refs = Vec::with_capacity(args.len());
            for &a in args {
                match fg.constant_value(a) {
                    Some(v) if v.len() == 1 => {
                        refs.push(CRef::Const(ScalarConst::of_value(v).expect("one element")))
                    }
                    _ => {
                        let k = match inputs.iter().position(|&i| i == a) {
                            Some(k) => k,
                            None => {
                                inputs.push(a);
                                c.inputs.push(fg.ty(a).dtype);
                                inputs.len() - 1
                            }
                        };
                        refs.push(CRef::Input(k as u32));
                    }
                }
            }
            if inputs.is_empty() {
                return Ok(None);
            }
            let out = c.push(*scalar, &refs)?;
            c.outputs = vec![out];
            Ok(Some((c, inputs)))
        }
        Op::Composite { composite, .. } if composite.outputs.len() == 1 => {
            Ok(Some(((**composite).clone(), args.to_vec())))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::evaluate;
    use crate::graph::print::pprint_outputs;
    use crate::tensor::*;
    use ndarray::{arr1, arr2};

    #[test]
    fn an_elemwise_producer_with_one_client_is_fused() {
        let x = matrix("x", DType::F64);
        let y = x.exp().sum(&[1]).unwrap();
        let mut fg = FunctionGraph::new(&[x], &[y]).unwrap();
        let before = evaluate(
            &fg,
            &[Value::F64(arr2(&[[0.0, 1.0], [2.0, 3.0]]).into_dyn())],
        )
        .unwrap();
        let s = fuse_reductions(&mut fg).unwrap();
        fg.check_integrity().unwrap();
        assert_eq!(s.fused, 1);
        assert_eq!(pprint_outputs(&fg), "sum(exp(x), axis=1)"); // the FusedReduce, inline
        let after = evaluate(
            &fg,
            &[Value::F64(arr2(&[[0.0, 1.0], [2.0, 3.0]]).into_dyn())],
        )
        .unwrap();
        assert_eq!(before, after);
        assert_eq!(fuse_reductions(&mut fg).unwrap().fused, 0, "idempotent");
    }

    #[test]
    fn a_producer_used_elsewhere_is_kept() {
        let x = vector("x", DType::F64);
        let e = x.exp();
        let y = e.sum_all();
        let mut fg = FunctionGraph::new(&[x], &[y, e]).unwrap();
        assert_eq!(fuse_reductions(&mut fg).unwrap().fused, 0);
        assert_eq!(pprint_outputs(&fg), "sum(exp(x))\nexp(x)");
    }

    #[test]
    fn one_element_constants_are_inlined_and_shape_queries_redirected() {
        let x = vector("x", DType::F64);
        let e = &x * 2.0;
        let n = e.shape_i(0).unwrap();
        let y = e.sum_all();
        let mut fg = FunctionGraph::new(&[x], &[y, n]).unwrap();
        assert_eq!(fuse_reductions(&mut fg).unwrap().fused, 1);
        fg.check_integrity().unwrap();
        assert_eq!(pprint_outputs(&fg), "sum((x * 2.0))\nShape_i{0}(x)");
        let out = evaluate(&fg, &[Value::F64(arr1(&[1.0, 2.5]).into_dyn())]).unwrap();
        assert_eq!(out[0].scalar_as_f64(), Some(7.0));
        assert_eq!(out[1].scalar_as_f64(), Some(2.0));
    }
}
