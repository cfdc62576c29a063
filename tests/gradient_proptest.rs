//! Random differentiable graphs (the property tests' step language, see
//! `random_graphs/`) with a scalar cost: `grad` of the cost with respect to
//! the f64 inputs agrees with central finite differences in f64 where the
//! function is well conditioned, and the FAST_RUN JIT-compiled gradient
//! agrees with the reference evaluation of the unrewritten gradient graph.
mod gradient_support;
mod random_graphs;

use gradient_support::*;
use kiln::{DType, FunctionGraph, Tensor, Value};
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

/// What the nodes of a (gradient) graph compute on given inputs.
struct Intermediates {
    /// Some node computes a NaN or an infinity.
    nonfinite: bool,
    /// Some node computes in f32.
    f32: bool,
    /// Some `copysign` takes its sign from a NaN. IEEE 754 leaves the sign
    /// of an operation's NaN unspecified and implementations differ (the
    /// C library's log gives -NaN for -1 and +NaN for -3.36, the runtime's
    /// +NaN for both), so a finite result built on it may differ in sign,
    /// and only in sign, between the compiled function and the reference
    /// (`copysign(1, log(M))` in the gradient of `copysign(log(M), x)` at a
    /// negative M).
    nan_sign: bool,
}

/// Evaluates every node of `fg` on `vals` with the reference `perform`.
fn intermediates(fg: &FunctionGraph, vals: &[Value]) -> Intermediates {
    let mut seen = Intermediates {
        nonfinite: false,
        f32: false,
        nan_sign: false,
    };
    let mut known: std::collections::HashMap<_, Value> = fg
        .inputs()
        .iter()
        .copied()
        .zip(vals.iter().cloned())
        .collect();
    for n in fg.toposort() {
        let node = fg.node(n);
        let args: Vec<Value> = node
            .inputs
            .iter()
            .map(|&i| match known.get(&i) {
                Some(v) => v.clone(),
                None => fg.constant_value(i).expect("a constant").clone(),
            })
            .collect();
        let refs: Vec<&Value> = args.iter().collect();
        let types: Vec<_> = node.inputs.iter().map(|&i| fg.ty(i)).collect();
        seen.nan_sign |= node.op.is_elemwise(kiln::ScalarOp::CopySign)
            && args[1].dtype().is_float()
            && args[1].to_f64_array().iter().any(|x| x.is_nan());
        let outs = kiln::eval::perform(&node.op, &refs, &types).expect("the cost evaluates");
        for (&o, v) in node.outputs.iter().zip(outs) {
            seen.f32 |= v.dtype() == DType::F32;
            seen.nonfinite |=
                v.dtype().is_float() && v.to_f64_array().iter().any(|x| !x.is_finite());
            known.insert(o, v);
        }
    }
    seen
}

/// Finite differences with steps `h` and `h / 2` agree (the cost is smooth
/// and well conditioned at this point), and so, loosely, does a step 10⁴
/// times smaller: their common value, else `None`. The small step catches
/// staircases: `sum(x // y)` with `|x / y|` large jumps so densely in `y`
/// that both ordinary steps see the slope of its envelope (`-x / y²`), not
/// its derivative (0 between jumps); the small step then crosses one jump
/// or none and disagrees by orders of magnitude. (Its rounding error,
/// `ε |f| / h`, is why its agreement is only asked to 1e-3.) A cost too large
/// for the ordinary steps' rounding error is not settled either.
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
    let f0 = f(&base);
    let mut g = base.clone();
    for (idx, &x) in base.indexed_iter() {
        let mut est = [0.0; 3];
        for (j, h) in [1e-5, 5e-6, 1e-9].into_iter().enumerate() {
            let h = h * x.abs().max(1.0);
            let (mut p, mut m) = (base.clone(), base.clone());
            p[&idx] = x + h;
            m[&idx] = x - h;
            est[j] = (f(&p) - f(&m)) / (2.0 * h);
        }
        let near = |a: f64, b: f64, rel: f64| (a - b).abs() <= rel * a.abs().max(1.0);
        if !est[0].is_finite() || !near(est[0], est[1], 1e-7) || !near(est[1], est[2], 1e-3) {
            return None;
        }
        // The quotients' rounding error, about ε |f| / h: a large cost swamps
        // the change an input makes (`sum(exp(exp(M))) + sum(x + x)` moves
        // by nothing in x), so every step agrees on a slope of 0.
        let h = 5e-6 * x.abs().max(1.0);
        let noise = f64::EPSILON * f0.abs() / h;
        if noise.is_nan() || noise > 1e-6 * est[1].abs().max(1.0) {
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
        // Every op the generator produces has a pullback.
        let gs = kiln::gradient::grad_with(Some(&cost), &wrt, &opts).unwrap_or_else(|e| panic!("{e}"));
        // Square matrices: every dot of the step language is aligned.
        let vals = values(3, 3, seed, false);
        let fg = FunctionGraph::new(&ins, std::slice::from_ref(&cost)).unwrap();
        if kiln::eval::evaluate(&fg, &vals).is_err() {
            return Ok(());
        }
        let grad_fg = FunctionGraph::new(&ins, &gs).unwrap();
        let inside = intermediates(&grad_fg, &vals);
        // f32 intermediates differ by their rounding (an ULP of f32 is 6e-8)
        // between the runtime's functions and the reference's.
        let rtol = if inside.f32 { 1e-6 } else { 1e-9 };
        let by_ref = reference(&ins, &gs, &vals);
        let by_jit = fast_run(&ins, &gs, &vals);
        for (j, &k) in wrt_pos.iter().enumerate() {
            // FAST_RUN against the reference evaluation of the unrewritten
            // gradient graph, where both are finite (rewrites may turn NaN
            // into numbers, and reassociate: an absolute error relative to
            // the largest element).
            let scale = by_ref[j].iter().filter(|v| v.is_finite()).fold(1.0f64, |m, v| m.max(v.abs()));
            for (&a, &b) in by_jit[j].iter().zip(by_ref[j].iter()) {
                // Magnitudes only where a NaN's sign reaches a result (see
                // `Intermediates::nan_sign`).
                let (a, b) = if inside.nan_sign { (a.abs(), b.abs()) } else { (a, b) };
                if a.is_finite() && b.is_finite() {
                    prop_assert!((a - b).abs() <= rtol * b.abs() + rtol * scale,
                        "d/d{}: FAST_RUN {a} vs reference {b}\n{cost}", ins[k].name().unwrap());
                }
            }
            // grad against finite differences at well-conditioned points:
            // where they settle, and where every value the gradient graph
            // computes is finite. (At a point where one is not, the chain
            // rule's answer can be NaN though the cost is smooth:
            // `(x ** M) ** 0` is 1 where `x ** M` is NaN, `sqrt(0 * x)`
            // pulls back `inf * 0`, the untaken branch of
            // `where(c, x, inf * x)` pulls back `0 * inf` — as in PyTensor
            // and JAX.)
            if inside.nonfinite {
                continue;
            }
            if let Some(num) = settled_fd(&ins, &cost, &vals, k) {
                let scale = num.iter().fold(1.0f64, |m, v| m.max(v.abs()));
                for (a, b) in by_ref[j].iter().zip(num.iter()) {
                    prop_assert!((a - b).abs() <= 1e-5 * b.abs() + 1e-6 * scale,
                        "d/d{}: grad {a} vs finite differences {b}\n{cost}", ins[k].name().unwrap());
                }
            }
        }
    }
}
