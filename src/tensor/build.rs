//! Builder functions: constructors and one function per op, each returning
//! `Result<Tensor>` with type errors that name the op and the types.

use super::Tensor;
use crate::error::{Error, Result};
use crate::graph::{DType, TensorType, Value};
use crate::ops::{ArgOp, Op, ReduceOp, ScalarOp};

/// A 0-d input.
pub fn scalar(name: &str, dtype: DType) -> Tensor {
    Tensor::input(name, TensorType::scalar(dtype))
}

/// A 1-d input of unknown length.
pub fn vector(name: &str, dtype: DType) -> Tensor {
    Tensor::input(name, TensorType::unknown(dtype, 1))
}

/// A 2-d input of unknown shape.
pub fn matrix(name: &str, dtype: DType) -> Tensor {
    Tensor::input(name, TensorType::unknown(dtype, 2))
}

/// An input with a static shape (`None` = unknown size, `Some(1)` = broadcastable).
pub fn tensor(name: &str, dtype: DType, shape: &[Option<usize>]) -> Tensor {
    Tensor::input(name, TensorType::new(dtype, shape.to_vec()))
}

/// A constant from a value.
pub fn constant(value: impl Into<Value>) -> Tensor {
    Tensor::constant(value.into())
}

/// Applies a scalar op element-wise, aligning ndims numpy-style.
pub fn elemwise(op: ScalarOp, inputs: &[&Tensor]) -> Result<Tensor> {
    let ndim = inputs.iter().map(|t| t.ndim()).max().unwrap_or(0);
    let padded: Vec<Tensor> = inputs
        .iter()
        .map(|t| {
            if t.ndim() == ndim {
                Ok((*t).clone())
            } else {
                pad_left(t, ndim)
            }
        })
        .collect::<Result<_>>()?;
    let refs: Vec<&Tensor> = padded.iter().collect();
    Tensor::apply(Op::elemwise(op), &refs)
}

fn pad_left(t: &Tensor, ndim: usize) -> Result<Tensor> {
    let extra = ndim - t.ndim();
    if let Some(v) = t.constant_value() {
        // Constants are padded in place rather than through a DimShuffle node.
        let mut shape = vec![1usize; extra];
        shape.extend_from_slice(v.shape());
        let padded = crate::map_value!(v, a => a.clone().into_shape_with_order(ndarray::IxDyn(&shape)).expect("same size"));
        return Ok(Tensor::constant(padded));
    }
    let order: Vec<Option<usize>> = (0..extra)
        .map(|_| None)
        .chain((0..t.ndim()).map(Some))
        .collect();
    t.dimshuffle(&order)
}

/// A weak constant for a Rust number next to `like` (see `types::dtype`).
/// An integer value (`is_float == false`) goes through [`weak_int_constant`].
pub fn weak_constant(like: &Tensor, v: f64, is_float: bool) -> Result<Tensor> {
    weak_constant_next_to(like.dtype(), v, is_float)
}

/// A weak constant for a number next to tensors of dtype `like` (the upcast
/// of the tensors it is combined with), as [`weak_constant`].
pub fn weak_constant_next_to(like: DType, v: f64, is_float: bool) -> Result<Tensor> {
    if !is_float && v == v.trunc() && v.abs() < 9.2e18 {
        return weak_int_constant_next_to(like, v as i64);
    }
    Ok(Tensor::scalar_constant(
        DType::weak_scalar(like, is_float),
        v,
    ))
}

/// A weak constant for a Rust integer next to `like`: the tensor's dtype when
/// that dtype can hold the value (a float dtype always can), else `i64`, so
/// `x_i8 + 1000` is `i64` instead of saturating the constant to 127. The value
/// is stored exactly (no round trip through `f64`). A negative integer next
/// to a `u16`, `u32` or `u64` tensor is a type error, as numpy 2 raises
/// `OverflowError` for `np.uint32(5) + (-1)` rather than wrapping the Python
/// int; next to `u8` it keeps kiln's earlier rule (an `i64` constant).
pub fn weak_int_constant(like: &Tensor, v: i64) -> Result<Tensor> {
    weak_int_constant_next_to(like.dtype(), v)
}

