"""The Taylor method (``nh.integrate(..., method="taylor")``) on the example systems.

References are independent of the Taylor code: DOP853 (nhfast's, itself checked against
SciPy in ``test_scipy_agreement.py``; SciPy's own for the plain vector fields) at tight
tolerance, first integrals (energy, ``|gamma|^2``, ``gamma . m``, ...), closed forms (the
harmonic oscillator and its zero crossings, ``y' = y cos t``), and the order of the method
itself (fixed ``h`` and ``order``: halving ``h`` divides the global error by ``2^p``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import solve_ivp

import nhfast as nh
from nhfast._abi import METHODS
from nhfast.errors import IntegrationWarning

pytestmark = pytest.mark.skipif(
    "taylor" not in METHODS, reason="the core has no method 'taylor' yet"
)

TIGHT = {"rtol": 1e-13, "atol": 1e-13}
#: Cases run by default; the others (longer derivations or kernels that take 3-20 s to
#: compile) are marked slow.
DEFAULT = (
    "henon_heiles",
    "pendulum",
    "kepler",
    "duffing",
    "suslov",
    "veselova_structured_4",
    "veselova_structured_16",
)


# ------------------------------------------------------------------------ the systems ----
def _unit(rng: np.random.Generator, k: int, n: int) -> np.ndarray:
    g = rng.normal(size=(k, n))
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def _perp(rng: np.random.Generator, b: np.ndarray, scale: float = 1.0) -> np.ndarray:
    m = scale * rng.normal(size=b.shape)
    return m - np.sum(m * b, axis=1, keepdims=True) * b / np.sum(b * b, axis=1, keepdims=True)


@dataclass
class Case:
    """A system, how to draw ``k`` valid (states, params), its first integrals, a horizon."""

    build: Callable[[], Any]
    draw: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray | None]]
    invariants: tuple[str, ...] = ()
    T: float = 3.0
    long: float | None = None  # horizon of the first-integral runs (default 10 T)


@functools.cache
def henon_heiles() -> nh.HamiltonianSystem:
    x, y, px, py = sp.symbols("x y px py")
    H = (px**2 + py**2) / 2 + (x**2 + y**2) / 2 + x**2 * y - y**3 / 3
    return nh.HamiltonianSystem([x, y], [px, py], H, name="henon-heiles")


@functools.cache
def fpu_chain(m: int = 8) -> nh.HamiltonianSystem:
    """An FPU-beta chain of ``m`` particles with fixed ends (2 m states, an unrolled
    kernel): with m = 8, 16 states, one trajectory's series runs packed (csrc/taylor.c)."""
    q = sp.symbols(f"q:{m}")
    p = sp.symbols(f"p:{m}")
    b = sp.Symbol("beta")
    ext = [sp.Integer(0), *q, sp.Integer(0)]
    d = [ext[i + 1] - ext[i] for i in range(m + 1)]
    H = sum(pi**2 for pi in p) / 2 + sum(di**2 / 2 + b * di**4 / 4 for di in d)
    return nh.HamiltonianSystem(list(q), list(p), H, params=[b], name="fpu-8")


@functools.cache
def pendulum() -> nh.HamiltonianSystem:
    th, p, w = sp.symbols("theta p w")
    return nh.HamiltonianSystem([th], [p], p**2 / 2 - w**2 * sp.cos(th), params=[w])


@functools.cache
def kepler() -> nh.VectorField:
    """Planar Kepler problem with the angular momentum as an observable."""
    x, y, u, v = sp.symbols("x y u v")
    r3 = (x**2 + y**2) ** sp.Rational(-3, 2)
    return nh.VectorField(
        [x, y, u, v],
        [u, v, -x * r3, -y * r3],
        observables={
            "energy": (u**2 + v**2) / 2 - 1 / sp.sqrt(x**2 + y**2),
            "angular_momentum": x * v - y * u,
        },
        name="kepler",
    )


@functools.cache
def duffing() -> nh.VectorField:
    """Forced, damped Duffing oscillator: a time-dependent right-hand side."""
    x, v, t, d, g, w = sp.symbols("x v t delta g omega")
    return nh.VectorField(
        [x, v], [v, -d * v - x - x**3 + g * sp.cos(w * t)], params=[d, g, w], time=t
    )


@functools.cache
def sleigh() -> nh.VectorField:
    from nhfast.symbolic.equations import hamel_equations
    from nhfast.systems import chaplygin_sleigh

    S = chaplygin_sleigh(as_chaplygin=False, blade_frame=True)
    return hamel_equations(S).as_vector_field()


@functools.cache
def disk() -> nh.VectorField:
    from nhfast.symbolic.equations import chaplygin_equations
    from nhfast.systems import vertical_rolling_disk

    S = vertical_rolling_disk(potential=lambda ph, th: sp.cos(ph) + th**2 / 2)
    return chaplygin_equations(S).as_vector_field()


