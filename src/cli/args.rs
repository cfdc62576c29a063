//! The command-line arguments (clap derive). `kiln --help` and
//! `kiln SUBCOMMAND --help` print these docs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// kiln: a JIT compiler for tensor expressions (PyTensor-style graph
/// rewriting, Cranelift code generation).
///
/// Expressions use numpy / numexpr-like syntax: `log(1 + exp(x))`,
/// `tanh(A @ W + b)`, `sum(X, axis=1)`, `u[:, None]`. Modes: none,
/// fast_compile, fast_run, optionally followed by -TAG / +TAG to exclude /
/// include rewrites by tag (fast_run-fusion, fast_run-inplace).
#[derive(Debug, Parser)]
#[command(name = "kiln", version, about, long_about = None)]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Evaluate an expression on .npy inputs.
    Eval(EvalArgs),
    /// Print the graph before and after rewriting.
    Rewrite(RewriteArgs),
    /// Measure compile time, run time, node counts and peak buffer bytes.
    ///
    /// compile_ms (rewrite_ms + codegen_ms) is the median of 5 compiles
    /// without the compile cache, until the Function is callable;
    /// compile_first_ms (in --json) is the first of them, which also pays
    /// the process's one-time costs when it is the process's first compile.
    /// final_ms (in --json) is the time from the start of that compile until
    /// its kernels run their final code (code generation is tiered: a fast
    /// first tier, then the final code from a background thread); calls are
    /// timed after it.
    ///
    /// peak_bytes is the most bytes held at once, during one call, in the
    /// intermediate buffers the linker allocates, results included (an
    /// inplace result lives in an intermediate's buffer); the inputs and
    /// constants are not counted. It is deterministic for given input sizes.
    /// Compare e.g. --modes fast_run,fast_run-inplace to see what the inplace
    /// pass saves.
    Bench(BenchArgs),
    /// Write the graph as Graphviz DOT.
    Dot(DotArgs),
    /// Print the gradient graph of a scalar expression before and after rewriting.
    Grad(GradArgs),
}

/// `kiln grad`.
#[derive(Debug, Args)]
pub struct GradArgs {
    /// The scalar (0-d) cost expression, e.g. "sum(log(sigmoid(x)))" (may start with '-').
    #[arg(allow_hyphen_values = true)]
    pub expr: String,
    /// The inputs to differentiate with respect to (comma-separated or repeated).
    #[arg(long, value_name = "NAME,..", required = true)]
    pub wrt: Vec<String>,
    /// An input declaration `NAME=DTYPE[DIMS]`, e.g. `x=f64[:]`.
    #[arg(long = "var", value_name = "NAME=DTYPE[DIMS]")]
    pub vars: Vec<String>,
    /// The mode whose rewrites run on the gradient graph.
    #[arg(long, default_value = "fast_run")]
    pub mode: String,
    /// Print one JSON object {before, after, nodes_before, nodes_after, ops_after}.
    #[arg(long)]
    pub json: bool,
}

/// `kiln eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The expression, e.g. "log(1 + exp(x))" (may start with '-').
    #[arg(allow_hyphen_values = true)]
    pub expr: String,
    /// An input NAME=FILE.npy; its dtype and static shape come from the file.
    #[arg(long = "in", value_name = "NAME=FILE.npy")]
    pub inputs: Vec<String>,
    /// Write the result to this .npy file (dtype kept) instead of printing a summary.
    #[arg(long, value_name = "FILE.npy")]
    pub out: Option<PathBuf>,
    /// Rewriting mode.
    #[arg(long, default_value = "fast_run")]
    pub mode: String,
    /// Print the function, rewriter and per-node run profiles.
    #[arg(long)]
    pub profile: bool,
    /// Evaluate the gradient of the (scalar) expression with respect to this input instead.
    #[arg(long, value_name = "NAME")]
    pub grad: Option<String>,
    /// Stream out of core: memory-map the inputs (and --out) and evaluate chunk by
    /// chunk. Element-wise expressions (inputs of one shape, or of one element) and
    /// full sum/prod/max/min reductions of them only.
    #[arg(long)]
    pub stream: bool,
    /// Elements per chunk with --stream (default 4 Mi).
    #[arg(long, value_name = "N", requires = "stream")]
    pub chunk_elements: Option<usize>,
}

/// How `kiln rewrite` prints graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum GraphFormat {
    /// Infix text: `log1p(exp(x))`.
    #[default]
    Pprint,
    /// Debug tree with `[id A]` tags.
    Dprint,
    /// Graphviz DOT.
    Dot,
}

