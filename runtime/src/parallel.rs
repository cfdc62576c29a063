//! The parallel launcher: `parallel_for` splits [0, n) into contiguous
//! chunks of at least `grain` elements, which the calling thread and
//! helper jobs on a rayon thread pool (size set with [`set_num_threads`],
//! default: the number of available cores) take from a shared counter, so
//! work starts on the caller at once and workers join as they wake; the
//! caller then waits for the chunks helpers took, never for a helper that
//! has not started (it finds the counter closed when it does, and leaves
//! without touching the work). Chunks shrink along the range (guided
//! scheduling, `guided_bounds`): the first are large, so few are
//! claimed, and the last are small, so a helper that started late or ran
//! slower leaves the others little to wait for. The caller waits for the
//! last chunks spinning, for up to `WAIT_SPIN`, before it sleeps. Ranges
//! of at most `grain` elements, and any call when the thread count is 1,
//! run inline on the calling thread. [`in_pool`]
//! runs a closure inside that pool, so a library's own rayon parallelism
//! (the GEMM) uses the same workers; [`pool_tasks`] runs a list of tasks on
//! those workers the same way (the GEMM epilogues' row blocks).
//!
//! [`kiln_parallel_for`] is the `extern "C"` form for JIT code: it catches
//! every panic of the runtime and reports it as a non-zero return code, so
//! no unwinding ever crosses into JIT frames.
//!
//! After a launch, helpers linger: up to [`linger`] (default 10 ms,
//! `KILN_LINGER_MS`; 0 turns it off) they spin on the launch counter with
//! yields in between, instead of going to sleep, so that the next launch
//! finds them awake. On a virtual machine an idle virtual CPU is soon
//! descheduled, and a helper woken from sleep after a gap of 8 ms or more
//! started 0.9-2.8 ms late (BENCHMARKS.md, twenty-third session): a
//! sub-millisecond call after any other work ran on one core. Every use of
//! the pool bumps the counter first, so a lingering helper leaves at once
//! and takes the new work. Only [`parallel_for`] starts a linger: after
//! the GEMM's uses of the pool ([`in_pool`], [`pool_tasks`]) it cost
//! `tanh(A @ W + b)` 2-4% back to back, and those calls are long anyway.
//! (Intel's OpenMP runtime and OpenBLAS spin the same way, for longer by
//! default.)
//!
//! [`spawn`] hands a task to a worker without waiting for it (the code
//! generator's kernels generated while later ones are still lowered), and
//! [`run_as_background`] keeps a thread of the caller's own from preempting
//! the thread that wakes it (the code generator's second tier).
//!
//! A forked child has none of its parent's threads: [`fork_generation`]
//! changes in the child, and a pool built before the fork is then replaced
//! (and leaked, since its workers are gone) instead of being waited on
//! forever.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock, RwLock};
use std::time::{Duration, Instant};

/// A chunk takes 1 / (`GUIDED_SHARE` · threads) of the range still
/// unclaimed (and at least the grain): see [`guided_bounds`].
const GUIDED_SHARE: usize = 2;

/// How long the caller of [`parallel_for`] spins (yielding now and then)
/// for the chunks helpers still run before it sleeps. A helper finishes
/// within a chunk's time of the caller, a few tens of microseconds with
/// guided chunks; a sleeping caller woke 15-20 µs after the helper
/// finished on a 2-vCPU KVM guest (`sum(x * y)` on 4e6, two threads).
const WAIT_SPIN: Duration = Duration::from_millis(1);

static NUM_THREADS: AtomicUsize = AtomicUsize::new(0);
/// The number of available cores, asked of the operating system once:
/// `available_parallelism` reads cgroup files (several system calls), far
/// too slow for the call path of a small compiled function.
static AVAILABLE: OnceLock<usize> = OnceLock::new();
/// The pool, the fork generation it was built in and its size. Launches
/// only read it (concurrent callers share the read lock); it is written
/// when the configured count or the generation changes.
static POOL: RwLock<Option<(usize, usize, Arc<rayon::ThreadPool>)>> = RwLock::new(None);

/// Forks this process has gone through (incremented in each child).
static FORK_GENERATION: AtomicUsize = AtomicUsize::new(0);

