//! Numerically stable activation-style compositions: `sigmoid`,
//! `softplus`, `log1mexp`.
//!
//! - sigmoid(x) = 1/(1+e^-|x|) for x >= 0, e^-|x|/(1+e^-|x|) otherwise
//!   (never overflows; underflows gradually to 0 for x < -745).
//! - softplus(x) = max(x, 0) + log1p(e^-|x|) (x for large x, e^x for very
//!   negative x, no overflow).
//! - log1mexp(x) = log(1 - e^x) for x <= 0: log(-expm1(x)) for x > -ln2,
//!   log1p(-e^x) otherwise (Mächler 2012); NaN for x > 0, -inf at 0.
//!
//! Accuracy (measured against compositions of std functions, see
//! ACCURACY.md): <= 3 ULP in f64.

use super::common::sel;
use super::exp::{exp, expm1};
use super::log::{log1p, log_corr};

/// Logistic sigmoid.
#[inline(always)]
pub(crate) fn sigmoid(x: f64) -> f64 {
    let e = exp(-x.abs());
    let d = 1.0 + e;
    sel(x >= 0.0, 1.0 / d, e / d)
}

/// log(1 + e^x) without overflow.
#[inline(always)]
pub(crate) fn softplus(x: f64) -> f64 {
    sel(x > 0.0, x, 0.0) + log1p(exp(-x.abs()))
}

/// log(1 - e^x) for x <= 0.
#[inline(always)]
pub(crate) fn log1mexp(x: f64) -> f64 {
    let near = x > -std::f64::consts::LN_2;
    let a = -expm1(x);
    let v = -exp(x);
    let u = 1.0 + v;
    let c = v - (u - 1.0);
    let r = log_corr(sel(near, a, u), sel(near, 0.0, c));
    sel(x > 0.0, f64::NAN, r)
}
