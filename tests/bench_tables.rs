//! BENCHMARKS.md's results section is exactly what the report tool
//! (`benches/report`) renders from the committed raw data in
//! `benches/results/` (meta.json and the JSON lines of `benches/compare.sh`):
//! no figure of the section is copied by hand. The rendering code is the
//! report tool's own `tables.rs`, included here so that CI checks it
//! without building the tool's plotting dependencies.

#[path = "../benches/report/src/tables.rs"]
mod tables;

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn benchmarks_md_results_match_the_committed_raw_data() {
    let raw = tables::load(&root().join("benches/results")).unwrap();
    let doc = std::fs::read_to_string(root().join("BENCHMARKS.md")).unwrap();
    let regenerated = tables::regenerate(&doc, &raw).unwrap();
    assert!(
        regenerated == doc,
        "BENCHMARKS.md's results section is not what benches/results renders to; regenerate it with\n  \
         cargo run --release --manifest-path benches/report/Cargo.toml -- benches/results --write BENCHMARKS.md"
    );
}

#[test]
fn every_table_states_where_and_when_it_was_measured() {
    let raw = tables::load(&root().join("benches/results")).unwrap();
    let section = tables::render(&raw).unwrap();
    let prov = tables::provenance(&raw.meta).unwrap();
    let tables_in_section = section.matches("\n|---|").count();
    assert!(
        raw.per_call.is_some(),
        "benches/results holds kiln_percall.jsonl and python_percall.jsonl"
    );
    assert_eq!(
        tables_in_section,
        6 + usize::from(raw.head_to_head.is_some()),
        "run time, kiln detail, peak bytes, gradient node counts, (head-to-head,) per-call, chain"
    );
    assert_eq!(section.matches(prov.as_str()).count(), tables_in_section);
    for field in ["commit", "date", "cpu", "isa", "load_start", "load_end"] {
        let value = raw.meta[field].as_str().unwrap();
        assert!(
            prov.contains(value),
            "{field} `{value}` missing from {prov}"
        );
    }
}

#[test]
fn the_in_process_table_has_one_row_per_workload_and_size_and_states_its_provenance() {
    let raw = tables::load(&root().join("benches/results")).unwrap();
    let (meta, rows) = raw
        .inprocess
        .as_ref()
        .expect("benches/results holds inprocess.jsonl and inprocess_meta.json");
    let section = tables::render_inprocess(meta, rows).unwrap();
    assert!(section.contains(&tables::provenance(meta).unwrap()));
    let body = section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| workload"))
        .count();
    // Three systems per (workload, size).
    assert_eq!(body * 3, rows.len());
    assert!(!section.contains("n/a"), "{section}");
}

#[test]
fn the_corpus_table_has_every_expression_and_its_provenance() {
    let raw = tables::load(&root().join("benches/results")).unwrap();
    let (meta, rows) = raw
        .corpus
        .as_ref()
        .expect("benches/results holds corpus.jsonl and corpus_meta.json");
    let section = tables::render_corpus(meta, rows).unwrap();
    assert!(section.contains(&tables::provenance(meta).unwrap()));
    let names: std::collections::BTreeSet<&str> = rows
        .iter()
        .map(|r| r["workload"].as_str().unwrap())
        .collect();
    assert!(
        names.len() >= 40,
        "issue 16 asks for at least 40 expressions"
    );
    let body = section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| name"))
        .count();
    assert_eq!(body, names.len());
    // kiln and numpy measure every expression; numexpr those it can express.
    for sys in ["kiln", "numpy"] {
        let n = rows.iter().filter(|r| r["system"] == sys).count();
        assert_eq!(n, names.len(), "{sys}");
    }
}

#[test]
fn splice_replaces_only_the_marked_section() {
    let doc = format!(
        "intro\n{}\nold table\n{}\noutro\n",
        tables::BEGIN,
        tables::END
    );
    let out = tables::splice(&doc, "new table\n").unwrap();
    assert_eq!(
        out,
        format!(
            "intro\n{}\n\nnew table\n\n{}\noutro\n",
            tables::BEGIN,
            tables::END
        )
    );
    // Idempotent: splicing the same section again changes nothing.
    assert_eq!(tables::splice(&out, "new table").unwrap(), out);
}

