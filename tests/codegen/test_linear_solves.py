"""Kernels with auxiliary linear solves (no symbolic inverses) against explicit formulas."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import nhfast as nh

th1, th2, p1, p2, v1, v2, g = sp.symbols("theta1 theta2 p1 p2 v1 v2 g")
M = sp.Matrix([[2, sp.cos(th1 - th2)], [sp.cos(th1 - th2), 1]])  # double pendulum, m = l = 1
V = -g * (2 * sp.cos(th1) + sp.cos(th2))
v = sp.Matrix([v1, v2])


def _implicit(spd: bool = True) -> nh.VectorField:
    """Double pendulum in (theta, p) with the velocities v = M^-1 p from a linear solve."""
    dHdq = [-(v.T * M.diff(q) * v)[0] / 2 + V.diff(q) for q in (th1, th2)]
    return nh.VectorField(
        states=[th1, th2, p1, p2],
        rhs=[v1, v2, -dHdq[0], -dHdq[1]],
        params=[g],
        observables={"energy": (p1 * v1 + p2 * v2) / 2 + V},
        solves=[nh.LinearSolve(unknowns=[v1, v2], matrix=M, rhs=[p1, p2], spd=spd)],
    )


def _explicit() -> nh.HamiltonianSystem:
    H = (sp.Matrix([p1, p2]).T * M.inv() * sp.Matrix([p1, p2]))[0] / 2 + V
    return nh.HamiltonianSystem([th1, th2], [p1, p2], sp.simplify(H), params=[g])


@pytest.fixture(scope="module")
def states():
    rng = np.random.default_rng(7)
    return rng.uniform(-1.5, 1.5, size=(20, 4))


@pytest.mark.parametrize("spd", [True, False])
def test_rhs_jacobian_divergence_match_explicit(states, spd):
    imp, exp = _implicit(spd), _explicit()
    par = [9.81]
    for kind in ("rhs", "jacobian", "divergence"):
        a = imp.compile((kind,) if kind != "rhs" else ()).evaluate(kind, states, params=par)
        b = exp.compile((kind,) if kind != "rhs" else ()).evaluate(kind, states, params=par)
        assert np.allclose(a, b, rtol=1e-12, atol=1e-12), kind
    # a Hamiltonian flow is divergence free, and the implicit kernel knows it
    div = imp.compile(("divergence",)).evaluate("divergence", states, params=par)
    assert np.max(np.abs(div)) < 1e-12


def test_trajectories_match_explicit_and_conserve_energy(states):
    t = np.linspace(0, 5, 6)
    a = nh.integrate(_implicit(), states, t, params=[9.81], rtol=1e-12, atol=1e-12)
    b = nh.integrate(_explicit(), states, t, params=[9.81], rtol=1e-12, atol=1e-12)
    assert np.max(np.abs(a.y - b.y)) < 1e-8
    e = a.observables["energy"]
    assert np.max(np.abs(e - e[:, :1])) < 1e-9


def test_numpy_backend_with_solves(states, monkeypatch):
    c = _implicit().compile(("jacobian", "divergence", "observables"))
    monkeypatch.setenv("NHFAST_BACKEND", "numpy")
    n = _implicit().compile(("jacobian", "divergence", "observables"))
    assert n.backend == "numpy"
    for kind in ("rhs", "jacobian", "divergence", "observables"):
        a = c.evaluate(kind, states, params=[9.81])
        b = n.evaluate(kind, states, params=[9.81])
        assert np.allclose(a, b, rtol=1e-12, atol=1e-12), kind


def test_chained_solves():
    """A later solve may use the unknowns of an earlier one; derivatives chain through."""
    x, y, a, b = sp.symbols("x y a b")
    vf = nh.VectorField(
        [x, y],
        [a + b, a * b],
        solves=[
            nh.LinearSolve([a], sp.Matrix([[2 + x**2]]), [y]),
            nh.LinearSolve([b], sp.Matrix([[1 + a**2]]), [x * a]),
        ],
    )
    A = y / (2 + x**2)
    B = x * A / (1 + A**2)
    ref = nh.VectorField([x, y], [A + B, A * B])
    pts = np.random.default_rng(1).normal(size=(10, 2))
    for kind in ("rhs", "jacobian", "divergence"):
        fam = () if kind == "rhs" else (kind,)
        a = vf.compile(fam).evaluate(kind, pts)
        b = ref.compile(fam).evaluate(kind, pts)
        assert np.allclose(a, b, rtol=1e-12, atol=1e-13), kind


def test_singular_matrix_gives_nan_lane_and_status():
    x, u = sp.symbols("x u")
    vf = nh.VectorField([x], [u], solves=[nh.LinearSolve([u], sp.Matrix([[x]]), [1], spd=False)])
    out = vf.evaluate("rhs", [[2.0], [0.0]])
    assert out[0, 0] == 0.5 and np.isnan(out[1, 0])
    vf_spd = nh.VectorField([x], [u], solves=[nh.LinearSolve([u], sp.Matrix([[x]]), [1])])
    assert np.isnan(vf_spd.evaluate("rhs", [[-1.0]])[0, 0])  # not positive definite
    with pytest.raises(nh.IntegrationError, match="non-finite"):
        nh.integrate(vf_spd, [[-1.0]], [0, 1], method="rk4", h=0.1)


def test_solve_validation():
    x, u, w = sp.symbols("x u w")
    with pytest.raises(ValueError, match=r"solves\[0\].matrix must be 1x1"):
        nh.VectorField([x], [u], solves=[nh.LinearSolve([u], sp.eye(2), [1])])
    with pytest.raises(ValueError, match=r"solves\[0\] uses symbols .*: w"):
        nh.VectorField([x], [u], solves=[nh.LinearSolve([u], sp.Matrix([[w]]), [1])])
    with pytest.raises(ValueError, match="reuse states"):
        nh.VectorField([x], [x], solves=[nh.LinearSolve([x], sp.Matrix([[1]]), [1])])
    with pytest.raises(TypeError, match="a LinearSolve"):
        nh.VectorField([x], [x], solves=[object()])
    vf = nh.VectorField([x], [u], solves=[nh.LinearSolve([u], sp.Matrix([[2]]), [x])])
    with pytest.raises(ValueError, match="symbolic jacobian of a system with solves"):
        vf.jacobian()
