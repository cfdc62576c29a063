"""Batched matrix products (issue 14): `A @ B` of stacks through
kiln.evaluate and through symbolic Variables, against numpy's matmul."""

import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(14)


def close(got, want):
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "sa, sb",
    [
        ((3, 2, 4), (3, 4, 5)),  # equal batches
        ((3, 2, 4), (4, 5)),  # one matrix shared by every batch
        ((2, 4), (3, 4, 5)),
        ((3, 2, 4), (1, 4, 5)),  # a batch of size 1 broadcast
        ((2, 1, 2, 4), (3, 4, 2)),  # 4-d and 3-d operands
        ((3, 2, 4), (4,)),  # a vector: numpy drops its dimension
    ],
)
def test_evaluate_matmul_of_stacks(sa, sb):
    A, B = RNG.standard_normal(sa), RNG.standard_normal(sb)
    for mode in ("none", "fast_run"):
        close(kiln.evaluate("A @ B", mode=mode), A @ B)


def test_evaluate_matmul_of_strided_and_integer_stacks():
    A = RNG.standard_normal((4, 3, 6))[:, :, ::2]  # strided batches
    B = RNG.standard_normal((4, 5, 3)).transpose(0, 2, 1)  # transposed matrices
    close(kiln.evaluate("A @ B"), A @ B)
    I = RNG.integers(-5, 5, (2, 3, 3), dtype=np.int32)
    J = RNG.integers(-5, 5, (2, 3, 2), dtype=np.int32)
    got = kiln.evaluate("I @ J")
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, I @ J)


def test_evaluate_matmul_batch_mismatch_is_an_error():
    A, B = np.ones((2, 2, 3)), np.ones((3, 3, 2))
    with pytest.raises((TypeError, ValueError), match="batch dimensions differ"):
        kiln.evaluate("A @ B")


def test_variable_matmul_operator():
    A = kiln.tensor("A", dtype="float64", shape=(None, None, None))
    B = kiln.tensor("B", dtype="float64", shape=(None, None, None))
    W = kiln.matrix("W")
    f = kiln.function([A, B, W], [A @ B, A @ W, kiln.sum(A @ B)])
    a, b, w = RNG.standard_normal((5, 2, 3)), RNG.standard_normal((5, 3, 4)), RNG.standard_normal((3, 2))
    ab, aw, s = f(a, b, w)
    close(ab, a @ b)
    close(aw, a @ w)
    np.testing.assert_allclose(s, (a @ b).sum(), rtol=1e-12)
    assert (A @ B).ndim == 3 and (A @ W).ndim == 3
