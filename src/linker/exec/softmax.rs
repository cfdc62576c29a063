//! Execution of the softmax family (`Op::Softmax`: `softmax`,
//! `log_softmax`; `Op::LogSumExp`): the input seen as `(outer, n, inner)`
//! around the axis, in standard layout or, for a dense input in another
//! order of its axes (transposed, Fortran-ordered), in that memory order
//! (the output then laid out alike), each lane of `n` values computed by
//! kiln-runtime's softmax passes (`math::softmax`, which states the method
//! and the special values' rules):
//! - lanes of at least a group (`SHORT_ROW` values) get a lane pass each:
//!   along the innermost axis read in place, the pass asking the cache
//!   for the next lane of its chunk meanwhile (so that the next max pass
//!   does not wait on memory; a hint: the same bits), others gathered into
//!   scratch rows first, `LANE_BLOCK` neighbouring lanes at a time (and
//!   softmax lanes scattered back);
//! - a lane along the innermost axis, when there are fewer lanes than
//!   threads (softmax over a whole array), is split into chunks of
//!   `SPLIT_CHUNK` values that the threads share, in the runtime's three
//!   split steps (maximum, exp sum, finish; an `f32` lane takes the first
//!   two in one read of its input, each chunk's sum rescaled to the lane's
//!   maximum);
//! - shorter lanes go to the runtime's short-row pass, several rows per
//!   vector group: `f64` rows along the innermost axis in place, others
//!   gathered into blocks of `SHORT_BLOCK` scratch rows (and scattered
//!   back). A call per lane cost more than such a lane's exps.
//!
//! `f32` lanes are computed in `f64` and rounded once, as the reference
//! does. Lanes are spread over kiln's threads (`parallel_for`) once they
//! hold `PAR_ELEMENTS` elements in all.
//!
//! Invariants: each lane's values are the lane pass's, bit for bit,
//! whichever of the paths computes it, except that a split lane's exp sum
//! is added chunk by chunk: whether a lane is split depends on the thread
//! count, so its last bits may differ between one thread and several (the
//! chunks are fixed: the same bits for any count that splits); the output
//! (`total` elements, or one per lane for logsumexp, lane `l`'s at index
//! `l`) is written exactly once per element, but for softmax's terms
//! scaled in place; an empty softmax lane writes nothing.

use std::sync::atomic::{AtomicU64, Ordering};

use kiln_runtime::math::{
    extreme_f64, lane_f64, narrow_f64, short_rows_f64, split_lane_finish, split_lane_logsumexp,
    split_lane_max, split_lane_rescaled, split_lane_sum, widen_f32, SHORT_ROW,
};

use super::state::Exec;
use crate::error::Result;
use crate::graph::DType;
use crate::linker::buffer::{order_without, permuted_strides};
use crate::linker::plan::step::{LanePass, SoftmaxStep};

/// Short lanes gathered per block (when not read in place).
const SHORT_BLOCK: usize = 256;

/// Lanes side by side (a reduced axis that is not the innermost in
/// memory) gathered per block: a cache line of f64 per element row. The
/// gather and the scatter ask the cache for the next block's line of each
/// row as they pass it (rows a whole row apart defeat the hardware's
/// prefetchers): `softmax(X, axis=0)` on 2000 × 2000, two threads, 11.7
/// → 9.5 ms on an Intel Xeon (`kiln bench`, three alternated rounds; two
/// blocks ahead 9.9-10.1, blocks of 32 or 64 lanes without the hints
/// slower than 8).
const LANE_BLOCK: usize = 8;

/// Lanes of at least this many elements in all go to one thread: below,
/// the launch costs more than it saves.
const PAR_ELEMENTS: usize = 32 * 1024;

/// The chunk of a split lane (a lane along the innermost axis, when there
/// are fewer lanes than threads, as `softmax(X)` over all of `X`): a fixed
/// size, so a lane's sum does not depend on the thread count, and the two
/// `f64` scratch chunks of an `f32` lane stay in L1. The lane was computed
/// by one thread before, its `f32` form through two lane-sized `f64`
/// vectors allocated per call: `exp(xf) / sum(exp(xf))` on 2000 × 2000
/// `f32`, two threads, 46-61 → 7.9-8.6 ms; in `f64` 10.2-14.5 → 4.3-5.5;
/// `logsumexp(y, axis=None)` 4.9-5.4 → 2.2-2.3 (`kiln bench`, three
/// alternated rounds, AVX-512; AVX2 forced: 48-51 → 10.2-11.9 and
/// 17.8-20.4 → 7.5-10.6).
const SPLIT_CHUNK: usize = 2 * 1024;

