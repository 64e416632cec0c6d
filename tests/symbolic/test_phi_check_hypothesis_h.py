"""The distinct-index part of hypothesis (H) in the check of a user's phi.

García-Naranjo and Marrero (2020), Definition 3.19 / (3.39): the system is phi-simple with phi iff
``C^k_ij = delta^k_i d_j phi - delta^k_j d_i phi``.  For pairwise distinct ``i, j, k`` the
right-hand side is 0, so the identity contains the first half of hypothesis (H) (Section 3.5,
before Prop. 3.26): ``C^k_ij = 0`` for distinct ``i, j, k``.  Every example of the paper (the
particle, the sleigh, Veselova) has ``C^k_ij = 0`` for distinct indices, so a check that dropped or
mangled this part would pass every test built on them.  The systems here have exactly one
non-zero gyroscopic coefficient, ``C^3_12 = -C^3_21``; everything else, in particular ``C^i_ij``,
vanishes.  With ``phi = 0`` (or any constant) every non-distinct residual is then zero and a
refusal can only come from the distinct-index part.

The genuine Chaplygin system (metric and constraint, reduced by the package) is
``Q = R^3 x R`` with coordinates ``(s1, s2, s3, theta)``, ``G = R`` acting on ``theta``, constraint
``thetadot = s1 s2dot`` and the metric whose Gram matrix in the frame
``(hor d1, hor d2, hor d3, d_theta) = (d1, d2 + s1 d_theta, d3, d_theta)`` is the identity except
for ``<<hor d3, hor d3>> = 1 + m^2`` and ``<<hor d3, d_theta>> = m`` (``m = m(s)``; the 2 x 2 block
has determinant 1, so the metric is positive definite for every ``m``).  By hand: the only
non-zero bracket of horizontal lifts is ``[hor d1, hor d2] = d_theta``; the orthogonal projection
of ``d_theta`` onto ``D`` is ``c hor d3`` with ``<<d_theta - c hor d3, hor d3>> = 0``, i.e.
``c = m / (1 + m^2)``; so by (3.6) ``C^3_12 = m / (1 + m^2)`` and every other ``C^k_ij`` with
``i < j`` is 0, and ``K = diag(1, 1, 1 + m^2)``.
"""

from __future__ import annotations

import itertools

import pytest
import sympy as sp

from nhfast.symbolic._util import is_zero
from nhfast.symbolic.chaplygin import (
    hamiltonise,
    invariant_measure,
    phi_simple,
    phi_simple_residuals,
    verify_phi,
)
from nhfast.symbolic.systems import ChaplyginSystem, ReducedChaplyginSystem
from nhfast.symbolic.time_change import time_changed_system

S1, S2, S3, TH = sp.symbols("s1 s2 s3 theta", real=True)
KAPPA = sp.Symbol("kappa", positive=True)

# the coupling m(s) of <<hor d3, d_theta>>: polynomial, with a parameter, and transcendental (the
# residual sin(s1)/(1 + sin(s1)^2) is not reduced by expand/cancel, so verify_phi decides it at
# rational points)
COUPLINGS = {
    "poly": (S3, []),
    "param": (KAPPA * S1 * S3, [KAPPA]),
    "trig": (sp.sin(S1), []),
}


def _ijk(i: int, j: int, k: int) -> str:
    return rf"\(i, j, k\) = \({i}, {j}, {k}\)"


def _chaplygin(m: sp.Expr, params: list[sp.Symbol]) -> ChaplyginSystem:
    """The system of the module docstring: metric ``G = E^{-T} M E^{-1}`` (``E`` the frame)."""
    E = sp.Matrix([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, S1, 0, 1]])
    M = sp.Matrix([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1 + m**2, m], [0, 0, m, 1]])
    Ei = E.inv()
    G = (Ei.T * M * Ei).applyfunc(sp.expand)
    W = sp.Matrix([[0, -S1, 0, 1]])  # thetadot - s1 s2dot = 0
    return ChaplyginSystem([S1, S2, S3, TH], G, constraints=W, shape=[S1, S2, S3], params=params)


