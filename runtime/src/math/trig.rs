//! Circular kernels `sin`, `cos`, `tan`.
//!
//! Method: k = round(x·2/π); r = x - k·π/2 with π/2 split in three 30-bit
//! heads and a 53-bit tail, the head products exact and the subtractions
//! error-free (two-sum) for |k| < 2^23, i.e. |x| < 1.3e7; Taylor polynomials
//! for sin (to r^17) and cos (to r^18) on |r| <= π/4; quadrant selection by
//! k mod 4; tan = sin/cos (or -cos/sin in odd quadrants).
//!
//! Accuracy (measured, see ACCURACY.md): sin/cos <= 1 ULP and tan <= 3 ULP
//! in f64 for |x| < [`EXACT_LIMIT`] (1.3e7, where the head products stop
//! being exact). The block drivers recompute every lane at or beyond that
//! limit (and ±inf / NaN) with the C library's correctly reduced function
//! (the [`Fixup`]s below), so the block functions are accurate for every
//! argument; the vector path alone would lose accuracy beyond 1.3e7 and
//! return NaN from 2^50 on.

use super::common::{copysign, horner, round_k, sel, two_sum};
use super::dispatch::Fixup;

const PIO2_1: f64 = 1.570_796_327_665_448_2;
const PIO2_2: f64 = -8.705_515_692_000_731e-10;
const PIO2_3: f64 = -3.503_434_396_954_818e-19;
const PIO2_4: f64 = -1.135_111_860_752_220_2e-28;

/// Arguments below this magnitude are reduced exactly by [`reduce`].
pub(crate) const EXACT_LIMIT: f64 = 1.3e7;

/// Lanes at or beyond [`EXACT_LIMIT`] take the C library's `sin`.
pub(crate) const SIN_FIXUP: Fixup = Fixup {
    limit: EXACT_LIMIT,
    exact: f64::sin,
};
/// Lanes at or beyond [`EXACT_LIMIT`] take the C library's `cos`.
pub(crate) const COS_FIXUP: Fixup = Fixup {
    limit: EXACT_LIMIT,
    exact: f64::cos,
};
/// Lanes at or beyond [`EXACT_LIMIT`] take the C library's `tan`.
pub(crate) const TAN_FIXUP: Fixup = Fixup {
    limit: EXACT_LIMIT,
    exact: f64::tan,
};

/// (-1)^n/(2n+1)! for n = 1..=8: sin(r) = r + r³·S(r²).
pub(crate) const SIN_C: [f64; 8] = [
    -1.0 / 6.0,
    1.0 / 120.0,
    -1.0 / 5040.0,
    1.0 / 362_880.0,
    -1.0 / 39_916_800.0,
    1.0 / 6_227_020_800.0,
    -1.0 / 1_307_674_368_000.0,
    1.0 / 355_687_428_096_000.0,
];

/// (-1)^n/(2n)! for n = 2..=9: cos(r) = 1 - r²/2 + r⁴·C(r²).
pub(crate) const COS_C: [f64; 8] = [
    1.0 / 24.0,
    -1.0 / 720.0,
    1.0 / 40320.0,
    -1.0 / 3_628_800.0,
    1.0 / 479_001_600.0,
    -1.0 / 87_178_291_200.0,
    1.0 / 20_922_789_888_000.0,
    -1.0 / 6_402_373_705_728_000.0,
];

/// Reduces x to (sin r, cos r, k mod 4).
#[inline(always)]
fn reduce(x: f64) -> (f64, f64, u64) {
    // 2^50 and above, also inf / NaN.
    let big = x.abs() >= 1_125_899_906_842_624.0 || x.is_nan();
    let xc = sel(big, 0.0, x);
    let (kf, k) = round_k(xc * std::f64::consts::FRAC_2_PI);
    let a = xc - kf * PIO2_1;
    let (s1, e1) = two_sum(a, -(kf * PIO2_2));
    let (s2, e2) = two_sum(s1, -(kf * PIO2_3));
    let r = s2 + ((e1 + e2) - kf * PIO2_4);
    let r = sel(big, f64::NAN, r);
    let z = r * r;
    let s = r + r * z * horner(z, &SIN_C);
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    let c = w + (((1.0 - w) - hz) + z * z * horner(z, &COS_C));
    // r = ±0 keeps the sign of x (sin(-0) = -0).
    let s = sel(r == 0.0, copysign(0.0, xc), s);
    (s, c, (k as u64) & 3)
}

/// sin x.
#[inline(always)]
pub(crate) fn sin(x: f64) -> f64 {
    let (s, c, q) = reduce(x);
    let v = sel(q & 1 == 1, c, s);
    sel(q & 2 == 2, -v, v)
}

/// cos x.
#[inline(always)]
pub(crate) fn cos(x: f64) -> f64 {
    let (s, c, q) = reduce(x);
    let q = q.wrapping_add(1);
    let v = sel(q & 1 == 1, c, s);
    sel(q & 2 == 2, -v, v)
}

/// tan x.
#[inline(always)]
pub(crate) fn tan(x: f64) -> f64 {
    let (s, c, q) = reduce(x);
    sel(q & 1 == 1, -c / s, s / c)
}