/// Uses of the pool so far: a lingering helper stops when it changes.
static LAUNCHES: AtomicUsize = AtomicUsize::new(0);
/// [`LAUNCHES`] when the latest launch ended: helpers linger while no
/// launch has started since.
static SETTLED: AtomicUsize = AtomicUsize::new(0);
/// Helpers lingering, or spawned to linger and not yet started (reset in a
/// forked child, whose helpers are gone).
static LINGERING: AtomicUsize = AtomicUsize::new(0);
/// The linger time, read from [`LINGER_ENV`] once.
static LINGER: OnceLock<Duration> = OnceLock::new();

/// The environment variable that sets the linger time in milliseconds
/// (a non-negative integer; 0 turns lingering off).
pub const LINGER_ENV: &str = "KILN_LINGER_MS";

/// The default linger time: longer than the gaps after which a sleeping
/// helper woke late on the measured host (2-8 ms), short enough that an
/// idle process stops spinning at once for a human.
const DEFAULT_LINGER_MS: u64 = 10;

/// How long helpers stay awake after a launch ([`LINGER_ENV`], else 10 ms;
/// an unparsable value is the default).
pub fn linger() -> Duration {
    *LINGER.get_or_init(|| {
        let ms = std::env::var(LINGER_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(DEFAULT_LINGER_MS);
        Duration::from_millis(ms)
    })
}

/// Marks a new use of the pool: lingering helpers leave their spin.
fn launch() {
    LAUNCHES.fetch_add(1, Ordering::AcqRel);
}

/// Ends the helpers' linger at once (they go back to sleep): for a caller
/// about to give the other cores to threads of its own. The code
/// generator calls it before it wakes its second-tier thread, which found
/// the other core taken by a lingering helper, was placed on the caller's
/// core instead and preempted the compile for about a millisecond in one
/// of five compiles of two kernels (BENCHMARKS.md, twenty-seventh session).
pub fn stop_lingering() {
    launch();
}

/// Keeps `threads - 1` helpers of `pool` awake for [`linger`] after a
/// launch: each spins (a yield every few microseconds, so other runnable
/// threads of this process keep their core) until the next launch or the
/// deadline. A helper compares with the latest launch's end, not with the
/// launch that spawned it: one spawned earlier but started only now (it
/// still counts in [`LINGERING`], so no other is spawned) lingers for
/// this launch instead of leaving at once.
fn keep_awake(pool: &rayon::ThreadPool, threads: usize) {
    let time = linger();
    if time.is_zero() {
        return;
    }
    SETTLED.store(LAUNCHES.load(Ordering::Acquire), Ordering::Release);
    let want = threads - 1;
    while LINGERING
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < want).then_some(n + 1)
        })
        .is_ok()
    {
        pool.spawn(move || {
            spin_while(
                || LAUNCHES.load(Ordering::Acquire) == SETTLED.load(Ordering::Acquire),
                time,
            );
            LINGERING.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

/// The number of forks between the process's start and the calling
/// process: threads started in an earlier generation do not exist in this
/// one. No system call (a `pthread_atfork` child handler, registered on
/// first use, counts).
pub fn fork_generation() -> usize {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        #[cfg(unix)]
        {
            extern "C" fn in_child() {
                // Only atomics: async-signal-safe, as a fork handler must be.
                FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
                LINGERING.store(0, Ordering::Relaxed);
            }
            // SAFETY: registers a handler that only performs atomic operations;
            // failure (ENOMEM) leaves forks uncounted, as before.
            unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        }
    });
    FORK_GENERATION.load(Ordering::Relaxed)
}

/// Makes the calling thread background work: on Linux its scheduling
/// policy becomes `SCHED_BATCH` (the same share of a core as before, but
/// waking it never preempts the thread running on the core it is placed
/// on; it waits for the next scheduler tick or an idle core). Returns
/// whether the policy was set (other systems, or a sandbox that refuses
/// it: `false`, nothing changed).
///
/// For the code generator's second-tier thread: woken at the end of a
/// compile, it was placed on the compiling thread's core and preempted it
/// for a scheduler slice (0.7 ms) in about one compile of six, before the
/// Function was returned (`kiln bench` of gauss, Zen 1, BENCHMARKS.md,
/// thirtieth session).
pub fn run_as_background() -> bool {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `sched_setscheduler` with pid 0 changes only the calling
        // thread's policy; `param` is a valid, initialised `sched_param`
        // (priority 0, the only one `SCHED_BATCH` accepts) that outlives
        // the call, which does not keep it.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Sets the number of worker threads used by [`parallel_for`]; `0` restores
/// the default (the number of available cores). Takes effect for the next
/// launch; launches already running finish on the old pool.
pub fn set_num_threads(n: usize) {
    NUM_THREADS.store(n, Ordering::Relaxed);
}

/// The number of worker threads [`parallel_for`] uses. Makes no system
/// call after the first (the default is the core count at first use).
pub fn num_threads() -> usize {
    match NUM_THREADS.load(Ordering::Relaxed) {
        0 => *AVAILABLE.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        n => n,
    }
}

/// The pool for `threads` workers, rebuilt when the count changed; `None`
/// if the operating system refused to create threads.
fn pool(threads: usize) -> Option<Arc<rayon::ThreadPool>> {
    type Slot = Option<(usize, usize, Arc<rayon::ThreadPool>)>;
    let generation = fork_generation();
    let cached = |slot: &Slot| {
        slot.as_ref()
            .filter(|(g, t, _)| *g == generation && *t == threads)
            .map(|(_, _, p)| p.clone())
    };
    if let Some(p) = cached(&POOL.read().unwrap_or_else(|e| e.into_inner())) {
        return Some(p);
    }
    let mut guard = POOL.write().unwrap_or_else(|e| e.into_inner());
    // Another caller may have built it between the two locks.
    if let Some(p) = cached(&guard) {
        return Some(p);
    }
    let p = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("kiln-worker-{i}"))
            .build()
            .ok()?,
    );
    if let Some((g, _, old)) = guard.replace((generation, threads, p.clone())) {
        if g != generation {
            // Built before a fork: its workers do not exist here, and
            // dropping it could wait on them.
            std::mem::forget(old);
        }
    }
    Some(p)
}

