//! Paired block functions: `f(x)` and `f(-x)` of one input computed
//! together, sharing the work the two have in common.
//!
//! - `kiln_sigmoid_pair_f64(x, pos, neg, n)`: `pos[i] = sigmoid(x[i])`,
//!   `neg[i] = sigmoid(-x[i])` from one e^-|x| (|-x| = |x|), so one
//!   exponential and two divisions instead of two of each. The gradient of
//!   a logistic loss has both (`d/dz softplus(z) = sigmoid(z)`,
//!   `d/dz softplus(-z) = -sigmoid(-z)`); the JIT's element-wise kernels
//!   call this where a program computes both of one value.
//!
//! Invariant: each output has the bits of its own function's block call
//! (`kiln_sigmoid_f64` on `x`, and on `-x`) in every ISA variant: the pair
//! evaluates the same exponent (`-|x|` has the same bits for `x` and `-x`),
//! the same finishing step on `x` and on `-x`, and recomputes the same
//! lanes (|x| >= 708 and NaN) with the same full-range function. Each group
//! is read before it is written, so an output may be the input's buffer.

use std::ptr;

use super::activation::{neg_abs, sigmoid_with, SIGMOID_FIXUP};
use super::dispatch::{align_frame, apply_fixup, Fixup, LANES};
use super::exp::exp_fast;

/// sigmoid of each lane of `v` into `v` and of its negation into `w`
/// (lanes in the fast exponential's range; see [`SIGMOID_FIXUP`]).
#[inline(always)]
fn sigmoid_pair_staged(v: &mut [f64; LANES], w: &mut [f64; LANES]) {
    let mut e = [0.0; LANES];
    for (x, e) in v.iter().zip(&mut e) {
        *e = exp_fast(neg_abs(*x));
    }
    for ((x, e), w) in v.iter_mut().zip(&e).zip(w.iter_mut()) {
        let x0 = *x;
        *x = sigmoid_with(x0, *e);
        *w = sigmoid_with(-x0, *e);
    }
}

/// Applies `fix` to the lanes of both results whose input is outside its
/// range: `exact(x)` to `pos`, `exact(-x)` to `neg`.
#[inline(always)]
fn fix_pair(orig: &[f64; LANES], pos: &mut [f64; LANES], neg: &mut [f64; LANES], fix: Fixup) {
    if fix.any_outside(orig) {
        let negated = orig.map(|x| -x);
        apply_fixup(orig, pos, Some(fix));
        apply_fixup(&negated, neg, Some(fix));
    }
}

/// Maps [`sigmoid_pair_staged`] over `n` values at `x` in groups of
/// [`LANES`] (the last `n % LANES` through zero-padded local arrays).
///
/// # Safety
/// `x` must be valid for `n` reads, `pos` and `neg` for `n` writes; an
/// output and `x` are either identical or do not overlap, and the outputs
/// do not overlap each other.
#[inline(always)]
unsafe fn sigmoid_pair(x: *const f64, pos: *mut f64, neg: *mut f64, n: usize) {
    let mut i = 0;
    while i + LANES <= n {
        // SAFETY: x[i..i+LANES] is readable (caller contract).
        let orig: [f64; LANES] = unsafe { ptr::read_unaligned(x.add(i) as *const [f64; LANES]) };
        let (mut v, mut w) = (orig, [0.0; LANES]);
        sigmoid_pair_staged(&mut v, &mut w);
        fix_pair(&orig, &mut v, &mut w, SIGMOID_FIXUP);
        // SAFETY: pos[i..i+LANES] and neg[i..i+LANES] are writable; this
        // group's input was read above.
        unsafe {
            ptr::write_unaligned(pos.add(i) as *mut [f64; LANES], v);
            ptr::write_unaligned(neg.add(i) as *mut [f64; LANES], w);
        }
        i += LANES;
    }
    if i < n {
        let len = n - i;
        let mut orig = [0.0; LANES];
        // SAFETY: x[i..n] is readable and len < LANES.
        unsafe { ptr::copy_nonoverlapping(x.add(i), orig.as_mut_ptr(), len) };
        let (mut v, mut w) = (orig, [0.0; LANES]);
        sigmoid_pair_staged(&mut v, &mut w);
        fix_pair(&orig, &mut v, &mut w, SIGMOID_FIXUP);
        // SAFETY: pos[i..n] and neg[i..n] are writable.
        unsafe {
            ptr::copy_nonoverlapping(v.as_ptr(), pos.add(i), len);
            ptr::copy_nonoverlapping(w.as_ptr(), neg.add(i), len);
        }
    }
}

