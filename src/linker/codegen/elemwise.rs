//! Element-wise kernel generation: one Cranelift function per scalar
//! program (an `Elemwise` or `Composite` node with its size-1 constants
//! inlined), with the ABI
//! `extern "C" fn(ptrs: *const *mut u8, strides: *const isize, n: usize)`:
//! operand `k` (inputs first, then outputs) starts at `ptrs[k]` and its
//! element `i` is at byte offset `i * strides[k]`; the kernel computes
//! elements `0..n` of the innermost dimension (the driver in `exec::drive`
//! loops the outer dimensions).
//!
//! Code paths, chosen at run time from the strides:
//! - a vector path (`F64X2` / `F32X4`, or `I64X2` / `I32X4` / `I16X8` /
//!   `I8X16` for integers) when every input stride is 0 or the element size and
//!   every output is contiguous, and every op has an exact vector form
//!   (bool values between nodes are lane masks: comparisons, `isnan`,
//!   logic and `where` stay on this path; a bool output is stored one byte
//!   per element, contiguous meaning a byte stride of 1). Inputs of
//!   another dtype than the path's are converted exactly as they are
//!   loaded (or, read only by a cast, with that cast's rounding: an `i32`
//!   array cast to `f32`), and results cast to a narrower dtype as they are stored (the
//!   strides are then those of the operands' own element sizes). It runs in
//!   blocks of at most [`BLOCK`] elements; transcendental functions are
//!   evaluated block-wise
//!   by `kiln-runtime` on up to [`BLOCK`] elements staged in a stack
//!   scratch area (values are computed in *levels*: level `L` needs the
//!   results of `L` nested block calls; a value in narrow lanes is staged
//!   packed as its own dtype, and its calls are its dtype's block
//!   functions); a program that is one such call
//!   on contiguous operands makes it once over the whole range instead,
//!   and two calls `f(a)` and `f(neg(a))` of a level make one paired call
//!   where the runtime has one (`pairs`; same bits as the two calls).
//!   Each vector loop handles up to `UNROLL` vectors per iteration (then
//!   single vectors), and in calls of at least 4096 elements each block
//!   first asks the runtime to prefetch the next block's inputs and
//!   outputs, so that memory streams in while the block computes;
//! - a scalar path (any strides, every dtype, the tail of the vector path),
//!   bit-identical to the reference evaluator (it calls the reference's own
//!   scalar functions for transcendental ops).
//!
//! Invariants: for in-place use, every input element `i` is read (and, in
//! the blocked path, staged to scratch) before output element `i` is
//! written, so an output may share the buffer of an input of the same
//! layout. No operand access is marked aligned ([`sl::OPERAND`]): operands
//! are only element-aligned; only the argument arrays and the 16-byte
//! aligned stack scratch use [`sl::OWN`].

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, Block, InstBuilder, SourceLoc, StackSlotData, StackSlotKind, Value,
};
use cranelift_frontend::{FunctionBuilder, Variable};
use cranelift_jit::JITModule;
use cranelift_module::FuncId;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::hoist::{self, Hoisted};
use super::jit::{self, JitBuilder};
use super::mathcalls::{self, ScalarSig, BLOCK};
use super::scalar::{self as sl, Callees};
use crate::error::Result;
use crate::graph::DType;
use crate::ops::{CRef, Composite, ScalarOp};

/// The runtime's cache prefetch hint for a block of every operand of a
/// pointer / stride array (`kiln_prefetch_operands`), called once per block
/// by the blocked vector path for the inputs and once for the outputs.
const PREFETCH: &str = "kiln_prefetch_operands";

/// The runtime's check of a stride array (`kiln_strides_are`).
const STRIDES_ARE: &str = "kiln_strides_are";

/// Kernels of more inputs (or outputs) than this check their strides for
/// the vector path with one call of [`STRIDES_ARE`] instead of inline.
const STRIDES_CALL_MIN: usize = 8;

/// Whether `prog`'s vector path checks its inputs' strides, and its
/// outputs', with a [`STRIDES_ARE`] call: when they are more than
/// [`STRIDES_CALL_MIN`] and all of the path's element size (no input
/// converted on load, no bool output).
fn strides_by_call(prog: &Composite, plan: &VecPlan) -> (bool, bool) {
    let esz = plan.dtype.size_of();
    let ins_plain = prog.inputs.iter().all(|&d| d == plan.dtype);
    let outs_plain = prog
        .output_dtypes()
        .iter()
        .all(|d| d.size_of().min(esz) == esz);
    (
        prog.inputs.len() > STRIDES_CALL_MIN && ins_plain,
        prog.outputs.len() > STRIDES_CALL_MIN && outs_plain,
    )
}

/// Calls of at least this many elements prefetch their next block (see
/// [`prefetch_flag`]). The driver relies on it: it runs an operation whose
/// operands stay in cache in calls shorter than this
/// (`exec::drive::IN_CACHE_PIECE`).
pub(crate) const PREFETCH_MIN: usize = 4096;

/// Whether a call over `n` elements prefetches (an `i8` value): shorter
/// calls (the rows of a broadcast 512 x 512 operation) are usually in
/// cache, where the prefetch calls cost 6% of a `tanh(x + b)` kernel and
/// gain nothing; long ones stream from memory.
pub(super) fn prefetch_flag(b: &mut FunctionBuilder<'_>, n: Value) -> Value {
    b.ins()
        .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, n, PREFETCH_MIN as i64)
}

/// Most vectors per iteration of the vector path's main loops (Cranelift
/// does not unroll; four independent 128-bit vectors per iteration hide the
/// latency of dependent arithmetic and amortise the loop's bookkeeping).
pub(super) const UNROLL: usize = 4;

/// Vectors per main-loop iteration for `prog`: [`UNROLL`] for small
/// programs, fewer for larger ones, which have independent work within one
/// vector already and whose code (and code generation time) unrolling
/// would multiply: the chain graph's large Composites took twice as long
/// to compile with four.
fn unroll_for(prog: &Composite) -> usize {
    match prog.nodes.len() {
        0..=8 => UNROLL,
        9..=24 => 2,
        _ => 1,
    }
}

/// How the vector path of a program is organised.
#[derive(Debug, Clone)]
pub(super) struct VecPlan {
    /// The dtype of the path's lanes: of every value computed, and of every
    /// input and output except those converted on load or on store.
    pub(super) dtype: DType,
    /// Level of each node.
    level: Vec<usize>,
    /// Whether each node is a block-wise runtime call.
    block: Vec<bool>,
    /// Per node: the pre-stage a block-wise node computes itself (its
    /// argument, folded into the call; see [`pre_stages`]).
    pre: Vec<Option<PreStaged>>,
    /// Per node: whether it is computed only inside a pre-staged or paired
    /// call (its value is never formed by the JIT code).
    folded: Vec<bool>,
    /// Per block-wise node computing `op(a)`: the node computing `op(-a)`
    /// whose result the same paired runtime call writes (see [`pairs`]).
    partner: Vec<Option<usize>>,
    /// Per node: whether its result is written by its partner's paired call.
    paired: Vec<bool>,
    /// Per node: the narrower dtype a cast read only as an output converts
    /// its argument's value to as it is stored ([`narrows_on_store`]).
    narrowed: Vec<Option<DType>>,
    /// Per node: `Some(wrap)` for 8- or 16-bit integer work that the `f64`
    /// path computes exactly in its lanes, then wraps to the node's dtype
    /// when `wrap` ([`small_int_plan`]).
    small: Vec<Option<bool>>,
    /// Per node: the dtype of the lanes it is computed in: the path's,
    /// `Bool` for a lane mask, or a narrower dtype in narrow lanes
    /// ([`sl::narrow_lanes`]).
    lane: Vec<DType>,
    /// Per input: the dtype of its lanes, the path's (its own, or converted
    /// on load) or its own in narrow lanes (loaded as it is).
    input_lane: Vec<DType>,
    /// Highest level.
    pub(super) max_level: usize,
    /// Scratch slot of each staged value.
    pub(super) slots: FxHashMap<CRef, usize>,
}

/// A block-wise call's argument `a ⊕ b` computed by the runtime call itself
/// (`kiln_<name>_pre_<dtype>`) instead of staged through the scratch area:
/// the runtime does the operation on full-width vectors, where the staging
/// loop's 128-bit JIT code cost about a fifth of `tanh(u[:, None] + v)`.
#[derive(Debug, Clone, Copy)]
struct PreStaged {
    /// The operation's mode code ([`kiln_runtime::math::PRE_ADD`], ...).
    op: u64,
    /// Its operands: kernel inputs or constants.
    args: [CRef; 2],
}

/// The pre-stages of a vector plan's block-wise nodes: a unary block-wise
/// node with a pre-staged runtime form takes over its argument when that is
/// an `add`, `sub` or `mul` of inputs and constants at level 0 that nothing
/// else reads (no other node, no output). Returns the pre-stage of each
/// node and whether each node is folded into one.
///
/// Only when every output is at level 1 or higher: a pre-staged call reads
/// its inputs when it runs, not at level 0, so no output may be written
/// before it (an output may share an input's buffer). Outputs at level 1
/// are written after the level's calls, and a block-wise output's own call
/// reads each group before writing it.
fn pre_stages(
    prog: &Composite,
    dtype: DType,
    level: &[usize],
    block: &[bool],
) -> (Vec<Option<PreStaged>>, Vec<bool>) {
    let n = prog.nodes.len();
    let mut pre = vec![None; n];
    let mut folded = vec![false; n];
    if !dtype.is_float() || prog.outputs.iter().any(|&o| ref_level(level, o) == 0) {
        return (pre, folded);
    }
    for (k, node) in prog.nodes.iter().enumerate() {
        let [CRef::Node(j)] = node.args[..] else {
            continue;
        };
        let j = j as usize;
        let arg = &prog.nodes[j];
        let op = match arg.op {
            ScalarOp::Add => kiln_runtime::math::PRE_ADD,
            ScalarOp::Sub => kiln_runtime::math::PRE_SUB,
            ScalarOp::Mul => kiln_runtime::math::PRE_MUL,
            _ => continue,
        };
        // Inputs the call reads from memory as they are (none converted).
        let leaves = arg.args.iter().all(|&a| match a {
            CRef::Input(k) => prog.inputs[k as usize] == dtype,
            a => matches!(a, CRef::Const(_)),
        });
        if block[k]
            && !block[j]
            && level[j] == 0
            && arg.dtype == dtype
            && arg.args.len() == 2
            && leaves
            && readers(prog, CRef::Node(j as u32)) == 1
            && mathcalls::pre_block_symbol(node.op, dtype).is_some()
        {
            pre[k] = Some(PreStaged {
                op,
                args: [arg.args[0], arg.args[1]],
            });
            folded[j] = true;
        }
    }
    (pre, folded)
}

/// The pairs of a vector plan's block-wise nodes: a node `op(a)` whose op
/// has a paired runtime function ([`mathcalls::pair_block_symbol`]) and a
/// node `op(neg(a))` at the same level, neither pre-staged, are computed by
/// one paired call sharing their common work (sigmoid: one e^-|a| for both),
/// whose results have the bits of the two separate calls. Returns each
/// node's partner and whether each node is written by its partner's call;
/// the `neg(a)` node is added to `folded` when nothing else reads it (no
/// other node, no output).
fn pairs(
    prog: &Composite,
    dtype: DType,
    level: &[usize],
    block: &[bool],
    pre: &[Option<PreStaged>],
    folded: &mut [bool],
) -> (Vec<Option<usize>>, Vec<bool>) {
    let n = prog.nodes.len();
    let mut partner = vec![None; n];
    let mut paired = vec![false; n];
    // (A node in narrow lanes calls its own dtype's block function, unpaired.)
    let plain = |k: usize| block[k] && pre[k].is_none() && prog.nodes[k].dtype == dtype;
    for (k, node) in prog.nodes.iter().enumerate() {
        let [a] = node.args[..] else {
            continue;
        };
        if !plain(k)
            || paired[k]
            || matches!(a, CRef::Const(_))
            || mathcalls::pair_block_symbol(node.op, dtype).is_none()
        {
            continue;
        }
        let negation_of_a = |r: CRef| match r {
            CRef::Node(j) => {
                let nj = &prog.nodes[j as usize];
                nj.op == ScalarOp::Neg && nj.args[..] == [a] && !block[j as usize]
            }
            _ => false,
        };
        let found = (0..n).find(|&k2| {
            let n2 = &prog.nodes[k2];
            k2 != k
                && plain(k2)
                && !paired[k2]
                && partner[k2].is_none()
                && n2.op == node.op
                && level[k2] == level[k]
                && matches!(n2.args[..], [r] if negation_of_a(r))
        });
        let Some(k2) = found else {
            continue;
        };
        partner[k] = Some(k2);
        paired[k2] = true;
        let neg = prog.nodes[k2].args[0];
        if let (CRef::Node(j), 1) = (neg, readers(prog, neg)) {
            folded[j as usize] = true;
        }
    }
    (partner, paired)
}

/// How many times `r` is read in `prog`: as an argument of a node (once
/// per node that reads it) or as an output.
fn readers(prog: &Composite, r: CRef) -> usize {
    prog.nodes.iter().filter(|n| n.args.contains(&r)).count()
        + prog.outputs.iter().filter(|&&o| o == r).count()
}

