//! Code generation overlapped with lowering: a kernel handed over while
//! the linker is still building the IR of later ones is generated at once
//! by a helper on the runtime's pool, instead of waiting for
//! `JitBuilder::finish`.
//!
//! Lowering builds every kernel's IR on the calling thread. For the chain
//! graph of 3000 operations (25 kernels) that is about a third of the
//! compile (9.5 ms of 28 on Zen 1), in which the other cores would sit idle
//! if generation waited for the last kernel; with the overlap the chain's
//! code generation took 22.4 against 27.0 ms. Small kernels wait for
//! `finish` (`jit::HAND_OVER_INSTS`): waking a helper for them cost more
//! than it saved.
//!
//! The kernels and their generation are `jit`'s (`Overlap` is generic over
//! the kernel type and handed the generating function), so that this
//! module owns only the queue, the helpers and the results.
//!
//! Invariants: every submitted kernel is generated exactly once, by a
//! helper or by the caller in [`Overlap::finish`], which first takes every
//! kernel no helper has taken (so no kernel waits for a helper that never
//! starts) and then waits only for kernels a helper is generating. Each
//! kernel's IR is independent; a kernel is moved, whole, into the
//! queue and back out of the results, so no IR is shared between threads.
//! A panic during generation is caught and reported as that kernel's error.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::error::{Error, Result};

/// Generates one kernel in place; the error text on failure.
pub(super) type Generate<K> = dyn Fn(&mut K) -> Option<String> + Send + Sync;

/// Kernels (of type `K`) handed over for generation, and the helpers
/// generating them.
pub(super) struct Overlap<K: Send + 'static> {
    shared: Arc<Shared<K>>,
    /// Kernels submitted so far.
    submitted: usize,
    /// How many helpers may work at once (the pool's threads but the caller's).
    helpers: usize,
}

/// A generated kernel: its index, the kernel and its error, if any.
type Done<K> = (usize, K, Option<String>);

struct Shared<K> {
    generate: Box<Generate<K>>,
    /// Submitted kernels nobody has taken yet.
    queue: Mutex<VecDeque<(usize, K)>>,
    /// Generated kernels, in completion order.
    done: Mutex<Vec<Done<K>>>,
    /// Signalled each time a kernel is done.
    finished: Condvar,
    /// Helpers taking kernels from the queue.
    working: AtomicUsize,
}

/// Locks `m`, whose data stays consistent even if a holder panicked (every
/// critical section is one push or pop).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<K: Send + 'static> Overlap<K> {
    /// Overlapped generation by `generate`; `None` when the runtime has one
    /// thread (generation then waits for `finish`, on the caller).
    pub(super) fn new(generate: Box<Generate<K>>) -> Option<Self> {
        let helpers = kiln_runtime::parallel::num_threads().saturating_sub(1);
        (helpers > 0).then(|| Overlap {
            shared: Arc::new(Shared {
                generate,
                queue: Mutex::new(VecDeque::new()),
                done: Mutex::new(Vec::new()),
                finished: Condvar::new(),
                working: AtomicUsize::new(0),
            }),
            submitted: 0,
            helpers,
        })
    }

    /// Queues kernel `index` for generation and wakes a helper, unless
    /// `helpers` are already at work.
    pub(super) fn submit(&mut self, index: usize, kernel: K) {
        lock(&self.shared.queue).push_back((index, kernel));
        self.submitted += 1;
        if enlist(&self.shared.working, self.helpers) {
            let shared = self.shared.clone();
            let helpers = self.helpers;
            let spawned = kiln_runtime::parallel::spawn(move || loop {
                work(&shared, Take::Oldest);
                shared.working.fetch_sub(1, Ordering::AcqRel);
                // A kernel queued after this helper found the queue empty,
                // but before it left, would otherwise wait for `finish`.
                let empty = lock(&shared.queue).is_empty();
                if empty || !enlist(&shared.working, helpers) {
                    break;
                }
            });
            if !spawned {
                self.shared.working.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Generates on this thread every kernel no helper has taken, newest
    /// first (a helper takes the oldest), waits for the others, and returns
    /// all submitted kernels in index order, or the first error (in index
    /// order).
    pub(super) fn finish(self) -> Result<Vec<(usize, K)>> {
        work(&self.shared, Take::Newest);
        let mut done = lock(&self.shared.done);
        while done.len() < self.submitted {
            done = self
                .shared
                .finished
                .wait(done)
                .unwrap_or_else(|e| e.into_inner());
        }
        let mut done = std::mem::take(&mut *done);
        done.sort_by_key(|d| d.0);
        let mut kernels = Vec::with_capacity(done.len());
        for (i, kernel, err) in done {
            if let Some(e) = err {
                return Err(Error::Compile(e));
            }
            kernels.push((i, kernel));
        }
        Ok(kernels)
    }
}

/// Counts one more helper at work unless `max` already are; whether it did.
fn enlist(working: &AtomicUsize, max: usize) -> bool {
    working
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
            (w < max).then_some(w + 1)
        })
        .is_ok()
}

/// Which end of the queue a thread takes kernels from.
#[derive(Clone, Copy)]
enum Take {
    Oldest,
    Newest,
}

/// Generates queued kernels, taken from the `take` end, until the queue is
/// empty.
fn work<K>(shared: &Shared<K>, take: Take) {
    loop {
        let next = {
            let mut queue = lock(&shared.queue);
            match take {
                Take::Oldest => queue.pop_front(),
                Take::Newest => queue.pop_back(),
            }
        };
        let Some((i, mut kernel)) = next else {
            return;
        };
        let err = catch_unwind(AssertUnwindSafe(|| (shared.generate)(&mut kernel)))
            .unwrap_or_else(|_| Some(format!("code generation for kernel {i} panicked")));
        lock(&shared.done).push((i, kernel, err));
        shared.finished.notify_all();
    }
}
