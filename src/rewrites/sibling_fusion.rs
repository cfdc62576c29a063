//! Sibling fusion: two element-wise nodes (Elemwise or Composite, after
//! vertical fusion) that read a common input and have the same output shape
//! become one multi-output Composite, so the shared input is read once and
//! both results are written in the same pass (`sin(x)` and `cos(x)` as two
//! outputs: one loop).
//!
//! A pair `(a, b)` is merged only when
//! - neither is inplace and their output broadcast patterns are equal;
//! - every non-broadcastable output dimension is non-broadcastable in some
//!   input they share, so both outputs provably have the same run-time shape
//!   (kiln never broadcasts a dimension that is not statically 1, so that
//!   input fixes the size for both);
//! - no path leads from one to the other (the merged node would be on a
//!   cycle); the upstream search is restricted to nodes between the two in
//!   a topological order and bounded by [`MAX_PATH_SEARCH`] visited nodes
//!   (beyond it the pair is left alone);
//! - the merged Composite respects the operand limit and
//!   [`MAX_FUSED_NODES`].
//!
//! Each round merges every node at most once; rounds repeat until nothing
//! merges, so the result is a fixed point (a second run changes nothing).

use rustc_hash::{FxHashMap, FxHashSet};

use super::fusion::{
    build_composite, fuseable, is_inlinable, replace_group, same_pattern, scalar_size,
    MAX_FUSED_NODES,
};
use crate::error::Result;
use crate::graph::{Client, FunctionGraph, NodeId, VarId};

/// Upper bound on the nodes one cycle check may visit.
pub const MAX_PATH_SEARCH: usize = 4096;

/// Upper bound on merge rounds (a round that merges nothing ends the loop).
const MAX_ROUNDS: usize = 32;

/// Merges sibling element-wise nodes (see the module docs); returns the
/// number of merges.
pub fn merge_siblings(fg: &mut FunctionGraph, max_operands: usize) -> Result<usize> {
    let mut merged = 0;
    for _ in 0..MAX_ROUNDS {
        let round = merge_round(fg, max_operands)?;
        merged += round;
        if round == 0 {
            break;
        }
    }
    Ok(merged)
}

fn merge_round(fg: &mut FunctionGraph, max_operands: usize) -> Result<usize> {
    let order = fg.toposort();
    let index: FxHashMap<NodeId, usize> = order.iter().enumerate().map(|(k, &n)| (n, k)).collect();
    let mut pairs: Vec<(NodeId, NodeId)> = Vec::new();
    let mut taken: FxHashSet<NodeId> = FxHashSet::default();
    let mut seen_vars: FxHashSet<VarId> = FxHashSet::default();
    for &n in &order {
        for &v in &fg.node(n).inputs {
            if !seen_vars.insert(v) || is_inlinable(fg, v) {
                continue;
            }
            let mut clients: Vec<NodeId> = Vec::new();
            for c in fg.clients(v) {
                if let Client::Node(m, _) = *c {
                    if !clients.contains(&m) && !taken.contains(&m) && fuseable(fg, m) {
                        clients.push(m);
                    }
                }
            }
            clients.sort_by_key(|m| index[m]);
            let mut i = 0;
            while i < clients.len() {
                let a = clients[i];
                if taken.contains(&a) {
                    i += 1;
                    continue;
                }
                let partner = clients[i + 1..]
                    .iter()
                    .copied()
                    .find(|&b| !taken.contains(&b) && mergeable(fg, &index, a, b, max_operands));
                if let Some(b) = partner {
                    taken.insert(a);
                    taken.insert(b);
                    pairs.push((a, b));
                }
                i += 1;
            }
        }
    }
    let mut merged = 0;
    // Pairs are disjoint, and a merge only replaces the two nodes' outputs,
    // so the remaining pairs stay valid.
    for (a, b) in pairs {
        if !fg.contains_node(a) || !fg.contains_node(b) {
            continue;
        }
        let Some(replacements) = build_composite(fg, &[a, b])? else {
            continue;
        };
        if replace_group(fg, &replacements, "sibling_elemwise_fusion") {
            merged += 1;
        }
    }
    Ok(merged)
}

