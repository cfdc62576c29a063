//! Hyperbolic kernels `tanh`, `sinh`, `cosh` and their inverses `atanh`,
//! `asinh`, `acosh`.
//!
//! Method: tanh(t) for t = |x| < 9/16 by a rational fit
//! t + t³·P(t²)/Q(t²) (the correction is < 11% of t, so its rounding
//! errors are damped; 5 FMAs instead of the 19 of a Taylor series); for
//! t >= 9/16 as 1 - 2/(E+1) with E = e^(2t) = 2^k·e^r from a gather-free
//! Cody-Waite reduction 2t = k·ln2 + r (t clamped to 20 first, where tanh
//! is ±1 in f64) and e^r = (Q + S)/(Q - S), S = h·(Q + h²·P), h = r/2:
//! the same fit at |h| <= 0.174 (tanh(h) = S/Q), so both
//! ranges share one evaluation of P and Q and no exp polynomial is needed
//! (4.4 against 5.4 ms for 4e6 elements on two AVX2 threads, Zen 3, with
//! a separate degree-13 e^r). Both ranges are evaluated branch-free and
//! share one division: (numerator, denominator) are selected per lane
//! first. The sign is copied back last, so tanh(-0) = -0 and tiny x give
//! x. sinh for
//! |x| < 1 by its Taylor series to x^19, otherwise E - 1/(4E) with
//! E = e^|x|/2 scaled without intermediate overflow; cosh = E + 1/(4E).
//! atanh(t) = log1p(2t/(1-t))/2; asinh(t) = log1p(t + t²/(1+sqrt(1+t²)));
//! acosh(t) = log1p((t-1) + sqrt((t-1)(t+1))); for t > 2^28 both use
//! log(t) + ln2.
//!
//! Accuracy (measured, see ACCURACY.md): <= 3 ULP in f64.

use super::common::{copysign, horner, round_prod_pow2, scale, sel, LN2_HI, LN2_LO, SIGN_BIT};
use super::dispatch::LANES;
use super::exp::exp_reduce;
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

/// tanh(t) = t + t·w·P(w)/Q(w), w = t², for t < [`TANH_SPLIT`]: the
/// coefficients of P, fitted with Q's to the relative error of
/// (tanh(t) - t)/(t·w) on w <= 0.5625² (iterated weighted least squares
/// towards minimax with 48-digit arithmetic, then rounded to f64). Error of
/// the fit < 4.9e-18 relative; the correction it forms is < 11% of t. The
/// depth-7 continued fraction this replaces (the Padé form, exact at 0)
/// needed two coefficients more for the same bound; the depth-6 one
/// reached 6.8 ULP near the split.
const TANH_P: [f64; 3] = [
    -0.333_333_333_333_333_3,
    -0.020_501_541_705_709_028,
    -0.000_199_299_559_333_289_4,
];

/// Denominator Q(w) of the tanh fit (see [`TANH_P`]).
const TANH_Q: [f64; 4] = [
    1.0,
    0.461_504_625_117_125_9,
    0.023_294_986_820_131_83,
    0.000_206_663_888_376_272_36,
];

/// tanh takes the rational fit below this |x| and
/// 1 - 2/(e^(2|x|) + 1) from it on (tanh(9/16) > 1/2, so the subtraction
/// lands in [1/2, 1) and keeps its rounding below 1/2 ULP).
const TANH_SPLIT: f64 = 0.5625;

/// |x| is clamped to this before e^(2|x|) is formed: tanh(x) rounds to ±1 for |x| > 19.1.
const TANH_CLAMP: f64 = 20.0;

