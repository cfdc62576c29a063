//! Native single-precision kernels: `exp`, `tanh`, `sigmoid`, `log`,
//! `log2`, `log10`, `log1p` and `softplus` computed in f32 lanes (sixteen
//! per AVX-512 vector, eight per AVX2 vector), where the other f32
//! functions compute in f64 lanes (`lean`, or the widened f64 kernel).
//!
//! Why: widening halves the lanes per vector and runs a kernel built for 53
//! bits; on 4e6 f32 elements `tanh` took 2.8x numpy's SIMD float32 tanh.
//! `sigmoid`, `log`, `log1p` and `softplus` document their methods at their
//! items.
//!
//! Invariant (the accuracy contract): every result is *faithfully rounded*,
//! i.e. within 1 ULP of the exact value, hence at most 1 ULP from the
//! correctly rounded f64 reference (measured over all 2^32 inputs, see
//! ACCURACY.md). The error budget of each kernel is written beside it; the
//! final rounding takes 0.5 ULP of it and every other step is kept small
//! against that with error-free steps (Sterbenz subtractions, a residual
//! correction of the one division).
//!
//! Method, `exp`: x clamped to [-110, 89] (NaN kept), x = k·ln2 + r with
//! |r| <= ln2/2 by a two-constant Cody-Waite reduction whose first step is
//! exact (k·LN2_HI exact, then Sterbenz) and whose second, c = -k·LN2_LO
//! (up to 2.3e-4), is *not* applied to r but enters as the factor e^c, so
//! r carries no rounding: e^(r + c) = 1 + (r + (P + (e^c - 1)·(1 + r + P)))
//! with P = r²·Q(r), Q a degree-4 minimax fit (relative error 2^-27.6 with
//! f32 coefficients) and e^c - 1 = c + c²/2; the scaling
//! by 2^k is split in two exact powers so that the subnormal range rounds
//! once and overflow gives inf. Budget: 0.5 (last add) + 2^-26 absolute
//! (inner add, 0.25 ULP of a result below 1) + approximation < 0.8 ULP.
//!
//! Method, `tanh`: t = |x| clamped to 9.5 (tanh rounds to 1 beyond 9.01),
//! T = tanh(h) = h + h·(w·P(w)), w = h², P a degree-4 minimax fit on
//! [0, 0.625] (one fused multiply-add: the correction is < 12% of h, so
//! its few ULP of error cost < 0.3 ULP of T). For t < 0.625, h = t and T is
//! the result. For t >= 0.625 the same polynomial serves the rest of a
//! reduction t = k·ln2/2 + h (|h| <= ln2/4, k >= 2; the first step exact
//! by Sterbenz, h rounded once): with S = 2^k, tanh t = (τ + T)/(1 + τ·T)
//! for τ = (S - 1)/(S + 1), so 1 - tanh t = q = 2·(1 - T)/(A + C·T) with A
//! = S + 1 and C = S - 1 exact; 1 - T is carried as d + e exactly (fast
//! two-sum), and the quotient q0 = 2d/(A + B), B = C·T, is corrected once
//! by its residual 2·(d + e) - q0·A - q0·B (fused multiply-adds) times
//! 1/(A + B) ≈ q0·(1 - d/2). q < 0.45, so 1 - q adds no cancellation. The
//! sign is copied back last (tanh(-0) = -0, tiny x give x). One polynomial
//! and one division per lane: 0.86 → 0.72 ns per value with AVX2 and 0.55
//! → 0.47 with AVX-512 (in cache, best of 7 rounds, Zen 4) against the
//! former kernel that evaluated tanh's polynomial and exp's for every lane.
//!
//! Every helper is branch-free and uses only operations SSE2 / AVX2 /
//! AVX-512 vectorise, and `mul_add` is a correctly rounded fused
//! multiply-add in every variant (software in the baseline one), so all
//! variants give the same bits.

use super::common::{horner, sel};

/// Lanes per group of the f32 drivers: two AVX-512 or four AVX2 vectors.
pub(crate) const LANES32: usize = 32;

/// 1.5 · 2^23: adding it rounds any |x| < 2^22 to the nearest integer and
/// leaves that integer in the low mantissa bits.
const MAGIC32: f32 = 12_582_912.0;

/// log2(e) rounded to f32.
const LOG2E32: f32 = std::f32::consts::LOG2_E;

