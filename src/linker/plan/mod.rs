//! The plan: a scheduled program over dense *slots* (one per variable),
//! independent of the graph's ids so that structurally identical graphs
//! share a plan. `schedule` orders the nodes and numbers the slots,
//! `step` describes what each step does (one variant per op family, built
//! by `lower`, run by `exec`), `epilogue` merges a matrix product into the
//! one element-wise step that reads it, `memory` decides which slots share a buffer,
//! when buffers are released and where `call_into` may write.
//!
//! Slots: the graph inputs first (in order), then constants, then node
//! outputs in schedule order. Kernels are referenced by index into the
//! Function's `JitCode`.
//!
//! Memory plan: the graph is the single source of truth for buffer sharing.
//! A node's `view_map` (DimShuffle, Reshape) makes its output live in its
//! input's buffer; its `destroy_map` (an Elemwise, Composite or Gemm node
//! made inplace by the inplace passes) makes the output overwrite the destroyed
//! input's buffer. Every other node output gets a buffer of its own: no step
//! writes into the buffer of a live variable unless a `destroy_map` says so
//! (released buffers go back to the Function's pool, which serves later
//! allocations of this call or the next). Slots that share a buffer
//! form one *buffer group* (named by its root, the slot that owns the
//! memory), and `memory::liveness` releases a group after the last step that uses
//! or defines any of its slots, so a root outlives all its views. Groups
//! holding a graph output are never released. The schedule respects the
//! DestroyHandler's orderings (see `schedule::schedule`), so every other
//! reader of a destroyed root runs before its destroyer.
//!
//! Output destinations: for `Function::call_into`, each graph output may
//! name the root slot of its group (`memory::output_destinations`) when the output
//! is that root or reached from it through `destroy_map`s only (never a
//! view): such an output is the whole of its root's buffer, so the step
//! allocating the root may place it in the caller's array instead.

pub mod epilogue;
pub mod memory;
pub mod schedule;
pub mod step;

use std::sync::Arc;

pub use step::Slot;
use step::Step;

use crate::graph::{DType, TensorType, Value};

/// How a node was lowered (for the compile profile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lowering {
    /// A JIT-compiled Cranelift kernel.
    Jit,
    /// A call into kiln-runtime (GEMM).
    Runtime,
    /// Native Rust code in the executor (integer dot).
    Native,
    /// No computation: a view or shape metadata.
    Metadata,
    /// Fell back to the reference `perform`.
    Fallback,
}

/// A scheduled, slot-based program.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Number of slots.
    pub n_slots: usize,
    /// Declared input types and names.
    pub inputs: Vec<(TensorType, Option<String>)>,
    /// Positions of the inputs some step overwrites (inputs declared mutable
    /// and destroyed, directly or through a view, by an inplace node).
    pub destroyed_inputs: Vec<usize>,
    /// Constant slots and values.
    pub consts: Vec<(Slot, Arc<Value>)>,
    /// Steps with the display name of their node and how it was lowered.
    pub steps: Vec<(Step, String, Lowering)>,
    /// Slots released after each step.
    pub release: Vec<Vec<Slot>>,
    /// Output slots.
    pub outputs: Vec<Slot>,
    /// Output dtypes.
    pub output_dtypes: Vec<DType>,
    /// Per output, the slot whose buffer may be the caller's array in
    /// `call_into` (see [`memory::output_destinations`]).
    pub output_dests: Vec<Option<Slot>>,
}
