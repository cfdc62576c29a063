//! Execution of the matrix-product family (`Dot`, `Gemm`): operand casts,
//! the alignment check of the inner dimensions, the runtime GEMM for
//! floats (writing into a fresh array, the caller's registered array, or
//! `z` itself for an inplace `Gemm`) and a wrapping native product for
//! integers.
//!
//! Invariants: the inner dimensions agree (`MatMul::new`); an inplace
//! `Gemm` overwrites `z` only when it has `dot(x, y)`'s shape and is not a
//! broadcast view; the output overlaps neither operand.

use super::broadcast::is_broadcast_view;
use super::copy::copy_into;
use super::state::{err, Exec};
use crate::error::Result;
use crate::graph::{DType, Value};
use crate::linker::buffer::{Arr, Buffer};
use crate::linker::plan::step::{DotStep, GemmStep};
use crate::linker::plan::Slot;

impl Exec<'_> {
    /// Runs a `Dot` step.
    pub(super) fn dot_step(&mut self, name: &str, step: &DotStep) -> Result<()> {
        let DotStep {
            a,
            b,
            casts,
            output,
            dtype,
        } = step;
        let mut a = self.get(*a);
        let mut b = self.get(*b);
        if let Some(c) = casts[0] {
            a = self.cast(name, &a, c, *dtype)?;
        }
        if let Some(c) = casts[1] {
            b = self.cast(name, &b, c, *dtype)?;
        }
        let res = self.dot(name, &a, &b, *dtype, *output)?;
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
    fn dot(&mut self, name: &str, a: &Arr, b: &Arr, dtype: DType, output: Slot) -> Result<Arr> {
        let MatMul {
            m,
            k,
            n,
            rsa,
            csa,
            rsb,
            csb,
            out_shape,
        } = MatMul::new(name, a, b)?;
        // The integer product builds its own result; GEMM writes into `c`.
        let c = if dtype.is_float() {
            self.alloc_slot(name, output, dtype, &out_shape)?
        } else {
            self.alloc(name, dtype, &out_shape)?
        };
        match dtype {
            // SAFETY: a is m×k, b is k×n with the given element strides; c is a
            // contiguous m×n array (a fresh buffer, or a caller's output array,
            // which overlaps no input) that overlaps neither.
            DType::F64 => unsafe {
                kiln_runtime::gemm::kiln_gemm_f64(
                    m,
                    k,
                    n,
                    1.0,
                    a.ptr as *const f64,
                    rsa,
                    csa,
                    b.ptr as *const f64,
                    rsb,
                    csb,
                    0.0,
                    c.ptr as *mut f64,
                    n as isize,
                    1,
                )
            },
            // SAFETY: as above.
            DType::F32 => unsafe {
                kiln_runtime::gemm::kiln_gemm_f32(
                    m,
                    k,
                    n,
                    1.0,
                    a.ptr as *const f32,
                    rsa,
                    csa,
                    b.ptr as *const f32,
                    rsb,
                    csb,
                    0.0,
                    c.ptr as *mut f32,
                    n as isize,
                    1,
                )
            },
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
                return Ok(Arr::from_buffer(Buffer::from_value(v), &out_shape));
            }
        }
        Ok(c)
    }

    /// The `Op::Gemm` step: `beta * z + alpha * dot(x, y)`, written into
    /// `z`'s array when `inplace`, else into a new array for slot `output`
    /// (see [`Exec::alloc_slot`]) holding a copy of `z` (not copied when
    /// `beta == 0`: `z` is then ignored, as in BLAS).
    #[allow(clippy::too_many_arguments)] // the node's five operands and its output
    fn gemm(
        &mut self,
        name: &str,
        (z, alpha, x, y, beta): (&Arr, &Arr, &Arr, &Arr, &Arr),
        dtype: DType,
        output: Slot,
        inplace: bool,
        z_desc: &str,
    ) -> Result<Arr> {
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
        match dtype {
            // SAFETY: x is m×k and y is k×n with the given element strides;
            // c is m×n with strides (rsc, csc) addressing distinct elements
            // (checked above for z; a fresh or caller's output array is
            // contiguous), and overlaps neither operand: a fresh buffer or a
            // caller's output array overlaps no input, and the graph's
            // DestroyHandler refused any view of z among x and y.
            DType::F64 => unsafe {
                kiln_runtime::gemm::kiln_gemm_f64(
                    m,
                    k,
                    n,
                    alpha,
                    x.ptr as *const f64,
                    rsa,
                    csa,
                    y.ptr as *const f64,
                    rsb,
                    csb,
                    beta,
                    c.ptr as *mut f64,
                    rsc,
                    csc,
                )
            },
            // SAFETY: as above.
            DType::F32 => unsafe {
                kiln_runtime::gemm::kiln_gemm_f32(
                    m,
                    k,
                    n,
                    alpha as f32,
                    x.ptr as *const f32,
                    rsa,
                    csa,
                    y.ptr as *const f32,
                    rsb,
                    csb,
                    beta as f32,
                    c.ptr as *mut f32,
                    rsc,
                    csc,
                )
            },
            d => {
                return Err(err(
                    name,
                    format!("the runtime GEMM takes f32 or f64, got {d}"),
                ))
            }
        }
        if k == 0 && !alpha.is_finite() {
            // The GEMM skips the empty product (C = beta·C); alpha times its
            // zero sum is NaN, as in the reference.
            for i in 0..m {
                for j in 0..n {
                    let off = i as isize * rsc + j as isize * csc;
                    // SAFETY: (i, j) is within c's m×n shape.
                    unsafe {
                        match dtype {
                            DType::F32 => *(c.ptr as *mut f32).offset(off) = f32::NAN,
                            _ => *(c.ptr as *mut f64).offset(off) = f64::NAN,
                        }
                    }
                }
            }
        }
        Ok(c)
    }
}

/// The matrix view of `dot(a, b)` for 1-d and 2-d operands: sizes, element
/// strides (a 1-d left operand is one row, a 1-d right operand one column)
/// and the numpy output shape.
struct MatMul {
    m: usize,
    k: usize,
    n: usize,
    rsa: isize,
    csa: isize,
    rsb: isize,
    csb: isize,
    out_shape: Vec<usize>,
}

impl MatMul {
    /// Checks that `a` and `b` are aligned (error of node `name` otherwise).
    fn new(name: &str, a: &Arr, b: &Arr) -> Result<MatMul> {
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
