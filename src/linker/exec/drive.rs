//! Kernel drivers: the ABI every kernel shares ([`KernelFn`]), and the
//! loops that run a kernel over a strided iteration space (dimension
//! collapsing, the outer-dimension loop, parallel splitting, and for
//! element-wise kernels the gathering of inputs that are strided along the
//! innermost dimension into contiguous blocks, and the grouping of short
//! rows into one call with a repeated input read from a tiled buffer).
//!
//! Invariants: every operand covers the iteration shape with its strides
//! (the caller's guarantee); work handed to other threads writes disjoint
//! output (or accumulator) elements; a reduction kernel is only run in an
//! accumulator mode it was generated with.

use smallvec::SmallVec;

use crate::linker::accum::{ColumnPass, Modes, SHORT_REDUCE};
use crate::linker::codegen::elemwise::PREFETCH_MIN;
use crate::linker::codegen::jit::JitCode;
use crate::linker::codegen::mathcalls::BLOCK;

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

/// Split from 2^14 elements, in chunks of at least 2^13: the helpers
/// linger awake between calls (`kiln_runtime::parallel`), so a split pays
/// off from a few tens of microseconds of work. It was 2^17 and 2^15: a
/// call on 1e5 elements ran on one thread. `kiln bench`, two threads,
/// AVX-512, three alternated rounds, µs: `tanh(x)` on 1e5 82-97 → 47-48,
/// on 5e4 41-43 → 26-31, on 16384 21 → 13-14; `2*x**3 - 3*x**2 + x - 1`
/// on 16384 17-18 → 12; `x + 1` unchanged within the noise; the full-size
/// suite unchanged within the noise.
impl Default for ParallelOptions {
    fn default() -> Self {
        ParallelOptions {
            threshold: 1 << 14,
            grain: 1 << 13,
        }
    }
}

