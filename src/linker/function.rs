//! The callable [`Function`] and its argument types [`Arg`] and [`ArgMut`].
//!
//! A Function is immutable after compilation and shares its compiled module
//! through an `Arc` (possibly with other Functions, via the compile cache).
//! Each call validates its inputs, runs the plan with call-local state and
//! returns freshly owned results, so a Function is `Send + Sync` and can be
//! called from many threads at once.
//!
//! Mutable inputs: when an input declared mutable is destroyed by an inplace
//! node (`Plan::destroyed_inputs`), [`Function::call_mut`] writes into the
//! caller's array if it was lent mutably ([`ArgMut`]'s array variants). An
//! array lent read-only (every [`Arg`] of [`Function::call`], and
//! [`ArgMut::Ref`]) is never written: the call copies it into a buffer of its
//! own first, which the inplace node then overwrites (the copy counts in
//! [`RunProfile::peak_bytes`]). Inputs not declared mutable are only read,
//! however they are lent. Results never alias a caller's array.
//!
//! Output arrays: [`Function::call_into`] (and [`Function::call_mut_into`])
//! take one caller array per output. When an output is the whole buffer of
//! a node output (the graph's memory plan: not a view, not an input or
//! constant; inplace chains count, see `plan::memory::output_destinations`) and the
//! caller's array has its dtype, shape and standard layout, the producing
//! step (element-wise kernel, `Alloc`, floating-point GEMM) writes straight
//! into the caller's array: no allocation, no copy. Any other output whose
//! dtype and shape match is copied into the caller's array (any layout; its
//! allocation is kept); an output that does not match replaces the value.

use std::sync::Arc;
use std::time::Duration;

use ndarray::{ArrayD, ArrayViewD, ArrayViewMutD};

use super::buffer::{Arr, BufferPool};
use super::codegen::jit::JitCode;
use super::compile::CompileProfile;
use super::exec::{copy, copy_into, to_value, CallStats, Exec, ParallelOptions};
use super::plan::Plan;
use crate::error::{Error, Result};
use crate::graph::{DType, TensorType, Value};

