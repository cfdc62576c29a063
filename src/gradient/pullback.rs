//! Pullbacks (PyTensor's `L_op` / `pullback`): for one Apply node, the
//! gradients of its inputs given the gradients of its outputs, built as
//! ordinary tensor graphs over the node's inputs and outputs.
//!
//! [`l_op`] is the one `match` over [`Op`], and [`scalar_l_op`] the one
//! `match` over [`ScalarOp`]: adding an op's gradient is one arm in one of
//! them (ops that are sugar for a primitive graph — `Composite`,
//! `FusedReduce`, `Gemm` — are differentiated through that graph instead;
//! see `expand.rs`). A pullback returns, per input, an [`InputGrad`]:
//! `Disconnected` when the input's value does not influence the output
//! (the shape inputs of `Alloc`, the first input of `second`), `Zero` when
//! it does but the derivative is zero almost everywhere (`floor`,
//! comparisons, `sign`, `int_div`, every integer or boolean input), or a
//! tensor. A returned tensor may have the broadcast shape of the outputs and
//! a wider dtype: the driver (`reverse.rs`) sums it over the input's
//! broadcastable dimensions and casts it to the input's dtype, so element-wise
//! pullbacks never handle broadcasting themselves.
//!
//! Conventions follow PyTensor: `maximum`/`minimum` give a tie to their first
//! argument, `clip` gives a tie with a bound to `x`, `abs` has derivative 0
//! at 0, `pow`'s exponent gradient is 0 where the base is 0, and `prod`
//! handles zeros exactly (one zero: the product of the others at the zero;
//! two or more: 0). One exception: max/min reductions share `gz` equally
//! among the positions equal to the result (JAX's rule; PyTensor gives each
//! tie all of `gz`, which doubles the derivative of `max(a + x)` at two
//! equal entries of `a`, where the function is differentiable).

use crate::error::{Error, Result};
use crate::graph::{DType, Value};
use crate::ops::{ArgOp, Op, ReduceOp, ScalarOp};
use crate::tensor::{
    add, advanced_inc_subtensor1, advanced_set_subtensor1, elemwise, eq, mul, second, sub, switch,
    take, true_div, Idx, IdxBound, Tensor,
};

/// The gradient a pullback gives one input of a node.
#[derive(Debug, Clone)]
pub enum InputGrad {
    /// The output does not depend on this input's value.
    Disconnected,
    /// The output depends on the input, with derivative zero almost
    /// everywhere (or the input is integer-valued).
    Zero,
    /// The gradient (possibly of the output's broadcast shape and dtype).
    Grad(Tensor),
}

