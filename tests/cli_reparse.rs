//! Issue 19, done-means 3: what `kiln rewrite` prints re-parses. For every
//! example of the "Gaps found" list (written as kiln expressions)
//! and each mode (`none`, `fast_compile`, `fast_run`), the rewritten graph is
//! printed as `kiln rewrite` prints it (`cli::rewrite::rewrite_expr`, then
//! `pprint_outputs`), and the text is fed back to `kiln eval`'s path
//! (`cli::build` over the same declarations): it must parse, and give the
//! values of the rewritten graph (the reference evaluator on both, and the
//! compiled function of the re-parsed text) on inputs with edge values,
//! and those of the original expression on tame inputs; the compiled
//! function runs the re-parsed graph as written (mode `none`).

use kiln::cli::rewrite::{query, rewrite_expr};
use kiln::cli::{build, declare_all};
use kiln::eval::evaluate;
use kiln::graph::print::pprint_outputs;
use kiln::rewriting::Mode;
use kiln::*;
use ndarray::{ArrayD, IxDyn};

const DECLS: &[&str] = &[
    "x=f64[:]",
    "y=f64[:]",
    "i=i64[:]",
    "A=f64[:, :]",
    "B=f64[:, :]",
    "X=f64[:, :]",
    "n=i64[]",
];

/// The examples, one or more per family.
const EXAMPLES: &[&str] = &[
    // sign / abs / neg
    "x / abs(x)",
    "(2 * x * y) / abs(x)",
    "abs(3 * x)",
    "-(-x * 2)",
    // zeros and ones
    "x * 0 + y / 1",
    "1 ** x",
    "exp(x) * exp(-x)",
    "exp(x) / exp(x)",
    // inverse pairs
    "exp(log(x))",
    "expm1(log1p(x))",
    "log(sqrt(x))",
    "sqr(sqrt(x))",
    "log(sigmoid(x) / (1 - sigmoid(x)))",
    "exp(log1mexp(-abs(x) - 1))",
    "log(1 + i)",
    // switch
    "where(x > 0, 0, y) * x",
    "where(x > 0, y, 0) / x",
    // erf / erfc
    "1 + erf(x)",
    "1 - erf(x)",
    "erfc(-x)",
    "log(erfc(x))",
    // powers and exponentials combined
    "x ** 2 * x ** 3",
    "exp(x) / exp(y)",
    "1 / exp(x)",
    "exp(x) * exp(y) * x ** 2 / x",
    // sigmoid family
    "3 / (1 + exp(-x))",
    "sigmoid(x) * exp(-x)",
    "1 - sigmoid(x)",
    "log(exp(x) - exp(y))",
    "log(sigmoid(x)) + log(1 - sigmoid(y))",
    "log(1 + exp(x))",
    "log1p(-exp(-abs(x)))",
    // log and sign of quotients
    "log(2 / x)",
    "sign(2 / x)",
    // comparisons of a value with itself
    "(x < x) + (x == x) + (x != x) + (x <= x)",
    // reductions and structure
    "dot(A, B).T",
    "-min(-X, axis=0)",
    "prod(x / y)",
    "sum(x[:, None] * y[None, :])",
    "log(sum(exp(X.T), axis=0, keepdims=True))",
    "log(sum(exp(X), axis=1))",
    "exp(X) / sum(exp(X), axis=1, keepdims=True)",
    "log(exp(X) / sum(exp(X), axis=1, keepdims=True))",
    "alloc(sum(x), 2, n) + 1",
    "max(X, axis=1) + argmax(X, axis=1)",
    "set_subtensor(exp(x)[1:3], y[:2])",
];

const MODES: &[&str] = &["none", "fast_compile", "fast_run"];

