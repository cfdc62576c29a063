//! Property test: random element-wise / reduction graphs on random inputs,
//! JIT against the reference evaluator.
//!
//! One exemption, and only element by element: an output element that
//! depends on a *near tie* is not compared. A near tie is a comparison
//! `a < b` of two distinct finite variables within the test's own tolerance
//! of each other, or a `floor` of a finite value within that tolerance of an
//! integer, where an operand depends on a runtime function. The runtime's `exp`, `tanh` and `sigmoid` may differ from the
//! reference's `std` functions by their documented ULPs (runtime/ACCURACY.md),
//! so at a near tie the JIT and the reference may take different sides of a
//! discontinuity (`where(exp(x) < exp(x) * r / r, ...)`), both correctly.
//! The graph's per-node values at such points are checked by the
//! differential test's mode `none`, which evaluates every node on the JIT's
//! own operands.
mod jit_support;
use jit_support::*;
use kiln::linker::{compile, CompileOptions};
use kiln::{
    elemwise, eval, matrix, tensor, DType, FunctionGraph, ReduceOp, ScalarOp, Tensor, Value,
};
use ndarray::{ArrayD, IxDyn};
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

/// The graph of `steps` on inputs `x`, `y` (matrices) and `r` (one row):
/// the inputs, the last step's value, and that value reduced by `reduce`.
fn build(steps: &[Step], reduce: Option<(usize, u8)>) -> (Vec<Tensor>, Tensor, Tensor) {
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
    let last = pool.last().unwrap().clone();
    let mut out = last.clone();
    if let Some((axis, op)) = reduce {
        let op = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min][op as usize % 3];
        out = out
            .reduce(op, reduced_axis(axis).as_deref(), false)
            .unwrap();
    }
    (vec![x, y, r], last, out)
}

/// The axes `reduce`'s first component names: all, rows or columns.
fn reduced_axis(axis: usize) -> Option<Vec<isize>> {
    match axis % 3 {
        0 => None,
        a => Some(vec![a as isize - 1]),
    }
}

/// Whether `t` depends on a runtime function (`exp`, `tanh`, `sigmoid`),
/// the only ops here whose JIT value may differ from the reference's: the
/// others are exact or one correctly rounded IEEE operation in both.
fn rounded(t: &Tensor) -> bool {
    let runtime = [ScalarOp::Exp, ScalarOp::Tanh, ScalarOp::Sigmoid];
    t.owner_op()
        .is_some_and(|op| runtime.iter().any(|&s| op.is_elemwise(s)))
        || t.owner_inputs().iter().any(rounded)
}

/// The operands of the discontinuities `last` depends on whose operands may
/// differ between the JIT and the reference ([`rounded`]): `(a, Some(b))`
/// for a comparison `a < b` of two distinct variables, `(a, None)` for
/// `floor(a)`.
fn discontinuities(last: &Tensor) -> Vec<(Tensor, Option<Tensor>)> {
    let mut seen: Vec<Tensor> = Vec::new();
    let mut found = Vec::new();
    let mut stack = vec![last.clone()];
    while let Some(t) = stack.pop() {
        if seen.iter().any(|s| s.same(&t)) {
            continue;
        }
        seen.push(t.clone());
        let ins = t.owner_inputs();
        match t.owner_op() {
            Some(op)
                if op.is_elemwise(ScalarOp::Lt)
                    && !ins[0].same(&ins[1])
                    && (rounded(&ins[0]) || rounded(&ins[1])) =>
            {
                found.push((ins[0].clone(), Some(ins[1].clone())));
            }
            Some(op) if op.is_elemwise(ScalarOp::Floor) && rounded(&ins[0]) => {
                found.push((ins[0].clone(), None))
            }
            _ => {}
        }
        stack.extend(ins.iter().cloned());
    }
    found
}

/// Whether `a` and `b` are finite and within the test's tolerance of each
/// other (module docs).
fn near(a: f64, b: f64) -> bool {
    a.is_finite() && b.is_finite() && (a - b).abs() <= 1e-12 + 1e-9 * a.abs().max(b.abs())
}

/// Per element of `last` (shape `shape`), whether it depends on a near tie.
fn near_ties(ins: &[Tensor], last: &Tensor, vals: &[Value], shape: &[usize]) -> ArrayD<bool> {
    let mut mask = ArrayD::from_elem(IxDyn(shape), false);
    let found = discontinuities(last);
    let operands: Vec<Tensor> = found
        .iter()
        .flat_map(|(a, b)| std::iter::once(a.clone()).chain(b.clone()))
        .collect();
    if operands.is_empty() {
        return mask;
    }
    let fg = FunctionGraph::new(ins, &operands).unwrap();
    let values: Vec<ArrayD<f64>> = eval::evaluate(&fg, vals)
        .unwrap()
        .iter()
        .map(Value::to_f64_array)
        .collect();
    let mut next = values.iter();
    for (_, b) in &found {
        let a = next.next().unwrap().broadcast(IxDyn(shape)).unwrap();
        match b {
            Some(_) => {
                let b = next.next().unwrap().broadcast(IxDyn(shape)).unwrap();
                ndarray::Zip::from(&mut mask)
                    .and(&a)
                    .and(&b)
                    .for_each(|m, &a, &b| *m |= near(a, b));
            }
            None => ndarray::Zip::from(&mut mask)
                .and(&a)
                .for_each(|m, &a| *m |= near(a, a.round())),
        }
    }
    mask
}

/// `mask` carried through `reduce`: a reduced element depends on a near
/// tie when any element it reduces does.
fn reduce_mask(mask: ArrayD<bool>, reduce: Option<(usize, u8)>) -> ArrayD<bool> {
    let Some((axis, _)) = reduce else { return mask };
    match reduced_axis(axis) {
        None => ArrayD::from_elem(IxDyn(&[]), mask.iter().any(|&m| m)),
        Some(a) => mask.map_axis(ndarray::Axis(a[0] as usize), |lane| lane.iter().any(|&m| m)),
    }
}

/// `got` against `want` element by element within the test's tolerance,
/// skipping the elements `exempt` marks (module docs); dtypes and shapes
/// must match exactly.
fn close_outside(got: &Value, want: &Value, exempt: &ArrayD<bool>) -> bool {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return false;
    }
    // The exempt elements take the reference's values; then one allclose.
    let mut g = got.to_f64_array();
    ndarray::Zip::from(&mut g)
        .and(&want.to_f64_array())
        .and(exempt)
        .for_each(|g, &w, &skip| {
            if skip {
                *g = w;
            }
        });
    Value::from_f64_array(got.dtype(), g).allclose(want, 1e-9, 1e-12)
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
        let (ins, last, out) = build(&steps, reduce);
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
            (Ok(g), Ok(w)) => {
                let shape: Vec<usize> = if last.ty().shape[0] == Some(1) { vec![1, cols] } else { vec![rows, cols] };
                let exempt = reduce_mask(near_ties(&ins, &last, &vals, &shape), reduce);
                prop_assert!(close_outside(&g[0], &w[0], &exempt), "{:?} vs {:?}", g[0], w[0]);
            }
            (Err(_), Err(_)) => {}
            (g, w) => prop_assert!(false, "jit {:?} vs reference {:?}", g.map(|_| ()), w.map(|_| ())),
        }
    }
}