/// Calls `f(start, end)` on contiguous chunks covering [0, n) exactly once,
/// in parallel. Each chunk has at least `grain` elements (`grain == 0` is
/// treated as 1); when `n < 2·grain` or one thread is configured,
/// `f(0, n)` runs inline on the calling thread. A panic in `f` is
/// propagated to the caller after all chunks have finished or stopped. If
/// the thread pool cannot be created, the range runs inline.
pub fn parallel_for(n: usize, grain: usize, f: &(dyn Fn(usize, usize) + Sync)) {
    if n == 0 {
        return;
    }
    let grain = grain.max(1);
    let threads = num_threads();
    if n <= grain || threads <= 1 {
        f(0, n);
        return;
    }
    let bounds = guided_bounds(n, grain, threads);
    let chunks = bounds.len() - 1;
    if chunks <= 1 {
        f(0, n);
        return;
    }
    let Some(pool) = pool(threads) else {
        f(0, n);
        return;
    };
    launch();
    // SAFETY: the helpers outlive this call (a helper may start after it
    // returned), so `f` is handed to them with its lifetime erased. A helper
    // calls `f` only for a chunk it claimed from `next` before this call
    // closed it, and this call returns (or unwinds) only after every
    // claimed chunk has finished (`Launch::run` and the wait below), so no
    // call of `f` outlives the borrow. A helper that claims nothing never
    // touches `f`.
    let f: &'static (dyn Fn(usize, usize) + Sync) = unsafe { std::mem::transmute(f) };
    let launch = Arc::new(Launch {
        next: AtomicUsize::new(0),
        finished: AtomicUsize::new(0),
        chunks,
        bounds,
        f,
        panic: Mutex::new(None),
        caller: std::thread::current(),
    });
    // The calling thread takes chunks from the shared counter at once, and
    // `threads - 1` helper jobs on the pool take the others as their
    // workers wake up: a worker that is slow to wake (an idle core after
    // single-threaded work, a descheduled virtual CPU) delays nothing, the
    // caller simply takes more chunks, and does not wait for a helper that
    // has not claimed one (it leaves empty-handed when it starts).
    for _ in 1..threads.min(chunks) {
        let l = launch.clone();
        pool.spawn(move || l.run());
    }
    launch.run();
    let claimed = launch.next.swap(CLOSED, Ordering::AcqRel).min(chunks);
    wait_for(&launch.finished, claimed);
    keep_awake(&pool, threads);
    let panic = launch
        .panic
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(payload) = panic {
        std::panic::resume_unwind(payload);
    }
}

