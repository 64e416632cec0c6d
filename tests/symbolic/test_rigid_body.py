"""The matrix-level rigid-body engine: the algebra, the derivation and its programs.

Independent references: explicit NumPy matrices for the expansion, the hand-derived Veselova
program of the seed inertia, a dense NumPy assembly of the reduced metric, the Woodbury and the
dense solve routes against each other, and the first integrals along trajectories.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from references.veselova_hand import veselova_program
from sympy.matrices.expressions import DiagMatrix, MatrixSymbol

import nhfast as nh
from nhfast.structured_field import StructuredVectorField
from nhfast.symbolic import rigid_body as rb
from nhfast.symbolic.rigid_body.algebra import (
    DIM,
    Node,
    Scalars,
    expand_scalar,
    expand_vector,
    extract,
    leaf,
)
from nhfast.systems.inertia import INERTIAS, named_inertia
from nhfast.systems.rigid_bodies import (
    rigid_body,
    rigid_body_params,
    suslov_rigid_body,
)
from nhfast.systems.rigid_body_maps import angular_velocity
from nhfast.systems.veselova_body.embedded import project_to_constraints

N = 4
g, v, x = (MatrixSymbol(s, DIM, 1) for s in ("gamma", "v", "x"))
j, a = (MatrixSymbol(s, DIM, 1) for s in ("j", "a"))
H = MatrixSymbol("H", DIM, DIM)
J, A = DiagMatrix(j), DiagMatrix(a)


def _env(rng: np.random.Generator) -> dict[str, np.ndarray]:
    env = {k: rng.normal(size=N) for k in ("gamma", "v", "x", "j", "a")}
    h = rng.normal(size=(N, N))
    env["H"] = h + h.T
    return env


def _node_value(node: Node, env: dict[str, np.ndarray]) -> np.ndarray:
    out = np.ones(N)
    for name in node.group:
        out = out * env[name]
    for (_, mat), kid in node.kids:
        out = out * (env[mat] @ _node_value(kid, env))
    return out


def _poly_value(poly, scalars: Scalars, env: dict[str, np.ndarray]) -> np.ndarray:
    values = {s: float(np.sum(_node_value(nd, env))) for s, nd in scalars.nodes.items()}
    out = np.zeros(N)
    for node, coef in poly.terms.items():
        out = out + float(sp.sympify(coef).xreplace(values)) * _node_value(node, env)
    return out


def _explicit(expr, env: dict[str, np.ndarray]) -> np.ndarray:
    """The matrix expression evaluated directly with NumPy matrices (no expansion)."""
    from sympy.matrices.expressions import HadamardProduct, MatAdd, MatMul, Transpose

    def ev(e):
        if isinstance(e, MatAdd):
            return sum(ev(t) for t in e.args)
        if isinstance(e, MatMul):
            out = None
            coef = 1.0
            for f in e.args:
                if isinstance(f, sp.MatrixExpr):
                    val = ev(f)
                    out = val if out is None else out @ val
                else:
                    coef *= float(f)
            return coef * out
        if isinstance(e, HadamardProduct):
            out = ev(e.args[0])
            for f in e.args[1:]:
                out = out * ev(f)
            return out
        if isinstance(e, Transpose):
            return ev(e.arg).T
        if isinstance(e, DiagMatrix):
            return np.diag(ev(e.args[0]).ravel())
        if isinstance(e, MatrixSymbol):
            val = env[e.name]
            return val if val.ndim == 2 else val[:, None]
        raise TypeError(type(e))

    return np.asarray(ev(expr), dtype=float).ravel()


BLOCKS = [
    J * (g * v.T - v * g.T) * x,
    (g * v.T - v * g.T) * J * x,
    A * (g * v.T - v * g.T) * A * x,
    sp.HadamardProduct(H, g * v.T - v * g.T) * x,
    H * J * g * (x.T * A * v),
    g * ((J * g).T * H * x),
    g * (v.T * g) * (x.T * x),
]


@settings(max_examples=8, deadline=None)
@given(
    coefs=st.lists(st.integers(-3, 3), min_size=len(BLOCKS), max_size=len(BLOCKS)),
    seed=st.integers(0, 2**16),
)
def test_expansion_agrees_with_explicit_matrices(coefs: list[int], seed: int) -> None:
    expr = sp.ZeroMatrix(DIM, 1)
    for c, b in zip(coefs, BLOCKS, strict=True):
        if c:
            expr = expr + c * b
    if expr == sp.ZeroMatrix(DIM, 1):
        return
    scalars = Scalars()
    poly = expand_vector(expr, scalars, {"H"})
    env = _env(np.random.default_rng(seed))
    np.testing.assert_allclose(_poly_value(poly, scalars, env), _explicit(expr, env), atol=1e-10)


def test_dot_products_are_canonical() -> None:
    scalars = Scalars()
    s1 = expand_scalar(g.T * J * v, scalars)
    s2 = expand_scalar(v.T * J * g, scalars)
    s3 = expand_scalar(x.T * H * J * g, scalars, {"H"})
    s4 = expand_scalar(g.T * J * H * x, scalars, {"H"})
    assert s1 == s2 and s3 == s4 and s1 != s3


@pytest.mark.parametrize("name", sorted(INERTIAS))
def test_inertia_of_a_skew_matrix_is_skew(name: str) -> None:
    """``g . I(g ^ v) g = 0`` comes out by cancellation of canonical dot products."""
    fn, params = INERTIAS[name].operator, (INERTIAS[name].param,)
    objs = [p.symbolic() for p in params]
    scalars = Scalars()
    poly = expand_vector(fn(g * v.T - v * g.T, *objs) * g, scalars, {"H"})
    assert poly.dot(leaf("gamma"), scalars) == 0


def test_veselova_derivation_is_the_known_one() -> None:
    """Seed inertia: gammadot = |gamma|^2 v and mdot = -(m . v) gamma - P grad U (the module
    docstring of veselova_body.embedded), found by cancellation."""
    d = rigid_body(5, "a-omega-a").derive()
    s = d.scalars
    assert d.gamma_dot.terms == {leaf("v"): s.of(leaf("gamma", "gamma"))}
    assert d.m_dot.terms == {leaf("gamma"): -s.of(leaf("m", "v"))}
    assert not d.dense and len(d.rank) == 2


def _states(n: int, rng: np.random.Generator, lanes: int = 5) -> np.ndarray:
    return project_to_constraints(rng.normal(size=(lanes, 2 * n)))


def _potential(gm: list) -> sp.Expr:
    return gm[0] * gm[1] + gm[-1] ** 3


@pytest.mark.parametrize("n", [5, 20])
def test_seed_inertia_matches_hand_derived_program(n: int) -> None:
    body = rb.RigidBody(
        n,
        lambda Om, A: A * Om * A,
        [rb.diagonal("a", positive=True)],
        potential=_potential,
    )
    ours = body.vector_field().compile(companions=("observables",))
    hand = StructuredVectorField(veselova_program(n, _potential), name=f"veselova_hand_{n}")
    ref = hand.compile()
    rng = np.random.default_rng(n)
    xs, a = _states(n, rng), 1 + rng.random((5, n))
    f, fr = ours.evaluate("rhs", xs, params=a), ref.evaluate("rhs", xs, params=a)
    np.testing.assert_allclose(f, fr, atol=1e-13 * np.max(np.abs(fr)))
    o, orf = ours.evaluate("observables", xs, params=a), ref.evaluate("observables", xs, params=a)
    np.testing.assert_allclose(o[:, :3], orf[:, :3], atol=1e-13)
    # the seed's density c^{(2-n)/2} is exp(-1/2 log det K) up to the constant det A
    np.testing.assert_allclose(-0.5 * (o[:, 3] - np.log(a).sum(1)), orf[:, 3], atol=1e-12)


def test_matrix_potential_equals_component_potential() -> None:
    n = 6

    def inertia(Om, J, chi):
        return J * Om + Om * J

    params = [rb.diagonal("j"), rb.vector("chi")]

    def matrix_pot(gm, J, chi):
        return sp.trace(chi.T * gm) + sp.trace(gm.T * J * gm) ** 2

    def comp_pot(gm):
        chi, jj = sp.symbols(f"chi1:{n + 1}"), sp.symbols(f"j1:{n + 1}")
        return (
            sum(c * y for c, y in zip(chi, gm, strict=True))
            + sum(k * y**2 for k, y in zip(jj, gm, strict=True)) ** 2
        )

    c1 = rb.RigidBody(n, inertia, params, matrix_potential=matrix_pot).vector_field()
    c2 = rb.RigidBody(n, inertia, params, potential=comp_pot).vector_field()
    k1, k2 = (c.compile(companions=("observables",)) for c in (c1, c2))
    rng = np.random.default_rng(1)
    xs = _states(n, rng, 3)
    p = np.concatenate([1 + rng.random(n), rng.normal(size=n)])
    np.testing.assert_allclose(
        k1.evaluate("rhs", xs, params=p), k2.evaluate("rhs", xs, params=p), atol=1e-13
    )
    np.testing.assert_allclose(
        k1.evaluate("observables", xs, params=p),
        k2.evaluate("observables", xs, params=p),
        atol=1e-13,
    )


@pytest.mark.parametrize("constraint", ["space_fixed", "body_fixed"])
def test_dense_and_woodbury_solves_agree(constraint: str) -> None:
    """The pairwise inertia with H_ij = j_i + j_j is the physical one: a dense per-lane LU and
    the closed-form Woodbury solve give the same field and log-determinant."""
    n = 7
    dense = rigid_body(n, "pairwise", constraint).vector_field()
    wood = rigid_body(n, "physical", constraint).vector_field()
    assert any(s.kind == "solve" for s in dense.program.statements)
    assert not any(s.kind == "solve" for s in wood.program.statements)
    kd, kw = (f.compile(companions=("observables",)) for f in (dense, wood))
    xs = _states(n, np.random.default_rng(2))
    pd, pw = rigid_body_params(n, "pairwise"), rigid_body_params(n, "physical")
    np.testing.assert_allclose(
        kd.evaluate("rhs", xs, params=pd), kw.evaluate("rhs", xs, params=pw), atol=1e-13
    )
    np.testing.assert_allclose(
        kd.evaluate("observables", xs, params=pd),
        kw.evaluate("observables", xs, params=pw),
        atol=1e-12,
    )


def _metric(gamma: np.ndarray, params: np.ndarray, inertia: str, b: np.ndarray) -> np.ndarray:
    """Dense ``K_b + b b^T`` by columns (NumPy), for one lane."""
    op = named_inertia(inertia).numpy(params)
    n = gamma.size
    cols = []
    for k in range(n):
        e = np.eye(n)[k]
        om = np.outer(b, e) - np.outer(e, b)
        cols.append(-op(om) @ b)
    return np.stack(cols, axis=1) + np.outer(b, b)


@pytest.mark.parametrize("inertia", sorted(INERTIAS))
def test_velocity_and_log_det_against_dense_numpy(inertia: str) -> None:
    n = 6
    rng = np.random.default_rng(3)
    p = rigid_body_params(n, inertia, rng)
    k = rigid_body(n, inertia).vector_field().compile(companions=("observables",))
    xs = _states(n, rng, 4)
    f = k.evaluate("rhs", xs, params=p)
    om = angular_velocity(xs[:, :n], xs[:, n:], p, inertia)
    np.testing.assert_allclose(f[:, :n], -np.einsum("lij,lj->li", om, xs[:, :n]), atol=1e-13)
    obs = k.evaluate("observables", xs, params=p)
    for lane in range(4):
        gm = xs[lane, :n]
        sign, ld = np.linalg.slogdet(_metric(gm, p, inertia, gm))
        assert sign > 0
        assert obs[lane, 3] == pytest.approx(ld - np.log(gm @ gm), abs=1e-11)
        # energy 1/2 <I Omega, Omega> = -1/4 tr(I(Om) Om)
        e = -0.25 * np.trace(named_inertia(inertia).numpy(p)(om[lane]) @ om[lane])
        assert obs[lane, 0] == pytest.approx(e, rel=1e-12)


@pytest.mark.parametrize("inertia", ["physical", "pairwise"])
@pytest.mark.parametrize("family", ["veselova", "suslov"])
def test_first_integrals_along_trajectories(inertia: str, family: str) -> None:
    n = 5

    def pot(gm):
        return gm[0] + gm[1] * gm[2]

    if family == "veselova":
        vf = rigid_body(n, inertia, potential=pot).vector_field()
        p = rigid_body_params(n, inertia)
        axis = None
    else:
        vf = suslov_rigid_body(n, inertia, potential=pot)
        p = rigid_body_params(n, inertia, axis=True)
        axis = p[-n:]
    k = vf.compile(companions=("observables",))
    xs = _states(n, np.random.default_rng(4), 3)
    if axis is not None:
        xs[:, n:] -= np.outer(xs[:, n:] @ axis, axis)
    res = nh.integrate(vf, xs, np.linspace(0.0, 5.0, 3), params=p, rtol=1e-12, atol=1e-13)
    o0 = k.evaluate("observables", res.y[:, 0], params=p)
    o1 = k.evaluate("observables", res.y[:, -1], params=p)
    assert np.max(np.abs(o1[:, 0] - o0[:, 0])) < 1e-10  # energy
    assert np.max(np.abs(o1[:, 1] - 1.0)) < 1e-10  # |gamma|^2
    assert np.max(np.abs(o1[:, 2])) < 1e-10  # m . b
    assert np.max(np.abs(res.y[:, -1] - res.y[:, 0])) > 0.05  # it moved


def test_derivation_does_not_depend_on_n() -> None:
    small, large = rigid_body(8, "physical"), rigid_body(64, "physical")
    assert small.derive().m_dot.terms == large.derive().m_dot.terms
    assert len(small.program().statements) == len(large.program().statements)


def test_bad_descriptions_are_named() -> None:
    with pytest.raises(ValueError, match="n must be an int >= 3"):
        rb.RigidBody(2, lambda Om: Om)
    with pytest.raises(ValueError, match="n x n matrix expression"):
        rb.RigidBody(4, lambda Om: Om * g).derive()
    with pytest.raises(ValueError, match="reserved"):
        rb.diagonal("gamma")
    with pytest.raises(ValueError, match="repeat"):
        rb.RigidBody(4, lambda Om, J, K: Om, [rb.diagonal("j"), rb.diagonal("j")])
    with pytest.raises(ValueError, match="not linear|unsupported|more than once"):
        rb.RigidBody(4, lambda Om: Om * Om).derive()
    with pytest.raises(ValueError, match="sp.trace"):
        rb.RigidBody(4, lambda Om: Om, matrix_potential=lambda gm: (gm.T * gm)[0, 0]).derive()
    with pytest.raises(ValueError, match="axis 'u' is not a declared"):
        rb.RigidBody(4, lambda Om: Om, constraint=rb.body_fixed("u"))
    with pytest.raises(ValueError, match="unsupported matrix operation"):
        rb.RigidBody(4, lambda Om: sp.Inverse(Om)).derive()


@pytest.mark.parametrize("constraint", [rb.space_fixed(), rb.body_fixed()])
def test_full_mass_tensor_takes_the_dense_route(constraint: rb.Constraint) -> None:
    """``J Om + Om J`` with a full symmetric ``J`` (a body whose principal axes are not the
    coordinate axes): the matrix acts on the unknown, so the metric is solved densely; the
    velocity agrees with a NumPy assembly of ``K_b + b b^T`` and energy is conserved."""
    n = 5
    body = rb.RigidBody(
        n, lambda Om, J: J * Om + Om * J, [rb.symmetric("J")], constraint=constraint
    )
    vf = body.vector_field()
    assert any(s.kind == "solve" for s in vf.program.statements)
    k = vf.compile()
    rng = np.random.default_rng(5)
    jm = rng.normal(size=(n, n))
    jm = jm @ jm.T / n + np.eye(n)
    xs = _states(n, rng, 3)
    space = constraint.kind == "space_fixed"
    if not space:
        xs[:, 2 * n - 1] = 0.0  # m . e_n = 0
    f = k.evaluate("rhs", xs, params=jm.ravel())
    for lane in range(3):
        gm, m = xs[lane, :n], xs[lane, n:]
        b = gm if space else np.eye(n)[-1]
        cols = []
        for i in range(n):
            om = np.outer(b, np.eye(n)[i]) - np.outer(np.eye(n)[i], b)
            cols.append(-(jm @ om + om @ jm) @ b)
        kb = np.stack(cols, axis=1) + np.outer(b, b)
        v = np.linalg.solve(kb, m - b * (b @ m) / (b @ b))
        om = np.outer(b, v) - np.outer(v, b)
        np.testing.assert_allclose(f[lane, :n], -om @ gm, atol=1e-13)
    res = nh.integrate(vf, xs, np.linspace(0.0, 3.0, 3), params=jm.ravel(), rtol=1e-12, atol=1e-13)
    e = res.observables["energy"]
    assert np.max(np.abs(e - e[:, :1])) < 1e-10
    assert np.max(np.abs(res.y[:, -1] - res.y[:, 0])) > 0.05


def test_gradient_of_a_dot_product_through_a_matrix() -> None:
    """``d/dw (b^T H w) = H b``: the occurrence is found in the re-rooted tree only."""
    scalars = Scalars()
    s = expand_scalar(g.T * H * x, scalars, {"H"})
    (node,) = (scalars.nodes[sym] for sym in s.free_symbols)
    (z,) = extract(node, "x")
    env = _env(np.random.default_rng(0))
    np.testing.assert_allclose(_node_value(z, env), env["H"] @ env["gamma"], atol=1e-12)


def test_reciprocal_names_cancel() -> None:
    """``a o ~a = 1`` in the node algebra, so dot products through a reciprocal are canonical:
    ``sum a gamma (~a) gamma`` is ``|gamma|^2``."""
    from nhfast.symbolic.rigid_body.algebra import inverse

    assert Node(("a", inverse("a"))) == Node()
    assert leaf("a", "gamma").times(leaf(inverse("a"))) == leaf("gamma")
    assert inverse(inverse("a")) == "a"
    scalars = Scalars()
    assert scalars.of(leaf("a", "gamma", "gamma", inverse("a"))) == scalars.of(
        leaf("gamma", "gamma")
    )


def _dense_velocity(inertia_np, b: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``v`` in ``b^perp`` with ``-P_b I(b ^ v) b = P_b m`` (NumPy, columns of the operator)."""
    n = b.size
    cols = []
    for k in range(n):
        e = np.eye(n)[k]
        cols.append(-inertia_np(np.outer(b, e) - np.outer(e, b)) @ b)
    kb = np.stack(cols, axis=1) + np.outer(b, b)
    return np.linalg.solve(kb, m - b * (b @ m) / (b @ b))


