//! The error-function rules of `src/rewrites/erf.rs` (stabilize):
//! before/after in pprint form (an equilibrium of the rule alone), fixed
//! point, value preservation on random and edge inputs (README rule 5),
//! and accuracy after FAST_RUN against references computed with 40-digit
//! arithmetic (mpmath), where the original formulas lose every digit.

mod common_rewrites;

use common_rewrites::*;
use kiln::*;

const XYZ: &str = "x=f64[:]; y=f64[:]; z=f64[:]";

fn g(src: &str) -> FunctionGraph {
    graph(XYZ, src)
}

#[test]
fn erf_complements() {
    let name = "local_erf_complement";
    check_rule(name, g("1 + erf(x)"), "(1.0 + erf(x))", "erfc((-x))");
    check_rule(name, g("erf(x) + 1"), "(erf(x) + 1.0)", "erfc((-x))");
    check_rule(name, g("1 - erf(x)"), "(1.0 - erf(x))", "erfc(x)");
    check_rule(name, g("erf(x) - 1"), "(erf(x) - 1.0)", "(-erfc(x))");
    check_rule(name, g("-1 + erf(x)"), "(-1.0 + erf(x))", "(-erfc(x))");
    check_rule(name, g("-1 - erf(x)"), "(-1.0 - erf(x))", "(-erfc((-x)))");
    check_rule(name, g("1 - erfc(x)"), "(1.0 - erfc(x))", "erf(x)");
    check_rule(name, g("erfc(x) - 1"), "(erfc(x) - 1.0)", "(-erf(x))");
    // f32 too (the value check's tolerance is f64's, so only the form here).
    let mut f = graph("f=f32[:]", "1 - erf(f)");
    assert_eq!(apply_rule(&mut f, name), 1);
    assert_eq!(show(&f), "erfc(f)");
    check_no_fire(name, g("2 - erf(x)"));
    check_no_fire(name, g("1 + erfc(x)"));
    check_no_fire(name, g("y - erf(x)"));
    // The argument is negated: an integer one would wrap.
    check_no_fire(name, graph("i=i8[:]", "1 + erf(i)"));
}

#[test]
fn log_erfc() {
    let name = "local_log_erfc";
    let fg = g("log(erfc(x))");
    let mut new = fg.clone();
    assert_eq!(apply_rule(&mut new, name), 1);
    let shown = show(&new);
    assert!(
        shown.starts_with("where((x < 26.0), log(erfc(x)), "),
        "{shown}"
    );
    let mut again = new.clone();
    assert_eq!(apply_rule(&mut again, name), 0, "a fixed point");
    assert_preserves(&fg, &new, "log(erfc(x))");
    check_no_fire(name, g("log(erf(x))"));
    check_no_fire(name, graph("i=i64[:]", "log(erfc(i))"));
}

/// FAST_RUN's value of `src` (one f64 vector `x`) at `xs`.
fn fast_run_at(src: &str, xs: &[f64]) -> Vec<f64> {
    let x = vector("x", DType::F64);
    let vars = std::collections::HashMap::from([("x".to_string(), x.clone())]);
    let out = kiln::tensor::build_expression(src, &vars).unwrap();
    let f = function(&[x], &[out]).compile().unwrap();
    let v = Value::F64(ndarray::arr1(xs).into_dyn());
    let got = f.call(&[(&v).into()]).unwrap();
    got[0].to_f64_array().iter().copied().collect()
}

/// Relative error of `got` against `want`.
fn rel(got: f64, want: f64) -> f64 {
    ((got - want) / want).abs()
}

#[test]
fn complements_are_accurate_in_the_tail() {
    // erfc(6) = 2.1519736712498916e-17; 1 - erf(6) rounds to 0.
    let got = fast_run_at("1 - erf(x)", &[6.0]);
    assert!(rel(got[0], 2.151_973_671_249_891_6e-17) < 1e-13, "{got:?}");
    // 1 + erf(-6) = erfc(6).
    let got = fast_run_at("1 + erf(x)", &[-6.0]);
    assert!(rel(got[0], 2.151_973_671_249_891_6e-17) < 1e-13, "{got:?}");
}

