//! Lowering of scalar ops to Cranelift IR, in the three computation domains
//! of the reference evaluator (see `ops::scalar`): the `f64` domain for any
//! op that touches a float, the wrapping `u64` domain (unsigned comparisons,
//! `umin`/`umax`, `udiv`/`urem`, logical right shift) for integer ops whose
//! inputs upcast to `u64`, and the wrapping `i64` domain for the other
//! integer and bool ops.
//!
//! Value representation (the *canonical* form every kernel uses): `f64` and
//! `f32` values live in `F64` / `F32` registers; every integer and bool
//! value lives in an `I64` register holding the value of its dtype (signed
//! dtypes sign-extended, `bool`, `u8`, `u16` and `u32` zero-extended, `u64`
//! its bit pattern; bool is 0 or 1). Conversions reproduce the reference bit
//! for bit: integers enter the float domain with `as f64` (`u64` unsigned),
//! float results become integers with Rust's saturating `as` (NaN gives 0, a
//! negative float 0 for unsigned dtypes), integer results wrap to their width.
//!
//! The vector form ([`emit_vector`]) handles a subset of ops on `F64X2` /
//! `F32X4` whose results equal the scalar ones bit for bit (see
//! [`vector_capable`]), and [`emit_vector_int`] the wrapping integer ops
//! on `I64X2`, `I32X4`, `I16X8` and `I8X16` ([`int_vector_capable`]). Bool
//! values on the vector path are lane masks
//! ([`mask_capable`], [`emit_vector_masked`]): every bit of a lane set for
//! true, clear for false, held in the float vector type of the path (so
//! they load, store and stage like the float values). A mask is only ever
//! combined bitwise, never compared as a float (its true pattern is a NaN).
//! [`load_converted`] and [`store_converted`] convert an input or a result
//! of another dtype to or from the path's lanes as the reference converts;
//! on the `f64` path, `f32`, `i32` and `u32` values may also live in narrow
//! lanes of their own ([`narrow_lanes`], [`promote_narrow`],
//! [`demote_to_narrow`]).
//!
//! `emit_scalar_program` emits a whole Composite at one element: the
//! scalar path of every element-wise and fused-reduction kernel, and the
//! hoisted prologue of `hoist`.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, ConstantData, FuncRef, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;
use rustc_hash::FxHashMap;

use super::mathcalls::{self, ScalarSig};
use crate::error::{Error, Result};
use crate::graph::DType;
use crate::ops::{CRef, Composite, ScalarOp};

/// Imported callees available to the function being built, by symbol.
pub type Callees = FxHashMap<&'static str, FuncRef>;

/// The CLIF type of a canonical value of `dtype`.
pub fn clif_type(dtype: DType) -> Type {
    match dtype {
        DType::F64 => types::F64,
        DType::F32 => types::F32,
        _ => types::I64,
    }
}

/// The 128-bit vector type of lanes of `dtype` as memory holds it: the
/// vector path's on a float dtype or an [`int_vector_dtype`], bytes for
/// bool (an input converted on load, see [`load_converted`]).
pub fn vector_type(dtype: DType) -> Type {
    match dtype {
        DType::F64 => types::F64X2,
        DType::F32 => types::F32X4,
        DType::I64 | DType::U64 => types::I64X2,
        DType::I32 | DType::U32 => types::I32X4,
        DType::I16 | DType::U16 => types::I16X8,
        DType::I8 | DType::U8 | DType::Bool => types::I8X16,
    }
}

/// Whether the vector path handles integer `dtype` (lanes of 64, 32, 16 or
/// 8 bits; bool is a lane mask there, never a lane type of its own).
pub fn int_vector_dtype(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::I64
            | DType::U64
            | DType::I32
            | DType::U32
            | DType::I16
            | DType::U16
            | DType::I8
            | DType::U8
    )
}

/// Whether an input of dtype `src` can enter the vector path on lanes of
/// `dst` converted as it is loaded ([`load_converted`]): the converted lane
/// must hold the very value the reference computes with. Exactly: integers
/// of at most 16 bits (and bool, loaded as its byte, as [`load`] does) become
/// `f32` lanes; integers of at most 32 bits and `f32` become `f64` lanes;
/// narrower integers widen to integer lanes that hold all their values
/// (unsigned into wider signed or unsigned, signed into wider signed).
/// Rounded to nearest: `i64` and `u64` become `f64` lanes as the reference's
/// `as f64` enters the float domain ([`i64_to_f64_lanes`]), so for readers
/// that compute in floats the rounded value is the reference's own.
pub fn load_convertible(src: DType, dst: DType) -> bool {
    if matches!(src, DType::I64 | DType::U64) {
        return dst == DType::F64;
    }
    if src == dst || src == DType::F64 {
        return false;
    }
    let src_int = src.is_int() || src == DType::Bool;
    match dst {
        DType::F32 => src_int && src.size_of() <= 2,
        DType::F64 => src_int || src == DType::F32,
        d if int_vector_dtype(d) => {
            src_int
                && src.size_of() < d.size_of()
                && (src.is_unsigned() || src == DType::Bool || d.is_signed_int())
        }
        _ => false,
    }
}

/// Whether `src` lanes convert to `dst` lanes of the same count with the
/// rounding of the reference's cast, though not exactly: `i32` → `f32`
/// (`cvtdq2ps` rounds to nearest even, as `as f32` does). Such an input may
/// be converted as it loads only where every reader is that cast.
pub fn cast_convertible(src: DType, dst: DType) -> bool {
    src == DType::I32 && dst == DType::F32
}

/// Loads the elements of `src` at `addr + offset` that fill one vector of
/// the path on `dst` (16 bytes of `dst` lanes: 2, 4, 8 or, for
/// [`cast_convertible`] pairs, 16 bytes of `src`) and converts them:
/// exactly (see [`load_convertible`]), or as the reference's cast does.
pub fn load_converted(
    b: &mut FunctionBuilder<'_>,
    src: DType,
    dst: DType,
    addr: Value,
    offset: i32,
) -> Value {
    let lanes = 16 / dst.size_of();
    let mut v = load_low(b, src, lanes * src.size_of(), addr, offset);
    if src == DType::F32 {
        return b.ins().fvpromote_low(v);
    }
    if matches!(src, DType::I64 | DType::U64) {
        return i64_to_f64_lanes(b, v, src == DType::I64);
    }
    // Integer lanes widen to the destination's width (32 bits for floats).
    let signed = src.is_signed_int();
    let target_bits = if dst.is_float() {
        32
    } else {
        dst.size_of() * 8
    };
    let mut bits = src.size_of() * 8;
    while bits < target_bits {
        bits *= 2;
        v = if signed {
            b.ins().swiden_low(v)
        } else {
            b.ins().uwiden_low(v)
        };
    }
    match dst {
        DType::F32 => b.ins().fcvt_from_sint(types::F32X4, v),
        // The low two lanes, now 32-bit (narrower sources fit `i32`).
        DType::F64 if src == DType::U32 => promote_narrow(b, v, DType::U32),
        DType::F64 => promote_narrow(b, v, DType::I32),
        _ => v,
    }
}

/// The two 64-bit integer lanes of `v` (signed when `signed`) as `f64`
/// lanes rounded to nearest, as Rust's `as f64` rounds (x86 converts 64-bit
/// lanes only with AVX-512DQ): each lane is `hi·2^32 + lo`, both parts
/// converted exactly by placing them in the significand of a power of two
/// (`0x4530…` is 2^84, whose last significand bit is worth 2^32; `0x4330…`
/// is 2^52, worth 1; a signed high part is offset by 2^31 first) and
/// subtracting that power, then added with the one rounding of the sum.
pub fn i64_to_f64_lanes(b: &mut FunctionBuilder<'_>, v: Value, signed: bool) -> Value {
    let ty = types::I64X2;
    let splat = |b: &mut FunctionBuilder<'_>, x: u64| int_splat(b, ty, x as i64);
    let hi = b.ins().ushr_imm_u(v, 32);
    let (hi, hi_bias) = if signed {
        let flip = splat(b, 0x8000_0000);
        (b.ins().bxor(hi, flip), 2f64.powi(84) + 2f64.powi(63))
    } else {
        (hi, 2f64.powi(84))
    };
    let e84 = splat(b, 0x4530_0000_0000_0000);
    let hi = b.ins().bor(hi, e84);
    let hi = b.ins().bitcast(types::F64X2, LITTLE, hi);
    let bias = float_splat(b, types::F64X2, hi_bias);
    let hi = b.ins().fsub(hi, bias);
    let low_mask = splat(b, 0xFFFF_FFFF);
    let lo = b.ins().band(v, low_mask);
    let e52 = splat(b, 0x4330_0000_0000_0000);
    let lo = b.ins().bor(lo, e52);
    let lo = b.ins().bitcast(types::F64X2, LITTLE, lo);
    let two52 = float_splat(b, types::F64X2, 2f64.powi(52));
    let lo = b.ins().fsub(lo, two52);
    b.ins().fadd(hi, lo)
}

