//! Execution of the indexing and joining family: gathers
//! (`AdvancedSubtensor1`), indexed increments and assignments
//! (`AdvancedIncSubtensor1`), boolean masks, joins and splits, as typed
//! Rust loops over strided arrays (no kernel: these ops move data; the
//! only arithmetic, an update's add, is one typed add per element).
//!
//! Invariants: every index is read and checked against the axis length
//! (`ops::indexing::normalize_index`, shared with `perform`) before any
//! element it names is read (a gather by a standard `i64` index array
//! checks each index as it copies its rows, the others before any element
//! is read or written), so an index out of range is an error naming the
//! first such index and the size, never an out-of-bounds access; every run-time
//! shape (join inputs, a mask's shape, split sizes, an update's `y`) is
//! checked in full, and every output shape against the step's static
//! sizes, before data moves. A gather or a join writes each element of its
//! fresh output exactly once (a gather copies whole contiguous rows with
//! `memcpy`, split over threads; a mask over a contiguous `x` by a
//! contiguous mask is one branch-free pass over the mask's bytes); an
//! update copies `x` into its output and
//! then applies the rows in index order, sequentially, so duplicates
//! accumulate exactly as `np.add.at` (the last one wins for `set`); a split
//! returns views sharing `x`'s buffer.

use std::sync::atomic::{AtomicUsize, Ordering};

use smallvec::SmallVec;

use super::broadcast::check_static_shape;
use super::copy::{self, copy_into};
use super::drive::{drive, ParallelOptions};
use super::state::{err, Exec};
use crate::error::Result;
use crate::graph::DType;
use crate::linker::buffer::{c_strides, Arr};
use crate::linker::plan::step::{BooleanMaskStep, IncTakeStep, JoinStep, SplitStep, TakeStep};
use crate::ops::indexing::{normalize_index, normalize_unsigned_index, split_sizes};

