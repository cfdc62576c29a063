//! Run-time broadcasting: the iteration shape of element-wise operands
//! under the static broadcasting rule, their read strides, and the checks
//! that keep every read inside its operand.
//!
//! Invariants: an operand is read with stride 0 only in a dimension of size
//! 1 (a statically broadcastable dimension of any other size is an error,
//! so no operand is read past its end); a broadcast view (a zero stride on
//! a dimension larger than 1) is never written.

use smallvec::SmallVec;

use super::state::err;
use crate::error::Result;
use crate::linker::buffer::Arr;

/// The run-time shape of an element-wise iteration over `ins` under the
/// static broadcasting rule: per dimension, the inputs not statically
/// broadcastable (`bcast`) must agree; the message names them (`descs`).
pub(super) fn broadcast_shape(
    name: &str,
    ins: &[Arr],
    bcast: &[Vec<bool>],
    descs: &[String],
) -> Result<Vec<usize>> {
    let ndim = bcast.first().map_or(0, |b| b.len());
    for (i, a) in ins.iter().enumerate() {
        if a.shape.len() != ndim {
            return Err(err(
                name,
                format!(
                    "{} has {} dimension(s), expected {ndim}",
                    descs[i],
                    a.shape.len()
                ),
            ));
        }
    }
    let mut shape = vec![1usize; ndim];
    for d in 0..ndim {
        let mut size: Option<(usize, usize)> = None;
        for (i, a) in ins.iter().enumerate() {
            if bcast[i][d] {
                // Read with stride 0 only when of size 1: a larger array
                // would be read past the iteration's other operands.
                if a.shape[d] != 1 {
                    return Err(err(
                        name,
                        format!(
                            "{} is broadcastable in dimension {d} but has size {}",
                            descs[i], a.shape[d]
                        ),
                    ));
                }
                continue;
            }
            match size {
                None => size = Some((a.shape[d], i)),
                Some((n, j)) if n != a.shape[d] => {
                    return Err(err(
                        name,
                        format!(
                            "shape mismatch in dimension {d}: {} has size {n} but {} has size {}; only dimensions of static size 1 broadcast",
                            descs[j], descs[i], a.shape[d]
                        ),
                    ))
                }
                _ => {}
            }
        }
        shape[d] = size.map_or(1, |s| s.0);
    }
    Ok(shape)
}

/// The element strides of `a` with 0 for its size-1 dimensions (broadcast reads).
pub(super) fn broadcast_strides(a: &Arr) -> SmallVec<[isize; 4]> {
    a.strides
        .iter()
        .enumerate()
        .map(|(d, &s)| if a.shape[d] == 1 { 0 } else { s })
        .collect()
}

/// True when `a` reads some element through two indices (a zero stride on
/// a dimension larger than 1): such an array must never be written. An
/// empty array has no element to overlap (a 2 x 0 buffer's standard strides
/// are 0).
pub(super) fn is_broadcast_view(a: &Arr) -> bool {
    !a.is_empty()
        && a.shape
            .iter()
            .zip(&a.strides)
            .any(|(&n, &s)| n > 1 && s == 0)
}

/// Checks a shape computed at run time (`Reshape`, `Alloc`) against the
/// output's static sizes `want`: every known size must match, so that a
/// statically broadcastable dimension has size 1 and a known size is exact.
pub(super) fn check_static_shape(
    name: &str,
    want: &[Option<usize>],
    shape: &[usize],
) -> Result<()> {
    for (d, (w, &got)) in want.iter().zip(shape).enumerate() {
        if let Some(w) = *w {
            if w != got {
                return Err(err(
                    name,
                    format!("computed shape {shape:?} has size {got} in dimension {d}, but the output's type requires {w}"),
                ));
            }
        }
    }
    Ok(())
}
