//! The identity rules of `src/rewrites/identities.rs` (canonicalize): for
//! each rule a before/after test in pprint form (an equilibrium of that rule
//! alone), a fixed-point check and a value check on random and edge inputs
//! (README rule 5), and the inputs each rule must leave alone.

mod common_rewrites;

use common_rewrites::*;
use kiln::*;

const XYZ: &str = "x=f64[:]; y=f64[:]; z=f64[:]";

fn g(src: &str) -> FunctionGraph {
    graph(XYZ, src)
}

/// Where the original is a NaN of cancellation (`0 / 0`, `0 * inf`,
/// `inf / inf`), rule 5 lets the rewrite give the simplified value.
fn nan_of_cancellation(_: &[f64], before: f64, _after: f64) -> bool {
    before.is_nan()
}

/// Comparisons of a value with itself (`local_useless_elemwise`): strict
/// ones are false for every dtype, NaN included; the others fold only where
/// the value cannot be NaN.
#[test]
fn comparison_with_itself() {
    let name = "local_useless_elemwise";
    check_rule(name, g("x < x"), "(x < x)", "second(x, False)");
    check_rule(name, g("x > x"), "(x > x)", "second(x, False)");
    let ints = "i=i64[:]; u=u8[:]";
    check_rule(name, graph(ints, "i <= i"), "(i <= i)", "second(i, True)");
    check_rule(name, graph(ints, "u >= u"), "(u >= u)", "second(u, True)");
    check_rule(name, graph(ints, "i != i"), "(i != i)", "second(i, False)");
    // NaN <= NaN, NaN == NaN are false and NaN != NaN true: floats keep them.
    check_no_fire(name, g("x <= x"));
    check_no_fire(name, g("x >= x"));
    check_no_fire(name, g("x == x"));
    check_no_fire(name, g("x != x"));
    check_no_fire(name, g("x < y"));
}

#[test]
fn useless_comparison_of_a_size() {
    let x = vector("x", DType::F64);
    let size = x.shape_i(0).unwrap();
    let zero = Tensor::scalar_constant(DType::I64, 0.0);
    let name = "local_useless_elemwise_comparison";
    let ge = graph_of(
        std::slice::from_ref(&x),
        &elemwise(ScalarOp::Ge, &[&size, &zero]).unwrap(),
    );
    let mut new = ge.clone();
    assert_eq!(apply_rule(&mut new, name), 1);
    assert_eq!(show(&new), "True");
    let lt = graph_of(
        std::slice::from_ref(&x),
        &elemwise(ScalarOp::Gt, &[&zero, &size]).unwrap(),
    );
    let mut new = lt.clone();
    assert_eq!(apply_rule(&mut new, name), 1);
    assert_eq!(show(&new), "False");
    let gt = graph_of(&[x], &elemwise(ScalarOp::Gt, &[&size, &zero]).unwrap());
    check_no_fire(name, gt);
}

#[test]
fn div_abs_to_sign() {
    let name = "local_div_abs_to_sign";
    check_rule_allowing(
        name,
        g("x / abs(x)"),
        "(x / abs(x))",
        "sign(x)",
        &nan_of_cancellation,
    );
    check_rule_allowing(
        name,
        g("abs(x) / x"),
        "(abs(x) / x)",
        "sign(x)",
        &nan_of_cancellation,
    );
    check_rule_allowing(
        name,
        g("(y * x) / abs(x)"),
        "((y * x) / abs(x))",
        "(y * sign(x))",
        &nan_of_cancellation,
    );
    check_no_fire(name, g("x / abs(y)"));
    check_no_fire(name, graph("i=i64[:]", "i / abs(i)"));
}

#[test]
fn zero_div() {
    let name = "local_zero_div";
    check_rule_allowing(
        name,
        g("0 / x"),
        "(0.0 / x)",
        "second(x, 0.0)",
        &nan_of_cancellation,
    );
    check_no_fire(name, g("1 / x"));
    check_no_fire(name, graph("i=i64[:]", "0 // i"));
}

#[test]
fn pow_one_base() {
    let name = "local_pow_one_base";
    check_rule(name, g("1 ** x"), "(1.0 ** x)", "second(x, 1.0)");
    check_rule(
        name,
        graph("i=i64[:]", "1 ** i"),
        "(1 ** i)",
        "second(i, 1)",
    );
    check_no_fire(name, g("2 ** x"));
}

#[test]
fn mul_switch_sink() {
    let name = "local_mul_switch_sink";
    check_rule_allowing(
        name,
        g("where(x > 0, 0, y) * z"),
        "(where((x > 0.0), 0.0, y) * z)",
        "where((x > 0.0), 0.0, (y * z))",
        &nan_of_cancellation,
    );
    check_rule_allowing(
        name,
        g("z * where(x > 0, y, 0)"),
        "(z * where((x > 0.0), y, 0.0))",
        "where((x > 0.0), (z * y), 0.0)",
        &nan_of_cancellation,
    );
    check_no_fire(name, g("where(x > 0, 1, y) * z"));
}

/// The point of the sinks: a product with an infinite factor stays 0 where
/// the switch selects the zero (the gradient of a guarded `log`); without
/// them `0 * (1 / 0)` is NaN.
#[test]
fn switch_sinks_keep_the_guard_finite() {
    let mut fg = graph("x=f64[3]", "where(x > 0, 1, 0) * (1 / x)");
    apply_dbs(&mut fg, &["canonicalize"]);
    let x = Value::F64(ndarray::arr1(&[0.0, 2.0, -4.0]).into_dyn());
    let out = kiln::eval::evaluate(&fg, &[x]).unwrap();
    let got: Vec<f64> = out[0].to_f64_array().iter().copied().collect();
    assert_eq!(got, [0.0, 0.5, 0.0]);
}

