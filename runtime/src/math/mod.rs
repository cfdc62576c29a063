//! Block-wise vectorised elementwise math for JIT-compiled kernels.
//!
//! Every function exists for f64 and f32 in three forms:
//! - an `extern "C"` entry point for JIT code, `kiln_<name>_<dtype>(x, out, n)`
//!   (`kiln_<name>_<dtype>(x, y, out, n)` for the binary `pow`,
//!   `arctan2`, `hypot`, `sigmoid_binary_crossentropy`, `fmod`, `mod` and
//!   `floor_divide`); a unary
//!   function also has a pre-staged one, `kiln_<name>_pre_<dtype>(a, b,
//!   out, n, mode)`, computing `f(a ⊕ b)` (see `source`), listed in
//!   [`math_symbols`] only;
//! - a safe slice API, `<name>_<dtype>(x, out)`;
//! - an entry in [`math_symbols`] (symbol name and address for
//!   `JITBuilder::symbol`).
//!
//! In-place use is allowed: `out` may be the same pointer as `x` (or `y`),
//! but buffers must not partially overlap.
//!
//! The kernels are pure-Rust, branch-free approximations (one module per
//! family, each documents its method and accuracy); each is compiled for
//! AVX-512, AVX2+FMA and the baseline target and dispatched at run time (see
//! [`isa`]). Most f32 functions have an f32 kernel of their own, faithfully
//! rounded (within 1 ULP, checked on all 2^32 inputs, ACCURACY.md): `exp`,
//! `tanh`, `sigmoid`, `log`, `log2`, `log10`, `log1p` and `softplus` compute
//! in f32 lanes (`single`: twice the lanes of f64), the trigonometric and
//! hyperbolic functions, their inverses, `exp2`, `expm1` and `erf` in f64
//! lanes with polynomials and reductions sized for an f32 result (`lean`).
//! The others (`log1mexp`, `erfc`) evaluate the f64 kernel on widened
//! inputs and round once. A table row names its f32 form: `widen` or
//! `(native kernel, AVX-512 group lanes)`.
//! Every variant is the same scalar kernel auto-vectorised (no hand-written
//! intrinsics), so all variants give the same bits.
//!
//! Map-reduce kernels (a map summed in the same loop, for fused
//! reductions) live in `fold` and are listed by [`fold_symbols`]; the plain
//! row and column passes of reductions (sums, dot, column updates) live in
//! `rowcol` and are listed by [`rowcol_symbols`]; paired functions (`f(x)`
//! and `f(-x)` from their shared work) live in `pair` and are listed by
//! [`pair_symbols`]. The gathers of strided inputs into contiguous blocks
//! for the linker's element-wise driver live in `strided`
//! ([`kiln_gather_64`], [`kiln_gather_32`]; called from Rust only, so
//! they are in no symbol list). The softmax family's lane
//! passes (one lane, or many short rows at once) live in `softmax`, a
//! safe Rust API for the linker only, and so does `convert`'s `f32` ↔
//! `f64` conversion of slices at full width.

mod activation;
mod common;
#[macro_use]
mod dispatch;
mod convert;
mod erf;
mod erf_table;
mod exp;
mod fold;
mod hyperbolic;
mod hypot;
mod inverse_trig;
mod lean;
mod log;
mod pair;
mod pow;
mod remainder;
mod rowcol;
mod single;
mod softmax;
mod source;
mod strided;
mod trig;

pub use convert::{kiln_narrow_f64_f32, kiln_widen_f32_f64, narrow_f64, widen_f32};
pub use dispatch::{detected_isa, isa, requested_isa, Isa, ISA_ENV};
pub use fold::{
    exp_shift_store_f64, extreme_f64, fold_symbols, kiln_exp_shift_store_f64, kiln_max_f64,
    kiln_min_f64, kiln_sum_exp_at_max_f64, kiln_sum_exp_shift_f64, sum_exp_at_max_f64,
    sum_exp_shift_f64,
};
pub use pair::{kiln_sigmoid_pair_f64, pair_symbols, sigmoid_pair_f64};
pub use rowcol::{
    column_sum_f64, count_finite_f64, dot_f64, kiln_dot_f64, kiln_scaled_rows_f64, kiln_sum_f64,
    rowcol_symbols, sum_f64,
};
pub use softmax::{
    kiln_softmax_short_rows_f64, lane_f64, short_rows_f64, split_lane_finish, split_lane_logsumexp,
    split_lane_max, split_lane_rescaled, split_lane_sum, LanePass, SHORT_ROW,
};
pub use source::{PRE_ADD, PRE_A_SCALAR, PRE_B_SCALAR, PRE_MUL, PRE_SUB};
pub use strided::{kiln_gather_32, kiln_gather_64};

/// The group map of a unary table entry: `lanes k` maps the scalar kernel
/// `k` lane by lane ([`dispatch::map_lanes`]); `staged k` calls `k` on the
/// whole group (a kernel written in stages, each a loop over the group, so
/// that each vectorised loop holds fewer live values: one loop over a long
/// kernel spills on AVX2's sixteen registers).
macro_rules! group_map {
    ($g:ident, lanes $k:path) => {
        // The kernel through an inlined closure: passed as a fn item, its
        // `Fn::call` shim was left out of line for large kernels (pow),
        // compiled without the variant's target features (mul_add became a
        // call to the C library's fma: 85 ns an element).
        super::dispatch::map_lanes(
            $g,
            #[inline(always)]
            |x| $k(x),
        )
    };
    ($g:ident, staged $k:path) => {
        $k($g)
    };
}

/// The group map of a binary table entry: `lanes k` maps the scalar kernel
/// `k` pair by pair ([`dispatch::map_lanes2`]); `staged k` calls `k` on the
/// whole group (see `group_map`). The f32 drivers always take the scalar
/// kernel.
macro_rules! bgroup_map {
    ($a:ident, $b:ident, lanes $k:path) => {
        // An inlined closure, as in `group_map`.
        super::dispatch::map_lanes2(
            $a,
            $b,
            #[inline(always)]
            |x, y| $k(x, y),
        )
    };
    ($a:ident, $b:ident, staged $k:path) => {
        $k($a, $b)
    };
}

