//! Graphs built in Python, in PyTensor's vocabulary: symbolic [`Variable`]s,
//! op application, compiled [`Function`]s with their profiles, rewriting
//! and the printers.
//!
//! Every op is applied through the expression language: [`apply`] renders
//! the call as text over names bound to the operand variables (their own
//! names when free and plain, else placeholders: `exp(x)`, `x + _1`,
//! `sum(_0, axis=(0, 1))`) and builds it with
//! `kiln::tensor::build_expression`, so Python operands follow exactly the
//! typing rules of `kiln.evaluate` and of the command line (Python numbers
//! are weak literals: `x_f32 * 2.0` stays `float32`), and every function the
//! language gains is callable from Python without a line here.
//! Invariant: the names bound are the only names in the rendered text (a
//! placeholder `_k` never collides: `k` is the count of names bound before
//! it and user names never start with `_`), and a `Variable` only ever wraps
//! a well-typed tensor.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kiln::expr::Func;
use kiln::graph::print;
use kiln::linker::{Arg, ArgMut};
use kiln::{free_inputs, function, DType, FunctionGraph, Tensor, Value};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PySlice, PyString, PyTuple};

use crate::arrays::{dtype_from_name, numpy_name, to_numpy_recycled, Borrowed, Writable};
use crate::errors::{cli_to_py, to_py};
use crate::pickle;
use crate::recipe::{Kind, Query, Recipe, Step};

/// A symbolic tensor: a graph input, a constant or an op's output.
#[pyclass(frozen, from_py_object, module = "kiln", name = "Variable")]
#[derive(Clone)]
pub struct Variable {
    /// The kiln tensor.
    pub tensor: Tensor,
    /// How it was built (what it pickles as).
    pub recipe: Recipe,
}

/// A constant variable holding `v`.
fn constant_variable(v: Value) -> PyResult<Variable> {
    Step::new(Kind::Constant(v), vec![]).build_one()
}

/// One operand of a rendered op call.
enum Operand {
    /// A variable, bound to a name.
    Var(Variable),
    /// A Python number rendered as a literal (weak, as in expressions).
    Lit(String),
    /// A non-finite Python float, bound as a weak constant.
    NonFinite(f64),
}

fn operand(obj: &Bound<'_, PyAny>) -> PyResult<Operand> {
    if let Ok(v) = obj.cast::<Variable>() {
        return Ok(Operand::Var(v.get().clone()));
    }
    if obj.is_instance_of::<PyBool>() {
        let b: bool = obj.extract()?;
        let a = ndarray::arr0(b).into_dyn();
        return constant_variable(Value::Bool(a)).map(Operand::Var);
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Operand::Lit(if i < 0 {
                format!("({i})")
            } else {
                i.to_string()
            }));
        }
    }
    if obj.is_instance_of::<PyString>() {
        return keyword_text(obj).map(Operand::Lit);
    }
    if obj.is_instance_of::<PyFloat>() {
        let f: f64 = obj.extract()?;
        return Ok(if !f.is_finite() {
            Operand::NonFinite(f)
        } else if f < 0.0 || (f == 0.0 && f.is_sign_negative()) {
            Operand::Lit(format!("(-{:?})", -f))
        } else {
            Operand::Lit(format!("{f:?}"))
        });
    }
    // numpy arrays and scalars, nested lists: a (strong) constant.
    let b = Borrowed::new(obj, &|| "an operand".to_string())?;
    constant_variable(value_of(&b)).map(Operand::Var)
}

/// An owned copy of a borrowed array, as a constant's value.
fn value_of(b: &Borrowed<'_>) -> Value {
    match b.arg() {
        Arg::Bool(a) => Value::Bool(a.to_owned()),
        Arg::U8(a) => Value::U8(a.to_owned()),
        Arg::I8(a) => Value::I8(a.to_owned()),
        Arg::U16(a) => Value::U16(a.to_owned()),
        Arg::I16(a) => Value::I16(a.to_owned()),
        Arg::U32(a) => Value::U32(a.to_owned()),
        Arg::U64(a) => Value::U64(a.to_owned()),
        Arg::I32(a) => Value::I32(a.to_owned()),
        Arg::I64(a) => Value::I64(a.to_owned()),
        Arg::F32(a) => Value::F32(a.to_owned()),
        Arg::F64(a) => Value::F64(a.to_owned()),
    }
}

