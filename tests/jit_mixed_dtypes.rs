//! Programs whose inputs or results are of another dtype than the values
//! they compute (`img / 255` on a `u8` image, `cast(img, "f32")`, an `f32`
//! beside an `f64`, a narrow integer widened to a wider one; a result cast
//! to `f32` or `u8`): the element-wise vector path converts such an input
//! as it loads it when the conversion is exact, element-wise kernels and
//! fused reductions alike, and such a result as it stores it; the scalar
//! path computes the rest. For every pair of dtypes, convertible or not,
//! each program equals the reference evaluator on the un-rewritten graph
//! at shapes around the vector path's boundaries, with each operand in
//! turn broadcast, and on strided views (which take the scalar path),
//! compiled as built and under FAST_RUN. Values of `f32`, `i32` and `u32`
//! computed between `f64` ones (`cast(xf * 2, "f64") + y`, `cast(i * j,
//! "f64")`) ride the `f64` path in narrow lanes; they are checked the same
//! way.
mod jit_support;
use jit_support::*;
use kiln::rewriting::Mode;
use kiln::{eval, function, DType, FunctionGraph, Value};

/// Every dtype of a vector path a narrower input may be converted to.
const TARGETS: [DType; 8] = [
    DType::F32,
    DType::F64,
    DType::I16,
    DType::U16,
    DType::I32,
    DType::U32,
    DType::I64,
    DType::U64,
];

/// Columns around the vector path's boundaries (lane counts 2 to 8, the
/// unrolled loops, the 128-element blocks).
const COLUMNS: &[usize] = &[1, 3, 4, 7, 9, 17, 33, 129, 257];

/// The row counts the columns meet.
const ROWS: &[usize] = &[1, 5];

/// Values of `dtype` in every value class: the extremes and values anywhere
/// in its range for integers (wrapped by `Value::from_i64_array`), NaN,
/// ±inf and signed zeros for floats, 0 and 1 for bool.
fn values(dtype: DType, shape: &[usize], seed: u64) -> Value {
    if dtype.is_float() || dtype == DType::Bool {
        return rand_value(dtype, shape, seed);
    }
    int_values(dtype, shape, seed, |e, s| match e % 11 {
        0 => i64::MIN,
        1 => i64::MAX,
        2 => -1,
        3 => (s % 7) as i64,
        _ => s as i64,
    })
}

/// The expressions over `x` (of the input dtype) and `y` (of `target`),
/// with the ULPs each may differ from the reference by.
fn expressions(target: DType) -> Vec<(String, u64)> {
    let t = target.name();
    let mut e = vec![
        (format!("cast(x, \"{t}\") * y + y"), 0),
        (format!("cast(x, \"{t}\") - y"), 0),
        (format!("maximum(cast(x, \"{t}\"), y) * 3"), 0),
        (
            format!("where(cast(x, \"{t}\") > y, y, cast(x, \"{t}\"))"),
            0,
        ),
        // Implicit promotion: the reference converts `x` inside the product.
        ("x * y".to_string(), 0),
        // A comparison, whose only value is a bool: the path is an
        // input's dtype (`xf > y` compares on the `f64` path).
        ("(x > y) | (x == y)".to_string(), 0),
        // Fused reductions (a maximum is exact in any order; float sums
        // reassociate over a contiguous axis, a 1-column input's).
        (format!("max(cast(x, \"{t}\") - y, axis=0)"), 0),
        ("min(x * y, axis=1)".to_string(), 0),
        // Computed in the target's dtype between a converted input and a
        // narrower result.
        (format!("cast(abs(cast(x, \"{t}\") - y), \"u8\")"), 0),
        // Strided views: the scalar path.
        (format!("cast(x[:, ::2], \"{t}\") * y[:, ::2]"), 0),
    ];
    if !target.is_float() {
        // Wrapping sums are exact in any order.
        e.push((format!("sum(cast(x, \"{t}\") * y, axis=0)"), 0));
        e.push((format!("sum(cast(x, \"{t}\") - y, axis=1)"), 0));
    } else {
        // A scale as an image's `/ 255` (by 256, whose reciprocal FAST_RUN's
        // canonicaliser forms exactly: the quotient's bits), and a
        // block-wise runtime call staged from the converted input: `exp`'s
        // block function is within 1 ULP of the reference's
        // (runtime/ACCURACY.md).
        e.push(("x / 256 + y".to_string(), 0));
        e.push((format!("exp(cast(x, \"{t}\") * 0.001)"), 1));
    }
    e
}

/// Checks the functions `fs` (one graph compiled as built and under
/// FAST_RUN) on `vals` against the reference on the graph `fg` as built.
fn check_modes(
    fs: &[kiln::CompiledFunction],
    fg: &FunctionGraph,
    vals: &[Value],
    ulps: u64,
    what: &str,
) {
    let want = eval::evaluate(fg, vals).unwrap_or_else(|e| panic!("{what}: {e}"));
    for (m, f) in fs.iter().enumerate() {
        let got = f
            .call_values(vals)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            let mode = ["as built", "FAST_RUN"][m];
            assert_values(g, w, ulps, &format!("{what} ({mode}) output {k}"));
        }
    }
}

