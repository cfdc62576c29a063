//! The fuzz targets' findings inside CI: every file under
//! `fuzz/regressions/<target>/` (a crash or mismatch input that
//! `cargo fuzz` saved, copied there once found) is replayed through the
//! same decoding and checks as the fuzz target (`tests/fuzz_support/` for
//! `parse_expr`, `tests/differential_support/program.rs` for `pipeline`),
//! and a short smoke run on stable drives the same code with proptest's
//! random bytes (a bounded number of cases, fixed seed), so that a finding
//! is never outside CI.

mod differential_support;
mod fuzz_support;

use std::path::PathBuf;

use differential_support::{program, Stats};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};

/// The committed inputs of a fuzz target, sorted by name.
fn regressions(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file() && p.extension().is_none_or(|x| x != "md"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, bytes)
        })
        .collect()
}

#[test]
fn pipeline_regressions_replay() {
    let files = regressions("pipeline");
    assert!(
        !files.is_empty(),
        "fuzz/regressions/pipeline holds the findings"
    );
    let mut stats = Stats::default();
    for (path, bytes) in &files {
        if let Err(e) = program::run(bytes, &mut stats) {
            panic!("{}: {e}", path.display());
        }
    }
    println!("pipeline regressions: {stats}");
    assert!(stats.compared > 0);
}

#[test]
fn parse_expr_regressions_replay() {
    let files = regressions("parse_expr");
    assert!(
        !files.is_empty(),
        "fuzz/regressions/parse_expr holds the findings"
    );
    for (_, bytes) in &files {
        fuzz_support::parse_expr(bytes);
    }
}

fn smoke_config(cases: u32) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(0x6675_7a7a),
        failure_persistence: None,
        ..Config::default()
    }
}

/// 300 random programs through the pipeline target's decoding and checks.
#[test]
fn pipeline_smoke() {
    let mut runner = TestRunner::new(smoke_config(300));
    let result = runner.run(&proptest::collection::vec(any::<u8>(), 1..80), |bytes| {
        if let Err(e) = program::run(&bytes, &mut Stats::default()) {
            prop_assert!(false, "{e}\nbytes: {bytes:?}");
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// 2,000 random texts (expression-like tokens and arbitrary bytes) through
/// the parse_expr target.
#[test]
fn parse_expr_smoke() {
    let token = prop_oneof![
        Just("x".to_string()),
        Just("M".to_string()),
        Just("k".to_string()),
        Just("r".to_string()),
        Just("(".to_string()),
        Just(")".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just(",".to_string()),
        Just(":".to_string()),
        Just("+".to_string()),
        Just("**".to_string()),
        Just("//".to_string()),
        Just("=".to_string()),
        Just("f64".to_string()),
        Just("sum(".to_string()),
        Just("dot(".to_string()),
        Just("1e400".to_string()),
        Just("None".to_string()),
        "[ -~]{0,3}",
    ];
    let text = prop_oneof![
        proptest::collection::vec(token, 0..20).prop_map(|t| t.concat().into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..40),
    ];
    let mut runner = TestRunner::new(smoke_config(2000));
    runner
        .run(&text, |bytes| {
            fuzz_support::parse_expr(&bytes);
            Ok(())
        })
        .unwrap();
}
