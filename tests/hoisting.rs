//! One-element producers fused into the kernel of their consumer and
//! computed once per call (`rewrites::fusion`, `linker::codegen::hoist`):
//! FAST_RUN leaves one kernel where it left one per pattern, and the JIT
//! computes the reference evaluator's bits on every path (vector and
//! scalar, contiguous and strided, empty and parallel-sized inputs,
//! element-wise and fused reductions).
mod jit_support;
use std::collections::HashMap;

use jit_support::*;
use kiln::linker::Arg;
use kiln::rewriting::Mode;
use kiln::{
    build_expression, eval, function, grad, tensor, CompiledFunction, DType, FunctionGraph, Tensor,
    Value,
};
use ndarray::{arr0, ArrayD, ArrayViewD, IxDyn};

/// Builds `src` over `decls` (`(name, dtype, static shape)`).
fn build(src: &str, decls: &[(&str, DType, &[Option<usize>])]) -> (Vec<Tensor>, Tensor) {
    let ins: Vec<Tensor> = decls.iter().map(|(n, d, s)| tensor(n, *d, s)).collect();
    let vars: HashMap<String, Tensor> = decls
        .iter()
        .zip(&ins)
        .map(|((n, ..), t)| (n.to_string(), t.clone()))
        .collect();
    (
        ins.clone(),
        build_expression(src, &vars).expect("expression"),
    )
}

/// `outs` of `ins` compiled under FAST_RUN, asserted to have `kernels` JIT kernels.
fn compiled(ins: &[Tensor], outs: &[Tensor], kernels: usize) -> CompiledFunction {
    let f = function(ins, outs)
        .mode(Mode::fast_run())
        .compile()
        .unwrap();
    assert_eq!(
        f.compile_profile().n_kernels,
        kernels,
        "kernels of {}",
        f.graph()
    );
    f
}

/// Compiles under FAST_RUN, checks the kernel count, and compares every
/// output with the reference evaluator's on the un-rewritten graph, within
/// `max_ulps` (0: the same bits).
fn check(ins: &[Tensor], outs: &[Tensor], vals: &[Value], kernels: usize, max_ulps: u64) {
    let f = compiled(ins, outs, kernels);
    let want = eval::evaluate(&FunctionGraph::new(ins, outs).unwrap(), vals).unwrap();
    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
    // Both tiers: the first call may run either; after `wait_final` the final one.
    for _ in 0..2 {
        let got = f.call(&args).unwrap();
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_values(g, w, max_ulps, &format!("output {k} of {}", f.graph()));
        }
        f.wait_final();
    }
}

fn f64s(shape: &[usize], seed: u64) -> Value {
    Value::F64(rand_f64(shape, seed, -3.0, 3.0))
}

#[test]
fn a_scalar_cast_and_exp_are_computed_in_the_vector_kernel() {
    let (ins, y) = build(
        "x / cast(n, \"f64\") + exp(a) * x",
        &[
            ("x", DType::F64, &[None]),
            ("n", DType::I64, &[]),
            ("a", DType::F64, &[]),
        ],
    );
    for len in [0, 1, 3, 17, 1000, 300_001] {
        let vals = [
            f64s(&[len], len as u64),
            Value::I64(arr0(7i64).into_dyn()),
            Value::F64(arr0(-0.75).into_dyn()),
        ];
        check(&ins, std::slice::from_ref(&y), &vals, 1, 0);
    }
}

#[test]
fn strided_and_transposed_operands_take_the_scalar_path_with_the_prologue() {
    let (ins, y) = build(
        "sqrt(abs(X * sqrt(a) - b))",
        &[
            ("X", DType::F64, &[None, None]),
            ("a", DType::F64, &[]),
            ("b", DType::F64, &[]),
        ],
    );
    let f = compiled(&ins, std::slice::from_ref(&y), 1);
    let fg = FunctionGraph::new(&ins, std::slice::from_ref(&y)).unwrap();
    let big = rand_f64(&[40, 62], 3, -2.0, 2.0);
    let (a, b) = (
        Value::F64(arr0(2.25).into_dyn()),
        Value::F64(arr0(0.5).into_dyn()),
    );
    // Contiguous, transposed, every other column.
    let views: [ArrayViewD<'_, f64>; 3] = [
        big.view(),
        big.t(),
        big.slice(ndarray::s![.., ..;2]).into_dyn(),
    ];
    for (k, x) in views.iter().enumerate() {
        let want = eval::evaluate(&fg, &[Value::F64(x.to_owned()), a.clone(), b.clone()]).unwrap();
        let got = f
            .call(&[Arg::from(x), Arg::from(&a), Arg::from(&b)])
            .unwrap();
        assert_values(&got[0], &want[0], 0, &format!("view {k}"));
    }
}

#[test]
fn fused_reductions_hoist_too() {
    let (ins, y) = build(
        "sum(sqrt(abs(x - exp(a) / cast(n, \"f64\"))))",
        &[
            ("x", DType::F64, &[None]),
            ("a", DType::F64, &[]),
            ("n", DType::I64, &[]),
        ],
    );
    let f = compiled(&ins, std::slice::from_ref(&y), 1);
    let fg = FunctionGraph::new(&ins, std::slice::from_ref(&y)).unwrap();
    for len in [0, 5, 4099, 200_000] {
        let vals = [
            f64s(&[len], 11 + len as u64),
            Value::F64(arr0(0.3).into_dyn()),
            Value::I64(arr0(3i64).into_dyn()),
        ];
        let want = eval::evaluate(&fg, &vals).unwrap();
        let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
        let got = f.call(&args).unwrap();
        // The sum's order differs from the reference's sequential one.
        assert_close(&got[0], &want[0], 1e-12, &format!("sum of {len}"));
    }
}

#[test]
fn integer_programs_hoist_their_invariant_part() {
    let (ins, y) = build(
        "x * (k * 3 + 1) - k",
        &[("x", DType::I64, &[None]), ("k", DType::I64, &[])],
    );
    let x = Value::I64(ArrayD::from_shape_fn(IxDyn(&[1001]), |i| i[0] as i64 - 500));
    check(&ins, &[y], &[x, Value::I64(arr0(-4i64).into_dyn())], 1, 0);
}

#[test]
fn the_gradient_of_a_mean_is_one_kernel() {
    // d/dz mean(t * log(sigmoid(z))): the 1 / n of the mean's gradient is
    // a one-element cast of the length, computed in the kernel.
    let (ins, cost) = build(
        "mean(t * log(sigmoid(z)))",
        &[("t", DType::F64, &[None]), ("z", DType::F64, &[None])],
    );
    let g = grad(&cost, &ins[1..]).unwrap();
    let vals = [f64s(&[5001], 1), f64s(&[5001], 2)];
    let f = compiled(&ins, &g, 1);
    // The reference on the rewritten graph (the rewrites change the formula:
    // `t * sigmoid(-z)` for `t / sigmoid(z) * sigmoid(z) * (1 - sigmoid(z))`).
    let want = eval::evaluate(f.graph(), &vals).unwrap();
    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
    let got = f.call(&args).unwrap();
    // 4 ULP: the vector path's block sigmoid (<= 2 ULP, runtime/ACCURACY.md)
    // against the reference's 1/(1+exp(-x)) (<= 2 ULP itself); the hoisted
    // cast and the division are exact.
    assert_values(&got[0], &want[0], 4, "d mean / dz");
}
