//! Execution of a plan for one call: the call's state (`state`), kernel
//! drivers (`drive`), copies (`copy`), run-time broadcasting (`broadcast`),
//! and one executor per op family (`elemwise`, `reduce`, `gemm`, `shape`,
//! `custom`, ...; `epilogue` runs a product with its element-wise
//! reader); [`Exec::run`] runs the steps in order and [`Exec`]'s `step` is
//! the one `match` over [`Step`] that picks the family.
//!
//! Invariant: an element-wise or Gemm step writes an output into an input's
//! buffer exactly when the node's `destroy_map` says so, and allocates every
//! other output; every shape a step computes from run-time values is checked
//! against the static types before a kernel reads it (see ARCHITECTURE.md,
//! "Run-time checks").

pub mod argreduce;
mod broadcast;
pub mod copy;
pub mod cumulative;
pub mod custom;
pub mod drive;
pub mod elemwise;
pub mod epilogue;
pub mod gemm;
pub mod indexing;
pub mod reduce;
pub mod shape;
pub mod softmax;
pub mod state;
pub mod subtensor;

use std::time::Instant;

pub use copy::{copy, copy_into, to_value};
pub use drive::{KernelFn, ParallelOptions};
pub use state::{CallStats, Exec};

use crate::error::Result;
use crate::linker::buffer::Arr;
use crate::linker::plan::step::Step;

impl Exec<'_> {
    /// Runs every step and returns the output arrays, and when profiling the
    /// per-step times and the peak bytes of call-owned buffers (sampled after
    /// each step, before its dead inputs are released, so a step's inputs
    /// and outputs count together; scratch a step frees within itself is not seen).
    pub fn run(mut self) -> Result<(Vec<Arr>, Option<CallStats>)> {
        let plan = self.plan;
        for (k, (step, name, _)) in plan.steps.iter().enumerate() {
            let t = self.times.is_some().then(Instant::now);
            self.step(step, name)?;
            if self.times.is_some() {
                self.peak_bytes = self.peak_bytes.max(self.live_bytes());
            }
            for &s in &plan.release[k] {
                self.release(s);
            }
            if let (Some(t), Some(times)) = (t, self.times.as_mut()) {
                times.push(t.elapsed());
            }
        }
        let outs: Vec<Arr> = plan.outputs.iter().map(|&s| self.get(s)).collect();
        for &s in &plan.outputs {
            self.slots[s] = None;
        }
        // Intermediates still held (e.g. never released) go back to the pool
        // unless an output shares them (then they are not uniquely owned).
        for s in 0..self.slots.len() {
            self.release(s);
        }
        let peak_bytes = self.peak_bytes;
        let times = self
            .times
            .take()
            .map(|times| CallStats { times, peak_bytes });
        Ok((outs, times))
    }

    /// Runs one step of the node named `name`.
    fn step(&mut self, step: &Step, name: &str) -> Result<()> {
        match step {
            Step::Elemwise(s) => self.elemwise(name, s),
            Step::Reduce(s) => self.reduce(name, s),
            Step::FusedReduce(s) => self.fused_reduce(name, s),
            Step::DimShuffle(s) => self.dimshuffle(name, s),
            Step::Reshape(s) => self.reshape(name, s),
            Step::Alloc(s) => self.alloc_step(name, s),
            Step::Shape(s) => self.shape(s),
            Step::ShapeI(s) => self.shape_i(name, s),
            Step::ArgReduce(s) => self.arg_reduce(name, s),
            Step::Softmax(s) => self.softmax(name, s),
            Step::CumReduce(s) => self.cumulative(name, s),
            Step::Dot(s) => self.dot_step(name, s),
            Step::Epilogue(s) => self.epilogue(name, s),
            Step::BatchedDot(s) => self.batched_dot_step(name, s),
            Step::Gemm(s) => self.gemm_step(name, s),
            Step::Subtensor(s) => self.subtensor(name, s),
            Step::IncSubtensor(s) => self.inc_subtensor(name, s),
            Step::Take(s) => self.take(name, s),
            Step::IncTake(s) => self.inc_take(name, s),
            Step::BooleanMask(s) => self.boolean_mask(name, s),
            Step::Join(s) => self.join(name, s),
            Step::Split(s) => self.split(name, s),
            Step::Custom(s) => self.custom(name, s),
        }
    }
}
