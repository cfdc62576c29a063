"""Issue 16 item 1's accuracy comparison: the error in ULPs of kiln's and
JAX's float64 transcendental functions on the same inputs, against a
long-double (x87, 64-bit significand) numpy reference.

For each function, POINTS inputs are drawn (a fixed seed, so both systems
see the same arrays) from the domain the suite's workloads use plus a wide
log-uniform range; each system evaluates the function on the whole array
in one call (kiln: `kiln.evaluate` in FAST_RUN, i.e. its JIT kernels and
runtime block functions; JAX: `jax.jit` with x64 enabled). The error of a
value y against the reference r is |y - r| / ulp(r rounded to float64);
NaN where the reference is finite, or a wrong infinity, counts as an
infinite error. kiln and JAX live in different virtual environments, so the
script runs once per system:

    target/python-venv/bin/python python/benches/accuracy.py --system kiln [--out DIR]
    target/bench-venv/bin/python python/benches/accuracy.py --system jax [--out DIR]

Each run writes accuracy_<system>.jsonl (one object per function: max and
mean ULP, the worst input, the point count, the package versions); the kiln
run also writes accuracy_meta.json (commit, date, machine). benches/report
renders BENCHMARKS.md's accuracy table from them.
"""

import argparse
import json
import os
import platform
import sys
import time
from importlib import metadata

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Points per function.
POINTS = 1_000_000

L = np.longdouble

# name: (kiln expression over x, reference in long double, domain pieces).
# A piece is ("uniform", lo, hi) or ("logabs", lo, hi, sign) (|x| log-uniform).
FUNCTIONS = {
    "exp": ("exp(x)", lambda x: np.exp(x), [("uniform", -20, 20), ("uniform", -700, 700)]),
    "log1p": ("log1p(x)", lambda x: np.log1p(x),
              [("uniform", -0.99, 1), ("logabs", 1e-12, 1e6, 1), ("uniform", 0, 1)]),
    "tanh": ("tanh(x)", lambda x: np.tanh(x),
             [("uniform", -4, 4), ("logabs", 1e-8, 20, 1), ("logabs", 1e-8, 20, -1)]),
    "softplus": ("softplus(x)", lambda x: np.log1p(np.exp(x)),
                 [("uniform", -40, 40), ("uniform", -5, 5)]),
    "sigmoid": ("sigmoid(x)", lambda x: L(1) / (L(1) + np.exp(-x)),
                [("uniform", -40, 40), ("uniform", -5, 5)]),
}


def inputs(name, points, seed=16):
    """The function's inputs: equal shares of each domain piece (the last
    piece takes the remainder)."""
    rng = np.random.default_rng([seed, sum(map(ord, name))])
    pieces = FUNCTIONS[name][2]
    parts = []
    for k, p in enumerate(pieces):
        n = points // len(pieces)
        if k == len(pieces) - 1:
            n = points - n * (len(pieces) - 1)
        if p[0] == "uniform":
            parts.append(rng.uniform(p[1], p[2], n))
        else:
            lo, hi, sign = np.log(p[1]), np.log(p[2]), p[3]
            parts.append(sign * np.exp(rng.uniform(lo, hi, n)))
    return np.concatenate(parts)


def ulp_errors(y, ref):
    """|y - ref| in ULPs of ref rounded to float64 (inf for a NaN or an
    infinity the reference does not have)."""
    r64 = ref.astype(np.float64)
    finite = np.isfinite(r64)
    err = np.full(y.shape, np.inf)
    ok = finite & np.isfinite(y)
    ulp = np.spacing(np.abs(r64[ok]))
    err[ok] = np.abs(y[ok].astype(L) - ref[ok]).astype(np.float64) / ulp
    same_special = ~finite & ((y == r64) | (np.isnan(y) & np.isnan(r64)))
    err[same_special] = 0.0
    return err


def evaluator(system):
    """(function of (name, x) giving float64 values, package versions)."""
    if system == "kiln":
        import kiln

        def run(name, x):
            return np.asarray(kiln.evaluate(FUNCTIONS[name][0], local_dict={"x": x}))
        return run, [f"kiln (this commit)", f"numpy=={metadata.version('numpy')}"]
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    fns = {"exp": jnp.exp, "log1p": jnp.log1p, "tanh": jnp.tanh,
           "softplus": jax.nn.softplus, "sigmoid": jax.nn.sigmoid}
    jitted = {k: jax.jit(f) for k, f in fns.items()}

    def run(name, x):
        return np.asarray(jitted[name](jax.device_put(x)).block_until_ready())
    return run, [f"jax=={metadata.version('jax')}", f"jaxlib=={metadata.version('jaxlib')}",
                 f"numpy=={metadata.version('numpy')}"]


def meta():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from inprocess import cpu_info, git  # noqa: E402  (same commit and CPU recording)
    cpu, isa = cpu_info()
    commit = git("rev-parse", "--short=12", "HEAD")
    if git("status", "--porcelain", "--untracked-files=no", "--", "src", "runtime", "python"):
        commit += " (with uncommitted changes)"
    return {"commit": commit, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "cpu": cpu, "cores": os.cpu_count(), "isa": isa,
            "python": platform.python_version(), "points": POINTS,
            "reference": f"numpy longdouble ({np.finfo(L).nmant + 1}-bit significand)"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--system", choices=["kiln", "jax"], required=True)
    ap.add_argument("--out", default=os.path.join(ROOT, "benches", "results"))
    ap.add_argument("--points", type=int, default=POINTS)
    a = ap.parse_args()
    if np.finfo(L).nmant < 60:
        sys.exit("numpy's longdouble is not extended precision here: no reference")
    run, packages = evaluator(a.system)
    rows = []
    for name, (_, ref_fn, _) in FUNCTIONS.items():
        x = inputs(name, a.points)
        y = run(name, x)
        if y.dtype != np.float64 or y.shape != x.shape:
            sys.exit(f"{a.system} {name}: got {y.dtype} {y.shape}")
        err = ulp_errors(y, ref_fn(x.astype(L)))
        worst = int(np.argmax(err))
        row = {"system": a.system, "function": name, "points": int(x.size),
               "max_ulp": float(err[worst]), "mean_ulp": float(np.mean(err)),
               "worst_x": float(x[worst]), "packages": packages}
        rows.append(row)
        print(json.dumps(row), flush=True)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, f"accuracy_{a.system}.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    if a.system == "kiln":
        with open(os.path.join(a.out, "accuracy_meta.json"), "w") as f:
            json.dump(meta(), f, indent=1)
            f.write("\n")
    print(f"wrote {a.out}/accuracy_{a.system}.jsonl", file=sys.stderr)


if __name__ == "__main__":
    main()
