//! Run time of `tanh(A @ W + b)` with its GEMM epilogue (the product and
//! its map as one step, in blocks of rows when C is larger than the
//! last-level cache) and without (`CodegenOptions::epilogues` off: the
//! whole product, then a second pass for the map):
//!
//! * `gemm_epilogue/4096x32x4096/{fused,two_passes}`: a 128 MB result from a
//!   cheap product, where the second pass over memory matters;
//! * `gemm_epilogue/512x512x512/...`: the suite's mlp, whose 2 MB result
//!   stays in the cache (it runs whole either way: the two should agree).
//!
//! `cargo bench --bench gemm_epilogue` (about a minute).

mod support;

use criterion::{criterion_main, Criterion};
use kiln::linker::{Arg, CodegenOptions, CompileOptions};
use kiln::*;
use support::ramp;

pub(crate) fn bench(c: &mut Criterion) {
    for (m, k, n) in [(4096, 32, 4096), (512, 512, 512)] {
        let mut group = c.benchmark_group(format!("gemm_epilogue/{m}x{k}x{n}"));
        group.sample_size(10);
        let (a, w, b) = (
            matrix("A", DType::F64),
            matrix("W", DType::F64),
            vector("b", DType::F64),
        );
        let e = (&dot(&a, &w).expect("dot") + &b).tanh();
        let (av, wv, bv) = (ramp(&[m, k], 0.1), ramp(&[k, n], 0.2), ramp(&[n], 0.3));
        for (name, epilogues) in [("fused", true), ("two_passes", false)] {
            let options = CompileOptions {
                codegen: CodegenOptions {
                    epilogues,
                    ..Default::default()
                },
                ..Default::default()
            };
            let f = function(&[a.clone(), w.clone(), b.clone()], std::slice::from_ref(&e))
                .options(options)
                .compile()
                .expect("compiles");
            let args: Vec<Arg<'_>> = vec![(&av).into(), (&wv).into(), (&bv).into()];
            group.bench_function(name, |bch| bch.iter(|| f.call(&args).expect("runs")));
        }
        group.finish();
    }
}

mod group {
    #![allow(missing_docs)]
    criterion::criterion_group!(benches, super::bench);
}
use group::benches;
criterion_main!(benches);
