//! The op set: what an Apply node computes.
//!
//! [`Op`] is a closed enum, so adding an op makes the compiler list every
//! place (type inference, reference evaluation, printing, lowering) that must
//! handle it; [`Op::Custom`] is the escape hatch for user-defined ops. Every op
//! has structural equality and hashing (merging relies on them), a short
//! display name as in the seed documents, and type inference
//! ([`Op::infer_types`]) that rejects bad inputs with an error naming the op
//! and the offending types. Reference semantics live in `crate::eval`.

pub mod composite;
pub mod indexing;
pub mod scalar;
pub mod subtensor;

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use smallvec::SmallVec;

pub use composite::{CNode, CRef, Composite, ScalarConst};
pub use scalar::{Arity, ScalarOp};
pub use subtensor::{Bound, IndexEntry};

use crate::error::{Error, Result};
use crate::types::{DType, TensorType, Value};

/// Which outputs overwrite which inputs: pairs `(output, input)`.
pub type InplacePattern = SmallVec<[(u8, u8); 2]>;

/// The commutative-associative operation of a [`Op::CAReduce`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum (`add`).
    Sum,
    /// Product (`mul`).
    Prod,
    /// Maximum (NaN-propagating).
    Max,
    /// Minimum (NaN-propagating).
    Min,
    /// Logical and.
    All,
    /// Logical or.
    Any,
}

impl ReduceOp {
    /// The scalar op that combines two partial results.
    pub fn scalar_op(self) -> ScalarOp {
        match self {
            ReduceOp::Sum => ScalarOp::Add,
            ReduceOp::Prod => ScalarOp::Mul,
            ReduceOp::Max => ScalarOp::Maximum,
            ReduceOp::Min => ScalarOp::Minimum,
            ReduceOp::All => ScalarOp::And,
            ReduceOp::Any => ScalarOp::Or,
        }
    }
    /// Display name (`Sum`, `Prod`, `Max`, `Min`, `All`, `Any`).
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "Sum",
            ReduceOp::Prod => "Prod",
            ReduceOp::Max => "Max",
            ReduceOp::Min => "Min",
            ReduceOp::All => "All",
            ReduceOp::Any => "Any",
        }
    }
    /// The output dtype for an input of dtype `d`: sums and products of
    /// `bool` and signed integers accumulate in `i64`, of unsigned integers
    /// in `u64` (numpy's rule), max/min keep the dtype, all/any give `bool`.
    pub fn output_dtype(self, d: DType) -> DType {
        match self {
            ReduceOp::Sum | ReduceOp::Prod => {
                if d.is_float() {
                    d
                } else if d.is_unsigned() {
                    DType::U64
                } else {
                    DType::I64
                }
            }
            ReduceOp::Max | ReduceOp::Min => d,
            ReduceOp::All | ReduceOp::Any => DType::Bool,
        }
    }
    /// The value of a reduction over zero elements, if it has one
    /// (max and min of an empty axis are errors, as in numpy).
    pub fn empty_value(self, dtype: DType) -> Option<f64> {
        match self {
            ReduceOp::Sum | ReduceOp::Any => Some(0.0),
            ReduceOp::Prod | ReduceOp::All => Some(1.0),
            ReduceOp::Max | ReduceOp::Min => {
                let _ = dtype;
                None
            }
        }
    }
}

/// Which extreme an [`Op::ArgReduce`] locates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArgOp {
    /// The largest element (numpy's `argmax`).
    Max,
    /// The smallest element (numpy's `argmin`).
    Min,
}

impl ArgOp {
    /// `max` or `min`.
    pub fn word(self) -> &'static str {
        match self {
            ArgOp::Max => "max",
            ArgOp::Min => "min",
        }
    }
    /// The other extreme.
    pub fn flipped(self) -> ArgOp {
        match self {
            ArgOp::Max => ArgOp::Min,
            ArgOp::Min => ArgOp::Max,
        }
    }
    /// The reduction giving the extreme's value (`Max` / `Min`).
    pub fn reduce_op(self) -> ReduceOp {
        match self {
            ArgOp::Max => ReduceOp::Max,
            ArgOp::Min => ReduceOp::Min,
        }
    }
}

