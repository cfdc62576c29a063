//! Run-time arrays of a call: owned buffers and strided array descriptors.
//!
//! A [`Buffer`] is standard-layout storage whose data pointer was taken
//! once at creation; kernels write through that pointer and nothing else
//! touches the storage until the buffer is turned back into a result. Its
//! storage is a zero-filled or wrapped `Value`, or, for buffers that a
//! kernel overwrites entirely, a plain allocation with unspecified contents
//! ([`Buffer::uninit`], numpy's `empty`): the allocator then reuses blocks
//! that earlier results freed without faulting or clearing them again, if
//! it kept them (glibc hands blocks over 32 MB back to the kernel; the
//! `kiln` binary's jemalloc keeps them). Such
//! a buffer becomes a `Value` only once every element is written. An
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

use ndarray::{ArrayD, IxDyn, ShapeBuilder};
use smallvec::SmallVec;

use crate::error::Result;
use crate::graph::{DType, Value};

/// An owned, standard-layout array that kernels write into.
///
/// Its storage is either a [`Value`] (zero-filled, or wrapping an existing
/// array) or a raw allocation whose contents are not yet initialised
/// ([`Buffer::uninit`]); the raw form becomes a `Value` only in
/// [`Buffer::into_value`], after the kernels have written every element.
#[derive(Debug)]
pub struct Buffer {
    storage: Storage,
    ptr: usize,
    dtype: DType,
    len: usize,
}

/// Where a [`Buffer`]'s elements live.
#[derive(Debug)]
enum Storage {
    /// An ndarray value in standard layout.
    Value(Value),
    /// A global-allocator block with the layout of a `Vec` of `len`
    /// elements of the dtype, possibly uninitialised.
    Raw(RawAlloc),
}

/// A block from the global allocator, freed on drop unless handed over to a `Vec`.
#[derive(Debug)]
struct RawAlloc {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

// SAFETY: a `RawAlloc` uniquely owns its block, exactly as a `Vec<u8>`
// does (which is `Send` and `Sync`); it hands out no references, and
// concurrent writes through the buffer's pointer are the kernels' business,
// as for a `Value`-backed buffer.
unsafe impl Send for RawAlloc {}
// SAFETY: as for `Send`: `&RawAlloc` gives access to nothing but the layout.
unsafe impl Sync for RawAlloc {}

impl Drop for RawAlloc {
    fn drop(&mut self) {
        // SAFETY: `ptr` was returned by `std::alloc::alloc` with `layout`
        // and has not been freed or handed over (`into_value` forgets the
        // `RawAlloc` after giving the block to a `Vec`).
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
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
        kiln_runtime::mem::advise_hugepages(b.ptr(), b.bytes());
        Ok(b)
    }

    /// A buffer of `shape` for op `op` whose contents are unspecified: the
    /// caller writes every element before the buffer becomes a value
    /// ([`Buffer::into_value`]). Unlike [`Buffer::zeros`] it asks the
    /// allocator for plain memory, so a block freed by an earlier call (a
    /// result the caller dropped) is reused as is: no page faults and no
    /// clearing, as numpy's `empty`. An error naming `op` when the size
    /// overflows or the allocator refuses it.
    pub fn uninit(op: &str, dtype: DType, shape: &[usize]) -> Result<Buffer> {
        let bytes = crate::eval::array_bytes(op, dtype, shape)?;
        if bytes == 0 {
            return Buffer::zeros(op, dtype, shape);
        }
        let oom = || crate::eval::out_of_memory(op, bytes, dtype, shape);
        // The layout of a `Vec` of `bytes / size` elements of the dtype
        // (every dtype's alignment is its size).
        let layout =
            std::alloc::Layout::from_size_align(bytes, dtype.size_of()).map_err(|_| oom())?;
        // SAFETY: `layout` has a non-zero size (checked above).
        let ptr = std::ptr::NonNull::new(unsafe { std::alloc::alloc(layout) }).ok_or_else(oom)?;
        kiln_runtime::mem::advise_hugepages(ptr.as_ptr(), bytes);
        if crate::graph::fgraph::verify_by_default() {
            // Under verification (tests, debug builds) the unspecified
            // contents are a poison pattern, so that a kernel that leaves an
            // element unwritten shows up as a NaN / -1 / `true` mismatch
            // against the reference instead of passing on fresh zero pages.
            let byte = if dtype == DType::Bool { 1 } else { 0xFF };
            // SAFETY: the block is `bytes` bytes long and owned here.
            unsafe { std::ptr::write_bytes(ptr.as_ptr(), byte, bytes) };
        }
        Ok(Buffer {
            storage: Storage::Raw(RawAlloc { ptr, layout }),
            ptr: ptr.as_ptr() as usize,
            dtype,
            len: bytes / dtype.size_of(),
        })
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.len * self.dtype.size_of()
    }

