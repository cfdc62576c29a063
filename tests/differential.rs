//! Differential property tests: random well-typed graphs compiled under
//! FAST_RUN (and FAST_RUN without inplace, without fusion) compute what the
//! reference evaluator computes on the *un-rewritten* graph, on inputs that
//! include edge values (±0, ±inf, NaN, huge, tiny, subnormal).
//!
//! Tolerances by op class: where the reference is finite, the compiled result
//! must be within `atol + rtol * |ref|` (f64: 1e-7 / 1e-7, because rewrites
//! reassociate and stabilise; f32: 1e-3 / 1e-3; integers and bools exactly).
//! Where the reference is ±inf or NaN, a rewrite may have removed the
//! cancellation that produced it (PyTensor's rule), so any value is
//! accepted, except NaN for an infinite reference. The compiled code must
//! never produce NaN or ±inf where the reference is finite.
//!
//! When the reference rejects the inputs (a run-time shape mismatch), the
//! compiled function may reject them too or succeed, since a rewrite may
//! have removed the node whose check failed; it must never crash.
//!
//! Structural properties: a second FAST_RUN pass over a rewritten graph
//! changes nothing, no two nodes of the result compute the same thing, and
//! the verifier holds. The number of cases is fixed for CI; set
//! `PROPTEST_CASES` for a long run.

use std::collections::HashSet;

use kiln::rewriting::{rewrite_graph, Mode};
use kiln::*;
use ndarray::{ArrayD, IxDyn};
use proptest::prelude::*;

const UNARY: &[ScalarOp] = &[
    ScalarOp::Neg,
    ScalarOp::Abs,
    ScalarOp::Exp,
    ScalarOp::Log,
    ScalarOp::Log1p,
    ScalarOp::Expm1,
    ScalarOp::Sqrt,
    ScalarOp::Sqr,
    ScalarOp::Tanh,
    ScalarOp::Sigmoid,
    ScalarOp::Softplus,
    ScalarOp::Sin,
    ScalarOp::Floor,
    ScalarOp::Sign,
    ScalarOp::Reciprocal,
    ScalarOp::Erf,
];
const BINARY: &[ScalarOp] = &[
    ScalarOp::Add,
    ScalarOp::Sub,
    ScalarOp::Mul,
    ScalarOp::TrueDiv,
    ScalarOp::IntDiv,
    ScalarOp::Mod,
    ScalarOp::Maximum,
    ScalarOp::Minimum,
    ScalarOp::Pow,
    ScalarOp::Lt,
    ScalarOp::Eq,
];
const CONSTS: &[f64] = &[0.0, 1.0, -1.0, 2.0, 0.5, 3.0, -2.5];
const DTYPES: &[DType] = &[DType::F64, DType::F32, DType::I64, DType::Bool];

#[derive(Debug, Clone)]
enum Step {
    Unary(usize, usize),
    Binary(usize, usize, usize),
    WithConst(usize, usize, usize, bool),
    Reduce(usize, usize, usize, bool),
    Transpose(usize),
    Outer(usize, usize),
    Dot(usize, usize),
    Switch(usize, usize, usize),
    Cast(usize, usize),
}

fn step() -> impl Strategy<Value = Step> {
    let i = || 0..64usize;
    prop_oneof![
        4 => (0..UNARY.len(), i()).prop_map(|(o, a)| Step::Unary(o, a)),
        5 => (0..BINARY.len(), i(), i()).prop_map(|(o, a, b)| Step::Binary(o, a, b)),
        3 => (0..BINARY.len(), i(), 0..CONSTS.len(), any::<bool>()).prop_map(|(o, a, c, l)| Step::WithConst(o, a, c, l)),
        2 => (0..4usize, i(), 0..4usize, any::<bool>()).prop_map(|(o, a, ax, k)| Step::Reduce(o, a, ax, k)),
        1 => i().prop_map(Step::Transpose),
        1 => (i(), i()).prop_map(|(a, b)| Step::Outer(a, b)),
        1 => (i(), i()).prop_map(|(a, b)| Step::Dot(a, b)),
        1 => (i(), i(), i()).prop_map(|(a, b, c)| Step::Switch(a, b, c)),
        1 => (i(), 0..DTYPES.len()).prop_map(|(a, d)| Step::Cast(a, d)),
    ]
}

/// Inputs: x, y: f64 vectors; f: f32 vector; k: i64 vector; b: bool vector; M: f64 matrix.
fn inputs() -> Vec<Tensor> {
    vec![
        vector("x", DType::F64),
        vector("y", DType::F64),
        vector("f", DType::F32),
        vector("k", DType::I64),
        vector("b", DType::Bool),
        matrix("M", DType::F64),
    ]
}

