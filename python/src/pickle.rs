//! Pickling: a [`Variable`] pickles as its recipe (`recipe.rs`), a compiled
//! [`Function`] as the recipes of its inputs and outputs plus its mode and
//! mutable inputs, and recompiles when unpickled — once per process: the
//! unpickled functions are cached by their payload, so a Dask worker that
//! receives the same function with every task compiles it once.
//!
//! The payload is bytes: a header (`MAGIC`, the kind of object), the steps
//! in an order where every operand comes before its reader (each written
//! once, however many variables share it), then the roots (step index,
//! output) and, for a function, its mode and mutable positions. Constants
//! are `.npy` images. Decoding checks everything it reads (a truncated or
//! foreign payload is a `ValueError`, never a panic) and replays each step
//! as it is read.
//!
//! Invariant: equal graphs built by equal Python calls give equal payloads,
//! so the cache key identifies the function.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use kiln::gradient::DisconnectedInputs;
use kiln::{DType, Value};
use ndarray_npy::WriteNpyExt;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::evaluate::CACHE_CAPACITY;
use crate::graph::{Function, Variable};
use crate::recipe::{Kind, Query, Step};

/// The first bytes of every payload (the format's version is its last byte).
const MAGIC: &[u8] = b"kiln-pickle\x01";
/// The payload holds a variable.
const VARIABLE: u8 = b'V';
/// The payload holds a compiled function.
const FUNCTION: u8 = b'F';

/// Appends the pieces of a payload.
#[derive(Default)]
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    fn usize(&mut self, v: usize) {
        self.buf.extend_from_slice(&(v as u64).to_le_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.usize(b.len());
        self.buf.extend_from_slice(b);
    }
    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    fn strs(&mut self, v: &[String]) {
        self.usize(v.len());
        v.iter().for_each(|s| self.str(s));
    }
    fn dtype(&mut self, d: DType) {
        self.str(d.name());
    }
    fn value(&mut self, v: &Value) -> PyResult<()> {
        let mut npy = Vec::new();
        kiln::with_value!(v, a => a.write_npy(&mut npy))
            .map_err(|e| PyValueError::new_err(format!("cannot pickle a constant: {e}")))?;
        self.bytes(&npy);
        Ok(())
    }
}

/// Reads the pieces of a payload, failing on anything malformed.
struct Reader<'a> {
    buf: &'a [u8],
}

fn malformed(what: &str) -> PyErr {
    PyValueError::new_err(format!(
        "not a kiln pickle payload (or from another kiln version): {what}"
    ))
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> PyResult<&'a [u8]> {
        if n > self.buf.len() {
            return Err(malformed("truncated"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    fn u8(&mut self) -> PyResult<u8> {
        Ok(self.take(1)?[0])
    }
    fn u64_bytes(&mut self) -> PyResult<[u8; 8]> {
        Ok(self.take(8)?.try_into().expect("8 bytes were taken"))
    }
    fn usize(&mut self) -> PyResult<usize> {
        usize::try_from(u64::from_le_bytes(self.u64_bytes()?)).map_err(|_| malformed("a size"))
    }
    /// A count of items that each take at least one byte (bounds allocations).
    fn count(&mut self) -> PyResult<usize> {
        let n = self.usize()?;
        if n > self.buf.len() {
            return Err(malformed("a count beyond the payload"));
        }
        Ok(n)
    }
    fn i64(&mut self) -> PyResult<i64> {
        Ok(i64::from_le_bytes(self.u64_bytes()?))
    }
    fn bytes(&mut self) -> PyResult<&'a [u8]> {
        let n = self.usize()?;
        self.take(n)
    }
    fn str(&mut self) -> PyResult<String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| malformed("a string"))
    }
    fn strs(&mut self) -> PyResult<Vec<String>> {
        (0..self.count()?).map(|_| self.str()).collect()
    }
    fn dtype(&mut self) -> PyResult<DType> {
        DType::parse(&self.str()?).map_err(|_| malformed("a dtype"))
    }
    fn value(&mut self) -> PyResult<Value> {
        kiln::cli::npy::read_bytes(self.bytes()?).map_err(|e| malformed(&e))
    }
    fn end(&self) -> PyResult<()> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(malformed("trailing bytes"))
        }
    }
}