#[test]
fn missing_or_misordered_markers_are_errors() {
    let e = tables::splice("no markers\n", "x").unwrap_err();
    assert!(e.contains("exactly one line"), "{e}");
    let twice = format!("{0}\n{0}\n{1}\n", tables::BEGIN, tables::END);
    assert!(tables::splice(&twice, "x").is_err());
    let reversed = format!("{}\n{}\n", tables::END, tables::BEGIN);
    let e = tables::splice(&reversed, "x").unwrap_err();
    assert!(e.contains("comes before"), "{e}");
}

/// Copies the files every results folder must hold from `benches/results`
/// into `dir`.
fn copy_required_data(dir: &Path) {
    let src = root().join("benches/results");
    for f in [
        "meta.json",
        "kiln.jsonl",
        "kiln_chain.jsonl",
        "python.jsonl",
    ] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
}

#[test]
fn the_head_to_head_table_has_a_row_per_workload_with_its_ratio_or_error() {
    let dir = tempfile::tempdir().unwrap();
    copy_required_data(dir.path());
    std::fs::write(
        dir.path().join("headtohead.jsonl"),
        "{\"workload\": \"poly\", \"kiln_ms\": 3.0, \"jax_ms\": 4.0, \"rounds\": 7, \"block\": 3}\n\
         {\"workload\": \"cumsum\", \"error\": \"AssertionError: a | b\\nc\"}\n",
    )
    .unwrap();
    let raw = tables::load(dir.path()).unwrap();
    let section = tables::render(&raw).unwrap();
    assert!(
        section.contains("7 rounds of alternating blocks of 3 timed calls"),
        "{section}"
    );
    assert!(
        section.contains("| poly | 3.00 | 4.00 | 0.75 |"),
        "{section}"
    );
    // The error stays in its cell: no `|` or line break of its own.
    assert!(
        section.contains("| cumsum | error: AssertionError: a / b c | | |"),
        "{section}"
    );

    // A data line without a figure: an error naming the field.
    std::fs::write(
        dir.path().join("headtohead.jsonl"),
        "{\"workload\": \"poly\", \"kiln_ms\": 3.0, \"rounds\": 7, \"block\": 3}\n",
    )
    .unwrap();
    let raw = tables::load(dir.path()).unwrap();
    let e = tables::render(&raw).unwrap_err();
    assert!(e.contains("jax_ms"), "{e}");
}

#[test]
fn malformed_raw_data_is_an_error_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    copy_required_data(dir.path());
    let mut chain = std::fs::read_to_string(dir.path().join("kiln_chain.jsonl")).unwrap();
    chain.push_str("{\"workload\": \"chain_5\", truncated\n");
    std::fs::write(dir.path().join("kiln_chain.jsonl"), &chain).unwrap();
    let e = tables::load(dir.path()).unwrap_err();
    let line = chain.lines().count();
    assert!(e.contains(&format!("kiln_chain.jsonl:{line}:")), "{e}");

    std::fs::remove_file(dir.path().join("kiln_chain.jsonl")).unwrap();
    let e = tables::load(dir.path()).unwrap_err();
    assert!(
        e.contains("cannot read") && e.contains("kiln_chain.jsonl"),
        "{e}"
    );

    // A record without a required field: an error naming the field.
    std::fs::write(
        dir.path().join("kiln_chain.jsonl"),
        "{\"workload\": \"chain_5\"}\n",
    )
    .unwrap();
    let raw = tables::load(dir.path()).unwrap();
    let e = tables::render(&raw).unwrap_err();
    assert!(e.contains("nodes_before"), "{e}");
}

#[test]
fn the_accuracy_table_compares_kiln_and_jax_on_every_function() {
    let raw = tables::load(&root().join("benches/results")).unwrap();
    let (meta, rows) = raw
        .accuracy
        .as_ref()
        .expect("benches/results holds accuracy_meta.json and accuracy_*.jsonl");
    let section = tables::render_accuracy(meta, rows).unwrap();
    let functions: std::collections::BTreeSet<&str> = rows
        .iter()
        .map(|r| r["function"].as_str().unwrap())
        .collect();
    // The functions issue 16 names where JAX is faster.
    for f in ["exp", "log1p", "tanh", "softplus", "sigmoid"] {
        assert!(functions.contains(f), "{f}");
    }
    for sys in ["kiln", "jax"] {
        let n = rows.iter().filter(|r| r["system"] == sys).count();
        assert_eq!(n, functions.len(), "{sys}");
    }
    let body = section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| function"))
        .count();
    assert_eq!(body, functions.len());
    assert!(section.contains(meta["commit"].as_str().unwrap()));
}
