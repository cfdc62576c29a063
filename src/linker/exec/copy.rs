//! Strided copies: plain Rust kernels with the element-wise kernel ABI
//! ([`KernelFn`]), so that `drive` runs and splits them across
//! threads exactly like JIT kernels; and the copies a call makes with them
//! (fresh results, copies of inputs, `call_into` destinations).
//!
//! A copy moves bytes and computes nothing, so it needs no code generation:
//! one monomorphic kernel per element size serves every dtype, and a
//! compiled function no longer carries a JIT copy kernel per dtype (about
//! 150 µs of code generation each). Used for results that must be fresh
//! arrays, non-contiguous inputs of `Reshape`, `Alloc`'s broadcast fill, and
//! `call_into` destinations of any layout.
//!
//! Invariant: operand 0 is the source and operand 1 the destination; they
//! do not overlap (every caller copies into a buffer it just allocated or
//! into the caller's distinct output array).

use std::sync::Arc;

use super::drive::{drive, KernelFn, ParallelOptions};
use crate::error::Result;
use crate::graph::{DType, Value};
use crate::linker::buffer::{permuted_strides, Arr, BufferPool};

/// The copy kernel for elements of `dtype`.
pub fn kernel(dtype: DType) -> KernelFn {
    match dtype.size_of() {
        1 => strided_copy::<u8>,
        2 => strided_copy::<u16>,
        4 => strided_copy::<u32>,
        _ => strided_copy::<u64>,
    }
}

/// Element `i` of operand 1 = element `i` of operand 0, for `i < n`, with
/// byte strides `strides[0]` and `strides[1]`.
///
/// # Safety
/// `ptrs` and `strides` point to two entries each; for every `i < n`,
/// `ptrs[0] + i * strides[0]` is a readable `T` and `ptrs[1] + i *
/// strides[1]` a writable `T`, and the two ranges do not overlap.
unsafe extern "C" fn strided_copy<T: Copy>(ptrs: *const *mut u8, strides: *const isize, n: usize) {
    let es = std::mem::size_of::<T>() as isize;
    // SAFETY: two entries each (the caller's contract).
    let (src, dst, ss, ds) = unsafe { (*ptrs, *ptrs.add(1), *strides, *strides.add(1)) };
    if ss == es && ds == es {
        // SAFETY: both ranges are n contiguous elements and do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n * es as usize) };
    } else if ss == 0 && ds == es {
        // SAFETY: the source element is readable, the destination is n
        // contiguous writable elements; unaligned access is allowed.
        unsafe {
            let v = (src as *const T).read_unaligned();
            let out = std::slice::from_raw_parts_mut(dst as *mut std::mem::MaybeUninit<T>, n);
            out.fill(std::mem::MaybeUninit::new(v));
        }
    } else {
        for i in 0..n as isize {
            // SAFETY: element i of each operand is in bounds (the contract).
            unsafe {
                let v = (src.offset(i * ss) as *const T).read_unaligned();
                (dst.offset(i * ds) as *mut T).write_unaligned(v);
            }
        }
    }
}

/// Copies `x` into a fresh dense buffer laid out in `x`'s memory order
/// (numpy's `order='K'`: a transposed or Fortran-ordered `x` gives a copy
/// of the same order, made by one contiguous pass; a strided or broadcast
/// view a row-major copy). Every element is written, so the buffer need
/// not be zeroed first. The buffer comes from `pool` when one fits.
pub fn copy(par: ParallelOptions, pool: &BufferPool, x: &Arr) -> Result<Arr> {
    let buf = pool.take_or_uninit("copy", x.dtype, &x.shape)?;
    let mut out = Arr::from_buffer(buf, &x.shape);
    if let Some(order) = x.memory_order() {
        out.strides = permuted_strides(&x.shape, &order);
    }
    copy_into(par, x, &out);
    Ok(out)
}