fn ref_level(level: &[usize], r: CRef) -> usize {
    match r {
        CRef::Node(i) => level[i as usize],
        _ => 0,
    }
}

/// The vector plan of `prog`, if its inputs, constants and outputs share one
/// float or integer dtype (inputs of another dtype may be converted exactly
/// as they are loaded, see [`converts_on_load`], and results cast to a
/// narrower dtype as they are stored, see [`narrows_on_store`]; the path
/// takes the first input's dtype, else the first of the other values' that
/// works), its other values are of that dtype or bool (lane masks), and
/// every op has an exact vector form or a block-wise runtime function. Bool
/// outputs are allowed too: an element-wise kernel stores them as bytes, a
/// fused reduction's scratch block keeps them as lane masks (see
/// [`VecCtx::with_mask_outputs`]). With `pre_stage`, block-wise calls take
/// over their arguments where [`pre_stages`] allows it; with `pair_calls`,
/// [`pairs`] of block-wise nodes share one call.
pub(super) fn vector_plan(prog: &Composite, pre_stage: bool, pair_calls: bool) -> Option<VecPlan> {
    let first = *prog
        .inputs
        .first()
        .or(prog.nodes.first().map(|n| &n.dtype))?;
    // The first input's dtype; then, for inputs of another dtype than the
    // values computed (`img / 255` on a `u8` image, `cast(abs(cast(p,
    // "i16") - q16), "u8")`), the dtypes of the results and of the other
    // values, in order; last the other inputs' (`xf > y`, whose only
    // value is a bool, compares on the `f64` path): the path of the first
    // that works converts the inputs of other dtypes as it loads them and
    // narrower results as it stores them.
    let mut tried: SmallVec<[DType; 4]> = SmallVec::new();
    let candidates = std::iter::once(first).chain(
        prog.outputs
            .iter()
            .map(|&o| prog.dtype_of(o))
            .chain(prog.nodes.iter().map(|n| n.dtype))
            .chain(prog.inputs.iter().copied())
            .filter(|&d| d != DType::Bool),
    );
    for dtype in candidates {
        if tried.contains(&dtype) {
            continue;
        }
        tried.push(dtype);
        if let Some(plan) = vector_plan_on(prog, dtype, pre_stage, pair_calls, None) {
            return Some(plan);
        }
    }
    // Last, 8- and 16-bit integer work in `f64` lanes ([`small_int_plan`]),
    // so that every program that had a path keeps it (a path of its own
    // integer lanes holds more lanes a vector and needs no wrapping).
    let small = small_int_plan(prog);
    (small.iter().any(Option::is_some) && tried.contains(&DType::F64))
        .then(|| vector_plan_on(prog, DType::F64, pre_stage, pair_calls, Some(small)))
        .flatten()
}

/// Whether node `n` of `prog` has the form of 8- or 16-bit integer work that
/// the `f64` path can compute exactly in its own lanes: arithmetic, then
/// wrapped to the node's dtype where its result may leave that dtype's
/// range ([`sl::wrap_int_lanes`]: the reference's `i64`-domain result
/// wrapped to the dtype), a cast between such dtypes (wrapped alike), or a
/// comparison (a lane mask). Its arguments are 8- or 16-bit integers
/// (inputs converted exactly on load, or nodes computed so), integer
/// constants (in the node's range for arithmetic, within 2^31 for a
/// comparison), and for a selection a condition. [`small_int_plan`] also
/// bounds every partial result. So an `f64` path keeps `exp(-img / 255)`,
/// `(255 - img) / 255` or `where(img > 100, img - 100, 0) * 0.01` of a
/// `uint8` image instead of leaving the kernel to its scalar path.
fn small_int_in_f64(prog: &Composite, n: &crate::ops::CNode) -> bool {
    use ScalarOp::*;
    let compare = matches!(n.op, Lt | Le | Gt | Ge | Eq | Neq);
    let arithmetic = matches!(
        n.op,
        Add | Sub | Mul | Sqr | Neg | Abs | Maximum | Minimum | Clip | Sign | Switch | Cast(_)
    );
    let Some((lo, hi)) = (if compare {
        (n.dtype == DType::Bool).then_some((-(1i64 << 31), 1i64 << 31))
    } else if arithmetic {
        small_int_range(n.dtype)
    } else {
        None
    }) else {
        return false;
    };
    n.args.iter().enumerate().all(|(j, &a)| match a {
        CRef::Const(c) => {
            !c.dtype.is_float()
                && c.dtype != DType::Bool
                && c.dtype != DType::U64
                && (lo..=hi).contains(&c.as_i64())
        }
        _ if n.op == Switch && j == 0 => prog.dtype_of(a) == DType::Bool,
        _ => small_int_range(prog.dtype_of(a)).is_some(),
    })
}

/// The range of an 8- or 16-bit integer dtype, `None` for any other.
fn small_int_range(d: DType) -> Option<(i64, i64)> {
    let (lo, hi) = d.int_range().filter(|_| d.size_of() <= 2)?;
    Some((lo as i64, hi as i64))
}

/// Per node of `prog`, for an `f64` path: `Some(wrap)` when the path
/// computes it exactly in its lanes ([`small_int_in_f64`], and every
/// partial result, folded in argument order, within 2^52 in magnitude), with
/// `wrap` telling whether its exact result may leave its dtype's range (it
/// is then wrapped; a wrap lengthens the value's dependency chain by five
/// operations, so a node whose range analysis shows it in range is left
/// as it is: `cast(abs(cast(img, "i16") - 128), "f64")` needs none).
fn small_int_plan(prog: &Composite) -> Vec<Option<bool>> {
    use ScalarOp::*;
    const LIMIT: i64 = 1 << 52;
    let mut range: Vec<Option<(i64, i64)>> = Vec::with_capacity(prog.nodes.len());
    let mut plan = Vec::with_capacity(prog.nodes.len());
    for n in &prog.nodes {
        let arg = |a: CRef| match a {
            CRef::Const(c) => Some((c.as_i64(), c.as_i64())),
            CRef::Node(j) => range[j as usize].or(small_int_range(prog.dtype_of(a))),
            CRef::Input(_) => small_int_range(prog.dtype_of(a)),
        };
        let exact = if small_int_in_f64(prog, n) {
            let args: Option<SmallVec<[(i64, i64); 3]>> = n
                .args
                .iter()
                .enumerate()
                .filter(|&(j, _)| !(n.op == Switch && j == 0))
                .map(|(_, &a)| arg(a))
                .collect();
            args.and_then(|r| exact_range(n.op, &r, LIMIT))
        } else {
            None
        };
        let dtype_range = small_int_range(n.dtype);
        match (exact, dtype_range) {
            (Some((lo, hi)), Some((dlo, dhi))) => {
                let wrap = lo < dlo || hi > dhi;
                range.push(Some(if wrap { (dlo, dhi) } else { (lo, hi) }));
                plan.push(Some(wrap));
            }
            // A comparison: a lane mask.
            (Some(_), None) => {
                range.push(None);
                plan.push(Some(false));
            }
            _ => {
                range.push(None);
                plan.push(None);
            }
        }
    }
    plan
}

/// The range of `op`'s exact result on arguments of ranges `r` (a
/// selection's condition left out), folded in argument order; `None` when
/// a partial result may pass `limit` in magnitude (bounds in `i128`, so no
/// product of two checked bounds overflows).
fn exact_range(op: ScalarOp, r: &[(i64, i64)], limit: i64) -> Option<(i64, i64)> {
    use ScalarOp::*;
    type R = (i128, i128);
    let within = |(lo, hi): R| (lo >= -(limit as i128) && hi <= limit as i128).then_some((lo, hi));
    let span = |v: [i128; 4]| (*v.iter().min().unwrap(), *v.iter().max().unwrap());
    let r: SmallVec<[R; 3]> = r.iter().map(|&(lo, hi)| (lo as i128, hi as i128)).collect();
    let fold = |f: &dyn Fn(R, R) -> R| {
        r[1..]
            .iter()
            .try_fold(within(r[0])?, |acc, &b| within(f(acc, b)))
    };
    let (x, m) = (r[0], r[0].0.abs().max(r[0].1.abs()));
    let res = match op {
        Add => fold(&|a, b| (a.0 + b.0, a.1 + b.1)),
        Sub => fold(&|a, b| (a.0 - b.1, a.1 - b.0)),
        Mul => fold(&|a, b| span([a.0 * b.0, a.0 * b.1, a.1 * b.0, a.1 * b.1])),
        Maximum => fold(&|a, b| (a.0.max(b.0), a.1.max(b.1))),
        Minimum => fold(&|a, b| (a.0.min(b.0), a.1.min(b.1))),
        Clip => {
            let (l, h) = (r[1], r[2]);
            let lower = (x.0.max(l.0), x.1.max(l.1));
            within((lower.0.min(h.0), lower.1.min(h.1)))
        }
        Switch => within((x.0.min(r[1].0), x.1.max(r[1].1))),
        Sqr if x.0 >= 0 || x.1 <= 0 => within((x.0.abs().min(x.1.abs()).pow(2), m * m)),
        Sqr => within((0, m * m)),
        Neg => within((-x.1, -x.0)),
        Abs if x.0 >= 0 => within(x),
        Abs if x.1 <= 0 => within((-x.1, -x.0)),
        Abs => within((0, m)),
        Sign => Some((x.0.signum(), x.1.signum())),
        // Cast: the value; comparisons: any (their result is a mask).
        _ => within(x),
    };
    res.map(|(lo, hi)| (lo as i64, hi as i64))
}

/// Whether input `k` of `prog`, of another dtype than the path's `dtype`,
/// may be converted as it is loaded ([`sl::load_converted`]; no input that
/// is an output is). When the load rounds as the reference's cast does
/// ([`sl::cast_convertible`]: `cast(a, "f32")` of an `i32` array), every
/// node reading it must be that cast. Otherwise the conversion is exact
/// ([`sl::load_convertible`]), and every node reading it computes as the
/// reference would on the converted value: a cast to
/// `dtype`, or (float paths) an op the reference evaluates in the float
/// domain, which it enters with the same exact conversion, or (integer
/// paths) an op that stays in the integer domain of the same signedness.
fn converts_on_load(prog: &Composite, k: usize, dtype: DType, exact: &[bool]) -> bool {
    let input = CRef::Input(k as u32);
    if prog.outputs.contains(&input) {
        return false;
    }
    if sl::cast_convertible(prog.inputs[k], dtype) {
        // Rounded as the reference's cast rounds: only such casts may read it.
        return prog
            .nodes
            .iter()
            .filter(|n| n.args.contains(&input))
            .all(|n| n.op == ScalarOp::Cast(dtype));
    }
    if !sl::load_convertible(prog.inputs[k], dtype) {
        return false;
    }
    prog.nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.args.contains(&input))
        .all(|(i, n)| {
            let orig: SmallVec<[DType; 3]> = n.args.iter().map(|&a| prog.dtype_of(a)).collect();
            let mapped: SmallVec<[DType; 3]> = n
                .args
                .iter()
                .map(|&a| if a == input { dtype } else { prog.dtype_of(a) })
                .collect();
            let in_float = n.op.computes_in_float(&orig, n.dtype);
            if n.op == ScalarOp::Cast(dtype) {
                true
            } else if dtype.is_float() {
                in_float || exact[i]
            } else {
                !in_float
                    && n.op.computes_in_u64(&orig, n.dtype)
                        == n.op.computes_in_u64(&mapped, n.dtype)
            }
        })
}

/// Whether node `i` of `prog` is a cast of a value of the path's `dtype`
/// (a node's or an input's) to a narrower dtype that no node reads (only
/// outputs): the path computes its argument and converts it as it stores
/// the output ([`sl::store_converted`]), with the reference's conversion.
fn narrows_on_store(prog: &Composite, i: usize, dtype: DType) -> bool {
    let n = &prog.nodes[i];
    // A node's value or an input of the path's dtype (never converted).
    let of_path_value = match n.args[..] {
        [a @ (CRef::Node(_) | CRef::Input(_))] => prog.dtype_of(a) == dtype,
        _ => false,
    };
    n.op == ScalarOp::Cast(n.dtype)
        && sl::store_convertible(dtype, n.dtype)
        && of_path_value
        && prog
            .nodes
            .iter()
            .all(|m| !m.args.contains(&CRef::Node(i as u32)))
}

impl VecPlan {
    /// Whether any output is stored in another dtype than the path's
    /// (converted as it is stored, see [`narrows_on_store`], or held in
    /// narrow lanes).
    pub(super) fn narrows(&self, prog: &Composite) -> bool {
        self.narrowed.iter().any(Option::is_some)
            || prog.outputs.iter().any(|&o| self.narrow(o).is_some())
    }

    /// The narrow dtype whose lanes hold value `r`, if any (see
    /// [`sl::narrow_lanes`]).
    fn narrow(&self, r: CRef) -> Option<DType> {
        let d = match r {
            CRef::Node(k) => self.lane[k as usize],
            CRef::Input(k) => self.input_lane[k as usize],
            CRef::Const(_) => return None,
        };
        (d != self.dtype && d != DType::Bool).then_some(d)
    }
}

