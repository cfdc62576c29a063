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
//! - logsumexp: the same `s`, and `ln(s) + m`, one value per lane.
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
    sum_exp_at_max_f64, LANES,
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
