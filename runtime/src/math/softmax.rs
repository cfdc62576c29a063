//! The softmax family over lanes of f64 values: `softmax`, `log_softmax`
//! and `logsumexp` of one lane ([`lane_f64`]) and of many contiguous rows
//! shorter than a group at once ([`short_rows_f64`]).
//!
//! A lane of values `x` gets its maximum `m` (`fold`'s exact,
//! NaN-propagating extreme), then
//! - softmax: `e = exp(x - m)` stored with its sum `s` in one pass
//!   (`fold`'s store pass, the block `exp`'s bits), then `e · (1 / s)`
//!   (one division, then products: within 1.5 ULP of `e / s`, inside the
//!   softmax's accuracy contract, and several times cheaper);
//! - log-softmax: `s = Σ exp(x - m)` in one fused pass (`fold`'s sum pass,
//!   no exp stored), then `(x - m) - ln(s)`;
//! - logsumexp: first, for a lane of a group or more, `ln(Σ e^x)` itself
//!   from `fold`'s unshifted sum, which needs no maximum pass and rounds
//!   no `x - m`; it declines (and exits after the first group when that
//!   one is out) a lane with a value beyond about ±709, an infinity or a
//!   NaN, or a sum that overflows or falls below 2^-900. Otherwise the
//!   same `s` as log-softmax's, and `ln(s) + m`. One value per lane. With
//!   AVX2, logsumexp on 1000 x 2000 took 1.03-1.06 ms against 1.16-1.23
//!   with the shifted passes alone (BENCHMARKS.md, fiftieth session).
//!
//! A lane too long for one thread is split into chunks by the caller and
//! computed in three steps, each over all chunks before the next
//! ([`split_lane_max`], [`split_lane_sum`], [`split_lane_finish`] or
//! [`split_lane_logsumexp`]): the same maximum and terms as the lane
//! pass's shifted form, the sum added chunk by chunk (so its last bits may
//! differ from the lane pass's, which for logsumexp is usually the
//! unshifted sum; the chunking, not the thread count, fixes them). For lanes
//! rounded to `f32` afterwards, [`split_lane_rescaled`] takes the first two
//! steps in one pass: each chunk summed at its own maximum, rescaled.
//!
//! Short rows (`n <` [`SHORT_ROW`], the rows of an `(rows, n)` array): a
//! call of the lane pass per row costs more than the row's few exps. They
//! are packed `LANES / N` to a group of `LANES` lanes (`N` = 4, 8 or 16,
//! the smallest that holds `n`): each row's values padded with zeros to
//! `N` lanes (as the lane pass pads a short row), each lane shifted by its
//! own row's maximum, one exp map over the group, then each row's sum of
//! its `N` lanes by `fold::short_sum`. A lane's exp depends only on its
//! value and its shift, and each row's sum adds the same values in the same
//! order, so every row gets the lane pass's bits.
//!
//! Invariants (both forms, as the reference evaluator): every lane is
//! finite and correct whatever its magnitude (the shift by the maximum);
//! a NaN in a lane makes the lane NaN; for softmax, a lane of `-inf` only
//! is NaN and a `+inf` maximum makes the finite elements 0 (`-inf` for
//! log-softmax) and the infinite ones NaN; logsumexp is `+inf` at a `+inf`
//! maximum and `-inf` for a lane of `-inf` only or an empty one; an empty
//! softmax lane writes nothing.

use super::fold::{
    exp_shift_lanes, exp_shift_store_f64, extreme, extreme_f64, read_padded, short_sum,
    sum_exp_at_max_f64, sum_exp_in_window_f64, LANES,
};

/// What a lane gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum LanePass {
    /// `softmax`: a value per element of the lane.
    Softmax,
    /// `log_softmax`: a value per element of the lane.
    LogSoftmax,
    /// `logsumexp`: one value per lane.
    LogSumExp,
}

/// Rows shorter than this go to [`short_rows_f64`] (a row of at least one
/// group is worth its own lane pass).
pub const SHORT_ROW: usize = LANES;

