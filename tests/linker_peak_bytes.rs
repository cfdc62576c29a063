//! The linker's accounting of intermediate buffer bytes
//! (`RunProfile::peak_bytes`: every buffer a call allocates, results
//! included; not the caller's inputs or constants), and what the inplace
//! pass saves on it. Peak bytes are deterministic, so these are exact checks.

use kiln::graph::Client;
use kiln::linker::{compile, CompileOptions};
use kiln::rewrites::rewrite_graph;
use kiln::rewriting::Mode;
use kiln::workloads::suite;
use kiln::{function, vector, DType, FunctionGraph, Tensor, Value};
use ndarray::{ArrayD, IxDyn};

fn xval(n: usize) -> Value {
    Value::from(ArrayD::from_elem(IxDyn(&[n]), 0.5f64))
}

/// Peak bytes of the graph linked as given (no rewriting).
fn peak(fg: &FunctionGraph, n: usize) -> usize {
    let f = compile(fg, &CompileOptions::default()).unwrap();
    f.call_profiled(&[(&xval(n)).into()]).unwrap().1.peak_bytes
}

/// Peak bytes under FAST_RUN without fusion, with or without inplace.
fn peak_unfused(x: &Tensor, y: &Tensor, n: usize, inplace: bool) -> usize {
    let mut mode = Mode::fast_run().excluding(&["fusion"]);
    if !inplace {
        mode = mode.excluding(&["inplace"]);
    }
    let f = function(std::slice::from_ref(x), std::slice::from_ref(y))
        .mode(mode)
        .compile()
        .unwrap();
    f.call_profiled(&[(&xval(n)).into()]).unwrap().1.peak_bytes
}

#[test]
fn peak_bytes_counts_live_intermediates_and_the_result() {
    let n = 1000;
    let x = vector("x", DType::F64);
    // Linked as given, no node is inplace: exp(x) and the sum both hold a buffer.
    let one = FunctionGraph::new(std::slice::from_ref(&x), &[&x.exp() + 1.0]).unwrap();
    assert_eq!(peak(&one, n), 16 * n);
    // exp(x), sin(x) and their product are alive together.
    let two = FunctionGraph::new(std::slice::from_ref(&x), &[&x.exp() * &x.sin()]).unwrap();
    assert_eq!(peak(&two, n), 24 * n);
    // The input alone is not counted: identity-like graphs allocate only the result.
    let neg = FunctionGraph::new(std::slice::from_ref(&x), &[x.neg()]).unwrap();
    assert_eq!(peak(&neg, n), 8 * n);
}

#[test]
fn inplace_nodes_write_into_the_buffer_they_destroy() {
    let n = 1000;
    let x = vector("x", DType::F64);
    // add{inplace} overwrites exp(x): one buffer instead of two.
    let y = &x.exp() + 1.0;
    assert_eq!(peak_unfused(&x, &y, n, true), 8 * n);
    assert_eq!(peak_unfused(&x, &y, n, false), 16 * n);
    // mul{inplace} overwrites exp(x) or sin(x): two buffers instead of three.
    let y = &x.exp() * &x.sin();
    assert_eq!(peak_unfused(&x, &y, n, true), 16 * n);
    assert_eq!(peak_unfused(&x, &y, n, false), 24 * n);
}

/// The intermediates of a rewritten graph (node outputs that are not
/// results), and how many of them hold a buffer of their own (not views).
fn intermediates(fg: &FunctionGraph) -> (usize, usize) {
    let (mut all, mut buffers) = (0, 0);
    for n in fg.node_ids() {
        let node = fg.node(n);
        for (o, &v) in node.outputs.iter().enumerate() {
            if fg.clients(v).iter().any(|c| matches!(c, Client::Output(_))) {
                continue;
            }
            all += 1;
            if !node.op.view_map().iter().any(|&(vo, _)| vo as usize == o) {
                buffers += 1;
            }
        }
    }
    (all, buffers)
}

/// FAST_RUN workloads, fused or not, whose peak is the full-size temporary
/// a reduction reads (sigmoid_xent: the per-element loss before `sum`, one
/// `sigmoid_binary_crossentropy` node when unfused). No
/// inplace rewrite can remove
/// that buffer (a reduction's output is smaller than its input, so it
/// cannot overwrite it), and their inplace nodes act on the small buffers
/// next to it: inplace leaves their peak unchanged.
const PEAK_IS_A_REDUCTION_INPUT: &[&str] = &["sigmoid_xent"];

#[test]
fn inplace_lowers_the_peak_of_every_suite_workload_with_intermediates() {
    let opts = CompileOptions {
        no_cache: true,
        ..Default::default()
    };
    let mut strict = 0;
    for w in suite() {
        let values = w.generate_scaled(2024, 100);
        let args: Vec<kiln::linker::Arg<'_>> = values.iter().map(Into::into).collect();
        for fused in [true, false] {
            let base = if fused {
                Mode::fast_run()
            } else {
                Mode::fast_run().excluding(&["fusion"])
            };
            let mut peaks = Vec::new();
            let mut results = Vec::new();
            let mut counts = Vec::new();
            for mode in [base.clone(), base.excluding(&["inplace"])] {
                let mut fg = w.graph().unwrap();
                rewrite_graph(&mut fg, &mode).unwrap();
                let f = compile(&fg, &opts).unwrap();
                let (out, prof) = f.call_profiled(&args).unwrap();
                peaks.push(prof.peak_bytes);
                results.push(out);
                counts.push(intermediates(&fg));
            }
            let what = format!("{} (fused: {fused}): peaks {peaks:?}", w.name);
            assert_eq!(counts[0], counts[1], "{what}");
            assert!(results[0][0].same_as(&results[1][0]), "{what}");
            assert!(peaks[0] <= peaks[1], "inplace costs memory: {what}");
            // More than one intermediate, one of which has a buffer a later
            // node can overwrite (views of the inputs have none).
            let (all, buffers) = counts[0];
            let exempt = PEAK_IS_A_REDUCTION_INPUT.contains(&w.name);
            if all > 1 && buffers >= 1 && !exempt {
                assert!(peaks[0] < peaks[1], "inplace saves nothing: {what}");
                strict += 1;
            }
        }
    }
    // mlp fused; poly, gauss, sigmoid_xent, outer_tanh, mlp, stencil
    // unfused (logsumexp is one LogSumExp node, fused or not).
    assert_eq!(strict, 6);
}
