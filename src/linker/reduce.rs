//! Reduction kernel generation (`CAReduce`): one Cranelift function per
//! (reduction, input dtype), with the element-wise ABI
//! `fn(ptrs, strides, n)` where operand 0 is the accumulator array and
//! operand 1 the input.
//!
//! - accumulator stride 0 (*row* mode): `acc[0] = fold(acc[0], x[0..n])`,
//!   sequential, except `Sum` of contiguous `f64`, which uses four `F64X2`
//!   accumulators (a different summation order: equal to the reference
//!   within `n * eps * sum|x|`);
//! - otherwise (*column* mode): `acc[j] = op(acc[j], x[j])` for `j < n`.
//!
//! Accumulators ([`acc_dtype`]) are `f64` for float inputs and `i64`
//! (wrapping) for integer and bool inputs and for `All` / `Any` (0 or 1).
//! The reference evaluator accumulates in the same domains, so sequential
//! reductions over one axis are bit-exact; over several axes the reference
//! folds axis by axis, the kernel in memory order (equal within rounding).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;

use super::jit::JitBuilder;
use super::scalar_lower as sl;
use crate::error::Result;
use crate::graph::DType;
use crate::ops::ReduceOp;

/// The accumulator dtype of `op` on inputs of dtype `input`.
pub fn acc_dtype(op: ReduceOp, input: DType) -> DType {
    if matches!(op, ReduceOp::All | ReduceOp::Any) || !input.is_float() {
        DType::I64
    } else {
        DType::F64
    }
}

/// The initial accumulator value (bits of an `f64` or an `i64`).
pub fn identity_bits(op: ReduceOp, acc: DType) -> u64 {
    let f = acc == DType::F64;
    match op {
        ReduceOp::Sum | ReduceOp::Any => 0,
        ReduceOp::Prod | ReduceOp::All => {
            if f {
                1f64.to_bits()
            } else {
                1
            }
        }
        ReduceOp::Max => {
            if f {
                f64::NEG_INFINITY.to_bits()
            } else {
                i64::MIN as u64
            }
        }
        ReduceOp::Min => {
            if f {
                f64::INFINITY.to_bits()
            } else {
                i64::MAX as u64
            }
        }
    }
}

