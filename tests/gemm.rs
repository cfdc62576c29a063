//! The Gemm op end to end: type inference and its errors, the reference
//! `perform` (including BLAS's `beta == 0` and the empty product), the
//! `gemm_optimizer` rewrite (before/after and values, and where it must not
//! fire), the `inplace_gemm` pass (only where overwriting `z` is safe), and
//! the JIT lowering onto the runtime GEMM (contiguous, transposed and strided
//! operands, mutable inputs, `call_into` destinations, peak bytes).

mod common;

use common::{f64s, perf, perf1};
use kiln::eval::evaluate;
use kiln::graph::print::pprint_outputs;
use kiln::linker::{Arg, ArgMut};
use kiln::ops::InputInfo;
use kiln::rewrites::rewrite_graph;
use kiln::rewriting::Mode;
use kiln::*;
use ndarray::{s, ArrayD, IxDyn};

const F64: DType = DType::F64;
const F32: DType = DType::F32;

fn t(d: DType, shape: &[Option<usize>]) -> TensorType {
    TensorType::new(d, shape.to_vec())
}

fn infer(op: &Op, tys: &[TensorType]) -> Result<Vec<TensorType>> {
    let infos: Vec<InputInfo<'_>> = tys.iter().map(|ty| InputInfo { ty, value: None }).collect();
    op.infer_types(&infos)
}

fn gemm_op() -> Op {
    Op::Gemm { inplace: false }
}

/// Deterministic values in [-2, 2) of `shape`.
fn data(shape: &[usize], seed: u64) -> ArrayD<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let n: usize = shape.iter().product();
    let v = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
        })
        .collect();
    ArrayD::from_shape_vec(IxDyn(shape), v).unwrap()
}

fn s64(v: f64) -> Value {
    Value::scalar_f64(F64, v)
}

/// The graph of `outs` after rewriting under `mode`, pretty-printed.
fn rewritten(ins: &[Tensor], outs: &[Tensor], mode: &Mode) -> String {
    let mut fg = FunctionGraph::new(ins, outs).unwrap();
    rewrite_graph(&mut fg, mode).unwrap();
    fg.check_integrity().unwrap();
    pprint_outputs(&fg)
}

fn no_inplace() -> Mode {
    Mode::fast_run().excluding(&["inplace"])
}

/// The reference value of `out` on the un-rewritten graph.
fn reference(ins: &[Tensor], out: &Tensor, vals: &[Value]) -> Value {
    let fg = FunctionGraph::new(ins, std::slice::from_ref(out)).unwrap();
    evaluate(&fg, vals).unwrap().remove(0)
}

// ----- types ---------------------------------------------------------------

#[test]
fn gemm_types_follow_z_and_the_product() {
    let sc = t(F64, &[]);
    let m = |a, b| t(F64, &[a, b]);
    let out = infer(
        &gemm_op(),
        &[
            m(None, Some(4)),
            sc.clone(),
            m(Some(3), None),
            m(None, None),
            sc.clone(),
        ],
    )
    .unwrap();
    assert_eq!(
        out,
        vec![m(Some(3), Some(4))],
        "static sizes of z and dot merge"
    );
    // matrix-vector, vector-matrix, vector-vector
    let v = t(F64, &[None]);
    let mv = infer(
        &gemm_op(),
        &[v.clone(), sc.clone(), m(None, None), v.clone(), sc.clone()],
    );
    assert_eq!(mv.unwrap(), vec![v.clone()]);
    let vm = infer(
        &gemm_op(),
        &[v.clone(), sc.clone(), v.clone(), m(None, None), sc.clone()],
    );
    assert_eq!(vm.unwrap(), vec![v.clone()]);
    let vv = infer(
        &gemm_op(),
        &[sc.clone(), sc.clone(), v.clone(), v.clone(), sc.clone()],
    );
    assert_eq!(vv.unwrap(), vec![sc.clone()]);
    let f = t(F32, &[None, None]);
    let fs = t(F32, &[]);
    let out = infer(
        &gemm_op(),
        &[f.clone(), fs.clone(), f.clone(), f.clone(), fs],
    )
    .unwrap();
    assert_eq!(out, vec![f]);
}