/// The pullback of `op` applied to `inputs` giving `outputs`, for the output
/// gradients `output_grads` (`None` where an output receives no gradient).
/// Ops reached here are primitive: the driver expands `Composite`,
/// `FusedReduce` and `Gemm` first.
pub fn l_op(
    op: &Op,
    inputs: &[Tensor],
    outputs: &[Tensor],
    output_grads: &[Option<Tensor>],
) -> Result<Vec<InputGrad>> {
    // The multi-output ops: an output that receives no gradient counts as zeros.
    match op {
        Op::Split { axis, .. } => return split_l_op(*axis, &inputs[0], outputs, output_grads),
        Op::ArgReduce {
            op: which,
            axis,
            with_value: true,
        } => {
            // (value, index): only the value carries a gradient, routed as
            // the max / min reduction routes it.
            let Some(gz) = &output_grads[0] else {
                return Ok(vec![InputGrad::Zero]);
            };
            let r = match which {
                ArgOp::Max => ReduceOp::Max,
                ArgOp::Min => ReduceOp::Min,
            };
            let axes: Option<Vec<usize>> = axis.map(|a| vec![a]);
            return reduce_l_op(r, axes.as_deref(), &inputs[0], &outputs[0], gz);
        }
        _ => {}
    }
    // Every other primitive op has one output.
    let gz = match output_grads {
        [Some(g)] => g,
        _ => {
            return Err(Error::Graph(format!(
                "pullback of {}: expected the gradient of one output",
                op.name()
            )))
        }
    };
    let z = &outputs[0];
    match op {
        Op::Elemwise { scalar, .. } => scalar_l_op(*scalar, inputs, z, gz),
        Op::DimShuffle {
            input_ndim,
            new_order,
        } => Ok(vec![InputGrad::Grad(dimshuffle_l_op(
            *input_ndim,
            new_order,
            gz,
        )?)]),
        Op::CAReduce { op: r, axes } => reduce_l_op(*r, axes.as_deref(), &inputs[0], z, gz),
        Op::Dot => dot_l_op(&inputs[0], &inputs[1], gz),
        Op::BatchedDot => batched_dot_l_op(&inputs[0], &inputs[1], gz),
        Op::Alloc => {
            let value = &inputs[0];
            // Sum over the leading dimensions Alloc added; the driver sums
            // over the value's broadcastable ones.
            let extra = z.ndim() - value.ndim();
            let axes: Vec<isize> = (0..extra as isize).collect();
            let g = if axes.is_empty() {
                gz.clone()
            } else {
                gz.sum(&axes)?
            };
            let mut grads = vec![InputGrad::Grad(g)];
            grads.extend(inputs[1..].iter().map(|_| InputGrad::Disconnected));
            Ok(grads)
        }
        Op::Reshape { .. } => {
            let x = &inputs[0];
            let g = match x.ty().static_size().and(static_shape(x)) {
                Some(shape) => gz.reshape(&shape)?,
                None => Tensor::apply(Op::Reshape { ndim: x.ndim() }, &[gz, &x.shape()])?,
            };
            Ok(vec![InputGrad::Grad(g), InputGrad::Disconnected])
        }
        Op::Shape | Op::ShapeI(_) => Ok(vec![InputGrad::Disconnected; inputs.len()]),
        Op::Subtensor { idx } => {
            // The gradient flows back into the selection of zeros like x.
            let zeros = second(&inputs[0], &c(gz.dtype(), 0.0))?;
            let mut args = vec![&zeros, gz];
            args.extend(&inputs[1..]);
            let update = Op::IncSubtensor {
                idx: idx.clone(),
                set: false,
                inplace: false,
            };
            let mut grads = vec![InputGrad::Grad(Tensor::apply(update, &args)?)];
            grads.extend(inputs[1..].iter().map(|_| InputGrad::Disconnected));
            Ok(grads)
        }
        Op::IncSubtensor { idx, set, .. } => {
            let (x, y, bounds) = (&inputs[0], &inputs[1], &inputs[2..]);
            // x: all of gz (inc), or gz with the overwritten selection zeroed (set).
            let gx = if *set {
                let mut args = vec![gz.clone(), c(gz.dtype(), 0.0)];
                args.extend(bounds.iter().cloned());
                let refs: Vec<&Tensor> = args.iter().collect();
                let zero_sel = Op::IncSubtensor {
                    idx: idx.clone(),
                    set: true,
                    inplace: false,
                };
                Tensor::apply(zero_sel, &refs)?
            } else {
                gz.clone()
            };
            let mut args = vec![gz];
            args.extend(bounds);
            let selected = Tensor::apply(Op::Subtensor { idx: idx.clone() }, &args)?;
            let mut grads = vec![
                grad_or_zero(x, gx),
                grad_or_zero(y, sum_leading(&selected, y.ndim())?),
            ];
            grads.extend(bounds.iter().map(|_| InputGrad::Disconnected));
            Ok(grads)
        }
        Op::AdvancedSubtensor1 { axis } => {
            let zeros = second(&inputs[0], &c(gz.dtype(), 0.0))?;
            let g = advanced_inc_subtensor1(&zeros, *axis as isize, &inputs[1], gz)?;
            Ok(vec![InputGrad::Grad(g), InputGrad::Disconnected])
        }
        Op::AdvancedIncSubtensor1 { axis, set } => {
            let (x, y, idx) = (&inputs[0], &inputs[1], &inputs[2]);
            let a = *axis as isize;
            let gx = if *set {
                advanced_set_subtensor1(gz, a, idx, &c(gz.dtype(), 0.0))?
            } else {
                gz.clone()
            };
            // As PyTensor: with `set` and duplicate indices every duplicate
            // receives the gradient, though only the last one is written.
            let gy = sum_leading(&take(gz, idx, a)?, y.ndim())?;
            Ok(vec![
                grad_or_zero(x, gx),
                grad_or_zero(y, gy),
                InputGrad::Disconnected,
            ])
        }
        Op::Join { axis } => {
            // Each part's gradient is its slice of gz along the axis.
            let mut start = c(DType::I64, 0.0);
            let mut grads = Vec::with_capacity(inputs.len());
            for part in inputs {
                let stop = add(&start, &part.shape_i(*axis)?)?;
                let mut items = vec![Idx::FULL; *axis];
                items.push(Idx::Slice {
                    start: Some(IdxBound::Tensor(start.clone())),
                    stop: Some(IdxBound::Tensor(stop.clone())),
                    step: None,
                });
                grads.push(grad_or_zero(part, gz.slice(&items)?));
                start = stop;
            }
            Ok(grads)
        }
        Op::Softmax { axis, log } => {
            let axes: Option<Vec<isize>> = axis.map(|a| vec![a as isize]);
            let keep_sum = |t: &Tensor| t.reduce(ReduceOp::Sum, axes.as_deref(), true);
            let g = if *log {
                // d log_softmax: gz - softmax(x) * sum(gz).
                sub(gz, &mul(&z.exp(), &keep_sum(gz)?)?)?
            } else {
                // d softmax: z * (gz - sum(gz * z)).
                mul(z, &sub(gz, &keep_sum(&mul(gz, z)?)?)?)?
            };
            Ok(vec![grad_or_zero(&inputs[0], g)])
        }
        Op::LogSumExp { axis } => {
            // d logsumexp(x) / dx = softmax(x) over the same lane.
            let x = &inputs[0];
            let axes: Option<Vec<usize>> = axis.map(|a| vec![a]);
            let s = Tensor::apply(
                Op::Softmax {
                    axis: *axis,
                    log: false,
                },
                &[x],
            )?;
            let g = mul(&expand_reduced(gz, x.ndim(), axes.as_deref())?, &s)?;
            Ok(vec![grad_or_zero(x, g)])
        }
        Op::CumReduce {
            op: ReduceOp::Sum,
            axis,
        } => {
            // The reversed running sum of gz (over the flattened input for
            // axis None, reshaped back).
            let x = &inputs[0];
            let g = reverse_cumsum(gz, axis.unwrap_or(0))?;
            Ok(vec![grad_or_zero(x, unflatten(g, x, *axis)?)])
        }
        Op::CumReduce {
            op: ReduceOp::Prod,
            axis,
        } => {
            let x = &inputs[0];
            if !x.dtype().is_float() {
                return Ok(vec![InputGrad::Zero]);
            }
            let flat = match axis {
                Some(_) => x.clone(),
                None => x.reshape(&[-1])?,
            };
            let g = cumprod_l_op(&flat, z, gz, axis.unwrap_or(0))?;
            Ok(vec![InputGrad::Grad(unflatten(g, x, *axis)?)])
        }
        Op::CumReduce { .. } => unreachable!("CumReduce accumulates only Sum and Prod"),
        Op::BooleanMask => Ok(vec![
            grad_or_zero(&inputs[0], boolean_mask_l_op(&inputs[0], &inputs[1], gz)?),
            InputGrad::Disconnected,
        ]),
        Op::ArgReduce { .. } => Ok(vec![InputGrad::Zero]),
        Op::Split { .. } => unreachable!("multi-output ops are handled above"),
        Op::Composite { .. } | Op::FusedReduce { .. } | Op::Gemm { .. } => Err(Error::Graph(
            format!("pullback of {}: expand the op first", op.name()),
        )),
        Op::Custom(c) => Err(Error::Graph(format!(
            "the op {} has no gradient (custom ops define no pullback)",
            c.name()
        ))),
    }
}