/// The element offsets of every index of `shape` (in row-major order) for
/// an array with element strides `strides`.
fn offsets(shape: &[usize], strides: &[isize]) -> Vec<isize> {
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        out.push(idx.iter().zip(strides).map(|(&i, &s)| i as isize * s).sum());
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// Copies row `i` of the contiguous rows of `row_bytes` bytes at `x` to
/// the next row of `out` for every `i` with `mask[i] != 0` (`count` of
/// them), in order. Rows of one element of 1, 2, 4 or 8 bytes (the usual
/// mask over a vector) go through a branch-free loop (every row stored,
/// the output position advanced where the mask byte is set, up to the
/// last selected row only, so that no store passes the output's end);
/// other rows are copied one selected row at a time.
///
/// # Safety
/// `x` is valid for `mask.len()` rows of `row_bytes` bytes, `out` for
/// `count` rows, they do not overlap, and `count` is the number of nonzero
/// mask bytes (any nonzero byte selects, as in the general path).
unsafe fn compress_rows(x: *const u8, mask: &[u8], count: usize, row_bytes: usize, out: *mut u8) {
    /// The branch-free loop on rows of type `T`.
    ///
    /// # Safety
    /// As for `compress_rows`, with `T` of `row_bytes` bytes.
    unsafe fn compress<T: Copy>(x: *const T, mask: &[u8], count: usize, out: *mut T) {
        let Some(last) = mask.iter().rposition(|&b| b != 0) else {
            return;
        };
        let mut j = 0usize;
        for (i, &b) in mask[..=last].iter().enumerate() {
            // SAFETY: i <= last < mask.len() rows of x; j counts the selected
            // rows before i, and row `last` is selected, so j < count here.
            unsafe { out.add(j).write_unaligned(x.add(i).read_unaligned()) };
            j += (b != 0) as usize;
        }
        debug_assert_eq!(j, count);
    }
    // SAFETY: the caller's contract, with `T` of `row_bytes` bytes.
    unsafe {
        match row_bytes {
            1 => compress(x, mask, count, out),
            2 => compress(x as *const u16, mask, count, out as *mut u16),
            4 => compress(x as *const u32, mask, count, out as *mut u32),
            8 => compress(x as *const u64, mask, count, out as *mut u64),
            _ => {
                let selected = mask.iter().enumerate().filter(|(_, &b)| b != 0);
                for (j, (i, _)) in selected.enumerate() {
                    std::ptr::copy_nonoverlapping(
                        x.add(i * row_bytes),
                        out.add(j * row_bytes),
                        row_bytes,
                    );
                }
            }
        }
    }
}

/// True when an array of `shape` with element strides `strides` is
/// row-major contiguous (size-1 dimensions may have any stride).
fn contiguous(shape: &[usize], strides: &[isize]) -> bool {
    shape
        .iter()
        .zip(strides)
        .zip(&c_strides(shape))
        .all(|((&n, &s), &w)| n <= 1 || s == w)
}

/// The positions along an axis of length `len` named by the elements of
/// the integer array `idx` in row-major order, each checked.
fn positions(name: &str, idx: &Arr, len: usize, axis: usize) -> Result<Vec<usize>> {
    // A `u64` index is read as its bit pattern: one above `i64::MAX` is out of range, not negative.
    let unsigned = idx.dtype == DType::U64;
    let check = |i: i64| {
        if unsigned {
            normalize_unsigned_index(i as u64, len, axis)
        } else {
            normalize_index(i, len, axis)
        }
        .map_err(|m| err(name, m))
    };
    if let Some(s) = i64_elements(idx) {
        return s.iter().map(|&i| check(i)).collect();
    }
    offsets(&idx.shape, &idx.strides)
        .into_iter()
        // SAFETY: every offset addresses an element of `idx` (it comes from
        // its own shape and strides).
        .map(|o| check(unsafe { idx.read_i64(o) }))
        .collect()
}

/// A block of `shape` copied from `src` (element strides `ss`) to `dst`
/// (element strides `ds`), elements of `es` bytes: one `memcpy` when both
/// are contiguous, else the strided copy kernel.
///
/// # Safety
/// Both pointers address a whole block of `shape` at their strides; the
/// two blocks do not overlap and `dst`'s is writable.
unsafe fn copy_block(
    src: *const u8,
    ss: &[isize],
    dst: *mut u8,
    ds: &[isize],
    shape: &[usize],
    dtype: DType,
    fast: Option<usize>,
) {
    if let Some(bytes) = fast {
        // SAFETY: contiguous blocks of `bytes` bytes (the caller's `fast`
        // says so), not overlapping.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, bytes) };
        return;
    }
    let es = dtype.size_of();
    let seq = ParallelOptions {
        threshold: 0,
        grain: 1,
    };
    drive(
        copy::kernel(dtype),
        &[src as *mut u8, dst],
        &[ss, ds],
        &[es, es],
        shape,
        seq,
        None,
    );
}

/// Sources (bytes spanned along the gathered axis) above which a gather
/// prefetches its rows a few iterations ahead. A smaller source stays in
/// the L2 cache, where a random row is a few cycles away and the prefetch
/// only adds instructions: a gather of 1e5 f64 by 1e5 random indices took
/// 0.18 ms with it and 0.12 without (two threads; 0.33 and 0.21 on one),
/// `kiln bench --suite --only gather --scale-down 10`, five alternated
/// rounds.
const PREFETCH_SOURCE_BYTES: usize = 1 << 20;

/// An index element a gather reads: an `i64` as the user gave it
/// (negative ones count from the end), or a `usize` position checked
/// already.
trait Position: Copy {
    /// The position this names along an axis of length `len`, or a value
    /// of at least `len` when it is out of range.
    fn position(self, len: usize) -> usize;
}

impl Position for i64 {
    #[inline(always)]
    fn position(self, len: usize) -> usize {
        wrap(self, len)
    }
}

impl Position for usize {
    #[inline(always)]
    fn position(self, _len: usize) -> usize {
        self
    }
}

/// Copies row `idx[j]` of `src` (row `p` starts at byte `p * row_stride`)
/// to row `j` of `dst`, `row_bytes` each, for every `j`, and stops at the
/// first `j` whose index is out of range of the `len` rows: `Err(j)`, rows
/// before `j` written. The common small widths are fixed-size copies the
/// compiler inlines, chosen once per call; rows of a source larger than
/// [`PREFETCH_SOURCE_BYTES`] are prefetched a few iterations ahead (random
/// gathers from memory are bound by its latency). The loop is kept short:
/// a random read waits on the cache, and the fewer instructions an
/// iteration has, the more reads the core keeps in flight.
///
/// # Safety
/// Rows `0..len` of `src` are readable, `dst` holds `idx.len()` writable
/// rows, and the two do not overlap.
unsafe fn gather_rows<T: Position>(
    src: *const u8,
    row_stride: isize,
    len: usize,
    dst: *mut u8,
    row_bytes: usize,
    idx: &[T],
) -> std::result::Result<(), usize> {
    let rows = Rows {
        src,
        row_stride,
        len,
        dst,
    };
    if len.saturating_mul(row_stride.unsigned_abs()) > PREFETCH_SOURCE_BYTES {
        // SAFETY: the caller's contract, passed on.
        unsafe { rows.copy_width::<true, T>(row_bytes, idx) }
    } else {
        // SAFETY: as above.
        unsafe { rows.copy_width::<false, T>(row_bytes, idx) }
    }
}

/// [`gather_rows`]'s source and destination.
struct Rows {
    src: *const u8,
    row_stride: isize,
    len: usize,
    dst: *mut u8,
}

impl Rows {
    /// [`Rows::copy`] for the row width `row_bytes`.
    ///
    /// # Safety
    /// As [`gather_rows`].
    #[inline(always)]
    unsafe fn copy_width<const PREFETCH: bool, T: Position>(
        &self,
        row_bytes: usize,
        idx: &[T],
    ) -> std::result::Result<(), usize> {
        // SAFETY: the caller's contract, with `N` the row width where it is
        // not 0.
        unsafe {
            match row_bytes {
                1 => self.copy::<1, PREFETCH, T>(1, idx),
                2 => self.copy::<2, PREFETCH, T>(2, idx),
                4 => self.copy::<4, PREFETCH, T>(4, idx),
                8 => self.copy::<8, PREFETCH, T>(8, idx),
                16 => self.copy::<16, PREFETCH, T>(16, idx),
                32 => self.copy::<32, PREFETCH, T>(32, idx),
                64 => self.copy::<64, PREFETCH, T>(64, idx),
                128 => self.copy::<128, PREFETCH, T>(128, idx),
                256 => self.copy::<256, PREFETCH, T>(256, idx),
                n => self.copy::<0, PREFETCH, T>(n, idx),
            }
        }
    }

    /// [`gather_rows`] for rows of `N` bytes (`row_bytes` when `N` is 0).
    ///
    /// # Safety
    /// As [`gather_rows`], with `row_bytes == N` when `N > 0`.
    #[inline(always)]
    unsafe fn copy<const N: usize, const PREFETCH: bool, T: Position>(
        &self,
        row_bytes: usize,
        idx: &[T],
    ) -> std::result::Result<(), usize> {
        const AHEAD: usize = 12;
        let bytes = if N > 0 { N } else { row_bytes };
        let (src, stride, len) = (self.src, self.row_stride, self.len);
        for (j, &i) in idx.iter().enumerate() {
            let p = i.position(len);
            if p >= len {
                return Err(j);
            }
            if PREFETCH {
                if let Some(&q) = idx.get(j + AHEAD) {
                    // A hint: never faults, whatever the (unchecked) index.
                    let q = (q.position(len) as isize).wrapping_mul(stride);
                    kiln_runtime::mem::kiln_prefetch(src.wrapping_offset(q), bytes);
                }
            }
            // SAFETY: p < len, so row `p` of `src` is readable, and row `j`
            // of `dst` is writable (the contract); they do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src.offset(p as isize * stride),
                    self.dst.add(j * bytes),
                    bytes,
                )
            };
        }
        Ok(())
    }
}

