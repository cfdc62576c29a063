//! The remainder family, exact: C's `fmod(x, y)` (the truncated remainder,
//! the sign of `x`), numpy's `remainder` (`x % y`: the floored remainder,
//! the sign of `y`) and numpy's `floor_divide` (`x // y`: the quotient of
//! numpy's `divmod`, computed from the remainder so that `1.0 // 0.1` is 9
//! as in numpy and Python).
//!
//! Method (`fmod`): d = x / y rounded, q = trunc(d), r = x - q·y in one
//! fused multiply-add. When |d| < 2^52 and y is finite, the rounded
//! quotient cannot cross an integer away from zero other than onto the
//! next one (integers that small are doubles, and rounding is monotone), so
//! q is trunc(x / y) or one more in magnitude. In the first case x - q·y
//! is fmod(x, y), which is always a double, so the fused multiply-add
//! returns it exactly; in the second, x / y lay within half an ULP of the
//! integer |q|, so fmod(x, y) is within [|y| / 2, |y|] and x - q·y =
//! fmod(x, y) - |y|·sign(x) is exact too (Sterbenz), nonzero and of the
//! sign opposite to x's, and adding |y|·sign(x) back gives fmod(x, y)
//! exactly. A zero remainder takes x's sign. Every lane of the fast range
//! therefore has the bits of the C library's `fmod`.
//!
//! `remainder` and `floor_divide` apply numpy's corrections (`npy_divmod`)
//! to that remainder, the operations of the reference evaluator's
//! `float_mod` and `float_floor_div` in the same order, so they have its
//! bits as well.
//!
//! Lanes outside the fast range (y zero or infinite, x infinite, a NaN,
//! |x / y| >= 2^52) are recomputed after the group with Rust's `%` (the C
//! library's exact `fmod`) and the same corrections; groups without such
//! lanes pay one vector compare. Branch-free otherwise: a division, a
//! truncation and a fused multiply-add per lane (`floor_divide` one more
//! division and a floor).

use super::common::{copysign, sel};
use super::dispatch::LANES;

/// 2^52: below it, the magnitudes of rounded quotients are exact integers
/// apart by at least one ULP, the fast path's premise.
const FAST_QUOTIENT: f64 = 4_503_599_627_370_496.0;

/// `x / y` and whether the pair is in the fast range (module docs): |x / y|
/// < 2^52 (false for NaN) and y finite.
#[inline(always)]
fn quotient(x: f64, y: f64) -> (f64, bool) {
    let d = x / y;
    (d, d.abs() < FAST_QUOTIENT && y.abs() < f64::INFINITY)
}

/// fmod(x, y) from the rounded quotient `d` = x / y (module docs); exact
/// in the fast range, meaningless (never a panic) outside it.
#[inline(always)]
fn fmod_from(x: f64, y: f64, d: f64) -> f64 {
    let r = (-d.trunc()).mul_add(y, x);
    // The quotient was one too large in magnitude: r = fmod - |y|·sign(x).
    let over = r != 0.0 && (r < 0.0) != (x < 0.0);
    let r = sel(over, r + copysign(y, x), r);
    copysign(r, x)
}

/// numpy's remainder from the truncated remainder `r` = fmod(x, y) (y
/// nonzero): the sign of `y`, a zero one included.
#[inline(always)]
fn mod_from(r: f64, y: f64) -> f64 {
    let flip = r != 0.0 && (r < 0.0) != (y < 0.0);
    sel(r == 0.0, copysign(0.0, y), sel(flip, r + y, r))
}

/// numpy's floor division from `m` = fmod(x, y) and `d` = x / y (y
/// nonzero): the quotient (x - m) / y, one less where the floored remainder
/// differs from the truncated one, rounded to the nearest integer (it is
/// an integer but for rounding), a zero quotient with the sign of x / y.
#[inline(always)]
fn floor_div_from(x: f64, y: f64, m: f64, d: f64) -> f64 {
    let div = (x - m) / y;
    let div = sel(m != 0.0 && (y < 0.0) != (m < 0.0), div - 1.0, div);
    let f = div.floor();
    let f = sel(div - f > 0.5, f + 1.0, f);
    sel(div != 0.0, f, copysign(0.0, d))
}

