"""Unicycle (seed 000 Ex. 6.1) and two-wheeled carriage (seed 001 Sec. 7.2, seed 000 Ex. 6.2):
the seeds' nonholonomic claims checked exactly (every difference simplifies to zero).

Seed 001 has no equation numbers; its formulas are cited by section and by the digest's oracle
labels (``/work/shared/spec/seed001.md``, O-7.2a/b).

Misprint guarded here: seed 001, Section 7.2 prints ``[X_1, X_2] = +(R^2/2c)((sin theta) X_3 -
(cos theta) X_4)`` and, carrying that sign, ``Gamma^1 = +K/(P^2 - Q^2) (v1 - v2)(Q v1 - P v2)``,
``Gamma^2 = +K/(P^2 - Q^2) (v1 - v2)(P v1 - Q v2)`` and ``H = -(m R^2 + 2 J_2)/(2R)``.  The
mathematics gives the opposite sign in all four; the printed equations of motion contradict
seed 000 (6.2a).
"""

from __future__ import annotations

import functools

import pytest
import sympy as sp

from nhfast.symbolic import frames as fr
from nhfast.symbolic._util import generic_rank, is_zero, matrix_is_zero
from nhfast.symbolic.chaplygin import gyroscopic_tensor_vanishes
from nhfast.symbolic.equations import (
    EquationsOfMotion,
    almost_poisson_equations,
    chaplygin_equations,
    hamel_equations,
)
from nhfast.symbolic.systems import ChaplyginSystem, NonholonomicSystem
from nhfast.systems.examples import vertical_rolling_disk
from nhfast.systems.wheeled import carriage_constants, two_wheeled_carriage, unicycle

U_FN = sp.Function("U")


def _rational_zero(expr: sp.Expr) -> bool:
    """Exact zero test for rational functions of the variables and of ``cos(a)``, ``sin(a)``:
    ``cancel``, then the numerator modulo ``sin(a)^2 + cos(a)^2 - 1``."""
    expr = sp.sympify(expr)
    angles = {f.args[0] for f in expr.atoms(sp.sin, sp.cos)}
    if not angles:
        return sp.cancel(sp.together(expr)) == 0
    pairs = [(sp.Dummy("sn"), sp.Dummy("cs"), a) for a in angles]
    expr = expr.xreplace({f(a): d for sn, cs, a in pairs for f, d in ((sp.sin, sn), (sp.cos, cs))})
    num = sp.expand(sp.fraction(sp.cancel(sp.together(expr)))[0])
    for sn, cs, _ in pairs:
        num = sp.expand(sp.rem(num, sn**2 + cs**2 - 1, sn))
    return num == 0


def _sym(system: NonholonomicSystem, name: str) -> sp.Symbol:
    return {str(s): s for s in [*system.q, *system.params]}[name]


def _energy_rate(eq: EquationsOfMotion) -> sp.Expr:
    """``dE/dt`` along the equations (explicit equations only)."""
    assert not eq.solves
    return sum(
        (sp.diff(eq.energy, x) * f for x, f in zip(eq.states, eq.rhs, strict=True)), sp.Integer(0)
    )


# --------------------------------------------------------------------------- unicycle ----
@functools.cache
def _unicycle(as_chaplygin: bool, potential: bool) -> NonholonomicSystem:
    pot = (lambda x, y, ph, th: U_FN(ph, th)) if potential else None
    return unicycle(potential=pot, as_chaplygin=as_chaplygin)


@pytest.mark.parametrize("as_chaplygin", [True, False])
def test_unicycle_constraints_and_frame(as_chaplygin: bool) -> None:
    """Seed 000 Ex. 6.1: two independent constraints ``alpha = R thetadot``, ``beta = 0``; the
    frame spans their kernel; D is not integrable."""
    S = _unicycle(as_chaplygin, False)
    W = S.constraint_forms
    assert W.shape == (2, 4) and generic_rank(W, S.q + S.params) == 2
    assert S.rank == 2 and matrix_is_zero(W * S.frame)
    (bracket,) = fr.frame_brackets(S.frame, S.q).values()
    assert not matrix_is_zero(W * bracket)  # [d_1, d_2] leaves D


