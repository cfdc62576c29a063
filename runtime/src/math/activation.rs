//! Numerically stable activation-style compositions: `sigmoid`,
//! `softplus`, `log1mexp`, and the binary cross-entropy of a logit
//! (`sigmoid_binary_crossentropy`).
//!
//! - sigmoid(x) = 1/(1+e^-|x|) for x >= 0, e^-|x|/(1+e^-|x|) otherwise
//!   (never overflows; underflows gradually to 0 for x < -745).
//! - softplus(x) = max(x, 0) + log1p(e^-|x|) (x for large x, e^x for very
//!   negative x, no overflow).
//! - log1mexp(x) = log(1 - e^x) for x <= 0 (NaN for x > 0, -inf at 0):
//!   Mächler's (2012) two ranges, log(-expm1(x)) near 0 and log1p(-e^x)
//!   below, from one reduction e^x = 2^k·(1 + r + w): 1 - e^x is formed
//!   without cancellation as a double-double by the formula of k's range
//!   and goes through one logarithm (lanes with x <= -708, ±inf or NaN
//!   through [`LOG1MEXP_FIXUP`], Mächler's forms with the full-range
//!   kernels).
//!
//! sigmoid and softplus take e^-|x| from the fast kernel `exp_fast`
//! (valid for |x| < 708); their [`Fixup`]s recompute the other lanes
//! (|x| >= 708, ±inf, NaN) with the full-range `exp`, so subnormal results
//! and specials are those of the full-range kernel. sigmoid divides once
//! (numerator 1 or e^-|x| chosen first). Each is split into the exponent
//! ([`neg_abs`]) and a finishing step (`*_with`) shared by the fast and
//! full-range forms. softplus also takes the rounding error of e^-|x|
//! (`exp_fast_dd`) and adds its first-order effect on log1p; its log1p is
//! `log1p_unit`, which knows its argument e^-|x| lies in [0, 1] (within 0.9
//! ULP there, without the general kernel's special cases and without
//! forming 1 + e^-|x|: softplus on 1e7 f64 32.3 -> 26.9 ms on two AVX2
//! threads when it was first split off).
//!
//! Accuracy (measured against compositions of std functions, see
//! ACCURACY.md): <= 3 ULP in f64 (log1mexp 2; against 120-bit values,
//! 1.16 ULP at most on 180,000 points over its ranges).

use super::common::{fast_two_sum, pow2i, sel};
use super::dispatch::{apply_fixup, Fixup, LANES};
use super::exp::{exp, exp_fast, exp_fast_dd, exp_fast_reduced, expm1, EXP_FAST_LIMIT};
use super::log::{log1p_unit, log_corr};

/// The exponent -|x| whose exp [`sigmoid_with`] and [`softplus_with`]
/// take.
#[inline(always)]
pub(crate) fn neg_abs(x: f64) -> f64 {
    -x.abs()
}

/// sigmoid(x) from e^-|x| given by `exp_neg_abs`.
#[inline(always)]
pub(crate) fn sigmoid_with(x: f64, exp_neg_abs: f64) -> f64 {
    // One division: 1/d for x >= 0, e^-|x|/d otherwise.
    sel(x >= 0.0, 1.0, exp_neg_abs) / (1.0 + exp_neg_abs)
}

/// Logistic sigmoid for |x| < 708 (other lanes: [`SIGMOID_FIXUP`]) over a
/// group of lanes, in two stages: every e^-|x| first, then the divisions
/// (one loop spilled on AVX2: in-cache block 6.91 → 5.65 µs per 4096 f64,
/// AVX-512 unchanged, `cargo bench -p kiln-runtime --bench math`).
#[inline(always)]
pub(crate) fn sigmoid_staged(v: &mut [f64; LANES]) {
    let mut e = [0.0; LANES];
    for (x, e) in v.iter().zip(&mut e) {
        *e = exp_fast(neg_abs(*x));
    }
    for (x, e) in v.iter_mut().zip(&e) {
        *x = sigmoid_with(*x, *e);
    }
}

/// Logistic sigmoid over the whole domain (full-range exp).
fn sigmoid_full(x: f64) -> f64 {
    sigmoid_with(x, exp(neg_abs(x)))
}

/// Lanes outside the fast exp's range take [`sigmoid_full`].
pub(crate) const SIGMOID_FIXUP: Fixup = Fixup {
    limit: EXP_FAST_LIMIT,
    exact: sigmoid_full,
};

/// softplus(x) from e^-|x| = `e` + `e_lo` (`e_lo` the rounding error of
/// `e`, or 0): log1p(e + e_lo) = log1p(e) + e_lo/(1 + e) to first order,
/// 1/(1 + e) taken as 1 - e + e²/2 (within 7% on [0, 1]: the correction is
/// at most an ulp of e, so this costs < 0.07 ULP). Without the correction
/// the rounding of e alone, amplified where e and the result lie in
/// different binades, would cost up to 0.9 ULP.
#[inline(always)]
pub(crate) fn softplus_with(x: f64, e: f64, e_lo: f64) -> f64 {
    let inv = e.mul_add(e.mul_add(0.5, -1.0), 1.0);
    sel(x > 0.0, x, 0.0) + e_lo.mul_add(inv, log1p_unit(e))
}

