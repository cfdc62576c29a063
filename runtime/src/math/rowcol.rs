//! Plain reduction passes for JIT-compiled reduction kernels, compiled by
//! rustc for AVX-512, AVX2+FMA and the baseline target and dispatched at run
//! time ([`isa`]): Cranelift's 128-bit vectors and loop code left these
//! memory-streaming loops well short of memory speed.
//!
//! *Row* passes fold one contiguous row into one value:
//! - `kiln_sum_f64(x, n)` / `kiln_sum_f32(x, n)` = Σ x_i (f32 values
//!   promoted to f64, the accumulator dtype of an f32 sum);
//! - `kiln_dot_f64(x, y, n)` = Σ x_i·y_i (each product rounded, then
//!   added: no fused multiply-add, so every variant gives the same bits);
//! - `kiln_max_<dtype>(x, n)` / `kiln_min_<dtype>(x, n)` and
//!   `kiln_sum_<dtype>(x, n)` for every integer dtype: the extreme, or the
//!   wrapping sum, exact, as the accumulator dtype's integer.
//!
//! The *scaled-rows* pass `kiln_scaled_rows_f64(acc, x, n, rows, stride,
//! s, s_stride)` adds `s_r·x_r[j]` to `acc[j]` for each row `r` in order
//! (a matrix-vector product over contiguous matrix columns).
//!
//! Summation order (invariant, as in `fold`): element `i` goes to lane
//! partial `i mod LANES` in index order, the partials are combined by a
//! fixed halving tree; the order depends only on `n`, never on the variant.
//!
//! *Count* passes count the values of one contiguous row in a class:
//! `kiln_count_<class>_<dtype>(x, n, stop)` for the classes `finite`, `nan`
//! and `inf` of `f64` / `f32` values (`isfinite`, `isnan`, `isinf`): the
//! row pass of `all(isfinite(x))`, `any(isnan(x))` or a count such as
//! `sum(isnan(x))`; for an `all` / `any` (`stop` 1 / 2) they may stop at
//! the chunk that decides it. Counts are exact, so their order does not
//! matter.
//!
//! *Column* passes update one accumulator per element of contiguous rows:
//! `kiln_column_<op>_<dtype>(acc, x, n, rows, row_stride)` sets
//! `acc[j] = op(acc[j], x_r[j])` for `j < n`, for each row `x_r = x +
//! r·row_stride` (elements) in order `r = 0, 1, .. rows - 1`, with `op`
//! one of sum, prod, max, min over f64 accumulators (`f64` or promoted
//! `f32` inputs), a wrapping sum of any integer input over `i64`
//! accumulators (a `u64` sum in their bits), or the max / min of any
//! integer input over `i64` accumulators (`u64` ones for `u64` inputs).
//! Each element is exactly the sequential loop's: a single add /
//! multiply per row, and for max / min the JIT's `nan_max` / `nan_min` (NaN
//! if either is NaN, else the first operand when `acc[j] >= x[j]` (max) /
//! `acc[j] <= x[j]` (min), else the second), so the results are
//! bit-identical to the scalar code. Several rows are folded into a strip
//! of [`COLUMN_STRIP`] accumulators held in registers, [`COLUMN_ROWS`]
//! rows at a time, instead of loading and storing every accumulator once
//! per row: the JIT's kernels pass one row (a block of a fused pre-map),
//! the linker's driver all the reduced rows of a column reduction.

use std::ptr;

// The lane partials and their halving tree are `fold`'s (the same order):
// four AVX2 or two AVX-512 vectors of f64, enough independent add chains
// to cover the add latency.
use super::fold::{halving_sum, short_sum, LANES};

/// An element type whose values enter the f64 accumulator domain exactly.
trait Widen: Copy {
    fn widen(self) -> f64;
}

impl Widen for f64 {
    #[inline(always)]
    fn widen(self) -> f64 {
        self
    }
}

impl Widen for f32 {
    #[inline(always)]
    fn widen(self) -> f64 {
        self as f64
    }
}

/// Σ x_i over `n` values at `x` in the documented order.
///
/// # Safety
/// `x` must be valid for `n` reads.
#[inline(always)]
unsafe fn sum<T: Widen>(x: *const T, n: usize) -> f64 {
    if n < LANES {
        // SAFETY: l < n.
        return short_sum(n, |l| unsafe { *x.add(l) }.widen());
    }
    let mut acc = [0.0f64; LANES];
    let mut i = 0;
    while i + LANES <= n {
        // SAFETY: x[i..i + LANES] is readable (caller contract, i + LANES <= n).
        let v: [T; LANES] = unsafe { ptr::read_unaligned(x.add(i) as *const [T; LANES]) };
        for l in 0..LANES {
            acc[l] += v[l].widen();
        }
        i += LANES;
    }
    for (l, a) in acc.iter_mut().enumerate().take(n - i) {
        // SAFETY: i + l < n.
        *a += unsafe { *x.add(i + l) }.widen();
    }
    halving_sum(&acc)
}

/// Σ x_i·y_i over `n` values at `x` and `y` in the documented order.
///
/// # Safety
/// `x` and `y` must be valid for `n` reads.
#[inline(always)]
unsafe fn dot(x: *const f64, y: *const f64, n: usize) -> f64 {
    if n < LANES {
        // SAFETY: l < n.
        return short_sum(n, |l| unsafe { *x.add(l) * *y.add(l) });
    }
    let mut acc = [0.0f64; LANES];
    let mut i = 0;
    while i + LANES <= n {
        // SAFETY: x[i..i + LANES] and y[i..i + LANES] are readable (caller
        // contract, i + LANES <= n).
        let (u, v) = unsafe {
            (
                ptr::read_unaligned(x.add(i) as *const [f64; LANES]),
                ptr::read_unaligned(y.add(i) as *const [f64; LANES]),
            )
        };
        for l in 0..LANES {
            acc[l] += u[l] * v[l];
        }
        i += LANES;
    }
    for (l, a) in acc.iter_mut().enumerate().take(n - i) {
        // SAFETY: i + l < n.
        *a += unsafe { *x.add(i + l) * *y.add(i + l) };
    }
    halving_sum(&acc)
}

/// A float class of [`count`].
#[derive(Clone, Copy)]
enum Class {
    Finite,
    Nan,
    Inf,
}

/// A float type whose values [`count`] classifies.
trait Classify: Copy {
    fn is(self, class: Class) -> bool;
}

impl Classify for f64 {
    #[inline(always)]
    fn is(self, class: Class) -> bool {
        match class {
            Class::Finite => self.is_finite(),
            Class::Nan => self.is_nan(),
            Class::Inf => self.is_infinite(),
        }
    }
}

