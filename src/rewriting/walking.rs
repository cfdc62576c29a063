//! `WalkingGraphRewriter`: one walk over the graph in topological order
//! (in-to-out) or reverse (out-to-in), applying one or several node rewriters
//! to each node.
//!
//! Nodes created during the walk are visited too (appended to the work queue
//! through an [`ImportRecorder`]) unless `ignore_newtrees` is set. A node that
//! left the graph is skipped when it comes up. One toposort per walk; no
//! rescans.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use crate::error::Result;
use crate::graph::features::ReplaceValidate;
use crate::graph::FunctionGraph;

use super::process::{FailurePolicy, ImportRecorder, NodeProcessing, Outcome};
use super::profile::{RewriteEvent, RewriterProfile, WalkingProfile};
use super::rewriter::{GraphRewriter, NamedNodeRewriter, NodeRewriter};

/// The direction of a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WalkOrder {
    /// Inputs first.
    #[default]
    InToOut,
    /// Outputs first.
    OutToIn,
}

/// Applies node rewriters in one walk over the graph.
#[derive(Debug, Clone)]
pub struct WalkingGraphRewriter {
    name: String,
    rewriters: Vec<NamedNodeRewriter>,
    order: WalkOrder,
    processing: NodeProcessing,
}

impl WalkingGraphRewriter {
    /// A walk in-to-out applying `rewriter`, named after it.
    pub fn new(rewriter: Arc<dyn NodeRewriter>) -> Self {
        let r = NamedNodeRewriter::new(rewriter);
        WalkingGraphRewriter {
            name: r.name.clone(),
            rewriters: vec![r],
            order: WalkOrder::InToOut,
            processing: NodeProcessing::default(),
        }
    }

    /// A walk applying several rewriters, in order, to each node.
    pub fn with_rewriters(name: impl Into<String>, rewriters: Vec<NamedNodeRewriter>) -> Self {
        WalkingGraphRewriter {
            name: name.into(),
            rewriters,
            order: WalkOrder::InToOut,
            processing: NodeProcessing::default(),
        }
    }

    /// Sets the direction.
    pub fn order(mut self, order: WalkOrder) -> Self {
        self.order = order;
        self
    }

    /// Sets the failure policy.
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.processing.policy = policy;
        self
    }

    /// Sets a callback run on every failure.
    pub fn failure_callback(mut self, cb: super::process::FailureCallback) -> Self {
        self.processing.callback = Some(cb);
        self
    }

    /// Do not visit nodes created during the walk.
    pub fn ignore_newtrees(mut self, ignore: bool) -> Self {
        self.processing.ignore_newtrees = ignore;
        self
    }

    /// Renames the walk.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}

impl GraphRewriter for WalkingGraphRewriter {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn class_name(&self) -> &'static str {
        "WalkingGraphRewriter"
    }
    fn add_requirements(&self, fg: &mut FunctionGraph) -> Result<()> {
        ReplaceValidate::attach(fg)
    }
    fn apply(&self, fg: &mut FunctionGraph) -> Result<RewriterProfile> {
        let start = Instant::now();
        let callback_before = fg.stats.callback_ticks;
        let mut prof = WalkingProfile {
            name: self.name.clone(),
            nodes_start: fg.n_nodes(),
            ..Default::default()
        };
        let t = Instant::now();
        let order = fg.toposort();
        prof.toposort_time = t.elapsed();
        let mut queue: VecDeque<_> = order.into();
        let record = !self.processing.ignore_newtrees && !fg.has_feature::<ImportRecorder>();
        if record {
            fg.attach_feature(ImportRecorder::default())?;
        }
        let t = Instant::now();
        let result = (|| -> Result<()> {
            loop {
                let node = match self.order {
                    WalkOrder::InToOut => queue.pop_front(),
                    WalkOrder::OutToIn => queue.pop_back(),
                };
                let Some(node) = node else { break };
                if !fg.contains_node(node) {
                    continue;
                }
                let kind = fg.node(node).op.kind();
                for r in &self.rewriters {
                    if !r.rewriter.tracks().matches(kind) {
                        continue;
                    }
                    match self
                        .processing
                        .process_node(fg, node, &r.name, r.rewriter.as_ref())?
                    {
                        Outcome::Applied { .. } => {
                            prof.changed += 1;
                            // A node's op never changes, even once it is rewritten away.
                            prof.log.push(RewriteEvent {
                                pass: 0,
                                rewriter: r.name.clone(),
                                op: fg.node(node).op.name(),
                                node,
                            });
                        }
                        Outcome::Failed => prof.failures += 1,
                        Outcome::Unchanged => {}
                    }
                    if !fg.contains_node(node) {
                        break;
                    }
                }
                if !self.processing.ignore_newtrees {
                    ImportRecorder::drain_into(fg, &mut queue);
                }
            }
            Ok(())
        })();
        if record {
            fg.detach_feature::<ImportRecorder>();
        }
        result?;
        prof.loop_time = t.elapsed();
        prof.nodes_end = fg.n_nodes();
        prof.callback_time =
            kiln_runtime::clock::rate().duration(fg.stats.callback_ticks - callback_before);
        prof.time = start.elapsed();
        Ok(RewriterProfile::Walking(prof))
    }
}
