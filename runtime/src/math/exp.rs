//! Exponential kernels: `exp`, `exp2`, `expm1`, the double-double input
//! variant `exp_dd` used by `pow`, `erfc`, `sinh` and `cosh`, and the
//! table-driven [`exp_table`] behind the block `exp` and the exp-based
//! kernels (`sum_exp_shift`, `sigmoid`, `softplus`, `tanh`).
//!
//! Full-range method ([`exp`], [`exp_dd`]): Cody-Waite reduction
//! x = k·ln2 + r with |r| <= ln2/2 (ln2 split in a 32-bit head and a tail so
//! k·LN2_HI is exact), degree-13 Taylor polynomial for e^r (truncation error
//! < 6e-18 relative), then an exact two-step scaling by 2^k that overflows to
//! inf and underflows gradually through the subnormals. expm1 uses its series
//! directly for |x| < 0.7.
//!
//! Table method ([`exp_table`], valid for |x| < [`EXP_TABLE_LIMIT`]):
//! x = (32·m + j)·ln2/32 + r with |r| <= ln2/64; e^x = 2^m · 2^(j/32) · e^r,
//! 2^(j/32) read from a 32-entry table as head + tail (the pair is exact to
//! ~2^-106), e^r - 1 by its degree-6 Taylor polynomial (truncation < 4e-18),
//! combined as 2^m·(head + (tail + head·p)). Error before the final rounding
//! < 0.04 ULP, so the result is within 0.54 ULP. Outside the valid range
//! (|x| >= 708, ±inf, NaN) its result is meaningless; [`EXP_FIXUP`] sends
//! those lanes to [`exp`], which gives the exact specials, overflow and
//! subnormal results. Vectorised table reads are gathers (512 bytes, in L1),
//! except in the AVX-512 variants of the block exp, `sum_exp_shift`,
//! `sigmoid` and `softplus`, which use `exp_avx512` (the table in
//! registers, bitwise identical results).
//!
//! Accuracy (measured, see ACCURACY.md): exp/exp2/expm1 <= 1 ULP in f64 over
//! the whole domain.

use super::common::{clamp_keep_nan, horner, pow2i, round_k, scale, sel, LN2_HI, LN2_LO};
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

/// log2 of the table size of [`exp_table`].
const TABLE_BITS: u32 = 5;
/// Table size of [`exp_table`]: 2^(j/32) for j < 32.
pub(crate) const TABLE_LEN: usize = 1 << TABLE_BITS;
/// 32/ln2: scales x to units of ln2/32.
pub(crate) const TABLE_INV_STEP: f64 = TABLE_LEN as f64 * LOG2E;
/// ln2/32 head (32 significant bits: k·head is exact for |k| < 2^21).
pub(crate) const TABLE_STEP_HI: f64 = LN2_HI / TABLE_LEN as f64;
/// ln2/32 - TABLE_STEP_HI.
pub(crate) const TABLE_STEP_LO: f64 = LN2_LO / TABLE_LEN as f64;
/// 1/n! for n = 2..=6: e^r - 1 = r + r²·P(r) for |r| <= ln2/64.
pub(crate) const TABLE_POLY: [f64; 5] = [
    EXP_TAIL[0],
    EXP_TAIL[1],
    EXP_TAIL[2],
    EXP_TAIL[3],
    EXP_TAIL[4],
];

