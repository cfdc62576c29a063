//! Shared input data of the GEMM benchmarks (`gemm_update`, `gemm_epilogue`).

use ndarray::{ArrayD, IxDyn};

/// A deterministic array of `shape` with values in [-0.5, 0.5), shifted by `seed`.
pub fn ramp(shape: &[usize], seed: f64) -> ArrayD<f64> {
    let n: usize = shape.iter().product();
    let v = (0..n)
        .map(|i| ((i as f64 * 0.618 + seed) % 1.0) - 0.5)
        .collect();
    ArrayD::from_shape_vec(IxDyn(shape), v).expect("sized")
}
