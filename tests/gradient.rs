//! `kiln::gradient`: every pullback against central finite differences (on
//! the reference evaluation of the gradient graph as built, and on the
//! FAST_RUN JIT-compiled gradient), the edge cases the issue names (`abs`
//! at 0, `maximum` ties, `prod` with one and two zeros, `sqrt` near 0), the
//! disconnected / integer-input conventions with their messages, known
//! gradients, Jacobians, Hessians, vjp and jvp.
mod gradient_support;
use gradient_support::*;

use kiln::gradient::{disconnected_warnings, grad_with, DisconnectedInputs, GradOptions};
use kiln::ops::{CRef, Composite};
use kiln::{
    alloc, clip, constant, dot, elemwise, gemm, grad, hessian, jacobian, jvp, scalar as sc, switch,
    tensor, vector, vjp, DType, Op, ReduceOp, ScalarOp, Tensor, Value,
};
use ndarray::{ArrayD, IxDyn};

/// Relative and absolute tolerances of a finite-difference comparison (see
/// `numeric_grad`): 1e-6 relative is ~1e4 times the expected error.
const RTOL: f64 = 1e-6;
const ATOL: f64 = 1e-8;

/// Weights of the given shape (distinct, of both signs) so that output
/// gradients are not uniform.
fn weights(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let w: Vec<f64> = (0..n)
        .map(|i| (0.5 + 0.25 * i as f64) * if i % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    constant(Value::F64(ArrayD::from_shape_vec(IxDyn(shape), w).unwrap()))
}

/// `sum(y * w)` (y cast to f64) for y of the given shape.
fn weighted_sum(y: &Tensor, shape: &[usize]) -> Tensor {
    elemwise(ScalarOp::Mul, &[&y.cast(DType::F64), &weights(shape)])
        .unwrap()
        .sum_all()
}

/// Checks the gradients of `cost` with respect to the f64 inputs `wrt`
/// (positions in `inputs`) against finite differences, on the reference
/// evaluation of the unrewritten gradient graph and on FAST_RUN.
fn check(what: &str, inputs: &[Tensor], cost: &Tensor, vals: &[Value], wrt: &[usize]) {
    let ws: Vec<Tensor> = wrt.iter().map(|&k| inputs[k].clone()).collect();
    let gs = grad(cost, &ws).unwrap_or_else(|e| panic!("{what}: {e}"));
    let by_ref = reference(inputs, &gs, vals);
    let by_jit = fast_run(inputs, &gs, vals);
    for (j, &k) in wrt.iter().enumerate() {
        let num = numeric_grad(inputs, cost, vals, k);
        assert_close(
            &format!("{what} d/d{k} (reference)"),
            &by_ref[j],
            &num,
            RTOL,
            ATOL,
        );
        assert_close(
            &format!("{what} d/d{k} (FAST_RUN)"),
            &by_jit[j],
            &num,
            RTOL,
            ATOL,
        );
    }
}

const GENERIC: [f64; 4] = [-1.7, -0.3, 0.4, 1.3];
const OTHER: [f64; 4] = [0.7, -1.1, 2.3, -0.6];
const POSITIVE: [f64; 4] = [0.3, 0.9, 1.7, 3.1];
const UNIT: [f64; 4] = [-0.8, -0.2, 0.3, 0.7];
const ABOVE_ONE: [f64; 4] = [1.2, 1.9, 2.5, 4.0];
const NEGATIVE: [f64; 4] = [-3.0, -0.9, -0.2, -0.05];
const TARGET: [f64; 4] = [0.1, 0.5, 0.9, 0.3];

/// The points each scalar op is differentiated at (one vector per input),
/// or `None` for ops whose gradient is checked elsewhere. The match is
/// exhaustive: a new scalar op must say how it is tested.
fn domain(op: ScalarOp) -> Option<Vec<[f64; 4]>> {
    use ScalarOp::*;
    Some(match op {
        Add | Sub | Mul | Maximum | Minimum => vec![GENERIC, OTHER],
        TrueDiv => vec![GENERIC, OTHER],
        IntDiv | Mod | Fmod => vec![[2.3, -1.7, 0.9, 3.4], [0.7, 1.1, -1.3, 2.2]],
        ArcTan2 | Hypot | CopySign => vec![GENERIC, OTHER],
        SigmoidBinaryCrossentropy => vec![GENERIC, TARGET],
        Pow => vec![POSITIVE, OTHER],
        Clip => vec![
            [-1.5, 0.2, 0.8, 2.0],
            [-1.0, 0.5, -0.5, -1.0],
            [1.0, 1.0, 0.7, 3.0],
        ],
        Neg | Abs | Sign | Sqr | Exp | Exp2 | Expm1 | Sigmoid | Softplus | Sin | Cos | Tan
        | ArcTan | Sinh | Cosh | Tanh | ArcSinh | Erf | Erfc | Floor | Ceil | Round | Trunc
        | Identity => {
            vec![GENERIC]
        }
        Reciprocal => vec![GENERIC],
        Log | Log2 | Log10 | Log1p | Sqrt => vec![POSITIVE],
        ArcSin | ArcCos | ArcTanh => vec![UNIT],
        ArcCosh => vec![ABOVE_ONE],
        Log1mexp => vec![NEGATIVE],
        Lt | Le | Gt | Ge | Eq | Neq => vec![GENERIC, OTHER],
        IsNan | IsInf | IsFinite => vec![GENERIC],
        // Bool/integer-only ops, `switch`, `second` and casts: tested below.
        And | Or | Xor | Invert | LeftShift | RightShift | Switch | Second | Cast(_) => {
            return None
        }
    })
}

#[test]
fn every_float_scalar_op_matches_finite_differences() {
    let mut checked = 0;
    for op in ScalarOp::all() {
        let Some(points) = domain(op) else { continue };
        let names = ["x", "y", "z"];
        let inputs: Vec<Tensor> = (0..points.len())
            .map(|i| vector(names[i], DType::F64))
            .collect();
        let vals: Vec<Value> = points.iter().map(|p| vec1(p)).collect();
        let refs: Vec<&Tensor> = inputs.iter().collect();
        let y = elemwise(op, &refs).unwrap();
        let cost = weighted_sum(&y, &[4]);
        let wrt: Vec<usize> = (0..inputs.len()).collect();
        check(&op.name(), &inputs, &cost, &vals, &wrt);
        checked += 1;
    }
    assert!(checked >= 45, "only {checked} ops checked");
}

#[test]
fn zero_gradient_ops_give_connected_zeros() {
    let x = vector("x", DType::F64);
    let y = vector("y", DType::F64);
    let vals = [vec1(&GENERIC), vec1(&OTHER)];
    let xb = x.cast(DType::Bool);
    let yb = y.cast(DType::Bool);
    let costs = [
        weighted_sum(&x.floor(), &[4]),
        weighted_sum(&x.sign(), &[4]),
        weighted_sum(&elemwise(ScalarOp::Lt, &[&x, &y]).unwrap(), &[4]),
        weighted_sum(&elemwise(ScalarOp::And, &[&xb, &yb]).unwrap(), &[4]),
        weighted_sum(&elemwise(ScalarOp::Xor, &[&xb, &yb]).unwrap(), &[4]),
        weighted_sum(&xb.invert().unwrap(), &[4]),
        weighted_sum(&elemwise(ScalarOp::IntDiv, &[&x, &y]).unwrap(), &[4]),
        weighted_sum(&x.cast(DType::I32), &[4]),
    ];
    for cost in &costs {
        let g = grad(cost, std::slice::from_ref(&x)).expect("connected through a zero-gradient op");
        let r = fast_run(&[x.clone(), y.clone()], &g, &vals);
        assert_eq!(r[0], ArrayD::<f64>::zeros(IxDyn(&[4])), "{cost}");
    }
}

#[test]
fn switch_second_and_casts() {
    let x = vector("x", DType::F64);
    let y = vector("y", DType::F64);
    let c = constant(Value::Bool(
        ndarray::arr1(&[true, false, false, true]).into_dyn(),
    ));
    let vals = [vec1(&GENERIC), vec1(&OTHER)];
    let ins = [x.clone(), y.clone()];
    check(
        "switch",
        &ins,
        &weighted_sum(&switch(&c, &x, &y).unwrap(), &[4]),
        &vals,
        &[0, 1],
    );
    // second(x, y): only y's values flow; x is disconnected.
    let s = elemwise(ScalarOp::Second, &[&x, &y]).unwrap();
    check("second", &ins, &weighted_sum(&s, &[4]), &vals, &[1]);
    let e = grad(&weighted_sum(&s, &[4]), std::slice::from_ref(&x)).unwrap_err();
    assert!(
        e.to_string()
            .contains("does not depend on wrt[0] (x: f64(?,))"),
        "{e}"
    );
    // A cast to f32 and back: the gradient is cast back to f64 (exact: w).
    let cost = weighted_sum(&x.cast(DType::F32).sqr(), &[4]);
    let g = grad(&cost, std::slice::from_ref(&x)).unwrap();
    assert_eq!(g[0].dtype(), DType::F64);
    let r = fast_run(&ins, &g, &vals);
    let xs = GENERIC.map(|v| v as f32 as f64);
    let expected: Vec<f64> = (0..4)
        .map(|i| 2.0 * xs[i] * (0.5 + 0.25 * i as f64) * if i % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    assert_close(
        "cast",
        &r[0],
        &ndarray::arr1(&expected).into_dyn(),
        1e-6,
        0.0,
    );
}

/// A float op of an integer input differentiates in float: the pullback of
/// `atan2(y, x)` with `y` a u8 cast is `-y / (x² + y²)` with `y²` not
/// wrapped in u8 (found by the random-graph property test: 250² is 36 in
/// u8).
#[test]
fn integer_operands_of_a_pullback_are_cast_to_float() {
    let k = vector("k", DType::I64);
    let x = vector("x", DType::F64);
    let ins = [k.clone(), x.clone()];
    let y = k.cast(DType::U8);
    let cost = elemwise(ScalarOp::ArcTan2, &[&y, &x]).unwrap().sum_all();
    let g = grad(&cost, std::slice::from_ref(&x)).unwrap();
    let ks = [-6i64, 17, 250, 0];
    let xs = [0.5, -2.0, 3.0, 1.5];
    let vals = [
        Value::from_i64_array(DType::I64, ndarray::arr1(&ks).into_dyn()),
        vec1(&xs),
    ];
    let expected: Vec<f64> = ks
        .iter()
        .zip(xs)
        .map(|(&k, x)| {
            let y = f64::from(k as u8);
            -y / (x * x + y * y)
        })
        .collect();
    let expected = ndarray::arr1(&expected).into_dyn();
    for (how, r) in [
        ("reference", reference(&ins, &g, &vals)),
        ("fast_run", fast_run(&ins, &g, &vals)),
    ] {
        assert_close(how, &r[0], &expected, 1e-14, 0.0);
    }
}

#[test]
fn edge_cases_follow_pytensor() {
    let a = sc("a", DType::F64);
    let b = sc("b", DType::F64);
    let ins = [a.clone(), b.clone()];
    let run = |cost: &Tensor, va: f64, vb: f64| -> Vec<f64> {
        let g = grad_with(
            Some(cost),
            &ins,
            &GradOptions {
                disconnected_inputs: DisconnectedInputs::Ignore,
                ..Default::default()
            },
        )
        .unwrap();
        let r1 = fast_run(&ins, &g, &[scalar(va), scalar(vb)]);
        let r2 = reference(&ins, &g, &[scalar(va), scalar(vb)]);
        assert_eq!(r1, r2, "{cost}");
        r1.iter()
            .map(|v| v.iter().next().copied().unwrap())
            .collect()
    };
    // abs'(0) = 0.
    assert_eq!(run(&a.abs(), 0.0, 0.0), vec![0.0, 0.0]);
    // Ties of maximum / minimum go to the first argument.
    let mx = elemwise(ScalarOp::Maximum, &[&a, &b]).unwrap();
    let mn = elemwise(ScalarOp::Minimum, &[&a, &b]).unwrap();
    assert_eq!(run(&mx, 2.0, 2.0), vec![1.0, 0.0]);
    assert_eq!(run(&mn, 2.0, 2.0), vec![1.0, 0.0]);
    assert_eq!(run(&mx, 1.0, 2.0), vec![0.0, 1.0]);
    // clip: a tie with a bound goes to x.
    let three = Tensor::scalar_constant(DType::F64, 3.0);
    assert_eq!(
        run(&clip(&a, &b, &three).unwrap(), 2.0, 2.0),
        vec![1.0, 0.0]
    );
    // pow at base 0: the exponent's gradient is 0 (not NaN).
    assert_eq!(run(&kiln::pow(&a, &b).unwrap(), 0.0, 2.0), vec![0.0, 0.0]);
    // sqrt near 0: large but finite.
    let g = run(&a.sqrt(), 1e-300, 0.0)[0];
    assert!(
        g.is_finite() && (g - 0.5e150).abs() <= 1e-12 * 0.5e150,
        "{g}"
    );

    // prod with no, one and two zeros.
    let x = vector("x", DType::F64);
    let gp = grad(&x.prod(&[0]).unwrap(), std::slice::from_ref(&x)).unwrap();
    for (v, e) in [
        ([2.0, 3.0, 4.0], [12.0, 8.0, 6.0]),
        ([0.0, 2.0, 3.0], [6.0, 0.0, 0.0]),
        ([0.0, 2.0, 0.0], [0.0, 0.0, 0.0]),
    ] {
        for r in [
            fast_run(std::slice::from_ref(&x), &gp, &[vec1(&v)]),
            reference(std::slice::from_ref(&x), &gp, &[vec1(&v)]),
        ] {
            assert_eq!(r[0], ndarray::arr1(&e).into_dyn(), "prod at {v:?}");
        }
    }
    // max: the positions equal to the maximum share the gradient equally
    // (JAX's rule, see the pullback), a NaN maximum gives none.
    let gm = grad(&x.max(&[0]).unwrap(), std::slice::from_ref(&x)).unwrap();
    for (v, e) in [
        ([1.0, 3.0, 3.0], [0.0, 0.5, 0.5]),
        ([3.0, 3.0, 3.0], [1.0 / 3.0; 3]),
        ([1.0, f64::NAN, 3.0], [0.0, 0.0, 0.0]),
    ] {
        for r in [
            fast_run(std::slice::from_ref(&x), &gm, &[vec1(&v)]),
            reference(std::slice::from_ref(&x), &gm, &[vec1(&v)]),
        ] {
            assert_eq!(r[0], ndarray::arr1(&e).into_dyn(), "max at {v:?}");
        }
    }
    // Where tied entries move together the function is differentiable and
    // the gradient is its derivative: d/dx max(a + x) = 1 with two equal
    // entries of a (PyTensor's rule gives 2).
    let av = kiln::constant(Value::F64(ndarray::arr1(&[1.0, 2.0, 2.0]).into_dyn()));
    let cost = kiln::tensor::add(&av, &a).unwrap().max(&[0]).unwrap();
    assert_eq!(run(&cost, 0.5, 0.0), vec![1.0, 0.0]);
}

#[test]
fn structural_ops_match_finite_differences() {
    let m = tensor("M", DType::F64, &[Some(3), Some(4)]);
    let n = tensor("N", DType::F64, &[Some(4), Some(2)]);
    let u = tensor("u", DType::F64, &[Some(4)]);
    let v = tensor("v", DType::F64, &[Some(3)]);
    let row = tensor("r", DType::F64, &[Some(1), Some(4)]);
    let ins = [m.clone(), n.clone(), u.clone(), v.clone(), row.clone()];
    let mv = |shape: &[usize], seed: f64| {
        let k: usize = shape.iter().product();
        let d: Vec<f64> = (0..k)
            .map(|i| ((i as f64 + seed) * 0.7).sin() * 1.5 + 0.1)
            .collect();
        Value::F64(ArrayD::from_shape_vec(IxDyn(shape), d).unwrap())
    };
    let vals = [
        mv(&[3, 4], 0.3),
        mv(&[4, 2], 1.1),
        mv(&[4], 2.0),
        mv(&[3], 0.6),
        mv(&[1, 4], 3.3),
    ];
    let all = [0, 1, 2, 3, 4];
    let cases: Vec<(&str, Tensor, Vec<usize>)> = vec![
        (
            "dot 2x2",
            weighted_sum(&dot(&m, &n).unwrap(), &[3, 2]),
            vec![0, 1],
        ),
        (
            "dot 2x1",
            weighted_sum(&dot(&m, &u).unwrap(), &[3]),
            vec![0, 2],
        ),
        (
            "dot 1x2",
            weighted_sum(&dot(&v, &m).unwrap(), &[4]),
            vec![3, 0],
        ),
        ("dot 1x1", dot(&u, &u).unwrap().sin(), vec![2]),
        ("transpose", weighted_sum(&m.t().exp(), &[4, 3]), vec![0]),
        (
            "broadcast row",
            weighted_sum(&(&m * &row).tanh(), &[3, 4]),
            vec![0, 4],
        ),
        (
            "expand_dims + broadcast",
            weighted_sum(&(&m + &u.expand_dims(0).unwrap()).sqr(), &[3, 4]),
            vec![0, 2],
        ),
        (
            "drop broadcastable",
            weighted_sum(&row.dimshuffle(&[Some(1)]).unwrap().exp(), &[4]),
            vec![4],
        ),
        (
            "sum axis 0",
            weighted_sum(&m.sqr().sum(&[0]).unwrap(), &[4]),
            vec![0],
        ),
        (
            "sum axis 1 keepdims",
            weighted_sum(
                &m.reduce(ReduceOp::Sum, Some(&[1]), true).unwrap().exp(),
                &[3, 1],
            ),
            vec![0],
        ),
        (
            "prod axis 1",
            weighted_sum(&m.prod(&[1]).unwrap(), &[3]),
            vec![0],
        ),
        (
            "prod all",
            m.reduce(ReduceOp::Prod, None, false).unwrap(),
            vec![0],
        ),
        (
            "max axis 0",
            weighted_sum(&m.max(&[0]).unwrap(), &[4]),
            vec![0],
        ),
        (
            "min all",
            m.reduce(ReduceOp::Min, None, false).unwrap().sin(),
            vec![0],
        ),
        ("mean", m.mean(None, false).unwrap().exp(), vec![0]),
        (
            "reshape",
            weighted_sum(&m.reshape(&[2, 6]).unwrap().sin(), &[2, 6]),
            vec![0],
        ),
        (
            "reshape back",
            weighted_sum(
                &m.reshape(&[12]).unwrap().reshape(&[4, 3]).unwrap().cos(),
                &[4, 3],
            ),
            vec![0],
        ),
        (
            "alloc",
            weighted_sum(
                &alloc(
                    &u,
                    &[
                        &constant(Value::scalar_i64(DType::I64, 3)),
                        &constant(Value::scalar_i64(DType::I64, 4)),
                    ],
                )
                .unwrap()
                .exp(),
                &[3, 4],
            ),
            vec![2],
        ),
        (
            "gemm",
            weighted_sum(
                &gemm(
                    &dot(&m, &n).unwrap(),
                    &Tensor::scalar_constant(DType::F64, 0.7),
                    &m,
                    &n,
                    &Tensor::scalar_constant(DType::F64, -1.3),
                )
                .unwrap(),
                &[3, 2],
            ),
            vec![0, 1],
        ),
        (
            "reuse",
            weighted_sum(&(&(&m * &m) + &m.exp()).sin(), &[3, 4]),
            vec![0],
        ),
    ];
    let _ = all;
    for (what, cost, wrt) in &cases {
        check(what, &ins, cost, &vals, wrt);
    }
    // Shape and Shape_i are disconnected.
    let e = grad(
        &m.shape_i(0).unwrap().cast(DType::F64),
        std::slice::from_ref(&m),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("does not depend on wrt[0] (M: f64(3, 4))"),
        "{e}"
    );
}

#[test]
fn composite_and_fused_reduce_are_differentiated_through_their_scalar_graphs() {
    let x = vector("x", DType::F64);
    let y = vector("y", DType::F64);
    // exp(x) * y + sin(x), and x itself as a second output.
    let mut c = Composite::new(vec![DType::F64, DType::F64]);
    let e = c.push(ScalarOp::Exp, &[CRef::Input(0)]).unwrap();
    let m = c.push(ScalarOp::Mul, &[e, CRef::Input(1)]).unwrap();
    let s = c.push(ScalarOp::Sin, &[CRef::Input(0)]).unwrap();
    let o = c.push(ScalarOp::Add, &[m, s]).unwrap();
    c.outputs = vec![o, CRef::Input(0)];
    let outs = Tensor::apply_multi(Op::composite(c.clone()), &[&x, &y]).unwrap();
    let cost = &weighted_sum(&outs[0], &[4]) + &weighted_sum(&outs[1].sqr(), &[4]);
    let ins = [x.clone(), y.clone()];
    let vals = [vec1(&GENERIC), vec1(&OTHER)];
    check("composite", &ins, &cost, &vals, &[0, 1]);
    // The same input twice.
    let twice = Tensor::apply_multi(Op::composite(c.clone()), &[&x, &x]).unwrap();
    check(
        "composite(x, x)",
        &ins,
        &weighted_sum(&twice[0], &[4]),
        &vals,
        &[0],
    );
    // FusedReduce: sum over the pre-map.
    c.outputs = vec![o];
    let fr = Tensor::apply(
        Op::FusedReduce {
            op: ReduceOp::Sum,
            axes: None,
            pre: std::sync::Arc::new(c),
            post: None,
        },
        &[&x, &y],
    )
    .unwrap();
    check("fused reduce", &ins, &fr, &vals, &[0, 1]);
}

#[test]
fn gradients_of_a_fast_run_graph_equal_gradients_of_the_original() {
    // Rewriting fuses the forward graph into Composites and FusedReduces;
    // differentiating the rewritten graph gives the same gradient.
    let x = vector("x", DType::F64);
    let y = vector("y", DType::F64);
    let fwd = (&(&x.exp() * &y) + &x.sigmoid()).sqr().sum_all();
    let f = kiln::function(&[x.clone(), y.clone()], std::slice::from_ref(&fwd))
        .compile()
        .unwrap();
    let rebuilt = f.graph().output_tensors(&[x.clone(), y.clone()]).unwrap();
    let ins = [x.clone(), y.clone()];
    let vals = [vec1(&GENERIC), vec1(&OTHER)];
    let g0 = reference(&ins, &grad(&fwd, &ins).unwrap(), &vals);
    let g1 = reference(&ins, &grad(&rebuilt[0], &ins).unwrap(), &vals);
    for (a, b) in g1.iter().zip(&g0) {
        assert_close("rewritten forward graph", a, b, 1e-12, 1e-12);
    }
}

#[test]
fn disconnected_and_integer_conventions() {
    let x = vector("x", DType::F64);
    let y = vector("y", DType::F64);
    let k = vector("k", DType::I64);
    let cost = (&x * &k.cast(DType::F64)).sum_all();
    // Raise (the default) names the variable.
    let e = grad(&cost, std::slice::from_ref(&y)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "gradient error: the cost does not depend on wrt[0] (y: f64(?,)): it is not part of the cost's graph, or only through an op whose output ignores its value (set disconnected_inputs to \"ignore\" to get zeros)"
    );
    // Ignore and Warn give zeros of y's shape.
    for policy in [DisconnectedInputs::Ignore, DisconnectedInputs::Warn] {
        let opts = GradOptions {
            disconnected_inputs: policy,
            ..Default::default()
        };
        let g = grad_with(Some(&cost), std::slice::from_ref(&y), &opts).unwrap();
        let r = fast_run(
            &[x.clone(), y.clone(), k.clone()],
            &g,
            &[
                vec1(&[1.0, 2.0]),
                vec1(&[3.0, 4.0]),
                Value::I64(ndarray::arr1(&[1, 2]).into_dyn()),
            ],
        );
        assert_eq!(r[0], ndarray::arr1(&[0.0, 0.0]).into_dyn());
    }
    // The warnings Warn would print, for callers that report them their
    // way: one per disconnected wrt, in order (k is connected).
    let w = disconnected_warnings(
        Some(&cost),
        &[x.clone(), y.clone(), k.clone()],
        &GradOptions::default(),
    )
    .unwrap();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("the cost does not depend on wrt[1] (y: f64(?,))"),
        "{w:?}"
    );
    // An integer input is connected, with a float zero gradient (PyTensor).
    let g = grad(&cost, &[x.clone(), k.clone()]).unwrap();
    assert_eq!(g[1].dtype(), DType::F64);
    let r = fast_run(
        &[x.clone(), k.clone()],
        &g,
        &[
            vec1(&[1.0, 2.0]),
            Value::I64(ndarray::arr1(&[3, 4]).into_dyn()),
        ],
    );
    assert_eq!(r[0], ndarray::arr1(&[3.0, 4.0]).into_dyn());
    assert_eq!(r[1], ndarray::arr1(&[0.0, 0.0]).into_dyn());
    // A non-scalar cost is an error.
    let e = grad(&x, std::slice::from_ref(&x)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "gradient error: the cost must be a scalar (0-d), got f64(?,)"
    );
    // Nothing to differentiate.
    let e = grad_with(None, std::slice::from_ref(&x), &GradOptions::default()).unwrap_err();
    assert!(e.to_string().contains("nothing to differentiate"), "{e}");
    // The gradient of the cost with respect to itself is 1.
    let s = x.sum_all();
    let g = grad(&s, std::slice::from_ref(&s)).unwrap();
    assert_eq!(
        fast_run(std::slice::from_ref(&x), &g, &[vec1(&[1.0])])[0],
        ndarray::arr0(1.0).into_dyn()
    );
}

#[test]
fn known_grads_seed_the_walk() {
    let x = vector("x", DType::F64);
    let h = x.exp();
    let gh = vector("gh", DType::F64);
    let opts = GradOptions {
        known_grads: vec![(h.clone(), gh.clone())],
        ..Default::default()
    };
    let g = grad_with(None, std::slice::from_ref(&x), &opts).unwrap();
    let r = fast_run(
        &[x.clone(), gh.clone()],
        &g,
        &[vec1(&[0.0, 1.0]), vec1(&[2.0, 3.0])],
    );
    assert_close(
        "known_grads",
        &r[0],
        &ndarray::arr1(&[2.0, 3.0 * 1f64.exp()]).into_dyn(),
        1e-15,
        0.0,
    );
    // A known gradient of another number of dimensions is refused.
    let bad = GradOptions {
        known_grads: vec![(h, sc("s", DType::F64))],
        ..Default::default()
    };
    let e = grad_with(None, &[x], &bad).unwrap_err();
    assert!(
        e.to_string()
            .contains("does not have the variable's 1 dimensions"),
        "{e}"
    );
}

#[test]
fn jacobian_hessian_vjp_jvp() {
    let x = tensor("x", DType::F64, &[Some(3)]);
    let a = tensor("A", DType::F64, &[Some(3), Some(3)]);
    let xv = vec1(&[0.3, -0.7, 1.1]);
    let av = Value::F64(
        ndarray::arr2(&[[1.0, 2.0, 0.5], [-1.0, 0.3, 0.2], [0.0, 1.5, -2.0]]).into_dyn(),
    );
    // y = tanh(A x): J = diag(1 - y²) A.
    let y = dot(&a, &x).unwrap().tanh();
    let j = jacobian(&y, std::slice::from_ref(&x)).unwrap();
    let ins = [x.clone(), a.clone()];
    let vals = [xv.clone(), av.clone()];
    let jr = fast_run(&ins, &j, &vals);
    let yr = reference(&ins, std::slice::from_ref(&y), &vals)[0].clone();
    let am = av.to_f64_array();
    let mut expected = ArrayD::<f64>::zeros(IxDyn(&[3, 3]));
    for i in 0..3 {
        for k in 0..3 {
            expected[[i, k]] = (1.0 - yr[i] * yr[i]) * am[[i, k]];
        }
    }
    assert_close("jacobian", &jr[0], &expected, 1e-12, 1e-15);
    // Hessian of x·A·x = A + Aᵀ.
    let q = dot(&x, &dot(&a, &x).unwrap()).unwrap();
    let h = hessian(&q, std::slice::from_ref(&x)).unwrap();
    let hr = fast_run(&ins, &h, &vals);
    let expected = &am + &am.t();
    assert_close("hessian", &hr[0], &expected.into_dyn(), 1e-12, 1e-15);
    // vjp and jvp agree with the Jacobian: uᵀJ and J v.
    let u = tensor("u", DType::F64, &[Some(3)]);
    let v = tensor("v", DType::F64, &[Some(3)]);
    let uv = vec1(&[1.0, -2.0, 0.5]);
    let vv = vec1(&[0.2, 0.4, -1.0]);
    let ins = [x.clone(), a.clone(), u.clone(), v.clone()];
    let vals = [xv, av, uv.clone(), vv.clone()];
    let jm = fast_run(&ins, &j, &vals)[0]
        .clone()
        .into_dimensionality::<ndarray::Ix2>()
        .unwrap();
    let back = vjp(
        std::slice::from_ref(&y),
        std::slice::from_ref(&x),
        std::slice::from_ref(&u),
    )
    .unwrap();
    let fwd = jvp(
        std::slice::from_ref(&y),
        std::slice::from_ref(&x),
        std::slice::from_ref(&v),
    )
    .unwrap();
    let r = fast_run(&ins, &[back[0].clone(), fwd[0].clone()], &vals);
    let um = uv
        .to_f64_array()
        .into_dimensionality::<ndarray::Ix1>()
        .unwrap();
    let vm = vv
        .to_f64_array()
        .into_dimensionality::<ndarray::Ix1>()
        .unwrap();
    assert_close("vjp", &r[0], &um.dot(&jm).into_dyn(), 1e-12, 1e-15);
    assert_close("jvp", &r[1], &jm.dot(&vm).into_dyn(), 1e-12, 1e-15);
    // The double-vjp leaves no trace of its dummy cotangent: only x, A, v.
    let mut free: Vec<String> = fwd[0]
        .free_inputs()
        .iter()
        .map(|t| t.name().unwrap().to_string())
        .collect();
    free.sort();
    assert_eq!(free, ["A", "v", "x"]);
    // A Jacobian needs a static length.
    let e = jacobian(&vector("w", DType::F64).exp(), &[x]).unwrap_err();
    assert!(e.to_string().contains("must have a static length"), "{e}");
}

#[test]
fn f32_gradients_stay_f32() {
    let x = vector("x", DType::F32);
    let cost = (&x.sigmoid() * 2.0).sum_all();
    let g = grad(&cost, std::slice::from_ref(&x)).unwrap();
    assert_eq!(g[0].dtype(), DType::F32);
    let r = fast_run(
        std::slice::from_ref(&x),
        &g,
        &[Value::F32(ndarray::arr1(&[0.0f32, 1.0]).into_dyn())],
    );
    let s1 = 1.0 / (1.0 + (-1.0f64).exp());
    assert_close(
        "f32 sigmoid'",
        &r[0],
        &ndarray::arr1(&[0.5, 2.0 * s1 * (1.0 - s1)]).into_dyn(),
        1e-6,
        0.0,
    );
}

/// `sigmoid(x)` computed stably in f64 (the closed-form reference).
fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        x.exp() / (1.0 + x.exp())
    }
}

