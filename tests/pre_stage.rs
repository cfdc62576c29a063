//! Pre-staged block calls: a transcendental function of one `+`, `-` or
//! `*` of inputs and constants (`tanh(u[:, None] + v)`, `exp(x * 0.5)`) is
//! one runtime call that computes its argument itself
//! (`kiln_<name>_pre_<dtype>`), not staged through the kernel's scratch
//! area first.
//!
//! The operation rounds once in the dtype, so the result must carry the
//! bits of the runtime's plain function applied to `a ⊕ b` computed here in
//! the same dtype: every check below is bit for bit, NaN, ±inf and signed
//! zeros included (`rand_value` mixes them in), at lengths around the
//! 16-lane groups and the runtime's 256-element chunks, with broadcast
//! (stride-0) operands, constants on either side, in f64 and f32, in place
//! into a mutable input, and inside larger programs and fused reductions
//! (against the reference evaluator there).
mod jit_support;
use jit_support::*;
use kiln::linker::ArgMut;
use kiln::{function, DType, Tensor, Value};
use ndarray::ArrayD;
use std::collections::HashMap;

/// Lengths around the runtime's groups (16 lanes) and chunks (256).
const LENGTHS: &[usize] = &[1, 15, 16, 17, 255, 256, 257, 2000, 4097];

type Vars = HashMap<String, Tensor>;

/// Inputs named `names` of `dtype`, each with the given dimensions.
fn inputs(specs: &[(&str, &[Option<usize>])], dtype: DType) -> (Vec<Tensor>, Vars) {
    let ts: Vec<Tensor> = specs
        .iter()
        .map(|(n, dims)| kiln::tensor(n, dtype, dims))
        .collect();
    let vars = specs
        .iter()
        .zip(&ts)
        .map(|((n, _), t)| (n.to_string(), t.clone()))
        .collect();
    (ts, vars)
}

/// The runtime's plain function `name` applied to `x` (f64 or f32 values).
fn plain(name: &str, x: &Value) -> Value {
    use kiln_runtime::math::*;
    match x {
        Value::F64(a) => {
            let v: Vec<f64> = a.iter().copied().collect();
            let mut o = vec![0.0; v.len()];
            let f: fn(&[f64], &mut [f64]) = match name {
                "tanh" => tanh_f64,
                "exp" => exp_f64,
                "sigmoid" => sigmoid_f64,
                "log1p" => log1p_f64,
                "sin" => sin_f64,
                _ => unreachable!("{name}"),
            };
            f(&v, &mut o);
            Value::F64(ArrayD::from_shape_vec(a.raw_dim(), o).unwrap())
        }
        Value::F32(a) => {
            let v: Vec<f32> = a.iter().copied().collect();
            let mut o = vec![0.0; v.len()];
            let f: fn(&[f32], &mut [f32]) = match name {
                "tanh" => tanh_f32,
                "exp" => exp_f32,
                "sigmoid" => sigmoid_f32,
                "log1p" => log1p_f32,
                "sin" => sin_f32,
                _ => unreachable!("{name}"),
            };
            f(&v, &mut o);
            Value::F32(ArrayD::from_shape_vec(a.raw_dim(), o).unwrap())
        }
        _ => unreachable!("float values only"),
    }
}

/// `a ⊕ b` element by element with broadcasting, rounded in the values'
/// dtype (`op` one of `+ - *`).
fn staged(op: char, a: &Value, b: &Value) -> Value {
    fn apply<
        T: Copy + std::ops::Add<Output = T> + std::ops::Sub<Output = T> + std::ops::Mul<Output = T>,
    >(
        op: char,
        a: &ArrayD<T>,
        b: &ArrayD<T>,
    ) -> ArrayD<T> {
        let f = |x: T, y: T| match op {
            '+' => x + y,
            '-' => x - y,
            _ => x * y,
        };
        // The two shapes broadcast against each other, aligned on the right.
        let nd = a.ndim().max(b.ndim());
        let dim = |s: &[usize], k: usize| (k + s.len()).checked_sub(nd).map_or(1, |i| s[i]);
        let shape: Vec<usize> = (0..nd)
            .map(|k| dim(a.shape(), k).max(dim(b.shape(), k)))
            .collect();
        let (a, b) = (
            a.broadcast(shape.clone()).unwrap(),
            b.broadcast(shape).unwrap(),
        );
        ndarray::Zip::from(&a).and(&b).map_collect(|&x, &y| f(x, y))
    }
    match (a, b) {
        (Value::F64(a), Value::F64(b)) => Value::F64(apply(op, a, b)),
        (Value::F32(a), Value::F32(b)) => Value::F32(apply(op, a, b)),
        _ => unreachable!("same float dtype"),
    }
}

