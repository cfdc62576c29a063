//! Rewrite databases: named, tagged entries queried by tags into rewriters.
//!
//! * [`SequenceDB`]: graph rewriters, node rewriters (wrapped in a walk) and
//!   sub-databases at positions; a query gives a [`SequentialGraphRewriter`]
//!   in position order (ties in registration order).
//! * [`EquilibriumDB`]: node rewriters, global / final / cleanup graph
//!   rewriters and sub-databases; a query gives an [`EquilibriumGraphRewriter`].
//! * [`RewriteDatabaseQuery`]: an entry is selected when it has one of the
//!   `include` tags, all of the `require` tags and none of the `exclude` tags;
//!   a selected sub-database is queried with its `subquery`, or the same query.
//!
//! Invariants: names are unique within a database (registration of a
//! duplicate is refused); every entry is tagged with its own name and with the
//! database's name. A database with an inplace barrier (the optdb: 49.5)
//! refuses entries tagged `inplace` below it, and so do the sub-databases
//! registered below it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::error::{Error, Result};

use super::equilibrium::EquilibriumGraphRewriter;
use super::rewriter::{GraphRewriter, NamedGraphRewriter, NamedNodeRewriter, NodeRewriter};
use super::sequential::SequentialGraphRewriter;
use super::walking::WalkingGraphRewriter;

/// The rule the inplace barrier enforces (quoted from the seed documents).
pub const INPLACE_RULE: &str = "Any rewrite which inserts inplace operations in the computation graph must appear \
after the add_destroy_handler \u{201c}rewriter\u{201d}. In other words, the priority of any such rewrites must be >= 50.";

/// A tag query over a rewrite database.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct RewriteDatabaseQuery {
    /// An entry needs one of these tags.
    pub include: BTreeSet<String>,
    /// An entry needs all of these tags.
    pub require: BTreeSet<String>,
    /// An entry must have none of these tags.
    pub exclude: BTreeSet<String>,
    /// Queries for named sub-databases (default: this query).
    pub subquery: BTreeMap<String, RewriteDatabaseQuery>,
}

fn set(tags: &[&str]) -> BTreeSet<String> {
    tags.iter().map(|s| s.to_string()).collect()
}

impl RewriteDatabaseQuery {
    /// A query including these tags.
    pub fn new(include: &[&str]) -> Self {
        RewriteDatabaseQuery {
            include: set(include),
            ..Default::default()
        }
    }
    /// The query with more `include` tags.
    pub fn including(&self, tags: &[&str]) -> Self {
        let mut q = self.clone();
        q.include.extend(set(tags));
        q
    }
    /// The query with more `require` tags.
    pub fn requiring(&self, tags: &[&str]) -> Self {
        let mut q = self.clone();
        q.require.extend(set(tags));
        q
    }
    /// The query with more `exclude` tags.
    pub fn excluding(&self, tags: &[&str]) -> Self {
        let mut q = self.clone();
        q.exclude.extend(set(tags));
        q
    }
    /// The query with a special query for the sub-database `name`.
    pub fn with_subquery(&self, name: &str, q: RewriteDatabaseQuery) -> Self {
        let mut out = self.clone();
        out.subquery.insert(name.to_string(), q);
        out
    }
    /// Whether an entry with these tags is selected.
    pub fn selects(&self, tags: &BTreeSet<String>) -> bool {
        self.include.iter().any(|t| tags.contains(t))
            && self.require.iter().all(|t| tags.contains(t))
            && !self.exclude.iter().any(|t| tags.contains(t))
    }
    fn sub(&self, name: &str) -> &RewriteDatabaseQuery {
        self.subquery.get(name).unwrap_or(self)
    }
}

/// What a [`SequenceDB`] entry holds.
#[derive(Clone)]
pub enum SeqItem {
    /// A graph rewriter.
    Graph(Arc<dyn GraphRewriter>),
    /// A node rewriter, run in a [`WalkingGraphRewriter`].
    Node(Arc<dyn NodeRewriter>),
    /// A sub-sequence.
    Sequence(SequenceDB),
    /// A sub-equilibrium.
    Equilibrium(EquilibriumDB),
}

#[derive(Clone)]
struct SeqEntry {
    name: String,
    tags: BTreeSet<String>,
    position: f64,
    item: SeqItem,
}

/// An ordered database of graph rewriters and sub-databases.
#[derive(Clone)]
pub struct SequenceDB {
    name: String,
    entries: Vec<SeqEntry>,
    inplace_barrier: Option<f64>,
    forbid_inplace: bool,
}

