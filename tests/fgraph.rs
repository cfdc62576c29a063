//! FunctionGraph: import, clients, toposort, replace, pruning, features,
//! History / ReplaceValidate rollback, orderings, round trips and a deep stress test.

mod common;

use std::sync::{Arc, Mutex};

use kiln::eval::evaluate;
use kiln::graph::{
    ChangeTracker, Client, Feature, History, NodeFinder, NodeId, ReplaceValidate, VarId,
};
use kiln::ops::{CRef, Composite, OpKind};
use kiln::*;
use DType::*;

/// Every node's inputs are computed before it, and every in-graph node appears once.
fn assert_topo(fg: &FunctionGraph, order: &[NodeId]) {
    assert_eq!(order.len(), fg.n_nodes());
    let pos: std::collections::HashMap<NodeId, usize> =
        order.iter().enumerate().map(|(k, &n)| (n, k)).collect();
    assert_eq!(pos.len(), order.len(), "no duplicates");
    for &n in order {
        assert!(fg.contains_node(n));
        for &i in &fg.node(n).inputs {
            if let Some(p) = fg.owner(i) {
                assert!(pos[&p] < pos[&n], "{p} must come before {n}");
            }
        }
    }
}

fn ok(fg: &FunctionGraph) {
    fg.check_integrity().unwrap_or_else(|e| panic!("{e}\n{fg}"));
    assert_topo(fg, &fg.toposort());
}

fn out_node(fg: &FunctionGraph, k: usize) -> NodeId {
    fg.owner(fg.outputs()[k]).expect("computed output")
}

fn xy() -> (Tensor, Tensor) {
    (vector("x", F64), vector("y", F64))
}

#[test]
fn import_registers_ancestors_and_clients() {
    let (x, y) = xy();
    let a = &x + &y;
    let b = &a * &x;
    let fg = FunctionGraph::new(&[x, y], &[b.clone(), a]).unwrap();
    ok(&fg);
    assert_eq!(fg.n_nodes(), 2);
    assert_eq!(fg.inputs().len(), 2);
    let (xv, yv) = (fg.inputs()[0], fg.inputs()[1]);
    let mul = out_node(&fg, 0);
    let add = out_node(&fg, 1);
    assert_eq!(fg.node(mul).op, Op::elemwise(ScalarOp::Mul));
    assert_eq!(fg.node(add).inputs.as_slice(), &[xv, yv]);
    let av = fg.outputs()[1];
    let mut cx = fg.clients(xv).to_vec();
    cx.sort();
    assert_eq!(
        cx,
        vec![Client::Node(add, 0), Client::Node(mul, 1)]
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
    );
    let mut ca = fg.clients(av).to_vec();
    ca.sort();
    assert_eq!(ca, vec![Client::Node(mul, 0), Client::Output(1)]);
    assert_eq!(fg.clients(fg.outputs()[0]), &[Client::Output(0)]);
    assert_eq!(fg.var(xv).name.as_deref(), Some("x"));
    assert!(fg.contains_var(av) && fg.contains_node(mul));
    assert_eq!(fg.owner_op(av), Some(&Op::elemwise(ScalarOp::Add)));
    assert_eq!(fg.owner(xv), None);
    assert!(fg.depends_on(fg.outputs()[0], yv));
    assert!(!fg.depends_on(yv, fg.outputs()[0]));
    assert_eq!(fg.node_ids().collect::<Vec<_>>().len(), 2);
    assert_eq!(fg.stats.imported, 2);
    // Shared sub-expressions are imported once.
    assert_eq!(fg.to_string(), "FunctionGraph(mul(*1 -> add(x, y), x), *1)");
}

#[test]
fn toposort_of_a_diamond_with_many_outputs() {
    let (x, y) = xy();
    let e = x.exp();
    let l = y.log();
    let s = &e + &l;
    let p = &e * &s;
    let q = (&p - &l).tanh();
    let fg = FunctionGraph::new(&[x, y], &[q, s.clone(), p, e]).unwrap();
    ok(&fg);
    assert_eq!(fg.n_nodes(), 6);
    // The order is the depth-first order from the outputs, inputs first.
    let names: Vec<String> = fg
        .toposort()
        .iter()
        .map(|&n| fg.node(n).op.name())
        .collect();
    assert_eq!(names, ["exp", "log", "add", "mul", "sub", "tanh"]);
}

