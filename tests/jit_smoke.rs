//! First end-to-end checks of the JIT: arithmetic, transcendental, reductions, dot.
mod jit_support;
use jit_support::*;
use kiln::{dot, matrix, vector, DType, Value};

#[test]
fn add_mul_exp() {
    let x = vector("x", DType::F64);
    let y = vector("y", DType::F64);
    let z = &(&x + &y) * &x.exp();
    let vx = Value::from(rand_f64(&[1000], 1, -3.0, 3.0));
    let vy = Value::from(rand_f64(&[1000], 2, -3.0, 3.0));
    check(&[x, y], &[z], &[vx, vy], 2, "x+y*exp");
}

#[test]
fn reductions_and_dot() {
    let a = matrix("a", DType::F64);
    let b = matrix("b", DType::F64);
    let s = a.sum(&[1]).unwrap();
    let d = dot(&a, &b).unwrap();
    let va = Value::from(rand_f64(&[7, 9], 3, -1.0, 1.0));
    let vb = Value::from(rand_f64(&[9, 5], 4, -1.0, 1.0));
    check(&[a, b], &[s, d], &[va, vb], 8, "sum/dot");
}
