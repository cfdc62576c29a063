//! Builds tensors from the expression language (`crate::expr`).
//!
//! Number literals are weak constants: they take the dtype of the tensor
//! they meet (`x_f32 * 2` stays `f32`; an integer literal next to an integer
//! tensor keeps its dtype; a float literal next to an integer tensor gives
//! `f64`). A literal alone is an `i64` or `f64` constant. Errors carry the
//! byte position of the offending sub-expression. The walk never recurses,
//! so very long expressions build without overflowing the stack.

use std::collections::HashMap;

use super::build;
use super::index::{inc_subtensor, set_subtensor, Idx, IdxBound};
use super::indexing;
use super::matmul;
use super::Tensor;
use crate::error::{Error, Result};
use crate::expr::{
    self, BinaryOp, Expr, ExprKind, Func, IndexItem, Keyword, Number, Signature, UnaryOp,
};
use crate::graph::DType;
use crate::ops::{ArgOp, ReduceOp, ScalarOp};

/// A partial result of the walk: a tensor, a literal waiting for a partner, or syntax-only data.
enum Built {
    Tensor(Tensor),
    /// `base[items]`: its view, kept with its parts for `set_subtensor`.
    Indexed {
        view: Tensor,
        base: Tensor,
        items: Vec<Idx>,
    },
    /// `base[..., idx, ...]` with one integer tensor (a gather along `axis`)
    /// or `base[mask]`: its result, kept with its parts for
    /// `set_subtensor` / `inc_subtensor`.
    AdvIndexed {
        view: Tensor,
        base: Tensor,
        index: AdvIndex,
    },
    Number(Number),
    /// A list literal's items (the tensors of `concatenate([a, b])`).
    List(Vec<Built>),
    Other,
}

/// Parses `src` and builds it over the named inputs.
pub fn build_expression(src: &str, vars: &HashMap<String, Tensor>) -> Result<Tensor> {
    let e = expr::parse(src).map_err(|e| Error::Parse {
        pos: e.pos,
        msg: e.message.clone(),
    })?;
    build_expr(&e, vars)
}

/// Builds a parsed expression over the named inputs.
pub fn build_expr(e: &Expr, vars: &HashMap<String, Tensor>) -> Result<Tensor> {
    let result = e.fold(|node, kids: Vec<Built>| build_node(node, kids, vars))?;
    match result {
        Built::Tensor(t) | Built::Indexed { view: t, .. } | Built::AdvIndexed { view: t, .. } => {
            Ok(t)
        }
        Built::Number(n) => Ok(literal(n)),
        Built::List(_) | Built::Other => Err(Error::Parse {
            pos: e.span.start,
            msg: "the expression is not a tensor".into(),
        }),
    }
}

fn literal(n: Number) -> Tensor {
    match n {
        Number::Int(i) => Tensor::scalar_constant(DType::I64, i as f64),
        Number::Float(f) => Tensor::scalar_constant(DType::F64, f),
    }
}

fn at(pos: usize, e: Error) -> Error {
    match e {
        Error::Type { op, msg } => Error::Type {
            op,
            msg: format!("{msg} (at position {pos})"),
        },
        other => other,
    }
}

/// A number literal as a weak constant next to tensors of dtype `like`
/// (an integer literal exactly, not through `f64`).
fn weak_number(like: DType, n: Number) -> Result<Tensor> {
    match n {
        Number::Int(i) => build::weak_int_constant_next_to(like, i),
        Number::Float(x) => build::weak_constant_next_to(like, x, true),
    }
}

/// Turns a pair of operands into tensors, making a literal weak next to a tensor.
fn pair(a: Built, b: Built, pos: usize) -> Result<(Tensor, Tensor)> {
    match (a, b) {
        (Built::Tensor(x), Built::Tensor(y)) => Ok((x, y)),
        (Built::Tensor(x), Built::Number(n)) => {
            let c = weak_number(x.dtype(), n)?;
            Ok((x, c))
        }
        (Built::Number(n), Built::Tensor(y)) => {
            let c = weak_number(y.dtype(), n)?;
            Ok((c, y))
        }
        (Built::Number(m), Built::Number(n)) => Ok((literal(m), literal(n))),
        _ => Err(Error::Parse {
            pos,
            msg: "operands must be tensors or numbers".into(),
        }),
    }
}

