//! The `parse_expr` fuzz target's body, shared with `tests/fuzz_replay.rs`
//! (the fuzz target includes this file by path): the expression front end
//! on arbitrary text must return a value or an error, never panic. It
//! exercises the lexer, parser and checker (`kiln::expr::parse`), error
//! rendering, the `name=dtype[dims]` declarations, and the graph builder
//! over a few declared variables.

use std::collections::HashMap;

use kiln::expr::{parse, parse_decl};
use kiln::{build_expression, matrix, scalar, tensor, vector, DType};

/// Runs the front end on `data` read as (lossy) UTF-8; a panic is a finding.
pub fn parse_expr(data: &[u8]) {
    let src = String::from_utf8_lossy(data);
    match parse(&src) {
        Ok(e) => {
            let _ = e.preorder().len();
        }
        Err(err) => {
            let _ = err.render(&src);
            let _ = err.line_col(&src);
        }
    }
    if let Err(err) = parse_decl(&src) {
        let _ = err.render(&src);
    }
    let vars: HashMap<String, kiln::Tensor> = [
        ("x", vector("x", DType::F64)),
        ("y", vector("y", DType::F32)),
        ("k", vector("k", DType::I64)),
        ("b", vector("b", DType::Bool)),
        ("M", matrix("M", DType::F64)),
        ("s", scalar("s", DType::F64)),
        ("r", tensor("r", DType::F64, &[Some(1), None])),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_string(), t))
    .collect();
    let _ = build_expression(&src, &vars);
}
