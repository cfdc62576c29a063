//! The `Alloc` rules (`src/rewrites/alloc.rs`): for each rule a
//! before/after test in pprint form (an equilibrium of that rule alone), a
//! check that the result is a fixed point, a value check on edge inputs in
//! every dtype the rule accepts, the cases where it must not fire because
//! it would drop a run-time size check, and the run-time errors that must
//! survive FAST_RUN (where PyTensor's `shape_unsafe` versions give a value).

mod common_rewrites;

use common_rewrites::*;
use kiln::rewriting::Mode;
use kiln::*;
use ndarray::{ArrayD, IxDyn};

fn i64s(v: i64) -> Value {
    Value::scalar_i64(DType::I64, v)
}

fn f64s(shape: &[usize]) -> Value {
    let n: usize = shape.iter().product();
    let data: Vec<f64> = (0..n).map(|k| k as f64 * 0.5 - 1.0).collect();
    Value::F64(ArrayD::from_shape_vec(IxDyn(shape), data).unwrap())
}

/// The graph of `src` over `decl`, rewritten by FAST_RUN, still refuses
/// `bad` (the reference evaluator on the rewritten graph and the compiled
/// function both), and both agree with the original on `good`.
fn keeps_the_size_check(decl: &str, src: &str, good: &[Value], bad: &[Value]) {
    let fg = graph(decl, src);
    assert!(
        kiln::eval::evaluate(&fg, bad).is_err(),
        "the original must refuse the bad sizes: {src}"
    );
    let mut rewritten = fg.clone();
    kiln::rewrites::rewrite_graph(&mut rewritten, &Mode::fast_run()).unwrap();
    let err = kiln::eval::evaluate(&rewritten, bad);
    assert!(
        err.is_err(),
        "FAST_RUN dropped a size check: {} gives {err:?}",
        show(&rewritten)
    );
    let want = kiln::eval::evaluate(&fg, good).unwrap();
    let got = kiln::eval::evaluate(&rewritten, good).unwrap();
    assert!(want[0].same_as(&got[0]), "{want:?} vs {got:?}");
    let f = compiled(decl, src);
    assert!(
        f.call_values(bad).is_err(),
        "compiled {src} accepts bad sizes"
    );
    let got = f.call_values(good).unwrap();
    assert!(want[0].same_as(&got[0]), "{want:?} vs compiled {got:?}");
}

/// `src` over `decl` compiled under FAST_RUN.
fn compiled(decl: &str, src: &str) -> CompiledFunction {
    let ins = decls(decl);
    let map: std::collections::HashMap<String, Tensor> = ins
        .iter()
        .map(|t| (t.name().unwrap().to_string(), t.clone()))
        .collect();
    let y = build_expression(src, &map).unwrap();
    function(&ins, &[y]).compile().unwrap()
}

#[test]
fn alloc_of_the_values_own_shape_is_the_value() {
    check_rule(
        "local_useless_alloc",
        graph("x=f64[3, 4]", "alloc(x, 3, 4) * 2"),
        "(alloc(x, 3, 4) * 2.0)",
        "(x * 2.0)",
    );
    check_rule(
        "local_useless_alloc",
        graph("k=i32[2]", "alloc(k, 2) + 1"),
        "(alloc(k, 2) + 1)",
        "(k + 1)",
    );
    check_rule(
        "local_useless_alloc",
        graph("b=bool[2]", "alloc(b, 2)"),
        "alloc(b, 2)",
        "b",
    );
    // Sizes that are Shape_i of the value itself.
    let x = matrix("x", DType::F32);
    let a = alloc(&x, &[&x.shape_i(0).unwrap(), &x.shape_i(1).unwrap()]).unwrap();
    check_rule(
        "local_useless_alloc",
        graph_of(&[x], &a),
        "alloc(x, Shape_i{0}(x), Shape_i{1}(x))",
        "x",
    );
    // A run-time size: the Alloc checks it (PyTensor drops it).
    check_no_fire(
        "local_useless_alloc",
        graph("x=f64[:, 4]", "alloc(x, 3, 4)"),
    );
    check_no_fire(
        "local_useless_alloc",
        graph("x=f64[3]; n=i64[]", "alloc(x, n)"),
    );
    // A real broadcast.
    check_no_fire("local_useless_alloc", graph("x=f64[1]", "alloc(x, 3)"));
}

