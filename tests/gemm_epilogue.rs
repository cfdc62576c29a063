//! GEMM epilogues end to end: a float `Dot` or a `Gemm` whose only reader
//! is an element-wise step (`tanh(A @ W + b)`, `tanh(A @ W + Y)`) runs as
//! one step, block by block of rows when large, and gives the reference's values (to the GEMM's reassociation)
//! for f64 and f32, small, large (threaded), empty and strided operands,
//! NaN and infinities, `call_into` destinations and casts; the same bits
//! at every thread count; and the cases it must leave alone (a second
//! reader, a returned product, a broadcast product, a vector operand,
//! epilogues switched off) still compute the right values.

mod jit_support;

use jit_support::{rand_f64, ulps};
use kiln::linker::{Arg, CodegenOptions};
use kiln::*;
use ndarray::{s, ArrayD};

const F64: DType = DType::F64;
const F32: DType = DType::F32;

/// The inputs A (m×k), W (k×n), b (n) and Y (m×n) of `dtype`.
fn mlp_inputs(dtype: DType) -> Vec<Tensor> {
    vec![
        matrix("A", dtype),
        matrix("W", dtype),
        vector("b", dtype),
        matrix("Y", dtype),
    ]
}

/// `expr` over the tensors `ins` (by name).
fn graph(expr: &str, ins: &[Tensor]) -> Tensor {
    let vars = ins
        .iter()
        .map(|t| (t.name().unwrap().to_string(), t.clone()))
        .collect();
    build_expression(expr, &vars).unwrap()
}

/// `out` of `ins` compiled under FAST_RUN with epilogues on or off.
fn compile_graph(ins: &[Tensor], out: &Tensor, epilogues: bool) -> CompiledFunction {
    let codegen = CodegenOptions {
        epilogues,
        ..Default::default()
    };
    jit_support::compile_with(ins, std::slice::from_ref(out), codegen)
}

/// `expr` over [`mlp_inputs`] compiled with epilogues on or off.
fn compile(expr: &str, dtype: DType, epilogues: bool) -> CompiledFunction {
    let ins = mlp_inputs(dtype);
    compile_graph(&ins, &graph(expr, &ins), epilogues)
}

/// The reference evaluator's value of `out` (not rewritten) on `vals`.
fn reference_of(ins: &[Tensor], out: &Tensor, vals: &[Value]) -> Value {
    let fg = FunctionGraph::new(ins, std::slice::from_ref(out)).unwrap();
    eval::evaluate(&fg, vals).unwrap().remove(0)
}

/// The reference value of `expr` over [`mlp_inputs`].
fn reference(expr: &str, dtype: DType, vals: &[Value]) -> Value {
    let ins = mlp_inputs(dtype);
    reference_of(&ins, &graph(expr, &ins), vals)
}

/// Inputs of `compile`'s functions for sizes m, k, n, in [-1, 1).
fn inputs(dtype: DType, (m, k, n): (usize, usize, usize), seed: u64) -> Vec<Value> {
    let v = |shape: &[usize], s: u64| {
        let a = rand_f64(shape, seed * 10 + s, -1.0, 1.0);
        match dtype {
            F32 => Value::F32(a.mapv(|x| x as f32)),
            _ => Value::F64(a),
        }
    };
    vec![v(&[m, k], 1), v(&[k, n], 2), v(&[n], 3), v(&[m, n], 4)]
}

/// The step names of one profiled call.
fn steps(f: &CompiledFunction, vals: &[Value]) -> Vec<String> {
    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
    let (_, prof) = f.call_profiled(&args).unwrap();
    prof.nodes.into_iter().map(|(n, _)| n).collect()
}

/// Whether some step is a product with its epilogue (`dot+...`,
/// `Gemm{...}+...`).
fn fused(f: &CompiledFunction, vals: &[Value]) -> bool {
    steps(f, vals)
        .iter()
        .any(|n| n.starts_with("dot+") || (n.starts_with("Gemm") && n.contains("}+")))
}

