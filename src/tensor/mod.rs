//! The user-facing graph builder.
//!
//! A [`Tensor`] is an immutable, cheaply clonable symbolic variable: a graph
//! input, a constant, or an output of an Apply node over other tensors (like
//! PyTensor's variables). A [`crate::FunctionGraph`] imports the ancestors of
//! its outputs with [`FunctionGraph::new`]. Every builder function checks
//! types and returns an `Err` naming the op and the offending types; the
//! arithmetic operators (`&x + &y`, `&x * 2.0`) are sugar over them that
//! panic with the same message, as ndarray's operators do on shape errors.
//!
//! Element-wise ops align operands of different ndim numpy-style by
//! inserting broadcastable leading dimensions (a `DimShuffle`). Rust numbers
//! are *weak* constants (see `types::dtype`): `x_f32 * 2.0` stays `f32`.
//! Dropping a very deep graph does not recurse.

mod build;
mod from_expr;
mod index;
mod indexing;
mod matmul;
mod ops_overload;

use std::fmt;
use std::sync::Arc;

pub use build::*;
pub use from_expr::{build_expr, build_expression};
pub use index::{inc_subtensor, set_subtensor, Idx, IdxBound};
pub use indexing::{
    advanced_inc_subtensor1, advanced_set_subtensor1, advanced_subtensor1, boolean_mask,
    concatenate, split, split_by, stack, take,
};
pub use matmul::{matmul, tensordot, tensordot_axes};

use crate::error::{Error, Result};
use crate::graph::{DType, FunctionGraph, NodeId, TensorType, Value, VarId};
use crate::ops::Op;
use rustc_hash::FxHashMap;

/// A symbolic tensor.
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<TensorNode>);

/// The data behind a [`Tensor`].
pub struct TensorNode {
    /// Static type.
    pub ty: TensorType,
    /// Optional name (inputs are usually named).
    pub name: Option<String>,
    /// Where the value comes from.
    pub origin: Origin,
}

/// Where a tensor's value comes from.
pub enum Origin {
    /// A graph input.
    Input,
    /// A constant.
    Constant(Arc<Value>),
    /// Output `index` of an Apply node.
    Output {
        /// The node.
        apply: Arc<ApplyNode>,
        /// Which output.
        index: usize,
    },
}

/// A symbolic Apply node.
pub struct ApplyNode {
    /// The op.
    pub op: Op,
    /// Its inputs.
    pub inputs: Vec<Tensor>,
    /// Output types inferred at build time.
    pub output_types: Vec<TensorType>,
}

impl Drop for TensorNode {
    fn drop(&mut self) {
        // Unlink the ancestors iteratively so that deep chains do not overflow the stack.
        let mut stack: Vec<Tensor> = Vec::new();
        if let Origin::Output { apply, .. } = &mut self.origin {
            if let Some(a) = Arc::get_mut(apply) {
                stack.append(&mut a.inputs);
            }
        }
        while let Some(t) = stack.pop() {
            if let Ok(mut node) = Arc::try_unwrap(t.0) {
                if let Origin::Output { apply, .. } = &mut node.origin {
                    if let Some(a) = Arc::get_mut(apply) {
                        stack.append(&mut a.inputs);
                    }
                }
            }
        }
    }
}

impl Tensor {
    /// A new graph input.
    pub fn input(name: &str, ty: TensorType) -> Tensor {
        Tensor(Arc::new(TensorNode {
            ty,
            name: Some(name.to_string()),
            origin: Origin::Input,
        }))
    }

    /// A constant tensor.
    pub fn constant(value: Value) -> Tensor {
        Tensor(Arc::new(TensorNode {
            ty: value.tensor_type(),
            name: None,
            origin: Origin::Constant(Arc::new(value)),
        }))
    }

    /// A 0-d constant of the given dtype.
    pub fn scalar_constant(dtype: DType, v: f64) -> Tensor {
        Tensor::constant(Value::scalar_f64(dtype, v))
    }

