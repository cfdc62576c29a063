//! The work of FAST_RUN rewriting grows about linearly with the size of the
//! `chain` graph of `workloads.md`: counted in work units (nodes examined by
//! the cycle checks of `replace`, node levels raised), never timed.

use kiln::rewrites::rewrite_graph;
use kiln::rewriting::Mode;
use kiln::workloads::chain_graph;

/// (cycle-check visits, level raises, input changes, nodes after) of FAST_RUN on chain(k).
fn work(k: usize) -> (u64, u64, u64, usize) {
    let mut fg = chain_graph(k).unwrap();
    // The per-mutation verifier is itself linear per mutation; the passes still verify.
    fg.set_check_after_mutation(false);
    rewrite_graph(&mut fg, &Mode::fast_run()).unwrap();
    fg.check_integrity().unwrap();
    (
        fg.stats.cycle_check_visits,
        fg.stats.level_raises,
        fg.stats.changes,
        fg.n_nodes(),
    )
}

#[test]
fn replacement_work_grows_linearly_with_the_chain() {
    let (v_small, r_small, c_small, n_small) = work(300);
    let (v_large, r_large, c_large, n_large) = work(3000);
    assert!(v_small > 0 && r_small > 0 && c_small > 0);
    assert!(n_small < n_large);
    // Ten times the graph: a quadratic cost would grow 100-fold.
    let ratio = |large: u64, small: u64| large as f64 / small as f64;
    assert!(
        ratio(c_large, c_small) < 15.0,
        "{c_small} -> {c_large} changes"
    );
    assert!(
        ratio(v_large, v_small) < 20.0,
        "cycle checks visited {v_small} -> {v_large} nodes"
    );
    assert!(
        ratio(r_large, r_small) < 30.0,
        "levels raised {r_small} -> {r_large} times"
    );
    // Per input change, the cycle checks stay a small constant.
    assert!(
        v_large < 2 * c_large,
        "{v_large} visits for {c_large} changes"
    );
}
