//! The reference evaluator: every op's `perform` on ndarray, and the
//! evaluation of a whole FunctionGraph.
//!
//! It is the oracle of every test and of constant folding, so it favours
//! clarity over speed: element-wise ops run in the `f64` or `i64` domain of
//! `ops::scalar` and round to the output dtype; reductions accumulate in
//! `f64` / `i64`. Broadcasting follows the static types (PyTensor's rule): a
//! dimension broadcasts only when it is statically 1; other sizes must agree
//! at run time, and a mismatch is an error naming the op and the sizes.

mod indexing;
mod perform;

pub use perform::{perform, reshape_target};

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::graph::{FunctionGraph, VarId};
use crate::types::{DType, TensorType, Value};

/// Checks one call argument against the declared input type; the message
/// names the input by position and name.
pub fn check_input(
    index: usize,
    name: Option<&str>,
    ty: &TensorType,
    dtype: DType,
    shape: &[usize],
) -> Result<()> {
    // The name is formatted only for an error (this runs on every call).
    let who = || match name {
        Some(n) => format!("input {index} ('{n}')"),
        None => format!("input {index}"),
    };
    if dtype != ty.dtype {
        return Err(Error::Input(format!(
            "{} has dtype {dtype}, expected {}",
            who(),
            ty.dtype
        )));
    }
    if shape.len() != ty.ndim() {
        return Err(Error::Input(format!(
            "{} has {} dimension(s) (shape {shape:?}), expected {} (type {ty})",
            who(),
            shape.len(),
            ty.ndim()
        )));
    }
    for (d, (&got, want)) in shape.iter().zip(&ty.shape).enumerate() {
        if let Some(w) = want {
            if got != *w {
                return Err(Error::Input(format!(
                    "{} has size {got} in dimension {d}, but its type {ty} requires {w}",
                    who()
                )));
            }
        }
    }
    Ok(())
}

/// Checks the values a user op (`Custom`) returned against the output types
/// it declared: their number, and each value's dtype, number of dimensions
/// and every static size (so a broadcastable dimension has size 1). The
/// kernels that read these values rely on all of it, so a mismatch is an
/// error of `op` (its display name), never a value passed on.
pub fn check_custom_outputs(op: &str, types: &[TensorType], values: &[Value]) -> Result<()> {
    if values.len() != types.len() {
        return Err(Error::eval(
            op,
            format!(
                "returned {} outputs, but its infer_types declares {}",
                values.len(),
                types.len()
            ),
        ));
    }
    for (k, (ty, v)) in types.iter().zip(values).enumerate() {
        let shape = v.shape();
        let mismatch = |what: String| {
            Error::eval(
                op,
                format!("output {k} (shape {shape:?}, dtype {}) does not match its declared type {ty}: {what}", v.dtype()),
            )
        };
        if v.dtype() != ty.dtype {
            return Err(mismatch(format!(
                "dtype {} instead of {}",
                v.dtype(),
                ty.dtype
            )));
        }
        if shape.len() != ty.ndim() {
            return Err(mismatch(format!(
                "{} dimension(s) instead of {}",
                shape.len(),
                ty.ndim()
            )));
        }
        for (d, (&got, want)) in shape.iter().zip(&ty.shape).enumerate() {
            if let Some(w) = *want {
                if got != w {
                    return Err(mismatch(format!(
                        "size {got} in dimension {d} instead of {w}"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// The bytes of an array of `dtype` and `shape`, or an error of `op` when no
/// such array can exist: its element count overflows `usize` or its size
/// exceeds `isize::MAX` bytes (the most one allocation may hold).
pub fn array_bytes(op: &str, dtype: DType, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .and_then(|n| n.checked_mul(dtype.size_of()))
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| Error::eval(op, format!("shape {shape:?} is too large to allocate")))
}

/// The error of `op` when the allocator refuses `bytes` bytes for an array of
/// `dtype` and `shape`.
pub fn out_of_memory(op: &str, bytes: usize, dtype: DType, shape: &[usize]) -> Error {
    Error::eval(
        op,
        format!("cannot allocate {bytes} bytes for an array of shape {shape:?} ({dtype}): out of memory"),
    )
}

/// Evaluates the graph's outputs on `inputs` with the reference `perform` of every node.
pub fn evaluate(fg: &FunctionGraph, inputs: &[Value]) -> Result<Vec<Value>> {
    if inputs.len() != fg.inputs().len() {
        return Err(Error::Input(format!(
            "expected {} inputs, got {}",
            fg.inputs().len(),
            inputs.len()
        )));
    }
    let mut vals: FxHashMap<VarId, Value> = FxHashMap::default();
    for (k, (&v, x)) in fg.inputs().iter().zip(inputs).enumerate() {
        check_input(k, fg.var(v).name.as_deref(), fg.ty(v), x.dtype(), x.shape())?;
        vals.insert(v, x.clone());
    }
    for n in fg.toposort() {
        let node = fg.node(n);
        for &i in &node.inputs {
            if let std::collections::hash_map::Entry::Vacant(e) = vals.entry(i) {
                let c = fg
                    .constant_value(i)
                    .ok_or_else(|| Error::Graph(format!("{i} has no value during evaluation")))?;
                e.insert(c.clone());
            }
        }
        let args: Vec<&Value> = node.inputs.iter().map(|i| &vals[i]).collect();
        let types: Vec<&TensorType> = node.inputs.iter().map(|&i| fg.ty(i)).collect();
        let outs = perform(&node.op, &args, &types)?;
        for (&o, val) in node.outputs.iter().zip(outs) {
            vals.insert(o, val);
        }
    }
    fg.outputs()
        .iter()
        .map(|&o| match vals.get(&o) {
            Some(v) => Ok(v.clone()),
            None => fg
                .constant_value(o)
                .cloned()
                .ok_or_else(|| Error::Graph(format!("output {o} has no value"))),
        })
        .collect()
}
