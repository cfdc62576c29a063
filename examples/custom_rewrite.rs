//! Writing a rewrite and registering it: a `NodeRewriter` added to the
//! optdb under a tag of its own, selected by a mode that includes the tag.
//!
//! The rewrite replaces `tanh(x)` by the rational approximation
//! `x * (27 + x²) / (27 + 9 x²)` (within 3% of tanh on [-3, 3]). It trades
//! accuracy for speed, so it is opt-in: it is registered in the `specialize`
//! phase under the tag `approx_tanh` only, which FAST_RUN does not include;
//! `Mode::fast_run().including(&["approx_tanh"])` selects it. The rewritten
//! graph is then compiled with the linker and called.
//!
//! Run with `cargo run --release --example custom_rewrite`.

use std::sync::Arc;

use kiln::graph::{FunctionGraph, NodeId};
use kiln::linker::{compile, Arg, CompileOptions};
use kiln::ops::OpKind;
use kiln::rewrites::optdb;
use kiln::rewriting::{rewrite_graph_with, Mode, NodeRewriter, Rewrite, Tracks};
use kiln::{vector, DType, Op, ScalarOp, Value};
use ndarray::{ArrayD, IxDyn};

/// `tanh(x) -> x * (27 + x*x) / (27 + 9*x*x)`.
struct ApproxTanh;

impl NodeRewriter for ApproxTanh {
    fn name(&self) -> String {
        "local_approx_tanh".into()
    }
    // Only tanh nodes are offered to the rewriter.
    fn tracks(&self) -> Tracks {
        Tracks::kind(OpKind::Elemwise(ScalarOp::Tanh))
    }
    fn transform(&self, fg: &mut FunctionGraph, node: NodeId) -> kiln::Result<Option<Rewrite>> {
        let x = fg.node(node).inputs[0];
        if fg.ty(x).dtype != DType::F64 {
            return Ok(None);
        }
        // New nodes are created detached; the rewriter framework splices
        // the replacement in and validates it. Element-wise inputs have the
        // same number of dimensions: the constants have size 1 in each
        // (a static size 1 broadcasts).
        let ones = IxDyn(&vec![1; fg.ty(x).shape.len()]);
        let k27 = fg.constant(Value::F64(ArrayD::from_elem(ones.clone(), 27.0)));
        let k9 = fg.constant(Value::F64(ArrayD::from_elem(ones, 9.0)));
        let x2 = fg.apply1(Op::elemwise(ScalarOp::Mul), &[x, x])?;
        let num = fg.apply1(Op::elemwise(ScalarOp::Add), &[k27, x2])?;
        let num = fg.apply1(Op::elemwise(ScalarOp::Mul), &[x, num])?;
        let den = fg.apply1(Op::elemwise(ScalarOp::Mul), &[k9, x2])?;
        let den = fg.apply1(Op::elemwise(ScalarOp::Add), &[k27, den])?;
        let approx = fg.apply1(Op::elemwise(ScalarOp::TrueDiv), &[num, den])?;
        Ok(Some(Rewrite::single(approx)))
    }
}

fn main() -> kiln::Result<()> {
    // The standard optdb plus our rewrite, in the `specialize` equilibrium
    // under its own tag.
    let mut db = optdb();
    db.equilibrium_mut("specialize")?.register_node(
        "local_approx_tanh",
        Arc::new(ApproxTanh),
        &["approx_tanh"],
    )?;

    let x = vector("x", DType::F64);
    let y = (2.0 * &x).tanh();
    let input = Value::from(ArrayD::from_shape_fn(IxDyn(&[7]), |i| {
        i[0] as f64 / 4.0 - 0.75
    }));

    for (label, mode) in [
        ("FAST_RUN", Mode::fast_run()),
        (
            "FAST_RUN + approx_tanh",
            Mode::fast_run().including(&["approx_tanh"]),
        ),
    ] {
        let mut fg = FunctionGraph::new(std::slice::from_ref(&x), std::slice::from_ref(&y))?;
        rewrite_graph_with(&db, &mut fg, &mode)?;
        let f = compile(&fg, &CompileOptions::default())?;
        let out = f.call(&[Arg::from(&input)])?;
        println!("{label}:");
        println!("  graph:  {fg}");
        println!(
            "  result: {:.4?}",
            out[0].to_f64_array().as_slice().expect("1-d")
        );
    }
    Ok(())
}
