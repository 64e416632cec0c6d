"""Whole-sphere Veselova system (García-Naranjo & Marrero 2020, Section 4.2), structured kernels.

References used here, all independent of the hand-written parts of the program:

* the hemisphere-chart reduced equations (3.17) with (4.12), (4.14), built by
  ``chaplygin_equations(veselova(n))`` (a per-lane linear solve with K), mapped with
  ``chart_to_embedded``; a chart around another axis (indices permuted together with ``a``
  and ``U``) covers the trajectory while it crosses the equator ``gamma_n = 0``;
* for the hand-derived divergence: the SymPy divergence of the unrolled field
  ``veselova(n, form="embedded")`` (its right-hand side differentiated symbolically);
* the invariant density ``(A gamma, gamma)^{(2-n)/2}`` (Theorem 4.3 with
  ``sigma = (r-1) phi``) and energy conservation.
"""

from __future__ import annotations

import functools
import time

import numpy as np
import pytest
import sympy as sp
from references.veselova_hand import veselova_program

import nhfast as nh
from nhfast.symbolic.equations import chaplygin_equations
from nhfast.systems import veselova
from nhfast.systems.veselova_body import (
    VESELOVA_OBSERVABLES,
    chart_to_embedded,
    embedded_momentum,
    embedded_to_chart,
    join_state,
    project_to_constraints,
    split_state,
)
from nhfast.systems.veselova_body.embedded import structured_program

TOL = {"rtol": 1e-12, "atol": 1e-12}


def potential(gamma: list) -> sp.Expr:
    """U = 1/2 sum b_k gamma_k^2 + chi . gamma with fixed rationals."""
    n = len(gamma)
    quad = sum(sp.Rational(k + 1, 3) * gamma[k] ** 2 for k in range(n)) / 2
    return quad + sp.Rational(1, 2) * gamma[0] - sp.Rational(1, 4) * gamma[-1]


def permuted_potential(perm: list[int]):
    """``U'(y) = U(gamma)`` with ``gamma[perm[j]] = y[j]``."""

    def pot(y: list) -> sp.Expr:
        g = [None] * len(y)
        for j, p in enumerate(perm):
            g[p] = y[j]
        return potential(g)

    return pot


@functools.cache
def structured(n: int, with_potential: bool = True):
    return veselova(n, potential if with_potential else None, form="structured")


@functools.cache
def chart(n: int, perm: tuple[int, ...] | None = None) -> nh.VectorField:
    pot = potential if perm is None else permuted_potential(list(perm))
    return chaplygin_equations(veselova(n, pot), simplify=False).as_vector_field()


