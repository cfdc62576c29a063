//! Execution of the softmax family (`Op::Softmax`: `softmax`,
//! `log_softmax`; `Op::LogSumExp`): the input in standard layout seen as
//! `(outer, n, inner)` around the axis; each lane of `n` values gets two
//! passes of kiln-runtime's vectorised row functions: its maximum `m`
//! (NaN-propagating), then
//! - softmax: `e = exp(x - m)` written into the output with its sum `s`
//!   in one pass, then `e · (1 / s)`;
//! - log-softmax: `s = Σ exp(x - m)` in one fused pass (no exp stored),
//!   and `(x - m) - ln(s)`;
//! - logsumexp: the same `s`, and `ln(s) + m`, one value per lane (the
//!   output is `(outer, inner)` in standard layout: lane `l`'s value is its
//!   element `l`).
//!
//! Lanes along the innermost axis are read in place, and the exp pass of
//! each asks the cache for the next lane of its chunk, so that the next max
//! pass does not wait on memory (a hint: the same bits); other lanes are
//! gathered into a scratch row first (and softmax lanes scattered back).
//! `f32` lanes are computed in `f64` and rounded once, as the reference
//! does. Lanes are spread over kiln's threads (`parallel_for`) once they
//! hold `PAR_ELEMENTS` elements in all.
//!
//! Invariants: every lane is finite and correct whatever its magnitude
//! (the shift by the maximum: ±1e3 inputs give no overflow); a NaN in a
//! lane makes the lane NaN; for softmax, a lane of `-inf` only is NaN and a
//! `+inf` maximum makes the finite elements 0 (`-inf` for log) and the
//! infinite ones NaN; logsumexp is `+inf` at a `+inf` maximum and `-inf`
//! for a lane of `-inf` only or an empty one, all as in the reference; an
//! empty softmax lane writes nothing.

use kiln_runtime::math::{exp_shift_store_f64, extreme_f64, sum_exp_shift_f64};

use super::state::Exec;
use crate::error::Result;
use crate::graph::DType;
use crate::linker::plan::step::{LanePass, SoftmaxStep};

/// Computes `pass` over one contiguous lane `x` into `out`: `n` values, or
/// one for `LogSumExp` (`n = 0` only for `LogSumExp`: `-inf`). `next` is
/// the lane computed after this one, if any, prefetched during the exp pass
/// so that its max pass does not wait on memory.
fn lane(x: &[f64], out: &mut [f64], pass: LanePass, next: Option<&[f64]>) {
    let m = extreme_f64(x, true);
    if pass == LanePass::LogSumExp {
        // An infinite maximum is the value: `+inf`, or `-inf` when every
        // element is `-inf` (`log(0)`); NaN propagates through `m`.
        out[0] = if m.is_infinite() {
            m
        } else {
            sum_exp_shift_f64(x, m, next).ln() + m
        };
        return;
    }
    let log = pass == LanePass::LogSoftmax;
    if m == f64::INFINITY {
        // As the reference: finite elements vanish, infinite ones are NaN.
        let zero = if log { f64::NEG_INFINITY } else { 0.0 };
        for (o, &v) in out.iter_mut().zip(x) {
            *o = if v == m { f64::NAN } else { zero };
        }
        return;
    }
    if log {
        let ls = sum_exp_shift_f64(x, m, next).ln();
        for (o, &v) in out.iter_mut().zip(x) {
            *o = (v - m) - ls;
        }
    } else {
        // The exps and their sum in one pass.
        let s = exp_shift_store_f64(x, m, out, next);
        // One division, then products: within 1.5 ULP of `e / s`, inside
        // the softmax's accuracy contract, and several times cheaper.
        let r = 1.0 / s;
        for o in out.iter_mut() {
            *o *= r;
        }
    }
}

/// Lanes of at least this many elements in all go to one thread: below,
/// the launch costs more than it saves.
const PAR_ELEMENTS: usize = 32 * 1024;

