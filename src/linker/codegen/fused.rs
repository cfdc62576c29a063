//! Fused reduction kernels (`FusedReduce`): one Cranelift function per
//! (reduction, pre-map program), with the reduction ABI of `reduce`
//! (operand 0 the accumulator, operands 1.. the program's inputs).
//!
//! The pre-map is evaluated with the element-wise kernel's code
//! (`elemwise`): per element on the scalar path (any strides), or, when the
//! program has a vector plan and every input stride is 0 or the element
//! size, block-wise: up to [`BLOCK`] mapped values are computed into a
//! stack scratch block (transcendental functions by the runtime's
//! vectorised block functions) and then folded into the accumulators, so
//! the mapped values never reach memory outside the kernel's stack.
//!
//! Two fused `Sum`s over `f64` in row mode are one call of a runtime
//! map-reduce kernel over the whole row (`RowKernel`: its own fixed
//! summation order, no scratch block): `exp(x - c)` / `exp(x)` with `x`
//! contiguous and `c` one value per row (the row pass of a stabilised
//! log-sum-exp, `kiln_sum_exp_shift_f64`), and `x * y` / `x * x` / `sqr(x)`
//! with contiguous operands (a dot product, `kiln_dot_f64`); other strides
//! take the paths above.
//!
//! A row-mode `All` / `Any` / `Sum` of one class test (`isfinite`,
//! `isnan`, `isinf`) of a contiguous `f64` / `f32` input is one call of
//! the runtime's count of that class (`kiln_count_<class>_<dtype>`), which
//! for `All` / `Any` stops at the chunk that decides it.
//!
//! Another row-mode `Any` / `All` of a bool pre-map stops after the block
//! that decides it (a true for `any`, a false for `all`).
//! In column mode, a block of mapped values is folded into its
//! (contiguous) accumulators by the runtime's column pass where it has one
//! (`kiln_column_<op>_<dtype>`, exactly the sequential update: float sums,
//! products and extremes, integer sums and extremes). In row mode, a block
//! of mapped integers goes to the runtime's row pass of its sum or extreme
//! (`kiln_sum_<dtype>`, `kiln_max_<dtype>` / `kiln_min_<dtype>`, exact).
//!
//! A kernel built with a post-map also has a post mode (the `POST_MODE`
//! bit of its element count): it then maps the reduced values and the
//! post-map's one-element extras to the output on the scalar path, once
//! per call of the step, instead of reducing.
//!
//! Invariants: as in `reduce` (row mode stores its accumulator once at the
//! end; column mode updates one accumulator per element); the scratch block
//! is a 16-byte aligned stack slot, the only memory accessed with
//! [`sl::OWN`] flags besides the argument arrays.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, StackSlotData, StackSlotKind, Type, Value};
use cranelift_frontend::{FunctionBuilder, Variable};

use super::elemwise::{self, VecCtx, VecPlan};
use super::hoist::{self, Hoisted};
use super::jit::JitBuilder;
use super::mathcalls::BLOCK;
use super::reduce::{
    combine, convert, fold_loop, fold_scalar, per_mode, test_row, VecAcc, COLUMN_PARAMS,
};
use super::scalar as sl;
use crate::error::{Error, Result};
use crate::graph::DType;
use crate::linker::accum::{acc_dtype, column_symbol, Modes};
use crate::ops::{CRef, Composite, ReduceOp};

/// The runtime's map-reduce kernel `double(const double* x, double c, size_t
/// n, const double* next)`.
const SUM_EXP_SHIFT: &str = "kiln_sum_exp_shift_f64";
/// The runtime's dot product `double(const double* x, const double* y, size_t n)`.
const DOT: &str = "kiln_dot_f64";

/// The shift `c` of a pre-map `exp(x - c)`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shift {
    /// `exp(x)`.
    Zero,
    /// `c` is program input `k`.
    Input(usize),
    /// `c` is an inlined constant.
    Const(f64),
}

/// A fused reduction whose row pass is one call of a runtime map-reduce
/// kernel (operands are program input indices).
#[derive(Debug, Clone, Copy, PartialEq)]
enum RowKernel {
    /// Σ exp(x - c), over `f64`.
    SumExpShift { x: usize, shift: Shift },
    /// Σ x·y (`x == y` for a sum of squares), over `f64`.
    Dot { x: usize, y: usize },
    /// `All` / `Any` / `Sum` of a class test (`isfinite`, `isnan`,
    /// `isinf`) of float input `x`: the runtime counts the row's members
    /// (`symbol`, which returns a `u64`).
    Count {
        x: usize,
        symbol: &'static str,
        esz: i64,
    },
}

