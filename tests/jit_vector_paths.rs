//! The element-wise vector path at the lengths where its structure changes:
//! the unrolled loops (four vectors per iteration for small programs, two
//! for medium ones, one for large ones) and their single-vector remainder,
//! the 128-element blocks, the 4096-element prefetch threshold, the scalar
//! tail and the parallel split, calls cut for operands in cache (the same
//! bits as one long call); with a broadcast (stride-0) input, with a
//! block-wise math call between element-wise stages, and written in place
//! into a mutable input; and kernels of many operands, whose stride check
//! is one runtime call. Each result is checked against the reference
//! evaluator on the un-rewritten graph (the cut calls against one long
//! call, bit for bit).
mod jit_support;
use jit_support::*;
use kiln::linker::{compile, Arg, ArgMut, CompileOptions};
use kiln::rewrites::rewrite_graph;
use kiln::rewriting::Mode;
use kiln::{eval, function, scalar, vector, DType, FunctionGraph, Tensor, Value};
use ndarray::ArrayD;

/// Lengths around every boundary of the vector path.
const LENGTHS: &[usize] = &[
    1, 2, 3, 7, 8, 9, 15, 16, 17, 127, 128, 129, 255, 257, 4095, 4096, 4097, 10_001, 300_001,
];

/// `steps` Horner steps `acc = acc * x + s + k` from `acc = x`: a Composite
/// of `3 * steps` nodes once fused, reading the scalar `s` broadcast.
fn horner(x: &Tensor, s: &Tensor, steps: usize) -> Tensor {
    let mut acc = x.clone();
    for k in 0..steps {
        acc = &(&(&acc * x) + s) + (k as f64 * 0.25);
    }
    acc
}

/// The programs: (name, output) over `x` and `s`.
fn programs(x: &Tensor, s: &Tensor) -> Vec<(String, Tensor)> {
    let mut v = Vec::new();
    for steps in [1, 4, 10] {
        v.push((format!("horner{steps}"), horner(x, s, steps)));
        // The same around a block-wise exp: a second level after the call.
        let inner = horner(x, s, steps) * 0.1;
        v.push((format!("exp(horner{steps})*x+s"), &(&inner.exp() * x) + s));
    }
    v
}

fn inputs(n: usize, seed: u64) -> (ArrayD<f64>, ArrayD<f64>) {
    (
        rand_f64(&[n], seed, 0.5, 1.5),
        ndarray::arr0(0.75).into_dyn(),
    )
}

/// For every program and length: the compiled function (with `x`
/// declared mutable when `in_place`), the inputs and the reference result.
fn for_each_case(
    in_place: bool,
    mut body: impl FnMut(&str, usize, &kiln::CompiledFunction, ArrayD<f64>, ArrayD<f64>, &Value),
) {
    let x = vector("x", DType::F64);
    let s = scalar("s", DType::F64);
    for (name, out) in programs(&x, &s) {
        let ins = [x.clone(), s.clone()];
        let outs = [out];
        let fg = FunctionGraph::new(&ins, &outs).unwrap();
        let mutable: &[usize] = if in_place { &[0] } else { &[] };
        let f = function(&ins, &outs)
            .mutable_inputs(mutable)
            .compile()
            .unwrap();
        for (k, &n) in LENGTHS.iter().enumerate() {
            let (vx, vs) = inputs(n, 100 + k as u64);
            let vals = [Value::F64(vx.clone()), Value::F64(vs.clone())];
            let want = eval::evaluate(&fg, &vals).unwrap().remove(0);
            body(&name, n, &f, vx, vs, &want);
        }
    }
}

#[test]
fn vector_path_lengths_broadcast_and_block_levels_match_the_reference() {
    for_each_case(false, |name, n, f, vx, vs, want| {
        let got = f.call_values(&[Value::F64(vx), Value::F64(vs)]).unwrap();
        assert_close(&got[0], want, 1e-13, &format!("{name}, n = {n}"));
    });
}

#[test]
fn vector_path_in_place_into_a_mutable_input_matches_the_reference() {
    for_each_case(true, |name, n, f, mut vx, vs, want| {
        let got = f
            .call_mut(&mut [ArgMut::from(&mut vx), ArgMut::from(&vs)])
            .unwrap();
        let what = format!("{name} in place, n = {n}");
        assert_close(&got[0], want, 1e-13, &what);
        // The kernel wrote its result into x's own buffer.
        assert_close(&Value::F64(vx), want, 1e-13, &what);
    });
}

/// Column-mode reductions (over the leading axis of a row-major matrix)
/// take the vector path over contiguous accumulators for f64 and f32
/// sum / prod / max / min and i64 / u64 sums; each lane computes what the
/// sequential loop computes, so the results equal the reference's bit for
/// bit (NaNs and signed zeros included: `rand_value` mixes them in), at
/// widths around the two- and four-lane groups, the runtime pass's
/// 16-accumulator strips and their scalar tails, over 37 and 19 rows (whole
/// 8-row blocks of the runtime pass and a remainder).
#[test]
fn column_reductions_take_the_vector_path_bit_exactly() {
    use kiln::{tensor, ReduceOp};
    for dtype in [DType::F64, DType::F32, DType::I64, DType::U64] {
        let ops: &[ReduceOp] = if dtype.is_float() {
            &[ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min]
        } else {
            &[ReduceOp::Sum]
        };
        for &cols in &[1usize, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33] {
            let x = tensor("x", dtype, &[None, None]);
            let outs: Vec<Tensor> = ops
                .iter()
                .map(|&op| x.reduce(op, Some(&[0]), false).unwrap())
                .collect();
            let v = jit_support::rand_value(dtype, &[37, cols], cols as u64 * 7 + 1);
            check(
                std::slice::from_ref(&x),
                &outs,
                &[v],
                0,
                &format!("{dtype} columns={cols}"),
            );
            // The middle axis of a 3-d array: runs of reduced rows (given to
            // the column pass together) under a kept outer dimension. (With
            // one column the reduced rows are contiguous: row mode, whose
            // vector order reassociates; over two axes the reference folds
            // axis by axis, the kernel in memory order: neither is compared
            // bit for bit here.)
            if cols == 1 {
                continue;
            }
            let x3 = tensor("x", dtype, &[None, None, None]);
            let outs: Vec<Tensor> = ops
                .iter()
                .map(|&op| x3.reduce(op, Some(&[1]), false).unwrap())
                .collect();
            let v = jit_support::rand_value(dtype, &[3, 19, cols], cols as u64 * 7 + 2);
            check(
                std::slice::from_ref(&x3),
                &outs,
                &[v],
                0,
                &format!("{dtype} 3-d columns={cols}"),
            );
        }
    }
}

