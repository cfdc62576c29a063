//! The steps of a plan, one variant per op family, each carrying its
//! family's step description (a struct of its own, so that a family's
//! lowering builds it and its executor reads it without the other families
//! in sight).
//!
//! Invariant: a step names slots only (never graph ids) and kernels by
//! index into the Function's `JitCode`; everything a step's executor
//! checks at run time (shapes against static types, aliasing of outputs)
//! is carried here from the graph by its lowering.

use std::sync::Arc;

use crate::graph::{DType, TensorType};
use crate::linker::accum::ColumnPass;
use crate::linker::accum::Modes;
use crate::ops::{ArgOp, CustomOp, IndexEntry, ReduceOp};

/// A slot index: the position of a variable's array in a call's slot table.
pub type Slot = usize;

/// One step of a plan: the op family and its description.
#[derive(Debug, Clone)]
pub enum Step {
    /// Element-wise kernel over the broadcast shape.
    Elemwise(ElemwiseStep),
    /// A reduction.
    Reduce(ReduceStep),
    /// A reduction of an element-wise pre-map in one pass (`FusedReduce`).
    FusedReduce(FusedReduceStep),
    /// A DimShuffle view.
    DimShuffle(DimShuffleStep),
    /// A Reshape view (copying non-contiguous inputs first).
    Reshape(ReshapeStep),
    /// Broadcast a value to a run-time shape.
    Alloc(AllocStep),
    /// An arg-reduction (`argmax` / `argmin`, with or without the value).
    ArgReduce(ArgReduceStep),
    /// `softmax` / `log_softmax` along one axis.
    Softmax(SoftmaxStep),
    /// `cumsum` / `cumprod` along one axis.
    CumReduce(CumReduceStep),
    /// Matrix product.
    Dot(DotStep),
    /// A matrix product and the one element-wise step that reads it, run
    /// block by block of the product's rows (see `plan::epilogue`).
    Epilogue(EpilogueStep),
    /// Stacks of matrix products (`Op::BatchedDot`).
    BatchedDot(BatchedDotStep),
    /// `beta * z + alpha * dot(x, y)` by the runtime GEMM (`Op::Gemm`).
    Gemm(GemmStep),
    /// The shape vector.
    Shape(ShapeStep),
    /// One dimension of the shape.
    ShapeI(ShapeIStep),
    /// A basic-indexing view (`Subtensor`).
    Subtensor(SubtensorStep),
    /// A slice update (`IncSubtensor`, `SetSubtensor`).
    IncSubtensor(IncSubtensorStep),
    /// A gather along one axis (`AdvancedSubtensor1`).
    Take(TakeStep),
    /// An indexed increment or assignment along one axis (`AdvancedIncSubtensor1`).
    IncTake(IncTakeStep),
    /// `x[mask]` (`BooleanMask`).
    BooleanMask(BooleanMaskStep),
    /// A concatenation (`Join`).
    Join(JoinStep),
    /// Views of consecutive parts (`Split`).
    Split(SplitStep),
    /// A user op run by its reference `perform`.
    Custom(CustomStep),
}

/// Element-wise kernel over the broadcast shape.
#[derive(Debug, Clone)]
pub struct ElemwiseStep {
    /// Kernel index.
    pub kernel: usize,
    /// Array operands (size-1 constants are inlined into the kernel).
    pub inputs: Vec<Slot>,
    /// Per input, per dimension: statically broadcastable.
    pub bcast: Vec<Vec<bool>>,
    /// Output slots and dtypes.
    pub outputs: Vec<(Slot, DType)>,
    /// The node's `destroy_map` as `(output, position in inputs)`: that
    /// output is written into the buffer of that input, which it overwrites.
    pub destroy_map: Vec<(usize, usize)>,
    /// Descriptions of the inputs for error messages.
    pub descs: Vec<String>,
}

/// A reduction.
#[derive(Debug, Clone)]
pub struct ReduceStep {
    /// Kernel index.
    pub kernel: usize,
    /// The accumulator modes the kernel handles.
    pub modes: Modes,
    /// Cast kernel from the accumulator dtype to the output dtype, if they differ.
    pub cast: Option<usize>,
    /// The reduction.
    pub op: ReduceOp,
    /// Reduced axes (sorted).
    pub axes: Vec<usize>,
    /// Input slot.
    pub input: Slot,
    /// Output slot.
    pub output: Slot,
    /// Accumulator dtype.
    pub acc: DType,
    /// Output dtype.
    pub out: DType,
    /// The runtime's column pass of the reduction and input dtype, which
    /// the driver hands whole runs of reduced rows (column mode only).
    pub columns: Option<ColumnPass>,
}