    /// Applies `op` to `inputs`, returning every output.
    pub fn apply_multi(op: Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let infos: Vec<crate::ops::InputInfo<'_>> = inputs
            .iter()
            .map(|t| crate::ops::InputInfo {
                ty: &t.0.ty,
                value: t.constant_value(),
            })
            .collect();
        let output_types = op.infer_types(&infos)?;
        let apply = Arc::new(ApplyNode {
            op,
            inputs: inputs.iter().map(|&t| t.clone()).collect(),
            output_types: output_types.clone(),
        });
        Ok(output_types
            .into_iter()
            .enumerate()
            .map(|(index, ty)| {
                Tensor(Arc::new(TensorNode {
                    ty,
                    name: None,
                    origin: Origin::Output {
                        apply: apply.clone(),
                        index,
                    },
                }))
            })
            .collect())
    }

    /// Applies a single-output `op` to `inputs`.
    pub fn apply(op: Op, inputs: &[&Tensor]) -> Result<Tensor> {
        let mut outs = Tensor::apply_multi(op, inputs)?;
        if outs.len() != 1 {
            return Err(Error::Graph(format!(
                "expected one output, the op has {}",
                outs.len()
            )));
        }
        Ok(outs.remove(0))
    }

    /// The static type.
    pub fn ty(&self) -> &TensorType {
        &self.0.ty
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.0.ty.dtype
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.0.ty.ndim()
    }

    /// The name, if any.
    pub fn name(&self) -> Option<&str> {
        self.0.name.as_deref()
    }

    /// The same tensor with a name (a new handle on the same node).
    pub fn named(&self, name: &str) -> Tensor {
        let origin = match &self.0.origin {
            Origin::Input => return Tensor::input(name, self.ty().clone()),
            Origin::Constant(v) => Origin::Constant(v.clone()),
            Origin::Output { apply, index } => Origin::Output {
                apply: apply.clone(),
                index: *index,
            },
        };
        Tensor(Arc::new(TensorNode {
            ty: self.ty().clone(),
            name: Some(name.to_string()),
            origin,
        }))
    }

    /// The value, when this is a constant.
    pub fn constant_value(&self) -> Option<&Value> {
        match &self.0.origin {
            Origin::Constant(v) => Some(v),
            _ => None,
        }
    }

    /// The op computing this tensor, if any.
    pub fn owner_op(&self) -> Option<&Op> {
        match &self.0.origin {
            Origin::Output { apply, .. } => Some(&apply.op),
            _ => None,
        }
    }

    /// The node's inputs, if this is an op output.
    pub fn owner_inputs(&self) -> &[Tensor] {
        match &self.0.origin {
            Origin::Output { apply, .. } => &apply.inputs,
            _ => &[],
        }
    }

    /// True when both handles name the same symbolic variable.
    pub fn same(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.key() == other.key()
    }

    /// An identity key: the node and output index, or the variable itself.
    fn key(&self) -> (usize, usize) {
        match &self.0.origin {
            Origin::Output { apply, index } => (Arc::as_ptr(apply) as *const u8 as usize, *index),
            _ => (Arc::as_ptr(&self.0) as *const u8 as usize, usize::MAX),
        }
    }

    /// The graph inputs this tensor depends on, in order of first appearance.
    pub fn free_inputs(&self) -> Vec<Tensor> {
        free_inputs(std::slice::from_ref(self))
    }
}

/// The graph inputs the given tensors depend on, in order of first appearance.
pub fn free_inputs(outputs: &[Tensor]) -> Vec<Tensor> {
    let mut seen = rustc_hash::FxHashSet::default();
    let mut found = Vec::new();
    let mut stack: Vec<Tensor> = outputs.iter().rev().cloned().collect();
    while let Some(t) = stack.pop() {
        if !seen.insert(t.key()) {
            continue;
        }
        match &t.0.origin {
            Origin::Input => found.push(t.clone()),
            Origin::Constant(_) => {}
            Origin::Output { apply, .. } => stack.extend(apply.inputs.iter().rev().cloned()),
        }
    }
    found
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor({}: {})", self.name().unwrap_or("?"), self.ty())
    }
}

impl fmt::Display for Tensor {
    /// Infix rendering (pprint).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match FunctionGraph::new(&self.free_inputs(), std::slice::from_ref(self)) {
            Ok(fg) => f.write_str(&crate::graph::print::pprint(&fg, fg.outputs()[0])),
            Err(e) => write!(f, "<invalid graph: {e}>"),
        }
    }
}