#[test]
fn log_erfc_is_finite_where_erfc_underflows() {
    // log(erfc(x)) with 40-digit arithmetic (mpmath).
    let cases = [
        (5.0, -27.200_889_545_537_434),
        (10.0, -102.879_889_024_844_89),
        (26.0, -679.831_199_763_194_2),
        (26.5, -706.100_220_410_148_1),
        (30.0, -903.974_117_110_643_9),
        (100.0, -10_005.177_585_122_664),
        (1e5, -10_000_000_012.085_29),
    ];
    let xs: Vec<f64> = cases.iter().map(|c| c.0).collect();
    let got = fast_run_at("log(erfc(x))", &xs);
    for ((x, want), got) in cases.iter().zip(&got) {
        assert!(
            rel(*got, *want) < 1e-14,
            "log(erfc({x})) = {got}, want {want}"
        );
    }
    let edge = fast_run_at(
        "log(erfc(x))",
        &[f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -30.0],
    );
    assert_eq!(edge[0], f64::NEG_INFINITY);
    assert_eq!(edge[1], std::f64::consts::LN_2);
    assert!(edge[2].is_nan());
    assert_eq!(edge[3], std::f64::consts::LN_2);
}

#[test]
fn grad_log_erfc_neg() {
    let name = "local_grad_log_erfc_neg";
    // The forms a gradient of log(erfc(x)) takes: with and without a factor.
    for (src, before) in [
        ("exp(-sqr(x)) / erfc(x)", "(exp((-sqr(x))) / erfc(x))"),
        (
            "(y * exp(-(x * x))) / erfc(x)",
            "((y * exp((-(x * x)))) / erfc(x))",
        ),
        (
            "(exp(-1 * x ** 2) * y) / erfc(x)",
            "((exp((-1.0 * (x ** 2.0))) * y) / erfc(x))",
        ),
    ] {
        let fg = g(src);
        assert_eq!(show(&fg), before);
        let mut new = fg.clone();
        assert_eq!(apply_rule(&mut new, name), 1, "{src}");
        let shown = show(&new);
        assert!(shown.contains("where((x < 26.0), ("), "{shown}");
        let mut again = new.clone();
        assert_eq!(apply_rule(&mut again, name), 0, "a fixed point: {src}");
        assert_preserves(&fg, &new, src);
    }
    check_no_fire(name, g("exp(-sqr(y)) / erfc(x)"));
    check_no_fire(name, g("exp(sqr(x)) / erfc(x)"));
    check_no_fire(name, g("exp(-sqr(x)) / erf(x)"));
    check_no_fire(name, g("(y + exp(-sqr(x))) / erfc(x)"));
    check_no_fire(name, graph("i=i64[:]", "exp(-sqr(i)) / erfc(i)"));
}

#[test]
fn grad_of_log_erfc_is_finite_where_erfc_underflows() {
    // d/dx log(erfc(x)) = -2 exp(-x²) / (√π erfc(x)), 40-digit arithmetic (mpmath).
    let cases = [
        (-3.0, -6.962_729_502_414_981e-5),
        (0.5, -1.832_705_641_298_698_4),
        (3.0, -6.303_753_689_003_234),
        (10.0, -20.099_024_116_734_604),
        (25.9, -51.838_552_694_603_026),
        (26.1, -52.238_258_137_249_99),
        (27.0, -54.036_986_405_124_36),
        (30.0, -60.033_296_398_756_23),
        (100.0, -200.009_999_000_249_9),
        (1e5, -200_000.000_01),
    ];
    let x = vector("x", DType::F64);
    let cost = x.erfc().log().sum(&[0]).unwrap();
    let dx = kiln::gradient::grad(&cost, std::slice::from_ref(&x))
        .unwrap()
        .remove(0);
    let f = function(std::slice::from_ref(&x), &[dx]).compile().unwrap();
    let xs: Vec<f64> = cases.iter().map(|c| c.0).collect();
    let v = Value::F64(ndarray::arr1(&xs).into_dyn());
    let got = f.call(&[(&v).into()]).unwrap().remove(0).to_f64_array();
    for ((x, want), got) in cases.iter().zip(got.iter()) {
        assert!(
            rel(*got, *want) < 1e-13,
            "d/dx log(erfc({x})) = {got}, want {want}"
        );
    }
    // The original gradient graph is 0 / 0 there (what the rule fixes).
    let plain = function(
        std::slice::from_ref(&x),
        &[kiln::gradient::grad(&cost, std::slice::from_ref(&x))
            .unwrap()
            .remove(0)],
    )
    .mode(kiln::rewriting::Mode::none())
    .compile()
    .unwrap();
    let v30 = Value::F64(ndarray::arr1(&[30.0]).into_dyn());
    let orig = plain
        .call(&[(&v30).into()])
        .unwrap()
        .remove(0)
        .to_f64_array();
    assert!(orig[0].is_nan(), "{orig:?}");
}
