//! Execution of the arg-reductions (`argmax`, `argmin`, with or without the
//! extreme's value): a native scan per dtype over the input in standard
//! layout, seen as `(outer, n, inner)` around the reduced axis. Every line
//! of `inner` running extremes advances one step of the axis at a time, so
//! the input is read once, contiguously, whatever the axis (a reduction over
//! the innermost axis is a scan per row, in blocks tested as a whole before
//! their elements are). The lanes (`outer * inner` of them) are split over
//! kiln's threads in chunks; a lane's result does not depend on its chunk.
//! Fewer long rows than threads (a whole-array argmax) are split into
//! pieces instead, whose results are merged in order.
//!
//! Invariants: numpy's rules: the first occurrence of the extreme wins ties,
//! and the first NaN is the extreme (a NaN is never replaced), so the value
//! output is exactly the NaN-propagating `max` / `min`; an empty reduced
//! axis is an error before anything is written. A dense input in another
//! order of its axes is scanned in that order along one axis (`Permuted`);
//! any other non-standard input (a strided view, or a whole-array arg of a
//! transposed one, whose index is the row-major one) is copied to standard
//! layout first.

use std::ops::Range;
use std::sync::Mutex;

use smallvec::SmallVec;

use super::copy;
use super::drive::drive;
use super::state::{err, Exec};
use crate::error::Result;
use crate::graph::DType;
use crate::linker::buffer::{order_without, permuted_strides, Arr};
use crate::linker::plan::step::ArgReduceStep;
use crate::ops::ArgOp;

/// An element type the scan compares: ordered, with NaN for floats.
trait Lane: Copy + PartialOrd {
    /// True for a NaN (floats only).
    fn is_nan(self) -> bool {
        false
    }
}
impl Lane for bool {}
impl Lane for u8 {}
impl Lane for i8 {}
impl Lane for i16 {}
impl Lane for u16 {}
impl Lane for u32 {}
impl Lane for u64 {}
impl Lane for i32 {}
impl Lane for i64 {}
impl Lane for f32 {
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
}
impl Lane for f64 {
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
}

/// True when `v` replaces the running extreme `best` under `op`: a strictly
/// better value, or the first NaN (a NaN extreme is never replaced).
#[inline(always)]
fn better<T: Lane>(op: ArgOp, v: T, best: T) -> bool {
    let strictly = match op {
        ArgOp::Max => v > best,
        ArgOp::Min => v < best,
    };
    strictly || (v.is_nan() && !best.is_nan())
}

/// Elements per block of [`scan_row`] (blocks of 32, 64 or 128 were
/// slower on rows of 2000: more of each block holding a new extreme is
/// scanned element by element).
const ROW_BLOCK: usize = 16;

/// True when some element of `block` replaces `best` under `op`: a
/// strictly better one or a NaN (`best` itself is not a NaN). One pass of
/// compares ORed together, without a branch per element, which LLVM turns
/// into vector compares.
#[inline(always)]
fn block_beats<T: Lane>(op: ArgOp, block: &[T; ROW_BLOCK], best: T) -> bool {
    let mut any = false;
    match op {
        ArgOp::Max => {
            for &v in block {
                any |= (v > best) | v.is_nan();
            }
        }
        ArgOp::Min => {
            for &v in block {
                any |= (v < best) | v.is_nan();
            }
        }
    }
    any
}

/// The extreme of a non-empty `row` under `op` and the index of its first
/// occurrence (numpy's rules, see the module header). Blocks of
/// [`ROW_BLOCK`] elements are first tested as a whole with
/// [`block_beats`]; only a block holding a new extreme is scanned element
/// by element, in order, so the result is the plain scan's. A NaN ends the
/// scan (it is never replaced).
fn scan_row<T: Lane>(op: ArgOp, row: &[T]) -> (T, usize) {
    let (mut best, mut at) = (row[0], 0usize);
    let mut k = 1;
    while k < row.len() && !best.is_nan() {
        let block = &row[k..row.len().min(k + ROW_BLOCK)];
        let whole: Option<&[T; ROW_BLOCK]> = block.try_into().ok();
        if whole.is_none_or(|b| block_beats(op, b, best)) {
            for (j, &e) in block.iter().enumerate() {
                if better(op, e, best) {
                    (best, at) = (e, k + j);
                    if e.is_nan() {
                        break;
                    }
                }
            }
        }
        k += block.len();
    }
    (best, at)
}

