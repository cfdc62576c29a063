//! The shortcut node rewriters: [`SubstitutionNodeRewriter`] (same inputs,
//! another op) and [`RemovalNodeRewriter`] (`y = op(x)` becomes `x`).

use crate::error::{Error, Result};
use crate::graph::{FunctionGraph, NodeId};
use crate::ops::Op;

use super::rewriter::{NodeRewriter, Rewrite, Tracks};

/// Replaces every node of `op1` by a node of `op2` on the same inputs.
#[derive(Debug, Clone)]
pub struct SubstitutionNodeRewriter {
    op1: Op,
    op2: Op,
}

impl SubstitutionNodeRewriter {
    /// Substitutes `op2` for `op1`.
    pub fn new(op1: Op, op2: Op) -> Self {
        SubstitutionNodeRewriter { op1, op2 }
    }
}

impl NodeRewriter for SubstitutionNodeRewriter {
    fn name(&self) -> String {
        format!("{} -> {}", self.op1, self.op2)
    }
    fn tracks(&self) -> Tracks {
        Tracks::kind(self.op1.kind())
    }
    fn transform(&self, fg: &mut FunctionGraph, node: NodeId) -> Result<Option<Rewrite>> {
        if fg.node(node).op != self.op1 {
            return Ok(None);
        }
        let inputs = fg.node(node).inputs.clone();
        let n = fg.apply(self.op2.clone(), &inputs)?;
        Ok(Some(Rewrite::Outputs(
            fg.node(n).outputs.iter().map(|&o| Some(o)).collect(),
        )))
    }
}

/// Removes every node of `op`: output `k` is replaced by input `k`.
#[derive(Debug, Clone)]
pub struct RemovalNodeRewriter {
    op: Op,
}

impl RemovalNodeRewriter {
    /// Removes `op` (which must have as many outputs as inputs).
    pub fn new(op: Op) -> Self {
        RemovalNodeRewriter { op }
    }
}

impl NodeRewriter for RemovalNodeRewriter {
    fn name(&self) -> String {
        format!("remove_{}", self.op)
    }
    fn tracks(&self) -> Tracks {
        Tracks::kind(self.op.kind())
    }
    fn transform(&self, fg: &mut FunctionGraph, node: NodeId) -> Result<Option<Rewrite>> {
        let n = fg.node(node);
        if n.op != self.op {
            return Ok(None);
        }
        if n.inputs.len() != n.outputs.len() {
            return Err(Error::Rewrite(format!(
                "cannot remove {}: it has {} inputs but {} outputs",
                n.op,
                n.inputs.len(),
                n.outputs.len()
            )));
        }
        Ok(Some(Rewrite::Outputs(
            n.inputs.iter().map(|&i| Some(i)).collect(),
        )))
    }
}