impl Exec<'_> {
    /// Runs a step of the softmax family.
    pub(super) fn softmax(&mut self, name: &str, step: &SoftmaxStep) -> Result<()> {
        let SoftmaxStep {
            axis,
            pass,
            input,
            output,
        } = step;
        let x = self.get(*input);
        let shape = x.shape.to_vec();
        let total = x.len();
        let pass = *pass;
        let reduces = pass == LanePass::LogSumExp;
        let out_shape: Vec<usize> = match (reduces, *axis) {
            (false, _) => shape.clone(),
            (true, None) => Vec::new(),
            (true, Some(a)) => [&shape[..a], &shape[a + 1..]].concat(),
        };
        let (x, (outer, n, inner), out) =
            match axis.and_then(|a| Some((a, x.lines_in_memory_order(a)?))) {
                Some((a, (order, dims))) => {
                    // Lanes in memory order; the output laid out in that order
                    // (logsumexp: its kept axes').
                    let out_order = if reduces {
                        order_without(&order, a)
                    } else {
                        order
                    };
                    let mut out = self.alloc(name, x.dtype, &out_shape)?;
                    out.strides = permuted_strides(&out_shape, &out_order);
                    (x, dims, out)
                }
                None => {
                    let x = self.standard(name, x)?;
                    let dims = match *axis {
                        None => (1, total, 1),
                        Some(a) => (
                            shape[..a].iter().product(),
                            shape[a],
                            shape[a + 1..].iter().product(),
                        ),
                    };
                    let out = self.alloc_slot(name, *output, x.dtype, &out_shape)?;
                    (x, dims, out)
                }
            };
        let lanes = outer * inner;
        let layout = Lanes {
            // Addresses as integers, so the closure can cross into the pool.
            x: x.ptr as usize,
            out: out.ptr as usize,
            dtype: x.dtype,
            n,
            inner,
            out_len: if reduces { 1 } else { n },
            reduces,
        };
        // SAFETY: `x` holds `total` = outer·n·inner elements of the (float)
        // dtype `layout` names, contiguous in the order (outer, n, inner)
        // (standard layout, or a dense one seen in its memory order), `out`
        // is a dense array of `out_shape` (`total` elements, or `lanes` for
        // logsumexp) of the same dtype, laid out in the lanes' order; `out`
        // is fresh (or the caller's destination) and never aliases `x`. `parallel_for` hands out disjoint lane ranges within
        // [0, lanes), and distinct lanes write disjoint elements.
        let run = |s: usize, e: usize| unsafe { layout.run(s, e, pass) };
        // Empty lanes: nothing to normalise; logsumexp's is `log(0)`.
        let threads = kiln_runtime::parallel::num_threads();
        if inner == 1 && lanes < threads && n >= 2 * PAR_ELEMENTS {
            for l in 0..lanes {
                // SAFETY: as for `run`; the lanes go one after another.
                unsafe { layout.split_lane(l, pass) };
            }
        } else if lanes > 0 && (n > 0 || reduces) {
            let grain = (PAR_ELEMENTS / n.max(1)).max(1);
            kiln_runtime::parallel::parallel_for(lanes, grain, &run);
        }
        self.slots[*output] = Some(out);
        Ok(())
    }
}

/// One step of a split lane over one chunk: its values (as `f64`), its
/// output values (absent when the step reduces), its index.
type ChunkStep<'a> = dyn Fn(&[f64], Option<&mut [f64]>, usize) + Sync + 'a;

/// The lanes of a softmax step's input and output (see the module header):
/// lane `l` is (o, i) = (l / inner, l % inner), its `n` input elements at
/// `o·n·inner + i + k·inner` (k < n), its `out_len` output elements at the
/// same places (softmax) or at index `l` (logsumexp, `out_len` 1).
struct Lanes {
    /// The input's and the output's first elements.
    x: usize,
    out: usize,
    /// Their dtype (`F64` or `F32`).
    dtype: DType,
    n: usize,
    inner: usize,
    /// Output values per lane: `n`, or 1 when the step reduces.
    out_len: usize,
    /// Whether the step reduces (logsumexp).
    reduces: bool,
}

