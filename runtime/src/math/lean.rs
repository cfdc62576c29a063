//! f32 forms computed in f64 lanes at f32-sized precision: `sin`, `cos`,
//! `tan`, `arcsin`, `arccos`, `arctan`, `sinh`, `cosh`, `arcsinh`,
//! `arccosh`, `arctanh`, `exp2`, `expm1` and `erf`.
//!
//! Why: these f32 forms used to widen to f64 and run the f64 kernel, which
//! is built for 53 bits (sin and cos: a reduction carried in two-sums and
//! two polynomials of eight terms). On 4e6 f32 values that made kiln 1.7-3.5x
//! slower than numpy's SIMD single-precision functions (BENCHMARKS.md,
//! forty-first session). A result rounded to f32 needs about 30 bits before
//! its rounding, which f64 arithmetic gives with short polynomials and
//! reductions in one or two fused multiply-adds, while the widening and
//! narrowing stay one conversion each.
//!
//! Invariant (the accuracy contract, as for `single`): every result is
//! *faithfully rounded*, within 1 ULP of the exact value, measured over all
//! 2^32 inputs against the f64 reference rounded to f32 (ACCURACY.md;
//! `tests/accuracy.rs` sweeps every bit pattern with a stride). Each kernel
//! computes an f64 value within 2^-30 (relative) of the exact one and
//! rounds it to f32 once: 0.5 ULP + 2^-6 ULP. The error sources beside each
//! kernel are the polynomial's truncation (Taylor remainders, or the
//! measured error of a Chebyshev fit) and a few f64 roundings (2^-53 each);
//! the widening is exact, every f32 input is a normal f64, and the final
//! conversion rounds subnormal and overflowing results correctly.
//!
//! `sin`, `cos` and `tan` recompute the lanes with |x| >= [`TRIG_LIMIT`],
//! ±inf or NaN with the C library's correctly reduced f64 function (one
//! vector compare per group; such groups are rare). Every other kernel
//! handles its special values (±0, ±inf, NaN, out of domain) with selects,
//! as numpy does: ±0 keeps its sign where the function is odd.
//!
//! Every helper is branch-free and uses operations SSE2 / AVX2 / AVX-512
//! vectorise (no integer-to-float conversions: exponents are turned into
//! floats through the bits), and `mul_add` is a correctly rounded fused
//! multiply-add in every variant, so all variants give the same bits.

use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, LN_2, PI};

use super::common::{clamp_keep_nan, copysign, horner, pow2i, round_k, round_prod, sel};
use super::exp::EXP_TAIL;
use super::{erf, exp, log, trig};

/// Maps the f64 kernel `f` over a group of f32 lanes: widen, compute, round once.
#[inline(always)]
fn map<const N: usize>(v: &mut [f32; N], f: impl Fn(f64) -> f64) {
    for e in v.iter_mut() {
        *e = f(f64::from(*e)) as f32;
    }
}

/// [`map`], then every lane with `!(|x| < TRIG_LIMIT)` (±inf and NaN
/// included) recomputed with `exact` (the C library's function).
#[inline(always)]
#[allow(clippy::neg_cmp_op_on_partial_ord)] // the negated `<` is the point: NaN is outside
fn map_trig<const N: usize>(v: &mut [f32; N], f: impl Fn(f64) -> f64, exact: fn(f64) -> f64) {
    let orig = *v;
    let outside = orig
        .iter()
        .fold(false, |acc, &x| acc | !(x.abs() < TRIG_LIMIT));
    map(v, f);
    if outside {
        for (o, &x) in v.iter_mut().zip(&orig) {
            if !(x.abs() < TRIG_LIMIT) {
                *o = exact(f64::from(x)) as f32;
            }
        }
    }
}

// ---------------------------------------------------------------------
// sin, cos, tan
// ---------------------------------------------------------------------

/// |x| below which `sin`, `cos` and `tan` reduce in vector lanes (2^40:
/// the multiple of π they subtract stays below 2^39, far inside the
/// rounding trick's 2^51, and the three-term π keeps the reduced argument
/// accurate to about 2^-52 of itself; the exhaustive sweep checks every
/// f32). Larger arguments take the C library's function.
pub(crate) const TRIG_LIMIT: f32 = 1_099_511_627_776.0;

