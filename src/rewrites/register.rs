//! Assembles the registered optdb ([`optdb`]: the framework's skeleton filled
//! with the library) and the [`rewrite_graph`] entry point that queries it.
//! The framework (`crate::rewriting`) never calls back into this module.
//!
//! Registers the rewrite library in the optdb: the canonicalize (with the
//! indexing rules of `subtensor.rs`), stabilize
//! and specialize rules (with constant folding as a final rewriter), the
//! BlasOpt database at 2.5 (`gemm_optimizer`), elemwise fusion at 49 (the
//! FusionOptimizer, then reduction input fusion), the `add_destroy_handler`
//! marker at 49.5 and the inplace passes at 50 (Gemm, slice updates, then element-wise). Every rule is tagged `fast_run` and its database's name, and
//! `fast_compile` when cheap.

use std::sync::{Arc, Mutex, OnceLock};

use rustc_hash::FxHashMap;

use crate::error::Result;
use crate::graph::{DestroyHandler, FunctionGraph};
use crate::rewriting::db::{EquilibriumDB, RewriteDatabaseQuery, SeqItem, SequenceDB};
use crate::rewriting::{
    optdb_skeleton, AsQuery, FnGraphRewriter, FnNodeRewriter, GraphRewriter, Rewrite,
    RewriterProfile, SequentialGraphRewriter, Track, Tracks, WalkingGraphRewriter,
};

use super::rule::Rule;
use super::{
    alloc, blas, canonicalize, erf, fusion, identities, indexing, inplace, reduce_fusion,
    sibling_fusion, softmax, specialize, stabilize, subtensor,
};

/// Position of `add_destroy_handler` (inplace rewrites must come after it).
pub const ADD_DESTROY_HANDLER: f64 = 49.5;

/// The optdb: the framework's standard structure
/// ([`optdb_skeleton`]) filled with the rewrite library
/// ([`register_library`]). Built afresh on every call (no global state).
pub fn optdb() -> SequenceDB {
    let mut db = optdb_skeleton();
    register_library(&mut db).expect("the rewrite library registers cleanly");
    db
}

/// The registered optdb of this process, built on first use: its tables
/// never change once registered, and building them (about 200 rules with
/// their tags and tracks) cost a tenth of a millisecond on every
/// compilation. Callers that change a database build their own with
/// [`optdb`].
pub fn shared_optdb() -> &'static SequenceDB {
    static OPTDB: OnceLock<SequenceDB> = OnceLock::new();
    OPTDB.get_or_init(optdb)
}

/// The rewriter the [`shared_optdb`] gives for `q`, built once per
/// distinct query and name in this process. Building one (walking every
/// entry's tags, cloning ~200 names into fresh equilibria) was a tenth of
/// the FAST_RUN rewrite of a suite workload; a built rewriter holds no
/// state between runs, so every compile of a mode can share it. The table
/// is bounded ([`QUERY_CACHE_LIMIT`]): past it, it starts afresh.
fn shared_query(q: &impl AsQuery) -> Arc<SequentialGraphRewriter> {
    type Table = FxHashMap<(RewriteDatabaseQuery, String), Arc<SequentialGraphRewriter>>;
    static QUERIES: OnceLock<Mutex<Table>> = OnceLock::new();
    let key = (q.as_query(), q.query_name());
    let table = QUERIES.get_or_init(Default::default);
    if let Some(rw) = table.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return rw.clone();
    }
    // Built outside the lock: another thread may build the same one, and
    // either copy serves.
    let rw = Arc::new(shared_optdb().query_named(&key.0, &key.1));
    let mut table = table.lock().unwrap_or_else(|e| e.into_inner());
    if table.len() >= QUERY_CACHE_LIMIT {
        table.clear();
    }
    table.insert(key, rw.clone());
    rw
}

/// How many distinct queries [`shared_query`] keeps (a process uses a
/// handful of modes; a program generating queries must not grow it forever).
const QUERY_CACHE_LIMIT: usize = 64;

/// Rewrites `fg` with the rewriters of the [`optdb`] the query selects.
pub fn rewrite_graph(fg: &mut FunctionGraph, q: &impl AsQuery) -> Result<RewriterProfile> {
    shared_query(q).rewrite(fg)
}