    /// Zeroes every element.
    pub fn zero(&mut self) {
        // SAFETY: `ptr` addresses the buffer's `bytes()` bytes, which this
        // exclusive borrow owns; all-zero bytes are a valid value of every dtype.
        unsafe { std::ptr::write_bytes(self.ptr(), 0, self.bytes()) };
    }

    /// The same storage with a new shape of the same number of elements.
    pub fn reshaped(self, shape: &[usize]) -> Buffer {
        debug_assert_eq!(shape.iter().product::<usize>(), self.len);
        match self.storage {
            Storage::Raw(_) => self,
            Storage::Value(v) => {
                let value = crate::map_value!(v, a => a.into_shape_with_order(IxDyn(shape)).expect("same number of elements"));
                Buffer::from_value(value)
            }
        }
    }

    /// Wraps a value (converted to standard layout if needed).
    pub fn from_value(value: Value) -> Buffer {
        let mut value = crate::map_value!(value, a => if a.is_standard_layout() { a } else { a.as_standard_layout().into_owned() });
        let ptr = crate::with_value!(&mut value, a => a.as_mut_ptr() as usize);
        Buffer {
            ptr,
            dtype: value.dtype(),
            len: value.len(),
            storage: Storage::Value(value),
        }
    }

    /// The data pointer.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr as *mut u8
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The buffer as a value of `shape` whose element at index `i` lies at
    /// element offset `sum(i[d] * strides[d])` of the buffer: a dense layout
    /// ([`Arr::is_dense`]; row-major is one). A buffer from
    /// [`Buffer::uninit`] must have had every element written.
    pub fn into_value_strided(self, shape: &[usize], strides: &[isize]) -> Value {
        let n = self.len;
        let standard = shape
            .iter()
            .zip(strides)
            .zip(c_strides(shape))
            .all(|((&d, &s), c)| d <= 1 || s == c);
        if standard {
            return self.into_value(shape);
        }
        // Length-1 axes are never stepped over: stride 0 keeps them in bounds.
        let st: Vec<usize> = shape
            .iter()
            .zip(strides)
            .map(|(&d, &s)| {
                debug_assert!(d <= 1 || s > 0, "a dense layout has positive strides");
                if d <= 1 {
                    0
                } else {
                    s as usize
                }
            })
            .collect();
        let flat = self.into_value(&[n]);
        crate::map_value!(flat, a => {
            let (v, _) = a.into_raw_vec_and_offset();
            ArrayD::from_shape_vec(IxDyn(shape).strides(IxDyn(&st)), v)
                .expect("a dense layout of the buffer's elements")
        })
    }

