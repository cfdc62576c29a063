//! Differential property tests: random well-typed graphs compiled under
//! FAST_RUN (and FAST_RUN without inplace, without fusion) compute what the
//! reference evaluator computes on the *un-rewritten* graph, on inputs that
//! include edge values (±0, ±inf, NaN, huge, tiny, subnormal).
//!
//! The comparison and its tolerances live in `differential_support` (shared
//! with the `pipeline` fuzz target, see `fuzz/README.md`).
//!
//! Structural properties: every equilibrium of FAST_RUN converges, a second
//! FAST_RUN pass over a rewritten graph changes nothing, no two nodes of the
//! result compute the same thing, and the verifier holds. Graphs on which
//! either property once failed are kept below as plain regression tests.
//! The number of cases is fixed for CI; set `PROPTEST_CASES` for a long run.

use std::collections::HashSet;

use kiln::rewriting::{rewrite_graph, Mode, StopReason};
use kiln::*;
use ndarray::{ArrayD, IxDyn};
use proptest::prelude::*;

mod differential_support;
use differential_support::compare_with_reference;

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

fn run_case(
    steps: &[Step],
    n_out: usize,
    n: usize,
    m: usize,
    seed: u64,
    edges: bool,
) -> std::result::Result<(), String> {
    let (ins, outs) = build(steps, n_out);
    compare_with_reference(&ins, &outs, &values(n, m, seed, edges))
}

/// A second FAST_RUN pass changes nothing; no two nodes compute the same thing.
fn check_structure(steps: &[Step], n_out: usize) -> std::result::Result<(), String> {
    let (ins, outs) = build(steps, n_out);
    check_fixed_point(&ins, &outs)
}

