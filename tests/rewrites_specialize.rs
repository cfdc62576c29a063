//! The specialize rules: before/after in pprint form (an equilibrium of the
//! rule alone), fixed point, and value preservation on random and edge
//! inputs (README rule 5).

mod common_rewrites;

use common_rewrites::*;
use kiln::*;

const XYZ: &str = "x=f64[:]; y=f64[:]; z=f64[:]";

fn g(src: &str) -> FunctionGraph {
    graph(XYZ, src)
}

/// C99 `pow(-inf, 0.5)` is `+inf` (and `pow(-inf, -0.5)` is 0) where
/// `sqrt(-inf)` is NaN: the documented exception of `x ** ±0.5 -> sqrt`
/// (PyTensor's rule too; the square root of -inf is undefined), and of the
/// half-integers 1.5 and 2.5 built on it.
fn pow_half_at_minus_inf(ins: &[f64], _before: f64, after: f64) -> bool {
    ins[0] == f64::NEG_INFINITY && after.is_nan()
}

#[test]
fn pow_specialize_each_exponent() {
    for (src, before, after) in [
        ("x ** 2", "(x ** 2.0)", "sqr(x)"),
        ("x ** 1", "(x ** 1.0)", "x"),
        ("x ** 0", "(x ** 0.0)", "second(x, 1.0)"),
        ("x ** -1", "(x ** -1.0)", "reciprocal(x)"),
        ("x ** -2", "(x ** -2.0)", "reciprocal(sqr(x))"),
    ] {
        check_rule("local_pow_specialize", g(src), before, after);
    }
    check_rule_allowing(
        "local_pow_specialize",
        g("x ** 0.5"),
        "(x ** 0.5)",
        "abs(sqrt(x))",
        &pow_half_at_minus_inf,
    );
    check_rule_allowing(
        "local_pow_specialize",
        g("x ** -0.5"),
        "(x ** -0.5)",
        "reciprocal(abs(sqrt(x)))",
        &pow_half_at_minus_inf,
    );
    for (src, before, after) in [
        ("x ** 1.5", "(x ** 1.5)", "(abs(x) * abs(sqrt(x)))"),
        ("x ** 2.5", "(x ** 2.5)", "(sqr(x) * abs(sqrt(x)))"),
    ] {
        check_rule_allowing(
            "local_pow_specialize",
            g(src),
            before,
            after,
            &pow_half_at_minus_inf,
        );
    }
    check_no_fire("local_pow_specialize", g("x ** 3.5"));
    check_no_fire("local_pow_specialize", g("x ** 3"));
    // Integer reciprocals are not specialised.
    check_no_fire("local_pow_specialize", graph("i=i64[:]", "i ** -1"));
}

#[test]
fn pow_to_nested_squaring() {
    check_rule(
        "local_pow_to_nested_squaring",
        g("x ** 3"),
        "(x ** 3.0)",
        "(x * sqr(x))",
    );
    check_rule(
        "local_pow_to_nested_squaring",
        g("x ** -5"),
        "(x ** -5.0)",
        "reciprocal((x * sqr(sqr(x))))",
    );
    check_rule(
        "local_pow_to_nested_squaring",
        g("x ** 10"),
        "(x ** 10.0)",
        "(sqr(x) * sqr(sqr(sqr(x))))",
    );
    check_no_fire("local_pow_to_nested_squaring", g("x ** 2.5"));
    check_no_fire("local_pow_to_nested_squaring", g("x ** 1000"));
}

#[test]
fn mul_specialize() {
    check_rule("local_mul_specialize", g("1.0 * x"), "(1.0 * x)", "x");
    check_rule("local_mul_specialize", g("-1.0 * x"), "(-1.0 * x)", "(-x)");
    check_rule(
        "local_mul_specialize",
        g("0.0 * x"),
        "(0.0 * x)",
        "second(x, 0.0)",
    );
    check_no_fire("local_mul_specialize", g("2.0 * x"));
    // Negated factors: their signs cancel or a constant takes them.
    check_rule(
        "local_mul_specialize",
        g("2.0 * -x"),
        "(2.0 * (-x))",
        "(-2.0 * x)",
    );
    check_rule(
        "local_mul_specialize",
        g("-x * -y"),
        "((-x) * (-y))",
        "(x * y)",
    );
    check_rule("local_mul_specialize", g("-1.0 * -x"), "(-1.0 * (-x))", "x");
    // An odd sign with no constant to take it stays where it is.
    check_no_fire("local_mul_specialize", g("-x * y"));
    // An integer negation wraps at the minimum: its sign never moves.
    check_no_fire("local_mul_specialize", graph("i=i64[:]", "-i * 2.5"));
    check_no_fire("local_mul_specialize", graph("i=i64[:]", "-i * 3"));
}

