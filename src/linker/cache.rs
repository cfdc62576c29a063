//! The compile cache, the entry point of compilation: structurally
//! identical graphs (same canonical key, see `plan::schedule::cache_key`)
//! share one compiled module and plan.
//!
//! Entries are weak: the cache never keeps a module alive, so dropping the
//! last Function frees the code; dead entries are purged on insertion.

use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use rustc_hash::FxHashMap;

use super::codegen::jit::CodegenOptions;
use super::compile::{compile_plan, CompileProfile};
use super::exec::ParallelOptions;
use super::function::{Compiled, Function};
use super::plan::schedule::{cache_key, schedule};
use crate::error::Result;
use crate::graph::FunctionGraph;

/// Options of [`compile`](fn@super::compile).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// Code generation settings.
    pub codegen: CodegenOptions,
    /// When to split kernels over threads.
    pub parallel: ParallelOptions,
    /// Bypass the compile cache.
    pub no_cache: bool,
}

/// Canonical key -> (weak module, profile of its compilation).
type Entries = FxHashMap<String, (Weak<Compiled>, CompileProfile)>;

static CACHE: Mutex<Option<Entries>> = Mutex::new(None);

/// Compiles `fg`, reusing a live module compiled from an identical graph.
pub fn compile_cached(fg: &FunctionGraph, opts: &CompileOptions) -> Result<Function> {
    let t = Instant::now();
    let order = schedule(fg)?;
    let key = (!opts.no_cache).then(|| cache_key(fg, &order, &opts.codegen));
    if let Some(k) = &key {
        let guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((w, prof)) = guard.as_ref().and_then(|m| m.get(k)) {
            if let Some(c) = w.upgrade() {
                let mut profile = prof.clone();
                profile.cached = true;
                profile.lower = t.elapsed();
                profile.codegen = Default::default();
                return Ok(Function {
                    compiled: c,
                    par: opts.parallel,
                    profile,
                });
            }
        }
    }
    let (plan, code, profile) = compile_plan(fg, &opts.codegen)?;
    let compiled = Arc::new(Compiled {
        plan,
        code,
        pool: Default::default(),
    });
    if let Some(k) = key {
        let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        let map = guard.get_or_insert_with(FxHashMap::default);
        map.retain(|_, (w, _)| w.strong_count() > 0);
        map.insert(k, (Arc::downgrade(&compiled), profile.clone()));
    }
    Ok(Function {
        compiled,
        par: opts.parallel,
        profile,
    })
}
