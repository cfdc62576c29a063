//! The state of one call: the slot table, the buffers the call owns and
//! returns to the pool, the caller's output arrays (`call_into`), and the
//! per-step times and peak bytes of a profiled call.
//!
//! Invariants: all mutable state is local to the call ([`Exec`]), so a
//! Function can run on many threads at once; constants are only read, and
//! so are caller inputs, except a mutable input the plan destroys, which the
//! caller lent mutably (or the call copied); a buffer is released after the
//! last use of its group (see `plan::memory::liveness`); a result never
//! aliases an input.
//!
//! Output destinations (`call_into`): the caller's output arrays, given with
//! [`Exec::with_destinations`], are written only by the step that allocates
//! an output's root slot (`Plan::output_dests`), when the array has that
//! allocation's dtype and shape, and standard layout unless the step is
//! element-wise (whose kernels write any layout); they are never pooled or
//! counted in the peak bytes (their `Arr::buf` is `None`).
//!
//! Layouts: intermediate and result buffers are dense; they are row-major,
//! except that an element-wise step's fresh outputs follow the memory order
//! of its first input spanning the whole shape (numpy's `order='K'`), so
//! every step reads its inputs through their strides.

use std::sync::Arc;
use std::time::Duration;

use super::drive::{drive, jit_fn, ParallelOptions};
use crate::error::{Error, Result};
use crate::graph::{DType, Value};
use crate::linker::buffer::{Arr, Buffer, BufferPool};
use crate::linker::codegen::jit::JitCode;
use crate::linker::plan::{Plan, Slot};

/// What a profiled call measured.
#[derive(Debug, Clone, Default)]
pub struct CallStats {
    /// Run time of each step.
    pub times: Vec<Duration>,
    /// Peak bytes of the buffers the call owned.
    pub peak_bytes: usize,
}

/// One call's state.
pub struct Exec<'a> {
    pub(super) plan: &'a Plan,
    pub(super) code: &'a JitCode,
    pub(super) par: ParallelOptions,
    pub(super) pool: &'a BufferPool,
    pub(super) slots: Vec<Option<Arr>>,
    /// Per-step run times, when profiling.
    pub times: Option<Vec<Duration>>,
    /// Peak bytes of the buffers this call allocated, when profiling.
    pub(super) peak_bytes: usize,
    /// Caller arrays that the allocation of a slot may use instead of a
    /// buffer (each at most once).
    pub(super) dests: Vec<(Slot, Arr)>,
}

// SAFETY: raw pointers in `Arr` refer to caller inputs, constants owned by
// the plan, or buffers owned through `Arc`s in the same table; the table is
// only used by the thread running the call (worker threads of `drive`
// receive plain addresses for disjoint chunks).
unsafe impl Send for Exec<'_> {}

/// An error of the node `name` during a call.
pub(super) fn err(name: &str, msg: String) -> Error {
    Error::eval(name, msg)
}

impl<'a> Exec<'a> {
    /// A call of `plan` on validated input arrays.
    pub fn new(
        plan: &'a Plan,
        code: &'a JitCode,
        par: ParallelOptions,
        pool: &'a BufferPool,
        inputs: Vec<Arr>,
        profile: bool,
    ) -> Self {
        let mut slots: Vec<Option<Arr>> = vec![None; plan.n_slots];
        for (k, a) in inputs.into_iter().enumerate() {
            slots[k] = Some(a);
        }
        for (s, v) in &plan.consts {
            slots[*s] = Some(value_arr(v));
        }
        Exec {
            plan,
            code,
            par,
            pool,
            slots,
            times: profile.then(Vec::new),
            peak_bytes: 0,
            dests: Vec::new(),
        }
    }

    /// Lets the allocation of each listed slot use the paired caller array
    /// (not owned by the call, `buf: None`) when its dtype and shape match
    /// and its layout suits the step (see the module header); the first
    /// fitting pair of a slot wins.
    /// Every array must be writable, overlap no input and no other listed
    /// array, and stay valid for the call.
    pub fn with_destinations(mut self, dests: Vec<(Slot, Arr)>) -> Self {
        self.dests = dests;
        self
    }

