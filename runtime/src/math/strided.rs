//! Strided reads into contiguous blocks, for the linker's element-wise
//! driver (an input strided along the innermost axis is gathered into a
//! scratch block before the kernel's vector path runs over it):
//! `kiln_gather_64(src, stride, dst, n)` and `kiln_gather_32(..)` copy the
//! `n` elements of 8 or 4 bytes lying `stride` elements apart from `src`
//! to `dst[0..n]`, as bits (any dtype of that size).
//!
//! A stride of 2 (every other column, `X[:, ::2]`) reads whole groups of
//! consecutive elements as vectors and keeps the even ones (LLVM turns the
//! group's selection into shuffles: on AVX-512 two loads and one
//! `vpermt2q` per 8 outputs, where the element loop took a load and a
//! store per element). Any other stride is an element-by-element loop.
//!
//! Invariant: a group read for stride 2 never goes past the element that
//! follows it (a group of `G` outputs from element `j` reads up to element
//! `2j + 2G - 1` of `src`, and runs only when output `j + G`, at `2j + 2G`,
//! exists), so every byte read lies between two elements of the view.

use std::ptr;

/// Outputs per group of the stride-2 path for 8-byte elements (16 elements
/// read: two AVX-512 or four AVX2 vectors).
const GROUP_64: usize = 8;

/// Outputs per group of the stride-2 path for 4-byte elements.
const GROUP_32: usize = 16;

/// The gathers' body for elements of type `T`, in stride-2 groups of `G`
/// outputs read from `G2 = 2 G` consecutive elements.
///
/// # Safety
/// As for [`kiln_gather_64`].
#[inline(always)]
unsafe fn gather<T: Copy, const G: usize, const G2: usize>(
    src: *const T,
    stride: isize,
    dst: *mut T,
    n: usize,
) {
    const { assert!(G2 == 2 * G) };
    let mut j = 0;
    if stride == 2 {
        while j + G < n {
            // SAFETY: elements 2j .. 2j + 2G - 1 lie before output j + G's
            // element 2(j + G), which exists (j + G < n): all within the
            // view's span (module invariant); dst[j .. j + G] is writable.
            unsafe {
                let g = ptr::read_unaligned(src.add(2 * j) as *const [T; G2]);
                for l in 0..G {
                    dst.add(j + l).write_unaligned(g[2 * l]);
                }
            }
            j += G;
        }
    }
    while j < n {
        // SAFETY: element j of the view and slot j of `dst` exist (j < n).
        unsafe {
            let v = src.offset(j as isize * stride).read_unaligned();
            dst.add(j).write_unaligned(v);
        }
        j += 1;
    }
}

dispatched!(
    /// Copies the `n` 8-byte elements at `src`, `src + stride`, ... (`stride`
    /// in elements, either sign) to `dst[0..n]`. `src` must address
    /// elements of one strided view: every byte between its first and last
    /// element is readable (a stride of 2 reads whole groups of them); `dst`
    /// must not overlap the view; neither pointer needs any alignment.
    kiln_gather_64 [gather_64_avx512, gather_64_avx2, gather_64_base] (src: *const u64, stride: isize, dst: *mut u64, n: usize) = gather::<u64, GROUP_64, { 2 * GROUP_64 }>(src, stride, dst, n)
);
dispatched!(
    /// [`kiln_gather_64`] for 4-byte elements.
    kiln_gather_32 [gather_32_avx512, gather_32_avx2, gather_32_base] (src: *const u32, stride: isize, dst: *mut u32, n: usize) = gather::<u32, GROUP_32, { 2 * GROUP_32 }>(src, stride, dst, n)
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every stride and length around the group sizes gives exactly the
    /// element-by-element copy, and writes nothing past `n`.
    #[test]
    fn gathers_match_the_element_loop_at_every_stride_and_length() {
        /// `gather` of `src`'s elements from `start` at every stride and
        /// length against the indexed copy, with `sentinel` after `n`.
        fn check<T: Copy + PartialEq + std::fmt::Debug>(
            src: &[T],
            sentinel: T,
            gather: unsafe extern "C" fn(*const T, isize, *mut T, usize),
        ) {
            for stride in [-3isize, -2, -1, 1, 2, 3, 5] {
                for n in [0usize, 1, 7, 8, 9, 15, 16, 17, 33, 64, 100] {
                    let start = if stride < 0 {
                        src.len() as isize - 1
                    } else {
                        0
                    };
                    let want: Vec<T> = (0..n)
                        .map(|j| src[(start + j as isize * stride) as usize])
                        .collect();
                    let mut got = vec![sentinel; n + 4];
                    // SAFETY: the n elements from `start` lie in `src` (600
                    // elements; |stride| <= 5 and n <= 100 reach at most 495
                    // from either end); `got` has n + 4 slots.
                    unsafe { gather(src.as_ptr().offset(start), stride, got.as_mut_ptr(), n) };
                    assert_eq!(&got[..n], &want[..], "stride {stride} n {n}");
                    assert!(got[n..].iter().all(|&v| v == sentinel), "wrote past n");
                }
            }
        }
        let src64: Vec<u64> = (0..600).map(|i| i * 1_000_003 + 7).collect();
        check(&src64, u64::MAX, kiln_gather_64);
        let src32: Vec<u32> = (0..600).map(|i| i * 7919 + 3).collect();
        check(&src32, u32::MAX, kiln_gather_32);
    }

    /// The stride-2 path reads nothing past a view's last element: views
    /// of every length end on the last bytes before a page that may not be
    /// read (`PROT_NONE`), where a read past them would fault.
    #[cfg(unix)]
    #[test]
    fn stride_two_reads_end_at_the_last_element() {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        // SAFETY: a fresh private anonymous mapping of two pages, the
        // second made unreadable; unmapped at the end.
        let base = unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            assert_eq!(
                libc::mprotect((p as *mut u8).add(page) as *mut _, page, libc::PROT_NONE),
                0
            );
            p as *mut u8
        };
        let words = page / 8;
        for i in 0..words {
            // SAFETY: word i of the readable first page.
            unsafe { (base as *mut u64).add(i).write(i as u64) };
        }
        for n in 1usize..=70 {
            // The view's last element is the first page's last word.
            let first = words - 1 - 2 * (n - 1);
            let mut got = vec![0u64; n];
            // SAFETY: the n elements at stride 2 from `first` lie in the first page.
            unsafe { kiln_gather_64((base as *const u64).add(first), 2, got.as_mut_ptr(), n) };
            let want: Vec<u64> = (0..n).map(|j| (first + 2 * j) as u64).collect();
            assert_eq!(got, want, "n {n}");
            let first32 = 2 * words - 1 - 2 * (n - 1);
            let mut got32 = vec![0u32; n];
            // SAFETY: as above, for 4-byte elements.
            unsafe { kiln_gather_32((base as *const u32).add(first32), 2, got32.as_mut_ptr(), n) };
            // SAFETY: the same elements, read one by one.
            let want32: Vec<u32> = (0..n)
                .map(|j| unsafe { *(base as *const u32).add(first32 + 2 * j) })
                .collect();
            assert_eq!(got32, want32, "32-bit n {n}");
        }
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(base as *mut _, 2 * page) };
    }
}
