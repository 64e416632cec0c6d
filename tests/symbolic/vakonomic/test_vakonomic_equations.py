"""Vakonomic equations (nhfast.symbolic.vakonomic.equations) against the papers and other routes.

Oracles: seed 003 (14)/(15) and Example VII.4 (V3, V4), seed 002 O1/O13 (digest seed002_003.md),
the Euler-Lagrange equations of the extended Lagrangian ``L + lambda W qdot`` differentiated
independently, and the frame form mapped back to coordinates.
"""

from __future__ import annotations

import functools
import random

import pytest
import sympy as sp

from nhfast.symbolic._util import is_zero
from nhfast.symbolic.systems import NonholonomicSystem
from nhfast.symbolic.vakonomic import (
    constraint_one_forms,
    is_integrable,
    nonholonomic_coordinate_equations,
    vakonomic_equations,
    vakonomic_frame_equations,
)
from nhfast.systems import (
    contact_particle,
    holonomic_particle,
    nonholonomic_particle,
    two_constraint_system,
    vertical_rolling_disk,
)


@functools.cache
def t3_system() -> NonholonomicSystem:
    """The digests' test system T3 with a potential (m = 2, q-dependent W)."""
    return two_constraint_system()


@functools.cache
def _vak(name: str, solve: str = "auto"):  # noqa: ANN202
    return vakonomic_equations(_SYSTEMS[name](), solve=solve)


_SYSTEMS = {
    "disk003": functools.cache(lambda: vertical_rolling_disk(convention="martinez")),
    "disk002": functools.cache(lambda: vertical_rolling_disk(convention="mestdag-crampin")),
    "t3": t3_system,
    "particle_x": functools.cache(lambda: contact_particle("x")),
}


def _rand_point(symbols: list, seed: int) -> dict:
    rng = random.Random(seed)
    return {s: sp.Rational(rng.randint(-9, 9), rng.randint(5, 13)) for s in symbols}


def _on_P2(S: NonholonomicSystem, qd: list, seed: int, extra: list) -> dict:
    """A random rational point of P_2 = {W qdot = 0}: qdot = frame * random coefficients."""
    pt = _rand_point([*S.q, *extra], seed)
    for p in S.params:
        pt[p] = sp.Rational(random.Random(seed + 99).randint(3, 9), 4)
    coeff = _rand_point([sp.Dummy() for _ in range(S.rank)], seed + 1)
    fr = S.frame.subs(pt)
    v = fr * sp.Matrix(list(coeff.values()))
    pt.update(dict(zip(qd, v, strict=True)))
    return pt


# --------------------------------------------------------------------- seed 003 disk ----
def test_disk003_rates_match_seed_003_V3_V4() -> None:
    """(14)/(15) on the disk: B_lambda = R thd phd + mu thd, B_mu = a lambda thd, C as V4."""
    S = vertical_rolling_disk(convention="martinez")
    eq = _vak("disk003")
    x, y, th, ph, xd, yd, thd, phd, lam, mu = eq.states
    I1, I2, R = S.params
    a = -I2 / (I2 + R**2)
    on_c = {xd: R * sp.cos(th) * phd, yd: R * sp.sin(th) * phd}
    got = dict(zip(eq.states, eq.rhs, strict=True))
    expected = {
        lam: R * thd * phd + mu * thd,
        mu: a * lam * thd,
        xd: -(1 + a) * lam * thd * sp.cos(th) - R * phd * thd * sp.sin(th),
        yd: -(1 + a) * lam * thd * sp.sin(th) + R * phd * thd * sp.cos(th),
        thd: R / I1 * lam * phd,
        phd: R * a / I2 * lam * thd,
    }
    for s, e in expected.items():
        assert is_zero(got[s].subs(on_c) - e), s
    # kinematics
    for s, e in zip(eq.states[:4], eq.states[4:8], strict=True):
        assert got[s] == e


def test_disk003_special_multipliers_give_nonholonomic_field() -> None:
    """V7: lambda = 0, mu = -R phidot ((A, B) = (0, 0)) gives the NH accelerations."""
    eq = _vak("disk003")
    x, y, th, ph, xd, yd, thd, phd, lam, mu = eq.states
    R = vertical_rolling_disk(convention="martinez").params[2]
    sub = {xd: R * sp.cos(th) * phd, yd: R * sp.sin(th) * phd, lam: 0, mu: -R * phd}
    got = [e.subs(sub) for e in eq.rhs[4:8]]
    nh = [-R * phd * thd * sp.sin(th), R * phd * thd * sp.cos(th), 0, 0]
    assert all(is_zero(g - n) for g, n in zip(got, nh, strict=True))
    # the tangency of the section: lambdadot = 0 and mudot = d/dt(-R phidot) = 0 there
    rates = [e.subs(sub) for e in eq.rhs[8:]]
    assert all(is_zero(r) for r in rates)