fn tensor_of(b: Built, pos: usize) -> Result<Tensor> {
    match b {
        Built::Tensor(t) | Built::Indexed { view: t, .. } | Built::AdvIndexed { view: t, .. } => {
            Ok(t)
        }
        Built::Number(n) => Ok(literal(n)),
        Built::List(_) | Built::Other => Err(Error::Parse {
            pos,
            msg: "expected a tensor argument".into(),
        }),
    }
}

fn build_node(node: &Expr, kids: Vec<Built>, vars: &HashMap<String, Tensor>) -> Result<Built> {
    let pos = node.span.start;
    if let ExprKind::Call { name, .. } = &node.kind {
        if let Some(f @ (Func::SetSubtensor | Func::IncSubtensor)) = Func::from_name(name) {
            return update_call(f, kids, pos);
        }
    }
    // Everywhere else an indexed expression is its view.
    let mut kids = kids.into_iter().map(|b| match b {
        Built::Indexed { view, .. } | Built::AdvIndexed { view, .. } => Built::Tensor(view),
        b => b,
    });
    let mut next = || kids.next().expect("fold passes one result per child");
    Ok(match &node.kind {
        ExprKind::Number(n) => Built::Number(*n),
        // `True` / `False` as values are 0-d bool constants (as the printers show them).
        ExprKind::Bool(b) => Built::Tensor(Tensor::scalar_constant(
            DType::Bool,
            f64::from(u8::from(*b)),
        )),
        ExprKind::Str(_) | ExprKind::None | ExprKind::Tuple(_) => Built::Other,
        ExprKind::List(items) => Built::List((0..items.len()).map(|_| next()).collect()),
        ExprKind::Name(name) => match vars.get(name) {
            Some(t) => Built::Tensor(t.clone()),
            // The printers' names of non-finite constants (a declared
            // variable of that name wins).
            None if name == "inf" => Built::Number(Number::Float(f64::INFINITY)),
            None if name == "nan" || name == "NaN" => Built::Number(Number::Float(f64::NAN)),
            None => {
                return Err(Error::Parse {
                    pos,
                    msg: format!("unknown variable '{name}' (declare it as an input)"),
                })
            }
        },
        ExprKind::Unary { op, .. } => match (op, next()) {
            (UnaryOp::Pos, b) => b,
            (UnaryOp::Neg, Built::Number(Number::Int(i))) => {
                Built::Number(Number::Int(i.wrapping_neg()))
            }
            (UnaryOp::Neg, Built::Number(Number::Float(f))) => Built::Number(Number::Float(-f)),
            (UnaryOp::Neg, b) => Built::Tensor(tensor_of(b, pos)?.neg()),
            (UnaryOp::Not, b) => {
                Built::Tensor(tensor_of(b, pos)?.invert().map_err(|e| at(pos, e))?)
            }
        },
        ExprKind::Binary { op, .. } => {
            let (a, b) = pair(next(), next(), pos)?;
            let f = match op {
                BinaryOp::Add => build::add,
                BinaryOp::Sub => build::sub,
                BinaryOp::Mul => build::mul,
                BinaryOp::Div => build::true_div,
                BinaryOp::FloorDiv => build::int_div,
                BinaryOp::Mod => build::modulo,
                BinaryOp::Pow => build::pow,
                BinaryOp::MatMul => matmul::matmul,
                BinaryOp::Lt => build::lt,
                BinaryOp::Le => build::le,
                BinaryOp::Gt => build::gt,
                BinaryOp::Ge => build::ge,
                BinaryOp::Eq => build::eq,
                BinaryOp::Ne => build::neq,
                BinaryOp::And => build::and,
                BinaryOp::Or => build::or,
                BinaryOp::Xor => build::xor,
                BinaryOp::LeftShift => build::left_shift,
                BinaryOp::RightShift => build::right_shift,
            };
            Built::Tensor(f(&a, &b).map_err(|e| at(pos, e))?)
        }
        ExprKind::Index { items, .. } => {
            let base = tensor_of(next(), pos)?;
            let built = index_items(items, &mut kids, pos)?;
            match advanced_index(items, built, pos)? {
                Ok(items) => {
                    let view = base.slice(&items).map_err(|e| at(pos, e))?;
                    Built::Indexed { view, base, items }
                }
                Err(index) => {
                    let view = index.apply(&base).map_err(|e| at(pos, e))?;
                    Built::AdvIndexed { view, base, index }
                }
            }
        }
        ExprKind::Transpose(_) => Built::Tensor(tensor_of(next(), pos)?.t()),
        ExprKind::Call {
            name, args, kwargs, ..
        } => {
            let func = Func::from_name(name).ok_or_else(|| Error::Parse {
                pos,
                msg: format!("unknown function '{name}'"),
            })?;
            let built: Vec<Built> = (0..args.len() + kwargs.len()).map(|_| next()).collect();
            let mut built = built.into_iter();
            let parse_err = |e: expr::ParseError| Error::Parse {
                pos: e.pos,
                msg: e.message,
            };
            if func == Func::Tensordot {
                let a = tensor_of(built.next().expect("arity checked"), pos)?;
                let b = tensor_of(built.next().expect("arity checked"), pos)?;
                let t = match expr::tensordot_args(kwargs).map_err(parse_err)? {
                    expr::TensordotAxes::Count(n) => matmul::tensordot(&a, &b, n as usize),
                    expr::TensordotAxes::Pairs(x, y) => {
                        let cv =
                            |v: Vec<i64>| v.into_iter().map(|d| d as isize).collect::<Vec<_>>();
                        matmul::tensordot_axes(&a, &b, &cv(x), &cv(y))
                    }
                };
                return Ok(Built::Tensor(t.map_err(|e| at(pos, e))?));
            }
            if func == Func::Cast {
                let x = tensor_of(built.next().expect("arity checked"), pos)?;
                let dtype = DType::parse(expr::cast_dtype(&args[1]).map_err(parse_err)?)?;
                return Ok(Built::Tensor(x.cast(dtype)));
            }
            if func.is_reduction() {
                let x = tensor_of(built.next().expect("arity checked"), pos)?;
                let r = expr::reduce_args(func, kwargs).map_err(parse_err)?;
                let axes: Option<Vec<isize>> =
                    r.axes.map(|a| a.iter().map(|&v| v as isize).collect());
                let t = match func {
                    Func::Mean => x.mean(axes.as_deref(), r.keepdims),
                    Func::Var => x.var(axes.as_deref(), r.keepdims, r.ddof),
                    Func::Std => x.std(axes.as_deref(), r.keepdims, r.ddof),
                    Func::LogSumExp => x.logsumexp(axes.as_deref(), r.keepdims),
                    Func::Cumsum | Func::Cumprod => {
                        let bad = |msg: String| Error::Parse { pos, msg };
                        if r.keepdims {
                            return Err(bad(format!("{}() does not take keepdims=", func.name())));
                        }
                        let axis = match axes.as_deref() {
                            None => None,
                            Some(&[a]) => Some(a),
                            Some(_) => {
                                return Err(bad(format!(
                                    "{}() takes one axis (an integer) or axis=None",
                                    func.name()
                                )))
                            }
                        };
                        let op = if func == Func::Cumsum {
                            ReduceOp::Sum
                        } else {
                            ReduceOp::Prod
                        };
                        x.cumulative(op, axis)
                    }
                    Func::Softmax | Func::LogSoftmax => {
                        let bad = |msg: String| Error::Parse { pos, msg };
                        if r.keepdims {
                            return Err(bad(format!("{}() does not take keepdims=", func.name())));
                        }
                        // No `axis=`: the last axis (PyTensor's and
                        // scipy's default); `axis=None`: all elements.
                        let given = kwargs.iter().any(|k| k.name == "axis");
                        let axis = match (given, axes.as_deref()) {
                            (false, _) => Some(-1),
                            (true, None) => None,
                            (true, Some(&[a])) => Some(a),
                            (true, Some(_)) => {
                                return Err(bad(format!(
                                    "{}() takes one axis (an integer) or axis=None",
                                    func.name()
                                )))
                            }
                        };
                        if x.ndim() == 0 && axis == Some(-1) {
                            x.softmax_op(None, func == Func::LogSoftmax)
                        } else {
                            x.softmax_op(axis, func == Func::LogSoftmax)
                        }
                    }
                    Func::Argmax | Func::Argmin => {
                        let op = if func == Func::Argmax {
                            ArgOp::Max
                        } else {
                            ArgOp::Min
                        };
                        let axis = match axes.as_deref() {
                            None => None,
                            Some(&[a]) => Some(a),
                            Some(_) => {
                                return Err(Error::Parse {
                                    pos,
                                    msg: format!(
                                        "{}() takes one axis (an integer) or axis=None",
                                        func.name()
                                    ),
                                })
                            }
                        };
                        x.arg_reduce(op, axis, r.keepdims)
                    }
                    _ => {
                        let op = match func {
                            Func::Sum => ReduceOp::Sum,
                            Func::Prod => ReduceOp::Prod,
                            Func::Max => ReduceOp::Max,
                            Func::Min => ReduceOp::Min,
                            Func::All => ReduceOp::All,
                            _ => ReduceOp::Any,
                        };
                        x.reduce(op, axes.as_deref(), r.keepdims)
                    }
                };
                return Ok(Built::Tensor(t.map_err(|e| at(pos, e))?));
            }
            if matches!(
                func.signature(),
                Signature::Axis(_) | Signature::Join | Signature::Split
            ) {
                let t = indexing_call(func, args, kwargs, built.collect(), pos)?;
                return Ok(Built::Tensor(t));
            }
            if func == Func::Alloc {
                return Ok(Built::Tensor(alloc_call(built.collect(), pos)?));
            }
            let ts = call_args(func, built.collect(), pos)?;
            Built::Tensor(call(func, &ts, pos)?)
        }
    })
}