/// ln 2 rounded to 16 significant bits, so that `k * LN2_HI32` is exact
/// for |k| < 2^8.
const LN2_HI32: f32 = 0.693_145_75;

/// ln 2 - [`LN2_HI32`] (to f32 precision).
const LN2_LO32: f32 = 1.428_606_8e-6;

/// Q(r) ≈ (e^r - 1 - r)/r² on |r| <= ln2/2: degree-4 minimax fit of the
/// relative error of e^r (2^-27.6 with these f32 coefficients).
const EXP_Q: [f32; 5] = [
    0.499_999_94,
    0.166_665_15,
    0.041_668_456,
    0.008_369_424,
    0.001_381_313_3,
];

/// P(w) ≈ (tanh(t)/t - 1)/t², w = t², on t < [`TANH_SPLIT32`]: degree-4
/// minimax fit of tanh's relative error (2^-27 with these coefficients).
const TANH_P: [f32; 5] = [
    -0.333_332_8,
    0.133_314_28,
    -0.053_738_512,
    0.020_634_985,
    -0.005_700_215_7,
];

/// tanh takes the polynomial below this |x| and 1 - 2/(e^(2|x|) + 1) from
/// it on (q < 0.45 there, so the subtraction adds no cancellation).
const TANH_SPLIT32: f32 = 0.625;

/// |x| is clamped to this: tanh(x) rounds to ±1 in f32 for |x| > 9.01.
const TANH_CLAMP32: f32 = 9.5;

/// |x| with the sign bit of `s`.
#[inline(always)]
fn copysign(x: f32, s: f32) -> f32 {
    const SIGN: u32 = 1 << 31;
    f32::from_bits((x.to_bits() & !SIGN) | (s.to_bits() & SIGN))
}

/// Rounds `x` (|x| < 2^22) to the nearest integer, ties to even: the
/// integer as f32 and as i32 (garbage, never a panic, for NaN).
#[inline(always)]
fn round_k(x: f32) -> (f32, i32) {
    let t = x + MAGIC32;
    let kf = t - MAGIC32;
    let k = (t.to_bits() as i32).wrapping_sub(MAGIC32.to_bits() as i32);
    (kf, k)
}

/// 2^k for k in [-126, 127], built from bits.
#[inline(always)]
fn pow2i(k: i32) -> f32 {
    f32::from_bits((k.wrapping_add(127) as u32) << 23)
}

/// The reduction and polynomial of the module header as exact pieces:
/// e^y = 2^k·(1 + r + small) with r exact (|r| <= ln2/2 + a little) and
/// `small` rounded once (|small| < 0.07, so its error is < 2^-28).
#[inline(always)]
fn exp_parts(y: f32) -> (i32, f32, f32) {
    let (kf, k) = round_k(y * LOG2E32);
    // Exact: k·LN2_HI32 is exact and within a factor 2 of y (Sterbenz).
    let r = (-kf).mul_add(LN2_HI32, y);
    // e^(y - k·ln2) = e^r·e^c with c = -k·LN2_LO32 (|c| < 2.3e-4, far
    // above f32's resolution, so it is a factor, not a term):
    // e^c - 1 = c + c²/2 (c³/6 < 2^-40), and
    // e^r·e^c - 1 = r + (P + (e^c - 1)·(1 + r + P)) with P = r²·Q(r).
    let c = -kf * LN2_LO32;
    let ec = (0.5 * c).mul_add(c, c);
    let pr = (r * r) * horner(r, &EXP_Q);
    (k, r, ec.mul_add((1.0 + r) + pr, pr))
}

/// e^y as (k, p) with e^y = 2^k·(1 + p), |p| <= 0.42 ([`exp_parts`]
/// with its two pieces added: one more rounding, < 2^-26).
#[inline(always)]
fn exp_reduce(y: f32) -> (i32, f32) {
    let (k, r, small) = exp_parts(y);
    (k, r + small)
}

/// p · 2^k for k in [-252, 254] with a single rounding (the first product
/// is exact for |p| in [2^-60, 4]): the subnormal range rounds once and
/// overflow gives inf.
#[inline(always)]
fn scale(p: f32, k: i32) -> f32 {
    let k1 = k >> 1;
    p * pow2i(k1) * pow2i(k - k1)
}

/// e^x in f32 (faithfully rounded; see the module header).
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    let xc = sel(x > 89.0, 89.0, x);
    let xc = sel(xc < -110.0, -110.0, xc);
    let (k, p) = exp_reduce(xc);
    // k in [-159, 129]: two factors in [-80, 65].
    scale(1.0 + p, k)
}

