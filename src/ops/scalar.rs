//! Scalar operations: the element-wise vocabulary shared by `Elemwise`,
//! `Composite`, the rewrite library and the code generator.
//!
//! A [`ScalarOp`] knows its arity, its display name (`add`, `true_div`, ... as
//! in the seed documents), its algebraic properties (commutative, associative,
//! identity element), its output dtype for given input dtypes, and its
//! reference semantics in three computation domains: `f64` for any op that
//! touches a float (or mixes `u64` with a signed integer, whose upcast is
//! `f64`), `u64` (wrapping, unsigned comparisons, division, shifts) for
//! integer ops whose inputs upcast to `u64`, and `i64` (wrapping, numpy floor
//! semantics, no trap on division by zero) for the other integer and boolean
//! ops. Narrower unsigned values are exact in `i64`, where they compute as
//! numpy does once the result wraps to their width. The JIT reproduces these
//! semantics.
//!
//! Dtype rules (see `types::dtype` for promotion), numpy's: arithmetic ops
//! give the upcast of their inputs; on all-`bool` inputs `add` and `mul` are
//! logical or / and (`bool`), `abs` is the identity, `int_div`, `mod`, `pow`
//! and `sqr` give `i8`, and `sub`, `neg` and `sign` are type errors; `true_div`
//! of integers gives `f64`; `floor`, `ceil` and `round` of integers keep the
//! dtype (they are exact); other float-valued functions (`exp`, `log`, `sqrt`,
//! `sigmoid`, ...) of integers give [`DType::upgrade_to_float`];
//! comparisons and `invert` of `bool` give `bool`; `switch` gives the upcast of
//! its two branches; `second(a, b)` gives `b`'s dtype; `cast{d}` gives `d`.

use std::fmt;

use crate::error::{Error, Result};
use crate::types::DType;

/// An element-wise scalar operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)] // each variant is named after the function it computes
pub enum ScalarOp {
    // Arithmetic.
    Add,
    Sub,
    Mul,
    TrueDiv,
    IntDiv,
    Mod,
    Pow,
    Neg,
    Reciprocal,
    Abs,
    Sign,
    Sqr,
    Maximum,
    Minimum,
    Clip,
    // Exponentials and logarithms.
    Exp,
    Exp2,
    Expm1,
    Log,
    Log2,
    Log10,
    Log1p,
    Sqrt,
    Sigmoid,
    Softplus,
    Log1mexp,
    // Trigonometric and hyperbolic.
    Sin,
    Cos,
    Tan,
    ArcSin,
    ArcCos,
    ArcTan,
    Sinh,
    Cosh,
    Tanh,
    ArcSinh,
    ArcCosh,
    ArcTanh,
    // Special functions and rounding.
    Erf,
    Erfc,
    Floor,
    Ceil,
    Round,
    Trunc,
    // Two-argument float functions (C99 / numpy).
    ArcTan2,
    Hypot,
    CopySign,
    Fmod,
    /// Binary cross-entropy of a logit `a` against a target `b`,
    /// `b·softplus(-a) + (1-b)·softplus(a)`, computed as
    /// `log1p(exp(-|a|)) + ((1-b)·max(a, 0) + b·max(-a, 0))` (one exp and
    /// one log1p, no cancellation for `b` in [0, 1]); stabilize's
    /// `local_sigmoid_binary_crossentropy` forms it from the log-sigmoid
    /// expression.
    SigmoidBinaryCrossentropy,
    // Classification (bool results).
    IsNan,
    IsInf,
    IsFinite,
    // Comparisons.
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Neq,
    // Logical / bitwise.
    And,
    Or,
    Xor,
    Invert,
    LeftShift,
    RightShift,
    // Structural.
    Switch,
    Second,
    Identity,
    Cast(DType),
}

/// How many inputs a scalar op takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// Exactly this many.
    Fixed(usize),
    /// At least one (variadic associative ops such as `add` and `mul`).
    Variadic,
}

