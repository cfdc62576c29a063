//! Each rewriter class, with its failure modes, checked with the verifier and
//! the reference evaluator.

// Graph builders take slices of tensors; cloning into array literals reads best here.
#![allow(clippy::cloned_ref_to_slice_refs)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kiln::eval::evaluate;
use kiln::graph::FunctionGraph;
use kiln::ops::OpKind;
use kiln::rewriting::unify::{etuple, var};
use kiln::rewriting::*;
use kiln::*;

fn xy() -> (Tensor, Tensor) {
    (scalar("x", DType::F64), scalar("y", DType::F64))
}

fn values(fg: &FunctionGraph, xs: &[f64]) -> Vec<f64> {
    let inputs: Vec<Value> = xs
        .iter()
        .map(|&v| Value::scalar_f64(DType::F64, v))
        .collect();
    evaluate(fg, &inputs)
        .unwrap()
        .iter()
        .map(|v| v.scalar_as_f64().unwrap())
        .collect()
}

fn pat(i: &str, o: &str) -> Arc<dyn NodeRewriter> {
    Arc::new(PatternNodeRewriter::parse(i, o).unwrap())
}

/// Rewrites `fg` with `rw`, checks integrity and that values are preserved at `at`.
fn rewrite_preserving(
    fg: &mut FunctionGraph,
    rw: &dyn GraphRewriter,
    at: &[f64],
) -> RewriterProfile {
    let before = values(fg, at);
    let p = rw.rewrite(fg).unwrap();
    fg.check_integrity().unwrap();
    let after = values(fg, at);
    for (a, b) in before.iter().zip(&after) {
        assert!(
            (a - b).abs() <= 1e-12 * a.abs().max(1.0),
            "{before:?} != {after:?}"
        );
    }
    p
}

#[test]
fn walking_in_to_out_and_out_to_in_apply_patterns() {
    let (x, y) = xy();
    let out = ((&x * 1.0).exp().log() + 0.0) * &y;
    for order in [WalkOrder::InToOut, WalkOrder::OutToIn] {
        let mut fg = FunctionGraph::new(&[x.clone(), y.clone()], &[out.clone()]).unwrap();
        let walk = WalkingGraphRewriter::with_rewriters(
            "simplify",
            vec![
                NamedNodeRewriter::new(pat("(mul ?x 1.0)", "?x")),
                NamedNodeRewriter::new(pat("(log (exp ?x))", "?x")),
                NamedNodeRewriter::new(pat("(add ?x 0.0)", "?x")),
            ],
        )
        .order(order);
        let p = rewrite_preserving(&mut fg, &walk, &[0.7, 1.3]);
        assert_eq!(fg.to_string(), "FunctionGraph(mul(x, y))", "{order:?}");
        assert_eq!(p.applied(), 3);
        assert_eq!(p.log().len(), 3);
        let RewriterProfile::Walking(w) = &p else {
            panic!("walking profile")
        };
        assert_eq!((w.nodes_start, w.nodes_end, w.changed), (5, 1, 3));
    }
}

#[test]
fn walking_visits_new_nodes_unless_ignore_newtrees() {
    // exp(x) -> exp(x) * 1.0 creates a mul that `mul x 1` removes again... only if new trees are visited.
    let (x, _) = xy();
    let out = x.sqr();
    let expand: Arc<dyn NodeRewriter> = Arc::new(FnNodeRewriter::new(
        "sqr_to_mul",
        Tracks::kind(OpKind::Elemwise(ScalarOp::Sqr)),
        |fg, n| {
            let i = fg.node(n).inputs[0];
            let one = fg.constant(Value::scalar_f64(DType::F64, 1.0));
            let m = fg.apply1(Op::elemwise(ScalarOp::Mul), &[i, i])?;
            Ok(Some(Rewrite::single(
                fg.apply1(Op::elemwise(ScalarOp::Mul), &[m, one])?,
            )))
        },
    ));
    for (ignore, expected) in [
        (false, "FunctionGraph(mul(x, x))"),
        (true, "FunctionGraph(mul(mul(x, x), 1.0))"),
    ] {
        let mut fg = FunctionGraph::new(&[x.clone()], &[out.clone()]).unwrap();
        let walk = WalkingGraphRewriter::with_rewriters(
            "w",
            vec![
                NamedNodeRewriter::new(expand.clone()),
                NamedNodeRewriter::new(pat("(mul ?x 1.0)", "?x")),
            ],
        )
        .ignore_newtrees(ignore);
        rewrite_preserving(&mut fg, &walk, &[1.5]);
        assert_eq!(fg.to_string(), expected);
    }
}

