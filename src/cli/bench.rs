//! `kiln bench`: per workload and mode, compile time (rewriting and code
//! generation separately), run time (median of N calls after one warm-up
//! call), the steady-state run time with reused output arrays (median of N
//! `call_into` calls writing into the warm-up call's results, interleaved
//! with the N plain calls so both see the same machine load), node counts
//! before and after rewriting, and the peak bytes of the
//! intermediate buffers of one call ([`RunProfile::peak_bytes`](crate::linker::RunProfile)):
//! every buffer the linker allocates, including the ones returned as
//! results (an inplace result lives in an intermediate's buffer, so leaving
//! results out would hide what inplace saves), not the inputs or constants.
//! Deterministic: the same graph and input sizes give the same number.
//!
//! Workloads: an expression with `--var NAME=DTYPE[SIZES]` (deterministic
//! data: standard normal floats, integers in 1..=9, random booleans), the
//! suite of [`crate::workloads::suite`] followed by the gradient workloads
//! of [`crate::workloads::gradient_suite`] (`--suite`), or the chain graph of
//! [`crate::workloads::chain_graph`] (`--chain K`, inputs of `--chain-size`
//! elements), or one expression on inputs of three layouts (`--layouts`). Graphs are compiled with unknown input sizes (dimensions of
//! size 1 stay static so they broadcast), bypassing the compile cache, so
//! every mode pays its full compile time.

use std::io::Write;
use std::time::{Duration, Instant};

use super::{build, declare_all, parse_mode, split_list, BenchArgs, CliError, CliResult};
use crate::graph::{DType, FunctionGraph, Value};
use crate::linker::{self, Arg, CodegenOptions, CompileOptions};
use crate::rewrites::rewrite_graph;
use crate::rewriting::Mode;
use crate::tensor::tensor;
use crate::workloads::{self, Rng};

/// A graph to measure with its input values.
#[derive(Debug, Clone)]
pub struct Case {
    /// Its name in the report.
    pub name: String,
    /// The graph, before rewriting.
    pub graph: FunctionGraph,
    /// Input values, in the graph's input order.
    pub values: Vec<Value>,
}

/// One measurement (one line of `--json`).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Workload name.
    pub workload: String,
    /// Mode name as given.
    pub mode: String,
    /// Rewriting plus code generation, ms: the median of
    /// [`COMPILE_SAMPLES`] compiles.
    pub compile_ms: f64,
    /// The first of those compiles, ms (with the process's one-time costs
    /// when it is the first compile of the process).
    pub compile_first_ms: f64,
    /// Rewriting, ms, in the median compile.
    pub rewrite_ms: f64,
    /// Lowering and code generation, ms, in the median compile (the first
    /// tier's: the Function is callable then).
    pub codegen_ms: f64,
    /// From the start of the median compile until its kernels ran their
    /// final (second-tier) code, ms; `compile_ms` when not tiered.
    pub final_ms: f64,
    /// Median run time, ms.
    pub run_ms: f64,
    /// Median run time of `call_into` with the warm-up call's results as
    /// output arrays, ms.
    pub run_into_ms: f64,
    /// Number of timed runs.
    pub runs: usize,
    /// Apply nodes before rewriting.
    pub nodes_before: usize,
    /// Apply nodes after rewriting.
    pub nodes_after: usize,
    /// Peak bytes of intermediate buffers (results included) during one call.
    pub peak_bytes: usize,
}

