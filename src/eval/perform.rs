//! Reference `perform` of every op.

use ndarray::{ArrayD, Axis, Dimension, IxDyn};
use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::ops::composite::round_to;
use crate::ops::scalar::{nan_max, nan_min};
use crate::ops::subtensor::{self, DimSel};
use crate::ops::{ArgOp, CRef, Composite, IndexEntry, Op, ReduceOp, ScalarOp};
use crate::types::{DType, Element, TensorType, Value};

/// Computes the outputs of `op` on `inputs`, whose static types are `types`.
pub fn perform(op: &Op, inputs: &[&Value], types: &[&TensorType]) -> Result<Vec<Value>> {
    let name = op.name();
    match op {
        Op::Elemwise { scalar, .. } => Ok(vec![elemwise(&name, *scalar, inputs, types)?]),
        Op::Composite { composite, .. } => composite_perform(&name, composite, inputs, types),
        Op::DimShuffle { new_order, .. } => Ok(vec![dimshuffle(&name, new_order, inputs[0])?]),
        Op::CAReduce { op: r, axes } => Ok(vec![reduce(&name, *r, axes.as_deref(), inputs[0])?]),
        Op::FusedReduce {
            op: r,
            axes,
            pre,
            post,
        } => {
            // By definition: the CAReduce of the Composite's value, then the
            // post-map of each reduced element and the one-element extras.
            let (pre_ins, extras) = crate::ops::split_fused(pre, inputs);
            let (pre_types, extra_types) = crate::ops::split_fused(pre, types);
            let mapped = composite_perform(&name, pre, pre_ins, pre_types)?;
            let reduced = reduce(&name, *r, axes.as_deref(), &mapped[0])?;
            let Some(post) = post else {
                return Ok(vec![reduced]);
            };
            // The post-map is a Composite over the reduced value (typed by
            // its own shape) and the one-element extras.
            let rty = TensorType::new(
                reduced.dtype(),
                reduced.shape().iter().map(|&d| Some(d)).collect(),
            );
            let mut post_ins = vec![&reduced];
            post_ins.extend(extras);
            let mut post_types = vec![&rty];
            post_types.extend(extra_types);
            composite_perform(&name, post, &post_ins, &post_types)
        }
        Op::ArgReduce {
            op: a,
            axis,
            with_value,
        } => {
            let (value, index) =
                crate::with_value!(inputs[0], x => arg_reduce(&name, *a, *axis, x)?);
            Ok(if *with_value {
                vec![value, index]
            } else {
                vec![index]
            })
        }
        Op::Softmax { axis, log } => Ok(vec![softmax(&name, *axis, *log, inputs[0])?]),
        Op::LogSumExp { axis } => Ok(vec![log_sum_exp(&name, *axis, inputs[0])?]),
        Op::CumReduce { op: r, axis } => Ok(vec![cumulative(&name, *r, *axis, inputs[0])?]),
        Op::Dot => Ok(vec![dot(&name, inputs[0], inputs[1])?]),
        Op::BatchedDot => Ok(vec![batched_dot(&name, inputs, types)?]),
        Op::Gemm { .. } => Ok(vec![gemm(&name, inputs)?]),
        Op::Alloc => Ok(vec![alloc(&name, inputs)?]),
        Op::Reshape { ndim } => Ok(vec![reshape(&name, *ndim, inputs[0], inputs[1])?]),
        Op::Shape => {
            let s: Vec<i64> = inputs[0].shape().iter().map(|&d| d as i64).collect();
            Ok(vec![Value::I64(
                ArrayD::from_shape_vec(IxDyn(&[s.len()]), s).expect("1-d"),
            )])
        }
        Op::ShapeI(i) if inputs.len() == 1 => Ok(vec![Value::scalar_i64(
            DType::I64,
            inputs[0].shape()[*i] as i64,
        )]),
        Op::ShapeI(i) => Ok(vec![Value::scalar_i64(
            DType::I64,
            elemwise_shape(&name, inputs, types)?[*i] as i64,
        )]),
        Op::Subtensor { idx } => Ok(vec![subtensor(&name, idx, inputs)?]),
        Op::IncSubtensor { idx, set, .. } => {
            Ok(vec![inc_subtensor(&name, idx, *set, inputs, types)?])
        }
        Op::AdvancedSubtensor1 { axis } => Ok(vec![super::indexing::take(
            &name, *axis, inputs[0], inputs[1],
        )?]),
        Op::AdvancedIncSubtensor1 { axis, set } => Ok(vec![super::indexing::inc(
            &name, *axis, *set, inputs, types,
        )?]),
        Op::BooleanMask => Ok(vec![super::indexing::boolean_mask(
            &name, inputs[0], inputs[1],
        )?]),
        Op::Join { axis } => Ok(vec![super::indexing::join(&name, *axis, inputs)?]),
        Op::Split { axis, n } => super::indexing::split(&name, *axis, *n, inputs[0], inputs[1]),
        Op::Custom(c) => {
            // The declared output types for these input types: the values
            // are checked against them before any other op reads them.
            let in_types: Vec<TensorType> = types.iter().map(|&t| t.clone()).collect();
            let out_types = c.infer_types(&in_types)?;
            let outs = c.perform(inputs)?;
            super::check_custom_outputs(&name, &out_types, &outs)?;
            Ok(outs)
        }
    }
}

