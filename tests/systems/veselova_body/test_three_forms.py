"""Veselova on SO(n): hemisphere chart vs embedded (chart-free) vs unreduced forms, the invariant
density in embedded coordinates, and the Hamiltonisation (seed 004 Section 4.2, digest
seed004.md Sections 4.3, 7).

Every comparison is between independently built vector fields: the chart equations come from
``chaplygin_equations(veselova(n))`` (seed (3.17) with (4.12), (4.14)), the embedded form from the
Dirac-bracket derivation in :mod:`nhfast.systems.veselova_body.embedded`, the unreduced form from
Lagrange-d'Alembert on SO(n) with a multiplier (no reduction at all).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
from nhfast.symbolic.chaplygin import hamiltonise
from nhfast.symbolic.equations import chaplygin_equations
from nhfast.systems import veselova
from nhfast.systems.veselova_body import (
    chart_to_embedded,
    embedded_momentum,
    embedded_to_chart,
    embedded_to_unreduced,
    embedded_velocity,
    omega_pairs,
    unreduced_to_embedded,
    unreduced_to_gamma,
)

TOL = {"rtol": 1e-12, "atol": 1e-12}


def potential(gamma: list) -> sp.Expr:
    """U = 1/2 sum b_k gamma_k^2 + chi . gamma with fixed rationals (weak Noetherianity)."""
    n = len(gamma)
    quad = sum(sp.Rational(k + 1, 3) * gamma[k] ** 2 for k in range(n)) / 2
    return quad + sp.Rational(1, 2) * gamma[0] - sp.Rational(1, 4) * gamma[-1]


@functools.cache
def chart_vf(n: int) -> nh.VectorField:
    return chaplygin_equations(veselova(n, potential), simplify=False).as_vector_field()


@functools.cache
def embedded_vf(n: int) -> nh.VectorField:
    return veselova(n, potential, form="embedded")


@functools.cache
def unreduced_vf(n: int) -> nh.VectorField:
    return veselova(n, potential, form="unreduced")


def _c(gamma: np.ndarray, a: np.ndarray) -> np.ndarray:
    return np.sum(a * gamma**2, axis=-1)


def _sphere_points(n: int, m: int, seed: int, scale: float = 1.0):
    """Random points of the constraint manifold M (whole sphere) and random a."""
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(m, n))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    mom = scale * rng.normal(size=(m, n))
    mom -= np.sum(mom * g, axis=1, keepdims=True) * g
    a = rng.uniform(0.5, 3.0, size=(m, n))
    return g, mom, a


# ------------------------------------------------------------------------------ maps ----


@pytest.mark.parametrize("n", [3, 4, 6])
def test_maps_round_trip_and_unreduced_initial_data(n):
    rng = np.random.default_rng(n)
    s = rng.uniform(-0.4, 0.4, size=(20, n - 1))
    p = rng.normal(size=(20, n - 1))
    a = rng.uniform(0.5, 3.0, size=(20, n))
    g, m = chart_to_embedded(s, p)
    assert np.allclose(np.sum(g**2, axis=1), 1, atol=1e-15)
    assert np.allclose(np.sum(g * m, axis=1), 0, atol=1e-14)
    # p_k = m . u_k with u_k = e_k - gamma_k/gamma_n e_n  (4.10)
    u = np.zeros((20, n - 1, n))
    u[:, :, :-1] = np.eye(n - 1)
    u[:, :, -1] = -g[:, :-1] / g[:, -1:]
    assert np.allclose(np.einsum("rkj,rj->rk", u, m), p, atol=1e-13)
    s2, p2 = embedded_to_chart(g, m)
    assert np.allclose(s2, s, atol=1e-15) and np.allclose(p2, p, atol=1e-13)
    v = embedded_velocity(g, m, a)
    assert np.allclose(np.sum(v * g, axis=1), 0, atol=1e-14)
    assert np.allclose(embedded_momentum(g, v, a), m, atol=1e-13)
    if n <= 5:
        x = embedded_to_unreduced(g, m, a)
        G = x[:, : n * n].reshape(-1, n, n)
        assert np.allclose(G @ np.transpose(G, (0, 2, 1)), np.eye(n), atol=1e-13)
        assert np.allclose(np.linalg.det(G), 1)
        assert np.allclose(unreduced_to_gamma(x, n), g, atol=1e-15)  # gamma = g^{-1} e_n
        W = np.zeros((20, n, n))
        for k, (i, j) in enumerate(omega_pairs(n)):
            W[:, i, j], W[:, j, i] = x[:, n * n + k], -x[:, n * n + k]
        omega = G @ W @ np.transpose(G, (0, 2, 1))  # space angular velocity (4.6)
        assert np.max(np.abs(omega[:, : n - 1, : n - 1])) < 1e-13  # constraint (4.7)
        g3, m3 = unreduced_to_embedded(x, n, a)
        assert np.allclose(g3, g, atol=1e-15) and np.allclose(m3, m, atol=1e-13)
    with pytest.raises(ValueError, match="hemisphere"):
        embedded_to_chart(-g, m)


# -------------------------------------------------------------- three forms agree ----


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_chart_embedded_unreduced_trajectories_agree(n):
    rng = np.random.default_rng(100 + n)
    k = 4
    s0 = rng.uniform(-0.3, 0.3, size=(k, n - 1))
    p0 = rng.uniform(-0.4, 0.4, size=(k, n - 1))
    a = rng.uniform(0.5, 3.0, size=(k, n))
    t = np.linspace(0.0, 1.5, 16)
    ref = nh.integrate(chart_vf(n), np.hstack([s0, p0]), t, params=a, **TOL)
    s, p = ref.y[..., : n - 1], ref.y[..., n - 1 :]
    gn = np.sqrt(1 - np.sum(s**2, axis=-1))
    assert gn.min() > 0.2  # stays well inside the chart
    assert np.max(np.abs(s[:, -1] - s0)) > 0.05  # and actually moves
    g0, m0 = chart_to_embedded(s0, p0)
    emb = nh.integrate(embedded_vf(n), np.hstack([g0, m0]), t, params=a, **TOL)
    ge, me = emb.y[..., :n], emb.y[..., n:]
    se, pe = embedded_to_chart(ge, me)
    assert np.max(np.abs(se - s)) < 1e-9
    assert np.max(np.abs(pe - p)) < 1e-9
    e_ch, e_em = ref.observables["energy"], emb.observables["energy"]
    assert np.max(np.abs(e_ch - e_em)) < 1e-10 * np.max(np.abs(e_ch))
    if n <= 5:
        x0 = embedded_to_unreduced(g0, m0, a)
        unr = nh.integrate(unreduced_vf(n), x0, t, params=a, **TOL)
        gu, mu = unreduced_to_embedded(unr.y, n, a[:, None, :])
        assert np.max(np.abs(gu - ge)) < 1e-9
        assert np.max(np.abs(mu - me)) < 1e-9
        assert np.max(unr.observables["constraint"]) < 1e-18
        assert np.max(np.abs(unr.observables["energy"] - e_em)) < 1e-10 * np.max(np.abs(e_em))


@pytest.mark.parametrize(
    ("n", "a", "gamma0", "v0", "U", "energy0", "gamma5"),
    [
        (3, [1, 2, 3], [1, 1, 1], [1, -1, 0], None, 2.833333333333,
         [0.806588452234, 0.024353985952, 0.590611506907]),
        (4, [1, 2, 3, 4], [1, 1, 1, 1], [1, -1, 0, 0], "gamma1", 4.125,
         [0.114640010973, -0.055229349949, 0.961529109239, 0.243452580340]),
    ],
)  # fmt: skip
def test_embedded_and_unreduced_match_digest_oracles(n, a, gamma0, v0, U, energy0, gamma5):
    """Digest seed004.md Section 7, O11/O12 (computed by the digest's own integrators)."""
    a = np.array(a, dtype=float)
    g0 = np.array(gamma0, dtype=float) / np.linalg.norm(gamma0)
    m0 = embedded_momentum(g0, np.array(v0, dtype=float), a)
    pot = (lambda g: g[0]) if U == "gamma1" else None
    t = np.linspace(0.0, 5.0, 6)
    emb = nh.integrate(veselova(n, pot, form="embedded"), np.r_[g0, m0], t, params=a, **TOL)
    assert abs(emb.observables["energy"][0, 0] - energy0) < 1e-9
    assert np.max(np.abs(emb.y[0, -1, :n] - gamma5)) < 1e-9
    unr = nh.integrate(
        veselova(n, pot, form="unreduced"), embedded_to_unreduced(g0, m0, a), t, params=a, **TOL
    )
    assert abs(unr.observables["energy"][0, 0] - energy0) < 1e-9
    assert np.max(np.abs(unreduced_to_gamma(unr.y[0, -1], n) - gamma5)) < 1e-9


# ------------------------------------------------------------- embedded: globally ----


@pytest.mark.parametrize("n", [3, 4, 6, 12])
def test_embedded_conservation_across_the_equator(n):
    g0, m0, a = _sphere_points(n, 8, 200 + n, scale=1.0)
    g0[:, -1] = np.abs(g0[:, -1]) + 0.1  # start north ...
    g0 /= np.linalg.norm(g0, axis=1, keepdims=True)
    m0 -= np.sum(m0 * g0, axis=1, keepdims=True) * g0
    t = np.linspace(0.0, 10.0, 101)
    res = nh.integrate(embedded_vf(n), np.hstack([g0, m0]), t, params=a, **TOL)
    gn = res.y[..., n - 1]
    assert np.all(gn.min(axis=1) < -0.05)  # ... and every trajectory crosses the equator
    e = res.observables["energy"]
    assert np.max(np.abs(e - e[:, :1]) / np.abs(e[:, :1])) < 1e-10
    assert np.max(np.abs(res.observables["gamma_norm"] - 1)) < 1e-10
    assert np.max(np.abs(res.observables["momentum_constraint"])) < 1e-10


@pytest.mark.parametrize("n", [3, 4, 6])
def test_embedded_density_along_trajectories_across_the_equator(n):
    """Liouville: d/dt ln rho(x(t)) = -div X, so ln rho(x(t)) - ln rho(x0) + int_0^t div X = 0."""
    vf = embedded_vf(n)
    ell = sp.Symbol("ell_div", real=True)
    aug = nh.VectorField(
        states=[*vf.states, ell],
        rhs=[*vf.rhs, vf.divergence()],
        params=vf.params,
        observables={"log_density": vf.observables["log_density"]},
    )
    g0, m0, a = _sphere_points(n, 6, 300 + n, scale=1.5)
    g0[:, -1] = np.abs(g0[:, -1]) + 0.1
    g0 /= np.linalg.norm(g0, axis=1, keepdims=True)
    m0 -= np.sum(m0 * g0, axis=1, keepdims=True) * g0
    x0 = np.hstack([g0, m0, np.zeros((6, 1))])
    res = nh.integrate(aug, x0, np.linspace(0.0, 8.0, 81), params=a, **TOL)
    assert np.all(res.y[..., n - 1].min(axis=1) < -0.05)  # crosses the equator
    lr = res.observables["log_density"]
    ell_t = res.y[..., -1]
    assert np.max(np.abs(lr - lr[:, :1] + ell_t)) < 1e-9
    # control: the Lebesgue (rho = 1) volume is not preserved
    assert np.max(np.abs(ell_t)) > 1e-2


@pytest.mark.parametrize("n", [3, 4, 6, 9])
def test_embedded_divergence_identity_on_whole_sphere(n):
    """div(rho X) = 0 on M for rho = (A gamma, gamma)^((2-n)/2) w.r.t. dgamma dm.

    Why this rho (see nhfast.systems.veselova_body.embedded): the extension keeps
    |gamma|^2 and gamma.m as exact first integrals, so the ambient divergence on M is the
    divergence w.r.t. the Liouville volume of T*S^{n-1}, which is ds dp in every chart.
    """
    vf = embedded_vf(n)
    g, m, a = _sphere_points(n, 1000, 400 + n)
    assert np.mean(g[:, -1] < 0) > 0.3  # both hemispheres (the chart cannot do this)
    x = np.hstack([g, m])
    cs = vf.compile(("divergence",))
    div = cs.evaluate("divergence", x, params=a)[:, 0]
    f = cs.evaluate("rhs", x, params=a)
    gdot = f[:, :n]
    dlogc = 2 * np.sum(a * g * gdot, axis=1) / _c(g, a)  # X[ln c]
    for expo, ok in (((2 - n) / 2, True), ((n - 2) / 2, False), (0.0, False)):
        res = div + expo * dlogc  # div(rho X) / rho = div X + X[ln rho]
        # the size of the field bounds the terms that cancel in div near a rest point: the
        # identity holds to 1e-8 of that, not of a near-zero div (-2e-8 at one of these
        # points, where every formulation, the hand-derived one too, loses 1e-8 of it)
        scale = np.abs(div) + np.abs(expo * dlogc) + 1e-300
        rel = np.abs(res) / scale
        if ok:
            assert np.max(np.abs(res) / (scale + np.linalg.norm(f, axis=1))) < 1e-8, expo
        else:
            assert np.median(rel) > 0.1, expo


# -------------------------------------------------------------- Hamiltonisation ----


@pytest.mark.parametrize("n", [3, 4])
def test_hamiltonised_tau_flow_traces_the_t_flow(n):
    """tau-flow of Htilde (gauss4, fixed h) with t(tau) from dt = exp(-phi) dtau equals the
    t-flow of the chart equations at t(tau_k), with ptilde = exp(phi) p = c^{-1/2} p."""
    V = veselova(n, potential)
    ham = hamiltonise(V, simplify=False)  # phi found by phi_simple: -1/2 ln (A gamma, gamma)
    t_sym = sp.Symbol("t_phys", real=True)
    aug = nh.VectorField(
        states=[*ham.q, *ham.p, t_sym],
        rhs=[*ham.rhs, ham.time_factor],
        params=ham.params,
        observables={"energy": ham.hamiltonian},
        solves=ham.solves,
    )
    rng = np.random.default_rng(500 + n)
    k = 3
    s0 = rng.uniform(-0.3, 0.3, size=(k, n - 1))
    p0 = rng.uniform(-0.8, 0.8, size=(k, n - 1))
    a = rng.uniform(0.5, 3.0, size=(k, n))
    c0 = a[:, -1] + np.sum((a[:, :-1] - a[:, -1:]) * s0**2, axis=1)
    x0 = np.hstack([s0, p0 / np.sqrt(c0)[:, None], np.zeros((k, 1))])
    tau = np.linspace(0.0, 1.0, 11)
    res = nh.integrate(aug, x0, tau, method="gauss4", h=1e-3, params=a)
    e = res.observables["energy"]
    assert np.max(np.abs(e - e[:, :1])) < 1e-10 * np.max(np.abs(e))
    worst_s = worst_p = 0.0
    for i in range(k):
        t_of_tau = res.y[i, :, -1]
        assert np.all(np.diff(t_of_tau) > 0)
        ref = nh.integrate(chart_vf(n), np.r_[s0[i], p0[i]], t_of_tau, params=a[i], **TOL)
        s, p = ref.y[0, :, : n - 1], ref.y[0, :, n - 1 :]
        c = a[i, -1] + np.sum((a[i, :-1] - a[i, -1]) * s**2, axis=1)
        assert np.sqrt(1 - np.sum(s**2, axis=1)).min() > 0.2
        worst_s = max(worst_s, np.max(np.abs(res.y[i, :, : n - 1] - s)))
        worst_p = max(worst_p, np.max(np.abs(res.y[i, :, n - 1 : -1] - p / np.sqrt(c)[:, None])))
        assert np.max(np.abs(s[-1] - s0[i])) > 0.05
    assert worst_s < 1e-8 and worst_p < 1e-8
