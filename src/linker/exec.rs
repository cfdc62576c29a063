//! Execution of a plan for one call: per-call slot table, kernel drivers
//! (dimension collapsing, the outer-dimension loop, parallel splitting),
//! views, reductions, GEMM (`Dot`, and `Gemm` onto a copy of z or z
//! itself), and result extraction.
//!
//! Invariants: all mutable state is local to the call ([`Exec`]), so a
//! Function can run on many threads at once; constants are only read, and
//! so are caller inputs, except a mutable input the plan destroys, which the
//! caller lent mutably (or the call copied); an element-wise or Gemm step
//! writes an output into an input's buffer exactly when the node's
//! `destroy_map` says so, and allocates every other output; a buffer is released after
//! the last use of its group (see `plan::liveness`); a result never aliases
//! an input.
//!
//! Output destinations (`call_into`): the caller's output arrays, given with
//! [`Exec::with_destinations`], are written only by the step that allocates
//! an output's root slot (`Plan::output_dests`), when the array has that
//! allocation's dtype and shape and standard layout; they are never pooled
//! or counted in the peak bytes (their `Arr::buf` is `None`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use smallvec::SmallVec;

use super::buffer::{c_strides, Arr, Buffer, BufferPool};
use super::copy;
use super::jit::JitCode;
use super::plan::{Plan, Slot, Step};
use super::reduce;
use crate::error::{Error, Result};
use crate::graph::{DType, TensorType, Value};
use crate::ops::ReduceOp;

/// Elements per partial of a parallel full reduction.
pub const REDUCE_CHUNK: usize = 1 << 16;

/// The ABI of every generated kernel.
pub type KernelFn = unsafe extern "C" fn(*const *mut u8, *const isize, usize);

/// Parallel execution settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ParallelOptions {
    /// Element count from which a kernel is split over threads (0: never).
    pub threshold: usize,
    /// Minimum elements per chunk.
    pub grain: usize,
}

impl Default for ParallelOptions {
    fn default() -> Self {
        ParallelOptions {
            threshold: 1 << 17,
            grain: 1 << 15,
        }
    }
}

/// Kernel `kernel` of `code` as a callable function.
fn jit_fn(code: &JitCode, kernel: usize) -> KernelFn {
    // SAFETY: every kernel of a JitCode is generated with the `KernelFn` ABI.
    unsafe { std::mem::transmute::<*const u8, KernelFn>(code.ptr(kernel)) }
}

/// Runs kernel `f` over `shape` for operands with the given pointers and
/// element strides (`esz` bytes per element of each operand). With
/// `acc0`, operand 0 is a reduction accumulator and the kernel handles
/// those accumulator modes: work is only split where chunks write disjoint
/// accumulator elements, and the innermost dimension (size-1 dimensions
/// dropped) picks the mode, row when its accumulator stride is 0, column
/// otherwise; a mode the kernel lacks is replaced by a unit innermost
/// dimension of the other mode (one element per call).
#[allow(clippy::too_many_arguments)] // the operand description is four parallel slices
fn drive(
    f: KernelFn,
    ptrs: &[*mut u8],
    strides: &[&[isize]],
    esz: &[usize],
    shape: &[usize],
    par: ParallelOptions,
    acc0: Option<reduce::Modes>,
) {
    if shape.contains(&0) {
        return;
    }
    let nops = ptrs.len();
    // Drop size-1 dimensions, convert strides to bytes, collapse.
    let mut dims: Vec<(usize, SmallVec<[isize; 6]>)> = Vec::new();
    for d in 0..shape.len() {
        if shape[d] == 1 {
            continue;
        }
        let st: SmallVec<[isize; 6]> = (0..nops).map(|k| strides[k][d] * esz[k] as isize).collect();
        if let Some((n, last)) = dims.last_mut() {
            // Merge into the previous (outer) dimension when it steps exactly over this one.
            if last
                .iter()
                .zip(&st)
                .all(|(&o, &i)| o == i * shape[d] as isize)
            {
                *n *= shape[d];
                *last = st;
                continue;
            }
        }
        dims.push((shape[d], st));
    }
    if let Some(modes) = acc0 {
        let row = dims.last().is_none_or(|(_, st)| st[0] == 0);
        if (row && !modes.row()) || (!row && !modes.column()) {
            let mut st: SmallVec<[isize; 6]> = SmallVec::from_elem(0, nops);
            if row {
                st[0] = esz[0] as isize;
            }
            dims.push((1, st));
        }
    }
    if dims.is_empty() {
        dims.push((1, SmallVec::from_elem(0, nops)));
    }
    let (inner_n, inner_st) = dims.pop().expect("one dimension");
    let outer: Vec<(usize, SmallVec<[isize; 6]>)> = dims;
    let rows: usize = outer.iter().map(|d| d.0).product();
    let total = rows * inner_n;
    let base: Vec<usize> = ptrs.iter().map(|&p| p as usize).collect();
    let run_rows = |r0: usize, r1: usize, i0: usize, i1: usize| {
        let mut p: SmallVec<[*mut u8; 6]> = SmallVec::from_elem(std::ptr::null_mut(), nops);
        for r in r0..r1 {
            let mut rem = r;
            let mut off: SmallVec<[isize; 6]> = SmallVec::from_elem(0, nops);
            for (n, st) in outer.iter().rev() {
                let i = rem % n;
                rem /= n;
                for k in 0..nops {
                    off[k] += i as isize * st[k];
                }
            }
            for k in 0..nops {
                p[k] = (base[k] as isize + off[k] + i0 as isize * inner_st[k]) as *mut u8;
            }
            // SAFETY: every operand covers `shape` with these strides (checked by
            // the caller), so elements i0..i1 of this row are in bounds; chunks
            // handed to other threads write disjoint output elements.
            unsafe { f(p.as_ptr(), inner_st.as_ptr(), i1 - i0) };
        }
    };
    let threads = kiln_runtime::parallel::num_threads();
    let parallel = par.threshold > 0 && total >= par.threshold && threads > 1;
    let inner_split_ok = acc0.is_none() || inner_st[0] != 0;
    let outer_split_ok = acc0.is_none() || outer.iter().all(|(_, st)| st[0] != 0);
    if parallel && rows == 1 && inner_split_ok {
        kiln_runtime::parallel::parallel_for(inner_n, par.grain, &|s, e| run_rows(0, 1, s, e));
    } else if parallel && rows > 1 && outer_split_ok {
        let grain_rows = par.grain.div_ceil(inner_n).max(1);
        kiln_runtime::parallel::parallel_for(rows, grain_rows, &|s, e| run_rows(s, e, 0, inner_n));
    } else if parallel && rows > 1 && inner_split_ok {
        // Reduction into the inner dimension (e.g. over the rows of a matrix):
        // every chunk of columns runs all rows into its own accumulators.
        let grain_cols = par.grain.div_ceil(rows).max(16);
        kiln_runtime::parallel::parallel_for(inner_n, grain_cols, &|s, e| run_rows(0, rows, s, e));
    } else {
        run_rows(0, rows, 0, inner_n);
    }
}

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
    plan: &'a Plan,
    code: &'a JitCode,
    par: ParallelOptions,
    pool: &'a BufferPool,
    slots: Vec<Option<Arr>>,
    /// Per-step run times, when profiling.
    pub times: Option<Vec<Duration>>,
    /// Peak bytes of the buffers this call allocated, when profiling.
    peak_bytes: usize,
    /// Caller arrays that the allocation of a slot may use instead of a
    /// buffer (each at most once).
    dests: Vec<(Slot, Arr)>,
}

