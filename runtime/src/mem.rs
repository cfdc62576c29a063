//! Memory helpers for large run-time buffers.
//!
//! [`advise_hugepages`] asks Linux for transparent huge pages on a freshly
//! allocated, not yet touched region (as numpy does for allocations of 4 MB
//! and more): with THP in `madvise` mode a 10^7-element f64 buffer then
//! faults in ~40 2 MB pages instead of ~20 000 4 KB pages. It only sets a
//! flag on the mapping; contents and ownership are unchanged, so it is a
//! no-op (and harmless) elsewhere or when the kernel refuses.

/// Regions smaller than this are not advised (mirrors numpy's 4 MB).
pub const HUGEPAGE_MIN_BYTES: usize = 4 << 20;

/// Advises transparent huge pages for the whole 4 KB pages inside
/// `[ptr, ptr + bytes)`, when `bytes >= HUGEPAGE_MIN_BYTES` (Linux only).
pub fn advise_hugepages(ptr: *mut u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        if bytes < HUGEPAGE_MIN_BYTES {
            return;
        }
        const PAGE: usize = 4096;
        let start = (ptr as usize).div_ceil(PAGE) * PAGE;
        let end = (ptr as usize + bytes) / PAGE * PAGE;
        if end <= start {
            return;
        }
        // SAFETY: [start, end) lies inside the caller's live allocation (the
        // bounds are rounded inwards); MADV_HUGEPAGE changes only the paging
        // policy of the mapping, never its contents, and failure is ignored.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (ptr, bytes);
    }
}
