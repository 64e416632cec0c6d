"""Every example system through the compiled core: energy, constraints, three routes, measures.

Systems: vertical rolling disk (with a potential), nonholonomic particle (with a potential),
Chaplygin sleigh, Veselova ``n = 3, 4, 5`` (hemisphere chart), unicycle and two-wheeled
carriage (``nhfast.systems.wheeled``, seeds 000 and 001).

Routes (``nhfast.symbolic.equations``): ``hamel`` (states ``(q, v)``, Lagrange-d'Alembert in
quasi-velocities), ``ap`` (almost-Poisson on ``D*``, states ``(q, p)``), ``reduced``
((3.17) of seed 004 on ``T*S``, states ``(s, p)``) and, for the unicycle and the carriage,
``plain``: the Hamel form in seed 000's left-invariant frame (quasi-velocities ``(alpha, phidot)``).

Initial data are drawn once per system as a configuration ``q0`` and a velocity ``qdot0`` in D;
each route gets its own coordinates of the same point of ``D``: ``v = E^+ qdot`` for the frame
``E`` of the route, ``p_i = <<qdot, e_i>> = (E^T G qdot)_i`` (for Chaplygin systems the frame is the
horizontal lift, so the reduced momenta are the same numbers), ``s`` = the shape part of ``q``.
Trajectories are compared as curves ``(q(t), qdot(t))`` with ``qdot`` read from the compiled
right-hand side, which makes the comparison independent of the frame.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
from nhfast.errors import IntegrationError
from nhfast.symbolic.chaplygin import invariant_measure
from nhfast.symbolic.equations import (
    EquationsOfMotion,
    almost_poisson_equations,
    chaplygin_equations,
    hamel_equations,
)
from nhfast.symbolic.systems import ChaplyginSystem, NonholonomicSystem
from nhfast.systems import (
    chaplygin_sleigh,
    nonholonomic_particle,
    vertical_rolling_disk,
    veselova,
)
from nhfast.systems.wheeled import two_wheeled_carriage, unicycle

T_EVAL = np.linspace(0.0, 5.0, 11)
TOL = {"rtol": 1e-12, "atol": 1e-13}
N_TRAJ = 16
FULL_ROUTES = ("hamel", "ap")


@dataclass(frozen=True)
class Example:
    """A system in full coordinates, numeric parameters and how to sample ``q0``."""

    build: Any
    params: tuple[float, ...]
    q_low: Any = -1.0
    q_high: Any = 1.0
    v_scale: float = 1.0
    forward: bool = False  # first quasi-velocity positive
    plain: Any = None  # builder of the same system with seed 000's frame, if any


def _disk() -> ChaplyginSystem:
    return vertical_rolling_disk(potential=lambda ph, th: sp.cos(ph) + th**2 / 2)


def _particle() -> ChaplyginSystem:
    return nonholonomic_particle(
        potential=lambda x, y: x**2 / 2 + y**2 + sp.Rational(3, 10) * sp.sin(x * y)
    )


def _sleigh() -> NonholonomicSystem:
    return chaplygin_sleigh(as_chaplygin=False)


def _unicycle(as_chaplygin: bool = True) -> NonholonomicSystem:
    return unicycle(
        potential=lambda x, y, ph, th: sp.cos(ph) + th**2 / 2, as_chaplygin=as_chaplygin
    )


def _carriage(as_chaplygin: bool = True) -> NonholonomicSystem:
    return two_wheeled_carriage(as_chaplygin=as_chaplygin)


EXAMPLES: dict[str, Example] = {
    # (m, R, I, J)
    "disk": Example(_disk, (1.3, 0.7, 0.4, 0.9)),
    # (a,)
    "particle": Example(_particle, (0.3,)),
    # (m, I, b); the library's frame of D for the sleigh is d/dx + tan(theta) d/dy, d/dtheta
    # (dependent coordinate y), singular at cos(theta) = 0: stay in |theta| < pi/2 by moving
    # forwards (xdot > 0), where the rotation decays
    "sleigh": Example(_sleigh, (1.2, 0.5, 0.4), (-1, -1, -0.5), (1, 1, 0.5), 0.3, True),
    # (m, R, I, J), seed 000 oracle O-U5
    "unicycle": Example(_unicycle, (1.0, 0.8, 0.2, 0.5), plain=lambda: _unicycle(False)),
    # (m0, m1, l, J, J2, R, c): a physical carriage (m J > m0^2 l^2)
    "carriage": Example(
        _carriage, (1.0, 0.5, 0.3, 1.5, 0.1, 0.4, 0.5), plain=lambda: _carriage(False)
    ),
}
CHAPLYGIN = ("disk", "particle", "unicycle", "carriage")
VESELOVA_N = (3, 4, 5)


# ----------------------------------------------------------------------------- building ----
@functools.cache
def _system(name: str, plain: bool = False) -> NonholonomicSystem:
    ex = EXAMPLES[name]
    return ex.plain() if plain else ex.build()


@functools.cache
def _equations(name: str, route: str) -> EquationsOfMotion:
    if name.startswith("veselova"):
        return chaplygin_equations(veselova(int(name[-1])), simplify=False)
    S = _system(name, plain=route == "plain")
    # The carriage's trigonometric frame makes the default simplification slow; cancel is
    # exact for its rational dependence on the parameters.
    simp: Any = sp.cancel if name == "carriage" else "default"
    if route in ("hamel", "plain"):
        return hamel_equations(S, simplify=simp)
    if route == "ap":
        return almost_poisson_equations(S, simplify=simp)
    if route == "reduced":
        assert isinstance(S, ChaplyginSystem)
        # G-invariance: K and C do not depend on the fibre point; fixing it avoids trig
        # simplification for the non-abelian SE(2) of the carriage.
        red = S.reduce(at=dict.fromkeys(S.group, 0)) if name == "carriage" else S
        return chaplygin_equations(red)
    raise KeyError(route)


@functools.cache
def _vector_field(name: str, route: str) -> nh.VectorField:
    vf = _equations(name, route).as_vector_field()
    vf.name = f"{name}/{route}"
    return vf


@functools.cache
def _numeric_data(name: str, plain: bool = False) -> tuple[Any, Any, Any]:
    """NumPy functions ``G(q, par)``, ``W(q, par)``, ``E(q, par)`` of a system."""
    S = _system(name, plain)
    args = [*S.q, *S.params]
    fG = sp.lambdify(args, S.metric, "numpy")
    fW = sp.lambdify(args, S.constraint_forms, "numpy")
    fE = sp.lambdify(args, S.frame, "numpy")
    return fG, fW, fE


def _at(f: Any, q: np.ndarray, par: tuple[float, ...]) -> np.ndarray:
    """Evaluate a lambdified matrix function at each row of ``q`` -> (rows, a, b)."""
    return np.array([np.asarray(f(*qi, *par), dtype=float) for qi in q])


@functools.cache
def _initial(name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(q0, qdot0)``, shape (N_TRAJ, n) each, with ``qdot0`` in D."""
    ex = EXAMPLES[name]
    S = _system(name)
    rng = np.random.default_rng(sum(map(ord, name)))
    q0 = rng.uniform(ex.q_low, ex.q_high, size=(N_TRAJ, S.dim))
    v0 = rng.uniform(-ex.v_scale, ex.v_scale, size=(N_TRAJ, S.rank))
    if ex.forward:
        v0[:, 0] = np.abs(v0[:, 0]) + 0.1
    E = _at(_numeric_data(name)[2], q0, ex.params)
    return q0, np.einsum("tar,tr->ta", E, v0)


