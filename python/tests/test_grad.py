"""Gradients from Python: kiln.grad / jacobian / hessian against closed
forms and finite differences, the stabilised gradients, and the errors."""

import numpy as np
import pytest

import kiln


def finite_difference(f, a, eps=1e-6):
    """Central differences of the scalar function ``f`` at ``a`` (float64)."""
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        hi, lo = a.copy(), a.copy()
        hi[i] += eps
        lo[i] -= eps
        g[i] = (f(hi) - f(lo)) / (2 * eps)
    return g


def test_grad_of_a_logistic_loss_matches_the_closed_form_and_finite_differences():
    w, x = kiln.vector("w"), kiln.matrix("x")
    y = kiln.vector("y")
    p = kiln.sigmoid(x @ w)
    cost = -kiln.sum(y * kiln.log(p) + (1 - y) * kiln.log(1 - p), axis=0)
    gw = kiln.grad(cost, w)
    assert isinstance(gw, kiln.Variable) and gw.dtype == "float64" and gw.ndim == 1
    f = kiln.function([w, x, y], [cost, gw])
    rng = np.random.default_rng(1)
    wv, xv = rng.normal(size=3), rng.normal(size=(8, 3))
    yv = (rng.random(8) < 0.5).astype(np.float64)
    c, g = f(wv, xv, yv)
    pv = 1 / (1 + np.exp(-(xv @ wv)))
    np.testing.assert_allclose(g, xv.T @ (pv - yv), rtol=1e-10)
    fd = finite_difference(lambda v: f(v, xv, yv)[0], wv)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_grad_wrt_a_list_returns_a_list_and_shares_the_forward_graph():
    x, y = kiln.vector("x"), kiln.scalar("y")
    cost = kiln.sum(kiln.exp(x) * y + x ** 3, axis=0)
    gx, gy = kiln.grad(cost, [x, y])
    f = kiln.function([x, y], [gx, gy])
    a, b = np.linspace(-1, 1, 5), np.float64(0.5)
    got_x, got_y = f(a, b)
    np.testing.assert_allclose(got_x, np.exp(a) * b + 3 * a ** 2, rtol=1e-12)
    np.testing.assert_allclose(got_y, np.exp(a).sum(), rtol=1e-12)
    assert isinstance(kiln.grad(cost, (x,)), list)


def test_grad_float32_keeps_the_dtype():
    x = kiln.vector("x", "float32")
    g = kiln.grad(kiln.sum(kiln.tanh(x), axis=0), x)
    assert g.dtype == "float32"
    a = np.linspace(-2, 2, 7, dtype=np.float32)
    got = kiln.function([x], g)(a)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, 1 - np.tanh(a) ** 2, rtol=1e-5)


def test_stabilised_softplus_gradient_is_finite_at_800():
    x = kiln.vector("x")
    cost = kiln.sum(kiln.log(1 + kiln.exp(x)), axis=0)
    f = kiln.function([x], [cost, kiln.grad(cost, x)])
    a = np.array([-800.0, -1.0, 0.0, 1.0, 800.0])
    c, g = f(a)
    assert np.isfinite(c) and np.all(np.isfinite(g))
    np.testing.assert_allclose(c, np.logaddexp(0, a).sum(), rtol=1e-12)
    np.testing.assert_allclose(g, [0.0, 1 / (1 + np.e), 0.5, 1 / (1 + np.exp(-1)), 1.0],
                               rtol=1e-12, atol=1e-300)


def test_softplus_function_gradient_is_the_sigmoid_at_800():
    x = kiln.vector("x")
    g = kiln.grad(kiln.sum(kiln.softplus(x), axis=0), x)
    got = kiln.function([x], g)(np.array([-800.0, 0.0, 800.0]))
    np.testing.assert_allclose(got, [0.0, 0.5, 1.0], atol=1e-300)