/// `set_subtensor(x[items], y)` / `inc_subtensor(x[items], y)` from the
/// built arguments: the first is an indexed expression, whose base and
/// index items are used (the view built for it is not).
fn update_call(func: Func, kids: Vec<Built>, pos: usize) -> Result<Built> {
    let mut kids = kids.into_iter();
    let first = kids.next();
    let base = match &first {
        Some(Built::Indexed { base, .. } | Built::AdvIndexed { base, .. }) => base.clone(),
        _ => {
            return Err(Error::Parse {
                pos,
                msg: format!(
                    "the first argument of {}() must be an indexed expression such as x[1:-1]",
                    func.name()
                ),
            })
        }
    };
    let y = match kids.next().expect("arity checked") {
        Built::Number(n) => weak_number(base.dtype(), n)?,
        b => tensor_of(b, pos)?,
    };
    let set = func == Func::SetSubtensor;
    let r = match first {
        Some(Built::Indexed { items, .. }) if set => set_subtensor(&base, &items, &y),
        Some(Built::Indexed { items, .. }) => inc_subtensor(&base, &items, &y),
        Some(Built::AdvIndexed {
            index: AdvIndex::Take { axis, idx },
            ..
        }) => {
            if set {
                indexing::advanced_set_subtensor1(&base, axis, &idx, &y)
            } else {
                indexing::advanced_inc_subtensor1(&base, axis, &idx, &y)
            }
        }
        _ => {
            return Err(Error::Parse {
                pos,
                msg: format!(
                    "{}() of a boolean mask is not supported: use where(mask, y, x)",
                    func.name()
                ),
            })
        }
    };
    Ok(Built::Tensor(r.map_err(|e| at(pos, e))?))
}

