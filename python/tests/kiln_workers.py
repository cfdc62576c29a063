"""Functions run in other processes by the tests (spawned `multiprocessing`
workers in test_pickle.py, Dask workers in test_dask.py): a module of its
own so that the workers import it by name."""

import numpy as np

import kiln


def call_and_report(f, args):
    """Calls the unpickled function ``f``; returns its results and this
    process's unpickling-cache counters."""
    return f(*args), kiln._cache_info()["unpickle"]


def evaluate_block(a, b):
    """The per-block kernel of the Dask tests: ``kiln.evaluate`` on two blocks."""
    return kiln.evaluate("where(a > b, a * exp(-b), log1p(b * b)) + 1",
                         local_dict={"a": a, "b": b})


def evaluate_block_numpy(a, b):
    """What ``evaluate_block`` computes, in numpy."""
    return np.where(a > b, a * np.exp(-b), np.log1p(b * b)) + 1


def unpickle_counters():
    """This process's unpickling-cache counters (run on every Dask worker)."""
    return kiln._cache_info()["unpickle"]
