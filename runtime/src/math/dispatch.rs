//! Block drivers and run-time CPU dispatch for the math kernels.
//!
//! Unary drivers map groups of [`LANES`] elements loaded straight from the
//! input (the f32 ones widen each group to f64, run the f64 kernel and
//! round once, except for the functions with an f32 kernel of their own
//! in `single` or `lean`, whose driver maps groups of `single::LANES32` f32
//! (or a kernel's wider AVX-512 group) as they are); the binary f32 driver
//! of a scalar kernel copies up to [`BLOCK`] pairs into stack buffers
//! first, that of a group map widens groups as the unary one does. Each
//! group or block is read before its results are written, so `out` may be
//! the same pointer as `x` (in place); partially overlapping buffers are
//! not supported.
//!
//! The drivers are instantiated three times per function (AVX-512, AVX2+FMA
//! and baseline, see `math::mod`); [`isa`] picks one with
//! `is_x86_feature_detected!` on first use, lowered to the cap the
//! `KILN_ISA` environment variable names if it is set ([`requested_isa`]:
//! how an AVX-512 machine measures the AVX2 path), and caches the choice
//! in an atomic. Accuracy is that of the kernels: the variants give
//! bitwise identical results (no FMA contraction is performed by rustc).

use super::source::Source;
use std::ptr;
use std::sync::atomic::{AtomicU8, Ordering};

/// Elements processed per block (the stack buffers hold this many).
pub(crate) const BLOCK: usize = 64;

/// Instruction-set variant used by the vectorised math functions, ordered
/// from the narrowest to the widest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// Baseline code of the target (SSE2 on x86_64).
    Baseline,
    /// AVX2 + FMA (256-bit vectors).
    Avx2,
    /// AVX-512F/DQ + AVX2 + FMA (512-bit vectors).
    Avx512,
}

static ISA: AtomicU8 = AtomicU8::new(0);

/// The environment variable that caps the instruction set kiln uses.
pub const ISA_ENV: &str = "KILN_ISA";

impl Isa {
    /// The name `KILN_ISA` accepts for this variant.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Baseline => "baseline",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Parses a `KILN_ISA` value (`avx512`, `avx2` or `baseline`, any case).
    pub fn parse(s: &str) -> Result<Isa, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "avx512" | "avx-512" => Ok(Isa::Avx512),
            "avx2" => Ok(Isa::Avx2),
            "baseline" | "sse2" => Ok(Isa::Baseline),
            _ => Err(format!(
                "{ISA_ENV}={s:?}: expected one of avx512, avx2, baseline"
            )),
        }
    }
}

/// The cap `KILN_ISA` asks for: `Ok(None)` when the variable is unset or
/// empty, an error naming the accepted values when it is set to anything
/// else. Read once per process, so the runtime's variant and the code
/// generator's flags always follow the same value. The code generator
/// reports the error when a function is compiled; [`isa`] ignores an
/// invalid value (it cannot fail).
pub fn requested_isa() -> Result<Option<Isa>, String> {
    static REQUESTED: std::sync::OnceLock<Result<Option<Isa>, String>> = std::sync::OnceLock::new();
    REQUESTED
        .get_or_init(|| match std::env::var(ISA_ENV) {
            Ok(v) if !v.trim().is_empty() => Isa::parse(&v).map(Some),
            _ => Ok(None),
        })
        .clone()
}

/// The widest variant this CPU supports, whatever `KILN_ISA` says.
pub fn detected_isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
        {
            return Isa::Avx512;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Isa::Avx2;
        }
    }
    Isa::Baseline
}

/// The detected variant lowered to the `KILN_ISA` cap, if any.
fn detect() -> Isa {
    let hw = detected_isa();
    match requested_isa() {
        Ok(Some(cap)) => hw.min(cap),
        _ => hw,
    }
}

/// The variant the math functions use on this CPU: the widest it supports,
/// at most the `KILN_ISA` cap (detected once, then cached).
#[inline]
pub fn isa() -> Isa {
    match ISA.load(Ordering::Relaxed) {
        1 => Isa::Baseline,
        2 => Isa::Avx2,
        3 => Isa::Avx512,
        _ => {
            let d = detect();
            let code = match d {
                Isa::Baseline => 1,
                Isa::Avx2 => 2,
                Isa::Avx512 => 3,
            };
            ISA.store(code, Ordering::Relaxed);
            d
        }
    }
}

