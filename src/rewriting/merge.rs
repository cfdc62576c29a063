//! `MergeOptimizer`: merges constants equal by type and value (NaN-aware,
//! bitwise) and Apply nodes with equal ops and identical inputs.
//!
//! One toposort, then one walk inputs-first with two hash tables (constants by
//! `(type, value bits)`, nodes by `(op, inputs)`): when a node is reached its
//! inputs are already canonical, so merges cascade within a single run and the
//! cost is near-linear in the graph size. A merge replaces every output of the
//! duplicate node by the representative's output through
//! `replace_all_validate`; a refused merge is counted and skipped.

use std::hash::{Hash, Hasher};
use std::time::Instant;

use rustc_hash::{FxHashMap, FxHasher};
use smallvec::SmallVec;

use crate::error::Result;
use crate::graph::features::ReplaceValidate;
use crate::graph::{FunctionGraph, NodeId, VarId};
use crate::ops::Op;

use super::profile::{MergeProfile, RewriterProfile};
use super::rewriter::GraphRewriter;

/// Merges equal constants and equal Apply nodes.
#[derive(Debug, Clone, Default)]
pub struct MergeOptimizer {
    name: Option<String>,
}

impl MergeOptimizer {
    /// A merge rewriter named `MergeOptimizer`.
    pub fn new() -> Self {
        MergeOptimizer { name: None }
    }
}

fn const_key(fg: &FunctionGraph, v: VarId) -> Option<u64> {
    let value = fg.constant_value(v)?;
    let mut h = FxHasher::default();
    fg.ty(v).hash(&mut h);
    value.hash_bits(&mut h);
    Some(h.finish())
}

impl GraphRewriter for MergeOptimizer {
    fn name(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| "MergeOptimizer".to_string())
    }
    fn class_name(&self) -> &'static str {
        "MergeOptimizer"
    }
    fn add_requirements(&self, fg: &mut FunctionGraph) -> Result<()> {
        ReplaceValidate::attach(fg)
    }
    fn apply(&self, fg: &mut FunctionGraph) -> Result<RewriterProfile> {
        let start = Instant::now();
        let (v0, c0) = (fg.stats.validate_ticks, fg.stats.callback_ticks);
        let mut prof = MergeProfile {
            name: self.name(),
            ..Default::default()
        };
        let order = fg.toposort();
        let mut consts: FxHashMap<u64, SmallVec<[VarId; 1]>> = FxHashMap::default();
        let mut nodes: FxHashMap<(Op, SmallVec<[VarId; 3]>), NodeId> =
            FxHashMap::with_capacity_and_hasher(order.len(), Default::default());
        let merge_start = Instant::now();
        for n in order {
            if !fg.contains_node(n) {
                continue;
            }
            // Canonicalise constant inputs first, so equal nodes get equal keys.
            for k in 0..fg.node(n).inputs.len() {
                let i = fg.node(n).inputs[k];
                let Some(key) = const_key(fg, i) else {
                    continue;
                };
                let bucket = consts.entry(key).or_default();
                let value = fg.constant_value(i).expect("constant");
                let rep = bucket.iter().copied().find(|&r| {
                    r == i
                        || (fg.contains_var(r)
                            && fg.ty(r) == fg.ty(i)
                            && fg.constant_value(r).is_some_and(|rv| rv.same_as(value)))
                });
                match rep {
                    Some(r) if r == i => {}
                    Some(r) => match fg.replace_validate(i, r, "merge") {
                        Ok(()) => prof.nb_constant += 1,
                        Err(_) => prof.nb_fail += 1,
                    },
                    None => bucket.push(i),
                }
            }
            let node = fg.node(n);
            let key = (node.op.clone(), node.inputs.clone());
            match nodes.get(&key) {
                Some(&rep) if rep != n && fg.contains_node(rep) => {
                    let pairs: Vec<(VarId, VarId)> = fg
                        .node(n)
                        .outputs
                        .iter()
                        .copied()
                        .zip(fg.node(rep).outputs.iter().copied())
                        .collect();
                    match fg.replace_all_validate(&pairs, "merge") {
                        Ok(()) => prof.nb_merged += 1,
                        Err(_) => prof.nb_fail += 1,
                    }
                }
                _ => {
                    nodes.insert(key, n);
                }
            }
        }
        prof.merge_time = merge_start.elapsed();
        let rate = kiln_runtime::clock::rate();
        prof.validate_time = rate.duration(fg.stats.validate_ticks - v0);
        prof.callback_time = rate.duration(fg.stats.callback_ticks - c0);
        prof.time = start.elapsed();
        Ok(RewriterProfile::Merge(prof))
    }
}
