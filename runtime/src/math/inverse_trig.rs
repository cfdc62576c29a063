//! Inverse circular kernels `atan`, `asin`, `acos`.
//!
//! Method: atan reduces |x| to |u| <= tan(π/8) with three branch-free
//! cases (u = t, u = (t-1)/(t+1) + π/4, u = -1/t + π/2) and evaluates the
//! odd Taylor series to u^41 (truncation < 2e-17). asin(x) =
//! atan(x / sqrt((1-x)(1+x))) and acos(x) = 2·atan(sqrt((1-x)/(1+x))),
//! both formulations avoid cancellation near ±1.
//!
//! Accuracy (measured, see ACCURACY.md): <= 3 ULP in f64 (atan <= 2).

use super::common::{copysign, horner, sel};

const PIO2_HI: f64 = std::f64::consts::FRAC_PI_2;
const PIO2_LO: f64 = 6.123_233_995_736_766e-17;
const PIO4_HI: f64 = std::f64::consts::FRAC_PI_4;
const PIO4_LO: f64 = 3.061_616_997_868_383e-17;
const TAN_PI_8: f64 = 0.414_213_562_373_095_03;
const TAN_3PI_8: f64 = 2.414_213_562_373_095;

/// (-1)^n/(2n+1) for n = 1..=20: atan(u) = u + u·z·A(z), z = u².
const ATAN_C: [f64; 20] = [
    -1.0 / 3.0,
    1.0 / 5.0,
    -1.0 / 7.0,
    1.0 / 9.0,
    -1.0 / 11.0,
    1.0 / 13.0,
    -1.0 / 15.0,
    1.0 / 17.0,
    -1.0 / 19.0,
    1.0 / 21.0,
    -1.0 / 23.0,
    1.0 / 25.0,
    -1.0 / 27.0,
    1.0 / 29.0,
    -1.0 / 31.0,
    1.0 / 33.0,
    -1.0 / 35.0,
    1.0 / 37.0,
    -1.0 / 39.0,
    1.0 / 41.0,
];

/// atan(t) for t >= 0 (or NaN).
#[inline(always)]
fn atan_pos(t: f64) -> f64 {
    let mid = t > TAN_PI_8;
    let far = t > TAN_3PI_8;
    let u = sel(far, -1.0 / t, sel(mid, (t - 1.0) / (t + 1.0), t));
    let b_hi = sel(far, PIO2_HI, sel(mid, PIO4_HI, 0.0));
    let b_lo = sel(far, PIO2_LO, sel(mid, PIO4_LO, 0.0));
    let z = u * u;
    let p = u + u * z * horner(z, &ATAN_C);
    b_hi + (p + b_lo)
}

/// arctan x.
#[inline(always)]
pub(crate) fn atan(x: f64) -> f64 {
    copysign(atan_pos(x.abs()), x)
}

/// arcsin x (NaN outside [-1, 1]).
#[inline(always)]
pub(crate) fn asin(x: f64) -> f64 {
    let a = x.abs();
    let u = a / ((1.0 - a) * (1.0 + a)).sqrt();
    copysign(atan_pos(u), x)
}

/// arccos x (NaN outside [-1, 1]).
#[inline(always)]
pub(crate) fn acos(x: f64) -> f64 {
    2.0 * atan_pos(((1.0 - x) / (1.0 + x)).sqrt())
}