/// ln2/2 rounded to 15 significant bits ([`LN2_HI32`] halved), so that
/// `k * HALF_LN2_HI32` is exact for |k| < 2^9.
const HALF_LN2_HI32: f32 = 0.5 * LN2_HI32;

/// ln2/2 - [`HALF_LN2_HI32`] (to f32 precision).
const HALF_LN2_LO32: f32 = 0.5 * LN2_LO32;

/// tanh x in f32 over a group of lanes (faithfully rounded; see the
/// module header): both ranges of every lane branch-free, one polynomial
/// evaluation and one division. Written statement by statement (each
/// step over all lanes before the next) so that the lanes' long chains
/// interleave: 0.79 → 0.72 ns per value with AVX2 and 0.53 → 0.51 with
/// AVX-512 against two loops over the lanes (in cache, best of 7).
#[inline(always)]
pub(crate) fn tanh_staged<const N: usize>(v: &mut [f32; N]) {
    let mut ts = [0.0f32; N];
    let mut hs = [0.0f32; N];
    let mut ss = [0.0f32; N];
    let mut qs = [0.0f32; N];
    let mut ds = [0.0f32; N];
    let mut bs = [0.0f32; N];
    let mut num = [0.0f32; N];
    for i in 0..N {
        let t = v[i].abs();
        let t = sel(t > TANH_CLAMP32, TANH_CLAMP32, t);
        // t = k·ln2/2 + h, |h| <= ln2/4: k·HALF_LN2_HI32 is exact and
        // within a factor 2 of t for t >= 0.625 (k >= 2), so the first
        // step is exact (Sterbenz); the second rounds h once (< 2^-27).
        let (kf, k) = round_k(t * (2.0 * LOG2E32));
        let h = (-kf).mul_add(HALF_LN2_HI32, t);
        let h = (-kf).mul_add(HALF_LN2_LO32, h);
        // Small lanes reduce nothing: T = tanh(t) is their result.
        hs[i] = sel(t < TANH_SPLIT32, t, h);
        ss[i] = pow2i(k);
    }
    for i in 0..N {
        let h = hs[i];
        let w = h * h;
        ts[i] = h.mul_add(w * horner(w, &TANH_P), h);
    }
    // Large lanes: q = 2·(1 - T)/(A + B), A = S + 1, B = C·T, C = S - 1.
    for i in 0..N {
        bs[i] = (ss[i] - 1.0) * ts[i];
        ds[i] = 1.0 - ts[i];
        num[i] = ds[i] + ds[i];
    }
    for i in 0..N {
        qs[i] = num[i] / ((ss[i] + 1.0) + bs[i]);
    }
    for i in 0..N {
        let (tv, d, b, q0) = (ts[i], ds[i], bs[i], qs[i]);
        let a = ss[i] + 1.0;
        // 1 - T = d + e exactly (fast two-sum, |T| < 1).
        let e = -tv - (d - 1.0);
        // Residual 2·(d + e) - q0·(A + B), then one correction step by
        // 1/(A + B) = q0/(2d) ≈ q0·(1 - d/2) (|d - 1| < 0.18: the
        // correction is off by < 4% of itself).
        let res = (-q0).mul_add(b, (-q0).mul_add(a, num[i]));
        let res = (e + e) + res;
        let q = res.mul_add(q0 * (-0.5f32).mul_add(d, 1.0), q0);
        let t = v[i].abs();
        v[i] = copysign(sel(t < TANH_SPLIT32, tv, 1.0 - q), v[i]);
    }
}

/// Applies `exp` to every lane of a group.
#[inline(always)]
pub(crate) fn exp_staged<const N: usize>(v: &mut [f32; N]) {
    for x in v.iter_mut() {
        *x = exp(*x);
    }
}

