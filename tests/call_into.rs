//! `call_into`: results written into the caller's output arrays. Every
//! result equals `call`'s bit for bit; an output that is the whole buffer
//! of a node output (inplace chains included) is written by its producing
//! kernel straight into the caller's array (the call allocates nothing for
//! it: `peak_bytes` drops by its size and the array's data pointer is kept);
//! views of inputs, repeated outputs, constants and reductions are copied
//! into the caller's array; mismatched arrays are replaced. `call_into_views`
//! writes mutable views the caller lends (numpy's arrays, for the Python
//! package), which cannot be replaced: a mismatch is an error.

use kiln::linker::{compile, Arg, ArgMut, CompileOptions};
use kiln::rewrites::rewrite_graph;
use kiln::rewriting::Mode;
use kiln::workloads::suite;
use kiln::*;
use ndarray::{ArrayD, IxDyn};

fn ramp(shape: &[usize]) -> ArrayD<f64> {
    let n: usize = shape.iter().product();
    ArrayD::from_shape_vec(
        IxDyn(shape),
        (0..n).map(|i| 0.001 * i as f64 - 0.5).collect(),
    )
    .unwrap()
}

/// Data pointer of a value.
fn ptr(v: &Value) -> usize {
    kiln::with_value!(v, a => a.as_ptr() as usize)
}

/// Arrays of the results' dtypes and shapes, filled with a marker value
/// (so a result that was not written shows).
fn marked_like(vals: &[Value]) -> Vec<Value> {
    vals.iter()
        .map(|v| {
            let shape = IxDyn(v.shape());
            let a = ArrayD::from_elem(shape, 7.0);
            Value::from_f64_array(v.dtype(), a)
        })
        .collect()
}