/// 1/π.
const INV_PI: f64 = std::f64::consts::FRAC_1_PI;

/// 2/π.
const TWO_OVER_PI: f64 = std::f64::consts::FRAC_2_PI;

/// π as three f64 terms (π to about 2^-160): m·PI_1 is subtracted exactly
/// by the first fused multiply-add (x - m·PI_1 is a multiple of 2^-51
/// below 4 in magnitude, hence an f64; with π/2, of 2^-52 below 2), the
/// next two round once each at 2^-53 of the reduced argument.
const PI_1: f64 = PI;
const PI_2: f64 = 1.224_646_799_147_353_2e-16;
const PI_3: f64 = -2.994_769_809_718_339_7e-33;

/// The first `N` coefficients of a longer series (the f64 kernels' Taylor
/// tables, of which these kernels need fewer terms).
const fn first<const N: usize, const M: usize>(c: &[f64; M]) -> [f64; N] {
    let mut out = [0.0; N];
    let mut i = 0;
    while i < N {
        out[i] = c[i];
        i += 1;
    }
    out
}

/// (-1)^n/(2n+1)! for n = 1..=7: sin r = r + r·z·S(z), z = r², on |r| <=
/// π/2 (Taylor remainder r^17/17! < 6.2e-12 there, 2^-37 of the result).
const SIN_HALF: [f64; 7] = first(&trig::SIN_C);

/// (-1)^n/(2n+1)! for n = 1..=5: sin r on |r| <= π/4 (remainder r^13/13!
/// < 7e-12, 2^-36.6 of the result).
const SIN_QUARTER: [f64; 5] = first(&trig::SIN_C);

/// (-1)^n/(2n)! for n = 2..=6: cos r = 1 - z/2 + z²·C(z) on |r| <= π/4
/// (remainder r^14/14! < 4e-13).
const COS_QUARTER: [f64; 5] = first(&trig::COS_C);

/// x - m·π·c for the integer m (as f64), c = 1 (π) or 1/2 (π/2): the
/// three-term reduction of [`PI_1`]. For m = 0 it is x itself, -0
/// included (the negative third term would add +0 to -0).
#[inline(always)]
fn reduce_pi(x: f64, mf: f64, c: f64) -> f64 {
    let r = (-mf).mul_add(c * PI_1, x);
    let r = (-mf).mul_add(c * PI_2, r);
    sel(mf == 0.0, x, (-mf).mul_add(c * PI_3, r))
}

/// sin r for |r| <= π/2 (+ a rounding), sign of r kept for ±0.
#[inline(always)]
fn sin_half(r: f64) -> f64 {
    let z = r * r;
    copysign((r * z).mul_add(horner(z, &SIN_HALF), r), r)
}

/// Flips the sign of `y` when the integer `m` is odd.
#[inline(always)]
fn flip_odd(y: f64, m: i64) -> f64 {
    f64::from_bits(y.to_bits() ^ ((m as u64) << 63))
}

/// sin x = (-1)^m·sin(x - m·π), m = round(x/π).
#[inline(always)]
fn sin32(x: f64) -> f64 {
    let (mf, m) = round_prod(x, INV_PI);
    flip_odd(sin_half(reduce_pi(x, mf, 1.0)), m)
}

/// cos x = (-1)^(n+1)·sin(x - (2n+1)·π/2), n = round(x/π - 1/2): the
/// reduced argument is small exactly where cos x is, so the result keeps
/// its relative accuracy next to cos's zeros.
#[inline(always)]
fn cos32(x: f64) -> f64 {
    let (nf, n) = round_k(x.mul_add(INV_PI, -0.5));
    let mf = nf.mul_add(2.0, 1.0);
    flip_odd(sin_half(reduce_pi(x, mf, 0.5)), n.wrapping_add(1))
}

