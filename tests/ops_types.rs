//! Type inference of every op: output dtypes and static shapes, and the
//! exact messages of rejected inputs.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use kiln::ops::{Arity, CRef, Composite, InputInfo, ScalarConst};
use kiln::*;
use DType::*;
use ScalarOp::*;

fn t(dtype: DType, shape: &[Option<usize>]) -> TensorType {
    TensorType::new(dtype, shape.to_vec())
}

fn infer(op: &Op, tys: &[TensorType]) -> Result<Vec<TensorType>> {
    let infos: Vec<InputInfo<'_>> = tys.iter().map(|ty| InputInfo { ty, value: None }).collect();
    op.infer_types(&infos)
}

fn infer_v(op: &Op, ins: &[(TensorType, Option<Value>)]) -> Result<Vec<TensorType>> {
    let infos: Vec<InputInfo<'_>> = ins
        .iter()
        .map(|(ty, v)| InputInfo {
            ty,
            value: v.as_ref(),
        })
        .collect();
    op.infer_types(&infos)
}

fn err(op: &Op, tys: &[TensorType]) -> String {
    infer(op, tys).expect_err("must be rejected").to_string()
}

fn one(op: &Op, tys: &[TensorType]) -> TensorType {
    let mut v = infer(op, tys).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.len(), 1);
    v.remove(0)
}

fn i64c(v: i64) -> (TensorType, Option<Value>) {
    (TensorType::scalar(I64), Some(Value::scalar_i64(I64, v)))
}

fn shape_vec(dims: &[i64]) -> (TensorType, Option<Value>) {
    let v = common::vi(dims);
    (v.tensor_type(), Some(v))
}

// ----- scalar ops through Elemwise -------------------------------------------

/// Expected output dtype of every scalar op for inputs all of f32, i32, bool and u8
/// (`None`: rejected).
fn expected_dtypes(op: ScalarOp) -> [Option<DType>; 4] {
    let same = [Some(F32), Some(I32), Some(Bool), Some(U8)];
    let float_fn = [Some(F32), Some(F64), Some(F32), Some(F32)];
    match op {
        // numpy: logical or / and, and the identity, on booleans.
        Add | Mul | Abs => same,
        Sub | Neg | Sign => [Some(F32), Some(I32), None, Some(U8)],
        IntDiv | Mod | Fmod | Pow | Sqr => [Some(F32), Some(I32), Some(I8), Some(U8)],
        // numpy's trunc keeps every dtype; integers are never NaN or infinite.
        Trunc => same,
        IsNan | IsInf | IsFinite => [Some(Bool); 4],
        LeftShift | RightShift => [None, Some(I32), Some(I8), Some(U8)],
        Floor | Ceil | Round => [Some(F32), Some(I32), Some(F32), Some(U8)],
        TrueDiv => [Some(F32), Some(F64), Some(F64), Some(F64)],
        Maximum | Minimum | Clip | Identity | Switch | Second => same,
        Lt | Le | Gt | Ge | Eq | Neq => [Some(Bool); 4],
        And | Or | Xor | Invert => [None, Some(I32), Some(Bool), Some(U8)],
        Cast(d) => [Some(d); 4],
        op if op.is_float_function() => float_fn,
        op => panic!("no expectation for {op}"),
    }
}

#[test]
fn every_scalar_op_infers_its_output_dtype_through_elemwise() {
    let ops = ScalarOp::all();
    assert_eq!(
        ops.len(),
        67 + 11,
        "every scalar op and a cast to each dtype"
    );
    for op in ops {
        let n = match op.arity() {
            Arity::Fixed(n) => n,
            Arity::Variadic => 3,
        };
        for (k, &d) in [F32, I32, Bool, U8].iter().enumerate() {
            let mut tys = vec![t(d, &[None, Some(3)]); n];
            if op == Switch {
                tys[0] = t(Bool, &[None, Some(3)]);
            }
            let r = infer(&Op::elemwise(op), &tys);
            match expected_dtypes(op)[k] {
                Some(want) => {
                    let ty = r.unwrap_or_else(|e| panic!("{op} on {d}: {e}"));
                    assert_eq!(ty, vec![t(want, &[None, Some(3)])], "{op} on {d}");
                }
                None if d == Bool => assert_eq!(
                    r.unwrap_err().to_string(),
                    format!(
                        "type error in {op}: is not defined for bool inputs, as in numpy \
                         (use `^` or `~`), got {}",
                        vec!["bool"; n].join(", ")
                    )
                ),
                None => assert_eq!(
                    r.unwrap_err().to_string(),
                    format!(
                        "type error in {op}: is defined for bool and integer inputs only, got {}",
                        vec!["f32"; n].join(", ")
                    )
                ),
            }
        }
    }
}