/// The chunk bounds of [0, n) for `threads` threads: `0 = b[0] < b[1] <
/// .. < b[last] = n`. Each chunk takes 1 / ([`GUIDED_SHARE`] · threads) of
/// what is left after the chunks before it, rounded down to whole grains
/// but at least one, and the last takes the rest when less than two grains
/// would be left, so every chunk has at least `grain` elements (`n >=
/// 2·grain` when there is more than one chunk) and every bound but `n` is
/// a multiple of `grain`: a kernel's chunks start as aligned as its grain
/// is (the element-wise grain, 2^13 elements, is whole cache lines of any
/// dtype). The bounds depend only on `n`, `grain` and `threads`, never on
/// which thread claims what. About `2·threads·ln(n / (2·threads·grain))`
/// chunks plus a few of one grain: 15 for 62 units on two threads (15, 11,
/// 9, 6, .. then seven of one), where equal chunks (four per thread) left
/// the caller waiting up to an eighth of the work for a helper that
/// started late.
fn guided_bounds(n: usize, grain: usize, threads: usize) -> Vec<usize> {
    let share = GUIDED_SHARE * threads.max(1);
    let mut bounds = vec![0];
    let mut start = 0;
    while start < n {
        let left = n - start;
        let take = if left < 2 * grain {
            left
        } else {
            (left / share / grain).max(1) * grain
        };
        start += take;
        bounds.push(start);
    }
    bounds
}

/// Waits until `finished` reaches `claimed`: spins for up to
/// [`WAIT_SPIN`] ([`spin_while`]), then parks; helpers unpark the caller
/// after each chunk, so a park never misses the last one.
fn wait_for(finished: &AtomicUsize, claimed: usize) {
    let busy = || finished.load(Ordering::Acquire) < claimed;
    if !spin_while(busy, WAIT_SPIN) {
        while busy() {
            std::thread::park();
        }
    }
}

/// Spins while `busy()` holds, for at most `limit`: every 1024 turns it
/// looks at the clock and yields, so that other runnable threads of this
/// process keep their core (the caller's wait and a lingering helper).
/// Whether `busy()` stopped holding before the limit.
fn spin_while(busy: impl Fn() -> bool, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut spins = 0u32;
    while busy() {
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(1024) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::yield_now();
        }
    }
    true
}

/// [`Launch::next`] once the caller has stopped handing out chunks: any
/// later claim gets an index past every chunk.
const CLOSED: usize = usize::MAX / 2;

/// The state one [`parallel_for`] shares with its helper jobs.
struct Launch {
    /// The next chunk to claim; [`CLOSED`] once the caller has finished.
    next: AtomicUsize,
    /// Chunks finished (or stopped by a panic), by anyone.
    finished: AtomicUsize,
    /// How many chunks cover [0, n).
    chunks: usize,
    /// Chunk `c` covers `bounds[c]..bounds[c + 1]` ([`guided_bounds`]).
    bounds: Vec<usize>,
    /// The work, valid while a claimed chunk is unfinished (see the
    /// safety comment in [`parallel_for`]).
    f: &'static (dyn Fn(usize, usize) + Sync),
    /// The first panic of a chunk, re-raised on the caller.
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    /// The caller, woken when a helper finishes a chunk.
    caller: std::thread::Thread,
}

impl Launch {
    /// Claims and runs chunks until none is left, counting each finished
    /// one (a panicking chunk too: its payload is kept for the caller).
    fn run(&self) {
        loop {
            let c = self.next.fetch_add(1, Ordering::AcqRel);
            if c >= self.chunks {
                return;
            }
            let (s, e) = (self.bounds[c], self.bounds[c + 1]);
            if s < e {
                if let Err(payload) = catch_unwind(AssertUnwindSafe(|| (self.f)(s, e))) {
                    let mut slot = self.panic.lock().unwrap_or_else(|e| e.into_inner());
                    slot.get_or_insert(payload);
                }
            }
            self.finished.fetch_add(1, Ordering::AcqRel);
            self.caller.unpark();
        }
    }
}

/// Runs `f(threads)` inside the pool of [`num_threads`] workers, so rayon
/// parallelism nested in `f` (the GEMM crate's `Parallelism::Rayon`) runs
/// on kiln's workers, not on rayon's global pool. With one thread
/// configured, or if the pool cannot be created, `f(1)` runs inline.
pub fn in_pool(f: &(dyn Fn(usize) + Sync)) {
    let threads = num_threads();
    if threads > 1 {
        if let Some(pool) = pool(threads) {
            launch();
            pool.install(|| f(threads));
            return;
        }
    }
    f(1);
}

