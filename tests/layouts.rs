//! Input layouts and result layouts: an element-wise result follows the
//! memory order of its first input spanning the whole shape (numpy's
//! `order='K'`), so a transposed, Fortran-ordered or axis-permuted input
//! gives a result of the same order, computed contiguously; the values are
//! those of the same call on a row-major copy of the input, bit for bit.
//! Steps that read such a result (reshape, dot, reductions, slices, joins,
//! cumulative sums, arg-reductions) read it through its strides, and
//! `call_into` writes into a caller's array of any layout in place.

use kiln::linker::{Arg, CompileOptions};
use kiln::rewriting::Mode;
use kiln::*;
use ndarray::{ArrayD, IxDyn};

/// `n` ramp values in [-2, 2) of `shape`, row-major.
fn ramp(shape: &[usize]) -> ArrayD<f64> {
    let n: usize = shape.iter().product();
    ArrayD::from_shape_vec(
        IxDyn(shape),
        (0..n).map(|i| 4.0 * i as f64 / n as f64 - 2.0).collect(),
    )
    .unwrap()
}

/// The strides of a result.
fn strides(v: &Value) -> Vec<isize> {
    kiln::with_value!(v, a => a.strides().to_vec())
}

/// Data pointer of a value.
fn ptr(v: &Value) -> usize {
    kiln::with_value!(v, a => a.as_ptr() as usize)
}

fn compiled(ins: &[Tensor], outs: &[Tensor], mode: Mode) -> CompiledFunction {
    function(ins, outs).mode(mode).compile().unwrap()
}

/// `x` in Fortran order (the transposed view of a row-major array holding
/// `x`'s transpose), equal to `x` element by element.
fn fortran(x: &ArrayD<f64>) -> ArrayD<f64> {
    let f = x.t().as_standard_layout().into_owned().reversed_axes();
    assert_eq!(&f, x);
    f
}

#[test]
fn an_elementwise_result_follows_a_transposed_input() {
    let x = matrix("x", DType::F64);
    let y = &(&x.exp() * 2.0) + 1.0;
    let c = ramp(&[300, 500]);
    let f_order = fortran(&c);
    for (name, mode) in [
        ("fast_run", Mode::fast_run()),
        ("fast_run-fusion", Mode::fast_run().excluding(&["fusion"])),
        ("none", Mode::none()),
    ] {
        let f = compiled(std::slice::from_ref(&x), std::slice::from_ref(&y), mode);
        let want = f.call(&[Arg::from(&c)]).unwrap();
        assert_eq!(strides(&want[0]), [500, 1], "{name}");
        let got = f.call(&[Arg::from(&f_order)]).unwrap();
        assert!(got[0].same_as(&want[0]), "{name}: values");
        assert_eq!(strides(&got[0]), [1, 300], "{name}: Fortran order kept");
    }
}

#[test]
fn a_permuted_three_dimensional_input_gives_a_result_in_its_order() {
    let x = tensor("x", DType::F64, &[None, None, None]);
    let y = x.tanh().sqr();
    let f = compiled(std::slice::from_ref(&x), &[y], Mode::fast_run());
    let base = ramp(&[7, 5, 6]);
    // Axes (2, 0, 1) of a row-major array: axis 1 of the view is the outermost in memory.
    let permuted = base.clone().permuted_axes(IxDyn(&[2, 0, 1]));
    let want = f
        .call(&[Arg::from(&permuted.as_standard_layout().into_owned())])
        .unwrap();
    let got = f.call(&[Arg::from(&permuted)]).unwrap();
    assert!(got[0].same_as(&want[0]));
    assert_eq!(strides(&got[0]), permuted.strides());
}

#[test]
fn a_strided_input_in_fortran_order_gives_a_dense_fortran_result() {
    let x = matrix("x", DType::F64);
    let y = x.sin();
    let f = compiled(std::slice::from_ref(&x), &[y], Mode::fast_run());
    // Every other row of a Fortran-ordered 40 x 30: strides (2, 40).
    let wide = fortran(&ramp(&[40, 30]));
    let view = wide.slice(ndarray::s![..;2, ..]).into_dyn();
    let want = f
        .call(&[Arg::from(&view.as_standard_layout().into_owned())])
        .unwrap();
    let got = f.call(&[Arg::from(&view.to_owned())]).unwrap();
    let got_view = f.call(&[Arg::from(&view)]).unwrap();
    assert!(got[0].same_as(&want[0]) && got_view[0].same_as(&want[0]));
    assert_eq!(
        strides(&got_view[0]),
        [1, 20],
        "dense, in the input's order"
    );
}