def _random_state(n: int, seed: int, north: float | None = None, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    g = rng.normal(size=n)
    if north is not None:  # put gamma well inside the northern hemisphere
        g[-1] = 0.0
        g *= np.sqrt(1 - north**2) / np.linalg.norm(g)
        g[-1] = north
    g /= np.linalg.norm(g)
    m = scale * rng.normal(size=n)
    m -= m.dot(g) * g
    a = rng.uniform(0.7, 2.5, size=n)
    return g, m, a


# ------------------------------------------------------------ chart agreement ----


@pytest.mark.parametrize("n", [3, 4, 5, 6, 7, pytest.param(8, marks=pytest.mark.slow)])
def test_agrees_with_hemisphere_chart(n):
    """Inside the northern chart the whole-sphere field reproduces (3.17) with (4.12)/(4.14)."""
    g, m, a = _random_state(n, seed=10 + n, north=0.9, scale=0.3)
    s0, p0 = embedded_to_chart(g, m)
    t = np.linspace(0.0, 1.0, 11)
    ref = nh.integrate(chart(n), np.r_[s0, p0], t, params=a, **TOL)
    got = nh.integrate(structured(n), join_state(g, m), t, params=a, **TOL)
    r = n - 1
    gamma_ref, m_ref = chart_to_embedded(ref.y[0, :, :r], ref.y[0, :, r:])
    assert np.min(gamma_ref[:, -1]) > 0.2  # the reference stayed inside its chart
    gamma, mom = split_state(got.y[0])
    np.testing.assert_allclose(gamma, gamma_ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(mom, m_ref, rtol=0, atol=1e-9)
    # same energy function as the chart's H (value on the same states)
    np.testing.assert_allclose(
        got.observables["energy"][0], ref.observables["energy"][0], rtol=1e-10, atol=1e-12
    )


# --------------------------------------------------------- across the equator ----

N_CROSS = 5
A_CROSS = np.array([1.0, 1.3, 1.7, 2.2, 2.8])


def _crossing_initial_state() -> tuple[np.ndarray, np.ndarray]:
    """gamma near the equator, velocity towards the south pole (crosses gamma_n = 0 twice)."""
    g = np.array([0.8, 0.1, 0.2, 0.1, 0.35])
    g /= np.linalg.norm(g)
    v = -np.eye(N_CROSS)[-1]
    v -= v.dot(g) * g
    return g, embedded_momentum(g, 1.5 * v, A_CROSS)


def test_equator_crossing_agrees_with_a_chart_around_another_axis():
    """While gamma_n changes sign, gamma_1 > 0: compare with the chart around e_1 (axes
    relabelled n <-> 1 together with a and U; the embedded equations are covariant)."""
    n = N_CROSS
    g, m = _crossing_initial_state()
    perm = (1, 2, 3, 4, 0)  # y = gamma[perm]: the chart's last axis is e_1
    inv = np.argsort(perm)
    y0, my0 = g[list(perm)], m[list(perm)]
    s0, p0 = embedded_to_chart(y0, my0)
    t = np.linspace(0.0, 0.8, 17)
    ref = nh.integrate(chart(n, perm), np.r_[s0, p0], t, params=A_CROSS[list(perm)], **TOL)
    got = nh.integrate(structured(n), join_state(g, m), t, params=A_CROSS, **TOL)
    y, my = chart_to_embedded(ref.y[0, :, : n - 1], ref.y[0, :, n - 1 :])
    gamma_ref, m_ref = y[:, inv], my[:, inv]
    gamma, mom = split_state(got.y[0])
    assert gamma[0, -1] > 0.3 and gamma[-1, -1] < -0.1  # crossed the equator gamma_n = 0
    assert np.min(gamma[:, 0]) > 0.5  # and stayed in the chart around e_1
    np.testing.assert_allclose(gamma, gamma_ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(mom, m_ref, rtol=0, atol=1e-9)


def test_density_and_energy_preserved_across_equator():
    """log c^{(2-n)/2}(x(t)) + int_0^t div X - log c^{(2-n)/2}(x(0)) = 0 through two
    crossings of gamma_n = 0 (and of gamma_1 = 0): the seed's density on the whole sphere."""
    n = N_CROSS
    g, m = _crossing_initial_state()
    vf = structured(n).with_divergence()
    t = np.linspace(0.0, 3.0, 61)
    res = nh.integrate(vf, np.r_[join_state(g, m), 0.0], t, params=A_CROSS, **TOL)
    y = res.y[0]
    assert np.sum(np.diff(np.sign(y[:, n - 1])) != 0) == 2  # two equator crossings
    ld = res.observables["log_density"][0]
    defect = ld + y[:, -1] - ld[0]
    assert np.max(np.abs(defect)) < 1e-10
    # not trivially zero: the density and the Liouville integral both vary
    assert np.ptp(ld) > 0.1
    e = res.observables["energy"][0]
    assert np.max(np.abs(e - e[0])) < 1e-10 * max(1.0, abs(e[0]))
    assert np.max(np.abs(res.observables["sphere_defect"][0])) < 1e-11
    assert np.max(np.abs(res.observables["momentum_constraint"][0])) < 1e-11


def test_wrong_density_exponent_is_not_invariant():
    """The check can fail: c^{(n-2)/2} (the velocity-form exponent) is not invariant here."""
    n = N_CROSS
    g, m = _crossing_initial_state()
    vf = structured(n).with_divergence()
    t = np.linspace(0.0, 3.0, 31)
    res = nh.integrate(vf, np.r_[join_state(g, m), 0.0], t, params=A_CROSS, **TOL)
    ld = res.observables["log_density"][0]
    wrong = -ld  # (n-2)/2 log c
    assert np.max(np.abs(wrong + res.y[0, :, -1] - wrong[0])) > 1e-2


# ------------------------------------------------------------------ invariants ----


def test_gauss_legendre_keeps_sphere_and_momentum_constraint_to_round_off():
    """gammadot = S(x) gamma with S skew and d/dt(gamma.m) = 0 identically: Gauss-Legendre
    preserves both quadratic first integrals (no projection); RK4 drifts."""
    n = 9
    rng = np.random.default_rng(3)
    g = rng.normal(size=(4, n))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    m = rng.normal(size=(4, n))
    m -= np.sum(m * g, axis=1, keepdims=True) * g
    a = rng.uniform(0.7, 2.5, size=n)
    vf = structured(n)
    t = np.linspace(0.0, 20.0, 41)
    x0 = join_state(g, m)
    gl = nh.integrate(vf, x0, t, method="gauss6", h=0.05, params=a)
    assert np.max(np.abs(gl.observables["sphere_defect"])) < 2e-14 * len(t)
    assert np.max(np.abs(gl.observables["momentum_constraint"])) < 2e-14 * len(t)
    e = gl.observables["energy"]
    assert np.max(np.abs(e - e[:, :1])) < 1e-7  # bounded energy error of a 6th-order scheme
    rk = nh.integrate(vf, x0, t, method="rk4", h=0.05, params=a)
    drift = np.max(np.abs(rk.observables["sphere_defect"]))
    assert drift > 1e-12  # explicit RK does not preserve the sphere exactly ...
    proj = project_to_constraints(rk.y)
    pg, pm = split_state(proj)
    np.testing.assert_allclose(np.sum(pg * pg, axis=-1), 1.0, atol=1e-15)
    np.testing.assert_allclose(np.sum(pg * pm, axis=-1), 0.0, atol=1e-14)
    np.testing.assert_allclose(proj, rk.y, atol=10 * drift + 1e-14)  # ... a small correction


# ---------------------------------------------------------------- divergence ----


def _symbolic_divergence(prog) -> sp.Expr:
    rhs = prog.to_sympy("rhs")
    return sp.Add(*[sp.diff(f, x) for f, x in zip(rhs, prog.state_symbols, strict=True)])


@pytest.mark.parametrize("n", [3, 4])
def test_divergence_formula_matches_symbolic_divergence(n):
    """The hand-derived div X of the reference program, and the engine's generated one, equal
    the SymPy divergence of their unrolled fields, exactly, at random rational points off the
    constraint manifold too."""
    rng = np.random.default_rng(n)
    for prog in (veselova_program(n, potential), structured_program(n, potential)):
        (div,) = prog.to_sympy("divergence")
        ref = _symbolic_divergence(prog)
        syms = [*prog.state_symbols, *prog.param_symbols]
        for _ in range(3):
            vals = [sp.Rational(int(k), 7) for k in rng.integers(1, 20, size=len(syms))]
            rep = dict(zip(syms, vals, strict=True))
            assert sp.nsimplify(div.xreplace(rep) - ref.xreplace(rep)) == 0


def test_compiled_divergence_matches_finite_differences():
    """div X from the kernel vs central differences of the kernel's rhs (n = 12)."""
    n = 12
    g, m, a = _random_state(n, seed=5)
    x = join_state(g, m) * 1.1  # off the constraint manifold as well
    vf = structured(n)
    h = 1e-6
    xs = np.repeat(x[None], 2 * len(x), axis=0)
    for i in range(len(x)):
        xs[2 * i, i] += h
        xs[2 * i + 1, i] -= h
    f = vf.evaluate("rhs", xs, params=a)
    fd = sum((f[2 * i, i] - f[2 * i + 1, i]) / (2 * h) for i in range(len(x)))
    div = vf.evaluate("divergence", x, params=a)[0]
    assert abs(div - fd) < 1e-6 * max(1.0, abs(div))


# ---------------------------------------------------------------- large n ----


def test_n64_builds_and_integrates():
    """n = 64: codegen + compile well under 60 s; a few steps conserve energy."""
    n = 64
    t0 = time.perf_counter()
    vf = veselova(n, form="structured")
    cs = vf.compile()
    build = time.perf_counter() - t0
    assert build < 60.0, cs.timings
    g, m, a = _random_state(n, seed=64)
    x0 = join_state(np.stack([g, -g]), np.stack([m, 0.5 * m]))
    res = nh.integrate(vf, x0, np.linspace(0.0, 0.5, 6), params=a, rtol=1e-11, atol=1e-12)
    assert res.success
    assert list(res.observables) == [*VESELOVA_OBSERVABLES, "log_det_metric"]
    e = res.observables["energy"]
    assert np.max(np.abs(e - e[:, :1])) < 1e-9 * np.max(np.abs(e))
    assert np.max(np.abs(res.observables["sphere_defect"])) < 1e-11


# ---------------------------------------------------------------- bad input ----


def test_bad_input():
    with pytest.raises(ValueError, match="n must be >= 3"):
        veselova(2, form="structured")
    with pytest.raises(TypeError, match="n must be an int"):
        veselova(4.0, form="structured")
    x = sp.Symbol("x")
    with pytest.raises(ValueError, match="potential may depend on gamma1..gamma4 only"):
        veselova(4, x * sp.Symbol("gamma1", real=True), form="structured")
    with pytest.raises(ValueError, match="even last dimension"):
        split_state(np.zeros(5))
    with pytest.raises(ValueError, match="same shape"):
        join_state(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="gamma = 0"):
        project_to_constraints(np.zeros(6))
    vf = structured(4, with_potential=False)
    with pytest.raises(ValueError, match="gamma != 0"):
        nh.integrate(vf, np.zeros(8), [0.0, 1.0], params=np.ones(4))
    with pytest.raises(ValueError, match="a1 .*declared positive"):
        nh.integrate(vf, np.r_[1.0, 0, 0, 0, 0, 1, 0, 0], [0.0, 1.0], params=-np.ones(4))
    with pytest.raises(ValueError, match="not generated"):
        vf.compile(("jacobian",))
