//! Strided general matrix multiply C = alpha·A·B + beta·C for f64 and f32,
//! backed by the `gemm` crate (0.19, AVX-512 kernels through its `x86-v4`
//! feature; chosen over `matrixmultiply` by the benchmark in
//! `benches/gemm.rs`, see BENCH_NOTES.md).
//!
//! Large products run with the crate's own `Parallelism::Rayon` inside the
//! [`crate::parallel`] pool, unless called on a worker of a rayon pool
//! (the caller is then parallel already: they run single-threaded there).
//! An f64 product with one output row or column (a matrix-vector product)
//! whose matrix rows or columns are contiguous skips the crate: it runs as
//! inner products or scaled columns by the row passes of `math::rowcol`,
//! threaded by outputs (`matrix_vector_f64`).
//! Invariant: results do not depend on the thread
//! count — the crate splits the output into the same mr×nr tiles whatever
//! the thread count (its cache blocking depends only on m, n, k and the
//! cache sizes), hands whole tiles to threads, and accumulates every tile
//! over k in the same order (tested in `result_is_independent_of_threads`);
//! a matrix-vector product computes each output alike on any thread
//! (`matrix_vector_products_in_every_layout`); a Gram matrix (`Xᵀ·X`,
//! `X·Xᵀ`: B is A transposed, in the same memory) is computed panel by
//! panel, each from serial products (`symmetric_gemm`,
//! `gram_matrices_take_the_symmetric_path`).

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
    let (ga, gb, gc) = ((a, rsa, csa), (b, rsb, csb), (c, rsc, csc));
    // SAFETY: the caller's contract is `matrix_vector_f64`'s and `strided_gemm`'s.
    if unsafe { matrix_vector_f64(m, k, n, alpha, ga, gb, beta, gc, false) } {
        return;
    }
    // SAFETY: the caller's contract is `strided_gemm`'s.
    unsafe {
        strided_gemm(
            m,
            k,
            n,
            alpha,
            (a, rsa, csa),
            (b, rsb, csb),
            beta,
            (c, rsc, csc),
            false,
        )
    }
}

/// Products of at least this many multiply-adds run on several threads.
pub const PARALLEL_FLOPS: usize = 1 << 22;

/// The body of [`kiln_gemm_f64`] / [`kiln_gemm_f32`] for `T` = f64 or f32:
/// operands are (pointer, row stride, column stride) in elements; with
/// `serial` the product runs on the calling thread whatever its size.
///
/// The `gemm` crate computes dst = alpha·dst + beta·lhs·rhs with strides
/// given column first, reads dst only when `read_dst`, and for k == 0
/// scales dst by its alpha (zero-fills it when dst is not read): so kiln's
/// beta is the crate's alpha, kiln's alpha the crate's beta, and
/// `read_dst = beta != 0` keeps C write-only for beta == 0.
///
/// # Safety
/// As for [`kiln_gemm_f64`].
#[allow(clippy::too_many_arguments)]
unsafe fn strided_gemm<T: Copy + PartialEq + Default + Send + Sync + 'static>(
    m: usize,
    k: usize,
    n: usize,
    alpha: T,
    (a, rsa, csa): (*const T, isize, isize),
    (b, rsb, csb): (*const T, isize, isize),
    beta: T,
    (c, rsc, csc): (*mut T, isize, isize),
    serial: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    let read_c = beta != T::default();
    if !serial
        && !read_c
        && m == n
        && n >= 2 * SYMMETRIC_PANEL
        && std::ptr::eq(a, b)
        && rsb == csa
        && csb == rsa
        && k > 0
    {
        // SAFETY: B is A transposed (same first element, swapped strides),
        // so the caller's contract is `symmetric_gemm`'s.
        unsafe { symmetric_gemm(n, k, alpha, (a, rsa, csa), (c, rsc, csc)) };
        return;
    }
    let (au, bu, cu) = (a as usize, b as usize, c as usize);
    let run = |threads: usize| {
        let parallelism = if threads > 1 {
            gemm::Parallelism::Rayon(threads)
        } else {
            gemm::Parallelism::None
        };
        // SAFETY: the caller guarantees every addressed element of A and B
        // is readable and of C writable, distinct (i, j) address distinct C
        // elements and C overlaps neither operand; the crate accepts
        // negative and zero strides. The addresses are the caller's
        // pointers, passed as integers only to cross into the pool.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                cu as *mut T,
                csc,
                rsc,
                read_c,
                au as *const T,
                csa,
                rsa,
                bu as *const T,
                csb,
                rsb,
                beta,
                alpha,
                false,
                false,
                false,
                parallelism,
            )
        }
    };
    // On a pool worker the caller already runs in parallel (e.g. batches
    // of a batched product spread over threads): threading this product
    // too would only oversubscribe the workers.
    let on_worker = rayon::current_thread_index().is_some();
    if m.saturating_mul(k).saturating_mul(n) >= PARALLEL_FLOPS && !on_worker && !serial {
        crate::parallel::in_pool(&run);
    } else {
        run(1);
    }
}