/// logsumexp of a lane with maximum `m` and `ls()` the logarithm of its
/// shifted exp sum: an infinite maximum is the value (`+inf`, or `-inf`
/// when every element is `-inf`, `log(0)`; `ls` is then not called); NaN
/// propagates through `m`.
#[inline(always)]
fn log_sum_exp(m: f64, ls: impl FnOnce() -> f64) -> f64 {
    if m.is_infinite() {
        m
    } else {
        ls() + m
    }
}

/// The (log-)softmax of element `v` of a lane whose maximum is `+inf`:
/// as the reference, finite elements vanish, infinite ones are NaN.
#[inline(always)]
fn at_infinite_max(v: f64, log: bool) -> f64 {
    if v == f64::INFINITY {
        f64::NAN
    } else if log {
        f64::NEG_INFINITY
    } else {
        0.0
    }
}

/// Computes `pass` over one contiguous lane `x` into `out`: `x.len()`
/// values, or one for [`LanePass::LogSumExp`] (`-inf` for an empty lane).
/// `next` is the lane computed after this one, if any, prefetched during
/// the exp pass so that its max pass does not wait on memory (a hint: the
/// same bits).
///
/// # Panics
/// If `out` is shorter than that.
pub fn lane_f64(x: &[f64], out: &mut [f64], pass: LanePass, next: Option<&[f64]>) {
    if pass == LanePass::LogSumExp {
        let s = sum_exp_in_window_f64(x, next);
        if !s.is_nan() {
            out[0] = s.ln();
            return;
        }
    }
    let m = extreme_f64(x, true);
    let sum = || sum_exp_at_max_f64(x, m, next);
    if pass == LanePass::LogSumExp {
        out[0] = log_sum_exp(m, || sum().ln());
        return;
    }
    let out = &mut out[..x.len()];
    let log_pass = pass == LanePass::LogSoftmax;
    if m == f64::INFINITY {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = at_infinite_max(v, log_pass);
        }
        return;
    }
    if log_pass {
        let ls = sum().ln();
        for (o, &v) in out.iter_mut().zip(x) {
            *o = (v - m) - ls;
        }
    } else {
        let r = 1.0 / exp_shift_store_f64(x, m, out, next);
        for o in out.iter_mut() {
            *o *= r;
        }
    }
}

/// The maximum of a lane split into chunks, from the chunks' maxima
/// ([`extreme_f64`](super::extreme_f64) of each, in any order): NaN if any
/// is NaN, else the largest (`-inf` for none). Exact, so it is the bits
/// the whole lane's maximum has.
pub fn split_lane_max(parts: impl IntoIterator<Item = f64>) -> f64 {
    let mut m = f64::NEG_INFINITY;
    for p in parts {
        if p.is_nan() {
            return p;
        }
        m = m.max(p);
    }
    m
}

/// Step 2 of a lane split into chunks (a lane too long for one thread):
/// Σ e^(x_i - m) over chunk `x` for the whole lane's maximum `m` (from
/// [`split_lane_max`]), with the terms also written to `store` when given
/// (softmax of `f64` lanes, which [`split_lane_finish`] then scales in
/// place). The lane's sum is the chunks' sums added in chunk order: the
/// same terms as [`lane_f64`]'s, in another order of addition. 0 when `m`
/// is `+inf` (the lane's values then do not need the sum; a lane of `-inf`
/// only gets the lane pass's NaN terms).
///
/// # Panics
/// If `store` is shorter than `x`.
pub fn split_lane_sum(x: &[f64], m: f64, store: Option<&mut [f64]>) -> f64 {
    if m == f64::INFINITY {
        return 0.0;
    }
    match store {
        Some(out) => exp_shift_store_f64(x, m, out, None),
        None => sum_exp_at_max_f64(x, m, None),
    }
}