fn wrong_type_rewriter() -> Arc<dyn NodeRewriter> {
    Arc::new(FnNodeRewriter::new(
        "to_int",
        Tracks::kind(OpKind::Elemwise(ScalarOp::Exp)),
        |fg, _n| {
            Ok(Some(Rewrite::single(
                fg.constant(Value::scalar_i64(DType::I64, 1)),
            )))
        },
    ))
}

#[test]
fn wrong_typed_replacement_raises_or_is_skipped() {
    let (x, _) = xy();
    let out = x.exp() + 1.0;
    let mut fg = FunctionGraph::new(&[x.clone()], &[out.clone()]).unwrap();
    let walk = WalkingGraphRewriter::new(wrong_type_rewriter());
    let err = walk.rewrite(&mut fg).unwrap_err().to_string();
    assert!(
        err.contains("to_int") && err.contains("i64") && err.contains("f64"),
        "{err}"
    );
    fg.check_integrity().unwrap();
    assert_eq!(fg.to_string(), "FunctionGraph(add(exp(x), 1.0))");

    let seen = Arc::new(AtomicUsize::new(0));
    let seen2 = seen.clone();
    for policy in [FailurePolicy::Warn, FailurePolicy::Skip] {
        let seen2 = seen2.clone();
        let walk = WalkingGraphRewriter::new(wrong_type_rewriter())
            .failure_policy(policy)
            .failure_callback(Arc::new(move |f: &RewriteFailure| {
                assert_eq!(f.rewriter, "to_int");
                assert_eq!(f.op, "exp");
                seen2.fetch_add(1, Ordering::SeqCst);
            }));
        let p = walk.rewrite(&mut fg).unwrap();
        let RewriterProfile::Walking(w) = p else {
            panic!()
        };
        assert_eq!((w.changed, w.failures), (0, 1));
        assert_eq!(fg.to_string(), "FunctionGraph(add(exp(x), 1.0))");
    }
    assert_eq!(seen.load(Ordering::SeqCst), 2);
    // The equilibrium applies the same policy.
    let eq = EquilibriumGraphRewriter::new(vec![wrong_type_rewriter()])
        .failure_policy(FailurePolicy::Skip);
    let p = eq.rewrite(&mut fg).unwrap();
    let RewriterProfile::Equilibrium(e) = p else {
        panic!()
    };
    assert_eq!((e.failures, e.stop_reason), (1, StopReason::Converged));
    assert!(EquilibriumGraphRewriter::new(vec![wrong_type_rewriter()])
        .rewrite(&mut fg)
        .is_err());
}

#[test]
fn wrong_number_of_outputs_and_none_with_clients_are_errors() {
    let (x, _) = xy();
    let mut fg = FunctionGraph::new(&[x.clone()], &[x.exp() * 2.0]).unwrap();
    let two = FnNodeRewriter::new("two", Tracks::All, |_fg, _n| {
        Ok(Some(Rewrite::Outputs(vec![None, None])))
    });
    let err = WalkingGraphRewriter::new(Arc::new(two))
        .rewrite(&mut fg)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("2 replacements for a node with 1 outputs"),
        "{err}"
    );
    let none = FnNodeRewriter::new("none", Tracks::All, |_fg, _n| {
        Ok(Some(Rewrite::Outputs(vec![None])))
    });
    let err = WalkingGraphRewriter::new(Arc::new(none))
        .rewrite(&mut fg)
        .unwrap_err()
        .to_string();
    assert!(err.contains("which has clients"), "{err}");
    fg.check_integrity().unwrap();
}

