//! Times merge + an equilibrium of a few rewriters + the FAST_RUN query on a
//! synthetic 3000-op chain graph. Run with
//! `cargo run --release --example rewrite_bench`.

use std::sync::Arc;
use std::time::Instant;

use kiln::graph::FunctionGraph;
use kiln::rewriting::*;
use kiln::*;

fn chain(n_ops: usize) -> Result<FunctionGraph> {
    let x = vector("x", DType::F64);
    let y = vector("y", DType::F64);
    let mut acc = &x + &y;
    let mut k = 1;
    while k < n_ops {
        // Six ops per step: three of them rewritten away, one merged.
        acc = ((&acc * 1.0).exp().log() + 0.0) * (&acc + &y) + (&acc + &y);
        k += 7;
    }
    FunctionGraph::new(&[x, y], &[acc])
}

fn pat(i: &str, o: &str) -> Arc<dyn NodeRewriter> {
    Arc::new(PatternNodeRewriter::parse(i, o).expect("valid pattern"))
}

fn main() -> Result<()> {
    let mut db = optdb();
    let canon = db.equilibrium_mut("canonicalize")?;
    canon.register_node(
        "mul_one",
        pat("(mul ?x 1.0)", "?x"),
        &["fast_run", "fast_compile"],
    )?;
    canon.register_node(
        "add_zero",
        pat("(add ?x 0.0)", "?x"),
        &["fast_run", "fast_compile"],
    )?;
    canon.register_node(
        "log_exp",
        pat("(log (exp ?x))", "?x"),
        &["fast_run", "fast_compile"],
    )?;
    db.equilibrium_mut("specialize")?.register_node(
        "mul_to_sqr",
        pat("(mul ?x ?x)", "(sqr ?x)"),
        &["fast_run"],
    )?;
    for _ in 0..3 {
        let mut fg = chain(3000)?;
        let n0 = fg.n_nodes();
        let t = Instant::now();
        let p = rewrite_graph_with(&db, &mut fg, &Mode::fast_run())?;
        let dt = t.elapsed();
        println!(
            "FAST_RUN on a {n0}-node chain: {:.2} ms, {} nodes after, {} rewrites",
            dt.as_secs_f64() * 1e3,
            fg.n_nodes(),
            p.applied()
        );
    }
    let mut fg = chain(3000)?;
    let p = rewrite_graph_with(&db, &mut fg, &Mode::fast_run())?;
    println!("{p}");
    Ok(())
}
