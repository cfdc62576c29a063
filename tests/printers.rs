//! Printers: the FunctionGraph display, dprint, pprint of every op form, DOT.

mod common;

use kiln::graph::print::{dprint, dprint_vars, pprint, pprint_outputs, to_dot};
use kiln::ops::{CRef, Composite};
use kiln::*;
use DType::*;

fn fg_of(inputs: &[Tensor], outputs: &[Tensor]) -> FunctionGraph {
    FunctionGraph::new(inputs, outputs).unwrap()
}

#[test]
fn display_tags_shared_variables_in_order_of_first_use() {
    let (x, y) = (scalar("x", F64), scalar("y", F64));
    let a = &x + &y;
    let b = a.exp();
    let out = &(&a * &b) - &(&b / &a);
    let fg = fg_of(&[x, y], &[out]);
    assert_eq!(
        fg.to_string(),
        "FunctionGraph(sub(mul(*1 -> add(x, y), *2 -> exp(*1)), true_div(*2, *1)))"
    );
    assert_eq!(format!("{fg:?}"), fg.to_string());
}

#[test]
fn display_of_constants_unnamed_inputs_and_several_outputs() {
    let x = vector("x", F32);
    let b = vector("b", Bool);
    let i = scalar("i", I64);
    let m = constant(ndarray::arr2(&[[1.0, 2.0], [3.0, 4.0]]).into_dyn());
    let anon = Tensor::input("", TensorType::new(F64, vec![Some(2), None]));
    let out1 = &(&x * 0.1) + 2.0;
    let out2 = &i * 3;
    let out3 = switch(&b, &b, &constant(ndarray::arr0(true).into_dyn())).unwrap();
    let out4 = &m + &anon;
    let fg = fg_of(&[x, b, i, anon], &[out1, out2, out3, out4]);
    assert_eq!(
        fg.to_string(),
        "FunctionGraph(add(mul(x, 0.1), 2.0), mul(i, 3), switch(b, b, True), add(TensorConstant{f64[2, 2]}, ))"
    );
    let y = vector("y", F64);
    let fg = fg_of(
        std::slice::from_ref(&y),
        &[&y * 1e20, &y / 3.0, &y + f64::INFINITY, y.clone()],
    );
    assert_eq!(
        fg.to_string(),
        "FunctionGraph(mul(y, 100000000000000000000), true_div(y, 3.0), add(y, inf), y)"
    );
    // An input with no name prints as its type.
    let mut g = FunctionGraph::empty();
    let v = g.add_input(TensorType::new(I8, vec![None, Some(1)]), None);
    g.add_output(v);
    assert_eq!(g.to_string(), "FunctionGraph(<i8(?, 1)>)");
    assert_eq!(FunctionGraph::empty().to_string(), "FunctionGraph()");
}

#[test]
fn dprint_trees() {
    let (x, y) = (scalar("x", F64), scalar("y", F64));
    let s = (&x + &y).named("s");
    let out = (&s * 2.0).exp();
    let fg = fg_of(&[x.clone(), y.clone()], &[out, s.clone()]);
    assert_eq!(
        dprint(&fg),
        "exp [id A] ''\n |mul [id B] ''\n   |add [id C] 's'\n   | |x [id D]\n   | |y [id E]\n   |TensorConstant{2.0} [id F]\nadd [id C] 's'\n"
    );
    assert_eq!(
        dprint_vars(&fg, &[fg.outputs()[1]]),
        "add [id A] 's'\n |x [id B]\n |y [id C]\n"
    );
    // Multi-output nodes show which output is used.
    let mut c = Composite::new(vec![F64]);
    let e = c.push(ScalarOp::Exp, &[CRef::Input(0)]).unwrap();
    let l = c.push(ScalarOp::Log, &[CRef::Input(0)]).unwrap();
    c.outputs = vec![e, l];
    let outs = Tensor::apply_multi(Op::composite(c), &[&x]).unwrap();
    let fg = fg_of(&[x], &[outs[1].clone()]);
    assert_eq!(
        dprint(&fg),
        "Composite{exp(i0), log(i0)}.1 [id A] ''\n |x [id B]\n"
    );
}