    /// The buffer as a value of `shape` (same number of elements). A buffer
    /// from [`Buffer::uninit`] must have had every element written.
    pub fn into_value(self, shape: &[usize]) -> Value {
        let n = self.len;
        let sh = IxDyn(shape);
        let raw = match self.storage {
            Storage::Value(v) if v.shape() == shape => return v,
            Storage::Value(v) => {
                return crate::map_value!(v, a => a.into_shape_with_order(sh).expect("same number of elements"))
            }
            Storage::Raw(raw) => std::mem::ManuallyDrop::new(raw),
        };
        /// # Safety
        /// `p` is a global-allocator block with the layout of `n` `T`s whose
        /// elements are all initialised, and no one else owns it.
        unsafe fn adopt<T>(sh: IxDyn, p: *mut u8, n: usize) -> ArrayD<T> {
            // SAFETY: the caller's contract makes `p` a Vec's block of
            // capacity and length `n`.
            let v = unsafe { Vec::from_raw_parts(p as *mut T, n, n) };
            ArrayD::from_shape_vec(sh, v).expect("same number of elements")
        }
        let p = raw.ptr.as_ptr();
        // SAFETY: `p` is a global-allocator block with the layout of `n`
        // elements of the dtype (size n * size_of, alignment size_of, which is
        // each element type's alignment), i.e. a Vec's block of capacity `n`;
        // the kernels wrote all `n` elements (the contract of
        // `Buffer::uninit`); and the `RawAlloc` that owned the block is
        // never dropped (ManuallyDrop), so the Vec becomes its only owner.
        unsafe {
            match self.dtype {
                DType::Bool => Value::Bool(adopt(sh, p, n)),
                DType::U8 => Value::U8(adopt(sh, p, n)),
                DType::I8 => Value::I8(adopt(sh, p, n)),
                DType::I16 => Value::I16(adopt(sh, p, n)),
                DType::I32 => Value::I32(adopt(sh, p, n)),
                DType::I64 => Value::I64(adopt(sh, p, n)),
                DType::U16 => Value::U16(adopt(sh, p, n)),
                DType::U32 => Value::U32(adopt(sh, p, n)),
                DType::U64 => Value::U64(adopt(sh, p, n)),
                DType::F32 => Value::F32(adopt(sh, p, n)),
                DType::F64 => Value::F64(adopt(sh, p, n)),
            }
        }
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

/// A free list of buffers kept across calls of one Function, so large
/// intermediates, and results the caller hands back
/// ([`BufferPool::give_value`]), are not re-allocated (and re-faulted)
/// every call.
///
/// Thread-safe (a mutex around the list; it is held only to push or pop).
/// Bounded: at most [`BufferPool::MAX_BUFFERS`] buffers and
/// [`BufferPool::MAX_BYTES`] bytes are kept, and all the pools of the
/// process together (the Functions alive, such as the Python package's
/// cache of 256 compiled expressions) keep at most
/// [`BufferPool::PROCESS_MAX_BYTES`]; smaller buffers than
/// [`BufferPool::MIN_BYTES`] are never pooled (malloc serves them well).
#[derive(Debug, Default)]
pub struct BufferPool {
    free: std::sync::Mutex<Vec<Buffer>>,
}

/// Bytes held by every [`BufferPool`] of the process.
static POOLED_BYTES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Drop for BufferPool {
    fn drop(&mut self) {
        let free = self.free.get_mut().unwrap_or_else(|e| e.into_inner());
        let held: usize = free.iter().map(Buffer::bytes).sum();
        POOLED_BYTES.fetch_sub(held, std::sync::atomic::Ordering::Relaxed);
    }
}

impl BufferPool {
    /// Buffers below this size are not pooled.
    pub const MIN_BYTES: usize = 64 << 10;
    /// Most buffers kept.
    pub const MAX_BUFFERS: usize = 8;
    /// Most bytes kept.
    pub const MAX_BYTES: usize = 1 << 30;
    /// Most bytes kept by all the pools of the process together.
    pub const PROCESS_MAX_BYTES: usize = 1 << 30;

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
        POOLED_BYTES.fetch_sub(b.bytes(), std::sync::atomic::Ordering::Relaxed);
        Some(b.reshaped(shape))
    }

    /// Takes a result the caller is done with back into the pool, so that a
    /// later result of the same dtype and element count is written into its
    /// block instead of a fresh allocation (no page faults, no clearing). A
    /// value that does not own exactly its block (a view into a larger
    /// block, or negative strides) is dropped instead, as are small ones.
    pub fn give_value(&self, v: Value) {
        if v.len() * v.dtype().size_of() < Self::MIN_BYTES {
            return;
        }
        let flat = crate::map_value!(v, a => {
            let n = a.len();
            let (block, offset) = a.into_raw_vec_and_offset();
            if offset != Some(0) || block.len() != n {
                return;
            }
            ArrayD::from_shape_vec(IxDyn(&[n]), block).expect("n elements")
        });
        self.give(Buffer::from_value(flat));
    }

    /// A buffer for `shape` whose contents the caller overwrites entirely:
    /// a pooled one when one fits ([`BufferPool::take`]), else a fresh one
    /// with unspecified contents ([`Buffer::uninit`]; an error naming `op`
    /// when it cannot be allocated).
    pub fn take_or_uninit(&self, op: &str, dtype: DType, shape: &[usize]) -> Result<Buffer> {
        match self.take(dtype, shape) {
            Some(b) => Ok(b),
            None => Buffer::uninit(op, dtype, shape),
        }
    }

    /// Returns a buffer to the pool (dropped if too small, or if this pool
    /// or the process's pools together are full).
    pub fn give(&self, b: Buffer) {
        use std::sync::atomic::Ordering::Relaxed;
        let bytes = b.bytes();
        if bytes < Self::MIN_BYTES {
            return;
        }
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let held: usize = free.iter().map(Buffer::bytes).sum();
        if free.len() >= Self::MAX_BUFFERS || held + bytes > Self::MAX_BYTES {
            return;
        }
        // Reserve the bytes in the process's budget, or drop the buffer.
        let reserved = POOLED_BYTES.fetch_update(Relaxed, Relaxed, |p| {
            (p + bytes <= Self::PROCESS_MAX_BYTES).then_some(p + bytes)
        });
        if reserved.is_ok() {
            free.push(b);
        }
    }

    /// Bytes held by every pool of the process together.
    pub fn process_bytes() -> usize {
        POOLED_BYTES.load(std::sync::atomic::Ordering::Relaxed)
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

/// Strides (in elements) of a dense array of `shape` whose axes lie in
/// memory in the order `perm` (outermost first, a permutation of the axes):
/// the last axis of `perm` has stride 1.
pub fn permuted_strides(shape: &[usize], perm: &[usize]) -> SmallVec<[isize; 4]> {
    debug_assert_eq!(perm.len(), shape.len());
    let mut s: SmallVec<[isize; 4]> = SmallVec::from_elem(0, shape.len());
    let mut acc = 1isize;
    for &d in perm.iter().rev() {
        s[d] = acc;
        acc *= shape[d].max(1) as isize;
    }
    s
}

/// An array's axes in memory order (outermost first) and the sizes
/// `(outer, n, inner)` around one axis in it: [`Arr::lines_in_memory_order`].
pub type MemoryLines = (SmallVec<[usize; 4]>, (usize, usize, usize));

/// The memory order `order` (outermost first) of an array's axes with
/// axis `axis` reduced away: the order of the reduced array's axes (an
/// axis after `axis` moves down by one), in which a reduction along
/// `axis` that scans in memory order lays out its result.
pub fn order_without(order: &[usize], axis: usize) -> SmallVec<[usize; 4]> {
    order
        .iter()
        .filter(|&&d| d != axis)
        .map(|&d| if d > axis { d - 1 } else { d })
        .collect()
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

    /// The order in which this array's axes lie in memory, outermost first,
    /// when it is not row-major: the axes of more than one element sorted by
    /// decreasing absolute stride (ties keep axis order), then the size-1
    /// axes. `None` when that order is row-major, or when an axis of more
    /// than one element has stride 0 (a broadcast view has no order to
    /// follow).
    pub fn memory_order(&self) -> Option<SmallVec<[usize; 4]>> {
        let (mut big, small): (SmallVec<[usize; 4]>, SmallVec<[usize; 4]>) =
            (0..self.shape.len()).partition(|&d| self.shape[d] > 1);
        if big.iter().any(|&d| self.strides[d] == 0) {
            return None;
        }
        big.sort_by_key(|&d| std::cmp::Reverse(self.strides[d].unsigned_abs()));
        if big.windows(2).all(|w| w[0] < w[1]) {
            return None;
        }
        big.extend(small);
        Some(big)
    }

    /// For a dense array whose axes lie in memory in another order than
    /// row-major (transposed, Fortran-ordered, permuted): that order
    /// (outermost first, see [`Arr::memory_order`]) and the sizes `(outer,
    /// n, inner)` before, of and after `axis` in it. In memory the array is
    /// then the row-major array of its axes in that order: `outer` blocks
    /// of `n` rows of `inner` contiguous elements, with `axis`'s index
    /// increasing from row to row (a dense layout has positive strides).
    /// `None` for row-major or non-dense arrays.
    pub fn lines_in_memory_order(&self, axis: usize) -> Option<MemoryLines> {
        if !self.is_dense() {
            return None;
        }
        let order = self.memory_order()?;
        let at = order.iter().position(|&d| d == axis)?;
        let size = |ds: &[usize]| ds.iter().map(|&d| self.shape[d]).product::<usize>();
        let dims = (size(&order[..at]), self.shape[axis], size(&order[at + 1..]));
        Some((order, dims))
    }

    /// True when the elements fill `[ptr, ptr + len)` exactly, in some order
    /// of the axes, with positive strides (row-major is one such layout).
    pub fn is_dense(&self) -> bool {
        let mut axes: SmallVec<[(usize, isize); 4]> = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|(&n, _)| n > 1)
            .map(|(&n, &s)| (n, s))
            .collect();
        axes.sort_by_key(|&(_, s)| s);
        let mut want = 1isize;
        for (n, s) in axes {
            if s != want {
                return false;
            }
            want *= n as isize;
        }
        true
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

    /// True when this array is the whole of a buffer nobody else references
    /// (in any dense layout, see [`Arr::is_dense`]).
    pub fn owns_whole_buffer(&self) -> bool {
        match &self.buf {
            Some(b) => {
                Arc::strong_count(b) == 1
                    && b.ptr() == self.ptr
                    && b.len() == self.len()
                    && self.is_dense()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `f(i)` into element `i` of an f64 buffer through its pointer.
    fn fill_f64(b: &Buffer, f: impl Fn(usize) -> f64) {
        for i in 0..b.len() {
            // SAFETY: i < len, the buffer holds `len` aligned f64s.
            unsafe { (b.ptr() as *mut f64).add(i).write(f(i)) };
        }
    }

    #[test]
    fn an_uninit_buffer_becomes_the_value_its_kernel_wrote() {
        let b = Buffer::uninit("t", DType::F64, &[3, 4]).unwrap();
        assert_eq!((b.len(), b.bytes(), b.dtype()), (12, 96, DType::F64));
        fill_f64(&b, |i| i as f64 * 0.5);
        let b = b.reshaped(&[4, 3]);
        let v = b.into_value(&[2, 6]);
        let Value::F64(a) = v else { panic!("dtype") };
        assert_eq!(a.shape(), &[2, 6]);
        assert_eq!(
            a.iter().copied().collect::<Vec<_>>(),
            (0..12).map(|i| i as f64 * 0.5).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_given_back_value_lends_its_block_to_the_next_take() {
        let pool = BufferPool::default();
        let n = BufferPool::MIN_BYTES / 8 * 3;
        let v = ArrayD::from_shape_fn(IxDyn(&[3, n / 3]), |i| i[1] as f64);
        let block = v.as_ptr() as usize;
        pool.give_value(Value::F64(v));
        // Another dtype or size does not match; the same count in any shape does.
        assert!(pool.take(DType::I64, &[n]).is_none());
        assert!(pool.take(DType::F64, &[n + 1]).is_none());
        let b = pool.take(DType::F64, &[n / 3, 3]).expect("pooled");
        assert_eq!((b.ptr() as usize, b.len()), (block, n));
        assert!(pool.take(DType::F64, &[n]).is_none(), "taken once");
        // A view that does not start its block, a negatively strided one,
        // and a small value are dropped, not pooled.
        let mut big = ArrayD::<f64>::zeros(IxDyn(&[n + 1]));
        big.slice_collapse(ndarray::s![1..]);
        pool.give_value(Value::F64(big));
        let mut flipped = ArrayD::<f64>::zeros(IxDyn(&[n]));
        flipped.invert_axis(ndarray::Axis(0));
        pool.give_value(Value::F64(flipped));
        pool.give_value(Value::F64(ArrayD::zeros(IxDyn(&[16]))));
        assert!(pool.take(DType::F64, &[n]).is_none());
        assert!(pool.take(DType::F64, &[16]).is_none());
    }

    #[test]
    fn the_process_pools_together_keep_at_most_their_budget() {
        // Other tests of this binary pool buffers concurrently, so the
        // process total is only bounded, never compared exactly.
        let half = BufferPool::PROCESS_MAX_BYTES / 2 + 8;
        let pools: Vec<BufferPool> = (0..3).map(|_| BufferPool::default()).collect();
        let mut kept = 0;
        for p in &pools {
            // Zeroed lazily (`calloc`), never touched: it costs no memory.
            let b = Buffer::zeros("t", DType::U8, &[half]).unwrap();
            p.give(b);
            kept += usize::from(p.take(DType::U8, &[half]).is_some_and(|b| {
                p.give(b);
                true
            }));
            assert!(BufferPool::process_bytes() <= BufferPool::PROCESS_MAX_BYTES);
        }
        assert!(kept <= 1, "two halves exceed the budget: {kept} kept");
        drop(pools);
        assert!(
            BufferPool::process_bytes() < half,
            "dropped pools release their bytes"
        );
    }

    #[test]
    fn an_uninit_buffer_can_be_zeroed_dropped_or_empty() {
        let mut b = Buffer::uninit("t", DType::I32, &[5]).unwrap();
        b.zero();
        assert_eq!(b.into_value(&[5]), Value::I32(ArrayD::zeros(IxDyn(&[5]))));
        // Dropped without becoming a value: the block is freed (Miri-clean path).
        drop(Buffer::uninit("t", DType::Bool, &[7]).unwrap());
        let e = Buffer::uninit("t", DType::F32, &[0, 3]).unwrap();
        assert!(e.is_empty());
        assert_eq!(e.into_value(&[0, 3]).shape(), &[0, 3]);
    }

    #[test]
    fn an_uninit_buffer_too_large_is_an_error_naming_the_op() {
        let e = Buffer::uninit("myop", DType::F64, &[usize::MAX / 4, 8]).unwrap_err();
        assert!(
            e.to_string().contains("myop") && e.to_string().contains("too large"),
            "{e}"
        );
    }
}
