//! `Composite`: a fused scalar sub-graph, possibly with several outputs.
//!
//! Elemwise fusion builds one; the code generator lowers it to a single loop
//! and the reference evaluator interprets it node by node. Invariants: nodes
//! are in topological order (a node refers only to inputs, constants and
//! earlier nodes), every node's dtype is what its op infers from its
//! arguments, and every output refers to an input, a constant or a node.

use std::fmt;

use smallvec::SmallVec;

use super::scalar::ScalarOp;
use crate::error::{Error, Result};
use crate::types::DType;

/// A scalar constant inlined into a Composite: its dtype and value bits
/// (`f64::to_bits` for floats, the `i64` value for integers and bools).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScalarConst {
    /// The constant's dtype.
    pub dtype: DType,
    /// The value as raw bits (see the type's docs).
    pub bits: u64,
}

impl ScalarConst {
    /// A constant of dtype `dtype` holding `v`, converted like numpy's `astype`.
    pub fn new(dtype: DType, v: f64) -> Self {
        let bits = if dtype.is_float() {
            let v = if dtype == DType::F32 {
                v as f32 as f64
            } else {
                v
            };
            v.to_bits()
        } else {
            crate::types::Value::scalar_f64(dtype, v)
                .to_i64_array()
                .iter()
                .next()
                .copied()
                .unwrap_or(0) as u64
        };
        ScalarConst { dtype, bits }
    }
    /// The single element of a one-element value, exactly (an integer's
    /// bits are not carried through `f64`).
    pub fn of_value(v: &crate::types::Value) -> Option<Self> {
        if v.len() != 1 {
            return None;
        }
        let dtype = v.dtype();
        if dtype.is_float() {
            return Some(ScalarConst::new(dtype, v.scalar_as_f64()?));
        }
        let bits = *v.to_i64_array().iter().next()? as u64;
        Some(ScalarConst { dtype, bits })
    }

    /// The value as `f64`.
    pub fn as_f64(self) -> f64 {
        if self.dtype.is_float() {
            f64::from_bits(self.bits)
        } else if self.dtype == DType::U64 {
            self.bits as f64
        } else {
            self.bits as i64 as f64
        }
    }
    /// The value as `i64` (floats truncate).
    pub fn as_i64(self) -> i64 {
        if self.dtype.is_float() {
            f64::from_bits(self.bits) as i64
        } else {
            self.bits as i64
        }
    }
}

/// A reference to a scalar value inside a Composite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CRef {
    /// The i-th input of the Composite.
    Input(u32),
    /// The result of the i-th node.
    Node(u32),
    /// An inlined constant.
    Const(ScalarConst),
}

/// One scalar operation inside a Composite.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CNode {
    /// The scalar op.
    pub op: ScalarOp,
    /// Its arguments.
    pub args: SmallVec<[CRef; 3]>,
    /// Its output dtype.
    pub dtype: DType,
}

/// A scalar sub-graph with `inputs.len()` inputs and `outputs.len()` outputs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Composite {
    /// Dtypes of the inputs.
    pub inputs: Vec<DType>,
    /// Nodes in topological order.
    pub nodes: Vec<CNode>,
    /// The outputs.
    pub outputs: Vec<CRef>,
}

impl Composite {
    /// An empty composite over inputs of the given dtypes; add nodes with
    /// [`Composite::push`] and set [`Composite::outputs`].
    pub fn new(inputs: Vec<DType>) -> Self {
        Composite {
            inputs,
            nodes: Vec::new(),
            outputs: Vec::new(),
        }
    }

    /// The dtype of a reference.
    pub fn dtype_of(&self, r: CRef) -> DType {
        match r {
            CRef::Input(i) => self.inputs[i as usize],
            CRef::Node(i) => self.nodes[i as usize].dtype,
            CRef::Const(c) => c.dtype,
        }
    }

    /// Appends a node, inferring its dtype; returns a reference to its result.
    pub fn push(&mut self, op: ScalarOp, args: &[CRef]) -> Result<CRef> {
        for a in args {
            let ok = match *a {
                CRef::Input(i) => (i as usize) < self.inputs.len(),
                CRef::Node(i) => (i as usize) < self.nodes.len(),
                CRef::Const(_) => true,
            };
            if !ok {
                return Err(Error::ty("Composite", format!("dangling reference {a:?}")));
            }
        }
        let dtypes: Vec<DType> = args.iter().map(|&a| self.dtype_of(a)).collect();
        let dtype = op.output_dtype(&dtypes)?;
        self.nodes.push(CNode {
            op,
            args: args.iter().copied().collect(),
            dtype,
        });
        Ok(CRef::Node(self.nodes.len() as u32 - 1))
    }

