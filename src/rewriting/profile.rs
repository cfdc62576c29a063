//! Rewriter profiles as structured data, printed in the seed documents'
//! formats, plus the rewrite log and the function profile.
//!
//! Every [`GraphRewriter`](super::GraphRewriter) returns a [`RewriterProfile`];
//! a sequential rewriter nests its children's profiles. `Display` prints the
//! hierarchy exactly as PyTensor's `profile_optimizer` does (with a stop-reason
//! line added to equilibrium profiles). The rewrite log ([`RewriteEvent`]) is
//! kept in the profile of the rewriter that applied each rewrite and collected
//! recursively by [`RewriterProfile::log`].

use std::fmt::{self, Write};
use std::time::Duration;

use crate::graph::NodeId;

/// One applied rewrite: which rewriter changed which node, in which pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewriteEvent {
    /// The pass of the rewriter that applied it (0 for single-pass rewriters).
    pub pass: usize,
    /// The node rewriter's name.
    pub rewriter: String,
    /// The op of the rewritten node, as printed.
    pub op: String,
    /// The rewritten node.
    pub node: NodeId,
}

impl fmt::Display for RewriteEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pass {} - {} - {} [{}]",
            self.pass, self.rewriter, self.op, self.node
        )
    }
}

/// Why an equilibrium rewriter stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// A pass changed nothing.
    Converged,
    /// A rewriter was applied more than `max_use_ratio` times the graph size.
    MaxUseRatio {
        /// The rewriter that hit the bound.
        rewriter: String,
    },
    /// The same rewrites kept undoing each other.
    Oscillation {
        /// The rewriters involved in the cycle.
        rewriters: Vec<String>,
    },
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::Converged => write!(f, "converged"),
            StopReason::MaxUseRatio { rewriter } => {
                write!(f, "max_use_ratio reached by {rewriter} (the rewrites may not reach a fixed point)")
            }
            StopReason::Oscillation { rewriters } => {
                write!(
                    f,
                    "oscillation between {} (they undo each other)",
                    rewriters.join(", ")
                )
            }
        }
    }
}

/// The profile of any graph rewriter.
#[derive(Debug, Clone)]
pub enum RewriterProfile {
    /// A [`SequentialGraphRewriter`](super::SequentialGraphRewriter).
    Sequential(SequentialProfile),
    /// An [`EquilibriumGraphRewriter`](super::EquilibriumGraphRewriter).
    Equilibrium(EquilibriumProfile),
    /// A [`WalkingGraphRewriter`](super::WalkingGraphRewriter).
    Walking(WalkingProfile),
    /// A [`MergeOptimizer`](super::MergeOptimizer).
    Merge(MergeProfile),
    /// Any other rewriter: name, class, time.
    Simple(SimpleProfile),
}

impl RewriterProfile {
    /// The rewriter's name.
    pub fn name(&self) -> &str {
        match self {
            RewriterProfile::Sequential(p) => &p.name,
            RewriterProfile::Equilibrium(p) => &p.name,
            RewriterProfile::Walking(p) => &p.name,
            RewriterProfile::Merge(p) => &p.name,
            RewriterProfile::Simple(p) => &p.name,
        }
    }

    /// The rewriter's class name.
    pub fn class(&self) -> &'static str {
        match self {
            RewriterProfile::Sequential(_) => "SequentialGraphRewriter",
            RewriterProfile::Equilibrium(_) => "EquilibriumGraphRewriter",
            RewriterProfile::Walking(_) => "WalkingGraphRewriter",
            RewriterProfile::Merge(_) => "MergeOptimizer",
            RewriterProfile::Simple(p) => p.class,
        }
    }

    /// Total time spent.
    pub fn time(&self) -> Duration {
        match self {
            RewriterProfile::Sequential(p) => p.time,
            RewriterProfile::Equilibrium(p) => p.time,
            RewriterProfile::Walking(p) => p.time,
            RewriterProfile::Merge(p) => p.time,
            RewriterProfile::Simple(p) => p.time,
        }
    }

    /// Number of rewrites applied (merges count one per merged node).
    pub fn applied(&self) -> usize {
        match self {
            RewriterProfile::Sequential(p) => p.children.iter().map(|c| c.profile.applied()).sum(),
            RewriterProfile::Equilibrium(p) => p.rewriters.iter().map(|r| r.applied).sum(),
            RewriterProfile::Walking(p) => p.changed,
            RewriterProfile::Merge(p) => p.nb_merged + p.nb_constant,
            RewriterProfile::Simple(p) => usize::from(p.changed),
        }
    }

    /// The rewrite log of this rewriter and every nested one, in order.
    pub fn log(&self) -> Vec<RewriteEvent> {
        match self {
            RewriterProfile::Sequential(p) => {
                p.children.iter().flat_map(|c| c.profile.log()).collect()
            }
            RewriterProfile::Equilibrium(p) => p.log.clone(),
            RewriterProfile::Walking(p) => p.log.clone(),
            RewriterProfile::Merge(_) | RewriterProfile::Simple(_) => Vec::new(),
        }
    }

    /// The stop reasons of every equilibrium rewriter in the hierarchy, with their names.
    pub fn stop_reasons(&self) -> Vec<(String, StopReason)> {
        match self {
            RewriterProfile::Sequential(p) => p
                .children
                .iter()
                .flat_map(|c| c.profile.stop_reasons())
                .collect(),
            RewriterProfile::Equilibrium(p) => vec![(p.name.clone(), p.stop_reason.clone())],
            _ => Vec::new(),
        }
    }

    /// Writes the profile at `indent` spaces.
    pub fn write_to(&self, out: &mut String, indent: usize) {
        match self {
            RewriterProfile::Sequential(p) => p.write_to(out, indent),
            RewriterProfile::Equilibrium(p) => p.write_to(out, indent),
            RewriterProfile::Walking(p) => p.write_to(out, indent),
            RewriterProfile::Merge(p) => p.write_to(out, indent),
            RewriterProfile::Simple(p) => {
                let _ = writeln!(out, "{}{}      {}", sp(indent), p.class, p.name);
            }
        }
    }
}