@functools.cache
def suslov() -> nh.VectorField:
    from nhfast.systems import suslov as build

    return build().as_vector_field()


@functools.cache
def veselova_so3() -> nh.VectorField:
    from nhfast.systems import veselova

    return veselova(3, form="so3").as_vector_field()


@functools.cache
def ball() -> nh.VectorField:
    from nhfast.systems import chaplygin_ball

    return chaplygin_ball()


@functools.cache
def veselova_structured(n: int):
    from nhfast.systems import veselova

    return veselova(n, form="structured")


@functools.cache
def rigid_body(n: int, inertia: str):
    from nhfast.systems import veselova

    return veselova(n, form="structured", inertia=inertia)


@functools.cache
def lie_body(n: int):
    from references.rigid_body_lie import rigid_body_inertia, rigid_body_lie_system

    inertia, params = rigid_body_inertia(n, "physical")
    S = rigid_body_lie_system(n, inertia, "space_fixed", None, params)
    return S, S.projected_vector_field()  # a 6 x 6 LU solve per evaluation


@functools.cache
def derived(name: str) -> nh.VectorField:
    """The other example systems of nhfast.systems, through their equations of motion."""
    from nhfast import systems
    from nhfast.symbolic.equations import chaplygin_equations, hamel_equations
    from nhfast.systems.heisenberg import heisenberg

    if name == "particle":
        S = systems.nonholonomic_particle(potential=lambda x, y: x**2 / 2 + y**2)
        return chaplygin_equations(S).as_vector_field()
    if name == "veselova_chart_3":
        return chaplygin_equations(systems.veselova(3), simplify=False).as_vector_field()
    if name == "suslov_rigid_body_4":
        return systems.suslov_rigid_body(4, "physical")
    if name == "veselova_embedded_3":
        return systems.veselova(3, form="embedded")
    S = {
        "unicycle": lambda: systems.unicycle(
            potential=lambda x, y, ph, th: sp.cos(ph) + th**2 / 2, as_chaplygin=False
        ),
        "two_constraint": systems.two_constraint_system,
        "heisenberg": heisenberg,
        "contact_particle": systems.contact_particle,
    }[name]()
    return hamel_equations(S).as_vector_field()


def _draw_box(n: int, npar: int, lo=-1.0, hi=1.0, plo=0.5, phi=1.5):
    def draw(rng, k):
        par = rng.uniform(plo, phi, size=(k, npar)) if npar else None
        return rng.uniform(lo, hi, size=(k, n)), par

    return draw


def _draw_two(rng, k):  # (x, y, z, v_1), (k,): the Hamel frame is singular at y = 0
    x0 = rng.uniform(-0.5, 0.5, (k, 4))
    x0[:, 1] = rng.uniform(0.6, 1.0, k)
    return x0, rng.uniform(0.5, 1.5, (k, 1))


def _draw_chart(rng, k):  # (s1, s2, p_s1, p_s2) on the hemisphere chart, (a1, a2, a3)
    x0 = np.hstack([rng.uniform(-0.4, 0.4, (k, 2)), rng.uniform(-0.5, 0.5, (k, 2))])
    return x0, rng.uniform(1, 2, size=(k, 3))


def _draw_suslov_rb(rng, k):  # (gamma, m), m orthogonal to the body axis e (last params)
    from nhfast.systems import rigid_body_params

    P = np.stack([rigid_body_params(4, "physical", rng, axis=True) for _ in range(k)])
    g = _unit(rng, k, 4)
    return np.hstack([g, _perp(rng, P[:, -4:])]), P


def _draw_hh(rng, k):
    return rng.uniform(-0.3, 0.3, size=(k, 4)), None


def _draw_fpu(rng, k):
    return rng.uniform(-0.5, 0.5, size=(k, 16)), rng.uniform(0.5, 1.5, size=(k, 1))


def _draw_pendulum(rng, k):
    return rng.uniform(-1.5, 1.5, size=(k, 2)), rng.uniform(0.5, 1.5, size=(k, 1))


def _draw_kepler(rng, k):
    e = rng.uniform(0.0, 0.5, k)  # perihelion at (1, 0): speed sqrt(1 + e)
    return np.column_stack([np.ones(k), np.zeros(k), np.zeros(k), np.sqrt(1 + e)]), None


def _draw_duffing(rng, k):
    par = np.column_stack([rng.uniform(0.1, 0.3, k), rng.uniform(0.2, 0.5, k), np.full(k, 1.2)])
    return rng.uniform(-1, 1, size=(k, 2)), par


def _draw_sleigh(rng, k):  # (x, y, theta, v_1, v_2), (m, I, b)
    x0 = np.column_stack([rng.normal(size=(k, 3)), rng.normal(size=(k, 2))])
    return x0, rng.uniform(0.5, 1.5, size=(k, 3))


def _draw_disk(rng, k):  # (phi, theta, p_phi, p_theta), (m, R, I, J)
    return rng.uniform(-1, 1, size=(k, 4)), rng.uniform(0.5, 1.5, size=(k, 4))