def test_unicycle_brackets_O_U1() -> None:
    """``[e1, e2] = 0``, ``[d/dphi, e1] = e2``, ``[d/dphi, e2] = -e1``, ``d/dtheta`` central, and
    the seed's frame of D is ``d_1 = e1 + (1/R) d/dtheta``, ``d_2 = d/dphi`` with
    ``[d_1, d_2] = -e2``."""
    S = _unicycle(False, False)
    x, y, ph, th = S.q
    R = _sym(S, "R")
    e1 = sp.Matrix([sp.cos(ph), sp.sin(ph), 0, 0])
    e2 = sp.Matrix([-sp.sin(ph), sp.cos(ph), 0, 0])
    dph, dth = sp.Matrix([0, 0, 1, 0]), sp.Matrix([0, 0, 0, 1])
    br = functools.partial(fr.lie_bracket, q=S.q)
    assert matrix_is_zero(br(e1, e2))
    assert matrix_is_zero(br(dph, e1) - e2)
    assert matrix_is_zero(br(dph, e2) + e1)
    assert all(matrix_is_zero(br(dth, f)) for f in (e1, e2, dph))
    assert matrix_is_zero(S.frame - sp.Matrix.hstack(e1 + dth / R, dph))
    assert matrix_is_zero(br(S.frame[:, 0], S.frame[:, 1]) + e2)


def test_unicycle_equations_O_U2() -> None:
    """Seed 000 (5.8) for Ex. 6.1 with ``U(phi, theta)``: ``(m R^2 + I) alphadot = -R U_theta``,
    ``J phiddot = -U_phi``; ``U = 0``: ``alpha`` and ``phidot`` are constants of motion."""
    for pot in (True, False):
        S = _unicycle(False, pot)
        m, R, I, J = (_sym(S, k) for k in ("m", "R", "I", "J"))  # noqa: E741
        ph, th = S.q[2:]
        eq = hamel_equations(S)
        U = U_FN(ph, th) if pot else sp.Integer(0)
        expect = [-R * sp.diff(U, th) / (m * R**2 + I), -sp.diff(U, ph) / J]
        assert all(is_zero(a - b) for a, b in zip(eq.rhs[4:], expect, strict=True))
        x, y = S.q[:2]
        alpha, phidot = eq.states[4:]
        qdot = [alpha * sp.cos(ph), alpha * sp.sin(ph), phidot, alpha / R]
        assert all(is_zero(a - b) for a, b in zip(eq.rhs[:4], qdot, strict=True))


def test_unicycle_chaplygin_form() -> None:
    """The unicycle is the vertical rolling disk (seed 004 (3.7)-(3.8), inertias renamed):
    horizontal lifts ``d/dphi``, ``d/dtheta + R cos(phi) d/dx + R sin(phi) d/dy``, vanishing
    gyroscopic tensor, and ``thetaddot = -U_theta/(m R^2 + I)``, ``phiddot = -U_phi/J``."""
    S = _unicycle(True, True)
    assert isinstance(S, ChaplyginSystem) and S.shape == S.q[2:]
    m, R, I, J = (_sym(S, k) for k in ("m", "R", "I", "J"))  # noqa: E741
    x, y, ph, th = S.q
    assert matrix_is_zero(
        S.horizontal_lifts() - sp.Matrix([[0, R * sp.cos(ph)], [0, R * sp.sin(ph)], [1, 0], [0, 1]])
    )
    red = S.reduce()
    assert matrix_is_zero(red.K - sp.diag(J, m * R**2 + I))
    assert gyroscopic_tensor_vanishes(red.C)
    eq = hamel_equations(S)
    expect = [-sp.diff(U_FN(ph, th), ph) / J, -sp.diff(U_FN(ph, th), th) / (m * R**2 + I)]
    assert all(is_zero(a - b) for a, b in zip(eq.rhs[4:], expect, strict=True))
    # same metric and distribution as the library's disk after renaming I <-> J
    D = vertical_rolling_disk()
    ren = {_sym(D, "I"): J, _sym(D, "J"): I}
    assert matrix_is_zero(D.metric.xreplace(ren) - S.metric)
    assert matrix_is_zero(D.frame.xreplace({_sym(D, "R"): R}) - S.frame)


@pytest.mark.parametrize("as_chaplygin", [True, False])
def test_unicycle_energy_conserved_exactly(as_chaplygin: bool) -> None:
    """``dE/dt = 0`` identically for the Hamel and almost-Poisson (and reduced) forms."""
    S = _unicycle(as_chaplygin, True)
    eqs = [hamel_equations(S), almost_poisson_equations(S)]
    if as_chaplygin:
        eqs.append(chaplygin_equations(S))
    for eq in eqs:
        assert is_zero(_energy_rate(eq)), eq.kind


# -------------------------------------------------------------------------- carriage ----
@functools.cache
def _carriage(as_chaplygin: bool = True, l_value: object = None) -> NonholonomicSystem:
    return two_wheeled_carriage(as_chaplygin=as_chaplygin, l=l_value)


