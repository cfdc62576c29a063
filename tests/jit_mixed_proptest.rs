//! Property test: random element-wise graphs mixing `f64`, `f32` and `i32`
//! values (casts between them, implicit promotion, comparisons and
//! selections, row broadcasting), JIT against the reference evaluator, bit
//! for bit. The graphs are compiled with fusion but without the algebraic
//! rewrites (canonicalize, stabilize, specialize), so that each kernel
//! computes the graph's own operations in their order. Every op here is
//! exact in the reference's semantics: `f32` arithmetic rounds once, as the
//! reference's `f64` evaluation rounded to `f32` does; integers wrap; casts
//! to `i32` saturate; maxima and minima reduce in any order. So no element
//! is exempt and no tolerance applies. The fused kernels exercise the
//! vector path's narrow lanes, inputs converted on load and results
//! narrowed on store, at lengths around the vector boundaries, on inputs
//! holding NaN, ±inf, signed zeros and integers over their whole range.
mod jit_support;
use jit_support::*;
use kiln::rewriting::Mode;
use kiln::{elemwise, eval, function, tensor, DType, FunctionGraph, ReduceOp, ScalarOp, Tensor};
use proptest::prelude::*;

const UNARY: [ScalarOp; 3] = [ScalarOp::Neg, ScalarOp::Abs, ScalarOp::Sqr];
const BINARY: [ScalarOp; 5] = [
    ScalarOp::Add,
    ScalarOp::Sub,
    ScalarOp::Mul,
    ScalarOp::Maximum,
    ScalarOp::Minimum,
];
const CASTS: [DType; 3] = [DType::F64, DType::F32, DType::I32];

#[derive(Debug, Clone)]
enum Step {
    Unary(usize, usize),
    Binary(usize, usize, usize),
    Cast(usize, usize),
    Where(usize, usize, usize, usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..UNARY.len(), 0..64usize).prop_map(|(o, a)| Step::Unary(o, a)),
        (0..BINARY.len(), 0..64usize, 0..64usize).prop_map(|(o, a, b)| Step::Binary(o, a, b)),
        (0..CASTS.len(), 0..64usize).prop_map(|(d, a)| Step::Cast(d, a)),
        (0..64usize, 0..64usize, 0..64usize, 0..64usize)
            .prop_map(|(a, b, c, d)| Step::Where(a, b, c, d)),
    ]
}

/// The inputs: `x` (`f32`), `y` (`f64`), `a` (`i32`) matrices and `r`, an
/// `f64` row broadcast along the rows.
fn inputs() -> Vec<Tensor> {
    vec![
        tensor("x", DType::F32, &[None, None]),
        tensor("y", DType::F64, &[None, None]),
        tensor("a", DType::I32, &[None, None]),
        tensor("r", DType::F64, &[Some(1), None]),
    ]
}

/// The graph of `steps` on `ins`: its last value, reduced by the maximum
/// or the minimum over the rows when `reduce` says so.
fn build(ins: &[Tensor], steps: &[Step], reduce: Option<bool>) -> Tensor {
    let mut pool = ins.to_vec();
    for s in steps {
        let n = pool.len();
        let t = match *s {
            Step::Unary(o, a) => elemwise(UNARY[o], &[&pool[a % n]]),
            Step::Binary(o, a, b) => elemwise(BINARY[o], &[&pool[a % n], &pool[b % n]]),
            Step::Cast(d, a) => elemwise(ScalarOp::Cast(CASTS[d]), &[&pool[a % n]]),
            Step::Where(a, b, c, d) => {
                let cond = elemwise(ScalarOp::Gt, &[&pool[a % n], &pool[b % n]]).unwrap();
                elemwise(ScalarOp::Switch, &[&cond, &pool[c % n], &pool[d % n]])
            }
        }
        .unwrap();
        pool.push(t);
    }
    let last = pool.last().unwrap().clone();
    match reduce {
        Some(max) => {
            let op = if max { ReduceOp::Max } else { ReduceOp::Min };
            last.reduce(op, Some(&[0]), false).unwrap()
        }
        None => last,
    }
}

/// Values of `dtype`: every float class (NaN, ±inf, signed zeros among
/// finite values), or integers anywhere in the `i32` range with its
/// extremes, -1 and small values.
fn values(dtype: DType, shape: &[usize], seed: u64) -> kiln::Value {
    if dtype.is_float() {
        return rand_value(dtype, shape, seed);
    }
    int_values(dtype, shape, seed, |e, s| match e % 9 {
        0 => i64::from(i32::MIN),
        1 => i64::from(i32::MAX),
        2 => -1,
        3 | 4 => (s % 7) as i64 - 3,
        _ => s as i64,
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn random_mixed_dtype_graphs_match_the_reference_bit_for_bit(
        steps in proptest::collection::vec(step(), 1..8),
        reduce in proptest::option::of(any::<bool>()),
        rows in 1..4usize,
        cols in prop_oneof![1..10usize, 120..140usize],
        seed in 0..1000u64,
    ) {
        let ins = inputs();
        let out = build(&ins, &steps, reduce);
        let fg = FunctionGraph::new(&ins, std::slice::from_ref(&out)).unwrap();
        let mode = Mode::fast_run().excluding(&["canonicalize", "stabilize", "specialize"]);
        let f = function(&ins, std::slice::from_ref(&out)).mode(mode).compile().unwrap();
        let vals = [
            values(DType::F32, &[rows, cols], seed),
            values(DType::F64, &[rows, cols], seed + 1),
            values(DType::I32, &[rows, cols], seed + 2),
            values(DType::F64, &[1, cols], seed + 3),
        ];
        let want = eval::evaluate(&fg, &vals).unwrap();
        let got = f.call_values(&vals).unwrap();
        assert_values(&got[0], &want[0], 0, &format!("{steps:?} reduce {reduce:?} ({rows} x {cols})"));
    }
}
