//! Lowering of the shape family (`DimShuffle`, `Reshape`, `Alloc`,
//! `Shape`, `ShapeI`): views and shape metadata computed by the executor
//! without a kernel (`Alloc` fills with the strided-copy kernel).
//!
//! Invariant: steps whose output shape comes from run-time values
//! (`Reshape`, `Alloc`) carry the output's static sizes, which the
//! executor checks before any kernel reads the result.

use super::ctx::{LowerCx, NodeSlots};
use crate::graph::Apply;
use crate::linker::plan::step::Step;
use crate::linker::plan::step::{AllocStep, DimShuffleStep, ReshapeStep, ShapeIStep, ShapeStep};
use crate::linker::plan::Lowering;

/// Lowers a `DimShuffle` to `new_order`.
pub fn lower_dimshuffle(io: &NodeSlots, new_order: &[Option<usize>]) -> (Step, Lowering) {
    let step = DimShuffleStep {
        input: io.ins[0],
        output: io.outs[0],
        new_order: new_order.to_vec(),
    };
    (Step::DimShuffle(step), Lowering::Metadata)
}

/// Lowers a `Reshape`.
pub fn lower_reshape(cx: &LowerCx<'_>, node: &Apply, io: &NodeSlots) -> (Step, Lowering) {
    let step = ReshapeStep {
        input: io.ins[0],
        shape: io.ins[1],
        output: io.outs[0],
        out_shape: cx.fg.ty(node.outputs[0]).shape.clone(),
    };
    (Step::Reshape(step), Lowering::Metadata)
}

/// Lowers an `Alloc`.
pub fn lower_alloc(cx: &LowerCx<'_>, node: &Apply, io: &NodeSlots) -> (Step, Lowering) {
    let step = AllocStep {
        value: io.ins[0],
        dims: io.ins[1..].to_vec(),
        output: io.outs[0],
        out_shape: cx.fg.ty(node.outputs[0]).shape.clone(),
    };
    (Step::Alloc(step), Lowering::Native)
}

/// Lowers a `Shape`.
pub fn lower_shape(io: &NodeSlots) -> (Step, Lowering) {
    let step = ShapeStep {
        input: io.ins[0],
        output: io.outs[0],
    };
    (Step::Shape(step), Lowering::Metadata)
}

/// Lowers a `ShapeI` of dimension `dim`.
pub fn lower_shape_i(
    cx: &LowerCx<'_>,
    node: &Apply,
    io: &NodeSlots,
    dim: usize,
) -> (Step, Lowering) {
    let step = ShapeIStep {
        inputs: io.ins.clone(),
        bcast: node
            .inputs
            .iter()
            .map(|&v| cx.fg.ty(v).broadcastable())
            .collect(),
        dim,
        output: io.outs[0],
    };
    (Step::ShapeI(step), Lowering::Metadata)
}