/// Checks `call_into` against `call` for fresh marked arrays and for reused
/// ones, and that every fitting array keeps its allocation. Returns the
/// peak bytes of `call` and of `call_into`.
fn check_against_call(f: &CompiledFunction, args: &[Arg<'_>], what: &str) -> (usize, usize) {
    let (want, prof) = f.call_profiled(args).unwrap();
    let mut outs = marked_like(&want);
    let before: Vec<usize> = outs.iter().map(ptr).collect();
    let into_prof = f.call_into_profiled(args, &mut outs).unwrap();
    for (k, (g, w)) in outs.iter().zip(&want).enumerate() {
        assert!(g.same_as(w), "{what}: output {k}: {g:?} vs {w:?}");
    }
    let after: Vec<usize> = outs.iter().map(ptr).collect();
    assert_eq!(before, after, "{what}: the caller's arrays are kept");
    // Reused: the arrays hold the previous results; a second call rewrites them.
    f.call_into(args, &mut outs).unwrap();
    for (k, (g, w)) in outs.iter().zip(&want).enumerate() {
        assert!(g.same_as(w), "{what}: second call, output {k}");
    }
    assert_eq!(outs.iter().map(ptr).collect::<Vec<_>>(), before, "{what}");
    (prof.peak_bytes, into_prof.peak_bytes)
}

fn compiled(ins: &[Tensor], outs: &[Tensor], mode: Mode) -> CompiledFunction {
    function(ins, outs).mode(mode).compile().unwrap()
}

#[test]
fn every_suite_workload_in_every_mode_matches_call() {
    let modes = [
        ("fast_run", Mode::fast_run()),
        ("none", Mode::none()),
        ("fast_run-fusion", Mode::fast_run().excluding(&["fusion"])),
        ("fast_run-inplace", Mode::fast_run().excluding(&["inplace"])),
    ];
    for w in suite() {
        let vals = w.generate_scaled(11, 2000);
        for (name, mode) in &modes {
            let mut fg = w.graph().unwrap();
            rewrite_graph(&mut fg, mode).unwrap();
            let f = compile(&fg, &CompileOptions::default()).unwrap();
            let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
            let want = f.call(&args).unwrap();
            let mut outs = marked_like(&want);
            let before: Vec<usize> = outs.iter().map(ptr).collect();
            f.call_into(&args, &mut outs).unwrap();
            assert!(outs[0].same_as(&want[0]), "{} under {name}", w.name);
            assert_eq!(outs.iter().map(ptr).collect::<Vec<_>>(), before);
            f.call_into(&args, &mut outs).unwrap();
            assert!(outs[0].same_as(&want[0]), "{} under {name}, reused", w.name);
        }
    }
}

/// A result handed back with `recycle` lends its block to the next call's
/// result of that dtype and size, which must still write every element: the
/// recycled arrays hold a marker value, and each suite workload's results
/// after recycling equal a fresh call's, bit for bit.
#[test]
fn recycled_results_are_rewritten_entirely() {
    for w in suite() {
        let vals = w.generate_scaled(11, 100);
        for (name, mode) in [("fast_run", Mode::fast_run()), ("none", Mode::none())] {
            let mut fg = w.graph().unwrap();
            rewrite_graph(&mut fg, &mode).unwrap();
            let f = compile(&fg, &CompileOptions::default()).unwrap();
            let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
            let want = f.call(&args).unwrap();
            for _ in 0..2 {
                let marked = marked_like(&want);
                let blocks: Vec<usize> = marked.iter().map(ptr).collect();
                for m in marked {
                    f.recycle(m);
                }
                let got = f.call(&args).unwrap();
                for (k, (g, w_)) in got.iter().zip(&want).enumerate() {
                    assert!(g.same_as(w_), "{} under {name}: output {k}", w.name);
                }
                // A graph of one node allocates nothing but its result, which
                // takes the pooled block of its size.
                let big = |v: &Value| v.len() * v.dtype().size_of() >= 64 << 10;
                if fg.n_nodes() == 1 && got.len() == 1 && big(&got[0]) {
                    assert_eq!(ptr(&got[0]), blocks[0], "{} under {name}", w.name);
                }
            }
        }
    }
}

#[test]
fn a_fused_kernel_writes_straight_into_the_callers_array() {
    // Large enough to be split over threads.
    let n = 300_000;
    let x = vector("x", DType::F64);
    let y = &(&x.exp() * 2.0) + 1.0;
    let f = compiled(std::slice::from_ref(&x), &[y], Mode::fast_run());
    let xa = ramp(&[n]);
    let (call_peak, into_peak) = check_against_call(&f, &[(&xa).into()], "fused");
    assert_eq!(call_peak, 8 * n, "call allocates the result");
    assert_eq!(into_peak, 0, "call_into allocates nothing");
}

#[test]
fn an_inplace_chain_runs_in_the_callers_array() {
    let n = 1000;
    let x = vector("x", DType::F64);
    let y = x.exp().sin().tanh().neg();
    let f = compiled(
        std::slice::from_ref(&x),
        std::slice::from_ref(&y),
        Mode::fast_run().excluding(&["fusion"]),
    );
    assert_eq!(
        f.graph().to_string(),
        "FunctionGraph(neg{inplace}(tanh{inplace}(sin{inplace}(exp(x)))))"
    );
    let xa = ramp(&[n]);
    assert_eq!(
        check_against_call(&f, &[(&xa).into()], "chain"),
        (8 * n, 0),
        "exp allocates its output in the caller's array; the chain overwrites it"
    );
}

#[test]
fn an_intermediate_read_before_it_is_destroyed() {
    // exp(x) feeds a reduction and an inplace add; both are outputs.
    let n = 1000;
    let x = vector("x", DType::F64);
    let t = x.exp();
    let s = t.sum_all();
    let y = &t + 1.0;
    let f = compiled(
        std::slice::from_ref(&x),
        &[s, y],
        Mode::fast_run().excluding(&["fusion"]),
    );
    let xa = ramp(&[n]);
    let (call_peak, into_peak) = check_against_call(&f, &[(&xa).into()], "read then destroyed");
    assert!(into_peak + 8 * n <= call_peak, "{into_peak} vs {call_peak}");
}

#[test]
fn views_of_inputs_and_inputs_themselves_are_copied() {
    let x = matrix("x", DType::F64);
    let xa = ramp(&[3, 5]);
    // A transposed view of the input: copied into the caller's 5x3 array.
    let f = compiled(std::slice::from_ref(&x), &[x.t()], Mode::fast_run());
    assert_eq!(check_against_call(&f, &[(&xa).into()], "x.T").1, 0);
    // The input itself.
    let f = compiled(
        std::slice::from_ref(&x),
        std::slice::from_ref(&x),
        Mode::fast_run(),
    );
    assert_eq!(check_against_call(&f, &[(&xa).into()], "x").1, 0);
}

#[test]
fn repeated_outputs_and_views_of_an_output() {
    let x = matrix("x", DType::F64);
    let y = &x.exp() + 1.0;
    let xa = ramp(&[4, 6]);
    // The same variable twice: computed into the first array, copied into the second.
    let f = compiled(
        std::slice::from_ref(&x),
        &[y.clone(), y.clone()],
        Mode::fast_run(),
    );
    let (_, into_peak) = check_against_call(&f, &[(&xa).into()], "[y, y]");
    assert_eq!(into_peak, 0);
    // An output and its transpose.
    let f = compiled(
        std::slice::from_ref(&x),
        &[y.t(), y.clone()],
        Mode::fast_run(),
    );
    let (_, into_peak) = check_against_call(&f, &[(&xa).into()], "[y.T, y]");
    assert_eq!(into_peak, 0);
}

#[test]
fn constants_reductions_and_dot() {
    let x = matrix("x", DType::F64);
    let xa = ramp(&[40, 30]);
    let c = Tensor::constant(Value::from(ramp(&[2])));
    let f = compiled(std::slice::from_ref(&x), &[c], Mode::fast_run());
    check_against_call(&f, &[(&xa).into()], "constant");
    // A reduction, a fused reduction, a max: copied from their accumulators.
    let outs = [
        x.sum(&[1]).unwrap(),
        (&x * &x).sum_all(),
        x.exp().max(&[0]).unwrap(),
    ];
    let f = compiled(std::slice::from_ref(&x), &outs, Mode::fast_run());
    check_against_call(&f, &[(&xa).into()], "reductions");
    // GEMM writes into the caller's array.
    let f = compiled(
        std::slice::from_ref(&x),
        &[dot(&x, &x.t()).unwrap()],
        Mode::fast_run(),
    );
    let (call_peak, into_peak) = check_against_call(&f, &[(&xa).into()], "dot");
    assert_eq!(
        call_peak - into_peak,
        8 * 40 * 40,
        "{call_peak} {into_peak}"
    );
}

#[test]
fn mismatched_arrays_are_replaced_and_strided_ones_written() {
    let x = matrix("x", DType::F64);
    let y = &x.exp() + 1.0;
    let f = compiled(std::slice::from_ref(&x), &[y.clone(), y], Mode::fast_run());
    let xa = ramp(&[3, 4]);
    let want = f.call(&[(&xa).into()]).unwrap();
    // Wrong shape, wrong dtype: replaced by the results.
    let mut outs = vec![
        Value::from(ArrayD::<f64>::zeros(IxDyn(&[4, 3]))),
        Value::from(ArrayD::<f32>::zeros(IxDyn(&[3, 4]))),
    ];
    f.call_into(&[(&xa).into()], &mut outs).unwrap();
    assert!(outs[0].same_as(&want[0]) && outs[1].same_as(&want[1]));
    // A transposed (not standard-layout) array of the right shape keeps its
    // allocation and layout and receives the values.
    let t = ArrayD::<f64>::zeros(IxDyn(&[4, 3])).reversed_axes();
    let mut outs = vec![
        Value::from(t),
        Value::from(ArrayD::<f64>::zeros(IxDyn(&[3, 4]))),
    ];
    let before: Vec<usize> = outs.iter().map(ptr).collect();
    f.call_into(&[(&xa).into()], &mut outs).unwrap();
    assert!(outs[0].same_as(&want[0]) && outs[1].same_as(&want[1]));
    assert_eq!(outs.iter().map(ptr).collect::<Vec<_>>(), before);
    match &outs[0] {
        Value::F64(a) => assert_eq!(a.strides(), &[1, 3]),
        _ => unreachable!("f64"),
    }
}

#[test]
fn the_number_of_output_arrays_is_checked() {
    let x = vector("x", DType::F64);
    let f = compiled(std::slice::from_ref(&x), &[x.exp()], Mode::fast_run());
    let xa = ramp(&[3]);
    for k in [0, 2] {
        let mut outs = vec![Value::from(ArrayD::<f64>::zeros(IxDyn(&[3]))); k];
        let e = f.call_into(&[(&xa).into()], &mut outs).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("expected 1 output buffers, got {k}")),
            "{e}"
        );
    }
    // Input errors are reported as by `call`, and leave the arrays alone.
    let mut outs = vec![Value::from(ArrayD::<f64>::from_elem(IxDyn(&[3]), 7.0))];
    let e = f.call_into(&[], &mut outs).unwrap_err();
    assert!(e.to_string().contains("expected 1 inputs, got 0"), "{e}");
    assert!(outs[0].same_as(&Value::from(ArrayD::<f64>::from_elem(IxDyn(&[3]), 7.0))));
}