impl ScalarOp {
    /// Every scalar op (with `cast` to each dtype), for exhaustive tests and parsing.
    pub fn all() -> Vec<ScalarOp> {
        use ScalarOp::*;
        let mut v = vec![
            Add, Sub, Mul, TrueDiv, IntDiv, Mod, Pow, Neg, Reciprocal, Abs, Sign, Sqr, Maximum,
            Minimum, Clip, Exp, Exp2, Expm1, Log, Log2, Log10, Log1p, Sqrt, Sigmoid, Softplus,
            Log1mexp, Sin, Cos, Tan, ArcSin, ArcCos, ArcTan, Sinh, Cosh, Tanh, ArcSinh, ArcCosh,
            ArcTanh, Erf, Erfc, Floor, Ceil, Round, Trunc, ArcTan2, Hypot, CopySign, Fmod, IsNan,
            IsInf, IsFinite, Lt, Le, Gt, Ge, Eq, Neq, And, Or, Xor, Invert, LeftShift, RightShift,
            Switch, Second, Identity,
        ];
        v.push(SigmoidBinaryCrossentropy);
        v.extend(DType::ALL.iter().map(|&d| Cast(d)));
        v
    }

    /// The display name used by printers and patterns (`add`, `true_div`, `cast{f32}`).
    pub fn name(self) -> String {
        self.to_string()
    }