def _only_c312(value: sp.Expr, params: list[sp.Symbol] = ()) -> ReducedChaplyginSystem:
    """Reduced data (K = identity) whose only non-zero coefficients are C^3_12 = -C^3_21."""
    C = sp.MutableDenseNDimArray.zeros(3, 3, 3)
    C[0, 1, 2] = value
    C[1, 0, 2] = -value
    return ReducedChaplyginSystem(s=[S1, S2, S3], K=sp.eye(3), C=C, params=list(params))


def _phi_simple_plus_c312(phi: sp.Expr, bump: sp.Expr) -> ReducedChaplyginSystem:
    """C^k_ij = delta^k_i d_j phi - delta^k_j d_i phi (Def. 3.19) plus ``bump`` on C^3_12."""
    s = [S1, S2, S3]
    g = [sp.diff(phi, x) for x in s]
    C = sp.MutableDenseNDimArray.zeros(3, 3, 3)
    for i, j, k in itertools.product(range(3), repeat=3):
        C[i, j, k] = (g[j] if k == i else 0) - (g[i] if k == j else 0)
    C[0, 1, 2] += bump
    C[1, 0, 2] -= bump
    return ReducedChaplyginSystem(s=s, K=sp.eye(3), C=C)


# ---------------------------------------------------------------------- the oracle system


@pytest.mark.parametrize("which", sorted(COUPLINGS))
def test_chaplygin_system_has_only_c312(which: str) -> None:
    """The package's reduction (3.6) of the system gives the hand-computed ``C`` and ``K``
    (module docstring), so the tests below really have a single distinct-index coefficient."""
    m, params = COUPLINGS[which]
    red = _chaplygin(m, params).reduce()
    assert is_zero(red.K[2, 2] - (1 + m**2))
    assert all(is_zero(red.K[i, j] - sp.eye(3)[i, j]) for i, j in [(0, 0), (1, 1), (0, 1)])
    assert all(is_zero(red.K[i, 2]) for i in (0, 1))
    expected = m / (1 + m**2)
    for i, j, k in itertools.product(range(3), repeat=3):
        want = expected if (i, j, k) == (0, 1, 2) else -expected if (i, j, k) == (1, 0, 2) else 0
        assert is_zero(red.C[i, j, k] - want), (i, j, k)
    # Theta_i = C^j_ji = 0 (3.27): d Theta = 0, the Liouville measure is invariant (Thm 3.11) --
    # the system has the measure of Prop. 3.26 but is not phi-simple, because (H) fails
    meas = invariant_measure(red)
    assert meas.exact and meas.sigma is not None and is_zero(sp.diff(meas.sigma, S1))


# ------------------------------------------------------------------------ refused: (H) alone


@pytest.mark.parametrize("which", sorted(COUPLINGS))
@pytest.mark.parametrize("phi", [sp.Integer(0), sp.Integer(5)])
def test_user_phi_refused_by_distinct_index_part(which: str, phi: sp.Expr) -> None:
    """``hamiltonise(system, phi=...)``, ``time_changed_system(system, phi)`` and ``verify_phi``
    refuse a constant phi, naming ``(i, j, k) = (0, 1, 2)`` and the residual ``C^3_12``.

    With ``d phi = 0`` and ``C^i_ij = 0`` every residual with ``k in {i, j}`` vanishes, so only the
    distinct-index part of (H) can refuse (Definition 3.19, hypothesis (H) of Prop. 3.26).
    """
    m, params = COUPLINGS[which]
    system = _chaplygin(m, params)
    red = system.reduce()
    c312 = m / (1 + m**2)
    res = phi_simple_residuals(red, phi)
    assert set(res) == {(i, j, k) for i in range(3) for j in range(i + 1, 3) for k in range(3)}
    for key, val in res.items():
        if key == (0, 1, 2):
            assert is_zero(val - c312)  # residual C^3_12 - 0, with its sign
        else:
            assert is_zero(val), key
    shown = str(sp.factor(sp.cancel(c312)))
    for call in (
        lambda: verify_phi(red, phi),
        lambda: hamiltonise(system, phi=phi),
        lambda: hamiltonise(red, phi=phi, simplify=False),
        lambda: time_changed_system(system, phi),
    ):
        with pytest.raises(ValueError, match=_ijk(0, 1, 2)) as exc:
            call()
        msg = str(exc.value)
        assert "not phi-simple" in msg and "s^k = s3" in msg
        assert f"= {shown} != 0" in msg  # the residual printed is +C^3_12


