"""Rigid bodies on SO(n) by the generic Lie-group route (nhfast.systems.rigid_body_lie).

The conventions (Killing pairing, structure constants, ad*, force of a potential) are proved
against matrix identities; trajectories are checked against the existing so(3) systems, the
whole-sphere Veselova system for n = 4, 5, a heavy-top-like Suslov closed form (SciPy), and
their first integrals.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import sympy as sp
from references.rigid_body_lie import (
    INERTIAS,
    RigidBodyLieSystem,
    embedded_from_lie,
    killing_pairing,
    lie_from_embedded,
    numeric_inertia_matrix,
    rigid_body_inertia,
    rigid_body_lie_system,
    so_n_basis,
    so_n_inertia_matrix,
    so_n_pairs,
)
from scipy.integrate import solve_ivp

import nhfast as nh
from nhfast.symbolic.liegroup import son_structure_constants
from nhfast.systems import suslov, veselova

TOL = {"rtol": 1e-12, "atol": 1e-12}
OBS = ("observables",)  # the kernel set nh.integrate builds: compile once


def skew(w: list, n: int) -> sp.Matrix:
    Om = sp.zeros(n, n)
    for (i, j), x in zip(so_n_pairs(n), w, strict=True):
        Om[i, j], Om[j, i] = x, -x
    return Om


def linear_potential(gamma: sp.Matrix, *params: object) -> sp.Expr:
    """U = chi . gamma with fixed chi (a heavy-top-like potential; works for every n)."""
    n = gamma.rows
    chi = [sp.Rational(k + 1, 2 * n) * (-1) ** k for k in range(n)]
    return sum(c * g for c, g in zip(chi, gamma, strict=True)) + gamma[0] ** 2 / 3


@functools.cache
def body(n: int, kind: str, constraint: str, with_potential: bool) -> RigidBodyLieSystem:
    inertia, params = rigid_body_inertia(n, kind)
    pot = linear_potential if with_potential else None
    return rigid_body_lie_system(n, inertia, constraint, potential=pot, params=params)


@functools.cache
def field(n: int, kind: str, constraint: str, with_potential: bool) -> nh.VectorField:
    """The projected form (no chart singularity)."""
    return body(n, kind, constraint, with_potential).projected_vector_field()


@functools.cache
def annihilator_field(n: int, kind: str, constraint: str, with_potential: bool) -> nh.VectorField:
    """LieGroupSystem's own saddle-point form (row annihilator; singular where gamma_n = 0)."""
    return body(n, kind, constraint, with_potential).as_vector_field()