#[test]
fn pprint_of_every_op_form() {
    let x = vector("x", F64);
    let y = vector("y", F64);
    let c = vector("c", Bool);
    let i = vector("i", I32);
    let m = matrix("M", F64);
    let k = tensor("K", F64, &[Some(1), None]);
    let t3 = tensor("T", F64, &[None, None, None]);
    let p = |t: &Tensor| t.to_string();
    assert_eq!(p(&(&(&x + &y) * &(&x - &y))), "((x + y) * (x - y))");
    assert_eq!(
        p(&elemwise(ScalarOp::Add, &[&x, &y, &x]).unwrap()),
        "(x + y + x)"
    );
    assert_eq!(p(&(&x / &y)), "(x / y)");
    assert_eq!(p(&int_div(&x, &y).unwrap()), "(x // y)");
    assert_eq!(p(&(&i % 3)), "(i % 3)");
    assert_eq!(p(&pow(&x, &y).unwrap()), "(x ** y)");
    assert_eq!(p(&x.powf(2.0)), "(x ** 2.0)");
    for (f, sym) in [
        (lt as fn(&Tensor, &Tensor) -> Result<Tensor>, "<"),
        (le, "<="),
        (gt, ">"),
        (ge, ">="),
        (eq, "=="),
        (neq, "!="),
    ] {
        assert_eq!(p(&f(&x, &y).unwrap()), format!("(x {sym} y)"));
    }
    assert_eq!(p(&and(&c, &c).unwrap()), "(c & c)");
    assert_eq!(p(&or(&c, &c).unwrap()), "(c | c)");
    assert_eq!(p(&xor(&i, &i).unwrap()), "(i ^ i)");
    assert_eq!(p(&c.invert().unwrap()), "(~c)");
    assert_eq!(p(&-&x), "(-x)");
    assert_eq!(p(&x.cast(F32)), "cast(x, \"f32\")");
    assert_eq!(p(&switch(&c, &x, &y).unwrap()), "where(c, x, y)");
    assert_eq!(p(&clip(&x, &y, &y).unwrap()), "clip(x, y, y)");
    assert_eq!(p(&maximum(&x, &y).unwrap()), "maximum(x, y)");
    assert_eq!(p(&second(&x, &y).unwrap()), "second(x, y)");
    assert_eq!(p(&x.sigmoid().log1p()), "log1p(sigmoid(x))");
    assert_eq!(p(&elemwise(ScalarOp::Add, &[&x]).unwrap()), "add(x)");
    assert_eq!(p(&dot(&m, &x).unwrap()), "(M @ x)");
    assert_eq!(p(&m.t()), "M.T");
    assert_eq!(p(&t3.t()), "T.T");
    assert_eq!(
        p(&t3.dimshuffle(&[Some(1), Some(0), Some(2)]).unwrap()),
        "DimShuffle{1,0,2}(T)"
    );
    assert_eq!(p(&x.expand_dims(0).unwrap()), "x[None, :]");
    assert_eq!(p(&m.expand_dims(-1).unwrap()), "M[:, :, None]");
    // Dropped size-1 dimensions print as `[0]` indices (which parse back).
    assert_eq!(p(&k.dimshuffle(&[Some(1)]).unwrap()), "K[0, :]");
    assert_eq!(
        p(&k.dimshuffle(&[Some(1), None]).unwrap()),
        "K[0, :][:, None]"
    );
    let vars = std::collections::HashMap::from([("K".to_string(), k.clone())]);
    for order in [
        vec![Some(1)],
        vec![Some(1), None],
        vec![None, Some(1), None],
    ] {
        let d = k.dimshuffle(&order).unwrap();
        let back = kiln::tensor::build_expression(&p(&d), &vars).unwrap();
        assert_eq!(back.ty(), d.ty(), "{}", p(&d));
    }
    assert_eq!(p(&(&m + &x)), "(M + x[None, :])");
    assert_eq!(p(&m.sum_all()), "sum(M)");
    assert_eq!(p(&m.max(&[1]).unwrap()), "max(M, axis=1)");
    assert_eq!(p(&t3.sum(&[0, 2]).unwrap()), "sum(T, axis=(0, 2))");
    assert_eq!(p(&t3.prod(&[-1]).unwrap()), "prod(T, axis=2)");
    assert_eq!(p(&t3.min(&[0]).unwrap()), "min(T, axis=0)");
    assert_eq!(p(&c.reduce(ReduceOp::All, None, false).unwrap()), "all(c)");
    assert_eq!(
        p(&c.reduce(ReduceOp::Any, Some(&[0]), false).unwrap()),
        "any(c, axis=0)"
    );
    let n = scalar("n", I64);
    assert_eq!(
        p(&alloc(&x, &[&n, &x.shape_i(0).unwrap()]).unwrap()),
        "alloc(x, n, Shape_i{0}(x))"
    );
    assert_eq!(p(&m.reshape(&[-1]).unwrap()), "Reshape{1}(M, -1)");
    assert_eq!(
        p(&m.reshape(&[2, -1]).unwrap()),
        "Reshape{2}(M, TensorConstant{i64[2]})"
    );
    assert_eq!(p(&m.shape()), "Shape(M)");
    let mut comp = Composite::new(vec![F64, F64]);
    let s = comp
        .push(ScalarOp::Add, &[CRef::Input(0), CRef::Input(1)])
        .unwrap();
    let l = comp.push(ScalarOp::Log, &[s]).unwrap();
    comp.outputs = vec![l, s];
    let outs = Tensor::apply_multi(Op::composite(comp), &[&x, &y]).unwrap();
    // Inline, in the expression language: each output re-parses.
    assert_eq!(p(&outs[0]), "log((x + y))");
    assert_eq!(p(&outs[1]), "(x + y)");
    let fg = fg_of(&[x.clone(), y.clone()], &[&x + &y, x.exp()]);
    assert_eq!(pprint_outputs(&fg), "(x + y)\nexp(x)");
    assert_eq!(pprint(&fg, fg.inputs()[0]), "x");
}

