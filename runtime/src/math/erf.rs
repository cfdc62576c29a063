//! Error function kernels `erf` and `erfc`.
//!
//! Method: for |x| < 0.5, erf(x) = x·P(x²) with the Maclaurin series to x^25
//! (truncation < 1e-17 relative). For z >= 0.5, erfc(z) = t·h(t)·e^(-z²)
//! with t = 2/(2+z) and h a 25-term Chebyshev expansion fitted on
//! z in [0.5, 28] (coefficients computed offline with 50-digit arithmetic;
//! truncation < 1e-18 relative); z² is split exactly (Dekker) and passed
//! to the double-double `exp_dd`, so the large exponent costs no accuracy.
//! erf = 1 - erfc for |x| >= 0.5 and erfc(-z) = 2 - erfc(z).
//!
//! Accuracy (measured against the `libm` crate, see ACCURACY.md): erf
//! <= 3 ULP, erfc <= 6 ULP in f64 including the subnormal tail
//! (erfc(x) = 0 for x > 27.3).

use super::common::{clamp_keep_nan, copysign, horner, sel, two_prod};
use super::exp::exp_dd;

/// 2/sqrt(π)·(-1)^n/(n!(2n+1)) for n = 0..=12.
const ERF_C: [f64; 13] = [
    std::f64::consts::FRAC_2_SQRT_PI,
    -0.376_126_389_031_837_54,
    0.112_837_916_709_551_26,
    -0.026_866_170_645_131_252,
    0.005_223_977_625_442_188,
    -0.000_854_832_702_345_085_3,
    0.000_120_553_329_817_896_64,
    -1.492_565_035_840_625e-5,
    1.646_211_436_588_924_8e-6,
    -1.636_584_469_123_492_4e-7,
    1.480_719_281_587_921_8e-8,
    -1.229_055_530_171_792_8e-9,
    9.422_759_064_650_411e-11,
];

/// Chebyshev coefficients of h(t) = erfc(z)·e^(z²)/t, t = 2/(2+z), on
/// t in [2/30, 0.8]; the first one is already halved (c0/2).
const ERFC_CHEB: [f64; 25] = [
    0.5018976281803704,
    0.23178744911350016,
    0.03420322851859081,
    0.0020404095785902755,
    -0.0002720840192247113,
    -4.846007722970996e-05,
    3.811300411813548e-06,
    1.0759810418041088e-06,
    -1.0828448927743656e-07,
    -2.4667403642685853e-08,
    4.32658393255272e-09,
    4.601957737501562e-10,
    -1.7605189481375562e-10,
    9.89800065144969e-13,
    6.13384007523233e-12,
    -7.605654768854709e-13,
    -1.3785321190520163e-13,
    4.952182335054783e-14,
    -1.6934130932212022e-15,
    -1.838515038763985e-15,
    3.8118047147047003e-16,
    1.588826410418733e-17,
    -2.0513008082288032e-17,
    3.1669263535558814e-18,
    3.6459753789663314e-19,
];
const T_LO: f64 = 2.0 / 30.0;
const T_HI: f64 = 0.8;

/// erf(x) for |x| < 0.5 (also fine as a formula elsewhere, but inaccurate).
#[inline(always)]
fn erf_small(x: f64) -> f64 {
    x * horner(x * x, &ERF_C)
}

/// erfc(z) for z >= 0.5 (or NaN); z is clamped to 28 where erfc is 0.
#[inline(always)]
fn erfc_big(z: f64) -> f64 {
    let z = clamp_keep_nan(z, 0.0, 28.0);
    let t = 2.0 / (2.0 + z);
    let u = (2.0 * t - (T_HI + T_LO)) * (1.0 / (T_HI - T_LO));
    // Clenshaw recurrence.
    let u2 = 2.0 * u;
    let mut b1 = 0.0;
    let mut b2 = 0.0;
    let mut j = ERFC_CHEB.len() - 1;
    while j >= 1 {
        let b0 = u2 * b1 - b2 + ERFC_CHEB[j];
        b2 = b1;
        b1 = b0;
        j -= 1;
    }
    let h = u * b1 - b2 + ERFC_CHEB[0];
    let (zz, zz_lo) = two_prod(z, z);
    (t * h) * exp_dd(-zz, -zz_lo)
}

/// The error function.
#[inline(always)]
pub(crate) fn erf(x: f64) -> f64 {
    let a = x.abs();
    let v = sel(a < 0.5, erf_small(a), 1.0 - erfc_big(a));
    copysign(v, x)
}

/// The complementary error function 1 - erf(x).
#[inline(always)]
pub(crate) fn erfc(x: f64) -> f64 {
    let a = x.abs();
    let big = erfc_big(a);
    let v = sel(x < 0.0, 2.0 - big, big);
    let v = sel(a < 0.5, 1.0 - erf_small(x), v);
    // NaN in, the same NaN out: the sign of the NaN the products make
    // depends on how the fused multiply-add orders its NaN operands
    // (hardware or the baseline's software fma).
    sel(x.is_nan(), x, v)
}