#[test]
fn the_first_full_shape_input_decides_and_broadcasts_follow() {
    let x = matrix("x", DType::F64);
    let y = matrix("y", DType::F64);
    let r = tensor("r", DType::F64, &[Some(1), None]);
    let outs = [&(&x * &y) + &r, &(&y - &x) * &r];
    let c = ramp(&[60, 70]);
    let fo = fortran(&(&c * 0.5));
    let row = ramp(&[1, 70]);
    for (name, mode) in [("none", Mode::none()), ("fast_run", Mode::fast_run())] {
        let f = compiled(&[x.clone(), y.clone(), r.clone()], &outs, mode);
        let want = f
            .call(&[
                Arg::from(&c),
                Arg::from(&fo.as_standard_layout().into_owned()),
                Arg::from(&row),
            ])
            .unwrap();
        let got = f
            .call(&[Arg::from(&c), Arg::from(&fo), Arg::from(&row)])
            .unwrap();
        for k in 0..2 {
            assert!(got[k].same_as(&want[k]), "{name}: output {k}");
        }
        if name == "none" {
            // Unrewritten, each node's first input decides. (FAST_RUN fuses
            // both outputs into one kernel whose first input is x.)
            assert_eq!(strides(&got[0]), [70, 1], "x (row-major) comes first");
            assert_eq!(strides(&got[1]), [1, 60], "y (Fortran) comes first");
        }
    }
}

#[test]
fn steps_read_a_fortran_ordered_intermediate_through_its_strides() {
    let x = matrix("x", DType::F64);
    let w = matrix("w", DType::F64);
    let e = x.exp();
    let outs = [
        e.reshape(&[-1]).unwrap(),
        dot(&e, &w).unwrap(),
        e.sum(&[0]).unwrap(),
        e.sum(&[1]).unwrap(),
        e.slice(&[Idx::range(1, 3)]).unwrap(),
        concatenate(&[&e, &e], 0).unwrap(),
        e.cumsum(Some(1)).unwrap(),
        e.argmax(Some(0)).unwrap(),
        e.t(),
    ];
    let c = ramp(&[30, 40]);
    let wa = ramp(&[40, 9]);
    for (name, mode) in [
        ("fast_run", Mode::fast_run()),
        ("fast_run-fusion", Mode::fast_run().excluding(&["fusion"])),
    ] {
        let f = compiled(&[x.clone(), w.clone()], &outs, mode);
        let want = f.call(&[Arg::from(&c), Arg::from(&wa)]).unwrap();
        let got = f.call(&[Arg::from(&fortran(&c)), Arg::from(&wa)]).unwrap();
        assert_eq!(got.len(), outs.len());
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            // The product and the sums may add in another order through
            // another layout (GEMM blocking, column vs row accumulation).
            let close = g.allclose(w, 1e-13, 0.0);
            assert!(
                g.same_as(w) || (matches!(k, 1..=3) && close),
                "{name}: output {k}"
            );
        }
    }
}

