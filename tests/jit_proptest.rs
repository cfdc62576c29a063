//! Property test: random element-wise / reduction graphs on random inputs,
//! JIT against the reference evaluator.
mod jit_support;
use jit_support::*;
use kiln::linker::{compile, CompileOptions};
use kiln::{
    elemwise, eval, matrix, tensor, DType, FunctionGraph, ReduceOp, ScalarOp, Tensor, Value,
};
use proptest::prelude::*;

const UNARY: [ScalarOp; 7] = [
    ScalarOp::Neg,
    ScalarOp::Abs,
    ScalarOp::Exp,
    ScalarOp::Sqr,
    ScalarOp::Floor,
    ScalarOp::Tanh,
    ScalarOp::Sigmoid,
];
const BINARY: [ScalarOp; 6] = [
    ScalarOp::Add,
    ScalarOp::Sub,
    ScalarOp::Mul,
    ScalarOp::Maximum,
    ScalarOp::Minimum,
    ScalarOp::TrueDiv,
];

#[derive(Debug, Clone)]
enum Step {
    Unary(usize, usize),
    Binary(usize, usize, usize),
    Where(usize, usize, usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..UNARY.len(), 0..64usize).prop_map(|(o, a)| Step::Unary(o, a)),
        (0..BINARY.len(), 0..64usize, 0..64usize).prop_map(|(o, a, b)| Step::Binary(o, a, b)),
        (0..64usize, 0..64usize, 0..64usize).prop_map(|(a, b, c)| Step::Where(a, b, c)),
    ]
}

fn build(steps: &[Step], reduce: Option<(usize, u8)>) -> (Vec<Tensor>, Tensor) {
    let x = matrix("x", DType::F64);
    let y = matrix("y", DType::F64);
    let r = tensor("r", DType::F64, &[Some(1), None]);
    let mut pool = vec![x.clone(), y.clone(), r.clone()];
    for s in steps {
        let n = pool.len();
        let t = match *s {
            Step::Unary(o, a) => elemwise(UNARY[o], &[&pool[a % n]]).unwrap(),
            Step::Binary(o, a, b) => elemwise(BINARY[o], &[&pool[a % n], &pool[b % n]]).unwrap(),
            Step::Where(a, b, c) => {
                let cond = elemwise(ScalarOp::Lt, &[&pool[a % n], &pool[b % n]]).unwrap();
                elemwise(ScalarOp::Switch, &[&cond, &pool[b % n], &pool[c % n]]).unwrap()
            }
        };
        pool.push(t);
    }
    let mut out = pool.last().unwrap().clone();
    if let Some((axis, op)) = reduce {
        let op = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min][op as usize % 3];
        let axes: Option<Vec<isize>> = match axis % 3 {
            0 => None,
            a => Some(vec![a as isize - 1]),
        };
        out = out.reduce(op, axes.as_deref(), false).unwrap();
    }
    (vec![x, y, r], out)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn random_graphs_match_the_reference(
        steps in proptest::collection::vec(step(), 1..8),
        reduce in proptest::option::of((0..3usize, 0..3u8)),
        rows in 0..5usize,
        cols in 0..300usize,
        seed in 0..1000u64,
        transpose in any::<bool>(),
    ) {
        let (ins, out) = build(&steps, reduce);
        let fg = FunctionGraph::new(&ins, &[out]).unwrap();
        let mut vx = Value::from(rand_f64(&[rows, cols], seed, -3.0, 3.0));
        if transpose {
            vx = kiln::map_value!(Value::from(rand_f64(&[cols, rows], seed, -3.0, 3.0)), a => a.reversed_axes());
        }
        let vals = [vx, Value::from(rand_f64(&[rows, cols], seed + 1, -3.0, 3.0)), Value::from(rand_f64(&[1, cols], seed + 2, -3.0, 3.0))];
        let want = eval::evaluate(&fg, &vals);
        let f = compile(&fg, &CompileOptions::default()).unwrap();
        let got = f.call_values(&vals);
        match (got, want) {
            (Ok(g), Ok(w)) => prop_assert!(g[0].allclose(&w[0], 1e-9, 1e-12), "{:?} vs {:?}", g[0], w[0]),
            (Err(_), Err(_)) => {}
            (g, w) => prop_assert!(false, "jit {:?} vs reference {:?}", g.map(|_| ()), w.map(|_| ())),
        }
    }
}
