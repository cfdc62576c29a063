//! The differential comparison shared by `tests/differential.rs`,
//! `tests/fuzz_replay.rs` and the `pipeline` fuzz target (`fuzz/`, which
//! includes this file by path): a graph compiled by kiln must compute what
//! the reference evaluator computes on the *un-rewritten* graph. Two tiers:
//!
//! 1. **Mode `none`** ([`exact`]): the graph compiled without rewrites,
//!    every node checked against the reference on the compiled values of
//!    its inputs: bit for bit, or within the documented ULP bound of the
//!    runtime's transcendental functions, or within the error bound of
//!    summation in any order for float sums and products (the linker's
//!    reduction contract). Inf, NaN and subnormals included.
//! 2. **FAST_RUN** (and FAST_RUN without inplace, without fusion) against
//!    the reference on the whole graph. An element may differ only where a
//!    rewrite that *was applied* (the compiled function's rewrite log)
//!    licenses it ([`taint::Licenses`]): cancellation of a NaN (rule 5 of
//!    `src/rewrites/README.md`), reassociation outside 1e±150, the sign of
//!    a computed zero, `x ** 0.5 -> sqrt(x)` at `-inf`; such elements are
//!    skipped and counted. Elsewhere a NaN must be NaN and an infinity the
//!    same infinity; a finite value must be identical (the sign of a zero
//!    aside, rule 5) unless it depends on arithmetic that rounds
//!    differently once rewritten or vectorised (runtime functions, `pow`,
//!    reductions, `dot`, and reassociable arithmetic when a reassociating
//!    rewrite was applied): then within `1e-7 + 1e-7 |ref|` (f64), or
//!    `1e-3 + 1e-3 |ref|` for f32 and for f64 elements that depend on such
//!    f32 arithmetic. Integers and bools compare exactly.
//!
//! Inputs are passed in several memory layouts ([`layout`]) and through
//! `call`, `call_into` (reusing output arrays of the wrong dtype or shape,
//! which must be replaced, and of the right ones, which may be written in
//! place; the results must be identical to `call`'s) and `call_mut` with
//! some inputs declared mutable (only those may change).
//!
//! When the reference rejects the inputs (a run-time shape mismatch), mode
//! `none` must reject them too; a FAST_RUN function may reject them or
//! succeed, since a rewrite may have removed the node whose check failed;
//! it must never crash.

// Each user (two test targets, a fuzz target) uses a different part.
#![allow(dead_code)]

pub mod exact;
pub mod layout;
pub mod program;
pub mod taint;

use std::collections::{BTreeMap, HashSet};

use kiln::linker::{Arg, ArgMut};
use kiln::rewriting::Mode;
use kiln::{eval, function, DType, FunctionGraph, Tensor, Value};
use layout::{identical, Laid, Layout};

/// Counts of compared elements, and of those skipped, by exemption.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Elements compared (every output element of every call checked).
    pub compared: usize,
    /// Elements skipped, by the exemption that licensed it.
    pub skipped: BTreeMap<String, usize>,
    /// Inputs passed, by dtype and layout (`"f64 Strided"`).
    pub inputs: BTreeMap<String, usize>,
}

impl Stats {
    /// Adds `other`'s counts.
    pub fn absorb(&mut self, other: &Stats) {
        self.compared += other.compared;
        for (k, v) in &other.skipped {
            *self.skipped.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &other.inputs {
            *self.inputs.entry(k.clone()).or_default() += v;
        }
    }

    /// Skipped elements, all exemptions together.
    pub fn skipped_total(&self) -> usize {
        self.skipped.values().sum()
    }

    /// The skipped fraction of the compared elements.
    pub fn skipped_fraction(&self) -> f64 {
        self.skipped_total() as f64 / self.compared.max(1) as f64
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} elements compared, {} skipped ({:.3}%)",
            self.compared,
            self.skipped_total(),
            100.0 * self.skipped_fraction()
        )?;
        for (k, v) in &self.skipped {
            write!(f, "; {k}: {v}")?;
        }
        Ok(())
    }
}

/// How one case is passed to the compiled functions: a layout per input,
/// which inputs `call_mut` declares mutable, and what `call_into` reuses.
#[derive(Debug, Clone, Copy)]
pub struct Variant(pub u64);

impl Variant {
    /// Every input contiguous; no input mutable.
    pub const PLAIN: Variant = Variant(0);

