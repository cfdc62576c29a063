//! Lowering of the arg-reductions (`Op::ArgReduce`: `argmax`, `argmin`,
//! `MaxAndArgmax`): a step run by the executor's native scan (no kernel is
//! generated; the scan is a Rust loop specialised per dtype).
//!
//! Invariant: the step names the value slot exactly when the node has the
//! value output (its first output), and the index slot is the last output.

use super::ctx::NodeSlots;
use crate::linker::plan::step::{ArgReduceStep, Step};
use crate::linker::plan::Lowering;
use crate::ops::ArgOp;

/// Lowers an arg-reduction of `op` over `axis`, with the value output first
/// when `with_value`.
pub fn lower_argreduce(
    io: &NodeSlots,
    op: ArgOp,
    axis: Option<usize>,
    with_value: bool,
) -> (Step, Lowering) {
    let (value, index) = if with_value {
        (Some(io.outs[0]), io.outs[1])
    } else {
        (None, io.outs[0])
    };
    let step = ArgReduceStep {
        op,
        axis,
        input: io.ins[0],
        value,
        index,
    };
    (Step::ArgReduce(step), Lowering::Native)
}
