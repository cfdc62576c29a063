//! The `kiln` command line: `eval`, `rewrite`, `bench` and `dot`.
//! The logic lives in the library ([`kiln::cli`]); see `kiln --help`.
//!
//! With the default feature `jemalloc`, the binary's global allocator is
//! jemalloc, which keeps freed large blocks mapped (glibc returns blocks of
//! more than 32 MB to the kernel), so that repeated calls reuse a result's
//! pages instead of faulting and clearing fresh ones each time.

/// The process's allocator (see the module header).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its first allocation: freed pages are
/// kept for reuse for the life of the process (`dirty_decay_ms:-1`; the
/// default decay purged a freed 80 MB result before the next call could
/// reuse it, measured in BENCHMARKS.md), a fit for a command that runs one
/// job and exits.
#[cfg(feature = "jemalloc")]
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: &u8 = &b"dirty_decay_ms:-1\0"[0];

fn main() {
    std::process::exit(kiln::cli::main());
}