#[test]
fn map_rewrite_with_remove_is_checked() {
    let (x, y) = xy();
    let mut fg = FunctionGraph::new(&[x.clone(), y.clone()], &[(&x + &y).exp()]).unwrap();
    // Replace the add (found from the exp node) by a mul, requiring the add to go.
    let rw = FnNodeRewriter::new(
        "add_to_mul_from_exp",
        Tracks::kind(OpKind::Elemwise(ScalarOp::Exp)),
        |fg, n| {
            let a = fg.node(n).inputs[0];
            let Some(an) = fg.owner(a) else {
                return Ok(None);
            };
            if !fg.node(an).op.is_elemwise(ScalarOp::Add) {
                return Ok(None);
            }
            let ins = fg.node(an).inputs.clone();
            let m = fg.apply1(Op::elemwise(ScalarOp::Mul), &ins)?;
            Ok(Some(Rewrite::Map {
                replacements: vec![(a, m)],
                remove: vec![a],
            }))
        },
    );
    WalkingGraphRewriter::new(Arc::new(rw))
        .rewrite(&mut fg)
        .unwrap();
    fg.check_integrity().unwrap();
    assert_eq!(fg.to_string(), "FunctionGraph(exp(mul(x, y)))");
    // A removal that does not happen is refused and rolled back.
    let bad = FnNodeRewriter::new(
        "keeps_x",
        Tracks::kind(OpKind::Elemwise(ScalarOp::Exp)),
        |fg, n| {
            let o = fg.node(n).outputs[0];
            let l = fg.apply1(Op::elemwise(ScalarOp::Log), &[o])?;
            let e = fg.apply1(Op::elemwise(ScalarOp::Exp), &[l])?;
            let _ = e;
            Ok(Some(Rewrite::Map {
                replacements: vec![],
                remove: vec![fg.inputs()[0]],
            }))
        },
    );
    let p = WalkingGraphRewriter::new(Arc::new(bad))
        .rewrite(&mut fg)
        .unwrap();
    assert_eq!(p.applied(), 0, "no pairs means no change");
}

fn neg_to_mul() -> Arc<dyn NodeRewriter> {
    Arc::new(
        PatternNodeRewriter::parse("(neg ?x)", "(mul ?x -1.0)")
            .unwrap()
            .named("neg_to_mul"),
    )
}
fn mul_to_neg() -> Arc<dyn NodeRewriter> {
    Arc::new(
        PatternNodeRewriter::parse("(mul ?x -1.0)", "(neg ?x)")
            .unwrap()
            .named("mul_to_neg"),
    )
}

#[test]
fn oscillating_pair_stops_with_a_reason() {
    let (x, y) = xy();
    let out = (-&x) + (-&y).exp();
    let mut fg = FunctionGraph::new(&[x, y], &[out]).unwrap();
    let eq = EquilibriumGraphRewriter::new(vec![neg_to_mul(), mul_to_neg()]).max_use_ratio(1000.0);
    let p = rewrite_preserving(&mut fg, &eq, &[0.3, -2.0]);
    let RewriterProfile::Equilibrium(e) = &p else {
        panic!()
    };
    assert_eq!(
        e.stop_reason,
        StopReason::Oscillation {
            rewriters: vec!["neg_to_mul".to_string(), "mul_to_neg".to_string()]
        }
    );
    assert!(p.applied() < 20, "stopped early: {} rewrites", p.applied());
    assert!(p
        .to_string()
        .contains("stop reason: oscillation between neg_to_mul, mul_to_neg"));
}

#[test]
fn max_use_ratio_bounds_a_growing_rewrite() {
    // x -> (x + 0.0) would loop forever; the new add has a new input each time, so only the bound stops it.
    let (x, _) = xy();
    let mut fg = FunctionGraph::new(&[x.clone()], &[x.exp()]).unwrap();
    let grow = FnNodeRewriter::new(
        "grow",
        Tracks::kind(OpKind::Elemwise(ScalarOp::Exp)),
        |fg, n| {
            let i = fg.node(n).inputs[0];
            let zero = fg.constant(Value::scalar_f64(DType::F64, 0.0));
            let a = fg.apply1(Op::elemwise(ScalarOp::Add), &[i, zero])?;
            Ok(Some(Rewrite::single(
                fg.apply1(Op::elemwise(ScalarOp::Exp), &[a])?,
            )))
        },
    );
    let eq = EquilibriumGraphRewriter::new(vec![Arc::new(grow)]).max_use_ratio(4.0);
    let p = rewrite_preserving(&mut fg, &eq, &[0.5]);
    let RewriterProfile::Equilibrium(e) = &p else {
        panic!()
    };
    assert_eq!(
        e.stop_reason,
        StopReason::MaxUseRatio {
            rewriter: "grow".into()
        }
    );
    assert_eq!(e.rewriters[0].applied, 5);
}