/// `t` reversed along `along`, summed cumulatively, and reversed back: the
/// element `k` is the sum of `t`'s elements from `k` to the end.
fn reverse_cumsum(t: &Tensor, along: usize) -> Result<Tensor> {
    let mut rev = vec![Idx::FULL; along];
    rev.push(Idx::from(..).step(-1));
    t.slice(&rev)?
        .cumulative(ReduceOp::Sum, Some(along as isize))?
        .slice(&rev)
}

/// A cumulative op's gradient `g`, computed over the flattened input when
/// `axis` is `None`, in the shape of `x`.
fn unflatten(g: Tensor, x: &Tensor, axis: Option<usize>) -> Result<Tensor> {
    match axis {
        Some(_) => Ok(g),
        None => Tensor::apply(Op::Reshape { ndim: x.ndim() }, &[&g, &x.shape()]),
    }
}

/// The pullback of `z = cumprod(x)` along `along`, exact with zeros (PyTensor
/// divides by `x` and gives NaN at a zero). Along each lane, with `i0` the
/// first zero: before it, `dz_j/dx_k = z_j / x_k`, so the gradient is the
/// reversed running sum of `gz * z` over `x`; at `i0` it is
/// `prod(x[:i0]) * sum_{j >= i0} gz_j * prod(x[i0+1..=j])`; after it, every
/// `z_j` holds the factor `x[i0] = 0`, so it is 0.
fn cumprod_l_op(x: &Tensor, z: &Tensor, gz: &Tensor, along: usize) -> Result<Tensor> {
    let dt = x.dtype();
    let a = Some(along as isize);
    let (zero, one) = (c(dt, 0.0), c(dt, 1.0));
    let i64c = |v: f64| c(DType::I64, v);
    let is_zero = eq(x, &zero)?;
    // Zeros up to and including each position, and strictly before it.
    let zeros_to = is_zero.cast(DType::I64).cumulative(ReduceOp::Sum, a)?;
    let zeros_before = sub(&zeros_to, &is_zero.cast(DType::I64))?;
    let before_first = eq(&zeros_to, &i64c(0.0))?;
    let at_most_first = eq(&zeros_before, &i64c(0.0))?;
    let no_zero_case = true_div(&reverse_cumsum(&mul(gz, z)?, along)?, x)?;
    // prod(x[:i0]) at i0, and the products of x after i0 up to each j.
    let head = switch(&before_first, x, &one)?.cumulative(ReduceOp::Prod, a)?;
    let tail = switch(&at_most_first, &one, x)?.cumulative(ReduceOp::Prod, a)?;
    let from_first = switch(&before_first, &zero, &mul(gz, &tail)?)?;
    let tail_sum = from_first.reduce(ReduceOp::Sum, Some(&[along as isize]), true)?;
    let first_zero_case = mul(&head, &tail_sum)?;
    switch(
        &before_first,
        &no_zero_case,
        &switch(&at_most_first, &first_zero_case, &zero)?,
    )
}

