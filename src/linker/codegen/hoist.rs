//! Loop-invariant hoisting for element-wise and fused-reduction kernels:
//! the part of a scalar program that depends only on *invariant* inputs
//! (one element: every dimension statically broadcastable, so their
//! stride is 0 in whatever order the driver iterates) and on constants is
//! computed once per kernel call, in its prologue, instead of once per
//! element. Fusion absorbs such one-element producers into the group of
//! their consumer (`rewrites::fusion`), so `x / cast(n)` with a 0-d `n`
//! is one kernel that converts `n` once per call.
//!
//! [`split`] cuts a program into `pre` (over the invariant inputs it
//! reads; its outputs are the hoisted values) and `main` (the inputs the
//! rest reads, then one input per hoisted value). [`emit_prologue`]
//! computes `pre` from element 0 of those inputs and writes new argument
//! arrays in `main`'s layout, in which each hoisted value is an operand of
//! stride 0 held in a stack slot; the kernel is then built for `main` over
//! those arrays as if the driver had passed them.
//!
//! Invariants: a hoisted node reads invariant inputs, constants and other
//! hoisted nodes only; no program output is a hoisted node (it keeps the
//! iteration's shape and is computed per element, from hoisted arguments);
//! `pre` reads only invariant inputs, which hold exactly one element, so
//! the prologue stays in bounds even when the call covers no element.
//! Both programs compute every value with the scalar path's operations, so
//! hoisting changes no bit.

use cranelift_codegen::ir::{types, InstBuilder, StackSlotData, StackSlotKind, Value};
use cranelift_frontend::FunctionBuilder;

use super::scalar::{self as sl, Callees};
use crate::error::Result;
use crate::ops::{CRef, Composite};

/// Where an input of [`Hoisted::main`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// Input `k` of the original program (entry `k` of the inputs in the
    /// kernel's argument arrays).
    Operand(usize),
    /// Output `h` of [`Hoisted::pre`].
    Hoisted(usize),
}

/// A program cut into its invariant part and the rest (see the module header).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Hoisted {
    /// The invariant part; its inputs are the original inputs listed in
    /// [`Hoisted::pre_inputs`].
    pub pre: Composite,
    /// Per input of `pre`: the original input it is.
    pub pre_inputs: Vec<usize>,
    /// The rest; its inputs come from [`Hoisted::sources`].
    pub main: Composite,
    /// Per input of `main`: where it comes from (the original inputs it
    /// reads, in their order, then the hoisted values).
    pub sources: Vec<Source>,
}

/// The bit set of `prog`'s inputs that are invariant, from each input's
/// static broadcast pattern (`true` per statically broadcastable
/// dimension; a 0-d input is invariant); inputs past the 64th never are.
pub fn invariant_mask(patterns: &[Vec<bool>]) -> u64 {
    patterns
        .iter()
        .take(64)
        .enumerate()
        .filter(|(_, p)| p.iter().all(|&b| b))
        .fold(0, |m, (k, _)| m | 1 << k)
}