#[test]
fn gemm_rejects_ill_typed_inputs_with_a_message() {
    let sc = t(F64, &[]);
    let m = t(F64, &[None, None]);
    let msg = |tys: &[TensorType]| infer(&gemm_op(), tys).unwrap_err().to_string();
    assert_eq!(
        msg(&[m.clone(), sc.clone(), m.clone(), m.clone()]),
        "type error in Gemm{no_inplace}: expects 5 inputs (z, alpha, x, y, beta), got 4"
    );
    let i = t(DType::I64, &[None, None]);
    let is = t(DType::I64, &[]);
    assert_eq!(
        msg(&[i.clone(), is.clone(), i.clone(), i, is]),
        "type error in Gemm{no_inplace}: z must be f32 or f64, got i64(?, ?)"
    );
    assert_eq!(
        msg(&[
            m.clone(),
            t(F64, &[Some(1)]),
            m.clone(),
            m.clone(),
            sc.clone()
        ]),
        "type error in Gemm{no_inplace}: alpha must be a 0-d f64, got f64(1,)"
    );
    assert_eq!(
        msg(&[m.clone(), sc.clone(), m.clone(), m.clone(), t(F32, &[])]),
        "type error in Gemm{no_inplace}: beta must be a 0-d f64, got f32()"
    );
    assert_eq!(
        msg(&[
            m.clone(),
            sc.clone(),
            t(F32, &[None, None]),
            m.clone(),
            sc.clone()
        ]),
        "type error in Gemm{no_inplace}: x must be a 1-d or 2-d f64 (z's dtype), got f32(?, ?)"
    );
    assert_eq!(
        msg(&[m.clone(), sc.clone(), m.clone(), t(F64, &[None]), sc.clone()]),
        "type error in Gemm{no_inplace}: dot(f64(?, ?), f64(?,)) has 1 dimensions but z f64(?, ?) has 2"
    );
    assert_eq!(
        msg(&[
            m.clone(),
            sc.clone(),
            t(F64, &[None, Some(2)]),
            t(F64, &[Some(3), None]),
            sc.clone()
        ]),
        "type error in Gemm{no_inplace}: inner dimensions differ: f64(?, 2) and f64(3, ?)"
    );
    assert_eq!(
        msg(&[t(F64, &[Some(2), None]), sc.clone(), t(F64, &[Some(5), None]), m, sc]),
        "type error in Gemm{no_inplace}: z f64(2, ?) and dot(f64(5, ?), f64(?, ?)) differ in dimension 0: 2 and 5"
    );
}

#[test]
fn gemm_names_equality_and_destroy_map() {
    let a = Op::Gemm { inplace: false };
    let b = Op::Gemm { inplace: true };
    assert_eq!(a.name(), "Gemm{no_inplace}");
    assert_eq!(b.name(), "Gemm{inplace}");
    assert_ne!(a, b);
    assert_eq!(a, Op::Gemm { inplace: false });
    assert!(a.destroy_map().is_empty());
    assert_eq!(b.destroy_map().as_slice(), &[(0, 0)]);
    assert!(b.view_map().is_empty());
    let (z, x, y) = (matrix("z", F64), matrix("x", F64), matrix("y", F64));
    let (al, be) = (scalar("a", F64), scalar("b", F64));
    let g = gemm(&z, &al, &x, &y, &be).unwrap();
    let fg = FunctionGraph::new(&[z, al, x, y, be], &[g]).unwrap();
    assert_eq!(
        fg.to_string(),
        "FunctionGraph(Gemm{no_inplace}(z, a, x, y, b))"
    );
}

// ----- reference perform -----------------------------------------------------

#[test]
fn perform_computes_beta_z_plus_alpha_dot() {
    let z = f64s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let x = f64s(&[2, 3], &[1.0, 0.0, 2.0, -1.0, 3.0, 1.0]);
    let y = f64s(&[3, 2], &[3.0, 1.0, 2.0, 1.0, 1.0, 0.0]);
    // dot = [[5, 1], [4, 2]]
    let out = perf1(&gemm_op(), &[&z, &s64(2.0), &x, &y, &s64(-1.0)]);
    assert!(
        out.same_as(&f64s(&[2, 2], &[9.0, 0.0, 5.0, 0.0])),
        "{out:?}"
    );
    // matrix-vector: z, dot are vectors.
    let zv = f64s(&[2], &[1.0, 1.0]);
    let yv = f64s(&[3], &[1.0, 1.0, 1.0]);
    let out = perf1(&gemm_op(), &[&zv, &s64(1.0), &x, &yv, &s64(1.0)]);
    assert!(out.same_as(&f64s(&[2], &[4.0, 4.0])), "{out:?}");
    // f32 keeps its dtype.
    let f = |v: &Value| v.cast(F32);
    let out = perf1(
        &gemm_op(),
        &[
            &f(&z),
            &Value::scalar_f64(F32, 1.0),
            &f(&x),
            &f(&y),
            &Value::scalar_f64(F32, 1.0),
        ],
    );
    assert!(out.same_as(&f64s(&[2, 2], &[6.0, 3.0, 7.0, 6.0]).cast(F32)));
}

#[test]
fn perform_ignores_z_when_beta_is_zero_and_an_empty_product_is_scaled() {
    let nan = f64s(&[1, 2], &[f64::NAN, f64::INFINITY]);
    let x = f64s(&[1, 1], &[2.0]);
    let y = f64s(&[1, 2], &[1.0, 3.0]);
    let out = perf1(&gemm_op(), &[&nan, &s64(1.0), &x, &y, &s64(0.0)]);
    assert!(
        out.same_as(&f64s(&[1, 2], &[2.0, 6.0])),
        "BLAS: beta == 0 ignores z: {out:?}"
    );
    // beta != 0 reads z: NaN and inf stay.
    let out = perf1(&gemm_op(), &[&nan, &s64(1.0), &x, &y, &s64(1.0)]);
    assert!(out.allclose(&f64s(&[1, 2], &[f64::NAN, f64::INFINITY]), 0.0, 0.0));
    // k == 0: the product is zero; alpha = inf times it is NaN.
    let z = f64s(&[2, 1], &[1.0, -3.0]);
    let x0 = f64s(&[2, 0], &[]);
    let y0 = f64s(&[0, 1], &[]);
    let out = perf1(&gemm_op(), &[&z, &s64(5.0), &x0, &y0, &s64(2.0)]);
    assert!(out.same_as(&f64s(&[2, 1], &[2.0, -6.0])));
    let out = perf1(&gemm_op(), &[&z, &s64(f64::INFINITY), &x0, &y0, &s64(2.0)]);
    assert!(out.to_f64_array().iter().all(|v| v.is_nan()));
}