    /// This program over new inputs of dtypes `inputs`: each reference to
    /// input `k` becomes `map[k]` (a new input or a constant of the same
    /// dtype); nodes, their dtypes and the outputs are kept.
    pub fn substitute_inputs(&self, map: &[CRef], inputs: Vec<DType>) -> Composite {
        let sub = |r: CRef| match r {
            CRef::Input(i) => map[i as usize],
            r => r,
        };
        Composite {
            inputs,
            nodes: self
                .nodes
                .iter()
                .map(|n| CNode {
                    op: n.op,
                    args: n.args.iter().map(|&a| sub(a)).collect(),
                    dtype: n.dtype,
                })
                .collect(),
            outputs: self.outputs.iter().map(|&o| sub(o)).collect(),
        }
    }

    /// Output dtypes.
    pub fn output_dtypes(&self) -> Vec<DType> {
        self.outputs.iter().map(|&r| self.dtype_of(r)).collect()
    }

    /// Checks the invariants in the module docs.
    pub fn check(&self) -> Result<()> {
        let mut probe = Composite::new(self.inputs.clone());
        for n in &self.nodes {
            probe.push(n.op, &n.args)?;
            if probe.nodes.last().map(|p| p.dtype) != Some(n.dtype) {
                return Err(Error::ty(
                    "Composite",
                    format!("node {} has an inconsistent dtype", n.op),
                ));
            }
        }
        for &o in &self.outputs {
            let dangling = match o {
                CRef::Node(i) => i as usize >= self.nodes.len(),
                CRef::Input(i) => i as usize >= self.inputs.len(),
                CRef::Const(_) => false,
            };
            if dangling {
                return Err(Error::ty("Composite", "dangling output".to_string()));
            }
        }
        if self.outputs.is_empty() {
            return Err(Error::ty("Composite", "has no outputs".to_string()));
        }
        Ok(())
    }

    /// Evaluates on scalar inputs in the domains of the reference evaluator;
    /// each value is carried as `f64` and rounded to its dtype after every node,
    /// exactly as evaluating the unfused graph node by node would.
    pub fn eval(&self, inputs: &[f64]) -> Vec<f64> {
        let mut vals: Vec<f64> = Vec::with_capacity(self.nodes.len());
        let get = |vals: &Vec<f64>, r: CRef| match r {
            CRef::Input(i) => inputs[i as usize],
            CRef::Node(i) => vals[i as usize],
            CRef::Const(c) => c.as_f64(),
        };
        for n in &self.nodes {
            let args: SmallVec<[f64; 3]> = n.args.iter().map(|&a| get(&vals, a)).collect();
            let dts: SmallVec<[DType; 3]> = n.args.iter().map(|&a| self.dtype_of(a)).collect();
            vals.push(eval_scalar(n.op, &args, &dts, n.dtype));
        }
        self.outputs.iter().map(|&o| get(&vals, o)).collect()
    }

    /// Appends the expression of `r` to `out`, stopping once `out` holds
    /// `limit` bytes (the caller marks the cut).
    fn render(&self, r: CRef, out: &mut String, limit: usize) {
        if out.len() >= limit {
            return;
        }
        // Writing to a String cannot fail.
        use std::fmt::Write as _;
        match r {
            CRef::Input(i) => {
                let _ = write!(out, "i{i}");
            }
            CRef::Const(c) => {
                let _ = crate::types::value::write_element(out, c.as_f64(), c.dtype);
            }
            CRef::Node(i) => {
                let n = &self.nodes[i as usize];
                let _ = write!(out, "{}(", n.op);
                for (k, a) in n.args.iter().enumerate() {
                    if k > 0 {
                        out.push_str(", ");
                    }
                    self.render(*a, out, limit);
                }
                out.push(')');
            }
        }
    }
}

