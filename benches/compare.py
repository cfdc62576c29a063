"""The Python side of benches/compare.sh: the workloads of
workloads.md plus issue 14's softmax, cumsum, stencil, gather and
batched_matmul, and
issue 15's gradient workloads (same expressions, same sizes), timed with
numpy, numexpr (2 threads), PyTensor (C and numba backends) and JAX (jit,
CPU), plus PyTensor's FAST_RUN rewrite time on the chain graph.

Gradient workloads: PyTensor differentiates with `pytensor.grad` and
records its compiled graph's node count ("nodes_after"); JAX with
`jax.jit(jax.grad(...))`; numpy runs the closed-form gradient written by
hand (no automatic differentiation: a lower bound on the work, not a
system users would differentiate with); numexpr cannot express them.

Run time: median of RUNS calls after a first call; compile: the first call
(for PyTensor: pytensor.function(...) plus the first call), cold (PyTensor
compiles into a fresh compiledir). One JSON object per line:
{"system", "workload", "run_ms", "compile_ms", "error"}; the chain records
carry "rewrite_ms", "nodes_before" and "nodes_after" instead.

--scale-down D divides every input dimension by D (as `kiln bench
--scale-down`), for quick runs of the pipeline; --systems picks a subset of
numpy, numexpr, pytensor_c, pytensor_numba, jax, pytensor_chain.
--per-call-out FILE also writes the per-call time of poly on 10, 1,000 and
100,000 elements (numpy, numexpr and JAX among the chosen systems; one
line per system and size with "run_us"), beside `kiln bench --per-call`.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import traceback

# A fresh PyTensor compile directory: compile times are cold, as the kiln ones.
os.environ.setdefault("PYTENSOR_FLAGS", "compiledir=" + tempfile.mkdtemp(prefix="pytensor-"))

import numpy as np

N = 10_000_000
WORKLOADS = [
    ("softplus", "log(1 + exp(x))", [("x", (N,), "normal")]),
    ("poly", "2*x**3 - 3*x**2 + x - 1", [("x", (N,), "normal")]),
    ("gauss", "exp(-((x - 0.5)**2) / (2 * 1.5**2)) / (1.5 * 2.5066282746310002)", [("x", (N,), "normal")]),
    ("sigmoid_xent", "mean(-(t*log(sigmoid(z)) + (1-t)*log(1 - sigmoid(z))))",
     [("t", (N,), "binary"), ("z", (N,), "normal")]),
    ("logsumexp", "log(sum(exp(X), axis=1))", [("X", (1000, 2000), "normal")]),
    ("softmax", "softmax(X, axis=-1)", [("X", (1000, 2000), "normal")]),
    ("cumsum", "cumsum(x)", [("x", (N,), "normal")]),
    ("outer_tanh", "tanh(u[:, None] + v[None, :])", [("u", (2000,), "normal"), ("v", (2000,), "normal")]),
    ("mlp", "tanh(A @ W + b)", [("A", (512, 512), "normal"), ("W", (512, 512), "normal"), ("b", (512,), "normal")]),
    ("canon", "(a*b)/(b*c)*(c/a)*x",
     [("a", (N,), "unit"), ("b", (N,), "unit"), ("c", (N,), "unit"), ("x", (N,), "normal")]),
    # The finite-difference stencil over three views of x (basic indexing).
    ("stencil", "x[2:] - 2*x[1:-1] + x[:-2]", [("x", (N,), "normal")]),
    # issue 14: X[idx], one million random int64 rows of width 16.
    ("gather", "take(X, idx, axis=0)", [("X", (1_000_000, 16), "normal"), ("idx", (1_000_000,), ("index", 1_000_000))]),
    # issue 14: A @ B of 64 stacked 128x128 matrices (numpy's matmul, jnp.matmul under jit, pt.matmul).
    ("batched_matmul", "A @ B", [("A", (64, 128, 128), "normal"), ("B", (64, 128, 128), "normal")]),
]
# Issue 15's gradient workloads (src/workloads.rs, gradient_suite): the
# gradient of a scalar cost with respect to one input.
GRAD_WORKLOADS = [
    ("grad_sigmoid_xent", "mean(-(t*log(sigmoid(z)) + (1-t)*log(1 - sigmoid(z))))",
     [("t", (N,), "binary"), ("z", (N,), "normal")], "z"),
    ("grad_mlp", "sum(tanh(A @ W + b)**2)",
     [("A", (512, 512), "normal"), ("W", (512, 512), "normal"), ("b", (512,), "normal")], "W"),
    ("grad_logsumexp", "sum(log(sum(exp(X), axis=1)))", [("X", (1000, 2000), "normal")], "X"),
]


def np_sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def np_grad_mlp(A, W, b):
    h = np.tanh(A @ W + b)
    return A.T @ (2.0 * h * (1.0 - h * h))


# The closed-form gradients numpy runs (see the module docs).
NUMPY_GRADS = {
    "grad_sigmoid_xent": lambda t, z: (np_sigmoid(z) - t) / z.size,
    "grad_mlp": np_grad_mlp,
    "grad_logsumexp": lambda X: np_softmax(X, axis=1),
}
# numexpr cannot index or call sigmoid / reductions in the middle: its forms, where it has one.
NUMEXPR = {
    "softplus": "log(1 + exp(x))",
    "poly": "2*x**3 - 3*x**2 + x - 1",
    "gauss": "exp(-((x - 0.5)**2) / (2 * 1.5**2)) / (1.5 * 2.5066282746310002)",
    "outer_tanh": "tanh(u2 + v2)",
    "canon": "(a*b)/(b*c)*(c/a)*x",
}


def data(scale_down, seed=2024):
    rng = np.random.default_rng(seed)
    out = {}
    for name, _, inputs, *_ in WORKLOADS + GRAD_WORKLOADS:
        vals = {}
        for v, shape, dist in inputs:
            shape = tuple(max(1, d // scale_down) for d in shape)
            if dist == "normal":
                vals[v] = rng.standard_normal(shape)
            elif dist == "unit":
                vals[v] = rng.uniform(0.5, 1.5, shape)
            elif isinstance(dist, tuple) and dist[0] == "index":
                vals[v] = rng.integers(0, max(1, dist[1] // scale_down), shape, dtype=np.int64)
            else:
                vals[v] = rng.integers(0, 2, shape).astype(np.float64)
        out[name] = vals
    return out


def timed(f, runs):
    t = time.perf_counter()
    f()
    first = (time.perf_counter() - t) * 1e3
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts), first


def emit(out, system, workload, run_ms=None, compile_ms=None, error=None, **extra):
    rec = {"system": system, "workload": workload, "run_ms": run_ms, "compile_ms": compile_ms, "error": error}
    rec.update(extra)
    line = json.dumps(rec)
    print(line, flush=True)
    out.write(line + "\n")
    out.flush()


def np_softmax(X, axis=-1):
    """numpy has no softmax: the max-shifted form scipy.special.softmax uses."""
    e = np.exp(X - X.max(axis=axis, keepdims=True))
    e /= e.sum(axis=axis, keepdims=True)
    return e


def run_numpy(out, inputs, runs):
    ns = dict(log=np.log, exp=np.exp, tanh=np.tanh, mean=np.mean, sum=np.sum, take=np.take,
              sigmoid=lambda z: 1.0 / (1.0 + np.exp(-z)), softmax=np_softmax,
              cumsum=np.cumsum)
    for name, expr, _ in WORKLOADS:
        env = dict(ns, **inputs[name])
        code = compile(expr, name, "eval")
        r, _ = timed(lambda: eval(code, env), runs)
        emit(out, "numpy", name, r, None)
    for name, _, decl, _ in GRAD_WORKLOADS:
        args = [inputs[name][v] for v, _, _ in decl]
        r, _ = timed(lambda: NUMPY_GRADS[name](*args), runs)
        emit(out, "numpy", name, r, None)


def run_numexpr(out, inputs, runs):
    import numexpr as ne
    ne.set_num_threads(2)
    for name, _, _ in WORKLOADS:
        if name not in NUMEXPR:
            emit(out, "numexpr", name, error="not expressible in numexpr")
            continue
        env = dict(inputs[name])
        if name == "outer_tanh":
            env = {"u2": env["u"][:, None], "v2": env["v"][None, :]}
        r, first = timed(lambda: ne.evaluate(NUMEXPR[name], local_dict=env), runs)
        emit(out, "numexpr", name, r, first)
    for name, _, _, _ in GRAD_WORKLOADS:
        emit(out, "numexpr", name, error="not expressible in numexpr")


def run_pytensor(out, inputs, runs, mode, system):
    import pytensor
    import pytensor.tensor as pt
    ns = dict(log=pt.log, exp=pt.exp, tanh=pt.tanh, mean=pt.mean, sum=pt.sum, sigmoid=pt.sigmoid,
              take=pt.take, softmax=pt.special.softmax, cumsum=pt.cumsum)
    for name, expr, decl, *wrt in WORKLOADS + [(n, e, d, w) for n, e, d, w in GRAD_WORKLOADS]:
        try:
            syms = {v: pt.tensor(v, dtype="int64" if isinstance(dist, tuple) else "float64",
                                 shape=(None,) * len(shape)) for v, shape, dist in decl}
            y = eval(expr, dict(ns, **syms))
            if wrt:
                y = pytensor.grad(y, syms[wrt[0]])
            args = [inputs[name][v] for v, _, _ in decl]
            t = time.perf_counter()
            f = pytensor.function([syms[v] for v, _, _ in decl], y, mode=mode)
            f(*args)
            compile_ms = (time.perf_counter() - t) * 1e3
            r, _ = timed(lambda: f(*args), runs)
            extra = {"nodes_after": len(f.maker.fgraph.apply_nodes)} if wrt else {}
            emit(out, system, name, r, compile_ms, **extra)
        except Exception as e:  # report and go on
            emit(out, system, name, error=f"{type(e).__name__}: {e}"[:300])


def jax_call(name, expr, decl, wrt, inputs):
    """The workload under `jax.jit` (`jax.grad` of it with respect to
    `wrt[0]` when given), in float64, on its inputs put on the device: a
    call without arguments that waits for the result."""
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    ns = dict(log=jnp.log, exp=jnp.exp, tanh=jnp.tanh, mean=jnp.mean, sum=jnp.sum, sigmoid=jax.nn.sigmoid,
              take=jnp.take, softmax=jax.nn.softmax, cumsum=jnp.cumsum)
    names = [v for v, _, _ in decl]
    code = compile(expr, name, "eval")
    g = lambda *a: eval(code, dict(ns, **dict(zip(names, a))))
    f = jax.jit(jax.grad(g, argnums=names.index(wrt[0])) if wrt else g)
    args = [jax.device_put(inputs[name][v]) for v in names]
    return lambda: f(*args).block_until_ready()


def run_jax(out, inputs, runs):
    for name, expr, decl, *wrt in WORKLOADS + [(n, e, d, w) for n, e, d, w in GRAD_WORKLOADS]:
        r, first = timed(jax_call(name, expr, decl, wrt, inputs), runs)
        emit(out, "jax", name, r, first)


# Head-to-head rounds, and timed calls per system and round (see run_head_to_head).
HEAD_TO_HEAD_ROUNDS = 7
HEAD_TO_HEAD_BLOCK = 3


def run_head_to_head(path, inputs, only=None):
    """kiln FAST_RUN (its Python package, `kiln.function`) against
    `jax.jit` on every workload, in one process, in alternating blocks:
    each of HEAD_TO_HEAD_ROUNDS rounds times HEAD_TO_HEAD_BLOCK calls of
    kiln then of JAX (JAX first every other round), each block after an
    untimed call (so both run with warm caches, as back to back), all after
    a warm-up call of each (compile; kiln's final code tier awaited). The
    medians come from the same minute, so a drift of the host's speed
    between two parts of compare.sh cannot decide which system is ahead.
    The two results must agree (the same work): within 1e-9 relative, or
    1e-9 of the largest magnitude (a cumulative sum's values near 0).
    One JSON line per workload into `path`: "kiln_ms", "jax_ms", "rounds"
    and "block" (timed calls per block), or "error". `only`: the names of
    the workloads to measure (default: all)."""
    import kiln
    kns = dict(log=kiln.log, exp=kiln.exp, tanh=kiln.tanh, mean=kiln.mean, sum=kiln.sum, sigmoid=kiln.sigmoid,
               take=kiln.take, softmax=kiln.softmax, cumsum=kiln.cumsum)
    with open(path, "w") as out:
        for name, expr, decl, *wrt in WORKLOADS + [(n, e, d, w) for n, e, d, w in GRAD_WORKLOADS]:
            if only is not None and name not in only:
                continue

            def line(**rec):
                rec = dict(workload=name, **rec)
                print(json.dumps(rec), flush=True)
                out.write(json.dumps(rec) + "\n")
                out.flush()
            try:
                names = [v for v, _, _ in decl]
                syms = {v: kiln.tensor(v, dtype="int64" if isinstance(dist, tuple) else "float64",
                                       shape=(None,) * len(shape)) for v, shape, dist in decl}
                y = eval(compile(expr, name, "eval"), dict(kns, **syms))
                if wrt:
                    y = kiln.grad(y, syms[wrt[0]])
                kf = kiln.function([syms[v] for v in names], y)
                kargs = [inputs[name][v] for v in names]
                calls = {"kiln": lambda: kf(*kargs), "jax": jax_call(name, expr, decl, wrt, inputs)}
                ref = np.asarray(calls["jax"]())
                np.testing.assert_allclose(np.asarray(calls["kiln"]()), ref, rtol=1e-9,
                                           atol=1e-9 * float(np.abs(ref).max(initial=0.0)))
                kf.wait_final()
                times = {"kiln": [], "jax": []}
                for r in range(HEAD_TO_HEAD_ROUNDS):
                    for system in (("kiln", "jax") if r % 2 == 0 else ("jax", "kiln")):
                        calls[system]()  # untimed: the inputs back in cache
                        for _ in range(HEAD_TO_HEAD_BLOCK):
                            t = time.perf_counter()
                            calls[system]()
                            times[system].append((time.perf_counter() - t) * 1e3)
                line(kiln_ms=statistics.median(times["kiln"]), jax_ms=statistics.median(times["jax"]),
                     rounds=HEAD_TO_HEAD_ROUNDS, block=HEAD_TO_HEAD_BLOCK)
            except Exception as e:  # report and go on
                line(error=f"{type(e).__name__}: {e}"[:300])


# Per-call time (issue 16): poly at sizes where the call overhead dominates,
# the same sizes as `kiln bench --per-call` (PER_CALL_SIZES in src/cli/bench.rs).
PER_CALL_SIZES = [10, 1_000, 100_000]


def per_call_us(f, target_s=0.02, repeat=7):
    """Median over `repeat` rounds of the mean µs of one call of `f`, each
    round as many back-to-back calls as take about `target_s` seconds."""
    f()
    n, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        t = time.perf_counter() - t0
        if t >= target_s / 4 or n >= 1 << 20:
            break
        n *= 4
    n = max(1, int(n * target_s / max(t, 1e-9)))
    rounds = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        rounds.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(rounds)


def run_per_call(path, systems):
    """poly at each of PER_CALL_SIZES with numpy, numexpr (2 threads) and
    jax.jit: one JSON line per (system, size) with `run_us` into `path`."""
    expr = "2*x**3 - 3*x**2 + x - 1"
    rng = np.random.default_rng(2024)
    with open(path, "w") as out:
        for n in PER_CALL_SIZES:
            x = rng.standard_normal(n)
            w = f"poly@{n}"
            calls = []
            if "numpy" in systems:
                calls.append(("numpy", lambda x=x: 2 * x**3 - 3 * x**2 + x - 1))
            if "numexpr" in systems:
                try:
                    import numexpr as ne
                    ne.set_num_threads(2)
                    calls.append(("numexpr", lambda x=x: ne.evaluate(expr, local_dict={"x": x})))
                except Exception as e:
                    emit(out, "numexpr", w, error=f"{type(e).__name__}: {e}"[:300])
            if "jax" in systems:
                try:
                    import jax
                    jax.config.update("jax_enable_x64", True)
                    f = jax.jit(lambda x: 2 * x**3 - 3 * x**2 + x - 1)
                    xj = jax.device_put(x)
                    calls.append(("jax", lambda f=f, xj=xj: f(xj).block_until_ready()))
                except Exception as e:
                    emit(out, "jax", w, error=f"{type(e).__name__}: {e}"[:300])
            for system, f in calls:
                emit(out, system, w, run_us=round(per_call_us(f), 3))


def chain(pt, k):
    xs = [pt.vector(f"x{i}", dtype="float64") for i in range(8)]
    pool = list(xs)
    for i in range(k):
        n = len(pool)
        a = pool[n - 1 - (i * 7) % min(20, n)]
        b = pool[(i * 13) % n]
        m = i % 6
        if m == 0:
            r = a + b
        elif m == 1:
            r = a * b
        elif m == 2:
            r = a - 2.0 * b
        elif m == 3:
            r = pt.exp(-a) / (1.0 + b * b)
        elif m == 4:
            r = pt.log1p(a * a) * 0.5
        else:
            r = pt.tanh(a) + b / 3.0
        pool.append(r)
    return xs, pool[-1]


def run_pytensor_chain(out, ks):
    import pytensor.tensor as pt
    from pytensor.compile.mode import get_mode
    from pytensor.graph.fg import FunctionGraph
    sys.setrecursionlimit(100000)
    for k in ks:
        try:
            xs, y = chain(pt, k)
            fg = FunctionGraph(xs, [y], clone=True)
            n_before = len(fg.apply_nodes)
            rewriter = get_mode("FAST_RUN").optimizer
            t = time.perf_counter()
            rewriter.rewrite(fg)
            ms = (time.perf_counter() - t) * 1e3
            emit(out, "pytensor", f"chain_{k}", rewrite_ms=ms, nodes_before=n_before,
                 nodes_after=len(fg.apply_nodes))
        except Exception as e:
            emit(out, "pytensor", f"chain_{k}", error=f"{type(e).__name__}: {e}"[:300])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", help="the systems' results (python.jsonl); required unless --head-to-head-out")
    ap.add_argument("--chain", default="100,300,1000,3000")
    ap.add_argument("--scale-down", type=int, default=1)
    ap.add_argument("--systems", default="numpy,numexpr,pytensor_c,pytensor_numba,jax,pytensor_chain")
    ap.add_argument("--head-to-head-out",
                    help="only measure kiln (its Python package) against jax.jit, interleaved, into this file")
    ap.add_argument("--per-call-out", help="also measure the per-call time of poly (numpy, numexpr, jax) into this file")
    ap.add_argument("--only", help="with --head-to-head-out: only these workloads (comma-separated names)")
    a = ap.parse_args()
    if a.scale_down < 1:
        ap.error("--scale-down must be at least 1")
    chosen = a.systems.split(",")
    inputs = data(a.scale_down)
    if a.head_to_head_out:
        only = a.only.split(",") if a.only else None
        names = [w[0] for w in WORKLOADS + GRAD_WORKLOADS]
        if only and any(n not in names for n in only):
            ap.error(f"unknown workloads in --only {only}; known: {names}")
        run_head_to_head(a.head_to_head_out, inputs, only)
        return
    if a.only:
        ap.error("--only goes with --head-to-head-out")
    if not a.out:
        ap.error("--out is required")
    with open(a.out, "w") as out:
        steps = [
            ("numpy", lambda: run_numpy(out, inputs, a.runs)),
            ("numexpr", lambda: run_numexpr(out, inputs, a.runs)),
            ("pytensor_c", lambda: run_pytensor(out, inputs, a.runs, "FAST_RUN", "pytensor_c")),
            ("pytensor_numba", lambda: run_pytensor(out, inputs, a.runs, "NUMBA", "pytensor_numba")),
            ("jax", lambda: run_jax(out, inputs, a.runs)),
            ("pytensor_chain", lambda: run_pytensor_chain(out, [int(k) for k in a.chain.split(",")])),
        ]
        known = {system for system, _ in steps}
        unknown = [c for c in chosen if c not in known]
        if unknown:
            ap.error(f"unknown systems {unknown}; known: {sorted(known)}")
        for system, step in steps:
            if system not in chosen:
                continue
            print(f"-- {system}", file=sys.stderr, flush=True)
            try:
                step()
            except Exception as e:  # e.g. the package did not install
                traceback.print_exc(file=sys.stderr)
                emit(out, system, "*", error=f"{type(e).__name__}: {e}"[:300])
    if a.per_call_out:
        print("-- per call", file=sys.stderr, flush=True)
        run_per_call(a.per_call_out, chosen)


if __name__ == "__main__":
    main()