impl RowKernel {
    /// Recognises `op` over `prog` as one of the row kernels: a class count
    /// ([`RowKernel::detect_count`]), or a `Sum`, every value `f64`, and
    /// exactly the nodes `sub(x, c)` (or none) and `exp`, or one `mul(x, y)`
    /// / `sqr(x)` of inputs.
    fn detect(op: ReduceOp, prog: &Composite) -> Option<RowKernel> {
        use crate::ops::ScalarOp;
        if let Some(count) = Self::detect_count(op, prog) {
            return Some(count);
        }
        if op != ReduceOp::Sum
            || prog.inputs.iter().any(|&d| d != DType::F64)
            || prog.nodes.iter().any(|n| n.dtype != DType::F64)
        {
            return None;
        }
        let last = prog.nodes.len().checked_sub(1)?;
        let top = &prog.nodes[last];
        if prog.outputs.as_slice() != [CRef::Node(last as u32)] {
            return None;
        }
        match (last, top.op, top.args.as_slice()) {
            (0, ScalarOp::Mul, &[CRef::Input(x), CRef::Input(y)]) => Some(RowKernel::Dot {
                x: x as usize,
                y: y as usize,
            }),
            (0, ScalarOp::Sqr, &[CRef::Input(x)]) => Some(RowKernel::Dot {
                x: x as usize,
                y: x as usize,
            }),
            (0, ScalarOp::Exp, &[CRef::Input(k)]) => Some(RowKernel::SumExpShift {
                x: k as usize,
                shift: Shift::Zero,
            }),
            (1, ScalarOp::Exp, &[CRef::Node(0)]) => {
                let sub = &prog.nodes[0];
                if sub.op != ScalarOp::Sub {
                    return None;
                }
                let shift = match sub.args.as_slice() {
                    [CRef::Input(_), CRef::Input(l)] => Shift::Input(*l as usize),
                    [CRef::Input(_), CRef::Const(c)] if c.dtype == DType::F64 => {
                        Shift::Const(c.as_f64())
                    }
                    _ => return None,
                };
                let CRef::Input(k) = sub.args[0] else {
                    return None;
                };
                if shift == Shift::Input(k as usize) {
                    return None;
                }
                Some(RowKernel::SumExpShift {
                    x: k as usize,
                    shift,
                })
            }
            _ => None,
        }
    }

    /// Recognises `All`, `Any` or `Sum` over exactly one `isfinite`,
    /// `isnan` or `isinf` of an `f64` / `f32` input.
    fn detect_count(op: ReduceOp, prog: &Composite) -> Option<RowKernel> {
        use crate::ops::ScalarOp;
        if !matches!(op, ReduceOp::All | ReduceOp::Any | ReduceOp::Sum)
            || prog.nodes.len() != 1
            || prog.outputs.as_slice() != [CRef::Node(0)]
        {
            return None;
        }
        let node = &prog.nodes[0];
        let &[CRef::Input(x)] = node.args.as_slice() else {
            return None;
        };
        let symbol = match (node.op, prog.inputs[x as usize]) {
            (ScalarOp::IsFinite, DType::F64) => "kiln_count_finite_f64",
            (ScalarOp::IsFinite, DType::F32) => "kiln_count_finite_f32",
            (ScalarOp::IsNan, DType::F64) => "kiln_count_nan_f64",
            (ScalarOp::IsNan, DType::F32) => "kiln_count_nan_f32",
            (ScalarOp::IsInf, DType::F64) => "kiln_count_inf_f64",
            (ScalarOp::IsInf, DType::F32) => "kiln_count_inf_f32",
            _ => return None,
        };
        Some(RowKernel::Count {
            x: x as usize,
            symbol,
            esz: prog.inputs[x as usize].size_of() as i64,
        })
    }

    /// The runtime symbol, its parameter types (`ptr` the pointer type)
    /// and its result type.
    fn symbol(self, ptr: Type) -> (&'static str, Vec<Type>, Type) {
        match self {
            RowKernel::SumExpShift { .. } => (
                SUM_EXP_SHIFT,
                vec![ptr, types::F64, types::I64, ptr],
                types::F64,
            ),
            RowKernel::Dot { .. } => (DOT, vec![ptr, ptr, types::I64], types::F64),
            RowKernel::Count { symbol, .. } => {
                (symbol, vec![ptr, types::I64, types::I32], types::I64)
            }
        }
    }
}

