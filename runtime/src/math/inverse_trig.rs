//! Inverse circular kernels `atan`, `asin`, `acos` and the two-argument
//! `atan2`.
//!
//! Method: atan reduces |x| to |u| <= tan(π/8) with three branch-free
//! cases (u = t, u = (t-1)/(t+1) + π/4, u = -1/t + π/2) and evaluates the
//! odd Taylor series to u^41 (truncation < 2e-17). asin(x) =
//! atan(x / sqrt((1-x)(1+x))) and acos(x) = 2·atan(sqrt((1-x)/(1+x))),
//! both formulations avoid cancellation near ±1. atan2(y, x) divides the
//! smaller of |x|, |y| by the larger once, as (n - d)/(n + d) when the
//! quotient exceeds tan(π/8) (so the series argument is the same as
//! atan's), and adds the quadrant's multiple of π/4 in two parts;
//! `(±0, ±0)` and `(±inf, ±inf)` take the quotients 0 and 1, so every
//! special case is IEEE's.
//!
//! Accuracy (measured, see ACCURACY.md): <= 3 ULP in f64 (atan <= 2).

use super::common::{copysign, horner, sel};

const PIO2_HI: f64 = std::f64::consts::FRAC_PI_2;
const PIO2_LO: f64 = 6.123_233_995_736_766e-17;
const PIO4_HI: f64 = std::f64::consts::FRAC_PI_4;
const PIO4_LO: f64 = 3.061_616_997_868_383e-17;
const TAN_PI_8: f64 = 0.414_213_562_373_095_03;
const TAN_3PI_8: f64 = 2.414_213_562_373_095;
const THREE_PIO4_HI: f64 = 2.356_194_490_192_345;
const THREE_PIO4_LO: f64 = 9.184_850_993_605_148e-17;
const PI_HI: f64 = std::f64::consts::PI;
const PI_LO: f64 = 1.224_646_799_147_353_2e-16;

/// (-1)^n/(2n+1) for n = 1..=20: atan(u) = u + u·z·A(z), z = u².
const ATAN_C: [f64; 20] = [
    -1.0 / 3.0,
    1.0 / 5.0,
    -1.0 / 7.0,
    1.0 / 9.0,
    -1.0 / 11.0,
    1.0 / 13.0,
    -1.0 / 15.0,
    1.0 / 17.0,
    -1.0 / 19.0,
    1.0 / 21.0,
    -1.0 / 23.0,
    1.0 / 25.0,
    -1.0 / 27.0,
    1.0 / 29.0,
    -1.0 / 31.0,
    1.0 / 33.0,
    -1.0 / 35.0,
    1.0 / 37.0,
    -1.0 / 39.0,
    1.0 / 41.0,
];

/// atan(t) for t >= 0 (or NaN).
#[inline(always)]
fn atan_pos(t: f64) -> f64 {
    let mid = t > TAN_PI_8;
    let far = t > TAN_3PI_8;
    let u = sel(far, -1.0 / t, sel(mid, (t - 1.0) / (t + 1.0), t));
    let b_hi = sel(far, PIO2_HI, sel(mid, PIO4_HI, 0.0));
    let b_lo = sel(far, PIO2_LO, sel(mid, PIO4_LO, 0.0));
    let z = u * u;
    let p = u + u * z * horner(z, &ATAN_C);
    b_hi + (p + b_lo)
}

/// arctan x.
#[inline(always)]
pub(crate) fn atan(x: f64) -> f64 {
    copysign(atan_pos(x.abs()), x)
}

/// arcsin x (NaN outside [-1, 1]).
#[inline(always)]
pub(crate) fn asin(x: f64) -> f64 {
    let a = x.abs();
    let u = a / ((1.0 - a) * (1.0 + a)).sqrt();
    copysign(atan_pos(u), x)
}

/// arccos x (NaN outside [-1, 1]).
#[inline(always)]
pub(crate) fn acos(x: f64) -> f64 {
    2.0 * atan_pos(((1.0 - x) / (1.0 + x)).sqrt())
}

/// atan2(y, x): the angle of the point (x, y), in [-π, π].
#[inline(always)]
pub(crate) fn atan2(y: f64, x: f64) -> f64 {
    let (ay, ax) = (y.abs(), x.abs());
    // The angle from the nearer axis: atan(n / d) with n <= d.
    let steep = ay > ax;
    let n = sel(steep, ax, ay);
    let d = sel(steep, ay, ax);
    let both_inf = n == f64::INFINITY && d == f64::INFINITY;
    let mid = n > TAN_PI_8 * d || both_inf;
    let un = sel(mid, n - d, n);
    let ud = sel(mid, n + d, d);
    // 0/0 (both zero) is the quotient 0; inf/inf the quotient 1 (u = 0
    // with the π/4 of `mid`).
    let u = sel((un == 0.0 && ud == 0.0) || both_inf, 0.0, un / ud);
    let z = u * u;
    let p = u + u * z * horner(z, &ATAN_C);
    // angle = b + s·p: b from the octant (0, π/4, π/2, 3π/4 or π, each as
    // a head and a tail), s = ±1. Right half-plane: atan(n/d) = (0 or π/4)
    // + p, or π/2 minus that when steep; the left half-plane mirrors it
    // (π - angle).
    let left = x.is_sign_negative();
    let octant = |c: [f64; 5]| {
        let right = sel(mid, c[1], sel(steep, c[2], c[0]));
        let mirrored = sel(mid, c[3], sel(steep, c[2], c[4]));
        sel(left, mirrored, right)
    };
    let b_hi = octant([0.0, PIO4_HI, PIO2_HI, THREE_PIO4_HI, PI_HI]);
    let b_lo = octant([0.0, PIO4_LO, PIO2_LO, THREE_PIO4_LO, PI_LO]);
    let s = sel(steep != left, -p, p);
    copysign(b_hi + (s + b_lo), y)
}