/// Loads `bytes` (2, 4, 8 or 16) bytes of `src` elements at `addr + offset`
/// into the low lanes of a vector of their own lane type (the other lanes
/// zero): one vector's worth of a narrower input for a wider path.
pub fn load_low(
    b: &mut FunctionBuilder<'_>,
    src: DType,
    bytes: usize,
    addr: Value,
    offset: i32,
) -> Value {
    let raw = match bytes {
        16 => b.ins().load(types::I64X2, OPERAND, addr, offset),
        8 => {
            let x = b.ins().load(types::I64, OPERAND, addr, offset);
            b.ins().scalar_to_vector(types::I64X2, x)
        }
        4 => {
            let x = b.ins().load(types::I32, OPERAND, addr, offset);
            b.ins().scalar_to_vector(types::I32X4, x)
        }
        _ => {
            debug_assert_eq!(bytes, 2, "one vector of a narrower dtype");
            let x = b.ins().uload16(types::I32, OPERAND, addr, offset);
            b.ins().scalar_to_vector(types::I32X4, x)
        }
    };
    b.ins().bitcast(vector_type(src), LITTLE, raw)
}

/// Whether values of `narrow` can ride the vector path on `path` in
/// *narrow lanes*: the path's lanes held in the low half of a vector of
/// `narrow`'s own lane type (the high half unused), computed there with
/// `narrow`'s arithmetic and converted exactly where a value of the path's
/// dtype reads them ([`promote_narrow`]). `f32`, `i32` and `u32` values on
/// the `f64` path: `cast(xf * 2, "f64") + y`, `cast(i * j, "f64")`.
pub fn narrow_lanes(path: DType, narrow: DType) -> bool {
    path == DType::F64 && matches!(narrow, DType::F32 | DType::I32 | DType::U32)
}

/// Converts narrow lanes of `narrow` ([`narrow_lanes`]) to the `f64`
/// path's `F64X2`: exact (`cvtps2pd`, `cvtdq2pd`, or for `u32` the 2^52
/// bias).
pub fn promote_narrow(b: &mut FunctionBuilder<'_>, v: Value, narrow: DType) -> Value {
    match narrow {
        DType::F32 => b.ins().fvpromote_low(v),
        DType::U32 => {
            let wide = b.ins().uwiden_low(v);
            b.ins().fcvt_from_uint(types::F64X2, wide)
        }
        _ => {
            let wide = b.ins().swiden_low(v);
            b.ins().fcvt_from_sint(types::F64X2, wide)
        }
    }
}

/// The `F64X2` lanes `v`, integers held exactly, wrapped to the 8- or
/// 16-bit integer dtype `d` as the reference's `as` wraps its `i64`
/// result: `v - 2^b·floor(v / 2^b)` for an unsigned `d` of `b` bits,
/// `v - 2^b·floor((v + 2^(b-1)) / 2^b)` for a signed one (every step exact
/// for |v| below 2^52); a zero comes out `+0`, as an integer converts.
pub fn wrap_int_lanes(b: &mut FunctionBuilder<'_>, v: Value, d: DType) -> Value {
    let bits = 8 * d.size_of() as i32;
    let m = 2f64.powi(bits);
    let ty = types::F64X2;
    let shifted = if d.is_signed_int() {
        let half = float_splat(b, ty, m / 2.0);
        b.ins().fadd(v, half)
    } else {
        v
    };
    let inv = float_splat(b, ty, 1.0 / m);
    let q = b.ins().fmul(shifted, inv);
    let f = b.ins().floor(q);
    let mv = float_splat(b, ty, m);
    let k = b.ins().fmul(f, mv);
    let r = b.ins().fsub(v, k);
    if d.is_signed_int() {
        // -0 - 0 is -0: the sum with +0 makes it +0.
        let zero = float_splat(b, ty, 0.0);
        b.ins().fadd(r, zero)
    } else {
        r
    }
}

/// Whether a cast of an `f64` path value to `narrow` has a narrow-lane form
/// ([`demote_to_narrow`]).
pub fn demotes_to(narrow: DType) -> bool {
    matches!(narrow, DType::F32 | DType::I32)
}

/// Casts the `F64X2` lanes `v` to narrow lanes of `narrow` (see
/// [`demotes_to`]) as the reference's `as` does: rounded to nearest for
/// `f32`; truncated and saturated for `i32`, NaN giving 0.
pub fn demote_to_narrow(b: &mut FunctionBuilder<'_>, v: Value, narrow: DType) -> Value {
    if narrow == DType::F32 {
        return b.ins().fvdemote(v);
    }
    debug_assert_eq!(narrow, DType::I32);
    f64_to_i32_lanes(b, v)
}

/// The two `f64` lanes of `v` truncated and saturated to `i32` (NaN giving
/// 0), in the low lanes of an `I32X4` (`cvttpd2dq` after a clamp from
/// above).
fn f64_to_i32_lanes(b: &mut FunctionBuilder<'_>, v: Value) -> Value {
    let wide = b.ins().fcvt_to_sint_sat(types::I64X2, v);
    let zero = b
        .func
        .dfg
        .constants
        .insert(ConstantData::from(vec![0u8; 16]));
    let zero = b.ins().vconst(types::I64X2, zero);
    b.ins().snarrow(wide, zero)
}

/// Whether a value of the vector path on `src` may be stored as an output
/// of the narrower dtype `dst` (a cast, see [`store_converted`]): `f64` as
/// `f32`; either float as a signed integer of at most 32 bits or an
/// unsigned one of at most 16; an integer as any narrower integer.
pub fn store_convertible(src: DType, dst: DType) -> bool {
    if int_vector_dtype(src) {
        return dst.is_int() && dst.size_of() < src.size_of();
    }
    match dst {
        DType::F32 => src == DType::F64,
        DType::I32 | DType::I16 | DType::U16 | DType::I8 | DType::U8 => src.is_float(),
        _ => false,
    }
}

/// Stores the lanes of `v` (a vector of `src`) at `addr + offset` as `dst`
/// elements (see [`store_convertible`]), converted as the reference
/// converts (Rust's `as`): floats rounded to nearest for `f32`, truncated
/// towards zero and saturated to an integer dtype's range (NaN giving 0);
/// integers wrapped (their low bytes).
pub fn store_converted(
    b: &mut FunctionBuilder<'_>,
    v: Value,
    src: DType,
    dst: DType,
    addr: Value,
    offset: i32,
) {
    let lanes = 16 / src.size_of();
    if int_vector_dtype(src) {
        // The low `dst` bytes of every lane, packed at the bottom.
        let (ssz, dsz) = (src.size_of(), dst.size_of());
        let mask: Vec<u8> = (0..16)
            .map(|k| {
                let (lane, byte) = (k / dsz, k % dsz);
                if lane < lanes {
                    (lane * ssz + byte) as u8
                } else {
                    0
                }
            })
            .collect();
        let imm = b.func.dfg.immediates.push(ConstantData::from(mask));
        let bytes = b.ins().bitcast(types::I8X16, LITTLE, v);
        let low = b.ins().shuffle(bytes, bytes, imm);
        store_low_bytes(b, low, lanes * dsz, addr, offset);
        return;
    }
    if dst == DType::F32 {
        let d = b.ins().fvdemote(v);
        store_low_bytes(b, d, 8, addr, offset);
        return;
    }
    // Saturating truncation to `i32` lanes (NaN gives 0): for `f64`, the
    // two results in the low lanes (`cvttpd2dq` after a clamp from above).
    let mut i = if src == DType::F32 {
        b.ins().fcvt_to_sint_sat(types::I32X4, v)
    } else {
        f64_to_i32_lanes(b, v)
    };
    // Saturated to the dtype's range, which the saturating packs then keep.
    let (lo, hi) = dst
        .int_range()
        .map_or((i32::MIN as i64, i32::MAX as i64), |(lo, hi)| {
            (lo as i64, hi as i64)
        });
    if dst != DType::I32 {
        let lo = int_splat(b, types::I32X4, lo);
        let hi = int_splat(b, types::I32X4, hi);
        i = b.ins().smax(i, lo);
        i = b.ins().smin(i, hi);
        i = if dst == DType::U16 {
            b.ins().unarrow(i, i)
        } else {
            b.ins().snarrow(i, i)
        };
        if dst.size_of() == 1 {
            i = if dst == DType::U8 {
                b.ins().unarrow(i, i)
            } else {
                b.ins().snarrow(i, i)
            };
        }
    }
    store_low_bytes(b, i, lanes * dst.size_of(), addr, offset);
}

/// Stores the low `bytes` (2, 4, 8 or 16) bytes of vector `v` at
/// `addr + offset`.
pub fn store_low_bytes(
    b: &mut FunctionBuilder<'_>,
    v: Value,
    bytes: usize,
    addr: Value,
    offset: i32,
) {
    let lane_ty = match bytes {
        16 => {
            b.ins().store(OPERAND, v, addr, offset);
            return;
        }
        8 => types::I64X2,
        4 => types::I32X4,
        _ => types::I16X8,
    };
    let q = b.ins().bitcast(lane_ty, LITTLE, v);
    let low = b.ins().extractlane(q, 0);
    b.ins().store(OPERAND, low, addr, offset);
}

