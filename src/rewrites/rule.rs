//! The shape of a rule in the rewrite library: a named function from a node
//! to an optional replacement of its (single) output, the op kinds it
//! tracks, and whether it is cheap enough for FAST_COMPILE.
//!
//! Rules are plain data so that topic files stay short lists; `optdb`
//! wraps each one into a node rewriter when it registers it.

use crate::error::Result;
use crate::graph::{FunctionGraph, NodeId, VarId};
use crate::ops::OpKind;

/// A rule's transform: the replacement for the node's first output, or `None`.
pub type RuleFn = fn(&mut FunctionGraph, NodeId) -> Result<Option<VarId>>;

/// A named rewrite rule.
#[derive(Clone, Copy)]
pub struct Rule {
    /// The rule's name (`local_mul_canonizer`), used in profiles, logs and queries.
    pub name: &'static str,
    /// The op kinds it applies to; empty means every node.
    pub tracks: &'static [OpKind],
    /// The transform.
    pub apply: RuleFn,
    /// Also tagged `fast_compile` (cheap, always beneficial).
    pub fast_compile: bool,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rule({})", self.name)
    }
}