impl Row {
    /// The row as a JSON object with the documented keys (times in ms to
    /// the µs, and the run times also in µs to the ns: `run_us`,
    /// `run_into_us`, for calls of a few µs; `isa`: the runtime math
    /// variant in use, after the `KILN_ISA` cap).
    pub fn to_json(&self) -> serde_json::Value {
        let r3 = |x: f64| (x * 1000.0).round() / 1000.0;
        serde_json::json!({
            "workload": self.workload,
            "mode": self.mode,
            "compile_ms": r3(self.compile_ms),
            "compile_first_ms": r3(self.compile_first_ms),
            "rewrite_ms": r3(self.rewrite_ms),
            "codegen_ms": r3(self.codegen_ms),
            "final_ms": r3(self.final_ms),
            "run_ms": r3(self.run_ms),
            "run_into_ms": r3(self.run_into_ms),
            "run_us": r3(self.run_ms * 1000.0),
            "run_into_us": r3(self.run_into_ms * 1000.0),
            "runs": self.runs,
            "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after,
            "peak_bytes": self.peak_bytes,
            "isa": kiln_runtime::math::isa().name(),
        })
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The median of the samples (mean of the middle two for an even count).
pub fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// How many times [`measure`] compiles a case (odd): its compile times are
/// those of the median compile (the first compile of a process also pays
/// one-time costs: the rewrite database, the host ISA, cold caches).
pub const COMPILE_SAMPLES: usize = 5;

/// Compiles `case` under `mode` [`COMPILE_SAMPLES`] times (as
/// `kiln::function` does, without the compile cache) and times `runs` calls
/// of the last compile after one profiled warm-up call, each followed by a
/// timed `call_into` on the warm-up call's results. `codegen` holds the
/// linker's options (e.g. GEMM epilogues off).
pub fn measure(
    case: &Case,
    mode_name: &str,
    mode: &Mode,
    runs: usize,
    codegen: CodegenOptions,
) -> CliResult<Row> {
    let fail = |e: crate::Error| CliError::usage(format!("{} under {mode_name}: {e}", case.name));
    let nodes_before = case.graph.n_nodes();
    let opts = CompileOptions {
        no_cache: true,
        codegen,
        ..Default::default()
    };
    let (mut rewrites, mut codegens, mut compiles) = (Vec::new(), Vec::new(), Vec::new());
    let mut finals = Vec::new();
    let mut compiled = None;
    for _ in 0..COMPILE_SAMPLES {
        let t0 = Instant::now();
        let mut fg = case.graph.clone();
        let t_rw = Instant::now();
        rewrite_graph(&mut fg, mode).map_err(fail)?;
        rewrites.push(ms(t_rw.elapsed()));
        let t_cg = Instant::now();
        let f = linker::compile(&fg, &opts).map_err(fail)?;
        codegens.push(ms(t_cg.elapsed()));
        compiles.push(ms(t0.elapsed()));
        // The second tier finishes before the next compile starts (or the
        // calls are timed), so that neither competes with it.
        f.wait_final();
        finals.push(ms(t0.elapsed()));
        compiled = Some((fg, f));
    }
    let (fg, f) = compiled.expect("COMPILE_SAMPLES > 0");
    let compile_first_ms = compiles[0];
    // The median compile (an odd count) and its own parts, so that the
    // parts add up to at most the whole.
    let mut order: Vec<usize> = (0..COMPILE_SAMPLES).collect();
    order.sort_by(|&a, &b| compiles[a].total_cmp(&compiles[b]));
    let mid = order[COMPILE_SAMPLES / 2];
    let args: Vec<Arg<'_>> = case.values.iter().map(Arg::from).collect();
    let (mut reused, warm) = f.call_profiled(&args).map_err(fail)?;
    let mut times = Vec::with_capacity(runs);
    let mut into_times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        let out = f.call(&args).map_err(fail)?;
        times.push(ms(t.elapsed()));
        drop(out);
        let t = Instant::now();
        f.call_into(&args, &mut reused).map_err(fail)?;
        into_times.push(ms(t.elapsed()));
    }
    Ok(Row {
        workload: case.name.clone(),
        mode: mode_name.to_string(),
        compile_ms: compiles[mid],
        compile_first_ms,
        rewrite_ms: rewrites[mid],
        codegen_ms: codegens[mid],
        final_ms: finals[mid],
        run_ms: median(times),
        run_into_ms: median(into_times),
        runs,
        nodes_before,
        nodes_after: fg.n_nodes(),
        peak_bytes: warm.peak_bytes,
    })
}

/// Deterministic data of a dtype and shape: normal floats, integers in 1..=9, random booleans.
pub fn generate(dtype: DType, shape: &[usize], rng: &mut Rng) -> Value {
    workloads::advised_value(dtype, shape, || match dtype {
        DType::Bool => (rng.next_u64() >> 63) as f64,
        d if d.is_float() => rng.normal(),
        _ => (1 + rng.next_u64() % 9) as f64,
    })
}

/// The case of an expression with concrete `NAME=DTYPE[SIZES]` declarations.
pub fn expr_case(expr: &str, vars: &[String]) -> CliResult<Case> {
    expr_grad_case(expr, vars, &[])
}

/// The case of an expression's gradients with respect to the inputs named in
/// `wrt` (the expression itself when `wrt` is empty), with concrete
/// `NAME=DTYPE[SIZES]` declarations.
pub fn expr_grad_case(expr: &str, vars: &[String], wrt: &[String]) -> CliResult<Case> {
    let decls = declare_all(vars)?;
    let mut rng = Rng::new(42);
    let mut values = Vec::new();
    let mut generic = Vec::new();
    for d in &decls {
        let sizes: Vec<usize> = d
            .dims
            .iter()
            .map(|s| {
                s.ok_or_else(|| {
                    CliError::usage(format!(
                        "bench needs concrete sizes: '{}' has a ':' dimension (write e.g. {}={}[1000])",
                        d.name, d.name, d.dtype
                    ))
                })
            })
            .collect::<CliResult<_>>()?;
        values.push(generate(d.dtype, &sizes, &mut rng));
        let dims: Vec<Option<usize>> = sizes.iter().map(|&s| (s == 1).then_some(1)).collect();
        generic.push(super::Declared {
            tensor: tensor(&d.name, d.dtype, &dims),
            dims,
            ..d.clone()
        });
    }
    let y = build(expr, &generic)?;
    let outs = if wrt.is_empty() {
        vec![y]
    } else {
        super::grad::gradients(&y, &generic, wrt, expr)?
    };
    let ins: Vec<_> = generic.iter().map(|d| d.tensor.clone()).collect();
    let graph = FunctionGraph::new(&ins, &outs).map_err(|e| CliError::from_kiln(e, expr))?;
    Ok(Case {
        name: if wrt.is_empty() {
            "expr".into()
        } else {
            format!("grad_{}", wrt.join("_"))
        },
        graph,
        values,
    })
}

/// The suite's cases (every dimension divided by `scale_down`): the run-time
/// workloads, then the gradient workloads; optionally only the named ones.
pub fn suite_cases(scale_down: usize, only: &[String]) -> CliResult<Vec<Case>> {
    let suite = workloads::suite();
    let grads = workloads::gradient_suite();
    let names: Vec<&str> = suite
        .iter()
        .map(|w| w.name)
        .chain(grads.iter().map(|g| g.cost.name))
        .collect();
    for name in only {
        if !names.contains(&name.as_str()) {
            return Err(CliError::usage(format!(
                "unknown workload '{name}' (the suite has {})",
                names.join(", ")
            )));
        }
    }
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    let plain = suite.iter().filter(|w| wanted(w.name)).map(|w| {
        Ok(Case {
            name: w.name.to_string(),
            graph: w.graph().map_err(|e| CliError::from_kiln(e, w.expr))?,
            values: w.generate_scaled(2024, scale_down),
        })
    });
    let gradients = grads.iter().filter(|g| wanted(g.cost.name)).map(|g| {
        Ok(Case {
            name: g.cost.name.to_string(),
            graph: g.graph().map_err(|e| CliError::from_kiln(e, g.cost.expr))?,
            values: g.cost.generate_scaled(2024, scale_down),
        })
    });
    plain.chain(gradients).collect()
}

/// Input sizes of the per-call cases (`kiln bench --per-call`): small
/// enough that the call overhead dominates, up to where the kernel does.
pub const PER_CALL_SIZES: [usize; 3] = [10, 1_000, 100_000];

/// Timed calls per per-call case at least (a median of µs-long calls needs
/// many samples on a noisy machine).
pub const PER_CALL_RUNS: usize = 201;

/// The per-call cases: the suite's `poly` with `x` of each of
/// [`PER_CALL_SIZES`] elements, named `poly@<size>`.
pub fn per_call_cases() -> CliResult<Vec<Case>> {
    let suite = workloads::suite();
    let poly = suite
        .iter()
        .find(|w| w.name == "poly")
        .expect("the suite has poly");
    let full = poly.inputs[0].shape[0];
    PER_CALL_SIZES
        .iter()
        .map(|&n| {
            let values = poly.generate_scaled(2024, full / n);
            debug_assert_eq!(values[0].len(), n);
            Ok(Case {
                name: format!("poly@{n}"),
                graph: poly
                    .graph()
                    .map_err(|e| CliError::from_kiln(e, poly.expr))?,
                values,
            })
        })
        .collect()
}

/// The expression of the layout cases (`kiln bench --layouts`).
pub const LAYOUT_EXPR: &str = "exp(X) * 2 + 1";

/// The layout cases: [`LAYOUT_EXPR`] on an `n x n` f64 input (`n` = 2000
/// / `scale_down`) that is contiguous (`layout_contiguous`), the transposed
/// view of a contiguous array (`layout_transposed`, Fortran order) and
/// every other column of an `n x 2n` array (`layout_step2`), the same
/// values in each. All three arrays are allocated as the suite's inputs
/// are (`workloads::advised_vec`: transparent huge pages from 4 MB, as
/// numpy does), so that the cases differ in layout only: with the
/// contiguous input on huge pages and the other two on 4 KB pages, the
/// transposed case, the same kernel over the same bytes, measured 1.17-1.25x
/// of the contiguous one.
pub fn layout_cases(scale_down: usize) -> CliResult<Vec<Case>> {
    let n = (2000 / scale_down.max(1)).max(1);
    let case = expr_case(LAYOUT_EXPR, &[format!("X=f64[{n},{n}]")])?;
    let Some(Value::F64(a)) = case.values.into_iter().next() else {
        unreachable!("one f64 input")
    };
    // a's transpose stored row by row, viewed as a's values in Fortran order.
    let at = a.t();
    let mut values = at.iter().copied();
    let stored = workloads::advised_vec(n * n, || values.next().expect("n * n values"));
    let transposed = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[n, n]), stored)
        .expect("n * n values")
        .reversed_axes();
    // a's values in the even columns of n x 2n, zeros in the odd ones.
    let zeros = workloads::advised_vec(2 * n * n, || 0.0);
    let mut wide = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[n, 2 * n]), zeros)
        .expect("2 n * n values");
    wide.slice_each_axis_inplace(|ax| match ax.axis.index() {
        1 => ndarray::Slice::new(0, None, 2),
        _ => ndarray::Slice::from(..),
    });
    wide.assign(&a);
    let cases = [
        ("layout_contiguous", a),
        ("layout_transposed", transposed),
        ("layout_step2", wide),
    ];
    Ok(cases
        .into_iter()
        .map(|(name, v)| Case {
            name: name.to_string(),
            graph: case.graph.clone(),
            values: vec![Value::F64(v)],
        })
        .collect())
}