/// [`check`] (the graph compiled as built), then the same under FAST_RUN,
/// whose fusion makes element-wise maps and the reductions over them one
/// kernel (`FusedReduce`): both against the reference on the graph as
/// built, within `max_ulps`.
fn check_both(ins: &[Tensor], outs: &[Tensor], vals: &[Value], max_ulps: u64, what: &str) {
    check(ins, outs, vals, max_ulps, what);
    let fg = FunctionGraph::new(ins, outs).unwrap();
    let want = eval::evaluate(&fg, vals).unwrap();
    let f = function(ins, outs)
        .mode(kiln::rewriting::Mode::fast_run())
        .compile()
        .unwrap();
    let got = f.call_values(vals).unwrap();
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_values(g, w, max_ulps, &format!("{what} (fast_run) output {k}"));
    }
}

/// Every integer dtype, widest first.
const INT_DTYPES: [DType; 8] = [
    DType::I64,
    DType::U64,
    DType::I32,
    DType::U32,
    DType::I16,
    DType::U16,
    DType::I8,
    DType::U8,
];

/// Inputs `x` and `y` of `dtype` with dimensions `dims` (or `i` and `j`
/// when `names` says so), and the variables of `build_expression`.
fn pair(names: [&str; 2], dtype: DType, dims: &[Option<usize>]) -> (Tensor, Tensor, Vars) {
    let a = kiln::tensor(names[0], dtype, dims);
    let b = kiln::tensor(names[1], dtype, dims);
    let vars = [
        (names[0].to_string(), a.clone()),
        (names[1].to_string(), b.clone()),
    ]
    .into_iter()
    .collect();
    (a, b, vars)
}

type Vars = std::collections::HashMap<String, Tensor>;

/// The graph of expression `src` over `vars`.
fn build(src: &str, vars: &Vars) -> Tensor {
    kiln::build_expression(src, vars).unwrap_or_else(|e| panic!("{src}: {e}"))
}

/// Two `rand_value` inputs of `shape` (seeds `seed` and `seed + 100`).
fn two_values(dtype: DType, shape: &[usize], seed: u64) -> [Value; 2] {
    [
        jit_support::rand_value(dtype, shape, seed),
        jit_support::rand_value(dtype, shape, seed + 100),
    ]
}

/// [`LENGTHS`] as 1-d shapes.
fn vector_shapes() -> Vec<Vec<usize>> {
    LENGTHS.iter().map(|&n| vec![n]).collect()
}

/// Checks `outs` of the inputs `ins` (two of `dtype`) against the
/// reference on [`two_values`] of each of `shapes` (seeds `seed + k`),
/// within `max_ulps`, compiled as built and under FAST_RUN
/// ([`check_both`]).
fn check_on_shapes(
    ins: &[Tensor],
    outs: &[Tensor],
    dtype: DType,
    shapes: &[Vec<usize>],
    seed: u64,
    max_ulps: u64,
    what: &str,
) {
    for (k, shape) in shapes.iter().enumerate() {
        let vals = two_values(dtype, shape, seed + k as u64);
        let what = format!("{what} ({dtype}, shape {shape:?})");
        check_both(ins, outs, &vals, max_ulps, &what);
    }
}

/// Bool values between nodes ride the vector path as lane masks:
/// comparisons, `isnan` / `isinf` / `isfinite`, logic on bools, a bool
/// `where`, bools in float arithmetic (as 0 / 1) and a mask staged across a
/// block-wise runtime call. For f64 and f32, at lengths around every
/// boundary of the path, with NaN, ±inf and signed zeros among the inputs
/// (`rand_value`), each result equals the reference's bit for bit, except
/// where the block-wise runtime `softplus` computes the values: within its
/// documented 2 ULP (runtime/ACCURACY.md).
#[test]
fn comparisons_and_logic_inside_where_take_the_vector_path_bit_exactly() {
    let exprs = [
        "where(x > 0, x, 0.1 * x)",
        "where(x > y, x - y, y - x) * x",
        "where(isnan(x), 0, x)",
        "where(isinf(x) | (y <= x), y, x)",
        "where(isfinite(x) & ~(y >= 1), x * y, -x)",
        "where((x > 0) != (y < 0), x, y)",
        "where((x == y) == (x < 1), 1, 2) + x",
        "(x > y) * y + (x <= 1)",
        "where(x > 2, x, log1p(exp(x)))",
        "where(where(x > 0, x < 2, y > 0), x, y)",
        "where(x, y, 2)",
    ];
    for dtype in [DType::F64, DType::F32] {
        let (x, y, vars) = pair(["x", "y"], dtype, &[None]);
        for src in exprs {
            let out = build(src, &vars);
            let max_ulps = if src.contains("log1p") { 2 } else { 0 };
            let ins = [x.clone(), y.clone()];
            check_on_shapes(&ins, &[out], dtype, &vector_shapes(), 300, max_ulps, src);
        }
    }
}

