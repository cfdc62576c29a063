//! The AlgebraicCanonizer of seed 004: puts a cluster of `main` / `inverse` /
//! `reciprocal` nodes (`mul` / `true_div` / `reciprocal`, or `add` / `sub` /
//! `neg`) into the canonical form `inverse(main(*num), main(*denum))`,
//! cancelling factors that appear on both sides and folding constants.
//!
//! It acts only at the root of a cluster: a node one of whose clients
//! (looking through single-client DimShuffles) is itself in the cluster is
//! left for that client. It looks through DimShuffles that only add
//! broadcastable dimensions on the left. The walks are iterative, so deep
//! clusters do not overflow the stack.
//!
//! A cluster never crosses a dtype change: `(x_u8 - 255) + (-1)` is an
//! `i64` sum of a `u8` difference that wraps, and flattening it would
//! compute `x - 256` without the wrap; an `f32` sum under an `f64` one keeps
//! its `f32` rounding (what the un-rewritten graph computes). Folded
//! integer constants are computed in wrapping `i64` arithmetic and wrapped
//! to the dtype, as numpy's arithmetic wraps.

use smallvec::SmallVec;

use crate::error::Result;
use crate::graph::{Client, DType, FunctionGraph, NodeId, Value, VarId};
use crate::ops::{Op, ScalarOp};

use super::util::{elemwise, match_type, unique_constant, unique_int_constant, widen_operands};

/// The largest number of inputs of a `main` node the canonizer builds.
pub const MAX_FANIN: usize = 32;

/// A canonizer for one (main, inverse, reciprocal) triple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlgebraicCanonizer {
    /// The commutative, associative, variadic op (`mul`, `add`).
    pub main: ScalarOp,
    /// The op with `inverse(main(x, y), y) == x` (`true_div`, `sub`).
    pub inverse: ScalarOp,
    /// The op with `main(x, reciprocal(y)) == inverse(x, y)` (`reciprocal`, `neg`).
    pub reciprocal: ScalarOp,
}

impl AlgebraicCanonizer {
    /// The multiplicative canonizer: `mul`, `true_div`, `reciprocal`.
    pub const MUL: AlgebraicCanonizer = AlgebraicCanonizer {
        main: ScalarOp::Mul,
        inverse: ScalarOp::TrueDiv,
        reciprocal: ScalarOp::Reciprocal,
    };
    /// The additive canonizer: `add`, `sub`, `neg`.
    pub const ADD: AlgebraicCanonizer = AlgebraicCanonizer {
        main: ScalarOp::Add,
        inverse: ScalarOp::Sub,
        reciprocal: ScalarOp::Neg,
    };

    fn member(&self, op: &Op) -> Option<ScalarOp> {
        op.scalar_op()
            .filter(|s| *s == self.main || *s == self.inverse || *s == self.reciprocal)
    }

    /// The neutral element of `main` (1 for mul, 0 for add).
    pub fn neutral(&self) -> f64 {
        if self.main == ScalarOp::Mul {
            1.0
        } else {
            0.0
        }
    }

    /// `inverse(main(*num), main(*denum))` on numbers.
    pub fn calculate(&self, num: &[f64], denum: &[f64]) -> f64 {
        if self.main == ScalarOp::Mul {
            num.iter().product::<f64>() / denum.iter().product::<f64>()
        } else {
            num.iter().sum::<f64>() - denum.iter().sum::<f64>()
        }
    }