@functools.cache
def _carriage_hamel(as_chaplygin: bool = True) -> EquationsOfMotion:
    return hamel_equations(_carriage(as_chaplygin), simplify=sp.cancel)


def _fibre(exprs: list[sp.Expr]) -> list[sp.Expr]:
    """Velocity/momentum equations at ``theta = 0``: they are SE(2)-invariant, hence do not
    depend on ``theta`` (checked numerically in tests/test_examples_numeric.py), and the
    substitution removes the unsimplified ``sin^2 + cos^2`` of the ``cancel``-only route."""
    th = _carriage().q[4]
    return [sp.sympify(e).subs(th, 0) for e in exprs]


def _P(name: str, S: NonholonomicSystem | None = None) -> sp.Expr:
    return carriage_constants(S or _carriage())[name]


def test_carriage_constraints_frame_and_lagrangian() -> None:
    """Seed 001 Sec. 7.2: three independent constraints, the printed ``X_1, X_2`` span D, and
    ``L_c = 1/2 P (v1^2 + v2^2) - Q v1 v2`` with constant ``P, Q`` (O-7.2a)."""
    S = _carriage()
    psi1, psi2, x, y, th = S.q
    R, c = _sym(S, "R"), _sym(S, "c")
    W = S.constraint_forms
    assert W.shape == (3, 5) and generic_rank(W, S.q + S.params) == 3
    X1 = sp.Matrix([1, 0, -R / 2 * sp.cos(th), -R / 2 * sp.sin(th), -R / (2 * c)])
    X2 = sp.Matrix([0, 1, -R / 2 * sp.cos(th), -R / 2 * sp.sin(th), R / (2 * c)])
    assert matrix_is_zero(S.horizontal_lifts() - sp.Matrix.hstack(X1, X2))
    assert matrix_is_zero(W * S.frame)
    P, Q = _P("P"), _P("Q")
    assert matrix_is_zero(S.reduce(at={x: 0, y: 0, th: 0}).K - sp.Matrix([[P, -Q], [-Q, P]]))
    K_full = S.reduced_metric(simplify=lambda e: sp.simplify(sp.expand(e)))
    assert matrix_is_zero(K_full - sp.Matrix([[P, -Q], [-Q, P]]))  # theta-independent


def test_carriage_bracket_misprint_guard() -> None:
    """MISPRINT GUARD, seed 001 Sec. 7.2, the displayed bracket ``[X_1, X_2]``: printed
    ``+(R^2/2c)(sin(theta) X_3 - cos(theta) X_4)``, correct ``-(R^2/2c)(...)`` (O-7.2a), i.e.
    ``R^3_12 = -(R^2/2c) sin(theta)``, ``R^4_12 = +(R^2/2c) cos(theta)``, ``R^5_12 = 0``."""
    S = _carriage()
    psi1, psi2, x, y, th = S.q
    R, c = _sym(S, "R"), _sym(S, "c")
    X3, X4 = sp.Matrix([0, 0, 1, 0, 0]), sp.Matrix([0, 0, 0, 1, 0])
    printed = R**2 / (2 * c) * (sp.sin(th) * X3 - sp.cos(th) * X4)
    bracket = fr.lie_bracket(S.frame[:, 0], S.frame[:, 1], S.q)
    assert matrix_is_zero(bracket + printed)
    assert not matrix_is_zero(bracket - printed)
    # object of anholonomity of seed 001's full frame (X_1, X_2, X_3, X_4, X_5)
    X5 = sp.Matrix([0, 0, -y, x, 1])
    full = sp.Matrix.hstack(S.frame, X3, X4, X5)
    Rk = fr.anholonomity(full, S.q)
    assert is_zero(Rk[0, 1, 2] + R**2 / (2 * c) * sp.sin(th))
    assert is_zero(Rk[0, 1, 3] - R**2 / (2 * c) * sp.cos(th))
    assert all(is_zero(Rk[0, 1, k]) for k in (0, 1, 4))
    # SE(2) fundamental fields: [X_4, X_5] = -X_3, [X_3, X_5] = X_4, [E_a, X_alpha] = 0
    assert matrix_is_zero(fr.lie_bracket(X4, X5, S.q) + X3)
    assert matrix_is_zero(fr.lie_bracket(X3, X5, S.q) - X4)
    for Ea in (X3, X4, X5):
        for k in range(2):
            assert matrix_is_zero(fr.lie_bracket(Ea, S.frame[:, k], S.q))


