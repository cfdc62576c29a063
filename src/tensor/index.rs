//! Basic indexing in the tensor API: numpy's `x[...]` as [`Tensor::slice`]
//! with a list of [`Idx`] items, and the slice updates [`set_subtensor`] /
//! [`inc_subtensor`].
//!
//! An index is resolved at build time into a `Subtensor` over the dimensions
//! it consumes (integers and slices; `...` expands to full slices) followed by
//! a `DimShuffle` inserting the `None` axes. An index of bare `:` and `None`
//! only builds no `Subtensor` (it is the `DimShuffle` alone, as before
//! indexing existed). A bound given as a constant 0-d integer tensor is
//! folded into the op; any other 0-d integer tensor becomes an input of the
//! node, checked and clamped at run time.

use std::ops::{Range, RangeFrom, RangeFull, RangeTo};

use super::Tensor;
use crate::error::{Error, Result};
use crate::ops::{Bound, IndexEntry, Op};

/// One bound of an index item: a constant or a 0-d integer tensor.
#[derive(Clone, Debug)]
pub enum IdxBound {
    /// A constant (negative counts from the end).
    Const(i64),
    /// A 0-d integer tensor, read at run time.
    Tensor(Tensor),
}

impl From<i64> for IdxBound {
    fn from(v: i64) -> Self {
        IdxBound::Const(v)
    }
}

impl From<i32> for IdxBound {
    fn from(v: i32) -> Self {
        IdxBound::Const(v.into())
    }
}

impl From<&Tensor> for IdxBound {
    fn from(t: &Tensor) -> Self {
        IdxBound::Tensor(t.clone())
    }
}

/// One item of a numpy-style basic index.
#[derive(Clone, Debug)]
pub enum Idx {
    /// One position (negative counts from the end); the dimension is dropped.
    At(IdxBound),
    /// `start:stop:step`; `None` takes numpy's default.
    Slice {
        /// First position.
        start: Option<IdxBound>,
        /// Position past the end.
        stop: Option<IdxBound>,
        /// Step (not 0; negative walks backwards).
        step: Option<IdxBound>,
    },
    /// `None`: a new dimension of size 1.
    NewAxis,
    /// `...`: as many full slices as the other items leave dimensions.
    Ellipsis,
}

impl Idx {
    /// The full slice `:`.
    pub const FULL: Idx = Idx::Slice {
        start: None,
        stop: None,
        step: None,
    };

    /// This slice with step `step` (`Idx::from(..).step(-1)` is `::-1`);
    /// other items are returned unchanged.
    pub fn step(self, step: impl Into<IdxBound>) -> Idx {
        match self {
            Idx::Slice { start, stop, .. } => Idx::Slice {
                start,
                stop,
                step: Some(step.into()),
            },
            other => other,
        }
    }

    /// `start:stop` with any bounds (constants or 0-d integer tensors).
    pub fn range(start: impl Into<IdxBound>, stop: impl Into<IdxBound>) -> Idx {
        Idx::Slice {
            start: Some(start.into()),
            stop: Some(stop.into()),
            step: None,
        }
    }
}

impl From<i64> for Idx {
    fn from(v: i64) -> Self {
        Idx::At(IdxBound::Const(v))
    }
}

impl From<i32> for Idx {
    fn from(v: i32) -> Self {
        Idx::At(IdxBound::Const(v.into()))
    }
}

impl From<Range<i32>> for Idx {
    /// `a..b` is numpy's `a:b` (negative bounds count from the end).
    fn from(r: Range<i32>) -> Self {
        Idx::range(r.start, r.end)
    }
}

impl From<RangeFrom<i32>> for Idx {
    fn from(r: RangeFrom<i32>) -> Self {
        Idx::from(i64::from(r.start)..)
    }
}

impl From<RangeTo<i32>> for Idx {
    fn from(r: RangeTo<i32>) -> Self {
        Idx::from(..i64::from(r.end))
    }
}

impl From<&Tensor> for Idx {
    fn from(t: &Tensor) -> Self {
        Idx::At(IdxBound::Tensor(t.clone()))
    }
}

impl From<Range<i64>> for Idx {
    /// `a..b` is numpy's `a:b` (negative bounds count from the end).
    fn from(r: Range<i64>) -> Self {
        Idx::range(r.start, r.end)
    }
}

impl From<RangeFrom<i64>> for Idx {
    fn from(r: RangeFrom<i64>) -> Self {
        Idx::Slice {
            start: Some(r.start.into()),
            stop: None,
            step: None,
        }
    }
}

impl From<RangeTo<i64>> for Idx {
    fn from(r: RangeTo<i64>) -> Self {
        Idx::Slice {
            start: None,
            stop: Some(r.end.into()),
            step: None,
        }
    }
}

impl From<RangeFull> for Idx {
    fn from(_: RangeFull) -> Self {
        Idx::FULL
    }
}

/// An index resolved against a tensor: the `Subtensor` entries, its bound
/// inputs, and the `DimShuffle` order that inserts the new axes afterwards.
struct Resolved {
    entries: Vec<IndexEntry>,
    bounds: Vec<Tensor>,
    /// True when some entry is more than a bare `:`.
    selects: bool,
    /// The DimShuffle order over the Subtensor's output (`None`: new axis).
    order: Vec<Option<usize>>,
}