def _draw_suslov(rng, k):  # (Omega1, Omega2, Omega3 = 0), (I1, I2, I3, I13, I23)
    par = np.column_stack([rng.uniform(2, 4, (k, 3)), rng.uniform(-0.5, 0.5, (k, 2))])
    return np.column_stack([rng.normal(size=(k, 2)), np.zeros(k)]), par


def _draw_veselova_so3(rng, k):  # (omega, gamma), omega . gamma = 0, |gamma| = 1
    g = _unit(rng, k, 3)
    return np.hstack([_perp(rng, g), g]), rng.uniform(1, 2, size=(k, 3))


def _draw_ball(rng, k):  # (M, gamma), |gamma| = 1; (I1, I2, I3, m, a)
    par = np.column_stack([rng.uniform(1, 2, (k, 3)), rng.uniform(0.5, 1.5, (k, 2))])
    return np.hstack([rng.normal(size=(k, 3)), _unit(rng, k, 3)]), par


def _draw_embedded(n: int, params: Callable[[np.random.Generator], np.ndarray]):
    def draw(rng, k):
        g = _unit(rng, k, n)
        return np.hstack([g, _perp(rng, g)]), np.stack([params(rng) for _ in range(k)])

    return draw


def _rb_params(n: int, inertia: str):
    from nhfast.systems import rigid_body_params

    return lambda rng: rigid_body_params(n, inertia, rng)


def _draw_lie(n: int):
    from references.rigid_body_lie import lie_from_embedded

    def draw(rng, k):
        S, _ = lie_body(n)
        g = _unit(rng, k, n)
        P = rng.uniform(1, 2, size=(k, n))
        return lie_from_embedded(g, _perp(rng, g), P, S), P

    return draw


CASES: dict[str, Case] = {
    "henon_heiles": Case(henon_heiles, _draw_hh, ("energy",), T=5.0),
    "pendulum": Case(pendulum, _draw_pendulum, ("energy",), T=5.0),
    "fpu_8": Case(fpu_chain, _draw_fpu, ("energy",)),
    "kepler": Case(kepler, _draw_kepler, ("energy", "angular_momentum"), T=5.0),
    "duffing": Case(duffing, _draw_duffing, (), T=5.0),
    "sleigh": Case(sleigh, _draw_sleigh, ("energy",)),
    "rolling_disk": Case(disk, _draw_disk, ("energy",)),
    "suslov": Case(suslov, _draw_suslov, ("energy", "constraint")),
    "veselova_so3": Case(veselova_so3, _draw_veselova_so3, ("energy", "constraint", "gamma_norm")),
    "chaplygin_ball": Case(ball, _draw_ball, ("energy", "M_gamma", "gamma2", "M2")),
    "veselova_structured_4": Case(
        lambda: veselova_structured(4),
        _draw_embedded(4, lambda rng: rng.uniform(1, 2, 4)),
        ("energy", "gamma_norm", "momentum_constraint"),
    ),
    # 32 states, sums over 16 components: one trajectory's series packed (csrc/taylor.c),
    # the kernel's sums in eight partial sums (taylor_ops.h). Its energy drifts about 0.06
    # tol per time unit at tol 1e-12 (1.9 tol over 10 T = 30, with the sums left to right
    # as well): the first-integral run is 10 time units long
    "veselova_structured_16": Case(
        lambda: veselova_structured(16),
        _draw_embedded(16, lambda rng: rng.uniform(1, 2, 16)),
        ("energy", "gamma_norm", "momentum_constraint"),
        long=10.0,
    ),
    "rigid_body_physical_5": Case(
        lambda: rigid_body(5, "physical"),
        _draw_embedded(5, _rb_params(5, "physical")),
        ("energy", "gamma_norm", "momentum_constraint"),
    ),
    "rigid_body_pairwise_5": Case(
        lambda: rigid_body(5, "pairwise"),
        _draw_embedded(5, _rb_params(5, "pairwise")),
        ("energy", "gamma_norm", "momentum_constraint"),
    ),
    "particle": Case(lambda: derived("particle"), _draw_box(4, 1, plo=0.2, phi=0.5), ("energy",)),
    "unicycle": Case(lambda: derived("unicycle"), _draw_box(6, 4), ("energy",)),
    "two_constraint": Case(lambda: derived("two_constraint"), _draw_two, ("energy",)),
    "heisenberg": Case(lambda: derived("heisenberg"), _draw_box(5, 0), ("energy",)),
    "contact_particle": Case(lambda: derived("contact_particle"), _draw_box(5, 0), ("energy",)),
    # the hemisphere chart is left (|s| -> 1) after ~5 time units for these data
    "veselova_chart_3": Case(
        lambda: derived("veselova_chart_3"), _draw_chart, ("energy",), T=2.0, long=4.0
    ),
    "veselova_embedded_3": Case(
        lambda: derived("veselova_embedded_3"),
        _draw_embedded(3, lambda rng: rng.uniform(1, 2, 3)),
        ("energy", "gamma_norm", "momentum_constraint"),
    ),
    "suslov_rigid_body_4": Case(
        lambda: derived("suslov_rigid_body_4"), _draw_suslov_rb, ("energy", "momentum_constraint")
    ),
    "rigid_body_lie_4": Case(
        lambda: lie_body(4)[1], _draw_lie(4), ("energy", "constraint", "gamma_norm")
    ),  # Omega in so(4) (6 components) and gamma
}