/// [`vector_plan`] on lanes of `dtype`; with `small` (an `f64` path, the
/// program's [`small_int_plan`]), computing 8- and 16-bit integer work in
/// its lanes.
fn vector_plan_on(
    prog: &Composite,
    dtype: DType,
    pre_stage: bool,
    pair_calls: bool,
    small: Option<Vec<Option<bool>>>,
) -> Option<VecPlan> {
    let float = dtype.is_float();
    if !float && !sl::int_vector_dtype(dtype) {
        return None;
    }
    // Values are of `dtype`, except inputs converted on load, values in
    // narrow lanes and results narrowed on store; bool values exist only
    // between nodes, as lane masks (see `scalar`'s module header), and as
    // outputs. A constant read by a node computed on lanes of `lane` is of
    // that dtype, or on integer lanes an integer constant whose value
    // `lane` represents (the splat then compares and computes as the
    // reference's `i64` domain does).
    let const_ok = |c: &crate::ops::ScalarConst, lane: DType| {
        if c.dtype == lane {
            return true;
        }
        // A narrower float constant widens exactly (`xf > 0.5` compares in
        // the `f64` path's lanes, as the reference's promotion does).
        if lane.is_float() && c.dtype.is_float() && c.dtype.size_of() < lane.size_of() {
            return true;
        }
        if lane.is_float() || c.dtype == DType::Bool || c.dtype.is_float() {
            return false;
        }
        let v = if c.dtype == DType::U64 {
            c.bits as i128
        } else {
            c.as_i64() as i128
        };
        lane.int_range()
            .is_some_and(|(lo, hi)| (lo..=hi).contains(&v))
    };
    // Per node: computed exactly in f64 lanes, and whether wrapped.
    let small: Vec<Option<bool>> = small.unwrap_or_else(|| vec![None; prog.nodes.len()]);
    let exact: Vec<bool> = small.iter().map(Option::is_some).collect();
    // Each input's lanes: the path's (its own dtype, or converted as it is
    // loaded), or its own narrow lanes, loaded as they are: when a node of
    // its dtype reads it (that node computes in those lanes), or when it
    // cannot be converted.
    let input_lane: Vec<DType> = (0..prog.inputs.len())
        .map(|k| {
            let d = prog.inputs[k];
            let input = CRef::Input(k as u32);
            let narrow = sl::narrow_lanes(dtype, d);
            if d == dtype {
                Some(dtype)
            } else if narrow
                && prog
                    .nodes
                    .iter()
                    .any(|n| n.dtype == d && n.args.contains(&input))
            {
                Some(d)
            } else if converts_on_load(prog, k, dtype, &exact) {
                Some(dtype)
            } else {
                narrow.then_some(d)
            }
        })
        .collect::<Option<_>>()?;
    let narrowed: Vec<Option<DType>> = (0..prog.nodes.len())
        .map(|i| narrows_on_store(prog, i, dtype).then_some(prog.nodes[i].dtype))
        .collect();
    let mut level = Vec::with_capacity(prog.nodes.len());
    let mut block = Vec::with_capacity(prog.nodes.len());
    let mut lane: Vec<DType> = Vec::with_capacity(prog.nodes.len());
    for (i, n) in prog.nodes.iter().enumerate() {
        let l = n
            .args
            .iter()
            .map(|&a| ref_level(&level, a))
            .max()
            .unwrap_or(0);
        // The node's lanes: a narrow dtype computes in its own lanes, every
        // other value in the path's (bool as lane masks of its width).
        let own = if narrowed[i].is_none() && sl::narrow_lanes(dtype, n.dtype) {
            n.dtype
        } else {
            dtype
        };
        // An exact small-integer node's integer constants are in its range
        // (checked by `small_int_in_f64`), splat as `f64`.
        if !exact[i]
            && n.args
                .iter()
                .any(|&a| matches!(a, CRef::Const(c) if !const_ok(&c, own)))
        {
            return None;
        }
        // The arguments' lanes (constants are splat in the node's own).
        let arg_lanes: SmallVec<[DType; 3]> = n
            .args
            .iter()
            .map(|&a| match a {
                CRef::Const(_) => own,
                CRef::Input(k) => input_lane[k as usize],
                CRef::Node(j) => lane[j as usize],
            })
            .collect();
        let narrow_arg = |d: DType| d != dtype && d != DType::Bool;
        let vector = if own != dtype {
            // Narrow lanes: a cast of a path value to them, or an op of
            // values in the same lanes.
            let demote =
                n.op == ScalarOp::Cast(own) && arg_lanes[..] == [dtype] && sl::demotes_to(own);
            let same = arg_lanes.iter().all(|&a| a == own)
                && if own.is_float() {
                    sl::vector_capable(n.op, n.args.len(), own)
                } else {
                    sl::int_vector_capable(n.op, own)
                };
            demote || same
        } else {
            // A path value may read narrow lanes converted exactly to its
            // own when the reference computes it from that exact value: a
            // cast to the path's dtype, or an op in the float domain.
            let promotes =
                !arg_lanes.iter().any(|&d| narrow_arg(d)) || n.op == ScalarOp::Cast(dtype) || {
                    let orig: SmallVec<[DType; 3]> =
                        n.args.iter().map(|&a| prog.dtype_of(a)).collect();
                    n.op.computes_in_float(&orig, n.dtype)
                };
            let arg_dtypes: SmallVec<[DType; 3]> = arg_lanes
                .iter()
                .map(|&d| if narrow_arg(d) { dtype } else { d })
                .collect();
            let args_are = |ok: &dyn Fn(DType) -> bool| arg_dtypes.iter().all(|&d| ok(d));
            promotes
                && match (n.dtype, float) {
                    _ if narrowed[i].is_some() => true,
                    // Its arguments are in the path's lanes (8- and 16-bit
                    // integers have no narrow lanes), or a lane mask.
                    _ if exact[i] => true,
                    (DType::Bool, _) => sl::mask_capable(n.op, &arg_dtypes, dtype),
                    (d, _) if d != dtype || !args_are(&|a| a == dtype || a == DType::Bool) => false,
                    (_, true) => sl::vector_capable(n.op, n.args.len(), dtype),
                    (_, false) => sl::int_vector_capable(n.op, dtype),
                }
        };
        // A block-wise call reads its arguments staged in its own lanes: the
        // path's, or a float node's narrow lanes (`exp(xf) * y` calls the
        // `f32` block function on values staged packed as `f32`). A constant
        // is staged in the path's lanes, shared by every reader, so a node
        // in narrow lanes reads none.
        let block_lanes_ok = if own == dtype {
            n.dtype == dtype
        } else {
            own.is_float() && !n.args.iter().any(|a| matches!(a, CRef::Const(_)))
        };
        lane.push(if n.dtype == DType::Bool && narrowed[i].is_none() {
            DType::Bool
        } else {
            own
        });
        if vector {
            level.push(l);
            block.push(false);
        } else if block_lanes_ok
            && arg_lanes.iter().all(|&a| a == own)
            && mathcalls::block_symbol(n.op, own).is_some()
        {
            level.push(l + 1);
            block.push(true);
        } else {
            return None;
        }
    }
    // Outputs of the path's dtype, bool, narrowed on store, or held in
    // narrow lanes of their own dtype.
    let outputs_ok = prog.outputs.iter().all(|&o| {
        let d = prog.dtype_of(o);
        let held = match o {
            CRef::Node(i) => narrowed[i as usize].is_some() || lane[i as usize] == d,
            CRef::Input(k) => input_lane[k as usize] == d,
            CRef::Const(_) => false,
        };
        d == dtype || d == DType::Bool || held
    });
    if !outputs_ok {
        return None;
    }
    let max_level = level.iter().copied().max().unwrap_or(0);
    let (pre, mut folded) = if pre_stage {
        pre_stages(prog, dtype, &level, &block)
    } else {
        (vec![None; level.len()], vec![false; level.len()])
    };
    let (partner, paired) = if pair_calls {
        pairs(prog, dtype, &level, &block, &pre, &mut folded)
    } else {
        (vec![None; level.len()], vec![false; level.len()])
    };
    let mut slots = FxHashMap::default();
    if max_level > 0 {
        let add = |r: CRef, slots: &mut FxHashMap<CRef, usize>| {
            let k = slots.len();
            slots.entry(r).or_insert(k);
        };
        for (i, n) in prog.nodes.iter().enumerate() {
            if folded[i] {
                // Computed by the pre-staged call from its inputs in memory.
                continue;
            }
            if block[i] {
                // A paired node's argument (`neg(a)`) is its partner's `a`.
                if pre[i].is_none() && !paired[i] {
                    for &a in &n.args {
                        add(a, &mut slots);
                    }
                }
                add(CRef::Node(i as u32), &mut slots);
            } else {
                for &a in &n.args {
                    // Constants are splatted where they are used, never staged.
                    if !matches!(a, CRef::Const(_))
                        && (ref_level(&level, a) < level[i]
                            || (matches!(a, CRef::Input(_)) && level[i] > 0))
                    {
                        add(a, &mut slots);
                    }
                }
            }
        }
        for &o in &prog.outputs {
            if matches!(o, CRef::Input(_)) {
                add(o, &mut slots);
            }
        }
    }
    Some(VecPlan {
        dtype,
        level,
        block,
        pre,
        folded,
        partner,
        paired,
        narrowed,
        small,
        lane,
        input_lane,
        max_level,
        slots,
    })
}

/// Which code paths an element-wise kernel gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Paths {
    /// The vector path when the program has one, and the scalar path.
    Vector,
    /// The scalar path only: for a node whose iteration has statically one
    /// element (a 0-d result such as a mean's `sum / n`), where the vector
    /// path would never run and would only add code to compile.
    ScalarOnly,
}

