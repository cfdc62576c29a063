//! Reverse-mode differentiation over the `Tensor` DAG: [`grad`],
//! [`grad_with`] (known gradients, the disconnected-input policy) and
//! [`vjp`].
//!
//! The driver sorts the Apply nodes above the seeds (the cost and the
//! variables of `known_grads`) topologically, marks the variables that
//! depend on a `wrt`, and walks the nodes in reverse order: the gradient of
//! each output is the sum of the contributions of its clients (accumulation
//! of multiple uses), the node's pullback (`pullback.rs`, or the pullback of
//! its primitive form from `expand.rs`) gives one contribution per input.
//! The result is an ordinary graph over the forward graph's tensors: it is
//! compiled, rewritten and JIT-compiled like any other.
//!
//! Invariants: every contribution is fitted to its variable's type (summed
//! over the variable's statically broadcastable dimensions and cast to its
//! dtype) before it is accumulated, so a gradient always has its variable's
//! dtype and ndim. Integer and boolean variables never carry a gradient
//! value: they are only *connected* (their gradient is zero), as in PyTensor,
//! where the gradient with respect to an integer variable is a float zero.
//! A variable is connected to the cost when some path of pullbacks reaches
//! it without an [`InputGrad::Disconnected`] step.

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::expand::primitive_form;
use super::pullback::{l_op, InputGrad};
use crate::error::{Error, Result};
use crate::graph::{DType, Value};
use crate::ops::{ReduceOp, ScalarOp};
use crate::tensor::{elemwise, second, ApplyNode, Origin, Tensor};

/// What [`grad_with`] does with a `wrt` the cost does not depend on
/// (PyTensor's `disconnected_inputs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DisconnectedInputs {
    /// An error naming the variable (the default).
    #[default]
    Raise,
    /// A zero gradient.
    Ignore,
    /// A zero gradient and a warning on stderr.
    Warn,
}

/// Options of [`grad_with`].
#[derive(Debug, Clone, Default)]
pub struct GradOptions {
    /// What to do with a `wrt` the cost does not depend on.
    pub disconnected_inputs: DisconnectedInputs,
    /// Gradients given for variables of the graph, `(variable, gradient)`
    /// (PyTensor's `known_grads`): the walk starts from them (and from the
    /// cost, when there is one); each gradient must have its variable's
    /// number of dimensions.
    pub known_grads: Vec<(Tensor, Tensor)>,
}

/// The gradient of the 0-d `cost` with respect to each of `wrt` (any
/// variables of its graph), as new tensors; a `wrt` the cost does not depend
/// on is an error (see [`grad_with`] for the options).
pub fn grad(cost: &Tensor, wrt: &[Tensor]) -> Result<Vec<Tensor>> {
    grad_with(Some(cost), wrt, &GradOptions::default())
}

/// [`grad`] with options: `cost` may be `None` when `known_grads` seed the walk.
pub fn grad_with(
    cost: Option<&Tensor>,
    wrt: &[Tensor],
    options: &GradOptions,
) -> Result<Vec<Tensor>> {
    let found = backprop(&seeds(cost, options)?, wrt, false)?;
    found
        .into_iter()
        .zip(wrt)
        .enumerate()
        .map(|(i, (g, w))| match g {
            Some(Some(t)) => Ok(t),
            Some(None) => Ok(zeros_like(w)),
            None => match options.disconnected_inputs {
                DisconnectedInputs::Ignore => Ok(zeros_like(w)),
                DisconnectedInputs::Warn => {
                    eprintln!("warning: {}", disconnected_message(i, w));
                    Ok(zeros_like(w))
                }
                DisconnectedInputs::Raise => Err(Error::Gradient(format!(
                    "{} (set disconnected_inputs to \"ignore\" to get zeros)",
                    disconnected_message(i, w)
                ))),
            },
        })
        .collect()
}

