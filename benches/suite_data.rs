//! The workload suite of `shared/workloads.md` as expression text with
//! deterministic input data for `benches/workloads.rs` (included with
//! `#[path]`).

use kiln::{build_expression, tensor, DType, Tensor, Value};
use ndarray::{ArrayD, IxDyn};
use std::collections::HashMap;

/// Deterministic standard normals (Box-Muller on a small LCG).
pub fn normal(n: &[usize], seed: u64) -> ArrayD<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let len: usize = n.iter().product();
    let v: Vec<f64> = (0..len)
        .map(|_| (-2.0 * next().ln()).sqrt() * (std::f64::consts::TAU * next()).cos())
        .collect();
    ArrayD::from_shape_vec(IxDyn(n), v).unwrap()
}

/// Deterministic values in [lo, hi).
pub fn uniform(n: &[usize], seed: u64, lo: f64, hi: f64) -> ArrayD<f64> {
    normal(n, seed).mapv(|x| lo + (hi - lo) * (0.5 + 0.5 * (x / 4.0).tanh()))
}

/// One workload: name, inputs, output and input data.
pub struct Workload {
    /// Name in workloads.md.
    pub name: &'static str,
    /// Input tensors.
    pub inputs: Vec<Tensor>,
    /// Output tensor.
    pub output: Tensor,
    /// Input values.
    pub values: Vec<Value>,
}

/// The suite; `n` replaces 10^7 for the long vectors (1000x2000, 2000 and
/// 512 sizes are fixed).
pub fn suite(n: usize) -> Vec<Workload> {
    type In = (&'static str, Vec<usize>, u64, char);
    let table: Vec<(&'static str, &'static str, Vec<In>)> = vec![
        ("softplus", "log(1 + exp(x))", vec![("x", vec![n], 1, 'n')]),
        (
            "poly",
            "2*x**3 - 3*x**2 + x - 1",
            vec![("x", vec![n], 1, 'n')],
        ),
        (
            "gauss",
            "exp(-((x - 0.5)**2) / (2 * 1.5**2)) / (1.5 * 2.5066282746310002)",
            vec![("x", vec![n], 1, 'n')],
        ),
        (
            "sigmoid_xent",
            "mean(-(t*log(sigmoid(z)) + (1-t)*log(1 - sigmoid(z))))",
            vec![("t", vec![n], 2, 't'), ("z", vec![n], 3, 'n')],
        ),
        (
            "logsumexp",
            "log(sum(exp(X), axis=1))",
            vec![("X", vec![1000, 2000], 4, 'n')],
        ),
        (
            "outer_tanh",
            "tanh(u[:, None] + v[None, :])",
            vec![("u", vec![2000], 5, 'n'), ("v", vec![2000], 6, 'n')],
        ),
        (
            "mlp",
            "tanh(A @ W + b)",
            vec![
                ("A", vec![512, 512], 7, 'n'),
                ("W", vec![512, 512], 8, 'n'),
                ("b", vec![512], 9, 'n'),
            ],
        ),
        (
            "canon",
            "(a*b)/(b*c)*(c/a)*x",
            vec![
                ("a", vec![n], 10, 'u'),
                ("b", vec![n], 11, 'u'),
                ("c", vec![n], 12, 'u'),
                ("x", vec![n], 1, 'n'),
            ],
        ),
    ];
    table
        .into_iter()
        .map(|(name, expr, ins)| {
            let mut map = HashMap::new();
            let mut inputs = Vec::new();
            let mut values = Vec::new();
            for (v, shape, seed, kind) in ins {
                let dims: Vec<Option<usize>> = shape.iter().map(|_| None).collect();
                let t = tensor(v, DType::F64, &dims);
                map.insert(v.to_string(), t.clone());
                inputs.push(t);
                let data = match kind {
                    'n' => normal(&shape, seed),
                    'u' => uniform(&shape, seed, 0.5, 1.5),
                    _ => uniform(&shape, seed, 0.0, 1.0).mapv(|v| v.round()),
                };
                values.push(Value::F64(data));
            }
            let output = build_expression(expr, &map).expect("suite expression");
            Workload {
                name,
                inputs,
                output,
                values,
            }
        })
        .collect()
}
