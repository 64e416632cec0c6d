"""Poincare sections of the Veselova body from events on the dense output (issue 12, item 3).

The section ``gamma_1 = 0`` (upwards) of the structured Veselova body on S^{n-1}, located by
``method="taylor"`` (on the series) and by DOP853 with ``dense=True`` (on its continuous
extension), against an independent integrator and event locator: SciPy's DOP853 with its own
event search, on the same right-hand side, at tight tolerance. The section points also keep
the first integrals (energy, ``|gamma|^2``, ``gamma . m``) of the body.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import nhfast as nh
from nhfast.systems import veselova
from nhfast.systems.veselova_body.embedded import join_state

N = 4
T_END = 60.0


@pytest.fixture(scope="module")
def body():
    vf = veselova(N, form="structured")
    a = np.array([1.0, 1.7, 2.3, 3.1])
    gamma = np.array([0.3, -0.5, 0.6, 0.55])
    gamma /= np.linalg.norm(gamma)
    m = 6.0 * np.array([0.4, 0.1, -0.3, 0.2])
    m -= (m @ gamma) * gamma  # on the constraint: gamma . m = 0
    return vf, join_state(gamma, m), a


@pytest.fixture(scope="module")
def scipy_section(body):
    vf, x0, a = body

    def rhs(_t, x):
        return vf.evaluate("rhs", x, params=a)

    def g(_t, x):
        return x[0]

    g.direction = 1.0
    sol = solve_ivp(rhs, (0.0, T_END), x0, method="DOP853", rtol=1e-13, atol=1e-13, events=g)
    assert sol.status == 0
    return sol.t_events[0], sol.y_events[0]


@pytest.mark.parametrize(("method", "kw"), [("taylor", {}), ("dop853", {"dense": True})])
def test_section_agrees_with_scipy_events(body, scipy_section, method, kw):
    vf, x0, a = body
    t_ref, y_ref = scipy_section
    gamma1 = vf.states[0]
    res = nh.integrate(
        vf, x0, [0.0, T_END], params=a, method=method, rtol=1e-13, atol=1e-13,
        events=[(gamma1, 1, False)], max_events=200, **kw,
    )  # fmt: skip
    k = int(res.events.count[0])
    assert k == len(t_ref) >= 5
    np.testing.assert_allclose(res.events.t[0, :k], t_ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(res.events.y[0, :k], y_ref, rtol=0, atol=1e-9)
    # on the section: gamma_1 = 0 to round-off, rising
    assert np.abs(res.events.y[0, :k, 0]).max() < 1e-13
    rate = vf.evaluate("rhs", res.events.y[0, :k], params=a)[:, 0]
    assert np.all(rate > 0)


def test_section_points_keep_the_first_integrals(body):
    vf, x0, a = body
    res = nh.integrate(
        vf, x0, [0.0, T_END], params=a, method="taylor", rtol=1e-14, atol=1e-14,
        events=[(vf.states[0], 1, False)], max_events=200,
    )  # fmt: skip
    k = int(res.events.count[0])
    pts = res.events.y[0, :k]
    obs = dict(zip(vf.observables, vf.evaluate("observables", pts, params=a).T, strict=True))
    obs0 = dict(zip(vf.observables, vf.evaluate("observables", x0, params=a), strict=True))
    assert np.abs(obs["energy"] - obs0["energy"]).max() < 1e-12
    assert np.abs(obs["gamma_norm"] - 1.0).max() < 1e-12
    assert np.abs(obs["momentum_constraint"]).max() < 1e-12
