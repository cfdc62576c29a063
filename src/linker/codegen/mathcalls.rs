//! Math calls from JIT code: which scalar ops are computed by calling out of
//! the generated code, and the symbols those calls resolve to.
//!
//! Two kinds of callee, chosen per code path by the kernel generator:
//! - *per element* (`kiln_ref_*`, `extern "C" fn(f64) -> f64`): thin shims
//!   over the reference evaluator's own scalar functions
//!   ([`ScalarOp::eval_f64`]), so the strided / scalar paths of a kernel are
//!   bit-identical to the reference evaluator;
//! - *block-wise* (`kiln_<name>_f64/f32(x, out, n)` from `kiln-runtime`,
//!   `(x, y, out, n)` for the binary ones (`pow`, `arctan2`, `hypot`,
//!   `sigmoid_binary_crossentropy`, and the exact `fmod`, `%`, `//`),
//!   `(x, pos, neg, n)` for the paired `kiln_sigmoid_pair_f64`):
//!   vectorised AVX2 / AVX-512 implementations (within the bounds of the
//!   runtime's ACCURACY.md), used by the contiguous fast path on blocks of
//!   up to [`BLOCK`] elements.
//!
//! Invariant: every name returned by [`scalar_symbol`], [`block_symbol`],
//! [`pre_block_symbol`] or [`pair_block_symbol`] is in [`symbols`], so a
//! module built with them always links. No callee unwinds (the shims
//! cannot panic; the runtime catches its own panics).

use rustc_hash::FxHashMap;

use crate::graph::DType;
use crate::ops::scalar::{float_floor_div, float_mod, int_pow, uint_pow};
use crate::ops::ScalarOp;

/// Number of elements the contiguous fast path processes per block-wise call.
/// 128 f64 (1 KiB per staged value) measured 0.70x of the time of 256 on
/// gauss's fused kernel at 10^7 elements on two threads (with the next
/// block prefetched): shorter blocks overlap memory and computation better.
pub const BLOCK: usize = 128;

macro_rules! unary_shims {
    ($(($fname:ident, $op:ident)),* $(,)?) => {
        $(
            extern "C" fn $fname(x: f64) -> f64 {
                ScalarOp::$op.eval_f64(&[x])
            }
        )*
        /// Per-element shim of a unary float op: (op, symbol, address).
        fn unary_table() -> Vec<(ScalarOp, &'static str, *const u8)> {
            vec![$((ScalarOp::$op, stringify!($fname), $fname as *const u8)),*]
        }
    };
}

unary_shims!(
    (kiln_ref_exp, Exp),
    (kiln_ref_exp2, Exp2),
    (kiln_ref_expm1, Expm1),
    (kiln_ref_log, Log),
    (kiln_ref_log2, Log2),
    (kiln_ref_log10, Log10),
    (kiln_ref_log1p, Log1p),
    (kiln_ref_sigmoid, Sigmoid),
    (kiln_ref_softplus, Softplus),
    (kiln_ref_log1mexp, Log1mexp),
    (kiln_ref_sin, Sin),
    (kiln_ref_cos, Cos),
    (kiln_ref_tan, Tan),
    (kiln_ref_arcsin, ArcSin),
    (kiln_ref_arccos, ArcCos),
    (kiln_ref_arctan, ArcTan),
    (kiln_ref_sinh, Sinh),
    (kiln_ref_cosh, Cosh),
    (kiln_ref_tanh, Tanh),
    (kiln_ref_arcsinh, ArcSinh),
    (kiln_ref_arccosh, ArcCosh),
    (kiln_ref_arctanh, ArcTanh),
    (kiln_ref_erf, Erf),
    (kiln_ref_erfc, Erfc),
);

extern "C" fn kiln_ref_pow(x: f64, y: f64) -> f64 {
    x.powf(y)
}

extern "C" fn kiln_ref_fmod(x: f64, y: f64) -> f64 {
    float_mod(x, y)
}

extern "C" fn kiln_ref_c_fmod(x: f64, y: f64) -> f64 {
    ScalarOp::Fmod.eval_f64(&[x, y])
}

extern "C" fn kiln_ref_arctan2(y: f64, x: f64) -> f64 {
    ScalarOp::ArcTan2.eval_f64(&[y, x])
}

extern "C" fn kiln_ref_hypot(x: f64, y: f64) -> f64 {
    ScalarOp::Hypot.eval_f64(&[x, y])
}

extern "C" fn kiln_ref_sigmoid_binary_crossentropy(z: f64, t: f64) -> f64 {
    ScalarOp::SigmoidBinaryCrossentropy.eval_f64(&[z, t])
}

extern "C" fn kiln_ref_floor_div(x: f64, y: f64) -> f64 {
    float_floor_div(x, y)
}

extern "C" fn kiln_ref_int_pow(x: i64, y: i64) -> i64 {
    int_pow(x, y)
}