    /// The lists `(num, denum)` with `v == inverse(main(*num), main(*denum))`,
    /// e.g. `x*y/z -> ([x, y], [z])`, `a / (b / c) -> ([a, c], [b])`.
    pub fn get_num_denum(&self, fg: &FunctionGraph, v: VarId) -> (Vec<VarId>, Vec<VarId>) {
        let (mut num, mut denum) = (Vec::new(), Vec::new());
        let root_dtype = fg.ty(v).dtype;
        // Depth-first in input order; `true` means the term goes to the numerator.
        let mut stack: SmallVec<[(VarId, bool); 16]> = smallvec::smallvec![(v, true)];
        while let Some((v, positive)) = stack.pop() {
            let leaf = |num: &mut Vec<VarId>, denum: &mut Vec<VarId>| {
                if positive {
                    num.push(v)
                } else {
                    denum.push(v)
                }
            };
            let Some(n) = fg.owner(v) else {
                leaf(&mut num, &mut denum);
                continue;
            };
            let node = fg.node(n);
            if let Op::DimShuffle {
                input_ndim,
                new_order,
            } = &node.op
            {
                if only_adds_left_dims(*input_ndim, new_order) {
                    stack.push((node.inputs[0], positive));
                    continue;
                }
            }
            if fg.ty(v).dtype != root_dtype {
                leaf(&mut num, &mut denum);
                continue;
            }
            // Canonicalize writes `-x` as `-1 * x`: the additive canonizer sees
            // through that form as through `neg`, so both give one canonical sum.
            if self.main == ScalarOp::Add {
                if let Some(x) = neg_as_mul(fg, v) {
                    stack.push((x, !positive));
                    continue;
                }
            }
            // Canonicalize writes `reciprocal(x)` as `x ** -1`: the multiplicative
            // canonizer sees through that form as through `reciprocal`.
            if self.main == ScalarOp::Mul {
                if let Some(x) = reciprocal_as_pow(fg, v) {
                    stack.push((x, !positive));
                    continue;
                }
            }
            match self.member(&node.op) {
                Some(op) => {
                    // `main` keeps every sign, `inverse` flips its second input,
                    // `reciprocal` its only one.
                    let (used, flipped) = if op == self.main {
                        (node.inputs.len(), usize::MAX)
                    } else if op == self.inverse {
                        (2, 1)
                    } else {
                        (1, 0)
                    };
                    let used = used.min(node.inputs.len());
                    for (k, &i) in node.inputs[..used].iter().enumerate().rev() {
                        stack.push((i, positive != (k == flipped)));
                    }
                }
                None => leaf(&mut num, &mut denum),
            }
        }
        (num, denum)
    }

    /// True when `v` is a single term of its own cluster, so that
    /// [`get_num_denum`](Self::get_num_denum) gives `([v], [])`: it is not
    /// computed by a cluster op (nor by `-1 * x` for the additive canonizer)
    /// nor by a DimShuffle. A look at one node; `false` means "walk to know".
    pub fn is_leaf(&self, fg: &FunctionGraph, v: VarId) -> bool {
        let Some(n) = fg.owner(v) else {
            return true;
        };
        let op = &fg.node(n).op;
        if matches!(op, Op::DimShuffle { .. }) || self.member(op).is_some() {
            return false;
        }
        !(self.main == ScalarOp::Add
            && op.is_elemwise(ScalarOp::Mul)
            && super::util::is_neg(fg, v).is_some())
    }

    /// Removes every variable present in both lists (once per pair):
    /// `[x, y], [x] -> [y], []`.
    pub fn simplify_factors(&self, num: &mut Vec<VarId>, denum: &mut Vec<VarId>) {
        let (keep_num, keep_denum) = pair_off(num, denum);
        let mut k = 0;
        num.retain(|_| {
            k += 1;
            keep_num[k - 1]
        });
        let mut k = 0;
        denum.retain(|_| {
            k += 1;
            keep_denum[k - 1]
        });
    }

    /// Folds every constant of both lists into one constant placed first in
    /// the numerator (dropped when it is the neutral element):
    /// `[x, y, 2], [4, z] -> [0.5, x, y], [z]`. When the only constant is
    /// already the first numerator term, the lists are returned unchanged
    /// (otherwise the rewrite would replace a graph by an equal one forever).
    pub fn simplify_constants(
        &self,
        fg: &mut FunctionGraph,
        num: &[VarId],
        denum: &[VarId],
        out_dtype: DType,
    ) -> (Vec<VarId>, Vec<VarId>) {
        let (mut n_rest, mut d_rest, mut n_ct, mut d_ct) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for &v in num {
            match unique_constant(fg, v) {
                Some(_) => n_ct.push(v),
                None => n_rest.push(v),
            }
        }
        for &v in denum {
            match unique_constant(fg, v) {
                Some(_) => d_ct.push(v),
                None => d_rest.push(v),
            }
        }
        let value = self.fold(fg, &n_ct, &d_ct, out_dtype);
        let is_neutral = value.unique_value() == Some(self.neutral());
        if n_ct.len() == 1 && d_ct.is_empty() && !is_neutral && num.first() == n_ct.first() {
            return (num.to_vec(), denum.to_vec());
        }
        let mut out = Vec::with_capacity(n_rest.len() + 1);
        if !is_neutral {
            out.push(fg.constant(value));
        }
        out.extend(n_rest);
        (out, d_rest)
    }

