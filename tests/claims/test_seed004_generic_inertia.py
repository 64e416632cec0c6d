"""Seed 004, Section 4.4 of the digest (generic inertia, claim 004-45 / O18, V21-V24): the Veselova
body with the physical inertia ``J Omega + Omega J`` (and another inertia not of the form (4.5)) is
not phi-simple for ``n >= 4``, yet ``Theta = d sigma`` with ``sigma = -1/2 ln(det K gamma_n^2)``.

The reduced data come from ``veselova(n, form="lie-algebra", inertia=...)`` (Lie-algebra data:
lifts (4.11), bracket (B.1), (4.15)); they are checked here against Lemma 4.5
(``[X_i, X_j] = u_i ^ u_j``, inertia-free) with ``K`` and ``B_ijl = (I(u_i ^ u_j), X_l)_kappa``
formed independently, and ``det K`` by SymPy.
"""

from __future__ import annotations

import functools
import itertools

import pytest
import sympy as sp

from nhfast.symbolic.chaplygin import invariant_measure, phi_simple, theta_form, verify_phi
from nhfast.systems import veselova
from nhfast.systems.inertia import INERTIAS
from nhfast.systems.veselova_body import formulas as F

# a rational point of the open upper hemisphere with rational gamma_n (s = 2t/(1+|t|^2))
_T = [sp.Rational(1, 5), sp.Rational(-2, 7), sp.Rational(1, 3), sp.Rational(1, 4)]


def _sphere_point(s: list[sp.Symbol], shift: int = 0) -> dict:
    t = [x + sp.Rational(shift, 11) for x in _T[: len(s)]]
    q = 1 + sum(x**2 for x in t)
    return {si: 2 * ti / q for si, ti in zip(s, t, strict=True)}


def _lemma_4_5_data(n: int, inertia):  # noqa: ANN001, ANN202
    """``X_k``, ``u_k`` and the inertia-free bracket of Lemma 4.5, in the chart (4.9)."""
    s = F.chart_symbols(n)
    g = sp.Matrix(F.hemisphere_gamma(s))
    e = sp.eye(n)
    u = [e[:, i] - g[i] / g[-1] * e[:, n - 1] for i in range(n - 1)]
    X = [F.wedge(g, ui) for ui in u]
    return s, X, u


def _check_against_lemma_4_5(red, n: int, inertia) -> None:  # noqa: ANN001
    """``K_kl = (I X_k, X_l)_kappa`` and ``C K = B`` with ``B_ijl = (I(u_i ^ u_j), X_l)_kappa``
    (Lemma 4.5), exactly at two rational points of the sphere (gamma_n rational)."""
    s, X, u = _lemma_4_5_data(n, inertia)
    r = n - 1
    for shift in (0, 1):
        pt = _sphere_point(s, shift)
        Xp = [x.xreplace(pt) for x in X]
        up = [x.xreplace(pt) for x in u]
        Kp = red.K.xreplace(pt)
        Cp = red.C.applyfunc(lambda e: sp.sympify(e).xreplace(pt))  # noqa: B023
        for k, m in itertools.product(range(r), repeat=2):
            assert sp.cancel(Kp[k, m] - F.killing(inertia(Xp[k]), Xp[m])) == 0, (k, m)
        for i, j, m in itertools.product(range(r), repeat=3):
            b = F.killing(inertia(F.wedge(up[i], up[j])), Xp[m])
            ck = sum(Cp[i, j, k] * Kp[k, m] for k in range(r))
            assert sp.cancel(ck - b) == 0, (i, j, m)


def _log_det_sigma(red) -> sp.Expr:  # noqa: ANN001
    """``sigma = -1/2 ln(det K gamma_n^2)`` (digest Section 4.4), det K formed here."""
    gn2 = 1 - sum(x**2 for x in red.s)
    return -sp.log(sp.cancel(red.K.det(method="berkowitz")) * gn2) / 2


@functools.cache
def _physical(n: int, rational: bool) -> tuple:
    j = (
        [sp.Rational(k + 2, k + 1) for k in range(n)]
        if rational
        else list(sp.symbols(f"j1:{n + 1}", positive=True))
    )
    return veselova(
        n, form="lie-algebra", inertia=_physical_inertia(j), params=[] if rational else j
    ), j


def _physical_n4_checks(rational: bool) -> None:
    red, j = _physical(4, rational=rational)
    J = sp.diag(*j)
    _check_against_lemma_4_5(red, 4, lambda Om: J * Om + Om * J)
    th = theta_form(red.C, simplify=False)
    s = red.s
    # d Theta = 0 and Theta = d sigma, sigma = -1/2 ln(det K gamma_n^2), exactly in s
    for i, k in itertools.combinations(range(3), 2):
        assert sp.cancel(sp.diff(th[k], s[i]) - sp.diff(th[i], s[k])) == 0
    det = sp.cancel(red.K.det(method="berkowitz"))
    gn2 = 1 - sum(x**2 for x in s)
    for i in range(3):
        assert sp.cancel(th[i] + sp.diff(det * gn2, s[i]) / (2 * det * gn2)) == 0
        # control: sigma without the factor gamma_n^2 fails
        assert sp.cancel(th[i] + sp.diff(det, s[i]) / (2 * det)) != 0
    # (H) fails: C^3_12 != 0 (k not in {i, j}) at a rational point
    assert sp.cancel(red.C[0, 1, 2].xreplace(_sphere_point(s))) != 0


