//! Helpers shared by the rewrite-library tests: building graphs from
//! expression text, running one rule (or one database) to a fixed point,
//! and checking that a rewrite preserves values on random and edge inputs
//! with the reference evaluator (README rule 5).
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;

use kiln::eval::evaluate;
use kiln::graph::print::pprint_outputs;
use kiln::rewrites::canonicalize;
use kiln::rewrites::register::{database_rules, node_rewriter};
use kiln::rewrites::rule::Rule;
use kiln::rewriting::{
    EquilibriumGraphRewriter, FnNodeRewriter, GraphRewriter, NodeRewriter, Rewrite,
    RewriteDatabaseQuery, RewriterProfile, StopReason, Tracks,
};
use kiln::*;
use ndarray::{ArrayD, IxDyn};

/// Every rule of the three databases, with its database's name.
pub fn all_rules() -> Vec<(&'static str, Rule)> {
    ["canonicalize", "stabilize", "specialize"]
        .into_iter()
        .flat_map(|db| database_rules(db).into_iter().map(move |r| (db, r)))
        .collect()
}

/// The rule called `name` (panics when absent).
pub fn rule(name: &str) -> Rule {
    if name == "constant_folding" {
        return Rule {
            name: "constant_folding",
            tracks: &[],
            apply: canonicalize::constant_folding,
            fast_compile: true,
        };
    }
    all_rules()
        .into_iter()
        .find(|(_, r)| r.name == name)
        .unwrap_or_else(|| panic!("no rule called {name}"))
        .1
}

/// Parses `"x=f64[:]; y=f64[]"` into named input tensors, in order.
pub fn decls(text: &str) -> Vec<Tensor> {
    text.split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let d = kiln::expr::parse_decl(s).unwrap_or_else(|e| panic!("{s}: {e:?}"));
            tensor(&d.name, DType::parse(&d.dtype).unwrap(), &d.dims)
        })
        .collect()
}

/// The graph of expression `src` over the declared inputs.
pub fn graph(decl_text: &str, src: &str) -> FunctionGraph {
    let ins = decls(decl_text);
    let map: HashMap<String, Tensor> = ins
        .iter()
        .map(|t| (t.name().unwrap().to_string(), t.clone()))
        .collect();
    let out = build_expression(src, &map).unwrap_or_else(|e| panic!("{src}: {e}"));
    FunctionGraph::new(&ins, &[out]).unwrap()
}

/// The graph of a tensor expression over `inputs`.
pub fn graph_of(inputs: &[Tensor], out: &Tensor) -> FunctionGraph {
    FunctionGraph::new(inputs, std::slice::from_ref(out)).unwrap()
}

/// The graph printed one output per line.
pub fn show(fg: &FunctionGraph) -> String {
    pprint_outputs(fg)
}

fn assert_converged(p: &RewriterProfile) {
    for (who, why) in p.stop_reasons() {
        assert_eq!(why, StopReason::Converged, "{who} did not converge: {why}");
    }
}

/// Runs an equilibrium of the single rule `name`; returns how often it fired.
pub fn apply_rule(fg: &mut FunctionGraph, name: &str) -> usize {
    let r = rule(name);
    let nr: Arc<dyn NodeRewriter> = if name == "constant_folding" {
        // Registered as a walk over every node (DimShuffles of constants too).
        Arc::new(FnNodeRewriter::new(name, Tracks::All, move |fg, n| {
            Ok((r.apply)(fg, n)?.map(Rewrite::single))
        }))
    } else {
        Arc::new(node_rewriter(r))
    };
    let eq = EquilibriumGraphRewriter::new(vec![nr]);
    let p = eq.rewrite(fg).unwrap();
    assert_converged(&p);
    fg.check_integrity().unwrap();
    p.log().iter().filter(|e| e.rewriter == name).count()
}

/// Runs the optdb restricted to `tags` (e.g. `["canonicalize"]`, or
/// `["canonicalize", "stabilize"]`); returns the profile.
pub fn apply_dbs(fg: &mut FunctionGraph, tags: &[&str]) -> RewriterProfile {
    let p = kiln::rewrites::rewrite_graph(fg, &RewriteDatabaseQuery::new(tags)).unwrap();
    assert_converged(&p);
    fg.check_integrity().unwrap();
    p
}

/// FAST_RUN without fusion (keeps the result readable).
pub fn fast_run_nofusion(fg: &mut FunctionGraph) -> RewriterProfile {
    let m = kiln::rewriting::Mode::fast_run().excluding(&["fusion", "inplace"]);
    let p = kiln::rewrites::rewrite_graph(fg, &m).unwrap();
    assert_converged(&p);
    fg.check_integrity().unwrap();
    p
}

/// Applies rule `name` to the graph printed `before`, asserts it fired and
/// printed `after`, and checks value preservation. Returns the rewritten graph.
pub fn check_rule(name: &str, fg: FunctionGraph, before: &str, after: &str) -> FunctionGraph {
    check_rule_allowing(name, fg, before, after, &|_, _, _| false)
}