/// FAST_RUN gradients of the stability cases at |x| up to 800, against
/// closed forms, within 1e-12 relative error.
fn stability_case(
    src: &str,
    decl: &str,
    wrt: &str,
    vals: &[Value],
    exact: &dyn Fn(&[ArrayD<f64>]) -> ArrayD<f64>,
) {
    let names: Vec<String> = decl.split(';').map(String::from).collect();
    let decls = kiln::cli::declare_all(&names).unwrap();
    let cost = kiln::cli::build(src, &decls).unwrap();
    let ins: Vec<Tensor> = decls.iter().map(|d| d.tensor.clone()).collect();
    let w = decls.iter().find(|d| d.name == wrt).unwrap().tensor.clone();
    let g = grad(&cost, &[w]).unwrap();
    let got = fast_run(&ins, &g, vals).remove(0);
    let raw: Vec<ArrayD<f64>> = vals.iter().map(Value::to_f64_array).collect();
    let want = exact(&raw);
    for (a, b) in got.iter().zip(want.iter()) {
        assert!(a.is_finite(), "{src}: d/d{wrt} = {got}");
        assert!(
            (a - b).abs() <= 1e-12 * b.abs() + 1e-300,
            "{src}: d/d{wrt} = {got}, exact {want}"
        );
    }
}