impl Classify for f32 {
    #[inline(always)]
    fn is(self, class: Class) -> bool {
        match class {
            Class::Finite => self.is_finite(),
            Class::Nan => self.is_nan(),
            Class::Inf => self.is_infinite(),
        }
    }
}

/// Values [`count`] scans between its checks for an early stop.
const COUNT_CHUNK: usize = 1024;

/// The number of the `n` values at `x` in `class`, or, with `stop` 1 (an
/// `all`) / 2 (an `any`), possibly only of a prefix of them once it holds a
/// value outside / inside the class (checked every [`COUNT_CHUNK`]
/// values): the count is then below `n` / above 0, which decides the
/// reduction as the full count would.
///
/// # Safety
/// `x` must be valid for `n` reads.
#[inline(always)]
unsafe fn count<T: Classify>(x: *const T, n: usize, stop: u32, class: Class) -> u64 {
    if n == 0 {
        // `x` may be null then, which a slice may not.
        return 0;
    }
    // SAFETY: the caller's contract (n > 0 values, so `x` is not null).
    let x = unsafe { std::slice::from_raw_parts(x, n) };
    let (mut seen, mut members) = (0u64, 0u64);
    for chunk in x.chunks(COUNT_CHUNK) {
        // One plain count: LLVM keeps it in vector counters. (Lane counters
        // over groups of LANES made it vectorise across the groups with
        // gathers under AVX-512, ten times slower.)
        members += chunk.iter().filter(|v| v.is(class)).count() as u64;
        seen += chunk.len() as u64;
        if (stop == 1 && members < seen) || (stop == 2 && members > 0) {
            break;
        }
    }
    members
}

/// `acc[j] = f(acc[j], x[j])` for `j < n`.
///
/// # Safety
/// `acc` valid for `n` reads and writes, `x` for `n` reads, not overlapping.
#[inline(always)]
unsafe fn column<A: Copy, T: Copy>(acc: *mut A, x: *const T, n: usize, f: impl Fn(A, T) -> A) {
    // SAFETY: the caller's contract (valid, non-overlapping, n elements);
    // slices let the compiler vectorise without alias checks.
    let (acc, x) = unsafe {
        (
            std::slice::from_raw_parts_mut(acc, n),
            std::slice::from_raw_parts(x, n),
        )
    };
    for (a, &e) in acc.iter_mut().zip(x) {
        *a = f(*a, e);
    }
}

/// Rows [`columns`] folds into one strip of accumulators before storing
/// it (16 gave no gain in a 2000 x 2000 sum; 4 lost up to 30%).
const COLUMN_ROWS: usize = 8;

/// Accumulators per strip of [`columns`]: two AVX-512 or four AVX2 vectors
/// of f64, held in registers across [`COLUMN_ROWS`] rows.
const COLUMN_STRIP: usize = 16;

/// `acc[j] = f(acc[j], x_r[j])` for `j < n`, for rows `x_r = x + r·stride`
/// (elements), `r = 0 .. rows` in order.
///
/// # Safety
/// `acc` valid for `n` reads and writes; each row `x + r·stride` (`r <
/// rows`) valid for `n` reads, none overlapping `acc`.
#[inline(always)]
unsafe fn columns<A: Copy, T: Copy>(
    acc: *mut A,
    x: *const T,
    n: usize,
    rows: usize,
    stride: isize,
    f: impl Fn(A, T) -> A,
) {
    if rows == 1 {
        // SAFETY: the caller's contract, for the one row.
        return unsafe { column(acc, x, n, f) };
    }
    // SAFETY: the caller's contract.
    unsafe { columns_with(acc, x, n, rows, stride, |_| (), |a, e, ()| f(a, e)) }
}

/// [`columns`] with a value per row: `acc[j] = f(acc[j], x_r[j],
/// row(r))` (`row` is called once per row and block of accumulators).
///
/// # Safety
/// As for [`columns`]; `row(r)` is called for `r < rows` only.
#[inline(always)]
unsafe fn columns_with<A: Copy, T: Copy, R: Copy>(
    acc: *mut A,
    x: *const T,
    n: usize,
    rows: usize,
    stride: isize,
    row: impl Fn(usize) -> R,
    f: impl Fn(A, T, R) -> A,
) {
    let mut r = 0;
    while r < rows {
        // The row count of a block is a run-time value on purpose: with a
        // constant one LLVM vectorised across the rows with gathers
        // (five times slower with AVX-512) instead of along them.
        let block = COLUMN_ROWS.min(rows - r);
        let xr = x.wrapping_offset(r as isize * stride);
        let mut j = 0;
        while j + COLUMN_STRIP <= n {
            // SAFETY: accumulators j..j + COLUMN_STRIP and those elements of
            // rows r..r + block exist (the caller's contract); the array
            // read and write are unaligned.
            unsafe {
                let mut a: [A; COLUMN_STRIP] = ptr::read_unaligned(acc.add(j) as *const _);
                let mut xk = xr.add(j);
                for k in 0..block {
                    let v = row(r + k);
                    for (l, al) in a.iter_mut().enumerate() {
                        *al = f(*al, *xk.add(l), v);
                    }
                    xk = xk.wrapping_offset(stride);
                }
                ptr::write_unaligned(acc.add(j) as *mut _, a);
            }
            j += COLUMN_STRIP;
        }
        for j in j..n {
            // SAFETY: j < n, rows r..r + block (the caller's contract).
            unsafe {
                let mut a = *acc.add(j);
                for k in 0..block {
                    a = f(
                        a,
                        *xr.wrapping_offset(k as isize * stride).add(j),
                        row(r + k),
                    );
                }
                *acc.add(j) = a;
            }
        }
        r += block;
    }
}

/// The JIT's NaN-propagating maximum (`max`) or minimum of `a` and `e`.
#[inline(always)]
fn nan_extreme(a: f64, e: f64, max: bool) -> f64 {
    let first = if max { a >= e } else { a <= e };
    if a.is_nan() || e.is_nan() {
        f64::NAN
    } else if first {
        a
    } else {
        e
    }
}