/// Reductions of a bool pre-map (`sum(x > 0)`, `any`, `all`, and the
/// rarer `prod` / `max` / `min` of bools) fold the lane masks the vector
/// path leaves in its scratch block: over a whole vector (row mode) at
/// lengths around the vector, block and parallel boundaries, over each row
/// of a matrix (row mode, `any` / `all` stopping early per row), and over
/// its leading axis (column mode), for f64 and f32 inputs with NaN, ±inf
/// and signed zeros. Integer and bool results equal the reference's.
#[test]
fn reductions_of_comparisons_fold_lane_masks_exactly() {
    // The reduction's body: over everything (`{}` empty) or one axis.
    let bodies = [
        "sum(x > 0{})",
        "any(x > 3{})",
        "all(isfinite(x){})",
        "sum((x > y) & ~isnan(y){})",
        "any(x != x{})",
        "all(x < 3.5{})",
        "prod(x > -3.9{})",
        "max(x > y{})",
        "min(isfinite(x){})",
    ];
    for dtype in [DType::F64, DType::F32] {
        for axis in [None, Some(0), Some(1)] {
            let dims: &[Option<usize>] = if axis.is_some() {
                &[None, None]
            } else {
                &[None]
            };
            let (x, y, vars) = pair(["x", "y"], dtype, dims);
            let shapes: Vec<Vec<usize>> = match axis {
                Some(_) => vec![vec![3, 5], vec![130, 7], vec![700, 33], vec![5, 1000]],
                None => vector_shapes(),
            };
            for body in bodies {
                let src = match axis {
                    Some(a) => body.replace("{}", &format!(", axis={a}")),
                    None => body.replace("{}", ""),
                };
                let out = build(&src, &vars);
                let ins = [x.clone(), y.clone()];
                check_on_shapes(&ins, &[out], dtype, &shapes, 500, 0, &src);
            }
        }
    }
}

/// Bool results of comparisons and logic leave the vector path as bytes
/// (0 or 1), also beside a float result of the same kernel: for f64 and f32
/// at lengths around every boundary of the path (the scalar tail writes
/// the last bytes), with NaN, ±inf and signed zeros among the inputs, each
/// result equals the reference's.
#[test]
fn bool_results_leave_the_vector_path_as_bytes() {
    let exprs = [
        "(x > -1) & (x < 1)",
        "(x > 0) != (y > 0)",
        "~(x > 0) & (y < 0)",
        "isnan(x) | (y > 2)",
        "isinf(x) ^ (x == y)",
        "where(x > y, x < 1, isfinite(y))",
    ];
    for dtype in [DType::F64, DType::F32] {
        let (x, y, vars) = pair(["x", "y"], dtype, &[None]);
        for src in exprs {
            let out = build(src, &vars);
            assert_eq!(out.dtype(), DType::Bool, "{src}");
            // The same bools next to a float result of the same inputs.
            let float = &(&x * &y) + 1.0;
            for outs in [vec![out.clone()], vec![out.clone(), float]] {
                let what = format!("{src}, {} outputs", outs.len());
                let ins = [x.clone(), y.clone()];
                check_on_shapes(&ins, &outs, dtype, &vector_shapes(), 700, 0, &what);
            }
        }
    }
}

/// The integer vector path (lanes of every signed and unsigned width, 8 to
/// 64 bits): wrapping arithmetic (products and squares, byte products
/// through 16-bit lanes), absolute values, maxima, minima, clipping and
/// signs (unsigned for unsigned dtypes), bitwise logic, comparisons with
/// `where`, bool results stored as bytes, reductions of comparisons, and
/// constants a lane cannot hold (those programs stay on the scalar path),
/// at lengths around every boundary of the path, on values that span the
/// whole range of each dtype (products wrap), equal the reference's
/// results exactly.
#[test]
fn integer_programs_take_the_vector_path_exactly() {
    let exprs = [
        "i * j + 3 * i - j",
        "-(i * i) + j",
        "(i & 7) | (j ^ 2)",
        "~i & j",
        "where(i > j, i, j)",
        "where((i >= j) & (j != 0), i - j, j * 2)",
        "(i < j) * i + (i == j)",
        "i > j",
        "(i <= 5) ^ (j >= i)",
        // Constants outside the 32-bit range compare as in the reference.
        "i < 5000000000",
        "where(j <= 4294967296, i, j)",
        "sum(i > j)",
        "any(i == j)",
        "all(i != 7)",
        "i * i - abs(j)",
        "maximum(i, j) * 3 - minimum(i, 2)",
        "clip(i, 1, 5) + sign(j) * j",
        "abs(i - j) + sign(i)",
        "where(maximum(i, j) > 2, i * j, -i)",
        "clip(i, 2, 100)",
    ];
    // Small values (so that comparisons tie and `any(i == j)` varies) mixed
    // with values anywhere in 64 bits.
    let values = |dtype: DType, n: usize, seed: u64| {
        int_values(dtype, &[n], seed, |e, s| {
            if e % 3 == 0 {
                s as i64
            } else {
                (s % 9) as i64 - 2
            }
        })
    };
    for dtype in INT_DTYPES {
        let (i, j, vars) = pair(["i", "j"], dtype, &[None]);
        for src in exprs {
            let out = build(src, &vars);
            for (k, &n) in LENGTHS.iter().enumerate() {
                let what = format!("{src} ({dtype}, n = {n})");
                let vals = [
                    values(dtype, n, 900 + k as u64),
                    values(dtype, n, 1000 + k as u64),
                ];
                check_both(
                    &[i.clone(), j.clone()],
                    std::slice::from_ref(&out),
                    &vals,
                    0,
                    &what,
                );
            }
        }
        // A bool result beside a result of the dtype, one kernel: bytes
        // either way for 8-bit lanes, only the bool one a lane mask.
        let outs = [build("i > j", &vars), build("i * j + 1", &vars)];
        for (k, &n) in LENGTHS.iter().enumerate() {
            let vals = [
                values(dtype, n, 1100 + k as u64),
                values(dtype, n, 1200 + k as u64),
            ];
            let what = format!("i > j beside i * j + 1 ({dtype}, n = {n})");
            check_both(&[i.clone(), j.clone()], &outs, &vals, 0, &what);
        }
    }
}

