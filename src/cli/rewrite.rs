//! `kiln rewrite` (the graph before and after rewriting, the rewrite log,
//! the rewriter profile, a JSON report) and `kiln dot` (Graphviz).
//!
//! The query: `--mode M` (default `fast_run`) narrowed by `--include`,
//! `--require` and `--exclude`; with `--include`/`--require` and no
//! `--mode`, the query holds only those tags, like PyTensor's
//! `rewrite_graph(fgraph, include=("canonicalize",))`.

use std::collections::BTreeMap;
use std::io::Write;

use super::{
    build, declare_all, parse_mode, split_list, CliError, CliResult, DotArgs, GraphFormat,
    RewriteArgs,
};
use crate::graph::print::{dprint, pprint_outputs, to_dot};
use crate::graph::FunctionGraph;
use crate::rewrites::rewrite_graph;
use crate::rewriting::{optdb::AsQuery, RewriteDatabaseQuery, RewriterProfile};

/// The result of rewriting an expression.
#[derive(Debug)]
pub struct Rewritten {
    /// The graph as built from the expression.
    pub before: FunctionGraph,
    /// The graph after rewriting.
    pub after: FunctionGraph,
    /// The rewriter profile (with the rewrite log).
    pub profile: RewriterProfile,
}

/// The optdb query of `kiln rewrite`'s options (see the module docs).
pub fn query(
    mode: Option<&str>,
    include: &[String],
    require: &[String],
    exclude: &[String],
) -> CliResult<RewriteDatabaseQuery> {
    fn refs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    let (inc, req, exc) = (refs(include), refs(require), refs(exclude));
    let base = match mode {
        Some(m) => parse_mode(m)?.as_query(),
        None if !inc.is_empty() || !req.is_empty() => RewriteDatabaseQuery::default(),
        None => crate::rewriting::Mode::fast_run().as_query(),
    };
    Ok(base.including(&inc).requiring(&req).excluding(&exc))
}

/// Builds `expr` over the declarations and rewrites a copy with `q`.
pub fn rewrite_expr(expr: &str, vars: &[String], q: &RewriteDatabaseQuery) -> CliResult<Rewritten> {
    let decls = declare_all(vars)?;
    let y = build(expr, &decls)?;
    let inputs: Vec<_> = decls.iter().map(|d| d.tensor.clone()).collect();
    let mk = || {
        FunctionGraph::new(&inputs, std::slice::from_ref(&y))
            .map_err(|e| CliError::from_kiln(e, expr))
    };
    let before = mk()?;
    let mut after = mk()?;
    let profile = rewrite_graph(&mut after, q).map_err(|e| CliError::usage(e.to_string()))?;
    Ok(Rewritten {
        before,
        after,
        profile,
    })
}

/// How many nodes of each op the graph holds, by the printers' op names.
pub fn op_counts(fg: &FunctionGraph) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for n in fg.node_ids() {
        *m.entry(fg.node(n).op.name()).or_insert(0) += 1;
    }
    m
}

fn render(fg: &FunctionGraph, f: GraphFormat) -> String {
    match f {
        GraphFormat::Pprint => pprint_outputs(fg) + "\n",
        GraphFormat::Dprint => dprint(fg),
        GraphFormat::Dot => to_dot(fg),
    }
}

/// Runs `kiln rewrite`.
pub fn run(a: &RewriteArgs, out: &mut dyn Write) -> CliResult {
    let q = query(
        a.mode.as_deref(),
        &split_list(&a.include),
        &split_list(&a.require),
        &split_list(&a.exclude),
    )?;
    let r = rewrite_expr(&a.expr, &a.vars, &q)?;
    if a.json {
        let ops: serde_json::Map<String, serde_json::Value> = op_counts(&r.after)
            .into_iter()
            .map(|(k, v)| (k, v.into()))
            .collect();
        let j = serde_json::json!({
            "before": pprint_outputs(&r.before),
            "after": pprint_outputs(&r.after),
            "nodes_before": r.before.n_nodes(),
            "nodes_after": r.after.n_nodes(),
            "ops_after": ops,
        });
        writeln!(out, "{j}")?;
        return Ok(());
    }
    writeln!(out, "before ({} nodes):", r.before.n_nodes())?;
    write!(out, "{}", render(&r.before, a.format))?;
    writeln!(out, "after ({} nodes):", r.after.n_nodes())?;
    write!(out, "{}", render(&r.after, a.format))?;
    if a.log {
        let log = r.profile.log();
        writeln!(out, "rewrites applied ({}):", log.len())?;
        for e in &log {
            writeln!(out, "  {e}")?;
        }
    }
    if a.profile {
        write!(out, "{}", r.profile)?;
    }
    Ok(())
}

/// Runs `kiln dot`.
pub fn dot(a: &DotArgs, out: &mut dyn Write) -> CliResult {
    let q = if a.before {
        RewriteDatabaseQuery::default()
    } else {
        parse_mode(&a.mode)?.as_query()
    };
    let r = rewrite_expr(&a.expr, &a.vars, &q)?;
    let text = to_dot(if a.before { &r.before } else { &r.after });
    match &a.output {
        Some(p) => std::fs::write(p, text)
            .map_err(|e| CliError::usage(format!("cannot write '{}': {e}", p.display())))?,
        None => out.write_all(text.as_bytes())?,
    }
    Ok(())
}