def _cases(names) -> list:
    return [n if n in DEFAULT else pytest.param(n, marks=pytest.mark.slow) for n in names]


def _run(case: Case, x0, par, t, method: str, **kw) -> nh.IntegrationResult:
    kw = {**TIGHT, **kw}
    return nh.integrate(case.build(), x0, t, method=method, params=par, **kw)


# ---------------------------------------------------------------- agreement with DOP853 ----
@pytest.mark.parametrize("name", _cases(CASES))
def test_agrees_with_dop853(name):
    case = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    x0, par = case.draw(rng, 4)
    t = np.linspace(0.0, case.T, 7)
    tay = _run(case, x0, par, t, "taylor")
    ref = _run(case, x0, par, t, "dop853")
    assert tay.success and np.array_equal(tay.y[:, 0], x0)
    scale = 1.0 + np.max(np.abs(ref.y))
    # both are accurate to ~1e-13 here (measured differences 1e-14 .. 3e-13 of the scale)
    assert np.max(np.abs(tay.y - ref.y)) < 1e-11 * scale
    assert np.max(np.abs(tay.y[:, -1] - x0)) > 1e-3  # the motion is not trivial
    # one kernel call per step, no rejected steps
    assert np.array_equal(tay.stats["rhs_evals"], tay.stats["steps"])
    assert np.all(tay.stats["rejected"] == 0)
    # a Taylor step of order ~16 is much longer than a DOP853 step at the same tolerance
    assert np.all(tay.stats["steps"] < ref.stats["steps"])


@pytest.mark.parametrize("name", _cases(["pendulum", "kepler", "duffing", "sleigh"]))
def test_agrees_with_scipy(name):
    """Plain vector fields also against SciPy's DOP853 (lambdified right-hand side)."""
    case = CASES[name]
    vf = case.build()
    rng = np.random.default_rng(5)
    x0, par = case.draw(rng, 2)
    t = np.linspace(0.0, case.T, 6)
    tay = _run(case, x0, par, t, "taylor")
    args = [vf.time or sp.Symbol("nh_unused_t"), vf.states, vf.params]
    f = sp.lambdify(args, vf.rhs)
    for i in range(len(x0)):
        p = [] if par is None else par[i]
        ref = solve_ivp(lambda s, y, p=p: f(s, y, p), (0.0, case.T), x0[i], method="DOP853",
                        t_eval=t, rtol=1e-13, atol=1e-13)  # fmt: skip
        assert np.max(np.abs(tay.y[i] - ref.y.T)) < 1e-10 * (1 + np.max(np.abs(ref.y)))


def test_closed_form_nonautonomous_with_initial_time():
    """y' = y cos t from t0 = 0.7 (forwards) and t0 = 2 (backwards): y0 exp(sin t - sin t0)."""
    y, s = sp.symbols("y s")
    growth = nh.VectorField([y], [y * sp.cos(s)], time=s)
    y0 = np.array([[1.0], [-0.3], [2.5]])
    for t in (np.linspace(0.7, 9.0, 12), np.linspace(2.0, -6.0, 9)):
        for tol in (1e-8, 1e-13):
            res = nh.integrate(growth, y0, t, method="taylor", rtol=tol, atol=tol)
            exact = y0[:, None, :] * np.exp(np.sin(t) - np.sin(t[0]))[None, :, None]
            # the contract: a final error of ~1-5x tol; measured 0.006-0.022 tol over ~30 steps
            err = np.max(np.abs(res.y - exact) / (np.abs(exact) + 1))
            assert err < tol, (err, res.stats["steps"])