def test_phi_simple_names_the_distinct_index_failure() -> None:
    """``phi_simple`` (no phi given) reports hypothesis (H) failing at distinct indices at
    ``(0, 1, 2)``: the candidate gradient ``(C^i_ij)_j`` is 0 there, and (H) is what fails."""
    red = _chaplygin(S3, []).reduce()
    res = phi_simple(red)
    assert not res.is_phi_simple
    assert res.gradient is not None and all(is_zero(g) for g in res.gradient)
    assert "hypothesis (H) fails: C^k_ij != 0 for distinct i, j, k" in res.reason
    assert "(i, j, k) = (0, 1, 2)" in res.reason
    assert "depends on j" not in res.reason
    with pytest.raises(ValueError, match="distinct i, j, k"):
        hamiltonise(red)


@pytest.mark.parametrize("bump", [S2 * S3 + 1, sp.cos(S1) / 3])
def test_correct_gradient_part_but_distinct_bump_is_refused(bump: sp.Expr) -> None:
    """Reduced data phi-simple with ``phi0`` (Def. 3.19) plus a bump on ``C^3_12``: ``phi0``
    satisfies every residual with ``k in {i, j}``, so it is refused by (H) alone, with the
    residual equal to the bump; without the bump ``phi0`` is accepted (control)."""
    phi0 = -sp.log(1 + S1**2 + 2 * S2**2 + 3 * S3**2) / 2
    red = _phi_simple_plus_c312(phi0, bump)
    res = phi_simple_residuals(red, phi0)
    assert is_zero(res[(0, 1, 2)] - bump)
    assert all(is_zero(v) for key, v in res.items() if key != (0, 1, 2))
    with pytest.raises(ValueError, match=_ijk(0, 1, 2)):
        verify_phi(red, phi0)
    with pytest.raises(ValueError, match=_ijk(0, 1, 2)):
        hamiltonise(red, phi=phi0, simplify=False)
    ps = phi_simple(red)
    assert not ps.is_phi_simple and "distinct i, j, k" in ps.reason and "(0, 1, 2)" in ps.reason
    # control: the same data without the bump is phi-simple with phi0
    clean = _phi_simple_plus_c312(phi0, sp.Integer(0))
    assert verify_phi(clean, phi0) == "symbolically"
    assert phi_simple(clean).is_phi_simple


@pytest.mark.parametrize("value", [S3, -S1 * S2 + 2, sp.exp(S1) - 1])
def test_synthetic_reduced_data_with_only_c312_is_refused(value: sp.Expr) -> None:
    """Reduced data with only ``C^3_12 = -C^3_21 != 0`` (either sign, transcendental too): any
    constant phi is refused at ``(0, 1, 2)`` and nowhere else."""
    red = _only_c312(value)
    for phi in (sp.Integer(0), sp.Rational(-7, 3)):
        with pytest.raises(ValueError, match=_ijk(0, 1, 2)):
            verify_phi(red, phi)
        with pytest.raises(ValueError, match=_ijk(0, 1, 2)):
            time_changed_system(red, phi)


# ------------------------------------------------------------------------------ controls


def test_zero_coupling_is_accepted() -> None:
    """Control: with ``m = 0`` the tensor vanishes (``P d_theta = 0``), ``phi = 0`` verifies and
    Hamiltonises; so the refusals above are caused by ``C^3_12`` alone."""
    system = _chaplygin(sp.Integer(0), [])
    red = system.reduce()
    assert all(is_zero(c) for c in sp.flatten(red.C))
    assert verify_phi(red, 0) == "symbolically"
    ham = hamiltonise(system, phi=0)
    assert is_zero(ham.time_factor - 1)
    assert time_changed_system(system, sp.Integer(0)).rank == 3
    assert verify_phi(_only_c312(sp.Integer(0)), 0) == "symbolically"
