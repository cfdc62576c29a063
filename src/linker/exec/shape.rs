//! Execution of the shape family: views (`DimShuffle`, `Reshape`, which
//! copies a non-contiguous input first), `Alloc`'s broadcast fill with the
//! strided-copy kernel, and the shape metadata (`Shape`, `ShapeI`).
//!
//! Invariants: a view shares its input's buffer (the plan keeps the root
//! alive); a shape computed from run-time values (`Reshape`'s vector,
//! `Alloc`'s dims) is checked in full before any kernel sees it: its
//! length against the declared ndim, negative or overflowing sizes, the
//! element count (`Reshape`) or the value's broadcast (`Alloc`), and every
//! static size of the output's type.

use smallvec::SmallVec;

use super::broadcast::check_static_shape;
use super::copy;
use super::drive::drive;
use super::state::{err, Exec};
use crate::error::Result;
use crate::eval;
use crate::graph::{DType, Value};
use crate::linker::buffer::{c_strides, Arr, Buffer};
use crate::linker::plan::step::{AllocStep, DimShuffleStep, ReshapeStep, ShapeIStep, ShapeStep};

impl Exec<'_> {
    /// Runs a `DimShuffle` step: a view with permuted, dropped (size 1) or new dimensions.
    pub(super) fn dimshuffle(&mut self, name: &str, step: &DimShuffleStep) -> Result<()> {
        let DimShuffleStep {
            input,
            output,
            new_order,
        } = step;
        let x = self.get(*input);
        let kept: Vec<usize> = new_order.iter().flatten().copied().collect();
        for d in 0..x.shape.len() {
            if !kept.contains(&d) && x.shape[d] != 1 {
                return Err(err(
                    name,
                    format!("dropped dimension {d} has size {}", x.shape[d]),
                ));
            }
        }
        let mut v = x.clone();
        v.shape = new_order
            .iter()
            .map(|d| d.map_or(1, |d| x.shape[d]))
            .collect();
        v.strides = new_order
            .iter()
            .map(|d| d.map_or(0, |d| x.strides[d]))
            .collect();
        self.slots[*output] = Some(v);
        Ok(())
    }

    /// Runs a `Reshape` step.
    pub(super) fn reshape(&mut self, name: &str, step: &ReshapeStep) -> Result<()> {
        let ReshapeStep {
            input,
            shape,
            output,
            out_shape,
        } = step;
        let x = self.get(*input);
        let target = self.get(*shape).to_i64_vec();
        let sh =
            eval::reshape_target(&target, out_shape.len(), &x.shape).map_err(|m| err(name, m))?;
        check_static_shape(name, out_shape, &sh)?;
        let mut v = self.standard(name, x)?;
        v.strides = c_strides(&sh);
        v.shape = sh.into();
        self.slots[*output] = Some(v);
        Ok(())
    }

    /// Runs an `Alloc` step.
    pub(super) fn alloc_step(&mut self, name: &str, step: &AllocStep) -> Result<()> {
        let AllocStep {
            value,
            dims,
            output,
            out_shape,
        } = step;
        let v = self.get(*value);
        let mut shape = Vec::with_capacity(dims.len());
        for (k, &d) in dims.iter().enumerate() {
            let a = self.get(d);
            let s = a.to_i64_vec().first().copied().unwrap_or(0);
            if s < 0 {
                return Err(err(name, format!("negative size {s} for dimension {k}")));
            }
            shape.push(s as usize);
        }
        let total = shape.iter().try_fold(1usize, |a, &s| a.checked_mul(s));
        if total.is_none_or(|t| {
            t.checked_mul(v.dtype.size_of())
                .is_none_or(|b| b > isize::MAX as usize)
        }) {
            return Err(err(
                name,
                format!("shape {shape:?} is too large to allocate"),
            ));
        }
        check_static_shape(name, out_shape, &shape)?;
        let Some(off) = shape.len().checked_sub(v.shape.len()) else {
            return Err(err(
                name,
                format!(
                    "value of shape {:?} has more dimensions than {shape:?}",
                    v.shape.as_slice()
                ),
            ));
        };
        let mut st: SmallVec<[isize; 4]> = SmallVec::from_elem(0, shape.len());
        for (i, (&n, &s)) in v.shape.iter().zip(&v.strides).enumerate() {
            if n == 1 {
                continue;
            }
            if n != shape[off + i] {
                return Err(err(
                    name,
                    format!(
                        "value of shape {:?} cannot broadcast to {shape:?}",
                        v.shape.as_slice()
                    ),
                ));
            }
            st[off + i] = s;
        }
        let out = self.alloc_slot(name, *output, v.dtype, &shape)?;
        let es = v.dtype.size_of();
        drive(
            copy::kernel(v.dtype),
            &[v.ptr, out.ptr],
            &[&st, &out.strides],
            &[es, es],
            &shape,
            self.par,
            None,
        );
        self.slots[*output] = Some(out);
        Ok(())
    }

    /// Runs a `Shape` step.
    pub(super) fn shape(&mut self, step: &ShapeStep) -> Result<()> {
        let ShapeStep { input, output } = step;
        let x = self.get(*input);
        let v: Vec<i64> = x.shape.iter().map(|&d| d as i64).collect();
        let val = Value::I64(
            ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[v.len()]), v).expect("1-d"),
        );
        self.slots[*output] = Some(Arr::from_buffer(Buffer::from_value(val), &[x.shape.len()]));
        Ok(())
    }

    /// Runs a `ShapeI` step.
    pub(super) fn shape_i(&mut self, name: &str, step: &ShapeIStep) -> Result<()> {
        let ShapeIStep {
            inputs,
            bcast,
            dim,
            output,
        } = step;
        if inputs.len() > 1 {
            let ins: Vec<Arr> = inputs.iter().map(|&i| self.get(i)).collect();
            let descs: Vec<String> = (0..ins.len()).map(|k| format!("input {k}")).collect();
            let shape = super::broadcast::broadcast_shape(name, &ins, bcast, &descs)?;
            let val = Value::scalar_i64(DType::I64, shape[*dim] as i64);
            self.slots[*output] = Some(Arr::from_buffer(Buffer::from_value(val), &[]));
            return Ok(());
        }
        let x = self.get(inputs[0]);
        let Some(&n) = x.shape.get(*dim) else {
            return Err(err(
                name,
                format!(
                    "dimension {dim} out of range for shape {:?}",
                    x.shape.as_slice()
                ),
            ));
        };
        let val = Value::scalar_i64(DType::I64, n as i64);
        self.slots[*output] = Some(Arr::from_buffer(Buffer::from_value(val), &[]));
        Ok(())
    }
}