def test_carriage_momenta_and_curvature_term() -> None:
    """On C (O-7.2a, corrected sign): ``p_3 = -1/2 m R (v1 + v2) cos + Khat (v1 - v2) sin``,
    ``p_4 = -1/2 m R (v1 + v2) sin - Khat (v1 - v2) cos`` and ``p_a R^a_12 = -K (v1 - v2)``
    (printed ``+K (v1 - v2)``)."""
    S = _carriage()
    th = S.q[4]
    R, c = _sym(S, "R"), _sym(S, "c")
    v1, v2 = sp.symbols("v1 v2", real=True)
    qdot = S.frame * sp.Matrix([v1, v2])
    p = S.metric * qdot
    m, K, Kh = _P("m"), _P("K"), _P("Khat")
    assert is_zero(p[2] - (-m * R * (v1 + v2) * sp.cos(th) / 2 + Kh * (v1 - v2) * sp.sin(th)))
    assert is_zero(p[3] - (-m * R * (v1 + v2) * sp.sin(th) / 2 - Kh * (v1 - v2) * sp.cos(th)))
    pR = p[2] * (-(R**2) / (2 * c) * sp.sin(th)) + p[3] * (R**2 / (2 * c) * sp.cos(th))
    assert is_zero(pR + K * (v1 - v2))
    assert not is_zero(pR - K * (v1 - v2))


@pytest.mark.slow  # ~80 s: exact comparison of three routes (almost-Poisson is the slow one)
def test_carriage_equations_of_motion_misprint_guard() -> None:
    """MISPRINT GUARD, seed 001 Sec. 7.2, ``Gamma^1``, ``Gamma^2`` (O-7.2b): the Hamel
    equations give ``Gamma^1 = -K (v1 - v2)(Q v1 - P v2)/(P^2 - Q^2)``,
    ``Gamma^2 = -K (v1 - v2)(P v1 - Q v2)/(P^2 - Q^2)``, not the printed ``+K ...``."""
    eq = _carriage_hamel()
    v1, v2 = eq.states[5:]
    P, Q, K = _P("P"), _P("Q"), _P("K")
    correct = [
        -K * (v1 - v2) * (Q * v1 - P * v2) / (P**2 - Q**2),
        -K * (v1 - v2) * (P * v1 - Q * v2) / (P**2 - Q**2),
    ]
    assert all(_rational_zero(a - b) for a, b in zip(_fibre(eq.rhs[5:]), correct, strict=True))
    assert not any(_rational_zero(a + b) for a, b in zip(_fibre(eq.rhs[5:]), correct, strict=True))
    # the same from the almost-Poisson form (p = K v) and the reduced equations (3.17)
    for other in (
        almost_poisson_equations(_carriage(), simplify=sp.cancel),
        chaplygin_equations(_carriage().reduce(at=dict.fromkeys(_carriage().group, 0))),
    ):
        p = sp.Matrix(other.states[-2:])
        Kmat = sp.Matrix([[P, -Q], [-Q, P]])
        v = Kmat.LUsolve(p)
        pdot = sp.Matrix(_fibre(other.rhs[-2:]))
        acc = Kmat.LUsolve(pdot)  # K constant: vdot = K^{-1} pdot
        sub = {v1: v[0], v2: v[1]}
        assert all(_rational_zero(acc[i] - correct[i].xreplace(sub)) for i in range(2)), other.kind


def test_carriage_seed000_equations_6_2() -> None:
    """Seed 000 (6.2a)-(6.2b) in seed 000's frame: ``alphadot = X omega^2``,
    ``omegadot = -Y alpha omega``; and seed 001's corrected ``Gamma`` maps onto them with
    ``alpha = -(R/2)(v1 + v2)``, ``omega = (R/2c)(v2 - v1)``, while the printed sign gives
    ``alphadot = -X omega^2``."""
    Sp = _carriage(as_chaplygin=False)
    eq = _carriage_hamel(as_chaplygin=False)
    alpha, omega = eq.states[5:]
    X, Y = _P("X", Sp), _P("Y", Sp)
    assert _rational_zero(_fibre([eq.rhs[5]])[0] - X * omega**2)
    assert _rational_zero(_fibre([eq.rhs[6]])[0] + Y * alpha * omega)
    # seed 001 -> seed 000
    S = _carriage()
    R, c = _sym(S, "R"), _sym(S, "c")
    eq1 = _carriage_hamel()
    v1, v2 = eq1.states[5:]
    g1, g2 = _fibre(eq1.rhs[5:])
    a, w = -R / 2 * (v1 + v2), R / (2 * c) * (v2 - v1)
    assert _rational_zero(-R / 2 * (g1 + g2) - _P("X") * w**2)
    assert _rational_zero(R / (2 * c) * (g2 - g1) + _P("Y") * a * w)
    assert _rational_zero(-R / 2 * (-g1 - g2) + _P("X") * w**2)  # printed sign: alphadot = -X w^2


