//! Basic indexing (`Subtensor`) and slice updates (`IncSubtensor`,
//! `SetSubtensor`) end to end: type inference and rejected inputs, the
//! reference against numpy's documented values, the JIT (mode `none` and
//! FAST_RUN) against the reference, the stencil fused into one kernel over
//! three views, the inplace update and the DestroyHandler's refusal, the
//! indexing rewrites (before / after and values) and the expression language.

mod common_rewrites;
use common_rewrites::*;

use std::collections::HashMap;

use kiln::eval::evaluate;
use kiln::graph::DestroyHandler;
use kiln::linker::{Arg, ArgMut};
use kiln::ops::{Bound, IndexEntry};
use kiln::rewriting::Mode;
use kiln::*;
use ndarray::{arr1, ArrayD, IxDyn};

fn v64(a: &[f64]) -> Value {
    Value::F64(arr1(a).into_dyn())
}

fn vals(v: &Value) -> Vec<f64> {
    v.to_f64_array().iter().copied().collect()
}

/// `x` as an `n`-element vector 0, 1, ..., n-1.
fn iota(n: usize) -> Value {
    v64(&(0..n).map(|i| i as f64).collect::<Vec<_>>())
}

fn matrix34() -> Value {
    Value::F64(ArrayD::from_shape_fn(IxDyn(&[3, 4]), |i| {
        (i[0] * 4 + i[1]) as f64
    }))
}

/// Builds `src` over the declared inputs.
fn expr(decl: &str, src: &str) -> (Vec<Tensor>, Result<Tensor>) {
    let ins = decls(decl);
    let map: HashMap<String, Tensor> = ins
        .iter()
        .map(|t| (t.name().unwrap().to_string(), t.clone()))
        .collect();
    let out = build_expression(src, &map);
    (ins, out)
}

/// The reference value and the compiled values in modes `none` and
/// FAST_RUN of `src` on `inputs`; asserts they agree exactly.
fn run(decl: &str, src: &str, inputs: &[Value]) -> Value {
    let (ins, out) = expr(decl, src);
    let out = out.unwrap_or_else(|e| panic!("{src}: {e}"));
    let fg = FunctionGraph::new(&ins, std::slice::from_ref(&out)).unwrap();
    let reference = evaluate(&fg, inputs).unwrap().remove(0);
    for mode in [Mode::none(), Mode::fast_run()] {
        let f = function(&ins, std::slice::from_ref(&out))
            .mode(mode.clone())
            .compile()
            .unwrap();
        let args: Vec<Arg> = inputs.iter().map(Arg::from).collect();
        let got = f.call(&args).unwrap().remove(0);
        assert_eq!(got.shape(), reference.shape(), "{src} in {mode:?}");
        assert!(
            got.allclose(&reference, 0.0, 0.0),
            "{src} in {mode:?}: {got:?} vs {reference:?}"
        );
    }
    reference
}