impl Lanes {
    /// The input index of lane `l`'s first element, and the output index of
    /// its first value.
    fn bases(&self, l: usize) -> (usize, usize) {
        let base = (l / self.inner) * self.n * self.inner + l % self.inner;
        (base, if self.reduces { l } else { base })
    }

    /// Computes `pass` over lanes [s, e).
    ///
    /// # Safety
    /// The pointers and sizes describe arrays as the module header says,
    /// `e` is at most the lane count, and no other thread writes lanes
    /// [s, e) of the output meanwhile.
    unsafe fn run(&self, s: usize, e: usize, pass: LanePass) {
        let (n, inner) = (self.n, self.inner);
        let in_place = self.dtype == DType::F64 && inner == 1;
        if (1..SHORT_ROW).contains(&n) {
            if in_place {
                // SAFETY: lanes [s, e) along the innermost axis are the
                // (e - s)·n elements from s·n; their output values the
                // (e - s)·out_len from s·out_len (both below the arrays'
                // ends, caller contract).
                unsafe {
                    let xs =
                        std::slice::from_raw_parts((self.x as *const f64).add(s * n), (e - s) * n);
                    let os = std::slice::from_raw_parts_mut(
                        (self.out as *mut f64).add(s * self.out_len),
                        (e - s) * self.out_len,
                    );
                    short_rows_f64(xs, n, os, pass);
                }
                return;
            }
            let mut xs = vec![0.0f64; SHORT_BLOCK * n];
            let mut os = vec![0.0f64; SHORT_BLOCK * self.out_len];
            for b in (s..e).step_by(SHORT_BLOCK) {
                let count = (e - b).min(SHORT_BLOCK);
                for (k, l) in (b..b + count).enumerate() {
                    // SAFETY: lane l < e (caller contract).
                    unsafe { self.gather(l, 1, &mut xs[k * n..(k + 1) * n]) };
                }
                short_rows_f64(&xs[..count * n], n, &mut os[..count * self.out_len], pass);
                for (k, l) in (b..b + count).enumerate() {
                    // SAFETY: lane l < e (caller contract).
                    unsafe { self.scatter(l, 1, &os[k * self.out_len..(k + 1) * self.out_len]) };
                }
            }
            return;
        }
        if in_place {
            for l in s..e {
                let (base, ob) = self.bases(l);
                // SAFETY: lane l's n elements from `base` (inner == 1) and
                // its out_len values from `ob` are inside the arrays; the
                // next lane of the chunk (l + 1 < e) is the next n
                // elements, only a prefetch hint.
                unsafe {
                    let xp = self.x as *const f64;
                    let xl: &[f64] = if n == 0 {
                        &[]
                    } else {
                        std::slice::from_raw_parts(xp.add(base), n)
                    };
                    let ol = std::slice::from_raw_parts_mut(
                        (self.out as *mut f64).add(ob),
                        self.out_len,
                    );
                    let next = (l + 1 < e && n > 0)
                        .then(|| std::slice::from_raw_parts(xp.add(base + n), n));
                    lane_f64(xl, ol, pass, next);
                }
            }
            return;
        }
        // Lanes side by side (inner > 1) are gathered LANE_BLOCK at a time:
        // the block's k-th elements lie next to each other, one stretch of
        // memory (a cache line of f64) instead of a line per element and
        // lane. A block never spans two outer positions, so it holds at
        // most `inner` lanes: `f32` lanes along the innermost axis are
        // converted one at a time, into scratch of one lane.
        let out_len = self.out_len;
        let block = LANE_BLOCK.min(inner);
        let mut xs = vec![0.0f64; block * n];
        let mut os = vec![0.0f64; block * out_len];
        let mut l = s;
        while l < e {
            let count = LANE_BLOCK.min(e - l).min(inner - l % inner);
            // SAFETY: lanes l..l + count are below e (caller contract) and
            // within one outer position (l % inner + count <= inner).
            unsafe { self.gather(l, count, &mut xs) };
            for b in 0..count {
                let ol = &mut os[b * out_len..(b + 1) * out_len];
                lane_f64(&xs[b * n..(b + 1) * n], ol, pass, None);
            }
            // SAFETY: as above.
            unsafe { self.scatter(l, count, &os) };
            l += count;
        }
    }