/// The arguments of a function call as tensors. A number literal is weak
/// next to the tensors among the function's value arguments (every argument
/// but `where`'s condition), as numpy treats Python scalars: `where(c, 2, x_f32)`
/// and `clip(x_i32, 0, 10)` keep the tensor's dtype.
fn call_args(func: Func, args: Vec<Built>, pos: usize) -> Result<Vec<Tensor>> {
    let first_value = usize::from(func == Func::Where);
    let like = DType::upcast_all(args.iter().skip(first_value).filter_map(|b| match b {
        Built::Tensor(t) => Some(t.dtype()),
        _ => None,
    }));
    args.into_iter()
        .enumerate()
        .map(|(i, b)| match (b, like) {
            (Built::Number(n), Some(d)) if i >= first_value => weak_number(d, n),
            (b, _) => tensor_of(b, pos),
        })
        .collect()
}

/// `alloc(x, n, m)`: the value, then one 0-d integer size per dimension
/// (an integer literal is an `i64` constant; `Alloc`'s type inference
/// rejects a size that is not a 0-d integer).
fn alloc_call(args: Vec<Built>, pos: usize) -> Result<Tensor> {
    let ts: Vec<Tensor> = args
        .into_iter()
        .map(|b| tensor_of(b, pos))
        .collect::<Result<_>>()?;
    let (value, sizes) = ts.split_first().expect("the parser checked the arity");
    let sizes: Vec<&Tensor> = sizes.iter().collect();
    build::alloc(value, &sizes).map_err(|e| at(pos, e))
}

