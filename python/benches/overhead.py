"""Per-call overhead of kiln.evaluate against numexpr.evaluate, same
process, same arrays: the median of many calls on small arrays (1,000
elements by default), where the call's fixed cost dominates.

    python benches/overhead.py [n] [calls]
"""

import statistics
import sys
import time

import numexpr as ne
import numpy as np

import kiln

EXPRS = ["a + b", "2*a + 3*b", "exp(a) * b - 1", "where(a > b, a, b)", "sum(a * b)"]


def median_us(fn, calls):
    fn()  # warm-up: parse and compile (both libraries cache)
    times = []
    for _ in range(calls):
        t = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times) / 1e3


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    ne.set_num_threads(1)
    rng = np.random.default_rng(0)
    a, b = rng.random(n), rng.random(n)
    out = np.empty(n)
    d = {"a": a, "b": b}
    print(f"n = {n}, median of {calls} calls, microseconds per call")
    print(f"{'expression':24} {'numexpr':>9} {'kiln':>9} {'numexpr out=':>13} {'kiln out=':>10}")
    for ex in EXPRS:
        reduce = ex.startswith("sum")
        t_ne = median_us(lambda: ne.evaluate(ex, local_dict=d), calls)
        t_k = median_us(lambda: kiln.evaluate(ex, local_dict=d), calls)
        if reduce:
            row = f"{'-':>13} {'-':>10}"
        else:
            t_neo = median_us(lambda: ne.evaluate(ex, local_dict=d, out=out), calls)
            t_ko = median_us(lambda: kiln.evaluate(ex, local_dict=d, out=out), calls)
            row = f"{t_neo:13.2f} {t_ko:10.2f}"
        print(f"{ex:24} {t_ne:9.2f} {t_k:9.2f} {row}")
    # The variables looked up in the caller's frame (no dictionary given).
    t_ne, t_k = frame_lookup(ne.evaluate, a, b, calls), frame_lookup(kiln.evaluate, a, b, calls)
    print(f"{'a + b (caller frame)':24} {t_ne:9.2f} {t_k:9.2f}")


def frame_lookup(evaluate, a, b, calls):
    evaluate("a + b")
    times = []
    for _ in range(calls):
        t = time.perf_counter_ns()
        evaluate("a + b")
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times) / 1e3


if __name__ == "__main__":
    main()
