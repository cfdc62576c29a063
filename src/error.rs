//! The crate's error type.
//!
//! One enum, one variant per layer (graph construction and typing, graph
//! mutation, reference evaluation, rewriting, compilation, calls, parsing), so
//! a caller can tell where a failure came from. Messages always name the op,
//! input or position involved; panics are reserved for broken internal
//! invariants.

use thiserror::Error;

/// Every error kiln reports.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum Error {
    /// An op was given inputs of the wrong number, dtype or static shape.
    #[error("type error in {op}: {msg}")]
    Type {
        /// The op's display name.
        op: String,
        /// What was wrong, naming the offending types.
        msg: String,
    },
    /// A FunctionGraph mutation was refused (bad replacement, unknown variable, ...).
    #[error("graph error: {0}")]
    Graph(String),
    /// A feature's validation refused the current graph.
    #[error("validation failed: {0}")]
    Validation(String),
    /// The reference evaluator could not compute a node.
    #[error("evaluation error in {op}: {msg}")]
    Eval {
        /// The op's display name.
        op: String,
        /// What went wrong at run time (shape mismatch, ...).
        msg: String,
    },
    /// A rewriter failed.
    #[error("rewrite error: {0}")]
    Rewrite(String),
    /// Lowering or code generation failed.
    #[error("compile error: {0}")]
    Compile(String),
    /// A compiled function was called with bad inputs.
    #[error("input error: {0}")]
    Input(String),
    /// A gradient could not be built (non-scalar cost, disconnected input,
    /// an op without a pullback, ...).
    #[error("gradient error: {0}")]
    Gradient(String),
    /// An expression or declaration could not be parsed.
    #[error("parse error at position {pos}: {msg}")]
    Parse {
        /// Byte offset of the error in the source text.
        pos: usize,
        /// What was expected or found.
        msg: String,
    },
}

impl Error {
    /// A type error of `op` with message `msg`.
    pub fn ty(op: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::Type {
            op: op.into(),
            msg: msg.into(),
        }
    }
    /// A run-time evaluation error of `op` with message `msg`.
    pub fn eval(op: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::Eval {
            op: op.into(),
            msg: msg.into(),
        }
    }
}

/// The crate's result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;
