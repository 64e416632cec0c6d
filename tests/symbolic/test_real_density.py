"""Invariant densities are real on the whole chart: ``exp(sigma)`` with logs of |u|.

``sympy.integrate`` returns potentials such as ``-log(u)/2``; where ``u < 0`` on the chart the
exponential is imaginary although the measure exists (``d log|u| = du / u``).
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from nhfast.symbolic.chaplygin import invariant_measure, real_density
from nhfast.systems import nonholonomic_particle

s = sp.Symbol("s", real=True)
a = sp.Symbol("a", positive=True)


def test_a_log_of_a_negative_polynomial_gives_a_real_density() -> None:
    sigma = -sp.log(s - 2) / 2 + sp.log(a * s**2 + 1)  # s - 2 < 0 on the chart s < 2
    rho = real_density(sigma)
    dlog = sp.lambdify([s, a], sp.diff(sp.log(rho), s))
    dsigma = sp.lambdify([s, a], sp.diff(sigma, s))
    f = sp.lambdify([s, a], rho)
    for sv in (-1.0, 0.0, 1.5, 3.0):
        value = complex(f(sv, 0.7))
        assert value.imag == 0 and value.real > 0
        assert np.isclose(dlog(sv, 0.7), dsigma(sv, 0.7), rtol=1e-14)  # the same measure
    assert np.isclose(f(0.0, 0.7), 1 / np.sqrt(2))
    assert rho == (a * s**2 + 1) / sp.sqrt(sp.Abs(s - 2))  # a known positive u stays u


def test_densities_sympy_knows_positive_are_unchanged() -> None:
    red = nonholonomic_particle(a=0).reduce()
    res = invariant_measure(red)
    assert res.density.equals(sp.exp(res.sigma))
    x, y = red.s
    assert complex(res.density.subs({x: 0.3, y: -2.0})).imag == 0
