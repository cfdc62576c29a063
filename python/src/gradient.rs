//! Gradients from Python: `grad`, `jacobian` and `hessian`, thin wrappers
//! over `kiln::gradient` (PyTensor's signatures are adapted in
//! `kiln/__init__.py`: a single `wrt` or a list of them).
//!
//! The results are ordinary [`Variable`]s over the same graph (recorded as
//! one recipe step, `recipe::Kind::Grad` / `Jacobian` / `Hessian`), compiled
//! by `kiln.function` like any other; kiln's gradient errors (a disconnected
//! `wrt`, a non-scalar cost, a Jacobian of dynamic length) are
//! `ValueError`s with kiln's message.

use kiln::gradient::{disconnected_warnings, DisconnectedInputs, GradOptions};
use pyo3::exceptions::{PyUserWarning, PyValueError};
use pyo3::prelude::*;

use crate::graph::Variable;
use crate::recipe::{Kind, Step};

/// The policy named by PyTensor's `disconnected_inputs` argument.
fn policy(name: &str) -> PyResult<DisconnectedInputs> {
    match name {
        "raise" => Ok(DisconnectedInputs::Raise),
        "ignore" => Ok(DisconnectedInputs::Ignore),
        "warn" => Ok(DisconnectedInputs::Warn),
        other => Err(PyValueError::new_err(format!(
            "disconnected_inputs must be 'raise', 'warn' or 'ignore', got '{other}'"
        ))),
    }
}

/// Builds the gradient step `kind` over `operands` with the GIL released.
fn build(py: Python<'_>, kind: Kind, operands: Vec<Variable>) -> PyResult<Vec<Variable>> {
    py.detach(|| Step::new(kind, operands).build())
}

/// The gradients of the 0-d `cost` (or of the seeds `known_grads` alone,
/// when `cost` is `None`) with respect to each of `wrt`.
/// `known_grads` pairs a variable with its given gradient (PyTensor's dict);
/// `disconnected_inputs` is `"raise"`, `"warn"` (zeros, and a Python
/// `UserWarning` naming each such `wrt`) or `"ignore"`.
#[pyfunction]
#[pyo3(signature = (cost, wrt, known_grads=vec![], disconnected_inputs="raise"))]
pub fn grad(
    py: Python<'_>,
    cost: Option<Variable>,
    wrt: Vec<Variable>,
    known_grads: Vec<(Variable, Variable)>,
    disconnected_inputs: &str,
) -> PyResult<Vec<Variable>> {
    let mut disconnected = policy(disconnected_inputs)?;
    if disconnected == DisconnectedInputs::Warn {
        // Warned here, through Python's `warnings`; the step itself (also
        // replayed when unpickled) then gives zeros silently.
        let options = GradOptions {
            disconnected_inputs: DisconnectedInputs::Ignore,
            known_grads: known_grads
                .iter()
                .map(|(v, g)| (v.tensor.clone(), g.tensor.clone()))
                .collect(),
        };
        let ws: Vec<_> = wrt.iter().map(|w| w.tensor.clone()).collect();
        let cost_t = cost.as_ref().map(|c| c.tensor.clone());
        let messages = py
            .detach(|| disconnected_warnings(cost_t.as_ref(), &ws, &options))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        for m in messages {
            let m = std::ffi::CString::new(m).map_err(|e| PyValueError::new_err(e.to_string()))?;
            PyErr::warn(py, &py.get_type::<PyUserWarning>(), &m, 1)?;
        }
        disconnected = DisconnectedInputs::Ignore;
    }
    let kind = Kind::Grad {
        has_cost: cost.is_some(),
        wrt: wrt.len(),
        disconnected,
    };
    let mut operands: Vec<Variable> = cost.into_iter().chain(wrt).collect();
    operands.extend(known_grads.into_iter().flat_map(|(v, g)| [v, g]));
    build(py, kind, operands)
}

/// The Jacobian of `expression` (0-d, or 1-d of static length) with
/// respect to each of `wrt`.
#[pyfunction]
pub fn jacobian(
    py: Python<'_>,
    expression: Variable,
    wrt: Vec<Variable>,
) -> PyResult<Vec<Variable>> {
    build(
        py,
        Kind::Jacobian,
        std::iter::once(expression).chain(wrt).collect(),
    )
}

/// The Hessian of the 0-d `cost` with respect to each of `wrt` (each 0-d,
/// or 1-d of static length).
#[pyfunction]
pub fn hessian(py: Python<'_>, cost: Variable, wrt: Vec<Variable>) -> PyResult<Vec<Variable>> {
    build(
        py,
        Kind::Hessian,
        std::iter::once(cost).chain(wrt).collect(),
    )
}
