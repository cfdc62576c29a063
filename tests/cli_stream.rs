//! `kiln eval --stream`: the same values as the in-memory path (element-wise
//! results and full reductions, several chunks, one-element inputs, every
//! output dtype path), the clear errors, and a 200 MiB input streamed under
//! a 96 MiB data limit that the in-memory path exceeds.
mod cli_support;

use std::io::Write;
use std::path::Path;
use std::process::Command as StdCommand;

use cli_support::*;
use ndarray::{ArrayD, IxDyn};

fn grid(n: usize, f: impl Fn(usize) -> f64) -> ArrayD<f64> {
    ArrayD::from_shape_fn(IxDyn(&[n / 100, 100]), |i| f(i[0] * 100 + i[1]))
}

/// Runs `kiln eval` on the inputs, streamed (chunks of 1000 elements) and in
/// memory, each writing `--out`; returns the two output paths.
fn both(
    dir: &Path,
    expr: &str,
    inputs: &[(&str, &Path)],
) -> (std::path::PathBuf, std::path::PathBuf) {
    let mut outs = Vec::new();
    for (tag, stream) in [("s", true), ("m", false)] {
        let out = dir.join(format!("{tag}.npy"));
        let mut cmd = kiln();
        cmd.args(["eval", expr, "--out"]).arg(&out);
        for (name, p) in inputs {
            cmd.arg("--in").arg(input(name, p));
        }
        if stream {
            cmd.args(["--stream", "--chunk-elements", "1000"]);
        }
        let text = stdout_of(&mut cmd);
        assert!(text.starts_with("wrote "), "{text}");
        outs.push(out);
    }
    let m = outs.pop().unwrap();
    (outs.pop().unwrap(), m)
}

#[test]
fn streamed_values_match_the_in_memory_path() {
    let dir = tempfile::tempdir().unwrap();
    let x = save(dir.path(), "x", &grid(10_500, |i| (i as f64) * 1e-3 - 4.0));
    let y = save(
        dir.path(),
        "y",
        &grid(10_500, |i| ((i * 7919) % 101) as f64),
    );
    let c = save(dir.path(), "c", &ArrayD::from_elem(IxDyn(&[1, 1]), 2.5f64));
    let k = save(
        dir.path(),
        "k",
        &ArrayD::from_shape_fn(IxDyn(&[105, 100]), |i| (i[0] * 100 + i[1]) as i32 % 13 - 6),
    );
    let ins = [
        ("x", x.as_path()),
        ("y", y.as_path()),
        ("c", c.as_path()),
        ("k", k.as_path()),
    ];

    for expr in ["exp(x) * c + y", "where(x > 0, log1p(x * x), y - c)"] {
        let (s, m) = both(dir.path(), expr, &ins);
        assert_eq!(load::<f64>(&s), load::<f64>(&m), "{expr}");
    }
    // Integer and bool outputs (the bool result is copied into the map).
    let (s, m) = both(dir.path(), "k * 3 + 1", &ins);
    assert_eq!(load::<i32>(&s), load::<i32>(&m));
    let (s, m) = both(dir.path(), "(x > 0) & (k > 0)", &ins);
    assert_eq!(load::<bool>(&s), load::<bool>(&m));
    assert_eq!(load::<bool>(&s).shape(), &[105, 100]);

    // Full reductions, combined over 11 chunks.
    for expr in [
        "sum(exp(x) * c + y)",
        "max(x * y)",
        "min(x - c)",
        "prod(1 + x * 1e-4)",
    ] {
        let (s, m) = both(dir.path(), expr, &ins);
        let (s, m) = (load::<f64>(&s), load::<f64>(&m));
        let (a, b) = (s.first().unwrap(), m.first().unwrap());
        assert!((a - b).abs() <= 1e-12 * b.abs(), "{expr}: {a} vs {b}");
    }
    let (s, m) = both(dir.path(), "sum(k)", &ins);
    assert_eq!(load::<i64>(&s), load::<i64>(&m));
    let (s, m) = both(dir.path(), "max(k)", &ins);
    assert_eq!(load::<i32>(&s), load::<i32>(&m));

    // A bool input and a summary on stdout.
    let b = save(
        dir.path(),
        "b",
        &ArrayD::from_shape_fn(IxDyn(&[3000]), |i| i[0] % 3 == 0),
    );
    let text = stdout_of(
        kiln()
            .args([
                "eval",
                "sum(b)",
                "--stream",
                "--chunk-elements",
                "7",
                "--in",
            ])
            .arg(input("b", &b)),
    );
    assert!(text.contains("1000"), "{text}");
}

