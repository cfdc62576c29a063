//! `sigmoid_binary_crossentropy(z, t)` end to end: the JIT (the runtime's
//! block function on the contiguous path, the per-element shim elsewhere)
//! against the reference evaluator, f64 and f32, at lengths around the
//! vector path's boundaries, with special logits; its sum; its gradient
//! against the analytic one; and the suite's expression compiled to it.
mod jit_support;

use jit_support::{assert_close, assert_values};
use kiln::linker::{compile, Arg, CompileOptions};
use kiln::rewriting::Mode;
use kiln::{eval, function, DType, FunctionGraph, Tensor, Value};
use ndarray::{ArrayD, IxDyn};

/// Logits over [-40, 40] with ±0, ±inf, NaN, ±708.5 (past the fast exp's
/// range) and ±745 (a subnormal e^-|z|) mixed in, and targets in [0, 1]
/// (0 and 1 exactly every few elements). Targets stay in [0, 1], the
/// op's domain: outside it the loss is a difference and its rounding is
/// amplified like the expression's it replaces.
fn inputs(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let zs = jit_support::rand_f64(&[n], seed, -40.0, 40.0);
    let ts = jit_support::rand_f64(&[n], seed + 1, 0.0, 1.0);
    let specials = [
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        708.5,
        -708.5,
        745.0,
        -745.0,
        1e-300,
    ];
    let mut z: Vec<f64> = zs.iter().copied().collect();
    let mut t: Vec<f64> = ts.iter().copied().collect();
    for i in 0..n {
        if i % 5 == 2 {
            z[i] = specials[(i / 5) % specials.len()];
        }
        if i % 3 == 1 {
            t[i] = (i % 2) as f64;
        }
    }
    (z, t)
}

fn value(dtype: DType, v: &[f64]) -> Value {
    Value::from_f64_array(
        dtype,
        ArrayD::from_shape_vec(IxDyn(&[v.len()]), v.to_vec()).unwrap(),
    )
}

fn vars(dtype: DType) -> (Tensor, Tensor) {
    (
        kiln::tensor("z", dtype, &[None]),
        kiln::tensor("t", dtype, &[None]),
    )
}

#[test]
fn the_jit_matches_the_reference_on_every_path() {
    for dtype in [DType::F64, DType::F32] {
        let (z, t) = vars(dtype);
        let loss = kiln::sigmoid_binary_crossentropy(&z, &t).unwrap();
        let total = loss.sum_all();
        let fg = FunctionGraph::new(&[z, t], &[loss, total]).unwrap();
        let f = compile(&fg, &CompileOptions::default()).unwrap();
        for n in [1, 7, 15, 16, 17, 127, 128, 129, 1000, 4099] {
            let (zv, tv) = inputs(n, n as u64);
            let vals = [value(dtype, &zv), value(dtype, &tv)];
            let want = eval::evaluate(&fg, &vals).unwrap();
            let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
            let got = f.call(&args).unwrap();
            let what = format!("{dtype}, n = {n}");
            // f64: the runtime's exp and log1p against std's (<= 1 ULP
            // each, non-negative terms); f32: rounded once from f64.
            let ulps = if dtype == DType::F64 { 2 } else { 1 };
            assert_values(&got[0], &want[0], ulps, &what);
            assert_close(&got[1], &want[1], 1e-13, &format!("{what}, sum"));
        }
    }
}

#[test]
fn specials_follow_the_expression() {
    let (z, t) = vars(DType::F64);
    let loss = kiln::sigmoid_binary_crossentropy(&z, &t).unwrap();
    let fg = FunctionGraph::new(&[z, t], &[loss]).unwrap();
    let f = compile(&fg, &CompileOptions::default()).unwrap();
    let inf = f64::INFINITY;
    // (z, t, loss): exact tails, 0·inf = NaN where the log-sigmoid
    // expression is NaN too, NaN in, NaN out.
    let cases = [
        (inf, 0.0, inf),
        (inf, 1.0, f64::NAN),
        (-inf, 1.0, inf),
        (-inf, 0.0, f64::NAN),
        (800.0, 1.0, 0.0),
        (800.0, 0.0, 800.0),
        (-800.0, 0.0, 0.0),
        (40.0, 1.0, (-40.0f64).exp()),
        (0.0, 0.5, std::f64::consts::LN_2),
        (f64::NAN, 0.5, f64::NAN),
        (1.0, f64::NAN, f64::NAN),
    ];
    // 200 copies so that the block function computes them too.
    let reps = 200;
    let zv: Vec<f64> = cases.iter().flat_map(|c| vec![c.0; reps]).collect();
    let tv: Vec<f64> = cases.iter().flat_map(|c| vec![c.1; reps]).collect();
    let vals = [value(DType::F64, &zv), value(DType::F64, &tv)];
    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
    let got = f.call(&args).unwrap().remove(0).to_f64_array();
    for (k, &(z, t, want)) in cases.iter().enumerate() {
        for r in 0..reps {
            let g = got[[k * reps + r]];
            let ok = if want.is_nan() {
                g.is_nan()
            } else {
                jit_support::ulps(g, want, DType::F64) <= 1
            };
            assert!(ok, "loss({z}, {t}) = {g:e}, want {want:e}");
        }
    }
}