/// An exception to rule 5 for one element: `(inputs at the element, before, after)`.
pub type Allow<'a> = &'a dyn Fn(&[f64], f64, f64) -> bool;

/// [`check_rule`] where `allow` accepts documented differences (e.g. a
/// stabilisation giving NaN where the original's finite value was an artefact).
pub fn check_rule_allowing(
    name: &str,
    fg: FunctionGraph,
    before: &str,
    after: &str,
    allow: Allow<'_>,
) -> FunctionGraph {
    assert_eq!(show(&fg), before, "graph before {name}");
    let mut new = fg.clone();
    let fired = apply_rule(&mut new, name);
    assert!(fired > 0, "{name} did not fire on {before}");
    assert_eq!(show(&new), after, "{name} on {before}");
    // The result is a fixed point of the rule.
    let mut again = new.clone();
    assert_eq!(
        apply_rule(&mut again, name),
        0,
        "{name} fires again on {after}"
    );
    if let Some(msg) = preserves_allowing(&fg, &new, 1, allow) {
        panic!("{name}: {msg}\nbefore: {before}\nafter:  {after}");
    }
    new
}

/// Asserts that rule `name` does not fire on the graph.
pub fn check_no_fire(name: &str, fg: FunctionGraph) {
    let before = show(&fg);
    let mut new = fg;
    assert_eq!(apply_rule(&mut new, name), 0, "{name} fired on {before}");
    assert_eq!(show(&new), before);
}

// ---------------------------------------------------------------- values

/// A small deterministic PRNG (splitmix64).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }
}

/// The edge values of a float input. Large and tiny magnitudes are 1e±100 so
/// that reassociating up to three factors (`x / y / z -> x / (y * z)`) cannot
/// move an overflow or underflow (README rule 5 is about values, not range).
pub const EDGES: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -2.5,
    3.0,
    1e-100,
    -1e-100,
    1e100,
    -1e100,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    700.0,
    -700.0,
    1e-8,
];

const INT_EDGES: &[f64] = &[0.0, 1.0, -1.0, 2.0, 3.0, -7.0, 100.0, 5.0];

fn edges_of(dtype: DType) -> &'static [f64] {
    match dtype {
        DType::Bool => &[0.0, 1.0],
        d if d.is_float() => EDGES,
        DType::U8 => &[0.0, 1.0, 2.0, 3.0, 7.0, 100.0, 255.0],
        _ => INT_EDGES,
    }
}

/// Input sets for `fg`: edge combinations then tame random values.
/// Unknown dimensions all get the same size so that any broadcast works.
pub fn input_sets(fg: &FunctionGraph, seed: u64) -> Vec<Vec<Value>> {
    let tys: Vec<TensorType> = fg.inputs().iter().map(|&v| fg.ty(v).clone()).collect();
    let mut rng = Rng(seed);
    let mut sets = Vec::new();
    let all_vectors = tys.iter().all(|t| t.ndim() == 1 && t.shape[0].is_none());
    if all_vectors && !tys.is_empty() {
        // The full grid of edge combinations (sampled beyond two inputs).
        let lists: Vec<&[f64]> = tys.iter().map(|t| edges_of(t.dtype)).collect();
        let total: usize = lists.iter().map(|l| l.len()).product();
        let n = total.min(600);
        let mut cols: Vec<Vec<f64>> = vec![Vec::with_capacity(n); tys.len()];
        for e in 0..n {
            let mut k = if total > 600 {
                (rng.next_u64() % total as u64) as usize
            } else {
                e
            };
            for (c, l) in cols.iter_mut().zip(&lists) {
                c.push(l[k % l.len()]);
                k /= l.len();
            }
        }
        sets.push(
            tys.iter()
                .zip(cols)
                .map(|(t, c)| {
                    Value::from_f64_array(t.dtype, ArrayD::from_shape_vec(IxDyn(&[n]), c).unwrap())
                })
                .collect(),
        );
    } else {
        let rounds = 17;
        for r in 0..rounds {
            sets.push(
                tys.iter()
                    .enumerate()
                    .map(|(i, t)| {
                        let l = edges_of(t.dtype);
                        let shape: Vec<usize> = t.shape.iter().map(|d| d.unwrap_or(4)).collect();
                        let size: usize = shape.iter().product();
                        let data: Vec<f64> = (0..size)
                            .map(|k| l[(r + k * (2 * i + 1) + 3 * i * r) % l.len()])
                            .collect();
                        Value::from_f64_array(
                            t.dtype,
                            ArrayD::from_shape_vec(IxDyn(&shape), data).unwrap(),
                        )
                    })
                    .collect(),
            );
        }
    }
    // Tame values: mixed signs, positive only, and inside (-1, 1).
    for kind in 0..3 {
        sets.push(
            tys.iter()
                .map(|t| {
                    let shape: Vec<usize> = t.shape.iter().map(|d| d.unwrap_or(6)).collect();
                    let size: usize = shape.iter().product();
                    let data: Vec<f64> = (0..size)
                        .map(|_| {
                            if !t.dtype.is_float() {
                                return match t.dtype {
                                    DType::Bool => (rng.next_u64() % 2) as f64,
                                    DType::U8 => (rng.next_u64() % 10) as f64,
                                    _ => (rng.next_u64() % 13) as f64 - 6.0,
                                };
                            }
                            let m = rng.range(0.25, 3.0);
                            match kind {
                                0 => {
                                    if rng.uniform() < 0.5 {
                                        -m
                                    } else {
                                        m
                                    }
                                }
                                1 => m,
                                _ => rng.range(-0.9, 0.9),
                            }
                        })
                        .collect();
                    Value::from_f64_array(
                        t.dtype,
                        ArrayD::from_shape_vec(IxDyn(&shape), data).unwrap(),
                    )
                })
                .collect(),
        );
    }
    sets
}