/// `pow` in the `u64` domain, on bit patterns carried as `i64`.
extern "C" fn kiln_ref_uint_pow(x: i64, y: i64) -> i64 {
    uint_pow(x as u64, y as u64) as i64
}

/// The signature class of a per-element callee.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarSig {
    /// `fn(f64) -> f64`.
    F1,
    /// `fn(f64, f64) -> f64`.
    F2,
    /// `fn(i64, i64) -> i64`.
    I2,
}

/// The per-element callee for `op` in the float domain, if `op` is called
/// rather than inlined.
pub fn scalar_symbol(op: ScalarOp) -> Option<(&'static str, ScalarSig)> {
    match op {
        ScalarOp::Pow => Some(("kiln_ref_pow", ScalarSig::F2)),
        ScalarOp::Mod => Some(("kiln_ref_fmod", ScalarSig::F2)),
        ScalarOp::IntDiv => Some(("kiln_ref_floor_div", ScalarSig::F2)),
        ScalarOp::Fmod => Some(("kiln_ref_c_fmod", ScalarSig::F2)),
        ScalarOp::ArcTan2 => Some(("kiln_ref_arctan2", ScalarSig::F2)),
        ScalarOp::Hypot => Some(("kiln_ref_hypot", ScalarSig::F2)),
        ScalarOp::SigmoidBinaryCrossentropy => {
            Some(("kiln_ref_sigmoid_binary_crossentropy", ScalarSig::F2))
        }
        _ => unary_table()
            .into_iter()
            .find(|(o, _, _)| *o == op)
            .map(|(_, s, _)| (s, ScalarSig::F1)),
    }
}

/// The per-element callee of integer `pow`.
pub const INT_POW: (&str, ScalarSig) = ("kiln_ref_int_pow", ScalarSig::I2);

/// The per-element callee of `pow` in the `u64` domain.
pub const UINT_POW: (&str, ScalarSig) = ("kiln_ref_uint_pow", ScalarSig::I2);

/// The block-wise runtime function computing `op` on `dtype` (`f64` / `f32`),
/// if there is one: `(x, out, n)`.
pub fn block_symbol(op: ScalarOp, dtype: DType) -> Option<&'static str> {
    use ScalarOp::*;
    let f64s = match op {
        Exp => "kiln_exp_f64",
        Exp2 => "kiln_exp2_f64",
        Expm1 => "kiln_expm1_f64",
        Log => "kiln_log_f64",
        Log2 => "kiln_log2_f64",
        Log10 => "kiln_log10_f64",
        Log1p => "kiln_log1p_f64",
        Tanh => "kiln_tanh_f64",
        Sigmoid => "kiln_sigmoid_f64",
        Softplus => "kiln_softplus_f64",
        Log1mexp => "kiln_log1mexp_f64",
        ArcSin => "kiln_arcsin_f64",
        ArcCos => "kiln_arccos_f64",
        ArcTan => "kiln_arctan_f64",
        Sinh => "kiln_sinh_f64",
        Cosh => "kiln_cosh_f64",
        ArcTanh => "kiln_arctanh_f64",
        ArcSinh => "kiln_arcsinh_f64",
        ArcCosh => "kiln_arccosh_f64",
        Erf => "kiln_erf_f64",
        Erfc => "kiln_erfc_f64",
        // Lanes beyond the vector reduction's exact range (|x| >= 1.3e7)
        // are recomputed by the runtime with the C library's functions.
        Sin => "kiln_sin_f64",
        Cos => "kiln_cos_f64",
        Tan => "kiln_tan_f64",
        ArcTan2 => "kiln_arctan2_f64",
        Hypot => "kiln_hypot_f64",
        SigmoidBinaryCrossentropy => "kiln_sigmoid_binary_crossentropy_f64",
        // 8 ns an element on AVX-512 and 12 on AVX2 in cache, against 16 for
        // the C library's pow called per element (it was 85 before its
        // kernel was inlined into the vector variants, and `pow` then took
        // the per-element path).
        Pow => "kiln_pow_f64",
        // Exact: a division, a truncation and a fused multiply-add per
        // lane, pairs beyond |x / y| < 2^52 (and zero or infinite divisors)
        // through the C library's fmod. Called per element, the C library's
        // fmod took 20-40 ns a value.
        Fmod => "kiln_fmod_f64",
        Mod => "kiln_mod_f64",
        IntDiv => "kiln_floor_divide_f64",
        _ => return None,
    };
    match dtype {
        DType::F64 => Some(f64s),
        DType::F32 => {
            let name = f64s.strip_suffix("_f64").expect("suffix");
            runtime_math_names()
                .iter()
                .copied()
                .find(|s| s.strip_suffix("_f32") == Some(name))
        }
        _ => None,
    }
}