/// Cuts `prog` over the inputs in bit set `invariant`; `None` when no
/// node can be hoisted.
pub(crate) fn split(prog: &Composite, invariant: u64) -> Option<Hoisted> {
    if invariant == 0 {
        return None;
    }
    let n = prog.nodes.len();
    let inv_input = |k: u32| k < 64 && invariant & (1 << k) != 0;
    // Hoistable: every argument an invariant input, a constant or hoistable.
    // Outputs keep the iteration's shape: computed per element.
    let mut output = vec![false; n];
    for r in &prog.outputs {
        if let CRef::Node(j) = *r {
            output[j as usize] = true;
        }
    }
    let mut hoist = vec![false; n];
    for (i, node) in prog.nodes.iter().enumerate() {
        hoist[i] = !output[i]
            && node.args.iter().all(|a| match *a {
                CRef::Input(k) => inv_input(k),
                CRef::Node(j) => hoist[j as usize],
                CRef::Const(_) => true,
            });
    }
    if !hoist.iter().any(|&h| h) {
        return None;
    }
    // The hoisted values `main` reads: hoisted nodes read by the others.
    let mut hoisted_index = vec![usize::MAX; n];
    let mut hoisted: Vec<usize> = Vec::new();
    let mut main_reads = vec![false; prog.inputs.len()];
    for (i, node) in prog.nodes.iter().enumerate() {
        if hoist[i] {
            continue;
        }
        for a in &node.args {
            match *a {
                CRef::Node(j) if hoist[j as usize] && hoisted_index[j as usize] == usize::MAX => {
                    hoisted_index[j as usize] = hoisted.len();
                    hoisted.push(j as usize);
                }
                CRef::Input(k) => main_reads[k as usize] = true,
                _ => {}
            }
        }
    }
    for r in &prog.outputs {
        if let CRef::Input(k) = *r {
            main_reads[k as usize] = true;
        }
    }
    if hoisted.is_empty() {
        // Hoistable nodes that only other hoistable ones read: none reaches
        // the rest (dead code), nothing to gain.
        return None;
    }

    // `pre`: the hoisted nodes over the invariant inputs they read.
    let mut pre_input_of = vec![u32::MAX; prog.inputs.len()];
    let mut pre_inputs = Vec::new();
    for (i, node) in prog.nodes.iter().enumerate() {
        if !hoist[i] {
            continue;
        }
        for a in &node.args {
            if let CRef::Input(k) = *a {
                if pre_input_of[k as usize] == u32::MAX {
                    pre_input_of[k as usize] = pre_inputs.len() as u32;
                    pre_inputs.push(k as usize);
                }
            }
        }
    }
    let mut pre = Composite::new(pre_inputs.iter().map(|&k| prog.inputs[k]).collect());
    let mut pre_node = vec![u32::MAX; n];
    for (i, node) in prog.nodes.iter().enumerate() {
        if !hoist[i] {
            continue;
        }
        let mut c = node.clone();
        for a in c.args.iter_mut() {
            *a = match *a {
                CRef::Input(k) => CRef::Input(pre_input_of[k as usize]),
                CRef::Node(j) => CRef::Node(pre_node[j as usize]),
                r @ CRef::Const(_) => r,
            };
        }
        pre_node[i] = pre.nodes.len() as u32;
        pre.nodes.push(c);
    }
    pre.outputs = hoisted.iter().map(|&j| CRef::Node(pre_node[j])).collect();

    // `main`: the inputs it reads, then the hoisted values.
    let mut sources: Vec<Source> = Vec::new();
    let mut main_input_of = vec![u32::MAX; prog.inputs.len()];
    for (k, &reads) in main_reads.iter().enumerate() {
        if reads {
            main_input_of[k] = sources.len() as u32;
            sources.push(Source::Operand(k));
        }
    }
    let first_hoisted = sources.len() as u32;
    sources.extend((0..hoisted.len()).map(Source::Hoisted));
    let mut main = Composite::new(
        sources
            .iter()
            .map(|s| match *s {
                Source::Operand(k) => prog.inputs[k],
                Source::Hoisted(h) => prog.nodes[hoisted[h]].dtype,
            })
            .collect(),
    );
    let mut main_node = vec![u32::MAX; n];
    let remap = |r: CRef, main_node: &[u32]| match r {
        CRef::Input(k) => CRef::Input(main_input_of[k as usize]),
        CRef::Node(j) if hoist[j as usize] => {
            CRef::Input(first_hoisted + hoisted_index[j as usize] as u32)
        }
        CRef::Node(j) => CRef::Node(main_node[j as usize]),
        r @ CRef::Const(_) => r,
    };
    for (i, node) in prog.nodes.iter().enumerate() {
        if hoist[i] {
            continue;
        }
        let mut c = node.clone();
        for a in c.args.iter_mut() {
            *a = remap(*a, &main_node);
        }
        main_node[i] = main.nodes.len() as u32;
        main.nodes.push(c);
    }
    main.outputs = prog.outputs.iter().map(|&r| remap(r, &main_node)).collect();
    Some(Hoisted {
        pre,
        pre_inputs,
        main,
        sources,
    })
}