#[test]
fn slices_follow_numpy() {
    let x = iota(10);
    // Values from numpy: np.arange(10)[...]
    let cases: &[(&str, &[f64])] = &[
        ("x[1:-1]", &[1., 2., 3., 4., 5., 6., 7., 8.]),
        ("x[::-1]", &[9., 8., 7., 6., 5., 4., 3., 2., 1., 0.]),
        ("x[8:2:-2]", &[8., 6., 4.]),
        ("x[-3:]", &[7., 8., 9.]),
        ("x[-100:3]", &[0., 1., 2.]),
        ("x[5:100]", &[5., 6., 7., 8., 9.]),
        ("x[100:]", &[]),
        ("x[5:2]", &[]),
        ("x[::3]", &[0., 3., 6., 9.]),
        ("x[-1:-100:-4]", &[9., 5., 1.]),
        ("x[2:] - 2*x[1:-1] + x[:-2]", &[0.; 8]),
        ("x[...]", &[0., 1., 2., 3., 4., 5., 6., 7., 8., 9.]),
    ];
    for (src, want) in cases {
        let got = run("x=f64[:]", src, std::slice::from_ref(&x));
        assert_eq!(vals(&got), *want, "{src}");
    }
    assert_eq!(
        vals(&run("x=f64[:]", "x[-1]", std::slice::from_ref(&x))),
        [9.0]
    );
    assert_eq!(run("x=f64[:]", "x[-1]", std::slice::from_ref(&x)).ndim(), 0);
    // Matrices: rows, columns, negative steps, None and ... .
    let m = matrix34();
    assert_eq!(
        vals(&run("X=f64[:, :]", "X[:, 0]", std::slice::from_ref(&m))),
        [0., 4., 8.]
    );
    assert_eq!(
        vals(&run(
            "X=f64[:, :]",
            "X[::-2, 1:3]",
            std::slice::from_ref(&m)
        )),
        [9., 10., 1., 2.]
    );
    let g = run("X=f64[:, :]", "X[1, None, ::-1]", std::slice::from_ref(&m));
    assert_eq!(g.shape(), [1, 4]);
    assert_eq!(vals(&g), [7., 6., 5., 4.]);
    let g = run("X=f64[:, :]", "X[..., -1]", std::slice::from_ref(&m));
    assert_eq!(vals(&g), [3., 7., 11.]);
    // A reduction reads a reversed strided view.
    assert_eq!(
        vals(&run(
            "X=f64[:, :]",
            "sum(X[::-1, ::2], axis=0)",
            std::slice::from_ref(&m)
        )),
        [12., 18.]
    );
    // Empty input and other dtypes.
    assert_eq!(run("x=f64[:]", "x[1:]", &[iota(0)]).shape(), [0]);
    let i = Value::I32(arr1(&[1, -2, 3, -4]).into_dyn());
    assert_eq!(
        vals(&run("k=i32[:]", "k[::-1] * 2", &[i])),
        [-8., 6., -4., 2.]
    );
}

#[test]
fn symbolic_bounds_are_read_and_clamped_at_run_time() {
    let x = iota(10);
    let s = |v: i64| Value::scalar_i64(DType::I64, v);
    let d = "x=f64[:]; a=i64[]; b=i64[]";
    assert_eq!(
        vals(&run(d, "x[a:b]", &[x.clone(), s(2), s(5)])),
        [2., 3., 4.]
    );
    assert_eq!(
        vals(&run(d, "x[a:b]", &[x.clone(), s(-3), s(100)])),
        [7., 8., 9.]
    );
    assert_eq!(
        vals(&run(d, "x[b:a:-3]", &[x.clone(), s(0), s(100)])),
        [9., 6., 3.]
    );
    assert_eq!(
        vals(&run(d, "x[a] + x[b]", &[x.clone(), s(-1), s(0)])),
        [9.]
    );
    // Out of range at run time: an error in the reference and the JIT.
    let (ins, out) = expr(d, "x[a] + 0 * x[b]");
    let out = out.unwrap();
    let f = function(&ins, &[out]).compile().unwrap();
    let err = f
        .call(&[Arg::from(&x), Arg::from(&s(10)), Arg::from(&s(0))])
        .unwrap_err()
        .to_string();
    assert!(err.contains("out of bounds"), "{err}");
    let (ins, out) = expr(d, "x[::a]");
    let f = function(&ins, &[out.unwrap()]).compile().unwrap();
    let err = f
        .call(&[Arg::from(&x), Arg::from(&s(0)), Arg::from(&s(0))])
        .unwrap_err()
        .to_string();
    assert!(err.contains("step cannot be zero"), "{err}");
}