impl std::fmt::Debug for SequenceDB {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SequenceDB({}: {:?})",
            self.name,
            self.entries.iter().map(|e| &e.name).collect::<Vec<_>>()
        )
    }
}

fn check_name(names: impl Iterator<Item = String>, db: &str, name: &str) -> Result<()> {
    let mut names = names;
    if names.any(|n| n == name) {
        return Err(Error::Rewrite(format!(
            "the database {db} already has an entry named '{name}'"
        )));
    }
    Ok(())
}

fn make_tags(name: &str, db: &str, tags: &[&str]) -> BTreeSet<String> {
    let mut t = set(tags);
    t.insert(name.to_string());
    t.insert(db.to_string());
    t
}

fn inplace_error(db: &str, name: &str, position: Option<f64>) -> Error {
    let at = position.map_or_else(String::new, |p| format!(" at position {p}"));
    Error::Rewrite(format!(
        "cannot register '{name}' tagged 'inplace' in {db}{at}: {INPLACE_RULE}"
    ))
}

impl SequenceDB {
    /// An empty sequence database.
    pub fn new(name: impl Into<String>) -> Self {
        SequenceDB {
            name: name.into(),
            entries: Vec::new(),
            inplace_barrier: None,
            forbid_inplace: false,
        }
    }

    /// Refuses entries tagged `inplace` at positions below `position`.
    pub fn with_inplace_barrier(mut self, position: f64) -> Self {
        self.inplace_barrier = Some(position);
        self
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Registers an entry at `position` with `tags`.
    pub fn register(
        &mut self,
        name: &str,
        item: SeqItem,
        tags: &[&str],
        position: f64,
    ) -> Result<()> {
        check_name(
            self.entries.iter().map(|e| e.name.clone()),
            &self.name,
            name,
        )?;
        if !position.is_finite() {
            return Err(Error::Rewrite(format!(
                "position of '{name}' must be finite, got {position}"
            )));
        }
        let tags = make_tags(name, &self.name, tags);
        let below_barrier =
            self.forbid_inplace || self.inplace_barrier.is_some_and(|b| position < b);
        if below_barrier && tags.contains("inplace") {
            return Err(inplace_error(&self.name, name, Some(position)));
        }
        let mut item = item;
        if below_barrier {
            match &mut item {
                SeqItem::Sequence(db) => db.forbid_inplace(name)?,
                SeqItem::Equilibrium(db) => db.forbid_inplace(name)?,
                _ => {}
            }
        }
        self.entries.push(SeqEntry {
            name: name.to_string(),
            tags,
            position,
            item,
        });
        Ok(())
    }

    /// Registers a graph rewriter.
    pub fn register_graph(
        &mut self,
        name: &str,
        rw: Arc<dyn GraphRewriter>,
        tags: &[&str],
        position: f64,
    ) -> Result<()> {
        self.register(name, SeqItem::Graph(rw), tags, position)
    }

    /// Registers a node rewriter (run in a walk when selected).
    pub fn register_node(
        &mut self,
        name: &str,
        rw: Arc<dyn NodeRewriter>,
        tags: &[&str],
        position: f64,
    ) -> Result<()> {
        self.register(name, SeqItem::Node(rw), tags, position)
    }

    fn forbid_inplace(&mut self, path: &str) -> Result<()> {
        self.forbid_inplace = true;
        for e in &mut self.entries {
            if e.tags.contains("inplace") {
                return Err(inplace_error(path, &e.name, None));
            }
            match &mut e.item {
                SeqItem::Sequence(db) => db.forbid_inplace(&e.name)?,
                SeqItem::Equilibrium(db) => db.forbid_inplace(&e.name)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// The names of the entries, in position order.
    pub fn names(&self) -> Vec<String> {
        self.ordered().into_iter().map(|e| e.name.clone()).collect()
    }

    fn ordered(&self) -> Vec<&SeqEntry> {
        let mut v: Vec<&SeqEntry> = self.entries.iter().collect();
        v.sort_by(|a, b| a.position.total_cmp(&b.position));
        v
    }

    /// The sub-sequence `name`, for registration.
    pub fn sequence_mut(&mut self, name: &str) -> Result<&mut SequenceDB> {
        let db = self.name.clone();
        match self
            .entries
            .iter_mut()
            .find(|e| e.name == name)
            .map(|e| &mut e.item)
        {
            Some(SeqItem::Sequence(s)) => Ok(s),
            _ => Err(Error::Rewrite(format!(
                "{db} has no sequence database named '{name}'"
            ))),
        }
    }

    /// The sub-equilibrium `name`, for registration.
    pub fn equilibrium_mut(&mut self, name: &str) -> Result<&mut EquilibriumDB> {
        let db = self.name.clone();
        match self
            .entries
            .iter_mut()
            .find(|e| e.name == name)
            .map(|e| &mut e.item)
        {
            Some(SeqItem::Equilibrium(s)) => Ok(s),
            _ => Err(Error::Rewrite(format!(
                "{db} has no equilibrium database named '{name}'"
            ))),
        }
    }

    /// The rewriter the query selects, named after the database.
    pub fn query(&self, q: &RewriteDatabaseQuery) -> SequentialGraphRewriter {
        self.query_named(q, &self.name)
    }

    /// The rewriter the query selects, with another name for the top level.
    pub fn query_named(&self, q: &RewriteDatabaseQuery, name: &str) -> SequentialGraphRewriter {
        let mut out = Vec::new();
        for e in self.ordered() {
            if !q.selects(&e.tags) {
                continue;
            }
            let rw: Arc<dyn GraphRewriter> = match &e.item {
                SeqItem::Graph(g) => g.clone(),
                SeqItem::Node(n) => Arc::new(WalkingGraphRewriter::with_rewriters(
                    &e.name,
                    vec![NamedNodeRewriter::named(&e.name, n.clone())],
                )),
                SeqItem::Sequence(db) => Arc::new(db.query(q.sub(&e.name))),
                SeqItem::Equilibrium(db) => Arc::new(db.query(q.sub(&e.name))),
            };
            out.push(NamedGraphRewriter::named(&e.name, rw));
        }
        SequentialGraphRewriter::new(name, out)
    }

    /// The selected entries as paths (`canonicalize/local_x`), in execution order.
    pub fn explain(&self, q: &RewriteDatabaseQuery) -> Vec<String> {
        let mut out = Vec::new();
        for e in self.ordered() {
            if !q.selects(&e.tags) {
                continue;
            }
            out.push(e.name.clone());
            let sub = match &e.item {
                SeqItem::Sequence(db) => db.explain(q.sub(&e.name)),
                SeqItem::Equilibrium(db) => db.explain(q.sub(&e.name)),
                _ => Vec::new(),
            };
            out.extend(sub.into_iter().map(|s| format!("{}/{s}", e.name)));
        }
        out
    }
}

/// The role of a graph rewriter in an equilibrium.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphRole {
    /// Run at the start of every pass.
    Global,
    /// Run at the end of every pass.
    Final,
    /// Run after every phase that changed the graph (must be cheap).
    Cleanup,
}

/// What an [`EquilibriumDB`] entry holds.
#[derive(Clone)]
pub enum EqItem {
    /// A node rewriter.
    Node(Arc<dyn NodeRewriter>),
    /// A graph rewriter with its role.
    Graph(Arc<dyn GraphRewriter>, GraphRole),
    /// A sub-database whose selected entries join this equilibrium.
    Db(EquilibriumDB),
}

#[derive(Clone)]
struct EqEntry {
    name: String,
    tags: BTreeSet<String>,
    item: EqItem,
}

/// A database of rewriters applied together until equilibrium.
#[derive(Clone)]
pub struct EquilibriumDB {
    name: String,
    entries: Vec<EqEntry>,
    ignore_newtrees: bool,
    max_use_ratio: f64,
    forbid_inplace: bool,
}

impl std::fmt::Debug for EquilibriumDB {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "EquilibriumDB({}: {:?})",
            self.name,
            self.entries.iter().map(|e| &e.name).collect::<Vec<_>>()
        )
    }
}

impl EquilibriumDB {
    /// An empty equilibrium database (new trees are visited, `max_use_ratio` 5).
    pub fn new(name: impl Into<String>) -> Self {
        EquilibriumDB {
            name: name.into(),
            entries: Vec::new(),
            ignore_newtrees: false,
            max_use_ratio: 5.0,
            forbid_inplace: false,
        }
    }