dispatched!(
    /// Returns Σ x_i over the `n` f64 values at `x` (0 for `n == 0`).
    kiln_sum_f64 [sum_f64_avx512, sum_f64_avx2, sum_f64_base] (x: *const f64, n: usize) -> f64 = sum(x, n)
);
dispatched!(
    /// Returns Σ x_i over the `n` f32 values at `x`, in f64 (0 for `n == 0`).
    kiln_sum_f32 [sum_f32_avx512, sum_f32_avx2, sum_f32_base] (x: *const f32, n: usize) -> f64 = sum(x, n)
);
dispatched!(
    /// Returns Σ x_i·y_i over `n` f64 pairs (0 for `n == 0`).
    kiln_dot_f64 [dot_avx512, dot_avx2, dot_base] (x: *const f64, y: *const f64, n: usize) -> f64 = dot(x, y, n)
);
dispatched!(
    /// `acc[j] += s_r·x_r[j]` for `j < n`, for rows `x_r = x + r·stride`
    /// and factors `s_r = s[r·s_stride]`, `r = 0 .. rows` in order (each
    /// product rounded, then added: the same bits from every variant): a
    /// matrix-vector product whose matrix columns are contiguous, one strip
    /// of outputs at a time. `s` is valid for the `rows` factors.
    kiln_scaled_rows_f64 [scaled_rows_avx512, scaled_rows_avx2, scaled_rows_base] (acc: *mut f64, x: *const f64, n: usize, rows: usize, stride: isize, s: *const f64, s_stride: isize) = columns_with(acc, x, n, rows, stride, |r| *s.offset(r as isize * s_stride), |a, e, f| a + f * e)
);
dispatched!(
    /// The number of finite values among the `n` f64 values at `x`
    /// (with `stop` 1 / 2, possibly of a prefix only: see the module docs).
    kiln_count_finite_f64 [cntfin_f64_avx512, cntfin_f64_avx2, cntfin_f64_base] (x: *const f64, n: usize, stop: u32) -> u64 = count(x, n, stop, Class::Finite)
);
dispatched!(
    /// The number of finite values among the `n` f32 values at `x`
    /// (with `stop` 1 / 2, possibly of a prefix only: see the module docs).
    kiln_count_finite_f32 [cntfin_f32_avx512, cntfin_f32_avx2, cntfin_f32_base] (x: *const f32, n: usize, stop: u32) -> u64 = count(x, n, stop, Class::Finite)
);
dispatched!(
    /// The number of NaNs among the `n` f64 values at `x`
    /// (with `stop` 1 / 2, possibly of a prefix only: see the module docs).
    kiln_count_nan_f64 [cntnan_f64_avx512, cntnan_f64_avx2, cntnan_f64_base] (x: *const f64, n: usize, stop: u32) -> u64 = count(x, n, stop, Class::Nan)
);
dispatched!(
    /// The number of NaNs among the `n` f32 values at `x`
    /// (with `stop` 1 / 2, possibly of a prefix only: see the module docs).
    kiln_count_nan_f32 [cntnan_f32_avx512, cntnan_f32_avx2, cntnan_f32_base] (x: *const f32, n: usize, stop: u32) -> u64 = count(x, n, stop, Class::Nan)
);
dispatched!(
    /// The number of infinities among the `n` f64 values at `x`
    /// (with `stop` 1 / 2, possibly of a prefix only: see the module docs).
    kiln_count_inf_f64 [cntinf_f64_avx512, cntinf_f64_avx2, cntinf_f64_base] (x: *const f64, n: usize, stop: u32) -> u64 = count(x, n, stop, Class::Inf)
);
dispatched!(
    /// The number of infinities among the `n` f32 values at `x`
    /// (with `stop` 1 / 2, possibly of a prefix only: see the module docs).
    kiln_count_inf_f32 [cntinf_f32_avx512, cntinf_f32_avx2, cntinf_f32_base] (x: *const f32, n: usize, stop: u32) -> u64 = count(x, n, stop, Class::Inf)
);
dispatched!(
    /// `acc[j] += x_r[j]` for `j < n`, for each row `x_r = x + r·row_stride`
    /// (`r < rows`, in order; f64). Every row must be valid for
    /// `n` reads, and none may overlap `acc`.
    kiln_column_sum_f64 [colsum_f64_avx512, colsum_f64_avx2, colsum_f64_base] (acc: *mut f64, x: *const f64, n: usize, rows: usize, row_stride: isize) = columns(acc, x, n, rows, row_stride, |a, e| a + e)
);
dispatched!(
    /// `acc[j] += x_r[j]` for `j < n`, for each row `x_r = x + r·row_stride`
    /// (`r < rows`, in order; f32 input, f64 accumulators). Every row must be valid for
    /// `n` reads, and none may overlap `acc`.
    kiln_column_sum_f32 [colsum_f32_avx512, colsum_f32_avx2, colsum_f32_base] (acc: *mut f64, x: *const f32, n: usize, rows: usize, row_stride: isize) =
        columns(acc, x, n, rows, row_stride, |a, e: f32| a + e as f64)
);
dispatched!(
    /// `acc[j] *= x_r[j]` for `j < n`, for each row `x_r = x + r·row_stride`
    /// (`r < rows`, in order; f64). Every row must be valid for
    /// `n` reads, and none may overlap `acc`.
    kiln_column_prod_f64 [colprod_f64_avx512, colprod_f64_avx2, colprod_f64_base] (acc: *mut f64, x: *const f64, n: usize, rows: usize, row_stride: isize) = columns(acc, x, n, rows, row_stride, |a, e| a * e)
);
dispatched!(
    /// `acc[j] *= x_r[j]` for `j < n`, for each row `x_r = x + r·row_stride`
    /// (`r < rows`, in order; f32 input, f64 accumulators). Every row must be valid for
    /// `n` reads, and none may overlap `acc`.
    kiln_column_prod_f32 [colprod_f32_avx512, colprod_f32_avx2, colprod_f32_base] (acc: *mut f64, x: *const f32, n: usize, rows: usize, row_stride: isize) =
        columns(acc, x, n, rows, row_stride, |a, e: f32| a * e as f64)
);
dispatched!(
    /// `acc[j] = nan_max(acc[j], x_r[j])` for `j < n`, for each row `x_r = x + r·row_stride`
    /// (`r < rows`, in order; f64). Every row must be valid for
    /// `n` reads, and none may overlap `acc`.
    kiln_column_max_f64 [colmax_f64_avx512, colmax_f64_avx2, colmax_f64_base] (acc: *mut f64, x: *const f64, n: usize, rows: usize, row_stride: isize) =
        columns(acc, x, n, rows, row_stride, |a, e| nan_extreme(a, e, true))
);
dispatched!(
    /// `acc[j] = nan_max(acc[j], x_r[j])` for `j < n`, for each row `x_r = x + r·row_stride`
    /// (`r < rows`, in order; f32 input, f64 accumulators). Every row must be valid for
    /// `n` reads, and none may overlap `acc`.
    kiln_column_max_f32 [colmax_f32_avx512, colmax_f32_avx2, colmax_f32_base] (acc: *mut f64, x: *const f32, n: usize, rows: usize, row_stride: isize) =
        columns(acc, x, n, rows, row_stride, |a, e: f32| nan_extreme(a, e as f64, true))
);
dispatched!(
    /// `acc[j] = nan_min(acc[j], x_r[j])` for `j < n`, for each row `x_r = x + r·row_stride`
    /// (`r < rows`, in order; f64). Every row must be valid for
    /// `n` reads, and none may overlap `acc`.
    kiln_column_min_f64 [colmin_f64_avx512, colmin_f64_avx2, colmin_f64_base] (acc: *mut f64, x: *const f64, n: usize, rows: usize, row_stride: isize) =
        columns(acc, x, n, rows, row_stride, |a, e| nan_extreme(a, e, false))
);
dispatched!(
    /// `acc[j] = nan_min(acc[j], x_r[j])` for `j < n`, for each row `x_r = x + r·row_stride`
    /// (`r < rows`, in order; f32 input, f64 accumulators). Every row must be valid for
    /// `n` reads, and none may overlap `acc`.
    kiln_column_min_f32 [colmin_f32_avx512, colmin_f32_avx2, colmin_f32_base] (acc: *mut f64, x: *const f32, n: usize, rows: usize, row_stride: isize) =
        columns(acc, x, n, rows, row_stride, |a, e: f32| nan_extreme(a, e as f64, false))
);
dispatched!(
    /// `acc[j] = acc[j].wrapping_add(x_r[j])` for `j < n`, for each row `x_r = x + r·row_stride`
    /// (`r < rows`, in order; i64, or the bits of u64). Every row must be valid for
    /// `n` reads, and none may overlap `acc`.
    kiln_column_sum_i64 [colsum_i64_avx512, colsum_i64_avx2, colsum_i64_base] (acc: *mut i64, x: *const i64, n: usize, rows: usize, row_stride: isize) =
        columns(acc, x, n, rows, row_stride, |a: i64, e: i64| a.wrapping_add(e))
);

