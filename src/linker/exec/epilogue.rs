//! Execution of a GEMM epilogue (`Step::Epilogue`): a float matrix
//! product C = A·B (a `Dot`) or C = alpha·A·B + beta·Z (a `Gemm`, C being
//! Z itself when inplace) and the element-wise step that is C's only reader
//! (`tanh(C + b)`). The two run block by block of C's rows: each block is
//! computed by the runtime GEMM on one thread and mapped by the
//! element-wise kernel at once, while it is in that core's cache, and the
//! blocks are tasks on the pool's workers. When C is larger than the
//! last-level cache, blocks of 4 MB save reading the whole of C back from
//! memory for the map. When it fits, and the GEMM would have threaded the
//! product, there is one block per pool thread: two single-threaded
//! products of half the rows beat the GEMM's own threading of the whole
//! (512³ f64 on two Zen 1 cores; on two Zen 4 cores, blocks of half the
//! rows had measured neutral, BENCHMARKS.md). A product the GEMM would
//! run on one thread runs whole, then its map.
//!
//! Invariants: a result does not depend on the thread count or the
//! blocks, because a block's rows of C have the bits the whole product
//! gives them: the GEMM's blocking of the summed dimension depends on k
//! and the caches only (`kiln_runtime`'s test
//! `row_blocks_give_the_whole_products_bits` pins it); each block's task
//! alone writes that block's rows of C and of the element-wise outputs.
//! The two also run one after the other, each over the whole array, when
//! an operand of the product is 1-d or when the element-wise iteration
//! shape is not C's own (C broadcast against a larger operand).

use kiln_runtime::gemm::PARALLEL_FLOPS;
use kiln_runtime::parallel::{num_threads, pool_tasks};

use super::drive::{jit_fn, ParallelOptions};
use super::gemm::MatMul;
use super::state::Exec;
use crate::error::Result;
use crate::linker::plan::step::{EpilogueProduct, EpilogueStep};

/// Bytes of C from which blocks are sized to leave the last-level cache
/// (32 MB on Zen 4, 8 MB per Zen 1 complex) before the map reads them.
const MIN_BLOCKED_BYTES: usize = 16 << 20;

/// Bytes of C per block of a product larger than [`MIN_BLOCKED_BYTES`]: a
/// block must still be in the core's cache (1 MB of L2 on Zen 4, a share
/// of L3) when the kernel maps it, and hold enough rows to pay for
/// packing B once per block. Interleaved runs of `tanh(A @ W + b)` on
/// 4096 × k × 4096 f64, two AVX-512 threads, block rows 32 / 64 / 128 /
/// 256 against the unfused run: k = 32 0.84 / 0.79 / 0.84 / 0.89, k = 128
/// 1.00 / 0.93 / 0.92 / 0.96 (BENCHMARKS.md).
const BLOCK_BYTES: usize = 4 << 20;

/// Fewest rows per block: below this, the GEMM's repacking of B for every
/// block costs more than the cache saves.
const MIN_ROWS: usize = 32;

/// Most rows per block (narrow products: enough blocks for the threads).
const MAX_ROWS: usize = 512;

/// Rows per block of an epilogue over an m×k×n product of `esz`-byte
/// elements with `threads` pool threads, or `None` when it runs whole.
/// A C larger than [`MIN_BLOCKED_BYTES`] runs in blocks of
/// [`BLOCK_BYTES`] (whole when rows are so wide that [`MIN_ROWS`] of them
/// leave the cache); a smaller one in one block per thread when the GEMM
/// would thread it (at least [`PARALLEL_FLOPS`] multiply-adds) and each
/// block keeps [`MIN_ROWS`] rows.
fn block_rows(m: usize, k: usize, n: usize, esz: usize, threads: usize) -> Option<usize> {
    let row_bytes = n.saturating_mul(esz).max(1);
    if m.saturating_mul(row_bytes) >= MIN_BLOCKED_BYTES {
        let rows = BLOCK_BYTES / row_bytes;
        return (rows >= MIN_ROWS).then(|| rows.min(MAX_ROWS));
    }
    let threaded = m.saturating_mul(k).saturating_mul(n) >= PARALLEL_FLOPS;
    (threads > 1 && threaded && m >= threads.saturating_mul(MIN_ROWS)).then(|| m.div_ceil(threads))
}