/// Scans lanes `lanes` of `x`, laid out as `(outer, n, inner)` in
/// row-major order with `n >= 1` (lane `l` is `(l / inner, l % inner)`),
/// into `val` and `idx` (the lanes' outputs, `lanes.len()` long each).
fn scan<T: Lane>(
    op: ArgOp,
    x: &[T],
    (n, inner): (usize, usize),
    lanes: Range<usize>,
    val: &mut [T],
    idx: &mut [i64],
) {
    if inner == 1 {
        // One lane per row: a scan of each row.
        let rows = x[lanes.start * n..lanes.end * n].chunks_exact(n);
        for ((row, v), i) in rows.zip(val.iter_mut()).zip(idx.iter_mut()) {
            let (best, at) = scan_row(op, row);
            *v = best;
            *i = at as i64;
        }
        return;
    }
    // Lanes side by side along the innermost axis, a piece of one outer
    // position at a time: each step of the axis reads a contiguous row.
    let mut l = lanes.start;
    while l < lanes.end {
        let (o, c0) = (l / inner, l % inner);
        let c1 = inner.min(c0 + (lanes.end - l));
        let base = o * n * inner;
        let out = l - lanes.start..l - lanes.start + (c1 - c0);
        let (vs, is) = (&mut val[out.clone()], &mut idx[out]);
        vs.copy_from_slice(&x[base + c0..base + c1]);
        is.fill(0);
        for k in 1..n {
            let row = &x[base + k * inner + c0..base + k * inner + c1];
            for ((&v, b), i) in row.iter().zip(vs.iter_mut()).zip(is.iter_mut()) {
                if better(op, v, *b) {
                    *b = v;
                    *i = k as i64;
                }
            }
        }
        l += c1 - c0;
    }
}

/// The extreme and its first index in each of the `m` rows of `n` elements
/// of `xs`, every row split into pieces of at least [`PAR_ELEMENTS`]
/// scanned in parallel ([`scan_row`]), then merged in order: a later
/// piece's extreme replaces the running one only when [`better`], so ties
/// keep the first occurrence and the first NaN stays, as in one scan.
fn scan_pieces<T: Lane + Send + Sync>(
    op: ArgOp,
    xs: &[T],
    m: usize,
    n: usize,
    threads: usize,
) -> Vec<(T, usize)> {
    let pieces = (n / PAR_ELEMENTS).clamp(1, 4 * threads);
    let len = n.div_ceil(pieces);
    let found: Mutex<Vec<Option<(T, usize)>>> = Mutex::new(vec![None; m * pieces]);
    kiln_runtime::parallel::parallel_for(m * pieces, 1, &|s, e| {
        for p in s..e {
            let (r, lo) = (p / pieces, (p % pieces) * len);
            let hi = n.min(lo + len);
            if lo < hi {
                let (v, at) = scan_row(op, &xs[r * n + lo..r * n + hi]);
                found.lock().unwrap_or_else(|e| e.into_inner())[p] = Some((v, lo + at));
            }
        }
    });
    let found = found.into_inner().unwrap_or_else(|e| e.into_inner());
    found
        .chunks(pieces)
        .map(|row| {
            let mut it = row.iter().flatten();
            let first = *it.next().expect("a row's first piece is not empty");
            it.fold(
                first,
                |(b, at), &(v, i)| {
                    if better(op, v, b) {
                        (v, i)
                    } else {
                        (b, at)
                    }
                },
            )
        })
        .collect()
}

/// Input elements from which an arg-reduction is split over threads
/// (lanes in chunks of at least this many elements).
const PAR_ELEMENTS: usize = 32 * 1024;

