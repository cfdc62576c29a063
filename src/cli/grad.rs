//! `kiln grad EXPR --wrt x --var ...`: the gradient graph of a scalar
//! expression before and after rewriting (text, or `--json` as `kiln
//! rewrite`), and [`gradients`], the gradient outputs shared by
//! `kiln eval --grad` and `kiln bench --grad`.

use std::io::Write;

use super::{build, declare_all, split_list, CliError, CliResult, Declared, GradArgs};
use crate::gradient::grad;
use crate::graph::print::pprint_outputs;
use crate::graph::FunctionGraph;
use crate::rewrites::rewrite_graph;
use crate::tensor::Tensor;

/// The gradients of the 0-d `cost` (built from `src`) with respect to the
/// declared inputs named in `wrt`, in that order.
pub fn gradients(
    cost: &Tensor,
    decls: &[Declared],
    wrt: &[String],
    src: &str,
) -> CliResult<Vec<Tensor>> {
    if wrt.is_empty() {
        return Err(CliError::usage("--wrt (or --grad) names no variable"));
    }
    let ws: Vec<Tensor> = wrt
        .iter()
        .map(|name| {
            decls
                .iter()
                .find(|d| &d.name == name)
                .map(|d| d.tensor.clone())
                .ok_or_else(|| {
                    let names: Vec<&str> = decls.iter().map(|d| d.name.as_str()).collect();
                    CliError::usage(format!(
                        "cannot differentiate with respect to '{name}': it is not an input (the inputs are {})",
                        names.join(", ")
                    ))
                })
        })
        .collect::<CliResult<_>>()?;
    grad(cost, &ws).map_err(|e| CliError::from_kiln(e, src))
}

/// Runs `kiln grad`.
pub fn run(a: &GradArgs, out: &mut dyn Write) -> CliResult {
    let decls = declare_all(&a.vars)?;
    let cost = build(&a.expr, &decls)?;
    let gs = gradients(&cost, &decls, &split_list(&a.wrt), &a.expr)?;
    let inputs: Vec<Tensor> = decls.iter().map(|d| d.tensor.clone()).collect();
    let mk = || FunctionGraph::new(&inputs, &gs).map_err(|e| CliError::from_kiln(e, &a.expr));
    let before = mk()?;
    let mut after = mk()?;
    let mode = super::parse_mode(&a.mode)?;
    rewrite_graph(&mut after, &mode).map_err(|e| CliError::usage(e.to_string()))?;
    if a.json {
        let ops: serde_json::Map<String, serde_json::Value> = super::rewrite::op_counts(&after)
            .into_iter()
            .map(|(k, v)| (k, v.into()))
            .collect();
        let j = serde_json::json!({
            "before": pprint_outputs(&before),
            "after": pprint_outputs(&after),
            "nodes_before": before.n_nodes(),
            "nodes_after": after.n_nodes(),
            "ops_after": ops,
        });
        writeln!(out, "{j}")?;
        return Ok(());
    }
    writeln!(
        out,
        "gradient before rewriting ({} nodes):",
        before.n_nodes()
    )?;
    writeln!(out, "{}", pprint_outputs(&before))?;
    writeln!(out, "after {} ({} nodes):", a.mode, after.n_nodes())?;
    writeln!(out, "{}", pprint_outputs(&after))?;
    Ok(())
}
