"""Pickling: compiled functions pickle as their graph and mode and
recompile on unpickling, once per process (a cache keyed by the payload);
variables pickle as their recipe."""

import multiprocessing
import pickle

import numpy as np
import pytest

import kiln

import kiln_workers


def rich_function():
    """A function whose graph uses every kind of recipe step."""
    x = kiln.vector("x")
    m = kiln.matrix("m", "float32")
    k = kiln.scalar("k", "int32")
    c = kiln.constant(np.array([1.0, -2.0, 3.0]))
    y = kiln.exp(x) * c + float("inf") * (x > 100) + True
    z = (m.T * 2.0).dimshuffle(1, "x", 0).reshape((-1,)).named("z")
    cost = kiln.sum(kiln.softplus(x * k), axis=0)
    g = kiln.grad(cost, x)
    r = kiln.rewrite(kiln.log(1 + kiln.exp(x)))
    f = kiln.function([x, m, k], [y, z, g, r, x[1:], kiln.where(x > 0, x, -x)])
    args = (np.array([0.5, -1.0, 200.0]), np.arange(6, dtype=np.float32).reshape(2, 3),
            np.int32(3))
    return f, args


def assert_same(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        assert u.dtype == v.dtype and u.shape == v.shape
        np.testing.assert_array_equal(u, v)


def test_function_round_trips_in_process_with_identical_results():
    f, args = rich_function()
    g = pickle.loads(pickle.dumps(f))
    assert isinstance(g, type(f))
    assert_same(f(*args), g(*args))
    assert g.pprint() == f.pprint()


def test_single_output_and_mutable_inputs_survive():
    x = kiln.vector("x")
    f = kiln.function([x], kiln.exp(x) + 1, mutable_inputs=[x])
    g = pickle.loads(pickle.dumps(f))
    a = np.linspace(0, 1, 5)
    np.testing.assert_array_equal(g(a.copy()), f(a.copy()))
    assert isinstance(g(a.copy()), np.ndarray)


def test_gradient_graphs_pickle():
    w = kiln.tensor("w", "float64", (2,))
    cost = kiln.sum(w ** 3, axis=0) * kiln.sum(w, axis=0)
    f = kiln.function([w], [kiln.grad(cost, w), kiln.hessian(cost, w),
                            kiln.jacobian(kiln.exp(w), w)])
    a = np.array([0.3, -0.7])
    assert_same(f(a), pickle.loads(pickle.dumps(f))(a))


def test_second_unpickle_is_a_cache_hit():
    x = kiln.vector("x")
    f = kiln.function([x], kiln.tanh(x) * 3)
    payload = pickle.dumps(f)
    before = kiln._cache_info()["unpickle"]
    g1 = pickle.loads(payload)
    mid = kiln._cache_info()["unpickle"]
    g2 = pickle.loads(payload)
    after = kiln._cache_info()["unpickle"]
    assert mid["compiles"] == before["compiles"] + 1
    assert after["compiles"] == mid["compiles"]
    assert after["hits"] == mid["hits"] + 1
    assert g1.fn is g2.fn  # the same compiled function
    np.testing.assert_array_equal(g2(np.ones(3)), np.tanh(np.ones(3)) * 3)


def test_variables_pickle_as_their_recipe():
    x = kiln.vector("x")
    y = kiln.sum(kiln.exp(x) * np.array([1.0, 2.0]), axis=0)
    y2 = pickle.loads(pickle.dumps(y))
    assert isinstance(y2, kiln.Variable)
    assert kiln.pprint(y2) == kiln.pprint(y)
    assert (y2.dtype, y2.shape) == (y.dtype, y.shape)
    # the unpickled graph is a graph like any other: built on, compiled
    x2 = pickle.loads(pickle.dumps(x))
    assert x2.name == "x" and x2.dtype == "float64"
    z = kiln.log(kiln.exp(y2))
    assert "log" in kiln.pprint(z)


def test_deep_graph_pickles_without_recursion():
    x = kiln.vector("x")
    y = x
    for _ in range(3000):
        y = y + 1.0
    f = kiln.function([x], y, mode="fast_compile")
    g = pickle.loads(pickle.dumps(f))
    np.testing.assert_array_equal(g(np.zeros(2)), [3000.0, 3000.0])


def test_malformed_payloads_are_value_errors():
    with pytest.raises(ValueError, match="not a kiln pickle payload"):
        kiln._unpickle_function(b"nonsense")
    x = kiln.vector("x")
    good = pickle.dumps(kiln.function([x], x * 2))
    payload = pickle.loads(good).fn.__reduce__()[1][0]
    for cut in (len(payload) - 1, len(payload) // 2, 13):
        with pytest.raises(ValueError, match="not a kiln pickle payload"):
            kiln._unpickle_function(payload[:cut])
    with pytest.raises(ValueError, match="not a kiln pickle payload"):
        kiln._unpickle_variable(payload)  # a function's payload is not a variable's


def test_every_single_byte_corruption_is_an_exception_never_a_panic():
    x = kiln.vector("x")
    c = kiln.constant(np.array([1.0, 2.0]))
    f = kiln.function([x], [kiln.sum(kiln.exp(x) * c, axis=0),
                            kiln.grad(kiln.sum(x * c, axis=0), x)])
    payload = f.fn.__reduce__()[1][0]
    for i in range(len(payload)):
        damaged = bytearray(payload)
        damaged[i] ^= 0xFF
        try:
            kiln._unpickle_function(bytes(damaged))
        except (ValueError, TypeError):
            pass  # a PanicException (a BaseException) would fail the test


def test_round_trip_through_spawned_worker_processes_compiles_once_per_worker():
    f, args = rich_function()
    want = f(*args)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        results = pool.starmap(kiln_workers.call_and_report, [(f, args)] * 3)
    for got, _ in results:
        assert_same(got, want)
    infos = [info for _, info in results]
    # one worker: the first task compiled, the next two were cache hits
    assert [i["compiles"] for i in infos] == [1, 1, 1]
    assert [i["hits"] for i in infos] == [0, 1, 2]