/// The largest (`max`) or smallest value of the `n` integers at `x`, in
/// the accumulator dtype `A`; `empty` (the reduction's identity) for `n ==
/// 0`. The fold runs in the input's own lanes (rustc vectorises it at the
/// variant's width), so only the result is widened.
///
/// # Safety
/// `x` must be valid for `n` reads.
#[inline(always)]
unsafe fn int_extreme<T: Copy + Ord, A: From<T>>(x: *const T, n: usize, max: bool, empty: A) -> A {
    if n == 0 {
        return empty;
    }
    // SAFETY: `x` is valid for `n > 0` reads (caller contract).
    let v = unsafe { std::slice::from_raw_parts(x, n) };
    A::from(v.iter().fold(v[0], |a, &e| extreme(a, e, max)))
}

/// The larger (`max`) or smaller of two integers: the one step of every
/// integer maximum / minimum pass (`max` is a constant at each of them).
#[inline(always)]
fn extreme<V: Ord>(a: V, e: V, max: bool) -> V {
    if max {
        a.max(e)
    } else {
        a.min(e)
    }
}

/// The integer maximum / minimum row passes, `kiln_<op>_<dtype>(x, n)`:
/// the extreme of one contiguous row ([`int_extreme`]) in the accumulator
/// dtype (`i64`, `u64` for `u64` inputs), the identity (the accumulator
/// dtype's extreme) for an empty row; and [`int_row_symbols`], their
/// (symbol, address) pairs.
macro_rules! int_row_passes {
    ($($name:ident [$a512:ident, $a2:ident, $base:ident] ($acc:ty, $t:ty, $max:literal, $empty:expr)),* $(,)?) => {
        $(
            dispatched!(
                #[doc = concat!("The extreme (maximum if ", stringify!($max), ", else minimum) of the `n` ", stringify!($t), " values at `x` as ", stringify!($acc), " (", stringify!($empty), " for `n == 0`).")]
                $name [$a512, $a2, $base] (x: *const $t, n: usize) -> $acc = int_extreme(x, n, $max, $empty)
            );
        )*

        /// The integer maximum / minimum row passes as (symbol name, address).
        fn int_row_symbols() -> Vec<(&'static str, *const u8)> {
            vec![$((stringify!($name), $name as *const u8)),*]
        }
    };
}

int_row_passes!(
    kiln_max_i64 [max_i64_avx512, max_i64_avx2, max_i64_base] (i64, i64, true, i64::MIN),
    kiln_min_i64 [min_i64_avx512, min_i64_avx2, min_i64_base] (i64, i64, false, i64::MAX),
    kiln_max_u64 [max_u64_avx512, max_u64_avx2, max_u64_base] (u64, u64, true, 0),
    kiln_min_u64 [min_u64_avx512, min_u64_avx2, min_u64_base] (u64, u64, false, u64::MAX),
    kiln_max_i32 [max_i32_avx512, max_i32_avx2, max_i32_base] (i64, i32, true, i64::MIN),
    kiln_min_i32 [min_i32_avx512, min_i32_avx2, min_i32_base] (i64, i32, false, i64::MAX),
    kiln_max_u32 [max_u32_avx512, max_u32_avx2, max_u32_base] (i64, u32, true, i64::MIN),
    kiln_min_u32 [min_u32_avx512, min_u32_avx2, min_u32_base] (i64, u32, false, i64::MAX),
    kiln_max_i16 [max_i16_avx512, max_i16_avx2, max_i16_base] (i64, i16, true, i64::MIN),
    kiln_min_i16 [min_i16_avx512, min_i16_avx2, min_i16_base] (i64, i16, false, i64::MAX),
    kiln_max_u16 [max_u16_avx512, max_u16_avx2, max_u16_base] (i64, u16, true, i64::MIN),
    kiln_min_u16 [min_u16_avx512, min_u16_avx2, min_u16_base] (i64, u16, false, i64::MAX),
    kiln_max_i8 [max_i8_avx512, max_i8_avx2, max_i8_base] (i64, i8, true, i64::MIN),
    kiln_min_i8 [min_i8_avx512, min_i8_avx2, min_i8_base] (i64, i8, false, i64::MAX),
    kiln_max_u8 [max_u8_avx512, max_u8_avx2, max_u8_base] (i64, u8, true, i64::MIN),
    kiln_min_u8 [min_u8_avx512, min_u8_avx2, min_u8_base] (i64, u8, false, i64::MAX),
);

