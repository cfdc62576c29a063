//! Code generation: the Cranelift IR of every JIT kernel and the JIT
//! module they are linked into. `elemwise` builds element-wise kernels
//! (scalar, vector and block-wise paths), `reduce` and `fused` reduction
//! kernels, from the scalar lowering of `scalar` and the math callees of
//! `mathcalls`; `hoist` moves the part of a program that depends on
//! one-element inputs only into the kernel's prologue; `jit` owns the
//! module, its ISA and its symbols, `overlap` the generation of kernels
//! while later ones are built, and `tier` the background generation of the
//! second tier's code.
//!
//! Invariants: every kernel has the ABI `extern "C" fn(ptrs: *const *mut
//! u8, strides: *const isize, n: usize)` (`exec::drive::KernelFn`); no
//! access to operand memory is marked aligned (operands are only
//! element-aligned, see `scalar::OPERAND`); every callee a kernel imports
//! is one of `mathcalls::symbols`.

pub mod elemwise;
pub mod fused;
pub(crate) mod hoist;
pub mod jit;
pub mod mathcalls;
mod overlap;
pub mod reduce;
pub mod scalar;
mod tier;