/// The reference evaluator's value of `src` over `ins` on `vals`.
fn reference(src: &str, ins: &[Tensor], vars: &Vars, vals: &[Value]) -> Value {
    let out = kiln::build_expression(src, vars).unwrap();
    let fg = kiln::FunctionGraph::new(ins, &[out]).unwrap();
    kiln::eval::evaluate(&fg, vals).unwrap().remove(0)
}

/// Compiles `src` over `ins` and returns its result on `vals`.
fn run(src: &str, ins: &[Tensor], vars: &Vars, vals: &[Value]) -> Value {
    let out = kiln::build_expression(src, vars).unwrap_or_else(|e| panic!("{src}: {e}"));
    let f = function(ins, &[out]).compile().unwrap();
    f.call_values(vals).unwrap().remove(0)
}

/// `f(x ⊕ y)` for both vectors, `f(x ⊕ s)` / `f(s ⊕ x)` for a 0-d `s`
/// (read with stride 0) and `f(x ⊕ c)` for a constant, over every length:
/// bit for bit the runtime's `f` of the staged values. Below one vector
/// (n = 1) a kernel takes its scalar path, which is bit for bit the
/// reference evaluator instead.
#[test]
fn unary_of_one_operation_equals_the_runtime_function_of_its_staged_value() {
    for dtype in [DType::F64, DType::F32] {
        let (ins, vars) = inputs(&[("x", &[None]), ("y", &[None]), ("s", &[])], dtype);
        for (k, &n) in LENGTHS.iter().enumerate() {
            let seed = 10 * k as u64;
            let x = rand_value(dtype, &[n], seed);
            let y = rand_value(dtype, &[n], seed + 1);
            let s = Value::from_f64_array(dtype, ndarray::arr0(0.375).into_dyn());
            let c = Value::from_f64_array(dtype, ndarray::arr0(0.25).into_dyn());
            let vals = [x.clone(), y.clone(), s.clone()];
            for f in ["tanh", "exp", "sigmoid", "log1p"] {
                for op in ['+', '-', '*'] {
                    let cases = [
                        (format!("{f}(x {op} y)"), staged(op, &x, &y)),
                        (format!("{f}(x {op} s)"), staged(op, &x, &s)),
                        (format!("{f}(s {op} x)"), staged(op, &s, &x)),
                        (format!("{f}(x {op} 0.25)"), staged(op, &x, &c)),
                    ];
                    for (src, arg) in cases {
                        let got = run(&src, &ins, &vars, &vals);
                        let what = format!("{src} ({dtype}, n = {n})");
                        let want = if n == 1 {
                            reference(&src, &ins, &vars, &vals)
                        } else {
                            plain(f, &arg)
                        };
                        assert_values(&got, &want, 0, &what);
                    }
                }
            }
        }
    }
}

/// The outer form of the suite's `outer_tanh`, both ways round, each row a
/// pre-staged call with one operand broadcast: bit for bit the runtime's
/// function of the staged matrix.
#[test]
fn outer_broadcasts_are_pre_staged_per_row_bit_exactly() {
    for dtype in [DType::F64, DType::F32] {
        let (ins, vars) = inputs(&[("u", &[None]), ("v", &[None])], dtype);
        let u = rand_value(dtype, &[300], 7);
        let v = rand_value(dtype, &[257], 8);
        let col = |x: &Value| match x {
            Value::F64(a) => Value::F64(a.clone().insert_axis(ndarray::Axis(1))),
            Value::F32(a) => Value::F32(a.clone().insert_axis(ndarray::Axis(1))),
            _ => unreachable!(),
        };
        let vals = [u.clone(), v.clone()];
        let cases = [
            (
                "tanh(u[:, None] + v[None, :])",
                "tanh",
                staged('+', &col(&u), &v),
            ),
            (
                "exp(u[:, None] * v[None, :])",
                "exp",
                staged('*', &col(&u), &v),
            ),
            (
                "sin(v[None, :] - u[:, None])",
                "sin",
                staged('-', &v, &col(&u)),
            ),
        ];
        for (src, f, arg) in cases {
            let got = run(src, &ins, &vars, &vals);
            assert_values(&got, &plain(f, &arg), 0, &format!("{src} ({dtype})"));
        }
    }
}

