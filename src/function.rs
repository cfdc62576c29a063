//! The compilation pipeline, from user tensors to a callable native function:
//! build a FunctionGraph, rewrite it with the optdb under a [`Mode`], lower
//! and JIT-compile it with the linker, and keep the profiles of each stage.
//!
//! ```no_run
//! use kiln::{function, vector, DType, Value};
//! use kiln::rewriting::Mode;
//! let x = vector("x", DType::F64);
//! let f = function(&[x.clone()], &[(1.0 + x.exp()).log()]).mode(Mode::fast_run()).compile()?;
//! let y = f.call_values(&[Value::F64(ndarray::arr1(&[0.0, 800.0]).into_dyn())])?;
//! println!("{}", f.profile());
//! # Ok::<(), kiln::Error>(())
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::graph::{FunctionGraph, Value};
use crate::linker::{self, Arg, ArgMut, CompileOptions, CompileProfile, RunProfile};
use crate::rewrites::rewrite_graph;
use crate::rewriting::{FunctionProfile, Mode, RewriterProfile};
use crate::tensor::Tensor;

/// Configures and compiles a function (see [`function`]).
#[derive(Debug, Clone)]
pub struct FunctionBuilder {
    inputs: Vec<Tensor>,
    outputs: Vec<Tensor>,
    mode: Mode,
    mutable: Vec<usize>,
    options: CompileOptions,
    message: String,
}

/// Starts compiling a function of `inputs` computing `outputs` (FAST_RUN by default).
pub fn function(inputs: &[Tensor], outputs: &[Tensor]) -> FunctionBuilder {
    FunctionBuilder {
        inputs: inputs.to_vec(),
        outputs: outputs.to_vec(),
        mode: Mode::fast_run(),
        mutable: Vec::new(),
        options: CompileOptions::default(),
        message: String::from("kiln::function"),
    }
}

impl FunctionBuilder {
    /// The rewriting mode (`Mode::fast_run()`, `Mode::none()`, any query).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Declares inputs (by position) that inplace rewrites may overwrite.
    /// The compiled function writes into such an input's array only when
    /// the caller lends it mutably ([`CompiledFunction::call_mut`]); an
    /// array lent read-only is copied first and never written.
    pub fn mutable_inputs(mut self, positions: &[usize]) -> Self {
        self.mutable = positions.to_vec();
        self
    }

    /// Linker options (threads threshold, cache, code generation settings).
    pub fn options(mut self, options: CompileOptions) -> Self {
        self.options = options;
        self
    }

    /// A label shown in the function profile.
    pub fn message(mut self, message: &str) -> Self {
        self.message = message.to_string();
        self
    }

    /// Builds, rewrites and compiles.
    pub fn compile(self) -> Result<CompiledFunction> {
        let start = Instant::now();
        let mut fg = FunctionGraph::new(&self.inputs, &self.outputs)?;
        for &k in &self.mutable {
            let v = *fg.inputs().get(k).ok_or_else(|| {
                Error::Graph(format!(
                    "mutable input {k} does not exist (the function has {} inputs)",
                    self.inputs.len()
                ))
            })?;
            fg.declare_mutable(v)?;
        }
        let nodes_before = fg.n_nodes();
        let t_rewrite = Instant::now();
        let rewrite_profile = rewrite_graph(&mut fg, &self.mode)?;
        let rewriter_time = t_rewrite.elapsed();
        let function = linker::compile(&fg, &self.options)?;
        let cp = &function.profile;
        let profile = FunctionProfile {
            message: self.message,
            calls: 0,
            call_time: Duration::ZERO,
            total_compile_time: start.elapsed(),
            apply_nodes: fg.n_nodes(),
            rewriter_time,
            validate_time: kiln_runtime::clock::rate().duration(fg.stats.validate_ticks),
            linker_time: cp.lower + cp.codegen,
            import_time: cp.codegen,
        };
        Ok(CompiledFunction {
            function,
            profile,
            rewrite_profile,
            graph: fg,
            nodes_before,
            calls: AtomicU64::new(0),
            call_nanos: AtomicU64::new(0),
        })
    }
}

/// A compiled function with the rewritten graph and the profiles of its compilation.
///
/// `Send + Sync`: it may be called from several threads at once.
#[derive(Debug)]
pub struct CompiledFunction {
    function: linker::Function,
    profile: FunctionProfile,
    rewrite_profile: RewriterProfile,
    graph: FunctionGraph,
    nodes_before: usize,
    calls: AtomicU64,
    call_nanos: AtomicU64,
}