/// Step 2 in one read with step 1: the lane's exp sum at its maximum `m`
/// from each chunk's maximum `m_c` and its sum `s_c` at `m_c`
/// ([`split_lane_sum`] with `m_c`), added in chunk order as
/// `s_c · e^(m_c - m)`. A few roundings more than summing at `m` directly
/// (the rescaling factor and its product): for lanes whose values are
/// rounded to `f32` afterwards. Chunks of `-inf` only add nothing; the
/// result does not matter (and is unspecified) when `m` is infinite or NaN.
pub fn split_lane_rescaled(m: f64, parts: impl IntoIterator<Item = (f64, f64)>) -> f64 {
    if !m.is_finite() {
        return f64::NAN;
    }
    parts
        .into_iter()
        .filter(|&(mc, _)| mc != f64::NEG_INFINITY)
        .map(|(mc, sc)| sc * (mc - m).exp())
        .sum()
}

/// Step 3 of a split lane: the values of chunk `x` into `out` for the
/// lane's maximum `m` and exp sum `s` (softmax or log-softmax; the special
/// values as [`lane_f64`] gives them). With `stored`, `out` already holds
/// the chunk's terms from [`split_lane_sum`] and is scaled in place;
/// otherwise softmax computes them again.
///
/// # Panics
/// If `out` is shorter than `x`, or for [`LanePass::LogSumExp`] (see
/// [`split_lane_logsumexp`]).
pub fn split_lane_finish(x: &[f64], m: f64, s: f64, out: &mut [f64], pass: LanePass, stored: bool) {
    assert!(
        pass != LanePass::LogSumExp,
        "split_lane_finish: logsumexp has one value per lane"
    );
    assert!(out.len() >= x.len(), "split_lane_finish: output too short");
    // SAFETY: `x` holds x.len() readable values, `out` at least as many
    // writable ones; a shared and an exclusive slice never overlap.
    unsafe { kiln_split_lane_finish_f64(x.as_ptr(), m, s, out.as_mut_ptr(), x.len(), pass, stored) }
}

dispatched!(
    /// [`split_lane_finish`] over `n` values at `x` into `out` (its
    /// per-element loops at the ISA's width).
    kiln_split_lane_finish_f64 [finish_avx512, finish_avx2, finish_base]
        (x: *const f64, m: f64, s: f64, out: *mut f64, n: usize, pass: LanePass, stored: bool) =
            finish(x, m, s, out, n, pass, stored)
);

/// [`kiln_split_lane_finish_f64`]'s body.
///
/// # Safety
/// `x` valid for `n` reads, `out` for `n` writes, not overlapping; `pass`
/// is not logsumexp.
#[inline(always)]
unsafe fn finish(
    x: *const f64,
    m: f64,
    s: f64,
    out: *mut f64,
    n: usize,
    pass: LanePass,
    stored: bool,
) {
    // SAFETY: caller contract.
    let (x, out) = unsafe {
        (
            std::slice::from_raw_parts(x, n),
            std::slice::from_raw_parts_mut(out, n),
        )
    };
    let log_pass = pass == LanePass::LogSoftmax;
    if m == f64::INFINITY {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = at_infinite_max(v, log_pass);
        }
    } else if log_pass {
        let ls = s.ln();
        for (o, &v) in out.iter_mut().zip(x) {
            *o = (v - m) - ls;
        }
    } else {
        if !stored {
            exp_shift_store_f64(x, m, out, None);
        }
        let r = 1.0 / s;
        for o in out.iter_mut() {
            *o *= r;
        }
    }
}

/// The logsumexp of a split lane with maximum `m` and exp sum `s`.
pub fn split_lane_logsumexp(m: f64, s: f64) -> f64 {
    log_sum_exp(m, || s.ln())
}

