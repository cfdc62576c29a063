//! Logarithm kernels: `log`, `log2`, `log10`, `log1p`, the corrected
//! `log(u) + c/u` form used by `log1p`/`asinh`/`acosh`/`log1mexp`, and the
//! double-double `log_dd` used by `pow`.
//!
//! Method: x = 2^e·m with m in [sqrt(1/2), sqrt(2)) (subnormals are
//! pre-scaled by 2^54), f = m - 1 exactly, s = f/(2+f) and
//! log(1+f) = f - s·(f - R(s²)) with R the series of 2·atanh(s) - 2s + s·f
//! (truncation < 2e-17 relative), evaluated by Estrin's scheme for a short
//! dependency chain. `log_dd` carries s and the s³ term in
//! double-double to reach ~2^-64 relative error. `log1p_unit` (softplus'
//! log1p of e^-|x|) takes its argument itself as the reduced one (no
//! rounding of 1 + x enters) and arranges the series as fdlibm does
//! (`log1p_tail`): within 0.9 ULP of a double-double reference, where
//! `log1p` reaches 1.30 (the tests). Accuracy against std (see
//! ACCURACY.md): <= 1 ULP (log, log1p), <= 2 ULP (log2, log10) in f64.

use super::common::{fast_two_sum, horner, sel, two_prod, two_sum, LN2_HI, LN2_LO};
use super::dispatch::LANES;

/// 2/(2n+1) for n = 1..=11: R(z)/z.
const LOG_R: [f64; 11] = [
    2.0 / 3.0,
    2.0 / 5.0,
    2.0 / 7.0,
    2.0 / 9.0,
    2.0 / 11.0,
    2.0 / 13.0,
    2.0 / 15.0,
    2.0 / 17.0,
    2.0 / 19.0,
    2.0 / 21.0,
    2.0 / 23.0,
];

/// 2/(2n+5) for n = 0..=11: the s^5 tail used by `log_dd`.
const LOG_Q: [f64; 12] = [
    2.0 / 5.0,
    2.0 / 7.0,
    2.0 / 9.0,
    2.0 / 11.0,
    2.0 / 13.0,
    2.0 / 15.0,
    2.0 / 17.0,
    2.0 / 19.0,
    2.0 / 21.0,
    2.0 / 23.0,
    2.0 / 25.0,
    2.0 / 27.0,
];

const TWO_THIRDS_HI: f64 = 0.666_666_666_666_666_6;
const TWO_THIRDS_LO: f64 = 3.700_743_415_417_188e-17;
const LOG10_2_HI: f64 = 0.301_029_995_665_885_5;
const LOG10_2_LO: f64 = -1.904_312_846_716_427_4e-12;
const SQRT_HALF_BITS: u64 = 0x3fe6_a09e_667f_3bcd;

/// Splits a positive finite x into (e, f): x = 2^e·(1+f), 1+f in
/// [sqrt(1/2), sqrt(2)). e is returned as an exact f64 and f is exact.
#[inline(always)]
fn parts(x: f64) -> (f64, f64) {
    let sub = x < f64::MIN_POSITIVE;
    let xs = sel(sub, x * 18_014_398_509_481_984.0, x); // 2^54
    let (e, f) = parts_normal(xs);
    (e - sel(sub, 54.0, 0.0), f)
}

/// [`parts`] for a positive normal x (no subnormal scaling: the f32
/// kernels of `lean` take logarithms of arguments >= 1 only).
#[inline(always)]
pub(crate) fn parts_normal(x: f64) -> (f64, f64) {
    let ix = x
        .to_bits()
        .wrapping_add(0x3ff0_0000_0000_0000 - SQRT_HALF_BITS);
    let eb = (ix >> 52) & 0x7ff;
    // Exact u64 -> f64 for small integers: 2^52 + eb, then subtract.
    let e = f64::from_bits(0x4330_0000_0000_0000 | eb) - (4_503_599_627_370_496.0 + 1023.0);
    let m = f64::from_bits((ix & 0x000f_ffff_ffff_ffff) + SQRT_HALF_BITS);
    (e, m - 1.0)
}

