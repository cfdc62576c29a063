//! Run-time arrays of a call: owned buffers and strided array descriptors.
//!
//! A [`Buffer`] is a standard-layout `Value` whose data pointer was taken
//! once at creation; kernels write through that pointer and nothing else
//! touches the `Value` until the buffer is turned back into a result. An
//! [`Arr`] describes one variable's array during a call: a data pointer to
//! its first logical element, shape and strides (in elements, possibly zero
//! or negative), and the buffer it lives in (`None` for caller inputs and
//! graph constants, which are never written). Views share the buffer's
//! `Arc`, so a buffer is uniquely owned exactly when no other variable
//! aliases it — the condition for reusing it in place or returning it.
//!
//! Allocation is fallible: a shape whose size overflows, or that the
//! allocator refuses, is an error naming the op, never an abort.

use std::sync::Arc;

use ndarray::{ArrayD, IxDyn};
use smallvec::SmallVec;

use crate::error::Result;
use crate::graph::{DType, Value};

/// An owned, standard-layout array that kernels write into.
#[derive(Debug)]
pub struct Buffer {
    value: Value,
    ptr: usize,
}

impl Buffer {
    /// A zero-filled buffer of `shape` for op `op` (large buffers come from
    /// `calloc`, so zeroing is free until first touch). An error naming `op`
    /// when the size overflows or the allocator refuses it.
    pub fn zeros(op: &str, dtype: DType, shape: &[usize]) -> Result<Buffer> {
        let bytes = crate::eval::array_bytes(op, dtype, shape)?;
        let n = bytes / dtype.size_of();
        let oom = || crate::eval::out_of_memory(op, bytes, dtype, shape);
        let sh = IxDyn(shape);
        fn wrap<T>(sh: IxDyn, v: Vec<T>) -> ArrayD<T> {
            ArrayD::from_shape_vec(sh, v).expect("sized")
        }
        // SAFETY: all-zero bytes are `false` for bool and 0 for every number type.
        let value = unsafe {
            match dtype {
                DType::Bool => Value::Bool(wrap(sh, zeroed_vec(n).ok_or_else(oom)?)),
                DType::U8 => Value::U8(wrap(sh, zeroed_vec(n).ok_or_else(oom)?)),
                DType::I8 => Value::I8(wrap(sh, zeroed_vec(n).ok_or_else(oom)?)),
                DType::U16 => Value::U16(wrap(sh, zeroed_vec(n).ok_or_else(oom)?)),
                DType::U32 => Value::U32(wrap(sh, zeroed_vec(n).ok_or_else(oom)?)),
                DType::U64 => Value::U64(wrap(sh, zeroed_vec(n).ok_or_else(oom)?)),
                DType::I16 => Value::I16(wrap(sh, zeroed_vec(n).ok_or_else(oom)?)),
                DType::I32 => Value::I32(wrap(sh, zeroed_vec(n).ok_or_else(oom)?)),
                DType::I64 => Value::I64(wrap(sh, zeroed_vec(n).ok_or_else(oom)?)),
                DType::F32 => Value::F32(wrap(sh, zeroed_vec(n).ok_or_else(oom)?)),
                DType::F64 => Value::F64(wrap(sh, zeroed_vec(n).ok_or_else(oom)?)),
            }
        };
        let b = Buffer::from_value(value);
        // Fresh large buffers are untouched (calloc maps zero pages lazily):
        // ask for huge pages before the first write faults them in.
        kiln_runtime::mem::advise_hugepages(b.ptr(), b.len() * dtype.size_of());
        Ok(b)
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.len() * self.dtype().size_of()
    }

    /// Zeroes every element.
    pub fn zero(&mut self) {
        // SAFETY: `ptr` addresses the buffer's `bytes()` bytes, which this
        // exclusive borrow owns; all-zero bytes are a valid value of every dtype.
        unsafe { std::ptr::write_bytes(self.ptr(), 0, self.bytes()) };
    }