/// The node rules registered in the equilibrium database `db` (`canonicalize`,
/// `stabilize` or `specialize`; empty for any other name), gathered from
/// their topic files in registration order.
pub fn database_rules(db: &str) -> Vec<Rule> {
    match db {
        "canonicalize" => {
            let mut rules = canonicalize::rules();
            rules.extend(identities::rules());
            rules.extend(subtensor::rules());
            rules.extend(indexing::rules());
            rules.extend(softmax::canonicalize_rules());
            rules.extend(alloc::rules());
            rules
        }
        "stabilize" => {
            let mut rules = stabilize::rules();
            rules.extend(erf::rules());
            rules.extend(alloc::rules());
            rules
        }
        "specialize" => {
            let mut rules = specialize::rules();
            rules.extend(alloc::rules());
            rules.extend(alloc::specialize_rules());
            rules
        }
        _ => Vec::new(),
    }
}

/// Wraps a rule as a node rewriter.
pub fn node_rewriter(rule: Rule) -> FnNodeRewriter {
    let tracks = if rule.tracks.is_empty() {
        Tracks::Only(vec![Track::AnyElemwise])
    } else {
        Tracks::kinds(rule.tracks)
    };
    let f = rule.apply;
    FnNodeRewriter::new(rule.name, tracks, move |fg, n| {
        Ok(f(fg, n)?.map(Rewrite::single))
    })
}

fn register_rules(db: &mut EquilibriumDB, rules: Vec<Rule>, db_name: &str) -> Result<()> {
    for rule in rules {
        let mut tags = vec!["fast_run", db_name];
        if rule.fast_compile {
            tags.push("fast_compile");
        }
        db.register_node(rule.name, Arc::new(node_rewriter(rule)), &tags)?;
    }
    Ok(())
}

fn constant_folding() -> Arc<dyn GraphRewriter> {
    let rule = Rule {
        name: "constant_folding",
        tracks: &[],
        apply: canonicalize::constant_folding,
        fast_compile: true,
    };
    let tracks_all = FnNodeRewriter::new(rule.name, Tracks::All, move |fg, n| {
        Ok((rule.apply)(fg, n)?.map(Rewrite::single))
    });
    Arc::new(WalkingGraphRewriter::new(Arc::new(tracks_all)).named("constant_folding"))
}

