//! The tensor builder API: operator overloading, weak Rust constants,
//! ndim alignment, shape helpers, reductions and mean.

mod common;

use common::*;
use kiln::*;
use DType::*;

fn op_of(t: &Tensor) -> String {
    t.owner_op().map(|o| o.name()).unwrap_or_default()
}

#[test]
fn operators_for_every_operand_combination() {
    let (x, y) = (vector("x", F64), vector("y", F64));
    let vals = [vf(&[6.0, -3.0]), vf(&[4.0, 2.0])];
    let cases: Vec<(Tensor, &str, [f64; 2])> = vec![
        (&x + &y, "add", [10.0, -1.0]),
        (x.clone() - y.clone(), "sub", [2.0, -5.0]),
        (x.clone() * &y, "mul", [24.0, -6.0]),
        (&x / y.clone(), "true_div", [1.5, -1.5]),
        (&x % &y, "mod", [2.0, 1.0]),
        (&x + 1.0, "add", [7.0, -2.0]),
        (x.clone() * 2.0, "mul", [12.0, -6.0]),
        (10.0 - &x, "sub", [4.0, 13.0]),
        (12.0 / x.clone(), "true_div", [2.0, -4.0]),
        (7.0 % &y, "mod", [3.0, 1.0]),
        (&x - 1, "sub", [5.0, -4.0]),
        (2 * &x, "mul", [12.0, -6.0]),
        (x.clone() / 4, "true_div", [1.5, -0.75]),
        (-&x, "neg", [-6.0, 3.0]),
        (-x.clone(), "neg", [-6.0, 3.0]),
    ];
    for (t, op, want) in cases {
        assert_eq!(op_of(&t), op);
        assert_eq!(t.dtype(), F64);
        let got = eval1(&[x.clone(), y.clone()], &t, &vals);
        assert_eq!(flat(&got), want, "{t}");
    }
    // Constant operands are 0-d tensors with the operator's operand order kept.
    assert_eq!((10.0 - &x).to_string(), "(10.0 - x)");
    assert_eq!((2 * &x).to_string(), "(2.0 * x)");
}

#[test]
#[should_panic(
    expected = "type error in add: shapes do not broadcast in dimension 0: f64(2,), f64(3,)"
)]
fn operators_panic_with_the_type_error() {
    let _ = &tensor("a", F64, &[Some(2)]) + &tensor("b", F64, &[Some(3)]);
}

#[test]
fn rust_numbers_are_weak_constants() {
    let xf = vector("x", F32);
    let xi = vector("i", I32);
    let xb = vector("b", Bool);
    let x8 = vector("s", I8);
    assert_eq!((&xf * 2.0).dtype(), F32);
    assert_eq!((2.0 * &xf).dtype(), F32);
    assert_eq!((&xf + 1).dtype(), F32);
    assert_eq!((&xi + 1).dtype(), I32);
    assert_eq!((&xi * 0.5).dtype(), F64);
    assert_eq!((&xi / 2).dtype(), F64, "integer true division gives f64");
    assert_eq!((&xi % 3).dtype(), I32);
    assert_eq!((&xb + 1).dtype(), I64);
    assert_eq!((&xb * 1.5).dtype(), F64);
    assert_eq!((&x8 - 1).dtype(), I8);
    assert_eq!(xi.powf(2.0).dtype(), I32);
    assert_eq!(xi.powf(0.5).dtype(), F64);
    assert_eq!(xf.powf(3.0).dtype(), F32);
    let v = eval1(
        std::slice::from_ref(&xi),
        &(&(&xi + 1) * 3),
        &[val(&[2], vec![1i32, -4])],
    );
    assert_value(&v, I32, &[2], &[6.0, -9.0]);
    let v = eval1(
        std::slice::from_ref(&xf),
        &(&xf * 0.1),
        &[val(&[1], vec![3.0f32])],
    );
    assert_value(&v, F32, &[1], &[(3.0f32 * 0.1f32) as f64]);
}

