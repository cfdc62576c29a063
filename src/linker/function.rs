//! The callable [`Function`] and its argument type [`Arg`].
//!
//! A Function is immutable after compilation and shares its compiled module
//! through an `Arc` (possibly with other Functions, via the compile cache).
//! Each call validates its inputs, runs the plan with call-local state and
//! returns freshly owned results, so a Function is `Send + Sync` and can be
//! called from many threads at once.

use std::sync::Arc;
use std::time::Duration;

use ndarray::{ArrayD, ArrayViewD};

use super::buffer::{Arr, BufferPool};
use super::compile::CompileProfile;
use super::exec::{check, to_value, CallStats, Exec, ParallelOptions};
use super::jit::JitCode;
use super::plan::Plan;
use crate::error::{Error, Result};
use crate::graph::{DType, Value};

/// A call argument: a borrowed array of any supported dtype and any layout.
#[derive(Debug, Clone)]
#[allow(missing_docs)] // one variant per dtype
pub enum Arg<'a> {
    Bool(ArrayViewD<'a, bool>),
    U8(ArrayViewD<'a, u8>),
    I8(ArrayViewD<'a, i8>),
    I16(ArrayViewD<'a, i16>),
    I32(ArrayViewD<'a, i32>),
    I64(ArrayViewD<'a, i64>),
    F32(ArrayViewD<'a, f32>),
    F64(ArrayViewD<'a, f64>),
}

macro_rules! arg_from {
    ($t:ty, $v:ident) => {
        impl<'a> From<&'a ArrayD<$t>> for Arg<'a> {
            fn from(a: &'a ArrayD<$t>) -> Self {
                Arg::$v(a.view())
            }
        }
        impl<'a> From<ArrayViewD<'a, $t>> for Arg<'a> {
            fn from(a: ArrayViewD<'a, $t>) -> Self {
                Arg::$v(a)
            }
        }
        impl<'a> From<&ArrayViewD<'a, $t>> for Arg<'a> {
            fn from(a: &ArrayViewD<'a, $t>) -> Self {
                Arg::$v(a.clone())
            }
        }
    };
}
arg_from!(bool, Bool);
arg_from!(u8, U8);
arg_from!(i8, I8);
arg_from!(i16, I16);
arg_from!(i32, I32);
arg_from!(i64, I64);
arg_from!(f32, F32);
arg_from!(f64, F64);

impl<'a> From<&'a Value> for Arg<'a> {
    fn from(v: &'a Value) -> Self {
        match v {
            Value::Bool(a) => Arg::Bool(a.view()),
            Value::U8(a) => Arg::U8(a.view()),
            Value::I8(a) => Arg::I8(a.view()),
            Value::I16(a) => Arg::I16(a.view()),
            Value::I32(a) => Arg::I32(a.view()),
            Value::I64(a) => Arg::I64(a.view()),
            Value::F32(a) => Arg::F32(a.view()),
            Value::F64(a) => Arg::F64(a.view()),
        }
    }
}

impl Arg<'_> {
    /// The dtype.
    pub fn dtype(&self) -> DType {
        match self {
            Arg::Bool(_) => DType::Bool,
            Arg::U8(_) => DType::U8,
            Arg::I8(_) => DType::I8,
            Arg::I16(_) => DType::I16,
            Arg::I32(_) => DType::I32,
            Arg::I64(_) => DType::I64,
            Arg::F32(_) => DType::F32,
            Arg::F64(_) => DType::F64,
        }
    }

    fn arr(&self) -> Arr {
        macro_rules! mk {
            ($a:expr) => {
                Arr {
                    ptr: $a.as_ptr() as *mut u8,
                    shape: $a.shape().into(),
                    strides: $a.strides().into(),
                    dtype: self.dtype(),
                    buf: None,
                }
            };
        }
        match self {
            Arg::Bool(a) => mk!(a),
            Arg::U8(a) => mk!(a),
            Arg::I8(a) => mk!(a),
            Arg::I16(a) => mk!(a),
            Arg::I32(a) => mk!(a),
            Arg::I64(a) => mk!(a),
            Arg::F32(a) => mk!(a),
            Arg::F64(a) => mk!(a),
        }
    }
}

/// The compiled module and plan, shared by the Functions of structurally identical graphs.
#[derive(Debug)]
pub struct Compiled {
    pub(crate) plan: Plan,
    pub(crate) code: JitCode,
    /// Intermediate buffers kept between calls.
    pub(crate) pool: BufferPool,
}

/// Per-node run times of one call, in schedule order.
#[derive(Debug, Clone)]
pub struct RunProfile {
    /// (node display name, time) per step.
    pub nodes: Vec<(String, Duration)>,
    /// Whole call.
    pub total: Duration,
    /// Peak bytes of the buffers the call allocated (intermediates and
    /// results, not caller inputs or constants), sampled after each step.
    pub peak_bytes: usize,
}

/// A compiled, callable graph.
#[derive(Debug, Clone)]
pub struct Function {
    pub(crate) compiled: Arc<Compiled>,
    pub(crate) par: ParallelOptions,
    /// How the Function was compiled.
    pub profile: CompileProfile,
}

impl Function {
    fn prepare(&self, inputs: &[Arg<'_>]) -> Result<Vec<Arr>> {
        let plan = &self.compiled.plan;
        if inputs.len() != plan.inputs.len() {
            return Err(Error::Input(format!(
                "expected {} inputs, got {}",
                plan.inputs.len(),
                inputs.len()
            )));
        }
        inputs
            .iter()
            .enumerate()
            .map(|(k, a)| {
                let arr = a.arr();
                let (ty, name) = &plan.inputs[k];
                check(k, ty, name.as_deref(), &arr)?;
                Ok(arr)
            })
            .collect()
    }

    fn run(&self, inputs: &[Arg<'_>], profile: bool) -> Result<(Vec<Value>, Option<CallStats>)> {
        let arrs = self.prepare(inputs)?;
        let c = &*self.compiled;
        let exec = Exec::new(&c.plan, &c.code, self.par, &c.pool, arrs, profile);
        let (outs, times) = exec.run()?;
        // Results are taken from their buffers when uniquely owned, else copied.
        let vals = outs
            .into_iter()
            .map(|a| to_value(&c.plan, &c.code, self.par, a))
            .collect::<Result<_>>()?;
        Ok((vals, times))
    }

    /// Evaluates the graph on `inputs`; results are freshly owned arrays.
    pub fn call(&self, inputs: &[Arg<'_>]) -> Result<Vec<Value>> {
        Ok(self.run(inputs, false)?.0)
    }

    /// Like [`Function::call`] on values.
    pub fn call_values(&self, inputs: &[Value]) -> Result<Vec<Value>> {
        let args: Vec<Arg<'_>> = inputs.iter().map(Arg::from).collect();
        self.call(&args)
    }

    /// Evaluates into caller-provided values: an output whose dtype and shape
    /// already match is overwritten in place (its allocation is kept), any
    /// other is replaced. `outputs.len()` must equal the number of outputs.
    pub fn call_into(&self, inputs: &[Arg<'_>], outputs: &mut [Value]) -> Result<()> {
        if outputs.len() != self.compiled.plan.outputs.len() {
            return Err(Error::Input(format!(
                "expected {} output buffers, got {}",
                self.compiled.plan.outputs.len(),
                outputs.len()
            )));
        }
        let res = self.call(inputs)?;
        for (dst, src) in outputs.iter_mut().zip(res) {
            let fits = dst.dtype() == src.dtype() && dst.shape() == src.shape();
            if fits {
                match (dst, &src) {
                    (Value::Bool(d), Value::Bool(s)) => d.assign(s),
                    (Value::U8(d), Value::U8(s)) => d.assign(s),
                    (Value::I8(d), Value::I8(s)) => d.assign(s),
                    (Value::I16(d), Value::I16(s)) => d.assign(s),
                    (Value::I32(d), Value::I32(s)) => d.assign(s),
                    (Value::I64(d), Value::I64(s)) => d.assign(s),
                    (Value::F32(d), Value::F32(s)) => d.assign(s),
                    (Value::F64(d), Value::F64(s)) => d.assign(s),
                    _ => unreachable!("dtypes checked"),
                }
            } else {
                *dst = src;
            }
        }
        Ok(())
    }

    /// Evaluates and reports the run time of every node.
    pub fn call_profiled(&self, inputs: &[Arg<'_>]) -> Result<(Vec<Value>, RunProfile)> {
        let t = std::time::Instant::now();
        let (vals, prof) = self.run(inputs, true)?;
        let CallStats { times, peak_bytes } = prof.unwrap_or_default();
        let names = self.compiled.plan.steps.iter().map(|(_, n, _)| n.clone());
        let nodes = names.zip(times).collect();
        Ok((
            vals,
            RunProfile {
                nodes,
                total: t.elapsed(),
                peak_bytes,
            },
        ))
    }

    /// Number of inputs.
    pub fn n_inputs(&self) -> usize {
        self.compiled.plan.inputs.len()
    }

    /// Output dtypes.
    pub fn output_dtypes(&self) -> &[DType] {
        &self.compiled.plan.output_dtypes
    }

    /// Sets the parallel-split threshold (elements; 0 disables splitting).
    pub fn with_parallel_threshold(mut self, threshold: usize) -> Self {
        self.par.threshold = threshold;
        self
    }
}