/// R(z)/z = [`LOG_R`] evaluated by Estrin's scheme: a chain of four FMAs
/// after z⁸ instead of Horner's ten (the log kernels are latency bound: a
/// group of 16 lanes is more work than the reorder window holds).
#[inline(always)]
fn log_r(z: f64) -> f64 {
    let c = &LOG_R;
    let z2 = z * z;
    let z4 = z2 * z2;
    let z8 = z4 * z4;
    let q0 = c[3].mul_add(z, c[2]).mul_add(z2, c[1].mul_add(z, c[0]));
    let q1 = c[7].mul_add(z, c[6]).mul_add(z2, c[5].mul_add(z, c[4]));
    let q2 = c[10].mul_add(z2, c[9].mul_add(z, c[8]));
    q2.mul_add(z8, q1.mul_add(z4, q0))
}

/// log(1+f) for f from `parts`.
#[inline(always)]
fn log1p_red(f: f64) -> f64 {
    let s = f / (2.0 + f);
    let z = s * s;
    f - s * (f - z * log_r(z))
}

/// Applies the IEEE special cases of log: +inf -> +inf, ±0 -> -inf,
/// negative or NaN -> NaN.
#[inline(always)]
pub(crate) fn log_special(x: f64, v: f64) -> f64 {
    let v = sel(x == f64::INFINITY, x, v);
    let v = sel(x == 0.0, f64::NEG_INFINITY, v);
    sel(x >= 0.0, v, f64::NAN)
}

/// Natural logarithm over a group of lanes, in two stages: every lane's
/// reduction and the division s = f/(2+f) first, then the series and the
/// finish (as [`log1p_red`] and [`log_special`]; one loop spilled on AVX2:
/// in-cache block 9.87 → 8.3-9.1 µs per 4096 f64 on AVX2, unchanged on
/// AVX-512, `cargo bench -p kiln-runtime --bench math`).
#[inline(always)]
pub(crate) fn log_staged(v: &mut [f64; LANES]) {
    let mut es = [0.0; LANES];
    let mut fs = [0.0; LANES];
    let mut ss = [0.0; LANES];
    for (((x, e), f), s) in v.iter().zip(&mut es).zip(&mut fs).zip(&mut ss) {
        (*e, *f) = parts(*x);
        *s = *f / (2.0 + *f);
    }
    for (((x, e), f), s) in v.iter_mut().zip(&es).zip(&fs).zip(&ss) {
        let z = s * s;
        let l = f - s * (f - z * log_r(z));
        *x = log_special(*x, e * LN2_HI + (l + e * LN2_LO));
    }
}

/// Natural logarithm of one value (as [`log_staged`] computes each lane).
#[inline(always)]
pub(crate) fn log(x: f64) -> f64 {
    let (e, f) = parts(x);
    log_special(x, e * LN2_HI + (log1p_red(f) + e * LN2_LO))
}

/// log(u) + c/u where c is a small correction term (u + c is the exact
/// argument). Specials follow `log(u)`.
#[inline(always)]
pub(crate) fn log_corr(u: f64, c: f64) -> f64 {
    let (e, f) = parts(u);
    let v = e * LN2_HI + (log1p_red(f) + (e * LN2_LO + c / u));
    log_special(u, v)
}

/// Base-2 logarithm.
#[inline(always)]
pub(crate) fn log2(x: f64) -> f64 {
    const LOG2E_HI: f64 = std::f64::consts::LOG2_E;
    const LOG2E_LO: f64 = 2.035_527_374_093_103_3e-17;
    let (e, f) = parts(x);
    let l = log1p_red(f);
    let v = e + (l * LOG2E_HI + l * LOG2E_LO);
    log_special(x, v)
}

/// Base-10 logarithm.
#[inline(always)]
pub(crate) fn log10(x: f64) -> f64 {
    const LOG10E: f64 = std::f64::consts::LOG10_E;
    let (e, f) = parts(x);
    let v = e * LOG10_2_HI + (e * LOG10_2_LO + log1p_red(f) * LOG10E);
    log_special(x, v)
}

/// f - log(1 + f) for a reduced argument f (|f| <= 1/2): hfsq - s·(hfsq +
/// R(s²)) with hfsq = f²/2 and s = f/(2 + f), fdlibm's arrangement of the
/// series, in which the rounding of s reaches only the small term
/// s·(hfsq + R) (about f³/4), not s·f (about f²/2).
#[inline(always)]
fn log1p_tail(f: f64) -> f64 {
    let s = f / (2.0 + f);
    let z = s * s;
    let hfsq = 0.5 * f * f;
    hfsq - s * (hfsq + z * log_r(z))
}