/// Builds the kernel of `prog` with `paths` into `jb`, computing the part
/// `hoisted` cuts off (when given) once per call; returns its index.
pub(crate) fn build(
    jb: &mut JitBuilder,
    prog: &Composite,
    hoisted: Option<&Hoisted>,
    paths: Paths,
    name: &str,
) -> Result<usize> {
    let ptr = jb.ptr_type();
    let n_args = prog.inputs.len();
    let prog = hoisted.map_or(prog, |h| &h.main);
    let plan = match paths {
        Paths::Vector => vector_plan(prog, jb.options().pre_stage, jb.options().pair_calls),
        Paths::ScalarOnly => None,
    };
    let mut imports = import_callees(jb, prog, plan.as_ref())?;
    if let Some(h) = hoisted {
        imports.extend(import_callees(jb, &h.pre, None)?);
    }
    jb.ctx.func.signature = jb.signature(&[ptr, ptr, types::I64], &[]);
    let JitBuilder {
        module, ctx, fctx, ..
    } = jb;
    let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
    let callees = declare_callees(module, &mut b, imports);
    let n_in = prog.inputs.len();
    let n_ops = n_in + prog.outputs.len();
    let out_dts = prog.output_dtypes();
    let op_dt = |k: usize| {
        if k < n_in {
            prog.inputs[k]
        } else {
            out_dts[k - n_in]
        }
    };

    let (pp, sp, n) = open_kernel(&mut b);
    let (pp, sp) = match hoisted {
        Some(h) => hoist::emit_prologue(
            &mut b,
            &callees,
            h,
            (pp, sp),
            (0, n_args, prog.outputs.len()),
        )?,
        None => (pp, sp),
    };
    let f = sl::OWN;
    let mut ptrs = Vec::with_capacity(n_ops);
    let mut strides = Vec::with_capacity(n_ops);
    for k in 0..n_ops {
        ptrs.push(b.ins().load(ptr, f, pp, (8 * k) as i32));
        strides.push(b.ins().load(types::I64, f, sp, (8 * k) as i32));
    }
    let exit = b.create_block();
    let scalar_head = b.create_block();
    let i_var = b.declare_var(types::I64);
    let zero = b.ins().iconst(types::I64, 0);
    b.def_var(i_var, zero);

    if let Some(plan) = &plan {
        let esz = plan.dtype.size_of() as i64;
        let lanes = 16 / esz;
        // Vector path condition (a bool output's elements are bytes). The
        // inputs, and outputs of the path's element size, are checked by one
        // runtime call when there are many (see `strides_by_call`).
        let (call_in, call_out) = strides_by_call(prog, plan);
        let mut ok = b.ins().iconst(types::I8, 1);
        let groups = [(call_in, 0, n_in, 1), (call_out, n_in, n_ops - n_in, 0)];
        for (by_call, first, count, allow_zero) in groups {
            if !by_call {
                continue;
            }
            let table = b.ins().iadd_imm_s(sp, 8 * first as i64);
            let args = [
                table,
                b.ins().iconst(types::I64, count as i64),
                b.ins().iconst(types::I64, esz),
                b.ins().iconst(types::I64, allow_zero),
            ];
            let call = b.ins().call(callees[STRIDES_ARE], &args);
            let c = b.inst_results(call)[0];
            ok = b.ins().band(ok, c);
        }
        for (k, &s) in strides.iter().enumerate() {
            if (k < n_in && call_in) || (k >= n_in && call_out) {
                continue;
            }
            let c =
                b.ins()
                    .icmp_imm_s(IntCC::Equal, s, op_dt(k).size_of().min(esz as usize) as i64);
            let c = if k < n_in {
                let z = b.ins().icmp_imm_s(IntCC::Equal, s, 0);
                b.ins().bor(c, z)
            } else {
                c
            };
            ok = b.ins().band(ok, c);
        }
        let big = b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, n, lanes);
        ok = b.ins().band(ok, big);
        let vec_setup = b.create_block();
        b.ins().brif(ok, vec_setup, &[], scalar_head, &[]);
        b.switch_to_block(vec_setup);
        b.seal_block(vec_setup);
        // One block-wise op straight from the inputs to the output: when every
        // operand is contiguous, one runtime call over all n elements (no
        // staging through the scratch area).
        let direct = prog.nodes.len() == 1
            && plan.block[0]
            && prog.nodes[0]
                .args
                .iter()
                .all(|&a| matches!(a, CRef::Input(k) if prog.inputs[k as usize] == plan.dtype))
            && prog.outputs.len() == 1
            && prog.outputs[0] == CRef::Node(0);
        // The same for one pre-staged call (`f(a ⊕ b)`): every operand
        // already has a stride the runtime takes (0 or the element size).
        let direct_pre = prog.nodes.len() == 2
            && plan.pre[1].is_some()
            && prog.outputs.len() == 1
            && prog.outputs[0] == CRef::Node(1);
        if direct_pre {
            emit_pre_call(
                &mut b,
                &callees,
                plan,
                prog,
                (&ptrs, &strides),
                1,
                zero,
                n,
                ptrs[n_in],
            );
            b.ins().jump(exit, &[]);
        } else {
            if direct {
                let mut all = b.ins().iconst(types::I8, 1);
                for &s in &strides {
                    let c = b.ins().icmp_imm_s(IntCC::Equal, s, esz);
                    all = b.ins().band(all, c);
                }
                let direct_blk = b.create_block();
                let staged_blk = b.create_block();
                b.ins().brif(all, direct_blk, &[], staged_blk, &[]);
                b.switch_to_block(direct_blk);
                b.seal_block(direct_blk);
                let sym = mathcalls::block_symbol(prog.nodes[0].op, plan.dtype).expect("planned");
                let mut args: Vec<Value> = prog.nodes[0]
                    .args
                    .iter()
                    .map(|a| match a {
                        CRef::Input(k) => ptrs[*k as usize],
                        _ => unreachable!("checked: inputs only"),
                    })
                    .collect();
                args.push(ptrs[n_in]);
                args.push(n);
                b.ins().call(callees[sym], &args);
                b.ins().jump(exit, &[]);
                b.switch_to_block(staged_blk);
                b.seal_block(staged_blk);
            }
            let bases = vector_bases(&mut b, ptr, &prog.inputs, &ptrs[..n_in], &strides[..n_in]);
            let flag = prefetch_flag(&mut b, n);
            let cx = VecCtx::new(plan, prog, &bases, &strides, &ptrs).with_prefetch(
                flag,
                (pp, sp),
                true,
            );
            // Blocks of at most BLOCK elements, even without block-wise calls:
            // each block prefetches the next one (see `emit_levels`).
            let sbase = if plan.slots.is_empty() {
                // Nothing is staged: the scratch base is never dereferenced.
                b.ins().iconst(ptr, 0)
            } else {
                let sbytes = (plan.slots.len() * BLOCK) as u32 * esz as u32;
                let scratch = b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    sbytes,
                    4,
                ));
                b.ins().stack_addr(ptr, scratch, 0)
            };
            let (blk_head, blk, m) = open_block_loop(&mut b, i_var, n, lanes, scalar_head);
            cx.emit_levels(&mut b, &callees, sbase, blk, m)?;
            let nb = b.ins().iadd(blk, m);
            b.def_var(i_var, nb);
            b.ins().jump(blk_head, &[]);
            b.seal_block(blk_head);
        }
    } else {
        b.ins().jump(scalar_head, &[]);
    }

    // Scalar path: elements i..n with arbitrary strides.
    b.switch_to_block(scalar_head);
    b.seal_block(scalar_head);
    counted_loop(&mut b, i_var, n, 1, |b, i| {
        let outs = sl::emit_scalar_program(b, &callees, prog, &ptrs[..n_in], &strides[..n_in], i)?;
        for (o, &v) in outs.iter().enumerate() {
            let k = n_in + o;
            let off = b.ins().imul(i, strides[k]);
            let addr = b.ins().iadd(ptrs[k], off);
            sl::store(b, op_dt(k), v, addr);
        }
        Ok(())
    })?;
    b.ins().jump(exit, &[]);
    b.switch_to_block(exit);
    b.seal_block(exit);
    b.ins().return_(&[]);
    b.finalize(cranelift_module::Module::target_config(module));
    jb.define_current(name)
}

/// Emits the pre-staged runtime call of block-wise node `idx` (see
/// [`PreStaged`]) for elements `blk..blk + m`, writing to `out`. Operands
/// are the kernel's `(pointers, strides)` (inputs first); an input of
/// stride 0 and a constant (stored to a stack slot) are passed as scalars.
#[allow(clippy::too_many_arguments)]
fn emit_pre_call(
    b: &mut FunctionBuilder<'_>,
    callees: &Callees,
    plan: &VecPlan,
    prog: &Composite,
    (ptrs, strides): (&[Value], &[Value]),
    idx: usize,
    blk: Value,
    m: Value,
    out: Value,
) {
    use kiln_runtime::math::{PRE_A_SCALAR, PRE_B_SCALAR};
    let pre = plan.pre[idx].expect("a pre-staged node");
    let ptr_ty = b.func.dfg.value_type(out);
    let mut mode = b.ins().iconst(types::I64, pre.op as i64);
    let mut args = Vec::with_capacity(5);
    for (a, flag) in pre.args.into_iter().zip([PRE_A_SCALAR, PRE_B_SCALAR]) {
        let (addr, bits) = match a {
            CRef::Input(k) => {
                let k = k as usize;
                let off = b.ins().imul(blk, strides[k]);
                let addr = b.ins().iadd(ptrs[k], off);
                let is0 = b.ins().icmp_imm_s(IntCC::Equal, strides[k], 0);
                let set = b.ins().iconst(types::I64, flag as i64);
                let clear = b.ins().iconst(types::I64, 0);
                (addr, b.ins().select(is0, set, clear))
            }
            CRef::Const(c) => {
                let esz = plan.dtype.size_of() as u32;
                let slot = b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    esz,
                    3,
                ));
                let v = sl::constant(b, plan.dtype, c.bits);
                let addr = b.ins().stack_addr(ptr_ty, slot, 0);
                b.ins().store(sl::OWN, v, addr, 0);
                (addr, b.ins().iconst(types::I64, flag as i64))
            }
            CRef::Node(_) => unreachable!("pre-stage operands are inputs or constants"),
        };
        args.push(addr);
        mode = b.ins().bor(mode, bits);
    }
    args.extend([out, m, mode]);
    let sym = mathcalls::pre_block_symbol(prog.nodes[idx].op, plan.dtype).expect("planned");
    b.ins().call(callees[sym], &args);
}

/// Opens a kernel of the element-wise ABI `fn(ptrs, strides, n)`: the
/// entry block (sealed, current) and its three parameters.
pub(super) fn open_kernel(b: &mut FunctionBuilder<'_>) -> (Value, Value, Value) {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    let p = b.block_params(entry);
    (p[0], p[1], p[2])
}

/// Opens a block-wise loop at position `i_var` of `n` elements: a head block
/// that leaves for `exit` when fewer than `lanes` elements remain, and the
/// body, where the builder is left. Returns the head (to jump back to and
/// seal), the block start and its length `m` (a multiple of `lanes`, at
/// most [`BLOCK`]).
pub(super) fn open_block_loop(
    b: &mut FunctionBuilder<'_>,
    i_var: Variable,
    n: Value,
    lanes: i64,
    exit: Block,
) -> (Block, Value, Value) {
    let head = b.create_block();
    let body = b.create_block();
    b.ins().jump(head, &[]);
    b.switch_to_block(head);
    let blk = b.use_var(i_var);
    let rem = b.ins().isub(n, blk);
    let c = b
        .ins()
        .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, rem, lanes);
    b.ins().brif(c, body, &[], exit, &[]);
    b.switch_to_block(body);
    b.seal_block(body);
    let bmax = b.ins().iconst(types::I64, BLOCK as i64);
    let m = b.ins().smin(rem, bmax);
    let m = b.ins().band_imm_s(m, !(lanes - 1));
    (head, blk, m)
}

/// Emits a counted loop at the current position: while `i + step <= end`,
/// `body(i)` then `i += step`, where `i` lives in `i_var` (its value on
/// entry is the first position). Leaves the builder in the sealed block
/// after the loop, where `i_var` holds the first position not visited. With
/// `step == 1` the test is `i < end`.
pub(super) fn counted_loop(
    b: &mut FunctionBuilder<'_>,
    i_var: Variable,
    end: Value,
    step: i64,
    body: impl FnMut(&mut FunctionBuilder<'_>, Value) -> Result<()>,
) -> Result<()> {
    counted_loop_with(b, i_var, end, step, false, body)
}

/// [`counted_loop`] whose branch into the body is marked
/// [`jit::FIRST_TIER_SKIP`] when `skippable`: the first tier then never
/// enters it, so the loop after it (which must handle every iteration
/// this one would, with the same per-element instructions) does all of
/// them. Only for loops whose iterations carry nothing but the index.
pub(super) fn counted_loop_with(
    b: &mut FunctionBuilder<'_>,
    i_var: Variable,
    end: Value,
    step: i64,
    skippable: bool,
    mut body: impl FnMut(&mut FunctionBuilder<'_>, Value) -> Result<()>,
) -> Result<()> {
    let head = b.create_block();
    let blk = b.create_block();
    let done = b.create_block();
    b.ins().jump(head, &[]);
    b.switch_to_block(head);
    let i = b.use_var(i_var);
    let (c, next) = if step == 1 {
        (b.ins().icmp(IntCC::SignedLessThan, i, end), None)
    } else {
        let next = b.ins().iadd_imm_s(i, step);
        let c = b.ins().icmp(IntCC::SignedLessThanOrEqual, next, end);
        (c, Some(next))
    };
    if skippable {
        b.set_srcloc(SourceLoc::new(jit::FIRST_TIER_SKIP));
    }
    b.ins().brif(c, blk, &[], done, &[]);
    b.set_srcloc(SourceLoc::default());
    b.switch_to_block(blk);
    b.seal_block(blk);
    body(b, i)?;
    let next = match next {
        Some(v) => v,
        None => b.ins().iadd_imm_s(i, 1),
    };
    b.def_var(i_var, next);
    b.ins().jump(head, &[]);
    b.seal_block(head);
    b.switch_to_block(done);
    b.seal_block(done);
    Ok(())
}

/// Imports the callees `prog` needs into `jb`: the per-element shims of its
/// scalar path and, with a vector `plan`, the block-wise runtime functions.
pub(super) fn import_callees(
    jb: &mut JitBuilder,
    prog: &Composite,
    plan: Option<&VecPlan>,
) -> Result<Vec<(&'static str, FuncId)>> {
    let ptr = jb.ptr_type();
    let mut imports = Vec::new();
    for n in &prog.nodes {
        let dts: Vec<DType> = n.args.iter().map(|&a| prog.dtype_of(a)).collect();
        if let Some((sym, sig)) = sl::scalar_callee(n.op, &dts, n.dtype) {
            let (p, r) = match sig {
                ScalarSig::F1 => (vec![types::F64], vec![types::F64]),
                ScalarSig::F2 => (vec![types::F64, types::F64], vec![types::F64]),
                ScalarSig::I2 => (vec![types::I64, types::I64], vec![types::I64]),
            };
            imports.push((sym, jb.import(sym, &p, &r)?));
        }
    }
    if let Some(p) = plan {
        // Every blocked path (and a fused reduction's is always blocked)
        // prefetches its next block.
        let i64 = types::I64;
        let params = [ptr, ptr, i64, i64, i64, i64];
        imports.push((PREFETCH, jb.import(PREFETCH, &params, &[])?));
        if strides_by_call(prog, p) != (false, false) {
            let params = [ptr, i64, i64, i64];
            imports.push((STRIDES_ARE, jb.import(STRIDES_ARE, &params, &[types::I8])?));
        }
        for (i, n) in prog.nodes.iter().enumerate() {
            if p.pre[i].is_some() {
                let sym = mathcalls::pre_block_symbol(n.op, p.dtype).expect("planned");
                let params = [ptr, ptr, ptr, types::I64, types::I64];
                imports.push((sym, jb.import(sym, &params, &[])?));
            } else if p.paired[i] {
                // Written by its partner's paired call.
            } else if p.partner[i].is_some() {
                let sym = mathcalls::pair_block_symbol(n.op, p.dtype).expect("planned");
                let params = [ptr, ptr, ptr, types::I64];
                imports.push((sym, jb.import(sym, &params, &[])?));
            } else if p.block[i] {
                let own = p.narrow(CRef::Node(i as u32)).unwrap_or(p.dtype);
                let sym = mathcalls::block_symbol(n.op, own).expect("planned");
                let mut params = vec![ptr; n.args.len() + 1];
                params.push(types::I64);
                imports.push((sym, jb.import(sym, &params, &[])?));
            }
        }
    }
    Ok(imports)
}

/// Declares imported callees in the function being built.
pub(super) fn declare_callees(
    module: &mut JITModule,
    b: &mut FunctionBuilder<'_>,
    imports: Vec<(&'static str, FuncId)>,
) -> Callees {
    let mut callees: Callees = FxHashMap::default();
    for (sym, id) in imports {
        let fref = cranelift_module::Module::declare_func_in_func(module, id, b.func);
        callees.insert(sym, fref);
    }
    callees
}

/// The vector-path base address of each input (stride 0 or the element
/// size; `dtypes` the inputs' dtypes as stored): a broadcast input (stride 0)
/// reads a stack slot holding its element splat over [`UNROLL`] vectors of
/// 16 bytes (so that the `u`-th vector of an unrolled iteration is at the
/// same byte offset from the iteration's address for both kinds: `16 * u`,
/// or `u` times the bytes of one vector's worth of a narrower input
/// converted on load), the others read their own memory.
pub(super) fn vector_bases(
    b: &mut FunctionBuilder<'_>,
    ptr: cranelift_codegen::ir::Type,
    dtypes: &[DType],
    ptrs: &[Value],
    strides: &[Value],
) -> Vec<Value> {
    let mut bases = Vec::with_capacity(ptrs.len());
    for ((&p, &s), &dtype) in ptrs.iter().zip(strides).zip(dtypes) {
        let slot = b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            16 * UNROLL as u32,
            4,
        ));
        let saddr = b.ins().stack_addr(ptr, slot, 0);
        // One element in the lanes of its own size (a bool is a byte).
        let vty = sl::vector_type(dtype);
        let x = b.ins().load(vty.lane_type(), sl::OPERAND, p, 0);
        let v = b.ins().splat(vty, x);
        for u in 0..UNROLL {
            b.ins().store(sl::OWN, v, saddr, 16 * u as i32);
        }
        let is0 = b.ins().icmp_imm_s(IntCC::Equal, s, 0);
        bases.push(b.ins().select(is0, saddr, p));
    }
    bases
}

/// The vector path of one program inside a kernel being built: the plan
/// and the operands' pointers and strides (inputs first, then outputs).
pub(super) struct VecCtx<'a> {
    /// The block-wise node whose runtime call writes the output directly.
    direct_out: Option<u32>,
    plan: &'a VecPlan,
    prog: &'a Composite,
    bases: &'a [Value],
    strides: &'a [Value],
    ptrs: &'a [Value],
    n_in: usize,
    vty: cranelift_codegen::ir::Type,
    esz: i64,
    /// When the blocked path prefetches the next block: `Some((flag,
    /// arrays, outputs))` with `flag` an `i8` value, true for calls long
    /// enough to stream from memory ([`prefetch_flag`]), `arrays` the
    /// addresses of the inputs' entries in the kernel's pointer and stride
    /// arguments (the outputs' follow them), and `outputs` whether the
    /// outputs are prefetched too (real memory in an element-wise kernel,
    /// not a reduction's scratch). `None`: never.
    prefetch: Option<(Value, (Value, Value), bool)>,
    /// Vectors per main-loop iteration ([`unroll_for`]).
    unroll: usize,
    /// Bool outputs stay lane masks (a fused reduction's scratch block)
    /// instead of being stored as bytes.
    mask_outputs: bool,
}

