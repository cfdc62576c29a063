//! GEMM backend comparison: `matrixmultiply` vs `gemm`, single-threaded,
//! f64, row-major, C = A·B (beta = 0), at 64×64 and 512×512. The faster
//! one backs `kiln_gemm_*` (results in BENCH_NOTES.md).

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

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("dgemm");
    for n in [64usize, 512] {
        if n == 512 {
            g.sample_size(20);
        }
        let (a, b, mut out) = inputs(n);
        let s = n as isize;
        g.bench_with_input(BenchmarkId::new("matrixmultiply", n), &n, |bch, &n| {
            bch.iter(|| {
                // SAFETY: row-major n×n buffers, strides within bounds.
                unsafe {
                    matrixmultiply::dgemm(
                        n,
                        n,
                        n,
                        1.0,
                        a.as_ptr(),
                        s,
                        1,
                        b.as_ptr(),
                        s,
                        1,
                        0.0,
                        out.as_mut_ptr(),
                        s,
                        1,
                    )
                };
                black_box(&out);
            })
        });
        g.bench_with_input(BenchmarkId::new("gemm", n), &n, |bch, &n| {
            bch.iter(|| {
                // SAFETY: row-major n×n buffers (column stride 1, row stride n).
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
                        gemm::Parallelism::None,
                    )
                };
                black_box(&out);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