const INPUT: u8 = 0;
const CONSTANT: u8 = 1;
const WEAK_CONSTANT: u8 = 2;
const EXPRESSION: u8 = 3;
const NAMED: u8 = 4;
const TRANSPOSED: u8 = 5;
const DIMSHUFFLE: u8 = 6;
const RESHAPE: u8 = 7;
const GRAD: u8 = 8;
const JACOBIAN: u8 = 9;
const HESSIAN: u8 = 10;
const REWRITE: u8 = 11;

fn write_kind(w: &mut Writer, kind: &Kind) -> PyResult<()> {
    match kind {
        Kind::Input { name, dtype, shape } => {
            w.u8(INPUT);
            w.str(name);
            w.dtype(*dtype);
            w.usize(shape.len());
            // A dynamic size is written as -1.
            shape.iter().for_each(|s| w.i64(s.map_or(-1, |n| n as i64)));
        }
        Kind::Constant(v) => {
            w.u8(CONSTANT);
            w.value(v)?;
        }
        Kind::WeakConstant { like, value } => {
            w.u8(WEAK_CONSTANT);
            w.dtype(*like);
            w.buf.extend_from_slice(&value.to_bits().to_le_bytes());
        }
        Kind::Expression { text, names } => {
            w.u8(EXPRESSION);
            w.str(text);
            w.strs(names);
        }
        Kind::Named(name) => {
            w.u8(NAMED);
            w.str(name);
        }
        Kind::Transposed => w.u8(TRANSPOSED),
        Kind::Dimshuffle(order) => {
            w.u8(DIMSHUFFLE);
            w.usize(order.len());
            // `'x'` (a new broadcastable dimension) is written as -1.
            order.iter().for_each(|o| w.i64(o.map_or(-1, |k| k as i64)));
        }
        Kind::Reshape(shape) => {
            w.u8(RESHAPE);
            w.usize(shape.len());
            shape.iter().for_each(|&s| w.i64(s));
        }
        Kind::Grad {
            has_cost,
            wrt,
            disconnected,
        } => {
            w.u8(GRAD);
            w.u8(u8::from(*has_cost));
            w.usize(*wrt);
            w.u8(match disconnected {
                DisconnectedInputs::Raise => 0,
                DisconnectedInputs::Ignore => 1,
                DisconnectedInputs::Warn => 2,
            });
        }
        Kind::Jacobian => w.u8(JACOBIAN),
        Kind::Hessian => w.u8(HESSIAN),
        Kind::Rewrite(q) => {
            w.u8(REWRITE);
            match &q.mode {
                Some(m) => {
                    w.u8(1);
                    w.str(m);
                }
                None => w.u8(0),
            }
            w.strs(&q.include);
            w.strs(&q.require);
            w.strs(&q.exclude);
        }
    }
    Ok(())
}

/// A size written as -1 when absent.
fn optional(v: i64) -> PyResult<Option<usize>> {
    match v {
        -1 => Ok(None),
        v => usize::try_from(v)
            .map(Some)
            .map_err(|_| malformed("a dimension")),
    }
}

