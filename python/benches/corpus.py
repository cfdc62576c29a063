"""Issue 16's corpus: everyday expressions outside the benchmark suite
(reductions over each axis and with keepdims, switch/where, comparisons and
boolean logic, integer and f32 arithmetic, broadcasting, transcendental
mixes), timed with kiln.evaluate, numexpr.evaluate and numpy in one process
on the same arrays, in interleaved rounds (as inprocess.py).

Inputs: 1-d arrays of 4,000,000 elements, 2000 x 2000 matrices (and the
transpose of one, a Fortran-ordered view), a vector of 2000 and 1,000,000
rows of 4 or 8 (standard normal floats, integers in 1..=9, f32 copies of
the floats, a bool mask of the positive floats), and two 2000 x 2000 uint8
images of uniform values. Each entry gives the kiln expression, the numpy code and the
numexpr expression (None where numexpr cannot express it: keepdims, a
reduction inside an expression, integer division, float remainders, bit
operations, mean). numexpr's reductions
(`sum`, `prod`, `min`, `max` with `axis=`) run on one thread, its element-wise
code on NUMEXPR_THREADS. Before timing, the three results are checked to
agree (dtype-aware tolerances), so the table compares equal work.

Writes corpus.jsonl (one object per system and expression: median and
quartiles in microseconds) and corpus_meta.json into the results folder;
benches/report renders BENCHMARKS.md's corpus table from them:

    target/python-venv/bin/python python/benches/corpus.py [--out DIR] [--quick]
"""

import argparse
import json
import os
import re
import statistics
import sys

# OpenBLAS's worker threads (numpy's dot) spin for about 2^28 cycles after
# each call before they sleep; on a 2-core host that spin took a core from
# whichever system ran next in the interleaved rounds (kiln's dot on 4e6
# measured 1.2-2.6 ms in the blocks right after np.dot and 0.70-0.96 ms with
# the shortest spin, BENCHMARKS.md, nineteenth session). The shortest spin (2^4 cycles)
# must be set before numpy loads OpenBLAS; np.dot itself was as fast.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numexpr as ne  # noqa: E402  (after the OpenBLAS setting)
import numpy as np  # noqa: E402

import kiln

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inprocess import ROOT, loadavg, measure, meta  # noqa: E402  (same timing and record)

N = 4_000_000
M = 2000