# (inertia at matrix level, its parameters, NumPy inertia of the parameter values)
_USER_BODIES = {
    "scalar": (
        lambda Om, k: k * Om,
        [rb.scalar("k", positive=True)],
        lambda p, n: lambda Om: p[0] * Om,
        lambda n: np.array([1.7]),
    ),
    "seed+physical": (
        lambda Om, A, J: A * Om * A + J * Om + Om * J,
        [rb.diagonal("a", positive=True), rb.diagonal("j", positive=True)],
        lambda p, n: (
            lambda Om: p[:n, None] * Om * p[None, :n] + p[n:, None] * Om + Om * p[None, n:]
        ),
        lambda n: np.concatenate([1 + np.arange(n) / n, 2 - np.arange(n) / (2 * n)]),
    ),
    "squared": (
        lambda Om, A: A * A * Om * A + A * Om * A * A,
        [rb.diagonal("a", positive=True)],
        lambda p, n: lambda Om: p[:, None] ** 2 * Om * p[None, :] + p[:, None] * Om * p**2,
        lambda n: 1 + np.arange(n) / n,
    ),
}


@pytest.mark.parametrize("name", sorted(_USER_BODIES))
@pytest.mark.parametrize("constraint", ["space_fixed", "body_fixed"])
def test_closed_form_velocity_of_user_inertias(name: str, constraint: str) -> None:
    """A user's inertia: the closed-form (bordered) solve gives the velocity of a dense NumPy
    solve of ``(K_b + b b^T) v = P_b m``, and ``log det K_b|b^perp``."""
    n = 6
    fn, params, numeric, values = _USER_BODIES[name]
    con = rb.space_fixed() if constraint == "space_fixed" else rb.body_fixed()
    body = rb.RigidBody(n, fn, params, constraint=con)
    prog = body.program()
    assert not any(s.kind == "solve" for s in prog.statements)
    k = StructuredVectorField(prog, name=f"user_{name}_{constraint}").compile(
        companions=("observables",)
    )
    p = values(n)
    rng = np.random.default_rng(7)
    xs = _states(n, rng, 4)
    if constraint == "body_fixed":
        xs[:, 2 * n - 1] = 0.0  # m . e_n = 0
    f = k.evaluate("rhs", xs, params=p)
    obs = k.evaluate("observables", xs, params=p)
    op = numeric(p, n)
    for lane in range(4):
        gm, m = xs[lane, :n], xs[lane, n:]
        b = gm if constraint == "space_fixed" else np.eye(n)[-1]
        v = _dense_velocity(op, b, m)
        om = np.outer(b, v) - np.outer(v, b)
        np.testing.assert_allclose(f[lane, :n], -om @ gm, atol=1e-12)
        q = np.linalg.qr(np.column_stack([b, np.eye(n)]))[0][:, 1:]  # a basis of b^perp
        cols = [-op(np.outer(b, e) - np.outer(e, b)) @ b for e in q.T]
        sign, ld = np.linalg.slogdet(q.T @ np.stack(cols, axis=1))
        assert sign > 0
        assert obs[lane, 3] == pytest.approx(ld, abs=1e-10)


