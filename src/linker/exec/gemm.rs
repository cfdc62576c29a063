//! Execution of the matrix-product family (`Dot`, `BatchedDot`, `Gemm`):
//! operand casts, the alignment check of the inner dimensions, the runtime
//! GEMM for floats (writing into a fresh array, the caller's registered
//! array, or `z` itself for an inplace `Gemm`) and a wrapping native
//! product for integers. `BatchedDot` addresses every batch's matrices
//! through the operands' strides (no copies): one GEMM over all batches
//! when `b` is shared by all of them and `a`'s batches are the rows of one
//! strided matrix, else one GEMM per batch: whole batches spread over
//! threads (each GEMM single-threaded) when the products are small or the
//! batches share out evenly, else each GEMM threaded on its own
//! (`batch_split`). `Product` runs a float `Dot` or `Gemm` over a range
//! of its rows: all of them here, blocks of them in `exec::epilogue`.
//!
//! Invariants: the inner dimensions agree (`MatMul::new`,
//! `ops::batched_dot_shape`, which also checks the batch shapes); an inplace
//! `Gemm` overwrites `z` only when it has `dot(x, y)`'s shape and is not a
//! broadcast view; the output overlaps neither operand.

use kiln_runtime::gemm::{kiln_gemm_f32, kiln_gemm_f64, serial_gemm_f32, serial_gemm_f64};

use super::broadcast::is_broadcast_view;
use super::copy::copy_into;
use super::state::{err, Exec};
use crate::error::Result;
use crate::graph::{DType, Value};
use crate::linker::buffer::{Arr, Buffer};
use crate::linker::plan::step::{BatchedDotStep, DotStep, GemmStep};
use crate::linker::plan::Slot;

