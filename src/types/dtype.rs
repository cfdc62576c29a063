//! Data types and tensor types.
//!
//! A [`TensorType`] is a dtype plus a static shape: one entry per dimension,
//! `Some(n)` when the size is known at graph-build time and `None` otherwise.
//! A dimension of known size 1 is *broadcastable*. As in PyTensor, only
//! broadcastable dimensions broadcast: two dimensions that are not statically 1
//! must agree at run time (a mismatch is an error, never a silent broadcast).
//!
//! # Dtype promotion
//! [`DType::upcast`] follows numpy's `result_type` for tensors of different
//! dtypes: `bool` gives way to anything; two signed (or two unsigned)
//! integers give the wider; an unsigned integer with a signed one gives the
//! signed one when it is wider, else the signed type twice the unsigned
//! width (`u8`+`i8` is `i16`, `u16`+`i16` is `i32`, `u32`+`i32` is `i64`), and
//! `u64` with any signed integer gives `f64`; an integer of at most 16 bits
//! with `f32` gives `f32`, a wider one `f64`; `f32` with `f64` gives `f64`.
//! Float-valued functions of integers ([`DType::upgrade_to_float`]) give `f32`
//! for `bool`, `i8`, `u8`, `i16`, `u16` and `f64` for `i32`, `u32`, `i64`, `u64`
//! (PyTensor's rule); true division of integers gives `f64`.
//! A Rust number used as a constant is *weak* ([`DType::weak_scalar`]): it takes
//! the tensor's dtype when that dtype can hold it, so `x_f32 * 2.0` stays `f32`
//! and `x_i32 + 1` and `x_u32 + 1` stay `i32` and `u32`, while `x_i32 * 0.5`
//! becomes `f64`. A negative integer next to a `u16`, `u32` or `u64` tensor
//! is a type error (`tensor::build`), as numpy 2 raises for a Python int
//! out of the unsigned range (next to `u8` it is an `i64` constant, kiln's
//! rule from before the wider unsigned dtypes).

use std::fmt;

use crate::error::{Error, Result};

/// The element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// Booleans (stored as one byte, 0 or 1).
    Bool,
    /// Unsigned 8-bit integers.
    U8,
    /// Signed 8-bit integers.
    I8,
    /// Unsigned 16-bit integers.
    U16,
    /// Signed 16-bit integers.
    I16,
    /// Unsigned 32-bit integers.
    U32,
    /// Signed 32-bit integers.
    I32,
    /// Unsigned 64-bit integers.
    U64,
    /// Signed 64-bit integers.
    I64,
    /// IEEE single precision.
    F32,
    /// IEEE double precision.
    F64,
}