fn read_kind(r: &mut Reader<'_>) -> PyResult<Kind> {
    Ok(match r.u8()? {
        INPUT => Kind::Input {
            name: r.str()?,
            dtype: r.dtype()?,
            shape: (0..r.count()?)
                .map(|_| optional(r.i64()?))
                .collect::<PyResult<_>>()?,
        },
        CONSTANT => Kind::Constant(r.value()?),
        WEAK_CONSTANT => Kind::WeakConstant {
            like: r.dtype()?,
            value: f64::from_bits(u64::from_le_bytes(r.u64_bytes()?)),
        },
        EXPRESSION => Kind::Expression {
            text: r.str()?,
            names: r.strs()?,
        },
        NAMED => Kind::Named(r.str()?),
        TRANSPOSED => Kind::Transposed,
        DIMSHUFFLE => Kind::Dimshuffle(
            (0..r.count()?)
                .map(|_| optional(r.i64()?))
                .collect::<PyResult<_>>()?,
        ),
        RESHAPE => Kind::Reshape((0..r.count()?).map(|_| r.i64()).collect::<PyResult<_>>()?),
        GRAD => Kind::Grad {
            has_cost: r.u8()? != 0,
            wrt: r.usize()?,
            disconnected: match r.u8()? {
                0 => DisconnectedInputs::Raise,
                1 => DisconnectedInputs::Ignore,
                2 => DisconnectedInputs::Warn,
                _ => return Err(malformed("a disconnected-input policy")),
            },
        },
        JACOBIAN => Kind::Jacobian,
        HESSIAN => Kind::Hessian,
        REWRITE => Kind::Rewrite(Query {
            mode: match r.u8()? {
                0 => None,
                _ => Some(r.str()?),
            },
            include: r.strs()?,
            require: r.strs()?,
            exclude: r.strs()?,
        }),
        _ => return Err(malformed("an unknown step")),
    })
}

/// Writes the steps under `roots` (operands first, each step once), then the roots.
fn write_graph(w: &mut Writer, roots: &[&Variable]) -> PyResult<()> {
    let key = |s: &Arc<Step>| Arc::as_ptr(s) as usize;
    let mut index: HashMap<usize, usize> = HashMap::new();
    let mut order: Vec<Arc<Step>> = Vec::new();
    // Iterative post-order: (step, whether its operands were pushed).
    let mut stack: Vec<(Arc<Step>, bool)> = roots
        .iter()
        .rev()
        .map(|v| (v.recipe.step.clone(), false))
        .collect();
    while let Some((s, expanded)) = stack.pop() {
        if index.contains_key(&key(&s)) {
            continue;
        }
        if expanded {
            index.insert(key(&s), order.len());
            order.push(s);
            continue;
        }
        stack.push((s.clone(), true));
        for v in s.operands.iter().rev() {
            if !index.contains_key(&key(&v.recipe.step)) {
                stack.push((v.recipe.step.clone(), false));
            }
        }
    }
    let reference = |w: &mut Writer, v: &Variable| {
        w.usize(index[&key(&v.recipe.step)]);
        w.usize(v.recipe.output);
    };
    w.usize(order.len());
    for s in &order {
        write_kind(w, &s.kind)?;
        w.usize(s.operands.len());
        s.operands.iter().for_each(|v| reference(w, v));
    }
    w.usize(roots.len());
    roots.iter().for_each(|v| reference(w, v));
    Ok(())
}

/// Reads and replays the steps, returning the roots.
fn read_graph(r: &mut Reader<'_>) -> PyResult<Vec<Variable>> {
    let mut built: Vec<Vec<Variable>> = Vec::new();
    let reference = |r: &mut Reader<'_>, built: &[Vec<Variable>]| -> PyResult<Variable> {
        let (s, o) = (r.usize()?, r.usize()?);
        built
            .get(s)
            .and_then(|outs| outs.get(o))
            .cloned()
            .ok_or_else(|| malformed("a reference to a later step"))
    };
    for _ in 0..r.count()? {
        let kind = read_kind(r)?;
        let operands = (0..r.count()?)
            .map(|_| reference(r, &built))
            .collect::<PyResult<_>>()?;
        built.push(Step::new(kind, operands).build()?);
    }
    (0..r.count()?).map(|_| reference(r, &built)).collect()
}

fn header(kind: u8) -> Writer {
    let mut w = Writer::default();
    w.buf.extend_from_slice(MAGIC);
    w.u8(kind);
    w
}

fn open(payload: &[u8], kind: u8) -> PyResult<Reader<'_>> {
    let mut r = Reader { buf: payload };
    if r.take(MAGIC.len()).ok() != Some(MAGIC) || r.u8()? != kind {
        return Err(malformed("bad header"));
    }
    Ok(r)
}

/// The payload of a variable.
pub fn variable_payload(v: &Variable) -> PyResult<Vec<u8>> {
    let mut w = header(VARIABLE);
    write_graph(&mut w, &[v])?;
    Ok(w.buf)
}

