"""Euler-Poincare-Suslov systems (nhfast.symbolic.liegroup): structure constants, the rigid body,
a left-invariant constraint on SO(4)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
from nhfast.symbolic.liegroup import (
    LieGroupSystem,
    so3_structure_constants,
    son_structure_constants,
)

TOL = {"rtol": 1e-12, "atol": 1e-12}


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