#[test]
fn types_are_inferred_and_bad_indices_rejected() {
    let x = tensor("x", DType::F32, &[Some(10), None]);
    let t = |items: &[Idx]| x.slice(items).map(|t| t.ty().clone());
    assert_eq!(t(&[Idx::range(1, -1)]).unwrap().shape, [Some(8), None]);
    assert_eq!(t(&[Idx::from(..).step(-3)]).unwrap().shape, [Some(4), None]);
    assert_eq!(t(&[(..).into(), 2.into()]).unwrap().shape, [Some(10)]);
    assert_eq!(t(&[(20..).into()]).unwrap().shape, [Some(0), None]);
    assert_eq!(
        t(&[(..).into(), (0..2).into()]).unwrap().shape,
        [Some(10), None]
    );
    assert_eq!(t(&[Idx::NewAxis, 3.into()]).unwrap().shape, [Some(1), None]);
    assert_eq!(t(&[Idx::Ellipsis, 0.into()]).unwrap().shape, [Some(10)]);
    assert_eq!(t(&[0.into()]).unwrap().dtype, DType::F32);
    // A symbolic bound: the static size is unknown.
    let a = scalar("a", DType::I32);
    assert_eq!(t(&[Idx::range(&a, 5)]).unwrap().shape, [None, None]);
    let msg = |r: Result<TensorType>| r.unwrap_err().to_string();
    assert!(msg(t(&[0.into(), 0.into(), 0.into()])).contains("too many indices"));
    assert!(msg(t(&[10.into()])).contains("out of bounds"));
    assert!(msg(t(&[(-11).into()])).contains("out of bounds"));
    assert!(msg(t(&[Idx::from(..).step(0)])).contains("step cannot be zero"));
    assert!(msg(t(&[Idx::Ellipsis, Idx::Ellipsis])).contains("single ellipsis"));
    let f = scalar("f", DType::F64);
    assert!(msg(t(&[Idx::from(&f)])).contains("a float cannot be an index"));
    // Updates: y must fit x's dtype and broadcast to the selection.
    let y = tensor("y", DType::F64, &[None]);
    let e = set_subtensor(&x, &[(1..3).into()], &y)
        .unwrap_err()
        .to_string();
    assert!(e.contains("without a downcast"), "{e}");
    let y = tensor("y", DType::F32, &[Some(3)]);
    let e = inc_subtensor(&x, &[(1..3).into(), 0.into()], &y)
        .unwrap_err()
        .to_string();
    assert!(e.contains("do not broadcast"), "{e}");
    let e = set_subtensor(&x, &[Idx::NewAxis], &y)
        .unwrap_err()
        .to_string();
    assert!(e.contains("new axis"), "{e}");
    let ok = inc_subtensor(
        &x,
        &[(1..3).into()],
        &tensor("y", DType::I8, &[Some(1), Some(1)]),
    );
    assert_eq!(ok.unwrap().ty(), x.ty());
    // The expression language: float and tensor indices.
    let err = |src: &str| {
        expr("x=f64[:]; i=i64[:]; m=bool[:]; k=f64[]", src)
            .1
            .unwrap_err()
            .to_string()
    };
    assert!(err("x[1.5]").contains("indices must be integers"));
    assert!(err("x[k]").contains("indices must be integers"));
    // One integer or boolean tensor is advanced indexing; other mixes are errors.
    assert!(err("x[i, i]").contains("advanced indexing takes one integer tensor"));
    assert!(err("x[x]").contains("indices must be integers or booleans"));
    assert!(err("x[0, 1]").contains("too many indices"));
}

#[test]
fn updates_follow_numpy() {
    let x = iota(6);
    // numpy: a = np.arange(6.); a[1:5:2] = [10, 20]
    let y = v64(&[10., 20.]);
    let d = "x=f64[:]; y=f64[:]";
    assert_eq!(
        vals(&run(
            d,
            "set_subtensor(x[1:5:2], y)",
            &[x.clone(), y.clone()]
        )),
        [0., 10., 2., 20., 4., 5.]
    );
    assert_eq!(
        vals(&run(
            d,
            "inc_subtensor(x[::-3], y)",
            &[x.clone(), y.clone()]
        )),
        [0., 1., 22., 3., 4., 15.]
    );
    assert_eq!(
        vals(&run(
            "x=f64[:]",
            "set_subtensor(x[-2:], 7)",
            std::slice::from_ref(&x)
        )),
        [0., 1., 2., 3., 7., 7.]
    );
    assert_eq!(
        vals(&run(
            "x=f64[:]",
            "inc_subtensor(x[2], 0.5)",
            std::slice::from_ref(&x)
        )),
        [0., 1., 2.5, 3., 4., 5.]
    );
    // Integer x, a row broadcast over a matrix's columns, an empty slice.
    let k = Value::I16(arr1(&[1i16, 2, 3]).into_dyn());
    assert_eq!(
        vals(&run("k=i16[:]", "inc_subtensor(k[1:], 32767)", &[k])),
        [1., -32767., -32766.]
    );
    let m = matrix34();
    let r = v64(&[1., 2., 3., 4.]);
    assert_eq!(
        vals(&run(
            "X=f64[:, :]; r=f64[4]",
            "inc_subtensor(X[1:], r)",
            &[m.clone(), r]
        )),
        [0., 1., 2., 3., 5., 7., 9., 11., 9., 11., 13., 15.]
    );
    assert_eq!(
        vals(&run(
            "x=f64[:]",
            "set_subtensor(x[4:2], 1)",
            std::slice::from_ref(&x)
        )),
        vals(&x)
    );
    // y of the wrong length: a run-time error.
    let (ins, out) = expr(d, "set_subtensor(x[1:], y)");
    let f = function(&ins, &[out.unwrap()]).compile().unwrap();
    let e = f
        .call(&[Arg::from(&x), Arg::from(&y)])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("does not fit") || e.contains("do not fit"),
        "{e}"
    );
}