/// Every program of [`expressions`] for every input dtype and target.
#[test]
fn inputs_of_other_dtypes_give_the_reference_values() {
    for target in TARGETS {
        for src in DType::ALL.into_iter().filter(|&s| s != target) {
            // Each operand in turn a column broadcast along the rows (a
            // stride-0 operand: the converted one, or the one beside it).
            let full = [None, None];
            let column = [None, Some(1)];
            for (x_dims, y_dims) in [(full, full), (full, column), (column, full)] {
                let x = kiln::tensor("x", src, &x_dims);
                let y = kiln::tensor("y", target, &y_dims);
                let vars = [("x".to_string(), x.clone()), ("y".to_string(), y.clone())]
                    .into_iter()
                    .collect();
                for (expr, ulps) in expressions(target) {
                    let out = kiln::build_expression(&expr, &vars)
                        .unwrap_or_else(|e| panic!("{expr}: {e}"));
                    let ins = [x.clone(), y.clone()];
                    let outs = [out];
                    let fg = FunctionGraph::new(&ins, &outs).unwrap();
                    let fs = [Mode::none(), Mode::fast_run()]
                        .map(|m| function(&ins, &outs).mode(m).compile().unwrap());
                    for (r, &rows) in ROWS.iter().enumerate() {
                        for (c, &cols) in COLUMNS.iter().enumerate() {
                            let seed = (100 * r + c) as u64;
                            let shape = |dims: [Option<usize>; 2]| match dims[1] {
                                Some(1) => [rows, 1],
                                _ => [rows, cols],
                            };
                            let vals = [
                                values(src, &shape(x_dims), seed),
                                values(target, &shape(y_dims), seed + 50),
                            ];
                            let what = format!(
                                "{expr} (x {src} {:?}, y {target} {:?})",
                                shape(x_dims),
                                shape(y_dims)
                            );
                            check_modes(&fs, &fg, &vals, ulps, &what);
                        }
                    }
                }
            }
        }
    }
}

/// Values cast to a narrower dtype as the program's result (an image's
/// `cast(clip(x * 255, 0, 255), "u8")`, `f64` results stored as `f32`, an
/// `int32` result stored as `uint8`): the vector path converts them as it
/// stores them, rounding floats to nearest for `f32` and truncating and
/// saturating them for integers (NaN giving 0), wrapping integers, as the
/// reference's `as` does. Scales that push values past every integer
/// range, NaN, ±inf and signed zeros, integers over their whole range,
/// each float and integer dtype and every dtype of result, alone and
/// beside a result of the path's dtype (one kernel under FAST_RUN), with
/// the operand broadcast or strided.
#[test]
fn results_cast_to_narrower_dtypes_give_the_reference_values() {
    // Every dtype a narrower one exists for.
    for src in DType::ALL.into_iter().filter(|d| d.size_of() >= 2) {
        for dst in DType::ALL.into_iter().filter(|&d| d != src) {
            let d = dst.name();
            let full = [None, None];
            let column = [None, Some(1)];
            for dims in [full, column] {
                let x = kiln::tensor("x", src, &dims);
                let vars = [("x".to_string(), x.clone())].into_iter().collect();
                let programs = [
                    vec![format!("cast(x * 3 - 7, \"{d}\")")],
                    vec![format!("cast(x * 3.5, \"{d}\")")],
                    vec![format!("cast(x * 1e10 - 0.5, \"{d}\")")],
                    vec![format!("cast(clip(x * 255, 0, 255), \"{d}\")")],
                    vec![format!("cast(x[:, ::2] * 7, \"{d}\")")],
                    // A block-wise runtime result (the float remainder,
                    // exact), narrowed as it is stored.
                    vec![format!("cast((x * 7) % 3 * 40, \"{d}\")")],
                    vec!["x * 2".to_string(), format!("cast(x * 2 + 0.5, \"{d}\")")],
                ];
                for exprs in programs {
                    let outs: Vec<_> = exprs
                        .iter()
                        .map(|e| {
                            kiln::build_expression(e, &vars)
                                .unwrap_or_else(|err| panic!("{e}: {err}"))
                        })
                        .collect();
                    let ins = [x.clone()];
                    let fg = FunctionGraph::new(&ins, &outs).unwrap();
                    let fs = [Mode::none(), Mode::fast_run()]
                        .map(|m| function(&ins, &outs).mode(m).compile().unwrap());
                    for (r, &rows) in ROWS.iter().enumerate() {
                        for (c, &cols) in COLUMNS.iter().enumerate() {
                            let shape = match dims[1] {
                                Some(1) => [rows, 1],
                                _ => [rows, cols],
                            };
                            let vals = [values(src, &shape, (300 + 100 * r + c) as u64)];
                            let what = format!("{exprs:?} (x {src} {shape:?})");
                            check_modes(&fs, &fg, &vals, 0, &what);
                        }
                    }
                }
            }
        }
    }
}

