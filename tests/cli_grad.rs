//! `kiln grad` (text and JSON), `kiln eval --grad`, `kiln bench --grad`
//! and their user errors.
mod cli_support;

use cli_support::*;
use ndarray::ArrayD;

#[test]
fn grad_prints_the_gradient_before_and_after_rewriting() {
    let text = stdout_of(kiln().args([
        "grad",
        "sum(exp(x) * y)",
        "--wrt",
        "x,y",
        "--var",
        "x=f64[:]",
        "--var",
        "y=f64[:]",
    ]));
    assert!(text.starts_with("gradient before rewriting ("), "{text}");
    assert!(text.contains("after fast_run ("), "{text}");
    let j: serde_json::Value = serde_json::from_str(
        stdout_of(kiln().args([
            "grad",
            "sum(log(sigmoid(x)))",
            "--wrt",
            "x",
            "--var",
            "x=f64[:]",
            "--json",
        ]))
        .trim(),
    )
    .unwrap();
    assert!(
        j["nodes_after"].as_u64().unwrap() < j["nodes_before"].as_u64().unwrap(),
        "{j}"
    );
    // The gradient of log(sigmoid(x)) becomes sigmoid(-x): no division by sigmoid(x).
    let after = j["after"].as_str().unwrap();
    assert!(
        after.contains("sigmoid") && !after.contains("true_div"),
        "{after}"
    );
}

#[test]
fn eval_writes_the_gradient() {
    let dir = tempfile::tempdir().unwrap();
    let x = save(
        dir.path(),
        "x",
        &ndarray::arr1(&[-800.0f64, 0.0, 800.0]).into_dyn(),
    );
    let out = dir.path().join("g.npy");
    kiln()
        .args(["eval", "sum(log(sigmoid(x)))", "--grad", "x", "--in"])
        .arg(input("x", &x))
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let g: ArrayD<f64> = load(&out);
    assert_eq!(g, ndarray::arr1(&[1.0, 0.5, 0.0]).into_dyn());
}

#[test]
fn bench_measures_gradients() {
    let text = stdout_of(kiln().args([
        "bench",
        "sum(tanh(x) ** 2)",
        "--grad",
        "x",
        "--var",
        "x=f64[1000]",
        "--modes",
        "none,fast_run",
        "--runs",
        "1",
        "-q",
    ]));
    assert!(
        text.contains("grad_x") && text.contains("fast_run"),
        "{text}"
    );
}

#[test]
fn user_errors() {
    let err = |args: &[&str]| {
        let out = kiln()
            .args(args)
            .assert()
            .code(2)
            .get_output()
            .stderr
            .clone();
        String::from_utf8(out).unwrap()
    };
    let e = err(&["grad", "exp(x)", "--wrt", "x", "--var", "x=f64[:]"]);
    assert!(
        e.contains("the cost must be a scalar (0-d), got f64(?,)"),
        "{e}"
    );
    let e = err(&["grad", "sum(x)", "--wrt", "z", "--var", "x=f64[:]"]);
    assert!(
        e.contains(
            "cannot differentiate with respect to 'z': it is not an input (the inputs are x)"
        ),
        "{e}"
    );
    let e = err(&[
        "grad", "sum(x)", "--wrt", "y", "--var", "x=f64[:]", "--var", "y=f64[:]",
    ]);
    assert!(
        e.contains("the cost does not depend on wrt[0] (y: f64(?,))"),
        "{e}"
    );
}
