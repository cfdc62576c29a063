//! Hyperbolic kernels `tanh`, `sinh`, `cosh` and their inverses `atanh`,
//! `asinh`, `acosh`.
//!
//! Method: tanh by its Taylor series to x^39 for |x| < 0.55, else
//! 1 - 2/(E+1) with E = e^(2|x|) from the table kernel `exp_table` (|x|
//! clamped to 40 first, so 2|x| stays in its range); sinh for
//! |x| < 1 by its Taylor series to x^19, otherwise E - 1/(4E) with
//! E = e^|x|/2 scaled without intermediate overflow; cosh = E + 1/(4E).
//! atanh(t) = log1p(2t/(1-t))/2; asinh(t) = log1p(t + t²/(1+sqrt(1+t²)));
//! acosh(t) = log1p((t-1) + sqrt((t-1)(t+1))); for t > 2^28 both use
//! log(t) + ln2.
//!
//! Accuracy (measured, see ACCURACY.md): <= 3 ULP in f64.

use super::common::{clamp_keep_nan, copysign, horner, scale, sel};
use super::exp::{exp_reduce, exp_table};
use super::log::{log1p, log_corr};

/// 1/(2n+1)! for n = 1..=9: sinh(x) = x + x³·S(x²).
const SINH_C: [f64; 9] = [
    1.0 / 6.0,
    1.0 / 120.0,
    1.0 / 5040.0,
    1.0 / 362_880.0,
    1.0 / 39_916_800.0,
    1.0 / 6_227_020_800.0,
    1.0 / 1_307_674_368_000.0,
    1.0 / 355_687_428_096_000.0,
    1.0 / 121_645_100_408_832_000.0,
];

/// Taylor coefficients of tanh(x) = x + x³·T(x²) (x^3 .. x^39).
const TANH_C: [f64; 19] = [
    -0.333_333_333_333_333_3,
    0.133_333_333_333_333_33,
    -0.053_968_253_968_253_97,
    0.021_869_488_536_155_203,
    -0.008_863_235_529_902_197,
    0.003_592_128_036_572_481,
    -0.001_455_834_387_051_318_3,
    0.000_590_027_440_945_586,
    -0.000_239_129_114_243_552_48,
    9.691_537_956_929_451e-5,
    -3.927_832_388_331_683e-5,
    1.591_890_506_932_896_4e-5,
    -6.451_689_215_655_431e-6,
    2.614_771_151_290_754_6e-6,
    -1.059_726_832_010_465_4e-6,
    4.294_911_078_273_806e-7,
    -1.740_661_896_357_164_8e-7,
    7.054_636_946_400_968e-8,
    -2.859_136_662_305_254e-8,
];

/// tanh x.
#[inline(always)]
pub(crate) fn tanh(x: f64) -> f64 {
    let t = clamp_keep_nan(x.abs(), 0.0, 40.0);
    let z = t * t;
    let small = t + t * z * horner(z, &TANH_C);
    let e = exp_table(2.0 * t);
    let big = 1.0 - 2.0 / (e + 1.0);
    copysign(sel(t < 0.55, small, big), x)
}

/// E = e^t / 2 for t >= 0 without intermediate overflow.
#[inline(always)]
fn half_exp(t: f64) -> f64 {
    let (q, k) = exp_reduce(t, 0.0);
    scale(1.0 + q, k - 1)
}

/// sinh x.
#[inline(always)]
pub(crate) fn sinh(x: f64) -> f64 {
    let t = x.abs();
    let z = t * t;
    let small = t + t * z * horner(z, &SINH_C);
    let e = half_exp(t);
    let big = e - 0.25 / e;
    copysign(sel(t < 1.0, small, big), x)
}

/// cosh x.
#[inline(always)]
pub(crate) fn cosh(x: f64) -> f64 {
    let e = half_exp(x.abs());
    e + 0.25 / e
}

/// atanh x (NaN outside [-1, 1], ±inf at ±1).
#[inline(always)]
pub(crate) fn atanh(x: f64) -> f64 {
    let t = x.abs();
    copysign(0.5 * log1p((2.0 * t) / (1.0 - t)), x)
}

const TWO_POW_28: f64 = 268_435_456.0;

/// asinh x.
#[inline(always)]
pub(crate) fn asinh(x: f64) -> f64 {
    let t = x.abs();
    let big = t > TWO_POW_28;
    let y = t + t * t / (1.0 + (1.0 + t * t).sqrt());
    let u = 1.0 + y;
    let c = y - (u - 1.0);
    let v = log_corr(sel(big, t, u), sel(big, 0.0, c));
    let v = sel(big, v + std::f64::consts::LN_2, v);
    copysign(sel(t == 0.0, 0.0, v), x)
}

/// acosh x (NaN below 1).
#[inline(always)]
pub(crate) fn acosh(x: f64) -> f64 {
    let big = x > TWO_POW_28;
    let a = x - 1.0;
    let y = a + (a * (x + 1.0)).sqrt();
    let u = 1.0 + y;
    let c = y - (u - 1.0);
    let v = log_corr(sel(big, x, u), sel(big, 0.0, c));
    let v = sel(big, v + std::f64::consts::LN_2, v);
    sel(x >= 1.0, v, f64::NAN)
}