/// A user-defined op: reference semantics and typing supplied by the user.
/// Custom ops are never JIT-compiled unless a lowering is registered; the
/// linker reports them as falling back to the reference evaluator.
pub trait CustomOp: Send + Sync + fmt::Debug {
    /// Display name; two custom ops are equal when their names and params are equal.
    fn name(&self) -> String;
    /// A string of the op's parameters, part of its identity.
    fn params(&self) -> String {
        String::new()
    }
    /// Output types for the given input types.
    fn infer_types(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>>;
    /// Reference implementation.
    fn perform(&self, inputs: &[&Value]) -> Result<Vec<Value>>;
}

/// Composites of more nodes than this are named by their size in
/// [`Op::short_name`].
pub const SHORT_NAME_NODES: usize = 16;

/// What an Apply node computes.
#[derive(Debug, Clone)]
pub enum Op {
    /// A scalar op applied element-wise with broadcasting.
    Elemwise {
        /// The scalar op.
        scalar: ScalarOp,
        /// Outputs that overwrite inputs (set by the inplace passes).
        inplace: InplacePattern,
    },
    /// A fused scalar sub-graph applied element-wise (one output per Composite output).
    Composite {
        /// The scalar sub-graph.
        composite: Arc<Composite>,
        /// Outputs that overwrite inputs.
        inplace: InplacePattern,
    },
    /// Permutes dimensions, drops broadcastable ones, inserts new broadcastable
    /// ones (`None` entries, PyTensor's `'x'`). Always a view of its input.
    DimShuffle {
        /// The input's number of dimensions.
        input_ndim: usize,
        /// For each output dimension: the input dimension, or `None` for a new one.
        new_order: Vec<Option<usize>>,
    },
    /// A commutative-associative reduction over axes (`None`: all axes).
    CAReduce {
        /// The reduction.
        op: ReduceOp,
        /// Sorted, distinct axes, or `None` for all.
        axes: Option<Vec<usize>>,
    },
    /// A reduction of an element-wise pre-map: `op` over `axes` (`None`: all)
    /// of `pre(inputs...)`, where the single-output Composite `pre` is applied
    /// with the broadcasting of [`Op::Composite`]. Made by reduction input
    /// fusion (`local_careduce_fusion`) so that the mapped values are never
    /// stored; its value is exactly the CAReduce of the Composite.
    ///
    /// With a post-map (`local_reduce_post_fusion`), the output is instead
    /// `post(reduced, extras...)` element by element, where `reduced` is
    /// that CAReduce and the extras are the node's inputs after the
    /// pre-map's (`pre.inputs.len()` of them), each of one element (every
    /// dimension statically broadcastable) and of the reduced value's
    /// rank: a mean's `sum / n` in the reduction's own kernel.
    FusedReduce {
        /// The reduction.
        op: ReduceOp,
        /// Sorted, distinct axes, or `None` for all.
        axes: Option<Vec<usize>>,
        /// The scalar pre-map (exactly one output).
        pre: Arc<Composite>,
        /// The scalar post-map (exactly one output; input 0 the reduced
        /// value, inputs `1..` the extras), if any.
        post: Option<Arc<Composite>>,
    },
    /// numpy's `argmax` / `argmin` over one axis (`None`: the flattened
    /// input, in C order): the `i64` position of the first occurrence of the
    /// extreme, where the first NaN counts as the extreme (as numpy). With
    /// `with_value` (PyTensor's `MaxAndArgmax`), two outputs computed in one
    /// pass: the extreme's value (exactly `max` / `min` over that axis,
    /// NaN-propagating) and then its position. An empty axis is an error.
    ArgReduce {
        /// Which extreme.
        op: ArgOp,
        /// The reduced axis, or `None` for the flattened input.
        axis: Option<usize>,
        /// Also output the extreme's value (first output).
        with_value: bool,
    },
    /// `softmax(x) = exp(x - max) / sum(exp(x - max))` along one axis
    /// (`None`: over all elements), or with `log` its logarithm computed as
    /// `(x - max) - log(sum(exp(x - max)))`. Float inputs only; the output
    /// has the input's type. A NaN in a lane makes the whole lane NaN, as
    /// does a lane of `-inf` only (`0 / 0`); in a lane whose maximum is
    /// `+inf`, the finite elements are 0 (`-inf` for `log`) and the
    /// infinite ones NaN, as `exp(x) / sum(exp(x))` gives; an empty lane is
    /// empty.
    Softmax {
        /// The normalised axis, or `None` for all elements.
        axis: Option<usize>,
        /// `log_softmax` instead of `softmax`.
        log: bool,
    },
    /// `logsumexp(x) = log(sum(exp(x)))` over one axis (`None`: over all
    /// elements), computed as `log(sum(exp(x - m))) + m` with `m` the lane's
    /// maximum, so that it neither overflows nor underflows (made by
    /// stabilize's `local_log_sum_exp`, or by `logsumexp(x)` in an
    /// expression). Float inputs only; the output has the input's dtype and
    /// its shape without the reduced axis (a 0-d output for `None`). The
    /// value is that of `log(sum(exp(x)))` wherever the latter is finite: a
    /// NaN in a lane gives NaN, a `+inf` gives `+inf`, a lane of `-inf`
    /// only, or an empty lane, gives `-inf` (`log(0)`).
    LogSumExp {
        /// The reduced axis, or `None` for all elements.
        axis: Option<usize>,
    },
    /// numpy's `cumsum` (`op` = `Sum`) or `cumprod` (`Prod`) along one axis
    /// (`None`: the flattened input in C order, a 1-d output). The output
    /// dtype is the reduction's (`ReduceOp::output_dtype`: `bool` and
    /// integers accumulate in `i64`, wrapping; floats keep their dtype and
    /// every partial result is rounded to it, in order).
    CumReduce {
        /// `Sum` or `Prod`.
        op: ReduceOp,
        /// The axis, or `None` for the flattened input.
        axis: Option<usize>,
    },
    /// numpy `dot` of 1-d and 2-d operands.
    Dot,
    /// numpy `matmul` of stacks of matrices: `a` is `(..., m, k)`, `b` is
    /// `(..., k, n)` (both at least 2-d), the output `(..., m, n)`. The batch
    /// dimensions (all but the last two) are aligned from the right and
    /// broadcast as in element-wise ops: a missing or statically size-1
    /// dimension stretches, other sizes must agree. Dtype as `Dot`.
    BatchedDot,
    /// BLAS GEMM (PyTensor's `gemm_no_inplace` / `gemm_inplace`): inputs
    /// `(z, alpha, x, y, beta)`, output `beta * z + alpha * dot(x, y)`.
    /// `z`, `x`, `y` are floating-point of one dtype, `alpha` and `beta`
    /// 0-d of that dtype, and `dot(x, y)` has `z`'s number of dimensions
    /// (no broadcasting: their run-time shapes must be equal). As in BLAS,
    /// when `beta == 0` the old contents of `z` are ignored (even NaN or
    /// infinities). With `inplace`, the output overwrites `z`
    /// (`destroy_map` {0 <- 0}).
    Gemm {
        /// The output overwrites input 0 (`z`).
        inplace: bool,
    },
    /// Broadcasts a value to a shape given by scalar integer inputs.
    Alloc,
    /// Reshapes to `ndim` dimensions given by a 1-d integer input (-1 inferred).
    Reshape {
        /// The output's number of dimensions.
        ndim: usize,
    },
    /// The shape of its input, as a 1-d `i64` vector.
    Shape,
    /// One dimension of its input's shape, as a 0-d `i64`. With several
    /// inputs (all of one rank), that dimension of their element-wise
    /// broadcast, checked at run time as an element-wise op over them checks
    /// it: `local_shape_i_lift` asks the inputs of an element-wise result
    /// for its size without computing it and without losing its check.
    ShapeI(usize),
    /// Basic indexing (`x[1:-1, ::2, 0]`): inputs `(x, bounds...)`, one
    /// scalar integer input per [`Bound::Input`] of `idx`. Always a view of
    /// `x` (see [`subtensor`] for the index rules).
    Subtensor {
        /// One entry per leading dimension of `x` (the others are kept whole).
        idx: Vec<IndexEntry>,
    },
    /// `x` with its selection `x[idx]` replaced by (`set`) or incremented by
    /// `y` broadcast to it: inputs `(x, y, bounds...)`. Functional (a copy
    /// of `x`) unless `inplace`, where the output overwrites `x`
    /// (`destroy_map` {0 <- 0}).
    IncSubtensor {
        /// The selection, as in [`Op::Subtensor`].
        idx: Vec<IndexEntry>,
        /// Replace the selection (`set_subtensor`) rather than add to it.
        set: bool,
        /// The output overwrites input 0 (`x`).
        inplace: bool,
    },
    /// numpy `take(x, idx, axis)`: the sub-arrays of `x` at the integer
    /// indices `idx` (any integer dtype, at least 1-d, negative counting from
    /// the end) along `axis` (PyTensor's `AdvancedSubtensor1` for axis 0).
    /// Inputs `(x, idx)`; output shape `x.shape[:axis] + idx.shape +
    /// x.shape[axis+1:]`. An index out of range is a run-time error.
    AdvancedSubtensor1 {
        /// The indexed axis.
        axis: usize,
    },
    /// A copy of `x` where the sub-arrays at `idx` along `axis` are
    /// incremented by `y` (`np.add.at`: duplicates accumulate, in index
    /// order) or, with `set`, overwritten by it (the last duplicate wins).
    /// Inputs `(x, y, idx)`; `y` has `x`'s dtype and broadcasts to
    /// `take(x, idx, axis)`. PyTensor's `AdvancedIncSubtensor1`.
    AdvancedIncSubtensor1 {
        /// The indexed axis.
        axis: usize,
        /// Overwrite instead of adding.
        set: bool,
    },
    /// `x[mask]` for a boolean `mask` of `x`'s first `k` dimensions' shape:
    /// the selected sub-arrays in row-major order, shape `(count,) +
    /// x.shape[k:]` with `count` known only at run time.
    BooleanMask,
    /// `concatenate(inputs, axis)`: inputs of one dtype and ndim, equal
    /// sizes but along `axis` (PyTensor's `Join`, with the axis a parameter).
    Join {
        /// The axis joined along.
        axis: usize,
    },
    /// Splits `x` along `axis` into `n` consecutive parts whose sizes are
    /// the 1-d integer input `sizes` (summing to the axis length). Inputs
    /// `(x, sizes)`; every output is a view of `x`.
    Split {
        /// The axis split along.
        axis: usize,
        /// The number of parts (outputs).
        n: usize,
    },
    /// A user-defined op.
    Custom(Arc<dyn CustomOp>),
}

/// What type inference knows about one input: its type and, for constants, its value.
#[derive(Debug, Clone, Copy)]
pub struct InputInfo<'a> {
    /// The input's type.
    pub ty: &'a TensorType,
    /// The input's value when it is a constant.
    pub value: Option<&'a Value>,
}

