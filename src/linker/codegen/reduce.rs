//! Reduction kernels (`CAReduce`): one Cranelift function per (reduction,
//! input dtype), with the element-wise ABI `fn(ptrs, strides, n)` where
//! operand 0 is the accumulator array and operand 1 the input; also the
//! pieces `fused` shares (mode dispatch, conversion, combination, the
//! vector accumulators).
//!
//! - accumulator stride 0 (*row* mode): `acc[0] = fold(acc[0], x[0..n])`;
//! - otherwise (*column* mode): `acc[j] = op(acc[j], x[j])` for `j < n`.
//!
//! A kernel holds the code of the modes ([`Modes`]) its reductions' static
//! shapes can need at run time, only: a reduction over every axis is
//! row-only, and its chunked run's partials are folded by
//! `accum::fold_partials`, not by a kernel. Accumulators are those of
//! `accum` (`f64`, or wrapping `i64`), as in the reference evaluator.
//!
//! Row mode over contiguous values calls the runtime's row pass where it
//! has one (`kiln_sum_f64` / `kiln_sum_f32`, `kiln_max_f64` /
//! `kiln_min_f64`, and `kiln_sum_<dtype>`, `kiln_max_<dtype>` /
//! `kiln_min_<dtype>` of every integer dtype (extremes folding in the
//! input's own lanes, sums wrapping in the accumulator's): rustc-compiled for
//! AVX-512 / AVX2 when the CPU has them, which the 128-bit JIT loop could
//! not match); `Prod`, and `f32` `Max` /
//! `Min`, are vectorised in the JIT with [`NACC`] (max / min:
//! [`NACC_MINMAX`]) vector accumulators (`VecAcc`): `f32` products promoted
//! to `f64` lanes, `f32` max / min in `f32` lanes (exact). Elsewhere the
//! fold is sequential, bit-exact against the reference over one axis (over
//! several axes the reference folds axis by axis, the kernel in memory
//! order). A vector order changes sums and products by reassociation only
//! (within `n * eps * sum|x|`); max and min are order-independent,
//! NaN-propagating like the reference, except that which of `-0.0` /
//! `+0.0` wins a tie may differ.
//!
//! Column mode over contiguous accumulators and input calls the runtime's
//! column pass (`kiln_column_<op>_<dtype>`: sum, product, max, min of
//! `f64` / `f32`, wrapping sums, max and min of every integer dtype) on
//! its one row, each
//! accumulator updated exactly as the sequential loop would, so results
//! are bit-identical to it. (The driver hands the same pass whole runs of
//! reduced rows itself where it can: `exec::drive::drive_reduce`.)
//!
//! Invariant: input and accumulator accesses are not marked aligned (see
//! [`sl::OPERAND`]): the 16-byte loads of the vector fold may start
//! anywhere an element may.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, ConstantData, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::{FunctionBuilder, Variable};

use super::elemwise;
use super::jit::JitBuilder;
use super::scalar as sl;
use crate::error::{Error, Result};
use crate::graph::DType;
use crate::linker::accum::{acc_dtype, column_symbol, identity_bits, Modes};
use crate::ops::ReduceOp;

/// Number of vector accumulators of a vectorised row reduction.
pub const NACC: usize = 4;

/// With both modes, the run-time test "accumulator stride `acc_s` is 0"
/// (row mode); otherwise nothing to test.
pub(super) fn test_row(modes: Modes, b: &mut FunctionBuilder<'_>, acc_s: Value) -> Option<Value> {
    (modes == Modes::Both).then(|| b.ins().icmp_imm_s(IntCC::Equal, acc_s, 0))
}

