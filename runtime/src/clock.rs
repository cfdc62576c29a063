//! A cheap monotonic tick counter, for profiles that time a great many short
//! calls (the equilibrium rewriter times every node rewriter call).
//!
//! On x86-64 with an invariant time-stamp counter (CPUID 8000_0007h, EDX
//! bit 8) a tick is a TSC cycle: reading it cost 9.5 ns on the 2-core AMD
//! EPYC of 2026-11-24, against 27.5 ns for `Instant::now()` and a
//! subtraction (the vDSO clock), which was 11% of the FAST_RUN rewrite of
//! the 3000-operation chain graph. Elsewhere a tick is a nanosecond of
//! `Instant`. [`rate`] measures the rate between the process's first
//! reading and its call; [`Rate::duration`] converts ticks at that rate.
//!
//! Invariant: [`now`] never decreases on one thread; differences of
//! readings are only meaningful within one process.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The first reading: its `Instant`, its tick count, and whether ticks are
/// TSC cycles.
fn epoch() -> &'static (Instant, u64, bool) {
    static EPOCH: OnceLock<(Instant, u64, bool)> = OnceLock::new();
    EPOCH.get_or_init(|| {
        let tsc = invariant_tsc();
        let t = Instant::now();
        (t, if tsc { rdtsc() } else { 0 }, tsc)
    })
}

/// Whether the CPU's time-stamp counter runs at a constant rate in every
/// power state.
fn invariant_tsc() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let max_ext = std::arch::x86_64::__cpuid(0x8000_0000).eax;
        max_ext >= 0x8000_0007 && std::arch::x86_64::__cpuid(0x8000_0007).edx & (1 << 8) != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
fn rdtsc() -> u64 {
    // SAFETY: RDTSC exists on every x86-64 CPU, reads a counter and
    // changes nothing.
    unsafe { std::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn rdtsc() -> u64 {
    0
}

/// The current tick count.
#[inline]
pub fn now() -> u64 {
    let e = epoch();
    if e.2 {
        rdtsc()
    } else {
        e.0.elapsed().as_nanos() as u64
    }
}

/// The rate of ticks at one moment, for converting many tick counts with
/// one clock reading (see [`rate`]).
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    /// Nanoseconds and ticks since the first reading; equal when a tick is
    /// a nanosecond, or when it is too soon to tell.
    nanos: u128,
    ticks: u128,
}

impl Rate {
    /// The time `ticks` ticks take.
    pub fn duration(&self, ticks: u64) -> Duration {
        Duration::from_nanos((ticks as u128 * self.nanos / self.ticks) as u64)
    }
}

/// The rate of ticks measured between the process's first reading and now.
pub fn rate() -> Rate {
    let e = epoch();
    let (cycles, nanos) = (rdtsc().wrapping_sub(e.1), e.0.elapsed().as_nanos());
    if !e.2 || cycles == 0 || nanos == 0 {
        // Nanosecond ticks; or TSC ticks read at once after the first
        // reading, too soon to tell: taken as nanoseconds.
        return Rate { nanos: 1, ticks: 1 };
    }
    Rate {
        nanos,
        ticks: cycles as u128,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_measure_time() {
        let (t0, i0) = (now(), Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (t1, i1) = (now(), Instant::now());
        assert!(t1 >= t0);
        let r = rate();
        let d = r.duration(t1 - t0).as_secs_f64();
        let want = (i1 - i0).as_secs_f64();
        // The rate is measured over this test's own 20 ms at least.
        assert!((d - want).abs() <= 0.05 * want, "{d} against {want}");
        assert_eq!(r.duration(0), Duration::ZERO);
    }
}
