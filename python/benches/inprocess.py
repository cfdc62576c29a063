"""kiln.evaluate against numexpr.evaluate and numpy, in one process on the
same arrays: the element-wise workloads of the suite (src/workloads.rs:
softplus, poly, gauss, canon) at 1e3, 1e5 and 1e7 elements.

Each measurement is the median of many calls (CALLS below) after a warm-up
call that parses and compiles (all three are cached thereafter); the three
systems are timed in interleaved rounds, so a burst of load on the shared
machine hits them alike. numexpr and kiln use their default thread counts
(recorded in the meta data: on this 2-core machine both use 2 threads);
numpy is single-threaded for these expressions.

Writes the raw data into a results folder (default benches/results):
inprocess.jsonl, one object per (system, workload, n) with the median and
the quartiles in microseconds, and inprocess_meta.json (commit, date,
machine, load average, package versions). The report tool
(benches/report) renders BENCHMARKS.md's in-process table from them:

    target/python-venv/bin/python python/benches/inprocess.py [--out DIR] [--quick]
    cargo run --release --manifest-path benches/report/Cargo.toml -- benches/results --write BENCHMARKS.md
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from importlib import metadata

import numexpr as ne
import numpy as np

import kiln

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (name, expression, inputs and their distributions), as src/workloads.rs.
WORKLOADS = [
    ("softplus", "log(1 + exp(x))", {"x": "normal"}),
    ("poly", "2*x**3 - 3*x**2 + x - 1", {"x": "normal"}),
    ("gauss", "exp(-((x - 0.5)**2) / (2 * 1.5**2)) / (1.5 * 2.5066282746310002)",
     {"x": "normal"}),
    ("canon", "(a*b)/(b*c)*(c/a)*x",
     {"a": "unit", "b": "unit", "c": "unit", "x": "normal"}),
]
SIZES = [1_000, 100_000, 10_000_000]
# Timed calls per measurement, by size (the 1e3 medians are of microsecond calls).
CALLS = {1_000: 3001, 100_000: 301, 10_000_000: 15}


def inputs(spec, n, seed=2024):
    rng = np.random.default_rng(seed)
    return {v: rng.standard_normal(n) if d == "normal" else rng.uniform(0.5, 1.5, n)
            for v, d in spec.items()}


def systems(expr, env):
    """The three callables timed for one workload (numpy evaluates the
    expression text with numpy's functions, as benches/compare.py does)."""
    code = compile(expr, "<workload>", "eval")
    np_env = dict(env, log=np.log, exp=np.exp)
    return {
        "kiln": lambda: kiln.evaluate(expr, local_dict=env),
        "numexpr": lambda: ne.evaluate(expr, local_dict=env),
        "numpy": lambda: eval(code, np_env),
    }


def measure(fns, calls):
    """Interleaved rounds: per system, the per-call times in microseconds."""
    for f in fns.values():
        f()  # warm-up: parse and compile
    times = {s: [] for s in fns}
    for _ in range(calls):
        for s, f in fns.items():
            t = time.perf_counter_ns()
            f()
            times[s].append((time.perf_counter_ns() - t) / 1e3)
    return times


def check(fns):
    """The three systems agree (so the table compares equal work)."""
    vals = {s: f() for s, f in fns.items()}
    for s in ("kiln", "numexpr"):
        np.testing.assert_allclose(vals[s], vals["numpy"], rtol=1e-9, atol=1e-12)


def git(*args):
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_info():
    """The CPU as benches/compare.sh names it (model name, then the family and
    model numbers, which tell the generation when a VM's name is only "AMD
    EPYC") and its vector ISA, from /proc/cpuinfo."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() not in fields:
                    fields[key.strip()] = value.strip()
    except OSError:
        pass
    cpu = fields.get("model name", "unknown")
    if "cpu family" in fields and "model" in fields:
        cpu += f", family {fields['cpu family']} model {fields['model']}"
    flags = fields.get("flags", "").split()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return cpu, isa


def meta(load_start, load_end, quick):
    cpu, isa = cpu_info()
    commit = git("rev-parse", "--short=12", "HEAD")
    if git("status", "--porcelain", "--untracked-files=no", "--", "src", "runtime", "python"):
        commit += " (with uncommitted changes)"
    return {
        "commit": commit,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": cpu, "cores": os.cpu_count(), "isa": isa,
        "load_start": load_start, "load_end": load_end,
        "python": platform.python_version(),
        "python_packages": [f"{p}=={metadata.version(p)}" for p in ("numexpr", "numpy")],
        "numexpr_threads": ne.get_num_threads(),
        "scale_down": 1000 if quick else 1,
    }


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "not recorded"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "benches", "results"))
    ap.add_argument("--quick", action="store_true",
                    help="sizes and calls divided by 1000 (checks the pipeline; not for quoting)")
    a = ap.parse_args()
    sizes = [max(1, n // 1000) for n in SIZES] if a.quick else SIZES
    load_start = loadavg()
    rows = []
    for n, size in zip(SIZES, sizes):
        calls = max(3, CALLS[n] // 1000) if a.quick else CALLS[n]
        for name, expr, spec in WORKLOADS:
            fns = systems(expr, inputs(spec, size))
            check(fns)
            for system, ts in measure(fns, calls).items():
                q1, _, q3 = statistics.quantiles(ts, n=4)
                row = {"system": system, "workload": name, "n": size, "calls": calls,
                       "median_us": statistics.median(ts), "q1_us": q1, "q3_us": q3}
                rows.append(row)
                print(json.dumps(row), flush=True)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "inprocess.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    with open(os.path.join(a.out, "inprocess_meta.json"), "w") as f:
        json.dump(meta(load_start, loadavg(), a.quick), f, indent=1)
        f.write("\n")
    print(f"wrote {a.out}/inprocess.jsonl and inprocess_meta.json", file=sys.stderr)


if __name__ == "__main__":
    main()