/// tan x from r = x - j·π/2, j = round(2x/π): sin r / cos r for even j,
/// -cos r / sin r for odd j (one division, 2^-53). A division from an f32
/// reciprocal corrected by its residual (twice the lanes per division
/// instruction) made `tan`, `arctan` and `arctanh` slower: 0.93 → 1.07,
/// 0.64 → 0.85 and 1.39 → 1.72 ns per value, AVX-512 (`kernel_rate
/// --f32`).
#[inline(always)]
fn tan32(x: f64) -> f64 {
    let (jf, j) = round_prod(x, TWO_OVER_PI);
    let r = reduce_pi(x, jf, 0.5);
    let z = r * r;
    let s = copysign((r * z).mul_add(horner(z, &SIN_QUARTER), r), r);
    let c = z.mul_add(-0.5, 1.0) + (z * z) * horner(z, &COS_QUARTER);
    let odd = j & 1 == 1;
    sel(odd, -c, s) / sel(odd, s, c)
}

/// sin x in f32 over a group of lanes (faithfully rounded).
#[inline(always)]
pub(crate) fn sin<const N: usize>(v: &mut [f32; N]) {
    map_trig(v, sin32, f64::sin);
}

/// cos x in f32 over a group of lanes (faithfully rounded).
#[inline(always)]
pub(crate) fn cos<const N: usize>(v: &mut [f32; N]) {
    map_trig(v, cos32, f64::cos);
}

/// tan x in f32 over a group of lanes (faithfully rounded).
#[inline(always)]
pub(crate) fn tan<const N: usize>(v: &mut [f32; N]) {
    map_trig(v, tan32, f64::tan);
}

// ---------------------------------------------------------------------
// arcsin, arccos, arctan
// ---------------------------------------------------------------------

/// tan(3π/8) = 1 + √2.
const TAN_3PI_8: f64 = 2.414_213_562_373_095;

/// tan(π/8) = √2 - 1.
const TAN_PI_8: f64 = 0.414_213_562_373_095_1;

/// P(z) ≈ (atan(y)/y - 1)/z, z = y², on |y| <= tan(π/8): a degree-6
/// Chebyshev fit (relative error 2^-34.0 of P; the term y·z·P is < 6% of
/// the result).
const ATAN_P: [f64; 7] = [
    -0.333_333_333_314_407_3,
    0.199_999_989_172_885_8,
    -0.142_856_125_113_870_16,
    0.111_074_951_357_144_74,
    -0.090_289_835_003_504_63,
    0.071_353_251_223_306_78,
    -0.040_432_248_258_871_61,
];

/// P(z) ≈ (asin(t)/t - 1)/z, z = t², on t <= 1/2: a degree-6 Chebyshev
/// fit (relative error 2^-29.5 of P; the term t·z·P is < 5% of asin t, so
/// < 2^-33.8 of the result).
const ASIN_P: [f64; 7] = [
    0.166_666_666_860_856_43,
    0.074_999_924_044_018_38,
    0.044_647_663_888_134_85,
    0.030_269_138_728_589_183,
    0.023_611_817_008_891_752,
    0.010_574_415_516_912_909,
    0.030_974_540_371_355_073,
];

/// atan x: |x| reduced to y = -1/|x| (base π/2) above tan(3π/8), to
/// (|x| - 1)/(|x| + 1) (base π/4) above tan(π/8), else y = |x|; atan x =
/// ±(base + y + y·z·P(z)). The numerator and denominator are exact, the
/// one division rounds at 2^-53.
#[inline(always)]
fn atan32(x: f64) -> f64 {
    let t = x.abs();
    let big = t > TAN_3PI_8;
    let mid = t > TAN_PI_8;
    let num = sel(big, -1.0, sel(mid, t - 1.0, t));
    let den = sel(big, t, sel(mid, t + 1.0, 1.0));
    let base = sel(big, FRAC_PI_2, sel(mid, FRAC_PI_4, 0.0));
    let y = num / den;
    let z = y * y;
    copysign(base + (y * z).mul_add(horner(z, &ATAN_P), y), x)
}

/// asin w for 0 <= w <= 1/2 with z = w² (passed in: exact for the upper
/// range's w² = (1 - t)/2).
#[inline(always)]
fn asin_small(w: f64, z: f64) -> f64 {
    (w * z).mul_add(horner(z, &ASIN_P), w)
}

/// (asin of the reduced argument, whether |x| > 1/2): for t = |x| <= 1/2
/// asin t itself, above it a = asin w, w = √((1 - t)/2), with asin t =
/// π/2 - 2a (1 - t and its half exact; NaN for t > 1).
#[inline(always)]
fn asin_reduced(t: f64) -> (f64, bool) {
    let hi = t > 0.5;
    let half = 0.5 - 0.5 * t;
    let z = sel(hi, half, t * t);
    let w = sel(hi, half.sqrt(), t);
    (asin_small(w, z), hi)
}

