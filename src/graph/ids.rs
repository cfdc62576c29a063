//! Typed ids into a FunctionGraph's arenas.
//!
//! Variables and Apply nodes live in `Vec`s owned by the FunctionGraph and
//! are named by `u32` newtypes; ids are never reused, so an id held across
//! a mutation still names the same (possibly detached) entity.

use std::fmt;

/// A variable (an input, a constant or an output of an Apply node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub u32);

/// An Apply node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl VarId {
    /// The arena index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl NodeId {
    /// The arena index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for VarId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// A use of a variable: an input slot of a node, or a graph output slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Client {
    /// Input `1` of node `0`.
    Node(NodeId, u32),
    /// Output slot of the FunctionGraph.
    Output(u32),
}