fn call(func: Func, a: &[Tensor], pos: usize) -> Result<Tensor> {
    let unary = |op: ScalarOp| build::elemwise(op, &[&a[0]]);
    let r = match func {
        Func::Exp => unary(ScalarOp::Exp),
        Func::Exp2 => unary(ScalarOp::Exp2),
        Func::Expm1 => unary(ScalarOp::Expm1),
        Func::Log => unary(ScalarOp::Log),
        Func::Log2 => unary(ScalarOp::Log2),
        Func::Log10 => unary(ScalarOp::Log10),
        Func::Log1p => unary(ScalarOp::Log1p),
        Func::Sqrt => unary(ScalarOp::Sqrt),
        Func::Sqr => unary(ScalarOp::Sqr),
        Func::Abs => unary(ScalarOp::Abs),
        Func::Sign => unary(ScalarOp::Sign),
        Func::Sin => unary(ScalarOp::Sin),
        Func::Cos => unary(ScalarOp::Cos),
        Func::Tan => unary(ScalarOp::Tan),
        Func::Arcsin => unary(ScalarOp::ArcSin),
        Func::Arccos => unary(ScalarOp::ArcCos),
        Func::Arctan => unary(ScalarOp::ArcTan),
        Func::Sinh => unary(ScalarOp::Sinh),
        Func::Cosh => unary(ScalarOp::Cosh),
        Func::Tanh => unary(ScalarOp::Tanh),
        Func::Arcsinh => unary(ScalarOp::ArcSinh),
        Func::Arccosh => unary(ScalarOp::ArcCosh),
        Func::Arctanh => unary(ScalarOp::ArcTanh),
        Func::Sigmoid => unary(ScalarOp::Sigmoid),
        Func::Softplus => unary(ScalarOp::Softplus),
        Func::Log1mexp => unary(ScalarOp::Log1mexp),
        Func::Erf => unary(ScalarOp::Erf),
        Func::Erfc => unary(ScalarOp::Erfc),
        Func::Floor => unary(ScalarOp::Floor),
        Func::Ceil => unary(ScalarOp::Ceil),
        Func::Round => unary(ScalarOp::Round),
        Func::Trunc => unary(ScalarOp::Trunc),
        Func::Isnan => unary(ScalarOp::IsNan),
        Func::Isinf => unary(ScalarOp::IsInf),
        Func::Isfinite => unary(ScalarOp::IsFinite),
        Func::Reciprocal => unary(ScalarOp::Reciprocal),
        Func::Second => build::elemwise(ScalarOp::Second, &[&a[0], &a[1]]),
        Func::Arctan2 => build::arctan2(&a[0], &a[1]),
        Func::Hypot => build::hypot(&a[0], &a[1]),
        Func::SigmoidBinaryCrossentropy => build::sigmoid_binary_crossentropy(&a[0], &a[1]),
        Func::Copysign => build::copysign(&a[0], &a[1]),
        Func::Fmod => build::fmod(&a[0], &a[1]),
        Func::Maximum => build::maximum(&a[0], &a[1]),
        Func::Minimum => build::minimum(&a[0], &a[1]),
        Func::Where => build::switch(&a[0], &a[1], &a[2]),
        Func::Clip => build::clip(&a[0], &a[1], &a[2]),
        Func::Dot => build::dot(&a[0], &a[1]),
        Func::Matmul => matmul::matmul(&a[0], &a[1]),
        Func::Transpose => Ok(a[0].t()),
        Func::BooleanMask => indexing::boolean_mask(&a[0], &a[1]),
        Func::Take
        | Func::AdvancedIncSubtensor
        | Func::AdvancedSetSubtensor
        | Func::Concatenate
        | Func::Stack
        | Func::Split
        | Func::Tensordot
        | Func::Cast
        | Func::Sum
        | Func::Prod
        | Func::Max
        | Func::Min
        | Func::Mean
        | Func::Var
        | Func::Std
        | Func::All
        | Func::Any
        | Func::SetSubtensor
        | Func::IncSubtensor
        | Func::Argmax
        | Func::Argmin
        | Func::Softmax
        | Func::LogSoftmax
        | Func::LogSumExp
        | Func::Cumsum
        | Func::Cumprod
        | Func::Alloc => {
            unreachable!("handled by the caller")
        }
    };
    r.map_err(|e| at(pos, e))
}