/// Written in place into a mutable input (the output shares `x`'s buffer):
/// each chunk is read whole before its outputs are written.
#[test]
fn pre_staged_calls_write_in_place_into_a_mutable_input() {
    let (ins, vars) = inputs(&[("x", &[None]), ("y", &[None])], DType::F64);
    for (src, op) in [("tanh(x + y)", '+'), ("tanh(y - x)", '-')] {
        let out = kiln::build_expression(src, &vars).unwrap();
        let f = function(&ins, &[out])
            .mutable_inputs(&[0])
            .compile()
            .unwrap();
        for &n in &[17, 256, 4097] {
            let mut x = rand_f64(&[n], 3, -3.0, 3.0);
            let y = rand_f64(&[n], 4, -3.0, 3.0);
            let (vx, vy) = (Value::F64(x.clone()), Value::F64(y.clone()));
            let arg = if op == '+' {
                staged(op, &vx, &vy)
            } else {
                staged(op, &vy, &vx)
            };
            let want = plain("tanh", &arg);
            let got = f
                .call_mut(&mut [ArgMut::from(&mut x), ArgMut::from(&y)])
                .unwrap();
            assert_values(&got[0], &want, 0, &format!("{src}, n = {n}"));
            assert_values(
                &Value::F64(x),
                &want,
                0,
                &format!("{src}, n = {n}, x's buffer"),
            );
        }
    }
}

/// Pre-staged calls inside larger programs: a later stage multiplies the
/// call's result by an operand that the operation reads too, and two
/// outputs where one is the operation itself (then it is staged as
/// before). The vector path's arithmetic is plain IEEE arithmetic, so each
/// element carries the bits of the runtime's function composed with it
/// here, except the last `n % lanes` (`lanes` = 2 for f64, 4 for f32:
/// Cranelift's 128-bit vectors), which the kernel's scalar path computes
/// bit for bit as the reference evaluator does. A fused reduction of a
/// pre-staged exp is compared with the reference within a relative
/// tolerance, for its summation order.
#[test]
fn pre_staged_calls_inside_larger_programs_match_their_composition() {
    for dtype in [DType::F64, DType::F32] {
        let (ins, _) = inputs(&[("x", &[None]), ("y", &[None])], dtype);
        let (x, y) = (&ins[0], &ins[1]);
        let lanes = if dtype == DType::F64 { 2 } else { 4 };
        type Composed = fn(&Value, &Value) -> Vec<Value>;
        let programs: Vec<(&str, Vec<Tensor>, Composed)> = vec![
            ("tanh(x * y) * y", vec![&(x * y).tanh() * y], |x, y| {
                vec![staged('*', &plain("tanh", &staged('*', x, y)), y)]
            }),
            ("exp(x - y) * x", vec![&(x - y).exp() * x], |x, y| {
                vec![staged('*', &plain("exp", &staged('-', x, y)), x)]
            }),
            (
                "[x + y, tanh(x + y)]",
                vec![x + y, (x + y).tanh()],
                |x, y| vec![staged('+', x, y), plain("tanh", &staged('+', x, y))],
            ),
        ];
        for (k, &n) in LENGTHS.iter().enumerate() {
            let vals = [
                rand_value(dtype, &[n], 50 + k as u64),
                rand_value(dtype, &[n], 60 + k as u64),
            ];
            for (name, outs, composed) in &programs {
                let fg = kiln::FunctionGraph::new(&ins, outs).unwrap();
                let reference = kiln::eval::evaluate(&fg, &vals).unwrap();
                let got = function(&ins, outs)
                    .compile()
                    .unwrap()
                    .call_values(&vals)
                    .unwrap();
                let tail = n - n % lanes;
                for (o, (g, (c, r))) in got
                    .iter()
                    .zip(composed(&vals[0], &vals[1]).iter().zip(&reference))
                    .enumerate()
                {
                    let (g, c, r) = (g.to_f64_array(), c.to_f64_array(), r.to_f64_array());
                    for i in 0..n {
                        let want = if i < tail { c[i] } else { r[i] };
                        assert_eq!(
                            ulps(g[i], want, dtype),
                            0,
                            "{name} ({dtype}, n = {n}) output {o} element {i}: got {:e}, want {want:e}",
                            g[i]
                        );
                    }
                }
            }
        }
        // A reduction of a pre-staged map: compared with a tolerance (the
        // sum's order differs from the reference's).
        let sum = (x * 0.5).exp().sum_all();
        let f = function(&ins, std::slice::from_ref(&sum))
            .compile()
            .unwrap();
        let fg = kiln::FunctionGraph::new(&ins, &[sum]).unwrap();
        for &n in &[15, 300, 4097] {
            let vals = [
                Value::from_f64_array(dtype, rand_f64(&[n], 70, -2.0, 2.0)),
                Value::from_f64_array(dtype, rand_f64(&[n], 71, -2.0, 2.0)),
            ];
            let want = kiln::eval::evaluate(&fg, &vals).unwrap().remove(0);
            let got = f.call_values(&vals).unwrap().remove(0);
            let rtol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
            assert_close(
                &got,
                &want,
                rtol,
                &format!("sum(exp(x * 0.5)) ({dtype}, n = {n})"),
            );
        }
    }
}