/// The greatest height of the row panels of a symmetric product (see
/// [`symmetric_gemm`]); products of at least two such panels take that
/// path.
const SYMMETRIC_PANEL: usize = 256;

/// The height of the strips that compute a panel's diagonal block (see
/// [`symmetric_gemm`]).
const SYMMETRIC_STRIP: usize = 64;

/// The side of the squares in which [`symmetric_gemm`] copies a panel's
/// upper triangle below the diagonal (2 × 8 KB of f64: both stay in L1).
const MIRROR_SQUARE: usize = 32;

/// C (n×n) = alpha·A·Aᵀ for A (n×k), the form of `Xᵀ·X` and `X·Xᵀ` (a
/// Gram matrix: B is A seen transposed, the same memory), as BLAS's `syrk`
/// computes it: only the triangle on and above the diagonal, then copied
/// below it. The rows of C fall into panels of at most [`SYMMETRIC_PANEL`]
/// rows, at least eight panels down to 128 rows (so that the threads get
/// even shares: 600 × 600 took 3.5 ms in panels of 256, 2.9 in panels of
/// 128), one task each ([`parallel_for`] shares them out, the widest
/// first). A panel's block right of its diagonal block is one serial
/// product (the crate packs A's rows once for the whole width); its
/// diagonal block is computed in strips of [`SYMMETRIC_STRIP`] rows, each from the diagonal
/// to the block's right edge; then the panel copies its part of the upper
/// triangle below the diagonal, in [`MIRROR_SQUARE`] squares. That is a
/// little over half of a full product's multiply-adds: the strips add a
/// triangle of 64 × 64 / 2 per strip (0.516 of them for 2000 × 2000).
///
/// `dot(transpose(X), X)` on 2000 × 2000 f64, two threads, AVX-512, median
/// of 9 interleaved rounds against numpy's `X.T @ X` (OpenBLAS `dsyrk`) in
/// one process: 0.96 of numpy's time with the tiles this replaced (squares
/// of 256, each a product of its own: 9/16 of the multiply-adds, but each
/// tile packed both its operands), 0.87 with the panels (BENCHMARKS.md,
/// fiftieth session).
///
/// C is exactly symmetric; every product's values depend only on its own
/// sizes (each is serial), so not on the thread count, nor on whether the
/// product runs on a pool worker (its panels then run on that thread).
///
/// [`parallel_for`]: crate::parallel::parallel_for
///
/// # Safety
/// Every `a[i*rsa + l*csa]` (i < n, l < k) readable, every
/// `c[i*rsc + j*csc]` (i, j < n) writable, distinct (i, j) at distinct
/// elements, C not overlapping A.
unsafe fn symmetric_gemm<T: Copy + PartialEq + Default + Send + Sync + 'static>(
    n: usize,
    k: usize,
    alpha: T,
    (a, rsa, csa): (*const T, isize, isize),
    (c, rsc, csc): (*mut T, isize, isize),
) {
    let (au, cu) = (a as usize, c as usize);
    let at = move |i: usize, j: usize| {
        (cu as *mut T).wrapping_offset(i as isize * rsc + j as isize * csc)
    };
    // C[r0.., c0..] (rows × cols) = alpha · A[r0..] · A[c0..]ᵀ, serial.
    let block = |r0: usize, rows: usize, c0: usize, cols: usize| {
        let a = au as *const T;
        // SAFETY: rows r0..r0 + rows and c0..c0 + cols of A are within its
        // n rows (the callers' bounds), so every element read is readable;
        // the block of C lies within its n × n elements and is written by
        // this task only (see `run`); the serial product threads nothing.
        unsafe {
            strided_gemm(
                rows,
                k,
                cols,
                alpha,
                (a.wrapping_offset(r0 as isize * rsa), rsa, csa),
                (a.wrapping_offset(c0 as isize * rsa), csa, rsa),
                T::default(),
                (at(r0, c0), rsc, csc),
                true,
            )
        }
    };
    let height = n
        .div_ceil(8)
        .next_multiple_of(SYMMETRIC_STRIP)
        .clamp(2 * SYMMETRIC_STRIP, SYMMETRIC_PANEL);
    let run = |first: usize, end: usize| {
        for panel in first..end {
            let r0 = panel * height;
            let end_row = (r0 + height).min(n);
            // Panel `panel` writes rows r0..end_row on and above the
            // diagonal, and their mirror: columns r0..end_row below it. No
            // other panel writes any of those elements.
            for s0 in (r0..end_row).step_by(SYMMETRIC_STRIP) {
                let rows = SYMMETRIC_STRIP.min(end_row - s0);
                block(s0, rows, s0, end_row - s0);
            }
            if end_row < n {
                block(r0, end_row - r0, end_row, n - end_row);
            }
            for j0 in (r0..n).step_by(MIRROR_SQUARE) {
                for i0 in (r0..end_row.min(j0 + MIRROR_SQUARE)).step_by(MIRROR_SQUARE) {
                    for i in i0..(i0 + MIRROR_SQUARE).min(end_row) {
                        for j in (i + 1).max(j0)..(j0 + MIRROR_SQUARE).min(n) {
                            // SAFETY: i < j < n: both elements are C's; C[i, j]
                            // was written above by this panel, and C[j, i] is
                            // this panel's to write (see above).
                            unsafe { *at(j, i) = *at(i, j) };
                        }
                    }
                }
            }
        }
    };
    let panels = n.div_ceil(height);
    // On a pool worker (a product of a batch spread over the threads) the
    // panels run on this thread: the same products, the same bits.
    if rayon::current_thread_index().is_some() {
        run(0, panels);
    } else {
        crate::parallel::parallel_for(panels, 1, &run);
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
    // SAFETY: as in `kiln_gemm_f64`.
    unsafe {
        strided_gemm(
            m,
            k,
            n,
            alpha,
            (a, rsa, csa),
            (b, rsb, csb),
            beta,
            (c, rsc, csc),
            false,
        )
    }
}

/// [`kiln_gemm_f64`] on the calling thread only, whatever the product's
/// size: for a caller that splits a product into row blocks and hands the
/// blocks to threads itself (the executor's GEMM epilogues). A block's
/// result depends on its own m, k and n only, like any product's.
///
/// # Safety
/// As for [`kiln_gemm_f64`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn serial_gemm_f64(
    m: usize,
    k: usize,
    n: usize,
    alpha: f64,
    a: (*const f64, isize, isize),
    b: (*const f64, isize, isize),
    beta: f64,
    c: (*mut f64, isize, isize),
) {
    // SAFETY: the caller's contract is `matrix_vector_f64`'s and `strided_gemm`'s.
    unsafe {
        if !matrix_vector_f64(m, k, n, alpha, a, b, beta, c, true) {
            strided_gemm(m, k, n, alpha, a, b, beta, c, true)
        }
    }
}