/// Flags of every access to operand memory (inputs, outputs, reduction
/// accumulators): it never traps (the driver keeps each access within the
/// operand's shape) but is not declared aligned, because caller arrays are
/// only element-aligned (`x.slice(s![1..])` starts 8 bytes into a 16-byte
/// group) and Cranelift lets an access marked aligned trap or misbehave
/// when it is not (x86-64 without AVX may fold it into an aligned SSE
/// memory operand).
pub const OPERAND: MemFlagsData = MemFlagsData::new().with_notrap();

/// Flags of a bitcast between 128-bit vector types (lane order little-endian,
/// as x86 holds them).
pub const LITTLE: MemFlagsData =
    MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little);

/// Flags of an access to memory kiln itself allocates aligned for the
/// access: the kernel's pointer and stride arrays (8-byte words built by
/// the driver, loaded as 8-byte words) and the stack scratch slots (created
/// with 16-byte alignment, accessed by 16-byte vectors at multiples of 16
/// bytes or by elements at multiples of their size).
pub const OWN: MemFlagsData = MemFlagsData::trusted();

/// Loads one element of `dtype` at `addr` in canonical form.
pub fn load(b: &mut FunctionBuilder<'_>, dtype: DType, addr: Value) -> Value {
    let f = OPERAND;
    match dtype {
        DType::F64 => b.ins().load(types::F64, f, addr, 0),
        DType::F32 => b.ins().load(types::F32, f, addr, 0),
        DType::I64 => b.ins().load(types::I64, f, addr, 0),
        DType::I32 => b.ins().sload32(f, addr, 0),
        DType::I16 => b.ins().sload16(types::I64, f, addr, 0),
        DType::I8 => b.ins().sload8(types::I64, f, addr, 0),
        DType::U8 | DType::Bool => b.ins().uload8(types::I64, f, addr, 0),
        DType::U16 => b.ins().uload16(types::I64, f, addr, 0),
        DType::U32 => b.ins().uload32(f, addr, 0),
        DType::U64 => b.ins().load(types::I64, f, addr, 0),
    }
}

/// Stores a canonical value of `dtype` at `addr`.
pub fn store(b: &mut FunctionBuilder<'_>, dtype: DType, v: Value, addr: Value) {
    let f = OPERAND;
    match dtype {
        DType::F64 | DType::F32 | DType::I64 | DType::U64 => b.ins().store(f, v, addr, 0),
        DType::I32 | DType::U32 => b.ins().istore32(f, v, addr, 0),
        DType::I16 | DType::U16 => b.ins().istore16(f, v, addr, 0),
        DType::I8 | DType::U8 | DType::Bool => b.ins().istore8(f, v, addr, 0),
    };
}

/// A canonical constant of `dtype` from the bits of a `ScalarConst`.
pub fn constant(b: &mut FunctionBuilder<'_>, dtype: DType, bits: u64) -> Value {
    match dtype {
        DType::F64 => b.ins().f64const(f64::from_bits(bits)),
        DType::F32 => b.ins().f32const(f64::from_bits(bits) as f32),
        _ => b.ins().iconst(types::I64, bits as i64),
    }
}

/// Converts a canonical value to the `f64` domain (`as f64`).
pub fn to_f64(b: &mut FunctionBuilder<'_>, v: Value, dtype: DType) -> Value {
    match dtype {
        DType::F64 => v,
        DType::F32 => b.ins().fpromote(types::F64, v),
        DType::U64 => b.ins().fcvt_from_uint(types::F64, v),
        _ => b.ins().fcvt_from_sint(types::F64, v),
    }
}

/// Converts an integer-domain result to the float dtype `out` with one
/// rounding (Rust's `as f32` / `as f64`), reading it as unsigned in the
/// `u64` domain.
fn int_to_float(b: &mut FunctionBuilder<'_>, v: Value, unsigned: bool, out: DType) -> Value {
    let t = clif_type(out);
    if unsigned {
        b.ins().fcvt_from_uint(t, v)
    } else {
        b.ins().fcvt_from_sint(t, v)
    }
}

/// Converts an `f64` to the canonical value of `dtype` (Rust `as`:
/// rounding for `f32`, saturating truncation for integers, `!= 0` for bool).
pub fn from_f64(b: &mut FunctionBuilder<'_>, v: Value, dtype: DType) -> Value {
    let clamp = |b: &mut FunctionBuilder<'_>, v: Value, lo: i64, hi: i64| {
        let i = b.ins().fcvt_to_sint_sat(types::I64, v);
        let lo = b.ins().iconst(types::I64, lo);
        let hi = b.ins().iconst(types::I64, hi);
        let i = b.ins().smax(i, lo);
        b.ins().smin(i, hi)
    };
    match dtype {
        DType::F64 => v,
        DType::F32 => b.ins().fdemote(types::F32, v),
        DType::I64 => b.ins().fcvt_to_sint_sat(types::I64, v),
        DType::I32 => clamp(b, v, i32::MIN as i64, i32::MAX as i64),
        DType::I16 => clamp(b, v, i16::MIN as i64, i16::MAX as i64),
        DType::I8 => clamp(b, v, i8::MIN as i64, i8::MAX as i64),
        DType::U8 => clamp(b, v, 0, u8::MAX as i64),
        DType::U16 => clamp(b, v, 0, u16::MAX as i64),
        DType::U32 => clamp(b, v, 0, u32::MAX as i64),
        DType::U64 => b.ins().fcvt_to_uint_sat(types::I64, v),
        DType::Bool => {
            let z = b.ins().f64const(0.0);
            let c = b.ins().fcmp(FloatCC::NotEqual, v, z);
            b.ins().uextend(types::I64, c)
        }
    }
}

/// Wraps an `i64` to the canonical value of `dtype` (integers wrap, bool is `!= 0`).
pub fn wrap_int(b: &mut FunctionBuilder<'_>, v: Value, dtype: DType) -> Value {
    match dtype {
        DType::I64 | DType::U64 => v,
        DType::I32 | DType::I16 | DType::I8 => {
            let t = match dtype {
                DType::I32 => types::I32,
                DType::I16 => types::I16,
                _ => types::I8,
            };
            let r = b.ins().ireduce(t, v);
            b.ins().sextend(types::I64, r)
        }
        DType::U8 | DType::U16 | DType::U32 => {
            let t = match dtype {
                DType::U32 => types::I32,
                DType::U16 => types::I16,
                _ => types::I8,
            };
            let r = b.ins().ireduce(t, v);
            b.ins().uextend(types::I64, r)
        }
        DType::Bool => {
            let c = b.ins().icmp_imm_s(IntCC::NotEqual, v, 0);
            b.ins().uextend(types::I64, c)
        }
        DType::F32 | DType::F64 => unreachable!("wrap_int on a float dtype"),
    }
}

fn bool_i64(b: &mut FunctionBuilder<'_>, c: Value) -> Value {
    b.ins().uextend(types::I64, c)
}

/// The callee symbols a scalar node of `op` on inputs of dtypes `dts` with
/// output dtype `out` needs in the per-element path.
pub fn scalar_callee(op: ScalarOp, dts: &[DType], out: DType) -> Option<(&'static str, ScalarSig)> {
    if op.computes_in_float(dts, out) {
        mathcalls::scalar_symbol(op)
    } else if op == ScalarOp::Pow && op.computes_in_u64(dts, out) {
        Some(mathcalls::UINT_POW)
    } else if op == ScalarOp::Pow {
        Some(mathcalls::INT_POW)
    } else {
        None
    }
}

fn call(
    b: &mut FunctionBuilder<'_>,
    callees: &Callees,
    name: &'static str,
    args: &[Value],
) -> Result<Value> {
    let f = *callees
        .get(name)
        .ok_or_else(|| Error::Compile(format!("callee {name} was not imported")))?;
    let inst = b.ins().call(f, args);
    Ok(b.inst_results(inst)[0])
}

/// NaN-propagating maximum (`nan_max`, when `max`) or minimum of two f64 or
/// f32 scalars or vectors of type `ty` (the first operand wins ties).
pub fn nan_minmax(b: &mut FunctionBuilder<'_>, a: Value, x: Value, max: bool, ty: Type) -> Value {
    let cc = if max {
        FloatCC::GreaterThanOrEqual
    } else {
        FloatCC::LessThanOrEqual
    };
    let c = b.ins().fcmp(cc, a, x);
    let u = b.ins().fcmp(FloatCC::Unordered, a, x);
    let nan = float_splat(b, ty, f64::NAN);
    if ty.is_vector() {
        let c = vmask(b, c, ty);
        let u = vmask(b, u, ty);
        let r = b.ins().bitselect(c, a, x);
        b.ins().bitselect(u, nan, r)
    } else {
        let r = fselect(b, c, a, x);
        fselect(b, u, nan, r)
    }
}