#[test]
fn equilibrium_dispatches_by_tracks_and_converges() {
    let (x, y) = xy();
    let t = ((&x * 1.0) + 0.0).exp().log();
    let out = (&t * &y) / &y;
    let mut fg = FunctionGraph::new(&[x, y], &[out]).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = calls.clone();
    let spy = FnNodeRewriter::new("dot_spy", Tracks::kind(OpKind::Dot), move |_fg, _n| {
        c2.fetch_add(1, Ordering::SeqCst);
        Ok(None)
    });
    let any_elemwise = FnNodeRewriter::new(
        "elemwise_spy",
        Tracks::Only(vec![Track::AnyElemwise]),
        |_fg, _n| Ok(None),
    );
    let eq = EquilibriumGraphRewriter::new(vec![
        pat("(mul ?x 1.0)", "?x"),
        pat("(add ?x 0.0)", "?x"),
        pat("(log (exp ?x))", "?x"),
        pat("(true_div (mul ?x ?y) ?y)", "?x"),
        Arc::new(spy),
        Arc::new(any_elemwise),
    ]);
    let p = rewrite_preserving(&mut fg, &eq, &[0.4, 3.0]);
    assert_eq!(fg.to_string(), "FunctionGraph(x)");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "a Dot-tracking rewriter never sees Elemwise nodes"
    );
    let RewriterProfile::Equilibrium(e) = &p else {
        panic!()
    };
    assert_eq!(e.stop_reason, StopReason::Converged);
    assert_eq!((e.nodes_start, e.nodes_end), (6, 0));
    assert_eq!(e.passes.last().unwrap().applied, 0);
    let log = p.log();
    assert_eq!(log.len(), 4);
    assert!(log.iter().all(|ev| ev.pass == 0));
}

/// An out-to-in walk visits `add` before `neg`; rewriting `neg` switches
/// an input of `add`, which is queued and visited again in the same pass,
/// where the second pattern now matches. Without the revisit the second
/// rewrite waits for pass 1 and pass 2 confirms (three passes).
#[test]
fn out_to_in_equilibrium_revisits_a_node_whose_input_changed_in_the_same_pass() {
    let (x, y) = xy();
    let out = (-&x) + &y;
    let mut fg = FunctionGraph::new(&[x, y], &[out]).unwrap();
    let eq = EquilibriumGraphRewriter::new(vec![
        pat("(neg ?x)", "(mul ?x -1.0)"),
        pat("(add (mul ?x -1.0) ?y)", "(sub ?y ?x)"),
    ]);
    let p = rewrite_preserving(&mut fg, &eq, &[0.4, 3.0]);
    assert_eq!(fg.to_string(), "FunctionGraph(sub(y, x))");
    let RewriterProfile::Equilibrium(e) = &p else {
        panic!()
    };
    assert_eq!(e.stop_reason, StopReason::Converged);
    let applied: Vec<usize> = e.passes.iter().map(|pass| pass.applied).collect();
    assert_eq!(applied, [2, 0], "both rewrites in pass 0, pass 1 confirms");
}

#[test]
fn pattern_with_repeated_variable_needs_the_same_variable() {
    let (x, y) = xy();
    let rw = pat("(sub ?a ?a)", "(mul ?a 0.0)");
    let mut fg = FunctionGraph::new(&[x.clone(), y.clone()], &[&x - &y]).unwrap();
    WalkingGraphRewriter::new(rw.clone())
        .rewrite(&mut fg)
        .unwrap();
    assert_eq!(fg.to_string(), "FunctionGraph(sub(x, y))");
    let mut fg = FunctionGraph::new(&[x.clone()], &[&x - &x]).unwrap();
    rewrite_preserving(&mut fg, &WalkingGraphRewriter::new(rw), &[2.5]);
    assert_eq!(fg.to_string(), "FunctionGraph(mul(x, 0.0))");
}

