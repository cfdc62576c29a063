//! Exponential kernels: `exp`, `exp2`, `expm1`, the double-double input
//! variant `exp_dd` used by `pow`, `erfc`, `sinh` and `cosh`, and the fast
//! kernel [`exp_fast`] behind the block `exp` and the exp-based kernels
//! (`sum_exp_shift`, `sigmoid`, `softplus`, `tanh`).
//!
//! Full-range method ([`exp`], [`exp_dd`]): Cody-Waite reduction
//! x = k·ln2 + r with |r| <= ln2/2 (ln2 split in a 32-bit head and a tail so
//! k·LN2_HI is exact), degree-13 Taylor polynomial for e^r (truncation error
//! < 6e-18 relative), then an exact two-step scaling by 2^k that overflows to
//! inf and underflows gradually through the subnormals. expm1 uses its series
//! directly for |x| < 0.7.
//!
//! Fast method ([`exp_fast`], valid for |x| < [`EXP_FAST_LIMIT`]): the same
//! reduction done with fused multiply-adds (k = round(x/ln2) by the 1.5·2^52
//! trick, r = (x - k·LN2_HI) - k·LN2_LO in two fmas, the first exact), then
//! e^r = 1 + r + r²·P(r) with a degree-9 near-minimax P ([`FAST_POLY`],
//! < 1.1e-17 relative) evaluated by Estrin's scheme, 1 + r split exactly
//! into a head and a tail so only the last addition rounds at the result's
//! scale, and 2^k applied by an integer add to the exponent field. Error
//! before the final rounding < 0.1 ULP, so the result is within 0.6 ULP.
//! No table (a vectorised table read is a gather, slow on AMD Zen), no
//! clamp, no select: about 25 vector operations per 4 lanes, all
//! auto-vectorised from this scalar code, so the AVX-512, AVX2 and
//! baseline variants give the same bits. Outside the valid range
//! (|x| >= 708, ±inf, NaN) its result is meaningless; [`EXP_FIXUP`] sends
//! those lanes to [`exp`] (only in the rare groups that have such a lane),
//! which gives the exact specials, overflow and subnormal results.
//!
//! Accuracy (measured, see ACCURACY.md): exp/exp2/expm1 <= 1 ULP in f64 over
//! the whole domain.

use super::common::{clamp_keep_nan, horner, pow2i, round_k, scale, sel, LN2_HI, LN2_LO, MAGIC};
use super::dispatch::Fixup;

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

/// e^r = 1 + r + r²·P(r) on |r| <= ln2/2: the coefficients of P, fitted
/// to the relative error of e^r (iterated weighted least squares towards
/// minimax with 50-digit arithmetic, then rounded to f64). Error of the
/// rounded polynomial < 1.1e-17 relative (0.1 ULP of 2^-53).
const FAST_POLY: [f64; 10] = [
    0.500_000_000_000_001_1,
    0.166_666_666_666_664_13,
    0.041_666_666_666_530_24,
    0.008_333_333_333_494_335,
    0.001_388_888_894_360_44,
    0.000_198_412_695_068_033_32,
    2.480_149_312_963_953e-5,
    2.755_758_622_865_386e-6,
    2.763_023_612_947_762e-7,
    2.500_008_808_842_61e-8,
];

/// [`exp_fast`] is within 1 ULP for |x| below this (results stay normal
/// and finite: e^708 < 2^1022, e^-708 > 2^-1022).
pub(crate) const EXP_FAST_LIMIT: f64 = 708.0;

/// Lanes outside [`exp_fast`]'s range (|x| >= 708, ±inf, NaN) take the
/// full-range [`exp`].
pub(crate) const EXP_FIXUP: Fixup = Fixup {
    limit: EXP_FAST_LIMIT,
    exact: exp,
};

