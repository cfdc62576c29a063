//! `evaluate(expr, local_dict, global_dict, out, mode)`: numexpr's
//! `evaluate` over kiln (the Python wrapper in `kiln/__init__.py` supplies
//! the caller's frame when no dictionary is given).
//!
//! Two caches make a repeated call cheap: the parsed expression (its free
//! variables, in order of first appearance, and its mode) keyed by
//! expression and mode text, and inside it the compiled functions keyed by
//! every input's dtype and broadcast pattern. An input's static type is its
//! dtype, its rank, and a static size 1 for each dimension of size 1 (so it
//! broadcasts as numpy's would; PyTensor broadcasts only statically size-1
//! dimensions); other sizes stay dynamic, so one compiled function serves
//! every array length. Each cache holds at most [`CACHE_CAPACITY`] entries
//! and is emptied when full. The GIL is released while a function compiles
//! and while it runs.
//!
//! `inf`, `nan` and `NaN` are always the non-finite constants (the
//! printers' names for them), never looked up: `maximum(x, -inf)` needs no
//! `inf` in the caller's scope.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use kiln::expr::{free_variables, parse};
use kiln::linker::Arg;
use kiln::linker::Function as Linked;
use kiln::rewriting::Mode;
use kiln::tensor::build_expression;
use kiln::{function, tensor, DType, Error, Tensor};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrays::{numpy_name, readable, to_numpy, to_numpy_recycled, Borrowed, Writable};
use crate::errors::{cli_to_py, to_py};

/// Names the expression builder reads as non-finite constants when no
/// variable has them (see the module docs).
const NONFINITE: [&str; 3] = ["inf", "nan", "NaN"];

/// Entries each cache keeps before it is emptied (numexpr keeps 256 too).
pub const CACHE_CAPACITY: usize = 256;

/// An input's static type as the cache sees it: dtype and, per dimension,
/// whether its size is 1 (broadcastable).
type InputKey = (DType, Vec<bool>);

/// A parsed expression under one mode, with its compiled functions.
struct Parsed {
    names: Vec<String>,
    mode: Mode,
    compiled: Mutex<HashMap<Vec<InputKey>, Arc<Linked>>>,
}

/// Compilations `evaluate` has made since the module was loaded.
static COMPILES: AtomicUsize = AtomicUsize::new(0);

/// Parsed expressions keyed by (mode text, expression text).
type ParsedCache = HashMap<(String, String), Arc<Parsed>>;

/// The cache of parsed expressions (created on first use).
static PARSED: Mutex<Option<ParsedCache>> = Mutex::new(None);

fn parsed(expr: &str, mode: &str) -> PyResult<Arc<Parsed>> {
    let key = (mode.to_string(), expr.to_string());
    let mut guard = PARSED.lock().unwrap_or_else(PoisonError::into_inner);
    let map = guard.get_or_insert_with(HashMap::new);
    if let Some(p) = map.get(&key) {
        return Ok(p.clone());
    }
    let e = parse(expr).map_err(|e| {
        to_py(
            Error::Parse {
                pos: e.pos,
                msg: e.message,
            },
            Some(expr),
        )
    })?;
    let p = Arc::new(Parsed {
        names: free_variables(&e)
            .into_iter()
            .filter(|n| !NONFINITE.contains(&n.as_str()))
            .collect(),
        mode: kiln::cli::parse_mode(mode).map_err(cli_to_py)?,
        compiled: Mutex::new(HashMap::new()),
    });
    if map.len() >= CACHE_CAPACITY {
        map.clear();
    }
    map.insert(key, p.clone());
    Ok(p)
}

/// The static dimensions of an argument of shape `shape` (see the module docs).
fn dims(shape: &[usize]) -> Vec<Option<usize>> {
    shape.iter().map(|&n| (n == 1).then_some(1)).collect()
}