impl Exec<'_> {
    /// Runs a `Dot` step.
    pub(super) fn dot_step(&mut self, name: &str, step: &DotStep) -> Result<()> {
        let (a, b) = self.dot_operands(name, step)?;
        let res = self.dot(name, &a, &b, step.dtype, step.output)?;
        self.slots[step.output] = Some(res);
        Ok(())
    }

    /// The operands of a `Dot` step, cast to its dtype.
    pub(super) fn dot_operands(&mut self, name: &str, step: &DotStep) -> Result<(Arr, Arr)> {
        let mut a = self.get(step.a);
        let mut b = self.get(step.b);
        if let Some(c) = step.casts[0] {
            a = self.cast(name, &a, c, step.dtype)?;
        }
        if let Some(c) = step.casts[1] {
            b = self.cast(name, &b, c, step.dtype)?;
        }
        Ok((a, b))
    }

    /// Runs a `BatchedDot` step.
    pub(super) fn batched_dot_step(&mut self, name: &str, step: &BatchedDotStep) -> Result<()> {
        let BatchedDotStep {
            a,
            b,
            casts,
            output,
            dtype,
            broadcastable: [a_bc, b_bc],
        } = step;
        let mut a = self.get(*a);
        let mut b = self.get(*b);
        if let Some(c) = casts[0] {
            a = self.cast(name, &a, c, *dtype)?;
        }
        if let Some(c) = casts[1] {
            b = self.cast(name, &b, c, *dtype)?;
        }
        let sh = crate::ops::batched_dot_shape(&a.shape, &b.shape, a_bc, b_bc)
            .map_err(|m| err(name, m))?;
        let mut out_shape = sh.batch.clone();
        out_shape.extend([sh.m, sh.n]);
        let res = if dtype.is_float() {
            let c = self.alloc_slot(name, *output, *dtype, &out_shape)?;
            batched_gemm(&sh, &a, &b, &c, self.par.threshold > 0);
            c
        } else {
            batched_int_product(name, &sh, &a, &b, *dtype)?
        };
        self.slots[*output] = Some(res);
        Ok(())
    }

    /// Runs a `Gemm` step.
    pub(super) fn gemm_step(&mut self, name: &str, step: &GemmStep) -> Result<()> {
        let GemmStep {
            z,
            alpha,
            x,
            y,
            beta,
            output,
            dtype,
            inplace,
            z_desc,
        } = step;
        let ops = [*z, *alpha, *x, *y, *beta].map(|s| self.get(s));
        let [z, alpha, x, y, beta] = &ops;
        let res = self.gemm(
            name,
            (z, alpha, x, y, beta),
            *dtype,
            *output,
            *inplace,
            z_desc,
        )?;
        drop(ops);
        self.slots[*output] = Some(res);
        Ok(())
    }

    /// `a · b` into a new array for slot `output` (see [`Exec::alloc_slot`]).
    pub(super) fn dot(
        &mut self,
        name: &str,
        a: &Arr,
        b: &Arr,
        dtype: DType,
        output: Slot,
    ) -> Result<Arr> {
        let mm = MatMul::new(name, a, b)?;
        let MatMul {
            m,
            k,
            n,
            rsa,
            csa,
            rsb,
            csb,
            ..
        } = mm;
        let out_shape = mm.out_shape.clone();
        match dtype {
            // An inner product of contiguous f64 vectors: the runtime's dot
            // pass (GEMM's 1×1 tiles leave it far from memory speed).
            DType::F64 if m == 1 && n == 1 && (k < 2 || (csa == 1 && rsb == 1)) => {
                let c = self.alloc_slot(name, output, dtype, &out_shape)?;
                let threshold = if self.par.threshold > 0 {
                    self.par.threshold
                } else {
                    usize::MAX
                };
                // SAFETY: a's one row and b's one column hold k contiguous
                // f64 values (k < 2 needs no stride).
                let d = unsafe {
                    inner_product(a.ptr as *const f64, b.ptr as *const f64, k, threshold)
                };
                // SAFETY: c is a fresh one-element f64 array.
                unsafe { *(c.ptr as *mut f64) = d };
                Ok(c)
            }
            DType::F64 | DType::F32 => {
                let (product, c) = self.dot_product(name, mm, a, b, dtype, output)?;
                // SAFETY: a is m×k and b k×n with the strides `mm` checked,
                // both alive for the call; c is a contiguous m×n array (a
                // fresh buffer, or a caller's output array, which overlaps
                // no input) that overlaps neither.
                unsafe { product.rows(0, m, false) };
                Ok(c)
            }
            _ => {
                let bytes = crate::eval::array_bytes(name, DType::I64, &out_shape)?;
                let mut acc = Vec::new();
                acc.try_reserve_exact(m * n)
                    .map_err(|_| crate::eval::out_of_memory(name, bytes, DType::I64, &out_shape))?;
                acc.resize(m * n, 0i64);
                for i in 0..m {
                    for l in 0..k {
                        // SAFETY: (i, l) is within a's m×k shape.
                        let x = unsafe { a.read_i64(i as isize * rsa + l as isize * csa) };
                        for j in 0..n {
                            // SAFETY: (l, j) is within b's k×n shape.
                            let y = unsafe { b.read_i64(l as isize * rsb + j as isize * csb) };
                            acc[i * n + j] = acc[i * n + j].wrapping_add(x.wrapping_mul(y));
                        }
                    }
                }
                let v = Value::from_i64_array(
                    dtype,
                    ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&out_shape), acc)
                        .expect("sized"),
                );
                Ok(Arr::from_buffer(Buffer::from_value(v), &out_shape))
            }
        }
    }

    /// The float product `a · b` of the checked shapes `mm` into a new
    /// array for slot `output` (see [`Exec::alloc_slot`]: contiguous, a
    /// fresh buffer or a caller's array, which overlaps no input): its
    /// [`Product`], ready to run over any rows while `a` and `b` stay
    /// alive, and that array.
    pub(super) fn dot_product(
        &mut self,
        name: &str,
        mm: MatMul,
        a: &Arr,
        b: &Arr,
        dtype: DType,
        output: Slot,
    ) -> Result<(Product, Arr)> {
        let c = self.alloc_slot(name, output, dtype, &mm.out_shape)?;
        let n = mm.n as isize;
        let product = Product {
            dtype,
            mm,
            alpha: 1.0,
            beta: 0.0,
            a: a.ptr as usize,
            b: b.ptr as usize,
            c: (c.ptr as usize, n, 1),
        };
        Ok((product, c))
    }

    /// The `Op::Gemm` step: `beta * z + alpha * dot(x, y)`, written into
    /// `z`'s array when `inplace`, else into a new array for slot `output`
    /// (see [`Exec::alloc_slot`]) holding a copy of `z` (not copied when
    /// `beta == 0`: `z` is then ignored, as in BLAS).
    #[allow(clippy::too_many_arguments)] // the node's five operands and its output
    fn gemm(
        &mut self,
        name: &str,
        operands: (&Arr, &Arr, &Arr, &Arr, &Arr),
        dtype: DType,
        output: Slot,
        inplace: bool,
        z_desc: &str,
    ) -> Result<Arr> {
        let (product, c) = self.gemm_product(name, operands, dtype, output, inplace, z_desc)?;
        let m = product.mm.m;
        // SAFETY: the product's operands are the live arrays x and y, and c
        // (z itself, a fresh array or the caller's output array) overlaps
        // neither: the graph's DestroyHandler refused any view of z among
        // x and y, and a fresh or caller's array overlaps no input.
        unsafe { product.rows(0, m, false) };
        Ok(c)
    }

    /// The checked product of a Gemm step and its output array C (`z`
    /// itself when `inplace`, else a new array for slot `output` holding a
    /// copy of `z` when `beta != 0`), C's strides taken as an m×n matrix.
    #[allow(clippy::too_many_arguments)] // the node's five operands and its output
    pub(super) fn gemm_product(
        &mut self,
        name: &str,
        (z, alpha, x, y, beta): (&Arr, &Arr, &Arr, &Arr, &Arr),
        dtype: DType,
        output: Slot,
        inplace: bool,
        z_desc: &str,
    ) -> Result<(Product, Arr)> {
        if !dtype.is_float() {
            return Err(err(
                name,
                format!("the runtime GEMM takes f32 or f64, got {dtype}"),
            ));
        }
        let mm = MatMul::new(name, x, y)?;
        if z.shape.as_slice() != mm.out_shape.as_slice() {
            return Err(err(
                name,
                format!(
                    "{z_desc} has shape {:?} but dot(x, y) has shape {:?}",
                    z.shape.as_slice(),
                    mm.out_shape
                ),
            ));
        }
        // SAFETY: alpha and beta are 0-d arrays (by the node's types): offset 0 is their element.
        let (alpha, beta) = unsafe { (alpha.read_f64(0), beta.read_f64(0)) };
        let c = if inplace {
            if is_broadcast_view(z) {
                return Err(err(
                    name,
                    format!("cannot overwrite {z_desc}: it is a broadcast view"),
                ));
            }
            z.clone()
        } else {
            let c = self.alloc_slot(name, output, dtype, &mm.out_shape)?;
            if beta != 0.0 {
                copy_into(self.par, z, &c);
            }
            c
        };
        // C's strides as an m×n matrix (a missing dimension has size 1).
        let (rsc, csc) = match (x.shape.len(), y.shape.len()) {
            (2, 2) => (c.strides[0], c.strides[1]),
            (2, _) => (c.strides[0], 0),
            (_, 2) => (0, c.strides[0]),
            _ => (0, 0),
        };
        let product = Product {
            dtype,
            mm,
            alpha,
            beta,
            a: x.ptr as usize,
            b: y.ptr as usize,
            c: (c.ptr as usize, rsc, csc),
        };
        Ok((product, c))
    }
}