@pytest.mark.parametrize(
    "rhs, x0, tol",
    [
        # x'' = -x^3 from (x0, 1): x' vanishes (nearly) at orders 2, 3 mod 4; order 15
        ("duffing", [0.0, 1.0], 1e-12),
        ("duffing", [1e-12, 1.0], 1e-12),
        ("duffing", [1e-8, 1.0], 2e-12),
        # y' = 1 - y^3 from (near) 0: coefficients at orders 1 mod 3 (nearly) only
        ("cubic", [0.0], 1e-12),
        ("cubic", [1e-8], 1e-9),
        ("cubic", [2e-280], 1e-12),
        # y' = 1 - y^4 from 0: orders 1 mod 4 only, three zero orders in a row
        ("quartic", [0.0], 1e-12),
    ],
)
def test_series_that_vanish_at_the_last_orders(rhs, x0, tol):
    """Steps from series whose last coefficients vanish, or nearly, without the series
    ending: Jorba & Zou's rule on the last two orders took one step to the end there (x'' =
    -x^3 from (0, 1) at tol 1e-12: an error of 500 at t = 3; from (1e-12, 1): 1.7e-3). The
    final state must agree with SciPy's DOP853 at tight tolerance."""
    x, v = sp.symbols("x v")
    f = {
        "duffing": ([x, v], [v, -(x**3)], lambda t, u: [u[1], -(u[0] ** 3)]),
        "cubic": ([x], [1 - x**3], lambda t, u: [1 - u[0] ** 3]),
        "quartic": ([x], [1 - x**4], lambda t, u: [1 - u[0] ** 4]),
    }[rhs]
    vf = nh.VectorField(f[0], f[1])
    T = 3.0 if rhs == "duffing" else 1.0
    res = nh.integrate(vf, np.array(x0), [0.0, T], method="taylor", rtol=tol, atol=tol)
    ref = solve_ivp(f[2], (0.0, T), x0, method="DOP853", rtol=1e-13, atol=1e-14)
    err = np.max(np.abs(res.y[0, -1] - ref.y[:, -1]))
    assert err < 50 * tol, (err, res.stats["steps"])


@pytest.mark.parametrize("pairs", [1, 10])
def test_polynomial_solution_takes_one_step(pairs):
    """x' = 1, y' = x (``pairs`` copies: 20 states run one trajectory's series packed, see
    csrc/taylor.c): the series ends at order 2 (every later coefficient is exactly zero), so
    one step reaches the end, exactly."""
    xs = sp.symbols(f"x:{pairs}")
    ys = sp.symbols(f"y:{pairs}")
    states = [s for pair in zip(xs, ys, strict=True) for s in pair]
    rhs = [f for x in xs for f in (sp.Integer(1), x)]
    vf = nh.VectorField(states, rhs)
    x0 = np.tile([0.5, -1.0], pairs) + np.repeat(np.arange(pairs) / 8.0, 2)
    res = nh.integrate(vf, x0, [0.0, 7.0], method="taylor")
    assert res.stats["steps"][0] == 1
    a, b = x0[0::2], x0[1::2]
    exact = np.column_stack([a + 7.0, b + 7.0 * a + 24.5]).ravel()
    np.testing.assert_allclose(res.y[0, -1], exact, rtol=1e-15)


# ---------------------------------------------------------------------- first integrals ----
@pytest.mark.parametrize("name", _cases([n for n in CASES if CASES[n].invariants]))
def test_first_integrals(name):
    """Over ~10x the agreement horizon (10-200 steps) the first integrals stay within one
    tolerance (measured: at most 0.09 tol, rigid bodies; 0.003-0.05 tol for the others).

    The scale is that of a quadratic invariant of the state: 1 + |I(x0)| + max|x|^2.
    """
    case = CASES[name]
    rng = np.random.default_rng(3 + sum(map(ord, name)))
    x0, par = case.draw(rng, 3)
    tol = 1e-12
    t = np.linspace(0.0, case.long or 10 * case.T, 11)
    res = _run(case, x0, par, t, "taylor", rtol=tol, atol=tol)
    assert res.success
    for inv in case.invariants:
        v = res.observables[inv]
        drift = np.abs(v - v[:, :1])
        scale = 1.0 + np.abs(v[:, :1]) + np.max(np.abs(res.y), axis=(1, 2))[:, None] ** 2
        assert np.all(drift <= tol * scale), (inv, np.max(drift / scale))


def test_harmonic_energy_over_long_run():
    """H = (p^2 + w^2 q^2)/2 over 100 periods: the closed form and the energy."""
    q, p, w = sp.symbols("q p w")
    osc = nh.HamiltonianSystem([q], [p], (p**2 + w**2 * q**2) / 2, params=[w])
    x0 = np.array([[1.0, 0.0], [0.3, -0.8]])
    T = 100 * 2 * np.pi / 1.3
    t = np.linspace(0, T, 5)
    tol = 1e-13
    res = nh.integrate(osc, x0, t, method="taylor", params=[1.3], rtol=tol, atol=tol)
    c, s = np.cos(1.3 * t), np.sin(1.3 * t)
    qe = x0[:, :1] * c + x0[:, 1:] / 1.3 * s
    pe = -x0[:, :1] * 1.3 * s + x0[:, 1:] * c
    # the phase error grows linearly: at most ~tol per step (measured 0.04 tol/step, 750
    # steps); the energy error does not grow (measured 1.1 tol)
    steps = res.stats["steps"]
    assert np.all(np.max(np.abs(res.y[..., 0] - qe), axis=1) < steps * tol)
    assert np.all(np.max(np.abs(res.y[..., 1] - pe), axis=1) < steps * tol)
    e = res.observables["energy"]
    assert np.max(np.abs(e - e[:, :1])) < 5 * tol


