//! The Function API: argument kinds, validation errors naming the input,
//! call_into, concurrency, the compile cache, profiles, and memory release.
mod jit_support;
use std::sync::Arc;

use jit_support::*;
use kiln::linker::{compile, Arg, CompileOptions, Lowering};
use kiln::ops::CustomOp;
use kiln::{tensor, vector, DType, Error, FunctionGraph, Op, Tensor, TensorType, Value};
use ndarray::{ArrayD, IxDyn};

fn add_graph() -> FunctionGraph {
    let x = vector("x", DType::F64);
    let y = tensor("y", DType::F64, &[Some(1)]);
    let z = &(&x * &y) + &x.exp();
    FunctionGraph::new(&[x, y], &[z]).unwrap()
}

#[test]
fn argument_kinds() {
    let f = compile(&add_graph(), &CompileOptions::default()).unwrap();
    let x = rand_f64(&[10], 1, 0.0, 1.0);
    let y = ArrayD::from_elem(IxDyn(&[1]), 2.0);
    let a = f.call(&[(&x).into(), (&y).into()]).unwrap();
    let b = f.call(&[x.view().into(), y.view().into()]).unwrap();
    let (vx, vy) = (Value::from(x.clone()), Value::from(y.clone()));
    let c = f.call(&[Arg::from(&vx), Arg::from(&vy)]).unwrap();
    assert!(a[0].same_as(&b[0]) && a[0].same_as(&c[0]));
    let mut outs = vec![Value::from(ArrayD::<f64>::zeros(IxDyn(&[10])))];
    let ptr = match &outs[0] {
        Value::F64(a) => a.as_ptr(),
        _ => unreachable!(),
    };
    f.call_into(&[(&x).into(), (&y).into()], &mut outs).unwrap();
    assert!(outs[0].same_as(&a[0]));
    assert_eq!(
        match &outs[0] {
            Value::F64(a) => a.as_ptr(),
            _ => unreachable!(),
        },
        ptr,
        "buffer reused"
    );
}

#[test]
fn bad_inputs_name_the_input() {
    let f = compile(&add_graph(), &CompileOptions::default()).unwrap();
    let x = rand_f64(&[10], 1, 0.0, 1.0);
    let y = ArrayD::from_elem(IxDyn(&[1]), 2.0);
    let msg = |e: Error| e.to_string();
    assert!(msg(f.call(&[(&x).into()]).unwrap_err()).contains("expected 2 inputs, got 1"));
    let xi = x.mapv(|v| v as i32);
    assert!(msg(f.call(&[(&xi).into(), (&y).into()]).unwrap_err())
        .contains("input 0 ('x') has dtype i32, expected f64"));
    let x2 = rand_f64(&[2, 5], 1, 0.0, 1.0);
    assert!(msg(f.call(&[(&x2).into(), (&y).into()]).unwrap_err())
        .contains("input 0 ('x') has 2 dimension(s)"));
    let y3 = ArrayD::from_elem(IxDyn(&[3]), 2.0);
    assert!(msg(f.call(&[(&x).into(), (&y3).into()]).unwrap_err())
        .contains("input 1 ('y') has size 3 in dimension 0"));
    // Run-time broadcast mismatch between two unknown sizes names both inputs.
    let a = vector("a", DType::F64);
    let b = vector("b", DType::F64);
    let g = FunctionGraph::new(&[a.clone(), b.clone()], &[&a + &b]).unwrap();
    let f = compile(&g, &CompileOptions::default()).unwrap();
    let e = msg(f.call(&[(&x).into(), (&y3).into()]).unwrap_err());
    assert!(
        e.contains("'a'") && e.contains("'b'") && e.contains("dimension 0"),
        "{e}"
    );
}