/// A float constant of type `ty` (scalar or splat vector). A vector is a
/// `vconst`: one load from the function's constant pool, where a `splat`
/// of a scalar constant costs an integer move, a transfer and a shuffle
/// each time it is emitted (the default `opt_level=none` does not share
/// repeated constants).
pub fn float_splat(b: &mut FunctionBuilder<'_>, ty: Type, v: f64) -> Value {
    match (ty.is_vector(), ty.lane_type() == types::F32) {
        (true, true) => vconst_splat(b, ty, &(v as f32).to_le_bytes()),
        (true, false) => vconst_splat(b, ty, &v.to_le_bytes()),
        (false, true) => b.ins().f32const(v as f32),
        (false, false) => b.ins().f64const(v),
    }
}

/// An integer vector constant of type `ty` with every lane `v` (truncated
/// to the lane width), as a `vconst` like [`float_splat`].
pub fn int_splat(b: &mut FunctionBuilder<'_>, ty: Type, v: i64) -> Value {
    let lane_bytes = ty.lane_type().bytes() as usize;
    vconst_splat(b, ty, &v.to_le_bytes()[..lane_bytes])
}

/// The vector `ty` with every lane the little-endian bytes `lane`, from the
/// function's constant pool.
fn vconst_splat(b: &mut FunctionBuilder<'_>, ty: Type, lane: &[u8]) -> Value {
    let bytes = lane.repeat(ty.lane_count() as usize);
    let c = b.func.dfg.constants.insert(ConstantData::from(bytes));
    b.ins().vconst(ty, c)
}

/// `c ? x : y` on two f32 or f64 scalars without a branch. Cranelift lowers
/// a float `select` to a conditional jump around a register move, which
/// mispredicts on data-dependent conditions (`where(x > 0, ...)` on random
/// signs ran at ~14 cycles per element); moving the bits through integer
/// registers lets it use a conditional move instead.
pub fn fselect(b: &mut FunctionBuilder<'_>, c: Value, x: Value, y: Value) -> Value {
    let fty = b.func.dfg.value_type(x);
    let ity = if fty == types::F32 {
        types::I32
    } else {
        types::I64
    };
    let flags = MemFlagsData::new();
    let xi = b.ins().bitcast(ity, flags, x);
    let yi = b.ins().bitcast(ity, flags, y);
    let r = b.ins().select(c, xi, yi);
    b.ins().bitcast(fty, flags, r)
}

/// Reinterprets a vector comparison mask as the float vector type `ty`.
fn vmask(b: &mut FunctionBuilder<'_>, m: Value, ty: Type) -> Value {
    b.ins().bitcast(ty, LITTLE, m)
}

/// Emits scalar op `op` on canonical arguments `args` (of dtypes `dts`),
/// producing the canonical value of dtype `out`.
pub fn emit_scalar(
    b: &mut FunctionBuilder<'_>,
    callees: &Callees,
    op: ScalarOp,
    args: &[Value],
    dts: &[DType],
    out: DType,
) -> Result<Value> {
    if op.computes_in_float(dts, out) {
        let f: Vec<Value> = args
            .iter()
            .zip(dts)
            .map(|(&v, &d)| to_f64(b, v, d))
            .collect();
        match float_op(b, callees, op, &f)? {
            FRes::F(v) => Ok(from_f64(b, v, out)),
            FRes::B(v) => {
                if out == DType::Bool {
                    Ok(v)
                } else {
                    let fv = b.ins().fcvt_from_sint(types::F64, v);
                    Ok(from_f64(b, fv, out))
                }
            }
        }
    } else {
        // A float argument in the integer domain (the condition of a `switch`)
        // enters as its truth value, as in the reference evaluator.
        let ints: Vec<Value> = args
            .iter()
            .zip(dts)
            .map(|(&v, &d)| {
                if d.is_float() {
                    let f = to_f64(b, v, d);
                    from_f64(b, f, DType::Bool)
                } else {
                    v
                }
            })
            .collect();
        let unsigned = op.computes_in_u64(dts, out);
        let r = int_op(b, callees, op, &ints, out, unsigned)?;
        if out.is_float() {
            // An integer-domain op with a float result (a cast of an integer): `as f32` / `as f64`.
            Ok(int_to_float(b, r, unsigned, out))
        } else {
            Ok(wrap_int(b, r, out))
        }
    }
}

enum FRes {
    /// An f64.
    F(Value),
    /// A bool as i64 0/1.
    B(Value),
}

fn float_op(
    b: &mut FunctionBuilder<'_>,
    callees: &Callees,
    op: ScalarOp,
    a: &[Value],
) -> Result<FRes> {
    use ScalarOp::*;
    let ty = types::F64;
    let cmp = |b: &mut FunctionBuilder<'_>, cc: FloatCC| {
        let c = b.ins().fcmp(cc, a[0], a[1]);
        FRes::B(bool_i64(b, c))
    };
    let cmp1 = |b: &mut FunctionBuilder<'_>, cc: FloatCC, x: Value, y: Value| {
        let c = b.ins().fcmp(cc, x, y);
        FRes::B(bool_i64(b, c))
    };
    let nz = |b: &mut FunctionBuilder<'_>, v: Value| {
        let z = b.ins().f64const(0.0);
        b.ins().fcmp(FloatCC::NotEqual, v, z)
    };
    Ok(FRes::F(match op {
        Add => a[1..].iter().fold(a[0], |s, &x| b.ins().fadd(s, x)),
        Mul => a[1..].iter().fold(a[0], |s, &x| b.ins().fmul(s, x)),
        Sub => b.ins().fsub(a[0], a[1]),
        TrueDiv => b.ins().fdiv(a[0], a[1]),
        Neg => b.ins().fneg(a[0]),
        Reciprocal => {
            let one = b.ins().f64const(1.0);
            b.ins().fdiv(one, a[0])
        }
        Abs => b.ins().fabs(a[0]),
        Sign => sign_float(b, a[0], ty),
        Sqr => b.ins().fmul(a[0], a[0]),
        Maximum => nan_minmax(b, a[0], a[1], true, ty),
        Minimum => nan_minmax(b, a[0], a[1], false, ty),
        Clip => {
            let m = nan_minmax(b, a[0], a[1], true, ty);
            nan_minmax(b, m, a[2], false, ty)
        }
        Sqrt => b.ins().sqrt(a[0]),
        Floor => b.ins().floor(a[0]),
        Ceil => b.ins().ceil(a[0]),
        Round => b.ins().nearest(a[0]),
        Trunc => b.ins().trunc(a[0]),
        CopySign => b.ins().fcopysign(a[0], a[1]),
        IsNan => return Ok(cmp1(b, FloatCC::Unordered, a[0], a[0])),
        IsInf | IsFinite => {
            let m = b.ins().fabs(a[0]);
            let inf = b.ins().f64const(f64::INFINITY);
            // An ordered comparison: NaN is neither infinite nor finite.
            let cc = if op == IsInf {
                FloatCC::Equal
            } else {
                FloatCC::LessThan
            };
            return Ok(cmp1(b, cc, m, inf));
        }
        Lt => return Ok(cmp(b, FloatCC::LessThan)),
        Le => return Ok(cmp(b, FloatCC::LessThanOrEqual)),
        Gt => return Ok(cmp(b, FloatCC::GreaterThan)),
        Ge => return Ok(cmp(b, FloatCC::GreaterThanOrEqual)),
        Eq => return Ok(cmp(b, FloatCC::Equal)),
        Neq => return Ok(cmp(b, FloatCC::NotEqual)),
        And | Or | Xor => {
            let x = nz(b, a[0]);
            let y = nz(b, a[1]);
            let r = match op {
                And => b.ins().band(x, y),
                Or => b.ins().bor(x, y),
                _ => b.ins().bxor(x, y),
            };
            return Ok(FRes::B(bool_i64(b, r)));
        }
        Invert => {
            let z = b.ins().f64const(0.0);
            let c = b.ins().fcmp(FloatCC::Equal, a[0], z);
            return Ok(FRes::B(bool_i64(b, c)));
        }
        Switch => {
            let c = nz(b, a[0]);
            fselect(b, c, a[1], a[2])
        }
        Second => a[1],
        Identity | Cast(_) => a[0],
        op => match mathcalls::scalar_symbol(op) {
            Some((name, _)) => call(b, callees, name, a)?,
            None => return Err(Error::Compile(format!("no float lowering for {op}"))),
        },
    }))
}

fn sign_float(b: &mut FunctionBuilder<'_>, x: Value, ty: Type) -> Value {
    let zero = float_splat(b, ty, 0.0);
    let one = float_splat(b, ty, 1.0);
    let mone = float_splat(b, ty, -1.0);
    let lt = b.ins().fcmp(FloatCC::LessThan, x, zero);
    let gt = b.ins().fcmp(FloatCC::GreaterThan, x, zero);
    let un = b.ins().fcmp(FloatCC::Unordered, x, x);
    if ty.is_vector() {
        let (lt, gt, un) = (vmask(b, lt, ty), vmask(b, gt, ty), vmask(b, un, ty));
        let r = b.ins().bitselect(lt, mone, zero);
        let r = b.ins().bitselect(gt, one, r);
        b.ins().bitselect(un, x, r)
    } else {
        let r = fselect(b, lt, mone, zero);
        let r = fselect(b, gt, one, r);
        fselect(b, un, x, r)
    }
}

