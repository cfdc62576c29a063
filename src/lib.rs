//! kiln: a JIT compiler for tensor expressions.
//!
//! Users build typed expression graphs ([`tensor`](mod@tensor); dtypes, tensor types and
//! values in [`types`]), which a [`graph::FunctionGraph`] imports; the
//! rewriting framework ([`rewriting`]) and the rewrite library
//! ([`rewrites`], which assembles the optdb) transform them, and the linker
//! lowers the result to Cranelift IR for the host CPU. The reference
//! evaluator ([`eval`]) is the oracle for every test.
//!
//! See `ARCHITECTURE.md` for the folders in processing order.

pub mod cli;
pub mod error;
pub mod eval;
pub mod expr;
pub mod function;
pub mod gradient;
pub mod graph;
pub mod linker;
pub mod ops;
pub mod rewrites;
pub mod rewriting;
pub mod tensor;
pub mod types;
pub mod workloads;

pub use error::{Error, Result};
pub use function::{function, CompiledFunction, FunctionBuilder};
pub use gradient::{grad, hessian, jacobian, jvp, vjp};
pub use graph::{DType, FunctionGraph, TensorType, Value};
pub use ops::{Op, ReduceOp, ScalarOp};
pub use tensor::*;