/// The kernel being built: the reduction, its program, and the values
/// every part of the kernel reads.
struct Fused<'p> {
    op: ReduceOp,
    prog: &'p Composite,
    modes: Modes,
    /// The program's output dtype.
    mapped: DType,
    /// Accumulator dtype and its CLIF type.
    acc: DType,
    aty: Type,
    /// With both modes: the run-time "row mode" test.
    is_row: Option<Value>,
    /// Accumulator pointer and byte stride.
    acc_p: Value,
    acc_s: Value,
    /// The kernel's pointer and stride arguments (operand 0 the accumulator).
    pp: Value,
    sp: Value,
    /// Input pointers and byte strides.
    ptrs: Vec<Value>,
    strides: Vec<Value>,
    /// Elements in this call.
    n: Value,
    /// The row accumulator.
    a_var: Variable,
    /// The next element to process.
    i_var: Variable,
}

/// Builds the kernel of `op` over the values of the one-output program
/// `prog` (the pre-map of a `FusedReduce`, constants inlined); operand 0 is
/// the accumulator, operands `1..=prog.inputs.len()` the program's inputs.
/// The kernel handles the accumulator modes `modes`, and with a `post`
/// program also the post mode ([`POST_MODE`]). Returns its index.
pub(crate) fn build_fused(
    jb: &mut JitBuilder,
    op: ReduceOp,
    (prog, post): (&Composite, Option<&Composite>),
    hoisted: Option<&Hoisted>,
    modes: Modes,
    name: &str,
) -> Result<usize> {
    let [_] = prog.outputs.as_slice() else {
        return Err(Error::Compile(format!(
            "a fused reduction needs a one-output pre-map, {prog} has {}",
            prog.outputs.len()
        )));
    };
    let ptr = jb.ptr_type();
    let n_args = prog.inputs.len();
    let prog = hoisted.map_or(prog, |h| &h.main);
    let mapped = prog.output_dtypes()[0];
    let acc = acc_dtype(op, mapped);
    let aty = sl::clif_type(acc);
    let opts = jb.options();
    // The mapped values are folded in the path's dtype: none narrowed.
    let plan =
        elemwise::vector_plan(prog, opts.pre_stage, opts.pair_calls).filter(|p| !p.narrows(prog));
    let mut imports = elemwise::import_callees(jb, prog, plan.as_ref())?;
    if let Some(h) = hoisted {
        imports.extend(elemwise::import_callees(jb, &h.pre, None)?);
    }
    if let Some(post) = post {
        imports.extend(elemwise::import_callees(jb, post, None)?);
    }
    // Column mode folds each block of mapped values with the runtime's
    // column pass (the vector path only; accumulators are contiguous there).
    let column_pass = column_symbol(op, mapped).filter(|_| modes.column() && plan.is_some());
    if let Some(sym) = column_pass {
        let id = jb.import(sym, &COLUMN_PARAMS.map(|t| t.unwrap_or(ptr)), &[])?;
        imports.push((sym, id));
    }
    // Row mode folds each block of mapped integers with the runtime's row
    // pass, in the map's own lanes (exact; float maps keep `VecAcc`'s order).
    let row_pass = super::reduce::row_symbol(op, mapped)
        .filter(|_| !mapped.is_float() && modes.row() && plan.is_some());
    if let Some(sym) = row_pass {
        let id = jb.import(sym, &[ptr, types::I64], &[aty])?;
        imports.push((sym, id));
    }
    let row_kernel = RowKernel::detect(op, prog).filter(|_| modes.row());
    if let Some(rk) = row_kernel {
        let (sym, params, ret) = rk.symbol(ptr);
        let id = jb.import(sym, &params, &[ret])?;
        imports.push((sym, id));
    }
    jb.ctx.func.signature = jb.signature(&[ptr, ptr, types::I64], &[]);
    let JitBuilder {
        module, ctx, fctx, ..
    } = jb;
    let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
    let callees = elemwise::declare_callees(module, &mut b, imports);
    let n_in = prog.inputs.len();
    let (pp, sp, n) = elemwise::open_kernel(&mut b);
    if let Some(post) = post {
        emit_post_mode(&mut b, &callees, post, (pp, sp, n))?;
    }
    let (pp, sp) = match hoisted {
        // Operand 0 is the accumulator; the program's inputs follow.
        Some(h) => hoist::emit_prologue(&mut b, &callees, h, (pp, sp), (1, n_args, 0))?,
        None => (pp, sp),
    };
    // The argument arrays are kiln's own (aligned words).
    let acc_p = b.ins().load(ptr, sl::OWN, pp, 0);
    let acc_s = b.ins().load(types::I64, sl::OWN, sp, 0);
    let mut ptrs = Vec::with_capacity(n_in);
    let mut strides = Vec::with_capacity(n_in);
    for k in 1..=n_in {
        ptrs.push(b.ins().load(ptr, sl::OWN, pp, (8 * k) as i32));
        strides.push(b.ins().load(types::I64, sl::OWN, sp, (8 * k) as i32));
    }
    let is_row = test_row(modes, &mut b, acc_s);
    let i_var = b.declare_var(types::I64);
    let zero = b.ins().iconst(types::I64, 0);
    b.def_var(i_var, zero);
    let a_var = b.declare_var(aty);
    if modes.row() {
        let a0 = b.ins().load(aty, sl::OPERAND, acc_p, 0);
        b.def_var(a_var, a0);
    }
    let cx = Fused {
        op,
        prog,
        modes,
        mapped,
        acc,
        aty,
        is_row,
        acc_p,
        acc_s,
        pp,
        sp,
        ptrs,
        strides,
        n,
        a_var,
        i_var,
    };
    let scalar_head = b.create_block();
    if let Some(rk) = row_kernel {
        cx.emit_row_kernel(&mut b, &callees, rk, scalar_head);
    }
    if let Some(plan) = &plan {
        let passes = (row_pass, column_pass);
        cx.emit_vector_path(&mut b, &callees, ptr, plan, passes, scalar_head)?;
    }
    b.ins().jump(scalar_head, &[]);
    b.switch_to_block(scalar_head);
    b.seal_block(scalar_head);
    cx.emit_scalar_path(&mut b, &callees)?;
    b.ins().return_(&[]);
    b.finalize(cranelift_module::Module::target_config(module));
    jb.define_current(name)
}