/// The cases of `cases` named in `only` (all of them when it is empty); an
/// unknown name is a usage error that lists the known ones.
fn only_cases(cases: Vec<Case>, only: &[String]) -> CliResult<Vec<Case>> {
    if let Some(name) = only.iter().find(|o| !cases.iter().any(|c| &c.name == *o)) {
        let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        return Err(CliError::usage(format!(
            "unknown case '{name}' (there are {})",
            names.join(", ")
        )));
    }
    Ok(cases
        .into_iter()
        .filter(|c| only.is_empty() || only.contains(&c.name))
        .collect())
}

/// The chain graph of `k` operations on vectors of `size` elements.
pub fn chain_case(k: usize, size: usize) -> CliResult<Case> {
    let graph = workloads::chain_graph(k).map_err(|e| CliError::usage(e.to_string()))?;
    let mut rng = Rng::new(7);
    let values = (0..graph.inputs().len())
        .map(|_| generate(DType::F64, &[size], &mut rng))
        .collect();
    Ok(Case {
        name: format!("chain_{k}"),
        graph,
        values,
    })
}

const HEADER: &str = "workload      mode                      compile_ms  rewrite_ms  codegen_ms      run_ms run_into_ms  runs  nodes_before  nodes_after  peak_bytes";

fn table_row(r: &Row) -> String {
    format!(
        "{:<13} {:<24} {:>11.2} {:>11.2} {:>11.2} {:>11.3} {:>11.3} {:>5} {:>13} {:>12} {:>11}",
        r.workload,
        r.mode,
        r.compile_ms,
        r.rewrite_ms,
        r.codegen_ms,
        r.run_ms,
        r.run_into_ms,
        r.runs,
        r.nodes_before,
        r.nodes_after,
        r.peak_bytes
    )
}