#[test]
fn scalar_op_names_arity_and_algebraic_properties() {
    for op in ScalarOp::all() {
        assert_eq!(ScalarOp::from_name(&op.name()), Some(op));
        assert_eq!(op.to_string(), op.name());
    }
    assert_eq!(ScalarOp::from_name("nope"), None);
    assert_eq!(Cast(U8).name(), "cast{u8}");
    assert_eq!(ArcTanh.name(), "arctanh");
    assert_eq!(IntDiv.name(), "int_div");
    assert_eq!(Add.arity(), Arity::Variadic);
    assert_eq!(Mul.arity(), Arity::Variadic);
    assert_eq!(Second.arity(), Arity::Fixed(2));
    assert_eq!(Clip.arity(), Arity::Fixed(3));
    assert_eq!(Switch.arity(), Arity::Fixed(3));
    assert_eq!(Cast(F32).arity(), Arity::Fixed(1));
    let commutative: HashSet<ScalarOp> = ScalarOp::all()
        .into_iter()
        .filter(|o| o.is_commutative())
        .collect();
    assert_eq!(
        commutative,
        [Add, Mul, Maximum, Minimum, Eq, Neq, And, Or, Xor, Hypot]
            .into_iter()
            .collect()
    );
    let assoc: HashSet<ScalarOp> = ScalarOp::all()
        .into_iter()
        .filter(|o| o.is_associative())
        .collect();
    assert_eq!(
        assoc,
        [Add, Mul, Maximum, Minimum, And, Or, Xor]
            .into_iter()
            .collect()
    );
    // Every associative op has an identity, and only those.
    for op in ScalarOp::all() {
        assert_eq!(op.identity().is_some(), op.is_associative(), "{op}");
    }
    assert_eq!(Add.identity(), Some(0.0));
    assert_eq!(And.identity(), Some(1.0));
    assert_eq!(Xor.identity(), Some(0.0));
    assert_eq!(Minimum.identity(), Some(f64::INFINITY));
    assert!(Lt.is_comparison() && !Add.is_comparison());
    assert!(Sqrt.is_exact() && Add.is_exact() && !Exp.is_exact() && !Tanh.is_exact());
}

#[test]
fn elemwise_dtype_promotion_follows_the_documented_rules() {
    let e = |op, ds: &[DType]| {
        let tys: Vec<TensorType> = ds.iter().map(|&d| TensorType::scalar(d)).collect();
        one(&Op::elemwise(op), &tys).dtype
    };
    assert_eq!(e(Add, &[F32, F64]), F64);
    assert_eq!(e(Add, &[U8, I8]), I16);
    assert_eq!(e(Add, &[Bool, I8]), I8);
    assert_eq!(e(Add, &[U8, I16]), I16);
    assert_eq!(e(Mul, &[I16, F32]), F32);
    // As numpy: a 32/64-bit integer with f32 gives f64.
    assert_eq!(e(Mul, &[I64, F32]), F64);
    assert_eq!(e(Add, &[I8, I32, I16]), I32);
    // numpy: booleans add (or) and multiply (and) to booleans.
    assert_eq!(e(Add, &[Bool, Bool, Bool]), Bool);
    assert_eq!(e(Mul, &[Bool, Bool]), Bool);
    assert_eq!(e(Add, &[Bool, U8]), U8);
    assert_eq!(e(Pow, &[Bool, Bool]), I8);
    assert_eq!(e(TrueDiv, &[I8, I8]), F64);
    assert_eq!(e(TrueDiv, &[Bool, F32]), F32);
    assert_eq!(e(TrueDiv, &[I64, F32]), F64);
    assert_eq!(e(Exp, &[I32]), F64);
    assert_eq!(e(Exp, &[I64]), F64);
    assert_eq!(e(Exp, &[U8]), F32);
    assert_eq!(e(Exp, &[I16]), F32);
    // Rounding an integer keeps its dtype (numpy); a bool is rounded as f32.
    assert_eq!(e(Floor, &[I8]), I8);
    assert_eq!(e(Round, &[I64]), I64);
    assert_eq!(e(Ceil, &[Bool]), F32);
    assert_eq!(e(Lt, &[I8, F64]), Bool);
    assert_eq!(e(And, &[I8, U8]), I16);
    assert_eq!(e(Or, &[Bool, I32]), I32);
    assert_eq!(e(Switch, &[Bool, I8, U8]), I16);
    assert_eq!(e(Switch, &[F64, I8, I8]), I8);
    assert_eq!(e(Second, &[F64, U8]), U8);
    assert_eq!(e(Clip, &[I8, F32, I8]), F32);
    assert_eq!(e(Maximum, &[Bool, Bool]), Bool);
    assert_eq!(e(Cast(Bool), &[F64]), Bool);
    assert_eq!(DType::upcast_all([]), None);
    assert_eq!(DType::upcast_all([I8, U8, Bool]), Some(I16));
}

