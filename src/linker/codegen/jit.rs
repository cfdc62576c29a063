//! JIT module management: host-ISA detection (capped by `KILN_ISA`), one `JITModule` per compiled
//! Function, symbol registration, code generation of its kernels (in
//! parallel when there are several), and freeing the code when the Function
//! goes away.
//!
//! Invariants: a [`JitBuilder`] defines every kernel of one Function and is
//! finalized exactly once ([`JitBuilder::finish`]), which generates the
//! machine code of every kernel handed over by
//! [`JitBuilder::define_current`] (each kernel's `Context` is independent,
//! so they compile on separate threads; the module then takes the bytes
//! and relocations one by one, in definition order); the resulting
//! [`JitCode`] owns the module, and its function pointers stay valid until
//! it is dropped, when the code pages are released with `free_memory`.
//! `JITModule` is `Send` but not `Sync`, so it is kept behind a `Mutex` that
//! is only locked on drop; finalized code is immutable and may be called
//! from many threads at once.

use std::sync::{Arc, Mutex};

use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::{self, AbiParam, Signature};
use cranelift_codegen::isa::TargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module, ModuleReloc};
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
    /// rewrites, GVN, loop-invariant code motion) on every kernel instead of
    /// only on those with an integer division or remainder. Off by default:
    /// the kernel builders already emit hoisted constants and shared
    /// subexpressions, and with the backtracking allocator the mid-end
    /// bought no run time on other kernels (the suite, 4e6-element
    /// element-wise, comparison, integer and f32 kernels and 2000×2000 row /
    /// column reductions, interleaved `kiln bench` runs on AVX2: equal
    /// within the noise) while it costs 15-20% of code generation (poly 1.10
    /// → 0.93 ms compile, outer_tanh 1.02 → 0.85, logsumexp 2.9 → 2.3).
    /// Integer division and remainder by a constant need it (it turns them
    /// into multiplications: `i // 3 + i % 4` on 4e6 i64 6.8-9.1 against
    /// 18.5 ms), so kernels that divide integers always get it.
    pub optimize: bool,
}

// Not derived: `verify` follows the build profile (`cfg!(debug_assertions)`,
// which is `false` in release builds, where clippy would call this derivable).
#[allow(clippy::derivable_impls)]
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
    let mut isa_builder = cranelift_native::builder()
        .map_err(|e| Error::Compile(format!("unsupported host {triple}: {e}")))?;
    cap_isa_flags(&mut isa_builder)?;
    let isa = isa_builder
        .finish(settings::Flags::new(flags))
        .map_err(|e| Error::Compile(format!("cannot build the ISA for host {triple}: {e}")))?;
    Ok(isa)
}

/// Lowers the detected host features to the `KILN_ISA` cap
/// (`kiln_runtime::math::requested_isa`), so that an AVX-512 machine can
/// measure the code an AVX2 machine would run: below `avx512` the AVX-512
/// encodings are off, below `avx2` also AVX, AVX2, FMA and BMI (Cranelift
/// keeps SSE4.2). An unrecognised value is an `Error::Compile` naming the
/// accepted ones.
fn cap_isa_flags(b: &mut cranelift_codegen::isa::Builder) -> Result<()> {
    use kiln_runtime::math::Isa;
    let Some(cap) = kiln_runtime::math::requested_isa().map_err(Error::Compile)? else {
        return Ok(());
    };
    if !cfg!(target_arch = "x86_64") {
        return Ok(());
    }
    let mut off: Vec<&str> = Vec::new();
    if cap < Isa::Avx512 {
        off.extend([
            "has_avx512bitalg",
            "has_avx512dq",
            "has_avx512vl",
            "has_avx512vbmi",
            "has_avx512f",
            "has_avx512vnni",
        ]);
    }
    if cap < Isa::Avx2 {
        off.extend([
            "has_avx",
            "has_avx2",
            "has_fma",
            "has_avx_vnni",
            "has_bmi1",
            "has_bmi2",
        ]);
    }
    for k in off {
        b.set(k, "false")
            .map_err(|e| Error::Compile(format!("cranelift setting {k}=false: {e}")))?;
    }
    Ok(())
}