/// C's `fmod` on the whole line (the fixup of [`fmod_staged`]).
#[inline(never)]
fn fmod_exact(x: f64, y: f64) -> f64 {
    x % y
}

/// numpy's remainder on the whole line: `x % 0` is NaN (the fixup of
/// [`mod_staged`]).
#[inline(never)]
fn mod_exact(x: f64, y: f64) -> f64 {
    let r = x % y;
    if y == 0.0 {
        r
    } else {
        mod_from(r, y)
    }
}

/// numpy's floor division on the whole line: `x // 0` is `x / 0` (the
/// fixup of [`floor_divide_staged`]).
#[inline(never)]
fn floor_divide_exact(x: f64, y: f64) -> f64 {
    if y == 0.0 {
        x / y
    } else {
        floor_div_from(x, y, x % y, x / y)
    }
}

/// Maps `fast` over a group (`a[i] = fast(a[i], b[i])`, with the fast-range
/// flag of each pair) in one vectorised loop, then recomputes the lanes
/// outside the fast range with `exact` from their inputs.
#[inline(always)]
fn staged(
    a: &mut [f64; LANES],
    b: &[f64; LANES],
    fast: impl Fn(f64, f64) -> (f64, bool),
    exact: fn(f64, f64) -> f64,
) {
    let orig = *a;
    let mut outside = false;
    for (p, &y) in a.iter_mut().zip(b) {
        let (v, ok) = fast(*p, y);
        *p = v;
        outside |= !ok;
    }
    if outside {
        for ((p, &x), &y) in a.iter_mut().zip(&orig).zip(b) {
            if !quotient(x, y).1 {
                *p = exact(x, y);
            }
        }
    }
}

/// `a[i] = fmod(a[i], b[i])` over a group (C's `fmod`, exact).
#[inline(always)]
pub(crate) fn fmod_staged(a: &mut [f64; LANES], b: &[f64; LANES]) {
    staged(
        a,
        b,
        #[inline(always)]
        |x, y| {
            let (d, ok) = quotient(x, y);
            (fmod_from(x, y, d), ok)
        },
        fmod_exact,
    );
}

/// `a[i] = a[i] % b[i]` over a group (numpy's remainder, exact).
#[inline(always)]
pub(crate) fn mod_staged(a: &mut [f64; LANES], b: &[f64; LANES]) {
    staged(
        a,
        b,
        #[inline(always)]
        |x, y| {
            let (d, ok) = quotient(x, y);
            (mod_from(fmod_from(x, y, d), y), ok)
        },
        mod_exact,
    );
}