/// Runs `kiln bench`.
pub fn run(a: &BenchArgs, out: &mut dyn Write) -> CliResult {
    let modes: Vec<(String, Mode)> = split_list(std::slice::from_ref(&a.modes))
        .into_iter()
        .map(|m| parse_mode(&m).map(|mode| (m, mode)))
        .collect::<CliResult<_>>()?;
    if modes.is_empty() {
        return Err(CliError::usage("--modes lists no mode"));
    }
    if let Some(t) = a.threads {
        linker::set_num_threads(t);
    }
    let mut runs = a.runs;
    let cases = if a.suite {
        suite_cases(a.scale_down.max(1), &split_list(&a.only))?
    } else if a.per_call {
        runs = runs.max(PER_CALL_RUNS);
        per_call_cases()?
    } else if a.layouts {
        only_cases(layout_cases(a.scale_down.max(1))?, &split_list(&a.only))?
    } else if let Some(k) = a.chain {
        vec![chain_case(k, a.chain_size)?]
    } else if let Some(e) = &a.expr {
        vec![expr_grad_case(e, &a.vars, &split_list(&a.grad))?]
    } else {
        return Err(CliError::usage(
            "nothing to measure: give an expression with --var declarations, --suite, --per-call, or --chain K",
        ));
    };
    if !a.json {
        writeln!(out, "{HEADER}")?;
    }
    let codegen = CodegenOptions {
        epilogues: !a.no_epilogues,
        pre_stage: !a.no_pre_stage,
        pair_calls: !a.no_pair_calls,
        ..Default::default()
    };
    let total = cases.len() * modes.len();
    let mut done = 0;
    for case in &cases {
        for (name, mode) in &modes {
            done += 1;
            if !a.quiet {
                eprint!("[{done}/{total}] {} {name} ... ", case.name);
            }
            let row = measure(case, name, mode, runs, codegen)?;
            if !a.quiet {
                eprintln!(
                    "compile {:.1} ms, run {:.3} ms, run_into {:.3} ms",
                    row.compile_ms, row.run_ms, row.run_into_ms
                );
            }
            if a.json {
                writeln!(out, "{}", row.to_json())?;
            } else {
                writeln!(out, "{}", table_row(&row))?;
            }
            out.flush()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }

    #[test]
    fn the_per_call_cases_are_poly_at_each_size() {
        let cases = per_call_cases().unwrap();
        let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["poly@10", "poly@1000", "poly@100000"]);
        for (c, n) in cases.iter().zip(PER_CALL_SIZES) {
            assert_eq!(c.values.len(), 1);
            assert_eq!(c.values[0].shape(), &[n]);
        }
    }

    #[test]
    fn the_layout_cases_hold_the_same_values_in_three_layouts() {
        let cases = layout_cases(100).unwrap();
        let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["layout_contiguous", "layout_transposed", "layout_step2"]
        );
        let arrays: Vec<&ndarray::ArrayD<f64>> = cases
            .iter()
            .map(|c| match &c.values[0] {
                Value::F64(a) => a,
                v => panic!("f64 input expected, got {}", v.dtype()),
            })
            .collect();
        assert_eq!(arrays[0].strides(), [20, 1]);
        assert_eq!(arrays[1].strides(), [1, 20]);
        assert_eq!(arrays[2].strides(), [40, 2]);
        assert!(arrays.iter().all(|a| *a == arrays[0]));
        let rows: Vec<Row> = cases
            .iter()
            .map(|c| {
                measure(
                    c,
                    "fast_run",
                    &parse_mode("fast_run").unwrap(),
                    1,
                    Default::default(),
                )
                .unwrap()
            })
            .collect();
        assert!(rows.iter().all(|r| r.nodes_after == 1), "{rows:?}");
    }

    #[test]
    fn only_keeps_the_named_cases_and_rejects_unknown_names() {
        let only = |names: &[&str]| {
            let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            only_cases(layout_cases(100).unwrap(), &names)
        };
        let kept: Vec<String> = only(&["layout_step2"])
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(kept, ["layout_step2"]);
        assert_eq!(only(&[]).unwrap().len(), 3);
        let Err(e) = only(&["layout_diagonal"]) else {
            panic!("an unknown case is an error")
        };
        assert!(e.message.contains("'layout_diagonal'"), "{}", e.message);
        assert!(e.message.contains("layout_transposed"), "{}", e.message);
    }

    #[test]
    fn measures_an_expression_in_every_mode() {
        let case = expr_case("exp(x) * 2 + y", &["x=f64[100]".into(), "y=f64[1]".into()]).unwrap();
        for m in ["none", "fast_run", "fast_run-fusion"] {
            let r = measure(&case, m, &parse_mode(m).unwrap(), 2, Default::default()).unwrap();
            assert_eq!(r.nodes_before, 3);
            assert!(r.peak_bytes >= 800, "{r:?}");
            assert!(r.compile_ms >= r.rewrite_ms);
        }
        let e = expr_case("x", &["x=f64[:]".into()]).unwrap_err();
        assert!(e.message.contains("concrete sizes"));
    }
}