    /// Computes `pass` over lane `l` (along the innermost axis) split into
    /// chunks of [`SPLIT_CHUNK`] values, spread over the threads, in the
    /// runtime's three steps (`split_lane_max`, `split_lane_sum`, then
    /// `split_lane_finish` or `split_lane_logsumexp`): `f32` chunks are
    /// converted to `f64` scratch at each step (softmax computes their terms
    /// again in the last step rather than keep a lane of `f64` terms), `f64`
    /// softmax keeps its terms in the output between the last two steps.
    /// An `f32` lane takes the first two steps in one pass over its chunks
    /// (`split_lane_rescaled`), one read of the input fewer:
    /// `softmax(xf, axis=None)` 6.7-7.4 → 6.1-6.9 ms, `logsumexp(xf,
    /// axis=None)` 2.38-2.46 → 1.95-2.13 (2000 × 2000, `kiln bench`, three
    /// alternated rounds); `f64` lanes keep the exact two-step sum.
    ///
    /// # Safety
    /// As [`run`](Lanes::run) for lane `l` alone, with `inner == 1`.
    unsafe fn split_lane(&self, l: usize, pass: LanePass) {
        let n = self.n;
        let (base, ob) = self.bases(l);
        let chunks = n.div_ceil(SPLIT_CHUNK);
        let part = |c: usize| (c * SPLIT_CHUNK, ((c + 1) * SPLIT_CHUNK).min(n));
        let parts: Vec<AtomicU64> = (0..chunks).map(|_| AtomicU64::new(0)).collect();
        // Runs `step(chunk values as f64, output chunk or None, chunk index)`
        // on every chunk, in parallel; `f32` chunks converted into scratch,
        // whose output the step writes to `tmp` and this rounds back.
        let each = |step: &ChunkStep| {
            kiln_runtime::parallel::parallel_for(chunks, 1, &|s, e| {
                let mut xs = Vec::new();
                let mut tmp = Vec::new();
                for c in s..e {
                    let (a, b) = part(c);
                    // SAFETY: elements base + a .. base + b of lane l are in
                    // the input (a < b <= n), and so are their outputs from
                    // ob + a when the pass writes per element; chunks are
                    // disjoint, and no other thread writes this lane.
                    unsafe {
                        match self.dtype {
                            DType::F64 => {
                                let x = std::slice::from_raw_parts(
                                    (self.x as *const f64).add(base + a),
                                    b - a,
                                );
                                let out = (!self.reduces).then(|| {
                                    std::slice::from_raw_parts_mut(
                                        (self.out as *mut f64).add(ob + a),
                                        b - a,
                                    )
                                });
                                step(x, out, c);
                            }
                            DType::F32 => {
                                let x = std::slice::from_raw_parts(
                                    (self.x as *const f32).add(base + a),
                                    b - a,
                                );
                                xs.resize(b - a, 0.0);
                                tmp.resize(b - a, 0.0);
                                widen_f32(x, &mut xs);
                                step(&xs, Some(&mut tmp), c);
                                if !self.reduces {
                                    let out = std::slice::from_raw_parts_mut(
                                        (self.out as *mut f32).add(ob + a),
                                        b - a,
                                    );
                                    narrow_f64(&tmp, out);
                                }
                            }
                            d => unreachable!("softmax of {d}: type inference admits floats only"),
                        }
                    }
                }
            });
        };
        let load = |c: usize| f64::from_bits(parts[c].load(Ordering::Relaxed));
        let keep = |c: usize, v: f64| parts[c].store(v.to_bits(), Ordering::Relaxed);
        // f64 softmax keeps the terms in its output for the last step.
        let stored = pass == LanePass::Softmax && self.dtype == DType::F64;
        let (m, s) = if self.dtype == DType::F32 {
            // One read of the input for both: each chunk's maximum and its
            // sum at that maximum, rescaled to the lane's maximum when
            // added (`split_lane_rescaled`); the f32 result hides the
            // rescaling's roundings.
            let sums: Vec<AtomicU64> = (0..chunks).map(|_| AtomicU64::new(0)).collect();
            each(&|x, _, c| {
                let mc = extreme_f64(x, true);
                keep(c, mc);
                let sc = split_lane_sum(x, mc, None);
                sums[c].store(sc.to_bits(), Ordering::Relaxed);
            });
            let m = split_lane_max((0..chunks).map(load));
            let sum_of = |c: usize| f64::from_bits(sums[c].load(Ordering::Relaxed));
            (
                m,
                split_lane_rescaled(m, (0..chunks).map(|c| (load(c), sum_of(c)))),
            )
        } else {
            each(&|x, _, c| keep(c, extreme_f64(x, true)));
            let m = split_lane_max((0..chunks).map(load));
            each(&|x, out, c| keep(c, split_lane_sum(x, m, out.filter(|_| stored))));
            (m, (0..chunks).map(load).sum())
        };
        if self.reduces {
            // SAFETY: lane l's one output value is at index ob (caller contract).
            unsafe {
                match self.dtype {
                    DType::F64 => *(self.out as *mut f64).add(ob) = split_lane_logsumexp(m, s),
                    _ => *(self.out as *mut f32).add(ob) = split_lane_logsumexp(m, s) as f32,
                }
            }
            return;
        }
        each(&|x, out, _| {
            if let Some(out) = out {
                split_lane_finish(x, m, s, out, pass, stored);
            }
        });
    }

