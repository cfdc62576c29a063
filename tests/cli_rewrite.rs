//! `kiln rewrite` (formats, log, profile, queries, JSON) and `kiln dot`.
mod cli_support;

use cli_support::*;

#[test]
fn before_and_after_with_the_log() {
    let text = stdout_of(kiln().args(["rewrite", "log(1 + exp(x))", "--var", "x=f64[:]", "--log"]));
    assert!(
        text.starts_with("before (3 nodes):\nlog((1.0 + exp(x)))\nafter (1 nodes):\nsoftplus(x)\n"),
        "{text}"
    );
    assert!(text.contains("rewrites applied (2):"), "{text}");
    assert!(text.contains("local_log1p - log ["), "{text}");
}

#[test]
fn formats_and_profile() {
    let text = stdout_of(kiln().args([
        "rewrite",
        "exp(x) * y",
        "--var",
        "x=f64[:]",
        "--var",
        "y=f64[]",
        "--format",
        "dprint",
    ]));
    assert!(text.contains("[id A]"), "{text}");
    let text = stdout_of(kiln().args([
        "rewrite",
        "exp(x)",
        "--var",
        "x=f64[:]",
        "--format",
        "dot",
        "--profile",
    ]));
    assert_eq!(text.matches("digraph").count(), 2, "{text}");
    assert!(text.contains("Rewriter Profile"), "{text}");
}

fn json(args: &[&str]) -> serde_json::Value {
    let text = stdout_of(kiln().arg("rewrite").args(args).arg("--json"));
    assert_eq!(
        text.lines().count(),
        1,
        "one JSON object on one line: {text}"
    );
    serde_json::from_str(&text).unwrap()
}

#[test]
fn json_structure() {
    let j = json(&["log(1 + exp(x))", "--var", "x=f64[:]"]);
    let obj = j.as_object().unwrap();
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "after",
            "before",
            "nodes_after",
            "nodes_before",
            "ops_after"
        ]
    );
    assert_eq!(j["before"], "log((1.0 + exp(x)))");
    assert_eq!(j["after"], "softplus(x)");
    assert_eq!(j["nodes_before"], 3);
    assert_eq!(j["nodes_after"], 1);
    assert_eq!(j["ops_after"], serde_json::json!({"softplus": 1}));
}

#[test]
fn queries_select_the_rewrites() {
    // canonicalize alone does not stabilise log(1 + exp(x)) (as in PyTensor).
    let j = json(&[
        "log(1 + exp(x))",
        "--var",
        "x=f64[:]",
        "--include",
        "canonicalize",
    ]);
    assert_eq!(j["nodes_after"], 3, "{j}");
    // mode none: nothing changes; including stabilize brings the rewrite back.
    let j = json(&["log(1 + exp(x))", "--var", "x=f64[:]", "--mode", "none"]);
    assert_eq!(j["after"], j["before"]);
    let j = json(&[
        "log(1 + exp(x))",
        "--var",
        "x=f64[:]",
        "--mode",
        "fast_compile",
        "--include",
        "stabilize",
    ]);
    assert_eq!(j["after"], "softplus(x)");
    // Excluding fusion (flag or mode suffix) keeps separate element-wise nodes.
    let poly = "2*x**3 - 3*x**2 + x - 1";
    let fused = json(&[poly, "--var", "x=f64[:]"]);
    assert_eq!(fused["nodes_after"], 1, "{fused}");
    let a = json(&[poly, "--var", "x=f64[:]", "--exclude", "fusion"]);
    let b = json(&[poly, "--var", "x=f64[:]", "--mode", "fast_run-fusion"]);
    assert!(a["nodes_after"].as_u64().unwrap() > 1, "{a}");
    assert_eq!(a, b);
}

#[test]
fn dot_before_and_after() {
    let before =
        stdout_of(kiln().args(["dot", "log(1 + exp(x))", "--var", "x=f64[:]", "--before"]));
    assert!(before.starts_with("digraph"), "{before}");
    assert!(before.contains("exp"), "{before}");
    let after = stdout_of(kiln().args(["dot", "log(1 + exp(x))", "--var", "x=f64[:]"]));
    assert!(
        after.contains("softplus") && !after.contains("exp"),
        "{after}"
    );
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("g.dot");
    kiln()
        .args(["dot", "x + 1", "--var", "x=i32[3]", "-o"])
        .arg(&p)
        .assert()
        .success()
        .stdout("");
    assert!(std::fs::read_to_string(&p).unwrap().starts_with("digraph"));
}

#[test]
fn the_stencil_is_one_fused_node_over_three_views() {
    let text =
        stdout_of(kiln().args(["rewrite", "x[2:] - 2*x[1:-1] + x[:-2]", "--var", "x=f64[:]"]));
    assert!(
        text.starts_with(
            "before (6 nodes):\n((x[2:] - (2.0 * x[1:-1])) + x[:-2])\nafter (4 nodes):\n"
        ),
        "{text}"
    );
    let after = text.split("after (4 nodes):\n").nth(1).unwrap_or_default();
    // One Composite reading the three Subtensor views of x, printed inline
    // in the expression language (so that the text re-parses).
    assert_eq!(after.lines().count(), 1, "{text}");
    assert!(!after.contains("Composite"), "{text}");
    for view in ["x[2:]", "x[1:-1]", "x[:-2]"] {
        assert!(after.contains(view), "{view}: {text}");
    }
}

#[test]
fn set_subtensor_is_inplace_in_fast_run() {
    let text = stdout_of(kiln().args([
        "rewrite",
        "set_subtensor(exp(x)[1:3], y)",
        "--var",
        "x=f64[:]",
        "--var",
        "y=f64[2]",
        "--format",
        "dprint",
    ]));
    assert!(text.contains("SetSubtensor{1:3}{inplace}"), "{text}");
}
