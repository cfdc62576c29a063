//! Lowering: how each node of the scheduled graph runs. One file per op
//! family turns a node into its [`Step`] (and asks `codegen` for the
//! kernels it needs, through the context's kernel table); [`lower_node`]
//! is the one `match` over the op set that picks the family.
//!
//! Adding an op family: a step description in `plan::step`, a file here
//! with its lowering and an arm in [`lower_node`], a file in `exec` with
//! its executor and an arm in `exec`'s dispatch (and, when it generates
//! kernels, their code in `codegen`). The compiler's exhaustiveness checks
//! on `Op` and `Step` point at both arms.
//!
//! Invariant: a family's lowering reads the graph only through the node
//! it is given and the context, and records every static fact its executor
//! checks at run time in the step.

pub mod argreduce;
pub mod ctx;
pub mod cumulative;
pub mod custom;
pub mod elemwise;
pub mod gemm;
pub mod indexing;
pub mod reduce;
pub mod shape;
pub mod softmax;
pub mod subtensor;

use ctx::{LowerCx, NodeSlots};

use crate::error::Result;
use crate::graph::Apply;
use crate::linker::plan::step::{LanePass, Step};
use crate::linker::plan::Lowering;
use crate::ops::Op;

/// The step of `node` (whose inputs and outputs have the slots `io`) and
/// how it is lowered.
pub fn lower_node(cx: &mut LowerCx<'_>, node: &Apply, io: &NodeSlots) -> Result<(Step, Lowering)> {
    match &node.op {
        Op::Elemwise { .. } | Op::Composite { .. } => elemwise::lower(cx, node, io),
        Op::CAReduce { op, axes } => reduce::lower_careduce(cx, node, io, *op, axes),
        Op::FusedReduce {
            op,
            axes,
            pre,
            post,
        } => reduce::lower_fused(cx, node, io, *op, axes, (pre, post.as_deref())),
        Op::DimShuffle { new_order, .. } => Ok(shape::lower_dimshuffle(io, new_order)),
        Op::Reshape { .. } => Ok(shape::lower_reshape(cx, node, io)),
        Op::Alloc => Ok(shape::lower_alloc(cx, node, io)),
        Op::Shape => Ok(shape::lower_shape(io)),
        Op::ShapeI(i) => Ok(shape::lower_shape_i(cx, node, io, *i)),
        Op::ArgReduce {
            op,
            axis,
            with_value,
        } => Ok(argreduce::lower_argreduce(io, *op, *axis, *with_value)),
        Op::Softmax { axis, log } => {
            let pass = if *log {
                LanePass::LogSoftmax
            } else {
                LanePass::Softmax
            };
            Ok(softmax::lower_softmax(io, *axis, pass))
        }
        Op::LogSumExp { axis } => Ok(softmax::lower_softmax(io, *axis, LanePass::LogSumExp)),
        Op::CumReduce { op, axis } => Ok(cumulative::lower_cumulative(cx, node, io, *op, *axis)),
        Op::Dot => gemm::lower_dot(cx, node, io),
        Op::BatchedDot => gemm::lower_batched_dot(cx, node, io),
        Op::Gemm { inplace } => gemm::lower_gemm(cx, node, io, *inplace),
        Op::Subtensor { idx } => Ok(subtensor::lower_subtensor(cx, node, io, idx)),
        Op::IncSubtensor { idx, set, inplace } => {
            subtensor::lower_inc_subtensor(cx, node, io, idx, *set, *inplace)
        }
        Op::AdvancedSubtensor1 { axis } => Ok(indexing::lower_take(cx, node, io, *axis)),
        Op::AdvancedIncSubtensor1 { axis, set } => {
            Ok(indexing::lower_inc(cx, node, io, *axis, *set))
        }
        Op::BooleanMask => Ok(indexing::lower_boolean_mask(cx, node, io)),
        Op::Join { axis } => Ok(indexing::lower_join(cx, node, io, *axis)),
        Op::Split { axis, .. } => Ok(indexing::lower_split(cx, node, io, *axis)),
        Op::Custom(c) => Ok(custom::lower_custom(cx, node, io, c)),
    }
}
