#!/usr/bin/env bash
# Side-by-side benchmark of kiln against numpy, numexpr, PyTensor (C and
# numba backends) and JAX on the eight workloads of workloads.md, in one run
# on one machine, plus kiln's and PyTensor's rewrite time on the chain graph.
#
#   bash benches/compare.sh            # everything (about 15-25 minutes on 2 cores)
#   SKIP_INSTALL=1 bash benches/compare.sh   # reuse the venv
#
# The Python side runs from an isolated virtual environment under
# target/bench-venv; packages that fail to install are skipped and reported.
# Results (JSON lines) go to target/bench-results/; the report
# (benches/results/report.md) and the PNG plots (benches/results/*.png) are
# drawn by the small package benches/report (plotters).
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/target/bench-venv"
OUT="$ROOT/target/bench-results"
RUNS="${RUNS:-7}"
mkdir -p "$OUT" "$ROOT/benches/results"

if [ -z "${SKIP_INSTALL:-}" ]; then
    python3 -m venv "$VENV" || { echo "cannot create a venv (python3 -m venv)"; exit 1; }
    "$VENV/bin/pip" install -q --upgrade pip >/dev/null 2>&1
    # One package at a time so that one failure does not prevent the others.
    for pkg in numpy numexpr pytensor numba "jax[cpu]"; do
        if "$VENV/bin/pip" install -q "$pkg" >"$OUT/pip-$pkg.log" 2>&1; then
            echo "installed $pkg"
        else
            echo "FAILED to install $pkg (see $OUT/pip-$pkg.log)"
        fi
    done
fi
"$VENV/bin/pip" freeze 2>/dev/null | grep -iE '^(numpy|numexpr|pytensor|numba|jax|jaxlib)==' > "$OUT/versions.txt"
cat "$OUT/versions.txt"

cargo build --release --bin kiln || exit 1
KILN="$ROOT/target/release/kiln"

echo "== kiln: suite (none, fast_compile, fast_run) =="
"$KILN" bench --suite --modes none,fast_compile,fast_run,fast_run-fusion --runs "$RUNS" --json > "$OUT/kiln.jsonl" || exit 1
echo "== kiln: chain rewrite time =="
: > "$OUT/kiln_chain.jsonl"
for K in 100 300 1000 3000 10000; do
    "$KILN" bench --chain "$K" --modes fast_run --runs 3 --json >> "$OUT/kiln_chain.jsonl" || exit 1
done
echo "== Python systems =="
# OMP/MKL threads for numpy and JAX are left at their defaults (both cores); numexpr is set to 2 threads.
"$VENV/bin/python" "$ROOT/benches/compare.py" --runs "$RUNS" --out "$OUT/python.jsonl"

echo "== report =="
CARGO_TARGET_DIR="$ROOT/target/bench-report" cargo run --release --manifest-path "$ROOT/benches/report/Cargo.toml" -- "$OUT" "$ROOT/benches/results"
