//! The BlasOpt database (after specialize, before elemwise fusion): turns
//! a sum with a scaled matrix product into one `Gemm` (PyTensor's
//! `gemm_optimizer`), so that the product is accumulated onto `z` by the
//! runtime GEMM instead of being stored and then added by a second pass.
//!
//! `gemm_optimizer` rewrites `add(.., z, .., s * dot(x, y), ..)` and
//! `sub(z, s * dot(x, y))` / `sub(c * z, s * dot(x, y))` into
//! `Gemm{no_inplace}(z, alpha, x, y, beta)`, where the scale `s` is any
//! product of finite scalar constants, `neg`s and 0-d tensors (broadcast by
//! DimShuffle) and becomes `alpha`, and `beta` is 1, -1, or a finite
//! non-zero constant `c` scaling `z`. Conditions, all checked:
//! - the sum has at least one dimension (a vector-vector product's 0-d
//!   sum is left alone);
//! - the sum, `z` and the product have one type up to static sizes: same
//!   float dtype, same ndim, same broadcastable pattern (no broadcasting
//!   happens in the sum), and `x`, `y` have that dtype;
//! - the product, and every `mul` / `neg` between it and the sum, has no
//!   other client (else the product would be computed twice);
//! - with more than one other term, `z` is their new `add`.
//!
//! Values: `beta` is never 0, so `z` is always read (a NaN in it stays);
//! constant factors are multiplied together and applied once, which is a
//! reassociation of the product (README rule 5). Runs before fusion, which
//! would otherwise swallow the sum into a Composite.
//!
//! Before it, `local_sum_mul_to_dot` turns a sum of a broadcast product of
//! two matrices over their shared axis (`sum(X[:, :, None] * Y[None, :, :],
//! axis=1)`, the hand-written matrix product) into `dot` (transposed as the
//! axes require), so that the runtime GEMM computes it and
//! `gemm_optimizer` can take it further.

use crate::error::Result;
use crate::graph::{FunctionGraph, NodeId, TensorType, VarId};
use crate::ops::{Op, OpKind, ReduceOp, ScalarOp};

use super::rule::Rule;
use super::util::{dimshuffle, finish, scalar_const, single_client, unique_constant};

/// Position of the BlasOpt database in the optdb: after specialize (2),
/// before elemwise fusion (49).
pub const BLAS_OPT: f64 = 2.5;

/// The `local_sum_mul_to_dot` rule (tracks `CAReduce`).
pub fn sum_mul_to_dot_rule() -> Rule {
    Rule {
        name: "local_sum_mul_to_dot",
        tracks: &[OpKind::CAReduce],
        apply: local_sum_mul_to_dot,
        fast_compile: false,
    }
}

/// A matrix `m` seen through a DimShuffle to three dimensions that inserts
/// one broadcastable axis: `(m, order)` with `order[i]` the matrix axis at
/// position `i` (`None` for the inserted one).
fn matrix_in_3d(fg: &FunctionGraph, v: VarId) -> Option<(VarId, Vec<Option<usize>>)> {
    match fg.owner_op(v)? {
        Op::DimShuffle {
            input_ndim: 2,
            new_order,
        } if new_order.len() == 3 && new_order.iter().filter(|d| d.is_none()).count() == 1 => {
            let m = fg.node(fg.owner(v)?).inputs[0];
            Some((m, new_order.clone()))
        }
        _ => None,
    }
}

