"""kiln as the per-block kernel of dask.array: compiled functions and
``kiln.evaluate`` under ``map_blocks`` and ``blockwise``, on the threaded
scheduler and on a local ``dask.distributed`` cluster of two worker
processes (loopback only), compared with numpy."""

import dask
import dask.array as da
import distributed
import numpy as np

import kiln
import kiln_workers

N, BLOCK = 400_000, 10_000  # 40 blocks


def inputs():
    rng = np.random.default_rng(7)
    return rng.uniform(-3, 3, N), rng.uniform(-3, 3, N)


def softplus_function():
    """A compiled function of two vectors: two outputs would not fit
    map_blocks, so one (stabilised) output."""
    x, y = kiln.vector("x"), kiln.vector("y")
    return kiln.function([x, y], kiln.log(1 + kiln.exp(x * 300)) - y * 2)


def softplus_numpy(a, b):
    return np.logaddexp(0, a * 300) - b * 2


def graphs(f, a, b):
    """The three Dask arrays the tests compute, and their numpy values."""
    x, y = da.from_array(a, chunks=BLOCK), da.from_array(b, chunks=BLOCK)
    mapped = da.map_blocks(f, x, y, dtype=np.float64)
    blockwise = da.blockwise(kiln_workers.evaluate_block, "i", x, "i", y, "i",
                             dtype=np.float64)
    m = da.from_array(a.reshape(400, 1000), chunks=(100, 250))  # 16 2-d blocks
    g = kiln.matrix("g")
    col_sums = kiln.function([g], kiln.sum(kiln.exp(-g * g), axis=0, keepdims=True))
    reduced = da.map_blocks(col_sums, m, dtype=np.float64, chunks=(1, 250)).sum(axis=0)
    want = [softplus_numpy(a, b), kiln_workers.evaluate_block_numpy(a, b),
            np.exp(-a.reshape(400, 1000) ** 2).sum(axis=0)]
    return [mapped, blockwise, reduced], want


def check(got, want):
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    assert np.all(np.isfinite(got[0]))  # log(1 + exp(900)) stays finite through kiln


def test_map_blocks_and_blockwise_on_the_threaded_scheduler():
    a, b = inputs()
    arrays, want = graphs(softplus_function(), a, b)
    assert arrays[0].numblocks == (40,)
    got = dask.compute(*arrays, scheduler="threads")
    check(got, want)


def test_two_process_local_cluster_recompiles_once_per_worker():
    a, b = inputs()
    f = softplus_function()
    arrays, want = graphs(f, a, b)
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None, host="127.0.0.1") as cluster, \
            distributed.Client(cluster) as client:
        got = client.compute(arrays, sync=True)
        check(got, want)
        counters = client.run(kiln_workers.unpickle_counters)
    assert len(counters) == 2
    # Two compiled functions travel to the workers; whatever number of tasks
    # each worker ran, it compiled each of them at most once.
    for info in counters.values():
        assert info["compiles"] <= 2
    assert sum(info["compiles"] for info in counters.values()) >= 2
    # Workers unpickle the functions task by task (56 tasks use them): the
    # later ones were served by the cache.
    assert sum(info["hits"] for info in counters.values()) > 0