#[test]
fn called_from_eight_threads() {
    let f = Arc::new(compile(&add_graph(), &CompileOptions::default()).unwrap());
    let x = Arc::new(rand_f64(&[4097], 1, -1.0, 1.0));
    let y = Arc::new(ArrayD::from_elem(IxDyn(&[1]), 0.5));
    let want = f.call(&[x.as_ref().into(), y.as_ref().into()]).unwrap();
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (f, x, y, want) = (f.clone(), x.clone(), y.clone(), want[0].clone());
            std::thread::spawn(move || {
                for _ in 0..20 {
                    let got = f.call(&[x.as_ref().into(), y.as_ref().into()]).unwrap();
                    assert!(got[0].same_as(&want));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn cache_and_profiles() {
    let f1 = compile(&add_graph(), &CompileOptions::default()).unwrap();
    let f2 = compile(&add_graph(), &CompileOptions::default()).unwrap();
    assert!(f2.profile.cached, "identical graph reuses the module");
    assert!(f1
        .profile
        .nodes
        .iter()
        .all(|(_, l)| *l != Lowering::Fallback));
    let x = rand_f64(&[10], 1, 0.0, 1.0);
    let y = ArrayD::from_elem(IxDyn(&[1]), 2.0);
    let (_, prof) = f1.call_profiled(&[(&x).into(), (&y).into()]).unwrap();
    assert_eq!(prof.nodes.len(), f1.profile.nodes.len());
    let f3 = compile(
        &add_graph(),
        &CompileOptions {
            no_cache: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(!f3.profile.cached);
}

#[derive(Debug)]
struct Twice;
impl CustomOp for Twice {
    fn name(&self) -> String {
        "twice".into()
    }
    fn infer_types(&self, inputs: &[TensorType]) -> kiln::Result<Vec<TensorType>> {
        Ok(vec![inputs[0].clone()])
    }
    fn perform(&self, inputs: &[&Value]) -> kiln::Result<Vec<Value>> {
        Ok(vec![Value::from_f64_array(
            inputs[0].dtype(),
            inputs[0].to_f64_array().mapv(|v| 2.0 * v),
        )])
    }
}

#[test]
fn custom_ops_fall_back_and_are_reported() {
    let x = vector("x", DType::F64);
    let t = Tensor::apply(Op::Custom(Arc::new(Twice)), &[&x.exp()]).unwrap();
    check(
        std::slice::from_ref(&x),
        &[&t + 1.0],
        &[Value::from(rand_f64(&[9], 1, 0.0, 1.0))],
        2,
        "custom",
    );
    let f = compile(
        &FunctionGraph::new(&[x], &[t]).unwrap(),
        &CompileOptions::default(),
    )
    .unwrap();
    assert_eq!(f.profile.fallbacks(), vec!["twice"]);
}

fn rss_pages() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    s.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn compile_and_drop_keeps_rss_flat() {
    let codegen = kiln::linker::CodegenOptions {
        verify: false,
        optimize: true,
        ..Default::default()
    };
    let opts = CompileOptions {
        no_cache: true,
        codegen,
        ..Default::default()
    };
    let x = rand_f64(&[10], 1, 0.0, 1.0);
    let y = ArrayD::from_elem(IxDyn(&[1]), 2.0);
    let g = add_graph();
    for _ in 0..50 {
        compile(&g, &opts).unwrap();
    }
    let before = rss_pages();
    // 10,000 cycles in release builds (CI), 1,000 in debug builds.
    let cycles = if cfg!(debug_assertions) { 1000 } else { 10_000 };
    for _ in 0..cycles {
        let f = compile(&g, &opts).unwrap();
        f.call(&[(&x).into(), (&y).into()]).unwrap();
    }
    let after = rss_pages();
    // 4 KiB pages: allow 16 MiB of noise (leaking the code pages would cost far more).
    assert!(
        after < before + 4096,
        "RSS grew from {before} to {after} pages"
    );
}

#[test]
fn functions_compiled_from_several_threads_at_once() {
    // Eight threads each compile their own graph (distinct constants, so no
    // cache sharing) and check the result against the reference evaluator.
    let handles: Vec<_> = (0..8)
        .map(|k| {
            std::thread::spawn(move || {
                let x = kiln::vector("x", DType::F64);
                let out = (&(&x * (k as f64 + 1.0)) + 0.5).exp();
                let g = FunctionGraph::new(std::slice::from_ref(&x), std::slice::from_ref(&out))
                    .unwrap();
                let f = compile(&g, &CompileOptions::default()).unwrap();
                let v = kiln::Value::F64(rand_f64(&[257], k, -1.0, 1.0));
                let got = f.call_values(std::slice::from_ref(&v)).unwrap();
                let want = kiln::eval::evaluate(&g, &[v]).unwrap();
                assert!(got[0].allclose(&want[0], 1e-14, 0.0), "thread {k}");
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

/// An element-wise node whose inputs are all single-element constants keeps
/// its rank when compiled without rewriting (no constant folding): `[3.0] -
/// 2.0` is the 1-d `[1.0]`, not a 0-d value that its consumer then rejects.
#[test]
fn element_wise_node_of_constants_only_keeps_its_rank() {
    let x = vector("x", DType::F64);
    let c1 = kiln::constant(Value::F64(ndarray::arr1(&[3.0]).into_dyn()));
    let c0 = Tensor::scalar_constant(DType::F64, 2.0);
    let d = kiln::tensor::sub(&c1, &c0).unwrap();
    let y = &x + &d;
    let both = kiln::tensor::mul(&c0, &c0).unwrap();
    let fg = FunctionGraph::new(std::slice::from_ref(&x), &[y, d, both]).unwrap();
    let f = compile(&fg, &CompileOptions::default()).unwrap();
    let out = f
        .call(&[ndarray::arr1(&[1.0, 2.0]).into_dyn().view().into()])
        .unwrap();
    assert!(out[0].same_as(&Value::F64(ndarray::arr1(&[2.0, 3.0]).into_dyn())));
    assert!(out[1].same_as(&Value::F64(ndarray::arr1(&[1.0]).into_dyn())));
    assert!(out[2].same_as(&Value::F64(ndarray::arr0(4.0).into_dyn())));
}
