//! The seed walk-through (`examples/seed_rewriting.rs`) prints exactly the seed's results.

// Graph builders take slices of tensors; cloning into array literals reads best here.
#![allow(clippy::cloned_ref_to_slice_refs)]

#[path = "../examples/seed_rewriting.rs"]
mod seed;

#[test]
fn seed_walkthrough_lines_are_exact() {
    let lines = seed::seed_lines().unwrap();
    let results: Vec<&str> = lines
        .iter()
        .map(String::as_str)
        .filter(|l| !l.starts_with('#'))
        .collect();
    let expected = [
        "FunctionGraph(add(z, mul(true_div(mul(y, x), y), true_div(z, x))))",
        "FunctionGraph(add(z, mul(x, true_div(z, x))))",
        "FunctionGraph(add(z, mul(x, true_div(z, x))))",
        "FunctionGraph(add(z, mul(x, true_div(z, x))))",
        "FunctionGraph(true_div(mul(add(y, z), x), add(y, z)))",
        "FunctionGraph(true_div(mul(add(y, z), x), add(y, z)))",
        "FunctionGraph(true_div(mul(*1 -> add(y, z), x), *1))",
        "FunctionGraph(x)",
        "(A @ (x + y))",
        "((A @ x) + (A @ y))",
        "(A @ ((x + y) + (z + w)))",
        "(((A @ x) + (A @ y)) + ((A @ z) + (A @ w)))",
        "(A @ (x + (y + (B @ (z + w)))))",
        "((A @ x) + ((A @ y) + ((A @ (B @ z)) + (A @ (B @ w)))))",
        "(A @ (x + (y + (B @ (z + w)))))",
        "~_1",
        "{~_1: y}",
        "add [id A] ''",
        " |y [id B]",
        " |y [id B]",
        "{~_2: add, ~_3: e(x, y)}",
        "{~_2: add, ~_3: e(x, y, z)}",
        "mul [id A] ''",
        " |x [id B]",
        " |y [id C]",
        " |z [id D]",
    ];
    assert_eq!(results, expected);
}