impl fmt::Display for RewriterProfile {
    /// `Rewriter Profile` header followed by the hierarchy.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::from("Rewriter Profile\n----------------\n");
        self.write_to(&mut s, 1);
        f.write_str(&s)
    }
}

fn sp(n: usize) -> String {
    " ".repeat(n)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// A child of a sequential rewriter.
#[derive(Debug, Clone)]
pub struct SubProfile {
    /// Position in the sequence.
    pub index: usize,
    /// Validation time spent while it ran.
    pub validate_time: Duration,
    /// Its own profile.
    pub profile: RewriterProfile,
}

/// Profile of a [`SequentialGraphRewriter`](super::SequentialGraphRewriter).
#[derive(Debug, Clone, Default)]
pub struct SequentialProfile {
    /// Name (`OPT_FAST_RUN`, `elemwise_fusion`, ...).
    pub name: String,
    /// Total time.
    pub time: Duration,
    /// Apply nodes before.
    pub nodes_before: usize,
    /// Apply nodes after.
    pub nodes_after: usize,
    /// Time in `fgraph.validate()`.
    pub validate_time: Duration,
    /// Time in feature callbacks.
    pub callback_time: Duration,
    /// The children, in execution order.
    pub children: Vec<SubProfile>,
}

impl SequentialProfile {
    fn write_to(&self, out: &mut String, indent: usize) {
        let b = sp(indent + 2);
        let _ = writeln!(
            out,
            "{}SequentialGraphRewriter  {}  time {:.3}s for {}/{} nodes before/after rewriting",
            sp(indent),
            self.name,
            secs(self.time),
            self.nodes_before,
            self.nodes_after
        );
        let _ = writeln!(
            out,
            "{b}{:.3}s for fgraph.validate()",
            secs(self.validate_time)
        );
        let _ = writeln!(out, "{b}{:.3}s for callback", secs(self.callback_time));
        let _ = writeln!(out, "{b}time      - (name, class, index) - validate time");
        let mut children: Vec<&SubProfile> = self.children.iter().collect();
        children.sort_by(|a, b| {
            b.profile
                .time()
                .cmp(&a.profile.time())
                .then(a.index.cmp(&b.index))
        });
        for c in children {
            let _ = writeln!(
                out,
                "{b}{:.6}s - ('{}', '{}', {}) - {:.3}s",
                secs(c.profile.time()),
                c.profile.name(),
                c.profile.class(),
                c.index,
                secs(c.validate_time)
            );
            c.profile.write_to(out, indent + 4);
        }
    }
}

/// One pass of an equilibrium rewriter.
#[derive(Debug, Clone, Default)]
pub struct PassProfile {
    /// Time of the pass.
    pub time: Duration,
    /// Rewrites applied in the pass.
    pub applied: usize,
    /// Time in global (graph) rewriters during the pass.
    pub global_time: Duration,
    /// Time in the toposort at the start of the pass.
    pub toposort_time: Duration,
    /// Apply nodes at the start of the pass.
    pub nodes: usize,
    /// `(rewriter, times applied)` in this pass, most applied first.
    pub applied_by: Vec<(String, usize)>,
}

/// Per-rewriter totals of an equilibrium rewriter.
#[derive(Debug, Clone, Default)]
pub struct RewriterStats {
    /// The rewriter's name.
    pub name: String,
    /// Time spent in it.
    pub time: Duration,
    /// Times it changed the graph.
    pub applied: usize,
    /// Nodes it introduced into the graph.
    pub nodes_created: u64,
}

/// Profile of an [`EquilibriumGraphRewriter`](super::EquilibriumGraphRewriter).
#[derive(Debug, Clone)]
pub struct EquilibriumProfile {
    /// Name.
    pub name: String,
    /// Total time.
    pub time: Duration,
    /// The passes.
    pub passes: Vec<PassProfile>,
    /// Apply nodes at the start.
    pub nodes_start: usize,
    /// Apply nodes at the end.
    pub nodes_end: usize,
    /// Largest number of Apply nodes seen (at pass boundaries).
    pub nodes_max: usize,
    /// Total toposort time.
    pub toposort_time: Duration,
    /// Total time in node rewriters.
    pub node_rewriter_time: Duration,
    /// Total time in graph (global, final, cleanup) rewriters.
    pub graph_rewriter_time: Duration,
    /// Every rewriter (node and graph), in registration order.
    pub rewriters: Vec<RewriterStats>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Rewrites that failed and were skipped (warn policy).
    pub failures: usize,
    /// The rewrites applied, in order.
    pub log: Vec<RewriteEvent>,
}

impl EquilibriumProfile {
    fn write_to(&self, out: &mut String, indent: usize) {
        let b = sp(indent + 2);
        let _ = writeln!(
            out,
            "{}EquilibriumGraphRewriter      {}",
            sp(indent),
            self.name
        );
        let _ = writeln!(
            out,
            "{b}time {:.3}s for {} passes",
            secs(self.time),
            self.passes.len()
        );
        let _ = writeln!(
            out,
            "{b}nb nodes (start, end,  max) {} {} {}",
            self.nodes_start, self.nodes_end, self.nodes_max
        );
        let _ = writeln!(out, "{b}time io_toposort {:.3}s", secs(self.toposort_time));
        let _ = writeln!(
            out,
            "{b}time in node rewriters {:.3}s",
            secs(self.node_rewriter_time)
        );
        let _ = writeln!(
            out,
            "{b}time in graph rewriters {:.3}s",
            secs(self.graph_rewriter_time)
        );
        let _ = writeln!(out, "{b}stop reason: {}", self.stop_reason);
        if self.failures > 0 {
            let _ = writeln!(out, "{b}failed rewrites skipped: {}", self.failures);
        }
        for (i, p) in self.passes.iter().enumerate() {
            let mut line = format!(
                "{b}{i:>2} - {:.3}s {} ({:.3}s in global rewrites, {:.3}s io_toposort) - {} nodes -",
                secs(p.time),
                p.applied,
                secs(p.global_time),
                secs(p.toposort_time),
                p.nodes
            );
            for (name, n) in p.applied_by.iter().take(5) {
                let _ = write!(line, " ('{name}', {n})");
            }
            if p.applied_by.len() > 5 {
                line.push_str(" ...");
            }
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out, "{b}times - times applied - nb node created - name:");
        let mut used: Vec<&RewriterStats> =
            self.rewriters.iter().filter(|r| r.applied > 0).collect();
        used.sort_by(|a, b| b.time.cmp(&a.time).then(a.name.cmp(&b.name)));
        for r in used {
            let _ = writeln!(
                out,
                "{b}{:.3}s - {} - {} - {}",
                secs(r.time),
                r.applied,
                r.nodes_created,
                r.name
            );
        }
        let mut unused: Vec<&RewriterStats> =
            self.rewriters.iter().filter(|r| r.applied == 0).collect();
        unused.sort_by(|a, b| b.time.cmp(&a.time).then(a.name.cmp(&b.name)));
        let unused_time: Duration = unused.iter().map(|r| r.time).sum();
        let _ = writeln!(
            out,
            "{b}{:.3}s - in {} rewrite(s) that were not used",
            secs(unused_time),
            unused.len()
        );
        for r in unused {
            let _ = writeln!(out, "{b}  {:.3}s - {}", secs(r.time), r.name);
        }
    }
}

/// Profile of a [`WalkingGraphRewriter`](super::WalkingGraphRewriter).
#[derive(Debug, Clone, Default)]
pub struct WalkingProfile {
    /// Name.
    pub name: String,
    /// Total time.
    pub time: Duration,
    /// Apply nodes at the start.
    pub nodes_start: usize,
    /// Apply nodes at the end.
    pub nodes_end: usize,
    /// Rewrites applied.
    pub changed: usize,
    /// Time of the initial toposort.
    pub toposort_time: Duration,
    /// Time of the node loop.
    pub loop_time: Duration,
    /// Time in feature callbacks.
    pub callback_time: Duration,
    /// Rewrites that failed and were skipped.
    pub failures: usize,
    /// The rewrites applied, in order.
    pub log: Vec<RewriteEvent>,
}

impl WalkingProfile {
    fn write_to(&self, out: &mut String, indent: usize) {
        let b = sp(indent + 2);
        let _ = writeln!(out, "{}WalkingGraphRewriter      {}", sp(indent), self.name);
        let _ = writeln!(
            out,
            "{b}nb_node (start, end, changed) ({}, {}, {})",
            self.nodes_start, self.nodes_end, self.changed
        );
        let _ = writeln!(out, "{b}init io_toposort {}", secs(self.toposort_time));
        let _ = writeln!(out, "{b}loop time {}", secs(self.loop_time));
        let _ = writeln!(out, "{b}callback_time {}", secs(self.callback_time));
        if self.failures > 0 {
            let _ = writeln!(out, "{b}failed rewrites skipped {}", self.failures);
        }
    }
}

/// Profile of a [`MergeOptimizer`](super::MergeOptimizer).
#[derive(Debug, Clone, Default)]
pub struct MergeProfile {
    /// Name.
    pub name: String,
    /// Total time.
    pub time: Duration,
    /// Merges refused by validation.
    pub nb_fail: usize,
    /// Time spent merging.
    pub merge_time: Duration,
    /// Time in validation.
    pub validate_time: Duration,
    /// Time in feature callbacks.
    pub callback_time: Duration,
    /// Apply nodes merged into an equal one.
    pub nb_merged: usize,
    /// Constants merged into an equal one.
    pub nb_constant: usize,
}

impl MergeProfile {
    fn write_to(&self, out: &mut String, indent: usize) {
        let b = sp(indent + 2);
        let _ = writeln!(out, "{}MergeOptimizer      {}", sp(indent), self.name);
        let _ = writeln!(out, "{b}nb fail={:>6}", self.nb_fail);
        let _ = writeln!(out, "{b}merge time={:>10.6}", secs(self.merge_time));
        let _ = writeln!(out, "{b}validate time={:>10.6}", secs(self.validate_time));
        let _ = writeln!(out, "{b}callback time={:>10.6}", secs(self.callback_time));
        let _ = writeln!(out, "{b}nb_merged={:>6}", self.nb_merged);
        let _ = writeln!(out, "{b}nb_constant={:>6}", self.nb_constant);
    }
}

/// Profile of a rewriter without a detailed format.
#[derive(Debug, Clone)]
pub struct SimpleProfile {
    /// Name.
    pub name: String,
    /// Class name.
    pub class: &'static str,
    /// Total time.
    pub time: Duration,
    /// Whether the graph changed.
    pub changed: bool,
}

/// The profile of a whole compilation (PyTensor's "Function profiling" header).
#[derive(Debug, Clone, Default)]
pub struct FunctionProfile {
    /// Where the function was compiled (a label).
    pub message: String,
    /// Number of calls so far.
    pub calls: usize,
    /// Time in those calls.
    pub call_time: Duration,
    /// Total time to compile.
    pub total_compile_time: Duration,
    /// Apply nodes after rewriting.
    pub apply_nodes: usize,
    /// Time in the rewriters.
    pub rewriter_time: Duration,
    /// Part of the rewriter time spent validating.
    pub validate_time: Duration,
    /// Time in the linker (lowering and JIT).
    pub linker_time: Duration,
    /// Part of the linker time spent finalising the JIT module.
    pub import_time: Duration,
}

/// `1.131874e+01` (Python's `%e`).
pub fn sci(d: Duration) -> String {
    let s = format!("{:.6e}", d.as_secs_f64());
    match s.split_once('e') {
        Some((m, e)) => {
            let e: i32 = e.parse().unwrap_or(0);
            format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
        }
        None => s,
    }
}

impl fmt::Display for FunctionProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Function profiling")?;
        writeln!(f, "==================")?;
        writeln!(f, "  Message: {}", self.message)?;
        writeln!(
            f,
            "  Time in {} calls to Function.__call__: {}s",
            self.calls,
            sci(self.call_time)
        )?;
        writeln!(f, "  Total compile time: {}s", sci(self.total_compile_time))?;
        writeln!(f, "    Number of Apply nodes: {}", self.apply_nodes)?;
        writeln!(f, "    kiln rewriter time: {}s", sci(self.rewriter_time))?;
        writeln!(f, "       kiln validate time: {}s", sci(self.validate_time))?;
        writeln!(
            f,
            "    kiln Linker time (includes Cranelift code generation/JIT): {}s",
            sci(self.linker_time)
        )?;
        writeln!(f, "       Import time {}s", sci(self.import_time))
    }
}
