//! Execution of the reduction family (`Reduce`, `FusedReduce`): the
//! accumulator (filled with the reduction's identity), the kernel run in
//! the accumulator modes it has, a full reduction, or one over outer
//! dimensions, chunked over threads with a deterministic fold of the
//! partials, the cast to the reduced value's dtype and, for a `FusedReduce`
//! with a post-map, the kernel's post mode over the reduced values. A plain
//! reduction's runtime column pass (`ReduceStep::columns`) goes to the
//! driver with its kernel, which hands it whole runs of reduced rows
//! (`drive::drive_reduce`).
//!
//! The iteration space is first put in the memory order of the input
//! (for a `FusedReduce`, the first input spanning the whole shape), so
//! that a transposed or Fortran-ordered input streams through memory as a
//! row-major one does (`Space::in_order`).
//!
//! Invariants: max and min of an empty axis are errors (no identity), as in
//! the reference; whether a reduction is chunked, and where it is cut,
//! depend on the shape, the input's memory order and the parallel
//! threshold only, never on the thread count, so neither does its result.

use smallvec::SmallVec;

use super::broadcast::{broadcast_shape, broadcast_strides};
use super::drive::jit_fn;
use super::drive::{drive_full, drive_reduce, ParallelOptions};
use super::state::{err, Exec};
use crate::error::Result;
use crate::graph::DType;
use crate::linker::accum::{combine_into, fold_partials, identity_bits, ColumnPass, Modes};
use crate::linker::buffer::Arr;
use crate::linker::codegen::fused::POST_MODE;
use crate::linker::plan::step::{FusedReduceStep, PostMap, ReduceStep};
use crate::ops::ReduceOp;

/// Elements per partial of a parallel full reduction, in units of the
/// parallel grain (2^16 with the default grain of 2^13).
pub const REDUCE_CHUNK_GRAINS: usize = 8;

/// Elements per chunk of a parallel reduction over outer dimensions
/// (`Exec::outer_reduce_chunked`), in units of the parallel grain (2^18
/// by default); each chunk also folds one partial array of the
/// accumulator's size. Tests set a small grain to cut small arrays.
pub const OUTER_CHUNK_GRAINS: usize = 32;

