//! GEMM epilogues: a float `Dot` or a `Gemm` step whose result only one
//! element-wise step reads (`tanh(A @ W + b)`: the product, then
//! `tanh(C + b)`) becomes one [`Step::Epilogue`] at the element-wise
//! step's place, which the executor runs block by block of the product's
//! rows when the product is larger than the last-level cache, mapping each
//! block while it is in cache (`exec::epilogue`).
//!
//! Invariants: the product's slot is read by that element-wise step only
//! and is not a graph output; the element-wise step overwrites no input
//! but the product (another could hold an operand of the product, which
//! later blocks still read); no step between the two writes into a buffer
//! it does not own (a `destroy_map`), so running the product later reads
//! the same operands; the fused step reads and writes the union of the two
//! steps' slots, so the memory plan built from the fused lists releases
//! the product's operands after the fused step, not before it.

use super::step::{ElemwiseStep, EpilogueProduct, EpilogueStep, Step};
use super::{Lowering, Slot};

/// A plan's steps in schedule order with their names and lowerings, and
/// per step the slots it reads (`uses`) and writes (`defs`).
pub struct Steps {
    /// The steps, their display names and how they were lowered.
    pub steps: Vec<(Step, String, Lowering)>,
    /// Per step, the slots it reads.
    pub uses: Vec<Vec<Slot>>,
    /// Per step, the slots it writes.
    pub defs: Vec<Vec<Slot>>,
}

/// A product step on its way to the element-wise step it is merged into.
struct Moved {
    product: EpilogueProduct,
    name: String,
    uses: Vec<Slot>,
    defs: Vec<Slot>,
}

