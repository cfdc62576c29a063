//! Prints each benchmark workload before and after FAST_RUN rewriting.
use kiln::rewriting::{rewrite_graph, Mode};
use kiln::*;
use std::collections::HashMap;

/// (name, expression, inputs with their (unknown) dimensions).
type Workload<'a> = (&'a str, &'a str, Vec<(&'a str, Vec<Option<usize>>)>);

fn main() -> Result<()> {
    let f = DType::F64;
    let wl: Vec<Workload<'_>> = vec![
        ("softplus", "log(1 + exp(x))", vec![("x", vec![None])]),
        ("poly", "2*x**3 - 3*x**2 + x - 1", vec![("x", vec![None])]),
        (
            "gauss",
            "exp(-((x - 0.5)**2) / (2 * 1.5**2)) / (1.5 * 2.5066282746310002)",
            vec![("x", vec![None])],
        ),
        (
            "sigmoid_xent",
            "mean(-(t*log(sigmoid(z)) + (1-t)*log(1 - sigmoid(z))))",
            vec![("t", vec![None]), ("z", vec![None])],
        ),
        (
            "logsumexp",
            "log(sum(exp(X), axis=1))",
            vec![("X", vec![None, None])],
        ),
        (
            "outer_tanh",
            "tanh(u[:, None] + v[None, :])",
            vec![("u", vec![None]), ("v", vec![None])],
        ),
        (
            "mlp",
            "tanh(A @ W + b)",
            vec![
                ("A", vec![None, None]),
                ("W", vec![None, None]),
                ("b", vec![None]),
            ],
        ),
        (
            "canon",
            "(a*b)/(b*c)*(c/a)*x",
            vec![
                ("a", vec![None]),
                ("b", vec![None]),
                ("c", vec![None]),
                ("x", vec![None]),
            ],
        ),
    ];
    for (name, src, vars) in wl {
        let mut map = HashMap::new();
        let mut ins = Vec::new();
        for (v, shape) in vars {
            let t = tensor(v, f, &shape);
            map.insert(v.to_string(), t.clone());
            ins.push(t);
        }
        let out = build_expression(src, &map)?;
        let mut fg = FunctionGraph::new(&ins, &[out])?;
        let before = fg.n_nodes();
        let t0 = std::time::Instant::now();
        let _p = rewrite_graph(&mut fg, &Mode::fast_run())?;
        println!(
            "{name}: {before} -> {} nodes in {:.2} ms\n  {fg}",
            fg.n_nodes(),
            t0.elapsed().as_secs_f64() * 1e3
        );
    }
    Ok(())
}
