//! AVX-512 form of the table exp [`exp_table`](super::exp::exp_table) with
//! the 2^(j/32) table held in registers, and the group maps of the
//! exp-based kernels built on it.
//!
//! The portable kernel reads head and tail of 2^(j/32) with two gathers
//! per vector. Here the 32 heads live in two pairs of zmm registers
//! (entries 0-15 and 16-31) and so do the 32 tails: `vpermt2pd` picks from
//! a 16-entry pair with bits 0-3 of the index, and a blend on bit 4 chooses
//! between the pairs (four permutes and two blends instead of two gathers).
//!
//! Users: the block `exp`, `sum_exp_shift` (fold), `sigmoid`, `softplus`.
//! `tanh` keeps the portable gather form: its long polynomial and division
//! already saturate the vector ports the permutes need, and it measured
//! ~3% slower with them (BENCHMARKS.md, 2026-11-22 register-table section).
//!
//! Invariant: every function here gives results bitwise identical to its
//! portable counterpart. [`exp_table_x8`] performs the same operations in
//! the same order as `exp_table` (separate multiply and add where the
//! portable code has them, `vfmadd` exactly where it calls `mul_add`), and
//! the group maps apply the same per-lane formulas. The cross-variant
//! tests (`math::tests::variants_agree_bitwise`,
//! `fold::tests::variants_agree_bitwise`, and this module's) check it.
//!
//! Safety contract of every function here: the CPU supports AVX-512F (the
//! callers are the AVX-512 variants, which run only after `isa()` detected
//! AVX-512F/DQ, AVX2 and FMA). The functions are `#[inline(always)]`
//! without `#[target_feature]` so that they inline into those
//! `#[target_feature]` variants (and the intrinsics with them).

use std::arch::x86_64::{
    __m512d, __m512i, _mm512_add_pd, _mm512_castpd_si512, _mm512_fmadd_pd, _mm512_loadu_pd,
    _mm512_mask_blend_pd, _mm512_mul_pd, _mm512_permutex2var_pd, _mm512_scalef_pd,
    _mm512_set1_epi64, _mm512_set1_pd, _mm512_storeu_pd, _mm512_sub_pd, _mm512_test_epi64_mask,
};

use super::activation;
use super::common::MAGIC;
use super::exp::{EXP2_FRAC, TABLE_INV_STEP, TABLE_LEN, TABLE_POLY, TABLE_STEP_HI, TABLE_STEP_LO};

/// f64 lanes of a zmm register.
const W: usize = 8;

/// Heads (`part == 0`) or tails (`part == 1`) of [`EXP2_FRAC`] entries
/// `from..from + 8`, as the lanes of one register.
const fn table_slice(from: usize, part: usize) -> [f64; W] {
    let mut s = [0.0; W];
    let mut i = 0;
    while i < W {
        let e = EXP2_FRAC[from + i];
        s[i] = if part == 0 { e.0 } else { e.1 };
        i += 1;
    }
    s
}

/// The table as eight register images: heads 0-7, 8-15, 16-23, 24-31,
/// then tails in the same order.
const TABLE_REGS: [[f64; W]; 8] = [
    table_slice(0, 0),
    table_slice(8, 0),
    table_slice(16, 0),
    table_slice(24, 0),
    table_slice(0, 1),
    table_slice(8, 1),
    table_slice(16, 1),
    table_slice(24, 1),
];

/// Loads a register image.
///
/// # Safety
/// The CPU supports AVX-512F (module docs).
#[inline(always)]
unsafe fn load(a: &[f64; W]) -> __m512d {
    // SAFETY: `a` holds 8 readable f64 (unaligned load); AVX-512F is the
    // caller's guarantee.
    unsafe { _mm512_loadu_pd(a.as_ptr()) }
}

/// Stores a register into an image.
///
/// # Safety
/// The CPU supports AVX-512F (module docs).
#[inline(always)]
unsafe fn store(a: &mut [f64; W], v: __m512d) {
    // SAFETY: `a` holds 8 writable f64 (unaligned store); AVX-512F is the
    // caller's guarantee.
    unsafe { _mm512_storeu_pd(a.as_mut_ptr(), v) }
}

/// Entry `t mod 32` of a 32-entry table given as four registers (`lo0`,
/// `lo1` entries 0-15, `hi0`, `hi1` entries 16-31); only the low five bits
/// of each lane of `t` are read.
///
/// # Safety
/// The CPU supports AVX-512F (module docs).
#[inline(always)]
unsafe fn lookup32(t: __m512i, lo0: __m512d, lo1: __m512d, hi0: __m512d, hi1: __m512d) -> __m512d {
    // SAFETY: AVX-512F is the caller's guarantee.
    unsafe {
        let lo = _mm512_permutex2var_pd(lo0, t, lo1);
        let hi = _mm512_permutex2var_pd(hi0, t, hi1);
        let upper = _mm512_test_epi64_mask(t, _mm512_set1_epi64(TABLE_LEN as i64 / 2));
        _mm512_mask_blend_pd(upper, lo, hi)
    }
}