#[test]
fn weak_integer_constants_do_not_saturate_or_lose_precision() {
    // 1000 does not fit in i8: the constant takes its default dtype (i64)
    // rather than saturating to 127.
    let s = vector("s", I8);
    let t = &s + 1000;
    assert_eq!(t.dtype(), I64);
    assert_value(
        &eval1(std::slice::from_ref(&s), &t, &[val(&[1], vec![5i8])]),
        I64,
        &[1],
        &[1005.0],
    );
    let u = vector("u", U8);
    let t = &u - (-1);
    assert_eq!(t.dtype(), I64);
    assert_value(
        &eval1(std::slice::from_ref(&u), &t, &[val(&[1], vec![5u8])]),
        I64,
        &[1],
        &[6.0],
    );
    assert_eq!((&u + 255).dtype(), U8);
    assert_eq!((&s * -128).dtype(), I8);
    // Large i64 constants are exact.
    let x = vector("x", I64);
    let big = (1i64 << 53) + 1;
    let v = eval1(std::slice::from_ref(&x), &(&x + big), &[vi(&[0])]);
    assert_eq!(flat_i(&v), [big]);
    let v = eval1(std::slice::from_ref(&x), &(i64::MAX - &x), &[vi(&[0])]);
    assert_eq!(flat_i(&v), [i64::MAX]);
}

#[test]
fn elementwise_ops_align_ndims_with_dimshuffle() {
    let m = matrix("M", F64);
    let v = vector("v", F64);
    let s = scalar("s", F64);
    let r = &m + &v;
    assert_eq!(r.ty(), &TensorType::new(F64, vec![None, None]));
    let padded = &r.owner_inputs()[1];
    assert_eq!(op_of(padded), "DimShuffle{x,0}");
    assert_eq!(padded.ty(), &TensorType::new(F64, vec![Some(1), None]));
    let r = &s * &m;
    assert_eq!(op_of(&r.owner_inputs()[0]), "DimShuffle{x,x}");
    // Constants are padded in place, without a node.
    let c = constant(ndarray::arr1(&[1.0, 2.0]).into_dyn());
    let r = &m + &c;
    assert!(r.owner_inputs()[1].constant_value().is_some());
    assert_eq!(
        r.owner_inputs()[1].ty(),
        &TensorType::new(F64, vec![Some(1), Some(2)])
    );
    let out = eval1(
        &[m.clone(), v.clone(), s.clone()],
        &(&(&m + &v) * &s),
        &[
            f64s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]),
            vf(&[10.0, 20.0]),
            Value::scalar_f64(F64, 2.0),
        ],
    );
    assert_value(&out, F64, &[2, 2], &[22.0, 44.0, 26.0, 48.0]);
    let sw = switch(&vector("c", Bool), &m, &s).unwrap();
    assert_eq!(sw.ty(), &TensorType::new(F64, vec![None, None]));
}

#[test]
fn expand_dims_transpose_reshape_and_cast() {
    let v = tensor("v", F32, &[Some(3)]);
    assert_eq!(v.expand_dims(0).unwrap().ty().shape, [Some(1), Some(3)]);
    assert_eq!(v.expand_dims(1).unwrap().ty().shape, [Some(3), Some(1)]);
    assert_eq!(v.expand_dims(-1).unwrap().ty().shape, [Some(3), Some(1)]);
    assert_eq!(v.expand_dims(-2).unwrap().ty().shape, [Some(1), Some(3)]);
    assert_eq!(
        v.expand_dims(2).unwrap_err().to_string(),
        "type error in expand_dims: axis 2 out of range for f32(3,)"
    );
    assert_eq!(
        v.expand_dims(-3).unwrap_err().to_string(),
        "type error in expand_dims: axis -3 out of range for f32(3,)"
    );
    let m = tensor("m", F64, &[Some(2), None, Some(4)]);
    assert_eq!(m.t().ty().shape, [Some(4), None, Some(2)]);
    assert_eq!(op_of(&m.t()), "DimShuffle{2,1,0}");
    assert_eq!(op_of(&v.t()), "DimShuffle{0}");
    let r = m.reshape(&[8, -1]).unwrap();
    assert_eq!(r.ty().shape, [Some(8), None]);
    let full = tensor("f", F64, &[Some(2), Some(3)]);
    assert_eq!(
        full.reshape(&[-1, 2]).unwrap().ty().shape,
        [Some(3), Some(2)]
    );
    assert_eq!(
        full.reshape(&[4, -1]).unwrap_err().to_string(),
        "type error in Reshape{2}: cannot reshape f64(2, 3) to [4, -1]"
    );
    let out = eval1(
        std::slice::from_ref(&full),
        &full.reshape(&[3, 2]).unwrap().t(),
        &[f64s(&[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0])],
    );
    assert_value(&out, F64, &[2, 3], &[0.0, 2.0, 4.0, 1.0, 3.0, 5.0]);
    // Casting to the same dtype is a no-op; other casts add a node.
    assert!(v.cast(F32).same(&v));
    assert_eq!(op_of(&v.cast(I8)), "cast{i8}");
    assert_eq!(v.cast(I8).ty(), &TensorType::new(I8, vec![Some(3)]));
    assert_eq!(
        vector("x", F64).invert().unwrap_err().to_string(),
        "type error in invert: is defined for bool and integer inputs only, got f64"
    );
    let sh = m.shape();
    assert_eq!(sh.ty(), &TensorType::new(I64, vec![Some(3)]));
    assert_eq!(
        m.shape_i(3).unwrap_err().to_string(),
        "type error in Shape_i{3}: dimension 3 out of range for f64(2, ?, 4)"
    );
}