/// A kernel's accurate range and the exact scalar function that replaces
/// it outside that range: after a group is mapped, every lane whose input
/// `x` has `!(|x| < limit)` (including ±inf and NaN) is recomputed with
/// `exact`. The check costs one vector compare per group; groups without
/// such lanes are untouched.
#[derive(Clone, Copy)]
pub(crate) struct Fixup {
    /// The kernel is accurate for `|x| < limit`.
    pub limit: f64,
    /// The function used for the other lanes.
    pub exact: fn(f64) -> f64,
}

impl Fixup {
    /// Whether `x` is outside the kernel's range: one unordered compare,
    /// true for |x| >= limit and for NaN (the negated `<` is the point: NaN
    /// compares false).
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    #[inline(always)]
    fn outside(&self, x: f64) -> bool {
        !(x.abs() < self.limit)
    }

    /// Whether any of `orig` is outside the kernel's range.
    #[inline(always)]
    pub(crate) fn any_outside(&self, orig: &[f64]) -> bool {
        orig.iter().fold(false, |acc, &e| acc | self.outside(e))
    }
}

/// Recomputes the lanes of `v` whose input in `orig` is outside `fix`'s range.
#[inline(always)]
pub(crate) fn apply_fixup(orig: &[f64], v: &mut [f64], fix: Option<Fixup>) {
    let Some(fix) = fix else {
        return;
    };
    if fix.any_outside(orig) {
        for (o, x) in v.iter_mut().zip(orig) {
            if fix.outside(*x) {
                *o = (fix.exact)(*x);
            }
        }
    }
}

/// Makes the calling function realign its stack frame to 64 bytes (a
/// cache line), so that the vector registers LLVM spills to the frame
/// (AVX2 has sixteen; a kernel's constants and lanes do not fit) never
/// straddle two lines. With the stack only 16-byte aligned, LLVM spilled
/// with unaligned moves wherever the caller's stack happened to end: the
/// same binary ran the AVX2 tanh at 5.6, 7.3, 6.0, 10.2 or 10.1 µs per
/// 4096 values as the environment's size moved the stack (`setarch -R`,
/// `kernel_rate -- tanh` with 0, 36, 48, 68 and 72 bytes more of
/// environment; 5.5-5.7 at all five with the frame realigned), so AVX2
/// figures changed from one process to the next. A 64-byte-aligned local whose address
/// escapes (through `black_box`) is the portable way to have LLVM realign
/// the frame; it costs a store per call. Called first in the unary math
/// functions' AVX2 and AVX-512 variants (but two, see `frame_for` in
/// `math`).
#[inline(always)]
pub(crate) fn align_frame() {
    #[repr(C, align(64))]
    struct Line(u8);
    let line = Line(0);
    std::hint::black_box(&line);
}

/// Lanes per step of the direct loops: two AVX-512 or four AVX2 vectors,
/// enough independent work to hide the latency of the kernels' chains.
pub(crate) const LANES: usize = 16;

const _: () = assert!(BLOCK.is_multiple_of(LANES));

/// Applies the scalar kernel `f` to every lane of a group (the group map
/// of every variant: rustc vectorises it at the variant's width).
#[inline(always)]
pub(crate) fn map_lanes<const N: usize>(v: &mut [f64; N], f: impl Fn(f64) -> f64) {
    for e in v.iter_mut() {
        *e = f(*e);
    }
}