/// An empty vector with room for the elements of an output of `shape`: an
/// error naming `op` (not an abort) when that is more than can be allocated.
fn output_vec<T: Element>(op: &str, shape: &[usize]) -> Result<Vec<T>> {
    let bytes = super::array_bytes(op, T::DTYPE, shape)?;
    let mut v = Vec::new();
    v.try_reserve_exact(bytes / T::DTYPE.size_of())
        .map_err(|_| super::out_of_memory(op, bytes, T::DTYPE, shape))?;
    Ok(v)
}

/// The run-time output shape of an element-wise op under the static broadcasting rule.
pub fn elemwise_shape(name: &str, inputs: &[&Value], types: &[&TensorType]) -> Result<Vec<usize>> {
    let ndim = inputs.first().map_or(0, |v| v.ndim());
    let mut shape = vec![1usize; ndim];
    for (d, out) in shape.iter_mut().enumerate() {
        let mut size: Option<usize> = None;
        for (k, (v, t)) in inputs.iter().zip(types).enumerate() {
            if v.ndim() != ndim {
                return Err(Error::eval(
                    name,
                    format!("input {k} has {} dimensions, expected {ndim}", v.ndim()),
                ));
            }
            let s = v.shape()[d];
            if t.is_broadcastable(d) {
                if s != 1 {
                    return Err(Error::eval(
                        name,
                        format!("input {k} is broadcastable in dimension {d} but has size {s}"),
                    ));
                }
                continue;
            }
            match size {
                None => size = Some(s),
                Some(prev) if prev != s => {
                    return Err(Error::eval(
                        name,
                        format!(
                            "shape mismatch in dimension {d}: sizes {prev} and {s} (input {k}); only dimensions of static size 1 broadcast"
                        ),
                    ))
                }
                _ => {}
            }
        }
        *out = size.unwrap_or(1);
    }
    Ok(shape)
}

/// `f` of the elements of `arrays` broadcast to `shape`, in row-major
/// order (an error naming `name` when the output cannot be allocated).
fn map_broadcast<T: Copy, U: Element>(
    name: &str,
    arrays: &[ArrayD<T>],
    shape: &[usize],
    f: impl Fn(&[T]) -> U,
) -> Result<Vec<U>> {
    let mut out: Vec<U> = output_vec(name, shape)?;
    let n: usize = shape.iter().product(); // checked by output_vec
    let views: Vec<_> = arrays
        .iter()
        .map(|a| a.broadcast(IxDyn(shape)).expect("shape checked"))
        .collect();
    let mut iters: Vec<_> = views.iter().map(|v| v.iter()).collect();
    let mut args: SmallVec<[T; 3]> = SmallVec::new();
    for _ in 0..n {
        args.clear();
        args.extend(iters.iter_mut().map(|it| *it.next().expect("same length")));
        out.push(f(&args));
    }
    Ok(out)
}

fn elemwise(name: &str, op: ScalarOp, inputs: &[&Value], types: &[&TensorType]) -> Result<Value> {
    let shape = elemwise_shape(name, inputs, types)?;
    let in_dtypes: SmallVec<[DType; 3]> = inputs.iter().map(|v| v.dtype()).collect();
    let out_dtype = op.output_dtype(&in_dtypes)?;
    fn array<T>(shape: &[usize], out: Vec<T>) -> ArrayD<T> {
        ArrayD::from_shape_vec(IxDyn(shape), out).expect("sized")
    }
    if op.computes_in_float(&in_dtypes, out_dtype) {
        let arrays: Vec<ArrayD<f64>> = inputs.iter().map(|v| v.to_f64_array()).collect();
        // `from_f64_array` converts with Rust `as` semantics (a float cast to an integer saturates).
        let out = map_broadcast(name, &arrays, &shape, |args| op.eval_f64(args))?;
        Ok(Value::from_f64_array(out_dtype, array(&shape, out)))
    } else if op.computes_in_u64(&in_dtypes, out_dtype) {
        // A float input in the integer domains (the condition of a `switch`)
        // is carried as its truth value: 0.5 and NaN are true, as in numpy's `where`.
        let arrays: Vec<ArrayD<u64>> = inputs
            .iter()
            .map(|v| {
                if v.dtype().is_float() {
                    v.cast(DType::Bool).to_u64_array()
                } else {
                    v.to_u64_array()
                }
            })
            .collect();
        let out = map_broadcast(name, &arrays, &shape, |args| op.eval_u64(args, out_dtype))?;
        Ok(Value::from_u64_array(out_dtype, array(&shape, out)))
    } else {
        let arrays: Vec<ArrayD<i64>> = inputs
            .iter()
            .map(|v| {
                if v.dtype().is_float() {
                    v.cast(DType::Bool).to_i64_array()
                } else {
                    v.to_i64_array()
                }
            })
            .collect();
        let out = map_broadcast(name, &arrays, &shape, |args| op.eval_i64(args, out_dtype))?;
        Ok(Value::from_i64_array(out_dtype, array(&shape, out)))
    }
}

