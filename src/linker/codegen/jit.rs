//! JIT module management: host-ISA detection (capped by `KILN_ISA`), one `JITModule` per compiled
//! Function, symbol resolution (through `mathcalls::lookup`), code generation of its kernels (in
//! parallel when there are several), and freeing the code when the Function
//! goes away.
//!
//! Code generation is tiered ([`Tiering`]): the first tier
//! allocates registers with Cranelift's single-pass allocator and leaves
//! out the unrolled copies of loops that only map values
//! (`FIRST_TIER_SKIP`), so that a Function is callable soon, and `tier`
//! generates the IR as built again with the backtracking allocator on a
//! background thread, then switches every kernel to that code. Both tiers
//! compute every value with the same instructions (register allocation
//! only adds moves and spills; a skipped unrolled loop leaves its elements
//! to the single-vector loop after it, which computes each the same way,
//! and no loop that carries an accumulator is skipped), so a kernel's
//! results do not depend on the tier that computed them.
//!
//! Invariants: a [`JitBuilder`] defines every kernel of one Function and is
//! finalized exactly once ([`JitBuilder::finish`]), which returns once the
//! machine code of every kernel handed over by
//! [`JitBuilder::define_current`] is generated (each kernel's IR is
//! independent, and each thread compiles in its own reused `Context`, so
//! they compile on separate threads, some while later
//! kernels are still being built, `overlap`; the module then takes the
//! bytes and relocations one by one, in definition order); the resulting
//! [`JitCode`] holds the kernels' address table (`tier::Tiers`), which owns
//! the module (and the second tier's, once installed); its function
//! pointers stay valid until the table is dropped, when the code pages are
//! released with `free_memory`. Finalized code is immutable and may be
//! called from many threads at once.

use std::sync::{Arc, Mutex};

use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::{self, AbiParam, Signature};
use cranelift_codegen::isa::TargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::{CompiledCode, Context};
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module, ModuleReloc};
use rustc_hash::FxHashMap;

use super::mathcalls;
use super::overlap::Overlap;
use super::tier::{self, Tiers};
use crate::error::{Error, Result};

/// Code-generation settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CodegenOptions {
    /// Run Cranelift's IR verifier (slower compiles; on in debug builds by default).
    pub verify: bool,
    /// Which register allocator generates the code, and when (see
    /// [`Tiering`]).
    pub tiering: Tiering,
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
    /// Merge each float matrix product into the one element-wise step that
    /// reads it, which then maps a product larger than the last-level
    /// cache block by block of rows while each block is in cache
    /// (`plan::epilogue`; on by default, off to measure its effect).
    pub epilogues: bool,
    /// Let a transcendental function's block call compute its argument when
    /// that is one `+`, `-` or `*` of inputs and constants
    /// (`kiln_<name>_pre_<dtype>`, see `codegen::elemwise`), instead of
    /// staging it with the kernel's 128-bit vector code (on by default, off
    /// to measure its effect; both give the same bits).
    pub pre_stage: bool,
    /// Compute `f(a)` and `f(-a)` of one kernel with one paired block call
    /// where the runtime has one (`kiln_sigmoid_pair_f64`: one exponential
    /// for both sigmoids; see `codegen::elemwise`) instead of two calls (on
    /// by default, off to measure its effect; both give the same bits).
    pub pair_calls: bool,
}

