//! Input layouts of the differential comparison: one logical input value
//! laid out in memory as a contiguous array, a strided slice (every other
//! element of the last axis), a reversed view (negative stride on axis 0),
//! a broadcast view (stride 0 on axis 0; the value is first made constant
//! along that axis, see [`Layout::adapt`]) or an offset view (the elements
//! start one element past the allocation: misaligned for vector loads).
//!
//! Invariant: a [`Laid`] value's views ([`Laid::arg`], [`Laid::arg_mut`])
//! always show the logical value it was built from; the gaps of the
//! strided and offset layouts hold a sentinel that a kernel reading the
//! wrong elements would bring into its result.

use kiln::linker::{Arg, ArgMut};
use kiln::Value;
use ndarray::{ArrayD, ArrayViewD, ArrayViewMutD, Axis, IxDyn, Slice};

/// How an input is laid out in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// A standard-layout array.
    Contiguous,
    /// Every other element of the last axis of a twice-as-long array.
    Strided,
    /// A view with a negative stride on axis 0.
    Reversed,
    /// A stride-0 view along axis 0 of one row.
    Broadcast,
    /// A contiguous view starting one element into its allocation.
    Offset,
}

/// Every layout, in the order [`Layout::pick`] draws from.
pub const LAYOUTS: [Layout; 5] = [
    Layout::Contiguous,
    Layout::Strided,
    Layout::Reversed,
    Layout::Broadcast,
    Layout::Offset,
];

impl Layout {
    /// The layout number `k` (modulo the number of layouts).
    pub fn pick(k: u64) -> Layout {
        LAYOUTS[(k % LAYOUTS.len() as u64) as usize]
    }

    /// The layout this one falls back to for a value of `shape` (a 0-d
    /// value, or an empty axis 0, has nothing to stride, reverse or broadcast).
    fn effective(self, shape: &[usize]) -> Layout {
        match self {
            Layout::Strided | Layout::Reversed | Layout::Broadcast
                if shape.is_empty() || shape[0] == 0 =>
            {
                Layout::Contiguous
            }
            l => l,
        }
    }

    /// The value this layout can show: for [`Layout::Broadcast`], `v` with
    /// every row along axis 0 replaced by the first; else `v` itself.
    pub fn adapt(self, v: &Value) -> Value {
        if self.effective(v.shape()) != Layout::Broadcast {
            return v.clone();
        }
        macro_rules! rows {
            ($a:expr, $k:ident) => {{
                let row = $a.index_axis(Axis(0), 0);
                Value::$k(row.broadcast(IxDyn($a.shape())).expect("a row").to_owned())
            }};
        }
        match v {
            Value::Bool(a) => rows!(a, Bool),
            Value::U8(a) => rows!(a, U8),
            Value::I8(a) => rows!(a, I8),
            Value::I16(a) => rows!(a, I16),
            Value::U16(a) => rows!(a, U16),
            Value::U32(a) => rows!(a, U32),
            Value::U64(a) => rows!(a, U64),
            Value::I32(a) => rows!(a, I32),
            Value::I64(a) => rows!(a, I64),
            Value::F32(a) => rows!(a, F32),
            Value::F64(a) => rows!(a, F64),
        }
    }
}

/// A value of the gaps of the strided and offset layouts, one per dtype.
trait Sentinel: Clone {
    const SENTINEL: Self;
}
impl Sentinel for bool {
    const SENTINEL: Self = true;
}
impl Sentinel for u8 {
    const SENTINEL: Self = 173;
}
impl Sentinel for i8 {
    const SENTINEL: Self = -77;
}
impl Sentinel for i16 {
    const SENTINEL: Self = -7777;
}
impl Sentinel for u16 {
    const SENTINEL: Self = 57_777;
}
impl Sentinel for u32 {
    const SENTINEL: Self = 3_777_777_777;
}
impl Sentinel for u64 {
    const SENTINEL: Self = 17_777_777_777_777_777_777;
}
impl Sentinel for i32 {
    const SENTINEL: Self = -777_777;
}
impl Sentinel for i64 {
    const SENTINEL: Self = -777_777_777_777;
}
impl Sentinel for f32 {
    const SENTINEL: Self = 1234.5;
}
impl Sentinel for f64 {
    const SENTINEL: Self = -98765.4321;
}

/// A logical value held in memory as a given layout.
#[derive(Debug, Clone)]
pub struct Laid {
    backing: Value,
    layout: Layout,
    shape: Vec<usize>,
}

/// The backing array of `a` laid out as `layout`.
fn back<T: Sentinel>(a: &ArrayD<T>, layout: Layout) -> ArrayD<T> {
    let shape = a.shape();
    let standard = |it: Vec<T>, s: &[usize]| ArrayD::from_shape_vec(IxDyn(s), it).expect("sized");
    match layout {
        Layout::Contiguous => standard(a.iter().cloned().collect(), shape),
        Layout::Strided => {
            let last = shape.len() - 1;
            let mut wide = shape.to_vec();
            wide[last] *= 2;
            ArrayD::from_shape_fn(IxDyn(&wide), |i| {
                let mut i = i.clone();
                if i[last] % 2 == 1 {
                    T::SENTINEL
                } else {
                    i[last] /= 2;
                    a[i].clone()
                }
            })
        }
        Layout::Reversed => {
            let mut v = a.view();
            v.invert_axis(Axis(0));
            standard(v.iter().cloned().collect(), shape)
        }
        Layout::Broadcast => {
            let row = a.index_axis(Axis(0), 0);
            standard(row.iter().cloned().collect(), &shape[1..])
        }
        Layout::Offset => {
            let mut flat = vec![T::SENTINEL];
            flat.extend(a.iter().cloned());
            standard(flat, &[a.len() + 1])
        }
    }
}