fn composite_perform(
    name: &str,
    c: &Composite,
    inputs: &[&Value],
    types: &[&TensorType],
) -> Result<Vec<Value>> {
    let shape = elemwise_shape(name, inputs, types)?;
    let mut outs: Vec<Vec<f64>> = Vec::with_capacity(c.outputs.len());
    for _ in 0..c.outputs.len() {
        outs.push(output_vec(name, &shape)?);
    }
    let n: usize = shape.iter().product(); // checked by output_vec
    let arrays: Vec<ArrayD<f64>> = inputs.iter().map(|v| v.to_f64_array()).collect();
    let views: Vec<_> = arrays
        .iter()
        .map(|a| a.broadcast(IxDyn(&shape)).expect("shape checked"))
        .collect();
    let mut iters: Vec<_> = views.iter().map(|v| v.iter()).collect();
    let mut args: Vec<f64> = Vec::with_capacity(inputs.len());
    for _ in 0..n {
        args.clear();
        args.extend(iters.iter_mut().map(|it| *it.next().expect("same length")));
        for (o, v) in outs.iter_mut().zip(c.eval(&args)) {
            o.push(v);
        }
    }
    Ok(outs
        .into_iter()
        .zip(c.output_dtypes())
        .map(|(o, d)| {
            Value::from_f64_array(d, ArrayD::from_shape_vec(IxDyn(&shape), o).expect("sized"))
        })
        .collect())
}

/// The values of the scalar bound inputs of an index.
fn bound_values(bounds: &[&Value]) -> Vec<i64> {
    bounds
        .iter()
        .map(|b| b.to_i64_array().iter().next().copied().unwrap_or(0))
        .collect()
}

/// The input position of selected element `ix` (an index over the kept dimensions).
fn selected_position(sel: &[DimSel], ix: &[usize]) -> Vec<usize> {
    let mut k = 0;
    sel.iter()
        .map(|s| {
            if s.keep {
                let i = ix[k];
                k += 1;
                (s.start as isize + i as isize * s.step) as usize
            } else {
                s.start
            }
        })
        .collect()
}

/// `x[idx]` resolved by numpy's rules (see `ops::subtensor`), as a new array.
fn subtensor(name: &str, idx: &[IndexEntry], inputs: &[&Value]) -> Result<Value> {
    let (x, bounds) = inputs.split_first().expect("typed: x first");
    let sel = subtensor::resolve(idx, x.shape(), &bound_values(bounds))
        .map_err(|m| Error::eval(name, m))?;
    let shape = subtensor::selected_shape(&sel);
    Ok(
        crate::map_value!(x, a => ArrayD::from_shape_fn(IxDyn(&shape), |ix| {
            a[IxDyn(&selected_position(&sel, ix.slice()))]
        })),
    )
}

/// A copy of `x` whose selection `x[idx]` is replaced by (`set`) or
/// incremented by `y` broadcast to it (only statically size-1 dimensions of
/// `y` broadcast), element by element with `ops::subtensor::update_program`.
fn inc_subtensor(
    name: &str,
    idx: &[IndexEntry],
    set: bool,
    inputs: &[&Value],
    types: &[&TensorType],
) -> Result<Value> {
    let [x, y, bounds @ ..] = inputs else {
        return Err(Error::eval(name, "expects x, y and the bound inputs"));
    };
    let sel = subtensor::resolve(idx, x.shape(), &bound_values(bounds))
        .map_err(|m| Error::eval(name, m))?;
    let shape = subtensor::selected_shape(&sel);
    let Some(off) = shape.len().checked_sub(y.ndim()) else {
        return Err(Error::eval(
            name,
            format!(
                "the values have {} dimensions, the selection {}",
                y.ndim(),
                shape.len()
            ),
        ));
    };
    for (k, &n) in y.shape().iter().enumerate() {
        if n != shape[off + k] && !types[1].is_broadcastable(k) {
            return Err(Error::eval(
                name,
                format!(
                    "the values of shape {:?} do not fit the selection of shape {shape:?}",
                    y.shape()
                ),
            ));
        }
    }
    let yb = crate::map_value!(*y, a => a
        .broadcast(IxDyn(&shape))
        .expect("checked: equal or size 1")
        .to_owned());
    let sub = subtensor(name, idx, inputs_without_y(x, bounds).as_slice())?;
    let prog = subtensor::update_program(set, x.dtype(), y.dtype())?;
    let st = TensorType::new(x.dtype(), shape.iter().map(|&n| Some(n)).collect());
    let yt = TensorType::new(y.dtype(), shape.iter().map(|&n| Some(n)).collect());
    let args: Vec<&Value> = if set { vec![&yb] } else { vec![&sub, &yb] };
    let arg_types: Vec<&TensorType> = if set { vec![&yt] } else { vec![&st, &yt] };
    let new = exact_composite(name, &prog, &args, &arg_types)?;
    let mut out = (*x).clone();
    crate::with_value!(&mut out, a => scatter(a, &sel, &new));
    Ok(out)
}