fn int_op(
    b: &mut FunctionBuilder<'_>,
    callees: &Callees,
    op: ScalarOp,
    a: &[Value],
    out: DType,
    unsigned: bool,
) -> Result<Value> {
    use ScalarOp::*;
    let cmp = |b: &mut FunctionBuilder<'_>, cc: IntCC| {
        let c = b.ins().icmp(cc, a[0], a[1]);
        bool_i64(b, c)
    };
    // The `u64` domain's own lowerings; the others read bit patterns alike.
    if unsigned {
        match op {
            IntDiv | Mod | Fmod => return Ok(uint_divmod(b, a[0], a[1], op == IntDiv)),
            RightShift => return Ok(ushift_right(b, a[0], a[1])),
            Pow => return call(b, callees, mathcalls::UINT_POW.0, a),
            Abs => return Ok(a[0]),
            Sign => {
                let c = b.ins().icmp_imm_u(IntCC::NotEqual, a[0], 0);
                return Ok(bool_i64(b, c));
            }
            Maximum => return Ok(b.ins().umax(a[0], a[1])),
            Minimum => return Ok(b.ins().umin(a[0], a[1])),
            Clip => {
                let m = b.ins().umax(a[0], a[1]);
                return Ok(b.ins().umin(m, a[2]));
            }
            Lt => return Ok(cmp(b, IntCC::UnsignedLessThan)),
            Le => return Ok(cmp(b, IntCC::UnsignedLessThanOrEqual)),
            Gt => return Ok(cmp(b, IntCC::UnsignedGreaterThan)),
            Ge => return Ok(cmp(b, IntCC::UnsignedGreaterThanOrEqual)),
            _ => {}
        }
    }
    let nz = |b: &mut FunctionBuilder<'_>, v: Value| b.ins().icmp_imm_s(IntCC::NotEqual, v, 0);
    Ok(match op {
        Add => a[1..].iter().fold(a[0], |s, &x| b.ins().iadd(s, x)),
        Mul => a[1..].iter().fold(a[0], |s, &x| b.ins().imul(s, x)),
        Sub => b.ins().isub(a[0], a[1]),
        IntDiv | Mod => int_divmod(b, a[0], a[1], op == IntDiv),
        Fmod => int_fmod(b, a[0], a[1]),
        LeftShift | RightShift => shift(b, a[0], a[1], op == LeftShift),
        IsNan | IsInf => b.ins().iconst(types::I64, 0),
        IsFinite => b.ins().iconst(types::I64, 1),
        Pow => call(b, callees, mathcalls::INT_POW.0, a)?,
        Neg => b.ins().ineg(a[0]),
        Abs => b.ins().iabs(a[0]),
        Sign => {
            let z = b.ins().iconst(types::I64, 0);
            let one = b.ins().iconst(types::I64, 1);
            let mone = b.ins().iconst(types::I64, -1);
            let lt = b.ins().icmp_imm_s(IntCC::SignedLessThan, a[0], 0);
            let gt = b.ins().icmp_imm_s(IntCC::SignedGreaterThan, a[0], 0);
            let r = b.ins().select(lt, mone, z);
            b.ins().select(gt, one, r)
        }
        Sqr => b.ins().imul(a[0], a[0]),
        Maximum => b.ins().smax(a[0], a[1]),
        Minimum => b.ins().smin(a[0], a[1]),
        Clip => {
            let m = b.ins().smax(a[0], a[1]);
            b.ins().smin(m, a[2])
        }
        Lt => cmp(b, IntCC::SignedLessThan),
        Le => cmp(b, IntCC::SignedLessThanOrEqual),
        Gt => cmp(b, IntCC::SignedGreaterThan),
        Ge => cmp(b, IntCC::SignedGreaterThanOrEqual),
        Eq => cmp(b, IntCC::Equal),
        Neq => cmp(b, IntCC::NotEqual),
        And | Or | Xor if out == DType::Bool => {
            let x = nz(b, a[0]);
            let y = nz(b, a[1]);
            let r = match op {
                And => b.ins().band(x, y),
                Or => b.ins().bor(x, y),
                _ => b.ins().bxor(x, y),
            };
            bool_i64(b, r)
        }
        And => b.ins().band(a[0], a[1]),
        Or => b.ins().bor(a[0], a[1]),
        Xor => b.ins().bxor(a[0], a[1]),
        Invert if out == DType::Bool => {
            let c = b.ins().icmp_imm_s(IntCC::Equal, a[0], 0);
            bool_i64(b, c)
        }
        Invert => b.ins().bnot(a[0]),
        Switch => {
            let c = nz(b, a[0]);
            b.ins().select(c, a[1], a[2])
        }
        Second => a[1],
        // Rounding an integer is the identity.
        Identity | Cast(_) | Floor | Ceil | Round | Trunc => a[0],
        op => {
            return Err(Error::Compile(format!(
                "{op} has no integer-domain lowering"
            )))
        }
    })
}

/// A trap-free divisor for an i64 division by `d`: `d`, or 1 where `d` is
/// 0 or -1 (`d + 1 <= 1` unsigned). Dividing by 1 instead leaves a
/// remainder of 0, which is numpy's remainder for both.
///
/// The integer division lowerings below select on a comparison that has
/// one use each, so that Cranelift fuses it into `cmp` + `cmov`: a
/// comparison result kept as a value is written with `setcc` into the low
/// byte of a register, which on x86 merges with (waits for) whatever that
/// register last held, and the register allocator reused the previous
/// element's `idiv` result there, which chained every `idiv` to the one
/// before (`i % j` on 4e6 i64, one thread: 32 ms against fmod's 14).
fn safe_divisor(b: &mut FunctionBuilder<'_>, d: Value) -> Value {
    let t = b.ins().iadd_imm_s(d, 1);
    let bad = b.ins().icmp_imm_u(IntCC::UnsignedLessThanOrEqual, t, 1);
    let one = b.ins().iconst(types::I64, 1);
    b.ins().select(bad, one, d)
}

/// numpy floor division (`div`) or modulo on i64 without traps: `x // 0 ==
/// x % 0 == 0`, `MIN // -1` wraps to `MIN`.
fn int_divmod(b: &mut FunctionBuilder<'_>, a: Value, d: Value, div: bool) -> Value {
    let safe = safe_divisor(b, d);
    let zero = b.ins().iconst(types::I64, 0);
    if div {
        // One division: the remainder from the quotient (x86 has no fused
        // form in Cranelift's IR; `sdiv` and `srem` were two `idiv`s). The
        // quotient rounds down where the remainder is not 0 and the
        // operands' signs differ; d = -1 gives -a and d = 0 gives 0 (their
        // remainder is 0 here: the division was by 1).
        let q = b.ins().sdiv(a, safe);
        let qd = b.ins().imul(q, safe);
        let r = b.ins().isub(a, qd);
        let x = b.ins().bxor(a, d);
        let down = b.ins().iadd_imm_s(q, -1);
        let signs_differ = b.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0);
        let floor = b.ins().select(signs_differ, down, q);
        let exact = b.ins().icmp_imm_s(IntCC::Equal, r, 0);
        let q = b.ins().select(exact, q, floor);
        let na = b.ins().ineg(a);
        let by_m1 = b.ins().icmp_imm_s(IntCC::Equal, d, -1);
        let q = b.ins().select(by_m1, na, q);
        let by_0 = b.ins().icmp_imm_s(IntCC::Equal, d, 0);
        b.ins().select(by_0, zero, q)
    } else {
        // The remainder straight from `srem` (0 for d = 0 or -1), plus d
        // where it is not 0 and its sign differs from d's.
        let r = b.ins().srem(a, safe);
        let x = b.ins().bxor(r, d);
        let up = b.ins().iadd(r, d);
        let signs_differ = b.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0);
        let floor = b.ins().select(signs_differ, up, r);
        let exact = b.ins().icmp_imm_s(IntCC::Equal, r, 0);
        b.ins().select(exact, zero, floor)
    }
}

/// Unsigned division (`div`) or remainder on u64 without traps: `x // 0 ==
/// x % 0 == 0` (`ScalarOp::eval_u64`; `mod` and `fmod` agree on unsigned
/// values). The divisor 0 becomes 1 (`umax`), whose remainder is 0.
fn uint_divmod(b: &mut FunctionBuilder<'_>, a: Value, d: Value, div: bool) -> Value {
    let one = b.ins().iconst(types::I64, 1);
    let safe = b.ins().umax(d, one);
    if div {
        let q = b.ins().udiv(a, safe);
        let zero = b.ins().iconst(types::I64, 0);
        let by_0 = b.ins().icmp_imm_s(IntCC::Equal, d, 0);
        b.ins().select(by_0, zero, q)
    } else {
        b.ins().urem(a, safe)
    }
}

