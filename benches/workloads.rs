#![allow(missing_docs)] // criterion_group! generates undocumented items
//! Run time of the workload suite (`shared/workloads.md`, data and
//! expressions in `suite_data.rs`) compiled through the FAST_RUN pipeline,
//! compile time of each suite workload (rewrite + code generation), and
//! compile time of the `chain` graph family, and (group `exp_paths`, one
//! thread) the two transcendental strategies of the element-wise kernels on
//! `exp` over 10^6 f64: the contiguous block-wise path (block calls of the
//! runtime's vectorised exp) against the per-element path a stride-2 input forces
//! (this group replaces the former `examples/exp_strategy.rs` probe). Quote
//! medians and ratios: the machines are noisy. `KILN_BENCH_N` overrides the
//! 10^7 vector length of the suite.

use criterion::{criterion_group, criterion_main, Criterion};
use kiln::linker::{compile, set_num_threads, Arg, CompileOptions};
use kiln::rewriting::Mode;
use kiln::{function, vector, DType, FunctionGraph, Tensor};
use ndarray::{s, ArrayD, IxDyn};

#[path = "suite_data.rs"]
mod suite_data;

/// The `chain` graph of K operations (workloads.md).
pub fn chain(k: usize) -> FunctionGraph {
    let xs: Vec<Tensor> = (0..8)
        .map(|i| vector(&format!("x{i}"), DType::F64))
        .collect();
    let mut pool = xs.clone();
    for i in 0..k {
        let l = pool.len();
        let a = pool[l - 1 - (i * 7) % l.min(20)].clone();
        let b = pool[(i * 13) % l].clone();
        let t = match i % 6 {
            0 => &a + &b,
            1 => &a * &b,
            2 => &a - &(2.0 * &b),
            3 => &(-&a).exp() / &(1.0 + &(&b * &b)),
            4 => (&a * &a).log1p() * 0.5,
            _ => &a.tanh() + &(&b / 3.0),
        };
        pool.push(t);
    }
    FunctionGraph::new(&xs, &[pool.last().unwrap().clone()]).unwrap()
}

fn run_time(c: &mut Criterion) {
    let n: usize = std::env::var("KILN_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let mut g = c.benchmark_group("workloads");
    g.sample_size(10);
    for w in suite_data::suite(n) {
        let f = function(&w.inputs, std::slice::from_ref(&w.output))
            .mode(Mode::fast_run())
            .compile()
            .unwrap();
        let args: Vec<Arg<'_>> = w.values.iter().map(Arg::from).collect();
        g.bench_function(w.name, |b| b.iter(|| f.call(&args).unwrap()));
    }
    g.finish();
}

/// Compile time of each suite workload through the whole pipeline (graph,
/// FAST_RUN rewriting, lowering and code generation; compile cache bypassed).
fn compile_suite(c: &mut Criterion) {
    let mut g = c.benchmark_group("compile_suite");
    g.sample_size(20);
    let opts = CompileOptions {
        no_cache: true,
        ..Default::default()
    };
    for w in suite_data::suite(16) {
        g.bench_function(w.name, |b| {
            b.iter(|| {
                function(&w.inputs, std::slice::from_ref(&w.output))
                    .mode(Mode::fast_run())
                    .options(opts)
                    .compile()
                    .unwrap()
            })
        });
    }
    g.finish();
}

fn compile_time(c: &mut Criterion) {
    let mut g = c.benchmark_group("compile_chain");
    g.sample_size(10);
    for k in [100, 300, 1000] {
        let fg = chain(k);
        let opts = CompileOptions {
            no_cache: true,
            ..Default::default()
        };
        g.bench_function(format!("K={k}"), |b| {
            b.iter(|| compile(&fg, &opts).unwrap())
        });
    }
    g.finish();
}

/// `exp(x)` on a contiguous input and on a stride-2 view of the same
/// length, on one thread (the thread count is restored afterwards).
fn exp_paths(c: &mut Criterion) {
    let n = 1_000_000;
    let x = vector("x", DType::F64);
    let fg = FunctionGraph::new(std::slice::from_ref(&x), &[x.exp()]).unwrap();
    let f = compile(&fg, &CompileOptions::default()).unwrap();
    let wide = ArrayD::from_shape_fn(IxDyn(&[2 * n]), |i| {
        ((i[0] * 7919) % 1000) as f64 / 250.0 - 2.0
    });
    let contiguous = wide.slice(s![..n]).to_owned().into_dyn();
    let strided = wide.slice(s![..;2]).into_dyn();
    set_num_threads(1);
    let mut g = c.benchmark_group("exp_paths");
    g.sample_size(20);
    g.bench_function("contiguous_blockwise", |b| {
        b.iter(|| f.call(&[Arg::from(&contiguous)]).unwrap())
    });
    g.bench_function("stride2_per_element", |b| {
        b.iter(|| f.call(&[Arg::from(strided.view())]).unwrap())
    });
    g.finish();
    set_num_threads(0);
}

criterion_group!(benches, run_time, compile_suite, compile_time, exp_paths);
criterion_main!(benches);