# ---------------------------------------------------------------------- order of the method ----
@pytest.mark.parametrize(
    ("order", "hs"), [(3, (0.1, 0.05, 0.025)), (5, (0.2, 0.1, 0.05)), (8, (0.4, 0.2, 0.1))]
)
def test_convergence_order_fixed_step(order, hs):
    """Hénon-Heiles and the pendulum with a fixed step h and a fixed order p: the global error
    at T = 2 falls like h^p (ratio 2^p on halving h, within a factor 1.5 either side).

    The steps are in the asymptotic range for these amplitudes (observed orders within 0.25 of
    p); the smallest error (~1e-12 at p = 8) is still ~100x the DOP853 reference's error.
    """
    for name, amplitude in (("henon_heiles", 1.0), ("pendulum", 0.5)):
        case = CASES[name]
        x0, par = case.draw(np.random.default_rng(9), 2)
        x0 = amplitude * x0
        t = np.array([0.0, 2.0])
        ref = _run(case, x0, par, t, "dop853", rtol=1e-15, atol=1e-15).y[:, -1]
        errs = []
        for h in hs:
            res = _run(case, x0, par, t, "taylor", order=order, h=h)
            assert np.all(res.stats["steps"] == round(2.0 / h))
            errs.append(np.max(np.abs(res.y[:, -1] - ref)))
        assert min(errs) > 1e-12, errs
        ratios = np.array(errs[:-1]) / np.array(errs[1:])
        assert np.all((ratios > 2**order / 1.5) & (ratios < 2**order * 1.5)), (name, ratios)


def test_fixed_order_adaptive_step_meets_tolerance():
    """A user-chosen order with the adaptive step: the tolerance still governs the error."""
    case = CASES["henon_heiles"]
    x0, par = case.draw(np.random.default_rng(10), 3)
    t = np.array([0.0, 5.0])
    ref = _run(case, x0, par, t, "dop853", rtol=1e-14, atol=1e-14).y[:, -1]
    steps = []
    for order in (8, 12, 20):
        res = _run(case, x0, par, t, "taylor", rtol=1e-11, atol=1e-11, order=order)
        assert np.max(np.abs(res.y[:, -1] - ref)) < 1e-9
        steps.append(res.stats["steps"].sum())
    assert steps[0] > steps[1] > steps[2]  # a higher order takes longer steps


def test_order_and_h_arguments():
    case = CASES["pendulum"]
    x0, par = case.draw(np.random.default_rng(0), 1)
    for bad in (0, 101, -3):
        with pytest.raises(ValueError, match="order"):
            _run(case, x0, par, [0.0, 1.0], "taylor", order=bad)
    with pytest.raises((TypeError, ValueError), match="order"):
        _run(case, x0, par, [0.0, 1.0], "taylor", order=2.5)
    with pytest.raises(ValueError, match="order"):
        _run(case, x0, par, [0.0, 1.0], "dop853", order=10)


def test_fixed_step_lands_on_the_final_time():
    """h = 0.3 on [0, 1]: three full steps and a shortened last one; order 20 is exact to
    round-off for the oscillator."""
    osc = oscillator()
    x0 = np.array([[1.0, 0.0], [0.2, 0.7]])
    res = nh.integrate(osc, x0, [0.0, 0.5, 1.0], method="taylor", params=[1.3], h=0.3, order=20)
    assert np.all(res.stats["steps"] == 4) and np.all(res.t_reached == 1.0)
    t = np.array([0.0, 0.5, 1.0])
    q = x0[:, :1] * np.cos(1.3 * t) + x0[:, 1:] / 1.3 * np.sin(1.3 * t)
    assert np.max(np.abs(res.y[..., 0] - q)) < 1e-14


@pytest.mark.parametrize("name", ["henon_heiles", "fpu_8", "veselova_structured_16"])
def test_fixed_step_one_trajectory_as_in_a_batch(name):
    """With a fixed step and order, a trajectory alone (for 16 states or more its series
    packed, csrc/taylor.c) gives the bits it gives in a batch, outputs inside the steps
    included, and converges: halving h divides the error at order 6 by about 2^6."""
    case = CASES[name]
    x0, par = case.draw(np.random.default_rng(5), 5)
    t = np.linspace(0.0, 1.0, 4)  # outputs between the steps
    kw = {"h": 0.07, "order": 6}
    batch = _run(case, x0, par, t, "taylor", **kw)
    one = None if par is None else par[2]
    alone = _run(case, x0[2], one, t, "taylor", **kw)
    assert np.array_equal(alone.y[0], batch.y[2])
    assert alone.stats["steps"][0] == batch.stats["steps"][2] == 15
    ref = _run(case, x0[2], one, t, "dop853", rtol=1e-13, atol=1e-13)
    half = _run(case, x0[2], one, t, "taylor", h=0.035, order=6)
    e1 = np.max(np.abs(alone.y[0, -1] - ref.y[0, -1]))
    e2 = np.max(np.abs(half.y[0, -1] - ref.y[0, -1]))
    assert 2**6 / 1.5 < e1 / e2 < 2**6 * 1.5, (e1, e2)  # measured 62, 64