@pytest.mark.parametrize("inertia", ["a-omega-a", "physical"])
def test_first_integrals_exact_off_the_constraint_manifold(inertia: str) -> None:
    """Off ``|gamma| = 1``, ``gamma . m = 0`` (where the solve drops terms that vanish with
    ``gamma . m``) the field still keeps ``|gamma|^2`` and ``gamma . m`` exactly:
    ``gamma . gammadot = 0`` and ``m . gammadot + gamma . mdot = 0`` to round-off."""
    n = 7
    k = rigid_body(n, inertia).vector_field().compile()
    rng = np.random.default_rng(11)
    xs = rng.normal(size=(6, 2 * n))  # neither on the sphere nor gamma . m = 0
    p = rigid_body_params(n, inertia)
    f = k.evaluate("rhs", xs, params=p)
    g, m, gd, md = xs[:, :n], xs[:, n:], f[:, :n], f[:, n:]
    scale = np.abs(g * gd).sum(1) + np.abs(m * gd).sum(1) + np.abs(g * md).sum(1)
    assert np.all(np.abs(np.sum(g * gd, axis=1)) < 1e-14 * scale)
    assert np.all(np.abs(np.sum(m * gd + g * md, axis=1)) < 1e-14 * scale)


def test_seed_program_is_as_lean_as_the_hand_derived_one() -> None:
    """The engine's program of ``A Om A`` has the hand-derived program's passes: the five
    dot products (``|gamma|^2``, ``(A gamma, gamma)``, ``gamma . A^{-1} m``, ``m . A^{-1} m``,
    ``gamma . m``) in one pass, no per-lane vector other than the outputs."""
    from nhfast.codegen.structured import _groups, _steps

    prog = rigid_body(12, "a-omega-a").program()
    groups = _groups(prog, _steps(prog, "rhs"))
    kinds = [(mode, sorted({s.kind for s in steps})) for mode, steps in groups]
    assert kinds == [
        ("indexed", ["reduce"]),
        ("lane", ["scalar"]),
        ("indexed", ["out_vec"]),
    ]
    assert len(groups[0][1]) == 5


