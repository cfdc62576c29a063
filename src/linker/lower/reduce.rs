//! Lowering of the reduction family (`CAReduce`, `FusedReduce`): a kernel
//! per (reduction, input dtype) or per (reduction, pre-map program),
//! generated with the accumulator modes the node's static shape can need
//! ([`Modes::needed`]), plus an element-wise cast kernel when the
//! accumulator dtype differs from the reduced value's. A `FusedReduce`'s
//! post-map is built into its kernel (its post mode), keyed with it.
//!
//! Invariants: the axes are explicit and sorted (`None` becomes every
//! axis); a fused pre-map keeps at least one array operand (it carries the
//! iteration shape) even when every input is an inlinable constant.

use super::ctx::{LowerCx, NodeSlots};
use super::elemwise::{inline_consts, Operands};
use crate::error::Result;
use crate::graph::{Apply, FunctionGraph, VarId};
use crate::linker::accum::{acc_dtype, column_pass, Modes};
use crate::linker::codegen::elemwise::inline_constants;
use crate::linker::codegen::hoist;
use crate::linker::plan::step::Step;
use crate::linker::plan::step::{FusedReduceStep, PostMap, ReduceStep};
use crate::linker::plan::Lowering;
use crate::ops::{split_fused, Composite, ReduceOp};

/// Lowers a `CAReduce` of `op` over `axes` (`None`: all).
pub fn lower_careduce(
    cx: &mut LowerCx<'_>,
    node: &Apply,
    io: &NodeSlots,
    op: ReduceOp,
    axes: &Option<Vec<usize>>,
) -> Result<(Step, Lowering)> {
    let fg = cx.fg;
    let x = fg.ty(node.inputs[0]).dtype;
    let out = fg.ty(node.outputs[0]).dtype;
    let acc = acc_dtype(op, x);
    let shape = &fg.ty(node.inputs[0]).shape;
    let axes = axes.clone().unwrap_or_else(|| (0..shape.len()).collect());
    let (kernel, modes) = cx.kernels.reduce(op, x, Modes::needed(shape, &axes))?;
    let cast = if acc != out {
        Some(cx.kernels.cast(acc, out)?)
    } else {
        None
    };
    let step = ReduceStep {
        kernel,
        modes,
        cast,
        op,
        axes,
        input: io.ins[0],
        output: io.outs[0],
        acc,
        out,
        columns: column_pass(op, x).filter(|_| modes.column()),
    };
    Ok((Step::Reduce(step), Lowering::Jit))
}

/// Lowers a `FusedReduce` of `op` over `axes` (`None`: all) of the
/// pre-map `pre`, then its post-map, if any (the node's inputs after the
/// pre-map's are the post-map's extras).
pub fn lower_fused(
    cx: &mut LowerCx<'_>,
    node: &Apply,
    io: &NodeSlots,
    op: ReduceOp,
    axes: &Option<Vec<usize>>,
    (pre, post): (&Composite, Option<&Composite>),
) -> Result<(Step, Lowering)> {
    let fg = cx.fg;
    let (pre_inputs, extras) = split_fused(pre, &node.inputs);
    let mut consts = inline_consts(fg, pre_inputs);
    if consts.iter().all(Option::is_some) {
        // Keep one array operand: it carries the iteration shape.
        consts[0] = None;
    }
    let prog = inline_constants(pre, &consts);
    let mapped = prog.output_dtypes()[0];
    // The reduced value's dtype: the output's, unless a post-map follows.
    let out = op.output_dtype(mapped);
    let acc = acc_dtype(op, mapped);
    let nd = fg.ty(node.inputs[0]).ndim();
    let axes = axes.clone().unwrap_or_else(|| (0..nd).collect());
    let shape = iteration_shape(fg, pre_inputs, nd);
    let needed = Modes::needed(&shape, &axes);
    // `consts` covers the pre-map's inputs only: the operands kept are its.
    let ops = Operands::kept(cx, node, io, &consts);
    let invariant = hoist::invariant_mask(&ops.bcast);
    let post = post.map(|post| {
        // Input 0 (the reduced value) is never a constant.
        let mut extra_consts = vec![None];
        extra_consts.extend(inline_consts(fg, extras));
        let (_, extra_slots) = split_fused(pre, &io.ins);
        let slots = (1..extra_consts.len())
            .filter(|&k| extra_consts[k].is_none())
            .map(|k| extra_slots[k - 1])
            .collect();
        (inline_constants(post, &extra_consts), slots)
    });
    let (kernel, modes) = cx.kernels.fused_reduce(
        op,
        prog,
        invariant,
        needed,
        post.as_ref().map(|(p, _)| p.clone()),
    )?;
    let cast = if acc != out {
        Some(cx.kernels.cast(acc, out)?)
    } else {
        None
    };
    let step = FusedReduceStep {
        kernel,
        modes,
        cast,
        op,
        axes,
        inputs: ops.slots,
        bcast: ops.bcast,
        descs: ops.descs,
        output: io.outs[0],
        acc,
        out,
        post: post.map(|(prog, inputs)| PostMap {
            inputs,
            out: prog.output_dtypes()[0],
        }),
    };
    Ok((Step::FusedReduce(step), Lowering::Jit))
}

/// The static sizes of the broadcast iteration space of `inputs` (each of
/// `nd` dimensions): a size known for some input, else 1 when every input
/// has static size 1 there, else unknown.
fn iteration_shape(fg: &FunctionGraph, inputs: &[VarId], nd: usize) -> Vec<Option<usize>> {
    (0..nd)
        .map(|d| {
            let sizes = inputs
                .iter()
                .map(|&v| fg.ty(v).shape.get(d).copied().flatten());
            if let Some(s) = sizes.clone().flatten().find(|&s| s != 1) {
                Some(s)
            } else if sizes.clone().all(|s| s == Some(1)) {
                Some(1)
            } else {
                None
            }
        })
        .collect()
}