/// A call of `take`, an indexed update, `concatenate`, `stack` or `split`
/// (the functions with an `axis=` keyword), whose built arguments are
/// `built` (positional, then keyword values).
fn indexing_call(
    func: Func,
    args: &[Expr],
    kwargs: &[Keyword],
    built: Vec<Built>,
    pos: usize,
) -> Result<Tensor> {
    let parse_err = |e: expr::ParseError| Error::Parse {
        pos: e.pos,
        msg: e.message,
    };
    let a = expr::axis_args(func, kwargs).map_err(parse_err)?;
    let axis = a.axis as isize;
    let mut built = built.into_iter();
    let mut next = || built.next().expect("arity checked");
    let r = match func {
        Func::Take => {
            let x = tensor_of(next(), pos)?;
            let idx = index_of(&args[1], next(), pos)?;
            indexing::take(&x, &idx, axis)
        }
        Func::AdvancedIncSubtensor | Func::AdvancedSetSubtensor => {
            let x = tensor_of(next(), pos)?;
            let idx = index_of(&args[1], next(), pos)?;
            // A number literal is weak next to x, as numpy's Python scalars.
            let y = match next() {
                Built::Number(n) => weak_number(x.dtype(), n)?,
                b => tensor_of(b, pos)?,
            };
            if func == Func::AdvancedSetSubtensor {
                indexing::advanced_set_subtensor1(&x, axis, &idx, &y)
            } else {
                indexing::advanced_inc_subtensor1(&x, axis, &idx, &y)
            }
        }
        Func::Concatenate | Func::Stack => {
            let Built::List(items) = next() else {
                unreachable!("the checking step requires a list literal")
            };
            let ts: Vec<Tensor> = items
                .into_iter()
                .map(|b| tensor_of(b, pos))
                .collect::<Result<_>>()?;
            let refs: Vec<&Tensor> = ts.iter().collect();
            if func == Func::Stack {
                indexing::stack(&refs, axis)
            } else {
                indexing::concatenate(&refs, axis)
            }
        }
        _ => {
            let x = tensor_of(next(), pos)?;
            let parts = match expr::int_list(&args[1]).map_err(parse_err)? {
                Some(sizes) => indexing::split(&x, &sizes, axis),
                None => indexing::split_by(&x, &tensor_of(next(), pos)?, axis),
            }
            .map_err(|e| at(pos, e))?;
            let k = a.output.expect("the checking step requires output=");
            return usize::try_from(k)
                .ok()
                .and_then(|k| parts.get(k).cloned())
                .ok_or_else(|| Error::Parse {
                    pos,
                    msg: format!(
                        "split() has {} outputs, output={k} is out of range",
                        parts.len()
                    ),
                });
        }
    };
    r.map_err(|e| at(pos, e))
}

/// The index argument `e` of `take` or an update, built as `b`: a list of
/// integer literals becomes an `i64` constant vector.
fn index_of(e: &Expr, b: Built, pos: usize) -> Result<Tensor> {
    match expr::int_list(e) {
        Ok(Some(v)) => Ok(Tensor::constant(crate::graph::Value::I64(
            ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[v.len()]), v).expect("1-d"),
        ))),
        _ => tensor_of(b, pos),
    }
}