#[test]
fn what_does_not_stream_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let x = save(dir.path(), "x", &grid(600, |i| i as f64));
    let v = save(dir.path(), "v", &ArrayD::from_elem(IxDyn(&[100]), 1.0f64));
    let out = dir.path().join("o.npy");
    let fail = |expr: &str, extra: &[&str], inputs: &[(&str, &Path)], wanted: &str| {
        let mut cmd = kiln();
        cmd.args(["eval", expr, "--stream"]).args(extra);
        for (n, p) in inputs {
            cmd.arg("--in").arg(input(n, p));
        }
        let o = cmd.assert().failure().get_output().clone();
        let e = String::from_utf8(o.stderr).unwrap();
        assert!(e.contains(wanted), "{expr}: {e}");
    };
    let o = out.to_str().unwrap();
    let xs = [("x", x.as_path())];
    fail("x.T + 1", &["--out", o], &xs, "reorders elements");
    fail("sum(x, axis=0)", &[], &xs, "over some axes only");
    fail(
        "sum(x) + x",
        &["--out", o],
        &xs,
        "not the expression's outermost",
    );
    fail("x[0]", &["--out", o], &xs, "is neither");
    fail("x + 1", &[], &xs, "give --out");
    fail(
        "x + v",
        &["--out", o],
        &[("x", &x), ("v", &v)],
        "the same shape",
    );
    fail(
        "x + 1",
        &["--grad", "x", "--out", o],
        &xs,
        "cannot be combined",
    );

    // Fortran order and a big-endian file.
    let hdr = |descr: &str, fortran: &str| {
        let h = kiln::cli::stream::header_bytes(kiln::DType::F64, &[2, 2]);
        let text = String::from_utf8(h[8..].to_vec())
            .unwrap()
            .replace("<f8", descr)
            .replace("False", fortran);
        let mut bytes = h[..8].to_vec();
        bytes.extend_from_slice(text.as_bytes());
        bytes.extend_from_slice(&[0u8; 32]);
        bytes
    };
    let f = dir.path().join("f.npy");
    std::fs::write(&f, hdr("<f8", "True ")).unwrap();
    fail("x + 1", &["--out", o], &[("x", &f)], "Fortran order");
    std::fs::write(&f, hdr(">f8", "False")).unwrap();
    fail("x + 1", &["--out", o], &[("x", &f)], "byte order");
    // A truncated file.
    std::fs::write(&f, &hdr("<f8", "False")[..70]).unwrap();
    fail("x + 1", &["--out", o], &[("x", &f)], "truncated");
}

/// Writes `n` float64 values `i * step` as a 1-d `.npy` without holding them.
fn write_big(path: &Path, n: usize, step: f64) {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    w.write_all(&kiln::cli::stream::header_bytes(kiln::DType::F64, &[n]))
        .unwrap();
    for i in 0..n {
        w.write_all(&(i as f64 * step).to_le_bytes()).unwrap();
    }
    w.flush().unwrap();
}

/// `kiln eval ...` under `prlimit --data` (RLIMIT_DATA counts the heap and
/// private anonymous maps, not the file-backed maps of --stream).
fn limited(limit: u64, args: &[&str]) -> std::process::Output {
    StdCommand::new("prlimit")
        .arg(format!("--data={limit}"))
        .arg(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .output()
        .expect("running prlimit (util-linux)")
}

#[test]
fn a_200_mib_input_streams_under_a_96_mib_data_limit() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.npy");
    let n = 25_000_000; // 200 MB of f64
    write_big(&big, n, 1e-7);
    let inp = format!("x={}", big.display());
    let out = dir.path().join("out.npy");
    let limit = 96 << 20;

    // The in-memory path cannot even read the input under this limit.
    let r = limited(
        limit,
        &[
            "eval",
            "x * 2",
            "--in",
            &inp,
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(
        !r.status.success(),
        "the in-memory path fit under the limit"
    );

    let r = limited(
        limit,
        &[
            "eval",
            "x * 2 + 1",
            "--stream",
            "--in",
            &inp,
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let bytes = std::fs::read(&out).unwrap();
    let offset = kiln::cli::stream::parse_header(&bytes).unwrap().data_offset;
    assert_eq!(bytes.len(), offset + n * 8);
    for i in [0, 1, 4_194_303, 4_194_304, 12_345_678, n - 1] {
        let at = offset + i * 8;
        let v = f64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        assert_eq!(v, (i as f64 * 1e-7) * 2.0 + 1.0, "element {i}");
    }
    drop(bytes);

    let r = limited(limit, &["eval", "sum(x)", "--stream", "--in", &inp]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let text = String::from_utf8(r.stdout).unwrap();
    // sum(i * 1e-7, i < n) = 1e-7 * n (n - 1) / 2 = 31249998.75
    assert!(text.contains("3.125e7"), "{text}");
}
