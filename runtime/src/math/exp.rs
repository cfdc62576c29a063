//! Exponential kernels: `exp`, `exp2`, `expm1`, the double-double input
//! variant `exp_dd` used by `pow`, `erfc`, `sinh` and `cosh`, the fast
//! kernel [`exp_fast`] behind the block `exp` and the exp-based kernels
//! (`exp_shift_store`, `sigmoid`, `softplus`; tanh has its own reduction),
//! and [`exp_term`], the fast kernel without its compensation terms, for
//! the terms of `sum_exp_shift` (within 1 ULP instead of 0.6).
//!
//! Full-range method ([`exp`], [`exp_dd`]): Cody-Waite reduction
//! x = k·ln2 + r with |r| <= ln2/2 (ln2 split in a 32-bit head and a tail so
//! k·LN2_HI is exact), degree-13 Taylor polynomial for e^r (truncation error
//! < 6e-18 relative), then an exact two-step scaling by 2^k that overflows to
//! inf and underflows gradually through the subnormals. expm1 reduces as
//! the fast method below (Taylor polynomial to r^13 by Estrin's scheme,
//! relative to e^r - 1 also near 0) and forms (2^k - 1) + 2^k·r exactly
//! (fast two-sum) before adding the small rest, so no cancellation arises
//! at k = ±1 and one formula serves |k| <= 56 (beyond, the -1 is below
//! 2^-57 relative and the result is scaled in two steps).
//!
//! Fast method ([`exp_fast`], valid for |x| < [`EXP_FAST_LIMIT`]): the same
//! reduction done with fused multiply-adds (k = round(x/ln2) by the
//! 1.5·2^52 trick, x - k·LN2_HI exact, r = that - k·LN2_LO rounded and its
//! rounding error rl kept), then
//! e^r = 1 + r + r²/2 + r³·P(r) with a degree-8 near-minimax P
//! ([`FAST_POLY`], < 5.9e-18 relative) evaluated by Horner's scheme
//! ([`exp_fast`], [`exp_term`]) or Estrin's ([`exp_fast_dd`]). 1 + r
//! is split exactly into head and tail (fast two-sum) and r² into r2 and
//! its fma error, so every term but the head is added at 1/16 of the
//! result's scale or below: error before the final rounding < 0.1 ULP,
//! result within 0.6 ULP. 2^k is applied by an integer add to the exponent
//! field. No table (a vectorised table read is a gather, slow on AMD Zen),
//! no clamp, no select: about 30 vector operations per 4 lanes, all
//! auto-vectorised from this scalar code, so the AVX-512, AVX2 and
//! baseline variants give the same bits. Outside the valid range
//! (|x| >= 708, ±inf, NaN) its result is meaningless; [`EXP_FIXUP`] sends
//! those lanes to [`exp`] (only in the rare groups that have such a lane),
//! which gives the exact specials, overflow and subnormal results.
//! [`exp_fast_dd`] also returns the final rounding error (softplus uses it).
//!
//! Accuracy (measured, see ACCURACY.md): exp/exp2/expm1 <= 1 ULP in f64 over
//! the whole domain.

use super::common::{
    clamp_keep_nan, horner, pow2i, round_k, round_prod, scale, sel, LN2_HI, LN2_LO, MAGIC,
};
use super::dispatch::Fixup;

const LOG2E: f64 = std::f64::consts::LOG2_E;

