#!/usr/bin/env bash
# Side-by-side benchmark of kiln against numpy, numexpr, PyTensor (C and
# numba backends) and JAX on the workloads of workloads.md (and issue 14's softmax, cumsum, stencil, gather and batched_matmul), in one run
# on one machine, plus kiln's and PyTensor's rewrite time on the chain graph.
# Writes the raw data into benches/results/ and regenerates BENCHMARKS.md's
# results section and the plots from it.
#
#   bash benches/compare.sh                  # everything (about 20-30 minutes on 2 cores)
#   SKIP_INSTALL=1 bash benches/compare.sh   # reuse the venv
#   QUICK=1 OUT=/tmp/bench bash benches/compare.sh   # a 1-2 minute trial of the pipeline
#
# Environment:
#   OUT          results folder (default benches/results, the committed raw data)
#   DOC          the document whose results section is regenerated (default
#                BENCHMARKS.md; with another OUT, a copy OUT/BENCHMARKS.md)
#   RUNS         timed runs per measurement (default 7)
#   QUICK=1      inputs scaled down 100x, 3 runs, chain K = 100, 300: checks
#                the pipeline, its numbers are not for quoting
#   PY_SYSTEMS   subset of numpy,numexpr,pytensor_c,pytensor_numba,jax,pytensor_chain
#   VENV         the Python virtual environment (default target/bench-venv)
#   KILN         a kiln binary to measure instead of building target/release/kiln
#   PYVENV       the environment with the kiln Python package (default
#                target/python-venv, which the README's test command creates;
#                the package is rebuilt there from this tree before measuring)
#   KILN_ISA     avx2: on an AVX-512 machine, measure the AVX2 path (kiln,
#                numpy and JAX capped; recorded in meta.json's isa)
#
# Raw data written to OUT: meta.json (commit, date, CPU model, cores, vector
# ISA, load average at the start and at the end, package versions, runs,
# scale), kiln.jsonl (`kiln bench --suite --json`), kiln_chain.jsonl
# (`kiln bench --chain K --json`), python.jsonl (benches/compare.py),
# headtohead.jsonl (compare.py --head-to-head-out: kiln against jax.jit,
# interleaved; only when JAX is among PY_SYSTEMS and imports),
# inprocess.jsonl and inprocess_meta.json (python/benches/inprocess.py),
# corpus.jsonl and corpus_meta.json (python/benches/corpus.py),
# accuracy_kiln.jsonl, accuracy_jax.jsonl and accuracy_meta.json
# (python/benches/accuracy.py), and the plots drawn from them. The report tool (benches/report) renders every
# table of the results section from these files only; kiln's test
# tests/bench_tables.rs checks that BENCHMARKS.md matches benches/results.
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
VENV="${VENV:-$ROOT/target/bench-venv}"
OUT="${OUT:-$ROOT/benches/results}"
RUNS="${RUNS:-7}"
PY_SYSTEMS="${PY_SYSTEMS:-numpy,numexpr,pytensor_c,pytensor_numba,jax,pytensor_chain}"
if [ -n "${QUICK:-}" ]; then
    SCALE=100; RUNS=3; KILN_CHAIN="100 300"; PY_CHAIN="100,300"
else
    SCALE=1; KILN_CHAIN="100 300 1000 3000 10000"; PY_CHAIN="100,300,1000,3000"
fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
if [ -n "${QUICK:-}" ] && [ "$OUT" = "$ROOT/benches/results" ]; then
    echo "QUICK=1 must not replace the committed raw data: set OUT to another folder"; exit 2
fi
if [ -z "${DOC:-}" ]; then
    if [ "$OUT" = "$ROOT/benches/results" ]; then
        DOC="$ROOT/BENCHMARKS.md"
    else
        DOC="$OUT/BENCHMARKS.md"
        cp "$ROOT/BENCHMARKS.md" "$DOC"
    fi
fi
LOGS="$ROOT/target/bench-logs"
mkdir -p "$LOGS"