/// Maps a group map `g` (a kernel applied to [`LANES`] values at once,
/// usually [`map_lanes`] of a scalar kernel) over `n` f64 values from the
/// source `x` (an array, or a pre-stage computing `a ⊕ b` as it is read)
/// into `out`.
///
/// Whole groups of [`LANES`] elements are read into a fixed-size local
/// array straight from `x`, mapped (a loop rustc vectorises fully, with the
/// kernel's constants hoisted out of the outer loop) and stored to `out`;
/// the last `n % LANES` go through a zero-padded local array. Each group is
/// read before it is written, so `out == x` (in place) is fine. With a
/// [`Fixup`], lanes outside the kernel's range are recomputed exactly.
///
/// # Safety
/// `x` must be valid for `n` reads (its operands, for a pre-stage) and
/// `out` for `n` writes; an array read and `out` are either identical or
/// do not overlap.
#[inline(always)]
pub(crate) unsafe fn unary_f64(
    x: impl Source<f64>,
    out: *mut f64,
    n: usize,
    g: impl Fn(&mut [f64; LANES]),
    fix: Option<Fixup>,
) {
    let mut i = 0;
    while i + LANES <= n {
        // SAFETY: x[i..i+LANES] is readable (caller contract, i + LANES <= n).
        let mut v: [f64; LANES] = unsafe { x.group(i) };
        // The range check before the map, so that the input need not stay
        // live across it: the rare groups with lanes to fix read it again
        // (out[i..] is not written yet, so this holds in place too).
        let fix_group = fix.filter(|f| f.any_outside(&v));
        g(&mut v);
        if fix_group.is_some() {
            // SAFETY: as for the read above.
            let orig: [f64; LANES] = unsafe { x.group(i) };
            apply_fixup(&orig, &mut v, fix_group);
        }
        // SAFETY: out[i..i+LANES] is writable; this group's input was read above.
        unsafe { ptr::write_unaligned(out.add(i) as *mut [f64; LANES], v) };
        i += LANES;
    }
    if i < n {
        let len = n - i;
        // SAFETY: x[i..n] is readable and len < LANES.
        let mut v: [f64; LANES] = unsafe { x.partial(i, len) };
        let orig = v;
        g(&mut v);
        apply_fixup(&orig, &mut v, fix);
        // SAFETY: out[i..n] is writable.
        unsafe { ptr::copy_nonoverlapping(v.as_ptr(), out.add(i), len) };
    }
}

/// f32 version of [`unary_f64`]: each group of [`LANES`] f32 values is
/// loaded straight from `x`, widened, mapped by the f64 group map (and the
/// fixup), rounded and stored; the last `n % LANES` go through a
/// zero-padded local array. No block buffer: copying blocks through one
/// cost ~0.5 ns per element, which made the widened f32 forms slower than
/// the f64 ones.
///
/// # Safety
/// As for [`unary_f64`].
#[inline(always)]
pub(crate) unsafe fn unary_f32(
    x: impl Source<f32>,
    out: *mut f32,
    n: usize,
    g: impl Fn(&mut [f64; LANES]),
    fix: Option<Fixup>,
) {
    let mut i = 0;
    while i + LANES <= n {
        // SAFETY: x[i..i+LANES] is readable (caller contract, i + LANES <= n).
        let raw: [f32; LANES] = unsafe { x.group(i) };
        let mut v = raw.map(f64::from);
        let fix_group = fix.filter(|f| f.any_outside(&v));
        g(&mut v);
        if fix_group.is_some() {
            apply_fixup(&raw.map(f64::from), &mut v, fix_group);
        }
        // SAFETY: out[i..i+LANES] is writable; this group was read above.
        unsafe { ptr::write_unaligned(out.add(i) as *mut [f32; LANES], v.map(|w| w as f32)) };
        i += LANES;
    }
    if i < n {
        let len = n - i;
        // SAFETY: x[i..n] is readable and len < LANES.
        let raw: [f32; LANES] = unsafe { x.partial(i, len) };
        let mut v = raw.map(f64::from);
        g(&mut v);
        apply_fixup(&raw.map(f64::from), &mut v, fix);
        let narrow = v.map(|w| w as f32);
        // SAFETY: out[i..n] is writable.
        unsafe { ptr::copy_nonoverlapping(narrow.as_ptr(), out.add(i), len) };
    }
}

/// f32 driver of the f32 kernels (`single`, `lean`): maps the
/// group map `g` over groups of `N` f32 values loaded straight from `x`
/// (no widening); the last `n % N` go through a zero-padded local array.
/// Each group is read before it is written, so `out == x` is fine. `N` is
/// `single::LANES32`, or a kernel's wider AVX-512 group (see `math`'s
/// table).
///
/// # Safety
/// As for [`unary_f64`].
#[inline(always)]
pub(crate) unsafe fn unary_f32_native<const N: usize>(
    x: impl Source<f32>,
    out: *mut f32,
    n: usize,
    g: impl Fn(&mut [f32; N]),
) {
    let mut i = 0;
    while i + N <= n {
        // SAFETY: x[i..i+N] is readable (caller contract).
        let mut v: [f32; N] = unsafe { x.group(i) };
        g(&mut v);
        // SAFETY: out[i..i+N] is writable; this group was read above.
        unsafe { ptr::write_unaligned(out.add(i) as *mut [f32; N], v) };
        i += N;
    }
    if i < n {
        let len = n - i;
        // SAFETY: x[i..n] is readable and len < N.
        let mut v: [f32; N] = unsafe { x.partial(i, len) };
        g(&mut v);
        // SAFETY: out[i..n] is writable.
        unsafe { ptr::copy_nonoverlapping(v.as_ptr(), out.add(i), len) };
    }
}

