//! JIT module management: host-ISA detection, one `JITModule` per compiled
//! Function, symbol registration, and freeing the code when the Function
//! goes away.
//!
//! Invariants: a [`JitBuilder`] defines every kernel of one Function and is
//! finalized exactly once ([`JitBuilder::finish`]); the resulting
//! [`JitCode`] owns the module, and its function pointers stay valid until
//! it is dropped, when the code pages are released with `free_memory`.
//! `JITModule` is `Send` but not `Sync`, so it is kept behind a `Mutex` that
//! is only locked on drop; finalized code is immutable and may be called
//! from many threads at once.

use std::sync::{Arc, Mutex};

use cranelift_codegen::ir::{self, AbiParam, Signature};
use cranelift_codegen::isa::TargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module};
use rustc_hash::FxHashMap;

use super::mathcalls;
use crate::error::{Error, Result};

/// Code-generation settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CodegenOptions {
    /// Run Cranelift's IR verifier (slower compiles; on in debug builds by default).
    pub verify: bool,
    /// Use the single-pass register allocator instead of the backtracking
    /// one for functions of small scalar programs (larger programs keep the
    /// backtracking one: `linker::compile::SINGLE_PASS_MAX_NODES`). Off by
    /// default: it compiles the suite's kernels 1.2-1.4x faster (about
    /// 0.2-0.9 ms less per workload), but it spills loop-carried values, and
    /// interleaved runs (`kiln bench`, 4e6 f64, AVX2) were slower with it:
    /// `sum(x > 0)` 6.9 vs 1.6 ms, `sum(abs(x))` 2.5 vs 1.6, `exp(x)*2+1`
    /// 4.7 vs 3.8, sigmoid_xent 42 vs 36.
    pub single_pass_regalloc: bool,
    /// Run Cranelift's optimising mid-end (`opt_level=speed`: e-graph
    /// rewrites, GVN, loop-invariant code motion) instead of `opt_level=none`.
    /// Off by default: the kernel builders already emit hoisted constants
    /// and shared subexpressions, and with the backtracking allocator the
    /// mid-end bought no run time (the suite, 4e6-element element-wise,
    /// comparison, integer and f32 kernels and 2000×2000 row / column
    /// reductions, interleaved `kiln bench` runs on AVX2: equal within the
    /// noise) while it costs 15-20% of code generation (poly 1.10 → 0.93 ms
    /// compile, outer_tanh 1.02 → 0.85, logsumexp 2.9 → 2.3). (With the
    /// single-pass allocator it was worth 15-20% of sigmoid_xent's run
    /// time.)
    pub optimize: bool,
}

impl Default for CodegenOptions {
    fn default() -> Self {
        CodegenOptions {
            verify: cfg!(debug_assertions),
            single_pass_regalloc: false,
            optimize: false,
        }
    }
}

/// Whether `KILN_DUMP_ASM` is set: every kernel's Cranelift IR and machine
/// code are then printed to standard error as it is compiled (read once).
fn dump_asm() -> bool {
    static DUMP: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DUMP.get_or_init(|| std::env::var_os("KILN_DUMP_ASM").is_some())
}

fn set(b: &mut settings::Builder, k: &str, v: &str) -> Result<()> {
    b.set(k, v)
        .map_err(|e| Error::Compile(format!("cranelift setting {k}={v}: {e}")))
}

/// The Cranelift ISA of the host CPU, or `Error::Compile` on an unsupported host.
pub fn host_isa(opts: &CodegenOptions) -> Result<Arc<dyn TargetIsa>> {
    let triple = target_lexicon::HOST;
    if triple.pointer_width().map(|w| w.bits()) != Ok(64) {
        return Err(Error::Compile(format!(
            "unsupported host {triple}: kiln needs a 64-bit target"
        )));
    }
    let mut flags = settings::builder();
    set(
        &mut flags,
        "opt_level",
        if opts.optimize { "speed" } else { "none" },
    )?;
    set(&mut flags, "is_pic", "false")?;
    set(
        &mut flags,
        "enable_verifier",
        if opts.verify { "true" } else { "false" },
    )?;
    if opts.single_pass_regalloc {
        set(&mut flags, "regalloc_algorithm", "single_pass")?;
    }
    let isa = cranelift_native::builder()
        .map_err(|e| Error::Compile(format!("unsupported host {triple}: {e}")))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| Error::Compile(format!("cannot build the ISA for host {triple}: {e}")))?;
    Ok(isa)
}

