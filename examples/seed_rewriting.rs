//! The seed document "Graph Rewriting", walked through with kiln: the x*y/y
//! simplification three ways, merging, dot distribution with a relation used
//! in both directions, and unification / reification.
//!
//! Run with `cargo run --release --example seed_rewriting`. Section headers
//! start with `#`; every other line is a result the seed shows.

use std::sync::Arc;

use kiln::graph::print::{dprint_vars, pprint};
use kiln::graph::{FunctionGraph, NodeId};
use kiln::rewriting::profile::SimpleProfile;
use kiln::rewriting::unify::{cons, etuple, var};
use kiln::rewriting::{
    dot_distributeo, reify, unify, EquilibriumGraphRewriter, GraphRewriter, KanrenRelationSub,
    MergeOptimizer, NamedNodeRewriter, NodeRewriter, Pattern, PatternNodeRewriter, Rewrite,
    RewriterProfile, Tracks, WalkingGraphRewriter,
};
use kiln::{
    add, dot, elemwise, matrix, mul, scalar, true_div, vector, DType, Op, Result, ScalarOp, Tensor,
};

/// The seed's graph rewriter: `(a * b) / b -> a` by walking the toposort.
pub struct Simplify;

impl GraphRewriter for Simplify {
    fn name(&self) -> String {
        "Simplify".into()
    }
    fn apply(&self, fg: &mut FunctionGraph) -> Result<RewriterProfile> {
        let start = std::time::Instant::now();
        let mut changed = false;
        for node in fg.toposort() {
            if !fg.contains_node(node) || !fg.node(node).op.is_elemwise(ScalarOp::TrueDiv) {
                continue;
            }
            let (x, y, z) = (
                fg.node(node).inputs[0],
                fg.node(node).inputs[1],
                fg.node(node).outputs[0],
            );
            let Some(m) = fg.owner(x) else { continue };
            if !fg.node(m).op.is_elemwise(ScalarOp::Mul) || fg.node(m).inputs.len() != 2 {
                continue;
            }
            let (a, b) = (fg.node(m).inputs[0], fg.node(m).inputs[1]);
            if y == a {
                fg.replace_validate(z, b, "Simplify")?;
                changed = true;
            } else if y == b {
                fg.replace_validate(z, a, "Simplify")?;
                changed = true;
            }
        }
        Ok(RewriterProfile::Simple(SimpleProfile {
            name: self.name(),
            class: "Simplify",
            time: start.elapsed(),
            changed,
        }))
    }
}

/// The seed's node rewriter version of the same simplification.
pub struct LocalSimplify;

impl NodeRewriter for LocalSimplify {
    fn name(&self) -> String {
        "local_simplify".into()
    }
    fn tracks(&self) -> Tracks {
        Tracks::kind(kiln::ops::OpKind::Elemwise(ScalarOp::TrueDiv))
    }
    fn transform(&self, fg: &mut FunctionGraph, node: NodeId) -> Result<Option<Rewrite>> {
        let (x, y) = (fg.node(node).inputs[0], fg.node(node).inputs[1]);
        let Some(m) = fg.owner(x) else {
            return Ok(None);
        };
        if !fg.node(m).op.is_elemwise(ScalarOp::Mul) || fg.node(m).inputs.len() != 2 {
            return Ok(None);
        }
        let (a, b) = (fg.node(m).inputs[0], fg.node(m).inputs[1]);
        Ok(if y == a {
            Some(Rewrite::single(b))
        } else if y == b {
            Some(Rewrite::single(a))
        } else {
            None
        })
    }
}

fn xyz() -> (Tensor, Tensor, Tensor) {
    (
        scalar("x", DType::F64),
        scalar("y", DType::F64),
        scalar("z", DType::F64),
    )
}

/// `add(z, mul(true_div(mul(y, x), y), true_div(z, x)))`.
pub fn first_graph() -> Result<FunctionGraph> {
    let (x, y, z) = xyz();
    let a = add(&z, &mul(&true_div(&mul(&y, &x)?, &y)?, &true_div(&z, &x)?)?)?;
    FunctionGraph::new(&[x, y, z], &[a])
}

/// `true_div(mul(add(y, z), x), add(y, z))`.
pub fn second_graph() -> Result<FunctionGraph> {
    let (x, y, z) = xyz();
    let a = true_div(&mul(&add(&y, &z)?, &x)?, &add(&y, &z)?)?;
    FunctionGraph::new(&[x, y, z], &[a])
}

/// Applies `rw` to the pprint of `fg`'s single output.
fn pp(fg: &FunctionGraph) -> String {
    pprint(fg, fg.outputs()[0])
}

