//! The two rewriter traits: [`NodeRewriter`] (one Apply node at a time) and
//! [`GraphRewriter`] (a whole FunctionGraph), plus [`Tracks`] (which ops a
//! node rewriter wants to see) and [`Rewrite`] (what a node rewriter returns).
//!
//! Invariants: a node rewriter never mutates the graph except by creating
//! *detached* nodes with `fg.apply(...)`; the navigator that called it performs
//! the replacement (validated, with the rewriter's name as the reason). A
//! rewriter returns `Ok(None)` when it does not apply.

use std::sync::Arc;

use crate::error::Result;
use crate::graph::features::ReplaceValidate;
use crate::graph::{FunctionGraph, NodeId, VarId};
use crate::ops::OpKind;

use super::profile::{RewriterProfile, SimpleProfile};

/// One entry of a [`Tracks`] list: an exact op kind or a family of kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Track {
    /// Exactly this kind (e.g. `OpKind::Elemwise(ScalarOp::TrueDiv)`).
    Kind(OpKind),
    /// Any `Elemwise`, whatever its scalar op.
    AnyElemwise,
}

impl Track {
    /// True when a node of kind `kind` is tracked by this entry.
    pub fn matches(self, kind: OpKind) -> bool {
        match self {
            Track::Kind(k) => k == kind,
            Track::AnyElemwise => matches!(kind, OpKind::Elemwise(_)),
        }
    }
}

/// The nodes a [`NodeRewriter`] wants to be called on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Tracks {
    /// Every node.
    #[default]
    All,
    /// Only nodes whose op kind matches one of these entries.
    Only(Vec<Track>),
}

impl Tracks {
    /// Tracks exactly these op kinds.
    pub fn kinds(kinds: &[OpKind]) -> Tracks {
        Tracks::Only(kinds.iter().map(|&k| Track::Kind(k)).collect())
    }

    /// Tracks one op kind.
    pub fn kind(kind: OpKind) -> Tracks {
        Tracks::Only(vec![Track::Kind(kind)])
    }

    /// True when a node of kind `kind` is tracked.
    pub fn matches(&self, kind: OpKind) -> bool {
        match self {
            Tracks::All => true,
            Tracks::Only(list) => list.iter().any(|t| t.matches(kind)),
        }
    }
}

/// What a [`NodeRewriter`] asks the navigator to do with a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rewrite {
    /// One replacement per output of the node; `None` is allowed only for an
    /// output that has no clients.
    Outputs(Vec<Option<VarId>>),
    /// Arbitrary replacements (any variables, not only the node's outputs),
    /// plus variables that must no longer be in the graph afterwards (the
    /// replacement is rolled back and reported as a failure otherwise).
    Map {
        /// `(old, new)` pairs, replaced in order.
        replacements: Vec<(VarId, VarId)>,
        /// Variables the replacements must remove from the graph.
        remove: Vec<VarId>,
    },
}

impl Rewrite {
    /// The replacement of a single-output node.
    pub fn single(new: VarId) -> Rewrite {
        Rewrite::Outputs(vec![Some(new)])
    }
}

/// A rewrite of one Apply node (PyTensor's `NodeRewriter`).
pub trait NodeRewriter: Send + Sync {
    /// The rewriter's name, used in profiles, logs and replacement reasons.
    fn name(&self) -> String;
    /// The op kinds this rewriter applies to; navigators skip other nodes.
    fn tracks(&self) -> Tracks {
        Tracks::All
    }
    /// Looks at `node` and returns the replacements, or `None` when it does not apply.
    /// New nodes must be created detached (`fg.apply`), never spliced in directly.
    fn transform(&self, fg: &mut FunctionGraph, node: NodeId) -> Result<Option<Rewrite>>;
}

/// A rewrite of a whole graph (PyTensor's `GraphRewriter`).
pub trait GraphRewriter: Send + Sync {
    /// The rewriter's name.
    fn name(&self) -> String;
    /// The class name shown in profiles (`EquilibriumGraphRewriter`, ...).
    fn class_name(&self) -> &'static str {
        "GraphRewriter"
    }
    /// Attaches the features [`GraphRewriter::apply`] needs (ReplaceValidate by default).
    fn add_requirements(&self, fg: &mut FunctionGraph) -> Result<()> {
        ReplaceValidate::attach(fg)
    }
    /// Rewrites `fg` and reports what was done.
    fn apply(&self, fg: &mut FunctionGraph) -> Result<RewriterProfile>;
    /// [`GraphRewriter::add_requirements`] then [`GraphRewriter::apply`].
    fn rewrite(&self, fg: &mut FunctionGraph) -> Result<RewriterProfile> {
        self.add_requirements(fg)?;
        self.apply(fg)
    }
}

