//! Fuzz target `pipeline`: a small random program (a few inputs of small
//! shapes and any dtype, then a sequence of ops from the whole op set) is
//! compiled with no rewrite and under FAST_RUN (with and without inplace
//! and fusion) and run on inputs with edge values in several layouts and
//! call forms; the results must match the reference evaluator on the
//! un-rewritten graph under the rules of `tests/differential_support`
//! (included by path). The byte format is `differential_support::program`,
//! which `tests/fuzz_replay.rs` replays on the committed findings
//! (`fuzz/regressions/pipeline/`). A mismatch, a compile error or a panic
//! is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/differential_support/mod.rs"]
mod differential_support;

fuzz_target!(|data: &[u8]| {
    let mut stats = differential_support::Stats::default();
    if let Err(e) = differential_support::program::run(data, &mut stats) {
        panic!("{e}\nbytes: {data:?}");
    }
});
