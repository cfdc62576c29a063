//! Random differentiable graphs (the property tests' step language, see
//! `random_graphs/`) with a scalar cost: `grad` of the cost with respect to
//! the f64 inputs agrees with central finite differences in f64 where the
//! function is well conditioned, and the FAST_RUN JIT-compiled gradient
//! agrees with the reference evaluation of the unrewritten gradient graph.
mod gradient_support;
mod random_graphs;

use gradient_support::*;
use kiln::{grad, DType, Tensor, Value};
use proptest::prelude::*;
use random_graphs::*;

/// The cost: the sum of every float output (as f64), or `None` when no
/// output is a float depending on a float input.
fn cost_of(outs: &[Tensor]) -> Option<Tensor> {
    let floats: Vec<Tensor> = outs
        .iter()
        .filter(|o| o.dtype().is_float())
        .map(|o| o.cast(DType::F64).sum_all())
        .collect();
    let mut it = floats.into_iter();
    let first = it.next()?;
    Some(it.fold(first, |a, b| &a + &b))
}

/// Finite differences with steps `h` and `h / 2` agree (the cost is smooth
/// and well conditioned at this point): their common value, else `None`.
fn settled_fd(
    inputs: &[Tensor],
    cost: &Tensor,
    vals: &[Value],
    k: usize,
) -> Option<ndarray::ArrayD<f64>> {
    let base = vals[k].to_f64_array();
    let f = |v: &ndarray::ArrayD<f64>| -> f64 {
        let mut vs = vals.to_vec();
        vs[k] = Value::F64(v.clone());
        reference(inputs, std::slice::from_ref(cost), &vs)[0]
            .iter()
            .next()
            .copied()
            .unwrap()
    };
    let mut g = base.clone();
    for (idx, &x) in base.indexed_iter() {
        let mut est = [0.0; 2];
        for (j, h) in [1e-5, 5e-6].into_iter().enumerate() {
            let h = h * x.abs().max(1.0);
            let (mut p, mut m) = (base.clone(), base.clone());
            p[&idx] = x + h;
            m[&idx] = x - h;
            est[j] = (f(&p) - f(&m)) / (2.0 * h);
        }
        if !est[0].is_finite() || (est[0] - est[1]).abs() > 1e-7 * est[0].abs().max(1.0) {
            return None;
        }
        g[&idx] = est[1];
    }
    Some(g)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn random_graph_gradients(steps in proptest::collection::vec(step(), 1..10), seed in 0u64..1000) {
        let (ins, outs) = build(&steps, 2);
        let Some(cost) = cost_of(&outs) else { return Ok(()) };
        // The f64 inputs: x, y, M.
        let wrt_pos = [0usize, 1, 5];
        let wrt: Vec<Tensor> = wrt_pos.iter().map(|&k| ins[k].clone()).collect();
        let opts = kiln::gradient::GradOptions {
            disconnected_inputs: kiln::gradient::DisconnectedInputs::Ignore,
            ..Default::default()
        };
        let gs = match kiln::gradient::grad_with(Some(&cost), &wrt, &opts) {
            Ok(gs) => gs,
            // The generator's ops without a pullback yet (cumprod): the
            // error names the op; every other error is a failure.
            Err(e) if e.to_string().contains("has no gradient yet") => return Ok(()),
            Err(e) => panic!("{e}"),
        };
        // Square matrices: every dot of the step language is aligned.
        let vals = values(3, 3, seed, false);
        let fg = kiln::FunctionGraph::new(&ins, std::slice::from_ref(&cost)).unwrap();
        if kiln::eval::evaluate(&fg, &vals).is_err() {
            return Ok(());
        }
        let by_ref = reference(&ins, &gs, &vals);
        let by_jit = fast_run(&ins, &gs, &vals);
        for (j, &k) in wrt_pos.iter().enumerate() {
            // FAST_RUN against the reference evaluation of the unrewritten
            // gradient graph, where both are finite (rewrites may turn NaN
            // into numbers, and reassociate: an absolute error relative to
            // the largest element).
            let scale = by_ref[j].iter().filter(|v| v.is_finite()).fold(1.0f64, |m, v| m.max(v.abs()));
            for (a, b) in by_jit[j].iter().zip(by_ref[j].iter()) {
                if a.is_finite() && b.is_finite() {
                    prop_assert!((a - b).abs() <= 1e-9 * b.abs() + 1e-9 * scale,
                        "d/d{}: FAST_RUN {a} vs reference {b}\n{cost}", ins[k].name().unwrap());
                }
            }
            // grad against finite differences where they settle.
            if let Some(num) = settled_fd(&ins, &cost, &vals, k) {
                let scale = num.iter().fold(1.0f64, |m, v| m.max(v.abs()));
                for (a, b) in by_ref[j].iter().zip(num.iter()) {
                    prop_assert!((a - b).abs() <= 1e-5 * b.abs() + 1e-6 * scale,
                        "d/d{}: grad {a} vs finite differences {b}\n{cost}", ins[k].name().unwrap());
                }
            }
        }
        let _ = grad;
    }
}