/// Kernel `kernel` of `code` as a callable function.
pub(super) fn jit_fn(code: &JitCode, kernel: usize) -> KernelFn {
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
pub(super) fn drive(
    f: KernelFn,
    ptrs: &[*mut u8],
    strides: &[&[isize]],
    esz: &[usize],
    shape: &[usize],
    par: ParallelOptions,
    acc0: Option<Modes>,
) {
    drive_impl(f, ptrs, strides, esz, shape, par, acc0, 0, None);
}

/// [`drive`] for a plain reduction kernel `f` (operands: the accumulator,
/// then the input) with the runtime's column pass of its reduction and
/// input dtype: where the innermost outer dimension is reduced and both
/// operands are contiguous along the inner one (e.g. `sum(X, axis=0)`),
/// the rows of that dimension go to `columns` in one call, which keeps a
/// strip of accumulators in registers across several rows instead of
/// loading and storing each accumulator once per row. Each accumulator
/// sees the same operations in the same order as with the kernel, so the
/// result has the same bits.
#[allow(clippy::too_many_arguments)] // the operand description is four parallel slices
pub(super) fn drive_reduce(
    f: KernelFn,
    columns: Option<ColumnPass>,
    ptrs: &[*mut u8],
    strides: &[&[isize]],
    esz: &[usize],
    shape: &[usize],
    par: ParallelOptions,
    modes: Modes,
) {
    match ShortReduce::plan(strides, esz, shape, modes) {
        Some(short) => short.run(f, columns, ptrs, esz, par, modes),
        None => drive_impl(f, ptrs, strides, esz, shape, par, Some(modes), 0, columns),
    }
}

/// Elements (rows × row length) per block of [`ShortReduce`].
const REDUCE_BLOCK: usize = 1024;

/// A reduction over short rows (`sum(X, axis=1)` for an `X` of rows of a
/// few elements) runs as column reductions over blocks of rows instead of
/// one row-mode kernel call per row (tens of nanoseconds each, most of
/// such a reduction's time). For a block of rows, the iteration is
/// transposed: the reduced dimension becomes the outer one and the rows
/// the inner one, so the kernel runs in column mode with one accumulator
/// per row, adding each row's elements in order (a sequential fold per
/// row, which depends only on the shape). Inputs strided along the rows
/// (the rows of `X` itself) are first gathered into a contiguous column
/// per reduced index, so that the kernel's vector path (or, for a plain
/// reduction, the runtime's column pass, once per block) runs. Applies
/// when every dimension outside the rows is kept (blocks then write
/// disjoint accumulators and can run on any thread).
struct ShortReduce {
    /// The rows (reduced) and the dimensions outside them (kept).
    space: RowSpace,
    /// Inputs gathered per block (strided along the rows: neither 0 nor
    /// one element).
    gathered: SmallVec<[bool; 6]>,
}

/// An iteration space seen as rows for [`ShortRows`] and [`ShortReduce`]:
/// the innermost collapsed dimension (the rows' elements), the one outside
/// it (the rows), and the rest.
struct RowSpace {
    /// The dimensions outside the rows.
    rest: Dims,
    /// The row length, and each operand's byte stride along a row.
    n: usize,
    inner: SmallVec<[isize; 6]>,
    /// The rows per outer position, and each operand's byte stride from
    /// row to row.
    rows: usize,
    row_st: SmallVec<[isize; 6]>,
}

impl RowSpace {
    /// The collapsed space (see [`collapse`]) as rows shorter than `limit`;
    /// `None` when it is empty, has fewer than two dimensions or longer rows.
    fn of(
        strides: &[&[isize]],
        esz: &[usize],
        shape: &[usize],
        n_gather: usize,
        limit: usize,
    ) -> Option<Self> {
        // Fewer than two dimensions of more than one element (a vector, the
        // per-call case of small functions) collapse to fewer than two:
        // rejected before collapsing, which the driver does again.
        if shape.contains(&0) || shape.iter().filter(|&&s| s > 1).count() < 2 {
            return None;
        }
        let mut rest = collapse(strides, esz, shape, n_gather);
        if rest.len() < 2 {
            return None;
        }
        let (n, inner) = rest.pop()?;
        let (rows, row_st) = rest.pop()?;
        (n < limit).then_some(RowSpace {
            rest,
            n,
            inner,
            rows,
            row_st,
        })
    }

    /// Byte offsets of outer position `o` (row-major over `rest`) in every
    /// one of `nops` operands.
    fn outer_offsets(&self, nops: usize, o: usize) -> SmallVec<[isize; 6]> {
        RowCursor::new(&self.rest, nops, o).off
    }

    /// The number of outer positions.
    fn outer(&self) -> usize {
        self.rest.iter().map(|d| d.0).product()
    }
}

impl ShortReduce {
    /// The plan of a reduction (operand 0 the accumulator), when its
    /// innermost dimension is reduced and short, the one outside it kept,
    /// every other one kept, and the kernel has column mode.
    fn plan(strides: &[&[isize]], esz: &[usize], shape: &[usize], modes: Modes) -> Option<Self> {
        if !modes.column() {
            return None;
        }
        let space = RowSpace::of(strides, esz, shape, 0, SHORT_REDUCE)?;
        let kept = |st: &[isize]| st[0] != 0;
        if kept(&space.inner) || !kept(&space.row_st) || !space.rest.iter().all(|d| kept(&d.1)) {
            return None;
        }
        let row_st = &space.row_st;
        let gathered = (0..strides.len())
            .map(|k| k > 0 && row_st[k] != 0 && row_st[k] != esz[k] as isize)
            .collect();
        Some(ShortReduce { space, gathered })
    }

    /// Runs `f` (with the column pass `columns`, if any) block by block,
    /// in parallel from `par.threshold` elements on.
    fn run(
        &self,
        f: KernelFn,
        columns: Option<ColumnPass>,
        ptrs: &[*mut u8],
        esz: &[usize],
        par: ParallelOptions,
        modes: Modes,
    ) {
        let nops = ptrs.len();
        let n = self.space.n;
        let block = (REDUCE_BLOCK / n).max(16);
        let per_outer = self.space.rows.div_ceil(block);
        let outer = self.space.outer();
        let base: SmallVec<[usize; 6]> = ptrs.iter().map(|&p| p as usize).collect();
        let sequential = ParallelOptions {
            threshold: 0,
            ..par
        };
        let run_blocks = |b0: usize, b1: usize| {
            // n columns of `block` elements per gathered input (u64s:
            // aligned for every dtype).
            let mut scratch: SmallVec<[Vec<u64>; 6]> = self
                .gathered
                .iter()
                .map(|&g| if g { vec![0u64; n * block] } else { Vec::new() })
                .collect();
            let mut p: SmallVec<[*mut u8; 6]> = SmallVec::from_elem(std::ptr::null_mut(), nops);
            let mut st: SmallVec<[[isize; 2]; 6]> = SmallVec::from_elem([0; 2], nops);
            for b in b0..b1 {
                let off = self.space.outer_offsets(nops, b / per_outer);
                let r0 = (b % per_outer) * block;
                let m = block.min(self.space.rows - r0);
                for k in 0..nops {
                    let first = base[k] as isize + off[k] + r0 as isize * self.space.row_st[k];
                    let e = esz[k] as isize;
                    if self.gathered[k] {
                        let dst = scratch[k].as_mut_ptr() as *mut u8;
                        for j in 0..n {
                            let src = first + j as isize * self.space.inner[k];
                            // SAFETY: element j of rows r0..r0 + m in this
                            // outer position is in bounds (the operand covers
                            // the iteration space); column j of the scratch
                            // holds m <= block elements of at most 8 bytes.
                            unsafe {
                                gather(
                                    src as *const u8,
                                    self.space.row_st[k],
                                    esz[k],
                                    dst.add(j * m * esz[k]),
                                    m,
                                )
                            };
                        }
                        p[k] = dst;
                        st[k] = [m as isize, 1];
                    } else {
                        p[k] = first as *mut u8;
                        st[k] = [self.space.inner[k] / e, self.space.row_st[k] / e];
                    }
                }
                let st_refs: SmallVec<[&[isize]; 6]> = st.iter().map(|s| s.as_slice()).collect();
                // Transposed: [n reduced, m kept]; each block's accumulators
                // are its own rows'.
                drive_impl(
                    f,
                    &p,
                    &st_refs,
                    esz,
                    &[n, m],
                    sequential,
                    Some(modes),
                    0,
                    columns,
                );
            }
        };
        let blocks = outer * per_outer;
        let threads = kiln_runtime::parallel::num_threads();
        if par.threshold > 0 && outer * self.space.rows * n >= par.threshold && threads > 1 {
            let grain = par.grain.div_ceil(block * n).max(1);
            kiln_runtime::parallel::parallel_for(blocks, grain, &|s, e| run_blocks(s, e));
        } else {
            run_blocks(0, blocks);
        }
    }
}

/// Elements of a strided input gathered per kernel call by
/// [`drive_elemwise`]. Small blocks keep the gather and the kernel's work
/// interleaved in short bursts (with 1024-element blocks a step-2
/// input's gather waited on memory as a phase of its own, fifteenth
/// session). With the runtime's vector gather and the dense prefetch of
/// [`DENSE_AHEAD`], 128 was faster than 256 and 512 for the step-2 layout
/// case on two threads (BENCHMARKS.md, thirty-sixth session).
const GATHER: usize = 128;

/// Bytes of a cache line: the gathered path's streamed output blocks
/// start on one (see `drive_impl`).
const LINE_BYTES: usize = 64;

/// Rows the gathered path runs side by side, block by block, when a
/// gathered input's elements lie more than a cache line apart along a row
/// but next to each other from one row to the next (the transposed
/// operand of `X + X.T`): the band's rows then take their block's
/// elements from the same lines, read from memory once for all of them
/// instead of once per row (a row of blocks touches more lines than the
/// L1 cache holds). Only the band's first row prefetches ahead. `X +
/// transpose(X)` on 2000 × 2000 f64, two threads, Intel Xeon (`kiln
/// bench`, three alternated rounds): 8.5-8.9 ms row by row, 4.7-4.9 with
/// bands of 8, 4.5-4.7 of 16, 4.0-4.1 of 16 prefetching from the first row
/// only.
const GATHER_BAND: usize = 16;

/// Output bytes of an element-wise call from which the gathered path
/// writes its outputs with non-temporal stores (each block computed into
/// a scratch block, then streamed out): an output this large is not in
/// the cache for its consumer anyway, and streaming saves reading each
/// output line before writing it. The step-2 layout case, memory-bound
/// on two threads, gained about 10% (BENCHMARKS.md, fifteenth session).
const STREAM_MIN_BYTES: usize = 16 << 20;

/// Element-wise operations whose operands span at most this many bytes in
/// all run their kernel in calls of [`IN_CACHE_PIECE`] elements, which do
/// not prefetch (the kernels prefetch from `PREFETCH_MIN` elements a call
/// on): such operands are in the cache or soon streamed in by the
/// hardware's prefetchers, and the prefetch calls only cost. `kiln bench
/// --suite --scale-down D`, two threads, AVX-512, medians of seven to nine
/// alternated rounds, ms: poly on 1e4 elements 0.012 → 0.010, on 1e6
/// 0.62 → 0.56; stencil on 1e5 0.040 → 0.032, on 1e6 0.44 → 0.39;
/// grad_sigmoid_xent on 1e6 (24 MB of operands) 2.53 → 2.30. At full size
/// (1e7 elements, 160 MB and more) the prefetch gains 10-20% (gauss,
/// sigmoid_xent), so it stays there.
const IN_CACHE_BYTES: usize = 32 << 20;

/// The calls of an operation under [`IN_CACHE_BYTES`]: below the kernels'
/// `PREFETCH_MIN`, and a whole number of their blocks (`BLOCK` elements),
/// so that every element takes the path it takes in one long call.
const IN_CACHE_PIECE: usize = PREFETCH_MIN - BLOCK;

/// How many elements ahead of the block being gathered [`drive_elemwise`]
/// prefetches every line of an input whose elements lie at most a cache
/// line apart (a step-2 view): three blocks, 6 KB of a step-2 f64 row.
/// The hardware's stream prefetchers follow such a row within a 4 KB
/// page but start again at each page; with the runtime's vector gather,
/// `exp(Y[:, ::2]) * 2 + 1` on a 2000 × 4000 `Y`, two threads, went
/// 4.24-4.57 → 3.52-3.89 ms on an Intel Xeon (BENCHMARKS.md, thirty-sixth
/// session). With the former scalar gather the same prefetch made that
/// case slower on a Zen 4 host (twenty-second session), faster on a Zen 3
/// host (fifteenth).
const DENSE_AHEAD: usize = 3 * GATHER;

/// How many elements ahead of the block being gathered [`drive_elemwise`]
/// prefetches an input whose elements lie more than a cache line apart
/// (each element's line).
const SPARSE_AHEAD: usize = 4 * GATHER;

/// [`drive`] for an element-wise kernel whose first `n_inputs` operands are
/// inputs and the rest outputs: when every output is contiguous along the
/// innermost dimension but some input is strided there (a transposed
/// operand, a step-2 slice), each row is run in blocks of [`GATHER`]
/// elements whose strided inputs are first copied to contiguous scratch,
/// so the kernel takes its vector path (block-wise math) instead of one
/// scalar call per element.
///
/// Many short rows that do not run on into each other (`X + b` or `X * c`
/// for an `X` of rows of a few elements, a slice `X[:, :4]`) run as
/// [`ShortRows`] describes.
pub(super) fn drive_elemwise(
    f: KernelFn,
    ptrs: &[*mut u8],
    strides: &[&[isize]],
    esz: &[usize],
    shape: &[usize],
    par: ParallelOptions,
    n_inputs: usize,
) {
    match ShortRows::plan(strides, esz, shape, n_inputs) {
        Some(short) => short.run(f, ptrs, esz, par),
        None => drive_impl(f, ptrs, strides, esz, shape, par, None, n_inputs, None),
    }
}

/// Element-wise rows shorter than this (innermost dimension, after
/// collapsing) are run by [`ShortRows`] when some input does not run on
/// from one row into the next. From rows of 64 on the per-call cost is
/// lost in the noise (`tanh(X + b)` and `X * 2 + b` on 4e6 f64 elements
/// measured the same with and without it at 64, 128 and 255; BENCHMARKS.md,
/// twenty-second session).
const SHORT_ROW: usize = 128;

/// Elements per kernel call of [`ShortRows`] (a gathered input's scratch
/// block: 8 KB of f64).
const FLAT_BLOCK: usize = 1024;

/// How [`ShortRows`] hands an operand to the kernel.
#[derive(Debug, PartialEq)]
enum Access {
    /// It runs on from row to row: flat element `f` lies `f` times this
    /// byte stride from the operand's start in its outer position.
    Flat(isize),
    /// An input that is the same row in every outer position: read from
    /// a buffer holding that row repeated, flat element `f` at the
    /// buffer's element `f % n + (f - f0)` for a block starting at `f0`.
    Repeated,
    /// An input gathered row by row into contiguous scratch for each block.
    Gathered,
}

/// Short rows run in blocks of [`FLAT_BLOCK`] elements of the flattened
/// rows instead of one kernel call per row. An element-wise kernel is
/// called once per row of the innermost dimension, which costs tens of
/// nanoseconds per call (entry, stride checks, the block loop's setup):
/// for `X + b` over rows of 4 elements that cost was most of the run.
/// Within an outer position, the rows × n elements are taken as one flat
/// run: operands whose rows run on into each other (row stride = n × element
/// stride, every output must) are read in place; an input that is the same
/// row everywhere (a bias, a weight row) is read from a buffer of that row
/// repeated, built once per call; any other input (a column `c` of shape
/// (rows, 1), a slice of wider rows) is gathered row by row into scratch
/// for each block. Only element-wise kernels: each element is computed
/// alone, so the grouping does not change any result.
struct ShortRows {
    /// The rows and the dimensions outside them.
    space: RowSpace,
    /// How each operand is read.
    access: SmallVec<[Access; 6]>,
}

impl ShortRows {
    /// The plan of an element-wise call (`n_inputs` inputs, then the
    /// outputs), when its rows are short and some input does not run on
    /// from row to row; `None` where the plain driver serves as well.
    fn plan(strides: &[&[isize]], esz: &[usize], shape: &[usize], n_inputs: usize) -> Option<Self> {
        let nops = strides.len();
        if n_inputs >= nops {
            return None;
        }
        let space = RowSpace::of(strides, esz, shape, n_inputs, SHORT_ROW)?;
        let RowSpace {
            rest,
            n,
            inner,
            row_st,
            ..
        } = &space;
        let n = *n;
        let mut access = SmallVec::new();
        for k in 0..nops {
            let runs_on = row_st[k] == n as isize * inner[k];
            let plain = inner[k] == 0 || inner[k] == esz[k] as isize;
            access.push(if runs_on && (plain || k >= n_inputs) {
                Access::Flat(inner[k])
            } else if k >= n_inputs {
                // An output whose rows do not run on: row by row.
                return None;
            } else if row_st[k] == 0 && inner[k] != 0 && rest.iter().all(|(_, st)| st[k] == 0) {
                Access::Repeated
            } else {
                Access::Gathered
            });
        }
        if access.iter().all(|a| matches!(a, Access::Flat(_))) {
            return None;
        }
        Some(ShortRows { space, access })
    }

    /// Runs `f` over the planned space, block by block (in parallel from
    /// `par.threshold` elements on).
    fn run(&self, f: KernelFn, ptrs: &[*mut u8], esz: &[usize], par: ParallelOptions) {
        let nops = ptrs.len();
        let n = self.space.n;
        // The repeated inputs' buffers: the row, repeated to cover any
        // block from any position in the row (u64s: aligned for every dtype).
        let reps = (n + FLAT_BLOCK).div_ceil(n);
        let buffers: SmallVec<[Vec<u64>; 6]> = (0..nops)
            .map(|k| {
                if self.access[k] != Access::Repeated {
                    return Vec::new();
                }
                let row_bytes = n * esz[k];
                let mut buf = vec![0u64; (reps * row_bytes).div_ceil(8)];
                let dst = buf.as_mut_ptr() as *mut u8;
                // SAFETY: input k's row is the n elements at ptrs[k] with byte
                // stride inner[k] (the operand covers the iteration space, in
                // every outer position of which that row is the one read);
                // the buffer holds `reps` rows and overlaps no operand.
                unsafe { gather(ptrs[k], self.space.inner[k], esz[k], dst, n) };
                for j in 1..reps {
                    // SAFETY: rows 0 and j of the buffer are disjoint and in it.
                    unsafe {
                        std::ptr::copy_nonoverlapping(dst, dst.add(j * row_bytes), row_bytes)
                    };
                }
                buf
            })
            .collect();
        let flat = self.space.rows * n;
        let per_outer = flat.div_ceil(FLAT_BLOCK);
        let outer = self.space.outer();
        let base: SmallVec<[usize; 6]> = ptrs.iter().map(|&p| p as usize).collect();
        let bufs: SmallVec<[usize; 6]> = buffers.iter().map(|b| b.as_ptr() as usize).collect();
        let run_blocks = |b0: usize, b1: usize| {
            // One scratch block per operand that is gathered.
            let mut scratch: SmallVec<[Vec<u64>; 6]> = (0..nops)
                .map(|k| match self.access[k] {
                    Access::Gathered => vec![0u64; FLAT_BLOCK],
                    _ => Vec::new(),
                })
                .collect();
            let mut q: SmallVec<[*mut u8; 6]> = SmallVec::from_elem(std::ptr::null_mut(), nops);
            let mut st: SmallVec<[isize; 6]> = SmallVec::from_elem(0, nops);
            for b in b0..b1 {
                let off = self.space.outer_offsets(nops, b / per_outer);
                let f0 = (b % per_outer) * FLAT_BLOCK;
                let m = FLAT_BLOCK.min(flat - f0);
                for k in 0..nops {
                    let start = base[k] as isize + off[k];
                    match self.access[k] {
                        Access::Flat(s) => {
                            q[k] = (start + f0 as isize * s) as *mut u8;
                            st[k] = s;
                        }
                        Access::Repeated => {
                            q[k] = (bufs[k] + (f0 % n) * esz[k]) as *mut u8;
                            st[k] = esz[k] as isize;
                        }
                        Access::Gathered => {
                            let dst = scratch[k].as_mut_ptr() as *mut u8;
                            let rows = Rows {
                                start: start as *const u8,
                                row_st: self.space.row_st[k],
                                inner: self.space.inner[k],
                                n,
                            };
                            // SAFETY: flat elements f0..f0 + m of this outer
                            // position are in bounds (the operand covers the
                            // iteration space); the scratch block holds
                            // FLAT_BLOCK >= m elements of at most 8 bytes,
                            // owned by this closure call.
                            unsafe { rows.gather(esz[k], f0, m, dst) };
                            q[k] = dst;
                            st[k] = esz[k] as isize;
                        }
                    }
                }
                // SAFETY: flat operands address elements f0..f0 + m of their
                // run in this outer position (in bounds: rows × n elements
                // that run on with stride s); repeated ones `m` elements of
                // their buffer from f0 % n (which holds n + FLAT_BLOCK or
                // more); gathered ones their scratch; blocks handed to other
                // threads write disjoint output elements.
                unsafe { f(q.as_ptr(), st.as_ptr(), m) };
            }
        };
        let blocks = outer * per_outer;
        let threads = kiln_runtime::parallel::num_threads();
        if par.threshold > 0 && outer * flat >= par.threshold && threads > 1 {
            let grain = par.grain.div_ceil(FLAT_BLOCK).max(1);
            kiln_runtime::parallel::parallel_for(blocks, grain, &|s, e| run_blocks(s, e));
        } else {
            run_blocks(0, blocks);
        }
    }
}

/// One outer position's rows of a gathered [`ShortRows`] input.
struct Rows {
    /// Its row 0, element 0.
    start: *const u8,
    /// Byte strides from row to row and along a row.
    row_st: isize,
    inner: isize,
    /// The row length.
    n: usize,
}

impl Rows {
    /// Copies flat elements `f0..f0 + m` (row `f / n`, element `f % n`)
    /// of `esz` bytes to consecutive places from `dst`; the element size
    /// is matched once, not per row (rows are a few elements long).
    ///
    /// # Safety
    /// Those elements are readable; `dst` has room for `m * esz` bytes
    /// and overlaps none of them; `esz` is 1, 2, 4 or 8.
    unsafe fn gather(&self, esz: usize, f0: usize, m: usize, dst: *mut u8) {
        /// # Safety
        /// As for `gather`, with `T` of `esz` bytes.
        unsafe fn go<T: Copy>(rows: &Rows, f0: usize, m: usize, dst: *mut T) {
            if rows.inner == 0 {
                // SAFETY (all three): the caller's contract, for a column.
                match rows.n {
                    2 => return unsafe { rows.spread::<T, 2>(f0, m, dst) },
                    4 => return unsafe { rows.spread::<T, 4>(f0, m, dst) },
                    8 => return unsafe { rows.spread::<T, 8>(f0, m, dst) },
                    _ => {}
                }
            }
            let (mut r, mut i, mut done) = (f0 / rows.n, f0 % rows.n, 0);
            while done < m {
                let take = (rows.n - i).min(m - done);
                let src = rows
                    .start
                    .wrapping_offset(r as isize * rows.row_st + i as isize * rows.inner);
                for j in 0..take {
                    // SAFETY: element i + j of row r is one of the caller's
                    // readable elements (the source is only element-aligned
                    // as seen from here, hence the unaligned read); slot
                    // done + j < m of `dst` exists.
                    unsafe {
                        let v = (src.wrapping_offset(j as isize * rows.inner) as *const T)
                            .read_unaligned();
                        dst.add(done + j).write_unaligned(v);
                    }
                }
                done += take;
                r += 1;
                i = 0;
            }
        }
        // SAFETY: the caller's contract, with T of `esz` bytes.
        unsafe {
            match esz {
                1 => go::<u8>(self, f0, m, dst),
                2 => go::<u16>(self, f0, m, dst as *mut u16),
                4 => go::<u32>(self, f0, m, dst as *mut u32),
                8 => go::<u64>(self, f0, m, dst as *mut u64),
                _ => unreachable!("element sizes are 1, 2, 4 or 8 bytes"),
            }
        }
    }

    /// [`Rows::gather`] of a column (one value per row: stride 0 along
    /// rows of `N` elements): each row's value written `N` times, whole
    /// rows as one array store. Element by element, the gather of `S * c`
    /// over rows of 4 (a column `c` of shape (rows, 1)) took 45% of the
    /// call.
    ///
    /// # Safety
    /// As for [`Rows::gather`], with `T` of `esz` bytes; `self.n == N` and
    /// `self.inner == 0`.
    #[inline(always)]
    unsafe fn spread<T: Copy, const N: usize>(&self, f0: usize, m: usize, dst: *mut T) {
        debug_assert!(self.n == N && self.inner == 0);
        // SAFETY: row r's element is readable for every row the caller's
        // elements f0..f0 + m touch (only element-aligned as seen from here).
        let value = |r: usize| unsafe {
            (self.start.wrapping_offset(r as isize * self.row_st) as *const T).read_unaligned()
        };
        let (mut r, mut done) = (f0 / N, 0);
        let head = (N - f0 % N) % N;
        if head > 0 {
            let v = value(r);
            for j in 0..head.min(m) {
                // SAFETY: slot j < m of `dst` exists.
                unsafe { dst.add(j).write_unaligned(v) };
            }
            done = head.min(m);
            r += 1;
        }
        while done + N <= m {
            // SAFETY: slots done..done + N <= m of `dst` exist.
            unsafe { (dst.add(done) as *mut [T; N]).write_unaligned([value(r); N]) };
            done += N;
            r += 1;
        }
        if done < m {
            let v = value(r);
            for j in done..m {
                // SAFETY: slot j < m of `dst` exists.
                unsafe { dst.add(j).write_unaligned(v) };
            }
        }
    }
}

/// Copies `n` elements of `esz` bytes lying `stride` bytes apart from `src`
/// to consecutive places from `dst`.
///
/// # Safety
/// `src` addresses `n` readable elements at that stride; `dst` has room
/// for `n * esz` bytes and overlaps none of them; `esz` is 1, 2, 4 or 8.
unsafe fn gather(src: *const u8, stride: isize, esz: usize, dst: *mut u8, n: usize) {
    /// # Safety
    /// As for `gather`, with `T` of `esz` bytes.
    unsafe fn go<T: Copy>(src: *const u8, stride: isize, dst: *mut u8, n: usize) {
        for j in 0..n {
            // SAFETY: element j of the source and slot j of `dst` exist
            // (the caller's contract); the source is only element-aligned
            // as seen from here, hence the unaligned read.
            unsafe {
                let v = (src.offset(j as isize * stride) as *const T).read_unaligned();
                (dst as *mut T).add(j).write_unaligned(v);
            }
        }
    }
    // SAFETY: the caller's contract, with T of `esz` bytes; `src` is an
    // element of an operand's strided view, every byte between whose
    // elements is readable, as the runtime's gathers require.
    unsafe {
        match esz {
            1 => go::<u8>(src, stride, dst, n),
            2 => go::<u16>(src, stride, dst, n),
            4 => kiln_runtime::math::kiln_gather_32(
                src as *const u32,
                stride / 4,
                dst as *mut u32,
                n,
            ),
            8 => kiln_runtime::math::kiln_gather_64(
                src as *const u64,
                stride / 8,
                dst as *mut u64,
                n,
            ),
            _ => unreachable!("element sizes are 1, 2, 4 or 8 bytes"),
        }
    }
}

/// Prefetch hints for a block of a strided row ahead of the one being
/// gathered: `at` addresses the row's element `i`, the first of that
/// block, elements lie `stride` bytes apart (either sign) and the row ends
/// before element `end`. Elements at most a cache line apart get every
/// line of the block [`DENSE_AHEAD`] elements on; sparser ones each
/// element's line [`SPARSE_AHEAD`] elements on. Only hints, which never
/// fault, so the addresses need not be valid.
fn prefetch_ahead(at: *const u8, stride: isize, i: usize, end: usize) {
    let dense = stride.unsigned_abs() <= LINE_BYTES;
    let a = (i + if dense { DENSE_AHEAD } else { SPARSE_AHEAD }).min(end);
    let n = (a + GATHER).min(end) - a;
    let first = at.wrapping_offset((a - i) as isize * stride);
    if n == 0 {
        return;
    }
    if dense {
        // The span's lowest address: the last element's for a negative stride.
        let low = if stride < 0 {
            first.wrapping_offset((n - 1) as isize * stride)
        } else {
            first
        };
        kiln_runtime::mem::kiln_prefetch(low, n * stride.unsigned_abs());
        return;
    }
    for j in 0..n {
        kiln_runtime::mem::kiln_prefetch(first.wrapping_offset(j as isize * stride), 1);
    }
}

/// The byte offsets of consecutive outer rows (row-major over the outer
/// dimensions) in every operand: the first row's from one division per
/// outer dimension, then each next row's by adding the innermost outer
/// dimension's strides and carrying into the outer ones like an odometer.
/// Dividing for every row cost about a quarter of `tanh(X + b)` over rows
/// of 16 elements.
struct RowCursor<'a> {
    /// The outer dimensions: (size, byte stride of each operand).
    outer: &'a [(usize, SmallVec<[isize; 6]>)],
    /// The current row's index in each outer dimension.
    idx: SmallVec<[usize; 4]>,
    /// The current row's byte offset in each operand.
    off: SmallVec<[isize; 6]>,
}

