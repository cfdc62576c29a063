//! The fast paths of the performance work against the reference evaluator:
//! one block-wise op called over the whole range, a block-wise result
//! written straight into the output, parallel full reductions, the buffer
//! pool across calls, parallel GEMM, and contiguous result copies.
mod jit_support;
use jit_support::*;
use kiln::linker::{compile, Arg, CompileOptions};
use kiln::rewriting::Mode;
use kiln::{dot, function, matrix, vector, DType, FunctionGraph, Value};

#[test]
fn lone_block_op_and_direct_output() {
    let x = vector("x", DType::F64);
    let n = 300_001; // parallel, with a ragged tail
    let vx = Value::from(rand_f64(&[n], 11, -30.0, 30.0));
    check(
        std::slice::from_ref(&x),
        &[x.softplus()],
        std::slice::from_ref(&vx),
        3,
        "softplus",
    );
    check(
        std::slice::from_ref(&x),
        &[(&x * 0.5 - 1.0).exp()],
        &[vx],
        2,
        "exp(x*0.5-1)",
    );
    // Broadcast input on the blocked path, output written by the runtime call.
    let m = matrix("m", DType::F64);
    let r = vector("r", DType::F64);
    let e = (&m - &r.expand_dims(1).unwrap()).exp();
    let vm = Value::from(rand_f64(&[300, 1001], 12, -5.0, 5.0));
    let vr = Value::from(rand_f64(&[300], 13, -1.0, 1.0));
    check(&[m, r], &[e], &[vm, vr], 2, "exp(m - r[:, None])");
}

#[test]
fn parallel_full_reductions_and_pool_reuse() {
    let x = vector("x", DType::F64);
    let n = 1_000_003;
    let vx = rand_f64(&[n], 14, -1.0, 1.0);
    let want_sum: f64 = vx.iter().map(|v| v.abs()).sum();
    let want_max = vx.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let fg = FunctionGraph::new(
        std::slice::from_ref(&x),
        &[x.abs().sum(&[0]).unwrap(), x.max(&[0]).unwrap()],
    )
    .unwrap();
    let f = compile(&fg, &CompileOptions::default()).unwrap();
    let val = Value::from(vx);
    for _ in 0..3 {
        // Several calls: the |x| intermediate comes from the pool after the first.
        let got = f.call(&[Arg::from(&val)]).unwrap();
        let (Value::F64(s), Value::F64(mx)) = (&got[0], &got[1]) else {
            panic!("f64 results")
        };
        let s = s.iter().next().copied().unwrap();
        assert!((s - want_sum).abs() <= 1e-9 * want_sum, "{s} vs {want_sum}");
        assert_eq!(mx.iter().next().copied().unwrap(), want_max);
    }
}

#[test]
fn parallel_gemm_and_output_copy() {
    let a = matrix("a", DType::F64);
    let b = matrix("b", DType::F64);
    let va = Value::from(rand_f64(&[203, 190], 15, -1.0, 1.0));
    let vb = Value::from(rand_f64(&[190, 170], 16, -1.0, 1.0));
    check(
        &[a.clone(), b.clone()],
        &[dot(&a, &b).unwrap()],
        &[va, vb],
        64,
        "dot",
    );
    // An output that is an input is returned as a copy.
    let x = vector("x", DType::F64);
    let f = function(std::slice::from_ref(&x), std::slice::from_ref(&x))
        .mode(Mode::fast_run())
        .compile()
        .unwrap();
    let vx = Value::from(rand_f64(&[400_000], 17, -1.0, 1.0));
    let got = f.call_values(std::slice::from_ref(&vx)).unwrap();
    assert_eq!(got[0], vx);
}