/// The pullback of `z = x[mask]`: the position `k` of `x`'s selected
/// sub-arrays in `z` is the running count of `mask` minus one, so the
/// gradient takes `gz`'s row at that position, and a row of zeros (appended
/// to `gz`) where `mask` is false.
fn boolean_mask_l_op(x: &Tensor, mask: &Tensor, gz: &Tensor) -> Result<Tensor> {
    let k = mask.ndim();
    let mut count = mask.cast(DType::I64).cumulative(ReduceOp::Sum, None)?;
    if k > 1 {
        count = Tensor::apply(Op::Reshape { ndim: k }, &[&count, &mask.shape()])?;
    }
    let rows = gz.shape_i(0)?;
    let position = switch(mask, &sub(&count, &c(DType::I64, 1.0))?, &rows)?;
    let mut zero_shape = vec![c(DType::I64, 1.0)];
    for d in k..x.ndim() {
        zero_shape.push(x.shape_i(d)?);
    }
    let zero_row =
        crate::tensor::alloc(&c(gz.dtype(), 0.0), &zero_shape.iter().collect::<Vec<_>>())?;
    let padded = crate::tensor::concatenate(&[gz, &zero_row], 0)?;
    take(&padded, &position, 0)
}

/// The pullback of `Split`: the parts' gradients joined back along `axis`,
/// zeros for a part that receives none.
fn split_l_op(
    axis: usize,
    x: &Tensor,
    outputs: &[Tensor],
    output_grads: &[Option<Tensor>],
) -> Result<Vec<InputGrad>> {
    let parts: Vec<Tensor> = outputs
        .iter()
        .zip(output_grads)
        .map(|(part, g)| match g {
            Some(g) => Ok(g.clone()),
            None => second(part, &c(part.dtype(), 0.0)),
        })
        .collect::<Result<_>>()?;
    let refs: Vec<&Tensor> = parts.iter().collect();
    let g = crate::tensor::concatenate(&refs, axis as isize)?;
    Ok(vec![grad_or_zero(x, g), InputGrad::Disconnected])
}

/// `g` for a float input, [`InputGrad::Zero`] for an integer or boolean one.
fn grad_or_zero(x: &Tensor, g: Tensor) -> InputGrad {
    if x.dtype().is_float() {
        InputGrad::Grad(g)
    } else {
        InputGrad::Zero
    }
}

/// `t` summed over its leading dimensions down to `ndim` (an update's `y`
/// broadcast to the selection through missing leading dimensions).
fn sum_leading(t: &Tensor, ndim: usize) -> Result<Tensor> {
    let extra = t.ndim().saturating_sub(ndim);
    if extra == 0 {
        return Ok(t.clone());
    }
    let axes: Vec<isize> = (0..extra as isize).collect();
    t.sum(&axes)
}

fn static_shape(x: &Tensor) -> Option<Vec<i64>> {
    x.ty().shape.iter().map(|d| d.map(|n| n as i64)).collect()
}

/// A 0-d constant of `dtype`.
fn c(dtype: DType, v: f64) -> Tensor {
    Tensor::constant(Value::scalar_f64(dtype, v))
}

/// `gz` where `cond`, else 0.
fn keep_where(cond: &Tensor, gz: &Tensor) -> Result<Tensor> {
    switch(cond, gz, &c(gz.dtype(), 0.0))
}