#[test]
fn div_switch_sink() {
    let name = "local_div_switch_sink";
    check_rule_allowing(
        name,
        g("where(x > 0, 0, y) / z"),
        "(where((x > 0.0), 0.0, y) / z)",
        "where((x > 0.0), 0.0, (y / z))",
        &nan_of_cancellation,
    );
    check_no_fire(name, g("z / where(x > 0, 0, y)"));
}

#[test]
fn max_to_min() {
    let name = "local_max_to_min";
    check_rule(name, g("-max(-x)"), "(-max((-x)))", "min(x)");
    check_rule(name, g("-min(-x)"), "(-min((-x)))", "max(x)");
    let m = graph("X=f64[:, :]", "-max(-X, axis=1)");
    check_rule(name, m, "(-max((-X), axis=1))", "min(X, axis=1)");
    // -i64::MIN wraps: max(-[MIN, 0]) is 0, so -max(-x) is 0, not min(x).
    check_no_fire(name, graph("i=i64[:]", "-max(-i)"));
    check_no_fire(name, g("-max(x)"));
}

#[test]
fn log_sqrt() {
    let name = "local_log_sqrt";
    check_rule(name, g("log(sqrt(x))"), "log(sqrt(x))", "(0.5 * log(x))");
    // f32 too (the value check's tolerance is f64's, so only the form here).
    let mut f = graph("f=f32[:]", "log(sqrt(f))");
    assert_eq!(apply_rule(&mut f, name), 1);
    assert_eq!(show(&f), "(0.5 * log(f))");
    check_no_fire(name, g("log(sqr(x))"));
}

#[test]
fn lift_transpose_through_dot() {
    let name = "local_lift_transpose_through_dot";
    let m = "A=f64[:, :]; B=f64[:, :]";
    check_rule(name, graph(m, "dot(A, B).T"), "(A @ B).T", "(B.T @ A.T)");
    check_rule(name, graph(m, "dot(A.T, B).T"), "(A.T @ B).T", "(B.T @ A)");
    check_no_fire(name, graph("A=f64[:, :]; v=f64[:]", "dot(A, v)"));
}

#[test]
fn dot_with_one_term_is_a_product() {
    let name = "local_dot_to_mul";
    check_rule(
        name,
        graph("A=f64[:, 1]; B=f64[1, :]", "dot(A, B)"),
        "(A @ B)",
        "(A * B)",
    );
    check_rule(
        name,
        graph("a=f64[1]; B=f64[1, :]", "dot(a, B)"),
        "(a @ B)",
        "(a * B[0, :])",
    );
    check_rule(
        name,
        graph("A=f64[:, 1]; b=f64[1]", "dot(A, b)"),
        "(A @ b)",
        "(A[:, 0] * b)",
    );
    check_rule(
        name,
        graph("a=f64[1]; b=f64[1]", "dot(a, b)"),
        "(a @ b)",
        "(a[0] * b[0])",
    );
    // The inner size must be static 1 on both sides (else the dot's
    // run-time check of it would be lost).
    check_no_fire(name, graph("A=f64[:, 1]; B=f64[:, :]", "dot(A, B)"));
    check_no_fire(name, graph("A=f64[:, :]; B=f64[:, :]", "dot(A, B)"));
}

/// `BatchedDot` with no batch dimension of a size other than a static 1
/// becomes `Dot` of the operands' matrices (the size-1 dimensions dropped,
/// then put back on the product); a real or unknown batch is left alone.
#[test]
fn batched_dot_to_dot() {
    let name = "local_batched_dot_to_dot";
    let one = "A=f64[1, :, :]; B=f64[1, :, :]";
    check_rule(
        name,
        graph(one, "A @ B"),
        "(A @ B)",
        "(A[0, :, :] @ B[0, :, :])[None, :, :]",
    );
    // One operand without batch dimensions, the other with two of size 1.
    let mixed = "A=f64[1, 1, :, 3]; W=f64[3, :]";
    check_rule(
        name,
        graph(mixed, "A @ W"),
        "(A @ W)",
        "(A[0, 0, :, :] @ W)[None, None, :, :]",
    );
    // An operand already expanded from a matrix: the DimShuffles compose
    // away, leaving the matrix itself.
    let m = matrix("M", DType::F64);
    let n = matrix("N", DType::F64);
    let bd = Tensor::apply(
        Op::BatchedDot,
        &[&m.expand_dims(0).unwrap(), &n.t().expand_dims(0).unwrap()],
    )
    .unwrap();
    check_rule(
        name,
        graph_of(&[m, n], &bd),
        "(M[None, :, :] @ N.T[None, :, :])",
        "(M @ N.T)[None, :, :]",
    );
    // Two 2-d operands built directly: no batch at all.
    let (p, q) = (matrix("P", DType::I32), matrix("Q", DType::Bool));
    let plain = Tensor::apply(Op::BatchedDot, &[&p, &q]).unwrap();
    let after = check_rule(name, graph_of(&[p, q], &plain), "(P @ Q)", "(P @ Q)");
    assert!(after.node_ids().all(|k| after.node(k).op != Op::BatchedDot));
    // A batch of unknown or known size larger than 1 is a real stack.
    check_no_fire(name, graph("A=f64[:, :, :]; B=f64[1, :, :]", "A @ B"));
    check_no_fire(name, graph("A=f64[2, :, :]; B=f64[:, :]", "A @ B"));
    check_no_fire(name, graph("A=f64[1, :, :]; B=f64[:, :, :]", "A @ B"));
}