/// Evaluates one scalar op on values carried as `f64`, in the domain the
/// reference evaluator uses for these dtypes, and rounds the result to `out`.
pub fn eval_scalar(op: ScalarOp, args: &[f64], dtypes: &[DType], out: DType) -> f64 {
    if op.computes_in_float(dtypes, out) {
        round_to(op.eval_f64(args), out)
    } else if op.computes_in_u64(dtypes, out) {
        // Values beyond 2^53 are already inexact when carried as `f64`.
        let ints: SmallVec<[u64; 3]> = args
            .iter()
            .zip(dtypes)
            .map(|(&a, d)| {
                if d.is_float() {
                    u64::from(a != 0.0)
                } else {
                    a as u64
                }
            })
            .collect();
        let r = op.eval_u64(&ints, out);
        if out.is_float() {
            round_to(r as f64, out)
        } else {
            carried(wrap_i64(r as i64, out), out)
        }
    } else {
        // A float argument in the integer domain (a `switch` condition) is its truth value.
        let ints: SmallVec<[i64; 3]> = args
            .iter()
            .zip(dtypes)
            .map(|(&a, d)| {
                if d.is_float() {
                    (a != 0.0) as i64
                } else {
                    a as i64
                }
            })
            .collect();
        carried(wrap_i64(op.eval_i64(&ints, out), out), out)
    }
}

/// A wrapped integer-domain result carried as `f64`: a `u64` by its unsigned value.
fn carried(v: i64, dtype: DType) -> f64 {
    if dtype == DType::U64 {
        v as u64 as f64
    } else {
        v as f64
    }
}

/// Converts a float-domain result to `dtype` with Rust `as` semantics (what
/// `Value::cast` does): floats round, integers truncate toward zero and
/// saturate, NaN gives 0, `bool` tests nonzero. Integer-domain results go
/// through [`wrap_i64`] instead. `i64` values beyond 2^53 lose precision
/// when carried as `f64`.
pub fn round_to(v: f64, dtype: DType) -> f64 {
    match dtype {
        DType::F64 => v,
        DType::F32 => v as f32 as f64,
        DType::Bool => (v != 0.0) as i64 as f64,
        DType::U8 => (v as u8) as f64,
        DType::U16 => (v as u16) as f64,
        DType::U32 => (v as u32) as f64,
        DType::U64 => (v as u64) as f64,
        DType::I8 => (v as i8) as f64,
        DType::I16 => (v as i16) as f64,
        DType::I32 => (v as i32) as f64,
        DType::I64 => v as i64 as f64,
    }
}

/// Wraps an `i64` result of the integer domain to `dtype` (two's complement
/// truncation; bool is `!= 0`).
pub fn wrap_i64(v: i64, dtype: DType) -> i64 {
    match dtype {
        DType::Bool => (v != 0) as i64,
        DType::U8 => v as u8 as i64,
        DType::U16 => v as u16 as i64,
        DType::U32 => v as u32 as i64,
        DType::U64 => v,
        DType::I8 => v as i8 as i64,
        DType::I16 => v as i16 as i64,
        DType::I32 => v as i32 as i64,
        DType::I64 | DType::F32 | DType::F64 => v,
    }
}

/// The longest rendering of a Composite's expressions, in bytes, before it
/// is cut with `…`. A fused DAG printed as a tree repeats every shared
/// sub-expression, so its full text can grow exponentially with its depth
/// (fusing the `chain` graph of workloads.md gives megabytes); every name,
/// profile line and error message that shows an op renders it.
pub const MAX_RENDERED_LEN: usize = 1024;

