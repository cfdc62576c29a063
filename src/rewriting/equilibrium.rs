//! `EquilibriumGraphRewriter`: applies node and graph rewriters pass after
//! pass until a pass changes nothing.
//!
//! Each pass: one toposort; the global graph rewriters; a walk over the nodes
//! (out-to-in by default) where each node is offered only to the node
//! rewriters whose `tracks` match its [`OpKind`] (a dispatch table keyed by
//! kind, built lazily and kept for the rewriter's later runs); nodes
//! created during the pass are queued through an [`ImportRecorder`] unless
//! `ignore_newtrees`; then the final graph rewriters. Cleanup graph
//! rewriters (cheap ones such as merging) run after each phase that
//! changed the graph.
//!
//! An out-to-in walk visits a node before its inputs, so a rewrite of an
//! input can enable one of a node already visited (`local_add_canonizer`
//! on an `add` whose operand `neg(x)` became `mul(-1, x)`). Unless
//! `ignore_newtrees`, the recorder also queues every node whose input a
//! replacement switched, and the walk visits it again in the same pass,
//! where PyTensor leaves it to the next pass. Passes then leave less for
//! the next: the chain graph of 3000 operations converges in two passes of
//! canonicalize and two of specialize instead of three each (one pass of
//! about 2,700 nodes fewer in each, its rewrite 57 → 47 ms on Zen 1).
//! Visiting more nodes cannot change the fixed point's definition (a pass
//! that changes nothing); it can change which of several rewrites is found
//! first, but no FAST_RUN result of the suite, its gradients or issue 16's
//! corpus changed (`kiln rewrite` and `kiln grad` before and after), nor
//! any test's.
//!
//! Limits, reported as a [`StopReason`] in the profile, never as a hang:
//! * `max_use_ratio`: a rewriter applied more than `ratio × (nodes at start)`
//!   times stops the run (`MaxUseRatio`).
//! * oscillation: a rewriter applied to a node created during this run whose
//!   `(op, inputs)` equals a node some rewriter already rewrote away means the
//!   graph came back to a previous state; when one such state recurs
//!   `oscillation_threshold` times the run stops (`Oscillation`, naming every
//!   rewriter caught repeating itself). A pass that brings the whole graph
//!   back to the structural hash it had at the start of an earlier pass is
//!   reported the same way.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use kiln_runtime::clock;

use rustc_hash::{FxHashMap, FxHasher};

use crate::error::Result;
use crate::graph::features::ReplaceValidate;
use crate::graph::{FunctionGraph, NodeId};
use crate::ops::OpKind;

use super::process::{FailureCallback, FailurePolicy, ImportRecorder, NodeProcessing, Outcome};
use super::profile::{
    EquilibriumProfile, PassProfile, RewriteEvent, RewriterProfile, RewriterStats, StopReason,
};
use super::rewriter::{GraphRewriter, NamedGraphRewriter, NamedNodeRewriter, NodeRewriter, Tracks};
use super::walking::WalkOrder;

/// Applies rewriters until nothing changes (or a limit stops it).
#[derive(Debug, Clone)]
pub struct EquilibriumGraphRewriter {
    name: String,
    node_rewriters: Vec<NamedNodeRewriter>,
    /// The node rewriters of each op kind (shared by clones: their node
    /// rewriters are the same and never change).
    dispatch: Arc<DispatchTable>,
    global_rewriters: Vec<NamedGraphRewriter>,
    final_rewriters: Vec<NamedGraphRewriter>,
    cleanup_rewriters: Vec<NamedGraphRewriter>,
    max_use_ratio: f64,
    oscillation_threshold: usize,
    order: WalkOrder,
    processing: NodeProcessing,
}

impl EquilibriumGraphRewriter {
    /// An equilibrium of node rewriters with the default limits
    /// (`max_use_ratio` 5, oscillation threshold 3, out-to-in walks).
    pub fn new(node_rewriters: Vec<Arc<dyn NodeRewriter>>) -> Self {
        Self::with_named(
            "EquilibriumGraphRewriter",
            node_rewriters
                .into_iter()
                .map(NamedNodeRewriter::new)
                .collect(),
        )
    }

