//! Basic indexing: the index lists of [`Op::Subtensor`](super::Op::Subtensor)
//! and [`Op::IncSubtensor`](super::Op::IncSubtensor), their typing, their
//! text (`1:-1, ::2, 0`) and numpy's rules for resolving them against a
//! run-time shape.
//!
//! An index list has one [`IndexEntry`] per leading dimension of the
//! indexed tensor (dimensions past the list are kept whole, as in numpy);
//! `None` and `...` are resolved by the builders (a `DimShuffle` after the
//! `Subtensor`, full slices), so they never reach an op. A [`Bound`] is a
//! constant or the next scalar integer input of the node, in the order the
//! entries list them (`start`, `stop`, `step` within a slice).
//!
//! Invariants: slices follow numpy (`PySlice_AdjustIndices`): out-of-range
//! bounds are clamped, a negative bound counts from the end, a step of 0 is
//! an error; an integer index must be in range after adding the size to a
//! negative one. A static size of the result is known exactly when the
//! input's is and every bound of its entry is constant.

use std::fmt;

use super::composite::{CRef, Composite};
use super::scalar::ScalarOp;
use super::InputInfo;
use crate::error::Result;
use crate::types::{DType, TensorType};

/// One bound of an index entry: a constant, or the node's next scalar input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bound {
    /// A constant (negative counts from the end).
    Const(i64),
    /// The next 0-d integer input of the node (after the indexed tensor and,
    /// for an update, the new values).
    Input,
}

/// One entry of a basic index: what is taken from one dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexEntry {
    /// One position (negative counts from the end); the dimension is dropped.
    Int(Bound),
    /// `start:stop:step` (a missing part takes numpy's default for the step's sign).
    Slice {
        /// First position (default: 0, or the last one for a negative step).
        start: Option<Bound>,
        /// Position past the end (default: the size, or before 0 for a negative step).
        stop: Option<Bound>,
        /// Step (default 1; 0 is an error).
        step: Option<Bound>,
    },
}

impl IndexEntry {
    /// The full slice `:`.
    pub const FULL: IndexEntry = IndexEntry::Slice {
        start: None,
        stop: None,
        step: None,
    };

    /// The bounds of this entry in input order.
    pub fn bounds(&self) -> Vec<Bound> {
        match *self {
            IndexEntry::Int(b) => vec![b],
            IndexEntry::Slice { start, stop, step } => {
                [start, stop, step].into_iter().flatten().collect()
            }
        }
    }

    /// True for a slice that keeps the whole dimension in order (`:`, `::1`,
    /// `0::`; constant bounds only).
    pub fn is_full(&self) -> bool {
        match *self {
            IndexEntry::Int(_) => false,
            IndexEntry::Slice { start, stop, step } => {
                matches!(start, None | Some(Bound::Const(0)))
                    && stop.is_none()
                    && matches!(step, None | Some(Bound::Const(1)))
            }
        }
    }
}

/// The number of scalar bound inputs an index list takes.
pub fn bound_inputs(idx: &[IndexEntry]) -> usize {
    idx.iter()
        .flat_map(IndexEntry::bounds)
        .filter(|b| *b == Bound::Input)
        .count()
}

/// An index list as text (`1:-1, ::2, 0`); `names` gives the text of each
/// `Bound::Input` in order (`?` when missing).
pub fn index_text(idx: &[IndexEntry], names: &[String]) -> String {
    let mut next = names.iter();
    let mut bound = |b: Bound| match b {
        Bound::Const(c) => c.to_string(),
        Bound::Input => next.next().cloned().unwrap_or_else(|| "?".into()),
    };
    if idx.is_empty() {
        return ":".into();
    }
    let parts: Vec<String> = idx
        .iter()
        .map(|e| match *e {
            IndexEntry::Int(b) => bound(b),
            IndexEntry::Slice { start, stop, step } => {
                let mut s = start.map(&mut bound).unwrap_or_default();
                s.push(':');
                s.push_str(&stop.map(&mut bound).unwrap_or_default());
                if let Some(st) = step {
                    s.push(':');
                    s.push_str(&bound(st));
                }
                s
            }
        })
        .collect();
    parts.join(", ")
}