    /// The same storage with a new shape of the same number of elements.
    pub fn reshaped(self, shape: &[usize]) -> Buffer {
        let ptr = self.ptr;
        let value = self.into_value(shape);
        Buffer { value, ptr }
    }

    /// Wraps a value (converted to standard layout if needed).
    pub fn from_value(value: Value) -> Buffer {
        let mut value = crate::map_value!(value, a => if a.is_standard_layout() { a } else { a.as_standard_layout().into_owned() });
        let ptr = crate::with_value!(&mut value, a => a.as_mut_ptr() as usize);
        Buffer { value, ptr }
    }

    /// The data pointer.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr as *mut u8
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.value.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.value.is_empty()
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.value.dtype()
    }

    /// The buffer as a value of `shape` (same number of elements).
    pub fn into_value(self, shape: &[usize]) -> Value {
        if self.value.shape() == shape {
            return self.value;
        }
        crate::map_value!(self.value, a => a.into_shape_with_order(IxDyn(shape)).expect("same number of elements"))
    }
}

/// `n` zeroed elements from the global allocator's `alloc_zeroed` (calloc),
/// or `None` when it refuses them or their size overflows a `Layout`.
///
/// # Safety
/// The all-zero bit pattern must be a valid `T`.
unsafe fn zeroed_vec<T>(n: usize) -> Option<Vec<T>> {
    if n == 0 || std::mem::size_of::<T>() == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<T>(n).ok()?;
    // SAFETY: `layout` has a non-zero size (n > 0, T not zero-sized).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut T;
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` comes from the global allocator with the layout of `n`
    // `T`s (a Vec's layout for capacity `n`); its `n` elements are zero
    // bytes, a valid `T` by the caller's contract.
    Some(unsafe { Vec::from_raw_parts(ptr, n, n) })
}

/// A free list of intermediate buffers kept across calls of one Function,
/// so large intermediates are not re-allocated (and re-faulted) every call.
///
/// Thread-safe (a mutex around the list; it is held only to push or pop).
/// Bounded: at most [`BufferPool::MAX_BUFFERS`] buffers and
/// [`BufferPool::MAX_BYTES`] bytes are kept; smaller buffers than
/// [`BufferPool::MIN_BYTES`] are never pooled (malloc serves them well).
#[derive(Debug, Default)]
pub struct BufferPool {
    free: std::sync::Mutex<Vec<Buffer>>,
}

impl BufferPool {
    /// Buffers below this size are not pooled.
    pub const MIN_BYTES: usize = 64 << 10;
    /// Most buffers kept.
    pub const MAX_BUFFERS: usize = 8;
    /// Most bytes kept.
    pub const MAX_BYTES: usize = 1 << 30;

    /// A pooled buffer of `dtype` with exactly `shape`'s element count, if any
    /// (its contents are whatever the last user left).
    pub fn take(&self, dtype: DType, shape: &[usize]) -> Option<Buffer> {
        let n = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))?;
        if n.saturating_mul(dtype.size_of()) < Self::MIN_BYTES {
            return None;
        }
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let i = free
            .iter()
            .position(|b| b.dtype() == dtype && b.len() == n)?;
        let b = free.swap_remove(i);
        drop(free);
        Some(b.reshaped(shape))
    }

    /// Returns a buffer to the pool (dropped if too small or the pool is full).
    pub fn give(&self, b: Buffer) {
        if b.bytes() < Self::MIN_BYTES {
            return;
        }
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let held: usize = free.iter().map(Buffer::bytes).sum();
        if free.len() < Self::MAX_BUFFERS && held + b.bytes() <= Self::MAX_BYTES {
            free.push(b);
        }
    }
}

/// A strided view of one variable's array during a call.
#[derive(Debug, Clone)]
pub struct Arr {
    /// Address of the first logical element.
    pub ptr: *mut u8,
    /// Shape.
    pub shape: SmallVec<[usize; 4]>,
    /// Strides in elements.
    pub strides: SmallVec<[isize; 4]>,
    /// Element type.
    pub dtype: DType,
    /// The owning buffer (`None`: read-only caller input or constant).
    pub buf: Option<Arc<Buffer>>,
}

/// Row-major contiguous strides of `shape`.
pub fn c_strides(shape: &[usize]) -> SmallVec<[isize; 4]> {
    let mut s: SmallVec<[isize; 4]> = SmallVec::from_elem(0, shape.len());
    let mut acc = 1isize;
    for d in (0..shape.len()).rev() {
        s[d] = acc;
        acc *= shape[d].max(1) as isize;
    }
    s
}

impl Arr {
    /// An array over a whole fresh buffer.
    pub fn from_buffer(buf: Buffer, shape: &[usize]) -> Arr {
        let dtype = buf.dtype();
        let ptr = buf.ptr();
        Arr {
            ptr,
            shape: shape.into(),
            strides: c_strides(shape),
            dtype,
            buf: Some(Arc::new(buf)),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when the elements are row-major contiguous from `ptr`
    /// (size-1 dimensions may have any stride).
    pub fn is_standard(&self) -> bool {
        let want = c_strides(&self.shape);
        self.shape
            .iter()
            .zip(&self.strides)
            .zip(&want)
            .all(|((&n, &s), &w)| n <= 1 || s == w)
    }

    /// True when this array is the whole of a buffer nobody else references.
    pub fn owns_whole_buffer(&self) -> bool {
        match &self.buf {
            Some(b) => {
                Arc::strong_count(b) == 1
                    && b.ptr() == self.ptr
                    && b.len() == self.len()
                    && self.is_standard()
            }
            None => false,
        }
    }

    /// Reads element `offset` (in elements from `ptr`) as `i64` (floats
    /// truncate, a `u64` gives its bit pattern).
    ///
    /// # Safety
    /// `offset` must address an element of this array.
    pub unsafe fn read_i64(&self, offset: isize) -> i64 {
        // SAFETY: the caller guarantees the element exists; `ptr` is aligned for `dtype`.
        unsafe {
            match self.dtype {
                DType::Bool | DType::U8 => *self.ptr.offset(offset) as i64,
                DType::I8 => *(self.ptr as *const i8).offset(offset) as i64,
                DType::I16 => *(self.ptr as *const i16).offset(offset) as i64,
                DType::U16 => *(self.ptr as *const u16).offset(offset) as i64,
                DType::U32 => *(self.ptr as *const u32).offset(offset) as i64,
                DType::U64 => *(self.ptr as *const u64).offset(offset) as i64,
                DType::I32 => *(self.ptr as *const i32).offset(offset) as i64,
                DType::I64 => *(self.ptr as *const i64).offset(offset),
                DType::F32 => *(self.ptr as *const f32).offset(offset) as i64,
                DType::F64 => *(self.ptr as *const f64).offset(offset) as i64,
            }
        }
    }

    /// Reads element `offset` (in elements from `ptr`) as `f64`.
    ///
    /// # Safety
    /// `offset` must address an element of this array.
    pub unsafe fn read_f64(&self, offset: isize) -> f64 {
        // SAFETY: the caller guarantees the element exists; `ptr` is aligned for `dtype`.
        unsafe {
            match self.dtype {
                DType::F32 => f64::from(*(self.ptr as *const f32).offset(offset)),
                DType::F64 => *(self.ptr as *const f64).offset(offset),
                _ => self.read_i64(offset) as f64,
            }
        }
    }

    /// Reads every element in logical order as `i64` (for small shape vectors).
    pub fn to_i64_vec(&self) -> Vec<i64> {
        let n = self.len();
        let mut out = Vec::with_capacity(n);
        let mut idx = vec![0usize; self.shape.len()];
        for _ in 0..n {
            let off: isize = idx
                .iter()
                .zip(&self.strides)
                .map(|(&i, &s)| i as isize * s)
                .sum();
            // SAFETY: `idx` stays within `shape`, so the offset addresses an element.
            out.push(unsafe { self.read_i64(off) });
            for d in (0..idx.len()).rev() {
                idx[d] += 1;
                if idx[d] < self.shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        out
    }
}