/// `a[i] = a[i] // b[i]` over a group (numpy's floor division, exact).
#[inline(always)]
pub(crate) fn floor_divide_staged(a: &mut [f64; LANES], b: &[f64; LANES]) {
    staged(
        a,
        b,
        #[inline(always)]
        |x, y| {
            let (d, ok) = quotient(x, y);
            (floor_div_from(x, y, fmod_from(x, y, d), d), ok)
        },
        floor_divide_exact,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a group map over pairs in groups of [`LANES`] (the tail padded
    /// with ones).
    fn run(g: fn(&mut [f64; LANES], &[f64; LANES]), x: &[f64], y: &[f64]) -> Vec<f64> {
        let mut out = Vec::new();
        for (cx, cy) in x.chunks(LANES).zip(y.chunks(LANES)) {
            let (mut a, mut b) = ([1.0; LANES], [1.0; LANES]);
            a[..cx.len()].copy_from_slice(cx);
            b[..cy.len()].copy_from_slice(cy);
            g(&mut a, &b);
            out.extend_from_slice(&a[..cx.len()]);
        }
        out
    }

    /// Pairs where the rounded quotient lands on an integer it does not
    /// reach (the fast path's one-too-large case), quotients at the 2^52
    /// edge, both signs, subnormals, and every special.
    fn pairs() -> (Vec<f64>, Vec<f64>) {
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        let specials = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.1,
            -3.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            5e-324,
            -1e-310,
            f64::MAX,
        ];
        for &a in &specials {
            for &b in &specials {
                xs.push(a);
                ys.push(b);
            }
        }
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for _ in 0..20_000 {
            let (u, v) = (next(), next());
            // Magnitudes 2^[-60, 60) apart, mantissas at random, both signs.
            let e1 = (u % 120) as i32 - 60;
            let e2 = (v % 120) as i32 - 60;
            let m1 = 1.0 + (u >> 11) as f64 / (1u64 << 53) as f64;
            let m2 = 1.0 + (v >> 11) as f64 / (1u64 << 53) as f64;
            let sx = if u & 1 == 0 { 1.0 } else { -1.0 };
            let sy = if v & 1 == 0 { 1.0 } else { -1.0 };
            xs.push(sx * m1 * 2f64.powi(e1));
            ys.push(sy * m2 * 2f64.powi(e2));
            // A multiple of y nudged by an ULP either way: quotients just
            // below and above an integer.
            let y = sy * m2 * 2f64.powi(e2 / 4);
            let k = (u % 100_000 + 1) as f64;
            let p = k * y;
            for q in [
                f64::from_bits(p.to_bits() - 1),
                p,
                f64::from_bits(p.to_bits() + 1),
            ] {
                xs.push(q);
                ys.push(y);
            }
        }
        // Quotients around 2^52 and 2^53 (the fast range's edge), and
        // subnormal divisors.
        for k in [-3i64, -1, 0, 1, 3] {
            let big = FAST_QUOTIENT + k as f64;
            xs.extend([big * 0.75, -(2.0 * big + 1.0), big * 1e-300, 1e-300]);
            ys.extend([0.75, 2.0, 1e-300, 5e-324]);
        }
        (xs, ys)
    }

    fn assert_bits(name: &str, x: &[f64], y: &[f64], got: &[f64], want: impl Fn(f64, f64) -> f64) {
        for i in 0..x.len() {
            let w = want(x[i], y[i]);
            let same = got[i].to_bits() == w.to_bits() || (got[i].is_nan() && w.is_nan());
            assert!(
                same,
                "{name}({:e}, {:e}) = {:e}, want {:e}",
                x[i], y[i], got[i], w
            );
        }
    }

    #[test]
    fn fmod_has_the_c_library_bits() {
        let (x, y) = pairs();
        assert_bits("fmod", &x, &y, &run(fmod_staged, &x, &y), |a, b| a % b);
    }

    /// The fast lanes of `%` and `//` against their whole-line scalar forms
    /// (the C library's fmod, then the same corrections); that those
    /// corrections are the reference evaluator's is checked through the JIT
    /// (`tests/jit_vector_paths.rs`).
    #[test]
    fn remainder_and_floor_divide_have_the_bits_of_their_scalar_forms() {
        let (x, y) = pairs();
        assert_bits("mod", &x, &y, &run(mod_staged, &x, &y), mod_exact);
        assert_bits(
            "floor_divide",
            &x,
            &y,
            &run(floor_divide_staged, &x, &y),
            floor_divide_exact,
        );
    }

    /// The fast path alone (no fixup) on pairs whose quotient rounds up
    /// onto an integer: it needs its correction step.
    #[test]
    fn the_fast_path_corrects_a_quotient_rounded_onto_an_integer() {
        // 1 / 0.1 is 9.99999999999999944.. (0.1 is a little above a tenth)
        // and rounds to 10; fmod(1, 0.1) is 0.1 less 2^-56 or so.
        let (d, ok) = quotient(1.0, 0.1);
        assert!(ok);
        assert_eq!(d, 10.0);
        assert_eq!(fmod_from(1.0, 0.1, d).to_bits(), (1.0f64 % 0.1).to_bits());
        assert_eq!(
            fmod_from(-1.0, 0.1, -d).to_bits(),
            (-1.0f64 % 0.1).to_bits()
        );
        assert!(fmod_from(1.0, 0.1, d) > 0.09);
        assert_eq!(floor_div_from(1.0, 0.1, 1.0 % 0.1, d), 9.0);
    }
}