/// Runs `f(i)` for every `i` in `0..n` as tasks on the pool's workers
/// while the caller waits, as the GEMM's own threading runs (the caller
/// does not take tasks itself). With one thread configured, `n < 2`, or
/// if the pool cannot be created, the tasks run inline in order.
pub fn pool_tasks(n: usize, f: &(dyn Fn(usize) + Sync)) {
    let threads = num_threads();
    if threads > 1 && n > 1 {
        if let Some(pool) = pool(threads) {
            launch();
            pool.install(|| rayon::scope(|s| (0..n).for_each(|i| s.spawn(move |_| f(i)))));
            return;
        }
    }
    (0..n).for_each(f);
}

/// Runs `task` on one of the pool's workers without waiting for it and
/// returns `true`; with one thread configured, or if the pool cannot be
/// created, returns `false` and drops `task` unrun. Lingering helpers
/// leave their spin first, so that one is free to take it. A panic in
/// `task` is caught and dropped (it never reaches the pool, which would
/// abort the process): a task reports its own outcome.
pub fn spawn(task: impl FnOnce() + Send + 'static) -> bool {
    let threads = num_threads();
    if threads <= 1 {
        return false;
    }
    let Some(pool) = pool(threads) else {
        return false;
    };
    launch();
    pool.spawn(move || {
        let _ = catch_unwind(AssertUnwindSafe(task));
    });
    true
}

/// Signature of a JIT kernel launched by [`kiln_parallel_for`]: it
/// processes elements [start, end) of the work described by `ctx`.
pub type KernelFn = extern "C" fn(ctx: *const u8, start: usize, end: usize);