/// Emits the prologue of a kernel whose argument arrays `(pp, sp)` hold
/// `prefix` operands, then the original program's inputs, then `suffix`
/// operands: computes `h.pre` once and returns new arrays holding the
/// prefix, `h.main`'s inputs (hoisted values with stride 0) and the
/// suffix, in stack slots of the function being built.
pub(super) fn emit_prologue(
    b: &mut FunctionBuilder<'_>,
    callees: &Callees,
    h: &Hoisted,
    (pp, sp): (Value, Value),
    (prefix, n_in, suffix): (usize, usize, usize),
) -> Result<(Value, Value)> {
    let ptr = types::I64;
    let f = sl::OWN;
    let entry = |b: &mut FunctionBuilder<'_>, table: Value, k: usize| {
        b.ins().load(types::I64, f, table, (8 * k) as i32)
    };
    // The invariant inputs `pre` reads, at element 0.
    let zero = b.ins().iconst(types::I64, 0);
    let pre_ptrs: Vec<Value> = h
        .pre_inputs
        .iter()
        .map(|&k| entry(b, pp, prefix + k))
        .collect();
    let pre_strides = vec![zero; pre_ptrs.len()];
    let vals = sl::emit_scalar_program(b, callees, &h.pre, &pre_ptrs, &pre_strides, zero)?;
    // One stack slot: the new pointer array, the new stride array, then the
    // hoisted values (8 bytes each).
    let len = prefix + h.sources.len() + suffix;
    let slot = b.create_sized_stack_slot(StackSlotData::new(
        StackSlotKind::ExplicitSlot,
        8 * (2 * len + vals.len()) as u32,
        4,
    ));
    let np = b.ins().stack_addr(ptr, slot, 0);
    let ns = b.ins().stack_addr(ptr, slot, 8 * len as i32);
    let held_at = b.ins().stack_addr(ptr, slot, 16 * len as i32);
    for (i, (&v, dt)) in vals.iter().zip(h.pre.output_dtypes()).enumerate() {
        let addr = b.ins().iadd_imm_s(held_at, 8 * i as i64);
        sl::store(b, dt, v, addr);
    }
    let put = |b: &mut FunctionBuilder<'_>, at: usize, p: Value, s: Value| {
        b.ins().store(f, p, np, (8 * at) as i32);
        b.ins().store(f, s, ns, (8 * at) as i32);
    };
    let copied = (0..prefix).chain((0..suffix).map(|k| prefix + n_in + k));
    let targets = (0..prefix).chain((0..suffix).map(|k| prefix + h.sources.len() + k));
    for (from, to) in copied.zip(targets) {
        let (p, s) = (entry(b, pp, from), entry(b, sp, from));
        put(b, to, p, s);
    }
    for (m, src) in h.sources.iter().enumerate() {
        let (p, s) = match *src {
            Source::Operand(k) => (entry(b, pp, prefix + k), entry(b, sp, prefix + k)),
            Source::Hoisted(i) => (b.ins().iadd_imm_s(held_at, 8 * i as i64), zero),
        };
        put(b, prefix + m, p, s);
    }
    Ok((np, ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::DType;
    use crate::ops::{ScalarConst, ScalarOp};

    /// `x / cast(n) + exp(a) * x` over `x: f64`, `n: i64`, `a: f64`.
    fn program() -> Composite {
        let mut c = Composite::new(vec![DType::F64, DType::I64, DType::F64]);
        let (x, n, a) = (CRef::Input(0), CRef::Input(1), CRef::Input(2));
        let nf = c.push(ScalarOp::Cast(DType::F64), &[n]).unwrap();
        let q = c.push(ScalarOp::TrueDiv, &[x, nf]).unwrap();
        let e = c.push(ScalarOp::Exp, &[a]).unwrap();
        let two = CRef::Const(ScalarConst::new(DType::F64, 2.0));
        let e2 = c.push(ScalarOp::Mul, &[e, two]).unwrap();
        let p = c.push(ScalarOp::Mul, &[e2, x]).unwrap();
        let s = c.push(ScalarOp::Add, &[q, p]).unwrap();
        c.outputs = vec![s];
        c
    }

    #[test]
    fn the_invariant_part_moves_to_pre_and_main_reads_it_as_inputs() {
        let prog = program();
        let h = split(&prog, 0b110).expect("cast and exp*2 are invariant");
        assert_eq!(h.pre_inputs, vec![1, 2]);
        assert_eq!(
            h.pre.to_string(),
            "Composite{cast{f64}(i0), mul(exp(i1), 2.0)}"
        );
        // The i64 input is read by `pre` only: `main` is all f64.
        assert_eq!(
            h.sources,
            vec![Source::Operand(0), Source::Hoisted(0), Source::Hoisted(1)]
        );
        assert_eq!(h.main.inputs, vec![DType::F64; 3]);
        assert_eq!(
            h.main.to_string(),
            "Composite{add(true_div(i0, i1), mul(i2, i0))}"
        );
        // Evaluated in two steps, the same value as the whole program.
        for (x, n, a) in [(3.0, 4.0, 0.5), (-1.5, 7.0, -2.0)] {
            let pre = h.pre.eval(&[n, a]);
            let main = h.main.eval(&[x, pre[0], pre[1]]);
            assert_eq!(main[0].to_bits(), prog.eval(&[x, n, a])[0].to_bits());
        }
    }

    #[test]
    fn nothing_is_hoisted_without_invariant_inputs_or_from_an_output() {
        let prog = program();
        assert_eq!(split(&prog, 0), None);
        // Only `x` invariant: every node reads it or a node that does.
        assert_eq!(split(&prog, 0b001).map(|h| h.pre_inputs), None);
        // An output that is invariant is computed per element.
        let mut c = Composite::new(vec![DType::F64, DType::F64]);
        let e = c.push(ScalarOp::Exp, &[CRef::Input(1)]).unwrap();
        let s = c.push(ScalarOp::Add, &[CRef::Input(0), e]).unwrap();
        c.outputs = vec![s, e];
        assert_eq!(split(&c, 0b10), None);
    }

    #[test]
    fn the_mask_marks_inputs_whose_every_dimension_broadcasts() {
        let pats = vec![vec![false], vec![true], vec![], vec![true, false]];
        assert_eq!(invariant_mask(&pats), 0b0110);
    }
}