#[test]
fn pattern_multiple_clients_constraints_and_tracks() {
    let (x, y) = xy();
    let m = &x * &y;
    let out = (&m / &y) + &m;
    let strict = PatternNodeRewriter::parse("(true_div (mul ?x ?y) ?y)", "?x").unwrap();
    assert_eq!(
        strict.tracks(),
        Tracks::kind(OpKind::Elemwise(ScalarOp::TrueDiv))
    );
    assert_eq!(strict.name(), "(true_div (mul ?x ?y) ?y) -> ?x");
    let mut fg = FunctionGraph::new(&[x.clone(), y.clone()], &[out.clone()]).unwrap();
    WalkingGraphRewriter::new(Arc::new(strict.clone()))
        .rewrite(&mut fg)
        .unwrap();
    assert_eq!(
        fg.to_string(),
        "FunctionGraph(add(true_div(*1 -> mul(x, y), y), *1))"
    );
    let loose = strict.clone().allow_multiple_clients(true);
    rewrite_preserving(
        &mut fg,
        &WalkingGraphRewriter::new(Arc::new(loose)),
        &[1.5, 2.0],
    );
    assert_eq!(fg.to_string(), "FunctionGraph(add(x, mul(x, y)))");
    // A constraint on ?y: only divide out constants.
    let only_const = PatternNodeRewriter::parse("(true_div (mul ?x ?y) ?y)", "?x")
        .unwrap()
        .constraint_on("y", |fg, v| fg.constant_value(v).is_some())
        .unwrap();
    let mut fg = FunctionGraph::new(&[x.clone(), y.clone()], &[(&x * &y) / &y]).unwrap();
    WalkingGraphRewriter::new(Arc::new(only_const.clone()))
        .rewrite(&mut fg)
        .unwrap();
    assert_eq!(fg.to_string(), "FunctionGraph(true_div(mul(x, y), y))");
    let mut fg = FunctionGraph::new(&[x.clone()], &[(&x * 2.0) / 2.0]).unwrap();
    MergeOptimizer::new().rewrite(&mut fg).unwrap();
    rewrite_preserving(
        &mut fg,
        &WalkingGraphRewriter::new(Arc::new(only_const)),
        &[3.0],
    );
    assert_eq!(fg.to_string(), "FunctionGraph(x)");
}

#[test]
fn pattern_parse_errors_are_clear() {
    for (i, o, msg) in [
        ("(frobnicate ?x)", "?x", "unknown op 'frobnicate'"),
        ("(exp ?x", "?x", "missing ')'"),
        ("(exp ?x)", "?y", "does not bind"),
        ("?x", "?x", "fixed op"),
        ("(exp x)", "?x", "neither a logic variable"),
    ] {
        let err = PatternNodeRewriter::parse(i, o).unwrap_err().to_string();
        assert!(err.contains(msg), "{i} => {o}: {err}");
    }
}

#[test]
fn variadic_cons_patterns_match_any_arity() {
    let (x, y) = xy();
    let z = scalar("z", DType::F64);
    let add3 = elemwise(ScalarOp::Add, &[&x, &y, &z]).unwrap();
    let mut fg = FunctionGraph::new(&[x.clone(), y.clone(), z.clone()], &[add3, &x + &y]).unwrap();
    let rw = PatternNodeRewriter::parse("(add . ?args)", "(mul . ?args)").unwrap();
    WalkingGraphRewriter::new(Arc::new(rw))
        .rewrite(&mut fg)
        .unwrap();
    fg.check_integrity().unwrap();
    assert_eq!(fg.to_string(), "FunctionGraph(mul(x, y, z), mul(x, y))");
    assert_eq!(values(&fg, &[1.0, 2.0, 3.0]), vec![6.0, 2.0]);
    // unify() with a repeated variable over a graph.
    let a = var();
    let p = etuple(ScalarOp::Mul, vec![Pattern::var(&a), Pattern::var(&a)]);
    assert!(unify(&p, &fg, fg.outputs()[1]).is_none());
}

#[test]
fn merge_cascades_in_one_run_and_merges_nan_constants() {
    let (x, y) = xy();
    let nan1 = Tensor::constant(Value::scalar_f64(DType::F64, f64::NAN));
    let nan2 = Tensor::constant(Value::scalar_f64(DType::F64, f64::NAN));
    let a = ((&x + &y).exp() * &nan1).log();
    let b = ((&x + &y).exp() * &nan2).log();
    let mut fg = FunctionGraph::new(&[x.clone(), y.clone()], &[a + b]).unwrap();
    assert_eq!(fg.n_nodes(), 9);
    let p = MergeOptimizer::new().rewrite(&mut fg).unwrap();
    fg.check_integrity().unwrap();
    assert_eq!(fg.n_nodes(), 5);
    let RewriterProfile::Merge(m) = &p else {
        panic!()
    };
    assert_eq!((m.nb_merged, m.nb_constant, m.nb_fail), (4, 1, 0));
    assert_eq!(
        fg.to_string(),
        "FunctionGraph(add(*1 -> log(mul(exp(add(x, y)), NaN)), *1))"
    );
    // Constants of different types or values stay apart; 0.0 and -0.0 differ bitwise.
    let c = |v: f64| Tensor::constant(Value::scalar_f64(DType::F64, v));
    let mut fg = FunctionGraph::new(&[x.clone()], &[(&x + &c(0.0)) * (&x + &c(-0.0))]).unwrap();
    MergeOptimizer::new().rewrite(&mut fg).unwrap();
    assert_eq!(fg.n_nodes(), 3);
    // Running it again changes nothing.
    let mut fg = FunctionGraph::new(&[x.clone(), y.clone()], &[(&x + &y) * (&x + &y)]).unwrap();
    MergeOptimizer::new().rewrite(&mut fg).unwrap();
    let p = MergeOptimizer::new().rewrite(&mut fg).unwrap();
    assert_eq!(p.applied(), 0);
}

