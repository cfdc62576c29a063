"""Shared fixtures of kiln's Python tests: inputs of every dtype kiln supports."""

import numpy as np
import pytest

DTYPES = ["bool", "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
          "float32", "float64"]


def sample(dtype, n=37, seed=0):
    """Deterministic values of `dtype` (small, so integer arithmetic does not overflow)."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(n) < 0.5
    if dtype.startswith("float"):
        return rng.uniform(-3, 3, n).astype(dtype)
    lo = 0 if dtype.startswith("uint") else -9
    return rng.integers(lo, 10, n).astype(dtype)


@pytest.fixture(params=DTYPES)
def dtype(request):
    return request.param
