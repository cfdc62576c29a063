//! The value types every layer above shares: dtypes and tensor types
//! ([`dtype`]) and concrete tensor values ([`value`]).
//!
//! This module sits below the op set and the graph IR (`ops/` and `graph/`
//! both import it, it imports neither), so that the ops can describe their
//! types and constants without depending on the graph that holds them.
//! Users reach these types through the crate root (`kiln::DType`) or
//! through [`crate::graph`] (`kiln::graph::DType`), which re-exports them
//! as part of the IR's public path.

pub mod dtype;
pub mod value;

pub use dtype::{DType, TensorType};
pub use value::{Element, Value};