/// asin x = ±(π/2 - 2a) or ±asin|x| (see [`asin_reduced`]).
#[inline(always)]
fn asin32(x: f64) -> f64 {
    let (a, hi) = asin_reduced(x.abs());
    copysign(sel(hi, (-2.0f64).mul_add(a, FRAC_PI_2), a), x)
}

/// acos x = π/2 - asin x for |x| <= 1/2, 2a for x > 1/2, π - 2a for x <
/// -1/2 (see [`asin_reduced`]; no cancellation beyond a factor 3).
#[inline(always)]
fn acos32(x: f64) -> f64 {
    let (a, hi) = asin_reduced(x.abs());
    let large = sel(x < 0.0, (-2.0f64).mul_add(a, PI), 2.0 * a);
    sel(hi, large, FRAC_PI_2 - copysign(a, x))
}

/// arctan x in f32 over a group of lanes (faithfully rounded).
#[inline(always)]
pub(crate) fn arctan<const N: usize>(v: &mut [f32; N]) {
    map(v, atan32);
}

/// arcsin x in f32 over a group of lanes (faithfully rounded; NaN outside [-1, 1]).
#[inline(always)]
pub(crate) fn arcsin<const N: usize>(v: &mut [f32; N]) {
    map(v, asin32);
}

/// arccos x in f32 over a group of lanes (faithfully rounded; NaN outside [-1, 1]).
#[inline(always)]
pub(crate) fn arccos<const N: usize>(v: &mut [f32; N]) {
    map(v, acos32);
}

// ---------------------------------------------------------------------
// exp2, expm1, sinh, cosh
// ---------------------------------------------------------------------

/// 1/n! for n = 2..=9: e^r - 1 = r + r²·E(r) on |r| <= ln2/2 (remainder
/// r^10/10! < 7e-12, 2^-35 of e^r - 1 relative).
const EXP_T: [f64; 8] = first(&EXP_TAIL);

/// 1/(2n)! for n = 1..=5: cosh r = 1 + z·C(z) on |r| <= ln2/2 (remainder
/// r^12/12! < 7e-15).
const COSH_T: [f64; 5] = [
    1.0 / 2.0,
    1.0 / 24.0,
    1.0 / 720.0,
    1.0 / 40_320.0,
    1.0 / 3_628_800.0,
];

/// 1/(2n+1)! for n = 1..=4: sinh r = r + r·z·S(z) on |r| <= ln2/2
/// (remainder r^11/11! < 2.2e-13, 2^-40 of sinh r relative).
const SINH_T: [f64; 4] = [1.0 / 6.0, 1.0 / 120.0, 1.0 / 5040.0, 1.0 / 362_880.0];

/// y = k·ln2 + r with k = round(y·log2 e), |r| <= ln2/2 (`exp`'s
/// reduction: the first fused multiply-add exact, r rounded at 2^-53;
/// the reduction's rounding error, which an f32 result does not need, is
/// dropped).
#[inline(always)]
fn reduce_ln2(y: f64) -> (i64, f64) {
    let (k, r, _) = exp::reduce_ln2(y);
    (k, r)
}

/// e^r - 1 for |r| <= ln2/2 (a little more after rounding).
#[inline(always)]
fn expm1_small(r: f64) -> f64 {
    (r * r).mul_add(horner(r, &EXP_T), r)
}

/// 2^x: x = k + f exactly (f = x - round(x), |f| <= 1/2), 2^f = 1 + p with
/// p = e^(f·ln2) - 1. x clamped to [-160, 130] first (2^x is 0 or inf in
/// f32 beyond), NaN kept.
#[inline(always)]
fn exp2_32(x: f64) -> f64 {
    let xc = clamp_keep_nan(x, -160.0, 130.0);
    let (kf, k) = round_k(xc);
    let p = expm1_small((xc - kf) * LN_2);
    let s = pow2i(k);
    s.mul_add(p, s)
}