/// A reduction of an element-wise pre-map in one pass (`FusedReduce`).
#[derive(Debug, Clone)]
pub struct FusedReduceStep {
    /// Kernel index (accumulator operand first, then the inputs).
    pub kernel: usize,
    /// The accumulator modes the kernel handles.
    pub modes: Modes,
    /// Cast kernel from the accumulator dtype to the output dtype, if they differ.
    pub cast: Option<usize>,
    /// The reduction.
    pub op: ReduceOp,
    /// Reduced axes (sorted).
    pub axes: Vec<usize>,
    /// Array operands of the pre-map (size-1 constants are inlined).
    pub inputs: Vec<Slot>,
    /// Per input, per dimension: statically broadcastable.
    pub bcast: Vec<Vec<bool>>,
    /// Descriptions of the inputs for error messages.
    pub descs: Vec<String>,
    /// Output slot.
    pub output: Slot,
    /// Accumulator dtype.
    pub acc: DType,
    /// The reduced value's dtype (the output's, without a post-map).
    pub out: DType,
    /// The post-map the kernel applies to the reduced value, if any.
    pub post: Option<PostMap>,
}

/// A `FusedReduce`'s post-map, run by its kernel in post mode (see
/// `codegen::fused`) over the reduced value after every partial is folded.
#[derive(Debug, Clone)]
pub struct PostMap {
    /// The extras' slots (one element each; one-element constants are
    /// inlined into the kernel).
    pub inputs: Vec<Slot>,
    /// The output dtype.
    pub out: DType,
}

/// A DimShuffle view.
#[derive(Debug, Clone)]
pub struct DimShuffleStep {
    /// Input slot.
    pub input: Slot,
    /// Output slot.
    pub output: Slot,
    /// New order.
    pub new_order: Vec<Option<usize>>,
}

/// A Reshape view (copying non-contiguous inputs first).
#[derive(Debug, Clone)]
pub struct ReshapeStep {
    /// Input slot.
    pub input: Slot,
    /// Shape slot.
    pub shape: Slot,
    /// Output slot.
    pub output: Slot,
    /// The output's static sizes (its length is the declared ndim),
    /// which the run-time shape vector must satisfy.
    pub out_shape: Vec<Option<usize>>,
}

/// Broadcast a value to a run-time shape.
#[derive(Debug, Clone)]
pub struct AllocStep {
    /// Value slot.
    pub value: Slot,
    /// Scalar dimension slots.
    pub dims: Vec<Slot>,
    /// Output slot.
    pub output: Slot,
    /// The output's static sizes, which the run-time dims must satisfy.
    pub out_shape: Vec<Option<usize>>,
}

/// An arg-reduction (`Op::ArgReduce`): the position of the first extreme
/// along one axis (or of the flattened input), and optionally its value.
#[derive(Debug, Clone)]
pub struct ArgReduceStep {
    /// Which extreme.
    pub op: ArgOp,
    /// The reduced axis (`None`: the flattened input in C order).
    pub axis: Option<usize>,
    /// Input slot.
    pub input: Slot,
    /// Slot of the extreme's value (the input's dtype), when it is an output.
    pub value: Option<Slot>,
    /// Slot of the `i64` positions.
    pub index: Slot,
}

/// What a [`SoftmaxStep`] computes from each lane: `softmax` and
/// `log_softmax` (`Op::Softmax`) a lane of the input's shape, `logsumexp`
/// (`Op::LogSumExp`) one value per lane.
pub use kiln_runtime::math::LanePass;

/// The softmax family along one axis (`Op::Softmax`, `Op::LogSumExp`):
/// native passes over each lane of the input.
#[derive(Debug, Clone)]
pub struct SoftmaxStep {
    /// The lanes' axis (`None`: all elements are one lane).
    pub axis: Option<usize>,
    /// What each lane gives.
    pub pass: LanePass,
    /// Input slot.
    pub input: Slot,
    /// Output slot.
    pub output: Slot,
}

