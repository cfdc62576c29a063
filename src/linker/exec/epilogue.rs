//! Execution of a GEMM epilogue (`Step::DotEpilogue`): a float matrix
//! product C = A·B and the element-wise step that is C's only reader
//! (`tanh(C + b)`). When C is larger than the last-level cache, they run
//! block by block of C's rows: each block is computed by the runtime GEMM
//! on one thread and mapped by the element-wise kernel at once, while it
//! is in that core's cache, and the blocks are tasks on the pool's
//! workers. Unfused, the map would read the whole of C back from memory
//! after the product and write it again. A C that fits in the cache is
//! read back from there at little cost, and coarse blocks then bought
//! nothing measurable (512³ f64, `tanh(A @ W + b)` and its gradient), so
//! such a product runs whole, threaded by the GEMM, and then its map.
//!
//! Invariants: the blocks' geometry depends on the shapes only, never on
//! the thread count or the machine, so a result does not depend on them
//! (a GEMM's bits can depend on its row count); each block's task alone
//! writes that block's rows of C and of the element-wise outputs. The two
//! also run one after the other, each over the whole array, when an
//! operand of the product is 1-d or when the element-wise iteration shape
//! is not C's own (C broadcast against a larger operand).

use kiln_runtime::gemm::{kiln_gemm_f32, kiln_gemm_f64, serial_gemm_f32, serial_gemm_f64};
use kiln_runtime::parallel::pool_tasks;

use super::drive::{jit_fn, ParallelOptions};
use super::gemm::MatMul;
use super::state::{err, Exec};
use crate::error::Result;
use crate::graph::DType;
use crate::linker::plan::step::DotEpilogueStep;

/// Bytes of C below which the product runs whole: C then stays in the
/// last-level cache (32 MB here) for its map.
const MIN_BLOCKED_BYTES: usize = 16 << 20;

/// Bytes of C per block: a block must still be in the core's cache (1 MB
/// of L2 on Zen 4, a share of L3) when the kernel maps it, and hold enough
/// rows to pay for packing B once per block. Interleaved runs of
/// `tanh(A @ W + b)` on 4096 × k × 4096 f64, two AVX-512 threads, block
/// rows 32 / 64 / 128 / 256 against the unfused run: k = 32 0.84 / 0.79 /
/// 0.84 / 0.89, k = 128 1.00 / 0.93 / 0.92 / 0.96 (BENCHMARKS.md).
const BLOCK_BYTES: usize = 4 << 20;

/// Fewest rows per block: below this, the GEMM's repacking of B for every
/// block costs more than the cache saves.
const MIN_ROWS: usize = 32;

/// Most rows per block (narrow products: enough blocks for the threads).
const MAX_ROWS: usize = 512;

/// Rows per block of an epilogue over an m×n product of `esz`-byte
/// elements, or `None` when it runs whole: C fits in the last-level cache,
/// or rows are so wide that a block of [`MIN_ROWS`] leaves the cache.
fn block_rows(m: usize, n: usize, esz: usize) -> Option<usize> {
    let row_bytes = n.saturating_mul(esz).max(1);
    let rows = BLOCK_BYTES / row_bytes;
    let large = m.saturating_mul(row_bytes) >= MIN_BLOCKED_BYTES;
    (large && rows >= MIN_ROWS).then(|| rows.min(MAX_ROWS))
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
        let (m, n) = (mm.m, mm.n);
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
                if self.par.threshold > 0 {
                    pool_tasks(blocks, &block);
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
    fn only_products_larger_than_the_cache_run_in_blocks() {
        // 512×512 f64 (2 MB) and 2000×1000 f64 (16e6 bytes) run whole.
        assert_eq!(block_rows(512, 512, 8), None);
        assert_eq!(block_rows(2000, 1000, 8), None);
        // 4096×4096 f64 (128 MB): 4 MB blocks of 128 rows; f32 256 rows.
        assert_eq!(block_rows(4096, 4096, 8), Some(128));
        assert_eq!(block_rows(4096, 4096, 4), Some(256));
        // Narrow rows: at most MAX_ROWS.
        assert_eq!(block_rows(1 << 20, 64, 8), Some(MAX_ROWS));
        // Rows so wide that MIN_ROWS of them leave the cache: whole.
        assert_eq!(block_rows(64, 1 << 18, 8), None);
        assert_eq!(
            block_rows(1000, BLOCK_BYTES / (8 * MIN_ROWS), 8),
            Some(MIN_ROWS)
        );
    }
}