def random_params(n: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    if kind == "pairwise":
        H = rng.uniform(0.5, 3.0, size=(n, n))
        return (H + H.T).ravel() / 2
    return rng.uniform(0.5, 3.0, size=n)


def random_embedded(
    n: int, constraint: str, rng: np.random.Generator, params: np.ndarray, system
) -> tuple[np.ndarray, np.ndarray]:
    """A random unit gamma and m from a random v orthogonal to b."""
    gamma = rng.normal(size=n)
    gamma /= np.linalg.norm(gamma)
    b = gamma if constraint == "space_fixed" else np.eye(n)[-1]
    v = rng.normal(size=n)
    v -= (v @ b) * b
    Om = np.outer(b, v) - np.outer(v, b)
    w = np.array([Om[i, j] for i, j in so_n_pairs(n)])
    _, m = embedded_from_lie(np.r_[w, gamma], params, system, constraint)
    return gamma, m


# ------------------------------------------------------------------------------------------
# conventions, exactly
# ------------------------------------------------------------------------------------------


def test_basis_is_killing_orthonormal_and_structure_constants_are_the_commutator():
    n = 4
    E = so_n_basis(n)
    c = son_structure_constants(n)
    for a, Ea in enumerate(E):
        for b, Eb in enumerate(E):
            assert killing_pairing(Ea, Eb) == (1 if a == b else 0)
            br = Ea * Eb - Eb * Ea
            assert br == sum((c[a, b, k] * E[k] for k in range(len(E))), sp.zeros(n, n))


@pytest.mark.parametrize("kind", INERTIAS)
def test_kinetic_energy_and_coadjoint_are_the_matrix_expressions(kind):
    """1/2 Omega^T I Omega = 1/2 <I(Omega), Omega>, I(Omega) = sum_b (I Omega)_b E_b, and the
    component ad*_Omega (I Omega) of LieGroupSystem is <[I(Omega), Omega], E_k>, i.e.
    d/dt I(Omega) = [I(Omega), Omega] (matrix Euler-Poincare)."""
    n = 4
    inertia, params = rigid_body_inertia(n, kind)
    S = rigid_body_lie_system(n, inertia, params=params)
    Om = skew(S.velocities, n)
    IOm = inertia(Om, *params)
    assert sp.expand(S.energy() - killing_pairing(IOm, Om) / 2) == 0
    M = S.momentum()
    assert sp.expand(IOm - skew(M, n)) == sp.zeros(n, n)
    comm = IOm * Om - Om * IOm
    for k, Ek in enumerate(so_n_basis(n)):
        assert sp.expand(S.coadjoint()[k] - killing_pairing(comm, Ek)) == 0


def test_inertia_matrix_of_the_seed_operator_is_diagonal_a_i_a_j():
    n = 5
    inertia, params = rigid_body_inertia(n, "a-omega-a")
    I_mat = so_n_inertia_matrix(n, inertia, params)
    a = sp.symbols(f"a1:{n + 1}", positive=True)
    expect = sp.diag(*[a[i] * a[j] for i, j in so_n_pairs(n)])
    assert I_mat == expect


def test_inertia_operator_checks():
    with pytest.raises(ValueError, match="skew"):
        so_n_inertia_matrix(3, lambda Om: Om + sp.eye(3))
    M = sp.Matrix([[1, 2, 0], [0, 1, 0], [0, 0, 1]])  # skew-valued, not Killing-symmetric

    def lopsided(Om: sp.Matrix) -> sp.Matrix:
        return skew(list(M * sp.Matrix([Om[0, 1], Om[0, 2], Om[1, 2]])), 3)

    with pytest.raises(ValueError, match="symmetric"):
        so_n_inertia_matrix(3, lopsided)
    with pytest.raises(ValueError, match="constraint"):
        rigid_body_lie_system(3, lambda Om: Om, constraint="sideways")


def test_fast_lie_check_rejects_broken_structure_constants():
    c = son_structure_constants(4)
    RigidBodyLieSystem._check_lie(c, 6)  # so(4) passes
    bad = sp.MutableDenseNDimArray(c)
    bad[0, 1, 3] = bad[0, 1, 3] + 1
    bad[1, 0, 3] = bad[1, 0, 3] - 1  # still skew, but not a Lie bracket
    with pytest.raises(ValueError, match="Jacobi"):
        RigidBodyLieSystem._check_lie(bad, 6)
    bad[1, 0, 3] = bad[1, 0, 3] + 5
    with pytest.raises(ValueError, match="skew"):
        RigidBodyLieSystem._check_lie(bad, 6)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_space_fixed_annihilator_vanishes_on_gamma_wedge_v_with_full_rank(n):
    S = body(n, "physical", "space_fixed", False)
    g = sp.Matrix(S.advected)
    v = sp.Matrix(sp.symbols(f"v1:{n + 1}", real=True))
    Om = g * v.T - v * g.T
    w = sp.Matrix([Om[i, j] for i, j in so_n_pairs(n)])
    assert sp.expand(S.annihilator * w) == sp.zeros(S.annihilator.rows, 1)
    assert S.annihilator.rows == S.N - (n - 1)
    rng = np.random.default_rng(n)
    gam = rng.normal(size=n)
    A = np.array(S.annihilator.subs(dict(zip(S.advected, gam, strict=True))), dtype=float)
    assert np.linalg.matrix_rank(A) == S.N - (n - 1)
    # ... and it loses rank on the equator gamma_n = 0 (the chart's limitation)
    gam[-1] = 0.0
    A = np.array(S.annihilator.subs(dict(zip(S.advected, gam, strict=True))), dtype=float)
    assert np.linalg.matrix_rank(A) < S.N - (n - 1) or n == 3


def test_body_fixed_annihilator_is_omega_ij_for_i_j_below_n():
    S = body(4, "a-omega-a", "body_fixed", False)
    W = sp.Matrix(S.velocities)
    assert list(S.annihilator * W) == [
        sp.Symbol(f"Omega{i + 1}_{j + 1}", real=True) for i, j in so_n_pairs(4) if j < 3
    ]


def test_potential_force_is_the_heavy_top_torque_at_n3():
    """F = grad U ^ gamma in the basis E_(i,j) is gamma x grad U in the hat basis
    (E_12 = -hat(e3), E_13 = hat(e2), E_23 = -hat(e1))."""
    S = body(3, "a-omega-a", "space_fixed", True)
    g = sp.Matrix(S.advected)
    dU = sp.Matrix([sp.diff(S.potential, x) for x in S.advected])
    torque = g.cross(dU)
    F = S.force
    assert sp.expand(F[0] + torque[2]) == 0
    assert sp.expand(F[1] - torque[1]) == 0
    assert sp.expand(F[2] + torque[0]) == 0


# ------------------------------------------------------------------------------------------
# maps
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("constraint", ["space_fixed", "body_fixed"])
@pytest.mark.parametrize("kind", INERTIAS)
def test_maps_round_trip_and_energy(kind, constraint):
    n = 5
    S = body(n, kind, constraint, False)
    rng = np.random.default_rng(11)
    for _ in range(4):
        p = random_params(n, kind, rng)
        gamma = rng.normal(size=n)
        gamma /= np.linalg.norm(gamma)
        b = gamma if constraint == "space_fixed" else np.eye(n)[-1]
        m = rng.normal(size=n)
        m -= (m @ b) * b
        x = lie_from_embedded(gamma, m, p, S)
        A = np.array(S.annihilator.subs(dict(zip(S.advected, gamma, strict=True))), float)
        assert np.max(np.abs(A @ x[: S.N])) < 1e-12  # Omega in D
        g2, m2 = embedded_from_lie(x, p, S)
        assert np.max(np.abs(g2 - gamma)) == 0.0
        assert np.max(np.abs(m2 - m)) < 1e-12
        # 1/2 Omega^T I Omega = 1/2 m . v with Omega = b ^ v, v = -Omega b
        In = numeric_inertia_matrix(S, p)
        w = x[: S.N]
        Om = np.zeros((n, n))
        for k, (i, j) in enumerate(so_n_pairs(n)):
            Om[i, j], Om[j, i] = w[k], -w[k]
        v = -Om @ b
        assert abs(w @ In @ w - m @ v) < 1e-12 * (1 + abs(m @ v))
    # batched lanes give the lane-by-lane result
    P = np.stack([random_params(n, kind, rng) for _ in range(3)])
    G = rng.normal(size=(3, n))
    G /= np.linalg.norm(G, axis=1, keepdims=True)
    B = G if constraint == "space_fixed" else np.tile(np.eye(n)[-1], (3, 1))
    M = rng.normal(size=(3, n))
    M -= np.sum(M * B, axis=1, keepdims=True) * B
    X = lie_from_embedded(G, M, P, S)
    for r in range(3):
        assert np.array_equal(X[r], lie_from_embedded(G[r], M[r], P[r], S))
    assert np.max(np.abs(embedded_from_lie(X, P, S)[1] - M)) < 1e-12


# ------------------------------------------------------------------------------------------
# trajectories
# ------------------------------------------------------------------------------------------


def hat_to_e(w: np.ndarray) -> np.ndarray:
    """so(3): (Omega_12, Omega_13, Omega_23) = (-w3, w2, -w1)."""
    return np.stack([-w[..., 2], w[..., 1], -w[..., 0]], axis=-1)


def test_n3_seed_veselova_agrees_with_veselova_body_so3():
    def pot(gamma: list) -> sp.Expr:
        return linear_potential(sp.Matrix(gamma))

    ref = veselova(3, pot, form="so3").as_vector_field()
    vf = annihilator_field(3, "a-omega-a", "space_fixed", True)
    rng = np.random.default_rng(5)
    k = 4
    a = rng.uniform(0.5, 3.0, size=(k, 3))
    g = rng.normal(size=(k, 3))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    v = rng.normal(size=(k, 3))
    v -= np.sum(v * g, axis=1, keepdims=True) * g
    w = np.cross(v, g)  # hat(w) = gamma ^ v
    t = np.linspace(0.0, 5.0, 26)
    r0 = nh.integrate(ref, np.hstack([w, g]), t, params=a, **TOL)
    r1 = nh.integrate(vf, np.hstack([hat_to_e(w), g]), t, params=a, **TOL)
    assert np.max(np.abs(r1.y[..., :3] - hat_to_e(r0.y[..., :3]))) < 1e-9
    assert np.max(np.abs(r1.y[..., 3:] - r0.y[..., 3:])) < 1e-9
    assert np.max(np.abs(r1.observables["energy"] - r0.observables["energy"])) < 1e-10
    assert np.max(np.abs(r1.y[..., 3:] - g[:, None, :])) > 0.1


def test_n3_body_fixed_agrees_with_suslov_for_a_general_inertia():
    """A general symmetric inertia (off-diagonal I13, I23 in the hat basis) as a matrix-level
    operator: the body-fixed family is the Suslov problem."""
    I_hat = sp.Matrix([[3, 0, sp.Rational(1, 3)], [0, 2, sp.Rational(-1, 4)], [0, 0, 4]])
    I_hat[2, 0], I_hat[2, 1] = I_hat[0, 2], I_hat[1, 2]
    T = sp.Matrix([[0, 0, -1], [0, 1, 0], [-1, 0, 0]])  # Omega_E = T w
    I_e = T * I_hat * T.T  # T orthogonal and symmetric

    def inertia(Om: sp.Matrix) -> sp.Matrix:
        w = sp.Matrix([Om[0, 1], Om[0, 2], Om[1, 2]])
        return skew(list(I_e * w), 3)

    assert so_n_inertia_matrix(3, inertia) == I_e
    S = rigid_body_lie_system(3, inertia, "body_fixed")
    ref = suslov(I_hat).as_vector_field()
    rng = np.random.default_rng(2)
    k = 4
    w0 = np.column_stack([rng.normal(size=(k, 2)), np.zeros(k)])
    g0 = rng.normal(size=(k, 3))
    g0 /= np.linalg.norm(g0, axis=1, keepdims=True)
    t = np.linspace(0.0, 8.0, 41)
    r0 = nh.integrate(ref, w0, t, **TOL)
    vf = S.as_vector_field()
    r1 = nh.integrate(vf, np.hstack([hat_to_e(w0), g0]), t, **TOL)
    assert np.max(np.abs(r1.y[..., :3] - hat_to_e(r0.y))) < 1e-9
    assert np.max(np.abs(r0.y - w0[:, None, :])) > 0.1
    # gamma is advected: gammadot = gamma x w (hat basis)
    f = vf.compile(OBS).evaluate("rhs", r1.y)
    assert np.max(np.abs(f[..., 3:] - np.cross(r1.y[..., 3:], r0.y))) < 1e-12


def test_n3_body_fixed_with_potential_matches_heavy_top_suslov_closed_form():
    """I w' = I w x w + gamma x grad U + lambda e3, gamma' = gamma x w, w3 = 0 (SciPy DOP853),
    with U = chi . gamma + gamma_1^2/3."""
    a = np.array([1.3, 2.1, 0.7])
    I_hat = np.diag([a[1] * a[2], a[0] * a[2], a[0] * a[1]])
    chi = np.array([1 / 6, -2 / 6, 3 / 6])

    def grad_u(g: np.ndarray) -> np.ndarray:
        return chi + np.array([2 * g[0] / 3, 0.0, 0.0])

    Iinv = np.linalg.inv(I_hat)

    def rhs(_t: float, x: np.ndarray, sign: float = 1.0) -> np.ndarray:
        w, g = x[:3], x[3:]
        r = np.cross(I_hat @ w, w) + sign * np.cross(g, grad_u(g))
        lam = -(Iinv @ r)[2] / Iinv[2, 2]
        return np.r_[Iinv @ (r + lam * np.eye(3)[2]), np.cross(g, w)]

    w0 = np.array([0.7, -0.4, 0.0])
    g0 = np.array([0.3, 0.5, 0.8])
    g0 /= np.linalg.norm(g0)
    t = np.linspace(0.0, 6.0, 31)

    def reference(sign: float) -> np.ndarray:
        sol = solve_ivp(
            rhs, (0, 6), np.r_[w0, g0], "DOP853", t, rtol=1e-13, atol=1e-13, args=(sign,)
        )
        return sol.y.T

    ref = reference(1.0)
    vf = annihilator_field(3, "a-omega-a", "body_fixed", True)
    res = nh.integrate(vf, np.r_[hat_to_e(w0), g0], t, params=a, **TOL).y[0]
    assert np.max(np.abs(res[:, :3] - hat_to_e(ref[:, :3]))) < 1e-9
    assert np.max(np.abs(res[:, 3:] - ref[:, 3:])) < 1e-9
    assert np.max(np.abs(ref[:, 3:] - g0)) > 0.1
    assert np.max(np.abs(res[:, 3:] - reference(-1.0)[:, 3:])) > 1e-2  # the sign matters


@pytest.mark.parametrize("n", [4, pytest.param(5, marks=pytest.mark.slow)])
def test_seed_space_fixed_agrees_with_the_whole_sphere_veselova_system(n):
    def pot(gamma: list) -> sp.Expr:
        return linear_potential(sp.Matrix(gamma))

    S = body(n, "a-omega-a", "space_fixed", True)
    vf = field(n, "a-omega-a", "space_fixed", True)
    ref = veselova(n, pot, form="structured")
    rng = np.random.default_rng(40 + n)
    k = 3
    a = rng.uniform(0.5, 3.0, size=(k, n))
    emb = [random_embedded(n, "space_fixed", rng, a[r], S) for r in range(k)]
    g0 = np.stack([e[0] for e in emb])
    m0 = np.stack([e[1] for e in emb])
    t = np.linspace(0.0, 3.0, 16)
    r0 = nh.integrate(ref, np.hstack([g0, m0]), t, params=a, **TOL)
    r1 = nh.integrate(vf, lie_from_embedded(g0, m0, a, S), t, params=a, **TOL)
    g1, m1 = embedded_from_lie(r1.y, a[:, None, :], S)
    assert np.max(np.abs(g1 - r0.y[..., :n])) < 1e-9
    assert np.max(np.abs(m1 - r0.y[..., n:])) < 1e-9
    assert np.max(np.abs(r1.observables["energy"] - r0.observables["energy"])) < 1e-10
    assert np.max(np.abs(g1 - g0[:, None, :])) > 0.1


@pytest.mark.parametrize("constraint", ["space_fixed", "body_fixed"])
@pytest.mark.parametrize("kind", INERTIAS)
@pytest.mark.parametrize("n", [4, pytest.param(5, marks=pytest.mark.slow)])
def test_first_integrals_and_constraint_along_trajectories(n, kind, constraint):
    S = body(n, kind, constraint, True)
    vf = field(n, kind, constraint, True)
    rng = np.random.default_rng(7 * n + len(kind))
    k = 3
    P = np.stack([random_params(n, kind, rng) for _ in range(k)])
    emb = [random_embedded(n, constraint, rng, P[r], S) for r in range(k)]
    x0 = lie_from_embedded(np.stack([e[0] for e in emb]), np.stack([e[1] for e in emb]), P, S)
    t = np.linspace(0.0, 3.0, 16)
    res = nh.integrate(vf, x0, t, params=P, **TOL)
    e = res.observables["energy"]
    assert np.max(np.abs(e - e[:, :1])) < 1e-10 * np.max(np.abs(e))
    assert np.max(res.observables["constraint"]) < 1e-20
    assert np.max(np.abs(res.observables["gamma_norm"] - 1)) < 1e-11
    _, m = embedded_from_lie(res.y, P[:, None, :], S)
    b = res.y[..., S.N :] if constraint == "space_fixed" else np.eye(n)[-1]
    assert np.max(np.abs(np.sum(m * b, axis=-1))) < 1e-12
    assert np.max(np.abs(res.y[..., S.N :] - res.y[:, :1, S.N :])) > 0.05  # gamma moves


@pytest.mark.parametrize("constraint", ["space_fixed", "body_fixed"])
@pytest.mark.parametrize(
    ("n", "kind"),
    [
        (4, "pairwise"),
        *[pytest.param(4, k, marks=pytest.mark.slow) for k in ("a-omega-a", "physical")],
        *[pytest.param(5, k, marks=pytest.mark.slow) for k in INERTIAS],
    ],
)
def test_projected_form_equals_the_saddle_point_form_off_the_equator(n, kind, constraint):
    """Q Omega = 0 with the reaction in range Q is LieGroupSystem's A Omega = 0 with A^T lambda:
    the right-hand sides agree pointwise (|gamma_n| >= 0.3)."""
    rng = np.random.default_rng(100 + n)
    S = body(n, kind, constraint, True)
    k = 8
    P = np.stack([random_params(n, kind, rng) for _ in range(k)])
    emb = [random_embedded(n, constraint, rng, P[r], S) for r in range(k)]
    G = np.stack([e[0] for e in emb])
    G[:, -1] = np.sign(G[:, -1]) * np.maximum(np.abs(G[:, -1]), 0.3)
    G /= np.linalg.norm(G, axis=1, keepdims=True)
    X = lie_from_embedded(G, np.stack([e[1] for e in emb]), P, S, constraint)
    f1 = field(n, kind, constraint, True).compile(OBS).evaluate("rhs", X, params=P)
    f2 = annihilator_field(n, kind, constraint, True).compile(OBS).evaluate("rhs", X, params=P)
    assert np.max(np.abs(f1 - f2)) < 1e-12 * (1 + np.max(np.abs(f2)))


def test_projected_form_crosses_the_equator():
    """gamma_n = 0 at t = 0: the projected form integrates through it and keeps Omega in D."""
    n = 4
    S = body(n, "physical", "space_fixed", True)
    p = np.array([1.0, 1.5, 2.0, 2.5])
    gamma = np.array([0.6, 0.0, 0.8, 0.0])
    m = np.array([0.0, 0.7, 0.0, -0.4])
    x0 = lie_from_embedded(gamma, m, p, S)
    res = nh.integrate(field(n, "physical", "space_fixed", True), x0, [0.0, 1.0, 2.0], params=p)
    assert np.max(res.observables["constraint"]) < 1e-20
    e = res.observables["energy"]
    assert np.max(np.abs(e - e[:, :1])) < 1e-9


def test_tilted_body_axis_constraint_and_maps():
    """body_fixed with a parameter axis e: the rows and the projector annihilate e ^ v, the
    axis symbols follow the inertia's parameters, and the maps round-trip with b = e."""
    n = 4
    inertia, params = rigid_body_inertia(n, "physical")
    e = sp.symbols(f"axis1:{n + 1}", real=True)
    S = rigid_body_lie_system(n, inertia, "body_fixed", params=params, axis=e)
    assert S.params[-n:] == list(e)
    v = sp.Matrix(sp.symbols(f"v1:{n + 1}", real=True))
    ev = sp.Matrix(e)
    Om = ev * v.T - v * ev.T
    w = sp.Matrix([Om[i, j] for i, j in so_n_pairs(n)])
    assert sp.expand(S.annihilator * w) == sp.zeros(S.annihilator.rows, 1)
    Q = S.constraint_projector()
    assert (Q * w).applyfunc(sp.cancel) == sp.zeros(S.N, 1)
    rng = np.random.default_rng(4)
    p = np.r_[rng.uniform(0.5, 3.0, n), rng.normal(size=n)]
    gamma = rng.normal(size=n)
    m = rng.normal(size=n)
    b = p[-n:]
    m -= (m @ b) / (b @ b) * b
    x = lie_from_embedded(gamma, m, p, S)
    Qn = np.array(Q.subs(dict(zip(e, b, strict=True))), dtype=float)
    assert np.max(np.abs(Qn @ x[: S.N])) < 1e-12
    g2, m2 = embedded_from_lie(x, p, S)
    assert np.array_equal(g2, gamma) and np.max(np.abs(m2 - m)) < 1e-12
    with pytest.raises(ValueError, match="body_fixed"):
        rigid_body_lie_system(n, inertia, "space_fixed", params=params, axis=e)
