//! The linker: compiles an (already rewritten) FunctionGraph into a
//! callable [`Function`] backed by Cranelift-generated native code.
//!
//! Processing order: [`compile`] schedules the graph and numbers its
//! variables into slots (`plan`), lowers every node (`compile`): element-wise
//! ops and Composites to kernels (`elemwise`, `scalar_lower`, with math
//! calls resolved in `mathcalls`), reductions to kernels (`reduce`), views
//! and shapes to metadata steps, Dot and Gemm to the runtime GEMM, copies
//! to the Rust strided-copy kernels of `copy`; all kernels of one
//! Function go into one JIT module (`jit`), which the compile cache (`cache`)
//! shares between structurally identical graphs. A call (`function`) runs
//! the plan with call-local buffers (`buffer`, `exec`).

pub mod buffer;
pub mod cache;
pub mod compile;
pub mod copy;
pub mod elemwise;
pub mod exec;
pub mod function;
pub mod jit;
pub mod mathcalls;
pub mod plan;
pub mod reduce;
pub mod scalar_lower;

pub use compile::CompileProfile;
pub use exec::ParallelOptions;
pub use function::{Arg, ArgMut, Function, RunProfile};
pub use jit::CodegenOptions;
pub use plan::Lowering;

use crate::error::Result;
use crate::graph::FunctionGraph;

/// Options of [`compile`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// Code generation settings.
    pub codegen: CodegenOptions,
    /// When to split kernels over threads.
    pub parallel: ParallelOptions,
    /// Bypass the compile cache.
    pub no_cache: bool,
}

/// Compiles `fg` for the host CPU.
pub fn compile(fg: &FunctionGraph, opts: &CompileOptions) -> Result<Function> {
    cache::compile_cached(fg, opts)
}

/// Sets the number of threads kernels are split over (0: the number of cores).
pub fn set_num_threads(n: usize) {
    kiln_runtime::parallel::set_num_threads(n);
}
