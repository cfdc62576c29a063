//! Execution of `cumsum` / `cumprod` (`Op::CumReduce`): the input in
//! standard layout seen as `(outer, n, inner)` around the axis (`axis =
//! None`: one line of every element in C order). Each output row `k` is
//! row `k - 1` combined with input row `k`, element by element across the
//! `inner` lines, so an axis that is not the innermost is scanned as
//! contiguous vector-friendly rows; along the innermost axis it is a
//! sequential scan per line. A dense input in another order of its axes
//! (transposed, Fortran-ordered) is scanned along an axis in its memory
//! order, into a result laid out in that order too (numpy's `order='K'`).
//! Independent lines are split over the pool's threads (whole lines along
//! the innermost axis, column ranges or whole blocks along another); a
//! single line (`cumsum(x)` of a vector) is scanned on the calling thread.
//!
//! Invariants: partial results are formed in order, exactly as the
//! reference does: floats in their own dtype (`f32` additions and products
//! in `f32`), `bool` and integers widened to `i64` with wrapping; the
//! output is a fresh (or the caller's) dense array of the output dtype,
//! in standard layout or the input's memory order.

use super::state::Exec;
use crate::error::Result;
use crate::graph::DType;
use crate::linker::buffer::permuted_strides;
use crate::linker::plan::step::CumReduceStep;
use crate::ops::ReduceOp;

/// An accumulator type: `f32`, `f64` or `i64`.
trait Acc: Copy {
    /// `a + b` (wrapping for integers).
    fn add(a: Self, b: Self) -> Self;
    /// `a * b` (wrapping for integers).
    fn mul(a: Self, b: Self) -> Self;
}
impl Acc for f64 {
    fn add(a: f64, b: f64) -> f64 {
        a + b
    }
    fn mul(a: f64, b: f64) -> f64 {
        a * b
    }
}
impl Acc for f32 {
    fn add(a: f32, b: f32) -> f32 {
        a + b
    }
    fn mul(a: f32, b: f32) -> f32 {
        a * b
    }
}
impl Acc for i64 {
    fn add(a: i64, b: i64) -> i64 {
        a.wrapping_add(b)
    }
    fn mul(a: i64, b: i64) -> i64 {
        a.wrapping_mul(b)
    }
}

/// Elements a thread's chunk of [`scan_with`] covers at least (256 KB of
/// f64): below it, a scan stays on the calling thread.
const PAR_ELEMENTS: usize = 32 * 1024;

/// Lines scanned together along the innermost axis (see [`scan_with`]).
const LINES_AT_ONCE: usize = 4;

/// Scans `x` (`outer * n * inner` values, read through `get`) into `out`
/// with `A`'s sum (`prod`: product). The combining function is passed to
/// [`scan_with`] as a function item, so each is a loop of its own with the
/// operation inlined (a function pointer would be an indirect call per
/// element).
fn scan<A: Acc + Send + Sync>(
    prod: bool,
    dims: (usize, usize),
    get: impl Fn(usize) -> A + Sync,
    out: &mut [A],
) {
    if prod {
        scan_with(A::mul, dims, get, out)
    } else {
        scan_with(A::add, dims, get, out)
    }
}