/// `add` folded over the `n` values at `x` from `zero` (in index order).
///
/// # Safety
/// `x` must be valid for `n` reads.
#[inline(always)]
unsafe fn int_sum<T: Copy, A: Copy>(x: *const T, n: usize, zero: A, add: impl Fn(A, T) -> A) -> A {
    if n == 0 {
        // `x` may be null then, which a slice may not.
        return zero;
    }
    // SAFETY: `x` is valid for `n > 0` reads (caller contract).
    let v = unsafe { std::slice::from_raw_parts(x, n) };
    v.iter().fold(zero, |a, &e| add(a, e))
}

/// Integer sum passes: row passes `kiln_sum_<dtype>(x, n)` (the wrapping
/// sum of one contiguous row in the accumulator dtype, 0 for an empty row)
/// and column passes `kiln_column_sum_<dtype>(acc, x, n, rows, row_stride)`
/// (`acc[j]` plus each row's `x_r[j]`, wrapping) for inputs narrower than
/// 64 bits, each value sign- or zero-extended to the `i64` (`u64`)
/// accumulator as the reference holds it. Wrapping addition is associative,
/// so any order gives the reference's bits. And [`int_sum_symbols`], their
/// (symbol, address) pairs.
macro_rules! int_sum_passes {
    (
        rows: $($rname:ident [$r512:ident, $r2:ident, $rb:ident] ($racc:ty, $rt:ty)),* ;
        columns: $($cname:ident [$c512:ident, $c2:ident, $cb:ident] ($ct:ty)),* $(,)?
    ) => {
        $(
            dispatched!(
                #[doc = concat!("The wrapping sum of the `n` ", stringify!($rt), " values at `x` as ", stringify!($racc), " (0 for `n == 0`).")]
                $rname [$r512, $r2, $rb] (x: *const $rt, n: usize) -> $racc =
                    int_sum(x, n, 0 as $racc, |a: $racc, e: $rt| a.wrapping_add(e as $racc))
            );
        )*
        $(
            dispatched!(
                #[doc = concat!("`acc[j] = acc[j].wrapping_add(x_r[j])` for `j < n`, for each row `x_r = x + r·row_stride` (`r < rows`, in order; ", stringify!($ct), " input widened to i64 accumulators). Every row must be valid for `n` reads, and none may overlap `acc`.")]
                $cname [$c512, $c2, $cb] (acc: *mut i64, x: *const $ct, n: usize, rows: usize, row_stride: isize) =
                    columns(acc, x, n, rows, row_stride, |a: i64, e: $ct| a.wrapping_add(e as i64))
            );
        )*

        /// The integer sum passes as (symbol name, address).
        fn int_sum_symbols() -> Vec<(&'static str, *const u8)> {
            vec![$((stringify!($rname), $rname as *const u8),)* $((stringify!($cname), $cname as *const u8)),*]
        }
    };
}

int_sum_passes!(
    rows:
    kiln_sum_i64 [sum_i64_avx512, sum_i64_avx2, sum_i64_base] (i64, i64),
    kiln_sum_u64 [sum_u64_avx512, sum_u64_avx2, sum_u64_base] (u64, u64),
    kiln_sum_i32 [sum_i32_avx512, sum_i32_avx2, sum_i32_base] (i64, i32),
    kiln_sum_u32 [sum_u32_avx512, sum_u32_avx2, sum_u32_base] (i64, u32),
    kiln_sum_i16 [sum_i16_avx512, sum_i16_avx2, sum_i16_base] (i64, i16),
    kiln_sum_u16 [sum_u16_avx512, sum_u16_avx2, sum_u16_base] (i64, u16),
    kiln_sum_i8 [sum_i8_avx512, sum_i8_avx2, sum_i8_base] (i64, i8),
    kiln_sum_u8 [sum_u8_avx512, sum_u8_avx2, sum_u8_base] (i64, u8);
    columns:
    kiln_column_sum_i32 [colsum_i32_avx512, colsum_i32_avx2, colsum_i32_base] (i32),
    kiln_column_sum_u32 [colsum_u32_avx512, colsum_u32_avx2, colsum_u32_base] (u32),
    kiln_column_sum_i16 [colsum_i16_avx512, colsum_i16_avx2, colsum_i16_base] (i16),
    kiln_column_sum_u16 [colsum_u16_avx512, colsum_u16_avx2, colsum_u16_base] (u16),
    kiln_column_sum_i8 [colsum_i8_avx512, colsum_i8_avx2, colsum_i8_base] (i8),
    kiln_column_sum_u8 [colsum_u8_avx512, colsum_u8_avx2, colsum_u8_base] (u8),
);

/// Elements per strip of [`column_extremes`]: a whole row of a 2000-wide
/// matrix, at most 8 KB of 32-bit values (in L1).
const EXTREME_STRIP: usize = 2048;

/// `acc[j] = max(acc[j], x_r[j])` (`max`) or the minimum, for `j < n` and
/// rows `x_r = x + r·stride`, for integers narrower than the accumulators:
/// each strip of columns is folded over all the rows in the input's own
/// type (full-width vectors of its lanes, not of the wider accumulator's),
/// then widened into the accumulators once. The extremes are exact, so the
/// order does not matter.
///
/// # Safety
/// As for [`columns`].
#[inline(always)]
unsafe fn column_extremes<T: Copy + Ord + Default, A: Copy + Ord + From<T>>(
    acc: *mut A,
    x: *const T,
    n: usize,
    rows: usize,
    stride: isize,
    max: bool,
) {
    if rows == 1 {
        // One row (a fused kernel's block of mapped values): straight into
        // the accumulators, without a strip to set up.
        // SAFETY: the caller's contract, for the one row.
        return unsafe { column(acc, x, n, |a: A, e: T| extreme(a, A::from(e), max)) };
    }
    let mut strip = [T::default(); EXTREME_STRIP];
    let mut j0 = 0;
    while j0 < n && rows > 0 {
        let len = EXTREME_STRIP.min(n - j0);
        let s = &mut strip[..len];
        // SAFETY: elements j0..j0 + len of every row are readable (caller
        // contract); row 0 starts the strip.
        s.copy_from_slice(unsafe { std::slice::from_raw_parts(x.add(j0), len) });
        for r in 1..rows {
            // SAFETY: as above, for row r.
            let row = unsafe {
                std::slice::from_raw_parts(x.wrapping_offset(r as isize * stride).add(j0), len)
            };
            for (a, &e) in s.iter_mut().zip(row) {
                *a = extreme(*a, e, max);
            }
        }
        // SAFETY: accumulators j0..j0 + len are valid and overlap no row.
        let part = unsafe { std::slice::from_raw_parts_mut(acc.add(j0), len) };
        for (a, &e) in part.iter_mut().zip(s.iter()) {
            *a = extreme(*a, A::from(e), max);
        }
        j0 += len;
    }
}