/// Which of Cranelift's register allocators generates a module's code.
///
/// The single-pass allocator generates code about 3x faster on large
/// kernels (the chain graph of 3000 operations: 85 against 28 ms on one
/// thread), but it spills loop-carried values, and its code is slower:
/// interleaved runs (`kiln bench`, 4e6 f64, AVX2) of `sum(x > 0)` 6.9 vs
/// 1.6 ms, `sum(abs(x))` 2.5 vs 1.6, `exp(x)*2+1` 4.7 vs 3.8, the chain
/// graph's kernels 12-17% slower. Both compute the same bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Tiering {
    /// Single-pass first, so that the Function is callable soon; the
    /// backtracking allocator's code replaces it once a background thread
    /// has generated it ([`JitCode::wait_final`] waits for that). The
    /// default. `KILN_DUMP_ASM` turns it into [`Tiering::Final`] (the dump
    /// shows the code that runs), and so do hosts other than x86-64, where
    /// switching a running program to new code needs instruction-cache
    /// maintenance that kiln does not do.
    #[default]
    Tiered,
    /// The backtracking allocator only: slower to compile, full speed from
    /// the first call.
    Final,
    /// The single-pass allocator only: the fastest compile, and slower code
    /// for good (a Function called once or twice).
    First,
}

// Not derived: `verify` follows the build profile (`cfg!(debug_assertions)`,
// which is `false` in release builds, where clippy would call this derivable).
#[allow(clippy::derivable_impls)]
impl Default for CodegenOptions {
    fn default() -> Self {
        CodegenOptions {
            verify: cfg!(debug_assertions),
            tiering: Tiering::Tiered,
            optimize: false,
            epilogues: true,
            pre_stage: true,
            pair_calls: true,
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

impl CodegenOptions {
    /// Whether a module built with these options is generated in two tiers.
    fn tiers(&self) -> bool {
        self.tiering == Tiering::Tiered && cfg!(target_arch = "x86_64") && !dump_asm()
    }

    /// Whether this module's (first) code uses the single-pass allocator.
    fn single_pass(&self) -> bool {
        self.tiering == Tiering::First || self.tiers()
    }
}

/// The Cranelift ISA of the host CPU with `opts`' settings (the single-pass
/// register allocator when `single_pass`), or `Error::Compile` on an
/// unsupported host.
pub fn host_isa(opts: &CodegenOptions, single_pass: bool) -> Result<Arc<dyn TargetIsa>> {
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
    if single_pass {
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

/// Whether `isa` compares float vectors with the SSE `cmppd` / `cmpps`
/// (an x86-64 target without AVX: `KILN_ISA=baseline`, or a CPU before
/// 2011). Cranelift 0.135 merges a load into their memory operand without
/// the 16-byte alignment the CPU demands of it (its assembler lists
/// `cmppd` with a plain `xmm_m128` where `addpd` has an aligned one), so an
/// unaligned operand faults; with AVX, `vcmppd` takes any address.
fn sse_compares(isa: &dyn TargetIsa) -> bool {
    isa.triple().architecture == target_lexicon::Architecture::X86_64
        && !isa
            .isa_flags()
            .iter()
            .any(|f| f.name == "has_avx" && f.as_bool() == Some(true))
}

/// Passes every loaded value that a vector `fcmp` reads through a pair of
/// bitcasts (to the integer vector of its width and back), so that the
/// load is lowered to a plain unaligned move into a register and never
/// merged into the comparison (see [`sse_compares`]). The value, its
/// bits, and the comparison's result are unchanged; applying it again
/// changes nothing (the comparison then reads the bitcast).
fn keep_loads_out_of_compares(func: &mut ir::Function) {
    use cranelift_codegen::cursor::{Cursor, FuncCursor};
    use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Opcode, ValueDef};
    let little = MemFlagsData::new().with_endianness(ir::Endianness::Little);
    let mut pos = FuncCursor::new(func);
    while pos.next_block().is_some() {
        while let Some(inst) = pos.next_inst() {
            if pos.func.dfg.insts[inst].opcode() != Opcode::Fcmp {
                continue;
            }
            let args: Vec<ir::Value> = pos.func.dfg.inst_args(inst).to_vec();
            for (k, a) in args.into_iter().enumerate() {
                let ty = pos.func.dfg.value_type(a);
                let loaded = matches!(pos.func.dfg.value_def(a), ValueDef::Result(d, _)
                    if pos.func.dfg.insts[d].opcode() == Opcode::Load);
                if ty.is_vector() && loaded {
                    let bits = pos.ins().bitcast(ty.as_int(), little, a);
                    let back = pos.ins().bitcast(ty, little, bits);
                    pos.func.dfg.inst_args_mut(inst)[k] = back;
                }
            }
        }
    }
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

/// The two ISAs a module's kernels are generated with: the host's with
/// `opts`' settings, and the same with the optimising mid-end, for kernels
/// that divide integers (the same ISA when `optimize` is set).
#[derive(Clone)]
struct Isas {
    plain: Arc<dyn TargetIsa>,
    optimizing: Arc<dyn TargetIsa>,
}

impl Isas {
    /// The host's ISAs for `opts` (the single-pass allocator when `single_pass`).
    fn host(opts: &CodegenOptions, single_pass: bool) -> Result<Self> {
        let plain = host_isa(opts, single_pass)?;
        let optimizing = if opts.optimize {
            plain.clone()
        } else {
            let o = CodegenOptions {
                optimize: true,
                ..*opts
            };
            host_isa(&o, single_pass)?
        };
        Ok(Isas { plain, optimizing })
    }

    /// A new, empty module for these ISAs whose imports resolve through
    /// [`mathcalls::lookup`].
    fn module(&self) -> JITModule {
        let mut jb = JITBuilder::with_isa(
            self.plain.clone(),
            cranelift_module::default_libcall_names(),
        );
        // Tried before the default lookup in the process's own symbols.
        jb.symbol_lookup_fn(Box::new(mathcalls::lookup));
        JITModule::new(jb)
    }
}

/// One declaration of a module, in order: replaying them into a fresh
/// module gives every function the same `FuncId`, so a kernel's IR (which
/// names its callees by id) links into either tier's module.
#[derive(Clone)]
enum Decl {
    /// An imported runtime function.
    Import(&'static str, Signature),
    /// A kernel (an anonymous local function).
    Kernel(Signature),
}

impl Decl {
    /// Declares `self` in `module`.
    fn declare(&self, module: &mut JITModule) -> Result<FuncId> {
        match self {
            Decl::Import(name, sig) => module
                .declare_function(name, Linkage::Import, sig)
                .map_err(|e| Error::Compile(format!("declaring {name}: {e}"))),
            Decl::Kernel(sig) => module
                .declare_anonymous_function(sig)
                .map_err(|e| Error::Compile(format!("declaring a kernel: {e}"))),
        }
    }
}

/// The Cranelift instructions kernels waiting for code generation must
/// hold before a helper starts on them while lowering goes on (about 0.5 ms
/// of first-tier generation on Zen 1).
const HAND_OVER_INSTS: usize = 256;

/// A kernel waiting for code generation: its name (for messages), its id in
/// the module and its IR, then its machine code.
type Pending = (String, FuncId, Kernel);

/// One kernel's IR and, once [`generate`] has run, its machine code.
struct Kernel {
    func: ir::Function,
    code: Option<CompiledCode>,
    /// Keep a disassembly of the machine code (`KILN_DUMP_ASM`).
    disasm: bool,
}

impl Kernel {
    fn new(func: ir::Function) -> Self {
        Kernel {
            func,
            code: None,
            disasm: false,
        }
    }
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
    /// Kernels `handed..` (declared and built, in definition order), not
    /// yet handed to `overlap`: they wait for [`JitBuilder::finish`].
    pending: Vec<Pending>,
    /// Kernels `0..handed` went to `overlap`.
    handed: usize,
    /// The Cranelift instructions of `pending` but its last kernel.
    waiting_insts: usize,
    /// Generation of handed-over kernels while later ones are lowered
    /// (`None` with one thread, and when dumping the code).
    overlap: Option<Overlap<Pending>>,
    /// The second tier's copy of every kernel's IR as built, in index order
    /// (taken as each kernel is handed over, or at `finish`).
    second: Vec<(String, ir::Function)>,
    /// The ISAs of this module's code (the first tier's when tiered).
    isas: Isas,
    /// Every declaration and its id, in order (replayed by the second tier).
    decls: Vec<(Decl, FuncId)>,
    opts: CodegenOptions,
}

impl JitBuilder {
    /// The options this module is built with.
    pub fn options(&self) -> &CodegenOptions {
        &self.opts
    }

    /// A new module for the host whose imports resolve to the math symbols.
    pub fn new(opts: &CodegenOptions) -> Result<Self> {
        let isas = Isas::host(opts, opts.single_pass())?;
        let module = isas.module();
        let ctx = module.make_context();
        Ok(JitBuilder {
            module,
            ctx,
            fctx: FunctionBuilderContext::new(),
            imports: FxHashMap::default(),
            pending: Vec::new(),
            handed: 0,
            waiting_insts: 0,
            overlap: if dump_asm() {
                None
            } else {
                let isas = isas.clone();
                Overlap::new(Box::new(move |k: &mut Pending| generate(&isas, k)))
            },
            second: Vec::new(),
            isas,
            decls: Vec::new(),
            opts: *opts,
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
        let decl = Decl::Import(name, self.signature(params, returns));
        let id = decl.declare(&mut self.module)?;
        self.decls.push((decl, id));
        self.imports.insert(name, id);
        Ok(id)
    }

    /// Declares the function currently in `self.ctx` under a fresh local
    /// name, hands its IR over for code generation (leaving a fresh
    /// context) and returns its index for [`JitCode::ptr`]. Once the
    /// kernels defined before it and not yet handed over hold
    /// `HAND_OVER_INSTS` (256) instructions, they start generating on a helper
    /// thread while the caller lowers on; the others, the last kernel
    /// always among them (so that a test can still change it), wait for
    /// [`JitBuilder::finish`].
    pub fn define_current(&mut self, name: &str) -> Result<usize> {
        let decl = Decl::Kernel(self.ctx.func.signature.clone());
        let id = decl
            .declare(&mut self.module)
            .map_err(|e| Error::Compile(format!("kernel {name}: {e}")))?;
        self.decls.push((decl, id));
        let func = std::mem::replace(&mut self.ctx.func, ir::Function::new());
        if let Some((_, _, before)) = self.pending.last() {
            self.waiting_insts += before.func.dfg.num_insts();
        }
        self.pending.push((name.to_string(), id, Kernel::new(func)));
        let k = self.handed + self.pending.len() - 1;
        // The kernels before this one, once they are worth a helper's
        // wake-up (on a virtual machine it can cost as much as generating a
        // small kernel, which then waits for `finish`).
        if self.overlap.is_some() && self.waiting_insts >= HAND_OVER_INSTS {
            self.hand_over_waiting();
        }
        Ok(k)
    }

    /// Hands every pending kernel but the last to `overlap`, in index
    /// order, after taking the second tier's copy of its IR and skipping
    /// its marked loops.
    fn hand_over_waiting(&mut self) {
        let last = self.pending.split_off(self.pending.len().saturating_sub(1));
        for mut kernel in std::mem::replace(&mut self.pending, last) {
            self.prepare_first_tier(&mut kernel);
            if let Some(o) = &mut self.overlap {
                o.submit(self.handed, kernel);
            }
            self.handed += 1;
        }
        self.waiting_insts = 0;
    }

    /// When tiered: keeps the second tier's copy of `kernel`'s IR as built
    /// (generating rewrites a context's function in place), then skips its
    /// marked loops. Called on every kernel, in index order.
    fn prepare_first_tier(&mut self, kernel: &mut Pending) {
        if self.opts.tiers() {
            self.second.push((kernel.0.clone(), kernel.2.func.clone()));
            skip_marked_loops(&mut kernel.2.func);
        }
    }

    /// Applies the first tier's loop skipping ([`skip_marked_loops`]) to
    /// kernel `k`, the last defined, as a first-tier-only module would
    /// never do, so that tests can run that code; returns how many loops it
    /// skipped.
    #[cfg(test)]
    pub(super) fn skip_marked_loops_of(&mut self, k: usize) -> usize {
        // The last kernel defined is never handed over before `finish`.
        skip_marked_loops(&mut self.pending[k - self.handed].2.func)
    }

    /// Generates the machine code of every kernel (on the runtime's worker
    /// threads), links it and returns the callable kernels; when tiered,
    /// also hands their IR to the second tier.
    pub fn finish(mut self) -> Result<JitCode> {
        let dump = dump_asm();
        // Kernels `0..handed` went to `overlap`; these follow them.
        let mut rest: Vec<Pending> = std::mem::take(&mut self.pending);
        if dump {
            for (name, _, kernel) in &mut rest {
                kernel.disasm = true;
                eprintln!("=== kernel {name}\n{}", kernel.func.display());
            }
        }
        for kernel in &mut rest {
            self.prepare_first_tier(kernel);
        }
        generate_all(&self.isas, &mut rest, true)?;
        let pending: Vec<Pending> = match self.overlap.take() {
            Some(overlap) => {
                let mut all: Vec<Pending> = overlap.finish()?.into_iter().map(|(_, k)| k).collect();
                all.extend(rest);
                all
            }
            None => rest,
        };
        let second = std::mem::take(&mut self.second);
        let second = (!second.is_empty()).then_some(second);
        if dump {
            for (name, _, kernel) in &pending {
                if let Some(asm) = kernel.code.as_ref().and_then(|c| c.vcode.as_deref()) {
                    eprintln!("=== machine code of kernel {name}\n{asm}");
                }
            }
        }
        let ptrs = link(&mut self.module, &pending)?;
        let tiers = Arc::new(Tiers::new(self.module, ptrs, second.is_none()));
        if let Some(kernels) = second {
            // The second tier's thread needs a core: helpers lingering from
            // the parallel generation above would take the other one.
            kiln_runtime::parallel::stop_lingering();
            let (opts, decls) = (self.opts, self.decls);
            tier::submit(
                Arc::downgrade(&tiers),
                Box::new(move |alive| second_tier(alive, &opts, &decls, &kernels)),
            );
        }
        Ok(JitCode { tiers })
    }
}

/// The source location that marks a branch into an unrolled loop body the
/// first tier skips (kernels carry no other source locations): the branch
/// of a loop whose iterations carry nothing but the index, followed by a
/// loop that handles the rest of the range with the same per-element
/// instructions (`elemwise::counted_loop_with`). Skipping it changes no
/// value computed, only how many vectors an iteration handles, and spares
/// the first tier the code generation of the unrolled copy (about a
/// fifth of an element-wise kernel); the second tier compiles the
/// function as built.
pub(super) const FIRST_TIER_SKIP: u32 = 0x6b69_6c6e;

/// Replaces every branch of `func` marked [`FIRST_TIER_SKIP`] with a jump
/// to its not-taken destination, leaving the body it guarded unreachable
/// (Cranelift drops unreachable blocks before lowering, at every
/// optimisation level); returns how many it replaced.
fn skip_marked_loops(func: &mut ir::Function) -> usize {
    let mut marked = Vec::new();
    for block in func.layout.blocks() {
        let Some(inst) = func.layout.last_inst(block) else {
            continue;
        };
        if func.srcloc(inst) != ir::SourceLoc::new(FIRST_TIER_SKIP) {
            continue;
        }
        if let ir::InstructionData::Brif { blocks, .. } = &func.dfg.insts[inst] {
            let exit = blocks[1];
            let args: Vec<ir::BlockArg> = exit.args(&func.dfg.value_lists).collect();
            marked.push((inst, exit.block(&func.dfg.value_lists), args));
        }
    }
    let n = marked.len();
    for (inst, exit, args) in marked {
        ir::InstBuilder::jump(func.replace(inst), exit, &args);
    }
    n
}

/// Generates the machine code of every kernel of `pending` with `isas`: on
/// the runtime's worker threads when `parallel` (kernels taken one at a
/// time, largest first, so that a long kernel does not hold up the short
/// ones behind it, and no thread is started per compile), else on the
/// calling thread.
///
/// Largest first: the calling thread starts at once and takes the first,
/// while a helper may wake late. With the small kernel first (a mean's
/// `sum / n` before its fused sum), a helper that woke during it took the
/// large one late and the caller waited for it.
fn generate_all(isas: &Isas, pending: &mut [Pending], parallel: bool) -> Result<()> {
    let errors: Vec<Option<String>> = if !parallel || pending.len() < 2 {
        pending.iter_mut().map(|k| generate(isas, k)).collect()
    } else {
        let mut order: Vec<(usize, &mut Pending)> = pending
            .iter_mut()
            .map(|k| (k.2.func.dfg.num_insts(), k))
            .collect();
        order.sort_by_key(|(size, _)| std::cmp::Reverse(*size));
        let slots: Vec<Mutex<(&mut Pending, Option<String>)>> = order
            .into_iter()
            .map(|(_, k)| Mutex::new((k, None)))
            .collect();
        kiln_runtime::parallel::parallel_for(slots.len(), 1, &|s, e| {
            for slot in &slots[s..e] {
                let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
                let (k, err) = &mut *slot;
                *err = generate(isas, k);
            }
        });
        slots
            .into_iter()
            .map(|s| s.into_inner().unwrap_or_else(|e| e.into_inner()).1)
            .collect()
    };
    match errors.into_iter().flatten().next() {
        Some(e) => Err(Error::Compile(e)),
        None => Ok(()),
    }
}

/// Defines the generated code of every kernel of `pending` in `module`,
/// links it and returns the kernels' addresses, in order.
fn link(module: &mut JITModule, pending: &[Pending]) -> Result<Vec<usize>> {
    for (name, id, kernel) in pending {
        let code = kernel
            .code
            .as_ref()
            .ok_or_else(|| Error::Compile(format!("kernel {name} was not compiled")))?;
        let relocs: Vec<ModuleReloc> = code
            .buffer
            .relocs()
            .iter()
            .map(|r| ModuleReloc::from_mach_reloc(r, &kernel.func, *id))
            .collect();
        module
            .define_function_bytes(
                *id,
                u64::from(code.buffer.alignment),
                code.code_buffer(),
                &relocs,
            )
            .map_err(|e| Error::Compile(format!("defining kernel {name}: {e}")))?;
    }
    module
        .finalize_definitions()
        .map_err(|e| Error::Compile(format!("linking kernels: {e}")))?;
    Ok(pending
        .iter()
        .map(|(_, id, _)| module.get_finalized_function(*id) as usize)
        .collect())
}

/// The second tier of a module built with `opts`, from its declarations
/// (and their ids) and its kernels' IR: a new module with the same
/// declarations (replayed in order, so every `FuncId` in the IR means the
/// same function; a different id is an error), the kernels generated with
/// the backtracking allocator one by one (stopping with `Ok(None)` as soon
/// as `alive` is false), linked. Returns the module and the kernels'
/// addresses.
fn second_tier(
    alive: &dyn Fn() -> bool,
    opts: &CodegenOptions,
    decls: &[(Decl, FuncId)],
    kernels: &[(String, ir::Function)],
) -> Result<Option<(JITModule, Vec<usize>)>> {
    if !alive() {
        return Ok(None);
    }
    let isas = Isas::host(opts, false)?;
    let mut module = isas.module();
    match fill_second_tier(&mut module, &isas, alive, decls, kernels) {
        Ok(Some(ptrs)) => Ok(Some((module, ptrs))),
        other => {
            // SAFETY: no address into `module` was published.
            unsafe { module.free_memory() };
            other.map(|_| None)
        }
    }
}

/// [`second_tier`]'s work in its fresh `module`: the kernels' addresses,
/// `Ok(None)` when abandoned.
fn fill_second_tier(
    module: &mut JITModule,
    isas: &Isas,
    alive: &dyn Fn() -> bool,
    decls: &[(Decl, FuncId)],
    kernels: &[(String, ir::Function)],
) -> Result<Option<Vec<usize>>> {
    let mut pending: Vec<Pending> = Vec::with_capacity(kernels.len());
    let mut kernel_ir = kernels.iter();
    for (d, first) in decls {
        let id = d.declare(module)?;
        if id != *first {
            return Err(Error::Compile(
                "second tier: a replayed declaration got another id".into(),
            ));
        }
        if matches!(d, Decl::Kernel(_)) {
            let (name, func) = kernel_ir.next().ok_or_else(|| {
                Error::Compile("second tier: more kernels declared than built".into())
            })?;
            pending.push((name.clone(), id, Kernel::new(func.clone())));
        }
    }
    if kernel_ir.next().is_some() {
        return Err(Error::Compile(
            "second tier: more kernels built than declared".into(),
        ));
    }
    // Kernel by kernel, so that an abandoned module stops early.
    for k in &mut pending {
        if !alive() {
            return Ok(None);
        }
        if let Some(e) = generate(isas, k) {
            return Err(Error::Compile(e));
        }
    }
    link(module, &pending).map(Some)
}

/// Generates one kernel's machine code into its context, with the
/// optimising ISA when it divides integers, else the plain one; the error
/// text on failure. Both ISAs are the host's with the same flags but the
/// optimisation level, so their code shares one module's conventions.
fn generate(isas: &Isas, (name, _, kernel): &mut Pending) -> Option<String> {
    let isa = if divides_integers(&kernel.func) {
        &*isas.optimizing
    } else {
        &*isas.plain
    };
    if sse_compares(isa) {
        keep_loads_out_of_compares(&mut kernel.func);
    }
    let mut ctrl = ControlPlane::default();
    WARM.with_borrow_mut(|ctx| {
        ctx.clear();
        std::mem::swap(&mut ctx.func, &mut kernel.func);
        ctx.set_disasm(kernel.disasm);
        let failed = ctx.compile(isa, &mut ctrl).err().map(|e| {
            format!(
                "code generation for kernel {name} failed: {:?}\n{}",
                e.inner,
                e.func.display()
            )
        });
        std::mem::swap(&mut ctx.func, &mut kernel.func);
        kernel.code = ctx.take_compiled_code();
        failed
    })
}

thread_local! {
    /// This thread's code-generation context: its register allocator's and
    /// analyses' buffers are reused from one kernel to the next (a fresh
    /// context allocates and grows them again for every kernel).
    static WARM: std::cell::RefCell<Context> = std::cell::RefCell::new(Context::new());
}

/// The finalized code of one Function; its memory is freed with the last
/// reference to its address table (this `JitCode`'s, or the second tier's
/// while it installs).
pub struct JitCode {
    /// The kernels' current addresses and the modules they point into.
    tiers: Arc<Tiers>,
}

impl JitCode {
    /// The address of kernel `i` (as returned by [`JitBuilder::define_current`]):
    /// its second tier's code once installed, else its first tier's.
    pub fn ptr(&self, i: usize) -> *const u8 {
        self.tiers.ptr(i)
    }

    /// Blocks until the kernels run their final code: at once when the
    /// module was not tiered, else until the second tier is installed or
    /// has failed. True when the final code is installed (false only when
    /// the first tier's code stays in use: the second tier failed, or the
    /// module was compiled before a fork and this is the child).
    pub fn wait_final(&self) -> bool {
        self.tiers.wait()
    }
}

impl std::fmt::Debug for JitCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JitCode({} kernels)", self.tiers.len())
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
        let isa = host_isa(&CodegenOptions::default(), false).unwrap();
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
