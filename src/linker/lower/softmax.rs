//! Lowering of the softmax family (`Op::Softmax`: `softmax`,
//! `log_softmax`): a step run by the executor's native row passes, which
//! call kiln-runtime's vectorised max, exp and shifted exp-sum (no
//! Cranelift kernel is generated).
//!
//! Invariant: the step carries the node's axis and flavour unchanged.

use super::ctx::NodeSlots;
use crate::linker::plan::step::{SoftmaxStep, Step};
use crate::linker::plan::Lowering;

/// Lowers a softmax (`log`: log-softmax) along `axis`.
pub fn lower_softmax(io: &NodeSlots, axis: Option<usize>, log: bool) -> (Step, Lowering) {
    let step = SoftmaxStep {
        axis,
        log,
        input: io.ins[0],
        output: io.outs[0],
    };
    (Step::Softmax(step), Lowering::Runtime)
}