/// Maps a binary kernel lane by lane over a group: `a[i] = f(a[i], b[i])`.
#[inline(always)]
pub(crate) fn map_lanes2<const N: usize>(
    a: &mut [f64; N],
    b: &[f64; N],
    f: impl Fn(f64, f64) -> f64,
) {
    for (p, q) in a.iter_mut().zip(b.iter()) {
        *p = f(*p, *q);
    }
}

/// Maps a binary group map `g` (`a = g(a, b)` on [`LANES`] pairs, usually
/// [`map_lanes2`] of a scalar kernel) over `n` f64 pairs (groups as in
/// [`unary_f64`]).
///
/// # Safety
/// `x`, `y` valid for `n` reads, `out` for `n` writes; `out` may be
/// identical to `x` and/or `y` but must not partially overlap them.
#[inline(always)]
pub(crate) unsafe fn binary_f64(
    x: *const f64,
    y: *const f64,
    out: *mut f64,
    n: usize,
    g: impl Fn(&mut [f64; LANES], &[f64; LANES]),
) {
    let mut i = 0;
    while i + LANES <= n {
        // SAFETY: x[i..i+LANES] and y[i..i+LANES] are readable (i + LANES <= n).
        let (mut a, b): ([f64; LANES], [f64; LANES]) = unsafe {
            (
                ptr::read_unaligned(x.add(i) as *const [f64; LANES]),
                ptr::read_unaligned(y.add(i) as *const [f64; LANES]),
            )
        };
        g(&mut a, &b);
        // SAFETY: out[i..i+LANES] is writable; both inputs were read above.
        unsafe { ptr::write_unaligned(out.add(i) as *mut [f64; LANES], a) };
        i += LANES;
    }
    if i < n {
        let len = n - i;
        let mut a = [0.0f64; LANES];
        let mut b = [0.0f64; LANES];
        // SAFETY: x[i..n], y[i..n] readable; len < LANES.
        unsafe {
            ptr::copy_nonoverlapping(x.add(i), a.as_mut_ptr(), len);
            ptr::copy_nonoverlapping(y.add(i), b.as_mut_ptr(), len);
        }
        g(&mut a, &b);
        // SAFETY: out[i..n] writable.
        unsafe { ptr::copy_nonoverlapping(a.as_ptr(), out.add(i), len) };
    }
}

/// f32 version of [`binary_f64`].
///
/// # Safety
/// As for [`binary_f64`].
#[inline(always)]
pub(crate) unsafe fn binary_f32(
    x: *const f32,
    y: *const f32,
    out: *mut f32,
    n: usize,
    f: impl Fn(f64, f64) -> f64,
) {
    let mut bx = [0.0f32; BLOCK];
    let mut by = [0.0f32; BLOCK];
    let mut i = 0;
    while i < n {
        let len = (n - i).min(BLOCK);
        // SAFETY: see `unary_f64`.
        unsafe {
            ptr::copy_nonoverlapping(x.add(i), bx.as_mut_ptr(), len);
            ptr::copy_nonoverlapping(y.add(i), by.as_mut_ptr(), len);
        }
        for (a, b) in bx.iter_mut().zip(by.iter()) {
            *a = f(f64::from(*a), f64::from(*b)) as f32;
        }
        // SAFETY: see `unary_f64`.
        unsafe { ptr::copy_nonoverlapping(bx.as_ptr(), out.add(i), len) };
        i += len;
    }
}

