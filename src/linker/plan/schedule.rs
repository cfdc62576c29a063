//! Scheduling and slot numbering: the order the nodes run in (respecting
//! every feature's orderings and the inplace operations' constraints),
//! the slot of every variable under that order, and the canonical key of
//! the compile cache.
//!
//! Invariant: [`number_slots`] numbers the graph inputs first, then the
//! constants, then node outputs in schedule order; the cache key
//! serialises everything the numbering and the lowering depend on, so equal
//! keys mean interchangeable plans and code.

use std::fmt::Write as _;

use rustc_hash::FxHashMap;

use super::Slot;
use crate::error::Result;
use crate::graph::{DestroyHandler, FunctionGraph, NodeId, VarId};
use crate::linker::codegen::jit::CodegenOptions;

/// The schedule of `fg`: a topological order respecting the features'
/// orderings. The inplace operations the ops declare are validated and
/// ordered (every other reader of a destroyed root first) even when no
/// DestroyHandler is attached, so an unsafe graph is refused, not run.
pub fn schedule(fg: &FunctionGraph) -> Result<Vec<NodeId>> {
    let mut orderings = fg.orderings();
    if !fg.has_feature::<DestroyHandler>() {
        orderings.extend(DestroyHandler::check_graph(fg)?);
    }
    fg.try_toposort_with(&orderings)
}

/// Slot numbering of a graph under a schedule.
pub struct Slots {
    /// Slot of each variable.
    pub map: FxHashMap<VarId, Slot>,
    /// Constant variables in slot order.
    pub consts: Vec<VarId>,
    /// Total.
    pub n: usize,
}

/// Numbers the variables of `fg` for the schedule `order`.
pub fn number_slots(fg: &FunctionGraph, order: &[NodeId]) -> Slots {
    let mut map = FxHashMap::default();
    let mut n = 0;
    for &v in fg.inputs() {
        map.entry(v).or_insert_with(|| {
            n += 1;
            n - 1
        });
    }
    let mut consts = Vec::new();
    let mut visit_const = |v: VarId, map: &mut FxHashMap<VarId, Slot>, n: &mut usize| {
        if fg.var(v).is_constant() && !map.contains_key(&v) {
            map.insert(v, *n);
            *n += 1;
            consts.push(v);
        }
    };
    for &node in order {
        for &i in &fg.node(node).inputs {
            visit_const(i, &mut map, &mut n);
        }
    }
    for &o in fg.outputs() {
        visit_const(o, &mut map, &mut n);
    }
    for &node in order {
        for &o in &fg.node(node).outputs {
            map.insert(o, n);
            n += 1;
        }
    }
    Slots { map, consts, n }
}

/// A canonical serialisation of the scheduled graph (types, ops, wiring,
/// constants, input names): equal keys mean interchangeable compiled code.
pub fn cache_key(fg: &FunctionGraph, order: &[NodeId], opts: &CodegenOptions) -> String {
    let slots = number_slots(fg, order);
    let mut k = format!("{opts:?}|");
    for &v in fg.inputs() {
        let _ = write!(k, "in:{}:{:?};", fg.ty(v), fg.var(v).name);
    }
    for &c in &slots.consts {
        let val = fg.constant_value(c).expect("constant");
        let _ = write!(k, "c{}:{}:{:?}:", slots.map[&c], val.dtype(), val.shape());
        crate::with_value!(val, a => for x in a.iter() { let _ = write!(k, "{x:?},"); });
        k.push(';');
    }
    for &n in order {
        let node = fg.node(n);
        let _ = write!(k, "{:?}(", node.op);
        for i in &node.inputs {
            let _ = write!(k, "{},", slots.map[i]);
        }
        k.push_str(")->");
        for o in &node.outputs {
            let _ = write!(k, "{}:{},", slots.map[o], fg.ty(*o));
        }
        k.push(';');
    }
    k.push_str("out:");
    for o in fg.outputs() {
        let _ = write!(k, "{},", slots.map[o]);
    }
    k
}