    /// An equilibrium called `name` of registered node rewriters.
    pub fn with_named(name: impl Into<String>, node_rewriters: Vec<NamedNodeRewriter>) -> Self {
        EquilibriumGraphRewriter {
            name: name.into(),
            dispatch: Arc::new(DispatchTable::new(
                node_rewriters.iter().map(|r| r.rewriter.tracks()).collect(),
            )),
            node_rewriters,
            global_rewriters: Vec::new(),
            final_rewriters: Vec::new(),
            cleanup_rewriters: Vec::new(),
            max_use_ratio: 5.0,
            oscillation_threshold: 3,
            order: WalkOrder::OutToIn,
            processing: NodeProcessing::default(),
        }
    }

    /// Renames it.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Adds a graph rewriter run at the start of every pass.
    pub fn global(mut self, r: NamedGraphRewriter) -> Self {
        self.global_rewriters.push(r);
        self
    }

    /// Adds a graph rewriter run at the end of every pass.
    pub fn final_rewriter(mut self, r: NamedGraphRewriter) -> Self {
        self.final_rewriters.push(r);
        self
    }

    /// Adds a cheap graph rewriter run after every phase that changed the graph.
    pub fn cleanup(mut self, r: NamedGraphRewriter) -> Self {
        self.cleanup_rewriters.push(r);
        self
    }

    /// Sets the bound on applications per rewriter, relative to the starting graph size.
    pub fn max_use_ratio(mut self, ratio: f64) -> Self {
        self.max_use_ratio = ratio;
        self
    }

    /// Sets how many times a rewritten-away state may come back before the run stops.
    pub fn oscillation_threshold(mut self, n: usize) -> Self {
        self.oscillation_threshold = n.max(1);
        self
    }

    /// Sets the direction of the node walk in each pass.
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
    pub fn failure_callback(mut self, cb: FailureCallback) -> Self {
        self.processing.callback = Some(cb);
        self
    }

    /// Do not visit nodes created during a pass until the next pass.
    pub fn ignore_newtrees(mut self, ignore: bool) -> Self {
        self.processing.ignore_newtrees = ignore;
        self
    }

    /// The node rewriters.
    pub fn node_rewriters(&self) -> &[NamedNodeRewriter] {
        &self.node_rewriters
    }

    /// The global, final and cleanup graph rewriters.
    pub fn graph_rewriters(
        &self,
    ) -> (
        &[NamedGraphRewriter],
        &[NamedGraphRewriter],
        &[NamedGraphRewriter],
    ) {
        (
            &self.global_rewriters,
            &self.final_rewriters,
            &self.cleanup_rewriters,
        )
    }
}

/// The node rewriters of each op kind, in registration order: a kind's list
/// is computed from the rewriters' `tracks` the first time a node of that
/// kind is met and kept for every later run, on any thread (one rewriter
/// serves every compile of its query).
#[derive(Debug)]
struct DispatchTable {
    /// Each node rewriter's `tracks`, asked once at construction.
    tracks: Box<[Tracks]>,
    by_kind: RwLock<FxHashMap<OpKind, Arc<[usize]>>>,
}

impl DispatchTable {
    fn new(tracks: Box<[Tracks]>) -> Self {
        DispatchTable {
            tracks,
            by_kind: RwLock::default(),
        }
    }

    /// The node rewriters tracking `kind`. A poisoned lock still holds
    /// complete lists (each is inserted whole), so it is used as is.
    fn get(&self, kind: OpKind) -> Arc<[usize]> {
        let known = self
            .by_kind
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&kind)
            .cloned();
        if let Some(list) = known {
            return list;
        }
        let list: Arc<[usize]> = (0..self.tracks.len())
            .filter(|&i| self.tracks[i].matches(kind))
            .collect();
        self.by_kind
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(kind)
            .or_insert(list)
            .clone()
    }
}

/// One run's view of the [`DispatchTable`]: the lists of the kinds met so
/// far, without taking the table's lock again.
struct Dispatch<'a> {
    table: &'a DispatchTable,
    cache: FxHashMap<OpKind, Arc<[usize]>>,
}

impl<'a> Dispatch<'a> {
    fn new(table: &'a DispatchTable) -> Self {
        Dispatch {
            table,
            cache: FxHashMap::default(),
        }
    }
    fn get(&mut self, kind: OpKind) -> Arc<[usize]> {
        let table = self.table;
        self.cache
            .entry(kind)
            .or_insert_with(|| table.get(kind))
            .clone()
    }
}

/// A fresh hasher for the structural keys below. A default `FxHasher` starts
/// at zero and is linear, so zero words (`VarId(0)`, first enum variants)
/// vanish: `add(x, x)` over input 0 hashed to 0, and `add(add(x, x), y)` to
/// the hash of `add(x, x, y)`, which stopped equilibria early on a false
/// "oscillation". Hence a non-zero seed, the input count, and [`avalanche`].
fn key_hasher() -> FxHasher {
    FxHasher::with_seed(0x9e37_79b9_7f4a_7c15_u64 as usize)
}