/// The message [`DisconnectedInputs::Warn`] prints for each `wrt` the cost
/// (and `options.known_grads`) does not depend on, in `wrt` order, for
/// callers that report warnings their own way (Python's `warnings`) and
/// then ask [`grad_with`] for the gradients with
/// [`DisconnectedInputs::Ignore`].
pub fn disconnected_warnings(
    cost: Option<&Tensor>,
    wrt: &[Tensor],
    options: &GradOptions,
) -> Result<Vec<String>> {
    let found = backprop(&seeds(cost, options)?, wrt, false)?;
    Ok(found
        .iter()
        .zip(wrt)
        .enumerate()
        .filter(|(_, (g, _))| g.is_none())
        .map(|(i, (_, w))| disconnected_message(i, w))
        .collect())
}

/// The walk's starting points: the cost with gradient 1 (none for a
/// non-float cost), then the known gradients; checked as [`grad_with`]
/// documents.
fn seeds(cost: Option<&Tensor>, options: &GradOptions) -> Result<Vec<(Tensor, Option<Tensor>)>> {
    let mut seeds: Vec<(Tensor, Option<Tensor>)> = Vec::new();
    if let Some(cost) = cost {
        if cost.ndim() != 0 {
            return Err(Error::Gradient(format!(
                "the cost must be a scalar (0-d), got {}",
                cost.ty()
            )));
        }
        let one = cost
            .dtype()
            .is_float()
            .then(|| Tensor::constant(Value::scalar_f64(cost.dtype(), 1.0)));
        seeds.push((cost.clone(), one));
    }
    for (v, g) in &options.known_grads {
        if g.ndim() != v.ndim() {
            return Err(Error::Gradient(format!(
                "the known gradient of {v:?} has type {}, which does not have the variable's {} dimensions",
                g.ty(),
                v.ndim()
            )));
        }
        seeds.push((v.clone(), Some(g.clone())));
    }
    if seeds.is_empty() {
        return Err(Error::Gradient(
            "nothing to differentiate: give a cost or known gradients".to_string(),
        ));
    }
    Ok(seeds)
}

fn disconnected_message(i: usize, w: &Tensor) -> String {
    format!(
        "the cost does not depend on wrt[{i}] ({}: {}): it is not part of the cost's graph, or only through an op whose output ignores its value",
        w.name().unwrap_or("unnamed"),
        w.ty()
    )
}

/// The vector-Jacobian product: the gradients of `wrt` given the gradients
/// (`cotangents`) of `outputs`; a `wrt` none of the outputs depends on gets
/// zeros.
pub fn vjp(outputs: &[Tensor], wrt: &[Tensor], cotangents: &[Tensor]) -> Result<Vec<Tensor>> {
    if outputs.len() != cotangents.len() {
        return Err(Error::Gradient(format!(
            "vjp: {} outputs but {} cotangents",
            outputs.len(),
            cotangents.len()
        )));
    }
    let options = GradOptions {
        disconnected_inputs: DisconnectedInputs::Ignore,
        known_grads: outputs
            .iter()
            .cloned()
            .zip(cotangents.iter().cloned())
            .collect(),
    };
    grad_with(None, wrt, &options)
}

/// Zeros of `w`'s shape: its dtype when it is a float, else `f64` (PyTensor's
/// float zero for an integer variable).
fn zeros_like(w: &Tensor) -> Tensor {
    let dt = if w.dtype().is_float() {
        w.dtype()
    } else {
        DType::F64
    };
    second(w, &Tensor::constant(Value::scalar_f64(dt, 0.0))).expect("a 0-d value broadcasts")
}

/// The identity of a variable: its Apply node and output index, or the
/// variable itself for inputs and constants.
type Key = (usize, usize);

fn key(t: &Tensor) -> Key {
    match &t.0.origin {
        Origin::Output { apply, index } => (Arc::as_ptr(apply) as usize, *index),
        _ => (Arc::as_ptr(&t.0) as usize, usize::MAX),
    }
}