#[test]
fn the_stencil_is_one_fused_kernel_over_three_views() {
    let (ins, out) = expr("x=f64[:]", "x[2:] - 2*x[1:-1] + x[:-2]");
    let f = function(&ins, &[out.unwrap()]).compile().unwrap();
    let g = f.graph();
    let kinds: Vec<String> = g.node_ids().map(|n| g.node(n).op.name()).collect();
    let subs = kinds.iter().filter(|k| k.starts_with("Subtensor")).count();
    assert_eq!(subs, 3, "{kinds:?}");
    assert_eq!(kinds.len(), 4, "one fused node over three views: {kinds:?}");
    assert!(
        kinds.iter().any(|k| k.starts_with("Composite")),
        "{kinds:?}"
    );
    let x = v64(&[1., 4., 9., 16., 25., 36.]);
    assert_eq!(
        vals(&f.call(&[Arg::from(&x)]).unwrap()[0]),
        [2., 2., 2., 2.]
    );
}

#[test]
fn set_subtensor_is_inplace_in_fast_run_unless_x_is_read_later() {
    let x = vector("x", DType::F64);
    let y = vector("y", DType::F64);
    // x is an intermediate with no other reader: the update overwrites it.
    let e = x.exp();
    let out = set_subtensor(&e, &[(1..3).into()], &y).unwrap();
    let f = function(&[x.clone(), y.clone()], &[out]).compile().unwrap();
    let shown = f.graph().to_string();
    assert!(shown.contains("SetSubtensor{1:3}{inplace}"), "{shown}");
    let xv = v64(&[0., 0., 0., 0.]);
    let yv = v64(&[5., 6.]);
    assert_eq!(
        vals(&f.call(&[Arg::from(&xv), Arg::from(&yv)]).unwrap()[0]),
        [1., 5., 6., 1.]
    );
    // exp(x) is also read after the update: the DestroyHandler refuses.
    let upd = set_subtensor(&e, &[(1..3).into()], &y).unwrap();
    let later = &upd + &e;
    let f = function(&[x.clone(), y.clone()], &[later])
        .compile()
        .unwrap();
    let shown = f.graph().to_string();
    assert!(
        shown.contains("SetSubtensor{1:3}(") && !shown.contains("SetSubtensor{1:3}{inplace}"),
        "{shown}"
    );
    assert_eq!(
        vals(&f.call(&[Arg::from(&xv), Arg::from(&yv)]).unwrap()[0]),
        [2., 6., 7., 2.]
    );
    // Validated directly: an inplace update of a value read afterwards is refused.
    let e2 = x.exp();
    let upd = Tensor::apply(
        Op::IncSubtensor {
            idx: vec![IndexEntry::Int(Bound::Const(0))],
            set: true,
            inplace: true,
        },
        &[&e2, &Tensor::scalar_constant(DType::F64, 1.0)],
    )
    .unwrap();
    let both = &upd + &e2;
    let mut fg = FunctionGraph::new(std::slice::from_ref(&x), &[both]).unwrap();
    fg.attach_feature(DestroyHandler::new(&[])).unwrap();
    let err = fg.validate().unwrap_err().to_string();
    assert!(err.contains("would run before another reader"), "{err}");
    // A mutable input lent mutably is updated in its own array.
    let f = function(
        std::slice::from_ref(&x),
        &[inc_subtensor(
            &x,
            &[(..2).into()],
            &Tensor::scalar_constant(DType::F64, 1.0),
        )
        .unwrap()],
    )
    .mutable_inputs(&[0])
    .compile()
    .unwrap();
    assert!(f.graph().to_string().contains("IncSubtensor{:2}{inplace}"));
    let mut a = ArrayD::from_elem(IxDyn(&[3]), 1.0f64);
    let out = f.call_mut(&mut [ArgMut::from(&mut a)]).unwrap();
    assert_eq!(vals(&out[0]), [2., 2., 1.]);
}

