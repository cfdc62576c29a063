//! `FunctionGraph`: the mutable graph that rewriters work on.
//!
//! Variables and Apply nodes live in arenas indexed by [`VarId`] / [`NodeId`].
//! A node is *in the graph* when some output depends on it; nodes created by
//! rewriters ([`FunctionGraph::apply`], [`FunctionGraph::constant`]) start
//! *detached* and are imported when a replacement makes them reachable.
//! Nodes that lose every client are pruned (detached again), cascading
//! towards the inputs. Ids are never reused.
//!
//! Invariants (checked by [`FunctionGraph::check_integrity`]): the clients of
//! an in-graph variable are exactly the in-graph input slots and output slots
//! that use it; every in-graph node is an ancestor of an output; the graph is
//! acyclic; replacements preserve types ([`TensorType::accepts_replacement`]);
//! every in-graph node's *level* exceeds the levels of its inputs' owners
//! (graph inputs and constants count as level 0). Levels are set when a node
//! is imported and only raised afterwards, when an input change requires it;
//! they let the cycle check of [`FunctionGraph::replace`] stop at every node
//! whose level is not above the replaced variable's, so its cost is that of
//! the replacement's new part, not of the graph.
//!
//! Features ([`Feature`]) observe every import, prune and input change and
//! may veto a state in `validate`; see `graph::features`.

use kiln_runtime::clock;
use std::any::Any;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::ids::{Client, NodeId, VarId};
use crate::error::{Error, Result};
use crate::ops::{InputInfo, Op};
use crate::types::{TensorType, Value};

/// Data of one variable.
#[derive(Debug, Clone)]
pub struct Variable {
    /// Static type.
    pub ty: TensorType,
    /// Optional user-visible name.
    pub name: Option<String>,
    /// The node and output index that computes it, if any.
    pub owner: Option<(NodeId, u32)>,
    /// The value, for constants.
    pub constant: Option<std::sync::Arc<Value>>,
    /// Current uses (meaningful while the variable is in the graph).
    pub clients: Vec<Client>,
    in_graph: bool,
}

impl Variable {
    /// True for constants.
    pub fn is_constant(&self) -> bool {
        self.constant.is_some()
    }
}

/// Data of one Apply node.
#[derive(Debug, Clone)]
pub struct Apply {
    /// What the node computes.
    pub op: Op,
    /// Its inputs.
    pub inputs: SmallVec<[VarId; 3]>,
    /// Its outputs.
    pub outputs: SmallVec<[VarId; 1]>,
    in_graph: bool,
    /// While in the graph: a label greater than the level of every input's
    /// owner (graph inputs and constants are level 0). See [`FunctionGraph::level`].
    level: u32,
}

/// A plug-in that observes graph changes and may veto them (PyTensor's `Feature`).
///
/// Callbacks receive the graph after the change; during a callback the
/// graph's own feature list is temporarily empty.
pub trait Feature: Any + Send {
    /// A short name for messages.
    fn name(&self) -> &'static str;
    /// Called when attached; the feature may index the current graph.
    fn on_attach(&mut self, fg: &FunctionGraph) -> Result<()> {
        let _ = fg;
        Ok(())
    }
    /// Called when detached.
    fn on_detach(&mut self, fg: &FunctionGraph) {
        let _ = fg;
    }
    /// Called after `node` entered the graph.
    fn on_import(&mut self, fg: &FunctionGraph, node: NodeId, reason: &str) {
        let _ = (fg, node, reason);
    }
    /// Called after `node` left the graph.
    fn on_prune(&mut self, fg: &FunctionGraph, node: NodeId, reason: &str) {
        let _ = (fg, node, reason);
    }
    /// Called after the use `client` was switched from `old` to `new`.
    fn on_change_input(
        &mut self,
        fg: &FunctionGraph,
        client: Client,
        old: VarId,
        new: VarId,
        reason: &str,
    ) {
        let _ = (fg, client, old, new, reason);
    }
    /// Refuses the current state with an error.
    fn validate(&self, fg: &FunctionGraph) -> Result<()> {
        let _ = fg;
        Ok(())
    }
    /// Extra scheduling constraints `(before, after)` that the linker must respect.
    fn orderings(&self, fg: &FunctionGraph) -> Vec<(NodeId, NodeId)> {
        let _ = fg;
        Vec::new()
    }
}