/// `exp_table` on eight lanes, bitwise identical to the portable kernel
/// for |x| < `EXP_TABLE_LIMIT` (other lanes are unspecified and must be
/// fixed up by the caller; NaN stays NaN).
///
/// The operations are those of `exp_table` in the same order, with two
/// exact substitutions: the table index is read from the low bits of
/// `x·32/ln2 + MAGIC` (they equal those of k, MAGIC's low 51 bits being
/// zero), and the final 2^(k >> 5) scaling is `vscalefpd` by kf/32
/// (floor(kf/32) = k >> 5; both scalings are exact for the normal results
/// of the valid range).
///
/// # Safety
/// The CPU supports AVX-512F (module docs).
#[inline(always)]
pub(crate) unsafe fn exp_table_x8(x: __m512d) -> __m512d {
    // SAFETY: AVX-512F is the caller's guarantee; the table loads read the
    // eight 8-lane images of `TABLE_REGS`.
    unsafe {
        let magic = _mm512_set1_pd(MAGIC);
        // round_k(x · 32/ln2): separate multiply and add, as the portable code.
        let t = _mm512_add_pd(_mm512_mul_pd(x, _mm512_set1_pd(TABLE_INV_STEP)), magic);
        let kf = _mm512_sub_pd(t, magic);
        let r = _mm512_sub_pd(
            _mm512_sub_pd(x, _mm512_mul_pd(kf, _mm512_set1_pd(TABLE_STEP_HI))),
            _mm512_mul_pd(kf, _mm512_set1_pd(TABLE_STEP_LO)),
        );
        let idx = _mm512_castpd_si512(t);
        let head = lookup32(
            idx,
            load(&TABLE_REGS[0]),
            load(&TABLE_REGS[1]),
            load(&TABLE_REGS[2]),
            load(&TABLE_REGS[3]),
        );
        let tail = lookup32(
            idx,
            load(&TABLE_REGS[4]),
            load(&TABLE_REGS[5]),
            load(&TABLE_REGS[6]),
            load(&TABLE_REGS[7]),
        );
        // horner(r, TABLE_POLY): one fused multiply-add per coefficient.
        let mut h = _mm512_set1_pd(TABLE_POLY[TABLE_POLY.len() - 1]);
        for &c in TABLE_POLY[..TABLE_POLY.len() - 1].iter().rev() {
            h = _mm512_fmadd_pd(h, r, _mm512_set1_pd(c));
        }
        // p = r + (r·r)·h
        let p = _mm512_add_pd(r, _mm512_mul_pd(_mm512_mul_pd(r, r), h));
        // y = head + fma(head, p, tail)
        let y = _mm512_add_pd(head, _mm512_fmadd_pd(head, p, tail));
        // y · 2^floor(kf/32)
        let m = _mm512_mul_pd(kf, _mm512_set1_pd(1.0 / TABLE_LEN as f64));
        _mm512_scalef_pd(y, m)
    }
}

/// Replaces every lane of `v` (N a multiple of 8) by `exp_table` of it.
///
/// # Safety
/// The CPU supports AVX-512F (module docs).
#[inline(always)]
pub(crate) unsafe fn exp_table_group<const N: usize>(v: &mut [f64; N]) {
    const { assert!(N.is_multiple_of(W)) };
    for c in v.as_chunks_mut::<W>().0 {
        // SAFETY: AVX-512F is the caller's guarantee.
        unsafe { store(c, exp_table_x8(load(c))) };
    }
}

/// Applies `finish(x, e)` to every lane, with `e` = `exp_table(arg(x))`
/// computed eight lanes at a time: the shape of the exp-based kernels.
///
/// # Safety
/// The CPU supports AVX-512F (module docs).
#[inline(always)]
unsafe fn exp_then<const N: usize>(
    v: &mut [f64; N],
    arg: impl Fn(f64) -> f64,
    finish: impl Fn(f64, f64) -> f64,
) {
    let mut e = *v;
    for l in 0..N {
        e[l] = arg(v[l]);
    }
    // SAFETY: AVX-512F is the caller's guarantee.
    unsafe { exp_table_group(&mut e) };
    for l in 0..N {
        v[l] = finish(v[l], e[l]);
    }
}

/// `activation::sigmoid` on every lane.
///
/// # Safety
/// The CPU supports AVX-512F (module docs).
#[inline(always)]
pub(crate) unsafe fn sigmoid_group<const N: usize>(v: &mut [f64; N]) {
    // SAFETY: AVX-512F is the caller's guarantee.
    unsafe { exp_then(v, activation::neg_abs, activation::sigmoid_with) }
}

/// `activation::softplus` on every lane.
///
/// # Safety
/// The CPU supports AVX-512F (module docs).
#[inline(always)]
pub(crate) unsafe fn softplus_group<const N: usize>(v: &mut [f64; N]) {
    // SAFETY: AVX-512F is the caller's guarantee.
    unsafe { exp_then(v, activation::neg_abs, activation::softplus_with) }
}

