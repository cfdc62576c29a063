//! Sibling fusion through the whole pipeline: FAST_RUN merges element-wise
//! outputs that read a common input into one multi-output Composite (one
//! pass over the input), the JIT computes what the reference evaluator
//! computes on the un-rewritten graph, and excluding `fusion` turns it off.
mod jit_support;
use jit_support::*;
use kiln::linker::Arg;
use kiln::rewriting::Mode;
use kiln::{eval, function, matrix, vector, DType, FunctionGraph, Tensor, Value};

fn composites(f: &kiln::CompiledFunction) -> usize {
    let g = f.graph();
    g.node_ids()
        .filter(|&n| g.node(n).op.name().starts_with("Composite"))
        .count()
}

fn check_fast_run(inputs: &[Tensor], outputs: &[Tensor], vals: &[Value], nodes: usize) {
    let f = function(inputs, outputs)
        .mode(Mode::fast_run())
        .compile()
        .unwrap();
    assert_eq!(f.graph().n_nodes(), nodes, "{}", f.graph());
    let want = eval::evaluate(&FunctionGraph::new(inputs, outputs).unwrap(), vals).unwrap();
    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
    let got = f.call(&args).unwrap();
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_values(g, w, 2, &format!("output {k}"));
    }
}

#[test]
fn outputs_of_one_input_share_one_loop() {
    let x = vector("x", DType::F64);
    let outs = [x.sin(), (&x.cos() * 2.0), (&x * &x + 1.0).sqrt()];
    let vx = Value::from(rand_f64(&[200_003], 5, -10.0, 10.0));
    check_fast_run(
        std::slice::from_ref(&x),
        &outs,
        std::slice::from_ref(&vx),
        1,
    );
    let f = function(std::slice::from_ref(&x), &outs)
        .mode(Mode::fast_run())
        .compile()
        .unwrap();
    assert_eq!(composites(&f), 1, "{}", f.graph());
    let unfused = function(std::slice::from_ref(&x), &outs)
        .mode(Mode::fast_run().excluding(&["fusion"]))
        .compile()
        .unwrap();
    assert!(unfused.graph().n_nodes() > 1, "{}", unfused.graph());
}

#[test]
fn siblings_over_a_matrix_and_a_broadcast_row() {
    let m = matrix("m", DType::F64);
    let r = vector("r", DType::F64);
    let rr = r.expand_dims(0).unwrap();
    // Both read m, which fixes both dimensions: one loop.
    let a = (&m - &rr).exp();
    let b = (&m * &rr).tanh();
    let vm = Value::from(rand_f64(&[300, 257], 6, -3.0, 3.0));
    let vr = Value::from(rand_f64(&[257], 7, -1.0, 1.0));
    check_fast_run(&[m.clone(), r.clone()], &[a, b], &[vm, vr], 2);
}

#[test]
fn results_that_feed_each_other_stay_apart() {
    let x = vector("x", DType::F64);
    let e = x.exp();
    let s = &x + &e.sum_all();
    let vx = Value::from(rand_f64(&[1000], 8, -1.0, 1.0));
    check_fast_run(
        std::slice::from_ref(&x),
        &[e, s],
        std::slice::from_ref(&vx),
        4,
    );
}
