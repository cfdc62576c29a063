//! Pre-stages of the unary functions' pre-staged entry points
//! (`kiln_<name>_pre_<dtype>`, see `math::mod`): two operands combined by
//! one arithmetic operation before the function, so that JIT code can hand
//! `f(a + b)` to the runtime without staging `a + b` through memory in its
//! own (128-bit) vector code.
//!
//! A pre-stage is described by a `mode` word: the operation in its low two
//! bits ([`PRE_ADD`], [`PRE_SUB`], [`PRE_MUL`]) and one flag per operand
//! that makes it a single value broadcast to every element
//! ([`PRE_A_SCALAR`], [`PRE_B_SCALAR`]). The operation rounds once in the
//! operand dtype, as the JIT's vector code and the reference evaluator
//! compute it, so a pre-staged call gives the bits of the staged one.
//!
//! Invariant: a driver reads a group of the operands (or the last,
//! partial group) whole before it writes that group's outputs, and never
//! reads a group after writing it, so the output may be identical to an
//! array operand.

use std::ops::{Add, Mul, Sub};
use std::ptr;

/// Pre-stage operation `a + b` (`mode & 3`).
pub const PRE_ADD: u64 = 0;
/// Pre-stage operation `a - b` (`mode & 3`).
pub const PRE_SUB: u64 = 1;
/// Pre-stage operation `a * b` (`mode & 3`; the code 3 is reserved and
/// multiplies too).
pub const PRE_MUL: u64 = 2;
/// Mode flag: operand `a` is one value, broadcast to every element.
pub const PRE_A_SCALAR: u64 = 4;
/// Mode flag: operand `b` is one value, broadcast to every element.
pub const PRE_B_SCALAR: u64 = 8;

/// The operation bits of a mode word.
const PRE_OP_MASK: u64 = 3;

/// Element types a pre-stage computes in.
pub(crate) trait Elem:
    Copy + Default + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self>
{
}

impl Elem for f64 {}
impl Elem for f32 {}

/// Where a unary driver (`dispatch::unary_f64` and its f32 forms) reads
/// its input, a group of `N` consecutive elements at a time: an array
/// (`*const T`) or a [`PreStage`] that computes each group from its
/// operands as it is read, so that `f(a ⊕ b)` streams both operands
/// through registers straight into the function's kernel.
///
/// This replaced staging chunks of 256 values of `a ⊕ b` through a local
/// buffer first: `tanh(u[:, None] + v[None, :])` (2000², one thread,
/// three alternated rounds) went from 4.01-4.09 to 3.72-3.83 ms with
/// AVX-512 and from 6.04-6.11 to 5.70-6.18 with AVX2.
pub(crate) trait Source<T: Elem>: Copy {
    /// Elements `i..i + N`.
    ///
    /// # Safety
    /// Those elements are readable (an array operand at `i..i + N`, a
    /// scalar operand once).
    unsafe fn group<const N: usize>(self, i: usize) -> [T; N];

    /// Elements `i..i + len` (`len < N`) followed by `N - len` defaults.
    ///
    /// # Safety
    /// As for [`Source::group`], for elements `i..i + len`.
    unsafe fn partial<const N: usize>(self, i: usize, len: usize) -> [T; N];
}

impl<T: Elem> Source<T> for *const T {
    #[inline(always)]
    unsafe fn group<const N: usize>(self, i: usize) -> [T; N] {
        // SAFETY: elements i..i+N are readable (caller contract).
        unsafe { ptr::read_unaligned(self.add(i) as *const [T; N]) }
    }

    #[inline(always)]
    unsafe fn partial<const N: usize>(self, i: usize, len: usize) -> [T; N] {
        let mut v = [T::default(); N];
        // SAFETY: elements i..i+len are readable (caller contract) and
        // len < N fits the local array.
        unsafe { ptr::copy_nonoverlapping(self.add(i), v.as_mut_ptr(), len) };
        v
    }
}

/// Two operands combined element by element, `a[i] ⊕ b[i]`, each an array
/// or (by its mode flag) one value broadcast to every element.
#[derive(Clone, Copy)]
pub(crate) struct PreStage<T> {
    a: *const T,
    b: *const T,
    op: u64,
    a_scalar: bool,
    b_scalar: bool,
}

impl<T: Elem> PreStage<T> {
    /// The pre-stage `a ⊕ b` of mode word `mode` (see the module header).
    pub(crate) fn new(a: *const T, b: *const T, mode: u64) -> Self {
        PreStage {
            a,
            b,
            op: mode & PRE_OP_MASK,
            a_scalar: mode & PRE_A_SCALAR != 0,
            b_scalar: mode & PRE_B_SCALAR != 0,
        }
    }