/// `[x, bounds...]`: the inputs of the Subtensor an update's selection is.
fn inputs_without_y<'a>(x: &'a Value, bounds: &[&'a Value]) -> Vec<&'a Value> {
    let mut v = vec![x];
    v.extend_from_slice(bounds);
    v
}

/// A single-output, at most two-node update program applied element-wise,
/// node by node with the evaluator's element-wise ops (exact in every
/// dtype, `i64` included, which `Composite::eval` carries as `f64`).
fn exact_composite(
    name: &str,
    prog: &Composite,
    inputs: &[&Value],
    types: &[&TensorType],
) -> Result<Value> {
    let mut vals: Vec<Value> = Vec::with_capacity(prog.nodes.len());
    for n in &prog.nodes {
        let args: Vec<&Value> = n
            .args
            .iter()
            .map(|a| match *a {
                CRef::Input(i) => inputs[i as usize],
                CRef::Node(i) => &vals[i as usize],
                CRef::Const(_) => unreachable!("update programs have no constants"),
            })
            .collect();
        let arg_types: Vec<&TensorType> = n
            .args
            .iter()
            .map(|a| match *a {
                CRef::Input(i) => types[i as usize],
                _ => types[0],
            })
            .collect();
        let v = match n.op {
            ScalarOp::Identity => args[0].clone(),
            ScalarOp::Cast(d) => args[0].cast(d),
            op => elemwise(name, op, &args, &arg_types)?,
        };
        vals.push(v);
    }
    Ok(vals.pop().expect("one node at least"))
}

/// Writes `vals` (the selection's shape, `a`'s dtype) into the selection `sel` of `a`.
fn scatter<T: Element>(a: &mut ArrayD<T>, sel: &[DimSel], vals: &Value) {
    let v: ArrayD<T> = if T::DTYPE.is_float() {
        vals.to_f64_array().mapv(T::from_f64)
    } else {
        vals.to_i64_array().mapv(T::from_i64)
    };
    for (ix, &e) in v.indexed_iter() {
        a[IxDyn(&selected_position(sel, ix.slice()))] = e;
    }
}

fn dimshuffle(name: &str, new_order: &[Option<usize>], x: &Value) -> Result<Value> {
    let kept: Vec<usize> = new_order.iter().flatten().copied().collect();
    for d in 0..x.ndim() {
        if !kept.contains(&d) && x.shape()[d] != 1 {
            return Err(Error::eval(
                name,
                format!("dropped dimension {d} has size {}", x.shape()[d]),
            ));
        }
    }
    Ok(crate::map_value!(x, a => {
        let mut v = a.view();
        // Drop the unlisted (size-1) dimensions, highest first.
        for d in (0..a.ndim()).rev() {
            if !kept.contains(&d) {
                v = v.index_axis_move(Axis(d), 0);
            }
        }
        // Renumber the kept dimensions after the drops, then permute.
        let mut sorted = kept.clone();
        sorted.sort_unstable();
        let perm: Vec<usize> = kept.iter().map(|k| sorted.iter().position(|s| s == k).expect("kept")).collect();
        let mut v = v.permuted_axes(IxDyn(&perm));
        for (pos, d) in new_order.iter().enumerate() {
            if d.is_none() {
                v = v.insert_axis(Axis(pos));
            }
        }
        v.to_owned()
    }))
}

fn reduce(name: &str, op: ReduceOp, axes: Option<&[usize]>, x: &Value) -> Result<Value> {
    let all: Vec<usize> = (0..x.ndim()).collect();
    let axes = axes.unwrap_or(&all);
    let out_dtype = op.output_dtype(x.dtype());
    if matches!(op, ReduceOp::Max | ReduceOp::Min) {
        if let Some(&a) = axes.iter().find(|&&a| x.shape()[a] == 0) {
            return Err(Error::eval(
                name,
                format!(
                    "zero-size reduction along axis {a}: {} has no identity",
                    op.name().to_lowercase()
                ),
            ));
        }
    }
    let float = x.dtype().is_float();
    if float || matches!(op, ReduceOp::All | ReduceOp::Any) {
        let mut a = x.to_f64_array();
        for &ax in axes.iter().rev() {
            a = match op {
                ReduceOp::Sum => a.fold_axis(Axis(ax), 0.0, |s, &v| s + v),
                ReduceOp::Prod => a.fold_axis(Axis(ax), 1.0, |s, &v| s * v),
                ReduceOp::Max => a.fold_axis(Axis(ax), f64::NEG_INFINITY, |s, &v| nan_max(*s, v)),
                ReduceOp::Min => a.fold_axis(Axis(ax), f64::INFINITY, |s, &v| nan_min(*s, v)),
                ReduceOp::All => a.fold_axis(Axis(ax), 1.0, |s, &v| {
                    ((*s != 0.0) && (v != 0.0)) as i64 as f64
                }),
                ReduceOp::Any => a.fold_axis(Axis(ax), 0.0, |s, &v| {
                    ((*s != 0.0) || (v != 0.0)) as i64 as f64
                }),
            };
        }
        Ok(Value::from_f64_array(
            out_dtype,
            a.mapv(|v| round_to(v, out_dtype)),
        ))
    } else if x.dtype() == DType::U64 && matches!(op, ReduceOp::Max | ReduceOp::Min) {
        let mut a = x.to_u64_array();
        for &ax in axes.iter().rev() {
            a = match op {
                ReduceOp::Max => a.fold_axis(Axis(ax), 0, |s, &v| (*s).max(v)),
                _ => a.fold_axis(Axis(ax), u64::MAX, |s, &v| (*s).min(v)),
            };
        }
        Ok(Value::from_u64_array(out_dtype, a))
    } else {
        let mut a = x.to_i64_array();
        for &ax in axes.iter().rev() {
            a = match op {
                ReduceOp::Sum => a.fold_axis(Axis(ax), 0i64, |s, &v| s.wrapping_add(v)),
                ReduceOp::Prod => a.fold_axis(Axis(ax), 1i64, |s, &v| s.wrapping_mul(v)),
                ReduceOp::Max => a.fold_axis(Axis(ax), i64::MIN, |s, &v| (*s).max(v)),
                ReduceOp::Min => a.fold_axis(Axis(ax), i64::MAX, |s, &v| (*s).min(v)),
                ReduceOp::All | ReduceOp::Any => unreachable!("handled in the float branch"),
            };
        }
        Ok(Value::from_i64_array(out_dtype, a))
    }
}

/// numpy's `argmax` / `argmin` of `x` over `axis` (`None`: flattened in C
/// order), with the extreme's value: the first occurrence wins ties, and
/// the first NaN is the extreme (so the value is the NaN-propagating
/// `max` / `min`). Returns `(value, index)`.
fn arg_reduce<T: Element + PartialOrd>(
    name: &str,
    op: ArgOp,
    axis: Option<usize>,
    x: &ArrayD<T>,
) -> Result<(Value, Value)> {
    let flat;
    let (x, ax) = match axis {
        Some(a) => (x.view(), a),
        None => {
            flat = x
                .as_standard_layout()
                .into_owned()
                .into_shape_with_order(IxDyn(&[x.len()]))
                .expect("same size");
            (flat.view(), 0)
        }
    };
    if x.shape()[ax] == 0 {
        return Err(Error::eval(
            name,
            format!("attempt to get arg{} of an empty sequence", op.word()),
        ));
    }
    let better = |v: T, best: T| {
        #[allow(clippy::eq_op)]
        let v_nan = v != v;
        #[allow(clippy::eq_op)]
        let best_nan = best != best;
        !best_nan
            && (v_nan
                || match op {
                    ArgOp::Max => v > best,
                    ArgOp::Min => v < best,
                })
    };
    let mut out_shape = x.shape().to_vec();
    out_shape.remove(ax);
    let mut values = output_vec::<T>(name, &out_shape)?;
    let mut indices = output_vec::<i64>(name, &out_shape)?;
    for lane in x.lanes(Axis(ax)) {
        let (mut best, mut at) = (lane[0], 0usize);
        for (k, &v) in lane.iter().enumerate().skip(1) {
            if better(v, best) {
                best = v;
                at = k;
            }
        }
        values.push(best);
        indices.push(at as i64);
    }
    let wrap = |e| Error::eval(name, format!("output shape: {e}"));
    Ok((
        T::wrap(ArrayD::from_shape_vec(IxDyn(&out_shape), values).map_err(wrap)?),
        Value::I64(ArrayD::from_shape_vec(IxDyn(&out_shape), indices).map_err(wrap)?),
    ))
}

/// `softmax` (or with `log`, `log_softmax`) of `x` along `axis` (`None`:
/// all elements), computed in `f64` per lane as `e = exp(x - max)`,
/// `e / sum(e)` (`(x - max) - ln(sum(e))`), then rounded to the dtype.
fn softmax(name: &str, axis: Option<usize>, log: bool, x: &Value) -> Result<Value> {
    if !x.dtype().is_float() {
        return Err(Error::eval(
            name,
            format!("expects a float input, got {}", x.dtype()),
        ));
    }
    let shape = x.shape().to_vec();
    // In standard layout, so that flattening and the reshape back follow C
    // order for any input layout (a transposed view included).
    let a = x.to_f64_array().as_standard_layout().into_owned();
    let mut a = match axis {
        Some(_) => a,
        None => a
            .into_shape_with_order(IxDyn(&[x.len()]))
            .expect("same size"),
    };
    let ax = axis.unwrap_or(0);
    if a.ndim() > 0 {
        for mut lane in a.lanes_mut(Axis(ax)) {
            let m = lane.iter().fold(f64::NEG_INFINITY, |m, &v| nan_max(m, v));
            if m == f64::INFINITY {
                // The finite elements vanish next to an infinite one, whose
                // own share is undefined (`inf / inf`).
                let zero = if log { f64::NEG_INFINITY } else { 0.0 };
                lane.mapv_inplace(|v| if v == m { f64::NAN } else { zero });
                continue;
            }
            let s: f64 = lane.iter().map(|&v| (v - m).exp()).sum();
            let ls = s.ln();
            lane.mapv_inplace(|v| if log { (v - m) - ls } else { (v - m).exp() / s });
        }
    }
    let a = a
        .as_standard_layout()
        .into_owned()
        .into_shape_with_order(IxDyn(&shape))
        .expect("same size, standard layout");
    Ok(Value::from_f64_array(
        x.dtype(),
        a.mapv(|v| round_to(v, x.dtype())),
    ))
}

/// `log(sum(exp(x)))` over `axis` (`None`: all elements), shifted by each
/// lane's maximum `m`: `ln(Σ exp(x - m)) + m`, in `f64`, rounded once to
/// the dtype. An infinite `m` is the value itself (`+inf`, or `-inf` for a
/// lane of `-inf` only or an empty lane).
fn log_sum_exp(name: &str, axis: Option<usize>, x: &Value) -> Result<Value> {
    if !x.dtype().is_float() {
        return Err(Error::eval(
            name,
            format!("expects a float input, got {}", x.dtype()),
        ));
    }
    let a = x.to_f64_array();
    let lane = |lane: ndarray::ArrayViewD<'_, f64>| {
        let m = lane.iter().fold(f64::NEG_INFINITY, |m, &v| nan_max(m, v));
        if m.is_infinite() {
            return m;
        }
        let s: f64 = lane.iter().map(|&v| (v - m).exp()).sum();
        round_to(s.ln() + m, x.dtype())
    };
    let out = match axis {
        Some(ax) => {
            if ax >= a.ndim() {
                return Err(Error::eval(name, format!("axis {ax} out of range")));
            }
            a.map_axis(Axis(ax), |l| lane(l.into_dyn()))
        }
        None => ArrayD::from_elem(IxDyn(&[]), lane(a.view())),
    };
    Ok(Value::from_f64_array(x.dtype(), out))
}