#[test]
fn a_toposort_after_a_change_is_the_changed_graphs() {
    // toposort keeps its order until the structure changes: an unchanged
    // graph gives the same order, every kind of change a fresh one equal
    // to the uncached walk (toposort_with).
    let (x, y) = xy();
    let out = (&x + &y).exp();
    let mut fg = FunctionGraph::new(&[x, y], &[out]).unwrap();
    let (xv, yv) = (fg.inputs()[0], fg.inputs()[1]);
    let first = fg.toposort();
    assert_eq!(fg.toposort(), first);
    let fresh = |fg: &FunctionGraph| {
        let order = fg.toposort();
        assert_eq!(order, fg.toposort_with(&[]));
        assert_topo(fg, &order);
        order
    };
    // An input changed (the add replaced by a mul, the add pruned).
    let add = fg.node(out_node(&fg, 0)).inputs[0];
    let mul = fg.apply1(Op::elemwise(ScalarOp::Mul), &[xv, yv]).unwrap();
    fg.replace(add, mul, "test").unwrap();
    let order = fresh(&fg);
    assert_eq!(order.len(), 2);
    assert!(order.contains(&fg.owner(mul).unwrap()));
    assert!(!order.contains(&fg.owner(add).unwrap()));
    // An output added (importing a new node).
    let lg = fg.apply1(Op::elemwise(ScalarOp::Log), &[yv]).unwrap();
    fg.add_output(lg);
    assert_eq!(fresh(&fg).len(), 3);
    // A clone sorts its own graph.
    let copy = fg.clone();
    assert_eq!(copy.toposort(), fg.toposort());
}

#[test]
fn replace_imports_the_new_subgraph_prunes_the_old_and_updates_node_finder() {
    let (x, y) = xy();
    let out = (&x + &y).exp();
    let mut fg = FunctionGraph::new(&[x, y], &[out]).unwrap();
    fg.attach_feature(NodeFinder::default()).unwrap();
    let exp = out_node(&fg, 0);
    let add_v = fg.node(exp).inputs[0];
    let add = fg.owner(add_v).unwrap();
    let (xv, yv) = (fg.inputs()[0], fg.inputs()[1]);
    let finder = |fg: &FunctionGraph, k| fg.feature::<NodeFinder>().unwrap().get(k);
    assert_eq!(finder(&fg, OpKind::Elemwise(ScalarOp::Add)), vec![add]);
    let sub = fg.apply1(Op::elemwise(ScalarOp::Sub), &[xv, yv]).unwrap();
    let sub_node = fg.owner(sub).unwrap();
    assert!(!fg.contains_node(sub_node), "created detached");
    fg.replace(add_v, sub, "test").unwrap();
    ok(&fg);
    assert_eq!(fg.to_string(), "FunctionGraph(exp(sub(x, y)))");
    assert!(fg.contains_node(sub_node) && !fg.contains_node(add));
    assert!(!fg.contains_var(add_v));
    assert_eq!(finder(&fg, OpKind::Elemwise(ScalarOp::Add)), vec![]);
    assert_eq!(finder(&fg, OpKind::Elemwise(ScalarOp::Sub)), vec![sub_node]);
    assert_eq!(finder(&fg, OpKind::Elemwise(ScalarOp::Exp)), vec![exp]);
    assert_eq!(fg.n_nodes(), 2);
    assert_eq!(fg.stats.changes, 1);
    // Replacing by itself, or replacing a detached variable, changes nothing.
    fg.replace(sub, sub, "noop").unwrap();
    fg.replace(add_v, xv, "detached").unwrap();
    assert_eq!(fg.to_string(), "FunctionGraph(exp(sub(x, y)))");
    assert_eq!(fg.stats.changes, 1);
}

#[test]
fn replace_refuses_type_changes_and_self_dependent_replacements() {
    let x = tensor("x", F64, &[Some(1)]);
    let y = vector("y", F64);
    let out = (&x + &y).exp();
    let mut fg = FunctionGraph::new(&[x, y], &[out]).unwrap();
    let before = fg.to_string();
    let (xv, yv) = (fg.inputs()[0], fg.inputs()[1]);
    let f32v = fg.apply1(Op::elemwise(ScalarOp::Cast(F32)), &[yv]).unwrap();
    assert_eq!(
        fg.replace(yv, f32v, "bad").unwrap_err().to_string(),
        "graph error: bad: cannot replace a variable of type f64(?,) by one of type f32(?,)"
    );
    // A broadcastable dimension must stay broadcastable.
    assert_eq!(
        fg.replace(xv, yv, "bad").unwrap_err().to_string(),
        "graph error: bad: cannot replace a variable of type f64(1,) by one of type f64(?,)"
    );
    let add_v = fg.node(out_node(&fg, 0)).inputs[0];
    let two = fg.constant(Value::scalar_f64(F64, 2.0));
    let two = fg
        .apply1(
            Op::DimShuffle {
                input_ndim: 0,
                new_order: vec![None],
            },
            &[two],
        )
        .unwrap();
    let dependent = fg
        .apply1(Op::elemwise(ScalarOp::Mul), &[add_v, two])
        .unwrap();
    assert_eq!(
        fg.replace(add_v, dependent, "loop")
            .unwrap_err()
            .to_string(),
        "graph error: loop: the replacement depends on the variable it replaces"
    );
    assert_eq!(fg.to_string(), before);
    ok(&fg);
    // Known sizes may replace unknown ones.
    let z = fg.add_input(TensorType::new(F64, vec![Some(4)]), Some("z".into()));
    fg.replace(yv, z, "refine").unwrap();
    assert_eq!(fg.to_string(), "FunctionGraph(exp(add(x, z)))");
    ok(&fg);
}

