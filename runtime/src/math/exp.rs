//! Exponential kernels: `exp`, `exp2`, `expm1` and the double-double input
//! variant `exp_dd` used by `pow`, `erfc`, `sinh` and `cosh`.
//!
//! Method: Cody-Waite reduction x = k·ln2 + r with |r| <= ln2/2 (ln2 split in
//! a 32-bit head and a tail so k·LN2_HI is exact), degree-13 Taylor polynomial
//! for e^r (truncation error < 6e-18 relative), then an exact two-step
//! scaling by 2^k that overflows to inf and underflows gradually through the
//! subnormals. expm1 uses its series directly for |x| < 0.7. Accuracy (measured, see ACCURACY.md): exp/exp2/expm1 <= 1 ULP
//! in f64 over the whole domain.

use super::common::{clamp_keep_nan, horner, pow2i, round_k, scale, sel, LN2_HI, LN2_LO};

const LOG2E: f64 = std::f64::consts::LOG2_E;

/// 1/n! for n = 2..=13: the tail of the exp / expm1 Taylor series.
const EXP_TAIL: [f64; 12] = [
    1.0 / 2.0,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5040.0,
    1.0 / 40320.0,
    1.0 / 362_880.0,
    1.0 / 3_628_800.0,
    1.0 / 39_916_800.0,
    1.0 / 479_001_600.0,
    1.0 / 6_227_020_800.0,
];

/// 1/n! for n = 2..=19: the tail of the expm1 series used for |x| < 0.7
/// (truncation < 1e-19 relative).
const EXPM1_DIRECT: [f64; 18] = [
    1.0 / 2.0,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5040.0,
    1.0 / 40320.0,
    1.0 / 362_880.0,
    1.0 / 3_628_800.0,
    1.0 / 39_916_800.0,
    1.0 / 479_001_600.0,
    1.0 / 6_227_020_800.0,
    1.0 / 87_178_291_200.0,
    1.0 / 1_307_674_368_000.0,
    1.0 / 20_922_789_888_000.0,
    1.0 / 355_687_428_096_000.0,
    1.0 / 6_402_373_705_728_000.0,
    1.0 / 121_645_100_408_832_000.0,
];

/// e^r - 1 for |r| <= 0.35 (relative error < 1e-17 before rounding).
#[inline(always)]
fn expm1_poly(r: f64) -> f64 {
    r + r * r * horner(r, &EXP_TAIL)
}

/// Reduces hi + lo (|lo| tiny against hi) to (e^r - 1, k) with
/// e^(hi+lo) = (1 + q)·2^k. `hi` is clamped to [-760, 760] first, so k stays
/// in the range `scale` accepts and the result saturates to 0 / inf.
#[inline(always)]
pub(crate) fn exp_reduce(hi: f64, lo: f64) -> (f64, i64) {
    let xc = clamp_keep_nan(hi, -760.0, 760.0);
    let (kf, k) = round_k(xc * LOG2E);
    let r = ((xc - kf * LN2_HI) - kf * LN2_LO) + lo;
    (expm1_poly(r), k)
}

/// e^(hi + lo) for a double-double argument (|lo| <= ulp(hi)).
#[inline(always)]
pub(crate) fn exp_dd(hi: f64, lo: f64) -> f64 {
    let (q, k) = exp_reduce(hi, lo);
    scale(1.0 + q, k)
}

/// e^x.
#[inline(always)]
pub(crate) fn exp(x: f64) -> f64 {
    exp_dd(x, 0.0)
}

/// 2^x.
#[inline(always)]
pub(crate) fn exp2(x: f64) -> f64 {
    let xc = clamp_keep_nan(x, -1100.0, 1100.0);
    let (kf, k) = round_k(xc);
    let r = (xc - kf) * std::f64::consts::LN_2;
    scale(1.0 + expm1_poly(r), k)
}

/// e^x - 1, accurate near 0 (the sign of -0 is kept).
#[inline(always)]
pub(crate) fn expm1(x: f64) -> f64 {
    let xc = clamp_keep_nan(x, -60.0, 760.0);
    let (kf, k) = round_k(xc * LOG2E);
    let r = (xc - kf * LN2_HI) - kf * LN2_LO;
    let q = expm1_poly(r);
    // Moderate k: 2^k·q + (2^k - 1), both parts exact or single-rounded.
    let kc = if k > 60 { 60 } else { k };
    let s = pow2i(kc);
    let small = q * s + (s - 1.0);
    // Large k: the -1 is below half an ulp.
    let big = scale(1.0 + q, k);
    let res = sel(k > 56, big, small);
    // |x| < 0.7: the direct series avoids the cancellation of k = ±1.
    let direct = x + x * x * horner(x, &EXPM1_DIRECT);
    let res = sel(k == 0, q, res);
    let res = sel(x.abs() < 0.7, direct, res);
    sel(x == 0.0, x, res)
}
