//! Measures the two transcendental strategies of the element-wise kernels
//! on `exp` over 10^7 f64: the contiguous fast path (block-wise calls into
//! kiln-runtime's AVX2/AVX-512 `kiln_exp_f64`, 256 elements per call) against
//! the per-element path (the C library's `exp` through the reference shim),
//! forced by a stride-2 input.
use kiln::linker::{compile, set_num_threads, Arg, CompileOptions};
use kiln::{vector, DType, FunctionGraph};
use ndarray::{s, ArrayD, IxDyn};

fn main() {
    set_num_threads(1);
    let n = 10_000_000;
    let x = vector("x", DType::F64);
    let fg = FunctionGraph::new(std::slice::from_ref(&x), &[x.exp()]).expect("graph");
    let f = compile(&fg, &CompileOptions::default()).expect("compile");
    let wide = ArrayD::from_shape_fn(IxDyn(&[2 * n]), |i| {
        ((i[0] * 7919) % 1000) as f64 / 250.0 - 2.0
    });
    let contiguous = wide.slice(s![..n]).to_owned().into_dyn();
    let strided = wide.slice(s![..;2]).into_dyn();
    for round in 0..3 {
        let t = std::time::Instant::now();
        f.call(&[Arg::from(&contiguous)]).expect("call");
        let a = t.elapsed();
        let t = std::time::Instant::now();
        f.call(&[Arg::from(strided.view())]).expect("call");
        let b = t.elapsed();
        println!(
            "round {round}: block-wise runtime {:.2} ns/elem, per-element C library {:.2} ns/elem",
            a.as_nanos() as f64 / n as f64,
            b.as_nanos() as f64 / n as f64
        );
    }
}
