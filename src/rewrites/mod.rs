//! The rewrite library: canonicalize, stabilize, specialize, BLAS (Gemm),
//! fusion (element-wise and reduction input) and inplace rewrites, one topic per file, registered in the optdb.
//! [`optdb`] assembles the registered optdb (the framework's skeleton plus
//! this library) and [`rewrite_graph`] rewrites a graph with it.
//! See `README.md` in this folder for the rules for writing rules.

pub mod alloc;
pub mod argreduce;
pub mod blas;
pub mod canonicalize;
pub mod canonizer;
pub mod erf;
pub mod fusion;
pub mod identities;
pub mod indexing;
pub mod inplace;
pub mod mul_tree;
pub mod reduce_fusion;
pub mod register;
pub mod rule;
pub mod shared;
pub mod sibling_fusion;
pub mod softmax;
pub mod specialize;
pub mod stabilize;
pub mod subtensor;
pub mod util;

pub use register::{optdb, rewrite_graph};