# ------------------------------------------------ independent EL of the extended L ----
@pytest.mark.parametrize("name", ["t3", "disk003", "particle_x"])
def test_coordinate_form_solves_extended_euler_lagrange(name: str) -> None:
    """EL(L + lambda W qdot) = 0 and d/dt(W qdot) = 0 hold at random points of P_2."""
    S = _SYSTEMS[name]()
    eq = _vak(name)
    n = S.dim
    q, qd, lam = eq.states[:n], eq.states[n : 2 * n], eq.states[2 * n :]
    W = constraint_one_forms(S)
    L = (sp.Matrix(qd).T * S.metric * sp.Matrix(qd))[0, 0] / 2 - S.potential
    calL = L + (sp.Matrix(lam).T * W * sp.Matrix(qd))[0, 0]
    acc = eq.rhs[n : 2 * n]
    rates = eq.rhs[2 * n :]

    def ddt(f: sp.Expr) -> sp.Expr:  # total time derivative along the solution
        return (
            sum(sp.diff(f, a) * b for a, b in zip(q, qd, strict=True))
            + sum(sp.diff(f, a) * b for a, b in zip(qd, acc, strict=True))
            + sum(sp.diff(f, a) * b for a, b in zip(lam, rates, strict=True))
        )

    el = [ddt(sp.diff(calL, qd[A])) - sp.diff(calL, q[A]) for A in range(n)]
    tang = [ddt(sum(W[i, A] * qd[A] for A in range(n))) for i in range(W.rows)]
    for seed in range(2):
        pt = _on_P2(S, qd, seed, lam)
        for r in [*el, *tang]:
            assert sp.nsimplify(sp.sympify(r).subs(pt)) == 0


def test_linear_solve_mode_agrees_with_symbolic() -> None:
    """The LU-in-the-kernel form evaluates to the symbolic solution (T3, random states)."""
    import numpy as np

    S = t3_system()
    vf_sym = _vak("t3", "symbolic").as_vector_field()
    vf_lin = _vak("t3", "linear").as_vector_field()
    assert _vak("t3", "linear").solves and not _vak("t3", "symbolic").solves
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 8)) * 0.5
    par = np.array([1.3])
    assert S.params
    a = vf_sym.evaluate("rhs", x, params=par)
    b = vf_lin.evaluate("rhs", x, params=par)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------- frame form ----
def test_disk002_frame_form_matches_O13() -> None:
    """Seed 002 O13: phi'' = R thd (-mu1 sin + mu2 cos) / J and
    theta'' = R phd (mu1 sin - mu2 cos) / (I + M R^2)."""
    S = vertical_rolling_disk(convention="mestdag-crampin")
    fe = vakonomic_frame_equations(S)
    x, y, phi, th, v1, v2, mu1, mu2 = fe.equations.states
    M, I, J, R = S.params  # noqa: E741
    rhs = dict(zip(fe.equations.states, fe.equations.rhs, strict=True))
    # frame X1 = d/dphi, X2 = d/dtheta + ..., so v1 = phidot, v2 = thetadot
    assert is_zero(rhs[v1] - R * v2 * (-mu1 * sp.sin(phi) + mu2 * sp.cos(phi)) / J)
    assert is_zero(rhs[v2] - R * v1 * (mu1 * sp.sin(phi) - mu2 * sp.cos(phi)) / (I + M * R**2))
    # the section mu = (M xdot, M ydot) is invariant and carries the NH flow (O13, O10)
    sec = {mu1: M * R * sp.cos(phi) * v2, mu2: M * R * sp.sin(phi) * v2}
    assert is_zero(rhs[v1].subs(sec)) and is_zero(rhs[v2].subs(sec))
    # d/dt (M R cos(phi) thetadot) along the NH flow = -M R sin(phi) phidot thetadot = lambda_x
    assert is_zero(rhs[mu1].subs(sec) + M * R * sp.sin(phi) * v1 * v2)
    assert is_zero(rhs[mu2].subs(sec) - M * R * sp.cos(phi) * v1 * v2)
    # R^x_12 = -R sin(phi), R^y_12 = R cos(phi) (O9, with the factor R of erratum E1)
    assert is_zero(fe.R[0, 1, 2] + R * sp.sin(phi)) and is_zero(fe.R[0, 1, 3] - R * sp.cos(phi))


