//! Concrete tensor values: an ndarray of one of kiln's dtypes.
//!
//! [`Value`] is what constants hold, what the reference evaluator computes and
//! what compiled functions return. Conversions to and from the `f64` / `i64`
//! computation domains of the reference evaluator live here too; they follow
//! Rust `as` casts (float to int truncates toward zero and saturates, NaN gives 0;
//! so a negative float or NaN cast to an unsigned dtype gives 0 and a float
//! above its range its maximum), which the JIT reproduces. A `u64` element is
//! carried in the `i64` domain as its bit pattern (`u64::MAX` is `-1`):
//! wrapping `+`, `-`, `*` and bitwise ops agree on both readings, and
//! [`Value::to_u64_array`] / [`Value::from_u64_array`] give the unsigned
//! reading where the value matters (comparisons, division, conversion to float).

use std::hash::{Hash, Hasher};

use ndarray::{ArrayD, IxDyn};

use super::dtype::{DType, TensorType};

/// A dense n-dimensional array of one dtype.
#[derive(Debug, Clone)]
pub enum Value {
    /// `bool` elements.
    Bool(ArrayD<bool>),
    /// `u8` elements.
    U8(ArrayD<u8>),
    /// `i8` elements.
    I8(ArrayD<i8>),
    /// `u16` elements.
    U16(ArrayD<u16>),
    /// `i16` elements.
    I16(ArrayD<i16>),
    /// `u32` elements.
    U32(ArrayD<u32>),
    /// `i32` elements.
    I32(ArrayD<i32>),
    /// `u64` elements.
    U64(ArrayD<u64>),
    /// `i64` elements.
    I64(ArrayD<i64>),
    /// `f32` elements.
    F32(ArrayD<f32>),
    /// `f64` elements.
    F64(ArrayD<f64>),
}

/// Applies `$body` to the array inside a [`Value`], whatever its dtype.
#[macro_export]
macro_rules! with_value {
    ($v:expr, $a:ident => $body:expr) => {
        match $v {
            $crate::types::Value::Bool($a) => $body,
            $crate::types::Value::U8($a) => $body,
            $crate::types::Value::I8($a) => $body,
            $crate::types::Value::U16($a) => $body,
            $crate::types::Value::I16($a) => $body,
            $crate::types::Value::U32($a) => $body,
            $crate::types::Value::I32($a) => $body,
            $crate::types::Value::U64($a) => $body,
            $crate::types::Value::I64($a) => $body,
            $crate::types::Value::F32($a) => $body,
            $crate::types::Value::F64($a) => $body,
        }
    };
}

/// Rebuilds a [`Value`] of the same dtype from the result of `$body` on the inner array.
#[macro_export]
macro_rules! map_value {
    ($v:expr, $a:ident => $body:expr) => {
        match $v {
            $crate::types::Value::Bool($a) => $crate::types::Value::Bool($body),
            $crate::types::Value::U8($a) => $crate::types::Value::U8($body),
            $crate::types::Value::I8($a) => $crate::types::Value::I8($body),
            $crate::types::Value::U16($a) => $crate::types::Value::U16($body),
            $crate::types::Value::I16($a) => $crate::types::Value::I16($body),
            $crate::types::Value::U32($a) => $crate::types::Value::U32($body),
            $crate::types::Value::I32($a) => $crate::types::Value::I32($body),
            $crate::types::Value::U64($a) => $crate::types::Value::U64($body),
            $crate::types::Value::I64($a) => $crate::types::Value::I64($body),
            $crate::types::Value::F32($a) => $crate::types::Value::F32($body),
            $crate::types::Value::F64($a) => $crate::types::Value::F64($body),
        }
    };
}

/// Conversion of one element type to and from the evaluator's domains.
pub trait Element: Copy + Send + Sync + 'static {
    /// The dtype of this element type.
    const DTYPE: DType;
    /// The element as `f64`.
    fn to_f64(self) -> f64;
    /// The element as `i64` (floats truncate and saturate; NaN gives 0; a
    /// `u64` gives its bit pattern).
    fn to_i64(self) -> i64;
    /// The element from an `f64` (Rust `as` semantics).
    fn from_f64(v: f64) -> Self;
    /// The element from an `i64` (wrapping to the width, nonzero is true for bool).
    fn from_i64(v: i64) -> Self;
    /// Wraps an array of this element type in a [`Value`].
    fn wrap(a: ArrayD<Self>) -> Value;
}