/// [`scan`] with the combining function `f`, split over the pool's threads
/// where the lines are independent: along the innermost axis (`inner ==
/// 1`), whole lines per chunk; along another axis, ranges of the `inner`
/// columns of each outer block per chunk (or whole blocks, when the
/// columns are fewer than a chunk). Each element is still formed from the
/// one before it on its line, in order, so results do not depend on the
/// split or the thread count.
fn scan_with<A: Copy + Send + Sync>(
    f: impl Fn(A, A) -> A + Sync,
    (n, inner): (usize, usize),
    get: impl Fn(usize) -> A + Sync,
    out: &mut [A],
) {
    if n == 0 || inner == 0 {
        return;
    }
    let outer = out.len() / (n * inner);
    // Chunks write disjoint parts of `out` (below), through its address.
    let base_addr = out.as_mut_ptr() as usize;
    let at = |i: usize| (base_addr as *mut A).wrapping_add(i);
    if inner == 1 {
        // Along the innermost axis: one running value per line, four lines
        // at a time (their running values are independent chains, so the
        // latency of one line's add or multiply overlaps the others'), the
        // rest of the chunk one line at a time.
        let lines = |l0: usize, l1: usize| {
            let mut o = l0;
            while o + LINES_AT_ONCE <= l1 {
                let bases: [usize; LINES_AT_ONCE] = std::array::from_fn(|j| (o + j) * n);
                let mut acc = bases.map(&get);
                for (&b, &a) in bases.iter().zip(&acc) {
                    // SAFETY: the first element of line b / n (< l1), inside
                    // `out`; the chunks' line ranges are disjoint, so no
                    // other thread touches it.
                    unsafe { at(b).write(a) };
                }
                for k in 1..n {
                    for (&b, a) in bases.iter().zip(acc.iter_mut()) {
                        *a = f(*a, get(b + k));
                        // SAFETY: element k < n of the same line.
                        unsafe { at(b + k).write(*a) };
                    }
                }
                o += LINES_AT_ONCE;
            }
            for o in o..l1 {
                let base = o * n;
                // SAFETY: line `o` is out[base..base + n], inside `out`;
                // the chunks' line ranges are disjoint, so no other thread
                // touches it.
                let line = unsafe { std::slice::from_raw_parts_mut(at(base), n) };
                let mut acc = get(base);
                line[0] = acc;
                for (k, v) in line.iter_mut().enumerate().skip(1) {
                    acc = f(acc, get(base + k));
                    *v = acc;
                }
            }
        };
        kiln_runtime::parallel::parallel_for(outer, (PAR_ELEMENTS / n).max(1), &lines);
        return;
    }
    // Columns i0..i1 of outer block `o`, every row in order.
    let columns = |o: usize, i0: usize, i1: usize| {
        let base = o * n * inner;
        for k in 0..n {
            let row = base + k * inner;
            // SAFETY: out[row + i0..row + i1] lies inside `out` (k < n, i1
            // <= inner, o < outer) and belongs to this chunk alone (chunks
            // take disjoint column ranges of a block, or whole blocks).
            let cur = unsafe { std::slice::from_raw_parts_mut(at(row + i0), i1 - i0) };
            if k == 0 {
                for (j, v) in cur.iter_mut().enumerate() {
                    *v = get(row + i0 + j);
                }
            } else {
                // SAFETY: the previous row's same columns, also this
                // chunk's (written above), disjoint from `cur`.
                let prev = unsafe { std::slice::from_raw_parts(at(row - inner + i0), i1 - i0) };
                for (j, (v, &p)) in cur.iter_mut().zip(prev).enumerate() {
                    *v = f(p, get(row + i0 + j));
                }
            }
        }
    };
    let grain = PAR_ELEMENTS / n;
    if inner >= 2 * grain.max(1) {
        // Wide blocks: their columns split over threads, block by block.
        for o in 0..outer {
            kiln_runtime::parallel::parallel_for(inner, grain.max(8), &|i0, i1| columns(o, i0, i1));
        }
    } else {
        kiln_runtime::parallel::parallel_for(outer, (grain / inner).max(1), &|o0, o1| {
            for o in o0..o1 {
                columns(o, 0, inner);
            }
        });
    }
}

impl Exec<'_> {
    /// Runs a cumulative step.
    pub(super) fn cumulative(&mut self, name: &str, step: &CumReduceStep) -> Result<()> {
        let CumReduceStep {
            op,
            axis,
            input,
            output,
            out,
        } = step;
        let x = self.get(*input);
        let total = x.len();
        let (x, dims, res) = match axis.and_then(|a| x.lines_in_memory_order(a)) {
            Some((order, (_, n, inner))) => {
                // Scanned in memory order into a result laid out alike.
                let mut res = self.alloc(name, *out, &x.shape)?;
                res.strides = permuted_strides(&x.shape, &order);
                (x, (n, inner), res)
            }
            None => {
                let x = self.standard(name, x)?;
                let (n, inner, out_shape) = match *axis {
                    None => (total, 1, vec![total]),
                    Some(a) => (
                        x.shape[a],
                        x.shape[a + 1..].iter().product(),
                        x.shape.to_vec(),
                    ),
                };
                let res = self.alloc_slot(name, *output, *out, &out_shape)?;
                (x, (n, inner), res)
            }
        };
        let prod = *op == ReduceOp::Prod;
        if total > 0 {
            // SAFETY: `x` holds `total` elements of its dtype, contiguous
            // as `outer` blocks of `n` rows of `inner` (standard layout, or
            // a dense one seen in memory order); `res` a fresh (or the
            // caller's standard-layout) dense array of `total` elements of
            // the output dtype laid out alike, never aliasing
            // `x`. The output dtype is `i64` for bool and signed inputs, `u64`
            // for unsigned ones (written as the same 8-byte `i64` bit
            // patterns: wrapping `+` and `*` agree on both readings) and the
            // input's own for floats (`ReduceOp::output_dtype`).
            unsafe {
                macro_rules! ints {
                    ($t:ty) => {{
                        let xs = std::slice::from_raw_parts(x.ptr as *const $t, total);
                        let os = std::slice::from_raw_parts_mut(res.ptr as *mut i64, total);
                        scan(prod, dims, |i| xs[i] as i64, os)
                    }};
                }
                match x.dtype {
                    DType::F64 => {
                        let xs = std::slice::from_raw_parts(x.ptr as *const f64, total);
                        let os = std::slice::from_raw_parts_mut(res.ptr as *mut f64, total);
                        scan(prod, dims, |i| xs[i], os)
                    }
                    DType::F32 => {
                        let xs = std::slice::from_raw_parts(x.ptr as *const f32, total);
                        let os = std::slice::from_raw_parts_mut(res.ptr as *mut f32, total);
                        scan(prod, dims, |i| xs[i], os)
                    }
                    DType::Bool => ints!(u8),
                    DType::U8 => ints!(u8),
                    DType::I8 => ints!(i8),
                    DType::I16 => ints!(i16),
                    DType::U16 => ints!(u16),
                    DType::U32 => ints!(u32),
                    DType::U64 => ints!(u64),
                    DType::I32 => ints!(i32),
                    DType::I64 => ints!(i64),
                }
            }
        }
        self.slots[*output] = Some(res);
        Ok(())
    }
}