/// The index item built from `item` and the results of its expressions
/// (taken from `kids` in source order).
fn index_item(
    item: &IndexItem,
    kids: &mut impl Iterator<Item = Built>,
    pos: usize,
) -> Result<ItemBuilt> {
    let bound = |e: &Option<Box<Expr>>,
                 kids: &mut dyn Iterator<Item = Built>|
     -> Result<Option<IdxBound>> {
        let Some(e) = e else { return Ok(None) };
        let b = kids.next().expect("fold passes one result per child");
        let epos = e.span.start;
        match b {
            Built::Number(Number::Int(i)) => Ok(Some(IdxBound::Const(i))),
            Built::Number(Number::Float(f)) => Err(Error::Parse {
                pos: epos,
                msg: format!("slice bound {f:?} is a float: indices must be integers"),
            }),
            b => Ok(Some(IdxBound::Tensor(tensor_of(b, epos)?))),
        }
    };
    Ok(ItemBuilt::Basic(match item {
        IndexItem::Full => Idx::FULL,
        IndexItem::NewAxis => Idx::NewAxis,
        IndexItem::Ellipsis => Idx::Ellipsis,
        IndexItem::Slice { start, stop, step } => Idx::Slice {
            start: bound(start, kids)?,
            stop: bound(stop, kids)?,
            step: bound(step, kids)?,
        },
        IndexItem::Expr(e) => {
            let epos = e.span.start;
            match kids.next().expect("fold passes one result per child") {
                Built::Number(Number::Int(i)) => Idx::from(i),
                Built::Number(Number::Float(f)) => {
                    return Err(Error::Parse {
                        pos: epos,
                        msg: format!("index {f:?} is a float: indices must be integers"),
                    })
                }
                b => {
                    let t = tensor_of(b, pos)?;
                    if t.ndim() == 0 && t.dtype().is_int() {
                        Idx::from(&t)
                    } else if t.dtype() == DType::Bool || (t.ndim() > 0 && t.dtype().is_int()) {
                        return Ok(ItemBuilt::Array(t));
                    } else if t.ndim() == 0 && t.dtype().is_float() {
                        return Err(Error::Parse {
                            pos: epos,
                            msg: format!(
                                "index of type {} is a float: indices must be integers",
                                t.ty()
                            ),
                        });
                    } else {
                        return Err(Error::Parse {
                            pos: epos,
                            msg: format!(
                                "index of type {} is a float: indices must be integers \
                                 or booleans",
                                t.ty()
                            ),
                        });
                    }
                }
            }
        }
    }))
}

/// One item of `x[items]` once built: a basic index, or an integer or
/// boolean tensor (advanced indexing).
enum ItemBuilt {
    Basic(Idx),
    Array(Tensor),
}

/// The advanced index of `x[...]`: a gather along one axis (one integer
/// tensor, `:` everywhere else) or a boolean mask (`x[mask]`).
#[derive(Clone, Debug)]
enum AdvIndex {
    Take { axis: isize, idx: Tensor },
    Mask(Tensor),
}

impl AdvIndex {
    /// The indexed value of `x`.
    fn apply(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            AdvIndex::Take { axis, idx } => indexing::take(x, idx, *axis),
            AdvIndex::Mask(mask) => indexing::boolean_mask(x, mask),
        }
    }
}

/// The index items of `x[items]` from the results of their expressions.
fn index_items(
    items: &[IndexItem],
    kids: &mut impl Iterator<Item = Built>,
    pos: usize,
) -> Result<Vec<ItemBuilt>> {
    items.iter().map(|i| index_item(i, kids, pos)).collect()
}

