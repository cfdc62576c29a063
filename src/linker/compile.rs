//! Compilation of a FunctionGraph: schedule, slot numbering, kernel
//! generation for every node, liveness, and the canonical key of the
//! compile cache.
//!
//! Every node of the supported op set is lowered to a JIT kernel, a view,
//! metadata, or a runtime call (GEMM, for `Dot` and `Gemm`); only `Custom` ops fall back to their
//! reference `perform`. Kernels of identical programs are generated once per
//! module.

use std::fmt::Write as _;
use std::time::Instant;

use rustc_hash::FxHashMap;

use super::elemwise;
use super::jit::{CodegenOptions, JitBuilder, JitCode};
use super::plan::{self, Lowering, Plan, Slot, Step};
use super::reduce;
use crate::error::{Error, Result};
use crate::graph::{DType, DestroyHandler, FunctionGraph, NodeId, Value};
use crate::ops::{Composite, Op, ReduceOp, ScalarConst, ScalarOp};

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
    pub reduce_kernels: Vec<(String, reduce::Modes)>,
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

/// The schedule of `fg`: a topological order respecting the features'
/// orderings. The inplace operations the ops declare are validated and
/// ordered (every other reader of a destroyed root first) even when no
/// DestroyHandler is attached, so an unsafe graph is refused, not run.
pub fn schedule(fg: &FunctionGraph) -> Result<Vec<NodeId>> {
    let mut orderings = fg.orderings();
    if !fg.has_feature::<DestroyHandler>() {
        orderings.extend(DestroyHandler::check_graph(fg)?);
    }
    fg.try_toposort_with(&orderings)
}

/// A canonical serialisation of the scheduled graph (types, ops, wiring,
/// constants, input names): equal keys mean interchangeable compiled code.
pub fn cache_key(fg: &FunctionGraph, order: &[NodeId], opts: &CodegenOptions) -> String {
    let slots = plan::number_slots(fg, order);
    let mut k = format!("{opts:?}|");
    for &v in fg.inputs() {
        let _ = write!(k, "in:{}:{:?};", fg.ty(v), fg.var(v).name);
    }
    for &c in &slots.consts {
        let val = fg.constant_value(c).expect("constant");
        let _ = write!(k, "c{}:{}:{:?}:", slots.map[&c], val.dtype(), val.shape());
        crate::with_value!(val, a => for x in a.iter() { let _ = write!(k, "{x:?},"); });
        k.push(';');
    }
    for &n in order {
        let node = fg.node(n);
        let _ = write!(k, "{:?}(", node.op);
        for i in &node.inputs {
            let _ = write!(k, "{},", slots.map[i]);
        }
        k.push_str(")->");
        for o in &node.outputs {
            let _ = write!(k, "{}:{},", slots.map[o], fg.ty(*o));
        }
        k.push(';');
    }
    k.push_str("out:");
    for o in fg.outputs() {
        let _ = write!(k, "{},", slots.map[o]);
    }
    k
}

/// The value of a constant that can be inlined into a kernel: a single
/// element whose dimensions are all statically broadcastable.
fn inline_const(fg: &FunctionGraph, v: crate::graph::VarId) -> Option<ScalarConst> {
    let val = fg.constant_value(v)?;
    if val.len() != 1 || !fg.ty(v).shape.iter().all(|d| *d == Some(1)) {
        return None;
    }
    let bits = crate::with_value!(val, a => {
        let x = *a.iter().next()?;
        if val.dtype().is_float() {
            crate::graph::Element::to_f64(x).to_bits()
        } else {
            crate::graph::Element::to_i64(x) as u64
        }
    });
    Some(ScalarConst {
        dtype: val.dtype(),
        bits,
    })
}