/// [`weak_int_constant`] next to tensors of dtype `like` (an integer
/// literal of the expression language, exactly).
pub fn weak_int_constant_next_to(like: DType, v: i64) -> Result<Tensor> {
    let d = DType::weak_scalar(like, false);
    if d.is_float() {
        return Ok(Tensor::scalar_constant(d, v as f64));
    }
    if d.is_unsigned() && d != DType::U8 && v < 0 {
        return Err(Error::ty(
            "constant",
            format!(
                "the integer {v} is out of range for a {d} tensor (numpy 2 raises OverflowError \
                 here); write the unsigned value or cast one operand"
            ),
        ));
    }
    let c = Value::scalar_i64(d, v);
    Ok(if c.to_i64_array().iter().next() == Some(&v) {
        Tensor::constant(c)
    } else {
        Tensor::constant(Value::scalar_i64(DType::I64, v))
    })
}

macro_rules! binary_fns {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(a: &Tensor, b: &Tensor) -> Result<Tensor> {
                elemwise(ScalarOp::$op, &[a, b])
            }
        )*
    };
}

binary_fns! {
    /// `a + b`.
    add => Add;
    /// `a - b`.
    sub => Sub;
    /// `a * b`.
    mul => Mul;
    /// `a / b` (true division).
    true_div => TrueDiv;
    /// `a // b` (floor division).
    int_div => IntDiv;
    /// `a % b` (sign of the divisor).
    modulo => Mod;
    /// `a ** b`.
    pow => Pow;
    /// Element-wise maximum (NaN-propagating).
    maximum => Maximum;
    /// Element-wise minimum (NaN-propagating).
    minimum => Minimum;
    /// `a < b`.
    lt => Lt;
    /// `a <= b`.
    le => Le;
    /// `a > b`.
    gt => Gt;
    /// `a >= b`.
    ge => Ge;
    /// `a == b`.
    eq => Eq;
    /// `a != b`.
    neq => Neq;
    /// Logical (bool) or bitwise (int) and.
    and => And;
    /// Logical or bitwise or.
    or => Or;
    /// Logical or bitwise xor.
    xor => Xor;
    /// `a << b` on integers (numpy `left_shift`; a count outside `0..64` gives 0).
    left_shift => LeftShift;
    /// `a >> b` on integers, arithmetic (numpy `right_shift`; a count outside
    /// `0..64` gives 0 or -1).
    right_shift => RightShift;
    /// `atan2(a, b)`: the angle of the point `(b, a)`, in `[-pi, pi]`.
    arctan2 => ArcTan2;
    /// `sqrt(a² + b²)` without undue overflow or underflow.
    hypot => Hypot;
    /// Binary cross-entropy of the logit `a` against the target `b`:
    /// `b·softplus(-a) + (1-b)·softplus(a)`, i.e.
    /// `-(b·log(sigmoid(a)) + (1-b)·log(1 - sigmoid(a)))`.
    sigmoid_binary_crossentropy => SigmoidBinaryCrossentropy;
    /// `|a|` with the sign (bit) of `b`.
    copysign => CopySign;
    /// C `fmod`: the remainder with the sign of the dividend `a` (numpy `fmod`;
    /// integers: the truncating remainder, 0 for a zero divisor).
    fmod => Fmod;
    /// `b` broadcast to the shape of `a` (PyTensor's `second` / `fill`).
    second => Second;
}

/// `cond ? a : b` element-wise (numpy `where`).
pub fn switch(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    elemwise(ScalarOp::Switch, &[cond, a, b])
}

/// `x` clipped to `[lo, hi]`.
pub fn clip(x: &Tensor, lo: &Tensor, hi: &Tensor) -> Result<Tensor> {
    elemwise(ScalarOp::Clip, &[x, lo, hi])
}

/// numpy `dot` of 1-d / 2-d operands.
pub fn dot(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    Tensor::apply(Op::Dot, &[a, b])
}

/// `beta * z + alpha * dot(x, y)` as one `Gemm{no_inplace}` node (see
/// [`Op::Gemm`]: z, x, y of one float dtype, alpha and beta 0-d of it).
pub fn gemm(z: &Tensor, alpha: &Tensor, x: &Tensor, y: &Tensor, beta: &Tensor) -> Result<Tensor> {
    Tensor::apply(Op::Gemm { inplace: false }, &[z, alpha, x, y, beta])
}