/// The view of `b` (built by [`back`]) that shows the logical value of `shape`.
fn view<'a, T>(b: &'a ArrayD<T>, layout: Layout, shape: &[usize]) -> ArrayViewD<'a, T> {
    match layout {
        Layout::Contiguous => b.view(),
        Layout::Strided => b.slice_axis(Axis(shape.len() - 1), Slice::new(0, None, 2)),
        Layout::Reversed => {
            let mut v = b.view();
            v.invert_axis(Axis(0));
            v
        }
        Layout::Broadcast => b.broadcast(IxDyn(shape)).expect("a row"),
        Layout::Offset => b
            .slice_axis(Axis(0), Slice::from(1..))
            .into_shape_with_order(IxDyn(shape))
            .expect("contiguous"),
    }
}

/// The mutable view of `b` showing the logical value (`None` for a
/// broadcast view, which cannot be written).
fn view_mut<'a, T>(
    b: &'a mut ArrayD<T>,
    layout: Layout,
    shape: &[usize],
) -> Option<ArrayViewMutD<'a, T>> {
    Some(match layout {
        Layout::Contiguous => b.view_mut(),
        Layout::Strided => b.slice_axis_mut(Axis(shape.len() - 1), Slice::new(0, None, 2)),
        Layout::Reversed => {
            let mut v = b.view_mut();
            v.invert_axis(Axis(0));
            v
        }
        Layout::Broadcast => return None,
        Layout::Offset => b
            .slice_axis_mut(Axis(0), Slice::from(1..))
            .into_shape_with_order(IxDyn(shape))
            .expect("contiguous"),
    })
}

macro_rules! each_dtype {
    ($v:expr, $a:ident => $e:expr) => {
        match $v {
            Value::Bool($a) => Value::Bool($e),
            Value::U8($a) => Value::U8($e),
            Value::I8($a) => Value::I8($e),
            Value::I16($a) => Value::I16($e),
            Value::U16($a) => Value::U16($e),
            Value::U32($a) => Value::U32($e),
            Value::U64($a) => Value::U64($e),
            Value::I32($a) => Value::I32($e),
            Value::I64($a) => Value::I64($e),
            Value::F32($a) => Value::F32($e),
            Value::F64($a) => Value::F64($e),
        }
    };
}

impl Laid {
    /// `v` laid out as `layout` (or the layout it falls back to, see
    /// [`Layout::adapt`]; `v` must already be adapted for a broadcast).
    pub fn new(v: &Value, layout: Layout) -> Laid {
        let layout = layout.effective(v.shape());
        Laid {
            backing: each_dtype!(v, a => back(a, layout)),
            layout,
            shape: v.shape().to_vec(),
        }
    }

    /// The layout actually used.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// A read-only view of the logical value.
    pub fn arg(&self) -> Arg<'_> {
        let (l, s) = (self.layout, &self.shape[..]);
        match &self.backing {
            Value::Bool(b) => Arg::Bool(view(b, l, s)),
            Value::U8(b) => Arg::U8(view(b, l, s)),
            Value::I8(b) => Arg::I8(view(b, l, s)),
            Value::I16(b) => Arg::I16(view(b, l, s)),
            Value::U16(b) => Arg::U16(view(b, l, s)),
            Value::U32(b) => Arg::U32(view(b, l, s)),
            Value::U64(b) => Arg::U64(view(b, l, s)),
            Value::I32(b) => Arg::I32(view(b, l, s)),
            Value::I64(b) => Arg::I64(view(b, l, s)),
            Value::F32(b) => Arg::F32(view(b, l, s)),
            Value::F64(b) => Arg::F64(view(b, l, s)),
        }
    }

    /// A mutable view of the logical value (read-only for a broadcast view).
    pub fn arg_mut(&mut self) -> ArgMut<'_> {
        let (l, s) = (self.layout, self.shape.clone());
        if l == Layout::Broadcast {
            return ArgMut::Ref(self.arg());
        }
        let none = "only a broadcast has no mutable view";
        match &mut self.backing {
            Value::Bool(b) => ArgMut::Bool(view_mut(b, l, &s).expect(none)),
            Value::U8(b) => ArgMut::U8(view_mut(b, l, &s).expect(none)),
            Value::I8(b) => ArgMut::I8(view_mut(b, l, &s).expect(none)),
            Value::I16(b) => ArgMut::I16(view_mut(b, l, &s).expect(none)),
            Value::U16(b) => ArgMut::U16(view_mut(b, l, &s).expect(none)),
            Value::U32(b) => ArgMut::U32(view_mut(b, l, &s).expect(none)),
            Value::U64(b) => ArgMut::U64(view_mut(b, l, &s).expect(none)),
            Value::I32(b) => ArgMut::I32(view_mut(b, l, &s).expect(none)),
            Value::I64(b) => ArgMut::I64(view_mut(b, l, &s).expect(none)),
            Value::F32(b) => ArgMut::F32(view_mut(b, l, &s).expect(none)),
            Value::F64(b) => ArgMut::F64(view_mut(b, l, &s).expect(none)),
        }
    }

    /// The whole backing allocation (gaps included), to check that a call
    /// wrote nothing into an input it was not allowed to write.
    pub fn backing(&self) -> &Value {
        &self.backing
    }
}

/// Bitwise equality of two values, except that any NaN equals any NaN.
pub fn identical(a: &Value, b: &Value) -> bool {
    if a.dtype() != b.dtype() || a.shape() != b.shape() {
        return false;
    }
    if !a.dtype().is_float() {
        return a.to_i64_array() == b.to_i64_array();
    }
    let (x, y) = (a.to_f64_array(), b.to_f64_array());
    x.iter()
        .zip(y.iter())
        .all(|(p, q)| p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()))
}