/// Rule 5 on one element: `before` -> `after` with scale `s` and tolerance `rtol`.
pub fn element_ok(before: f64, after: f64, s: f64, rtol: f64) -> bool {
    if before.is_nan() {
        return true;
    }
    if before.is_infinite() {
        return after == before || after.is_finite();
    }
    if !after.is_finite() {
        return false;
    }
    (before - after).abs() <= rtol * before.abs().max(after.abs()).max(s).max(1.0)
}

/// Asserts that `new` computes what `old` computes on every input set
/// (README rule 5; relative tolerance 1e-9 on tame inputs, 1e-6 on edges,
/// scaled by the magnitude of the inputs at the same element).
pub fn assert_preserves(old: &FunctionGraph, new: &FunctionGraph, what: &str) {
    if let Some(msg) = preserves(old, new, 1) {
        panic!(
            "{what}: {msg}\nbefore: {}\nafter:  {}",
            show(old),
            show(new)
        );
    }
}

/// `None` when `new` preserves `old`'s values, else a description.
pub fn preserves(old: &FunctionGraph, new: &FunctionGraph, seed: u64) -> Option<String> {
    preserves_allowing(old, new, seed, &|_, _, _| false)
}

/// [`preserves`] with an exception predicate.
pub fn preserves_allowing(
    old: &FunctionGraph,
    new: &FunctionGraph,
    seed: u64,
    allow: Allow<'_>,
) -> Option<String> {
    let sets = input_sets(old, seed);
    let n_sets = sets.len();
    for (si, ins) in sets.into_iter().enumerate() {
        let tame = si + 3 >= n_sets;
        let a = match evaluate(old, &ins) {
            Ok(a) => a,
            // Inputs the original graph rejects (shapes that do not
            // broadcast, ...): the rewritten graph must reject them too.
            Err(e) => match evaluate(new, &ins) {
                Ok(_) => {
                    return Some(format!(
                        "the rewritten graph accepts inputs the original rejects ({e}): {ins:?}"
                    ))
                }
                Err(_) => continue,
            },
        };
        let b = match evaluate(new, &ins) {
            Ok(b) => b,
            Err(e) => return Some(format!("rewritten graph fails: {e} on {ins:?}")),
        };
        for (va, vb) in a.iter().zip(&b) {
            if va.dtype() != vb.dtype() || va.shape() != vb.shape() {
                return Some(format!("type changed: {va:?} vs {vb:?}"));
            }
            let fa = va.to_f64_array();
            let fb = vb.to_f64_array();
            let in_f: Vec<ArrayD<f64>> = ins.iter().map(|v| v.to_f64_array()).collect();
            let global: f64 = in_f
                .iter()
                .flat_map(|x| x.iter().copied())
                .filter(|x| x.is_finite())
                .fold(0.0, |m, x| m.max(x.abs()));
            for (k, (&x, &y)) in fa.iter().zip(fb.iter()).enumerate() {
                let mut s = 0.0f64;
                for x_in in &in_f {
                    if x_in.shape() == fa.shape() {
                        let e = x_in.as_slice_memory_order().map(|d| d[k]).unwrap_or(0.0);
                        if e.is_finite() {
                            s = s.max(e.abs());
                        }
                    } else {
                        s = s.max(global);
                    }
                }
                let rtol = if tame { 1e-9 } else { 1e-6 };
                let here: Vec<f64> = in_f
                    .iter()
                    .map(|x_in| {
                        if x_in.shape() == fa.shape() {
                            x_in.iter().nth(k).copied().unwrap_or(f64::NAN)
                        } else {
                            f64::NAN
                        }
                    })
                    .collect();
                if !element_ok(x, y, s, rtol) && !allow(&here, x, y) {
                    let inputs: Vec<String> = in_f
                        .iter()
                        .map(|x_in| {
                            if x_in.shape() == fa.shape() {
                                format!("{:e}", x_in.iter().nth(k).unwrap())
                            } else {
                                format!("{x_in}")
                            }
                        })
                        .collect();
                    return Some(format!(
                        "element {k}: before {x}, after {y} (inputs {})",
                        inputs.join(", ")
                    ));
                }
            }
        }
    }
    None
}
