//! `KILN_ISA`: capping the instruction set gives the same bits as the
//! CPU's widest variant (and no fault: unaligned vector comparisons), `kiln bench --json` reports the variant in use, and
//! an unrecognised value is a clear error.
mod cli_support;

use cli_support::*;
use kiln_runtime::math::{detected_isa, Isa};
use ndarray::{ArrayD, IxDyn};

/// 3000 f64 values: a sweep over [-40, 40] with the special values mixed
/// in, so the vector block paths, their tails and the exact fallbacks of
/// the math kernels all run.
fn inputs() -> ArrayD<f64> {
    let mut v: Vec<f64> = (0..3000).map(|i| (i as f64 - 1500.0) * 0.0267).collect();
    let specials = [
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-310,
        -1e300,
        709.9,
        -745.5,
    ];
    for (k, s) in specials.iter().enumerate() {
        v[k * 331 + 7] = *s;
    }
    ArrayD::from_shape_vec(IxDyn(&[3000]), v).unwrap()
}

/// `kiln eval expr` on `x` with `KILN_ISA` set to `isa` (unset for `None`).
fn eval_with(isa: Option<&str>, expr: &str, x: &ArrayD<f64>) -> ArrayD<f64> {
    let dir = tempfile::tempdir().unwrap();
    let xp = save(dir.path(), "x", x);
    let out = dir.path().join("out.npy");
    let mut cmd = kiln();
    match isa {
        Some(v) => cmd.env("KILN_ISA", v),
        None => cmd.env_remove("KILN_ISA"),
    };
    cmd.args(["eval", expr, "--mode", "fast_run", "--in"])
        .arg(input("x", &xp))
        .arg("--out")
        .arg(&out);
    stdout_of(&mut cmd);
    load::<f64>(&out)
}

#[test]
fn every_cap_gives_the_same_bits() {
    let x = inputs();
    for expr in [
        "exp(x) * 2 + 1",
        "tanh(x) + log1p(abs(x)) - softplus(-x)",
        "sigmoid(x) * log(abs(x) + 1e-3)",
        "x - logsumexp(x)",
        "cumsum(x) + max(x) + sum(x * x)",
        // Comparisons of a view one element in (unaligned vectors): SSE's
        // `cmppd` faults on an unaligned memory operand, which Cranelift
        // 0.135 merged loads into under `baseline`.
        "where(x[1:] > x[:-1], x[1:], -x[:-1]) + sum(x[1:] > 0)",
    ] {
        let want = eval_with(None, expr, &x);
        for cap in ["avx512", "avx2", "baseline"] {
            let got = eval_with(Some(cap), expr, &x);
            assert_eq!(got.shape(), want.shape(), "{expr} under KILN_ISA={cap}");
            for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
                assert!(
                    g.to_bits() == w.to_bits(),
                    "{expr} under KILN_ISA={cap}, element {i} (x = {}): {g:e} against {w:e}",
                    x[i]
                );
            }
        }
    }
}

#[test]
fn bench_reports_the_capped_variant() {
    for (cap, isa) in [
        ("avx2", Isa::Avx2),
        ("baseline", Isa::Baseline),
        ("AVX512", Isa::Avx512),
    ] {
        let text = stdout_of(kiln().env("KILN_ISA", cap).args([
            "bench",
            "exp(x) * 2",
            "--var",
            "x=f64[1000]",
            "--modes",
            "fast_run",
            "--runs",
            "1",
            "--json",
            "-q",
        ]));
        let row: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(
            row["isa"],
            detected_isa().min(isa).name(),
            "KILN_ISA={cap}: {text}"
        );
    }
}

#[test]
fn an_unknown_cap_is_an_error_naming_the_accepted_values() {
    let out = kiln()
        .env("KILN_ISA", "avx1024")
        .args(["rewrite", "exp(x)", "--var", "x=f64[:]"])
        .output()
        .unwrap();
    // Rewriting compiles nothing: the cap is not consulted.
    assert!(out.status.success());
    let out = kiln()
        .env("KILN_ISA", "avx1024")
        .args(["bench", "exp(x)", "--var", "x=f64[10]", "--runs", "1", "-q"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("KILN_ISA=\"avx1024\"") && err.contains("avx512, avx2, baseline"),
        "{err}"
    );
}