/// `sum(a3 * b3, axis=s)` where `a3`, `b3` are matrices `A`, `B` each
/// given one inserted axis, sharing the summed axis `s` (not broadcastable
/// in either) and each owning one of the others -> `dot(A', B')` with `A'`
/// = `A` arranged as (its own axis, `s`) and `B'` = `B` as (`s`, its own
/// axis), the left factor being the one that owns the output's first axis. Floats of
/// one dtype only (the runtime GEMM's); the sum's rounding order changes
/// (a reduction's, README rule 5).
pub fn local_sum_mul_to_dot(fg: &mut FunctionGraph, n: NodeId) -> Result<Option<VarId>> {
    let Op::CAReduce {
        op: ReduceOp::Sum,
        axes: Some(axes),
    } = &fg.node(n).op
    else {
        return Ok(None);
    };
    let [s] = axes[..] else { return Ok(None) };
    let v = fg.node(n).inputs[0];
    let Some(m) = fg
        .owner(v)
        .filter(|&m| fg.node(m).op.is_elemwise(ScalarOp::Mul))
    else {
        return Ok(None);
    };
    let [p, q] = fg.node(m).inputs[..] else {
        return Ok(None);
    };
    let (Some((a, oa)), Some((b, ob))) = (matrix_in_3d(fg, p), matrix_in_3d(fg, q)) else {
        return Ok(None);
    };
    let dtype = fg.ty(a).dtype;
    let out_dtype = fg.ty(fg.node(n).outputs[0]).dtype;
    if !dtype.is_float() || fg.ty(b).dtype != dtype || out_dtype != dtype {
        return Ok(None);
    }
    let (Some(sa), Some(sb)) = (oa[s], ob[s]) else {
        return Ok(None);
    };
    if fg.ty(a).is_broadcastable(sa) || fg.ty(b).is_broadcastable(sb) {
        return Ok(None); // the product would broadcast along the summed axis
    }
    // Each operand's own axis: present in it, absent from the other.
    let own = |o: &[Option<usize>], other: &[Option<usize>]| {
        (0..3).find(|&i| i != s && o[i].is_some() && other[i].is_none())
    };
    let (Some(ia), Some(ib)) = (own(&oa, &ob), own(&ob, &oa)) else {
        return Ok(None);
    };
    // The operand owning the output's first axis is the left factor.
    let ((a, oa, ia, sa), (b, ob, ib, sb)) = if ia < ib {
        ((a, oa, ia, sa), (b, ob, ib, sb))
    } else {
        ((b, ob, ib, sb), (a, oa, ia, sa))
    };
    let a2 = dimshuffle(fg, a, 2, &[oa[ia], Some(sa)])?;
    let b2 = dimshuffle(fg, b, 2, &[Some(sb), ob[ib]])?;
    let new = fg.apply1(Op::Dot, &[a2, b2])?;
    finish(fg, n, new)
}

/// The `gemm_optimizer` rule (tracks `add` and `sub`).
pub fn gemm_rule() -> Rule {
    Rule {
        name: "gemm_optimizer",
        tracks: &[
            OpKind::Elemwise(ScalarOp::Add),
            OpKind::Elemwise(ScalarOp::Sub),
        ],
        apply: local_gemm,
        fast_compile: false,
    }
}

/// `v` as `coef * prod(scalars) * base`: a constant coefficient, 0-d
/// run-time factors and the remaining operand.
struct Scaled {
    coef: f64,
    scalars: Vec<VarId>,
    base: VarId,
}

/// True when `a` and `b` have the same dtype, ndim and broadcastable pattern.
fn same_pattern(a: &TensorType, b: &TensorType) -> bool {
    a.dtype == b.dtype && a.broadcastable() == b.broadcastable()
}

/// A 0-d scalar factor of a product of type `want`: `Ok(Some(c))` for a
/// finite constant `c`, `Err(Some(v))` for a 0-d `v` of `want`'s dtype
/// (possibly under a DimShuffle that only adds broadcastable dimensions),
/// `Err(None)` otherwise.
fn scalar_factor(
    fg: &FunctionGraph,
    v: VarId,
    want: &TensorType,
) -> std::result::Result<f64, Option<VarId>> {
    let ty = fg.ty(v);
    if ty.ndim() > want.ndim() || !ty.has_one_element() || fg.owner_op(v) == Some(&Op::Dot) {
        return Err(None);
    }
    if let Some(c) = unique_constant(fg, v) {
        return if c.is_finite() { Ok(c) } else { Err(None) };
    }
    let mut s = v;
    if let Some(Op::DimShuffle { new_order, .. }) = fg.owner_op(v) {
        if new_order.iter().all(Option::is_none) {
            s = fg.node(fg.owner(v).expect("owned")).inputs[0];
        }
    }
    let st = fg.ty(s);
    if st.ndim() == 0 && st.dtype == want.dtype {
        Err(Some(s))
    } else {
        Err(None)
    }
}

/// `v` (of type `want`) decomposed through `neg` and `mul` by scalars; the
/// intermediate nodes must have no other client when `exclusive`.
fn scaled(fg: &FunctionGraph, v: VarId, want: &TensorType, exclusive: bool) -> Scaled {
    let mut out = Scaled {
        coef: 1.0,
        scalars: Vec::new(),
        base: v,
    };
    // A few levels cover `-(a * (2 * dot))`; deeper chains are left alone.
    for _ in 0..4 {
        let cur = out.base;
        let Some(n) = fg.owner(cur) else { break };
        if !same_pattern(fg.ty(cur), want) || (exclusive && !single_client(fg, cur)) {
            break;
        }
        let node = fg.node(n);
        match node.op.scalar_op() {
            Some(ScalarOp::Neg) => {
                out.coef = -out.coef;
                out.base = node.inputs[0];
            }
            Some(ScalarOp::Mul) => {
                let mut rest = None;
                let mut coef = 1.0;
                let mut scalars = Vec::new();
                for &i in &node.inputs {
                    match scalar_factor(fg, i, want) {
                        Ok(c) => coef *= c,
                        Err(Some(s)) => scalars.push(s),
                        Err(None) if rest.is_none() => rest = Some(i),
                        Err(None) => return out,
                    }
                }
                let Some(base) = rest else { break };
                out.coef *= coef;
                out.scalars.extend(scalars);
                out.base = base;
            }
            _ => break,
        }
    }
    out
}

