//! The memory plan: which slots share a buffer (views and inplace
//! outputs, from the ops' `view_map` / `destroy_map`), when each buffer
//! group is released, which graph inputs a call overwrites, and which
//! outputs `call_into` may place in the caller's arrays.
//!
//! Invariants: the graph is the only source of sharing (no buffer is
//! reused on the linker's own initiative); a group is released, all its
//! slots at once, after the last step that uses or defines any of them;
//! groups holding a graph output are never released; an output destination
//! is a node output reached from the output through `destroy_map`s only.

use rustc_hash::FxHashMap;

use super::Slot;
use crate::graph::{Apply, DestroyHandler, FunctionGraph};

/// The buffer sharing the graph declares, gathered node by node in
/// schedule order.
#[derive(Debug, Default)]
pub struct Sharing {
    /// (slot, earlier slot) pairs living in one buffer: views and destroyed inputs.
    shares: Vec<(Slot, Slot)>,
    /// The same pairs split by kind, for the output destinations.
    views: Vec<(Slot, Slot)>,
    destroys: Vec<(Slot, Slot)>,
    /// Positions of the graph inputs some node overwrites.
    destroyed_inputs: Vec<usize>,
}

/// What [`Sharing::finish`] decides for a whole plan.
#[derive(Debug)]
pub struct MemoryPlan {
    /// Slots released after each step (see [`liveness`]).
    pub release: Vec<Vec<Slot>>,
    /// Per output, the slot `call_into` may place in the caller's array.
    pub output_dests: Vec<Option<Slot>>,
    /// Positions of the inputs some step overwrites, sorted.
    pub destroyed_inputs: Vec<usize>,
}

impl Sharing {
    /// Records the views and destroyed inputs of `node`, whose inputs and
    /// outputs have the slots `ins` and `outs`.
    pub fn add_node(&mut self, fg: &FunctionGraph, node: &Apply, ins: &[Slot], outs: &[Slot]) {
        for &(o, i) in node.op.view_map().iter() {
            self.shares.push((outs[o as usize], ins[i as usize]));
            self.views.push((outs[o as usize], ins[i as usize]));
        }
        for &(o, i) in node.op.destroy_map().iter() {
            self.shares.push((outs[o as usize], ins[i as usize]));
            self.destroys.push((outs[o as usize], ins[i as usize]));
            let root = DestroyHandler::view_root(fg, node.inputs[i as usize]);
            if let Some(p) = fg.inputs().iter().position(|&v| v == root) {
                self.destroyed_inputs.push(p);
            }
        }
    }

    /// Whether the node defining `slot` writes it into an earlier slot's
    /// buffer (its `destroy_map` names it).
    pub fn overwrites(&self, slot: Slot) -> bool {
        self.destroys.iter().any(|&(o, _)| o == slot)
    }

    /// The memory plan of `n_slots` slots (node outputs from
    /// `first_node_slot` on) for steps reading `uses[k]` and writing
    /// `defs[k]`, with graph outputs `outputs`.
    pub fn finish(
        mut self,
        n_slots: usize,
        first_node_slot: Slot,
        uses: &[Vec<Slot>],
        defs: &[Vec<Slot>],
        outputs: &[Slot],
    ) -> MemoryPlan {
        self.destroyed_inputs.sort_unstable();
        self.destroyed_inputs.dedup();
        MemoryPlan {
            release: liveness(n_slots, uses, defs, &self.shares, outputs),
            output_dests: output_destinations(
                first_node_slot,
                &self.destroys,
                &self.views,
                outputs,
            ),
            destroyed_inputs: self.destroyed_inputs,
        }
    }
}

/// Computes `release` lists: the slots to empty after each step.
///
/// `uses[k]` and `defs[k]` are the slots step `k` reads and writes;
/// `shares` lists `(slot, earlier slot)` pairs whose arrays live in one
/// buffer (views and destroyed inputs), in schedule order. A buffer group is
/// released, all its slots at once, after the last step that uses or defines
/// any of them; groups holding a graph output are never released.
pub fn liveness(
    n_slots: usize,
    uses: &[Vec<Slot>],
    defs: &[Vec<Slot>],
    shares: &[(Slot, Slot)],
    outputs: &[Slot],
) -> Vec<Vec<Slot>> {
    let mut root: Vec<Slot> = (0..n_slots).collect();
    for &(s, earlier) in shares {
        root[s] = root[earlier];
    }
    let mut last: Vec<Option<usize>> = vec![None; n_slots];
    for (k, (u, d)) in uses.iter().zip(defs).enumerate() {
        for &s in u.iter().chain(d) {
            last[root[s]] = Some(k);
        }
    }
    let mut pinned = vec![false; n_slots];
    for &o in outputs {
        pinned[root[o]] = true;
    }
    let mut release = vec![Vec::new(); uses.len()];
    for (s, &r) in root.iter().enumerate() {
        if let (Some(k), false) = (last[r], pinned[r]) {
            release[k].push(s);
        }
    }
    release
}

/// Per graph output, the root slot whose allocation `call_into` may place
/// in the caller's array for that output: the slot reached from the output
/// by following `destroys` (`(output slot, destroyed input slot)` pairs)
/// back to a slot no share made, when no view lies on the way (`views`:
/// `(view slot, viewed slot)` pairs) and that root is a node output
/// (`slot >= first_node_slot`; inputs and constants are never written).
/// The output's array is then exactly the root's whole buffer.
pub fn output_destinations(
    first_node_slot: Slot,
    destroys: &[(Slot, Slot)],
    views: &[(Slot, Slot)],
    outputs: &[Slot],
) -> Vec<Option<Slot>> {
    let destroyed: FxHashMap<Slot, Slot> = destroys.iter().copied().collect();
    let viewed: FxHashMap<Slot, Slot> = views.iter().copied().collect();
    outputs
        .iter()
        .map(|&o| {
            let mut cur = o;
            while let Some(&earlier) = destroyed.get(&cur) {
                cur = earlier;
            }
            (cur >= first_node_slot && !viewed.contains_key(&cur)).then_some(cur)
        })
        .collect()
}