impl<'a> VecCtx<'a> {
    /// The context of `prog` with vector plan `plan`, operand pointers
    /// `ptrs` and byte `strides` (inputs then outputs; outputs are
    /// contiguous on the vector path) and the inputs' [`vector_bases`].
    pub(super) fn new(
        plan: &'a VecPlan,
        prog: &'a Composite,
        bases: &'a [Value],
        strides: &'a [Value],
        ptrs: &'a [Value],
    ) -> Self {
        // A block-wise node that is the program's only output and feeds no
        // other node is written by its runtime call straight into the output
        // (contiguous on this path) instead of through the scratch area. All
        // inputs are read (staged) at level 0, before any such write.
        let direct_out = match prog.outputs.as_slice() {
            [CRef::Node(i)]
                if plan.block[*i as usize]
                    && plan.narrow(CRef::Node(*i)).is_none()
                    && prog.nodes.iter().all(|n| !n.args.contains(&CRef::Node(*i))) =>
            {
                Some(*i)
            }
            _ => None,
        };
        let esz = plan.dtype.size_of() as i64;
        VecCtx {
            direct_out,
            plan,
            prog,
            bases,
            strides,
            ptrs,
            n_in: prog.inputs.len(),
            vty: sl::vector_type(plan.dtype),
            esz,
            prefetch: None,
            unroll: unroll_for(prog),
            mask_outputs: false,
        }
    }

    /// The narrow dtype whose lanes hold value `r`, if any.
    fn narrow(&self, r: CRef) -> Option<DType> {
        self.plan.narrow(r)
    }

    /// The vector type holding value `r`: its narrow lanes' type, else the
    /// path's (bool lane masks included).
    fn value_type(&self, r: CRef) -> cranelift_codegen::ir::Type {
        self.narrow(r).map_or(self.vty, sl::vector_type)
    }

    /// Makes bool outputs lane masks of the path's vector width (for a
    /// fused reduction's scratch block) instead of bytes.
    pub(super) fn with_mask_outputs(mut self) -> Self {
        self.mask_outputs = true;
        self
    }

    /// The byte size of output `o`'s elements as this path writes them.
    fn out_size(&self, o: usize) -> i64 {
        let r = self.prog.outputs[o];
        let d = self.prog.dtype_of(r);
        if matches!(r, CRef::Node(k) if self.plan.narrowed[k as usize].is_some())
            || self.narrow(r).is_some()
        {
            d.size_of() as i64
        } else if d == DType::Bool && !self.mask_outputs {
            1
        } else {
            self.esz
        }
    }

    /// Makes the blocked path prefetch the next block of every input, and
    /// of every output when `outputs`, in calls where the `i8` value `flag`
    /// is true; `arrays` are the addresses of the inputs' first pointer and
    /// stride arguments (the outputs' follow the inputs').
    pub(super) fn with_prefetch(
        mut self,
        flag: Value,
        arrays: (Value, Value),
        outputs: bool,
    ) -> Self {
        self.prefetch = Some((flag, arrays, outputs));
        self
    }