    /// Sets `ignore_newtrees` for the equilibrium a query builds.
    pub fn ignore_newtrees(mut self, ignore: bool) -> Self {
        self.ignore_newtrees = ignore;
        self
    }

    /// Sets `max_use_ratio` for the equilibrium a query builds.
    pub fn max_use_ratio(mut self, ratio: f64) -> Self {
        self.max_use_ratio = ratio;
        self
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Registers an entry with `tags`.
    pub fn register(&mut self, name: &str, item: EqItem, tags: &[&str]) -> Result<()> {
        check_name(
            self.entries.iter().map(|e| e.name.clone()),
            &self.name,
            name,
        )?;
        let tags = make_tags(name, &self.name, tags);
        if self.forbid_inplace && tags.contains("inplace") {
            return Err(inplace_error(&self.name, name, None));
        }
        let mut item = item;
        if self.forbid_inplace {
            if let EqItem::Db(db) = &mut item {
                db.forbid_inplace(name)?;
            }
        }
        self.entries.push(EqEntry {
            name: name.to_string(),
            tags,
            item,
        });
        Ok(())
    }

    /// Registers a node rewriter.
    pub fn register_node(
        &mut self,
        name: &str,
        rw: Arc<dyn NodeRewriter>,
        tags: &[&str],
    ) -> Result<()> {
        self.register(name, EqItem::Node(rw), tags)
    }

    /// Registers a global graph rewriter (start of every pass).
    pub fn register_global(
        &mut self,
        name: &str,
        rw: Arc<dyn GraphRewriter>,
        tags: &[&str],
    ) -> Result<()> {
        self.register(name, EqItem::Graph(rw, GraphRole::Global), tags)
    }

    /// Registers a final graph rewriter (end of every pass).
    pub fn register_final(
        &mut self,
        name: &str,
        rw: Arc<dyn GraphRewriter>,
        tags: &[&str],
    ) -> Result<()> {
        self.register(name, EqItem::Graph(rw, GraphRole::Final), tags)
    }

    /// Registers a cleanup graph rewriter (after every phase that changed the graph).
    pub fn register_cleanup(
        &mut self,
        name: &str,
        rw: Arc<dyn GraphRewriter>,
        tags: &[&str],
    ) -> Result<()> {
        self.register(name, EqItem::Graph(rw, GraphRole::Cleanup), tags)
    }

    fn forbid_inplace(&mut self, path: &str) -> Result<()> {
        self.forbid_inplace = true;
        for e in &mut self.entries {
            if e.tags.contains("inplace") {
                return Err(inplace_error(path, &e.name, None));
            }
            if let EqItem::Db(db) = &mut e.item {
                db.forbid_inplace(&e.name)?;
            }
        }
        Ok(())
    }

    /// The entry names, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.entries.iter().map(|e| e.name.clone()).collect()
    }