/// Merges every float `Dot` and every `Gemm` step into the element-wise
/// step that is the only reader of its result (see the module header for
/// the conditions).
/// `outputs` are the graph's output slots; `overwrites(s)` tells whether
/// the step defining slot `s` writes it into an earlier slot's buffer.
pub fn fuse_epilogues(s: Steps, outputs: &[Slot], overwrites: &dyn Fn(Slot) -> bool) -> Steps {
    let n = s.steps.len();
    // into[i] = Some(j): product step i runs inside element-wise step j.
    let mut into: Vec<Option<usize>> = vec![None; n];
    for (i, (step, _, _)) in s.steps.iter().enumerate() {
        let product = match step {
            Step::Dot(d) if d.dtype.is_float() => d.output,
            Step::Gemm(g) => g.output,
            _ => continue,
        };
        if outputs.contains(&product) {
            continue;
        }
        let mut readers = (0..n).filter(|&k| s.uses[k].contains(&product));
        let (Some(j), None) = (readers.next(), readers.next()) else {
            continue;
        };
        // The map may overwrite the product (a fresh buffer), never another
        // input: that one could be (a view of) an operand of the product,
        // whose other blocks would then read rows already overwritten.
        let overwrites_only_product =
            |e: &ElemwiseStep| e.destroy_map.iter().all(|&(_, k)| e.inputs[k] == product);
        let fusable = j > i
            && matches!(&s.steps[j].0, Step::Elemwise(e) if overwrites_only_product(e))
            && !into.contains(&Some(j))
            && (i + 1..j).all(|k| !s.defs[k].iter().any(|&slot| overwrites(slot)));
        if fusable {
            into[i] = Some(j);
        }
    }
    if into.iter().all(Option::is_none) {
        return s;
    }
    let mut pending: Vec<Option<Moved>> = (0..n).map(|_| None).collect();
    let mut out = Steps {
        steps: Vec::with_capacity(n),
        uses: Vec::with_capacity(n),
        defs: Vec::with_capacity(n),
    };
    let parts = s.steps.into_iter().zip(s.uses).zip(s.defs);
    for (k, (((step, name, lowering), uses), defs)) in parts.enumerate() {
        match (into[k], pending[k].take(), step) {
            (Some(j), None, step) => {
                let product = match step {
                    Step::Dot(d) => EpilogueProduct::Dot(d),
                    Step::Gemm(g) => EpilogueProduct::Gemm(g),
                    _ => unreachable!("only Dot and Gemm steps are merged"),
                };
                pending[j] = Some(Moved {
                    product,
                    name,
                    uses,
                    defs,
                });
            }
            (None, Some(mut p), Step::Elemwise(elemwise)) => {
                p.uses.extend(uses);
                p.defs.extend(defs);
                let fused = Step::Epilogue(EpilogueStep {
                    product: p.product,
                    elemwise,
                });
                out.steps
                    .push((fused, format!("{}+{name}", p.name), lowering));
                out.uses.push(p.uses);
                out.defs.push(p.defs);
            }
            (None, None, step) => {
                out.steps.push((step, name, lowering));
                out.uses.push(uses);
                out.defs.push(defs);
            }
            _ => unreachable!("products are merged into Elemwise steps only"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::DType;
    use crate::linker::plan::step::{DimShuffleStep, DotStep, GemmStep};

    fn dot(a: Slot, b: Slot, output: Slot, dtype: DType) -> (Step, String, Lowering) {
        let d = DotStep {
            a,
            b,
            casts: [None, None],
            output,
            dtype,
        };
        (Step::Dot(d), "Dot".into(), Lowering::Runtime)
    }

    fn elemwise(inputs: Vec<Slot>, output: Slot) -> (Step, String, Lowering) {
        let e = ElemwiseStep {
            kernel: 0,
            bcast: inputs.iter().map(|_| vec![false, false]).collect(),
            descs: inputs.iter().map(|i| format!("input {i}")).collect(),
            inputs,
            outputs: vec![(output, DType::F64)],
            destroy_map: vec![],
        };
        (Step::Elemwise(e), "Elemwise".into(), Lowering::Jit)
    }

    fn view(input: Slot, output: Slot) -> (Step, String, Lowering) {
        let v = DimShuffleStep {
            input,
            output,
            new_order: vec![Some(0), None],
        };
        (Step::DimShuffle(v), "DimShuffle".into(), Lowering::Metadata)
    }

    /// Slots 0 (A), 1 (W), 2 (b): the product 3, b's row view 4, the result 5.
    fn mlp(result_reads_product: bool) -> Steps {
        let ins = if result_reads_product {
            vec![3, 4]
        } else {
            vec![4, 4]
        };
        Steps {
            steps: vec![
                dot(0, 1, 3, DType::F64),
                view(2, 4),
                elemwise(ins.clone(), 5),
            ],
            uses: vec![vec![0, 1], vec![2], ins],
            defs: vec![vec![3], vec![4], vec![5]],
        }
    }

    fn kinds(s: &Steps) -> Vec<&str> {
        s.steps.iter().map(|(_, n, _)| n.as_str()).collect()
    }

    #[test]
    fn a_product_read_by_one_elemwise_runs_inside_it() {
        let s = fuse_epilogues(mlp(true), &[5], &|_| false);
        assert_eq!(kinds(&s), ["DimShuffle", "Dot+Elemwise"]);
        let Step::Epilogue(f) = &s.steps[1].0 else {
            panic!("a fused step")
        };
        assert_eq!((f.product.output(), f.elemwise.outputs[0].0), (3, 5));
        // The operands of the product now live until the fused step.
        assert_eq!(s.uses[1], [0, 1, 3, 4]);
        assert_eq!(s.defs[1], [3, 5]);
    }

    #[test]
    fn a_gemm_is_merged_like_a_dot() {
        // Gemm(z = 6, alpha 7, A, W, beta 8) into slot 3.
        let g = GemmStep {
            z: 6,
            alpha: 7,
            x: 0,
            y: 1,
            beta: 8,
            output: 3,
            dtype: DType::F64,
            inplace: true,
            z_desc: "z".into(),
        };
        let mut m = mlp(true);
        m.steps[0] = (Step::Gemm(g), "Gemm".into(), Lowering::Runtime);
        m.uses[0] = vec![6, 7, 0, 1, 8];
        let s = fuse_epilogues(m, &[5], &|slot| slot == 3);
        assert_eq!(kinds(&s), ["DimShuffle", "Gemm+Elemwise"]);
        let Step::Epilogue(f) = &s.steps[1].0 else {
            panic!("a fused step")
        };
        assert!(matches!(f.product, EpilogueProduct::Gemm(_)));
        assert_eq!(s.uses[1], [6, 7, 0, 1, 8, 3, 4]);
    }

    #[test]
    fn products_read_elsewhere_or_returned_stay_apart() {
        // The element-wise step does not read the product.
        let s = fuse_epilogues(mlp(false), &[3, 5], &|_| false);
        assert_eq!(kinds(&s), ["Dot", "DimShuffle", "Elemwise"]);
        // The product is a graph output.
        let s = fuse_epilogues(mlp(true), &[3, 5], &|_| false);
        assert_eq!(kinds(&s), ["Dot", "DimShuffle", "Elemwise"]);
        // A second reader (the view reads the product).
        let mut m = mlp(true);
        m.uses[1].push(3);
        let s = fuse_epilogues(m, &[5], &|_| false);
        assert_eq!(kinds(&s), ["Dot", "DimShuffle", "Elemwise"]);
        // An integer product.
        let mut m = mlp(true);
        m.steps[0] = dot(0, 1, 3, DType::I64);
        let s = fuse_epilogues(m, &[5], &|_| false);
        assert_eq!(kinds(&s), ["Dot", "DimShuffle", "Elemwise"]);
    }

    #[test]
    fn a_map_that_overwrites_another_input_stays_apart() {
        // Inplace on the product: merged.
        let mut m = mlp(true);
        let Step::Elemwise(e) = &mut m.steps[2].0 else {
            unreachable!()
        };
        e.destroy_map = vec![(0, 0)];
        let s = fuse_epilogues(m, &[5], &|_| false);
        assert_eq!(kinds(&s), ["DimShuffle", "Dot+Elemwise"]);
        // Inplace on its other input: left alone.
        let mut m = mlp(true);
        let Step::Elemwise(e) = &mut m.steps[2].0 else {
            unreachable!()
        };
        e.destroy_map = vec![(0, 1)];
        let s = fuse_epilogues(m, &[5], &|_| false);
        assert_eq!(kinds(&s), ["Dot", "DimShuffle", "Elemwise"]);
    }

    #[test]
    fn no_product_moves_past_a_step_that_overwrites_a_buffer() {
        // The step between writes slot 4 into an earlier buffer (it could
        // be one of the product's operands): the product keeps its place.
        let s = fuse_epilogues(mlp(true), &[5], &|slot| slot == 4);
        assert_eq!(kinds(&s), ["Dot", "DimShuffle", "Elemwise"]);
    }
}