    /// The constants `num` and `denum` folded into one 0-d value of `dtype`
    /// (`inverse(main(*num), main(*denum))`): in `f64` then rounded for float
    /// dtypes; in wrapping `i64` arithmetic then wrapped for integer ones, as
    /// numpy computes them (a float-domain fold would saturate instead).
    fn fold(&self, fg: &FunctionGraph, num: &[VarId], denum: &[VarId], dtype: DType) -> Value {
        if dtype.is_int() && (self.main == ScalarOp::Add || denum.is_empty()) {
            let exact = |v: &VarId| unique_int_constant(fg, *v);
            let n: Option<SmallVec<[i64; 4]>> = num.iter().map(exact).collect();
            let d: Option<SmallVec<[i64; 4]>> = denum.iter().map(exact).collect();
            if let (Some(n), Some(d)) = (n, d) {
                let v = if self.main == ScalarOp::Mul {
                    n.iter().fold(1i64, |a, &b| a.wrapping_mul(b))
                } else {
                    let sum = |t: &[i64]| t.iter().fold(0i64, |a, &b| a.wrapping_add(b));
                    sum(&n).wrapping_sub(sum(&d))
                };
                return Value::scalar_i64(dtype, crate::ops::composite::wrap_i64(v, dtype));
            }
        }
        Value::scalar_f64(dtype, self.fold_f64(fg, num, denum, dtype))
    }

    /// The folded value of constants `num` and `denum` computed in `f64` and
    /// rounded to `dtype` (what [`fold`](Self::fold) stores for a float
    /// `dtype`).
    fn fold_f64(&self, fg: &FunctionGraph, num: &[VarId], denum: &[VarId], dtype: DType) -> f64 {
        let value = |v: &VarId| unique_constant(fg, *v).unwrap_or(f64::NAN);
        let (n, d): (SmallVec<[f64; 4]>, SmallVec<[f64; 4]>) = (
            num.iter().map(value).collect(),
            denum.iter().map(value).collect(),
        );
        crate::ops::composite::round_to(self.calculate(&n, &d), dtype)
    }

    /// The lengths of the lists [`simplify`](Self::simplify) would return,
    /// without building anything (no constant is created).
    pub fn simplified_len(
        &self,
        fg: &FunctionGraph,
        num: &[VarId],
        denum: &[VarId],
        out_dtype: DType,
    ) -> (usize, usize) {
        let (keep_num, keep_denum) = pair_off(num, denum);
        let (mut n_ct, mut d_ct) = (SmallVec::<[VarId; 4]>::new(), SmallVec::<[VarId; 4]>::new());
        let (mut n_rest, mut d_rest) = (0, 0);
        for (&v, _) in num.iter().zip(&keep_num).filter(|(_, &k)| k) {
            match unique_constant(fg, v) {
                Some(_) => n_ct.push(v),
                None => n_rest += 1,
            }
        }
        for (&v, _) in denum.iter().zip(&keep_denum).filter(|(_, &k)| k) {
            match unique_constant(fg, v) {
                Some(_) => d_ct.push(v),
                None => d_rest += 1,
            }
        }
        if n_ct.is_empty() && d_ct.is_empty() {
            // Nothing to fold: the folded constant would be the neutral
            // element, which does not count (the common case, asked for
            // every term of every sum a factor is tried against).
            return (n_rest, d_rest);
        }
        // A float fold's value without building the constant.
        let value = if out_dtype.is_float() {
            Some(self.fold_f64(fg, &n_ct, &d_ct, out_dtype))
        } else {
            self.fold(fg, &n_ct, &d_ct, out_dtype).unique_value()
        };
        // simplify_constants keeps the lists as they are or puts the folded
        // constant first; either way that constant counts unless neutral.
        (n_rest + usize::from(value != Some(self.neutral())), d_rest)
    }

    /// [`simplify_factors`](Self::simplify_factors) then [`simplify_constants`](Self::simplify_constants).
    pub fn simplify(
        &self,
        fg: &mut FunctionGraph,
        mut num: Vec<VarId>,
        mut denum: Vec<VarId>,
        out_dtype: DType,
    ) -> (Vec<VarId>, Vec<VarId>) {
        self.simplify_factors(&mut num, &mut denum);
        self.simplify_constants(fg, &num, &denum, out_dtype)
    }