/// `x`, then `steps` nodes each computing `exp` of the previous one, plus
/// `x` added back at the end (so that `x` has two clients).
fn exp_chain(steps: usize) -> (FunctionGraph, Vec<VarId>) {
    let x = vector("x", F64);
    let mut v = x.clone();
    for _ in 0..steps {
        v = v.exp();
    }
    let out = &v + &x;
    let fg = FunctionGraph::new(&[x], &[out]).unwrap();
    let mut chain = Vec::new();
    let mut cur = fg.node(out_node(&fg, 0)).inputs[0];
    while let Some(n) = fg.owner(cur) {
        chain.push(cur);
        cur = fg.node(n).inputs[0];
    }
    chain.push(cur);
    chain.reverse();
    (fg, chain)
}

#[test]
fn levels_order_every_node_above_its_inputs() {
    let (fg, chain) = exp_chain(5);
    ok(&fg);
    assert_eq!(fg.level(chain[0]), 0, "graph inputs are level 0");
    for w in chain.windows(2) {
        assert!(fg.level(w[1]) > fg.level(w[0]));
    }
    let sum = fg.outputs()[0];
    assert_eq!(fg.level(sum), fg.level(chain[5]) + 1);
}

#[test]
fn replace_finds_cycles_through_long_paths_and_after_levels_were_raised() {
    let (mut fg, chain) = exp_chain(300);
    fg.set_check_after_mutation(false);
    let before = fg.to_string();
    // A replacement of a low node that reads a high one closes a loop.
    let high = fg
        .apply1(Op::elemwise(ScalarOp::Neg), &[chain[290]])
        .unwrap();
    assert_eq!(
        fg.replace(chain[10], high, "loop").unwrap_err().to_string(),
        "graph error: loop: the replacement depends on the variable it replaces"
    );
    assert_eq!(fg.to_string(), before);
    // A deeper replacement of a low node raises the levels above it.
    let mut deep = chain[0];
    for _ in 0..50 {
        deep = fg.apply1(Op::elemwise(ScalarOp::Tanh), &[deep]).unwrap();
    }
    let raises = fg.stats.level_raises;
    fg.replace(chain[5], deep, "deeper").unwrap();
    assert!(
        fg.stats.level_raises > raises + 250,
        "every node above was raised"
    );
    ok(&fg);
    assert!(fg.level(chain[6]) > fg.level(deep));
    // Cycles are still found through the raised part and through the new one.
    let high = fg
        .apply1(Op::elemwise(ScalarOp::Neg), &[chain[200]])
        .unwrap();
    assert!(fg.replace(chain[100], high, "loop").is_err());
    let tanh_node = fg.owner(deep).unwrap();
    let mid = fg.node(tanh_node).inputs[0];
    let high = fg.apply1(Op::elemwise(ScalarOp::Neg), &[chain[7]]).unwrap();
    assert!(fg.replace(mid, high, "loop").is_err());
    // A replacement built on lower nodes is accepted after a short search.
    let visits = fg.stats.cycle_check_visits;
    let low = fg
        .apply1(Op::elemwise(ScalarOp::Neg), &[chain[150]])
        .unwrap();
    fg.replace(chain[250], low, "lower").unwrap();
    assert!(
        fg.stats.cycle_check_visits - visits <= 2,
        "only the new node is expanded"
    );
    ok(&fg);
}

#[test]
fn reverting_a_replacement_keeps_levels_consistent() {
    let (mut fg, chain) = exp_chain(20);
    ReplaceValidate::attach(&mut fg).unwrap();
    let cp = fg.checkpoint();
    let mut deep = chain[0];
    for _ in 0..30 {
        deep = fg.apply1(Op::elemwise(ScalarOp::Tanh), &[deep]).unwrap();
    }
    fg.replace(chain[3], deep, "deeper").unwrap();
    ok(&fg);
    fg.revert(cp);
    ok(&fg);
    // The reverted graph still refuses a loop.
    let high = fg
        .apply1(Op::elemwise(ScalarOp::Neg), &[chain[15]])
        .unwrap();
    assert!(fg.replace(chain[4], high, "loop").is_err());
}