#[test]
fn leading_unit_sizes_become_a_dimshuffle() {
    check_rule(
        "local_alloc_sink_dimshuffle",
        graph("x=f64[:]; n=i64[]", "alloc(x, 1, n)"),
        "alloc(x, 1, n)",
        "alloc(x, n)[None, :]",
    );
    // The Alloc left is useless: the value itself.
    check_rule(
        "local_alloc_sink_dimshuffle",
        graph("x=f64[3]", "alloc(x, 1, 1, 3) * 2"),
        "(alloc(x, 1, 1, 3) * 2.0)",
        "(x[None, None, :] * 2.0)",
    );
    check_rule(
        "local_alloc_sink_dimshuffle",
        graph("c=i64[]", "alloc(c, 1)"),
        "alloc(c, 1)",
        "c[None]",
    );
    // Not a leading size the value lacks, or not the constant 1.
    check_no_fire(
        "local_alloc_sink_dimshuffle",
        graph("x=f64[:, :]", "alloc(x, 1, 3)"),
    );
    check_no_fire(
        "local_alloc_sink_dimshuffle",
        graph("x=f64[:]; n=i64[]", "alloc(x, n, 1, 3)"),
    );
}

#[test]
fn alloc_of_alloc_is_one_alloc() {
    check_rule(
        "local_merge_alloc",
        graph("x=f64[:]; n=i64[]; m=i64[]", "alloc(alloc(x, m), n, m)"),
        "alloc(alloc(x, m), n, m)",
        "alloc(x, n, m)",
    );
    // An inner size 1 over a dimension the value has statically of size 1.
    check_rule(
        "local_merge_alloc",
        graph("x=f32[1]; n=i64[]", "alloc(alloc(x, 1), n, 5)"),
        "alloc(alloc(x, 1), n, 5)",
        "alloc(x, n, 5)",
    );
    // An inner size over a dimension the value lacks.
    check_rule(
        "local_merge_alloc",
        graph("c=i32[]; n=i64[]", "alloc(alloc(c, 1, 4), n, 2, 4)"),
        "alloc(alloc(c, 1, 4), n, 2, 4)",
        "alloc(c, n, 2, 4)",
    );
    // The inner Alloc checks that x has length 1, or m: kept.
    check_no_fire(
        "local_merge_alloc",
        graph("x=f64[:]; n=i64[]; m=i64[]", "alloc(alloc(x, 1), n, m)"),
    );
    check_no_fire(
        "local_merge_alloc",
        graph("x=f64[:]; n=i64[]; m=i64[]", "alloc(alloc(x, m), n)"),
    );
}

#[test]
fn dimshuffle_of_alloc_is_alloc_of_dimshuffle() {
    check_rule(
        "local_dimshuffle_alloc",
        graph("x=f64[:]; n=i64[]; m=i64[]", "transpose(alloc(x, n, m))"),
        "alloc(x, n, m).T",
        "alloc(x[:, None], m, n)",
    );
    check_rule(
        "local_dimshuffle_alloc",
        graph("x=i64[:, :]; n=i64[]", "alloc(x, n, 2, 3)[:, None]"),
        "alloc(x, n, 2, 3)[:, None, :, :]",
        "alloc(x[None, None, :, :], n, 1, 2, 3)",
    );
    // Dropping a dimension the value does not have statically of size 1
    // would lose the Alloc's check of it.
    check_no_fire(
        "local_dimshuffle_alloc",
        graph("x=f64[:]; n=i64[]", "alloc(x, 1)[0]"),
    );
}

#[test]
fn unary_of_alloc_runs_on_the_value() {
    check_rule(
        "local_alloc_unary",
        graph("x=f64[:]; n=i64[]", "exp(alloc(x, n, 3))"),
        "exp(alloc(x, n, 3))",
        "alloc(exp(x), n, 3)",
    );
    check_rule(
        "local_alloc_unary",
        graph("k=i32[:]; n=i64[]", "cast(alloc(k, n, 3), \"f64\")"),
        "cast(alloc(k, n, 3), \"f64\")",
        "alloc(cast(k, \"f64\"), n, 3)",
    );
    check_rule(
        "local_alloc_unary",
        graph("b=bool[]; n=i64[]", "~alloc(b, n)"),
        "(~alloc(b, n))",
        "alloc((~b), n)",
    );
    check_no_fire(
        "local_alloc_unary",
        graph("x=f64[:]; n=i64[]", "alloc(x, n, 3) + 1"),
    );
}