#[test]
fn add_remove_zeros() {
    check_rule("local_add_remove_zeros", g("x + 0"), "(x + 0.0)", "x");
}

#[test]
fn div_to_reciprocal() {
    check_rule(
        "local_div_to_reciprocal",
        g("1 / x"),
        "(1.0 / x)",
        "reciprocal(x)",
    );
}

#[test]
fn mul_to_sqr() {
    check_rule("local_mul_to_sqr", g("x * x"), "(x * x)", "sqr(x)");
    check_no_fire("local_mul_to_sqr", g("x * y"));
}

#[test]
fn add_neg_to_sub() {
    check_rule(
        "local_add_neg_to_sub",
        g("x + (-y)"),
        "(x + (-y))",
        "(x - y)",
    );
    check_rule(
        "local_add_neg_to_sub",
        g("x + -2.0"),
        "(x + -2.0)",
        "(x - 2.0)",
    );
    // The canonical form of x - 1 is add(-1, x): specialize turns it back.
    check_rule(
        "local_add_neg_to_sub",
        g("-1.0 + x"),
        "(-1.0 + x)",
        "(x - 1.0)",
    );
}

#[test]
fn neg_div_neg() {
    check_rule(
        "local_neg_div_neg",
        g("-((-x) / y)"),
        "(-((-x) / y))",
        "(x / y)",
    );
    check_rule(
        "local_neg_div_neg",
        g("-(x / (-y))"),
        "(-(x / (-y)))",
        "(x / y)",
    );
}

#[test]
fn neg_sub() {
    check_rule("local_neg_sub", g("-(x - y)"), "(-(x - y))", "(y - x)");
    check_rule(
        "local_neg_sub",
        g("-(-1.5 - y)"),
        "(-(-1.5 - y))",
        "(1.5 + y)",
    );
    check_no_fire("local_neg_sub", g("-(x + y)"));
}

#[test]
fn abs_merge() {
    check_rule(
        "local_abs_merge",
        g("abs(x) * abs(y)"),
        "(abs(x) * abs(y))",
        "abs((x * y))",
    );
    check_rule(
        "local_abs_merge",
        g("abs(x) / abs(y)"),
        "(abs(x) / abs(y))",
        "abs((x / y))",
    );
}

#[test]
fn elemwise_sub_zeros() {
    check_rule(
        "local_elemwise_sub_zeros",
        g("x - x"),
        "(x - x)",
        "second(x, 0.0)",
    );
}

#[test]
fn mul_exp_to_exp_add() {
    check_rule(
        "local_mul_exp_to_exp_add",
        g("exp(x) * exp(y) * z"),
        "((exp(x) * exp(y)) * z)",
        "(exp((x + y)) * z)",
    );
    check_rule(
        "local_mul_exp_to_exp_add",
        g("exp(x) * exp(y)"),
        "(exp(x) * exp(y))",
        "exp((x + y))",
    );
}

#[test]
fn mul_pow_to_pow_add() {
    check_rule(
        "local_mul_pow_to_pow_add",
        g("(x ** 2) * (x ** 3) * y"),
        "(((x ** 2.0) * (x ** 3.0)) * y)",
        "((x ** (2.0 + 3.0)) * y)",
    );
    // Variable exponents may round when added (3 + 1e100 is even): left alone.
    check_no_fire("local_mul_pow_to_pow_add", g("(x ** y) * (x ** z)"));
}

#[test]
fn div_exp_to_mul_exp() {
    check_rule(
        "local_div_exp_to_mul_exp",
        g("x / exp(y)"),
        "(x / exp(y))",
        "(x * exp((-y)))",
    );
}

