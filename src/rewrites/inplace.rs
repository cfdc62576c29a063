//! The inplace passes: outputs overwrite one of their inputs when that is
//! safe, so the linker needs no buffer for them. `inplace_gemm` turns
//! `Gemm{no_inplace}` into `Gemm{inplace}` (the output overwrites `z`,
//! PyTensor's `gemm_inplace`); `inplace_incsubtensor` lets a slice update
//! write into `x` (PyTensor's `inplace_incsubtensor`); `inplace_elemwise`
//! lets element-wise outputs overwrite any input of their type.
//!
//! Requires the DestroyHandler (attached by `add_destroy_handler` at 49.5).
//! Candidates are checked locally against one topological order that
//! respects the current orderings: an output may overwrite input `i` when
//! the input has the output's exact type, its view root is neither a
//! constant, nor a protected graph input (not declared mutable), nor already
//! destroyed, none of its views is a graph output, and every other reader of
//! the root's views comes earlier in that order (so the new orderings are
//! consistent with it and cannot form a cycle). The node's other inputs must
//! not read the root through another view; a Gemm must not read it at all
//! through `x` or `y` (the GEMM cannot write the memory it multiplies), nor
//! an update through `y` or its bounds.
//! Every output of a node is tried at once. All changes are validated once
//! at the end; should that fail, they are rolled back and applied again one
//! node at a time with a validation each (greedy).

use rustc_hash::{FxHashMap, FxHashSet};

use crate::error::Result;
use crate::graph::{Client, DestroyHandler, FunctionGraph, NodeId, VarId};
use crate::ops::{InplacePattern, Op};

/// What the inplace pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InplaceStats {
    /// Nodes turned inplace.
    pub nodes: usize,
    /// Outputs that overwrite an input.
    pub outputs: usize,
    /// True when the batch failed validation and the greedy fallback ran.
    pub fell_back: bool,
}

/// The nodes an inplace pass considers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// Elemwise and Composite nodes.
    Elemwise,
    /// Gemm nodes.
    Gemm,
    /// IncSubtensor / SetSubtensor nodes.
    IncSubtensor,
}

impl Target {
    /// The inputs an output of `op` may overwrite (`None`: any), when `op`
    /// is a node this pass turns inplace.
    fn candidates(self, op: &Op) -> Option<Option<usize>> {
        match (self, op) {
            (Target::Elemwise, Op::Elemwise { .. } | Op::Composite { .. }) => {
                with_pattern(op, InplacePattern::new()).map(|_| None)
            }
            (Target::Gemm, Op::Gemm { inplace: false }) => Some(Some(0)),
            (Target::IncSubtensor, Op::IncSubtensor { inplace: false, .. }) => Some(Some(0)),
            _ => None,
        }
    }
}

fn with_pattern(op: &Op, p: InplacePattern) -> Option<Op> {
    match op {
        Op::Gemm { inplace: false } if p.as_slice() == [(0, 0)] => Some(Op::Gemm { inplace: true }),
        Op::IncSubtensor {
            idx,
            set,
            inplace: false,
        } if p.as_slice() == [(0, 0)] => Some(Op::IncSubtensor {
            idx: idx.clone(),
            set: *set,
            inplace: true,
        }),
        Op::Elemwise { scalar, inplace } if inplace.is_empty() => Some(Op::Elemwise {
            scalar: *scalar,
            inplace: p,
        }),
        Op::Composite { composite, inplace } if inplace.is_empty() => Some(Op::Composite {
            composite: composite.clone(),
            inplace: p,
        }),
        _ => None,
    }
}

/// Turns element-wise nodes inplace where safe (see the module docs).
pub fn inplace_elemwise(fg: &mut FunctionGraph) -> Result<InplaceStats> {
    inplace_pass(fg, Target::Elemwise)
}

/// Turns `IncSubtensor` / `SetSubtensor` nodes inplace (the update writes
/// into `x`'s buffer) where overwriting `x` is safe (see the module docs).
pub fn inplace_incsubtensor(fg: &mut FunctionGraph) -> Result<InplaceStats> {
    inplace_pass(fg, Target::IncSubtensor)
}

/// Turns `Gemm{no_inplace}` nodes into `Gemm{inplace}` where overwriting
/// `z` is safe (see the module docs).
pub fn inplace_gemm(fg: &mut FunctionGraph) -> Result<InplaceStats> {
    inplace_pass(fg, Target::Gemm)
}