/// Floor division and remainder of integers, between arrays and by
/// constants (`i32` lanes divide in `f64`, and by a constant through its
/// reciprocal): the reference's results exactly, with divisors of 0 and
/// -1, `i32::MIN` among the dividends, and constants up to the dtype's
/// extremes.
#[test]
fn integer_floor_division_and_remainder_equal_the_reference() {
    let common = [
        "i // j",
        "i % j",
        "i // 3",
        "i % 3",
        "i // 1",
        "i % 1",
        "i // 0",
        "i % 0",
        "i // 2",
        "(i * 3) // j + i % 5",
        "where(i > j, i // 10, i % 10)",
        "i // 49",
        "i % 49",
    ];
    let signed = ["i // -7", "i % -7", "i // -1", "i % -1"];
    let wide = [
        "i // 2147483647",
        "i % 2147483647",
        "i // -2147483648",
        "i % -2147483648",
        "i // 1073741824",
        "i % -1000003",
    ];
    // Dividends and divisors anywhere in the dtype (wrapped from 64 bits),
    // small values (0 and -1 among them), i32::MIN and -1 themselves, and
    // multiples of 49, whose quotients by 49 a product by the rounded
    // reciprocal alone puts just below the integer.
    let values = |dtype: DType, n: usize, seed: u64| {
        int_values(dtype, &[n], seed, |e, s| match e % 6 {
            0 => s as i64,
            1 => (s % 9) as i64 - 4,
            2 => i64::from(i32::MIN),
            3 => -1,
            4 => ((s % 40_000_000) as i64 - 20_000_000) * 49,
            _ => (s % 100_000) as i64 - 50_000,
        })
    };
    for dtype in INT_DTYPES {
        let (i, j, vars) = pair(["i", "j"], dtype, &[None]);
        let is_signed = matches!(dtype, DType::I64 | DType::I32 | DType::I16 | DType::I8);
        let exprs = common
            .iter()
            .chain(signed.iter().filter(|_| is_signed))
            .chain(
                wide.iter()
                    .filter(|_| matches!(dtype, DType::I32 | DType::I64)),
            );
        for src in exprs {
            let out = build(src, &vars);
            for (k, &n) in [1, 3, 4, 17, 129, 4097, 10_001].iter().enumerate() {
                let vals = [
                    values(dtype, n, 1300 + k as u64),
                    values(dtype, n, 1400 + k as u64),
                ];
                let what = format!("{src} ({dtype}, n = {n})");
                check_both(
                    &[i.clone(), j.clone()],
                    std::slice::from_ref(&out),
                    &vals,
                    0,
                    &what,
                );
            }
        }
    }
}

/// Sums (wrapping), maxima and minima of every integer dtype over
/// everything, over the leading axis (the runtime's column passes, `i64` /
/// `u64` accumulators) and over rows (its row passes), on
/// contiguous inputs and on strided and reversed views (the sequential
/// fold), and fused with an element-wise map (counts of comparisons fold
/// lane masks of the dtype's width), with the dtype's extremes among
/// values spanning its whole range and a wide spread of row lengths: the
/// reference's results exactly.
#[test]
fn integer_sums_maxima_and_minima_equal_the_reference() {
    let exprs = [
        "max(i)",
        "min(i)",
        "max(i, axis=0)",
        "min(i, axis=0)",
        "max(i, axis=1)",
        "min(i, axis=1)",
        "max(i[:, ::2], axis=0)",
        "min(i[::-1, ::-1], axis=1)",
        "max(i, axis=1) - min(j, axis=0)",
        // Fused with an element-wise map: the column and row passes over
        // each block of mapped values, and lane-mask counts over rows and
        // columns.
        "max(i * 3 + 1, axis=0)",
        "min(i * i, axis=1)",
        "max(i * 3 + 1)",
        "sum(i)",
        "sum(i, axis=0)",
        "sum(i, axis=1)",
        "sum(i * i, axis=0)",
        "sum(i * 3 - 1, axis=1)",
        "sum(i > 2, axis=0)",
        "sum(i > 2, axis=1)",
        "any(i == 7, axis=1)",
    ];
    let values = |dtype: DType, shape: &[usize], seed: u64| {
        int_values(dtype, shape, seed, |e, s| match e % 97 {
            // The extremes of every width, wrapped to the dtype.
            0 => i64::MIN,
            1 => i64::MAX,
            2 => i32::MIN as i64,
            3 => u32::MAX as i64,
            4 => i16::MIN as i64,
            5 => u16::MAX as i64,
            6 => -128,
            7 => 255,
            _ => s as i64,
        })
    };
    let shapes = [
        vec![1, 1],
        vec![3, 5],
        vec![7, 129],
        vec![130, 33],
        vec![64, 1000],
    ];
    for dtype in INT_DTYPES {
        let (i, j, vars) = pair(["i", "j"], dtype, &[None, None]);
        for src in exprs {
            let out = build(src, &vars);
            for (k, shape) in shapes.iter().enumerate() {
                // `j` transposed in shape, so that its column extremes
                // line up with `i`'s row extremes.
                let vals = [
                    values(dtype, shape, 1300 + k as u64),
                    values(dtype, &[shape[1], shape[0]], 1400 + k as u64),
                ];
                let what = format!("{src} ({dtype}, shape {shape:?})");
                check_both(
                    &[i.clone(), j.clone()],
                    std::slice::from_ref(&out),
                    &vals,
                    0,
                    &what,
                );
            }
        }
    }
}