/// 1/(1 + e^-x) in f32 over a group of lanes (faithfully rounded).
///
/// With a = |x| (clamped to 110, NaN kept) and e^-a = s·(1 + r + small)
/// from [`exp_parts`] (s = 2^k, k <= 0), q = 1/D, D = 1 + s + s·r +
/// s·small, is a first quotient q0 corrected by its residual
/// 1 - q0·D = t0 - q0·s - q0·s·r - q0·s·small with t0 = 1 - q0 (exact,
/// q0 in [1/2, 1]); t0 - q0·s is exact too (the two are within a factor
/// 2 of each other: Sterbenz), so the residual rounds only at 2^-28 of 1.
/// sigmoid(a) = q, one rounding; sigmoid(-a) = e^-a·q = 2^k·z with
/// z = q0 + (q0·r + tail), tail = q0·small + q0·res·(1 + r): budget 0.5
/// (last add) + 0.25 (inner fma, < 2^-26 of z) + 2^-27 of q < 0.95 ULP.
/// In the denominator s is at least 2^-60 (below that D = 1 to 2^-59),
/// which keeps every product normal; the result's 2^k is applied last in
/// two exact factors, so the subnormal tail (x < -87.3) rounds once.
#[inline(always)]
pub(crate) fn sigmoid_staged<const N: usize>(v: &mut [f32; N]) {
    // Two stages (the reduction, then the quotient and its correction):
    // one loop holding both spilled on AVX2's sixteen registers.
    let mut ks = [0i32; N];
    let mut rs = [0.0f32; N];
    let mut smalls = [0.0f32; N];
    for (((x, k), r), small) in v.iter().zip(&mut ks).zip(&mut rs).zip(&mut smalls) {
        let a = x.abs();
        let a = sel(a > 110.0, 110.0, a);
        (*k, *r, *small) = exp_parts(-a);
    }
    for (((x, &k), &r), &small) in v.iter_mut().zip(&ks).zip(&rs).zip(&smalls) {
        let s = pow2i(k.max(-60));
        let q0 = 1.0 / (1.0 + s * (1.0 + (r + small)));
        let qs = q0 * s;
        let t1 = (-q0).mul_add(s, 1.0 - q0);
        let t2 = (-qs).mul_add(r, t1);
        let res = (-qs).mul_add(small, t2);
        let pos = res.mul_add(q0, q0);
        let tail = q0.mul_add(small, (q0 * res) * (1.0 + r));
        let z = q0 + q0.mul_add(r, tail);
        let neg = scale(z, k);
        *x = sel(*x < 0.0, neg, pos);
    }
}

/// R(f) ≈ (ln(1 + f) - f + f²/2)/f³ on f in [√½ - 1, √2 - 1]: degree-7
/// minimax fit of ln(1 + f)'s relative error (2^-27.3 with these f32
/// coefficients).
const LOG_R: [f32; 8] = [
    0.333_333_3,
    -0.250_008_23,
    0.200_012_34,
    -0.166_232_99,
    0.142_015_53,
    -0.131_605_83,
    0.127_633_27,
    -0.076_356_55,
];

/// ln x in f32 over a group of lanes (faithfully rounded).
///
/// x = 2^e·m with m in [√½, √2) from the bits (subnormals scaled by 2^23
/// first), f = m - 1 exact (Sterbenz), ln x = e·LN2_HI + f - f²/2 +
/// f³·R(f) + e·LN2_LO. The large part e·LN2_HI + f is summed with its
/// exact error (fast two-sum: |e·LN2_HI| >= ln 2 > |f| whenever e != 0),
/// f²/2 with its exact error (a fused multiply-add), so only the small
/// part (< 27% of the result) rounds before the final addition: budget
/// 0.5 + < 0.15 + approximation < 0.7 ULP. ln(±0) = -inf, ln(x < 0) = NaN,
/// ln(inf) = inf, NaN stays NaN.
#[inline(always)]
pub(crate) fn log_staged<const N: usize>(v: &mut [f32; N]) {
    for x in v.iter_mut() {
        *x = log_plus(*x, 0.0);
    }
}

/// e·ln2 + ln(1 + f) + extra as hi + small, to be added once (|f| <=
/// √2 - 1, e an integer, `extra` far below the result): e·LN2_HI + f is
/// summed with its exact error (fast two-sum: |e·LN2_HI| >= ln 2 > |f|
/// whenever e != 0), f²/2 with its exact error (a fused multiply-add), and
/// the rest (f³·R(f), e·LN2_LO, `extra`) joins those errors in `small`.
/// The core of [`log_staged`], [`log1p_staged`] and [`softplus_staged`].
#[inline(always)]
fn log_pieces(ef: f32, f: f32, extra: f32) -> (f32, f32) {
    let big = ef * LN2_HI32;
    let hi = big + f;
    let hi_err = f - (hi - big);
    let hf = 0.5 * f;
    let h = hf * f;
    let hl = hf.mul_add(f, -h);
    let f3 = (f * f) * f;
    let low = ef.mul_add(LN2_LO32, (hi_err - hl) + extra);
    (hi, f3.mul_add(horner(f, &LOG_R), low) - h)
}