/// Broadcasts `value` to `shape` (given as 0-d integer tensors).
pub fn alloc(value: &Tensor, shape: &[&Tensor]) -> Result<Tensor> {
    let mut ins = vec![value];
    ins.extend_from_slice(shape);
    Tensor::apply(Op::Alloc, &ins)
}

macro_rules! unary_methods {
    ($($name:ident => $op:ident,)*) => {
        impl Tensor {
            $(
                #[doc = concat!("Element-wise `", stringify!($name), "`.")]
                pub fn $name(&self) -> Tensor {
                    elemwise(ScalarOp::$op, &[self]).expect(concat!(stringify!($name), " accepts every dtype"))
                }
            )*
        }
    };
}

unary_methods! {
    neg => Neg, reciprocal => Reciprocal, abs => Abs, sign => Sign, sqr => Sqr, exp => Exp, exp2 => Exp2,
    expm1 => Expm1, log => Log, log2 => Log2, log10 => Log10, log1p => Log1p, sqrt => Sqrt,
    sigmoid => Sigmoid, softplus => Softplus, log1mexp => Log1mexp, sin => Sin, cos => Cos, tan => Tan,
    arcsin => ArcSin, arccos => ArcCos, arctan => ArcTan, sinh => Sinh, cosh => Cosh, tanh => Tanh,
    arcsinh => ArcSinh, arccosh => ArcCosh, arctanh => ArcTanh, erf => Erf, erfc => Erfc, floor => Floor,
    ceil => Ceil, round => Round, trunc => Trunc, isnan => IsNan, isinf => IsInf,
    isfinite => IsFinite, identity => Identity,
}

impl Tensor {
    /// Logical not (bool) or bitwise not (integers); an error for floats.
    pub fn invert(&self) -> Result<Tensor> {
        elemwise(ScalarOp::Invert, &[self])
    }

    /// Converts to another dtype (Rust `as` semantics).
    pub fn cast(&self, dtype: DType) -> Tensor {
        if dtype == self.dtype() {
            return self.clone();
        }
        elemwise(ScalarOp::Cast(dtype), &[self]).expect("cast accepts every dtype")
    }

    /// `self ** e` for a Rust exponent (a weak constant).
    ///
    /// # Panics
    /// Like the operators, on a type error: a negative integral exponent of
    /// an unsigned tensor (use `build::pow` with a typed constant instead).
    pub fn powf(&self, e: f64) -> Tensor {
        weak_constant(self, e, e.fract() != 0.0 || self.dtype().is_float())
            .and_then(|c| pow(self, &c))
            .unwrap_or_else(|err| panic!("{err}"))
    }

    /// Permutes / drops broadcastable / inserts (`None`) dimensions.
    pub fn dimshuffle(&self, new_order: &[Option<usize>]) -> Result<Tensor> {
        Tensor::apply(
            Op::DimShuffle {
                input_ndim: self.ndim(),
                new_order: new_order.to_vec(),
            },
            &[self],
        )
    }

    /// Inserts a broadcastable dimension at `axis` (negative counts from the end of the result).
    pub fn expand_dims(&self, axis: isize) -> Result<Tensor> {
        let nd = self.ndim() as isize + 1;
        let a = if axis < 0 { axis + nd } else { axis };
        if !(0..nd).contains(&a) {
            return Err(Error::ty(
                "expand_dims",
                format!("axis {axis} out of range for {}", self.ty()),
            ));
        }
        let mut order: Vec<Option<usize>> = (0..self.ndim()).map(Some).collect();
        order.insert(a as usize, None);
        self.dimshuffle(&order)
    }

    /// Transpose (reverses the dimensions).
    pub fn t(&self) -> Tensor {
        let order: Vec<Option<usize>> = (0..self.ndim()).rev().map(Some).collect();
        self.dimshuffle(&order)
            .expect("a permutation is always valid")
    }

