//! `kiln bench`: JSON keys, the table, the suite, mode names. Small sizes.
mod cli_support;

use cli_support::*;

const KEYS: [&str; 16] = [
    "codegen_ms",
    "compile_first_ms",
    "compile_ms",
    "final_ms",
    "isa",
    "mode",
    "nodes_after",
    "nodes_before",
    "peak_bytes",
    "rewrite_ms",
    "run_into_ms",
    "run_into_us",
    "run_ms",
    "run_us",
    "runs",
    "workload",
];

fn rows(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn chain_json_keys() {
    let text = stdout_of(kiln().args([
        "bench", "--chain", "30", "--modes", "fast_run", "--runs", "1", "--json",
    ]));
    let rows = rows(&text);
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    let mut keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, KEYS);
    assert_eq!(r["workload"], "chain_30");
    assert_eq!(r["mode"], "fast_run");
    assert_eq!(r["runs"], 1);
    assert!(r["nodes_after"].as_u64().unwrap() <= r["nodes_before"].as_u64().unwrap());
    let (c, rw, cg) = (
        r["compile_ms"].as_f64().unwrap(),
        r["rewrite_ms"].as_f64().unwrap(),
        r["codegen_ms"].as_f64().unwrap(),
    );
    assert!(c + 0.01 >= rw + cg, "{r}");
    assert!(r["peak_bytes"].as_u64().unwrap() >= 8 * 1000, "{r}");
}

#[test]
fn expression_table_and_progress() {
    let a = kiln()
        .args([
            "bench",
            "exp(x) + y",
            "--var",
            "x=f64[1000]",
            "--var",
            "y=f64[1]",
            "--runs",
            "2",
            "--modes",
            "none,fast_run,fast_run-fusion,fast_run-inplace",
        ])
        .assert()
        .success();
    let out = String::from_utf8(a.get_output().stdout.clone()).unwrap();
    let err = String::from_utf8(a.get_output().stderr.clone()).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert!(
        lines[0].starts_with("workload") && lines[0].contains("peak_bytes"),
        "{out}"
    );
    for (l, m) in lines[1..]
        .iter()
        .zip(["none", "fast_run", "fast_run-fusion", "fast_run-inplace"])
    {
        let cols: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(cols[..2], ["expr", m], "{l}");
    }
    assert!(err.contains("[4/4] expr fast_run-inplace"), "{err}");
}

#[test]
fn suite_reports_every_workload() {
    let text = stdout_of(kiln().args([
        "bench",
        "--suite",
        "--scale-down",
        "20000",
        "--runs",
        "1",
        "--modes",
        "none,fast_run",
        "--json",
        "-q",
    ]));
    let rows = rows(&text);
    let names: Vec<&str> = rows
        .iter()
        .step_by(2)
        .map(|r| r["workload"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "softplus",
            "poly",
            "gauss",
            "sigmoid_xent",
            "logsumexp",
            "softmax",
            "cumsum",
            "outer_tanh",
            "mlp",
            "canon",
            "stencil",
            "gather",
            "batched_matmul",
            "grad_sigmoid_xent",
            "grad_mlp",
            "grad_logsumexp"
        ]
    );
    for r in &rows {
        assert!(r["run_ms"].as_f64().unwrap() >= 0.0);
        assert!(r["run_into_ms"].as_f64().unwrap() >= 0.0);
        // The µs fields carry the same medians, to the ns.
        let (ms, us) = (r["run_ms"].as_f64().unwrap(), r["run_us"].as_f64().unwrap());
        assert!(
            (us / 1000.0 - ms).abs() <= 0.0005 + 1e-9,
            "{ms} ms vs {us} µs"
        );
    }
    let text = stdout_of(kiln().args([
        "bench",
        "--suite",
        "--only",
        "poly,grad_mlp",
        "--scale-down",
        "20000",
        "--runs",
        "1",
        "--modes",
        "fast_run",
        "--json",
        "--threads",
        "1",
    ]));
    assert_eq!(rows_len(&text), 2);
}

fn rows_len(text: &str) -> usize {
    rows(text).len()
}
