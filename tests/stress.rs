//! Stress: graphs of 100,000 nodes (a deep chain and a wide sum) build,
//! rewrite, compile and run without recursion on graph depth (the test
//! threads have the default 2 MiB stack), and give the reference's values.

use kiln::linker::{compile, CompileOptions};
use kiln::rewrites::rewrite_graph;
use kiln::rewriting::Mode;
use kiln::*;
use ndarray::arr1;

const NODES: usize = 100_000;

fn run(ins: &[Tensor], out: Tensor, vals: &[Value]) {
    let reference = FunctionGraph::new(ins, std::slice::from_ref(&out)).unwrap();
    assert!(
        reference.n_nodes() >= NODES,
        "{} nodes",
        reference.n_nodes()
    );
    let want = eval::evaluate(&reference, vals).unwrap();
    let mut fg = FunctionGraph::new(ins, &[out]).unwrap();
    // The O(n) integrity check after every mutation would make this test quadratic.
    fg.set_check_after_mutation(false);
    rewrite_graph(&mut fg, &Mode::fast_run()).unwrap();
    fg.check_integrity().unwrap();
    let f = compile(&fg, &CompileOptions::default()).unwrap();
    let got = f.call_values(vals).unwrap();
    assert!(
        got[0].allclose(&want[0], 1e-9, 1e-12),
        "{:?} vs {:?}",
        got[0],
        want[0]
    );
    drop(f);
    drop(fg);
    drop(reference);
}

#[test]
fn a_deep_chain_of_100k_nodes() {
    let x = vector("x", DType::F64);
    let y = vector("y", DType::F64);
    let mut acc = x.clone();
    // Three nodes per step: tanh, mul, add.
    for _ in 0..NODES.div_ceil(3) {
        acc = &(&acc.tanh() * 0.5) + &y;
    }
    let vals = [
        Value::F64(arr1(&[0.1, -2.0, 3.0]).into_dyn()),
        Value::F64(arr1(&[0.5, 0.25, -1.0]).into_dyn()),
    ];
    run(&[x, y], acc, &vals);
}

#[test]
fn a_wide_sum_of_100k_terms() {
    let x = vector("x", DType::F64);
    let mut terms = Vec::with_capacity(NODES / 2);
    for k in 0..NODES / 2 {
        terms.push((&x * (k as f64 * 1e-5)).sin());
    }
    // A flat left fold: 50k adds over 50k sin(x * c) terms (each 2 nodes).
    let mut acc = terms[0].clone();
    for t in &terms[1..] {
        acc = &acc + t;
    }
    drop(terms);
    let vals = [Value::F64(arr1(&[0.5, -1.5]).into_dyn())];
    run(&[x], acc, &vals);
}