/// A float product C = alpha·A·B + beta·C over its rows, the operands as
/// addresses (so that threads may share it): [`Exec::dot`] and
/// [`Exec::gemm`] run all of its rows, a GEMM epilogue blocks of them.
pub(super) struct Product {
    /// f32 or f64.
    pub dtype: DType,
    /// The geometry of A·B.
    pub mm: MatMul,
    /// The product's factor.
    pub alpha: f64,
    /// C's factor (0: C is write-only).
    pub beta: f64,
    /// A's address.
    pub a: usize,
    /// B's address.
    pub b: usize,
    /// C's address and its row and column strides (in elements).
    pub c: (usize, isize, isize),
}

impl Product {
    /// Rows `r0..r1` of C, on the calling thread when `serial`, else
    /// threaded by the runtime when the product is large.
    ///
    /// # Safety
    /// A and B are alive and `mm` describes them; C is an alive m×n array
    /// with the recorded strides whose distinct (i, j) address distinct
    /// elements and which overlaps neither; no other thread touches C's
    /// rows `r0..r1` meanwhile; the dtype is f32 or f64.
    pub(super) unsafe fn rows(&self, r0: usize, r1: usize, serial: bool) {
        let MatMul {
            k,
            n,
            rsa,
            csa,
            rsb,
            csb,
            ..
        } = self.mm;
        let (c0, rsc, csc) = self.c;
        let esz = self.dtype.size_of() as isize;
        let a = self.a as isize + r0 as isize * rsa * esz;
        let c = c0 as isize + r0 as isize * rsc * esz;
        let m = r1 - r0;
        let (alpha, beta) = (self.alpha, self.beta);
        match self.dtype {
            // SAFETY: rows r0..r1 of A (m×k) and all of B (k×n) are
            // readable through their strides, and rows r0..r1 of C writable
            // by this call alone (the caller's contract).
            DType::F64 => unsafe {
                let (a, b) = (
                    (a as *const f64, rsa, csa),
                    (self.b as *const f64, rsb, csb),
                );
                let c = (c as *mut f64, rsc, csc);
                if serial {
                    serial_gemm_f64(m, k, n, alpha, a, b, beta, c);
                } else {
                    kiln_gemm_f64(
                        m, k, n, alpha, a.0, a.1, a.2, b.0, b.1, b.2, beta, c.0, c.1, c.2,
                    );
                }
            },
            // SAFETY: as for f64.
            DType::F32 => unsafe {
                let (a, b) = (
                    (a as *const f32, rsa, csa),
                    (self.b as *const f32, rsb, csb),
                );
                let c = (c as *mut f32, rsc, csc);
                let (alpha, beta) = (alpha as f32, beta as f32);
                if serial {
                    serial_gemm_f32(m, k, n, alpha, a, b, beta, c);
                } else {
                    kiln_gemm_f32(
                        m, k, n, alpha, a.0, a.1, a.2, b.0, b.1, b.2, beta, c.0, c.1, c.2,
                    );
                }
            },
            d => unreachable!("the runtime GEMM takes f32 or f64, not {d}"),
        }
        if k == 0 && !alpha.is_finite() {
            // The GEMM skips the empty product (C = beta·C); alpha times its
            // zero sum is NaN, as in the reference.
            for i in r0..r1 {
                for j in 0..n {
                    let off = i as isize * rsc + j as isize * csc;
                    // SAFETY: (i, j) is within C's m×n shape, in this call's rows.
                    unsafe {
                        match self.dtype {
                            DType::F32 => *(c0 as *mut f32).offset(off) = f32::NAN,
                            _ => *(c0 as *mut f64).offset(off) = f64::NAN,
                        }
                    }
                }
            }
        }
    }
}