def test_max_steps_is_a_lane_status():
    case = CASES["henon_heiles"]
    x0, par = case.draw(np.random.default_rng(14), 2)
    with pytest.warns(IntegrationWarning, match="maximum number of steps"):
        res = _run(case, x0, par, [0.0, 50.0], "taylor", max_steps=5, keep_failed=True)
    assert np.all(res.status == 3)  # NH_LANE_MAX_STEPS
    assert np.all(res.stats["steps"] == 5) and np.all(res.t_reached < 50.0)


# ------------------------------------------------------------------------------ outputs ----
def test_steps_do_not_depend_on_output_times():
    """Outputs come from the step polynomials: 2 or 300 output times, the same steps and the
    same final state (the last step lands on the final time)."""
    case = CASES["henon_heiles"]
    x0, par = case.draw(np.random.default_rng(11), 3)
    runs = {nt: _run(case, x0, par, np.linspace(0, 10, nt), "taylor", rtol=1e-12, atol=1e-12)
            for nt in (2, 300)}  # fmt: skip
    assert np.array_equal(runs[2].stats["steps"], runs[300].stats["steps"])
    assert np.array_equal(runs[2].y[:, -1], runs[300].y[:, -1])
    assert np.all(runs[300].stats["steps"] < 100)
    for dense in (True, False):  # accepted, and the same numbers
        d = _run(case, x0, par, np.linspace(0, 10, 300), "taylor", rtol=1e-12, atol=1e-12,
                 dense=dense)  # fmt: skip
        assert np.array_equal(d.y, runs[300].y)
    ref = _run(case, x0, par, np.linspace(0, 10, 300), "dop853", dense=True)
    assert np.max(np.abs(runs[300].y - ref.y)) < 1e-9


def test_hmax_is_honoured():
    case = CASES["henon_heiles"]
    x0, par = case.draw(np.random.default_rng(12), 2)
    free = _run(case, x0, par, [0.0, 4.0], "taylor", rtol=1e-10, atol=1e-10)
    capped = _run(case, x0, par, [0.0, 4.0], "taylor", rtol=1e-10, atol=1e-10, hmax=0.05)
    assert np.all(capped.stats["steps"] >= 80) and np.all(free.stats["steps"] < 80)
    assert np.max(np.abs(capped.y - free.y)) < 1e-8


# ------------------------------------------------------------------------------- events ----
@functools.cache
def oscillator() -> nh.VectorField:
    x, v, w = sp.symbols("x v w")
    return nh.VectorField([x, v], [v, -(w**2) * x], params=[w])


def _zero_crossings(x0, w, t1):
    """Times in (0, t1] where x = A cos(w t - phi) crosses zero, and the crossing's sign."""
    phi = np.arctan2(x0[1] / w, x0[0])
    k = np.arange(-2, int(w * t1 / np.pi) + 3)
    t = (np.pi / 2 + phi + np.pi * k) / w
    keep = (t > 0) & (t <= t1)
    sign = np.where(k % 2 == 0, -1, 1)
    return t[keep], sign[keep]


def test_oscillator_downward_zero_crossings_closed_form():
    osc = oscillator()
    x = osc.states[0]
    rng = np.random.default_rng(7)
    x0 = rng.uniform(-1.0, 1.0, size=(5, 2))
    w = 1.3
    res = nh.integrate(osc, x0, [0.0, 30.0], method="taylor", params=[w], rtol=1e-14,
                       atol=1e-14, events=[(x, -1, False), (x, 0, False)])  # fmt: skip
    ev = res.events
    for i in range(len(x0)):
        c = ev.count[i]
        times, which = ev.t[i, :c], ev.which[i, :c]
        exact, sign = _zero_crossings(x0[i], w, 30.0)
        assert np.all(np.diff(times) >= 0)
        assert np.max(np.abs(times[which == 0] - exact[sign < 0])) < 1e-12
        assert np.max(np.abs(times[which == 1] - exact)) < 1e-12
        assert np.max(np.abs(ev.y[i, :c, 0])) < 1e-13
    assert res.success


