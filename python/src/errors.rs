//! kiln errors as Python exceptions, with the command line's messages.
//!
//! A type error (an op given operands of the wrong dtype or rank, an input
//! of the wrong dtype) is a `TypeError`; every other kiln error (parse
//! errors, unknown variables, shape mismatches, bad modes) is a
//! `ValueError`. Errors about an expression's text carry the source line
//! and a caret, exactly as `kiln eval` prints them (without its `error: `).

use kiln::cli::CliError;
use kiln::Error;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::PyErr;

/// The exception for `e`, raised while handling the expression `src` (if any).
pub fn to_py(e: Error, src: Option<&str>) -> PyErr {
    let is_type = matches!(e, Error::Type { .. });
    let message = match src {
        Some(s) => CliError::from_kiln(e, s).message,
        None => e.to_string(),
    };
    if is_type {
        PyTypeError::new_err(message)
    } else {
        PyValueError::new_err(message)
    }
}

/// A command-line error (bad mode name, ...) as a `ValueError`.
pub fn cli_to_py(e: CliError) -> PyErr {
    PyValueError::new_err(e.message)
}