@pytest.mark.parametrize("form", ["chaplygin", "plain"])
def test_carriage_energy_conserved_exactly(form: str) -> None:
    """``dE/dt = 0`` identically; ``E = L_c = 1/2 P (v1^2 + v2^2) - Q v1 v2`` (O-7.2e)."""
    eq = _carriage_hamel(as_chaplygin=form == "chaplygin")
    assert is_zero(_energy_rate(eq))
    if form == "chaplygin":
        v1, v2 = eq.states[5:]
        P, Q = _P("P"), _P("Q")
        assert is_zero(eq.energy - (P * (v1**2 + v2**2) / 2 - Q * v1 * v2))


def test_carriage_l_zero_wheels_spin_uniformly() -> None:
    """``l = 0``: ``K = 0``, so ``v1``, ``v2`` are constants of motion (seed 001 Sec. 7.2) and
    the gyroscopic tensor vanishes."""
    S = _carriage(l_value=0)
    assert "l" not in {str(p) for p in S.params}
    eq = hamel_equations(S, simplify=sp.cancel)
    assert all(is_zero(f) for f in eq.rhs[5:])
    red = S.reduce(at=dict.fromkeys(S.group, 0))
    assert gyroscopic_tensor_vanishes(red.C)


def test_carriage_special_offset() -> None:
    """Seed 001's special ``l`` (``R^2 (P^2 - Q^2) = 4 c^2 K^2``) is seed 000's ``XY = 1``;
    there the corrected ``k_3``, ``k_4`` with ``H = +(m R^2 + 2 J_2)/(2R)`` are first integrals
    (the printed ``H < 0`` gives no first integral), and the kinetic energy is not positive
    definite off D (``m J < m0^2 l^2``; derived, not in the seeds)."""
    S = _carriage()
    c_ = carriage_constants(S)
    R, c = _sym(S, "R"), _sym(S, "c")
    m0, J, J2, l = (_sym(S, k) for k in ("m0", "J", "J2", "l"))  # noqa: E741
    ratio = R**2 * (c_["P"] ** 2 - c_["Q"] ** 2) / (4 * c**2 * c_["K"] ** 2)
    assert is_zero(ratio - 1 / (c_["X"] * c_["Y"]))
    m = c_["m"]
    special = sp.sqrt((m * R**2 + 2 * J2) * (R**2 * J + 2 * c**2 * J2)) / (m0 * R**2)
    assert is_zero((c_["X"] * c_["Y"]).subs(l, special) - 1)
    gap = (m0**2 * l**2 - m * J).subs(l, special)
    assert is_zero(gap - (2 * J2 * (J + m * c**2) / R**2 + 4 * c**2 * J2**2 / R**4))
    # XY = 1 solved rationally for J (equivalent to the special l, no square roots)
    J_special = (m0**2 * l**2 * R**4 / (m * R**2 + 2 * J2) - 2 * c**2 * J2) / R**2
    assert is_zero((c_["X"] * c_["Y"]).subs(J, J_special) - 1)

    eq = _carriage_hamel()
    th = S.q[4]
    v1, v2 = eq.states[5:]
    Kh = c_["Khat"]

    sn, cs = sp.symbols("sn cs", real=True)

    def rate(H: sp.Expr) -> list[sp.Expr]:
        """``Gamma(k)`` at XY = 1, reduced modulo ``sin^2 + cos^2 = 1`` (numerator only)."""
        k3 = -Kh * sp.sin(th) * (v1 - v2) + H * sp.cos(th) * (v1 + v2)
        k4 = Kh * sp.cos(th) * (v1 - v2) + H * sp.sin(th) * (v1 + v2)
        out = []
        for k in (k3, k4):
            dk = sum((sp.diff(k, x) * f for x, f in zip(eq.states, eq.rhs, strict=True)), 0)
            dk = sp.sympify(dk).subs(J, J_special).subs({sp.sin(th): sn, sp.cos(th): cs})
            num = sp.fraction(sp.cancel(dk))[0]
            out.append(sp.expand(sp.rem(sp.expand(num), sn**2 + cs**2 - 1, sn)))
        return out

    assert rate(c_["H"]) == [0, 0]
    assert all(e != 0 for e in rate(-c_["H"]))