#[test]
fn elemwise_static_shapes_broadcast_only_known_ones() {
    let add = Op::elemwise(Add);
    assert_eq!(
        one(
            &add,
            &[t(F64, &[Some(1), None]), t(F64, &[Some(3), Some(1)])]
        ),
        t(F64, &[Some(3), None])
    );
    assert_eq!(
        one(&add, &[t(F64, &[None]), t(F64, &[Some(3)])]),
        t(F64, &[Some(3)])
    );
    assert_eq!(
        one(&add, &[t(F64, &[Some(1)]), t(F64, &[Some(1)])]),
        t(F64, &[Some(1)])
    );
    assert_eq!(
        one(&add, &[t(F64, &[None]), t(F64, &[Some(1)])]),
        t(F64, &[None])
    );
    assert_eq!(
        one(&add, &[t(F64, &[Some(0)]), t(F64, &[Some(1)])]),
        t(F64, &[Some(0)])
    );
    assert_eq!(one(&add, &[t(F64, &[]), t(F64, &[])]), t(F64, &[]));
    assert_eq!(
        one(
            &Op::elemwise(Clip),
            &[
                t(F32, &[Some(2), Some(1)]),
                t(F32, &[Some(1), Some(1)]),
                t(F32, &[None, Some(4)])
            ]
        ),
        t(F32, &[Some(2), Some(4)])
    );
}

#[test]
fn elemwise_rejections_have_exact_messages() {
    assert_eq!(
        err(&Op::elemwise(Sub), &[t(F64, &[])]),
        "type error in sub: expects 2 input(s), got 1"
    );
    assert_eq!(
        err(&Op::elemwise(Exp), &[t(F64, &[]), t(F64, &[])]),
        "type error in exp: expects 1 input(s), got 2"
    );
    assert_eq!(
        err(&Op::elemwise(Switch), &vec![t(F64, &[]); 2]),
        "type error in switch: expects 3 input(s), got 2"
    );
    assert_eq!(
        err(&Op::elemwise(Add), &[]),
        "type error in add: expects at least one input"
    );
    assert_eq!(
        err(&Op::elemwise(And), &[t(F64, &[]), t(Bool, &[])]),
        "type error in and: is defined for bool and integer inputs only, got f64, bool"
    );
    assert_eq!(
        err(&Op::elemwise(Invert), &[t(F32, &[None])]),
        "type error in invert: is defined for bool and integer inputs only, got f32"
    );
    assert_eq!(
        err(
            &Op::elemwise(Add),
            &[t(F64, &[Some(3)]), t(F64, &[Some(4)])]
        ),
        "type error in add: shapes do not broadcast in dimension 0: f64(3,), f64(4,)"
    );
    assert_eq!(
        err(&Op::elemwise(Mul), &[t(F64, &[None, Some(2)]), t(F64, &[Some(5), Some(1)]), t(F64, &[Some(1), Some(3)])]),
        "type error in mul: shapes do not broadcast in dimension 1: f64(?, 2), f64(5, 1), f64(1, 3)"
    );
    assert_eq!(
        err(
            &Op::elemwise(Add),
            &[t(F64, &[None]), t(F64, &[None, None])]
        ),
        "type error in add: inputs have different numbers of dimensions: f64(?,) and f64(?, ?)"
    );
    let mut inplace = Op::elemwise(Add);
    if let Op::Elemwise { inplace: p, .. } = &mut inplace {
        p.push((0, 0));
    }
    assert_eq!(
        err(&inplace, &[t(F64, &[Some(2)]), t(F64, &[Some(3)])]),
        "type error in add{inplace}: shapes do not broadcast in dimension 0: f64(2,), f64(3,)"
    );
}

// ----- Composite -------------------------------------------------------------

fn softplus_like() -> Composite {
    let mut c = Composite::new(vec![F32, I8]);
    let e = c.push(Exp, &[CRef::Input(0)]).unwrap();
    let one = CRef::Const(ScalarConst::new(F32, 1.0));
    let s = c.push(Add, &[e, one]).unwrap();
    let l = c.push(Log, &[s]).unwrap();
    let lt = c
        .push(
            Lt,
            &[CRef::Input(1), CRef::Const(ScalarConst::new(I8, 0.0))],
        )
        .unwrap();
    c.outputs = vec![l, lt, CRef::Input(1)];
    c
}

