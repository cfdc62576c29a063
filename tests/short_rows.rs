//! Element-wise kernels over many short rows that do not run on into each
//! other (`X + b` or `X * c` for an `X` of rows of a few elements, a slice
//! `X[:, :4]` of wider rows): the driver runs blocks of the flattened rows
//! per kernel call, reading a row repeated everywhere from a buffer of it
//! repeated and gathering other inputs row by row. The results are those
//! of the same kernel on the inputs materialised to the full shape, bit
//! for bit, and the reference evaluator's (bit for bit for exact ops,
//! within 2 ULP for `tanh`, whose contiguous path is the runtime's block
//! function), for row lengths around the limit, row counts that end
//! inside a block, outer dimensions, several such inputs, columns, slices,
//! reversed and strided rows, and calls large enough to be split over
//! threads.

mod jit_support;
use jit_support::*;
use kiln::linker::{compile, Arg, CompileOptions, Function};
use kiln::{eval, tensor, DType, FunctionGraph, Tensor, Value};
use ndarray::{s, ArrayD, IxDyn};

/// `tanh`'s bound against the reference (the runtime's block function).
const TANH_ULPS: u64 = 2;

/// The graph of `outputs` over `inputs`, and its compiled function.
fn compiled(inputs: &[Tensor], outputs: &[Tensor]) -> (FunctionGraph, Function) {
    let fg = FunctionGraph::new(inputs, outputs).expect("graph");
    let f = compile(&fg, &CompileOptions::default()).expect("compile");
    (fg, f)
}

/// `row` repeated to `shape` (its last dimension), as a row-major array.
fn materialised(row: &Value, shape: &[usize]) -> Value {
    kiln::map_value!(row, a => a.broadcast(IxDyn(shape)).expect("broadcastable").as_standard_layout().into_owned())
}