/// `cumsum` / `cumprod` along one axis (`Op::CumReduce`).
#[derive(Debug, Clone)]
pub struct CumReduceStep {
    /// `Sum` or `Prod`.
    pub op: ReduceOp,
    /// The axis (`None`: the flattened input, a 1-d output).
    pub axis: Option<usize>,
    /// Input slot.
    pub input: Slot,
    /// Output slot.
    pub output: Slot,
    /// Output dtype (`i64` for `bool` and integers, else the input's).
    pub out: DType,
}

/// Matrix product.
#[derive(Debug, Clone)]
pub struct DotStep {
    /// Operand slots.
    pub a: Slot,
    /// Operand slots.
    pub b: Slot,
    /// Cast kernels bringing each operand to the output dtype, if needed.
    pub casts: [Option<usize>; 2],
    /// Output slot.
    pub output: Slot,
    /// Output dtype.
    pub dtype: DType,
}

/// A matrix product (`Dot` or `Gemm`) whose result only one element-wise
/// step reads (its *epilogue*, e.g. `tanh(A @ W + b)`): for a product
/// larger than the last-level cache, the executor computes each block of
/// the product's rows and maps it by the epilogue's kernel while it is
/// still in cache, instead of a second pass over the whole product
/// (`exec::epilogue`). The two steps keep their own descriptions; the
/// product's slot is the epilogue's input as before.
#[derive(Debug, Clone)]
pub struct EpilogueStep {
    /// The product.
    pub product: EpilogueProduct,
    /// The element-wise step reading the product's slot.
    pub elemwise: ElemwiseStep,
}

/// The product of an [`EpilogueStep`].
#[derive(Debug, Clone)]
pub enum EpilogueProduct {
    /// `dot(a, b)` of floats.
    Dot(DotStep),
    /// `beta * z + alpha * dot(x, y)`.
    Gemm(GemmStep),
}

impl EpilogueProduct {
    /// The product's output slot.
    pub fn output(&self) -> Slot {
        match self {
            EpilogueProduct::Dot(d) => d.output,
            EpilogueProduct::Gemm(g) => g.output,
        }
    }
}

/// Stacks of matrix products (`Op::BatchedDot`): one GEMM per batch (or
/// one over all of them when `b` is shared and `a`'s batches are rows of
/// one matrix), operands addressed through their strides.
#[derive(Debug, Clone)]
pub struct BatchedDotStep {
    /// Operand slots.
    pub a: Slot,
    /// Operand slots.
    pub b: Slot,
    /// Cast kernels bringing each operand to the output dtype, if needed.
    pub casts: [Option<usize>; 2],
    /// Output slot.
    pub output: Slot,
    /// Output dtype.
    pub dtype: DType,
    /// The static broadcastable flags of `a`'s and `b`'s dimensions.
    pub broadcastable: [Vec<bool>; 2],
}

/// `beta * z + alpha * dot(x, y)` by the runtime GEMM (`Op::Gemm`).
#[derive(Debug, Clone)]
pub struct GemmStep {
    /// Slot of `z`, the array added to (and overwritten when `inplace`).
    pub z: Slot,
    /// Slot of the 0-d `alpha`.
    pub alpha: Slot,
    /// Slot of the left operand.
    pub x: Slot,
    /// Slot of the right operand.
    pub y: Slot,
    /// Slot of the 0-d `beta`.
    pub beta: Slot,
    /// Output slot.
    pub output: Slot,
    /// The dtype (f32 or f64) of every operand.
    pub dtype: DType,
    /// The output is `z`'s array, updated in place; else a new array
    /// (the caller's output array when registered) holding a copy of `z`.
    pub inplace: bool,
    /// Description of `z` for error messages.
    pub z_desc: String,
}

/// The shape vector.
#[derive(Debug, Clone)]
pub struct ShapeStep {
    /// Input slot.
    pub input: Slot,
    /// Output slot.
    pub output: Slot,
}

/// One dimension of the shape.
#[derive(Debug, Clone)]
pub struct ShapeIStep {
    /// Input slots: one, or the operands of an element-wise broadcast
    /// whose size is asked (see `Op::ShapeI`).
    pub inputs: Vec<Slot>,
    /// Per input, its static broadcastable pattern (the broadcast's check).
    pub bcast: Vec<Vec<bool>>,
    /// Dimension.
    pub dim: usize,
    /// Output slot.
    pub output: Slot,
}

/// A user op run by its reference `perform`.
#[derive(Debug, Clone)]
pub struct CustomStep {
    /// The op.
    pub op: Arc<dyn CustomOp>,
    /// Input slots.
    pub inputs: Vec<Slot>,
    /// Output slots.
    pub outputs: Vec<Slot>,
    /// The declared output types, which the returned values must match
    /// (see `eval::check_custom_outputs`).
    pub out_types: Vec<TensorType>,
}