/// `extern "C"` form of [`parallel_for`] for JIT code: calls
/// `kernel(ctx, start, end)` on contiguous chunks covering [0, n).
///
/// Returns 0 on success and 1 if the runtime panicked (the panic is caught
/// here and never unwinds into the caller; the chunks may then be partly
/// done). `kernel` itself must not unwind: a Rust `extern "C"` function that
/// panics aborts the process at its own boundary.
///
/// # Safety
/// `kernel` must be safe to call concurrently from several threads with
/// `ctx` and disjoint ranges, and `ctx` must stay valid until this returns.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kiln_parallel_for(
    n: usize,
    grain: usize,
    kernel: KernelFn,
    ctx: *const u8,
) -> i32 {
    // The pointer is passed across threads as an address; the caller
    // guarantees it is valid and shareable for the duration of the call.
    let addr = ctx as usize;
    let run = || parallel_for(n, grain, &|s, e| kernel(addr as *const u8, s, e));
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

/// The parallel launcher's `extern "C"` entry points as (symbol, address).
pub fn parallel_symbols() -> Vec<(&'static str, *const u8)> {
    vec![("kiln_parallel_for", kiln_parallel_for as *const u8)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Mutex as StdMutex;

    /// Serialises tests that change the global thread count.
    static LOCK: StdMutex<()> = StdMutex::new(());

    #[test]
    fn spawn_runs_the_task_on_a_worker_unless_one_thread_is_configured() {
        let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        set_num_threads(2);
        let (tx, rx) = std::sync::mpsc::channel();
        let caller = std::thread::current().id();
        assert!(spawn(move || tx.send(std::thread::current().id()).unwrap()));
        let ran_on = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        assert_ne!(ran_on, caller);
        // A panicking task is contained: the pool keeps serving.
        assert!(spawn(|| panic!("a task's own panic")));
        let (tx, rx) = std::sync::mpsc::channel();
        assert!(spawn(move || tx.send(()).unwrap()));
        rx.recv_timeout(Duration::from_secs(60)).unwrap();
        set_num_threads(1);
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        assert!(!spawn(move || {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(ran.load(Ordering::SeqCst), 0, "dropped unrun");
        set_num_threads(0);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn run_as_background_sets_the_batch_policy_of_its_thread_only() {
        // SAFETY (both calls): `sched_getscheduler(0)` only reads the
        // calling thread's policy.
        let before = unsafe { libc::sched_getscheduler(0) };
        let inside = std::thread::spawn(|| {
            let set = run_as_background();
            (set, unsafe { libc::sched_getscheduler(0) })
        })
        .join()
        .unwrap();
        assert_eq!(inside, (true, libc::SCHED_BATCH));
        assert_eq!(unsafe { libc::sched_getscheduler(0) }, before);
    }

    fn check_cover(n: usize, grain: usize) {
        let seen: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
        let chunks = StdMutex::new(Vec::new());
        parallel_for(n, grain, &|s, e| {
            chunks.lock().unwrap().push((s, e));
            for v in &seen[s..e] {
                v.fetch_add(1, Ordering::Relaxed);
            }
        });
        assert!(seen.iter().all(|v| v.load(Ordering::Relaxed) == 1));
        let chunks = chunks.into_inner().unwrap();
        if n > grain.max(1) {
            assert!(
                chunks.iter().all(|(s, e)| e - s >= grain.max(1)),
                "{chunks:?}"
            );
        } else {
            assert_eq!(
                chunks,
                vec![(0, n)]
                    .into_iter()
                    .filter(|_| n > 0)
                    .collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn guided_chunks_shrink_cover_the_range_and_keep_the_grain() {
        for (n, grain, threads) in [
            (62, 1, 2),
            (100, 10, 2),
            (12345, 100, 3),
            (20, 10, 8),
            (7, 1, 64),
        ] {
            let b = guided_bounds(n, grain, threads);
            assert_eq!((b[0], *b.last().unwrap()), (0, n));
            let sizes: Vec<usize> = b.windows(2).map(|w| w[1] - w[0]).collect();
            assert!(
                sizes.iter().all(|&s| s >= grain),
                "{n} {grain} {threads}: {sizes:?}"
            );
            let inner = &b[1..b.len() - 1];
            assert!(
                inner.iter().all(|&x| x % grain == 0),
                "{n} {grain} {threads}: {b:?}"
            );
            // Never growing, except that the last takes a remainder below two grains.
            let body = &sizes[..sizes.len() - 1];
            assert!(body.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
        }
        let sizes = |n, g, t| {
            let b = guided_bounds(n, g, t);
            b.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>()
        };
        assert_eq!(
            sizes(62, 1, 2),
            [15, 11, 9, 6, 5, 4, 3, 2, 1, 1, 1, 1, 1, 1, 1]
        );
        assert_eq!(sizes(19, 10, 2), [19], "below two grains: one chunk");
        assert_eq!(sizes(20, 10, 2), [10, 10]);
        assert_eq!(sizes(100, 10, 2), [20, 20, 10, 10, 10, 10, 10, 10]);
    }

    #[test]
    fn covers_range_exactly_once() {
        let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        set_num_threads(3);
        for (n, grain) in [
            (0, 4),
            (1, 4),
            (4, 4),
            (5, 4),
            (1000, 1),
            (1000, 7),
            (12345, 100),
            (10, 0),
        ] {
            check_cover(n, grain);
        }
        set_num_threads(0);
    }

    #[test]
    fn pool_tasks_run_each_task_once_on_the_workers() {
        let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let me = std::thread::current().id();
        for threads in [1, 3] {
            set_num_threads(threads);
            for n in [0usize, 1, 2, 37] {
                let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                let on_caller = AtomicUsize::new(0);
                pool_tasks(n, &|i| {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                    if std::thread::current().id() == me {
                        on_caller.fetch_add(1, Ordering::Relaxed);
                    }
                });
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
                // Several tasks on several threads run on the workers only;
                // otherwise inline on the caller.
                let inline = threads == 1 || n < 2;
                let want = if inline { n } else { 0 };
                assert_eq!(
                    on_caller.load(Ordering::Relaxed),
                    want,
                    "{threads} threads, {n} tasks"
                );
            }
        }
        set_num_threads(0);
    }

    #[test]
    fn below_grain_runs_inline() {
        let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let me = std::thread::current().id();
        parallel_for(10, 100, &|_, _| assert_eq!(std::thread::current().id(), me));
        set_num_threads(1);
        parallel_for(1000, 1, &|_, _| assert_eq!(std::thread::current().id(), me));
        set_num_threads(0);
    }

    #[test]
    fn thread_count_is_settable() {
        let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        set_num_threads(2);
        assert_eq!(num_threads(), 2);
        let ids = StdMutex::new(std::collections::HashSet::new());
        parallel_for(64, 1, &|_, _| {
            ids.lock().unwrap().insert(std::thread::current().id());
            std::thread::sleep(std::time::Duration::from_millis(2));
        });
        assert!(ids.into_inner().unwrap().len() <= 2);
        set_num_threads(0);
        assert!(num_threads() >= 1);
    }

    /// A launch does not wait for helpers that have not started: with every
    /// worker of the pool held busy, the caller runs every chunk itself and
    /// returns while the workers are still held (the helpers it spawned run
    /// later, find nothing to claim, and leave).
    #[test]
    fn launches_do_not_wait_for_helpers_that_never_started() {
        let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        set_num_threads(2);
        let pool = pool(2).expect("a pool");
        let (release, held) = std::sync::mpsc::channel::<()>();
        let held = Arc::new(StdMutex::new(held));
        let (started, workers_busy) = std::sync::mpsc::channel::<()>();
        let (report, outcome) = std::sync::mpsc::channel::<bool>();
        for _ in 0..2 {
            let (held, started, report) = (held.clone(), started.clone(), report.clone());
            pool.spawn(move || {
                started.send(()).unwrap();
                // Released by the test (true), or by a timeout when the
                // launch below waited for this worker (false).
                let got = held
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(30))
                    .is_ok();
                report.send(got).unwrap();
            });
        }
        // Both workers are held: one by the receiver, the other by its lock.
        workers_busy.recv().unwrap();
        workers_busy.recv().unwrap();
        let me = std::thread::current().id();
        let on_caller = AtomicUsize::new(0);
        parallel_for(64, 1, &|s, e| {
            assert_eq!(std::thread::current().id(), me);
            on_caller.fetch_add(e - s, Ordering::Relaxed);
        });
        assert_eq!(on_caller.load(Ordering::Relaxed), 64);
        release.send(()).unwrap();
        release.send(()).unwrap();
        assert!(
            outcome.recv().unwrap(),
            "the launch waited for a held worker"
        );
        assert!(
            outcome.recv().unwrap(),
            "the launch waited for a held worker"
        );
        set_num_threads(0);
    }

    #[test]
    fn panics_propagate_to_rust_callers() {
        let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        set_num_threads(2);
        let r =
            catch_unwind(|| parallel_for(100, 10, &|s, e| assert!(!(s..e).contains(&50), "boom")));
        assert!(r.is_err());
        set_num_threads(0);
    }

    /// After a launch at most `threads - 1` helpers linger, every one of
    /// them stops by itself after the linger time, and launches while they
    /// linger compute as any other.
    #[test]
    fn helpers_linger_then_stop() {
        let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        set_num_threads(2);
        assert!(linger() <= Duration::from_secs(60), "{:?}", linger());
        // Helpers of an earlier launch with more threads (another test's)
        // may still be leaving: a launch no longer waits for its helper
        // jobs to start, which used to wait for them.
        wait_until_none_lingers();
        for _ in 0..3 {
            let v: Vec<AtomicU64> = (0..4096).map(|_| AtomicU64::new(0)).collect();
            parallel_for(v.len(), 16, &|s, e| {
                for x in &v[s..e] {
                    x.fetch_add(1, Ordering::Relaxed);
                }
            });
            assert!(v.iter().all(|x| x.load(Ordering::Relaxed) == 1));
            assert!(LINGERING.load(Ordering::Acquire) <= 1);
        }
        // Other tests of this binary may launch meanwhile and linger anew;
        // each linger still ends, so the count reaches 0.
        wait_until_none_lingers();
        set_num_threads(0);
    }

    /// Waits for every lingering helper to stop (failing after far longer
    /// than a linger).
    fn wait_until_none_lingers() {
        let until = Instant::now() + linger() + Duration::from_secs(20);
        while LINGERING.load(Ordering::Acquire) != 0 {
            assert!(Instant::now() < until, "helpers still lingering");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    extern "C" fn add_kernel(ctx: *const u8, start: usize, end: usize) {
        // SAFETY: the test passes a pointer to a live slice of AtomicU64
        // covering every index.
        let v = unsafe { &*(ctx as *const Vec<AtomicU64>) };
        for x in &v[start..end] {
            x.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn extern_c_launcher() {
        let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let v: Vec<AtomicU64> = (0..5000).map(|_| AtomicU64::new(0)).collect();
        // SAFETY: add_kernel only touches disjoint indices of `v`, which
        // outlives the call.
        let rc = unsafe { kiln_parallel_for(v.len(), 64, add_kernel, &v as *const _ as *const u8) };
        assert_eq!(rc, 0);
        assert!(v.iter().all(|x| x.load(Ordering::Relaxed) == 1));
        assert_eq!(parallel_symbols()[0].0, "kiln_parallel_for");
    }
}