    /// The blocked vector path for elements `blk..blk + m` (`m` a multiple
    /// of the lane count, at most [`BLOCK`]): every level in turn, its
    /// block-wise runtime calls then one vector loop, staging values in the
    /// scratch area at `sbase`, writing the outputs.
    pub(super) fn emit_levels(
        &self,
        b: &mut FunctionBuilder<'_>,
        callees: &Callees,
        sbase: Value,
        blk: Value,
        m: Value,
    ) -> Result<()> {
        let plan = self.plan;
        let prog = self.prog;
        let (n_in, esz, ptrs, direct_out) = (self.n_in, self.esz, self.ptrs, self.direct_out);
        let lanes = 16 / esz;
        if let Some((flag, (pp, sp), outputs)) = self.prefetch {
            let fetch = b.create_block();
            let go_on = b.create_block();
            b.ins().brif(flag, fetch, &[], go_on, &[]);
            b.switch_to_block(fetch);
            b.seal_block(fetch);
            // Start loading the next block's inputs (a broadcast input has
            // stride 0 and asks for nothing), then its outputs (contiguous on
            // this path: their strides are their element sizes).
            let next = b.ins().iadd(blk, m);
            let n = b.ins().iconst(types::I64, n_in as i64);
            let read = b.ins().iconst(types::I64, 0);
            b.ins().call(callees[PREFETCH], &[pp, sp, n, next, m, read]);
            if outputs {
                let n_out = self.prog.outputs.len() as i64;
                let (po, so) = (
                    b.ins().iadd_imm_s(pp, 8 * n_in as i64),
                    b.ins().iadd_imm_s(sp, 8 * n_in as i64),
                );
                let n = b.ins().iconst(types::I64, n_out);
                let write = b.ins().iconst(types::I64, 1);
                b.ins()
                    .call(callees[PREFETCH], &[po, so, n, next, m, write]);
            }
            b.ins().jump(go_on, &[]);
            b.switch_to_block(go_on);
            b.seal_block(go_on);
        }
        let j_var = b.declare_var(types::I64);
        for lvl in 0..=plan.max_level {
            if lvl > 0 {
                // Where block-wise node `k`'s call writes: the program's only
                // output (contiguous here) in place, else its scratch slot.
                let result_addr = |b: &mut FunctionBuilder<'_>, k: usize| {
                    if direct_out == Some(k as u32) {
                        let off = b.ins().imul_imm_s(blk, esz);
                        b.ins().iadd(ptrs[n_in], off)
                    } else {
                        b.ins().iadd_imm_s(
                            sbase,
                            (plan.slots[&CRef::Node(k as u32)] * BLOCK) as i64 * esz,
                        )
                    }
                };
                // Pre-staged calls first: they read inputs (see `pre_stages`).
                for idx in 0..prog.nodes.len() {
                    if plan.pre[idx].is_some() && plan.level[idx] == lvl {
                        let out = result_addr(b, idx);
                        emit_pre_call(
                            b,
                            callees,
                            plan,
                            prog,
                            (ptrs, self.strides),
                            idx,
                            blk,
                            m,
                            out,
                        );
                    }
                }
                for (idx, node) in prog.nodes.iter().enumerate() {
                    let plain = plan.block[idx] && plan.pre[idx].is_none() && !plan.paired[idx];
                    if plain && plan.level[idx] == lvl {
                        let mut args: Vec<Value> = node
                            .args
                            .iter()
                            .map(|a| {
                                b.ins()
                                    .iadd_imm_s(sbase, (plan.slots[a] * BLOCK) as i64 * esz)
                            })
                            .collect();
                        args.push(result_addr(b, idx));
                        let sym = match plan.partner[idx] {
                            Some(k2) => {
                                args.push(result_addr(b, k2));
                                mathcalls::pair_block_symbol(node.op, plan.dtype)
                            }
                            None => mathcalls::block_symbol(
                                node.op,
                                plan.narrow(CRef::Node(idx as u32)).unwrap_or(plan.dtype),
                            ),
                        }
                        .expect("planned");
                        args.push(m);
                        b.ins().call(callees[sym], &args);
                    }
                }
            }
            if !self.level_has_vector_work(lvl) {
                continue;
            }
            let z = b.ins().iconst(types::I64, 0);
            b.def_var(j_var, z);
            let loops: &[usize] = if self.unroll > 1 {
                &[self.unroll, 1]
            } else {
                &[1]
            };
            // The unrolled loop maps vectors independently: the first
            // tier leaves it to the single-vector loop after it.
            for &unroll in loops {
                counted_loop_with(b, j_var, m, lanes * unroll as i64, unroll > 1, |b, j| {
                    let i = b.ins().iadd(blk, j);
                    self.level_body(b, lvl, i, sbase, j, unroll)
                })?;
            }
        }
        Ok(())
    }

    /// Whether the blocked path's vector loop of level `lvl` has anything
    /// to do: a vector node to compute, a value to stage, or an output to
    /// store (a level of block-wise calls only, whose result goes straight
    /// to the output, needs no loop).
    fn level_has_vector_work(&self, lvl: usize) -> bool {
        let plan = self.plan;
        let vector_node = (0..self.prog.nodes.len())
            .any(|k| plan.level[k] == lvl && !plan.block[k] && !plan.folded[k]);
        let staged = plan.slots.keys().any(|&r| match r {
            CRef::Node(k) => plan.level[k as usize] == lvl && !plan.block[k as usize],
            _ => lvl == 0,
        });
        let output = self.prog.outputs.iter().any(|&r| {
            ref_level(&plan.level, r) == lvl
                && !matches!(r, CRef::Node(k) if Some(k) == self.direct_out)
        });
        vector_node || staged || output
    }

    /// One iteration of level `lvl`: `unroll` consecutive vectors from
    /// element `i` (block-relative index `j` into the scratch area at
    /// `sbase`). Every address is computed once per iteration; the `u`-th
    /// vector sits 16 bytes times `u` further (see [`vector_bases`]), and
    /// constants are splatted once for all of them.
    fn level_body(
        &self,
        b: &mut FunctionBuilder<'_>,
        lvl: usize,
        i: Value,
        sbase: Value,
        j: Value,
        unroll: usize,
    ) -> Result<()> {
        let plan = self.plan;
        let esz = self.esz;
        // Iteration addresses: the scratch row at `j`, each input at `i`.
        let srow = {
            let off = b.ins().imul_imm_s(j, esz);
            b.ins().iadd(sbase, off)
        };
        let slot_off =
            |r: CRef, u: usize| ((plan.slots[&r] * BLOCK) as i64 * esz + 16 * u as i64) as i32;
        // A value in narrow lanes is staged packed, as a block-wise call of
        // its dtype reads it: element `j` of its slot at `4 * j` (every
        // narrow dtype is 4 bytes wide on the `f64` path), through `nrow`.
        let lanes = 16 / esz;
        let packed = |r: CRef| self.narrow(r).map(|d| (d, lanes as usize * d.size_of()));
        let nrow = plan.slots.keys().any(|&r| packed(r).is_some()).then(|| {
            let off = b.ins().imul_imm_s(j, 4);
            b.ins().iadd(sbase, off)
        });
        let packed_off = |r: CRef, u: usize, bytes: usize| {
            ((plan.slots[&r] * BLOCK) as i64 * esz + (bytes * u) as i64) as i32
        };
        let mut in_addr: Vec<Option<Value>> = vec![None; self.n_in];
        // Constants splat once per iteration in each vector type they are
        // read in (the path's, or a node's narrow lanes).
        let mut consts: FxHashMap<(CRef, cranelift_codegen::ir::Type), Value> =
            FxHashMap::default();
        let mut splat = |b: &mut FunctionBuilder<'_>, r: CRef, ty: cranelift_codegen::ir::Type| {
            let CRef::Const(c) = r else {
                unreachable!("only constants are splat")
            };
            *consts.entry((r, ty)).or_insert_with(|| {
                if ty.lane_type().is_float() {
                    sl::float_splat(b, ty, c.as_f64())
                } else {
                    sl::int_splat(b, ty, c.as_i64())
                }
            })
        };
        // memo[u]: values of vector u of this iteration.
        let mut memo: Vec<FxHashMap<CRef, Value>> = vec![FxHashMap::default(); unroll];
        let mut get = |b: &mut FunctionBuilder<'_>, u: usize, r: CRef| -> Result<Value> {
            if let Some(&v) = memo[u].get(&r) {
                return Ok(v);
            }
            let v = match r {
                CRef::Const(_) => return Ok(splat(b, r, self.vty)),
                CRef::Input(k) if lvl == 0 => {
                    let k = k as usize;
                    let addr = *in_addr[k].get_or_insert_with(|| {
                        let off = b.ins().imul(i, self.strides[k]);
                        b.ins().iadd(self.bases[k], off)
                    });
                    // Operand memory, or the splat slot of a broadcast input.
                    let src = self.prog.inputs[k];
                    let step = (16 / esz) as usize * src.size_of();
                    if src == plan.dtype {
                        b.ins().load(self.vty, sl::OPERAND, addr, 16 * u as i32)
                    } else if plan.input_lane[k] == src {
                        sl::load_low(b, src, step, addr, (step * u) as i32)
                    } else {
                        sl::load_converted(b, src, plan.dtype, addr, (step * u) as i32)
                    }
                }
                CRef::Node(k) if plan.narrowed[k as usize].is_some() => {
                    // Converted as the output is stored.
                    let a = self.prog.nodes[k as usize].args[0];
                    memo[u][&a]
                }
                CRef::Node(k) if plan.level[k as usize] == lvl && !plan.block[k as usize] => {
                    let node = &self.prog.nodes[k as usize];
                    let own = self.narrow(r);
                    let own_ty = self.value_type(r);
                    let mut args: Vec<Value> = Vec::with_capacity(node.args.len());
                    for &a in &node.args {
                        let v = match a {
                            CRef::Const(_) => splat(b, a, own_ty),
                            a => *memo[u].get(&a).expect("arguments are computed first"),
                        };
                        // A path value reads narrow lanes converted exactly.
                        args.push(match (own, self.narrow(a)) {
                            (None, Some(d)) => sl::promote_narrow(b, v, d),
                            _ => v,
                        });
                    }
                    if let Some(d) = own {
                        // No lane masks in narrow lanes (checked by the plan).
                        let masks: SmallVec<[bool; 3]> = smallvec::smallvec![false; args.len()];
                        let demote =
                            node.op == ScalarOp::Cast(d) && self.narrow(node.args[0]).is_none();
                        let v = if demote {
                            sl::demote_to_narrow(b, args[0], d)
                        } else if d.is_float() {
                            sl::emit_vector_masked(b, node.op, &args, &masks, false, own_ty)?
                        } else {
                            int_lanes(b, node, &args, &masks, false, own_ty, d)?
                        };
                        memo[u].insert(r, v);
                        return Ok(v);
                    }
                    let masks: SmallVec<[bool; 3]> = node
                        .args
                        .iter()
                        // A bool input is converted on load to 0 / 1 of the
                        // path's dtype, not a lane mask.
                        .map(|&a| {
                            !matches!(a, CRef::Input(_)) && self.prog.dtype_of(a) == DType::Bool
                        })
                        .collect();
                    let out_mask = node.dtype == DType::Bool;
                    let const_bounds = matches!(
                        node.op,
                        ScalarOp::Maximum | ScalarOp::Minimum | ScalarOp::Clip
                    ) && node.args[1..]
                        .iter()
                        .all(|a| matches!(a, CRef::Const(c) if !c.as_f64().is_nan()));
                    let small = plan.small[k as usize];
                    let v = if let (Some(_), ScalarOp::Cast(_)) = (small, node.op) {
                        // Between small integer dtypes: the value, wrapped below.
                        args[0]
                    } else if plan.dtype.is_float() && const_bounds && !masks[0] {
                        sl::emit_minmax_const(b, node.op, &args, self.vty)?
                    } else if plan.dtype.is_float() {
                        sl::emit_vector_masked(b, node.op, &args, &masks, out_mask, self.vty)?
                    } else {
                        int_lanes(b, node, &args, &masks, out_mask, self.vty, plan.dtype)?
                    };
                    match small {
                        Some(true) => sl::wrap_int_lanes(b, v, node.dtype),
                        _ => v,
                    }
                }
                _ => match packed(r) {
                    Some((d, bytes)) => {
                        let row = nrow.expect("a packed slot exists");
                        sl::load_low(b, d, bytes, row, packed_off(r, u, bytes))
                    }
                    None => b
                        .ins()
                        .load(self.value_type(r), sl::OWN, srow, slot_off(r, u)),
                },
            };
            memo[u].insert(r, v);
            Ok(v)
        };
        let wanted = |r: CRef| match r {
            CRef::Node(k) => plan.level[k as usize] == lvl,
            _ => lvl == 0,
        };
        let mut staged: Vec<(CRef, usize)> = plan.slots.iter().map(|(&r, &s)| (r, s)).collect();
        staged.sort_by_key(|&(_, s)| s);
        let out_addr: Vec<Option<Value>> = self
            .prog
            .outputs
            .iter()
            .enumerate()
            .map(|(o, &r)| {
                let skip = ref_level(&plan.level, r) != lvl
                    || matches!(r, CRef::Node(k) if Some(k) == self.direct_out);
                (!skip).then(|| {
                    let off = b.ins().imul_imm_s(i, self.out_size(o));
                    b.ins().iadd(self.ptrs[self.n_in + o], off)
                })
            })
            .collect();
        for u in 0..unroll {
            // Values of this level, in topological order.
            for (k, node) in self.prog.nodes.iter().enumerate() {
                if plan.level[k] == lvl && !plan.block[k] && !plan.folded[k] {
                    // (A narrow node splats its constants in its own lanes.)
                    let narrow = self.narrow(CRef::Node(k as u32)).is_some();
                    for &a in &node.args {
                        if !(narrow && matches!(a, CRef::Const(_))) {
                            get(b, u, a)?;
                        }
                    }
                    get(b, u, CRef::Node(k as u32))?;
                }
            }
            // Stage values needed later.
            for &(r, _) in &staged {
                let is_block_result = matches!(r, CRef::Node(k) if plan.block[k as usize]);
                if wanted(r) && !is_block_result {
                    let v = get(b, u, r)?;
                    match packed(r) {
                        Some((_, bytes)) => {
                            let row = nrow.expect("a packed slot exists");
                            sl::store_low_bytes(b, v, bytes, row, packed_off(r, u, bytes));
                        }
                        None => {
                            b.ins().store(sl::OWN, v, srow, slot_off(r, u));
                        }
                    }
                }
            }
            // Outputs of this level.
            for (o, &r) in self.prog.outputs.iter().enumerate() {
                if let Some(addr) = out_addr[o] {
                    let v = get(b, u, r)?;
                    let lanes = 16 / esz as i32;
                    let narrowed = match r {
                        CRef::Node(k) => plan.narrowed[k as usize],
                        _ => None,
                    };
                    if let Some(d) = narrowed {
                        let offset = lanes * d.size_of() as i32 * u as i32;
                        sl::store_converted(b, v, plan.dtype, d, addr, offset);
                    } else if let Some(d) = self.narrow(r) {
                        let bytes = lanes * d.size_of() as i32;
                        sl::store_low_bytes(b, v, bytes as usize, addr, bytes * u as i32);
                    } else if self.prog.dtype_of(r) == DType::Bool && !self.mask_outputs {
                        sl::store_mask_bytes(b, v, self.vty, addr, lanes * u as i32);
                    } else {
                        b.ins().store(sl::OPERAND, v, addr, 16 * u as i32);
                    }
                }
            }
        }
        Ok(())
    }
}

/// The integer lanes of `node` ([`sl::emit_vector_int`]), with `i32`
/// floor division and remainder by a constant other than 0 and -1 through
/// its reciprocal ([`sl::i32_divmod_const`]) instead of a division.
#[allow(clippy::too_many_arguments)]
fn int_lanes(
    b: &mut FunctionBuilder<'_>,
    node: &crate::ops::CNode,
    args: &[Value],
    masks: &[bool],
    out_mask: bool,
    ty: cranelift_codegen::ir::Type,
    dtype: DType,
) -> Result<Value> {
    let divmod = matches!(node.op, ScalarOp::IntDiv | ScalarOp::Mod);
    // A bool argument is a lane mask, made 0 / 1 by `emit_vector_int` only.
    let plain = !out_mask && !masks.iter().any(|&m| m);
    if divmod && dtype == DType::I32 && plain {
        if let Some(CRef::Const(c)) = node.args.get(1) {
            let v = c.as_i64();
            if !c.dtype.is_float() && v != 0 && v != -1 && i32::try_from(v).is_ok() {
                let div = node.op == ScalarOp::IntDiv;
                return Ok(sl::i32_divmod_const(b, args[0], args[1], v, div));
            }
        }
    }
    sl::emit_vector_int(b, node.op, args, masks, out_mask, ty, dtype)
}

/// A one-node program: `op` applied to inputs of dtypes `inputs`, with
/// `consts[k]` (when `Some`) inlined in place of input `k`.
pub fn single_op_program(
    op: ScalarOp,
    inputs: &[DType],
    consts: &[Option<crate::ops::ScalarConst>],
) -> Result<Composite> {
    let mut kept = Vec::new();
    let mut args = Vec::new();
    for (k, &d) in inputs.iter().enumerate() {
        match consts[k] {
            Some(c) => args.push(CRef::Const(c)),
            None => {
                args.push(CRef::Input(kept.len() as u32));
                kept.push(d);
            }
        }
    }
    let mut c = Composite::new(kept);
    let r = c.push(op, &args)?;
    c.outputs = vec![r];
    Ok(c)
}