const WIDE: [f64; 9] = [-800.0, -100.0, -30.0, -1.0, 0.0, 0.5, 30.0, 100.0, 800.0];

#[test]
fn stabilized_gradients_are_finite_and_exact_at_800() {
    let xv = [vec1(&WIDE)];
    stability_case("sum(softplus(x))", "x=f64[:]", "x", &xv, &|v| {
        v[0].mapv(sigmoid)
    });
    stability_case("sum(log(1 + exp(x)))", "x=f64[:]", "x", &xv, &|v| {
        v[0].mapv(sigmoid)
    });
    stability_case("sum(log(sigmoid(x)))", "x=f64[:]", "x", &xv, &|v| {
        v[0].mapv(|x| sigmoid(-x))
    });
    let t = vec1(&[1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]);
    stability_case(
        "mean(-(t*log(sigmoid(z)) + (1-t)*log(1 - sigmoid(z))))",
        "z=f64[:];t=f64[:]",
        "z",
        &[xv[0].clone(), t],
        &|v| {
            let n = v[0].len() as f64;
            ndarray::Zip::from(&v[0]).and(&v[1]).map_collect(|&z, &t| {
                // sigmoid(z) - t without cancellation (t is 0 or 1).
                (if t == 1.0 { -sigmoid(-z) } else { sigmoid(z) }) / n
            })
        },
    );
    // logsumexp: the gradient is the softmax, max-shifted by local_exp_over_sum_exp.
    let xm = Value::F64(
        ndarray::arr2(&[
            [-800.0, 0.0, 800.0],
            [799.0, 800.0, 0.5],
            [-800.0, -799.0, -1000.0],
        ])
        .into_dyn(),
    );
    stability_case(
        "sum(log(sum(exp(X), axis=1)))",
        "X=f64[:, :]",
        "X",
        &[xm],
        &|v| {
            let x = &v[0];
            let mut out = x.clone();
            for (i, row) in x.outer_iter().enumerate() {
                let m = row.fold(f64::NEG_INFINITY, |a, &b| a.max(b));
                let s: f64 = row.iter().map(|&r| (r - m).exp()).sum();
                for (j, &r) in row.iter().enumerate() {
                    out[[i, j]] = (r - m).exp() / s;
                }
            }
            out
        },
    );
}

