//! The lowering context shared by every op family: the graph, the kernel
//! table of the module being built ([`Kernels`]: one kernel per distinct
//! program, reduction or cast), the slots of the node being lowered
//! ([`NodeSlots`]) and the descriptions of values for run-time error
//! messages.
//!
//! Invariant: a kernel is generated once per module for equal keys; a
//! reduction kernel built for fewer accumulator modes than a later node
//! needs, or an element-wise kernel built with its scalar path only when a
//! later node needs the vector path, is superseded (steps already planned
//! keep the old one).

use rustc_hash::FxHashMap;

use crate::error::Result;
use crate::graph::{DType, FunctionGraph, VarId};
use crate::linker::accum::Modes;
use crate::linker::codegen;
use crate::linker::codegen::elemwise::Paths;
use crate::linker::codegen::hoist;
use crate::linker::codegen::jit::JitBuilder;
use crate::linker::plan::Slot;
use crate::ops::{Composite, ReduceOp, ScalarOp};

/// The slots of the node being lowered.
#[derive(Debug, Clone)]
pub struct NodeSlots {
    /// Input slots, in the node's input order.
    pub ins: Vec<Slot>,
    /// Output slots, in the node's output order.
    pub outs: Vec<Slot>,
}

/// Everything a family's lowering reads or adds to.
pub struct LowerCx<'a> {
    /// The graph being compiled.
    pub fg: &'a FunctionGraph,
    /// The kernels of the module being built.
    pub kernels: Kernels<'a>,
    /// Descriptions already made (a value read by many nodes is described once).
    descs: FxHashMap<VarId, String>,
}

impl<'a> LowerCx<'a> {
    /// A context for `fg` generating its kernels into `jb`.
    pub fn new(fg: &'a FunctionGraph, jb: &'a mut JitBuilder) -> Self {
        LowerCx {
            fg,
            kernels: Kernels {
                jb,
                elem: FxHashMap::default(),
                red: FxHashMap::default(),
                fused: FxHashMap::default(),
                reduce_built: Vec::new(),
            },
            descs: FxHashMap::default(),
        }
    }

    /// The number of kernels generated, and every reduction kernel's name
    /// and modes in generation order.
    pub fn kernel_stats(&mut self) -> (usize, Vec<(String, Modes)>) {
        let built = std::mem::take(&mut self.kernels.reduce_built);
        (self.kernels.elem.len() + built.len(), built)
    }

    /// How run-time errors name `v`: its name (through the views that lead
    /// to it), else the op producing it, else "a constant".
    pub fn describe(&mut self, v: VarId) -> String {
        let fg = self.fg;
        self.descs
            .entry(v)
            .or_insert_with(|| describe(fg, v))
            .clone()
    }
}

fn describe(fg: &FunctionGraph, v: VarId) -> String {
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
                via.push(fg.node(n).op.short_name());
                cur = fg.node(n).inputs[0];
            }
            Some(n) => return format!("the output of {}", fg.node(n).op.short_name()),
            None => {
                return if fg.var(cur).is_constant() {
                    "a constant".into()
                } else {
                    format!("{cur}")
                }
            }
        }
    }
}

/// A fused reduction kernel's key: the reduction, its pre-map program, the
/// bit set of the program's hoisted inputs (0 when nothing is) and its
/// post-map, if any.
type FusedKey = (ReduceOp, Composite, u64, Option<Composite>);

/// The kernel table of one module.
pub struct Kernels<'a> {
    jb: &'a mut JitBuilder,
    /// Keyed by program and the bit set of its inputs whose invariant part
    /// is hoisted (0 when nothing is).
    elem: FxHashMap<(Composite, u64), (usize, Paths)>,
    red: FxHashMap<(ReduceOp, DType), (usize, Modes)>,
    fused: FxHashMap<FusedKey, (usize, Modes)>,
    /// Every reduction kernel generated: name and modes.
    reduce_built: Vec<(String, Modes)>,
}