#[test]
fn pruning_cascades_and_constants_leave_the_graph() {
    let x = vector("x", F64);
    let out = (&x.exp() + 2.0).log();
    let keep = x.sqr();
    let mut fg = FunctionGraph::new(&[x], &[out, keep]).unwrap();
    fg.attach_feature(NodeFinder::default()).unwrap();
    ok(&fg);
    // exp, add, log and sqr: the 0-d constant is padded in place, without a DimShuffle.
    assert_eq!(fg.n_nodes(), 4);
    let log = out_node(&fg, 0);
    let add_v = fg.node(log).inputs[0];
    let add = fg.owner(add_v).unwrap();
    let const_v = fg
        .node(add)
        .inputs
        .iter()
        .copied()
        .find(|&v| fg.owner(v).is_none() || fg.var(v).is_constant())
        .unwrap();
    let xv = fg.inputs()[0];
    let sqr_v = fg.outputs()[1];
    // Replace the first output by the second: log, add, exp and the constant all go.
    fg.replace(fg.outputs()[0], sqr_v, "prune").unwrap();
    ok(&fg);
    assert_eq!(fg.n_nodes(), 1);
    assert_eq!(fg.to_string(), "FunctionGraph(*1 -> sqr(x), *1)");
    assert!(!fg.contains_node(log) && !fg.contains_node(add));
    for k in [
        OpKind::Elemwise(ScalarOp::Log),
        OpKind::Elemwise(ScalarOp::Add),
        OpKind::Elemwise(ScalarOp::Exp),
    ] {
        assert!(
            fg.feature::<NodeFinder>().unwrap().get(k).is_empty(),
            "{k:?}"
        );
    }
    assert!(
        !fg.contains_var(const_v),
        "an unused constant leaves the graph"
    );
    assert!(fg.contains_var(xv), "inputs stay even when unused");
    let mut cx = fg.clients(xv).to_vec();
    cx.sort();
    assert_eq!(cx.len(), 1);
}

#[test]
fn pruned_nodes_can_be_re_imported() {
    let (x, y) = xy();
    let out = &x.exp() + &y;
    let mut fg = FunctionGraph::new(&[x, y], &[out]).unwrap();
    fg.attach_feature(NodeFinder::default()).unwrap();
    let original = fg.to_string();
    let add = out_node(&fg, 0);
    let exp_v = fg.node(add).inputs[0];
    let exp = fg.owner(exp_v).unwrap();
    let neg_v = fg
        .apply1(Op::elemwise(ScalarOp::Neg), &[fg.inputs()[0]])
        .unwrap();
    fg.replace(exp_v, neg_v, "a").unwrap();
    ok(&fg);
    assert!(!fg.contains_node(exp));
    fg.replace(neg_v, exp_v, "b").unwrap();
    ok(&fg);
    assert!(fg.contains_node(exp), "the same node id comes back");
    assert!(!fg.contains_node(fg.owner(neg_v).unwrap()));
    assert_eq!(fg.to_string(), original);
    assert_eq!(
        fg.feature::<NodeFinder>()
            .unwrap()
            .get(OpKind::Elemwise(ScalarOp::Exp)),
        vec![exp]
    );
    assert!(fg
        .feature::<NodeFinder>()
        .unwrap()
        .get(OpKind::Elemwise(ScalarOp::Neg))
        .is_empty());
    assert_eq!(fg.stats.imported, 2 + 2);
}

fn two_output_composite() -> Op {
    let mut c = Composite::new(vec![F64]);
    let e = c.push(ScalarOp::Exp, &[CRef::Input(0)]).unwrap();
    let n = c.push(ScalarOp::Neg, &[CRef::Input(0)]).unwrap();
    c.outputs = vec![e, n];
    Op::composite(c)
}

#[test]
fn multi_output_nodes_stay_while_any_output_is_used() {
    let x = vector("x", F64);
    let outs = Tensor::apply_multi(two_output_composite(), &[&x]).unwrap();
    assert!(Tensor::apply(two_output_composite(), &[&x])
        .unwrap_err()
        .to_string()
        .contains("expected one output, the op has 2"));
    let sum = &outs[0] + &outs[1];
    let mut fg = FunctionGraph::new(&[x], &[sum]).unwrap();
    ok(&fg);
    assert_eq!(
        fg.to_string(),
        "FunctionGraph(add(Composite{exp(i0), neg(i0)}(x).0, Composite{exp(i0), neg(i0)}(x).1))"
    );
    let add = out_node(&fg, 0);
    let (o0, o1) = (fg.node(add).inputs[0], fg.node(add).inputs[1]);
    let comp = fg.owner(o0).unwrap();
    assert_eq!(fg.owner(o1), Some(comp));
    assert_eq!(fg.node(comp).outputs.as_slice(), &[o0, o1]);
    assert_eq!(fg.n_nodes(), 2);
    let xv = fg.inputs()[0];
    let v = evaluate(&fg, &[common::vf(&[0.0, 1.0])]).unwrap();
    assert_eq!(common::flat(&v[0]), [1.0, std::f64::consts::E - 1.0]);
    fg.replace(o0, xv, "first").unwrap();
    ok(&fg);
    assert!(fg.contains_node(comp), "output 1 is still used");
    assert_eq!(
        fg.to_string(),
        "FunctionGraph(add(x, Composite{exp(i0), neg(i0)}(x).1))"
    );
    fg.replace(o1, xv, "second").unwrap();
    ok(&fg);
    assert!(!fg.contains_node(comp));
    assert_eq!(fg.to_string(), "FunctionGraph(add(x, x))");
}

