//! The DestroyHandler: makes inplace operations safe.
//!
//! Ops declare `destroy_map` (an output overwrites an input) and `view_map`
//! (an output aliases an input). The handler follows `view_map` edges back
//! to each destroyed variable's *view root* and refuses, in `validate`:
//! two destroyers of one root; destroying a constant; destroying a graph
//! input that was not declared mutable; destroying a root one of whose views
//! is a graph output; and any graph in which some other client of the root
//! (or of one of its views) cannot run before the destroyer (a cycle once
//! the orderings below are added). `orderings` gives the scheduler those
//! constraints: every other reader of a destroyed root runs first.
//!
//! The set of destroyer nodes is kept current through the import and prune
//! callbacks; roots and views are recomputed on demand, which costs time
//! proportional to the destroyers and their neighbourhoods, plus one
//! topological sort per validation.

use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::graph::fgraph::{Feature, FunctionGraph};
use crate::graph::ids::{Client, NodeId, VarId};

/// Tracks destroyers and validates inplace safety (see the module docs).
#[derive(Debug, Default)]
pub struct DestroyHandler {
    mutable_inputs: FxHashSet<VarId>,
    destroyers: BTreeSet<NodeId>,
}

impl DestroyHandler {
    /// A handler for which the given graph inputs may be overwritten.
    pub fn new(mutable_inputs: &[VarId]) -> Self {
        DestroyHandler {
            mutable_inputs: mutable_inputs.iter().copied().collect(),
            destroyers: BTreeSet::new(),
        }
    }

    /// Validates the inplace operations of `fg` (declared by the ops'
    /// `destroy_map` and `view_map`) whether or not a handler is attached,
    /// and returns the orderings they impose, as an attached handler would:
    /// the linker's check of graphs built or edited without one.
    pub fn check_graph(fg: &FunctionGraph) -> Result<Vec<(NodeId, NodeId)>> {
        let handler = DestroyHandler {
            mutable_inputs: fg.mutable_inputs().iter().copied().collect(),
            destroyers: fg
                .node_ids()
                .filter(|&n| !fg.node(n).op.destroy_map().is_empty())
                .collect(),
        };
        if handler.destroyers.is_empty() {
            return Ok(Vec::new());
        }
        handler.validate(fg)?;
        Ok(handler.orderings(fg))
    }

    /// The nodes that destroy one of their inputs.
    pub fn destroyers(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.destroyers.iter().copied()
    }

    /// Follows `view_map` edges from `v` back to the variable that owns the memory.
    pub fn view_root(fg: &FunctionGraph, mut v: VarId) -> VarId {
        while let Some((n, out)) = fg.var(v).owner {
            let node = fg.node(n);
            match node.op.view_map().iter().find(|(o, _)| *o as u32 == out) {
                Some(&(_, i)) => v = node.inputs[i as usize],
                None => break,
            }
        }
        v
    }

    /// `root` and every variable that is a (transitive) view of it.
    pub fn views_of(fg: &FunctionGraph, root: VarId) -> Vec<VarId> {
        let mut out = vec![root];
        let mut k = 0;
        while k < out.len() {
            let v = out[k];
            k += 1;
            for c in fg.clients(v) {
                let Client::Node(n, i) = *c else { continue };
                let node = fg.node(n);
                for &(o, vi) in node.op.view_map().iter() {
                    if vi as u32 == i {
                        out.push(node.outputs[o as usize]);
                    }
                }
            }
        }
        out
    }

    /// `(root, destroyer)` for every destroyed input, in node order.
    fn destroyed_roots(&self, fg: &FunctionGraph) -> Vec<(VarId, NodeId)> {
        let mut out = Vec::new();
        for &n in &self.destroyers {
            if !fg.contains_node(n) {
                continue;
            }
            let node = fg.node(n);
            for &(_, i) in node.op.destroy_map().iter() {
                out.push((Self::view_root(fg, node.inputs[i as usize]), n));
            }
        }
        out
    }

