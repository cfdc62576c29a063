//! The `kiln` command line as a library: argument definitions (clap derive),
//! and one module per subcommand, so that Rust programs and tests can run
//! the same code the binary runs.
//!
//! | subcommand | module | what it does |
//! |---|---|---|
//! | `kiln eval EXPR --in x=x.npy` | [`eval`] | compiles and runs an expression on `.npy` inputs |
//! | `kiln eval EXPR --stream --in x=big.npy --out y.npy` | [`stream`] | the same, out of core: memory-mapped inputs and output, chunk by chunk |
//! | `kiln rewrite EXPR --var x=f64[:]` | [`rewrite`] | prints the graph before and after rewriting |
//! | `kiln bench --suite` | [`bench`](mod@bench) | compile and run times, node counts, peak buffer bytes |
//! | `kiln dot EXPR --var ...` | [`rewrite`] | Graphviz of the graph |
//! | `kiln grad EXPR --wrt x --var ...` | [`grad`](mod@grad) | the gradient graph before and after rewriting (`eval --grad` and `bench --grad` differentiate too) |
//!
//! Every failure caused by the user's input (a malformed expression or
//! declaration, an unknown variable, a missing or malformed `.npy`, a dtype
//! or shape mismatch, a bad mode name) is a [`CliError`]: one line on stderr
//! (or a message with the source line and a caret) and exit code
//! [`EXIT_USAGE`] (2), never a panic.
//!
//! Modes are named `none`, `fast_compile`, `fast_run` (any case, `FAST_RUN`
//! too); a name may be followed by `-TAG` (exclude a tag: `fast_run-fusion`
//! is FAST_RUN without elemwise fusion, `fast_run-inplace` without the
//! inplace rewrites) and `+TAG` (include a tag), several times
//! (`fast_compile+stabilize-merge`). See [`parse_mode`].

pub mod args;
pub mod bench;
pub mod eval;
pub mod grad;
pub mod npy;
pub mod rewrite;
pub mod stream;

use std::collections::HashMap;
use std::fmt;
use std::io::Write;

use clap::Parser;

pub use args::{BenchArgs, Cli, Command, DotArgs, EvalArgs, GradArgs, GraphFormat, RewriteArgs};

use crate::error::Error;
use crate::expr::{self, ParseError};
use crate::graph::DType;
use crate::rewriting::Mode;
use crate::tensor::{tensor, Tensor};

/// Exit code of every user-input error (as clap uses for bad arguments).
pub const EXIT_USAGE: i32 = 2;

/// An error reported to the user: a message (possibly several lines, e.g. a
/// caret block) printed on stderr, and the process exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    /// What went wrong, without the leading `error: `.
    pub message: String,
    /// The exit code ([`EXIT_USAGE`] for user errors).
    pub code: i32,
}

impl CliError {
    /// A user error with exit code [`EXIT_USAGE`].
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            code: EXIT_USAGE,
        }
    }

    /// A kiln error raised while handling the source text `src`: parse errors
    /// (including unknown variables) are rendered with the line and a caret.
    pub fn from_kiln(e: Error, src: &str) -> CliError {
        match e {
            Error::Parse { pos, msg } => CliError::usage(ParseError::new(pos, msg).render(src)),
            other => CliError::usage(other.to_string()),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", self.message)
    }
}

impl std::error::Error for CliError {}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::usage(format!("cannot write the output: {e}"))
    }
}

/// The result type of the CLI functions.
pub type CliResult<T = ()> = std::result::Result<T, CliError>;

/// Parses the process arguments, runs the command writing to stdout, and
/// returns the exit code (errors are printed on stderr).
pub fn main() -> i32 {
    let cli = Cli::parse();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match run(cli, &mut out) {
        Ok(()) => 0,
        Err(e) => {
            let _ = out.flush();
            eprintln!("{e}");
            e.code
        }
    }
}

/// Runs a parsed command line, writing its report to `out`.
pub fn run(cli: Cli, out: &mut dyn Write) -> CliResult {
    match cli.command {
        Command::Eval(a) if a.stream => stream::report(&a, out),
        Command::Eval(a) => eval::run(&a, out),
        Command::Rewrite(a) => rewrite::run(&a, out),
        Command::Bench(a) => bench::run(&a, out),
        Command::Dot(a) => rewrite::dot(&a, out),
        Command::Grad(a) => grad::run(&a, out),
    }
}