/// The float dtype gradients of this node are computed in.
fn grad_dtype(z: &Tensor, gz: &Tensor) -> DType {
    if z.dtype().is_float() {
        DType::upcast(z.dtype(), gz.dtype())
    } else {
        gz.dtype()
    }
}

/// The pullback of an element-wise scalar op: `x` its inputs, `z` its
/// output, `gz` the output gradient. Results have the output's broadcast
/// shape; integer and boolean inputs get [`InputGrad::Zero`].
pub fn scalar_l_op(op: ScalarOp, x: &[Tensor], z: &Tensor, gz: &Tensor) -> Result<Vec<InputGrad>> {
    use ScalarOp::*;
    let g = |t: Tensor| InputGrad::Grad(t);
    let zero = || InputGrad::Zero;
    let dt = grad_dtype(z, gz);
    let k = |v: f64| c(dt, v);
    // Only float outputs carry a gradient: everything of an integer or
    // boolean output is zero (PyTensor's discrete outputs).
    if !z.dtype().is_float() {
        return Ok((0..x.len())
            .map(|i| {
                if op == Second && i == 0 {
                    InputGrad::Disconnected
                } else {
                    InputGrad::Zero
                }
            })
            .collect());
    }
    // The derivative formulas compute in the gradient's float dtype: an
    // integer input is cast first (`atan2(y, x)` with a u8 `y` pulls back
    // `y / (x² + y²)`, and `y²` must not wrap in u8). Bool inputs keep
    // their dtype (a condition, and b² = b), as does every input of
    // `switch`, whose condition selects.
    let cast_ints: Vec<Tensor>;
    let x = if op == Switch {
        x
    } else {
        cast_ints = x
            .iter()
            .map(|t| match t.dtype() {
                d if d.is_float() || d == DType::Bool => t.clone(),
                _ => t.cast(dt),
            })
            .collect();
        &cast_ints[..]
    };
    let neg = |t: &Tensor| t.neg();
    let sq = |t: &Tensor| t.sqr();
    let grads: Vec<InputGrad> = match op {
        Add => x.iter().map(|_| g(gz.clone())).collect(),
        Sub => vec![g(gz.clone()), g(neg(gz))],
        Mul => {
            let mut out = Vec::with_capacity(x.len());
            for i in 0..x.len() {
                let mut factors: Vec<&Tensor> = vec![gz];
                factors.extend(
                    x.iter()
                        .enumerate()
                        .filter(|&(j, _)| j != i)
                        .map(|(_, t)| t),
                );
                out.push(g(elemwise(Mul, &factors)?));
            }
            out
        }
        TrueDiv => vec![
            g(true_div(gz, &x[1])?),
            g(neg(&true_div(&mul(gz, &x[0])?, &sq(&x[1]))?)),
        ],
        IntDiv => vec![zero(), zero()],
        // x mod y = x - y * floor(x / y).
        Mod => vec![
            g(gz.clone()),
            g(neg(&mul(&elemwise(IntDiv, &[&x[0], &x[1]])?, gz)?)),
        ],
        Pow => {
            let (b, e) = (&x[0], &x[1]);
            // A constant exponent's `e - 1` is folded here: the graph keeps
            // no node of constants only.
            let em1 = match e.constant_value() {
                Some(v) => Tensor::constant(Value::from_f64_array(
                    v.dtype(),
                    v.to_f64_array().mapv(|x| x - 1.0),
                )),
                None => sub(e, &k(1.0))?,
            };
            let gb = mul(&mul(gz, e)?, &elemwise(Pow, &[b, &em1])?)?;
            // log(0) * 0 ** e is NaN or -inf * 0: PyTensor takes 0 where the base is 0.
            let ge = mul(&mul(gz, &b.log())?, z)?;
            let ge = switch(&eq(b, &k(0.0))?, &k(0.0), &ge)?;
            vec![g(gb), g(ge)]
        }
        Neg => vec![g(neg(gz))],
        Reciprocal => vec![g(neg(&true_div(gz, &sq(&x[0]))?))],
        Abs => vec![g(mul(gz, &x[0].sign())?)],
        Sign | Floor | Ceil | Round | Trunc => vec![zero()],
        // atan2(y, x): dy = x / (x² + y²), dx = -y / (x² + y²).
        ArcTan2 => {
            let (y, xx) = (&x[0], &x[1]);
            let r2 = add(&sq(y), &sq(xx))?;
            vec![
                g(true_div(&mul(gz, xx)?, &r2)?),
                g(neg(&true_div(&mul(gz, y)?, &r2)?)),
            ]
        }
        // t·softplus(-z) + (1-t)·softplus(z): dz = sigmoid(z) - t, dt = -z.
        SigmoidBinaryCrossentropy => vec![
            g(mul(gz, &sub(&x[0].sigmoid(), &x[1])?)?),
            g(neg(&mul(gz, &x[0])?)),
        ],
        // hypot(a, b) = sqrt(a² + b²): da = a / z, db = b / z (NaN at the origin,
        // where it has no derivative).
        Hypot => vec![
            g(true_div(&mul(gz, &x[0])?, z)?),
            g(true_div(&mul(gz, &x[1])?, z)?),
        ],
        // copysign(a, b) = ±a: da = copysign(1, a) * copysign(1, b), db = 0.
        CopySign => {
            let sa = elemwise(CopySign, &[&k(1.0), &x[0]])?;
            let sb = elemwise(CopySign, &[&k(1.0), &x[1]])?;
            vec![g(mul(gz, &mul(&sa, &sb)?)?), zero()]
        }
        // fmod(a, b) = a - b * trunc(a / b).
        Fmod => vec![
            g(gz.clone()),
            g(neg(&mul(
                &elemwise(Trunc, &[&true_div(&x[0], &x[1])?])?,
                gz,
            )?)),
        ],
        Sqr => vec![g(mul(&mul(gz, &x[0])?, &k(2.0))?)],
        Maximum | Minimum => {
            // A tie goes to the first argument (PyTensor: gx = eq(z, x) * gz,
            // gy = (1 - eq(z, x)) * gz); NaN in x routes gz to y.
            let first = eq(z, &x[0])?;
            vec![g(keep_where(&first, gz)?), g(switch(&first, &k(0.0), gz)?)]
        }
        Clip => {
            let (v, lo, hi) = (&x[0], &x[1], &x[2]);
            let inside = elemwise(And, &[&elemwise(Ge, &[v, lo])?, &elemwise(Le, &[v, hi])?])?;
            vec![
                g(keep_where(&inside, gz)?),
                g(keep_where(&elemwise(Lt, &[v, lo])?, gz)?),
                g(keep_where(&elemwise(Gt, &[v, hi])?, gz)?),
            ]
        }
        Exp => vec![g(mul(gz, z)?)],
        Exp2 => vec![g(mul(&mul(gz, z)?, &k(std::f64::consts::LN_2))?)],
        Expm1 => vec![g(mul(gz, &x[0].exp())?)],
        Log => vec![g(true_div(gz, &x[0])?)],
        Log2 => vec![g(true_div(gz, &mul(&x[0], &k(std::f64::consts::LN_2))?)?)],
        Log10 => vec![g(true_div(gz, &mul(&x[0], &k(std::f64::consts::LN_10))?)?)],
        Log1p => vec![g(true_div(gz, &add(&x[0], &k(1.0))?)?)],
        Sqrt => vec![g(true_div(&mul(gz, &k(0.5))?, z)?)],
        Sigmoid => vec![g(mul(&mul(gz, z)?, &sub(&k(1.0), z)?)?)],
        Softplus => vec![g(mul(gz, &x[0].sigmoid())?)],
        // d/dx log(1 - exp(x)) = -1 / expm1(-x) (-inf at 0 through the division).
        Log1mexp => vec![g(mul(gz, &true_div(&k(-1.0), &neg(&x[0]).expm1())?)?)],
        Sin => vec![g(mul(gz, &x[0].cos())?)],
        Cos => vec![g(neg(&mul(gz, &x[0].sin())?))],
        Tan => vec![g(true_div(gz, &sq(&x[0].cos()))?)],
        ArcSin => vec![g(true_div(gz, &sub(&k(1.0), &sq(&x[0]))?.sqrt())?)],
        ArcCos => vec![g(neg(&true_div(gz, &sub(&k(1.0), &sq(&x[0]))?.sqrt())?))],
        ArcTan => vec![g(true_div(gz, &add(&k(1.0), &sq(&x[0]))?)?)],
        Sinh => vec![g(mul(gz, &x[0].cosh())?)],
        Cosh => vec![g(mul(gz, &x[0].sinh())?)],
        Tanh => vec![g(mul(gz, &sub(&k(1.0), &sq(z))?)?)],
        ArcSinh => vec![g(true_div(gz, &add(&sq(&x[0]), &k(1.0))?.sqrt())?)],
        ArcCosh => vec![g(true_div(gz, &sub(&sq(&x[0]), &k(1.0))?.sqrt())?)],
        ArcTanh => vec![g(true_div(gz, &sub(&k(1.0), &sq(&x[0]))?)?)],
        Erf | Erfc => {
            let two_over_sqrt_pi = std::f64::consts::FRAC_2_SQRT_PI;
            let sign = if op == Erf { 1.0 } else { -1.0 };
            let d = mul(&k(sign * two_over_sqrt_pi), &neg(&sq(&x[0])).exp())?;
            vec![g(mul(gz, &d)?)]
        }
        Switch => vec![
            zero(),
            g(keep_where(&x[0], gz)?),
            g(switch(&x[0], &k(0.0), gz)?),
        ],
        // second(a, b) only takes a's shape: a's values are unused.
        Second => vec![InputGrad::Disconnected, g(gz.clone())],
        Identity | Cast(_) => vec![g(gz.clone())],
        Lt | Le | Gt | Ge | Eq | Neq | And | Or | Xor | Invert | LeftShift | RightShift | IsNan
        | IsInf | IsFinite => {
            unreachable!("{op} has a boolean or integer output, handled above")
        }
    };
    // Integer and boolean inputs carry no gradient value.
    Ok(grads
        .into_iter()
        .zip(x)
        .map(|(gr, t)| match gr {
            InputGrad::Grad(_) if !t.dtype().is_float() => InputGrad::Zero,
            other => other,
        })
        .collect())
}

