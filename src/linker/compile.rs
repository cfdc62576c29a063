//! Compilation of a FunctionGraph into a [`Plan`] and its JIT code, in
//! processing order: schedule and slot numbering (`plan::schedule`),
//! lowering of every node by its op family (`lower`, generating kernels
//! through `codegen`), the merging of products with their epilogues
//! (`plan::epilogue`), the memory plan (`plan::memory`), then code
//! generation and linking of the module (`codegen::jit`).
//!
//! Every node of the supported op set is lowered to a JIT kernel, a view,
//! metadata, or a runtime call (GEMM, for `Dot` and `Gemm`); only `Custom`
//! ops fall back to their reference `perform`. Kernels of identical
//! programs are generated once per module.

use std::sync::Arc;
use std::time::Instant;

use super::accum::Modes;
use super::codegen::jit::{CodegenOptions, JitBuilder, JitCode};
use super::lower::ctx::{LowerCx, NodeSlots};
use super::lower::lower_node;
use super::plan::epilogue::{fuse_epilogues, Steps};
use super::plan::memory::Sharing;
use super::plan::schedule::{number_slots, schedule};
use super::plan::{Lowering, Plan, Slot};
use crate::error::{Error, Result};
use crate::graph::{DType, FunctionGraph, Value};

/// Timings and lowering decisions of one compilation.
#[derive(Debug, Clone, Default)]
pub struct CompileProfile {
    /// Scheduling, planning and building Cranelift IR.
    pub lower: std::time::Duration,
    /// Cranelift code generation and linking.
    pub codegen: std::time::Duration,
    /// Number of JIT kernels in the module.
    pub n_kernels: usize,
    /// Per reduction kernel generated (`CAReduce` and `FusedReduce`), in
    /// generation order: its name and the accumulator modes it handles.
    pub reduce_kernels: Vec<(String, Modes)>,
    /// Per node: display name and how it was lowered, in schedule order.
    pub nodes: Vec<(String, Lowering)>,
    /// True when the module came from the compile cache.
    pub cached: bool,
}

impl CompileProfile {
    /// Names of the nodes that fell back to the reference evaluator.
    pub fn fallbacks(&self) -> Vec<&str> {
        self.nodes
            .iter()
            .filter(|(_, l)| *l == Lowering::Fallback)
            .map(|(n, _)| n.as_str())
            .collect()
    }
}

/// Compiles `fg` into a plan and its JIT code.
pub fn compile_plan(
    fg: &FunctionGraph,
    opts: &CodegenOptions,
) -> Result<(Plan, JitCode, CompileProfile)> {
    let t0 = Instant::now();
    let order = schedule(fg)?;
    let slots = number_slots(fg, &order);
    let mut jb = JitBuilder::new(opts)?;
    let mut cx = LowerCx::new(fg, &mut jb);
    let mut steps = Vec::with_capacity(order.len());
    let mut uses: Vec<Vec<Slot>> = Vec::with_capacity(order.len());
    let mut defs: Vec<Vec<Slot>> = Vec::with_capacity(order.len());
    let mut sharing = Sharing::default();
    for &n in &order {
        let node = fg.node(n);
        let io = NodeSlots {
            ins: node.inputs.iter().map(|v| slots.map[v]).collect(),
            outs: node.outputs.iter().map(|v| slots.map[v]).collect(),
        };
        sharing.add_node(fg, node, &io.ins, &io.outs);
        let (step, lowering) = lower_node(&mut cx, node, &io)?;
        uses.push(io.ins);
        defs.push(io.outs);
        steps.push((step, node.op.name(), lowering));
    }
    let (n_kernels, reduce_kernels) = cx.kernel_stats();
    drop(cx);
    let outputs: Vec<Slot> = fg.outputs().iter().map(|v| slots.map[v]).collect();
    // The profile lists every node, also those merged into one step.
    let nodes = steps.iter().map(|(_, n, l)| (n.clone(), *l)).collect();
    let mut program = Steps { steps, uses, defs };
    if opts.epilogues {
        program = fuse_epilogues(program, &outputs, &|s| sharing.overwrites(s));
    }
    let Steps { steps, uses, defs } = program;
    let output_dtypes: Vec<DType> = fg.outputs().iter().map(|&o| fg.ty(o).dtype).collect();
    // Node outputs are numbered last (see `plan::schedule::number_slots`).
    let n_node_outputs: usize = order.iter().map(|&n| fg.node(n).outputs.len()).sum();
    let first_node_slot = slots.n - n_node_outputs;
    let memory = sharing.finish(slots.n, first_node_slot, &uses, &defs, &outputs);
    let consts: Vec<(Slot, Arc<Value>)> = slots
        .consts
        .iter()
        .map(|&c| (slots.map[&c], fg.var(c).constant.clone().expect("constant")))
        .collect();
    let inputs = fg
        .inputs()
        .iter()
        .map(|&v| (fg.ty(v).clone(), fg.var(v).name.clone()))
        .collect();
    let t1 = Instant::now();
    let code = jb.finish()?;
    let codegen = t1.elapsed();
    let lower = t1.duration_since(t0);
    let plan = Plan {
        n_slots: slots.n,
        inputs,
        destroyed_inputs: memory.destroyed_inputs,
        consts,
        steps,
        release: memory.release,
        outputs,
        output_dtypes,
        output_dests: memory.output_dests,
    };
    if plan.outputs.len() != fg.outputs().len() {
        return Err(Error::Compile("output count mismatch".into()));
    }
    let profile = CompileProfile {
        lower,
        codegen,
        n_kernels,
        reduce_kernels,
        nodes,
        cached: false,
    };
    Ok((plan, code, profile))
}