impl Op {
    /// An Elemwise of `scalar` with no inplace outputs.
    pub fn elemwise(scalar: ScalarOp) -> Op {
        Op::Elemwise {
            scalar,
            inplace: InplacePattern::new(),
        }
    }

    /// A Composite with no inplace outputs.
    pub fn composite(c: Composite) -> Op {
        Op::Composite {
            composite: Arc::new(c),
            inplace: InplacePattern::new(),
        }
    }

    /// The scalar op of a plain Elemwise.
    pub fn scalar_op(&self) -> Option<ScalarOp> {
        match self {
            Op::Elemwise { scalar, .. } => Some(*scalar),
            _ => None,
        }
    }

    /// True for a plain Elemwise of `s`.
    pub fn is_elemwise(&self, s: ScalarOp) -> bool {
        self.scalar_op() == Some(s)
    }

    /// True for Elemwise and Composite (element-wise ops with broadcasting).
    pub fn is_elementwise(&self) -> bool {
        matches!(self, Op::Elemwise { .. } | Op::Composite { .. })
    }

    /// A coarse kind used to dispatch node rewriters (`tracks`).
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Elemwise { scalar, .. } => OpKind::Elemwise(*scalar),
            Op::Composite { .. } => OpKind::Composite,
            Op::DimShuffle { .. } => OpKind::DimShuffle,
            Op::CAReduce { .. } => OpKind::CAReduce,
            Op::FusedReduce { .. } => OpKind::FusedReduce,
            Op::ArgReduce { .. } => OpKind::ArgReduce,
            Op::Softmax { .. } => OpKind::Softmax,
            Op::LogSumExp { .. } => OpKind::LogSumExp,
            Op::CumReduce { .. } => OpKind::CumReduce,
            Op::Dot => OpKind::Dot,
            Op::BatchedDot => OpKind::BatchedDot,
            Op::Gemm { .. } => OpKind::Gemm,
            Op::Alloc => OpKind::Alloc,
            Op::Reshape { .. } => OpKind::Reshape,
            Op::Shape => OpKind::Shape,
            Op::ShapeI(_) => OpKind::ShapeI,
            Op::Subtensor { .. } => OpKind::Subtensor,
            Op::IncSubtensor { .. } => OpKind::IncSubtensor,
            Op::AdvancedSubtensor1 { .. } => OpKind::AdvancedSubtensor1,
            Op::AdvancedIncSubtensor1 { .. } => OpKind::AdvancedIncSubtensor1,
            Op::BooleanMask => OpKind::BooleanMask,
            Op::Join { .. } => OpKind::Join,
            Op::Split { .. } => OpKind::Split,
            Op::Custom(_) => OpKind::Custom,
        }
    }

    /// A name for messages that stays short: [`Op::name`], except that a
    /// Composite of more than [`SHORT_NAME_NODES`] scalar nodes is named by
    /// its size (the full program of a large fused kernel runs to
    /// kilobytes, and rendering it for every operand description was a
    /// measurable share of compiling large graphs).
    pub fn short_name(&self) -> String {
        match self {
            Op::Composite { composite, inplace } if composite.nodes.len() > SHORT_NAME_NODES => {
                format!(
                    "Composite{{{} scalar ops, {} outputs}}{}",
                    composite.nodes.len(),
                    composite.outputs.len(),
                    if inplace.is_empty() { "" } else { "{inplace}" }
                )
            }
            _ => self.name(),
        }
    }

    /// The display name used by printers (`add`, `Sum{axes=[1]}`, `DimShuffle{1,0}`).
    pub fn name(&self) -> String {
        let inplace_suffix = |p: &InplacePattern| {
            if p.is_empty() {
                String::new()
            } else {
                "{inplace}".to_string()
            }
        };
        match self {
            Op::Elemwise { scalar, inplace } => {
                format!("{}{}", scalar.name(), inplace_suffix(inplace))
            }
            Op::Composite { composite, inplace } => {
                format!("{composite}{}", inplace_suffix(inplace))
            }
            Op::DimShuffle { new_order, .. } => {
                let parts: Vec<String> = new_order
                    .iter()
                    .map(|d| d.map_or_else(|| "x".to_string(), |d| d.to_string()))
                    .collect();
                format!("DimShuffle{{{}}}", parts.join(","))
            }
            Op::CAReduce { op, axes } => reduce_name(*op, axes),
            Op::FusedReduce {
                op,
                axes,
                pre,
                post,
            } => {
                let post = post
                    .as_ref()
                    .map_or(String::new(), |p| format!("->{}", pre_text(p)));
                format!("{}{}{post}", reduce_name(*op, axes), pre_text(pre))
            }
            Op::ArgReduce {
                op,
                axis,
                with_value,
            } => {
                let axis = axis.map_or_else(|| "None".to_string(), |a| a.to_string());
                match (op, with_value) {
                    (ArgOp::Max, false) => format!("Argmax{{axis={axis}}}"),
                    (ArgOp::Min, false) => format!("Argmin{{axis={axis}}}"),
                    (ArgOp::Max, true) => format!("MaxAndArgmax{{axis={axis}}}"),
                    (ArgOp::Min, true) => format!("MinAndArgmin{{axis={axis}}}"),
                }
            }
            Op::Softmax { axis, log } => {
                let axis = axis.map_or_else(|| "None".to_string(), |a| a.to_string());
                let name = if *log { "LogSoftmax" } else { "Softmax" };
                format!("{name}{{axis={axis}}}")
            }
            Op::LogSumExp { axis } => {
                let axis = axis.map_or_else(|| "None".to_string(), |a| a.to_string());
                format!("LogSumExp{{axis={axis}}}")
            }
            Op::CumReduce { op, axis } => {
                let axis = axis.map_or_else(|| "None".to_string(), |a| a.to_string());
                format!("Cum{}{{axis={axis}}}", op.name())
            }
            Op::Dot => "dot".to_string(),
            Op::BatchedDot => "BatchedDot".to_string(),
            Op::Gemm { inplace: false } => "Gemm{no_inplace}".to_string(),
            Op::Gemm { inplace: true } => "Gemm{inplace}".to_string(),
            Op::Alloc => "Alloc".to_string(),
            Op::Reshape { ndim } => format!("Reshape{{{ndim}}}"),
            Op::Shape => "Shape".to_string(),
            Op::ShapeI(i) => format!("Shape_i{{{i}}}"),
            Op::Subtensor { idx } => format!("Subtensor{{{}}}", subtensor::IndexList(idx)),
            Op::IncSubtensor { idx, set, inplace } => format!(
                "{}{{{}}}{}",
                if *set { "SetSubtensor" } else { "IncSubtensor" },
                subtensor::IndexList(idx),
                if *inplace { "{inplace}" } else { "" }
            ),
            Op::AdvancedSubtensor1 { axis: 0 } => "AdvancedSubtensor1".to_string(),
            Op::AdvancedSubtensor1 { axis } => format!("AdvancedSubtensor1{{axis={axis}}}"),
            Op::AdvancedIncSubtensor1 { axis, set } => {
                let base = if *set {
                    "AdvancedSetSubtensor1"
                } else {
                    "AdvancedIncSubtensor1"
                };
                match axis {
                    0 => base.to_string(),
                    a => format!("{base}{{axis={a}}}"),
                }
            }
            Op::BooleanMask => "BooleanMask".to_string(),
            Op::Join { axis } => format!("Join{{axis={axis}}}"),
            Op::Split { axis, n } => format!("Split{{n={n}, axis={axis}}}"),
            Op::Custom(c) => c.name(),
        }
    }

    /// `(output, input)` pairs where the output overwrites the input.
    pub fn destroy_map(&self) -> InplacePattern {
        match self {
            Op::Elemwise { inplace, .. } | Op::Composite { inplace, .. } => inplace.clone(),
            Op::Gemm { inplace: true } | Op::IncSubtensor { inplace: true, .. } => {
                smallvec::smallvec![(0, 0)]
            }
            _ => InplacePattern::new(),
        }
    }

    /// `(output, input)` pairs where the output is a view of (aliases) the input.
    pub fn view_map(&self) -> InplacePattern {
        match self {
            Op::DimShuffle { .. } | Op::Reshape { .. } | Op::Subtensor { .. } => {
                smallvec::smallvec![(0, 0)]
            }
            Op::Split { n, .. } => (0..*n).map(|k| (k as u8, 0)).collect(),
            _ => InplacePattern::new(),
        }
    }

    /// Checks the inputs and computes the output types.
    pub fn infer_types(&self, inputs: &[InputInfo<'_>]) -> Result<Vec<TensorType>> {
        // The name is rendered only for an error: a large Composite's name
        // is its whole expression.
        let err = |msg: String| Error::ty(self.name(), msg);
        match self {
            Op::Elemwise { scalar, .. } => {
                let dtypes: Vec<DType> = inputs.iter().map(|i| i.ty.dtype).collect();
                let dtype = scalar.output_dtype(&dtypes)?;
                Ok(vec![TensorType::new(
                    dtype,
                    broadcast_shapes(self, inputs)?,
                )])
            }
            Op::Composite { composite, .. } => {
                check_composite_inputs(composite, inputs).map_err(err)?;
                let shape = broadcast_shapes(self, inputs)?;
                Ok(composite
                    .output_dtypes()
                    .into_iter()
                    .map(|d| TensorType::new(d, shape.clone()))
                    .collect())
            }
            Op::DimShuffle {
                input_ndim,
                new_order,
            } => {
                let [x] = inputs else {
                    return Err(err(format!("expects 1 input, got {}", inputs.len())));
                };
                Ok(vec![
                    dimshuffle_type(*input_ndim, new_order, x.ty).map_err(err)?
                ])
            }
            Op::CAReduce { op, axes } => {
                let [x] = inputs else {
                    return Err(err(format!("expects 1 input, got {}", inputs.len())));
                };
                Ok(vec![reduced_type(*op, axes, x.ty).map_err(err)?])
            }
            Op::FusedReduce {
                op,
                axes,
                pre,
                post,
            } => {
                if pre.outputs.len() != 1 {
                    return Err(err(format!(
                        "the pre-map must have exactly one output, it has {}",
                        pre.outputs.len()
                    )));
                }
                let (pre_ins, extras) = split_fused(pre, inputs);
                let inner = |e: Error| match e {
                    Error::Type { msg, .. } => err(msg),
                    e => e,
                };
                let pre_op = Op::Composite {
                    composite: pre.clone(),
                    inplace: InplacePattern::new(),
                };
                let mapped = pre_op.infer_types(pre_ins).map_err(inner)?;
                let reduced = reduced_type(*op, axes, &mapped[0]).map_err(err)?;
                let Some(post) = post else {
                    if !extras.is_empty() {
                        return Err(err(format!(
                            "expects {} inputs (its pre-map's), got {}",
                            pre_ins.len(),
                            inputs.len()
                        )));
                    }
                    return Ok(vec![reduced]);
                };
                if post.outputs.len() != 1 || post.inputs.len() != 1 + extras.len() {
                    return Err(err(format!(
                        "the post-map must have one output and {} inputs (the reduced \
                         value and {} extras), it has {} and {}",
                        1 + extras.len(),
                        extras.len(),
                        post.outputs.len(),
                        post.inputs.len()
                    )));
                }
                if let Some(e) = extras.iter().find(|e| {
                    e.ty.ndim() != reduced.ndim() || !e.ty.broadcastable().iter().all(|&b| b)
                }) {
                    return Err(err(format!(
                        "a post-map extra must be one element of the reduced value's rank \
                         {}, got {}",
                        reduced.ndim(),
                        e.ty
                    )));
                }
                let post_op = Op::Composite {
                    composite: post.clone(),
                    inplace: InplacePattern::new(),
                };
                let mut post_ins = vec![InputInfo {
                    ty: &reduced,
                    value: None,
                }];
                post_ins.extend(extras.iter().map(|e| InputInfo {
                    ty: e.ty,
                    value: None,
                }));
                post_op.infer_types(&post_ins).map_err(inner)
            }
            Op::ArgReduce {
                op,
                axis,
                with_value,
            } => {
                let [x] = inputs else {
                    return Err(err(format!("expects 1 input, got {}", inputs.len())));
                };
                let idx = argreduce_type(*op, *axis, x.ty).map_err(err)?;
                if *with_value {
                    let val = TensorType::new(x.ty.dtype, idx.shape.clone());
                    Ok(vec![val, idx])
                } else {
                    Ok(vec![idx])
                }
            }
            Op::Softmax { axis, .. } => {
                let [x] = inputs else {
                    return Err(err(format!("expects 1 input, got {}", inputs.len())));
                };
                if !x.ty.dtype.is_float() {
                    return Err(err(format!("expects a float input, got {}", x.ty)));
                }
                if let Some(a) = axis.filter(|&a| a >= x.ty.ndim()) {
                    return Err(err(format!("axis {a} out of range for input {}", x.ty)));
                }
                Ok(vec![x.ty.clone()])
            }
            Op::LogSumExp { axis } => {
                let [x] = inputs else {
                    return Err(err(format!("expects 1 input, got {}", inputs.len())));
                };
                if !x.ty.dtype.is_float() {
                    return Err(err(format!("expects a float input, got {}", x.ty)));
                }
                let shape = match *axis {
                    Some(a) if a >= x.ty.ndim() => {
                        return Err(err(format!("axis {a} out of range for input {}", x.ty)));
                    }
                    Some(a) => {
                        let mut s = x.ty.shape.clone();
                        s.remove(a);
                        s
                    }
                    None => Vec::new(),
                };
                Ok(vec![TensorType::new(x.ty.dtype, shape)])
            }
            Op::CumReduce { op, axis } => {
                let [x] = inputs else {
                    return Err(err(format!("expects 1 input, got {}", inputs.len())));
                };
                if !matches!(op, ReduceOp::Sum | ReduceOp::Prod) {
                    return Err(err(format!(
                        "only Sum and Prod accumulate, got {}",
                        op.name()
                    )));
                }
                let dtype = op.output_dtype(x.ty.dtype);
                match axis {
                    Some(a) if *a >= x.ty.ndim() => {
                        Err(err(format!("axis {a} out of range for input {}", x.ty)))
                    }
                    Some(_) => Ok(vec![TensorType::new(dtype, x.ty.shape.clone())]),
                    None => Ok(vec![TensorType::new(dtype, vec![x.ty.static_size()])]),
                }
            }
            Op::Dot => Ok(vec![dot_type(inputs).map_err(err)?]),
            Op::BatchedDot => Ok(vec![batched_dot_type(inputs).map_err(err)?]),
            Op::Gemm { .. } => Ok(vec![gemm_type(inputs).map_err(err)?]),
            Op::Alloc => Ok(vec![alloc_type(inputs).map_err(err)?]),
            Op::Reshape { ndim } => {
                let [x, s] = inputs else {
                    return Err(err(format!("expects 2 inputs, got {}", inputs.len())));
                };
                if s.ty.ndim() != 1
                    || !s.ty.dtype.is_int()
                    || s.ty.shape[0].is_some_and(|n| n != *ndim)
                {
                    return Err(err(format!(
                        "the shape must be a 1-d integer vector of length {ndim}, got {}",
                        s.ty
                    )));
                }
                let shape = match s.value {
                    Some(v) => static_reshape(
                        self,
                        x.ty,
                        &v.to_i64_array().iter().copied().collect::<Vec<_>>(),
                    )?,
                    None => vec![None; *ndim],
                };
                Ok(vec![TensorType::new(x.ty.dtype, shape)])
            }
            Op::Shape => {
                let [x] = inputs else {
                    return Err(err(format!("expects 1 input, got {}", inputs.len())));
                };
                Ok(vec![TensorType::new(DType::I64, vec![Some(x.ty.ndim())])])
            }
            Op::ShapeI(i) => {
                let Some(x) = inputs.first() else {
                    return Err(err("expects at least 1 input, got 0".to_string()));
                };
                if *i >= x.ty.ndim() {
                    return Err(err(format!("dimension {i} out of range for {}", x.ty)));
                }
                if let Some(y) = inputs.iter().find(|y| y.ty.ndim() != x.ty.ndim()) {
                    return Err(err(format!(
                        "inputs of different ranks: {} and {}",
                        x.ty, y.ty
                    )));
                }
                Ok(vec![TensorType::scalar(DType::I64)])
            }
            Op::Subtensor { idx } => Ok(vec![subtensor::subtensor_type(idx, inputs).map_err(err)?]),
            Op::IncSubtensor { idx, .. } => Ok(vec![
                subtensor::inc_subtensor_type(idx, inputs).map_err(err)?
            ]),
            Op::AdvancedSubtensor1 { axis } => {
                Ok(vec![indexing::take_type(*axis, inputs).map_err(err)?])
            }
            Op::AdvancedIncSubtensor1 { axis, .. } => {
                Ok(vec![indexing::inc_type(*axis, inputs).map_err(err)?])
            }
            Op::BooleanMask => Ok(vec![indexing::mask_type(inputs).map_err(err)?]),
            Op::Join { axis } => Ok(vec![indexing::join_type(*axis, inputs).map_err(err)?]),
            Op::Split { axis, n } => indexing::split_types(*axis, *n, inputs).map_err(err),
            Op::Custom(c) => {
                c.infer_types(&inputs.iter().map(|i| i.ty.clone()).collect::<Vec<_>>())
            }
        }
    }
}