    /// The display name without its parameter (`cast` for every `Cast`).
    fn base_name(self) -> &'static str {
        use ScalarOp::*;
        match self {
            Add => "add",
            Sub => "sub",
            Mul => "mul",
            TrueDiv => "true_div",
            IntDiv => "int_div",
            Mod => "mod",
            Pow => "pow",
            Neg => "neg",
            Reciprocal => "reciprocal",
            Abs => "abs",
            Sign => "sign",
            Sqr => "sqr",
            Maximum => "maximum",
            Minimum => "minimum",
            Clip => "clip",
            Exp => "exp",
            Exp2 => "exp2",
            Expm1 => "expm1",
            Log => "log",
            Log2 => "log2",
            Log10 => "log10",
            Log1p => "log1p",
            Sqrt => "sqrt",
            Sigmoid => "sigmoid",
            Softplus => "softplus",
            Log1mexp => "log1mexp",
            Sin => "sin",
            Cos => "cos",
            Tan => "tan",
            ArcSin => "arcsin",
            ArcCos => "arccos",
            ArcTan => "arctan",
            Sinh => "sinh",
            Cosh => "cosh",
            Tanh => "tanh",
            ArcSinh => "arcsinh",
            ArcCosh => "arccosh",
            ArcTanh => "arctanh",
            Erf => "erf",
            Erfc => "erfc",
            Floor => "floor",
            Ceil => "ceil",
            Round => "round",
            Trunc => "trunc",
            ArcTan2 => "arctan2",
            Hypot => "hypot",
            SigmoidBinaryCrossentropy => "sigmoid_binary_crossentropy",
            CopySign => "copysign",
            Fmod => "fmod",
            IsNan => "isnan",
            IsInf => "isinf",
            IsFinite => "isfinite",
            Lt => "lt",
            Le => "le",
            Gt => "gt",
            Ge => "ge",
            Eq => "eq",
            Neq => "neq",
            And => "and",
            Or => "or",
            Xor => "xor",
            Invert => "invert",
            LeftShift => "left_shift",
            RightShift => "right_shift",
            Switch => "switch",
            Second => "second",
            Identity => "identity",
            Cast(_) => "cast",
        }
    }

    /// The op with this display name, if any.
    pub fn from_name(name: &str) -> Option<ScalarOp> {
        ScalarOp::all().into_iter().find(|op| op.name() == name)
    }

    /// Number of inputs.
    pub fn arity(self) -> Arity {
        use ScalarOp::*;
        match self {
            Add | Mul => Arity::Variadic,
            Sub | TrueDiv | IntDiv | Mod | Pow | Maximum | Minimum | Lt | Le | Gt | Ge | Eq
            | Neq | And | Or | Xor | Second | ArcTan2 | Hypot | CopySign | Fmod | LeftShift
            | RightShift => Arity::Fixed(2),
            SigmoidBinaryCrossentropy => Arity::Fixed(2),
            Clip | Switch => Arity::Fixed(3),
            _ => Arity::Fixed(1),
        }
    }

    /// True when the order of the inputs does not matter.
    pub fn is_commutative(self) -> bool {
        use ScalarOp::*;
        matches!(
            self,
            Add | Mul | Maximum | Minimum | Eq | Neq | And | Or | Xor | Hypot
        )
    }

    /// True when nested applications can be flattened (`add(add(a, b), c) = add(a, b, c)`).
    pub fn is_associative(self) -> bool {
        use ScalarOp::*;
        matches!(self, Add | Mul | Maximum | Minimum | And | Or | Xor)
    }

    /// The identity element, as an `f64`, for ops that have one
    /// (`add`: 0, `mul`: 1, `maximum`: -inf, `minimum`: +inf, `and`: 1, `or`/`xor`: 0).
    pub fn identity(self) -> Option<f64> {
        use ScalarOp::*;
        match self {
            Add | Or | Xor => Some(0.0),
            Mul | And => Some(1.0),
            Maximum => Some(f64::NEG_INFINITY),
            Minimum => Some(f64::INFINITY),
            _ => None,
        }
    }

    /// True for ops that compute an `f64`-valued function even of integers.
    pub fn is_float_function(self) -> bool {
        use ScalarOp::*;
        matches!(
            self,
            Reciprocal
                | Exp
                | Exp2
                | Expm1
                | Log
                | Log2
                | Log10
                | Log1p
                | Sqrt
                | Sigmoid
                | Softplus
                | Log1mexp
                | Sin
                | Cos
                | Tan
                | ArcSin
                | ArcCos
                | ArcTan
                | Sinh
                | Cosh
                | Tanh
                | ArcSinh
                | ArcCosh
                | ArcTanh
                | Erf
                | Erfc
                | Floor
                | Ceil
                | Round
                | ArcTan2
                | Hypot
                | CopySign
                | SigmoidBinaryCrossentropy
        )
    }

    /// True for comparisons (output `bool`).
    pub fn is_comparison(self) -> bool {
        use ScalarOp::*;
        matches!(self, Lt | Le | Gt | Ge | Eq | Neq)
    }

    /// True for ops whose result is exact (correctly rounded) in IEEE arithmetic,
    /// so that the JIT must match the reference bit for bit.
    pub fn is_exact(self) -> bool {
        !self.is_float_function()
            || matches!(
                self,
                ScalarOp::Sqrt
                    | ScalarOp::Floor
                    | ScalarOp::Ceil
                    | ScalarOp::Round
                    | ScalarOp::CopySign
            )
    }

    /// Checks the arity and computes the output dtype for the given input dtypes.
    pub fn output_dtype(self, inputs: &[DType]) -> Result<DType> {
        use ScalarOp::*;
        let err = |msg: String| Error::ty(self.name(), msg);
        match self.arity() {
            Arity::Fixed(n) if inputs.len() != n => {
                return Err(err(format!("expects {n} input(s), got {}", inputs.len())))
            }
            Arity::Variadic if inputs.is_empty() => {
                return Err(err("expects at least one input".into()))
            }
            _ => {}
        }
        let up = DType::upcast_all(inputs.iter().copied()).expect("non-empty inputs");
        Ok(match self {
            // numpy: `+` and `*` of booleans are logical or / and; `abs` is
            // the identity; `-`, unary `-` and `sign` are errors.
            Add | Mul | Abs => up,
            Sub | Neg | Sign if up == DType::Bool => {
                return Err(err(format!(
                    "is not defined for bool inputs, as in numpy (use `^` or `~`), got {}",
                    dtype_list(inputs)
                )))
            }
            Sub | Neg | Sign => up,
            // numpy computes these on booleans in int8.
            IntDiv | Mod | Fmod | Pow | Sqr if up == DType::Bool => DType::I8,
            LeftShift | RightShift if up.is_float() => {
                return Err(err(format!(
                    "is defined for bool and integer inputs only, got {}",
                    dtype_list(inputs)
                )))
            }
            LeftShift | RightShift if up == DType::Bool => DType::I8,
            IntDiv | Mod | Fmod | Pow | Sqr | LeftShift | RightShift => up,
            // Rounding an integer is exact: numpy keeps its dtype.
            Floor | Ceil | Round if up.is_int() => up,
            // numpy's trunc keeps every non-float dtype, bool included.
            Trunc => up,
            IsNan | IsInf | IsFinite => DType::Bool,
            Maximum | Minimum | Clip | Identity => up,
            TrueDiv => {
                if up.is_float() {
                    up
                } else {
                    DType::F64
                }
            }
            op if op.is_float_function() => up.upgrade_to_float(),
            Lt | Le | Gt | Ge | Eq | Neq => DType::Bool,
            And | Or | Xor | Invert => {
                if up.is_float() {
                    return Err(err(format!(
                        "is defined for bool and integer inputs only, got {}",
                        dtype_list(inputs)
                    )));
                }
                up
            }
            Switch => DType::upcast(inputs[1], inputs[2]),
            Second => inputs[1],
            Cast(d) => d,
            _ => unreachable!("every op is covered above"),
        })
    }

    /// Whether `self` with these input dtypes and this output dtype is evaluated
    /// in the float domain (`f64`) rather than the integer domain (`i64`).
    /// In the integer domain a float input can only be a `switch` condition
    /// (or the ignored first input of `second`); it enters as its truth value
    /// (nonzero, NaN included, is 1).
    pub fn computes_in_float(self, inputs: &[DType], output: DType) -> bool {
        match self {
            ScalarOp::Switch => inputs[1].is_float() || inputs[2].is_float() || output.is_float(),
            ScalarOp::Second => inputs[1].is_float(),
            ScalarOp::Cast(_) => inputs[0].is_float(),
            // `u64` with a signed integer upcasts to `f64`: comparisons of them
            // compare in `f64` too.
            _ => {
                output.is_float()
                    || DType::upcast_all(inputs.iter().copied()).is_some_and(DType::is_float)
            }
        }
    }

    /// Whether `self` with these input dtypes and this output dtype is
    /// evaluated in the `u64` integer domain ([`ScalarOp::eval_u64`]): not in
    /// the float domain, and its value inputs upcast to `u64`.
    pub fn computes_in_u64(self, inputs: &[DType], output: DType) -> bool {
        if self.computes_in_float(inputs, output) {
            return false;
        }
        let values = match self {
            ScalarOp::Switch => &inputs[1..],
            ScalarOp::Second => &inputs[1..],
            _ => inputs,
        };
        DType::upcast_all(values.iter().copied()) == Some(DType::U64)
    }

    /// Reference semantics in the float domain. `args.len()` is the op's arity.
    pub fn eval_f64(self, args: &[f64]) -> f64 {
        use ScalarOp::*;
        let a = args[0];
        let b = || args[1];
        let bool_f = |c: bool| if c { 1.0 } else { 0.0 };
        match self {
            Add => args.iter().sum(),
            Mul => args.iter().product(),
            Sub => a - b(),
            TrueDiv => a / b(),
            IntDiv => float_floor_div(a, b()),
            Mod => float_mod(a, b()),
            Pow => a.powf(b()),
            Neg => -a,
            Reciprocal => 1.0 / a,
            Abs => a.abs(),
            Sign => {
                if a.is_nan() {
                    a
                } else if a > 0.0 {
                    1.0
                } else if a < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
            Sqr => a * a,
            Maximum => nan_max(a, b()),
            Minimum => nan_min(a, b()),
            Clip => nan_min(nan_max(a, args[1]), args[2]),
            Exp => a.exp(),
            Exp2 => a.exp2(),
            Expm1 => a.exp_m1(),
            Log => a.ln(),
            Log2 => a.log2(),
            Log10 => a.log10(),
            Log1p => a.ln_1p(),
            Sqrt => a.sqrt(),
            Sigmoid => sigmoid(a),
            Softplus => softplus(a),
            Log1mexp => log1mexp(a),
            Sin => a.sin(),
            Cos => a.cos(),
            Tan => a.tan(),
            ArcSin => a.asin(),
            ArcCos => a.acos(),
            ArcTan => a.atan(),
            Sinh => a.sinh(),
            Cosh => a.cosh(),
            Tanh => a.tanh(),
            ArcSinh => a.asinh(),
            ArcCosh => a.acosh(),
            // std's atanh, 0.5 * log1p(2x / (1 - x)), rounds 1 - x for
            // negative x, which log1p near -1 amplifies (5 ULP at
            // x = -0.99099); by odd symmetry 1 - |x| is exact for |x| >= 0.5.
            ArcTanh => {
                let t = a.abs();
                (0.5 * ((2.0 * t) / (1.0 - t)).ln_1p()).copysign(a)
            }
            Erf => libm::erf(a),
            Erfc => libm::erfc(a),
            Floor => a.floor(),
            Ceil => a.ceil(),
            Round => a.round_ties_even(),
            Trunc => a.trunc(),
            ArcTan2 => a.atan2(b()),
            Hypot => a.hypot(b()),
            SigmoidBinaryCrossentropy => sigmoid_binary_crossentropy(a, b()),
            CopySign => a.copysign(b()),
            // Rust's `%` on floats is C's `fmod` (exact, sign of the dividend).
            Fmod => a % b(),
            IsNan => bool_f(a.is_nan()),
            IsInf => bool_f(a.is_infinite()),
            IsFinite => bool_f(a.is_finite()),
            // Shifts are integer-only; a float argument here can only come
            // from an integer, so shift its integer value.
            LeftShift => left_shift(a as i64, b() as i64) as f64,
            RightShift => right_shift(a as i64, b() as i64) as f64,
            Lt => bool_f(a < b()),
            Le => bool_f(a <= b()),
            Gt => bool_f(a > b()),
            Ge => bool_f(a >= b()),
            Eq => bool_f(a == b()),
            Neq => bool_f(a != b()),
            And => bool_f(a != 0.0 && b() != 0.0),
            Or => bool_f(a != 0.0 || b() != 0.0),
            Xor => bool_f((a != 0.0) != (b() != 0.0)),
            Invert => bool_f(a == 0.0),
            Switch => {
                if a != 0.0 {
                    args[1]
                } else {
                    args[2]
                }
            }
            Second => b(),
            Identity | Cast(_) => a,
        }
    }

    /// Reference semantics in the integer domain (wrapping arithmetic, numpy
    /// floor division and modulo, `x // 0 == 0` and `x % 0 == 0`).
    /// `out` is the output dtype (for `bool` results of logical ops).
    pub fn eval_i64(self, args: &[i64], out: DType) -> i64 {
        use ScalarOp::*;
        let a = args[0];
        let b = || args[1];
        let bi = |c: bool| c as i64;
        match self {
            Add => args.iter().fold(0i64, |s, &x| s.wrapping_add(x)),
            Mul => args.iter().fold(1i64, |s, &x| s.wrapping_mul(x)),
            Sub => a.wrapping_sub(b()),
            IntDiv => int_floor_div(a, b()),
            Mod => int_mod(a, b()),
            Pow => int_pow(a, b()),
            Neg => a.wrapping_neg(),
            Abs => a.wrapping_abs(),
            Sign => a.signum(),
            Sqr => a.wrapping_mul(a),
            Maximum => a.max(b()),
            Minimum => a.min(b()),
            Clip => a.max(args[1]).min(args[2]),
            Lt => bi(a < b()),
            Le => bi(a <= b()),
            Gt => bi(a > b()),
            Ge => bi(a >= b()),
            Eq => bi(a == b()),
            Neq => bi(a != b()),
            And if out == DType::Bool => bi(a != 0 && b() != 0),
            Or if out == DType::Bool => bi(a != 0 || b() != 0),
            Xor if out == DType::Bool => bi((a != 0) != (b() != 0)),
            And => a & b(),
            Or => a | b(),
            Xor => a ^ b(),
            Invert if out == DType::Bool => bi(a == 0),
            Invert => !a,
            Floor | Ceil | Round | Trunc => a,
            Fmod => int_fmod(a, b()),
            LeftShift => left_shift(a, b()),
            RightShift => right_shift(a, b()),
            // Integers are never NaN or infinite.
            IsNan | IsInf => 0,
            IsFinite => 1,
            Switch => {
                if a != 0 {
                    args[1]
                } else {
                    args[2]
                }
            }
            Second => b(),
            Identity | Cast(_) => a,
            // Float-valued ops never run in the integer domain (their output is a float).
            op => op.eval_f64(&args.iter().map(|&x| x as f64).collect::<Vec<_>>()) as i64,
        }
    }
}

