//! Conversion of contiguous `f32` values to `f64` and back at the ISA's
//! full vector width, for runtime passes that compute `f32` data in `f64`
//! (the softmax family's `f32` lanes). The linker's own crate is compiled
//! for the baseline target, where the same loops convert two values per
//! instruction; here they are compiled for AVX-512 and AVX2 as well and
//! dispatched like the math kernels.
//!
//! Invariant: widening is exact; narrowing rounds to nearest (Rust's `as`),
//! the reference evaluator's `f64` → `f32` rounding, in every variant.

/// Widens `n` values, index by index.
///
/// # Safety
/// `x` valid for `n` reads, `out` for `n` writes, not overlapping.
#[inline(always)]
unsafe fn widen(x: *const f32, out: *mut f64, n: usize) {
    // SAFETY: caller contract.
    let (x, out) = unsafe {
        (
            std::slice::from_raw_parts(x, n),
            std::slice::from_raw_parts_mut(out, n),
        )
    };
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f64::from(v);
    }
}

/// Narrows `n` values, index by index, rounding to nearest.
///
/// # Safety
/// `x` valid for `n` reads, `out` for `n` writes, not overlapping.
#[inline(always)]
unsafe fn narrow(x: *const f64, out: *mut f32, n: usize) {
    // SAFETY: caller contract.
    let (x, out) = unsafe {
        (
            std::slice::from_raw_parts(x, n),
            std::slice::from_raw_parts_mut(out, n),
        )
    };
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v as f32;
    }
}

dispatched!(
    /// Writes the `n` `f32` values at `x` to `out` as `f64`.
    kiln_widen_f32_f64 [widen_avx512, widen_avx2, widen_base]
        (x: *const f32, out: *mut f64, n: usize) = widen(x, out, n)
);
dispatched!(
    /// Writes the `n` `f64` values at `x` to `out` rounded to `f32`.
    kiln_narrow_f64_f32 [narrow_avx512, narrow_avx2, narrow_base]
        (x: *const f64, out: *mut f32, n: usize) = narrow(x, out, n)
);

/// Safe slice form of [`kiln_widen_f32_f64`]: `out[i] = x[i]` as `f64`.
///
/// # Panics
/// If the lengths differ.
pub fn widen_f32(x: &[f32], out: &mut [f64]) {
    assert_eq!(x.len(), out.len(), "widen_f32: lengths differ");
    // SAFETY: both slices hold x.len() values; a shared and an exclusive
    // slice never overlap.
    unsafe { kiln_widen_f32_f64(x.as_ptr(), out.as_mut_ptr(), x.len()) }
}

/// Safe slice form of [`kiln_narrow_f64_f32`]: `out[i] = x[i]` rounded to
/// `f32`.
///
/// # Panics
/// If the lengths differ.
pub fn narrow_f64(x: &[f64], out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "narrow_f64: lengths differ");
    // SAFETY: as in `widen_f32`.
    unsafe { kiln_narrow_f64_f32(x.as_ptr(), out.as_mut_ptr(), x.len()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values with every kind of rounding: ties to even, subnormal results,
    /// overflow to infinity, NaN, signed zeros.
    fn values() -> Vec<f64> {
        let mut v: Vec<f64> = (0..1000).map(|i| (f64::from(i) - 500.0) * 0.0137).collect();
        v.extend([
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            1e300,
            -1e300,
            1e-40,
            f64::from(f32::MAX) * 1.0000001,
            1.0 + f64::EPSILON * 2f64.powi(28), // a tie between two f32 values
            1.0 + f64::EPSILON * 3.0 * 2f64.powi(28),
        ]);
        v
    }

    #[test]
    fn every_variant_narrows_as_rust_rounds_and_widens_exactly() {
        let x = values();
        let mut got = vec![0.0f32; x.len()];
        let mut back = vec![0.0f64; x.len()];
        let mut run = |narrow_fn: unsafe fn(*const f64, *mut f32, usize),
                       widen_fn: unsafe fn(*const f32, *mut f64, usize)| {
            // SAFETY: every buffer holds x.len() values, none overlap.
            unsafe {
                narrow_fn(x.as_ptr(), got.as_mut_ptr(), x.len());
                widen_fn(got.as_ptr(), back.as_mut_ptr(), x.len());
            }
            for ((&v, &g), &b) in x.iter().zip(&got).zip(&back) {
                let want = v as f32;
                assert!(
                    g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                    "{v} -> {g}, want {want}"
                );
                assert!(
                    b.to_bits() == f64::from(g).to_bits() || b.is_nan(),
                    "{g} -> {b}"
                );
            }
        };
        run(narrow_base, widen_base);
        #[cfg(target_arch = "x86_64")]
        {
            if super::super::isa() == super::super::Isa::Avx512 {
                run(narrow_avx512, widen_avx512);
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                run(narrow_avx2, widen_avx2);
            }
        }
        let mut out = vec![0.0f64; x.len()];
        let narrowed: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        widen_f32(&narrowed, &mut out);
        let mut again = vec![0.0f32; x.len()];
        narrow_f64(&out, &mut again);
        assert!(again
            .iter()
            .zip(&narrowed)
            .all(|(a, b)| a.to_bits() == b.to_bits() || a.is_nan()));
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn mismatched_lengths_are_refused() {
        widen_f32(&[1.0; 3], &mut [0.0; 2]);
    }
}
