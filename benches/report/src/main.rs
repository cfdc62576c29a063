//! The benchmark report of `benches/compare.sh`: reads `kiln.jsonl`,
//! `kiln_chain.jsonl`, `python.jsonl` and `versions.txt` from the results
//! folder and writes `report.md` (the side-by-side tables) and two PNG plots
//! (`run_time.png`: run time per workload and system; `rewrite_time.png`:
//! FAST_RUN rewrite time against graph size, kiln and PyTensor) to the
//! output folder.
//!
//! Usage: `kiln-bench-report RESULTS_DIR OUT_DIR`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use serde_json::Value;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const WORKLOADS: [&str; 8] = [
    "softplus",
    "poly",
    "gauss",
    "sigmoid_xent",
    "logsumexp",
    "outer_tanh",
    "mlp",
    "canon",
];

/// (column key, column title, has a compile time to show).
const SYSTEMS: [(&str, &str, bool); 9] = [
    ("kiln:none", "kiln none", false),
    ("kiln:fast_compile", "kiln fast_compile", false),
    ("kiln:fast_run", "kiln fast_run (compile)", true),
    ("kiln:fast_run-fusion", "kiln fast_run-fusion", false),
    ("numpy", "numpy", false),
    ("numexpr", "numexpr 2 threads", false),
    ("pytensor_c", "PyTensor C (compile)", true),
    ("pytensor_numba", "PyTensor numba (compile)", true),
    ("jax", "JAX jit (compile)", true),
];

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else if x >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// (run ms, compile ms, error) per (system key, workload).
type Table = BTreeMap<(String, String), (Option<f64>, Option<f64>, Option<String>)>;

fn collect(kiln: &[Value], py: &[Value]) -> Table {
    let mut t = Table::new();
    for r in kiln {
        let key = format!("kiln:{}", r["mode"].as_str().unwrap_or("?"));
        let w = r["workload"].as_str().unwrap_or("?").to_string();
        t.insert((key, w), (r["run_ms"].as_f64(), r["compile_ms"].as_f64(), None));
    }
    for r in py {
        let sys = r["system"].as_str().unwrap_or("?").to_string();
        let w = r["workload"].as_str().unwrap_or("?").to_string();
        let err = r["error"].as_str().map(String::from);
        t.insert((sys, w), (r["run_ms"].as_f64(), r["compile_ms"].as_f64(), err));
    }
    t
}

fn cell(t: &Table, sys: &str, w: &str, with_compile: bool) -> String {
    // A whole-system failure is recorded under the workload "*".
    let entry = t
        .get(&(sys.to_string(), w.to_string()))
        .or_else(|| t.get(&(sys.to_string(), "*".to_string())));
    match entry {
        Some((Some(r), c, _)) => match (with_compile, c) {
            (true, Some(c)) => format!("{} ({})", ms(*r), ms(*c)),
            _ => ms(*r),
        },
        Some((None, _, Some(e))) if e.contains("not expressible") => "—".into(),
        Some((None, _, Some(_))) => "failed".into(),
        _ => "n/a".into(),
    }
}