/// The static sizes of the broadcast iteration space of `inputs` (each of
/// `nd` dimensions): a size known for some input, else 1 when every input
/// has static size 1 there, else unknown.
fn iteration_shape(
    fg: &FunctionGraph,
    inputs: &[crate::graph::VarId],
    nd: usize,
) -> Vec<Option<usize>> {
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

struct Kernels<'a> {
    jb: &'a mut JitBuilder,
    elem: FxHashMap<Composite, usize>,
    red: FxHashMap<(ReduceOp, DType), (usize, reduce::Modes)>,
    fused: FxHashMap<(ReduceOp, Composite), (usize, reduce::Modes)>,
    /// Every reduction kernel generated: name and modes.
    reduce_built: Vec<(String, reduce::Modes)>,
}

impl Kernels<'_> {
    fn elem(&mut self, prog: Composite) -> Result<usize> {
        if let Some(&k) = self.elem.get(&prog) {
            return Ok(k);
        }
        let name = prog.to_string();
        let k = elemwise::build(self.jb, &prog, &name)?;
        self.elem.insert(prog, k);
        Ok(k)
    }
    fn cast(&mut self, from: DType, to: DType) -> Result<usize> {
        let op = if from == to {
            ScalarOp::Identity
        } else {
            ScalarOp::Cast(to)
        };
        self.elem(elemwise::single_op_program(op, &[from], &[None])?)
    }
    /// The reduction kernel of `op` over `d` handling at least `modes`: a
    /// kernel already built for more modes is shared, one built for fewer
    /// is superseded (steps already planned keep it). Returns it with the
    /// modes it handles.
    fn reduce(
        &mut self,
        op: ReduceOp,
        d: DType,
        modes: reduce::Modes,
    ) -> Result<(usize, reduce::Modes)> {
        let modes = match self.red.get(&(op, d)) {
            Some(&(k, m)) if m.covers(modes) => return Ok((k, m)),
            Some(&(_, m)) => m.union(modes),
            None => modes,
        };
        let name = format!("{}_{d}", op.name());
        let k = reduce::build(self.jb, op, d, modes, &name)?;
        self.reduce_built.push((name, modes));
        self.red.insert((op, d), (k, modes));
        Ok((k, modes))
    }
    /// The fused reduction kernel of `op` over `prog` handling at least
    /// `modes`, shared or superseded as in [`Kernels::reduce`]; returns it
    /// with the modes it handles.
    fn fused_reduce(
        &mut self,
        op: ReduceOp,
        prog: Composite,
        modes: reduce::Modes,
    ) -> Result<(usize, reduce::Modes)> {
        let key = (op, prog);
        let modes = match self.fused.get(&key) {
            Some(&(k, m)) if m.covers(modes) => return Ok((k, m)),
            Some(&(_, m)) => m.union(modes),
            None => modes,
        };
        let name = format!("{}{}", op.name(), key.1);
        let k = reduce::build_fused(self.jb, op, &key.1, modes, &name)?;
        self.reduce_built.push((name, modes));
        self.fused.insert(key, (k, modes));
        Ok((k, modes))
    }
}

