//! `kiln._kiln`: the compiled half of the `kiln` Python package (the
//! Python half, `kiln/__init__.py`, adds the numexpr- and PyTensor-style
//! signatures on top).
//!
//! Rooms: `arrays` (numpy arrays read in place, results handed over
//! without a copy), `errors` (kiln errors as `ValueError`/`TypeError`
//! with the command line's messages), `evaluate` (numexpr's `evaluate`
//! and its caches), `graph` (symbolic variables, op application,
//! compiled functions, rewriting, printers), `gradient` (`grad`,
//! `jacobian`, `hessian`). The GIL is released whenever
//! compiled code or the compiler runs; every object here is `Send + Sync`,
//! so one function may be called from several threads at once.

mod arrays;
mod errors;
mod evaluate;
mod gradient;
mod graph;
mod pickle;
mod recipe;

use pyo3::prelude::*;

/// The module object.
#[pymodule]
fn _kiln(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(evaluate::evaluate, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate::cache_info, m)?)?;
    m.add_function(wrap_pyfunction!(graph::apply, m)?)?;
    m.add_function(wrap_pyfunction!(graph::infix, m)?)?;
    m.add_function(wrap_pyfunction!(graph::function_names, m)?)?;
    m.add_function(wrap_pyfunction!(graph::tensor_input, m)?)?;
    m.add_function(wrap_pyfunction!(graph::constant, m)?)?;
    m.add_function(wrap_pyfunction!(graph::rewrite, m)?)?;
    m.add_function(wrap_pyfunction!(graph::dprint, m)?)?;
    m.add_function(wrap_pyfunction!(graph::pprint, m)?)?;
    m.add_function(wrap_pyfunction!(graph::compile, m)?)?;
    m.add_function(wrap_pyfunction!(gradient::grad, m)?)?;
    m.add_function(wrap_pyfunction!(gradient::jacobian, m)?)?;
    m.add_function(wrap_pyfunction!(gradient::hessian, m)?)?;
    m.add_function(wrap_pyfunction!(pickle::load_variable, m)?)?;
    m.add_function(wrap_pyfunction!(pickle::load_function, m)?)?;
    m.add_function(wrap_pyfunction!(pickle::pickle_cache_info, m)?)?;
    m.add_class::<graph::Variable>()?;
    m.add_class::<graph::Function>()?;
    m.add_class::<graph::Profile>()?;
    m.add("CACHE_CAPACITY", evaluate::CACHE_CAPACITY)?;
    Ok(())
}
