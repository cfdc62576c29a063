//! Execution of a GEMM epilogue (`Step::DotEpilogue`): a float matrix
//! product C = A·B and the element-wise step that is C's only reader
//! (`tanh(C + b)`), run block by block of C's rows. Each block is computed
//! by the runtime GEMM on one thread and mapped by the element-wise kernel
//! at once, while it is in that core's cache; the blocks go to the
//! threads. Unfused, the map is a second pass over the whole of C after
//! the product, which by then has left the cache.
//!
//! Invariants: the blocks' geometry depends on the shapes and the
//! machine's core count only, never on the configured thread count, so a
//! result does not depend on the thread count (a GEMM's bits can depend on
//! its row count); each block's task alone writes that block's rows of C
//! and of the element-wise outputs. The two run one after the other, each
//! over the whole array, when an operand of the product is 1-d, when the
//! element-wise iteration shape is not C's own (C broadcast against a
//! larger operand) or when a block would not stay in a core's cache.

use kiln_runtime::gemm::{
    kiln_gemm_f32, kiln_gemm_f64, serial_gemm_f32, serial_gemm_f64, PARALLEL_FLOPS,
};
use kiln_runtime::parallel::{available_cores, parallel_for};

use super::drive::{jit_fn, ParallelOptions};
use super::gemm::MatMul;
use super::state::{err, Exec};
use crate::error::Result;
use crate::graph::DType;
use crate::linker::plan::step::DotEpilogueStep;

/// Bytes of C from which a block of rows is not blocked: beyond about
/// twice a core's L2 (1 MB on Zen 4), the block has left the cache by the
/// time the kernel maps it, and the product is better run whole by the
/// GEMM's own threading. The suite's mlp (512×512 f64 on 2 cores) has
/// 1 MB blocks.
const MAX_BLOCK_BYTES: usize = 2 << 20;

/// Rows per block of an epilogue over an m×n product of `esz`-byte
/// elements: one block per core, or `None` when such a block would be
/// larger than [`MAX_BLOCK_BYTES`].
fn block_rows(m: usize, n: usize, esz: usize) -> Option<usize> {
    let rows = m.div_ceil(available_cores()).max(1);
    (rows.saturating_mul(n).saturating_mul(esz) <= MAX_BLOCK_BYTES).then_some(rows)
}

/// A float product's operands as addresses, which threads may share.
struct Product {
    dtype: DType,
    mm: MatMul,
    a: usize,
    b: usize,
    /// C's address and its row and column strides (in elements).
    c: (usize, isize, isize),
}

impl Product {
    /// Rows `r0..r1` of C = A·B, on the calling thread when `serial`, else
    /// threaded by the runtime when the product is large.
    ///
    /// # Safety
    /// A and B are alive and `mm` describes them; C is an alive m×n array
    /// with the recorded strides that overlaps neither; no other thread
    /// touches C's rows `r0..r1` meanwhile; the dtype is f32 or f64.
    unsafe fn rows(&self, r0: usize, r1: usize, serial: bool) {
        let MatMul {
            k,
            n,
            rsa,
            csa,
            rsb,
            csb,
            ..
        } = self.mm;
        let (c, rsc, csc) = self.c;
        let esz = self.dtype.size_of() as isize;
        let a = self.a as isize + r0 as isize * rsa * esz;
        let c = c as isize + r0 as isize * rsc * esz;
        let m = r1 - r0;
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
                    serial_gemm_f64(m, k, n, 1.0, a, b, 0.0, c);
                } else {
                    kiln_gemm_f64(
                        m, k, n, 1.0, a.0, a.1, a.2, b.0, b.1, b.2, 0.0, c.0, c.1, c.2,
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
                if serial {
                    serial_gemm_f32(m, k, n, 1.0, a, b, 0.0, c);
                } else {
                    kiln_gemm_f32(
                        m, k, n, 1.0, a.0, a.1, a.2, b.0, b.1, b.2, 0.0, c.0, c.1, c.2,
                    );
                }
            },
            d => unreachable!("epilogues are merged into float products only, not {d}"),
        }
    }
}

impl Exec<'_> {
    /// Runs a `DotEpilogue` step.
    pub(super) fn dot_epilogue(&mut self, name: &str, step: &DotEpilogueStep) -> Result<()> {
        let DotEpilogueStep { dot, elemwise } = step;
        let (a, b) = self.dot_operands(name, dot)?;
        if a.shape.len() != 2 || b.shape.len() != 2 {
            // A vector operand: the product whole, then its epilogue.
            let c = self.dot(name, &a, &b, dot.dtype, dot.output)?;
            self.slots[dot.output] = Some(c);
            return self.elemwise(name, elemwise);
        }
        if !dot.dtype.is_float() {
            return Err(err(
                name,
                format!("an epilogue needs a float product, got {}", dot.dtype),
            ));
        }
        let mm = MatMul::new(name, &a, &b)?;
        let (m, k, n) = (mm.m, mm.k, mm.n);
        let c = self.alloc_slot(name, dot.output, dot.dtype, &mm.out_shape)?;
        let product = Product {
            dtype: dot.dtype,
            mm,
            a: a.ptr as usize,
            b: b.ptr as usize,
            c: (c.ptr as usize, c.strides[0], c.strides[1]),
        };
        self.slots[dot.output] = Some(c);
        let ops = self.elemwise_operands(name, elemwise)?;
        let layout = &ops.layout;
        let f = jit_fn(self.code, elemwise.kernel);
        let rows = block_rows(m, n, dot.dtype.size_of()).filter(|_| layout.shape == [m, n]);
        match rows {
            // SAFETY: A and B stay alive (held here) and C in its slot; C
            // is a fresh or caller's array, overlapping no input; the
            // element-wise operands were just laid out from live slots.
            None => unsafe {
                product.rows(0, m, false);
                let outer = layout.shape.first().copied().unwrap_or(1);
                layout.drive_rows(f, self.par, 0, outer);
            },
            Some(rows) => {
                let blocks = m.div_ceil(rows);
                let inner = ParallelOptions {
                    threshold: 0,
                    ..self.par
                };
                let block = |i: usize| {
                    let (r0, r1) = (i * rows, ((i + 1) * rows).min(m));
                    // SAFETY: as above; blocks are disjoint row ranges of
                    // C and of the element-wise operands' common [m, n]
                    // shape, and each is run by one task.
                    unsafe {
                        product.rows(r0, r1, true);
                        layout.drive_rows(f, inner, r0, r1);
                    }
                };
                let large = m * k * n >= PARALLEL_FLOPS || m * n >= self.par.threshold;
                if self.par.threshold > 0 && large && blocks > 1 {
                    parallel_for(blocks, 1, &|s, e| (s..e).for_each(block));
                } else {
                    (0..blocks).for_each(block);
                }
            }
        }
        drop((a, b));
        self.store_outputs(elemwise, ops.outs);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_follow_the_cores_and_stay_in_cache() {
        let cores = available_cores();
        // One block per core (the last one shorter when m does not divide).
        assert_eq!(block_rows(512, 512, 8), Some(512usize.div_ceil(cores)));
        assert_eq!(block_rows(1, 512, 8), Some(1));
        // A block of more than MAX_BLOCK_BYTES is not blocked.
        let wide = MAX_BLOCK_BYTES / 8 + 1;
        assert_eq!(block_rows(cores, wide, 8), None);
        assert_eq!(block_rows(cores, wide, 4), Some(1));
    }
}
