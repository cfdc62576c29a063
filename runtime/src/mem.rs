//! Memory helpers for large run-time buffers: huge-page advice, streaming
//! copies, and cache prefetch hints.
//!
//! [`advise_hugepages`] asks Linux for transparent huge pages on a freshly
//! allocated, not yet touched region (as numpy does for allocations of 4 MB
//! and more): with THP in `madvise` mode a 10^7-element f64 buffer then
//! faults in ~40 2 MB pages instead of ~20 000 4 KB pages. It only sets a
//! flag on the mapping; contents and ownership are unchanged, so it is a
//! no-op (and harmless) elsewhere or when the kernel refuses.
//!
//! [`copy_streaming`] copies with non-temporal stores (and [`store_fence`]
//! orders them), for large outputs written block by block from scratch.
//!
//! [`kiln_prefetch_operands`] is called by JIT code once per block of a
//! blocked element-wise kernel, to fetch the next block of every input
//! (with [`kiln_prefetch`]) or output (with [`kiln_prefetch_write`]) while
//! the current one is computed (Cranelift has no prefetch instruction). One
//! call covers all of a kernel's inputs or outputs, from its own pointer
//! and stride arrays: a call per operand made the block loop of a kernel of
//! 64 operands 370 instructions longer. Prefetches are hints only: any
//! address is allowed and operand memory is never accessed.

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

/// `kiln_prefetch(p, bytes)`: asks the CPU to start loading the cache lines
/// of `[p, p + bytes)` into L1, so that a blocked kernel's next block of
/// input streams in from memory while the current block is computed. Any
/// address is allowed: prefetch instructions never fault and never change
/// memory. Inlinable into Rust callers (the gathers prefetch once per row).
#[inline]
pub extern "C" fn kiln_prefetch(p: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let mut off = 0;
        while off < bytes {
            // SAFETY: PREFETCHT0 is a hint; it never faults, even on an
            // unmapped address, and has no architectural effect.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off) as *const i8) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (p, bytes);
    }
}

/// Copies `bytes` bytes from `src` to `dst`, storing the 16-byte aligned
/// part of `dst` with non-temporal stores (x86-64 `MOVNTDQ`, in SSE2, so
/// on every x86-64 CPU): the destination's lines are written to memory
/// without first being read into the cache, which saves a third of the
/// memory traffic of a large streaming output. Elsewhere, a plain copy.
/// Non-temporal stores are weakly ordered: call [`store_fence`] before
/// another thread may read the destination.
///
/// # Safety
/// `src` must be valid for `bytes` reads and `dst` for `bytes` writes, and
/// the two must not overlap.
pub unsafe fn copy_streaming(dst: *mut u8, src: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let head = dst.align_offset(16).min(bytes);
        let body = (bytes - head) / 16 * 16;
        // SAFETY: every access stays inside the caller's `bytes` bytes of
        // `src` and `dst`: the head and tail are plain copies, and the
        // body's 16-byte stores start at a 16-byte aligned `dst + head`
        // (SSE2 is part of x86-64).
        unsafe {
            std::ptr::copy_nonoverlapping(src, dst, head);
            let mut off = head;
            while off < head + body {
                let v = _mm_loadu_si128(src.add(off) as *const __m128i);
                _mm_stream_si128(dst.add(off) as *mut __m128i, v);
                off += 16;
            }
            std::ptr::copy_nonoverlapping(src.add(off), dst.add(off), bytes - off);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, bytes) };
    }
}

/// Orders the non-temporal stores of [`copy_streaming`] before every
/// later store (`SFENCE`), so that a thread that synchronises with this
/// one afterwards sees them.
pub fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SFENCE has no operands and no effect but ordering.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// The `extern "C"` entry points of this module as (symbol, address).
pub fn mem_symbols() -> Vec<(&'static str, *const u8)> {
    vec![(
        "kiln_prefetch_operands",
        kiln_prefetch_operands as *const u8,
    )]
}

/// `kiln_prefetch_operands(ptrs, strides, n, next, m, write)`: prefetches
/// elements `next..next + m` of each of `n` operands, operand `k` starting
/// at `ptrs[k]` with a byte stride of `strides[k]` (those of stride 0 or
/// less ask for nothing), for writing when `write` is nonzero
/// ([`kiln_prefetch_write`]), else for reading ([`kiln_prefetch`]).
///
/// # Safety
/// `ptrs` and `strides` must point to `n` readable words each (a kernel's
/// own argument arrays). The operands' memory is never accessed: any
/// addresses they give are allowed.
pub unsafe extern "C" fn kiln_prefetch_operands(
    ptrs: *const *const u8,
    strides: *const isize,
    n: usize,
    next: usize,
    m: usize,
    write: u64,
) {
    for k in 0..n {
        // SAFETY: the caller guarantees n readable words in each array.
        let (p, s) = unsafe { (*ptrs.add(k), *strides.add(k)) };
        if s <= 0 {
            continue;
        }
        let s = s as usize;
        // Only an address for the hint: wrapping arithmetic, never dereferenced.
        let start = (p as usize).wrapping_add(next.wrapping_mul(s)) as *const u8;
        let bytes = m.saturating_mul(s);
        if write != 0 {
            kiln_prefetch_write(start, bytes);
        } else {
            kiln_prefetch(start, bytes);
        }
    }
}