/// Checks a Composite's inputs against its declared input dtypes, or gives
/// the message of a type error.
fn check_composite_inputs(
    composite: &Composite,
    inputs: &[InputInfo<'_>],
) -> std::result::Result<(), String> {
    if inputs.len() != composite.inputs.len() {
        return Err(format!(
            "expects {} inputs, got {}",
            composite.inputs.len(),
            inputs.len()
        ));
    }
    for (k, (i, d)) in inputs.iter().zip(&composite.inputs).enumerate() {
        if i.ty.dtype != *d {
            return Err(format!(
                "input {k} has dtype {} but the composite expects {d}",
                i.ty.dtype
            ));
        }
    }
    Ok(())
}

/// The output type of a DimShuffle of an `input_ndim`-d `x` to `new_order`
/// (`None` inserts a broadcastable dimension), or the message of a type
/// error: a dropped dimension must be broadcastable.
fn dimshuffle_type(
    input_ndim: usize,
    new_order: &[Option<usize>],
    x: &TensorType,
) -> std::result::Result<TensorType, String> {
    if x.ndim() != input_ndim {
        return Err(format!("expects a {input_ndim}-d input, got {x}"));
    }
    let mut seen = vec![false; input_ndim];
    for d in new_order.iter().flatten() {
        if *d >= input_ndim || seen[*d] {
            return Err(format!("invalid order {new_order:?} for input {x}"));
        }
        seen[*d] = true;
    }
    for (d, kept) in seen.iter().enumerate() {
        if !kept && !x.is_broadcastable(d) {
            return Err(format!(
                "cannot drop dimension {d} of {x}: it is not broadcastable (size 1)"
            ));
        }
    }
    let shape = new_order
        .iter()
        .map(|d| d.map_or(Some(1), |d| x.shape[d]))
        .collect();
    Ok(TensorType::new(x.dtype, shape))
}

/// The output type of `dot(a, b)` on 1-d or 2-d operands, or the message of
/// a type error. Booleans give `i64`.
fn dot_type(inputs: &[InputInfo<'_>]) -> std::result::Result<TensorType, String> {
    let [a, b] = inputs else {
        return Err(format!("expects 2 inputs, got {}", inputs.len()));
    };
    let (na, nb) = (a.ty.ndim(), b.ty.ndim());
    if !(1..=2).contains(&na) || !(1..=2).contains(&nb) {
        let types = inputs
            .iter()
            .map(|i| i.ty.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        return Err(format!("expects 1-d or 2-d operands, got {types}"));
    }
    let ka = a.ty.shape[na - 1];
    let kb = b.ty.shape[0];
    if let (Some(x), Some(y)) = (ka, kb) {
        if x != y {
            return Err(format!("inner dimensions differ: {} and {}", a.ty, b.ty));
        }
    }
    let mut shape = Vec::new();
    if na == 2 {
        shape.push(a.ty.shape[0]);
    }
    if nb == 2 {
        shape.push(b.ty.shape[1]);
    }
    let mut dtype = DType::upcast(a.ty.dtype, b.ty.dtype);
    if dtype == DType::Bool {
        dtype = DType::I64;
    }
    Ok(TensorType::new(dtype, shape))
}

/// The output type of `BatchedDot(a, b)`, or the message of a type error:
/// both operands at least 2-d, `a`'s last dimension `b`'s second to last,
/// batch dimensions broadcastable (see [`Op::BatchedDot`]).
fn batched_dot_type(inputs: &[InputInfo<'_>]) -> std::result::Result<TensorType, String> {
    let [a, b] = inputs else {
        return Err(format!("expects 2 inputs, got {}", inputs.len()));
    };
    let (na, nb) = (a.ty.ndim(), b.ty.ndim());
    if na < 2 || nb < 2 {
        return Err(format!(
            "expects operands of at least 2 dimensions, got {} and {}",
            a.ty, b.ty
        ));
    }
    if let (Some(x), Some(y)) = (a.ty.shape[na - 1], b.ty.shape[nb - 2]) {
        if x != y {
            return Err(format!(
                "inner dimensions differ: {x} ({}) and {y} ({})",
                a.ty, b.ty
            ));
        }
    }
    let batch = na.max(nb) - 2;
    let mut shape = Vec::with_capacity(batch + 2);
    for d in 0..batch {
        // Dimension d of the output's batch, from the right-aligned operands.
        let da = (d + na >= batch + 2).then(|| a.ty.shape[d + na - 2 - batch]);
        let db = (d + nb >= batch + 2).then(|| b.ty.shape[d + nb - 2 - batch]);
        let size = match (da, db) {
            (None | Some(Some(1)), Some(s)) | (Some(s), None | Some(Some(1))) => s,
            (None, None) => unreachable!("the longer operand has every batch dimension"),
            (Some(Some(x)), Some(Some(y))) if x != y => {
                return Err(format!(
                    "batch dimensions differ: {x} and {y} ({} and {})",
                    a.ty, b.ty
                ));
            }
            (Some(x), Some(y)) => x.or(y),
        };
        shape.push(size);
    }
    shape.push(a.ty.shape[na - 2]);
    shape.push(b.ty.shape[nb - 1]);
    let mut dtype = DType::upcast(a.ty.dtype, b.ty.dtype);
    if dtype == DType::Bool {
        dtype = DType::I64;
    }
    Ok(TensorType::new(dtype, shape))
}

/// The run-time sizes of a `BatchedDot`: the broadcast batch shape and the
/// matrix sizes `m`, `k`, `n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchedDotShape {
    /// The output's batch dimensions (all but its last two).
    pub batch: Vec<usize>,
    /// Rows of each product.
    pub m: usize,
    /// The inner (summed) dimension.
    pub k: usize,
    /// Columns of each product.
    pub n: usize,
}

/// Checks the run-time shapes of `BatchedDot`'s operands (at least 2-d,
/// with their static types' broadcastable flags `a_bc` / `b_bc`) and
/// computes the output's sizes, or the message of the error: the inner
/// dimensions agree, a statically broadcastable batch dimension has size 1,
/// the others agree. The reference `perform` and the linker share it.
pub fn batched_dot_shape(
    a: &[usize],
    b: &[usize],
    a_bc: &[bool],
    b_bc: &[bool],
) -> std::result::Result<BatchedDotShape, String> {
    let (na, nb) = (a.len(), b.len());
    if na < 2 || nb < 2 || a_bc.len() != na || b_bc.len() != nb {
        return Err(format!(
            "expects operands of at least 2 dimensions, got shapes {a:?} and {b:?}"
        ));
    }
    let (k, kb) = (a[na - 1], b[nb - 2]);
    if k != kb {
        return Err(format!(
            "shapes {a:?} and {b:?} are not aligned: {k} (dim {}) != {kb} (dim {})",
            na - 1,
            nb - 2
        ));
    }
    let nbatch = na.max(nb) - 2;
    let mut batch = Vec::with_capacity(nbatch);
    for d in 0..nbatch {
        let mut size = None;
        for (name, shape, bc) in [("a", a, a_bc), ("b", b, b_bc)] {
            let Some(i) = (d + shape.len()).checked_sub(nbatch + 2) else {
                continue;
            };
            let s = shape[i];
            if bc[i] {
                if s != 1 {
                    return Err(format!(
                        "{name} is broadcastable in dimension {i} but has size {s}"
                    ));
                }
                continue;
            }
            match size {
                Some(prev) if prev != s => {
                    return Err(format!(
                        "batch dimensions differ: shapes {a:?} and {b:?} ({prev} != {s})"
                    ));
                }
                _ => size = Some(s),
            }
        }
        batch.push(size.unwrap_or(1));
    }
    Ok(BatchedDotShape {
        batch,
        m: a[na - 2],
        k,
        n: b[nb - 1],
    })
}

/// The output type of `Alloc(value, *dims)`, or the message of a type error:
/// each dimension is a 0-d integer (its size is static when it is a
/// constant), and the value broadcasts to the shape.
fn alloc_type(inputs: &[InputInfo<'_>]) -> std::result::Result<TensorType, String> {
    let Some((v, dims)) = inputs.split_first() else {
        return Err("expects a value and one scalar per dimension".to_string());
    };
    let mut shape = Vec::with_capacity(dims.len());
    for (k, d) in dims.iter().enumerate() {
        if d.ty.ndim() != 0 || !(d.ty.dtype.is_int()) {
            return Err(format!(
                "shape input {k} must be a 0-d integer, got {}",
                d.ty
            ));
        }
        let size = d
            .value
            .and_then(|v| v.to_i64_array().iter().next().copied());
        if let Some(n) = size.filter(|&n| n < 0) {
            return Err(format!("negative size {n} for dimension {k}"));
        }
        shape.push(size.map(|n| n as usize));
    }
    if v.ty.ndim() > dims.len() {
        return Err(format!(
            "value {} has more dimensions than the shape ({})",
            v.ty,
            dims.len()
        ));
    }
    let off = dims.len() - v.ty.ndim();
    for (k, vd) in v.ty.shape.iter().enumerate() {
        match (vd, shape[off + k]) {
            (Some(1), _) => {}
            (Some(a), Some(b)) if *a != b => {
                return Err(format!(
                    "value {} cannot broadcast to dimension {} of size {b}",
                    v.ty,
                    off + k
                ))
            }
            (Some(a), None) => shape[off + k] = Some(*a),
            _ => {}
        }
    }
    Ok(TensorType::new(v.ty.dtype, shape))
}

/// The output type of a Gemm on `(z, alpha, x, y, beta)`, or the message
/// of a type error. The output has `z`'s dtype and ndim; each static size
/// known for `z` or for `dot(x, y)` is kept (they must agree).
fn gemm_type(inputs: &[InputInfo<'_>]) -> std::result::Result<TensorType, String> {
    let [z, alpha, x, y, beta] = inputs else {
        return Err(format!(
            "expects 5 inputs (z, alpha, x, y, beta), got {}",
            inputs.len()
        ));
    };
    let dtype = z.ty.dtype;
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(format!("z must be f32 or f64, got {}", z.ty));
    }
    for (what, s) in [("alpha", alpha), ("beta", beta)] {
        if s.ty.ndim() != 0 || s.ty.dtype != dtype {
            return Err(format!("{what} must be a 0-d {dtype}, got {}", s.ty));
        }
    }
    for (what, m) in [("x", x), ("y", y)] {
        if m.ty.dtype != dtype || !(1..=2).contains(&m.ty.ndim()) {
            return Err(format!(
                "{what} must be a 1-d or 2-d {dtype} (z's dtype), got {}",
                m.ty
            ));
        }
    }
    let (nx, ny) = (x.ty.ndim(), y.ty.ndim());
    if let (Some(a), Some(b)) = (x.ty.shape[nx - 1], y.ty.shape[0]) {
        if a != b {
            return Err(format!("inner dimensions differ: {} and {}", x.ty, y.ty));
        }
    }
    let mut dot_shape = Vec::with_capacity(2);
    if nx == 2 {
        dot_shape.push(x.ty.shape[0]);
    }
    if ny == 2 {
        dot_shape.push(y.ty.shape[1]);
    }
    if dot_shape.len() != z.ty.ndim() {
        return Err(format!(
            "dot({}, {}) has {} dimensions but z {} has {}",
            x.ty,
            y.ty,
            dot_shape.len(),
            z.ty,
            z.ty.ndim()
        ));
    }
    let mut shape = Vec::with_capacity(dot_shape.len());
    for (d, (&zs, &ds)) in z.ty.shape.iter().zip(&dot_shape).enumerate() {
        match (zs, ds) {
            (Some(a), Some(b)) if a != b => {
                return Err(format!(
                    "z {} and dot({}, {}) differ in dimension {d}: {a} and {b}",
                    z.ty, x.ty, y.ty
                ))
            }
            (Some(a), _) | (None, Some(a)) => shape.push(Some(a)),
            (None, None) => shape.push(None),
        }
    }
    Ok(TensorType::new(dtype, shape))
}

/// The `i64` output type of an arg-reduction of `x` over `axis`, or the
/// message of a type error: the axis in range and not statically empty.
fn argreduce_type(
    op: ArgOp,
    axis: Option<usize>,
    x: &TensorType,
) -> std::result::Result<TensorType, String> {
    match axis {
        Some(a) if a >= x.ndim() => Err(format!("axis {a} out of range for input {x}")),
        Some(a) if x.shape[a] == Some(0) => Err(format!(
            "attempt to get arg{} of an empty sequence: axis {a} of {x} has size 0",
            op.word()
        )),
        None if x.static_size() == Some(0) => Err(format!(
            "attempt to get arg{} of an empty sequence: {x} has no element",
            op.word()
        )),
        Some(a) => {
            let mut shape = x.shape.clone();
            shape.remove(a);
            Ok(TensorType::new(DType::I64, shape))
        }
        None => Ok(TensorType::scalar(DType::I64)),
    }
}

/// `Sum{axes=[1]}`, `Max{axes=None}`.
fn reduce_name(op: ReduceOp, axes: &Option<Vec<usize>>) -> String {
    match axes {
        None => format!("{}{{axes=None}}", op.name()),
        Some(a) => format!("{}{{axes={a:?}}}", op.name()),
    }
}

/// A `FusedReduce`'s operands (or anything parallel to them) split into
/// its pre-map's (the first `pre.inputs.len()`) and its post-map's extras.
pub fn split_fused<'a, T>(pre: &Composite, xs: &'a [T]) -> (&'a [T], &'a [T]) {
    xs.split_at(pre.inputs.len().min(xs.len()))
}

/// The pre-map (or post-map) of a FusedReduce as printed after the
/// reduction's name: `{exp(sub(i0, i1))}` (the Composite's text without its
/// `Composite` prefix).
pub fn pre_text(pre: &Composite) -> String {
    let s = pre.to_string();
    s.strip_prefix("Composite").unwrap_or(&s).to_string()
}

/// The type of reducing a value of type `x` with `op` over `axes`
/// (checked: sorted, distinct, in range).
/// The output type of reducing `x` over `axes`, or the message of a type error.
fn reduced_type(
    op: ReduceOp,
    axes: &Option<Vec<usize>>,
    x: &TensorType,
) -> std::result::Result<TensorType, String> {
    if let Some(axes) = axes {
        if axes.windows(2).any(|w| w[0] >= w[1]) || axes.iter().any(|&a| a >= x.ndim()) {
            return Err(format!("invalid axes {axes:?} for input {x}"));
        }
    }
    let keep = |d: usize| axes.as_ref().is_some_and(|a| !a.contains(&d));
    let shape = (0..x.ndim())
        .filter(|&d| keep(d))
        .map(|d| x.shape[d])
        .collect();
    Ok(TensorType::new(op.output_dtype(x.dtype), shape))
}

/// A coarse classification of ops, used by rewriters' `tracks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum OpKind {
    Elemwise(ScalarOp),
    Composite,
    DimShuffle,
    CAReduce,
    FusedReduce,
    ArgReduce,
    Softmax,
    LogSumExp,
    CumReduce,
    Dot,
    BatchedDot,
    Gemm,
    Alloc,
    Reshape,
    Shape,
    ShapeI,
    Subtensor,
    IncSubtensor,
    AdvancedSubtensor1,
    AdvancedIncSubtensor1,
    BooleanMask,
    Join,
    Split,
    Custom,
}

/// The static output shape of an element-wise op: inputs must have the same
/// ndim; per dimension, known sizes other than 1 must agree.
pub fn broadcast_shapes(
    op: &(impl std::fmt::Display + ?Sized),
    inputs: &[InputInfo<'_>],
) -> Result<Vec<Option<usize>>> {
    let Some(first) = inputs.first() else {
        return Err(Error::ty(op.to_string(), "expects at least one input"));
    };
    let ndim = first.ty.ndim();
    if let Some(bad) = inputs.iter().find(|i| i.ty.ndim() != ndim) {
        return Err(Error::ty(
            op.to_string(),
            format!(
                "inputs have different numbers of dimensions: {} and {}",
                first.ty, bad.ty
            ),
        ));
    }
    let mut shape = Vec::with_capacity(ndim);
    for d in 0..ndim {
        let mut out: Option<usize> = Some(1);
        let mut unknown = false;
        for i in inputs {
            match i.ty.shape[d] {
                Some(1) => {}
                None => unknown = true,
                Some(n) => match out {
                    Some(1) => out = Some(n),
                    Some(m) if m != n => {
                        let types: Vec<String> = inputs.iter().map(|i| i.ty.to_string()).collect();
                        return Err(Error::ty(
                            op.to_string(),
                            format!(
                                "shapes do not broadcast in dimension {d}: {}",
                                types.join(", ")
                            ),
                        ));
                    }
                    _ => {}
                },
            }
        }
        if unknown && out == Some(1) {
            out = None;
        }
        shape.push(out);
    }
    Ok(shape)
}

fn static_reshape(
    op: &(impl std::fmt::Display + ?Sized),
    x: &TensorType,
    target: &[i64],
) -> Result<Vec<Option<usize>>> {
    if target.iter().filter(|&&d| d == -1).count() > 1 || target.iter().any(|&d| d < -1) {
        return Err(Error::ty(
            op.to_string(),
            format!("invalid target shape {target:?}"),
        ));
    }
    let known: i64 = target.iter().filter(|&&d| d >= 0).product();
    let mut shape: Vec<Option<usize>> = target
        .iter()
        .map(|&d| (d >= 0).then_some(d as usize))
        .collect();
    if let Some(size) = x.static_size() {
        let size = size as i64;
        if let Some(pos) = target.iter().position(|&d| d == -1) {
            if known == 0 || size % known != 0 {
                return Err(Error::ty(
                    op.to_string(),
                    format!("cannot reshape {x} to {target:?}"),
                ));
            }
            shape[pos] = Some((size / known) as usize);
        } else if known != size {
            return Err(Error::ty(
                op.to_string(),
                format!("cannot reshape {x} (size {size}) to {target:?}"),
            ));
        }
    }
    Ok(shape)
}

impl PartialEq for Op {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (
                Op::Elemwise {
                    scalar: a,
                    inplace: p,
                },
                Op::Elemwise {
                    scalar: b,
                    inplace: q,
                },
            ) => a == b && p == q,
            (
                Op::Composite {
                    composite: a,
                    inplace: p,
                },
                Op::Composite {
                    composite: b,
                    inplace: q,
                },
            ) => (Arc::ptr_eq(a, b) || a == b) && p == q,
            (
                Op::DimShuffle {
                    input_ndim: a,
                    new_order: x,
                },
                Op::DimShuffle {
                    input_ndim: b,
                    new_order: y,
                },
            ) => a == b && x == y,
            (Op::CAReduce { op: a, axes: x }, Op::CAReduce { op: b, axes: y }) => a == b && x == y,
            (
                Op::FusedReduce {
                    op: a,
                    axes: x,
                    pre: p,
                    post: f,
                },
                Op::FusedReduce {
                    op: b,
                    axes: y,
                    pre: q,
                    post: g,
                },
            ) => {
                let same = |p: &Arc<Composite>, q: &Arc<Composite>| Arc::ptr_eq(p, q) || p == q;
                a == b
                    && x == y
                    && same(p, q)
                    && match (f, g) {
                        (Some(f), Some(g)) => same(f, g),
                        (None, None) => true,
                        _ => false,
                    }
            }
            (
                Op::ArgReduce {
                    op: a,
                    axis: x,
                    with_value: p,
                },
                Op::ArgReduce {
                    op: b,
                    axis: y,
                    with_value: q,
                },
            ) => a == b && x == y && p == q,
            (Op::Softmax { axis: a, log: p }, Op::Softmax { axis: b, log: q }) => a == b && p == q,
            (Op::LogSumExp { axis: a }, Op::LogSumExp { axis: b }) => a == b,
            (Op::CumReduce { op: a, axis: x }, Op::CumReduce { op: b, axis: y }) => {
                a == b && x == y
            }
            (Op::Dot, Op::Dot)
            | (Op::BatchedDot, Op::BatchedDot)
            | (Op::Alloc, Op::Alloc)
            | (Op::Shape, Op::Shape) => true,
            (Op::Gemm { inplace: a }, Op::Gemm { inplace: b }) => a == b,
            (Op::Reshape { ndim: a }, Op::Reshape { ndim: b }) => a == b,
            (Op::ShapeI(a), Op::ShapeI(b)) => a == b,
            (Op::Subtensor { idx: a }, Op::Subtensor { idx: b }) => a == b,
            (
                Op::IncSubtensor {
                    idx: a,
                    set: s,
                    inplace: p,
                },
                Op::IncSubtensor {
                    idx: b,
                    set: t,
                    inplace: q,
                },
            ) => a == b && s == t && p == q,
            (Op::AdvancedSubtensor1 { axis: a }, Op::AdvancedSubtensor1 { axis: b })
            | (Op::Join { axis: a }, Op::Join { axis: b }) => a == b,
            (
                Op::AdvancedIncSubtensor1 { axis: a, set: p },
                Op::AdvancedIncSubtensor1 { axis: b, set: q },
            ) => a == b && p == q,
            (Op::BooleanMask, Op::BooleanMask) => true,
            (Op::Split { axis: a, n: p }, Op::Split { axis: b, n: q }) => a == b && p == q,
            (Op::Custom(a), Op::Custom(b)) => a.name() == b.name() && a.params() == b.params(),
            _ => false,
        }
    }
}

impl Eq for Op {}

impl Hash for Op {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Op::Elemwise { scalar, inplace } => {
                scalar.hash(state);
                inplace.hash(state);
            }
            Op::Composite { composite, inplace } => {
                composite.hash(state);
                inplace.hash(state);
            }
            Op::DimShuffle {
                input_ndim,
                new_order,
            } => {
                input_ndim.hash(state);
                new_order.hash(state);
            }
            Op::CAReduce { op, axes } => {
                op.hash(state);
                axes.hash(state);
            }
            Op::FusedReduce {
                op,
                axes,
                pre,
                post,
            } => {
                op.hash(state);
                axes.hash(state);
                pre.hash(state);
                post.hash(state);
            }
            Op::ArgReduce {
                op,
                axis,
                with_value,
            } => {
                op.hash(state);
                axis.hash(state);
                with_value.hash(state);
            }
            Op::Softmax { axis, log } => {
                axis.hash(state);
                log.hash(state);
            }
            Op::LogSumExp { axis } => axis.hash(state),
            Op::CumReduce { op, axis } => {
                op.hash(state);
                axis.hash(state);
            }
            Op::Reshape { ndim } => ndim.hash(state),
            Op::Gemm { inplace } => inplace.hash(state),
            Op::ShapeI(i) => i.hash(state),
            Op::Subtensor { idx } => idx.hash(state),
            Op::IncSubtensor { idx, set, inplace } => {
                idx.hash(state);
                set.hash(state);
                inplace.hash(state);
            }
            Op::AdvancedSubtensor1 { axis } | Op::Join { axis } => axis.hash(state),
            Op::AdvancedIncSubtensor1 { axis, set } => {
                axis.hash(state);
                set.hash(state);
            }
            Op::Split { axis, n } => {
                axis.hash(state);
                n.hash(state);
            }
            Op::Custom(c) => {
                c.name().hash(state);
                c.params().hash(state);
            }
            Op::Dot | Op::BatchedDot | Op::Alloc | Op::Shape | Op::BooleanMask => {}
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exp_chain(n: usize) -> Op {
        let mut c = Composite::new(vec![DType::F64]);
        let mut r = CRef::Input(0);
        for _ in 0..n {
            r = c.push(ScalarOp::Exp, &[r]).unwrap();
        }
        c.outputs = vec![r];
        Op::Composite {
            composite: Arc::new(c),
            inplace: Default::default(),
        }
    }

    #[test]
    fn short_names_of_large_composites_give_their_size() {
        let small = exp_chain(SHORT_NAME_NODES);
        assert_eq!(small.short_name(), small.name());
        assert!(
            small.name().starts_with("Composite{exp(exp("),
            "{}",
            small.name()
        );
        let large = exp_chain(SHORT_NAME_NODES + 1);
        assert_eq!(large.short_name(), "Composite{17 scalar ops, 1 outputs}");
        assert!(large.name().len() > 50);
    }
}