#[test]
fn composite_types_and_rejections() {
    let c = softplus_like();
    c.check().unwrap();
    assert_eq!(c.output_dtypes(), vec![F32, Bool, I8]);
    let op = Op::composite(c);
    assert_eq!(
        op.name(),
        "Composite{log(add(exp(i0), 1.0)), lt(i1, 0), i1}"
    );
    let outs = infer(&op, &[t(F32, &[None, Some(1)]), t(I8, &[Some(2), Some(5)])]).unwrap();
    assert_eq!(
        outs,
        vec![
            t(F32, &[Some(2), Some(5)]),
            t(Bool, &[Some(2), Some(5)]),
            t(I8, &[Some(2), Some(5)])
        ]
    );
    assert_eq!(
        err(&op, &[t(F32, &[])]),
        "type error in Composite{log(add(exp(i0), 1.0)), lt(i1, 0), i1}: expects 2 inputs, got 1"
    );
    assert_eq!(
        err(&op, &[t(F64, &[]), t(I8, &[])]),
        "type error in Composite{log(add(exp(i0), 1.0)), lt(i1, 0), i1}: input 0 has dtype f64 but the composite expects f32"
    );
    assert_eq!(
        err(&op, &[t(F32, &[Some(2)]), t(I8, &[Some(3)])]),
        "type error in Composite{log(add(exp(i0), 1.0)), lt(i1, 0), i1}: shapes do not broadcast in dimension 0: f32(2,), i8(3,)"
    );
    // Node-level typing inside the composite.
    let mut bad = Composite::new(vec![F64]);
    assert_eq!(
        bad.push(And, &[CRef::Input(0), CRef::Input(0)])
            .unwrap_err()
            .to_string(),
        "type error in and: is defined for bool and integer inputs only, got f64, f64"
    );
    assert_eq!(
        bad.push(Exp, &[CRef::Node(0)]).unwrap_err().to_string(),
        "type error in Composite: dangling reference Node(0)"
    );
    assert_eq!(
        bad.check().unwrap_err().to_string(),
        "type error in Composite: has no outputs"
    );
    // A node whose recorded dtype disagrees with its op is caught by `check`.
    let mut inconsistent = Composite::new(vec![F64]);
    let e = inconsistent.push(Exp, &[CRef::Input(0)]).unwrap();
    inconsistent.outputs = vec![e];
    inconsistent.nodes[0].dtype = F32;
    assert_eq!(
        inconsistent.check().unwrap_err().to_string(),
        "type error in Composite: node exp has an inconsistent dtype"
    );
}

#[test]
fn composite_check_rejects_outputs_that_name_missing_inputs_or_nodes() {
    let mut c = Composite::new(vec![F64]);
    c.outputs = vec![CRef::Node(0)];
    assert_eq!(
        c.check().unwrap_err().to_string(),
        "type error in Composite: dangling output"
    );
    c.outputs = vec![CRef::Input(1)];
    assert_eq!(
        c.check().unwrap_err().to_string(),
        "type error in Composite: dangling output"
    );
}

// ----- DimShuffle ------------------------------------------------------------

fn ds(input_ndim: usize, order: &[Option<usize>]) -> Op {
    Op::DimShuffle {
        input_ndim,
        new_order: order.to_vec(),
    }
}

#[test]
fn dimshuffle_types() {
    assert_eq!(
        one(&ds(2, &[Some(1), Some(0)]), &[t(I8, &[Some(2), None])]),
        t(I8, &[None, Some(2)])
    );
    assert_eq!(
        one(&ds(1, &[None, Some(0), None]), &[t(F64, &[Some(3)])]),
        t(F64, &[Some(1), Some(3), Some(1)])
    );
    assert_eq!(
        one(&ds(2, &[Some(1)]), &[t(F64, &[Some(1), None])]),
        t(F64, &[None])
    );
    assert_eq!(
        one(&ds(0, &[None, None]), &[t(Bool, &[])]),
        t(Bool, &[Some(1), Some(1)])
    );
    assert_eq!(
        one(&ds(2, &[]), &[t(F32, &[Some(1), Some(1)])]),
        t(F32, &[])
    );
    assert_eq!(ds(3, &[Some(2), None, Some(0)]).name(), "DimShuffle{2,x,0}");
}

#[test]
fn dimshuffle_rejections_have_exact_messages() {
    assert_eq!(
        err(&ds(2, &[Some(0), Some(0)]), &[t(F64, &[None, None])]),
        "type error in DimShuffle{0,0}: invalid order [Some(0), Some(0)] for input f64(?, ?)"
    );
    assert_eq!(
        err(&ds(2, &[Some(0), Some(2)]), &[t(F64, &[None, None])]),
        "type error in DimShuffle{0,2}: invalid order [Some(0), Some(2)] for input f64(?, ?)"
    );
    assert_eq!(
        err(&ds(2, &[Some(1)]), &[t(F64, &[None, Some(1)])]),
        "type error in DimShuffle{1}: cannot drop dimension 0 of f64(?, 1): it is not broadcastable (size 1)"
    );
    assert_eq!(
        err(&ds(2, &[Some(0)]), &[t(F64, &[Some(3), Some(2)])]),
        "type error in DimShuffle{0}: cannot drop dimension 1 of f64(3, 2): it is not broadcastable (size 1)"
    );
    assert_eq!(
        err(&ds(2, &[Some(1), Some(0)]), &[t(F64, &[None])]),
        "type error in DimShuffle{1,0}: expects a 2-d input, got f64(?,)"
    );
    assert_eq!(
        err(&ds(1, &[Some(0)]), &[]),
        "type error in DimShuffle{0}: expects 1 input, got 0"
    );
}

// ----- CAReduce --------------------------------------------------------------

fn red(op: ReduceOp, axes: Option<&[usize]>) -> Op {
    Op::CAReduce {
        op,
        axes: axes.map(|a| a.to_vec()),
    }
}