/// Reductions of a Fortran-ordered input run in its memory order (a sum
/// over axis 0 of the transposed layout is a contiguous row sum): the same
/// values as the row-major input, max and min exactly, sums up to the
/// reassociation of their terms; the same bits on one thread and on two;
/// below the parallel threshold and cut into chunks above it. FAST_RUN
/// fuses `exp(x) * y` into the sums (a second input, row-major or
/// Fortran-ordered, read through its strides).
#[test]
fn reductions_of_a_fortran_ordered_input_match_the_row_major_values() {
    let x = matrix("x", DType::F64);
    let y = matrix("y", DType::F64);
    let e = &x.exp() * &y;
    let outs = [
        e.sum(&[0]).unwrap(),
        e.sum(&[1]).unwrap(),
        e.sum(&[0, 1]).unwrap(),
        x.max(&[0]).unwrap(),
        x.min(&[1]).unwrap(),
        x.sum(&[0]).unwrap(),
    ];
    let c = ramp(&[300, 500]);
    let yc = ramp(&[300, 500]).mapv(|v| 1.0 - v * v);
    let chunked = CompileOptions {
        parallel: kiln::linker::ParallelOptions {
            threshold: 1,
            grain: 512,
        },
        ..CompileOptions::default()
    };
    for (name, options) in [("default", CompileOptions::default()), ("chunked", chunked)] {
        let f = function(&[x.clone(), y.clone()], &outs)
            .mode(Mode::fast_run())
            .options(options)
            .compile()
            .unwrap();
        let want = f.call(&[Arg::from(&c), Arg::from(&yc)]).unwrap();
        let xf = fortran(&c);
        for y_in in [yc.clone(), fortran(&yc)] {
            let args = [Arg::from(&xf), Arg::from(&y_in)];
            kiln::linker::set_num_threads(1);
            let one = f.call(&args).unwrap();
            kiln::linker::set_num_threads(2);
            let got = f.call(&args).unwrap();
            kiln::linker::set_num_threads(0);
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g.same_as(&one[k]),
                    "{name}: output {k} depends on the thread count"
                );
                assert_eq!(g.shape(), w.shape(), "{name}: output {k}");
                if matches!(k, 3 | 4) {
                    assert!(g.same_as(w), "{name}: output {k} (max / min) exactly");
                } else {
                    // Reassociated sums of at most 500 terms of size <= e^2.
                    assert!(g.allclose(w, 1e-12, 1e-12), "{name}: output {k}");
                }
            }
        }
    }
}

/// A cumulative sum along either axis and an arg-reduction along either
/// axis of a Fortran-ordered input scan it in memory order: results laid
/// out in Fortran order (numpy's `order='K'`), with the row-major input's
/// values bit for bit (the same operations along each line, in the same
/// order; the first of equal extremes wins).
#[test]
fn scans_of_a_fortran_ordered_input_keep_its_order() {
    let x = matrix("x", DType::F64);
    let outs = [
        x.cumsum(Some(0)).unwrap(),
        x.cumsum(Some(1)).unwrap(),
        x.argmax(Some(0)).unwrap(),
        x.argmin(Some(1)).unwrap(),
    ];
    // Ramp values rounded to a grid: ties along both axes.
    let c = ramp(&[40, 30]).mapv(|v| (v * 4.0).round());
    let f = compiled(std::slice::from_ref(&x), &outs, Mode::fast_run());
    let want = f.call(&[Arg::from(&c)]).unwrap();
    let got = f.call(&[Arg::from(&fortran(&c))]).unwrap();
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(g.same_as(w), "output {k}");
    }
    assert_eq!(strides(&got[0]), [1, 40]);
    assert_eq!(strides(&got[1]), [1, 40]);
}

/// A result that must be a fresh copy of an input (the graph returns the
/// input itself, `x * 1` rewritten away) is copied in the input's memory
/// order, one contiguous pass: a Fortran-ordered input gives a
/// Fortran-ordered copy with its values; a strided view a row-major one.
#[test]
fn a_returned_input_is_copied_in_its_memory_order() {
    let x = matrix("x", DType::F64);
    let f = compiled(
        std::slice::from_ref(&x),
        &[&x * 1.0, x.clone()],
        Mode::fast_run(),
    );
    let c = ramp(&[40, 30]);
    let fo = fortran(&c);
    let got = f.call(&[Arg::from(&fo)]).unwrap();
    for (k, g) in got.iter().enumerate() {
        assert!(g.same_as(&Value::from(c.clone())), "output {k}");
        assert_eq!(strides(g), [1, 40], "output {k}");
        assert_ne!(ptr(g), fo.as_ptr() as usize, "output {k} is a fresh array");
    }
    let wide = ramp(&[40, 60]);
    let view = wide.slice(ndarray::s![.., ..;2]).into_dyn();
    let got = f.call(&[Arg::from(&view)]).unwrap();
    assert!(got[0].same_as(&Value::from(view.to_owned())));
    assert_eq!(strides(&got[0]), [30, 1]);
}