/// `comp` with `consts[k]` (when `Some`) inlined in place of input `k`.
pub fn inline_constants(comp: &Composite, consts: &[Option<crate::ops::ScalarConst>]) -> Composite {
    let mut map = Vec::with_capacity(comp.inputs.len());
    let mut kept = Vec::new();
    for (k, &d) in comp.inputs.iter().enumerate() {
        match consts[k] {
            Some(c) => map.push(CRef::Const(c)),
            None => {
                map.push(CRef::Input(kept.len() as u32));
                kept.push(d);
            }
        }
    }
    comp.substitute_inputs(&map, kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ScalarConst;
    use kiln_runtime::math::{PRE_ADD, PRE_MUL};

    /// A program over `inputs` of `dtype`, built by `body` (which returns
    /// the outputs), and its vector plan.
    fn plan(
        dtype: DType,
        inputs: usize,
        body: impl FnOnce(&mut Composite) -> Vec<CRef>,
    ) -> (Composite, VecPlan) {
        let mut c = Composite::new(vec![dtype; inputs]);
        c.outputs = body(&mut c);
        let p = vector_plan(&c, true, true).expect("a vector plan");
        (c, p)
    }

    /// Which nodes are pre-staged (with their operation) and which folded.
    fn stages(p: &VecPlan) -> (Vec<Option<u64>>, Vec<bool>) {
        (
            p.pre.iter().map(|s| s.map(|s| s.op)).collect(),
            p.folded.clone(),
        )
    }

    #[test]
    fn a_unary_block_call_of_one_operation_of_inputs_and_constants_is_pre_staged() {
        let (_, p) = plan(DType::F64, 2, |c| {
            let s = c
                .push(ScalarOp::Add, &[CRef::Input(0), CRef::Input(1)])
                .unwrap();
            vec![c.push(ScalarOp::Tanh, &[s]).unwrap()]
        });
        assert_eq!(stages(&p), (vec![None, Some(PRE_ADD)], vec![true, false]));
        // The folded operation is neither computed nor staged.
        assert!(!p.slots.contains_key(&CRef::Node(0)));
        assert!(!p.slots.contains_key(&CRef::Input(0)));

        let half = CRef::Const(ScalarConst::new(DType::F32, 0.5));
        let (_, p) = plan(DType::F32, 1, |c| {
            let s = c.push(ScalarOp::Mul, &[CRef::Input(0), half]).unwrap();
            let e = c.push(ScalarOp::Exp, &[s]).unwrap();
            // A later stage reads the call's result and the input again.
            vec![c.push(ScalarOp::Mul, &[e, CRef::Input(0)]).unwrap()]
        });
        assert_eq!(
            stages(&p),
            (vec![None, Some(PRE_MUL), None], vec![true, false, false])
        );
    }

    #[test]
    fn operations_that_are_read_elsewhere_or_not_of_leaves_are_staged() {
        type Body = Box<dyn FnOnce(&mut Composite) -> Vec<CRef>>;
        let cases: Vec<(&str, Body)> = vec![
            (
                "the operation is an output too",
                Box::new(|c| {
                    let s = c
                        .push(ScalarOp::Add, &[CRef::Input(0), CRef::Input(1)])
                        .unwrap();
                    vec![s, c.push(ScalarOp::Tanh, &[s]).unwrap()]
                }),
            ),
            (
                "another node reads the operation",
                Box::new(|c| {
                    let s = c
                        .push(ScalarOp::Add, &[CRef::Input(0), CRef::Input(1)])
                        .unwrap();
                    let t = c.push(ScalarOp::Tanh, &[s]).unwrap();
                    vec![c.push(ScalarOp::Mul, &[t, s]).unwrap()]
                }),
            ),
            (
                "an output at level 0 (an input)",
                Box::new(|c| {
                    let s = c
                        .push(ScalarOp::Add, &[CRef::Input(0), CRef::Input(1)])
                        .unwrap();
                    vec![c.push(ScalarOp::Tanh, &[s]).unwrap(), CRef::Input(1)]
                }),
            ),
            (
                "a division",
                Box::new(|c| {
                    let s = c
                        .push(ScalarOp::TrueDiv, &[CRef::Input(0), CRef::Input(1)])
                        .unwrap();
                    vec![c.push(ScalarOp::Tanh, &[s]).unwrap()]
                }),
            ),
            (
                "an operand that is a node",
                Box::new(|c| {
                    let m = c
                        .push(ScalarOp::Mul, &[CRef::Input(0), CRef::Input(1)])
                        .unwrap();
                    let s = c.push(ScalarOp::Add, &[m, CRef::Input(1)]).unwrap();
                    vec![c.push(ScalarOp::Tanh, &[s]).unwrap()]
                }),
            ),
            (
                "a binary block function",
                Box::new(|c| {
                    let s = c
                        .push(ScalarOp::Add, &[CRef::Input(0), CRef::Input(1)])
                        .unwrap();
                    vec![c.push(ScalarOp::Pow, &[s, CRef::Input(1)]).unwrap()]
                }),
            ),
        ];
        for (what, body) in cases {
            let (c, p) = plan(DType::F64, 2, body);
            let (pre, folded) = stages(&p);
            assert!(pre.iter().all(Option::is_none), "{what}: {pre:?}");
            assert!(!folded.contains(&true), "{what}");
            assert_eq!(pre.len(), c.nodes.len());
        }
    }

    #[test]
    fn inputs_of_other_dtypes_are_converted_on_load_only_to_the_values_the_reference_reads() {
        // `u8` image scaled to f32: the path of the result's dtype.
        let mut c = Composite::new(vec![DType::U8]);
        let x = c
            .push(ScalarOp::Cast(DType::F32), &[CRef::Input(0)])
            .unwrap();
        let k = CRef::Const(ScalarConst::new(DType::F32, 1.0 / 255.0));
        c.outputs = vec![c.push(ScalarOp::Mul, &[x, k]).unwrap()];
        assert_eq!(vector_plan(&c, true, true).unwrap().dtype, DType::F32);
        // A `u8` with an `f64` constant (the reference computes in `f64`)
        // and an `f32` beside an `f64`; `i32` into `f64` is exact too.
        for (src, dst) in [
            (DType::U8, DType::F64),
            (DType::F32, DType::F64),
            (DType::I32, DType::F64),
            (DType::U32, DType::F64),
            (DType::Bool, DType::F32),
            (DType::I8, DType::I16),
            (DType::U16, DType::I32),
            (DType::I32, DType::I64),
        ] {
            let mut c = Composite::new(vec![dst, src]);
            c.outputs = vec![c
                .push(ScalarOp::Mul, &[CRef::Input(0), CRef::Input(1)])
                .unwrap()];
            let p = vector_plan(&c, true, true);
            assert_eq!(p.map(|p| p.dtype), Some(dst), "{src} into {dst}");
        }
        // `i32` into `f32` is inexact, but read only by the cast it rounds
        // as `cvtdq2ps` does (`sl::cast_convertible`): converted on load.
        let mut c = Composite::new(vec![DType::F32, DType::I32]);
        let y = c
            .push(ScalarOp::Cast(DType::F32), &[CRef::Input(1)])
            .unwrap();
        c.outputs = vec![c.push(ScalarOp::Mul, &[CRef::Input(0), y]).unwrap()];
        let p = vector_plan(&c, true, true).expect("i32 cast into f32");
        assert_eq!((p.dtype, p.input_lane), (DType::F32, vec![DType::F32; 2]));
        // Inexact (`i8` into `u16`): no vector path. `i64` into `f64` is
        // rounded to nearest, as the reference's `as f64`: converted on load.
        for (src, dst, converts) in [
            (DType::I8, DType::U16, false),
            (DType::I64, DType::F64, true),
        ] {
            let mut c = Composite::new(vec![dst, src]);
            let y = c.push(ScalarOp::Cast(dst), &[CRef::Input(1)]).unwrap();
            c.outputs = vec![c.push(ScalarOp::Mul, &[CRef::Input(0), y]).unwrap()];
            let p = vector_plan(&c, true, true);
            assert_eq!(p.is_some(), converts, "{src} into {dst}");
        }
        let mut c = Composite::new(vec![DType::F64, DType::U8]);
        let seven = CRef::Const(ScalarConst::new(DType::I64, 7.0));
        let big = c.push(ScalarOp::Gt, &[CRef::Input(1), seven]).unwrap();
        let prod = c
            .push(ScalarOp::Mul, &[CRef::Input(0), CRef::Input(1)])
            .unwrap();
        c.outputs = vec![c
            .push(ScalarOp::Switch, &[big, prod, CRef::Input(0)])
            .unwrap()];
        // A reader in the integer domain (a comparison of the `u8` with an
        // integer beside the float product): exact in `f64` lanes too.
        let p = vector_plan(&c, true, true).expect("the u8 compared in f64 lanes");
        assert_eq!(
            (p.dtype, p.small),
            (DType::F64, vec![Some(false), None, None])
        );
        // A converted input is never read from memory by a pre-staged call.
        let mut c = Composite::new(vec![DType::U8]);
        let half = CRef::Const(ScalarConst::new(DType::F64, 0.5));
        let s = c.push(ScalarOp::Mul, &[CRef::Input(0), half]).unwrap();
        c.outputs = vec![c.push(ScalarOp::Exp, &[s]).unwrap()];
        let p = vector_plan(&c, true, true).unwrap();
        assert_eq!(p.dtype, DType::F64);
        assert_eq!(stages(&p), (vec![None, None], vec![false, false]));
    }

    #[test]
    fn small_integer_work_runs_in_f64_lanes_wrapped_only_where_it_may_overflow() {
        let k = |d: DType, v: f64| CRef::Const(ScalarConst::new(d, v));
        // `exp((-img) * (1 / 255))`: the u8 negation wraps.
        let mut c = Composite::new(vec![DType::U8]);
        let neg = c.push(ScalarOp::Neg, &[CRef::Input(0)]).unwrap();
        let third = CRef::Const(ScalarConst::new(DType::F64, 1.0 / 255.0));
        let s = c.push(ScalarOp::Mul, &[neg, third]).unwrap();
        c.outputs = vec![c.push(ScalarOp::Exp, &[s]).unwrap()];
        let p = vector_plan(&c, true, true).expect("exp(-img / 255)");
        assert_eq!(p.dtype, DType::F64);
        assert_eq!(p.small, vec![Some(true), None, None]);
        assert_eq!(p.input_lane, vec![DType::F64]);
        // `(255 - img) * 0.5` stays in range: no wrap; `(img - 128) * 0.5`
        // may go below 0: wrapped.
        for (first, second, wraps) in [
            (k(DType::U8, 255.0), CRef::Input(0), false),
            (CRef::Input(0), k(DType::U8, 128.0), true),
        ] {
            let mut c = Composite::new(vec![DType::U8]);
            let d = c.push(ScalarOp::Sub, &[first, second]).unwrap();
            let half = CRef::Const(ScalarConst::new(DType::F64, 0.5));
            c.outputs = vec![c.push(ScalarOp::Mul, &[d, half]).unwrap()];
            let p = vector_plan(&c, true, true).expect("a u8 difference in f64");
            assert_eq!(p.small[0], Some(wraps));
        }
        // A product of three u16 may pass 2^52 in a partial product: no f64
        // path for it (and no other: the kernel keeps its scalar path).
        let mut c = Composite::new(vec![DType::U16; 4]);
        let prod = c
            .push(
                ScalarOp::Mul,
                &[
                    CRef::Input(0),
                    CRef::Input(1),
                    CRef::Input(2),
                    CRef::Input(3),
                ],
            )
            .unwrap();
        let half = CRef::Const(ScalarConst::new(DType::F64, 0.5));
        c.outputs = vec![c.push(ScalarOp::Mul, &[prod, half]).unwrap()];
        assert_eq!(small_int_plan(&c), vec![None, None]);
        // `cast(abs(cast(img, "i16") - 128), "f64")`: every step in range,
        // nothing wrapped (three wraps took it from 3.4 to 10.7 ms on a
        // 2000 x 2000 image: each lengthens the dependency chain).
        let mut c = Composite::new(vec![DType::U8]);
        let w = c
            .push(ScalarOp::Cast(DType::I16), &[CRef::Input(0)])
            .unwrap();
        let d = c.push(ScalarOp::Sub, &[w, k(DType::I16, 128.0)]).unwrap();
        let a = c.push(ScalarOp::Abs, &[d]).unwrap();
        c.outputs = vec![c.push(ScalarOp::Cast(DType::F64), &[a]).unwrap()];
        let p = vector_plan(&c, true, true).expect("an f64 path");
        assert_eq!(p.dtype, DType::F64);
        assert_eq!(p.small, vec![Some(false), Some(false), Some(false), None]);
    }

    #[test]
    fn narrower_values_between_f64_ones_are_computed_in_narrow_lanes() {
        // `cast(xf * 2, "f64") + y`: the `f32` product in narrow lanes, its
        // input loaded as it is, the cast and the sum on the `f64` path.
        let mut c = Composite::new(vec![DType::F32, DType::F64]);
        let two = CRef::Const(ScalarConst::new(DType::F32, 2.0));
        let p = c.push(ScalarOp::Mul, &[CRef::Input(0), two]).unwrap();
        let w = c.push(ScalarOp::Cast(DType::F64), &[p]).unwrap();
        c.outputs = vec![c.push(ScalarOp::Add, &[w, CRef::Input(1)]).unwrap()];
        let plan = vector_plan(&c, true, true).unwrap();
        assert_eq!(
            (plan.dtype, plan.lane.clone(), plan.input_lane.clone()),
            (
                DType::F64,
                vec![DType::F32, DType::F64, DType::F64],
                vec![DType::F32, DType::F64]
            )
        );
        assert!(!plan.narrows(&c));
        // `cast(y * 3, "i32") * a`, stored as `i32`: a narrowing cast read by
        // a node, then `i32` arithmetic; a result in narrow lanes.
        let mut c = Composite::new(vec![DType::F64, DType::I32]);
        let three = CRef::Const(ScalarConst::new(DType::F64, 3.0));
        let t = c.push(ScalarOp::Mul, &[CRef::Input(0), three]).unwrap();
        let i = c.push(ScalarOp::Cast(DType::I32), &[t]).unwrap();
        c.outputs = vec![c.push(ScalarOp::Mul, &[i, CRef::Input(1)]).unwrap()];
        let plan = vector_plan(&c, true, true).unwrap();
        assert_eq!(plan.lane, vec![DType::F64, DType::I32, DType::I32]);
        assert!(plan.narrows(&c));
        // `exp(xf) * y`: the `f32` exp is a block-wise call in narrow lanes
        // (staged packed, `kiln_exp_f32`); `cast(xf > 0.5, "f64") + y`: the
        // `f32` constant widens exactly into the comparison's `f64` lanes.
        let mut c = Composite::new(vec![DType::F32, DType::F64]);
        let e = c.push(ScalarOp::Exp, &[CRef::Input(0)]).unwrap();
        c.outputs = vec![c.push(ScalarOp::Mul, &[e, CRef::Input(1)]).unwrap()];
        let plan = vector_plan(&c, true, true).unwrap();
        assert_eq!(
            (plan.lane.clone(), plan.block.clone()),
            (vec![DType::F32, DType::F64], vec![true, false])
        );
        let mut c = Composite::new(vec![DType::F32, DType::F64]);
        let half = CRef::Const(ScalarConst::new(DType::F32, 0.5));
        let g = c.push(ScalarOp::Gt, &[CRef::Input(0), half]).unwrap();
        let w = c.push(ScalarOp::Cast(DType::F64), &[g]).unwrap();
        c.outputs = vec![c.push(ScalarOp::Add, &[w, CRef::Input(1)]).unwrap()];
        assert!(vector_plan(&c, true, true).is_some());
        // `xf > y`, whose only value is a bool: the path is the second
        // input's dtype, the first converted as it loads.
        let mut c = Composite::new(vec![DType::F32, DType::F64]);
        c.outputs = vec![c
            .push(ScalarOp::Gt, &[CRef::Input(0), CRef::Input(1)])
            .unwrap()];
        let plan = vector_plan(&c, true, true).unwrap();
        assert_eq!(
            (plan.dtype, plan.input_lane.clone()),
            (DType::F64, vec![DType::F64, DType::F64])
        );
        // No narrow lanes for a block-wise call with a constant argument
        // (`xf % 3`: constants are staged in the path's lanes), for a path
        // call's argument of another dtype (`exp` of an `i32` value reads
        // it staged in `f64`), for a cast to `u32` (no conversion to
        // narrow lanes), or for an `f32` op reading an `f64`-lane value.
        let mut c = Composite::new(vec![DType::F32, DType::F64]);
        let three = CRef::Const(ScalarConst::new(DType::F32, 3.0));
        let m = c.push(ScalarOp::Mod, &[CRef::Input(0), three]).unwrap();
        c.outputs = vec![c.push(ScalarOp::Mul, &[m, CRef::Input(1)]).unwrap()];
        assert!(vector_plan(&c, true, true).is_none());
        let mut c = Composite::new(vec![DType::F64, DType::I32]);
        let a = c
            .push(ScalarOp::Mul, &[CRef::Input(1), CRef::Input(1)])
            .unwrap();
        let e = c.push(ScalarOp::Exp, &[a]).unwrap();
        c.outputs = vec![c.push(ScalarOp::Add, &[e, CRef::Input(0)]).unwrap()];
        assert!(vector_plan(&c, true, true).is_none());
        let mut c = Composite::new(vec![DType::F64, DType::U32]);
        let u = c
            .push(ScalarOp::Cast(DType::U32), &[CRef::Input(0)])
            .unwrap();
        c.outputs = vec![c.push(ScalarOp::Add, &[u, CRef::Input(1)]).unwrap()];
        assert!(vector_plan(&c, true, true).is_none());
    }

    #[test]
    fn results_cast_to_narrower_dtypes_are_converted_on_store_only_as_outputs() {
        let two = CRef::Const(ScalarConst::new(DType::F64, 2.0));
        for dst in [DType::F32, DType::I32, DType::U8] {
            let mut c = Composite::new(vec![DType::F64]);
            let y = c.push(ScalarOp::Mul, &[CRef::Input(0), two]).unwrap();
            c.outputs = vec![y, c.push(ScalarOp::Cast(dst), &[y]).unwrap()];
            let p = vector_plan(&c, true, true).unwrap();
            assert_eq!(
                (p.dtype, p.narrowed.clone()),
                (DType::F64, vec![None, Some(dst)])
            );
        }
        // Computed in a dtype neither the inputs nor the result have: the
        // absolute difference of two `u8` images in `i16`, stored as `u8`.
        let mut c = Composite::new(vec![DType::U8, DType::U8]);
        let p = c
            .push(ScalarOp::Cast(DType::I16), &[CRef::Input(0)])
            .unwrap();
        let q = c
            .push(ScalarOp::Cast(DType::I16), &[CRef::Input(1)])
            .unwrap();
        let d = c.push(ScalarOp::Sub, &[p, q]).unwrap();
        let a = c.push(ScalarOp::Abs, &[d]).unwrap();
        c.outputs = vec![c.push(ScalarOp::Cast(DType::U8), &[a]).unwrap()];
        let plan = vector_plan(&c, true, true).unwrap();
        assert_eq!(
            (plan.dtype, plan.narrowed[4]),
            (DType::I16, Some(DType::U8))
        );
        // A cast another node reads (back in f64), or one to a dtype without
        // a vector conversion (u32): no vector path.
        for (dst, reread) in [(DType::U8, true), (DType::U32, false)] {
            let mut c = Composite::new(vec![DType::F64]);
            let y = c.push(ScalarOp::Cast(dst), &[CRef::Input(0)]).unwrap();
            c.outputs = vec![if reread {
                c.push(ScalarOp::Mul, &[y, two]).unwrap()
            } else {
                y
            }];
            assert!(vector_plan(&c, true, true).is_none(), "{dst}");
        }
    }

    /// Runs the f64 program `prog` (one input, one output, contiguous) on
    /// `x` with a first-tier-only module, after skipping its marked loops
    /// when `skip`; returns the output and how many loops were skipped.
    fn run_first_tier(prog: &Composite, skip: bool, x: &[f64]) -> (Vec<f64>, usize) {
        run_kernel(prog, Paths::Vector, skip, x)
    }

    /// Runs `prog`'s kernel with `paths` (the first tier's code, its
    /// unrolled loops skipped when `skip`) on contiguous `x`; returns the
    /// first output and the number of loops skipped.
    fn run_kernel(prog: &Composite, paths: Paths, skip: bool, x: &[f64]) -> (Vec<f64>, usize) {
        let (mut outs, skipped) = run_kernel_all(prog, paths, skip, x);
        (outs.swap_remove(0), skipped)
    }

    /// [`run_kernel`] returning every output.
    fn run_kernel_all(
        prog: &Composite,
        paths: Paths,
        skip: bool,
        x: &[f64],
    ) -> (Vec<Vec<f64>>, usize) {
        run_kernel_opts(prog, paths, skip, true, x)
    }

    /// Every output of `prog`'s kernel with paired calls on or off.
    fn run_kernel_with(
        prog: &Composite,
        paths: Paths,
        pair_calls: bool,
        x: &[f64],
    ) -> Vec<Vec<f64>> {
        run_kernel_opts(prog, paths, false, pair_calls, x).0
    }

    /// [`run_kernel_all`] with paired calls on or off.
    fn run_kernel_opts(
        prog: &Composite,
        paths: Paths,
        skip: bool,
        pair_calls: bool,
        x: &[f64],
    ) -> (Vec<Vec<f64>>, usize) {
        use super::super::jit::{CodegenOptions, Tiering};
        let opts = CodegenOptions {
            tiering: Tiering::First,
            pair_calls,
            ..Default::default()
        };
        let mut jb = JitBuilder::new(&opts).unwrap();
        let k = build(&mut jb, prog, None, paths, "t").unwrap();
        let skipped = if skip { jb.skip_marked_loops_of(k) } else { 0 };
        let code = jb.finish().unwrap();
        let mut outs = vec![vec![0.0; x.len()]; prog.outputs.len()];
        let mut ptrs = vec![x.as_ptr() as *mut u8];
        ptrs.extend(outs.iter_mut().map(|o| o.as_mut_ptr() as *mut u8));
        let strides = vec![8isize; ptrs.len()];
        // SAFETY: the kernel has the element-wise ABI (module header); every
        // operand holds `x.len()` contiguous f64 and lives across the call.
        unsafe {
            let f = std::mem::transmute::<
                *const u8,
                extern "C" fn(*const *mut u8, *const isize, usize),
            >(code.ptr(k));
            f(ptrs.as_ptr(), strides.as_ptr(), x.len());
        }
        (outs, skipped)
    }

    /// `gauss`'s program: 0.25 * exp(-0.2 * (x - 0.5)²).
    fn gauss_program() -> Composite {
        let mut c = Composite::new(vec![DType::F64]);
        let half = CRef::Const(ScalarConst::new(DType::F64, 0.5));
        let d = c.push(ScalarOp::Sub, &[CRef::Input(0), half]).unwrap();
        let sq = c.push(ScalarOp::Mul, &[d, d]).unwrap();
        let k = CRef::Const(ScalarConst::new(DType::F64, -0.2));
        let a = c.push(ScalarOp::Mul, &[k, sq]).unwrap();
        let e = c.push(ScalarOp::Exp, &[a]).unwrap();
        let s = CRef::Const(ScalarConst::new(DType::F64, 0.25));
        c.outputs = vec![c.push(ScalarOp::Mul, &[s, e]).unwrap()];
        c
    }

    /// `poly`'s program: 2x³ - x².
    fn poly_program() -> Composite {
        let mut c = Composite::new(vec![DType::F64]);
        let x = CRef::Input(0);
        let sq = c.push(ScalarOp::Mul, &[x, x]).unwrap();
        let cube = c.push(ScalarOp::Mul, &[sq, x]).unwrap();
        let two = CRef::Const(ScalarConst::new(DType::F64, 2.0));
        let t = c.push(ScalarOp::Mul, &[two, cube]).unwrap();
        c.outputs = vec![c.push(ScalarOp::Sub, &[t, sq]).unwrap()];
        c
    }

    /// The first tier's skipped unrolled loops leave every value as the
    /// unrolled code computes it: programs with block calls between vector
    /// levels (`gauss`'s shape) and without (`poly`'s), on lengths around
    /// the vector width, the unroll and the prefetching threshold.
    #[test]
    fn skipping_unrolled_loops_keeps_every_bit() {
        let (gauss, poly) = (gauss_program(), poly_program());
        for (name, prog) in [("gauss", &gauss), ("poly", &poly)] {
            for n in [0, 1, 2, 7, 8, 9, 17, 1003, 5001] {
                let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin() * 3.0).collect();
                let (want, _) = run_first_tier(prog, false, &x);
                let (got, skipped) = run_first_tier(prog, true, &x);
                assert!(skipped > 0, "{name}: no unrolled loop was marked");
                let same = want
                    .iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{name} on {n} elements: {got:?} against {want:?}");
            }
        }
    }

    /// A kernel with the scalar path only computes what the vector kernel
    /// does: every bit on one element (the case it is built for) for a
    /// program with a block-wise `exp`, and on every length for one of
    /// exact vector arithmetic, whose two paths agree bit for bit.
    #[test]
    fn scalar_only_kernels_compute_the_same_values() {
        let cases = [
            (gauss_program(), vec![1]),
            (poly_program(), vec![0, 1, 2, 9, 1003]),
        ];
        for (prog, lengths) in cases {
            for n in lengths {
                let x: Vec<f64> = (0..n)
                    .map(|i| (i as f64 * 0.37).sin() * 3.0 + 0.1)
                    .collect();
                let (want, _) = run_kernel(&prog, Paths::Vector, false, &x);
                let (got, _) = run_kernel(&prog, Paths::ScalarOnly, false, &x);
                let same = want
                    .iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{prog} on {n} elements: {got:?} against {want:?}");
            }
        }
    }

    /// `f(x) * 2 + f(-x)` (for sigmoid: the two sigmoids of one value a
    /// logistic loss's gradient has); with `neg_out`, `-x` is an output too.
    fn pair_program(f: ScalarOp, neg_out: bool) -> Composite {
        let mut c = Composite::new(vec![DType::F64]);
        let pos = c.push(f, &[CRef::Input(0)]).unwrap();
        let nx = c.push(ScalarOp::Neg, &[CRef::Input(0)]).unwrap();
        let neg = c.push(f, &[nx]).unwrap();
        let two = CRef::Const(ScalarConst::new(DType::F64, 2.0));
        let p2 = c.push(ScalarOp::Mul, &[pos, two]).unwrap();
        let sum = c.push(ScalarOp::Add, &[p2, neg]).unwrap();
        c.outputs = vec![sum];
        if neg_out {
            c.outputs.push(nx);
        }
        c
    }

    #[test]
    fn sigmoids_of_a_value_and_of_its_negation_share_one_paired_call() {
        let prog = pair_program(ScalarOp::Sigmoid, false);
        let p = vector_plan(&prog, true, true).expect("a vector plan");
        assert_eq!(p.partner, vec![Some(2), None, None, None, None]);
        assert_eq!(p.paired, vec![false, false, true, false, false]);
        // The negation is only the paired call's business: neither formed
        // nor staged.
        assert!(p.folded[1] && !p.slots.contains_key(&CRef::Node(1)));
        // Read elsewhere (here: an output), the negation stays.
        let p =
            vector_plan(&pair_program(ScalarOp::Sigmoid, true), true, true).expect("a vector plan");
        assert_eq!(p.partner[0], Some(2));
        assert!(!p.folded[1]);
        // f32 has no paired function: two plain calls.
        let mut c = Composite::new(vec![DType::F32]);
        let a = c.push(ScalarOp::Sigmoid, &[CRef::Input(0)]).unwrap();
        let nx = c.push(ScalarOp::Neg, &[CRef::Input(0)]).unwrap();
        let b = c.push(ScalarOp::Sigmoid, &[nx]).unwrap();
        c.outputs = vec![c.push(ScalarOp::Add, &[a, b]).unwrap()];
        let p = vector_plan(&c, true, true).expect("a vector plan");
        assert!(p.partner.iter().all(Option::is_none) && !p.paired.contains(&true));
    }

    #[test]
    fn paired_calls_give_the_bits_of_separate_ones() {
        // Every lane class of the runtime's sigmoid: the fast range, the
        // full-range lanes (|x| >= 708), subnormal results, zeros,
        // infinities and NaN; lengths with tails, one block and several.
        // The paired kernel against the same kernel with two calls, and
        // against the scalar path's reference functions.
        let mut base: Vec<f64> = (0..300).map(|i| (i as f64 - 150.0) * 0.173).collect();
        base.extend([
            0.0,
            -0.0,
            708.5,
            -708.5,
            740.0,
            -740.0,
            1e300,
            -1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ]);
        let same = |a: &[Vec<f64>], b: &[Vec<f64>]| {
            a.iter().zip(b).all(|(a, b)| {
                a.iter()
                    .zip(b)
                    .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
            })
        };
        for neg_out in [false, true] {
            let prog = pair_program(ScalarOp::Sigmoid, neg_out);
            for n in [2, 17, 128, base.len()] {
                let x = &base[base.len() - n..];
                let paired = run_kernel_with(&prog, Paths::Vector, true, x);
                let separate = run_kernel_with(&prog, Paths::Vector, false, x);
                assert!(same(&paired, &separate), "{prog} on {n} elements");
                let (reference, _) = run_kernel_all(&prog, Paths::ScalarOnly, false, x);
                assert!(same(&paired, &reference), "{prog} on {n} elements");
            }
        }
    }
}
