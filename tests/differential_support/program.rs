//! The `pipeline` fuzz target's input format, shared with
//! `tests/fuzz_replay.rs` so that every committed finding
//! (`fuzz/regressions/pipeline/`) replays in CI through the same decoding
//! and comparison as the fuzzer ran.
//!
//! A program is read from raw bytes, a missing byte reading as 0, so every
//! byte string is a program:
//!
//! ```text
//! n_inputs (1 + b % 4)
//! per input: dtype (b % 8 of DTYPES), ndim (b % 3),
//!            per dimension: size (b % 4), static (b & 1: size 1 is static)
//! n_out (1 + b % 2), seed (8 bytes, little endian), variant (8 bytes)
//! steps until the bytes run out (at most MAX_STEPS): a tag (b % 8), then
//!   0 unary(op, a)  1 binary(op, a, b)  2 with_const(op, a, c, left)
//!   3 reduce(op, a, axis, keepdims)  4 transpose(a)  5 dot(a, b)
//!   6 switch(c, a, b)  7 cast(a, dtype)
//! ```
//!
//! Operands index the pool of tensors built so far modulo its size; ops
//! index the whole scalar op set of their arity. Steps that do not
//! type-check are skipped.

use kiln::{
    dot, elemwise, switch, tensor, weak_constant, DType, ReduceOp, ScalarOp, Tensor, Value,
};
use ndarray::{ArrayD, IxDyn};

/// Input dtypes, by the byte's value modulo their number. Deliberately not
/// `DType::ALL`: the committed fuzz regressions decode through this list, so
/// it must not change when a dtype is added to kiln.
pub const DTYPES: &[DType] = &[
    DType::Bool,
    DType::U8,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::F32,
    DType::F64,
];
const REDUCE: &[ReduceOp] = &[
    ReduceOp::Sum,
    ReduceOp::Prod,
    ReduceOp::Max,
    ReduceOp::Min,
    ReduceOp::All,
    ReduceOp::Any,
];
const CONSTS: &[f64] = &[0.0, 1.0, -1.0, 2.0, 0.5, 3.0, -2.5, 1e300, f64::INFINITY];
const EDGE: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    1e300,
    -1e300,
    5e-324,
    0.5,
    700.0,
    -700.0,
];
/// The most steps a program runs.
pub const MAX_STEPS: usize = 10;

/// A byte reader where a missing byte reads as 0.
struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }
    fn u64(&mut self) -> u64 {
        let mut v = [0u8; 8];
        for b in &mut v {
            *b = self.byte();
        }
        u64::from_le_bytes(v)
    }
    fn done(&self) -> bool {
        self.at >= self.data.len()
    }
}

/// A decoded program: its inputs, outputs, input values and the variant
/// (layouts and call forms, see `super::Variant`) it is compared under.
pub struct Program {
    /// The graph's inputs.
    pub ins: Vec<Tensor>,
    /// The graph's outputs (none when no step type-checked).
    pub outs: Vec<Tensor>,
    /// One value per input.
    pub vals: Vec<Value>,
    /// The variant number.
    pub variant: u64,
}

/// The ops of arity `n` (variadic ops count as binary).
fn ops_of_arity(n: usize) -> Vec<ScalarOp> {
    ScalarOp::all()
        .into_iter()
        .filter(|op| match op.arity() {
            kiln::ops::scalar::Arity::Fixed(k) => k == n,
            kiln::ops::scalar::Arity::Variadic => n == 2,
        })
        .collect()
}

/// Values of `shape` and `dtype` mixing edge values with half-integers.
fn value(dtype: DType, shape: &[usize], state: &mut u64) -> Value {
    let mut next = || {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*state >> 11) as f64 / (1u64 << 53) as f64
    };
    let n: usize = shape.iter().product();
    let data: Vec<f64> = (0..n)
        .map(|_| {
            let u = next();
            if u < 0.3 {
                EDGE[((next() * EDGE.len() as f64) as usize).min(EDGE.len() - 1)]
            } else {
                ((next() - 0.5) * 16.0).round() / 2.0
            }
        })
        .collect();
    let a = ArrayD::from_shape_vec(IxDyn(shape), data).expect("sized");
    Value::F64(a).cast(dtype)
}