fn resolve(op: &str, x: &Tensor, items: &[Idx]) -> Result<Resolved> {
    let err = |m: String| Error::ty(op, m);
    let consuming = items
        .iter()
        .filter(|i| matches!(i, Idx::At(_) | Idx::Slice { .. }))
        .count();
    let ellipses = items.iter().filter(|i| matches!(i, Idx::Ellipsis)).count();
    if ellipses > 1 {
        return Err(err(
            "an index can only have a single ellipsis ('...')".into()
        ));
    }
    if consuming > x.ndim() {
        return Err(err(format!(
            "too many indices: {consuming} for a {}-d tensor {}",
            x.ndim(),
            x.ty()
        )));
    }
    let bound = |b: &Option<IdxBound>, bounds: &mut Vec<Tensor>| -> Option<Bound> {
        b.as_ref().map(|b| match b {
            IdxBound::Const(c) => Bound::Const(*c),
            IdxBound::Tensor(t) => match t.constant_value() {
                Some(v) if t.ndim() == 0 && t.dtype().is_int() => {
                    Bound::Const(v.to_i64_array().iter().next().copied().unwrap_or(0))
                }
                _ => {
                    bounds.push(t.clone());
                    Bound::Input
                }
            },
        })
    };
    let mut r = Resolved {
        entries: Vec::new(),
        bounds: Vec::new(),
        selects: false,
        order: Vec::new(),
    };
    let mut kept = 0;
    for item in items {
        match item {
            Idx::NewAxis => r.order.push(None),
            Idx::Ellipsis => {
                for _ in 0..x.ndim() - consuming {
                    r.entries.push(IndexEntry::FULL);
                    r.order.push(Some(kept));
                    kept += 1;
                }
            }
            Idx::At(b) => {
                let b = bound(&Some(b.clone()), &mut r.bounds).expect("some");
                r.entries.push(IndexEntry::Int(b));
                r.selects = true;
            }
            Idx::Slice { start, stop, step } => {
                let e = IndexEntry::Slice {
                    start: bound(start, &mut r.bounds),
                    stop: bound(stop, &mut r.bounds),
                    step: bound(step, &mut r.bounds),
                };
                r.selects |= e != IndexEntry::FULL;
                r.entries.push(e);
                r.order.push(Some(kept));
                kept += 1;
            }
        }
    }
    let rest = x.ndim() - r.entries.len();
    r.order.extend((kept..kept + rest).map(Some));
    while r.entries.last() == Some(&IndexEntry::FULL) {
        r.entries.pop();
    }
    Ok(r)
}

impl Tensor {
    /// numpy's basic indexing `x[items]`: integers (negative from the end),
    /// slices (`Idx::range(1, -1)`, `(2..).into()`, `Idx::from(..).step(-1)`), [`Idx::NewAxis`],
    /// [`Idx::Ellipsis`]; bounds may be 0-d integer tensors. The result is a
    /// view of `self` (no copy). Errors: too many indices, a constant index
    /// out of range of a static size, a step of 0, a non-integer bound.
    pub fn slice(&self, items: &[Idx]) -> Result<Tensor> {
        let r = resolve("Subtensor", self, items)?;
        let sub = if r.selects {
            let mut ins: Vec<&Tensor> = vec![self];
            ins.extend(r.bounds.iter());
            Tensor::apply(Op::Subtensor { idx: r.entries }, &ins)?
        } else {
            self.clone()
        };
        let identity =
            r.order.len() == sub.ndim() && r.order.iter().enumerate().all(|(k, d)| *d == Some(k));
        if identity {
            Ok(sub)
        } else {
            sub.dimshuffle(&r.order)
        }
    }
}

fn update(x: &Tensor, items: &[Idx], y: &Tensor, set: bool) -> Result<Tensor> {
    let op = if set { "SetSubtensor" } else { "IncSubtensor" };
    if items.iter().any(|i| matches!(i, Idx::NewAxis)) {
        return Err(Error::ty(
            op,
            "a slice update cannot insert a new axis ('None') in its index",
        ));
    }
    let r = resolve(op, x, items)?;
    // A 0-d constant `y` is weak, as a Python scalar in numpy's `x[i] = v`:
    // it takes x's dtype.
    let y = match y.constant_value() {
        Some(_) if y.ndim() == 0 => y.cast(x.dtype()),
        _ => y.clone(),
    };
    let mut ins: Vec<&Tensor> = vec![x, &y];
    ins.extend(r.bounds.iter());
    Tensor::apply(
        Op::IncSubtensor {
            idx: r.entries,
            set,
            inplace: false,
        },
        &ins,
    )
}

/// `x` with `x[items]` replaced by `y` broadcast to it (PyTensor's
/// `set_subtensor`): a new tensor, `x` is unchanged. `y` must fit `x`'s
/// dtype without a downcast; its dimensions broadcast when of static size 1.
pub fn set_subtensor(x: &Tensor, items: &[Idx], y: &Tensor) -> Result<Tensor> {
    update(x, items, y, true)
}

/// `x` with `y` (broadcast) added to `x[items]` (PyTensor's `inc_subtensor`).
pub fn inc_subtensor(x: &Tensor, items: &[Idx], y: &Tensor) -> Result<Tensor> {
    update(x, items, y, false)
}