/// x = 2^e·(1 + f) with 1 + f in [√½, √2), for a positive finite x
/// (subnormals scaled by 2^23 first): (e as f32, f), f exact (Sterbenz).
/// Garbage for other x; [`log_special`] replaces those lanes.
#[inline(always)]
fn log_split(x: f32) -> (f32, f32) {
    const SQRT_HALF_BITS: u32 = 0x3f35_04f3; // √½ rounded to f32
    let sub = x < f32::MIN_POSITIVE;
    let y = sel(sub, x * 8_388_608.0, x);
    let bits = y.to_bits();
    // e and m with m in [√½, √2): shift the bits so that the mantissa
    // range starts at √½.
    let t = bits.wrapping_sub(SQRT_HALF_BITS);
    let e = ((t as i32) >> 23) - sel(sub, 23, 0);
    let m = f32::from_bits((t & 0x007f_ffff).wrapping_add(SQRT_HALF_BITS));
    (e as f32, m - 1.0)
}

/// `y`, a logarithm of x, with x's special cases: 0 -> -inf, negative or
/// NaN -> NaN, inf -> inf.
#[inline(always)]
fn log_special(x: f32, y: f32) -> f32 {
    let y = sel(x == 0.0, f32::NEG_INFINITY, y);
    let y = sel(x < 0.0 || x.is_nan(), f32::NAN, y);
    sel(x == f32::INFINITY, f32::INFINITY, y)
}

/// ln(x) + extra, for a correction `extra` far smaller than the result
/// ([`log1p_staged`] passes its argument's rounding error over the
/// argument): it joins the small part, so the sum still rounds once at the
/// result's scale. Specials as [`log_staged`], whatever `extra` is.
#[inline(always)]
fn log_plus(x: f32, extra: f32) -> f32 {
    let (ef, f) = log_split(x);
    let (hi, small) = log_pieces(ef, f, extra);
    log_special(x, hi + small)
}

/// log2 e as f32 plus the rest.
const LOG2E_HI32: f32 = std::f32::consts::LOG2_E;
const LOG2E_LO32: f32 = 1.925_963e-8;

/// log10 e as f32 plus the rest.
const LOG10E_HI32: f32 = std::f32::consts::LOG10_E;
const LOG10E_LO32: f32 = -1.010_305e-8;

/// log10 2 rounded to 16 significant bits (e·LOG10_2_HI32 is exact for
/// |e| < 2^8), plus the rest.
const LOG10_2_HI32: f32 = 0.301_033_02;
const LOG10_2_LO32: f32 = -3.024_355_5e-6;

/// e·B + ln(1 + f)·L for an exact `big` = e·B (|big| >= 0.3 or 0) and
/// L = `l_hi` + `l_lo` (|ln(1 + f)·L| <= 0.16 for log10, 0.5 for log2):
/// ln(1 + f) = f + s with s = f³·R(f) - f²/2 (f²/2 with its exact error,
/// [`log_pieces`]'s method; |s| < 20% of |f|); f·l_hi is split into its
/// rounded product and exact error, and `big` + that product is a fast
/// two-sum, so only the small terms (`low`: the error, f·l_lo, s·L and
/// e·B's own tail) round before the final addition: budget 0.5 (last add)
/// plus < 0.25 (s and s·L, < 20% of the result each at 0.5 ULP), < 0.8
/// ULP. Exact at powers of two for log2 (f = 0: the result is e).
#[inline(always)]
fn log_base(big: f32, f: f32, l_hi: f32, l_lo: f32, low: f32) -> f32 {
    let hf = 0.5 * f;
    let h = hf * f;
    let hl = hf.mul_add(f, -h);
    let s = ((f * f) * f).mul_add(horner(f, &LOG_R), -hl) - h;
    let p = f * l_hi;
    let q = f.mul_add(l_hi, -p);
    let rest = s.mul_add(l_hi, f.mul_add(l_lo, q + low));
    let hi = big + p;
    let err = p - (hi - big);
    hi + (err + rest)
}

