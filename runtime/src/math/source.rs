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
//! Invariant: a chunk of the operands is read whole (into a local buffer)
//! before any output of the chunk is written, so the output may be
//! identical to an array operand.

use std::mem::MaybeUninit;
use std::ops::{Add, Mul, Sub};

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

/// Elements a pre-stage computes per chunk: the chunk's values are written
/// to a local buffer (in L1, 2 KiB of f64) by one simple vector loop, then
/// the function's driver maps the buffer into the output.
pub(crate) const PRE_CHUNK: usize = 256;

/// A pre-stage's chunk buffer, aligned to the cache line (at the stack's
/// 8-byte alignment every 64-byte vector access of it crossed two lines:
/// the pre-staged tanh took 1.15x the plain one's time instead of 1.07x),
/// and left uninitialised (clearing its 2 KiB on every call made rows of
/// 16 elements 14% slower than staging them in the kernel).
#[repr(align(64))]
struct Chunk<T>([MaybeUninit<T>; PRE_CHUNK]);

/// Element types a pre-stage computes in.
pub(crate) trait Elem:
    Copy + Default + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self>
{
}

impl Elem for f64 {}
impl Elem for f32 {}

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

    /// Maps `n` elements of `a ⊕ b` into `out` by chunks of at most
    /// [`PRE_CHUNK`]: each chunk is computed into a local buffer, then
    /// `map(buffer, out + start, len)` runs (the function's driver). A chunk
    /// is read whole before any of its outputs is written, so `out` may be
    /// identical to an array operand.
    ///
    /// # Safety
    /// A scalar operand must be valid for one read, an array operand for
    /// `n` reads, `out` for `n` writes (identical to an array operand or
    /// not overlapping it); `map` must be sound for a buffer of `len`
    /// readable values and `len` writable outputs.
    #[inline(always)]
    pub(crate) unsafe fn run(&self, out: *mut T, n: usize, map: impl Fn(*const T, *mut T, usize)) {
        let mut buf = Chunk([MaybeUninit::<T>::uninit(); PRE_CHUNK]);
        let mut i = 0;
        while i < n {
            let len = (n - i).min(PRE_CHUNK);
            // SAFETY: elements i..i+len of the operands are readable (caller
            // contract); nothing writes `out` while they are read.
            unsafe { self.fill(i, &mut buf.0[..len]) };
            // `fill` initialised the first `len` elements, all that `map`
            // reads. SAFETY: out[i..i+len] is writable (caller contract).
            map(buf.0.as_ptr().cast::<T>(), unsafe { out.add(i) }, len);
            i += len;
        }
    }

    /// Writes elements `i..i + buf.len()` of `a ⊕ b` to `buf`.
    ///
    /// # Safety
    /// Those elements of an array operand are readable, a scalar operand
    /// once, and no `&mut` to them exists.
    #[inline(always)]
    unsafe fn fill(&self, i: usize, buf: &mut [MaybeUninit<T>]) {
        // SAFETY: forwarded caller contract.
        unsafe {
            match self.op {
                PRE_ADD => self.fill_with(i, buf, |x, y| x + y),
                PRE_SUB => self.fill_with(i, buf, |x, y| x - y),
                _ => self.fill_with(i, buf, |x, y| x * y),
            }
        }
    }

    /// [`PreStage::fill`] for the operation `f`: one loop per case of
    /// scalar operands, each a plain loop rustc vectorises.
    ///
    /// # Safety
    /// As for [`PreStage::fill`].
    #[inline(always)]
    unsafe fn fill_with(&self, i: usize, buf: &mut [MaybeUninit<T>], f: impl Fn(T, T) -> T) {
        let n = buf.len();
        // SAFETY: an array operand is readable at i..i+n, a scalar one once
        // (caller contract); the slices end before any write through `out`.
        unsafe {
            let array = |p: *const T| std::slice::from_raw_parts(p.add(i), n);
            match (self.a_scalar, self.b_scalar) {
                (false, false) => {
                    for ((o, &x), &y) in buf.iter_mut().zip(array(self.a)).zip(array(self.b)) {
                        o.write(f(x, y));
                    }
                }
                (true, false) => {
                    let x = *self.a;
                    for (o, &y) in buf.iter_mut().zip(array(self.b)) {
                        o.write(f(x, y));
                    }
                }
                (false, true) => {
                    let y = *self.b;
                    for (o, &x) in buf.iter_mut().zip(array(self.a)) {
                        o.write(f(x, y));
                    }
                }
                (true, true) => buf.fill(MaybeUninit::new(f(*self.a, *self.b))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values `run` hands to its map, for a pre-stage over `n` elements.
    fn staged<T: Elem>(pre: &PreStage<T>, n: usize) -> Vec<T> {
        let mut out = vec![T::default(); n];
        // SAFETY: the test's operands hold n elements (or are scalars); the
        // map copies len values between valid buffers.
        unsafe {
            pre.run(out.as_mut_ptr(), n, |x, o, len| {
                std::ptr::copy_nonoverlapping(x, o, len)
            })
        };
        out
    }

    #[test]
    fn pre_stage_combines_arrays_and_scalars() {
        // More than one chunk, and a partial last one.
        let n = PRE_CHUNK + 37;
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
            let got = staged(&PreStage::new(pa, pb, mode), n);
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
            staged(&PreStage::new(a.as_ptr(), b.as_ptr(), PRE_ADD), 4),
            [1.0; 4]
        );
    }
}