/// `kiln_prefetch_write(p, bytes)`: like [`kiln_prefetch`], with the intent
/// to write (`PREFETCHW`, where the CPU has it): a blocked kernel's next
/// block of output is fetched in a writable state while the current block
/// is computed, instead of stalling on each store's read for ownership.
/// Falls back to [`kiln_prefetch`] on CPUs without `PREFETCHW`.
pub extern "C" fn kiln_prefetch_write(p: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_prefetchw() {
            // SAFETY: the CPU supports PREFETCHW (checked just above), and a
            // prefetch never faults or changes memory.
            unsafe { prefetch_write_lines(p as usize, bytes) };
            return;
        }
    }
    kiln_prefetch(p, bytes);
}

/// Whether the CPU implements `PREFETCHW` (CPUID 8000_0001h, ECX bit 8),
/// read once.
#[cfg(target_arch = "x86_64")]
fn has_prefetchw() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0 = unknown, 1 = no, 2 = yes.
    static STATE: AtomicU8 = AtomicU8::new(0);
    match STATE.load(Ordering::Relaxed) {
        0 => {
            let max_ext = std::arch::x86_64::__cpuid(0x8000_0000).eax;
            let yes = max_ext >= 0x8000_0001
                && std::arch::x86_64::__cpuid(0x8000_0001).ecx & (1 << 8) != 0;
            STATE.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
        s => s == 2,
    }
}

/// `PREFETCHW` on every 64-byte line of the addresses `[p, p + bytes)`
/// (inline assembly: the `prfchw` target feature is not stable in Rust).
///
/// # Safety
/// The CPU must support `PREFETCHW` (see [`has_prefetchw`]).
#[cfg(target_arch = "x86_64")]
unsafe fn prefetch_write_lines(p: usize, bytes: usize) {
    let mut off = 0;
    while off < bytes {
        // SAFETY: the caller guarantees PREFETCHW exists; it is a hint that
        // never faults, reads no register but the address and writes none.
        unsafe {
            std::arch::asm!(
                "prefetchw [{0}]",
                in(reg) p.wrapping_add(off),
                options(nostack, preserves_flags, readonly)
            )
        };
        off += 64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_copies_equal_plain_copies_at_any_alignment_and_length() {
        let src: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for d_off in 0..17 {
            for s_off in [0, 1, 5, 8] {
                for bytes in [0, 1, 15, 16, 17, 31, 64, 100, 250] {
                    let mut dst = vec![0xAAu8; 300];
                    // SAFETY: both ranges lie inside their vectors and the
                    // vectors are distinct.
                    unsafe {
                        copy_streaming(dst.as_mut_ptr().add(d_off), src.as_ptr().add(s_off), bytes)
                    };
                    store_fence();
                    assert_eq!(&dst[d_off..d_off + bytes], &src[s_off..s_off + bytes]);
                    assert!(dst[..d_off].iter().all(|&b| b == 0xAA), "nothing before");
                    assert!(
                        dst[d_off + bytes..].iter().all(|&b| b == 0xAA),
                        "nothing after"
                    );
                }
            }
        }
    }

    #[test]
    fn prefetch_hints_accept_any_address_and_change_nothing() {
        let v: Vec<u8> = (0..=255).collect();
        kiln_prefetch(v.as_ptr(), v.len());
        kiln_prefetch_write(v.as_ptr(), v.len());
        // Past the end, unmapped, unaligned: still only hints.
        kiln_prefetch(v.as_ptr().wrapping_add(1 << 20), 4096);
        kiln_prefetch_write(std::ptr::null(), 4096);
        kiln_prefetch_write(3 as *const u8, 100);
        // Operand tables: real, wild, null and zero- or negative-stride operands.
        let ptrs = [v.as_ptr(), std::ptr::null(), 7 as *const u8, v.as_ptr()];
        let strides = [8isize, 8, 0, -8];
        for write in [0, 1] {
            // SAFETY: both arrays hold four words; operand memory is never accessed.
            unsafe { kiln_prefetch_operands(ptrs.as_ptr(), strides.as_ptr(), 4, 3, 32, write) };
            // SAFETY: as above; next * stride overflows and wraps (still a hint).
            unsafe {
                kiln_prefetch_operands(ptrs.as_ptr(), strides.as_ptr(), 2, usize::MAX, 2, write)
            };
        }
        assert!(v.iter().enumerate().all(|(i, &b)| b as usize == i));
        let names: Vec<&str> = mem_symbols().into_iter().map(|(s, _)| s).collect();
        assert_eq!(names, ["kiln_prefetch_operands"]);
    }
}