/// Compiles `fg` into a plan and its JIT code.
pub fn compile_plan(
    fg: &FunctionGraph,
    opts: &CodegenOptions,
) -> Result<(Plan, JitCode, CompileProfile)> {
    let t0 = Instant::now();
    let order = schedule(fg)?;
    let slots = plan::number_slots(fg, &order);
    let mut jb = JitBuilder::new(opts)?;
    let mut ks = Kernels {
        jb: &mut jb,
        elem: FxHashMap::default(),
        red: FxHashMap::default(),
        fused: FxHashMap::default(),
        reduce_built: Vec::new(),
    };
    let s = |v: &crate::graph::VarId| -> Slot { slots.map[v] };
    let mut steps = Vec::with_capacity(order.len());
    let mut uses: Vec<Vec<Slot>> = Vec::with_capacity(order.len());
    let mut defs: Vec<Vec<Slot>> = Vec::with_capacity(order.len());
    // (slot, earlier slot) pairs living in one buffer: views and destroyed inputs.
    let mut shares: Vec<(Slot, Slot)> = Vec::new();
    // The same pairs split by kind, for the output destinations.
    let mut views: Vec<(Slot, Slot)> = Vec::new();
    let mut destroys: Vec<(Slot, Slot)> = Vec::new();
    let mut destroyed_inputs: Vec<usize> = Vec::new();
    let describe = |v: crate::graph::VarId| -> String {
        let mut cur = v;
        let mut via = Vec::new();
        loop {
            if let Some(n) = &fg.var(cur).name {
                let mut d = format!("'{n}'");
                if !via.is_empty() {
                    d.push_str(&format!(" (through {})", via.join(", ")));
                }
                return d;
            }
            match fg.owner(cur) {
                Some(n) if fg.node(n).op.view_map().len() == 1 => {
                    via.push(fg.node(n).op.name());
                    cur = fg.node(n).inputs[0];
                }
                Some(n) => return format!("the output of {}", fg.node(n).op.name()),
                None => {
                    return if fg.var(cur).is_constant() {
                        "a constant".into()
                    } else {
                        format!("{cur}")
                    }
                }
            }
        }
    };
    // A value read by many nodes is described once.
    let mut descs: FxHashMap<crate::graph::VarId, String> = FxHashMap::default();
    let mut describe_once =
        |v: crate::graph::VarId| descs.entry(v).or_insert_with(|| describe(v)).clone();
    for &n in &order {
        let node = fg.node(n);
        let name = node.op.name();
        let ins: Vec<Slot> = node.inputs.iter().map(s).collect();
        let outs: Vec<Slot> = node.outputs.iter().map(s).collect();
        let in_dts: Vec<DType> = node.inputs.iter().map(|&v| fg.ty(v).dtype).collect();
        for &(o, i) in node.op.view_map().iter() {
            shares.push((outs[o as usize], ins[i as usize]));
            views.push((outs[o as usize], ins[i as usize]));
        }
        for &(o, i) in node.op.destroy_map().iter() {
            shares.push((outs[o as usize], ins[i as usize]));
            destroys.push((outs[o as usize], ins[i as usize]));
        }
        for &(_, i) in node.op.destroy_map().iter() {
            let root = DestroyHandler::view_root(fg, node.inputs[i as usize]);
            if let Some(p) = fg.inputs().iter().position(|&v| v == root) {
                destroyed_inputs.push(p);
            }
        }
        let (step, lowering) = match &node.op {
            Op::Elemwise { .. } | Op::Composite { .. } => {
                let consts: Vec<Option<ScalarConst>> =
                    node.inputs.iter().map(|&v| inline_const(fg, v)).collect();
                let prog = match &node.op {
                    Op::Elemwise { scalar, .. } => {
                        elemwise::single_op_program(*scalar, &in_dts, &consts)?
                    }
                    Op::Composite { composite, .. } => {
                        elemwise::inline_constants(composite, &consts)
                    }
                    _ => unreachable!("matched above"),
                };
                let kernel = ks.elem(prog)?;
                let kept: Vec<usize> = (0..node.inputs.len())
                    .filter(|&k| consts[k].is_none())
                    .collect();
                let mut destroy_map = Vec::new();
                for &(o, i) in node.op.destroy_map().iter() {
                    let Some(p) = kept.iter().position(|&k| k == i as usize) else {
                        return Err(Error::Compile(format!(
                            "{name} overwrites its input {i}, a constant"
                        )));
                    };
                    destroy_map.push((o as usize, p));
                }
                let step = Step::Elemwise {
                    kernel,
                    inputs: kept.iter().map(|&k| ins[k]).collect(),
                    bcast: kept
                        .iter()
                        .map(|&k| fg.ty(node.inputs[k]).broadcastable())
                        .collect(),
                    outputs: outs
                        .iter()
                        .zip(&node.outputs)
                        .map(|(&o, &v)| (o, fg.ty(v).dtype))
                        .collect(),
                    destroy_map,
                    descs: kept
                        .iter()
                        .map(|&k| describe_once(node.inputs[k]))
                        .collect(),
                };
                (step, Lowering::Jit)
            }
            Op::CAReduce { op, axes } => {
                let x = in_dts[0];
                let out = fg.ty(node.outputs[0]).dtype;
                let acc = reduce::acc_dtype(*op, x);
                let shape = &fg.ty(node.inputs[0]).shape;
                let axes = axes.clone().unwrap_or_else(|| (0..shape.len()).collect());
                let (kernel, modes) = ks.reduce(*op, x, reduce::Modes::needed(shape, &axes))?;
                let cast = if acc != out {
                    Some(ks.cast(acc, out)?)
                } else {
                    None
                };
                (
                    Step::Reduce {
                        kernel,
                        modes,
                        cast,
                        op: *op,
                        axes,
                        input: ins[0],
                        output: outs[0],
                        acc,
                        out,
                    },
                    Lowering::Jit,
                )
            }
            Op::FusedReduce { op, axes, pre } => {
                let mut consts: Vec<Option<ScalarConst>> =
                    node.inputs.iter().map(|&v| inline_const(fg, v)).collect();
                if consts.iter().all(Option::is_some) {
                    // Keep one array operand: it carries the iteration shape.
                    consts[0] = None;
                }
                let prog = elemwise::inline_constants(pre, &consts);
                let mapped = prog.output_dtypes()[0];
                let out = fg.ty(node.outputs[0]).dtype;
                let acc = reduce::acc_dtype(*op, mapped);
                let nd = fg.ty(node.inputs[0]).ndim();
                let axes = axes.clone().unwrap_or_else(|| (0..nd).collect());
                let shape = iteration_shape(fg, &node.inputs, nd);
                let needed = reduce::Modes::needed(&shape, &axes);
                let (kernel, modes) = ks.fused_reduce(*op, prog, needed)?;
                let cast = if acc != out {
                    Some(ks.cast(acc, out)?)
                } else {
                    None
                };
                let kept: Vec<usize> = (0..node.inputs.len())
                    .filter(|&k| consts[k].is_none())
                    .collect();
                (
                    Step::FusedReduce {
                        kernel,
                        modes,
                        cast,
                        op: *op,
                        axes,
                        inputs: kept.iter().map(|&k| ins[k]).collect(),
                        bcast: kept
                            .iter()
                            .map(|&k| fg.ty(node.inputs[k]).broadcastable())
                            .collect(),
                        descs: kept
                            .iter()
                            .map(|&k| describe_once(node.inputs[k]))
                            .collect(),
                        output: outs[0],
                        acc,
                        out,
                    },
                    Lowering::Jit,
                )
            }
            Op::DimShuffle { new_order, .. } => (
                Step::DimShuffle {
                    input: ins[0],
                    output: outs[0],
                    new_order: new_order.clone(),
                },
                Lowering::Metadata,
            ),
            Op::Reshape { .. } => (
                Step::Reshape {
                    input: ins[0],
                    shape: ins[1],
                    output: outs[0],
                    out_shape: fg.ty(node.outputs[0]).shape.clone(),
                },
                Lowering::Metadata,
            ),
            Op::Alloc => (
                Step::Alloc {
                    value: ins[0],
                    dims: ins[1..].to_vec(),
                    output: outs[0],
                    out_shape: fg.ty(node.outputs[0]).shape.clone(),
                },
                Lowering::Native,
            ),
            Op::Dot => {
                let dtype = fg.ty(node.outputs[0]).dtype;
                let mut casts = [None, None];
                for k in 0..2 {
                    if in_dts[k] != dtype {
                        casts[k] = Some(ks.cast(in_dts[k], dtype)?);
                    }
                }
                let l = if dtype.is_float() {
                    Lowering::Runtime
                } else {
                    Lowering::Native
                };
                (
                    Step::Dot {
                        a: ins[0],
                        b: ins[1],
                        casts,
                        output: outs[0],
                        dtype,
                    },
                    l,
                )
            }
            Op::Gemm { inplace } => {
                if *inplace {
                    // The runtime GEMM must not write into the memory it reads.
                    let z_root = DestroyHandler::view_root(fg, node.inputs[0]);
                    if node.inputs[2..4]
                        .iter()
                        .any(|&v| DestroyHandler::view_root(fg, v) == z_root)
                    {
                        return Err(Error::Compile(format!(
                            "{name} overwrites {} while reading it as x or y",
                            describe_once(node.inputs[0])
                        )));
                    }
                }
                (
                    Step::Gemm {
                        z: ins[0],
                        alpha: ins[1],
                        x: ins[2],
                        y: ins[3],
                        beta: ins[4],
                        output: outs[0],
                        dtype: fg.ty(node.outputs[0]).dtype,
                        inplace: *inplace,
                        z_desc: describe_once(node.inputs[0]),
                    },
                    Lowering::Runtime,
                )
            }
            Op::Shape => (
                Step::Shape {
                    input: ins[0],
                    output: outs[0],
                },
                Lowering::Metadata,
            ),
            Op::ShapeI(i) => (
                Step::ShapeI {
                    input: ins[0],
                    dim: *i,
                    output: outs[0],
                },
                Lowering::Metadata,
            ),
            Op::Custom(c) => {
                for &d in &in_dts {
                    ks.cast(d, d)?;
                }
                (
                    Step::Custom {
                        op: c.clone(),
                        inputs: ins.clone(),
                        outputs: outs.clone(),
                        out_types: node.outputs.iter().map(|&o| fg.ty(o).clone()).collect(),
                    },
                    Lowering::Fallback,
                )
            }
        };
        uses.push(ins);
        defs.push(outs);
        steps.push((step, name, lowering));
    }
    let outputs: Vec<Slot> = fg.outputs().iter().map(s).collect();
    let output_dtypes: Vec<DType> = fg.outputs().iter().map(|&o| fg.ty(o).dtype).collect();
    let n_kernels = ks.elem.len() + ks.reduce_built.len();
    let ks_built = std::mem::take(&mut ks.reduce_built);
    let release = plan::liveness(slots.n, &uses, &defs, &shares, &outputs);
    // Node outputs are numbered last (see `plan::number_slots`).
    let n_node_outputs: usize = order.iter().map(|&n| fg.node(n).outputs.len()).sum();
    let first_node_slot = slots.n - n_node_outputs;
    let output_dests = plan::output_destinations(first_node_slot, &destroys, &views, &outputs);
    destroyed_inputs.sort_unstable();
    destroyed_inputs.dedup();
    let consts: Vec<(Slot, std::sync::Arc<Value>)> = slots
        .consts
        .iter()
        .map(|&c| (slots.map[&c], fg.var(c).constant.clone().expect("constant")))
        .collect();
    let inputs = fg
        .inputs()
        .iter()
        .map(|&v| (fg.ty(v).clone(), fg.var(v).name.clone()))
        .collect();
    let nodes = steps.iter().map(|(_, n, l)| (n.clone(), *l)).collect();
    let t1 = Instant::now();
    let kernel_codegen = jb.codegen_time;
    let code = jb.finish()?;
    let codegen = kernel_codegen + t1.elapsed();
    let lower = t1.duration_since(t0).saturating_sub(kernel_codegen);
    let plan = Plan {
        n_slots: slots.n,
        inputs,
        destroyed_inputs,
        consts,
        steps,
        release,
        outputs,
        output_dtypes,
        output_dests,
    };
    if plan.outputs.len() != fg.outputs().len() {
        return Err(Error::Compile("output count mismatch".into()));
    }
    Ok((
        plan,
        code,
        CompileProfile {
            lower,
            codegen,
            n_kernels,
            reduce_kernels: ks_built,
            nodes,
            cached: false,
        },
    ))
}
