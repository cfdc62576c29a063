//! Elemwise fusion: maximal convex groups of element-wise nodes with the
//! same output broadcast pattern become one `Composite` node, computed in a
//! single pass over memory. A producer of one element (every dimension
//! statically broadcastable, such as a gradient's `cast(n)` of a 0-d
//! size) that only members of a group read joins that group whatever its
//! pattern: the kernel computes it once per call (`linker::codegen::hoist`)
//! instead of as a kernel of its own.
//!
//! Algorithm (near-linear; one topological sort, no re-sort per candidate):
//! nodes get their index in a topological order. Roots are taken from the
//! last node backwards; a group grows from its root towards the inputs,
//! always examining the candidate with the largest index first (a max-heap),
//! so that when a producer is examined every client that could join the
//! group already has. A producer joins when its output has the root's
//! broadcast pattern and every client outside the group comes after the
//! root in the order (such a client cannot lead back into the group, which
//! keeps the group convex); its value then becomes an extra output of the
//! Composite (multi-output). The number of Composite inputs is bounded by
//! `max_operands`, and its size by [`MAX_FUSED_NODES`]. Scalar constants are inlined into the Composite; only
//! values used outside the group become outputs.
//!
//! Groups are built after all grouping decisions, producers first, each from
//! the current graph, so a group's inputs always name live variables.

use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::error::Result;
use crate::graph::{Client, FunctionGraph, NodeId, ReplaceValidate, VarId};
use crate::ops::{CRef, Composite, Op, ScalarConst, ScalarOp};

/// The default bound on the number of inputs of a fused Composite.
pub const DEFAULT_MAX_OPERANDS: usize = 32;

/// The bound on the number of scalar nodes of a fused Composite (a kernel
/// of thousands of operations compiles slowly and spills registers).
pub const MAX_FUSED_NODES: usize = 256;

/// What one fusion pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FusionStats {
    /// Groups of two or more nodes found.
    pub groups: usize,
    /// Element-wise nodes absorbed into Composites.
    pub fused_nodes: usize,
    /// Composites whose replacement was refused by validation.
    pub inconsistent: usize,
}

pub(super) fn fuseable(fg: &FunctionGraph, n: NodeId) -> bool {
    match &fg.node(n).op {
        Op::Elemwise { inplace, .. } | Op::Composite { inplace, .. } => inplace.is_empty(),
        _ => false,
    }
}

/// Scalar operations a node contributes to a Composite.
pub(super) fn scalar_size(fg: &FunctionGraph, n: NodeId) -> usize {
    match &fg.node(n).op {
        Op::Composite { composite, .. } => composite.nodes.len(),
        _ => 1,
    }
}

/// Whether nodes `a` and `b` have the same broadcast pattern (that of
/// their first outputs).
pub(super) fn same_pattern(fg: &FunctionGraph, a: NodeId, b: NodeId) -> bool {
    let shape = |n: NodeId| &fg.ty(fg.node(n).outputs[0]).shape;
    let (sa, sb) = (shape(a), shape(b));
    sa.len() == sb.len()
        && sa
            .iter()
            .zip(sb)
            .all(|(x, y)| (*x == Some(1)) == (*y == Some(1)))
}

/// Whether every output of `p` has one element (every dimension statically
/// broadcastable) and is read by members of group `gid` only. Such a
/// producer can join a group of another pattern: it never becomes an
/// output of the Composite (whose outputs have the group's shape), and
/// since every node reading it is in the group, the group stays convex.
/// Its clients' membership is final when it is examined (see
/// [`fuse_elemwise`]: candidates are examined in decreasing order).
fn one_element_feeder(fg: &FunctionGraph, p: NodeId, gid: usize, group_of: &[usize]) -> bool {
    fg.node(p).outputs.iter().all(|&o| {
        fg.ty(o).shape.iter().all(|&d| d == Some(1))
            && fg.clients(o).iter().all(|c| match *c {
                Client::Node(c, _) => group_of[c.index()] == gid,
                Client::Output(_) => false,
            })
    })
}

/// No position in the order (for a node not in it) / no group.
const NONE: usize = usize::MAX;