    fn collect(
        &self,
        q: &RewriteDatabaseQuery,
        nodes: &mut Vec<NamedNodeRewriter>,
        graphs: &mut Vec<(NamedGraphRewriter, GraphRole)>,
    ) {
        for e in &self.entries {
            if !q.selects(&e.tags) {
                continue;
            }
            match &e.item {
                EqItem::Node(n) => nodes.push(NamedNodeRewriter::named(&e.name, n.clone())),
                EqItem::Graph(g, role) => {
                    graphs.push((NamedGraphRewriter::named(&e.name, g.clone()), *role))
                }
                EqItem::Db(db) => db.collect(q.sub(&e.name), nodes, graphs),
            }
        }
    }

    /// The equilibrium rewriter the query selects.
    pub fn query(&self, q: &RewriteDatabaseQuery) -> EquilibriumGraphRewriter {
        let (mut nodes, mut graphs) = (Vec::new(), Vec::new());
        self.collect(q, &mut nodes, &mut graphs);
        let mut eq = EquilibriumGraphRewriter::with_named(&self.name, nodes)
            .max_use_ratio(self.max_use_ratio)
            .ignore_newtrees(self.ignore_newtrees);
        for (g, role) in graphs {
            eq = match role {
                GraphRole::Global => eq.global(g),
                GraphRole::Final => eq.final_rewriter(g),
                GraphRole::Cleanup => eq.cleanup(g),
            };
        }
        eq
    }

    /// The selected entries as paths, in registration order.
    pub fn explain(&self, q: &RewriteDatabaseQuery) -> Vec<String> {
        let mut out = Vec::new();
        for e in &self.entries {
            if !q.selects(&e.tags) {
                continue;
            }
            out.push(e.name.clone());
            if let EqItem::Db(db) = &e.item {
                out.extend(
                    db.explain(q.sub(&e.name))
                        .into_iter()
                        .map(|s| format!("{}/{s}", e.name)),
                );
            }
        }
        out
    }
}