/// The basic index of `x[items]` (`Ok`), or its advanced index (`Err`):
/// numpy's integer-array indexing on one axis with `:` on the others
/// (`x[idx]`, `X[idx, :]`, `X[:, idx]`: a `take` along that axis) and
/// boolean masks (`x[mask]`, the mask covering the leading dimensions).
/// Other mixes of tensors with basic items are errors.
fn advanced_index(
    items: &[IndexItem],
    built: Vec<ItemBuilt>,
    pos: usize,
) -> Result<std::result::Result<Vec<Idx>, AdvIndex>> {
    let arrays = built
        .iter()
        .filter(|b| matches!(b, ItemBuilt::Array(_)))
        .count();
    if arrays == 0 {
        let basic = built.into_iter().map(|b| match b {
            ItemBuilt::Basic(i) => i,
            ItemBuilt::Array(_) => unreachable!("no arrays"),
        });
        return Ok(Ok(basic.collect()));
    }
    let others_full = items
        .iter()
        .zip(&built)
        .all(|(item, b)| matches!(b, ItemBuilt::Array(_)) || matches!(item, IndexItem::Full));
    let unsupported = || Error::Parse {
        pos,
        msg: "advanced indexing takes one integer tensor with ':' on the other \
              dimensions (x[idx], X[:, idx]) or one boolean mask (x[mask])"
            .into(),
    };
    if arrays > 1 || !others_full {
        return Err(unsupported());
    }
    let (axis, t) = built
        .into_iter()
        .enumerate()
        .find_map(|(k, b)| match b {
            ItemBuilt::Array(t) => Some((k, t)),
            ItemBuilt::Basic(_) => None,
        })
        .expect("one array");
    if t.dtype() == DType::Bool {
        if axis != 0 {
            return Err(unsupported());
        }
        return Ok(Err(AdvIndex::Mask(t)));
    }
    Ok(Err(AdvIndex::Take {
        axis: axis as isize,
        idx: t,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::TensorType;

    fn vars() -> HashMap<String, Tensor> {
        let mut m = HashMap::new();
        m.insert("x".to_string(), super::super::vector("x", DType::F64));
        m.insert("f".to_string(), super::super::vector("f", DType::F32));
        m.insert("i".to_string(), super::super::vector("i", DType::I32));
        m.insert("X".to_string(), super::super::matrix("X", DType::F64));
        m
    }

    fn show(src: &str) -> String {
        build_expression(src, &vars()).unwrap().to_string()
    }

    #[test]
    fn builds_the_workloads() {
        assert_eq!(show("log(1 + exp(x))"), "log((1.0 + exp(x)))");
        assert_eq!(
            show("2*x**3 - 3*x**2 + x - 1"),
            "((((2.0 * (x ** 3.0)) - (3.0 * (x ** 2.0))) + x) - 1.0)"
        );
        assert_eq!(show("log(sum(exp(X), axis=1))"), "log(sum(exp(X), axis=1))");
        assert_eq!(
            show("tanh(x[:, None] + x[None, :])"),
            "tanh((x[:, None] + x[None, :]))"
        );
        assert_eq!(show("X @ x"), "(X @ x)");
        assert_eq!(show("X.T"), "X.T");
        assert_eq!(show("-x**2"), "(-(x ** 2.0))");
    }

    #[test]
    fn literals_are_weak() {
        let v = vars();
        // Also in function arguments, as numpy's Python scalars (NEP 50);
        // `where`'s condition does not count.
        let d = |src: &str| build_expression(src, &v).unwrap().dtype();
        assert_eq!(d("where(f > 0, 2, f)"), DType::F32);
        assert_eq!(d("where(i > 0, 2, i)"), DType::I32);
        assert_eq!(d("where(i > 0, 2.5, i)"), DType::F64);
        assert_eq!(d("where(x > 0, 2, 3)"), DType::I64);
        assert_eq!(d("clip(i, 0, 10)"), DType::I32);
        assert_eq!(d("maximum(f, 0)"), DType::F32);
        assert_eq!(d("maximum(2, 3)"), DType::I64);
        assert_eq!(build_expression("f * 2", &v).unwrap().dtype(), DType::F32);
        assert_eq!(build_expression("f * 2.5", &v).unwrap().dtype(), DType::F32);
        assert_eq!(build_expression("i + 1", &v).unwrap().dtype(), DType::I32);
        assert_eq!(build_expression("i * 0.5", &v).unwrap().dtype(), DType::F64);
        assert_eq!(build_expression("2 + 3", &v).unwrap().dtype(), DType::I64);
        assert_eq!(
            build_expression("cast(x, \"f32\")", &v).unwrap().dtype(),
            DType::F32
        );
        assert_eq!(
            build_expression("mean(i)", &v).unwrap().ty(),
            &TensorType::scalar(DType::F64)
        );
    }

    #[test]
    fn errors_carry_positions() {
        let v = vars();
        let e = build_expression("x + y", &v).unwrap_err();
        assert_eq!(
            e,
            Error::Parse {
                pos: 4,
                msg: "unknown variable 'y' (declare it as an input)".into()
            }
        );
        let e = build_expression("x + (", &v).unwrap_err();
        assert!(matches!(e, Error::Parse { pos: 5, .. }), "{e}");
        let e = build_expression("X @ X @ x[:, :]", &v).unwrap_err();
        assert!(e.to_string().contains("too many indices"), "{e}");
        let e = build_expression("x & x", &v).unwrap_err();
        assert!(e.to_string().contains("at position 0"), "{e}");
    }
}
