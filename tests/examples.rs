//! Runs every program in `examples/` and checks a line of its output, so
//! that the examples users copy keep working (not only compiling).
//!
//! `cargo test` builds the examples before it runs the tests (into
//! `target/<profile>/examples/`); a test run restricted with `--test` does
//! not, so `cargo test --release --test examples` needs a
//! `cargo build --release --examples` first and says so (also when a
//! binary is older than its source).

use std::path::PathBuf;
use std::process::Command;

/// Every example, with a text its output must contain.
const EXPECTED: [(&str, &str); 9] = [
    ("quickstart", "softplus over 1000000 points"),
    ("seed_rewriting", "# unification and reification"),
    ("call_into_loop", "output arrays reused: true"),
    ("mutable_inputs", "call_mut: w after"),
    ("custom_rewrite", "FAST_RUN + approx_tanh:"),
    ("custom_op", "run by the reference evaluator: [\"cumsum\"]"),
    ("compare_modes", "every mode agrees with `none`"),
    ("profiling", "== FAST_RUN rewrite profile"),
    ("gradients", "hessian of v·A·v: [[2, 5],"),
];

/// The folder the examples of this build profile are written to.
fn examples_dir() -> PathBuf {
    // This test runs as target/<profile>/deps/examples-<hash>.
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps")
        .join("examples")
}

#[test]
fn every_example_is_listed() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut on_disk: Vec<String> = std::fs::read_dir(&root)
        .expect("examples/")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| {
            p.file_stem()
                .expect("a file name")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = EXPECTED.iter().map(|(n, _)| n.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed, "tests/examples.rs must run every example");
}

#[test]
fn every_example_runs_and_prints_its_result() {
    let dir = examples_dir();
    for (name, expected) in EXPECTED {
        let exe = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
        assert!(
            exe.exists(),
            "{} is not built: `cargo test` builds the examples, `cargo test --test examples` \
             does not (run `cargo build --release --examples` first)",
            exe.display()
        );
        let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("examples/{name}.rs"));
        let modified = |p: &PathBuf| {
            std::fs::metadata(p)
                .and_then(|m| m.modified())
                .expect("a modification time")
        };
        assert!(
            modified(&exe) >= modified(&source),
            "{} is older than its source: rebuild it (`cargo build --release --examples`)",
            exe.display()
        );
        let out = Command::new(&exe).output().expect("the example starts");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name} failed ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains(expected),
            "{name}: output lacks `{expected}`:\n{stdout}"
        );
    }
}