/// numpy's `cumsum` / `cumprod` of `x` along `axis` (`None`: flattened),
/// in order: floats round every partial result to their dtype, `bool` and
/// integers accumulate in `i64` with wrapping.
fn cumulative(name: &str, op: ReduceOp, axis: Option<usize>, x: &Value) -> Result<Value> {
    let out_dtype = op.output_dtype(x.dtype());
    let flat = |v: &Value| -> Vec<usize> {
        match axis {
            Some(_) => v.shape().to_vec(),
            None => vec![v.len()],
        }
    };
    let shape = flat(x);
    let ax = axis.unwrap_or(0);
    let prod = op == ReduceOp::Prod;
    if out_dtype.is_float() {
        let f32 = out_dtype == DType::F32;
        let mut a = x
            .to_f64_array()
            .as_standard_layout()
            .into_owned()
            .into_shape_with_order(IxDyn(&shape))
            .map_err(|e| Error::eval(name, e.to_string()))?;
        for mut lane in a.lanes_mut(Axis(ax)) {
            // The first partial result is the first element itself, as
            // numpy's (`cumsum([-0.0])` is `-0.0`, not `0.0 + -0.0`).
            let mut acc = f64::NAN;
            for (k, v) in lane.iter_mut().enumerate() {
                acc = match (k, prod) {
                    (0, _) => *v,
                    (_, true) => acc * *v,
                    (_, false) => acc + *v,
                };
                if f32 {
                    acc = acc as f32 as f64;
                }
                *v = acc;
            }
        }
        Ok(Value::from_f64_array(out_dtype, a))
    } else {
        let mut a = x
            .to_i64_array()
            .as_standard_layout()
            .into_owned()
            .into_shape_with_order(IxDyn(&shape))
            .map_err(|e| Error::eval(name, e.to_string()))?;
        for mut lane in a.lanes_mut(Axis(ax)) {
            let mut acc: i64 = i64::from(prod);
            for v in lane.iter_mut() {
                acc = if prod {
                    acc.wrapping_mul(*v)
                } else {
                    acc.wrapping_add(*v)
                };
                *v = acc;
            }
        }
        Ok(Value::from_i64_array(out_dtype, a))
    }
}