/// The integer maximum / minimum column passes,
/// `kiln_column_<op>_<dtype>(acc, x, n, rows, row_stride)`: `acc[j] =
/// op(acc[j], x_r[j])` as [`kiln_column_sum_i64`] does, over `i64`
/// accumulators that hold the values of any signed or narrower unsigned
/// input (`u64` accumulators for `u64` inputs, compared unsigned), the
/// accumulator dtype of an integer reduction: 64-bit inputs through
/// [`columns`], narrower ones through [`column_extremes`]; and
/// [`int_column_symbols`], their (symbol, address) pairs.
macro_rules! int_column_passes {
    (@body wide, $acc:ty, $t:ty, $max:literal, $a:ident, $x:ident, $n:ident, $rows:ident, $s:ident) => {
        columns($a, $x, $n, $rows, $s, |a: $acc, e: $t| extreme(a, e, $max))
    };
    (@body narrow, $acc:ty, $t:ty, $max:literal, $a:ident, $x:ident, $n:ident, $rows:ident, $s:ident) => {
        column_extremes::<$t, $acc>($a, $x, $n, $rows, $s, $max)
    };
    ($($name:ident [$a512:ident, $a2:ident, $base:ident] ($kind:ident, $acc:ty, $t:ty, $max:literal)),* $(,)?) => {
        $(
            dispatched!(
                #[doc = concat!("`acc[j] = extreme(acc[j], x_r[j])` (the maximum if ", stringify!($max), ", else the minimum) for `j < n`, for each row `x_r = x + r·row_stride` (`r < rows`, in order; ", stringify!($t), " input, ", stringify!($acc), " accumulators). Every row must be valid for `n` reads, and none may overlap `acc`.")]
                $name [$a512, $a2, $base] (acc: *mut $acc, x: *const $t, n: usize, rows: usize, row_stride: isize) =
                    int_column_passes!(@body $kind, $acc, $t, $max, acc, x, n, rows, row_stride)
            );
        )*

        /// The integer maximum / minimum column passes as (symbol name, address).
        fn int_column_symbols() -> Vec<(&'static str, *const u8)> {
            vec![$((stringify!($name), $name as *const u8)),*]
        }
    };
}

int_column_passes!(
    kiln_column_max_i64 [colmax_i64_avx512, colmax_i64_avx2, colmax_i64_base] (wide, i64, i64, true),
    kiln_column_min_i64 [colmin_i64_avx512, colmin_i64_avx2, colmin_i64_base] (wide, i64, i64, false),
    kiln_column_max_u64 [colmax_u64_avx512, colmax_u64_avx2, colmax_u64_base] (wide, u64, u64, true),
    kiln_column_min_u64 [colmin_u64_avx512, colmin_u64_avx2, colmin_u64_base] (wide, u64, u64, false),
    kiln_column_max_i32 [colmax_i32_avx512, colmax_i32_avx2, colmax_i32_base] (narrow, i64, i32, true),
    kiln_column_min_i32 [colmin_i32_avx512, colmin_i32_avx2, colmin_i32_base] (narrow, i64, i32, false),
    kiln_column_max_u32 [colmax_u32_avx512, colmax_u32_avx2, colmax_u32_base] (narrow, i64, u32, true),
    kiln_column_min_u32 [colmin_u32_avx512, colmin_u32_avx2, colmin_u32_base] (narrow, i64, u32, false),
    kiln_column_max_i16 [colmax_i16_avx512, colmax_i16_avx2, colmax_i16_base] (narrow, i64, i16, true),
    kiln_column_min_i16 [colmin_i16_avx512, colmin_i16_avx2, colmin_i16_base] (narrow, i64, i16, false),
    kiln_column_max_u16 [colmax_u16_avx512, colmax_u16_avx2, colmax_u16_base] (narrow, i64, u16, true),
    kiln_column_min_u16 [colmin_u16_avx512, colmin_u16_avx2, colmin_u16_base] (narrow, i64, u16, false),
    kiln_column_max_i8 [colmax_i8_avx512, colmax_i8_avx2, colmax_i8_base] (narrow, i64, i8, true),
    kiln_column_min_i8 [colmin_i8_avx512, colmin_i8_avx2, colmin_i8_base] (narrow, i64, i8, false),
    kiln_column_max_u8 [colmax_u8_avx512, colmax_u8_avx2, colmax_u8_base] (narrow, i64, u8, true),
    kiln_column_min_u8 [colmin_u8_avx512, colmin_u8_avx2, colmin_u8_base] (narrow, i64, u8, false),
);

/// Safe slice form of [`kiln_sum_f64`].
pub fn sum_f64(x: &[f64]) -> f64 {
    // SAFETY: the slice holds `x.len()` readable values.
    unsafe { kiln_sum_f64(x.as_ptr(), x.len()) }
}

/// Safe slice form of `kiln_column_sum_f64`: `acc[j] += x[r·acc.len() + j]`
/// for every whole row `r` of `x` (rows of `acc.len()` values, in order).
pub fn column_sum_f64(acc: &mut [f64], x: &[f64]) {
    let n = acc.len();
    let rows = x.len().checked_div(n).unwrap_or(0);
    // SAFETY: `rows` rows of `n` values, `n` apart, lie inside `x`; `acc`
    // holds `n` writable values and, being exclusive, overlaps no row.
    unsafe { kiln_column_sum_f64(acc.as_mut_ptr(), x.as_ptr(), n, rows, n as isize) }
}

/// Safe slice form of `kiln_count_finite_f64`: the number of finite
/// values in `x` (counted in full).
pub fn count_finite_f64(x: &[f64]) -> u64 {
    // SAFETY: the slice holds `x.len()` readable values.
    unsafe { kiln_count_finite_f64(x.as_ptr(), x.len(), 0) }
}

/// Safe slice form of [`kiln_dot_f64`] over the common length of `x` and `y`.
pub fn dot_f64(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len().min(y.len());
    // SAFETY: both slices hold at least `n` readable values.
    unsafe { kiln_dot_f64(x.as_ptr(), y.as_ptr(), n) }
}

