//! The linker: compiles an (already rewritten) FunctionGraph into a
//! callable [`Function`] backed by Cranelift-generated native code.
//!
//! Rooms, in processing order:
//! 1. `cache` — the entry point: reuses the module of an identical graph;
//! 2. `compile` — drives one compilation through the rooms below;
//! 3. `plan` — the schedule and slot numbering (`plan::schedule`), the
//!    step of each op family (`plan::step`), the memory plan
//!    (`plan::memory`);
//! 4. `lower` — one file per op family turning a node into its step and
//!    requesting its kernels;
//! 5. `codegen` — Cranelift IR of the kernels (`elemwise`, `reduce`,
//!    `fused`, on `scalar` and `mathcalls`) and the JIT module (`jit`);
//! 6. `exec` — one call: its state, the kernel drivers, copies, run-time
//!    broadcasting, and one executor per op family;
//! 7. `function` — the callable [`Function`] and its arguments.
//!
//! `buffer` (run-time arrays and the buffer pool) and `accum` (reduction
//! accumulators) are shared below them. Imports only go from a room to
//! rooms listed before it in the dependency order
//! `accum, buffer < codegen < plan < lower < compile < exec < function < cache`
//! (no two files or folders import each other).

pub mod accum;
pub mod buffer;
pub mod cache;
pub mod codegen;
pub mod compile;
pub mod exec;
pub mod function;
pub mod lower;
pub mod plan;

pub use accum::Modes;
pub use cache::CompileOptions;
pub use codegen::jit::{CodegenOptions, Tiering};
pub use codegen::mathcalls;
pub use compile::CompileProfile;
pub use exec::ParallelOptions;
pub use function::{Arg, ArgMut, Function, RunProfile};
pub use plan::Lowering;

use crate::error::Result;
use crate::graph::FunctionGraph;

/// Compiles `fg` for the host CPU.
pub fn compile(fg: &FunctionGraph, opts: &CompileOptions) -> Result<Function> {
    cache::compile_cached(fg, opts)
}

/// Sets the number of threads kernels are split over (0: the number of cores).
pub fn set_num_threads(n: usize) {
    kiln_runtime::parallel::set_num_threads(n);
}