/// The elements of `idx` as a slice when it is a standard-layout `i64`
/// array (the common index array: read in place, no copy).
fn i64_elements(idx: &Arr) -> Option<&[i64]> {
    (idx.dtype == DType::I64 && idx.is_standard()).then(|| {
        // SAFETY: a standard-layout array of `idx.len()` i64 elements
        // starts at `ptr`, which is aligned for i64 (arrays are
        // element-aligned); nothing writes it during the call's step, and
        // the slice does not outlive the borrow of `idx`, which keeps the
        // buffer alive.
        unsafe { std::slice::from_raw_parts(idx.ptr as *const i64, idx.len()) }
    })
}

/// Checks every index of `idx` against an axis of length `len` (negative
/// ones count from the end); the error names the first index out of range,
/// as [`positions`] does. For gathers that copy no element (an empty
/// output): the others check each index as they copy its row.
fn check_indices(name: &str, idx: &[i64], len: usize, axis: usize) -> Result<()> {
    match idx.iter().position(|&i| wrap(i, len) >= len) {
        None => Ok(()),
        Some(j) => Err(out_of_range(name, idx[j], len, axis)),
    }
}

/// The error for index `i`, out of range of an axis of length `len`.
fn out_of_range(name: &str, i: i64, len: usize, axis: usize) -> crate::error::Error {
    match normalize_index(i, len, axis) {
        Err(m) => err(name, m),
        Ok(_) => unreachable!("index {i} is in range of an axis of length {len}"),
    }
}