    /// `x ⊕ y` lane by lane. The operation and the scalar flags are the
    /// same for every group of a call: the branches on them are predicted,
    /// and each arm is a plain vector loop.
    #[inline(always)]
    fn combine<const N: usize>(&self, x: [T; N], y: [T; N]) -> [T; N] {
        let mut v = x;
        match self.op {
            PRE_ADD => v.iter_mut().zip(y).for_each(|(p, q)| *p = *p + q),
            PRE_SUB => v.iter_mut().zip(y).for_each(|(p, q)| *p = *p - q),
            _ => v.iter_mut().zip(y).for_each(|(p, q)| *p = *p * q),
        }
        v
    }
}

impl<T: Elem> Source<T> for PreStage<T> {
    #[inline(always)]
    unsafe fn group<const N: usize>(self, i: usize) -> [T; N] {
        // SAFETY: a scalar operand is readable once, an array one at
        // i..i+N (caller contract).
        let (x, y) = unsafe {
            (
                if self.a_scalar {
                    [*self.a; N]
                } else {
                    self.a.group(i)
                },
                if self.b_scalar {
                    [*self.b; N]
                } else {
                    self.b.group(i)
                },
            )
        };
        self.combine(x, y)
    }

    #[inline(always)]
    unsafe fn partial<const N: usize>(self, i: usize, len: usize) -> [T; N] {
        // SAFETY: as for `group`, for elements i..i+len. The padding lanes
        // combine defaults; a driver never stores them.
        let (x, y) = unsafe {
            (
                if self.a_scalar {
                    [*self.a; N]
                } else {
                    self.a.partial(i, len)
                },
                if self.b_scalar {
                    [*self.b; N]
                } else {
                    self.b.partial(i, len)
                },
            )
        };
        self.combine(x, y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values a driver reads from `src` over `n` elements: groups of
    /// 8, then a partial one.
    fn staged<T: Elem>(src: impl Source<T>, n: usize) -> Vec<T> {
        let mut out = Vec::new();
        let mut i = 0;
        // SAFETY: the test's operands hold n elements (or are scalars).
        unsafe {
            while i + 8 <= n {
                out.extend(src.group::<8>(i));
                i += 8;
            }
            if i < n {
                let last: [T; 8] = src.partial(i, n - i);
                out.extend(&last[..n - i]);
            }
        }
        out
    }

    #[test]
    fn pre_stage_combines_arrays_and_scalars() {
        // Whole groups, and a partial last one.
        let n = 37;
        let a: Vec<f64> = (0..n).map(|i| i as f64 * 0.5).collect();
        let b: Vec<f64> = (0..n).map(|i| 3.0 - i as f64 * 0.25).collect();
        let s = 10.0f64;
        type Case = (u64, bool, bool, fn(f64, f64) -> f64);
        let cases: [Case; 6] = [
            (PRE_ADD, false, false, |x, y| x + y),
            (PRE_SUB | PRE_A_SCALAR, true, false, |x, y| x - y),
            (PRE_MUL | PRE_B_SCALAR, false, true, |x, y| x * y),
            (PRE_SUB | PRE_B_SCALAR, false, true, |x, y| x - y),
            (PRE_MUL, false, false, |x, y| x * y),
            (PRE_ADD | PRE_A_SCALAR | PRE_B_SCALAR, true, true, |x, y| {
                x + y
            }),
        ];
        for (mode, sa, sb, f) in cases {
            let pa = if sa { &s as *const f64 } else { a.as_ptr() };
            let pb = if sb { &s as *const f64 } else { b.as_ptr() };
            let got = staged(PreStage::new(pa, pb, mode), n);
            for (i, g) in got.iter().enumerate() {
                let want = f(if sa { s } else { a[i] }, if sb { s } else { b[i] });
                assert_eq!(g.to_bits(), want.to_bits(), "mode {mode}, element {i}");
            }
        }
    }

    #[test]
    fn f32_pre_stage_rounds_in_f32() {
        // 1 + 2^-24 is not an f32: the sum must round in f32 (to 1), as the
        // reference evaluator's f32 addition does.
        let a = [1.0f32; 4];
        let b = [2f32.powi(-24); 4];
        assert_eq!(
            staged(PreStage::new(a.as_ptr(), b.as_ptr(), PRE_ADD), 4),
            [1.0; 4]
        );
    }
}