/// Decodes `data` (module docs).
pub fn decode(data: &[u8]) -> Program {
    let mut r = Bytes { data, at: 0 };
    let (unary, binary) = (ops_of_arity(1), ops_of_arity(2));
    let n_inputs = 1 + r.byte() as usize % 4;
    let mut ins = Vec::new();
    let mut shapes = Vec::new();
    for k in 0..n_inputs {
        let dtype = DTYPES[r.byte() as usize % DTYPES.len()];
        let ndim = r.byte() as usize % 3;
        let mut sizes = Vec::new();
        let mut ty = Vec::new();
        for _ in 0..ndim {
            let (size, fixed) = (r.byte() as usize % 4, r.byte() & 1 == 1);
            sizes.push(size);
            ty.push((fixed && size == 1).then_some(1));
        }
        ins.push(tensor(&format!("in{k}"), dtype, &ty));
        shapes.push(sizes);
    }
    let n_out = 1 + r.byte() as usize % 2;
    let mut state = r.u64();
    let variant = r.u64();
    let vals = ins
        .iter()
        .zip(&shapes)
        .map(|(t, s)| value(t.dtype(), s, &mut state))
        .collect();
    let mut pool: Vec<Tensor> = ins.clone();
    let mut steps = 0;
    while !r.done() && steps < MAX_STEPS {
        steps += 1;
        let n = pool.len();
        let at = |r: &mut Bytes| pool[r.byte() as usize % n].clone();
        let t = match r.byte() % 8 {
            0 => {
                let op = unary[r.byte() as usize % unary.len()];
                elemwise(op, &[&at(&mut r)])
            }
            1 => {
                let op = binary[r.byte() as usize % binary.len()];
                let (a, b) = (at(&mut r), at(&mut r));
                elemwise(op, &[&a, &b])
            }
            2 => {
                let op = binary[r.byte() as usize % binary.len()];
                let x = at(&mut r);
                let v = CONSTS[r.byte() as usize % CONSTS.len()];
                let left = r.byte() & 1 == 1;
                weak_constant(&x, v, v.fract() != 0.0 || !v.is_finite()).and_then(|k| {
                    if left {
                        elemwise(op, &[&k, &x])
                    } else {
                        elemwise(op, &[&x, &k])
                    }
                })
            }
            3 => {
                let op = REDUCE[r.byte() as usize % REDUCE.len()];
                let x = at(&mut r);
                let (ax, keep) = (r.byte(), r.byte() & 1 == 1);
                let axes = (x.ndim() > 0 && ax % 2 == 1)
                    .then(|| vec![(ax / 2) as isize % x.ndim() as isize]);
                x.reduce(op, axes.as_deref(), keep)
            }
            4 => Ok(at(&mut r).t()),
            5 => {
                let (a, b) = (at(&mut r), at(&mut r));
                dot(&a, &b)
            }
            6 => {
                let (c, a, b) = (at(&mut r), at(&mut r), at(&mut r));
                switch(&c, &a, &b)
            }
            _ => {
                let x = at(&mut r);
                Ok(x.cast(DTYPES[r.byte() as usize % DTYPES.len()]))
            }
        };
        if let Ok(t) = t {
            pool.push(t);
        }
    }
    let outs = pool[ins.len()..]
        .iter()
        .rev()
        .take(n_out)
        .cloned()
        .collect();
    Program {
        ins,
        outs,
        vals,
        variant,
    }
}

/// Decodes `data` and compares it (`super::compare_case`); a program with
/// no output passes.
pub fn run(data: &[u8], stats: &mut super::Stats) -> Result<(), String> {
    let p = decode(data);
    if p.outs.is_empty() {
        return Ok(());
    }
    super::compare_case(&p.ins, &p.outs, &p.vals, super::Variant(p.variant), stats)
}
