//! Recipes: how each Python [`Variable`] was built, so that a graph can be
//! rebuilt in another process (pickling, `pickle.rs`).
//!
//! kiln has no exact round-trip printer of a graph (`pprint` summarises
//! constants and prints rewritten graphs with ops the language cannot
//! parse), so every `Variable` records the [`Step`] that made it — an input
//! declaration, a constant, an expression-language call over named
//! operands, a tensor method, a gradient or a rewrite — and which of the
//! step's outputs it is. Every Python operation builds its step and then
//! [`Step::run`]s it, so building a variable and replaying its recipe are
//! the same code: a replay in a fresh process gives the same graph.
//!
//! Invariants: a step's operands are variables built before it (recipes
//! form a DAG, as the tensors do); running a step is deterministic, so the
//! same recipe always gives the same graph; a variable's `output` is below
//! its step's output count.

use std::sync::Arc;

use kiln::gradient::{grad_with, hessian, jacobian, DisconnectedInputs, GradOptions};
use kiln::tensor::{build_expression, weak_constant_next_to};
use kiln::{free_inputs, tensor, DType, Error, FunctionGraph, Tensor, Value};
use pyo3::exceptions::PyValueError;
use pyo3::PyResult;

use crate::errors::{cli_to_py, to_py};
use crate::graph::{tensors, Variable};

/// Which output of which step a variable is.
#[derive(Clone)]
pub struct Recipe {
    /// The step that built the variable.
    pub step: Arc<Step>,
    /// The variable's position among the step's outputs.
    pub output: usize,
}

/// One operation of the Python API: what it does and the variables it reads.
pub struct Step {
    /// The operation.
    pub kind: Kind,
    /// The variables it reads, in the order `kind` documents.
    pub operands: Vec<Variable>,
}

/// What a [`Step`] does (its operands are in [`Step::operands`]).
pub enum Kind {
    /// `kiln.tensor(...)`: a graph input. No operand.
    Input {
        /// Its name (may be empty).
        name: String,
        /// Its dtype.
        dtype: DType,
        /// Its static shape.
        shape: Vec<Option<usize>>,
    },
    /// A constant (`kiln.constant`, a numpy operand, a Python bool). No operand.
    Constant(Value),
    /// A weak constant for a non-finite Python float next to operands of
    /// dtype `like`. No operand.
    WeakConstant {
        /// The dtype of the operands it is combined with.
        like: DType,
        /// The value (an infinity or a NaN).
        value: f64,
    },
    /// An expression-language call (`exp(x)`, `_0 + _1`); operand `k` is
    /// bound to `names[k]` in `text`.
    Expression {
        /// The rendered call.
        text: String,
        /// The name of each operand in `text`.
        names: Vec<String>,
    },
    /// `Variable.named` of the one operand.
    Named(String),
    /// `Variable.T` of the one operand.
    Transposed,
    /// `Variable.dimshuffle` of the one operand.
    Dimshuffle(Vec<Option<usize>>),
    /// `Variable.reshape` of the one operand.
    Reshape(Vec<i64>),
    /// `kiln.grad`, one output per `wrt`. Operands: the cost when
    /// `has_cost`, then the `wrt` variables, then `(variable, gradient)`
    /// pairs of the known gradients.
    Grad {
        /// Whether the first operand is a cost.
        has_cost: bool,
        /// How many `wrt` variables follow.
        wrt: usize,
        /// The disconnected-input policy.
        disconnected: DisconnectedInputs,
    },
    /// `kiln.jacobian`: operand 0 is the expression, the rest the `wrt`.
    Jacobian,
    /// `kiln.hessian`: operand 0 is the cost, the rest the `wrt`.
    Hessian,
    /// `kiln.rewrite` of all the operands together, one output each.
    Rewrite(Query),
}

/// The arguments of `kiln.rewrite` that select the rewrites.
pub struct Query {
    /// The mode name (`None`: FAST_RUN unless tags are given alone).
    pub mode: Option<String>,
    /// Tags to include.
    pub include: Vec<String>,
    /// Tags required.
    pub require: Vec<String>,
    /// Tags to exclude.
    pub exclude: Vec<String>,
}

impl Step {
    /// A step of `kind` over `operands`.
    pub fn new(kind: Kind, operands: Vec<Variable>) -> Step {
        Step { kind, operands }
    }