#[test]
fn reductions_with_negative_axes_and_keepdims() {
    let x = tensor("x", F64, &[Some(2), Some(3), Some(4)]);
    assert_eq!(x.sum(&[-1]).unwrap().ty().shape, [Some(2), Some(3)]);
    assert_eq!(op_of(&x.sum(&[-1, 0]).unwrap()), "Sum{axes=[0, 2]}");
    let k = x.reduce(ReduceOp::Max, Some(&[0, -1]), true).unwrap();
    assert_eq!(k.ty().shape, [Some(1), Some(3), Some(1)]);
    assert_eq!(op_of(&k), "DimShuffle{x,0,x}");
    let all = x.reduce(ReduceOp::Sum, None, true).unwrap();
    assert_eq!(all.ty().shape, [Some(1), Some(1), Some(1)]);
    assert_eq!(x.sum(&[]).unwrap().ty().shape, [Some(2), Some(3), Some(4)]);
    assert_eq!(
        x.sum(&[3]).unwrap_err().to_string(),
        "type error in Sum: axis 3 out of range for f64(2, 3, 4)"
    );
    assert_eq!(
        x.prod(&[-4]).unwrap_err().to_string(),
        "type error in Prod: axis -4 out of range for f64(2, 3, 4)"
    );
    assert_eq!(
        x.max(&[2, -1]).unwrap_err().to_string(),
        "type error in Max: axis -1 repeated"
    );
    let data = f64s(&[2, 3, 4], &(0..24).map(|v| v as f64).collect::<Vec<_>>());
    let v = eval1(std::slice::from_ref(&x), &k, std::slice::from_ref(&data));
    assert_value(&v, F64, &[1, 3, 1], &[15.0, 19.0, 23.0]);
    let v = eval1(
        std::slice::from_ref(&x),
        &(&x - &x.reduce(ReduceOp::Min, Some(&[-1]), true).unwrap()),
        std::slice::from_ref(&data),
    );
    assert_eq!(flat(&v)[..5], [0.0, 1.0, 2.0, 3.0, 0.0]);
    let v = eval1(std::slice::from_ref(&x), &x.min(&[1, 2]).unwrap(), &[data]);
    assert_value(&v, F64, &[2], &[0.0, 12.0]);
}

#[test]
fn mean_of_floats_ints_and_unknown_sizes() {
    let x = tensor("x", F32, &[Some(2), Some(2)]);
    let m = x.mean(None, false).unwrap();
    assert_eq!(m.dtype(), F32);
    assert_value(
        &eval1(
            std::slice::from_ref(&x),
            &m,
            &[val(&[2, 2], vec![1.0f32, 2.0, 3.0, 5.0])],
        ),
        F32,
        &[],
        &[2.75],
    );
    let i = tensor("i", I8, &[Some(2), Some(3)]);
    let mi = i.mean(Some(&[-1]), false).unwrap();
    assert_eq!(mi.ty(), &TensorType::new(F64, vec![Some(2)]));
    assert_value(
        &eval1(
            std::slice::from_ref(&i),
            &mi,
            &[val(&[2, 3], vec![100i8, 100, 101, -1, 0, 0])],
        ),
        F64,
        &[2],
        &[301.0 / 3.0, -1.0 / 3.0],
    );
    // Unknown sizes divide by the run-time shape.
    let u = matrix("u", F64);
    let mu = u.mean(Some(&[0]), true).unwrap();
    assert_eq!(mu.ty(), &TensorType::new(F64, vec![Some(1), None]));
    assert!(mu.to_string().contains("Shape_i{0}(u)"), "{mu}");
    let v = eval1(
        std::slice::from_ref(&u),
        &mu,
        &[f64s(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 9.0])],
    );
    assert_value(&v, F64, &[1, 2], &[3.0, 5.0]);
    let all = u.mean(None, false).unwrap();
    // The count is the product of the sizes, with no `1 *` to rewrite away.
    assert!(
        all.to_string()
            .contains("cast((Shape_i{0}(u) * Shape_i{1}(u)), \"f64\")"),
        "{all}"
    );
    assert!(!mu.to_string().contains("1 *"), "{mu}");
    assert_value(
        &eval1(
            std::slice::from_ref(&u),
            &all,
            &[f64s(&[2, 2], &[1.0, 2.0, 3.0, 4.0])],
        ),
        F64,
        &[],
        &[2.5],
    );
    // The mean of nothing is NaN, as numpy's.
    assert_value(
        &eval1(std::slice::from_ref(&u), &all, &[f64s(&[0, 2], &[])]),
        F64,
        &[],
        &[f64::NAN],
    );
    let vi32 = vector("n", I32);
    let mean_i = vi32.mean(None, false).unwrap();
    assert_eq!(mean_i.dtype(), F64);
    assert_value(
        &eval1(
            std::slice::from_ref(&vi32),
            &mean_i,
            &[val(&[4], vec![1i32, 2, 3, 5])],
        ),
        F64,
        &[],
        &[2.75],
    );
}