/// A basic-indexing view (`Op::Subtensor`): the input's buffer with an
/// offset pointer, fewer or shorter dimensions and scaled strides.
#[derive(Debug, Clone)]
pub struct SubtensorStep {
    /// Input slot.
    pub input: Slot,
    /// Slots of the 0-d integer bounds, in the index's order.
    pub bounds: Vec<Slot>,
    /// Output slot.
    pub output: Slot,
    /// The index.
    pub idx: Vec<IndexEntry>,
    /// The output's static sizes, which the resolved view must satisfy.
    pub out_shape: Vec<Option<usize>>,
}

/// A slice update (`Op::IncSubtensor`): `x` (copied unless `inplace`) with
/// its selection set to, or incremented by, `y` broadcast to it, by one
/// element-wise kernel over the selection's view.
#[derive(Debug, Clone)]
pub struct IncSubtensorStep {
    /// Kernel index: `cast(y)` (set) or `add(x, cast(y))` (inc), see
    /// `ops::subtensor::update_program`.
    pub kernel: usize,
    /// Slot of `x`.
    pub x: Slot,
    /// Slot of the new values `y`.
    pub y: Slot,
    /// Slots of the 0-d integer bounds, in the index's order.
    pub bounds: Vec<Slot>,
    /// Output slot.
    pub output: Slot,
    /// The selection.
    pub idx: Vec<IndexEntry>,
    /// Replace rather than increment.
    pub set: bool,
    /// The output is `x`'s array, updated in place; else a new array
    /// (the caller's output array when registered) holding a copy of `x`.
    pub inplace: bool,
    /// Per dimension of `y`: statically broadcastable (size 1).
    pub y_bcast: Vec<bool>,
    /// The dtypes of `x` and `y`.
    pub dtypes: (DType, DType),
    /// Descriptions of `x` and `y` for error messages.
    pub descs: (String, String),
}

/// A gather along one axis (`AdvancedSubtensor1`).
#[derive(Debug, Clone)]
pub struct TakeStep {
    /// Slot of `x`.
    pub x: Slot,
    /// Slot of the integer index.
    pub idx: Slot,
    /// Output slot.
    pub output: Slot,
    /// The indexed axis.
    pub axis: usize,
    /// The output's static sizes.
    pub out_shape: Vec<Option<usize>>,
}

/// An indexed increment or assignment along one axis (`AdvancedIncSubtensor1`).
#[derive(Debug, Clone)]
pub struct IncTakeStep {
    /// Slot of `x`, copied into the output first.
    pub x: Slot,
    /// Slot of `y`, the values added or written.
    pub y: Slot,
    /// Slot of the integer index.
    pub idx: Slot,
    /// Output slot.
    pub output: Slot,
    /// The indexed axis.
    pub axis: usize,
    /// Overwrite instead of adding.
    pub set: bool,
    /// Per dimension of `y`: statically broadcastable (size 1).
    pub y_bcast: Vec<bool>,
}

/// `x[mask]` (`BooleanMask`).
#[derive(Debug, Clone)]
pub struct BooleanMaskStep {
    /// Slot of `x`.
    pub x: Slot,
    /// Slot of the boolean mask.
    pub mask: Slot,
    /// Output slot.
    pub output: Slot,
    /// The output's static sizes.
    pub out_shape: Vec<Option<usize>>,
}

/// A concatenation (`Join`): each input is copied straight into its slice
/// of the output.
#[derive(Debug, Clone)]
pub struct JoinStep {
    /// Input slots.
    pub inputs: Vec<Slot>,
    /// Output slot.
    pub output: Slot,
    /// The axis joined along.
    pub axis: usize,
    /// The output's static sizes.
    pub out_shape: Vec<Option<usize>>,
}

/// Views of consecutive parts of `x` along one axis (`Split`).
#[derive(Debug, Clone)]
pub struct SplitStep {
    /// Slot of `x`.
    pub x: Slot,
    /// Slot of the 1-d integer sizes.
    pub sizes: Slot,
    /// Output slots, one per part.
    pub outputs: Vec<Slot>,
    /// The axis split along.
    pub axis: usize,
    /// Per output, its static sizes.
    pub out_shapes: Vec<Vec<Option<usize>>>,
}