    /// Builds `inverse(main(*num), main(*denum))` with as few nodes as possible
    /// (`n=1, d=0: num[0]`; `n=0, d=1: reciprocal(denum[0])`; ...).
    pub fn merge_num_denum(
        &self,
        fg: &mut FunctionGraph,
        num: &[VarId],
        denum: &[VarId],
        dtype: DType,
    ) -> Result<VarId> {
        // Terms narrower than the cluster (its constants, now folded or
        // dropped, widened it) are cast first: `(x_i8 * 1_i64) * y_i8`
        // multiplies in i64, and an i8 product would wrap.
        let product = |fg: &mut FunctionGraph, terms: &[VarId]| -> Result<VarId> {
            match terms {
                [] => Ok(super::util::scalar_const(fg, dtype, self.neutral())),
                [one] => Ok(*one),
                many => {
                    let many = widen_operands(fg, self.main, many, dtype)?;
                    self.balanced(fg, &many)
                }
            }
        };
        match (num.len(), denum.len()) {
            (_, 0) => product(fg, num),
            (0, _) => {
                let d = product(fg, denum)?;
                let d = widen_operands(fg, self.reciprocal, &[d], dtype)?;
                elemwise(fg, self.reciprocal, &d)
            }
            _ => {
                let n = product(fg, num)?;
                let d = product(fg, denum)?;
                let nd = widen_operands(fg, self.inverse, &[n, d], dtype)?;
                elemwise(fg, self.inverse, &nd)
            }
        }
    }

    /// `main(*terms)` as one node, or as a tree of nodes of at most
    /// [`MAX_FANIN`] inputs when there are more terms (so that a cluster of
    /// 100,000 terms does not become one node with 100,000 inputs).
    fn balanced(&self, fg: &mut FunctionGraph, terms: &[VarId]) -> Result<VarId> {
        let mut level = terms.to_vec();
        while level.len() > MAX_FANIN {
            level = level
                .chunks(MAX_FANIN)
                .map(|c| {
                    if c.len() == 1 {
                        Ok(c[0])
                    } else {
                        elemwise(fg, self.main, c)
                    }
                })
                .collect::<Result<_>>()?;
        }
        elemwise(fg, self.main, &level)
    }

    /// The canonical replacement for `node`'s output, or `None` when the node
    /// is not a cluster root or is already canonical.
    pub fn transform(&self, fg: &mut FunctionGraph, node: NodeId) -> Result<Option<VarId>> {
        if fg.node(node).outputs.len() != 1 {
            return Ok(None);
        }
        let out = fg.node(node).outputs[0];
        if self.member(&fg.node(node).op).is_none() {
            return Ok(None);
        }
        if fg.clients(out).is_empty() || self.is_cluster_inner(fg, out) {
            return Ok(None);
        }
        let out_ty = fg.ty(out).clone();
        // Unsigned arithmetic wraps, but the canonizer's constants (negated
        // terms, folded products) are computed in the float domain and
        // saturate when stored: `x - 3` on u8 would become `x + 0`.
        if out_ty.dtype.is_unsigned() {
            return Ok(None);
        }
        // Boolean `add` / `mul` are logical or / and: no inverse, no group.
        if out_ty.dtype == DType::Bool {
            return Ok(None);
        }
        let (orig_num, orig_denum) = self.get_num_denum(fg, out);
        let (num, denum) = self.simplify(fg, orig_num.clone(), orig_denum.clone(), out_ty.dtype);
        if same_terms(fg, &orig_num, &num)
            && same_terms(fg, &orig_denum, &denum)
            && self.is_merged_form(fg, out, &num, &denum)
        {
            return Ok(None);
        }
        let new = self.merge_num_denum(fg, &num, &denum, out_ty.dtype)?;
        // Restore the shape from the cluster's leaves (already computed), then its inputs.
        let mut shape_from: Vec<VarId> = orig_num
            .iter()
            .chain(&orig_denum)
            .copied()
            .filter(|&v| fg.constant_value(v).is_none())
            .collect();
        shape_from.extend(fg.node(node).inputs.iter().copied());
        let new = match_type(fg, new, &out_ty, &shape_from)?;
        Ok(out_ty.accepts_replacement(fg.ty(new)).then_some(new))
    }

