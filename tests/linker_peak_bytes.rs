//! The linker's accounting of call-owned buffer bytes (`RunProfile::peak_bytes`).

use kiln::linker::{compile, CompileOptions};
use kiln::{vector, DType, FunctionGraph, Value};
use ndarray::{ArrayD, IxDyn};

fn peak(fg: &FunctionGraph, n: usize) -> usize {
    let f = compile(fg, &CompileOptions::default()).unwrap();
    let x = Value::from(ArrayD::from_elem(IxDyn(&[n]), 0.5f64));
    f.call_profiled(&[(&x).into()]).unwrap().1.peak_bytes
}

#[test]
fn peak_bytes_counts_live_intermediates_and_the_result() {
    let n = 1000;
    let x = vector("x", DType::F64);
    // exp(x) then add: add reuses the dying exp buffer, so one buffer at a time.
    let one = FunctionGraph::new(std::slice::from_ref(&x), &[&x.exp() + 1.0]).unwrap();
    assert_eq!(peak(&one, n), 8 * n);
    // exp(x) and sin(x) are alive together before mul reuses one of them.
    let two = FunctionGraph::new(std::slice::from_ref(&x), &[&x.exp() * &x.sin()]).unwrap();
    assert_eq!(peak(&two, n), 16 * n);
    // The input alone is not counted: identity-like graphs allocate only the result.
    let neg = FunctionGraph::new(std::slice::from_ref(&x), &[x.neg()]).unwrap();
    assert_eq!(peak(&neg, n), 8 * n);
}
