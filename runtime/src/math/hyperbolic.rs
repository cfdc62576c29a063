//! Hyperbolic kernels `tanh`, `sinh`, `cosh` and their inverses `atanh`,
//! `asinh`, `acosh`.
//!
//! Method: tanh(t) for t = |x| < 9/16 by its continued fraction
//! t/(1 + t²/(3 + t²/(5 + ...))) truncated at depth 7 and written as
//! t + t³·P(t²)/Q(t²) (the correction is < 11% of t, so its rounding
//! errors are damped; 7 FMAs instead of the 19 of a Taylor series); for
//! t >= 9/16 as 1 - 2/(E+1) with E + 1 = 2^k·q + (2^k + 1) formed with
//! one rounding from a gather-free Cody-Waite reduction 2t = k·ln2 + r and
//! e^r - 1 by its degree-13 Taylor polynomial evaluated with Estrin's
//! scheme (short dependency chain; t clamped to 20 first, where tanh is ±1
//! in f64; the table kernel's gathers are slower on AMD Zen). Both
//! ranges are evaluated branch-free and share one division: (numerator,
//! denominator) are selected per lane first. The
//! sign is copied back last, so tanh(-0) = -0 and tiny x give x. sinh for
//! |x| < 1 by its Taylor series to x^19, otherwise E - 1/(4E) with
//! E = e^|x|/2 scaled without intermediate overflow; cosh = E + 1/(4E).
//! atanh(t) = log1p(2t/(1-t))/2; asinh(t) = log1p(t + t²/(1+sqrt(1+t²)));
//! acosh(t) = log1p((t-1) + sqrt((t-1)(t+1))); for t > 2^28 both use
//! log(t) + ln2.
//!
//! Accuracy (measured, see ACCURACY.md): <= 3 ULP in f64.

use super::common::{copysign, horner, pow2i, round_k, scale, sel, LN2_HI, LN2_LO};
use super::exp::{exp_reduce, EXP_TAIL};
use super::log::{log1p, log_corr};
use std::f64::consts::LOG2_E;

/// 1/(2n+1)! for n = 1..=9: sinh(x) = x + x³·S(x²).
const SINH_C: [f64; 9] = [
    1.0 / 6.0,
    1.0 / 120.0,
    1.0 / 5040.0,
    1.0 / 362_880.0,
    1.0 / 39_916_800.0,
    1.0 / 6_227_020_800.0,
    1.0 / 1_307_674_368_000.0,
    1.0 / 355_687_428_096_000.0,
    1.0 / 121_645_100_408_832_000.0,
];

/// Numerator of the tanh continued fraction truncated at depth 7, as
/// tanh(t) = t + t·z·P(z)/Q(z), z = t² (exact rationals rounded to f64;
/// relative truncation error < 2e-18 for t < [`TANH_SPLIT`]).
const TANH_P: [f64; 4] = [-1.0 / 3.0, -1.0 / 45.0, -2.0 / 6825.0, -1.0 / 2_027_025.0];

/// Denominator Q(z) of the depth-7 tanh continued fraction (see [`TANH_P`]).
const TANH_Q: [f64; 5] = [1.0, 7.0 / 15.0, 1.0 / 39.0, 2.0 / 6435.0, 1.0 / 2_027_025.0];

/// tanh takes the continued fraction below this |x| and
/// 1 - 2/(e^(2|x|) + 1) from it on (tanh(9/16) > 1/2, so the subtraction
/// lands in [1/2, 1) and keeps its rounding below 1/2 ULP). Its square is
/// exact, so `t < TANH_SPLIT` and `t² < TANH_SPLIT²` select the same lanes.
const TANH_SPLIT: f64 = 0.5625;

/// |x| is clamped to this before e^(2|x|) is formed: tanh(x) rounds to ±1 for |x| > 19.1.
const TANH_CLAMP: f64 = 20.0;

