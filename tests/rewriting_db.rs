//! Rewrite databases, the optdb, modes and the FAST_RUN profile.

// Graph builders take slices of tensors; cloning into array literals reads best here.
#![allow(clippy::cloned_ref_to_slice_refs)]

use std::sync::Arc;

use kiln::eval::evaluate;
use kiln::graph::FunctionGraph;
use kiln::rewriting::*;
use kiln::*;

fn pat(i: &str, o: &str) -> Arc<dyn NodeRewriter> {
    Arc::new(PatternNodeRewriter::parse(i, o).unwrap())
}

fn noop_graph(name: &str) -> Arc<dyn GraphRewriter> {
    Arc::new(FnGraphRewriter::new(name, |_fg| Ok(())))
}

/// A fresh optdb-like database with test entries in every part.
fn test_optdb() -> SequenceDB {
    let mut db = optdb_skeleton();
    let canon = db.equilibrium_mut("canonicalize").unwrap();
    canon
        .register_node(
            "t_mul_one",
            pat("(mul ?x 1.0)", "?x"),
            &["fast_run", "fast_compile"],
        )
        .unwrap();
    canon
        .register_node(
            "t_add_zero",
            pat("(add ?x 0.0)", "?x"),
            &["fast_run", "fast_compile"],
        )
        .unwrap();
    canon
        .register_node(
            "t_log_exp",
            pat("(log (exp ?x))", "?x"),
            &["fast_run", "fast_compile"],
        )
        .unwrap();
    canon
        .register_node(
            "t_unused",
            pat("(sqrt (sqr ?x))", "(abs ?x)"),
            &["fast_run"],
        )
        .unwrap();
    let stab = db.equilibrium_mut("stabilize").unwrap();
    stab.register_node(
        "t_log1p",
        pat("(log (add 1.0 ?x))", "(log1p ?x)"),
        &["fast_run"],
    )
    .unwrap();
    let spec = db.equilibrium_mut("specialize").unwrap();
    spec.register_node(
        "t_mul_to_sqr",
        pat("(mul ?x ?x)", "(sqr ?x)"),
        &["fast_run"],
    )
    .unwrap();
    spec.register_node(
        "t_div_to_recip",
        pat("(true_div 1.0 ?x)", "(reciprocal ?x)"),
        &["fast_run"],
    )
    .unwrap();
    let fusion = db.sequence_mut("elemwise_fusion").unwrap();
    fusion
        .register_graph(
            "t_fusion",
            noop_graph("t_fusion"),
            &["fast_run", "fusion"],
            0.0,
        )
        .unwrap();
    let inplace = db.sequence_mut("inplace").unwrap();
    inplace
        .register_graph(
            "t_inplace_elemwise",
            noop_graph("t_inplace_elemwise"),
            &["fast_run", "inplace"],
            75.0,
        )
        .unwrap();
    db
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn fast_run_query_selects() {
    let db = test_optdb();
    let sel = db.explain(&RewriteDatabaseQuery::new(&["fast_run"]));
    assert_eq!(
        sel,
        strs(&[
            "merge1",
            "canonicalize",
            "canonicalize/merge",
            "canonicalize/t_mul_one",
            "canonicalize/t_add_zero",
            "canonicalize/t_log_exp",
            "canonicalize/t_unused",
            "stabilize",
            "stabilize/t_log1p",
            "specialize",
            "specialize/t_mul_to_sqr",
            "specialize/t_div_to_recip",
            "elemwise_fusion",
            "elemwise_fusion/t_fusion",
            "merge2",
            "inplace",
            "inplace/t_inplace_elemwise",
            "merge3",
        ])
    );
}

#[test]
fn fast_compile_query_selects() {
    let db = test_optdb();
    let sel = db.explain(&RewriteDatabaseQuery::new(&["fast_compile"]));
    assert_eq!(
        sel,
        strs(&[
            "merge1",
            "canonicalize",
            "canonicalize/merge",
            "canonicalize/t_mul_one",
            "canonicalize/t_add_zero",
            "canonicalize/t_log_exp",
            "merge2",
            "merge3",
        ])
    );
}

#[test]
fn fast_run_excluding_inplace_selects() {
    let db = test_optdb();
    let q = RewriteDatabaseQuery::new(&["fast_run"]).excluding(&["inplace"]);
    let sel = db.explain(&q);
    assert!(!sel.iter().any(|s| s.contains("inplace")), "{sel:?}");
    assert_eq!(sel.len(), 16);
    assert_eq!(Mode::fast_run().excluding(&["inplace"]).as_query(), q);
}

#[test]
fn include_canonicalize_gives_merging_and_canonicalize() {
    let db = test_optdb();
    let q = RewriteDatabaseQuery::new(&["canonicalize"]);
    assert_eq!(
        db.explain(&q),
        strs(&[
            "canonicalize",
            "canonicalize/merge",
            "canonicalize/t_mul_one",
            "canonicalize/t_add_zero",
            "canonicalize/t_log_exp",
            "canonicalize/t_unused",
        ])
    );
    let x = scalar("x", DType::F64);
    let out = ((&x * 1.0).exp().log() + 0.0) + ((&x * 1.0).exp().log() + 0.0);
    let mut fg = FunctionGraph::new(&[x], &[out]).unwrap();
    rewrite_graph_with(&db, &mut fg, &q).unwrap();
    fg.check_integrity().unwrap();
    assert_eq!(fg.to_string(), "FunctionGraph(add(x, x))");
}

#[test]
fn require_and_subquery_and_modes() {
    let db = test_optdb();
    let q = RewriteDatabaseQuery::new(&["fast_run"]).requiring(&["merge"]);
    assert_eq!(db.explain(&q), strs(&["merge1", "merge2", "merge3"]));
    let q = RewriteDatabaseQuery::new(&["fast_run"])
        .with_subquery("specialize", RewriteDatabaseQuery::new(&["t_mul_to_sqr"]));
    let sel = db.explain(&q);
    assert!(sel.contains(&"specialize/t_mul_to_sqr".to_string()));
    assert!(!sel.contains(&"specialize/t_div_to_recip".to_string()));
    assert!(db.explain(&Mode::none().as_query()).is_empty());
    let sel = db.explain(&Mode::fast_compile().including(&["t_log1p"]).as_query());
    assert!(
        !sel.contains(&"stabilize/t_log1p".to_string()),
        "a sub-database must be selected first: {sel:?}"
    );
    let sel = db.explain(&Mode::fast_compile().including(&["stabilize"]).as_query());
    assert!(sel.contains(&"stabilize/t_log1p".to_string()));
    let sel = db.explain(&Mode::fast_run().requiring(&["fast_compile"]).as_query());
    assert!(!sel.contains(&"stabilize".to_string()));
}

#[test]
fn duplicate_names_and_early_inplace_are_refused() {
    let mut db = test_optdb();
    let err = db
        .register_graph("merge1", noop_graph("m"), &["fast_run"], 3.0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("already has an entry named 'merge1'"), "{err}");
    let canon = db.equilibrium_mut("canonicalize").unwrap();
    let err = canon
        .register_node("t_mul_one", pat("(mul ?x 1.0)", "?x"), &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("already has an entry"), "{err}");
    let err = canon
        .register_node("bad_inplace", pat("(exp ?x)", "?x"), &["inplace"])
        .unwrap_err()
        .to_string();
    assert!(err.contains(INPLACE_RULE), "{err}");
    let err = db
        .register_graph(
            "early_inplace",
            noop_graph("e"),
            &["fast_run", "inplace"],
            10.0,
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("must be >= 50") && err.contains("add_destroy_handler"),
        "{err}"
    );
    db.register_graph(
        "late_inplace",
        noop_graph("l"),
        &["fast_run", "inplace"],
        60.0,
    )
    .unwrap();
    // A sub-database with an inplace entry cannot be registered below the barrier.
    let mut sub = SequenceDB::new("sub");
    sub.register_graph("x_inplace", noop_graph("x"), &["inplace"], 0.0)
        .unwrap();
    let err = db
        .register("sub", SeqItem::Sequence(sub), &["fast_run"], 3.0)
        .unwrap_err()
        .to_string();
    assert!(err.contains(INPLACE_RULE), "{err}");
}

/// A ~50-node graph that every test rewriter has something to do on.
fn fifty_node_graph() -> (FunctionGraph, Vec<Value>) {
    let x = vector("x", DType::F64);
    let y = vector("y", DType::F64);
    let mut acc = &x + &y;
    for k in 0..4 {
        let t = ((&acc * 1.0).exp().log() + 0.0) * ((&acc * 1.0).exp().log() + 0.0);
        let u = (1.0 + &t).log();
        acc = if k % 2 == 0 {
            &u / 2.0
        } else {
            1.0 / &(&u + 3.0)
        };
    }
    let fg = FunctionGraph::new(&[x, y], &[acc]).unwrap();
    let vals = vec![
        Value::from_f64_array(DType::F64, ndarray::arr1(&[0.1, 0.5, 1.5]).into_dyn()),
        Value::from_f64_array(DType::F64, ndarray::arr1(&[0.2, -0.3, 0.25]).into_dyn()),
    ];
    (fg, vals)
}

#[test]
fn fast_run_profile_of_a_fifty_node_graph() {
    let db = test_optdb();
    let (mut fg, vals) = fifty_node_graph();
    let before = evaluate(&fg, &vals).unwrap();
    let n0 = fg.n_nodes();
    assert!((45..=80).contains(&n0), "{n0} nodes");
    let p = rewrite_graph_with(&db, &mut fg, &Mode::fast_run()).unwrap();
    fg.check_integrity().unwrap();
    let after = evaluate(&fg, &vals).unwrap();
    assert!(before[0].allclose(&after[0], 1e-12, 1e-12));
    assert!(fg.n_nodes() < n0 / 2, "{} nodes after", fg.n_nodes());
    let text = p.to_string();
    println!("{text}");
    for needle in [
        "Rewriter Profile",
        "----------------",
        "SequentialGraphRewriter  OPT_FAST_RUN  time ",
        &format!("for {n0}/{} nodes before/after rewriting", fg.n_nodes()),
        "s for fgraph.validate()",
        "s for callback",
        "time      - (name, class, index) - validate time",
        "('canonicalize', 'EquilibriumGraphRewriter', 1) - ",
        "EquilibriumGraphRewriter      canonicalize",
        "passes",
        "nb nodes (start, end,  max) ",
        "time io_toposort ",
        "time in node rewriters ",
        "time in graph rewriters ",
        "stop reason: converged",
        " 0 - ",
        "in global rewrites, ",
        "io_toposort) - ",
        "nodes - ('",
        "times - times applied - nb node created - name:",
        " - t_mul_one",
        " - t_log_exp",
        "rewrite(s) that were not used",
        "s - t_unused",
        "('merge1', 'MergeOptimizer', 0)",
        "nb_merged=",
        "nb_constant=",
        "('elemwise_fusion', 'SequentialGraphRewriter', 4)",
        "SequentialGraphRewriter  elemwise_fusion  time ",
        "('t_fusion', 'FromFunctionGraphRewriter', 0)",
        "('inplace', 'SequentialGraphRewriter', 6)",
        "('merge3', 'MergeOptimizer', 7)",
        "EquilibriumGraphRewriter      specialize",
        " - t_mul_to_sqr",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    let log = p.log();
    assert!(log.iter().any(|e| e.rewriter == "t_log1p" && e.op == "log"));
    assert_eq!(log.len(), p.applied() - count_merges(&p));
    assert!(p
        .stop_reasons()
        .iter()
        .all(|(_, r)| *r == StopReason::Converged));
    let fp = kiln::rewriting::FunctionProfile {
        message: "fifty_node_graph".into(),
        total_compile_time: p.time(),
        apply_nodes: fg.n_nodes(),
        rewriter_time: p.time(),
        validate_time: kiln_runtime::clock::rate().duration(fg.stats.validate_ticks),
        ..Default::default()
    };
    let t = fp.to_string();
    for needle in [
        "Function profiling",
        "Message: fifty_node_graph",
        "Total compile time: ",
        "e-0",
        "Number of Apply nodes: ",
        "rewriter time: ",
        "validate time: ",
        "Linker time",
    ] {
        assert!(t.contains(needle), "missing {needle:?} in\n{t}");
    }
}

fn count_merges(p: &RewriterProfile) -> usize {
    match p {
        RewriterProfile::Sequential(s) => s.children.iter().map(|c| count_merges(&c.profile)).sum(),
        RewriterProfile::Merge(m) => m.nb_merged + m.nb_constant,
        RewriterProfile::Equilibrium(e) => e
            .rewriters
            .iter()
            .filter(|r| r.name == "merge")
            .map(|r| r.applied)
            .sum(),
        _ => 0,
    }
}