/// The pullbacks of the indexing, joining, softmax and cumulative ops
/// (issue 14's ops): basic indexing and slice updates, gathers and indexed
/// updates (duplicate indices included), concatenation, softmax and
/// log-softmax over an axis and over everything, running sums; each
/// against finite differences on the reference and FAST_RUN.
#[test]
fn structural_ops_of_issue_14_match_finite_differences() {
    use kiln::tensor::{Idx, IdxBound};
    let m = tensor("M", DType::F64, &[Some(3), Some(4)]);
    let u = tensor("u", DType::F64, &[Some(4)]);
    let y = tensor("y", DType::F64, &[Some(2)]);
    let ins = [m.clone(), u.clone(), y.clone()];
    let mv = |shape: &[usize], seed: f64| {
        let k: usize = shape.iter().product();
        let d: Vec<f64> = (0..k)
            .map(|i| ((i as f64 + seed) * 0.7).sin() * 1.5 + 0.1)
            .collect();
        Value::F64(ArrayD::from_shape_vec(IxDyn(shape), d).unwrap())
    };
    let vals = [mv(&[3, 4], 0.3), mv(&[4], 2.0), mv(&[2], 1.1)];
    let idx = constant(Value::I64(ndarray::arr1(&[3, 0, 3]).into_dyn()));
    // A set with duplicate indices writes only the last duplicate, while its
    // pullback (PyTensor's too) gives every duplicate the gradient: distinct
    // indices for the set.
    let distinct = constant(Value::I64(ndarray::arr1(&[3, 0]).into_dyn()));
    let slice = |a: i64, b: i64| Idx::Slice {
        start: Some(IdxBound::Const(a)),
        stop: Some(IdxBound::Const(b)),
        step: None,
    };
    let reversed = Idx::Slice {
        start: None,
        stop: None,
        step: Some(IdxBound::Const(-1)),
    };
    let bools = |shape: &[usize], v: &[bool]| {
        constant(Value::Bool(
            ArrayD::from_shape_vec(IxDyn(shape), v.to_vec()).unwrap(),
        ))
    };
    let mask_u = bools(&[4], &[true, false, true, true]);
    let mask_rows = bools(&[3], &[true, false, true]);
    let mask_m = bools(
        &[3, 4],
        &[
            true, false, false, true, false, true, false, false, true, false, true, true,
        ],
    );
    let parts = kiln::tensor::split(&m, &[1, 1, 2], 1).unwrap();
    let (max_rows, argmax_rows) = m.max_and_argmax(Some(1)).unwrap();
    let cases: Vec<(&str, Tensor, Vec<usize>)> = vec![
        (
            "subtensor",
            weighted_sum(
                &m.slice(&[slice(1, 3), reversed.clone()]).unwrap().exp(),
                &[2, 4],
            ),
            vec![0],
        ),
        (
            "set_subtensor",
            weighted_sum(
                &kiln::tensor::set_subtensor(&u, &[slice(1, 3)], &y)
                    .unwrap()
                    .sin(),
                &[4],
            ),
            vec![1, 2],
        ),
        (
            "inc_subtensor",
            weighted_sum(
                &kiln::tensor::inc_subtensor(&u, &[slice(0, 2)], &y)
                    .unwrap()
                    .tanh(),
                &[4],
            ),
            vec![1, 2],
        ),
        (
            "take",
            weighted_sum(&kiln::take(&m, &idx, 1).unwrap().sin(), &[3, 3]),
            vec![0],
        ),
        (
            "advanced_inc_subtensor1",
            weighted_sum(
                &kiln::advanced_inc_subtensor1(&u, 0, &idx, &y.sum_all())
                    .unwrap()
                    .sin(),
                &[4],
            ),
            vec![1, 2],
        ),
        (
            "advanced_set_subtensor1",
            weighted_sum(
                &kiln::advanced_set_subtensor1(&u, 0, &distinct, &y.sum_all())
                    .unwrap()
                    .exp(),
                &[4],
            ),
            vec![1, 2],
        ),
        (
            "concatenate",
            weighted_sum(&kiln::concatenate(&[&u, &y, &u], 0).unwrap().sin(), &[10]),
            vec![1, 2],
        ),
        (
            "softmax",
            weighted_sum(&m.softmax_op(Some(1), false).unwrap(), &[3, 4]),
            vec![0],
        ),
        (
            "log_softmax over everything",
            weighted_sum(&m.softmax_op(None, true).unwrap(), &[3, 4]),
            vec![0],
        ),
        (
            "cumsum along an axis",
            weighted_sum(&m.cumulative(ReduceOp::Sum, Some(0)).unwrap(), &[3, 4]),
            vec![0],
        ),
        (
            "cumsum flattened",
            weighted_sum(&m.cumulative(ReduceOp::Sum, None).unwrap(), &[12]),
            vec![0],
        ),
        (
            "cumprod along an axis",
            weighted_sum(&m.cumulative(ReduceOp::Prod, Some(1)).unwrap(), &[3, 4]),
            vec![0],
        ),
        (
            "cumprod flattened",
            weighted_sum(&m.cumulative(ReduceOp::Prod, None).unwrap(), &[12]),
            vec![0],
        ),
        (
            "boolean mask of a vector",
            weighted_sum(&kiln::boolean_mask(&u, &mask_u).unwrap().exp(), &[3]),
            vec![1],
        ),
        (
            "boolean mask of rows",
            weighted_sum(&kiln::boolean_mask(&m, &mask_rows).unwrap().sin(), &[2, 4]),
            vec![0],
        ),
        (
            "boolean mask of a matrix",
            weighted_sum(&kiln::boolean_mask(&m, &mask_m).unwrap().exp(), &[6]),
            vec![0],
        ),
        (
            "split, one part unused",
            kiln::tensor::add(
                &weighted_sum(&parts[0].sin(), &[3, 1]),
                &weighted_sum(&parts[2].exp(), &[3, 2]),
            )
            .unwrap(),
            vec![0],
        ),
        (
            "max_and_argmax: the max",
            kiln::tensor::add(
                &weighted_sum(&max_rows, &[3]),
                &argmax_rows.cast(DType::F64).sum_all(),
            )
            .unwrap(),
            vec![0],
        ),
    ];
    for (what, cost, wrt) in &cases {
        check(what, &ins, cost, &vals, wrt);
    }
}