/// Elements per partial of a parallel inner product: fixed, so that the
/// result does not depend on the thread count.
const DOT_CHUNK: usize = 1 << 16;

/// Σ x_i·y_i over `k` contiguous f64 pairs by the runtime's dot pass; from
/// `threshold` elements on, as partials of [`DOT_CHUNK`] elements computed
/// in parallel and added in chunk order.
///
/// # Safety
/// `x` and `y` must be valid for `k` reads.
unsafe fn inner_product(x: *const f64, y: *const f64, k: usize, threshold: usize) -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    if k < threshold.max(2 * DOT_CHUNK) {
        // SAFETY: the caller's contract.
        return unsafe { kiln_runtime::math::kiln_dot_f64(x, y, k) };
    }
    let chunks = k.div_ceil(DOT_CHUNK);
    let partials: Vec<AtomicU64> = (0..chunks).map(|_| AtomicU64::new(0)).collect();
    let (xa, ya) = (x as usize, y as usize);
    kiln_runtime::parallel::parallel_for(chunks, 1, &|lo, hi| {
        for (c, p) in partials.iter().enumerate().take(hi).skip(lo) {
            let start = c * DOT_CHUNK;
            let len = DOT_CHUNK.min(k - start);
            // SAFETY: [start, start + len) lies within the k readable values
            // of both operands (caller contract).
            let d = unsafe {
                kiln_runtime::math::kiln_dot_f64(
                    (xa as *const f64).add(start),
                    (ya as *const f64).add(start),
                    len,
                )
            };
            p.store(d.to_bits(), Ordering::Relaxed);
        }
    });
    partials
        .iter()
        .map(|p| f64::from_bits(p.load(Ordering::Relaxed)))
        .sum()
}