/// Matrices of at least this many elements go to the threads in a
/// matrix-vector product ([`matrix_vector_f64`]: 2 MB of f64, memory-bound
/// work that two threads stream faster than one).
const MATRIX_VECTOR_PARALLEL: usize = 1 << 18;

/// Outputs per strip of the scaled-rows form of [`matrix_vector_f64`]: a
/// strip's accumulators (4 KB) stay in L1 while every matrix column adds
/// to them.
const SCALED_ROWS_STRIP: usize = 512;

/// C = alpha·A·B + beta·C in f64 when C is one column (n == 1) or one row
/// (m == 1), k >= 1: the product of a matrix M (p×k) and a vector x, seen
/// from A and B's strides, by the runtime's memory-speed passes instead of
/// the GEMM crate (whose tiles left a 2000 × 2000 matrix-vector product
/// at one thread's memory speed). When M's rows and x are contiguous, each
/// output is an inner product (`kiln_dot_f64`); when M's columns are, the
/// outputs are strips of accumulators that every column, scaled by its
/// element of x, adds to (`kiln_scaled_rows_f64`). Either way each output
/// is computed by the same operations in the same order whatever the
/// thread count (outputs, or strips of them, are what the threads share
/// out). Returns false, having done nothing, for any other shape or
/// layout.
///
/// # Safety
/// As for [`kiln_gemm_f64`].
#[allow(clippy::too_many_arguments)]
unsafe fn matrix_vector_f64(
    m: usize,
    k: usize,
    n: usize,
    alpha: f64,
    (a, rsa, csa): (*const f64, isize, isize),
    (b, rsb, csb): (*const f64, isize, isize),
    beta: f64,
    (c, rsc, csc): (*mut f64, isize, isize),
    serial: bool,
) -> bool {
    use crate::math::{kiln_dot_f64, kiln_scaled_rows_f64};
    if k == 0 || m == 0 || n == 0 || (m != 1 && n != 1) {
        return false;
    }
    // y (p) = M (p×k) · x (k): M's element (i, l) at mat + i·rm + l·cm, x's
    // l at vec + l·sx, y's i at out + i·sy.
    let (p, (mat, rm, cm), (vec, sx), (out, sy)) = if n == 1 {
        (m, (a, rsa, csa), (b, rsb), (c, rsc))
    } else {
        (n, (b, csb, rsb), (a, csa), (c, csc))
    };
    let dots = cm == 1 && sx == 1;
    if !dots && rm != 1 {
        return false;
    }
    let on_worker = rayon::current_thread_index().is_some();
    let threaded = !serial && !on_worker && p.saturating_mul(k) >= MATRIX_VECTOR_PARALLEL;
    let (mat, vec, out) = (mat as usize, vec as usize, out as usize);
    // y_i = alpha·s + beta·y_i (y write-only when beta == 0).
    let store = |i: usize, s: f64| {
        let y = (out as *mut f64).wrapping_offset(i as isize * sy);
        // SAFETY: output i < p exists (the caller's contract); each is
        // written by one thread.
        unsafe {
            *y = if beta == 0.0 {
                alpha * s
            } else {
                alpha * s + beta * *y
            }
        };
    };
    if dots {
        let run = |i0: usize, i1: usize| {
            for i in i0..i1 {
                let row = (mat as *const f64).wrapping_offset(i as isize * rm);
                // SAFETY: row i of M and x hold k contiguous readable values.
                store(i, unsafe { kiln_dot_f64(row, vec as *const f64, k) });
            }
        };
        if threaded {
            // Chunks of at least 2^15 matrix elements (256 KB).
            crate::parallel::parallel_for(p, (MATRIX_VECTOR_PARALLEL / 8 / k).max(1), &run);
        } else {
            run(0, p);
        }
        return true;
    }
    let strips = p.div_ceil(SCALED_ROWS_STRIP);
    let run = |s0: usize, s1: usize| {
        let mut acc = [0.0f64; SCALED_ROWS_STRIP];
        for strip in s0..s1 {
            let i0 = strip * SCALED_ROWS_STRIP;
            let len = SCALED_ROWS_STRIP.min(p - i0);
            acc[..len].fill(0.0);
            // SAFETY: elements i0..i0 + len of M's k columns (contiguous,
            // column l at mat + l·cm) and x's k values are readable; `acc`
            // holds len accumulators and overlaps neither.
            unsafe {
                kiln_scaled_rows_f64(
                    acc.as_mut_ptr(),
                    (mat as *const f64).add(i0),
                    len,
                    k,
                    cm,
                    vec as *const f64,
                    sx,
                )
            };
            for (j, &s) in acc[..len].iter().enumerate() {
                store(i0 + j, s);
            }
        }
    };
    if threaded {
        crate::parallel::parallel_for(strips, 1, &run);
    } else {
        run(0, strips);
    }
    true
}

