//! The binary kernel `hypot(x, y)` = sqrt(x² + y²) without intermediate
//! overflow or underflow, with C99's special cases.
//!
//! Method: a = max(|x|, |y|), b = min(|x|, |y|), both scaled by one power
//! of two when a is outside [2^-500, 2^500] (2^-600 above, 2^600 below),
//! so that a² and b² neither overflow nor lose a's bits to the subnormals
//! (b² may still underflow where b is below 2^-511 of a: it no longer
//! changes the result). a² and b² are formed exactly as double-doubles
//! (Dekker's product with an FMA) and summed with one rounding
//! left, so the radicand is within half an ULP and its square root within
//! a quarter ULP of the exact value before the final rounding: the result
//! is within 1 ULP by construction (the scaling back is exact but for
//! subnormal results). Branch-free, so the lanes of a vector evaluate it
//! side by side; one square root and no division per lane.
//!
//! Special cases (C99 F.9.4.3): hypot(±inf, y) = +inf even for a NaN y;
//! otherwise a NaN gives NaN; hypot(±0, ±0) = +0; the result is never
//! negative.
//!
//! Accuracy (measured against std's `hypot`, see ACCURACY.md): <= 1 ULP in
//! f64 (asserted); the f32 form computes the same kernel on widened inputs
//! and rounds once.

use super::common::{fast_two_sum, sel, two_prod};

/// From this magnitude of the larger operand on, both are scaled by
/// [`DOWN`] (2^500: the scaled square stays below 2^848).
const BIG: f64 = f64::from_bits((1023 + 500) << 52);

/// Below this magnitude of the larger operand, both are scaled by [`UP`]
/// (2^-500: a subnormal operand becomes a normal one of at least 2^-474).
const SMALL: f64 = f64::from_bits((1023 - 500) << 52);

/// 2^-600.
const DOWN: f64 = f64::from_bits((1023 - 600) << 52);

/// 2^600.
const UP: f64 = f64::from_bits((1023 + 600) << 52);

/// hypot(x, y) (module docs).
#[inline(always)]
pub(crate) fn hypot(x: f64, y: f64) -> f64 {
    let (ax, ay) = (x.abs(), y.abs());
    // A NaN operand lands in `a` or `b` (the comparison is false) and makes
    // the result NaN; an infinite one is replaced last.
    let swap = ax < ay;
    let a = sel(swap, ay, ax);
    let b = sel(swap, ax, ay);
    let (big, small) = (a > BIG, a < SMALL);
    let scale = sel(big, DOWN, sel(small, UP, 1.0));
    let unscale = sel(big, UP, sel(small, DOWN, 1.0));
    let (a, b) = (a * scale, b * scale);
    let (aa, aa_lo) = two_prod(a, a);
    let (bb, bb_lo) = two_prod(b, b);
    // aa >= bb, so the fast two-sum is exact.
    let (s, s_lo) = fast_two_sum(aa, bb);
    let r = (s + (s_lo + (aa_lo + bb_lo))).sqrt() * unscale;
    sel(ax == f64::INFINITY || ay == f64::INFINITY, f64::INFINITY, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_cases_and_specials() {
        let inf = f64::INFINITY;
        let nan = f64::NAN;
        assert_eq!(hypot(3.0, 4.0), 5.0);
        assert_eq!(hypot(-5.0, 12.0), 13.0);
        assert_eq!(hypot(0.0, -7.5), 7.5);
        assert_eq!(hypot(-0.0, -0.0).to_bits(), 0.0f64.to_bits());
        assert_eq!(hypot(inf, nan), inf);
        assert_eq!(hypot(nan, -inf), inf);
        assert!(hypot(nan, 1.0).is_nan());
        assert!(hypot(1.0, nan).is_nan());
        assert_eq!(hypot(f64::MAX, f64::MAX), inf);
        assert_eq!(hypot(f64::MAX, 1.0), f64::MAX);
        // The smallest subnormal is exact, alone and with itself scaled.
        let tiny = f64::from_bits(1);
        assert_eq!(hypot(tiny, 0.0), tiny);
        assert_eq!(
            hypot(3.0 * 2f64.powi(-1070), 4.0 * 2f64.powi(-1070)),
            5.0 * 2f64.powi(-1070)
        );
        // Both scaling ranges, with results that are exact.
        for k in [1000, 600, 500, 499, -499, -500, -600, -1000] {
            let p = 2f64.powi(k);
            assert_eq!(hypot(3.0 * p, -4.0 * p), 5.0 * p, "2^{k}");
        }
    }

    /// Within 1 ULP of std's hypot across the scaling thresholds, with
    /// operands of very different sizes.
    #[test]
    fn within_one_ulp_of_std_around_the_thresholds() {
        let mut worst = 0u64;
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        for e in [
            -1074, -1022, -600, -520, -501, -500, -499, -300, 0, 300, 499, 500, 501, 520, 1000,
            1023,
        ] {
            for _ in 0..2000 {
                let a = (1.0 + next())
                    * 2f64.powi(e.max(-1022))
                    * if e < -1022 { 2f64.powi(e + 1022) } else { 1.0 };
                let b = a * 2f64.powf(-60.0 * next()) * if next() < 0.5 { -1.0 } else { 1.0 };
                let (got, want) = (hypot(a, b), a.hypot(b));
                worst = worst.max(got.to_bits().abs_diff(want.to_bits()));
            }
        }
        assert!(worst <= 1, "{worst} ULP");
    }
}