/// Whether the function divides integers (`sdiv`, `udiv`, `srem`, `urem`):
/// such kernels are compiled with the optimising mid-end, which turns a
/// division by a constant into a multiplication.
fn divides_integers(func: &ir::Function) -> bool {
    use ir::Opcode::{Sdiv, Srem, Udiv, Urem};
    func.layout.blocks().any(|b| {
        func.layout
            .block_insts(b)
            .any(|i| matches!(func.dfg.insts[i].opcode(), Sdiv | Udiv | Srem | Urem))
    })
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
    /// Kernels declared and built, in definition order, waiting for code
    /// generation in [`JitBuilder::finish`]: (name, id, IR).
    pending: Vec<(String, FuncId, Context)>,
    /// The ISA with the optimising mid-end, for kernels that divide
    /// integers (the module's own ISA when `optimize` is set).
    optimizing: Arc<dyn TargetIsa>,
}

impl JitBuilder {
    /// A new module for the host with every math symbol registered.
    pub fn new(opts: &CodegenOptions) -> Result<Self> {
        let isa = host_isa(opts)?;
        let optimizing = if opts.optimize {
            isa.clone()
        } else {
            host_isa(&CodegenOptions {
                optimize: true,
                ..*opts
            })?
        };
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
            pending: Vec::new(),
            optimizing,
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

    /// Declares the function currently in `self.ctx` under a fresh local
    /// name, hands its IR over for code generation in [`JitBuilder::finish`]
    /// (leaving a fresh context) and returns its index for [`JitCode::ptr`].
    pub fn define_current(&mut self, name: &str) -> Result<usize> {
        let sig = self.ctx.func.signature.clone();
        let id = self
            .module
            .declare_anonymous_function(&sig)
            .map_err(|e| Error::Compile(format!("declaring kernel {name}: {e}")))?;
        let ctx = std::mem::replace(&mut self.ctx, self.module.make_context());
        self.pending.push((name.to_string(), id, ctx));
        Ok(self.pending.len() - 1)
    }

    /// Generates the machine code of every kernel (on up to
    /// [`kiln_runtime::parallel::num_threads`] threads), links it and
    /// returns the callable kernels.
    pub fn finish(mut self) -> Result<JitCode> {
        let dump = dump_asm();
        let mut pending = std::mem::take(&mut self.pending);
        if dump {
            for (name, _, ctx) in &mut pending {
                ctx.set_disasm(true);
                eprintln!("=== kernel {name}\n{}", ctx.func.display());
            }
        }
        let isas = [self.module.isa(), &*self.optimizing];
        let threads = kiln_runtime::parallel::num_threads().min(pending.len());
        let errors: Vec<Option<String>> = if threads <= 1 {
            pending.iter_mut().map(|k| generate(isas, k)).collect()
        } else {
            // Kernels are taken from a shared counter, so a long kernel
            // does not hold up the short ones behind it.
            let next = std::sync::atomic::AtomicUsize::new(0);
            let slots: Vec<Mutex<&mut (String, FuncId, Context)>> =
                pending.iter_mut().map(Mutex::new).collect();
            let errors: Vec<Mutex<Option<String>>> =
                slots.iter().map(|_| Mutex::new(None)).collect();
            let work = || loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(slot) = slots.get(i) else { break };
                let mut k = slot.lock().unwrap_or_else(|e| e.into_inner());
                let e = generate(isas, &mut k);
                *errors[i].lock().unwrap_or_else(|e| e.into_inner()) = e;
            };
            std::thread::scope(|s| {
                for _ in 1..threads {
                    s.spawn(work);
                }
                work();
            });
            errors
                .into_iter()
                .map(|e| e.into_inner().unwrap_or_else(|e| e.into_inner()))
                .collect()
        };
        if let Some(e) = errors.into_iter().flatten().next() {
            return Err(Error::Compile(e));
        }
        let mut ids = Vec::with_capacity(pending.len());
        for (name, id, ctx) in &pending {
            let code = ctx
                .compiled_code()
                .ok_or_else(|| Error::Compile(format!("kernel {name} was not compiled")))?;
            if dump {
                if let Some(asm) = code.vcode.as_deref() {
                    eprintln!("=== machine code of kernel {name}\n{asm}");
                }
            }
            let relocs: Vec<ModuleReloc> = code
                .buffer
                .relocs()
                .iter()
                .map(|r| ModuleReloc::from_mach_reloc(r, &ctx.func, *id))
                .collect();
            self.module
                .define_function_bytes(
                    *id,
                    u64::from(code.buffer.alignment),
                    code.code_buffer(),
                    &relocs,
                )
                .map_err(|e| Error::Compile(format!("defining kernel {name}: {e}")))?;
            ids.push(*id);
        }
        self.module
            .finalize_definitions()
            .map_err(|e| Error::Compile(format!("linking kernels: {e}")))?;
        let ptrs = ids
            .iter()
            .map(|&id| self.module.get_finalized_function(id) as usize)
            .collect();
        Ok(JitCode {
            module: Mutex::new(Some(self.module)),
            ptrs,
        })
    }
}