fn dot(name: &str, a: &Value, b: &Value) -> Result<Value> {
    let (sa, sb) = (a.shape().to_vec(), b.shape().to_vec());
    let ka = sa[sa.len() - 1];
    let kb = sb[0];
    if ka != kb {
        return Err(Error::eval(
            name,
            format!(
                "shapes {sa:?} and {sb:?} are not aligned: {ka} (dim {}) != {kb} (dim 0)",
                sa.len() - 1
            ),
        ));
    }
    let mut dtype = DType::upcast(a.dtype(), b.dtype());
    if dtype == DType::Bool {
        dtype = DType::I64;
    }
    let m = if sa.len() == 2 { sa[0] } else { 1 };
    let n = if sb.len() == 2 { sb[1] } else { 1 };
    let mut out_shape = Vec::new();
    if sa.len() == 2 {
        out_shape.push(m);
    }
    if sb.len() == 2 {
        out_shape.push(n);
    }
    if dtype.is_float() {
        let a2 = as_matrix(name, a.to_f64_array(), m, ka)?;
        let b2 = as_matrix(name, b.to_f64_array(), kb, n)?;
        let mut c = zeros_matrix::<f64>(name, m, n)?;
        ndarray::linalg::general_mat_mul(1.0, &a2, &b2, 0.0, &mut c);
        let c = c
            .into_dyn()
            .into_shape_with_order(IxDyn(&out_shape))
            .expect("same size");
        Ok(Value::from_f64_array(dtype, c.mapv(|v| round_to(v, dtype))))
    } else {
        let a2 = as_matrix(name, a.to_i64_array(), m, ka)?;
        let b2 = as_matrix(name, b.to_i64_array(), kb, n)?;
        let mut c = zeros_matrix::<i64>(name, m, n)?;
        for i in 0..m {
            for j in 0..n {
                c[[i, j]] = (0..ka).fold(0i64, |s, k| {
                    s.wrapping_add(a2[[i, k]].wrapping_mul(b2[[k, j]]))
                });
            }
        }
        Ok(Value::from_i64_array(
            dtype,
            c.into_dyn()
                .into_shape_with_order(IxDyn(&out_shape))
                .expect("same size"),
        ))
    }
}