# (name, kiln expression, numpy code, numexpr expression or None)
CORPUS = [
    # Reductions over each axis, all axes, with keepdims.
    ("sum_axis0", "sum(X, axis=0)", "np.sum(X, axis=0)", "sum(X, axis=0)"),
    ("sum_axis1", "sum(X, axis=1)", "np.sum(X, axis=1)", "sum(X, axis=1)"),
    ("sum_all", "sum(X)", "np.sum(X)", "sum(X)"),
    ("sum_keepdims", "sum(X, axis=1, keepdims=True)", "np.sum(X, axis=1, keepdims=True)", None),
    ("max_axis0", "max(X, axis=0)", "np.max(X, axis=0)", "max(X, axis=0)"),
    ("max_axis1", "max(X, axis=1)", "np.max(X, axis=1)", "max(X, axis=1)"),
    ("min_all", "min(X)", "np.min(X)", "min(X)"),
    ("mean_axis0", "mean(X, axis=0)", "np.mean(X, axis=0)", None),
    ("var_axis0", "var(X, axis=0)", "np.var(X, axis=0)", None),
    ("std_all_ddof1", "std(x, ddof=1)", "np.std(x, ddof=1)", None),
    ("prod_axis1", "prod(1 + 0.001 * X, axis=1)", "np.prod(1 + 0.001 * X, axis=1)",
     "prod(1 + 0.001 * X, axis=1)"),
    ("sumsq_axis0", "sum(X * X, axis=0)", "np.sum(X * X, axis=0)", "sum(X * X, axis=0)"),
    ("dot_as_sum", "sum(x * y)", "np.dot(x, y)", "sum(x * y)"),
    ("softmax_all_f32", "exp(Xf) / sum(exp(Xf))", "np.exp(Xf) / np.sum(np.exp(Xf))", None),
    ("row_norms", "sqrt(sum(X**2, axis=1))", "np.sqrt(np.sum(X**2, axis=1))", None),
    ("center_columns", "X - mean(X, axis=0)", "X - np.mean(X, axis=0)", None),
    ("any_gt", "any(x > 3)", "np.any(x > 3)", None),
    ("all_finite", "all(isfinite(x))", "np.all(np.isfinite(x))", None),
    ("any_nan", "any(isnan(x))", "np.any(np.isnan(x))", None),
    ("count_nan", "sum(isnan(x))", "np.count_nonzero(np.isnan(x))", "sum(where(x != x, 1, 0))"),
    # switch / where.
    ("leaky_relu", "where(x > 0, x, 0.1 * x)", "np.where(x > 0, x, 0.1 * x)",
     "where(x > 0, x, 0.1 * x)"),
    ("abs_diff_where", "where(x > y, x - y, y - x) * z", "np.where(x > y, x - y, y - x) * z",
     "where(x > y, x - y, y - x) * z"),
    ("relu", "maximum(x, 0)", "np.maximum(x, 0)", "where(x > 0, x, 0)"),
    ("clip", "clip(x, -1, 1)", "np.clip(x, -1, 1)", "where(x < -1, -1, where(x > 1, 1, x))"),
    ("nan_to_zero", "where(isnan(x), 0, x)", "np.where(np.isnan(x), 0, x)", "where(x != x, 0, x)"),
    ("huber", "where(abs(x) < 1, 0.5 * x**2, abs(x) - 0.5)",
     "np.where(np.abs(x) < 1, 0.5 * x**2, np.abs(x) - 0.5)",
     "where(abs(x) < 1, 0.5 * x**2, abs(x) - 0.5)"),
    # Comparisons and boolean logic.
    ("in_range", "(x > -1) & (x < 1)", "(x > -1) & (x < 1)", "(x > -1) & (x < 1)"),
    ("sign_differs", "(x > 0) != (y > 0)", "(x > 0) != (y > 0)", "(x > 0) != (y > 0)"),
    ("count_positive", "sum(x > 0)", "np.sum(x > 0)", "sum(where(x > 0, 1, 0))"),
    ("masked_values", "(x > y) * z", "(x > y) * z", "where(x > y, z, 0)"),
    ("not_and", "~(x > 0) & (y < 0)", "~(x > 0) & (y < 0)", "~(x > 0) & (y < 0)"),
    ("or_isnan", "isnan(x) | (y > 2)", "np.isnan(x) | (y > 2)", "(x != x) | (y > 2)"),
    # Integer arithmetic (i, j: int64 in 1..=9; a, b: int32).
    ("int_arith", "i * j + 3 * i - j", "i * j + 3 * i - j", "i * j + 3 * i - j"),
    ("int_floordiv_mod", "i // 3 + i % 4", "i // 3 + i % 4", None),
    # Float remainders and floor division (numexpr's float `%` is neither
    # numpy's remainder nor C's fmod).
    ("float_mod", "x % y", "x % y", None),
    ("float_floordiv", "x // 2.5", "x // 2.5", None),
    ("fmod", "fmod(x, y)", "np.fmod(x, y)", None),
    ("int_compare_sum", "sum(i > j)", "np.sum(i > j)", "sum(where(i > j, 1, 0))"),
    ("int_bits", "(i & 7) | (j << 2)", "(i & 7) | (j << 2)", None),
    ("int_to_float", "i * 0.5 + j", "i * 0.5 + j", "i * 0.5 + j"),
    ("int32_arith", "a * b + 1", "a * b + 1", "a * b + 1"),
    ("int_sum_axis0", "sum(I, axis=0)", "np.sum(I, axis=0)", "sum(I, axis=0)"),
    # f32 (xf, yf: float32 vectors; Xf: float32 matrix).
    ("f32_poly", "2*xf**3 - 3*xf**2 + xf - 1", "2*xf**3 - 3*xf**2 + xf - 1", None),
    ("f32_exp_mul", "exp(xf) * yf", "np.exp(xf) * yf", "exp(xf) * yf"),
    ("f32_sum_axis0", "sum(Xf, axis=0)", "np.sum(Xf, axis=0)", "sum(Xf, axis=0)"),
    ("f32_tanh", "tanh(xf)", "np.tanh(xf)", "tanh(xf)"),
    ("f32_where", "where(xf > yf, xf, yf)", "np.where(xf > yf, xf, yf)", "where(xf > yf, xf, yf)"),
    ("f32_sin_cos", "sin(xf) * cos(yf)", "np.sin(xf) * np.cos(yf)", "sin(xf) * cos(yf)"),
    ("f32_log10", "log10(abs(xf) + 1)", "np.log10(np.abs(xf) + 1)", "log10(abs(xf) + 1)"),
    # Broadcasting (r: 1 x 2000 row, c: 2000 x 1 column).
    ("row_broadcast", "X * r", "X * r", "X * r"),
    ("column_broadcast", "X + c", "X + c", "X + c"),
    ("outer_product", "c * r", "c * r", "c * r"),
    ("standardize", "(X - r) / (1 + r * r)", "(X - r) / (1 + r * r)", "(X - r) / (1 + r * r)"),
    # Short rows (S: 1,000,000 x 4, s4: its row of 4, sc: a 1,000,000 x 1
    # column, W: 1,000,000 x 8 whose first 4 columns are a slice).
    ("short_rows_bias", "tanh(S + s4)", "np.tanh(S + s4)", "tanh(S + s4)"),
    ("short_rows_affine", "S * 2 + s4", "S * 2 + s4", "S * 2 + s4"),
    ("short_rows_column", "S * sc", "S * sc", "S * sc"),
    ("short_rows_slice", "tanh(W[:, :4] + 1)", "np.tanh(W[:, :4] + 1)", None),
    ("short_rows_sum", "sum(S, axis=1)", "np.sum(S, axis=1)", "sum(S, axis=1)"),
    ("short_rows_softmax", "softmax(S, axis=1)",
     "np.exp(S - S.max(axis=1, keepdims=True))"
     " / np.exp(S - S.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True)", None),
    ("short_rows_logsumexp", "logsumexp(S, axis=1)",
     "(lambda m: np.log(np.exp(S - m[:, None]).sum(axis=1)) + m)(S.max(axis=1))", None),
    ("short_rows_argmax", "argmax(S, axis=1)", "np.argmax(S, axis=1)", None),
    ("argmax_all", "argmax(x)", "np.argmax(x)", None),
    ("argmin_rows", "argmin(X, axis=1)", "np.argmin(X, axis=1)", None),
    # Other layouts and matrix-vector products (XT: X's transpose, a
    # Fortran-ordered view; v: a vector of 2000).
    ("sum_T_axis0", "sum(XT, axis=0)", "np.sum(XT, axis=0)", "sum(XT, axis=0)"),
    ("max_T_axis1", "max(XT, axis=1)", "np.max(XT, axis=1)", "max(XT, axis=1)"),
    ("sum_exp_T", "sum(exp(XT), axis=0)", "np.sum(np.exp(XT), axis=0)", "sum(exp(XT), axis=0)"),
    ("argmax_T_axis0", "argmax(XT, axis=0)", "np.argmax(XT, axis=0)", None),
    ("cumsum_T_axis1", "cumsum(XT, axis=1)", "np.cumsum(XT, axis=1)", None),
    ("copy_T", "XT + 0", "XT + 0", "XT + 0"),
    ("symmetrize", "X + XT", "X + XT", "X + XT"),
    ("matvec", "dot(X, v)", "X @ v", None),
    ("vecmat", "dot(v, X)", "v @ X", None),
    ("gram", "dot(transpose(X), X)", "X.T @ X", None),
    ("softmax_axis0", "softmax(X, axis=0)",
     "(lambda e: e / e.sum(axis=0))(np.exp(X - X.max(axis=0)))", None),
    ("logsumexp_axis0", "logsumexp(X, axis=0)",
     "(lambda m: np.log(np.exp(X - m).sum(axis=0)) + m)(X.max(axis=0))", None),
    # Transcendental mixes.
    ("exp_sin", "exp(-x**2) * sin(y)", "np.exp(-x**2) * np.sin(y)", "exp(-x**2) * sin(y)"),
    ("log_sqrt", "log(1 + sqrt(abs(x)))", "np.log(1 + np.sqrt(np.abs(x)))",
     "log(1 + sqrt(abs(x)))"),
    ("logistic", "1 / (1 + exp(-x))", "1 / (1 + np.exp(-x))", "1 / (1 + exp(-x))"),
    ("tanh_fma", "tanh(x) * y + z", "np.tanh(x) * y + z", "tanh(x) * y + z"),
    ("softplus_where", "where(x > 20, x, log1p(exp(x)))",
     "np.where(x > 20, x, np.log1p(np.exp(x)))", "where(x > 20, x, log1p(exp(x)))"),
    ("arctan2", "arctan2(x, y)", "np.arctan2(x, y)", "arctan2(x, y)"),
    ("pow_frac", "abs(x) ** 1.5", "np.abs(x) ** 1.5", "abs(x) ** 1.5"),
    ("pow_general", "abs(x) ** 1.7", "np.abs(x) ** 1.7", "abs(x) ** 1.7"),
    ("hypot", "hypot(x, y)", "np.hypot(x, y)", "hypot(x, y)"),
    ("pythagoras", "cos(x)**2 + sin(x)**2", "np.cos(x)**2 + np.sin(x)**2",
     "cos(x)**2 + sin(x)**2"),
    ("gauss_2d", "exp(-(x**2 + y**2) / 2)", "np.exp(-(x**2 + y**2) / 2)",
     "exp(-(x**2 + y**2) / 2)"),
    # 8-bit images (P, Q: uint8; numexpr has no uint8), integer remainders
    # and clipping, selection by a mask.
    ("u8_scale_offset", "P * 2 + 1", "P * 2 + 1", None),
    ("u8_absdiff", "maximum(P, Q) - minimum(P, Q)", "np.maximum(P, Q) - np.minimum(P, Q)", None),
    ("u8_threshold", "where(P > 128, P, 0)", "np.where(P > 128, P, 0)", None),
    ("u8_count_above", "sum(P > 128)", "np.sum(P > 128)", None),
    ("u8_max_axis0", "max(P, axis=0)", "np.max(P, axis=0)", None),
    ("u8_any_saturated", "any(P == 255)", "np.any(P == 255)", None),
    ("int_mod_arrays", "i % j", "i % j", None),
    ("i32_clip", "clip(a, 2, 8)", "np.clip(a, 2, 8)", None),
    ("mask_select", "boolean_mask(x, x > 0)", "x[x > 0]", None),
    # Mixed dtypes: inputs of another dtype than the values computed (uint8
    # images to float or int16, int32 and f32 beside f64, a bool mask mk),
    # and float results stored as a narrower dtype.
    ("u8_to_f32", 'cast(P, "f32") / 255', "P.astype(np.float32) / np.float32(255)", None),
    ("u8_to_f64", "P / 255", "P / 255", None),
    # uint8 arithmetic feeding f64 values: numpy's -P wraps in uint8 (as
    # kiln's does); numexpr widens P first, so it computes another value.
    ("u8_invert_f64", "(255 - P) / 255", "(255 - P) / 255", "(255 - P) / 255"),
    ("u8_neg_exp", "exp(-P / 255)", "np.exp(-P / 255)", None),
    ("u8_diff_i16", 'cast(P, "i16") - cast(Q, "i16")', "P.astype(np.int16) - Q.astype(np.int16)",
     None),
    ("i32_with_f64", "a * 0.5 + x", "a * 0.5 + x", "a * 0.5 + x"),
    ("f32_with_f64", "xf * y", "xf * y", "xf * y"),
    ("bool_mask_where", "where(mk, x, 0)", "np.where(mk, x, 0)", "where(mk, x, 0)"),
    ("f64_to_f32", 'cast(X * 2, "f32")', "(X * 2).astype(np.float32)", None),
    ("f64_to_u8", 'cast(clip(X * 64 + 128, 0, 255), "u8")',
     "np.clip(X * 64 + 128, 0, 255).astype(np.uint8)", None),
    # Values of a narrower dtype computed between f64 ones: an f32 product
    # (rounded in f32, as numpy does) added to an f64, an int32 product
    # made f64, an f64 truncated to int32 and added to one.
    ("f32_then_f64", "xf * yf + y", "xf * yf + y", None),
    ("i32_product_to_f64", 'cast(a * b, "f64")', "(a * b).astype(np.float64)", None),
    ("f64_to_i32_add", 'cast(x * 100, "i32") + a', "(x * 100).astype(np.int32) + a", None),
    # An f32 transcendental between f64 values (numpy: exp in f32, then promoted).
    ("f32_exp_times_f64", "exp(xf) * y", "np.exp(xf) * y", None),
]