impl Exec<'_> {
    /// Runs a `CAReduce` step.
    pub(super) fn reduce(&mut self, name: &str, step: &ReduceStep) -> Result<()> {
        let ReduceStep {
            kernel,
            modes,
            cast,
            op,
            axes,
            input,
            output,
            acc,
            out,
            columns,
        } = step;
        let x = self.get(*input);
        let (accum, acc_strides, bits) =
            self.reduce_accumulator(name, *op, *acc, axes, &x.shape)?;
        let space = Space::new(&x.shape, acc_strides, vec![broadcast_strides(&x)])
            .in_order(x.memory_order().as_deref());
        let esz = x.dtype.size_of();
        if accum.shape.is_empty() && self.chunked(x.len()) {
            self.full_reduce_chunked(
                *kernel,
                (*op, *acc),
                &[x.ptr],
                &space.input_strides(),
                &[esz],
                &space.shape,
                &accum,
                bits,
            );
        } else {
            self.reduce_into(
                (*kernel, *columns),
                *modes,
                (*op, *acc),
                &[accum.ptr, x.ptr],
                &space.all_strides(),
                &[8, esz],
                &space.shape,
                bits,
            );
        }
        let res = match cast {
            Some(c) => self.cast(name, &accum, *c, *out)?,
            None => accum,
        };
        self.slots[*output] = Some(res);
        Ok(())
    }

    /// Runs a `FusedReduce` step.
    pub(super) fn fused_reduce(&mut self, name: &str, step: &FusedReduceStep) -> Result<()> {
        let FusedReduceStep {
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
            post,
        } = step;
        let ins: Vec<Arr> = inputs.iter().map(|&s| self.get(s)).collect();
        let shape = broadcast_shape(name, &ins, bcast, descs)?;
        let (accum, acc_strides, bits) = self.reduce_accumulator(name, *op, *acc, axes, &shape)?;
        // The memory order of the first input that spans the whole shape.
        let order = ins
            .iter()
            .find(|a| a.shape.as_slice() == shape.as_slice())
            .and_then(Arr::memory_order);
        let space = Space::new(
            &shape,
            acc_strides,
            ins.iter().map(broadcast_strides).collect(),
        )
        .in_order(order.as_deref());
        let esz: Vec<usize> = ins.iter().map(|a| a.dtype.size_of()).collect();
        let in_ptrs: Vec<*mut u8> = ins.iter().map(|a| a.ptr).collect();
        let total: usize = shape.iter().product();
        if accum.shape.is_empty() && self.chunked(total) {
            self.full_reduce_chunked(
                *kernel,
                (*op, *acc),
                &in_ptrs,
                &space.input_strides(),
                &esz,
                &space.shape,
                &accum,
                bits,
            );
        } else {
            let mut ptrs = vec![accum.ptr];
            ptrs.extend(&in_ptrs);
            let mut all_esz = vec![8];
            all_esz.extend(&esz);
            self.reduce_into(
                (*kernel, None),
                *modes,
                (*op, *acc),
                &ptrs,
                &space.all_strides(),
                &all_esz,
                &space.shape,
                bits,
            );
        }
        drop(ins);
        let res = match cast {
            Some(c) => self.cast(name, &accum, *c, *out)?,
            None => accum,
        };
        let res = match post {
            Some(post) => self.post_map(name, *kernel, post, &res)?,
            None => res,
        };
        self.slots[*output] = Some(res);
        Ok(())
    }

    /// Runs fused reduction `kernel` in post mode over the reduced value
    /// `value` (a fresh array in standard layout) and the post-map's
    /// one-element extras into a new array.
    fn post_map(&mut self, name: &str, kernel: usize, post: &PostMap, value: &Arr) -> Result<Arr> {
        let out = self.alloc(name, post.out, &value.shape)?;
        let m = value.len();
        if m == 0 {
            return Ok(out);
        }
        let extras: Vec<Arr> = post.inputs.iter().map(|&s| self.get(s)).collect();
        let mut ptrs: Vec<*mut u8> = Vec::with_capacity(extras.len() + 2);
        let mut strides: Vec<isize> = Vec::with_capacity(extras.len() + 2);
        ptrs.push(value.ptr);
        strides.push(value.dtype.size_of() as isize);
        for e in &extras {
            if e.len() != 1 {
                return Err(err(
                    name,
                    format!("a post-map operand has {} elements, not one", e.len()),
                ));
            }
            ptrs.push(e.ptr);
            strides.push(0);
        }
        ptrs.push(out.ptr);
        strides.push(post.out.size_of() as isize);
        let f = jit_fn(self.code, kernel);
        // SAFETY: the kernel was built with this post-map (the step's), which
        // in post mode reads `m` elements of `value` (contiguous: a fresh
        // accumulator or its cast) and one element of each extra (stride
        // 0), and writes `m` elements of `out`, allocated above with
        // `value`'s shape; `m < 2^63`, so the mode bit is free.
        unsafe { f(ptrs.as_ptr(), strides.as_ptr(), m | POST_MODE as usize) };
        Ok(out)
    }

    /// Runs reduction `kernel` (accumulator modes `modes`; with its column
    /// pass, for a plain reduction) over `shape`
    /// into the accumulator that is operand 0 of `ptrs` (8-byte elements
    /// holding the identity `bits`; element strides in `strides[0]`, 0 on
    /// the reduced dimensions). A reduction over outer dimensions that
    /// keeps the innermost one (column mode, e.g. `sum(X, axis=0)`) and is
    /// large enough to be split over threads goes to
    /// [`Exec::outer_reduce_chunked`]; any other is driven as is.
    #[allow(clippy::too_many_arguments)] // the operand description is three parallel slices
    fn reduce_into(
        &self,
        kernel: (usize, Option<ColumnPass>),
        modes: Modes,
        combine: (ReduceOp, DType),
        ptrs: &[*mut u8],
        strides: &[&[isize]],
        esz: &[usize],
        shape: &[usize],
        bits: u64,
    ) {
        let total: usize = shape.iter().product();
        let acc_st = strides[0];
        // The innermost dimension left after dropping size-1 ones is kept
        // (column mode), and the outermost reduced one is cut into chunks.
        let column = shape
            .iter()
            .rposition(|&s| s > 1)
            .is_some_and(|d| acc_st[d] != 0);
        let cut = (0..shape.len()).find(|&d| shape[d] > 1 && acc_st[d] == 0);
        if let (true, Some(d0), true) = (column, cut, self.chunked(total)) {
            let chunk = OUTER_CHUNK_GRAINS * self.par.grain.max(1);
            let per_chunk = (chunk / (total / shape[d0]).max(1)).max(1);
            if shape[d0] > per_chunk {
                self.outer_reduce_chunked(
                    kernel, modes, combine, ptrs, strides, esz, shape, d0, per_chunk, bits,
                );
                return;
            }
        }
        drive_reduce(
            jit_fn(self.code, kernel.0),
            kernel.1,
            ptrs,
            strides,
            esz,
            shape,
            self.par,
            modes,
        );
    }

    /// A reduction over outer dimensions, over threads: reduced dimension
    /// `d0` is cut into chunks of `per_chunk` indices, each reduced by
    /// `kernel` into its own partial accumulator array (the identity
    /// `bits`, then the chunk's elements in order) in parallel, and the
    /// partial arrays are folded into the accumulator (operand 0 of
    /// `ptrs`, contiguous) in chunk order by [`combine_into`]. Each chunk
    /// reads a contiguous run of whole rows, which streams from memory at
    /// full speed, where splitting the kept columns between threads made
    /// each thread read a page-sized piece of every row. The cut depends
    /// only on the shape, so the result does not depend on the thread
    /// count; a sum or product differs from the sequential order only by
    /// reassociation, as in [`Exec::full_reduce_chunked`].
    #[allow(clippy::too_many_arguments)] // the operand description is three parallel slices
    fn outer_reduce_chunked(
        &self,
        kernel: (usize, Option<ColumnPass>),
        modes: Modes,
        combine: (ReduceOp, DType),
        ptrs: &[*mut u8],
        strides: &[&[isize]],
        esz: &[usize],
        shape: &[usize],
        d0: usize,
        per_chunk: usize,
        bits: u64,
    ) {
        let acc_len: usize = shape
            .iter()
            .zip(strides[0])
            .filter(|(_, &st)| st != 0)
            .map(|(&s, _)| s)
            .product();
        let chunks = shape[d0].div_ceil(per_chunk);
        // Filled by writing, not `vec![0; n]`'s fresh zero pages: the
        // kernels read each accumulator before writing it, and a write to
        // a page first mapped by a read is a copy-on-write fault that
        // flushes the TLB of every core (most of the run time with 64
        // chunks).
        let mut partials = Vec::with_capacity(chunks * acc_len);
        partials.resize(chunks * acc_len, bits);
        let pbase = partials.as_mut_ptr() as usize;
        let bases: Vec<usize> = ptrs.iter().map(|&p| p as usize).collect();
        let (f, columns) = (jit_fn(self.code, kernel.0), kernel.1);
        let run = |c0: usize, c1: usize| {
            let mut sub = shape.to_vec();
            let mut p: Vec<*mut u8> = vec![std::ptr::null_mut(); bases.len()];
            for c in c0..c1 {
                let s = c * per_chunk;
                sub[d0] = per_chunk.min(shape[d0] - s);
                // The chunk's partial array, laid out as the accumulator.
                p[0] = (pbase + 8 * c * acc_len) as *mut u8;
                for k in 1..bases.len() {
                    let off = s as isize * strides[k][d0] * esz[k] as isize;
                    p[k] = (bases[k] as isize + off) as *mut u8;
                }
                let sequential = ParallelOptions {
                    threshold: 0,
                    ..ParallelOptions::default()
                };
                drive_reduce(f, columns, &p, strides, esz, &sub, sequential, modes);
            }
        };
        kiln_runtime::parallel::parallel_for(chunks, 1, &run);
        // SAFETY: the accumulator is a contiguous buffer of `acc_len`
        // 8-byte elements (its strides cover the kept dimensions in
        // standard layout), not aliased by the partials.
        let dst = unsafe { std::slice::from_raw_parts_mut(ptrs[0] as *mut u64, acc_len) };
        let (op, acc) = combine;
        for part in partials.chunks_exact(acc_len) {
            combine_into(op, acc, dst, part);
        }
    }

    /// Whether a reduction of `n` elements is cut into chunks (reduced
    /// over the threads there are). Not a function of the thread count:
    /// one thread reduces the same chunks in turn, so the result has the
    /// same bits on any number of threads.
    fn chunked(&self, n: usize) -> bool {
        self.par.threshold > 0 && n >= self.par.threshold
    }

    /// The identity-filled accumulator of reducing `shape` with
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
        let accum = self.alloc(name, acc, &out_shape)?;
        let bits = identity_bits(op, acc);
        // Written, not taken zero-filled when the identity is 0: a fresh
        // zero-filled buffer is mapped to the zero page until written, and
        // the kernels read each accumulator before writing it (a
        // copy-on-write fault with a TLB flush on every core per page).
        let n = accum.len();
        // SAFETY: the accumulator buffer holds `n` 8-byte elements.
        let sl = unsafe { std::slice::from_raw_parts_mut(accum.ptr as *mut u64, n) };
        sl.fill(bits);
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
    /// than 1 is cut into chunks of about [`REDUCE_CHUNK_GRAINS`] parallel grains of elements, each reduced
    /// by `kernel` into its own partial in parallel, then the partials are
    /// folded in chunk order by [`fold_partials`] with `combine`
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
        let chunk = REDUCE_CHUNK_GRAINS * self.par.grain.max(1);
        let per_chunk = (chunk / inner.max(1)).max(1);
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
                let p: SmallVec<[*mut u8; 6]> = bases
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
        let r = fold_partials(op, acc, bits, &partials);
        // SAFETY: `accum` holds one 8-byte accumulator element.
        unsafe { (accum.ptr as *mut u64).write(r) };
    }
}

