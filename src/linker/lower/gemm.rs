//! Lowering of the matrix-product family (`Dot`, `BatchedDot`, `Gemm`): a
//! call of the runtime GEMM for floats (native Rust for integers), with
//! cast kernels bringing `Dot`'s and `BatchedDot`'s operands to the output
//! dtype.
//!
//! Invariant: an inplace `Gemm` never overwrites memory it reads: a view of
//! `z` among `x` and `y` is a compile error.

use super::ctx::{LowerCx, NodeSlots};
use crate::error::{Error, Result};
use crate::graph::{Apply, DType, DestroyHandler};
use crate::linker::plan::step::Step;
use crate::linker::plan::step::{BatchedDotStep, DotStep, GemmStep};
use crate::linker::plan::Lowering;

/// Lowers a `Dot` node.
pub fn lower_dot(cx: &mut LowerCx<'_>, node: &Apply, io: &NodeSlots) -> Result<(Step, Lowering)> {
    let (casts, dtype, l) = product_casts(cx, node)?;
    let step = DotStep {
        a: io.ins[0],
        b: io.ins[1],
        casts,
        output: io.outs[0],
        dtype,
    };
    Ok((Step::Dot(step), l))
}

/// Lowers a `BatchedDot` node.
pub fn lower_batched_dot(
    cx: &mut LowerCx<'_>,
    node: &Apply,
    io: &NodeSlots,
) -> Result<(Step, Lowering)> {
    let (casts, dtype, l) = product_casts(cx, node)?;
    let broadcastable = [0, 1].map(|k| {
        let t = cx.fg.ty(node.inputs[k]);
        (0..t.ndim()).map(|d| t.is_broadcastable(d)).collect()
    });
    let step = BatchedDotStep {
        a: io.ins[0],
        b: io.ins[1],
        casts,
        output: io.outs[0],
        dtype,
        broadcastable,
    };
    Ok((Step::BatchedDot(step), l))
}

/// The cast kernels bringing a product's two operands to its output dtype,
/// that dtype, and how it runs (the runtime GEMM for floats).
fn product_casts(
    cx: &mut LowerCx<'_>,
    node: &Apply,
) -> Result<([Option<usize>; 2], DType, Lowering)> {
    let fg = cx.fg;
    let dtype = fg.ty(node.outputs[0]).dtype;
    let mut casts = [None, None];
    for (k, cast) in casts.iter_mut().enumerate() {
        let d = fg.ty(node.inputs[k]).dtype;
        if d != dtype {
            *cast = Some(cx.kernels.cast(d, dtype)?);
        }
    }
    let l = if dtype.is_float() {
        Lowering::Runtime
    } else {
        Lowering::Native
    };
    Ok((casts, dtype, l))
}

/// Lowers a `Gemm` node (`inplace`: it overwrites `z`).
pub fn lower_gemm(
    cx: &mut LowerCx<'_>,
    node: &Apply,
    io: &NodeSlots,
    inplace: bool,
) -> Result<(Step, Lowering)> {
    let fg = cx.fg;
    if inplace {
        // The runtime GEMM must not write into the memory it reads.
        let z_root = DestroyHandler::view_root(fg, node.inputs[0]);
        if node.inputs[2..4]
            .iter()
            .any(|&v| DestroyHandler::view_root(fg, v) == z_root)
        {
            return Err(Error::Compile(format!(
                "{} overwrites {} while reading it as x or y",
                node.op.name(),
                cx.describe(node.inputs[0])
            )));
        }
    }
    let step = GemmStep {
        z: io.ins[0],
        alpha: io.ins[1],
        x: io.ins[2],
        y: io.ins[3],
        beta: io.ins[4],
        output: io.outs[0],
        dtype: fg.ty(node.outputs[0]).dtype,
        inplace,
        z_desc: cx.describe(node.inputs[0]),
    };
    Ok((Step::Gemm(step), Lowering::Runtime))
}
