//! Strided general matrix multiply C = alpha·A·B + beta·C for f64 and f32,
//! backed by the `matrixmultiply` crate (chosen over `gemm` by the
//! benchmark in `benches/gemm.rs`, see BENCH_NOTES.md). Large products
//! are split by row blocks over the [`crate::parallel`] pool.

/// C (m×n) = alpha·A (m×k) · B (k×n) + beta·C, f64. Strides are in
/// elements and may be negative or zero-free arbitrary (row stride `rs*`,
/// column stride `cs*`). When `beta == 0`, C is write-only: its old
/// contents (even NaN) are ignored. `k == 0` gives C = beta·C.
///
/// # Safety
/// Every addressed element `a[i*rsa + l*csa]`, `b[l*rsb + j*csb]` must be
/// readable and `c[i*rsc + j*csc]` writable; distinct (i, j) must address
/// distinct C elements and C must not overlap A or B.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kiln_gemm_f64(
    m: usize,
    k: usize,
    n: usize,
    alpha: f64,
    a: *const f64,
    rsa: isize,
    csa: isize,
    b: *const f64,
    rsb: isize,
    csb: isize,
    beta: f64,
    c: *mut f64,
    rsc: isize,
    csc: isize,
) {
    if m == 0 || n == 0 {
        return;
    }
    let (au, bu, cu) = (a as usize, b as usize, c as usize);
    let rows = |r0: usize, r1: usize| {
        let b = bu as *const f64;
        let a = (au as isize + r0 as isize * rsa * 8) as *const f64;
        let c = (cu as isize + r0 as isize * rsc * 8) as *mut f64;
        // SAFETY: the caller's contract is exactly matrixmultiply's (which
        // treats beta == 0 as "C is not read" and k == 0 as C = beta·C),
        // restricted to rows r0..r1 of A and C; distinct row ranges write
        // distinct C elements.
        unsafe {
            matrixmultiply::dgemm(
                r1 - r0,
                k,
                n,
                alpha,
                a,
                rsa,
                csa,
                b,
                rsb,
                csb,
                beta,
                c,
                rsc,
                csc,
            )
        }
    };
    split_rows(m, k, n, &rows);
}

/// Products of at least this many multiply-adds are split over threads.
pub const PARALLEL_FLOPS: usize = 1 << 22;

/// Runs `rows(r0, r1)` over [0, m): split into row blocks (multiples of 8
/// rows, the micro-kernel height) over the [`crate::parallel`] pool when
/// m·k·n is large, else in one call. Each C element is computed by the same
/// kernel in the same order either way, so results do not depend on the split.
fn split_rows(m: usize, k: usize, n: usize, rows: &(dyn Fn(usize, usize) + Sync)) {
    let threads = crate::parallel::num_threads();
    if threads > 1 && m >= 16 && m.saturating_mul(k).saturating_mul(n) >= PARALLEL_FLOPS {
        let blocks = m.div_ceil(8);
        crate::parallel::parallel_for(blocks, blocks.div_ceil(threads).max(1), &|s, e| {
            rows(s * 8, (e * 8).min(m))
        });
    } else {
        rows(0, m);
    }
}

/// f32 version of [`kiln_gemm_f64`].
///
/// # Safety
/// As for [`kiln_gemm_f64`].
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kiln_gemm_f32(
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    rsb: isize,
    csb: isize,
    beta: f32,
    c: *mut f32,
    rsc: isize,
    csc: isize,
) {
    if m == 0 || n == 0 {
        return;
    }
    let (au, bu, cu) = (a as usize, b as usize, c as usize);
    let rows = |r0: usize, r1: usize| {
        let b = bu as *const f32;
        let a = (au as isize + r0 as isize * rsa * 4) as *const f32;
        let c = (cu as isize + r0 as isize * rsc * 4) as *mut f32;
        // SAFETY: as in `kiln_gemm_f64`, for rows r0..r1.
        unsafe {
            matrixmultiply::sgemm(
                r1 - r0,
                k,
                n,
                alpha,
                a,
                rsa,
                csa,
                b,
                rsb,
                csb,
                beta,
                c,
                rsc,
                csc,
            )
        }
    };
    split_rows(m, k, n, &rows);
}

/// Safe row-major form: `c (m×n) = alpha·a (m×k)·b (k×n) + beta·c`.
///
/// # Panics
/// If a slice length does not match its shape.
#[allow(clippy::too_many_arguments)]
pub fn gemm_f64(
    m: usize,
    k: usize,
    n: usize,
    alpha: f64,
    a: &[f64],
    b: &[f64],
    beta: f64,
    c: &mut [f64],
) {
    assert!(
        a.len() == m * k && b.len() == k * n && c.len() == m * n,
        "shape mismatch"
    );
    // SAFETY: row-major strides index exactly within the checked lengths;
    // `c` is exclusively borrowed, so it cannot overlap `a` or `b`.
    unsafe {
        kiln_gemm_f64(
            m,
            k,
            n,
            alpha,
            a.as_ptr(),
            k as isize,
            1,
            b.as_ptr(),
            n as isize,
            1,
            beta,
            c.as_mut_ptr(),
            n as isize,
            1,
        )
    }
}

