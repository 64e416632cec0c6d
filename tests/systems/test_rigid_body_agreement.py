"""The matrix-level rigid-body engine (nhfast.symbolic.rigid_body, nhfast.systems.rigid_bodies)
against the generic Lie-group route (nhfast.systems.rigid_body_lie: structure constants of
so(n), component inertia matrix, Euler-Poincare-Suslov with a projector constraint).

The two share nothing but the matrix-level inertia formula: the engine derives reduced
equations for the momentum ``m = -I(Omega) b`` in the symbolic dimension, the generic route
integrates ``(Omega, gamma)`` in ``N = n(n-1)/2`` components.  States are mapped with
``embedded_from_lie`` / ``lie_from_embedded``; right-hand sides with the chain rule
``embedded_tangent_from_lie``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pytest
import sympy as sp
from references.rigid_body_lie import (
    INERTIAS,
    RigidBodyLieSystem,
    embedded_from_lie,
    embedded_tangent_from_lie,
    lie_from_embedded,
    numeric_inertia_matrix,
    rigid_body_inertia,
    rigid_body_lie_system,
    so_n_pairs,
)

import nhfast as nh
from nhfast.symbolic import rigid_body as rb
from nhfast.systems import veselova
from nhfast.systems.rigid_bodies import rigid_body_params, suslov_rigid_body
from nhfast.systems.rigid_body_maps import angular_velocity

TOL = {"rtol": 1e-12, "atol": 1e-12}
FAMILIES = ("veselova", "suslov")
OBS = ("observables",)


def potential(gamma: list) -> sp.Expr:
    """U = chi . gamma + gamma_1^2 / 3 (a heavy-top-like potential, fixed chi)."""
    n = len(gamma)
    chi = [sp.Rational(k + 1, 2 * n) * (-1) ** k for k in range(n)]
    return sum(c * g for c, g in zip(chi, gamma, strict=True)) + gamma[0] ** 2 / 3


@functools.cache
def generic(n: int, kind: str, family: str, with_potential: bool) -> RigidBodyLieSystem:
    inertia, params = rigid_body_inertia(n, kind)
    pot = (lambda G, *p: potential(list(G))) if with_potential else None
    if family == "veselova":
        return rigid_body_lie_system(n, inertia, "space_fixed", pot, params)
    axis = sp.symbols(f"axis1:{n + 1}", real=True)  # the engine's tilted Suslov axis
    return rigid_body_lie_system(n, inertia, "body_fixed", pot, params, axis=axis)


@functools.cache
def engine(n: int, kind: str, family: str, with_potential: bool) -> nh.StructuredVectorField:
    pot = potential if with_potential else None
    if family == "veselova":
        return veselova(n, form="structured", inertia=kind, potential=pot)
    return suslov_rigid_body(n, kind, potential=pot, axis=True)


def random_states(
    n: int, family: str, params: Callable[[], np.ndarray], rng: np.random.Generator, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parameters (k lanes; for Suslov the last n are the axis) and embedded states (gamma, m)
    with m orthogonal to b."""
    P = np.stack([params() for _ in range(k)])
    G = rng.normal(size=(k, n))
    G /= np.linalg.norm(G, axis=1, keepdims=True)
    B = P[:, -n:] if family == "suslov" else G
    M = rng.normal(size=(k, n))
    M -= np.sum(M * B, axis=1, keepdims=True) * B / np.sum(B * B, axis=1, keepdims=True)
    return P, G, M


def compare(
    S: RigidBodyLieSystem,
    eng: nh.StructuredVectorField,
    family: str,
    params: Callable[[], np.ndarray],
    rng: np.random.Generator,
) -> None:
    """Right-hand sides at random states (1e-12) and DOP853 trajectories (1e-9)."""
    n = S.n
    vf = S.projected_vector_field() if S not in FIELDS else FIELDS[S]
    FIELDS[S] = vf
    assert eng.n_params == len(S.params)
    P, G, M = random_states(n, family, params, rng, 8)
    X = lie_from_embedded(G, M, P, S)
    g_back, m_back = embedded_from_lie(X, P, S)
    assert np.max(np.abs(g_back - G)) == 0.0 and np.max(np.abs(m_back - M)) < 1e-12
    f_eng = eng.compile(("observables",)).evaluate("rhs", np.hstack([G, M]), params=P)
    dg, dm = embedded_tangent_from_lie(
        X, vf.compile(("observables",)).evaluate("rhs", X, params=P), P, S
    )
    scale = 1.0 + np.max(np.abs(f_eng))
    assert np.max(np.abs(dg - f_eng[:, :n])) < 1e-12 * scale
    assert np.max(np.abs(dm - f_eng[:, n:])) < 1e-12 * scale
    # observables: energy 1/2 Omega^T I Omega + U, b . m, log det of K_b on b^perp
    obs = eng.compile(OBS).evaluate("observables", np.hstack([G, M]), params=P)
    names = list(eng.observables)
    e_gen = vf.compile(OBS).evaluate("observables", X, params=P)[
        :, list(vf.observables).index("energy")
    ]
    assert np.max(np.abs(obs[:, names.index("energy")] - e_gen)) < 1e-12 * (
        1 + np.max(np.abs(e_gen))
    )
    B = P[:, -n:] if family == "suslov" else G
    assert (
        np.max(np.abs(obs[:, names.index("momentum_constraint")] - np.sum(B * M, axis=1))) < 1e-14
    )
    I_num = numeric_inertia_matrix(S, P)
    for r in range(len(G)):
        b = B[r] / np.linalg.norm(B[r])
        basis = np.linalg.svd(np.eye(n) - np.outer(b, b))[0][:, : n - 1]  # of b^perp
        K = np.empty((n - 1, n - 1))
        for k in range(n - 1):
            Om = np.outer(b, basis[:, k]) - np.outer(basis[:, k], b)
            w = np.array([Om[i, j] for i, j in so_n_pairs(n)])
            for q in range(n - 1):
                Oq = np.outer(b, basis[:, q]) - np.outer(basis[:, q], b)
                K[k, q] = w @ I_num[r] @ np.array([Oq[i, j] for i, j in so_n_pairs(n)])
        K *= B[r] @ B[r]  # Omega = B ^ v with the unnormalised b
        assert abs(obs[r, names.index("log_det_metric")] - np.linalg.slogdet(K)[1]) < 1e-12
    P, G, M = random_states(n, family, params, rng, 3)
    t = np.linspace(0.0, 3.0, 13)
    r_eng = nh.integrate(eng, np.hstack([G, M]), t, params=P, **TOL)
    r_gen = nh.integrate(vf, lie_from_embedded(G, M, P, S), t, params=P, **TOL)
    g1, m1 = embedded_from_lie(r_gen.y, P[:, None, :], S)
    assert np.max(np.abs(g1 - r_eng.y[..., :n])) < 1e-9
    assert np.max(np.abs(m1 - r_eng.y[..., n:])) < 1e-9
    e_eng, e_gen = r_eng.observables["energy"], r_gen.observables["energy"]
    assert np.max(np.abs(e_eng - e_gen)) < 1e-10 * (1 + np.max(np.abs(e_gen)))
    assert np.max(r_gen.observables["constraint"]) < 1e-20
    assert np.max(np.abs(g1 - G[:, None, :])) > 0.05  # gamma moves
    assert np.max(np.abs(m1 - M[:, None, :])) > 1e-2  # and so does m (slowly for free Suslov)