def test_known_grads_seed_the_walk_without_a_cost():
    x = kiln.vector("x")
    h = kiln.exp(x)
    v = kiln.vector("v")
    gx = kiln.grad(None, x, known_grads={h: v})
    a, b = np.array([0.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(kiln.function([x, v], gx)(a, b), np.exp(a) * b, rtol=1e-12)
    # an array is accepted as a known gradient (a constant)
    gx2 = kiln.grad(None, x, known_grads={h: np.ones(3)})
    np.testing.assert_allclose(kiln.function([x], gx2)(a), np.exp(a), rtol=1e-12)


def test_jacobian_of_a_static_length_vector():
    x = kiln.tensor("x", dtype="float64", shape=(3,))
    y = kiln.exp(x) * x[::-1]
    jac = kiln.jacobian(y, x)
    assert jac.shape == [3, 3]
    a = np.array([0.5, -1.0, 2.0])
    got = kiln.function([x], jac)(a)
    want = np.diag(np.exp(a) * a[::-1]) + np.exp(a)[:, None] * np.eye(3)[::-1]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # a list of wrt gives a list; a 0-d expression gives its gradient
    (j0,) = kiln.jacobian(kiln.sum(x * x, axis=0), [x])
    np.testing.assert_allclose(kiln.function([x], j0)(a), 2 * a, rtol=1e-12)


def test_hessian_of_a_quadratic_and_of_a_non_quadratic_cost():
    x = kiln.tensor("x", dtype="float64", shape=(3,))
    m = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]])
    cost = 0.5 * kiln.sum(x * (kiln.constant(m) @ x), axis=0)
    h = kiln.hessian(cost, x)
    np.testing.assert_allclose(kiln.function([x], h)(np.ones(3)), m, rtol=1e-12)
    c2 = kiln.sum(kiln.exp(x), axis=0) * kiln.sum(x, axis=0)
    h2 = kiln.function([x], kiln.hessian(c2, [x])[0])
    a = np.array([0.1, -0.2, 0.3])
    f = kiln.function([x], c2)
    gfun = kiln.function([x], kiln.grad(c2, x))
    fd = np.stack([finite_difference(lambda v: gfun(v)[i], a) for i in range(3)])
    np.testing.assert_allclose(h2(a), fd, rtol=1e-6, atol=1e-7)
    assert np.isfinite(f(a))


def test_disconnected_input_raises_kilns_message():
    x, y = kiln.vector("x"), kiln.vector("y")
    cost = kiln.sum(x * 2, axis=0)
    with pytest.raises(ValueError, match=r"the cost does not depend on wrt\[1\] \(y: f64\(\?,\)\)"):
        kiln.grad(cost, [x, y])


def test_disconnected_ignore_and_warn_give_zeros(capfd):
    x, y = kiln.vector("x"), kiln.vector("y")
    cost = kiln.sum(x * 2, axis=0)
    gx, gy = kiln.grad(cost, [x, y], disconnected_inputs="ignore")
    f = kiln.function([x, y], [gx, gy])
    got_x, got_y = f(np.ones(4), np.arange(3.0))
    np.testing.assert_array_equal(got_x, [2.0] * 4)
    np.testing.assert_array_equal(got_y, np.zeros(3))
    with pytest.warns(UserWarning, match=r"the cost does not depend on wrt\[1\] \(y: f64\(\?,\)\)") as caught:
        gx_w, gy_w = kiln.grad(cost, [x, y], disconnected_inputs="warn")
    assert len(caught) == 1  # x is connected: one warning, for y
    np.testing.assert_array_equal(kiln.function([y], gy_w)(np.arange(2.0)), np.zeros(2))
    # A Python warning, not a line on standard error.
    assert "does not depend" not in capfd.readouterr().err


def test_gradient_errors_are_clear():
    x = kiln.vector("x")
    with pytest.raises(ValueError, match="the cost must be a scalar"):
        kiln.grad(x * 2, x)
    with pytest.raises(ValueError, match="disconnected_inputs must be"):
        kiln.grad(kiln.sum(x, axis=0), x, disconnected_inputs="loud")
    with pytest.raises(ValueError, match="static length"):
        kiln.jacobian(kiln.exp(x), x)
    with pytest.raises(ValueError, match="nothing to differentiate"):
        kiln.grad(None, x)
    with pytest.raises(ValueError, match="known gradient"):
        kiln.grad(None, x, known_grads={x: kiln.matrix("m")})
    with pytest.raises(TypeError):
        kiln.grad(kiln.sum(x, axis=0), "x")


def test_integer_inputs_get_a_zero_gradient():
    x, k = kiln.vector("x"), kiln.vector("k", "int32")
    cost = kiln.sum(x * k, axis=0)
    gx, gk = kiln.grad(cost, [x, k])
    got_x, got_k = kiln.function([x, k], [gx, gk])(np.ones(3), np.array([1, 2, 3], np.int32))
    np.testing.assert_array_equal(got_x, [1.0, 2.0, 3.0])
    assert not np.any(got_k)