    /// Builds the step's output tensors from its operands' tensors.
    pub fn run(&self) -> PyResult<Vec<Tensor>> {
        let gradient = |r: kiln::Result<Vec<Tensor>>| r.map_err(|e| to_py(e, None));
        let one = |r: kiln::Result<Tensor>| r.map(|t| vec![t]).map_err(|e| to_py(e, None));
        let ops = &self.operands;
        let first = || {
            ops.first()
                .map(|v| &v.tensor)
                .ok_or_else(|| PyValueError::new_err("a recipe step lacks its operand"))
        };
        match &self.kind {
            Kind::Input { name, dtype, shape } => Ok(vec![tensor(name, *dtype, shape)]),
            Kind::Constant(v) => Ok(vec![Tensor::constant(v.clone())]),
            Kind::WeakConstant { like, value } => one(weak_constant_next_to(*like, *value, true)),
            Kind::Expression { text, names } => {
                let vars = names.iter().cloned().zip(tensors(ops)).collect();
                build_expression(text, &vars)
                    .map(|t| vec![t])
                    .map_err(|e| match e {
                        // A type error loses the builder's "(at position N)":
                        // the position is in the rendered text, not in
                        // anything the user wrote.
                        Error::Type { op, mut msg } => {
                            if let Some(i) = msg.rfind(" (at position ") {
                                msg.truncate(i);
                            }
                            to_py(Error::Type { op, msg }, None)
                        }
                        other => to_py(other, Some(text)),
                    })
            }
            Kind::Named(name) => Ok(vec![first()?.named(name)]),
            Kind::Transposed => Ok(vec![first()?.t()]),
            Kind::Dimshuffle(order) => one(first()?.dimshuffle(order)),
            Kind::Reshape(shape) => one(first()?.reshape(shape)),
            Kind::Grad {
                has_cost,
                wrt,
                disconnected,
            } => {
                let costs = usize::from(*has_cost);
                // `wrt` comes from a payload: compared without overflow.
                if ops.len() < costs
                    || ops.len() - costs < *wrt
                    || !(ops.len() - costs - wrt).is_multiple_of(2)
                {
                    return Err(PyValueError::new_err(
                        "a grad recipe has malformed operands",
                    ));
                }
                let (cost, rest) = ops.split_at(costs);
                let (wrt, known) = rest.split_at(*wrt);
                let options = GradOptions {
                    disconnected_inputs: *disconnected,
                    known_grads: known
                        .chunks(2)
                        .map(|p| (p[0].tensor.clone(), p[1].tensor.clone()))
                        .collect(),
                };
                let cost = cost.first().map(|c| &c.tensor);
                gradient(grad_with(cost, &tensors(wrt), &options))
            }
            Kind::Jacobian => gradient(jacobian(first()?, &tensors(&ops[1..]))),
            Kind::Hessian => gradient(hessian(first()?, &tensors(&ops[1..]))),
            Kind::Rewrite(query) => {
                let q = kiln::cli::rewrite::query(
                    query.mode.as_deref(),
                    &query.include,
                    &query.require,
                    &query.exclude,
                )
                .map_err(cli_to_py)?;
                let outs = tensors(ops);
                let inputs = free_inputs(&outs);
                let mut fg = FunctionGraph::new(&inputs, &outs).map_err(|e| to_py(e, None))?;
                kiln::rewrites::rewrite_graph(&mut fg, &q).map_err(|e| to_py(e, None))?;
                fg.output_tensors(&inputs).map_err(|e| to_py(e, None))
            }
        }
    }

    /// Runs the step and wraps each output as a variable recording it.
    pub fn build(self) -> PyResult<Vec<Variable>> {
        let outs = self.run()?;
        let step = Arc::new(self);
        Ok(outs
            .into_iter()
            .enumerate()
            .map(|(output, tensor)| Variable {
                tensor,
                recipe: Recipe {
                    step: step.clone(),
                    output,
                },
            })
            .collect())
    }

    /// [`Step::build`] for a step with exactly one output.
    pub fn build_one(self) -> PyResult<Variable> {
        self.build()?
            .pop()
            .ok_or_else(|| PyValueError::new_err("a step built no variable"))
    }
}

impl Drop for Step {
    /// Unlinks the recipes of the operands iteratively, so that dropping a
    /// very deep chain (a variable built by a long Python loop) does not
    /// overflow the stack; the operands' tensors unlink themselves likewise.
    fn drop(&mut self) {
        let mut stack = std::mem::take(&mut self.operands);
        while let Some(v) = stack.pop() {
            if let Ok(mut step) = Arc::try_unwrap(v.recipe.step) {
                stack.append(&mut step.operands);
            }
        }
    }
}
