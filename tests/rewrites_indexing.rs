//! The canonicalize rules on advanced indexing and joins
//! (`src/rewrites/indexing.rs`): for each rule a before/after test in pprint
//! form (an equilibrium of that rule alone), a check that the result is a
//! fixed point, a value check, and the cases where the rule must not fire
//! because it would drop a run-time check.

mod common_rewrites;

use common_rewrites::*;

#[test]
fn join_of_one_input_is_that_input() {
    check_rule(
        "local_join_1",
        graph("x=f64[:]", "concatenate([x * 2])"),
        "concatenate([(x * 2.0)], axis=0)",
        "(x * 2.0)",
    );
}

#[test]
fn statically_empty_join_inputs_are_dropped() {
    check_rule(
        "local_join_empty",
        graph("x=f64[:, 3]; e=f64[0, 3]", "concatenate([x, e, x])"),
        "concatenate([x, e, x], axis=0)",
        "concatenate([x, x], axis=0)",
    );
    // All empty: one is kept (the join of one input then goes too).
    check_rule(
        "local_join_empty",
        graph("e=f64[0, 3]", "concatenate([e, e], axis=0)"),
        "concatenate([e, e], axis=0)",
        "concatenate([e], axis=0)",
    );
    // The empty input fixes a size the others leave open: dropping it would
    // lose the run-time check of that size.
    check_no_fire(
        "local_join_empty",
        graph("x=f64[:, :]; e=f64[0, 3]", "concatenate([x, e])"),
    );
}

#[test]
fn split_into_one_part_is_its_input() {
    check_rule(
        "local_useless_split",
        graph("s=f64[4]", "split(s, [4], output=0) * 2"),
        "(split(s, [4], axis=0) * 2.0)",
        "(s * 2.0)",
    );
    // A run-time size must still be checked.
    check_no_fire(
        "local_useless_split",
        graph("s=f64[4]; n=i64[1]", "split(s, n, output=0)"),
    );
}

#[test]
fn gather_of_a_full_arange_is_the_identity() {
    check_rule(
        "local_useless_advanced_subtensor1",
        graph("X=f64[3, :]", "take(X, [0, 1, -1]) + 1"),
        "(take(X, [0, 1, -1]) + 1.0)",
        "(X + 1.0)",
    );
    check_rule(
        "local_useless_advanced_subtensor1",
        graph("X=f64[:, 2]", "take(X, [0, 1], axis=1)"),
        "take(X, [0, 1], axis=1)",
        "X",
    );
    // Not every position, out of order, or an unknown axis length.
    check_no_fire(
        "local_useless_advanced_subtensor1",
        graph("X=f64[3, :]", "take(X, [0, 2, 1])"),
    );
    check_no_fire(
        "local_useless_advanced_subtensor1",
        graph("X=f64[:, :]", "take(X, [0, 1])"),
    );
}

#[test]
fn full_overwrite_is_y() {
    check_rule(
        "local_useless_advanced_set_subtensor1",
        graph(
            "x=f64[3]; y=f64[3]",
            "advanced_set_subtensor(x, [0, 1, 2], y)",
        ),
        "advanced_set_subtensor(x, [0, 1, 2], y)",
        "y",
    );
    // An increment is not an overwrite; a y of unknown size keeps its check.
    check_no_fire(
        "local_useless_advanced_set_subtensor1",
        graph(
            "x=f64[3]; y=f64[3]",
            "advanced_inc_subtensor(x, [0, 1, 2], y)",
        ),
    );
    check_no_fire(
        "local_useless_advanced_set_subtensor1",
        graph(
            "x=f64[3]; y=f64[:]",
            "advanced_set_subtensor(x, [0, 1, 2], y)",
        ),
    );
}

#[test]
fn fast_run_keeps_gathers_and_joins_and_removes_useless_ones() {
    let mut fg = graph(
        "x=f64[:]; i=i64[:]; e=f64[0]",
        "concatenate([take(x, i) * 2, e])",
    );
    fast_run_nofusion(&mut fg);
    assert_eq!(show(&fg), "(2.0 * take(x, i))");
}

#[test]
fn reduction_along_a_join_of_size_one_inputs_is_element_wise() {
    let name = "local_reduce_join";
    check_rule(
        name,
        graph("x=f64[:]; y=f64[:]", "max(stack([x, y]), axis=0)"),
        "max(concatenate([x[None, :], y[None, :]], axis=0), axis=0)",
        "maximum(x, y)",
    );
    check_rule(
        name,
        graph(
            "x=f64[:]; y=f64[:]; z=f64[:]",
            "sum(stack([x, y, z]), axis=0)",
        ),
        "sum(concatenate([x[None, :], y[None, :], z[None, :]], axis=0), axis=0)",
        "(x + y + z)",
    );
    check_rule(
        name,
        graph(
            "x=f64[:]; y=f64[:]; z=f64[:]",
            "min(stack([x, y, z]), axis=0)",
        ),
        "min(concatenate([x[None, :], y[None, :], z[None, :]], axis=0), axis=0)",
        "minimum(minimum(x, y), z)",
    );
    check_rule(
        name,
        graph(
            "A=f64[:, 1]; B=f64[:, 1]",
            "prod(concatenate([A, B], axis=1), axis=1)",
        ),
        "prod(concatenate([A, B], axis=1), axis=1)",
        "(A[:, 0] * B[:, 0])",
    );
    check_rule(
        name,
        graph("a=f64[1]; b=f64[1]", "sum(concatenate([a, b]))"),
        "sum(concatenate([a, b], axis=0))",
        "(a[0] + b[0])",
    );
    check_rule(
        name,
        graph("p=bool[:]; q=bool[:]", "any(stack([p, q]), axis=0)"),
        "any(concatenate([p[None, :], q[None, :]], axis=0), axis=0)",
        "(p | q)",
    );
    // Inputs of more than one element along the axis, another axis.
    check_no_fire(
        name,
        graph("x=f64[:]; y=f64[:]", "sum(concatenate([x, y]))"),
    );
    check_no_fire(
        name,
        graph("x=f64[:]; y=f64[:]", "sum(stack([x, y]), axis=1)"),
    );
    // A sum of i32 accumulates in i64; `all` of numbers is not a bitwise and.
    check_no_fire(
        name,
        graph("i=i32[:]; j=i32[:]", "sum(stack([i, j]), axis=0)"),
    );
    check_no_fire(
        name,
        graph("i=i64[:]; j=i64[:]", "all(stack([i, j]), axis=0)"),
    );
    // `any` of floats (a NaN or a nonzero is true): no `or` of float operands
    // (found by the differential run, seed 6262, on a join of Gemm outputs).
    check_no_fire(
        name,
        graph("x=f64[:]; y=f64[:]", "any(stack([x, y]), axis=0)"),
    );
    check_no_fire(
        name,
        graph(
            "A=f64[:, 1]; B=f64[:, 1]",
            "any(concatenate([A, B], axis=1), axis=1)",
        ),
    );
    // The join checks that A's second size equals B's; an element-wise op
    // would broadcast A's static 1 instead.
    check_no_fire(
        name,
        graph(
            "A=f64[1, 1]; B=f64[1, :]",
            "sum(concatenate([A, B]), axis=0)",
        ),
    );
}