/// The bit of a fused reduction kernel's element count that selects its
/// post mode: a call with `n = POST_MODE | m` computes, for `i` in `0..m`,
/// `out[i] = post(value[i], extras...)` over operands `[value, extras...,
/// out]` (element strides in bytes; an extra has one element, stride 0)
/// instead of reducing. The executor makes this call once per step, after
/// every partial accumulator is folded and cast, so that a mean's `/ n`
/// needs no kernel of its own. No reduction is ever given `2^63` elements.
pub(crate) const POST_MODE: u64 = 1 << 63;

/// Opens the kernel's post mode: calls with [`POST_MODE`] set in `n` run
/// `post` over their `m` elements on the scalar path and return; the
/// builder is left in the block where reductions go on.
fn emit_post_mode(
    b: &mut FunctionBuilder<'_>,
    callees: &sl::Callees,
    post: &Composite,
    (pp, sp, n): (Value, Value, Value),
) -> Result<()> {
    let posting = b.ins().icmp_imm_s(IntCC::SignedLessThan, n, 0);
    let post_blk = b.create_block();
    let reduce_blk = b.create_block();
    b.ins().brif(posting, post_blk, &[], reduce_blk, &[]);
    b.switch_to_block(post_blk);
    b.seal_block(post_blk);
    let m = b.ins().band_imm_s(n, !(POST_MODE as i64));
    let ptr = b.func.dfg.value_type(pp);
    let k = post.inputs.len();
    let (mut ptrs, mut strides) = (Vec::with_capacity(k + 1), Vec::with_capacity(k + 1));
    for j in 0..=k {
        // The argument arrays are kiln's own (aligned words).
        ptrs.push(b.ins().load(ptr, sl::OWN, pp, (8 * j) as i32));
        strides.push(b.ins().load(types::I64, sl::OWN, sp, (8 * j) as i32));
    }
    let i_var = b.declare_var(types::I64);
    let zero = b.ins().iconst(types::I64, 0);
    b.def_var(i_var, zero);
    let out_dtype = post.output_dtypes()[0];
    elemwise::counted_loop(b, i_var, m, 1, |b, i| {
        let v = sl::emit_scalar_program(b, callees, post, &ptrs[..k], &strides[..k], i)?;
        let off = b.ins().imul(i, strides[k]);
        let addr = b.ins().iadd(ptrs[k], off);
        sl::store(b, out_dtype, v[0], addr);
        Ok(())
    })?;
    b.ins().return_(&[]);
    b.switch_to_block(reduce_blk);
    b.seal_block(reduce_blk);
    Ok(())
}

