//! Lowering of user ops (`Custom`): run by their reference `perform`, with
//! their declared output types kept so that the executor checks the values
//! they return before any kernel reads them.
//!
//! Invariant: no kernel is generated for a user op; its inputs reach it as
//! owned values and its results enter the slot table only after the check.

use std::sync::Arc;

use super::ctx::{LowerCx, NodeSlots};
use crate::graph::Apply;
use crate::linker::plan::step::CustomStep;
use crate::linker::plan::step::Step;
use crate::linker::plan::Lowering;
use crate::ops::CustomOp;

/// Lowers a node of the user op `op`.
pub fn lower_custom(
    cx: &LowerCx<'_>,
    node: &Apply,
    io: &NodeSlots,
    op: &Arc<dyn CustomOp>,
) -> (Step, Lowering) {
    let step = CustomStep {
        op: op.clone(),
        inputs: io.ins.clone(),
        outputs: io.outs.clone(),
        out_types: node.outputs.iter().map(|&o| cx.fg.ty(o).clone()).collect(),
    };
    (Step::Custom(step), Lowering::Fallback)
}