    /// A destination for slot `s`'s whole buffer (see [`Exec::alloc`]): the
    /// caller's array registered for it when it fits, else an allocation.
    pub(super) fn alloc_slot(
        &mut self,
        name: &str,
        s: Slot,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Arr> {
        match self.take_dest(s, dtype, shape, false) {
            Some(a) => Ok(a),
            None => self.alloc(name, dtype, shape),
        }
    }

    /// The caller's array registered for slot `s` when it has this dtype
    /// and shape, and standard layout unless `any_layout`.
    fn take_dest(
        &mut self,
        s: Slot,
        dtype: DType,
        shape: &[usize],
        any_layout: bool,
    ) -> Option<Arr> {
        let fits = |(slot, a): &(Slot, Arr)| {
            *slot == s
                && a.dtype == dtype
                && a.shape.as_slice() == shape
                && (any_layout || a.is_standard())
        };
        let i = self.dests.iter().position(fits)?;
        Some(self.dests.swap_remove(i).1)
    }

    /// [`Exec::alloc_slot`] for an element-wise output, whose kernel writes
    /// any layout: a caller's array registered for the slot is used in
    /// whatever layout it has, and a fresh allocation lies in memory in the
    /// axis order `perm` (outermost first; `None`: row-major), so that the
    /// result follows the layout of its inputs as numpy's `order='K'` does.
    pub(super) fn alloc_slot_in_order(
        &mut self,
        name: &str,
        s: Slot,
        dtype: DType,
        shape: &[usize],
        perm: Option<&[usize]>,
    ) -> Result<Arr> {
        if let Some(a) = self.take_dest(s, dtype, shape, true) {
            return Ok(a);
        }
        let mut a = self.alloc(name, dtype, shape)?;
        if let Some(perm) = perm {
            a.strides = crate::linker::buffer::permuted_strides(shape, perm);
        }
        Ok(a)
    }

    /// Bytes of the distinct buffers the call owns right now (intermediates,
    /// results, copies of mutable inputs; caller arrays and constants are not
    /// counted). A buffer shared by views and inplace outputs counts once.
    pub(super) fn live_bytes(&self) -> usize {
        let mut seen: rustc_hash::FxHashSet<*const Buffer> = Default::default();
        self.slots
            .iter()
            .flatten()
            .filter_map(|a| a.buf.as_ref())
            .filter(|b| seen.insert(Arc::as_ptr(b)))
            .map(|b| b.len() * b.dtype().size_of())
            .sum()
    }

    pub(super) fn get(&self, s: Slot) -> Arr {
        self.slots[s].clone().expect("slot computed before use")
    }

    /// Empties slot `s`, returning its buffer to the pool when this was the
    /// last reference to it.
    pub(super) fn release(&mut self, s: Slot) {
        if let Some(a) = self.slots[s].take() {
            if let Some(b) = a.buf {
                if let Ok(b) = Arc::try_unwrap(b) {
                    self.pool.give(b);
                }
            }
        }
    }

    /// A buffer for `shape` whose contents the caller overwrites entirely:
    /// from the pool when one fits, else a fresh one with unspecified
    /// contents ([`Buffer::uninit`]; an error of node `name` when it cannot
    /// be allocated). Every caller writes each element before the array is
    /// read or returned.
    pub(super) fn alloc(&self, name: &str, dtype: DType, shape: &[usize]) -> Result<Arr> {
        Ok(Arr::from_buffer(
            self.pool.take_or_uninit(name, dtype, shape)?,
            shape,
        ))
    }

    /// `x` converted to `to` by the cast `kernel` into a fresh array.
    pub(super) fn cast(&self, name: &str, x: &Arr, kernel: usize, to: DType) -> Result<Arr> {
        let out = self.alloc(name, to, &x.shape)?;
        drive(
            jit_fn(self.code, kernel),
            &[x.ptr, out.ptr],
            &[&x.strides, &out.strides],
            &[x.dtype.size_of(), to.size_of()],
            &x.shape,
            self.par,
            None,
        );
        Ok(out)
    }
}

/// A read-only array over a value owned elsewhere (constants).
pub fn value_arr(v: &Value) -> Arr {
    crate::with_value!(v, a => Arr {
        ptr: a.as_ptr() as *mut u8,
        shape: a.shape().into(),
        strides: a.strides().into(),
        dtype: v.dtype(),
        buf: None,
    })
}