#[test]
fn printers_show_numpy_indices() {
    let (ins, out) = expr("x=f64[:]; a=i64[]", "x[1:-1] + x[::-2] + x[a:]");
    let fg = FunctionGraph::new(&ins, &[out.unwrap()]).unwrap();
    assert_eq!(show(&fg), "((x[1:-1] + x[::-2]) + x[a:])");
    assert!(fg.to_string().contains("Subtensor{1:-1}(x)"), "{fg}");
    assert!(fg.to_string().contains("Subtensor{?:}(x, a)"), "{fg}");
    let (ins, out) = expr(
        "x=f64[:]; y=f64[]",
        "set_subtensor(x[2], y) + inc_subtensor(x[:1], 1)",
    );
    let fg = FunctionGraph::new(&ins, &[out.unwrap()]).unwrap();
    assert_eq!(
        show(&fg),
        "(set_subtensor(x[2], y) + inc_subtensor(x[:1], 1.0))"
    );
}

// Rewrites: before / after, fixed point and values (`check_rule`).

#[test]
fn useless_subtensor() {
    let x = tensor("x", DType::F64, &[None, Some(3)]);
    let s = x.slice(&[(0..).into(), (..3).into()]).unwrap();
    let fg = graph_of(std::slice::from_ref(&x), &(&s + 1.0));
    check_rule(
        "local_useless_subtensor",
        fg,
        "(x[0:, :3] + 1.0)",
        "(x + 1.0)",
    );
    let s = x.slice(&[(1..).into()]).unwrap();
    check_no_fire("local_useless_subtensor", graph_of(&[x], &s));
}

#[test]
fn subtensor_merge() {
    let fg = graph("x=f64[:]", "x[1:][2:7:2]");
    check_rule("local_subtensor_merge", fg, "x[1:][2:7:2]", "x[3:8:2]");
    let fg = graph("x=f64[:]", "x[2:][3]");
    check_rule("local_subtensor_merge", fg, "x[2:][3]", "x[5]");
    let fg = graph("X=f64[6, :]", "X[::-1][1:, 0][::2]");
    check_rule(
        "local_subtensor_merge",
        fg,
        "X[::-1][1:, 0][::2]",
        "X[4::-2, 0]",
    );
    // Negative bounds of an unknown size are left alone.
    check_no_fire("local_subtensor_merge", graph("x=f64[:]", "x[:-1][1:]"));
}

#[test]
fn subtensor_lift() {
    let fg = graph("x=f64[:, :]; y=f64[:]", "(x + y[None, :])[1:, 0]");
    check_rule(
        "local_subtensor_lift",
        fg,
        "(x + y[None, :])[1:, 0]",
        "(x[1:, 0] + y[None, :][:, 0])",
    );
    // The sum is read elsewhere too: lifting would compute it twice.
    let (x, y) = (vector("x", DType::F64), vector("y", DType::F64));
    let s = &x + &y;
    let out = &s.slice(&[Idx::from(1..)]).unwrap() + &s.sum_all();
    check_no_fire("local_subtensor_lift", graph_of(&[x, y], &out));
}

#[test]
fn subtensor_of_dimshuffle_and_alloc() {
    let fg = graph("x=f64[:, :]", "x.T[1:, 0]");
    check_rule(
        "local_subtensor_of_dimshuffle",
        fg,
        "x.T[1:, 0]",
        "x[0, 1:]",
    );
    let fg = graph("x=f64[:]", "x[None, :][0, 2:]");
    check_rule(
        "local_subtensor_of_dimshuffle",
        fg,
        "x[None, :][0, 2:]",
        "x[2:]",
    );
    let v = scalar("v", DType::F64);
    let n = scalar("n", DType::I64);
    let a = alloc(
        &v,
        &[&n, &Tensor::constant(Value::scalar_i64(DType::I64, 5))],
    )
    .unwrap();
    let s = a.slice(&[(..).into(), Idx::range(1, -1)]).unwrap();
    let fg = graph_of(&[v, n], &s);
    check_rule(
        "local_subtensor_of_alloc",
        fg,
        "alloc(v, n, 5)[:, 1:-1]",
        "alloc(v, n, 3)",
    );
}