/// Whether `a` and `b` (with `index[a] < index[b]`) can be merged.
fn mergeable(
    fg: &FunctionGraph,
    index: &FxHashMap<NodeId, usize>,
    a: NodeId,
    b: NodeId,
    max_operands: usize,
) -> bool {
    if !same_pattern(fg, a, b) || scalar_size(fg, a) + scalar_size(fg, b) > MAX_FUSED_NODES {
        return false;
    }
    let pat = fg.ty(fg.node(a).outputs[0]).broadcastable();
    let (ia, ib) = (&fg.node(a).inputs, &fg.node(b).inputs);
    let mut operands: Vec<VarId> = ia
        .iter()
        .copied()
        .filter(|&v| !is_inlinable(fg, v))
        .collect();
    for &v in ib.iter() {
        if !operands.contains(&v) && !is_inlinable(fg, v) {
            operands.push(v);
        }
    }
    if operands.len() > max_operands {
        return false;
    }
    // Same run-time shape: each non-broadcastable dimension is fixed by a shared input.
    let shared: Vec<VarId> = ia.iter().copied().filter(|v| ib.contains(v)).collect();
    let covered = pat.iter().enumerate().all(|(d, &bcast)| {
        bcast
            || shared.iter().any(|&s| {
                let flags = fg.ty(s).broadcastable();
                flags.len() == pat.len() && !flags[d]
            })
    });
    covered && !reaches(fg, index, b, a)
}

/// Whether node `to` is an ancestor of node `from` (conservatively true when
/// the search exceeds [`MAX_PATH_SEARCH`] nodes). Only nodes after `to` in
/// the topological order can lie on such a path.
fn reaches(fg: &FunctionGraph, index: &FxHashMap<NodeId, usize>, from: NodeId, to: NodeId) -> bool {
    let floor = index[&to];
    let mut seen: FxHashSet<NodeId> = FxHashSet::default();
    let mut stack = vec![from];
    while let Some(n) = stack.pop() {
        for &v in &fg.node(n).inputs {
            let Some(p) = fg.owner(v) else {
                continue;
            };
            if p == to {
                return true;
            }
            if index[&p] > floor && seen.insert(p) {
                if seen.len() > MAX_PATH_SEARCH {
                    return true;
                }
                stack.push(p);
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::evaluate;
    use crate::tensor::*;
    use crate::{DType, Value};
    use ndarray::arr1;

    fn merged(fg: &mut FunctionGraph) -> usize {
        let k = merge_siblings(fg, super::super::fusion::DEFAULT_MAX_OPERANDS).unwrap();
        fg.check_integrity().unwrap();
        k
    }

    #[test]
    fn two_functions_of_one_input_become_one_loop() {
        let x = vector("x", DType::F64);
        let (s, c) = (x.sin(), x.cos());
        let mut fg = FunctionGraph::new(std::slice::from_ref(&x), &[s, c]).unwrap();
        assert_eq!(merged(&mut fg), 1);
        assert_eq!(fg.n_nodes(), 1, "{fg}");
        assert_eq!(
            fg.to_string(),
            "FunctionGraph(Composite{sin(i0), cos(i0)}(x).0, Composite{sin(i0), cos(i0)}(x).1)"
        );
        let xv = Value::F64(arr1(&[0.0, 1.0]).into_dyn());
        let out = evaluate(&fg, &[xv]).unwrap();
        assert!(out[0].allclose(&Value::F64(arr1(&[0.0, 1f64.sin()]).into_dyn()), 0.0, 0.0));
        assert!(out[1].allclose(&Value::F64(arr1(&[1.0, 1f64.cos()]).into_dyn()), 0.0, 0.0));
        // A fixed point.
        assert_eq!(merged(&mut fg), 0);
    }

    #[test]
    fn shapes_not_fixed_by_a_shared_input_are_not_merged() {
        // r is a row (broadcastable first dimension); p and q fix dimension 0
        // separately, so the two results may differ in shape.
        let r = tensor("r", DType::F64, &[Some(1), None]);
        let p = matrix("p", DType::F64);
        let q = matrix("q", DType::F64);
        let a = &r + &p;
        let b = &r * &q;
        let mut fg = FunctionGraph::new(&[r, p, q], &[a, b]).unwrap();
        assert_eq!(merged(&mut fg), 0, "{fg}");
    }

    #[test]
    fn a_node_depending_on_its_sibling_is_not_merged() {
        let x = vector("x", DType::F64);
        let a = x.exp();
        let total = a.sum_all();
        // b reads x and, through a reduction, a: merging would make a cycle.
        let b = &x + &total;
        let mut fg = FunctionGraph::new(std::slice::from_ref(&x), &[a, b]).unwrap();
        assert_eq!(merged(&mut fg), 0, "{fg}");
    }
}