if [ -z "${SKIP_INSTALL:-}" ]; then
    python3 -m venv "$VENV" || { echo "cannot create a venv (python3 -m venv)"; exit 1; }
    "$VENV/bin/pip" install -q --upgrade pip >/dev/null 2>&1
    # One package at a time so that one failure does not prevent the others.
    for pkg in numpy numexpr pytensor numba "jax[cpu]"; do
        if "$VENV/bin/pip" install -q "$pkg" >"$LOGS/pip-$pkg.log" 2>&1; then
            echo "installed $pkg"
        else
            echo "FAILED to install $pkg (see $LOGS/pip-$pkg.log)"
        fi
    done
fi

if [ -z "${KILN:-}" ]; then
    cargo build --release --bin kiln || exit 1
    KILN="$ROOT/target/release/kiln"
fi
# The Python package measured in-process below is rebuilt from this tree
# first, as the README's test command builds it, so that its figures are of
# the commit recorded in meta.json and not of the last test run's.
PYVENV="${PYVENV:-$ROOT/target/python-venv}"
if [ -x "$PYVENV/bin/maturin" ]; then
    echo "== rebuilding the kiln Python package in $PYVENV =="
    VIRTUAL_ENV="$PYVENV" PATH="$PYVENV/bin:$PATH" "$PYVENV/bin/maturin" develop --release --quiet \
        --manifest-path "$ROOT/python/Cargo.toml" >"$LOGS/maturin.log" 2>&1 \
        || { echo "cannot rebuild the Python package (see $LOGS/maturin.log)"; exit 1; }
fi

