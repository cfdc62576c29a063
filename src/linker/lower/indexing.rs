//! Lowering of the indexing and joining family (`AdvancedSubtensor1`,
//! `AdvancedIncSubtensor1`, `BooleanMask`, `Join`, `Split`): data movement
//! run by typed Rust loops in the executor (`exec::indexing`), no kernel.
//!
//! Invariant: each step carries the static sizes of its outputs (and, for
//! an indexed update, which dimensions of `y` broadcast), which the
//! executor checks against the run-time shapes it computes.

use super::ctx::{LowerCx, NodeSlots};
use crate::graph::Apply;
use crate::linker::plan::step::{
    BooleanMaskStep, IncTakeStep, JoinStep, SplitStep, Step, TakeStep,
};
use crate::linker::plan::Lowering;

/// Lowers an `AdvancedSubtensor1` along `axis`.
pub fn lower_take(cx: &LowerCx<'_>, node: &Apply, io: &NodeSlots, axis: usize) -> (Step, Lowering) {
    let step = TakeStep {
        x: io.ins[0],
        idx: io.ins[1],
        output: io.outs[0],
        axis,
        out_shape: cx.fg.ty(node.outputs[0]).shape.clone(),
    };
    (Step::Take(step), Lowering::Native)
}

/// Lowers an `AdvancedIncSubtensor1` along `axis`.
pub fn lower_inc(
    cx: &LowerCx<'_>,
    node: &Apply,
    io: &NodeSlots,
    axis: usize,
    set: bool,
) -> (Step, Lowering) {
    let step = IncTakeStep {
        x: io.ins[0],
        y: io.ins[1],
        idx: io.ins[2],
        output: io.outs[0],
        axis,
        set,
        y_bcast: cx.fg.ty(node.inputs[1]).broadcastable(),
    };
    (Step::IncTake(step), Lowering::Native)
}

/// Lowers a `BooleanMask`.
pub fn lower_boolean_mask(cx: &LowerCx<'_>, node: &Apply, io: &NodeSlots) -> (Step, Lowering) {
    let step = BooleanMaskStep {
        x: io.ins[0],
        mask: io.ins[1],
        output: io.outs[0],
        out_shape: cx.fg.ty(node.outputs[0]).shape.clone(),
    };
    (Step::BooleanMask(step), Lowering::Native)
}

/// Lowers a `Join` along `axis`.
pub fn lower_join(cx: &LowerCx<'_>, node: &Apply, io: &NodeSlots, axis: usize) -> (Step, Lowering) {
    let step = JoinStep {
        inputs: io.ins.to_vec(),
        output: io.outs[0],
        axis,
        out_shape: cx.fg.ty(node.outputs[0]).shape.clone(),
    };
    (Step::Join(step), Lowering::Native)
}

/// Lowers a `Split` along `axis`: views, no data moves.
pub fn lower_split(
    cx: &LowerCx<'_>,
    node: &Apply,
    io: &NodeSlots,
    axis: usize,
) -> (Step, Lowering) {
    let step = SplitStep {
        x: io.ins[0],
        sizes: io.ins[1],
        outputs: io.outs.to_vec(),
        axis,
        out_shapes: node
            .outputs
            .iter()
            .map(|&o| cx.fg.ty(o).shape.clone())
            .collect(),
    };
    (Step::Split(step), Lowering::Metadata)
}