/// Converts a loaded input element to the accumulator domain.
fn convert(b: &mut FunctionBuilder<'_>, op: ReduceOp, v: Value, input: DType) -> Value {
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

fn combine(b: &mut FunctionBuilder<'_>, op: ReduceOp, acc: DType, a: Value, x: Value) -> Value {
    let f = acc == DType::F64;
    match op {
        ReduceOp::Sum if f => b.ins().fadd(a, x),
        ReduceOp::Sum => b.ins().iadd(a, x),
        ReduceOp::Prod if f => b.ins().fmul(a, x),
        ReduceOp::Prod => b.ins().imul(a, x),
        ReduceOp::Max | ReduceOp::Min if f => {
            let cc = if op == ReduceOp::Max {
                FloatCC::GreaterThanOrEqual
            } else {
                FloatCC::LessThanOrEqual
            };
            let c = b.ins().fcmp(cc, a, x);
            let u = b.ins().fcmp(FloatCC::Unordered, a, x);
            let nan = b.ins().f64const(f64::NAN);
            let r = b.ins().select(c, a, x);
            b.ins().select(u, nan, r)
        }
        ReduceOp::Max => b.ins().smax(a, x),
        ReduceOp::Min => b.ins().smin(a, x),
        ReduceOp::All => b.ins().band(a, x),
        ReduceOp::Any => b.ins().bor(a, x),
    }
}

/// Builds the reduction kernel for `op` over inputs of dtype `input`; returns its index.
pub fn build(jb: &mut JitBuilder, op: ReduceOp, input: DType, name: &str) -> Result<usize> {
    let ptr = jb.ptr_type();
    let acc = acc_dtype(op, input);
    let aty = sl::clif_type(acc);
    let esz = input.size_of() as i64;
    jb.ctx.func.signature = jb.signature(&[ptr, ptr, types::I64], &[]);
    let JitBuilder {
        module, ctx, fctx, ..
    } = jb;
    let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
    let f = MemFlagsData::trusted();
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    let (pp, sp, n) = {
        let p = b.block_params(entry);
        (p[0], p[1], p[2])
    };
    let acc_p = b.ins().load(ptr, f, pp, 0);
    let in_p = b.ins().load(ptr, f, pp, 8);
    let acc_s = b.ins().load(types::I64, f, sp, 0);
    let in_s = b.ins().load(types::I64, f, sp, 8);
    let exit = b.create_block();
    let row = b.create_block();
    let col = b.create_block();
    let i_var = b.declare_var(types::I64);
    let a_var = b.declare_var(aty);
    let zero = b.ins().iconst(types::I64, 0);
    b.def_var(i_var, zero);
    let is_row = b.ins().icmp_imm_s(IntCC::Equal, acc_s, 0);
    b.ins().brif(is_row, row, &[], col, &[]);

    // Row mode.
    b.switch_to_block(row);
    b.seal_block(row);
    let a0 = b.ins().load(aty, f, acc_p, 0);
    b.def_var(a_var, a0);
    let row_head = b.create_block();
    if op == ReduceOp::Sum && input == DType::F64 {
        // Four F64X2 accumulators over contiguous input, 8 elements per iteration.
        let contiguous = b.ins().icmp_imm_s(IntCC::Equal, in_s, 8);
        let vsetup = b.create_block();
        b.ins().brif(contiguous, vsetup, &[], row_head, &[]);
        b.switch_to_block(vsetup);
        b.seal_block(vsetup);
        let vz = sl::float_splat(&mut b, types::F64X2, 0.0);
        let vars: Vec<_> = (0..4)
            .map(|_| {
                let v = b.declare_var(types::F64X2);
                b.def_var(v, vz);
                v
            })
            .collect();
        let vhead = b.create_block();
        let vbody = b.create_block();
        let vdone = b.create_block();
        b.ins().jump(vhead, &[]);
        b.switch_to_block(vhead);
        let i = b.use_var(i_var);
        let next = b.ins().iadd_imm_s(i, 8);
        let c = b.ins().icmp(IntCC::SignedLessThanOrEqual, next, n);
        b.ins().brif(c, vbody, &[], vdone, &[]);
        b.switch_to_block(vbody);
        b.seal_block(vbody);
        let off = b.ins().imul_imm_s(i, 8);
        let addr = b.ins().iadd(in_p, off);
        for (k, &v) in vars.iter().enumerate() {
            let x = b.ins().load(types::F64X2, f, addr, (16 * k) as i32);
            let s = b.use_var(v);
            let s = b.ins().fadd(s, x);
            b.def_var(v, s);
        }
        b.def_var(i_var, next);
        b.ins().jump(vhead, &[]);
        b.seal_block(vhead);
        b.switch_to_block(vdone);
        b.seal_block(vdone);
        let s: Vec<Value> = vars.iter().map(|&v| b.use_var(v)).collect();
        let s01 = b.ins().fadd(s[0], s[1]);
        let s23 = b.ins().fadd(s[2], s[3]);
        let s = b.ins().fadd(s01, s23);
        let l0 = b.ins().extractlane(s, 0);
        let l1 = b.ins().extractlane(s, 1);
        let t = b.ins().fadd(l0, l1);
        let a = b.use_var(a_var);
        let a = b.ins().fadd(a, t);
        b.def_var(a_var, a);
    }
    b.ins().jump(row_head, &[]);
    b.switch_to_block(row_head);
    let i = b.use_var(i_var);
    let rbody = b.create_block();
    let rdone = b.create_block();
    let c = b.ins().icmp(IntCC::SignedLessThan, i, n);
    b.ins().brif(c, rbody, &[], rdone, &[]);
    b.switch_to_block(rbody);
    b.seal_block(rbody);
    let off = b.ins().imul(i, in_s);
    let addr = b.ins().iadd(in_p, off);
    let x = sl::load(&mut b, input, addr);
    let x = convert(&mut b, op, x, input);
    let a = b.use_var(a_var);
    let a = combine(&mut b, op, acc, a, x);
    b.def_var(a_var, a);
    let ni = b.ins().iadd_imm_s(i, 1);
    b.def_var(i_var, ni);
    b.ins().jump(row_head, &[]);
    b.seal_block(row_head);
    b.switch_to_block(rdone);
    b.seal_block(rdone);
    let a = b.use_var(a_var);
    b.ins().store(f, a, acc_p, 0);
    b.ins().jump(exit, &[]);

    // Column mode.
    b.switch_to_block(col);
    b.seal_block(col);
    let chead = b.create_block();
    let cbody = b.create_block();
    b.ins().jump(chead, &[]);
    b.switch_to_block(chead);
    let i = b.use_var(i_var);
    let c = b.ins().icmp(IntCC::SignedLessThan, i, n);
    b.ins().brif(c, cbody, &[], exit, &[]);
    b.switch_to_block(cbody);
    b.seal_block(cbody);
    let off = b.ins().imul(i, in_s);
    let addr = b.ins().iadd(in_p, off);
    let x = sl::load(&mut b, input, addr);
    let x = convert(&mut b, op, x, input);
    let aoff = b.ins().imul(i, acc_s);
    let aaddr = b.ins().iadd(acc_p, aoff);
    let a = b.ins().load(aty, f, aaddr, 0);
    let a = combine(&mut b, op, acc, a, x);
    b.ins().store(f, a, aaddr, 0);
    let ni = b.ins().iadd_imm_s(i, 1);
    b.def_var(i_var, ni);
    b.ins().jump(chead, &[]);
    b.seal_block(chead);

    b.switch_to_block(exit);
    b.seal_block(exit);
    b.ins().return_(&[]);
    b.finalize(cranelift_module::Module::target_config(module));
    let _ = esz;
    jb.define_current(name)
}