/// cumprod's pullback is exact where the input has zeros (one per lane, two
/// per lane, at the start and at the end): PyTensor's divides by x there.
/// cumprod is linear in each element, so central differences are exact.
#[test]
fn cumprod_gradient_is_exact_with_zeros() {
    let m = tensor("M", DType::F64, &[Some(4), Some(5)]);
    let rows = [
        [1.5, 0.0, -0.7, 2.0, 0.9],
        [0.0, 1.1, 0.0, -1.3, 0.6],
        [0.8, -1.2, 0.5, 1.4, 0.0],
        [1.1, 0.9, -0.6, 1.7, -2.0],
    ];
    let data: Vec<f64> = rows.iter().flatten().copied().collect();
    let vals = [Value::F64(
        ArrayD::from_shape_vec(IxDyn(&[4, 5]), data).unwrap(),
    )];
    let ins = [m.clone()];
    check(
        "cumprod with zeros",
        &ins,
        &weighted_sum(&m.cumulative(ReduceOp::Prod, Some(1)).unwrap(), &[4, 5]),
        &vals,
        &[0],
    );
    check(
        "cumprod with zeros, along the other axis",
        &ins,
        &weighted_sum(&m.cumulative(ReduceOp::Prod, Some(0)).unwrap(), &[4, 5]),
        &vals,
        &[0],
    );
    // The closed form at the first zero of row 0 (position 1): x0 * (w1 + w2 x2 + w3 x2 x3 + w4 x2 x3 x4),
    // with the weights of `weights` (0.5, -0.75, 1.0, -1.25, 1.5 for row 0).
    let gs = grad(
        &weighted_sum(&m.cumulative(ReduceOp::Prod, Some(1)).unwrap(), &[4, 5]),
        &ins,
    )
    .unwrap();
    let g = &fast_run(&ins, &gs, &vals)[0];
    let (x0, x2, x3, x4) = (1.5, -0.7, 2.0, 0.9);
    let exact = x0 * (-0.75 + 1.0 * x2 - 1.25 * x2 * x3 + 1.5 * x2 * x3 * x4);
    assert!(
        (g[[0, 1]] - exact).abs() <= 1e-12 * exact.abs(),
        "{} vs {exact}",
        g[[0, 1]]
    );
    // After the first zero of a lane every product holds it: 0.
    assert_eq!(g[[0, 2]], 0.0);
    assert_eq!(g[[1, 3]], 0.0);
}