/// Counters that profiles read.
#[derive(Debug, Clone, Default)]
pub struct GraphStats {
    /// Time spent in feature validation, in `kiln_runtime::clock` ticks
    /// (cheaper to read than `Instant` for calls this frequent; convert a
    /// difference with `clock::rate().duration`).
    pub validate_ticks: u64,
    /// Time spent in feature callbacks, in `kiln_runtime::clock` ticks.
    pub callback_ticks: u64,
    /// Number of nodes imported since creation.
    pub imported: u64,
    /// Number of input changes since creation.
    pub changes: u64,
    /// Nodes examined by the cycle checks of [`FunctionGraph::replace`]
    /// (a work count: it grows with the size of the replacements, not of the graph).
    pub cycle_check_visits: u64,
    /// Nodes whose level was raised to keep the level invariant after an input change.
    pub level_raises: u64,
}

/// A graph of Apply nodes from `inputs` to `outputs`, with features.
pub struct FunctionGraph {
    vars: Vec<Variable>,
    nodes: Vec<Apply>,
    inputs: Vec<VarId>,
    outputs: Vec<VarId>,
    features: Vec<Box<dyn Feature>>,
    n_live_nodes: usize,
    /// Counters for profiles.
    pub stats: GraphStats,
    check_after_mutation: bool,
    mutable_inputs: Vec<VarId>,
    /// Bumped by every change of the graph's structure (an input changed,
    /// a node imported or pruned, an output added): the key of `topo`.
    structure: u64,
    /// The last [`FunctionGraph::toposort`] and the `structure` it was
    /// computed at: rewriter passes that change nothing sort the same graph
    /// again (over half of the sorts of a FAST_RUN of the chain graph).
    topo: std::sync::Mutex<Option<(u64, Vec<NodeId>)>>,
}

impl Clone for FunctionGraph {
    /// Clones the graph structure; features are not cloned (attach them again).
    fn clone(&self) -> Self {
        FunctionGraph {
            vars: self.vars.clone(),
            nodes: self.nodes.clone(),
            inputs: self.inputs.clone(),
            outputs: self.outputs.clone(),
            features: Vec::new(),
            n_live_nodes: self.n_live_nodes,
            stats: GraphStats::default(),
            check_after_mutation: self.check_after_mutation,
            mutable_inputs: self.mutable_inputs.clone(),
            structure: 0,
            topo: std::sync::Mutex::new(None),
        }
    }
}

impl std::fmt::Debug for FunctionGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

/// Whether new graphs check their integrity after every mutation: always in
/// debug builds, and in release builds when the environment variable
/// `KILN_VERIFY` is set to `1` (as CI does for the test suite).
pub fn verify_by_default() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        cfg!(debug_assertions) || std::env::var("KILN_VERIFY").is_ok_and(|v| v == "1")
    })
}

impl Default for FunctionGraph {
    fn default() -> Self {
        Self::empty()
    }
}

impl FunctionGraph {
    /// A graph with no inputs, outputs or nodes.
    pub fn empty() -> Self {
        FunctionGraph {
            vars: Vec::new(),
            nodes: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            features: Vec::new(),
            n_live_nodes: 0,
            stats: GraphStats::default(),
            check_after_mutation: verify_by_default(),
            mutable_inputs: Vec::new(),
            structure: 0,
            topo: std::sync::Mutex::new(None),
        }
    }

    /// Turns the integrity check after every mutation on or off (on by default
    /// in debug builds and with `KILN_VERIFY=1`, see [`verify_by_default`];
    /// very large graphs in tests may turn it off).
    pub fn set_check_after_mutation(&mut self, on: bool) {
        self.check_after_mutation = on;
    }

    // ----- construction -------------------------------------------------

    /// Adds a graph input of type `ty`.
    pub fn add_input(&mut self, ty: TensorType, name: Option<String>) -> VarId {
        let v = self.new_var(ty, name, None, None);
        self.vars[v.index()].in_graph = true;
        self.inputs.push(v);
        v
    }

