//! Shared accuracy-measurement code for `tests/accuracy.rs` and
//! `examples/accuracy.rs`: input generators, references and ULP metrics.
#![allow(dead_code)]

use kiln_runtime::math as m;

/// Deterministic 64-bit LCG.
pub struct Rng(pub u64);

impl Rng {
    /// Uniform in [0, 1).
    pub fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// How to sample one segment of a domain.
#[derive(Clone, Copy)]
pub enum Seg {
    /// Uniform in [lo, hi].
    Uni(f64, f64),
    /// Log-uniform magnitude in [lo, hi] (0 < lo), random sign if the flag.
    Log(f64, f64, bool),
    /// Log-uniform negative values in [-hi, -lo].
    NegLog(f64, f64),
}

/// Number of sample points per function.
pub fn points() -> usize {
    if cfg!(debug_assertions) {
        20_000
    } else {
        1_000_000
    }
}

/// Samples `n` points over the segments (equal share each).
pub fn sample(segs: &[Seg], n: usize, seed: u64) -> Vec<f64> {
    let mut r = Rng(seed);
    (0..n)
        .map(|i| match segs[i % segs.len()] {
            Seg::Uni(lo, hi) => lo + (hi - lo) * r.next(),
            Seg::Log(lo, hi, signed) => {
                let v = (lo.ln() + (hi.ln() - lo.ln()) * r.next()).exp();
                if signed && r.next() < 0.5 {
                    -v
                } else {
                    v
                }
            }
            Seg::NegLog(lo, hi) => -(lo.ln() + (hi.ln() - lo.ln()) * r.next()).exp(),
        })
        .collect()
}

/// Error of `got` in ULPs of `want` (f64). Mismatched NaN / inf / zero
/// sign counts as infinite.
pub fn ulp64(got: f64, want: f64) -> f64 {
    if want.is_nan() || got.is_nan() {
        return if want.is_nan() && got.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if want.is_infinite() || got.is_infinite() {
        return if got == want { 0.0 } else { f64::INFINITY };
    }
    if want == 0.0 && got == 0.0 {
        return if want.is_sign_negative() == got.is_sign_negative() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let e = ((want.to_bits() >> 52) & 0x7ff) as i64;
    let ulp = if e <= 1 {
        f64::from_bits(1)
    } else if e - 52 >= 1 {
        f64::from_bits(((e - 52) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (e - 1))
    };
    (got - want).abs() / ulp
}

/// acosh from the libm crate, NaN below 1 (its own formula returns -inf
/// or finite values for some x <= -1, where acosh is undefined: numpy and
/// the kernels give NaN there; the f32 sweeps cover every bit pattern).
pub fn acosh_ref(x: f64) -> f64 {
    if x >= 1.0 {
        libm::acosh(x)
    } else {
        f64::NAN
    }
}

/// Error of `got` in ULPs of `want` (f32).
pub fn ulp32(got: f32, want: f32) -> f64 {
    if want.is_nan() || got.is_nan() {
        return if want.is_nan() && got.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if want.is_infinite() || got.is_infinite() {
        return if got == want { 0.0 } else { f64::INFINITY };
    }
    if want == 0.0 && got == 0.0 {
        return if want.is_sign_negative() == got.is_sign_negative() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let e = ((want.to_bits() >> 23) & 0xff) as i32;
    let ulp = if e <= 1 {
        f64::from(f32::from_bits(1))
    } else {
        2f64.powi(e - 127 - 23)
    };
    (f64::from(got) - f64::from(want)).abs() / ulp
}

/// One unary function under test.
pub struct Unary {
    /// Name.
    pub name: &'static str,
    /// Our f64 slice function.
    pub f64: fn(&[f64], &mut [f64]),
    /// Our f32 slice function.
    pub f32: fn(&[f32], &mut [f32]),
    /// f64 reference.
    pub reference: fn(f64) -> f64,
    /// Domain sampled.
    pub domain: &'static [Seg],
    /// Asserted bounds (f64, f32) in ULP.
    pub bound: (f64, f64),
    /// Reference used (for the table).
    pub ref_name: &'static str,
}

fn sigmoid_ref(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}
fn softplus_ref(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}
fn log1mexp_ref(x: f64) -> f64 {
    if x > 0.0 {
        f64::NAN
    } else if x > -std::f64::consts::LN_2 {
        (-x.exp_m1()).ln()
    } else {
        (-x.exp()).ln_1p() + 0.0
    }
}

const BIG: f64 = 1e300;
const TINY: f64 = 1e-300;

/// Every unary function with its reference and domain.
pub fn unary_table() -> Vec<Unary> {
    use Seg::*;
    macro_rules! u {
        ($n:literal, $a:path, $b:path, $r:expr, $rn:literal, $d:expr, $b64:expr) => {
            Unary {
                name: $n,
                f64: $a,
                f32: $b,
                reference: $r,
                domain: $d,
                bound: ($b64, 1.0),
                ref_name: $rn,
            }
        };
    }
    vec![
        u!(
            "exp",
            m::exp_f64,
            m::exp_f32,
            f64::exp,
            "std",
            &[Uni(-745.2, 709.8), Uni(-1.0, 1.0), Log(TINY, 1.0, true)],
            1.0
        ),
        u!(
            "exp2",
            m::exp2_f64,
            m::exp2_f32,
            f64::exp2,
            "std",
            &[Uni(-1075.0, 1024.0), Uni(-1.0, 1.0), Log(TINY, 1.0, true)],
            2.0
        ),
        u!(
            "expm1",
            m::expm1_f64,
            m::expm1_f32,
            f64::exp_m1,
            "std",
            &[Uni(-40.0, 709.8), Uni(-1.0, 1.0), Log(TINY, 1.0, true)],
            2.0
        ),
        u!(
            "log",
            m::log_f64,
            m::log_f32,
            f64::ln,
            "std",
            &[Log(5e-324, 1.7e308, false), Uni(0.5, 2.0)],
            2.0
        ),
        u!(
            "log2",
            m::log2_f64,
            m::log2_f32,
            f64::log2,
            "std",
            &[Log(5e-324, 1.7e308, false), Uni(0.5, 2.0)],
            2.0
        ),
        u!(
            "log10",
            m::log10_f64,
            m::log10_f32,
            f64::log10,
            "std",
            &[Log(5e-324, 1.7e308, false), Uni(0.5, 2.0)],
            2.0
        ),
        u!(
            "log1p",
            m::log1p_f64,
            m::log1p_f32,
            f64::ln_1p,
            "std",
            &[
                Uni(-1.0, 1.0),
                Log(TINY, 1.0, true),
                Log(1.0, 1.7e308, false)
            ],
            2.0
        ),
        u!(
            "tanh",
            m::tanh_f64,
            m::tanh_f32,
            f64::tanh,
            "std",
            &[Uni(-20.0, 20.0), Uni(-1.0, 1.0), Log(TINY, 1.0, true)],
            3.0
        ),
        u!(
            "sigmoid",
            m::sigmoid_f64,
            m::sigmoid_f32,
            sigmoid_ref,
            "1/(1+exp(-x)) from std exp",
            &[Uni(-745.0, 40.0), Uni(-10.0, 10.0)],
            4.0
        ),
        u!(
            "softplus",
            m::softplus_f64,
            m::softplus_f32,
            softplus_ref,
            "max(x,0)+ln_1p(exp(-|x|)) from std",
            &[Uni(-745.0, 800.0), Uni(-20.0, 20.0)],
            4.0
        ),
        u!(
            "log1mexp",
            m::log1mexp_f64,
            m::log1mexp_f32,
            log1mexp_ref,
            "Maechler formula from std",
            &[Uni(-50.0, 0.0), NegLog(TINY, 700.0)],
            4.0
        ),
        u!(
            "sin",
            m::sin_f64,
            m::sin_f32,
            f64::sin,
            "std",
            &[Uni(-10.0, 10.0), Uni(-1e5, 1e5), Log(TINY, 1e5, true)],
            2.0
        ),
        u!(
            "cos",
            m::cos_f64,
            m::cos_f32,
            f64::cos,
            "std",
            &[Uni(-10.0, 10.0), Uni(-1e5, 1e5), Log(TINY, 1e5, true)],
            2.0
        ),
        u!(
            "tan",
            m::tan_f64,
            m::tan_f32,
            f64::tan,
            "std",
            &[Uni(-10.0, 10.0), Uni(-1e5, 1e5), Log(TINY, 1e5, true)],
            4.0
        ),
        u!(
            "arcsin",
            m::arcsin_f64,
            m::arcsin_f32,
            f64::asin,
            "std",
            &[Uni(-1.0, 1.0), Log(TINY, 1.0, true)],
            3.0
        ),
        u!(
            "arccos",
            m::arccos_f64,
            m::arccos_f32,
            f64::acos,
            "std",
            &[Uni(-1.0, 1.0), Log(TINY, 1.0, true)],
            3.0
        ),
        u!(
            "arctan",
            m::arctan_f64,
            m::arctan_f32,
            f64::atan,
            "std",
            &[Uni(-10.0, 10.0), Log(TINY, BIG, true)],
            3.0
        ),
        u!(
            "sinh",
            m::sinh_f64,
            m::sinh_f32,
            f64::sinh,
            "std",
            &[Uni(-710.0, 710.0), Uni(-2.0, 2.0), Log(TINY, 1.0, true)],
            3.0
        ),
        u!(
            "cosh",
            m::cosh_f64,
            m::cosh_f32,
            f64::cosh,
            "std",
            &[Uni(-710.0, 710.0), Uni(-2.0, 2.0), Log(TINY, 1.0, true)],
            3.0
        ),
        u!(
            "arctanh",
            m::arctanh_f64,
            m::arctanh_f32,
            libm::atanh,
            "libm crate",
            &[Uni(-1.0, 1.0), Log(TINY, 1.0, true)],
            4.0
        ),
        u!(
            "arcsinh",
            m::arcsinh_f64,
            m::arcsinh_f32,
            libm::asinh,
            "libm crate",
            &[Uni(-10.0, 10.0), Log(TINY, BIG, true)],
            4.0
        ),
        u!(
            "arccosh",
            m::arccosh_f64,
            m::arccosh_f32,
            acosh_ref,
            "libm crate (NaN below 1)",
            &[Uni(1.0, 3.0), Log(1.0, BIG, false)],
            4.0
        ),
        u!(
            "erf",
            m::erf_f64,
            m::erf_f32,
            libm::erf,
            "libm crate",
            &[Uni(-6.0, 6.0), Uni(-1.0, 1.0), Log(TINY, 1.0, true)],
            2.0
        ),
        u!(
            "erfc",
            m::erfc_f64,
            m::erfc_f32,
            libm::erfc,
            "libm crate",
            &[Uni(-6.0, 27.3), Uni(0.0, 1.0), Uni(-1.0, 0.0)],
            8.0
        ),
    ]
}

/// Special inputs every function is checked on.
pub const SPECIALS: [f64; 22] = [
    0.0,
    -0.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    -2.2250738585072014e-308,
    1e-310,
    1.0,
    -1.0,
    0.5,
    -0.5,
    2.0,
    709.78,
    710.0,
    -745.2,
    -746.0,
    1e300,
    -1e300,
    f64::MAX,
];

/// Result of measuring one function.
pub struct Measured {
    /// Max f64 error in ULP and where.
    pub max64: (f64, f64),
    /// Max f32 error in ULP and where.
    pub max32: (f64, f32),
}

/// Measures f64 and f32 max ULP error over the domain (`seed` varies the
/// sample).
pub fn measure(u: &Unary, seed: u64) -> Measured {
    let xs = sample(u.domain, points(), seed);
    let mut out = vec![0.0; xs.len()];
    (u.f64)(&xs, &mut out);
    let mut max64 = (0.0, 0.0);
    for (&x, &y) in xs.iter().zip(&out) {
        let e = ulp64(y, (u.reference)(x));
        if e > max64.0 || e.is_nan() {
            max64 = (e, x);
        }
    }
    let xs32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
    let mut out32 = vec![0.0f32; xs.len()];
    (u.f32)(&xs32, &mut out32);
    let mut max32 = (0.0, 0.0);
    for (&x, &y) in xs32.iter().zip(&out32) {
        let e = ulp32(y, (u.reference)(f64::from(x)) as f32);
        if e > max32.0 || e.is_nan() {
            max32 = (e, x);
        }
    }
    Measured { max64, max32 }
}

/// Max f64 error on the special inputs.
pub fn measure_specials(u: &Unary) -> (f64, f64) {
    let xs: Vec<f64> = SPECIALS.to_vec();
    let mut out = vec![0.0; xs.len()];
    (u.f64)(&xs, &mut out);
    let mut worst = (0.0, 0.0);
    for (&x, &y) in xs.iter().zip(&out) {
        let e = ulp64(y, (u.reference)(x));
        if e > worst.0 {
            worst = (e, x);
        }
    }
    worst
}

fn pow_inputs(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut r = Rng(seed);
    let mut xs = Vec::with_capacity(n);
    let mut ys = Vec::with_capacity(n);
    for i in 0..n {
        let (x, y) = match i % 4 {
            0 => ((-23.0 + 46.0 * r.next()).exp(), -30.0 + 60.0 * r.next()),
            1 => (0.5 + 1.5 * r.next(), -1000.0 + 2000.0 * r.next()),
            2 => (-(0.1 + 10.0 * r.next()), (-40.0 + 80.0 * r.next()).round()),
            _ => ((-700.0 + 1400.0 * r.next()).exp(), -2.0 + 4.0 * r.next()),
        };
        xs.push(x);
        ys.push(y);
    }
    (xs, ys)
}

/// Worst f64 error of the slice form `f` of a binary function against
/// `reference` over the pairs (a[i], b[i]): (ULP, a, b).
fn worst_binary_f64(
    a: &[f64],
    b: &[f64],
    f: fn(&[f64], &[f64], &mut [f64]),
    reference: fn(f64, f64) -> f64,
) -> (f64, f64, f64) {
    let mut out = vec![0.0; a.len()];
    f(a, b, &mut out);
    let mut w = (0.0, 0.0, 0.0);
    for i in 0..a.len() {
        let e = ulp64(out[i], reference(a[i], b[i]));
        if e > w.0 {
            w = (e, a[i], b[i]);
        }
    }
    w
}

/// [`worst_binary_f64`] for the f32 form, against the f64 reference
/// rounded to f32.
fn worst_binary_f32(
    a: &[f32],
    b: &[f32],
    f: fn(&[f32], &[f32], &mut [f32]),
    reference: fn(f64, f64) -> f64,
) -> (f64, f32, f32) {
    let mut out = vec![0.0f32; a.len()];
    f(a, b, &mut out);
    let mut w = (0.0, 0.0, 0.0);
    for i in 0..a.len() {
        let e = ulp32(out[i], reference(f64::from(a[i]), f64::from(b[i])) as f32);
        if e > w.0 {
            w = (e, a[i], b[i]);
        }
    }
    w
}

/// Every ordered pair of `values`, as two parallel lists.
fn all_pairs(values: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let a = values
        .iter()
        .flat_map(|&v| values.iter().map(move |_| v))
        .collect();
    let b = values.iter().flat_map(|_| values.iter().copied()).collect();
    (a, b)
}

/// Measures pow: (f64 max ULP, at (x, y)), (f32 max ULP, at (x, y)).
pub fn measure_pow(seed: u64) -> ((f64, f64, f64), (f64, f32, f32)) {
    let (xs, ys) = pow_inputs(points(), seed);
    let x32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
    let y32: Vec<f32> = ys.iter().map(|&y| (y as f32) * 0.1).collect();
    (
        worst_binary_f64(&xs, &ys, m::pow_f64, f64::powf),
        worst_binary_f32(&x32, &y32, m::pow_f32, f64::powf),
    )
}

/// Worst pow error over all pairs of special values (against std powf).
pub fn measure_pow_specials() -> (f64, f64, f64) {
    let mut sp: Vec<f64> = SPECIALS.to_vec();
    sp.extend([
        3.0,
        -3.0,
        0.25,
        -2.0,
        1e-5,
        4503599627370497.0,
        9007199254740994.0,
        -1.5,
    ]);
    let (xs, ys) = all_pairs(&sp);
    worst_binary_f64(&xs, &ys, m::pow_f64, f64::powf)
}

/// atan2 inputs: pairs with both coordinates uniform in [-1, 1], pairs of
/// magnitudes spread log-uniformly over [1e-300, 1e300] with random signs
/// (quotients from tiny to huge), and pairs whose quotient lies near
/// tan(π/8), 1 and tan(3π/8) (the reduction's boundaries).
fn atan2_inputs(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut r = Rng(seed);
    let mut ys = Vec::with_capacity(n);
    let mut xs = Vec::with_capacity(n);
    let sign = |r: &mut Rng| if r.next() < 0.5 { -1.0 } else { 1.0 };
    for i in 0..n {
        let (y, x) = match i % 3 {
            0 => (-1.0 + 2.0 * r.next(), -1.0 + 2.0 * r.next()),
            1 => {
                let a = (-690.0 + 1380.0 * r.next()).exp();
                let b = (-690.0 + 1380.0 * r.next()).exp();
                (sign(&mut r) * a, sign(&mut r) * b)
            }
            _ => {
                let q = [0.414_213_562_373_095, 1.0, 2.414_213_562_373_095][i % 9 / 3];
                let x = sign(&mut r) * (0.5 + r.next());
                (
                    sign(&mut r) * x.abs() * q * (1.0 + 1e-6 * (r.next() - 0.5)),
                    x,
                )
            }
        };
        ys.push(y);
        xs.push(x);
    }
    (ys, xs)
}

/// Measures atan2 against std's: (f64 max ULP, at (y, x)), (f32 max ULP,
/// at (y, x)).
pub fn measure_atan2(seed: u64) -> ((f64, f64, f64), (f64, f32, f32)) {
    let (ys, xs) = atan2_inputs(points(), seed);
    let y32: Vec<f32> = ys.iter().map(|&v| v as f32).collect();
    let x32: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
    (
        worst_binary_f64(&ys, &xs, m::arctan2_f64, f64::atan2),
        worst_binary_f32(&y32, &x32, m::arctan2_f32, f64::atan2),
    )
}

/// Worst atan2 error over all pairs of special values (±0, ±inf, NaN,
/// subnormals, ...), against std's atan2.
pub fn measure_atan2_specials() -> (f64, f64, f64) {
    let mut sp: Vec<f64> = SPECIALS.to_vec();
    sp.extend([1.0, -1.0, 3.0, -0.25]);
    let (ys, xs) = all_pairs(&sp);
    worst_binary_f64(&ys, &xs, m::arctan2_f64, f64::atan2)
}

/// hypot's sample: a third (x, y) in [-1, 1]², a third with magnitudes
/// log-uniform over [e^-745, e^709] each (both scalings, operands of very
/// different sizes, subnormals), a third with |y| within a factor of 2 of
/// |x| at magnitudes log-uniform over the same range; random signs.
fn hypot_inputs(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut r = Rng(seed);
    let mut xs = Vec::with_capacity(n);
    let mut ys = Vec::with_capacity(n);
    let sign = |r: &mut Rng| if r.next() < 0.5 { -1.0 } else { 1.0 };
    for i in 0..n {
        let (x, y) = match i % 3 {
            0 => (-1.0 + 2.0 * r.next(), -1.0 + 2.0 * r.next()),
            1 => (
                sign(&mut r) * (-745.0 + 1454.0 * r.next()).exp(),
                sign(&mut r) * (-745.0 + 1454.0 * r.next()).exp(),
            ),
            _ => {
                let x = sign(&mut r) * (-745.0 + 1454.0 * r.next()).exp();
                (x, sign(&mut r) * x.abs() * (0.5 + 1.5 * r.next()))
            }
        };
        xs.push(x);
        ys.push(y);
    }
    (xs, ys)
}

/// Measures hypot against std's: (f64 max ULP, at (x, y)), (f32 max ULP,
/// at (x, y)).
pub fn measure_hypot(seed: u64) -> ((f64, f64, f64), (f64, f32, f32)) {
    let (xs, ys) = hypot_inputs(points(), seed);
    let x32: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
    let y32: Vec<f32> = ys.iter().map(|&v| v as f32).collect();
    (
        worst_binary_f64(&xs, &ys, m::hypot_f64, f64::hypot),
        worst_binary_f32(&x32, &y32, m::hypot_f32, f64::hypot),
    )
}

/// Worst hypot error over all pairs of special values, against std's.
pub fn measure_hypot_specials() -> (f64, f64, f64) {
    let mut sp: Vec<f64> = SPECIALS.to_vec();
    sp.extend([1.0, -1.0, 3.0, -4.0]);
    let (xs, ys) = all_pairs(&sp);
    worst_binary_f64(&xs, &ys, m::hypot_f64, f64::hypot)
}

/// `y·softplus(-x) + (1-y)·softplus(x)` from std functions, in the
/// kernel's non-cancelling form (non-negative terms for y in [0, 1]).
fn xent_ref(z: f64, t: f64) -> f64 {
    let l = (-z.abs()).exp().ln_1p();
    let pos = if z > 0.0 { z } else { 0.0 };
    let neg = if z < 0.0 { -z } else { 0.0 };
    l + ((1.0 - t) * pos + t * neg)
}

/// Measures `sigmoid_binary_crossentropy` against [`xent_ref`]: logits
/// over [-50, 50] and, one in ten, [-750, 750] (past the fast exp's range,
/// subnormal e^-|z|); targets in [0, 1], a third of them exactly 0 or 1.
/// Returns (f64 max ULP, at (z, t)), (f32 max ULP, at (z, t)).
pub fn measure_sigmoid_xent(seed: u64) -> ((f64, f64, f64), (f64, f32, f32)) {
    let n = points();
    let mut rng = Rng(seed);
    let zs: Vec<f64> = (0..n)
        .map(|i| {
            let u = rng.next();
            if i % 10 == 0 {
                (u - 0.5) * 1500.0
            } else {
                (u - 0.5) * 100.0
            }
        })
        .collect();
    let ts: Vec<f64> = (0..n)
        .map(|i| match i % 3 {
            0 => (i % 2) as f64,
            _ => rng.next(),
        })
        .collect();
    let z32: Vec<f32> = zs.iter().map(|&v| v as f32).collect();
    let t32: Vec<f32> = ts.iter().map(|&v| v as f32).collect();
    (
        worst_binary_f64(&zs, &ts, m::sigmoid_binary_crossentropy_f64, xent_ref),
        worst_binary_f32(&z32, &t32, m::sigmoid_binary_crossentropy_f32, xent_ref),
    )
}

/// Worst `sigmoid_binary_crossentropy` error over all pairs of special
/// values and a few targets in [0, 1], against [`xent_ref`].
pub fn measure_sigmoid_xent_specials() -> (f64, f64, f64) {
    let mut sp: Vec<f64> = SPECIALS.to_vec();
    sp.extend([1.0, 0.5, 0.25]);
    let (zs, ts) = all_pairs(&sp);
    worst_binary_f64(&zs, &ts, m::sigmoid_binary_crossentropy_f64, xent_ref)
}

/// Result of [`sweep_f32`]: the worst error and its input, and how many
/// results were not the correctly rounded reference.
pub struct Sweep {
    /// Max ULP error against the f64 reference rounded to f32.
    pub max: f64,
    /// An input with that error.
    pub worst: f32,
    /// Results that differ from the rounded reference at all.
    pub not_rounded: u64,
    /// Inputs checked.
    pub checked: u64,
}

/// Checks `u`'s f32 function on every `step`-th bit pattern of f32
/// (`step` = 1: all 2^32 inputs, NaNs and infinities included), on two
/// threads, against the f64 reference rounded to f32.
pub fn sweep_f32(u: &Unary, step: u32) -> Sweep {
    let step = u64::from(step.max(1));
    let total = 1u64 << 32;
    let per_thread = total.div_ceil(2);
    let chunk = 1u64 << 16;
    let parts: Vec<Sweep> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u64)
            .map(|t| {
                s.spawn(move || {
                    let (lo, hi) = (t * per_thread, ((t + 1) * per_thread).min(total));
                    // First multiple of `step` at or above `lo`.
                    let mut b = lo.div_ceil(step) * step;
                    let mut acc = Sweep {
                        max: 0.0,
                        worst: 0.0,
                        not_rounded: 0,
                        checked: 0,
                    };
                    let mut xs = Vec::with_capacity(chunk as usize);
                    let mut out = vec![0.0f32; chunk as usize];
                    while b < hi {
                        xs.clear();
                        while b < hi && xs.len() < chunk as usize {
                            xs.push(f32::from_bits(b as u32));
                            b += step;
                        }
                        (u.f32)(&xs, &mut out[..xs.len()]);
                        for (&x, &y) in xs.iter().zip(&out) {
                            let want = (u.reference)(f64::from(x)) as f32;
                            let e = ulp32(y, want);
                            if e > 0.0 {
                                acc.not_rounded += 1;
                            }
                            if e > acc.max || e.is_nan() {
                                acc.max = e;
                                acc.worst = x;
                            }
                        }
                        acc.checked += xs.len() as u64;
                    }
                    acc
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("sweep thread"))
            .collect()
    });
    parts
        .into_iter()
        .reduce(|a, b| Sweep {
            max: if b.max > a.max { b.max } else { a.max },
            worst: if b.max > a.max { b.worst } else { a.worst },
            not_rounded: a.not_rounded + b.not_rounded,
            checked: a.checked + b.checked,
        })
        .expect("two parts")
}