/// e^x - 1 = 2^k·p + (2^k - 1) with p = e^r - 1 (one rounding; for k = 0
/// it is p itself, so small x keep their relative accuracy). x clamped to
/// [-110, 100] first, NaN kept; the sign of x is copied back (±0).
#[inline(always)]
fn expm1_32(x: f64) -> f64 {
    let (k, r) = reduce_ln2(clamp_keep_nan(x, -110.0, 100.0));
    let s = pow2i(k);
    copysign(s.mul_add(expm1_small(r), s - 1.0), x)
}

/// (e^t/2, e^-t/2, sinh r, whether k = 0) for t = |x| clamped to 100 (NaN
/// kept): t = k·ln2 + r, e^±r = C ± S with C = cosh r and S = sinh r from
/// their even and odd series (one reduction, no division), and e^±t/2 =
/// 2^(±k-1)·(C ± S).
#[inline(always)]
fn exp_halves(x: f64) -> (f64, f64, f64, bool) {
    let t = clamp_keep_nan(x.abs(), 0.0, 100.0);
    let (k, r) = reduce_ln2(t);
    let z = r * r;
    let c = z.mul_add(horner(z, &COSH_T), 1.0);
    let s = (r * z).mul_add(horner(z, &SINH_T), r);
    let up = pow2i(k.wrapping_sub(1)) * (c + s);
    let down = pow2i((-k).wrapping_sub(1)) * (c - s);
    (up, down, s, k == 0)
}

/// sinh x = ±(e^t/2 - e^-t/2), or ±sinh r itself when k = 0 (t <= ln2/2,
/// where the difference would cancel); for k >= 1 it loses under 3 bits.
#[inline(always)]
fn sinh32(x: f64) -> f64 {
    let (up, down, s, k0) = exp_halves(x);
    copysign(sel(k0, s, up - down), x)
}

/// cosh x = e^t/2 + e^-t/2.
#[inline(always)]
fn cosh32(x: f64) -> f64 {
    let (up, down, _, _) = exp_halves(x);
    up + down
}

/// 2^x in f32 over a group of lanes (faithfully rounded).
#[inline(always)]
pub(crate) fn exp2<const N: usize>(v: &mut [f32; N]) {
    map(v, exp2_32);
}

/// e^x - 1 in f32 over a group of lanes (faithfully rounded).
#[inline(always)]
pub(crate) fn expm1<const N: usize>(v: &mut [f32; N]) {
    map(v, expm1_32);
}

/// sinh x in f32 over a group of lanes (faithfully rounded).
#[inline(always)]
pub(crate) fn sinh<const N: usize>(v: &mut [f32; N]) {
    map(v, sinh32);
}

/// cosh x in f32 over a group of lanes (faithfully rounded).
#[inline(always)]
pub(crate) fn cosh<const N: usize>(v: &mut [f32; N]) {
    map(v, cosh32);
}

// ---------------------------------------------------------------------
// arcsinh, arccosh, arctanh
// ---------------------------------------------------------------------

/// R(f) ≈ (ln(1 + f) - f + f²/2)/f³ on f in [√½ - 1, √2 - 1]: a degree-10
/// Chebyshev fit (relative error 2^-29.1 of R; f³·R is < 27% of ln(1 + f),
/// so < 2^-31 of the result).
const LOG_R: [f64; 11] = [
    0.333_333_333_848_037_54,
    -0.249_999_994_987_083,
    0.199_999_737_278_963_75,
    -0.166_667_198_060_746_6,
    0.142_878_860_999_825_02,
    -0.124_999_277_171_860_18,
    0.110_482_503_771_573_95,
    -0.099_315_531_379_480_22,
    0.098_045_643_860_970_82,
    -0.097_276_593_897_608_98,
    0.055_550_945_560_644_93,
];

/// ln x (the core of the inverse hyperbolic functions, whose arguments are
/// at least 1 or special): x = 2^e·(1 + f) split by the f64 log's
/// `log::parts_normal` (e exact, f exact), ln(1 + f) = f +
/// f²·(f·R(f) - 1/2) with this module's shorter fit, and the f64 log's
/// special cases (`log::log_special`).
#[inline(always)]
fn ln(x: f64) -> f64 {
    let (ef, f) = log::parts_normal(x);
    let l = (f * f).mul_add(f.mul_add(horner(f, &LOG_R), -0.5), f);
    log::log_special(x, ef.mul_add(LN_2, l))
}