/// The pullback of a DimShuffle: the inverse permutation, re-inserting the
/// broadcastable dimensions it dropped and removing (summing) the ones it added.
fn dimshuffle_l_op(input_ndim: usize, new_order: &[Option<usize>], gz: &Tensor) -> Result<Tensor> {
    let added: Vec<isize> = new_order
        .iter()
        .enumerate()
        .filter(|(_, d)| d.is_none())
        .map(|(i, _)| i as isize)
        .collect();
    // Drop the added dimensions: a DimShuffle when gz has them statically of
    // size 1, else a sum (their run-time size is 1 either way).
    let (g, kept): (Tensor, Vec<usize>) = {
        let kept: Vec<usize> = new_order.iter().flatten().copied().collect();
        let static_one = added.iter().all(|&a| gz.ty().shape[a as usize] == Some(1));
        let g = if added.is_empty() {
            gz.clone()
        } else if static_one {
            let order: Vec<Option<usize>> = (0..new_order.len())
                .filter(|i| new_order[*i].is_some())
                .map(Some)
                .collect();
            gz.dimshuffle(&order)?
        } else {
            gz.sum(&added)?
        };
        (g, kept)
    };
    // g's dimension j is input dimension kept[j]; dropped input dimensions
    // (broadcastable) come back as new ones.
    let order: Vec<Option<usize>> = (0..input_ndim)
        .map(|d| kept.iter().position(|&k| k == d))
        .collect();
    if order.iter().enumerate().all(|(i, o)| *o == Some(i)) && order.len() == g.ndim() {
        return Ok(g);
    }
    g.dimshuffle(&order)
}