/// Logical right shift on u64: a count of 64 or more gives 0 (Cranelift's
/// shifts take the count modulo 64).
fn ushift_right(b: &mut FunctionBuilder<'_>, a: Value, count: Value) -> Value {
    let out = b
        .ins()
        .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, count, 64);
    let v = b.ins().ushr(a, count);
    let zero = b.ins().iconst(types::I64, 0);
    b.ins().select(out, zero, v)
}

/// C `fmod` on i64 without traps (`ops::scalar::int_fmod`): `x fmod 0 == 0`,
/// `MIN fmod -1 == 0` (both divide by 1 instead, see [`safe_divisor`]).
fn int_fmod(b: &mut FunctionBuilder<'_>, a: Value, d: Value) -> Value {
    let safe = safe_divisor(b, d);
    b.ins().srem(a, safe)
}

/// numpy shifts on i64 (`ops::scalar::left_shift` / `right_shift`):
/// Cranelift's shifts take the count modulo 64, so a count outside `0..64`
/// (negative counts are huge as unsigned) is handled explicitly: `<<` gives
/// 0 and `>>` shifts by 63 (0 or -1).
fn shift(b: &mut FunctionBuilder<'_>, a: Value, count: Value, left: bool) -> Value {
    let out = b
        .ins()
        .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, count, 64);
    if left {
        let v = b.ins().ishl(a, count);
        let zero = b.ins().iconst(types::I64, 0);
        b.ins().select(out, zero, v)
    } else {
        let max = b.ins().iconst(types::I64, 63);
        let c = b.ins().select(out, max, count);
        b.ins().sshr(a, c)
    }
}

/// True when `op` with `nargs` arguments has a vector lowering on lanes of
/// `dtype` that equals the scalar reference bit for bit (for `f32`, only ops
/// whose single rounding in `f32` equals the reference's `f64` evaluation
/// followed by rounding).
pub fn vector_capable(op: ScalarOp, nargs: usize, dtype: DType) -> bool {
    use ScalarOp::*;
    match op {
        Add | Mul => dtype == DType::F64 || nargs == 2,
        Sub | TrueDiv | Neg | Reciprocal | Abs | Sqr | Sqrt | Floor | Ceil | Round | Trunc
        | Maximum | Minimum | Clip | Sign | Switch | Second | Identity => true,
        Cast(d) => d == dtype,
        _ => false,
    }
}

/// True when `op` has an exact vector lowering on lanes of integer `dtype`
/// (see [`int_vector_dtype`]): wrapping addition, subtraction,
/// multiplication, squaring, negation and absolute value, maximum, minimum,
/// clipping and sign (unsigned for unsigned dtypes), bitwise logic, and
/// selection, and for `i32` floor division and remainder (`i32_divmod`).
/// Wrapping in the lane width equals the reference's `i64`-domain result
/// wrapped to the dtype's width.
pub fn int_vector_capable(op: ScalarOp, dtype: DType) -> bool {
    use ScalarOp::*;
    match op {
        Add | Sub | Mul | Sqr | Neg | Abs | Maximum | Minimum | Clip | Sign | And | Or | Xor
        | Invert | Switch | Second | Identity => true,
        // Floor division and its remainder through f64 ([`i32_divmod`]).
        IntDiv | Mod => dtype == DType::I32,
        Cast(d) => d == dtype,
        _ => false,
    }
}

/// The `I32X4` lanes of `f(a, d)` computed on each half of the lanes
/// converted to `F64X2` (exact), `f`'s integral results truncated back
/// (saturated, as [`f64_to_i32_lanes`]).
fn i32_halves(
    b: &mut FunctionBuilder<'_>,
    a: Value,
    d: Value,
    f: impl Fn(&mut FunctionBuilder<'_>, Value, Value) -> Value,
) -> Value {
    // Lanes 2 and 3 of an I32X4 moved to lanes 0 and 1.
    let high = |b: &mut FunctionBuilder<'_>, v: Value| {
        let bytes = b.ins().bitcast(types::I8X16, LITTLE, v);
        let mask: Vec<u8> = (8..16).chain(8..16).collect();
        let imm = b.func.dfg.immediates.push(ConstantData::from(mask));
        let sh = b.ins().shuffle(bytes, bytes, imm);
        b.ins().bitcast(types::I32X4, LITTLE, sh)
    };
    let half = |b: &mut FunctionBuilder<'_>, a: Value, d: Value| {
        let (fa, fd) = (
            promote_narrow(b, a, DType::I32),
            promote_narrow(b, d, DType::I32),
        );
        let q = f(b, fa, fd);
        f64_to_i32_lanes(b, q)
    };
    let (ah, dh) = (high(b, a), high(b, d));
    let (lo, hi) = (half(b, a, d), half(b, ah, dh));
    // Low lanes of `lo` and of `hi` side by side.
    let (lo, hi) = (
        b.ins().bitcast(types::I8X16, LITTLE, lo),
        b.ins().bitcast(types::I8X16, LITTLE, hi),
    );
    let mask: Vec<u8> = (0..8).chain(16..24).collect();
    let imm = b.func.dfg.immediates.push(ConstantData::from(mask));
    let q = b.ins().shuffle(lo, hi, imm);
    b.ins().bitcast(types::I32X4, LITTLE, q)
}

/// `i32_divmod` by a constant `c` (`c` ∉ {0, -1}; `d` its lanes), with
/// a product by the constant's reciprocal instead of a division: `q =
/// floor((a + c/(2|c|)) · (1/c))`. With `a = q·c + r`, `r/c ∈ [0, 1)`, the
/// shifted quotient `q + (r + c/(2|c|))/c` lies at least `1/(2|c|)` from
/// every integer, while the two roundings (of `1/c` and of the product,
/// the shift `±1/2` being exact) move it by at most 2^-52 of its
/// magnitude, below `2^31/|c|`: less than `2^-21/|c|`, so the floor is the
/// exact floor quotient. `a // 3` on 2000 × 2000 `i32`, two threads, was
/// scalar at 5.2-6.4 ms; the lanes' division gave 3.7; this 2.5-2.9
/// (`kiln bench`, three alternated rounds, AVX-512; AVX2 forced 7.0-8.1 →
/// 2.8-3.3). `a // b` of two arrays, divided in `f64` lanes: 10.2-13.1 →
/// 3.5-3.6.
pub fn i32_divmod_const(
    b: &mut FunctionBuilder<'_>,
    a: Value,
    d: Value,
    c: i64,
    div: bool,
) -> Value {
    debug_assert!(c != 0 && c != -1);
    let (inv, shift) = (1.0 / c as f64, 0.5f64.copysign(c as f64));
    let q = i32_halves(b, a, d, |b, fa, _| {
        let s = float_splat(b, types::F64X2, shift);
        let r = float_splat(b, types::F64X2, inv);
        let x = b.ins().fadd(fa, s);
        let q = b.ins().fmul(x, r);
        b.ins().floor(q)
    });
    if div {
        return q;
    }
    let qd = b.ins().imul(q, d);
    b.ins().isub(a, qd)
}

/// Floor division (`div`) or floor remainder of `I32X4` lanes, as the
/// reference's [`int_divmod`] gives them wrapped to `i32` (x86 has no vector
/// integer division). Each half of the lanes is converted to `f64`
/// (exact) and divided there: for integers `a`, `d` below 2^31 in
/// magnitude, `a / d` is either an integer (exact in `f64`) or at least
/// `1/|d|` from the nearest one, a relative distance above 2^-62 that no
/// `f64` rounding of the quotient (at most 2^-53 relative) crosses, so
/// `floor(a / d)` rounded in `f64` is the exact floor quotient. The
/// quotients (below 2^31 in magnitude but for `i32::MIN / -1`) are
/// truncated back to `i32`; `d = -1` gives the wrapping `-a` and `d = 0`
/// gives 0, as the reference does. The remainder is `a - q·d` in wrapping
/// `i32` arithmetic, 0 for `d = 0`.
fn i32_divmod(b: &mut FunctionBuilder<'_>, a: Value, d: Value, div: bool) -> Value {
    let q = i32_halves(b, a, d, |b, fa, fd| {
        let q = b.ins().fdiv(fa, fd);
        b.ins().floor(q)
    });
    let zero = int_splat(b, types::I32X4, 0);
    let minus_one = int_splat(b, types::I32X4, -1);
    let by_0 = b.ins().icmp(IntCC::Equal, d, zero);
    let by_m1 = b.ins().icmp(IntCC::Equal, d, minus_one);
    let na = b.ins().ineg(a);
    let q = b.ins().bitselect(by_m1, na, q);
    let q = b.ins().bitselect(by_0, zero, q);
    if div {
        return q;
    }
    let qd = b.ins().imul(q, d);
    let r = b.ins().isub(a, qd);
    b.ins().bitselect(by_0, zero, r)
}