#[test]
fn constants_enter_and_leave_the_graph() {
    let x = vector("x", F64);
    let out = x.exp();
    let mut fg = FunctionGraph::new(&[x], &[out]).unwrap();
    let xv = fg.inputs()[0];
    let c = fg.constant(common::f64s(&[1], &[3.0]));
    assert!(!fg.contains_var(c) && fg.var(c).is_constant());
    assert_eq!(fg.ty(c), &TensorType::new(F64, vec![Some(1)]));
    let shifted = fg.apply1(Op::elemwise(ScalarOp::Add), &[xv, c]).unwrap();
    fg.replace(xv, shifted, "x").expect_err("depends on x");
    // Use the constant under exp instead.
    let exp = out_node(&fg, 0);
    let exp_in = fg.node(exp).inputs[0];
    assert_eq!(exp_in, xv);
    let e2 = fg.apply1(Op::elemwise(ScalarOp::Exp), &[shifted]).unwrap();
    fg.replace(fg.outputs()[0], e2, "shift").unwrap();
    ok(&fg);
    assert!(fg.contains_var(c));
    assert_eq!(fg.clients(c).len(), 1);
    assert_eq!(fg.to_string(), "FunctionGraph(exp(add(x, 3.0)))");
    assert_eq!(
        common::flat(&evaluate(&fg, &[common::vf(&[0.0])]).unwrap()[0]),
        [3f64.exp()]
    );
    let back = fg.apply1(Op::elemwise(ScalarOp::Exp), &[xv]).unwrap();
    fg.replace(fg.outputs()[0], back, "unshift").unwrap();
    ok(&fg);
    assert!(!fg.contains_var(c));
    // A constant output.
    let k = fg.constant(common::vf(&[1.0, 2.0]));
    fg.replace(fg.outputs()[0], k, "fold").unwrap();
    ok(&fg);
    assert_eq!(fg.n_nodes(), 0);
    assert_eq!(fg.to_string(), "FunctionGraph(TensorConstant{f64[2]})");
    assert_eq!(
        common::flat(&evaluate(&fg, &[common::vf(&[0.0])]).unwrap()[0]),
        [1.0, 2.0]
    );
}

#[test]
fn clone_is_independent_and_drops_features() {
    let (x, y) = xy();
    let mut fg = FunctionGraph::new(&[x.clone(), y.clone()], &[(&x * &y).exp()]).unwrap();
    fg.attach_feature(NodeFinder::default()).unwrap();
    let mut c = fg.clone();
    assert!(c.feature_names().is_empty());
    assert_eq!(fg.feature_names(), ["NodeFinder"]);
    ok(&c);
    let exp_in = fg.node(out_node(&c, 0)).inputs[0];
    c.replace(exp_in, c.inputs()[0], "clone only").unwrap();
    ok(&c);
    assert_eq!(c.to_string(), "FunctionGraph(exp(x))");
    assert_eq!(fg.to_string(), "FunctionGraph(exp(mul(x, y)))");
    ok(&fg);
    assert_eq!(fg.n_nodes(), 2);
    assert_eq!(c.n_nodes(), 1);
}

#[test]
fn history_checkpoint_and_revert_restore_the_exact_graph() {
    let (x, y) = xy();
    let s = &x + &y;
    let out = &(&s * &s.exp()) - &y;
    let mut fg = FunctionGraph::new(&[x, y], &[out, s]).unwrap();
    fg.attach_feature(NodeFinder::default()).unwrap();
    let before = fg.to_string();
    let nodes_before: Vec<NodeId> = fg.node_ids().collect();
    let cp = fg.checkpoint();
    assert_eq!(cp, 0);
    assert!(fg.has_feature::<History>());
    let (xv, yv) = (fg.inputs()[0], fg.inputs()[1]);
    let s_v = fg.outputs()[1];
    let d = fg
        .apply1(Op::elemwise(ScalarOp::TrueDiv), &[xv, yv])
        .unwrap();
    fg.replace(s_v, d, "one").unwrap();
    let sub = out_node(&fg, 0);
    let t = fg.apply1(Op::elemwise(ScalarOp::Tanh), &[yv]).unwrap();
    fg.replace(fg.node(sub).inputs[0], t, "two").unwrap();
    ok(&fg);
    assert_eq!(
        fg.to_string(),
        "FunctionGraph(sub(tanh(y), y), true_div(x, y))"
    );
    assert_eq!(fg.feature::<History>().unwrap().len(), 4);
    fg.revert(cp);
    ok(&fg);
    assert_eq!(fg.to_string(), before);
    assert_eq!(fg.node_ids().collect::<Vec<_>>(), nodes_before);
    assert!(fg.feature::<History>().unwrap().is_empty());
    let finder = fg.feature::<NodeFinder>().unwrap();
    assert!(finder.get(OpKind::Elemwise(ScalarOp::TrueDiv)).is_empty());
    assert_eq!(finder.get(OpKind::Elemwise(ScalarOp::Exp)).len(), 1);
    // Partial revert to an intermediate checkpoint.
    fg.replace(s_v, d, "one").unwrap();
    let mid = fg.checkpoint();
    let mid_text = fg.to_string();
    fg.replace(yv, xv, "all y").unwrap();
    assert_eq!(
        fg.to_string(),
        "FunctionGraph(sub(mul(*1 -> true_div(x, x), exp(*1)), x), *1)"
    );
    fg.revert(mid);
    ok(&fg);
    assert_eq!(fg.to_string(), mid_text);
    // Reverting to the current or a future checkpoint is a no-op.
    fg.revert(mid + 10);
    assert_eq!(fg.to_string(), mid_text);
}