impl fmt::Display for Composite {
    /// `Composite{expr, ...}` with inputs `i0, i1, ...`, cut after
    /// [`MAX_RENDERED_LEN`] bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        for (k, &o) in self.outputs.iter().enumerate() {
            if k > 0 {
                s.push_str(", ");
            }
            // One byte more than the maximum tells whether the text was cut.
            self.render(o, &mut s, MAX_RENDERED_LEN + 1);
        }
        if s.len() > MAX_RENDERED_LEN {
            let mut cut = MAX_RENDERED_LEN;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            s.truncate(cut);
            s.push('…');
        }
        write!(f, "Composite{{{s}}}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deeply_shared_expression_prints_cut_in_bounded_space() {
        // x_{k+1} = x_k * x_k: 60 nodes whose tree has 2^60 leaves.
        let mut c = Composite::new(vec![DType::F64]);
        let mut x = CRef::Input(0);
        for _ in 0..60 {
            x = c.push(ScalarOp::Mul, &[x, x]).unwrap();
        }
        c.outputs = vec![x];
        c.check().unwrap();
        let shown = c.to_string();
        assert!(shown.starts_with("Composite{mul(mul(mul("), "{shown}");
        assert!(shown.ends_with("…}"), "{shown}");
        assert_eq!(
            shown.len(),
            "Composite{".len() + MAX_RENDERED_LEN + '…'.len_utf8() + 1
        );
        // Just under the limit nothing is cut.
        let mut d = Composite::new(vec![DType::F64]);
        let one = CRef::Const(ScalarConst::new(DType::F64, 1.0));
        let mut y = CRef::Input(0);
        // "add(" + ... + ", 1.0)" wraps 10 bytes around "i0" each time.
        for _ in 0..(MAX_RENDERED_LEN - 2) / 10 {
            y = d.push(ScalarOp::Add, &[y, one]).unwrap();
        }
        d.outputs = vec![y];
        let full = d.to_string();
        assert!(!full.contains('…'));
        assert_eq!(
            full.len(),
            "Composite{}".len() + 2 + 10 * ((MAX_RENDERED_LEN - 2) / 10)
        );
    }

    #[test]
    fn builds_evaluates_and_prints() {
        let mut c = Composite::new(vec![DType::F64, DType::F64]);
        let e = c.push(ScalarOp::Exp, &[CRef::Input(0)]).unwrap();
        let one = CRef::Const(ScalarConst::new(DType::F64, 1.0));
        let s = c.push(ScalarOp::Add, &[one, e]).unwrap();
        let l = c.push(ScalarOp::Log, &[s]).unwrap();
        let m = c.push(ScalarOp::Mul, &[l, CRef::Input(1)]).unwrap();
        c.outputs = vec![m, e];
        c.check().unwrap();
        assert_eq!(
            c.to_string(),
            "Composite{mul(log(add(1.0, exp(i0))), i1), exp(i0)}"
        );
        let r = c.eval(&[0.0, 2.0]);
        assert!((r[0] - 2.0 * 2f64.ln()).abs() < 1e-15);
        assert_eq!(r[1], 1.0);
        assert_eq!(c.output_dtypes(), vec![DType::F64, DType::F64]);
    }

    /// Substituting inputs swaps and inlines them and keeps the nodes.
    #[test]
    fn substitute_inputs_swaps_and_inlines_inputs() {
        let mut c = Composite::new(vec![DType::F64, DType::F64, DType::F64]);
        let d = c
            .push(ScalarOp::TrueDiv, &[CRef::Input(0), CRef::Input(1)])
            .unwrap();
        let s = c.push(ScalarOp::Sub, &[d, CRef::Input(2)]).unwrap();
        c.outputs = vec![s];
        let two = CRef::Const(ScalarConst::new(DType::F64, 2.0));
        let t = c.substitute_inputs(
            &[CRef::Input(1), two, CRef::Input(0)],
            vec![DType::F64, DType::F64],
        );
        t.check().unwrap();
        assert_eq!(t.to_string(), "Composite{sub(true_div(i1, 2.0), i0)}");
        assert_eq!(t.eval(&[1.0, 8.0]), vec![3.0]);
        assert_eq!(t.nodes.len(), c.nodes.len());
    }

    #[test]
    fn rejects_dangling_references() {
        let mut c = Composite::new(vec![DType::F64]);
        assert!(c.push(ScalarOp::Exp, &[CRef::Node(3)]).is_err());
        assert!(c.push(ScalarOp::Exp, &[CRef::Input(1)]).is_err());
        assert!(c.check().is_err(), "no outputs");
    }

    #[test]
    fn rounds_like_the_unfused_graph() {
        let mut c = Composite::new(vec![DType::F32]);
        let big = CRef::Const(ScalarConst::new(DType::F32, 16777216.0));
        let s = c.push(ScalarOp::Add, &[CRef::Input(0), big]).unwrap();
        c.outputs = vec![s];
        assert_eq!(c.eval(&[1.0])[0], 16777216.0, "f32 addition rounds");
    }

    #[test]
    fn float_to_int_saturates_and_int_results_wrap() {
        assert_eq!(round_to(1e300, DType::I32), i32::MAX as f64);
        assert_eq!(round_to(-1.0, DType::U8), 0.0);
        assert_eq!(round_to(f64::NAN, DType::I16), 0.0);
        let mut c = Composite::new(vec![DType::I8]);
        let big = CRef::Const(ScalarConst::new(DType::I8, 100.0));
        let s = c.push(ScalarOp::Add, &[CRef::Input(0), big]).unwrap();
        c.outputs = vec![s];
        assert_eq!(c.eval(&[100.0])[0], -56.0, "i8 addition wraps");
    }
}