/// e^x for |x| < [`EXP_FAST_LIMIT`] (module docs: no table, no clamp, the
/// scaling an integer add); any other input gives an unspecified value
/// (NaN stays NaN), never a panic.
#[inline(always)]
pub(crate) fn exp_fast(x: f64) -> f64 {
    // k = round(x/ln2); kf·LN2_HI is exact, so the first fma is exact.
    let t = x.mul_add(LOG2E, MAGIC);
    let kf = t - MAGIC;
    let k = (t.to_bits() as i64).wrapping_sub(MAGIC.to_bits() as i64);
    let r = (-kf).mul_add(LN2_HI, x);
    let r = (-kf).mul_add(LN2_LO, r);
    // P(r) by Estrin's scheme: short dependency chains.
    let c = FAST_POLY;
    let r2 = r * r;
    let r4 = r2 * r2;
    let r8 = r4 * r4;
    let a0 = r.mul_add(c[1], c[0]);
    let a1 = r.mul_add(c[3], c[2]);
    let a2 = r.mul_add(c[5], c[4]);
    let a3 = r.mul_add(c[7], c[6]);
    let a4 = r.mul_add(c[9], c[8]);
    let p = a4.mul_add(r8, a3.mul_add(r2, a2).mul_add(r4, a1.mul_add(r2, a0)));
    // 1 + r + r²·P with 1 + r split exactly into s + e (fast two-sum,
    // |r| < 1), so only the final addition rounds at the result's scale.
    let s = 1.0 + r;
    let e = (1.0 - s) + r;
    let y = s + r2.mul_add(p, e);
    // y·2^k by an integer add to the exponent field (y and the result are
    // normal in the valid range).
    f64::from_bits(y.to_bits().wrapping_add((k << 52) as u64))
}

/// The name `hyperbolic` (tanh) imports the fast kernel by.
pub(crate) use exp_fast as exp_table;

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in representable f64 values between two finite positives.
    fn ulps(a: f64, b: f64) -> u64 {
        a.to_bits().abs_diff(b.to_bits())
    }

    #[test]
    fn fast_kernel_within_one_ulp_of_std_inside_its_range() {
        let mut x = -EXP_FAST_LIMIT;
        let mut worst = 0;
        while x < EXP_FAST_LIMIT {
            for v in [x, x * 1e-3, x * 1e-9] {
                let e = ulps(exp_fast(v), v.exp());
                worst = worst.max(e);
                assert!(e <= 1, "exp_fast({v:e}) = {} vs {}", exp_fast(v), v.exp());
            }
            x += 0.000_713_9;
        }
        assert!(worst <= 1);
        let edge = EXP_FAST_LIMIT - 1e-9;
        for v in [edge, -edge, 0.0, -0.0, 1e-300, -1e-300] {
            assert!(ulps(exp_fast(v), v.exp()) <= 1, "x = {v:e}");
        }
        assert_eq!(exp_fast(0.0), 1.0);
        assert_eq!(exp_fast(-0.0), 1.0);
        assert!(exp_fast(f64::NAN).is_nan());
    }

    #[test]
    fn block_exp_is_exact_at_specials_and_range_ends() {
        let x = [
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            EXP_FAST_LIMIT,
            -EXP_FAST_LIMIT,
            709.78,
            709.79,
            -708.5,
            -740.0,
            -745.1,
            -745.2,
            -746.0,
            5e-324,
        ];
        let mut out = [0.0; 15];
        super::super::exp_f64(&x, &mut out);
        assert_eq!(out[0], 1.0);
        assert_eq!(out[1], 1.0);
        assert_eq!(out[2], f64::INFINITY);
        assert_eq!(out[3], 0.0);
        assert!(out[4].is_nan());
        assert!(out[7].is_finite() && out[8] == f64::INFINITY);
        assert!(
            out[9] < f64::MIN_POSITIVE && out[9] > 0.0,
            "subnormal result"
        );
        assert_eq!(out[11], 5e-324);
        assert_eq!(out[13], 0.0);
        assert_eq!(out[14], 1.0);
        for (v, o) in x.iter().zip(out) {
            if v.is_finite() {
                assert!(ulps(o, v.exp()) <= 1, "exp({v:e}) = {o:e} vs {:e}", v.exp());
            }
        }
    }
}