impl Exec<'_> {
    /// Runs a step of the softmax family.
    pub(super) fn softmax(&mut self, name: &str, step: &SoftmaxStep) -> Result<()> {
        let SoftmaxStep {
            axis,
            pass,
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
        let pass = *pass;
        let reduces = pass == LanePass::LogSumExp;
        let out_shape: Vec<usize> = match (reduces, *axis) {
            (false, _) => shape.clone(),
            (true, None) => Vec::new(),
            (true, Some(a)) => [&shape[..a], &shape[a + 1..]].concat(),
        };
        let out = self.alloc_slot(name, *output, x.dtype, &out_shape)?;
        let lanes = outer * inner;
        let dtype = x.dtype;
        // Addresses as integers, so the closure can cross into the pool.
        let (px, po) = (x.ptr as usize, out.ptr as usize);
        // Each lane's output: `n` values at stride `inner` from the lane's
        // own base (softmax), or one value at the lane's index (logsumexp).
        let out_len = if reduces { 1 } else { n };
        // Lanes [s, e): lane l is (o, i) = (l / inner, l % inner), its
        // elements at o·n·inner + i + k·inner for k < n.
        let run = |s: usize, e: usize| {
            let mut scratch = (dtype != DType::F64 || inner != 1)
                .then(|| (vec![0.0f64; n], vec![0.0f64; out_len]));
            for l in s..e {
                let base = (l / inner) * n * inner + l % inner;
                let ob = if reduces { l } else { base };
                // SAFETY: `x` is a standard-layout array of `total` elements
                // of the (float) dtype, `out` one of `out_shape` (`total`
                // elements, or `lanes` for logsumexp); `out` is fresh (or the
                // caller's destination) and never aliases `x`. Lane `l` reads
                // only the `n` elements at `base + k·inner` (k < n), all below
                // `total`, and writes only its `out_len` elements at
                // `ob + k·inner`: below `total` for softmax, `l < lanes` for
                // logsumexp. Distinct lanes (running on different threads)
                // write disjoint elements of `out`. The next lane's slice
                // (inner == 1 here, so lane l + 1 < e is the next n
                // elements, below `total`) is only a prefetch hint.
                unsafe {
                    match (dtype, &mut scratch) {
                        (DType::F64, None) => {
                            let xl: &[f64] = if n == 0 {
                                &[]
                            } else {
                                std::slice::from_raw_parts((px as *const f64).add(base), n)
                            };
                            let ol =
                                std::slice::from_raw_parts_mut((po as *mut f64).add(ob), out_len);
                            // The next lane of this chunk: the next n
                            // elements (lanes along the innermost axis).
                            let next = (l + 1 < e && n > 0).then(|| {
                                std::slice::from_raw_parts((px as *const f64).add(base + n), n)
                            });
                            lane(xl, ol, pass, next);
                        }
                        (DType::F64, Some((xs, os))) => {
                            let (xp, op) = (px as *const f64, po as *mut f64);
                            for (k, v) in xs.iter_mut().enumerate() {
                                *v = *xp.add(base + k * inner);
                            }
                            lane(xs, os, pass, None);
                            for (k, &v) in os.iter().enumerate() {
                                *op.add(ob + k * inner) = v;
                            }
                        }
                        (DType::F32, Some((xs, os))) => {
                            let (xp, op) = (px as *const f32, po as *mut f32);
                            for (k, v) in xs.iter_mut().enumerate() {
                                *v = f64::from(*xp.add(base + k * inner));
                            }
                            lane(xs, os, pass, None);
                            for (k, &v) in os.iter().enumerate() {
                                *op.add(ob + k * inner) = v as f32;
                            }
                        }
                        (d, _) => unreachable!("softmax of {d}: type inference admits floats only"),
                    }
                }
            }
        };
        // Empty lanes: nothing to normalise; logsumexp's is `log(0)`.
        if lanes > 0 && (n > 0 || reduces) {
            let grain = (PAR_ELEMENTS / n.max(1)).max(1);
            kiln_runtime::parallel::parallel_for(lanes, grain, &run);
        }
        self.slots[*output] = Some(out);
        Ok(())
    }
}