/// Fuses element-wise sub-graphs of `fg` into Composites (see the module docs).
pub fn fuse_elemwise(fg: &mut FunctionGraph, max_operands: usize) -> Result<FusionStats> {
    let order = fg.toposort();
    // Per node index: its position in `order`, and its group.
    let mut index = vec![NONE; fg.node_capacity()];
    for (k, &n) in order.iter().enumerate() {
        index[n.index()] = k;
    }
    let mut group_of = vec![NONE; fg.node_capacity()];
    // Per variable index: how many times the group being grown lists it
    // among its external inputs (all zero between groups).
    let mut uses = vec![0u32; fg.var_capacity()];
    let mut groups: Vec<Vec<NodeId>> = Vec::new();
    for &root in order.iter().rev() {
        if group_of[root.index()] != NONE || !fuseable(fg, root) {
            continue;
        }
        let gid = groups.len();
        let root_idx = index[root.index()];
        let mut members = vec![root];
        let mut scalar_nodes = scalar_size(fg, root);
        group_of[root.index()] = gid;
        let mut external_inputs: Vec<VarId> = fg.node(root).inputs.to_vec();
        for v in &external_inputs {
            uses[v.index()] += 1;
        }
        // How many of them are operands (not inlinable constants).
        let mut external_operands = external_inputs
            .iter()
            .filter(|&&v| !is_inlinable(fg, v))
            .count();
        let mut heap: BinaryHeap<(usize, NodeId)> = BinaryHeap::new();
        let push_inputs =
            |fg: &FunctionGraph, heap: &mut BinaryHeap<(usize, NodeId)>, n: NodeId| {
                for &i in &fg.node(n).inputs {
                    if let Some(p) = fg.owner(i) {
                        heap.push((index[p.index()], p));
                    }
                }
            };
        push_inputs(fg, &mut heap, root);
        while let Some((_, p)) = heap.pop() {
            if group_of[p.index()] != NONE
                || !fuseable(fg, p)
                || !(same_pattern(fg, p, root) || one_element_feeder(fg, p, gid, &group_of))
                || scalar_nodes + scalar_size(fg, p) > MAX_FUSED_NODES
            {
                continue;
            }
            let outs = &fg.node(p).outputs;
            let convex = outs.iter().all(|&o| {
                fg.clients(o).iter().all(|c| match *c {
                    Client::Node(c, _) => group_of[c.index()] == gid || index[c.index()] > root_idx,
                    Client::Output(_) => true,
                })
            });
            if !convex {
                continue;
            }
            // Operand bound: inputs of the group after absorbing p. Its
            // outputs (never inlinable) stop being inputs; its inputs not
            // yet among them and not inlinable become inputs.
            let kept = |v: &VarId| !outs.contains(v);
            let mut added: SmallVec<[VarId; 4]> = SmallVec::new();
            for &i in &fg.node(p).inputs {
                let known = added.contains(&i) || (uses[i.index()] > 0 && kept(&i));
                if !known && !is_inlinable(fg, i) {
                    added.push(i);
                }
            }
            let dropped: usize = outs.iter().map(|o| uses[o.index()] as usize).sum();
            let operands = external_operands - dropped + added.len();
            if operands > max_operands {
                continue;
            }
            if dropped > 0 {
                external_inputs.retain(|v| kept(v));
                for o in outs {
                    uses[o.index()] = 0;
                }
            }
            for &a in &added {
                uses[a.index()] += 1;
            }
            external_inputs.extend(added);
            external_operands = operands;
            scalar_nodes += scalar_size(fg, p);
            members.push(p);
            group_of[p.index()] = gid;
            push_inputs(fg, &mut heap, p);
        }
        for v in &external_inputs {
            uses[v.index()] = 0;
        }
        groups.push(members);
    }

    let mut stats = FusionStats::default();
    // Producers first: groups sorted by their root's position.
    let mut todo: Vec<Vec<NodeId>> = groups.into_iter().filter(|g| g.len() > 1).collect();
    todo.sort_by_key(|g| index[g[0].index()]);
    for mut members in todo {
        members.sort_by_key(|n| index[n.index()]);
        stats.groups += 1;
        match build_composite(fg, &members)? {
            Some(pairs) => {
                if replace_group(fg, &pairs, "elemwise_fusion") {
                    stats.fused_nodes += members.len();
                } else {
                    stats.inconsistent += 1;
                }
            }
            None => stats.inconsistent += 1,
        }
    }
    Ok(stats)
}

