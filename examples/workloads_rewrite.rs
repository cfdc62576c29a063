//! Prints each benchmark workload before and after FAST_RUN rewriting.
use kiln::rewrites::rewrite_graph;
use kiln::rewriting::Mode;
use kiln::Result;

fn main() -> Result<()> {
    for w in kiln::workloads::suite() {
        let mut fg = w.graph()?;
        let before = fg.n_nodes();
        let t0 = std::time::Instant::now();
        let _p = rewrite_graph(&mut fg, &Mode::fast_run())?;
        println!(
            "{}: {before} -> {} nodes in {:.2} ms\n  {fg}",
            w.name,
            fg.n_nodes(),
            t0.elapsed().as_secs_f64() * 1e3
        );
    }
    Ok(())
}
