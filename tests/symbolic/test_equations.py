"""Equations of motion (nhfast.symbolic.equations) against independent constructions.

Independent oracle: the coordinate Lagrange-d'Alembert equations with multipliers,
``G qddot + (dG/dt) qdot - 1/2 d_q(qdot^T G qdot) + grad U = W^T lambda``, ``W qdot = 0``,
solved numerically (a KKT system) at random states; the almost-Poisson and Hamel forms must
reproduce its accelerations.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from nhfast.symbolic._util import is_zero
from nhfast.symbolic.equations import (
    EquationsOfMotion,
    almost_poisson_equations,
    chaplygin_equations,
    hamel_equations,
)
from nhfast.symbolic.systems import NonholonomicSystem
from nhfast.systems import (
    chaplygin_sleigh,
    nonholonomic_particle,
    vertical_rolling_disk,
    veselova,
)

SETTINGS = settings(max_examples=20, deadline=None, derandomize=True)


def _particle_potential(x: sp.Symbol, y: sp.Symbol) -> sp.Expr:
    return x**2 / 2 + y**2 + sp.Rational(3, 10) * sp.sin(x * y)


@functools.cache
def _system(name: str) -> NonholonomicSystem:
    if name == "particle":
        return nonholonomic_particle(potential=_particle_potential)
    if name == "disk":
        return vertical_rolling_disk(potential=lambda ph, th: sp.cos(ph) + th**2 / 2)
    if name == "sleigh":
        return chaplygin_sleigh(as_chaplygin=False, potential=lambda y, th: y**2 / 2 + sp.sin(th))
    raise KeyError(name)


@functools.cache
def _equations(name: str, kind: str) -> EquationsOfMotion:
    S = _system(name)
    return almost_poisson_equations(S) if kind == "ap" else hamel_equations(S)


@functools.cache
def _lda(name: str):  # noqa: ANN202 - returns numeric closures
    """Numeric coordinate Lagrange-d'Alembert solver and frame data for system ``name``."""
    S = _system(name)
    q, n = S.q, S.dim
    args = [*q, *S.params]
    G, W, U, E = S.metric, S.constraint_forms, S.potential, S.frame
    fG = sp.lambdify(args, G)
    fdG = [sp.lambdify(args, G.diff(qa)) for qa in q]
    fW = sp.lambdify(args, W)
    fdW = [sp.lambdify(args, W.diff(qa)) for qa in q]
    fgU = sp.lambdify(args, [sp.diff(U, qa) for qa in q])
    fE = sp.lambdify(args, E)
    fdE = [sp.lambdify(args, E.diff(qa)) for qa in q]

    def accel(qv: np.ndarray, qd: np.ndarray, pv: np.ndarray) -> np.ndarray:
        a = [*qv, *pv]
        Gm = np.asarray(fG(*a), float)
        dG = [np.asarray(f(*a), float) for f in fdG]
        Wm = np.asarray(fW(*a), float)
        dW = [np.asarray(f(*a), float) for f in fdW]
        gU = np.asarray(fgU(*a), float)
        Gdot = sum(dG[i] * qd[i] for i in range(n))
        force = -Gdot @ qd + 0.5 * np.array([qd @ dG[b] @ qd for b in range(n)]) - gU
        Wdot = sum(dW[i] * qd[i] for i in range(n))
        k = Wm.shape[0]
        kkt = np.block([[Gm, -Wm.T], [Wm, np.zeros((k, k))]])
        sol = np.linalg.solve(kkt, np.concatenate([force, -Wdot @ qd]))
        return sol[:n]

    def frame(qv: np.ndarray, pv: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
        a = [*qv, *pv]
        return (
            np.asarray(fE(*a), float),
            [np.asarray(f(*a), float) for f in fdE],
            np.asarray(fG(*a), float),
        )

    return accel, frame, fdG


PARAM_RANGES = {
    "particle": [(-0.8, 0.8)],  # a
    "disk": [(0.5, 2.0)] * 4,  # m, R, I, J
    "sleigh": [(0.5, 2.0)] * 3,  # m, I, b
}
Q_RANGES = {
    "particle": [(-1.0, 1.0)] * 3,
    "disk": [(-1.0, 1.0)] * 4,
    "sleigh": [(-1.0, 1.0), (-1.0, 1.0), (0.3, 2.8)],
}


def _draw(data: st.DataObject, ranges: list) -> np.ndarray:
    return np.array([data.draw(st.floats(lo, hi)) for lo, hi in ranges])


@pytest.mark.parametrize("name", ["particle", "disk", "sleigh"])
@SETTINGS
@given(data=st.data())
def test_hamel_matches_coordinate_lda(name: str, data: st.DataObject) -> None:
    S = _system(name)
    eq = _equations(name, "hamel")
    f = eq.lambdify()
    qv = _draw(data, Q_RANGES[name])
    pv = _draw(data, PARAM_RANGES[name])
    vv = _draw(data, [(-1.5, 1.5)] * S.rank)
    accel, frame, _ = _lda(name)
    E, dE, _ = frame(qv, pv)
    qd = E @ vv
    rhs = f(np.concatenate([qv, vv]), pv)
    assert np.allclose(rhs[: S.dim], qd, atol=1e-12)
    vdot = rhs[S.dim :]
    qdd = sum(dE[a] * qd[a] for a in range(S.dim)) @ vv + E @ vdot
    assert np.allclose(qdd, accel(qv, qd, pv), atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("name", ["particle", "disk", "sleigh"])
@SETTINGS
@given(data=st.data())
def test_almost_poisson_matches_coordinate_lda(name: str, data: st.DataObject) -> None:
    S = _system(name)
    eq = _equations(name, "ap")
    f = eq.lambdify()
    qv = _draw(data, Q_RANGES[name])
    pv = _draw(data, PARAM_RANGES[name])
    vv = _draw(data, [(-1.5, 1.5)] * S.rank)
    accel, frame, fdG = _lda(name)
    E, dE, G = frame(qv, pv)
    qd = E @ vv
    mom = E.T @ G @ qd  # p_i = <<qdot, e_i>>
    rhs = f(np.concatenate([qv, mom]), pv)
    assert np.allclose(rhs[: S.dim], qd, atol=1e-10)
    qdd = accel(qv, qd, pv)
    dG = [np.asarray(g(*qv, *pv), float) for g in fdG]
    Edot = sum(dE[a] * qd[a] for a in range(S.dim))
    Gdot = sum(dG[a] * qd[a] for a in range(S.dim))
    pdot = Edot.T @ G @ qd + E.T @ Gdot @ qd + E.T @ G @ qdd
    assert np.allclose(rhs[S.dim :], pdot, atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("name", ["particle", "disk", "sleigh"])
@SETTINGS
@given(data=st.data())
def test_energy_conserved(name: str, data: st.DataObject) -> None:
    # dH/dt = grad H . rhs == 0 at random points (both forms)
    S = _system(name)
    for kind in ("ap", "hamel"):
        eq = _equations(name, kind)
        grad = sp.lambdify(eq.states + eq.params, [sp.diff(eq.energy, x) for x in eq.states])
        f = eq.lambdify()
        state = np.concatenate([_draw(data, Q_RANGES[name]), _draw(data, [(-1.5, 1.5)] * S.rank)])
        pv = _draw(data, PARAM_RANGES[name])
        g = np.asarray(grad(*state, *pv), float)
        xdot = f(state, pv)
        assert abs(g @ xdot) <= 1e-10 * (1 + np.abs(g).max() * np.abs(xdot).max())


def test_particle_reduced_equations_match_seed_4_2() -> None:
    # seed 004 (4.2), with U an arbitrary function of (x, y)
    Uf = sp.Function("U")
    S = nonholonomic_particle(potential=lambda x, y: Uf(x, y))
    eq = chaplygin_equations(S)
    x, y, px, py = eq.states
    (a,) = eq.params
    D = 1 + (1 - a**2) * y**2
    U = Uf(x, y)
    expected = [
        (px - a * y * py) / D,
        (-a * y * px + (1 + y**2) * py) / D,
        -sp.diff(U, x) + ((1 - a**2) * y * px + a * py) * (-a * y * px + (1 + y**2) * py) / D**2,
        -sp.diff(U, y),
    ]
    for got, exp in zip(eq.rhs, expected, strict=True):
        assert is_zero(got - exp)
    H = (px**2 + (1 + y**2) * py**2 - 2 * a * y * px * py) / (2 * D) + U
    assert is_zero(eq.energy - H)


def test_chaplygin_equals_almost_poisson_for_chaplygin_frame() -> None:
    # unreduced almost-Poisson with e_i = hor d_i, restricted to the shape components
    S = _system("particle")
    red_eq = chaplygin_equations(S)
    ap = _equations("particle", "ap")
    x, y, z, p1, p2 = ap.states
    sub = dict(zip(red_eq.states, [x, y, p1, p2], strict=True))
    for i, j in ((0, 0), (1, 1), (2, 3), (3, 4)):
        assert is_zero(red_eq.rhs[i].subs(sub) - ap.rhs[j])


def test_disk_reduced_equations_are_free() -> None:
    # C = 0 and K constant: pdot = -dU/ds only (seed 002 O1 with U = 0: phi'' = theta'' = 0)
    eq = chaplygin_equations(vertical_rolling_disk())
    assert all(is_zero(e) for e in eq.rhs[2:])


@pytest.mark.parametrize(("n", "inverse"), [(3, "auto"), (4, "solve"), (5, "auto")])
def test_veselova_reduced_rhs_vs_closed_forms(n: int, inverse: str, veselova_closed_form) -> None:
    V = veselova(n)
    eq = chaplygin_equations(V, inverse=inverse, simplify=False)
    assert bool(eq.solves) == (inverse == "solve" or n - 1 > 3)
    f = eq.lambdify()
    en = eq.energy_function() if not eq.solves else None
    rng = np.random.default_rng(n)
    for _ in range(5):
        s = rng.uniform(-0.4, 0.4, n - 1)
        p = rng.uniform(-1, 1, n - 1)
        a = rng.uniform(0.5, 3.0, n)
        rhs = f(np.concatenate([s, p]), a)
        exp, H = veselova_closed_form(s, p, a)
        assert np.allclose(rhs, exp, rtol=1e-11, atol=1e-12)
        if en is not None:
            assert abs(en(np.concatenate([s, p]), a) - H) < 1e-12


def test_implicit_solves_explicit_roundtrip() -> None:
    V = veselova(3)
    imp = chaplygin_equations(V, inverse="solve", simplify=False)
    exp = chaplygin_equations(V, inverse="symbolic", simplify=False)
    ex2 = imp.explicit()
    assert not ex2.solves
    pt = {x: sp.Rational(k + 1, 13) for k, x in enumerate(exp.states + exp.params)}
    for e1, e2 in zip(ex2.rhs, exp.rhs, strict=True):
        assert abs(sp.N((e1 - e2).subs(pt), 30)) < 1e-25


def test_large_r_uses_recorded_solves() -> None:
    V = veselova(5)
    eq = chaplygin_equations(V, simplify=False)
    (ls,) = eq.solves
    assert ls.matrix == V.K and list(ls.rhs) == eq.states[4:]
    assert set(ls.unknowns).isdisjoint(eq.states + eq.params)


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="system must be"):
        almost_poisson_equations("disk")
    with pytest.raises(TypeError, match="system must be"):
        chaplygin_equations(_system("sleigh"))
    with pytest.raises(ValueError, match="inverse must be"):
        chaplygin_equations(veselova(3), inverse="magic", simplify=False)
    with pytest.raises(ValueError, match="momenta must have 2"):
        chaplygin_equations(veselova(3), momenta=[sp.Symbol("p")], simplify=False)
    with pytest.raises(ValueError, match="equal length"):
        EquationsOfMotion(states=[sp.Symbol("x")], rhs=[], params=[], energy=sp.Integer(0))