#[test]
fn a_mutable_input_and_a_callers_output_array() {
    let n = 1000;
    let x = vector("x", DType::F64);
    let y = &(&x.exp() * 2.0) + 1.0;
    let f = function(&[x], &[y]).mutable_inputs(&[0]).compile().unwrap();
    assert!(f.graph().to_string().ends_with("}{inplace}(x))"));
    let orig = ramp(&[n]);
    let want = f.call(&[(&orig).into()]).unwrap();
    // Lent mutably: the kernel writes into x, which is then copied into the output array.
    let mut xa = orig.clone();
    let mut outs = marked_like(&want);
    let p = ptr(&outs[0]);
    f.call_mut_into(&mut [(&mut xa).into()], &mut outs).unwrap();
    assert!(outs[0].same_as(&want[0]));
    assert!(
        Value::F64(xa.clone()).same_as(&want[0]),
        "x was overwritten"
    );
    assert_eq!(ptr(&outs[0]), p);
    // Lent read-only: x is kept.
    let mut outs = marked_like(&want);
    f.call_mut_into(&mut [ArgMut::from(&orig)], &mut outs)
        .unwrap();
    assert!(outs[0].same_as(&want[0]));
    assert!(Value::F64(orig.clone()).same_as(&Value::F64(ramp(&[n]))));
}

