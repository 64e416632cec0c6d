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


def test_physical_veselova_n5_density_is_real_and_preserved() -> None:
    """Issue 32, item 2: the Veselova body with the physical inertia at n = 5 (rational j).

    The potential of Theta is ``-1/2 log P`` for a polynomial ``P`` that SymPy may write with
    either sign; written as ``log(-P)`` with ``-P < 0`` on the whole chart the old density was
    imaginary.  The density is real and finite at points of the chart, the same for both signs,
    and ``check_measure`` finds it preserved on a short run (the Liouville measure is not)."""
    import numpy as np

    from nhfast.analysis.measure import check_measure
    from nhfast.systems import veselova
    from nhfast.systems.inertia import INERTIAS

    n = 5
    J = sp.diag(*[sp.Rational(k + 2, k + 1) for k in range(n)])
    red = veselova(
        n, form="lie-algebra", inertia=lambda Om: INERTIAS["physical"].operator(Om, J), params=[]
    )
    res = invariant_measure(red)
    assert res.exact and res.sigma is not None
    (lg,) = res.sigma.atoms(sp.log)
    P = lg.args[0]
    assert sp.simplify(res.sigma / lg) == sp.Rational(-1, 2)
    rng = np.random.default_rng(0)
    pts = rng.uniform(-0.45, 0.45, size=(40, n - 1))  # |s| < 1: the hemisphere chart
    values = sp.lambdify([red.s], P)
    assert all(values(p) > 0 for p in pts)  # so -P < 0 on all of them
    negative = real_density(-sp.log(-P) / 2)  # the same potential, a negative argument
    for rho in (res.density, negative):
        f = sp.lambdify([red.s], rho)
        out = np.array([complex(f(p)) for p in pts])
        assert np.all(out.imag == 0) and np.all(np.isfinite(out.real)) and np.all(out.real > 0)
    fa, fb = sp.lambdify([red.s], res.density), sp.lambdify([red.s], negative)
    assert np.allclose([fa(p) for p in pts], [fb(p) for p in pts], rtol=1e-14, atol=0)
    x0 = np.hstack([rng.uniform(-0.3, 0.3, size=(4, n - 1)), rng.normal(size=(4, n - 1))])
    assert check_measure(red, res, x0, t=0.5, n_jacobian=2).holds is True
    assert check_measure(red, sp.Integer(1), x0, t=0.5, n_jacobian=0).holds is False