impl ScalarOp {
    /// Reference semantics in the `u64` domain (see
    /// [`ScalarOp::computes_in_u64`]): wrapping arithmetic, unsigned
    /// comparisons, `min`/`max`, division and modulo (`x // 0 == x % 0 == 0`
    /// as for signed integers), logical right shifts (a count of 64 or more
    /// gives 0), `abs` the identity and `sign` 0 or 1. Ops whose result does
    /// not depend on the reading (`+`, `*`, bitwise, logical, `switch`) share
    /// [`ScalarOp::eval_i64`] on the bit patterns.
    pub fn eval_u64(self, args: &[u64], out: DType) -> u64 {
        use ScalarOp::*;
        let a = args[0];
        let b = || args[1];
        let bu = |c: bool| c as u64;
        match self {
            IntDiv => a.checked_div(b()).unwrap_or(0),
            Mod | Fmod => a.checked_rem(b()).unwrap_or(0),
            Pow => uint_pow(a, b()),
            Abs | Floor | Ceil | Round | Trunc => a,
            Sign => bu(a != 0),
            Maximum => a.max(b()),
            Minimum => a.min(b()),
            Clip => a.max(args[1]).min(args[2]),
            Lt => bu(a < b()),
            Le => bu(a <= b()),
            Gt => bu(a > b()),
            Ge => bu(a >= b()),
            LeftShift => a
                .checked_shl(u32::try_from(b()).unwrap_or(u32::MAX))
                .unwrap_or(0),
            RightShift => a
                .checked_shr(u32::try_from(b()).unwrap_or(u32::MAX))
                .unwrap_or(0),
            op if op.is_float_function() => {
                op.eval_f64(&args.iter().map(|&x| x as f64).collect::<Vec<_>>()) as u64
            }
            op => op.eval_i64(&args.iter().map(|&x| x as i64).collect::<Vec<_>>(), out) as u64,
        }
    }
}