#[test]
fn careduce_dtypes_for_each_reduction() {
    let all = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::All,
        ReduceOp::Any,
    ];
    let expect = |r: ReduceOp, d: DType| match r {
        ReduceOp::Sum | ReduceOp::Prod => {
            if d.is_float() {
                d
            } else if d.is_unsigned() {
                // numpy: sums of unsigned integers are `uint64`.
                U64
            } else {
                I64
            }
        }
        ReduceOp::Max | ReduceOp::Min => d,
        ReduceOp::All | ReduceOp::Any => Bool,
    };
    for r in all {
        for d in DType::ALL {
            let ty = one(&red(r, None), &[t(d, &[Some(2), None])]);
            assert_eq!(ty, t(expect(r, d), &[]), "{r:?} of {d}");
            assert_eq!(r.output_dtype(d), expect(r, d));
        }
    }
    assert_eq!(ReduceOp::Sum.scalar_op(), Add);
    assert_eq!(ReduceOp::Prod.scalar_op(), Mul);
    assert_eq!(ReduceOp::Max.scalar_op(), Maximum);
    assert_eq!(ReduceOp::Min.scalar_op(), Minimum);
    assert_eq!(ReduceOp::All.scalar_op(), And);
    assert_eq!(ReduceOp::Any.scalar_op(), Or);
    assert_eq!(ReduceOp::Sum.empty_value(F64), Some(0.0));
    assert_eq!(ReduceOp::Prod.empty_value(F64), Some(1.0));
    assert_eq!(ReduceOp::All.empty_value(Bool), Some(1.0));
    assert_eq!(ReduceOp::Any.empty_value(Bool), Some(0.0));
    assert_eq!(ReduceOp::Max.empty_value(F64), None);
    assert_eq!(ReduceOp::Min.empty_value(I8), None);
}

#[test]
fn careduce_static_shapes_over_several_axes_sets() {
    let x = t(F64, &[Some(2), None, Some(4)]);
    type Case<'a> = (Option<&'a [usize]>, &'a [Option<usize>]);
    let cases: &[Case<'_>] = &[
        (None, &[]),
        (Some(&[]), &[Some(2), None, Some(4)]),
        (Some(&[0]), &[None, Some(4)]),
        (Some(&[1]), &[Some(2), Some(4)]),
        (Some(&[2]), &[Some(2), None]),
        (Some(&[0, 2]), &[None]),
        (Some(&[0, 1, 2]), &[]),
    ];
    for r in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Any] {
        for (axes, shape) in cases {
            assert_eq!(
                one(&red(r, *axes), std::slice::from_ref(&x)).shape,
                shape.to_vec(),
                "{r:?} {axes:?}"
            );
        }
    }
    assert_eq!(red(ReduceOp::Sum, None).name(), "Sum{axes=None}");
    assert_eq!(red(ReduceOp::Max, Some(&[0, 2])).name(), "Max{axes=[0, 2]}");
    assert_eq!(red(ReduceOp::Any, Some(&[1])).name(), "Any{axes=[1]}");
    // A 0-d input reduces over no axes.
    assert_eq!(one(&red(ReduceOp::Prod, None), &[t(I8, &[])]), t(I64, &[]));
}

#[test]
fn careduce_rejects_bad_axes() {
    let x = t(F64, &[Some(2), Some(3), Some(4)]);
    for (axes, text) in [
        (vec![3], "[3]"),
        (vec![1, 0], "[1, 0]"),
        (vec![1, 1], "[1, 1]"),
    ] {
        let op = red(ReduceOp::Sum, Some(&axes));
        assert_eq!(
            err(&op, std::slice::from_ref(&x)),
            format!("type error in Sum{{axes={text}}}: invalid axes {text} for input f64(2, 3, 4)")
        );
    }
    assert_eq!(
        err(&red(ReduceOp::Min, None), &[x.clone(), x]),
        "type error in Min{axes=None}: expects 1 input, got 2"
    );
}

// ----- Dot -------------------------------------------------------------------

#[test]
fn dot_types_in_all_one_and_two_d_combinations() {
    let m23 = t(F64, &[Some(2), Some(3)]);
    let m34 = t(F64, &[Some(3), Some(4)]);
    let v3 = t(F64, &[Some(3)]);
    assert_eq!(
        one(&Op::Dot, &[m23.clone(), m34.clone()]),
        t(F64, &[Some(2), Some(4)])
    );
    assert_eq!(
        one(&Op::Dot, &[m23.clone(), v3.clone()]),
        t(F64, &[Some(2)])
    );
    assert_eq!(
        one(&Op::Dot, &[v3.clone(), m34.clone()]),
        t(F64, &[Some(4)])
    );
    assert_eq!(one(&Op::Dot, &[v3.clone(), v3.clone()]), t(F64, &[]));
    assert_eq!(
        one(&Op::Dot, &[t(F32, &[None, None]), t(F32, &[Some(7), None])]),
        t(F32, &[None, None])
    );
    assert_eq!(
        one(&Op::Dot, &[t(I32, &[None]), t(F32, &[None])]).dtype,
        F64
    );
    assert_eq!(
        one(&Op::Dot, &[t(Bool, &[None]), t(Bool, &[None])]).dtype,
        I64
    );
    assert_eq!(
        one(&Op::Dot, &[t(I8, &[None]), t(I8, &[None, Some(2)])]),
        t(I8, &[Some(2)])
    );
}