    /// Creates a detached constant.
    pub fn constant(&mut self, value: Value) -> VarId {
        self.constant_arc(std::sync::Arc::new(value))
    }

    /// Creates a detached constant sharing `value`.
    pub fn constant_arc(&mut self, value: std::sync::Arc<Value>) -> VarId {
        let ty = value.tensor_type();
        self.new_var(ty, None, None, Some(value))
    }

    /// Creates a detached Apply node of `op` on `inputs`, inferring output types.
    pub fn apply(&mut self, op: Op, inputs: &[VarId]) -> Result<NodeId> {
        let infos: Vec<InputInfo<'_>> = inputs
            .iter()
            .map(|&v| {
                let var = &self.vars[v.index()];
                InputInfo {
                    ty: &var.ty,
                    value: var.constant.as_deref(),
                }
            })
            .collect();
        let types = op.infer_types(&infos)?;
        Ok(self.apply_typed(op, inputs, types))
    }

    /// Creates a detached node with single output and returns that output.
    pub fn apply1(&mut self, op: Op, inputs: &[VarId]) -> Result<VarId> {
        let n = self.apply(op, inputs)?;
        Ok(self.nodes[n.index()].outputs[0])
    }

    /// Creates a detached node with already-inferred output types (used when
    /// importing a graph whose types were inferred at build time).
    pub(crate) fn apply_typed(
        &mut self,
        op: Op,
        inputs: &[VarId],
        types: Vec<TensorType>,
    ) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        let outputs = types
            .into_iter()
            .enumerate()
            .map(|(i, ty)| self.new_var(ty, None, Some((id, i as u32)), None))
            .collect();
        self.nodes.push(Apply {
            op,
            inputs: inputs.iter().copied().collect(),
            outputs,
            in_graph: false,
            level: 0,
        });
        id
    }

    fn new_var(
        &mut self,
        ty: TensorType,
        name: Option<String>,
        owner: Option<(NodeId, u32)>,
        constant: Option<std::sync::Arc<Value>>,
    ) -> VarId {
        let id = VarId(self.vars.len() as u32);
        self.vars.push(Variable {
            ty,
            name,
            owner,
            constant,
            clients: Vec::new(),
            in_graph: false,
        });
        id
    }

    /// Adds `v` as a graph output (importing its ancestors).
    pub fn add_output(&mut self, v: VarId) {
        let slot = self.outputs.len() as u32;
        self.outputs.push(v);
        self.structure += 1;
        self.attach_client(v, Client::Output(slot), "init");
    }

    /// Declares graph input `v` mutable: inplace rewrites may overwrite it.
    pub fn declare_mutable(&mut self, v: VarId) -> Result<()> {
        if !self.inputs.contains(&v) {
            return Err(Error::Graph(format!(
                "{v} is not a graph input and cannot be declared mutable"
            )));
        }
        if !self.mutable_inputs.contains(&v) {
            self.mutable_inputs.push(v);
        }
        Ok(())
    }

    /// The inputs declared mutable.
    pub fn mutable_inputs(&self) -> &[VarId] {
        &self.mutable_inputs
    }

    /// Sets a variable's name.
    pub fn set_name(&mut self, v: VarId, name: impl Into<String>) {
        self.vars[v.index()].name = Some(name.into());
    }

    // ----- queries -------------------------------------------------------

    /// The graph inputs.
    pub fn inputs(&self) -> &[VarId] {
        &self.inputs
    }

    /// The graph outputs.
    pub fn outputs(&self) -> &[VarId] {
        &self.outputs
    }

    /// A variable's data.
    pub fn var(&self, v: VarId) -> &Variable {
        &self.vars[v.index()]
    }

    /// A node's data.
    pub fn node(&self, n: NodeId) -> &Apply {
        &self.nodes[n.index()]
    }

    /// A variable's type.
    pub fn ty(&self, v: VarId) -> &TensorType {
        &self.vars[v.index()].ty
    }

    /// The node computing `v`, if any.
    pub fn owner(&self, v: VarId) -> Option<NodeId> {
        self.vars[v.index()].owner.map(|(n, _)| n)
    }

    /// The op of the node computing `v`, if any.
    pub fn owner_op(&self, v: VarId) -> Option<&Op> {
        self.owner(v).map(|n| &self.nodes[n.index()].op)
    }

    /// The value of `v` when it is a constant.
    pub fn constant_value(&self, v: VarId) -> Option<&Value> {
        self.vars[v.index()].constant.as_deref()
    }

    /// The uses of `v`.
    pub fn clients(&self, v: VarId) -> &[Client] {
        &self.vars[v.index()].clients
    }

    /// True when `n` is in the graph.
    pub fn contains_node(&self, n: NodeId) -> bool {
        self.nodes.get(n.index()).is_some_and(|a| a.in_graph)
    }

    /// True when `v` is in the graph.
    pub fn contains_var(&self, v: VarId) -> bool {
        self.vars.get(v.index()).is_some_and(|a| a.in_graph)
    }

    /// The level of an in-graph variable: 0 for graph inputs and constants,
    /// otherwise its owner's label, which exceeds the level of each of the
    /// owner's inputs (so `a` can depend on `b != a` only when
    /// `level(a) > level(b)`). Levels are not depths: they are set on import
    /// and only raised afterwards. Meaningless for detached variables.
    pub fn level(&self, v: VarId) -> u32 {
        match self.vars[v.index()].owner {
            Some((n, _)) if self.nodes[n.index()].in_graph => self.nodes[n.index()].level,
            _ => 0,
        }
    }

    /// Number of Apply nodes in the graph.
    pub fn n_nodes(&self) -> usize {
        self.n_live_nodes
    }

    /// Size of the node arena (an upper bound for node ids).
    pub fn node_capacity(&self) -> usize {
        self.nodes.len()
    }

    /// Size of the variable arena.
    pub fn var_capacity(&self) -> usize {
        self.vars.len()
    }

    /// All in-graph nodes in id order.
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.in_graph)
            .map(|(i, _)| NodeId(i as u32))
    }

    /// In-graph nodes in a topological order (inputs before users), found by
    /// an iterative depth-first walk from the outputs, visiting inputs in order.
    /// The order is kept until the graph's structure changes, so sorting an
    /// unchanged graph again copies it.
    pub fn toposort(&self) -> Vec<NodeId> {
        let mut topo = self.topo.lock().unwrap_or_else(|e| e.into_inner());
        match &*topo {
            Some((at, order)) if *at == self.structure => order.clone(),
            _ => {
                let order = self.toposort_with(&[]);
                *topo = Some((self.structure, order.clone()));
                order
            }
        }
    }

    /// Topological order that also respects extra `(before, after)` constraints.
    /// Panics if the constraints form a cycle; use [`FunctionGraph::try_toposort_with`] to get an error.
    pub fn toposort_with(&self, extra: &[(NodeId, NodeId)]) -> Vec<NodeId> {
        self.try_toposort_with(extra)
            .expect("orderings form a cycle")
    }

    /// Topological order respecting extra `(before, after)` constraints, or an error on a cycle.
    pub fn try_toposort_with(&self, extra: &[(NodeId, NodeId)]) -> Result<Vec<NodeId>> {
        let mut before: FxHashMap<NodeId, Vec<NodeId>> = FxHashMap::default();
        for &(b, a) in extra {
            before.entry(a).or_default().push(b);
        }
        // 0 = unvisited, 1 = on stack, 2 = done
        let mut state = vec![0u8; self.nodes.len()];
        let mut order = Vec::with_capacity(self.n_live_nodes);
        let mut stack: Vec<(NodeId, usize)> = Vec::new();
        let preds = |n: NodeId, k: usize| -> Option<NodeId> {
            let node = &self.nodes[n.index()];
            if k < node.inputs.len() {
                Some(self.owner(node.inputs[k]).unwrap_or(NodeId(u32::MAX)))
            } else {
                before
                    .get(&n)
                    .and_then(|b| b.get(k - node.inputs.len()).copied())
            }
        };
        // Every in-graph node is an ancestor of an output, so the walk from the
        // outputs normally covers the graph; the arena is scanned for further
        // roots only when it did not (a graph whose invariants are broken).
        let output_roots: Vec<NodeId> =
            self.outputs.iter().filter_map(|&o| self.owner(o)).collect();
        for pass in 0..2 {
            if pass == 1 && order.len() >= self.n_live_nodes {
                break;
            }
            let roots: Box<dyn Iterator<Item = NodeId> + '_> = if pass == 0 {
                Box::new(output_roots.iter().copied())
            } else {
                Box::new(self.node_ids())
            };
            for root in roots {
                if state[root.index()] != 0 {
                    continue;
                }
                state[root.index()] = 1;
                stack.push((root, 0));
                while let Some(top) = stack.last_mut() {
                    let (n, k) = *top;
                    match preds(n, k) {
                        Some(p) => {
                            top.1 += 1;
                            if p.0 == u32::MAX {
                                continue;
                            }
                            match state[p.index()] {
                                0 => {
                                    state[p.index()] = 1;
                                    stack.push((p, 0));
                                }
                                1 => return Err(Error::Graph(format!("cycle through node {p}"))),
                                _ => {}
                            }
                        }
                        None => {
                            state[n.index()] = 2;
                            order.push(n);
                            stack.pop();
                        }
                    }
                }
            }
        }
        Ok(order)
    }

    // ----- mutation ------------------------------------------------------

    /// Replaces every use of `old` by `new` (PyTensor's `FunctionGraph.replace`).
    pub fn replace(&mut self, old: VarId, new: VarId, reason: &str) -> Result<()> {
        if old == new {
            return Ok(());
        }
        let (told, tnew) = (&self.vars[old.index()].ty, &self.vars[new.index()].ty);
        if !told.accepts_replacement(tnew) {
            return Err(Error::Graph(format!(
                "{reason}: cannot replace a variable of type {told} by one of type {tnew}"
            )));
        }
        if !self.vars[old.index()].in_graph {
            return Ok(());
        }
        if self.replacement_creates_cycle(new, old) {
            return Err(Error::Graph(format!(
                "{reason}: the replacement depends on the variable it replaces"
            )));
        }
        let clients = self.vars[old.index()].clients.clone();
        for c in clients {
            self.change_input(c, new, reason);
        }
        self.after_mutation()
    }

    /// Replaces several variables, in order.
    pub fn replace_all(&mut self, pairs: &[(VarId, VarId)], reason: &str) -> Result<()> {
        for &(old, new) in pairs {
            self.replace(old, new, reason)?;
        }
        Ok(())
    }

    /// Switches one use to another variable (types are the caller's business).
    pub fn change_input(&mut self, client: Client, new: VarId, reason: &str) {
        let old = match client {
            Client::Node(n, i) => {
                std::mem::replace(&mut self.nodes[n.index()].inputs[i as usize], new)
            }
            Client::Output(i) => std::mem::replace(&mut self.outputs[i as usize], new),
        };
        if old == new {
            return;
        }
        self.stats.changes += 1;
        self.structure += 1;
        self.attach_client(new, client, reason);
        if let Client::Node(n, _) = client {
            self.raise_level(n, self.level(new) + 1);
        }
        self.detach_client(old, client, reason);
        self.notify(|f, fg| f.on_change_input(fg, client, old, new, reason));
    }

    /// Would replacing `old` by `new` create a cycle (does `new` depend on `old`)?
    /// Exact, like [`FunctionGraph::depends_on`], but the search from `new`
    /// never expands an in-graph node whose level is not above `old`'s: such
    /// a node cannot depend on `old` (see [`FunctionGraph::level`]). Detached
    /// nodes (the replacement's new part) are always expanded. A local
    /// rewrite's replacement is built on `old`'s neighbourhood, so the check
    /// costs about the size of the replacement, not of the graph.
    fn replacement_creates_cycle(&mut self, new: VarId, old: VarId) -> bool {
        if new == old {
            return true;
        }
        let bound = self.level(old);
        let mut visits = 0u64;
        let mut seen: Vec<NodeId> = Vec::new();
        let mut seen_set: rustc_hash::FxHashSet<NodeId> = rustc_hash::FxHashSet::default();
        let mut stack = vec![new];
        let mut found = false;
        while let Some(v) = stack.pop() {
            if v == old {
                found = true;
                break;
            }
            let Some((n, _)) = self.vars[v.index()].owner else {
                continue;
            };
            let node = &self.nodes[n.index()];
            if node.in_graph && node.level <= bound {
                continue;
            }
            // Small searches are the rule: a vector beats hashing up to a few dozen nodes.
            let fresh = if seen.len() < 32 {
                if seen.contains(&n) {
                    false
                } else {
                    seen.push(n);
                    if seen.len() == 32 {
                        seen_set.extend(seen.iter().copied());
                    }
                    true
                }
            } else {
                seen_set.insert(n)
            };
            if fresh {
                visits += 1;
                stack.extend(node.inputs.iter().copied());
            }
        }
        self.stats.cycle_check_visits += visits;
        found
    }

    /// Raises the level of in-graph node `n` to at least `at_least`, and then
    /// its clients' as needed, so that every node stays above its inputs.
    fn raise_level(&mut self, n: NodeId, at_least: u32) {
        if !self.nodes[n.index()].in_graph || self.nodes[n.index()].level >= at_least {
            return;
        }
        self.nodes[n.index()].level = at_least;
        self.stats.level_raises += 1;
        let mut stack = vec![n];
        while let Some(m) = stack.pop() {
            let above = self.nodes[m.index()].level + 1;
            for k in 0..self.nodes[m.index()].outputs.len() {
                let o = self.nodes[m.index()].outputs[k];
                for c in 0..self.vars[o.index()].clients.len() {
                    let Client::Node(c, _) = self.vars[o.index()].clients[c] else {
                        continue;
                    };
                    let client = &mut self.nodes[c.index()];
                    if client.in_graph && client.level < above {
                        client.level = above;
                        self.stats.level_raises += 1;
                        stack.push(c);
                    }
                }
            }
        }
    }

    /// Does `a` depend on `b` (is `b` an ancestor of `a`, or `a` itself)?
    pub fn depends_on(&self, a: VarId, b: VarId) -> bool {
        if a == b {
            return true;
        }
        let mut seen = rustc_hash::FxHashSet::default();
        let mut stack = vec![a];
        while let Some(v) = stack.pop() {
            if v == b {
                return true;
            }
            if let Some(n) = self.owner(v) {
                if seen.insert(n) {
                    stack.extend(self.nodes[n.index()].inputs.iter().copied());
                }
            }
        }
        false
    }

    fn attach_client(&mut self, v: VarId, client: Client, reason: &str) {
        self.vars[v.index()].clients.push(client);
        if !self.vars[v.index()].in_graph {
            self.import_var(v, reason);
        }
    }

    fn detach_client(&mut self, v: VarId, client: Client, reason: &str) {
        let clients = &mut self.vars[v.index()].clients;
        if let Some(pos) = clients.iter().position(|c| *c == client) {
            clients.swap_remove(pos);
        }
        if clients.is_empty() {
            self.maybe_prune(v, reason);
        }
    }

    /// Imports `v` and every detached ancestor (iteratively, inputs first).
    fn import_var(&mut self, v: VarId, reason: &str) {
        let mut stack = vec![(v, false)];
        while let Some((v, expanded)) = stack.pop() {
            if self.vars[v.index()].in_graph && !expanded {
                continue;
            }
            let Some((n, _)) = self.vars[v.index()].owner else {
                self.vars[v.index()].in_graph = true;
                continue;
            };
            if self.nodes[n.index()].in_graph {
                self.vars[v.index()].in_graph = true;
                continue;
            }
            if !expanded {
                stack.push((v, true));
                for &i in self.nodes[n.index()].inputs.iter().rev() {
                    if !self.vars[i.index()].in_graph {
                        stack.push((i, false));
                    }
                }
                continue;
            }
            // Every input is now in the graph: import the node above them.
            let level = self.nodes[n.index()]
                .inputs
                .iter()
                .map(|&i| self.level(i))
                .max()
                .unwrap_or(0)
                + 1;
            self.nodes[n.index()].level = level;
            self.nodes[n.index()].in_graph = true;
            self.n_live_nodes += 1;
            self.structure += 1;
            self.stats.imported += 1;
            let node = &self.nodes[n.index()];
            let (inputs, outputs) = (node.inputs.clone(), node.outputs.clone());
            for o in outputs {
                self.vars[o.index()].in_graph = true;
            }
            for (k, i) in inputs.into_iter().enumerate() {
                self.vars[i.index()].clients.push(Client::Node(n, k as u32));
            }
            self.notify(|f, fg| f.on_import(fg, n, reason));
        }
    }

    /// Prunes the owner of `v` when none of its outputs has a client, cascading.
    fn maybe_prune(&mut self, v: VarId, reason: &str) {
        let mut stack = vec![v];
        while let Some(v) = stack.pop() {
            let var = &self.vars[v.index()];
            if !var.clients.is_empty() || !var.in_graph {
                continue;
            }
            let Some((n, _)) = var.owner else {
                // Constants leave the graph when unused; inputs stay.
                if var.constant.is_some() {
                    self.vars[v.index()].in_graph = false;
                }
                continue;
            };
            let node = &self.nodes[n.index()];
            if !node.in_graph
                || node
                    .outputs
                    .iter()
                    .any(|o| !self.vars[o.index()].clients.is_empty())
            {
                continue;
            }
            let (inputs, outputs) = (node.inputs.clone(), node.outputs.clone());
            self.nodes[n.index()].in_graph = false;
            self.n_live_nodes -= 1;
            self.structure += 1;
            for o in outputs {
                self.vars[o.index()].in_graph = false;
            }
            for (k, i) in inputs.into_iter().enumerate() {
                let c = Client::Node(n, k as u32);
                let clients = &mut self.vars[i.index()].clients;
                if let Some(pos) = clients.iter().position(|x| *x == c) {
                    clients.swap_remove(pos);
                }
                if clients.is_empty() {
                    stack.push(i);
                }
            }
            self.notify(|f, fg| f.on_prune(fg, n, reason));
        }
    }

    fn notify(&mut self, mut call: impl FnMut(&mut Box<dyn Feature>, &FunctionGraph)) {
        if self.features.is_empty() {
            return;
        }
        let start = clock::now();
        let mut feats = std::mem::take(&mut self.features);
        for f in feats.iter_mut() {
            call(f, self);
        }
        self.features = feats;
        self.stats.callback_ticks += clock::now().wrapping_sub(start);
    }

    fn after_mutation(&self) -> Result<()> {
        if self.check_after_mutation {
            self.check_integrity()?;
        }
        Ok(())
    }

    // ----- features ------------------------------------------------------

    /// Attaches a feature (no-op if one of the same type is already attached).
    pub fn attach_feature<F: Feature>(&mut self, mut feature: F) -> Result<()> {
        if self.has_feature::<F>() {
            return Ok(());
        }
        feature.on_attach(self)?;
        self.features.push(Box::new(feature));
        Ok(())
    }

    /// Detaches the feature of type `F`, if attached.
    pub fn detach_feature<F: Feature>(&mut self) -> Option<Box<dyn Feature>> {
        let pos = self
            .features
            .iter()
            .position(|f| (f.as_ref() as &dyn Any).is::<F>())?;
        let mut f = self.features.remove(pos);
        f.on_detach(self);
        Some(f)
    }

    /// True when a feature of type `F` is attached.
    pub fn has_feature<F: Feature>(&self) -> bool {
        self.features
            .iter()
            .any(|f| (f.as_ref() as &dyn Any).is::<F>())
    }

    /// The attached feature of type `F`.
    pub fn feature<F: Feature>(&self) -> Option<&F> {
        self.features
            .iter()
            .find_map(|f| (f.as_ref() as &dyn Any).downcast_ref::<F>())
    }

    /// The attached feature of type `F`, mutably.
    pub fn feature_mut<F: Feature>(&mut self) -> Option<&mut F> {
        self.features
            .iter_mut()
            .find_map(|f| (f.as_mut() as &mut dyn Any).downcast_mut::<F>())
    }

    /// Names of the attached features, in attachment order.
    pub fn feature_names(&self) -> Vec<&'static str> {
        self.features.iter().map(|f| f.name()).collect()
    }

    /// Runs every feature's `validate`, timing it.
    pub fn validate(&mut self) -> Result<()> {
        let start = clock::now();
        let r = self.features.iter().try_for_each(|f| f.validate(self));
        self.stats.validate_ticks += clock::now().wrapping_sub(start);
        r
    }

    /// Scheduling constraints from every feature.
    pub fn orderings(&self) -> Vec<(NodeId, NodeId)> {
        self.features
            .iter()
            .flat_map(|f| f.orderings(self))
            .collect()
    }

    // ----- verification --------------------------------------------------

    /// Checks the invariants listed in the module docs (levels included).
    pub fn check_integrity(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Graph(format!("integrity check failed: {m}")));
        let mut expected: FxHashMap<VarId, Vec<Client>> = FxHashMap::default();
        for (i, &o) in self.outputs.iter().enumerate() {
            if !self.vars[o.index()].in_graph {
                return bad(format!("output {i} ({o}) is not in the graph"));
            }
            expected
                .entry(o)
                .or_default()
                .push(Client::Output(i as u32));
        }
        let mut live = 0;
        for n in self.node_ids() {
            live += 1;
            let node = &self.nodes[n.index()];
            for (k, &i) in node.inputs.iter().enumerate() {
                if !self.vars[i.index()].in_graph {
                    return bad(format!(
                        "input {k} ({i}) of node {n} ({}) is not in the graph",
                        node.op
                    ));
                }
                expected
                    .entry(i)
                    .or_default()
                    .push(Client::Node(n, k as u32));
                if self.level(i) >= node.level {
                    return bad(format!(
                        "node {n} ({}) has level {} but its input {k} ({i}) has level {}",
                        node.op,
                        node.level,
                        self.level(i)
                    ));
                }
            }
            for (k, &o) in node.outputs.iter().enumerate() {
                if self.vars[o.index()].owner != Some((n, k as u32))
                    || !self.vars[o.index()].in_graph
                {
                    return bad(format!("output {k} of node {n} has an inconsistent owner"));
                }
            }
            if node
                .outputs
                .iter()
                .all(|o| self.vars[o.index()].clients.is_empty())
            {
                return bad(format!(
                    "node {n} ({}) has no clients but was not pruned",
                    node.op
                ));
            }
        }
        if live != self.n_live_nodes {
            return bad(format!(
                "node count {} but {live} nodes are in the graph",
                self.n_live_nodes
            ));
        }
        for (i, var) in self.vars.iter().enumerate() {
            let v = VarId(i as u32);
            if !var.in_graph {
                continue;
            }
            if let Some((n, _)) = var.owner {
                if !self.nodes[n.index()].in_graph {
                    return bad(format!(
                        "variable {v} is in the graph but its owner {n} is not"
                    ));
                }
            } else if var.constant.is_none() && !self.inputs.contains(&v) {
                return bad(format!(
                    "variable {v} has no owner and is neither an input nor a constant"
                ));
            }
            let mut have = var.clients.clone();
            let mut want = expected.remove(&v).unwrap_or_default();
            have.sort();
            want.sort();
            if have != want {
                return bad(format!("clients of {v} are {have:?}, expected {want:?}"));
            }
        }
        if let Some((v, _)) = expected.into_iter().next() {
            return bad(format!("variable {v} is used but not in the graph"));
        }
        let order = self.try_toposort_with(&[])?;
        if order.len() != self.n_live_nodes {
            return bad("the toposort does not cover every node".to_string());
        }
        // A kept order that claims to be current must be this walk's.
        let topo = self.topo.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, kept)) = &*topo {
            if *at == self.structure && *kept != order {
                return bad("the kept toposort is stale".to_string());
            }
        }
        Ok(())
    }
}