/// log(1 + e^x) for |x| < 708 (other lanes: [`SOFTPLUS_FIXUP`]) over a
/// group, in two stages: all the exponentials first, then the logarithms.
/// One loop doing both spills on AVX2: 27.0 against 22.9 ms for 1e7
/// elements on two threads.
#[inline(always)]
pub(crate) fn softplus_staged(v: &mut [f64; LANES]) {
    let mut e = [0.0; LANES];
    let mut e_lo = [0.0; LANES];
    for ((x, e), e_lo) in v.iter().zip(&mut e).zip(&mut e_lo) {
        (*e, *e_lo) = exp_fast_dd(neg_abs(*x));
    }
    for ((x, e), e_lo) in v.iter_mut().zip(&e).zip(&e_lo) {
        *x = softplus_with(*x, *e, *e_lo);
    }
}

/// log(1 + e^x) over the whole domain without overflow.
fn softplus_full(x: f64) -> f64 {
    softplus_with(x, exp(neg_abs(x)), 0.0)
}

/// Lanes outside the fast exp's range take [`softplus_full`].
pub(crate) const SOFTPLUS_FIXUP: Fixup = Fixup {
    limit: EXP_FAST_LIMIT,
    exact: softplus_full,
};

/// Binary cross-entropy of a logit `z` against a target `t`,
/// t·softplus(-z) + (1 - t)·softplus(z) = -(t·log σ(z) + (1-t)·log(1-σ(z))),
/// as log1p(e^-|z|) + ((1 - t)·max(z, 0) + t·max(-z, 0)): one exp and one
/// log1p per element, and for t in [0, 1] a sum of non-negative terms (no
/// cancellation, where softplus(z) - t·z loses the small losses of
/// confident logits). No fixup is needed: subnormal
/// e^-|z| and ±inf are exact; 0·inf (t = 1 at z = +inf, t = 0 at z = -inf)
/// is NaN, as in the expression it replaces. e^-|z| is the fast exp's
/// inside its range and the full-range exp's outside it, as in
/// [`sigmoid_binary_crossentropy_staged`].
#[inline(always)]
pub(crate) fn sigmoid_binary_crossentropy(z: f64, t: f64) -> f64 {
    let inside = z.abs() < EXP_FAST_LIMIT;
    let e = sel(inside, exp_fast(neg_abs(z)), exp_neg_abs_full(z));
    xent_with(z, t, e)
}

/// The cross-entropy from e^-|z| given by `exp_neg_abs`.
#[inline(always)]
fn xent_with(z: f64, t: f64, exp_neg_abs: f64) -> f64 {
    let pos = sel(z > 0.0, z, 0.0);
    let neg = sel(z < 0.0, -z, 0.0);
    log1p_unit(exp_neg_abs) + ((1.0 - t) * pos + t * neg)
}

/// e^-|z| by the full-range exp.
fn exp_neg_abs_full(z: f64) -> f64 {
    exp(neg_abs(z))
}

/// Lanes of e^-|z| outside the fast exp's range take the full-range one.
const EXP_NEG_ABS_FIXUP: Fixup = Fixup {
    limit: EXP_FAST_LIMIT,
    exact: exp_neg_abs_full,
};

/// [`sigmoid_binary_crossentropy`] over a group (`z` replaced by the
/// result), in two stages like [`softplus_staged`]: every e^-|z| first, by
/// the fast exp with [`EXP_NEG_ABS_FIXUP`] for the lanes outside its range
/// (|z| >= 708, ±inf, NaN), then the logarithms and the rest (one loop
/// spills on AVX2). Bit-identical to the scalar kernel lane by lane.
#[inline(always)]
pub(crate) fn sigmoid_binary_crossentropy_staged(z: &mut [f64; LANES], t: &[f64; LANES]) {
    let mut e = [0.0; LANES];
    for (z, e) in z.iter().zip(&mut e) {
        *e = exp_fast(neg_abs(*z));
    }
    apply_fixup(z, &mut e, Some(EXP_NEG_ABS_FIXUP));
    for ((z, e), t) in z.iter_mut().zip(&e).zip(t) {
        *z = xent_with(*z, *t, *e);
    }
}