#[test]
fn call_into_writes_a_fortran_ordered_callers_array_in_place() {
    let x = matrix("x", DType::F64);
    let y = &(&x.exp() * 2.0) + 1.0;
    let f = compiled(std::slice::from_ref(&x), &[y], Mode::fast_run());
    let c = ramp(&[200, 300]);
    let want = f.call(&[Arg::from(&c)]).unwrap();
    for input in [c.clone(), fortran(&c)] {
        let mut outs = vec![Value::F64(fortran(&ArrayD::from_elem(
            IxDyn(&[200, 300]),
            7.0,
        )))];
        let before = ptr(&outs[0]);
        f.call_into(&[Arg::from(&input)], &mut outs).unwrap();
        assert!(outs[0].same_as(&want[0]));
        assert_eq!(ptr(&outs[0]), before, "the caller's array is kept");
        assert_eq!(strides(&outs[0]), [1, 200]);
    }
}

/// Inputs strided along their innermost axis are gathered into blocks by
/// the element-wise driver, with prefetches a few blocks ahead: a step-2
/// slice, a reversed step-3 slice and a step-9 slice (elements more than a
/// cache line apart), over rows of several blocks plus a remainder, large
/// enough to be split over threads, and a step-2 slice whose result is
/// large enough to be written with non-temporal stores. The values are those of the same call
/// on contiguous copies, bit for bit but for each row's last element.
#[test]
fn gathered_strided_inputs_match_contiguous_copies() {
    use ndarray::{s, Axis};
    let x = matrix("x", DType::F64);
    let y = matrix("y", DType::F64);
    let out = &(&x.exp() * 2.0) + &y;
    let f = compiled(&[x, y], &[out], Mode::fast_run());
    let base = ramp(&[403, 3 * 1111]);
    // A result of at least 16 MB is streamed out of scratch blocks.
    let wide = ramp(&[2100, 2 * 1001]);
    let views = [
        base.slice(s![.., ..;2])
            .slice_move(s![.., ..1111])
            .into_dyn(),
        base.slice(s![.., ..;-3]).into_dyn(),
        base.slice(s![.., 1..;9]).into_dyn(),
        wide.slice(s![.., ..;2]).into_dyn(),
    ];
    for (k, v) in views.iter().enumerate() {
        assert!(v.strides()[1].unsigned_abs() > 1, "view {k} is strided");
        let dense = v.as_standard_layout().into_owned();
        // Positive, so that the sum does not cancel the exp's rounding.
        let dense2 = ramp(v.shape()) + 3.0;
        assert!(
            v.len_of(Axis(0)) * v.len_of(Axis(1)) >= 1 << 17,
            "split over threads"
        );
        let want = f.call(&[Arg::from(&dense), Arg::from(&dense2)]).unwrap();
        let got = f.call(&[Arg::from(v.view()), Arg::from(&dense2)]).unwrap();
        assert_eq!(strides(&got[0]), strides(&want[0]), "view {k}");
        // Bit for bit but in the last column: a row's odd last element is
        // the vector path's tail, computed by the scalar path (std's exp),
        // while a contiguous run only has its tail at the very end; the
        // runtime's exp and std's are within 2 ULP (runtime/ACCURACY.md),
        // and the doubling and the sum of positive terms add one rounding.
        let (g, w) = (got[0].to_f64_array(), want[0].to_f64_array());
        let last = g.shape()[1] - 1;
        assert_eq!(last % 2, 0, "view {k}: rows of odd length have a tail");
        for ((r, c), (a, b)) in g
            .indexed_iter()
            .map(|(i, a)| ((i[0], i[1]), (*a, w[i.clone()])))
        {
            if c == last {
                assert!(
                    (a - b).abs() <= 3.0 * f64::EPSILON * b.abs(),
                    "view {k} ({r}, {c}): {a} vs {b}"
                );
            } else {
                assert_eq!(a.to_bits(), b.to_bits(), "view {k} ({r}, {c}): {a} vs {b}");
            }
        }
    }
}