#[test]
fn sum_prod_of_mul_or_div() {
    check_rule(
        "local_sum_prod_of_mul_or_div",
        graph("X=f64[:, :]; s=f64[]", "sum(X * s)"),
        "sum((X * s[None, None]))",
        "(sum(X) * s)",
    );
    check_rule(
        "local_sum_prod_of_mul_or_div",
        graph("X=f64[:, :]; s=f64[:]", "sum(X / s, axis=0)"),
        "sum((X / s[None, :]), axis=0)",
        "(sum(X, axis=0) / s)",
    );
    // The factor varies along the reduced axis: it stays inside.
    check_no_fire(
        "local_sum_prod_of_mul_or_div",
        graph("X=f64[:, :]; s=f64[:]", "sum(X * s, axis=1)"),
    );
    // A divisor whose reciprocal is infinite stays inside: outside it makes
    // the sum of an empty X NaN instead of 0.
    check_no_fire(
        "local_sum_prod_of_mul_or_div",
        graph("X=f64[:, :]", "sum(X / 0.0)"),
    );
}

#[test]
fn sum_of_neg_to_neg_of_sum() {
    check_rule(
        "local_sum_of_neg_to_neg_of_sum",
        graph("X=f64[:, :]", "sum(-X, axis=1)"),
        "sum((-X), axis=1)",
        "(-sum(X, axis=1))",
    );
}

#[test]
fn fast_run_specialises_the_poly_workload() {
    let fg = graph("x=f64[:]", "2*x**3 - 3*x**2 + x - 1");
    let mut new = fg.clone();
    fast_run_nofusion(&mut new);
    assert_preserves(&fg, &new, "poly");
    let text = show(&new);
    assert!(!text.contains("**"), "no pow left: {text}");
    assert!(text.contains("sqr(x)"), "{text}");
}

#[test]
fn softplus_pair() {
    let name = "local_softplus_pair";
    check_rule(
        name,
        g("softplus(x) * softplus(-x)"),
        "(softplus(x) * softplus((-x)))",
        "((maximum(x, 0.0) + softplus((-abs(x)))) * (maximum((-x), 0.0) + softplus((-abs(x)))))",
    );
    check_no_fire(name, g("softplus(x) * softplus(-y)"));
    check_no_fire(name, g("softplus(x)"));
}

/// A weighted pair of log-sigmoids that is not a cross-entropy (the
/// weights are not `t` and `1 - t`) under FAST_RUN: one `softplus` left,
/// the shared `softplus(-|z|)` (one exponential and one log1p per element),
/// and the values of the pair kept where `softplus(x) - x` would cancel
/// (`softplus(-40) = 4.25e-18`). The cross-entropy itself becomes one
/// `sigmoid_binary_crossentropy` (stabilize).
#[test]
fn softplus_pair_in_the_cross_entropy() {
    let decl = "t=f64[:]; z=f64[:]";
    let src = "-(t*log(sigmoid(z)) + (1-t)*log(1 - sigmoid(z)))";
    let mut xent = graph(decl, src);
    kiln::rewrites::rewrite_graph(&mut xent, &kiln::rewriting::Mode::fast_run()).unwrap();
    assert_eq!(show(&xent), "sigmoid_binary_crossentropy(z, t)");
    let src = "-(t*log(sigmoid(z)) + (2-t)*log(1 - sigmoid(z)))";
    let mut fg = graph(decl, src);
    kiln::rewrites::rewrite_graph(&mut fg, &kiln::rewriting::Mode::fast_run()).unwrap();
    let shown = show(&fg);
    assert_eq!(shown.matches("softplus((-abs(z)))").count(), 2, "{shown}");
    assert_eq!(shown.matches("softplus").count(), 2, "{shown}");
    let mut unfused = graph(decl, src);
    fast_run_nofusion(&mut unfused);
    let softplus_nodes = unfused
        .node_ids()
        .filter(|&n| {
            unfused
                .node(n)
                .op
                .is_elemwise(kiln::ops::ScalarOp::Softplus)
        })
        .count();
    assert_eq!(softplus_nodes, 1, "one shared tail: {}", show(&unfused));
    // Weights 2 and 0: twice the softplus of the term that survives.
    let t = Value::F64(ndarray::arr1(&[2.0, 0.0, 2.0, 0.0, 2.0]).into_dyn());
    let z = Value::F64(ndarray::arr1(&[40.0, -40.0, -800.0, 800.0, 0.5]).into_dyn());
    let want = [
        2.0 * 4.248_354_255_291_589e-18,
        2.0 * 4.248_354_255_291_589e-18,
        1600.0,
        1600.0,
        2.0 * 0.474_076_984_180_106_6,
    ];
    // (The original graph is NaN at ±40 and ±800: `0 * log(0)`.)
    let out = kiln::eval::evaluate(&fg, &[t, z]).unwrap();
    for (got, want) in out[0].to_f64_array().iter().zip(want) {
        assert!(((got - want) / want).abs() < 1e-14, "{got} vs {want}");
    }
}