@pytest.mark.parametrize("inertia", ["a-omega-a", "physical", "scalar+a-omega-a"])
@pytest.mark.parametrize("constraint", ["space_fixed", "body_fixed"])
def test_closed_form_divergence_equals_the_differentiated_program(
    inertia: str, constraint: str
) -> None:
    """The divergence in dot products (the algebra's chain rule, through the reciprocal of a
    non-monomial diagonal) equals forward-mode differentiation of the program's right-hand
    side, off the constraint manifold too."""
    from nhfast.codegen.differentiate import with_divergence

    n = 6
    con = rb.space_fixed() if constraint == "space_fixed" else rb.body_fixed()
    if inertia == "scalar+a-omega-a":
        body = rb.RigidBody(
            n,
            lambda Om, A, k: A * Om * A + k * Om,
            [rb.diagonal("a", positive=True), rb.scalar("k", positive=True)],
            constraint=con,
        )
        par = np.r_[1 + np.arange(n) / n, 0.7]
    else:
        spec = INERTIAS[inertia]
        body = rb.RigidBody(n, spec.operator, (spec.param,), constraint=con)
        par = rigid_body_params(n, inertia)
    prog = body.program()
    (div,) = prog.outputs["divergence"]
    assert not any(s.name.startswith("d_") for s in div.free_symbols)  # no tangent program
    ref = prog.copy()
    del ref.outputs["divergence"]
    ref = with_divergence(ref)
    xs = np.random.default_rng(3).normal(size=(6, 2 * n))
    got = StructuredVectorField(prog, name=f"div_{inertia}_{constraint}").compile(
        companions=("divergence",)
    )
    want = StructuredVectorField(ref, name=f"div_ref_{inertia}_{constraint}").compile(
        companions=("divergence",)
    )
    g, w = (k.evaluate("divergence", xs, params=par) for k in (got, want))
    np.testing.assert_allclose(g, w, rtol=0, atol=1e-13 * max(1.0, float(np.max(np.abs(w)))))