/// Integer power by squaring in `u64`, wrapping (every exponent is non-negative).
pub fn uint_pow(a: u64, b: u64) -> u64 {
    let (mut base, mut e, mut acc) = (a, b, 1u64);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        e >>= 1;
    }
    acc
}

impl fmt::Display for ScalarOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ScalarOp::Cast(d) => write!(f, "cast{{{d}}}"),
            op => f.write_str(op.base_name()),
        }
    }
}

fn dtype_list(d: &[DType]) -> String {
    d.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
}

/// numpy `maximum`: NaN in either input gives NaN.
pub fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a >= b {
        a
    } else {
        b
    }
}

/// numpy `minimum`: NaN in either input gives NaN.
pub fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a <= b {
        a
    } else {
        b
    }
}

/// numpy float `mod` (`npy_divmod`): the result has the sign of the divisor,
/// a zero result included; `x % 0` and `inf % x` are NaN.
pub fn float_mod(a: f64, b: f64) -> f64 {
    let r = a % b;
    if b == 0.0 {
        r
    } else if r == 0.0 {
        0.0f64.copysign(b)
    } else if (r < 0.0) != (b < 0.0) {
        r + b
    } else {
        r
    }
}

/// numpy float floor division (`npy_floor_divide`): the quotient of divmod,
/// computed from `fmod` so that `1.0 // 0.1 == 9.0` and `-5.0 // inf == -1.0`
/// as in numpy and Python; `x // 0` is `x / 0` (±inf or NaN), `inf // x` is NaN.
pub fn float_floor_div(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return a / b;
    }
    let m = a % b;
    let mut div = (a - m) / b;
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        div -= 1.0;
    }
    if div != 0.0 {
        let f = div.floor();
        if div - f > 0.5 {
            f + 1.0
        } else {
            f
        }
    } else {
        0.0f64.copysign(a / b)
    }
}

