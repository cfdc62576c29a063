//! Lowering of the cumulative ops (`Op::CumReduce`: `cumsum`, `cumprod`):
//! a step run by the executor's native scan (no kernel is generated).
//!
//! Invariant: the step carries the node's output dtype, which the executor
//! allocates and accumulates in.

use super::ctx::{LowerCx, NodeSlots};
use crate::graph::Apply;
use crate::linker::plan::step::{CumReduceStep, Step};
use crate::linker::plan::Lowering;
use crate::ops::ReduceOp;

/// Lowers a cumulative `op` along `axis`.
pub fn lower_cumulative(
    cx: &LowerCx<'_>,
    node: &Apply,
    io: &NodeSlots,
    op: ReduceOp,
    axis: Option<usize>,
) -> (Step, Lowering) {
    let step = CumReduceStep {
        op,
        axis,
        input: io.ins[0],
        output: io.outs[0],
        out: cx.fg.ty(node.outputs[0]).dtype,
    };
    (Step::CumReduce(step), Lowering::Native)
}