fn apply_of(t: &Tensor) -> Option<&Arc<ApplyNode>> {
    match &t.0.origin {
        Origin::Output { apply, .. } => Some(apply),
        _ => None,
    }
}

/// The Apply nodes above `roots` with one output tensor each, inputs first,
/// not looking past the variables of `stop`.
fn toposort(roots: &[Tensor], stop: &FxHashSet<Key>) -> Vec<Tensor> {
    let mut done: FxHashSet<usize> = FxHashSet::default();
    let mut order = Vec::new();
    let mut stack: Vec<(Tensor, bool)> = roots.iter().rev().map(|t| (t.clone(), false)).collect();
    while let Some((t, expanded)) = stack.pop() {
        if stop.contains(&key(&t)) {
            continue;
        }
        let Some(apply) = apply_of(&t) else { continue };
        let id = Arc::as_ptr(apply) as usize;
        if done.contains(&id) {
            continue;
        }
        if expanded {
            done.insert(id);
            order.push(t);
            continue;
        }
        stack.push((t.clone(), true));
        for i in apply.inputs.iter().rev() {
            if !stop.contains(&key(i))
                && apply_of(i).is_some_and(|a| !done.contains(&(Arc::as_ptr(a) as usize)))
            {
                stack.push((i.clone(), false));
            }
        }
    }
    order
}

/// The output tensors of the node computing `t` (rebuilt handles on the
/// same node, in output order).
fn node_outputs(t: &Tensor, apply: &Arc<ApplyNode>) -> Vec<Tensor> {
    let Origin::Output { index, .. } = &t.0.origin else {
        unreachable!("only op outputs are sorted")
    };
    (0..apply.output_types.len())
        .map(|k| {
            if k == *index {
                t.clone()
            } else {
                Tensor(Arc::new(crate::tensor::TensorNode {
                    ty: apply.output_types[k].clone(),
                    name: None,
                    origin: Origin::Output {
                        apply: apply.clone(),
                        index: k,
                    },
                }))
            }
        })
        .collect()
}

/// The gradient state of one variable.
#[derive(Default)]
struct Acc {
    connected: bool,
    contributions: Vec<Tensor>,
}

impl Acc {
    /// The accumulated gradient: `None` when it is zero.
    fn total(&self) -> Result<Option<Tensor>> {
        match self.contributions.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one.clone())),
            many => Ok(Some(elemwise(
                ScalarOp::Add,
                &many.iter().collect::<Vec<_>>(),
            )?)),
        }
    }
}

/// `g` summed over `v`'s statically broadcastable dimensions where `g` is
/// not, and cast to `v`'s dtype.
fn fit(g: &Tensor, v: &Tensor) -> Result<Tensor> {
    if g.ndim() != v.ndim() {
        return Err(Error::Gradient(format!(
            "a gradient of type {} was computed for {v:?}, which has another number of dimensions",
            g.ty()
        )));
    }
    let axes: Vec<isize> = (0..v.ndim())
        .filter(|&d| v.ty().shape[d] == Some(1) && g.ty().shape[d] != Some(1))
        .map(|d| d as isize)
        .collect();
    let g = if axes.is_empty() {
        g.clone()
    } else {
        g.reduce(ReduceOp::Sum, Some(&axes), true)?
    };
    Ok(g.cast(v.dtype()))
}