/// Fills the databases of a fresh optdb (see the module docs).
pub fn register_library(optdb: &mut SequenceDB) -> Result<()> {
    {
        let db = optdb.equilibrium_mut("canonicalize")?;
        register_rules(db, database_rules("canonicalize"), "canonicalize")?;
        db.register_final(
            "constant_folding",
            constant_folding(),
            &["fast_run", "fast_compile", "canonicalize"],
        )?;
    }
    {
        let db = optdb.equilibrium_mut("stabilize")?;
        register_rules(db, database_rules("stabilize"), "stabilize")?;
        db.register_final(
            "constant_folding",
            constant_folding(),
            &["fast_run", "stabilize"],
        )?;
    }
    {
        let db = optdb.equilibrium_mut("specialize")?;
        register_rules(db, database_rules("specialize"), "specialize")?;
        db.register_final(
            "constant_folding",
            constant_folding(),
            &["fast_run", "specialize"],
        )?;
    }
    {
        // Before fusion, which would swallow the sums into Composites.
        let mut db = SequenceDB::new("BlasOpt");
        let to_dot =
            WalkingGraphRewriter::new(Arc::new(node_rewriter(blas::sum_mul_to_dot_rule())))
                .named("local_sum_mul_to_dot");
        db.register_graph(
            "local_sum_mul_to_dot",
            Arc::new(to_dot),
            &["fast_run", "blas"],
            -1.0,
        )?;
        let gemm = WalkingGraphRewriter::new(Arc::new(node_rewriter(blas::gemm_rule())))
            .named("gemm_optimizer");
        db.register_graph("gemm_optimizer", Arc::new(gemm), &["fast_run", "blas"], 0.0)?;
        optdb.register(
            "BlasOpt",
            SeqItem::Sequence(db),
            &["fast_run", "blas"],
            blas::BLAS_OPT,
        )?;
    }
    {
        let db = optdb.sequence_mut("elemwise_fusion")?;
        let fuse = FnGraphRewriter::new("composite_elemwise_fusion", |fg| {
            fusion::fuse_to_fixed_point(fg, fusion::DEFAULT_MAX_OPERANDS).map(|_| ())
        });
        db.register_graph(
            "composite_elemwise_fusion",
            Arc::new(fuse),
            &["fast_run", "fusion"],
            0.0,
        )?;
        let careduce = FnGraphRewriter::new("local_careduce_fusion", |fg| {
            reduce_fusion::fuse_reductions(fg).map(|_| ())
        });
        db.register_graph(
            "local_careduce_fusion",
            Arc::new(careduce),
            &["fast_run", "fusion"],
            1.0,
        )?;
        // After reduction input fusion, which only folds one-output producers.
        // Merging siblings reorders the graph, which can let vertical fusion
        // take a producer it had to leave (its convexity test follows the
        // topological order); both fusions run again until nothing changes,
        // so that a second FAST_RUN pass finds nothing to do.
        let siblings = FnGraphRewriter::new("sibling_elemwise_fusion", |fg| {
            let max = fusion::DEFAULT_MAX_OPERANDS;
            for _ in 0..8 {
                if sibling_fusion::merge_siblings(fg, max)? == 0 {
                    break;
                }
                let fused = fusion::fuse_to_fixed_point(fg, max)?.fused_nodes;
                let folded = reduce_fusion::fuse_reductions(fg)?.fused;
                if fused == 0 && folded == 0 {
                    break;
                }
            }
            Ok(())
        });
        db.register_graph(
            "sibling_elemwise_fusion",
            Arc::new(siblings),
            &["fast_run", "fusion"],
            2.0,
        )?;
    }
    let add_dh = FnGraphRewriter::new("add_destroy_handler", |fg| {
        if !fg.has_feature::<DestroyHandler>() {
            let mutable = fg.mutable_inputs().to_vec();
            fg.attach_feature(DestroyHandler::new(&mutable))?;
        }
        Ok(())
    });
    optdb.register_graph(
        "add_destroy_handler",
        Arc::new(add_dh),
        &["fast_run", "inplace"],
        ADD_DESTROY_HANDLER,
    )?;
    {
        let db = optdb.sequence_mut("inplace")?;
        // Before the element-wise pass, as PyTensor's InplaceBlasOpt: a
        // Gemm can only overwrite z, an element-wise node any input.
        let gemm = FnGraphRewriter::new("inplace_gemm_optimizer", |fg| {
            inplace::inplace_gemm(fg).map(|_| ())
        });
        db.register_graph(
            "inplace_gemm_optimizer",
            Arc::new(gemm),
            &["fast_run", "inplace"],
            -1.0,
        )?;
        // Before the element-wise pass: an update can only overwrite x.
        let inc = FnGraphRewriter::new("inplace_incsubtensor", |fg| {
            inplace::inplace_incsubtensor(fg).map(|_| ())
        });
        db.register_graph(
            "inplace_incsubtensor",
            Arc::new(inc),
            &["fast_run", "inplace"],
            -0.5,
        )?;
        let pass = FnGraphRewriter::new("inplace_elemwise_optimizer", |fg| {
            inplace::inplace_elemwise(fg).map(|_| ())
        });
        db.register_graph(
            "inplace_elemwise_optimizer",
            Arc::new(pass),
            &["fast_run", "inplace"],
            0.0,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewriting::Mode;

    /// A query is built once and shared; another query, or the same query
    /// under another name, gets its own rewriter.
    #[test]
    fn queries_are_built_once_per_query_and_name() {
        let fast_run = Mode::fast_run();
        let a = shared_query(&fast_run);
        assert!(Arc::ptr_eq(&a, &shared_query(&Mode::fast_run())));
        let fewer = fast_run.excluding(&["fusion"]);
        let b = shared_query(&fewer);
        assert!(!Arc::ptr_eq(&a, &b));
        assert!(b.rewriters().len() < a.rewriters().len());
        let renamed = shared_query(&fast_run.as_query());
        assert!(!Arc::ptr_eq(&a, &renamed));
        assert_eq!(renamed.name(), "optdb");
        assert_eq!(a.name(), fast_run.name());
    }
}
