//! Scheduling and memory planning: turns a FunctionGraph into a [`Plan`],
//! a list of [`Step`]s over dense *slots* (one per variable), independent
//! of the graph's ids so that structurally identical graphs share a plan.
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
//! memory), and [`liveness`] releases a group after the last step that uses
//! or defines any of its slots, so a root outlives all its views. Groups
//! holding a graph output are never released. The schedule respects the
//! DestroyHandler's orderings (see `compile::schedule`), so every other
//! reader of a destroyed root runs before its destroyer.
//!
//! Output destinations: for `Function::call_into`, each graph output may
//! name the root slot of its group ([`output_destinations`]) when the output
//! is that root or reached from it through `destroy_map`s only (never a
//! view): such an output is the whole of its root's buffer, so the step
//! allocating the root may place it in the caller's array instead.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::reduce::Modes;
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
        /// The node's `destroy_map` as `(output, position in inputs)`: that
        /// output is written into the buffer of that input, which it overwrites.
        destroy_map: Vec<(usize, usize)>,
        /// Descriptions of the inputs for error messages.
        descs: Vec<String>,
    },
    /// A reduction.
    Reduce {
        /// Kernel index.
        kernel: usize,
        /// The accumulator modes the kernel handles.
        modes: Modes,
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
        /// The accumulator modes the kernel handles.
        modes: Modes,
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
        /// The output's static sizes (its length is the declared ndim),
        /// which the run-time shape vector must satisfy.
        out_shape: Vec<Option<usize>>,
    },
    /// Broadcast a value to a run-time shape.
    Alloc {
        /// Value slot.
        value: Slot,
        /// Scalar dimension slots.
        dims: Vec<Slot>,
        /// Output slot.
        output: Slot,
        /// The output's static sizes, which the run-time dims must satisfy.
        out_shape: Vec<Option<usize>>,
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
    /// `beta * z + alpha * dot(x, y)` by the runtime GEMM (`Op::Gemm`).
    Gemm {
        /// Slot of `z`, the array added to (and overwritten when `inplace`).
        z: Slot,
        /// Slot of the 0-d `alpha`.
        alpha: Slot,
        /// Slot of the left operand.
        x: Slot,
        /// Slot of the right operand.
        y: Slot,
        /// Slot of the 0-d `beta`.
        beta: Slot,
        /// Output slot.
        output: Slot,
        /// The dtype (f32 or f64) of every operand.
        dtype: DType,
        /// The output is `z`'s array, updated in place; else a new array
        /// (the caller's output array when registered) holding a copy of `z`.
        inplace: bool,
        /// Description of `z` for error messages.
        z_desc: String,
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
        /// The declared output types, which the returned values must match
        /// (see `eval::check_custom_outputs`).
        out_types: Vec<TensorType>,
    },
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
    /// `call_into` (see [`output_destinations`]).
    pub output_dests: Vec<Option<Slot>>,
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

/// Computes `release` lists: the slots to empty after each step.
///
/// `uses[k]` and `defs[k]` are the slots step `k` reads and writes;
/// `shares` lists `(slot, earlier slot)` pairs whose arrays live in one
/// buffer (views and destroyed inputs), in schedule order. A buffer group is
/// released, all its slots at once, after the last step that uses or defines
/// any of them; groups holding a graph output are never released.
pub fn liveness(
    n_slots: usize,
    uses: &[Vec<Slot>],
    defs: &[Vec<Slot>],
    shares: &[(Slot, Slot)],
    outputs: &[Slot],
) -> Vec<Vec<Slot>> {
    let mut root: Vec<Slot> = (0..n_slots).collect();
    for &(s, earlier) in shares {
        root[s] = root[earlier];
    }
    let mut last: Vec<Option<usize>> = vec![None; n_slots];
    for (k, (u, d)) in uses.iter().zip(defs).enumerate() {
        for &s in u.iter().chain(d) {
            last[root[s]] = Some(k);
        }
    }
    let mut pinned = vec![false; n_slots];
    for &o in outputs {
        pinned[root[o]] = true;
    }
    let mut release = vec![Vec::new(); uses.len()];
    for (s, &r) in root.iter().enumerate() {
        if let (Some(k), false) = (last[r], pinned[r]) {
            release[k].push(s);
        }
    }
    release
}

/// Per graph output, the root slot whose allocation `call_into` may place
/// in the caller's array for that output: the slot reached from the output
/// by following `destroys` (`(output slot, destroyed input slot)` pairs)
/// back to a slot no share made, when no view lies on the way (`views`:
/// `(view slot, viewed slot)` pairs) and that root is a node output
/// (`slot >= first_node_slot`; inputs and constants are never written).
/// The output's array is then exactly the root's whole buffer.
pub fn output_destinations(
    first_node_slot: Slot,
    destroys: &[(Slot, Slot)],
    views: &[(Slot, Slot)],
    outputs: &[Slot],
) -> Vec<Option<Slot>> {
    let destroyed: FxHashMap<Slot, Slot> = destroys.iter().copied().collect();
    let viewed: FxHashMap<Slot, Slot> = views.iter().copied().collect();
    outputs
        .iter()
        .map(|&o| {
            let mut cur = o;
            while let Some(&earlier) = destroyed.get(&cur) {
                cur = earlier;
            }
            (cur >= first_node_slot && !viewed.contains_key(&cur)).then_some(cur)
        })
        .collect()
}