/// A feature that refuses any graph containing a `sub` node.
struct NoSub;

impl Feature for NoSub {
    fn name(&self) -> &'static str {
        "NoSub"
    }
    fn validate(&self, fg: &FunctionGraph) -> Result<()> {
        match fg
            .node_ids()
            .find(|&n| fg.node(n).op.is_elemwise(ScalarOp::Sub))
        {
            Some(n) => Err(Error::Validation(format!("no sub allowed ({n})"))),
            None => Ok(()),
        }
    }
}

#[test]
fn replace_validate_rolls_back_when_a_feature_vetoes() {
    let (x, y) = xy();
    let out = (&x + &y).exp();
    let mut fg = FunctionGraph::new(&[x, y], &[out]).unwrap();
    let (xv, yv) = (fg.inputs()[0], fg.inputs()[1]);
    let add_v = fg.node(out_node(&fg, 0)).inputs[0];
    let sub = fg.apply1(Op::elemwise(ScalarOp::Sub), &[xv, yv]).unwrap();
    assert_eq!(
        fg.replace_validate(add_v, sub, "r")
            .unwrap_err()
            .to_string(),
        "graph error: replace_validate needs the ReplaceValidate feature"
    );
    ReplaceValidate::attach(&mut fg).unwrap();
    fg.attach_feature(NoSub).unwrap();
    fg.attach_feature(NodeFinder::default()).unwrap();
    assert_eq!(
        fg.feature_names(),
        ["History", "ReplaceValidate", "NoSub", "NodeFinder"]
    );
    let before = fg.to_string();
    let sub_node = fg.owner(sub).unwrap();
    let e = fg.replace_validate(add_v, sub, "veto").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("validation failed: no sub allowed ({sub_node})")
    );
    ok(&fg);
    assert_eq!(fg.to_string(), before);
    assert!(!fg.contains_node(sub_node));
    assert!(fg
        .feature::<NodeFinder>()
        .unwrap()
        .get(OpKind::Elemwise(ScalarOp::Sub))
        .is_empty());
    // A failing pair in replace_all_validate rolls back the pairs before it.
    let mul = fg.apply1(Op::elemwise(ScalarOp::Mul), &[xv, yv]).unwrap();
    let f32v = fg.apply1(Op::elemwise(ScalarOp::Cast(F32)), &[xv]).unwrap();
    let e = fg
        .replace_all_validate(&[(add_v, mul), (yv, f32v)], "pairs")
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "graph error: pairs: cannot replace a variable of type f64(?,) by one of type f32(?,)"
    );
    assert_eq!(fg.to_string(), before);
    ok(&fg);
    // An accepted replacement sticks.
    fg.replace_validate(add_v, mul, "ok").unwrap();
    assert_eq!(fg.to_string(), "FunctionGraph(exp(mul(x, y)))");
    ok(&fg);
    // Detaching the veto lets the sub through.
    assert!(fg.detach_feature::<NoSub>().is_some());
    assert!(fg.detach_feature::<NoSub>().is_none());
    fg.replace_validate(mul, sub, "ok").unwrap();
    assert_eq!(fg.to_string(), "FunctionGraph(exp(sub(x, y)))");
}

#[test]
fn change_tracker_counts_input_changes_and_imports() {
    let (x, y) = xy();
    let s = &x + &y;
    let out = &s * &s;
    let mut fg = FunctionGraph::new(&[x, y], &[out]).unwrap();
    fg.attach_feature(ChangeTracker::default()).unwrap();
    fg.attach_feature(ChangeTracker::default()).unwrap();
    assert_eq!(
        fg.feature_names(),
        ["ChangeTracker"],
        "attaching twice is a no-op"
    );
    let (xv, yv) = (fg.inputs()[0], fg.inputs()[1]);
    let s_v = fg.node(out_node(&fg, 0)).inputs[0];
    let e = fg.apply1(Op::elemwise(ScalarOp::Exp), &[xv]).unwrap();
    let d = fg.apply1(Op::elemwise(ScalarOp::Sub), &[e, yv]).unwrap();
    fg.replace(s_v, d, "t").unwrap();
    // Two uses switched, two nodes imported.
    assert_eq!(fg.feature::<ChangeTracker>().unwrap().changes, 4);
    assert_eq!(fg.stats.changes, 2);
    fg.feature_mut::<ChangeTracker>().unwrap().changes = 0;
    fg.replace(d, d, "t").unwrap();
    assert_eq!(fg.feature::<ChangeTracker>().unwrap().changes, 0);
}