/// Safe row-major form of [`kiln_gemm_f32`].
///
/// # Panics
/// If a slice length does not match its shape.
#[allow(clippy::too_many_arguments)]
pub fn gemm_f32(
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: &[f32],
    b: &[f32],
    beta: f32,
    c: &mut [f32],
) {
    assert!(
        a.len() == m * k && b.len() == k * n && c.len() == m * n,
        "shape mismatch"
    );
    // SAFETY: as in `gemm_f64`.
    unsafe {
        kiln_gemm_f32(
            m,
            k,
            n,
            alpha,
            a.as_ptr(),
            k as isize,
            1,
            b.as_ptr(),
            n as isize,
            1,
            beta,
            c.as_mut_ptr(),
            n as isize,
            1,
        )
    }
}

/// The GEMM `extern "C"` entry points as (symbol, address).
pub fn gemm_symbols() -> Vec<(&'static str, *const u8)> {
    vec![
        ("kiln_gemm_f64", kiln_gemm_f64 as *const u8),
        ("kiln_gemm_f32", kiln_gemm_f32 as *const u8),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*seed >> 11) as f64 / (1u64 << 53) as f64) - 0.5
    }

    #[test]
    fn strided_and_transposed_match_naive() {
        let mut s = 7;
        for &(m, k, n) in &[(1, 1, 1), (3, 5, 7), (17, 9, 33), (64, 64, 64), (5, 0, 4)] {
            let a: Vec<f64> = (0..m * k).map(|_| lcg(&mut s)).collect();
            let b: Vec<f64> = (0..k * n).map(|_| lcg(&mut s)).collect();
            let c0: Vec<f64> = (0..m * n).map(|_| lcg(&mut s)).collect();
            let (alpha, beta) = (1.5, -0.25);
            let mut want = c0.clone();
            for i in 0..m {
                for j in 0..n {
                    let dot: f64 = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
                    want[i * n + j] = alpha * dot + beta * c0[i * n + j];
                }
            }
            // A stored column-major (transposed strides), C column-major.
            let at: Vec<f64> = (0..k * m).map(|idx| a[(idx % m) * k + idx / m]).collect();
            let mut c = vec![0.0; m * n];
            for i in 0..m {
                for j in 0..n {
                    c[j * m + i] = c0[i * n + j];
                }
            }
            // SAFETY: strides address within the buffers.
            unsafe {
                kiln_gemm_f64(
                    m,
                    k,
                    n,
                    alpha,
                    at.as_ptr(),
                    1,
                    m as isize,
                    b.as_ptr(),
                    n as isize,
                    1,
                    beta,
                    c.as_mut_ptr(),
                    1,
                    m as isize,
                )
            };
            for i in 0..m {
                for j in 0..n {
                    assert!(
                        (c[j * m + i] - want[i * n + j]).abs() < 1e-12,
                        "{m}x{k}x{n} at ({i},{j})"
                    );
                }
            }
        }
    }

    #[test]
    fn beta_zero_ignores_nan_and_f32_works() {
        let a = [1.0f32, 2.0, 3.0, 4.0];
        let b = [5.0f32, 6.0, 7.0, 8.0];
        let mut c = [f32::NAN; 4];
        gemm_f32(2, 2, 2, 1.0, &a, &b, 0.0, &mut c);
        assert_eq!(c, [19.0, 22.0, 43.0, 50.0]);
        let mut c64 = [f64::NAN; 4];
        let a64: Vec<f64> = a.iter().map(|&v| f64::from(v)).collect();
        let b64: Vec<f64> = b.iter().map(|&v| f64::from(v)).collect();
        gemm_f64(2, 2, 2, 2.0, &a64, &b64, 0.0, &mut c64);
        assert_eq!(c64, [38.0, 44.0, 86.0, 100.0]);
        assert_eq!(gemm_symbols().len(), 2);
    }

    #[test]
    fn negative_strides() {
        // B read bottom-up: B' = rows of B reversed.
        let a = [1.0, 0.0, 0.0, 1.0];
        let b = [1.0, 2.0, 3.0, 4.0];
        let mut c = [0.0; 4];
        // SAFETY: b + 2 with row stride -2 addresses rows 1 then 0.
        unsafe {
            kiln_gemm_f64(
                2,
                2,
                2,
                1.0,
                a.as_ptr(),
                2,
                1,
                b.as_ptr().add(2),
                -2,
                1,
                0.0,
                c.as_mut_ptr(),
                2,
                1,
            )
        };
        assert_eq!(c, [3.0, 4.0, 1.0, 2.0]);
    }
}