fn inplace_pass(fg: &mut FunctionGraph, target: Target) -> Result<InplaceStats> {
    if !fg.has_feature::<DestroyHandler>() {
        fg.attach_feature(DestroyHandler::new(fg.mutable_inputs()))?;
    }
    let order = fg.try_toposort_with(&fg.orderings())?;
    let pos: FxHashMap<NodeId, usize> = order.iter().enumerate().map(|(k, &n)| (n, k)).collect();
    let outputs: FxHashSet<VarId> = fg.outputs().iter().copied().collect();
    let mutable: FxHashSet<VarId> = fg.mutable_inputs().iter().copied().collect();
    let mut destroyed: FxHashSet<VarId> = FxHashSet::default();
    if let Some(dh) = fg.feature::<DestroyHandler>() {
        for n in dh.destroyers().collect::<Vec<_>>() {
            for &(_, i) in fg.node(n).op.destroy_map().iter() {
                destroyed.insert(DestroyHandler::view_root(fg, fg.node(n).inputs[i as usize]));
            }
        }
    }
    let mut plan: Vec<(NodeId, InplacePattern)> = Vec::new();
    for &n in &order {
        let node = fg.node(n);
        let Some(only) = target.candidates(&node.op) else {
            continue;
        };
        let mut pattern = InplacePattern::new();
        let mut used_inputs: Vec<usize> = Vec::new();
        for (o, &out) in node.outputs.iter().enumerate() {
            let out_ty = fg.ty(out);
            let choice = node.inputs.iter().enumerate().find(|&(i, &inp)| {
                if only.is_some_and(|k| k != i) || used_inputs.contains(&i) || fg.ty(inp) != out_ty
                {
                    return false;
                }
                let root = DestroyHandler::view_root(fg, inp);
                if destroyed.contains(&root)
                    || fg.var(root).is_constant()
                    || (fg.inputs().contains(&root) && !mutable.contains(&root))
                {
                    return false;
                }
                let views = DestroyHandler::views_of(fg, root);
                if views.iter().any(|v| outputs.contains(v)) {
                    return false;
                }
                // Other inputs of this node must not read the same memory
                // through another view; a Gemm's or an update's not even
                // through this one (their kernels read it while writing).
                let strict = matches!(target, Target::Gemm | Target::IncSubtensor);
                if node
                    .inputs
                    .iter()
                    .enumerate()
                    .any(|(j, &v)| j != i && (strict || v != inp) && views.contains(&v))
                {
                    return false;
                }
                views.iter().all(|&v| {
                    fg.clients(v).iter().all(|c| match *c {
                        Client::Node(r, _) => r == n || pos.get(&r).is_some_and(|&p| p < pos[&n]),
                        Client::Output(_) => false,
                    })
                })
            });
            if let Some((i, &inp)) = choice {
                used_inputs.push(i);
                pattern.push((o as u8, i as u8));
                destroyed.insert(DestroyHandler::view_root(fg, inp));
            }
        }
        if !pattern.is_empty() {
            plan.push((n, pattern));
        }
    }
    let mut stats = InplaceStats::default();
    let checkpoint = fg.checkpoint();
    for (n, p) in &plan {
        apply_pattern(fg, *n, p.clone())?;
        stats.nodes += 1;
        stats.outputs += p.len();
    }
    if fg.validate().is_ok() {
        return Ok(stats);
    }
    // Greedy fallback: one node at a time, validating each.
    fg.revert(checkpoint);
    stats = InplaceStats {
        fell_back: true,
        ..InplaceStats::default()
    };
    for (n, p) in plan {
        let cp = fg.checkpoint();
        apply_pattern(fg, n, p.clone())?;
        if fg.validate().is_ok() {
            stats.nodes += 1;
            stats.outputs += p.len();
        } else {
            fg.revert(cp);
        }
    }
    Ok(stats)
}

fn apply_pattern(fg: &mut FunctionGraph, n: NodeId, p: InplacePattern) -> Result<()> {
    let node = fg.node(n).clone();
    let op = with_pattern(&node.op, p).expect("checked when planning");
    let new = fg.apply(op, &node.inputs)?;
    let pairs: Vec<(VarId, VarId)> = node
        .outputs
        .iter()
        .copied()
        .zip(fg.node(new).outputs.iter().copied())
        .collect();
    let reason = match fg.node(n).op {
        Op::Gemm { .. } => "inplace_gemm",
        Op::IncSubtensor { .. } => "inplace_incsubtensor",
        _ => "inplace_elemwise",
    };
    fg.replace_all(&pairs, reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::evaluate;
    use crate::graph::ReplaceValidate;
    use crate::tensor::*;
    use crate::{DType, Value};
    use ndarray::arr1;

    #[test]
    fn intermediates_are_overwritten_but_inputs_are_not() {
        let x = vector("x", DType::F64);
        let y = (&x.exp() + 1.0).log();
        let mut fg = FunctionGraph::new(&[x], &[y]).unwrap();
        ReplaceValidate::attach(&mut fg).unwrap();
        let before = evaluate(&fg, &[Value::F64(arr1(&[0.5, 2.0]).into_dyn())]).unwrap();
        let s = inplace_elemwise(&mut fg).unwrap();
        fg.check_integrity().unwrap();
        // exp(x) must not overwrite x; add overwrites exp(x); log overwrites the sum.
        assert_eq!(s.nodes, 2, "{fg}");
        assert!(!s.fell_back);
        assert_eq!(
            fg.to_string(),
            "FunctionGraph(log{inplace}(add{inplace}(exp(x), 1.0)))"
        );
        let after = evaluate(&fg, &[Value::F64(arr1(&[0.5, 2.0]).into_dyn())]).unwrap();
        assert!(after[0].allclose(&before[0], 0.0, 0.0));
    }

    #[test]
    fn a_mutable_input_may_be_overwritten() {
        let x = vector("x", DType::F64);
        let y = x.exp();
        let mut fg = FunctionGraph::new(&[x], &[y]).unwrap();
        let xv = fg.inputs()[0];
        fg.declare_mutable(xv).unwrap();
        let s = inplace_elemwise(&mut fg).unwrap();
        assert_eq!(s.nodes, 1);
        assert_eq!(fg.to_string(), "FunctionGraph(exp{inplace}(x))");
    }

    #[test]
    fn a_value_read_later_is_not_overwritten() {
        // e = exp(x); a = e + 1 (could overwrite e) but e is also read by m = e * a afterwards.
        let x = vector("x", DType::F64);
        let e = x.exp();
        let a = &e + 1.0;
        let m = &e * &a;
        let mut fg = FunctionGraph::new(&[x], &[m]).unwrap();
        inplace_elemwise(&mut fg).unwrap();
        fg.check_integrity().unwrap();
        fg.validate().unwrap();
        let shown = fg.to_string();
        assert!(!shown.contains("add{inplace}(*1"), "{shown}");
        let out = evaluate(&fg, &[Value::F64(arr1(&[0.0]).into_dyn())]).unwrap();
        assert_eq!(out[0].scalar_as_f64(), Some(2.0));
    }
}