/// f32 version of [`binary_f64`] for a group map: each group of [`LANES`]
/// pairs is loaded straight from `x` and `y`, widened, mapped by the f64
/// group map `g` and rounded once (the last `n % LANES` through zero-padded
/// local arrays), as [`unary_f32`] does for unary kernels; for kernels with
/// a fixup inside their group map (`remainder`).
///
/// # Safety
/// As for [`binary_f64`].
#[inline(always)]
pub(crate) unsafe fn binary_f32_grouped(
    x: *const f32,
    y: *const f32,
    out: *mut f32,
    n: usize,
    g: impl Fn(&mut [f64; LANES], &[f64; LANES]),
) {
    let mut i = 0;
    while i + LANES <= n {
        // SAFETY: x[i..i+LANES] and y[i..i+LANES] are readable (i + LANES <= n).
        let (a, b): ([f32; LANES], [f32; LANES]) = unsafe {
            (
                ptr::read_unaligned(x.add(i) as *const [f32; LANES]),
                ptr::read_unaligned(y.add(i) as *const [f32; LANES]),
            )
        };
        let mut v = a.map(f64::from);
        g(&mut v, &b.map(f64::from));
        // SAFETY: out[i..i+LANES] is writable; both inputs were read above.
        unsafe { ptr::write_unaligned(out.add(i) as *mut [f32; LANES], v.map(|w| w as f32)) };
        i += LANES;
    }
    if i < n {
        let len = n - i;
        let mut a = [0.0f32; LANES];
        let mut b = [0.0f32; LANES];
        // SAFETY: x[i..n], y[i..n] readable; len < LANES.
        unsafe {
            ptr::copy_nonoverlapping(x.add(i), a.as_mut_ptr(), len);
            ptr::copy_nonoverlapping(y.add(i), b.as_mut_ptr(), len);
        }
        let mut v = a.map(f64::from);
        g(&mut v, &b.map(f64::from));
        let narrow = v.map(|w| w as f32);
        // SAFETY: out[i..n] writable.
        unsafe { ptr::copy_nonoverlapping(narrow.as_ptr(), out.add(i), len) };
    }
}

/// Defines `extern "C"` entry point `$name` over `$body` (an expression of
/// the arguments, typically an `#[inline(always)]` kernel call), compiled
/// three times as the functions `$avx512` (AVX-512), `$avx2` (AVX2+FMA) and
/// `$base` (baseline), which tests may call directly, and dispatched by
/// [`isa`]: the run-time CPU dispatch of the `fold` and `rowcol` entry
/// points.
macro_rules! dispatched {
    (
        $(#[$doc:meta])*
        $name:ident [$avx512:ident, $avx2:ident, $base:ident]
        ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? = $body:expr
    ) => {
        /// AVX-512 variant of the entry point of the same kernel.
        ///
        /// # Safety
        /// CPU has the features; the entry point's pointer contract.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
        unsafe fn $avx512($($arg: $ty),*) $(-> $ret)? {
            // SAFETY: forwarded caller contract.
            unsafe { $body }
        }

        /// AVX2 variant of the entry point of the same kernel.
        ///
        /// # Safety
        /// CPU has the features; the entry point's pointer contract.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn $avx2($($arg: $ty),*) $(-> $ret)? {
            // SAFETY: forwarded caller contract.
            unsafe { $body }
        }

        /// Baseline variant of the entry point of the same kernel.
        ///
        /// # Safety
        /// The entry point's pointer contract.
        unsafe fn $base($($arg: $ty),*) $(-> $ret)? {
            // SAFETY: forwarded caller contract.
            unsafe { $body }
        }

        $(#[$doc])*
        ///
        /// # Safety
        /// Every pointer must be valid for `n` elements (reads, and writes
        /// through `acc`; it may be null when `n == 0`); a written buffer
        /// must not overlap a read one.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) $(-> $ret)? {
            // SAFETY: the pointer contract is the caller's; the AVX variants
            // run only when `isa()` detected their features.
            unsafe {
                match $crate::math::isa() {
                    #[cfg(target_arch = "x86_64")]
                    $crate::math::Isa::Avx512 => $avx512($($arg),*),
                    #[cfg(target_arch = "x86_64")]
                    $crate::math::Isa::Avx2 => $avx2($($arg),*),
                    _ => $base($($arg),*),
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isa_names_parse_back_and_order_by_width() {
        for isa in [Isa::Baseline, Isa::Avx2, Isa::Avx512] {
            assert_eq!(Isa::parse(isa.name()), Ok(isa));
        }
        assert_eq!(Isa::parse(" AVX-512 "), Ok(Isa::Avx512));
        assert_eq!(Isa::parse("sse2"), Ok(Isa::Baseline));
        assert!(Isa::Baseline < Isa::Avx2 && Isa::Avx2 < Isa::Avx512);
        let e = Isa::parse("avx3").unwrap_err();
        assert!(
            e.contains("KILN_ISA") && e.contains("avx512, avx2, baseline"),
            "{e}"
        );
    }

    #[test]
    fn the_variant_in_use_never_exceeds_the_cpu() {
        assert!(isa() <= detected_isa());
    }
}