#[test]
fn f32_constants_print_as_f32_numbers() {
    let x = vector("x", F32);
    assert_eq!((&x * 0.1).to_string(), "(x * 0.1)");
    assert_eq!((&x + 1.5).to_string(), "(x + 1.5)");
    assert_eq!(
        (&x + 3.4028235e38).to_string(),
        "(x + 340282350000000000000000000000000000000)"
    );
    assert_eq!(Value::scalar_f64(F32, 0.1).summary(), "0.1");
    assert_eq!(Value::scalar_f64(F64, 0.1).summary(), "0.1");
    assert_eq!(Value::scalar_f64(F32, 1.0 / 3.0).summary(), "0.33333334");
}

#[test]
fn dot_output_is_well_formed() {
    let (x, y) = (vector("x", F64), vector("y", F64));
    let s = &x + &y;
    let out = &(&s * 2.0) + &s.exp();
    let fg = fg_of(&[x, y], &[out, s]);
    let dot = to_dot(&fg);
    assert!(dot.starts_with("digraph G {\n"), "{dot}");
    assert!(dot.ends_with("}\n"));
    let lines: Vec<&str> = dot.lines().collect();
    let var_lines = lines
        .iter()
        .filter(|l| l.contains("[shape=ellipse"))
        .count();
    let node_lines = lines.iter().filter(|l| l.contains("[shape=box")).count();
    let edges = lines.iter().filter(|l| l.contains(" -> ")).count();
    assert_eq!(node_lines, fg.n_nodes());
    // x, y, the constant 2.0, and one output per node.
    assert_eq!(var_lines, 3 + fg.n_nodes());
    let inputs_total: usize = fg
        .node_ids()
        .map(|n| fg.node(n).inputs.len() + fg.node(n).outputs.len())
        .sum();
    assert_eq!(edges, inputs_total);
    assert!(dot.contains("fillcolor=palegreen, label=\"x\""));
    assert!(dot.contains("fillcolor=lightgrey, label=\"2.0\""));
    assert!(dot.contains("fillcolor=lightblue"));
    assert!(dot.contains("[shape=box, label=\"exp\"]"));
    assert!(
        dot.contains("[label=\"1\"]"),
        "multi-input edges are numbered"
    );
    // Every identifier used in an edge is declared.
    for l in lines.iter().filter(|l| l.contains(" -> ")) {
        let ids: Vec<&str> = l
            .trim()
            .trim_end_matches(';')
            .split(" -> ")
            .map(|p| p.split_whitespace().next().unwrap())
            .collect();
        for id in ids {
            assert!(
                lines
                    .iter()
                    .any(|d| d.trim().starts_with(&format!("{id} [shape="))),
                "{id} undeclared"
            );
        }
    }
    // Quotes in labels are escaped.
    let q = Tensor::input("a\"b", TensorType::scalar(F64));
    let g = fg_of(std::slice::from_ref(&q), &[q.exp()]);
    assert!(to_dot(&g).contains("label=\"a\\\"b\""));
}