/// Records every callback.
struct Recorder(Arc<Mutex<Vec<String>>>);

impl Feature for Recorder {
    fn name(&self) -> &'static str {
        "Recorder"
    }
    fn on_attach(&mut self, fg: &FunctionGraph) -> Result<()> {
        self.0
            .lock()
            .unwrap()
            .push(format!("attach {}", fg.n_nodes()));
        Ok(())
    }
    fn on_detach(&mut self, _fg: &FunctionGraph) {
        self.0.lock().unwrap().push("detach".into());
    }
    fn on_import(&mut self, fg: &FunctionGraph, node: NodeId, reason: &str) {
        self.0
            .lock()
            .unwrap()
            .push(format!("import {} {reason}", fg.node(node).op));
    }
    fn on_prune(&mut self, fg: &FunctionGraph, node: NodeId, reason: &str) {
        assert!(!fg.contains_node(node), "called after the prune");
        self.0
            .lock()
            .unwrap()
            .push(format!("prune {} {reason}", fg.node(node).op));
    }
    fn on_change_input(
        &mut self,
        fg: &FunctionGraph,
        client: Client,
        old: VarId,
        new: VarId,
        reason: &str,
    ) {
        assert!(fg.contains_var(new));
        let c = match client {
            Client::Node(n, i) => format!("{}[{i}]", fg.node(n).op),
            Client::Output(i) => format!("out[{i}]"),
        };
        self.0.lock().unwrap().push(format!(
            "change {c} {}->{} {reason}",
            fg.leaf_name_or_op(old),
            fg.leaf_name_or_op(new)
        ));
    }
}

trait LeafOrOp {
    fn leaf_name_or_op(&self, v: VarId) -> String;
}

impl LeafOrOp for FunctionGraph {
    fn leaf_name_or_op(&self, v: VarId) -> String {
        match self.owner_op(v) {
            Some(op) => op.name(),
            None => self.leaf_name(v),
        }
    }
}

#[test]
fn features_see_imports_prunes_and_changes_in_order() {
    let (x, y) = xy();
    let out = (&x + &y).exp();
    let mut fg = FunctionGraph::new(&[x, y], &[out]).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    fg.attach_feature(Recorder(log.clone())).unwrap();
    let (xv, yv) = (fg.inputs()[0], fg.inputs()[1]);
    let add_v = fg.node(out_node(&fg, 0)).inputs[0];
    let n = fg.apply1(Op::elemwise(ScalarOp::Neg), &[yv]).unwrap();
    let sub = fg.apply1(Op::elemwise(ScalarOp::Sub), &[xv, n]).unwrap();
    fg.replace(add_v, sub, "why").unwrap();
    fg.detach_feature::<Recorder>();
    assert_eq!(
        *log.lock().unwrap(),
        [
            "attach 2",
            "import neg why",
            "import sub why",
            "prune add why",
            "change exp[0] add->sub why",
            "detach"
        ]
    );
}

#[test]
fn toposort_with_orderings_and_cycle_detection() {
    let (x, y) = xy();
    let out = &x.exp() + &y.log();
    let fg = FunctionGraph::new(&[x, y], &[out]).unwrap();
    let add = out_node(&fg, 0);
    let exp = fg.owner(fg.node(add).inputs[0]).unwrap();
    let log = fg.owner(fg.node(add).inputs[1]).unwrap();
    assert_eq!(fg.toposort(), [exp, log, add]);
    let order = fg.toposort_with(&[(log, exp)]);
    assert_eq!(order, [log, exp, add]);
    assert_topo(&fg, &order);
    assert_eq!(
        fg.try_toposort_with(&[(exp, log)]).unwrap(),
        [exp, log, add]
    );
    let e = fg.try_toposort_with(&[(exp, log), (log, exp)]).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("graph error: cycle through node n"),
        "{e}"
    );
    // A constraint against a data dependency is a cycle too.
    assert!(fg.try_toposort_with(&[(add, exp)]).is_err());
    assert!(fg.orderings().is_empty());
}

#[test]
#[should_panic(expected = "orderings form a cycle")]
fn toposort_with_panics_on_a_cycle() {
    let x = vector("x", F64);
    let fg = FunctionGraph::new(std::slice::from_ref(&x), &[x.exp().log()]).unwrap();
    let log = out_node(&fg, 0);
    let exp = fg.owner(fg.node(log).inputs[0]).unwrap();
    fg.toposort_with(&[(log, exp)]);
}