fn report(dir: &Path, table: &Table, kchain: &[Value], py: &[Value]) -> String {
    let mut s = String::new();
    let versions = std::fs::read_to_string(dir.join("versions.txt")).unwrap_or_default();
    let _ = writeln!(s, "Python packages: {}\n", versions.split_whitespace().collect::<Vec<_>>().join(", "));
    let _ = writeln!(s, "Run time, median ms (compile ms = first call, cold, in parentheses):\n");
    let _ = write!(s, "| workload |");
    for (_, title, _) in SYSTEMS {
        let _ = write!(s, " {title} |");
    }
    let _ = writeln!(s, " fast_run / none |");
    let _ = writeln!(s, "|---|{}---|", "---|".repeat(SYSTEMS.len()));
    for w in WORKLOADS {
        let _ = write!(s, "| {w} |");
        for (key, _, c) in SYSTEMS {
            let _ = write!(s, " {} |", cell(table, key, w, c));
        }
        let run = |k: &str| table.get(&(k.to_string(), w.to_string())).and_then(|r| r.0);
        let ratio = match (run("kiln:none"), run("kiln:fast_run")) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.1}x faster", a / b),
            _ => "n/a".into(),
        };
        let _ = writeln!(s, " {ratio} |");
    }
    // Failures, verbatim.
    let fails: Vec<String> = py
        .iter()
        .filter_map(|r| {
            let e = r["error"].as_str()?;
            (!e.contains("not expressible")).then(|| {
                format!("- {} / {}: {e}", r["system"].as_str().unwrap_or("?"), r["workload"].as_str().unwrap_or("?"))
            })
        })
        .collect();
    if !fails.is_empty() {
        let _ = writeln!(s, "\nFailures:\n\n{}", fails.join("\n"));
    }
    let _ = writeln!(s, "\nChain graph, FAST_RUN (kiln: rewrite and code generation; PyTensor: rewriting only):\n");
    let _ = writeln!(s, "| K | nodes before → after (kiln) | kiln rewrite ms | kiln codegen ms | PyTensor rewrite ms | nodes after (PyTensor) |");
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for r in kchain {
        let w = r["workload"].as_str().unwrap_or("?");
        let k = w.trim_start_matches("chain_");
        let p = py.iter().find(|p| p["system"] == "pytensor" && p["workload"] == w);
        let prw = p.and_then(|p| p["rewrite_ms"].as_f64()).map_or("n/a".into(), ms);
        let pna = p.and_then(|p| p["nodes_after"].as_u64()).map_or("n/a".into(), |n| n.to_string());
        let _ = writeln!(
            s,
            "| {k} | {} → {} | {} | {} | {prw} | {pna} |",
            r["nodes_before"], r["nodes_after"],
            ms(r["rewrite_ms"].as_f64().unwrap_or(f64::NAN)),
            ms(r["codegen_ms"].as_f64().unwrap_or(f64::NAN)),
        );
    }
    s
}

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

fn plot_run_time(path: &Path, table: &Table) -> Res<()> {
    let root = BitMapBackend::new(path, (1400, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let vals: Vec<f64> = table.values().filter_map(|v| v.0).filter(|&v| v > 0.0).collect();
    let lo = vals.iter().cloned().fold(f64::INFINITY, f64::min).max(1e-3) / 2.0;
    let hi = vals.iter().cloned().fold(0.0, f64::max) * 12.0; // headroom for the legend
    let mut chart = ChartBuilder::on(&root)
        .caption("Run time per workload (median ms, log scale; lower is better)", ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..WORKLOADS.len() as f64, (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(WORKLOADS.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let f = x.fract();
            let i = x.floor() as usize;
            if (f - 0.5).abs() < 1e-6 && i < WORKLOADS.len() {
                WORKLOADS[i].to_string()
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
        let bars: Vec<_> = WORKLOADS
            .iter()
            .enumerate()
            .filter_map(|(i, w)| {
                let v = table.get(&(key.to_string(), w.to_string()))?.0?;
                let x0 = i as f64 + 0.075 + k as f64 * width;
                Some(Rectangle::new([(x0, lo), (x0 + width * 0.95, v)], color.filled()))
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
    let (xlo, xhi) = all.iter().fold((f64::INFINITY, 0f64), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (ylo, yhi) = all.iter().fold((f64::INFINITY, 0f64), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("FAST_RUN rewrite time vs graph size (chain graph)", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(((xlo / 1.5)..(xhi * 1.5)).log_scale(), ((ylo / 2.0).max(1e-3)..(yhi * 2.0)).log_scale())?;
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
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
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
    if args.len() != 3 {
        return Err("usage: kiln-bench-report RESULTS_DIR OUT_DIR".into());
    }
    let (dir, out) = (Path::new(&args[1]), Path::new(&args[2]));
    std::fs::create_dir_all(out)?;
    let kiln = lines(&dir.join("kiln.jsonl"));
    let kchain = lines(&dir.join("kiln_chain.jsonl"));
    let py = lines(&dir.join("python.jsonl"));
    let table = collect(&kiln, &py);
    let md = report(dir, &table, &kchain, &py);
    std::fs::write(out.join("report.md"), &md)?;
    print!("{md}");
    plot_run_time(&out.join("run_time.png"), &table)?;
    plot_rewrite_time(&out.join("rewrite_time.png"), &kchain, &py)?;
    println!("\nwrote {}/report.md, run_time.png, rewrite_time.png", out.display());
    Ok(())
}