/// log(1 + x), accurate near 0 (keeps the sign of -0): [`log_corr`] of
/// u = 1 + x and its rounding error c. Within 1.31 ULP of a double-double
/// reference (the tests; 1.30 measured, at x = 0.27675): the series' sum,
/// the correction c/u and e·ln2 + f each round on their own. Taking x
/// itself as the reduced argument where u's exponent is 0 (no c), the
/// series in fdlibm's arrangement and e·ln2 + f summed with its error kept
/// (as [`log1p_unit`] does) brought that to 0.88 ULP, but cost a quarter
/// of the throughput (4096 values in cache: 14.3 -> 17.8 µs with AVX2, 7.7
/// -> 10.0 with AVX-512); the first change alone gained nothing (1.25).
#[inline(always)]
pub(crate) fn log1p(x: f64) -> f64 {
    let u = 1.0 + x;
    let c = x - (u - 1.0);
    // c is meaningless when u is infinite; log(inf) is inf anyway.
    let c = sel(u == f64::INFINITY, 0.0, c);
    let v = log_corr(u, c);
    sel(x == 0.0, x, v)
}

/// [`log1p`] over a group of lanes in two stages (as [`log_staged`]): the
/// reductions and both divisions first, then the series and the finish.
/// Bit-identical to [`log1p`] lane by lane.
#[inline(always)]
pub(crate) fn log1p_staged(v: &mut [f64; LANES]) {
    let mut es = [0.0; LANES];
    let mut fs = [0.0; LANES];
    let mut ss = [0.0; LANES];
    let mut cu = [0.0; LANES];
    let mut us = [0.0; LANES];
    for ((((x, e), f), s), (c, u)) in v
        .iter()
        .zip(&mut es)
        .zip(&mut fs)
        .zip(&mut ss)
        .zip(cu.iter_mut().zip(&mut us))
    {
        *u = 1.0 + *x;
        // c is meaningless when u is infinite; log(inf) is inf anyway.
        let corr = sel(*u == f64::INFINITY, 0.0, *x - (*u - 1.0));
        (*e, *f) = parts(*u);
        *s = *f / (2.0 + *f);
        *c = corr / *u;
    }
    for ((((x, e), f), s), (c, u)) in v
        .iter_mut()
        .zip(&es)
        .zip(&fs)
        .zip(&ss)
        .zip(cu.iter().zip(&us))
    {
        let z = s * s;
        let l = f - s * (f - z * log_r(z));
        let r = log_special(*u, e * LN2_HI + (l + (e * LN2_LO + c)));
        *x = sel(*x == 0.0, *x, r);
    }
}

/// log(1 + e) for e in [0, 1] or NaN (the tail of `softplus`, where
/// e = e^-|x|), without [`log1p`]'s special cases and without forming
/// 1 + e: f = e itself below 1/2 (k = 0), f = (e - 1)/2 from 1/2 on
/// (k = 1; e - 1 is exact there), so no rounding error of 1 + e needs
/// a second division; k·ln2 + f is summed with its error kept, then
/// [`log1p_tail`] taken off. Within 0.9 ULP on [0, 1] (see the tests).
#[inline(always)]
pub(crate) fn log1p_unit(e: f64) -> f64 {
    let big = e >= 0.5;
    let f = sel(big, 0.5 * (e - 1.0), e);
    let k = sel(big, 1.0, 0.0);
    let (hi, lo) = fast_two_sum(k * LN2_HI, f);
    hi + (lo - (log1p_tail(f) - k * LN2_LO))
}