/// Programs mixing `f64` values with `f32`, `i32` or `u32` ones computed in
/// their own dtype: the `f64` path computes the narrower values in narrow
/// lanes (`f32` arithmetic rounds once as the reference's `f64` evaluation
/// rounded to `f32` does; `i32` and `u32` arithmetic wraps), converts them
/// exactly where an `f64` value reads them, and casts `f64` values to them
/// as the reference's `as` does (saturating `i32`, NaN giving 0). Results
/// of the narrow dtype are stored as such. Every value class (NaN, ±inf,
/// integers over their whole range), each operand in turn broadcast, fused
/// reductions, strided views.
#[test]
fn narrower_values_between_f64_ones_give_the_reference_values() {
    for src in [DType::F32, DType::I32, DType::U32] {
        let n = src.name();
        let full = [None, None];
        let column = [None, Some(1)];
        for (x_dims, y_dims) in [(full, full), (full, column), (column, full)] {
            let x = kiln::tensor("x", src, &x_dims);
            let y = kiln::tensor("y", DType::F64, &y_dims);
            let vars = [("x".to_string(), x.clone()), ("y".to_string(), y.clone())]
                .into_iter()
                .collect();
            let mut programs = vec![
                vec!["cast(x * x, \"f64\") + y".to_string()],
                vec!["(x - x * x) * y".to_string()],
                vec![format!("cast(y * 3, \"{n}\") * x")],
                vec![format!("cast(y * 3, \"{n}\") + x"), "y * 2".to_string()],
                vec!["x * x".to_string(), "x * x + y".to_string()],
                vec![format!("where(x > 1, y, cast(maximum(x, 3) - x, \"f64\"))")],
                vec!["sum(cast(x * x, \"f64\"), axis=0)".to_string()],
                vec!["max(abs(x) + y, axis=1)".to_string()],
                // A selection on a condition of the narrow dtype itself.
                vec!["cast(where(x, x * x, x - x * x), \"f64\") * y".to_string()],
                vec!["cast(x[:, ::2] * x[:, ::2], \"f64\") + y[:, ::2]".to_string()],
            ];
            if src == DType::F32 {
                // `f32` constants, one of them inexact (0.1).
                programs.push(vec!["sqrt(abs(x)) * 2.5 + y".to_string()]);
                programs.push(vec!["cast(x * 0.1, \"f64\") + y".to_string()]);
            }
            let mut programs: Vec<(Vec<String>, u64)> =
                programs.into_iter().map(|p| (p, 0)).collect();
            if src == DType::F32 {
                // Block-wise runtime calls in narrow lanes: the `f32` block
                // functions, on values staged packed as `f32`, in an
                // element-wise kernel and in a fused reduction (`max`: exact
                // in any order). A block function is within 1 ULP of the
                // reference's `f32` function (runtime/ACCURACY.md), so these
                // results are `f32` products (no cancellation to magnify it):
                // 1 ULP per function, 1 of the final rounding.
                let f32_out = |e: &str| format!("cast({e}, \"f32\")");
                programs.push((vec![f32_out("exp(x * 0.01) * y")], 2));
                programs.push((vec![f32_out("tanh(x) * y"), "log1p(abs(x))".to_string()], 2));
                programs.push((vec![f32_out("sigmoid(x) * sigmoid(-x) * y")], 3));
                programs.push((vec![f32_out("max(tanh(x * x) * y, axis=1)")], 2));
                // Comparisons with an `f32` constant in the `f64` path's
                // lanes, beside a block-wise call of `f64` (`exp`'s block
                // function is within 1 ULP of the reference's).
                programs.push((vec!["cast(x > 0.5, \"f64\") * y".to_string()], 0));
                programs.push((vec!["where(x > 0.25, exp(y * 0.001), y)".to_string()], 1));
                // A block-wise op with a constant argument in narrow lanes
                // takes the scalar path (see the plan); checked all the same.
                programs.push((vec![f32_out("(x * 7) % 3 * y")], 2));
            }
            for (exprs, ulps) in programs {
                let outs: Vec<_> = exprs
                    .iter()
                    .map(|e| {
                        kiln::build_expression(e, &vars).unwrap_or_else(|err| panic!("{e}: {err}"))
                    })
                    .collect();
                let ins = [x.clone(), y.clone()];
                let fg = FunctionGraph::new(&ins, &outs).unwrap();
                let fs = [Mode::none(), Mode::fast_run()]
                    .map(|m| function(&ins, &outs).mode(m).compile().unwrap());
                for (r, &rows) in ROWS.iter().enumerate() {
                    for (c, &cols) in COLUMNS.iter().enumerate() {
                        let seed = (500 + 100 * r + c) as u64;
                        let shape = |dims: [Option<usize>; 2]| match dims[1] {
                            Some(1) => [rows, 1],
                            _ => [rows, cols],
                        };
                        let vals = [
                            values(src, &shape(x_dims), seed),
                            values(DType::F64, &shape(y_dims), seed + 50),
                        ];
                        let what = format!(
                            "{exprs:?} (x {src} {:?}, y {:?})",
                            shape(x_dims),
                            shape(y_dims)
                        );
                        check_modes(&fs, &fg, &vals, ulps, &what);
                    }
                }
            }
        }
    }
}
