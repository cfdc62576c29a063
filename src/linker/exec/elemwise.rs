//! Execution of the element-wise family: the broadcast shape of the
//! operands, the outputs (fresh, the caller's array registered for the
//! slot, or the destroyed input's buffer for an inplace output) and one
//! kernel run over the whole iteration space, or over a range of its
//! outermost dimension (the blocks of a GEMM epilogue, `exec::epilogue`).
//!
//! Invariants: an inplace output overwrites its destroyed input only when
//! that input has the output's dtype and shape and is not a broadcast view;
//! every other output is a fresh buffer of the broadcast shape (or a
//! caller's array of exactly that dtype, shape and standard layout).

use smallvec::SmallVec;

use super::broadcast::{broadcast_shape, broadcast_strides, is_broadcast_view};
use super::drive::{drive_elemwise, jit_fn, KernelFn, ParallelOptions};
use super::state::{err, Exec};
use crate::error::Result;
use crate::linker::buffer::Arr;
use crate::linker::plan::step::ElemwiseStep;

/// Where an element-wise kernel's operands lie: the iteration shape and,
/// per operand (inputs first, then outputs), its address, its element
/// strides over that shape (0 along broadcast dimensions) and its element
/// size. Addresses are plain integers so that threads may share it.
pub(super) struct Layout {
    /// The iteration (broadcast) shape.
    pub shape: Vec<usize>,
    addrs: SmallVec<[usize; 6]>,
    strides: SmallVec<[SmallVec<[isize; 4]>; 6]>,
    esz: SmallVec<[usize; 6]>,
    n_inputs: usize,
}

impl Layout {
    /// Runs kernel `f` over rows `r0..r1` of the outermost dimension
    /// (the whole iteration space when the shape is 0-d).
    ///
    /// # Safety
    /// The operands' arrays are alive and cover the shape with their
    /// strides (as [`Exec::elemwise_operands`] made them); no other thread
    /// writes the outputs' rows `r0..r1` meanwhile.
    pub(super) unsafe fn drive_rows(
        &self,
        f: KernelFn,
        par: ParallelOptions,
        r0: usize,
        r1: usize,
    ) {
        let mut shape = self.shape.clone();
        let ptrs: SmallVec<[*mut u8; 6]> = if let Some(rows) = shape.first_mut() {
            *rows = r1 - r0;
            let offset = |k: usize| r0 as isize * self.strides[k][0] * self.esz[k] as isize;
            (0..self.addrs.len())
                .map(|k| (self.addrs[k] as isize + offset(k)) as *mut u8)
                .collect()
        } else {
            self.addrs.iter().map(|&a| a as *mut u8).collect()
        };
        let strides: SmallVec<[&[isize]; 6]> = self.strides.iter().map(|s| s.as_slice()).collect();
        drive_elemwise(f, &ptrs, &strides, &self.esz, &shape, par, self.n_inputs);
    }
}

/// An element-wise step's operands: their layout and the output arrays.
pub(super) struct Operands {
    /// Where the operands lie.
    pub layout: Layout,
    /// The output arrays, in the step's output order.
    pub outs: SmallVec<[Arr; 2]>,
}

impl Exec<'_> {
    /// Runs an element-wise step.
    pub(super) fn elemwise(&mut self, name: &str, step: &ElemwiseStep) -> Result<()> {
        let ops = self.elemwise_operands(name, step)?;
        let rows = ops.layout.shape.first().copied().unwrap_or(1);
        // SAFETY: the operands were just laid out from live slots, and this
        // one launch is the only writer of the outputs.
        unsafe {
            ops.layout
                .drive_rows(jit_fn(self.code, step.kernel), self.par, 0, rows)
        };
        self.store_outputs(step, ops.outs);
        Ok(())
    }

    /// Places an element-wise step's output arrays in their slots.
    pub(super) fn store_outputs(&mut self, step: &ElemwiseStep, outs: SmallVec<[Arr; 2]>) {
        for ((s, _), a) in step.outputs.iter().zip(outs) {
            self.slots[*s] = Some(a);
        }
    }

    /// The operands of an element-wise step: the broadcast shape of its
    /// inputs (checked against their static broadcast patterns) and its
    /// output arrays, allocated or, for an inplace output, the destroyed
    /// input's.
    pub(super) fn elemwise_operands(
        &mut self,
        name: &str,
        step: &ElemwiseStep,
    ) -> Result<Operands> {
        let ElemwiseStep {
            inputs,
            bcast,
            outputs,
            destroy_map,
            descs,
            ..
        } = step;
        let ins: SmallVec<[Arr; 4]> = inputs.iter().map(|&s| self.get(s)).collect();
        let shape = broadcast_shape(name, &ins, bcast, descs)?;
        // Outputs: an inplace output overwrites the input its node
        // destroys (same dtype and shape, by the graph's types); every
        // other output gets a fresh buffer (or the caller's array
        // registered for its slot, see `alloc_slot`).
        // Fresh outputs follow the memory order of the first input that
        // spans the whole iteration shape (numpy's order='K'): a transposed
        // or Fortran-ordered input then gives a result of the same layout,
        // and the driver runs both contiguously.
        let order = ins
            .iter()
            .find(|a| a.shape.as_slice() == shape.as_slice())
            .and_then(Arr::memory_order);
        let mut outs: SmallVec<[Arr; 2]> = SmallVec::with_capacity(outputs.len());
        for (o, &(slot, dt)) in outputs.iter().enumerate() {
            match destroy_map.iter().find(|&&(d, _)| d == o) {
                Some(&(_, i)) => {
                    let a = &ins[i];
                    if a.dtype != dt || a.shape.as_slice() != shape.as_slice() {
                        return Err(err(
                            name,
                            format!(
                                "cannot overwrite {} ({}{:?}) with an output of {dt}{shape:?}",
                                descs[i],
                                a.dtype,
                                a.shape.as_slice()
                            ),
                        ));
                    }
                    if is_broadcast_view(a) {
                        return Err(err(
                            name,
                            format!("cannot overwrite {}: it is a broadcast view", descs[i]),
                        ));
                    }
                    outs.push(a.clone());
                }
                None => {
                    outs.push(self.alloc_slot_in_order(name, slot, dt, &shape, order.as_deref())?)
                }
            }
        }
        let mut addrs: SmallVec<[usize; 6]> = ins.iter().map(|a| a.ptr as usize).collect();
        addrs.extend(outs.iter().map(|a| a.ptr as usize));
        let mut strides: SmallVec<[SmallVec<[isize; 4]>; 6]> =
            ins.iter().map(broadcast_strides).collect();
        strides.extend(outs.iter().map(|a| a.strides.clone()));
        let mut esz: SmallVec<[usize; 6]> = ins.iter().map(|a| a.dtype.size_of()).collect();
        esz.extend(outputs.iter().map(|o| o.1.size_of()));
        let layout = Layout {
            shape,
            addrs,
            strides,
            esz,
            n_inputs: inputs.len(),
        };
        Ok(Operands { layout, outs })
    }
}