/// Emits the `row` and / or `column` code (as `modes` has them) at the
/// current position, branching on `is_row` (from [`test_row`]) when
/// both; leaves the builder where they join. Each part leaves the builder
/// in an open block.
pub(super) fn per_mode(
    b: &mut FunctionBuilder<'_>,
    modes: Modes,
    is_row: Option<Value>,
    row: impl FnOnce(&mut FunctionBuilder<'_>) -> Result<()>,
    column: impl FnOnce(&mut FunctionBuilder<'_>) -> Result<()>,
) -> Result<()> {
    match (modes, is_row) {
        (Modes::Row, _) => row(b),
        (Modes::Column, _) => column(b),
        (Modes::Both, Some(is_row)) => {
            let rblk = b.create_block();
            let cblk = b.create_block();
            let join = b.create_block();
            b.ins().brif(is_row, rblk, &[], cblk, &[]);
            b.switch_to_block(rblk);
            b.seal_block(rblk);
            row(b)?;
            b.ins().jump(join, &[]);
            b.switch_to_block(cblk);
            b.seal_block(cblk);
            column(b)?;
            b.ins().jump(join, &[]);
            b.switch_to_block(join);
            b.seal_block(join);
            Ok(())
        }
        (Modes::Both, None) => Err(Error::Compile(
            "a two-mode reduction kernel needs its row-mode test".into(),
        )),
    }
}

/// Converts a loaded input element to the accumulator domain.
pub(super) fn convert(b: &mut FunctionBuilder<'_>, op: ReduceOp, v: Value, input: DType) -> Value {
    match op {
        ReduceOp::All | ReduceOp::Any => {
            let c = if input.is_float() {
                let z = if input == DType::F32 {
                    b.ins().f32const(0.0)
                } else {
                    b.ins().f64const(0.0)
                };
                b.ins().fcmp(FloatCC::NotEqual, v, z)
            } else {
                b.ins().icmp_imm_s(IntCC::NotEqual, v, 0)
            };
            b.ins().uextend(types::I64, c)
        }
        _ => {
            if input.is_float() {
                sl::to_f64(b, v, input)
            } else {
                v
            }
        }
    }
}

/// Combines an accumulator and a converted element (scalars of the accumulator domain).
pub(super) fn combine(
    b: &mut FunctionBuilder<'_>,
    op: ReduceOp,
    acc: DType,
    a: Value,
    x: Value,
) -> Value {
    let f = acc == DType::F64;
    match op {
        ReduceOp::Sum if f => b.ins().fadd(a, x),
        ReduceOp::Sum => b.ins().iadd(a, x),
        ReduceOp::Prod if f => b.ins().fmul(a, x),
        ReduceOp::Prod => b.ins().imul(a, x),
        ReduceOp::Max | ReduceOp::Min if f => {
            sl::nan_minmax(b, a, x, op == ReduceOp::Max, types::F64)
        }
        ReduceOp::Max if acc == DType::U64 => b.ins().umax(a, x),
        ReduceOp::Min if acc == DType::U64 => b.ins().umin(a, x),
        ReduceOp::Max => b.ins().smax(a, x),
        ReduceOp::Min => b.ins().smin(a, x),
        ReduceOp::All => b.ins().band(a, x),
        ReduceOp::Any => b.ins().bor(a, x),
    }
}

/// Loads one element at `addr`, converts it and folds it into `a_var`.
pub(super) fn fold_scalar(
    b: &mut FunctionBuilder<'_>,
    op: ReduceOp,
    input: DType,
    acc: DType,
    a_var: Variable,
    addr: Value,
) {
    let x = sl::load(b, input, addr);
    let x = convert(b, op, x, input);
    let a = b.use_var(a_var);
    let a = combine(b, op, acc, a, x);
    b.def_var(a_var, a);
}

/// The vectorised row fold of one (reduction, float dtype): [`NACC`]
/// accumulators of `acc_ty` for sums and products, [`NACC_MINMAX`] for max
/// and min, fed by 16-byte loads of the input.
///
/// Max / min keep two kinds of accumulator: the running extremes, updated
/// by one compare and one blend (`x > acc` takes `x`, so a NaN `x` never
/// enters them), and [`NNAN`] masks OR-ing `x != x`. [`VecAcc::finish`]
/// turns any NaN seen into a NaN result, as the reference's NaN-propagating
/// fold does.
#[derive(Debug, Clone, Copy)]
pub(super) struct VecAcc {
    op: ReduceOp,
    input: DType,
    /// Type of the accumulators.
    acc_ty: Type,
    /// Whether each `F32X4` load is widened to two `F64X2` (f32 sums and products).
    promote: bool,
    /// Number of value accumulators.
    nacc: usize,
}

/// Vector accumulators of a vectorised max / min (short dependency chains:
/// one compare and one blend per load).
pub const NACC_MINMAX: usize = 8;

/// NaN-mask accumulators of a vectorised max / min.
const NNAN: usize = 2;

/// The accumulator variables of a [`VecAcc`].
pub(super) struct AccVars {
    /// Value accumulators.
    vals: Vec<Variable>,
    /// NaN masks (max / min only), of the integer vector type of `acc_ty`.
    nans: Vec<Variable>,
}

impl VecAcc {
    /// The vector fold of `op` over contiguous elements of dtype `input`, if vectorised.
    pub(super) fn new(op: ReduceOp, input: DType) -> Option<VecAcc> {
        let minmax = matches!(op, ReduceOp::Max | ReduceOp::Min);
        if !matches!(op, ReduceOp::Sum | ReduceOp::Prod) && !minmax {
            return None;
        }
        let (acc_ty, promote) = match input {
            DType::F64 => (types::F64X2, false),
            DType::F32 if minmax => (types::F32X4, false),
            DType::F32 => (types::F64X2, true),
            _ => return None,
        };
        Some(VecAcc {
            op,
            input,
            acc_ty,
            promote,
            nacc: if minmax { NACC_MINMAX } else { NACC },
        })
    }

    fn minmax(&self) -> bool {
        matches!(self.op, ReduceOp::Max | ReduceOp::Min)
    }

    fn esz(&self) -> i64 {
        self.input.size_of() as i64
    }

    /// Elements per 16-byte load.
    fn lanes(&self) -> i64 {
        16 / self.esz()
    }

    /// The integer vector type of comparison masks of `acc_ty`.
    fn mask_ty(&self) -> Type {
        if self.acc_ty == types::F64X2 {
            types::I64X2
        } else {
            types::I32X4
        }
    }

    /// Declares the accumulators: values holding the identity, NaN masks clear.
    pub(super) fn init(&self, b: &mut FunctionBuilder<'_>) -> AccVars {
        let id = f64::from_bits(identity_bits(self.op, DType::F64));
        let v = sl::float_splat(b, self.acc_ty, id);
        let vals = (0..self.nacc)
            .map(|_| {
                let var = b.declare_var(self.acc_ty);
                b.def_var(var, v);
                var
            })
            .collect();
        let mut nans = Vec::new();
        if self.minmax() {
            let z = b.ins().iconst(types::I64, 0);
            let z = b.ins().splat(types::I64X2, z);
            let z = self.bitcast(b, self.mask_ty(), z);
            for _ in 0..NNAN {
                let var = b.declare_var(self.mask_ty());
                b.def_var(var, z);
                nans.push(var);
            }
        }
        AccVars { vals, nans }
    }

    /// Reinterprets a 128-bit vector as `ty`.
    fn bitcast(&self, b: &mut FunctionBuilder<'_>, ty: Type, v: Value) -> Value {
        if b.func.dfg.value_type(v) == ty {
            return v;
        }
        b.ins().bitcast(ty, sl::LITTLE, v)
    }

    /// Combines two accumulators (NaN-propagating for max / min).
    fn vcombine(&self, b: &mut FunctionBuilder<'_>, a: Value, x: Value) -> Value {
        match self.op {
            ReduceOp::Sum => b.ins().fadd(a, x),
            ReduceOp::Prod => b.ins().fmul(a, x),
            op => sl::nan_minmax(b, a, x, op == ReduceOp::Max, self.acc_ty),
        }
    }

    /// Folds the loaded vector `x` into value accumulator `k` (and NaN mask
    /// `k % NNAN` for max / min).
    fn fold_vec(&self, b: &mut FunctionBuilder<'_>, vars: &AccVars, k: usize, x: Value) {
        let a = b.use_var(vars.vals[k]);
        let a = if self.minmax() {
            let cc = if self.op == ReduceOp::Max {
                FloatCC::GreaterThan
            } else {
                FloatCC::LessThan
            };
            let c = b.ins().fcmp(cc, x, a);
            let c = self.bitcast(b, self.acc_ty, c);
            let u = b.ins().fcmp(FloatCC::Unordered, x, x);
            let nv = vars.nans[k % NNAN];
            let nm = b.use_var(nv);
            let nm = b.ins().bor(nm, u);
            b.def_var(nv, nm);
            b.ins().bitselect(c, x, a)
        } else {
            self.vcombine(b, a, x)
        };
        b.def_var(vars.vals[k], a);
    }

    /// Folds the 16 bytes at `addr` (accessed with flags `f`) into
    /// accumulator `k` (and `k + 1` when promoting).
    fn fold_load(
        &self,
        b: &mut FunctionBuilder<'_>,
        vars: &AccVars,
        k: usize,
        addr: Value,
        f: MemFlagsData,
    ) {
        if self.promote {
            let (lo, hi) = load_f32x4_as_f64x2_pair(b, f, addr);
            self.fold_vec(b, vars, k, lo);
            self.fold_vec(b, vars, k + 1, hi);
        } else {
            let x = b.ins().load(self.acc_ty, f, addr, 0);
            self.fold_vec(b, vars, k, x);
        }
    }

    /// Folds the `count` (a multiple of [`VecAcc::lanes`]) contiguous
    /// elements at `base` into the accumulators: every accumulator is fed
    /// in turn, then a one-load tail. `f`: the flags of the loads
    /// ([`sl::OPERAND`] for an input, [`sl::OWN`] for the stack scratch).
    pub(super) fn emit_loop(
        &self,
        b: &mut FunctionBuilder<'_>,
        vars: &AccVars,
        base: Value,
        count: Value,
        f: MemFlagsData,
    ) -> Result<()> {
        let lanes = self.lanes();
        let esz = self.esz();
        let per_load = if self.promote { 2 } else { 1 };
        let loads = self.nacc / per_load;
        let j_var = b.declare_var(types::I64);
        let z = b.ins().iconst(types::I64, 0);
        b.def_var(j_var, z);
        elemwise::counted_loop(b, j_var, count, loads as i64 * lanes, |b, j| {
            let off = b.ins().imul_imm_s(j, esz);
            let addr = b.ins().iadd(base, off);
            for l in 0..loads {
                let a = b.ins().iadd_imm_s(addr, l as i64 * 16);
                self.fold_load(b, vars, l * per_load, a, f);
            }
            Ok(())
        })?;
        elemwise::counted_loop(b, j_var, count, lanes, |b, j| {
            let off = b.ins().imul_imm_s(j, esz);
            let addr = b.ins().iadd(base, off);
            self.fold_load(b, vars, 0, addr, f);
            Ok(())
        })
    }

    /// Combines the accumulators with each other (a halving tree; for max /
    /// min, lanes where a NaN was seen become NaN), then their lanes into
    /// the scalar `f64` accumulator `a_var`.
    pub(super) fn finish(&self, b: &mut FunctionBuilder<'_>, vars: &AccVars, a_var: Variable) {
        let mut v: Vec<Value> = vars.vals.iter().map(|&x| b.use_var(x)).collect();
        while v.len() > 1 {
            let h = v.len() / 2;
            v = (0..h).map(|k| self.vcombine(b, v[k], v[k + h])).collect();
        }
        let mut v = v[0];
        if let Some((&first, rest)) = vars.nans.split_first() {
            let mut m = b.use_var(first);
            for &nv in rest {
                let x = b.use_var(nv);
                m = b.ins().bor(m, x);
            }
            let m = self.bitcast(b, self.acc_ty, m);
            let nan = sl::float_splat(b, self.acc_ty, f64::NAN);
            v = b.ins().bitselect(m, nan, v);
        }
        let mut a = b.use_var(a_var);
        for lane in 0..self.acc_ty.lane_count() {
            let x = b.ins().extractlane(v, lane as u8);
            let x = if self.acc_ty.lane_type() == types::F32 {
                b.ins().fpromote(types::F64, x)
            } else {
                x
            };
            a = combine(b, self.op, DType::F64, a, x);
        }
        b.def_var(a_var, a);
    }
}

/// The four `f32` at `addr` (loaded with flags `f`) widened to two `F64X2`:
/// lanes 0 and 1, then lanes 2 and 3.
fn load_f32x4_as_f64x2_pair(
    b: &mut FunctionBuilder<'_>,
    f: MemFlagsData,
    addr: Value,
) -> (Value, Value) {
    let x = b.ins().load(types::F32X4, f, addr, 0);
    let lo = b.ins().fvpromote_low(x);
    // Lanes 2 and 3 moved to lanes 0 and 1.
    let bytes = b.ins().bitcast(types::I8X16, sl::LITTLE, x);
    let mask: Vec<u8> = (8..16).chain(8..16).collect();
    let imm = b.func.dfg.immediates.push(ConstantData::from(mask));
    let sh = b.ins().shuffle(bytes, bytes, imm);
    let high = b.ins().bitcast(types::F32X4, sl::LITTLE, sh);
    (lo, b.ins().fvpromote_low(high))
}

/// Builds the reduction kernel for `op` over inputs of dtype `input`,
/// handling the accumulator modes `modes`; returns its index.
pub fn build(
    jb: &mut JitBuilder,
    op: ReduceOp,
    input: DType,
    modes: Modes,
    name: &str,
) -> Result<usize> {
    let ptr = jb.ptr_type();
    let acc = acc_dtype(op, input);
    let aty = sl::clif_type(acc);
    let row_call = row_symbol(op, input)
        .filter(|_| modes.row())
        .map(|sym| jb.import(sym, &[ptr, types::I64], &[aty]))
        .transpose()?;
    let column_call = column_symbol(op, input)
        .filter(|_| modes.column())
        .map(|sym| jb.import(sym, &COLUMN_PARAMS.map(|t| t.unwrap_or(ptr)), &[]))
        .transpose()?;
    jb.ctx.func.signature = jb.signature(&[ptr, ptr, types::I64], &[]);
    let JitBuilder {
        module, ctx, fctx, ..
    } = jb;
    let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
    let row_call =
        row_call.map(|id| cranelift_module::Module::declare_func_in_func(&mut *module, id, b.func));
    let column_call = column_call
        .map(|id| cranelift_module::Module::declare_func_in_func(&mut *module, id, b.func));
    // Accumulators and inputs are operand memory; the argument arrays are kiln's own.
    let f = sl::OPERAND;
    let (pp, sp, n) = elemwise::open_kernel(&mut b);
    let acc_p = b.ins().load(ptr, sl::OWN, pp, 0);
    let in_p = b.ins().load(ptr, sl::OWN, pp, 8);
    let acc_s = b.ins().load(types::I64, sl::OWN, sp, 0);
    let in_s = b.ins().load(types::I64, sl::OWN, sp, 8);
    let i_var = b.declare_var(types::I64);
    let zero = b.ins().iconst(types::I64, 0);
    b.def_var(i_var, zero);
    let is_row = test_row(modes, &mut b, acc_s);
    per_mode(
        &mut b,
        modes,
        is_row,
        |b| {
            let a_var = b.declare_var(aty);
            let a0 = b.ins().load(aty, f, acc_p, 0);
            b.def_var(a_var, a0);
            let row_head = b.create_block();
            if let Some(callee) = row_call {
                // Contiguous input: the runtime's vectorised row pass.
                let contiguous = b
                    .ins()
                    .icmp_imm_s(IntCC::Equal, in_s, input.size_of() as i64);
                let call_blk = b.create_block();
                b.ins().brif(contiguous, call_blk, &[], row_head, &[]);
                b.switch_to_block(call_blk);
                b.seal_block(call_blk);
                let call = b.ins().call(callee, &[in_p, n]);
                let x = b.inst_results(call)[0];
                let a = b.use_var(a_var);
                let a = combine(b, op, acc, a, x);
                b.def_var(a_var, a);
                b.def_var(i_var, n);
            } else if let Some(va) = VecAcc::new(op, input) {
                // Contiguous input: the vector fold over all complete 16-byte groups.
                let contiguous = b.ins().icmp_imm_s(IntCC::Equal, in_s, va.esz());
                let vsetup = b.create_block();
                b.ins().brif(contiguous, vsetup, &[], row_head, &[]);
                b.switch_to_block(vsetup);
                b.seal_block(vsetup);
                let vars = va.init(b);
                let count = b.ins().band_imm_s(n, !(va.lanes() - 1));
                va.emit_loop(b, &vars, in_p, count, sl::OPERAND)?;
                va.finish(b, &vars, a_var);
                b.def_var(i_var, count);
            }
            b.ins().jump(row_head, &[]);
            // Sequential fold of the remaining elements (all of them when strided).
            b.switch_to_block(row_head);
            b.seal_block(row_head);
            elemwise::counted_loop(b, i_var, n, 1, |b, i| {
                let off = b.ins().imul(i, in_s);
                let addr = b.ins().iadd(in_p, off);
                fold_scalar(b, op, input, acc, a_var, addr);
                Ok(())
            })?;
            let a = b.use_var(a_var);
            b.ins().store(f, a, acc_p, 0);
            Ok(())
        },
        |b| {
            if let Some(callee) = column_call {
                // Contiguous accumulators and input: the runtime's column
                // pass over the whole row (no tail left).
                let acc_ok = b.ins().icmp_imm_s(IntCC::Equal, acc_s, 8);
                let in_ok = b
                    .ins()
                    .icmp_imm_s(IntCC::Equal, in_s, input.size_of() as i64);
                let both = b.ins().band(acc_ok, in_ok);
                let call_blk = b.create_block();
                let tail = b.create_block();
                b.ins().brif(both, call_blk, &[], tail, &[]);
                b.switch_to_block(call_blk);
                b.seal_block(call_blk);
                // One row: no row stride.
                let one = b.ins().iconst(types::I64, 1);
                let zero = b.ins().iconst(types::I64, 0);
                b.ins().call(callee, &[acc_p, in_p, n, one, zero]);
                b.def_var(i_var, n);
                b.ins().jump(tail, &[]);
                b.switch_to_block(tail);
                b.seal_block(tail);
            }
            elemwise::counted_loop(b, i_var, n, 1, |b, i| {
                let off = b.ins().imul(i, in_s);
                let addr = b.ins().iadd(in_p, off);
                let x = sl::load(b, input, addr);
                let x = convert(b, op, x, input);
                let aoff = b.ins().imul(i, acc_s);
                let aaddr = b.ins().iadd(acc_p, aoff);
                let a = b.ins().load(aty, f, aaddr, 0);
                let a = combine(b, op, acc, a, x);
                b.ins().store(f, a, aaddr, 0);
                Ok(())
            })
        },
    )?;
    b.ins().return_(&[]);
    b.finalize(cranelift_module::Module::target_config(module));
    jb.define_current(name)
}

/// The runtime's row pass of `op` over contiguous `input` (C signature
/// `A(const T* x, size_t n)`, the row's fold in the accumulator dtype `A`:
/// `double`, or `int64_t` / `uint64_t` for integer inputs), if it has one.
pub(super) fn row_symbol(op: ReduceOp, input: DType) -> Option<&'static str> {
    use DType::*;
    use ReduceOp::{Max, Min, Sum};
    Some(match (op, input) {
        (Sum, F64) => "kiln_sum_f64",
        (Sum, F32) => "kiln_sum_f32",
        (Max, F64) => "kiln_max_f64",
        (Min, F64) => "kiln_min_f64",
        (Sum, I64) => "kiln_sum_i64",
        (Sum, U64) => "kiln_sum_u64",
        (Sum, I32) => "kiln_sum_i32",
        (Sum, U32) => "kiln_sum_u32",
        (Sum, I16) => "kiln_sum_i16",
        (Sum, U16) => "kiln_sum_u16",
        (Sum, I8) => "kiln_sum_i8",
        (Sum, U8) => "kiln_sum_u8",
        (Max, I64) => "kiln_max_i64",
        (Min, I64) => "kiln_min_i64",
        (Max, U64) => "kiln_max_u64",
        (Min, U64) => "kiln_min_u64",
        (Max, I32) => "kiln_max_i32",
        (Min, I32) => "kiln_min_i32",
        (Max, U32) => "kiln_max_u32",
        (Min, U32) => "kiln_min_u32",
        (Max, I16) => "kiln_max_i16",
        (Min, I16) => "kiln_min_i16",
        (Max, U16) => "kiln_max_u16",
        (Min, U16) => "kiln_min_u16",
        (Max, I8) => "kiln_max_i8",
        (Min, I8) => "kiln_min_i8",
        (Max, U8) => "kiln_max_u8",
        (Min, U8) => "kiln_min_u8",
        _ => return None,
    })
}

/// The parameter types of a runtime column pass (`None`: a pointer):
/// `acc`, `x`, `n`, `rows`, `row_stride`.
pub(super) const COLUMN_PARAMS: [Option<Type>; 5] = [
    None,
    None,
    Some(types::I64),
    Some(types::I64),
    Some(types::I64),
];

/// A loop `for j in 0..m { body(j) }` at the current position.
pub(super) fn fold_loop(
    b: &mut FunctionBuilder<'_>,
    m: Value,
    body: impl FnMut(&mut FunctionBuilder<'_>, Value) -> Result<()>,
) -> Result<()> {
    let j_var = b.declare_var(types::I64);
    let z = b.ins().iconst(types::I64, 0);
    b.def_var(j_var, z);
    elemwise::counted_loop(b, j_var, m, 1, body)
}
