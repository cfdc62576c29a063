#![allow(missing_docs)] // criterion_group! generates undocumented items
//! Run time of the workload suite (`shared/workloads.md`) built with the
//! tensor API and compiled un-rewritten, and compile time of the `chain`
//! graph family. Quote medians and ratios: the machines are noisy.

use criterion::{criterion_group, criterion_main, Criterion};
use kiln::linker::{compile, Arg, CompileOptions};
use kiln::{dot, matrix, vector, DType, FunctionGraph, Tensor, Value};
use ndarray::{ArrayD, IxDyn};

fn normal(n: &[usize], seed: u64) -> ArrayD<f64> {
    // Box-Muller on a small LCG: deterministic standard normals.
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let len: usize = n.iter().product();
    let v: Vec<f64> = (0..len)
        .map(|_| (-2.0 * next().ln()).sqrt() * (std::f64::consts::TAU * next()).cos())
        .collect();
    ArrayD::from_shape_vec(IxDyn(n), v).unwrap()
}

fn uniform(n: &[usize], seed: u64, lo: f64, hi: f64) -> ArrayD<f64> {
    normal(n, seed).mapv(|x| lo + (hi - lo) * (0.5 + 0.5 * (x / 4.0).tanh()))
}

/// The workloads: (name, inputs, outputs, input values).
pub fn workloads(n: usize) -> Vec<(&'static str, Vec<Tensor>, Tensor, Vec<Value>)> {
    let x = vector("x", DType::F64);
    let xv = || Value::from(normal(&[n], 1));
    let mut w = Vec::new();
    w.push((
        "softplus",
        vec![x.clone()],
        (1.0 + x.exp()).log(),
        vec![xv()],
    ));
    let poly = 2.0 * x.powf(3.0) - 3.0 * x.powf(2.0) + &x - 1.0;
    w.push(("poly", vec![x.clone()], poly, vec![xv()]));
    let gauss =
        (-((&x - 0.5).powf(2.0)) / (2.0 * 1.5f64.powi(2))).exp() / (1.5 * 2.5066282746310002);
    w.push(("gauss", vec![x.clone()], gauss, vec![xv()]));
    let t = vector("t", DType::F64);
    let z = vector("z", DType::F64);
    let xent = (-(&t * z.sigmoid().log() + (1.0 - &t) * (1.0 - z.sigmoid()).log()))
        .mean(None, false)
        .unwrap();
    let tv = Value::from(uniform(&[n], 2, 0.0, 1.0).mapv(|v| v.round()));
    w.push((
        "sigmoid_xent",
        vec![t, z],
        xent,
        vec![tv, Value::from(normal(&[n], 3))],
    ));
    let m = matrix("X", DType::F64);
    let lse = m.exp().sum(&[1]).unwrap().log();
    w.push((
        "logsumexp",
        vec![m],
        lse,
        vec![Value::from(normal(&[1000, 2000], 4))],
    ));
    let u = vector("u", DType::F64);
    let v = vector("v", DType::F64);
    let ot = (&u.expand_dims(1).unwrap() + &v.expand_dims(0).unwrap()).tanh();
    w.push((
        "outer_tanh",
        vec![u, v],
        ot,
        vec![
            Value::from(normal(&[2000], 5)),
            Value::from(normal(&[2000], 6)),
        ],
    ));
    let a = matrix("A", DType::F64);
    let wm = matrix("W", DType::F64);
    let b = vector("b", DType::F64);
    let mlp = (&dot(&a, &wm).unwrap() + &b).tanh();
    w.push((
        "mlp",
        vec![a, wm, b],
        mlp,
        vec![
            Value::from(normal(&[512, 512], 7)),
            Value::from(normal(&[512, 512], 8)),
            Value::from(normal(&[512], 9)),
        ],
    ));
    let (ca, cb, cc) = (
        vector("a", DType::F64),
        vector("b", DType::F64),
        vector("c", DType::F64),
    );
    let canon = &(&(&(&ca * &cb) / &(&cb * &cc)) * &(&cc / &ca)) * &x;
    w.push((
        "canon",
        vec![ca, cb, cc, x.clone()],
        canon,
        vec![
            Value::from(uniform(&[n], 10, 0.5, 1.5)),
            Value::from(uniform(&[n], 11, 0.5, 1.5)),
            Value::from(uniform(&[n], 12, 0.5, 1.5)),
            xv(),
        ],
    ));
    w
}

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
    for (name, ins, out, vals) in workloads(n) {
        let fg = FunctionGraph::new(&ins, &[out]).unwrap();
        let f = compile(&fg, &CompileOptions::default()).unwrap();
        let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
        g.bench_function(name, |b| b.iter(|| f.call(&args).unwrap()));
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

criterion_group!(benches, run_time, compile_time);
criterion_main!(benches);
