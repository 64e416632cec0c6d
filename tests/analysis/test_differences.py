"""The finite-difference helpers of :mod:`nhfast.analysis.measure` against exact derivatives."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from nhfast.analysis.measure import (
    derivative_along,
    divergence_by_differences,
    expression_values,
    flow_log_det_by_differences,
    flow_map_determinant,
    hamiltonised_fields,
    jacobian_by_differences,
    kernel_values,
)
from nhfast.vectorfield import VectorField

RNG = np.random.default_rng(7)
A = np.array([[0.3, -1.2, 0.5], [0.8, -0.1, 0.2], [-0.4, 0.6, 0.45]])


def _quartic(y: np.ndarray) -> np.ndarray:
    """A polynomial map R^3 -> R^2 of degree 4 (the stencil is exact up to degree 4)."""
    a, b, c = y.T
    return np.stack([a**2 * b - 3 * c**4 + a * b * c, b**3 - 2 * a * c**2 + 5.0], axis=1)


def _quartic_jacobian(y: np.ndarray) -> np.ndarray:
    a, b, c = y.T
    rows = [
        [2 * a * b + b * c, a**2 + a * c, -12 * c**3 + a * b],
        [-2 * c**2, 3 * b**2, -4 * a * c],
    ]
    return np.stack([np.stack(r, axis=-1) for r in rows], axis=1)


def test_derivative_along_of_a_square_and_zero_field():
    x = RNG.normal(size=(6, 3))
    f = RNG.normal(size=(6, 3))
    f[2] = 0.0
    got = derivative_along(lambda y: y[:, 0] ** 2, x, f)
    np.testing.assert_allclose(got, 2 * x[:, 0] * f[:, 0], rtol=1e-11, atol=1e-12)
    assert got[2] == 0.0
    # vector values: derivative along f of the quartic map is J f
    got = derivative_along(_quartic, x, f)
    want = np.einsum("kij,kj->ki", _quartic_jacobian(x), f)
    assert got.shape == (6, 2)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_derivative_along_is_fourth_order():
    x = np.array([[0.4, -0.2]])
    f = np.array([[1.0, 0.5]])

    def fn(y: np.ndarray) -> np.ndarray:
        return np.sin(3 * y[:, 0]) * np.exp(y[:, 1])

    exact = (3 * np.cos(1.2) * 1.0 + np.sin(1.2) * 0.5) * np.exp(-0.2)
    errs = [abs(derivative_along(fn, x, f, step=s)[0] - exact) for s in (2e-2, 4e-2)]
    assert errs[0] < 1e-5
    assert 10 < errs[1] / errs[0] < 22  # 2^4 = 16: fourth order, not second


def test_jacobian_of_a_polynomial_and_a_gradient():
    x = RNG.normal(size=(5, 3))
    J = jacobian_by_differences(_quartic, x)
    assert J.shape == (5, 2, 3)
    np.testing.assert_allclose(J, _quartic_jacobian(x), rtol=1e-9, atol=1e-9)
    grad = jacobian_by_differences(lambda y: np.sum(y**2, axis=1) * y[:, 1], x)
    r2 = np.sum(x**2, axis=1)
    want = 2 * x * x[:, 1:2]
    want[:, 1] += r2
    assert grad.shape == (5, 3)
    np.testing.assert_allclose(grad, want, rtol=1e-10, atol=1e-10)


def test_divergence_of_linear_and_nonlinear_fields():
    x = RNG.normal(size=(4, 3))
    div = divergence_by_differences(lambda y: y @ A.T, x)
    np.testing.assert_allclose(div, np.trace(A), rtol=1e-12)
    # X = (x y, y z, z x): div X = y + z + x
    div = divergence_by_differences(lambda y: y * np.roll(y, -1, axis=1), x)
    np.testing.assert_allclose(div, x.sum(axis=1), rtol=1e-10, atol=1e-12)


@pytest.fixture(scope="module")
def linear_field() -> VectorField:
    s = sp.symbols("u0:3")
    k = sp.Symbol("k")
    rhs = [sum(float(A[i, j]) * s[j] for j in range(3)) * k for i in range(3)]
    return VectorField(
        states=list(s),
        rhs=rhs,
        params=[k],
        observables={"square": s[0] ** 2},
        name="linear_differences",
    )


def test_kernel_values_of_a_plain_field(linear_field):
    x = RNG.normal(size=(2, 4, 3))
    got = kernel_values(linear_field, "rhs", x, [2.0])
    assert got.shape == (2, 4, 3)
    np.testing.assert_allclose(got, 2.0 * x @ A.T, rtol=1e-14)
    obs = kernel_values(linear_field, "observables", x.reshape(8, 3), [2.0])
    np.testing.assert_allclose(obs[:, 0], x.reshape(8, 3)[:, 0] ** 2, rtol=1e-14)
    u0, u1, _ = linear_field.states
    k = linear_field.params[0]
    vals = expression_values(linear_field, [u0 * u1 * k, sp.Integer(3)], x[0], [2.0])
    np.testing.assert_allclose(vals[:, 0], 2.0 * x[0, :, 0] * x[0, :, 1], rtol=1e-14)
    np.testing.assert_allclose(vals[:, 1], 3.0)


@pytest.mark.parametrize("order", [2, 4])
def test_flow_log_det_of_a_linear_flow_is_t_trace(linear_field, order):
    """x' = k A x: det DPhi_t = exp(k t tr A) (Liouville), for every x0."""
    x0 = RNG.normal(size=(3, 3))
    times = np.linspace(0.0, 1.5, 4)
    x, ld = flow_log_det_by_differences(linear_field, x0, times, [0.5], order=order)
    assert x.shape == (3, 4, 3) and ld.shape == (3, 4)
    np.testing.assert_allclose(x[:, 0], x0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(ld, np.tile(0.5 * times * np.trace(A), (3, 1)), rtol=0, atol=1e-8)
    with pytest.raises(ValueError, match="order must be 2 or 4"):
        flow_log_det_by_differences(linear_field, x0, times, [0.5], order=3)


def test_flow_map_determinant_shares_the_differenced_flow(linear_field):
    x0 = RNG.normal(size=(2, 3))
    res = flow_map_determinant(linear_field, x0, 1.0, [0.5], route="differences")
    assert res.route == "differences"
    np.testing.assert_allclose(res.ambient_log_det, 0.5 * np.trace(A), rtol=0, atol=1e-7)
    assert np.all(np.abs(res.ambient_log_det - 0.5 * np.trace(A)) <= res.error)
    np.testing.assert_allclose(res.ell, 0.5 * np.trace(A), rtol=1e-9)


def _geodesic(x: np.ndarray) -> np.ndarray:
    n = x.shape[1] // 2
    g, m = x[:, :n], x[:, n:]
    return np.hstack([m, -np.sum(m * m, axis=1, keepdims=True) * g])


def _sphere_states(k: int, n: int) -> np.ndarray:
    g = RNG.normal(size=(k, n))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    m = RNG.normal(size=(k, n))
    m -= np.sum(g * m, axis=1, keepdims=True) * g
    return np.hstack([g, m])


def test_hamiltonised_fields_of_the_geodesic_flow():
    """The geodesic flow of S^{n-1} is Hamiltonian for E = |m|^2 / 2; a constant phi only
    rescales time; a field that is not the Hamiltonian one differs."""
    n = 4
    x = _sphere_states(6, n)

    def energy(y: np.ndarray) -> np.ndarray:
        return 0.5 * np.sum(y[:, n:] ** 2, axis=1)

    for c in (0.0, 0.7):
        Y, Z = hamiltonised_fields(_geodesic, lambda y, c=c: np.full(len(y), c), energy, x)
        np.testing.assert_allclose(Y, Z, rtol=0, atol=1e-10)
        np.testing.assert_allclose(Y[:, :n], np.exp(-c) * x[:, n:], rtol=1e-13)

    def frozen(y: np.ndarray) -> np.ndarray:  # gamma' = m, m' = 0: leaves T*S^{n-1}
        return np.hstack([y[:, n:], np.zeros_like(y[:, n:])])

    Y, Z = hamiltonised_fields(frozen, lambda y: np.zeros(len(y)), energy, x)
    assert np.linalg.norm(Y - Z) > 0.1 * np.linalg.norm(Y)