#[test]
fn alloc_input_of_elemwise_is_broadcast_by_the_op() {
    check_rule(
        "local_elemwise_alloc",
        graph("X=f64[3, 4]; v=f64[4]", "alloc(v, 3, 4) + X"),
        "(alloc(v, 3, 4) + X)",
        "(v[None, :] + X)",
    );
    check_rule(
        "local_elemwise_alloc",
        graph("X=i64[3, 4]; c=i64[]", "X * alloc(c, 3, 4)"),
        "(X * alloc(c, 3, 4))",
        "(X * c[None, None])",
    );
    check_rule(
        "local_elemwise_alloc",
        graph("X=f32[2, 3]; v=f32[1, 3]", "maximum(X, alloc(v, 2, 3))"),
        "maximum(X, alloc(v, 2, 3))",
        "maximum(X, v)",
    );
    // Sizes taken from the other operand at run time.
    let x = matrix("X", DType::F64);
    let c = scalar("c", DType::F64);
    let a = alloc(&c, &[&x.shape_i(0).unwrap(), &x.shape_i(1).unwrap()]).unwrap();
    check_rule(
        "local_elemwise_alloc",
        graph_of(&[x.clone(), c.clone()], &(&a * &x)),
        "(alloc(c, Shape_i{0}(X), Shape_i{1}(X)) * X)",
        "(c[None, None] * X)",
    );
    // A vector of run-time length: the Alloc also accepts a length 1 there
    // (a broadcast the element-wise op's static rule would refuse): kept.
    let v = vector("v", DType::F64);
    let a = alloc(&v, &[&x.shape_i(0).unwrap(), &x.shape_i(1).unwrap()]).unwrap();
    check_no_fire(
        "local_elemwise_alloc",
        graph_of(&[x.clone(), v], &(&a * &x)),
    );
    // The second size is not proved to be v's or X's: kept.
    check_no_fire(
        "local_elemwise_alloc",
        graph("X=f64[:, :]; v=f64[:]; n=i64[]", "alloc(v, 3, n) + X"),
    );
    // The Alloc gives the only size 5: dropping it would change the shape.
    check_no_fire(
        "local_elemwise_alloc",
        graph("X=f64[1, 1]; c=f64[]", "alloc(c, 5, 1) + X"),
    );
}

#[test]
fn join_of_allocs_is_alloc_of_join() {
    check_rule(
        "local_join_of_alloc",
        graph(
            "a=f64[1, 3]; b=f64[1, 2]; n=i64[]",
            "concatenate([alloc(a, n, 3), alloc(b, n, 2)], axis=1)",
        ),
        "concatenate([alloc(a, n, 3), alloc(b, n, 2)], axis=1)",
        "alloc(concatenate([a, b], axis=1), n, 5)",
    );
    check_rule(
        "local_join_of_alloc",
        graph(
            "a=i32[:]; b=i32[:]; n=i64[]",
            "concatenate([alloc(a, n, 2, 3), alloc(b, n, 4, 3)], axis=1)",
        ),
        "concatenate([alloc(a, n, 2, 3), alloc(b, n, 4, 3)], axis=1)",
        "alloc(concatenate([alloc(a[None, None, :], 1, 2, 3), alloc(b[None, None, :], 1, 4, 3)], axis=1), n, 6, 3)",
    );
    // The lifted sizes differ: the join checks that they agree.
    check_no_fire(
        "local_join_of_alloc",
        graph(
            "a=f64[1, 3]; b=f64[1, 2]; n=i64[]; m=i64[]",
            "concatenate([alloc(a, n, 3), alloc(b, m, 2)], axis=1)",
        ),
    );
    // Nothing broadcast outside the axis.
    check_no_fire(
        "local_join_of_alloc",
        graph(
            "a=f64[:, 3]; b=f64[:, 3]; n=i64[]",
            "concatenate([alloc(a, n, 3), alloc(b, n, 3)], axis=0)",
        ),
    );
}

/// Each PyTensor `shape_unsafe` rule's case: the mismatch stays an error.
#[test]
fn size_mismatches_stay_errors_under_fast_run() {
    // local_useless_alloc: x has 4 elements, not 3.
    keeps_the_size_check("x=f64[:]", "alloc(x, 3) * 2", &[f64s(&[3])], &[f64s(&[4])]);
    // local_merge_alloc: the inner Alloc wants one element.
    keeps_the_size_check(
        "x=f64[:]; n=i64[]",
        "alloc(alloc(x, 1), n, 3)",
        &[f64s(&[1]), i64s(2)],
        &[f64s(&[3]), i64s(2)],
    );
    // local_elemwise_alloc: the Alloc's size n disagrees with v.
    keeps_the_size_check(
        "X=f64[:, 4]; v=f64[:]; n=i64[]",
        "alloc(v, 2, n) + X",
        &[f64s(&[2, 4]), f64s(&[4]), i64s(4)],
        &[f64s(&[2, 4]), f64s(&[4]), i64s(5)],
    );
    // local_join_of_alloc: the two row counts differ.
    keeps_the_size_check(
        "a=f64[1, 3]; b=f64[1, 2]; n=i64[]; m=i64[]",
        "concatenate([alloc(a, n, 3), alloc(b, m, 2)], axis=1)",
        &[f64s(&[1, 3]), f64s(&[1, 2]), i64s(2), i64s(2)],
        &[f64s(&[1, 3]), f64s(&[1, 2]), i64s(2), i64s(3)],
    );
    // Every rule of the family at once (sink, unary, elemwise, useless).
    keeps_the_size_check(
        "x=f64[:]; X=f64[3, 4]; n=i64[]",
        "sum(exp(alloc(x, 1, n)), axis=0) + sum(alloc(x, 3, 4) * X, axis=0)",
        &[f64s(&[4]), f64s(&[3, 4]), i64s(4)],
        &[f64s(&[4]), f64s(&[3, 4]), i64s(5)],
    );
}