// SAFETY: raw pointers in `Arr` refer to caller inputs, constants owned by
// the plan, or buffers owned through `Arc`s in the same table; the table is
// only used by the thread running the call (worker threads of `drive`
// receive plain addresses for disjoint chunks).
unsafe impl Send for Exec<'_> {}

fn err(name: &str, msg: String) -> Error {
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
    /// and it is in standard layout; the first fitting pair of a slot wins.
    /// Every array must be writable, overlap no input and no other listed
    /// array, and stay valid for the call.
    pub fn with_destinations(mut self, dests: Vec<(Slot, Arr)>) -> Self {
        self.dests = dests;
        self
    }

    /// A destination for slot `s`'s whole buffer (see [`Exec::alloc`]): the
    /// caller's array registered for it when it fits, else an allocation.
    fn alloc_slot(&mut self, name: &str, s: Slot, dtype: DType, shape: &[usize]) -> Result<Arr> {
        let fits = |(slot, a): &(Slot, Arr)| {
            *slot == s && a.dtype == dtype && a.shape.as_slice() == shape && a.is_standard()
        };
        match self.dests.iter().position(fits) {
            Some(i) => Ok(self.dests.swap_remove(i).1),
            None => self.alloc(name, dtype, shape),
        }
    }

    /// Bytes of the distinct buffers the call owns right now (intermediates,
    /// results, copies of mutable inputs; caller arrays and constants are not
    /// counted). A buffer shared by views and inplace outputs counts once.
    fn live_bytes(&self) -> usize {
        let mut seen: rustc_hash::FxHashSet<*const Buffer> = Default::default();
        self.slots
            .iter()
            .flatten()
            .filter_map(|a| a.buf.as_ref())
            .filter(|b| seen.insert(Arc::as_ptr(b)))
            .map(|b| b.len() * b.dtype().size_of())
            .sum()
    }

    fn get(&self, s: Slot) -> Arr {
        self.slots[s].clone().expect("slot computed before use")
    }

    /// Runs every step and returns the output arrays, and when profiling the
    /// per-step times and the peak bytes of call-owned buffers (sampled after
    /// each step, before its dead inputs are released, so a step's inputs
    /// and outputs count together; scratch a step frees within itself is not seen).
    pub fn run(mut self) -> Result<(Vec<Arr>, Option<CallStats>)> {
        let plan = self.plan;
        for (k, (step, name, _)) in plan.steps.iter().enumerate() {
            let t = self.times.is_some().then(Instant::now);
            self.step(step, name)?;
            if self.times.is_some() {
                self.peak_bytes = self.peak_bytes.max(self.live_bytes());
            }
            for &s in &plan.release[k] {
                self.release(s);
            }
            if let (Some(t), Some(times)) = (t, self.times.as_mut()) {
                times.push(t.elapsed());
            }
        }
        let outs: Vec<Arr> = plan.outputs.iter().map(|&s| self.get(s)).collect();
        for &s in &plan.outputs {
            self.slots[s] = None;
        }
        // Intermediates still held (e.g. never released) go back to the pool
        // unless an output shares them (then they are not uniquely owned).
        for s in 0..self.slots.len() {
            self.release(s);
        }
        let peak_bytes = self.peak_bytes;
        let times = self
            .times
            .take()
            .map(|times| CallStats { times, peak_bytes });
        Ok((outs, times))
    }

    /// Empties slot `s`, returning its buffer to the pool when this was the
    /// last reference to it.
    fn release(&mut self, s: Slot) {
        if let Some(a) = self.slots[s].take() {
            if let Some(b) = a.buf {
                if let Ok(b) = Arc::try_unwrap(b) {
                    self.pool.give(b);
                }
            }
        }
    }

    /// A buffer for `shape` whose contents the caller overwrites entirely:
    /// from the pool when one fits, else fresh (an error of node `name` when
    /// it cannot be allocated).
    fn alloc(&self, name: &str, dtype: DType, shape: &[usize]) -> Result<Arr> {
        Ok(match self.pool.take(dtype, shape) {
            Some(b) => Arr::from_buffer(b, shape),
            None => Arr::from_buffer(Buffer::zeros(name, dtype, shape)?, shape),
        })
    }

    /// A zero-filled buffer for `shape` (pooled buffers are cleared).
    fn alloc_zeroed(&self, name: &str, dtype: DType, shape: &[usize]) -> Result<Arr> {
        Ok(match self.pool.take(dtype, shape) {
            Some(mut b) => {
                b.zero();
                Arr::from_buffer(b, shape)
            }
            None => Arr::from_buffer(Buffer::zeros(name, dtype, shape)?, shape),
        })
    }

    fn cast(&self, name: &str, x: &Arr, kernel: usize, to: DType) -> Result<Arr> {
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

    fn step(&mut self, step: &Step, name: &str) -> Result<()> {
        match step {
            Step::Elemwise {
                kernel,
                inputs,
                bcast,
                outputs,
                destroy_map,
                descs,
            } => {
                let ins: Vec<Arr> = inputs.iter().map(|&s| self.get(s)).collect();
                let shape = broadcast_shape(name, &ins, bcast, descs)?;
                // Outputs: an inplace output overwrites the input its node
                // destroys (same dtype and shape, by the graph's types); every
                // other output gets a fresh buffer (or the caller's array
                // registered for its slot, see `alloc_slot`).
                let mut outs: Vec<Arr> = Vec::with_capacity(outputs.len());
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
                            outs.push(a.clone());
                        }
                        None => outs.push(self.alloc_slot(name, slot, dt, &shape)?),
                    }
                }
                let mut ptrs: Vec<*mut u8> = ins.iter().map(|a| a.ptr).collect();
                ptrs.extend(outs.iter().map(|a| a.ptr));
                let in_strides: Vec<SmallVec<[isize; 4]>> =
                    ins.iter().map(broadcast_strides).collect();
                let mut strides: Vec<&[isize]> = in_strides.iter().map(|s| s.as_slice()).collect();
                strides.extend(outs.iter().map(|a| a.strides.as_slice()));
                let mut esz: Vec<usize> = ins.iter().map(|a| a.dtype.size_of()).collect();
                esz.extend(outputs.iter().map(|o| o.1.size_of()));
                drop(ins);
                drive(
                    jit_fn(self.code, *kernel),
                    &ptrs,
                    &strides,
                    &esz,
                    &shape,
                    self.par,
                    None,
                );
                for ((s, _), a) in outputs.iter().zip(outs) {
                    self.slots[*s] = Some(a);
                }
            }
            Step::Reduce {
                kernel,
                modes,
                cast,
                op,
                axes,
                input,
                output,
                acc,
                out,
            } => {
                let x = self.get(*input);
                let (accum, acc_strides, bits) =
                    self.reduce_accumulator(name, *op, *acc, axes, &x.shape)?;
                let xs = broadcast_strides(&x);
                let n = x.len();
                if accum.shape.is_empty() && self.chunked(n) {
                    self.full_reduce_chunked(
                        *kernel,
                        (*op, *acc),
                        &[x.ptr],
                        &[&xs],
                        &[x.dtype.size_of()],
                        &x.shape,
                        &accum,
                        bits,
                    );
                } else {
                    drive(
                        jit_fn(self.code, *kernel),
                        &[accum.ptr, x.ptr],
                        &[&acc_strides, &xs],
                        &[8, x.dtype.size_of()],
                        &x.shape,
                        self.par,
                        Some(*modes),
                    );
                }
                let res = match cast {
                    Some(c) => self.cast(name, &accum, *c, *out)?,
                    None => accum,
                };
                self.slots[*output] = Some(res);
            }
            Step::FusedReduce {
                kernel,
                modes,
                cast,
                op,
                axes,
                inputs,
                bcast,
                descs,
                output,
                acc,
                out,
            } => {
                let ins: Vec<Arr> = inputs.iter().map(|&s| self.get(s)).collect();
                let shape = broadcast_shape(name, &ins, bcast, descs)?;
                let (accum, acc_strides, bits) =
                    self.reduce_accumulator(name, *op, *acc, axes, &shape)?;
                let in_strides: Vec<SmallVec<[isize; 4]>> =
                    ins.iter().map(broadcast_strides).collect();
                let esz: Vec<usize> = ins.iter().map(|a| a.dtype.size_of()).collect();
                let in_ptrs: Vec<*mut u8> = ins.iter().map(|a| a.ptr).collect();
                let strides: Vec<&[isize]> = in_strides.iter().map(|s| s.as_slice()).collect();
                let total: usize = shape.iter().product();
                if accum.shape.is_empty() && self.chunked(total) {
                    self.full_reduce_chunked(
                        *kernel,
                        (*op, *acc),
                        &in_ptrs,
                        &strides,
                        &esz,
                        &shape,
                        &accum,
                        bits,
                    );
                } else {
                    let mut ptrs = vec![accum.ptr];
                    ptrs.extend(&in_ptrs);
                    let mut all_strides: Vec<&[isize]> = vec![&acc_strides];
                    all_strides.extend(&strides);
                    let mut all_esz = vec![8];
                    all_esz.extend(&esz);
                    drive(
                        jit_fn(self.code, *kernel),
                        &ptrs,
                        &all_strides,
                        &all_esz,
                        &shape,
                        self.par,
                        Some(*modes),
                    );
                }
                drop(ins);
                let res = match cast {
                    Some(c) => self.cast(name, &accum, *c, *out)?,
                    None => accum,
                };
                self.slots[*output] = Some(res);
            }
            Step::DimShuffle {
                input,
                output,
                new_order,
            } => {
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
            }
            Step::Reshape {
                input,
                shape,
                output,
            } => {
                let x = self.get(*input);
                let target = self.get(*shape).to_i64_vec();
                let size = x.len();
                // An overflowing product of the given sizes cannot match any array.
                let Some(known) = target
                    .iter()
                    .filter(|&&d| d >= 0)
                    .try_fold(1i64, |p, &d| p.checked_mul(d))
                else {
                    return Err(err(
                        name,
                        format!("cannot reshape size {size} into {target:?}"),
                    ));
                };
                let mut sh = Vec::with_capacity(target.len());
                for &d in &target {
                    if d == -1 {
                        if known == 0 || size as i64 % known != 0 {
                            return Err(err(
                                name,
                                format!("cannot reshape size {size} into {target:?}"),
                            ));
                        }
                        sh.push((size as i64 / known) as usize);
                    } else if d < 0 {
                        return Err(err(name, format!("invalid size {d} in {target:?}")));
                    } else {
                        sh.push(d as usize);
                    }
                }
                if sh.iter().try_fold(1usize, |p, &d| p.checked_mul(d)) != Some(size)
                    || target.iter().filter(|&&d| d == -1).count() > 1
                {
                    return Err(err(
                        name,
                        format!(
                            "cannot reshape array of shape {:?} into {target:?}",
                            x.shape
                        ),
                    ));
                }
                let src = if x.is_standard() {
                    x
                } else {
                    let out = self.alloc(name, x.dtype, &x.shape)?;
                    let es = x.dtype.size_of();
                    drive(
                        copy::kernel(x.dtype),
                        &[x.ptr, out.ptr],
                        &[&x.strides, &out.strides],
                        &[es, es],
                        &x.shape,
                        self.par,
                        None,
                    );
                    out
                };
                let mut v = src;
                v.strides = c_strides(&sh);
                v.shape = sh.into();
                self.slots[*output] = Some(v);
            }
            Step::Alloc {
                value,
                dims,
                output,
            } => {
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
                let off = shape.len() - v.shape.len();
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
            }
            Step::Dot {
                a,
                b,
                casts,
                output,
                dtype,
            } => {
                let mut a = self.get(*a);
                let mut b = self.get(*b);
                if let Some(c) = casts[0] {
                    a = self.cast(name, &a, c, *dtype)?;
                }
                if let Some(c) = casts[1] {
                    b = self.cast(name, &b, c, *dtype)?;
                }
                let res = self.dot(name, &a, &b, *dtype, *output)?;
                self.slots[*output] = Some(res);
            }
            Step::Gemm {
                z,
                alpha,
                x,
                y,
                beta,
                output,
                dtype,
                inplace,
                z_desc,
            } => {
                let ops = [*z, *alpha, *x, *y, *beta].map(|s| self.get(s));
                let [z, alpha, x, y, beta] = &ops;
                let res = self.gemm(
                    name,
                    (z, alpha, x, y, beta),
                    *dtype,
                    *output,
                    *inplace,
                    z_desc,
                )?;
                drop(ops);
                self.slots[*output] = Some(res);
            }
            Step::Shape { input, output } => {
                let x = self.get(*input);
                let v: Vec<i64> = x.shape.iter().map(|&d| d as i64).collect();
                let val = Value::I64(
                    ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[v.len()]), v).expect("1-d"),
                );
                self.slots[*output] =
                    Some(Arr::from_buffer(Buffer::from_value(val), &[x.shape.len()]));
            }
            Step::ShapeI { input, dim, output } => {
                let x = self.get(*input);
                let val = Value::scalar_i64(DType::I64, x.shape[*dim] as i64);
                self.slots[*output] = Some(Arr::from_buffer(Buffer::from_value(val), &[]));
            }
            Step::Custom {
                op,
                inputs,
                outputs,
            } => {
                let vals: Vec<Value> = inputs
                    .iter()
                    .map(|&s| to_value(self.par, self.get(s)))
                    .collect::<Result<_>>()?;
                let refs: Vec<&Value> = vals.iter().collect();
                let res = op.perform(&refs)?;
                if res.len() != outputs.len() {
                    return Err(err(
                        name,
                        format!("returned {} outputs, expected {}", res.len(), outputs.len()),
                    ));
                }
                for (&s, v) in outputs.iter().zip(res) {
                    let shape = v.shape().to_vec();
                    self.slots[s] = Some(Arr::from_buffer(Buffer::from_value(v), &shape));
                }
            }
        }
        Ok(())
    }

    /// Whether a full reduction of `n` elements is split over threads.
    fn chunked(&self, n: usize) -> bool {
        self.par.threshold > 0
            && n >= self.par.threshold
            && kiln_runtime::parallel::num_threads() > 1
    }

    /// The zero-filled-then-identity accumulator of reducing `shape` with
    /// `op` over `axes`, its strides over the dimensions of `shape` (0 on
    /// the reduced axes) and the identity's bits. Max and min of an empty
    /// axis are errors, as in the reference.
    fn reduce_accumulator(
        &self,
        name: &str,
        op: ReduceOp,
        acc: DType,
        axes: &[usize],
        shape: &[usize],
    ) -> Result<(Arr, SmallVec<[isize; 4]>, u64)> {
        if matches!(op, ReduceOp::Max | ReduceOp::Min) {
            if let Some(&a) = axes.iter().find(|&&a| shape[a] == 0) {
                return Err(err(
                    name,
                    format!(
                        "zero-size reduction along axis {a}: {} has no identity",
                        op.name().to_lowercase()
                    ),
                ));
            }
        }
        let out_shape: Vec<usize> = (0..shape.len())
            .filter(|d| !axes.contains(d))
            .map(|d| shape[d])
            .collect();
        let accum = self.alloc_zeroed(name, acc, &out_shape)?;
        let bits = reduce::identity_bits(op, acc);
        if bits != 0 {
            let n = accum.len();
            // SAFETY: the accumulator buffer holds `n` 8-byte elements.
            let sl = unsafe { std::slice::from_raw_parts_mut(accum.ptr as *mut u64, n) };
            sl.fill(bits);
        }
        let mut acc_strides: SmallVec<[isize; 4]> = SmallVec::new();
        let mut kd = 0;
        for d in 0..shape.len() {
            if axes.contains(&d) {
                acc_strides.push(0);
            } else {
                acc_strides.push(accum.strides[kd]);
                kd += 1;
            }
        }
        Ok((accum, acc_strides, bits))
    }

    /// A full reduction over threads of operands `ptrs` (element `strides`,
    /// `esz` bytes per element) covering `shape`, into the one-element
    /// `accum` (holding the identity `bits`): the outermost dimension larger
    /// than 1 is cut into chunks of about [`REDUCE_CHUNK`] elements, each reduced
    /// by `kernel` into its own partial in parallel, then the partials are
    /// folded in chunk order by [`reduce::fold_partials`] with `combine`
    /// (the reduction and its accumulator dtype). The chunking depends only on the shape, so the
    /// result does not depend on the thread count; it differs from the
    /// sequential order only by floating-point reassociation (for sums:
    /// within n·eps·sum|x_i| of the exact value, like any order).
    #[allow(clippy::too_many_arguments)] // the operand description is three parallel slices
    fn full_reduce_chunked(
        &self,
        kernel: usize,
        combine: (ReduceOp, DType),
        ptrs: &[*mut u8],
        strides: &[&[isize]],
        esz: &[usize],
        shape: &[usize],
        accum: &Arr,
        bits: u64,
    ) {
        let total: usize = shape.iter().product();
        let Some(d0) = shape.iter().position(|&s| s > 1) else {
            drive_full(self.code, kernel, accum.ptr, ptrs, strides, esz, shape);
            return;
        };
        let inner = total / shape[d0];
        let per_chunk = (REDUCE_CHUNK / inner.max(1)).max(1);
        let chunks = shape[d0].div_ceil(per_chunk);
        let mut partials = vec![bits; chunks];
        let pbase = partials.as_mut_ptr() as usize;
        let bases: Vec<usize> = ptrs.iter().map(|&p| p as usize).collect();
        let code = self.code;
        let run = |c0: usize, c1: usize| {
            let mut sub = shape.to_vec();
            for c in c0..c1 {
                let s = c * per_chunk;
                sub[d0] = per_chunk.min(shape[d0] - s);
                let p: Vec<*mut u8> = bases
                    .iter()
                    .enumerate()
                    .map(|(k, &b)| {
                        (b as isize + s as isize * strides[k][d0] * esz[k] as isize) as *mut u8
                    })
                    .collect();
                drive_full(
                    code,
                    kernel,
                    (pbase + 8 * c) as *mut u8,
                    &p,
                    strides,
                    esz,
                    &sub,
                );
            }
        };
        kiln_runtime::parallel::parallel_for(chunks, 1, &run);
        let (op, acc) = combine;
        let r = reduce::fold_partials(op, acc, bits, &partials);
        // SAFETY: `accum` holds one 8-byte accumulator element.
        unsafe { (accum.ptr as *mut u64).write(r) };
    }

    /// `a · b` into a new array for slot `output` (see [`Exec::alloc_slot`]).
    fn dot(&mut self, name: &str, a: &Arr, b: &Arr, dtype: DType, output: Slot) -> Result<Arr> {
        let MatMul {
            m,
            k,
            n,
            rsa,
            csa,
            rsb,
            csb,
            out_shape,
        } = MatMul::new(name, a, b)?;
        // The integer product builds its own result; GEMM writes into `c`.
        let c = if dtype.is_float() {
            self.alloc_slot(name, output, dtype, &out_shape)?
        } else {
            self.alloc(name, dtype, &out_shape)?
        };
        match dtype {
            // SAFETY: a is m×k, b is k×n with the given element strides; c is a
            // contiguous m×n array (a fresh buffer, or a caller's output array,
            // which overlaps no input) that overlaps neither.
            DType::F64 => unsafe {
                kiln_runtime::gemm::kiln_gemm_f64(
                    m,
                    k,
                    n,
                    1.0,
                    a.ptr as *const f64,
                    rsa,
                    csa,
                    b.ptr as *const f64,
                    rsb,
                    csb,
                    0.0,
                    c.ptr as *mut f64,
                    n as isize,
                    1,
                )
            },
            // SAFETY: as above.
            DType::F32 => unsafe {
                kiln_runtime::gemm::kiln_gemm_f32(
                    m,
                    k,
                    n,
                    1.0,
                    a.ptr as *const f32,
                    rsa,
                    csa,
                    b.ptr as *const f32,
                    rsb,
                    csb,
                    0.0,
                    c.ptr as *mut f32,
                    n as isize,
                    1,
                )
            },
            _ => {
                let bytes = crate::eval::array_bytes(name, DType::I64, &out_shape)?;
                let mut acc = Vec::new();
                acc.try_reserve_exact(m * n)
                    .map_err(|_| crate::eval::out_of_memory(name, bytes, DType::I64, &out_shape))?;
                acc.resize(m * n, 0i64);
                for i in 0..m {
                    for l in 0..k {
                        // SAFETY: (i, l) is within a's m×k shape.
                        let x = unsafe { a.read_i64(i as isize * rsa + l as isize * csa) };
                        for j in 0..n {
                            // SAFETY: (l, j) is within b's k×n shape.
                            let y = unsafe { b.read_i64(l as isize * rsb + j as isize * csb) };
                            acc[i * n + j] = acc[i * n + j].wrapping_add(x.wrapping_mul(y));
                        }
                    }
                }
                let v = Value::from_i64_array(
                    dtype,
                    ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&out_shape), acc)
                        .expect("sized"),
                );
                return Ok(Arr::from_buffer(Buffer::from_value(v), &out_shape));
            }
        }
        Ok(c)
    }

    /// The `Op::Gemm` step: `beta * z + alpha * dot(x, y)`, written into
    /// `z`'s array when `inplace`, else into a new array for slot `output`
    /// (see [`Exec::alloc_slot`]) holding a copy of `z` (not copied when
    /// `beta == 0`: `z` is then ignored, as in BLAS).
    #[allow(clippy::too_many_arguments)] // the node's five operands and its output
    fn gemm(
        &mut self,
        name: &str,
        (z, alpha, x, y, beta): (&Arr, &Arr, &Arr, &Arr, &Arr),
        dtype: DType,
        output: Slot,
        inplace: bool,
        z_desc: &str,
    ) -> Result<Arr> {
        let mm = MatMul::new(name, x, y)?;
        if z.shape.as_slice() != mm.out_shape.as_slice() {
            return Err(err(
                name,
                format!(
                    "{z_desc} has shape {:?} but dot(x, y) has shape {:?}",
                    z.shape.as_slice(),
                    mm.out_shape
                ),
            ));
        }
        // SAFETY: alpha and beta are 0-d arrays (by the node's types): offset 0 is their element.
        let (alpha, beta) = unsafe { (alpha.read_f64(0), beta.read_f64(0)) };
        let c = if inplace {
            // An empty array has no element to overlap (a 2 x 0 buffer's
            // standard strides are 0).
            if !z.is_empty()
                && z.shape
                    .iter()
                    .zip(&z.strides)
                    .any(|(&n, &s)| n > 1 && s == 0)
            {
                return Err(err(
                    name,
                    format!("cannot overwrite {z_desc}: it is a broadcast view"),
                ));
            }
            z.clone()
        } else {
            let c = self.alloc_slot(name, output, dtype, &mm.out_shape)?;
            if beta != 0.0 {
                copy_into(self.par, z, &c);
            }
            c
        };
        // C's strides as an m×n matrix (a missing dimension has size 1).
        let (rsc, csc) = match (x.shape.len(), y.shape.len()) {
            (2, 2) => (c.strides[0], c.strides[1]),
            (2, _) => (c.strides[0], 0),
            (_, 2) => (0, c.strides[0]),
            _ => (0, 0),
        };
        let MatMul {
            m,
            k,
            n,
            rsa,
            csa,
            rsb,
            csb,
            ..
        } = mm;
        match dtype {
            // SAFETY: x is m×k and y is k×n with the given element strides;
            // c is m×n with strides (rsc, csc) addressing distinct elements
            // (checked above for z; a fresh or caller's output array is
            // contiguous), and overlaps neither operand: a fresh buffer or a
            // caller's output array overlaps no input, and the graph's
            // DestroyHandler refused any view of z among x and y.
            DType::F64 => unsafe {
                kiln_runtime::gemm::kiln_gemm_f64(
                    m,
                    k,
                    n,
                    alpha,
                    x.ptr as *const f64,
                    rsa,
                    csa,
                    y.ptr as *const f64,
                    rsb,
                    csb,
                    beta,
                    c.ptr as *mut f64,
                    rsc,
                    csc,
                )
            },
            // SAFETY: as above.
            DType::F32 => unsafe {
                kiln_runtime::gemm::kiln_gemm_f32(
                    m,
                    k,
                    n,
                    alpha as f32,
                    x.ptr as *const f32,
                    rsa,
                    csa,
                    y.ptr as *const f32,
                    rsb,
                    csb,
                    beta as f32,
                    c.ptr as *mut f32,
                    rsc,
                    csc,
                )
            },
            d => {
                return Err(err(
                    name,
                    format!("the runtime GEMM takes f32 or f64, got {d}"),
                ))
            }
        }
        if k == 0 && !alpha.is_finite() {
            // The GEMM skips the empty product (C = beta·C); alpha times its
            // zero sum is NaN, as in the reference.
            for i in 0..m {
                for j in 0..n {
                    let off = i as isize * rsc + j as isize * csc;
                    // SAFETY: (i, j) is within c's m×n shape.
                    unsafe {
                        match dtype {
                            DType::F32 => *(c.ptr as *mut f32).offset(off) = f32::NAN,
                            _ => *(c.ptr as *mut f64).offset(off) = f64::NAN,
                        }
                    }
                }
            }
        }
        Ok(c)
    }
}

