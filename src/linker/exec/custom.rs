//! Execution of user ops (`Custom`): their inputs as owned values, their
//! reference `perform`, and the check of what they return.
//!
//! Invariant: a user op's results enter the slot table only after
//! `eval::check_custom_outputs` has matched them with the declared output
//! types (count, dtype, ndim, every static size), since every kernel that
//! reads them trusts those types.

use super::copy::to_value;
use super::state::Exec;
use crate::error::Result;
use crate::graph::Value;
use crate::linker::buffer::{Arr, Buffer};
use crate::linker::plan::step::CustomStep;

impl Exec<'_> {
    /// Runs a user op.
    pub(super) fn custom(&mut self, name: &str, step: &CustomStep) -> Result<()> {
        let CustomStep {
            op,
            inputs,
            outputs,
            out_types,
        } = step;
        let vals: Vec<Value> = inputs
            .iter()
            .map(|&s| to_value(self.par, self.pool, self.get(s)))
            .collect::<Result<_>>()?;
        let refs: Vec<&Value> = vals.iter().collect();
        let res = op.perform(&refs)?;
        // Kernels trust every value to have its static type: a user
        // op's results are checked before any of them is stored.
        crate::eval::check_custom_outputs(name, out_types, &res)?;
        for (&s, v) in outputs.iter().zip(res) {
            let shape = v.shape().to_vec();
            self.slots[s] = Some(Arr::from_buffer(Buffer::from_value(v), &shape));
        }
        Ok(())
    }
}