/// Display adapter for an index list with no input names (`Subtensor{1:-1}`).
pub struct IndexList<'a>(pub &'a [IndexEntry]);

impl fmt::Display for IndexList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&index_text(self.0, &[]))
    }
}

/// What one dimension of the input becomes once an index list is resolved
/// against a run-time shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DimSel {
    /// First position taken (meaningful only when `len > 0`).
    pub start: usize,
    /// Number of positions taken.
    pub len: usize,
    /// Distance between taken positions.
    pub step: isize,
    /// False for an integer index (the dimension is dropped).
    pub keep: bool,
}

/// numpy's slice of a dimension of size `n`: `(start, len, step)` with
/// out-of-range bounds clamped, or the message of an error (step 0).
pub fn resolve_slice(
    n: usize,
    start: Option<i64>,
    stop: Option<i64>,
    step: Option<i64>,
) -> std::result::Result<(usize, usize, isize), String> {
    let step = i128::from(step.unwrap_or(1));
    if step == 0 {
        return Err("slice step cannot be zero".into());
    }
    let n = n as i128;
    let adjust = |b: Option<i64>, default: i128| -> i128 {
        match b {
            None => default,
            Some(b) => {
                let mut b = i128::from(b);
                if b < 0 {
                    b += n;
                    if b < 0 {
                        b = if step < 0 { -1 } else { 0 };
                    }
                } else if b >= n {
                    b = if step < 0 { n - 1 } else { n };
                }
                b
            }
        }
    };
    let (start, stop) = if step < 0 {
        (adjust(start, n - 1), adjust(stop, -1))
    } else {
        (adjust(start, 0), adjust(stop, n))
    };
    let len = if step < 0 {
        if stop < start {
            (start - stop - 1) / (-step) + 1
        } else {
            0
        }
    } else if start < stop {
        (stop - start - 1) / step + 1
    } else {
        0
    };
    // A step beyond isize fits only a slice of at most one element.
    let step = if len <= 1 { step.signum() } else { step };
    let start = if len == 0 { 0 } else { start };
    Ok((start as usize, len as usize, step as isize))
}

/// numpy's integer index `i` into a dimension of size `n`, or the message
/// of an out-of-range error.
pub fn resolve_int(n: usize, i: i64) -> std::result::Result<usize, String> {
    let k = if i < 0 {
        i128::from(i) + n as i128
    } else {
        i128::from(i)
    };
    if k < 0 || k >= n as i128 {
        return Err(format!(
            "index {i} is out of bounds for a dimension of size {n}"
        ));
    }
    Ok(k as usize)
}

/// Resolves `idx` against `shape` with the run-time values of its
/// `Bound::Input`s: one [`DimSel`] per dimension of `shape` (dimensions past
/// the list are kept whole), or the message of an error.
pub fn resolve(
    idx: &[IndexEntry],
    shape: &[usize],
    inputs: &[i64],
) -> std::result::Result<Vec<DimSel>, String> {
    if idx.len() > shape.len() {
        return Err(format!(
            "too many indices: {} for {} dimensions",
            idx.len(),
            shape.len()
        ));
    }
    let mut next = inputs.iter().copied();
    let mut value = |b: Bound| match b {
        Bound::Const(c) => Ok(c),
        Bound::Input => next
            .next()
            .ok_or_else(|| "missing index bound input".to_string()),
    };
    let mut out = Vec::with_capacity(shape.len());
    for (d, &n) in shape.iter().enumerate() {
        let sel = match idx.get(d) {
            None => DimSel {
                start: 0,
                len: n,
                step: 1,
                keep: true,
            },
            Some(&IndexEntry::Int(b)) => {
                let i = value(b)?;
                let start = resolve_int(n, i).map_err(|m| format!("{m} (dimension {d})"))?;
                DimSel {
                    start,
                    len: 1,
                    step: 1,
                    keep: false,
                }
            }
            Some(&IndexEntry::Slice { start, stop, step }) => {
                let start = start.map(&mut value).transpose()?;
                let stop = stop.map(&mut value).transpose()?;
                let step = step.map(&mut value).transpose()?;
                let (start, len, step) = resolve_slice(n, start, stop, step)
                    .map_err(|m| format!("{m} (dimension {d})"))?;
                DimSel {
                    start,
                    len,
                    step,
                    keep: true,
                }
            }
        };
        out.push(sel);
    }
    Ok(out)
}