impl<'a> RowCursor<'a> {
    /// At row `r` of `outer` (for `nops` operands).
    fn new(outer: &'a [(usize, SmallVec<[isize; 6]>)], nops: usize, r: usize) -> Self {
        let mut rem = r;
        let mut idx: SmallVec<[usize; 4]> = SmallVec::from_elem(0, outer.len());
        let mut off: SmallVec<[isize; 6]> = SmallVec::from_elem(0, nops);
        for (d, (n, st)) in outer.iter().enumerate().rev() {
            let i = rem % n;
            rem /= n;
            idx[d] = i;
            for (o, s) in off.iter_mut().zip(st) {
                *o += i as isize * s;
            }
        }
        RowCursor { outer, idx, off }
    }

    /// Moves to the next row (past the last one, the offsets are those of
    /// row 0 again: nothing reads them).
    #[inline(always)]
    fn advance(&mut self) {
        for (d, (n, st)) in self.outer.iter().enumerate().rev() {
            self.idx[d] += 1;
            if self.idx[d] < *n {
                for (o, s) in self.off.iter_mut().zip(st) {
                    *o += s;
                }
                return;
            }
            // Wrap this dimension to 0 and carry into the next outer one.
            let back = (*n - 1) as isize;
            for (o, s) in self.off.iter_mut().zip(st) {
                *o -= back * s;
            }
            self.idx[d] = 0;
        }
    }
}

