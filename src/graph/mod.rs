//! The typed graph IR: the arena-based [`FunctionGraph`] with its features,
//! typed ids, and printers.
//!
//! The value types the IR is typed with ([`DType`], [`TensorType`],
//! [`Value`], [`Element`]) live in [`crate::types`], below both this module
//! and the op set; they are re-exported here, and `kiln::graph::DType` (like
//! `kiln::DType`) stays their public path for users.

pub mod features;
pub mod fgraph;
pub mod ids;
pub mod print;

pub use crate::types::{DType, Element, TensorType, Value};
pub use features::destroy::DestroyHandler;
pub use features::{ChangeTracker, History, NodeFinder, ReplaceValidate};
pub use fgraph::{Apply, Feature, FunctionGraph, GraphStats, Variable};
pub use ids::{Client, NodeId, VarId};
