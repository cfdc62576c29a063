"""kiln.evaluate against numpy: frames, dicts, dtypes, layouts, out=, the cache."""

import numpy as np
import pytest

import kiln
from conftest import DTYPES, sample

GLOBAL_G = np.arange(5.0)


def close(a, b, dtype=None):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    if dtype is not None:
        assert a.dtype == np.dtype(dtype)
    if a.dtype.kind == "f":
        np.testing.assert_allclose(a, b, rtol=1e-5 if a.dtype == np.float32 else 1e-12, atol=1e-6)
    else:
        np.testing.assert_array_equal(a, b)


def test_stable_softplus_is_finite():
    x = np.linspace(-800, 800, 5)
    y = kiln.evaluate("log(1 + exp(x))")
    assert np.all(np.isfinite(y))
    close(y, np.logaddexp(0, x))


def test_inf_and_nan_are_constants_without_a_variable():
    x = np.array([-np.inf, -1.0, 2.0])
    close(kiln.evaluate("maximum(x, -inf)"), x)
    r = kiln.evaluate("where(x > 1, nan, x)")
    assert np.isnan(r[2]) and np.array_equal(r[:2], x[:2])
    # Never looked up: a variable named inf does not replace the constant.
    inf = np.array([5.0, 5.0, 5.0])  # noqa: F841
    close(kiln.evaluate("minimum(x, inf)"), x)


def test_caller_locals_then_globals():
    x = np.arange(5.0)
    close(kiln.evaluate("x * GLOBAL_G"), x * GLOBAL_G)


def test_locals_shadow_globals():
    GLOBAL_G = np.ones(5)  # noqa: N806 (shadows the module's)
    close(kiln.evaluate("GLOBAL_G + 1"), np.full(5, 2.0))


def test_explicit_dicts():
    a, b = np.arange(4.0), np.arange(4.0) * 2
    close(kiln.evaluate("a + b", local_dict={"a": a}, global_dict={"b": b}), a + b)
    close(kiln.evaluate("a * 2", local_dict={"a": b}), b * 2)


def test_any_mapping_as_dict():
    class Vars:  # a mapping that is not a dict (as 3.13's frame-locals proxy)
        def __init__(self, **kw):
            self.kw = kw

        def __getitem__(self, k):
            return self.kw[k]
    a = np.arange(3.0)
    close(kiln.evaluate("a * 2", local_dict=Vars(a=a), global_dict=Vars()), a * 2)


def test_inside_a_function_frame():
    def inner(u):
        return kiln.evaluate("u ** 2")
    close(inner(np.arange(3.0)), np.arange(3.0) ** 2)


def test_python_scalars_and_literals():
    x, k, c = np.arange(4.0), 3, 0.5
    close(kiln.evaluate("x * k + c"), x * 3 + 0.5)
    close(kiln.evaluate("2 * 3 + 1"), np.int64(7))


@pytest.mark.parametrize("dt", DTYPES)
def test_every_dtype_roundtrips(dt):
    x = sample(dt)
    y = kiln.evaluate("where(x > x, x, x)")  # an op that keeps the dtype
    close(y, x, dt)


@pytest.mark.parametrize("dt", [d for d in DTYPES if d != "bool"])
def test_every_dtype_arithmetic(dt):
    x = sample(dt, seed=1)
    y = sample(dt, seed=2)
    expect = np.maximum(x, y) * 2
    close(kiln.evaluate("maximum(x, y) * 2"), expect, expect.dtype)


def test_bool_logic():
    a, b = sample("bool", seed=3), sample("bool", seed=4)
    close(kiln.evaluate("(a & ~b) | (b & ~a)"), a ^ b, "bool")


def test_mixed_dtype_promotion_follows_numpy():
    i, f = np.arange(6, dtype=np.int32), np.linspace(0, 1, 6, dtype=np.float32)
    close(kiln.evaluate("i + f"), i + f, (i + f).dtype)
    u, s = np.arange(6, dtype=np.uint8), np.arange(6, dtype=np.int8)
    close(kiln.evaluate("u + s"), u + s, (u + s).dtype)