    /// True when `v` already has the structure [`merge_num_denum`](Self::merge_num_denum)
    /// builds for `(num, denum)`: `main(*num)`, `reciprocal(main(*denum))` or
    /// `inverse(main(*num), main(*denum))`, each `main` of one term being the term
    /// itself (element-wise alignment DimShuffles are looked through). A cluster
    /// with the right terms but another shape (`x / y / z`, `(x * y) * z`) is
    /// rebuilt: `x / (y * z)`, `x * y * z` (one pass over the memory).
    pub fn is_merged_form(
        &self,
        fg: &FunctionGraph,
        v: VarId,
        num: &[VarId],
        denum: &[VarId],
    ) -> bool {
        // `elemwise` pads a lower-dimensional operand with a DimShuffle, so a
        // product may sit under one (`x / y` with a vector `x` and a matrix `y`).
        let inputs_of = |v: VarId, op: ScalarOp| -> Option<Vec<VarId>> {
            let n = fg.owner(strip_left_pad(fg, v))?;
            let node = fg.node(n);
            (node.op.scalar_op() == Some(op)).then(|| node.inputs.to_vec())
        };
        let product_is = |v: VarId, terms: &[VarId]| -> bool {
            match terms {
                [] => false,
                [one] => strip_left_pad(fg, v) == *one,
                // More terms than one node takes: the balanced tree `balanced` builds.
                many if many.len() > MAX_FANIN => {
                    let mut leaves = Vec::with_capacity(many.len());
                    let mut stack = vec![v];
                    while let Some(x) = stack.pop() {
                        // Terms are never `main` nodes: get_num_denum flattened them.
                        match inputs_of(x, self.main) {
                            Some(ins) => stack.extend(ins.into_iter().rev()),
                            None => leaves.push(strip_left_pad(fg, x)),
                        }
                    }
                    leaves == many
                }
                many => inputs_of(v, self.main).is_some_and(|ins| {
                    ins.len() == many.len()
                        && ins
                            .iter()
                            .zip(many)
                            .all(|(&i, &t)| strip_left_pad(fg, i) == t)
                }),
            }
        };
        match (num.len(), denum.len()) {
            (0, 0) | (1, 0) => false,
            (_, 0) => product_is(v, num),
            (0, _) => inputs_of(v, self.reciprocal).is_some_and(|ins| product_is(ins[0], denum)),
            _ => inputs_of(v, self.inverse)
                .is_some_and(|ins| product_is(ins[0], num) && product_is(ins[1], denum)),
        }
    }

    /// Does some client of `v` (through single-client DimShuffles that only
    /// add dimensions on the left, as [`get_num_denum`](Self::get_num_denum)
    /// looks through) belong to the cluster? Then `v`'s node is not the
    /// cluster's root. Behind any other DimShuffle `v` is a leaf of the
    /// client's cluster, hence the root of its own.
    pub fn is_cluster_inner(&self, fg: &FunctionGraph, v: VarId) -> bool {
        let dtype = fg.ty(v).dtype;
        fg.clients(v).iter().any(|&c| {
            let Client::Node(mut n, _) = c else {
                return false;
            };
            loop {
                let node = fg.node(n);
                if let Op::DimShuffle {
                    input_ndim,
                    new_order,
                } = &node.op
                {
                    if !only_adds_left_dims(*input_ndim, new_order) {
                        return false;
                    }
                    let o = node.outputs[0];
                    match fg.clients(o) {
                        [Client::Node(next, _)] => {
                            n = *next;
                            continue;
                        }
                        _ => return false,
                    }
                }
                let client_dtype = fg.ty(node.outputs[0]).dtype;
                return dtype == client_dtype && self.member(&node.op).is_some();
            }
        })
    }
}

/// Which terms survive cancelling equal terms across the lists: each
/// numerator term, in order, cancels the first equal denominator term not
/// cancelled yet. Returns keep-flags for `num` and `denum`.
fn pair_off(num: &[VarId], denum: &[VarId]) -> (SmallVec<[bool; 16]>, SmallVec<[bool; 16]>) {
    let mut keep_num: SmallVec<[bool; 16]> = smallvec::smallvec![true; num.len()];
    let mut keep_denum: SmallVec<[bool; 16]> = smallvec::smallvec![true; denum.len()];
    for (i, n) in num.iter().enumerate() {
        if let Some(j) = (0..denum.len()).find(|&j| keep_denum[j] && denum[j] == *n) {
            keep_num[i] = false;
            keep_denum[j] = false;
        }
    }
    (keep_num, keep_denum)
}

