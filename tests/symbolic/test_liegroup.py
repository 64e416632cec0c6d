"""Euler-Poincare-Suslov systems (nhfast.symbolic.liegroup): Suslov problem on SO(3), a
left-invariant constraint on SO(4), and Veselova's body equations for n = 3 against the
unreduced SO(3) form of nhfast.systems.veselova_body.forms."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
from nhfast.symbolic.liegroup import (
    LieGroupSystem,
    so3_structure_constants,
    son_structure_constants,
    suslov,
    veselova_body_so3,
)
from nhfast.systems.veselova_body.forms import (
    embedded_momentum,
    embedded_to_unreduced,
    veselova_unreduced,
)

TOL = {"rtol": 1e-12, "atol": 1e-12}


def potential(gamma: list) -> sp.Expr:
    return sp.Rational(1, 3) * gamma[0] ** 2 + sp.Rational(1, 2) * gamma[1] - gamma[2] / 4


@functools.cache
def suslov_vf() -> nh.VectorField:
    return suslov().as_vector_field()


def test_structure_constants_are_checked():
    assert sp.Array(so3_structure_constants()).shape == (3, 3, 3)
    LieGroupSystem(son_structure_constants(4), sp.eye(6), sp.Matrix([[1, 0, 0, 0, 0, 0]]))
    bad = so3_structure_constants()
    bad[0, 1, 2] = 2  # breaks skew-symmetry
    with pytest.raises(ValueError, match="skew"):
        LieGroupSystem(bad, sp.eye(3), sp.Matrix([[0, 0, 1]]))
    bad = sp.MutableDenseNDimArray.zeros(3, 3, 3)  # [e1, e2] = e1, [e2, e3] = e2: skew, but
    bad[0, 1, 0], bad[1, 0, 0], bad[1, 2, 1], bad[2, 1, 1] = 1, -1, 1, -1  # Jacobi fails
    with pytest.raises(ValueError, match="Jacobi"):
        LieGroupSystem(bad, sp.eye(3), sp.Matrix([[0, 0, 1]]))
    with pytest.raises(ValueError, match="annihilator"):
        LieGroupSystem(so3_structure_constants(), sp.eye(3), sp.eye(3))


def test_so3_coadjoint_is_rigid_body():
    """ad*_Omega M = M x Omega for so(3) (Euler's equations)."""
    I = sp.diag(*sp.symbols("J1:4", positive=True))  # noqa: E741
    sys_ = LieGroupSystem(so3_structure_constants(), I, sp.Matrix([[0, 0, 1]]))
    W = sp.Matrix(sys_.velocities)
    M = I * W
    assert sp.simplify(sp.Matrix(sys_.coadjoint()) - M.cross(W)) == sp.zeros(3, 1)


def test_suslov_matches_classical_equations_and_conserves_energy():
    """Suslov: I1 w1' = -(I13 w1 + I23 w2) w2, I2 w2' = (I13 w1 + I23 w2) w1, w3 = 0."""
    w1, w2 = sp.symbols("w1 w2", real=True)
    I1, I2, I3, I13, I23 = sp.symbols("I1 I2 I3 I13 I23", real=True)
    k = I13 * w1 + I23 * w2
    classical = nh.VectorField(
        states=[w1, w2], rhs=[-k * w2 / I1, k * w1 / I2], params=[I1, I2, I3, I13, I23]
    )
    rng = np.random.default_rng(7)
    m = 6
    par = np.column_stack(
        [
            rng.uniform(2, 4, m),
            rng.uniform(2, 4, m),
            rng.uniform(2, 4, m),
            rng.uniform(-0.5, 0.5, m),
            rng.uniform(-0.5, 0.5, m),
        ]
    )
    w0 = rng.normal(size=(m, 2))
    t = np.linspace(0, 10, 51)
    res = nh.integrate(suslov_vf(), np.column_stack([w0, np.zeros(m)]), t, params=par, **TOL)
    ref = nh.integrate(classical, w0, t, params=par, **TOL)
    assert np.max(np.abs(res.y[..., :2] - ref.y)) < 1e-9
    assert np.max(np.abs(res.y[..., 2])) < 1e-12
    assert np.max(np.abs(res.y[..., :2] - w0[:, None, :])) > 0.1  # non-trivial motion
    e = res.observables["energy"]
    assert np.max(np.abs(e - e[:, :1]) / e[:, :1]) < 1e-10
    assert np.max(res.observables["constraint"]) < 1e-24


def test_left_invariant_constraint_on_so4_conserves_energy():
    """Suslov-type system on so(4): random SPD inertia, Omega_12 = Omega_34 = 0."""
    rng = np.random.default_rng(11)
    B = rng.normal(size=(6, 6))
    inertia = sp.Matrix(np.round(B @ B.T + 6 * np.eye(6), 6).tolist()).applyfunc(sp.nsimplify)
    A = sp.Matrix([[1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1]])  # pairs (0,1) and (2,3)
    vf = LieGroupSystem(son_structure_constants(4), inertia, A).as_vector_field()
    x0 = rng.normal(size=(5, 6))
    x0[:, [0, 5]] = 0
    res = nh.integrate(vf, x0, np.linspace(0, 5, 26), **TOL)
    e = res.observables["energy"]
    assert np.max(np.abs(e - e[:, :1]) / e[:, :1]) < 1e-10
    assert np.max(res.observables["constraint"]) < 1e-22
    assert np.max(np.abs(res.y - x0[:, None, :])) > 0.1


def test_veselova_body_so3_matches_unreduced():
    body = veselova_body_so3(potential).as_vector_field()
    unr = veselova_unreduced(3, potential)
    rng = np.random.default_rng(3)
    m = 5
    g = rng.normal(size=(m, 3))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    v = rng.normal(size=(m, 3))
    v -= np.sum(v * g, axis=1, keepdims=True) * g
    a = rng.uniform(0.5, 3, size=(m, 3))
    mom = embedded_momentum(g, v, a)
    omega0 = np.cross(v, g)  # Omega = gamma ^ v = omega^ with omega = v x gamma
    t = np.linspace(0, 5, 26)
    rb = nh.integrate(body, np.hstack([omega0, g]), t, params=a, **TOL)
    ru = nh.integrate(unr, embedded_to_unreduced(g, mom, a), t, params=a, **TOL)
    # unreduced states: g (9, row-major), Omega_12, Omega_13, Omega_23
    W12, W13, W23 = ru.y[..., 9], ru.y[..., 10], ru.y[..., 11]
    omega_u = np.stack([-W23, W13, -W12], axis=-1)
    gamma_u = ru.y[..., 6:9]
    assert np.max(np.abs(rb.y[..., :3] - omega_u)) < 1e-9
    assert np.max(np.abs(rb.y[..., 3:] - gamma_u)) < 1e-9
    assert np.max(np.abs(rb.observables["energy"] - ru.observables["energy"])) < 1e-10
    assert np.max(np.abs(rb.y[..., 3:] - g[:, None, :])) > 0.1
    assert np.max(rb.observables["constraint"]) < 1e-20