/// The iteration space's dimensions, outermost first, as (size, byte
/// stride of each operand): size-1 dimensions dropped, and each dimension
/// merged into the one outside it where that one steps exactly over it.
///
/// Element-wise kernels (`n_gather` leading inputs, then at least one
/// output) iterate in the memory order of their first output (the
/// dimension where it has the smallest stride innermost): every element is
/// independent, and an output laid out like its inputs
/// (`Exec::alloc_slot_in_order`) then collapses with them into contiguous
/// runs whatever the layout. Other kernels keep the logical order, which
/// their accumulator modes depend on.
fn collapse(strides: &[&[isize]], esz: &[usize], shape: &[usize], n_gather: usize) -> Dims {
    let nops = strides.len();
    let mut order: SmallVec<[usize; 6]> = (0..shape.len()).collect();
    if n_gather > 0 && n_gather < nops {
        order.sort_by_key(|&d| std::cmp::Reverse(strides[n_gather][d].unsigned_abs()));
    }
    let mut dims = Dims::new();
    for &d in &order {
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
    dims
}

/// Collapsed dimensions: (size, byte stride of each operand), outermost first.
type Dims = SmallVec<[(usize, SmallVec<[isize; 6]>); 4]>;

/// The driver behind [`drive`], [`drive_reduce`] and [`drive_elemwise`]
/// (`n_gather`: the number of leading operands that are element-wise
/// inputs, 0 for none; `columns`: a plain reduction's column pass).
#[allow(clippy::too_many_arguments)] // the operand description is four parallel slices
fn drive_impl(
    f: KernelFn,
    ptrs: &[*mut u8],
    strides: &[&[isize]],
    esz: &[usize],
    shape: &[usize],
    par: ParallelOptions,
    acc0: Option<Modes>,
    n_gather: usize,
    columns: Option<ColumnPass>,
) {
    if shape.contains(&0) {
        return;
    }
    let nops = ptrs.len();
    let mut dims = collapse(strides, esz, shape, n_gather);
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
    let outer = dims;
    let rows: usize = outer.iter().map(|d| d.0).product();
    let total = rows * inner_n;
    let base: SmallVec<[usize; 6]> = ptrs.iter().map(|&p| p as usize).collect();
    // Inputs to gather: strided along the inner dimension, while every
    // output is contiguous there (else the kernel's scalar path runs anyway).
    let strided = |k: usize| inner_st[k] != 0 && inner_st[k] != esz[k] as isize;
    let gathered: SmallVec<[usize; 6]> = if (n_gather..nops).all(|k| !strided(k)) && inner_n > 1 {
        (0..n_gather.min(nops)).filter(|&k| strided(k)).collect()
    } else {
        SmallVec::new()
    };
    let row_offset = |r: usize| RowCursor::new(&outer, nops, r).off;
    // Large outputs of the gathered path are written by non-temporal
    // stores from a scratch block (see STREAM_MIN_BYTES).
    let out_bytes: usize = (n_gather..nops).map(|k| esz[k]).sum::<usize>() * total;
    let stream_out = !gathered.is_empty() && out_bytes >= STREAM_MIN_BYTES;
    // Rows gathered side by side in bands (see GATHER_BAND): when some
    // gathered input's elements lie more than a cache line apart along a
    // row but next to each other from row to row (`X + X.T`), a band of
    // rows reads each of that input's lines once for all its rows.
    let band = match outer.last() {
        Some((_, row_st))
            if gathered
                .iter()
                .any(|&k| inner_st[k].unsigned_abs() > LINE_BYTES) =>
        {
            let adjacent = gathered.iter().all(|&k| row_st[k].unsigned_abs() <= esz[k]);
            if adjacent {
                GATHER_BAND
            } else {
                1
            }
        }
        _ => 1,
    };
    let run_gathered = |r0: usize, r1: usize, i0: usize, i1: usize| {
        // One scratch block per gathered input (u64s: aligned for every dtype).
        let mut scratch: Vec<Vec<u64>> = gathered.iter().map(|_| vec![0u64; GATHER]).collect();
        let mut st: SmallVec<[isize; 6]> = inner_st.clone();
        for &k in &gathered {
            st[k] = esz[k] as isize;
        }
        let mut q: SmallVec<[*mut u8; 6]> = SmallVec::from_elem(std::ptr::null_mut(), nops);
        // With `stream_out`: one scratch block per output, and the outputs'
        // real addresses for the current block.
        let mut out_scratch: Vec<Vec<u64>> = if stream_out {
            (n_gather..nops).map(|_| vec![0u64; GATHER]).collect()
        } else {
            Vec::new()
        };
        let mut real: SmallVec<[*mut u8; 6]> = SmallVec::from_elem(std::ptr::null_mut(), nops);
        // Elements i..i + m of the row at offsets `off`: gathered, run,
        // streamed out.
        let mut run_block = |off: &[isize], i: usize, m: usize, ahead: bool| {
            for k in 0..nops {
                q[k] = (base[k] as isize + off[k] + i as isize * inner_st[k]) as *mut u8;
            }
            for (g, &k) in gathered.iter().enumerate() {
                let dst = scratch[g].as_mut_ptr() as *mut u8;
                // SAFETY: elements i..i+m of this row of input k are in
                // bounds (every operand covers `shape`); the scratch block
                // holds GATHER >= m elements of at most 8 bytes and is
                // owned by this closure call.
                unsafe { gather(q[k], inner_st[k], esz[k], dst, m) };
                if ahead {
                    prefetch_ahead(q[k], inner_st[k], i, i1);
                }
                q[k] = dst;
            }
            if stream_out {
                for k in n_gather..nops {
                    real[k] = q[k];
                    q[k] = out_scratch[k - n_gather].as_mut_ptr() as *mut u8;
                }
            }
            // SAFETY: outputs and ungathered inputs address elements
            // i..i+m of this row (in bounds, as above), or outputs their
            // scratch blocks of GATHER >= m elements; gathered inputs
            // address their m contiguous scratch elements; chunks handed
            // to other threads write disjoint output elements.
            unsafe { f(q.as_ptr(), st.as_ptr(), m) };
            if stream_out {
                for k in n_gather..nops {
                    // SAFETY: output k's elements i..i+m of this row are
                    // contiguous (the gather path's condition) and in
                    // bounds; its scratch block holds the m elements the
                    // kernel just wrote, and does not overlap the output.
                    unsafe { kiln_runtime::mem::copy_streaming(real[k], q[k], m * esz[k]) };
                }
            }
        };
        // The first block ends where output `n_gather`'s elements reach a
        // cache line, so that every later block starts on one (GATHER
        // elements are whole lines of any dtype): a streamed block that
        // starts or ends inside a line leaves it to plain stores and
        // partial non-temporal writes. A chunk cut from the range at an
        // arbitrary element made every block straddle lines: the step-2
        // layout case 4.0-4.3 → 5.7-6.4 ms on two threads (Intel Xeon).
        let lead = |off: &[isize]| {
            if !stream_out {
                return GATHER;
            }
            let line_elems = LINE_BYTES / esz[n_gather];
            let addr = base[n_gather] as isize + off[n_gather] + i0 as isize * inner_st[n_gather];
            match (line_elems - (addr as usize / esz[n_gather]) % line_elems) % line_elems {
                0 => GATHER,
                l => l,
            }
        };
        let mut rows = RowCursor::new(&outer, nops, r0);
        let mut r = r0;
        let mut offs: SmallVec<[SmallVec<[isize; 6]>; GATHER_BAND]> = SmallVec::new();
        while r < r1 {
            // The rows of this band, which share their first block's end.
            offs.clear();
            let first = lead(&rows.off);
            while r < r1 && offs.len() < band && (offs.is_empty() || lead(&rows.off) == first) {
                offs.push(rows.off.clone());
                rows.advance();
                r += 1;
            }
            let mut i = i0;
            let mut block = first;
            while i < i1 {
                let m = block.min(i1 - i);
                block = GATHER;
                // The band's first row asks for the lines ahead (the
                // band's other rows read the same lines).
                for (b, off) in offs.iter().enumerate() {
                    run_block(off, i, m, b == 0);
                }
                i += m;
            }
        }
        if stream_out {
            // Before the launcher's synchronisation hands the outputs on.
            kiln_runtime::mem::store_fence();
        }
    };
    // The column pass's batch: the pass, the row count of the innermost
    // outer dimension and the input's byte stride along it, when that
    // dimension is reduced and both operands are contiguous along the
    // inner one (column mode).
    let batch = match (columns, outer.last()) {
        (Some(pass), Some((rows_d, st)))
            if nops == 2
                && st[0] == 0
                && inner_st[0] == esz[0] as isize
                && inner_st[1] == esz[1] as isize =>
        {
            Some((pass, *rows_d, st[1] / esz[1] as isize))
        }
        _ => None,
    };
    // An element-wise operation small enough to stay in cache runs in
    // calls that do not prefetch (a reduction's accumulator row must not be
    // cut: its sums would add in another order).
    let op_bytes = total.saturating_mul(esz.iter().sum::<usize>());
    let piece = if acc0.is_none() && op_bytes <= IN_CACHE_BYTES {
        IN_CACHE_PIECE
    } else {
        usize::MAX
    };
    let run_rows = |r0: usize, r1: usize, i0: usize, i1: usize| {
        if !gathered.is_empty() {
            return run_gathered(r0, r1, i0, i1);
        }
        if let Some((pass, rows_d, row_stride)) = batch {
            let mut r = r0;
            while r < r1 {
                // The rest of this run of the innermost outer dimension.
                let take = (rows_d - r % rows_d).min(r1 - r);
                let off = row_offset(r);
                let acc = (base[0] as isize + off[0] + i0 as isize * inner_st[0]) as *mut u8;
                let x = (base[1] as isize + off[1] + i0 as isize * inner_st[1]) as *const u8;
                // SAFETY: rows r..r + take share one accumulator row (stride
                // 0 along that dimension) and lie `row_stride` elements apart
                // in the input; elements i0..i1 of each are in bounds (every
                // operand covers `shape`), contiguous in both operands; the
                // accumulators are kiln's own buffer, not overlapping the
                // input; chunks on other threads own disjoint accumulators.
                unsafe { pass(acc, x, i1 - i0, take, row_stride) };
                r += take;
            }
            return;
        }
        let mut p: SmallVec<[*mut u8; 6]> = SmallVec::from_elem(std::ptr::null_mut(), nops);
        let mut rows = RowCursor::new(&outer, nops, r0);
        for _ in r0..r1 {
            let mut i = i0;
            while i < i1 {
                let m = piece.min(i1 - i);
                for k in 0..nops {
                    p[k] = (base[k] as isize + rows.off[k] + i as isize * inner_st[k]) as *mut u8;
                }
                // SAFETY: every operand covers `shape` with these strides
                // (checked by the caller), so elements i..i + m of this row
                // are in bounds; chunks handed to other threads write
                // disjoint output elements.
                unsafe { f(p.as_ptr(), inner_st.as_ptr(), m) };
                i += m;
            }
            rows.advance();
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
        // One chunk per thread: each sweeps the rows over the widest
        // contiguous run of columns it can (narrower chunks made two
        // threads slower than one on a 2000 x 2000 column sum).
        let grain_cols = par
            .grain
            .div_ceil(rows)
            .max(inner_n.div_ceil(threads))
            .max(16);
        kiln_runtime::parallel::parallel_for(inner_n, grain_cols, &|s, e| run_rows(0, rows, s, e));
    } else {
        run_rows(0, rows, 0, inner_n);
    }
}

/// Runs reduction `kernel` sequentially over `shape` into the single
/// accumulator element at `acc` (stride 0 in every dimension: row mode,
/// which every kernel of a reduction over all axes handles).
pub(super) fn drive_full(
    code: &JitCode,
    kernel: usize,
    acc: *mut u8,
    ptrs: &[*mut u8],
    strides: &[&[isize]],
    esz: &[usize],
    shape: &[usize],
) {
    // On the stack: a chunked full reduction calls this once per chunk of
    // 2^16 elements (BENCHMARKS.md, thirty-sixth session).
    let zeros: SmallVec<[isize; 4]> = SmallVec::from_elem(0, shape.len());
    let all_ptrs: SmallVec<[*mut u8; 6]> =
        std::iter::once(acc).chain(ptrs.iter().copied()).collect();
    let all_strides: SmallVec<[&[isize]; 6]> = std::iter::once(&zeros[..])
        .chain(strides.iter().copied())
        .collect();
    let all_esz: SmallVec<[usize; 6]> = std::iter::once(8).chain(esz.iter().copied()).collect();
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
        Some(Modes::Row),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{DType, FunctionGraph};

    /// Short rows are planned when some input does not run on from row to
    /// row: a row repeated everywhere is read from a buffer, other inputs
    /// gathered; outputs must run on; long rows, or operands that all run
    /// on, stay with the plain driver.
    #[test]
    fn short_rows_plan_reads_repeated_rows_from_a_buffer_and_gathers_the_rest() {
        use Access::{Flat, Gathered, Repeated};
        let plan = |shape: &[usize], strides: &[&[isize]], n_inputs: usize| {
            let esz = vec![8; strides.len()];
            ShortRows::plan(strides, &esz, shape, n_inputs).map(|t| t.access.into_vec())
        };
        // X (1000 x 4) + b (4) -> out.
        let x: &[isize] = &[4, 1];
        assert_eq!(
            plan(&[1000, 4], &[x, &[0, 1], x], 2),
            Some(vec![Flat(8), Repeated, Flat(8)])
        );
        // X * c for c of shape (1000, 1), and a slice X[:, :4] of rows of 8.
        assert_eq!(
            plan(&[1000, 4], &[x, &[1, 0], x], 2),
            Some(vec![Flat(8), Gathered, Flat(8)])
        );
        assert_eq!(
            plan(&[1000, 4], &[&[8, 1], x], 1),
            Some(vec![Gathered, Flat(8)])
        );
        // A scalar broadcast runs on (stride 0 throughout); nothing else to do.
        assert_eq!(plan(&[1000, 4], &[x, &[0, 0], x], 2), None);
        // Rows as long as SHORT_ROW stay with the plain driver.
        let n = SHORT_ROW as isize;
        assert_eq!(
            plan(&[10, SHORT_ROW], &[&[n, 1], &[0, 1], &[n, 1]], 2),
            None
        );
        // A row that differs between outer positions (c of shape (3, 1, 4)) is gathered.
        let x3: &[isize] = &[2800, 4, 1];
        assert_eq!(
            plan(&[3, 700, 4], &[x3, &[4, 0, 1], x3], 2),
            Some(vec![Flat(8), Gathered, Flat(8)])
        );
        // An output whose rows do not run on: row by row.
        assert_eq!(plan(&[1000, 4], &[x, &[0, 1], &[8, 1]], 2), None);
    }

    /// Short reduced rows are planned when the kernel has column mode, the
    /// row length is under SHORT_REDUCE and every dimension outside the
    /// rows is kept; inputs strided along the rows are gathered.
    #[test]
    fn short_reduce_plans_short_reduced_rows_under_kept_dimensions() {
        let plan = |shape: &[usize], strides: &[&[isize]], modes: Modes| {
            let esz = vec![8; strides.len()];
            ShortReduce::plan(strides, &esz, shape, modes)
                .map(|t| (t.space.n, t.space.rows, t.gathered.to_vec()))
        };
        // acc (1000) <- sum over rows of 4 of X (1000 x 4), times b (4).
        let (acc, x, b): (&[isize], &[isize], &[isize]) = (&[1, 0], &[4, 1], &[0, 1]);
        assert_eq!(
            plan(&[1000, 4], &[acc, x, b], Modes::Both),
            Some((4, 1000, vec![false, true, false]))
        );
        assert_eq!(
            plan(&[1000, 4], &[acc, x], Modes::Column),
            Some((4, 1000, vec![false, true]))
        );
        // Row mode only, rows of SHORT_REDUCE, or a kept innermost dimension.
        assert_eq!(plan(&[1000, 4], &[acc, x], Modes::Row), None);
        let n = SHORT_REDUCE as isize;
        assert_eq!(
            plan(&[1000, SHORT_REDUCE], &[acc, &[n, 1]], Modes::Both),
            None
        );
        assert_eq!(plan(&[4, 1000], &[&[0, 1], &[1000, 1]], Modes::Both), None);
        // A Fortran-ordered X is contiguous along the rows: not gathered.
        assert_eq!(
            plan(&[1000, 4], &[acc, &[1, 1000]], Modes::Both),
            Some((4, 1000, vec![false, false]))
        );
        // An outer dimension reduced too (blocks would share accumulators).
        assert_eq!(
            plan(&[3, 100, 4], &[&[0, 1, 0], &[400, 4, 1]], Modes::Both),
            None
        );
    }

    /// Stepping the cursor from any row visits the offsets that dividing
    /// each row's index gives (one, two and three outer dimensions, with
    /// zero, negative and broadcast strides; wraps in every dimension).
    #[test]
    fn row_cursor_steps_through_the_offsets_that_division_gives() {
        let dims = |v: &[(usize, [isize; 2])]| -> Vec<(usize, SmallVec<[isize; 6]>)> {
            v.iter()
                .map(|(n, st)| (*n, st.iter().copied().collect()))
                .collect()
        };
        let cases = [
            dims(&[(7, [56, 0])]),
            dims(&[(3, [-96, 8]), (4, [24, 0])]),
            dims(&[(2, [480, 0]), (3, [160, -40]), (5, [32, 8])]),
        ];
        for outer in &cases {
            let rows: usize = outer.iter().map(|d| d.0).product();
            // Offsets by division, as the cursor starts.
            let by_division = |r: usize| {
                let mut rem = r;
                let mut off = [0isize; 2];
                for (n, st) in outer.iter().rev() {
                    let i = rem % n;
                    rem /= n;
                    for k in 0..2 {
                        off[k] += i as isize * st[k];
                    }
                }
                off
            };
            for start in [0, 1, rows / 2, rows - 1] {
                let mut c = RowCursor::new(outer, 2, start);
                for r in start..rows {
                    assert_eq!(
                        c.off.as_slice(),
                        by_division(r),
                        "{outer:?}, row {r} from {start}"
                    );
                    c.advance();
                }
            }
        }
    }
    use crate::linker::codegen::jit::CodegenOptions;
    use crate::linker::compile::compile_plan;
    use crate::linker::plan::step::Step;
    use crate::tensor::tensor;

    /// The kernel and modes of the one `Reduce` step of `sum(x, axes)`
    /// for `x` of static `shape`, with the code holding it.
    fn sum_kernel(shape: &[Option<usize>], axes: &[isize]) -> (JitCode, usize, Modes) {
        let x = tensor("x", DType::F64, shape);
        let r = x.sum(axes).unwrap();
        let fg = FunctionGraph::new(&[x], &[r]).unwrap();
        let (plan, code, _) = compile_plan(&fg, &CodegenOptions::default()).unwrap();
        let (kernel, modes) = plan
            .steps
            .iter()
            .find_map(|(s, _, _)| match s {
                Step::Reduce(r) => Some((r.kernel, r.modes)),
                _ => None,
            })
            .expect("a Reduce step");
        (code, kernel, modes)
    }

    /// Runs `kernel` over four `x` elements with accumulator strides `acc_st`.
    fn run(code: &JitCode, kernel: usize, modes: Modes, acc_st: isize) -> Vec<f64> {
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

    /// The (row length, rows, row stride) of each call of [`recording_sum`].
    static CALLS: std::sync::Mutex<Vec<(usize, usize, isize)>> = std::sync::Mutex::new(Vec::new());

    /// A column pass (f64 sum) that records its calls in [`CALLS`].
    unsafe extern "C" fn recording_sum(
        acc: *mut u8,
        x: *const u8,
        n: usize,
        rows: usize,
        st: isize,
    ) {
        CALLS.lock().unwrap().push((n, rows, st));
        let (acc, x) = (acc as *mut f64, x as *const f64);
        for r in 0..rows as isize {
            for j in 0..n {
                // SAFETY: the driver's contract for a column pass.
                unsafe { *acc.add(j) += *x.offset(r * st).add(j) };
            }
        }
    }

    #[test]
    fn drive_reduce_hands_runs_of_reduced_rows_to_the_column_pass() {
        // sum(x, axis=1) of a (2, 5, 4) array: per outer index, one call
        // with the 5 reduced rows, 4 elements apart.
        let (code, k, modes) = sum_kernel(&[None, None, Some(4)], &[1]);
        let x: Vec<f64> = (0..40).map(f64::from).collect();
        let mut acc = [0.0f64; 8];
        CALLS.lock().unwrap().clear();
        drive_reduce(
            jit_fn(&code, k),
            Some(recording_sum),
            &[acc.as_mut_ptr() as *mut u8, x.as_ptr() as *mut u8],
            &[&[4, 0, 1], &[20, 4, 1]],
            &[8, 8],
            &[2, 5, 4],
            ParallelOptions::default(),
            modes,
        );
        assert_eq!(*CALLS.lock().unwrap(), [(4, 5, 4), (4, 5, 4)]);
        let want: Vec<f64> = (0..8)
            .map(|i| {
                (0..5)
                    .map(|r| f64::from((i / 4) * 20 + r * 4 + i % 4))
                    .sum()
            })
            .collect();
        assert_eq!(acc.to_vec(), want);
    }

    #[test]
    fn drive_runs_a_kernel_only_in_modes_it_has() {
        // A row-only kernel given a column layout: one element per call.
        let (code, k, modes) = sum_kernel(&[None], &[0]);
        assert_eq!(modes, Modes::Row);
        assert_eq!(run(&code, k, modes, 1), [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(run(&code, k, modes, 0), [10.0, 0.0, 0.0, 0.0]);
        // A column-only kernel given a row layout.
        let (code, k, modes) = sum_kernel(&[None, Some(4)], &[0]);
        assert_eq!(modes, Modes::Column);
        assert_eq!(run(&code, k, modes, 0), [10.0, 0.0, 0.0, 0.0]);
        assert_eq!(run(&code, k, modes, 1), [1.0, 2.0, 3.0, 4.0]);
    }
}