/// Placeholder names and texts of operands: variables are bound to `_k`.
#[derive(Default)]
struct Binder {
    /// The names bound, in order.
    names: Vec<String>,
    /// The variable bound to each name.
    operands: Vec<Variable>,
}

impl Binder {
    /// Binds `v` under its own name when that reads as a plain variable of
    /// the language and is still free (so error carets show the user's
    /// names), else under the placeholder `_k`.
    fn bind(&mut self, v: Variable) -> String {
        let own = v.tensor.name().filter(|n| {
            let mut chars = n.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !matches!(*n, "True" | "False" | "None" | "T")
                && Func::from_name(n).is_none()
        });
        if let Some(n) = own.map(str::to_string) {
            match self.names.iter().position(|b| *b == n) {
                Some(k) if self.operands[k].tensor.same(&v.tensor) => return n,
                Some(_) => {}
                None => {
                    self.names.push(n.clone());
                    self.operands.push(v);
                    return n;
                }
            }
        }
        let name = format!("_{}", self.names.len());
        self.names.push(name.clone());
        self.operands.push(v);
        name
    }

    fn texts(&mut self, ops: Vec<Operand>) -> PyResult<Vec<String>> {
        let like = ops
            .iter()
            .find_map(|o| match o {
                Operand::Var(v) => Some(v.tensor.dtype()),
                _ => None,
            })
            .unwrap_or(DType::F64);
        ops.into_iter()
            .map(|o| {
                Ok(match o {
                    Operand::Var(v) => self.bind(v),
                    Operand::Lit(s) => s,
                    Operand::NonFinite(value) => {
                        let kind = Kind::WeakConstant { like, value };
                        self.bind(Step::new(kind, vec![]).build_one()?)
                    }
                })
            })
            .collect()
    }

    /// Builds `text` over the bound variables.
    fn build(self, text: String) -> PyResult<Variable> {
        let kind = Kind::Expression {
            text,
            names: self.names,
        };
        Step::new(kind, self.operands).build_one()
    }
}

/// A keyword argument's value as expression text (`None`, `True`, ints, tuples of ints, strings).
fn keyword_text(v: &Bound<'_, PyAny>) -> PyResult<String> {
    if v.is_none() {
        return Ok("None".into());
    }
    if v.is_instance_of::<PyBool>() {
        return Ok(if v.extract::<bool>()? {
            "True"
        } else {
            "False"
        }
        .into());
    }
    if v.is_instance_of::<PyString>() {
        let s: String = v.extract()?;
        if s.contains(['\'', '"', '\n']) {
            return Err(PyValueError::new_err(format!("bad string argument {s:?}")));
        }
        return Ok(format!("'{s}'"));
    }
    if let Ok(i) = v.extract::<i64>() {
        return Ok(i.to_string());
    }
    if v.is_instance_of::<PyTuple>() || v.is_instance_of::<PyList>() {
        let items: Vec<i64> = v.extract()?;
        let body: Vec<String> = items.iter().map(i64::to_string).collect();
        return Ok(format!("({},)", body.join(", ")));
    }
    Err(PyTypeError::new_err(format!(
        "unsupported argument {}",
        v.repr()?
    )))
}

