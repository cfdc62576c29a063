//! Compile time of the `chain` graph family of `workloads.md`
//! (K = 100 .. 10000 operations), split into its two halves, and the time
//! of each FAST_RUN optdb pass on the chain graph of K = 3000:
//!
//! * `fast_run_chain/K`: FAST_RUN rewriting (the graph is rebuilt outside the
//!   timed region; the optdb is built once);
//! * `codegen_chain/K`: lowering and code generation of the rewritten graph
//!   (`linker::compile`, compile cache bypassed);
//! * `chain_pass/NAME`: one optdb pass (`merge1`, `canonicalize`, ...)
//!   applied to the graph as the passes before it left it.
//!
//! `cargo bench --bench rewrite` (a few minutes; 10 samples each). PyTensor
//! 3.0 needs 328 ms / 633 ms / 1.7 s / 8.0 s to rewrite K = 100 / 300 /
//! 1000 / 3000 on the build machine.

use std::time::Duration;

use criterion::{criterion_main, BatchSize, BenchmarkId, Criterion};
use kiln::linker::{compile, CompileOptions};
use kiln::rewrites::optdb;
use kiln::rewriting::{rewrite_graph_with, AsQuery, Mode};
use kiln::workloads::chain_graph;

const SIZES: [usize; 5] = [100, 300, 1000, 3000, 10000];

pub(crate) fn chain(c: &mut Criterion) {
    let db = optdb();
    let mode = Mode::fast_run();
    let mut group = c.benchmark_group("fast_run_chain");
    group.sample_size(10);
    for k in SIZES {
        group.bench_with_input(BenchmarkId::from_parameter(k), &k, |b, &k| {
            b.iter_batched(
                || chain_graph(k).expect("chain graph builds"),
                |mut fg| {
                    rewrite_graph_with(&db, &mut fg, &mode).expect("FAST_RUN succeeds");
                    fg
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

pub(crate) fn codegen(c: &mut Criterion) {
    let db = optdb();
    let mode = Mode::fast_run();
    let opts = CompileOptions {
        no_cache: true,
        ..Default::default()
    };
    let mut group = c.benchmark_group("codegen_chain");
    group.sample_size(10);
    for k in SIZES {
        let mut fg = chain_graph(k).expect("chain graph builds");
        rewrite_graph_with(&db, &mut fg, &mode).expect("FAST_RUN succeeds");
        // The largest graphs take over a second per compilation.
        group.measurement_time(Duration::from_secs(if k >= 3000 { 20 } else { 5 }));
        group.bench_with_input(BenchmarkId::from_parameter(k), &fg, |b, fg| {
            b.iter(|| compile(fg, &opts).expect("the rewritten chain compiles"))
        });
    }
    group.finish();
}

pub(crate) fn passes(c: &mut Criterion) {
    const K: usize = 3000;
    let mode = Mode::fast_run();
    let pipeline = optdb().query_named(&mode.as_query(), mode.name());
    let mut group = c.benchmark_group("chain_pass");
    group.sample_size(10);
    let mut fg = chain_graph(K).expect("chain graph builds");
    for entry in pipeline.rewriters() {
        // Features are not cloned: each run attaches what the pass requires.
        let before = fg.clone();
        group.bench_function(BenchmarkId::new(entry.name.as_str(), K), |b| {
            b.iter_batched(
                || before.clone(),
                |mut fg| {
                    entry.rewriter.rewrite(&mut fg).expect("the pass succeeds");
                    fg
                },
                BatchSize::LargeInput,
            )
        });
        entry.rewriter.rewrite(&mut fg).expect("the pass succeeds");
    }
    group.finish();
}

mod group {
    #![allow(missing_docs)]
    criterion::criterion_group!(benches, super::chain, super::codegen, super::passes);
}
use group::benches;
criterion_main!(benches);