def test_terminal_event_on_taylor():
    """A terminal event ends its trajectory there; before it, and on the trajectories it
    never meets, the run is the one with an event that never fires (runs with events take
    the tolerance's order, see nhfast._fastpath.taylor_kernel)."""
    osc = oscillator()
    x = osc.states[0]
    x0 = np.array([[0.0, 0.5], [0.0, 1.0], [0.0, 1.2]])
    t = np.linspace(0.0, 6.0, 31)
    plain = nh.integrate(osc, x0, t, method="taylor", params=[1.0], events=[(x - 9.0, 1, True)])
    assert plain.events.count.sum() == 0
    res = nh.integrate(osc, x0, t, method="taylor", params=[1.0], events=[(x - 0.9, 1, True)])
    assert res.events.count[0] == 0 and np.array_equal(res.y[0], plain.y[0])
    for i in (1, 2):
        te = np.arcsin(0.9 / x0[i, 1])
        assert res.events.count[i] == 1 and abs(res.events.t[i, 0] - te) < 1e-10
        assert res.t_reached[i] == res.events.t[i, 0]
        assert np.all(np.isnan(res.y[i, t > te]))
        assert np.array_equal(res.y[i, t <= te], plain.y[i, t <= te])


def test_poincare_section_henon_heiles_agrees_with_dop853_dense():
    hh = henon_heiles()
    x = hh.states[0]
    x0 = np.array([[0.0, 0.1, 0.35, 0.1], [0.0, -0.2, 0.3, 0.05]])
    T = 100.0
    kw = {"rtol": 1e-13, "atol": 1e-13, "events": [(x, 1, False)], "max_events": 200}
    tay = nh.integrate(hh, x0, [0.0, T], method="taylor", **kw)
    ref = nh.integrate(hh, x0, [0.0, T], method="dop853", dense=True, **kw)
    h = sp.lambdify([hh.states], hh.H)
    for i in range(len(x0)):
        c = tay.events.count[i]
        assert c == ref.events.count[i] and c > 10
        pts = tay.events.y[i, :c]
        # an event time is located to a few ulps of t (bracket <= 4 eps max|t|, shared
        # events.c): on the section x = 0 to |x'| * 4 eps T, |x'| = px
        assert np.all(np.abs(pts[:, 0]) <= 4 * 2.2e-16 * T * pts[:, 2]) and np.all(pts[:, 2] > 0)
        assert np.max(np.abs(h(pts.T) - h(x0[i]))) < 1e-11
        assert np.max(np.abs(tay.events.t[i, :c] - ref.events.t[i, :c])) < 1e-9
        assert np.max(np.abs(pts - ref.events.y[i, :c])) < 1e-9


# ------------------------------------------------------------------------- reproducibility ----
@pytest.mark.parametrize(
    "name", ["henon_heiles", "fpu_8", "veselova_structured_4", "veselova_structured_16", "suslov"]
)
def test_bit_identical_across_threads_and_blocks(name):
    case = CASES[name]
    x0, par = case.draw(np.random.default_rng(13), 37)
    t = np.linspace(0.0, case.T, 9)
    # a terminal event stops some lanes early: their slots in a block are refilled
    x = case.build().states[0]
    level = float(np.median(x0[:, 0])) + 0.05
    ev = [(x, 0, False), (x - level, 1, True)]
    kw = {"rtol": 1e-11, "atol": 1e-11, "events": ev, "keep_failed": False}
    base = _run(case, x0, par, t, "taylor", **kw)
    assert np.any(base.t_reached < t[-1]) and np.any(base.t_reached == t[-1])
    # block 1: one trajectory after another in one slot (a packed series from 16 states on)
    for threads, block in ((2, 8), (1, 8), (2, 64), (1, 5), (1, 1)):
        other = _run(case, x0, par, t, "taylor", threads=threads, block=block, **kw)
        assert np.array_equal(base.y, other.y, equal_nan=True)  # NaN after a terminal event
        assert np.array_equal(base.t_reached, other.t_reached)
        for k in base.stats:
            assert np.array_equal(base.stats[k], other.stats[k]), k
        for k in ("t", "which", "y", "count"):
            a, b = getattr(base.events, k), getattr(other.events, k)
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), k
    one = None if par is None else par[17]
    alone = _run(case, x0[17], one, t, "taylor", **kw)
    assert np.array_equal(alone.y[0], base.y[17], equal_nan=True)
    assert np.array_equal(alone.events.t[0], base.events.t[17], equal_nan=True)


# ----------------------------------------------------------------------------- failures ----
def test_nonfinite_lane_is_reported_and_others_finish():
    """x' = x^2 blows up at t = 1/x0: that lane stops (status) while the others agree with
    the closed form x0 / (1 - x0 t)."""
    s = sp.Symbol("s")
    blow = nh.VectorField([s], [s**2])
    x0 = np.array([[0.1], [1.0], [-0.5]])
    t = np.linspace(0.0, 2.0, 6)  # not through the pole of lane 1
    with pytest.warns(IntegrationWarning, match="1 of 3"):
        res = nh.integrate(blow, x0, t, method="taylor", keep_failed=True, max_steps=10_000)
    assert res.status[0] == 0 and res.status[2] == 0 and res.status[1] != 0
    for i in (0, 2):
        exact = x0[i, 0] / (1 - x0[i, 0] * t)
        assert np.max(np.abs(res.y[i, :, 0] - exact)) < 1e-9
