//! FAST_RUN rewriting of the `chain` graph family of `workloads.md`
//! (K = 100 .. 10000 operations). The graph is rebuilt outside the timed
//! region; the optdb is built once.
//!
//! `cargo bench --bench rewrite`; PyTensor 3.0 needs 328 ms / 633 ms /
//! 1.7 s / 8.0 s for K = 100 / 300 / 1000 / 3000 on the build machine.

use criterion::{criterion_main, BatchSize, BenchmarkId, Criterion};
use kiln::rewriting::{optdb, rewrite_graph_with, Mode};
use kiln::workloads::chain_graph;

pub(crate) fn chain(c: &mut Criterion) {
    let db = optdb();
    let mode = Mode::fast_run();
    let mut group = c.benchmark_group("fast_run_chain");
    group.sample_size(10);
    for k in [100usize, 300, 1000, 3000, 10000] {
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

mod group {
    #![allow(missing_docs)]
    criterion::criterion_group!(benches, super::chain);
}
use group::benches;
criterion_main!(benches);