/// A `BatchedDot` gradient case: its name and the shapes of `a`, `b` and `a @ b`.
type Case<'a> = (&'a str, &'a [usize], &'a [usize], &'a [usize]);

/// `BatchedDot`'s pullback (numpy `matmul` of stacks) against finite
/// differences: equal batches, an operand shared by every batch (a static
/// size-1 batch dimension, or no batch dimension at all: its gradient is
/// the sum over the batch), batch dimensions broadcast across operands of
/// different ranks, and 1-d operands promoted to a row or a column.
#[test]
fn batched_dot_matches_finite_differences() {
    let t = |name: &str, shape: &[usize]| {
        let s: Vec<Option<usize>> = shape.iter().map(|&d| Some(d)).collect();
        tensor(name, DType::F64, &s)
    };
    let val = |shape: &[usize], seed: f64| {
        let k: usize = shape.iter().product();
        let d: Vec<f64> = (0..k)
            .map(|i| ((i as f64 + seed) * 0.9).sin() * 1.3 - 0.2)
            .collect();
        Value::F64(ArrayD::from_shape_vec(IxDyn(shape), d).unwrap())
    };
    // (what, a's shape, b's shape, the product's shape)
    let cases: &[Case] = &[
        ("equal batches", &[2, 3, 4], &[2, 4, 2], &[2, 3, 2]),
        (
            "b shared (static size 1)",
            &[3, 2, 4],
            &[1, 4, 3],
            &[3, 2, 3],
        ),
        (
            "a shared (static size 1)",
            &[1, 2, 4],
            &[3, 4, 3],
            &[3, 2, 3],
        ),
        ("b shared (a matrix)", &[3, 2, 4], &[4, 3], &[3, 2, 3]),
        ("a shared (a matrix)", &[2, 4], &[3, 4, 3], &[3, 2, 3]),
        (
            "4-d and 3-d broadcast",
            &[2, 1, 3, 4],
            &[3, 4, 2],
            &[2, 3, 3, 2],
        ),
        ("row vector", &[4], &[3, 4, 2], &[3, 2]),
        ("column vector", &[3, 2, 4], &[4], &[3, 2]),
    ];
    for &(what, sa, sb, out) in cases {
        let (a, b) = (t("a", sa), t("b", sb));
        let prod = kiln::matmul(&a, &b).unwrap();
        assert_eq!(
            prod.ty().shape,
            out.iter().map(|&d| Some(d)).collect::<Vec<_>>()
        );
        if sa.len() > 2 || sb.len() > 2 {
            let core = prod.owner_op().is_some_and(|op| *op == Op::BatchedDot)
                || prod
                    .owner_inputs()
                    .iter()
                    .any(|i| i.owner_op() == Some(&Op::BatchedDot));
            assert!(core, "{what}: not a BatchedDot");
        }
        let cost = weighted_sum(&prod.tanh(), out);
        let ins = [a, b];
        let vals = [val(sa, 0.4), val(sb, 1.7)];
        check(what, &ins, &cost, &vals, &[0, 1]);
    }
}