/// A DimShuffle of the form `(x, ..., x, 0, 1, ..., ndim-1)`: it only adds
/// broadcastable dimensions on the left, as element-wise alignment does.
pub fn only_adds_left_dims(input_ndim: usize, new_order: &[Option<usize>]) -> bool {
    let extra = new_order.len().saturating_sub(input_ndim);
    new_order.len() >= input_ndim
        && new_order[..extra].iter().all(Option::is_none)
        && new_order[extra..]
            .iter()
            .enumerate()
            .all(|(k, d)| *d == Some(k))
}

/// `Some(x)` when `v` is `-1 * x` or `x * -1` and `neg(x)` would have `v`'s
/// type (also for a `bool` `x`, whose product with `-1` and negation are
/// both `i64`; specialize turns that product into `neg(x)`).
fn neg_as_mul(fg: &FunctionGraph, v: VarId) -> Option<VarId> {
    let node = fg.node(fg.owner(v)?);
    if node.op.scalar_op()? != ScalarOp::Mul || node.inputs.len() != 2 {
        return None;
    }
    let (a, b) = (node.inputs[0], node.inputs[1]);
    let x = if unique_constant(fg, a) == Some(-1.0) {
        b
    } else if unique_constant(fg, b) == Some(-1.0) {
        a
    } else {
        return None;
    };
    let (tx, tv) = (fg.ty(x), fg.ty(v));
    let neg_dtype = ScalarOp::Neg.output_dtype(&[tx.dtype]).ok()?;
    (neg_dtype == tv.dtype && tx.shape == tv.shape).then_some(x)
}

/// `Some(x)` when `v` is `x ** -1` of a float `x` with `v`'s type (the form
/// `local_reciprocal_canon` gives `reciprocal(x)`).
fn reciprocal_as_pow(fg: &FunctionGraph, v: VarId) -> Option<VarId> {
    let node = fg.node(fg.owner(v)?);
    if node.op.scalar_op()? != ScalarOp::Pow {
        return None;
    }
    let (x, e) = (node.inputs[0], node.inputs[1]);
    (fg.ty(v).dtype.is_float() && fg.ty(x) == fg.ty(v) && unique_constant(fg, e) == Some(-1.0))
        .then_some(x)
}

/// `v` without the DimShuffles that only add broadcastable dimensions on the left.
pub fn strip_left_pad(fg: &FunctionGraph, mut v: VarId) -> VarId {
    while let Some(n) = fg.owner(v) {
        match &fg.node(n).op {
            Op::DimShuffle {
                input_ndim,
                new_order,
            } if only_adds_left_dims(*input_ndim, new_order) => v = fg.node(n).inputs[0],
            _ => break,
        }
    }
    v
}