impl FunctionGraph {
    /// Imports the ancestors of `outputs`; every non-constant root must be one of `inputs`.
    pub fn new(inputs: &[Tensor], outputs: &[Tensor]) -> Result<FunctionGraph> {
        let mut fg = FunctionGraph::empty();
        let mut vars: FxHashMap<(usize, usize), VarId> = FxHashMap::default();
        let mut nodes: FxHashMap<usize, NodeId> = FxHashMap::default();
        for t in inputs {
            if !matches!(t.0.origin, Origin::Input) {
                return Err(Error::Graph(format!(
                    "{t:?} is given as an input but is not an input variable"
                )));
            }
            if vars.contains_key(&t.key()) {
                return Err(Error::Graph(format!("input {t:?} is given twice")));
            }
            let v = fg.add_input(t.ty().clone(), t.0.name.clone());
            vars.insert(t.key(), v);
        }
        // Iterative post-order: a tensor is created once all its node's inputs are.
        let mut stack: Vec<(Tensor, bool)> =
            outputs.iter().rev().map(|t| (t.clone(), false)).collect();
        while let Some((t, expanded)) = stack.pop() {
            if vars.contains_key(&t.key()) {
                continue;
            }
            match &t.0.origin {
                Origin::Input => {
                    return Err(Error::Graph(format!(
                        "missing input: {} of type {} is needed to compute the outputs but is not an input",
                        t.name().map_or("an unnamed variable".to_string(), |n| format!("'{n}'")),
                        t.ty()
                    )))
                }
                Origin::Constant(v) => {
                    let id = fg.constant_arc(v.clone());
                    vars.insert(t.key(), id);
                }
                Origin::Output { apply, index } => {
                    let akey = Arc::as_ptr(apply) as *const u8 as usize;
                    if let Some(&n) = nodes.get(&akey) {
                        vars.insert(t.key(), fg.node(n).outputs[*index]);
                        continue;
                    }
                    if !expanded {
                        stack.push((t.clone(), true));
                        for i in apply.inputs.iter().rev() {
                            if !vars.contains_key(&i.key()) {
                                stack.push((i.clone(), false));
                            }
                        }
                        continue;
                    }
                    let ins: Vec<VarId> = apply.inputs.iter().map(|i| vars[&i.key()]).collect();
                    let n = fg.apply_typed(apply.op.clone(), &ins, apply.output_types.clone());
                    nodes.insert(akey, n);
                    let outs = fg.node(n).outputs.clone();
                    for (k, o) in outs.iter().enumerate() {
                        vars.insert(
                            (akey, k),
                            *o,
                        );
                    }
                    if let Some(name) = &t.0.name {
                        fg.set_name(outs[*index], name.clone());
                    }
                    vars.insert(t.key(), outs[*index]);
                }
            }
        }
        for t in outputs {
            let v = vars[&t.key()];
            fg.add_output(v);
        }
        Ok(fg)
    }

    /// Rebuilds user-facing tensors for the graph's outputs, mapping graph
    /// inputs to `inputs` (which must match the graph inputs in number and type).
    pub fn output_tensors(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        if inputs.len() != self.inputs().len() {
            return Err(Error::Graph(format!(
                "the graph has {} inputs but {} tensors were given",
                self.inputs().len(),
                inputs.len()
            )));
        }
        let mut map: FxHashMap<VarId, Tensor> = FxHashMap::default();
        for (&v, t) in self.inputs().iter().zip(inputs) {
            map.insert(v, t.clone());
        }
        for n in self.toposort() {
            let node = self.node(n);
            let mut ins = Vec::with_capacity(node.inputs.len());
            for &i in &node.inputs {
                if let std::collections::hash_map::Entry::Vacant(e) = map.entry(i) {
                    let c = self
                        .constant_value(i)
                        .ok_or_else(|| Error::Graph(format!("{i} has no value")))?;
                    e.insert(Tensor::constant(c.clone()));
                }
                ins.push(map[&i].clone());
            }
            let refs: Vec<&Tensor> = ins.iter().collect();
            let outs = Tensor::apply_multi(node.op.clone(), &refs)?;
            for (&o, t) in node.outputs.iter().zip(outs) {
                map.insert(o, t);
            }
        }
        self.outputs()
            .iter()
            .map(|&o| match map.get(&o) {
                Some(t) => Ok(t.clone()),
                None => self
                    .constant_value(o)
                    .map(|c| Tensor::constant(c.clone()))
                    .ok_or_else(|| Error::Graph(format!("output {o} is not computed"))),
            })
            .collect()
    }
}
