"""numpy / numexpr timings of the workload suite (shared/workloads.md).

Not used by tests. Run from the repository root:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 benches/python_baseline.py

Median of 7 calls after one warm-up call, in ms. numexpr uses 2 threads.
Data: standard normals (and uniforms / 0-1 targets) from numpy's default RNG;
the timing does not depend on the exact values.
"""
import sys
import time

import numpy as np

try:
    import numexpr as ne

    ne.set_num_threads(2)
except ImportError:  # numexpr optional
    ne = None

N = 10_000_000
rng = np.random.default_rng(0)
x = rng.standard_normal(N)
t = (rng.random(N) < 0.5).astype(np.float64)
z = rng.standard_normal(N)
X = rng.standard_normal((1000, 2000))
u = rng.standard_normal(2000)
v = rng.standard_normal(2000)
A = rng.standard_normal((512, 512))
W = rng.standard_normal((512, 512))
b = rng.standard_normal(512)
ca = rng.uniform(0.5, 1.5, N)
cb = rng.uniform(0.5, 1.5, N)
cc = rng.uniform(0.5, 1.5, N)


def sig(q):
    return 1.0 / (1.0 + np.exp(-q))


NUMPY = {
    "softplus": lambda: np.log(1 + np.exp(x)),
    "poly": lambda: 2 * x**3 - 3 * x**2 + x - 1,
    "gauss": lambda: np.exp(-((x - 0.5) ** 2) / (2 * 1.5**2)) / (1.5 * 2.5066282746310002),
    "sigmoid_xent": lambda: np.mean(-(t * np.log(sig(z)) + (1 - t) * np.log(1 - sig(z)))),
    "logsumexp": lambda: np.log(np.sum(np.exp(X), axis=1)),
    "outer_tanh": lambda: np.tanh(u[:, None] + v[None, :]),
    "mlp": lambda: np.tanh(A @ W + b),
    "canon": lambda: (ca * cb) / (cb * cc) * (cc / ca) * x,
}

NUMEXPR = {
    "softplus": lambda: ne.evaluate("log(1 + exp(x))"),
    "poly": lambda: ne.evaluate("2*x**3 - 3*x**2 + x - 1"),
    "gauss": lambda: ne.evaluate("exp(-((x - 0.5)**2) / (2 * 1.5**2)) / (1.5 * 2.5066282746310002)"),
    "sigmoid_xent": lambda: ne.evaluate(
        "sum(-(t*log(1/(1+exp(-z))) + (1-t)*log(1 - 1/(1+exp(-z)))))"
    ) / N,
    "logsumexp": None,
    "outer_tanh": lambda: ne.evaluate("tanh(uu + vv)", local_dict={"uu": u[:, None], "vv": v[None, :]}),
    "mlp": None,
    "canon": lambda: ne.evaluate("(ca*cb)/(cb*cc)*(cc/ca)*x"),
}


def median_ms(f, reps=7):
    f()
    ts = []
    for _ in range(reps):
        s = time.perf_counter()
        f()
        ts.append((time.perf_counter() - s) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def main():
    names = sys.argv[1:] or list(NUMPY)
    print("workload,numpy_ms,numexpr_ms")
    for n in names:
        a = median_ms(NUMPY[n])
        e = NUMEXPR[n]
        b_ = median_ms(e) if (ne is not None and e is not None) else float("nan")
        print(f"{n},{a:.2f},{b_:.2f}", flush=True)


if __name__ == "__main__":
    main()