/// A reduction's iteration space: its shape and, over the same axes, the
/// element strides of the accumulator (0 on the reduced axes) and of each
/// input (0 where it is broadcast).
struct Space {
    shape: SmallVec<[usize; 4]>,
    acc: SmallVec<[isize; 4]>,
    inputs: Vec<SmallVec<[isize; 4]>>,
}

impl Space {
    fn new(shape: &[usize], acc: SmallVec<[isize; 4]>, inputs: Vec<SmallVec<[isize; 4]>>) -> Self {
        Space {
            shape: shape.into(),
            acc,
            inputs,
        }
    }

    /// The space with its axes permuted into `order` (outermost first; an
    /// input's [`Arr::memory_order`]), or as it is for `None`. The drivers
    /// iterate row-major over the axes they are given, so a transposed or
    /// Fortran-ordered input is then read in the order it lies in memory:
    /// `sum(X.T, axis=0)` becomes contiguous row sums instead of column
    /// sums down a stride of a whole row. Each accumulator still folds the
    /// same elements, in an order that depends on the input's layout (the
    /// reduced axes' memory order; numpy's sums do so too), never on the
    /// thread count.
    fn in_order(self, order: Option<&[usize]>) -> Self {
        let Some(order) = order else {
            return self;
        };
        let pick = |v: &[isize]| order.iter().map(|&d| v[d]).collect();
        Space {
            shape: order.iter().map(|&d| self.shape[d]).collect(),
            acc: pick(&self.acc),
            inputs: self.inputs.iter().map(|st| pick(st)).collect(),
        }
    }

    /// The inputs' strides.
    fn input_strides(&self) -> Vec<&[isize]> {
        self.inputs.iter().map(|s| s.as_slice()).collect()
    }

    /// The accumulator's strides, then the inputs'.
    fn all_strides(&self) -> Vec<&[isize]> {
        std::iter::once(self.acc.as_slice())
            .chain(self.inputs.iter().map(|s| s.as_slice()))
            .collect()
    }
}
