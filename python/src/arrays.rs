//! numpy arrays in and out: borrowing an input in place as a kiln [`Arg`],
//! lending an output array mutably as an [`ArgMut`], and handing a result
//! [`Value`] to numpy without a copy.
//!
//! Invariants: an array is read in place only when the compiled code can
//! address it as an `ndarray` view: native byte order, one of kiln's eight
//! dtypes, a data pointer aligned to its element size and every stride a
//! multiple of it, at most 32 dimensions. Any other numpy array (byte-swapped,
//! misaligned, odd strides) is copied once into a fresh native array first;
//! an unsupported dtype is a `TypeError`. Inputs stay borrowed (numpy's
//! borrow tracking) for as long as the returned guard lives, so another
//! Rust borrow cannot write them meanwhile.

use kiln::linker::{Arg, ArgMut};
use kiln::{DType, Value};
use numpy::{
    PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyReadwriteArrayDyn,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// The numpy name of a kiln dtype (`float64`, ...), as `numpy.dtype(..).name` prints it.
pub fn numpy_name(d: DType) -> &'static str {
    match d {
        DType::Bool => "bool",
        DType::U8 => "uint8",
        DType::I8 => "int8",
        DType::U16 => "uint16",
        DType::I16 => "int16",
        DType::U32 => "uint32",
        DType::U64 => "uint64",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::F32 => "float32",
        DType::F64 => "float64",
    }
}

/// The kiln dtype of a numpy dtype name or of kiln's short name (`float64` or `f64`).
pub fn dtype_from_name(name: &str) -> PyResult<DType> {
    DType::ALL
        .into_iter()
        .find(|&d| d.name() == name || numpy_name(d) == name)
        .ok_or_else(|| {
            PyTypeError::new_err(format!(
                "unsupported dtype '{name}' (kiln supports {})",
                supported()
            ))
        })
}

fn supported() -> String {
    DType::ALL.map(numpy_name).join(", ")
}

/// The kiln dtype of a numpy array whose elements kiln can read in place
/// (native byte order, no fields), if any.
fn dtype_of(a: &Bound<'_, PyUntypedArray>) -> Option<DType> {
    let d = a.dtype();
    if d.is_native_byteorder() == Some(false) || d.has_fields() || d.has_subarray() {
        return None;
    }
    Some(match (d.kind(), d.itemsize()) {
        (b'b', 1) => DType::Bool,
        (b'u', 1) => DType::U8,
        (b'i', 1) => DType::I8,
        (b'u', 2) => DType::U16,
        (b'u', 4) => DType::U32,
        (b'u', 8) => DType::U64,
        (b'i', 2) => DType::I16,
        (b'i', 4) => DType::I32,
        (b'i', 8) => DType::I64,
        (b'f', 4) => DType::F32,
        (b'f', 8) => DType::F64,
        _ => return None,
    })
}

/// True when the array's memory can be seen as an `ndarray` view of its
/// dtype: aligned data pointer and strides that are whole elements.
fn addressable(a: &Bound<'_, PyUntypedArray>, d: DType) -> bool {
    // numpy's ALIGNED flag: data pointer and strides aligned to the dtype's
    // alignment, which is the element size for each of kiln's dtypes.
    let size = d.size_of() as isize;
    a.ndim() <= 32 && a.is_aligned() && a.strides().iter().all(|s| s % size == 0)
}

fn asarray(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static ASARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    ASARRAY
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("numpy")?.getattr("asarray")?.unbind())
        })
        .map(|f| f.bind(py))
}

/// `obj` as a numpy array kiln can read in place (see the module docs),
/// converting non-arrays with `numpy.asarray` and copying arrays it cannot
/// address; `what` names the value in errors.
pub fn readable<'py>(
    obj: &Bound<'py, PyAny>,
    what: &dyn Fn() -> String,
) -> PyResult<(Bound<'py, PyUntypedArray>, DType)> {
    let py = obj.py();
    let arr = match obj.cast::<PyUntypedArray>() {
        Ok(a) => a.clone(),
        Err(_) => asarray(py)?.call1((obj,))?.cast_into::<PyUntypedArray>()?,
    };
    if let Some(d) = dtype_of(&arr) {
        if addressable(&arr, d) {
            return Ok((arr, d));
        }
    }
    // A copy in native byte order is aligned and C-contiguous.
    let native = arr.dtype().call_method1("newbyteorder", ("=",))?;
    let copy = arr
        .call_method1("astype", (native,))?
        .cast_into::<PyUntypedArray>()?;
    match dtype_of(&copy) {
        Some(d) if addressable(&copy, d) => Ok((copy, d)),
        _ => Err(PyTypeError::new_err(format!(
            "{} has dtype {}, which kiln does not support (kiln supports {})",
            what(),
            arr.dtype(),
            supported()
        ))),
    }
}