/// Generates one kernel's machine code into its context, with `isas[1]`
/// (the optimising mid-end) when it divides integers, else `isas[0]`; the
/// error text on failure. Both ISAs are the host's with the same flags but
/// the optimisation level, so their code shares one module's conventions.
fn generate(
    isas: [&dyn TargetIsa; 2],
    (name, _, ctx): &mut (String, FuncId, Context),
) -> Option<String> {
    let isa = isas[usize::from(divides_integers(&ctx.func))];
    let mut ctrl = ControlPlane::default();
    match ctx.compile(isa, &mut ctrl) {
        Ok(_) => None,
        Err(e) => Some(format!(
            "code generation for kernel {name} failed: {:?}\n{}",
            e.inner,
            e.func.display()
        )),
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

#[cfg(test)]
mod tests {
    use super::*;
    use cranelift_codegen::ir::{types, InstBuilder};
    use cranelift_frontend::FunctionBuilder;

    /// A function `(a, b) -> a op b` on i64.
    fn binary(op: fn(&mut FunctionBuilder<'_>, ir::Value, ir::Value) -> ir::Value) -> ir::Function {
        let mut sig = Signature::new(cranelift_codegen::isa::CallConv::SystemV);
        sig.params
            .extend([AbiParam::new(types::I64), AbiParam::new(types::I64)]);
        sig.returns.push(AbiParam::new(types::I64));
        let mut func = ir::Function::with_name_signature(ir::UserFuncName::default(), sig);
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut func, &mut fctx);
        let blk = b.create_block();
        b.append_block_params_for_function_params(blk);
        b.switch_to_block(blk);
        b.seal_block(blk);
        let (x, y) = (b.block_params(blk)[0], b.block_params(blk)[1]);
        let r = op(&mut b, x, y);
        b.ins().return_(&[r]);
        let isa = host_isa(&CodegenOptions::default()).unwrap();
        b.finalize(isa.frontend_config());
        func
    }

    #[test]
    fn integer_division_selects_the_optimising_mid_end() {
        assert!(divides_integers(&binary(|b, x, y| b.ins().sdiv(x, y))));
        assert!(divides_integers(&binary(|b, x, y| b.ins().urem(x, y))));
        assert!(!divides_integers(&binary(|b, x, y| b.ins().imul(x, y))));
    }

    /// Kernels compiled with either ISA link into one module and run: an
    /// integer division kernel (the optimising ISA) beside a product.
    #[test]
    fn kernels_of_both_isas_share_a_module() {
        let mut jb = JitBuilder::new(&CodegenOptions::default()).unwrap();
        jb.ctx.func = binary(|b, x, y| b.ins().sdiv(x, y));
        let div = jb.define_current("div").unwrap();
        jb.ctx.func = binary(|b, x, y| b.ins().imul(x, y));
        let mul = jb.define_current("mul").unwrap();
        let code = jb.finish().unwrap();
        // SAFETY: both kernels were built with the signature (i64, i64) -> i64
        // in the host's System V convention.
        let (d, m) = unsafe {
            (
                std::mem::transmute::<*const u8, extern "sysv64" fn(i64, i64) -> i64>(
                    code.ptr(div),
                ),
                std::mem::transmute::<*const u8, extern "sysv64" fn(i64, i64) -> i64>(
                    code.ptr(mul),
                ),
            )
        };
        assert_eq!(d(-17, 3), -5);
        assert_eq!(m(-17, 3), -51);
    }
}