/// The matrix view of `dot(a, b)` for 1-d and 2-d operands: sizes, element
/// strides (a 1-d left operand is one row, a 1-d right operand one column)
/// and the numpy output shape.
struct MatMul {
    m: usize,
    k: usize,
    n: usize,
    rsa: isize,
    csa: isize,
    rsb: isize,
    csb: isize,
    out_shape: Vec<usize>,
}

impl MatMul {
    /// Checks that `a` and `b` are aligned (error of node `name` otherwise).
    fn new(name: &str, a: &Arr, b: &Arr) -> Result<MatMul> {
        let (sa, sb) = (&a.shape, &b.shape);
        let ka = sa[sa.len() - 1];
        let kb = sb[0];
        if ka != kb {
            return Err(err(
                name,
                format!(
                    "shapes {:?} and {:?} are not aligned: {ka} (dim {}) != {kb} (dim 0)",
                    sa.as_slice(),
                    sb.as_slice(),
                    sa.len() - 1
                ),
            ));
        }
        let (m, rsa, csa) = if sa.len() == 2 {
            (sa[0], a.strides[0], a.strides[1])
        } else {
            (1, 0, a.strides[0])
        };
        let (n, rsb, csb) = if sb.len() == 2 {
            (sb[1], b.strides[0], b.strides[1])
        } else {
            (1, b.strides[0], 0)
        };
        let mut out_shape = Vec::new();
        if sa.len() == 2 {
            out_shape.push(m);
        }
        if sb.len() == 2 {
            out_shape.push(n);
        }
        Ok(MatMul {
            m,
            k: ka,
            n,
            rsa,
            csa,
            rsb,
            csb,
            out_shape,
        })
    }
}