@pytest.mark.parametrize("name", ["t3", "disk003"])
def test_frame_form_equals_coordinate_form(name: str) -> None:
    """(b) == (a): map the frame-form rates to (qddot, lambdadot) at random points of P_2."""
    S = _SYSTEMS[name]()
    eq = _vak(name)
    fe = vakonomic_frame_equations(S)
    n, r = S.dim, S.rank
    m = n - r
    q = S.q
    fs = fe.equations.states
    v, mu = fs[n : n + r], fs[n + r :]
    rhs_f = fe.equations.rhs
    X = fe.full_frame[:, :r]
    qdot = X * sp.Matrix(v)
    vdot = sp.Matrix(rhs_f[n : n + r])
    mudot = sp.Matrix(rhs_f[n + r :])
    qdotdot = sum((sp.diff(qdot, q[A]) * qdot[A] for A in range(n)), sp.zeros(n, 1)) + X * vdot
    LamT = fe.Lambda.T
    lam = -LamT * sp.Matrix(mu)
    lamdot = (
        -sum((sp.diff(LamT, q[A]) * qdot[A] for A in range(n)), sp.zeros(m, m)) * sp.Matrix(mu)
        - LamT * mudot
    )
    qd_c, lam_c = eq.states[n : 2 * n], eq.states[2 * n :]
    for seed in range(2):
        pt = _rand_point([*q, *v, *mu], seed + 10)
        for p in S.params:
            pt[p] = sp.Rational(7, 5)
        sub = dict(pt)
        sub.update({s: qdot[i].subs(pt) for i, s in enumerate(qd_c)})
        sub.update({s: lam[i].subs(pt) for i, s in enumerate(lam_c)})
        coord = [sp.sympify(e).subs(sub) for e in eq.rhs[n:]]
        frame = [*(e.subs(pt) for e in qdotdot), *(e.subs(pt) for e in lamdot)]
        for a, b in zip(coord, frame, strict=True):
            assert sp.nsimplify(sp.simplify(a - b)) == 0


def test_frame_multiplier_map_is_the_coframe() -> None:
    """``Lambda`` of the frame form: ``theta^a = Lambda^a_i W_i`` with ``theta`` the coframe
    of the completion (rows of the inverse full frame), for T3 (given by 1-forms ``W``) with a
    completion that is not dual to ``W``, so that ``Lambda`` is not the identity."""
    S = t3_system()
    x, y, _ = S.q
    comp = sp.Matrix([[2, 0], [x, 1 + y**2], [0, 0]])
    fe = vakonomic_frame_equations(S, complement=comp, simplify=False)
    theta = fe.full_frame.LUsolve(sp.eye(S.dim))[S.rank :, :]
    assert all(is_zero(e) for e in fe.Lambda * fe.one_forms - theta)
    assert not all(is_zero(e) for e in fe.Lambda - sp.eye(2))


# --------------------------------------------------------------- NH baseline, flags ----
def test_nonholonomic_coordinate_equations_disk002_O1() -> None:
    """O1: theta'' = phi'' = 0 and reactions lambda_1 = -M R sin(phi) thd phd, lambda_2 = +cos."""
    S = vertical_rolling_disk(convention="mestdag-crampin")
    eq = nonholonomic_coordinate_equations(S)
    x, y, phi, th, xd, yd, phd, thd = eq.states
    M, I, J, R = S.params  # noqa: E741
    on_c = {xd: R * sp.cos(phi) * thd, yd: R * sp.sin(phi) * thd}
    rhs = dict(zip(eq.states, eq.rhs, strict=True))
    assert is_zero(rhs[phd].subs(on_c)) and is_zero(rhs[thd].subs(on_c))
    assert is_zero(eq.observables["reaction_1"].subs(on_c) + M * R * sp.sin(phi) * thd * phd)
    assert is_zero(eq.observables["reaction_2"].subs(on_c) - M * R * sp.cos(phi) * thd * phd)


def test_integrability_flag() -> None:
    assert is_integrable(holonomic_particle())
    assert not is_integrable(nonholonomic_particle())
    assert not is_integrable(vertical_rolling_disk(convention="mestdag-crampin"))


def test_one_forms_from_a_frame_annihilate_it() -> None:
    x, y, z = sp.symbols("x y z", real=True)
    S = NonholonomicSystem([x, y, z], sp.eye(3), frame=sp.Matrix([[1, 0], [0, 1], [y, 0]]))
    W = constraint_one_forms(S)
    assert W.shape == (1, 3)
    assert all(is_zero(e) for e in W * S.frame)


# ------------------------------------------------------------------------ bad input ----
def test_bad_input() -> None:
    x, y = sp.symbols("x y", real=True)
    free = NonholonomicSystem([x, y], sp.eye(2))
    with pytest.raises(ValueError, match="no constraints"):
        vakonomic_equations(free)
    with pytest.raises(TypeError, match="system must be a NonholonomicSystem"):
        vakonomic_equations("disk")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="solve must be"):
        vakonomic_equations(vertical_rolling_disk(convention="martinez"), solve="fast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="complement must be 4 x 2"):
        vakonomic_frame_equations(
            vertical_rolling_disk(convention="martinez"), complement=sp.eye(4)
        )
    S = vertical_rolling_disk(convention="martinez")
    with pytest.raises(ValueError, match="complement: frame of D and complement"):
        vakonomic_frame_equations(S, complement=S.frame)
    fe = vakonomic_frame_equations(S)
    with pytest.raises(ValueError, match="qdot is not in D"):
        fe.from_coordinates([0, 0, 0.3, 0.1], [1.0, 0, 0, 0], [0, 0], params=[0.7, 1.3, 0.5])