/// log(1 - e^x) for -708 < x <= 0 (other lanes: [`LOG1MEXP_FIXUP`]; NaN
/// for x > 0) from one reduction e^x = 2^k·(1 + r + w)
/// ([`exp_fast_reduced`]): 1 - e^x as a double-double (u, c) by the
/// formula of k's range, then one `log_corr(u, c)`:
/// - k = 0 (x > -ln2/2): u + c = -(r + w) exactly (fast two-sum; r = x);
/// - k = -1: (1 - r - w)/2, 1 - r split exactly, so neither case cancels
///   (Mächler's log(-expm1(x)) range, without a second exponential);
/// - k <= -2: 1 - e^x with e^x as hi + lo (1 + r split exactly, then the
///   rest; scaled by 2^k exactly), 1 - hi split exactly (Mächler's
///   log1p(-e^x) range).
#[inline(always)]
pub(crate) fn log1mexp(x: f64) -> f64 {
    let (k, r, w) = exp_fast_reduced(x);
    // k = 0: -(r + w).
    let (u0, c0) = fast_two_sum(-r, -w);
    // k = -1: (1 - r - w) / 2.
    let (s, e) = fast_two_sum(1.0, -r);
    let (u1, c1) = fast_two_sum(s, e - w);
    // k <= -2: 1 - 2^k·(1 + r + w).
    let (s1, e1) = fast_two_sum(1.0, r);
    let t = w + e1;
    let y = s1 + t;
    let scale = pow2i(k);
    let (hi, lo) = (y * scale, (t - (y - s1)) * scale);
    let (u2, e2) = fast_two_sum(1.0, -hi);
    let u = sel(k == 0, u0, sel(k == -1, 0.5 * u1, u2));
    let c = sel(k == 0, c0, sel(k == -1, 0.5 * c1, e2 - lo));
    sel(x > 0.0, f64::NAN, log_corr(u, c))
}

/// log(1 - e^x) on the whole line, by Mächler's two forms, each with its
/// full-range kernel: log(-expm1(x)) for x > -ln2, log1p(-e^x) otherwise;
/// -inf at 0, NaN for x > 0 and NaN ([`log1mexp`]'s fixup: x <= -708,
/// -inf, NaN).
fn log1mexp_full(x: f64) -> f64 {
    let near = x > -std::f64::consts::LN_2;
    let a = -expm1(x);
    let v = -exp(x);
    let u = 1.0 + v;
    let c = v - (u - 1.0);
    let r = log_corr(sel(near, a, u), sel(near, 0.0, c));
    sel(x > 0.0, f64::NAN, r)
}

/// Lanes outside [`log1mexp`]'s range (|x| >= 708, ±inf, NaN) take
/// [`log1mexp_full`].
pub(crate) const LOG1MEXP_FIXUP: Fixup = Fixup {
    limit: EXP_FAST_LIMIT,
    exact: log1mexp_full,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The distance in ULPs between two finite f64 of the same sign.
    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64).abs_diff(b.to_bits() as i64)
    }

    /// The one-reduction form agrees with Mächler's two full-range forms
    /// within 2 ULP (each is within about an ULP of the exact value) in
    /// every range of k, across the boundaries between them (-ln2/2,
    /// -ln2, -3·ln2/2) and down to the fixup's edge, and both give the
    /// specials' values.
    #[test]
    fn log1mexp_agrees_with_the_full_range_forms() {
        let ln2 = std::f64::consts::LN_2;
        let mut xs = vec![];
        for &(lo, hi) in &[
            (-1e-300, -1e-320),
            (-1e-8, -1e-300),
            (-0.3, -1e-8),
            (-0.5 * ln2 - 1e-3, -0.5 * ln2 + 1e-3),
            (-ln2 - 1e-3, -ln2 + 1e-3),
            (-1.5 * ln2 - 1e-3, -1.5 * ln2 + 1e-3),
            (-40.0, -1.0),
            (-707.999, -600.0),
        ] {
            for i in 0..=4000 {
                // Log-spaced over the tiny ranges, even elsewhere.
                let t = i as f64 / 4000.0;
                xs.push(if hi / lo > 1e3 || lo / hi > 1e3 {
                    -((-lo).ln() * (1.0 - t) + (-hi).ln() * t).exp()
                } else {
                    lo + (hi - lo) * t
                });
            }
        }
        for &x in &xs {
            let (a, b) = (log1mexp(x), log1mexp_full(x));
            assert!(ulps(a, b) <= 2, "log1mexp({x:e}) = {a:e}, full form {b:e}");
        }
        assert_eq!(log1mexp(0.0), f64::NEG_INFINITY);
        assert_eq!(log1mexp(-0.0), f64::NEG_INFINITY);
        assert!(log1mexp(1e-300).is_nan() && log1mexp(3.0).is_nan());
        for x in [-708.0, -745.0, -1e300, f64::NEG_INFINITY, f64::NAN, 800.0] {
            let b = log1mexp_full(x);
            assert!(
                LOG1MEXP_FIXUP.any_outside(&[x]) && (b.is_nan() || b == -b.abs()),
                "{x} is a fixup lane"
            );
        }
        assert_eq!(log1mexp_full(f64::NEG_INFINITY), 0.0);
    }
}