/// log2 x in f32 over a group of lanes (faithfully rounded; exact at
/// powers of two): e + ln(1 + f)·log2 e ([`log_base`]). Specials as
/// [`log_staged`].
#[inline(always)]
pub(crate) fn log2_staged<const N: usize>(v: &mut [f32; N]) {
    for x in v.iter_mut() {
        let (ef, f) = log_split(*x);
        *x = log_special(*x, log_base(ef, f, LOG2E_HI32, LOG2E_LO32, 0.0));
    }
}

/// log10 x in f32 over a group of lanes (faithfully rounded): e·log10 2 +
/// ln(1 + f)·log10 e ([`log_base`]). Specials as [`log_staged`].
#[inline(always)]
pub(crate) fn log10_staged<const N: usize>(v: &mut [f32; N]) {
    for x in v.iter_mut() {
        let (ef, f) = log_split(*x);
        let big = ef * LOG10_2_HI32;
        *x = log_special(
            *x,
            log_base(big, f, LOG10E_HI32, LOG10E_LO32, ef * LOG10_2_LO32),
        );
    }
}

/// ln(1 + x) in f32 over a group of lanes (faithfully rounded).
///
/// u = 1 + x rounded, with its rounding error c exactly (Knuth's two-sum),
/// and ln(1 + x) = ln(u + c) = ln(u) + c/u: [`log_plus`] with c/u as its
/// correction (|c/u| <= 2^-24, so the dropped (c/u)²/2 is below 2^-49;
/// c/u matters relative to the result when x is small, where it is
/// computed to f32 precision, ample for a term below 2^-24 of u).
/// ±0 give themselves; x = -1 gives -inf, x < -1 NaN.
#[inline(always)]
pub(crate) fn log1p_staged<const N: usize>(v: &mut [f32; N]) {
    for x in v.iter_mut() {
        let u = 1.0 + *x;
        let bb = u - 1.0;
        let c = (1.0 - (u - bb)) + (*x - bb);
        let r = log_plus(u, c / u);
        *x = sel(*x == 0.0, *x, r);
    }
}