#[test]
fn dot_rejects_misaligned_and_bad_ranks() {
    assert_eq!(
        err(
            &Op::Dot,
            &[t(F64, &[Some(2), Some(3)]), t(F64, &[Some(4), Some(5)])]
        ),
        "type error in dot: inner dimensions differ: f64(2, 3) and f64(4, 5)"
    );
    assert_eq!(
        err(&Op::Dot, &[t(F64, &[Some(3)]), t(F64, &[Some(2)])]),
        "type error in dot: inner dimensions differ: f64(3,) and f64(2,)"
    );
    assert_eq!(
        err(&Op::Dot, &[t(F64, &[]), t(F64, &[None])]),
        "type error in dot: expects 1-d or 2-d operands, got f64(), f64(?,)"
    );
    assert_eq!(
        err(&Op::Dot, &[t(F64, &[None, None, None]), t(F64, &[None])]),
        "type error in dot: expects 1-d or 2-d operands, got f64(?, ?, ?), f64(?,)"
    );
    assert_eq!(
        err(&Op::Dot, &[t(F64, &[None])]),
        "type error in dot: expects 2 inputs, got 1"
    );
}

// ----- Alloc, Reshape, Shape, Shape_i ------------------------------------------

#[test]
fn alloc_types() {
    let v = (TensorType::scalar(F32), None);
    let unknown = (TensorType::scalar(I32), None);
    assert_eq!(
        infer_v(&Op::Alloc, &[v.clone(), i64c(2), i64c(3)]).unwrap(),
        vec![t(F32, &[Some(2), Some(3)])]
    );
    assert_eq!(
        infer_v(&Op::Alloc, &[v.clone(), i64c(2), unknown.clone()]).unwrap(),
        vec![t(F32, &[Some(2), None])]
    );
    assert_eq!(
        infer_v(&Op::Alloc, &[v, i64c(0)]).unwrap(),
        vec![t(F32, &[Some(0)])]
    );
    // A value dimension of known size fills an unknown target size.
    let row = (t(F64, &[Some(3)]), None);
    assert_eq!(
        infer_v(&Op::Alloc, &[row.clone(), i64c(2), unknown.clone()]).unwrap(),
        vec![t(F64, &[Some(2), Some(3)])]
    );
    let bcast = (t(F64, &[Some(1), None]), None);
    assert_eq!(
        infer_v(&Op::Alloc, &[bcast, i64c(4), i64c(5)]).unwrap(),
        vec![t(F64, &[Some(4), Some(5)])]
    );
    assert_eq!(
        infer_v(&Op::Alloc, &[(t(F64, &[]), None)]).unwrap(),
        vec![t(F64, &[])]
    );
}

#[test]
fn alloc_rejections() {
    let row = (t(F64, &[Some(3)]), None);
    let e = |ins: &[(TensorType, Option<Value>)]| infer_v(&Op::Alloc, ins).unwrap_err().to_string();
    assert_eq!(
        e(&[row.clone(), i64c(2), i64c(4)]),
        "type error in Alloc: value f64(3,) cannot broadcast to dimension 1 of size 4"
    );
    assert_eq!(
        e(&[row.clone(), (TensorType::scalar(F64), None)]),
        "type error in Alloc: shape input 0 must be a 0-d integer, got f64()"
    );
    assert_eq!(
        e(&[row.clone(), (t(I64, &[Some(1)]), None)]),
        "type error in Alloc: shape input 0 must be a 0-d integer, got i64(1,)"
    );
    assert_eq!(
        e(&[row.clone(), i64c(2), (TensorType::scalar(Bool), None)]),
        "type error in Alloc: shape input 1 must be a 0-d integer, got bool()"
    );
    assert_eq!(
        e(&[(t(F64, &[None, None]), None), i64c(2)]),
        "type error in Alloc: value f64(?, ?) has more dimensions than the shape (1)"
    );
    assert_eq!(
        e(&[]),
        "type error in Alloc: expects a value and one scalar per dimension"
    );
    assert_eq!(
        e(&[row, i64c(-2), i64c(3)]),
        "type error in Alloc: negative size -2 for dimension 0"
    );
}

