//! Execution of the element-wise family: the broadcast shape of the
//! operands, the outputs (fresh, the caller's array registered for the
//! slot, or the destroyed input's buffer for an inplace output) and one
//! kernel run over the whole iteration space.
//!
//! Invariants: an inplace output overwrites its destroyed input only when
//! that input has the output's dtype and shape and is not a broadcast view;
//! every other output is a fresh buffer of the broadcast shape (or a
//! caller's array of exactly that dtype, shape and standard layout).

use smallvec::SmallVec;

use super::broadcast::{broadcast_shape, broadcast_strides, is_broadcast_view};
use super::drive::{drive_elemwise, jit_fn};
use super::state::{err, Exec};
use crate::error::Result;
use crate::linker::buffer::Arr;
use crate::linker::plan::step::ElemwiseStep;

impl Exec<'_> {
    /// Runs an element-wise step.
    pub(super) fn elemwise(&mut self, name: &str, step: &ElemwiseStep) -> Result<()> {
        let ElemwiseStep {
            kernel,
            inputs,
            bcast,
            outputs,
            destroy_map,
            descs,
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
        let mut ptrs: SmallVec<[*mut u8; 6]> = ins.iter().map(|a| a.ptr).collect();
        ptrs.extend(outs.iter().map(|a| a.ptr));
        let in_strides: SmallVec<[SmallVec<[isize; 4]>; 4]> =
            ins.iter().map(broadcast_strides).collect();
        let mut strides: SmallVec<[&[isize]; 6]> =
            in_strides.iter().map(|s| s.as_slice()).collect();
        strides.extend(outs.iter().map(|a| a.strides.as_slice()));
        let mut esz: SmallVec<[usize; 6]> = ins.iter().map(|a| a.dtype.size_of()).collect();
        esz.extend(outputs.iter().map(|o| o.1.size_of()));
        drop(ins);
        drive_elemwise(
            jit_fn(self.code, *kernel),
            &ptrs,
            &strides,
            &esz,
            &shape,
            self.par,
            inputs.len(),
        );
        drop(strides);
        for ((s, _), a) in outputs.iter().zip(outs) {
            self.slots[*s] = Some(a);
        }
        Ok(())
    }
}
