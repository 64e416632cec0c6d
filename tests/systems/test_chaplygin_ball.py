"""Chaplygin's rolling ball (Chaplygin 1903; Borisov-Mamaev 2001): equations, invariant density,
first integrals."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from nhfast.analysis.density import discover_density
from nhfast.analysis.measure import check_measure
from nhfast.integrate import integrate
from nhfast.systems import chaplygin_ball, chaplygin_ball_density

# I = (1, 2, 3), m = 1, a = 1/2: d = m a^2 = 1/4, rho^-2 = 1 - g1^2/5 - g2^2/9 - g3^2/13
PARAMS = [1.0, 2.0, 3.0, 1.0, 0.5]
_SYMS = sp.symbols("I1 I2 I3 m a", positive=True)
EXACT = dict(zip(_SYMS, [1, 2, 3, 1, sp.Rational(1, 2)], strict=True))


@pytest.fixture(scope="module")
def ball():
    return chaplygin_ball()


def _on_sphere(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(n, 3))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    return np.hstack([rng.uniform(-1, 1, (n, 3)), g])


def test_omega_solves_the_momentum_relation(ball):
    """Independent: M = I omega + m a^2 gamma x (omega x gamma) on |gamma| = 1, at an exact
    point, with omega recovered from gamma' = gamma x omega and <gamma, omega> (a second
    formulation: the linear solve of the 3x3 system)."""
    M = sp.Matrix(ball.states[:3])
    g = sp.Matrix(ball.states[3:])
    vals = [sp.Rational(1, 3), -1, 2, sp.Rational(2, 7), sp.Rational(3, 7), sp.Rational(6, 7)]
    pt = dict(zip(ball.states, vals, strict=True))
    I = sp.diag(1, 2, 3)  # noqa: E741
    d = sp.Rational(1, 4)
    w = sp.Matrix(sp.symbols("w1:4"))
    gv = g.subs(pt)
    sol = sp.solve(list(I * w + d * gv.cross(w.cross(gv)) - M.subs(pt)), list(w), dict=True)[0]
    w_exact = w.subs(sol)
    rhs = sp.Matrix(ball.rhs).subs(EXACT).subs(pt)
    assert sp.simplify(rhs - sp.Matrix([*M.subs(pt).cross(w_exact), *gv.cross(w_exact)])) == (
        sp.zeros(6, 1)
    )


def test_known_density_is_exact_identity(ball):
    """div(rho X) = 0 exactly (rational parameters, exact rational points on and off the
    sphere), and div X != 0 there (so rho = 1 is not invariant)."""
    rho = chaplygin_ball_density(ball).subs(EXACT)
    X = [f.subs(EXACT) for f in ball.rhs]
    div_rho = sum(sp.diff(rho * f, s) for f, s in zip(X, ball.states, strict=True))
    div = sum(sp.diff(f, s) for f, s in zip(X, ball.states, strict=True))
    vals = [sp.Rational(1, 3), -1, 2, sp.Rational(2, 7), sp.Rational(3, 7), sp.Rational(6, 7)]
    for pt in (vals, [*vals[:3], sp.Rational(1, 2), sp.Rational(-1, 5), 1]):
        at = dict(zip(ball.states, pt, strict=True))
        assert sp.simplify(div_rho.subs(at)) == 0
        assert sp.simplify(div.subs(at)) != 0


def test_discover_density_finds_the_ball_density(ball):
    """discover_density on samples (gamma in a box: the density holds on all of R^6 for this
    form) returns (1 - m a^2 <gamma, (I + m a^2)^-1 gamma>)^(-1/2) up to a constant factor."""
    rng = np.random.default_rng(11)
    x = np.hstack([rng.uniform(-1, 1, (200, 3)), rng.uniform(-1, 1, (200, 3))])
    g = list(ball.states[3:])
    fit = discover_density(ball, x, params=PARAMS, variables=g)
    assert fit.exists, fit.statement
    assert fit.singular == []
    expected = chaplygin_ball_density(ball).subs(EXACT)
    ratio = sp.simplify(fit.density / expected)
    assert ratio.free_symbols == set(), ratio
    # the exponent is the literature's -1/2 (exactly, after snapping)
    assert fit.density.as_base_exp()[1] == sp.Rational(-1, 2)


def test_check_measure_accepts_rho_and_rejects_liouville(ball):
    x0 = _on_sphere(6, 3)
    rho = chaplygin_ball_density(ball)
    ok = check_measure(ball, rho, x0, t=2.0, params=PARAMS, n_jacobian=2)
    assert ok.holds is True, ok.statement
    bad = check_measure(ball, sp.Integer(1), x0, t=2.0, params=PARAMS, n_jacobian=0)
    assert bad.holds is False, bad.statement


def test_integrals_conserved_along_dop853(ball):
    x0 = _on_sphere(8, 5)
    res = integrate(ball, x0, np.linspace(0, 10, 21), method="dop853", rtol=1e-11,
                    atol=1e-13, params=PARAMS)  # fmt: skip
    assert np.all(res.status == 0)
    for name in ("energy", "M_gamma", "gamma2", "M2"):
        v = res.observables[name]
        drift = np.max(np.abs(v - v[:, :1]))  # shape (n_traj, n_t)
        assert drift < 1e-8, (name, drift)
    # not trivially constant: the state moves
    assert np.max(np.abs(res.y[:, -1] - res.y[:, 0])) > 1e-2


def test_domain_rejects_states_where_omega_is_undefined(ball):
    x = np.array([[0.1, 0.2, 0.3, 3.0, 0.0, 0.0]])  # 1 - 9/5 < 0
    with pytest.raises(ValueError, match="Chaplygin ball"):
        integrate(ball, x, [0.0, 1.0], params=PARAMS)


def test_omega_observables_invert_the_momentum(ball):
    """The observables ``omega1..3`` are the body angular velocity: ``M = I omega + m a^2
    gamma x (omega x gamma)`` (the definition of M) holds at every sampled state."""
    x = _on_sphere(7, 11)
    res = integrate(ball, x, [0.0, 0.5], params=PARAMS, rtol=1e-12, atol=1e-12)
    inertia, m, a = np.array(PARAMS[:3]), PARAMS[3], PARAMS[4]
    for k in range(x.shape[0]):
        for j in range(2):
            mom, gam = res.y[k, j, :3], res.y[k, j, 3:]
            w = np.array([res.observables[f"omega{i}"][k, j] for i in (1, 2, 3)])
            want = inertia * w + m * a**2 * np.cross(gam, np.cross(w, gam))
            np.testing.assert_allclose(want, mom, rtol=1e-12, atol=1e-13)