#[test]
fn perform_reports_shape_mismatches() {
    let z = f64s(&[2, 3], &[0.0; 6]);
    let x = f64s(&[2, 2], &[0.0; 4]);
    let y = f64s(&[2, 2], &[0.0; 4]);
    let e = perf(&gemm_op(), &[&z, &s64(1.0), &x, &y, &s64(1.0)]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "evaluation error in Gemm{no_inplace}: z has shape [2, 3] but dot(x, y) has shape [2, 2]"
    );
    let y3 = f64s(&[3, 2], &[0.0; 6]);
    let e = perf(&gemm_op(), &[&z, &s64(1.0), &x, &y3, &s64(1.0)]).unwrap_err();
    assert!(e.to_string().contains("not aligned"), "{e}");
}

// ----- the rewrite -----------------------------------------------------------

struct Vars {
    z: Tensor,
    x: Tensor,
    y: Tensor,
    a: Tensor,
    b: Tensor,
}

fn vars() -> Vars {
    Vars {
        z: matrix("z", F64),
        x: matrix("x", F64),
        y: matrix("y", F64),
        a: scalar("a", F64),
        b: scalar("b", F64),
    }
}

impl Vars {
    fn ins(&self) -> Vec<Tensor> {
        vec![
            self.z.clone(),
            self.x.clone(),
            self.y.clone(),
            self.a.clone(),
            self.b.clone(),
        ]
    }
    fn dot(&self) -> Tensor {
        dot(&self.x, &self.y).unwrap()
    }
    fn values(&self, m: usize, k: usize, n: usize) -> Vec<Value> {
        vec![
            Value::F64(data(&[m, n], 1)),
            Value::F64(data(&[m, k], 2)),
            Value::F64(data(&[k, n], 3)),
            s64(0.75),
            s64(-1.5),
        ]
    }
}

/// (expression, graph after FAST_RUN without inplace).
fn forms(v: &Vars) -> Vec<(Tensor, &'static str)> {
    let d = v.dot();
    let (z, a, b) = (&v.z, &v.a, &v.b);
    vec![
        (z + &d, "Gemm{no_inplace}(z, 1.0, x, y, 1.0)"),
        (z - &d, "Gemm{no_inplace}(z, -1.0, x, y, 1.0)"),
        (&d + z, "Gemm{no_inplace}(z, 1.0, x, y, 1.0)"),
        (z + &(&d * 2.0), "Gemm{no_inplace}(z, 2.0, x, y, 1.0)"),
        (z + &(a * &d), "Gemm{no_inplace}(z, a, x, y, 1.0)"),
        (z - &(&d * a), "Gemm{no_inplace}(z, (-a), x, y, 1.0)"),
        (
            &(z * 3.0) - &(&d * 2.0),
            "Gemm{no_inplace}(z, -2.0, x, y, 3.0)",
        ),
        (
            &(b * z) + &(a * &d),
            "Gemm{no_inplace}((b[None, None] * z), a, x, y, 1.0)",
        ),
        (
            z + &(&(&d * a) * 2.0),
            "Gemm{no_inplace}(z, (2.0 * a), x, y, 1.0)",
        ),
        (&(-&d) + z, "Gemm{no_inplace}(z, -1.0, x, y, 1.0)"),
    ]
}

#[test]
fn gemm_optimizer_rewrites_every_form_and_keeps_values() {
    let v = vars();
    let ins = v.ins();
    let vals = v.values(5, 7, 3);
    for (e, want) in forms(&v) {
        let before = FunctionGraph::new(&ins, std::slice::from_ref(&e)).unwrap();
        let shown = pprint_outputs(&before);
        assert!(shown.contains('@'), "{shown}");
        assert_eq!(
            rewritten(&ins, std::slice::from_ref(&e), &no_inplace()),
            want,
            "for {shown}"
        );
        let want_v = reference(&ins, &e, &vals);
        for mode in [Mode::fast_run(), no_inplace()] {
            let f = function(&ins, std::slice::from_ref(&e))
                .mode(mode)
                .compile()
                .unwrap();
            assert!(f.compile_profile().fallbacks().is_empty());
            let got = f.call_values(&vals).unwrap().remove(0);
            assert!(
                got.allclose(&want_v, 1e-12, 1e-12),
                "{shown}: {got:?} vs {want_v:?}"
            );
        }
    }
}