/// Fused reductions over the leading axis (column mode) fold each block of
/// mapped values with the runtime's column pass: each accumulator is
/// updated in row order as the reference does, so sums, products, maxima
/// and minima of an element-wise map equal the reference's bit for bit, for
/// f64 and f32, at widths around the block size and with NaN, ±inf and
/// signed zeros among the inputs.
#[test]
fn fused_column_reductions_fold_blocks_exactly() {
    let exprs = [
        "sum(x * x, axis=0)",
        "prod(1 + 0.001 * x, axis=0)",
        "max(abs(x), axis=0)",
        "min(x * y, axis=0)",
        "sum(where(x > 0, x, 0.5 * y), axis=0)",
    ];
    for dtype in [DType::F64, DType::F32] {
        let (x, y, vars) = pair(["x", "y"], dtype, &[None, None]);
        for src in exprs {
            let out = build(src, &vars);
            let shapes = [vec![130, 7], vec![37, 300], vec![5, 1000], vec![3, 129]];
            let ins = [x.clone(), y.clone()];
            check_on_shapes(&ins, &[out], dtype, &shapes, 1100, 0, src);
        }
    }
}

/// `maximum`, `minimum` and `clip` against constant bounds lower to one
/// `maxp*` / `minp*` each on the vector path; NaN inputs stay NaN and a tie
/// of signed zeros keeps the first operand, as in the reference (bit for
/// bit, signs of zeros included, f64 and f32, with NaN, ±inf and ±0 among
/// the inputs).
#[test]
fn min_and_max_against_constants_keep_nan_and_signed_zeros() {
    let exprs = [
        "maximum(x, 0)",
        "maximum(x, -0.0)",
        "minimum(x, 0)",
        "minimum(x, -0.0) + maximum(y, 1.5)",
        "clip(x, -1, 1)",
        "clip(x * y, -0.0, 0.0)",
        "maximum(x, inf)",
        "minimum(x, -inf)",
    ];
    for dtype in [DType::F64, DType::F32] {
        let (x, y, vars) = pair(["x", "y"], dtype, &[None]);
        let ins = [x.clone(), y.clone()];
        for src in exprs {
            let out = build(src, &vars);
            let fg = FunctionGraph::new(&ins, std::slice::from_ref(&out)).unwrap();
            let f = function(&ins, std::slice::from_ref(&out))
                .compile()
                .unwrap();
            for (k, &n) in LENGTHS.iter().enumerate() {
                let vals = two_values(dtype, &[n], 1200 + k as u64);
                let want = eval::evaluate(&fg, &vals).unwrap().remove(0);
                let got = f.call_values(&vals).unwrap().remove(0);
                assert_eq!(got.dtype(), want.dtype(), "{src}");
                let (g, w) = (got.to_f64_array(), want.to_f64_array());
                for (e, (a, b)) in g.iter().zip(w.iter()).enumerate() {
                    assert!(
                        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                        "{src} ({dtype}, n = {n}) element {e}: got {a:e}, want {b:e}"
                    );
                }
            }
        }
    }
}

/// Checks the binary block function of the expression `expr(a, b)` on the
/// contiguous path: in f64 within `bound64` ULP of the reference (the
/// per-element `std` function) on every pair of `specials` followed by the
/// pairs `(a[i], b[i])` of `more`, in f32 (rounded once) within 1 ULP (0
/// for an exact function, `bound64` 0); exact on the special pairs wherever
/// the result is not finite or is zero; and a step-2 first operand
/// (gathered into blocks by the driver) within `bound64` on random values
/// from `seed`.
fn check_binary_block_function(
    expr: &dyn Fn(&str, &str) -> String,
    specials: &[f64],
    more: (&[f64], &[f64]),
    bound64: u64,
    seed: u64,
) {
    let mut xs = vec![];
    let mut ys = vec![];
    for &a in specials {
        for &b in specials {
            xs.push(a);
            ys.push(b);
        }
    }
    xs.extend(more.0);
    ys.extend(more.1);
    let n = xs.len();
    let name = expr("a", "b");
    for dtype in [DType::F64, DType::F32] {
        let (a, b, vars) = pair(["a", "b"], dtype, &[None]);
        let out = build(&name, &vars);
        let vals = [
            Value::F64(ArrayD::from_shape_vec(vec![n], xs.clone()).unwrap()).cast(dtype),
            Value::F64(ArrayD::from_shape_vec(vec![n], ys.clone()).unwrap()).cast(dtype),
        ];
        let fg = FunctionGraph::new(&[a.clone(), b.clone()], std::slice::from_ref(&out)).unwrap();
        let want = eval::evaluate(&fg, &vals).unwrap();
        let f = function(&[a, b], &[out]).compile().unwrap();
        let got = f.call(&[(&vals[0]).into(), (&vals[1]).into()]).unwrap();
        let bound = if dtype == DType::F64 {
            bound64
        } else {
            bound64.min(1)
        };
        assert_values(&got[0], &want[0], bound, &format!("{name} {dtype:?}"));
        let (g, w) = (got[0].to_f64_array(), want[0].to_f64_array());
        for i in 0..specials.len() * specials.len() {
            if !w[i].is_finite() || w[i] == 0.0 || g[i] == 0.0 {
                assert_eq!(
                    ulps(g[i], w[i], dtype),
                    0,
                    "{name} pair {i}: {} vs {}",
                    g[i],
                    w[i]
                );
            }
        }
    }
    let (a, b, vars) = pair(["a", "b"], DType::F64, &[None]);
    let out = build(&expr("a[::2]", "b"), &vars);
    let vals = [
        Value::F64(
            ArrayD::from_shape_vec(
                vec![8000],
                rand_f64(&[8000], seed, -2.0, 2.0)
                    .into_raw_vec_and_offset()
                    .0,
            )
            .unwrap(),
        ),
        Value::F64(rand_f64(&[4000], seed + 1, -2.0, 2.0)),
    ];
    check(
        &[a, b],
        &[out],
        &vals,
        bound64,
        &format!("{name} of a strided operand"),
    );
}