#[test]
fn new_reports_missing_and_bad_inputs() {
    let (x, y) = xy();
    let out = &x + &y;
    assert_eq!(
        FunctionGraph::new(std::slice::from_ref(&x), std::slice::from_ref(&out)).unwrap_err().to_string(),
        "graph error: missing input: 'y' of type f64(?,) is needed to compute the outputs but is not an input"
    );
    assert_eq!(
        FunctionGraph::new(&[x.clone(), out.clone()], std::slice::from_ref(&out))
            .unwrap_err()
            .to_string(),
        "graph error: Tensor(?: f64(?,)) is given as an input but is not an input variable"
    );
    assert_eq!(
        FunctionGraph::new(
            &[x.clone(), x.clone(), y.clone()],
            std::slice::from_ref(&out)
        )
        .unwrap_err()
        .to_string(),
        "graph error: input Tensor(x: f64(?,)) is given twice"
    );
    // Unused inputs are fine, and an input may be an output.
    let z = scalar("z", I8);
    let fg = FunctionGraph::new(&[x.clone(), y, z], &[out, x]).unwrap();
    ok(&fg);
    assert_eq!(fg.inputs().len(), 3);
    assert_eq!(fg.to_string(), "FunctionGraph(add(x, y), x)");
}

#[test]
fn output_tensors_round_trip() {
    let (x, y) = xy();
    let s = &x + &y;
    let out = (&s * &s.exp()).sum_all();
    let mut fg = FunctionGraph::new(&[x.clone(), y.clone()], &[out, s, x.clone()]).unwrap();
    let xv = fg.inputs()[0];
    let s_v = fg.outputs()[1];
    let m = fg
        .apply1(Op::elemwise(ScalarOp::Mul), &[xv, fg.inputs()[1]])
        .unwrap();
    fg.replace(s_v, m, "edit").unwrap();
    let (x2, y2) = (vector("x", F64), vector("y", F64));
    let outs = fg.output_tensors(&[x2.clone(), y2.clone()]).unwrap();
    assert_eq!(outs.len(), 3);
    assert!(outs[2].same(&x2));
    let fg2 = FunctionGraph::new(&[x2, y2], &outs).unwrap();
    assert_eq!(fg2.to_string(), fg.to_string());
    let vals = [common::vf(&[1.0, 2.0]), common::vf(&[0.5, -1.0])];
    let (a, b) = (
        evaluate(&fg, &vals).unwrap(),
        evaluate(&fg2, &vals).unwrap(),
    );
    assert!(a.iter().zip(&b).all(|(p, q)| p.same_as(q)));
    assert_eq!(
        fg.output_tensors(&[x]).unwrap_err().to_string(),
        "graph error: the graph has 2 inputs but 1 tensors were given"
    );
    // A constant output survives the round trip.
    // (The third output is the input x itself: switch only the output slot.)
    let kk = fg.constant(common::vf(&[7.0, 8.0]));
    fg.change_input(Client::Output(2), kk, "c");
    ok(&fg);
    let outs = fg
        .output_tensors(&[vector("x", F64), vector("y", F64)])
        .unwrap();
    assert!(outs[2]
        .constant_value()
        .unwrap()
        .same_as(&common::vf(&[7.0, 8.0])));
}

#[test]
fn a_deep_chain_imports_sorts_evaluates_and_drops_without_recursion() {
    const N: usize = 100_000;
    let worker = std::thread::Builder::new().stack_size(2 << 20).spawn(|| {
        let x = vector("x", F64);
        let mut t = x.clone();
        for k in 0..N {
            t = if k % 2 == 0 { -&t } else { t.abs() };
        }
        let mut fg =
            FunctionGraph::new(std::slice::from_ref(&x), std::slice::from_ref(&t)).unwrap();
        fg.set_check_after_mutation(false);
        assert_eq!(fg.n_nodes(), N);
        let order = fg.toposort();
        assert_eq!(order.len(), N);
        assert_eq!(
            order.first().map(|&n| fg.node(n).inputs[0]),
            Some(fg.inputs()[0])
        );
        assert_eq!(order.last().copied(), fg.owner(fg.outputs()[0]));
        let v = evaluate(&fg, &[common::vf(&[1.5, -2.0])]).unwrap();
        assert_eq!(common::flat(&v[0]), [1.5, 2.0]);
        // A replacement that prunes the whole chain.
        let xv = fg.inputs()[0];
        let e = fg.apply1(Op::elemwise(ScalarOp::Exp), &[xv]).unwrap();
        fg.replace(fg.outputs()[0], e, "cut").unwrap();
        assert_eq!(fg.n_nodes(), 1);
        fg.check_integrity().unwrap();
        drop(fg);
        drop(t);
        drop(x);
    });
    worker.unwrap().join().expect("no stack overflow");
}