/// `local_sum_mul_to_dot` (BlasOpt): the hand-written matrix product, in
/// each arrangement of its axes, becomes a `dot` of transposes where the
/// output's axes ask, with the values of the sum; broadcasting along the
/// summed axis and integer dtypes are left alone.
#[test]
fn sum_of_a_broadcast_product_is_a_dot() {
    let m = "X=f64[:, :]; Y=f64[:, :]";
    for (src, after) in [
        ("sum(X[:, :, None] * Y[None, :, :], axis=1)", "(X @ Y)"),
        ("sum(Y[None, :, :] * X[:, :, None], axis=1)", "(X @ Y)"),
        ("sum(X[:, None, :] * Y[None, :, :], axis=2)", "(X @ Y.T)"),
        ("sum(X[:, :, None] * Y[:, None, :], axis=0)", "(X.T @ Y)"),
        ("sum(X[None, :, :] * Y[:, None, :], axis=2)", "(Y @ X.T)"),
        ("sum(X[:, None, :] * Y[:, :, None], axis=0)", "(Y.T @ X)"),
    ] {
        let fg = graph(m, src);
        let mut new = fg.clone();
        let q = kiln::rewriting::RewriteDatabaseQuery::new(&["blas"]);
        let p = kiln::rewrites::rewrite_graph(&mut new, &q).unwrap();
        assert!(
            p.log().iter().any(|e| e.rewriter == "local_sum_mul_to_dot"),
            "{src}"
        );
        assert_eq!(show(&new), after, "{src}");
        // Values on random matrices (edge values would compare summation
        // orders of cancelling 1e100-sized terms, which README rule 5 frees).
        let (p, q, r) = (3usize, 4usize, 5usize);
        let shapes = [[p, q], [p, r], [q, r], [r, q], [q, p]];
        for (sx, sy) in shapes
            .iter()
            .flat_map(|a| shapes.iter().map(move |b| (a, b)))
        {
            let val = |s: &[usize; 2], k: f64| {
                let a =
                    ndarray::Array::from_shape_fn(*s, |(i, j)| ((i * 7 + j * 3) as f64 * k).sin());
                Value::F64(a.into_dyn())
            };
            let ins = [val(sx, 0.37), val(sy, 0.91)];
            let Ok(want) = kiln::eval::evaluate(&fg, &ins) else {
                continue;
            };
            let got = kiln::eval::evaluate(&new, &ins).unwrap();
            assert!(
                got[0].allclose(&want[0], 1e-12, 1e-12),
                "{src} at {sx:?} {sy:?}"
            );
        }
    }
    for (decl, src) in [
        (m, "sum(X[:, :, None] * Y[None, :, :], axis=0)"),
        (
            "X=f64[:, 1]; Y=f64[:, :]",
            "sum(X[:, :, None] * Y[None, :, :], axis=1)",
        ),
        (
            "X=i64[:, :]; Y=i64[:, :]",
            "sum(X[:, :, None] * Y[None, :, :], axis=1)",
        ),
    ] {
        let mut fg = graph(decl, src);
        let q = kiln::rewriting::RewriteDatabaseQuery::new(&["blas"]);
        let p = kiln::rewrites::rewrite_graph(&mut fg, &q).unwrap();
        assert!(
            !p.log().iter().any(|e| e.rewriter == "local_sum_mul_to_dot"),
            "{src}"
        );
    }
}