/// The matrix view of `dot(a, b)` for 1-d and 2-d operands: sizes, element
/// strides (a 1-d left operand is one row, a 1-d right operand one column)
/// and the numpy output shape.
pub(super) struct MatMul {
    /// Rows of the product.
    pub m: usize,
    /// The inner (summed) dimension.
    pub k: usize,
    /// Columns of the product.
    pub n: usize,
    /// `a`'s row and column strides, in elements.
    pub rsa: isize,
    pub csa: isize,
    /// `b`'s row and column strides, in elements.
    pub rsb: isize,
    pub csb: isize,
    /// The product's shape (numpy's, without the unit dimensions of 1-d operands).
    pub out_shape: Vec<usize>,
}

impl MatMul {
    /// Checks that `a` and `b` are aligned (error of node `name` otherwise).
    pub(super) fn new(name: &str, a: &Arr, b: &Arr) -> Result<MatMul> {
        let (sa, sb) = (&a.shape, &b.shape);
        let ka = sa[sa.len() - 1];
        let kb = sb[0];
        if ka != kb {
            return Err(err(
                name,
                format!(
                    "shapes {:?} and {:?} are not aligned: {ka} (dim {}) != {kb} (dim 0)",
                    sa.as_slice(),
                    sb.as_slice(),
                    sa.len() - 1
                ),
            ));
        }
        let (m, rsa, csa) = if sa.len() == 2 {
            (sa[0], a.strides[0], a.strides[1])
        } else {
            (1, 0, a.strides[0])
        };
        let (n, rsb, csb) = if sb.len() == 2 {
            (sb[1], b.strides[0], b.strides[1])
        } else {
            (1, b.strides[0], 0)
        };
        let mut out_shape = Vec::new();
        if sa.len() == 2 {
            out_shape.push(m);
        }
        if sb.len() == 2 {
            out_shape.push(n);
        }
        Ok(MatMul {
            m,
            k: ka,
            n,
            rsa,
            csa,
            rsb,
            csb,
            out_shape,
        })
    }
}

/// The strides (in elements) of `x`'s batch dimensions aligned to the
/// output's batch shape `batch`: 0 for a missing or size-1 (broadcast)
/// dimension.
fn batch_strides(x: &Arr, batch: &[usize]) -> Vec<isize> {
    let lead = x.shape.len() - 2;
    (0..batch.len())
        .map(|d| match (d + lead).checked_sub(batch.len()) {
            Some(i) if x.shape[i] != 1 => x.strides[i],
            _ => 0,
        })
        .collect()
}

/// The element offset of each batch (in C order of `batch`) given the
/// batch strides.
fn batch_offsets(batch: &[usize], strides: &[isize]) -> Vec<isize> {
    let mut offs = vec![0isize];
    for (&size, &stride) in batch.iter().zip(strides) {
        offs = offs
            .iter()
            .flat_map(|&o| (0..size).map(move |i| o + i as isize * stride))
            .collect();
    }
    offs
}

/// The row stride of the single matrix whose rows are the `m` rows of every
/// batch in order (batch dimensions of `sizes` with `strides`, then the
/// matrix rows with `row_stride`), if there is one.
fn rows_as_one_matrix(
    sizes: &[usize],
    strides: &[isize],
    m: usize,
    row_stride: isize,
) -> Option<isize> {
    let mut expected = row_stride.checked_mul(m as isize)?;
    for (&size, &stride) in sizes.iter().zip(strides).rev() {
        if size != 1 && stride != expected {
            return None;
        }
        expected = expected.checked_mul(size as isize)?;
    }
    Some(row_stride)
}

/// Multiply-adds from which batches are spread over threads.
const BATCH_SPLIT_MIN_FLOPS: usize = 1 << 20;

/// How [`batched_gemm`] runs its per-batch products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BatchSplit {
    /// One after the other on the calling thread, each GEMM choosing its
    /// own threading (large ones run on the pool).
    Sequential,
    /// Whole batches spread over threads, chunks of at least `grain`
    /// batches; each GEMM runs single-threaded on its worker.
    Batches {
        /// Minimum batches per chunk.
        grain: usize,
    },
}

