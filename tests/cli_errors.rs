//! Every user error of `kiln`: one message on stderr (a caret block for
//! expressions and declarations), exit code 2, no panic.
mod cli_support;

use cli_support::*;
use ndarray::{ArrayD, IxDyn};
use predicates::prelude::*;

/// Runs kiln and checks exit code 2, no panic, and that stderr contains `needle`.
fn fails(args: &[&str], needle: &str) -> String {
    let a = kiln().args(args).assert().code(2).stdout("");
    let err = String::from_utf8(a.get_output().stderr.clone()).unwrap();
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn npy_dir() -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let x = save(dir.path(), "x", &ArrayD::from_elem(IxDyn(&[5]), 1.0f64));
    let y = save(dir.path(), "y", &ArrayD::from_elem(IxDyn(&[4]), 1.0f64));
    (dir, input("x", &x), input("y", &y))
}

#[test]
fn malformed_expression_shows_position_and_caret() {
    let (_d, x, _) = npy_dir();
    let err = fails(
        &["eval", "exp((x)", "--in", &x],
        "parse error at position 7",
    );
    assert_eq!(err, "error: parse error at position 7: expected ',' or ')' but found end of input\n  exp((x)\n         ^\n");
    fails(&["rewrite", "x +* 2", "--var", "x=f64[:]"], "position 3");
    fails(&["eval", "exp(x, 2)", "--in", &x], "exp() takes 1 argument");
    fails(
        &[
            "dot",
            "a < b < c",
            "--var",
            "a=f64[:]",
            "--var",
            "b=f64[:]",
            "--var",
            "c=f64[:]",
        ],
        "chained comparisons",
    );
}

#[test]
fn unknown_variable() {
    let (_d, x, _) = npy_dir();
    let err = fails(&["eval", "x + z", "--in", &x], "unknown variable 'z'");
    assert!(err.ends_with("      ^\n"), "{err}");
    fails(
        &["rewrite", "x + z", "--var", "x=f64[:]"],
        "unknown variable 'z'",
    );
    fails(
        &["bench", "q", "--var", "x=f64[10]"],
        "unknown variable 'q'",
    );
}

#[test]
fn missing_and_malformed_npy() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.npy");
    fails(&["eval", "x", "--in", &input("x", &missing)], "cannot read");
    let bad = dir.path().join("bad.npy");
    std::fs::write(&bad, b"this is not numpy").unwrap();
    fails(
        &["eval", "x", "--in", &input("x", &bad)],
        "not a valid .npy file",
    );
    // A half-precision .npy (kiln has no f16): magic, version 1.0, the
    // header length, the header padded with spaces to 128 bytes in all and
    // ended by a newline, then two elements.
    let f16s = dir.path().join("h.npy");
    let dict = "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }";
    let header = format!("{dict:<width$}\n", width = 128 - 10 - 1);
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend([0u8, 0x3c, 0, 0x3c]);
    std::fs::write(&f16s, bytes).unwrap();
    fails(
        &["eval", "x", "--in", &input("x", &f16s)],
        "unsupported dtype '<f2'",
    );
    fails(
        &["eval", "x", "--in", "x"],
        "bad input 'x' (expected NAME=FILE.npy)",
    );
    let out = dir.path().join("no_such_dir").join("o.npy");
    let (_d, x, _) = npy_dir();
    fails(
        &["eval", "x", "--in", &x, "--out", out.to_str().unwrap()],
        "cannot create",
    );
}

#[test]
fn dtype_and_shape_mismatch() {
    let (d, x, y) = npy_dir();
    fails(
        &["eval", "x + y", "--in", &x, "--in", &y],
        "shapes do not broadcast",
    );
    let b = save(d.path(), "b", &ArrayD::from_elem(IxDyn(&[5]), true));
    fails(
        &["eval", "x & b", "--in", &x, "--in", &input("b", &b)],
        "type error in and",
    );
    fails(
        &["eval", "x @ x", "--in", &x, "--in", &x],
        "input 'x' is given twice",
    );
    fails(
        &["rewrite", "sum(x, axis=2)", "--var", "x=f64[:]"],
        "axis 2 out of range",
    );
}

#[test]
fn bad_declarations_modes_and_options() {
    fails(
        &["rewrite", "x", "--var", "x=f65[:]"],
        "unknown dtype 'f65'",
    );
    let err = fails(
        &["rewrite", "x", "--var", "x f64"],
        "bad declaration 'x f64'",
    );
    assert!(err.contains("^"), "{err}");
    fails(
        &["rewrite", "x", "--var", "x=f64[:]", "--var", "x=f32[]"],
        "declared twice",
    );
    fails(
        &["rewrite", "x", "--var", "x=f64[:]", "--mode", "turbo"],
        "unknown mode 'turbo'",
    );
    fails(
        &["bench", "x", "--var", "x=f64[:]"],
        "bench needs concrete sizes",
    );
    fails(&["bench", "--modes", "fast_run"], "nothing to measure");
    fails(
        &["bench", "--suite", "--only", "nope"],
        "unknown workload 'nope'",
    );
    fails(
        &["bench", "--chain", "5", "--modes", "fast_run-"],
        "empty tag",
    );
    // clap's own errors use exit code 2 as well.
    kiln()
        .args(["eval"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("EXPR"));
    kiln().args(["frobnicate"]).assert().code(2);
}