/// `gz` (of the reduced shape) with the reduced axes re-inserted as
/// broadcastable ones, so that it broadcasts against the input.
fn expand_reduced(gz: &Tensor, ndim: usize, axes: Option<&[usize]>) -> Result<Tensor> {
    let reduced = |d: usize| axes.is_none_or(|a| a.contains(&d));
    let mut k = 0;
    let order: Vec<Option<usize>> = (0..ndim)
        .map(|d| {
            if reduced(d) {
                None
            } else {
                k += 1;
                Some(k - 1)
            }
        })
        .collect();
    if order.iter().all(Option::is_some) {
        return Ok(gz.clone());
    }
    gz.dimshuffle(&order)
}

/// The pullback of a CAReduce over `axes` (`None`: all) of `x` giving `z`.
fn reduce_l_op(
    r: ReduceOp,
    axes: Option<&[usize]>,
    x: &Tensor,
    z: &Tensor,
    gz: &Tensor,
) -> Result<Vec<InputGrad>> {
    if !x.dtype().is_float() || !z.dtype().is_float() {
        return Ok(vec![InputGrad::Zero]);
    }
    let nd = x.ndim();
    let gz_b = expand_reduced(gz, nd, axes)?;
    let dt = x.dtype();
    let zero = c(dt, 0.0);
    let g = match r {
        // Every element receives gz: broadcast it to x's shape.
        ReduceOp::Sum => second(x, &gz_b)?,
        ReduceOp::Max | ReduceOp::Min => {
            // gz is shared equally by the positions equal to the result (as
            // JAX; PyTensor gives each of them all of gz, which doubles the
            // derivative of `max(a + x)` over two equal entries of `a`).
            let z_b = expand_reduced(z, nd, axes)?;
            let is_extreme = eq(x, &z_b)?;
            let axes_i: Option<Vec<isize>> = axes.map(|a| a.iter().map(|&d| d as isize).collect());
            let ties = is_extreme
                .cast(dt)
                .reduce(ReduceOp::Sum, axes_i.as_deref(), true)?;
            switch(&is_extreme, &true_div(&gz_b, &ties)?, &zero)?
        }
        ReduceOp::Prod => {
            // Exact with zeros: with no zero in a group, prod / x; with one,
            // the product of the others at the zero and 0 elsewhere; with
            // more, 0 everywhere.
            let axes_i: Option<Vec<isize>> = axes.map(|a| a.iter().map(|&d| d as isize).collect());
            let is_zero = eq(x, &zero)?;
            let nonzero = switch(&is_zero, &c(dt, 1.0), x)?;
            let prod_nz = nonzero.reduce(ReduceOp::Prod, axes_i.as_deref(), true)?;
            let n_zeros =
                is_zero
                    .cast(DType::I64)
                    .reduce(ReduceOp::Sum, axes_i.as_deref(), true)?;
            let none = eq(&n_zeros, &c(DType::I64, 0.0))?;
            let one = eq(&n_zeros, &c(DType::I64, 1.0))?;
            let z_b = expand_reduced(z, nd, axes)?;
            let no_zero_case = true_div(&z_b, x)?;
            let one_zero_case = switch(&is_zero, &prod_nz, &zero)?;
            let d = switch(&none, &no_zero_case, &switch(&one, &one_zero_case, &zero)?)?;
            mul(&gz_b, &d)?
        }
        ReduceOp::All | ReduceOp::Any => return Ok(vec![InputGrad::Zero]),
    };
    Ok(vec![InputGrad::Grad(g)])
}