/// |got - want| <= tol·(1 + |want|) elementwise, NaN where NaN, same
/// infinities; `tol` covers the GEMM's reassociated sums (k terms).
fn assert_near(got: &Value, want: &Value, tol: f64, what: &str) {
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.to_f64_array(), want.to_f64_array());
    for (i, (x, y)) in g.iter().zip(w.iter()).enumerate() {
        let ok = if y.is_nan() {
            x.is_nan()
        } else if y.is_infinite() {
            x == y
        } else {
            (x - y).abs() <= tol * (1.0 + y.abs())
        };
        assert!(ok, "{what}: element {i}: got {x:e}, want {y:e}");
    }
}

fn call(f: &CompiledFunction, vals: &[Value]) -> Value {
    f.call_values(vals).unwrap().remove(0)
}

const MLP: &str = "tanh(A @ W + b)";

#[test]
fn a_product_and_its_elementwise_reader_run_as_one_step() {
    // A product of more than 16 MB runs in blocks of rows (2100 rows:
    // four blocks of 512 and one of 52, see below); smaller ones run whole
    // (131·257·129 threaded by the GEMM, 7·5·3 inline); empty m, n, k too.
    let sizes = [
        (131, 257, 129),
        (64, 300, 200),
        (7, 5, 3),
        (0, 5, 3),
        (4, 0, 3),
        (4, 5, 0),
        (1, 9, 1),
    ];
    for dtype in [F64, F32] {
        let tol = if dtype == F64 { 1e-13 } else { 2e-5 };
        let f = compile(MLP, dtype, true);
        let blocked = (2100, 8, if dtype == F64 { 1000 } else { 2000 });
        for (i, &size) in sizes.iter().chain([&blocked]).enumerate() {
            let vals = inputs(dtype, size, i as u64);
            assert!(fused(&f, &vals), "{dtype} {size:?}: {:?}", steps(&f, &vals));
            let want = reference(MLP, dtype, &vals);
            assert_near(&call(&f, &vals), &want, tol, &format!("{dtype} {size:?}"));
        }
    }
}

#[test]
fn gemm_products_run_with_their_epilogue_too() {
    // `A @ W + Y` becomes one Gemm (z = Y, updated in place); scaled forms
    // carry alpha and beta.
    for expr in ["tanh(A @ W + Y)", "tanh(2.5 * (A @ W) - 0.5 * Y)"] {
        for dtype in [F64, F32] {
            let tol = if dtype == F64 { 1e-12 } else { 2e-5 };
            let f = compile(expr, dtype, true);
            let n = if dtype == F64 { 1000 } else { 2000 };
            for (i, size) in [(2100, 8, n), (131, 257, 129), (5, 0, 3)]
                .into_iter()
                .enumerate()
            {
                let vals = inputs(dtype, size, 20 + i as u64);
                let names = steps(&f, &vals);
                assert!(
                    names.iter().any(|n| n.starts_with("Gemm")),
                    "{expr}: {names:?}"
                );
                assert!(fused(&f, &vals), "{expr}: {names:?}");
                let want = reference(expr, dtype, &vals);
                assert_near(
                    &call(&f, &vals),
                    &want,
                    tol,
                    &format!("{expr} {dtype} {size:?}"),
                );
            }
        }
    }
}

#[test]
fn the_result_does_not_depend_on_the_thread_count() {
    for dtype in [F64, F32] {
        let g = compile("tanh(A @ W + Y)", dtype, true);
        let vals = inputs(dtype, (2100, 9, if dtype == F64 { 1000 } else { 2000 }), 4);
        let mut outs = Vec::new();
        for threads in [1, 2, 3] {
            kiln::linker::set_num_threads(threads);
            outs.push(call(&g, &vals));
        }
        kiln::linker::set_num_threads(0);
        assert!(outs.iter().all(|o| o.same_as(&outs[0])), "{dtype}: Gemm");
        let f = compile("tanh(A @ W + b) * Y", dtype, true);
        // Blocked (more than 16 MB), then threaded by the GEMM.
        let n = if dtype == F64 { 1000 } else { 2000 };
        for size in [(2100, 9, n), (157, 211, 143)] {
            let vals = inputs(dtype, size, 5);
            let mut outs = Vec::new();
            for threads in [1, 2, 3] {
                kiln::linker::set_num_threads(threads);
                outs.push(call(&f, &vals));
            }
            kiln::linker::set_num_threads(0);
            for o in &outs[1..] {
                assert!(
                    o.same_as(&outs[0]),
                    "{dtype} {size:?}: thread count changed bits"
                );
            }
        }
    }
}