/// The signature of a closure node rewriter.
pub type NodeRewriteFn =
    dyn Fn(&mut FunctionGraph, NodeId) -> Result<Option<Rewrite>> + Send + Sync;

/// A node rewriter made from a name, tracks and a closure.
#[derive(Clone)]
pub struct FnNodeRewriter {
    name: String,
    tracks: Tracks,
    f: Arc<NodeRewriteFn>,
}

impl FnNodeRewriter {
    /// A node rewriter called `name` that runs `f` on tracked nodes.
    pub fn new(
        name: impl Into<String>,
        tracks: Tracks,
        f: impl Fn(&mut FunctionGraph, NodeId) -> Result<Option<Rewrite>> + Send + Sync + 'static,
    ) -> Self {
        FnNodeRewriter {
            name: name.into(),
            tracks,
            f: Arc::new(f),
        }
    }
}

impl NodeRewriter for FnNodeRewriter {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn tracks(&self) -> Tracks {
        self.tracks.clone()
    }
    fn transform(&self, fg: &mut FunctionGraph, node: NodeId) -> Result<Option<Rewrite>> {
        (self.f)(fg, node)
    }
}

/// The signature of a closure graph rewriter.
pub type GraphRewriteFn = dyn Fn(&mut FunctionGraph) -> Result<()> + Send + Sync;

/// A graph rewriter made from a name and a closure (PyTensor's `FromFunctionGraphRewriter`).
#[derive(Clone)]
pub struct FnGraphRewriter {
    name: String,
    f: Arc<GraphRewriteFn>,
}

impl FnGraphRewriter {
    /// A graph rewriter called `name` that runs `f`.
    pub fn new(
        name: impl Into<String>,
        f: impl Fn(&mut FunctionGraph) -> Result<()> + Send + Sync + 'static,
    ) -> Self {
        FnGraphRewriter {
            name: name.into(),
            f: Arc::new(f),
        }
    }
}

impl GraphRewriter for FnGraphRewriter {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn class_name(&self) -> &'static str {
        "FromFunctionGraphRewriter"
    }
    fn apply(&self, fg: &mut FunctionGraph) -> Result<RewriterProfile> {
        let start = std::time::Instant::now();
        let before = fg.stats.changes + fg.stats.imported;
        (self.f)(fg)?;
        Ok(RewriterProfile::Simple(SimpleProfile {
            name: self.name.clone(),
            class: self.class_name(),
            time: start.elapsed(),
            changed: fg.stats.changes + fg.stats.imported != before,
        }))
    }
}

/// A node rewriter with the name it was registered under (databases rename
/// entries, as PyTensor does).
#[derive(Clone)]
pub struct NamedNodeRewriter {
    /// The registered name.
    pub name: String,
    /// The rewriter.
    pub rewriter: Arc<dyn NodeRewriter>,
}

impl NamedNodeRewriter {
    /// Uses the rewriter's own name.
    pub fn new(rewriter: Arc<dyn NodeRewriter>) -> Self {
        NamedNodeRewriter {
            name: rewriter.name(),
            rewriter,
        }
    }
    /// Registers the rewriter under `name`.
    pub fn named(name: impl Into<String>, rewriter: Arc<dyn NodeRewriter>) -> Self {
        NamedNodeRewriter {
            name: name.into(),
            rewriter,
        }
    }
}

impl std::fmt::Debug for NamedNodeRewriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NamedNodeRewriter({})", self.name)
    }
}

/// A graph rewriter with the name it was registered under.
#[derive(Clone)]
pub struct NamedGraphRewriter {
    /// The registered name.
    pub name: String,
    /// The rewriter.
    pub rewriter: Arc<dyn GraphRewriter>,
}

impl NamedGraphRewriter {
    /// Uses the rewriter's own name.
    pub fn new(rewriter: Arc<dyn GraphRewriter>) -> Self {
        NamedGraphRewriter {
            name: rewriter.name(),
            rewriter,
        }
    }
    /// Registers the rewriter under `name`.
    pub fn named(name: impl Into<String>, rewriter: Arc<dyn GraphRewriter>) -> Self {
        NamedGraphRewriter {
            name: name.into(),
            rewriter,
        }
    }
}

impl std::fmt::Debug for NamedGraphRewriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NamedGraphRewriter({})", self.name)
    }
}

/// Renames a profile's top level (the registered name wins over the rewriter's own).
pub(crate) fn rename_profile(mut p: RewriterProfile, name: &str) -> RewriterProfile {
    match &mut p {
        RewriterProfile::Sequential(x) => x.name = name.to_string(),
        RewriterProfile::Equilibrium(x) => x.name = name.to_string(),
        RewriterProfile::Walking(x) => x.name = name.to_string(),
        RewriterProfile::Merge(x) => x.name = name.to_string(),
        RewriterProfile::Simple(x) => x.name = name.to_string(),
    }
    p
}