macro_rules! impl_element {
    ($t:ty, $d:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn to_i64(self) -> i64 {
                self as i64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            fn wrap(a: ArrayD<Self>) -> Value {
                Value::$d(a)
            }
        }
    };
}
impl_element!(u8, U8);
impl_element!(i8, I8);
impl_element!(u16, U16);
impl_element!(i16, I16);
impl_element!(u32, U32);
impl_element!(u64, U64);
impl_element!(i32, I32);
impl_element!(i64, I64);
impl_element!(f32, F32);
impl_element!(f64, F64);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn to_f64(self) -> f64 {
        if self {
            1.0
        } else {
            0.0
        }
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    fn wrap(a: ArrayD<Self>) -> Value {
        Value::Bool(a)
    }
}

impl Value {
    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        match self {
            Value::Bool(_) => DType::Bool,
            Value::U8(_) => DType::U8,
            Value::I8(_) => DType::I8,
            Value::U16(_) => DType::U16,
            Value::U32(_) => DType::U32,
            Value::U64(_) => DType::U64,
            Value::I16(_) => DType::I16,
            Value::I32(_) => DType::I32,
            Value::I64(_) => DType::I64,
            Value::F32(_) => DType::F32,
            Value::F64(_) => DType::F64,
        }
    }

    /// The run-time shape.
    pub fn shape(&self) -> &[usize] {
        with_value!(self, a => a.shape())
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape().len()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape().iter().product()
    }

    /// True when the value has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The fully static type of this value (every size known).
    pub fn tensor_type(&self) -> TensorType {
        TensorType::new(
            self.dtype(),
            self.shape().iter().map(|&d| Some(d)).collect(),
        )
    }

    /// A 0-d value of dtype `dtype` holding `v` (converted with `as`).
    pub fn scalar_f64(dtype: DType, v: f64) -> Value {
        Value::from_f64_array(dtype, ArrayD::from_elem(IxDyn(&[]), v))
    }

    /// A 0-d value of dtype `dtype` holding `v` (converted with `as`).
    pub fn scalar_i64(dtype: DType, v: i64) -> Value {
        Value::from_i64_array(dtype, ArrayD::from_elem(IxDyn(&[]), v))
    }

    /// All elements converted to `f64`, in logical (row-major) order.
    pub fn to_f64_array(&self) -> ArrayD<f64> {
        with_value!(self, a => a.mapv(Element::to_f64))
    }

    /// All elements converted to `i64`.
    pub fn to_i64_array(&self) -> ArrayD<i64> {
        with_value!(self, a => a.mapv(Element::to_i64))
    }

    /// Builds a value of dtype `dtype` from `f64` elements (Rust `as` casts).
    pub fn from_f64_array(dtype: DType, a: ArrayD<f64>) -> Value {
        match dtype {
            DType::Bool => Value::Bool(a.mapv(bool::from_f64)),
            DType::U8 => Value::U8(a.mapv(u8::from_f64)),
            DType::I8 => Value::I8(a.mapv(i8::from_f64)),
            DType::U16 => Value::U16(a.mapv(u16::from_f64)),
            DType::U32 => Value::U32(a.mapv(u32::from_f64)),
            DType::U64 => Value::U64(a.mapv(u64::from_f64)),
            DType::I16 => Value::I16(a.mapv(i16::from_f64)),
            DType::I32 => Value::I32(a.mapv(i32::from_f64)),
            DType::I64 => Value::I64(a.mapv(i64::from_f64)),
            DType::F32 => Value::F32(a.mapv(f32::from_f64)),
            DType::F64 => Value::F64(a),
        }
    }

    /// All elements of an integer or bool value as `u64` (integers wrap: `-1`
    /// is `u64::MAX`, as numpy's `astype`).
    pub fn to_u64_array(&self) -> ArrayD<u64> {
        self.to_i64_array().mapv(|v| v as u64)
    }

    /// Builds a value of dtype `dtype` from `u64` elements (integers wrap,
    /// floats are the nearest value, bool is nonzero).
    pub fn from_u64_array(dtype: DType, a: ArrayD<u64>) -> Value {
        match dtype {
            DType::F32 => Value::F32(a.mapv(|v| v as f32)),
            DType::F64 => Value::F64(a.mapv(|v| v as f64)),
            _ => Value::from_i64_array(dtype, a.mapv(|v| v as i64)),
        }
    }

    /// Builds a value of dtype `dtype` from `i64` elements (wrapping casts).
    pub fn from_i64_array(dtype: DType, a: ArrayD<i64>) -> Value {
        match dtype {
            DType::Bool => Value::Bool(a.mapv(bool::from_i64)),
            DType::U8 => Value::U8(a.mapv(u8::from_i64)),
            DType::I8 => Value::I8(a.mapv(i8::from_i64)),
            DType::U16 => Value::U16(a.mapv(u16::from_i64)),
            DType::U32 => Value::U32(a.mapv(u32::from_i64)),
            DType::U64 => Value::U64(a.mapv(u64::from_i64)),
            DType::I16 => Value::I16(a.mapv(i16::from_i64)),
            DType::I32 => Value::I32(a.mapv(i32::from_i64)),
            DType::I64 => Value::I64(a),
            DType::F32 => Value::F32(a.mapv(|v| v as f32)),
            DType::F64 => Value::F64(a.mapv(|v| v as f64)),
        }
    }

    /// The value converted to another dtype (numpy `astype` with Rust `as` semantics).
    pub fn cast(&self, dtype: DType) -> Value {
        if dtype == self.dtype() {
            return self.clone();
        }
        if self.dtype().is_float() {
            Value::from_f64_array(dtype, self.to_f64_array())
        } else if self.dtype() == DType::U64 {
            Value::from_u64_array(dtype, self.to_u64_array())
        } else {
            Value::from_i64_array(dtype, self.to_i64_array())
        }
    }

    /// The single element of a 0-d or one-element integer value, exactly
    /// (`None` for floats, bool and values of another size).
    pub fn scalar_as_i128(&self) -> Option<i128> {
        if self.len() != 1 || !self.dtype().is_int() {
            return None;
        }
        let v = self.to_i64_array().iter().next().copied()?;
        Some(if self.dtype() == DType::U64 {
            v as u64 as i128
        } else {
            v as i128
        })
    }

    /// The single element of a 0-d or one-element value, as `f64`.
    pub fn scalar_as_f64(&self) -> Option<f64> {
        if self.len() != 1 {
            return None;
        }
        with_value!(self, a => a.iter().next().map(|x| x.to_f64()))
    }

    /// True when every element equals `v` (and there is at least one element).
    pub fn all_equal_f64(&self, v: f64) -> bool {
        !self.is_empty() && with_value!(self, a => a.iter().all(|x| x.to_f64() == v))
    }

    /// The single value shared by every element, when all elements are equal
    /// (NaN-aware: all-NaN arrays report NaN).
    pub fn unique_value(&self) -> Option<f64> {
        // Element by element: rewrites ask this of every constant they meet,
        // most of them of one element (read without an iterator).
        with_value!(self, a => {
            if a.len() == 1 {
                return a.first().map(|x| x.to_f64());
            }
            let mut it = a.iter().map(|x| x.to_f64());
            let first = it.next()?;
            it.all(|x| x == first || (x.is_nan() && first.is_nan()))
                .then_some(first)
        })
    }

    /// Bitwise equality of dtype, shape and elements (NaN equals NaN), used to merge constants.
    pub fn same_as(&self, other: &Value) -> bool {
        if self.dtype() != other.dtype() || self.shape() != other.shape() {
            return false;
        }
        match (self, other) {
            (Value::F64(a), Value::F64(b)) => {
                a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (Value::F32(a), Value::F32(b)) => {
                a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            _ => self.to_i64_array() == other.to_i64_array(),
        }
    }

    /// A hash consistent with [`Value::same_as`].
    pub fn hash_bits<H: Hasher>(&self, state: &mut H) {
        self.dtype().hash(state);
        self.shape().hash(state);
        match self {
            Value::F64(a) => a.iter().for_each(|x| x.to_bits().hash(state)),
            Value::F32(a) => a.iter().for_each(|x| x.to_bits().hash(state)),
            _ => with_value!(self, a => a.iter().for_each(|x| x.to_i64().hash(state))),
        }
    }

    /// A short rendering for printers: the number for a one-element value
    /// (0-d or broadcastable), else `TensorConstant{dtype[shape]}`.
    pub fn summary(&self) -> String {
        if let Some(v) = self.scalar_as_i128() {
            v.to_string()
        } else if self.ndim() == 0 || self.len() == 1 {
            let s = with_value!(self, a => a.iter().next().map(|x| format_element(x.to_f64(), self.dtype())));
            s.unwrap_or_default()
        } else {
            format!("TensorConstant{{{}{:?}}}", self.dtype(), self.shape())
        }
    }

    /// True when `self` and `other` have one dtype and shape and are equal
    /// within the given tolerances (`|a - b| <= atol + rtol * |b|`); NaN
    /// matches NaN and infinities must match exactly.
    pub fn allclose(&self, other: &Value, rtol: f64, atol: f64) -> bool {
        // Values of different dtypes or shapes are never close, whatever
        // their elements (an f32 result is not an f64 one).
        if self.dtype() != other.dtype() || self.shape() != other.shape() {
            return false;
        }
        let a = self.to_f64_array();
        let b = other.to_f64_array();
        a.iter().zip(b.iter()).all(|(&x, &y)| {
            (x.is_nan() && y.is_nan())
                || x == y
                || (!x.is_infinite() && !y.is_infinite() && (x - y).abs() <= atol + rtol * y.abs())
        })
    }
}

/// Formats a number the way printers show constants: integers without a
/// fraction for integer dtypes, `1.0` style for floats.
pub fn format_element(v: f64, dtype: DType) -> String {
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = write_element(&mut s, v, dtype);
    s
}

/// Writes [`format_element`]'s text of `v` to `out`, without allocating.
pub fn write_element(out: &mut impl std::fmt::Write, v: f64, dtype: DType) -> std::fmt::Result {
    if dtype == DType::Bool {
        return out.write_str(if v != 0.0 { "True" } else { "False" });
    }
    if dtype == DType::U64 {
        return write!(out, "{}", v as u64);
    }
    if !dtype.is_float() {
        return write!(out, "{}", v as i64);
    }
    if v.is_finite() && v == v.trunc() && v.abs() < 1e16 {
        write!(out, "{v:.1}")
    } else if dtype == DType::F32 {
        // The shortest text that reads back as the same f32 (0.1, not 0.10000000149011612).
        write!(out, "{}", v as f32)
    } else {
        write!(out, "{v}")
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        self.same_as(other)
    }
}

macro_rules! impl_from_array {
    ($t:ty) => {
        impl From<ArrayD<$t>> for Value {
            fn from(a: ArrayD<$t>) -> Value {
                <$t as Element>::wrap(a)
            }
        }
    };
}
impl_from_array!(bool);
impl_from_array!(u8);
impl_from_array!(i8);
impl_from_array!(u16);
impl_from_array!(i16);
impl_from_array!(u32);
impl_from_array!(u64);
impl_from_array!(i32);
impl_from_array!(i64);
impl_from_array!(f32);
impl_from_array!(f64);

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::arr1;

    #[test]
    fn casts_follow_rust_as() {
        let v = Value::from(arr1(&[1.7, -1.7, f64::NAN, 1e300]).into_dyn());
        assert_eq!(
            v.cast(DType::I32).to_i64_array().as_slice().unwrap(),
            &[1, -1, 0, i32::MAX as i64]
        );
        let b = Value::from(arr1(&[0.0, 2.0]).into_dyn()).cast(DType::Bool);
        assert_eq!(b.to_i64_array().as_slice().unwrap(), &[0, 1]);
    }

    #[test]
    fn nan_aware_equality_and_summary() {
        let a = Value::scalar_f64(DType::F64, f64::NAN);
        assert!(a.same_as(&Value::scalar_f64(DType::F64, f64::NAN)));
        assert!(!a.same_as(&Value::scalar_f64(DType::F32, f64::NAN)));
        assert_eq!(Value::scalar_f64(DType::F64, 2.0).summary(), "2.0");
        assert_eq!(Value::scalar_i64(DType::I64, 3).summary(), "3");
        assert_eq!(Value::scalar_f64(DType::F64, 0.5).summary(), "0.5");
    }
}