#[test]
fn gemm_optimizer_handles_nary_sums_and_two_products() {
    let v = vars();
    let ins = v.ins();
    let w = matrix("w", F64);
    let mut ins_w = ins.clone();
    ins_w.push(w.clone());
    let e = &(&v.z + &v.dot()) + &w;
    assert_eq!(
        rewritten(&ins_w, std::slice::from_ref(&e), &no_inplace()),
        "Gemm{no_inplace}((z + w), 1.0, x, y, 1.0)"
    );
    let e2 = &v.dot() + &dot(&v.x, &v.z).unwrap();
    // The second product becomes z, and FAST_RUN's inplace pass lets the
    // Gemm overwrite that intermediate.
    assert_eq!(
        rewritten(&ins, std::slice::from_ref(&e2), &Mode::fast_run()),
        "Gemm{inplace}((x @ z), 1.0, x, y, 1.0)"
    );
    let mut vals = v.values(4, 4, 4);
    vals.push(Value::F64(data(&[4, 4], 9)));
    for (ins, e) in [(&ins_w, &e), (&ins, &e2)] {
        let vals = &vals[..ins.len()];
        let f = function(ins, std::slice::from_ref(e)).compile().unwrap();
        let got = f.call_values(vals).unwrap().remove(0);
        assert!(got.allclose(&reference(ins, e, vals), 1e-12, 1e-12));
    }
}

#[test]
fn gemm_optimizer_handles_matrix_vector_and_f32() {
    let (x, u, zv) = (matrix("x", F64), vector("u", F64), vector("zv", F64));
    let ins = vec![zv.clone(), x.clone(), u.clone()];
    let e = &zv - &dot(&x, &u).unwrap();
    assert_eq!(
        rewritten(&ins, std::slice::from_ref(&e), &no_inplace()),
        "Gemm{no_inplace}(zv, -1.0, x, u, 1.0)"
    );
    let vals = vec![
        Value::F64(data(&[6], 1)),
        Value::F64(data(&[6, 4], 2)),
        Value::F64(data(&[4], 3)),
    ];
    let f = function(&ins, std::slice::from_ref(&e)).compile().unwrap();
    let got = f.call_values(&vals).unwrap().remove(0);
    assert!(got.allclose(&reference(&ins, &e, &vals), 1e-12, 1e-12));
    // vector-matrix
    let e = &zv + &dot(&u, &x.t()).unwrap();
    let f = function(&ins, std::slice::from_ref(&e)).compile().unwrap();
    assert!(f.graph().to_string().contains("Gemm"), "{}", f.graph());
    let got = f.call_values(&vals).unwrap().remove(0);
    assert!(got.allclose(&reference(&ins, &e, &vals), 1e-12, 1e-12));
    // f32
    let (zf, xf, yf) = (matrix("z", F32), matrix("x", F32), matrix("y", F32));
    let ins = vec![zf.clone(), xf.clone(), yf.clone()];
    let e = &zf + &(&dot(&xf, &yf).unwrap() * 0.5);
    assert_eq!(
        rewritten(&ins, std::slice::from_ref(&e), &no_inplace()),
        "Gemm{no_inplace}(z, 0.5, x, y, 1.0)"
    );
    let vals: Vec<Value> = [&[3usize, 5][..], &[3, 8], &[8, 5]]
        .iter()
        .enumerate()
        .map(|(k, s)| Value::F64(data(s, k as u64)).cast(F32))
        .collect();
    let f = function(&ins, std::slice::from_ref(&e)).compile().unwrap();
    let got = f.call_values(&vals).unwrap().remove(0);
    assert_eq!(got.dtype(), F32);
    assert!(got.allclose(&reference(&ins, &e, &vals), 1e-5, 1e-5));
}

#[test]
fn gemm_optimizer_leaves_what_it_must_not_touch() {
    let v = vars();
    let ins = v.ins();
    let d = v.dot();
    let not_gemm = |ins: &[Tensor], outs: &[Tensor]| {
        let g = rewritten(ins, outs, &no_inplace());
        assert!(!g.contains("Gemm"), "{g}");
        g
    };
    // The product is also an output: it is computed anyway.
    not_gemm(&ins, &[&v.z + &d, d.clone()]);
    // The scaled product has another client.
    let sd = &d * &v.a;
    not_gemm(&ins, &[&v.z + &sd, sd.exp()]);
    // z broadcasts (a row, a scalar): the sum is not z's type.
    let row = tensor("r", F64, &[Some(1), None]);
    let mut ins_r = ins.clone();
    ins_r.push(row.clone());
    not_gemm(&ins_r, &[&row + &d]);
    not_gemm(&ins, &[&d + 1.0]);
    // A non-scalar factor.
    let w = matrix("w", F64);
    let mut ins_w = ins.clone();
    ins_w.push(w.clone());
    not_gemm(&ins_w, &[&v.z + &(&w * &d)]);
    // Integer and mixed-dtype products.
    let (zi, xi, yi) = (
        matrix("zi", DType::I64),
        matrix("xi", DType::I64),
        matrix("yi", DType::I64),
    );
    not_gemm(
        &[zi.clone(), xi.clone(), yi.clone()],
        &[&zi + &dot(&xi, &yi).unwrap()],
    );
    let xf = matrix("xf", F32);
    let mut ins_f = ins.clone();
    ins_f.push(xf.clone());
    not_gemm(&ins_f, &[&v.z + &dot(&xf, &v.y).unwrap()]);
    // A vector-vector product's 0-d sum.
    let (p, q, c) = (vector("p", F64), vector("q", F64), scalar("c", F64));
    not_gemm(
        &[p.clone(), q.clone(), c.clone()],
        &[&c + &dot(&p, &q).unwrap()],
    );
    // Not in FAST_COMPILE, nor without the blas tag.
    let e = &v.z + &d;
    for mode in [Mode::fast_compile(), Mode::fast_run().excluding(&["blas"])] {
        let g = rewritten(&ins, std::slice::from_ref(&e), &mode);
        assert!(!g.contains("Gemm"), "{g}");
    }
}

