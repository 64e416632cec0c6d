"""The Veselova body equations on so(3) (a Lie-group system) against the unreduced SO(3) form."""

from __future__ import annotations

import numpy as np
import sympy as sp

import nhfast as nh
from nhfast.systems import veselova
from nhfast.systems.veselova_body import embedded_momentum, embedded_to_unreduced

TOL = {"rtol": 1e-12, "atol": 1e-12}


def potential(gamma: list) -> sp.Expr:
    return sp.Rational(1, 3) * gamma[0] ** 2 + sp.Rational(1, 2) * gamma[1] - gamma[2] / 4


def test_veselova_body_so3_matches_unreduced():
    body = veselova(3, potential, form="so3").as_vector_field()
    unr = veselova(3, potential, form="unreduced")
    rng = np.random.default_rng(3)
    m = 5
    g = rng.normal(size=(m, 3))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    v = rng.normal(size=(m, 3))
    v -= np.sum(v * g, axis=1, keepdims=True) * g
    a = rng.uniform(0.5, 3, size=(m, 3))
    mom = embedded_momentum(g, v, a)
    omega0 = np.cross(v, g)  # Omega = gamma ^ v = omega^ with omega = v x gamma
    t = np.linspace(0, 5, 26)
    rb = nh.integrate(body, np.hstack([omega0, g]), t, params=a, **TOL)
    ru = nh.integrate(unr, embedded_to_unreduced(g, mom, a), t, params=a, **TOL)
    # unreduced states: g (9, row-major), Omega_12, Omega_13, Omega_23
    W12, W13, W23 = ru.y[..., 9], ru.y[..., 10], ru.y[..., 11]
    omega_u = np.stack([-W23, W13, -W12], axis=-1)
    gamma_u = ru.y[..., 6:9]
    assert np.max(np.abs(rb.y[..., :3] - omega_u)) < 1e-9
    assert np.max(np.abs(rb.y[..., 3:] - gamma_u)) < 1e-9
    assert np.max(np.abs(rb.observables["energy"] - ru.observables["energy"])) < 1e-10
    assert np.max(np.abs(rb.y[..., 3:] - g[:, None, :])) > 0.1
    assert np.max(rb.observables["constraint"]) < 1e-20
