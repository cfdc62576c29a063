//! Reduction accumulators, shared by lowering, code generation and
//! execution: the accumulator dtype of a reduction ([`acc_dtype`]), its
//! identity ([`identity_bits`]), the fold of partial results
//! ([`fold_partials`]), the accumulator modes a kernel handles
//! ([`Modes`]) and the runtime's column passes ([`column_symbol`],
//! [`column_pass`]).
//!
//! Invariant: accumulators are `f64` for float inputs, `u64` (wrapping,
//! unsigned max / min) for `u64` inputs and `i64` (wrapping) for the other
//! integer and bool inputs and for `All` / `Any` (0 or 1), 8 bytes each, as
//! in the reference evaluator. Narrower unsigned inputs are exact in `i64`.

use crate::graph::DType;
use crate::ops::ReduceOp;

/// The accumulator dtype of `op` on inputs of dtype `input`.
pub fn acc_dtype(op: ReduceOp, input: DType) -> DType {
    if matches!(op, ReduceOp::All | ReduceOp::Any) {
        DType::I64
    } else if input == DType::U64 {
        DType::U64
    } else if !input.is_float() {
        DType::I64
    } else {
        DType::F64
    }
}

/// The initial accumulator value (bits of an `f64`, an `i64` or a `u64`).
pub fn identity_bits(op: ReduceOp, acc: DType) -> u64 {
    let f = acc == DType::F64;
    match op {
        ReduceOp::Sum | ReduceOp::Any => 0,
        ReduceOp::Prod | ReduceOp::All => {
            if f {
                1f64.to_bits()
            } else {
                1
            }
        }
        ReduceOp::Max => {
            if f {
                f64::NEG_INFINITY.to_bits()
            } else if acc == DType::U64 {
                0
            } else {
                i64::MIN as u64
            }
        }
        ReduceOp::Min => {
            if f {
                f64::INFINITY.to_bits()
            } else if acc == DType::U64 {
                u64::MAX
            } else {
                i64::MAX as u64
            }
        }
    }
}

/// Folds the accumulator values `partials` (bits of `acc` values, in
/// order) into the accumulator value `init` with `op`, as a kernel's row
/// mode folds elements of the accumulator dtype: wrapping integer
/// arithmetic, NaN-propagating max / min. Combines the partials of a
/// chunked full reduction (a few per million elements), so no kernel is
/// generated for it.
pub fn fold_partials(op: ReduceOp, acc: DType, init: u64, partials: &[u64]) -> u64 {
    let mut a = [init];
    for &x in partials {
        combine_into(op, acc, &mut a, &[x]);
    }
    a[0]
}

/// `dst[j] = op(dst[j], src[j])` over the common length, on bits of `acc`
/// values, as [`fold_partials`] combines two values: how the partial
/// accumulator arrays of a chunked reduction over outer axes are folded,
/// in chunk order. The op is matched once, outside the loops.
pub fn combine_into(op: ReduceOp, acc: DType, dst: &mut [u64], src: &[u64]) {
    use crate::ops::scalar::{nan_max, nan_min};
    fn each(dst: &mut [u64], src: &[u64], f: impl Fn(u64, u64) -> u64) {
        for (a, &x) in dst.iter_mut().zip(src) {
            *a = f(*a, x);
        }
    }
    let f = acc == DType::F64;
    let u = acc == DType::U64;
    let (ff, fi) = (f64::from_bits, |v: u64| v as i64);
    match op {
        ReduceOp::Sum if f => each(dst, src, |a, x| (ff(a) + ff(x)).to_bits()),
        ReduceOp::Sum => each(dst, src, |a, x| fi(a).wrapping_add(fi(x)) as u64),
        ReduceOp::Prod if f => each(dst, src, |a, x| (ff(a) * ff(x)).to_bits()),
        ReduceOp::Prod => each(dst, src, |a, x| fi(a).wrapping_mul(fi(x)) as u64),
        ReduceOp::Max if f => each(dst, src, |a, x| nan_max(ff(a), ff(x)).to_bits()),
        ReduceOp::Max if u => each(dst, src, |a, x| a.max(x)),
        ReduceOp::Min if u => each(dst, src, |a, x| a.min(x)),
        ReduceOp::Max => each(dst, src, |a, x| fi(a).max(fi(x)) as u64),
        ReduceOp::Min if f => each(dst, src, |a, x| nan_min(ff(a), ff(x)).to_bits()),
        ReduceOp::Min => each(dst, src, |a, x| fi(a).min(fi(x)) as u64),
        ReduceOp::All => each(dst, src, |a, x| (a != 0 && x != 0) as u64),
        ReduceOp::Any => each(dst, src, |a, x| (a != 0 || x != 0) as u64),
    }
}

