"""The geometry layer's equations through the compiled core (linear solves for r > 3)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
from nhfast.symbolic.equations import chaplygin_equations
from nhfast.systems import veselova


def _points(n: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = rng.uniform(-0.45, 0.45, size=(m, n - 1))
    p = rng.uniform(-1.0, 1.0, size=(m, n - 1))
    a = rng.uniform(0.5, 3.0, size=(m, n))
    return np.hstack([s, p]), a


@pytest.mark.parametrize("n", [4, 5, 6])
def test_veselova_compiled_rhs_matches_closed_form(n, veselova_closed_form):
    eq = chaplygin_equations(veselova(n), simplify=False)
    assert bool(eq.solves) == (n - 1 > 3)  # r > 3: velocities by a numeric solve
    vf = eq.as_vector_field()
    x, a = _points(n, 50, n)
    got = vf.evaluate("rhs", x, params=a)
    for i in range(len(x)):
        ref, _ = veselova_closed_form(x[i, : n - 1], x[i, n - 1 :], a[i])
        assert np.allclose(got[i], ref, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("n", [4, 6])
def test_veselova_density_is_invariant_and_liouville_is_not(n):
    """div(rho X) = 0 for rho = (A gamma, gamma)^((2-n)/2) at 1000 points, through the
    generated divergence kernel (implicit differentiation through the linear solve)."""
    V = veselova(n)
    eq = chaplygin_equations(V, simplify=False)
    vf = eq.as_vector_field()
    s = list(V.s)
    a = list(V.params)
    c = a[-1] + sum((a[k] - a[-1]) * s[k] ** 2 for k in range(n - 1))
    log_rho = sp.Rational(2 - n, 2) * sp.log(c)
    grad = sp.lambdify([s, a], [sp.diff(log_rho, sk) for sk in s])
    x, par = _points(n, 1000, 10 + n)
    cs = vf.compile(("divergence",))
    div = cs.evaluate("divergence", x, params=par)[:, 0]
    f = cs.evaluate("rhs", x, params=par)
    g = np.array([grad(x[i, : n - 1], par[i]) for i in range(len(x))])
    residual = div + np.sum(g * f[:, : n - 1], axis=1)  # div(rho X)/rho = div X + X[log rho]
    scale = np.abs(div) + np.abs(np.sum(g * f[:, : n - 1], axis=1)) + 1e-300
    assert np.max(np.abs(residual) / scale) < 1e-8
    # the coordinate (Liouville) measure is not invariant: div X is far from zero
    assert np.median(np.abs(div) / scale) > 0.1


def test_veselova_energy_conserved_in_chart():
    n = 5
    vf = chaplygin_equations(veselova(n), simplify=False).as_vector_field()
    x, a = _points(n, 64, 3)
    x[:, : n - 1] *= 0.3
    x[:, n - 1 :] *= 0.2  # slow: stays inside the hemisphere chart for t <= 1
    res = nh.integrate(vf, x, np.linspace(0, 1, 5), params=a, rtol=1e-12, atol=1e-12)
    e = res.observables["energy"]
    assert np.max(np.abs(e - e[:, :1]) / np.abs(e[:, :1])) < 1e-10


def test_veselova_chart_point_outside_domain_is_rejected():
    n = 4
    vf = chaplygin_equations(veselova(n), simplify=False).as_vector_field()
    x, a = _points(n, 3, 5)
    x[1, : n - 1] = [0.8, 0.6, 0.1]  # |s| > 1: gamma_n would be imaginary
    with pytest.raises(ValueError, match="x0: 1 state.*hemisphere chart: gamma_n > 0.* row 1"):
        nh.integrate(vf, x, [0.0, 0.1], params=a)
    x[1, : n - 1] = [0.8, 0.6, 0.0]  # on the equator: gamma_n = 0 is outside the open chart
    with pytest.raises(ValueError, match="hemisphere chart"):
        nh.integrate(vf, x, [0.0, 0.1], params=a)


def test_domain_condition_validation():
    x, y = sp.symbols("x y")
    with pytest.raises(ValueError, match="domain uses symbols .*: y"):
        nh.VectorField([x], [x], domain={"bad": 1 - y})
    vf = nh.VectorField([x], [-x], domain={"x positive": x})
    res = nh.integrate(vf, [[1.0], [2.0]], [0.0, 1.0])
    assert res.success
    with pytest.raises(ValueError, match="condition 'x positive'"):
        nh.integrate(vf, [[1.0], [-2.0]], [0.0, 1.0])


def test_liouville_integral_matches_flow_determinant():
    """ell' = div X integrated alongside: exp(ell(t)) = det(dphi_t/dx) (Liouville's formula)."""
    x, v, mu = sp.symbols("x v mu")
    vdp = nh.VectorField([x, v], [v, mu * (1 - x**2) * v - x], params=[mu])
    aug = vdp.with_divergence()
    x0 = np.array([[0.5, 0.1], [1.5, -0.3]])
    t = np.linspace(0.0, 3.0, 4)
    res = nh.integrate(aug, np.hstack([x0, np.zeros((2, 1))]), t, params=[0.7], rtol=1e-12)
    var = vdp.variational()
    rv = nh.integrate(var, vdp.variational_initial(x0), t, params=[0.7], rtol=1e-12, atol=1e-12)
    _, M = vdp.variational_split(rv.y)
    assert np.allclose(np.exp(res.y[..., 2]), np.linalg.det(M), rtol=1e-9)
    assert np.allclose(res.y[..., :2], rv.y[..., :2], atol=1e-10)


@pytest.mark.parametrize("n", [4, 5])
def test_veselova_density_defect_along_trajectories(n):
    """log rho(x(t)) + ell(t) - log rho(x(0)) = 0 for the seed's density, not for rho = 1.

    n = 4 has a symbolic right-hand side, n = 5 a linear solve (divergence through it)."""
    V = veselova(n)
    eq = chaplygin_equations(V, simplify=False)
    assert bool(eq.solves) == (n == 5)
    vf = eq.as_vector_field().with_divergence()
    x, a = _points(n, 16, 21)
    x[:, : n - 1] *= 0.5
    x[:, n - 1 :] *= 0.3
    x0 = np.hstack([x, np.zeros((len(x), 1))])
    res = nh.integrate(vf, x0, np.linspace(0, 1, 5), params=a, rtol=1e-12, atol=1e-12)
    s = res.y[..., : n - 1]
    c = a[:, None, -1] + np.sum((a[:, None, : n - 1] - a[:, None, -1:]) * s**2, axis=-1)
    log_rho = (2 - n) / 2 * np.log(c)
    defect = log_rho + res.y[..., -1] - log_rho[:, :1]
    assert np.max(np.abs(defect)) < 1e-9
    assert np.max(np.abs(res.y[..., -1])) > 1e-3  # the coordinate volume itself is not preserved
    if eq.solves:
        with pytest.raises(ValueError, match="second derivatives"):
            vf.compile(("divergence",))