/// The run-time shape of an element-wise iteration over `ins` under the
/// static broadcasting rule: per dimension, the inputs not statically
/// broadcastable (`bcast`) must agree; the message names them (`descs`).
fn broadcast_shape(
    name: &str,
    ins: &[Arr],
    bcast: &[Vec<bool>],
    descs: &[String],
) -> Result<Vec<usize>> {
    let ndim = bcast.first().map_or(0, |b| b.len());
    let mut shape = vec![1usize; ndim];
    for d in 0..ndim {
        let mut size: Option<(usize, usize)> = None;
        for (i, a) in ins.iter().enumerate() {
            if bcast[i][d] {
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
fn broadcast_strides(a: &Arr) -> SmallVec<[isize; 4]> {
    a.strides
        .iter()
        .enumerate()
        .map(|(d, &s)| if a.shape[d] == 1 { 0 } else { s })
        .collect()
}

/// Runs reduction `kernel` sequentially over `shape` into the single
/// accumulator element at `acc` (stride 0 in every dimension: row mode,
/// which every kernel of a reduction over all axes handles).
fn drive_full(
    code: &JitCode,
    kernel: usize,
    acc: *mut u8,
    ptrs: &[*mut u8],
    strides: &[&[isize]],
    esz: &[usize],
    shape: &[usize],
) {
    let zeros: SmallVec<[isize; 4]> = SmallVec::from_elem(0, shape.len());
    let mut all_ptrs = vec![acc];
    all_ptrs.extend_from_slice(ptrs);
    let mut all_strides: Vec<&[isize]> = vec![&zeros];
    all_strides.extend_from_slice(strides);
    let mut all_esz = vec![8];
    all_esz.extend_from_slice(esz);
    let seq = ParallelOptions {
        threshold: 0,
        grain: 1,
    };
    drive(
        jit_fn(code, kernel),
        &all_ptrs,
        &all_strides,
        &all_esz,
        shape,
        seq,
        Some(reduce::Modes::Row),
    );
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

/// Checks an input against its declared type (message names the input).
pub fn check(k: usize, ty: &TensorType, name: Option<&str>, a: &Arr) -> Result<()> {
    crate::eval::check_input(k, name, ty, a.dtype, &a.shape)
}

/// Copies `x` into a fresh standard-layout buffer.
pub fn copy(par: ParallelOptions, x: &Arr) -> Result<Arr> {
    let out = Arr::from_buffer(Buffer::zeros("copy", x.dtype, &x.shape)?, &x.shape);
    copy_into(par, x, &out);
    Ok(out)
}

/// Copies the elements of `x` into `out`, an array of the same dtype and
/// shape, any layout, that overlaps `x` nowhere and is writable: a
/// (parallel) memcpy when both are contiguous, else the strided copy
/// kernel of [`copy::kernel`].
pub fn copy_into(par: ParallelOptions, x: &Arr, out: &Arr) {
    debug_assert!(x.dtype == out.dtype && x.shape == out.shape);
    if x.is_standard() && out.is_standard() {
        let bytes = x.len() * x.dtype.size_of();
        let (src, dst) = (x.ptr as usize, out.ptr as usize);
        let chunk = |s: usize, e: usize| {
            // SAFETY: [s, e) is within the `bytes` bytes of both arrays
            // (contiguous from `ptr`), which do not overlap (the caller's
            // guarantee); chunks are disjoint.
            unsafe {
                std::ptr::copy_nonoverlapping((src + s) as *const u8, (dst + s) as *mut u8, e - s)
            }
        };
        let esz = x.dtype.size_of();
        if par.threshold > 0 && x.len() >= par.threshold {
            kiln_runtime::parallel::parallel_for(bytes, par.grain * esz, &chunk);
        } else {
            chunk(0, bytes);
        }
        return;
    }
    let es = x.dtype.size_of();
    drive(
        copy::kernel(x.dtype),
        &[x.ptr, out.ptr],
        &[&x.strides, &out.strides],
        &[es, es],
        &x.shape,
        par,
        None,
    );
}

/// An owned value with the contents of `x`: its buffer when `x` is the whole
/// of a buffer nobody else references, else a copy.
pub fn to_value(par: ParallelOptions, x: Arr) -> Result<Value> {
    let x = if x.owns_whole_buffer() {
        x
    } else {
        copy(par, &x)?
    };
    let shape = x.shape.to_vec();
    let buf = x.buf.expect("owned buffer");
    Ok(Arc::try_unwrap(buf)
        .expect("uniquely owned")
        .into_value(&shape))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::FunctionGraph;
    use crate::linker::compile::compile_plan;
    use crate::linker::jit::CodegenOptions;
    use crate::tensor::tensor;

    /// The kernel and modes of the one `Reduce` step of `sum(x, axes)`
    /// for `x` of static `shape`, with the code holding it.
    fn sum_kernel(shape: &[Option<usize>], axes: &[isize]) -> (JitCode, usize, reduce::Modes) {
        let x = tensor("x", DType::F64, shape);
        let r = x.sum(axes).unwrap();
        let fg = FunctionGraph::new(&[x], &[r]).unwrap();
        let (plan, code, _) = compile_plan(&fg, &CodegenOptions::default()).unwrap();
        let (kernel, modes) = plan
            .steps
            .iter()
            .find_map(|(s, _, _)| match s {
                Step::Reduce { kernel, modes, .. } => Some((*kernel, *modes)),
                _ => None,
            })
            .expect("a Reduce step");
        (code, kernel, modes)
    }

    /// Runs `kernel` over four `x` elements with accumulator strides `acc_st`.
    fn run(code: &JitCode, kernel: usize, modes: reduce::Modes, acc_st: isize) -> Vec<f64> {
        let x = [1.0f64, 2.0, 3.0, 4.0];
        let mut acc = [0.0f64; 4];
        drive(
            jit_fn(code, kernel),
            &[acc.as_mut_ptr() as *mut u8, x.as_ptr() as *mut u8],
            &[&[acc_st], &[1]],
            &[8, 8],
            &[4],
            ParallelOptions::default(),
            Some(modes),
        );
        acc.to_vec()
    }

    #[test]
    fn drive_runs_a_kernel_only_in_modes_it_has() {
        // A row-only kernel given a column layout: one element per call.
        let (code, k, modes) = sum_kernel(&[None], &[0]);
        assert_eq!(modes, reduce::Modes::Row);
        assert_eq!(run(&code, k, modes, 1), [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(run(&code, k, modes, 0), [10.0, 0.0, 0.0, 0.0]);
        // A column-only kernel given a row layout.
        let (code, k, modes) = sum_kernel(&[None, Some(4)], &[0]);
        assert_eq!(modes, reduce::Modes::Column);
        assert_eq!(run(&code, k, modes, 0), [10.0, 0.0, 0.0, 0.0]);
        assert_eq!(run(&code, k, modes, 1), [1.0, 2.0, 3.0, 4.0]);
    }
}