/// `arctan2` takes the runtime's block function on the contiguous path:
/// within its 2-ULP bound of the reference (`f64::atan2`) on random pairs,
/// every quadrant and the quotient boundaries, exact on the IEEE special
/// pairs (signed zeros, infinities, NaN), in f64 and f32 (rounded once);
/// a step-2 operand (gathered into blocks by the driver) stays within the
/// bound too.
#[test]
fn arctan2_block_function_and_special_pairs() {
    let specials = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        5e-324,
        -3.5,
    ];
    let (ys, xs) = (
        rand_f64(&[4000], 21, -3.0, 3.0),
        rand_f64(&[4000], 22, -3.0, 3.0),
    );
    let (ys, xs) = (ys.as_slice().unwrap(), xs.as_slice().unwrap());
    check_binary_block_function(
        &|a, b| format!("arctan2({a}, {b})"),
        &specials,
        (ys, xs),
        2,
        23,
    );
}

/// `hypot` takes the runtime's block function on the contiguous path:
/// within its 1-ULP bound of the reference (`f64::hypot`) on random pairs
/// of every magnitude (both of the kernel's scaling ranges, subnormals,
/// operands far apart in size), exact on the special pairs (an infinity
/// wins over NaN, zeros give +0), in f64 and f32 (rounded once); a step-2
/// operand (gathered into blocks by the driver) stays within the bound.
#[test]
fn hypot_block_function_and_special_pairs() {
    let specials = [
        0.0,
        -0.0,
        1.0,
        -3.5,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        5e-324,
        -1e308,
        1e-300,
    ];
    // Magnitudes e^u for u uniform in [-744, 709], signs from a second draw.
    let wide = |seed: u64| -> Vec<f64> {
        let u = rand_f64(&[3000], seed, -744.0, 709.0);
        let s = rand_f64(&[3000], seed + 100, -1.0, 1.0);
        u.iter()
            .zip(s.iter())
            .map(|(&u, &s)| u.exp().copysign(s))
            .collect()
    };
    let mut xs: Vec<f64> = rand_f64(&[3000], 31, -3.0, 3.0).iter().copied().collect();
    let mut ys: Vec<f64> = rand_f64(&[3000], 32, -3.0, 3.0).iter().copied().collect();
    xs.extend(wide(33));
    ys.extend(wide(34));
    check_binary_block_function(
        &|a, b| format!("hypot({a}, {b})"),
        &specials,
        (&xs, &ys),
        1,
        35,
    );
}

/// `fmod`, `%` and `//` take the runtime's exact block functions on the
/// contiguous path: bit for bit the reference's (C's `fmod`, numpy's
/// remainder and floor division) on the special pairs (zero and infinite
/// divisors, infinite and NaN dividends: the lanes the runtime recomputes
/// with the C library), on quotients just below and above an integer (the
/// fast path's correction), at the 2^52 edge of its range and on random
/// pairs of magnitudes up to 2^60 apart; in f32 too, and with a step-2
/// operand.
#[test]
fn remainder_block_functions_are_exact() {
    let specials = [
        0.0,
        -0.0,
        1.0,
        -3.5,
        0.1,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        5e-324,
        -1e308,
    ];
    let u = rand_f64(&[3000], 41, -60.0, 60.0);
    let v = rand_f64(&[3000], 42, -60.0, 60.0);
    let s = rand_f64(&[3000], 43, -1.0, 1.0);
    let mut xs: Vec<f64> = u
        .iter()
        .zip(s.iter())
        .map(|(&e, &s)| e.exp2().copysign(s))
        .collect();
    let mut ys: Vec<f64> = v.iter().map(|&e| (e / 4.0).exp2()).collect();
    // Multiples of a divisor one ULP either side: quotients that round
    // onto the integer they miss.
    let divisors = ys[..1000].to_vec();
    for (k, &y) in divisors.iter().enumerate() {
        let p = (k as f64 + 1.0) * y;
        for q in [p.next_down(), p, p.next_up()] {
            xs.push(q);
            ys.push(y);
        }
    }
    for k in [-2.0, 0.0, 2.0] {
        xs.extend([
            (4_503_599_627_370_496.0 + k) * 0.75,
            -(9_007_199_254_740_992.0 + k),
        ]);
        ys.extend([0.75, 2.0]);
    }
    let pairs = (xs.as_slice(), ys.as_slice());
    check_binary_block_function(&|a, b| format!("fmod({a}, {b})"), &specials, pairs, 0, 44);
    check_binary_block_function(&|a, b| format!("{a} % {b}"), &specials, pairs, 0, 45);
    check_binary_block_function(&|a, b| format!("{a} // {b}"), &specials, pairs, 0, 46);
}