/// Copies the elements of `x` into `out`, an array of the same dtype and
/// shape, any layout, that overlaps `x` nowhere and is writable: a
/// (parallel) memcpy when both are contiguous, else the strided copy
/// kernel of [`kernel`].
pub fn copy_into(par: ParallelOptions, x: &Arr, out: &Arr) {
    debug_assert!(x.dtype == out.dtype && x.shape == out.shape);
    // Both dense in the same layout (row-major or another axis order): the
    // elements lie in the same order in both, one block of bytes each.
    let same_dense = x.strides == out.strides && x.is_dense() && out.is_dense();
    if (x.is_standard() && out.is_standard()) || same_dense {
        let bytes = x.len() * x.dtype.size_of();
        let (src, dst) = (x.ptr as usize, out.ptr as usize);
        let chunk = |s: usize, e: usize| {
            // SAFETY: [s, e) is within the `bytes` bytes of both arrays
            // (contiguous from `ptr`, their lowest address: dense layouts
            // have positive strides), which do not overlap (the caller's
            // guarantee); chunks are disjoint.
            unsafe {
                std::ptr::copy_nonoverlapping((src + s) as *const u8, (dst + s) as *mut u8, e - s)
            }
        };
        let esz = x.dtype.size_of();
        if par.threshold > 0 && x.len() >= par.threshold {
            kiln_runtime::parallel::parallel_for(bytes, par.grain * esz, &chunk);
        } else {
            chunk(0, bytes);
        }
        return;
    }
    let es = x.dtype.size_of();
    drive(
        kernel(x.dtype),
        &[x.ptr, out.ptr],
        &[&x.strides, &out.strides],
        &[es, es],
        &x.shape,
        par,
        None,
    );
}

/// An owned value with the contents of `x`: its buffer, in `x`'s layout,
/// when `x` is the whole of a buffer nobody else references, else a copy
/// ([`copy`]: in `x`'s memory order, into a buffer from `pool` when one fits).
pub fn to_value(par: ParallelOptions, pool: &BufferPool, x: Arr) -> Result<Value> {
    let x = if x.owns_whole_buffer() {
        x
    } else {
        copy(par, pool, &x)?
    };
    let buf = x.buf.expect("owned buffer");
    Ok(Arc::try_unwrap(buf)
        .expect("uniquely owned")
        .into_value_strided(&x.shape, &x.strides))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dtype: DType, src: &[u8], ss: isize, dst: &mut [u8], ds: isize, n: usize) {
        let ptrs = [src.as_ptr() as *mut u8, dst.as_mut_ptr()];
        let strides = [ss, ds];
        // SAFETY: the tests size both buffers for n elements at these strides.
        unsafe { kernel(dtype)(ptrs.as_ptr(), strides.as_ptr(), n) };
    }

    #[test]
    fn contiguous_strided_and_broadcast_copies() {
        let src: Vec<u8> = (0..64).collect();
        // Contiguous f64: 4 elements.
        let mut dst = vec![0u8; 32];
        run(DType::F64, &src, 8, &mut dst, 8, 4);
        assert_eq!(dst, src[..32]);
        // Every other i32 element.
        let mut dst = vec![0u8; 16];
        run(DType::I32, &src, 8, &mut dst, 4, 4);
        let want: Vec<u8> = [0usize, 8, 16, 24]
            .iter()
            .flat_map(|&o| src[o..o + 4].to_vec())
            .collect();
        assert_eq!(dst, want);
        // Broadcast one i16 into 5, and a strided destination for u8.
        let mut dst = vec![0u8; 10];
        run(DType::I16, &src[6..], 0, &mut dst, 2, 5);
        assert_eq!(dst, [6, 7].repeat(5));
        let mut dst = vec![0u8; 6];
        run(DType::Bool, &src, 1, &mut dst, 2, 3);
        assert_eq!(dst, [0, 0, 1, 0, 2, 0]);
        // n = 0 touches nothing.
        let mut dst = vec![9u8; 4];
        run(DType::F32, &src, 4, &mut dst, 4, 0);
        assert_eq!(dst, [9; 4]);
    }
}