/// The splitmix64 finaliser: every bit of `z` affects every bit of the result.
fn avalanche(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A structural hash of the whole graph (leaves by id or constant value;
/// node outputs' hashes kept by variable index).
fn graph_hash(fg: &FunctionGraph, order: &[NodeId]) -> u64 {
    let mut hashes: Vec<Option<u64>> = vec![None; fg.var_capacity()];
    let known = |hashes: &[Option<u64>], v: crate::graph::VarId| hashes[v.0 as usize];
    let leaf = |v: crate::graph::VarId| {
        let mut h = key_hasher();
        match fg.constant_value(v) {
            Some(c) => {
                1u8.hash(&mut h);
                c.hash_bits(&mut h);
            }
            None => {
                0u8.hash(&mut h);
                v.hash(&mut h);
            }
        }
        avalanche(h.finish())
    };
    for &n in order {
        let node = fg.node(n);
        let mut h = key_hasher();
        node.op.hash(&mut h);
        node.inputs.len().hash(&mut h);
        for &i in &node.inputs {
            known(&hashes, i).unwrap_or_else(|| leaf(i)).hash(&mut h);
        }
        let base = avalanche(h.finish());
        for (k, &o) in node.outputs.iter().enumerate() {
            let mut h = key_hasher();
            (base, k).hash(&mut h);
            hashes[o.0 as usize] = Some(avalanche(h.finish()));
        }
    }
    let mut h = key_hasher();
    fg.outputs().len().hash(&mut h);
    for &o in fg.outputs() {
        known(&hashes, o).unwrap_or_else(|| leaf(o)).hash(&mut h);
    }
    avalanche(h.finish())
}

fn shallow_key(fg: &FunctionGraph, n: NodeId) -> u64 {
    let node = fg.node(n);
    let mut h = key_hasher();
    node.op.hash(&mut h);
    node.inputs.len().hash(&mut h);
    // Constants count by type and value: rewrites create fresh constant variables.
    for &i in &node.inputs {
        match fg.constant_value(i) {
            Some(c) => {
                1u8.hash(&mut h);
                fg.ty(i).hash(&mut h);
                c.hash_bits(&mut h);
            }
            None => {
                0u8.hash(&mut h);
                i.hash(&mut h);
            }
        }
    }
    avalanche(h.finish())
}

fn graph_changes(fg: &FunctionGraph) -> u64 {
    fg.stats.changes + fg.stats.imported
}

/// Mutable state of one run.
struct Run {
    stats: Vec<RewriterStats>,
    /// Per rewriter: `clock` ticks spent in its node rewrites (added to its
    /// `stats` time at the end).
    ticks: Vec<u64>,
    counts: Vec<usize>,
    max_use: usize,
    stop: Option<StopReason>,
    log: Vec<RewriteEvent>,
    failures: usize,
    graph_time: Duration,
    /// Nodes with an id at least this one were created during the run.
    first_new: u32,
    /// Shallow keys of the nodes rewritten so far, with how many times a
    /// node created during the run came back to each.
    rewritten: FxHashMap<u64, usize>,
    /// Per node rewriter: how many times it rewrote such a returning node.
    repeats: Vec<usize>,
}

impl Run {
    /// Runs graph rewriter number `ri` (stats index); returns whether it changed the graph.
    fn run_graph(
        &mut self,
        fg: &mut FunctionGraph,
        ri: usize,
        r: &NamedGraphRewriter,
        pass: &mut PassProfile,
    ) -> Result<bool> {
        let before = graph_changes(fg);
        let imported = fg.stats.imported;
        let t = Instant::now();
        r.rewriter.apply(fg)?;
        let dt = t.elapsed();
        self.stats[ri].time += dt;
        self.graph_time += dt;
        let changed = graph_changes(fg) != before;
        if changed {
            self.stats[ri].applied += 1;
            self.stats[ri].nodes_created += fg.stats.imported - imported;
            self.counts[ri] += 1;
            pass.applied += 1;
            bump(&mut pass.applied_by, &r.name);
            if self.counts[ri] > self.max_use && self.stop.is_none() {
                self.stop = Some(StopReason::MaxUseRatio {
                    rewriter: r.name.clone(),
                });
            }
        }
        Ok(changed)
    }
}

fn bump(list: &mut Vec<(String, usize)>, name: &str) {
    match list.iter_mut().find(|(n, _)| n == name) {
        Some((_, c)) => *c += 1,
        None => list.push((name.to_string(), 1)),
    }
}

impl GraphRewriter for EquilibriumGraphRewriter {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn class_name(&self) -> &'static str {
        "EquilibriumGraphRewriter"
    }
    fn add_requirements(&self, fg: &mut FunctionGraph) -> Result<()> {
        ReplaceValidate::attach(fg)?;
        self.all_graph_rewriters()
            .try_for_each(|r| r.rewriter.add_requirements(fg))
    }

    fn apply(&self, fg: &mut FunctionGraph) -> Result<RewriterProfile> {
        let record = !self.processing.ignore_newtrees && !fg.has_feature::<ImportRecorder>();
        if record {
            // In an in-to-out walk a node's clients come after it anyway.
            fg.attach_feature(match self.order {
                WalkOrder::OutToIn => ImportRecorder::with_revisits(),
                WalkOrder::InToOut => ImportRecorder::default(),
            })?;
        }
        let result = self.run(fg);
        if record {
            fg.detach_feature::<ImportRecorder>();
        }
        result
    }
}

impl EquilibriumGraphRewriter {
    fn run(&self, fg: &mut FunctionGraph) -> Result<RewriterProfile> {
        let start = Instant::now();
        let nodes_start = fg.n_nodes();
        let mut run = self.start_run(fg, nodes_start);
        let mut dispatch = Dispatch::new(&self.dispatch);
        let mut seen_states: FxHashMap<u64, usize> = FxHashMap::default();
        let mut passes: Vec<PassProfile> = Vec::new();
        let (mut toposort_time, mut node_time) = (Duration::ZERO, Duration::ZERO);
        let mut nodes_max = nodes_start;

        loop {
            let pass_index = passes.len();
            let pass_start = Instant::now();
            let mut pass = PassProfile {
                nodes: fg.n_nodes(),
                ..Default::default()
            };
            nodes_max = nodes_max.max(fg.n_nodes());
            let t = Instant::now();
            let order = fg.toposort();
            let state = graph_hash(fg, &order);
            pass.toposort_time = t.elapsed();
            toposort_time += pass.toposort_time;
            if let Some(prev) = seen_states.insert(state, pass_index) {
                run.stop = Some(StopReason::Oscillation {
                    rewriters: applied_in(&passes[prev..]),
                });
                break;
            }
            let mut changed = self.global_phase(&mut run, fg, &mut pass)?;

            let mut queue: VecDeque<NodeId> = order.into();
            if !self.processing.ignore_newtrees {
                ImportRecorder::drain_into(fg, &mut queue);
            }
            let t = Instant::now();
            let node_changed = self.node_phase(
                &mut run,
                fg,
                &mut dispatch,
                &mut queue,
                &mut pass,
                pass_index,
            )?;
            node_time += t.elapsed();
            if node_changed {
                changed = true;
                self.run_cleanup(&mut run, fg, &mut pass)?;
            }

            if run.stop.is_none() {
                changed |= self.final_phase(&mut run, fg, &mut pass)?;
            }
            if crate::graph::fgraph::verify_by_default() {
                // The verifier runs after every pass in debug builds and in tests (KILN_VERIFY=1).
                fg.check_integrity()?;
            }
            pass.applied_by.sort_by_key(|a| std::cmp::Reverse(a.1));
            pass.time = pass_start.elapsed();
            passes.push(pass);
            nodes_max = nodes_max.max(fg.n_nodes());
            if run.stop.is_some() {
                break;
            }
            if !changed {
                run.stop = Some(StopReason::Converged);
                break;
            }
            // Nodes created by graph rewriters after the walk are seen next pass.
            let _ = ImportRecorder::take(fg);
        }
        let _ = ImportRecorder::take(fg);
        let rate = clock::rate();
        for (s, &t) in run.stats.iter_mut().zip(&run.ticks) {
            s.time += rate.duration(t);
        }
        Ok(RewriterProfile::Equilibrium(EquilibriumProfile {
            name: self.name.clone(),
            time: start.elapsed(),
            passes,
            nodes_start,
            nodes_end: fg.n_nodes(),
            nodes_max,
            toposort_time,
            node_rewriter_time: node_time,
            graph_rewriter_time: run.graph_time,
            rewriters: run.stats,
            stop_reason: run.stop.unwrap_or(StopReason::Converged),
            failures: run.failures,
            log: run.log,
        }))
    }

    /// The fresh state of a run on `fg`, which has `nodes_start` nodes: one
    /// statistics entry per rewriter (node rewriters, then global, final and
    /// cleanup graph rewriters).
    fn start_run(&self, fg: &FunctionGraph, nodes_start: usize) -> Run {
        let names = self
            .node_rewriters
            .iter()
            .map(|r| r.name.clone())
            .chain(self.all_graph_rewriters().map(|r| r.name.clone()));
        let stats: Vec<RewriterStats> = names
            .map(|name| RewriterStats {
                name,
                ..Default::default()
            })
            .collect();
        let total = stats.len();
        Run {
            stats,
            ticks: vec![0; total],
            counts: vec![0; total],
            max_use: ((self.max_use_ratio * nodes_start.max(1) as f64).ceil() as usize).max(1),
            stop: None,
            log: Vec::new(),
            failures: 0,
            graph_time: Duration::ZERO,
            first_new: fg.node_capacity() as u32,
            rewritten: FxHashMap::default(),
            repeats: vec![0; self.node_rewriters.len()],
        }
    }

    /// The graph rewriters in statistics order: global, final, cleanup.
    fn all_graph_rewriters(&self) -> impl Iterator<Item = &NamedGraphRewriter> {
        self.global_rewriters
            .iter()
            .chain(&self.final_rewriters)
            .chain(&self.cleanup_rewriters)
    }

    /// Runs the cleanup graph rewriters (after a phase that changed the graph).
    fn run_cleanup(
        &self,
        run: &mut Run,
        fg: &mut FunctionGraph,
        pass: &mut PassProfile,
    ) -> Result<()> {
        let c0 =
            self.node_rewriters.len() + self.global_rewriters.len() + self.final_rewriters.len();
        for (k, r) in self.cleanup_rewriters.iter().enumerate() {
            run.run_graph(fg, c0 + k, r, pass)?;
        }
        Ok(())
    }

    /// Runs the global graph rewriters, then the cleanup if one changed the
    /// graph; returns whether one did.
    fn global_phase(
        &self,
        run: &mut Run,
        fg: &mut FunctionGraph,
        pass: &mut PassProfile,
    ) -> Result<bool> {
        let g0 = self.node_rewriters.len();
        let t = Instant::now();
        let mut global_changed = false;
        for (k, r) in self.global_rewriters.iter().enumerate() {
            global_changed |= run.run_graph(fg, g0 + k, r, pass)?;
        }
        if global_changed {
            self.run_cleanup(run, fg, pass)?;
        }
        pass.global_time = t.elapsed();
        Ok(global_changed)
    }

    /// Runs the final graph rewriters, then the cleanup if one changed the
    /// graph; returns whether one did.
    fn final_phase(
        &self,
        run: &mut Run,
        fg: &mut FunctionGraph,
        pass: &mut PassProfile,
    ) -> Result<bool> {
        let f0 = self.node_rewriters.len() + self.global_rewriters.len();
        let mut final_changed = false;
        for (k, r) in self.final_rewriters.iter().enumerate() {
            final_changed |= run.run_graph(fg, f0 + k, r, pass)?;
        }
        if final_changed {
            self.run_cleanup(run, fg, pass)?;
        }
        Ok(final_changed)
    }

    /// Walks `queue` (in the rewriter's order), offering each node still in
    /// the graph to its candidate node rewriters, until the queue is empty or
    /// the run must stop; returns whether a node rewrite applied.
    fn node_phase(
        &self,
        run: &mut Run,
        fg: &mut FunctionGraph,
        dispatch: &mut Dispatch,
        queue: &mut VecDeque<NodeId>,
        pass: &mut PassProfile,
        pass_index: usize,
    ) -> Result<bool> {
        // Only node rewrites count in `pass.applied` during this phase.
        let applied_before = pass.applied;
        while run.stop.is_none() {
            let node = match self.order {
                WalkOrder::InToOut => queue.pop_front(),
                WalkOrder::OutToIn => queue.pop_back(),
            };
            let Some(node) = node else { break };
            if !fg.contains_node(node) {
                continue;
            }
            if self.rewrite_node(run, fg, dispatch, node, pass, pass_index)? {
                break;
            }
            if !self.processing.ignore_newtrees {
                ImportRecorder::drain_into(fg, queue);
            }
        }
        Ok(pass.applied > applied_before)
    }

    /// Offers `node` to its candidate node rewriters in turn, until one
    /// removes it from the graph; returns true when the run must stop.
    fn rewrite_node(
        &self,
        run: &mut Run,
        fg: &mut FunctionGraph,
        dispatch: &mut Dispatch,
        node: NodeId,
        pass: &mut PassProfile,
        pass_index: usize,
    ) -> Result<bool> {
        let cands = dispatch.get(fg.node(node).op.kind());
        let is_new = node.0 >= run.first_new;
        // The node's (op, inputs) only change when a rewrite applies.
        let mut key = shallow_key(fg, node);
        // One clock reading per rewriter call: each call ends where the next
        // starts (in `clock` ticks, cheaper to read than `Instant`).
        let mut t = clock::now();
        for &ri in cands.iter() {
            let r = &self.node_rewriters[ri];
            let outcome = self
                .processing
                .process_node(fg, node, &r.name, r.rewriter.as_ref())?;
            let now = clock::now();
            run.ticks[ri] += now.wrapping_sub(t);
            t = now;
            match outcome {
                Outcome::Applied { nodes_created } => {
                    run.stats[ri].applied += 1;
                    run.stats[ri].nodes_created += nodes_created;
                    run.counts[ri] += 1;
                    pass.applied += 1;
                    bump(&mut pass.applied_by, &r.name);
                    run.log.push(RewriteEvent {
                        pass: pass_index,
                        rewriter: r.name.clone(),
                        op: fg.node(node).op.name(),
                        node,
                    });
                    if let Some(stop) = self.check_limits(run, ri, key, is_new) {
                        run.stop = Some(stop);
                        return Ok(true);
                    }
                }
                Outcome::Failed => run.failures += 1,
                Outcome::Unchanged => {}
            }
            if !fg.contains_node(node) {
                break;
            }
            if matches!(outcome, Outcome::Applied { .. }) {
                key = shallow_key(fg, node);
                // The bookkeeping above is nobody's rewrite time.
                t = clock::now();
            }
        }
        Ok(false)
    }

    /// After node rewriter `ri` applied to a node of shallow key `key`
    /// (`is_new`: created during this run): the stop reason when the graph
    /// keeps coming back to a rewritten state or the rewriter exceeds its
    /// use limit.
    fn check_limits(&self, run: &mut Run, ri: usize, key: u64, is_new: bool) -> Option<StopReason> {
        match run.rewritten.get_mut(&key) {
            Some(seen) if is_new => {
                *seen += 1;
                run.repeats[ri] += 1;
                if *seen >= self.oscillation_threshold {
                    let rewriters = (0..self.node_rewriters.len())
                        .filter(|&i| run.repeats[i] > 0)
                        .map(|i| self.node_rewriters[i].name.clone())
                        .collect();
                    return Some(StopReason::Oscillation { rewriters });
                }
            }
            Some(_) => {}
            None => {
                run.rewritten.insert(key, 0);
            }
        }
        (run.counts[ri] > run.max_use).then(|| StopReason::MaxUseRatio {
            rewriter: self.node_rewriters[ri].name.clone(),
        })
    }
}

/// The rewriters that applied in `passes`, in order of first application.
fn applied_in(passes: &[PassProfile]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for p in passes {
        for (n, _) in &p.applied_by {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::DType;
    use crate::ops::ScalarOp;
    use crate::tensor::*;

    fn hash_of(inputs: &[Tensor], out: Tensor) -> u64 {
        let fg = FunctionGraph::new(inputs, &[out]).unwrap();
        graph_hash(&fg, &fg.toposort())
    }

    /// `x` is the graph's first variable (`VarId(0)`) and `add` the first
    /// scalar op: with an unseeded FxHasher both hashed to zero words and the
    /// nested and flat sums below had one hash.
    #[test]
    fn graph_hash_tells_nested_from_flat_sums_over_the_first_input() {
        let (x, y) = (vector("x", DType::F64), vector("y", DType::F64));
        let ins = [x.clone(), y.clone()];
        let nested = add(&add(&x, &x).unwrap(), &y).unwrap();
        let flat = elemwise(ScalarOp::Add, &[&x, &x, &y]).unwrap();
        let pair = add(&x, &x).unwrap();
        let hashes = [
            hash_of(&ins, nested),
            hash_of(&ins, flat),
            hash_of(&ins, pair),
            hash_of(&ins, x.clone()),
        ];
        for i in 0..hashes.len() {
            for j in i + 1..hashes.len() {
                assert_ne!(hashes[i], hashes[j], "graphs {i} and {j} collide");
            }
        }
    }
}