/// 1/n! for n = 2..=13: the tail of the exp Taylor series (e^r - 1 =
/// r + r²·T(r), truncation < 6e-18 relative for |r| <= ln2/2).
pub(crate) const EXP_TAIL: [f64; 12] = [
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

/// x - k·ln2 for k = round(x/ln2) (|x| < 2^20), as (k, kf, r, rl): r the
/// rounded reduced argument, rl its rounding error (r + rl is the reduced
/// argument to ~2^-100 absolute). The first fma is exact (k·LN2_HI is);
/// k comes from the bits of x/ln2 + 1.5·2^52.
#[inline(always)]
pub(crate) fn reduce_ln2(x: f64) -> (i64, f64, f64) {
    let (kf, k) = round_prod(x, LOG2E);
    let r0 = (-kf).mul_add(LN2_HI, x);
    let r = (-kf).mul_add(LN2_LO, r0);
    let rl = (-kf).mul_add(LN2_LO, r0 - r);
    (k, r, rl)
}

/// Evaluates c[0] + c[1]·r + ... + c[8]·r^8 by Estrin's scheme (short
/// dependency chains; `r2`, `r4`, `r8` the powers of r).
#[inline(always)]
fn estrin9(r: f64, r2: f64, r4: f64, r8: f64, c: &[f64; 9]) -> f64 {
    let a0 = r.mul_add(c[1], c[0]);
    let a1 = r.mul_add(c[3], c[2]);
    let a2 = r.mul_add(c[5], c[4]);
    let a3 = r.mul_add(c[7], c[6]);
    c[8].mul_add(r8, a3.mul_add(r2, a2).mul_add(r4, a1.mul_add(r2, a0)))
}

/// e^x - 1, accurate near 0 (the sign of -0 is kept).
#[inline(always)]
pub(crate) fn expm1(x: f64) -> f64 {
    let xc = clamp_keep_nan(x, -60.0, 760.0);
    let (k, r, rl) = reduce_ln2(xc);
    // e^(r + rl) - 1 = r + h + w: h = r2/2 exactly, w the small rest
    // (r² = r2 + r2e exactly, rl·e^r as rl·(1 + r)).
    let r2 = r * r;
    let r2e = r.mul_add(r, -r2);
    let r4 = r2 * r2;
    // e^r - 1 - r - r²/2 = r³·T(r), T the Taylor series 1/3! .. 1/13!
    // (relative truncation < 2e-17 of the result, also near r = 0) by
    // Estrin's scheme: the terms to r^8, then r^9·(c9 + c10·r).
    let c = &EXP_TAIL[1..];
    let r8 = r4 * r4;
    let head = estrin9(
        r,
        r2,
        r4,
        r8,
        &[c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]],
    );
    let t = (r8 * r).mul_add(r.mul_add(c[10], c[9]), head);
    let h = 0.5 * r2;
    let w = (r2 * r).mul_add(t, r2e.mul_add(0.5, rl.mul_add(r, rl)));
    // k <= 56: e^x - 1 = (2^k - 1) + 2^k·r + 2^k·(h + w). The first two are
    // summed exactly (fast two-sum: 2^k·r is exact and
    // |2^k - 1| >= |2^k·r| for k != 0; for k = 0 the sum is r), so only
    // the last addition rounds at the result's scale: no cancellation at
    // k = ±1. For k > 53, 2^k - 1 is not a double: 2^k is summed instead
    // and the -1 joins the (then integer) two-sum error.
    let kc = if k > 56 { 56 } else { k };
    let s2k = pow2i(kc);
    let wide = kc > 53;
    let a = sel(wide, s2k, s2k - 1.0);
    let b = s2k * r;
    let s = a + b;
    let e = (b - (s - a)) + sel(wide, -1.0, 0.0);
    let small = s + s2k.mul_add(h, s2k.mul_add(w, e));
    // k > 56: the -1 is below 2^-57 relative; e^x = 2^k·(1 + r + h + w)
    // with 1 + r split exactly, scaled in two steps so that it overflows
    // to inf exactly.
    let s1 = 1.0 + r;
    let e1 = (1.0 - s1) + r;
    let big = scale(s1 + ((e1 + w) + h), k);
    let res = sel(k > 56, big, small);
    // ±0 keep their sign; NaN is returned as given (the same bits from
    // every ISA variant).
    sel(x == 0.0 || x.is_nan(), x, res)
}