    /// Reads the `n` input elements of lanes `l .. l + count` into `dst`
    /// (lane `l + b`'s at `dst[b·n..]`), as f64, element `k` of every lane
    /// before element `k + 1` (they lie side by side).
    ///
    /// # Safety
    /// Lanes `l .. l + count` are lanes of the arrays [`run`](Lanes::run)
    /// describes, within one outer position; `dst` holds `count·n` values.
    unsafe fn gather(&self, l: usize, count: usize, dst: &mut [f64]) {
        let (base, _) = self.bases(l);
        let n = self.n;
        // SAFETY: lane l + b's elements are at base + k·inner + b, k < n,
        // b < count (the caller's contract).
        unsafe {
            match self.dtype {
                DType::F64 => {
                    let xp = self.x as *const f64;
                    for k in 0..n {
                        let row = xp.add(base + k * self.inner);
                        // Only a hint: the address need not be in the array.
                        kiln_runtime::mem::kiln_prefetch(
                            row.wrapping_add(LANE_BLOCK) as *const u8,
                            64,
                        );
                        for b in 0..count {
                            dst[b * n + k] = *row.add(b);
                        }
                    }
                }
                // One lane along the innermost axis: n consecutive values,
                // converted at the ISA's full width (`math::convert`).
                DType::F32 if count == 1 && self.inner == 1 => {
                    let xs = std::slice::from_raw_parts((self.x as *const f32).add(base), n);
                    widen_f32(xs, &mut dst[..n]);
                }
                DType::F32 => {
                    let xp = self.x as *const f32;
                    for k in 0..n {
                        let row = xp.add(base + k * self.inner);
                        for b in 0..count {
                            dst[b * n + k] = f64::from(*row.add(b));
                        }
                    }
                }
                d => unreachable!("softmax of {d}: type inference admits floats only"),
            }
        }
    }

    /// Writes the `out_len` output values of lanes `l .. l + count` from
    /// `src` (laid out as [`gather`](Lanes::gather) reads), rounded to the
    /// output dtype.
    ///
    /// # Safety
    /// As [`gather`](Lanes::gather) (`src` holds `count·out_len` values),
    /// and no other thread writes these lanes.
    unsafe fn scatter(&self, l: usize, count: usize, src: &[f64]) {
        let (_, ob) = self.bases(l);
        let (len, step) = (self.out_len, if self.reduces { 1 } else { self.inner });
        // SAFETY: lane l + b's output values are at ob + k·inner + b (or
        // ob + b for logsumexp: lanes' results are consecutive), k <
        // out_len, b < count (the caller's contract).
        unsafe {
            match self.dtype {
                DType::F64 => {
                    let op = self.out as *mut f64;
                    for k in 0..len {
                        let row = op.add(ob + k * step);
                        // Only a hint, as in `gather`.
                        kiln_runtime::mem::kiln_prefetch(
                            row.wrapping_add(LANE_BLOCK) as *const u8,
                            64,
                        );
                        for b in 0..count {
                            *row.add(b) = src[b * len + k];
                        }
                    }
                }
                // One lane's values consecutive (along the innermost axis,
                // or a reduction's one value): one converting loop.
                DType::F32 if count == 1 && step == 1 => {
                    let os = std::slice::from_raw_parts_mut((self.out as *mut f32).add(ob), len);
                    narrow_f64(&src[..len], os);
                }
                DType::F32 => {
                    let op = self.out as *mut f32;
                    for k in 0..len {
                        let row = op.add(ob + k * step);
                        for b in 0..count {
                            *row.add(b) = src[b * len + k] as f32;
                        }
                    }
                }
                d => unreachable!("softmax of {d}: type inference admits floats only"),
            }
        }
    }
}