/// The accumulator modes a reduction kernel handles (see the module
/// header): a kernel is generated with the code of its modes only.
///
/// `exec::drive` runs a kernel in row mode when the innermost dimension
/// left after dropping size-1 dimensions is reduced (or none is left), in
/// column mode when it is kept; [`Modes::needed`] is the set of modes
/// those rules can pick for a reduction's static shape. A kernel is never
/// run in a mode it lacks: `drive` then adds a unit innermost dimension
/// in a mode the kernel has (one element per call), which only a wrong
/// static analysis would ever need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Modes {
    /// Row mode only (accumulator stride 0).
    Row,
    /// Column mode only (one accumulator per element).
    Column,
    /// Both modes, chosen at run time from the accumulator stride.
    Both,
}

impl Modes {
    /// Whether row mode is handled.
    pub fn row(self) -> bool {
        self != Modes::Column
    }

    /// Whether column mode is handled.
    pub fn column(self) -> bool {
        self != Modes::Row
    }

    /// The modes of `self` or `other`.
    pub fn union(self, other: Modes) -> Modes {
        if self == other {
            self
        } else {
            Modes::Both
        }
    }

    /// Whether every mode of `other` is handled by `self`.
    pub fn covers(self, other: Modes) -> bool {
        self.union(other) == self
    }

    /// The modes a reduction over `axes` of an iteration space with static
    /// sizes `shape` (`None`: unknown) can run in. The innermost dimension
    /// larger than 1 at run time decides (see [`Modes`]): dimension `d` can
    /// be it when its size can differ from 1 and every later dimension's
    /// size can be 1. A reduction over every axis is row-only. Column mode
    /// is also needed by reductions over static rows shorter than
    /// [`SHORT_REDUCE`] with every other dimension kept (the private
    /// `Modes::short_rows` says when).
    pub fn needed(shape: &[Option<usize>], axes: &[usize]) -> Modes {
        let can_be_one = |d: usize| shape[d].is_none_or(|s| s == 1);
        let (mut row, mut column) = (false, false);
        for d in (0..shape.len()).rev() {
            if shape[d] != Some(1) {
                if axes.contains(&d) {
                    row = true;
                } else {
                    column = true;
                }
            }
            if !can_be_one(d) {
                break;
            }
        }
        // Every dimension of size 1: the driver's single call is row mode.
        if (0..shape.len()).all(can_be_one) {
            row = true;
        }
        match (row, column || Modes::short_rows(shape, axes)) {
            (true, true) => Modes::Both,
            (false, true) => Modes::Column,
            _ => Modes::Row,
        }
    }

    /// Whether a reduction over `axes` of static sizes `shape` can be one
    /// that the driver runs as column reductions over blocks of short rows
    /// (`exec::drive`'s `ShortReduce`): the product of the trailing reduced
    /// dimensions' sizes (static 1s among them) can be 2 to
    /// [`SHORT_REDUCE`] - 1 (its static factors' product is below the
    /// limit, and any unknown factor could bring it into that range), and
    /// every dimension before them is kept.
    fn short_rows(shape: &[Option<usize>], axes: &[usize]) -> bool {
        let reduced = |d: &usize| axes.contains(d) || shape[*d] == Some(1);
        let start = (0..shape.len())
            .rev()
            .find(|d| !reduced(d))
            .map_or(0, |d| d + 1);
        if start == 0 {
            return false;
        }
        let known: usize = shape[start..].iter().flatten().product();
        let unknown = shape[start..].iter().any(Option::is_none);
        let short = known < SHORT_REDUCE && (unknown || known >= 2);
        let kept = (0..start).all(|d| !axes.contains(&d) || shape[d] == Some(1));
        kept && short
    }
}

/// Reductions over an innermost dimension shorter than this (after
/// collapsing), with every dimension outside it kept, are run as column
/// reductions over blocks of rows when their kernel has column mode
/// (`exec::drive`'s `ShortReduce`).
pub const SHORT_REDUCE: usize = 16;