impl Fused<'_> {
    /// Row mode with the kernel's operands contiguous (and a shift `c` one
    /// value): the whole row in one call of the runtime's map-reduce kernel,
    /// then on to `done` (with every element consumed); other calls
    /// continue at the current position.
    fn emit_row_kernel(
        &self,
        b: &mut FunctionBuilder<'_>,
        callees: &sl::Callees,
        rk: RowKernel,
        done: cranelift_codegen::ir::Block,
    ) {
        let contiguous = |b: &mut FunctionBuilder<'_>, k: usize| {
            b.ins().icmp_imm_s(IntCC::Equal, self.strides[k], 8)
        };
        let mut ok = match rk {
            RowKernel::SumExpShift { x, shift } => {
                let ok = contiguous(b, x);
                if let Shift::Input(l) = shift {
                    let c = b.ins().icmp_imm_s(IntCC::Equal, self.strides[l], 0);
                    b.ins().band(ok, c)
                } else {
                    ok
                }
            }
            RowKernel::Dot { x, y } => {
                let ok = contiguous(b, x);
                let oy = contiguous(b, y);
                b.ins().band(ok, oy)
            }
            RowKernel::Count { x, esz, .. } => {
                b.ins().icmp_imm_s(IntCC::Equal, self.strides[x], esz)
            }
        };
        if let Some(is_row) = self.is_row {
            ok = b.ins().band(ok, is_row);
        }
        let fast = b.create_block();
        let general = b.create_block();
        b.ins().brif(ok, fast, &[], general, &[]);
        b.switch_to_block(fast);
        b.seal_block(fast);
        let call = match rk {
            RowKernel::SumExpShift { x, shift } => {
                let c = match shift {
                    Shift::Zero => b.ins().f64const(0.0),
                    Shift::Const(v) => b.ins().f64const(v),
                    Shift::Input(l) => b.ins().load(types::F64, sl::OPERAND, self.ptrs[l], 0),
                };
                // No next row to prefetch: the driver hands rows one by one.
                let ptr_ty = b.func.dfg.value_type(self.ptrs[x]);
                let no_next = b.ins().iconst(ptr_ty, 0);
                b.ins()
                    .call(callees[SUM_EXP_SHIFT], &[self.ptrs[x], c, self.n, no_next])
            }
            RowKernel::Dot { x, y } => b
                .ins()
                .call(callees[DOT], &[self.ptrs[x], self.ptrs[y], self.n]),
            RowKernel::Count { x, symbol, .. } => {
                // An `all` may stop at a non-member, an `any` at a member.
                let stop = match self.op {
                    ReduceOp::All => 1,
                    ReduceOp::Any => 2,
                    _ => 0,
                };
                let stop = b.ins().iconst(types::I32, stop);
                b.ins().call(callees[symbol], &[self.ptrs[x], self.n, stop])
            }
        };
        let mut s = b.inst_results(call)[0];
        if let RowKernel::Count { .. } = rk {
            // The row's fold in the accumulator domain (i64 0 / 1 for
            // `All` / `Any`, the count for `Sum`).
            let cc = match self.op {
                ReduceOp::All => Some((IntCC::Equal, self.n)),
                ReduceOp::Any => Some((IntCC::NotEqual, b.ins().iconst(types::I64, 0))),
                _ => None,
            };
            if let Some((cc, rhs)) = cc {
                let t = b.ins().icmp(cc, s, rhs);
                s = b.ins().uextend(types::I64, t);
            }
        }
        let a = b.use_var(self.a_var);
        let a = combine(b, self.op, self.acc, a, s);
        b.def_var(self.a_var, a);
        b.def_var(self.i_var, self.n);
        b.ins().jump(done, &[]);
        b.switch_to_block(general);
        b.seal_block(general);
    }

    /// The blocked vector path (inputs contiguous or broadcast,
    /// accumulators one element (row) or contiguous (column), at least one
    /// vector): each block's mapped values are computed into the scratch
    /// block and folded; calls that do not qualify go to `scalar_head`.
    fn emit_vector_path(
        &self,
        b: &mut FunctionBuilder<'_>,
        callees: &sl::Callees,
        ptr: Type,
        plan: &VecPlan,
        (row_pass, column_pass): (Option<&'static str>, Option<&'static str>),
        scalar_head: cranelift_codegen::ir::Block,
    ) -> Result<()> {
        let (op, modes, is_row) = (self.op, self.modes, self.is_row);
        let esz = plan.dtype.size_of() as i64;
        let lanes = 16 / esz;
        let mut ok = b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, self.n, lanes);
        // Each input contiguous in its own dtype (converted on load when it
        // is not the plan's) or broadcast.
        for (&s, &d) in self.strides.iter().zip(&self.prog.inputs) {
            let c = b.ins().icmp_imm_s(IntCC::Equal, s, d.size_of() as i64);
            let z = b.ins().icmp_imm_s(IntCC::Equal, s, 0);
            let c = b.ins().bor(c, z);
            ok = b.ins().band(ok, c);
        }
        if modes.column() {
            let mut mode_ok = b.ins().icmp_imm_s(IntCC::Equal, self.acc_s, 8);
            if let Some(is_row) = is_row {
                mode_ok = b.ins().bor(is_row, mode_ok);
            }
            ok = b.ins().band(ok, mode_ok);
        }
        let vsetup = b.create_block();
        b.ins().brif(ok, vsetup, &[], scalar_head, &[]);
        b.switch_to_block(vsetup);
        b.seal_block(vsetup);
        let bases = elemwise::vector_bases(b, ptr, &self.prog.inputs, &self.ptrs, &self.strides);
        // Scratch: the plan's staged values, then the block of mapped values.
        let out_slot = plan.slots.len();
        let sbytes = ((out_slot + 1) * BLOCK) as u32 * esz as u32;
        let scratch =
            b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, sbytes, 4));
        let sbase = b.ins().stack_addr(ptr, scratch, 0);
        let out_base = b.ins().iadd_imm_s(sbase, (out_slot * BLOCK) as i64 * esz);
        // A bool pre-map leaves lane masks in the scratch block.
        let masks = self.mapped == DType::Bool;
        let va = VecAcc::new(op, plan.dtype).filter(|_| modes.row() && !masks);
        let vars = va.map(|va| va.init(b));
        let vdone = b.create_block();
        let flag = elemwise::prefetch_flag(b, self.n);
        // The inputs' entries of the argument arrays follow the accumulator's.
        let (inputs_pp, inputs_sp) = (
            b.ins().iadd_imm_s(self.pp, 8),
            b.ins().iadd_imm_s(self.sp, 8),
        );
        let (blk_head, blk, m) = elemwise::open_block_loop(b, self.i_var, self.n, lanes, vdone);
        // The program writes its output "element blk + j" at out_base + j * esz.
        let boff = b.ins().imul_imm_s(blk, esz);
        let out_ptr = b.ins().isub(out_base, boff);
        let mut vptrs = self.ptrs.clone();
        vptrs.push(out_ptr);
        let cx = VecCtx::new(plan, self.prog, &bases, &self.strides, &vptrs)
            .with_prefetch(flag, (inputs_pp, inputs_sp), false)
            .with_mask_outputs();
        cx.emit_levels(b, callees, sbase, blk, m)?;
        // Fold the block.
        let (mapped, acc, aty, a_var, acc_p) =
            (self.mapped, self.acc, self.aty, self.a_var, self.acc_p);
        per_mode(
            b,
            modes,
            is_row,
            |b| match (&va, &vars) {
                // The scratch block is kiln's own 16-byte aligned stack slot.
                (Some(va), Some(vars)) => va.emit_loop(b, vars, out_base, m, sl::OWN),
                _ if masks && matches!(op, ReduceOp::Sum | ReduceOp::Any | ReduceOp::All) => {
                    fold_mask_block(b, op, plan.dtype, out_base, m, a_var)
                }
                _ if masks => fold_loop(b, m, |b, j| {
                    let off = b.ins().imul_imm_s(j, esz);
                    let addr = b.ins().iadd(out_base, off);
                    let x = load_mask_01(b, plan.dtype, addr);
                    let x = convert(b, op, x, DType::I64);
                    let a = b.use_var(a_var);
                    let a = combine(b, op, acc, a, x);
                    b.def_var(a_var, a);
                    Ok(())
                }),
                _ if row_pass.is_some() => {
                    // The block's sum or extreme from the runtime's row
                    // pass, combined into the row accumulator.
                    let sym = row_pass.expect("checked");
                    let call = b.ins().call(callees[sym], &[out_base, m]);
                    let x = b.inst_results(call)[0];
                    let a = b.use_var(a_var);
                    let a = combine(b, op, acc, a, x);
                    b.def_var(a_var, a);
                    Ok(())
                }
                _ => fold_loop(b, m, |b, j| {
                    let off = b.ins().imul_imm_s(j, esz);
                    let addr = b.ins().iadd(out_base, off);
                    fold_scalar(b, op, mapped, acc, a_var, addr);
                    Ok(())
                }),
            },
            |b| {
                if let Some(sym) = column_pass {
                    // acc[blk..blk + m] = op(acc, block): the runtime's
                    // column pass (each accumulator as the loop below).
                    let aoff = b.ins().imul_imm_s(blk, 8);
                    let aaddr = b.ins().iadd(acc_p, aoff);
                    // One row: no row stride.
                    let (one, zero) =
                        (b.ins().iconst(types::I64, 1), b.ins().iconst(types::I64, 0));
                    b.ins().call(callees[sym], &[aaddr, out_base, m, one, zero]);
                    return Ok(());
                }
                fold_loop(b, m, |b, j| {
                    let off = b.ins().imul_imm_s(j, esz);
                    let addr = b.ins().iadd(out_base, off);
                    let x = if masks {
                        let x = load_mask_01(b, plan.dtype, addr);
                        convert(b, op, x, DType::I64)
                    } else {
                        let x = sl::load(b, mapped, addr);
                        convert(b, op, x, mapped)
                    };
                    let e = b.ins().iadd(blk, j);
                    let aoff = b.ins().imul_imm_s(e, 8);
                    let aaddr = b.ins().iadd(acc_p, aoff);
                    let a = b.ins().load(aty, sl::OPERAND, aaddr, 0);
                    let a = combine(b, op, acc, a, x);
                    b.ins().store(sl::OPERAND, a, aaddr, 0);
                    Ok(())
                })
            },
        )?;
        let nb = b.ins().iadd(blk, m);
        b.def_var(self.i_var, nb);
        if masks && matches!(op, ReduceOp::Any | ReduceOp::All) && modes.row() {
            // Row mode: once `any` has seen a true (`all` a false), no
            // further element can change the result; skip the rest of the
            // row (and the scalar tail, by consuming every element).
            let decided = if op == ReduceOp::Any { 1 } else { 0 };
            let a = b.use_var(a_var);
            let mut stop = b.ins().icmp_imm_s(IntCC::Equal, a, decided);
            if let Some(is_row) = is_row {
                stop = b.ins().band(stop, is_row);
            }
            let i = b.ins().select(stop, self.n, nb);
            b.def_var(self.i_var, i);
            b.ins().brif(stop, vdone, &[], blk_head, &[]);
        } else {
            b.ins().jump(blk_head, &[]);
        }
        b.seal_block(blk_head);
        b.switch_to_block(vdone);
        b.seal_block(vdone);
        if let (Some(va), Some(vars)) = (&va, &vars) {
            // In column mode the vector accumulators hold the identity and
            // `a_var` is not stored.
            va.finish(b, vars, a_var);
        }
        Ok(())
    }

    /// The scalar path (elements `i..n`, arbitrary strides), then the row
    /// accumulator's store.
    fn emit_scalar_path(&self, b: &mut FunctionBuilder<'_>, callees: &sl::Callees) -> Result<()> {
        let (op, modes, is_row, acc, aty) = (self.op, self.modes, self.is_row, self.acc, self.aty);
        let (a_var, acc_p, acc_s) = (self.a_var, self.acc_p, self.acc_s);
        elemwise::counted_loop(b, self.i_var, self.n, 1, |b, i| {
            let vals =
                sl::emit_scalar_program(b, callees, self.prog, &self.ptrs, &self.strides, i)?;
            let x = convert(b, op, vals[0], self.mapped);
            per_mode(
                b,
                modes,
                is_row,
                |b| {
                    let a = b.use_var(a_var);
                    let a = combine(b, op, acc, a, x);
                    b.def_var(a_var, a);
                    Ok(())
                },
                |b| {
                    let aoff = b.ins().imul(i, acc_s);
                    let aaddr = b.ins().iadd(acc_p, aoff);
                    let a = b.ins().load(aty, sl::OPERAND, aaddr, 0);
                    let a = combine(b, op, acc, a, x);
                    b.ins().store(sl::OPERAND, a, aaddr, 0);
                    Ok(())
                },
            )
        })?;
        // Row mode stores its accumulator.
        per_mode(
            b,
            modes,
            is_row,
            |b| {
                let a = b.use_var(a_var);
                b.ins().store(sl::OPERAND, a, acc_p, 0);
                Ok(())
            },
            |_| Ok(()),
        )
    }
}