/// FAST_RUN over `outs`: every equilibrium converges (none stopped on an
/// oscillation or on `max_use_ratio`), no two nodes of the result compute the
/// same thing, the verifier holds, and a second pass changes nothing.
fn check_fixed_point(ins: &[Tensor], outs: &[Tensor]) -> std::result::Result<(), String> {
    let mut fg = FunctionGraph::new(ins, outs).map_err(|e| e.to_string())?;
    let profile = rewrite_graph(&mut fg, &Mode::fast_run()).map_err(|e| e.to_string())?;
    fg.check_integrity().map_err(|e| e.to_string())?;
    let once = fg.to_string();
    for (name, reason) in profile.stop_reasons() {
        if reason != StopReason::Converged {
            return Err(format!("{name} stopped early ({reason}) with {once}"));
        }
    }
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

// Regression tests: the smallest graphs on which the fixed-point property
// failed in long runs, one per root cause.

fn assert_fixed_point(ins: &[Tensor], outs: &[Tensor]) {
    if let Err(e) = check_fixed_point(ins, outs) {
        panic!("{e}");
    }
}

fn vec_f64(name: &str) -> Tensor {
    vector(name, DType::F64)
}

/// The canonizer rebuilt `(sum(x) + 1) - x` forever: the product `add(1, s)`
/// sits under the DimShuffle that aligns it with `x`, which the merged-form
/// check did not look through (canonicalize stopped on max_use_ratio).
#[test]
fn fixed_point_padded_sum_in_a_difference() {
    let x = vec_f64("x");
    let out = &(x.sum_all() + 1.0) - &x;
    assert_fixed_point(std::slice::from_ref(&x), &[out]);
}

/// The same, with a row and a column: `x_row - (1 + x_col)`.
#[test]
fn fixed_point_row_minus_one_plus_column() {
    let x = vec_f64("x");
    let row = x.expand_dims(0).unwrap();
    let col = x.expand_dims(1).unwrap();
    let out = &row - &(1.0 + &col);
    assert_fixed_point(std::slice::from_ref(&x), &[out]);
}

/// `(x + x) + y` over the graph's first input: the equilibrium's graph hash
/// gave the nested and the flat sum the same value (an unseeded FxHasher
/// absorbs zero words) and stopped canonicalize on a false oscillation.
#[test]
fn fixed_point_nested_sum_over_the_first_input() {
    let (x, y) = (vec_f64("x"), vec_f64("y"));
    let out = &(&x + &x) + &y;
    assert_fixed_point(&[x, y], &[out]);
}

/// `-b` of a bool is an `i64`; canonicalize turned it into `-1 * b`, which
/// the add canonizer did not read as a negation, and specialize turned it
/// back into `neg(b)`, which the next canonicalize pass flattened.
#[test]
fn fixed_point_negated_bools_in_an_outer_sum() {
    let b = vector("b", DType::Bool);
    let nb = -&b;
    let out = &nb.expand_dims(1).unwrap() + &nb.expand_dims(0).unwrap();
    assert_fixed_point(std::slice::from_ref(&b), &[out]);
}

/// `x + b * -1` with a bool `b`: the product is `i64` like `neg(b)`, and
/// specialize makes it `neg(b)`; the add canonizer now reads it as `-b`.
#[test]
fn fixed_point_bool_times_minus_one_in_a_sum() {
    let (x, b) = (vec_f64("x"), vector("b", DType::Bool));
    let m = mul(&b, &weak_constant(&b, -1.0, false)).unwrap();
    let out = &x.expand_dims(1).unwrap() + &m.expand_dims(0).unwrap();
    assert_fixed_point(&[x, b], &[out, m]);
}

/// `M * x ** -1`: canonicalize writes reciprocals as `x ** -1` and specialize
/// writes them back as `reciprocal(x)`, which the next canonicalize pass
/// folded into `M / x`; the mul canonizer now reads `x ** -1` as `1 / x`.
#[test]
fn fixed_point_product_with_a_power_minus_one() {
    let (x, m) = (vec_f64("x"), matrix("M", DType::F64));
    let out = &x.powf(-1.0).expand_dims(0).unwrap() * &m;
    assert_fixed_point(&[x, m], &[out]);
}

/// `sum(-f) * y`: specialize moved the `-1` out of the sum into a product of
/// its own (`neg(sum(f)) * y`), which the next canonicalize pass merged into
/// the outer product; the rule now also runs in canonicalize.
#[test]
fn fixed_point_sum_of_a_negation_in_a_product() {
    let (f, y) = (vector("f", DType::F32), vec_f64("y"));
    let out = &(-&f).sum_all() * &y;
    assert_fixed_point(&[f, y], &[out]);
}

/// `sum(-x) + M + sum(-x)`: the same with a sum.
#[test]
fn fixed_point_sum_of_a_negation_in_a_sum() {
    let (x, m) = (vec_f64("x"), matrix("M", DType::F64));
    let s = (-&x).sum_all();
    let out = &(&s + &m) + &s;
    assert_fixed_point(&[x, m], &[out]);
}

/// `(x - x)[:, None] + k` with a second client of `x - x`: the canonizer
/// took `x - x` for an inner node of the outer sum (looking through a
/// DimShuffle the outer sum does not look through) and never simplified it.
#[test]
fn fixed_point_difference_behind_a_column_dimshuffle() {
    let (x, k) = (vec_f64("x"), vector("k", DType::I64));
    let d = &x - &x;
    let out = &d.expand_dims(1).unwrap() + &k.expand_dims(0).unwrap();
    assert_fixed_point(&[x, k], &[out, d.cast(DType::Bool)]);
}

/// `sum(-x / 0)` of an empty `x` is 0. With the sum rule also in
/// canonicalize, it moved the divisor out before the canonizer folded
/// `/ 0` into `* inf`, giving `-inf * sum(x)`: NaN.
#[test]
fn values_sum_of_a_division_by_zero_over_an_empty_vector() {
    let x = vec_f64("x");
    let zero = weak_constant(&x, 0.0, false);
    let out = true_div(&-&x, &zero).unwrap().sum_all();
    for n in [0, 3] {
        let vals = [Value::F64(ArrayD::from_elem(IxDyn(&[n]), 1.5))];
        if let Err(e) =
            compare_with_reference(std::slice::from_ref(&x), std::slice::from_ref(&out), &vals)
        {
            panic!("n = {n}: {e}");
        }
    }
}

/// `f ** 0.5` at `f = -inf`: the reference (C99 `pow`) gives `+inf`, the
/// compiled `sqrt(f)` NaN, README rule 5's documented exception, which the
/// comparison accepts (found by the 100,000-case run).
#[test]
fn values_square_root_of_minus_infinity() {
    let f = vector("f", DType::F32);
    let out = f.powf(0.5);
    let vals = [Value::F32(
        ndarray::arr1(&[f32::NEG_INFINITY, 4.0, -1.0]).into_dyn(),
    )];
    compare_with_reference(std::slice::from_ref(&f), std::slice::from_ref(&out), &vals).unwrap();
    let got = function(std::slice::from_ref(&f), std::slice::from_ref(&out))
        .compile()
        .unwrap()
        .call_values(&vals)
        .unwrap();
    assert!(got[0].to_f64_array()[0].is_nan(), "sqrt(-inf) is NaN");
}
