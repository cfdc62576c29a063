//! Tiered code generation (`linker::Tiering`): the single-pass allocator's
//! code, the backtracking allocator's and the tiered module (after its
//! second tier is installed) compute the same bits, on element-wise,
//! broadcast, reduction, scan, integer-division and GEMM kernels, and a
//! tiered Function is callable before, while and after its second tier.
mod jit_support;
use std::collections::HashMap;

use jit_support::*;
use kiln::linker::{CodegenOptions, CompileOptions, Tiering};
use kiln::{build_expression, matrix, vector, DType, Tensor, Value};

/// The cases: an expression over `x`, `y` (f64 vectors of 1003 elements,
/// odd so that the scalar tail runs too), `m` (a 37 x 61 f64 matrix) and
/// `i` (an i64 vector).
const EXPRS: [&str; 8] = [
    "exp(x) * 2 + 1",
    "tanh(x) + log1p(abs(y)) - softplus(-x) * sigmoid(y)",
    "sum(exp(x - max(x)))",
    "cumsum(x) + sum(x * y)",
    "where(x > y, x - y, y - x) * x",
    "sum(tanh(m), axis=0)",
    "i // 3 + i % 4",
    "tanh(dot(m, transpose(m)) + 1)",
];

fn compile_case(expr: &str, tiering: Tiering) -> (kiln::CompiledFunction, Vec<Value>) {
    let x = vector("x", DType::F64);
    let y = vector("y", DType::F64);
    let m = matrix("m", DType::F64);
    let i = vector("i", DType::I64);
    let vars: HashMap<String, Tensor> = [("x", &x), ("y", &y), ("m", &m), ("i", &i)]
        .into_iter()
        .map(|(k, t)| (k.to_string(), t.clone()))
        .collect();
    let out = build_expression(expr, &vars).unwrap();
    let codegen = CodegenOptions {
        tiering,
        ..Default::default()
    };
    let f = compile_with(&[x, y, m, i], &[out], codegen);
    let vals = vec![
        rand_value(DType::F64, &[1003], 1),
        rand_value(DType::F64, &[1003], 2),
        rand_value(DType::F64, &[37, 61], 3),
        rand_value(DType::I64, &[1003], 4),
    ];
    (f, vals)
}

/// The single output of a call.
fn out(f: &kiln::CompiledFunction, vals: &[Value]) -> Value {
    f.call_values(vals).unwrap().remove(0)
}

#[test]
fn every_tiering_computes_the_same_bits() {
    for expr in EXPRS {
        let (first, vals) = compile_case(expr, Tiering::First);
        let want = out(&first, &vals);
        assert!(
            first.wait_final(),
            "{expr}: a first-tier-only module is final"
        );
        let (fin, _) = compile_case(expr, Tiering::Final);
        assert!(fin.wait_final(), "{expr}: a final-only module is final");
        assert!(
            out(&fin, &vals).same_as(&want),
            "{expr}: backtracking against single-pass"
        );
        let (tiered, _) = compile_case(expr, Tiering::Tiered);
        // Callable at once (whichever tier runs), then on the second tier.
        let early = out(&tiered, &vals);
        assert!(early.same_as(&want), "{expr}: tiered, before waiting");
        assert!(tiered.wait_final(), "{expr}: the second tier is installed");
        let late = out(&tiered, &vals);
        assert!(late.same_as(&want), "{expr}: tiered, second tier");
    }
}

/// Calls from several threads while the second tier is installed: every
/// result has the same bits.
#[test]
fn calls_racing_the_second_tier_agree() {
    let expr = EXPRS[1];
    let (first, vals) = compile_case(expr, Tiering::First);
    let want = out(&first, &vals);
    let opts = CompileOptions {
        no_cache: true,
        ..Default::default()
    };
    for _ in 0..5 {
        // The linker's Function (shareable between threads) of the same graph.
        let f = kiln::linker::compile(first.graph(), &opts).unwrap();
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..20 {
                        let got = f.call_values(&vals).unwrap().remove(0);
                        assert!(got.same_as(&want));
                    }
                });
            }
        });
        assert!(f.wait_final());
    }
}

/// Dropping tiered Functions before their second tier runs abandons it,
/// and the Functions compiled after them still tier up.
#[test]
fn dropped_functions_abandon_their_second_tier() {
    for _ in 0..20 {
        drop(compile_case(EXPRS[7], Tiering::Tiered));
    }
    let (f, vals) = compile_case(EXPRS[0], Tiering::Tiered);
    assert!(f.wait_final());
    let (fin, _) = compile_case(EXPRS[0], Tiering::Final);
    assert!(out(&f, &vals).same_as(&out(&fin, &vals)));
}
