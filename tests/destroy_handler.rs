//! The DestroyHandler refuses every unsafe inplace graph and accepts safe ones.

use kiln::graph::{DestroyHandler, FunctionGraph, ReplaceValidate, VarId};
use kiln::ops::{InplacePattern, Op, ScalarOp};
use kiln::*;
use smallvec::smallvec;

fn inplace(op: ScalarOp, out: u8, inp: u8) -> Op {
    let p: InplacePattern = smallvec![(out, inp)];
    Op::Elemwise {
        scalar: op,
        inplace: p,
    }
}

/// exp(x) + y, with the add node returned for rewriting.
fn graph() -> (FunctionGraph, VarId, VarId) {
    let x = vector("x", DType::F64);
    let y = vector("y", DType::F64);
    let out = &x.exp() + &y;
    let fg = FunctionGraph::new(&[x, y], &[out]).unwrap();
    let add_out = fg.outputs()[0];
    let exp_out = fg.node(fg.owner(add_out).unwrap()).inputs[0];
    (fg, exp_out, add_out)
}

fn attach(fg: &mut FunctionGraph, mutable: &[VarId]) {
    ReplaceValidate::attach(fg).unwrap();
    fg.attach_feature(DestroyHandler::new(mutable)).unwrap();
}

#[test]
fn destroying_an_intermediate_is_accepted() {
    let (mut fg, exp_out, add_out) = graph();
    attach(&mut fg, &[]);
    // log(exp(x)) computed in place over exp(x), then + y
    let y = fg.inputs()[1];
    let l = fg.apply1(inplace(ScalarOp::Log, 0, 0), &[exp_out]).unwrap();
    let s = fg.apply1(Op::elemwise(ScalarOp::Add), &[l, y]).unwrap();
    fg.replace_validate(add_out, s, "test").unwrap();
    fg.check_integrity().unwrap();
    assert_eq!(
        fg.feature::<DestroyHandler>().unwrap().destroyers().count(),
        1
    );
}

#[test]
fn destroying_an_input_needs_it_declared_mutable() {
    let (mut fg, _exp_out, add_out) = graph();
    attach(&mut fg, &[]);
    let (x, y) = (fg.inputs()[0], fg.inputs()[1]);
    let bad = fg.apply1(inplace(ScalarOp::Add, 0, 1), &[x, y]).unwrap();
    let e = fg.replace_validate(add_out, bad, "test").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("validation failed: add{{inplace}} (n{}) would overwrite the input 'y', which is not declared mutable", fg.node_capacity() - 1)
    );
    // Rolled back: the graph is unchanged.
    assert_eq!(fg.to_string(), "FunctionGraph(add(exp(x), y))");

    let (mut fg, _, add_out) = graph();
    let y = fg.inputs()[1];
    attach(&mut fg, &[y]);
    let x = fg.inputs()[0];
    let ok = fg.apply1(inplace(ScalarOp::Add, 0, 1), &[x, y]).unwrap();
    fg.replace_validate(add_out, ok, "test").unwrap();
}

#[test]
fn destroying_a_constant_is_refused() {
    let (mut fg, exp_out, add_out) = graph();
    attach(&mut fg, &[]);
    let c = fg.constant(Value::F64(ndarray::arr1(&[1.0, 2.0]).into_dyn()));
    let c = kiln::rewrites::util::pad_to(&mut fg, c, 1).unwrap();
    let bad = fg.apply(inplace(ScalarOp::Add, 0, 1), &[exp_out, c]);
    // The constant has static shape (2,), the sum too: make the replacement type-compatible.
    let bad = fg.node(bad.unwrap()).outputs[0];
    let e = fg.replace_validate(add_out, bad, "test").unwrap_err();
    assert!(e.to_string().contains("would overwrite a constant"), "{e}");
}