/// Applies the steps, skipping those that do not type-check; returns the outputs.
fn build(steps: &[Step], n_out: usize) -> (Vec<Tensor>, Vec<Tensor>) {
    let ins = inputs();
    let mut pool: Vec<Tensor> = ins.clone();
    for s in steps {
        let n = pool.len();
        let p = |k: usize| &pool[k % n];
        let t: Result<Tensor> = match *s {
            Step::Unary(o, a) => elemwise(UNARY[o], &[p(a)]),
            Step::Binary(o, a, b) => elemwise(BINARY[o], &[p(a), p(b)]),
            Step::WithConst(o, a, c, left) => {
                let x = p(a);
                let k = weak_constant(x, CONSTS[c], CONSTS[c].fract() != 0.0);
                if left {
                    elemwise(BINARY[o], &[&k, x])
                } else {
                    elemwise(BINARY[o], &[x, &k])
                }
            }
            Step::Reduce(o, a, ax, keep) => {
                let x = p(a);
                let op = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Prod, ReduceOp::Any][o];
                let axes: Option<Vec<isize>> = match ax {
                    0 => None,
                    a => Some(vec![(a as isize - 1) % (x.ndim().max(1) as isize)]),
                };
                if x.ndim() == 0 {
                    continue;
                }
                x.reduce(op, axes.as_deref(), keep)
            }
            Step::Transpose(a) => Ok(p(a).t()),
            Step::Outer(a, b) => {
                let (u, v) = (p(a), p(b));
                if u.ndim() != 1 || v.ndim() != 1 {
                    continue;
                }
                let (Ok(cu), Ok(rv)) = (u.expand_dims(1), v.expand_dims(0)) else {
                    continue;
                };
                add(&cu, &rv)
            }
            Step::Dot(a, b) => {
                let (u, v) = (p(a), p(b));
                if !u.dtype().is_float() || !v.dtype().is_float() {
                    continue;
                }
                dot(u, v)
            }
            Step::Switch(c, a, b) => switch(p(c), p(a), p(b)),
            Step::Cast(a, d) => Ok(p(a).cast(DTYPES[d])),
        };
        if let Ok(t) = t {
            pool.push(t);
        }
    }
    let outs: Vec<Tensor> = pool[ins.len()..]
        .iter()
        .rev()
        .take(n_out)
        .cloned()
        .collect();
    let outs = if outs.is_empty() {
        vec![&ins[0] + 1.0]
    } else {
        outs
    };
    (ins, outs)
}

const EDGE: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    1e300,
    -1e300,
    1e-300,
    5e-324,
    0.5,
    700.0,
    -700.0,
];

/// Deterministic values: a mix of edge values and moderate numbers.
fn values(n: usize, m: usize, seed: u64, edges: bool) -> Vec<Value> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut draw = |k: usize| -> Vec<f64> {
        (0..k)
            .map(|_| {
                let u = next();
                if edges && u < 0.25 {
                    EDGE[((next() * EDGE.len() as f64) as usize).min(EDGE.len() - 1)]
                } else {
                    (next() - 0.5) * 8.0
                }
            })
            .collect()
    };
    let v = |d: Vec<f64>, shape: &[usize]| ArrayD::from_shape_vec(IxDyn(shape), d).expect("sized");
    vec![
        Value::F64(v(draw(n), &[n])),
        Value::F64(v(draw(n), &[n])),
        Value::F32(v(draw(n), &[n]).mapv(|x| x as f32)),
        Value::I64(v(draw(n), &[n]).mapv(|x| {
            if x.is_finite() {
                x.clamp(-50.0, 50.0) as i64
            } else {
                3
            }
        })),
        Value::Bool(v(draw(n), &[n]).mapv(|x| x > 0.0)),
        Value::F64(v(draw(m * n), &[m, n])),
    ]
}

fn check_close(got: &Value, want: &Value, what: &str) -> std::result::Result<(), String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Err(format!(
            "{what}: {:?}{:?} vs {:?}{:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    if !got.dtype().is_float() {
        return if got.same_as(want) {
            Ok(())
        } else {
            Err(format!("{what}: {got:?} vs {want:?}"))
        };
    }
    let (atol, rtol) = if got.dtype() == DType::F32 {
        (1e-3, 1e-3)
    } else {
        (1e-7, 1e-7)
    };
    let (g, w) = (got.to_f64_array(), want.to_f64_array());
    for (k, (&a, &b)) in g.iter().zip(w.iter()).enumerate() {
        let ok = if b.is_finite() {
            a.is_finite() && (a - b).abs() <= atol + rtol * b.abs()
        } else if b.is_infinite() {
            !a.is_nan()
        } else {
            true
        };
        if !ok {
            return Err(format!(
                "{what}: element {k}: compiled {a:e}, reference {b:e}"
            ));
        }
    }
    Ok(())
}