impl DType {
    /// Every dtype, by kind and width (bool, the integers from the
    /// narrowest, the unsigned one of each width first, then the floats).
    pub const ALL: [DType; 11] = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::U16,
        DType::I16,
        DType::U32,
        DType::I32,
        DType::U64,
        DType::I64,
        DType::F32,
        DType::F64,
    ];

    /// The short name used by printers, declarations and `cast` (`f64`, `i32`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::I8 => "i8",
            DType::U16 => "u16",
            DType::I16 => "i16",
            DType::U32 => "u32",
            DType::I32 => "i32",
            DType::U64 => "u64",
            DType::I64 => "i64",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    /// Parses a short name (`f64`) or a numpy name (`float64`, `int32`, `uint8`).
    pub fn parse(s: &str) -> Result<DType> {
        Ok(match s {
            "bool" => DType::Bool,
            "u8" | "uint8" => DType::U8,
            "i8" | "int8" => DType::I8,
            "u16" | "uint16" => DType::U16,
            "u32" | "uint32" => DType::U32,
            "u64" | "uint64" => DType::U64,
            "i16" | "int16" => DType::I16,
            "i32" | "int32" => DType::I32,
            "i64" | "int64" => DType::I64,
            "f32" | "float32" => DType::F32,
            "f64" | "float64" => DType::F64,
            _ => {
                return Err(Error::Parse {
                    pos: 0,
                    msg: format!(
                    "unknown dtype '{s}' (expected one of bool, u8, i8, u16, i16, u32, i32, u64, i64, f32, f64)"
                ),
                })
            }
        })
    }

    /// Size of one element in bytes.
    pub fn size_of(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::I16 | DType::U16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
        }
    }

    /// True for `f32` and `f64`.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// True for the signed and unsigned integer dtypes (not `bool`).
    pub fn is_int(self) -> bool {
        !self.is_float() && self != DType::Bool
    }

    /// True for the unsigned integer dtypes `u8`, `u16`, `u32`, `u64`.
    pub fn is_unsigned(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }

    /// True for the signed integer dtypes `i8` ... `i64`.
    pub fn is_signed_int(self) -> bool {
        self.is_int() && !self.is_unsigned()
    }

    /// The smallest and largest value of an integer dtype (`None` for
    /// `bool` and the floats), in `i128`, which holds them all.
    pub fn int_range(self) -> Option<(i128, i128)> {
        let bits = self.bits() as u32;
        match self {
            _ if !self.is_int() => None,
            _ if self.is_unsigned() => Some((0, (1i128 << bits) - 1)),
            _ => Some((-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)),
        }
    }

    /// The width in bits of an integer or float dtype (8 for `bool`).
    pub fn bits(self) -> usize {
        8 * self.size_of()
    }

    /// The numpy result dtype of combining two tensors of these dtypes.
    pub fn upcast(a: DType, b: DType) -> DType {
        use DType::*;
        if a == b {
            return a;
        }
        let signed_of_bits = |bits: usize| match bits {
            8 => I8,
            16 => I16,
            32 => I32,
            _ => I64,
        };
        match (a, b) {
            (Bool, x) | (x, Bool) => x,
            (F32, F64) | (F64, F32) => F64,
            // An integer wider than 16 bits does not fit f32's mantissa: numpy gives f64.
            (f, i) | (i, f) if f.is_float() => {
                if f == F32 && i.bits() <= 16 {
                    F32
                } else {
                    F64
                }
            }
            // Both signed or both unsigned: the wider.
            _ if a.is_unsigned() == b.is_unsigned() => {
                if a.bits() >= b.bits() {
                    a
                } else {
                    b
                }
            }
            // Unsigned with signed: the signed type when it is wider, else the
            // signed type twice as wide as the unsigned one (`u64` with any
            // signed integer has none: numpy gives `f64`).
            _ => {
                let (u, s) = if a.is_unsigned() { (a, b) } else { (b, a) };
                if s.bits() > u.bits() {
                    s
                } else if u == U64 {
                    F64
                } else {
                    signed_of_bits(2 * u.bits())
                }
            }
        }
    }

    /// The upcast of a list of dtypes; `None` for an empty list.
    pub fn upcast_all(dtypes: impl IntoIterator<Item = DType>) -> Option<DType> {
        dtypes.into_iter().reduce(DType::upcast)
    }

    /// The float dtype a float-valued function of this dtype returns.
    pub fn upgrade_to_float(self) -> DType {
        match self {
            DType::Bool | DType::U8 | DType::I8 | DType::U16 | DType::I16 | DType::F32 => {
                DType::F32
            }
            DType::U32 | DType::I32 | DType::U64 | DType::I64 | DType::F64 => DType::F64,
        }
    }

    /// The dtype a Rust constant takes next to a tensor of dtype `tensor`:
    /// the tensor's dtype when it can represent the value's kind, else the
    /// default dtype of the constant (`i64` for integers, `f64` for floats).
    pub fn weak_scalar(tensor: DType, value_is_float: bool) -> DType {
        if value_is_float {
            if tensor.is_float() {
                tensor
            } else {
                DType::F64
            }
        } else if tensor == DType::Bool {
            DType::I64
        } else {
            tensor
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The static type of a tensor variable: dtype and per-dimension static size.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorType {
    /// The element type.
    pub dtype: DType,
    /// One entry per dimension: `Some(n)` when known at build time.
    pub shape: Vec<Option<usize>>,
}

impl TensorType {
    /// A tensor type with the given dtype and static shape.
    pub fn new(dtype: DType, shape: Vec<Option<usize>>) -> Self {
        TensorType { dtype, shape }
    }

    /// A 0-d (scalar) type.
    pub fn scalar(dtype: DType) -> Self {
        TensorType {
            dtype,
            shape: Vec::new(),
        }
    }

    /// A type with `ndim` dimensions of unknown size.
    pub fn unknown(dtype: DType, ndim: usize) -> Self {
        TensorType {
            dtype,
            shape: vec![None; ndim],
        }
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Per-dimension broadcastable flags (static size 1).
    pub fn broadcastable(&self) -> Vec<bool> {
        self.shape.iter().map(|d| *d == Some(1)).collect()
    }

    /// True when every dimension is statically 1 (a 0-d type included): the
    /// type has exactly one element.
    pub fn has_one_element(&self) -> bool {
        self.shape.iter().all(|d| *d == Some(1))
    }

    /// True when dimension `i` is statically 1.
    pub fn is_broadcastable(&self, i: usize) -> bool {
        self.shape[i] == Some(1)
    }

    /// The same shape with another dtype.
    pub fn with_dtype(&self, dtype: DType) -> Self {
        TensorType {
            dtype,
            shape: self.shape.clone(),
        }
    }

    /// Number of elements when every dimension is known.
    pub fn static_size(&self) -> Option<usize> {
        self.shape
            .iter()
            .try_fold(1usize, |acc, d| d.and_then(|d| acc.checked_mul(d)))
    }

    /// Whether a variable of type `new` may replace one of this type: same
    /// dtype and ndim, and no dimension whose known sizes disagree. A
    /// broadcastable dimension must stay broadcastable, since the graph above
    /// relied on it to broadcast.
    pub fn accepts_replacement(&self, new: &TensorType) -> bool {
        self.dtype == new.dtype
            && self.ndim() == new.ndim()
            && self
                .shape
                .iter()
                .zip(&new.shape)
                .all(|(old, new)| match (old, new) {
                    (Some(a), Some(b)) => a == b,
                    (Some(1), None) => false,
                    _ => true,
                })
    }

    /// The static shape written as numpy would (`(None, 3)`), used in messages.
    pub fn shape_str(&self) -> String {
        let dims: Vec<String> = self
            .shape
            .iter()
            .map(|d| d.map_or_else(|| "?".to_string(), |n| n.to_string()))
            .collect();
        if dims.len() == 1 {
            format!("({},)", dims[0])
        } else {
            format!("({})", dims.join(", "))
        }
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, self.shape_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DType::*;

    #[test]
    fn integer_ranges_are_the_rust_types_ranges() {
        assert_eq!(DType::U8.int_range(), Some((0, 255)));
        assert_eq!(DType::I8.int_range(), Some((-128, 127)));
        assert_eq!(
            DType::I16.int_range(),
            Some((i16::MIN as i128, i16::MAX as i128))
        );
        assert_eq!(DType::U32.int_range(), Some((0, u32::MAX as i128)));
        assert_eq!(
            DType::I64.int_range(),
            Some((i64::MIN as i128, i64::MAX as i128))
        );
        assert_eq!(DType::U64.int_range(), Some((0, u64::MAX as i128)));
        assert_eq!(DType::Bool.int_range(), None);
        assert_eq!(DType::F64.int_range(), None);
    }

    #[test]
    fn upcast_follows_numpy() {
        assert_eq!(DType::upcast(F32, F64), F64);
        assert_eq!(DType::upcast(I64, F32), F64);
        assert_eq!(DType::upcast(I16, F32), F32);
        assert_eq!(DType::upcast(I32, I64), I64);
        assert_eq!(DType::upcast(U8, I8), I16);
        assert_eq!(DType::upcast(Bool, I8), I8);
        assert_eq!(DType::upcast(Bool, Bool), Bool);
        assert_eq!(DType::upcast(U8, I32), I32);
    }

    #[test]
    fn float_upgrade_and_weak_scalars() {
        assert_eq!(I64.upgrade_to_float(), F64);
        assert_eq!(I8.upgrade_to_float(), F32);
        assert_eq!(F32.upgrade_to_float(), F32);
        assert_eq!(DType::weak_scalar(F32, true), F32);
        assert_eq!(DType::weak_scalar(I32, false), I32);
        assert_eq!(DType::weak_scalar(I32, true), F64);
        assert_eq!(DType::weak_scalar(Bool, false), I64);
    }

    #[test]
    fn replacement_compatibility() {
        let v = TensorType::new(F64, vec![None]);
        let five = TensorType::new(F64, vec![Some(5)]);
        let one = TensorType::new(F64, vec![Some(1)]);
        assert!(v.accepts_replacement(&five));
        assert!(five.accepts_replacement(&v));
        assert!(!one.accepts_replacement(&v));
        assert!(!v.accepts_replacement(&TensorType::new(F32, vec![None])));
        assert!(!five.accepts_replacement(&TensorType::new(F64, vec![Some(4)])));
    }

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::parse(d.name()).unwrap(), d);
        }
        assert!(DType::parse("f16")
            .unwrap_err()
            .to_string()
            .contains("unknown dtype 'f16'"));
        assert_eq!(
            TensorType::new(F64, vec![None, Some(3)]).to_string(),
            "f64(?, 3)"
        );
        assert_eq!(TensorType::new(F64, vec![Some(2)]).to_string(), "f64(2,)");
    }
}
