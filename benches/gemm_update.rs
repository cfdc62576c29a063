//! Run time of `z + dot(x, y)` with and without the Gemm rewrite, for a
//! protected `z` (`call`) and for a `z` declared mutable and lent mutably
//! (`call_mut`, where `Gemm{inplace}` accumulates straight into it):
//!
//! * `gemm_update/<shape>/before`: FAST_RUN without the `blas` tag (a Dot,
//!   then an inplace add onto its buffer), `call`;
//! * `.../gemm`: FAST_RUN (`Gemm{no_inplace}`: z copied, then GEMM onto it);
//! * `.../before_mutable`, `.../gemm_mutable`: the same with z mutable.
//!
//! `cargo bench --bench gemm_update` (about a minute).

mod support;

use criterion::{criterion_main, Criterion};
use kiln::linker::{Arg, ArgMut};
use kiln::rewriting::Mode;
use kiln::*;
use support::ramp;

pub(crate) fn bench(c: &mut Criterion) {
    // (m, k, n): a cheap product where the update pass matters, and a square one.
    for (m, k, n) in [(2000, 32, 2000), (500, 500, 500)] {
        let mut group = c.benchmark_group(format!("gemm_update/{m}x{k}x{n}"));
        group.sample_size(20);
        let (z, x, y) = (
            matrix("z", DType::F64),
            matrix("x", DType::F64),
            matrix("y", DType::F64),
        );
        let e = &z + &dot(&x, &y).expect("dot");
        let (zv, xv, yv) = (ramp(&[m, n], 0.1), ramp(&[m, k], 0.2), ramp(&[k, n], 0.3));
        let modes = [
            ("before", Mode::fast_run().excluding(&["blas"])),
            ("gemm", Mode::fast_run()),
        ];
        for (name, mode) in &modes {
            let f = function(&[z.clone(), x.clone(), y.clone()], std::slice::from_ref(&e))
                .mode(mode.clone())
                .compile()
                .expect("compiles");
            let args: Vec<Arg<'_>> = vec![(&zv).into(), (&xv).into(), (&yv).into()];
            group.bench_function(*name, |b| b.iter(|| f.call(&args).expect("runs")));
            let f = function(&[z.clone(), x.clone(), y.clone()], std::slice::from_ref(&e))
                .mode(mode.clone())
                .mutable_inputs(&[0])
                .compile()
                .expect("compiles");
            let mut zm = zv.clone();
            group.bench_function(format!("{name}_mutable"), |b| {
                b.iter(|| {
                    let mut args: Vec<ArgMut<'_>> =
                        vec![(&mut zm).into(), (&xv).into(), (&yv).into()];
                    f.call_mut(&mut args).expect("runs")
                })
            });
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
