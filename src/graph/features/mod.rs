//! The standard features: ReplaceValidate, NodeFinder, History, ChangeTracker.
//!
//! * [`History`] logs every input change so that a checkpoint can be reverted.
//! * [`ReplaceValidate`] makes [`FunctionGraph::replace_validate`] and
//!   [`FunctionGraph::replace_all_validate`] available: replace, run every
//!   feature's `validate`, and roll back on failure.
//! * [`NodeFinder`] keeps an index of in-graph nodes by op kind.
//! * [`ChangeTracker`] counts changes, so a pass can tell whether it did anything.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use super::fgraph::{Feature, FunctionGraph};
use super::ids::{Client, NodeId, VarId};
use crate::error::{Error, Result};
use crate::ops::OpKind;

/// Records input changes for [`FunctionGraph::checkpoint`] / [`FunctionGraph::revert`].
#[derive(Debug, Default)]
pub struct History {
    log: Vec<(Client, VarId, VarId)>,
    reverting: bool,
}

impl History {
    /// Number of changes recorded.
    pub fn len(&self) -> usize {
        self.log.len()
    }
    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.log.is_empty()
    }
}

impl Feature for History {
    fn name(&self) -> &'static str {
        "History"
    }
    fn on_change_input(
        &mut self,
        _fg: &FunctionGraph,
        client: Client,
        old: VarId,
        new: VarId,
        _reason: &str,
    ) {
        if !self.reverting {
            self.log.push((client, old, new));
        }
    }
}

/// Enables validated replacement (attach it through [`FunctionGraph::attach_feature`];
/// it attaches [`History`] too).
#[derive(Debug, Default)]
pub struct ReplaceValidate;

impl Feature for ReplaceValidate {
    fn name(&self) -> &'static str {
        "ReplaceValidate"
    }
}

/// Counts changes to the graph.
#[derive(Debug, Default)]
pub struct ChangeTracker {
    /// Number of input changes and imports observed.
    pub changes: u64,
}

impl Feature for ChangeTracker {
    fn name(&self) -> &'static str {
        "ChangeTracker"
    }
    fn on_change_input(&mut self, _fg: &FunctionGraph, _c: Client, _o: VarId, _n: VarId, _r: &str) {
        self.changes += 1;
    }
    fn on_import(&mut self, _fg: &FunctionGraph, _n: NodeId, _r: &str) {
        self.changes += 1;
    }
}

/// An index of in-graph nodes by [`OpKind`], kept current.
#[derive(Debug, Default)]
pub struct NodeFinder {
    by_kind: FxHashMap<OpKind, BTreeSet<NodeId>>,
}

impl NodeFinder {
    /// In-graph nodes whose op is of this kind, in id order.
    pub fn get(&self, kind: OpKind) -> Vec<NodeId> {
        self.by_kind
            .get(&kind)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }
}

impl Feature for NodeFinder {
    fn name(&self) -> &'static str {
        "NodeFinder"
    }
    fn on_attach(&mut self, fg: &FunctionGraph) -> Result<()> {
        for n in fg.node_ids() {
            self.by_kind
                .entry(fg.node(n).op.kind())
                .or_default()
                .insert(n);
        }
        Ok(())
    }
    fn on_import(&mut self, fg: &FunctionGraph, n: NodeId, _r: &str) {
        self.by_kind
            .entry(fg.node(n).op.kind())
            .or_default()
            .insert(n);
    }
    fn on_prune(&mut self, fg: &FunctionGraph, n: NodeId, _r: &str) {
        if let Some(s) = self.by_kind.get_mut(&fg.node(n).op.kind()) {
            s.remove(&n);
        }
    }
}

impl FunctionGraph {
    /// A checkpoint of the [`History`] log (attaching History if needed).
    pub fn checkpoint(&mut self) -> usize {
        if !self.has_feature::<History>() {
            self.attach_feature(History::default())
                .expect("History attaches unconditionally");
        }
        self.feature::<History>().map_or(0, History::len)
    }

    /// Undoes every change recorded after `checkpoint`.
    pub fn revert(&mut self, checkpoint: usize) {
        let Some(h) = self.feature_mut::<History>() else {
            return;
        };
        if checkpoint >= h.log.len() {
            return;
        }
        let undo = h.log.split_off(checkpoint);
        h.reverting = true;
        for &(client, old, _new) in undo.iter().rev() {
            self.change_input(client, old, "revert");
        }
        if let Some(h) = self.feature_mut::<History>() {
            h.reverting = false;
        }
    }

    /// Replaces `old` by `new`, validates, and rolls back on failure.
    /// Requires the [`ReplaceValidate`] feature.
    pub fn replace_validate(&mut self, old: VarId, new: VarId, reason: &str) -> Result<()> {
        self.replace_all_validate(&[(old, new)], reason)
    }

    /// Replaces each pair, validates, and rolls back all of them on failure.
    /// Requires the [`ReplaceValidate`] feature.
    pub fn replace_all_validate(&mut self, pairs: &[(VarId, VarId)], reason: &str) -> Result<()> {
        if !self.has_feature::<ReplaceValidate>() {
            return Err(Error::Graph(
                "replace_validate needs the ReplaceValidate feature".into(),
            ));
        }
        let cp = self.checkpoint();
        if let Err(e) = self
            .replace_all(pairs, reason)
            .and_then(|_| self.validate())
        {
            self.revert(cp);
            return Err(e);
        }
        Ok(())
    }
}

impl ReplaceValidate {
    /// Attaches ReplaceValidate and History to `fg`.
    pub fn attach(fg: &mut FunctionGraph) -> Result<()> {
        fg.attach_feature(History::default())?;
        fg.attach_feature(ReplaceValidate)
    }
}