/// The shape of the selection `sel` (dropped dimensions omitted).
pub fn selected_shape(sel: &[DimSel]) -> Vec<usize> {
    sel.iter().filter(|s| s.keep).map(|s| s.len).collect()
}

/// Checks the bound inputs of an index list (0-d integers, as many as the
/// list takes, after `skip` leading inputs) and returns the output type of
/// indexing `x` with it, or the message of a type error.
fn indexed_type(
    idx: &[IndexEntry],
    x: &TensorType,
    bounds: &[InputInfo<'_>],
) -> std::result::Result<TensorType, String> {
    if idx.len() > x.ndim() {
        return Err(format!(
            "too many indices: {} for a {}-d tensor {x}",
            idx.len(),
            x.ndim()
        ));
    }
    let want = bound_inputs(idx);
    if bounds.len() != want {
        return Err(format!(
            "the index takes {want} scalar bound inputs, got {}",
            bounds.len()
        ));
    }
    for (k, b) in bounds.iter().enumerate() {
        if b.ty.ndim() != 0 || !b.ty.dtype.is_int() {
            let what = if b.ty.dtype.is_float() {
                "a float cannot be an index"
            } else {
                "an index bound must be a 0-d integer"
            };
            return Err(format!("{what}: bound input {k} is {}", b.ty));
        }
    }
    let mut shape = Vec::with_capacity(x.ndim());
    for (d, &n) in x.shape.iter().enumerate() {
        let Some(e) = idx.get(d) else {
            shape.push(n);
            continue;
        };
        let consts: Option<Vec<i64>> = e
            .bounds()
            .iter()
            .map(|b| match b {
                Bound::Const(c) => Some(*c),
                Bound::Input => None,
            })
            .collect();
        match *e {
            IndexEntry::Int(Bound::Const(i)) => {
                if let Some(n) = n {
                    resolve_int(n, i).map_err(|m| format!("{m} (dimension {d} of {x})"))?;
                }
            }
            IndexEntry::Int(Bound::Input) => {}
            IndexEntry::Slice { start, stop, step } => {
                if step == Some(Bound::Const(0)) {
                    return Err(format!("slice step cannot be zero (dimension {d})"));
                }
                let c = |b: Option<Bound>| match b {
                    Some(Bound::Const(v)) => Some(v),
                    _ => None,
                };
                let size = match (n, consts) {
                    (Some(n), Some(_)) => {
                        let (_, len, _) = resolve_slice(n, c(start), c(stop), c(step))?;
                        Some(len)
                    }
                    _ => None,
                };
                shape.push(size);
            }
        }
    }
    Ok(TensorType::new(x.dtype, shape))
}

/// The output type of `Subtensor{idx}` on `(x, bounds...)`, or the message
/// of a type error.
pub fn subtensor_type(
    idx: &[IndexEntry],
    inputs: &[InputInfo<'_>],
) -> std::result::Result<TensorType, String> {
    let Some((x, bounds)) = inputs.split_first() else {
        return Err("expects the indexed tensor and its bound inputs".into());
    };
    indexed_type(idx, x.ty, bounds)
}

/// The output type of `Inc/SetSubtensor{idx}` on `(x, y, bounds...)` (that
/// of `x`), or the message of a type error: `y` has a dtype `x`'s can hold
/// (`upcast(x, y) == x`) and broadcasts to the selection, aligned on the
/// right, where only its statically size-1 dimensions broadcast.
pub fn inc_subtensor_type(
    idx: &[IndexEntry],
    inputs: &[InputInfo<'_>],
) -> std::result::Result<TensorType, String> {
    let [x, y, bounds @ ..] = inputs else {
        return Err("expects x, the new values y and the bound inputs".into());
    };
    let sel = indexed_type(idx, x.ty, bounds)?;
    if DType::upcast(x.ty.dtype, y.ty.dtype) != x.ty.dtype {
        return Err(format!(
            "the values {} cannot be stored in {} without a downcast",
            y.ty, x.ty
        ));
    }
    if y.ty.ndim() > sel.ndim() {
        return Err(format!(
            "the values {} have more dimensions than the selection {sel}",
            y.ty
        ));
    }
    let off = sel.ndim() - y.ty.ndim();
    for (k, &ys) in y.ty.shape.iter().enumerate() {
        if let (Some(a), Some(b)) = (ys, sel.shape[off + k]) {
            if a != b && a != 1 {
                return Err(format!(
                    "the values {} do not broadcast to the selection {sel} (dimension {})",
                    y.ty,
                    off + k
                ));
            }
        }
    }
    Ok(x.ty.clone())
}

/// The scalar program of one updated element: `set` gives `cast(y)`
/// (input 0 is `y`), `inc` gives `add(x, cast(y))` (inputs `x`, `y`), in
/// `x`'s dtype. The reference and the compiled update both run it.
pub fn update_program(set: bool, x: DType, y: DType) -> Result<Composite> {
    let cast = if x == y {
        ScalarOp::Identity
    } else {
        ScalarOp::Cast(x)
    };
    if set {
        let mut c = Composite::new(vec![y]);
        let r = c.push(cast, &[CRef::Input(0)])?;
        c.outputs = vec![r];
        Ok(c)
    } else {
        let mut c = Composite::new(vec![x, y]);
        let yc = c.push(cast, &[CRef::Input(1)])?;
        let r = c.push(ScalarOp::Add, &[CRef::Input(0), yc])?;
        c.outputs = vec![r];
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_follow_numpy() {
        // (n, start, stop, step) -> numpy's (start, len, step)
        assert_eq!(resolve_slice(5, Some(1), Some(-1), None), Ok((1, 3, 1)));
        assert_eq!(resolve_slice(5, None, None, Some(-1)), Ok((4, 5, -1)));
        assert_eq!(
            resolve_slice(5, Some(10), Some(-10), Some(-2)),
            Ok((4, 3, -2))
        );
        assert_eq!(resolve_slice(5, Some(-10), Some(10), None), Ok((0, 5, 1)));
        assert_eq!(resolve_slice(5, Some(3), Some(1), None), Ok((0, 0, 1)));
        assert_eq!(resolve_slice(0, None, None, Some(-1)), Ok((0, 0, -1)));
        assert_eq!(resolve_slice(5, None, None, Some(i64::MIN)), Ok((4, 1, -1)));
        assert!(resolve_slice(5, None, None, Some(0)).is_err());
        assert_eq!(resolve_int(5, -5), Ok(0));
        assert!(resolve_int(5, 5).unwrap_err().contains("out of bounds"));
    }

    #[test]
    fn index_text_reads_like_numpy() {
        let idx = [
            IndexEntry::Slice {
                start: Some(Bound::Const(1)),
                stop: Some(Bound::Const(-1)),
                step: None,
            },
            IndexEntry::Slice {
                start: None,
                stop: None,
                step: Some(Bound::Input),
            },
            IndexEntry::Int(Bound::Const(0)),
        ];
        assert_eq!(IndexList(&idx).to_string(), "1:-1, ::?, 0");
        assert_eq!(index_text(&idx, &["k".into()]), "1:-1, ::k, 0");
    }
}
