//! GEMM backend comparison: `matrixmultiply` vs `gemm` (0.19, `x86-v4`
//! AVX-512 kernels), f64, row-major, C = A·B (beta = 0).
//!
//! - group `dgemm`: single-threaded, 64×64, 256×256 and 512×512.
//! - group `dgemm_2t`: two threads, 256×256 and 512×512 — matrixmultiply
//!   split in two row halves over the `kiln_runtime::parallel` pool (the
//!   previous backend) vs `gemm`'s own `Parallelism::Rayon(2)` on rayon's
//!   global pool vs `kiln_runtime::gemm::gemm_f64` (the same, inside
//!   kiln's pool).
//!
//! The faster one backs `kiln_gemm_*` (results in BENCH_NOTES.md).

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};

fn inputs(n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let a = (0..n * n)
        .map(|i| ((i * 7 % 13) as f64) * 0.1 - 0.6)
        .collect();
    let b = (0..n * n)
        .map(|i| ((i * 5 % 11) as f64) * 0.1 - 0.5)
        .collect();
    (a, b, vec![0.0; n * n])
}

/// `out = a·b` (n×n, row-major) with the `gemm` crate.
fn gemm_crate(n: usize, a: &[f64], b: &[f64], out: &mut [f64], par: gemm::Parallelism) {
    let s = n as isize;
    // SAFETY: row-major n×n buffers (column stride 1, row stride n), `out`
    // exclusively borrowed so it overlaps neither input; read_dst = false,
    // so dst = 1.0·a·b (gemm's `beta` scales the product).
    unsafe {
        gemm::gemm(
            n,
            n,
            n,
            out.as_mut_ptr(),
            1,
            s,
            false,
            a.as_ptr(),
            1,
            s,
            b.as_ptr(),
            1,
            s,
            0.0,
            1.0,
            false,
            false,
            false,
            par,
        )
    };
}

/// `out = a·b` (n×n, row-major) with `matrixmultiply` on rows r0..r1.
fn matrixmultiply_rows(n: usize, r0: usize, r1: usize, a: &[f64], b: &[f64], out: *mut f64) {
    let s = n as isize;
    // SAFETY: rows r0..r1 (r1 <= n) of row-major n×n buffers; `out` points
    // to an n×n buffer that overlaps neither input.
    unsafe {
        matrixmultiply::dgemm(
            r1 - r0,
            n,
            n,
            1.0,
            a.as_ptr().add(r0 * n),
            s,
            1,
            b.as_ptr(),
            s,
            1,
            0.0,
            out.add(r0 * n),
            s,
            1,
        )
    };
}

/// `out = a·b` with `matrixmultiply`, rows split in two halves (multiples
/// of 8 rows) over the `kiln_runtime::parallel` pool: the previous
/// `kiln_gemm_f64`.
fn matrixmultiply_split_rows(n: usize, a: &[f64], b: &[f64], out: &mut [f64]) {
    let cu = out.as_mut_ptr() as usize;
    let half = n.div_ceil(16) * 8;
    kiln_runtime::parallel::parallel_for(2, 1, &|t0, t1| {
        for t in t0..t1 {
            // The two halves write disjoint rows of `out`.
            matrixmultiply_rows(n, t * half, ((t + 1) * half).min(n), a, b, cu as *mut f64);
        }
    });
}

fn single_threaded(c: &mut Criterion) {
    let mut g = c.benchmark_group("dgemm");
    for n in [64usize, 256, 512] {
        if n >= 256 {
            g.sample_size(20);
        }
        let (a, b, mut out) = inputs(n);
        g.bench_with_input(BenchmarkId::new("matrixmultiply", n), &n, |bch, &n| {
            bch.iter(|| {
                matrixmultiply_rows(n, 0, n, &a, &b, out.as_mut_ptr());
                black_box(&out);
            })
        });
        g.bench_with_input(BenchmarkId::new("gemm", n), &n, |bch, &n| {
            bch.iter(|| {
                gemm_crate(n, &a, &b, &mut out, gemm::Parallelism::None);
                black_box(&out);
            })
        });
    }
    g.finish();
}

fn two_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("dgemm_2t");
    g.sample_size(20);
    kiln_runtime::parallel::set_num_threads(2);
    for n in [256usize, 512] {
        let (a, b, mut out) = inputs(n);
        g.bench_with_input(
            BenchmarkId::new("matrixmultiply_split_rows", n),
            &n,
            |bch, &n| {
                bch.iter(|| {
                    matrixmultiply_split_rows(n, &a, &b, &mut out);
                    black_box(&out);
                })
            },
        );
        g.bench_with_input(BenchmarkId::new("gemm_rayon2", n), &n, |bch, &n| {
            bch.iter(|| {
                gemm_crate(n, &a, &b, &mut out, gemm::Parallelism::Rayon(2));
                black_box(&out);
            })
        });
        // kiln's entry point: `gemm` with Rayon(2) inside kiln's pool.
        g.bench_with_input(BenchmarkId::new("kiln_gemm_f64", n), &n, |bch, &n| {
            bch.iter(|| {
                kiln_runtime::gemm::gemm_f64(n, n, n, 1.0, &a, &b, 0.0, &mut out);
                black_box(&out);
            })
        });
    }
    kiln_runtime::parallel::set_num_threads(0);
    g.finish();
}

criterion_group!(benches, single_threaded, two_threads);
criterion_main!(benches);