/// Per `wrt`: `None` when disconnected, `Some(None)` when connected with a
/// zero gradient, `Some(Some(g))` otherwise. `seeds` are variables with
/// their gradients (`None`: connected, zero). With `stop_at_wrt`, the walk
/// does not go past the `wrt` (the gradient of an expansion with respect to
/// its node's inputs must not flow on into their own ancestors: the outer
/// walk does that once).
fn backprop(
    seeds: &[(Tensor, Option<Tensor>)],
    wrt: &[Tensor],
    stop_at_wrt: bool,
) -> Result<Vec<Option<Option<Tensor>>>> {
    let roots: Vec<Tensor> = seeds.iter().map(|(v, _)| v.clone()).collect();
    let stop: FxHashSet<Key> = if stop_at_wrt {
        wrt.iter().map(key).collect()
    } else {
        FxHashSet::default()
    };
    let order = toposort(&roots, &stop);
    // Variables that depend on a wrt: only their gradients are built.
    let mut depends: FxHashSet<Key> = wrt.iter().map(key).collect();
    for t in &order {
        let apply = apply_of(t).expect("sorted tensors are op outputs");
        if apply.inputs.iter().any(|i| depends.contains(&key(i))) {
            for k in 0..apply.output_types.len() {
                depends.insert((Arc::as_ptr(apply) as usize, k));
            }
        }
    }
    let mut acc: FxHashMap<Key, Acc> = FxHashMap::default();
    for (v, g) in seeds {
        let a = acc.entry(key(v)).or_default();
        a.connected = true;
        if let Some(g) = g {
            if v.dtype().is_float() {
                a.contributions.push(fit(g, v)?);
            }
        }
    }
    for t in order.iter().rev() {
        let apply = apply_of(t).expect("sorted tensors are op outputs");
        let outputs = node_outputs(t, apply);
        if !outputs
            .iter()
            .any(|o| acc.get(&key(o)).is_some_and(|a| a.connected))
            || !apply.inputs.iter().any(|i| depends.contains(&key(i)))
        {
            continue;
        }
        // Output gradients; an output that is connected but zero (or not
        // connected) enters as zeros so that the pullback still says which
        // inputs are connected.
        let mut has_value = false;
        let mut gzs: Vec<Option<Tensor>> = Vec::with_capacity(outputs.len());
        for o in &outputs {
            let total = match acc.get(&key(o)) {
                Some(a) => a.total()?,
                None => None,
            };
            has_value |= total.is_some();
            gzs.push(Some(match total {
                Some(g) => g,
                None => zeros_like(o),
            }));
        }
        let grads = input_grads(apply, &outputs, &gzs)?;
        for (i, g) in apply.inputs.iter().zip(grads) {
            if !depends.contains(&key(i)) {
                continue;
            }
            match g {
                InputGrad::Disconnected => {}
                InputGrad::Zero => acc.entry(key(i)).or_default().connected = true,
                InputGrad::Grad(g) => {
                    let a = acc.entry(key(i)).or_default();
                    a.connected = true;
                    if has_value && i.dtype().is_float() {
                        a.contributions.push(fit(&g, i)?);
                    }
                }
            }
        }
    }
    wrt.iter()
        .map(|w| match acc.get(&key(w)) {
            Some(a) if a.connected => Ok(Some(a.total()?)),
            _ => Ok(None),
        })
        .collect()
}

/// The gradients of `apply`'s inputs: its pullback, or the gradient of its
/// primitive form seeded with the output gradients.
fn input_grads(
    apply: &ApplyNode,
    outputs: &[Tensor],
    gzs: &[Option<Tensor>],
) -> Result<Vec<InputGrad>> {
    let Some(expanded) = primitive_form(&apply.op, &apply.inputs) else {
        return l_op(&apply.op, &apply.inputs, outputs, gzs);
    };
    let expanded = expanded?;
    let seeds: Vec<(Tensor, Option<Tensor>)> = expanded
        .iter()
        .zip(gzs)
        .filter_map(|(e, g)| g.as_ref().map(|g| Ok((e.clone(), Some(fit(g, e)?)))))
        .collect::<Result<_>>()?;
    // An input given twice gets its whole gradient at its first position.
    let mut seen: FxHashSet<Key> = FxHashSet::default();
    Ok(backprop(&seeds, &apply.inputs, true)?
        .into_iter()
        .zip(&apply.inputs)
        .map(|(g, i)| match g {
            _ if !seen.insert(key(i)) => InputGrad::Disconnected,
            None => InputGrad::Disconnected,
            Some(None) => InputGrad::Zero,
            Some(Some(t)) => InputGrad::Grad(t),
        })
        .collect())
}