/// Parses a mode name: `none`, `fast_compile`, `fast_run` (case-insensitive),
/// each optionally followed by `-TAG` (exclude) and `+TAG` (include) parts,
/// e.g. `fast_run-fusion`, `fast_run-inplace-fusion`, `fast_compile+stabilize`.
pub fn parse_mode(name: &str) -> CliResult<Mode> {
    let split = name.find(['-', '+']).unwrap_or(name.len());
    let (base, mut rest) = name.split_at(split);
    let mut mode = match base.to_ascii_lowercase().as_str() {
        "none" | "opt_none" => Mode::none(),
        "fast_compile" | "opt_fast_compile" => Mode::fast_compile(),
        "fast_run" | "opt_fast_run" => Mode::fast_run(),
        _ => {
            return Err(CliError::usage(format!(
                "unknown mode '{name}' (expected none, fast_compile or fast_run, optionally followed by -TAG or +TAG, e.g. fast_run-fusion)"
            )))
        }
    };
    while let Some(sign) = rest.chars().next() {
        let body = &rest[1..];
        let end = body.find(['-', '+']).unwrap_or(body.len());
        let tag = &body[..end];
        if tag.is_empty() {
            return Err(CliError::usage(format!(
                "empty tag after '{sign}' in mode '{name}'"
            )));
        }
        mode = if sign == '-' {
            mode.excluding(&[tag])
        } else {
            mode.including(&[tag])
        };
        rest = &body[end..];
    }
    Ok(mode)
}

/// A declared input: the declaration as written and the input tensor.
#[derive(Debug, Clone)]
pub struct Declared {
    /// The variable name.
    pub name: String,
    /// Its dtype.
    pub dtype: DType,
    /// One entry per dimension: a static size or `None` (`:`).
    pub dims: Vec<Option<usize>>,
    /// The graph input.
    pub tensor: Tensor,
}

/// Parses a `name=dtype[dims]` declaration into an input tensor.
pub fn declare(text: &str) -> CliResult<Declared> {
    let d = expr::parse_decl(text).map_err(|e| {
        CliError::usage(format!(
            "bad declaration '{text}' (expected name=dtype[dims], e.g. x=f64[:]): {}",
            e.render(text)
        ))
    })?;
    let dtype = DType::parse(&d.dtype).map_err(|e| CliError::usage(e.to_string()))?;
    let t = tensor(&d.name, dtype, &d.dims);
    Ok(Declared {
        name: d.name,
        dtype,
        dims: d.dims,
        tensor: t,
    })
}

/// Parses every declaration, refusing a name declared twice.
pub fn declare_all(texts: &[String]) -> CliResult<Vec<Declared>> {
    let mut seen = HashMap::new();
    let mut out = Vec::new();
    for t in texts {
        let d = declare(t)?;
        if seen.insert(d.name.clone(), ()).is_some() {
            return Err(CliError::usage(format!(
                "variable '{}' is declared twice",
                d.name
            )));
        }
        out.push(d);
    }
    Ok(out)
}

/// Builds `src` over the declared inputs (errors rendered with a caret).
pub fn build(src: &str, inputs: &[Declared]) -> CliResult<Tensor> {
    let vars: HashMap<String, Tensor> = inputs
        .iter()
        .map(|d| (d.name.clone(), d.tensor.clone()))
        .collect();
    crate::tensor::build_expression(src, &vars).map_err(|e| CliError::from_kiln(e, src))
}

/// Splits comma-separated lists given once or several times (`--include a,b --include c`).
pub fn split_list(items: &[String]) -> Vec<String> {
    items
        .iter()
        .flat_map(|s| s.split(','))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_names() {
        assert_eq!(parse_mode("fast_run").unwrap(), Mode::fast_run());
        assert_eq!(parse_mode("FAST_RUN").unwrap(), Mode::fast_run());
        assert_eq!(parse_mode("None").unwrap(), Mode::none());
        assert_eq!(
            parse_mode("fast_run-fusion").unwrap(),
            Mode::fast_run().excluding(&["fusion"])
        );
        assert_eq!(
            parse_mode("fast_compile+stabilize-merge").unwrap(),
            Mode::fast_compile()
                .including(&["stabilize"])
                .excluding(&["merge"])
        );
        assert!(parse_mode("fast")
            .unwrap_err()
            .message
            .contains("unknown mode"));
        assert!(parse_mode("fast_run-")
            .unwrap_err()
            .message
            .contains("empty tag"));
    }

    #[test]
    fn declarations() {
        let d = declare("X=f32[:, 3]").unwrap();
        assert_eq!((d.name.as_str(), d.dtype), ("X", DType::F32));
        assert_eq!(d.dims, vec![None, Some(3)]);
        let e = declare("x=f65[:]").unwrap_err();
        assert!(e.message.contains("f65"), "{}", e.message);
        assert!(declare("x f64").is_err());
        let e = declare_all(&["x=f64[:]".into(), "x=f32[]".into()]).unwrap_err();
        assert!(e.message.contains("declared twice"));
    }

    #[test]
    fn unknown_variable_has_a_caret() {
        let ins = declare_all(&["x=f64[:]".into()]).unwrap();
        let e = build("exp(x) + y", &ins).unwrap_err();
        assert!(e.message.contains("unknown variable 'y'"), "{}", e.message);
        assert!(e.message.ends_with("^"), "{}", e.message);
    }
}
