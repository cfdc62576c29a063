//! Scheduling and memory planning: turns a FunctionGraph into a [`Plan`],
//! a list of [`Step`]s over dense *slots* (one per variable), independent
//! of the graph's ids so that structurally identical graphs share a plan.
//!
//! Slots: the graph inputs first (in order), then constants, then node
//! outputs in schedule order. Liveness is computed here: `release[s]` lists
//! the slots whose last use is step `s` (graph outputs are never released),
//! so each intermediate buffer lives from its producing step to its last
//! use, and may then be reused in place by that step (see `exec`).
//! Kernels are referenced by index into the Function's `JitCode`.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::graph::{DType, FunctionGraph, NodeId, TensorType, Value, VarId};
use crate::ops::{CustomOp, ReduceOp};

/// A slot index.
pub type Slot = usize;

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

/// One step of a plan.
#[derive(Debug, Clone)]
pub enum Step {
    /// Element-wise kernel over the broadcast shape.
    Elemwise {
        /// Kernel index.
        kernel: usize,
        /// Array operands (size-1 constants are inlined into the kernel).
        inputs: Vec<Slot>,
        /// Per input, per dimension: statically broadcastable.
        bcast: Vec<Vec<bool>>,
        /// Output slots and dtypes.
        outputs: Vec<(Slot, DType)>,
        /// Descriptions of the inputs for error messages.
        descs: Vec<String>,
    },
    /// A reduction.
    Reduce {
        /// Kernel index.
        kernel: usize,
        /// Cast kernel from the accumulator dtype to the output dtype, if they differ.
        cast: Option<usize>,
        /// The reduction.
        op: ReduceOp,
        /// Reduced axes (sorted).
        axes: Vec<usize>,
        /// Input slot.
        input: Slot,
        /// Output slot.
        output: Slot,
        /// Accumulator dtype.
        acc: DType,
        /// Output dtype.
        out: DType,
    },
    /// A reduction of an element-wise pre-map in one pass (`FusedReduce`).
    FusedReduce {
        /// Kernel index (accumulator operand first, then the inputs).
        kernel: usize,
        /// For a reduction over every axis: the plain reduction kernel on
        /// the accumulator dtype, which combines the partials of a chunked
        /// (parallel) run.
        combine: Option<usize>,
        /// Cast kernel from the accumulator dtype to the output dtype, if they differ.
        cast: Option<usize>,
        /// The reduction.
        op: ReduceOp,
        /// Reduced axes (sorted).
        axes: Vec<usize>,
        /// Array operands of the pre-map (size-1 constants are inlined).
        inputs: Vec<Slot>,
        /// Per input, per dimension: statically broadcastable.
        bcast: Vec<Vec<bool>>,
        /// Descriptions of the inputs for error messages.
        descs: Vec<String>,
        /// Output slot.
        output: Slot,
        /// Accumulator dtype.
        acc: DType,
        /// Output dtype.
        out: DType,
    },
    /// A DimShuffle view.
    DimShuffle {
        /// Input slot.
        input: Slot,
        /// Output slot.
        output: Slot,
        /// New order.
        new_order: Vec<Option<usize>>,
    },
    /// A Reshape view (copying non-contiguous inputs first).
    Reshape {
        /// Input slot.
        input: Slot,
        /// Shape slot.
        shape: Slot,
        /// Output slot.
        output: Slot,
        /// Copy kernel for the input dtype.
        copy: usize,
    },
    /// Broadcast a value to a run-time shape.
    Alloc {
        /// Value slot.
        value: Slot,
        /// Scalar dimension slots.
        dims: Vec<Slot>,
        /// Output slot.
        output: Slot,
        /// Copy kernel for the dtype.
        copy: usize,
    },
    /// Matrix product.
    Dot {
        /// Operand slots.
        a: Slot,
        /// Operand slots.
        b: Slot,
        /// Cast kernels bringing each operand to the output dtype, if needed.
        casts: [Option<usize>; 2],
        /// Output slot.
        output: Slot,
        /// Output dtype.
        dtype: DType,
    },
    /// The shape vector.
    Shape {
        /// Input slot.
        input: Slot,
        /// Output slot.
        output: Slot,
    },
    /// One dimension of the shape.
    ShapeI {
        /// Input slot.
        input: Slot,
        /// Dimension.
        dim: usize,
        /// Output slot.
        output: Slot,
    },
    /// A user op run by its reference `perform`.
    Custom {
        /// The op.
        op: Arc<dyn CustomOp>,
        /// Input slots.
        inputs: Vec<Slot>,
        /// Output slots.
        outputs: Vec<Slot>,
    },
}

/// A scheduled, slot-based program.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Number of slots.
    pub n_slots: usize,
    /// Declared input types and names.
    pub inputs: Vec<(TensorType, Option<String>)>,
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
    /// Copy kernel per dtype (index by `DType as usize` order of `DType::ALL`).
    pub copy: FxHashMap<DType, usize>,
}

/// Slot numbering of a graph under a schedule.
pub struct Slots {
    /// Slot of each variable.
    pub map: FxHashMap<VarId, Slot>,
    /// Constant variables in slot order.
    pub consts: Vec<VarId>,
    /// Total.
    pub n: usize,
}

/// Numbers the variables of `fg` for the schedule `order`.
pub fn number_slots(fg: &FunctionGraph, order: &[NodeId]) -> Slots {
    let mut map = FxHashMap::default();
    let mut n = 0;
    for &v in fg.inputs() {
        map.entry(v).or_insert_with(|| {
            n += 1;
            n - 1
        });
    }
    let mut consts = Vec::new();
    let mut visit_const = |v: VarId, map: &mut FxHashMap<VarId, Slot>, n: &mut usize| {
        if fg.var(v).is_constant() && !map.contains_key(&v) {
            map.insert(v, *n);
            *n += 1;
            consts.push(v);
        }
    };
    for &node in order {
        for &i in &fg.node(node).inputs {
            visit_const(i, &mut map, &mut n);
        }
    }
    for &o in fg.outputs() {
        visit_const(o, &mut map, &mut n);
    }
    for &node in order {
        for &o in &fg.node(node).outputs {
            map.insert(o, n);
            n += 1;
        }
    }
    Slots { map, consts, n }
}

/// Computes `release` lists: the slots whose last use is each step.
pub fn liveness(
    n_slots: usize,
    steps: &[Vec<Slot>],
    outputs: &[Slot],
    n_inputs: usize,
) -> Vec<Vec<Slot>> {
    let mut last: Vec<Option<usize>> = vec![None; n_slots];
    for (k, uses) in steps.iter().enumerate() {
        for &s in uses {
            last[s] = Some(k);
        }
    }
    let mut release = vec![Vec::new(); steps.len()];
    for (s, l) in last.iter().enumerate() {
        if let Some(k) = l {
            if !outputs.contains(&s) && s >= n_inputs {
                release[*k].push(s);
            }
        }
    }
    release
}