fn run_case(
    steps: &[Step],
    n_out: usize,
    n: usize,
    m: usize,
    seed: u64,
    edges: bool,
) -> std::result::Result<(), String> {
    let (ins, outs) = build(steps, n_out);
    let reference_graph = FunctionGraph::new(&ins, &outs).map_err(|e| e.to_string())?;
    let vals = values(n, m, seed, edges);
    let Ok(want) = eval::evaluate(&reference_graph, &vals) else {
        // The reference rejects these inputs (a run-time shape mismatch). A rewrite
        // may have removed the node whose check failed (as PyTensor's do), so the
        // compiled function may succeed; it must not crash either way.
        let f = function(&ins, &outs).compile().map_err(|e| e.to_string())?;
        let _ = f.call_values(&vals);
        return Ok(());
    };
    for mode in [
        Mode::fast_run(),
        Mode::fast_run().excluding(&["inplace"]),
        Mode::fast_run().excluding(&["fusion"]),
    ] {
        let f = function(&ins, &outs)
            .mode(mode.clone())
            .compile()
            .map_err(|e| format!("{}: compile: {e}", mode.name()))?;
        let got = f
            .call_values(&vals)
            .map_err(|e| format!("{}: call: {e}\n{}", mode.name(), f.graph()))?;
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            check_close(
                g,
                w,
                &format!("{} output {k} of {}", mode.name(), f.graph()),
            )?;
        }
    }
    Ok(())
}

/// A second FAST_RUN pass changes nothing; no two nodes compute the same thing.
fn check_structure(steps: &[Step], n_out: usize) -> std::result::Result<(), String> {
    let (ins, outs) = build(steps, n_out);
    let mut fg = FunctionGraph::new(&ins, &outs).map_err(|e| e.to_string())?;
    rewrite_graph(&mut fg, &Mode::fast_run()).map_err(|e| e.to_string())?;
    fg.check_integrity().map_err(|e| e.to_string())?;
    let once = fg.to_string();
    let mut seen = HashSet::new();
    for n in fg.node_ids() {
        let node = fg.node(n);
        let key = (node.op.clone(), node.inputs.to_vec());
        if !seen.insert(key) {
            return Err(format!(
                "two nodes compute {} on the same inputs in {once}",
                node.op
            ));
        }
    }
    rewrite_graph(&mut fg, &Mode::fast_run()).map_err(|e| e.to_string())?;
    fg.check_integrity().map_err(|e| e.to_string())?;
    if fg.to_string() != once {
        return Err(format!(
            "a second FAST_RUN pass changed\n{once}\ninto\n{fg}"
        ));
    }
    Ok(())
}

/// 1000 cases per property with a fixed seed in CI; `PROPTEST_CASES` and
/// `PROPTEST_RNG_SEED` override both for long or exploratory runs.
fn config() -> ProptestConfig {
    let mut c = ProptestConfig::default();
    if std::env::var("PROPTEST_CASES").is_err() {
        c.cases = 1000;
    }
    if std::env::var("PROPTEST_RNG_SEED").is_err() {
        c.rng_seed = proptest::test_runner::RngSeed::Fixed(0x6b69_6c6e);
    }
    c.failure_persistence = None;
    c
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn compiled_fast_run_matches_the_reference(
        steps in proptest::collection::vec(step(), 1..10),
        n_out in 1..3usize,
        n in prop_oneof![Just(0usize), 1..9usize],
        m in 1..4usize,
        seed in any::<u64>(),
        edges in any::<bool>(),
    ) {
        if let Err(e) = run_case(&steps, n_out, n, m, seed, edges) {
            prop_assert!(false, "{e}\nsteps: {steps:?}");
        }
    }

    #[test]
    fn rewriting_reaches_a_merged_fixed_point(
        steps in proptest::collection::vec(step(), 1..12),
        n_out in 1..3usize,
    ) {
        if let Err(e) = check_structure(&steps, n_out) {
            prop_assert!(false, "{e}\nsteps: {steps:?}");
        }
    }
}