/// The Dot node of a scaled term when it can become a Gemm's product: a
/// Dot of `want`'s dtype and broadcastable pattern, with operands of that
/// dtype, and no other client.
fn gemm_dot(fg: &FunctionGraph, t: &Scaled, want: &TensorType) -> Option<NodeId> {
    let n = fg.owner(t.base)?;
    let node = fg.node(n);
    if node.op != Op::Dot
        || !same_pattern(fg.ty(t.base), want)
        || !single_client(fg, t.base)
        || node.inputs.iter().any(|&i| fg.ty(i).dtype != want.dtype)
    {
        return None;
    }
    Some(n)
}

/// `coef * prod(scalars)` as a 0-d variable of `dtype`.
fn scale_var(
    fg: &mut FunctionGraph,
    dtype: crate::graph::DType,
    coef: f64,
    scalars: &[VarId],
) -> Result<VarId> {
    let Some((&first, more)) = scalars.split_first() else {
        return Ok(scalar_const(fg, dtype, coef));
    };
    let mut factors = vec![first];
    factors.extend_from_slice(more);
    if coef != 1.0 && coef != -1.0 {
        factors.insert(0, scalar_const(fg, dtype, coef));
    }
    let mut v = if factors.len() == 1 {
        factors[0]
    } else {
        fg.apply1(Op::elemwise(ScalarOp::Mul), &factors)?
    };
    if coef == -1.0 {
        v = fg.apply1(Op::elemwise(ScalarOp::Neg), &[v])?;
    }
    Ok(v)
}

/// `z + s * dot(x, y)` and its variants -> `Gemm{no_inplace}` (see the module docs).
pub fn local_gemm(fg: &mut FunctionGraph, node: NodeId) -> Result<Option<VarId>> {
    let nd = fg.node(node);
    let out = nd.outputs[0];
    let want = fg.ty(out).clone();
    // A 0-d sum (of a vector-vector product) is left alone.
    if !want.dtype.is_float() || want.ndim() == 0 {
        return Ok(None);
    }
    let signed: Vec<(VarId, f64)> = match nd.op.scalar_op() {
        Some(ScalarOp::Add) => nd.inputs.iter().map(|&v| (v, 1.0)).collect(),
        Some(ScalarOp::Sub) if nd.inputs.len() == 2 => {
            vec![(nd.inputs[0], 1.0), (nd.inputs[1], -1.0)]
        }
        _ => return Ok(None),
    };
    if signed.len() < 2 || signed.iter().any(|&(v, _)| !same_pattern(fg.ty(v), &want)) {
        return Ok(None);
    }
    // The first term that is a scaled product.
    let Some((k, term, dot)) = signed.iter().enumerate().find_map(|(k, &(v, sign))| {
        let mut t = scaled(fg, v, &want, true);
        t.coef *= sign;
        gemm_dot(fg, &t, &want).map(|d| (k, t, d))
    }) else {
        return Ok(None);
    };
    let rest: Vec<(VarId, f64)> = signed
        .iter()
        .enumerate()
        .filter(|&(j, _)| j != k)
        .map(|(_, &t)| t)
        .collect();
    // z and beta: a lone term keeps its sign and constant scale in beta.
    let (z, beta) = if let [(v, sign)] = rest[..] {
        let zt = scaled(fg, v, &want, true);
        if zt.scalars.is_empty() && zt.coef != 0.0 && zt.base != v && !zt.coef.is_nan() {
            (zt.base, sign * zt.coef)
        } else {
            (v, sign)
        }
    } else {
        // Only an n-ary add leaves several terms, all positive.
        let terms: Vec<VarId> = rest.iter().map(|&(v, _)| v).collect();
        let sum = fg.apply1(Op::elemwise(ScalarOp::Add), &terms)?;
        (sum, 1.0)
    };
    if !same_pattern(fg.ty(z), &want) || !term.coef.is_finite() {
        return Ok(None);
    }
    let (x, y) = (fg.node(dot).inputs[0], fg.node(dot).inputs[1]);
    let alpha = scale_var(fg, want.dtype, term.coef, &term.scalars)?;
    let beta = scalar_const(fg, want.dtype, beta);
    let gemm = fg.apply1(Op::Gemm { inplace: false }, &[z, alpha, x, y, beta])?;
    Ok(want.accepts_replacement(fg.ty(gemm)).then_some(gemm))
}