/// Runs `$m!(Variant, element type)` for each of kiln's dtypes.
macro_rules! each_dtype {
    ($m:ident) => {
        $m!(Bool, bool);
        $m!(U8, u8);
        $m!(I8, i8);
        $m!(U16, u16);
        $m!(I16, i16);
        $m!(U32, u32);
        $m!(U64, u64);
        $m!(I32, i32);
        $m!(I64, i64);
        $m!(F32, f32);
        $m!(F64, f64);
    };
}

/// An input array borrowed read-only for the duration of a call.
pub enum Borrowed<'py> {
    /// `bool`.
    Bool(PyReadonlyArrayDyn<'py, bool>),
    /// `uint8`.
    U8(PyReadonlyArrayDyn<'py, u8>),
    /// `int8`.
    I8(PyReadonlyArrayDyn<'py, i8>),
    /// `int16`.
    I16(PyReadonlyArrayDyn<'py, i16>),
    U16(PyReadonlyArrayDyn<'py, u16>),
    U32(PyReadonlyArrayDyn<'py, u32>),
    U64(PyReadonlyArrayDyn<'py, u64>),
    /// `int32`.
    I32(PyReadonlyArrayDyn<'py, i32>),
    /// `int64`.
    I64(PyReadonlyArrayDyn<'py, i64>),
    /// `float32`.
    F32(PyReadonlyArrayDyn<'py, f32>),
    /// `float64`.
    F64(PyReadonlyArrayDyn<'py, f64>),
}

impl<'py> Borrowed<'py> {
    /// Borrows `obj` (any array-like) read-only; `what` names it in errors.
    pub fn new(obj: &Bound<'py, PyAny>, what: &dyn Fn() -> String) -> PyResult<Self> {
        let (arr, d) = readable(obj, what)?;
        let busy = |e: numpy::BorrowError| {
            PyValueError::new_err(format!("{} cannot be read: {e}", what()))
        };
        macro_rules! borrow {
            ($v:ident, $t:ty) => {
                if d == DType::$v {
                    let typed = arr.cast::<PyArrayDyn<$t>>()?;
                    return Ok(Borrowed::$v(typed.try_readonly().map_err(busy)?));
                }
            };
        }
        each_dtype!(borrow);
        unreachable!("dtype_of returns one of kiln's dtypes")
    }

    /// The array as a call argument (an `ndarray` view of numpy's memory).
    pub fn arg(&self) -> Arg<'_> {
        match self {
            Borrowed::Bool(a) => Arg::Bool(a.as_array()),
            Borrowed::U8(a) => Arg::U8(a.as_array()),
            Borrowed::I8(a) => Arg::I8(a.as_array()),
            Borrowed::I16(a) => Arg::I16(a.as_array()),
            Borrowed::U16(a) => Arg::U16(a.as_array()),
            Borrowed::U32(a) => Arg::U32(a.as_array()),
            Borrowed::U64(a) => Arg::U64(a.as_array()),
            Borrowed::I32(a) => Arg::I32(a.as_array()),
            Borrowed::I64(a) => Arg::I64(a.as_array()),
            Borrowed::F32(a) => Arg::F32(a.as_array()),
            Borrowed::F64(a) => Arg::F64(a.as_array()),
        }
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.arg().dtype()
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        macro_rules! shape {
            ($($v:ident),*) => {
                match self {
                    $(Borrowed::$v(a) => a.shape(),)*
                }
            };
        }
        shape!(Bool, U8, I8, U16, I16, U32, I32, U64, I64, F32, F64)
    }
}

/// An output (or mutable input) array borrowed for writing during a call.
pub enum Writable<'py> {
    /// `bool`.
    Bool(PyReadwriteArrayDyn<'py, bool>),
    /// `uint8`.
    U8(PyReadwriteArrayDyn<'py, u8>),
    /// `int8`.
    I8(PyReadwriteArrayDyn<'py, i8>),
    /// `int16`.
    I16(PyReadwriteArrayDyn<'py, i16>),
    U16(PyReadwriteArrayDyn<'py, u16>),
    U32(PyReadwriteArrayDyn<'py, u32>),
    U64(PyReadwriteArrayDyn<'py, u64>),
    /// `int32`.
    I32(PyReadwriteArrayDyn<'py, i32>),
    /// `int64`.
    I64(PyReadwriteArrayDyn<'py, i64>),
    /// `float32`.
    F32(PyReadwriteArrayDyn<'py, f32>),
    /// `float64`.
    F64(PyReadwriteArrayDyn<'py, f64>),
}

impl<'py> Writable<'py> {
    /// Borrows a numpy array of kiln dtype `d` for writing in place, or
    /// `None` when that is impossible: not a numpy array, another dtype,
    /// not addressable as a view (see the module docs), read-only, or
    /// already borrowed (e.g. it overlaps an input of the same call).
    pub fn try_new(obj: &Bound<'py, PyAny>, d: DType) -> Option<Self> {
        let arr = obj.cast::<PyUntypedArray>().ok()?;
        if dtype_of(arr) != Some(d) || !addressable(arr, d) {
            return None;
        }
        macro_rules! borrow {
            ($v:ident, $t:ty) => {
                if d == DType::$v {
                    let typed = arr.cast::<PyArrayDyn<$t>>().ok()?;
                    return typed.try_readwrite().ok().map(Writable::$v);
                }
            };
        }
        each_dtype!(borrow);
        None
    }

    /// The array lent mutably to a call.
    pub fn arg_mut(&mut self) -> ArgMut<'_> {
        match self {
            Writable::Bool(a) => ArgMut::Bool(a.as_array_mut()),
            Writable::U8(a) => ArgMut::U8(a.as_array_mut()),
            Writable::I8(a) => ArgMut::I8(a.as_array_mut()),
            Writable::I16(a) => ArgMut::I16(a.as_array_mut()),
            Writable::U16(a) => ArgMut::U16(a.as_array_mut()),
            Writable::U32(a) => ArgMut::U32(a.as_array_mut()),
            Writable::U64(a) => ArgMut::U64(a.as_array_mut()),
            Writable::I32(a) => ArgMut::I32(a.as_array_mut()),
            Writable::I64(a) => ArgMut::I64(a.as_array_mut()),
            Writable::F32(a) => ArgMut::F32(a.as_array_mut()),
            Writable::F64(a) => ArgMut::F64(a.as_array_mut()),
        }
    }
}

/// The owner of a large result handed to numpy by [`to_numpy_recycled`]:
/// when numpy frees the last array viewing it, the result's block goes
/// back to the Function that made it ([`kiln::linker::Function::recycle`]),
/// so that the next call writes its result there instead of faulting in a
/// fresh block (glibc returns blocks over 32 MB to the kernel on free).
#[pyclass(frozen)]
struct ResultOwner {
    value: Option<Value>,
    function: kiln::linker::Function,
}

impl Drop for ResultOwner {
    fn drop(&mut self) {
        if let Some(v) = self.value.take() {
            self.function.recycle(v);
        }
    }
}

/// [`to_numpy`] for a result of `f`: a result large enough for `f`'s
/// buffer pool is lent to numpy by a [`ResultOwner`], which gives its block
/// back to `f` when the array is freed; a smaller one is handed over.
pub fn to_numpy_recycled<'py>(
    py: Python<'py>,
    v: Value,
    f: &kiln::linker::Function,
) -> PyResult<Bound<'py, PyAny>> {
    if v.len() * v.dtype().size_of() < kiln::linker::buffer::BufferPool::MIN_BYTES {
        return Ok(to_numpy(py, v));
    }
    let owner = Bound::new(
        py,
        ResultOwner {
            value: Some(v),
            function: f.clone(),
        },
    )?;
    let value = owner.get().value.as_ref().expect("set above");
    let container = owner.clone().into_any();
    // SAFETY: the array lives in `owner`, which is frozen (never mutated,
    // so the block is never reallocated) and which the numpy array keeps
    // alive as its base object; the block is only given back to the
    // Function in `ResultOwner::drop`, after numpy released the last array
    // viewing it.
    Ok(unsafe {
        kiln::with_value!(value, a => PyArrayDyn::borrow_from_array(a, container).into_any())
    })
}

/// Hands a result to numpy without copying: the array takes ownership of
/// the value's allocation.
pub fn to_numpy(py: Python<'_>, v: Value) -> Bound<'_, PyAny> {
    kiln::with_value!(v, a => PyArrayDyn::from_owned_array(py, a).into_any())
}