#[cfg(test)]
mod tests {
    use super::super::dispatch::{isa, Isa};
    use super::super::exp::exp_table;
    use super::*;

    /// Inputs covering every table index, both signs, tiny and large
    /// arguments inside the table range, and specials.
    fn inputs() -> Vec<f64> {
        let mut x: Vec<f64> = (0..4000).map(|i| (i as f64 - 2000.0) * 0.353_1).collect();
        x.extend((0..256).map(|j| j as f64 * std::f64::consts::LN_2 / 32.0 - 3.0));
        x.extend([0.0, -0.0, 1e-300, -1e-300, 707.9, -707.9, f64::NAN]);
        while !x.len().is_multiple_of(32) {
            x.push(0.5);
        }
        x
    }

    #[test]
    fn register_table_matches_portable_kernel_bitwise() {
        if isa() != Isa::Avx512 {
            return;
        }
        let x = inputs();
        for chunk in x.as_chunks::<32>().0 {
            let mut v = *chunk;
            // SAFETY: AVX-512F/DQ, AVX2 and FMA were detected by `isa()`.
            unsafe { exp_table_group(&mut v) };
            for (a, &b) in v.iter().zip(chunk) {
                let want = exp_table(b);
                assert!(
                    a.to_bits() == want.to_bits() || (a.is_nan() && want.is_nan()),
                    "exp_table({b:e}): {a:e} vs {want:e}"
                );
            }
        }
    }

    #[test]
    fn group_maps_match_scalar_kernels_bitwise() {
        if isa() != Isa::Avx512 {
            return;
        }
        let x = inputs();
        type G = unsafe fn(&mut [f64; 32]);
        type Scalar = fn(f64) -> f64;
        let maps: [(&str, G, Scalar); 2] = [
            ("sigmoid", sigmoid_group::<32>, activation::sigmoid),
            ("softplus", softplus_group::<32>, activation::softplus),
        ];
        for (name, g, f) in maps {
            for chunk in x.as_chunks::<32>().0 {
                let mut v = *chunk;
                // SAFETY: AVX-512F/DQ, AVX2 and FMA were detected by `isa()`.
                unsafe { g(&mut v) };
                for (a, &b) in v.iter().zip(chunk) {
                    let want = f(b);
                    assert!(
                        a.to_bits() == want.to_bits() || (a.is_nan() && want.is_nan()),
                        "{name}({b:e}): {a:e} vs {want:e}"
                    );
                }
            }
        }
    }

    #[test]
    fn block_variants_match_baseline_bitwise_with_fixup_lanes() {
        if isa() != Isa::Avx512 {
            return;
        }
        use super::super::{v_exp, v_sigmoid, v_softplus};
        // Table-range values, lanes the fixups recompute (|x| >= 708, ±inf,
        // NaN, subnormal results) and a length with a partial last group.
        let mut x = inputs();
        x.extend([
            708.0,
            -708.0,
            709.7,
            710.0,
            -740.0,
            -745.2,
            -1e4,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            5e-324,
        ]);
        let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        type B64 = unsafe fn(*const f64, *mut f64, usize);
        type B32 = unsafe fn(*const f32, *mut f32, usize);
        let fs: [(&str, [B64; 2], [B32; 2]); 3] = [
            (
                "exp",
                [v_exp::f64_base, v_exp::f64_avx512],
                [v_exp::f32_base, v_exp::f32_avx512],
            ),
            (
                "sigmoid",
                [v_sigmoid::f64_base, v_sigmoid::f64_avx512],
                [v_sigmoid::f32_base, v_sigmoid::f32_avx512],
            ),
            (
                "softplus",
                [v_softplus::f64_base, v_softplus::f64_avx512],
                [v_softplus::f32_base, v_softplus::f32_avx512],
            ),
        ];
        for (name, [b64, a64], [b32, a32]) in fs {
            let (mut base, mut avx) = (vec![0.0; x.len()], vec![0.0; x.len()]);
            // SAFETY: equal lengths; AVX-512F/DQ, AVX2, FMA detected.
            unsafe {
                b64(x.as_ptr(), base.as_mut_ptr(), x.len());
                a64(x.as_ptr(), avx.as_mut_ptr(), x.len());
            }
            for ((v, b), a) in x.iter().zip(&base).zip(&avx) {
                assert_eq!(a.to_bits(), b.to_bits(), "{name}({v:e}): {a:e} vs {b:e}");
            }
            let (mut base, mut avx) = (vec![0.0f32; x.len()], vec![0.0f32; x.len()]);
            // SAFETY: as above.
            unsafe {
                b32(xf.as_ptr(), base.as_mut_ptr(), xf.len());
                a32(xf.as_ptr(), avx.as_mut_ptr(), xf.len());
            }
            for ((v, b), a) in xf.iter().zip(&base).zip(&avx) {
                assert_eq!(
                    a.to_bits(),
                    b.to_bits(),
                    "{name} f32({v:e}): {a:e} vs {b:e}"
                );
            }
        }
        assert!(
            !x.len().is_multiple_of(16),
            "the partial last group is exercised"
        );
    }
}
