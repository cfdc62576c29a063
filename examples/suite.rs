//! Times kiln FAST_RUN on the workload suite of `shared/workloads.md`:
//! compile time (rewrite + codegen, cache bypassed, median of 9) and run time
//! (median of 7 calls after 2 warm-up calls; `KILN_REPS` changes the 7), in ms;
//! `kiln_into_ms` is the median of as many `call_into` calls reusing the
//! warm-up results as output arrays, each timed right after a plain call. Compare with
//! `benches/python_baseline.py` run in the same session.
//!
//! `cargo run --release --example suite [-- name ...]`; `KILN_BENCH_N`
//! overrides the 10^7 vector length, `KILN_THREADS` the thread count,
//! `KILN_PROFILE=1` prints per-node times.

#[path = "../benches/suite_data.rs"]
mod suite_data;

use kiln::function;
use kiln::linker::{Arg, CompileOptions};
use kiln::rewriting::Mode;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> kiln::Result<()> {
    let n: usize = std::env::var("KILN_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let only: Vec<String> = std::env::args().skip(1).collect();
    if let Some(t) = std::env::var("KILN_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        kiln::linker::set_num_threads(t);
    }
    println!("workload,kiln_ms,compile_ms,rewrite_ms,codegen_ms,kiln_into_ms");
    for w in suite_data::suite(n) {
        if !only.is_empty() && !only.iter().any(|o| o == w.name) {
            continue;
        }
        let opts = CompileOptions {
            no_cache: true,
            ..Default::default()
        };
        let mut ct = Vec::new();
        let mut rt = Vec::new();
        let mut gt = Vec::new();
        let mut f = None;
        for _ in 0..9 {
            let t = Instant::now();
            let g = function(&w.inputs, std::slice::from_ref(&w.output))
                .mode(Mode::fast_run())
                .options(opts)
                .compile()?;
            ct.push(t.elapsed().as_secs_f64() * 1e3);
            let p = g.profile();
            rt.push(p.rewriter_time.as_secs_f64() * 1e3);
            gt.push(p.linker_time.as_secs_f64() * 1e3);
            f = Some(g);
        }
        let f = f.expect("compiled");
        let args: Vec<Arg<'_>> = w.values.iter().map(Arg::from).collect();
        let mut reused = f.call(&args)?;
        std::hint::black_box(f.call(&args)?);
        let reps: usize = std::env::var("KILN_REPS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(7);
        let mut times = Vec::new();
        let mut into_times = Vec::new();
        for _ in 0..reps {
            let t = Instant::now();
            std::hint::black_box(f.call(&args)?);
            times.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            f.call_into(&args, &mut reused)?;
            std::hint::black_box(&reused);
            into_times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        if std::env::var("KILN_PROFILE").is_ok() {
            let (_, prof) = f.call_profiled(&args)?;
            for (node, t) in &prof.nodes {
                eprintln!("  {:8.3} ms  {node}", t.as_secs_f64() * 1e3);
            }
        }
        if std::env::var("KILN_SMAPS").is_ok() {
            let out = f.call(&args)?;
            let sm = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
            let huge = sm
                .lines()
                .find(|l| l.starts_with("AnonHugePages"))
                .unwrap_or("");
            eprintln!("{}: holding output, {huge}", w.name);
            drop(out);
        }
        println!(
            "{},{:.2},{:.3},{:.3},{:.3},{:.2}",
            w.name,
            median(times),
            median(ct),
            median(rt),
            median(gt),
            median(into_times)
        );
    }
    Ok(())
}
