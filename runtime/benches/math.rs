//! Speed of the runtime's block math functions (f64), with the C library
//! as a yardstick measured in the same run (the machines are noisy: compare
//! ratios, not absolute times).
//!
//! - group `math_in_cache`: 4096 elements (input and output stay in L1/L2):
//!   `exp`, `log`, `log1p`, `tanh`, `sigmoid`, `softplus`, `expm1`, `pow`
//!   (exponent 3), the pre-staged `tanh` of `x + 0` (`tanh_pre_add`), the
//!   logsumexp row passes `sum_exp_shift` (inputs in
//!   [-8, 0], as after the max shift) and `row_max`, and the C library's
//!   `exp` and `powf` element by element.
//! - group `exp_stream`: 10^6 elements from memory, one call over the whole
//!   range against 256-element block calls (the JIT's block-wise path).
//! - group `reduction_passes`: 64 × 64 values in cache through the column
//!   sum (row by row and all rows in one call), the finite count and the
//!   row sum.
//!
//! `cargo bench -p kiln-runtime --bench math`; to compare a change, save a
//! baseline before it (`-- --save-baseline before`) and compare after it
//! (`-- --baseline before`), alternating a few times on a noisy machine.
//! Replaces the former `examples/math_speed.rs`, `examples/rt_speed.rs` and
//! `runtime/examples/exp_speed.rs` probes.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use kiln_runtime::math as m;

/// A block function of the runtime: `out[i] = f(x[i])`.
type Unary = fn(&[f64], &mut [f64]);

/// A pre-staged block function: `out[i] = f(a[i] ⊕ b[i])` (see
/// `math_symbols`).
type PreStaged = unsafe extern "C" fn(*const f64, *const f64, *mut f64, usize, u64);

/// Points in [-4, 4) (`positive`: shifted into (0.1, 4.1] for the logarithms).
fn points(n: usize, positive: bool) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let v = (i as f64 / n as f64) * 8.0 - 4.0;
            if positive {
                v.abs() + 0.1
            } else {
                v
            }
        })
        .collect()
}

fn in_cache(c: &mut Criterion) {
    let n = 4096;
    let (x, xp) = (points(n, false), points(n, true));
    let threes = vec![3.0; n];
    let mut out = vec![0.0; n];
    let mut g = c.benchmark_group("math_in_cache");
    g.throughput(Throughput::Elements(n as u64));
    let unary: [(&str, Unary, bool); 7] = [
        ("exp", m::exp_f64, false),
        ("log", m::log_f64, true),
        ("log1p", m::log1p_f64, true),
        ("tanh", m::tanh_f64, false),
        ("sigmoid", m::sigmoid_f64, false),
        ("softplus", m::softplus_f64, false),
        ("expm1", m::expm1_f64, false),
    ];
    for (name, f, positive) in unary {
        let input = if positive { &xp } else { &x };
        g.bench_function(name, |b| b.iter(|| f(black_box(input), &mut out)));
    }
    // The pre-staged form on the same values, as tanh(x + s) with s = 0
    // broadcast (what `tanh(u[:, None] + v)` calls per row): its cost over
    // `tanh` is the pre-stage's.
    let pre = m::math_symbols()
        .into_iter()
        .find(|(s, _)| *s == "kiln_tanh_pre_f64")
        .expect("listed")
        .1;
    // SAFETY: `math_symbols` lists the pre-staged tanh with this signature.
    let pre: PreStaged = unsafe { std::mem::transmute(pre) };
    let zero = 0.0f64;
    g.bench_function("tanh_pre_add", |b| {
        b.iter(|| {
            // SAFETY: x and out hold n values; the scalar operand is one.
            unsafe {
                pre(
                    black_box(x.as_ptr()),
                    &zero,
                    out.as_mut_ptr(),
                    n,
                    m::PRE_ADD | m::PRE_B_SCALAR,
                )
            }
        })
    });
    let shifted: Vec<f64> = (0..n).map(|i| -8.0 * i as f64 / n as f64).collect();
    g.bench_function("sum_exp_shift", |b| {
        b.iter(|| m::sum_exp_shift_f64(black_box(&shifted), 0.0, None))
    });
    g.bench_function("row_max", |b| {
        b.iter(|| m::extreme_f64(black_box(&shifted), true))
    });
    g.bench_function("pow", |b| {
        b.iter(|| m::pow_f64(black_box(&xp), &threes, &mut out))
    });
    g.bench_function("c_library_exp", |b| {
        b.iter(|| {
            for (o, &v) in out.iter_mut().zip(black_box(&x)) {
                *o = v.exp();
            }
        })
    });
    g.bench_function("c_library_powf", |b| {
        b.iter(|| {
            for (o, &v) in out.iter_mut().zip(black_box(&xp)) {
                *o = v.powf(black_box(3.0));
            }
        })
    });
    g.finish();
}

fn exp_stream(c: &mut Criterion) {
    let n = 1_000_000;
    let x = points(n, false);
    let mut out = vec![0.0; n];
    let mut g = c.benchmark_group("exp_stream");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("one_call", |b| {
        b.iter(|| m::exp_f64(black_box(&x), &mut out))
    });
    g.bench_function("blocks_of_256", |b| {
        b.iter(|| {
            for (xs, os) in black_box(&x).chunks(256).zip(out.chunks_mut(256)) {
                m::exp_f64(xs, os);
            }
        })
    });
    g.finish();
}

/// The reduction passes of `rowcol` in cache, where a variant that LLVM
/// vectorised across groups with gathers shows at once (it happened to the
/// first multi-row column pass and the first count under AVX-512: five to
/// ten times slower than the AVX2 variant; compare with `KILN_ISA=avx2`).
fn reduction_passes(c: &mut Criterion) {
    let (rows, cols) = (64, 64);
    let x = points(rows * cols, false);
    let mut acc = vec![0.0; cols];
    let mut g = c.benchmark_group("reduction_passes");
    g.throughput(Throughput::Elements((rows * cols) as u64));
    g.bench_function("column_sum_by_row", |b| {
        b.iter(|| {
            for row in black_box(&x).chunks_exact(cols) {
                m::column_sum_f64(&mut acc, row);
            }
        })
    });
    g.bench_function("column_sum_all_rows", |b| {
        b.iter(|| m::column_sum_f64(&mut acc, black_box(&x)))
    });
    g.bench_function("count_finite", |b| {
        b.iter(|| m::count_finite_f64(black_box(&x)))
    });
    g.bench_function("row_sum", |b| b.iter(|| m::sum_f64(black_box(&x))));
    g.finish();
}

criterion_group!(benches, in_cache, exp_stream, reduction_passes);
criterion_main!(benches);