/// numpy `matmul` of stacks of matrices (`Op::BatchedDot`): each product
/// as `dot` computes it (floats summed in f64 and rounded to the dtype,
/// integers wrapping in i64), batch dimensions broadcast by the static rule.
fn batched_dot(name: &str, inputs: &[&Value], types: &[&TensorType]) -> Result<Value> {
    let ([a, b], [ta, tb]) = (inputs, types) else {
        return Err(Error::eval(
            name,
            format!("expects 2 inputs, got {}", inputs.len()),
        ));
    };
    let bc = |t: &TensorType| {
        (0..t.ndim())
            .map(|d| t.is_broadcastable(d))
            .collect::<Vec<_>>()
    };
    let sh = crate::ops::batched_dot_shape(a.shape(), b.shape(), &bc(ta), &bc(tb))
        .map_err(|m| Error::eval(name, m))?;
    let mut dtype = DType::upcast(a.dtype(), b.dtype());
    if dtype == DType::Bool {
        dtype = DType::I64;
    }
    let mut out_shape = sh.batch.clone();
    out_shape.extend([sh.m, sh.n]);
    let count: usize = sh.batch.iter().product();
    let (sa, sb) = (
        matrix_stack(name, a, &sh.batch, count, sh.m, sh.k)?,
        matrix_stack(name, b, &sh.batch, count, sh.k, sh.n)?,
    );
    let products = sa
        .iter()
        .zip(&sb)
        .map(|(x, y)| dot(name, x, y))
        .collect::<Result<Vec<_>>>()?;
    if dtype.is_float() {
        let mut data = output_vec::<f64>(name, &out_shape)?;
        products
            .iter()
            .for_each(|p| data.extend(p.to_f64_array().iter().copied()));
        let out = ArrayD::from_shape_vec(IxDyn(&out_shape), data).expect("sized");
        Ok(Value::from_f64_array(dtype, out))
    } else {
        let mut data = output_vec::<i64>(name, &out_shape)?;
        products
            .iter()
            .for_each(|p| data.extend(p.to_i64_array().iter().copied()));
        let out = ArrayD::from_shape_vec(IxDyn(&out_shape), data).expect("sized");
        Ok(Value::from_i64_array(dtype, out))
    }
}

/// `x` broadcast to `batch + [rows, cols]` and cut into its `count`
/// matrices, each a value of `x`'s dtype.
fn matrix_stack(
    name: &str,
    x: &Value,
    batch: &[usize],
    count: usize,
    rows: usize,
    cols: usize,
) -> Result<Vec<Value>> {
    let mut full = batch.to_vec();
    full.extend([rows, cols]);
    crate::with_value!(x, arr => {
        let view = arr.broadcast(IxDyn(&full)).ok_or_else(|| {
            Error::eval(name, format!("cannot broadcast {:?} to {full:?}", x.shape()))
        })?;
        let stacked = view
            .as_standard_layout()
            .into_owned()
            .into_shape_with_order(IxDyn(&[count, rows, cols]))
            .map_err(|e| Error::eval(name, e.to_string()))?;
        Ok(stacked
            .outer_iter()
            .map(|m| Value::from(m.to_owned()))
            .collect())
    })
}