/// The split of `count` products of `flops` multiply-adds each over
/// `threads` threads: many small products run whole batches per thread
/// (a GEMM below `PARALLEL_FLOPS` is single-threaded anyway, and splitting
/// one small product over threads synchronises per batch); large products
/// are split by batches too when the batches share out evenly (a multiple
/// of the thread count, or at least four per thread), else each keeps the
/// GEMM's own threading (e.g. 3 large products on 2 threads).
fn batch_split(count: usize, flops: usize, threads: usize) -> BatchSplit {
    let total = flops.saturating_mul(count);
    if threads <= 1 || count <= 1 || total < BATCH_SPLIT_MIN_FLOPS {
        return BatchSplit::Sequential;
    }
    let small = flops < kiln_runtime::gemm::PARALLEL_FLOPS;
    if small || count.is_multiple_of(threads) || count >= 4 * threads {
        // Chunks of at least 1/8 of the split threshold's work.
        let grain = (BATCH_SPLIT_MIN_FLOPS / 8 / flops.max(1)).max(1);
        BatchSplit::Batches { grain }
    } else {
        BatchSplit::Sequential
    }
}

/// `c[i] = a[i] · b[i]` for every batch `i` of `sh` by the runtime GEMM
/// (f32 or f64, the dtype of all three arrays; `c` fresh or the caller's
/// output array, overlapping neither operand). `parallel`: batches may be
/// spread over threads.
fn batched_gemm(sh: &crate::ops::BatchedDotShape, a: &Arr, b: &Arr, c: &Arr, parallel: bool) {
    let (na, nb, nc) = (a.shape.len(), b.shape.len(), c.shape.len());
    let (rsa, csa) = (a.strides[na - 2], a.strides[na - 1]);
    let (rsb, csb) = (b.strides[nb - 2], b.strides[nb - 1]);
    let (rsc, csc) = (c.strides[nc - 2], c.strides[nc - 1]);
    let (sa, sb, sc) = (
        batch_strides(a, &sh.batch),
        batch_strides(b, &sh.batch),
        batch_strides(c, &sh.batch),
    );
    let count: usize = sh.batch.iter().product();
    if count == 0 || sh.m == 0 || sh.n == 0 {
        return;
    }
    // Addresses as integers, so the closure can cross into the pool.
    let (pa, pb, pc, dtype) = (a.ptr as usize, b.ptr as usize, c.ptr as usize, a.dtype);
    let gemm = |m: usize, oa: isize, ob: isize, oc: isize, rsa: isize, rsc: isize| match dtype {
        // SAFETY: a's batch at offset `oa` is an m×k matrix with strides
        // (rsa, csa) inside a (offsets and strides come from a's shape, and
        // rows of consecutive batches are merged only when a's strides make
        // them one matrix), likewise b's k×n batch at `ob`; c's m×n batch at
        // `oc` with strides (rsc, csc) holds distinct elements of the fresh
        // or caller's output array, which overlaps neither operand; batches
        // running on different threads write disjoint parts of c.
        DType::F64 => unsafe {
            kiln_runtime::gemm::kiln_gemm_f64(
                m,
                sh.k,
                sh.n,
                1.0,
                (pa as *const f64).offset(oa),
                rsa,
                csa,
                (pb as *const f64).offset(ob),
                rsb,
                csb,
                0.0,
                (pc as *mut f64).offset(oc),
                rsc,
                csc,
            )
        },
        // SAFETY: as above.
        _ => unsafe {
            kiln_runtime::gemm::kiln_gemm_f32(
                m,
                sh.k,
                sh.n,
                1.0,
                (pa as *const f32).offset(oa),
                rsa,
                csa,
                (pb as *const f32).offset(ob),
                rsb,
                csb,
                0.0,
                (pc as *mut f32).offset(oc),
                rsc,
                csc,
            )
        },
    };
    // b shared by every batch: one GEMM of all of a's rows when they form
    // one strided matrix (and so do c's).
    if count > 1 && sb.iter().all(|&s| s == 0) {
        if let (Some(ra), Some(rc)) = (
            rows_as_one_matrix(&sh.batch, &sa, sh.m, rsa),
            rows_as_one_matrix(&sh.batch, &sc, sh.m, rsc),
        ) {
            gemm(count * sh.m, 0, 0, 0, ra, rc);
            return;
        }
    }
    let (oa, ob, oc) = (
        batch_offsets(&sh.batch, &sa),
        batch_offsets(&sh.batch, &sb),
        batch_offsets(&sh.batch, &sc),
    );
    let run = |s: usize, e: usize| {
        for i in s..e {
            gemm(sh.m, oa[i], ob[i], oc[i], rsa, rsc);
        }
    };
    let flops = sh.m.saturating_mul(sh.k).saturating_mul(sh.n).max(1);
    let threads = if parallel {
        kiln_runtime::parallel::num_threads()
    } else {
        1
    };
    match batch_split(count, flops, threads) {
        // A GEMM called on a pool worker runs single-threaded (see
        // `kiln_runtime::gemm`), so each batch stays on its thread.
        BatchSplit::Batches { grain } => kiln_runtime::parallel::parallel_for(count, grain, &run),
        BatchSplit::Sequential => run(0, count),
    }
}