#[test]
fn two_destroyers_of_one_root_are_refused() {
    let (mut fg, exp_out, add_out) = graph();
    attach(&mut fg, &[]);
    let a = fg.apply1(inplace(ScalarOp::Neg, 0, 0), &[exp_out]).unwrap();
    let b = fg.apply1(inplace(ScalarOp::Sqr, 0, 0), &[exp_out]).unwrap();
    let s = fg.apply1(Op::elemwise(ScalarOp::Add), &[a, b]).unwrap();
    let e = fg.replace_validate(add_out, s, "test").unwrap_err();
    assert!(e.to_string().contains("is destroyed by two nodes"), "{e}");
}

#[test]
fn a_reader_that_must_run_after_the_destroyer_is_a_cycle() {
    let (mut fg, exp_out, add_out) = graph();
    attach(&mut fg, &[]);
    // d = neg_inplace(exp(x)); r = exp(x) * d  -- r reads exp(x) but needs d, which destroyed it.
    let d = fg.apply1(inplace(ScalarOp::Neg, 0, 0), &[exp_out]).unwrap();
    let r = fg
        .apply1(Op::elemwise(ScalarOp::Mul), &[exp_out, d])
        .unwrap();
    let e = fg.replace_validate(add_out, r, "test").unwrap_err();
    assert!(
        e.to_string().contains("would run before another reader"),
        "{e}"
    );
}

#[test]
fn orderings_put_other_readers_first() {
    let (mut fg, exp_out, add_out) = graph();
    attach(&mut fg, &[]);
    let y = fg.inputs()[1];
    // s = exp(x) + y (reader), d = neg_inplace(exp(x)); out = s * d
    let s = fg
        .apply1(Op::elemwise(ScalarOp::Add), &[exp_out, y])
        .unwrap();
    let d = fg.apply1(inplace(ScalarOp::Neg, 0, 0), &[exp_out]).unwrap();
    let out = fg.apply1(Op::elemwise(ScalarOp::Mul), &[s, d]).unwrap();
    fg.replace_validate(add_out, out, "test").unwrap();
    let orderings = fg.orderings();
    let (reader, destroyer) = (fg.owner(s).unwrap(), fg.owner(d).unwrap());
    assert!(orderings.contains(&(reader, destroyer)), "{orderings:?}");
    let order = fg.toposort_with(&orderings);
    let pos = |n| order.iter().position(|&m| m == n).unwrap();
    assert!(pos(reader) < pos(destroyer));
}

#[test]
fn destroying_an_output_or_reading_a_view_of_the_destroyed_memory_is_refused() {
    // The destroyed variable is itself a graph output.
    let x = vector("x", DType::F64);
    let e = x.exp();
    let out2 = e.log();
    let mut fg = FunctionGraph::new(&[x], &[e.clone(), out2]).unwrap();
    attach(&mut fg, &[]);
    let (e_v, l_v) = (fg.outputs()[0], fg.outputs()[1]);
    let bad = fg.apply1(inplace(ScalarOp::Log, 0, 0), &[e_v]).unwrap();
    let err = fg.replace_validate(l_v, bad, "test").unwrap_err();
    assert!(err.to_string().contains("graph output"), "{err}");

    // add_inplace(M, M.T): overwrites M while reading it transposed.
    let m = matrix("M", DType::F64);
    let out = (&m.exp() + &m).exp();
    let mut fg = FunctionGraph::new(&[m], &[out]).unwrap();
    attach(&mut fg, &[]);
    let top = fg.outputs()[0];
    let add_out = fg.node(fg.owner(top).unwrap()).inputs[0];
    let em = fg.node(fg.owner(add_out).unwrap()).inputs[0];
    let t = fg
        .apply1(
            Op::DimShuffle {
                input_ndim: 2,
                new_order: vec![Some(1), Some(0)],
            },
            &[em],
        )
        .unwrap();
    let bad = fg.apply1(inplace(ScalarOp::Add, 0, 0), &[em, t]).unwrap();
    let err = fg.replace_validate(add_out, bad, "test").unwrap_err();
    assert!(
        err.to_string()
            .contains("while reading a view of the same memory"),
        "{err}"
    );
}