/// Runs [`scan`] on raw arrays of element type `T`, writing the values into
/// `val` when given (else into scratch), the lanes split over kiln's
/// threads (`parallel_for`) in chunks of at least [`PAR_ELEMENTS`] input
/// elements.
///
/// # Safety
/// `x` must address `outer * n * inner` contiguous initialised `T`s, `idx`
/// `outer * inner` writable `i64`s and `val`, when given, `outer * inner`
/// writable `T`s, none of them overlapping.
unsafe fn scan_raw<T: Lane + Default + Send + Sync>(
    op: ArgOp,
    x: *const u8,
    (outer, n, inner): (usize, usize, usize),
    val: Option<*mut u8>,
    idx: *mut u8,
) {
    let m = outer * inner;
    if m == 0 {
        return;
    }
    // SAFETY: the caller guarantees the size and element alignment (every
    // array the linker hands over is element-aligned); `x` is only read.
    let xs = unsafe { std::slice::from_raw_parts(x as *const T, outer * n * inner) };
    let threads = kiln_runtime::parallel::num_threads();
    if inner == 1 && m < threads && n >= 2 * PAR_ELEMENTS {
        // Fewer rows than threads (a whole-array argmax is one): each row
        // in pieces, merged in order.
        let best = scan_pieces(op, xs, m, n, threads);
        for (r, (v, at)) in best.into_iter().enumerate() {
            // SAFETY: the outputs hold `m` elements each (caller contract),
            // r < m, and nothing else writes them now.
            unsafe {
                (idx as *mut i64).add(r).write(at as i64);
                if let Some(vp) = val {
                    (vp as *mut T).add(r).write(v);
                }
            }
        }
        return;
    }
    // Addresses as integers, so the closure can cross into the pool.
    let (vp, ip) = (val.map(|v| v as usize), idx as usize);
    let run = |s: usize, e: usize| {
        // SAFETY: `parallel_for` hands out disjoint lane ranges within
        // [0, m); the outputs hold `m` elements each (caller contract) and
        // overlap neither `x` nor each other, so each chunk's output slices
        // are its own.
        let is = unsafe { std::slice::from_raw_parts_mut((ip as *mut i64).add(s), e - s) };
        let mut scratch = Vec::new();
        let vs = match vp {
            // SAFETY: as above, for the value output.
            Some(v) => unsafe { std::slice::from_raw_parts_mut((v as *mut T).add(s), e - s) },
            None => {
                scratch.resize(e - s, T::default());
                &mut scratch[..]
            }
        };
        scan(op, xs, (n, inner), s..e, vs, is);
    };
    // Lanes side by side (inner > 1) go in pieces of at least a thread's
    // share of a row: each step of the axis then streams one long piece (a
    // split into more, shorter pieces per row was slower: axis 0 of
    // 2000 x 2000, BENCHMARKS.md, twenty-third session).
    let share = if inner > 1 {
        inner.div_ceil(threads)
    } else {
        1
    };
    let grain = (PAR_ELEMENTS / n).max(share);
    kiln_runtime::parallel::parallel_for(m, grain, &run);
}

/// An arg-reduction along one axis of a dense input laid out in another
/// order of its axes (transposed, Fortran-ordered, permuted), scanned in
/// that memory order instead of after a standard-layout copy: in memory it
/// is the standard-layout array of its axes in memory order, whose
/// `(outer, n, inner)` lie around the reduced axis's place in that order.
/// The lanes then run over the kept axes in their memory order, and the
/// outputs are laid out in that order too (numpy's `order='K'` results).
/// The scan along the reduced axis still goes by increasing index (a dense
/// layout has positive strides), so the first occurrence wins ties.
struct Permuted {
    /// `(outer, n, inner)` of the input in memory order.
    dims: (usize, usize, usize),
    /// The outputs' axes in memory order, outermost first.
    out_order: SmallVec<[usize; 4]>,
}

impl Permuted {
    /// The plan for reducing axis `axis` of `x`, when `x` is dense and not
    /// row-major.
    fn of(x: &Arr, axis: usize) -> Option<Permuted> {
        let (order, dims) = x.lines_in_memory_order(axis)?;
        Some(Permuted {
            dims,
            out_order: order_without(&order, axis),
        })
    }
}

