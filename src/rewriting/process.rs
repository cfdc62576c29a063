//! Applying a node rewriter's result to the graph (PyTensor's
//! `NodeProcessingGraphRewriter` logic), shared by every navigator.
//!
//! [`NodeProcessing::process_node`] calls the rewriter, checks its result (one
//! replacement per output, `None` only for outputs without clients, types
//! accepted by [`TensorType::accepts_replacement`](crate::graph::TensorType::accepts_replacement)),
//! then replaces through `replace_all_validate` with the rewriter's name as the
//! reason, so a refused replacement leaves the graph unchanged. Failures (an
//! error from the rewriter or a refused replacement) follow the
//! [`FailurePolicy`]. [`ImportRecorder`] is the "updater": a feature that
//! records every node imported, so a navigator can visit nodes created during
//! its pass without rescanning the graph (and, for an out-to-in equilibrium,
//! the nodes whose inputs changed, to visit them again).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::{Client, Feature, FunctionGraph, NodeId, VarId};

use super::rewriter::{NodeRewriter, Rewrite};

/// What to do when a node rewrite fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// Return the error (the default; failures are bugs in rewriters).
    #[default]
    Raise,
    /// Print a warning to stderr and skip the rewrite.
    Warn,
    /// Skip the rewrite silently (the failure callback, if any, still runs).
    Skip,
}

/// A failed node rewrite, as given to a failure callback.
#[derive(Debug, Clone)]
pub struct RewriteFailure {
    /// The rewriter's name.
    pub rewriter: String,
    /// The node it was applied to.
    pub node: NodeId,
    /// The node's op, as printed.
    pub op: String,
    /// What went wrong.
    pub error: Error,
}

/// Called on every failure, before the policy is applied.
pub type FailureCallback = Arc<dyn Fn(&RewriteFailure) + Send + Sync>;

/// The result of processing one node with one rewriter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The rewriter did not apply (or asked for no actual change).
    Unchanged,
    /// The graph was changed; `nodes_created` nodes were imported.
    Applied {
        /// Nodes imported by the replacement.
        nodes_created: u64,
    },
    /// The rewrite failed and was skipped (non-raising policies).
    Failed,
}

/// Options shared by node-processing navigators.
#[derive(Clone, Default)]
pub struct NodeProcessing {
    /// What to do on failure.
    pub policy: FailurePolicy,
    /// Called on every failure.
    pub callback: Option<FailureCallback>,
    /// When true, nodes created during a pass are not visited in that pass.
    pub ignore_newtrees: bool,
}

impl std::fmt::Debug for NodeProcessing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeProcessing")
            .field("policy", &self.policy)
            .field("callback", &self.callback.is_some())
            .field("ignore_newtrees", &self.ignore_newtrees)
            .finish()
    }
}

impl NodeProcessing {
    /// Runs `rw` (registered as `name`) on `node` and applies its result.
    pub fn process_node(
        &self,
        fg: &mut FunctionGraph,
        node: NodeId,
        name: &str,
        rw: &dyn NodeRewriter,
    ) -> Result<Outcome> {
        if !fg.contains_node(node) {
            return Ok(Outcome::Unchanged);
        }
        let imported_before = fg.stats.imported;
        let result = rw.transform(fg, node).and_then(|r| match r {
            None => Ok(false),
            Some(r) => apply_rewrite(fg, node, name, r),
        });
        match result {
            Ok(false) => Ok(Outcome::Unchanged),
            Ok(true) => Ok(Outcome::Applied {
                nodes_created: fg.stats.imported - imported_before,
            }),
            Err(error) => {
                let failure = RewriteFailure {
                    rewriter: name.to_string(),
                    node,
                    op: fg.node(node).op.name(),
                    error,
                };
                if let Some(cb) = &self.callback {
                    cb(&failure);
                }
                match self.policy {
                    FailurePolicy::Raise => Err(Error::Rewrite(format!(
                        "{} failed on node {} ({}): {}",
                        failure.rewriter, failure.node, failure.op, failure.error
                    ))),
                    FailurePolicy::Warn => {
                        eprintln!(
                            "WARNING: rewrite {} skipped on node {} ({}): {}",
                            failure.rewriter, failure.node, failure.op, failure.error
                        );
                        Ok(Outcome::Failed)
                    }
                    FailurePolicy::Skip => Ok(Outcome::Failed),
                }
            }
        }
    }
}

/// A checked rewrite: `(old, new)` pairs and the variables to remove.
pub type CheckedRewrite = (Vec<(VarId, VarId)>, Vec<VarId>);