/// Builds the kernels of one Function into one module.
pub struct JitBuilder {
    /// The module being built.
    pub module: JITModule,
    /// Reusable codegen context.
    pub ctx: Context,
    /// Reusable frontend context.
    pub fctx: FunctionBuilderContext,
    imports: FxHashMap<&'static str, FuncId>,
    defined: Vec<FuncId>,
    /// Time spent in Cranelift code generation (`define_function`) so far.
    pub codegen_time: std::time::Duration,
}

impl JitBuilder {
    /// A new module for the host with every math symbol registered.
    pub fn new(opts: &CodegenOptions) -> Result<Self> {
        let isa = host_isa(opts)?;
        let mut jb = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
        for (name, ptr) in mathcalls::symbols() {
            jb.symbol(name, ptr);
        }
        let module = JITModule::new(jb);
        let ctx = module.make_context();
        Ok(JitBuilder {
            module,
            ctx,
            fctx: FunctionBuilderContext::new(),
            imports: FxHashMap::default(),
            defined: Vec::new(),
            codegen_time: Default::default(),
        })
    }

    /// The pointer type of the host.
    pub fn ptr_type(&self) -> ir::Type {
        self.module.target_config().pointer_type()
    }

    /// A signature with the host's default calling convention.
    pub fn signature(&self, params: &[ir::Type], returns: &[ir::Type]) -> Signature {
        let mut sig = self.module.make_signature();
        sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
        sig.returns
            .extend(returns.iter().map(|&t| AbiParam::new(t)));
        sig
    }

    /// Declares (once) an imported function.
    pub fn import(
        &mut self,
        name: &'static str,
        params: &[ir::Type],
        returns: &[ir::Type],
    ) -> Result<FuncId> {
        if let Some(&id) = self.imports.get(name) {
            return Ok(id);
        }
        let sig = self.signature(params, returns);
        let id = self
            .module
            .declare_function(name, Linkage::Import, &sig)
            .map_err(|e| Error::Compile(format!("declaring {name}: {e}")))?;
        self.imports.insert(name, id);
        Ok(id)
    }

    /// Compiles the function currently in `self.ctx` under a fresh local
    /// name and returns its index for [`JitCode::ptr`].
    pub fn define_current(&mut self, name: &str) -> Result<usize> {
        let sig = self.ctx.func.signature.clone();
        let id = self
            .module
            .declare_anonymous_function(&sig)
            .map_err(|e| Error::Compile(format!("declaring kernel {name}: {e}")))?;
        let t = std::time::Instant::now();
        let dump = dump_asm();
        if dump {
            self.ctx.set_disasm(true);
            eprintln!("=== kernel {name}\n{}", self.ctx.func.display());
        }
        self.module
            .define_function(id, &mut self.ctx)
            .map_err(|e| {
                Error::Compile(format!(
                    "code generation for kernel {name} failed: {e:?}\n{}",
                    self.ctx.func.display()
                ))
            })?;
        self.codegen_time += t.elapsed();
        if dump {
            if let Some(asm) = self.ctx.compiled_code().and_then(|c| c.vcode.as_deref()) {
                eprintln!("{asm}");
            }
        }
        self.module.clear_context(&mut self.ctx);
        self.defined.push(id);
        Ok(self.defined.len() - 1)
    }

    /// Finalizes the module: links the code and returns the callable kernels.
    pub fn finish(mut self) -> Result<JitCode> {
        self.module
            .finalize_definitions()
            .map_err(|e| Error::Compile(format!("linking kernels: {e}")))?;
        let ptrs = self
            .defined
            .iter()
            .map(|&id| self.module.get_finalized_function(id) as usize)
            .collect();
        Ok(JitCode {
            module: Mutex::new(Some(self.module)),
            ptrs,
        })
    }
}

/// The finalized code of one Function; frees its memory on drop.
pub struct JitCode {
    module: Mutex<Option<JITModule>>,
    ptrs: Vec<usize>,
}

impl JitCode {
    /// The address of kernel `i` (as returned by [`JitBuilder::define_current`]).
    pub fn ptr(&self, i: usize) -> *const u8 {
        self.ptrs[i] as *const u8
    }
}

impl std::fmt::Debug for JitCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JitCode({} kernels)", self.ptrs.len())
    }
}

impl Drop for JitCode {
    fn drop(&mut self) {
        let module = self
            .module
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(m) = module {
            // SAFETY: the only pointers into this module's code are in
            // `self.ptrs`, which die with `self`; every Function that could
            // call them holds an `Arc` to the owner of this `JitCode`, so no
            // call can be running or start after this point.
            unsafe { m.free_memory() };
        }
    }
}
