"""Prop. 3.26 on actual Chaplygin systems: given the measure, hypothesis (H) <=> phi-simple.

García-Naranjo and Marrero (2020), Section 3.5: hypothesis (H) (from Fedorov-García-Naranjo-
Marrero) is

    C^k_ij = 0 for pairwise distinct i, j, k,   and   C^j_ij = C^k_ik for all j, k != i,

equivalently (H') ``T(Y, Z) = (Theta(Z) Y - Theta(Y) Z) / (r - 1)``; Prop. 3.26: the system is
phi-simple iff (H) holds and ``exp((r - 1) phi) nu`` is invariant (Thm. 3.11: ``Theta = d sigma``,
``sigma = (r - 1) phi``).  So when a basic invariant measure exists (``d Theta = 0``), (H) and
phi-simplicity must agree.  The package's tests of that proposition so far use fitted synthetic
tensors only; here the systems are real:

* the Veselova system with the paper's inertia ``I(Omega) = A Omega A`` (4.5): the closed forms
  (4.12)/(4.14) (``nhfast.systems.veselova``, n = 4, 5, symbolic ``a``) and the same body
  derived from the Lie algebra with rational ``a`` (``veselova(n, form="lie-algebra",
  inertia=...)``, n = 4).  Thm. 4.3:
  (H) holds, ``phi = -1/2 ln (A gamma, gamma)``, ``sigma = (r - 1) phi``;
* the Veselova body with the physical inertia ``J Omega + Omega J`` (n = 4, 5, rational ``J``;
  digest seed004.md Section 4.4, rows V21-V24 and O18): (H) fails (``C^3_12 != 0``), so it is
  not phi-simple, although ``Theta = d sigma`` with ``sigma = -1/2 ln(det K gamma_n^2)``;
* a ``ChaplyginSystem`` built from a metric and a constraint (that of
  ``test_phi_check_hypothesis_h.py``) whose only gyroscopic coefficient is
  ``C^3_12 = s3 / (1 + s3^2)``: ``Theta = 0`` (Liouville measure invariant), (H) fails.

On each system the paper's (H), evaluated here directly from ``C``, the package's symbolic
phi-simplicity (:func:`phi_simple`, :func:`~nhfast.analysis.hamiltonisation.phi_simplicity`) and
its pointwise (H') test (the least-squares residual of :func:`fit_phi_gradient`, which at a point
vanishes iff some covector ``g`` gives ``C^k_ij = delta^k_i g_j - delta^k_j g_i``, i.e. iff (H)
holds there) must all give the paper's answer.  Zero tests are exact (rational points of the
sphere with rational ``gamma_n``).
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
import sympy as sp

from nhfast.analysis.hamiltonisation import (
    fit_phi_gradient,
    gyroscopic_function,
    phi_simplicity,
    phi_simplicity_on_samples,
)
from nhfast.symbolic.chaplygin import (
    invariant_measure,
    phi_simple,
    theta_form,
    verify_phi,
)
from nhfast.symbolic.systems import ChaplyginSystem, ReducedChaplyginSystem
from nhfast.systems import veselova
from nhfast.systems.inertia import INERTIAS

# rational points t -> s = 2 t / (1 + |t|^2) of the open unit ball with rational 1 - |s|^2
_T = [
    [sp.Rational(1, 5), sp.Rational(-2, 7), sp.Rational(1, 3), sp.Rational(1, 4)],
    [sp.Rational(-1, 3), sp.Rational(1, 6), sp.Rational(2, 9), sp.Rational(-1, 8)],
]
A_NUM = [1, 2, 3, 4, 5]  # numeric seed inertia for the symbolic-a systems (distinct: generic)


def _point(s: list[sp.Symbol], which: int) -> dict:
    t = _T[which][: len(s)]
    q = 1 + sum(x**2 for x in t)
    return {si: 2 * ti / q for si, ti in zip(s, t, strict=True)}


def _rational(n: int) -> list[sp.Rational]:
    return [sp.Rational(k + 2, k + 1) for k in range(n)]


@functools.cache
def _system(name: str) -> tuple[ReducedChaplyginSystem, bool]:
    """``(reduced system, does (H) hold according to the paper)``."""
    if name == "veselova4":
        return veselova(4), True
    if name == "veselova5":
        return veselova(5), True
    if name == "seed_lie4":
        A = sp.diag(*_rational(4))
        return veselova(4, form="lie-algebra", inertia=lambda Om: A * Om * A, params=[]), True
    if name == "physical4":
        return veselova(
            4, form="lie-algebra", inertia=_physical_inertia(_rational(4)), params=[]
        ), False
    if name == "physical5":
        return veselova(
            5, form="lie-algebra", inertia=_physical_inertia(_rational(5)), params=[]
        ), False
    if name == "metric_constraint":
        s1, s2, s3, th = sp.symbols("s1 s2 s3 theta", real=True)
        E = sp.Matrix([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, s1, 0, 1]])
        M = sp.Matrix([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1 + s3**2, s3], [0, 0, s3, 1]])
        G = (E.inv().T * M * E.inv()).applyfunc(sp.expand)
        S = ChaplyginSystem(
            [s1, s2, s3, th], G, constraints=sp.Matrix([[0, -s1, 0, 1]]), shape=[s1, s2, s3]
        )
        return S.reduce(), False
    raise KeyError(name)


SYSTEMS = ["veselova4", "veselova5", "seed_lie4", "physical4", "physical5", "metric_constraint"]


def _at(expr: sp.Expr, pt: dict) -> sp.Expr:
    return sp.cancel(sp.sympify(expr).xreplace(pt))


def _h_components(C: sp.NDimArray, r: int) -> tuple[list, list]:
    """The two parts of (H): ``C^k_ij`` for distinct ``i, j, k``; ``C^j_ij - C^k_ik``."""
    distinct = [
        C[i, j, k] for i, j, k in itertools.product(range(r), repeat=3) if len({i, j, k}) == 3
    ]
    same = [
        C[i, j, j] - C[i, k, k]
        for i, j, k in itertools.product(range(r), repeat=3)
        if len({i, j, k}) == 3
    ]
    return distinct, same


def _symbolic_params(red: ReducedChaplyginSystem) -> dict:
    return dict(zip(red.params, A_NUM, strict=False))


def _sigma_expected(name: str, red: ReducedChaplyginSystem) -> sp.Expr:
    """sigma with Theta = d sigma from the papers.

    ``(r - 1) phi`` with ``phi = -1/2 ln(A gamma, gamma)`` (Thm. 4.3) for the seed inertia;
    ``-1/2 ln(det K gamma_n^2)`` (digest seed004.md Sec. 4.4, V24) for the physical one (``det K``
    formed here, a few seconds for n = 4; :func:`test_measure_exists_theta_is_d_sigma` uses
    Jacobi's formula at points instead); 0 for the metric-constraint system (``Theta = 0``).
    """
    s, r = red.s, red.rank
    gn2 = 1 - sum(x**2 for x in s)
    if name.startswith(("veselova", "seed")):
        a = red.params if red.params else _rational(r + 1)
        c = sum(ak * sk**2 for ak, sk in zip(a, s, strict=False)) + a[-1] * gn2
        return -(r - 1) * sp.log(c) / 2
    if name.startswith("physical"):
        return -sp.log(sp.cancel(red.K.det(method="berkowitz")) * gn2) / 2
    return sp.Integer(0)


# ------------------------------------------------------------------------ the measure exists


@pytest.mark.parametrize("name", SYSTEMS)
def test_measure_exists_theta_is_d_sigma(name: str) -> None:
    """The hypothesis of Prop. 3.26: a basic invariant measure, ``Theta = d sigma`` (Thm. 3.11),
    with the papers' ``sigma``, checked exactly at two rational points (``d Theta = 0`` too)."""
    red, _ = _system(name)
    s, r = red.s, red.rank
    th = theta_form(red.C, simplify=False)
    sigma = None if name.startswith("physical") else _sigma_expected(name, red)
    gn2 = 1 - sum(x**2 for x in s)
    for which in (0, 1):
        pt = _point(s, which)
        for i, k in itertools.combinations(range(r), 2):
            assert _at(sp.diff(th[k], s[i]) - sp.diff(th[i], s[k]), pt) == 0, (i, k)
        if name.startswith("physical"):
            # d_i sigma = -1/2 (tr(K^-1 d_i K) + d_i ln gamma_n^2) (Jacobi's formula)
            Kinv = red.K.xreplace(pt).inv()
            for i in range(r):
                dK = red.K.diff(s[i]).xreplace(pt)
                ds = -((Kinv * dK).trace() + _at(sp.diff(gn2, s[i]) / gn2, pt)) / 2
                assert sp.cancel(_at(th[i], pt) - ds) == 0, i
        else:
            for i in range(r):
                assert _at(th[i] - sp.diff(sigma, s[i]), pt) == 0, i


@pytest.mark.parametrize("name", ["veselova4", "seed_lie4", "metric_constraint"])
def test_invariant_measure_finds_sigma(name: str) -> None:
    """The package's :func:`invariant_measure` finds ``sigma`` (up to a constant)."""
    red, _ = _system(name)
    res = invariant_measure(red, simplify=False)
    assert res.exact and res.sigma is not None, res.reason
    sigma = _sigma_expected(name, red)
    for which in (0, 1):
        pt = _point(red.s, which)
        for x in red.s:
            assert _at(sp.diff(res.sigma - sigma, x), pt) == 0


# ---------------------------------------------------------- (H) <=> phi-simple, given it


@pytest.mark.parametrize("name", SYSTEMS)
def test_hypothesis_h_agrees_with_phi_simplicity(name: str) -> None:
    """Prop. 3.26: (H) evaluated from its definition, the symbolic phi-simplicity tests and the
    paper's answer agree; when (H) fails, the package names (H) as the reason."""
    red, expected = _system(name)
    r = red.rank
    distinct, same = _h_components(red.C, r)
    for which in (0, 1):
        pt = _point(red.s, which)
        h_at_pt = all(_at(e, pt) == 0 for e in distinct + same)
        assert h_at_pt is expected, which
    if not expected:
        # the distinct-index part fails: C^3_12 != 0 (V21 / O18)
        assert _at(red.C[0, 1, 2], _point(red.s, 0)) != 0
    ps = phi_simple(red, simplify=False)
    assert ps.is_phi_simple is expected, ps.reason
    if not expected:
        assert "hypothesis (H) fails" in ps.reason
    assert phi_simplicity(red).holds is expected


@pytest.mark.parametrize("name", SYSTEMS)
def test_pointwise_h_test_agrees(name: str) -> None:
    """The package's numeric (H') test at sample points (:func:`fit_phi_gradient`,
    :func:`phi_simplicity_on_samples`) agrees with the symbolic verdict.

    Where (H) holds, the least-squares ``g`` reproduces ``C`` to rounding (``1e-12`` relative to
    ``1 + max |C|``, double precision on O(1) data) and equals ``Theta / (r - 1)`` ((H')).  Where
    it fails, the residual is at least ``max |C^k_ij|`` over distinct ``i, j, k`` (no ``g``
    reaches those components), and above O18's ``1e-4``.
    """
    red, expected = _system(name)
    r = red.rank
    par = A_NUM[: len(red.params)] if red.params else None
    pts = []
    for which in (0, 1):
        pt = _point(red.s, which)
        pts.append([float(pt[x]) for x in red.s])
    pts = np.array(pts)
    C = gyroscopic_function(red)(pts, par)
    g, resid = fit_phi_gradient(C)
    scale = 1.0 + np.abs(C).max()
    th_f = sp.lambdify([*red.s, *red.params], theta_form(red.C, simplify=False))
    theta = np.array([th_f(*row, *(par or [])) for row in pts], dtype=float)
    if expected:
        assert resid.max() < 1e-12 * scale
        np.testing.assert_allclose(g, theta / (r - 1), atol=1e-12 * scale)
    else:
        distinct = np.array(
            [
                max(abs(C[m, i, j, k]) for i, j, k in itertools.permutations(range(r), 3))
                for m in range(len(pts))
            ]
        )
        assert np.all(resid >= distinct * (1 - 1e-12))
        assert np.all(resid > 1e-4)
    chk = phi_simplicity_on_samples(gyroscopic_function(red), pts, par)
    assert chk.holds is expected, chk.statement


@pytest.mark.parametrize("name", ["veselova4", "seed_lie4", "physical4", "metric_constraint"])
def test_phi_from_the_measure(name: str) -> None:
    """Prop. 3.26 constructively: with ``Theta = d sigma``, ``phi = sigma / (r - 1)`` is the
    phi of the phi-simple identity iff (H) holds.  ``verify_phi`` accepts it (and ``phi_simple``
    finds it up to a constant) on the seed inertia; it refuses it where (H) fails."""
    red, expected = _system(name)
    r = red.rank
    phi = _sigma_expected(name, red) / (r - 1)
    if expected:
        verify_phi(red, phi)
        found = phi_simple(red, simplify=False).phi
        for which in (0, 1):
            pt = _point(red.s, which)
            assert all(_at(sp.diff(found - phi, x), pt) == 0 for x in red.s)
    else:
        with pytest.raises(ValueError, match="not phi-simple"):
            verify_phi(red, phi)


def _physical_inertia(j):
    """``Om -> J Om + Om J`` with ``J = diag(j)`` (the registry's formula, explicit matrices)."""
    J = sp.diag(*j)
    return lambda Om: INERTIAS["physical"].operator(Om, J)
