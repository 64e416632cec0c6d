"""Measured convergence order of every scheme on problems with exact solutions."""

from __future__ import annotations

import numpy as np
import pytest

import nhfast as nh
from nhfast.integrate import ADAPTIVE

ORDERS = {
    "rk4": 4,
    "leapfrog": 2,
    "midpoint": 2,
    "gauss4": 4,
    "gauss6": 6,
    "dopri5": 5,
    "dop853": 8,
}
# Step sizes in the asymptotic regime and above round-off, per method.
STEPS = {
    "rk4": (0.1, 0.05),
    "leapfrog": (0.05, 0.025),
    "midpoint": (0.05, 0.025),
    "gauss4": (0.2, 0.1),
    "gauss6": (0.4, 0.2),
    "dopri5": (0.05, 0.025),
    "dop853": (0.5, 0.25),
}


def _run(system, x0, t, method, h, **kw):
    if method in ADAPTIVE:
        # Force a fixed step: huge tolerances accept every step, hmax caps it at h.
        return nh.integrate(system, x0, t, method=method, h=h, hmax=h, rtol=1e6, atol=1e6, **kw)
    return nh.integrate(system, x0, t, method=method, h=h, **kw)


def _order(err_coarse: float, err_fine: float, ratio: float) -> float:
    return float(np.log(err_coarse / err_fine) / np.log(ratio))


@pytest.mark.parametrize("method", list(ORDERS))
def test_order_kepler_circular_orbit(kepler, method):
    """Circular Kepler orbit: q(t) = (cos t, sin t), p(t) = (-sin t, cos t)."""
    t = np.array([0.0, 2.0])
    exact = np.array([np.cos(2.0), np.sin(2.0), -np.sin(2.0), np.cos(2.0)])
    errs = []
    for h in STEPS[method]:
        res = _run(kepler, [1.0, 0.0, 0.0, 1.0], t, method, h)
        errs.append(np.max(np.abs(res.y[0, -1] - exact)))
    order = _order(errs[0], errs[1], STEPS[method][0] / STEPS[method][1])
    assert abs(order - ORDERS[method]) < 0.35, (method, errs, order)


@pytest.mark.parametrize("method", ["rk4", "midpoint", "gauss4", "gauss6", "dopri5", "dop853"])
def test_order_nonautonomous(nonautonomous, method):
    """y' = y cos t: checks the stage times c_i h of every scheme."""
    t = np.array([0.0, 3.0])
    steps = {"gauss6": (0.5, 0.25), "dop853": (0.375, 0.25)}.get(method, STEPS[method])
    errs = []
    for h in steps:
        res = _run(nonautonomous, [1.0], t, method, h)
        errs.append(abs(res.y[0, -1, 0] - np.exp(np.sin(3.0))))
    order = _order(errs[0], errs[1], steps[0] / steps[1])
    assert abs(order - ORDERS[method]) < 0.35, (method, errs, order)


@pytest.mark.parametrize("method", ["dopri5", "dop853"])
def test_adaptive_meets_tolerance(oscillator, method):
    t = np.linspace(0.0, 20.0, 41)
    for rtol in (1e-6, 1e-9, 1e-12):
        res = nh.integrate(
            oscillator, [1.0, 0.0], t, method=method, params=[1.5], rtol=rtol, atol=rtol
        )
        err = np.max(np.abs(res.y[0, :, 0] - np.cos(1.5 * t)))
        assert err < 2000 * rtol, (rtol, err)
        assert np.all(res.t == t)


def test_output_times_hit_exactly_backwards(oscillator):
    """Backward integration and non-uniform output times."""
    t = np.array([1.0, 0.7, 0.0, -0.35, -2.0])
    x0 = [np.cos(1.5), -np.sin(1.5) * 1.5]
    for method in ("dop853", "gauss6"):
        res = nh.integrate(
            oscillator, x0, t, method=method, params=[1.5], h=0.01, rtol=1e-12, atol=1e-12
        )
        assert np.max(np.abs(res.y[0, :, 0] - np.cos(1.5 * t))) < 1e-9