/// Kernels of many operands check their strides for the vector path with
/// one runtime call (more than 8 inputs, or more than 8 outputs): a
/// Composite of 11 inputs (ten vectors and a broadcast scalar) and the
/// sibling-fused Composite of its ten outputs, on contiguous and strided
/// inputs, against the reference evaluator.
#[test]
fn many_operand_kernels_check_strides_by_call() {
    let xs: Vec<Tensor> = (0..10)
        .map(|k| vector(&format!("x{k}"), DType::F64))
        .collect();
    let s = scalar("s", DType::F64);
    let mut t = &xs[0] * &s;
    for (k, x) in xs.iter().enumerate().skip(1) {
        t = &t + &(x * (k as f64 + 1.0));
    }
    let outs: Vec<Tensor> = xs.iter().map(|x| &(&t * x) + &s).collect();
    let mut ins = xs.clone();
    ins.push(s.clone());
    let fg = FunctionGraph::new(&ins, &outs).unwrap();
    let f = function(&ins, &outs).compile().unwrap();
    let composites: Vec<(usize, usize)> = f
        .graph()
        .node_ids()
        .filter_map(|n| match &f.graph().node(n).op {
            kiln::Op::Composite { composite, .. } => {
                Some((composite.inputs.len(), composite.outputs.len()))
            }
            _ => None,
        })
        .collect();
    assert!(composites.iter().any(|&(i, _)| i > 8), "{composites:?}");
    assert!(composites.iter().any(|&(_, o)| o > 8), "{composites:?}");
    for n in [1, 3, 129, 4097] {
        for step in [1, 2] {
            let full: Vec<ArrayD<f64>> = (0..10)
                .map(|k| rand_f64(&[n * step], 40 + k as u64, 0.5, 1.5))
                .collect();
            let views: Vec<Value> = full
                .iter()
                .map(|a| Value::from(a.slice(ndarray::s![..;step]).to_owned().into_dyn()))
                .collect();
            let sv = Value::from(ndarray::arr0(0.75).into_dyn());
            let mut vals = views.clone();
            vals.push(sv.clone());
            let want = eval::evaluate(&fg, &vals).unwrap();
            let mut args: Vec<kiln::linker::Arg<'_>> = full
                .iter()
                .map(|a| a.slice(ndarray::s![..;step]).into_dyn().into())
                .collect();
            args.push((&sv).into());
            let got = f.call(&args).unwrap();
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_values(g, w, 16, &format!("n = {n}, step {step}, output {k}"));
            }
        }
    }
    // The vector path is taken: its block-wise exp (within 2 ULP of the
    // reference's `f64::exp`, which the scalar path calls) differs from the
    // reference in some of 4097 elements.
    let e = (&t * 0.01).exp();
    let fe = function(&ins, std::slice::from_ref(&e)).compile().unwrap();
    let ge = FunctionGraph::new(&ins, &[e]).unwrap();
    let mut vals: Vec<Value> = (0..10)
        .map(|k| Value::from(rand_f64(&[4097], 60 + k as u64, 0.5, 1.5)))
        .collect();
    vals.push(Value::from(ndarray::arr0(0.75).into_dyn()));
    let want = eval::evaluate(&ge, &vals).unwrap().remove(0);
    let got = fe.call_values(&vals).unwrap().remove(0);
    assert_values(&got, &want, 2, "exp of 11 operands");
    assert!(
        !got.same_as(&want),
        "every element bit-identical to the scalar path's"
    );
}

/// A value's sigmoid and its negation's (as the gradient of a logistic loss
/// has them) are computed by one paired runtime call in FAST_RUN's fused
/// kernels, element-wise and reducing (`CodegenOptions::pair_calls`). At
/// every length of the vector path, with NaN, ±inf and signed zeros among
/// the inputs, the paired kernels give the bits of two separate calls
/// (`pair_calls` off), sums included (the same order either way). How the
/// separate calls compare with the reference is checked above and in
/// `binary_crossentropy.rs`.
#[test]
fn paired_calls_give_the_bits_of_separate_ones() {
    use kiln::linker::CodegenOptions;
    let (x, y, vars) = pair(["x", "y"], DType::F64, &[None]);
    let ins = [x.clone(), y.clone()];
    let compile = |outs: &[Tensor], pair_calls: bool| {
        let codegen = CodegenOptions {
            pair_calls,
            ..Default::default()
        };
        compile_with(&ins, outs, codegen)
    };
    let sources = [
        "sigmoid(x) * 2 + sigmoid(-x)",
        "((1 - y) * sigmoid(x)) / 3 - (y * sigmoid(-x)) / 3",
        "sigmoid(-x) - sigmoid(x) * y",
        "sigmoid(-(x * y)) + sigmoid(x * y)",
        "sum(sigmoid(x) - y * sigmoid(-x))",
    ];
    for src in sources {
        let outs = [build(src, &vars)];
        let (on, off) = (compile(&outs, true), compile(&outs, false));
        for (k, &n) in LENGTHS.iter().enumerate() {
            let vals = two_values(DType::F64, &[n], 1300 + k as u64);
            let a = on.call_values(&vals).unwrap().remove(0);
            let b = off.call_values(&vals).unwrap().remove(0);
            assert_values(&a, &b, 0, &format!("{src}, n = {n}"));
        }
    }
}

/// An element-wise operation whose operands stay in cache runs in calls
/// shorter than the prefetch threshold, one that does not in long calls
/// that prefetch: every element gets the same bits either way. The first
/// 50 000 elements (0.8 MB of operands) computed alone equal the same
/// elements of a 3 000 000-element call (48 MB), for each program (a
/// block-wise exp between element-wise stages included), on one thread and
/// on two.
#[test]
fn in_cache_and_streamed_calls_give_the_same_bits() {
    let x = vector("x", DType::F64);
    let s = scalar("s", DType::F64);
    let (long, short) = (3_000_000, 50_000);
    let (vx, vs) = inputs(long, 7);
    let head = vx.slice(ndarray::s![..short]).to_owned().into_dyn();
    for (name, out) in programs(&x, &s) {
        let f = function(&[x.clone(), s.clone()], &[out]).compile().unwrap();
        for threads in [1, 2] {
            kiln::linker::set_num_threads(threads);
            let run = |v: &ArrayD<f64>| {
                let got = f
                    .call_values(&[Value::F64(v.clone()), Value::F64(vs.clone())])
                    .unwrap();
                let Value::F64(a) = &got[0] else {
                    panic!("{name}: f64 result expected")
                };
                a.iter().map(|v| v.to_bits()).collect::<Vec<u64>>()
            };
            let (all, part) = (run(&vx), run(&head));
            assert!(
                all[..short] == part[..],
                "{name}, {threads} threads: the in-cache call differs"
            );
        }
    }
    kiln::linker::set_num_threads(0);
}