/// The integer `BatchedDot`: every product accumulated in wrapping `i64`
/// and stored in `dtype` (wrapping), as the reference computes it.
fn batched_int_product(
    name: &str,
    sh: &crate::ops::BatchedDotShape,
    a: &Arr,
    b: &Arr,
    dtype: DType,
) -> Result<Arr> {
    let (na, nb) = (a.shape.len(), b.shape.len());
    let (rsa, csa) = (a.strides[na - 2], a.strides[na - 1]);
    let (rsb, csb) = (b.strides[nb - 2], b.strides[nb - 1]);
    let oa = batch_offsets(&sh.batch, &batch_strides(a, &sh.batch));
    let ob = batch_offsets(&sh.batch, &batch_strides(b, &sh.batch));
    let mut out_shape = sh.batch.clone();
    out_shape.extend([sh.m, sh.n]);
    let bytes = crate::eval::array_bytes(name, DType::I64, &out_shape)?;
    let len = oa.len() * sh.m * sh.n;
    let mut acc = Vec::new();
    acc.try_reserve_exact(len)
        .map_err(|_| crate::eval::out_of_memory(name, bytes, DType::I64, &out_shape))?;
    acc.resize(len, 0i64);
    for (t, (&pa, &pb)) in oa.iter().zip(&ob).enumerate() {
        let out = &mut acc[t * sh.m * sh.n..(t + 1) * sh.m * sh.n];
        for i in 0..sh.m {
            for l in 0..sh.k {
                // SAFETY: (i, l) is within batch t's m×k matrix of a.
                let x = unsafe { a.read_i64(pa + i as isize * rsa + l as isize * csa) };
                for j in 0..sh.n {
                    // SAFETY: (l, j) is within batch t's k×n matrix of b.
                    let y = unsafe { b.read_i64(pb + l as isize * rsb + j as isize * csb) };
                    out[i * sh.n + j] = out[i * sh.n + j].wrapping_add(x.wrapping_mul(y));
                }
            }
        }
    }
    let v = Value::from_i64_array(
        dtype,
        ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&out_shape), acc).expect("sized"),
    );
    Ok(Arr::from_buffer(Buffer::from_value(v), &out_shape))
}

#[cfg(test)]
mod tests {
    use super::{batch_split, BatchSplit};
    use kiln_runtime::gemm::PARALLEL_FLOPS;

    #[test]
    fn batches_split_by_size_and_count() {
        let small = 128 * 128 * 128;
        // 64 products of 128³: whole batches per thread, one batch a chunk.
        assert_eq!(batch_split(64, small, 2), BatchSplit::Batches { grain: 1 });
        // Odd counts of small products split too; tiny ones in bigger chunks.
        assert_eq!(batch_split(37, small, 2), BatchSplit::Batches { grain: 1 });
        assert_eq!(
            batch_split(5000, 1000, 3),
            BatchSplit::Batches { grain: 131 }
        );
        // Too little work in all, one batch, or one thread: sequential.
        assert_eq!(batch_split(3, 1000, 2), BatchSplit::Sequential);
        assert_eq!(
            batch_split(1, PARALLEL_FLOPS * 4, 2),
            BatchSplit::Sequential
        );
        assert_eq!(batch_split(64, small, 1), BatchSplit::Sequential);
        // Large products: by batches when they share out evenly, else
        // each GEMM threaded on its own.
        let large = PARALLEL_FLOPS * 2;
        assert_eq!(batch_split(4, large, 2), BatchSplit::Batches { grain: 1 });
        assert_eq!(batch_split(9, large, 2), BatchSplit::Batches { grain: 1 });
        assert_eq!(batch_split(3, large, 2), BatchSplit::Sequential);
        assert_eq!(batch_split(5, large, 3), BatchSplit::Sequential);
    }
}
