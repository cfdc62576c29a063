//! Lowering of the softmax family (`Op::Softmax`: `softmax`,
//! `log_softmax`; `Op::LogSumExp`): a step run by the executor's native
//! lane passes, which call kiln-runtime's vectorised max, exp and shifted
//! exp-sum (no Cranelift kernel is generated).
//!
//! Invariant: the step carries the node's axis and flavour unchanged.

use super::ctx::NodeSlots;
use crate::linker::plan::step::{LanePass, SoftmaxStep, Step};
use crate::linker::plan::Lowering;

/// Lowers one op of the softmax family (`pass`) along `axis`.
pub fn lower_softmax(io: &NodeSlots, axis: Option<usize>, pass: LanePass) -> (Step, Lowering) {
    let step = SoftmaxStep {
        axis,
        pass,
        input: io.ins[0],
        output: io.outs[0],
    };
    (Step::Softmax(step), Lowering::Runtime)
}