# Where and when: recorded before measuring (the load average again at the end).
COMMIT="$(git rev-parse --short=12 HEAD)"
# The results folder (and OUT, which holds a copy of the document by now)
# is not code.
if [ -n "$(git status --porcelain --untracked-files=no -- src runtime benches ':!benches/results' ":!${OUT#"$ROOT"/}" Cargo.toml Cargo.lock)" ]; then
    COMMIT="$COMMIT (with uncommitted changes)"
fi
DATE="$(date -u '+%Y-%m-%d %H:%M UTC')"
CPU="$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: *//')"
# A virtual machine's model name can be as vague as "AMD EPYC": the family
# and model numbers tell the generation (AMD family 23 model 1 is Zen 1,
# family 25 model 17 is Zen 4).
FAMILY="$(grep -m1 '^cpu family' /proc/cpuinfo | sed 's/.*: *//')"
MODEL="$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | sed 's/.*: *//')"
if [ -n "$FAMILY" ] && [ -n "$MODEL" ]; then CPU="$CPU, family $FAMILY model $MODEL"; fi
CORES="$(nproc)"
if grep -qw avx512f /proc/cpuinfo; then ISA="AVX-512"
elif grep -qw avx2 /proc/cpuinfo; then ISA="AVX2"
else ISA="no AVX2"; fi
# KILN_ISA=avx2 on an AVX-512 machine measures the AVX2 path (issue 16):
# kiln reads it itself; numpy's dispatch and XLA's code generation are capped
# the same way. numexpr has no run-time dispatch; PyTensor's C backend
# compiles with -march=native and numba for the host: neither is capped.
if [ "${KILN_ISA:-}" = "avx2" ] && [ "$ISA" = "AVX-512" ]; then
    export NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR"
    export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_cpu_max_isa=AVX2"
    ISA="AVX2 forced on an AVX-512 CPU: KILN_ISA=avx2, numpy and JAX capped too, PyTensor and numba not"
fi
LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
PACKAGES="$("$VENV/bin/pip" freeze 2>/dev/null | grep -iE '^(numpy|numexpr|pytensor|numba|jax|jaxlib)==' | sort)"
echo "commit $COMMIT, $DATE, $CPU ($CORES cores, $ISA), load $LOAD_START"
echo "$PACKAGES"

echo "== kiln: suite =="
"$KILN" bench --suite --modes none,fast_compile,fast_run,fast_run-inplace,fast_run-fusion,fast_run-fusion-inplace \
    --runs "$RUNS" --scale-down "$SCALE" --json > "$OUT/kiln.jsonl" || exit 1
echo "== kiln: per-call time =="
"$KILN" bench --per-call --modes fast_run --json > "$OUT/kiln_percall.jsonl" || exit 1
echo "== kiln: chain rewrite time =="
: > "$OUT/kiln_chain.jsonl"
for K in $KILN_CHAIN; do
    "$KILN" bench --chain "$K" --modes fast_run --runs 3 --json >> "$OUT/kiln_chain.jsonl" || exit 1
done
echo "== Python systems =="
# OMP/MKL threads for numpy and JAX are left at their defaults (all cores); numexpr is set to 2 threads.
"$VENV/bin/python" "$ROOT/benches/compare.py" --runs "$RUNS" --scale-down "$SCALE" \
    --chain "$PY_CHAIN" --systems "$PY_SYSTEMS" --out "$OUT/python.jsonl" \
    --per-call-out "$OUT/python_percall.jsonl" || exit 1
echo "== kiln against jax.jit, interleaved (Python package) =="
# The same workloads, kiln (the Python package built above) and jax.jit in
# one process, in alternating blocks of calls (compare.py's
# run_head_to_head): both measured in the same minutes, where the tables
# above measure kiln and JAX minutes apart and the host's speed may drift
# in between.
: > "$OUT/headtohead.jsonl"
case ",$PY_SYSTEMS," in
*,jax,*)
    if PYTHONPATH="$ROOT/python" "$VENV/bin/python" -c "import kiln, jax" 2>/dev/null; then
        PYTHONPATH="$ROOT/python" "$VENV/bin/python" "$ROOT/benches/compare.py" --scale-down "$SCALE" \
            --head-to-head-out "$OUT/headtohead.jsonl" || exit 1
    else
        echo "kiln or jax does not import in $VENV: no head-to-head table"
    fi ;;
esac
[ -s "$OUT/headtohead.jsonl" ] || rm -f "$OUT/headtohead.jsonl"
echo "== kiln in-process (Python package) =="
# kiln.evaluate against numexpr and numpy in one process (python/benches/inprocess.py),
# in the virtual environment the README's test command builds with the package.
if "$PYVENV/bin/python" -c "import kiln, numexpr" 2>/dev/null; then
    "$PYVENV/bin/python" "$ROOT/python/benches/inprocess.py" --out "$OUT" ${QUICK:+--quick} || exit 1
    echo "== kiln in-process: the corpus of everyday expressions =="
    "$PYVENV/bin/python" "$ROOT/python/benches/corpus.py" --out "$OUT" ${QUICK:+--quick} || exit 1
    echo "== accuracy of float64 functions: kiln, then JAX =="
    "$PYVENV/bin/python" "$ROOT/python/benches/accuracy.py" --system kiln --out "$OUT" ${QUICK:+--points 10000} || exit 1
    "$VENV/bin/python" "$ROOT/python/benches/accuracy.py" --system jax --out "$OUT" ${QUICK:+--points 10000} || exit 1
else
    echo "skipped: $PYVENV has no kiln package (run the README's test command first)"
fi
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"

# meta.json, written with Python's json module (proper escaping).
COMMIT="$COMMIT" DATE="$DATE" CPU="$CPU" CORES="$CORES" ISA="$ISA" LOAD_START="$LOAD_START" \
LOAD_END="$LOAD_END" PACKAGES="$PACKAGES" RUNS="$RUNS" SCALE="$SCALE" \
"$VENV/bin/python" - "$OUT/meta.json" <<'EOF' || exit 1
import json, os, sys
e = os.environ
meta = {
    "commit": e["COMMIT"], "date": e["DATE"], "cpu": e["CPU"], "cores": int(e["CORES"]),
    "isa": e["ISA"], "load_start": e["LOAD_START"], "load_end": e["LOAD_END"],
    "python_packages": [p for p in e["PACKAGES"].split("\n") if p],
    "runs": int(e["RUNS"]), "scale_down": int(e["SCALE"]),
}
with open(sys.argv[1], "w") as f:
    json.dump(meta, f, indent=1)
    f.write("\n")
EOF

echo "== report =="
CARGO_TARGET_DIR="$ROOT/target/bench-report" cargo run --release --manifest-path "$ROOT/benches/report/Cargo.toml" -- \
    "$OUT" --write "$DOC" || exit 1
echo "raw data in $OUT; results section regenerated in $DOC"