/// [`emit_vector_masked`] for the vector path of integer `dtype` (vector
/// type `ty`): lane masks are integer lanes of all ones or zeros.
pub fn emit_vector_int(
    b: &mut FunctionBuilder<'_>,
    op: ScalarOp,
    a: &[Value],
    masks: &[bool],
    out_mask: bool,
    ty: Type,
    dtype: DType,
) -> Result<Value> {
    use ScalarOp::*;
    let unsigned = matches!(dtype, DType::U64 | DType::U32 | DType::U16 | DType::U8);
    let zero = |b: &mut FunctionBuilder<'_>| int_splat(b, ty, 0);
    let cc = |signed: IntCC, unsigned_cc: IntCC| if unsigned { unsigned_cc } else { signed };
    // The lane mask of a value's truth (a mask already is one).
    let truth = |b: &mut FunctionBuilder<'_>, v: Value, is_mask: bool| {
        if is_mask {
            v
        } else {
            let z = zero(b);
            b.ins().icmp(IntCC::NotEqual, v, z)
        }
    };
    if out_mask {
        if let Some(v) = emit_mask_logic(b, op, a, masks) {
            return Ok(v);
        }
        return Ok(match op {
            Lt => b.ins().icmp(
                cc(IntCC::SignedLessThan, IntCC::UnsignedLessThan),
                a[0],
                a[1],
            ),
            Le => b.ins().icmp(
                cc(IntCC::SignedLessThanOrEqual, IntCC::UnsignedLessThanOrEqual),
                a[0],
                a[1],
            ),
            Gt => b.ins().icmp(
                cc(IntCC::SignedGreaterThan, IntCC::UnsignedGreaterThan),
                a[0],
                a[1],
            ),
            Ge => b.ins().icmp(
                cc(
                    IntCC::SignedGreaterThanOrEqual,
                    IntCC::UnsignedGreaterThanOrEqual,
                ),
                a[0],
                a[1],
            ),
            Eq => b.ins().icmp(IntCC::Equal, a[0], a[1]),
            Neq => b.ins().icmp(IntCC::NotEqual, a[0], a[1]),
            Cast(DType::Bool) => truth(b, a[0], false),
            Switch => {
                let c = truth(b, a[0], masks[0]);
                b.ins().bitselect(c, a[1], a[2])
            }
            op => {
                return Err(Error::Compile(format!(
                    "{op} has no integer lane-mask lowering"
                )))
            }
        });
    }
    // A bool argument of an integer op counts as 0 or 1, except a Switch
    // condition, which selects directly.
    let one = int_splat(b, ty, 1);
    let v: Vec<Value> = a
        .iter()
        .zip(masks)
        .enumerate()
        .map(|(k, (&v, &m))| {
            if m && !(op == Switch && k == 0) {
                b.ins().band(v, one)
            } else {
                v
            }
        })
        .collect();
    Ok(match op {
        Add => v[1..].iter().fold(v[0], |s, &x| b.ins().iadd(s, x)),
        Mul if ty == types::I8X16 => v[1..].iter().fold(v[0], |s, &x| imul_i8x16(b, s, x)),
        Mul => v[1..].iter().fold(v[0], |s, &x| b.ins().imul(s, x)),
        Sqr if ty == types::I8X16 => imul_i8x16(b, v[0], v[0]),
        Sqr => b.ins().imul(v[0], v[0]),
        Sub => b.ins().isub(v[0], v[1]),
        Neg => b.ins().ineg(v[0]),
        // An unsigned value is its own absolute value.
        Abs if unsigned => v[0],
        Abs => b.ins().iabs(v[0]),
        Maximum | Minimum | Clip => {
            let max = |b: &mut FunctionBuilder<'_>, x, y| {
                if unsigned {
                    b.ins().umax(x, y)
                } else {
                    b.ins().smax(x, y)
                }
            };
            let min = |b: &mut FunctionBuilder<'_>, x, y| {
                if unsigned {
                    b.ins().umin(x, y)
                } else {
                    b.ins().smin(x, y)
                }
            };
            match op {
                Maximum => max(b, v[0], v[1]),
                Minimum => min(b, v[0], v[1]),
                _ => {
                    let m = max(b, v[0], v[1]);
                    min(b, m, v[2])
                }
            }
        }
        // 1 where positive, -1 (all ones) where negative, else 0; unsigned
        // values are never negative.
        Sign => {
            let z = zero(b);
            let pos = if unsigned {
                b.ins().icmp(IntCC::NotEqual, v[0], z)
            } else {
                b.ins().icmp(IntCC::SignedGreaterThan, v[0], z)
            };
            let pos = b.ins().band(pos, one);
            if unsigned {
                pos
            } else {
                let neg = b.ins().icmp(IntCC::SignedLessThan, v[0], z);
                b.ins().bor(pos, neg)
            }
        }
        And => b.ins().band(v[0], v[1]),
        Or => b.ins().bor(v[0], v[1]),
        Xor => b.ins().bxor(v[0], v[1]),
        Invert => b.ins().bnot(v[0]),
        Switch => {
            let c = truth(b, v[0], masks[0]);
            b.ins().bitselect(c, v[1], v[2])
        }
        Second => v[1],
        Identity | Cast(_) => v[0],
        IntDiv | Mod if ty == types::I32X4 && !unsigned => i32_divmod(b, v[0], v[1], op == IntDiv),
        op => {
            return Err(Error::Compile(format!(
                "{op} has no integer vector lowering"
            )))
        }
    })
}

/// Wrapping product of two `I8X16` vectors (x86 has no byte multiply): the
/// halves widened to 16-bit lanes, multiplied, their low bytes kept and
/// packed back (`unarrow` saturates, but masked to a byte nothing does).
/// The low byte of a product does not depend on the operands' signs, so
/// the zero-extending widening serves `i8` and `u8` alike.
fn imul_i8x16(b: &mut FunctionBuilder<'_>, x: Value, y: Value) -> Value {
    let low_byte = int_splat(b, types::I16X8, 0xFF);
    let mut half = |wide: fn(&mut FunctionBuilder<'_>, Value) -> Value| {
        let (wx, wy) = (wide(b, x), wide(b, y));
        let p = b.ins().imul(wx, wy);
        b.ins().band(p, low_byte)
    };
    let lo = half(|b, v| b.ins().uwiden_low(v));
    let hi = half(|b, v| b.ins().uwiden_high(v));
    b.ins().unarrow(lo, hi)
}

/// True when `op` producing a bool from arguments of dtypes `args` has a
/// lane-mask form on the vector path of dtype `dtype` (float or integer):
/// comparisons of `dtype` values (unsigned for unsigned dtypes) and, for
/// floats, their classifications, the logical ops and (in)equality of bools,
/// a bool `Switch`, and the truth value (`Cast(Bool)`) of a value.
pub fn mask_capable(op: ScalarOp, args: &[DType], dtype: DType) -> bool {
    use ScalarOp::*;
    let all = |d: DType| args.iter().all(|&a| a == d);
    match op {
        Lt | Le | Gt | Ge | Cast(DType::Bool) => all(dtype),
        IsNan | IsInf | IsFinite => dtype.is_float() && all(dtype),
        Eq | Neq => all(dtype) || all(DType::Bool),
        And | Or | Xor | Invert | Identity => all(DType::Bool),
        Switch => {
            (args[0] == dtype || args[0] == DType::Bool)
                && args[1..].iter().all(|&a| a == DType::Bool)
        }
        _ => false,
    }
}

/// The lane-mask ops both vector paths share: logic on masks, and the
/// (in)equality of two masks; `None` for any other op.
fn emit_mask_logic(
    b: &mut FunctionBuilder<'_>,
    op: ScalarOp,
    a: &[Value],
    masks: &[bool],
) -> Option<Value> {
    use ScalarOp::*;
    let both_masks = !masks.is_empty() && masks.iter().all(|&m| m);
    Some(match op {
        Eq if both_masks => {
            let d = b.ins().bxor(a[0], a[1]);
            b.ins().bnot(d)
        }
        Neq if both_masks => b.ins().bxor(a[0], a[1]),
        And => b.ins().band(a[0], a[1]),
        Or => b.ins().bor(a[0], a[1]),
        Xor => b.ins().bxor(a[0], a[1]),
        Invert => b.ins().bnot(a[0]),
        Identity => a[0],
        _ => return None,
    })
}