#[test]
fn the_gradient_is_sigmoid_minus_target_and_minus_the_logit() {
    let (z, t) = vars(DType::F64);
    let cost = kiln::sigmoid_binary_crossentropy(&z, &t).unwrap().sum_all();
    let grads = kiln::grad(&cost, &[z.clone(), t.clone()]).unwrap();
    let f = function(&[z.clone(), t.clone()], &grads)
        .mode(Mode::fast_run())
        .compile()
        .unwrap();
    let zv: Vec<f64> = (0..300).map(|i| (i as f64 - 150.0) * 0.21).collect();
    let tv: Vec<f64> = (0..300).map(|i| (i % 11) as f64 / 10.0).collect();
    let out = f
        .call_values(&[value(DType::F64, &zv), value(DType::F64, &tv)])
        .unwrap();
    let (gz, gt) = (out[0].to_f64_array(), out[1].to_f64_array());
    for i in 0..zv.len() {
        let s = 1.0 / (1.0 + (-zv[i]).exp());
        assert!((gz[[i]] - (s - tv[i])).abs() <= 1e-15, "d/dz at {}", zv[i]);
        assert_eq!(gt[[i]], -zv[i], "d/dt at {}", zv[i]);
    }
}

#[test]
fn the_suites_cross_entropy_compiles_to_one_op() {
    let vars_text = [
        ("t".to_string(), kiln::tensor("t", DType::F64, &[None])),
        ("z".to_string(), kiln::tensor("z", DType::F64, &[None])),
    ];
    let map: std::collections::HashMap<String, Tensor> = vars_text.iter().cloned().collect();
    let src = "mean(-(t*log(sigmoid(z)) + (1-t)*log(1 - sigmoid(z))))";
    let out = kiln::build_expression(src, &map).unwrap();
    let (t, z) = (vars_text[0].1.clone(), vars_text[1].1.clone());
    let f = function(&[t.clone(), z.clone()], std::slice::from_ref(&out))
        .mode(Mode::fast_run())
        .compile()
        .unwrap();
    let ops = kiln::graph::print::pprint(f.graph(), f.graph().outputs()[0]);
    assert!(ops.contains("sigmoid_binary_crossentropy(z, t)"), "{ops}");
    assert!(!ops.contains("softplus"), "{ops}");
    // Its value against the mean of t·softplus(-z) + (1-t)·softplus(z)
    // computed here (the unrewritten graph is NaN where sigmoid rounds to
    // 0 or 1: `0 * log(0)`).
    let (zv, tv) = inputs(5000, 9);
    let keep: Vec<usize> = (0..zv.len()).filter(|&i| zv[i].is_finite()).collect();
    let zv: Vec<f64> = keep.iter().map(|&i| zv[i]).collect();
    let tv: Vec<f64> = keep.iter().map(|&i| tv[i]).collect();
    let sp = |x: f64| x.max(0.0) + (-x.abs()).exp().ln_1p();
    let total: f64 = zv
        .iter()
        .zip(&tv)
        .map(|(&z, &t)| t * sp(-z) + (1.0 - t) * sp(z))
        .sum();
    let want = Value::from_f64_array(
        DType::F64,
        ArrayD::from_elem(IxDyn(&[]), total / zv.len() as f64),
    );
    let vals = [value(DType::F64, &tv), value(DType::F64, &zv)];
    let got = f.call_values(&vals).unwrap().remove(0);
    assert_close(&got, &want, 1e-12, "mean cross-entropy");
}