/// The pullback of numpy `dot` on 1-d and 2-d operands.
/// `BatchedDot`: `gx = gz @ yᵀ`, `gy = xᵀ @ gz` per batch (transposing the
/// last two axes), each summed over the leading batch dimensions its input
/// lacks (the driver sums the broadcast size-1 ones).
fn batched_dot_l_op(x: &Tensor, y: &Tensor, gz: &Tensor) -> Result<Vec<InputGrad>> {
    let swap = |t: &Tensor| -> Result<Tensor> {
        let nd = t.ndim();
        let mut order: Vec<Option<usize>> = (0..nd - 2).map(Some).collect();
        order.extend([Some(nd - 1), Some(nd - 2)]);
        t.dimshuffle(&order)
    };
    let fit_rank = |g: Tensor, t: &Tensor| -> Result<Tensor> {
        let extra = g.ndim() - t.ndim();
        if extra == 0 {
            return Ok(g);
        }
        let axes: Vec<isize> = (0..extra as isize).collect();
        g.reduce(ReduceOp::Sum, Some(&axes), false)
    };
    let apply = |a: &Tensor, b: &Tensor| Tensor::apply(Op::BatchedDot, &[a, b]);
    let gx = fit_rank(apply(gz, &swap(y)?)?, x)?;
    let gy = fit_rank(apply(&swap(x)?, gz)?, y)?;
    Ok(vec![float_grad(x, gx), float_grad(y, gy)])
}

/// A product's gradient `g` for its operand `t`: zero for an integer or
/// boolean operand (PyTensor's convention for discrete inputs).
fn float_grad(t: &Tensor, g: Tensor) -> InputGrad {
    if t.dtype().is_float() {
        InputGrad::Grad(g)
    } else {
        InputGrad::Zero
    }
}

fn dot_l_op(x: &Tensor, y: &Tensor, gz: &Tensor) -> Result<Vec<InputGrad>> {
    let dot = crate::tensor::dot;
    let outer = |a: &Tensor, b: &Tensor| -> Result<Tensor> {
        mul(
            &a.dimshuffle(&[Some(0), None])?,
            &b.dimshuffle(&[None, Some(0)])?,
        )
    };
    let (gx, gy) = match (x.ndim(), y.ndim()) {
        (2, 2) => (dot(gz, &y.t())?, dot(&x.t(), gz)?),
        (2, 1) => (outer(gz, y)?, dot(&x.t(), gz)?),
        (1, 2) => (dot(y, gz)?, outer(x, gz)?),
        _ => (mul(gz, y)?, mul(gz, x)?),
    };
    Ok(vec![float_grad(x, gx), float_grad(y, gy)])
}
