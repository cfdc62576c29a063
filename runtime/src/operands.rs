//! Checks JIT kernels run on their own operand tables.
//!
//! [`kiln_strides_are`] tells an element-wise kernel of many operands
//! whether their byte strides allow its vector path, in one call instead of
//! four instructions per operand (a kernel of 64 operands spent 350 of its
//! 2523 instructions on the check).

/// `kiln_strides_are(strides, n, size, allow_zero)`: 1 when each of the `n`
/// byte strides at `strides` equals `size` (or 0, when `allow_zero` is
/// nonzero), else 0.
///
/// # Safety
/// `strides` must point to `n` readable words (a kernel's own stride array).
pub unsafe extern "C" fn kiln_strides_are(
    strides: *const isize,
    n: usize,
    size: isize,
    allow_zero: u64,
) -> u8 {
    // SAFETY: the caller guarantees n readable words.
    let s = unsafe { std::slice::from_raw_parts(strides, n) };
    u8::from(s.iter().all(|&s| s == size || (allow_zero != 0 && s == 0)))
}

/// The `extern "C"` entry points of this module as (symbol, address).
pub fn operand_symbols() -> Vec<(&'static str, *const u8)> {
    vec![("kiln_strides_are", kiln_strides_are as *const u8)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_are_checked_with_and_without_broadcasting() {
        let check = |s: &[isize], size, zero| {
            // SAFETY: the slice holds s.len() words.
            unsafe { kiln_strides_are(s.as_ptr(), s.len(), size, zero) }
        };
        assert_eq!(check(&[8, 8, 8], 8, 0), 1);
        assert_eq!(check(&[8, 0, 8], 8, 0), 0);
        assert_eq!(check(&[8, 0, 8], 8, 1), 1);
        assert_eq!(check(&[8, 16, 0], 8, 1), 0);
        assert_eq!(check(&[-8], 8, 1), 0);
        assert_eq!(check(&[4, 4], 4, 0), 1);
        assert_eq!(check(&[], 8, 0), 1);
    }
}