/// Rebuilds a variable from its payload (`kiln.Variable`'s unpickler).
#[pyfunction]
pub fn load_variable(payload: &[u8]) -> PyResult<Variable> {
    let mut r = open(payload, VARIABLE)?;
    let mut roots = read_graph(&mut r)?;
    r.end()?;
    match (roots.pop(), roots.is_empty()) {
        (Some(v), true) => Ok(v),
        _ => Err(malformed("a variable payload with several roots")),
    }
}

/// The payload of a compiled function.
pub fn function_payload(
    inputs: &[Variable],
    outputs: &[Variable],
    mode: &str,
    mutable: &[usize],
) -> PyResult<Vec<u8>> {
    let mut w = header(FUNCTION);
    w.str(mode);
    w.usize(mutable.len());
    mutable.iter().for_each(|&k| w.usize(k));
    w.usize(inputs.len());
    let roots: Vec<&Variable> = inputs.iter().chain(outputs).collect();
    write_graph(&mut w, &roots)?;
    Ok(w.buf)
}

/// Unpickled functions by payload, and the cache's counters.
struct Cache {
    functions: HashMap<Vec<u8>, Py<Function>>,
}

static CACHE: Mutex<Option<Cache>> = Mutex::new(None);
/// Functions compiled by unpickling since the module was loaded.
static COMPILES: AtomicUsize = AtomicUsize::new(0);
/// Unpickled functions served from the cache.
static HITS: AtomicUsize = AtomicUsize::new(0);

fn cached(py: Python<'_>, payload: &[u8]) -> Option<Py<Function>> {
    let guard = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    Some(guard.as_ref()?.functions.get(payload)?.clone_ref(py))
}

/// Rebuilds and compiles a function from its payload (`kiln.Function`'s
/// unpickler), or returns the one this process already compiled from the
/// same payload.
#[pyfunction]
pub fn load_function(py: Python<'_>, payload: &[u8]) -> PyResult<Py<Function>> {
    if let Some(f) = cached(py, payload) {
        HITS.fetch_add(1, Ordering::Relaxed);
        return Ok(f);
    }
    let mut r = open(payload, FUNCTION)?;
    let mode = r.str()?;
    let mutable = (0..r.count()?)
        .map(|_| r.usize())
        .collect::<PyResult<Vec<_>>>()?;
    let n_inputs = r.usize()?;
    let mut roots = read_graph(&mut r)?;
    r.end()?;
    if n_inputs > roots.len() {
        return Err(malformed("more inputs than variables"));
    }
    let outputs = roots.split_off(n_inputs);
    let f = Py::new(py, Function::compile(py, roots, outputs, &mode, mutable)?)?;
    COMPILES.fetch_add(1, Ordering::Relaxed);
    // The lock is not held while compiling (which releases the GIL): two
    // threads unpickling the same payload at once may both compile; the
    // first one stored is kept.
    let mut guard = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    let cache = guard.get_or_insert_with(|| Cache {
        functions: HashMap::new(),
    });
    if cache.functions.len() >= CACHE_CAPACITY {
        cache.functions.clear();
    }
    Ok(cache
        .functions
        .entry(payload.to_vec())
        .or_insert(f)
        .clone_ref(py))
}

/// The unpickling cache: `functions` held, `compiles` made and `hits` served so far.
#[pyfunction]
pub fn pickle_cache_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let held = CACHE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .map_or(0, |c| c.functions.len());
    let d = PyDict::new(py);
    d.set_item("functions", held)?;
    d.set_item("compiles", COMPILES.load(Ordering::Relaxed))?;
    d.set_item("hits", HITS.load(Ordering::Relaxed))?;
    Ok(d)
}

/// `(kiln._unpickle_<what>, (payload,))`: what `__reduce__` returns.
pub fn reduce<'py>(
    py: Python<'py>,
    what: &str,
    payload: &[u8],
) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
    let loader = py.import("kiln")?.getattr(format!("_unpickle_{what}"))?;
    Ok((loader, (PyBytes::new(py, payload),)))
}
