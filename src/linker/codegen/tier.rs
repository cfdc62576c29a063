//! The second tier of code generation: one background thread per process
//! generates every tiered module's kernels again with the backtracking
//! register allocator and switches the module's kernels to that code.
//!
//! The generation itself (`jit::second_tier`) is handed over as a closure,
//! so this module only owns the queue, the thread and the table. The
//! thread runs as background work
//! ([`kiln_runtime::parallel::run_as_background`]): waking it never
//! preempts the thread that just compiled.
//!
//! Invariants: a module's kernels are called through [`Tiers::ptr`], which
//! reads the current address with `Acquire`; the second tier stores each
//! new address with `Release` only after its module is finalized (its code
//! written and made executable), and never changes an address again. Both
//! tiers' modules are owned by the [`Tiers`] whose addresses point into
//! them and are freed with it, when no Function can call them any more. A
//! job whose `JitCode` is gone is abandoned (its module freed at once).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Condvar, Mutex, Weak};

use cranelift_jit::JITModule;

use crate::error::Result;

/// The current addresses of a module's kernels, and the modules they point
/// into: the first tier's, then the second tier's once installed.
pub(super) struct Tiers {
    ptrs: Vec<AtomicUsize>,
    /// The modules (freed on drop). `JITModule` is `Send` but not `Sync`;
    /// the lock is only taken to install the second tier and on drop.
    modules: Mutex<Vec<JITModule>>,
    /// `None` while the second tier is pending, then whether it installed.
    settled: Mutex<Option<bool>>,
    on_settle: Condvar,
    /// The fork generation the table was made in: in a forked child no
    /// thread will settle it (the queue's thread stayed in the parent).
    generation: usize,
}

impl Tiers {
    /// The table of kernels at `ptrs` in `module`; `final_code` when these
    /// addresses are already the final ones (no second tier follows).
    pub(super) fn new(module: JITModule, ptrs: Vec<usize>, final_code: bool) -> Self {
        Tiers {
            ptrs: ptrs.into_iter().map(AtomicUsize::new).collect(),
            modules: Mutex::new(vec![module]),
            settled: Mutex::new(final_code.then_some(true)),
            on_settle: Condvar::new(),
            generation: kiln_runtime::parallel::fork_generation(),
        }
    }

    /// The current address of kernel `i`.
    pub(super) fn ptr(&self, i: usize) -> *const u8 {
        self.ptrs[i].load(Ordering::Acquire) as *const u8
    }

    /// The number of kernels.
    pub(super) fn len(&self) -> usize {
        self.ptrs.len()
    }

    /// Blocks until the table is settled; true when its addresses are final
    /// (false at once in a forked child of the process that made a table
    /// still pending: its first tier stays).
    pub(super) fn wait(&self) -> bool {
        let mut s = self.settled.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match *s {
                Some(installed) => return installed,
                None if kiln_runtime::parallel::fork_generation() != self.generation => {
                    return false
                }
                None => s = self.on_settle.wait(s).unwrap_or_else(|e| e.into_inner()),
            }
        }
    }

    fn settle(&self, installed: bool) {
        *self.settled.lock().unwrap_or_else(|e| e.into_inner()) = Some(installed);
        self.on_settle.notify_all();
    }

    /// Switches every kernel to the second tier's `ptrs` in `module`.
    fn install(&self, module: JITModule, ptrs: Vec<usize>) {
        self.modules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(module);
        for (slot, p) in self.ptrs.iter().zip(ptrs) {
            slot.store(p, Ordering::Release);
        }
        self.settle(true);
    }
}

impl Drop for Tiers {
    fn drop(&mut self) {
        let modules = std::mem::take(self.modules.get_mut().unwrap_or_else(|e| e.into_inner()));
        for m in modules {
            // SAFETY: addresses into these modules are only read through
            // `self.ptr`; the table is dropped, so no call can read one, and
            // every running call holds (through its Function) the
            // `JitCode` that owns an `Arc` to this table.
            unsafe { m.free_memory() };
        }
    }
}

/// A second tier's code generation: given a test of whether its table is
/// still alive (to stop early when not), the finalized module and kernel
/// addresses, `Ok(None)` when abandoned.
pub(super) type Generate =
    Box<dyn FnOnce(&dyn Fn() -> bool) -> Result<Option<(JITModule, Vec<usize>)>> + Send>;

/// A queued second tier.
struct Job {
    tiers: Weak<Tiers>,
    generate: Generate,
}

/// Queues the second tier `generate` of the module whose table is `tiers`
/// for the background thread (started on first use, and again in a forked
/// child, which has no copy of its parent's threads). When the thread
/// cannot be started, the table settles at once on its first tier.
pub(super) fn submit(tiers: Weak<Tiers>, generate: Generate) {
    /// The worker's fork generation and queue.
    static WORKER: Mutex<Option<(usize, Sender<Job>)>> = Mutex::new(None);
    let job = Job { tiers, generate };
    let generation = kiln_runtime::parallel::fork_generation();
    let mut worker = WORKER.lock().unwrap_or_else(|e| e.into_inner());
    if worker.as_ref().is_none_or(|(g, _)| *g != generation) {
        let (tx, rx) = channel::<Job>();
        let started = std::thread::Builder::new()
            .name("kiln-tier2".into())
            .spawn(move || {
                // Its wake-up at the end of a compile must not preempt the
                // compiling thread (which then returns the Function).
                kiln_runtime::parallel::run_as_background();
                for job in rx {
                    run(job);
                }
            });
        *worker = started.ok().map(|_| (generation, tx));
    }
    let sent = match worker.as_ref() {
        Some((_, tx)) => tx.send(job),
        None => Err(std::sync::mpsc::SendError(job)),
    };
    drop(worker);
    if let Err(std::sync::mpsc::SendError(job)) = sent {
        if let Some(t) = job.tiers.upgrade() {
            t.settle(false);
        }
    }
}

/// Runs one job: installs the second tier, or settles the table on its
/// first tier when generating it failed.
fn run(job: Job) {
    let Job { tiers, generate } = job;
    let alive = || tiers.strong_count() > 0;
    match generate(&alive) {
        Ok(Some((module, ptrs))) => match tiers.upgrade() {
            Some(t) => t.install(module, ptrs),
            // SAFETY: the table is gone, so no address into `module` was
            // ever published.
            None => unsafe { module.free_memory() },
        },
        // Abandoned: nobody waits.
        Ok(None) => {}
        Err(_) => {
            if let Some(t) = tiers.upgrade() {
                t.settle(false);
            }
        }
    }
}