/// Computes `pass` over the contiguous rows of `n` values that make up `x`
/// (`1 <= n <` [`SHORT_ROW`]) into `out`: `x.len()` values, or one per row
/// for [`LanePass::LogSumExp`]. Each row gets the bits [`lane_f64`] gives
/// it.
///
/// # Panics
/// If `n` is out of that range, `x.len()` is not a multiple of `n`, or
/// `out` is too short.
pub fn short_rows_f64(x: &[f64], n: usize, out: &mut [f64], pass: LanePass) {
    assert!((1..SHORT_ROW).contains(&n), "short_rows_f64: rows of {n}");
    assert!(
        x.len().is_multiple_of(n),
        "short_rows_f64: {} values in rows of {n}",
        x.len()
    );
    let rows = x.len() / n;
    let need = if pass == LanePass::LogSumExp {
        rows
    } else {
        x.len()
    };
    assert!(out.len() >= need, "short_rows_f64: output too short");
    // SAFETY: `x` holds rows·n readable values, `out` at least `need`
    // writable ones; a shared and an exclusive slice never overlap.
    unsafe { kiln_softmax_short_rows_f64(x.as_ptr(), out.as_mut_ptr(), rows, n, pass) }
}

dispatched!(
    /// Computes `pass` over `rows` contiguous rows of `n` values at `x`
    /// (`1 <= n < 16`) into `out` (`rows · n` values, or `rows` for
    /// logsumexp), with the bits of the lane pass of each row.
    kiln_softmax_short_rows_f64 [short_rows_avx512, short_rows_avx2, short_rows_base]
        (x: *const f64, out: *mut f64, rows: usize, n: usize, pass: LanePass) =
            short_rows(x, out, rows, n, pass)
);

/// [`kiln_softmax_short_rows_f64`]'s body: the group width for `n`, and
/// the pass as constants.
///
/// # Safety
/// `x` valid for `rows · n` reads, `out` for the pass's writes, not
/// overlapping; `1 <= n < LANES`.
#[inline(always)]
unsafe fn short_rows(x: *const f64, out: *mut f64, rows: usize, n: usize, pass: LanePass) {
    /// The pass for rows of up to `N` values.
    ///
    /// # Safety
    /// As [`short_rows`], with `n <= N`.
    #[inline(always)]
    unsafe fn with<const N: usize>(
        x: *const f64,
        out: *mut f64,
        rows: usize,
        n: usize,
        pass: LanePass,
    ) {
        // SAFETY: forwarded caller contract.
        unsafe {
            match pass {
                LanePass::Softmax => rows_pass::<true, false, N>(x, out, rows, n),
                LanePass::LogSoftmax => rows_pass::<false, false, N>(x, out, rows, n),
                LanePass::LogSumExp => rows_pass::<false, true, N>(x, out, rows, n),
            }
        }
    }
    // SAFETY: forwarded caller contract; each arm's n fits its N.
    unsafe {
        if n <= 4 {
            with::<4>(x, out, rows, n, pass)
        } else if n <= 8 {
            with::<8>(x, out, rows, n, pass)
        } else {
            with::<LANES>(x, out, rows, n, pass)
        }
    }
}

