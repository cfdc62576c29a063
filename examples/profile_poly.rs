//! Per-node run-time profile of the un-rewritten `poly` and `softplus`
//! workloads (10^7 elements by default; `KILN_N` overrides).
use kiln::linker::{compile, Arg, CompileOptions};
use kiln::{vector, DType, FunctionGraph, Value};
use ndarray::{ArrayD, IxDyn};

fn main() {
    let n: usize = std::env::var("KILN_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let x = vector("x", DType::F64);
    let v = Value::from(ArrayD::from_shape_fn(IxDyn(&[n]), |i| {
        ((i[0] * 7919) % 1000) as f64 / 250.0 - 2.0
    }));
    let graphs = [
        ("poly", 2.0 * x.powf(3.0) - 3.0 * x.powf(2.0) + &x - 1.0),
        ("softplus", (1.0 + x.exp()).log()),
    ];
    for (name, out) in graphs {
        let fg = FunctionGraph::new(std::slice::from_ref(&x), &[out]).expect("graph");
        let f = compile(&fg, &CompileOptions::default()).expect("compile");
        println!(
            "{name}: compile lower {:?} codegen {:?}, {} kernels",
            f.profile.lower, f.profile.codegen, f.profile.n_kernels
        );
        for _ in 0..2 {
            let (_, prof) = f.call_profiled(&[Arg::from(&v)]).expect("call");
            println!("  total {:?}", prof.total);
            for (node, t) in &prof.nodes {
                println!("    {node:<24} {t:?}");
            }
        }
    }
}