/// f32 version of [`serial_gemm_f64`].
///
/// # Safety
/// As for [`kiln_gemm_f64`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn serial_gemm_f32(
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: (*const f32, isize, isize),
    b: (*const f32, isize, isize),
    beta: f32,
    c: (*mut f32, isize, isize),
) {
    // SAFETY: the caller's contract is `strided_gemm`'s.
    unsafe { strided_gemm(m, k, n, alpha, a, b, beta, c, true) }
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

    /// A `kiln_gemm_*` entry point of element type `T`.
    type GemmFn<T> = unsafe extern "C" fn(
        usize,
        usize,
        usize,
        T,
        *const T,
        isize,
        isize,
        *const T,
        isize,
        isize,
        T,
        *mut T,
        isize,
        isize,
    );

    /// C (n×n, filled with `fill` first) = 1.5·A·Aᵀ through `gemm`, for A
    /// (n×k) at `x[off..]` with strides (`rsa`, `csa`) and B its
    /// transpose in the same memory: the symmetric path's operands.
    fn gram_product<T: Copy + From<f32>>(
        gemm: GemmFn<T>,
        x: &[T],
        (off, rsa, csa): (usize, isize, isize),
        n: usize,
        k: usize,
        fill: T,
    ) -> Vec<T> {
        let mut c = vec![fill; n * n];
        // SAFETY: every A element (and so every B = Aᵀ one) lies in x (the
        // caller's layouts); C is n×n and overlaps neither.
        unsafe {
            gemm(
                n,
                k,
                n,
                T::from(1.5),
                x.as_ptr().add(off),
                rsa,
                csa,
                x.as_ptr().add(off),
                csa,
                rsa,
                T::from(0.0),
                c.as_mut_ptr(),
                n as isize,
                1,
            )
        };
        c
    }

    /// `Xᵀ·X` and `X·Xᵀ` (B the transpose of A in the same memory) take
    /// the symmetric path: against the same product with B copied
    /// elsewhere (the general path) within a few roundings, exactly
    /// symmetric, the same bits on 1, 2 and 3 threads and on a pool
    /// worker, for f64 and f32,
    /// with partial edge tiles, a negative stride and C's old NaNs
    /// ignored (beta = 0).
    #[test]
    fn gram_matrices_take_the_symmetric_path() {
        // k long enough that the general path adds in another order than
        // the panels' (so that a worker taking it would change the bits).
        let (n, k) = (2 * SYMMETRIC_PANEL + 37, 700);
        let mut s = 5;
        let x: Vec<f64> = (0..n * k).map(|_| lcg(&mut s)).collect();
        // (A's first element offset, rsa, csa): Xᵀ·X reads X (k×n) as A =
        // Xᵀ; X·Xᵀ reads X (n×k) as A = X; the third reads X's rows
        // bottom-up.
        let layouts: [(usize, isize, isize); 3] = [
            (0, 1, n as isize),
            (0, k as isize, 1),
            ((n - 1) * k, -(k as isize), 1),
        ];
        for (off, rsa, csa) in layouts {
            let elem =
                |i: usize, l: usize| (off as isize + i as isize * rsa + l as isize * csa) as usize;
            let b_copy: Vec<f64> = (0..k * n).map(|q| x[elem(q % n, q / n)]).collect();
            let mut general = vec![0.0; n * n];
            // SAFETY: b_copy holds B (k×n) row-major; every A element is in x.
            unsafe {
                kiln_gemm_f64(
                    n,
                    k,
                    n,
                    1.5,
                    x.as_ptr().add(off),
                    rsa,
                    csa,
                    b_copy.as_ptr(),
                    n as isize,
                    1,
                    0.0,
                    general.as_mut_ptr(),
                    n as isize,
                    1,
                )
            };
            let gram = |threads: usize| {
                crate::parallel::set_num_threads(threads);
                gram_product(kiln_gemm_f64, &x, (off, rsa, csa), n, k, f64::NAN)
            };
            let one = gram(1);
            // On a pool worker (as a batch of a batched product runs): its
            // tiles on that thread, the same bits.
            crate::parallel::set_num_threads(2);
            let on_worker = std::sync::Mutex::new(Vec::new());
            crate::parallel::in_pool(&|_| {
                let c = gram_product(kiln_gemm_f64, &x, (off, rsa, csa), n, k, f64::NAN);
                *on_worker.lock().unwrap() = c;
            });
            let on_worker = on_worker.into_inner().unwrap();
            assert!(on_worker
                .iter()
                .zip(&one)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
            for threads in [2, 3] {
                assert!(gram(threads)
                    .iter()
                    .zip(&one)
                    .all(|(a, b)| a.to_bits() == b.to_bits()));
            }
            crate::parallel::set_num_threads(0);
            for i in 0..n {
                for j in 0..n {
                    assert_eq!(
                        one[i * n + j].to_bits(),
                        one[j * n + i].to_bits(),
                        "({i},{j})"
                    );
                    let (g, w) = (one[i * n + j], general[i * n + j]);
                    // Another order of the k additions than the general path's.
                    assert!(
                        (g - w).abs() <= 1e-13 * (1.0 + w.abs()),
                        "({i},{j}): {g} vs {w}"
                    );
                }
            }
            // f32 alike, against the f64 product.
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let c32 = gram_product(kiln_gemm_f32, &x32, (off, rsa, csa), n, k, f32::NAN);
            for (q, (&g, &w)) in c32.iter().zip(&general).enumerate() {
                assert_eq!(g.to_bits(), c32[(q % n) * n + q / n].to_bits());
                assert!(
                    (f64::from(g) - w).abs() <= 1e-3 * (1.0 + w.abs()),
                    "f32 [{q}]: {g} vs {w}"
                );
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

    #[test]
    fn row_blocks_give_the_whole_products_bits() {
        // The executor's GEMM epilogues split a product into row blocks
        // whose count follows the thread count; their results must not.
        // The crate blocks k by k and the caches only, so each element is
        // summed in the same order whichever rows share its call. Shapes:
        // square, odd (edge tiles), long k (several k blocks), short k.
        for (m, k, n) in [
            (512_usize, 512_usize, 512_usize),
            (131, 257, 129),
            (64, 2048, 300),
            (1000, 9, 1000),
        ] {
            let mut s = 5;
            let a: Vec<f64> = (0..m * k).map(|_| lcg(&mut s)).collect();
            let b: Vec<f64> = (0..k * n).map(|_| lcg(&mut s)).collect();
            let c0: Vec<f64> = (0..m * n).map(|_| lcg(&mut s)).collect();
            let in_blocks = |parts: usize| {
                let mut c = c0.clone();
                let rows = m.div_ceil(parts);
                for r0 in (0..m).step_by(rows) {
                    let r1 = (r0 + rows).min(m);
                    // SAFETY: rows r0..r1 of A (m×k) and C (m×n), all of
                    // B (k×n), row-major; C overlaps neither.
                    unsafe {
                        serial_gemm_f64(
                            r1 - r0,
                            k,
                            n,
                            0.5,
                            (a.as_ptr().add(r0 * k), k as isize, 1),
                            (b.as_ptr(), n as isize, 1),
                            -2.0,
                            (c.as_mut_ptr().add(r0 * n), n as isize, 1),
                        )
                    };
                }
                c
            };
            let whole = in_blocks(1);
            for parts in [2, 3, 7] {
                let c = in_blocks(parts);
                let same = whole
                    .iter()
                    .zip(&c)
                    .all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{m}×{k}×{n} in {parts} row blocks");
            }
        }
    }

    #[test]
    fn result_is_independent_of_threads() {
        // Above PARALLEL_FLOPS, odd sizes (edge tiles), C = alpha·A·B + beta·C.
        let (m, k, n) = (131, 257, 129);
        assert!(m * k * n >= PARALLEL_FLOPS);
        let mut s = 11;
        let a: Vec<f64> = (0..m * k).map(|_| lcg(&mut s)).collect();
        let b: Vec<f64> = (0..k * n).map(|_| lcg(&mut s)).collect();
        let c0: Vec<f64> = (0..m * n).map(|_| lcg(&mut s)).collect();
        let run64 = |threads: usize| {
            crate::parallel::set_num_threads(threads);
            let mut c = c0.clone();
            gemm_f64(m, k, n, 0.75, &a, &b, -1.5, &mut c);
            c
        };
        let a32: Vec<f32> = a.iter().map(|&v| v as f32).collect();
        let b32: Vec<f32> = b.iter().map(|&v| v as f32).collect();
        let run32 = |threads: usize| {
            crate::parallel::set_num_threads(threads);
            let mut c = vec![f32::NAN; m * n];
            gemm_f32(m, k, n, 1.0, &a32, &b32, 0.0, &mut c);
            c
        };
        let (one64, one32) = (run64(1), run32(1));
        for threads in [2, 3] {
            let (c64, c32) = (run64(threads), run32(threads));
            assert!(one64
                .iter()
                .zip(&c64)
                .all(|(x, y)| x.to_bits() == y.to_bits()));
            assert!(one32
                .iter()
                .zip(&c32)
                .all(|(x, y)| x.to_bits() == y.to_bits()));
        }
        crate::parallel::set_num_threads(0);
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
                let want = 0.75 * dot - 1.5 * c0[i * n + j];
                assert!((one64[i * n + j] - want).abs() < 1e-12, "({i},{j})");
                assert!(
                    (f64::from(one32[i * n + j]) - dot).abs() < 1e-3,
                    "({i},{j})"
                );
            }
        }
    }

    /// Matrix-vector products (C one column or one row) in every layout:
    /// by inner products (contiguous matrix rows and vector), by scaled
    /// rows (contiguous matrix columns, outputs in strips of
    /// SCALED_ROWS_STRIP) and by the GEMM crate (neither), against the
    /// naive sum; beta == 0 ignores a NaN in C; the same bits on one
    /// thread and on two, and from the serial entry point.
    #[test]
    fn matrix_vector_products_in_every_layout() {
        let mut s = 5;
        for &(p, k) in &[
            (1, 3),
            (7, 1),
            (33, 17),
            (SCALED_ROWS_STRIP + 3, 9),
            (600, 700),
        ] {
            let mat: Vec<f64> = (0..p * k).map(|_| lcg(&mut s)).collect();
            let x: Vec<f64> = (0..2 * k).map(|_| lcg(&mut s)).collect();
            let c0: Vec<f64> = (0..2 * p).map(|_| lcg(&mut s)).collect();
            for (alpha, beta) in [(1.0, 0.0), (0.5, -2.0)] {
                // M (p×k) row-major (rm = k, cm = 1) or column-major (rm =
                // 1, cm = p); x contiguous or every other element.
                for (rm, cm) in [(k as isize, 1), (1, p as isize)] {
                    for sx in [1isize, 2] {
                        let at = |i: usize, l: usize| mat[i * rm as usize + l * cm as usize];
                        let want: Vec<f64> = (0..p)
                            .map(|i| {
                                let d: f64 = (0..k).map(|l| at(i, l) * x[l * sx as usize]).sum();
                                alpha * d + beta * c0[2 * i]
                            })
                            .collect();
                        let mut outs = Vec::new();
                        for (threads, serial) in [(1, false), (2, false), (2, true)] {
                            crate::parallel::set_num_threads(threads);
                            // y = M·x as C (p×1) = A·B, and as C (1×p) =
                            // x^T·M^T; C every other element, NaN when beta == 0.
                            for row in [false, true] {
                                let mut c: Vec<f64> = if beta == 0.0 {
                                    vec![f64::NAN; 2 * p]
                                } else {
                                    c0.clone()
                                };
                                let (mm, nn) = if row { (1, p) } else { (p, 1) };
                                let (ga, gb) = if row {
                                    ((x.as_ptr(), 0, sx), (mat.as_ptr(), cm, rm))
                                } else {
                                    ((mat.as_ptr(), rm, cm), (x.as_ptr(), sx, 0))
                                };
                                let gc = if row {
                                    (c.as_mut_ptr(), 0, 2)
                                } else {
                                    (c.as_mut_ptr(), 2, 0)
                                };
                                // SAFETY: the strides address within the buffers.
                                unsafe {
                                    if serial {
                                        serial_gemm_f64(mm, k, nn, alpha, ga, gb, beta, gc);
                                    } else {
                                        kiln_gemm_f64(
                                            mm, k, nn, alpha, ga.0, ga.1, ga.2, gb.0, gb.1, gb.2,
                                            beta, gc.0, gc.1, gc.2,
                                        );
                                    }
                                }
                                outs.push(c.iter().step_by(2).copied().collect::<Vec<f64>>());
                            }
                        }
                        crate::parallel::set_num_threads(0);
                        for (i, &w) in want.iter().enumerate() {
                            let got = outs[0][i];
                            assert!((got - w).abs() < 1e-12, "{p}x{k} ({rm},{cm}) sx {sx}: {i}");
                        }
                        for o in &outs[1..] {
                            assert!(
                                o.iter()
                                    .zip(&outs[0])
                                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                                "{p}x{k} ({rm},{cm}) sx {sx}: bits differ"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn empty_product_scales_c_by_beta() {
        let (a, b) = ([0.0f64; 0], [0.0f64; 0]);
        let mut c = [f64::NAN, f64::INFINITY, 1.0];
        gemm_f64(3, 0, 1, 2.0, &a, &b, 0.0, &mut c);
        assert_eq!(c, [0.0; 3], "beta == 0: C is not read");
        let mut c = [1.0, -2.0, 3.0];
        gemm_f64(3, 0, 1, 2.0, &a, &b, 1.0, &mut c);
        assert_eq!(c, [1.0, -2.0, 3.0]);
        gemm_f64(3, 0, 1, 2.0, &a, &b, -0.5, &mut c);
        assert_eq!(c, [-0.5, 1.0, -1.5]);
        let mut c32 = [4.0f32, f32::NAN];
        gemm_f32(1, 0, 2, 1.0, &[], &[], 0.0, &mut c32);
        assert_eq!(c32, [0.0, 0.0]);
    }
}