#[test]
fn gemm_runs_before_fusion_and_a_second_pass_changes_nothing() {
    let v = vars();
    let ins = v.ins();
    // Fusion would otherwise fuse exp and add around the product.
    let e = &v.z.exp() + &v.dot();
    let mut fg = FunctionGraph::new(&ins, std::slice::from_ref(&e)).unwrap();
    rewrite_graph(&mut fg, &Mode::fast_run()).unwrap();
    let once = fg.to_string();
    assert_eq!(once, "FunctionGraph(Gemm{inplace}(exp(z), 1.0, x, y, 1.0))");
    rewrite_graph(&mut fg, &Mode::fast_run()).unwrap();
    assert_eq!(fg.to_string(), once);
}

// ----- inplace ---------------------------------------------------------------

#[test]
fn inplace_gemm_overwrites_only_what_is_safe() {
    let v = vars();
    let ins = v.ins();
    let d = v.dot();
    // A protected input stays; an intermediate is overwritten.
    assert_eq!(
        rewritten(&ins, &[&v.z + &d], &Mode::fast_run()),
        "Gemm{no_inplace}(z, 1.0, x, y, 1.0)"
    );
    // z read again after the Gemm: not overwritten.
    let ez = v.z.exp();
    let g = rewritten(&ins, &[&ez + &d, ez.sin()], &Mode::fast_run());
    assert!(g.contains("Gemm{no_inplace}"), "{g}");
    // Excluding inplace leaves it non-inplace.
    let g = rewritten(&ins, &[&ez + &d], &no_inplace());
    assert_eq!(g, "Gemm{no_inplace}(exp(z), 1.0, x, y, 1.0)");
    // z declared mutable: overwritten.
    let mut fg = FunctionGraph::new(&ins, &[&v.z + &d]).unwrap();
    let zv = fg.inputs()[0];
    fg.declare_mutable(zv).unwrap();
    rewrite_graph(&mut fg, &Mode::fast_run()).unwrap();
    assert_eq!(
        fg.to_string(),
        "FunctionGraph(Gemm{inplace}(z, 1.0, x, y, 1.0))"
    );
    // ... unless the product reads it.
    let zz = &v.z + &dot(&v.z, &v.y).unwrap();
    let mut fg = FunctionGraph::new(&ins, &[zz]).unwrap();
    fg.declare_mutable(zv).unwrap();
    rewrite_graph(&mut fg, &Mode::fast_run()).unwrap();
    assert_eq!(
        fg.to_string(),
        "FunctionGraph(Gemm{no_inplace}(z, 1.0, z, y, 1.0))"
    );
    let zt = &v.z + &dot(&v.x, &v.z.t()).unwrap();
    let mut fg = FunctionGraph::new(&ins, &[zt]).unwrap();
    fg.declare_mutable(zv).unwrap();
    rewrite_graph(&mut fg, &Mode::fast_run()).unwrap();
    assert_eq!(
        fg.to_string(),
        "FunctionGraph(Gemm{no_inplace}(z, 1.0, x, DimShuffle{1,0}(z), 1.0))"
    );
}

#[test]
fn the_linker_refuses_a_gemm_that_overwrites_an_operand() {
    let (z, y) = (matrix("z", F64), matrix("y", F64));
    let one = Tensor::scalar_constant(F64, 1.0);
    let g = Tensor::apply(Op::Gemm { inplace: true }, &[&z, &one, &z, &y, &one]).unwrap();
    let e = function(&[z, y], &[g])
        .mode(Mode::none())
        .mutable_inputs(&[0])
        .compile()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "compile error: Gemm{inplace} overwrites 'z' while reading it as x or y"
    );
}

fn strided_inputs(m: usize, k: usize, n: usize) -> (ArrayD<f64>, ArrayD<f64>, ArrayD<f64>) {
    // z: every other column of a wider array; x: transposed storage; y: every other row.
    let zb = data(&[m, 2 * n], 11);
    let xb = data(&[k, m], 12);
    let yb = data(&[2 * k, n], 13);
    (zb, xb, yb)
}