#[test]
fn useless_inc_subtensor_and_shape() {
    let fg = graph("x=f64[:]; y=f64[:]", "set_subtensor(x[:], y)");
    check_rule(
        "local_useless_inc_subtensor",
        fg,
        "set_subtensor(x[:], y)",
        "second(x, y)",
    );
    let fg = graph("x=f64[:]; y=f64[]", "inc_subtensor(x[0:], y)");
    check_rule(
        "local_useless_inc_subtensor",
        fg,
        "inc_subtensor(x[0:], y)",
        "(x + y[None])",
    );
    check_no_fire(
        "local_useless_inc_subtensor",
        graph("x=f64[:]; y=f64[]", "set_subtensor(x[1:], y)"),
    );
    let x = matrix("x", DType::F64);
    let s = x.slice(&[1.into()]).unwrap();
    let fg = graph_of(std::slice::from_ref(&x), &s.shape_i(0).unwrap());
    check_rule(
        "local_shape_i_of_subtensor",
        fg,
        "Shape_i{0}(x[1])",
        "Shape_i{1}(x)",
    );
    // Static sizes fold through type inference.
    let x = tensor("x", DType::F64, &[Some(10)]);
    let s = x.slice(&[Idx::from(1..).step(3)]).unwrap();
    assert_eq!(s.ty().shape, [Some(3)]);
}

/// The subscript's advanced forms (numpy's values): `x[idx]` and
/// `X[:, idx]` are gathers (negative indices count from the end), `x[mask]`
/// a boolean mask, and `inc_subtensor(x[idx], y)` accumulates duplicates as
/// `np.add.at`; each in mode `none` and FAST_RUN against the reference.
#[test]
fn subscripts_with_tensors_are_advanced_indexing() {
    let i64s = |a: &[i64]| Value::I64(ndarray::arr1(a).into_dyn());
    let d = "x=f64[:]; i=i64[:]";
    // numpy: np.arange(6.)[[4, -1, 0, 4]] = [4, 5, 0, 4]
    let got = run(d, "x[i]", &[iota(6), i64s(&[4, -1, 0, 4])]);
    assert_eq!(vals(&got), [4., 5., 0., 4.]);
    // numpy: np.arange(12.).reshape(3, 4)[:, [3, 0]] = [[3, 0], [7, 4], [11, 8]]
    let got = run(
        "X=f64[:, :]; i=i64[:]",
        "X[:, i]",
        &[matrix34(), i64s(&[3, 0])],
    );
    assert_eq!(got.shape(), [3, 2]);
    assert_eq!(vals(&got), [3., 0., 7., 4., 11., 8.]);
    let got = run(
        "X=f64[:, :]; i=i64[:]",
        "X[i, :]",
        &[matrix34(), i64s(&[-1])],
    );
    assert_eq!(vals(&got), [8., 9., 10., 11.]);
    // numpy: x = np.arange(6.); x[x > 2.5] = [3, 4, 5]
    let got = run("x=f64[:]", "x[x > 2.5]", &[iota(6)]);
    assert_eq!(vals(&got), [3., 4., 5.]);
    // numpy: a = np.arange(6.); np.add.at(a, [1, 1, 5], 10) -> [0, 21, 2, 3, 4, 15]
    let got = run(d, "inc_subtensor(x[i], 10)", &[iota(6), i64s(&[1, 1, 5])]);
    assert_eq!(vals(&got), [0., 21., 2., 3., 4., 15.]);
    let got = run(d, "set_subtensor(x[i], -1)", &[iota(6), i64s(&[1, 5])]);
    assert_eq!(vals(&got), [0., -1., 2., 3., 4., -1.]);
    // An index out of range is an error, never a read past the end.
    let (ins, out) = expr(d, "x[i]");
    let f = function(&ins, &[out.unwrap()]).compile().unwrap();
    let (x, i) = (iota(6), i64s(&[6]));
    let e = f
        .call(&[Arg::from(&x), Arg::from(&i)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("out of bounds"), "{e}");
    let (_, masked_update) = expr("x=f64[:]", "set_subtensor(x[x > 1], 0)");
    let e = masked_update.unwrap_err().to_string();
    assert!(e.contains("boolean mask is not supported"), "{e}");
}
