//! Lowering of the element-wise family (`Elemwise`, `Composite`): the
//! node's scalar program with its size-1 constants inlined becomes one JIT
//! kernel (shared by equal programs), run by an [`ElemwiseStep`] over the
//! broadcast shape of its remaining array operands.
//!
//! Invariants: a constant is inlined only when it has one element and every
//! dimension statically broadcastable, and a node with dimensions keeps at
//! least one array operand (the iteration's rank is its operands'); an inplace output's `destroy_map`
//! entry is re-indexed to the kept operands, and overwriting an inlined
//! constant is a compile error.

use super::ctx::{LowerCx, NodeSlots};
use crate::error::{Error, Result};
use crate::graph::{Apply, DType, Element, FunctionGraph, VarId};
use crate::linker::codegen::elemwise::{inline_constants, single_op_program, Paths};
use crate::linker::codegen::hoist;
use crate::linker::plan::step::ElemwiseStep;
use crate::linker::plan::step::Step;
use crate::linker::plan::{Lowering, Slot};
use crate::ops::{Op, ScalarConst};

/// Lowers an `Elemwise` or `Composite` node.
pub fn lower(cx: &mut LowerCx<'_>, node: &Apply, io: &NodeSlots) -> Result<(Step, Lowering)> {
    let fg = cx.fg;
    let mut consts = inline_consts(fg, &node.inputs);
    // The iteration takes its rank from its array operands: when every input
    // is an inlinable constant (mode none keeps `[3.0] - 2.0` unfolded) and
    // the output has dimensions, the first stays an operand.
    if consts.iter().all(Option::is_some) && fg.ty(node.outputs[0]).ndim() > 0 {
        consts[0] = None;
    }
    let prog = match &node.op {
        Op::Elemwise { scalar, .. } => {
            let in_dts: Vec<DType> = node.inputs.iter().map(|&v| fg.ty(v).dtype).collect();
            single_op_program(*scalar, &in_dts, &consts)?
        }
        Op::Composite { composite, .. } => inline_constants(composite, &consts),
        op => {
            return Err(Error::Compile(format!(
                "{} is not an element-wise op",
                op.name()
            )))
        }
    };
    // Statically one element (a 0-d result): the vector path would never run.
    let paths = if fg.ty(node.outputs[0]).has_one_element() {
        Paths::ScalarOnly
    } else {
        Paths::Vector
    };
    let ops = Operands::kept(cx, node, io, &consts);
    let kernel = cx
        .kernels
        .elem_with(prog, paths, hoist::invariant_mask(&ops.bcast))?;
    let mut destroy_map = Vec::new();
    for &(o, i) in node.op.destroy_map().iter() {
        let Some(p) = ops.positions.iter().position(|&k| k == i as usize) else {
            return Err(Error::Compile(format!(
                "{} overwrites its input {i}, a constant",
                node.op.name()
            )));
        };
        destroy_map.push((o as usize, p));
    }
    let step = ElemwiseStep {
        kernel,
        inputs: ops.slots,
        bcast: ops.bcast,
        outputs: io
            .outs
            .iter()
            .zip(&node.outputs)
            .map(|(&o, &v)| (o, fg.ty(v).dtype))
            .collect(),
        destroy_map,
        descs: ops.descs,
    };
    Ok((Step::Elemwise(step), Lowering::Jit))
}

/// Per input of a node, its value when it can be inlined into a kernel.
pub(super) fn inline_consts(fg: &FunctionGraph, inputs: &[VarId]) -> Vec<Option<ScalarConst>> {
    inputs.iter().map(|&v| inline_const(fg, v)).collect()
}

/// The value of a constant that can be inlined into a kernel: a single
/// element whose dimensions are all statically broadcastable.
fn inline_const(fg: &FunctionGraph, v: VarId) -> Option<ScalarConst> {
    let val = fg.constant_value(v)?;
    if val.len() != 1 || !fg.ty(v).has_one_element() {
        return None;
    }
    let bits = crate::with_value!(val, a => {
        let x = *a.iter().next()?;
        if val.dtype().is_float() {
            Element::to_f64(x).to_bits()
        } else {
            Element::to_i64(x) as u64
        }
    });
    Some(ScalarConst {
        dtype: val.dtype(),
        bits,
    })
}

/// The array operands a kernel reads: the node's inputs that were not
/// inlined as constants.
pub(super) struct Operands {
    /// Their positions among the node's inputs.
    pub positions: Vec<usize>,
    /// Their slots.
    pub slots: Vec<Slot>,
    /// Per operand, per dimension: statically broadcastable.
    pub bcast: Vec<Vec<bool>>,
    /// Their descriptions for run-time errors.
    pub descs: Vec<String>,
}

impl Operands {
    /// The operands of `node` whose entry of `consts` is `None` (`consts`
    /// covers the first `consts.len()` inputs; any after them are not
    /// operands of this program).
    pub fn kept(
        cx: &mut LowerCx<'_>,
        node: &Apply,
        io: &NodeSlots,
        consts: &[Option<ScalarConst>],
    ) -> Operands {
        let positions: Vec<usize> = (0..consts.len()).filter(|&k| consts[k].is_none()).collect();
        Operands {
            slots: positions.iter().map(|&k| io.ins[k]).collect(),
            bcast: positions
                .iter()
                .map(|&k| cx.fg.ty(node.inputs[k]).broadcastable())
                .collect(),
            descs: positions
                .iter()
                .map(|&k| cx.describe(node.inputs[k]))
                .collect(),
            positions,
        }
    }
}