/// Repeats [`fuse_elemwise`] until a pass finds nothing to fuse (a pass can
/// enable another: a Composite is itself fuseable), at most 16 times, so
/// that fusing an already fused graph changes nothing.
pub fn fuse_to_fixed_point(fg: &mut FunctionGraph, max_operands: usize) -> Result<FusionStats> {
    let mut total = FusionStats::default();
    for _ in 0..16 {
        let s = fuse_elemwise(fg, max_operands)?;
        total.groups += s.groups;
        total.fused_nodes += s.fused_nodes;
        total.inconsistent += s.inconsistent;
        if s.fused_nodes == 0 {
            break;
        }
    }
    Ok(total)
}

/// Replaces a group's outputs by the Composite's, validating when the graph
/// has ReplaceValidate; false when the replacement was refused.
pub(super) fn replace_group(
    fg: &mut FunctionGraph,
    pairs: &[(VarId, VarId)],
    reason: &str,
) -> bool {
    if fg.has_feature::<ReplaceValidate>() {
        fg.replace_all_validate(pairs, reason).is_ok()
    } else {
        fg.replace_all(pairs, reason).is_ok()
    }
}

/// A one-element constant, inlined into the Composite instead of passed in.
pub(super) fn is_inlinable(fg: &FunctionGraph, v: VarId) -> bool {
    fg.constant_value(v).is_some_and(|c| c.len() == 1)
}