/// The position that index `i` names along an axis of length `len`
/// (negative ones count from the end), or a value of at least `len` when
/// `i` is out of range (outside `-len..len`).
#[inline(always)]
fn wrap(i: i64, len: usize) -> usize {
    if i < 0 {
        // len <= isize::MAX (an array's size): no overflow, and below -len
        // the sum is negative, so at least len as usize.
        i.wrapping_add(len as i64) as usize
    } else {
        i as usize
    }
}

/// A gather's source and destination layout, shared by the threads that
/// copy its rows.
struct Gather<'a> {
    src: Addr,
    dst: Addr,
    dtype: DType,
    /// Bytes of one contiguous row of `x` after the axis, if it is one.
    fast: Option<usize>,
    /// Element offsets of `x`'s indices before the axis.
    x_outer: &'a [isize],
    /// Number of indices.
    m: usize,
    /// Length of `x`'s gathered axis.
    len: usize,
    /// `x`'s element stride along the axis.
    sa: isize,
    inner_shape: &'a [usize],
    inner_x: &'a [isize],
    inner_out: &'a [isize],
    inner_len: usize,
}

impl Gather<'_> {
    /// Copies output rows `r0..r1` (row `r` is outer index `r / m` and
    /// index `r % m`, naming position `idx[r % m]`), and stops at the first
    /// row whose index is out of range of the axis: `Err(r)`, the rows
    /// before it written.
    ///
    /// # Safety
    /// `src` is `x` and `dst` the fresh output of `x_outer.len() * m *
    /// inner_len` elements, whose rows `r0..r1` no other thread writes;
    /// `idx` holds the `m` indices.
    unsafe fn rows<T: Position>(
        &self,
        r0: usize,
        r1: usize,
        idx: &[T],
    ) -> std::result::Result<(), usize> {
        let es = self.dtype.size_of();
        if let (Some(bytes), [o]) = (self.fast, self.x_outer) {
            // SAFETY: one outer index, so row r is index r; rows 0..len of
            // the axis are inside `x` and rows r0..r1 of the output are
            // this thread's.
            return unsafe {
                gather_rows(
                    (self.src.0 as *const u8).offset(o * es as isize),
                    self.sa * es as isize,
                    self.len,
                    (self.dst.0 as *mut u8).add(r0 * bytes),
                    bytes,
                    &idx[r0..r1],
                )
            }
            .map_err(|j| r0 + j);
        }
        for r in r0..r1 {
            let (o, j) = (r / self.m, r % self.m);
            let p = idx[j].position(self.len);
            if p >= self.len {
                return Err(r);
            }
            let off = self.x_outer[o] + p as isize * self.sa;
            // SAFETY: `p` is in range of the axis and `o` ranges over x's
            // outer indices, so the row starting at `off` is inside `x`;
            // output row `r` is inside the fresh output of `rows *
            // inner_len` elements; rows are disjoint and each is written by
            // one thread.
            unsafe {
                copy_block(
                    (self.src.0 as *const u8).offset(off * es as isize),
                    self.inner_x,
                    (self.dst.0 as *mut u8).add(r * self.inner_len * es),
                    self.inner_out,
                    self.inner_shape,
                    self.dtype,
                    self.fast,
                );
            }
        }
        Ok(())
    }
}