/// 2^(j/32) = head + tail for j = 0..32: the head is the nearest f64, the
/// tail the nearest f64 to the rest (computed with 60-digit decimal
/// arithmetic).
pub(crate) const EXP2_FRAC: [(f64, f64); TABLE_LEN] = [
    (1.0, 0.0),
    (1.0218971486541166, 5.109225028973444e-17),
    (1.0442737824274138, 8.551889705537965e-17),
    (1.0671404006768237, -7.899853966841582e-17),
    (1.0905077326652577, -3.046782079812471e-17),
    (1.1143867425958924, 1.0410278456845571e-16),
    (1.1387886347566916, 8.912812676025408e-17),
    (1.1637248587775775, 3.8292048369240935e-17),
    (1.189207115002721, 3.982015231465646e-17),
    (1.215247359980469, -7.712630692681488e-17),
    (1.241857812073484, 4.658027591836937e-17),
    (1.2690509571917332, 2.667932131342186e-18),
    (1.2968395546510096, 2.5382502794888315e-17),
    (1.3252366431597413, -2.8587312100388614e-17),
    (1.3542555469368927, 7.70094837980299e-17),
    (1.383909881963832, -6.770511658794786e-17),
    (std::f64::consts::SQRT_2, -9.667293313452913e-17),
    (1.4451808069770467, -3.0237581349939873e-17),
    (1.4768261459394993, -3.483994556892796e-17),
    (1.5091644275934228, -1.016455327754295e-16),
    (1.5422108254079407, 7.949834809697621e-17),
    (1.5759808451078865, -1.0136916471278304e-17),
    (1.6104903319492543, 2.4707192569797888e-17),
    (1.645755478153965, -1.0125679913674773e-16),
    (1.681792830507429, 8.199010020581497e-17),
    (1.718619298122478, -1.851380418263111e-17),
    (1.7562521603732995, 2.960140695448873e-17),
    (1.7947090750031072, 1.8227458427912087e-17),
    (1.8340080864093424, 3.283107224245627e-17),
    (1.8741676341103, -6.122763413004143e-17),
    (1.9152065613971474, -1.0619946056195963e-16),
    (1.9571441241754002, 8.960767791036668e-17),
];

/// [`exp_table`] is within 0.54 ULP for |x| below this (results stay
/// normal and finite: e^708 < 2^1022, e^-708 > 2^-1022).
pub(crate) const EXP_TABLE_LIMIT: f64 = 708.0;

/// Lanes outside [`exp_table`]'s range (|x| >= 708, ±inf, NaN) take the
/// full-range [`exp`].
pub(crate) const EXP_FIXUP: Fixup = Fixup {
    limit: EXP_TABLE_LIMIT,
    exact: exp,
};

/// e^x for |x| < [`EXP_TABLE_LIMIT`] by the 32-entry table (module docs);
/// any other input gives an unspecified value (NaN stays NaN), never a panic.
#[inline(always)]
pub(crate) fn exp_table(x: f64) -> f64 {
    let (kf, k) = round_k(x * TABLE_INV_STEP);
    let r = (x - kf * TABLE_STEP_HI) - kf * TABLE_STEP_LO;
    let (head, tail) = EXP2_FRAC[(k & (TABLE_LEN as i64 - 1)) as usize];
    let p = r + r * r * horner(r, &TABLE_POLY);
    let y = head + head.mul_add(p, tail);
    y * pow2i(k >> TABLE_BITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in representable f64 values between two finite positives.
    fn ulps(a: f64, b: f64) -> u64 {
        a.to_bits().abs_diff(b.to_bits())
    }

    #[test]
    fn table_is_head_plus_tail_of_two_pow_j_over_32() {
        for (j, &(head, tail)) in EXP2_FRAC.iter().enumerate() {
            let want = (j as f64 / TABLE_LEN as f64).exp2();
            assert!(ulps(head, want) <= 1, "j={j}: {head} vs {want}");
            // The tail is below half an ulp of the head.
            assert!(
                tail.abs() <= f64::EPSILON * head / 2.0,
                "j={j}: tail {tail}"
            );
        }
        assert_eq!(EXP2_FRAC[16].0, std::f64::consts::SQRT_2);
    }

    #[test]
    fn table_kernel_within_one_ulp_of_std_inside_its_range() {
        let mut x = -EXP_TABLE_LIMIT;
        let mut worst = 0;
        while x < EXP_TABLE_LIMIT {
            for v in [x, x * 1e-3, x * 1e-9] {
                let e = ulps(exp_table(v), v.exp());
                worst = worst.max(e);
                assert!(e <= 1, "exp_table({v:e}) = {} vs {}", exp_table(v), v.exp());
            }
            x += 0.000_713_9;
        }
        assert!(worst <= 1);
        let edge = EXP_TABLE_LIMIT - 1e-9;
        for v in [edge, -edge, 0.0, -0.0, 1e-300, -1e-300] {
            assert!(ulps(exp_table(v), v.exp()) <= 1, "x = {v:e}");
        }
        assert_eq!(exp_table(0.0), 1.0);
        assert_eq!(exp_table(-0.0), 1.0);
        assert!(exp_table(f64::NAN).is_nan());
    }

    #[test]
    fn block_exp_is_exact_at_specials_and_range_ends() {
        let x = [
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            EXP_TABLE_LIMIT,
            -EXP_TABLE_LIMIT,
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