/// The f32 driver call of a binary table entry: `(scalar k)` maps the
/// scalar f64 kernel `k` pair by pair over widened blocks
/// (`dispatch::binary_f32`); `group` widens groups of [`dispatch::LANES`]
/// pairs and runs the entry's f64 group map on them
/// (`dispatch::binary_f32_grouped`), for a staged kernel with a fixup.
/// Either way an f32 result is the f64 one rounded once.
macro_rules! bf32_map {
    ((scalar $k:path), $x:ident, $y:ident, $out:ident, $n:ident, $bkind:ident $bgroup:path) => {
        binary_f32($x, $y, $out, $n, #[inline(always)] |a, b| $k(a, b))
    };
    (group, $x:ident, $y:ident, $out:ident, $n:ident, $bkind:ident $bgroup:path) => {
        binary_f32_grouped($x, $y, $out, $n, #[inline(always)] |a, b| bgroup_map!(a, b, $bkind $bgroup))
    };
}

/// The f32 driver call of a unary table entry: `widen` evaluates the f64
/// group map on widened values and rounds once (`dispatch::unary_f32`);
/// `(native k, w)` maps the f32 group kernel `k` over f32 lanes
/// (`dispatch::unary_f32_native`, kernels in `single` and `lean`), in groups of
/// `w` lanes in the AVX-512 variants (`wide`) and of `single::LANES32`
/// in the others (`narrow`). `w` is 64 where four AVX-512 vectors per
/// group ran faster than two (`tanh`, `softplus`), else 32: with
/// AVX2's sixteen registers, 64 lanes made sigmoid and log1p slower.
macro_rules! f32_map {
    (widen, $x:expr, $out:ident, $n:ident, $kind:ident $kernel:path, $fix:expr, $width:ident) => {
        unary_f32($x, $out, $n, #[inline(always)] |g| group_map!(g, $kind $kernel), $fix)
    };
    ((native $k:path, $w:literal), $x:expr, $out:ident, $n:ident, $kind:ident $kernel:path, $fix:expr, wide) => {
        unary_f32_native::<$w>($x, $out, $n, #[inline(always)] |g| $k(g))
    };
    ((native $k:path, $w:literal), $x:expr, $out:ident, $n:ident, $kind:ident $kernel:path, $fix:expr, narrow) => {
        unary_f32_native::<{ super::single::LANES32 }>($x, $out, $n, #[inline(always)] |g| $k(g))
    };
}

/// Test hook body: the results of module `$m`'s baseline, AVX2 and AVX-512
/// variants `$base`, `$avx2`, `$avx512` on the input slices `[$x, ...]` (one
/// for a unary function, two for a binary one; all of the first's length),
/// for each variant the CPU has.
#[cfg(test)]
macro_rules! each_variant {
    ($m:ident, [$x:ident $(, $more:ident)*], $base:ident, $avx2:ident, $avx512:ident) => {{
        let mut outs = Vec::new();
        let mut o = vec![Default::default(); $x.len()];
        // SAFETY: slices of equal length.
        unsafe { $m::$base($x.as_ptr(), $($more.as_ptr(),)* o.as_mut_ptr(), $x.len()) };
        outs.push(o.clone());
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                // SAFETY: features checked; slices of equal length.
                unsafe { $m::$avx2($x.as_ptr(), $($more.as_ptr(),)* o.as_mut_ptr(), $x.len()) };
                outs.push(o.clone());
            }
            if isa() == Isa::Avx512 {
                // SAFETY: features checked; slices of equal length.
                unsafe { $m::$avx512($x.as_ptr(), $($more.as_ptr(),)* o.as_mut_ptr(), $x.len()) };
                outs.push(o.clone());
            }
        }
        outs
    }};
}

/// Whether a unary table entry's f32 form is native (see `f32_map`).
macro_rules! f32_is_native {
    (widen) => {
        false
    };
    ((native $k:path, $w:literal)) => {
        true
    };
}

/// The frame alignment of a unary function's AVX2 and AVX-512 variants
/// ([`dispatch::align_frame`]), by the function's module: every function's
/// but `expm1`'s and `erfc`'s, which ran slower in a realigned frame (AVX2,
/// `kiln bench` on 1e6 values, one thread, three alternated rounds: expm1
/// 2.65-2.70 → 4.38-4.53 ms, erfc 11.4-12.1 → 14.2-15.6). Both end on a
/// select that keeps the input (`x` for ±0 and NaN), which LLVM turns into
/// a masked store (`vmaskmovpd`) into the group, in place: its reload cannot
/// be forwarded from that store, and the realigned frame made that worse.
/// A fresh output array in `map_lanes` removes the masked store (and then
/// the realignment costs them nothing) but made the AVX-512 erfc slower
/// (BENCHMARKS.md, twenty-fourth session).
macro_rules! frame_for {
    (v_expm1) => {};
    (v_erfc) => {};
    ($m:ident) => {
        super::dispatch::align_frame()
    };
}

macro_rules! math_functions {
    (
        unary: [$(($name:literal, $m:ident, $kind:ident $kernel:path, $fix:expr, $f32:tt, $c64:ident, $c32:ident, $s64:ident, $s32:ident,
            $desc:literal, $ulp64:literal, $ulp32:literal)),* $(,)?]
        binary: [$(($bname:literal, $bm:ident, $bkind:ident $bgroup:path, $b32:tt, $bc64:ident, $bc32:ident, $bs64:ident, $bs32:ident,
            $bdesc:literal, $bulp64:literal, $bulp32:literal)),* $(,)?]
    ) => {
        $(
            mod $m {
                #[allow(unused_imports)]
                use super::dispatch::{unary_f32, unary_f32_native, unary_f64};
                use super::source::PreStage;
                #[allow(unused_imports)]
                use super::{activation, erf, exp, hyperbolic, inverse_trig, lean, log, single, trig};

                /// AVX-512 variant.
                ///
                /// # Safety
                /// CPU supports the features; pointer contract of `unary_f64`.
                #[cfg(target_arch = "x86_64")]
                #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
                pub(super) unsafe fn f64_avx512(x: *const f64, out: *mut f64, n: usize) {
                    frame_for!($m);
                    // SAFETY: forwarded caller contract.
                    unsafe { unary_f64(x, out, n, #[inline(always)] |g| group_map!(g, $kind $kernel), $fix) }
                }
                /// AVX2 variant.
                ///
                /// # Safety
                /// CPU supports the features; pointer contract of `unary_f64`.
                #[cfg(target_arch = "x86_64")]
                #[target_feature(enable = "avx2,fma")]
                pub(super) unsafe fn f64_avx2(x: *const f64, out: *mut f64, n: usize) {
                    frame_for!($m);
                    // SAFETY: forwarded caller contract.
                    unsafe { unary_f64(x, out, n, #[inline(always)] |g| group_map!(g, $kind $kernel), $fix) }
                }
                /// Baseline variant.
                ///
                /// # Safety
                /// Pointer contract of `unary_f64`.
                pub(super) unsafe fn f64_base(x: *const f64, out: *mut f64, n: usize) {
                    // SAFETY: forwarded caller contract.
                    unsafe { unary_f64(x, out, n, #[inline(always)] |g| group_map!(g, $kind $kernel), $fix) }
                }
                /// AVX-512 variant.
                ///
                /// # Safety
                /// CPU supports the features; pointer contract of `unary_f32`.
                #[cfg(target_arch = "x86_64")]
                #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
                pub(super) unsafe fn f32_avx512(x: *const f32, out: *mut f32, n: usize) {
                    frame_for!($m);
                    // SAFETY: forwarded caller contract.
                    unsafe { f32_map!($f32, x, out, n, $kind $kernel, $fix, wide) }
                }
                /// AVX2 variant.
                ///
                /// # Safety
                /// CPU supports the features; pointer contract of `unary_f32`.
                #[cfg(target_arch = "x86_64")]
                #[target_feature(enable = "avx2,fma")]
                pub(super) unsafe fn f32_avx2(x: *const f32, out: *mut f32, n: usize) {
                    frame_for!($m);
                    // SAFETY: forwarded caller contract.
                    unsafe { f32_map!($f32, x, out, n, $kind $kernel, $fix, narrow) }
                }
                /// Baseline variant.
                ///
                /// # Safety
                /// Pointer contract of `unary_f32`.
                pub(super) unsafe fn f32_base(x: *const f32, out: *mut f32, n: usize) {
                    // SAFETY: forwarded caller contract.
                    unsafe { f32_map!($f32, x, out, n, $kind $kernel, $fix, narrow) }
                }
                /// AVX-512 variant of the pre-staged f64 form.
                ///
                /// # Safety
                /// CPU supports the features; contract of `source::Source` for `pre`, `out` valid for `n` writes.
                #[cfg(target_arch = "x86_64")]
                #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
                unsafe fn pre_f64_avx512(pre: &PreStage<f64>, out: *mut f64, n: usize) {
                    frame_for!($m);
                    // SAFETY: forwarded caller contract.
                    unsafe { unary_f64(*pre, out, n, #[inline(always)] |g| group_map!(g, $kind $kernel), $fix) }
                }
                /// AVX2 variant of the pre-staged f64 form.
                ///
                /// # Safety
                /// CPU supports the features; contract of `source::Source` for `pre`, `out` valid for `n` writes.
                #[cfg(target_arch = "x86_64")]
                #[target_feature(enable = "avx2,fma")]
                unsafe fn pre_f64_avx2(pre: &PreStage<f64>, out: *mut f64, n: usize) {
                    frame_for!($m);
                    // SAFETY: forwarded caller contract.
                    unsafe { unary_f64(*pre, out, n, #[inline(always)] |g| group_map!(g, $kind $kernel), $fix) }
                }
                /// Baseline variant of the pre-staged f64 form.
                ///
                /// # Safety
                /// Contract of `source::Source` for `pre`, `out` valid for `n` writes.
                unsafe fn pre_f64_base(pre: &PreStage<f64>, out: *mut f64, n: usize) {
                    // SAFETY: forwarded caller contract.
                    unsafe { unary_f64(*pre, out, n, #[inline(always)] |g| group_map!(g, $kind $kernel), $fix) }
                }
                /// AVX-512 variant of the pre-staged f32 form.
                ///
                /// # Safety
                /// CPU supports the features; contract of `source::Source` for `pre`, `out` valid for `n` writes.
                #[cfg(target_arch = "x86_64")]
                #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
                unsafe fn pre_f32_avx512(pre: &PreStage<f32>, out: *mut f32, n: usize) {
                    frame_for!($m);
                    // SAFETY: forwarded caller contract.
                    unsafe { f32_map!($f32, *pre, out, n, $kind $kernel, $fix, wide) }
                }
                /// AVX2 variant of the pre-staged f32 form.
                ///
                /// # Safety
                /// CPU supports the features; contract of `source::Source` for `pre`, `out` valid for `n` writes.
                #[cfg(target_arch = "x86_64")]
                #[target_feature(enable = "avx2,fma")]
                unsafe fn pre_f32_avx2(pre: &PreStage<f32>, out: *mut f32, n: usize) {
                    frame_for!($m);
                    // SAFETY: forwarded caller contract.
                    unsafe { f32_map!($f32, *pre, out, n, $kind $kernel, $fix, narrow) }
                }
                /// Baseline variant of the pre-staged f32 form.
                ///
                /// # Safety
                /// Contract of `source::Source` for `pre`, `out` valid for `n` writes.
                unsafe fn pre_f32_base(pre: &PreStage<f32>, out: *mut f32, n: usize) {
                    // SAFETY: forwarded caller contract.
                    unsafe { f32_map!($f32, *pre, out, n, $kind $kernel, $fix, narrow) }
                }
                /// The pre-staged f64 entry point (`kiln_<name>_pre_f64` in
                /// `math_symbols`): `out[i] = f(a[i] ⊕ b[i])`, see `source`.
                ///
                /// # Safety
                /// An operand flagged scalar by `mode` must be valid for one
                /// read, an array operand for `n` reads; `out` for `n` writes,
                /// identical to an array operand or not overlapping it.
                pub(super) unsafe extern "C" fn pre_f64(a: *const f64, b: *const f64, out: *mut f64, n: usize, mode: u64) {
                    let pre = PreStage::new(a, b, mode);
                    // SAFETY: the pointer contract is the caller's; the AVX
                    // variants are only called when `isa()` detected the features.
                    unsafe {
                        match super::isa() {
                            #[cfg(target_arch = "x86_64")]
                            super::Isa::Avx512 => pre_f64_avx512(&pre, out, n),
                            #[cfg(target_arch = "x86_64")]
                            super::Isa::Avx2 => pre_f64_avx2(&pre, out, n),
                            _ => pre_f64_base(&pre, out, n),
                        }
                    }
                }
                /// The pre-staged f32 entry point (`kiln_<name>_pre_f32`),
                /// as [`pre_f64`]; the pre-stage rounds in f32.
                ///
                /// # Safety
                /// As for [`pre_f64`].
                pub(super) unsafe extern "C" fn pre_f32(a: *const f32, b: *const f32, out: *mut f32, n: usize, mode: u64) {
                    let pre = PreStage::new(a, b, mode);
                    // SAFETY: the pointer contract is the caller's; the AVX
                    // variants are only called when `isa()` detected the features.
                    unsafe {
                        match super::isa() {
                            #[cfg(target_arch = "x86_64")]
                            super::Isa::Avx512 => pre_f32_avx512(&pre, out, n),
                            #[cfg(target_arch = "x86_64")]
                            super::Isa::Avx2 => pre_f32_avx2(&pre, out, n),
                            _ => pre_f32_base(&pre, out, n),
                        }
                    }
                }
            }

            #[doc = concat!("Computes `", $desc, "` elementwise for `n` f64 values: `out[i] = ", $name, "(x[i])`.\n\n",
                "Measured max error: ", $ulp64, " ULP (see `ACCURACY.md`).\n\n",
                "# Safety\n`x` must be valid for `n` reads and `out` for `n` writes (both may be null when `n == 0`); ",
                "`out` may equal `x` (in place) but must not partially overlap it.")]
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $c64(x: *const f64, out: *mut f64, n: usize) {
                if n == 0 {
                    return;
                }
                // SAFETY: the pointer contract is the caller's; the AVX
                // variants are only called when `isa()` detected the features.
                unsafe {
                    match isa() {
                        #[cfg(target_arch = "x86_64")]
                        Isa::Avx512 => $m::f64_avx512(x, out, n),
                        #[cfg(target_arch = "x86_64")]
                        Isa::Avx2 => $m::f64_avx2(x, out, n),
                        _ => $m::f64_base(x, out, n),
                    }
                }
            }

            #[doc = concat!("Computes `", $desc, "` elementwise for `n` f32 values.\n\n",
                "Measured max error: ", $ulp32, " ULP (see `ACCURACY.md`).\n\n",
                "# Safety\nAs for the f64 version: `x` valid for `n` reads, `out` for `n` writes, `out == x` allowed.")]
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $c32(x: *const f32, out: *mut f32, n: usize) {
                if n == 0 {
                    return;
                }
                // SAFETY: as in the f64 version.
                unsafe {
                    match isa() {
                        #[cfg(target_arch = "x86_64")]
                        Isa::Avx512 => $m::f32_avx512(x, out, n),
                        #[cfg(target_arch = "x86_64")]
                        Isa::Avx2 => $m::f32_avx2(x, out, n),
                        _ => $m::f32_base(x, out, n),
                    }
                }
            }

            #[doc = concat!("Safe slice form: `out[i] = ", $name, "(x[i])` (", $desc, "), max error ", $ulp64, " ULP.\n\n",
                "# Panics\nIf `x.len() != out.len()`.")]
            pub fn $s64(x: &[f64], out: &mut [f64]) {
                assert_eq!(x.len(), out.len(), "input and output lengths differ");
                // SAFETY: both slices have `x.len()` elements and cannot overlap
                // (shared vs. exclusive borrow).
                unsafe { $c64(x.as_ptr(), out.as_mut_ptr(), x.len()) }
            }

            #[doc = concat!("Safe slice form: `out[i] = ", $name, "(x[i])` (", $desc, "), max error ", $ulp32, " ULP.\n\n",
                "# Panics\nIf `x.len() != out.len()`.")]
            pub fn $s32(x: &[f32], out: &mut [f32]) {
                assert_eq!(x.len(), out.len(), "input and output lengths differ");
                // SAFETY: as for the f64 slice form.
                unsafe { $c32(x.as_ptr(), out.as_mut_ptr(), x.len()) }
            }
        )*

        $(
            mod $bm {
                #[allow(unused_imports)]
                use super::dispatch::{binary_f32, binary_f32_grouped, binary_f64};
                #[allow(unused_imports)]
                use super::{activation, hypot, inverse_trig, pow, remainder};

                /// AVX-512 variant.
                ///
                /// # Safety
                /// CPU supports the features; pointer contract of `binary_f64`.
                #[cfg(target_arch = "x86_64")]
                #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
                pub(super) unsafe fn f64_avx512(x: *const f64, y: *const f64, out: *mut f64, n: usize) {
                    // SAFETY: forwarded caller contract.
                    unsafe { binary_f64(x, y, out, n, #[inline(always)] |a, b| bgroup_map!(a, b, $bkind $bgroup)) }
                }
                /// AVX2 variant.
                ///
                /// # Safety
                /// CPU supports the features; pointer contract of `binary_f64`.
                #[cfg(target_arch = "x86_64")]
                #[target_feature(enable = "avx2,fma")]
                pub(super) unsafe fn f64_avx2(x: *const f64, y: *const f64, out: *mut f64, n: usize) {
                    // SAFETY: forwarded caller contract.
                    unsafe { binary_f64(x, y, out, n, #[inline(always)] |a, b| bgroup_map!(a, b, $bkind $bgroup)) }
                }
                /// Baseline variant.
                ///
                /// # Safety
                /// Pointer contract of `binary_f64`.
                pub(super) unsafe fn f64_base(x: *const f64, y: *const f64, out: *mut f64, n: usize) {
                    // SAFETY: forwarded caller contract.
                    unsafe { binary_f64(x, y, out, n, #[inline(always)] |a, b| bgroup_map!(a, b, $bkind $bgroup)) }
                }
                /// AVX-512 variant.
                ///
                /// # Safety
                /// CPU supports the features; pointer contract of `binary_f32`.
                #[cfg(target_arch = "x86_64")]
                #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
                pub(super) unsafe fn f32_avx512(x: *const f32, y: *const f32, out: *mut f32, n: usize) {
                    // SAFETY: forwarded caller contract.
                    unsafe { bf32_map!($b32, x, y, out, n, $bkind $bgroup) }
                }
                /// AVX2 variant.
                ///
                /// # Safety
                /// CPU supports the features; pointer contract of `binary_f32`.
                #[cfg(target_arch = "x86_64")]
                #[target_feature(enable = "avx2,fma")]
                pub(super) unsafe fn f32_avx2(x: *const f32, y: *const f32, out: *mut f32, n: usize) {
                    // SAFETY: forwarded caller contract.
                    unsafe { bf32_map!($b32, x, y, out, n, $bkind $bgroup) }
                }
                /// Baseline variant.
                ///
                /// # Safety
                /// Pointer contract of `binary_f32`.
                pub(super) unsafe fn f32_base(x: *const f32, y: *const f32, out: *mut f32, n: usize) {
                    // SAFETY: forwarded caller contract.
                    unsafe { bf32_map!($b32, x, y, out, n, $bkind $bgroup) }
                }
            }

            #[doc = concat!("Computes `", $bdesc, "` elementwise for `n` f64 pairs: `out[i] = ", $bname, "(x[i], y[i])`.\n\n",
                "Measured max error: ", $bulp64, " ULP (see `ACCURACY.md`).\n\n",
                "# Safety\n`x`, `y` must be valid for `n` reads and `out` for `n` writes; ",
                "`out` may equal `x` and/or `y` but must not partially overlap them.")]
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $bc64(x: *const f64, y: *const f64, out: *mut f64, n: usize) {
                if n == 0 {
                    return;
                }
                // SAFETY: the pointer contract is the caller's; the AVX
                // variants are only called when `isa()` detected the features.
                unsafe {
                    match isa() {
                        #[cfg(target_arch = "x86_64")]
                        Isa::Avx512 => $bm::f64_avx512(x, y, out, n),
                        #[cfg(target_arch = "x86_64")]
                        Isa::Avx2 => $bm::f64_avx2(x, y, out, n),
                        _ => $bm::f64_base(x, y, out, n),
                    }
                }
            }

            #[doc = concat!("Computes `", $bdesc, "` elementwise for `n` f32 pairs (evaluated in f64, rounded once).\n\n",
                "Measured max error: ", $bulp32, " ULP (see `ACCURACY.md`).\n\n",
                "# Safety\nAs for the f64 version.")]
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $bc32(x: *const f32, y: *const f32, out: *mut f32, n: usize) {
                if n == 0 {
                    return;
                }
                // SAFETY: as in the f64 version.
                unsafe {
                    match isa() {
                        #[cfg(target_arch = "x86_64")]
                        Isa::Avx512 => $bm::f32_avx512(x, y, out, n),
                        #[cfg(target_arch = "x86_64")]
                        Isa::Avx2 => $bm::f32_avx2(x, y, out, n),
                        _ => $bm::f32_base(x, y, out, n),
                    }
                }
            }

            #[doc = concat!("Safe slice form: `out[i] = ", $bname, "(x[i], y[i])`, max error ", $bulp64, " ULP.\n\n",
                "# Panics\nIf the lengths differ.")]
            pub fn $bs64(x: &[f64], y: &[f64], out: &mut [f64]) {
                assert!(x.len() == out.len() && y.len() == out.len(), "lengths differ");
                // SAFETY: all three slices have `out.len()` elements; `out` is
                // exclusively borrowed so it cannot overlap the inputs.
                unsafe { $bc64(x.as_ptr(), y.as_ptr(), out.as_mut_ptr(), out.len()) }
            }

            #[doc = concat!("Safe slice form: `out[i] = ", $bname, "(x[i], y[i])`, max error ", $bulp32, " ULP.\n\n",
                "# Panics\nIf the lengths differ.")]
            pub fn $bs32(x: &[f32], y: &[f32], out: &mut [f32]) {
                assert!(x.len() == out.len() && y.len() == out.len(), "lengths differ");
                // SAFETY: as for the f64 slice form.
                unsafe { $bc32(x.as_ptr(), y.as_ptr(), out.as_mut_ptr(), out.len()) }
            }
        )*

        /// Every exported math entry point as (symbol name, address), for
        /// `JITBuilder::symbol`. Unary functions have the C signature
        /// `void(const T* x, T* out, size_t n)`, their pre-staged forms
        /// `kiln_<name>_pre_<dtype>` (not exported under that name, only
        /// listed here) `void(const T* a, const T* b, T* out, size_t n,
        /// uint64_t mode)` (see [`PRE_ADD`] and the other mode constants),
        /// and the binary ones `void(const T* x, const T* y, T* out, size_t n)`.
        pub fn math_symbols() -> Vec<(&'static str, *const u8)> {
            vec![
                $(
                    (stringify!($c64), $c64 as *const u8),
                    (stringify!($c32), $c32 as *const u8),
                    (concat!("kiln_", $name, "_pre_f64"), $m::pre_f64 as *const u8),
                    (concat!("kiln_", $name, "_pre_f32"), $m::pre_f32 as *const u8),
                )*
                $(
                    (stringify!($bc64), $bc64 as *const u8),
                    (stringify!($bc32), $bc32 as *const u8),
                )*
            ]
        }

        /// The unary functions whose f32 form is an f32 kernel of its own
        /// (modules `single` and `lean`) rather than the widened f64 kernel.
        pub fn native_f32_functions() -> Vec<&'static str> {
            let mut names = Vec::new();
            $(
                if f32_is_native!($f32) {
                    names.push($name);
                }
            )*
            names
        }

        /// Test hook: as [`all_variants_unary`], for the f32 forms.
        #[cfg(test)]
        pub(crate) fn all_variants_unary_f32(x: &[f32]) -> Vec<(&'static str, Vec<Vec<f32>>)> {
            vec![$(($name, each_variant!($m, [x], f32_base, f32_avx2, f32_avx512)),)*]
        }

        /// Test hook: runs every unary function with each ISA variant the CPU
        /// supports and returns, per function name, the results of each.
        #[cfg(test)]
        pub(crate) fn all_variants_unary(x: &[f64]) -> Vec<(&'static str, Vec<Vec<f64>>)> {
            vec![$(($name, each_variant!($m, [x], f64_base, f64_avx2, f64_avx512)),)*]
        }

        /// Test hook: runs every binary function on the pairs `(x[i], y[i])`
        /// with each ISA variant the CPU supports and returns, per function
        /// name, the results of each.
        #[cfg(test)]
        pub(crate) fn all_variants_binary(x: &[f64], y: &[f64]) -> Vec<(&'static str, Vec<Vec<f64>>)> {
            assert_eq!(x.len(), y.len());
            vec![$(($bname, each_variant!($bm, [x, y], f64_base, f64_avx2, f64_avx512)),)*]
        }
    };
}

math_functions! {
    unary: [
        ("exp", v_exp, lanes exp::exp_fast, Some(exp::EXP_FIXUP), (native single::exp_staged, 32), kiln_exp_f64, kiln_exp_f32, exp_f64, exp_f32, "e^x", "1", "1 (native f32 kernel, faithfully rounded; exhaustive)"),
        ("exp2", v_exp2, lanes exp::exp2, None, (native lean::exp2, 32), kiln_exp2_f64, kiln_exp2_f32, exp2_f64, exp2_f32, "2^x", "1", "1 (f32 kernel in f64 lanes, faithfully rounded; exhaustive)"),
        ("expm1", v_expm1, lanes exp::expm1, None, (native lean::expm1, 32), kiln_expm1_f64, kiln_expm1_f32, expm1_f64, expm1_f32, "e^x - 1", "1", "1 (f32 kernel in f64 lanes, faithfully rounded; exhaustive)"),
        ("log", v_log, staged log::log_staged, None, (native single::log_staged, 32), kiln_log_f64, kiln_log_f32, log_f64, log_f32, "ln x", "1", "1 (native f32 kernel, faithfully rounded; exhaustive)"),
        ("log2", v_log2, lanes log::log2, None, (native single::log2_staged, 32), kiln_log2_f64, kiln_log2_f32, log2_f64, log2_f32, "log2 x", "2", "1 (native f32 kernel, faithfully rounded; exhaustive)"),
        ("log10", v_log10, lanes log::log10, None, (native single::log10_staged, 32), kiln_log10_f64, kiln_log10_f32, log10_f64, log10_f32, "log10 x", "2", "1 (native f32 kernel, faithfully rounded; exhaustive)"),
        ("log1p", v_log1p, staged log::log1p_staged, None, (native single::log1p_staged, 32), kiln_log1p_f64, kiln_log1p_f32, log1p_f64, log1p_f32, "ln(1 + x)", "1", "1 (native f32 kernel, faithfully rounded; exhaustive)"),
        ("tanh", v_tanh, staged hyperbolic::tanh_staged, None, (native single::tanh_staged, 64), kiln_tanh_f64, kiln_tanh_f32, tanh_f64, tanh_f32, "tanh x", "2", "1 (native f32 kernel, faithfully rounded; exhaustive)"),
        ("sigmoid", v_sigmoid, staged activation::sigmoid_staged, Some(activation::SIGMOID_FIXUP), (native single::sigmoid_staged, 32), kiln_sigmoid_f64, kiln_sigmoid_f32, sigmoid_f64, sigmoid_f32,
            "1 / (1 + e^-x)", "2", "1 (native f32 kernel, faithfully rounded; exhaustive)"),
        ("softplus", v_softplus, staged activation::softplus_staged, Some(activation::SOFTPLUS_FIXUP), (native single::softplus_staged, 64), kiln_softplus_f64, kiln_softplus_f32, softplus_f64, softplus_f32,
            "ln(1 + e^x)", "2", "1 (native f32 kernel, faithfully rounded; exhaustive)"),
        ("log1mexp", v_log1mexp, lanes activation::log1mexp, Some(activation::LOG1MEXP_FIXUP), widen, kiln_log1mexp_f64, kiln_log1mexp_f32, log1mexp_f64, log1mexp_f32,
            "ln(1 - e^x) (x <= 0, NaN for x > 0)", "2", "0 measured (<= 1 by construction)"),
        ("sin", v_sin, lanes trig::sin, Some(trig::SIN_FIXUP), (native lean::sin, 32), kiln_sin_f64, kiln_sin_f32, sin_f64, sin_f32, "sin x", "1 (exact C-library path for |x| >= 1.3e7)", "1 (f32 kernel in f64 lanes, faithfully rounded; exhaustive)"),
        ("cos", v_cos, lanes trig::cos, Some(trig::COS_FIXUP), (native lean::cos, 32), kiln_cos_f64, kiln_cos_f32, cos_f64, cos_f32, "cos x", "1 (exact C-library path for |x| >= 1.3e7)", "1 (f32 kernel in f64 lanes, faithfully rounded; exhaustive)"),
        ("tan", v_tan, lanes trig::tan, Some(trig::TAN_FIXUP), (native lean::tan, 32), kiln_tan_f64, kiln_tan_f32, tan_f64, tan_f32, "tan x", "3 (exact C-library path for |x| >= 1.3e7)", "1 (f32 kernel in f64 lanes, faithfully rounded; exhaustive)"),
        ("arcsin", v_asin, lanes inverse_trig::asin, None, (native lean::arcsin, 32), kiln_arcsin_f64, kiln_arcsin_f32, arcsin_f64, arcsin_f32, "arcsin x", "3", "1 (f32 kernel in f64 lanes, faithfully rounded; exhaustive)"),
        ("arccos", v_acos, lanes inverse_trig::acos, None, (native lean::arccos, 32), kiln_arccos_f64, kiln_arccos_f32, arccos_f64, arccos_f32, "arccos x", "3", "1 (f32 kernel in f64 lanes, faithfully rounded; exhaustive)"),
        ("arctan", v_atan, lanes inverse_trig::atan, None, (native lean::arctan, 32), kiln_arctan_f64, kiln_arctan_f32, arctan_f64, arctan_f32, "arctan x", "2", "1 (f32 kernel in f64 lanes, faithfully rounded; exhaustive)"),
        ("sinh", v_sinh, lanes hyperbolic::sinh, None, (native lean::sinh, 32), kiln_sinh_f64, kiln_sinh_f32, sinh_f64, sinh_f32, "sinh x", "2", "1 (f32 kernel in f64 lanes, faithfully rounded; exhaustive)"),
        ("cosh", v_cosh, lanes hyperbolic::cosh, None, (native lean::cosh, 32), kiln_cosh_f64, kiln_cosh_f32, cosh_f64, cosh_f32, "cosh x", "2", "1 (f32 kernel in f64 lanes, faithfully rounded; exhaustive)"),
        ("arctanh", v_atanh, lanes hyperbolic::atanh, None, (native lean::arctanh, 32), kiln_arctanh_f64, kiln_arctanh_f32, arctanh_f64, arctanh_f32, "arctanh x", "3", "1 (f32 kernel in f64 lanes, faithfully rounded; exhaustive)"),
        ("arcsinh", v_asinh, lanes hyperbolic::asinh, None, (native lean::arcsinh, 32), kiln_arcsinh_f64, kiln_arcsinh_f32, arcsinh_f64, arcsinh_f32, "arcsinh x", "2", "1 (f32 kernel in f64 lanes, faithfully rounded; exhaustive)"),
        ("arccosh", v_acosh, lanes hyperbolic::acosh, None, (native lean::arccosh, 32), kiln_arccosh_f64, kiln_arccosh_f32, arccosh_f64, arccosh_f32, "arccosh x", "3", "1 (f32 kernel in f64 lanes, faithfully rounded; exhaustive)"),
        ("erf", v_erf, lanes erf::erf, None, (native lean::erf, 32), kiln_erf_f64, kiln_erf_f32, erf_f64, erf_f32, "erf x", "2", "1 (f32 kernel in f64 lanes, faithfully rounded; exhaustive)"),
        ("erfc", v_erfc, lanes erf::erfc, Some(erf::ERFC_FIXUP), widen, kiln_erfc_f64, kiln_erfc_f32, erfc_f64, erfc_f32, "1 - erf x", "6", "0 measured (<= 1 by construction)"),
    ]
    binary: [
        ("pow", v_pow, lanes pow::pow, (scalar pow::pow_f32_kernel), kiln_pow_f64, kiln_pow_f32, pow_f64, pow_f32, "x^y", "1", "1 (f64 log and exp, faithful after rounding)"),
        ("arctan2", v_atan2, lanes inverse_trig::atan2, (scalar inverse_trig::atan2), kiln_arctan2_f64, kiln_arctan2_f32, arctan2_f64, arctan2_f32,
            "atan2(x, y) (the angle of the point (y, x))", "2", "0 measured (<= 1 by construction)"),
        ("hypot", v_hypot, lanes hypot::hypot, (scalar hypot::hypot), kiln_hypot_f64, kiln_hypot_f32, hypot_f64, hypot_f32,
            "sqrt(x² + y²) without intermediate overflow", "1", "0 measured (<= 1 by construction)"),
        ("sigmoid_binary_crossentropy", v_sigmoid_xent,
            staged activation::sigmoid_binary_crossentropy_staged, (scalar activation::sigmoid_binary_crossentropy),
            kiln_sigmoid_binary_crossentropy_f64, kiln_sigmoid_binary_crossentropy_f32,
            sigmoid_binary_crossentropy_f64, sigmoid_binary_crossentropy_f32,
            "y·softplus(-x) + (1-y)·softplus(x) (x a logit, y its target)", "2", "0 measured (<= 1 by construction)"),
        ("fmod", v_fmod, staged remainder::fmod_staged, group, kiln_fmod_f64, kiln_fmod_f32, fmod_f64, fmod_f32,
            "C's fmod(x, y), the truncated remainder (sign of x)", "0", "0"),
        ("mod", v_mod, staged remainder::mod_staged, group, kiln_mod_f64, kiln_mod_f32, mod_f64, mod_f32,
            "numpy's remainder x % y, the floored remainder (sign of y)", "0", "0"),
        ("floor_divide", v_floor_divide, staged remainder::floor_divide_staged, group,
            kiln_floor_divide_f64, kiln_floor_divide_f32, floor_divide_f64, floor_divide_f32,
            "numpy's floor division x // y (the quotient of its divmod)", "0", "0"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asserts that every variant's results (`outs[1..]`) have the bits of
    /// the first's.
    fn assert_same_bits<T: Copy + std::fmt::Display>(
        name: &str,
        x: &[T],
        outs: &[Vec<T>],
        bits: impl Fn(T) -> u64,
    ) {
        for o in &outs[1..] {
            for (i, (&a, &b)) in outs[0].iter().zip(o).enumerate() {
                assert!(bits(a) == bits(b), "{name}({}) differs: {a} vs {b}", x[i]);
            }
        }
    }

    /// The special inputs of the variant tests: signed zeros, infinities,
    /// NaNs with a sign and payloads (every variant must propagate the same
    /// NaN: tanh's reduction once made a payload's low bits an infinite 2^k
    /// and flipped a NaN's sign on one ISA only), subnormals, magnitudes at
    /// both ends of the range.
    const VARIANT_SPECIALS: [f64; 15] = [
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7FF8_0000_0000_0FFF),
        f64::from_bits(0xFFF8_0000_0000_0123),
        5e-324,
        1e-310,
        -1e-300,
        1e300,
        f64::MAX,
        700.0,
        -0.5,
    ];

    #[test]
    fn variants_agree_bitwise() {
        let mut x: Vec<f64> = (0..1000).map(|i| (i as f64 - 500.0) * 0.037).collect();
        x.extend(VARIANT_SPECIALS);
        for (name, outs) in all_variants_unary(&x) {
            assert_same_bits(name, &x, &outs, f64::to_bits);
        }
    }

    /// The binary functions give the same bits in every ISA variant, on all
    /// pairs of ordinary values and [`VARIANT_SPECIALS`].
    #[test]
    fn binary_variants_agree_bitwise() {
        let mut vals: Vec<f64> = (0..40).map(|i| (i as f64 - 20.0) * 0.37).collect();
        vals.extend(VARIANT_SPECIALS);
        let x: Vec<f64> = vals
            .iter()
            .flat_map(|&a| vals.iter().map(move |_| a))
            .collect();
        let y: Vec<f64> = vals.iter().flat_map(|_| vals.iter().copied()).collect();
        for (name, outs) in all_variants_binary(&x, &y) {
            for o in &outs[1..] {
                for (i, (&a, &b)) in outs[0].iter().zip(o).enumerate() {
                    assert!(
                        a.to_bits() == b.to_bits(),
                        "{name}({}, {}) differs: {a} vs {b}",
                        x[i],
                        y[i]
                    );
                }
            }
        }
    }

    /// The f32 forms, native kernels included, give the same bits in every
    /// ISA variant (lengths not a multiple of the group, so the padded tail
    /// runs too).
    #[test]
    fn f32_variants_agree_bitwise() {
        let mut x: Vec<f32> = (0..1001).map(|i| (i as f32 - 500.0) * 0.21).collect();
        x.extend([
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1e-40,
            88.7,
            -103.5,
            0.625,
        ]);
        for (name, outs) in all_variants_unary_f32(&x) {
            assert_same_bits(name, &x, &outs, |v: f32| u64::from(v.to_bits()));
        }
    }

    /// The symbol `name`'s address in [`math_symbols`].
    fn symbol(name: &str) -> *const u8 {
        let s = math_symbols();
        s.iter().find(|(n, _)| *n == name).expect("listed").1
    }

    /// Every unary function's pre-staged entry gives the bits of its plain
    /// entry on the staged values `a ⊕ b`, for each operation, with either
    /// operand a scalar, in place, and over whole groups and a partial
    /// last one.
    #[test]
    fn pre_staged_entries_match_plain_ones() {
        type Plain<T> = unsafe extern "C" fn(*const T, *mut T, usize);
        type Pre<T> = unsafe extern "C" fn(*const T, *const T, *mut T, usize, u64);
        // 18 groups of 16 (9 of 32 for the native f32 kernels) and a
        // partial group of 12.
        let n = 300;
        let a: Vec<f64> = (0..n).map(|i| (i as f64 - 150.0) * 0.021).collect();
        let b: Vec<f64> = (0..n).map(|i| 0.3 + (i as f64 * 0.7).sin()).collect();
        let (a32, b32): (Vec<f32>, Vec<f32>) = (
            a.iter().map(|&v| v as f32).collect(),
            b.iter().map(|&v| v as f32).collect(),
        );
        type Op = (u64, fn(f64, f64) -> f64);
        let ops: [Op; 3] = [
            (PRE_ADD, |x, y| x + y),
            (PRE_SUB, |x, y| x - y),
            (PRE_MUL, |x, y| x * y),
        ];
        let ops32: [fn(f32, f32) -> f32; 3] = [|x, y| x + y, |x, y| x - y, |x, y| x * y];
        let names: Vec<&str> = math_symbols()
            .iter()
            .filter_map(|(s, _)| s.strip_suffix("_pre_f64"))
            .collect();
        assert_eq!(names.len(), 24);
        for name in names {
            // SAFETY: the listed addresses are functions of these signatures
            // (see `math_symbols`).
            let (plain, pre, plain32, pre32) = unsafe {
                (
                    std::mem::transmute::<*const u8, Plain<f64>>(symbol(&format!("{name}_f64"))),
                    std::mem::transmute::<*const u8, Pre<f64>>(symbol(&format!("{name}_pre_f64"))),
                    std::mem::transmute::<*const u8, Plain<f32>>(symbol(&format!("{name}_f32"))),
                    std::mem::transmute::<*const u8, Pre<f32>>(symbol(&format!("{name}_pre_f32"))),
                )
            };
            for (k, &(op, f)) in ops.iter().enumerate() {
                for scalar in [0, PRE_A_SCALAR, PRE_B_SCALAR] {
                    let at = |v: &[f64], i: usize, flag| if scalar == flag { v[0] } else { v[i] };
                    let staged: Vec<f64> = (0..n)
                        .map(|i| f(at(&a, i, PRE_A_SCALAR), at(&b, i, PRE_B_SCALAR)))
                        .collect();
                    let mut want = vec![0.0; n];
                    let mut got = vec![0.0; n];
                    // SAFETY: arrays of n elements; a scalar operand reads element 0.
                    unsafe {
                        plain(staged.as_ptr(), want.as_mut_ptr(), n);
                        pre(a.as_ptr(), b.as_ptr(), got.as_mut_ptr(), n, op | scalar);
                    }
                    let same = |x: &[f64], y: &[f64]| {
                        x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
                    };
                    assert!(same(&want, &got), "{name} mode {}", op | scalar);
                    if scalar != PRE_A_SCALAR {
                        // In place: the output is operand a.
                        let mut inplace = a.clone();
                        // SAFETY: as above, out identical to a.
                        unsafe {
                            pre(
                                inplace.as_ptr(),
                                b.as_ptr(),
                                inplace.as_mut_ptr(),
                                n,
                                op | scalar,
                            )
                        };
                        assert!(
                            same(&want, &inplace),
                            "{name} mode {} in place",
                            op | scalar
                        );
                    }
                    let at32 = |v: &[f32], i: usize, flag| if scalar == flag { v[0] } else { v[i] };
                    let staged32: Vec<f32> = (0..n)
                        .map(|i| ops32[k](at32(&a32, i, PRE_A_SCALAR), at32(&b32, i, PRE_B_SCALAR)))
                        .collect();
                    let mut want32 = vec![0.0f32; n];
                    let mut got32 = vec![0.0f32; n];
                    // SAFETY: as above.
                    unsafe {
                        plain32(staged32.as_ptr(), want32.as_mut_ptr(), n);
                        pre32(
                            a32.as_ptr(),
                            b32.as_ptr(),
                            got32.as_mut_ptr(),
                            n,
                            op | scalar,
                        );
                    }
                    assert!(
                        want32
                            .iter()
                            .zip(&got32)
                            .all(|(p, q)| p.to_bits() == q.to_bits()),
                        "{name} f32 mode {}",
                        op | scalar
                    );
                }
            }
        }
    }

    #[test]
    fn symbols_listed() {
        let s = math_symbols();
        // 24 unary functions (plain and pre-staged) and 7 binary ones, f64
        // and f32 each.
        assert_eq!(s.len(), 110);
        assert!(s.iter().any(|(n, _)| *n == "kiln_floor_divide_f32"));
        assert!(s.iter().any(|(n, _)| *n == "kiln_tanh_pre_f32"));
        assert!(s
            .iter()
            .any(|(n, _)| *n == "kiln_sigmoid_binary_crossentropy_f32"));
        assert!(s.iter().any(|(n, _)| *n == "kiln_pow_f32"));
        assert!(s.iter().any(|(n, _)| *n == "kiln_arctan2_f64"));
        assert!(s.iter().any(|(n, _)| *n == "kiln_hypot_f32"));
        assert!(s.iter().all(|(_, p)| !p.is_null()));
    }
}