#: Compiled generic fields, by system.
FIELDS: dict[RigidBodyLieSystem, nh.VectorField] = {}


def check_agreement(n: int, kind: str, family: str, with_potential: bool) -> None:
    rng = np.random.default_rng(1000 * n + 10 * INERTIAS.index(kind) + with_potential)
    S = generic(n, kind, family, with_potential)

    def params() -> np.ndarray:
        return rigid_body_params(n, kind, rng, axis=family == "suslov")

    compare(S, engine(n, kind, family, with_potential), family, params, rng)
    # the engine's Omega helper is the generic route's Omega
    P, G, M = random_states(n, family, params, rng, 4)
    axis = P[:, -n:] if family == "suslov" else None
    constraint = "space_fixed" if family == "veselova" else "body_fixed"
    ip = P[:, :-n] if family == "suslov" else P
    Om = angular_velocity(G, M, ip, kind, constraint, axis=axis)
    w = np.stack([Om[:, i, j] for i, j in so_n_pairs(n)], axis=-1)
    X = lie_from_embedded(G, M, P, S)
    assert np.max(np.abs(w - X[:, : S.N])) < 1e-12 * (1 + np.max(np.abs(w)))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", INERTIAS)
def test_engine_agrees_with_generic_route_n4_with_potential(kind, family):
    check_agreement(4, kind, family, True)


@pytest.mark.slow
@pytest.mark.parametrize("with_potential", [False, True])
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", INERTIAS)
@pytest.mark.parametrize("n", [3, 4, 5])
def test_engine_agrees_with_generic_route(n, kind, family, with_potential):
    check_agreement(n, kind, family, with_potential)


def matrix_level_pair(n: int, family: str) -> tuple[RigidBodyLieSystem, nh.StructuredVectorField]:
    """A body whose potential is a matrix-level expression with parameters (the engine's
    ``potential(gamma, *params)`` path): physical inertia, ``U = chi . gamma +
    k/2 gamma^T J gamma``; Suslov with a parameter axis."""
    decl = [rb.diagonal("j", positive=True), rb.vector("chi"), rb.scalar("k")]
    con = rb.space_fixed()
    if family == "suslov":
        decl.append(rb.vector("axis"))
        con = rb.body_fixed("axis")

    def inertia(Om, J, *rest):
        return J * Om + Om * J

    def pot(gamma, J, chi, k, *rest):
        # dot products as traces of 1 x 1 products (the engine rejects [0, 0] elements)
        return sp.trace(chi.T * gamma) + k / 2 * sp.trace(gamma.T * J * gamma)

    eng = rb.RigidBody(n, inertia, decl, matrix_potential=pot, constraint=con).vector_field()
    J = sp.diag(*sp.symbols(f"j1:{n + 1}", positive=True))
    chi = sp.Matrix(sp.symbols(f"chi1:{n + 1}", real=True))
    k = sp.Symbol("k", real=True)
    axis = sp.symbols(f"axis1:{n + 1}", real=True) if family == "suslov" else None
    constraint = "space_fixed" if family == "veselova" else "body_fixed"
    S = rigid_body_lie_system(n, inertia, constraint, pot, (J, chi, k), axis=axis)
    return S, eng


@pytest.mark.parametrize("family", ["veselova", pytest.param("suslov", marks=pytest.mark.slow)])
def test_engine_matrix_level_potential_with_parameters(family):
    n = 4
    S, eng = matrix_level_pair(n, family)
    rng = np.random.default_rng(77)

    def params() -> np.ndarray:
        p = [1.0 + rng.random(n), rng.normal(size=n), [rng.uniform(0.5, 2.0)]]
        if family == "suslov":
            p.append(rng.normal(size=n))
        return np.concatenate(p)

    compare(S, eng, family, params, rng)
