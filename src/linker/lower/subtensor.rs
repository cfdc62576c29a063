//! Lowering of the indexing family: `Subtensor` becomes a view step (no
//! kernel, no copy), `IncSubtensor` a step running one element-wise
//! update kernel (`ops::subtensor::update_program`) over the view of the
//! selection in `x`'s array or in its copy.
//!
//! Invariant: the steps carry every static fact their executor checks at
//! run time: the output's static sizes (views) and which dimensions of the
//! new values are statically broadcastable (updates).

use super::ctx::{LowerCx, NodeSlots};
use crate::error::Result;
use crate::graph::Apply;
use crate::linker::plan::step::{IncSubtensorStep, Step, SubtensorStep};
use crate::linker::plan::Lowering;
use crate::ops::subtensor::update_program;
use crate::ops::IndexEntry;

/// Lowers a `Subtensor` to a view step.
pub fn lower_subtensor(
    cx: &LowerCx<'_>,
    node: &Apply,
    io: &NodeSlots,
    idx: &[IndexEntry],
) -> (Step, Lowering) {
    let step = SubtensorStep {
        input: io.ins[0],
        bounds: io.ins[1..].to_vec(),
        output: io.outs[0],
        idx: idx.to_vec(),
        out_shape: cx.fg.ty(node.outputs[0]).shape.clone(),
    };
    (Step::Subtensor(step), Lowering::Metadata)
}

/// Lowers an `IncSubtensor` (`set`: a `SetSubtensor`) to an update step
/// with its kernel.
pub fn lower_inc_subtensor(
    cx: &mut LowerCx<'_>,
    node: &Apply,
    io: &NodeSlots,
    idx: &[IndexEntry],
    set: bool,
    inplace: bool,
) -> Result<(Step, Lowering)> {
    let fg = cx.fg;
    let (xt, yt) = (fg.ty(node.inputs[0]), fg.ty(node.inputs[1]));
    let kernel = cx.kernels.elem(update_program(set, xt.dtype, yt.dtype)?)?;
    let step = IncSubtensorStep {
        kernel,
        x: io.ins[0],
        y: io.ins[1],
        bounds: io.ins[2..].to_vec(),
        output: io.outs[0],
        idx: idx.to_vec(),
        set,
        inplace,
        y_bcast: yt.broadcastable(),
        dtypes: (xt.dtype, yt.dtype),
        descs: (cx.describe(node.inputs[0]), cx.describe(node.inputs[1])),
    };
    Ok((Step::IncSubtensor(step), Lowering::Jit))
}
