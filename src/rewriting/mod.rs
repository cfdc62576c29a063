//! The rewriting framework: node and graph rewriters, the navigators that
//! apply node rewriters (walk, equilibrium), sequencing, merging, pattern
//! rewriters over unification, a small relational layer, rewrite databases,
//! the optdb's structure and profiles. The framework never imports the rewrite
//! library (`crate::rewrites`), which registers itself into this structure.
//!
//! Modules, in the order a rewrite flows through them: [`rewriter`] (traits),
//! [`process`] (validating and applying one node rewrite), [`walking`],
//! [`equilibrium`], [`sequential`], [`merge`], [`simple`], [`unify`](mod@unify),
//! [`pattern`], [`kanren`], [`db`], [`optdb`](mod@optdb), [`profile`].

pub mod db;
pub mod equilibrium;
pub mod kanren;
pub mod merge;
pub mod optdb;
pub mod pattern;
pub mod process;
pub mod profile;
pub mod rewriter;
pub mod sequential;
pub mod simple;
pub mod unify;
pub mod walking;

pub use db::{
    EqItem, EquilibriumDB, GraphRole, RewriteDatabaseQuery, SeqItem, SequenceDB, INPLACE_RULE,
};
pub use equilibrium::EquilibriumGraphRewriter;
pub use kanren::{dot_distributeo, KanrenRelationSub, Term};
pub use merge::MergeOptimizer;
pub use optdb::{optdb_skeleton, rewrite_graph_with, AsQuery, Mode, INPLACE_BARRIER};
pub use pattern::PatternNodeRewriter;
pub use process::{
    FailureCallback, FailurePolicy, ImportRecorder, NodeProcessing, Outcome, RewriteFailure,
};
pub use profile::{FunctionProfile, RewriteEvent, RewriterProfile, StopReason};
pub use rewriter::{
    FnGraphRewriter, FnNodeRewriter, GraphRewriter, NamedGraphRewriter, NamedNodeRewriter,
    NodeRewriter, Rewrite, Track, Tracks,
};
pub use sequential::SequentialGraphRewriter;
pub use simple::{RemovalNodeRewriter, SubstitutionNodeRewriter};
pub use unify::{reify, unify, LVar, Pattern, Substitution};
pub use walking::{WalkOrder, WalkingGraphRewriter};
