//! Execution of `softmax` / `log_softmax` (`Op::Softmax`): the input in
//! standard layout seen as `(outer, n, inner)` around the axis; each lane
//! of `n` values is normalised with two passes of kiln-runtime's
//! vectorised row functions: its maximum `m` (NaN-propagating), then
//! - softmax: `e = exp(x - m)` written into the output (block exp), its
//!   sum `s`, and `e / s`;
//! - log-softmax: `s = Σ exp(x - m)` in one fused pass (no exp stored),
//!   and `(x - m) - ln(s)`.
//!
//! Lanes along the innermost axis are read in place; other lanes are
//! gathered into a scratch row first and scattered back. `f32` lanes are
//! computed in `f64` and rounded once, as the reference does.
//!
//! Invariants: every lane is finite and correct whatever its magnitude
//! (the shift by the maximum: ±1e3 inputs give no overflow); a NaN in a
//! lane (or a lane of `-inf` only) makes the lane NaN, a `+inf` maximum
//! makes the finite elements 0 (`-inf` for log) and the infinite ones NaN,
//! as in the reference; an empty lane writes nothing.

use kiln_runtime::math::{extreme_f64, kiln_exp_f64, sum_exp_shift_f64};

use super::state::Exec;
use crate::error::Result;
use crate::graph::DType;
use crate::linker::plan::step::SoftmaxStep;

/// Normalises one contiguous lane `x` into `out` (same length, `n >= 1`).
fn lane(x: &[f64], out: &mut [f64], log: bool) {
    let m = extreme_f64(x, true);
    if m == f64::INFINITY {
        // As the reference: finite elements vanish, infinite ones are NaN.
        let zero = if log { f64::NEG_INFINITY } else { 0.0 };
        for (o, &v) in out.iter_mut().zip(x) {
            *o = if v == m { f64::NAN } else { zero };
        }
        return;
    }
    if log {
        let ls = sum_exp_shift_f64(x, m).ln();
        for (o, &v) in out.iter_mut().zip(x) {
            *o = (v - m) - ls;
        }
    } else {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = v - m;
        }
        // SAFETY: `out` holds `out.len()` values, read and written in
        // place (the runtime allows `out == x`).
        unsafe { kiln_exp_f64(out.as_ptr(), out.as_mut_ptr(), out.len()) };
        let s: f64 = out.iter().sum();
        for o in out.iter_mut() {
            *o /= s;
        }
    }
}

impl Exec<'_> {
    /// Runs a softmax step.
    pub(super) fn softmax(&mut self, name: &str, step: &SoftmaxStep) -> Result<()> {
        let SoftmaxStep {
            axis,
            log,
            input,
            output,
        } = step;
        let x = self.get(*input);
        let x = self.standard(name, x)?;
        let shape = x.shape.to_vec();
        let total = x.len();
        let (outer, n, inner) = match *axis {
            None => (1, total, 1),
            Some(a) => (
                shape[..a].iter().product(),
                shape[a],
                shape[a + 1..].iter().product(),
            ),
        };
        let out = self.alloc_slot(name, *output, x.dtype, &shape)?;
        if total > 0 {
            let mut xs = vec![0.0f64; n];
            let mut os = vec![0.0f64; n];
            // SAFETY: `x` and `out` are standard-layout arrays of `total`
            // elements of the (float) dtype; `out` is fresh (or the
            // caller's destination) and never aliases `x`.
            unsafe {
                match x.dtype {
                    DType::F64 => {
                        let xv = std::slice::from_raw_parts(x.ptr as *const f64, total);
                        let ov = std::slice::from_raw_parts_mut(out.ptr as *mut f64, total);
                        if inner == 1 {
                            for (xl, ol) in xv.chunks_exact(n).zip(ov.chunks_exact_mut(n)) {
                                lane(xl, ol, *log);
                            }
                        } else {
                            strided(
                                outer,
                                n,
                                inner,
                                |i| xv[i],
                                |i, v| ov[i] = v,
                                &mut xs,
                                &mut os,
                                *log,
                            );
                        }
                    }
                    DType::F32 => {
                        let xv = std::slice::from_raw_parts(x.ptr as *const f32, total);
                        let ov = std::slice::from_raw_parts_mut(out.ptr as *mut f32, total);
                        strided(
                            outer,
                            n,
                            inner,
                            |i| f64::from(xv[i]),
                            |i, v| ov[i] = v as f32,
                            &mut xs,
                            &mut os,
                            *log,
                        );
                    }
                    d => unreachable!("softmax of {d}: type inference admits floats only"),
                }
            }
        }
        self.slots[*output] = Some(out);
        Ok(())
    }
}

/// Normalises every lane of an `(outer, n, inner)` array read by `get` and
/// written by `set` (flat indices), through the scratch rows `xs` and `os`
/// (`n` long each).
#[allow(clippy::too_many_arguments)]
fn strided(
    outer: usize,
    n: usize,
    inner: usize,
    get: impl Fn(usize) -> f64,
    mut set: impl FnMut(usize, f64),
    xs: &mut [f64],
    os: &mut [f64],
    log: bool,
) {
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            for (k, v) in xs.iter_mut().enumerate() {
                *v = get(base + k * inner);
            }
            lane(xs, os, log);
            for (k, &v) in os.iter().enumerate() {
                set(base + k * inner, v);
            }
        }
    }
}