impl Kernels<'_> {
    /// The element-wise kernel of `prog` with the vector path.
    pub fn elem(&mut self, prog: Composite) -> Result<usize> {
        self.elem_with(prog, Paths::Vector, 0)
    }
    /// The element-wise kernel of `prog` with at least `paths`, computing
    /// once per call the part of the program that depends only on the
    /// inputs in bit set `invariant` (one-element operands, see
    /// `codegen::hoist`; the scalar path alone hoists nothing). A kernel
    /// with the vector path also serves where the scalar path alone would
    /// do; one with the scalar path only is superseded when the vector path
    /// is asked for (steps already planned keep it).
    pub fn elem_with(&mut self, prog: Composite, paths: Paths, invariant: u64) -> Result<usize> {
        let hoisted = match paths {
            Paths::Vector => hoist::split(&prog, invariant),
            Paths::ScalarOnly => None,
        };
        let key = (prog, hoisted.as_ref().map_or(0, |_| invariant));
        match self.elem.get(&key) {
            Some(&(k, built)) if built == paths || built == Paths::Vector => return Ok(k),
            _ => {}
        }
        let name = key.0.to_string();
        let k = codegen::elemwise::build(self.jb, &key.0, hoisted.as_ref(), paths, &name)?;
        self.elem.insert(key, (k, paths));
        Ok(k)
    }
    /// The element-wise kernel converting `from` to `to`.
    pub fn cast(&mut self, from: DType, to: DType) -> Result<usize> {
        let op = if from == to {
            ScalarOp::Identity
        } else {
            ScalarOp::Cast(to)
        };
        self.elem(codegen::elemwise::single_op_program(op, &[from], &[None])?)
    }
    /// The reduction kernel of `op` over `d` handling at least `modes`: a
    /// kernel already built for more modes is shared, one built for fewer
    /// is superseded (steps already planned keep it). Returns it with the
    /// modes it handles.
    pub fn reduce(&mut self, op: ReduceOp, d: DType, modes: Modes) -> Result<(usize, Modes)> {
        let modes = match self.red.get(&(op, d)) {
            Some(&(k, m)) if m.covers(modes) => return Ok((k, m)),
            Some(&(_, m)) => m.union(modes),
            None => modes,
        };
        let name = format!("{}_{d}", op.name());
        let k = codegen::reduce::build(self.jb, op, d, modes, &name)?;
        self.reduce_built.push((name, modes));
        self.red.insert((op, d), (k, modes));
        Ok((k, modes))
    }
    /// The fused reduction kernel of `op` over `prog` handling at least
    /// `modes`, hoisting as [`Kernels::elem_with`] does over the inputs in
    /// bit set `invariant`, shared or superseded as in [`Kernels::reduce`];
    /// returns it with the modes it handles.
    pub fn fused_reduce(
        &mut self,
        op: ReduceOp,
        prog: Composite,
        invariant: u64,
        modes: Modes,
        post: Option<Composite>,
    ) -> Result<(usize, Modes)> {
        let hoisted = hoist::split(&prog, invariant);
        let key = (op, prog, hoisted.as_ref().map_or(0, |_| invariant), post);
        let modes = match self.fused.get(&key) {
            Some(&(k, m)) if m.covers(modes) => return Ok((k, m)),
            Some(&(_, m)) => m.union(modes),
            None => modes,
        };
        let name = match &key.3 {
            None => format!("{}{}", op.name(), key.1),
            Some(post) => format!("{}{}->{post}", op.name(), key.1),
        };
        let k = codegen::fused::build_fused(
            self.jb,
            op,
            (&key.1, key.3.as_ref()),
            hoisted.as_ref(),
            modes,
            &name,
        )?;
        self.reduce_built.push((name, modes));
        self.fused.insert(key, (k, modes));
        Ok((k, modes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linker::codegen::jit::CodegenOptions;
    use crate::tensor::tensor;

    /// A kernel with the scalar path only serves later scalar-only uses of
    /// its program and is superseded by the vector kernel, which then
    /// serves both.
    #[test]
    fn scalar_only_kernels_are_superseded_by_the_vector_kernel() {
        let x = tensor("x", DType::F64, &[None]);
        let fg = FunctionGraph::new(std::slice::from_ref(&x), &[x.exp()]).unwrap();
        let mut jb = JitBuilder::new(&CodegenOptions::default()).unwrap();
        let mut cx = LowerCx::new(&fg, &mut jb);
        let prog =
            || codegen::elemwise::single_op_program(ScalarOp::Exp, &[DType::F64], &[None]).unwrap();
        let k = &mut cx.kernels;
        let scalar = k.elem_with(prog(), Paths::ScalarOnly, 0).unwrap();
        assert_eq!(k.elem_with(prog(), Paths::ScalarOnly, 0).unwrap(), scalar);
        let vector = k.elem(prog()).unwrap();
        assert_ne!(
            vector, scalar,
            "the scalar-only kernel served the vector path"
        );
        assert_eq!(k.elem_with(prog(), Paths::ScalarOnly, 0).unwrap(), vector);
        assert_eq!(k.elem(prog()).unwrap(), vector);
    }
}