/// A call argument: a borrowed array of any supported dtype and any layout.
#[derive(Debug, Clone)]
#[allow(missing_docs)] // one variant per dtype
pub enum Arg<'a> {
    Bool(ArrayViewD<'a, bool>),
    U8(ArrayViewD<'a, u8>),
    I8(ArrayViewD<'a, i8>),
    U16(ArrayViewD<'a, u16>),
    I16(ArrayViewD<'a, i16>),
    U32(ArrayViewD<'a, u32>),
    U64(ArrayViewD<'a, u64>),
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
arg_from!(u16, U16);
arg_from!(i16, I16);
arg_from!(u32, U32);
arg_from!(u64, U64);
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
            Value::U64(a) => Arg::U64(a.view()),
            Value::U32(a) => Arg::U32(a.view()),
            Value::U16(a) => Arg::U16(a.view()),
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
            Arg::U64(_) => DType::U64,
            Arg::U32(_) => DType::U32,
            Arg::U16(_) => DType::U16,
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
            Arg::U64(a) => mk!(a),
            Arg::U32(a) => mk!(a),
            Arg::U16(a) => mk!(a),
            Arg::I32(a) => mk!(a),
            Arg::I64(a) => mk!(a),
            Arg::F32(a) => mk!(a),
            Arg::F64(a) => mk!(a),
        }
    }
}

/// A call argument of [`Function::call_mut`]: an array lent read-only, or
/// lent mutably so that the function may overwrite it when the input is
/// declared mutable and an inplace node destroys it (see the module docs).
#[derive(Debug)]
#[allow(missing_docs)] // one variant per dtype
pub enum ArgMut<'a> {
    /// Lent read-only: never written.
    Ref(Arg<'a>),
    Bool(ArrayViewMutD<'a, bool>),
    U8(ArrayViewMutD<'a, u8>),
    I8(ArrayViewMutD<'a, i8>),
    U16(ArrayViewMutD<'a, u16>),
    I16(ArrayViewMutD<'a, i16>),
    U32(ArrayViewMutD<'a, u32>),
    U64(ArrayViewMutD<'a, u64>),
    I32(ArrayViewMutD<'a, i32>),
    I64(ArrayViewMutD<'a, i64>),
    F32(ArrayViewMutD<'a, f32>),
    F64(ArrayViewMutD<'a, f64>),
}

macro_rules! arg_mut_from {
    ($t:ty, $v:ident) => {
        impl<'a> From<&'a mut ArrayD<$t>> for ArgMut<'a> {
            fn from(a: &'a mut ArrayD<$t>) -> Self {
                ArgMut::$v(a.view_mut())
            }
        }
        impl<'a> From<ArrayViewMutD<'a, $t>> for ArgMut<'a> {
            fn from(a: ArrayViewMutD<'a, $t>) -> Self {
                ArgMut::$v(a)
            }
        }
        impl<'a> From<&'a ArrayD<$t>> for ArgMut<'a> {
            fn from(a: &'a ArrayD<$t>) -> Self {
                ArgMut::Ref(Arg::$v(a.view()))
            }
        }
    };
}
arg_mut_from!(bool, Bool);
arg_mut_from!(u8, U8);
arg_mut_from!(i8, I8);
arg_mut_from!(u16, U16);
arg_mut_from!(i16, I16);
arg_mut_from!(u32, U32);
arg_mut_from!(u64, U64);
arg_mut_from!(i32, I32);
arg_mut_from!(i64, I64);
arg_mut_from!(f32, F32);
arg_mut_from!(f64, F64);

impl<'a> From<Arg<'a>> for ArgMut<'a> {
    fn from(a: Arg<'a>) -> Self {
        ArgMut::Ref(a)
    }
}

impl<'a> From<&'a Value> for ArgMut<'a> {
    fn from(v: &'a Value) -> Self {
        ArgMut::Ref(Arg::from(v))
    }
}

impl<'a> From<&'a mut Value> for ArgMut<'a> {
    fn from(v: &'a mut Value) -> Self {
        match v {
            Value::Bool(a) => ArgMut::Bool(a.view_mut()),
            Value::U8(a) => ArgMut::U8(a.view_mut()),
            Value::I8(a) => ArgMut::I8(a.view_mut()),
            Value::I16(a) => ArgMut::I16(a.view_mut()),
            Value::U64(a) => ArgMut::U64(a.view_mut()),
            Value::U32(a) => ArgMut::U32(a.view_mut()),
            Value::U16(a) => ArgMut::U16(a.view_mut()),
            Value::I32(a) => ArgMut::I32(a.view_mut()),
            Value::I64(a) => ArgMut::I64(a.view_mut()),
            Value::F32(a) => ArgMut::F32(a.view_mut()),
            Value::F64(a) => ArgMut::F64(a.view_mut()),
        }
    }
}

impl ArgMut<'_> {
    /// The array, and whether it was lent mutably.
    fn arr(&mut self) -> (Arr, bool) {
        macro_rules! mk {
            ($a:expr, $d:ident) => {
                Arr {
                    ptr: $a.as_mut_ptr() as *mut u8,
                    shape: $a.shape().into(),
                    strides: $a.strides().into(),
                    dtype: DType::$d,
                    buf: None,
                }
            };
        }
        let a = match self {
            ArgMut::Ref(a) => return (a.arr(), false),
            ArgMut::Bool(a) => mk!(a, Bool),
            ArgMut::U8(a) => mk!(a, U8),
            ArgMut::I8(a) => mk!(a, I8),
            ArgMut::I16(a) => mk!(a, I16),
            ArgMut::U64(a) => mk!(a, U64),
            ArgMut::U32(a) => mk!(a, U32),
            ArgMut::U16(a) => mk!(a, U16),
            ArgMut::I32(a) => mk!(a, I32),
            ArgMut::I64(a) => mk!(a, I64),
            ArgMut::F32(a) => mk!(a, F32),
            ArgMut::F64(a) => mk!(a, F64),
        };
        (a, true)
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
    /// Peak bytes of the buffers the call allocated: intermediates
    /// (including the ones returned as results, since an inplace result
    /// lives in an intermediate's buffer) and copies of mutable inputs lent
    /// read-only; not the caller's arrays (inputs, and the output arrays of
    /// [`Function::call_into_profiled`], which are written in place, not
    /// allocated) or constants. Sampled after each
    /// step, before its dead inputs are released; a buffer shared by views
    /// and inplace outputs counts once.
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
    /// Checks the inputs (each with whether the caller lent it mutably) and
    /// copies every destroyed input that was lent read-only.
    fn prepare(&self, inputs: Vec<(Arr, bool)>) -> Result<Vec<Arr>> {
        let c = &*self.compiled;
        let plan = &c.plan;
        if inputs.len() != plan.inputs.len() {
            return Err(Error::Input(format!(
                "expected {} inputs, got {}",
                plan.inputs.len(),
                inputs.len()
            )));
        }
        inputs
            .into_iter()
            .enumerate()
            .map(|(k, (arr, writable))| {
                let (ty, name) = &plan.inputs[k];
                check(k, ty, name.as_deref(), &arr)?;
                if !writable && plan.destroyed_inputs.contains(&k) {
                    return copy(self.par, &self.compiled.pool, &arr);
                }
                Ok(arr)
            })
            .collect()
    }

    fn run(
        &self,
        inputs: Vec<(Arr, bool)>,
        profile: bool,
    ) -> Result<(Vec<Value>, Option<CallStats>)> {
        let arrs = self.prepare(inputs)?;
        let c = &*self.compiled;
        let exec = Exec::new(&c.plan, &c.code, self.par, &c.pool, arrs, profile);
        let (outs, times) = exec.run()?;
        // Results are taken from their buffers when uniquely owned, else copied.
        let vals = outs
            .into_iter()
            .map(|a| to_value(self.par, &c.pool, a))
            .collect::<Result<_>>()?;
        Ok((vals, times))
    }

    /// Blocks until the kernels run their final code (code generation is
    /// tiered, see [`Tiering`](super::Tiering)):
    /// at once when the Function was compiled untiered, else until the
    /// background second tier is installed. Calls need not wait: they run
    /// the first tier's code until then, with the same results. False only
    /// when the first tier's code stays in use: the second tier failed, or
    /// this is a forked child of the process that compiled the Function
    /// before its second tier was installed.
    pub fn wait_final(&self) -> bool {
        self.compiled.code.wait_final()
    }

    /// Hands back a result of an earlier call that the caller no longer
    /// needs: its block joins the Function's buffer pool (bounded, see
    /// [`BufferPool`]), and the next result of the same dtype and size is
    /// written into it instead of into a fresh allocation, which the first
    /// write would fault in page by page. `call_into` avoids the allocation
    /// altogether; this serves callers that must hand out owned results,
    /// such as the Python package, whose numpy arrays give their block back
    /// when freed. Any value is accepted: one that is small, or that does
    /// not own exactly its block, is simply dropped.
    pub fn recycle(&self, result: Value) {
        self.compiled.pool.give_value(result);
    }

    /// Evaluates the graph on `inputs`; results are freshly owned arrays.
    /// The inputs are never written (a destroyed mutable input is copied).
    pub fn call(&self, inputs: &[Arg<'_>]) -> Result<Vec<Value>> {
        Ok(self.run(read_only(inputs), false)?.0)
    }

    /// Like [`Function::call`], but an input declared mutable that an
    /// inplace node destroys is overwritten in the caller's array when lent
    /// mutably (no copy); its contents afterwards are unspecified. Other
    /// inputs are only read.
    pub fn call_mut(&self, inputs: &mut [ArgMut<'_>]) -> Result<Vec<Value>> {
        let arrs = inputs.iter_mut().map(ArgMut::arr).collect();
        Ok(self.run(arrs, false)?.0)
    }

    /// [`Function::call_mut`] reporting the run time of every node, as
    /// [`Function::call_profiled`] does.
    pub fn call_mut_profiled(&self, inputs: &mut [ArgMut<'_>]) -> Result<(Vec<Value>, RunProfile)> {
        let arrs = inputs.iter_mut().map(ArgMut::arr).collect();
        self.profiled(arrs)
    }

    /// Like [`Function::call`] on values.
    pub fn call_values(&self, inputs: &[Value]) -> Result<Vec<Value>> {
        let args: Vec<Arg<'_>> = inputs.iter().map(Arg::from).collect();
        self.call(&args)
    }

    /// Evaluates into caller-provided values, reusing their allocations:
    /// see the module docs for which outputs are written in place by their
    /// producing kernel and which are copied; an output whose dtype or shape
    /// does not match the caller's value replaces it.
    /// `outputs.len()` must equal the number of outputs. Results are the
    /// same as [`Function::call`]'s.
    pub fn call_into(&self, inputs: &[Arg<'_>], outputs: &mut [Value]) -> Result<()> {
        self.run_into(read_only(inputs), outputs, false).map(drop)
    }

    /// [`Function::call_into`] with the mutable inputs of
    /// [`Function::call_mut`].
    pub fn call_mut_into(&self, inputs: &mut [ArgMut<'_>], outputs: &mut [Value]) -> Result<()> {
        let arrs = inputs.iter_mut().map(ArgMut::arr).collect();
        self.run_into(arrs, outputs, false).map(drop)
    }

    /// [`Function::call_into`] reporting the run time of every node, as
    /// [`Function::call_profiled`] does; the caller's output arrays are not
    /// counted in [`RunProfile::peak_bytes`].
    pub fn call_into_profiled(
        &self,
        inputs: &[Arg<'_>],
        outputs: &mut [Value],
    ) -> Result<RunProfile> {
        let t = std::time::Instant::now();
        let stats = self.run_into(read_only(inputs), outputs, true)?;
        Ok(self.run_profile(stats, t))
    }

    /// [`Function::call_into`] writing into arrays the caller lends as
    /// mutable views (e.g. arrays owned by another runtime, such as numpy's)
    /// instead of owned values: a view cannot be replaced, so every output
    /// must have its result's dtype and shape (an [`Error::Input`] naming
    /// the output otherwise, raised after the computation, the views then
    /// untouched or partly written). An output lent read-only
    /// ([`ArgMut::Ref`]) is refused before the call. Results are the same as
    /// [`Function::call`]'s.
    pub fn call_into_views(&self, inputs: &[Arg<'_>], outputs: &mut [ArgMut<'_>]) -> Result<()> {
        if outputs.len() != self.compiled.plan.outputs.len() {
            return Err(Error::Input(format!(
                "expected {} output arrays, got {}",
                self.compiled.plan.outputs.len(),
                outputs.len()
            )));
        }
        let mut dst = Vec::with_capacity(outputs.len());
        for (k, o) in outputs.iter_mut().enumerate() {
            match o.arr() {
                (a, true) => dst.push(a),
                (_, false) => {
                    return Err(Error::Input(format!("output array {k} is lent read-only")))
                }
            }
        }
        let (outs, _) = self.exec_into(read_only(inputs), &dst, false)?;
        for (k, (a, d)) in outs.iter().zip(&dst).enumerate() {
            if a.dtype != d.dtype || a.shape != d.shape {
                return Err(Error::Input(format!(
                    "output array {k} is {} of shape {:?}, the result is {} of shape {:?}",
                    d.dtype, d.shape, a.dtype, a.shape
                )));
            }
        }
        for (a, d) in outs.iter().zip(&dst) {
            if !same_elements(a, d) {
                copy_into(self.par, a, d);
            }
        }
        Ok(())
    }

    fn run_into(
        &self,
        inputs: Vec<(Arr, bool)>,
        outputs: &mut [Value],
        profile: bool,
    ) -> Result<Option<CallStats>> {
        let c = &*self.compiled;
        let plan = &c.plan;
        if outputs.len() != plan.outputs.len() {
            return Err(Error::Input(format!(
                "expected {} output buffers, got {}",
                plan.outputs.len(),
                outputs.len()
            )));
        }
        // The caller's arrays, borrowed mutably for the whole call: they
        // overlap no input (the borrow checker keeps `inputs` and `outputs`
        // apart) and no other output array.
        let dst: Vec<Arr> = outputs.iter_mut().map(output_arr).collect();
        let (outs, stats) = self.exec_into(inputs, &dst, profile)?;
        // Outputs written in place are done; the others are copied into the
        // caller's array when they fit (an output may read another caller
        // array written in place, which is final by now), else they replace it.
        let mut replaced = Vec::new();
        for (k, (a, d)) in outs.into_iter().zip(&dst).enumerate() {
            if a.dtype != d.dtype || a.shape != d.shape {
                replaced.push((k, to_value(self.par, &self.compiled.pool, a)?));
            } else if !same_elements(&a, d) {
                copy_into(self.par, &a, d);
            }
        }
        drop(dst);
        for (k, v) in replaced {
            outputs[k] = v;
        }
        Ok(stats)
    }

    /// Runs the plan with the caller's output arrays `dst` (one per output,
    /// writable, overlapping no input) as the destinations of the outputs
    /// the memory plan lets their producing step write in place; returns
    /// the outputs (some of them `dst`'s arrays).
    fn exec_into(
        &self,
        inputs: Vec<(Arr, bool)>,
        dst: &[Arr],
        profile: bool,
    ) -> Result<(Vec<Arr>, Option<CallStats>)> {
        let c = &*self.compiled;
        let plan = &c.plan;
        let arrs = self.prepare(inputs)?;
        let dests = plan
            .output_dests
            .iter()
            .zip(dst)
            .filter_map(|(d, a)| d.map(|s| (s, a.clone())))
            .collect();
        let exec = Exec::new(plan, &c.code, self.par, &c.pool, arrs, profile);
        exec.with_destinations(dests).run()
    }

    /// Evaluates and reports the run time of every node.
    pub fn call_profiled(&self, inputs: &[Arg<'_>]) -> Result<(Vec<Value>, RunProfile)> {
        self.profiled(read_only(inputs))
    }

    fn profiled(&self, inputs: Vec<(Arr, bool)>) -> Result<(Vec<Value>, RunProfile)> {
        let t = std::time::Instant::now();
        let (vals, prof) = self.run(inputs, true)?;
        Ok((vals, self.run_profile(prof, t)))
    }

    fn run_profile(&self, stats: Option<CallStats>, start: std::time::Instant) -> RunProfile {
        let CallStats { times, peak_bytes } = stats.unwrap_or_default();
        let names = self.compiled.plan.steps.iter().map(|(_, n, _)| n.clone());
        RunProfile {
            nodes: names.zip(times).collect(),
            total: start.elapsed(),
            peak_bytes,
        }
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

/// Arrays lent read-only.
fn read_only(inputs: &[Arg<'_>]) -> Vec<(Arr, bool)> {
    inputs.iter().map(|a| (a.arr(), false)).collect()
}

/// A caller's output value as a writable array the call does not own.
fn output_arr(v: &mut Value) -> Arr {
    let dtype = v.dtype();
    crate::with_value!(v, a => Arr {
        ptr: a.as_mut_ptr().cast::<u8>(),
        shape: a.shape().into(),
        strides: a.strides().into(),
        dtype,
        buf: None,
    })
}

/// True when `a` and `b` (same dtype and shape) address the same elements
/// in the same order: nothing to copy.
fn same_elements(a: &Arr, b: &Arr) -> bool {
    a.is_empty()
        || (a.ptr == b.ptr
            && a.shape
                .iter()
                .zip(&a.strides)
                .zip(&b.strides)
                .all(|((&n, &x), &y)| n <= 1 || x == y))
}

/// Checks an input against its declared type (message names the input).
fn check(k: usize, ty: &TensorType, name: Option<&str>, a: &Arr) -> Result<()> {
    crate::eval::check_input(k, name, ty, a.dtype, &a.shape)
}
