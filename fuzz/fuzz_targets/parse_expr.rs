//! Fuzz target `parse_expr`: the expression front end on arbitrary text must
//! return a value or an error, never panic. The body is
//! `tests/fuzz_support/mod.rs`, which `tests/fuzz_replay.rs` also runs on
//! the committed findings (`fuzz/regressions/parse_expr/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/fuzz_support/mod.rs"]
mod fuzz_support;

fuzz_target!(|data: &[u8]| fuzz_support::parse_expr(data));