/// numpy integer floor division; division by zero gives 0, `MIN // -1` wraps.
pub fn int_floor_div(a: i64, b: i64) -> i64 {
    if b == 0 {
        return 0;
    }
    let q = a.wrapping_div(b);
    if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

/// numpy integer modulo (sign of the divisor); modulo by zero gives 0.
pub fn int_mod(a: i64, b: i64) -> i64 {
    if b == 0 {
        return 0;
    }
    let r = a.wrapping_rem(b);
    if r != 0 && ((r < 0) != (b < 0)) {
        r + b
    } else {
        r
    }
}

/// C `fmod` on integers (numpy `fmod`): the truncating remainder, with the
/// sign of the dividend; `x fmod 0` is 0 (numpy's value, which it also warns
/// about) and `MIN fmod -1` is 0.
pub fn int_fmod(a: i64, b: i64) -> i64 {
    if b == 0 {
        0
    } else {
        a.wrapping_rem(b)
    }
}

/// numpy `left_shift` in the `i64` domain: a count outside `0..64` (a
/// negative count included, which numpy reads as a huge unsigned count)
/// shifts every bit out and gives 0. Narrower dtypes compute here and wrap
/// to their width, which gives numpy's 0 for any count at least their width.
pub fn left_shift(a: i64, count: i64) -> i64 {
    if (0..64).contains(&count) {
        a << count
    } else {
        0
    }
}

/// numpy `right_shift` in the `i64` domain (arithmetic: the sign fills in):
/// a count outside `0..64` (a negative count included) gives 0 for `a >= 0`
/// and -1 for `a < 0`, as numpy does.
pub fn right_shift(a: i64, count: i64) -> i64 {
    if (0..64).contains(&count) {
        a >> count
    } else {
        a >> 63
    }
}

/// Integer power by squaring with wrapping; a negative exponent gives
/// `1 / a**-b` truncated toward zero (1 for a = 1, ±1 for a = -1, else 0; 0 for a = 0).
pub fn int_pow(a: i64, b: i64) -> i64 {
    if b < 0 {
        return match a {
            1 => 1,
            -1 => {
                if b % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    // Wrapping products are the same bits in two's complement.
    uint_pow(a as u64, b as u64) as i64
}

/// The logistic function, accurate for large |x|.
pub fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// `log(1 + exp(x))` without overflow or cancellation.
pub fn softplus(x: f64) -> f64 {
    if x > 0.0 {
        x + (-x).exp().ln_1p()
    } else {
        x.exp().ln_1p()
    }
}

/// Binary cross-entropy of the logit `z` against the target `t`,
/// `t·softplus(-z) + (1-t)·softplus(z)`, as
/// `log1p(exp(-|z|)) + ((1-t)·max(z, 0) + t·max(-z, 0))`: no cancellation
/// for `t` in [0, 1]; NaN for a NaN argument, and for `0·inf` (`t = 1` at
/// `z = +inf`, `t = 0` at `z = -inf`) as in the expression it replaces.
pub fn sigmoid_binary_crossentropy(z: f64, t: f64) -> f64 {
    let l = (-z.abs()).exp().ln_1p();
    let pos = if z > 0.0 { z } else { 0.0 };
    let neg = if z < 0.0 { -z } else { 0.0 };
    l + ((1.0 - t) * pos + t * neg)
}

/// `log(1 - exp(x))` for `x <= 0`, accurate near 0 and for very negative x; NaN for x > 0.
pub fn log1mexp(x: f64) -> f64 {
    if x > 0.0 {
        f64::NAN
    } else if x > -std::f64::consts::LN_2 {
        (-x.exp_m1()).ln()
    } else {
        (-x.exp()).ln_1p()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DType::*;
    use ScalarOp::*;

    #[test]
    fn names_round_trip() {
        for op in ScalarOp::all() {
            assert_eq!(ScalarOp::from_name(&op.name()), Some(op), "{op}");
        }
        assert_eq!(TrueDiv.name(), "true_div");
        assert_eq!(Cast(F32).name(), "cast{f32}");
    }

    #[test]
    fn arctanh_is_odd_and_exact_near_minus_one() {
        // mpmath (prec 200): atanh(-0.9909879598562803) = -2.69891238986359604...,
        // which rounds to -2.698912389863596 (std's atanh gives ...594, 5 ULP off).
        assert_eq!(ArcTanh.eval_f64(&[-0.9909879598562803]), -2.698912389863596);
        for x in [0.3, 0.5, 0.75, 0.99, 1e-300] {
            assert_eq!(ArcTanh.eval_f64(&[-x]), -ArcTanh.eval_f64(&[x]));
        }
        assert_eq!(ArcTanh.eval_f64(&[1.0]), f64::INFINITY);
        assert_eq!(ArcTanh.eval_f64(&[-1.0]), f64::NEG_INFINITY);
        assert!(ArcTanh.eval_f64(&[-0.0]).is_sign_negative());
        assert!(ArcTanh.eval_f64(&[1.5]).is_nan() && ArcTanh.eval_f64(&[f64::NAN]).is_nan());
    }

    #[test]
    fn output_dtypes() {
        assert_eq!(Add.output_dtype(&[F32, F64]).unwrap(), F64);
        assert_eq!(Add.output_dtype(&[I32, I32, I32]).unwrap(), I32);
        assert_eq!(Add.output_dtype(&[Bool, Bool]).unwrap(), Bool);
        assert!(Sub.output_dtype(&[Bool, Bool]).is_err());
        assert_eq!(Floor.output_dtype(&[I16]).unwrap(), I16);
        assert_eq!(TrueDiv.output_dtype(&[I64, I64]).unwrap(), F64);
        assert_eq!(TrueDiv.output_dtype(&[F32, I8]).unwrap(), F32);
        assert_eq!(Exp.output_dtype(&[I64]).unwrap(), F64);
        assert_eq!(Exp.output_dtype(&[I16]).unwrap(), F32);
        assert_eq!(Lt.output_dtype(&[F64, I64]).unwrap(), Bool);
        assert_eq!(Switch.output_dtype(&[Bool, I16, F32]).unwrap(), F32);
        assert_eq!(Switch.output_dtype(&[Bool, I32, F32]).unwrap(), F64);
        assert_eq!(Second.output_dtype(&[F64, I8]).unwrap(), I8);
        assert_eq!(Cast(I8).output_dtype(&[F64]).unwrap(), I8);
        assert_eq!(IsNan.output_dtype(&[F32]).unwrap(), Bool);
        assert_eq!(IsFinite.output_dtype(&[I64]).unwrap(), Bool);
        assert_eq!(Trunc.output_dtype(&[I8]).unwrap(), I8);
        assert_eq!(Trunc.output_dtype(&[F32]).unwrap(), F32);
        assert_eq!(ArcTan2.output_dtype(&[I16, I16]).unwrap(), F32);
        assert_eq!(CopySign.output_dtype(&[I64, F32]).unwrap(), F64);
        assert_eq!(Fmod.output_dtype(&[F32, F32]).unwrap(), F32);
        assert_eq!(Fmod.output_dtype(&[Bool, Bool]).unwrap(), I8);
        assert_eq!(LeftShift.output_dtype(&[U8, I8]).unwrap(), I16);
        assert_eq!(RightShift.output_dtype(&[Bool, Bool]).unwrap(), I8);
        let e = LeftShift.output_dtype(&[F64, I64]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "type error in left_shift: is defined for bool and integer inputs only, got f64, i64"
        );
    }

    #[test]
    fn shifts_and_fmod_never_overflow() {
        assert_eq!(left_shift(1, 63), i64::MIN);
        assert_eq!(left_shift(1, 64), 0);
        assert_eq!(left_shift(1, -1), 0);
        assert_eq!(right_shift(-8, 2), -2);
        assert_eq!(right_shift(-8, 64), -1);
        assert_eq!(right_shift(8, i64::MIN), 0);
        assert_eq!(int_fmod(-7, 2), -1);
        assert_eq!(int_fmod(7, 0), 0);
        assert_eq!(int_fmod(i64::MIN, -1), 0);
        assert!(Fmod.eval_f64(&[1.0, 0.0]).is_nan());
        assert_eq!(Fmod.eval_f64(&[-0.0, 3.0]).to_bits(), (-0.0f64).to_bits());
        assert_eq!(IsFinite.eval_i64(&[5], Bool), 1);
        assert_eq!(IsNan.eval_i64(&[5], Bool), 0);
    }

    #[test]
    fn rejected_inputs_name_the_op() {
        let e = Sub.output_dtype(&[F64]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "type error in sub: expects 2 input(s), got 1"
        );
        let e = And.output_dtype(&[F64, Bool]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "type error in and: is defined for bool and integer inputs only, got f64, bool"
        );
        assert!(Add.output_dtype(&[]).is_err());
    }

    #[test]
    fn integer_semantics_follow_numpy() {
        assert_eq!(IntDiv.eval_i64(&[-7, 2], I64), -4);
        assert_eq!(Mod.eval_i64(&[-7, 2], I64), 1);
        assert_eq!(Mod.eval_i64(&[7, -2], I64), -1);
        assert_eq!(IntDiv.eval_i64(&[7, 0], I64), 0);
        assert_eq!(Mod.eval_i64(&[7, 0], I64), 0);
        assert_eq!(IntDiv.eval_i64(&[i64::MIN, -1], I64), i64::MIN);
        assert_eq!(Pow.eval_i64(&[3, 4], I64), 81);
        assert_eq!(Pow.eval_i64(&[2, -1], I64), 0);
        assert_eq!(Invert.eval_i64(&[0], Bool), 1);
        assert_eq!(Invert.eval_i64(&[5], I64), -6);
    }

    #[test]
    fn float_semantics_follow_numpy() {
        assert_eq!(Mod.eval_f64(&[-7.5, 2.0]), 0.5);
        assert_eq!(IntDiv.eval_f64(&[-7.0, 2.0]), -4.0);
        assert!(Maximum.eval_f64(&[f64::NAN, 1.0]).is_nan());
        assert!(Minimum.eval_f64(&[1.0, f64::NAN]).is_nan());
        assert_eq!(Round.eval_f64(&[2.5]), 2.0);
        assert_eq!(Round.eval_f64(&[-1.5]), -2.0);
        assert_eq!(Softplus.eval_f64(&[800.0]), 800.0);
        assert_eq!(Softplus.eval_f64(&[-800.0]), 0.0);
        assert_eq!(Sigmoid.eval_f64(&[-800.0]), 0.0);
        assert_eq!(Sigmoid.eval_f64(&[800.0]), 1.0);
        assert!((Log1mexp.eval_f64(&[-1e-20]) - (1e-20f64).ln()).abs() < 1e-12);
        assert!(Sign.eval_f64(&[f64::NAN]).is_nan());
        assert_eq!(Clip.eval_f64(&[5.0, 0.0, 1.0]), 1.0);
    }

    #[test]
    fn properties() {
        assert!(Add.is_commutative() && Add.is_associative());
        assert!(!Sub.is_commutative());
        assert_eq!(Mul.identity(), Some(1.0));
        assert_eq!(Maximum.identity(), Some(f64::NEG_INFINITY));
        assert_eq!(Sub.identity(), None);
    }
}
