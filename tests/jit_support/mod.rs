//! Shared helpers of the JIT tests: compile a graph, run it on values and
//! compare with the reference evaluator.
#![allow(dead_code)]

use kiln::linker::{compile, Arg, CodegenOptions, CompileOptions};
use kiln::{eval, function, CompiledFunction, DType, FunctionGraph, Tensor, Value};
use ndarray::{ArrayD, IxDyn};

/// Maximum distance in units in the last place between two floats of `dtype`
/// (0 when bit-identical or both NaN).
pub fn ulps(a: f64, b: f64, dtype: DType) -> u64 {
    if a.is_nan() && b.is_nan() {
        return 0;
    }
    if a == b && a.is_sign_negative() == b.is_sign_negative() {
        return 0;
    }
    if a.is_nan() || b.is_nan() {
        return u64::MAX;
    }
    let key = |x: f64| -> i128 {
        if dtype == DType::F32 {
            let i = (x as f32).to_bits() as i32;
            (if i < 0 { i32::MIN.wrapping_sub(i) } else { i }) as i128
        } else {
            let i = x.to_bits() as i64;
            (if i < 0 { i64::MIN.wrapping_sub(i) } else { i }) as i128
        }
    };
    (key(a) - key(b)).unsigned_abs() as u64
}

/// Asserts bit-equality (`max_ulps == 0`) or closeness in ULPs of two values.
pub fn assert_values(got: &Value, want: &Value, max_ulps: u64, what: &str) {
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    if got.dtype().is_float() {
        let g = got.to_f64_array();
        let w = want.to_f64_array();
        for (i, (x, y)) in g.iter().zip(w.iter()).enumerate() {
            let u = ulps(*x, *y, got.dtype());
            assert!(
                u <= max_ulps,
                "{what}: element {i}: got {x:e}, want {y:e} ({u} ulps > {max_ulps})"
            );
        }
    } else {
        assert!(got.same_as(want), "{what}: got {got:?}, want {want:?}");
    }
}

/// Asserts closeness within a relative tolerance (for reductions).
pub fn assert_close(got: &Value, want: &Value, rtol: f64, what: &str) {
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    assert!(
        got.allclose(want, rtol, rtol),
        "{what}: got {got:?}, want {want:?}"
    );
}

/// `outputs` of `inputs` on `vals`, compiled as built (no rewriting) and
/// run, then the reference evaluator's values: `(got, want)`.
pub fn run_as_built(
    inputs: &[Tensor],
    outputs: &[Tensor],
    vals: &[Value],
) -> (Vec<Value>, Vec<Value>) {
    let fg = FunctionGraph::new(inputs, outputs).expect("graph");
    let want = eval::evaluate(&fg, vals).expect("reference");
    let f = compile(&fg, &CompileOptions::default()).expect("compile");
    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
    (f.call(&args).expect("call"), want)
}

/// Compiles `outputs` of `inputs` and checks the JIT against the reference on `vals`.
pub fn check(inputs: &[Tensor], outputs: &[Tensor], vals: &[Value], max_ulps: u64, what: &str) {
    let (got, want) = run_as_built(inputs, outputs, vals);
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_values(g, w, max_ulps, &format!("{what} output {k}"));
    }
}

/// `outputs` of `inputs` compiled under FAST_RUN with the code generation
/// options `codegen`, the compile cache bypassed (so that two option sets
/// never share a module): how the tests compare a code generation choice
/// on and off.
pub fn compile_with(
    inputs: &[Tensor],
    outputs: &[Tensor],
    codegen: CodegenOptions,
) -> CompiledFunction {
    let opts = CompileOptions {
        codegen,
        no_cache: true,
        ..Default::default()
    };
    function(inputs, outputs)
        .options(opts)
        .compile()
        .expect("compile")
}

/// A deterministic pseudo-random f64 array in [lo, hi).
pub fn rand_f64(shape: &[usize], seed: u64, lo: f64, hi: f64) -> ArrayD<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect();
    ArrayD::from_shape_vec(IxDyn(shape), v).expect("sized")
}

/// A pseudo-random value of `dtype` (integers in [-50, 50), bools 0/1, floats in [-4, 4)
/// with a few special values).
pub fn rand_value(dtype: DType, shape: &[usize], seed: u64) -> Value {
    let mut a = rand_f64(shape, seed, -4.0, 4.0);
    match dtype {
        DType::F64 | DType::F32 => {
            let n = a.len();
            let specials = [
                0.0,
                -0.0,
                1.0,
                -1.0,
                0.5,
                2.5,
                -2.5,
                f64::NAN,
                f64::INFINITY,
                f64::NEG_INFINITY,
            ];
            for (i, x) in a.iter_mut().enumerate() {
                if i % 7 == 3 && n > 3 {
                    *x = specials[(i / 7) % specials.len()];
                }
            }
            Value::from_f64_array(dtype, a)
        }
        DType::Bool => Value::from_f64_array(dtype, a.mapv(|x| if x > 0.0 { 1.0 } else { 0.0 })),
        DType::U8 => Value::from_f64_array(dtype, a.mapv(|x| ((x + 4.0) * 30.0).floor())),
        _ => Value::from_f64_array(dtype, a.mapv(|x| (x * 12.5).floor())),
    }
}

/// A `dtype` array of `shape` whose element `e` (in row-major order) is
/// `pick(e, s)`, `s` the next value of a xorshift sequence seeded by
/// `seed` (wrapped to the dtype by `Value::from_i64_array`).
pub fn int_values(
    dtype: DType,
    shape: &[usize],
    seed: u64,
    pick: impl Fn(usize, u64) -> i64,
) -> Value {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let n: usize = shape.iter().product();
    let v: Vec<i64> = (0..n)
        .map(|e| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            pick(e, s)
        })
        .collect();
    Value::from_i64_array(dtype, ArrayD::from_shape_vec(shape.to_vec(), v).unwrap())
}
