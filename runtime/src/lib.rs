//! kiln-runtime: the support library JIT-compiled kiln kernels call into.
//!
//! - [`math`]: block-wise vectorised elementwise math (exp/log family,
//!   trigonometric, hyperbolic, erf, activations, pow) for f64 and f32 with
//!   run-time CPU dispatch (AVX-512 / AVX2 / baseline) and `extern "C"`
//!   entry points listed by [`math::math_symbols`].
//! - [`gemm`]: strided GEMM `C = alpha·A·B + beta·C` for f64 / f32.
//! - [`mem`]: transparent-huge-page advice for large buffers, non-temporal
//!   (streaming) copies, and cache prefetch hints.
//! - [`operands`]: checks kernels run on their own stride arrays.
//! - [`clock`]: a cheap tick counter for profiles of many short calls.
//! - [`parallel`]: a contiguous-chunk parallel-for over a resizable thread
//!   pool, with an `extern "C"` form that never unwinds into its caller.
//!
//! The crate depends on neither Cranelift nor the kiln graph; JIT code
//! reaches it only through the `kiln_*` `extern "C"` functions, whose names
//! and addresses [`symbols`] lists.

pub mod clock;
pub mod gemm;
pub mod math;
pub mod mem;
pub mod operands;
pub mod parallel;

/// Every `extern "C"` entry point of the runtime (math, GEMM, parallel
/// launcher) as (symbol name, address), ready for `JITBuilder::symbol`.
pub fn symbols() -> Vec<(&'static str, *const u8)> {
    let mut s = math::math_symbols();
    s.extend(math::fold_symbols());
    s.extend(math::rowcol_symbols());
    s.extend(math::pair_symbols());
    s.extend(gemm::gemm_symbols());
    s.extend(parallel::parallel_symbols());
    s.extend(mem::mem_symbols());
    s.extend(operands::operand_symbols());
    s
}