def _route_state(name: str, route: str) -> np.ndarray:
    """Initial states of ``route`` for the common ``(q0, qdot0)`` of ``name``."""
    ex = EXAMPLES[name]
    q0, qd0 = _initial(name)
    fG, _, fE = _numeric_data(name, plain=route == "plain")
    E = _at(fE, q0, ex.params)
    if route in ("hamel", "plain"):
        v = np.array([np.linalg.lstsq(E[t], qd0[t], rcond=None)[0] for t in range(len(q0))])
        assert np.allclose(np.einsum("tar,tr->ta", E, v), qd0, atol=1e-13)
        return np.hstack([q0, v])
    G = _at(fG, q0, ex.params)
    p = np.einsum("tar,tab,tb->tr", E, G, qd0)
    if route == "ap":
        return np.hstack([q0, p])
    S = _system(name)
    shape = [S.q.index(s) for s in S.shape]
    return np.hstack([q0[:, shape], p])


def _veselova_initial(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(100 + n)
    s = rng.uniform(-0.15, 0.15, size=(N_TRAJ, n - 1))
    p = rng.uniform(-0.2, 0.2, size=(N_TRAJ, n - 1))  # slow: stays in the chart for t <= 5
    a = rng.uniform(0.5, 3.0, size=(N_TRAJ, n))
    return np.hstack([s, p]), a


@functools.cache
def _run(name: str, route: str) -> tuple[nh.IntegrationResult, np.ndarray]:
    """Integrate (DOP853, rtol 1e-12) and return the result and the params used."""
    vf = _vector_field(name, route)
    if name.startswith("veselova"):
        x0, par = _veselova_initial(int(name[-1]))
    else:
        x0, par = _route_state(name, route), np.asarray(EXAMPLES[name].params)
    res = nh.integrate(vf, x0, T_EVAL, method="dop853", params=par, **TOL)
    assert res.success
    return res, par


def _qdot(name: str, route: str) -> tuple[np.ndarray, np.ndarray]:
    """``q(t)`` and ``qdot(t)`` (from the compiled rhs), shape (N_TRAJ, n_t, n)."""
    res, par = _run(name, route)
    vf = _vector_field(name, route)
    n = _system(name).dim if route != "reduced" else len(_system(name).shape)
    y = res.y
    if par.ndim == 1:
        f = vf.evaluate("rhs", y.reshape(-1, y.shape[-1]), params=par).reshape(y.shape)
    else:
        f = np.stack([vf.evaluate("rhs", y[k], params=par[k]) for k in range(len(y))])
    return y[..., :n], f[..., :n]


ENERGY_CASES = [
    *[(name, route) for name in EXAMPLES for route in FULL_ROUTES],
    *[(name, "reduced") for name in CHAPLYGIN],
    ("unicycle", "plain"),
    ("carriage", "plain"),
    *[(f"veselova{n}", "reduced") for n in VESELOVA_N],
]
CONSTRAINT_CASES = [
    *[(name, route) for name in EXAMPLES for route in FULL_ROUTES],
    ("unicycle", "plain"),
    ("carriage", "plain"),
]


# ------------------------------------------------------------------------------- energy ----
@pytest.mark.parametrize(("name", "route"), ENERGY_CASES)
def test_energy_conserved(name: str, route: str) -> None:
    """Relative energy drift < 1e-10 over t in [0, 5] for 16 random initial states."""
    res, _ = _run(name, route)
    e = res.observables["energy"]
    scale = np.abs(e[:, :1])
    assert np.all(scale > 1e-5)  # a meaningful relative error
    drift = np.max(np.abs(e - e[:, :1]) / scale)
    assert drift < 1e-10, f"{name}/{route}: relative energy drift {drift:.2e}"
    # not vacuous: the states really move
    assert np.min(np.max(np.abs(res.y[:, -1] - res.y[:, 0]), axis=1)) > 1e-2


# -------------------------------------------------------------------------- constraints ----
@pytest.mark.parametrize(("name", "route"), CONSTRAINT_CASES)
def test_constraints_hold_along_the_flow(name: str, route: str) -> None:
    """``W(q) qdot = 0`` along the integrated trajectories, with ``qdot`` from the compiled
    right-hand side at the integrated states (relative residual < 1e-10), and that ``qdot``
    is the time derivative of the integrated ``q(t)`` (finite differences, loose)."""
    q, qd = _qdot(name, route)
    ex = EXAMPLES[name]
    fW = _numeric_data(name, plain=route == "plain")[1]
    flat_q, flat_qd = q.reshape(-1, q.shape[-1]), qd.reshape(-1, qd.shape[-1])
    W = _at(fW, flat_q, ex.params)
    resid = np.einsum("tka,ta->tk", W, flat_qd)
    scale = np.linalg.norm(W, axis=2) * np.linalg.norm(flat_qd, axis=1)[:, None] + 1e-300
    assert np.max(np.abs(resid) / scale) < 1e-10
    assert np.max(np.abs(resid)) < 1e-10
    # the rhs is what the integrator followed: compare with a central difference in time
    vf = _vector_field(name, route)
    res, par = _run(name, route)
    h = 1e-4
    x0 = res.y[:, 3]
    fine = nh.integrate(vf, x0, [T_EVAL[3], T_EVAL[3] + h], params=par, **TOL)
    back = nh.integrate(vf, x0, [T_EVAL[3], T_EVAL[3] - h], params=par, **TOL)
    n = q.shape[-1]
    fd = (fine.y[:, 1, :n] - back.y[:, 1, :n]) / (2 * h)
    assert np.max(np.abs(fd - qd[:, 3])) < 1e-6


# ------------------------------------------------------------------------- three routes ----
def _compare(name: str, ref: str, other: str, cols: list[int] | None = None) -> float:
    q1, qd1 = _qdot(name, ref)
    q2, qd2 = _qdot(name, other)
    if cols is not None:
        q1, qd1 = q1[..., cols], qd1[..., cols]
    scale = 1.0 + np.abs(q1) + np.abs(qd1)
    return float(max(np.max(np.abs(q1 - q2) / scale), np.max(np.abs(qd1 - qd2) / scale)))


@pytest.mark.parametrize("name", CHAPLYGIN)
def test_three_routes_agree(name: str) -> None:
    """Hamel, almost-Poisson and reduced (3.17) give the same ``(q, qdot)`` / ``(s, sdot)``
    curves to 1e-9 from the same point of D."""
    assert _compare(name, "hamel", "ap") < 1e-9
    S = _system(name)
    shape = [S.q.index(s) for s in S.shape]
    assert _compare(name, "hamel", "reduced", cols=shape) < 1e-9
    # the base (group) motion is not in the reduced state but moves: not a vacuous check
    q, _ = _qdot(name, "hamel")
    group = [S.q.index(g) for g in S.group]
    assert np.max(np.abs(q[:, -1, group] - q[:, 0, group])) > 1e-2


@pytest.mark.parametrize("name", ["unicycle", "carriage"])
def test_seed000_frame_agrees_with_horizontal_lifts(name: str) -> None:
    """Hamel equations in seed 000's frame (quasi-velocities ``(alpha, phidot)``) and in the
    horizontal lifts (seed 001 / Chaplygin) give the same motion."""
    assert _compare(name, "hamel", "plain") < 1e-9


def test_sleigh_hamel_and_almost_poisson_agree() -> None:
    assert _compare("sleigh", "hamel", "ap") < 1e-9
    q, _ = _qdot("sleigh", "hamel")
    assert np.min(np.cos(q[..., 2])) > 0.2  # the frame d/dx + tan(theta) d/dy stays regular


def test_carriage_closed_form_invariant_seed000() -> None:
    """``Y alpha^2 + X omega^2`` is constant (derived from seed 000 (6.2a)-(6.2b))."""
    m0, m1, l_, J, J2, R, c = EXAMPLES["carriage"].params
    m = m0 + 2 * m1
    X = m0 * l_ * R**2 / (m * R**2 + 2 * J2)
    Y = m0 * l_ * R**2 / (J * R**2 + 2 * J2 * c**2)
    res, _ = _run("carriage", "plain")
    alpha, omega = res.y[..., 5], res.y[..., 6]
    inv = Y * alpha**2 + X * omega**2
    assert np.max(np.abs(inv - inv[:, :1]) / inv[:, :1]) < 1e-10
    assert np.max(np.abs(alpha[:, -1] - alpha[:, 0])) > 1e-3  # alpha is not constant


def test_unicycle_closed_form_oracle_O_U3() -> None:
    """Seed 000 O-U3 (U = 0): circle of radius |alpha/omega| traversed at constant rates."""
    S = unicycle()
    vf = hamel_equations(S).as_vector_field()
    m, R, I, J = 1.0, 0.8, 0.2, 0.5  # noqa: E741
    x0, y0, ph0, th0, alpha, om = 0.5, -0.2, 0.3, 0.0, 0.6, 0.8
    t = np.linspace(0.0, 6.0, 25)
    res = nh.integrate(vf, [x0, y0, ph0, th0, om, alpha / R], t, params=[m, R, I, J], **TOL)
    ph = ph0 + om * t
    exact = np.stack(
        [
            x0 + alpha / om * (np.sin(ph) - np.sin(ph0)),
            y0 - alpha / om * (np.cos(ph) - np.cos(ph0)),
            ph,
            th0 + alpha / R * t,
        ],
        axis=1,
    )
    assert np.max(np.abs(res.y[0, :, :4] - exact)) < 1e-10


# --------------------------------------------------------------------- invariant measure ----
def test_sleigh_has_no_invariant_density() -> None:
    """Symbolically ``d Theta != 0`` (no basic measure); numerically the divergence of the
    reduced field in ``(s, p)`` is far from zero, while for the disk (``C = 0``) it vanishes."""
    meas = invariant_measure(chaplygin_sleigh())
    assert not meas.exact and meas.density is None
    assert "d Theta != 0" in meas.reason

    rng = np.random.default_rng(7)
    m = 200
    pts = np.column_stack(
        [
            rng.uniform(-1, 1, m),  # y
            rng.uniform(0.3, np.pi - 0.3, m),  # theta: inside the chart sin(theta) != 0
            rng.uniform(-1, 1, (m, 2)),  # p_y, p_theta
        ]
    )
    sleigh = chaplygin_equations(chaplygin_sleigh()).as_vector_field()
    cs = sleigh.compile(("divergence", "jacobian"))
    par = [1.2, 0.5, 0.4]
    div = cs.evaluate("divergence", pts, params=par)[:, 0]
    jac = cs.evaluate("jacobian", pts, params=par)
    scale = np.sum(np.abs(np.diagonal(jac, axis1=1, axis2=2)), axis=1) + 1e-300
    assert np.all(np.isfinite(div))
    assert np.median(np.abs(div) / scale) > 0.1
    assert np.median(np.abs(div)) > 1e-2

    disk = _vector_field("disk", "reduced")
    ph = rng.uniform(-3, 3, (m, 4))
    ddiv = disk.compile(("divergence",)).evaluate("divergence", ph, params=EXAMPLES["disk"].params)
    assert np.max(np.abs(ddiv)) < 1e-12


# ----------------------------------------------------------------------------- bad input ----
@pytest.mark.parametrize("n", VESELOVA_N)
def test_veselova_chart_point_outside_domain(n: int) -> None:
    """``gamma_n <= 0`` (``|s| >= 1``) is not a point of the hemisphere chart."""
    vf = _vector_field(f"veselova{n}", "reduced")
    par = np.linspace(1.0, 2.0, n)
    inside = np.full(2 * (n - 1), 0.1)
    for s in (np.eye(n - 1)[0], np.full(n - 1, 0.8)):  # gamma_n = 0 exactly, |s| > 1
        x0 = np.vstack([inside, np.concatenate([s, np.zeros(n - 1)])])
        with pytest.raises(ValueError, match=r"hemisphere chart: gamma_n > 0.*row 1"):
            nh.integrate(vf, x0, [0.0, 1.0], params=par)


def test_reduced_state_of_wrong_route() -> None:
    """A Hamel state (q, v) given to the reduced equations names the expected shape."""
    vf = _vector_field("unicycle", "reduced")
    with pytest.raises(ValueError, match=r"x0 must have shape \(4,\)"):
        nh.integrate(vf, np.zeros(6), [0.0, 1.0], params=EXAMPLES["unicycle"].params)


def test_carriage_params_wrong_length() -> None:
    vf = _vector_field("carriage", "reduced")
    with pytest.raises(ValueError, match=r"params must have shape \(7,\).*m0, m1, l, J, J2, R, c"):
        nh.integrate(vf, np.zeros(4), [0.0, 1.0], params=[1.0, 2.0])


def test_unicycle_chaplygin_form_rejects_non_invariant_potential() -> None:
    with pytest.raises(ValueError, match=r"potential depends on group coordinate\(s\) x, y"):
        unicycle(potential=lambda x, y, ph, th: (x**2 + y**2) / 2)
    # the plain form accepts it (seed 000 O-U6 uses such potentials)
    S = unicycle(potential=lambda x, y, ph, th: (x**2 + y**2) / 2, as_chaplygin=False)
    assert S.potential.free_symbols == set(S.q[:2])


def test_undeclared_symbol_in_potential() -> None:
    k = sp.Symbol("k")
    with pytest.raises(ValueError, match="potential contains undeclared symbol.*k"):
        two_wheeled_carriage(potential=lambda p1, p2, x, y, th: k * p1**2)


@pytest.mark.xfail(
    strict=True,
    raises=IntegrationError,
    reason="library gap (reported): trajectories leaving a chart fail as 'step size underflow'",
)
def test_veselova_trajectory_leaving_the_chart() -> None:
    vf = _vector_field("veselova3", "reduced")
    with pytest.raises(ValueError, match="hemisphere chart"):
        nh.integrate(vf, [0.6, 0.6, 3.0, 3.0], [0.0, 5.0], params=[1.0, 2.0, 3.0])


def test_veselova_non_positive_inertia() -> None:
    vf = _vector_field("veselova5", "reduced")
    x0 = np.full(8, 0.1)
    with pytest.raises(ValueError, match="a2"):
        nh.integrate(vf, x0, [0.0, 1.0], params=[1.0, -1.0, 2.0, 1.0, 1.0])


def test_sleigh_chaplygin_chart_singular_point() -> None:
    """The sleigh's chart (G = x-translations) splits T_qQ = D + g.q only where
    det W_g = -sin(theta) != 0: a state on the locus is rejected at integrate time, naming the
    condition; a state off it integrates, and K blows up as theta -> 0 (independent check that
    the locus is the right one: K_yy = m / sin^2 theta)."""
    sleigh = chaplygin_sleigh()
    th = sleigh.shape[1]
    assert sp.simplify(sleigh.splitting_determinant**2 - sp.sin(th) ** 2) == 0
    vf = chaplygin_equations(sleigh).as_vector_field()
    # (theta = pi in floating point has sin = 1.2e-16 != 0: the domain is the exact locus)
    with pytest.raises(ValueError, match=r"splitting det W_g = -sin\(theta\) != 0"):
        nh.integrate(vf, [0.0, 0.0, 1.0, 1.0], [0.0, 1.0], params=[1.0, 1.0, 1.0])
    # one bad row in a batch is named by its index
    x0 = [[0.3, 1.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]]
    with pytest.raises(ValueError, match="fails at row 1"):
        nh.integrate(vf, x0, [0.0, 1.0], params=[1.0, 1.0, 1.0])
    res = nh.integrate(vf, [0.0, 1.0, 1.0, 1.0], [0.0, 0.1], params=[1.0, 1.0, 1.0])
    assert np.all(res.status == 0)
    K = sleigh.reduce().K
    m = sleigh.params[0]
    assert sp.simplify(K[0, 0] - m / sp.sin(th) ** 2) == 0
    assert vf.domain and all(e.free_symbols <= {th} for e in vf.domain.values())


@pytest.mark.parametrize("form", ["ap", "hamel"])
def test_sleigh_chaplygin_frame_domain_unreduced(form: str) -> None:
    """The unreduced forms of the sleigh as a ChaplyginSystem use its horizontal lifts as the
    frame of D, (1/tan(theta), 1, 0) and (-b/sin(theta), 0, 1): singular at sin(theta) = 0 too,
    so they carry the same domain; a plain NonholonomicSystem with the blade frame does not."""
    sleigh = chaplygin_sleigh()
    x, y, th = sleigh.q
    assert sleigh.frame.subs(th, 0).has(sp.zoo)  # the frame itself blows up there
    build = almost_poisson_equations if form == "ap" else hamel_equations
    vf = build(sleigh).as_vector_field()
    with pytest.raises(ValueError, match=r"splitting det W_g = -sin\(theta\) != 0"):
        nh.integrate(vf, [0.0, 0.0, 0.0, 1.0, 1.0], [0.0, 0.1], params=[1.0, 1.0, 1.0])
    blade = build(chaplygin_sleigh(as_chaplygin=False, blade_frame=True)).as_vector_field()
    assert not blade.domain


def test_evaluate_outside_the_chart() -> None:
    vf = _vector_field("veselova3", "reduced")
    with pytest.raises(ValueError, match="hemisphere chart"):
        vf.evaluate("rhs", [0.9, 0.9, 0.0, 0.0], params=[1.0, 2.0, 3.0])


def test_evaluate_rejects_a_negative_inertia() -> None:
    vf = _vector_field("veselova3", "reduced")
    with pytest.raises(ValueError, match="a2 .*declared positive"):
        vf.evaluate("rhs", [0.1, 0.1, 0.0, 0.0], params=[1.0, -2.0, 3.0])