fn same_terms(fg: &FunctionGraph, a: &[VarId], b: &[VarId]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(&x, &y)| {
            x == y
                || match (fg.constant_value(x), fg.constant_value(y)) {
                    (Some(p), Some(q)) => p.same_as(q),
                    _ => false,
                }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::*;

    fn fg_of(inputs: &[Tensor], out: Tensor) -> FunctionGraph {
        FunctionGraph::new(inputs, &[out]).unwrap()
    }

    fn names(fg: &FunctionGraph, vs: &[VarId]) -> Vec<String> {
        vs.iter()
            .map(|&v| crate::graph::print::pprint(fg, v))
            .collect()
    }

    #[test]
    fn get_num_denum_examples_of_seed_004() {
        let (x, y, z) = (
            scalar("x", DType::F64),
            scalar("y", DType::F64),
            scalar("z", DType::F64),
        );
        let (a, b, c, d) = (
            scalar("a", DType::F64),
            scalar("b", DType::F64),
            scalar("c", DType::F64),
            scalar("d", DType::F64),
        );
        let c_ = AlgebraicCanonizer::MUL;
        let cases: Vec<(Tensor, Vec<&str>, Vec<&str>)> = vec![
            (&x * &y, vec!["x", "y"], vec![]),
            (x.reciprocal(), vec![], vec!["x"]),
            (&x.reciprocal() * &y.reciprocal(), vec![], vec!["x", "y"]),
            (&(&x * &y) / &z, vec!["x", "y"], vec!["z"]),
            (
                &(&(&x.log() / &y) * &(&z + &x)) / &y,
                vec!["log(x)", "(z + x)"],
                vec!["y", "y"],
            ),
            (&(&(&a / &b) * &c) / &d, vec!["a", "c"], vec!["b", "d"]),
            (&a / &(&b / &c), vec!["a", "c"], vec!["b"]),
            (x.log(), vec!["log(x)"], vec![]),
            (pow(&x, &y).unwrap(), vec!["(x ** y)"], vec![]),
            (&(&x * &y) * &z, vec!["x", "y", "z"], vec![]),
        ];
        for (t, num, denum) in cases {
            let fg = fg_of(
                &[
                    x.clone(),
                    y.clone(),
                    z.clone(),
                    a.clone(),
                    b.clone(),
                    c.clone(),
                    d.clone(),
                ],
                t,
            );
            let (n, dn) = c_.get_num_denum(&fg, fg.outputs()[0]);
            assert_eq!(
                (names(&fg, &n), names(&fg, &dn)),
                (
                    num.iter().map(|s| s.to_string()).collect(),
                    denum.iter().map(|s| s.to_string()).collect()
                )
            );
        }
    }

    #[test]
    fn get_num_denum_stops_at_a_dtype_change() {
        let (x8, y8) = (scalar("x8", DType::I8), scalar("y8", DType::I8));
        let (f, g) = (scalar("f", DType::F32), scalar("g", DType::F64));
        let x64 = scalar("x64", DType::I64);
        let cases: Vec<(AlgebraicCanonizer, Tensor, Vec<&str>, Vec<&str>)> = vec![
            // An i8 difference under an i64 sum stays one term (it wraps in i8).
            (
                AlgebraicCanonizer::ADD,
                &(&x8 - &y8) + &x64,
                vec!["(x8 - y8)", "x64"],
                vec![],
            ),
            // Under an i8 sum it is flattened.
            (
                AlgebraicCanonizer::ADD,
                &(&x8 - &y8) + &x8,
                vec!["x8", "x8"],
                vec!["y8"],
            ),
            // An f32 quotient under an f64 product stays one term.
            (
                AlgebraicCanonizer::MUL,
                &(&f / &f) * &g,
                vec!["(f / f)", "g"],
                vec![],
            ),
        ];
        for (canon, t, num, denum) in cases {
            let ins = [x8.clone(), y8.clone(), f.clone(), g.clone(), x64.clone()];
            let fg = fg_of(&ins, t);
            let (n, dn) = canon.get_num_denum(&fg, fg.outputs()[0]);
            assert_eq!(
                (names(&fg, &n), names(&fg, &dn)),
                (
                    num.iter().map(|s| s.to_string()).collect(),
                    denum.iter().map(|s| s.to_string()).collect()
                )
            );
        }
    }

    #[test]
    fn integer_constants_fold_with_wrap_around() {
        let x = scalar("x", DType::I8);
        let mut fg = fg_of(std::slice::from_ref(&x), &x + 1);
        let c = |fg: &mut FunctionGraph, v: i64| fg.constant(Value::scalar_i64(DType::I8, v));
        let (a, b, m) = (c(&mut fg, 100), c(&mut fg, 100), c(&mut fg, -128));
        let vx = fg.inputs()[0];
        let (n, d) =
            AlgebraicCanonizer::ADD.simplify_constants(&mut fg, &[vx, a, b], &[], DType::I8);
        assert_eq!(names(&fg, &n), ["-56", "x"]);
        assert!(d.is_empty());
        let (n, _) = AlgebraicCanonizer::ADD.simplify_constants(&mut fg, &[vx], &[m], DType::I8);
        assert_eq!(names(&fg, &n), ["-128", "x"]);
        let (n, _) =
            AlgebraicCanonizer::MUL.simplify_constants(&mut fg, &[a, vx, b], &[], DType::I8);
        assert_eq!(names(&fg, &n), ["16", "x"]);
    }

    /// The graph `(x + y) + z` of three f64 scalars, and its inputs.
    fn xyz() -> (FunctionGraph, VarId, VarId, VarId) {
        let (x, y, z) = (
            scalar("x", DType::F64),
            scalar("y", DType::F64),
            scalar("z", DType::F64),
        );
        let fg = fg_of(&[x.clone(), y.clone(), z.clone()], &(&x + &y) + &z);
        let (vx, vy, vz) = (fg.inputs()[0], fg.inputs()[1], fg.inputs()[2]);
        (fg, vx, vy, vz)
    }

    /// An f64 scalar constant in `fg`.
    fn k(fg: &mut FunctionGraph, v: f64) -> VarId {
        super::super::util::scalar_const(fg, DType::F64, v)
    }

    #[test]
    fn simplify_factors_and_constants_examples() {
        let (mut fg, vx, vy, vz) = xyz();
        let c = AlgebraicCanonizer::MUL;
        let (mut n, mut d) = (vec![vx], vec![vx]);
        c.simplify_factors(&mut n, &mut d);
        assert!(n.is_empty() && d.is_empty());
        let (mut n, mut d) = (vec![vx, vy], vec![vx]);
        c.simplify_factors(&mut n, &mut d);
        assert_eq!((n, d), (vec![vy], vec![]));
        // [a, b], [c, d] -> unchanged (nothing in common).
        let (mut n, mut d) = (vec![vx, vy], vec![vz]);
        c.simplify_factors(&mut n, &mut d);
        assert_eq!((n, d), (vec![vx, vy], vec![vz]));
        let (two, three, four) = (k(&mut fg, 2.0), k(&mut fg, 3.0), k(&mut fg, 4.0));
        let (n, d) = c.simplify_constants(&mut fg, &[two, three, vx], &[], DType::F64);
        assert_eq!(names(&fg, &n), vec!["6.0", "x"]);
        assert!(d.is_empty());
        let (n, d) = c.simplify_constants(&mut fg, &[vx, vy, two], &[four, vz], DType::F64);
        assert_eq!(
            (names(&fg, &n), names(&fg, &d)),
            (
                vec!["0.5".to_string(), "x".into(), "y".into()],
                vec!["z".to_string()]
            )
        );
        let two_b = k(&mut fg, 2.0);
        let (n, d) = c.simplify_constants(&mut fg, &[vx, two, vy], &[vz, two_b], DType::F64);
        assert_eq!(
            (names(&fg, &n), names(&fg, &d)),
            (vec!["x".to_string(), "y".into()], vec!["z".to_string()])
        );
    }

    #[test]
    fn merge_num_denum_uses_few_nodes() {
        let (x, y) = (scalar("x", DType::F64), scalar("y", DType::F64));
        let mut fg = fg_of(&[x.clone(), y.clone()], &x + &y);
        let (vx, vy) = (fg.inputs()[0], fg.inputs()[1]);
        let c = AlgebraicCanonizer::MUL;
        let show = |fg: &mut FunctionGraph, n: &[VarId], d: &[VarId]| {
            let v = c.merge_num_denum(fg, n, d, DType::F64).unwrap();
            crate::graph::print::pprint(fg, v)
        };
        assert_eq!(show(&mut fg, &[], &[]), "1.0");
        assert_eq!(show(&mut fg, &[vx], &[]), "x");
        assert_eq!(show(&mut fg, &[], &[vx]), "reciprocal(x)");
        assert_eq!(show(&mut fg, &[vx], &[vy]), "(x / y)");
        assert_eq!(show(&mut fg, &[], &[vx, vy]), "reciprocal((x * y))");
        assert_eq!(show(&mut fg, &[vx, vy], &[]), "(x * y)");
        assert_eq!(show(&mut fg, &[vx], &[vx, vy]), "(x / (x * y))");
        assert_eq!(show(&mut fg, &[vx, vy], &[vy]), "((x * y) / y)");
    }

    /// `simplified_len` counts what `simplify` returns, with and without
    /// constants to fold (a fold to the neutral element counts nothing).
    #[test]
    fn simplified_len_counts_what_simplify_returns() {
        let (mut fg, vx, vy, vz) = xyz();
        let (zero, one, two, half) = (
            k(&mut fg, 0.0),
            k(&mut fg, 1.0),
            k(&mut fg, 2.0),
            k(&mut fg, 0.5),
        );
        let cases: Vec<(Vec<VarId>, Vec<VarId>)> = vec![
            (vec![vx, vy], vec![vz]),
            (vec![vx, vy], vec![vx]),
            (vec![], vec![]),
            (vec![vx, two], vec![vz]),
            (vec![vx, two, half], vec![vy]),
            (vec![vx, one], vec![]),
            (vec![vx, zero], vec![two]),
            (vec![two], vec![two, vy]),
        ];
        for c in [AlgebraicCanonizer::MUL, AlgebraicCanonizer::ADD] {
            for (n, d) in &cases {
                let len = c.simplified_len(&fg, n, d, DType::F64);
                let (sn, sd) = c.simplify(&mut fg, n.clone(), d.clone(), DType::F64);
                assert_eq!(len, (sn.len(), sd.len()), "{:?} / {:?}", n, d);
            }
        }
    }
}