/// Builds the Composite for `members` (in topological order) and returns the
/// replacements of the member outputs used outside the group.
pub(super) fn build_composite(
    fg: &mut FunctionGraph,
    members: &[NodeId],
) -> Result<Option<Vec<(VarId, VarId)>>> {
    let member_set: rustc_hash::FxHashSet<NodeId> = members.iter().copied().collect();
    let mut inputs: Vec<VarId> = Vec::new();
    let mut refs: FxHashMap<VarId, CRef> = FxHashMap::default();
    let mut c = Composite::new(Vec::new());
    // Each distinct (op, arguments) once: members that compute the same
    // scalar expression (two `x * y` the rewrites left apart, or an inner
    // Composite's copy of a member) share one node, so that the kernel
    // computes it once and sees one value (a paired call needs its `a` and
    // `neg(a)` of the same `a`).
    let mut shared: FxHashMap<(ScalarOp, SmallVec<[CRef; 3]>), CRef> = FxHashMap::default();
    let mut push = |c: &mut Composite, op: ScalarOp, args: &[CRef]| -> Result<CRef> {
        let key = (op, SmallVec::from_slice(args));
        if let Some(&r) = shared.get(&key) {
            return Ok(r);
        }
        let r = c.push(op, args)?;
        shared.insert(key, r);
        Ok(r)
    };
    for &n in members {
        let node = fg.node(n);
        let mut args = Vec::with_capacity(node.inputs.len());
        for &i in &node.inputs {
            let r = match refs.get(&i) {
                Some(&r) => r,
                None => {
                    let r = match fg.constant_value(i) {
                        Some(v) if v.len() == 1 => {
                            CRef::Const(ScalarConst::of_value(v).expect("one element"))
                        }
                        _ => {
                            inputs.push(i);
                            c.inputs.push(fg.ty(i).dtype);
                            CRef::Input(c.inputs.len() as u32 - 1)
                        }
                    };
                    refs.insert(i, r);
                    r
                }
            };
            args.push(r);
        }
        match &node.op {
            Op::Elemwise { scalar, .. } => {
                let r = push(&mut c, *scalar, &args)?;
                refs.insert(node.outputs[0], r);
            }
            Op::Composite {
                composite: inner, ..
            } => {
                // Inline the inner composite, remapping its inputs to `args`.
                let mut local: Vec<CRef> = Vec::with_capacity(inner.nodes.len());
                let map = |r: CRef, local: &Vec<CRef>| match r {
                    CRef::Input(k) => args[k as usize],
                    CRef::Node(k) => local[k as usize],
                    CRef::Const(_) => r,
                };
                for cn in &inner.nodes {
                    let a: Vec<CRef> = cn.args.iter().map(|&r| map(r, &local)).collect();
                    local.push(push(&mut c, cn.op, &a)?);
                }
                for (o, &r) in node.outputs.iter().zip(&inner.outputs) {
                    refs.insert(*o, map(r, &local));
                }
            }
            _ => return Ok(None),
        }
    }
    // Outputs: member outputs with a client outside the group.
    let mut old_outs = Vec::new();
    for &n in members {
        for &o in &fg.node(n).outputs {
            let external = fg.clients(o).iter().any(|c| match *c {
                Client::Node(m, _) => !member_set.contains(&m),
                Client::Output(_) => true,
            });
            if external {
                old_outs.push(o);
                c.outputs.push(refs[&o]);
            }
        }
    }
    if c.outputs.is_empty() || inputs.is_empty() {
        return Ok(None);
    }
    // `push` typed every node as it was added; the full check (which
    // rebuilds the Composite) is for verifying runs.
    if crate::graph::fgraph::verify_by_default() {
        c.check()?;
    }
    let node = fg.apply(Op::composite(c), &inputs)?;
    let new_outs = fg.node(node).outputs.clone();
    for (&old, &new) in old_outs.iter().zip(&new_outs) {
        if !fg.ty(old).accepts_replacement(fg.ty(new)) {
            return Ok(None);
        }
    }
    Ok(Some(old_outs.into_iter().zip(new_outs).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::evaluate;
    use crate::tensor::*;
    use crate::{DType, Value};
    use ndarray::arr1;

    fn fused(fg: &mut FunctionGraph) -> FusionStats {
        let s = fuse_elemwise(fg, DEFAULT_MAX_OPERANDS).unwrap();
        fg.check_integrity().unwrap();
        s
    }

    #[test]
    fn a_chain_becomes_one_composite() {
        let x = vector("x", DType::F64);
        let y = (1.0 + x.exp()).log();
        let mut fg = FunctionGraph::new(&[x], &[y]).unwrap();
        let s = fused(&mut fg);
        assert_eq!(s.groups, 1);
        assert_eq!(
            fg.to_string(),
            "FunctionGraph(Composite{log(add(1.0, exp(i0)))}(x))"
        );
        let out = evaluate(&fg, &[Value::F64(arr1(&[0.0, 1.0]).into_dyn())]).unwrap();
        assert!(out[0].allclose(
            &Value::F64(arr1(&[2f64.ln(), (1.0 + 1f64.exp()).ln()]).into_dyn()),
            1e-15,
            0.0
        ));
    }

    #[test]
    fn a_shared_intermediate_inside_the_group_is_computed_once() {
        let x = vector("x", DType::F64);
        let s = x.sqr();
        let y = &(&s * &x) + &(&s * 3.0);
        let mut fg = FunctionGraph::new(&[x], &[y]).unwrap();
        fused(&mut fg);
        assert_eq!(fg.n_nodes(), 1);
        assert_eq!(
            fg.to_string(),
            "FunctionGraph(Composite{add(mul(sqr(i0), i0), mul(sqr(i0), 3.0))}(x))"
        );
    }

    #[test]
    fn members_computing_the_same_expression_share_one_node() {
        // Two `x * y` nodes (as rewrites that run after merging can leave
        // them) become one node of the Composite; the value is unchanged.
        let x = vector("x", DType::F64);
        let y = vector("y", DType::F64);
        let a = &x * &y;
        let b = &x * &y;
        let out = &(-&a).sigmoid() + &b.sigmoid();
        let mut fg = FunctionGraph::new(&[x, y], &[out]).unwrap();
        let vals = [
            Value::F64(arr1(&[0.5, -2.0, 0.0]).into_dyn()),
            Value::F64(arr1(&[3.0, 1.5, -1.0]).into_dyn()),
        ];
        let before = evaluate(&fg, &vals).unwrap();
        assert_eq!(fg.n_nodes(), 6);
        fused(&mut fg);
        let Op::Composite { composite, .. } = &fg.node(fg.toposort()[0]).op else {
            panic!("one Composite: {fg}");
        };
        let muls = composite
            .nodes
            .iter()
            .filter(|n| n.op == ScalarOp::Mul)
            .count();
        assert_eq!(
            (fg.n_nodes(), composite.nodes.len(), muls),
            (1, 5, 1),
            "{fg}"
        );
        let after = evaluate(&fg, &vals).unwrap();
        assert!(
            after[0].allclose(&before[0], 0.0, 0.0),
            "{after:?} vs {before:?}"
        );
    }

    #[test]
    fn an_intermediate_used_outside_becomes_a_second_output() {
        let x = vector("x", DType::F64);
        let e = x.exp();
        let y = &e + 1.0;
        let total = e.sum_all();
        let mut fg = FunctionGraph::new(&[x], &[y, total]).unwrap();
        fused(&mut fg);
        assert_eq!(fg.n_nodes(), 2, "{fg}");
        let comp = fg.owner(fg.outputs()[0]).unwrap();
        assert_eq!(fg.node(comp).outputs.len(), 2);
        let out = evaluate(&fg, &[Value::F64(arr1(&[0.0, 0.0]).into_dyn())]).unwrap();
        assert_eq!(out[1].scalar_as_f64(), Some(2.0));
    }

    #[test]
    fn different_broadcast_patterns_are_not_fused() {
        let u = vector("u", DType::F64);
        let v = vector("v", DType::F64);
        let o = (&u.exp().expand_dims(1).unwrap() + &v.expand_dims(0).unwrap()).tanh();
        let mut fg = FunctionGraph::new(&[u, v], &[o]).unwrap();
        fused(&mut fg);
        // exp(u) is 1-d and broadcast: it stays outside the 2-d group.
        assert!(fg.to_string().contains("exp(u)"), "{fg}");
    }

    #[test]
    fn one_element_producers_read_only_inside_join_the_group() {
        // x / cast(n) + exp(a): the 0-d cast and exp (made 1-d one-element
        // by the broadcast) join the group of the vector; their value is
        // unchanged.
        let x = vector("x", DType::F64);
        let n = scalar("n", DType::I64);
        let a = scalar("a", DType::F64);
        // (Canonicalization lifts DimShuffles to the inputs: `cast(n[None])`.)
        let nf = n.expand_dims(0).unwrap().cast(DType::F64);
        let ea = a.expand_dims(0).unwrap().exp();
        let y = &(&x / &nf) + &ea;
        let mut fg = FunctionGraph::new(&[x, n, a], &[y]).unwrap();
        let vals = [
            Value::F64(arr1(&[0.5, -2.0, 3.0]).into_dyn()),
            Value::I64(ndarray::arr0(4).into_dyn()),
            Value::F64(ndarray::arr0(0.25).into_dyn()),
        ];
        let before = evaluate(&fg, &vals).unwrap();
        // Before: cast, exp, two DimShuffles, div, add.
        assert_eq!(fg.n_nodes(), 6, "{fg}");
        fused(&mut fg);
        let ops: Vec<String> = fg
            .toposort()
            .iter()
            .map(|&k| fg.node(k).op.name())
            .collect();
        assert_eq!(
            ops.iter().filter(|o| o.starts_with("Composite")).count(),
            1,
            "{fg}"
        );
        assert_eq!(
            fg.n_nodes(),
            3,
            "the two DimShuffles and the Composite: {fg}"
        );
        assert!(
            fg.to_string().contains("cast{f64}") && fg.to_string().contains("exp("),
            "{fg}"
        );
        let after = evaluate(&fg, &vals).unwrap();
        assert!(after[0].allclose(&before[0], 0.0, 0.0), "{after:?}");
    }

    #[test]
    fn a_one_element_producer_read_elsewhere_or_returned_stays_apart() {
        let x = vector("x", DType::F64);
        let a = scalar("a", DType::F64);
        let ea = a.expand_dims(0).unwrap().exp();
        let y = &x * &ea;
        // exp(a) is also an output: a Composite output has the group's shape.
        let mut fg = FunctionGraph::new(&[x.clone(), a.clone()], &[y.clone(), ea]).unwrap();
        fused(&mut fg);
        assert_eq!(fg.n_nodes(), 3, "{fg}");
        // exp(a) read by two groups of different patterns: it joins neither.
        let m = matrix("m", DType::F64);
        let e1 = a.expand_dims(0).unwrap().exp();
        let z = (&x * &e1).sin();
        let w = (&m * &e1.expand_dims(0).unwrap()).cos();
        let mut fg = FunctionGraph::new(&[x, m, a], &[z, w]).unwrap();
        fused(&mut fg);
        assert!(fg.to_string().contains("exp(DimShuffle{x}(a))"), "{fg}");
    }

    #[test]
    fn the_operand_limit_is_respected() {
        let xs: Vec<Tensor> = (0..6)
            .map(|k| vector(&format!("x{k}"), DType::F64))
            .collect();
        let mut acc = xs[0].exp();
        for x in &xs[1..] {
            acc = &acc + &x.exp();
        }
        let mut fg = FunctionGraph::new(&xs, &[acc]).unwrap();
        fuse_elemwise(&mut fg, 3).unwrap();
        fg.check_integrity().unwrap();
        for n in fg.node_ids() {
            assert!(fg.node(n).inputs.len() <= 3, "{fg}");
        }
    }
}
