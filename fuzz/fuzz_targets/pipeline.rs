//! Fuzz target `pipeline`: a small random program (a few inputs of small
//! shapes and any dtype, then a sequence of ops from the whole op set) is
//! compiled under FAST_RUN (with and without inplace and fusion) and run on
//! inputs with edge values; the results must match the reference evaluator
//! on the un-rewritten graph within the tolerances of `tests/differential.rs`
//! (the comparison is that test's, included from `tests/differential_support`).
//! A mismatch, a compile error or a panic is a finding.
#![no_main]

use arbitrary::Arbitrary;
use kiln::{
    dot, elemwise, switch, tensor, weak_constant, DType, ReduceOp, ScalarOp, Tensor, Value,
};
use libfuzzer_sys::fuzz_target;
use ndarray::{ArrayD, IxDyn};

#[path = "../../tests/differential_support/mod.rs"]
mod differential_support;

const DTYPES: &[DType] = &[
    DType::Bool,
    DType::U8,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::F32,
    DType::F64,
];
const REDUCE: &[ReduceOp] = &[
    ReduceOp::Sum,
    ReduceOp::Prod,
    ReduceOp::Max,
    ReduceOp::Min,
    ReduceOp::All,
    ReduceOp::Any,
];
const CONSTS: &[f64] = &[0.0, 1.0, -1.0, 2.0, 0.5, 3.0, -2.5, 1e300, f64::INFINITY];
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
    5e-324,
    0.5,
    700.0,
    -700.0,
];

#[derive(Arbitrary, Debug)]
struct Input {
    dtype: u8,
    /// Per dimension (0-2 of them): size 0..=3, and whether size 1 is static (broadcastable).
    dims: Vec<(u8, bool)>,
}

#[derive(Arbitrary, Debug)]
enum Step {
    Unary(u8, u8),
    Binary(u8, u8, u8),
    WithConst(u8, u8, u8, bool),
    Reduce(u8, u8, u8, bool),
    Transpose(u8),
    Dot(u8, u8),
    Switch(u8, u8, u8),
    Cast(u8, u8),
}

#[derive(Arbitrary, Debug)]
struct Program {
    inputs: Vec<Input>,
    steps: Vec<Step>,
    n_out: u8,
    seed: u64,
}

fn ops_of_arity(n: usize) -> Vec<ScalarOp> {
    ScalarOp::all()
        .into_iter()
        .filter(|op| match op.arity() {
            kiln::ops::scalar::Arity::Fixed(k) => k == n,
            kiln::ops::scalar::Arity::Variadic => n == 2,
        })
        .collect()
}

fn value(dtype: DType, shape: &[usize], state: &mut u64) -> Value {
    let mut next = || {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*state >> 11) as f64 / (1u64 << 53) as f64
    };
    let n: usize = shape.iter().product();
    let data: Vec<f64> = (0..n)
        .map(|_| {
            let u = next();
            if u < 0.3 {
                EDGE[((next() * EDGE.len() as f64) as usize).min(EDGE.len() - 1)]
            } else {
                ((next() - 0.5) * 16.0).round() / 2.0
            }
        })
        .collect();
    let a = ArrayD::from_shape_vec(IxDyn(shape), data).expect("sized");
    Value::F64(a).cast(dtype)
}

fuzz_target!(|p: Program| {
    if p.inputs.is_empty() || p.inputs.len() > 4 || p.steps.len() > 10 {
        return;
    }
    let (unary, binary) = (ops_of_arity(1), ops_of_arity(2));
    let mut ins = Vec::new();
    let mut vals = Vec::new();
    let mut state = p.seed;
    for (k, i) in p.inputs.iter().enumerate() {
        if i.dims.len() > 2 {
            return;
        }
        let dtype = DTYPES[i.dtype as usize % DTYPES.len()];
        let sizes: Vec<usize> = i.dims.iter().map(|&(s, _)| s as usize % 4).collect();
        let ty: Vec<Option<usize>> = i
            .dims
            .iter()
            .zip(&sizes)
            .map(|(&(_, fixed), &s)| (fixed && s == 1).then_some(1))
            .collect();
        ins.push(tensor(&format!("in{k}"), dtype, &ty));
        vals.push(value(dtype, &sizes, &mut state));
    }
    let mut pool: Vec<Tensor> = ins.clone();
    for s in &p.steps {
        let n = pool.len();
        let at = |k: u8| &pool[k as usize % n];
        let t = match *s {
            Step::Unary(o, a) => elemwise(unary[o as usize % unary.len()], &[at(a)]),
            Step::Binary(o, a, b) => elemwise(binary[o as usize % binary.len()], &[at(a), at(b)]),
            Step::WithConst(o, a, c, left) => {
                let x = at(a);
                let v = CONSTS[c as usize % CONSTS.len()];
                let k = weak_constant(x, v, v.fract() != 0.0 || !v.is_finite());
                let op = binary[o as usize % binary.len()];
                if left {
                    elemwise(op, &[&k, x])
                } else {
                    elemwise(op, &[x, &k])
                }
            }
            Step::Reduce(o, a, ax, keep) => {
                let x = at(a);
                let axes = (x.ndim() > 0 && ax % 2 == 1)
                    .then(|| vec![(ax / 2) as isize % x.ndim() as isize]);
                x.reduce(REDUCE[o as usize % REDUCE.len()], axes.as_deref(), keep)
            }
            Step::Transpose(a) => Ok(at(a).t()),
            Step::Dot(a, b) => dot(at(a), at(b)),
            Step::Switch(c, a, b) => switch(at(c), at(a), at(b)),
            Step::Cast(a, d) => Ok(at(a).cast(DTYPES[d as usize % DTYPES.len()])),
        };
        // Steps that do not type-check are skipped (the builder's errors are
        // exercised, not the point).
        if let Ok(t) = t {
            pool.push(t);
        }
    }
    let outs: Vec<Tensor> = pool[ins.len()..]
        .iter()
        .rev()
        .take(1 + p.n_out as usize % 2)
        .cloned()
        .collect();
    if outs.is_empty() {
        return;
    }
    if let Err(e) = differential_support::compare_with_reference(&ins, &outs, &vals) {
        panic!("{e}\nprogram: {p:?}");
    }
});
