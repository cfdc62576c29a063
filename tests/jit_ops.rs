//! Every scalar op on every dtype: the JIT equals the reference evaluator
//! (bit for bit for exact ops, within 2 ULP for transcendental ones, whose
//! contiguous path uses kiln-runtime's 1-ULP block functions) on
//! contiguous, transposed, strided, reversed, broadcast, empty and 0-d inputs.
mod jit_support;
use jit_support::*;
use kiln::ops::{Arity, CRef, Composite, ScalarConst};
use kiln::{elemwise, tensor, DType, Op, ScalarOp, Tensor, Value};
use ndarray::{s, Axis};

const TRANSCENDENTAL_ULPS: u64 = 2;

fn tol(op: ScalarOp) -> u64 {
    // `pow` is not a float-valued function of integers, but its float form is
    // a transcendental computed by the runtime on the contiguous path.
    if op.is_exact() && op != ScalarOp::Pow {
        0
    } else {
        TRANSCENDENTAL_ULPS
    }
}

fn arities(op: ScalarOp) -> Vec<usize> {
    match op.arity() {
        Arity::Fixed(n) => vec![n],
        Arity::Variadic => vec![1, 2, 3],
    }
}

/// Random values of `dtype` (see `rand_value`); with `unit`, finite float
/// values are taken into [0, 1] (their absolute value's fractional part;
/// NaN and ±inf stay).
fn values(dtype: DType, shape: &[usize], seed: u64, unit: bool) -> Value {
    let v = rand_value(dtype, shape, seed);
    if !(unit && dtype.is_float()) {
        return v;
    }
    let a = v
        .to_f64_array()
        .mapv(|t| if t.is_finite() { t.abs().fract() } else { t });
    Value::from_f64_array(dtype, a)
}

/// Values of shape `shape` laid out as `layout` (`unit`: see [`values`]).
fn laid_out(dtype: DType, shape: &[usize], seed: u64, layout: &str, unit: bool) -> Value {
    match layout {
        "contiguous" => values(dtype, shape, seed, unit),
        "transposed" => {
            let rev: Vec<usize> = shape.iter().rev().copied().collect();
            let v = values(dtype, &rev, seed, unit);
            kiln::map_value!(v, a => a.reversed_axes())
        }
        "strided" => {
            let mut wide = shape.to_vec();
            *wide.last_mut().unwrap() *= 2;
            let v = values(dtype, &wide, seed, unit);
            kiln::map_value!(v, a => a.slice_move(s![.., ..;2]).into_dyn())
        }
        "reversed" => {
            let v = values(dtype, shape, seed, unit);
            kiln::map_value!(v, a => { let mut a = a; a.invert_axis(Axis(1)); a })
        }
        _ => unreachable!(),
    }
}