#[test]
fn epilogues_off_gives_two_steps_and_the_same_values() {
    let vals = inputs(F64, (131, 257, 129), 6);
    let on = compile(MLP, F64, true);
    let off = compile(MLP, F64, false);
    assert!(!fused(&off, &vals), "{:?}", steps(&off, &vals));
    assert!(steps(&off, &vals).iter().any(|n| n == "dot"));
    assert_near(&call(&on, &vals), &call(&off, &vals), 1e-14, "on vs off");
}

#[test]
fn nan_and_infinities_reach_the_rows_they_touch() {
    let mut vals = inputs(F64, (2100, 16, 1000), 7);
    let Value::F64(a) = &mut vals[0] else {
        unreachable!()
    };
    a[[3, 5]] = f64::NAN;
    a[[40, 0]] = f64::INFINITY;
    let Value::F64(b) = &mut vals[2] else {
        unreachable!()
    };
    b[7] = f64::NEG_INFINITY;
    let expr = "exp(A @ W + b)";
    let f = compile(expr, F64, true);
    assert!(fused(&f, &vals));
    let got = call(&f, &vals);
    assert_near(&got, &reference(expr, F64, &vals), 1e-12, "specials");
    let g = got.to_f64_array();
    assert!(g[[3, 0]].is_nan() && g[[3, 999]].is_nan(), "NaN row");
    assert_eq!(g[[0, 7]], 0.0, "exp(-inf) column");
}

#[test]
fn call_into_writes_the_callers_array() {
    let f = compile(MLP, F64, true);
    for (m, k, n) in [(2100, 8, 1000), (131, 257, 129)] {
        let vals = inputs(F64, (m, k, n), 8);
        let want = call(&f, &vals);
        let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
        let mut outs = vec![Value::F64(ArrayD::zeros(vec![m, n]))];
        f.call_into(&args, &mut outs).unwrap();
        assert!(outs[0].same_as(&want), "{m}x{k}x{n}");
    }
}

#[test]
fn strided_and_transposed_operands_are_read_through_their_strides() {
    let f = compile(MLP, F64, true);
    // Blocked: C is 2100 × 1000 f64.
    let (m, k, n) = (2100, 12, 1000);
    let at = rand_f64(&[k, m], 1, -1.0, 1.0);
    let wide = rand_f64(&[k, 2 * n], 2, -1.0, 1.0);
    let b = rand_f64(&[n], 3, -1.0, 1.0);
    let y = rand_f64(&[m, n], 4, -1.0, 1.0);
    let a = at.t();
    let w = wide.slice(s![.., ..;2]).into_dyn();
    let args = [Arg::from(&a), Arg::from(&w), Arg::from(&b), Arg::from(&y)];
    let got = f.call(&args).unwrap().remove(0);
    let dense = [a.to_owned(), w.to_owned(), b.clone(), y.clone()].map(Value::F64);
    assert_near(&got, &reference(MLP, F64, &dense), 1e-13, "strided");
}

#[test]
fn a_product_read_twice_by_different_steps_is_not_merged() {
    // A reduction and the map read the product: two readers.
    let expr = "tanh(A @ W) + sum(A @ W, axis=0)";
    let f = compile(expr, F64, true);
    let vals = inputs(F64, (131, 257, 129), 9);
    assert!(!fused(&f, &vals), "{:?}", steps(&f, &vals));
    assert_near(&call(&f, &vals), &reference(expr, F64, &vals), 1e-12, expr);
    // One kernel reading the product twice is still its only reader.
    let expr = "(A @ W) * (A @ W) + b";
    let f = compile(expr, F64, true);
    assert!(fused(&f, &vals), "{:?}", steps(&f, &vals));
    assert_near(&call(&f, &vals), &reference(expr, F64, &vals), 1e-12, expr);
}