fn compile(
    py: Python<'_>,
    expr: &str,
    p: &Parsed,
    key: &[InputKey],
    args: &[Borrowed<'_>],
) -> PyResult<Arc<Linked>> {
    if let Some(f) = p
        .compiled
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(key)
    {
        return Ok(f.clone());
    }
    let inputs: Vec<Tensor> = p
        .names
        .iter()
        .zip(args)
        .map(|(n, a)| tensor(n, a.dtype(), &dims(a.shape())))
        .collect();
    let vars: HashMap<String, Tensor> = p
        .names
        .iter()
        .cloned()
        .zip(inputs.iter().cloned())
        .collect();
    let mode = p.mode.clone();
    let f = py
        .detach(|| {
            let y = build_expression(expr, &vars)?;
            function(&inputs, &[y])
                .mode(mode)
                .message("kiln.evaluate")
                .compile()
        })
        .map_err(|e| to_py(e, Some(expr)))?;
    COMPILES.fetch_add(1, Ordering::Relaxed);
    // The linked function alone is kept: it is `Send + Sync` (the rewritten
    // graph and profiles are not needed to call it).
    let f = Arc::new(f.linked().clone());
    let mut map = p.compiled.lock().unwrap_or_else(PoisonError::into_inner);
    if map.len() >= CACHE_CAPACITY {
        map.clear();
    }
    map.insert(key.to_vec(), f.clone());
    Ok(f)
}

/// The error of building `expr` when `missing` variables have no value: the
/// builder's own "unknown variable" message with its caret.
fn unknown_variable(expr: &str, p: &Parsed, missing: &str) -> PyErr {
    let vars: HashMap<String, Tensor> = p
        .names
        .iter()
        .filter(|n| *n != missing)
        .map(|n| (n.clone(), tensor(n, DType::F64, &[])))
        .collect();
    match build_expression(expr, &vars) {
        Err(e) => to_py(e, Some(expr)),
        Ok(_) => PyValueError::new_err(format!("variable '{missing}' has no value")),
    }
}

/// `mapping[name]`, or `None` when absent: a dict (the fast path) or any
/// mapping (Python 3.13's frame-locals proxy, ...).
fn lookup<'py>(mapping: &Bound<'py, PyAny>, name: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    if let Ok(d) = mapping.cast::<PyDict>() {
        return d.get_item(name);
    }
    match mapping.get_item(name) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyKeyError>(mapping.py()) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Evaluates `expr` over the variables found in `local_dict`, then
/// `global_dict`; writes into `out` when given (and returns it).
#[pyfunction]
#[pyo3(signature = (expr, local_dict, global_dict, out=None, mode="fast_run"))]
pub fn evaluate<'py>(
    py: Python<'py>,
    expr: &str,
    local_dict: &Bound<'py, PyAny>,
    global_dict: &Bound<'py, PyAny>,
    out: Option<&Bound<'py, PyAny>>,
    mode: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let p = parsed(expr, mode)?;
    let mut args = Vec::with_capacity(p.names.len());
    for name in &p.names {
        let v = match lookup(local_dict, name)? {
            Some(v) => v,
            None => match lookup(global_dict, name)? {
                Some(v) => v,
                None => return Err(unknown_variable(expr, &p, name)),
            },
        };
        args.push(Borrowed::new(&v, &|| format!("variable '{name}'"))?);
    }
    let key: Vec<InputKey> = args
        .iter()
        .map(|a| (a.dtype(), a.shape().iter().map(|&n| n == 1).collect()))
        .collect();
    let f = compile(py, expr, &p, &key, &args)?;
    let views: Vec<Arg<'_>> = args.iter().map(Borrowed::arg).collect();
    let Some(out) = out else {
        let mut res = py.detach(|| f.call(&views)).map_err(|e| to_py(e, None))?;
        return to_numpy_recycled(py, res.remove(0), &f);
    };
    let want = f.output_dtypes()[0];
    if out.cast::<numpy::PyUntypedArray>().is_err() {
        return Err(PyTypeError::new_err(format!(
            "out must be a numpy array, got {}",
            out.get_type().name()?
        )));
    }
    let (_, got) = readable(out, &|| "out".to_string())?;
    if got != want {
        return Err(PyTypeError::new_err(format!(
            "out has dtype {}, the result of '{expr}' is {}",
            numpy_name(got),
            numpy_name(want)
        )));
    }
    match Writable::try_new(out, want) {
        Some(mut w) => {
            let mut outs = [w.arg_mut()];
            py.detach(|| f.call_into_views(&views, &mut outs))
                .map_err(|e| to_py(e, None))?;
        }
        None => {
            // `out` overlaps an input, or cannot be written as a view: compute
            // into a fresh array, then let numpy copy it in (which also raises
            // numpy's own error for a read-only `out`).
            let mut res = py.detach(|| f.call(&views)).map_err(|e| to_py(e, None))?;
            drop(views);
            drop(args);
            let r = res.remove(0);
            let shape: Vec<usize> = out.getattr("shape")?.extract()?;
            if shape != r.shape() {
                return Err(PyValueError::new_err(format!(
                    "out has shape {shape:?}, the result of '{expr}' has shape {:?}",
                    r.shape()
                )));
            }
            out.set_item(py.Ellipsis(), to_numpy(py, r))?;
        }
    }
    Ok(out.clone())
}

/// The caches' state: `parsed` expressions, `compiled` functions held, and
/// `compiles` made so far (a repeated call leaves all three unchanged).
#[pyfunction]
pub fn cache_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let guard = PARSED.lock().unwrap_or_else(PoisonError::into_inner);
    let parsed = guard.as_ref().map_or(0, HashMap::len);
    let compiled: usize = guard
        .iter()
        .flat_map(|m| m.values())
        .map(|p| {
            p.compiled
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len()
        })
        .sum();
    let d = PyDict::new(py);
    d.set_item("parsed", parsed)?;
    d.set_item("compiled", compiled)?;
    d.set_item("compiles", COMPILES.load(Ordering::Relaxed))?;
    Ok(d)
}