/// The runtime's column pass of `op` over contiguous `input` and
/// accumulators (C signature `void(A* acc, const T* x, size_t n, size_t
/// rows, ptrdiff_t row_stride)`, each accumulator updated exactly as the
/// sequential loop would, row by row), if it has one.
pub fn column_symbol(op: ReduceOp, input: DType) -> Option<&'static str> {
    use ReduceOp::*;
    Some(match (op, input) {
        (Sum, DType::F64) => "kiln_column_sum_f64",
        (Sum, DType::F32) => "kiln_column_sum_f32",
        (Prod, DType::F64) => "kiln_column_prod_f64",
        (Prod, DType::F32) => "kiln_column_prod_f32",
        (Max, DType::F64) => "kiln_column_max_f64",
        (Max, DType::F32) => "kiln_column_max_f32",
        (Min, DType::F64) => "kiln_column_min_f64",
        (Min, DType::F32) => "kiln_column_min_f32",
        (Sum, DType::I64 | DType::U64) => "kiln_column_sum_i64",
        (Sum, DType::I32) => "kiln_column_sum_i32",
        (Sum, DType::U32) => "kiln_column_sum_u32",
        (Sum, DType::I16) => "kiln_column_sum_i16",
        (Sum, DType::U16) => "kiln_column_sum_u16",
        (Sum, DType::I8) => "kiln_column_sum_i8",
        (Sum, DType::U8) => "kiln_column_sum_u8",
        (Max, DType::I64) => "kiln_column_max_i64",
        (Min, DType::I64) => "kiln_column_min_i64",
        (Max, DType::U64) => "kiln_column_max_u64",
        (Min, DType::U64) => "kiln_column_min_u64",
        (Max, DType::I32) => "kiln_column_max_i32",
        (Min, DType::I32) => "kiln_column_min_i32",
        (Max, DType::U32) => "kiln_column_max_u32",
        (Min, DType::U32) => "kiln_column_min_u32",
        (Max, DType::I16) => "kiln_column_max_i16",
        (Min, DType::I16) => "kiln_column_min_i16",
        (Max, DType::U16) => "kiln_column_max_u16",
        (Min, DType::U16) => "kiln_column_min_u16",
        (Max, DType::I8) => "kiln_column_max_i8",
        (Min, DType::I8) => "kiln_column_min_i8",
        (Max, DType::U8) => "kiln_column_max_u8",
        (Min, DType::U8) => "kiln_column_min_u8",
        _ => return None,
    })
}

/// The ABI of the runtime's column passes (`kiln_column_<op>_<dtype>`):
/// accumulators, the first row, the row length, the row count and the
/// row stride in elements of the input.
pub type ColumnPass = unsafe extern "C" fn(*mut u8, *const u8, usize, usize, isize);

/// The runtime's column pass of `op` over `input` (the entry point
/// [`column_symbol`] names), if it has one.
pub fn column_pass(op: ReduceOp, input: DType) -> Option<ColumnPass> {
    let symbol = column_symbol(op, input)?;
    kiln_runtime::symbols()
        .into_iter()
        .find(|(name, _)| *name == symbol)
        // SAFETY: the entry points `column_symbol` names have the
        // `ColumnPass` ABI, with typed pointers in place of byte pointers.
        .map(|(_, addr)| unsafe { std::mem::transmute::<*const u8, ColumnPass>(addr) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_column_pass_resolves_and_sums_rows() {
        use ReduceOp::*;
        for op in [Sum, Prod, Max, Min, All, Any] {
            for dt in [DType::F64, DType::F32, DType::I64, DType::U64, DType::I32] {
                let named = column_symbol(op, dt).is_some();
                assert_eq!(column_pass(op, dt).is_some(), named, "{op:?} {dt}");
            }
        }
        // Two rows of three, three elements apart, into f64 accumulators.
        let pass = column_pass(Sum, DType::F64).expect("an f64 column sum");
        let x = [1.0f64, 2.0, 3.0, 10.0, 20.0, 30.0];
        let mut acc = [0.5f64; 3];
        // SAFETY: three accumulators; two rows of three readable values,
        // three apart, not overlapping them.
        unsafe {
            pass(
                acc.as_mut_ptr() as *mut u8,
                x.as_ptr() as *const u8,
                3,
                2,
                3,
            )
        };
        assert_eq!(acc, [11.5, 22.5, 33.5]);
    }
}