/// A `Send + Sync` address, for handing disjoint parts of arrays to threads.
#[derive(Clone, Copy)]
struct Addr(usize);

impl Exec<'_> {
    /// Runs a gather (`take(x, idx, axis)`).
    pub(super) fn take(&mut self, name: &str, step: &TakeStep) -> Result<()> {
        let TakeStep {
            x,
            idx,
            output,
            axis,
            out_shape,
        } = step;
        let (x, idx, axis) = (self.get(*x), self.get(*idx), *axis);
        let len = x.shape[axis];
        // A standard i64 index array is read in place, each index checked
        // as its rows are copied; any other is read once into checked
        // positions.
        let raw = i64_elements(&idx);
        let pos = match raw {
            Some(_) => Vec::new(),
            None => positions(name, &idx, len, axis)?,
        };
        let mut shape: Vec<usize> = x.shape[..axis].to_vec();
        shape.extend_from_slice(&idx.shape);
        shape.extend_from_slice(&x.shape[axis + 1..]);
        check_static_shape(name, out_shape, &shape)?;
        let out = self.alloc_slot(name, *output, x.dtype, &shape)?;
        let es = x.dtype.size_of();
        let inner_shape = &x.shape[axis + 1..];
        let inner_x = &x.strides[axis + 1..];
        let inner_len: usize = inner_shape.iter().product();
        let inner_out = c_strides(inner_shape);
        let x_outer = offsets(&x.shape[..axis], &x.strides[..axis]);
        let g = Gather {
            src: Addr(x.ptr as usize),
            dst: Addr(out.ptr as usize),
            dtype: x.dtype,
            fast: contiguous(inner_shape, inner_x).then_some(inner_len * es),
            x_outer: &x_outer,
            m: idx.len(),
            len,
            sa: x.strides[axis],
            inner_shape,
            inner_x,
            inner_out: &inner_out,
            inner_len,
        };
        let rows = x_outer.len() * g.m;
        // The smallest index position out of range that a thread met. Each
        // thread stops at its first; the smallest of those is the first of
        // the whole array, since every index is copied in the first outer
        // block, in order (see `check_indices` for empty outputs).
        let first_bad = AtomicUsize::new(usize::MAX);
        let run = |r0: usize, r1: usize| {
            // SAFETY: `out` is the fresh output of `rows * inner_len`
            // elements and each chunk of rows is written by one thread; the
            // gather checks every position against the axis.
            let done = match raw {
                Some(s) => unsafe { g.rows(r0, r1, s) },
                None => unsafe { g.rows(r0, r1, &pos) },
            };
            if let Err(r) = done {
                first_bad.fetch_min(r % g.m, Ordering::Relaxed);
            }
        };
        let total = rows * inner_len;
        if total == 0 {
            // No row is copied, so no index is met on the way.
            if let Some(s) = raw {
                check_indices(name, s, len, axis)?;
            }
        } else if self.par.threshold > 0 && total >= self.par.threshold {
            let grain = (self.par.grain / inner_len).max(1);
            kiln_runtime::parallel::parallel_for(rows, grain, &run);
        } else {
            run(0, rows);
        }
        if let (Some(s), j) = (raw, first_bad.into_inner()) {
            if j != usize::MAX {
                return Err(out_of_range(name, s[j], len, axis));
            }
        }
        self.slots[*output] = Some(out);
        Ok(())
    }

    /// Runs an indexed increment or assignment (`AdvancedIncSubtensor1`).
    pub(super) fn inc_take(&mut self, name: &str, step: &IncTakeStep) -> Result<()> {
        let IncTakeStep {
            x,
            y,
            idx,
            output,
            axis,
            set,
            y_bcast,
        } = step;
        let (x, y, idx, axis) = (self.get(*x), self.get(*y), self.get(*idx), *axis);
        if y.dtype != x.dtype {
            return Err(err(
                name,
                format!("y has dtype {} but x has dtype {}", y.dtype, x.dtype),
            ));
        }
        let pos = positions(name, &idx, x.shape[axis], axis)?;
        // y's strides aligned to x[idx]'s shape, broadcasting where static.
        let mut target: Vec<usize> = x.shape[..axis].to_vec();
        target.extend_from_slice(&idx.shape);
        target.extend_from_slice(&x.shape[axis + 1..]);
        let Some(off) = target.len().checked_sub(y.shape.len()) else {
            return Err(err(
                name,
                format!(
                    "y of shape {:?} has more dimensions than x[idx] {target:?}",
                    y.shape.as_slice()
                ),
            ));
        };
        let mut ys: SmallVec<[isize; 6]> = SmallVec::from_elem(0, target.len());
        for (k, (&n, &s)) in y.shape.iter().zip(&y.strides).enumerate() {
            let want = target[off + k];
            if n == want {
                ys[off + k] = if n == 1 { 0 } else { s };
            } else if !(n == 1 && y_bcast.get(k).copied().unwrap_or(false)) {
                return Err(err(
                    name,
                    format!(
                        "y of shape {:?} does not match x[idx] of shape {target:?} in dimension {}",
                        y.shape.as_slice(),
                        off + k
                    ),
                ));
            }
        }
        let out = self.alloc_slot(name, *output, x.dtype, &x.shape)?;
        copy_into(self.par, &x, &out);
        let ni = idx.shape.len();
        let inner_shape = &x.shape[axis + 1..];
        let out_outer = offsets(&x.shape[..axis], &out.strides[..axis]);
        let y_outer = offsets(&x.shape[..axis], &ys[..axis]);
        let y_rows = offsets(&idx.shape, &ys[axis..axis + ni]);
        let block = Block {
            shape: inner_shape,
            dst_strides: &out.strides[axis + 1..],
            src_strides: &ys[axis + ni..],
        };
        let sa = out.strides[axis];
        for (&oo, &yo) in out_outer.iter().zip(&y_outer) {
            for (&p, &yr) in pos.iter().zip(&y_rows) {
                // SAFETY: `p` is checked in range of the axis, `oo` / `yo`
                // range over the outer indices of the output / of y's
                // broadcast, and `yr` over the index dimensions of y's
                // broadcast, so both blocks are inside their arrays; the
                // output is a fresh buffer distinct from y.
                unsafe {
                    let es = x.dtype.size_of() as isize;
                    let d = out.ptr.offset((oo + p as isize * sa) * es);
                    let s = y.ptr.offset((yo + yr) * es);
                    block.apply(x.dtype, *set, d, s);
                }
            }
        }
        self.slots[*output] = Some(out);
        Ok(())
    }

    /// Runs `x[mask]`.
    pub(super) fn boolean_mask(&mut self, name: &str, step: &BooleanMaskStep) -> Result<()> {
        let BooleanMaskStep {
            x,
            mask,
            output,
            out_shape,
        } = step;
        let (x, mask) = (self.get(*x), self.get(*mask));
        let k = mask.shape.len();
        if mask.dtype != DType::Bool
            || k == 0
            || k > x.shape.len()
            || mask.shape[..] != x.shape[..k]
        {
            return Err(err(
                name,
                format!(
                    "the mask of shape {:?} does not match x of shape {:?} in its first {k} dimension(s)",
                    mask.shape.as_slice(),
                    x.shape.as_slice()
                ),
            ));
        }
        // Both contiguous (the usual `x[x > 0]`): one pass over the mask
        // bytes, no offset tables.
        if contiguous(&mask.shape, &mask.strides) && contiguous(&x.shape, &x.strides) {
            let rows = mask.shape.iter().product::<usize>();
            // SAFETY: the mask is `rows` contiguous bytes.
            let m = unsafe { std::slice::from_raw_parts(mask.ptr as *const u8, rows) };
            let count = m.iter().filter(|&&b| b != 0).count();
            let mut shape = vec![count];
            shape.extend_from_slice(&x.shape[k..]);
            check_static_shape(name, out_shape, &shape)?;
            let out = self.alloc_slot(name, *output, x.dtype, &shape)?;
            let row_bytes = x.shape[k..].iter().product::<usize>() * x.dtype.size_of();
            // SAFETY: x holds `rows` contiguous rows of `row_bytes` bytes,
            // the fresh output `count` of them, `count` the mask's count.
            unsafe { compress_rows(x.ptr, m, count, row_bytes, out.ptr) };
            self.slots[*output] = Some(out);
            return Ok(());
        }
        let m_off = offsets(&mask.shape, &mask.strides);
        let x_off = offsets(&x.shape[..k], &x.strides[..k]);
        // SAFETY: every offset addresses a bool (one byte, 0 or 1) of the mask.
        let selected: Vec<isize> = m_off
            .iter()
            .zip(&x_off)
            .filter(|(&mo, _)| unsafe { *mask.ptr.offset(mo) } != 0)
            .map(|(_, &xo)| xo)
            .collect();
        let mut shape = vec![selected.len()];
        shape.extend_from_slice(&x.shape[k..]);
        check_static_shape(name, out_shape, &shape)?;
        let out = self.alloc_slot(name, *output, x.dtype, &shape)?;
        let es = x.dtype.size_of();
        let inner_shape = &x.shape[k..];
        let inner_len: usize = inner_shape.iter().product();
        let inner_out = c_strides(inner_shape);
        let fast = contiguous(inner_shape, &x.strides[k..]).then_some(inner_len * es);
        if inner_len > 0 {
            for (r, &xo) in selected.iter().enumerate() {
                // SAFETY: `xo` addresses a sub-array of x (an offset of its
                // first k dimensions); row `r` is inside the fresh output.
                unsafe {
                    copy_block(
                        x.ptr.offset(xo * es as isize),
                        &x.strides[k..],
                        out.ptr.add(r * inner_len * es),
                        &inner_out,
                        inner_shape,
                        x.dtype,
                        fast,
                    );
                }
            }
        }
        self.slots[*output] = Some(out);
        Ok(())
    }

    /// Runs a `Join`: each input copied straight into its slice of the output.
    pub(super) fn join(&mut self, name: &str, step: &JoinStep) -> Result<()> {
        let JoinStep {
            inputs,
            output,
            axis,
            out_shape,
        } = step;
        let axis = *axis;
        let arrs: Vec<Arr> = inputs.iter().map(|&s| self.get(s)).collect();
        let first = &arrs[0];
        let mut shape: Vec<usize> = first.shape.to_vec();
        shape[axis] = 0;
        for (k, a) in arrs.iter().enumerate() {
            let same = a.dtype == first.dtype
                && a.shape.len() == first.shape.len()
                && (0..a.shape.len()).all(|d| d == axis || a.shape[d] == first.shape[d]);
            if !same {
                return Err(err(
                    name,
                    format!(
                        "input {k} ({}{:?}) does not match input 0 ({}{:?}) outside axis {axis}",
                        a.dtype,
                        a.shape.as_slice(),
                        first.dtype,
                        first.shape.as_slice()
                    ),
                ));
            }
            shape[axis] = shape[axis]
                .checked_add(a.shape[axis])
                .ok_or_else(|| err(name, "the joined axis is too long".to_string()))?;
        }
        check_static_shape(name, out_shape, &shape)?;
        let out = self.alloc_slot(name, *output, first.dtype, &shape)?;
        let es = first.dtype.size_of() as isize;
        let mut start = 0usize;
        for a in &arrs {
            if a.is_empty() {
                start += a.shape[axis];
                continue;
            }
            let part = Arr {
                // SAFETY: `start + a.shape[axis] <= shape[axis]`, so the
                // slice starts inside the output.
                ptr: unsafe { out.ptr.offset(start as isize * out.strides[axis] * es) },
                shape: a.shape.clone(),
                strides: out.strides.clone(),
                dtype: a.dtype,
                buf: None,
            };
            // The inputs never alias the fresh output.
            copy_into(self.par, a, &part);
            start += a.shape[axis];
        }
        self.slots[*output] = Some(out);
        Ok(())
    }

    /// Runs a `Split`: views of consecutive parts of `x`.
    pub(super) fn split(&mut self, name: &str, step: &SplitStep) -> Result<()> {
        let SplitStep {
            x,
            sizes,
            outputs,
            axis,
            out_shapes,
        } = step;
        let (x, axis) = (self.get(*x), *axis);
        let vals = self.get(*sizes).to_i64_vec();
        let sizes =
            split_sizes(&vals, outputs.len(), Some(x.shape[axis])).map_err(|m| err(name, m))?;
        let es = x.dtype.size_of() as isize;
        let mut start = 0usize;
        for ((&s, &slot), want) in sizes.iter().zip(outputs).zip(out_shapes) {
            let mut v = x.clone();
            v.shape[axis] = s;
            check_static_shape(name, want, &v.shape)?;
            // An empty last part may point one past x's end; it is never read.
            v.ptr = x.ptr.wrapping_offset(start as isize * x.strides[axis] * es);
            self.slots[slot] = Some(v);
            start += s;
        }
        Ok(())
    }
}