/// Runs `f` (inputs X and the repeated rows) and `full` (the same with
/// each repeated row materialised) and checks both against the reference.
fn check_case(
    (fg, f): &(FunctionGraph, Function),
    full: &Function,
    vals: &[Value],
    args: &[Arg<'_>],
    ulps: u64,
    what: &str,
) {
    let got = f.call(args).expect("call");
    let shape = vals[0].shape().to_vec();
    let full_vals: Vec<Value> = std::iter::once(vals[0].clone())
        .chain(vals[1..].iter().map(|v| materialised(v, &shape)))
        .collect();
    let full_args: Vec<Arg<'_>> = full_vals.iter().map(Arg::from).collect();
    let want_full = full.call(&full_args).expect("call on materialised rows");
    let want = eval::evaluate(fg, vals).expect("reference");
    for (k, ((g, w), r)) in got.iter().zip(&want_full).zip(&want).enumerate() {
        assert_values(
            g,
            w,
            0,
            &format!("{what}: output {k} against materialised rows"),
        );
        assert_values(
            g,
            r,
            ulps,
            &format!("{what}: output {k} against the reference"),
        );
    }
}

#[test]
fn rows_of_every_short_length_match_materialised_rows_and_the_reference() {
    for dtype in [DType::F64, DType::F32, DType::I64] {
        let x = tensor("x", dtype, &[None, None]);
        let w = tensor("w", dtype, &[None]);
        let b = tensor("b", dtype, &[None]);
        let xm = tensor("x", dtype, &[None, None]);
        let wm = tensor("w", dtype, &[None, None]);
        let bm = tensor("b", dtype, &[None, None]);
        // Floats: a transcendental of a sum and an affine map of two
        // repeated rows; integers: the affine map and a comparison.
        let outs = |x: &Tensor, w: &Tensor, b: &Tensor| -> Vec<Tensor> {
            let affine = &(x * w) + b;
            if dtype.is_float() {
                vec![(x + b).tanh(), affine]
            } else {
                vec![affine, kiln::gt(x, b).expect("comparison")]
            }
        };
        let f = compiled(&[x.clone(), w.clone(), b.clone()], &outs(&x, &w, &b));
        let (_, full) = compiled(&[xm.clone(), wm.clone(), bm.clone()], &outs(&xm, &wm, &bm));
        let ulps = if dtype.is_float() { TANH_ULPS } else { 0 };
        for &n in &[2usize, 3, 4, 7, 16, 127, 128, 300] {
            for &rows in &[2usize, 5, 341, 1000] {
                let seed = (n * 1000 + rows) as u64;
                let vals = [
                    rand_value(dtype, &[rows, n], seed),
                    rand_value(dtype, &[n], seed + 1),
                    rand_value(dtype, &[n], seed + 2),
                ];
                let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
                check_case(
                    &f,
                    &full,
                    &vals,
                    &args,
                    ulps,
                    &format!("{dtype} {rows}x{n}"),
                );
            }
        }
    }
}

#[test]
fn outer_dimensions_leftover_rows_and_rows_that_vary_outside() {
    let x = tensor("x", DType::F64, &[None, None, None]);
    let b = tensor("b", DType::F64, &[None]);
    let xm = tensor("x", DType::F64, &[None, None, None]);
    let bm = tensor("b", DType::F64, &[None, None, None]);
    let f = compiled(&[x.clone(), b.clone()], &[(&x + &b).tanh()]);
    let (_, full) = compiled(&[xm.clone(), bm.clone()], &[(&xm + &bm).tanh()]);
    // 700 rows of 3 per outer position: two whole groups of 341 rows and
    // 18 left over, in each of 3 outer positions.
    for shape in [[3usize, 700, 3], [4, 50, 4], [2, 1, 5]] {
        let vals = [
            rand_value(DType::F64, &shape, 11),
            rand_value(DType::F64, &shape[2..], 12),
        ];
        let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
        check_case(&f, &full, &vals, &args, TANH_ULPS, &format!("{shape:?}"));
    }
    // A row that differs between outer positions (gathered), and a column
    // of one value per row (gathered, each value repeated along its row).
    for cshape in [[3usize, 1, 3], [3, 700, 1]] {
        let c = tensor("c", DType::F64, &cshape.map(|d| (d == 1).then_some(1)));
        let (fg, g) = compiled(&[x.clone(), c.clone()], &[&x * &c]);
        let vals = [
            rand_value(DType::F64, &[3, 700, 3], 13),
            rand_value(DType::F64, &cshape, 14),
        ];
        let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
        let got = g.call(&args).expect("call");
        let want = eval::evaluate(&fg, &vals).expect("reference");
        assert_values(&got[0], &want[0], 0, &format!("c of shape {cshape:?}"));
    }
}

#[test]
fn columns_and_slices_of_wider_rows_are_gathered() {
    // Rows of 2, 4 and 8 take the column's whole-row stores, the others
    // its element-by-element gather; every element size (u8 wraps alike in
    // both).
    for dtype in [DType::F64, DType::F32, DType::I64, DType::I16, DType::U8] {
        let x = tensor("x", dtype, &[None, None]);
        let c = tensor("c", dtype, &[None, Some(1)]);
        let (fg, f) = compiled(&[x.clone(), c.clone()], &[&(&x * &c) + &c]);
        for (rows, n) in [
            (2usize, 3usize),
            (1000, 4),
            (333, 7),
            (50_001, 4),
            (777, 2),
            (129, 8),
            (3, 8),
            (30_001, 8),
        ] {
            let vals = [
                rand_value(dtype, &[rows, n], rows as u64),
                rand_value(dtype, &[rows, 1], rows as u64 + 1),
            ];
            let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
            let got = f.call(&args).expect("call");
            let want = eval::evaluate(&fg, &vals).expect("reference");
            assert_values(&got[0], &want[0], 0, &format!("{dtype} column {rows}x{n}"));
        }
    }
    // The first 4 (and, reversed, the last 4) of rows of 9, and every
    // other element of rows of 8.
    let x = tensor("x", DType::F64, &[None, None]);
    let (fg, f) = compiled(std::slice::from_ref(&x), &[(&x + 1.0).tanh()]);
    let wide = rand_f64(&[30_001, 9], 41, -3.0, 3.0);
    for view in [
        wide.slice(s![.., ..4]).into_dyn(),
        wide.slice(s![.., 5..;-1]).into_dyn(),
        wide.slice(s![.., ..8;2]).into_dyn(),
    ] {
        let got = f.call(&[Arg::from(view.clone())]).expect("call on a slice");
        let vals = [Value::F64(view.to_owned())];
        let want = eval::evaluate(&fg, &vals).expect("reference").remove(0);
        assert_values(
            &got[0],
            &want,
            TANH_ULPS,
            &format!("slice {:?}", view.strides()),
        );
        let whole = f
            .call(&[Arg::from(&view.to_owned())])
            .expect("call on a copy");
        assert_values(&got[0], &whole[0], 0, "slice against its contiguous copy");
    }
}

#[test]
fn reversed_and_strided_rows_and_a_fortran_ordered_input() {
    let x = tensor("x", DType::F64, &[None, None]);
    let b = tensor("b", DType::F64, &[None]);
    let (fg, f) = compiled(&[x.clone(), b.clone()], &[&(&x * 2.0) + &b]);
    let xv = rand_f64(&[1001, 4], 21, -3.0, 3.0);
    let wide = rand_f64(&[8], 22, -3.0, 3.0);
    let want_of = |bv: ArrayD<f64>| {
        let vals = [Value::F64(xv.clone()), Value::F64(bv)];
        eval::evaluate(&fg, &vals).expect("reference").remove(0)
    };
    let reversed = wide.slice(s![4..;-1]).into_dyn();
    let got = f
        .call(&[Arg::from(&xv), Arg::from(reversed.clone())])
        .expect("reversed row");
    assert_values(&got[0], &want_of(reversed.to_owned()), 0, "reversed row");
    let stepped = wide.slice(s![..;2]).into_dyn();
    let got = f
        .call(&[Arg::from(&xv), Arg::from(stepped.clone())])
        .expect("step-2 row");
    assert_values(&got[0], &want_of(stepped.to_owned()), 0, "step-2 row");
    // X in Fortran order: its rows are strided, its columns long and
    // contiguous, so the kernel runs down the columns instead.
    let fortran = xv.t().as_standard_layout().into_owned().reversed_axes();
    let got = f
        .call(&[
            Arg::from(&fortran),
            Arg::from(&wide.slice(s![..4]).to_owned().into_dyn()),
        ])
        .expect("Fortran-ordered X");
    let vals = [
        Value::F64(xv.clone()),
        Value::F64(wide.slice(s![..4]).to_owned().into_dyn()),
    ];
    let want = eval::evaluate(&fg, &vals).expect("reference").remove(0);
    assert_values(&got[0], &want, 0, "Fortran-ordered X");
}

#[test]
fn calls_split_over_threads_match_materialised_rows() {
    let x = tensor("x", DType::F64, &[None, None]);
    let b = tensor("b", DType::F64, &[None]);
    let xm = tensor("x", DType::F64, &[None, None]);
    let bm = tensor("b", DType::F64, &[None, None]);
    let f = compiled(&[x.clone(), b.clone()], &[(&x + &b).tanh()]);
    let (_, full) = compiled(&[xm.clone(), bm.clone()], &[(&xm + &bm).tanh()]);
    // 200 001 rows of 4 (800 004 elements: past the parallel threshold,
    // with rows over after the last group).
    let vals = [
        rand_value(DType::F64, &[200_001, 4], 31),
        rand_value(DType::F64, &[4], 32),
    ];
    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
    check_case(&f, &full, &vals, &args, TANH_ULPS, "200001x4");
}