    fn draw(self, salt: u64) -> u64 {
        let mut z = self.0 ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The layout of input `k`.
    pub fn layout(self, k: usize) -> Layout {
        if self.0 == 0 {
            Layout::Contiguous
        } else {
            Layout::pick(self.draw(2 * k as u64))
        }
    }

    /// Whether `call_mut` declares input `k` mutable.
    pub fn mutable(self, k: usize) -> bool {
        self.0 != 0 && self.draw(2 * k as u64 + 1).is_multiple_of(2)
    }

    /// The array `call_into` is given for output `k` whose reference is
    /// `want`: of another dtype, of another shape, or matching.
    fn reused_output(self, k: usize, want: &Value) -> Value {
        match self.draw(1000 + k as u64) % 3 {
            0 => {
                let other = if want.dtype() == DType::F64 {
                    DType::I8
                } else {
                    DType::F64
                };
                want.cast(other)
            }
            1 => Value::scalar_f64(want.dtype(), 7.0),
            _ => Value::from_f64_array(
                want.dtype(),
                ndarray::ArrayD::from_elem(ndarray::IxDyn(want.shape()), 3.0),
            ),
        }
    }
}

/// `got` against the reference `want` under FAST_RUN's rules (module docs;
/// `taint`: which elements are licensed to differ or carry rounding).
pub fn check_close(
    got: &Value,
    want: &Value,
    taint: &taint::Taint,
    what: &str,
    stats: &mut Stats,
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
    stats.compared += want.len();
    let skipped = taint.unsettled.iter().filter(|&&t| t).count();
    if skipped > 0 {
        *stats
            .skipped
            .entry("tier 2: licensed by an applied rewrite".into())
            .or_default() += skipped;
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
    let (g, w) = (got.to_f64_array(), want.to_f64_array());
    let flags = taint
        .unsettled
        .iter()
        .zip(taint.f32_rounding.iter())
        .zip(taint.rounding.iter())
        .zip(taint.slack.iter());
    for (k, ((&a, &b), (((&t, &f), &r), &s))) in g.iter().zip(w.iter()).zip(flags).enumerate() {
        let within_slack = s > 0.0 && a.is_finite() && b.is_finite() && (a - b).abs() <= s;
        let ok = t || within_slack || close(a, b, r, got.dtype() == DType::F32 || f);
        if !ok {
            return Err(format!(
                "{what}: element {k}: compiled {a:e}, reference {b:e}"
            ));
        }
    }
    Ok(())
}

/// One element under FAST_RUN's rules: NaN for NaN, the same infinity for
/// an infinity; a finite value equal (±0 alike) or, when it carries
/// `rounding`, within the tolerance of its precision (`f32`).
pub fn close(a: f64, b: f64, rounding: bool, f32: bool) -> bool {
    if b.is_nan() {
        a.is_nan()
    } else if b.is_infinite() || !rounding {
        a == b
    } else {
        let (atol, rtol) = tolerance(f32);
        a.is_finite() && (a - b).abs() <= atol + rtol * b.abs()
    }
}

/// The (absolute, relative) tolerance [`close`] allows an element that
/// carries rounding: of `f32` precision or of `f64`'s.
pub fn tolerance(f32: bool) -> (f64, f64) {
    if f32 {
        (1e-3, 1e-3)
    } else {
        (1e-7, 1e-7)
    }
}

/// [`compare_case`] with every input contiguous, counts discarded.
pub fn compare_with_reference(
    ins: &[Tensor],
    outs: &[Tensor],
    vals: &[Value],
) -> Result<(), String> {
    compare_case(ins, outs, vals, Variant::PLAIN, &mut Stats::default())
}

/// The names of the rewrites applied when compiling `f`.
fn fired(f: &kiln::CompiledFunction) -> HashSet<String> {
    f.rewrite_profile()
        .log()
        .into_iter()
        .map(|e| e.rewriter)
        .collect()
}

/// Both tiers on one case (module docs): `vals` laid out and passed as
/// `variant` says. An error (compile failure, call failure on accepted
/// inputs, mismatch) is a bug.
pub fn compare_case(
    ins: &[Tensor],
    outs: &[Tensor],
    vals: &[Value],
    variant: Variant,
    stats: &mut Stats,
) -> Result<(), String> {
    let vals: Vec<Value> = vals
        .iter()
        .enumerate()
        .map(|(k, v)| variant.layout(k).adapt(v))
        .collect();
    let laid: Vec<Laid> = vals
        .iter()
        .enumerate()
        .map(|(k, v)| Laid::new(v, variant.layout(k)))
        .collect();
    for (v, l) in vals.iter().zip(&laid) {
        *stats
            .inputs
            .entry(format!("{} {:?}", v.dtype(), l.layout()))
            .or_default() += 1;
    }
    let args: Vec<Arg<'_>> = laid.iter().map(Laid::arg).collect();
    let reference_graph = FunctionGraph::new(ins, outs).map_err(|e| e.to_string())?;
    let want = eval::evaluate(&reference_graph, &vals);
    exact::check_mode_none(ins, outs, &vals, &args, want.is_err(), stats)?;
    let Ok(want) = want else {
        for mode in modes() {
            let f = function(ins, outs)
                .mode(mode)
                .compile()
                .map_err(|e| e.to_string())?;
            let _ = f.call(&args);
        }
        return Ok(());
    };
    if want.len() != outs.len() {
        return Err(format!(
            "the reference gives {} of {} outputs",
            want.len(),
            outs.len()
        ));
    }
    for mode in modes() {
        let f = function(ins, outs)
            .mode(mode.clone())
            .compile()
            .map_err(|e| format!("{}: compile: {e}", mode.name()))?;
        let licenses = taint::Licenses::from_fired(&fired(&f));
        let taint = taint::taint(&reference_graph, &vals, &licenses)
            .ok_or("the taint of a graph the reference evaluates")?;
        let got = f
            .call(&args)
            .map_err(|e| format!("{}: call: {e}\n{}", mode.name(), f.graph()))?;
        compare_outputs(
            &got,
            &want,
            &taint,
            &format!("{} ({licenses:?})", mode.name()),
            f.graph(),
            stats,
        )?;
        let mut into: Vec<Value> = want
            .iter()
            .enumerate()
            .map(|(k, w)| variant.reused_output(k, w))
            .collect();
        f.call_into(&args, &mut into)
            .map_err(|e| format!("{}: call_into: {e}\n{}", mode.name(), f.graph()))?;
        for (k, (i, g)) in into.iter().zip(&got).enumerate() {
            if !identical(i, g) {
                return Err(format!(
                    "{}: call_into output {k} differs from call's: {}\n{}",
                    mode.name(),
                    exact::first_difference(i, g),
                    f.graph()
                ));
            }
        }
    }
    check_call_mut(
        ins,
        outs,
        &laid,
        &want,
        &reference_graph,
        &vals,
        variant,
        stats,
    )
}

/// The FAST_RUN modes of tier 2.
fn modes() -> [Mode; 3] {
    [
        Mode::fast_run(),
        Mode::fast_run().excluding(&["inplace"]),
        Mode::fast_run().excluding(&["fusion"]),
    ]
}

/// Every output of one call against the reference, their number included.
fn compare_outputs(
    got: &[Value],
    want: &[Value],
    taint: &[taint::Taint],
    mode: &str,
    graph: &FunctionGraph,
    stats: &mut Stats,
) -> Result<(), String> {
    if got.len() != want.len() || taint.len() != want.len() {
        return Err(format!(
            "{mode}: {} outputs, the reference {}",
            got.len(),
            want.len()
        ));
    }
    for (k, ((g, w), t)) in got.iter().zip(want).zip(taint).enumerate() {
        check_close(g, w, t, &format!("{mode} output {k} of {graph}"), stats)?;
    }
    Ok(())
}

/// FAST_RUN with the inputs `variant` picks declared mutable, called with
/// every input lent mutably: the results match the reference, and every
/// input not declared mutable is bit-identical afterwards (gaps of its
/// layout included).
#[allow(clippy::too_many_arguments)]
fn check_call_mut(
    ins: &[Tensor],
    outs: &[Tensor],
    laid: &[Laid],
    want: &[Value],
    reference_graph: &FunctionGraph,
    vals: &[Value],
    variant: Variant,
    stats: &mut Stats,
) -> Result<(), String> {
    let mutable: Vec<usize> = (0..ins.len()).filter(|&k| variant.mutable(k)).collect();
    if mutable.is_empty() {
        return Ok(());
    }
    let f = function(ins, outs)
        .mutable_inputs(&mutable)
        .compile()
        .map_err(|e| format!("call_mut: compile: {e}"))?;
    let mut lent: Vec<Laid> = laid.to_vec();
    let got = {
        let mut args: Vec<ArgMut<'_>> = lent.iter_mut().map(Laid::arg_mut).collect();
        f.call_mut(&mut args)
            .map_err(|e| format!("call_mut: {e}\n{}", f.graph()))?
    };
    for (k, (after, before)) in lent.iter().zip(laid).enumerate() {
        if !mutable.contains(&k) && !identical(after.backing(), before.backing()) {
            return Err(format!(
                "call_mut wrote input {k} ({:?}), not declared mutable\n{}",
                before.layout(),
                f.graph()
            ));
        }
    }
    let licenses = taint::Licenses::from_fired(&fired(&f));
    let taint = taint::taint(reference_graph, vals, &licenses)
        .ok_or("the taint of a graph the reference evaluates")?;
    compare_outputs(
        &got,
        want,
        &taint,
        &format!("call_mut {mutable:?}"),
        f.graph(),
        stats,
    )
}
