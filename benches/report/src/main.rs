//! The benchmark report of `benches/compare.sh`: renders the results
//! section of `BENCHMARKS.md` from the raw data in a results folder
//! (`meta.json`, `kiln.jsonl`, `kiln_chain.jsonl`, `python.jsonl`; see
//! `tables.rs`) and draws two PNG plots into that folder (`run_time.png`:
//! run time per workload and system; `rewrite_time.png`: FAST_RUN rewrite
//! time against graph size, kiln and PyTensor).
//!
//! Usage:
//!
//! - `kiln-bench-report RESULTS_DIR --write DOC.md`: replaces the section
//!   between the report markers of `DOC.md` and redraws the plots;
//! - `kiln-bench-report RESULTS_DIR --check DOC.md`: exits with status 1
//!   when `DOC.md`'s section differs from what the data renders to (kiln's
//!   `tests/bench_tables.rs` makes the same check in CI).

mod tables;

use std::path::Path;

use plotters::prelude::*;
use serde_json::Value;

use tables::{Table, SYSTEMS};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const COLORS: [RGBColor; 9] = [
    RGBColor(200, 200, 200),
    RGBColor(150, 150, 150),
    RGBColor(215, 48, 39),
    RGBColor(252, 141, 89),
    RGBColor(69, 117, 180),
    RGBColor(145, 191, 219),
    RGBColor(26, 152, 80),
    RGBColor(166, 217, 106),
    RGBColor(118, 42, 131),
];

/// Run time per workload and system (log scale).
fn plot_run_time(path: &Path, table: &Table, workloads: &[String]) -> Res<()> {
    let root = BitMapBackend::new(path, (1400, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let vals: Vec<f64> = table
        .values()
        .filter_map(|v| v.0)
        .filter(|&v| v > 0.0)
        .collect();
    let lo = vals.iter().cloned().fold(f64::INFINITY, f64::min).max(1e-3) / 2.0;
    let hi = vals.iter().cloned().fold(0.0, f64::max) * 12.0; // headroom for the legend
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Run time per workload (median ms, log scale; lower is better)",
            ("sans-serif", 24),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..workloads.len() as f64, (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(workloads.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let f = x.fract();
            let i = x.floor() as usize;
            if (f - 0.5).abs() < 1e-6 && i < workloads.len() {
                workloads[i].clone()
            } else {
                String::new()
            }
        })
        .y_desc("ms")
        .label_style(("sans-serif", 15))
        .draw()?;
    let n = SYSTEMS.len() as f64;
    let width = 0.85 / n;
    for (k, (key, title, _)) in SYSTEMS.iter().enumerate() {
        let color = COLORS[k];
        let bars: Vec<_> = workloads
            .iter()
            .enumerate()
            .filter_map(|(i, w)| {
                let v = table.get(&(key.to_string(), w.to_string()))?.0?;
                let x0 = i as f64 + 0.075 + k as f64 * width;
                Some(Rectangle::new(
                    [(x0, lo), (x0 + width * 0.95, v)],
                    color.filled(),
                ))
            })
            .collect();
        chart
            .draw_series(bars)?
            .label(title.replace(" (compile)", ""))
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    root.present()?;
    Ok(())
}

/// FAST_RUN rewrite time against graph size, kiln and PyTensor.
fn plot_rewrite_time(path: &Path, kchain: &[Value], py: &[Value]) -> Res<()> {
    let series = |rows: Vec<&Value>| -> Vec<(f64, f64)> {
        rows.iter()
            .filter_map(|r| Some((r["nodes_before"].as_f64()?, r["rewrite_ms"].as_f64()?)))
            .collect()
    };
    let kiln = series(kchain.iter().collect());
    let pyt = series(py.iter().filter(|r| r["system"] == "pytensor").collect());
    let all: Vec<(f64, f64)> = kiln.iter().chain(&pyt).cloned().collect();
    if all.is_empty() {
        return Ok(());
    }
    let (xlo, xhi) = all
        .iter()
        .fold((f64::INFINITY, 0f64), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (ylo, yhi) = all
        .iter()
        .fold((f64::INFINITY, 0f64), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "FAST_RUN rewrite time vs graph size (chain graph)",
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            ((xlo / 1.5)..(xhi * 1.5)).log_scale(),
            ((ylo / 2.0).max(1e-3)..(yhi * 2.0)).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("Apply nodes before rewriting")
        .y_desc("rewrite ms")
        .label_style(("sans-serif", 14))
        .draw()?;
    for (name, pts, color) in [("kiln", &kiln, COLORS[2]), ("PyTensor", &pyt, COLORS[6])] {
        if pts.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(pts.iter().cloned(), color.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: kiln-bench-report RESULTS_DIR (--write | --check) DOC.md";
    let [_, dir, action, doc_path] = args.as_slice() else {
        return Err(usage.into());
    };
    let (dir, doc_path) = (Path::new(dir), Path::new(doc_path));
    let raw = tables::load(dir)?;
    let doc = std::fs::read_to_string(doc_path)
        .map_err(|e| format!("cannot read {}: {e}", doc_path.display()))?;
    let regenerated = tables::regenerate(&doc, &raw)?;
    match action.as_str() {
        "--check" => {
            if regenerated != doc {
                eprintln!(
                    "{}: the results section differs from what {} renders to; run\n  \
                     cargo run --release --manifest-path benches/report/Cargo.toml -- {} --write {}",
                    doc_path.display(),
                    dir.display(),
                    dir.display(),
                    doc_path.display()
                );
                std::process::exit(1);
            }
            println!(
                "{}: results section matches {}",
                doc_path.display(),
                dir.display()
            );
        }
        "--write" => {
            std::fs::write(doc_path, &regenerated)?;
            let table = tables::collect(&raw)?;
            plot_run_time(&dir.join("run_time.png"), &table, &tables::workloads(&raw))?;
            plot_rewrite_time(&dir.join("rewrite_time.png"), &raw.chain, &raw.python)?;
            print!("{}", tables::render(&raw)?);
            println!(
                "\nwrote the results section of {} and {}/run_time.png, rewrite_time.png",
                doc_path.display(),
                dir.display()
            );
        }
        _ => return Err(usage.into()),
    }
    Ok(())
}