#[test]
fn switch_clip_and_comparisons() {
    let x = vector("x", F64);
    let vals = [vf(&[-2.0, 0.5, 3.0, f64::NAN])];
    let lo = Tensor::scalar_constant(F64, 0.0);
    let hi = Tensor::scalar_constant(F64, 1.0);
    let c = clip(&x, &lo, &hi).unwrap();
    assert_eq!(c.ty(), x.ty());
    assert_value(
        &eval1(std::slice::from_ref(&x), &c, &vals),
        F64,
        &[4],
        &[0.0, 0.5, 1.0, f64::NAN],
    );
    let pos = gt(&x, &lo).unwrap();
    assert_eq!(pos.dtype(), Bool);
    assert_value(
        &eval1(std::slice::from_ref(&x), &pos, &vals),
        Bool,
        &[4],
        &[0.0, 1.0, 1.0, 0.0],
    );
    let w = switch(&pos, &x, &(-&x)).unwrap();
    assert_value(
        &eval1(std::slice::from_ref(&x), &w, &vals),
        F64,
        &[4],
        &[2.0, 0.5, 3.0, f64::NAN],
    );
    let cmp = [
        le(&x, &hi),
        ge(&x, &hi),
        lt(&x, &hi),
        eq(&x, &hi),
        neq(&x, &x),
    ];
    let want = [
        [1.0, 1.0, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.0],
        [1.0, 1.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 1.0],
    ];
    for (t, w) in cmp.into_iter().zip(want) {
        assert_value(
            &eval1(std::slice::from_ref(&x), &t.unwrap(), &vals),
            Bool,
            &[4],
            &w,
        );
    }
    let both = and(&pos, &le(&x, &hi).unwrap()).unwrap();
    assert_value(
        &eval1(std::slice::from_ref(&x), &both, &vals),
        Bool,
        &[4],
        &[0.0, 1.0, 0.0, 0.0],
    );
    let either = or(&pos, &pos.invert().unwrap()).unwrap();
    assert_value(
        &eval1(std::slice::from_ref(&x), &either, &vals),
        Bool,
        &[4],
        &[1.0; 4],
    );
}

#[test]
fn tensor_handles_names_and_free_inputs() {
    let (x, y, z) = (scalar("x", F64), scalar("y", F64), scalar("z", F64));
    let out = &(&y * &x) + &(&z + &y);
    let free: Vec<String> = out
        .free_inputs()
        .iter()
        .map(|t| t.name().unwrap().to_string())
        .collect();
    assert_eq!(free, ["y", "x", "z"]);
    assert_eq!(free_inputs(&[x.clone(), out.clone()]).len(), 3);
    let named = out.named("total");
    assert!(named.same(&out));
    assert_eq!(named.name(), Some("total"));
    let fg = FunctionGraph::new(&[x.clone(), y.clone(), z.clone()], &[named]).unwrap();
    assert_eq!(fg.var(fg.outputs()[0]).name.as_deref(), Some("total"));
    // Naming an input makes a new input.
    assert!(!x.named("w").same(&x));
    assert_eq!(format!("{x:?}"), "Tensor(x: f64())");
    assert_eq!(out.to_string(), "((y * x) + (z + y))");
    assert_eq!(x.ndim(), 0);
    let c = Tensor::scalar_constant(I8, 300.0);
    assert_eq!(flat_i(c.constant_value().unwrap()), [127]);
}