impl CompiledFunction {
    /// Calls the function on arrays or views of any layout.
    pub fn call(&self, inputs: &[Arg<'_>]) -> Result<Vec<Value>> {
        let t = Instant::now();
        let r = self.function.call(inputs);
        self.count(t);
        r
    }

    /// Calls the function, overwriting inputs declared mutable (and
    /// destroyed by an inplace node) in the caller's arrays when lent
    /// mutably; see [`linker::Function::call_mut`].
    pub fn call_mut(&self, inputs: &mut [ArgMut<'_>]) -> Result<Vec<Value>> {
        let t = Instant::now();
        let r = self.function.call_mut(inputs);
        self.count(t);
        r
    }

    /// [`CompiledFunction::call_mut`] reporting the time of every node.
    pub fn call_mut_profiled(&self, inputs: &mut [ArgMut<'_>]) -> Result<(Vec<Value>, RunProfile)> {
        let t = Instant::now();
        let r = self.function.call_mut_profiled(inputs);
        self.count(t);
        r
    }

    /// Calls the function on owned values.
    pub fn call_values(&self, inputs: &[Value]) -> Result<Vec<Value>> {
        let t = Instant::now();
        let r = self.function.call_values(inputs);
        self.count(t);
        r
    }

    /// Hands back a result the caller no longer needs, for the next call's
    /// result to reuse its block; see [`linker::Function::recycle`].
    pub fn recycle(&self, result: Value) {
        self.function.recycle(result);
    }

    /// Calls the function, writing into `outputs` (reused when dtype and
    /// shape match, written by the producing kernel when the memory plan
    /// allows); see [`linker::Function::call_into`].
    pub fn call_into(&self, inputs: &[Arg<'_>], outputs: &mut [Value]) -> Result<()> {
        let t = Instant::now();
        let r = self.function.call_into(inputs, outputs);
        self.count(t);
        r
    }

    /// [`CompiledFunction::call_into`] writing into mutable views the
    /// caller lends (arrays it does not own as `Value`s, e.g. numpy's); every
    /// output must have its result's dtype and shape; see
    /// [`linker::Function::call_into_views`].
    pub fn call_into_views(&self, inputs: &[Arg<'_>], outputs: &mut [ArgMut<'_>]) -> Result<()> {
        let t = Instant::now();
        let r = self.function.call_into_views(inputs, outputs);
        self.count(t);
        r
    }

    /// [`CompiledFunction::call_into`] with the mutable inputs of
    /// [`CompiledFunction::call_mut`].
    pub fn call_mut_into(&self, inputs: &mut [ArgMut<'_>], outputs: &mut [Value]) -> Result<()> {
        let t = Instant::now();
        let r = self.function.call_mut_into(inputs, outputs);
        self.count(t);
        r
    }

    /// [`CompiledFunction::call_into`] reporting the time of every node.
    pub fn call_into_profiled(
        &self,
        inputs: &[Arg<'_>],
        outputs: &mut [Value],
    ) -> Result<RunProfile> {
        let t = Instant::now();
        let r = self.function.call_into_profiled(inputs, outputs);
        self.count(t);
        r
    }

    /// Calls the function and reports the time of every node.
    pub fn call_profiled(&self, inputs: &[Arg<'_>]) -> Result<(Vec<Value>, RunProfile)> {
        let t = Instant::now();
        let r = self.function.call_profiled(inputs);
        self.count(t);
        r
    }

    fn count(&self, t: Instant) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.call_nanos
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    /// The function profile (compile times, node count, calls so far), in the seeds' format.
    pub fn profile(&self) -> FunctionProfile {
        let mut p = self.profile.clone();
        p.calls = self.calls.load(Ordering::Relaxed) as usize;
        p.call_time = Duration::from_nanos(self.call_nanos.load(Ordering::Relaxed));
        p
    }

    /// The rewriter profile (per-rewriter times, passes, the rewrite log).
    pub fn rewrite_profile(&self) -> &RewriterProfile {
        &self.rewrite_profile
    }

    /// Blocks until the compiled kernels run their final code (see
    /// [`linker::Function::wait_final`]); calls need not wait.
    pub fn wait_final(&self) -> bool {
        self.function.wait_final()
    }

    /// The lowering profile (how each node was compiled, lowering and codegen time).
    pub fn compile_profile(&self) -> &CompileProfile {
        &self.function.profile
    }

    /// The rewritten graph that was compiled.
    pub fn graph(&self) -> &FunctionGraph {
        &self.graph
    }

    /// Apply nodes before rewriting.
    pub fn nodes_before(&self) -> usize {
        self.nodes_before
    }

    /// The underlying linker function.
    pub fn linked(&self) -> &linker::Function {
        &self.function
    }
}