#[test]
fn jit_matches_the_reference_on_contiguous_transposed_and_strided_operands() {
    let v = vars();
    let ins = v.ins();
    let e = &(&v.z * 0.5) + &(&v.a * &v.dot());
    let (m, k, n) = (33, 70, 17);
    let (zb, xb, yb) = strided_inputs(m, k, n);
    let z = zb.slice(s![.., ..;2]).into_dyn();
    let x = xb.t().into_dyn();
    let y = yb.slice(s![..;2, ..]).into_dyn();
    let (a, b) = (s64(-0.75), s64(2.0));
    let owned: Vec<Value> = vec![
        Value::F64(z.to_owned()),
        Value::F64(x.to_owned()),
        Value::F64(y.to_owned()),
        a.clone(),
        b.clone(),
    ];
    let want = reference(&ins, &e, &owned);
    for mode in [Mode::fast_run(), no_inplace()] {
        let f = function(&ins, std::slice::from_ref(&e))
            .mode(mode)
            .compile()
            .unwrap();
        assert!(f.graph().to_string().contains("Gemm"), "{}", f.graph());
        let args: Vec<Arg<'_>> = vec![
            z.view().into(),
            x.view().into(),
            y.view().into(),
            (&a).into(),
            (&b).into(),
        ];
        let got = f.call(&args).unwrap().remove(0);
        assert!(got.allclose(&want, 1e-12, 1e-12));
        let got = f.call_values(&owned).unwrap().remove(0);
        assert!(got.allclose(&want, 1e-12, 1e-12));
    }
}

#[test]
fn jit_beta_zero_ignores_z_and_an_empty_product_matches_the_reference() {
    let (z, x, y, a, b) = (
        matrix("z", F64),
        matrix("x", F64),
        matrix("y", F64),
        scalar("a", F64),
        scalar("b", F64),
    );
    let g = gemm(&z, &a, &x, &y, &b).unwrap();
    let ins = vec![z, x, y, a, b];
    for mode in [Mode::none(), Mode::fast_run()] {
        let f = function(&ins, std::slice::from_ref(&g))
            .mode(mode)
            .compile()
            .unwrap();
        assert!(f.compile_profile().fallbacks().is_empty());
        let cases = [
            // beta == 0: NaN and inf in z are ignored.
            (vec![f64::NAN, f64::INFINITY, 1.0, 2.0], [2, 2, 2], 1.0, 0.0),
            (vec![f64::NAN, 0.0, 1.0, 2.0], [2, 2, 2], 1.0, 1.0),
            // k == 0
            (vec![1.0, -2.0, 3.0, 4.0], [2, 0, 2], 3.0, 2.0),
            (vec![1.0, -2.0, 3.0, 4.0], [2, 0, 2], f64::INFINITY, 2.0),
            (vec![1.0, -2.0, 3.0, 4.0], [2, 0, 2], 1.0, 0.0),
        ];
        for (zd, [m, k, n], al, be) in cases {
            let vals = vec![
                f64s(&[m, n], &zd),
                Value::F64(data(&[m, k], 5)),
                Value::F64(data(&[k, n], 6)),
                s64(al),
                s64(be),
            ];
            let want = reference(&ins, &g, &vals);
            let got = f.call_values(&vals).unwrap().remove(0);
            assert!(got.allclose(&want, 1e-12, 1e-12), "{got:?} vs {want:?}");
            if be == 0.0 && al.is_finite() {
                assert!(got.to_f64_array().iter().all(|v| v.is_finite()));
            }
        }
        // A run-time shape mismatch is an error, not a panic.
        let vals = vec![
            Value::F64(data(&[2, 3], 1)),
            Value::F64(data(&[2, 4], 2)),
            Value::F64(data(&[4, 2], 3)),
            s64(1.0),
            s64(1.0),
        ];
        let e = f.call_values(&vals).unwrap_err().to_string();
        assert!(
            e.contains("'z' has shape [2, 3] but dot(x, y) has shape [2, 2]"),
            "{e}"
        );
    }
}