/// The row, count and column passes as (symbol name, address); C
/// signatures `double(const T* x, size_t n)` (sums), `double(const double*
/// x, const double* y, size_t n)` (dot), `uint64_t(const T* x, size_t n,
/// uint32_t stop)` (counts), `void(A* acc, const T* x, size_t n, size_t rows, ptrdiff_t
/// row_stride)` (column passes).
pub fn rowcol_symbols() -> Vec<(&'static str, *const u8)> {
    let mut symbols = int_column_symbols();
    symbols.extend(int_row_symbols());
    symbols.extend(int_sum_symbols());
    symbols.extend([
        ("kiln_sum_f64", kiln_sum_f64 as *const u8),
        ("kiln_sum_f32", kiln_sum_f32 as *const u8),
        ("kiln_dot_f64", kiln_dot_f64 as *const u8),
        ("kiln_count_finite_f64", kiln_count_finite_f64 as *const u8),
        ("kiln_count_finite_f32", kiln_count_finite_f32 as *const u8),
        ("kiln_count_nan_f64", kiln_count_nan_f64 as *const u8),
        ("kiln_count_nan_f32", kiln_count_nan_f32 as *const u8),
        ("kiln_count_inf_f64", kiln_count_inf_f64 as *const u8),
        ("kiln_count_inf_f32", kiln_count_inf_f32 as *const u8),
        ("kiln_column_sum_f64", kiln_column_sum_f64 as *const u8),
        ("kiln_column_sum_f32", kiln_column_sum_f32 as *const u8),
        ("kiln_column_prod_f64", kiln_column_prod_f64 as *const u8),
        ("kiln_column_prod_f32", kiln_column_prod_f32 as *const u8),
        ("kiln_column_max_f64", kiln_column_max_f64 as *const u8),
        ("kiln_column_max_f32", kiln_column_max_f32 as *const u8),
        ("kiln_column_min_f64", kiln_column_min_f64 as *const u8),
        ("kiln_column_min_f32", kiln_column_min_f32 as *const u8),
        ("kiln_column_sum_i64", kiln_column_sum_i64 as *const u8),
    ]);
    symbols
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| ((i * 37) % 101) as f64 * 0.37 - 17.0)
            .collect()
    }

    /// The documented order, written out sequentially.
    fn lane_order_sum(t: impl Iterator<Item = f64>) -> f64 {
        let mut acc = [0.0; LANES];
        for (i, v) in t.enumerate() {
            acc[i % LANES] += v;
        }
        halving_sum(&acc)
    }

    #[test]
    fn row_passes_follow_the_documented_order() {
        for n in (0..=17).chain([33, 1000, 1003]) {
            let x = values(n);
            let y: Vec<f64> = values(n + 5)[5..].to_vec();
            assert_eq!(
                sum_f64(&x).to_bits(),
                lane_order_sum(x.iter().copied()).to_bits()
            );
            let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            // SAFETY: `xf` holds n values.
            let sf = unsafe { kiln_sum_f32(xf.as_ptr(), n) };
            assert_eq!(
                sf.to_bits(),
                lane_order_sum(xf.iter().map(|&v| v as f64)).to_bits()
            );
            let d = dot_f64(&x, &y);
            assert_eq!(
                d.to_bits(),
                lane_order_sum(x.iter().zip(&y).map(|(a, b)| a * b)).to_bits()
            );
        }
    }

    /// Rows shorter than a group (their own inlined path) keep the
    /// documented order's bits with signed zeros, infinities, NaN and
    /// values whose order of addition shows. A NaN result is compared as
    /// NaN only: IEEE 754 leaves its sign unspecified, and x86 takes it
    /// from whichever operand the compiler put first.
    #[test]
    fn short_rows_keep_the_documented_bits_with_special_values() {
        let same = |a: f64, b: f64| (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits();
        let specials = [
            -0.0,
            0.0,
            1e308,
            -1e308,
            1.0,
            1e-16,
            f64::INFINITY,
            -0.5,
            f64::NAN,
        ];
        for n in 0..LANES {
            for start in 0..specials.len() {
                let x: Vec<f64> = (0..n)
                    .map(|i| specials[(start + i) % specials.len()])
                    .collect();
                let y: Vec<f64> = x.iter().rev().copied().collect();
                let (s, want) = (sum_f64(&x), lane_order_sum(x.iter().copied()));
                assert!(same(s, want), "sum of {x:?}: {s:e} against {want:e}");
                let d = dot_f64(&x, &y);
                let want = lane_order_sum(x.iter().zip(&y).map(|(a, b)| a * b));
                assert!(same(d, want), "dot of {x:?}: {d:e} against {want:e}");
            }
        }
        assert_eq!(sum_f64(&[-0.0]).to_bits(), 0.0f64.to_bits());
    }

    /// The documented order depends only on `n`: every variant the CPU
    /// runs gives the baseline's bits.
    #[test]
    fn variants_agree_bitwise() {
        for n in [0, 1, 17, 1003] {
            let x = values(n);
            let y: Vec<f64> = values(n + 5)[5..].to_vec();
            // SAFETY: x and y hold n values each.
            let (s, d) = unsafe {
                (
                    sum_f64_base(x.as_ptr(), n),
                    dot_base(x.as_ptr(), y.as_ptr(), n),
                )
            };
            #[cfg(target_arch = "x86_64")]
            {
                use crate::math::{isa, Isa};
                if matches!(isa(), Isa::Avx2 | Isa::Avx512) {
                    // SAFETY: features detected; x and y hold n values each.
                    let (s2, d2) = unsafe {
                        (
                            sum_f64_avx2(x.as_ptr(), n),
                            dot_avx2(x.as_ptr(), y.as_ptr(), n),
                        )
                    };
                    assert_eq!(
                        (s2.to_bits(), d2.to_bits()),
                        (s.to_bits(), d.to_bits()),
                        "n={n}"
                    );
                }
                if isa() == Isa::Avx512 {
                    // SAFETY: features detected; x and y hold n values each.
                    let (s5, d5) = unsafe {
                        (
                            sum_f64_avx512(x.as_ptr(), n),
                            dot_avx512(x.as_ptr(), y.as_ptr(), n),
                        )
                    };
                    assert_eq!(
                        (s5.to_bits(), d5.to_bits()),
                        (s.to_bits(), d.to_bits()),
                        "n={n}"
                    );
                }
            }
        }
    }

    #[test]
    fn count_passes_count_each_class() {
        for n in [0, 1, 15, 16, 17, 100] {
            let specials = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, f64::MAX];
            let x: Vec<f64> = (0..n)
                .map(|i| {
                    if i % 3 == 1 {
                        specials[(i / 3) % 5]
                    } else {
                        i as f64
                    }
                })
                .collect();
            let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let want = |f: fn(f64) -> bool| x.iter().filter(|&&v| f(v)).count() as u64;
            let wantf = |f: fn(f32) -> bool| xf.iter().filter(|&&v| f(v)).count() as u64;
            // SAFETY: both vectors hold n values.
            unsafe {
                assert_eq!(
                    kiln_count_finite_f64(x.as_ptr(), n, 0),
                    want(f64::is_finite)
                );
                assert_eq!(kiln_count_nan_f64(x.as_ptr(), n, 0), want(f64::is_nan));
                assert_eq!(kiln_count_inf_f64(x.as_ptr(), n, 0), want(f64::is_infinite));
                // f64::MAX rounds to +inf in f32: one more infinity there.
                assert_eq!(
                    kiln_count_finite_f32(xf.as_ptr(), n, 0),
                    wantf(f32::is_finite)
                );
                assert_eq!(kiln_count_nan_f32(xf.as_ptr(), n, 0), wantf(f32::is_nan));
                assert_eq!(
                    kiln_count_inf_f32(xf.as_ptr(), n, 0),
                    wantf(f32::is_infinite)
                );
            }
        }
        // Early stops: a NaN in the first chunk decides an `all` of
        // finiteness and an `any` of NaNs there; without one, the count is
        // whole.
        let mut x = vec![1.0f64; 5000];
        // SAFETY: `x` holds 5000 values.
        unsafe {
            assert_eq!(kiln_count_finite_f64(x.as_ptr(), 5000, 1), 5000);
            assert_eq!(kiln_count_nan_f64(x.as_ptr(), 5000, 2), 0);
            x[3] = f64::NAN;
            x[4000] = f64::NAN;
            assert_eq!(kiln_count_finite_f64(x.as_ptr(), 5000, 1), 1023);
            assert_eq!(kiln_count_nan_f64(x.as_ptr(), 5000, 2), 1);
            assert_eq!(kiln_count_nan_f64(x.as_ptr(), 5000, 0), 2);
        }
    }

    #[test]
    fn safe_forms_take_whole_rows() {
        let x: Vec<f64> = (0..7).map(f64::from).collect();
        let mut acc = [0.5, 1.0, 1.5];
        // Two whole rows of three; the seventh value is left out.
        column_sum_f64(&mut acc, &x);
        assert_eq!(acc, [3.5, 6.0, 8.5]);
        column_sum_f64(&mut [], &x);
        assert_eq!(count_finite_f64(&[1.0, f64::NAN, f64::INFINITY, -0.0]), 2);
    }

    #[test]
    fn column_passes_equal_the_sequential_update() {
        let specials = [f64::NAN, 0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, 1.5];
        // One row (the JIT's calls), fewer rows than a block, whole blocks
        // and a remainder; row lengths around the strip width.
        for (n, rows) in [
            (0, 3),
            (1, 1),
            (5, 9),
            (16, 8),
            (17, 17),
            (31, 2),
            (100, 11),
        ] {
            // Rows two elements apart beyond their length (a padded stride).
            let stride = n + 2;
            let mut x = values(rows * stride);
            for (i, s) in specials.iter().enumerate().take(x.len()) {
                let at = (i * 37) % x.len();
                x[at] = *s;
            }
            let mut acc0 = values(n + 3)[3..].to_vec();
            for (i, s) in specials.iter().enumerate().take(n) {
                acc0[(i * 5) % n] = *s;
            }
            let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            type Pass64 = unsafe extern "C" fn(*mut f64, *const f64, usize, usize, isize);
            type Pass32 = unsafe extern "C" fn(*mut f64, *const f32, usize, usize, isize);
            type Case = (Pass64, Pass32, fn(f64, f64) -> f64);
            let cases: [Case; 4] = [
                (kiln_column_sum_f64, kiln_column_sum_f32, |a, e| a + e),
                (kiln_column_prod_f64, kiln_column_prod_f32, |a, e| a * e),
                (kiln_column_max_f64, kiln_column_max_f32, |a, e| {
                    if a.is_nan() || e.is_nan() {
                        f64::NAN
                    } else if a >= e {
                        a
                    } else {
                        e
                    }
                }),
                (kiln_column_min_f64, kiln_column_min_f32, |a, e| {
                    if a.is_nan() || e.is_nan() {
                        f64::NAN
                    } else if a <= e {
                        a
                    } else {
                        e
                    }
                }),
            ];
            // The sequential update: row by row, element by element.
            let fold = |want: fn(f64, f64) -> f64, at: &dyn Fn(usize) -> f64| {
                let mut a = acc0.clone();
                for r in 0..rows {
                    for (j, aj) in a.iter_mut().enumerate() {
                        *aj = want(*aj, at(r * stride + j));
                    }
                }
                a
            };
            let (sx, p64, p32) = (stride as isize, x.as_ptr(), xf.as_ptr());
            for (f64_pass, f32_pass, want) in cases {
                let mut a = acc0.clone();
                // SAFETY: `a` holds n values; each of the `rows` rows of `x`,
                // `stride` apart, holds n values; they do not overlap.
                unsafe { f64_pass(a.as_mut_ptr(), p64, n, rows, sx) };
                let w = fold(want, &|i| x[i]);
                for j in 0..n {
                    assert_eq!(
                        a[j].to_bits(),
                        w[j].to_bits(),
                        "f64 n={n} rows={rows} j={j}"
                    );
                }
                let mut a = acc0.clone();
                // SAFETY: as above.
                unsafe { f32_pass(a.as_mut_ptr(), p32, n, rows, sx) };
                let w = fold(want, &|i| xf[i] as f64);
                for j in 0..n {
                    assert_eq!(
                        a[j].to_bits(),
                        w[j].to_bits(),
                        "f32 n={n} rows={rows} j={j}"
                    );
                }
            }
            let xi: Vec<i64> = (0..(rows * stride) as i64)
                .map(|i| (i * 3 - 7).wrapping_add(if i % 5 == 2 { i64::MAX } else { 0 }))
                .collect();
            let mut ai: Vec<i64> = (0..n as i64).map(|i| 5 - i).collect();
            let mut want = ai.clone();
            for r in 0..rows {
                for (j, w) in want.iter_mut().enumerate() {
                    *w = w.wrapping_add(xi[r * stride + j]);
                }
            }
            // SAFETY: as above, for the i64 buffers.
            unsafe { kiln_column_sum_i64(ai.as_mut_ptr(), xi.as_ptr(), n, rows, sx) };
            assert_eq!(ai, want, "i64 n={n} rows={rows}");
        }
    }
}