/// The bool (0 or 1, as `i64`) of the lane mask of a vector path of dtype
/// `dtype` stored at `addr` in the scratch block.
fn load_mask_01(b: &mut FunctionBuilder<'_>, dtype: DType, addr: Value) -> Value {
    let ity = match dtype.size_of() {
        1 => types::I8,
        2 => types::I16,
        4 => types::I32,
        _ => types::I64,
    };
    let v = b.ins().load(ity, sl::OWN, addr, 0);
    let v = b.ins().band_imm_s(v, 1);
    if ity == types::I64 {
        v
    } else {
        b.ins().uextend(types::I64, v)
    }
}

/// Row mode of `Sum` (a count), `Any` or `All` over the `m` lane masks of
/// the scratch block at `base` (`m` a multiple of the lane count): one
/// integer vector accumulator (masks subtracted, or-ed or and-ed), its
/// lanes combined once into the row accumulator `a_var` (an `i64`; a
/// lane's count is at most [`BLOCK`] / its lane count, 8 for byte lanes,
/// which every lane type holds).
fn fold_mask_block(
    b: &mut FunctionBuilder<'_>,
    op: ReduceOp,
    dtype: DType,
    base: Value,
    m: Value,
    a_var: Variable,
) -> Result<()> {
    let (ity, lanes, esz) = match dtype.size_of() {
        1 => (types::I8X16, 16u8, 1i64),
        2 => (types::I16X8, 8, 2),
        4 => (types::I32X4, 4, 4),
        _ => (types::I64X2, 2, 8),
    };
    let lane_ty = ity.lane_type();
    let init = if op == ReduceOp::All { -1 } else { 0 };
    let init = b.ins().iconst(lane_ty, init);
    let init = b.ins().splat(ity, init);
    let v_var = b.declare_var(ity);
    b.def_var(v_var, init);
    let j_var = b.declare_var(types::I64);
    let zero = b.ins().iconst(types::I64, 0);
    b.def_var(j_var, zero);
    // Masks are 0 or -1 per lane: a count subtracts them, any / all or /
    // and them. Four vectors per step, combined pairwise before they meet
    // the accumulator (the loop's overhead was most of the fold), then one
    // vector per step for the rest of the block.
    let fold = |b: &mut FunctionBuilder<'_>, v: Value, x: Value| match op {
        ReduceOp::Sum => b.ins().isub(v, x),
        ReduceOp::Any => b.ins().bor(v, x),
        _ => b.ins().band(v, x),
    };
    let pair = |b: &mut FunctionBuilder<'_>, x: Value, y: Value| match op {
        ReduceOp::Sum => b.ins().iadd(x, y),
        ReduceOp::Any => b.ins().bor(x, y),
        _ => b.ins().band(x, y),
    };
    elemwise::counted_loop(b, j_var, m, 4 * lanes as i64, |b, j| {
        let off = b.ins().imul_imm_s(j, esz);
        let addr = b.ins().iadd(base, off);
        let x: Vec<Value> = (0..4)
            .map(|k| b.ins().load(ity, sl::OWN, addr, 16 * k))
            .collect();
        let x01 = pair(b, x[0], x[1]);
        let x23 = pair(b, x[2], x[3]);
        let x = pair(b, x01, x23);
        let v = b.use_var(v_var);
        let v = fold(b, v, x);
        b.def_var(v_var, v);
        Ok(())
    })?;
    elemwise::counted_loop(b, j_var, m, lanes as i64, |b, j| {
        let off = b.ins().imul_imm_s(j, esz);
        let addr = b.ins().iadd(base, off);
        let x = b.ins().load(ity, sl::OWN, addr, 0);
        let v = b.use_var(v_var);
        let v = fold(b, v, x);
        b.def_var(v_var, v);
        Ok(())
    })?;
    let v = b.use_var(v_var);
    let mut t = b.ins().extractlane(v, 0);
    for l in 1..lanes {
        let e = b.ins().extractlane(v, l);
        t = match op {
            ReduceOp::Sum => b.ins().iadd(t, e),
            ReduceOp::Any => b.ins().bor(t, e),
            _ => b.ins().band(t, e),
        };
    }
    let t = if lane_ty == types::I64 {
        t
    } else {
        b.ins().sextend(types::I64, t)
    };
    let x = if op == ReduceOp::Sum {
        t
    } else {
        b.ins().band_imm_s(t, 1)
    };
    let a = b.use_var(a_var);
    let a = combine(b, op, DType::I64, a, x);
    b.def_var(a_var, a);
    Ok(())
}