def test_unsigned_dtypes_follow_numpy():
    big = np.array([0, 1, 2**63, 2**64 - 1], dtype=np.uint64)
    close(kiln.evaluate("big // 2"), big // 2, "uint64")  # above 2**63: unsigned division
    assert kiln.evaluate("big > 1").tolist() == (big > 1).tolist()
    w, s = np.arange(6, dtype=np.uint32), np.arange(6, dtype=np.int16)
    close(kiln.evaluate("w + s"), w + s, (w + s).dtype)  # int64, as numpy
    h = np.array([0, 65535], dtype=np.uint16)
    close(kiln.evaluate("h + 1"), h + np.uint16(1), "uint16")  # wraps
    with pytest.raises(TypeError, match="out of range for a u16 tensor"):
        kiln.evaluate("h + -1")


def test_strided_negative_and_broadcast_inputs():
    base = np.arange(40.0).reshape(5, 8)
    strided = base[:, ::3]              # non-contiguous
    reversed_ = base[::-1, ::-2]        # negative strides
    fortran = np.asfortranarray(base)
    bcast = np.broadcast_to(np.arange(8.0), (5, 8))  # stride 0
    assert bcast.strides[0] == 0
    close(kiln.evaluate("strided * 2"), strided * 2)
    close(kiln.evaluate("reversed_ + 1"), reversed_ + 1)
    close(kiln.evaluate("fortran - base"), fortran - base)
    close(kiln.evaluate("bcast * base"), bcast * base)
    close(kiln.evaluate("sum(bcast)"), bcast.sum())


def test_size_one_dimensions_broadcast():
    col, row = np.arange(3.0)[:, None], np.arange(4.0)[None, :]
    close(kiln.evaluate("col * row"), col * row)
    s = np.float64(2.5)
    close(kiln.evaluate("row + s"), row + s)


def test_byte_swapped_and_misaligned_inputs_are_copied():
    x = np.arange(6.0).astype(">f8")
    close(kiln.evaluate("x + 1"), np.arange(6.0) + 1)
    raw = np.zeros(6 * 8 + 1, dtype=np.uint8)
    m = raw[1:].view(np.float64)
    m[:] = np.arange(6.0)
    assert not m.flags.aligned
    close(kiln.evaluate("m * 2"), np.arange(6.0) * 2)


def test_results_are_fresh_owned_arrays():
    x = np.arange(5.0)
    y = kiln.evaluate("x + 1")
    assert isinstance(y, np.ndarray) and y.flags.writeable and y.flags.c_contiguous
    assert not np.shares_memory(x, y)
    y[0] = 42.0
    assert x[0] == 0.0


def test_reductions_and_dot():
    X = np.arange(12.0).reshape(3, 4)
    v = np.arange(4.0)
    close(kiln.evaluate("sum(X, axis=1)"), X.sum(axis=1))
    close(kiln.evaluate("max(X, axis=0)"), X.max(axis=0))
    close(kiln.evaluate("sum(X)"), X.sum())
    close(kiln.evaluate("X @ v"), X @ v)
    close(kiln.evaluate("mean(X, axis=0)"), X.mean(axis=0))


def test_logsumexp_matches_the_shifted_numpy_form():
    def ref(a, axis=None, keepdims=False):
        m = np.max(a, axis=axis, keepdims=True)
        r = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
        return r if keepdims else np.squeeze(r, axis=axis)

    X = np.array([[1000.0, 999.0, 998.0], [-1000.0, -1001.0, -1000.5], [0.5, -0.25, 2.0]])
    close(kiln.evaluate("logsumexp(X, axis=1)"), ref(X, axis=1))
    close(kiln.evaluate("logsumexp(X, axis=0, keepdims=True)"), ref(X, axis=0, keepdims=True))
    close(kiln.evaluate("logsumexp(X)"), ref(X))
    # The hand-written form is stabilised into the same op.
    close(kiln.evaluate("log(sum(exp(X), axis=1))"), ref(X, axis=1))
    empty = np.zeros((2, 0))
    assert np.array_equal(kiln.evaluate("logsumexp(empty, axis=1)"), [-np.inf, -np.inf])


def test_modes_agree():
    x = np.linspace(-3, 3, 11)
    for mode in ["fast_run", "FAST_RUN", "fast_compile", "none", "fast_run-fusion"]:
        close(kiln.evaluate("exp(x) * 2 - x", mode=mode), np.exp(x) * 2 - x)


def test_out_written_in_place():
    x = np.arange(10.0)
    out = np.empty(10)
    r = kiln.evaluate("x * 3", out=out)
    assert r is out
    close(out, x * 3)


def test_out_strided_view():
    x = np.arange(5.0)
    buf = np.zeros(10)
    view = buf[::2]
    kiln.evaluate("x + 1", out=view)
    close(buf[::2], x + 1)
    assert np.all(buf[1::2] == 0)


def test_out_aliasing_an_input():
    x = np.arange(6.0)
    kiln.evaluate("x * 2 + 1", out=x)
    close(x, np.arange(6.0) * 2 + 1)
    y = np.arange(6.0)
    kiln.evaluate("sum(y) - y", out=y)
    close(y, 15.0 - np.arange(6.0))


def test_out_errors():
    x = np.arange(4.0)
    with pytest.raises(TypeError, match="out has dtype float32"):
        kiln.evaluate("x + 1", out=np.empty(4, np.float32))
    with pytest.raises(ValueError, match="shape"):
        kiln.evaluate("x + 1", out=np.empty(5))
    with pytest.raises(TypeError, match="out must be a numpy array, got list"):
        kiln.evaluate("x + 1", out=[0.0] * 4)
    ro = np.empty(4)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        kiln.evaluate("x + 1", out=ro)


def test_repeated_calls_hit_the_cache():
    x = np.arange(7.0)
    kiln.evaluate("x * 7 + 0.25")
    before = kiln._kiln.cache_info()
    for _ in range(50):
        kiln.evaluate("x * 7 + 0.25")
    assert kiln._kiln.cache_info() == before
    x = np.arange(9.0)  # another length: same compiled function
    kiln.evaluate("x * 7 + 0.25")
    assert kiln._kiln.cache_info() == before
    x = np.arange(9, dtype=np.float32)  # another dtype: one more compilation
    kiln.evaluate("x * 7 + 0.25")
    assert kiln._kiln.cache_info()["compiles"] == before["compiles"] + 1


def test_empty_arrays():
    x = np.zeros(0)
    close(kiln.evaluate("x + 1"), x + 1)
    assert kiln.evaluate("sum(x)") == 0.0


def test_zero_dimensional():
    a = np.array(3.0)
    r = kiln.evaluate("a * 2")
    assert r.shape == () and r == 6.0