/// ln(1 + e^x) in f32 over a group of lanes (faithfully rounded).
///
/// softplus(x) = max(x, 0) + L, L = ln(1 + E), E = e^-|x| =
/// s·(1 + r + small) from [`exp_parts`] (s = 2^k, k <= 0). L is [`log_staged`]'s
/// method on w = 1 + E without ever rounding w: f = w - 1 = E (e = 0) when
/// E < √2 - 1, else f = (E - 1)/2 (e = 1), each as f_hi + f_lo with f_lo
/// below f_hi's rounding (so that L is linear in it): fast two-sums give
/// 1 + r = u + its error, s·u - 1 = d + its error, and f_hi, f_lo from
/// the sum of the large piece and the small ones. For x > 0 the sum x + L is a fast
/// two-sum too, so every lane rounds once at its result's scale after
/// small parts of < 2^-27 relative: budget < 0.85 ULP. Lanes with
/// |x| > 41.6 (k < -60) skip the logarithm: E < 2^-60 there, so the result
/// is x for x > 0 and E = 2^k·(1 + r + small), scaled in two exact
/// factors (the subnormal tail rounds once), for x < 0 (the test is on
/// |x| > 41.5, so that a NaN lane, whose k is garbage, keeps its NaN).
#[inline(always)]
pub(crate) fn softplus_staged<const N: usize>(v: &mut [f32; N]) {
    const SQRT2_M1: f32 = std::f32::consts::SQRT_2 - 1.0;
    // Stage 1: the reduction of -|x|.
    let mut ks = [0i32; N];
    let mut rs = [0.0f32; N];
    let mut smalls = [0.0f32; N];
    for (((x, k), r), small) in v.iter().zip(&mut ks).zip(&mut rs).zip(&mut smalls) {
        let a = x.abs();
        let a = sel(a > 110.0, 110.0, a);
        (*k, *r, *small) = exp_parts(-a);
    }
    // Stage 2: f = f_hi + f_lo and e, per lane.
    let mut fhs = [0.0f32; N];
    let mut fls = [0.0f32; N];
    let mut es = [0.0f32; N];
    for (((((&k, &r), &small), fh), fl), e) in ks
        .iter()
        .zip(&rs)
        .zip(&smalls)
        .zip(&mut fhs)
        .zip(&mut fls)
        .zip(&mut es)
    {
        let s = pow2i(k.max(-60));
        // 1 + r = u + err exactly (|1| >= |r|).
        let u = 1.0 + r;
        let lo = s * ((r - (u - 1.0)) + small);
        let su = s * u;
        // s·u - 1 = d + derr exactly (|1| >= s·u).
        let d = su - 1.0;
        let derr = su - (d + 1.0);
        let big = su > SQRT2_M1;
        // f = su + lo (e = 0) or (d + (derr + lo))/2 (e = 1), rounded to
        // f_hi with its error f_lo (fast two-sums: |lo| < 0.07·s is below
        // su, and below |d| when e = 1).
        let (a, b) = (sel(big, d, su), sel(big, derr + lo, lo));
        let f = a + b;
        let ferr = b - (f - a);
        let half = sel(big, 0.5, 1.0);
        *fh = half * f;
        *fl = half * ferr;
        *e = sel(big, 1.0, 0.0);
    }
    // Stage 3: L = e·ln2 + f - f²/2 + f³·R(f), then max(x, 0) + L.
    for (((((x, &fh), &fl), &e), &k), (&r, &small)) in v
        .iter_mut()
        .zip(&fhs)
        .zip(&fls)
        .zip(&es)
        .zip(&ks)
        .zip(rs.iter().zip(&smalls))
    {
        // |x| > 41.5 exactly when k <= -60 could hold (never for NaN).
        let far = x.abs() > 41.5;
        // ln(1 + f_hi + f_lo) = ln(1 + f_hi) + f_lo·(1 - f_hi) to 2^-47.
        let (hi, small_l) = log_pieces(e, fh, fl * (1.0 - fh));
        // Far lanes contribute nothing to x + L (E < 2^-60).
        let l_hi = sel(far, 0.0, hi);
        let l_lo = sel(far, 0.0, small_l);
        // x + L for x > 0: a fast two-sum of the larger and the smaller.
        let xp = sel(*x > 0.0, *x, 0.0);
        let (pa, pb) = (sel(xp > l_hi, xp, l_hi), sel(xp > l_hi, l_hi, xp));
        let t = pa + pb;
        let terr = pb - (t - pa);
        let sum = t + (terr + l_lo);
        let tiny = scale(1.0 + (r + small), k);
        // Far lanes: x itself (+inf too, where the two-sum gives NaN) or
        // E. NaN is not far, and `sum` carries it.
        *x = sel(far, sel(*x > 0.0, *x, tiny), sum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_constants() {
        // LN2_HI32 has at most 16 significant bits and the pair sums to ln 2.
        assert_eq!(LN2_HI32.to_bits() & 0xff, 0);
        let sum = f64::from(LN2_HI32) + f64::from(LN2_LO32);
        assert!((sum - std::f64::consts::LN_2).abs() < 1e-13);
    }

    #[test]
    fn exp_specials() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(exp(88.8), f32::INFINITY);
        assert_eq!(exp(f32::MAX), f32::INFINITY);
        assert!(exp(88.7).is_finite());
        // The subnormal range rounds once.
        for x in [-87.5f32, -95.0, -100.3, -103.0] {
            assert_eq!(exp(x), f64::from(x).exp() as f32, "exp({x})");
        }
        assert_eq!(exp(-104.0), 0.0);
        assert_eq!(exp(1e-30), 1.0);
    }

    /// Runs a group kernel on a few inputs.
    fn group(k: fn(&mut [f32; LANES32]), inputs: &[f32]) -> Vec<f32> {
        let mut v = [0.0f32; LANES32];
        v[..inputs.len()].copy_from_slice(inputs);
        k(&mut v);
        v[..inputs.len()].to_vec()
    }

    #[test]
    fn sigmoid_specials() {
        let inf = f32::INFINITY;
        let got = group(
            sigmoid_staged,
            &[0.0, -0.0, inf, -inf, f32::NAN, 20.0, -100.0, -120.0],
        );
        assert_eq!(&got[..4], &[0.5, 0.5, 1.0, 0.0]);
        assert!(got[4].is_nan());
        assert_eq!(got[5], 1.0);
        // The subnormal tail is e^x rounded once.
        assert_eq!(got[6], (-100f64).exp() as f32);
        assert_eq!(got[7], 0.0);
    }

    #[test]
    fn softplus_specials() {
        let inf = f32::INFINITY;
        let got = group(
            softplus_staged,
            &[0.0, -0.0, inf, -inf, f32::NAN, 50.0, -50.0, -120.0],
        );
        assert_eq!(
            &got[..4],
            &[std::f32::consts::LN_2, std::f32::consts::LN_2, inf, 0.0]
        );
        assert!(got[4].is_nan());
        assert_eq!(got[5], 50.0);
        assert_eq!(got[6], (-50f64).exp() as f32);
        assert_eq!(got[7], 0.0);
    }

    #[test]
    fn log_specials() {
        let inf = f32::INFINITY;
        let got = group(
            log_staged,
            &[
                0.0,
                -0.0,
                inf,
                -inf,
                f32::NAN,
                -1.0,
                1.0,
                f32::from_bits(1),
                f32::MAX,
            ],
        );
        assert_eq!(&got[..3], &[-inf, -inf, inf]);
        assert!(got[3].is_nan() && got[4].is_nan() && got[5].is_nan());
        assert_eq!(got[6].to_bits(), 0.0f32.to_bits());
        for (g, x) in got[7..].iter().zip([f32::from_bits(1), f32::MAX]) {
            let want = f64::from(x).ln() as f32;
            assert!(
                g.to_bits().abs_diff(want.to_bits()) <= 1,
                "ln({x:e}) = {g} vs {want}"
            );
        }
    }

    #[test]
    fn log2_and_log10_specials_and_exact_powers() {
        let inf = f32::INFINITY;
        for k in [log2_staged::<LANES32>, log10_staged::<LANES32>] {
            let got = group(k, &[0.0, -0.0, inf, -inf, f32::NAN, -1.0, 1.0]);
            assert_eq!(&got[..3], &[-inf, -inf, inf]);
            assert!(got[3].is_nan() && got[4].is_nan() && got[5].is_nan());
            assert_eq!(got[6].to_bits(), 0.0f32.to_bits());
        }
        // log2 of every power of two, subnormals included, is its exponent.
        for e in -149..=127 {
            let x = (2.0f64).powi(e) as f32;
            assert_eq!(group(log2_staged, &[x])[0], e as f32, "log2(2^{e})");
        }
        // log10 of the powers of ten that f32 holds exactly.
        for e in 0..=10 {
            let x = 10f32.powi(e);
            assert_eq!(group(log10_staged, &[x])[0], e as f32, "log10(1e{e})");
        }
        // The constants' splits.
        let sum = |hi: f32, lo: f32| f64::from(hi) + f64::from(lo);
        assert!((sum(LOG2E_HI32, LOG2E_LO32) - std::f64::consts::LOG2_E).abs() < 1e-15);
        assert!((sum(LOG10E_HI32, LOG10E_LO32) - std::f64::consts::LOG10_E).abs() < 1e-15);
        assert!((sum(LOG10_2_HI32, LOG10_2_LO32) - std::f64::consts::LOG10_2).abs() < 1e-13);
        assert_eq!(LOG10_2_HI32.to_bits() & 0xff, 0);
    }

    #[test]
    fn log1p_specials() {
        let inf = f32::INFINITY;
        let got = group(
            log1p_staged,
            &[0.0, -0.0, inf, -1.0, -2.0, f32::NAN, 1e-30, -inf],
        );
        assert_eq!(got[0].to_bits(), 0.0f32.to_bits());
        assert_eq!(got[1].to_bits(), (-0.0f32).to_bits());
        assert_eq!(&got[2..4], &[inf, -inf]);
        assert!(got[4].is_nan() && got[5].is_nan() && got[7].is_nan());
        assert_eq!(got[6], 1e-30);
    }

    #[test]
    fn tanh_specials() {
        let mut v = [0.0f32; LANES32];
        let inputs = [
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1e-30,
            -1e-40,
            9.2,
            -20.0,
            0.625,
        ];
        v[..inputs.len()].copy_from_slice(&inputs);
        tanh_staged(&mut v);
        assert_eq!(v[0].to_bits(), 0.0f32.to_bits());
        assert_eq!(v[1].to_bits(), (-0.0f32).to_bits());
        assert_eq!(v[2], 1.0);
        assert_eq!(v[3], -1.0);
        assert!(v[4].is_nan());
        assert_eq!(v[5], 1e-30);
        assert_eq!(v[6], -1e-40);
        assert_eq!(v[7], 1.0);
        assert_eq!(v[8], -1.0);
        // Faithful at the split: within one ULP (here one below the
        // correctly rounded value).
        let want = (0.625f64).tanh() as f32;
        assert!(
            v[9].to_bits().abs_diff(want.to_bits()) <= 1,
            "{} vs {want}",
            v[9]
        );
    }
}
