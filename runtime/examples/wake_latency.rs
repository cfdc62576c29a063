//! Measures how late the parallel launcher's helper starts after the
//! process was idle for a while: for each gap, 21 launches of two chunks of
//! 3 ms busy work each, after sleeping that long, and the median time from
//! the launch to the later chunk's start (a few µs when the helper is
//! awake; about 3 ms when the caller had to run both chunks itself). Run
//! with and without lingering helpers:
//! `KILN_LINGER_MS=0 cargo run --release -p kiln-runtime --example wake_latency`
//! (and with the default, 10 ms). Needs two cores or more.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use kiln_runtime::parallel::{linger, num_threads, parallel_for};

fn main() {
    println!(
        "{} threads, helpers linger {:?} (KILN_LINGER_MS)",
        num_threads(),
        linger()
    );
    // Build the pool first.
    parallel_for(2, 1, &|_, _| {});
    for gap_ms in [0u64, 2, 4, 8, 16, 50] {
        let mut late = Vec::new();
        for _ in 0..21 {
            std::thread::sleep(Duration::from_millis(gap_ms));
            let t0 = Instant::now();
            let starts = Mutex::new(Vec::new());
            parallel_for(2, 1, &|_, _| {
                starts.lock().unwrap().push(t0.elapsed());
                let end = Instant::now() + Duration::from_millis(3);
                while Instant::now() < end {
                    std::hint::spin_loop();
                }
            });
            let later = starts.into_inner().unwrap().into_iter().max().unwrap();
            late.push(later.as_secs_f64() * 1e6);
        }
        late.sort_by(|a, b| a.total_cmp(b));
        println!(
            "after {gap_ms:2} ms idle: the later chunk starts {:6.0} µs after the launch (median; max {:.0})",
            late[late.len() / 2],
            late[late.len() - 1]
        );
    }
}