    fn describe(fg: &FunctionGraph, v: VarId) -> String {
        match &fg.var(v).name {
            Some(name) => format!("'{name}'"),
            None => format!("{v} ({})", fg.ty(v)),
        }
    }
}

impl Feature for DestroyHandler {
    fn name(&self) -> &'static str {
        "DestroyHandler"
    }

    fn on_attach(&mut self, fg: &FunctionGraph) -> Result<()> {
        if fg.has_feature::<DestroyHandler>() {
            return Err(Error::Graph("a DestroyHandler is already attached".into()));
        }
        self.destroyers = fg
            .node_ids()
            .filter(|&n| !fg.node(n).op.destroy_map().is_empty())
            .collect();
        Ok(())
    }

    fn on_import(&mut self, fg: &FunctionGraph, node: NodeId, _reason: &str) {
        if !fg.node(node).op.destroy_map().is_empty() {
            self.destroyers.insert(node);
        }
    }

    fn on_prune(&mut self, _fg: &FunctionGraph, node: NodeId, _reason: &str) {
        self.destroyers.remove(&node);
    }

    fn validate(&self, fg: &FunctionGraph) -> Result<()> {
        let mut owner_of_root: FxHashMap<VarId, NodeId> = FxHashMap::default();
        let outputs: FxHashSet<VarId> = fg.outputs().iter().copied().collect();
        for (root, n) in self.destroyed_roots(fg) {
            // Rendered only for an error: a fused Composite's name is long to format.
            let op = || fg.node(n).op.name();
            if let Some(&other) = owner_of_root.get(&root) {
                if other != n {
                    return Err(Error::Validation(format!(
                        "{} is destroyed by two nodes: {} ({other}) and {} ({n})",
                        Self::describe(fg, root),
                        fg.node(other).op.name(),
                        op()
                    )));
                }
            }
            owner_of_root.insert(root, n);
            if fg.var(root).is_constant() {
                return Err(Error::Validation(format!(
                    "{} ({n}) would overwrite a constant",
                    op()
                )));
            }
            if fg.inputs().contains(&root) && !self.mutable_inputs.contains(&root) {
                return Err(Error::Validation(format!(
                    "{} ({n}) would overwrite the input {}, which is not declared mutable",
                    op(),
                    Self::describe(fg, root)
                )));
            }
            let views = Self::views_of(fg, root);
            // Reading the overwritten memory through another layout in the same
            // node would see elements already overwritten.
            let node = fg.node(n);
            for &(_, di) in node.op.destroy_map().iter() {
                let destroyed = node.inputs[di as usize];
                if Self::view_root(fg, destroyed) != root {
                    continue;
                }
                if let Some((j, _)) = node
                    .inputs
                    .iter()
                    .enumerate()
                    .find(|&(j, &v)| j != di as usize && v != destroyed && views.contains(&v))
                {
                    return Err(Error::Validation(format!(
                        "{} ({n}) overwrites its input {di} while reading a view of the same memory as input {j}",
                        op()
                    )));
                }
            }
            if let Some(v) = views.into_iter().find(|v| outputs.contains(v)) {
                return Err(Error::Validation(format!(
                    "{} ({n}) would overwrite {}, which is (a view of) the graph output {}",
                    op(),
                    Self::describe(fg, root),
                    Self::describe(fg, v)
                )));
            }
        }
        fg.try_toposort_with(&self.orderings(fg)).map_err(|_| {
            Error::Validation(
                "an inplace operation would run before another reader of the memory it overwrites"
                    .into(),
            )
        })?;
        Ok(())
    }

    fn orderings(&self, fg: &FunctionGraph) -> Vec<(NodeId, NodeId)> {
        let mut out = Vec::new();
        for (root, destroyer) in self.destroyed_roots(fg) {
            for v in Self::views_of(fg, root) {
                for c in fg.clients(v) {
                    if let Client::Node(reader, _) = *c {
                        if reader != destroyer {
                            out.push((reader, destroyer));
                        }
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}