#[test]
fn substitution_and_removal() {
    let (x, y) = xy();
    let ident = elemwise(ScalarOp::Identity, &[&x]).unwrap();
    let mut fg = FunctionGraph::new(&[x.clone(), y.clone()], &[&ident + &y]).unwrap();
    let remove = RemovalNodeRewriter::new(Op::elemwise(ScalarOp::Identity));
    rewrite_preserving(
        &mut fg,
        &WalkingGraphRewriter::new(Arc::new(remove)),
        &[1.0, 2.0],
    );
    assert_eq!(fg.to_string(), "FunctionGraph(add(x, y))");
    let sub =
        SubstitutionNodeRewriter::new(Op::elemwise(ScalarOp::Add), Op::elemwise(ScalarOp::Mul));
    assert_eq!(sub.name(), "add -> mul");
    WalkingGraphRewriter::new(Arc::new(sub))
        .rewrite(&mut fg)
        .unwrap();
    fg.check_integrity().unwrap();
    assert_eq!(fg.to_string(), "FunctionGraph(mul(x, y))");
    assert_eq!(values(&fg, &[3.0, 4.0]), vec![12.0]);
}

#[test]
fn sequential_nests_profiles_and_global_final_cleanup_run() {
    let (x, y) = xy();
    let out = ((&x + &y) * 1.0) * ((&x + &y) * 1.0);
    let mut fg = FunctionGraph::new(&[x, y], &[out]).unwrap();
    let merges = Arc::new(AtomicUsize::new(0));
    let m2 = merges.clone();
    let counting_final = FnGraphRewriter::new("final_noop", move |_fg| {
        m2.fetch_add(1, Ordering::SeqCst);
        Ok(())
    });
    let eq = EquilibriumGraphRewriter::new(vec![pat("(mul ?x 1.0)", "?x")])
        .named("canon")
        .cleanup(NamedGraphRewriter::new(Arc::new(MergeOptimizer::new())))
        .final_rewriter(NamedGraphRewriter::new(Arc::new(counting_final)));
    let seq = SequentialGraphRewriter::from_rewriters(
        "top",
        vec![Arc::new(eq), Arc::new(MergeOptimizer::new())],
    );
    let p = rewrite_preserving(&mut fg, &seq, &[1.0, 2.0]);
    assert_eq!(fg.to_string(), "FunctionGraph(mul(*1 -> add(x, y), *1))");
    assert!(
        merges.load(Ordering::SeqCst) >= 2,
        "the final rewriter runs every pass"
    );
    let text = p.to_string();
    for needle in [
        "SequentialGraphRewriter  top  time",
        "('canon', 'EquilibriumGraphRewriter', 0)",
        "MergeOptimizer",
        "final_noop",
    ] {
        assert!(text.contains(needle), "{needle} missing in\n{text}");
    }
}

#[test]
fn replacements_that_would_create_a_cycle_are_refused() {
    let (x, y) = xy();
    let mut fg = FunctionGraph::new(&[x.clone(), y.clone()], &[(&x + &y).exp() * &y]).unwrap();
    kiln::graph::ReplaceValidate::attach(&mut fg).unwrap();
    let mul = fg.owner(fg.outputs()[0]).unwrap();
    let exp_out = fg.node(mul).inputs[0];
    let add_out = fg.node(fg.owner(exp_out).unwrap()).inputs[0];
    // add(x, y) := log(exp(add(x, y))) * 1 would make add depend on itself.
    let l = fg.apply1(Op::elemwise(ScalarOp::Log), &[exp_out]).unwrap();
    let err = fg
        .replace_validate(add_out, l, "test")
        .unwrap_err()
        .to_string();
    assert!(err.contains("depends on the variable it replaces"), "{err}");
    fg.check_integrity().unwrap();
    assert_eq!(fg.to_string(), "FunctionGraph(mul(exp(add(x, y)), y))");
}
