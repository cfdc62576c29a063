//! Advanced indexing and joins (`take`, the indexed updates, boolean
//! masks, `concatenate`, `stack`, `split`): type inference and its
//! messages, reference values as numpy documents them (negative indices,
//! duplicates accumulating as `np.add.at`, empty arrays), run-time errors,
//! and the native linker steps against the reference evaluator on every
//! index dtype and several layouts, with no rewriting and under FAST_RUN.
// Graph builders take slices of tensors; cloning into array literals reads best here.
#![allow(clippy::cloned_ref_to_slice_refs)]

mod jit_support;
use jit_support::*;

use std::collections::HashMap;

use kiln::eval::evaluate;
use kiln::linker::{compile, Arg, CompileOptions};
use kiln::rewriting::Mode;
use kiln::{
    advanced_inc_subtensor1, advanced_set_subtensor1, boolean_mask, build_expression, concatenate,
    function, split, split_by, stack, take, tensor, DType, FunctionGraph, Tensor, Value,
};
use ndarray::{arr1, arr2, s, ArrayD, IxDyn};

fn f64v(shape: &[usize], v: Vec<f64>) -> Value {
    Value::F64(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
}

fn i64v(shape: &[usize], v: Vec<i64>) -> Value {
    Value::I64(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
}

fn input_of(name: &str, v: &Value) -> Tensor {
    let shape: Vec<Option<usize>> = v.shape().iter().map(|_| None).collect();
    tensor(name, v.dtype(), &shape)
}

/// The reference value of `out` over `ins` = `vals`.
fn reference(ins: &[Tensor], out: &Tensor, vals: &[Value]) -> kiln::Result<Value> {
    let fg = FunctionGraph::new(ins, &[out.clone()])?;
    Ok(evaluate(&fg, vals)?.remove(0))
}

/// The compiled value (no rewriting) of `out` over `ins` = `vals`.
fn jit(ins: &[Tensor], out: &Tensor, vals: &[Value]) -> kiln::Result<Value> {
    let fg = FunctionGraph::new(ins, &[out.clone()])?;
    let f = compile(&fg, &CompileOptions::default())?;
    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
    Ok(f.call(&args)?.remove(0))
}

/// Reference, JIT with no rewriting and FAST_RUN agree exactly; returns the value.
fn agree(ins: &[Tensor], out: &Tensor, vals: &[Value], what: &str) -> Value {
    let want = reference(ins, out, vals).expect("reference");
    check(ins, &[out.clone()], vals, 0, what);
    let f = function(ins, &[out.clone()])
        .mode(Mode::fast_run())
        .compile()
        .expect("compile");
    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
    let got = f.call(&args).expect("call");
    assert_values(&got[0], &want, 0, &format!("{what} (fast_run)"));
    want
}

fn type_err(r: kiln::Result<Tensor>) -> String {
    match r {
        Ok(t) => panic!("expected a type error, got {}", t.ty()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn take_types_and_errors() {
    let x = tensor("x", DType::F32, &[Some(5), None, Some(3)]);
    let i = tensor("i", DType::I16, &[Some(2), Some(7)]);
    let t = take(&x, &i, 0).unwrap();
    assert_eq!(t.ty().shape, vec![Some(2), Some(7), None, Some(3)]);
    assert_eq!(t.dtype(), DType::F32);
    let t = take(&x, &i, -1).unwrap();
    assert_eq!(t.ty().shape, vec![Some(5), None, Some(2), Some(7)]);
    let f = tensor("f", DType::F64, &[None]);
    assert!(type_err(take(&x, &f, 0)).contains("the index must be an integer tensor"));
    let b = tensor("b", DType::Bool, &[None]);
    assert!(type_err(take(&x, &b, 0)).contains("use boolean_mask"));
    let s = tensor("s", DType::I64, &[]);
    assert!(type_err(take(&x, &s, 0)).contains("at least one dimension"));
    assert!(type_err(take(&x, &i, 3)).contains("axis 3 is out of range"));
    assert!(type_err(take(&x, &i, -4)).contains("axis -4 is out of range"));
}

#[test]
fn update_types_and_errors() {
    let x = tensor("x", DType::F32, &[Some(5), Some(3)]);
    let i = tensor("i", DType::I64, &[Some(4)]);
    let y = tensor("y", DType::I16, &[Some(1), Some(3)]);
    let t = advanced_inc_subtensor1(&x, 0, &i, &y).unwrap();
    assert_eq!(t.ty(), x.ty());
    let y64 = tensor("y", DType::F64, &[Some(3)]);
    assert!(type_err(advanced_set_subtensor1(&x, 0, &i, &y64)).contains("without a downcast"));
    let ybad = tensor("y", DType::F32, &[Some(2), Some(3)]);
    assert!(type_err(advanced_inc_subtensor1(&x, 0, &i, &ybad)).contains("does not broadcast"));
    let y3 = tensor("y", DType::F32, &[None, None, None]);
    assert!(type_err(advanced_inc_subtensor1(&x, 0, &i, &y3)).contains("more dimensions"));
}

#[test]
fn mask_join_split_types_and_errors() {
    let x = tensor("x", DType::I32, &[Some(4), Some(3)]);
    let m = tensor("m", DType::Bool, &[Some(4)]);
    assert_eq!(
        boolean_mask(&x, &m).unwrap().ty().shape,
        vec![None, Some(3)]
    );
    let m2 = tensor("m", DType::Bool, &[None, None]);
    assert_eq!(boolean_mask(&x, &m2).unwrap().ty().shape, vec![None]);
    let mi = tensor("m", DType::I64, &[Some(4)]);
    assert!(type_err(boolean_mask(&x, &mi)).contains("the mask must be a bool tensor"));
    let mw = tensor("m", DType::Bool, &[Some(5)]);
    assert!(type_err(boolean_mask(&x, &mw)).contains("does not match x"));

    let a = tensor("a", DType::I16, &[Some(2), Some(3)]);
    let b = tensor("b", DType::F32, &[None, Some(3)]);
    let j = concatenate(&[&x, &a], 0).unwrap();
    assert_eq!(
        (j.dtype(), j.ty().shape.clone()),
        (DType::I32, vec![Some(6), Some(3)])
    );
    let j = concatenate(&[&x, &b], -2).unwrap();
    assert_eq!(
        (j.dtype(), j.ty().shape.clone()),
        (DType::F64, vec![None, Some(3)])
    );
    assert!(type_err(concatenate(&[&x, &a], 1)).contains("differ in dimension 0"));
    let v = tensor("v", DType::I32, &[None]);
    assert!(type_err(concatenate(&[&x, &v], 0)).contains("dimensions"));
    assert!(type_err(concatenate(&[], 0)).contains("at least one"));
    let st = stack(&[&x, &x], -1).unwrap();
    assert_eq!(st.ty().shape, vec![Some(4), Some(3), Some(2)]);

    let parts = split(&x, &[1, 3], 0).unwrap();
    assert_eq!(parts[0].ty().shape, vec![Some(1), Some(3)]);
    assert_eq!(parts[1].ty().shape, vec![Some(3), Some(3)]);
    let e = split(&x, &[1, 2], 0).unwrap_err().to_string();
    assert!(e.contains("do not sum to the axis length 4"), "{e}");
    let e = split(&x, &[5, -1], 0).unwrap_err().to_string();
    assert!(e.contains("negative size -1"), "{e}");
    let sz = tensor("s", DType::I64, &[None]);
    let e = split_by(&x, &sz, 0).unwrap_err().to_string();
    assert!(e.contains("static length"), "{e}");
}

#[test]
fn take_values_as_numpy() {
    // np.take(x, [[-1, 0], [2, -3]], axis=0) on x = arange(6).reshape(3, 2).
    let xv = f64v(&[3, 2], (0..6).map(f64::from).collect());
    let iv = i64v(&[2, 2], vec![-1, 0, 2, -3]);
    let (x, i) = (input_of("x", &xv), input_of("i", &iv));
    let got = agree(
        &[x.clone(), i.clone()],
        &take(&x, &i, 0).unwrap(),
        &[xv.clone(), iv.clone()],
        "take",
    );
    assert_eq!(
        got.to_f64_array().iter().copied().collect::<Vec<_>>(),
        [4., 5., 0., 1., 4., 5., 0., 1.]
    );
    assert_eq!(got.shape(), &[2, 2, 2]);
    // Along axis 1, and an empty index.
    let iv1 = i64v(&[3], vec![1, 1, -2]);
    let i1 = input_of("i1", &iv1);
    let got = agree(
        &[x.clone(), i1.clone()],
        &take(&x, &i1, 1).unwrap(),
        &[xv.clone(), iv1],
        "take axis 1",
    );
    assert_eq!(
        got.to_f64_array().iter().copied().collect::<Vec<_>>(),
        [1., 1., 0., 3., 3., 2., 5., 5., 4.]
    );
    let empty = i64v(&[0], vec![]);
    let got = agree(
        &[x.clone(), i1.clone()],
        &take(&x, &i1, 0).unwrap(),
        &[xv.clone(), empty],
        "empty",
    );
    assert_eq!(got.shape(), &[0, 2]);
}

#[test]
fn out_of_range_indices_are_errors_in_both_evaluators() {
    let xv = f64v(&[5], vec![1.0; 5]);
    let (x, i) = (
        tensor("x", DType::F64, &[None]),
        tensor("i", DType::I32, &[None]),
    );
    let g = take(&x, &i, 0).unwrap();
    for (bad, idx) in [(5, 5), (-6, -6)] {
        let iv = Value::I32(arr1(&[0, idx]).into_dyn());
        let want = format!("index {bad} is out of bounds for axis 0 with size 5");
        for e in [
            reference(&[x.clone(), i.clone()], &g, &[xv.clone(), iv.clone()]).unwrap_err(),
            jit(&[x.clone(), i.clone()], &g, &[xv.clone(), iv.clone()]).unwrap_err(),
        ] {
            assert!(e.to_string().contains(&want), "{e}");
        }
    }
    let y = tensor("y", DType::F64, &[]);
    let u = advanced_inc_subtensor1(&x, 0, &i, &y).unwrap();
    let iv = Value::I32(arr1(&[7]).into_dyn());
    let yv = f64v(&[], vec![1.0]);
    let e = jit(
        &[x.clone(), i.clone(), y.clone()],
        &u,
        &[xv.clone(), iv, yv],
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("index 7 is out of bounds for axis 0 with size 5"),
        "{e}"
    );
}

#[test]
fn long_i64_index_arrays_are_checked_in_place() {
    // 300 000 i64 indices (checked in chunks over threads and read in
    // place): rows of width 16 gathered with negative indices, and an
    // out-of-range index anywhere is an error naming the first one.
    let n = 300_000usize;
    let xv = f64v(&[1000, 16], (0..16_000).map(|k| k as f64).collect());
    let idx: Vec<i64> = (0..n as i64).map(|k| (k * 7919) % 2000 - 1000).collect();
    let (x, i) = (input_of("x", &xv), tensor("i", DType::I64, &[None]));
    let g = take(&x, &i, 0).unwrap();
    let got = agree(
        &[x.clone(), i.clone()],
        &g,
        &[xv.clone(), i64v(&[n], idx.clone())],
        "long i64 gather",
    );
    assert_eq!(got.shape(), &[n, 16]);
    for (at, bad, second) in [
        (n - 1, 1000, -1001),
        (7, -1001, 5000),
        (150_001, 1 << 40, 1000),
    ] {
        let mut v = idx.clone();
        v[at] = bad;
        v[n - 2 - at % 3] = second;
        let first = if at < n - 2 - at % 3 { bad } else { second };
        let want = format!("index {first} is out of bounds for axis 0 with size 1000");
        let vals = [xv.clone(), i64v(&[n], v)];
        for e in [
            reference(&[x.clone(), i.clone()], &g, &vals).unwrap_err(),
            jit(&[x.clone(), i.clone()], &g, &vals).unwrap_err(),
        ] {
            assert!(e.to_string().contains(&want), "{e}");
        }
    }
}

#[test]
fn gathers_check_each_index_on_every_path() {
    // The native gather checks each i64 index as it copies its row: rows
    // of 1, 2, 4 and 8 bytes (u8, i16, f32, f64 vectors), a source over
    // 1 MiB (the rows are prefetched ahead), a gather along axis 1 (one
    // row copy per outer index and index), and an empty output (no row is
    // copied, the indices are still checked). Values agree with the
    // reference; an out-of-range index anywhere names the first one.
    let n = 40_000usize;
    let idx: Vec<i64> = (0..n as i64).map(|k| (k * 7919) % 400 - 200).collect();
    let sources = [
        Value::U8(ArrayD::from_shape_fn(IxDyn(&[200]), |i| i[0] as u8)),
        Value::I16(ArrayD::from_shape_fn(IxDyn(&[200]), |i| i[0] as i16 - 90)),
        Value::F32(ArrayD::from_shape_fn(IxDyn(&[200]), |i| i[0] as f32 * 0.5)),
        f64v(&[200], (0..200).map(|k| k as f64 - 7.0).collect()),
        // 200 rows of 1000 f64: 1.6 MB, prefetched.
        f64v(&[200, 1000], (0..200_000).map(|k| k as f64).collect()),
        f64v(&[200, 0], vec![]),
    ];
    let i = tensor("i", DType::I64, &[None]);
    for xv in &sources {
        let x = input_of("x", xv);
        let g = take(&x, &i, 0).unwrap();
        let what = format!("gather from {:?} {:?}", xv.dtype(), xv.shape());
        let got = agree(
            &[x.clone(), i.clone()],
            &g,
            &[xv.clone(), i64v(&[n], idx.clone())],
            &what,
        );
        assert_eq!(got.shape()[0], n, "{what}");
        for (at, bad) in [(n - 1, 200), (31_000, -201), (5, 1 << 40)] {
            let mut v = idx.clone();
            v[at] = bad;
            v[n / 2] = i64::MIN;
            let first = if at < n / 2 { bad } else { i64::MIN };
            let want = format!("index {first} is out of bounds for axis 0 with size 200");
            let e = jit(&[x.clone(), i.clone()], &g, &[xv.clone(), i64v(&[n], v)]).unwrap_err();
            assert!(e.to_string().contains(&want), "{what}: {e}");
        }
    }
    // Along axis 1 of a 3 x 200 matrix: each outer row meets every index.
    let xv = f64v(&[3, 200], (0..600).map(|k| k as f64).collect());
    let x = input_of("x", &xv);
    let g = take(&x, &i, 1).unwrap();
    agree(
        &[x.clone(), i.clone()],
        &g,
        &[xv.clone(), i64v(&[n], idx.clone())],
        "axis 1",
    );
    let mut v = idx.clone();
    v[n - 3] = 300;
    v[20_000] = -500;
    let e = jit(&[x.clone(), i.clone()], &g, &[xv.clone(), i64v(&[n], v)]).unwrap_err();
    assert!(
        e.to_string()
            .contains("index -500 is out of bounds for axis 1 with size 200"),
        "{e}"
    );
}

#[test]
fn updates_accumulate_duplicates_as_add_at() {
    // np.add.at(x, [0, 0, 2, -1], y) and x[[0, 0, 2]] = y (last wins).
    let xv = f64v(&[4, 2], vec![0.0; 8]);
    let iv = i64v(&[4], vec![0, 0, 2, -1]);
    let yv = f64v(&[4, 2], (1..=8).map(f64::from).collect());
    let (x, i, y) = (input_of("x", &xv), input_of("i", &iv), input_of("y", &yv));
    let ins = [x.clone(), i.clone(), y.clone()];
    let vals = [xv.clone(), iv.clone(), yv.clone()];
    let inc = agree(
        &ins,
        &advanced_inc_subtensor1(&x, 0, &i, &y).unwrap(),
        &vals,
        "inc",
    );
    assert_eq!(
        inc.to_f64_array().iter().copied().collect::<Vec<_>>(),
        [4., 6., 0., 0., 5., 6., 7., 8.]
    );
    let set = agree(
        &ins,
        &advanced_set_subtensor1(&x, 0, &i, &y).unwrap(),
        &vals,
        "set",
    );
    assert_eq!(
        set.to_f64_array().iter().copied().collect::<Vec<_>>(),
        [3., 4., 0., 0., 5., 6., 7., 8.]
    );
    // A broadcast y (static size 1) along axis 1, and integer wrapping.
    let x8 = tensor("x8", DType::U8, &[None, None]);
    let y8 = tensor("y8", DType::U8, &[Some(1), Some(1)]);
    let x8v = Value::U8(arr2(&[[250u8, 1], [2, 3]]).into_dyn());
    let y8v = Value::U8(arr2(&[[10u8]]).into_dyn());
    let i8v = Value::I8(arr1(&[0i8, 0, -2]).into_dyn());
    let i8t = tensor("i8", DType::I8, &[None]);
    let got = agree(
        &[x8.clone(), i8t.clone(), y8.clone()],
        &advanced_inc_subtensor1(&x8, 1, &i8t, &y8).unwrap(),
        &[x8v, i8v, y8v],
        "u8 inc along axis 1",
    );
    assert_eq!(
        got.to_i64_array().iter().copied().collect::<Vec<_>>(),
        [24, 1, 32, 3]
    );
    // bool: add is logical or.
    let xb = tensor("xb", DType::Bool, &[None]);
    let yb = tensor("yb", DType::Bool, &[None]);
    let got = agree(
        &[xb.clone(), i.clone(), yb.clone()],
        &advanced_inc_subtensor1(&xb, 0, &i, &yb).unwrap(),
        &[
            Value::Bool(arr1(&[false, true, false, false]).into_dyn()),
            iv.clone(),
            Value::Bool(arr1(&[true, true, false, false]).into_dyn()),
        ],
        "bool inc",
    );
    assert_eq!(
        got.to_i64_array().iter().copied().collect::<Vec<_>>(),
        [1, 1, 0, 0]
    );
    // Mismatched y at run time.
    let bad = f64v(&[3, 2], vec![0.0; 6]);
    let e = jit(
        &ins,
        &advanced_inc_subtensor1(&x, 0, &i, &y).unwrap(),
        &[xv, iv, bad],
    )
    .unwrap_err();
    assert!(e.to_string().contains("does not match x[idx]"), "{e}");
}

#[test]
fn boolean_masks_as_numpy() {
    let xv = f64v(&[3, 2], (0..6).map(f64::from).collect());
    let x = input_of("x", &xv);
    let m1 = tensor("m", DType::Bool, &[None]);
    let rows = agree(
        &[x.clone(), m1.clone()],
        &boolean_mask(&x, &m1).unwrap(),
        &[
            xv.clone(),
            Value::Bool(arr1(&[true, false, true]).into_dyn()),
        ],
        "rows",
    );
    assert_eq!(rows.shape(), &[2, 2]);
    assert_eq!(
        rows.to_f64_array().iter().copied().collect::<Vec<_>>(),
        [0., 1., 4., 5.]
    );
    let m2 = tensor("m", DType::Bool, &[None, None]);
    let full = agree(
        &[x.clone(), m2.clone()],
        &boolean_mask(&x, &m2).unwrap(),
        &[
            xv.clone(),
            Value::Bool(arr2(&[[false, true], [true, false], [false, true]]).into_dyn()),
        ],
        "elements",
    );
    assert_eq!(
        full.to_f64_array().iter().copied().collect::<Vec<_>>(),
        [1., 2., 5.]
    );
    let none = agree(
        &[x.clone(), m1.clone()],
        &boolean_mask(&x, &m1).unwrap(),
        &[xv.clone(), Value::Bool(arr1(&[false; 3]).into_dyn())],
        "none selected",
    );
    assert_eq!(none.shape(), &[0, 2]);
    let e = jit(
        &[x.clone(), m1.clone()],
        &boolean_mask(&x, &m1).unwrap(),
        &[xv, Value::Bool(arr1(&[true; 4]).into_dyn())],
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("does not match x of shape [3, 2]"),
        "{e}"
    );
}

/// Masks over contiguous vectors and matrices (the one-pass compaction)
/// for every element size, with nothing, everything, only the first or
/// only the last element selected, and mixed patterns at lengths around
/// the vector widths; and over views (the general path): a step-2 view of
/// `x` and a reversed mask. Reference, JIT and FAST_RUN agree exactly.
#[test]
fn boolean_masks_over_every_element_size_and_layout() {
    let patterns = |n: usize| -> Vec<(String, Vec<bool>)> {
        let mut v = vec![
            ("none".to_string(), vec![false; n]),
            ("all".to_string(), vec![true; n]),
            ("first".to_string(), (0..n).map(|i| i == 0).collect()),
            ("last".to_string(), (0..n).map(|i| i + 1 == n).collect()),
        ];
        v.push((
            "mixed".to_string(),
            (0..n).map(|i| (i * 7 + i / 3) % 5 < 2).collect(),
        ));
        v
    };
    for dtype in [
        DType::Bool,
        DType::U8,
        DType::I16,
        DType::F32,
        DType::I64,
        DType::F64,
    ] {
        for n in [1usize, 2, 15, 16, 17, 100, 1027] {
            let vals: Vec<i64> = (0..2 * n as i64).map(|i| (i * 37) % 23 - 11).collect();
            let wide = Value::from_i64_array(
                dtype,
                ArrayD::from_shape_vec(IxDyn(&[2 * n]), vals).unwrap(),
            );
            let xv = kiln::map_value!(wide.clone(), a => a.slice_move(s![..n]).into_dyn().as_standard_layout().into_owned());
            let strided = kiln::map_value!(wide, a => a.slice_move(s![..;2]).into_dyn());
            let x = input_of("x", &xv);
            let m = tensor("m", DType::Bool, &[None]);
            let out = boolean_mask(&x, &m).unwrap();
            for (name, pat) in patterns(n) {
                let mv = Value::Bool(ArrayD::from_shape_vec(IxDyn(&[n]), pat.clone()).unwrap());
                let what = format!("{dtype} n={n} {name}");
                agree(
                    &[x.clone(), m.clone()],
                    &out,
                    &[xv.clone(), mv.clone()],
                    &what,
                );
                agree(
                    &[x.clone(), m.clone()],
                    &out,
                    &[strided.clone(), mv.clone()],
                    &format!("{what}, x[::2]"),
                );
                let reversed = kiln::map_value!(mv, a => { let mut a = a; a.invert_axis(ndarray::Axis(0)); a });
                agree(
                    &[x.clone(), m.clone()],
                    &out,
                    &[xv.clone(), reversed],
                    &format!("{what}, m[::-1]"),
                );
            }
            // Rows of a matrix: 3 elements each.
            let rows: Vec<i64> = (0..3 * n as i64).map(|i| (i * 13) % 17 - 8).collect();
            let xm =
                Value::from_i64_array(dtype, ArrayD::from_shape_vec(IxDyn(&[n, 3]), rows).unwrap());
            let x2 = input_of("x", &xm);
            let out2 = boolean_mask(&x2, &m).unwrap();
            for (name, pat) in patterns(n) {
                let mv = Value::Bool(ArrayD::from_shape_vec(IxDyn(&[n]), pat).unwrap());
                agree(
                    &[x2.clone(), m.clone()],
                    &out2,
                    &[xm.clone(), mv],
                    &format!("{dtype} rows n={n} {name}"),
                );
            }
        }
    }
}

#[test]
fn joins_and_splits_as_numpy() {
    let av = f64v(&[2, 3], (0..6).map(f64::from).collect());
    let bv = Value::I32(arr2(&[[7, 8], [9, 10]]).into_dyn());
    let ev = f64v(&[2, 0], vec![]);
    let (a, b, e) = (input_of("a", &av), input_of("b", &bv), input_of("e", &ev));
    let j = concatenate(&[&a, &e, &b], 1).unwrap();
    let got = agree(
        &[a.clone(), e.clone(), b.clone()],
        &j,
        &[av.clone(), ev.clone(), bv.clone()],
        "concatenate axis 1",
    );
    assert_eq!(
        got.to_f64_array().iter().copied().collect::<Vec<_>>(),
        [0., 1., 2., 7., 8., 3., 4., 5., 9., 10.]
    );
    let st = stack(&[&a, &a], 0).unwrap();
    let got = agree(&[a.clone()], &st, &[av.clone()], "stack");
    assert_eq!(got.shape(), &[2, 2, 3]);
    // A join of mismatched run-time shapes.
    let err = jit(
        &[a.clone(), e.clone(), b.clone()],
        &j,
        &[av.clone(), ev, Value::I32(arr2(&[[1, 2]]).into_dyn())],
    )
    .unwrap_err();
    assert!(err.to_string().contains("does not match input 0"), "{err}");
    // Static and run-time split sizes; the parts are views, also when
    // transposed inputs are split.
    let parts = split(&a, &[1, 0, 2], 1).unwrap();
    let sum = concatenate(&[&parts[2], &parts[1], &parts[0]], 1).unwrap();
    let got = agree(&[a.clone()], &sum, &[av.clone()], "split");
    assert_eq!(
        got.to_f64_array().iter().copied().collect::<Vec<_>>(),
        [1., 2., 0., 4., 5., 3.]
    );
    let tv =
        kiln::map_value!(f64v(&[3, 2], (0..6).map(f64::from).collect()), x => x.reversed_axes());
    let got = agree(
        &[a.clone()],
        &(&parts[2] * 2.0),
        &[tv],
        "split of a transposed input",
    );
    assert_eq!(got.shape(), &[2, 2]);
    let sz = tensor("s", DType::I64, &[Some(2)]);
    let parts = split_by(&a, &sz, 0).unwrap();
    let got = agree(
        &[a.clone(), sz.clone()],
        &parts[1],
        &[av.clone(), i64v(&[2], vec![0, 2])],
        "run-time split",
    );
    assert_eq!(got.shape(), &[2, 3]);
    let err = jit(
        &[a.clone(), sz.clone()],
        &parts[1],
        &[av, i64v(&[2], vec![1, 2])],
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("do not sum to the axis length 2"),
        "{err}"
    );
}

#[test]
fn every_index_dtype_and_layout() {
    let xbig = rand_value(DType::F32, &[9, 16], 3);
    let layouts: Vec<(&str, Value)> = vec![
        ("contiguous", xbig.clone()),
        (
            "transposed",
            kiln::map_value!(rand_value(DType::F32, &[16, 9], 4), a => a.reversed_axes()),
        ),
        (
            "strided",
            kiln::map_value!(rand_value(DType::F32, &[9, 32], 5), a => a.slice_move(s![.., ..;2]).into_dyn()),
        ),
    ];
    let idx: Vec<i64> = vec![8, -1, 0, 3, 3, -9, 5];
    for dtype in [DType::U8, DType::I8, DType::I16, DType::I32, DType::I64] {
        let iv = Value::from_i64_array(
            dtype,
            ArrayD::from_shape_vec(
                IxDyn(&[7]),
                idx.iter()
                    .map(|&i| {
                        if dtype == DType::U8 {
                            i.rem_euclid(9)
                        } else {
                            i
                        }
                    })
                    .collect(),
            )
            .unwrap(),
        );
        let i = tensor("i", dtype, &[None]);
        for (name, xv) in &layouts {
            let x = tensor("x", DType::F32, &[None, None]);
            for axis in [0isize, 1] {
                if axis == 1 && *name != "contiguous" {
                    continue;
                }
                let g = take(&x, &i, axis).unwrap();
                agree(
                    &[x.clone(), i.clone()],
                    &g,
                    &[xv.clone(), iv.clone()],
                    &format!("take {dtype} {name} axis {axis}"),
                );
                let y = tensor("y", DType::F32, &[]);
                let u = advanced_inc_subtensor1(&x, axis, &i, &y).unwrap();
                agree(
                    &[x.clone(), i.clone(), y.clone()],
                    &u,
                    &[xv.clone(), iv.clone(), rand_value(DType::F32, &[], 6)],
                    &format!("inc {dtype} {name} axis {axis}"),
                );
            }
            // Large enough to split over threads.
            let big_idx = Value::I64(
                ArrayD::from_shape_vec(
                    IxDyn(&[20000]),
                    (0..20000).map(|k| (k * 7919 % 9) as i64 - 4).collect(),
                )
                .unwrap(),
            );
            let ib = tensor("ib", DType::I64, &[None]);
            let g = take(&x, &ib, 0).unwrap();
            agree(
                &[x.clone(), ib.clone()],
                &g,
                &[xv.clone(), big_idx],
                &format!("large take {name}"),
            );
        }
    }
}

#[test]
fn expression_language_functions() {
    let mut vars = HashMap::new();
    vars.insert("X".to_string(), tensor("X", DType::F64, &[None, Some(4)]));
    vars.insert("i".to_string(), tensor("i", DType::I32, &[None]));
    vars.insert("m".to_string(), tensor("m", DType::Bool, &[None]));
    vars.insert("s".to_string(), tensor("s", DType::I64, &[Some(2)]));
    let show = |src: &str| build_expression(src, &vars).unwrap().to_string();
    assert_eq!(show("take(X, i)"), "take(X, i)");
    assert_eq!(show("take(X, i, axis=-1)"), "take(X, i, axis=1)");
    assert_eq!(
        show("advanced_inc_subtensor(X, i, 1)"),
        "advanced_inc_subtensor(X, i, 1.0)"
    );
    assert_eq!(
        show("advanced_set_subtensor(X, i, X)"),
        "advanced_set_subtensor(X, i, X)"
    );
    assert_eq!(show("boolean_mask(X, m)"), "boolean_mask(X, m)");
    assert_eq!(
        show("concatenate([X, 2 * X])"),
        "concatenate([X, (2.0 * X)], axis=0)"
    );
    assert_eq!(show("concatenate([X], axis=1)"), "concatenate([X], axis=1)");
    assert_eq!(
        show("stack([X, X], axis=1)"),
        "concatenate([X[:, None, :], X[:, None, :]], axis=1)"
    );
    assert_eq!(
        show("split(X, [1, 3], axis=1, output=1)"),
        "split(X, [1, 3], axis=1).1"
    );
    assert_eq!(show("split(X, s, output=0)"), "split(X, s, axis=0).0");
    let err = |src: &str| build_expression(src, &vars).unwrap_err().to_string();
    assert!(err("concatenate(X)").contains("takes a list of tensors"));
    assert!(err("split(X, [1, 3])").contains("needs output="));
    assert!(err("split(X, [1, 3], axis=1, output=2)").contains("output=2 is out of range"));
    assert!(err("split(X, [1, 2], axis=1, output=0)").contains("do not sum"));
    assert!(err("X + [1, 2]").contains("a list is only allowed"));
    assert!(err("take(X, i, keepdims=True)").contains("expected axis="));
    assert!(err("take(X, 1.5)").contains("the index must be an integer tensor"));
    assert_eq!(show("take(X, [0, -1])"), "take(X, [0, -1])");
    assert!(err("take(X, [0.5])").contains("integer literals"));
}