#[test]
fn a_users_z_is_written_only_when_declared_mutable_and_lent_mutably() {
    let v = vars();
    let ins = v.ins();
    let e = &v.z + &(&v.dot() * 2.0);
    let (m, k, n) = (16, 24, 12);
    let vals = v.values(m, k, n);
    let want = reference(&ins, &e, &vals);
    let Value::F64(z0) = &vals[0] else {
        unreachable!()
    };
    let rest: Vec<&Value> = vals[1..].iter().collect();
    let bytes = 8 * m * n;

    // Not declared mutable: lent mutably, still untouched.
    let f = function(&ins, std::slice::from_ref(&e)).compile().unwrap();
    assert!(f.graph().to_string().contains("Gemm{no_inplace}"));
    let mut z = z0.clone();
    let mut args: Vec<ArgMut<'_>> = vec![(&mut z).into()];
    args.extend(rest.iter().map(|&r| ArgMut::from(r)));
    let (out, prof) = f.call_mut_profiled(&mut args).unwrap();
    drop(args);
    assert!(out[0].allclose(&want, 1e-12, 1e-12));
    assert_eq!(&z, z0);
    assert_eq!(prof.peak_bytes, bytes, "one output buffer");

    // Declared mutable: overwritten in place, no buffer of the call's own.
    let f = function(&ins, std::slice::from_ref(&e))
        .mutable_inputs(&[0])
        .compile()
        .unwrap();
    assert_eq!(
        f.graph().to_string(),
        "FunctionGraph(Gemm{inplace}(z, 2.0, x, y, 1.0))"
    );
    let mut z = z0.clone();
    let mut args: Vec<ArgMut<'_>> = vec![(&mut z).into()];
    args.extend(rest.iter().map(|&r| ArgMut::from(r)));
    let (out, prof) = f.call_mut_profiled(&mut args).unwrap();
    drop(args);
    assert!(out[0].allclose(&want, 1e-12, 1e-12));
    assert!(Value::F64(z.clone()).same_as(&out[0]), "z holds the result");
    assert_eq!(prof.peak_bytes, 0, "no intermediate buffer");

    // Declared mutable but lent read-only: copied first, z untouched.
    let (out, prof) = f
        .call_profiled(&vals.iter().map(Arg::from).collect::<Vec<_>>())
        .unwrap();
    assert!(out[0].allclose(&want, 1e-12, 1e-12));
    assert!(vals[0].same_as(&Value::F64(z0.clone())));
    assert_eq!(prof.peak_bytes, bytes, "the copy of z");

    // Without inplace, the declared-mutable z is not written.
    let f = function(&ins, std::slice::from_ref(&e))
        .mutable_inputs(&[0])
        .mode(no_inplace())
        .compile()
        .unwrap();
    let mut z = z0.clone();
    let mut args: Vec<ArgMut<'_>> = vec![(&mut z).into()];
    args.extend(rest.iter().map(|&r| ArgMut::from(r)));
    let out = f.call_mut(&mut args).unwrap();
    drop(args);
    assert!(out[0].allclose(&want, 1e-12, 1e-12));
    assert_eq!(&z, z0);
}

#[test]
fn a_mutable_strided_z_is_updated_through_its_strides() {
    let v = vars();
    let ins = v.ins();
    let e = &v.z - &v.dot();
    let (m, k, n) = (9, 5, 7);
    let vals = v.values(m, k, n);
    let f = function(&ins, std::slice::from_ref(&e))
        .mutable_inputs(&[0])
        .compile()
        .unwrap();
    let mut wide = data(&[m, 2 * n], 21);
    let zview = wide.slice(s![.., ..;2]).to_owned().into_dyn();
    let mut owned = vals.clone();
    owned[0] = Value::F64(zview);
    let want = reference(&ins, &e, &owned);
    let before = wide.clone();
    {
        let zmut = wide.slice_mut(s![.., ..;2]).into_dyn();
        let mut args: Vec<ArgMut<'_>> = vec![zmut.into()];
        args.extend(vals[1..].iter().map(ArgMut::from));
        let out = f.call_mut(&mut args).unwrap();
        assert!(out[0].allclose(&want, 1e-12, 1e-12));
    }
    let written = wide.slice(s![.., ..;2]).to_owned().into_dyn();
    assert!(Value::F64(written).allclose(&want, 1e-12, 1e-12));
    assert_eq!(
        wide.slice(s![.., 1..;2]),
        before.slice(s![.., 1..;2]),
        "the other columns are untouched"
    );
}

#[test]
fn call_into_writes_the_gemm_result_into_the_callers_array() {
    let v = vars();
    let ins = v.ins();
    let (m, k, n) = (12, 10, 8);
    let vals = v.values(m, k, n);
    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
    // Non-inplace Gemm: z is copied into the caller's array.
    let e = &v.z + &v.dot();
    // Inplace Gemm over an intermediate: exp writes into the caller's array.
    let e2 = &v.z.exp() - &(&v.dot() * &v.a);
    // The second one's only buffer is its 0-d alpha, -a.
    for (e, peak) in [(e, 0), (e2, 8)] {
        let f = function(&ins, std::slice::from_ref(&e)).compile().unwrap();
        assert!(f.graph().to_string().contains("Gemm"), "{}", f.graph());
        let want = reference(&ins, &e, &vals);
        let mut out = vec![Value::F64(ArrayD::zeros(IxDyn(&[m, n])))];
        let ptr = match &out[0] {
            Value::F64(a) => a.as_ptr(),
            _ => unreachable!(),
        };
        let prof = f.call_into_profiled(&args, &mut out).unwrap();
        assert!(out[0].allclose(&want, 1e-12, 1e-12), "{}", f.graph());
        let Value::F64(a) = &out[0] else {
            unreachable!()
        };
        assert_eq!(a.as_ptr(), ptr, "the caller's allocation is kept");
        assert_eq!(
            prof.peak_bytes,
            peak,
            "no m×n buffer of the call's own: {}",
            f.graph()
        );
    }
}

#[test]
fn a_fresh_intermediate_saves_a_buffer_with_inplace_gemm() {
    let v = vars();
    let ins = v.ins();
    let e = &v.z.exp() + &v.dot();
    let (m, k, n) = (20, 6, 20);
    let vals = v.values(m, k, n);
    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from).collect();
    let peak = |mode: Mode| {
        let f = function(&ins, std::slice::from_ref(&e))
            .mode(mode)
            .compile()
            .unwrap();
        let (out, prof) = f.call_profiled(&args).unwrap();
        (out.into_iter().next().unwrap(), prof.peak_bytes)
    };
    let (a, with) = peak(Mode::fast_run());
    let (b, without) = peak(no_inplace());
    assert!(a.allclose(&b, 1e-12, 1e-12));
    assert_eq!(with, 8 * m * n, "exp(z)'s buffer only");
    assert_eq!(without, 16 * m * n, "exp(z) and the Gemm output");
}

