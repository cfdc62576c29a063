//! The binary power kernel `pow(x, y)` with the C99 / IEEE 754 special
//! cases.
//!
//! Method: x^y = e^(y·log|x|) with log|x| as a double-double (`log_dd`,
//! ~2^-64 relative), the product y·log|x| formed exactly (Dekker) and fed
//! to the double-double `exp_dd`; the sign is (-1)^y for negative x and odd
//! integer y (parity read from the bits of |y| + 2^52), NaN for negative
//! finite x and non-integer y. Special cases: pow(x, ±0) = 1,
//! pow(1, y) = 1, pow(-1, ±inf) = 1, pow(±0, y<0) = ±inf, pow(-inf, y)
//! follows the odd-integer rule, everything else involving NaN is NaN.
//!
//! Accuracy (measured against std `powf`, see ACCURACY.md): <= 1 ULP in f64 (asserted <= 2)
//! over the finite range, including results near overflow and in the
//! subnormals. The f32 form ([`pow_f32_kernel`]) uses the plain f64 log
//! and exp instead of their double-double forms, which is exact enough for
//! f32 (faithful after rounding).

use super::common::{sel, two_prod};
use super::exp::{exp, exp_dd};
use super::log::{log, log_dd};

const TWO_POW_52: f64 = 4_503_599_627_370_496.0;
const TWO_POW_53: f64 = 9_007_199_254_740_992.0;

/// x^y.
#[inline(always)]
pub(crate) fn pow(x: f64, y: f64) -> f64 {
    let ax = x.abs();
    let ay = y.abs();
    // |x|^y for finite nonzero |x|; ±0 and ±inf flow through as ∓inf logs.
    let axs = sel(ax == 0.0 || ax == f64::INFINITY, 1.0, ax);
    let (lh, ll) = log_dd(axs);
    let lh = sel(
        ax == 0.0,
        f64::NEG_INFINITY,
        sel(ax == f64::INFINITY, ax, lh),
    );
    let lh = sel(ax.is_nan(), ax, lh);
    let ll = sel(ax == 0.0 || ax == f64::INFINITY, 0.0, ll);
    // y is clamped so that the product's error term cannot overflow;
    // |y| > 1e300 saturates the result anyway (x == 1 is handled below).
    let yc = sel(ay > 1e300, sel(y > 0.0, 1e300, -1e300), y);
    let (ph, pl0) = two_prod(yc, lh);
    let pl = pl0 + yc * ll;
    // The tail only matters when the result is finite and nonzero.
    let pl = sel(pl.is_finite() && ph.abs() < 2000.0, pl, 0.0);
    finish(x, y, exp_dd(ph, pl))
}

/// x^y for f32 inputs widened to f64 (the f32 `pow`, rounded by the
/// caller): the special cases of [`pow`], and |x|^y = e^(y·ln|x|) from the
/// plain f64 log and exp (each <= 1 ULP) instead of their double-double
/// forms. Wherever the result is in f32's range, |y·ln|x|| < 104, so the
/// exponent's error is below 2^-44 relative to the result, far under f32's
/// half ULP: the rounded result is faithful, and correctly rounded unless
/// the exact value lies within 2^-44 of a midpoint. About a third of the
/// f64 kernel's work.
#[inline(always)]
pub(crate) fn pow_f32_kernel(x: f64, y: f64) -> f64 {
    // log handles 0 (-inf), inf and NaN; 0·inf (y = 0) is replaced below.
    finish(x, y, exp(y * log(x.abs())))
}

/// The sign and special cases of x^y around r = |x|^y: (-1)^y for
/// negative x and odd integer y (parity read from the bits of |y| + 2^52),
/// NaN for negative finite x and non-integer y, pow(x, ±0) = 1,
/// pow(1, y) = 1, pow(-1, ±inf) = 1.
#[inline(always)]
fn finish(x: f64, y: f64, r: f64) -> f64 {
    let ax = x.abs();
    let ay = y.abs();
    let t = sel(ay < TWO_POW_52, ay + TWO_POW_52, ay);
    let is_int = ay >= TWO_POW_52 || t - TWO_POW_52 == ay;
    let odd = is_int && ay < TWO_POW_53 && (t.to_bits() & 1) == 1;
    let r = sel(x.is_sign_negative() && odd, -r, r);
    let r = sel(x < 0.0 && x > f64::NEG_INFINITY && !is_int, f64::NAN, r);
    let r = sel(ax == 1.0 && ay == f64::INFINITY, 1.0, r);
    let r = sel(x == 1.0, 1.0, r);
    sel(y == 0.0, 1.0, r)
}