/// `kiln rewrite`.
#[derive(Debug, Args)]
pub struct RewriteArgs {
    /// The expression (may start with '-').
    #[arg(allow_hyphen_values = true)]
    pub expr: String,
    /// An input declaration `NAME=DTYPE[DIMS]`, e.g. `x=f64[:]`, `X=f32[:, 3]`, `s=f64[]`.
    #[arg(long = "var", value_name = "NAME=DTYPE[DIMS]")]
    pub vars: Vec<String>,
    /// The mode whose rewrites run (default fast_run; with --include/--require
    /// and no --mode, the query holds only those tags, as PyTensor's
    /// rewrite_graph(include=...)).
    #[arg(long)]
    pub mode: Option<String>,
    /// Tags to include (comma-separated).
    #[arg(long, value_name = "TAG,..")]
    pub include: Vec<String>,
    /// Tags every selected rewrite must have (comma-separated).
    #[arg(long, value_name = "TAG,..")]
    pub require: Vec<String>,
    /// Tags to exclude (comma-separated).
    #[arg(long, value_name = "TAG,..")]
    pub exclude: Vec<String>,
    /// Print the rewriter profile.
    #[arg(long)]
    pub profile: bool,
    /// Print which rewrite fired on which node.
    #[arg(long)]
    pub log: bool,
    /// Graph format.
    #[arg(long, value_enum, default_value_t = GraphFormat::Pprint)]
    pub format: GraphFormat,
    /// Print one JSON object {before, after, nodes_before, nodes_after, ops_after}.
    #[arg(long)]
    pub json: bool,
}

/// `kiln bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// An expression to measure (with --var declarations giving concrete sizes).
    #[arg(allow_hyphen_values = true)]
    pub expr: Option<String>,
    /// An input `NAME=DTYPE[SIZES]` with concrete sizes, e.g. `x=f64[1000000]`.
    #[arg(long = "var", value_name = "NAME=DTYPE[SIZES]")]
    pub vars: Vec<String>,
    /// Run the workloads of the benchmark suite.
    #[arg(long, conflicts_with_all = ["expr", "chain"])]
    pub suite: bool,
    /// Build the chain graph of K operations.
    #[arg(long, value_name = "K", conflicts_with = "expr")]
    pub chain: Option<usize>,
    /// Per-call time: the suite's `poly` on 10, 1,000 and 100,000 elements
    /// (`poly@10`, ...), at least 201 timed calls each; read `run_us` and
    /// `run_into_us` of `--json`.
    #[arg(long, conflicts_with_all = ["expr", "chain", "suite"])]
    pub per_call: bool,
    /// Layouts: `exp(X) * 2 + 1` on a 2000 x 2000 f64 input that is
    /// contiguous, a transposed view and every other column of a
    /// 2000 x 4000 array (`layout_contiguous`, `layout_transposed`,
    /// `layout_step2`; `--scale-down` divides both dimensions).
    #[arg(long, conflicts_with_all = ["expr", "chain", "suite", "per_call"])]
    pub layouts: bool,
    /// Measure the gradient of the (scalar) expression with respect to these inputs (comma-separated).
    #[arg(long, value_name = "NAME,..", requires = "expr")]
    pub grad: Vec<String>,
    /// Length of the chain graph's input vectors.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub chain_size: usize,
    /// Divide every suite input dimension by this (quick runs).
    #[arg(long, value_name = "D", default_value_t = 1)]
    pub scale_down: usize,
    /// Only these suite workloads or layout cases (comma-separated names).
    #[arg(long, value_name = "NAME,..")]
    pub only: Vec<String>,
    /// Modes to measure (comma-separated).
    #[arg(
        long,
        value_name = "MODE,..",
        default_value = "none,fast_compile,fast_run"
    )]
    pub modes: String,
    /// Timed runs per mode (after one warm-up run); the median is reported.
    #[arg(long, value_name = "N", default_value_t = 7)]
    pub runs: usize,
    /// Threads for kernels (0: one per core).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Run each matrix product and its element-wise reader as two passes
    /// (no GEMM epilogue), to measure what the epilogue saves.
    #[arg(long)]
    pub no_epilogues: bool,
    /// Stage a transcendental function's argument `a + b` (`-`, `*`) in
    /// the kernel instead of letting the runtime call compute it, to
    /// measure what the pre-stage saves.
    #[arg(long)]
    pub no_pre_stage: bool,
    /// Compute a value's `sigmoid` and its negation's with two runtime
    /// calls instead of one paired call, to measure what the pairing saves.
    #[arg(long)]
    pub no_pair_calls: bool,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `kiln dot`.
#[derive(Debug, Args)]
pub struct DotArgs {
    /// The expression (may start with '-').
    #[arg(allow_hyphen_values = true)]
    pub expr: String,
    /// An input declaration `NAME=DTYPE[DIMS]`.
    #[arg(long = "var", value_name = "NAME=DTYPE[DIMS]")]
    pub vars: Vec<String>,
    /// The mode whose rewrites run before drawing.
    #[arg(long, default_value = "fast_run")]
    pub mode: String,
    /// Draw the graph before rewriting.
    #[arg(long)]
    pub before: bool,
    /// Write to this file instead of stdout.
    #[arg(long, short, value_name = "FILE.dot")]
    pub output: Option<PathBuf>,
}
