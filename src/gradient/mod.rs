//! Symbolic differentiation: reverse mode over the `Tensor` DAG, one
//! pullback per op (PyTensor's `L_op`), building gradient graphs that are
//! ordinary graphs (compiled, rewritten by the optdb and JIT-compiled like
//! any other).
//!
//! | file | owns |
//! |---|---|
//! | `pullback.rs` | [`l_op`]: the one `match` over `Op`, and [`scalar_l_op`], the one over `ScalarOp` |
//! | `expand.rs` | the primitive graphs of `Composite`, `FusedReduce` and `Gemm`, differentiated instead of having pullbacks |
//! | `reverse.rs` | the driver: [`grad`], [`grad_with`] (`known_grads`, [`DisconnectedInputs`]), [`vjp`] |
//! | `derived.rs` | [`jacobian`], [`hessian`], [`jvp`] (`Rop` by the double-vjp trick) |
//!
//! Adding an op's gradient: one arm in `pullback::l_op` (or, for an op that
//! is sugar for other ops, one arm in `expand::primitive_form`).

mod derived;
mod expand;
mod pullback;
mod reverse;

pub use derived::{hessian, jacobian, jvp};
pub use pullback::{l_op, scalar_l_op, InputGrad};
pub use reverse::{disconnected_warnings, grad, grad_with, vjp, DisconnectedInputs, GradOptions};