/// Every line the walk-through prints.
pub fn seed_lines() -> Result<Vec<String>> {
    let mut out = Vec::new();

    out.push("# Simplify (graph rewriter)".to_string());
    let mut e = first_graph()?;
    out.push(e.to_string());
    Simplify.rewrite(&mut e)?;
    out.push(e.to_string());

    out.push("# LocalSimplify in a WalkingGraphRewriter".to_string());
    let mut e = first_graph()?;
    WalkingGraphRewriter::new(Arc::new(LocalSimplify)).rewrite(&mut e)?;
    out.push(e.to_string());

    out.push("# local_simplify_1 and local_simplify_2 (PatternNodeRewriter)".to_string());
    let mut e = first_graph()?;
    let s1 =
        PatternNodeRewriter::parse("(true_div (mul ?x ?y) ?y)", "?x")?.named("local_simplify_1");
    let s2 =
        PatternNodeRewriter::parse("(true_div (mul ?x ?y) ?x)", "?y")?.named("local_simplify_2");
    let walk = WalkingGraphRewriter::with_rewriters(
        "simplify",
        vec![
            NamedNodeRewriter::new(Arc::new(s1)),
            NamedNodeRewriter::new(Arc::new(s2)),
        ],
    );
    walk.rewrite(&mut e)?;
    out.push(e.to_string());

    out.push("# add(y, z) != add(y, z) until merged".to_string());
    let mut e = second_graph()?;
    out.push(e.to_string());
    Simplify.rewrite(&mut e)?;
    out.push(e.to_string());
    MergeOptimizer::new().rewrite(&mut e)?;
    out.push(e.to_string());
    Simplify.rewrite(&mut e)?;
    out.push(e.to_string());

    out.push("# dot_distributeo, forwards".to_string());
    let distribute = EquilibriumGraphRewriter::new(vec![Arc::new(KanrenRelationSub::new(
        "dot_distribute",
        dot_distributeo,
    ))])
    .max_use_ratio(10.0);
    let gather = EquilibriumGraphRewriter::new(vec![Arc::new(KanrenRelationSub::new(
        "dot_gather",
        |x, y| dot_distributeo(y, x),
    ))])
    .max_use_ratio(10.0);
    let (a_m, b_m) = (matrix("A", DType::F64), matrix("B", DType::F64));
    let [x, y, z, w] = ["x", "y", "z", "w"].map(|n| vector(n, DType::F64));
    let inputs = [
        a_m.clone(),
        b_m.clone(),
        x.clone(),
        y.clone(),
        z.clone(),
        w.clone(),
    ];
    let tests = [
        dot(&a_m, &add(&x, &y)?)?,
        dot(&a_m, &add(&add(&x, &y)?, &add(&z, &w)?)?)?,
        dot(&a_m, &add(&x, &add(&y, &dot(&b_m, &add(&z, &w)?)?)?)?)?,
    ];
    let mut last = None;
    for t in &tests {
        let mut fg = FunctionGraph::new(&inputs, std::slice::from_ref(t))?;
        out.push(pp(&fg));
        distribute.rewrite(&mut fg)?;
        out.push(pp(&fg));
        last = Some(fg);
    }
    out.push("# dot_distributeo, backwards (gathering)".to_string());
    let mut fg = last.expect("three test graphs");
    gather.rewrite(&mut fg)?;
    out.push(pp(&fg));

    out.push("# unification and reification".to_string());
    let (x, y, z) = xyz();
    let xy = add(&x, &y)?;
    let xyz3 = elemwise(ScalarOp::Add, &[&x, &y, &z])?;
    let mut fg = FunctionGraph::new(&[x, y, z], &[xy, xyz3])?;
    let (gx, gy) = (fg.inputs()[0], fg.inputs()[1]);
    let (add_xy, add_xyz) = (fg.outputs()[0], fg.outputs()[1]);
    let y_lv = var();
    out.push(y_lv.to_string());
    let pat = etuple(ScalarOp::Add, vec![Pattern::Graph(gx), Pattern::var(&y_lv)]);
    let s = unify(&pat, &fg, add_xy).ok_or_else(|| kiln::Error::Rewrite("no match".into()))?;
    out.push(s.display(&fg));
    assert_eq!(s.var(&y_lv), Some(gy));
    let res = reify(
        &etuple(
            ScalarOp::Add,
            vec![Pattern::var(&y_lv), Pattern::var(&y_lv)],
        ),
        &s,
        &mut fg,
    )?;
    out.extend(dprint_vars(&fg, &[res]).lines().map(str::to_string));
    let (op_lv, args_lv) = (var(), var());
    let s = unify(&cons(&op_lv, &args_lv), &fg, add_xy)
        .ok_or_else(|| kiln::Error::Rewrite("no match".into()))?;
    out.push(s.display(&fg));
    let s = unify(&cons(&op_lv, &args_lv), &fg, add_xyz)
        .ok_or_else(|| kiln::Error::Rewrite("no match".into()))?;
    out.push(s.display(&fg));
    assert_eq!(s.op(&op_lv), Some(&Op::elemwise(ScalarOp::Add)));
    let res = reify(&cons(ScalarOp::Mul, &args_lv), &s, &mut fg)?;
    out.extend(dprint_vars(&fg, &[res]).lines().map(str::to_string));
    Ok(out)
}

#[allow(dead_code)]
fn main() -> Result<()> {
    for line in seed_lines()? {
        println!("{line}");
    }
    Ok(())
}