/// Checks `rewrite` against `node` and turns it into `(old, new)` pairs and
/// variables to remove. Pairs replacing a variable by itself are dropped.
pub fn validate_rewrite(
    fg: &FunctionGraph,
    node: NodeId,
    name: &str,
    rewrite: Rewrite,
) -> Result<CheckedRewrite> {
    let (pairs, remove) = match rewrite {
        Rewrite::Outputs(repl) => {
            let outputs = &fg.node(node).outputs;
            if repl.len() != outputs.len() {
                return Err(Error::Rewrite(format!(
                    "{name} returned {} replacements for a node with {} outputs",
                    repl.len(),
                    outputs.len()
                )));
            }
            let mut pairs = Vec::with_capacity(repl.len());
            for (k, (&old, new)) in outputs.iter().zip(repl).enumerate() {
                match new {
                    Some(new) => pairs.push((old, new)),
                    None if fg.clients(old).is_empty() => {}
                    None => {
                        return Err(Error::Rewrite(format!(
                            "{name} gave no replacement for output {k} of node {node}, which has clients"
                        )))
                    }
                }
            }
            (pairs, Vec::new())
        }
        Rewrite::Map {
            replacements,
            remove,
        } => (replacements, remove),
    };
    for &(old, new) in &pairs {
        if new.index() >= fg.var_capacity() {
            return Err(Error::Rewrite(format!(
                "{name} returned an unknown variable {new}"
            )));
        }
        let (told, tnew) = (fg.ty(old), fg.ty(new));
        if !told.accepts_replacement(tnew) {
            return Err(Error::Rewrite(format!(
                "{name} returned a replacement of type {tnew} for a variable of type {told}"
            )));
        }
    }
    Ok((pairs.into_iter().filter(|(o, n)| o != n).collect(), remove))
}

/// Validates and performs a rewrite; returns whether the graph changed.
fn apply_rewrite(
    fg: &mut FunctionGraph,
    node: NodeId,
    name: &str,
    rewrite: Rewrite,
) -> Result<bool> {
    let (pairs, remove) = validate_rewrite(fg, node, name, rewrite)?;
    if pairs.is_empty() {
        return Ok(false);
    }
    let cp = fg.checkpoint();
    fg.replace_all_validate(&pairs, name)?;
    if let Some(v) = remove.iter().find(|&&v| fg.contains_var(v)) {
        fg.revert(cp);
        return Err(Error::Rewrite(format!(
            "{name}: the replacement did not remove {v} from the graph"
        )));
    }
    Ok(true)
}

/// A feature that records the nodes imported while it is attached (the
/// navigators' "updater") and, when made [`ImportRecorder::with_revisits`],
/// the nodes whose input a replacement switched. Drain it with
/// [`ImportRecorder::take`].
#[derive(Debug, Default)]
pub struct ImportRecorder {
    nodes: Vec<NodeId>,
    revisits: bool,
}

impl ImportRecorder {
    /// A recorder that also records every node one of whose inputs a
    /// replacement switched (once per switched input), in event order with
    /// the imports: an out-to-in walk visited such a node before its input
    /// changed, and queues it again.
    pub fn with_revisits() -> Self {
        ImportRecorder {
            nodes: Vec::new(),
            revisits: true,
        }
    }

    /// The nodes recorded since the last call, in event order.
    pub fn take(fg: &mut FunctionGraph) -> Vec<NodeId> {
        fg.feature_mut::<ImportRecorder>()
            .map(|r| std::mem::take(&mut r.nodes))
            .unwrap_or_default()
    }

    /// Appends the recorded nodes to `out` (no allocation when none were recorded).
    pub fn drain_into(fg: &mut FunctionGraph, out: &mut impl Extend<NodeId>) {
        if let Some(r) = fg.feature_mut::<ImportRecorder>() {
            out.extend(r.nodes.drain(..));
        }
    }
}

impl Feature for ImportRecorder {
    fn name(&self) -> &'static str {
        "ImportRecorder"
    }
    fn on_import(&mut self, _fg: &FunctionGraph, node: NodeId, _reason: &str) {
        self.nodes.push(node);
    }
    fn on_change_input(
        &mut self,
        _fg: &FunctionGraph,
        client: Client,
        _old: VarId,
        _new: VarId,
        _reason: &str,
    ) {
        if let (true, Client::Node(node, _)) = (self.revisits, client) {
            self.nodes.push(node);
        }
    }
}