/// `beta * z + alpha * dot(x, y)` for inputs `(z, alpha, x, y, beta)`:
/// the product rounded to the dtype, then combined in f64 and rounded.
/// When `beta == 0`, `z` is ignored (BLAS semantics: a NaN in `z` does not
/// reach the result); `alpha` always multiplies the product, so an
/// infinite `alpha` times an empty-sum zero gives NaN.
fn gemm(name: &str, inputs: &[&Value]) -> Result<Value> {
    let [z, alpha, x, y, beta] = inputs else {
        return Err(Error::eval(
            name,
            format!("expects 5 inputs, got {}", inputs.len()),
        ));
    };
    let d = dot(name, x, y)?;
    if d.shape() != z.shape() {
        return Err(Error::eval(
            name,
            format!(
                "z has shape {:?} but dot(x, y) has shape {:?}",
                z.shape(),
                d.shape()
            ),
        ));
    }
    let scalar = |v: &Value| v.to_f64_array().iter().next().copied().unwrap_or(f64::NAN);
    let (a, b) = (scalar(alpha), scalar(beta));
    let dtype = z.dtype();
    let prod = d.to_f64_array();
    let out = if b == 0.0 {
        prod.mapv(|p| round_to(a * p, dtype))
    } else {
        let mut out = z.to_f64_array();
        out.zip_mut_with(&prod, |o, &p| *o = round_to(b * *o + a * p, dtype));
        out
    };
    Ok(Value::from_f64_array(dtype, out))
}

/// A zero `rows x cols` matrix, allocated fallibly (see [`output_vec`]).
fn zeros_matrix<T: Element>(name: &str, rows: usize, cols: usize) -> Result<ndarray::Array2<T>> {
    let mut v = output_vec::<T>(name, &[rows, cols])?;
    v.resize(rows * cols, T::from_i64(0));
    Ok(ndarray::Array2::from_shape_vec((rows, cols), v).expect("sized"))
}

/// A 1-d or 2-d operand of `dot` as a `rows x cols` matrix (any layout).
fn as_matrix<T: Clone>(
    name: &str,
    a: ArrayD<T>,
    rows: usize,
    cols: usize,
) -> Result<ndarray::Array2<T>> {
    a.as_standard_layout()
        .into_owned()
        .into_shape_with_order((rows, cols))
        .map_err(|e| Error::eval(name, e.to_string()))
}

fn alloc(name: &str, inputs: &[&Value]) -> Result<Value> {
    let (v, dims) = inputs.split_first().expect("typed");
    let mut shape = Vec::with_capacity(dims.len());
    for (k, d) in dims.iter().enumerate() {
        let s = d.to_i64_array().iter().next().copied().unwrap_or(0);
        if s < 0 {
            return Err(Error::eval(
                name,
                format!("negative size {s} for dimension {k}"),
            ));
        }
        shape.push(s as usize);
    }
    super::array_bytes(name, v.dtype(), &shape)?;
    crate::with_value!(v, a => {
        match a.broadcast(IxDyn(&shape)) {
            Some(b) => {
                let mut out = output_vec(name, &shape)?;
                out.extend(b.iter().copied());
                Ok(<_ as crate::types::Element>::wrap(ArrayD::from_shape_vec(IxDyn(&shape), out).expect("sized")))
            }
            None => Err(Error::eval(name, format!("value of shape {:?} cannot broadcast to {shape:?}", a.shape()))),
        }
    })
}

fn reshape(name: &str, ndim: usize, x: &Value, s: &Value) -> Result<Value> {
    let target: Vec<i64> = s.to_i64_array().iter().copied().collect();
    let shape = reshape_target(&target, ndim, x.shape()).map_err(|m| Error::eval(name, m))?;
    Ok(crate::map_value!(x, a => {
        let std = a.as_standard_layout().into_owned();
        std.into_shape_with_order(IxDyn(&shape)).expect("sizes checked")
    }))
}

/// The shape a `Reshape` of an array of shape `in_shape` to the run-time
/// shape vector `target` (at most one `-1`, inferred) produces, for a node
/// declared to produce `ndim` dimensions; the message of the error says why
/// no such shape exists. Shared by `perform` and the linker, so both accept
/// and reject exactly the same shape vectors.
pub fn reshape_target(
    target: &[i64],
    ndim: usize,
    in_shape: &[usize],
) -> std::result::Result<Vec<usize>, String> {
    if target.len() != ndim {
        return Err(format!(
            "the shape vector {target:?} has {} entries, but the reshape produces {ndim} dimension(s)",
            target.len()
        ));
    }
    let size: usize = in_shape.iter().product();
    let cannot = || format!("cannot reshape size {size} into {target:?}");
    // An overflowing product of the given sizes cannot match any array.
    let known = target
        .iter()
        .filter(|&&d| d >= 0)
        .try_fold(1i64, |p, &d| p.checked_mul(d))
        .ok_or_else(cannot)?;
    let mut shape = Vec::with_capacity(target.len());
    for &d in target {
        if d == -1 {
            if known == 0 || size as i64 % known != 0 {
                return Err(cannot());
            }
            shape.push((size as i64 / known) as usize);
        } else if d < 0 {
            return Err(format!("invalid size {d} in {target:?}"));
        } else {
            shape.push(d as usize);
        }
    }
    let count = shape.iter().try_fold(1usize, |p, &d| p.checked_mul(d));
    if count != Some(size) || target.iter().filter(|&&d| d == -1).count() > 1 {
        return Err(format!(
            "cannot reshape array of shape {in_shape:?} into {target:?}"
        ));
    }
    Ok(shape)
}