#[test]
fn unusual_operands_keep_their_values() {
    let ins = vec![
        matrix("A", F64),
        matrix("Y", F64),
        // A one-column right operand: the product (m×1) is broadcast
        // against Y inside the map, which then runs after the whole product.
        tensor("w", F64, &[None, Some(1)]),
        // An integer left operand, cast to f64 before the product.
        matrix("I", DType::I64),
        // A vector right operand: a matrix-vector product (as `A @ v + c`
        // it would become a Gemm).
        vector("v", F64),
        vector("c", F64),
    ];
    let (m, k, n) = (150, 120, 90);
    let ints = rand_f64(&[m, k], 5, -50.0, 50.0).mapv(|x| x.floor() as i64);
    let vals = [
        Value::F64(rand_f64(&[m, k], 1, -1.0, 1.0)),
        Value::F64(rand_f64(&[m, n], 2, -1.0, 1.0)),
        Value::F64(rand_f64(&[k, 1], 3, -1.0, 1.0)),
        Value::I64(ints),
        Value::F64(rand_f64(&[k], 4, -1.0, 1.0)),
        Value::F64(rand_f64(&[m], 6, -1.0, 1.0)),
    ];
    let y = matrix("W", F64);
    let mut ins_w = ins.clone();
    ins_w.push(y);
    let mut vals_w = vals.to_vec();
    vals_w.push(Value::F64(rand_f64(&[k, n], 7, -1.0, 1.0)));
    // (`A @ v + c` is a Gemm with a vector operand: the plain path too.)
    for expr in [
        "tanh(A @ w + Y)",
        "tanh(I @ W + Y)",
        "tanh(A @ v) * c",
        "tanh(A @ v + c)",
    ] {
        let out = graph(expr, &ins_w);
        let f = compile_graph(&ins_w, &out, true);
        let want = reference_of(&ins_w, &out, &vals_w);
        // Each is merged; the executor picks the whole-array path.
        assert!(fused(&f, &vals_w), "{expr}: {:?}", steps(&f, &vals_w));
        let got = f.call_values(&vals_w).unwrap().remove(0);
        assert_near(&got, &want, 1e-12, expr);
    }
}

#[test]
fn a_returned_product_is_not_merged() {
    let (a, w) = (matrix("A", F64), matrix("W", F64));
    let c = dot(&a, &w).unwrap();
    let t = c.tanh();
    let f = function(&[a, w], &[c, t]).compile().unwrap();
    let vals = [
        Value::F64(rand_f64(&[64, 80], 1, -1.0, 1.0)),
        Value::F64(rand_f64(&[80, 96], 2, -1.0, 1.0)),
    ];
    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
    let (outs, prof) = f.call_profiled(&args).unwrap();
    assert!(prof.nodes.iter().all(|(n, _)| !n.starts_with("dot+")));
    let (c, t) = (outs[0].to_f64_array(), outs[1].to_f64_array());
    // kiln's tanh is within 2 ULP of the correctly rounded value.
    assert!(t
        .iter()
        .zip(c.iter())
        .all(|(t, c)| ulps(*t, c.tanh(), F64) <= 2));
}

#[test]
fn a_map_that_may_overwrite_an_operand_of_the_product_keeps_its_value() {
    // exp(V) is the product's right operand and the map's other input; a
    // map overwriting it block by block would change what the later
    // blocks' products read, so such a map is not merged (the unit tests
    // of `plan::epilogue`; here the inplace pass overwrites the product,
    // which is merged). Large enough to run in blocks.
    let ins = vec![matrix("A", F64), matrix("V", F64)];
    let expr = "tanh(A @ exp(V)) * exp(V)";
    let out = graph(expr, &ins);
    let f = compile_graph(&ins, &out, true);
    let (m, n) = (2100, 1000);
    let vals = [
        Value::F64(rand_f64(&[m, m], 1, -1.0, 1.0)),
        Value::F64(rand_f64(&[m, n], 2, -1.0, 1.0)),
    ];
    let got = f.call_values(&vals).unwrap().remove(0);
    assert_near(&got, &reference_of(&ins, &out, &vals), 1e-10, expr);
}