/// e^r = 1 + r + r²/2 + r³·P(r) on |r| <= ln2/2: the coefficients of P,
/// fitted to the relative error of e^r (iterated weighted least squares
/// towards minimax with 50-digit arithmetic, then rounded to f64). Error
/// of the rounded polynomial < 5.9e-18 relative (0.053 ULP of 2^-53).
const FAST_POLY: [f64; 9] = [
    0.166_666_666_666_664_33,
    0.041_666_666_666_603_985,
    0.008_333_333_333_499_946,
    0.001_388_888_892_678_273_3,
    0.000_198_412_694_663_764_44,
    2.480_150_870_198_579_4e-5,
    2.755_764_077_495_652_3e-6,
    2.762_517_823_806_431e-7,
    2.497_839_017_622_128e-8,
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

/// e^x for |x| < [`EXP_FAST_LIMIT`] as an unevaluated sum hi + lo:
/// hi is the fast kernel's result with P by Estrin's scheme (within 1 ULP
/// of [`exp_fast`]'s, see [`exp_fast_parts`]), lo its rounding error (to
/// ~2^-60 relative of hi). Any other input gives unspecified values, never a
/// panic.
#[inline(always)]
pub(crate) fn exp_fast_dd(x: f64) -> (f64, f64) {
    exp_fast_parts::<false>(x)
}

/// [`exp_fast_dd`]'s computation with P(r) by Horner's scheme (`HORNER`:
/// eight fused multiply-adds in a chain) or Estrin's (the same eight and
/// two products for r⁴ and r⁸, in a chain half as long). The block `exp`
/// ([`exp_fast`]) is bound by the vector units' throughput, and its groups
/// are independent: Horner's two operations fewer made it 6-7% faster
/// (`kernel_rate -- exp`, three alternated rounds: AVX2 3.82-3.98 →
/// 3.57-3.59 µs per 4096, AVX-512 2.62-2.68 → 2.44-2.52). softplus
/// ([`exp_fast_dd`]) follows its exp with a log1p, a chain too long for the
/// out-of-order window to overlap: Horner made it 4-6% slower with AVX2
/// (12.0-12.1 → 12.5-12.8), so it keeps Estrin's. The two schemes round
/// differently: about one result in 2,000 differs in its last bit, both
/// within the bound above.
#[inline(always)]
fn exp_fast_parts<const HORNER: bool>(x: f64) -> (f64, f64) {
    let (k, r, rl) = reduce_ln2(x);
    // r² = r2 + r2e exactly.
    let r2 = r * r;
    let r2e = r.mul_add(r, -r2);
    let p = if HORNER {
        horner(r, &FAST_POLY)
    } else {
        let r4 = r2 * r2;
        estrin9(r, r2, r4, r4 * r4, &FAST_POLY)
    };
    // e^(r + rl) = s + e + r2/2 + (r2e/2 + rl·(1 + r)) + r³·P(r), with
    // 1 + r = s + e exactly (fast two-sum, |r| < 1): only the last addition
    // rounds at the result's scale, the others at 1/16 of it or below.
    let s = 1.0 + r;
    let e = (1.0 - s) + r;
    let lo = r2e.mul_add(0.5, rl.mul_add(s, e));
    let v = (r2 * r).mul_add(p, r2.mul_add(0.5, lo));
    let y = s + v;
    let y_lo = v - (y - s);
    // ·2^k: for y by an integer add to the exponent field (y and the
    // result are normal in the valid range), for the tiny y_lo (which may
    // underflow) by a product.
    (
        f64::from_bits(y.to_bits().wrapping_add((k << 52) as u64)),
        y_lo * pow2i(k),
    )
}

/// e^x = 2^k·(1 + r + w) for |x| < [`EXP_FAST_LIMIT`], as (k, r, w): the
/// fast method's reduction (k = round(x/ln2), r the rounded reduced
/// argument, |r| <= ln2/2, exact for k = 0) and w = e^(r + rl) - 1 - r =
/// r²/2 + r³·P(r) + rl·(1 + r) with r² split exactly, so that w is within
/// about an ULP of itself (|w| < 0.2·|r|): e^x - 1 and 1 - e^x then follow
/// without cancellation wherever k is 0 or -1 (`log1mexp`). Any other input
/// gives unspecified values, never a panic.
#[inline(always)]
pub(crate) fn exp_fast_reduced(x: f64) -> (i64, f64, f64) {
    let (k, r, rl) = reduce_ln2(x);
    let r2 = r * r;
    let r2e = r.mul_add(r, -r2);
    let r4 = r2 * r2;
    let p = estrin9(r, r2, r4, r4 * r4, &FAST_POLY);
    let w = (r2 * r).mul_add(p, r2.mul_add(0.5, r2e.mul_add(0.5, rl.mul_add(r, rl))));
    (k, r, w)
}

/// e^x for |x| < [`EXP_FAST_LIMIT`] (module docs: no table, no clamp, the
/// scaling an integer add); any other input gives an unspecified value
/// (NaN stays NaN), never a panic.
#[inline(always)]
pub(crate) fn exp_fast(x: f64) -> f64 {
    exp_fast_parts::<true>(x).0
}

/// e^x for |x| < [`EXP_FAST_LIMIT`] without [`exp_fast`]'s compensation
/// terms, for the terms of a sum (`fold`'s row pass of log-sum-exp): the
/// same reduction and polynomial, then e^r = 1 + (r + r²·(1/2 + r·P(r)))
/// in plain arithmetic. Error before the final rounding at most 0.6 ULP of
/// the result (the inner fma's rounding at |v| < 0.42, r's own rounding
/// carried through e^r), so the result is within 1.1 ULP, against
/// [`exp_fast`]'s 0.6; about a quarter fewer vector operations. P by
/// Horner's scheme, as in [`exp_fast`] (the row passes are throughput-bound):
/// the logsumexp workload went from 0.93-0.94 to 0.86-0.88 ms with AVX2 and
/// from 0.65-0.68 to 0.58-0.63 with AVX-512 against Estrin's (`kiln bench
/// --suite --only logsumexp --runs 41`, four alternated rounds, Intel Xeon
/// family 6 model 167). Outside the range, as [`exp_fast`]: unspecified
/// (callers apply [`EXP_FIXUP`]).
#[inline(always)]
pub(crate) fn exp_term(x: f64) -> f64 {
    exp_term_biased::<0>(x).0
}

/// The bits above the lowest 11 of every `t` of [`exp_term_windowed`] whose
/// k is in [-1023, 1024] (the magic constant's: its low 11 bits are zero,
/// and `t` is it plus k + 1023).
pub(crate) const TERM_WINDOW: u64 = MAGIC.to_bits();

/// [`exp_term`] (the same bits) and the bits of its rounded sum
/// `t = x·log2(e) + (MAGIC + 1023)`, the check a caller folds over many values
/// instead of a range check: when every `t` has [`TERM_WINDOW`] above its
/// low 11 bits (k in [-1023, 1024]), each result is `e^x` within 1.1 ULP,
/// `+inf` or NaN (k = 1024: the true value overflows or nearly does), NaN
/// or `-inf` (k = -1023 from a result below 1), or a value in [0, 2^-1022)
/// (k = -1023 or -1022: e^x is below 2^-1021 there, so either is off by
/// less than 2^-1021 absolute). Any other `t` (x beyond ±709.8, ±inf, NaN)
/// has other bits there. The sum of such results is therefore within its
/// summation bound of Σ e^x whenever it is finite and at least 2^-900.
#[inline(always)]
pub(crate) fn exp_term_windowed(x: f64) -> (f64, u64) {
    exp_term_biased::<1023>(x)
}

/// [`exp_term`] with `k` rounded through the magic constant plus `BIAS`
/// (the same k: the bias is an integer and the rounding exact at that
/// scale), and the rounded sum's bits.
#[inline(always)]
fn exp_term_biased<const BIAS: i64>(x: f64) -> (f64, u64) {
    let magic = MAGIC + BIAS as f64;
    let t = x.mul_add(LOG2E, magic);
    let kf = t - magic;
    let k = (t.to_bits() as i64).wrapping_sub(magic.to_bits() as i64);
    let r = (-kf).mul_add(LN2_HI, x);
    let r = (-kf).mul_add(LN2_LO, r);
    let r2 = r * r;
    let p = horner(r, &FAST_POLY);
    let v = r.mul_add(p, 0.5).mul_add(r2, r);
    let y = 1.0 + v;
    (
        f64::from_bits(y.to_bits().wrapping_add((k << 52) as u64)),
        t.to_bits(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in representable f64 values between two finite positives.
    fn ulps(a: f64, b: f64) -> u64 {
        a.to_bits().abs_diff(b.to_bits())
    }

    /// The sum terms' kernel against the C library's exp (itself within
    /// 0.5 ULP): at most 1 ULP apart over the whole range, the fast
    /// kernel's bound too (the two roundings rarely fall on opposite sides).
    #[test]
    fn sum_term_kernel_within_one_ulp_of_std_inside_its_range() {
        let mut x = -EXP_FAST_LIMIT;
        let mut worst = 0;
        while x < EXP_FAST_LIMIT {
            for v in [x, x * 1e-3, x * 1e-9, -x * 0.013] {
                worst = worst.max(ulps(exp_term(v), v.exp()));
            }
            x += 0.000_713_9;
        }
        assert!(worst <= 1, "worst {worst} ULP");
        assert_eq!(exp_term(0.0), 1.0);
        assert_eq!(exp_term(-0.0), 1.0);
        assert!(exp_term(f64::NAN).is_nan());
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
    fn expm1_within_one_ulp_across_reduction_regimes() {
        // k = 0, ±1 (the former cancellation), 53..57 (2^k - 1 no longer a
        // double, then the -1 dropped), and the overflow edge.
        let mut xs = vec![];
        for (lo, hi) in [(-1.1, 1.1), (36.0, 40.5), (-45.0, -35.0), (700.0, 709.78)] {
            xs.extend((0..20_000).map(|i| lo + (hi - lo) * f64::from(i) / 20_000.0));
        }
        for x in xs {
            let (got, want) = (expm1(x), x.exp_m1());
            let d = got.to_bits().abs_diff(want.to_bits());
            assert!(d <= 1, "expm1({x:e}) = {got:e} vs {want:e}");
        }
        assert_eq!(expm1(0.0).to_bits(), 0.0f64.to_bits());
        assert_eq!(expm1(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(expm1(1e-300), 1e-300);
        assert_eq!(expm1(f64::INFINITY), f64::INFINITY);
        assert_eq!(expm1(709.8), f64::INFINITY);
        assert_eq!(expm1(f64::NEG_INFINITY), -1.0);
        assert_eq!(expm1(-50.0), -1.0);
        assert!(expm1(f64::NAN).is_nan());
    }

    #[test]
    fn fast_dd_low_part_is_below_half_an_ulp() {
        let mut x = -700.0;
        while x < 700.0 {
            let (hi, lo) = exp_fast_dd(x);
            // The two evaluation schemes of P may round apart.
            assert!(ulps(hi, exp_fast(x)) <= 1, "x = {x:e}");
            assert!(
                lo.abs() <= f64::EPSILON * hi / 2.0,
                "x = {x:e}: {hi:e} + {lo:e}"
            );
            x += 0.123_456_7;
        }
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
