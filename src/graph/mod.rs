//! The typed graph IR: dtypes and tensor types, values, the arena-based
//! [`FunctionGraph`] with its features, and printers.

pub mod features;
pub mod fgraph;
pub mod ids;
pub mod print;
pub mod types;
pub mod value;

pub use features::destroy::DestroyHandler;
pub use features::{ChangeTracker, History, NodeFinder, ReplaceValidate};
pub use fgraph::{Apply, Feature, FunctionGraph, GraphStats, Variable};
pub use ids::{Client, NodeId, VarId};
pub use types::{DType, TensorType};
pub use value::{Element, Value};