/// e^r - 1 for |r| <= ln2/2 with T of [`EXP_TAIL`] by Estrin's scheme: a
/// dependency chain of four FMAs after r⁸ instead of Horner's eleven. The
/// tanh loop is latency bound (a group of 16 lanes is more work than the
/// reorder window holds), so the shorter chain is what makes it fast.
#[inline(always)]
fn expm1_estrin(r: f64) -> f64 {
    let c = &EXP_TAIL;
    let r2 = r * r;
    let r4 = r2 * r2;
    let r8 = r4 * r4;
    let q0 = c[3].mul_add(r, c[2]).mul_add(r2, c[1].mul_add(r, c[0]));
    let q1 = c[7].mul_add(r, c[6]).mul_add(r2, c[5].mul_add(r, c[4]));
    let q2 = c[11].mul_add(r, c[10]).mul_add(r2, c[9].mul_add(r, c[8]));
    let t = q2.mul_add(r8, q1.mul_add(r4, q0));
    r2.mul_add(t, r)
}

/// tanh x.
#[inline(always)]
pub(crate) fn tanh(x: f64) -> f64 {
    let t = x.abs();
    let t = sel(t > TANH_CLAMP, TANH_CLAMP, t);
    let z = t * t;
    // E + 1 = 2^k·q + (2^k + 1) with E = e^(2t) = 2^k·(1 + q), k <= 58,
    // from a gather-free reduction (vector gathers are slow on AMD Zen):
    // 2t = k·ln2 + r, |r| <= ln2/2 (k·LN2_HI is exact).
    let (kf, k) = round_k(2.0 * t * LOG2_E);
    let q = expm1_estrin((2.0 * t - kf * LN2_HI) - kf * LN2_LO);
    let p2 = pow2i(k);
    let e1 = q.mul_add(p2, p2 + 1.0);
    // One division serves both ranges. The denominator is selected on
    // z (same lanes as t, NaN in neither) so that LLVM does not hoist the
    // division into both arms of one select.
    let small = t < TANH_SPLIT;
    let num = sel(small, t * z * horner(z, &TANH_P), 2.0);
    let den = sel(z < TANH_SPLIT * TANH_SPLIT, horner(z, &TANH_Q), e1);
    let r = num / den;
    copysign(sel(small, t + r, 1.0 - r), x)
}

/// E = e^t / 2 for t >= 0 without intermediate overflow.
#[inline(always)]
fn half_exp(t: f64) -> f64 {
    let (q, k) = exp_reduce(t, 0.0);
    scale(1.0 + q, k - 1)
}

/// sinh x.
#[inline(always)]
pub(crate) fn sinh(x: f64) -> f64 {
    let t = x.abs();
    let z = t * t;
    let small = t + t * z * horner(z, &SINH_C);
    let e = half_exp(t);
    let big = e - 0.25 / e;
    copysign(sel(t < 1.0, small, big), x)
}

/// cosh x.
#[inline(always)]
pub(crate) fn cosh(x: f64) -> f64 {
    let e = half_exp(x.abs());
    e + 0.25 / e
}

/// atanh x (NaN outside [-1, 1], ±inf at ±1).
#[inline(always)]
pub(crate) fn atanh(x: f64) -> f64 {
    let t = x.abs();
    copysign(0.5 * log1p((2.0 * t) / (1.0 - t)), x)
}

const TWO_POW_28: f64 = 268_435_456.0;

/// asinh x.
#[inline(always)]
pub(crate) fn asinh(x: f64) -> f64 {
    let t = x.abs();
    let big = t > TWO_POW_28;
    let y = t + t * t / (1.0 + (1.0 + t * t).sqrt());
    let u = 1.0 + y;
    let c = y - (u - 1.0);
    let v = log_corr(sel(big, t, u), sel(big, 0.0, c));
    let v = sel(big, v + std::f64::consts::LN_2, v);
    copysign(sel(t == 0.0, 0.0, v), x)
}

/// acosh x (NaN below 1).
#[inline(always)]
pub(crate) fn acosh(x: f64) -> f64 {
    let big = x > TWO_POW_28;
    let a = x - 1.0;
    let y = a + (a * (x + 1.0)).sqrt();
    let u = 1.0 + y;
    let c = y - (u - 1.0);
    let v = log_corr(sel(big, x, u), sel(big, 0.0, c));
    let v = sel(big, v + std::f64::consts::LN_2, v);
    sel(x >= 1.0, v, f64::NAN)
}