    /// Reshapes to a static target shape (one entry may be -1).
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        let s = Tensor::constant(Value::I64(
            ndarray::ArrayD::from_shape_vec(vec![shape.len()], shape.to_vec()).expect("1-d"),
        ));
        Tensor::apply(Op::Reshape { ndim: shape.len() }, &[self, &s])
    }

    /// The shape as a 1-d `i64` tensor.
    pub fn shape(&self) -> Tensor {
        Tensor::apply(Op::Shape, &[self]).expect("Shape accepts every tensor")
    }

    /// One dimension of the shape as a 0-d `i64` tensor.
    pub fn shape_i(&self, i: usize) -> Result<Tensor> {
        Tensor::apply(Op::ShapeI(i), &[self])
    }

    /// A reduction over `axes` (negative axes count from the end; `None`: all axes),
    /// optionally keeping the reduced dimensions as broadcastable ones.
    pub fn reduce(&self, op: ReduceOp, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        let name = op.name();
        let nd = self.ndim() as isize;
        let axes_norm: Option<Vec<usize>> = match axes {
            None => None,
            Some(list) => {
                let mut v = Vec::new();
                for &a in list {
                    let b = if a < 0 { a + nd } else { a };
                    if !(0..nd).contains(&b) {
                        return Err(Error::ty(
                            name,
                            format!("axis {a} out of range for {}", self.ty()),
                        ));
                    }
                    if v.contains(&(b as usize)) {
                        return Err(Error::ty(name, format!("axis {a} repeated")));
                    }
                    v.push(b as usize);
                }
                v.sort_unstable();
                Some(v)
            }
        };
        let r = Tensor::apply(
            Op::CAReduce {
                op,
                axes: axes_norm.clone(),
            },
            &[self],
        )?;
        if !keepdims {
            return Ok(r);
        }
        self.keep_reduced_dims(&r, |d| axes_norm.as_ref().is_none_or(|a| a.contains(&d)))
    }

    /// `r`, a reduction of `self` over the dimensions `reduced` picks, with
    /// those dimensions put back as broadcastable ones (numpy's `keepdims`).
    fn keep_reduced_dims(&self, r: &Tensor, reduced: impl Fn(usize) -> bool) -> Result<Tensor> {
        let mut k = 0;
        let order: Vec<Option<usize>> = (0..self.ndim())
            .map(|d| {
                if reduced(d) {
                    None
                } else {
                    k += 1;
                    Some(k - 1)
                }
            })
            .collect();
        r.dimshuffle(&order)
    }

    /// `log(sum(exp(x)))` over `axes` (negative counts from the end;
    /// `None`: all elements), as PyTensor's and scipy's `logsumexp`, with
    /// `keepdims` as numpy's. One axis, or all of them, is the
    /// [`Op::LogSumExp`] op; several but not all axes build
    /// `log(sum(exp(x), axes))`, which stabilize shifts by the maximum.
    /// Integer and bool inputs are cast to `f64` first.
    pub fn logsumexp(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        let x = if self.dtype().is_float() {
            self.clone()
        } else {
            self.cast(DType::F64)
        };
        let mut norm = Vec::new();
        for &a in axes.unwrap_or(&[]) {
            let b = x.normalize_axis("logsumexp", a)?;
            if norm.contains(&b) {
                return Err(Error::ty("logsumexp", format!("axis {a} repeated")));
            }
            norm.push(b);
        }
        let axis = match (axes, norm.as_slice()) {
            (None, _) => None,
            (Some(_), [a]) if x.ndim() > 1 => Some(*a),
            (Some(_), n) if n.len() == x.ndim() => None,
            (Some(a), _) => return Ok(x.exp().reduce(ReduceOp::Sum, Some(a), keepdims)?.log()),
        };
        let r = Tensor::apply(Op::LogSumExp { axis }, &[&x])?;
        if !keepdims {
            return Ok(r);
        }
        x.keep_reduced_dims(&r, |d| axis.is_none_or(|a| a == d))
    }

    /// numpy's `argmax` (`op` = [`ArgOp::Max`]) or `argmin` over `axis`
    /// (negative counts from the end; `None`: the flattened input), as
    /// `i64` positions; `keepdims` keeps the reduced dimension(s) as
    /// broadcastable ones.
    pub fn arg_reduce(&self, op: ArgOp, axis: Option<isize>, keepdims: bool) -> Result<Tensor> {
        let what = format!("arg{}", op.word());
        let axis = match axis {
            None => None,
            Some(a) => Some(self.normalize_axis(&what, a)?),
        };
        let r = Tensor::apply(
            Op::ArgReduce {
                op,
                axis,
                with_value: false,
            },
            &[self],
        )?;
        if !keepdims {
            return Ok(r);
        }
        self.keep_reduced_dims(&r, |d| axis.is_none_or(|a| a == d))
    }

    /// `softmax` along `axis` (negative counts from the end; `None`: over
    /// all elements, as `scipy.special.softmax(x, axis=None)`); with `log`,
    /// `log_softmax`. Integer and bool inputs are cast to `f64` first.
    pub fn softmax_op(&self, axis: Option<isize>, log: bool) -> Result<Tensor> {
        let what = if log { "log_softmax" } else { "softmax" };
        let axis = match axis {
            None => None,
            Some(a) => Some(self.normalize_axis(what, a)?),
        };
        let x = if self.dtype().is_float() {
            self.clone()
        } else {
            self.cast(DType::F64)
        };
        Tensor::apply(Op::Softmax { axis, log }, &[&x])
    }

    /// numpy's `cumsum` (`op` = `Sum`) or `cumprod` (`Prod`) along `axis`
    /// (negative counts from the end; `None`: the flattened input). `bool`
    /// and integers accumulate in `i64`, as [`Tensor::sum`] does.
    pub fn cumulative(&self, op: ReduceOp, axis: Option<isize>) -> Result<Tensor> {
        let what = if op == ReduceOp::Prod {
            "cumprod"
        } else {
            "cumsum"
        };
        let axis = match axis {
            None => None,
            Some(a) => Some(self.normalize_axis(what, a)?),
        };
        Tensor::apply(Op::CumReduce { op, axis }, &[self])
    }

    /// numpy's `cumsum` along `axis` (`None`: flattened).
    pub fn cumsum(&self, axis: Option<isize>) -> Result<Tensor> {
        self.cumulative(ReduceOp::Sum, axis)
    }

    /// numpy's `cumprod` along `axis` (`None`: flattened).
    pub fn cumprod(&self, axis: Option<isize>) -> Result<Tensor> {
        self.cumulative(ReduceOp::Prod, axis)
    }

    /// `softmax(x, axis)`; see [`Tensor::softmax_op`].
    pub fn softmax(&self, axis: Option<isize>) -> Result<Tensor> {
        self.softmax_op(axis, false)
    }

    /// `log_softmax(x, axis)`; see [`Tensor::softmax_op`].
    pub fn log_softmax(&self, axis: Option<isize>) -> Result<Tensor> {
        self.softmax_op(axis, true)
    }

    /// numpy's `argmax` over `axis` (`None`: flattened); see [`Tensor::arg_reduce`].
    pub fn argmax(&self, axis: Option<isize>) -> Result<Tensor> {
        self.arg_reduce(ArgOp::Max, axis, false)
    }

    /// numpy's `argmin` over `axis` (`None`: flattened); see [`Tensor::arg_reduce`].
    pub fn argmin(&self, axis: Option<isize>) -> Result<Tensor> {
        self.arg_reduce(ArgOp::Min, axis, false)
    }

    /// `(max(x, axis), argmax(x, axis))` computed in one pass (PyTensor's
    /// `max_and_argmax`; FAST_RUN also merges a separate `max` and `argmax`
    /// of one input into this).
    pub fn max_and_argmax(&self, axis: Option<isize>) -> Result<(Tensor, Tensor)> {
        let axis = match axis {
            None => None,
            Some(a) => Some(self.normalize_axis("max_and_argmax", a)?),
        };
        let mut outs = Tensor::apply_multi(
            Op::ArgReduce {
                op: ArgOp::Max,
                axis,
                with_value: true,
            },
            &[self],
        )?;
        let idx = outs.pop().expect("two outputs");
        let val = outs.pop().expect("two outputs");
        Ok((val, idx))
    }

    /// One axis, negative counting from the end, checked against the ndim
    /// (an error naming `what`).
    fn normalize_axis(&self, what: &str, a: isize) -> Result<usize> {
        let nd = self.ndim() as isize;
        let b = if a < 0 { a + nd } else { a };
        if !(0..nd).contains(&b) {
            return Err(Error::ty(
                what,
                format!("axis {a} out of range for {}", self.ty()),
            ));
        }
        Ok(b as usize)
    }

    /// Sum over `axes` (`&[]` is an empty reduction; use [`Tensor::sum_all`] for all axes).
    pub fn sum(&self, axes: &[isize]) -> Result<Tensor> {
        self.reduce(ReduceOp::Sum, Some(axes), false)
    }

    /// Sum of all elements.
    pub fn sum_all(&self) -> Tensor {
        self.reduce(ReduceOp::Sum, None, false)
            .expect("a full reduction is always valid")
    }

    /// Product over `axes`.
    pub fn prod(&self, axes: &[isize]) -> Result<Tensor> {
        self.reduce(ReduceOp::Prod, Some(axes), false)
    }

    /// Maximum over `axes`.
    pub fn max(&self, axes: &[isize]) -> Result<Tensor> {
        self.reduce(ReduceOp::Max, Some(axes), false)
    }

    /// Minimum over `axes`.
    pub fn min(&self, axes: &[isize]) -> Result<Tensor> {
        self.reduce(ReduceOp::Min, Some(axes), false)
    }

    /// Mean over `axes` (`None`: all), as a float (`f64` for integer inputs).
    pub fn mean(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        let s = self.reduce(ReduceOp::Sum, axes, keepdims)?;
        let out = if s.dtype().is_float() {
            s.dtype()
        } else {
            DType::F64
        };
        true_div(&s, &self.reduced_count(axes)?.cast(out))
    }

    /// numpy's `var` over `axes` (`None`: all): the squared deviations
    /// from the mean (computed first, as numpy's two passes), summed and
    /// divided by the count of reduced elements minus `ddof` (0: their
    /// mean, numpy's default; 1: the unbiased sample variance). A float
    /// (`f64` for integer and bool inputs). A count of at most `ddof`
    /// divides by zero or less, as numpy (`inf` or NaN, negative for a
    /// negative divisor).
    pub fn var(&self, axes: Option<&[isize]>, keepdims: bool, ddof: u64) -> Result<Tensor> {
        let x = if self.dtype().is_float() {
            self.clone()
        } else {
            self.cast(DType::F64)
        };
        let d = sub(&x, &x.mean(axes, true)?)?;
        let sq = d.sqr();
        if ddof == 0 {
            return sq.mean(axes, keepdims);
        }
        let s = sq.reduce(ReduceOp::Sum, axes, keepdims)?;
        let ddof = Tensor::scalar_constant(DType::I64, ddof as f64);
        true_div(&s, &sub(&x.reduced_count(axes)?, &ddof)?.cast(s.dtype()))
    }

    /// numpy's `std`: the square root of [`var`](Tensor::var).
    pub fn std(&self, axes: Option<&[isize]>, keepdims: bool, ddof: u64) -> Result<Tensor> {
        Ok(self.var(axes, keepdims, ddof)?.sqrt())
    }

    /// The number of elements a reduction over `axes` (`None`: all)
    /// combines into each result, as an `i64` scalar: a constant when
    /// those sizes are static, else the product of their `Shape_i`.
    fn reduced_count(&self, axes: Option<&[isize]>) -> Result<Tensor> {
        let nd = self.ndim() as isize;
        let dims: Vec<usize> = match axes {
            None => (0..self.ndim()).collect(),
            Some(a) => a
                .iter()
                .map(|&x| (if x < 0 { x + nd } else { x }) as usize)
                .collect(),
        };
        match dims
            .iter()
            .map(|&d| self.ty().shape[d])
            .collect::<Option<Vec<_>>>()
        {
            Some(sizes) => Ok(Tensor::scalar_constant(
                DType::I64,
                sizes.iter().product::<usize>() as f64,
            )),
            // The product of the sizes (no leading `1 *` for the rewrites
            // to remove: one node fewer in every mean and its gradient).
            None => dims
                .iter()
                .try_fold(None, |c: Option<Tensor>, &d| {
                    let n = self.shape_i(d)?;
                    Ok(Some(match c {
                        Some(c) => mul(&c, &n)?,
                        None => n,
                    }))
                })
                .map(|c| c.expect("a size is unknown, so some axis is reduced")),
        }
    }
}
