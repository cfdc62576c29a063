//! Differential property tests: random well-typed graphs compiled under
//! FAST_RUN (and FAST_RUN without inplace, without fusion) compute what the
//! reference evaluator computes on the *un-rewritten* graph, on inputs that
//! include edge values (±0, ±inf, NaN, huge, tiny, subnormal).
//!
//! Tolerances by op class: where the reference is finite, the compiled result
//! must be within `atol + rtol * |ref|` (f64: 1e-7 / 1e-7, because rewrites
//! reassociate and stabilise; f32: 1e-3 / 1e-3; integers and bools exactly).
//! Where the reference is ±inf or NaN, a rewrite may have removed the
//! cancellation that produced it (PyTensor's rule), so any value is
//! accepted, except NaN for an infinite reference. The compiled code must
//! never produce NaN or ±inf where the reference is finite.
//!
//! When the reference rejects the inputs (a run-time shape mismatch), the
//! compiled function may reject them too or succeed, since a rewrite may
//! have removed the node whose check failed; it must never crash.
//!
//! Structural properties: a second FAST_RUN pass over a rewritten graph
//! changes nothing, no two nodes of the result compute the same thing, and
//! the verifier holds. The number of cases is fixed for CI; set
//! `PROPTEST_CASES` for a long run. The graph generator lives in
//! `tests/random_graphs/` (shared with `linker_inplace.rs`).

mod random_graphs;

use std::collections::HashSet;

use kiln::rewriting::{rewrite_graph, Mode};
use kiln::*;
use proptest::prelude::*;
use random_graphs::{build, step, values, Step};

fn check_close(got: &Value, want: &Value, what: &str) -> std::result::Result<(), String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Err(format!(
            "{what}: {:?}{:?} vs {:?}{:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    if !got.dtype().is_float() {
        return if got.same_as(want) {
            Ok(())
        } else {
            Err(format!("{what}: {got:?} vs {want:?}"))
        };
    }
    let (atol, rtol) = if got.dtype() == DType::F32 {
        (1e-3, 1e-3)
    } else {
        (1e-7, 1e-7)
    };
    let (g, w) = (got.to_f64_array(), want.to_f64_array());
    for (k, (&a, &b)) in g.iter().zip(w.iter()).enumerate() {
        let ok = if b.is_finite() {
            a.is_finite() && (a - b).abs() <= atol + rtol * b.abs()
        } else if b.is_infinite() {
            !a.is_nan()
        } else {
            true
        };
        if !ok {
            return Err(format!(
                "{what}: element {k}: compiled {a:e}, reference {b:e}"
            ));
        }
    }
    Ok(())
}

fn run_case(
    steps: &[Step],
    n_out: usize,
    n: usize,
    m: usize,
    seed: u64,
    edges: bool,
) -> std::result::Result<(), String> {
    let (ins, outs) = build(steps, n_out);
    let reference_graph = FunctionGraph::new(&ins, &outs).map_err(|e| e.to_string())?;
    let vals = values(n, m, seed, edges);
    let Ok(want) = eval::evaluate(&reference_graph, &vals) else {
        // The reference rejects these inputs (a run-time shape mismatch). A rewrite
        // may have removed the node whose check failed (as PyTensor's do), so the
        // compiled function may succeed; it must not crash either way.
        let f = function(&ins, &outs).compile().map_err(|e| e.to_string())?;
        let _ = f.call_values(&vals);
        return Ok(());
    };
    for mode in [
        Mode::fast_run(),
        Mode::fast_run().excluding(&["inplace"]),
        Mode::fast_run().excluding(&["fusion"]),
    ] {
        let f = function(&ins, &outs)
            .mode(mode.clone())
            .compile()
            .map_err(|e| format!("{}: compile: {e}", mode.name()))?;
        let got = f
            .call_values(&vals)
            .map_err(|e| format!("{}: call: {e}\n{}", mode.name(), f.graph()))?;
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            check_close(
                g,
                w,
                &format!("{} output {k} of {}", mode.name(), f.graph()),
            )?;
        }
    }
    Ok(())
}

/// A second FAST_RUN pass changes nothing; no two nodes compute the same thing.
fn check_structure(steps: &[Step], n_out: usize) -> std::result::Result<(), String> {
    let (ins, outs) = build(steps, n_out);
    let mut fg = FunctionGraph::new(&ins, &outs).map_err(|e| e.to_string())?;
    rewrite_graph(&mut fg, &Mode::fast_run()).map_err(|e| e.to_string())?;
    fg.check_integrity().map_err(|e| e.to_string())?;
    let once = fg.to_string();
    let mut seen = HashSet::new();
    for n in fg.node_ids() {
        let node = fg.node(n);
        let key = (node.op.clone(), node.inputs.to_vec());
        if !seen.insert(key) {
            return Err(format!(
                "two nodes compute {} on the same inputs in {once}",
                node.op
            ));
        }
    }
    rewrite_graph(&mut fg, &Mode::fast_run()).map_err(|e| e.to_string())?;
    fg.check_integrity().map_err(|e| e.to_string())?;
    if fg.to_string() != once {
        return Err(format!(
            "a second FAST_RUN pass changed\n{once}\ninto\n{fg}"
        ));
    }
    Ok(())
}

/// 1000 cases per property with a fixed seed in CI; `PROPTEST_CASES` and
/// `PROPTEST_RNG_SEED` override both for long or exploratory runs.
fn config() -> ProptestConfig {
    let mut c = ProptestConfig::default();
    if std::env::var("PROPTEST_CASES").is_err() {
        c.cases = 1000;
    }
    if std::env::var("PROPTEST_RNG_SEED").is_err() {
        c.rng_seed = proptest::test_runner::RngSeed::Fixed(0x6b69_6c6e);
    }
    c.failure_persistence = None;
    c
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn compiled_fast_run_matches_the_reference(
        steps in proptest::collection::vec(step(), 1..10),
        n_out in 1..3usize,
        n in prop_oneof![Just(0usize), 1..9usize],
        m in 1..4usize,
        seed in any::<u64>(),
        edges in any::<bool>(),
    ) {
        if let Err(e) = run_case(&steps, n_out, n, m, seed, edges) {
            prop_assert!(false, "{e}\nsteps: {steps:?}");
        }
    }

    #[test]
    fn rewriting_reaches_a_merged_fixed_point(
        steps in proptest::collection::vec(step(), 1..12),
        n_out in 1..3usize,
    ) {
        if let Err(e) = check_structure(&steps, n_out) {
            prop_assert!(false, "{e}\nsteps: {steps:?}");
        }
    }
}
