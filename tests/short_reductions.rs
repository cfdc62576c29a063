//! Reductions over short innermost rows (`sum(X, axis=1)` for an `X` of
//! rows of a few elements): the driver runs them as column reductions over
//! blocks of rows, one accumulator per row adding the row's elements in
//! order, with the rows' inputs gathered into contiguous columns. Each
//! row's result is then the sequential fold of its elements, the reference
//! evaluator's, so the JIT equals the reference bit for bit (NaNs and
//! signed zeros included), for every row length under the limit, row
//! counts around the block size, plain and fused reductions, integer and
//! f32 inputs, 3-d inputs, strided and Fortran-ordered rows, and calls
//! large enough to be split over threads.

mod jit_support;
use jit_support::*;
use kiln::linker::Arg;
use kiln::{eval, tensor, DType, FunctionGraph, ReduceOp, Tensor, Value};
use ndarray::s;

/// The reductions over the last axis of `x` that `dtype` supports.
fn reductions(x: &Tensor, dtype: DType, axis: usize) -> Vec<Tensor> {
    let ops: &[ReduceOp] = if dtype.is_float() {
        &[ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min]
    } else {
        &[ReduceOp::Sum, ReduceOp::Max]
    };
    ops.iter()
        .map(|&op| x.reduce(op, Some(&[axis as isize]), false).unwrap())
        .collect()
}

#[test]
fn short_rows_reduce_bit_exactly_at_every_length() {
    for dtype in [DType::F64, DType::F32, DType::I64] {
        let x = tensor("x", dtype, &[None, None]);
        let outs = reductions(&x, dtype, 1);
        // Rows of 16 or more take the row passes, whose lane order
        // reassociates (tested in jit_vector_paths and reduce_fusion).
        for n in 2..16usize {
            for rows in [2usize, 5, 63, 64, 65, 1000] {
                let v = rand_value(dtype, &[rows, n], (n * 100 + rows) as u64);
                check(
                    std::slice::from_ref(&x),
                    &outs,
                    &[v],
                    0,
                    &format!("{dtype} {rows}x{n}"),
                );
            }
        }
    }
}

#[test]
fn static_row_lengths_take_the_short_rows_too() {
    // A static row length (`shape=(None, 4)`) compiles the kernel's column
    // mode as well, so these rows are short rows too: the sequential fold
    // per row, bit for bit (the row mode's lane order differs from it for
    // some of a thousand random rows).
    for n in [2usize, 4, 7, 15] {
        let x = tensor("x", DType::F64, &[None, Some(n)]);
        let outs = reductions(&x, DType::F64, 1);
        let v = rand_value(DType::F64, &[1000, n], n as u64);
        check(
            std::slice::from_ref(&x),
            &outs,
            &[v],
            0,
            &format!("static {n}"),
        );
    }
}

#[test]
fn fused_reductions_three_dimensions_and_keepdims() {
    let x = tensor("x", DType::F64, &[None, None]);
    let b = tensor("b", DType::F64, &[None]);
    let c = tensor("c", DType::F64, &[None, Some(1)]);
    let outs = vec![
        (&x * &b).reduce(ReduceOp::Sum, Some(&[1]), false).unwrap(),
        (&x - &c)
            .sqr()
            .reduce(ReduceOp::Sum, Some(&[1]), true)
            .unwrap(),
    ];
    let vals = [
        rand_value(DType::F64, &[777, 5], 1),
        rand_value(DType::F64, &[5], 2),
        rand_value(DType::F64, &[777, 1], 3),
    ];
    check(&[x.clone(), b, c], &outs, &vals, 0, "fused");
    // The kernel's exp is the runtime's block function, within 2 ULP of the
    // reference's (jit_ops); the max of those values is exact.
    let y = x.exp().reduce(ReduceOp::Max, Some(&[1]), false).unwrap();
    check(std::slice::from_ref(&x), &[y], &vals[..1], 2, "max of exp");
    // Rows of 4 under two kept outer dimensions, and a reduction whose
    // outer dimension is reduced too (not taken as short rows).
    let x3 = tensor("x", DType::F64, &[None, None, None]);
    let outs = vec![
        x3.reduce(ReduceOp::Sum, Some(&[2]), false).unwrap(),
        x3.reduce(ReduceOp::Sum, Some(&[0, 2]), false).unwrap(),
    ];
    let v = rand_value(DType::F64, &[7, 300, 4], 4);
    check(std::slice::from_ref(&x3), &outs, &[v], 0, "3-d");
}

#[test]
fn strided_and_fortran_ordered_rows() {
    let x = tensor("x", DType::F64, &[None, None]);
    let outs = reductions(&x, DType::F64, 1);
    let fg = FunctionGraph::new(std::slice::from_ref(&x), &outs).expect("graph");
    let f = kiln::linker::compile(&fg, &Default::default()).expect("compile");
    let wide = rand_f64(&[1001, 8], 5, -3.0, 3.0);
    let fortran = wide.t().as_standard_layout().into_owned().reversed_axes();
    for (what, view) in [
        ("every other element", wide.slice(s![.., ..;2]).into_dyn()),
        ("reversed rows", wide.slice(s![.., 5..;-1]).into_dyn()),
        ("Fortran order", fortran.slice(s![.., ..5]).into_dyn()),
    ] {
        let got = f.call(&[Arg::from(view.clone())]).expect("call");
        let want = eval::evaluate(&fg, &[Value::F64(view.to_owned())]).expect("reference");
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_values(g, w, 0, &format!("{what}: output {k}"));
        }
    }
}

#[test]
fn calls_split_over_threads() {
    let x = tensor("x", DType::F64, &[None, None]);
    let outs = reductions(&x, DType::F64, 1);
    let v = rand_value(DType::F64, &[300_001, 4], 6);
    check(std::slice::from_ref(&x), &outs, &[v], 0, "300001x4");
}
