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
//! Post-map fusion (`local_reduce_post_fusion`, the same pass, after every
//! producer is fused): the element-wise consumer of a `FusedReduce` (one
//! output, not in place) that is the only client of the reduced value and
//! whose other operands each hold one element becomes the reduction's
//! post-map, computed by the reduction's kernel over the reduced values
//! (`mean(f(x))`, which FAST_RUN leaves as `sum(f(x)) / cast(n)`, is one
//! kernel). One-element constants are inlined into the post-map.
//!
//! The value is unchanged: `FusedReduce` is defined as the `CAReduce` of the
//! Composite, then the post-map Composite (the reference evaluator computes
//! it that way). A second pass changes nothing: only `CAReduce` nodes and
//! `FusedReduce` nodes without a post-map are rewritten, and one that was
//! refused is refused again.

use std::sync::Arc;

use crate::error::Result;
use crate::graph::{Client, DType, FunctionGraph, NodeId, ReplaceValidate, Value, VarId};
use crate::ops::{CRef, Composite, Op, ScalarConst};

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReduceFusionStats {
    /// Reductions that absorbed their producer, or their consumer as a
    /// post-map.
    pub fused: usize,
    /// Fusions refused by validation.
    pub inconsistent: usize,
}

/// Fuses every eligible element-wise producer into its `CAReduce` consumer,
/// then every eligible element-wise consumer of a `FusedReduce` into it as
/// its post-map (see the module docs).
pub fn fuse_reductions(fg: &mut FunctionGraph) -> Result<ReduceFusionStats> {
    let mut stats = ReduceFusionStats::default();
    let order = fg.toposort();
    fuse_each(
        fg,
        &order,
        "local_careduce_fusion",
        local_careduce_fusion,
        &mut stats,
    )?;
    // Post-maps in any order: each candidate's consumer reads it alone.
    let fused: Vec<NodeId> = fg
        .node_ids()
        .filter(|&n| matches!(fg.node(n).op, Op::FusedReduce { post: None, .. }))
        .collect();
    fuse_each(
        fg,
        &fused,
        "local_reduce_post_fusion",
        local_reduce_post_fusion,
        &mut stats,
    )?;
    Ok(stats)
}

/// Applies `rule` (named `name`) at each node of `nodes` still in the graph,
/// validating its replacements when the graph has `ReplaceValidate`.
fn fuse_each(
    fg: &mut FunctionGraph,
    nodes: &[NodeId],
    name: &str,
    rule: PairsRule,
    stats: &mut ReduceFusionStats,
) -> Result<()> {
    for &r in nodes {
        if !fg.contains_node(r) {
            continue;
        }
        let Some(pairs) = rule(fg, r)? else {
            continue;
        };
        let ok = if fg.has_feature::<ReplaceValidate>() {
            fg.replace_all_validate(&pairs, name).is_ok()
        } else {
            fg.replace_all(&pairs, name).is_ok()
        };
        if ok {
            stats.fused += 1;
        } else {
            stats.inconsistent += 1;
        }
    }
    Ok(())
}

type PairsRule = fn(&mut FunctionGraph, NodeId) -> Result<Option<Vec<(VarId, VarId)>>>;

/// The replacement fusing the element-wise consumer of `FusedReduce` node
/// `r` (without a post-map) into it as its post-map: the consumer is the
/// only client of the reduction's value (not a graph output), is an
/// `Elemwise` or one-output `Composite` not in place, and its other inputs
/// each hold one element (every dimension statically broadcastable; one
/// element constants are inlined), so that its output has the reduced
/// value's shape and every extra is read once per call: a mean's `sum / n`
/// is computed by the reduction's kernel. `None` when not eligible.
pub fn local_reduce_post_fusion(
    fg: &mut FunctionGraph,
    r: NodeId,
) -> Result<Option<Vec<(VarId, VarId)>>> {
    let Op::FusedReduce {
        op,
        axes,
        pre,
        post: None,
    } = fg.node(r).op.clone()
    else {
        return Ok(None);
    };
    let value = fg.node(r).outputs[0];
    let mut consumer = None;
    for c in fg.clients(value) {
        match *c {
            Client::Node(n, _) if consumer.is_none_or(|m| m == n) => consumer = Some(n),
            _ => return Ok(None),
        }
    }
    let Some(c) = consumer else {
        return Ok(None);
    };
    let node = fg.node(c).clone();
    if node.outputs.len() != 1 || !node.op.destroy_map().is_empty() {
        return Ok(None);
    }
    let one_element = |v: VarId| fg.ty(v).broadcastable().iter().all(|&b| b);
    if node.inputs.iter().any(|&a| a != value && !one_element(a)) {
        return Ok(None);
    }
    let Some((post, extras)) = post_map(fg, &node.op, &node.inputs, value)? else {
        return Ok(None);
    };
    let mut inputs = fg.node(r).inputs.to_vec();
    inputs.extend(extras);
    let fused = fg.apply1(
        Op::FusedReduce {
            op,
            axes,
            pre,
            post: Some(Arc::new(post)),
        },
        &inputs,
    )?;
    let old = node.outputs[0];
    if !fg.ty(old).accepts_replacement(fg.ty(fused)) {
        return Ok(None);
    }
    Ok(Some(vec![(old, fused)]))
}

/// The one-output post-map computing `op` on `args` where `value` is its
/// input 0, and its extras (the other non-constant arguments, deduplicated;
/// one-element constants inlined); `None` when `op` is not element-wise.
fn post_map(
    fg: &FunctionGraph,
    op: &Op,
    args: &[VarId],
    value: VarId,
) -> Result<Option<(Composite, Vec<VarId>)>> {
    let mut dtypes = vec![fg.ty(value).dtype];
    let mut extras: Vec<VarId> = Vec::new();
    let mut refs = Vec::with_capacity(args.len());
    for &a in args {
        refs.push(if a == value {
            CRef::Input(0)
        } else if let Some(k) = fg
            .constant_value(a)
            .filter(|v| v.len() == 1)
            .and_then(ScalarConst::of_value)
        {
            CRef::Const(k)
        } else {
            // Input 0 is the reduced value: the extras follow it.
            CRef::Input(1 + operand_index(fg, &mut dtypes, &mut extras, a) as u32)
        });
    }
    let c = match op {
        Op::Elemwise { scalar, .. } => {
            let mut c = Composite::new(dtypes);
            let out = c.push(*scalar, &refs)?;
            c.outputs = vec![out];
            c
        }
        Op::Composite { composite, .. } if composite.outputs.len() == 1 => {
            composite.substitute_inputs(&refs, dtypes)
        }
        _ => return Ok(None),
    };
    Ok(Some((c, extras)))
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
            post: None,
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

/// The position of `a` among `operands`, appended (and its dtype to
/// `dtypes`, the program's input dtypes) when it is not there yet.
fn operand_index(
    fg: &FunctionGraph,
    dtypes: &mut Vec<DType>,
    operands: &mut Vec<VarId>,
    a: VarId,
) -> usize {
    operands.iter().position(|&o| o == a).unwrap_or_else(|| {
        operands.push(a);
        dtypes.push(fg.ty(a).dtype);
        operands.len() - 1
    })
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
                        let k = operand_index(fg, &mut c.inputs, &mut inputs, a);
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