impl Exec<'_> {
    /// Runs an arg-reduction step.
    pub(super) fn arg_reduce(&mut self, name: &str, step: &ArgReduceStep) -> Result<()> {
        let ArgReduceStep {
            op,
            axis,
            input,
            value,
            index,
        } = step;
        let x = self.get(*input);
        let (outer, n, inner, out_shape): (usize, usize, usize, Vec<usize>) = match *axis {
            None => (1, x.len(), 1, Vec::new()),
            Some(a) => {
                let Some(&n) = x.shape.get(a) else {
                    return Err(err(
                        name,
                        format!("axis {a} out of range for shape {:?}", x.shape.as_slice()),
                    ));
                };
                let mut out = x.shape.to_vec();
                out.remove(a);
                (
                    x.shape[..a].iter().product(),
                    n,
                    x.shape[a + 1..].iter().product(),
                    out,
                )
            }
        };
        if n == 0 {
            return Err(err(
                name,
                format!("attempt to get arg{} of an empty sequence", op.word()),
            ));
        }
        let (x, dims, idx, val) = match axis.and_then(|a| Permuted::of(&x, a)) {
            Some(p) => {
                // Scanned in memory order; the outputs laid out in the kept
                // axes' memory order, lane by lane as the scan writes them.
                let fresh = |dtype: DType| -> Result<Arr> {
                    let mut a = self.alloc(name, dtype, &out_shape)?;
                    a.strides = permuted_strides(&out_shape, &p.out_order);
                    Ok(a)
                };
                let idx = fresh(DType::I64)?;
                let val = match value {
                    Some(_) => Some(fresh(x.dtype)?),
                    None => None,
                };
                (x, p.dims, idx, val)
            }
            None => {
                let x = self.standard(name, x)?;
                let idx = self.alloc_slot(name, *index, DType::I64, &out_shape)?;
                let val = match value {
                    Some(s) => Some(self.alloc_slot(name, *s, x.dtype, &out_shape)?),
                    None => None,
                };
                (x, (outer, n, inner), idx, val)
            }
        };
        let (xp, vp, ip) = (x.ptr as *const u8, val.as_ref().map(|v| v.ptr), idx.ptr);
        // SAFETY: `x` holds `outer * n * inner` elements of its dtype,
        // contiguous in the order `dims` describes (standard layout, or a
        // dense layout seen in its memory order by `Permuted`); `idx` and
        // `val` are fresh (or the caller's standard-layout destination)
        // dense arrays of `out_shape`, whose size is `outer * inner`, of
        // `i64` and of `x`'s dtype, laid out in the lanes' order; an output
        // never aliases an input or another output.
        unsafe {
            match x.dtype {
                DType::Bool => scan_raw::<bool>(*op, xp, dims, vp, ip),
                DType::U8 => scan_raw::<u8>(*op, xp, dims, vp, ip),
                DType::I8 => scan_raw::<i8>(*op, xp, dims, vp, ip),
                DType::I16 => scan_raw::<i16>(*op, xp, dims, vp, ip),
                DType::U16 => scan_raw::<u16>(*op, xp, dims, vp, ip),
                DType::U32 => scan_raw::<u32>(*op, xp, dims, vp, ip),
                DType::U64 => scan_raw::<u64>(*op, xp, dims, vp, ip),
                DType::I32 => scan_raw::<i32>(*op, xp, dims, vp, ip),
                DType::I64 => scan_raw::<i64>(*op, xp, dims, vp, ip),
                DType::F32 => scan_raw::<f32>(*op, xp, dims, vp, ip),
                DType::F64 => scan_raw::<f64>(*op, xp, dims, vp, ip),
            }
        }
        self.slots[*index] = Some(idx);
        if let (Some(s), Some(v)) = (value, val) {
            self.slots[*s] = Some(v);
        }
        Ok(())
    }

    /// `x` itself when in standard layout, else a standard-layout copy
    /// (the scan of a layout [`Permuted`] does not take).
    pub(super) fn standard(&self, name: &str, x: Arr) -> Result<Arr> {
        if x.is_standard() {
            return Ok(x);
        }
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
        Ok(out)
    }
}