# Timed calls per measurement (interleaved over the three systems).
CALLS = 9


def arrays(n, m, seed=2024):
    """The named inputs every expression draws from."""
    rng = np.random.default_rng(seed)
    x, y, z = (rng.standard_normal(n) for _ in range(3))
    X = rng.standard_normal((m, m))
    return {
        "x": x, "y": y, "z": z, "X": X,
        "i": rng.integers(1, 10, n), "j": rng.integers(1, 10, n),
        "a": rng.integers(1, 10, n).astype(np.int32), "b": rng.integers(1, 10, n).astype(np.int32),
        "I": rng.integers(1, 10, (m, m)),
        "xf": x.astype(np.float32), "yf": y.astype(np.float32), "Xf": X.astype(np.float32),
        "r": rng.standard_normal((1, m)), "c": rng.standard_normal((m, 1)),
        "S": rng.standard_normal((n // 4, 4)), "s4": rng.standard_normal(4),
        "sc": rng.standard_normal((n // 4, 1)), "W": rng.standard_normal((n // 4, 8)),
        "XT": X.T, "v": rng.standard_normal(m),
        "P": rng.integers(0, 256, (m, m), dtype=np.uint8),
        "Q": rng.integers(0, 256, (m, m), dtype=np.uint8),
        "mk": x > 0,
    }


def used(expr, env):
    """The inputs an expression names (numexpr and kiln take only those)."""
    names = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", expr))
    return {k: v for k, v in env.items() if k in names}


def systems(kiln_expr, np_code, ne_expr, env):
    code = compile(np_code, "<corpus>", "eval")
    np_env = dict(env, np=np)
    kiln_env = used(kiln_expr, env)
    fns = {
        "kiln": lambda: kiln.evaluate(kiln_expr, local_dict=kiln_env),
        "numpy": lambda: eval(code, np_env),
    }
    if ne_expr is not None:
        ne_env = used(ne_expr, env)
        fns["numexpr"] = lambda: ne.evaluate(ne_expr, local_dict=ne_env)
    return fns


def check(name, fns, reads_f32):
    """kiln agrees with numpy in value and dtype; numexpr in value. Values
    computed in f32 (an f32 result, or an f32 input: `exp(xf) * y` takes
    numpy's and kiln's f32 exp, each within an ULP or two) agree to 1e-4."""
    want = np.asarray(fns["numpy"]())
    for s, f in fns.items():
        got = np.asarray(f())
        if s == "kiln" and got.dtype != want.dtype:
            raise AssertionError(f"{name}: kiln gives {got.dtype}, numpy {want.dtype}")
        f32 = reads_f32 or want.dtype == np.float32 or got.dtype == np.float32
        tol = 1e-4 if f32 else 1e-9
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=tol, atol=tol, err_msg=f"{name}: {s}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "benches", "results"))
    ap.add_argument("--quick", action="store_true",
                    help="inputs divided by 1000 (checks the pipeline; not for quoting)")
    ap.add_argument("--only", help="comma-separated corpus names")
    a = ap.parse_args()
    n, m = (N // 1000, M // 30) if a.quick else (N, M)
    env = arrays(n, m)
    chosen = a.only.split(",") if a.only else None
    load_start = loadavg()
    rows = []
    for name, kx, npx, nex in CORPUS:
        if chosen and name not in chosen:
            continue
        fns = systems(kx, npx, nex, env)
        check(name, fns, any(v.dtype == np.float32 for v in used(kx, env).values()))
        for system, ts in measure(fns, CALLS).items():
            q1, _, q3 = statistics.quantiles(ts, n=4)
            row = {"system": system, "workload": name, "expr": kx, "calls": CALLS,
                   "median_us": statistics.median(ts), "q1_us": q1, "q3_us": q3}
            rows.append(row)
            print(json.dumps(row), flush=True)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "corpus.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    record = meta(load_start, loadavg(), a.quick)
    record["sizes"] = f"vectors of {n} elements, {m} x {m} matrices, {n // 4} rows of 4 or 8"
    with open(os.path.join(a.out, "corpus_meta.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    print(f"wrote {a.out}/corpus.jsonl and corpus_meta.json", file=sys.stderr)


if __name__ == "__main__":
    main()