/// Integer inputs strided along their innermost axis go through the
/// runtime's gathers of 4- and 8-byte elements (a step of 2 reads whole
/// groups of elements and keeps every other one; other steps read element
/// by element): step-2 and reversed step-2 slices of `i32` and `i64`
/// matrices, rows of several blocks plus an odd remainder, and a slice
/// whose last element is the last of its array (a group read past it
/// would leave the array). Integer arithmetic is exact, so every element
/// equals `3 x + y` computed by ndarray.
#[test]
fn gathered_integer_inputs_of_four_and_eight_bytes_are_exact() {
    use ndarray::s;
    let base = ArrayD::from_shape_fn(IxDyn(&[301, 2 * 1037 + 1]), |i| {
        ((i[0] * 7919 + i[1] * 104_729) % 2001) as i64 - 1000
    });
    let base32 = base.mapv(|v| v as i32);
    for dtype in [DType::I32, DType::I64] {
        let x = matrix("x", dtype);
        let y = matrix("y", dtype);
        let out = &(&x * 3) + &y;
        let f = compiled(&[x, y], &[out], Mode::fast_run());
        for step in [2isize, -2] {
            let xv = base.slice(s![.., ..;step]);
            assert_eq!(xv.strides()[1].unsigned_abs(), 2, "a strided view");
            let y = ArrayD::from_shape_fn(IxDyn(xv.shape()), |i| (i[0] + 2 * i[1]) as i64);
            let want = xv.mapv(|v| 3 * v).into_dyn() + &y;
            let got = if dtype == DType::I32 {
                let x32 = base32.slice(s![.., ..;step]).into_dyn();
                f.call(&[Arg::from(x32), Arg::from(&y.mapv(|v| v as i32))])
            } else {
                f.call(&[Arg::from(xv.into_dyn()), Arg::from(&y)])
            }
            .unwrap();
            assert_eq!(got[0].dtype(), dtype);
            let g = got[0].to_f64_array();
            for (i, w) in want.indexed_iter() {
                assert_eq!(g[i.clone()], *w as f64, "{dtype:?} step {step} at {i:?}");
            }
        }
    }
}

/// `X + X.T`: the transposed operand's elements lie a row apart along each
/// row but next to each other from row to row, so the gathered path runs
/// bands of rows side by side, block by block. Integer arithmetic is exact:
/// every element equals ndarray's, for row counts that cut the last band
/// short, over threads (with chunks that start inside a band), and for a
/// result large enough to be streamed out of scratch blocks; f64 gives the
/// row-major copy's bits.
#[test]
fn a_transposed_operand_is_gathered_in_bands_of_rows() {
    let x = matrix("x", DType::I64);
    let f = compiled(
        std::slice::from_ref(&x),
        &[&(&x * 3) + &x.t()],
        Mode::fast_run(),
    );
    for n in [5usize, 37, 300, 1500] {
        let a = ArrayD::from_shape_vec(
            IxDyn(&[n, n]),
            (0..n * n)
                .map(|i| (i as i64 * 7919) % 10007 - 5000)
                .collect(),
        )
        .unwrap();
        let want = (&a * 3) + &a.t();
        let got = f.call(&[Arg::from(&a)]).unwrap();
        assert!(got[0].same_as(&Value::from(want)), "{n} x {n}");
    }
    // f64: `exp(y) + t` with `t` a transposed view (gathered in bands)
    // gives the bits of the same call with `t` copied to row-major. Rows
    // of 304 elements: blocks of whole vectors, no scalar tail.
    let y = matrix("y", DType::F64);
    let t = matrix("t", DType::F64);
    let h = compiled(&[y.clone(), t.clone()], &[&y.exp() + &t], Mode::fast_run());
    let c = ramp(&[304, 304]);
    let d = ramp(&[304, 304]).mapv(|v| v * 3.0 + 1.0);
    let view = d.t();
    let want = h
        .call(&[
            Arg::from(&c),
            Arg::from(&view.as_standard_layout().into_owned()),
        ])
        .unwrap();
    let got = h.call(&[Arg::from(&c), Arg::from(view)]).unwrap();
    assert!(got[0].same_as(&want[0]));
}
