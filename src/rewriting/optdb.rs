//! The optdb's structure (the registry of every rewrite kiln applies when
//! compiling) and the compilation [`Mode`]s that query it.
//!
//! [`optdb_skeleton`] builds the structure afresh (no global mutable state):
//!
//! | position | name            | kind          | tags                            |
//! |---------:|-----------------|---------------|---------------------------------|
//! | 0        | merge1          | MergeOptimizer| fast_run, fast_compile, merge   |
//! | 1        | canonicalize    | EquilibriumDB | fast_run, fast_compile          |
//! | 1.5      | stabilize       | EquilibriumDB | fast_run                        |
//! | 2        | specialize      | EquilibriumDB | fast_run                        |
//! | 49       | elemwise_fusion | SequenceDB    | fast_run, fusion                |
//! | 49       | merge2          | MergeOptimizer| fast_run, fast_compile, merge   |
//! | 50       | inplace         | SequenceDB    | fast_run, inplace               |
//! | 100      | merge3          | MergeOptimizer| fast_run, fast_compile, merge   |
//!
//! `canonicalize` also holds a MergeOptimizer as a cleanup rewriter (as in
//! PyTensor), so `include=["canonicalize"]` merges too. The rewrite library
//! fills canonicalize / stabilize / specialize / fusion / inplace and adds
//! the BlasOpt database (2.5, tags fast_run, blas) and the
//! `add_destroy_handler` marker (49.5); the registered optdb is assembled
//! above both this framework and the library, by `kiln::rewrites::optdb()`
//! (with `kiln::rewrites::rewrite_graph`), so the framework never depends on
//! the library. The inplace barrier is enforced:
//! an entry tagged `inplace` below 49.5 is refused with
//! [`INPLACE_RULE`](super::db::INPLACE_RULE).

use std::sync::Arc;

use crate::error::Result;
use crate::graph::FunctionGraph;

use super::db::{EquilibriumDB, RewriteDatabaseQuery, SeqItem, SequenceDB};
use super::merge::MergeOptimizer;
use super::profile::RewriterProfile;
use super::rewriter::GraphRewriter;

/// Position of the `add_destroy_handler` marker: inplace rewrites go after it.
pub const INPLACE_BARRIER: f64 = 49.5;

/// The optdb's standard structure with empty sub-databases: the rewrite
/// library fills it (`kiln::rewrites::optdb()`); tests of the database
/// machinery and custom rewrite libraries start from it.
pub fn optdb_skeleton() -> SequenceDB {
    let mut db = SequenceDB::new("optdb").with_inplace_barrier(INPLACE_BARRIER);
    let merge_tags = ["fast_run", "fast_compile", "merge"];
    let reg = |db: &mut SequenceDB, name: &str, item: SeqItem, tags: &[&str], pos: f64| {
        db.register(name, item, tags, pos)
            .expect("the standard optdb entries are distinct and legal")
    };
    reg(
        &mut db,
        "merge1",
        SeqItem::Graph(Arc::new(MergeOptimizer::new())),
        &merge_tags,
        0.0,
    );
    let mut canonicalize = EquilibriumDB::new("canonicalize");
    canonicalize
        .register_cleanup(
            "merge",
            Arc::new(MergeOptimizer::new()),
            &["fast_run", "fast_compile"],
        )
        .expect("fresh database");
    reg(
        &mut db,
        "canonicalize",
        SeqItem::Equilibrium(canonicalize),
        &["fast_run", "fast_compile"],
        1.0,
    );
    reg(
        &mut db,
        "stabilize",
        SeqItem::Equilibrium(EquilibriumDB::new("stabilize")),
        &["fast_run"],
        1.5,
    );
    reg(
        &mut db,
        "specialize",
        SeqItem::Equilibrium(EquilibriumDB::new("specialize")),
        &["fast_run"],
        2.0,
    );
    reg(
        &mut db,
        "elemwise_fusion",
        SeqItem::Sequence(SequenceDB::new("elemwise_fusion")),
        &["fast_run", "fusion"],
        49.0,
    );
    reg(
        &mut db,
        "merge2",
        SeqItem::Graph(Arc::new(MergeOptimizer::new())),
        &merge_tags,
        49.0,
    );
    reg(
        &mut db,
        "inplace",
        SeqItem::Sequence(SequenceDB::new("inplace")),
        &["fast_run", "inplace"],
        50.0,
    );
    reg(
        &mut db,
        "merge3",
        SeqItem::Graph(Arc::new(MergeOptimizer::new())),
        &merge_tags,
        100.0,
    );
    db
}

/// A compilation mode: a named optdb query.
#[derive(Debug, Clone, PartialEq)]
pub struct Mode {
    name: String,
    query: RewriteDatabaseQuery,
}

impl Mode {
    /// Every rewrite tagged `fast_run`.
    pub fn fast_run() -> Mode {
        Mode {
            name: "OPT_FAST_RUN".into(),
            query: RewriteDatabaseQuery::new(&["fast_run"]),
        }
    }
    /// Every rewrite tagged `fast_compile` (merges and canonicalize).
    pub fn fast_compile() -> Mode {
        Mode {
            name: "OPT_FAST_COMPILE".into(),
            query: RewriteDatabaseQuery::new(&["fast_compile"]),
        }
    }
    /// No rewrites.
    pub fn none() -> Mode {
        Mode {
            name: "OPT_NONE".into(),
            query: RewriteDatabaseQuery::default(),
        }
    }
    /// The mode also including these tags.
    pub fn including(&self, tags: &[&str]) -> Mode {
        Mode {
            name: self.name.clone(),
            query: self.query.including(tags),
        }
    }
    /// The mode requiring these tags.
    pub fn requiring(&self, tags: &[&str]) -> Mode {
        Mode {
            name: self.name.clone(),
            query: self.query.requiring(tags),
        }
    }
    /// The mode without rewrites tagged with these.
    pub fn excluding(&self, tags: &[&str]) -> Mode {
        Mode {
            name: self.name.clone(),
            query: self.query.excluding(tags),
        }
    }
    /// The mode's name (`OPT_FAST_RUN`, ...).
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Anything that designates an optdb query: a [`Mode`] or a [`RewriteDatabaseQuery`].
pub trait AsQuery {
    /// The query.
    fn as_query(&self) -> RewriteDatabaseQuery;
    /// The name of the top-level rewriter.
    fn query_name(&self) -> String {
        "optdb".to_string()
    }
}

impl AsQuery for Mode {
    fn as_query(&self) -> RewriteDatabaseQuery {
        self.query.clone()
    }
    fn query_name(&self) -> String {
        self.name.clone()
    }
}

impl AsQuery for RewriteDatabaseQuery {
    fn as_query(&self) -> RewriteDatabaseQuery {
        self.clone()
    }
}

/// Rewrites `fg` with the rewriters `db` selects for the query.
pub fn rewrite_graph_with(
    db: &SequenceDB,
    fg: &mut FunctionGraph,
    q: &impl AsQuery,
) -> Result<RewriterProfile> {
    db.query_named(&q.as_query(), &q.query_name()).rewrite(fg)
}
