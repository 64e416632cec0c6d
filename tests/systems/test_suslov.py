"""The Suslov problem (nhfast.systems.suslov) against the classical equations."""

from __future__ import annotations

import functools

import numpy as np
import sympy as sp

import nhfast as nh
from nhfast.systems import suslov

TOL = {"rtol": 1e-12, "atol": 1e-12}


@functools.cache
def suslov_vf() -> nh.VectorField:
    return suslov().as_vector_field()


def test_suslov_matches_classical_equations_and_conserves_energy():
    """Suslov: I1 w1' = -(I13 w1 + I23 w2) w2, I2 w2' = (I13 w1 + I23 w2) w1, w3 = 0."""
    w1, w2 = sp.symbols("w1 w2", real=True)
    I1, I2, I3, I13, I23 = sp.symbols("I1 I2 I3 I13 I23", real=True)
    k = I13 * w1 + I23 * w2
    classical = nh.VectorField(
        states=[w1, w2], rhs=[-k * w2 / I1, k * w1 / I2], params=[I1, I2, I3, I13, I23]
    )
    rng = np.random.default_rng(7)
    m = 6
    par = np.column_stack(
        [
            rng.uniform(2, 4, m),
            rng.uniform(2, 4, m),
            rng.uniform(2, 4, m),
            rng.uniform(-0.5, 0.5, m),
            rng.uniform(-0.5, 0.5, m),
        ]
    )
    w0 = rng.normal(size=(m, 2))
    t = np.linspace(0, 10, 51)
    res = nh.integrate(suslov_vf(), np.column_stack([w0, np.zeros(m)]), t, params=par, **TOL)
    ref = nh.integrate(classical, w0, t, params=par, **TOL)
    assert np.max(np.abs(res.y[..., :2] - ref.y)) < 1e-9
    assert np.max(np.abs(res.y[..., 2])) < 1e-12
    assert np.max(np.abs(res.y[..., :2] - w0[:, None, :])) > 0.1  # non-trivial motion
    e = res.observables["energy"]
    assert np.max(np.abs(e - e[:, :1]) / e[:, :1]) < 1e-10
    assert np.max(res.observables["constraint"]) < 1e-24