#[test]
fn call_into_views_writes_the_callers_views_or_refuses() {
    let x = matrix("x", DType::F64);
    let y = &x.exp() + 1.0;
    let f = compiled(
        std::slice::from_ref(&x),
        &[y.clone(), x.sum(&[1]).unwrap()],
        Mode::fast_run(),
    );
    let xa = ramp(&[3, 4]);
    let want = f.call(&[(&xa).into()]).unwrap();
    // A standard-layout view (written by the kernel) and a strided one (copied into).
    let mut a = ArrayD::<f64>::from_elem(IxDyn(&[3, 4]), 7.0);
    let mut b = ArrayD::<f64>::from_elem(IxDyn(&[3, 2]), 7.0);
    let a_ptr = a.as_ptr() as usize;
    {
        let mut outs: Vec<ArgMut<'_>> = vec![
            a.view_mut().into(),
            b.slice_mut(ndarray::s![.., 0]).into_dyn().into(),
        ];
        f.call_into_views(&[(&xa).into()], &mut outs).unwrap();
    }
    assert!(Value::from(a.clone()).same_as(&want[0]));
    assert_eq!(a.as_ptr() as usize, a_ptr);
    let col: ArrayD<f64> = b.slice(ndarray::s![.., 0]).to_owned().into_dyn();
    assert!(Value::from(col).same_as(&want[1]));
    assert!(b.slice(ndarray::s![.., 1]).iter().all(|&v| v == 7.0));
    // A view cannot be replaced: a wrong dtype or shape is an error naming the output.
    let mut wrong = ArrayD::<f32>::zeros(IxDyn(&[3, 4]));
    let mut right = ArrayD::<f64>::zeros(IxDyn(&[3]));
    let mut outs: Vec<ArgMut<'_>> = vec![wrong.view_mut().into(), right.view_mut().into()];
    let e = f.call_into_views(&[(&xa).into()], &mut outs).unwrap_err();
    assert!(
        e.to_string()
            .contains("output array 0 is f32 of shape [3, 4]"),
        "{e}"
    );
    let mut short = ArrayD::<f64>::zeros(IxDyn(&[2]));
    let mut a = ArrayD::<f64>::zeros(IxDyn(&[3, 4]));
    let mut outs: Vec<ArgMut<'_>> = vec![a.view_mut().into(), short.view_mut().into()];
    let e = f.call_into_views(&[(&xa).into()], &mut outs).unwrap_err();
    assert!(
        e.to_string().contains("output array 1 is f64 of shape [2]"),
        "{e}"
    );
    // Read-only outputs and a wrong number of outputs are refused before the call.
    let ro = ArrayD::<f64>::zeros(IxDyn(&[3, 4]));
    let mut c = ArrayD::<f64>::zeros(IxDyn(&[3]));
    let mut outs: Vec<ArgMut<'_>> = vec![(&ro).into(), c.view_mut().into()];
    let e = f.call_into_views(&[(&xa).into()], &mut outs).unwrap_err();
    assert!(
        e.to_string().contains("output array 0 is lent read-only"),
        "{e}"
    );
    let e = f.call_into_views(&[(&xa).into()], &mut []).unwrap_err();
    assert!(
        e.to_string().contains("expected 2 output arrays, got 0"),
        "{e}"
    );
}