/// log(x) as a double-double (hi, lo) with ~2^-64 relative error, for
/// positive finite x; specials are left to the caller.
#[inline(always)]
pub(crate) fn log_dd(x: f64) -> (f64, f64) {
    let (e, f) = parts(x);
    // s = f / (2 + f) as a double-double.
    let a_hi = 2.0 + f;
    let a_lo = f - (a_hi - 2.0);
    let s_hi = f / a_hi;
    let (p, pe) = two_prod(s_hi, a_hi);
    let s_lo = (((f - p) - pe) - s_hi * a_lo) / a_hi;
    // s^3 as a double-double.
    let (z_h, z_l) = two_prod(s_hi, s_hi);
    let (c_h, c_l0) = two_prod(z_h, s_hi);
    let c_l = c_l0 + z_l * s_hi + 3.0 * z_h * s_lo;
    // (2/3)·s^3.
    let (t_h, t_l0) = two_prod(TWO_THIRDS_HI, c_h);
    let t_l = t_l0 + (TWO_THIRDS_HI * c_l + TWO_THIRDS_LO * c_h);
    let tail = c_h * z_h * horner(z_h, &LOG_Q);
    // 2s + (2/3)s^3 + tail.
    let (h, l) = fast_two_sum(2.0 * s_hi, t_h);
    let l = l + (2.0 * s_lo + t_l + tail);
    // + e·ln2.
    let (h2, l2) = two_sum(e * LN2_HI, h);
    let l2 = l2 + (l + e * LN2_LO);
    fast_two_sum(h2, l2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log1p_staged_is_log1p_bit_for_bit() {
        let mut xs: Vec<f64> = (0..20_000)
            .map(|i| (f64::from(i) - 2000.0) * 0.013)
            .collect();
        xs.extend((0..1100).map(|i| 2f64.powi(-(i % 1075))));
        xs.extend([
            -1.0,
            -0.999_999,
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MAX,
            -2.0,
            1e-310,
        ]);
        for group in xs.chunks(LANES) {
            let mut v = [0.0; LANES];
            v[..group.len()].copy_from_slice(group);
            let want: Vec<u64> = v.iter().map(|&x| log1p(x).to_bits()).collect();
            log1p_staged(&mut v);
            let got: Vec<u64> = v.iter().map(|x| x.to_bits()).collect();
            assert_eq!(got, want, "{group:?}");
        }
    }

    /// log1p(x) as a double-double from [`log_dd`] (about 2^-64 relative):
    /// log(u) + log(1 + c/u) for u = 1 + x rounded and c its exact error.
    fn log1p_reference(x: f64) -> (f64, f64) {
        let u = 1.0 + x;
        let c = x - (u - 1.0);
        let (h, l) = log_dd(u);
        let q = c / u;
        fast_two_sum(h, l + q.mul_add(-0.5 * q, q))
    }

    /// The error of `got` in ULPs of the reference `(h, l)`.
    fn ulps(got: f64, (h, l): (f64, f64)) -> f64 {
        let ulp = f64::from_bits(h.abs().to_bits() + 1) - h.abs();
        ((got - h) - l).abs() / ulp
    }

    /// Points of [0, 1]: evenly spread, both sides of 1/2 and of sqrt(2) - 1
    /// (the reductions' boundaries) bit by bit, powers of two down to the
    /// subnormals.
    fn unit_points() -> Vec<f64> {
        let mut xs: Vec<f64> = (0..400_000).map(|i| f64::from(i) / 400_000.0).collect();
        for b in [0.5, std::f64::consts::SQRT_2 - 1.0] {
            let (mut lo, mut hi) = (b, b);
            for _ in 0..64 {
                lo = f64::from_bits(lo.to_bits() - 1);
                hi = f64::from_bits(hi.to_bits() + 1);
                xs.extend([lo, hi]);
            }
        }
        xs.extend((0..1075).map(|i| 2f64.powi(-i)));
        xs.extend([1.0, 1e-17, 1.5 * 2f64.powi(-53), f64::MIN_POSITIVE, 5e-324]);
        xs
    }

    #[test]
    fn log1p_unit_is_within_0_9_ulp_on_the_unit_interval() {
        let worst = unit_points()
            .into_iter()
            .map(|x| (ulps(log1p_unit(x), log1p_reference(x)), x))
            .fold((0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a });
        assert!(worst.0 <= 0.9, "{} ULP at x = {:e}", worst.0, worst.1);
        assert!(log1p_unit(f64::NAN).is_nan());
        assert_eq!(log1p_unit(0.0).to_bits(), 0);
    }

    #[test]
    fn log1p_is_within_1_31_ulp_over_the_line() {
        // 1.30 measured (x = 0.27675): see `log1p`.
        // The unit interval, (-1, 0) evenly and towards -1, and from 1 to
        // 1e300 by powers of ten, both signs of the tiny arguments.
        let mut xs = unit_points();
        xs.extend((1..400_000).map(|i| -f64::from(i) / 400_000.0));
        xs.extend((1..1000).map(|i| -1.0 + 2f64.powi(-(i % 53) - 1)));
        xs.extend((0..300_000).map(|i| 10f64.powf(f64::from(i) / 1000.0)));
        xs.extend((0..1075).map(|i| -(2f64.powi(-i))));
        let worst = xs
            .into_iter()
            .map(|x| (ulps(log1p(x), log1p_reference(x)), x))
            .fold((0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a });
        assert!(worst.0 <= 1.31, "{} ULP at x = {:e}", worst.0, worst.1);
    }
}