/// The paired block-wise runtime function of `op` on `dtype`, if it has
/// one: `(x, pos, neg, n)` writing `op(x)` to `pos` and `op(-x)` to `neg`,
/// each with the bits of [`block_symbol`]'s function on `x` and on `-x`
/// (`kiln-runtime`'s `math::pair`).
pub fn pair_block_symbol(op: ScalarOp, dtype: DType) -> Option<&'static str> {
    match (op, dtype) {
        (ScalarOp::Sigmoid, DType::F64) => Some("kiln_sigmoid_pair_f64"),
        _ => None,
    }
}

/// The pre-staged form of `op`'s block-wise runtime function on `dtype`, if
/// `op` is unary and has one: `(a, b, out, n, mode)` computing
/// `op(a ⊕ b)` (see `kiln_runtime::math::PRE_ADD` and the other mode
/// constants).
pub fn pre_block_symbol(op: ScalarOp, dtype: DType) -> Option<&'static str> {
    let plain = block_symbol(op, dtype)?;
    let (stem, suffix) = plain.rsplit_once('_')?;
    runtime_math_names().iter().copied().find(|s| {
        s.strip_prefix(stem)
            .and_then(|r| r.strip_prefix("_pre_"))
            .is_some_and(|r| r == suffix)
    })
}

/// The names of the runtime's math entry points, listed once per process
/// (code generation looks symbols up for every block-wise node).
fn runtime_math_names() -> &'static [&'static str] {
    static NAMES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        kiln_runtime::math::math_symbols()
            .into_iter()
            .map(|(s, _)| s)
            .collect()
    })
}

/// Every symbol JIT code may import: the shims above and the runtime's entry points.
pub fn symbols() -> Vec<(&'static str, *const u8)> {
    let mut v: Vec<(&'static str, *const u8)> =
        unary_table().into_iter().map(|(_, s, p)| (s, p)).collect();
    v.push(("kiln_ref_pow", kiln_ref_pow as *const u8));
    v.push(("kiln_ref_fmod", kiln_ref_fmod as *const u8));
    v.push(("kiln_ref_floor_div", kiln_ref_floor_div as *const u8));
    v.push(("kiln_ref_c_fmod", kiln_ref_c_fmod as *const u8));
    v.push(("kiln_ref_arctan2", kiln_ref_arctan2 as *const u8));
    v.push(("kiln_ref_hypot", kiln_ref_hypot as *const u8));
    v.push((
        "kiln_ref_sigmoid_binary_crossentropy",
        kiln_ref_sigmoid_binary_crossentropy as *const u8,
    ));
    v.push(("kiln_ref_int_pow", kiln_ref_int_pow as *const u8));
    v.push(("kiln_ref_uint_pow", kiln_ref_uint_pow as *const u8));
    v.extend(kiln_runtime::symbols());
    v
}

/// The address of the [`symbols`] entry named `name`, from a table built
/// once per process: a module resolves its imports through it (only those
/// its kernels name) instead of copying every name into each module's own
/// table, which cost about 27 µs of a 0.8 ms compile (Zen 1, two modules
/// per tiered compile; BENCHMARKS.md, twenty-sixth session).
pub fn lookup(name: &str) -> Option<*const u8> {
    // Addresses as integers: raw pointers are not `Sync`.
    static TABLE: std::sync::OnceLock<FxHashMap<&'static str, usize>> = std::sync::OnceLock::new();
    TABLE
        .get_or_init(|| {
            symbols()
                .into_iter()
                .map(|(s, p)| (s, p as usize))
                .collect()
        })
        .get(name)
        .map(|&p| p as *const u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_callee_is_registered() {
        let syms: Vec<&str> = symbols().into_iter().map(|(s, _)| s).collect();
        for op in ScalarOp::all() {
            if let Some((s, _)) = scalar_symbol(op) {
                assert!(syms.contains(&s), "{s}");
            }
            for d in [DType::F64, DType::F32] {
                if let Some(s) = block_symbol(op, d) {
                    assert!(syms.contains(&s), "{s}");
                }
                if let Some(s) = pre_block_symbol(op, d) {
                    assert!(syms.contains(&s), "{s}");
                }
                if let Some(s) = pair_block_symbol(op, d) {
                    assert!(syms.contains(&s), "{s}");
                }
            }
        }
        assert_eq!(
            block_symbol(ScalarOp::Exp, DType::F32),
            Some("kiln_exp_f32")
        );
        // A stem that prefixes another function's (log, log1p) finds its own.
        assert_eq!(
            pre_block_symbol(ScalarOp::Log, DType::F64),
            Some("kiln_log_pre_f64")
        );
        assert_eq!(
            pre_block_symbol(ScalarOp::Exp, DType::F32),
            Some("kiln_exp_pre_f32")
        );
        // Binary block functions have no pre-staged form.
        assert_eq!(pre_block_symbol(ScalarOp::Pow, DType::F64), None);
        assert_eq!(pre_block_symbol(ScalarOp::Add, DType::F64), None);
    }
}
