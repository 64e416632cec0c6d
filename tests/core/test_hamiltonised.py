"""Measure-preserving integration of phi-simple Chaplygin systems (nhfast.hamiltonised).

Oracles: DOP853 on the original reduced equations (3.17) of Garcia-Naranjo and Marrero (2020)
at tight tolerance, the invariant density ``exp((r - 1) phi) ds dp`` of Theorem 3.21(ii)
(checked on the output map by central differences), conservation of ``Htilde``, and the order
of the Gauss scheme at output times off the ``tau`` grid (which would expose any interpolation).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import sympy as sp

from nhfast import integrate, integrate_hamiltonised
from nhfast.errors import IntegrationError, IntegrationWarning
from nhfast.symbolic.equations import chaplygin_equations
from nhfast.symbolic.time_change import time_changed_system
from nhfast.systems import (
    chaplygin_sleigh,
    holonomic_particle,
    nonholonomic_particle,
    veselova,
)
from nhfast.vectorfield import VectorField

A3 = np.array([1.0, 2.0, 3.0])
TIGHT = {"rtol": 1e-13, "atol": 1e-13}


def cap_potential(gamma: list) -> sp.Expr:
    """U = 1 - gamma_n: energies below 1/2 keep gamma_n >= 1/2 (inside the chart)."""
    return 1 - gamma[-1]


@functools.cache
def ves3():
    return veselova(3, cap_potential)


@functools.cache
def ves3_field() -> VectorField:
    return chaplygin_equations(ves3(), simplify=False).as_vector_field()


def x0_ves3() -> np.ndarray:
    return np.array([[0.1, 0.2, 0.3, -0.2], [0.0, -0.1, 0.5, 0.3], [-0.2, 0.1, -0.4, 0.1]])


def density_log(s: np.ndarray, a: np.ndarray) -> np.ndarray:
    """log of the invariant density (A gamma, gamma)^{(2-n)/2} in (s, p), n = 3 (digest 4.2)."""
    c = a[-1] + np.sum((a[:-1] - a[-1]) * s**2, axis=-1)
    return -0.5 * np.log(c)


def test_agrees_with_dop853_at_off_grid_times():
    x0 = x0_ves3()
    t = np.sort(np.r_[0.0, np.random.default_rng(1).uniform(0.0, 8.0, 12)])
    res = integrate_hamiltonised(ves3(), x0, t, method="gauss6", h=0.02, params=A3)
    ref = integrate(ves3_field(), x0, t, params=A3, **TIGHT)
    assert res.success and res.method == "hamiltonised-gauss6"
    assert res.y.shape == (3, t.size, 4)
    assert np.max(np.abs(res.y - ref.y)) < 1e-10
    assert np.max(np.abs(res.observables["time_residual"])) <= 8 * np.finfo(float).eps * 9
    assert np.max(np.abs(res.y[:, -1] - x0)) > 0.05  # the states moved
    tau = res.observables["tau"]
    assert np.all(np.diff(tau, axis=1) > 0) and np.all(tau[:, 0] == 0)


def test_order_six_at_output_times():
    """Halving h divides the error by ~2^6 also at times off the tau grid (no interpolation)."""
    x0 = x0_ves3()[:2]
    t = np.array([0.0, 1.37, 2.91, 4.05])
    ref = integrate(ves3_field(), x0, t, params=A3, **TIGHT).y
    errs = [
        np.max(np.abs(integrate_hamiltonised(ves3(), x0, t, h=h, params=A3).y - ref))
        for h in (0.2, 0.1)
    ]
    assert errs[1] > 1e-13  # still above round-off
    assert 40 < errs[0] / errs[1] < 100


def test_integrate_names_the_hamiltonised_entry_point():
    """integrate takes vector fields: a hamiltonised-* method is refused with the call to use,
    and that call runs."""
    x0, t = x0_ves3(), np.linspace(0, 2, 5)
    with pytest.raises(ValueError, match=r"nhfast\.integrate_hamiltonised\(.*method='gauss4'"):
        integrate(ves3(), x0, t, method="hamiltonised-gauss4", h=0.05, params=A3)
    b = integrate_hamiltonised(ves3(), x0, t, method="gauss4", h=0.05, params=A3)
    assert b.method == "hamiltonised-gauss4" and b.success


def test_htilde_bounded_over_long_run():
    t = np.linspace(0, 300, 31)
    res = integrate_hamiltonised(ves3(), x0_ves3(), t, h=0.05, params=A3)
    E = res.observables["energy"]
    rel = np.abs(E - E[:, :1]) / np.abs(E[:, :1])
    assert np.max(rel) < 1e-12
    # Htilde = H: the energy of the original system at the mapped-back states
    x = res.y.reshape(-1, 4)
    par = np.broadcast_to(A3, (x.shape[0], 3))
    H = ves3_field().evaluate("observables", x, params=par)[:, 0]
    np.testing.assert_allclose(H.reshape(E.shape), E, rtol=1e-13, atol=1e-14)
    gamma_n = np.sqrt(1 - np.sum(res.y[:, :, :2] ** 2, axis=2))
    assert gamma_n.min() > 0.5  # the cap potential keeps the trajectories in the chart


def test_output_map_preserves_the_invariant_density():
    """det(D Psi_t) rho(Psi_t x) / rho(x) = 1 for the numerical t-map, rho = (A g, g)^{-1/2};
    the coordinate volume (rho = 1) is not preserved."""
    x0 = x0_ves3()[0]
    t = np.array([0.0, 5.0, 10.0, 20.0])
    eps = 1e-6
    rows = [x0]
    for i in range(4):
        e = np.zeros(4)
        e[i] = eps
        rows += [x0 + e, x0 - e]
    y = integrate_hamiltonised(ves3(), np.array(rows), t, h=0.02, params=A3).y
    for k in range(1, t.size):
        D = np.stack([(y[1 + 2 * i, k] - y[2 + 2 * i, k]) / (2 * eps) for i in range(4)], axis=1)
        logdet = np.log(abs(np.linalg.det(D)))
        defect = logdet + density_log(y[0, k, :2], A3) - density_log(x0[:2], A3)
        assert abs(defect) < 1e-7
        assert abs(logdet) > 1e-3  # rho = 1 fails


def test_particle_and_holonomic():
    part = nonholonomic_particle(a=0, potential=lambda x, y: x**2 / 2 + y**2)
    x0 = np.array([[0.1, 0.2, 0.3, -0.2], [0.5, -0.4, 0.0, 0.6]])
    t = np.linspace(0, 6, 7)
    res = integrate_hamiltonised(part, x0, t, h=0.02)
    ref = integrate(chaplygin_equations(part, simplify=False).as_vector_field(), x0, t, **TIGHT)
    assert np.max(np.abs(res.y - ref.y)) < 1e-10
    # holonomic: phi = 0, so tau = t and ptilde = p
    hol = holonomic_particle(potential=lambda x, y: (x**2 + y**2) / 2)
    res = integrate_hamiltonised(hol, x0, t, h=0.05, params=[0.4])
    np.testing.assert_allclose(res.observables["tau"], np.broadcast_to(t, (2, t.size)), atol=1e-14)
    assert np.all(res.observables["phi"] == 0)
    ref = integrate(chaplygin_equations(hol).as_vector_field(), x0, t, params=[0.4], **TIGHT)
    assert np.max(np.abs(res.y - ref.y)) < 1e-10


def test_time_changed_system_is_cached():
    assert time_changed_system(ves3()) is time_changed_system(ves3())


# ---------------------------------------------------------------------------- bad input


def test_not_phi_simple_is_rejected():
    with pytest.raises(ValueError, match=r"system: .*phi-simple.*not closed"):
        integrate_hamiltonised(chaplygin_sleigh(), [0.1, 1.0, 0.3, -0.2], [0, 1], h=0.1)
    with pytest.raises(ValueError, match=r"system: .*phi-simple"):
        integrate_hamiltonised(nonholonomic_particle(a=sp.Rational(3, 10)), [0, 0, 1, 0],
                               [0, 1], method="gauss6", h=0.1)  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"x0": [0.1, 0.2, np.nan, 0.0]}, ValueError, "x0 contains NaN"),
        ({"x0": [0.1, 0.2, 0.3]}, ValueError, r"x0 must have shape \(4,\)"),
        ({"x0": [[0.9, 0.9, 0.0, 0.0]]}, ValueError, "x0: 1 state.*outside the domain"),
        ({"t_eval": [0.0, 2.0, 1.0]}, ValueError, "t_eval must be strictly increasing"),
        ({"t_eval": [0.0, np.inf]}, ValueError, "t_eval contains NaN"),
        ({"h": None}, ValueError, "h .*required"),
        ({"h": -0.1}, ValueError, "h must be a positive"),
        ({"params": None}, ValueError, "params is required"),
        ({"params": [1.0, 2.0]}, ValueError, r"params must have shape \(3,\)"),
        ({"method": "dop853"}, ValueError, "method must be one of midpoint, gauss4, gauss6"),
        ({"system": VectorField([sp.Symbol("x")], [sp.Integer(1)])}, TypeError, "system must"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, exc, match):
    args = {
        "system": ves3(),
        "x0": [0.1, 0.2, 0.3, 0.0],
        "t_eval": [0.0, 1.0],
        "h": 0.1,
        "params": A3,
        "method": "gauss6",
    }
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        integrate_hamiltonised(**args)


def test_failed_lanes_raise_or_are_kept():
    x0 = np.array([[0.1, 0.2, 0.3, -0.2], [0.1, 0.2, 30.0, -20.0]])  # lane 1 blows up at h = 0.5
    with pytest.raises(IntegrationError, match="1 of 2 trajectories failed") as info:
        integrate_hamiltonised(ves3(), x0, [0.0, 1.0, 2.0], h=0.5, params=A3)
    assert list(info.value.status) == [0, 1]
    with pytest.warns(IntegrationWarning) as rec:
        res = integrate_hamiltonised(ves3(), x0, [0.0, 1.0, 2.0], h=0.5, params=A3,
                                     keep_failed=True)  # fmt: skip
    assert len(rec) == 1
    assert list(res.failed) == [False, True]
    assert np.all(np.isfinite(res.y[0])) and np.all(np.isnan(res.y[1]))