#[test]
fn reshape_types_with_and_without_minus_one() {
    let x = (t(F32, &[Some(2), Some(3), Some(4)]), None);
    let r = |ndim: usize, ins: &[(TensorType, Option<Value>)]| infer_v(&Op::Reshape { ndim }, ins);
    assert_eq!(
        r(2, &[x.clone(), shape_vec(&[6, -1])]).unwrap(),
        vec![t(F32, &[Some(6), Some(4)])]
    );
    assert_eq!(
        r(1, &[x.clone(), shape_vec(&[-1])]).unwrap(),
        vec![t(F32, &[Some(24)])]
    );
    assert_eq!(
        r(3, &[x.clone(), shape_vec(&[-1, 1, 2])]).unwrap(),
        vec![t(F32, &[Some(12), Some(1), Some(2)])]
    );
    assert_eq!(
        r(2, &[x.clone(), shape_vec(&[4, 6])]).unwrap(),
        vec![t(F32, &[Some(4), Some(6)])]
    );
    assert_eq!(
        r(0, &[(t(F32, &[Some(1), Some(1)]), None), shape_vec(&[])]).unwrap(),
        vec![t(F32, &[])]
    );
    let unknown = (t(F32, &[None, Some(3)]), None);
    assert_eq!(
        r(2, &[unknown.clone(), shape_vec(&[3, -1])]).unwrap(),
        vec![t(F32, &[Some(3), None])]
    );
    assert_eq!(
        r(2, &[unknown.clone(), shape_vec(&[5, 7])]).unwrap(),
        vec![t(F32, &[Some(5), Some(7)])]
    );
    let symbolic = (t(I64, &[Some(2)]), None);
    assert_eq!(
        r(2, &[x.clone(), symbolic]).unwrap(),
        vec![t(F32, &[None, None])]
    );
    assert_eq!(
        r(1, &[unknown, (t(I32, &[None]), None)]).unwrap(),
        vec![t(F32, &[None])]
    );
    assert_eq!(Op::Reshape { ndim: 2 }.name(), "Reshape{2}");
}

#[test]
fn reshape_rejections() {
    let x = (t(F64, &[Some(2), Some(3), Some(4)]), None);
    let e = |ndim: usize, ins: &[(TensorType, Option<Value>)]| {
        infer_v(&Op::Reshape { ndim }, ins).unwrap_err().to_string()
    };
    assert_eq!(
        e(2, &[x.clone(), shape_vec(&[5, -1])]),
        "type error in Reshape{2}: cannot reshape f64(2, 3, 4) to [5, -1]"
    );
    assert_eq!(
        e(2, &[x.clone(), shape_vec(&[5, 5])]),
        "type error in Reshape{2}: cannot reshape f64(2, 3, 4) (size 24) to [5, 5]"
    );
    assert_eq!(
        e(2, &[x.clone(), shape_vec(&[-1, -1])]),
        "type error in Reshape{2}: invalid target shape [-1, -1]"
    );
    assert_eq!(
        e(2, &[x.clone(), shape_vec(&[-2, -12])]),
        "type error in Reshape{2}: invalid target shape [-2, -12]"
    );
    assert_eq!(
        e(2, &[x.clone(), shape_vec(&[0, -1])]),
        "type error in Reshape{2}: cannot reshape f64(2, 3, 4) to [0, -1]"
    );
    assert_eq!(
        e(3, &[x.clone(), shape_vec(&[6, 4])]),
        "type error in Reshape{3}: the shape must be a 1-d integer vector of length 3, got i64(2,)"
    );
    let fshape = common::vf(&[6.0, 4.0]);
    assert_eq!(
        e(2, &[x.clone(), (fshape.tensor_type(), Some(fshape))]),
        "type error in Reshape{2}: the shape must be a 1-d integer vector of length 2, got f64(2,)"
    );
    assert_eq!(
        e(1, &[x.clone(), i64c(24)]),
        "type error in Reshape{1}: the shape must be a 1-d integer vector of length 1, got i64()"
    );
    assert_eq!(
        e(1, &[x]),
        "type error in Reshape{1}: expects 2 inputs, got 1"
    );
}

#[test]
fn shape_and_shape_i_types() {
    assert_eq!(
        one(&Op::Shape, &[t(F32, &[None, Some(2), None])]),
        t(I64, &[Some(3)])
    );
    assert_eq!(one(&Op::Shape, &[t(Bool, &[])]), t(I64, &[Some(0)]));
    assert_eq!(
        one(&Op::ShapeI(1), &[t(F32, &[None, Some(2)])]),
        t(I64, &[])
    );
    assert_eq!(
        err(&Op::ShapeI(2), &[t(F64, &[None, None])]),
        "type error in Shape_i{2}: dimension 2 out of range for f64(?, ?)"
    );
    assert_eq!(
        err(&Op::Shape, &[]),
        "type error in Shape: expects 1 input, got 0"
    );
    assert_eq!(Op::ShapeI(1).name(), "Shape_i{1}");
    assert_eq!(Op::Shape.name(), "Shape");
}

// ----- equality, hashing, names, kinds ------------------------------------------

#[derive(Debug)]
struct Twice(f64);

impl kiln::ops::CustomOp for Twice {
    fn name(&self) -> String {
        "twice".into()
    }
    fn params(&self) -> String {
        format!("{}", self.0)
    }
    fn infer_types(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        match inputs {
            [x] if x.dtype.is_float() => Ok(vec![x.clone()]),
            _ => Err(Error::ty("twice", "expects one float input")),
        }
    }
    fn perform(&self, inputs: &[&Value]) -> Result<Vec<Value>> {
        let a = inputs[0].to_f64_array().mapv(|v| v * self.0);
        Ok(vec![Value::from_f64_array(inputs[0].dtype(), a)])
    }
}