/// Rewrites the graph of `out` over `ins` under FAST_RUN (fusing it into
/// one kernel), then compares that graph compiled (no further rewriting)
/// with the reference evaluator on the same graph, on `vals`, within
/// `max_ulps`: the check of a code path and not of a rewrite's rounding.
fn check_fast_run_graph(ins: &[Tensor], out: &Tensor, vals: &[Value], max_ulps: u64, what: &str) {
    let mut fg = FunctionGraph::new(ins, std::slice::from_ref(out)).unwrap();
    rewrite_graph(&mut fg, &Mode::fast_run()).unwrap();
    let want = eval::evaluate(&fg, vals).unwrap();
    let f = compile(&fg, &CompileOptions::default()).unwrap();
    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
    let got = f.call(&args).unwrap();
    assert_values(&got[0], &want[0], max_ulps, what);
}

/// 8- and 16-bit integer work feeding `f64` values (`exp(-img / 255)` of
/// a `uint8` image) is computed exactly in the `f64` path's lanes and
/// wrapped to its dtype where it may leave its range: negation, sums,
/// differences and products that wrap, `abs` of the most negative value,
/// clips, selections by a comparison of small integers, and casts between
/// small dtypes. Inputs span each dtype's whole range (its extremes
/// included); at lengths around every boundary of the path, the FAST_RUN
/// graph (fused into one kernel) gives the reference's bits on that graph
/// (within 1 ULP where the runtime's exp computes them).
#[test]
fn small_integer_work_in_f64_lanes_wraps_as_the_reference() {
    let exprs = [
        "exp(-x / 255)",
        "(x - y) * 0.5",
        "(x * y + 3) * 0.25",
        "sqrt(abs(x) * 1.0)",
        "where(x > y, x - y, 0) * 0.01",
        "where(x == 7, -x, abs(y)) / 3",
        "clip(x * 3, 7, 200) * 1.5",
        "maximum(-x, y - 1) * 2.0 + (x < 0)",
        "cast(cast(x, \"u8\") + cast(y, \"i8\"), \"f64\") - 0.5",
        "cast(sqr(x) - y, \"f64\")",
    ];
    for dtype in [DType::U8, DType::I8, DType::U16, DType::I16] {
        let (x, y, vars) = pair(["x", "y"], dtype, &[None]);
        let bits = 8 * dtype.size_of() as u32;
        let (lo, span) = if dtype.is_signed_int() {
            (-(1i64 << (bits - 1)), 1i64 << bits)
        } else {
            (0, 1i64 << bits)
        };
        // Every tenth element an extreme (lo, lo + 1, hi - 1, hi, 0).
        let pick = |e: usize, s: u64| match e % 10 {
            3 => [lo, lo + 1, lo + span - 2, lo + span - 1, 0][(e / 10) % 5],
            _ => lo + (s % span as u64) as i64,
        };
        for src in exprs {
            let out = build(src, &vars);
            let ins = [x.clone(), y.clone()];
            for (k, &n) in LENGTHS.iter().enumerate() {
                let vals = [
                    jit_support::int_values(dtype, &[n], 900 + k as u64, pick),
                    jit_support::int_values(dtype, &[n], 950 + k as u64, pick),
                ];
                // The runtime's block-wise exp is within 1 ULP of the
                // reference's (runtime/ACCURACY.md); a wrong wrap would be
                // off by far more.
                let max_ulps = if src.contains("exp") { 1 } else { 0 };
                let what = format!("{src} ({dtype}, n = {n})");
                check_fast_run_graph(&ins, &out, &vals, max_ulps, &what);
            }
        }
    }
}

/// `i64` and `u64` inputs read by float arithmetic enter the `f64` path's
/// lanes rounded to nearest, as the reference's `as f64` rounds them (x86
/// has no 64-bit lane conversion below AVX-512DQ: the high and low halves
/// are converted exactly and added with one rounding). Full-range values,
/// halfway cases between `f64` neighbours above 2^53 (rounded to even),
/// the extremes; at lengths around every boundary of the path, the
/// FAST_RUN graph gives the reference's bits on that graph (within 1 ULP
/// where the runtime's exp computes them).
#[test]
fn sixty_four_bit_integers_enter_f64_lanes_rounded_as_the_reference() {
    let exprs = [
        "i * 0.5 - x",
        "i * 1e-19 + x",
        "exp(i * 1e-19)",
        "maximum(i * 2.0, x)",
        "sqrt(i * 1.0 * i)",
    ];
    let special: [u64; 10] = [
        (1 << 53) + 1,
        (1 << 53) + 3,
        (1u64 << 53).wrapping_neg() - 1,
        1 << 63,
        u64::MAX,
        i64::MAX as u64,
        (1 << 62) + (1 << 9) + 1,
        (1 << 62) + (1 << 9),
        0,
        (1 << 32) - 1,
    ];
    for dtype in [DType::I64, DType::U64] {
        let i = kiln::tensor("i", dtype, &[None]);
        let x = kiln::tensor("x", DType::F64, &[None]);
        let vars: Vars = [("i".to_string(), i.clone()), ("x".to_string(), x.clone())]
            .into_iter()
            .collect();
        for src in exprs {
            let out = build(src, &vars);
            let ins = [i.clone(), x.clone()];
            for (k, &n) in LENGTHS.iter().enumerate() {
                let pick = |e: usize, s: u64| {
                    (if e % 5 == 2 {
                        special[(e / 5) % special.len()]
                    } else {
                        s
                    }) as i64
                };
                let vals = [
                    jit_support::int_values(dtype, &[n], 700 + k as u64, pick),
                    Value::F64(jit_support::rand_f64(&[n], 750 + k as u64, -2.0, 2.0)),
                ];
                let max_ulps = if src.contains("exp") { 1 } else { 0 };
                let what = format!("{src} ({dtype}, n = {n})");
                check_fast_run_graph(&ins, &out, &vals, max_ulps, &what);
            }
        }
    }
}