def test_004_45_physical_n4_theta_is_d_sigma() -> None:
    # rational j, exact identities in s (the symbolic-j version is slow-marked below)
    _physical_n4_checks(rational=True)


@pytest.mark.slow
def test_004_45_physical_n4_symbolic_j_theta_is_d_sigma() -> None:
    _physical_n4_checks(rational=False)


def test_004_45_physical_n4_not_phi_simple_seed_inertia_is() -> None:
    red, _ = _physical(4, rational=True)
    res = phi_simple(red)
    assert not res.is_phi_simple
    assert "(H)" in res.reason and "distinct" in res.reason
    # the same body with the seed inertia (4.5) is phi-simple with phi = -1/2 ln c (Thm 4.3)
    a = [sp.Rational(k + 2, k + 1) for k in range(4)]
    A = sp.diag(*a)
    seed = veselova(4, form="lie-algebra", inertia=lambda Om: A * Om * A, params=[])
    c = F.inertia_quadratic(a, F.hemisphere_gamma(seed.s))
    verify_phi(seed, F.phi(c))
    with pytest.raises(ValueError, match="not phi-simple"):
        verify_phi(red, F.phi(F.inertia_quadratic(a, F.hemisphere_gamma(red.s))))


def test_004_45_pairs_inertia_n4_theta_is_d_sigma() -> None:
    # I(Omega)_ab = H_ab Omega_ab with a symmetric positive rational H (diagonal in e_a ^ e_b,
    # not of either special form): Theta = d sigma still holds, (H) fails
    n = 4
    H = sp.Matrix(n, n, lambda a, b: sp.Rational(3 + (a * 5 + b * 5 + a * b) % 7, 2 + (a + b) % 3))
    inertia = lambda Om: Om.multiply_elementwise(H)  # noqa: E731
    red = veselova(n, form="lie-algebra", inertia=inertia, params=[])
    _check_against_lemma_4_5(red, n, inertia)
    th, s = theta_form(red.C, simplify=False), red.s
    sigma = _log_det_sigma(red)
    for i in range(n - 1):
        assert sp.cancel(th[i] - sp.diff(sigma, s[i])) == 0
    assert sp.cancel(red.C[0, 1, 2].xreplace(_sphere_point(s))) != 0


def test_004_45_physical_n5_rational_j_at_a_point() -> None:
    # n = 5 with rational j, exact values at a rational sphere point (~12 s)
    red, j = _physical(5, rational=True)
    J = sp.diag(*j)
    pt = _sphere_point(red.s)
    _check_against_lemma_4_5(red, 5, lambda Om: J * Om + Om * J)
    th, s = theta_form(red.C, simplify=False), red.s
    # d_i sigma = -1/2 (tr(K^-1 d_i K) + d_i ln gamma_n^2) (Jacobi's formula), at the point
    Kp = red.K.xreplace(pt)
    Kinv = Kp.inv()
    gn2 = 1 - sum(x**2 for x in s)
    for i in range(4):
        dK = red.K.diff(s[i]).xreplace(pt)
        dsigma = -((Kinv * dK).trace() + (sp.diff(gn2, s[i]) / gn2).xreplace(pt)) / 2
        assert sp.cancel(th[i].xreplace(pt) - dsigma) == 0
        assert sp.cancel(th[i].xreplace(pt) + (Kinv * dK).trace() / 2) != 0  # without gamma_n^2
    assert sp.cancel(red.C[0, 1, 2].xreplace(pt)) != 0
    for i, k in itertools.combinations(range(4), 2):
        assert sp.cancel((sp.diff(th[k], s[i]) - sp.diff(th[i], s[k])).xreplace(pt)) == 0


@pytest.mark.slow
def test_004_45_physical_n5_symbolic_theta_is_d_sigma() -> None:
    red, j = _physical(5, rational=False)
    th, s = theta_form(red.C, simplify=False), red.s
    sigma = _log_det_sigma(red)
    for i in range(4):
        assert sp.cancel(th[i] - sp.diff(sigma, s[i])) == 0


@pytest.mark.slow
def test_004_45_physical_n4_invariant_measure_public_call() -> None:
    red, _ = _physical(4, rational=True)
    m = invariant_measure(red)
    assert m.exact
    assert m.sigma is not None
    sigma = _log_det_sigma(red)
    for x in red.s:
        assert sp.cancel(sp.diff(m.sigma - sigma, x)) == 0


def _physical_inertia(j):
    """``Om -> J Om + Om J`` with ``J = diag(j)`` (the registry's formula, explicit matrices)."""
    J = sp.diag(*j)
    return lambda Om: INERTIAS["physical"].operator(Om, J)
