"""Structure preservation: symplectic flow maps and bounded energy error."""

from __future__ import annotations

import numpy as np
import pytest

import nhfast as nh


def _symplectic_defect(M: np.ndarray, d: int) -> float:
    J = np.block([[np.zeros((d, d)), np.eye(d)], [-np.eye(d), np.zeros((d, d))]])
    return float(np.max(np.abs(M.T @ J @ M - J)))


@pytest.mark.parametrize("method", ["leapfrog", "midpoint", "gauss4", "gauss6"])
def test_flow_map_is_symplectic(kepler, method):
    """M^T J M = J for the numerical flow map of a nonlinear Hamiltonian system.

    M comes from the variational equations integrated by the same scheme, which is the exact
    derivative of the numerical flow (Runge-Kutta methods commute with linearisation).
    """
    var = kepler.variational()
    x0 = np.array([[1.0, 0.1, -0.2, 1.1], [0.7, -0.4, 0.3, 0.9]])
    res = nh.integrate(var, kepler.variational_initial(x0), [0.0, 3.0], method=method, h=0.05)
    _, M = kepler.variational_split(res.y[:, -1])
    for m in M:
        assert _symplectic_defect(m, 2) < 1e-10
    # the same check fails for a non-symplectic scheme of higher order
    res = nh.integrate(var, kepler.variational_initial(x0), [0.0, 3.0], method="rk4", h=0.05)
    _, M = kepler.variational_split(res.y[:, -1])
    assert _symplectic_defect(M[0], 2) > 1e-8


def test_variational_matches_finite_differences(pendulum):
    var = pendulum.variational()
    x0 = np.array([0.5, 0.3])
    res = nh.integrate(
        var, pendulum.variational_initial(x0), [0.0, 2.0], method="dop853", rtol=1e-12, atol=1e-12
    )
    _, M = pendulum.variational_split(res.y[0, -1])
    eps = 1e-6
    cols = []
    for j in range(2):
        dx = np.zeros(2)
        dx[j] = eps
        yp = nh.integrate(pendulum, x0 + dx, [0.0, 2.0], rtol=1e-13, atol=1e-13).y[0, -1]
        ym = nh.integrate(pendulum, x0 - dx, [0.0, 2.0], rtol=1e-13, atol=1e-13).y[0, -1]
        cols.append((yp - ym) / (2 * eps))
    assert np.max(np.abs(M - np.array(cols).T)) < 1e-6


@pytest.mark.parametrize("method,h", [("leapfrog", 0.05), ("midpoint", 0.05), ("gauss4", 0.1)])
def test_energy_error_bounded_over_1e5_steps(pendulum, method, h):
    """Symplectic schemes: the energy error oscillates without drift over 10^5 steps."""
    x0 = np.array([[1.0, 0.5], [2.0, 0.0], [0.1, 1.2]])
    t = np.linspace(0.0, 1e5 * h, 201)
    res = nh.integrate(pendulum, x0, t, method=method, h=h)
    assert res.stats["steps"][0] == 100_000
    err = np.abs(res.observables["energy"] - res.observables["energy"][:, :1])
    first, last = err[:, 1:51].max(axis=1), err[:, -50:].max(axis=1)
    assert np.all(err.max(axis=1) < 5e-3)
    assert np.all(last < 2.0 * first + 1e-13), (first, last)


def test_rk4_energy_drifts_where_symplectic_does_not(pendulum):
    """Control for the test above: the same check catches the drift of RK4."""
    x0 = np.array([[2.0, 0.0]])
    t = np.linspace(0.0, 1e4 * 0.2, 201)
    res = nh.integrate(pendulum, x0, t, method="rk4", h=0.2)
    err = np.abs(res.observables["energy"] - res.observables["energy"][:, :1])
    assert err[0, -50:].max() > 2.0 * err[0, 1:51].max()


def test_gauss_preserves_quadratic_invariant(oscillator):
    """Gauss-Legendre conserves quadratic invariants exactly (to round-off)."""
    res = nh.integrate(
        oscillator, [1.0, 0.0], np.linspace(0, 1000, 11), method="gauss6", params=[3.0], h=0.1
    )
    e = res.observables["energy"][0]
    assert np.max(np.abs(e - e[0])) < 1e-12