#[test]
fn op_equality_hashing_names_and_views() {
    let mut inplace = Op::elemwise(Add);
    if let Op::Elemwise { inplace: p, .. } = &mut inplace {
        p.push((0, 1));
    }
    let c1 = Op::composite(softplus_like());
    let c2 = Op::composite(softplus_like());
    let ops = vec![
        Op::elemwise(Add),
        inplace.clone(),
        Op::elemwise(Mul),
        Op::elemwise(Cast(F32)),
        Op::elemwise(Cast(F64)),
        c1.clone(),
        ds(2, &[Some(1), Some(0)]),
        ds(2, &[Some(0), Some(1)]),
        red(ReduceOp::Sum, None),
        red(ReduceOp::Sum, Some(&[0])),
        red(ReduceOp::Prod, None),
        Op::Dot,
        Op::Alloc,
        Op::Reshape { ndim: 1 },
        Op::Reshape { ndim: 2 },
        Op::Shape,
        Op::ShapeI(0),
        Op::ShapeI(1),
        Op::Custom(Arc::new(Twice(2.0))),
        Op::Custom(Arc::new(Twice(3.0))),
    ];
    let set: HashSet<Op> = ops.iter().cloned().collect();
    assert_eq!(set.len(), ops.len(), "all distinct");
    // Structurally equal ops are equal and hash alike.
    assert_eq!(c1, c2);
    assert!(set.contains(&c2));
    assert!(set.contains(&Op::Custom(Arc::new(Twice(2.0)))));
    assert!(set.contains(&ds(2, &[Some(1), Some(0)])));
    assert_eq!(inplace.name(), "add{inplace}");
    assert_eq!(inplace.destroy_map().as_slice(), &[(0, 1)]);
    assert!(Op::elemwise(Add).destroy_map().is_empty());
    assert_eq!(ds(1, &[Some(0)]).view_map().as_slice(), &[(0, 0)]);
    assert_eq!(Op::Reshape { ndim: 1 }.view_map().as_slice(), &[(0, 0)]);
    assert!(Op::Dot.view_map().is_empty());
    assert_eq!(Op::Dot.name(), "dot");
    assert_eq!(Op::Alloc.to_string(), "Alloc");
    assert_eq!(Op::Custom(Arc::new(Twice(2.0))).name(), "twice");
    assert!(Op::elemwise(Exp).is_elemwise(Exp) && !Op::elemwise(Exp).is_elemwise(Log));
    assert!(c1.is_elementwise() && !Op::Dot.is_elementwise());
    assert_eq!(c1.scalar_op(), None);
    assert_eq!(Op::elemwise(Exp).kind(), kiln::ops::OpKind::Elemwise(Exp));
    assert_eq!(Op::ShapeI(3).kind(), kiln::ops::OpKind::ShapeI);
}

#[test]
fn custom_ops_type_and_evaluate_through_the_graph() {
    let x = vector("x", F32);
    let y = Tensor::apply(Op::Custom(Arc::new(Twice(2.5))), &[&x]).unwrap();
    assert_eq!(y.ty(), &t(F32, &[None]));
    let e = Tensor::apply(Op::Custom(Arc::new(Twice(2.5))), &[&vector("i", I32)]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "type error in twice: expects one float input"
    );
    let out = common::eval1(&[x], &(&y + 1.0), &[common::val(&[2], vec![1.0f32, -2.0])]);
    common::assert_value(&out, F32, &[2], &[3.5, -4.0]);
}

// ----- dtypes and tensor types -----------------------------------------------------

#[test]
fn dtype_and_tensor_type_helpers() {
    assert_eq!(DType::parse("float32").unwrap(), F32);
    assert_eq!(DType::parse("uint8").unwrap(), U8);
    assert_eq!(
        DType::parse("complex64").unwrap_err().to_string(),
        "parse error at position 0: unknown dtype 'complex64' (expected one of bool, u8, i8, u16, i16, u32, i32, u64, i64, f32, f64)"
    );
    assert_eq!(
        DType::ALL.map(|d| d.size_of()),
        [1, 1, 1, 2, 2, 4, 4, 8, 8, 4, 8]
    );
    assert!(
        U8.is_unsigned() && U8.is_int() && !Bool.is_int() && !Bool.is_float() && F32.is_float()
    );
    let ty = t(F64, &[Some(1), None, Some(3)]);
    assert_eq!(ty.broadcastable(), vec![true, false, false]);
    assert_eq!(ty.static_size(), None);
    assert_eq!(t(F64, &[Some(2), Some(3)]).static_size(), Some(6));
    assert_eq!(t(F64, &[]).static_size(), Some(1));
    assert_eq!(ty.to_string(), "f64(1, ?, 3)");
    assert_eq!(TensorType::scalar(Bool).to_string(), "bool()");
    assert_eq!(ty.with_dtype(I8).to_string(), "i8(1, ?, 3)");
    assert_eq!(TensorType::unknown(U8, 2).to_string(), "u8(?, ?)");
    // Replacement compatibility.
    assert!(t(F64, &[None]).accepts_replacement(&t(F64, &[Some(1)])));
    assert!(!t(F64, &[Some(1)]).accepts_replacement(&t(F64, &[None])));
    assert!(!t(F64, &[None]).accepts_replacement(&t(F64, &[None, None])));
}
