//! The differential comparison shared by `tests/differential.rs` and the
//! `pipeline` fuzz target (`fuzz/`, which includes this file by path): a
//! graph compiled under FAST_RUN (and FAST_RUN without inplace, without
//! fusion) must compute what the reference evaluator computes on the
//! *un-rewritten* graph.
//!
//! Tolerances by dtype: where the reference is finite, the compiled result
//! must be within `atol + rtol * |ref|` (f64: 1e-7 / 1e-7, because rewrites
//! reassociate and stabilise; f32, and f64 elements that depend on `f32`
//! arithmetic a rewrite or kernel may reassociate: 1e-3 / 1e-3; integers
//! and bools exactly).
//! Where the reference is ±inf or NaN, a rewrite may have removed the
//! cancellation that produced it (PyTensor's rule), so any value is
//! accepted, except NaN for an infinite reference. The compiled code must
//! never produce NaN or ±inf where the reference is finite.
//!
//! Where the reference value is tainted ([`taint`]), any value is accepted,
//! integers included: where it depends on a NaN (a rewrite may remove the
//! cancellation that produced it, `x / x -> 1`, rule 5 of
//! `src/rewrites/README.md`, and a comparison or cast downstream turns the
//! difference into any value), or on a product whose partial products can
//! leave 1e±150 in some order (the vectorised and the sequential order then
//! differ by more than rounding).
//!
//! One documented exception (`src/rewrites/README.md`, rule 5): specialize
//! turns `x ** 0.5` into `sqrt(x)`, NaN at `x = -inf` where C99 `pow` gives
//! `+inf`; so when the reference graph holds a `pow`, NaN is accepted for a
//! `+inf` reference (and only then).
//!
//! When the reference rejects the inputs (a run-time shape mismatch), the
//! compiled function may reject them too or succeed, since a rewrite may
//! have removed the node whose check failed; it must never crash.

pub mod taint;

use kiln::rewriting::Mode;
use kiln::{eval, function, DType, FunctionGraph, ScalarOp, Tensor, Value};

/// `got` against the reference `want` within the tolerances of the module
/// docs (`taint`: which elements of `want` are unsettled or carry `f32`
/// rounding; `pow_in_reference`: the reference graph holds a `pow`).
pub fn check_close(
    got: &Value,
    want: &Value,
    taint: &taint::Taint,
    pow_in_reference: bool,
    what: &str,
) -> Result<(), String> {
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
        let (g, w) = (got.to_i64_array(), want.to_i64_array());
        return match g
            .iter()
            .zip(w.iter())
            .zip(taint.unsettled.iter())
            .position(|((a, b), &t)| a != b && !t)
        {
            None => Ok(()),
            Some(k) => Err(format!("{what}: element {k}: {got:?} vs {want:?}")),
        };
    }
    let tolerance = |f32_rounding: bool| {
        if got.dtype() == DType::F32 || f32_rounding {
            (1e-3, 1e-3)
        } else {
            (1e-7, 1e-7)
        }
    };
    let (g, w) = (got.to_f64_array(), want.to_f64_array());
    let flags = taint.unsettled.iter().zip(taint.f32_rounding.iter());
    for (k, ((&a, &b), (&t, &f))) in g.iter().zip(w.iter()).zip(flags).enumerate() {
        let (atol, rtol) = tolerance(f);
        let ok = if b.is_finite() {
            t || (a.is_finite() && (a - b).abs() <= atol + rtol * b.abs())
        } else if b.is_infinite() {
            t || !a.is_nan() || (pow_in_reference && b > 0.0)
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

/// Compiles `ins -> outs` under FAST_RUN, FAST_RUN without inplace and
/// without fusion, runs each on `vals` and compares with the reference
/// evaluator on the un-rewritten graph (see the module docs). An error
/// (compile failure, call failure on accepted inputs, mismatch) is a bug.
pub fn compare_with_reference(
    ins: &[Tensor],
    outs: &[Tensor],
    vals: &[Value],
) -> Result<(), String> {
    let reference_graph = FunctionGraph::new(ins, outs).map_err(|e| e.to_string())?;
    let Ok(want) = eval::evaluate(&reference_graph, vals) else {
        // The reference rejects these inputs (a run-time shape mismatch). A rewrite
        // may have removed the node whose check failed (as PyTensor's do), so the
        // compiled function may succeed; it must not crash either way.
        let f = function(ins, outs).compile().map_err(|e| e.to_string())?;
        let _ = f.call_values(vals);
        return Ok(());
    };
    let taint = taint::taint(&reference_graph, vals)
        .ok_or("the NaN taint of a graph the reference evaluates")?;
    let pow_in_reference = reference_graph
        .node_ids()
        .any(|n| reference_graph.node(n).op.is_elemwise(ScalarOp::Pow));
    for mode in [
        Mode::fast_run(),
        Mode::fast_run().excluding(&["inplace"]),
        Mode::fast_run().excluding(&["fusion"]),
    ] {
        let f = function(ins, outs)
            .mode(mode.clone())
            .compile()
            .map_err(|e| format!("{}: compile: {e}", mode.name()))?;
        let got = f
            .call_values(vals)
            .map_err(|e| format!("{}: call: {e}\n{}", mode.name(), f.graph()))?;
        for (k, ((g, w), t)) in got.iter().zip(&want).zip(&taint).enumerate() {
            check_close(
                g,
                w,
                t,
                pow_in_reference,
                &format!("{} output {k} of {}", mode.name(), f.graph()),
            )?;
        }
    }
    Ok(())
}