/// Edge values for the vectors (length 12) and tame ones; matrices 3 x 4.
fn inputs(edge: bool) -> Vec<Value> {
    let v: Vec<f64> = if edge {
        vec![
            0.0,
            -0.0,
            1e-300,
            -1e-300,
            2.5,
            -2.5,
            800.0,
            -800.0,
            1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ]
    } else {
        vec![
            0.3, -1.7, 2.2, 0.9, -0.4, 1.1, -2.8, 0.05, 3.3, -0.6, 1.9, -1.2,
        ]
    };
    let w: Vec<f64> = v.iter().rev().map(|a| a * 0.7 - 0.1).collect();
    let vec1 = |d: &[f64]| Value::F64(ArrayD::from_shape_vec(IxDyn(&[12]), d.to_vec()).unwrap());
    let mat = |d: &[f64]| Value::F64(ArrayD::from_shape_vec(IxDyn(&[3, 4]), d.to_vec()).unwrap());
    let ints: Vec<i64> = (0..12).map(|k| k * 3 - 7).collect();
    vec![
        vec1(&v),
        vec1(&w),
        Value::I64(ArrayD::from_shape_vec(IxDyn(&[12]), ints).unwrap()),
        mat(&v),
        Value::F64(ArrayD::from_shape_vec(IxDyn(&[4, 3]), w.clone()).unwrap()),
        mat(&w),
        Value::scalar_i64(DType::I64, 3),
    ]
}

/// Element-wise agreement: NaN with NaN, infinities exactly, else within
/// `rtol` relative to the larger magnitude (and 1).
fn close(a: &Value, b: &Value, rtol: f64) -> Result<(), String> {
    if a.shape() != b.shape() {
        return Err(format!("shapes {:?} and {:?}", a.shape(), b.shape()));
    }
    let (fa, fb) = (a.to_f64_array(), b.to_f64_array());
    for (k, (&p, &q)) in fa.iter().zip(fb.iter()).enumerate() {
        let ok = (p.is_nan() && q.is_nan())
            || p == q
            || (p.is_finite()
                && q.is_finite()
                && (p - q).abs() <= rtol * p.abs().max(q.abs()).max(1.0));
        if !ok {
            return Err(format!("element {k}: {p} vs {q}"));
        }
    }
    Ok(())
}

#[test]
fn rewritten_graphs_print_as_expressions_that_reparse() {
    let decl_texts: Vec<String> = DECLS.iter().map(|s| s.to_string()).collect();
    let decls = declare_all(&decl_texts).unwrap();
    let tensors: Vec<Tensor> = decls.iter().map(|d| d.tensor.clone()).collect();
    let mut failures = Vec::new();
    for &src in EXAMPLES {
        for &mode in MODES {
            let q = query(Some(mode), &[], &[], &[]).unwrap();
            let r = rewrite_expr(src, &decl_texts, &q).unwrap();
            let text = pprint_outputs(&r.after);
            let reparsed = match build(&text, &decls) {
                Ok(t) => t,
                Err(e) => {
                    failures.push(format!("{src} [{mode}]: `{text}` does not parse: {e}"));
                    continue;
                }
            };
            let fg = FunctionGraph::new(&tensors, std::slice::from_ref(&reparsed)).unwrap();
            // Compiled as written (mode none): the JIT runs the printed graph.
            let compiled = function(&tensors, &[reparsed])
                .mode(Mode::none())
                .compile()
                .unwrap();
            for edge in [true, false] {
                let ins = inputs(edge);
                let rewritten = evaluate(&r.after, &ins).unwrap();
                let again = evaluate(&fg, &ins).unwrap();
                let ran = compiled.call_values(&ins).unwrap();
                if let Err(m) = close(&rewritten[0], &again[0], 1e-12) {
                    failures.push(format!("{src} [{mode}]: `{text}` re-parsed differs: {m}"));
                }
                if let Err(m) = close(&again[0], &ran[0], 1e-9) {
                    failures.push(format!("{src} [{mode}]: `{text}` compiled differs: {m}"));
                }
                if !edge {
                    let original = evaluate(&r.before, &ins).unwrap();
                    if let Err(m) = close(&original[0], &again[0], 1e-9) {
                        failures.push(format!(
                            "{src} [{mode}]: `{text}` differs from the original: {m}"
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