/// Emits one node of the vector path on vectors of type `ty`: with
/// `out_mask`, a [`mask_capable`] op producing a lane mask; otherwise a
/// [`vector_capable`] op, where each argument flagged in `masks` is a bool
/// lane mask that counts as 0 or 1 (the reference's value of a bool in
/// float arithmetic), except a `Switch` condition, which selects directly.
pub fn emit_vector_masked(
    b: &mut FunctionBuilder<'_>,
    op: ScalarOp,
    a: &[Value],
    masks: &[bool],
    out_mask: bool,
    ty: Type,
) -> Result<Value> {
    use ScalarOp::*;
    let fcmp = |b: &mut FunctionBuilder<'_>, cc: FloatCC, x: Value, y: Value| {
        let m = b.ins().fcmp(cc, x, y);
        vmask(b, m, ty)
    };
    if out_mask {
        if let Some(v) = emit_mask_logic(b, op, a, masks) {
            return Ok(v);
        }
        return Ok(match op {
            Lt => fcmp(b, FloatCC::LessThan, a[0], a[1]),
            Le => fcmp(b, FloatCC::LessThanOrEqual, a[0], a[1]),
            Gt => fcmp(b, FloatCC::GreaterThan, a[0], a[1]),
            Ge => fcmp(b, FloatCC::GreaterThanOrEqual, a[0], a[1]),
            Eq => fcmp(b, FloatCC::Equal, a[0], a[1]),
            // Unordered counts as unequal, as in the scalar form.
            Neq => fcmp(b, FloatCC::NotEqual, a[0], a[1]),
            IsNan => fcmp(b, FloatCC::Unordered, a[0], a[0]),
            IsInf | IsFinite => {
                let m = b.ins().fabs(a[0]);
                let inf = float_splat(b, ty, f64::INFINITY);
                // Ordered: NaN is neither infinite nor finite.
                let cc = if op == IsInf {
                    FloatCC::Equal
                } else {
                    FloatCC::LessThan
                };
                fcmp(b, cc, m, inf)
            }
            // The truth value of a float: NaN is true, as in the scalar form.
            Cast(DType::Bool) => {
                let z = float_splat(b, ty, 0.0);
                fcmp(b, FloatCC::NotEqual, a[0], z)
            }
            Switch => {
                let c = if masks[0] {
                    a[0]
                } else {
                    let z = float_splat(b, ty, 0.0);
                    fcmp(b, FloatCC::NotEqual, a[0], z)
                };
                b.ins().bitselect(c, a[1], a[2])
            }
            op => return Err(Error::Compile(format!("{op} has no lane-mask lowering"))),
        });
    }
    if op == Switch && masks[0] && !masks[1] && !masks[2] {
        return Ok(b.ins().bitselect(a[0], a[1], a[2]));
    }
    if !masks.contains(&true) {
        return emit_vector(b, op, a, ty);
    }
    let one = float_splat(b, ty, 1.0);
    let vals: Vec<Value> = a
        .iter()
        .zip(masks)
        .map(|(&v, &m)| if m { b.ins().band(v, one) } else { v })
        .collect();
    emit_vector(b, op, &vals, ty)
}

/// Stores the lane mask `m` (of vector type `ty`) as bools, one byte
/// (0 or 1) per lane, at `addr + offset`. Lanes of 64 or 32 bits: their
/// sign bits gathered into an integer (`vhigh_bits`), spread one bit per
/// byte by a multiply (the bits land in distinct bytes, so no carries), one
/// 2-byte or 4-byte store. Byte lanes: the mask and 1, one 16-byte store;
/// 16-bit lanes: packed to bytes first (all ones stays all ones), one
/// 8-byte store.
pub fn store_mask_bytes(b: &mut FunctionBuilder<'_>, m: Value, ty: Type, addr: Value, offset: i32) {
    if ty.lane_bits() <= 16 {
        let bytes = if ty.lane_bits() == 16 {
            b.ins().snarrow(m, m)
        } else {
            m
        };
        let one = int_splat(b, types::I8X16, 1);
        let bools = b.ins().band(bytes, one);
        if ty.lane_bits() == 8 {
            b.ins().store(OPERAND, bools, addr, offset);
        } else {
            let wide = b.ins().bitcast(types::I64X2, LITTLE, bools);
            let low = b.ins().extractlane(wide, 0);
            b.ins().store(OPERAND, low, addr, offset);
        }
        return;
    }
    let (ity, sty, spread, ones) = if ty.lane_bits() == 32 {
        (types::I32X4, types::I32, 0x0020_4081i64, 0x0101_0101i64)
    } else {
        (types::I64X2, types::I16, 0x81, 0x0101)
    };
    let iv = if ty.lane_type().is_int() {
        m
    } else {
        b.ins().bitcast(ity, LITTLE, m)
    };
    let bits = b.ins().vhigh_bits(types::I32, iv);
    let spread = b.ins().imul_imm_s(bits, spread);
    let bytes = b.ins().band_imm_s(spread, ones);
    let bytes = if sty == types::I16 {
        b.ins().ireduce(types::I16, bytes)
    } else {
        bytes
    };
    b.ins().store(OPERAND, bytes, addr, offset);
}

/// `Maximum`, `Minimum` or `Clip` on float vectors of type `ty` whose
/// bounds (`a[1..]`) are splatted constants that are not NaN: then
/// `nan_minmax` is `a < c ? c : a` (maximum) / `c < a ? c : a` (minimum),
/// NaN and ties keeping `a`, which Cranelift lowers to one `maxp*` /
/// `minp*` (their "second operand on NaN or equal" rule, with `a` second).
pub fn emit_minmax_const(
    b: &mut FunctionBuilder<'_>,
    op: ScalarOp,
    a: &[Value],
    ty: Type,
) -> Result<Value> {
    let max = |b: &mut FunctionBuilder<'_>, x: Value, c: Value| {
        let lt = b.ins().fcmp(FloatCC::LessThan, x, c);
        let lt = vmask(b, lt, ty);
        b.ins().bitselect(lt, c, x)
    };
    let min = |b: &mut FunctionBuilder<'_>, x: Value, c: Value| {
        let lt = b.ins().fcmp(FloatCC::LessThan, c, x);
        let lt = vmask(b, lt, ty);
        b.ins().bitselect(lt, c, x)
    };
    Ok(match op {
        ScalarOp::Maximum => max(b, a[0], a[1]),
        ScalarOp::Minimum => min(b, a[0], a[1]),
        ScalarOp::Clip => {
            let m = max(b, a[0], a[1]);
            min(b, m, a[2])
        }
        op => return Err(Error::Compile(format!("{op} is not a minimum or maximum"))),
    })
}

/// Emits a [`vector_capable`] op on vectors of type `ty` (all arguments of the same type).
pub fn emit_vector(
    b: &mut FunctionBuilder<'_>,
    op: ScalarOp,
    a: &[Value],
    ty: Type,
) -> Result<Value> {
    use ScalarOp::*;
    Ok(match op {
        Add => a[1..].iter().fold(a[0], |s, &x| b.ins().fadd(s, x)),
        Mul => a[1..].iter().fold(a[0], |s, &x| b.ins().fmul(s, x)),
        Sub => b.ins().fsub(a[0], a[1]),
        TrueDiv => b.ins().fdiv(a[0], a[1]),
        Neg => b.ins().fneg(a[0]),
        Reciprocal => {
            let one = float_splat(b, ty, 1.0);
            b.ins().fdiv(one, a[0])
        }
        Abs => b.ins().fabs(a[0]),
        Sqr => b.ins().fmul(a[0], a[0]),
        Sqrt => b.ins().sqrt(a[0]),
        Floor => b.ins().floor(a[0]),
        Ceil => b.ins().ceil(a[0]),
        Round => b.ins().nearest(a[0]),
        Trunc => b.ins().trunc(a[0]),
        Maximum => nan_minmax(b, a[0], a[1], true, ty),
        Minimum => nan_minmax(b, a[0], a[1], false, ty),
        Clip => {
            let m = nan_minmax(b, a[0], a[1], true, ty);
            nan_minmax(b, m, a[2], false, ty)
        }
        Sign => sign_float(b, a[0], ty),
        Switch => {
            let z = float_splat(b, ty, 0.0);
            let c = b.ins().fcmp(FloatCC::NotEqual, a[0], z);
            let c = vmask(b, c, ty);
            b.ins().bitselect(c, a[1], a[2])
        }
        Second => a[1],
        Identity | Cast(_) => a[0],
        op => return Err(Error::Compile(format!("{op} has no vector lowering"))),
    })
}

/// The canonical values of `prog`'s outputs at element `i` of inputs at
/// `ptrs` with byte `strides` (the scalar path: any strides, every dtype,
/// bit-identical to the reference evaluator).
pub(super) fn emit_scalar_program(
    b: &mut FunctionBuilder<'_>,
    callees: &Callees,
    prog: &Composite,
    ptrs: &[Value],
    strides: &[Value],
    i: Value,
) -> Result<Vec<Value>> {
    let mut vals: Vec<Value> = Vec::with_capacity(prog.nodes.len());
    let mut ins: Vec<Value> = Vec::with_capacity(ptrs.len());
    for (k, (&p, &s)) in ptrs.iter().zip(strides).enumerate() {
        let off = b.ins().imul(i, s);
        let addr = b.ins().iadd(p, off);
        ins.push(load(b, prog.inputs[k], addr));
    }
    let get = |b: &mut FunctionBuilder<'_>, vals: &[Value], r: CRef| match r {
        CRef::Input(k) => ins[k as usize],
        CRef::Node(k) => vals[k as usize],
        CRef::Const(c) => constant(b, c.dtype, c.bits),
    };
    for node in &prog.nodes {
        let args: Vec<Value> = node.args.iter().map(|&a| get(b, &vals, a)).collect();
        let dts: Vec<DType> = node.args.iter().map(|&a| prog.dtype_of(a)).collect();
        let v = emit_scalar(b, callees, node.op, &args, &dts, node.dtype)?;
        vals.push(v);
    }
    Ok(prog.outputs.iter().map(|&r| get(b, &vals, r)).collect())
}
