"""Agreement with SciPy's DOP853 at tight tolerance on nonlinear systems."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import solve_ivp

import nhfast as nh


@pytest.fixture(scope="module")
def vanderpol():
    x, v, mu = sp.symbols("x v mu")
    return nh.VectorField([x, v], [v, mu * (1 - x**2) * v - x], params=[mu])


@pytest.mark.parametrize("method", ["dopri5", "dop853"])
def test_vanderpol_matches_scipy(vanderpol, method):
    rng = np.random.default_rng(1)
    x0 = rng.uniform(-2, 2, size=(5, 2))
    t = np.linspace(0.0, 10.0, 21)
    res = nh.integrate(vanderpol, x0, t, method=method, params=[1.3], rtol=1e-12, atol=1e-12)
    for i in range(len(x0)):
        ref = solve_ivp(
            lambda _t, y: [y[1], 1.3 * (1 - y[0] ** 2) * y[1] - y[0]],
            (0, 10),
            x0[i],
            method="DOP853",
            t_eval=t,
            rtol=1e-12,
            atol=1e-12,
        )
        assert np.max(np.abs(res.y[i] - ref.y.T)) < 1e-8


def test_sleigh_matches_scipy_and_conserves_energy(sleigh):
    rng = np.random.default_rng(2)
    x0 = np.column_stack([np.zeros((8, 3)), rng.normal(size=(8, 2))])
    par = np.column_stack(
        [rng.uniform(0.2, 1.0, 8), rng.uniform(0.5, 2.0, 8), rng.uniform(0.5, 2.0, 8)]
    )
    t = np.linspace(0.0, 20.0, 11)
    res = nh.integrate(sleigh, x0, t, params=par, rtol=1e-12, atol=1e-12)
    f = sp.lambdify([sleigh.states, sleigh.params], sleigh.rhs)
    for i in range(8):
        ref = solve_ivp(
            lambda _t, y, pi=par[i]: f(y, pi),
            (0, 20),
            x0[i],
            method="DOP853",
            t_eval=t,
            rtol=1e-12,
            atol=1e-12,
        )
        assert np.max(np.abs(res.y[i] - ref.y.T)) < 1e-8
    e = res.observables["energy"]
    assert np.max(np.abs(e - e[:, :1]) / e[:, :1]) < 1e-10


@pytest.mark.parametrize("method", ["dopri5", "dop853"])
@pytest.mark.parametrize("x1", [2.220446049250313e-16, 1e-300, -3e-17])
def test_round_off_state_with_order_one_derivative(method, x1):
    """x' = -x^3, y' = 2 cos t - y^3 from (0, y0) with y0 of round-off size at t = 1: Hairer's
    starting step 0.01 d0 / d1 is about 1e-18 there, and the lane used to fail with a step-size
    underflow after one step; it must run and agree with SciPy (found by the property test
    ``test_wellformed_agree_with_scipy_large``)."""
    x, y = sp.symbols("x y")
    t = sp.Symbol("t")
    vf = nh.VectorField([x, y], [-(x**3), 2 * sp.cos(t) - y**3], time=t)
    x0 = np.array([0.0, x1])
    res = nh.integrate(vf, x0, [1.0, 1.5, 2.0], method=method, rtol=1e-11, atol=1e-12)
    assert res.success
    ref = solve_ivp(
        lambda tt, u: [-(u[0] ** 3), 2 * np.cos(tt) - u[1] ** 3],
        (1.0, 2.0), x0, method="DOP853", t_eval=[1.0, 1.5, 2.0], rtol=1e-13, atol=1e-14,
    )  # fmt: skip
    np.testing.assert_allclose(res.y[0], ref.y.T, rtol=0, atol=1e-9)