/// tanh x over a group of lanes, statement by statement: each step runs
/// over all the lanes before the next starts, so the vectors of a group
/// are interleaved and the long dependency chain of one vector (about 60
/// cycles) overlaps the others'. Written lane by lane (each lane's whole
/// chain in one loop body), the code held one vector's chain at a time and
/// the out-of-order window could not cover it (`cargo run --release -p
/// kiln-runtime --example kernel_rate -- tanh`, µs per 4096, best of 5,
/// three alternated rounds: AVX2 6.20-6.38 → 5.68-5.75, AVX-512 3.83-3.85
/// → 3.69-3.71). The division and the finish come last.
///
/// Both ranges end in one expression, tanh t = a + 2·num/den, so that
/// only the numerator and the addend are selected per lane and the
/// denominator is computed alike for all: small lanes have k = 0 (their
/// reduction is skipped by reducing 0 instead of t, so h = t exactly) and
/// den = N + D = 2Q up to roundings the small correction damps. The sign
/// is or-ed in (the result is >= +0 before it). Against the form with a
/// selected denominator and a selected finish (`1 - q` or `t + q`), on
/// Zen 1 AVX2: 18.5-19.1 → 15.6-16.5 µs per 4096 (`kernel_rate -- tanh`,
/// three alternated rounds), the same values on the accuracy sample; with
/// the minimax fit instead of the depth-7 continued fraction (two FMAs
/// fewer), 14.7-15.0 against 16.1-16.2 in the same rounds.
#[inline(always)]
pub(crate) fn tanh_staged(v: &mut [f64; LANES]) {
    let mut t = [0.0; LANES];
    let mut large = [false; LANES];
    let mut h = [0.0; LANES];
    let mut p2k = [0.0f64; LANES];
    let mut w = [0.0; LANES];
    let mut p = [0.0; LANES];
    let mut q = [0.0; LANES];
    let mut num = [0.0; LANES];
    let mut den = [0.0; LANES];
    each_lane(|i| {
        let a = v[i].abs();
        t[i] = sel(a > TANH_CLAMP, TANH_CLAMP, a);
        // NaN is large in neither: it takes the small form and stays NaN.
        large[i] = t[i] >= TANH_SPLIT;
    });
    // Large lanes: 2t = k·ln2 + r with |r| <= ln2/2 from a gather-free
    // reduction, and e^r = (Q + S)/(Q - S) with S = h·(Q + w·P), h = r/2,
    // w = h²: the same fit as the small lanes, at |h| <= 0.174 where it
    // is far more accurate. h is reduced from t directly with the halves
    // of the ln 2 split (k·LN2_HI/2 is exact, so the first FMA is too).
    // k = round(t·2log2(e)) and 2^k come from one FMA (`round_prod_pow2`;
    // a product and an add took one more rounding step on the chain: 5.72
    // → 5.52 µs per 4096 on AVX2, 3.69 → 3.59 on AVX-512, `kernel_rate`,
    // three alternated rounds). Small lanes multiply by 0 instead of
    // 2·log2(e): k = 0 and h = t. Selecting that factor (an AND with a
    // constant) instead of t, which LLVM moved past the FMA as a blend (three
    // µops in AVX2 on a Xeon with AVX-512): AVX2 0.99-1.05 → 0.95-0.99 ns a
    // value (`kernel_rate -- tanh`, three alternated rounds), AVX-512 the
    // same. A NaN lane's kf is then t's NaN, so it multiplies a negated
    // constant instead of being negated: every operand NaN of the lane is
    // the same NaN, whichever one an ISA's FMA propagates.
    each_lane(|i| {
        let (kf, pk) = round_prod_pow2(t[i], sel(large[i], 2.0 * LOG2_E, 0.0));
        p2k[i] = pk;
        let hi = kf.mul_add(-0.5 * LN2_HI, t[i]);
        h[i] = kf.mul_add(-0.5 * LN2_LO, hi);
    });
    each_lane(|i| w[i] = h[i] * h[i]);
    each_lane(|i| p[i] = horner(w[i], &TANH_P));
    each_lane(|i| q[i] = horner(w[i], &TANH_Q));
    // Small lanes: tanh t = t + t·w·P/Q = t + 2·(t·w·P)/(N + D) (the
    // correction is < 11% of t). Large lanes: tanh t = 1 - 2/(E + 1) =
    // 1 + 2·(S - Q)/(2^k·N + D) with N = Q + S, D = Q - S, E = 2^k·N/D;
    // k >= 2 there, so the quotient is < 1/2 and the sum adds no
    // cancellation.
    each_lane(|i| {
        let hwp = h[i] * w[i] * p[i];
        let s = h[i].mul_add(q[i], hwp);
        let (n, minus_d) = (q[i] + s, s - q[i]);
        num[i] = sel(large[i], minus_d, hwp);
        den[i] = p2k[i].mul_add(n, -minus_d);
    });
    each_lane(|i| {
        let a = sel(large[i], 1.0, t[i]);
        let r = 2.0f64.mul_add(num[i] / den[i], a);
        v[i] = f64::from_bits(r.to_bits() | (v[i].to_bits() & SIGN_BIT));
    });
}

/// Runs `step` on every lane index of a group, in order: one statement of
/// a statement-by-statement kernel (see [`tanh_staged`]).
#[inline(always)]
fn each_lane(mut step: impl FnMut(usize)) {
    for i in 0..LANES {
        step(i);
    }
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