impl Exec<'_> {
    /// Runs an `Epilogue` step.
    pub(super) fn epilogue(&mut self, name: &str, step: &EpilogueStep) -> Result<()> {
        let EpilogueStep { product, elemwise } = step;
        // The product (its checked operands and output array C); with a
        // 1-d operand, the plain product and then its map instead.
        let (product, c, _held) = match product {
            EpilogueProduct::Dot(dot) => {
                let (a, b) = self.dot_operands(name, dot)?;
                if a.shape.len() != 2 || b.shape.len() != 2 || !dot.dtype.is_float() {
                    let c = self.dot(name, &a, &b, dot.dtype, dot.output)?;
                    self.slots[dot.output] = Some(c);
                    return self.elemwise(name, elemwise);
                }
                let mm = MatMul::new(name, &a, &b)?;
                let (product, c) = self.dot_product(name, mm, &a, &b, dot.dtype, dot.output)?;
                // A cast operand lives in no slot: it is held until the end.
                (product, (c, dot.output), [a, b])
            }
            EpilogueProduct::Gemm(g) => {
                let [z, alpha, x, y, beta] = [g.z, g.alpha, g.x, g.y, g.beta].map(|s| self.get(s));
                if x.shape.len() != 2 || y.shape.len() != 2 {
                    self.gemm_step(name, g)?;
                    return self.elemwise(name, elemwise);
                }
                let operands = (&z, &alpha, &x, &y, &beta);
                let (product, c) =
                    self.gemm_product(name, operands, g.dtype, g.output, g.inplace, &g.z_desc)?;
                (product, (c, g.output), [x, y])
            }
        };
        let (m, n) = (product.mm.m, product.mm.n);
        let (c, slot) = c;
        self.slots[slot] = Some(c);
        let ops = self.elemwise_operands(name, elemwise)?;
        let layout = &ops.layout;
        let f = jit_fn(self.code, elemwise.kernel);
        let threads = if self.par.threshold > 0 {
            num_threads()
        } else {
            1
        };
        let esz = product.dtype.size_of();
        let rows = block_rows(m, product.mm.k, n, esz, threads).filter(|_| layout.shape == [m, n]);
        match rows {
            // SAFETY: the product's operands stay alive (in their slots, or
            // held here when cast) and C in its slot; C is z itself (which
            // no operand views: the DestroyHandler's check), a fresh or a
            // caller's array, overlapping no operand; the element-wise
            // operands were just laid out from live slots.
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
        self.store_outputs(elemwise, ops.outs);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_products_run_in_cache_sized_blocks() {
        // 4096×4096 f64 (128 MB): 4 MB blocks of 128 rows; f32 256 rows,
        // whatever the thread count.
        for threads in [1, 2, 8] {
            assert_eq!(block_rows(4096, 64, 4096, 8, threads), Some(128));
            assert_eq!(block_rows(4096, 64, 4096, 4, threads), Some(256));
        }
        // Narrow rows: at most MAX_ROWS.
        assert_eq!(block_rows(1 << 20, 8, 64, 8, 2), Some(MAX_ROWS));
        // Rows so wide that MIN_ROWS of them leave the cache: whole.
        assert_eq!(block_rows(64, 8, 1 << 18, 8, 2), None);
        assert_eq!(
            block_rows(1000, 8, BLOCK_BYTES / (8 * MIN_ROWS), 8, 2),
            Some(MIN_ROWS)
        );
    }

    #[test]
    fn products_that_fit_the_cache_run_in_one_block_per_thread() {
        // 512³ f64 (C 2 MB) is threaded by the GEMM: one block per thread.
        assert_eq!(block_rows(512, 512, 512, 8, 2), Some(256));
        assert_eq!(block_rows(512, 512, 512, 8, 3), Some(171));
        // One thread, or too few rows for MIN_ROWS per thread: whole.
        assert_eq!(block_rows(512, 512, 512, 8, 1), None);
        assert_eq!(block_rows(63, 4096, 4096, 8, 2), None);
        // Below PARALLEL_FLOPS the GEMM runs on one thread: whole.
        assert_eq!(block_rows(512, 8, 512, 8, 2), None);
        // 2000×1000 f64 (16e6 bytes, just under the blocked size).
        assert_eq!(block_rows(2000, 9, 1000, 8, 2), Some(1000));
    }
}