/// Below this |x| the inverse hyperbolic functions take their series:
/// there the logarithm's argument would lie within 2^-11 of 1, and its
/// rounding (2^-53) would exceed 2^-41 of the result.
const SERIES_BELOW: f64 = 1.0 / 4096.0;

/// asinh x = ±ln(t + √(t² + 1)), t = |x| (t² exact: t has 24 bits), or
/// ±(t - t³/6 + 3t⁵/40) below [`SERIES_BELOW`] (remainder < t·2^-76).
#[inline(always)]
fn asinh32(x: f64) -> f64 {
    let t = x.abs();
    let z = t * t;
    let series = (t * z).mul_add(z.mul_add(3.0 / 40.0, -1.0 / 6.0), t);
    let big = ln(t + t.mul_add(t, 1.0).sqrt());
    copysign(sel(t < SERIES_BELOW, series, big), x)
}

/// acosh x = ln(x + √(x² - 1)) (x² - 1 exact; NaN below 1): next to 1 the
/// logarithm's argument is at least 1 + 2^-11.5, where its rounding is
/// below 2^-41 of the result.
#[inline(always)]
fn acosh32(x: f64) -> f64 {
    let y = ln(x + x.mul_add(x, -1.0).sqrt());
    sel(x >= 1.0, y, f64::NAN)
}

/// atanh x = ±ln((1 + t)/(1 - t))/2, t = |x| (1 ± t exact for t >=
/// 2^-12, one division), or ±(t + t³/3 + t⁵/5) below [`SERIES_BELOW`];
/// ±inf at ±1, NaN beyond (a negative quotient's logarithm).
#[inline(always)]
fn atanh32(x: f64) -> f64 {
    let t = x.abs();
    let z = t * t;
    let series = (t * z).mul_add(z.mul_add(0.2, 1.0 / 3.0), t);
    let big = 0.5 * ln((1.0 + t) / (1.0 - t));
    copysign(sel(t < SERIES_BELOW, series, big), x)
}

/// arcsinh x in f32 over a group of lanes (faithfully rounded).
#[inline(always)]
pub(crate) fn arcsinh<const N: usize>(v: &mut [f32; N]) {
    map(v, asinh32);
}

/// arccosh x in f32 over a group of lanes (faithfully rounded; NaN below 1).
#[inline(always)]
pub(crate) fn arccosh<const N: usize>(v: &mut [f32; N]) {
    map(v, acosh32);
}

/// arctanh x in f32 over a group of lanes (faithfully rounded; NaN outside [-1, 1]).
#[inline(always)]
pub(crate) fn arctanh<const N: usize>(v: &mut [f32; N]) {
    map(v, atanh32);
}

// ---------------------------------------------------------------------
// erf
// ---------------------------------------------------------------------