def test_potential_means_components_everywhere() -> None:
    """``potential`` is ``U`` of the components in RigidBody as in every constructor (a
    callable of the list, or an expression in ``gamma1..``); the matrix-level form is
    ``matrix_potential``; the old keyword and a matrix-level callable given as ``potential``
    raise, naming the right keyword."""
    n = 4
    g = sp.symbols(f"gamma1:{n + 1}")
    by_list = rb.RigidBody(n, lambda Om: Om, potential=lambda gm: gm[0] ** 2 / 2 + gm[2])
    by_expr = rb.RigidBody(n, lambda Om: Om, potential=g[0] ** 2 / 2 + g[2])
    rng = np.random.default_rng(2)
    xs = _states(n, rng, 3)
    f1 = StructuredVectorField(by_list.program(), name="pot_list").compile().evaluate("rhs", xs)
    f2 = StructuredVectorField(by_expr.program(), name="pot_expr").compile().evaluate("rhs", xs)
    np.testing.assert_array_equal(f1, f2)
    with pytest.raises(TypeError, match="component_potential is now called potential"):
        rb.RigidBody(n, lambda Om: Om, component_potential=lambda gm: gm[0])
    matrix_level = rb.RigidBody(n, lambda Om: Om, potential=lambda gm, *p: (gm.T * gm)[0, 0])
    with pytest.raises(TypeError, match="goes to matrix_potential"):
        matrix_level.program()