/// The inner block of an indexed update: its shape and the element strides
/// of the destination (the output) and the source (`y`, broadcast).
struct Block<'a> {
    shape: &'a [usize],
    dst_strides: &'a [isize],
    src_strides: &'a [isize],
}

/// The typed combination of an update: `+` (wrapping for integers, `or`
/// for bool, as the element-wise `add`).
trait Accumulate: Copy {
    fn add(self, o: Self) -> Self;
}

macro_rules! wrapping {
    ($($t:ty),*) => {$(
        impl Accumulate for $t {
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
        }
    )*};
}
wrapping!(u8, i8, u16, i16, u32, i32, u64, i64);

impl Accumulate for f32 {
    fn add(self, o: Self) -> Self {
        self + o
    }
}

impl Accumulate for f64 {
    fn add(self, o: Self) -> Self {
        self + o
    }
}

impl Block<'_> {
    /// Adds (or with `set`, writes) the source block into the destination.
    ///
    /// # Safety
    /// `dst` and `src` address whole blocks of `shape` at their strides,
    /// of dtype `dtype`; `dst`'s is writable and they do not overlap.
    unsafe fn apply(&self, dtype: DType, set: bool, dst: *mut u8, src: *const u8) {
        // SAFETY: forwarded from the caller; bool is stored as one byte
        // 0 / 1, and `or` of two such bytes is 0 / 1.
        unsafe {
            match dtype {
                DType::Bool => self.run::<u8>(set, dst, src, |a, b| a | b),
                DType::U8 => self.run::<u8>(set, dst, src, u8::add),
                DType::I8 => self.run::<i8>(set, dst, src, i8::add),
                DType::I16 => self.run::<i16>(set, dst, src, i16::add),
                DType::U16 => self.run::<u16>(set, dst, src, u16::add),
                DType::U32 => self.run::<u32>(set, dst, src, u32::add),
                DType::U64 => self.run::<u64>(set, dst, src, u64::add),
                DType::I32 => self.run::<i32>(set, dst, src, i32::add),
                DType::I64 => self.run::<i64>(set, dst, src, i64::add),
                DType::F32 => self.run::<f32>(set, dst, src, f32::add),
                DType::F64 => self.run::<f64>(set, dst, src, f64::add),
            }
        }
    }

    /// [`Block::apply`] for elements of type `T` combined by `f`.
    ///
    /// # Safety
    /// As [`Block::apply`], with `T` the element type.
    unsafe fn run<T: Copy>(&self, set: bool, dst: *mut u8, src: *const u8, f: fn(T, T) -> T) {
        let n: usize = self.shape.iter().product();
        let mut idx: SmallVec<[usize; 4]> = SmallVec::from_elem(0, self.shape.len());
        let (mut d, mut s) = (0isize, 0isize);
        for _ in 0..n {
            // SAFETY: `idx` stays within `shape`, so both offsets address
            // elements of their blocks (the caller's contract); accesses
            // are unaligned-tolerant.
            unsafe {
                let pd = (dst as *mut T).offset(d);
                let v = (src as *const T).offset(s).read_unaligned();
                let new = if set { v } else { f(pd.read_unaligned(), v) };
                pd.write_unaligned(new);
            }
            for k in (0..idx.len()).rev() {
                idx[k] += 1;
                d += self.dst_strides[k];
                s += self.src_strides[k];
                if idx[k] < self.shape[k] {
                    break;
                }
                d -= self.dst_strides[k] * self.shape[k] as isize;
                s -= self.src_strides[k] * self.shape[k] as isize;
                idx[k] = 0;
            }
        }
    }
}
