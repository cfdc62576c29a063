//! Execution of the indexing family: `Subtensor` views (an offset pointer
//! and scaled strides into the input's buffer, no copy) and slice updates
//! (`IncSubtensor`: one element-wise kernel over the selection's view, in
//! `x`'s own array when inplace, else in a copy of it).
//!
//! Invariants: the selection is resolved by numpy's rules
//! (`ops::subtensor::resolve`) against the run-time shape and bound values
//! before anything is read: an integer index out of range or a step of 0
//! is an error, slices are clamped, so every element of a view lies inside
//! its input; a view's shape is checked against the output's static sizes;
//! an update's values broadcast to the selection only through statically
//! size-1 dimensions (read with stride 0), and an inplace update never
//! writes a broadcast view.

use smallvec::SmallVec;

use super::broadcast::{check_static_shape, is_broadcast_view};
use super::copy::copy_into;
use super::drive::{drive, jit_fn};
use super::state::{err, Exec};
use crate::error::Result;
use crate::linker::buffer::Arr;
use crate::linker::plan::step::{IncSubtensorStep, SubtensorStep};
use crate::linker::plan::Slot;
use crate::ops::subtensor::{self, DimSel};

/// The view of `x` that `sel` (resolved against `x`'s shape) selects.
fn view(x: &Arr, sel: &[DimSel]) -> Arr {
    let mut v = x.clone();
    let empty = sel.iter().any(|s| s.len == 0);
    let mut offset = 0isize;
    v.shape.clear();
    v.strides.clear();
    for (s, &st) in sel.iter().zip(&x.strides) {
        offset += s.start as isize * st;
        if s.keep {
            v.shape.push(s.len);
            v.strides.push(st * s.step);
        }
    }
    if !empty {
        // Every start is inside its dimension (resolved), so the first
        // selected element lies inside `x`; an empty view keeps `x`'s
        // pointer and is never read.
        v.ptr = x.ptr.wrapping_offset(offset * x.dtype.size_of() as isize);
    }
    v
}

impl Exec<'_> {
    /// The values of the 0-d bound slots, in order.
    fn bound_values(&self, bounds: &[Slot]) -> Vec<i64> {
        bounds
            .iter()
            .map(|&s| self.get(s).to_i64_vec().first().copied().unwrap_or(0))
            .collect()
    }

    /// Runs a `Subtensor` step: a view of the input.
    pub(super) fn subtensor(&mut self, name: &str, step: &SubtensorStep) -> Result<()> {
        let SubtensorStep {
            input,
            bounds,
            output,
            idx,
            out_shape,
        } = step;
        let x = self.get(*input);
        let sel = subtensor::resolve(idx, &x.shape, &self.bound_values(bounds))
            .map_err(|m| err(name, m))?;
        let v = view(&x, &sel);
        check_static_shape(name, out_shape, &v.shape)?;
        self.slots[*output] = Some(v);
        Ok(())
    }

    /// Runs an `IncSubtensor` step.
    pub(super) fn inc_subtensor(&mut self, name: &str, step: &IncSubtensorStep) -> Result<()> {
        let IncSubtensorStep {
            kernel,
            x,
            y,
            bounds,
            output,
            idx,
            set,
            inplace,
            y_bcast,
            dtypes,
            descs,
        } = step;
        let (xa, ya) = (self.get(*x), self.get(*y));
        let sel = subtensor::resolve(idx, &xa.shape, &self.bound_values(bounds))
            .map_err(|m| err(name, m))?;
        let shape = subtensor::selected_shape(&sel);
        // The values' read strides over the selection: right-aligned, 0 in
        // leading and statically broadcastable dimensions.
        let Some(off) = shape.len().checked_sub(ya.shape.len()) else {
            return Err(err(
                name,
                format!(
                    "{} has {} dimensions, more than the selection's {}",
                    descs.1,
                    ya.shape.len(),
                    shape.len()
                ),
            ));
        };
        let mut y_strides: SmallVec<[isize; 4]> = SmallVec::from_elem(0, shape.len());
        for (k, (&n, &s)) in ya.shape.iter().zip(&ya.strides).enumerate() {
            let want = shape[off + k];
            if y_bcast[k] {
                if n != 1 {
                    return Err(err(
                        name,
                        format!(
                            "{} is broadcastable in dimension {k} but has size {n}",
                            descs.1
                        ),
                    ));
                }
            } else if n != want {
                return Err(err(
                    name,
                    format!(
                        "{} of shape {:?} does not fit the selection of shape {shape:?}",
                        descs.1,
                        ya.shape.as_slice()
                    ),
                ));
            } else {
                y_strides[off + k] = s;
            }
        }
        let out = if *inplace {
            if is_broadcast_view(&xa) {
                return Err(err(
                    name,
                    format!("cannot overwrite {}: it is a broadcast view", descs.0),
                ));
            }
            xa.clone()
        } else {
            let o = self.alloc_slot(name, *output, dtypes.0, &xa.shape)?;
            copy_into(self.par, &xa, &o);
            o
        };
        let dst = view(&out, &sel);
        let (es_x, es_y) = (dtypes.0.size_of(), dtypes.1.size_of());
        let f = jit_fn(self.code, *kernel);
        if *set {
            drive(
                f,
                &[ya.ptr, dst.ptr],
                &[&y_strides, &dst.strides],
                &[es_y, es_x],
                &shape,
                self.par,
                None,
            );
        } else {
            drive(
                f,
                &[dst.ptr, ya.ptr, dst.ptr],
                &[&dst.strides, &y_strides, &dst.strides],
                &[es_x, es_y, es_x],
                &shape,
                self.par,
                None,
            );
        }
        self.slots[*output] = Some(out);
        Ok(())
    }
}