/// The inner product of two f64 vectors runs the runtime's dot pass: below
/// the parallel threshold in one call, above it as partials of fixed
/// 64Ki-element chunks added in chunk order, so its value is the same with
/// one thread and with two, and agrees with the reference (whose sequential
/// sum differs by reassociation only). Strided vectors take GEMM.
#[test]
fn vector_dot_products_match_the_reference_for_any_thread_count() {
    let x = vector("x", F64);
    let y = vector("y", F64);
    let d = dot(&x, &y).unwrap();
    let ins = [x.clone(), y.clone()];
    let f = function(&ins, std::slice::from_ref(&d)).compile().unwrap();
    for n in [0usize, 1, 17, 1000, 131_071, 300_001] {
        let a = data(&[n], 7);
        let b = data(&[n], 8);
        let want = reference(&ins, &d, &[Value::F64(a.clone()), Value::F64(b.clone())]);
        let mut got = Vec::new();
        for threads in [1, 2] {
            kiln_runtime::parallel::set_num_threads(threads);
            let r = f.call(&[Arg::from(&a), Arg::from(&b)]).unwrap().remove(0);
            got.push(r.to_f64_array().iter().next().copied().unwrap());
        }
        kiln_runtime::parallel::set_num_threads(0);
        let w = want.to_f64_array().iter().next().copied().unwrap();
        let scale: f64 = a.iter().zip(&b).map(|(p, q)| (p * q).abs()).sum::<f64>() + 1.0;
        assert!(
            (got[0] - w).abs() <= 1e-12 * scale,
            "n = {n}: {} vs {w}",
            got[0]
        );
        assert_eq!(
            got[0].to_bits(),
            got[1].to_bits(),
            "n = {n}: thread count changed the value"
        );
        // Every other element of wider arrays: strided, through GEMM.
        let wide_a = data(&[2 * n], 9);
        let wide_b = data(&[2 * n], 10);
        let sa = wide_a.slice(s![..;2]).into_dyn();
        let sb = wide_b.slice(s![..;2]).into_dyn();
        let want = reference(
            &ins,
            &d,
            &[Value::F64(sa.to_owned()), Value::F64(sb.to_owned())],
        );
        let r = f.call(&[Arg::from(&sa), Arg::from(&sb)]).unwrap().remove(0);
        let (g, w) = (
            r.to_f64_array().iter().next().copied().unwrap(),
            want.to_f64_array().iter().next().copied().unwrap(),
        );
        let scale: f64 = sa.iter().zip(&sb).map(|(p, q)| (p * q).abs()).sum::<f64>() + 1.0;
        assert!(
            (g - w).abs() <= 1e-12 * scale,
            "strided n = {n}: {g} vs {w}"
        );
    }
}

/// Gram matrices (`Xᵀ·X`, `X·Xᵀ`: one operand the other's transpose, the
/// same input) reach the runtime's symmetric product: the values of the
/// reference, an exactly symmetric result, and the same bits on one and
/// two threads, in f64 and f32.
#[test]
fn gram_matrices_match_the_reference_and_are_symmetric() {
    for dtype in [F64, F32] {
        // 600 outputs a side: three symmetric tiles, the last partial.
        for (rows, cols) in [(70, 600), (600, 70)] {
            let x = tensor("X", dtype, &[None, None]);
            let xt = x.t();
            let prod = if rows < cols {
                dot(&xt, &x)
            } else {
                dot(&x, &xt)
            }
            .unwrap();
            let v = Value::from_f64_array(dtype, data(&[rows, cols], 21));
            let want = reference(std::slice::from_ref(&x), &prod, std::slice::from_ref(&v));
            let f = function(std::slice::from_ref(&x), std::slice::from_ref(&prod))
                .compile()
                .unwrap();
            let mut got = Vec::new();
            for threads in [1, 2] {
                kiln_runtime::parallel::set_num_threads(threads);
                got.push(f.call(&[Arg::from(&v)]).unwrap().remove(0).to_f64_array());
            }
            kiln_runtime::parallel::set_num_threads(0);
            let n = rows.max(cols);
            let (g, w) = (&got[0], want.to_f64_array());
            assert_eq!(g.shape(), &[n, n]);
            let tol = if dtype == F32 { 1e-4 } else { 1e-11 };
            for i in 0..n {
                for j in 0..n {
                    let (a, b) = (g[[i, j]], w[[i, j]]);
                    assert!(
                        (a - b).abs() <= tol * (1.0 + b.abs()),
                        "{dtype} ({i},{j}): {a} vs {b}"
                    );
                    assert_eq!(
                        a.to_bits(),
                        g[[j, i]].to_bits(),
                        "{dtype} not symmetric at ({i},{j})"
                    );
                }
            }
            assert!(g
                .iter()
                .zip(got[1].iter())
                .all(|(a, b)| a.to_bits() == b.to_bits()));
        }
    }
}