/// Applies the language's function `name` to positional operands and
/// keyword arguments: `apply("sum", (x,), {"axis": 1})`.
#[pyfunction]
#[pyo3(signature = (name, args, kwargs=None))]
pub fn apply(
    name: &str,
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Variable> {
    let ops = args
        .iter()
        .map(|a| operand(&a))
        .collect::<PyResult<Vec<_>>>()?;
    let mut b = Binder::default();
    let mut parts = b.texts(ops)?;
    if let Some(kw) = kwargs {
        for (k, v) in kw.iter() {
            parts.push(format!("{}={}", k.extract::<String>()?, keyword_text(&v)?));
        }
    }
    b.build(format!("{name}({})", parts.join(", ")))
}

/// Applies an infix operator of the language (`+`, `@`, `<`, `==`, ...):
/// `infix("==", a, b)`.
#[pyfunction]
pub fn infix(op: &str, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<Variable> {
    let mut bind = Binder::default();
    let texts = bind.texts(vec![operand(a)?, operand(b)?])?;
    bind.build(format!("{} {op} {}", texts[0], texts[1]))
}

/// Applies a prefix operator of the language (`-`, `~`).
fn prefix(op: &str, a: &Bound<'_, PyAny>) -> PyResult<Variable> {
    let mut bind = Binder::default();
    let texts = bind.texts(vec![operand(a)?])?;
    bind.build(format!("{op}{}", texts[0]))
}

/// `apply(name, (slf, *args), kwargs)`.
fn call_method(
    name: &str,
    slf: &Bound<'_, Variable>,
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Variable> {
    let mut all = vec![slf.as_any().clone()];
    all.extend(args.iter());
    apply(name, &PyTuple::new(slf.py(), all)?, kwargs)
}

/// The names of the functions the expression language (hence `kiln.<name>`) provides.
#[pyfunction]
pub fn function_names() -> Vec<&'static str> {
    Func::ALL.iter().map(|f| f.name()).collect()
}

/// A graph input: `tensor_input("x", "float64", (None, 3))`; a static
/// size of 1 makes the dimension broadcastable.
#[pyfunction]
pub fn tensor_input(name: &str, dtype: &str, shape: Vec<Option<usize>>) -> PyResult<Variable> {
    let kind = Kind::Input {
        name: name.to_string(),
        dtype: dtype_from_name(dtype)?,
        shape,
    };
    Step::new(kind, vec![]).build_one()
}

/// A constant holding a copy of `value` (any array-like).
#[pyfunction]
pub fn constant(value: &Bound<'_, PyAny>) -> PyResult<Variable> {
    let b = Borrowed::new(value, &|| "the constant".to_string())?;
    constant_variable(value_of(&b))
}

#[pymethods]
impl Variable {
    /// The name given at creation (`None` for op outputs and constants).
    #[getter]
    fn name(&self) -> Option<&str> {
        self.tensor.name()
    }

    /// The numpy name of the dtype (`"float64"`).
    #[getter]
    fn dtype(&self) -> &'static str {
        numpy_name(self.tensor.dtype())
    }

    /// The number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.tensor.ndim()
    }

    /// The static shape: an int per known size, `None` per dynamic one (PyTensor's `type.shape`).
    #[getter]
    fn shape(&self) -> Vec<Option<usize>> {
        self.tensor.ty().shape.clone()
    }

    /// Per dimension, whether it broadcasts (static size 1).
    #[getter]
    fn broadcastable(&self) -> Vec<bool> {
        self.tensor
            .ty()
            .shape
            .iter()
            .map(|&s| s == Some(1))
            .collect()
    }

    /// The type as kiln prints it (`f64[:, 3]`).
    #[getter]
    fn r#type(&self) -> String {
        self.tensor.ty().to_string()
    }

    /// The same variable under another name.
    fn named(&self, name: &str) -> PyResult<Variable> {
        Step::new(Kind::Named(name.to_string()), vec![self.clone()]).build_one()
    }

    /// Transposed (dimensions reversed).
    #[getter(T)]
    fn transposed(&self) -> PyResult<Variable> {
        Step::new(Kind::Transposed, vec![self.clone()]).build_one()
    }

    /// Reorders dimensions and inserts broadcastable ones (`'x'`), as PyTensor's.
    #[pyo3(signature = (*pattern))]
    fn dimshuffle(&self, pattern: &Bound<'_, PyTuple>) -> PyResult<Variable> {
        let items: Vec<Bound<'_, PyAny>> = match pattern.len() {
            1 if !pattern.get_item(0)?.is_instance_of::<PyInt>()
                && !pattern.get_item(0)?.is_instance_of::<PyString>() =>
            {
                pattern.get_item(0)?.try_iter()?.collect::<PyResult<_>>()?
            }
            _ => pattern.iter().collect(),
        };
        let order = items
            .iter()
            .map(|i| match i.extract::<usize>() {
                Ok(k) => Ok(Some(k)),
                Err(_) if i.extract::<String>().is_ok_and(|s| s == "x") => Ok(None),
                Err(_) => Err(PyTypeError::new_err(format!(
                    "dimshuffle takes dimension numbers and 'x', got {}",
                    i.repr()?
                ))),
            })
            .collect::<PyResult<Vec<_>>>()?;
        Step::new(Kind::Dimshuffle(order), vec![self.clone()]).build_one()
    }

    /// Reshapes to `shape` (one entry may be -1).
    fn reshape(&self, shape: Vec<i64>) -> PyResult<Variable> {
        Step::new(Kind::Reshape(shape), vec![self.clone()]).build_one()
    }

    /// Indexing in the expression language's syntax (`x[:, None]` today).
    fn __getitem__(&self, key: &Bound<'_, PyAny>) -> PyResult<Variable> {
        let items: Vec<Bound<'_, PyAny>> = match key.cast::<PyTuple>() {
            Ok(t) => t.iter().collect(),
            Err(_) => vec![key.clone()],
        };
        let mut parts = Vec::new();
        for i in &items {
            if i.is_none() {
                parts.push("None".to_string());
            } else if let Ok(s) = i.cast::<PySlice>() {
                let f = |a: &str| -> PyResult<String> {
                    let v = s.getattr(a)?;
                    Ok(if v.is_none() {
                        String::new()
                    } else {
                        v.extract::<i64>()?.to_string()
                    })
                };
                let (lo, hi, st) = (f("start")?, f("stop")?, f("step")?);
                parts.push(if st.is_empty() {
                    format!("{lo}:{hi}")
                } else {
                    format!("{lo}:{hi}:{st}")
                });
            } else if let Ok(k) = i.extract::<i64>() {
                parts.push(k.to_string());
            } else {
                return Err(PyTypeError::new_err(format!(
                    "unsupported index {}",
                    i.repr()?
                )));
            }
        }
        let mut b = Binder::default();
        let x = b.bind(self.clone());
        b.build(format!("{x}[{}]", parts.join(", ")))
    }

    /// `self + other`.
    fn __add__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("+", slf.as_any(), other)
    }
    /// `other + self`.
    fn __radd__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("+", other, slf.as_any())
    }
    /// `self - other`.
    fn __sub__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("-", slf.as_any(), other)
    }
    /// `other - self`.
    fn __rsub__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("-", other, slf.as_any())
    }
    /// `self * other`.
    fn __mul__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("*", slf.as_any(), other)
    }
    /// `other * self`.
    fn __rmul__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("*", other, slf.as_any())
    }
    /// `self / other`.
    fn __truediv__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("/", slf.as_any(), other)
    }
    /// `other / self`.
    fn __rtruediv__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("/", other, slf.as_any())
    }
    /// `self // other`.
    fn __floordiv__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("//", slf.as_any(), other)
    }
    /// `other // self`.
    fn __rfloordiv__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("//", other, slf.as_any())
    }
    /// `self % other`.
    fn __mod__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("%", slf.as_any(), other)
    }
    /// `other % self`.
    fn __rmod__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("%", other, slf.as_any())
    }
    /// `self ** other`.
    fn __pow__(
        slf: &Bound<'_, Self>,
        other: &Bound<'_, PyAny>,
        _modulo: &Bound<'_, PyAny>,
    ) -> PyResult<Variable> {
        infix("**", slf.as_any(), other)
    }
    /// `other ** self`.
    fn __rpow__(
        slf: &Bound<'_, Self>,
        other: &Bound<'_, PyAny>,
        _modulo: &Bound<'_, PyAny>,
    ) -> PyResult<Variable> {
        infix("**", other, slf.as_any())
    }
    /// `self @ other`.
    fn __matmul__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("@", slf.as_any(), other)
    }
    /// `other @ self`.
    fn __rmatmul__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("@", other, slf.as_any())
    }
    /// `self & other`.
    fn __and__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("&", slf.as_any(), other)
    }
    /// `other & self`.
    fn __rand__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("&", other, slf.as_any())
    }
    /// `self | other`.
    fn __or__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("|", slf.as_any(), other)
    }
    /// `other | self`.
    fn __ror__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("|", other, slf.as_any())
    }
    /// `self < other`, element-wise.
    fn __lt__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("<", slf.as_any(), other)
    }
    /// `self <= other`, element-wise.
    fn __le__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix("<=", slf.as_any(), other)
    }
    /// `self > other`, element-wise.
    fn __gt__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix(">", slf.as_any(), other)
    }
    /// `self >= other`, element-wise.
    fn __ge__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        infix(">=", slf.as_any(), other)
    }
    /// `-self`.
    fn __neg__(slf: &Bound<'_, Self>) -> PyResult<Variable> {
        prefix("-", slf.as_any())
    }
    /// `~self`.
    fn __invert__(slf: &Bound<'_, Self>) -> PyResult<Variable> {
        prefix("~", slf.as_any())
    }
    /// Identity hash: `==` is identity (as PyTensor's variables; `kiln.eq`
    /// compares elements), and defining `<` would otherwise drop the hash.
    fn __hash__(slf: &Bound<'_, Self>) -> isize {
        slf.as_ptr() as isize
    }
    /// `abs(self)`.
    fn __abs__(slf: &Bound<'_, Self>) -> PyResult<Variable> {
        call_method("abs", slf, &PyTuple::empty(slf.py()), None)
    }
    /// `kiln.sum(self, ...)`.
    #[pyo3(signature = (*args, **kwargs))]
    fn sum(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Variable> {
        call_method("sum", slf, args, kwargs)
    }
    /// `kiln.prod(self, ...)`.
    #[pyo3(signature = (*args, **kwargs))]
    fn prod(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Variable> {
        call_method("prod", slf, args, kwargs)
    }
    /// `kiln.max(self, ...)`.
    #[pyo3(signature = (*args, **kwargs))]
    fn max(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Variable> {
        call_method("max", slf, args, kwargs)
    }
    /// `kiln.min(self, ...)`.
    #[pyo3(signature = (*args, **kwargs))]
    fn min(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Variable> {
        call_method("min", slf, args, kwargs)
    }
    /// `kiln.mean(self, ...)`.
    #[pyo3(signature = (*args, **kwargs))]
    fn mean(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Variable> {
        call_method("mean", slf, args, kwargs)
    }
    /// `kiln.var(self, ...)`.
    #[pyo3(signature = (*args, **kwargs))]
    fn var(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Variable> {
        call_method("var", slf, args, kwargs)
    }
    /// `kiln.std(self, ...)`.
    #[pyo3(signature = (*args, **kwargs))]
    fn std(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Variable> {
        call_method("std", slf, args, kwargs)
    }
    /// `kiln.all(self, ...)`.
    #[pyo3(signature = (*args, **kwargs))]
    fn all(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Variable> {
        call_method("all", slf, args, kwargs)
    }
    /// `kiln.any(self, ...)`.
    #[pyo3(signature = (*args, **kwargs))]
    fn any(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Variable> {
        call_method("any", slf, args, kwargs)
    }
    /// `self` converted to `dtype` (a numpy or kiln dtype name).
    fn astype(slf: &Bound<'_, Self>, dtype: &str) -> PyResult<Variable> {
        let d = dtype_from_name(dtype)?;
        call_method("cast", slf, &PyTuple::new(slf.py(), [d.name()])?, None)
    }
    /// `kiln.dot(self, other)`.
    fn dot(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Variable> {
        call_method("dot", slf, &PyTuple::new(slf.py(), [other])?, None)
    }

    /// Pickles as its recipe (see `pickle.rs`).
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        pickle::reduce(py, "variable", &pickle::variable_payload(self)?)
    }

    fn __repr__(&self) -> String {
        match self.tensor.name() {
            Some(n) => n.to_string(),
            None => match FunctionGraph::new(
                &free_inputs(std::slice::from_ref(&self.tensor)),
                std::slice::from_ref(&self.tensor),
            ) {
                Ok(fg) => print::pprint_outputs(&fg).trim_end().to_string(),
                Err(_) => format!("<Variable {}>", self.tensor.ty()),
            },
        }
    }
}

/// The FunctionGraph of `outputs` over their free inputs.
fn graph_of(outputs: &[Tensor]) -> PyResult<FunctionGraph> {
    FunctionGraph::new(&free_inputs(outputs), outputs).map_err(|e| to_py(e, None))
}

/// The kiln tensors of `vars`, in order.
pub(crate) fn tensors(vars: &[Variable]) -> Vec<Tensor> {
    vars.iter().map(|v| v.tensor.clone()).collect()
}

/// Rewrites the graph of `outputs` with the optdb query given by `mode`
/// (default `fast_run`) and the `include`/`require`/`exclude` tags
/// (PyTensor's `rewrite_graph`); returns the rewritten outputs over the same inputs.
#[pyfunction]
#[pyo3(signature = (outputs, mode=None, include=vec![], require=vec![], exclude=vec![]))]
pub fn rewrite(
    outputs: Vec<Variable>,
    mode: Option<&str>,
    include: Vec<String>,
    require: Vec<String>,
    exclude: Vec<String>,
) -> PyResult<Vec<Variable>> {
    let query = Query {
        mode: mode.map(str::to_string),
        include,
        require,
        exclude,
    };
    Step::new(Kind::Rewrite(query), outputs).build()
}

/// The debug tree of `outputs` (PyTensor's `debugprint`).
#[pyfunction]
pub fn dprint(outputs: Vec<Variable>) -> PyResult<String> {
    Ok(print::dprint(&graph_of(&tensors(&outputs))?))
}

/// The infix rendering of `outputs`, one per line (PyTensor's `pprint`).
#[pyfunction]
pub fn pprint(outputs: Vec<Variable>) -> PyResult<String> {
    Ok(print::pprint_outputs(&graph_of(&tensors(&outputs))?))
}

/// A compiled function: call it with one array per input.
///
/// Holds the linked function (`Send + Sync`) and what the profile and the
/// printers show, taken from the `kiln::CompiledFunction` when it is compiled
/// (whose rewritten graph, with its features, may not cross threads).
#[pyclass(frozen, module = "kiln", name = "Function")]
pub struct Function {
    f: kiln::linker::Function,
    inputs: Vec<Variable>,
    /// The outputs and the mode as given: what the function pickles as.
    outputs: Vec<Variable>,
    mode: String,
    mutable: Vec<usize>,
    profile: kiln::rewriting::FunctionProfile,
    nodes_before: usize,
    rewrite_profile: String,
    dprint: String,
    pprint: String,
    calls: AtomicU64,
    call_nanos: AtomicU64,
}

/// Compiles `outputs` as a function of `inputs` under `mode`; `mutable`
/// lists the positions of inputs the function may overwrite (PyTensor's
/// `In(x, mutable=True)`).
#[pyfunction]
#[pyo3(signature = (inputs, outputs, mode="fast_run", mutable=vec![]))]
pub fn compile(
    py: Python<'_>,
    inputs: Vec<Variable>,
    outputs: Vec<Variable>,
    mode: &str,
    mutable: Vec<usize>,
) -> PyResult<Function> {
    Function::compile(py, inputs, outputs, mode, mutable)
}

impl Function {
    /// See [`compile`].
    pub fn compile(
        py: Python<'_>,
        inputs: Vec<Variable>,
        outputs: Vec<Variable>,
        mode_name: &str,
        mutable: Vec<usize>,
    ) -> PyResult<Function> {
        let mode = kiln::cli::parse_mode(mode_name).map_err(cli_to_py)?;
        let (ins, outs) = (tensors(&inputs), tensors(&outputs));
        let f = py
            .detach(|| {
                function(&ins, &outs)
                    .mode(mode)
                    .mutable_inputs(&mutable)
                    .message("kiln.function")
                    .compile()
            })
            .map_err(|e| to_py(e, None))?;
        Ok(Function {
            f: f.linked().clone(),
            inputs,
            outputs,
            mode: mode_name.to_string(),
            mutable,
            profile: f.profile(),
            nodes_before: f.nodes_before(),
            rewrite_profile: f.rewrite_profile().to_string(),
            dprint: print::dprint(f.graph()),
            pprint: print::pprint_outputs(f.graph()),
            calls: AtomicU64::new(0),
            call_nanos: AtomicU64::new(0),
        })
    }
}

/// The function profile (PyTensor's `f.profile`): compile and call times, node counts.
#[pyclass(frozen, module = "kiln", name = "FunctionProfile")]
pub struct Profile {
    p: kiln::rewriting::FunctionProfile,
    nodes_before: usize,
}

#[pymethods]
impl Profile {
    /// Calls so far.
    #[getter]
    fn calls(&self) -> usize {
        self.p.calls
    }
    /// Seconds spent in calls so far.
    #[getter]
    fn call_time(&self) -> f64 {
        self.p.call_time.as_secs_f64()
    }
    /// Seconds the whole compilation took.
    #[getter]
    fn compile_time(&self) -> f64 {
        self.p.total_compile_time.as_secs_f64()
    }
    /// Seconds spent rewriting.
    #[getter]
    fn rewrite_time(&self) -> f64 {
        self.p.rewriter_time.as_secs_f64()
    }
    /// Seconds spent lowering and generating code.
    #[getter]
    fn linker_time(&self) -> f64 {
        self.p.linker_time.as_secs_f64()
    }
    /// Apply nodes before rewriting.
    #[getter]
    fn nodes_before(&self) -> usize {
        self.nodes_before
    }
    /// Apply nodes of the compiled graph.
    #[getter]
    fn nodes(&self) -> usize {
        self.p.apply_nodes
    }
    fn __str__(&self) -> String {
        self.p.to_string()
    }
    fn __repr__(&self) -> String {
        self.p.to_string()
    }
}

#[pymethods]
impl Function {
    /// Calls the function: one array-like per input; returns one array per
    /// output (the list of `outputs`). Inputs declared mutable are
    /// overwritten in place when they are writable numpy arrays of the
    /// input's dtype, and copied first otherwise.
    #[pyo3(signature = (*args))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        if args.len() != self.inputs.len() {
            return Err(PyTypeError::new_err(format!(
                "the function takes {} inputs, got {}",
                self.inputs.len(),
                args.len()
            )));
        }
        let mut lent: Vec<Lent<'py>> = Vec::with_capacity(args.len());
        for (k, (a, v)) in args.iter().zip(&self.inputs).enumerate() {
            let t = &v.tensor;
            let writable = if self.mutable.contains(&k) {
                Writable::try_new(&a, t.dtype())
            } else {
                None
            };
            let l = match writable {
                Some(w) => Lent::Mut(w),
                None => {
                    let b = Borrowed::new(&a, &|| format!("input {k}"))?;
                    if b.dtype() != t.dtype() {
                        return Err(to_py_input(k, t, &b));
                    }
                    Lent::Ref(b)
                }
            };
            lent.push(l);
        }
        let mut argv: Vec<ArgMut<'_>> = lent
            .iter_mut()
            .map(|l| match l {
                Lent::Mut(w) => w.arg_mut(),
                Lent::Ref(b) => ArgMut::Ref(b.arg()),
            })
            .collect();
        let f = &self.f;
        let t = Instant::now();
        let res = py.detach(|| f.call_mut(&mut argv));
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.call_nanos
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        let res = res.map_err(|e| to_py(e, None))?;
        drop(argv);
        res.into_iter()
            .map(|v| to_numpy_recycled(py, v, f))
            .collect()
    }

    /// Blocks (without the GIL) until the compiled kernels run their final
    /// code: kiln generates code in two tiers, a fast first one so that
    /// the function is callable at once, then the final one on a
    /// background thread. Calls need not wait (both tiers give the same
    /// results); a benchmark may, so as to time the final code. Returns
    /// False only if the first tier stays in use (the second failed, or
    /// this is a forked child of the process that compiled the function).
    fn wait_final(&self, py: Python<'_>) -> bool {
        py.detach(|| self.f.wait_final())
    }

    /// The function profile so far.
    #[getter]
    fn profile(&self) -> Profile {
        let mut p = self.profile.clone();
        p.calls = self.calls.load(Ordering::Relaxed) as usize;
        p.call_time = Duration::from_nanos(self.call_nanos.load(Ordering::Relaxed));
        Profile {
            p,
            nodes_before: self.nodes_before,
        }
    }

    /// The rewriter profile (per-rewriter times, the rewrite log), as text.
    #[getter]
    fn rewrite_profile(&self) -> &str {
        &self.rewrite_profile
    }

    /// The debug tree of the compiled (rewritten) graph.
    fn dprint(&self) -> &str {
        &self.dprint
    }

    /// The compiled graph in infix form.
    fn pprint(&self) -> &str {
        &self.pprint
    }

    /// Pickles as the recipes of the inputs and outputs, the mode and the
    /// mutable inputs; unpickling recompiles (once per process).
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let payload =
            pickle::function_payload(&self.inputs, &self.outputs, &self.mode, &self.mutable)?;
        pickle::reduce(py, "function", &payload)
    }

    /// The dtypes of the outputs (numpy names).
    #[getter]
    fn output_dtypes(&self) -> Vec<&'static str> {
        self.f
            .output_dtypes()
            .iter()
            .map(|&d| numpy_name(d))
            .collect()
    }
}

/// A call argument borrowed for a call: read-only, or mutably (a mutable input).
enum Lent<'py> {
    Ref(Borrowed<'py>),
    Mut(Writable<'py>),
}

/// The `TypeError` of input `k` given an array of the wrong dtype, in kiln's words.
fn to_py_input(k: usize, t: &Tensor, b: &Borrowed<'_>) -> PyErr {
    match kiln::eval::check_input(k, t.name(), t.ty(), b.dtype(), b.shape()) {
        Err(e) => PyTypeError::new_err(e.to_string()),
        Ok(()) => PyTypeError::new_err(format!("input {k} has the wrong dtype")),
    }
}