/// erf x in f32 over a group of lanes (faithfully rounded): the f64
/// kernel's table with a shorter expansion ([`erf::erf_short`]).
#[inline(always)]
pub(crate) fn erf<const N: usize>(v: &mut [f32; N]) {
    map(v, erf::erf_short);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group kernel of this module.
    type Kernel = fn(&mut [f32; 32]);

    /// A scalar f64 function.
    type Scalar = fn(f64) -> f64;

    /// The lanes' kernel on a few inputs (the rest of the group zero).
    fn group(k: Kernel, inputs: &[f32]) -> Vec<f32> {
        let mut v = [0.0f32; 32];
        v[..inputs.len()].copy_from_slice(inputs);
        k(&mut v);
        v[..inputs.len()].to_vec()
    }

    #[test]
    fn odd_functions_keep_the_sign_of_zero() {
        let odd: [(&str, Kernel); 9] = [
            ("erf", erf),
            ("sin", sin),
            ("tan", tan),
            ("arcsin", arcsin),
            ("arctan", arctan),
            ("sinh", sinh),
            ("arcsinh", arcsinh),
            ("arctanh", arctanh),
            ("expm1", expm1),
        ];
        for (name, k) in odd {
            let got = group(k, &[0.0, -0.0]);
            assert_eq!(got[0].to_bits(), 0.0f32.to_bits(), "{name}(+0)");
            assert_eq!(got[1].to_bits(), (-0.0f32).to_bits(), "{name}(-0)");
        }
    }

    #[test]
    fn special_values_and_domains() {
        let (inf, nan) = (f32::INFINITY, f32::NAN);
        let cases: [(&str, Kernel, f32, f32); 30] = [
            ("erf", erf, -inf, -1.0),
            ("erf", erf, 3.95, 1.0),
            // Tiny x: erf x = x·2/√π, rounded once.
            (
                "erf",
                erf,
                1e-30,
                (f64::from(1e-30f32) * std::f64::consts::FRAC_2_SQRT_PI) as f32,
            ),
            ("sin", sin, inf, nan),
            ("cos", cos, -inf, nan),
            ("tan", tan, nan, nan),
            ("cos", cos, 0.0, 1.0),
            ("arcsin", arcsin, 1.5, nan),
            ("arcsin", arcsin, -1.0, -std::f32::consts::FRAC_PI_2),
            ("arccos", arccos, -1.0, std::f32::consts::PI),
            ("arccos", arccos, 1.0, 0.0),
            ("arccos", arccos, -1.0001, nan),
            ("arctan", arctan, -inf, -std::f32::consts::FRAC_PI_2),
            ("arctan", arctan, f32::MAX, std::f32::consts::FRAC_PI_2),
            ("sinh", sinh, -inf, -inf),
            ("sinh", sinh, 89.5, inf),
            ("cosh", cosh, -inf, inf),
            ("cosh", cosh, 0.0, 1.0),
            ("arcsinh", arcsinh, -inf, -inf),
            ("arccosh", arccosh, 0.5, nan),
            ("arccosh", arccosh, -2.0, nan),
            ("arccosh", arccosh, 1.0, 0.0),
            ("arccosh", arccosh, inf, inf),
            ("arctanh", arctanh, -1.0, -inf),
            ("arctanh", arctanh, 1.5, nan),
            ("exp2", exp2, -inf, 0.0),
            ("exp2", exp2, 128.0, inf),
            ("exp2", exp2, -149.0, f32::from_bits(1)),
            ("expm1", expm1, -inf, -1.0),
            ("expm1", expm1, inf, inf),
        ];
        for (name, k, x, want) in cases {
            let got = group(k, &[x])[0];
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{name}({x:e}) = {got:e}, want {want:e}"
            );
        }
        for k in [sin, cos, tan, arcsin, arccos, arctan, sinh, cosh] {
            assert!(group(k, &[nan])[0].is_nan());
        }
        for k in [arcsinh, arccosh, arctanh, exp2, expm1, erf] {
            assert!(group(k, &[nan])[0].is_nan());
        }
    }

    #[test]
    fn exp2_is_exact_at_integers() {
        for e in -149..=127 {
            let want = (2.0f64).powi(e) as f32;
            assert_eq!(group(exp2, &[e as f32])[0], want, "exp2({e})");
        }
    }

    #[test]
    fn large_trig_arguments_take_the_c_library_path() {
        let xs = [
            TRIG_LIMIT,
            -TRIG_LIMIT,
            2e12,
            3e38,
            -f32::MAX,
            1.5 * TRIG_LIMIT,
        ];
        let exact: [(Kernel, Scalar); 3] = [(sin, f64::sin), (cos, f64::cos), (tan, f64::tan)];
        for (k, f) in exact {
            // One large lane among ordinary ones: only it is recomputed.
            let mut inputs = vec![0.5f32; 8];
            inputs.extend(xs);
            let got = group(k, &inputs);
            for (&x, &g) in inputs.iter().zip(&got) {
                let want = f(f64::from(x)) as f32;
                assert!(
                    g.to_bits().abs_diff(want.to_bits()) <= 1,
                    "{x:e}: {g:e} vs {want:e}"
                );
            }
            for (&x, &g) in xs.iter().zip(&got[8..]) {
                assert_eq!(g, f(f64::from(x)) as f32, "exact path at {x:e}");
            }
        }
        // Just below the limit the vector path is used and still faithful.
        let below = f32::from_bits(TRIG_LIMIT.to_bits() - 1);
        let got = group(sin, &[below])[0];
        let want = f64::from(below).sin() as f32;
        assert!(got.to_bits().abs_diff(want.to_bits()) <= 1);
    }
}