/// The rows' pass with `N`-lane row slots (`n <= N`, `LANES / N` rows a
/// group): softmax when `STORE` (the stored exps are the block exp's), else
/// log-softmax or, with `LSE`, logsumexp. The exps are one map over the
/// group; each row's maximum, sum and finish are scalar code over its
/// slot (the same functions as the lane pass's). Tried and slower on
/// AVX-512: halving trees and logarithms over the whole group, and a
/// transposed block (a row per lane), whose transposition cost more than
/// it saved (BENCHMARKS.md, twenty-third session).
///
/// # Safety
/// As [`short_rows`], with `n <= N`.
#[inline(always)]
unsafe fn rows_pass<const STORE: bool, const LSE: bool, const N: usize>(
    x: *const f64,
    out: *mut f64,
    rows: usize,
    n: usize,
) {
    let per = LANES / N;
    let mut r = 0;
    while r < rows {
        let k = per.min(rows - r);
        // Slots of rows past the last hold zeros with shift 0: exps of 0,
        // never read.
        let mut v = [0.0f64; LANES];
        let mut c = [0.0f64; LANES];
        let mut m = [0.0f64; LANES];
        for j in 0..k {
            // SAFETY: row r + j < rows holds n readable values.
            let (mj, vj) = unsafe {
                let row = x.add((r + j) * n);
                (extreme(row, n, true), read_padded::<N>(row, n))
            };
            v[j * N..(j + 1) * N].copy_from_slice(&vj);
            c[j * N..(j + 1) * N].fill(mj);
            m[j] = mj;
        }
        let t = exp_shift_lanes::<STORE, true, LANES>(v, c);
        for j in 0..k {
            let (mj, e) = (m[j], &t[j * N..(j + 1) * N]);
            let s = short_sum(n, |l| e[l]);
            if LSE {
                // SAFETY: row r + j < rows has its value at out[r + j].
                unsafe { *out.add(r + j) = log_sum_exp(mj, || s.ln()) };
                continue;
            }
            // SAFETY: row r + j's n values are readable at x and writable
            // at out, at (r + j)·n.
            let (xr, or) = unsafe {
                (
                    std::slice::from_raw_parts(x.add((r + j) * n), n),
                    std::slice::from_raw_parts_mut(out.add((r + j) * n), n),
                )
            };
            if mj == f64::INFINITY {
                for (o, &xv) in or.iter_mut().zip(xr) {
                    *o = at_infinite_max(xv, !STORE);
                }
            } else if STORE {
                let inv = 1.0 / s;
                for (o, &ev) in or.iter_mut().zip(e) {
                    *o = ev * inv;
                }
            } else {
                let ls = s.ln();
                for (o, &xv) in or.iter_mut().zip(xr) {
                    *o = (xv - mj) - ls;
                }
            }
        }
        r += k;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSES: [LanePass; 3] = [LanePass::Softmax, LanePass::LogSoftmax, LanePass::LogSumExp];

    /// Rows of every short length, with special rows (NaN, ±inf, huge
    /// magnitudes, signed zeros, an all `-inf` row) among ordinary ones,
    /// in row counts that leave partial groups.
    fn rows(n: usize, count: usize) -> Vec<f64> {
        let specials = [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e300,
            -1e300,
            -0.0,
            0.0,
            800.0,
            -800.0,
        ];
        let mut x: Vec<f64> = (0..n * count)
            .map(|i| ((i * 37 + n) % 101) as f64 * 0.13 - 6.0)
            .collect();
        for (k, &s) in specials.iter().enumerate() {
            let row = (k * 5 + 1) % count;
            x[row * n + k % n] = s;
        }
        // One row of -inf only.
        let last = (count - 1) * n;
        x[last..].fill(f64::NEG_INFINITY);
        x
    }

    fn same(a: f64, b: f64) -> bool {
        (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
    }

    #[test]
    fn short_rows_give_the_lane_pass_bits() {
        for n in 1..SHORT_ROW {
            for count in [1, 2, 3, 5, 17, 40] {
                let count = count.max(2);
                let x = rows(n, count);
                for pass in PASSES {
                    let width = if pass == LanePass::LogSumExp { 1 } else { n };
                    let mut got = vec![f64::NAN; count * width];
                    short_rows_f64(&x, n, &mut got, pass);
                    for r in 0..count {
                        let mut want = vec![0.0; n];
                        lane_f64(&x[r * n..(r + 1) * n], &mut want, pass, None);
                        for l in 0..width {
                            let (g, w) = (got[r * width + l], want[l]);
                            assert!(same(g, w), "{pass:?} n={n} row {r}[{l}]: {g} vs {w}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn lanes_follow_the_special_value_rules() {
        let mut out = [0.0; 3];
        lane_f64(
            &[1.0, f64::INFINITY, 2.0],
            &mut out,
            LanePass::Softmax,
            None,
        );
        assert_eq!(out[0], 0.0);
        assert!(out[1].is_nan());
        lane_f64(
            &[1.0, f64::INFINITY, 2.0],
            &mut out,
            LanePass::LogSoftmax,
            None,
        );
        assert_eq!(out[0], f64::NEG_INFINITY);
        lane_f64(&[f64::NEG_INFINITY; 3], &mut out, LanePass::Softmax, None);
        assert!(out.iter().all(|v| v.is_nan()));
        lane_f64(&[f64::NEG_INFINITY; 3], &mut out, LanePass::LogSumExp, None);
        assert_eq!(out[0], f64::NEG_INFINITY);
        lane_f64(&[], &mut out, LanePass::LogSumExp, None);
        assert_eq!(out[0], f64::NEG_INFINITY);
        lane_f64(&[1e3, 1e3], &mut out, LanePass::Softmax, None);
        assert_eq!(out[..2], [0.5, 0.5]);
        lane_f64(&[1e3, 1e3], &mut out, LanePass::LogSumExp, None);
        assert_eq!(out[0], 1e3 + std::f64::consts::LN_2);
        lane_f64(&[f64::NAN, 1.0], &mut out, LanePass::LogSoftmax, None);
        assert!(out[..2].iter().all(|v| v.is_nan()));
    }

    /// logsumexp of lanes of a group or more, inside the unshifted sum's
    /// window and outside it (shifted far up or down, an overflowing sum,
    /// infinities, NaN): within a few roundings of the stabilised value
    /// computed with std's exp, and the special values' rules.
    #[test]
    fn logsumexp_lanes_in_and_out_of_the_window() {
        for n in [16, 17, 100, 2000] {
            let base: Vec<f64> = (0..n)
                .map(|i| ((i * 37) % 101) as f64 * 0.09 - 4.0)
                .collect();
            for shift in [0.0, -690.0, -720.0, -1e4, 700.0, 709.0, 1e4] {
                let x: Vec<f64> = base.iter().map(|v| v + shift).collect();
                let mut out = [0.0];
                lane_f64(&x, &mut out, LanePass::LogSumExp, None);
                let m = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let want = m + x.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
                let tol = (n as f64 + 4.0) * f64::EPSILON * (1.0 + want.abs());
                assert!(
                    (out[0] - want).abs() <= tol,
                    "n={n} shift {shift}: {} vs {want}",
                    out[0]
                );
            }
            let with = |k: usize, v: f64| {
                let mut d = base.clone();
                d[k] = v;
                d
            };
            let mut out = [0.0];
            lane_f64(
                &with(n - 1, f64::INFINITY),
                &mut out,
                LanePass::LogSumExp,
                None,
            );
            assert_eq!(out[0], f64::INFINITY);
            lane_f64(&with(0, f64::NAN), &mut out, LanePass::LogSumExp, None);
            assert!(out[0].is_nan());
            // -inf adds nothing: the lane without it.
            let mut without = [0.0];
            lane_f64(
                &with(n / 2, f64::NEG_INFINITY),
                &mut out,
                LanePass::LogSumExp,
                None,
            );
            lane_f64(&base[..], &mut without, LanePass::LogSumExp, None);
            let sum_without: f64 = base
                .iter()
                .enumerate()
                .filter(|&(k, _)| k != n / 2)
                .map(|(_, v)| v.exp())
                .sum();
            assert!((out[0] - sum_without.ln()).abs() <= (n as f64 + 4.0) * f64::EPSILON * 8.0);
            assert!(out[0] < without[0]);
        }
    }

    /// A lane computed by the split steps over chunks of several sizes
    /// against the lane pass: the same bits for every special lane, and
    /// elsewhere within the bound of the one thing that differs, the order
    /// in which the sum adds its positive terms (relative error below one
    /// rounding per chunk added, plus the finish's few roundings).
    #[test]
    fn split_lanes_agree_with_the_lane_pass() {
        let n = 1000;
        let base: Vec<f64> = (0..n)
            .map(|i| ((i * 37) % 101) as f64 * 0.31 - 15.0)
            .collect();
        let with = |k: usize, v: f64| {
            let mut d = base.clone();
            d[k] = v;
            d
        };
        let lanes = [
            base.clone(),
            with(700, f64::NAN),
            with(3, f64::INFINITY),
            vec![f64::NEG_INFINITY; n],
            base.iter().map(|v| v * 1e300).collect(),
        ];
        for x in &lanes {
            for chunk in [1, 7, 64, 999, 1000] {
                let parts: Vec<&[f64]> = x.chunks(chunk).collect();
                let m = split_lane_max(parts.iter().map(|p| extreme_f64(p, true)));
                let tol = (parts.len() + 4) as f64 * f64::EPSILON;
                for pass in PASSES {
                    let mut want = vec![0.0; n];
                    lane_f64(x, &mut want, pass, None);
                    let stored = pass == LanePass::Softmax && chunk % 2 == 1;
                    let mut got = vec![0.0; n];
                    let s: f64 = parts
                        .iter()
                        .zip(got.chunks_mut(chunk))
                        .map(|(p, o)| split_lane_sum(p, m, Some(o).filter(|_| stored)))
                        .sum();
                    if pass == LanePass::LogSumExp {
                        let (g, w) = (split_lane_logsumexp(m, s), want[0]);
                        assert!(same(g, w) || (g - w).abs() <= tol * w.abs(), "{g} vs {w}");
                        continue;
                    }
                    for (p, o) in parts.iter().zip(got.chunks_mut(chunk)) {
                        split_lane_finish(p, m, s, o, pass, stored);
                    }
                    for (k, (&g, &w)) in got.iter().zip(&want).enumerate() {
                        let close = (g - w).abs() <= tol * w.abs();
                        assert!(
                            same(g, w) || (w.is_finite() && close),
                            "{pass:?} chunk {chunk} [{k}]: {g} vs {w}"
                        );
                    }
                }
            }
        }
    }

    /// The rescaled sum (each chunk summed at its own maximum) against the
    /// sum at the lane's maximum: within a few roundings, with chunks of
    /// `-inf` only adding nothing.
    #[test]
    fn rescaled_sums_agree_with_sums_at_the_lane_maximum() {
        let mut x: Vec<f64> = (0..5000)
            .map(|i| ((i * 7919) % 1013) as f64 * 0.05 - 25.0)
            .collect();
        x[..700].fill(f64::NEG_INFINITY);
        for chunk in [64, 500, 4999] {
            let parts: Vec<&[f64]> = x.chunks(chunk).collect();
            let m = split_lane_max(parts.iter().map(|p| extreme_f64(p, true)));
            let direct: f64 = parts.iter().map(|p| split_lane_sum(p, m, None)).sum();
            let rescaled = split_lane_rescaled(
                m,
                parts.iter().map(|p| {
                    let mc = extreme_f64(p, true);
                    (mc, split_lane_sum(p, mc, None))
                }),
            );
            let tol = (parts.len() + 4) as f64 * 4.0 * f64::EPSILON;
            assert!(
                (rescaled - direct).abs() <= tol * direct,
                "{chunk}: {rescaled} vs {direct}"
            );
        }
    }

    #[test]
    #[should_panic(expected = "rows of 16")]
    fn short_rows_reject_a_full_group() {
        short_rows_f64(&[0.0; 32], 16, &mut [0.0; 32], LanePass::Softmax);
    }

    #[test]
    fn variants_agree_bitwise() {
        let n = 5;
        let x = rows(n, 23);
        let run = |f: unsafe fn(*const f64, *mut f64, usize, usize, LanePass)| {
            let mut out = vec![0.0; x.len()];
            // SAFETY: x holds 23 rows of n; out as many values.
            unsafe { f(x.as_ptr(), out.as_mut_ptr(), 23, n, LanePass::Softmax) };
            out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        let base = run(short_rows_base);
        #[cfg(target_arch = "x86_64")]
        {
            if super::super::isa() == super::super::Isa::Avx512 {
                assert_eq!(run(short_rows_avx512), base);
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                assert_eq!(run(short_rows_avx2), base);
            }
        }
    }
}
