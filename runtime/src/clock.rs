//! A cheap monotonic tick counter, for profiles that time a great many short
//! calls (the equilibrium rewriter times every node rewriter call).
//!
//! On x86-64 with an invariant time-stamp counter (CPUID 8000_0007h, EDX
//! bit 8) a tick is a TSC cycle: reading it cost 9.5 ns on the 2-core AMD
//! EPYC of 2026-11-24, against 27.5 ns for `Instant::now()` and a
//! subtraction (the vDSO clock), which was 11% of the FAST_RUN rewrite of
//! the 3000-operation chain graph. Elsewhere a tick is a nanosecond of
//! `Instant`. [`to_duration`] converts ticks at the rate measured between
//! the process's first reading and the conversion.
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

/// The time `ticks` ticks take.
pub fn to_duration(ticks: u64) -> Duration {
    let e = epoch();
    if !e.2 {
        return Duration::from_nanos(ticks);
    }
    let (cycles, nanos) = (rdtsc().wrapping_sub(e.1), e.0.elapsed().as_nanos());
    if cycles == 0 || nanos == 0 {
        // Converted at once after the first reading: too soon to tell.
        return Duration::from_nanos(ticks);
    }
    Duration::from_nanos((ticks as u128 * nanos / cycles as u128) as u64)
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
        let d = to_duration(t1 - t0).as_secs_f64();
        let want = (i1 - i0).as_secs_f64();
        // The rate is measured over this test's own 20 ms at least.
        assert!((d - want).abs() <= 0.05 * want, "{d} against {want}");
        assert_eq!(to_duration(0), Duration::ZERO);
    }
}