/// `CodegenOptions::pre_stage` off stages every argument in the kernel as
/// before: the two give the same bits on every program here (element-wise,
/// broadcast, a later stage, a fused reduction), at every length, f64 and
/// f32, NaN and infinities included. Except in the last `n % lanes`
/// elements of a program that is one pre-staged call: that call covers the
/// whole row with the runtime's function, while the staged kernel leaves
/// them to its scalar path, which is the reference evaluator's (both
/// checked against their own definition in the tests above).
#[test]
fn pre_staged_and_staged_kernels_give_the_same_bits() {
    use kiln::linker::CodegenOptions;
    let compile = |ins: &[Tensor], outs: &[Tensor], pre_stage: bool| {
        let codegen = CodegenOptions {
            pre_stage,
            ..Default::default()
        };
        compile_with(ins, outs, codegen)
    };
    for dtype in [DType::F64, DType::F32] {
        let (ins, vars) = inputs(&[("x", &[None]), ("y", &[None]), ("s", &[])], dtype);
        let sources = [
            "tanh(x + y)",
            "exp(x * s)",
            "sigmoid(s - x)",
            "tanh(x - s)",
            "log1p(x * 0.5) * y",
            "softplus(x - y) + tanh(x * y)",
            "sum(exp(x * 0.5))",
            "exp(x + y) * (x + y)",
        ];
        for src in sources {
            let out = kiln::build_expression(src, &vars).unwrap();
            let outs = [out];
            let (on, off) = (compile(&ins, &outs, true), compile(&ins, &outs, false));
            for (k, &n) in LENGTHS.iter().enumerate() {
                let vals = [
                    rand_value(dtype, &[n], 80 + k as u64),
                    rand_value(dtype, &[n], 90 + k as u64),
                    Value::from_f64_array(dtype, ndarray::arr0(-0.75).into_dyn()),
                ];
                let a = on.call_values(&vals).unwrap().remove(0);
                let b = off.call_values(&vals).unwrap().remove(0);
                let what = format!("{src} ({dtype}, n = {n})");
                if a.shape().is_empty() {
                    assert_values(&a, &b, 0, &what);
                    continue;
                }
                let lanes = if dtype == DType::F64 { 2 } else { 4 };
                let (a, b) = (a.to_f64_array(), b.to_f64_array());
                for i in 0..n - n % lanes {
                    assert_eq!(
                        ulps(a[i], b[i], dtype),
                        0,
                        "{what}: element {i}: {} vs {}",
                        a[i],
                        b[i]
                    );
                }
            }
        }
    }
}