#[test]
fn every_op_every_dtype_every_layout() {
    let mut checked = 0;
    for op in ScalarOp::all() {
        for nargs in arities(op) {
            for dtype in DType::ALL {
                let dts = vec![dtype; nargs];
                if op.output_dtype(&dts).is_err() {
                    continue;
                }
                for layout in ["contiguous", "transposed", "strided", "reversed"] {
                    let ins: Vec<Tensor> = (0..nargs)
                        .map(|k| tensor(&format!("x{k}"), dtype, &[None, None]))
                        .collect();
                    let refs: Vec<&Tensor> = ins.iter().collect();
                    let out = elemwise(op, &refs).unwrap();
                    // The cross-entropy's float targets in [0, 1], its domain:
                    // outside it the loss is a difference of its log1p term
                    // and a linear one, and its ULPs amplify the log1p
                    // term's rounding (a 1-ULP difference there was 4 ULP of
                    // a result of -0.105); tests/binary_crossentropy.rs draws
                    // its targets in [0, 1] too.
                    let unit = |k: usize| op == ScalarOp::SigmoidBinaryCrossentropy && k == 1;
                    let vals: Vec<Value> = (0..nargs)
                        .map(|k| laid_out(dtype, &[6, 9], 17 * k as u64 + 5, layout, unit(k)))
                        .collect();
                    check(
                        &ins,
                        &[out],
                        &vals,
                        tol(op),
                        &format!("{op} on {nargs}x{dtype} {layout}"),
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 1000, "{checked}");
}

/// Floor division, modulo and fmod on every integer dtype, for every pair
/// of divisor and dividend signs and the edge values (0, ±1, the extremes,
/// `MIN // -1`), equal the reference bit for bit. The random values of the
/// other tests are rarely negative divisors, -1 or the extremes.
#[test]
fn integer_division_and_remainders_on_every_sign_and_edge() {
    let edges: [i64; 11] = [0, 1, -1, 2, -2, 3, -7, 7, 100, i64::MIN, i64::MAX];
    for dtype in DType::ALL
        .into_iter()
        .filter(|d| !d.is_float() && *d != DType::Bool)
    {
        // Every pair, cast to the dtype (wrapping, so the extremes become the
        // dtype's own bit patterns of them).
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for &x in &edges {
            for &y in &edges {
                a.push(x);
                b.push(y);
            }
        }
        let av = Value::I64(ndarray::arr1(&a).into_dyn()).cast(dtype);
        let bv = Value::I64(ndarray::arr1(&b).into_dyn()).cast(dtype);
        for op in [ScalarOp::IntDiv, ScalarOp::Mod, ScalarOp::Fmod] {
            let x = tensor("x", dtype, &[None]);
            let y = tensor("y", dtype, &[None]);
            let out = elemwise(op, &[&x, &y]).unwrap();
            check(
                &[x, y],
                &[out],
                &[av.clone(), bv.clone()],
                0,
                &format!("{op} on {dtype}"),
            );
        }
    }
}

#[test]
fn broadcast_empty_and_zero_d() {
    for op in [
        ScalarOp::Add,
        ScalarOp::Mul,
        ScalarOp::Maximum,
        ScalarOp::Lt,
        ScalarOp::Pow,
        ScalarOp::Mod,
    ] {
        for dtype in [DType::F64, DType::F32, DType::I32, DType::U8] {
            // Row and column broadcasting.
            let a = tensor("a", dtype, &[Some(1), None]);
            let b = tensor("b", dtype, &[None, Some(1)]);
            let out = elemwise(op, &[&a, &b]).unwrap();
            let va = rand_value(dtype, &[1, 5], 1);
            let vb = rand_value(dtype, &[4, 1], 2);
            check(
                &[a.clone(), b.clone()],
                &[out],
                &[va, vb],
                tol(op),
                &format!("{op} {dtype} outer"),
            );
            // Empty.
            let c = tensor("c", dtype, &[None, None]);
            let out = elemwise(op, &[&c, &c]).unwrap();
            check(
                &[c],
                &[out],
                &[rand_value(dtype, &[0, 3], 3)],
                0,
                &format!("{op} {dtype} empty"),
            );
            // 0-d.
            let x = tensor("x", dtype, &[]);
            let y = tensor("y", dtype, &[]);
            let out = elemwise(op, &[&x, &y]).unwrap();
            let vx = rand_value(dtype, &[], 4);
            let vy = rand_value(dtype, &[], 5);
            check(
                &[x, y],
                &[out],
                &[vx, vy],
                tol(op),
                &format!("{op} {dtype} 0-d"),
            );
        }
    }
}

#[test]
fn mixed_dtypes_and_casts() {
    for a in DType::ALL {
        for b in DType::ALL {
            for op in [
                ScalarOp::Add,
                ScalarOp::TrueDiv,
                ScalarOp::IntDiv,
                ScalarOp::Switch,
                ScalarOp::Maximum,
            ] {
                let x = tensor("x", a, &[None]);
                let y = tensor("y", b, &[None]);
                let args: Vec<&Tensor> = if op == ScalarOp::Switch {
                    vec![&x, &y, &x]
                } else {
                    vec![&x, &y]
                };
                let Ok(out) = elemwise(op, &args) else {
                    continue;
                };
                check(
                    &[x.clone(), y.clone()],
                    &[out],
                    &[rand_value(a, &[37], 1), rand_value(b, &[37], 2)],
                    0,
                    &format!("{op}({a}, {b})"),
                );
            }
            let x = tensor("x", a, &[None]);
            let out = x.cast(b);
            let v = if a.is_float() {
                Value::from_f64_array(
                    a,
                    ndarray::arr1(&[
                        1e300,
                        -1e300,
                        f64::NAN,
                        3.7,
                        -3.7,
                        255.9,
                        256.0,
                        -0.5,
                        1e10,
                        -129.0,
                    ])
                    .into_dyn(),
                )
            } else {
                rand_value(a, &[21], 3)
            };
            check(&[x], &[out], &[v], 0, &format!("cast {a} -> {b}"));
        }
    }
}

#[test]
fn composite_with_constants_and_several_outputs() {
    let mut c = Composite::new(vec![DType::F64, DType::I32]);
    let e = c.push(ScalarOp::Exp, &[CRef::Input(0)]).unwrap();
    let one = CRef::Const(ScalarConst::new(DType::F64, 1.0));
    let s = c.push(ScalarOp::Add, &[one, e]).unwrap();
    let l = c.push(ScalarOp::Log, &[s]).unwrap();
    let m = c.push(ScalarOp::Mul, &[l, CRef::Input(1)]).unwrap();
    let k = c
        .push(
            ScalarOp::IntDiv,
            &[
                CRef::Input(1),
                CRef::Const(ScalarConst::new(DType::I32, 3.0)),
            ],
        )
        .unwrap();
    c.outputs = vec![m, e, k, CRef::Input(0)];
    c.check().unwrap();
    let x = tensor("x", DType::F64, &[None]);
    let y = tensor("y", DType::I32, &[None]);
    let outs = Tensor::apply_multi(Op::composite(c), &[&x, &y]).unwrap();
    for n in [0, 1, 5, 300, 1000] {
        let vals = [
            rand_value(DType::F64, &[n], 1),
            rand_value(DType::I32, &[n], 2),
        ];
        let (got, want) = run_as_built(&[x.clone(), y.clone()], &outs, &vals);
        for k in 1..4 {
            assert_values(&got[k], &want[k], 2, &format!("composite output {k}"));
        }
        // Output 0, log(1 + e^x)·y: the vector path's exp (within its 2 ULP)
        // may round 1 + e^x to a neighbour of the reference's sum, which
        // moves the logarithm by up to 2^-52 absolute, far more than its ULP
        // where 1 + e^x is near 1 (x very negative): that much, plus the
        // logarithm's own 2 ULP and the product's rounding, times |y|.
        let (g, w) = (got[0].to_f64_array(), want[0].to_f64_array());
        let (xs, ys) = (vals[0].to_f64_array(), vals[1].to_f64_array());
        for i in 0..n {
            let l = xs[i].exp().ln_1p().abs();
            let eps = f64::EPSILON;
            let tol = ys[i].abs() * (2.0 * eps + 4.0 * eps * l) + eps * w[i].abs();
            // Infinities and NaN exactly (ulps: 0 for the same one).
            let ok = if w[i].is_finite() {
                (g[i] - w[i]).abs() <= tol
            } else {
                ulps(g[i], w[i], DType::F64) == 0
            };
            assert!(
                ok,
                "composite output 0: element {i}: got {:e}, want {:e}",
                g[i], w[i]
            );
        }
    }
    // An all-f64 composite with nested transcendental functions (blocked vector
    // path): errors compound through exp(tanh(x) * z), so compare relatively.
    let z = tensor("z", DType::F64, &[None]);
    let outs = Tensor::apply_multi(Op::composite(composite_copy()), &[&x, &z]).unwrap();
    for n in [1, 2, 3, 255, 256, 257, 1001] {
        let vals = [
            rand_value(DType::F64, &[n], 3),
            rand_value(DType::F64, &[n], 4),
        ];
        let fg = kiln::FunctionGraph::new(&[x.clone(), z.clone()], &outs).unwrap();
        let want = kiln::eval::evaluate(&fg, &vals).unwrap();
        let f = kiln::linker::compile(&fg, &Default::default()).unwrap();
        let got = f.call_values(&vals).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert_close(g, w, 1e-13, "nested");
        }
    }
}

fn composite_copy() -> Composite {
    let mut c = Composite::new(vec![DType::F64, DType::F64]);
    let t = c.push(ScalarOp::Tanh, &[CRef::Input(0)]).unwrap();
    let q = c.push(ScalarOp::Mul, &[t, CRef::Input(1)]).unwrap();
    let e = c.push(ScalarOp::Exp, &[q]).unwrap();
    let p = c
        .push(
            ScalarOp::Pow,
            &[
                CRef::Input(1),
                CRef::Const(ScalarConst::new(DType::F64, 2.0)),
            ],
        )
        .unwrap();
    let r = c.push(ScalarOp::Add, &[e, p, CRef::Input(0)]).unwrap();
    c.outputs = vec![r, t, CRef::Input(1)];
    c
}