dispatched!(
    /// Computes `pos[i] = sigmoid(x[i])` and `neg[i] = sigmoid(-x[i])` for
    /// `n` f64 values, each with the bits of `kiln_sigmoid_f64` (see the
    /// module header). An output may be `x` itself (each group is read
    /// before it is written).
    kiln_sigmoid_pair_f64 [sigmoid_pair_avx512, sigmoid_pair_avx2, sigmoid_pair_base]
        (x: *const f64, pos: *mut f64, neg: *mut f64, n: usize) = {
        align_frame();
        sigmoid_pair(x, pos, neg, n)
    }
);

/// Safe slice form of [`kiln_sigmoid_pair_f64`].
///
/// # Panics
/// If the lengths differ.
pub fn sigmoid_pair_f64(x: &[f64], pos: &mut [f64], neg: &mut [f64]) {
    assert!(
        x.len() == pos.len() && x.len() == neg.len(),
        "lengths differ"
    );
    // SAFETY: the three slices have `x.len()` elements; the outputs are
    // exclusive borrows, so they overlap neither `x` nor each other.
    unsafe { kiln_sigmoid_pair_f64(x.as_ptr(), pos.as_mut_ptr(), neg.as_mut_ptr(), x.len()) }
}

/// The paired entry points as (symbol name, address), for the JIT's symbol
/// table: `void(const double* x, double* pos, double* neg, size_t n)`.
pub fn pair_symbols() -> Vec<(&'static str, *const u8)> {
    vec![("kiln_sigmoid_pair_f64", kiln_sigmoid_pair_f64 as *const u8)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::sigmoid_f64;

    /// Every lane class: the fast range, its edges (|x| = 708 and beyond),
    /// subnormal results, zeros of both signs, infinities and NaN.
    fn inputs() -> Vec<f64> {
        let mut x: Vec<f64> = (0..997).map(|i| (i as f64 - 498.0) * 0.0731).collect();
        x.extend([
            0.0,
            -0.0,
            707.9,
            708.0,
            -708.0,
            744.0,
            -744.0,
            746.0,
            -746.0,
            1e300,
            -1e300,
            f64::MIN_POSITIVE,
            -5e-324,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
        ]);
        x
    }

    fn same_bits(a: f64, b: f64) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    #[test]
    fn each_result_has_the_bits_of_its_own_sigmoid_in_every_variant() {
        let x = inputs();
        let neg_x: Vec<f64> = x.iter().map(|v| -v).collect();
        let (mut want_pos, mut want_neg) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        sigmoid_f64(&x, &mut want_pos);
        sigmoid_f64(&neg_x, &mut want_neg);
        // Every length around the group size, so that tails are covered.
        for n in [0, 1, LANES - 1, LANES, LANES + 3, x.len()] {
            let mut variants: Vec<unsafe fn(*const f64, *mut f64, *mut f64, usize)> =
                vec![sigmoid_pair_base];
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    variants.push(sigmoid_pair_avx2);
                }
                if std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                {
                    variants.push(sigmoid_pair_avx512);
                }
            }
            for f in variants {
                let (mut pos, mut neg) = (vec![9.0; n], vec![9.0; n]);
                // SAFETY: each buffer holds n elements; the CPU has the
                // variant's features (checked above).
                unsafe { f(x.as_ptr(), pos.as_mut_ptr(), neg.as_mut_ptr(), n) };
                for i in 0..n {
                    assert!(same_bits(pos[i], want_pos[i]), "sigmoid({})", x[i]);
                    assert!(same_bits(neg[i], want_neg[i]), "sigmoid(-({}))", x[i]);
                }
            }
        }
    }

    #[test]
    fn an_output_may_be_the_input() {
        let x = inputs();
        let (mut pos, mut neg) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        sigmoid_pair_f64(&x, &mut pos, &mut neg);
        let mut inplace = x.clone();
        let mut neg2 = vec![0.0; x.len()];
        // SAFETY: `pos` is the input buffer itself, which the contract allows.
        unsafe {
            kiln_sigmoid_pair_f64(
                inplace.as_ptr(),
                inplace.as_mut_ptr(),
                neg2.as_mut_ptr(),
                x.len(),
            )
        };
        for i in 0..x.len() {
            assert!(same_bits(inplace[i], pos[i]) && same_bits(neg2[i], neg[i]));
        }
    }
}
