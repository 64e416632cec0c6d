"""Frames, brackets, anholonomity, projector, K and C (nhfast.symbolic.frames)."""

from __future__ import annotations

import pytest
import sympy as sp

from nhfast.symbolic._util import is_zero, matrix_is_zero
from nhfast.symbolic.frames import (
    anholonomity,
    bracket_pairings,
    constraint_coefficients,
    lie_bracket,
    orthogonal_projector,
    reduced_metric,
)

x, y, z, th = sp.symbols("x y z theta", real=True)


def test_lie_bracket_heisenberg() -> None:
    # [d_x + y d_z, d_y] = -d_z  (seed 004 Section 4.1: [hor d_x, hor d_y] = -d_z)
    X = sp.Matrix([1, 0, y])
    Y = sp.Matrix([0, 1, 0])
    assert lie_bracket(X, Y, [x, y, z]) == sp.Matrix([0, 0, -1])
    assert lie_bracket(Y, X, [x, y, z]) == sp.Matrix([0, 0, 1])


def test_lie_bracket_of_rotation_fields() -> None:
    # rotation generators of the plane: [x d_y - y d_x, d_x] = d_y? compute by hand:
    # X = (-y, x), Y = (1, 0): [X, Y] = DY X - DX Y = 0 - (0, 1) = (0, -1)
    X = sp.Matrix([-y, x])
    Y = sp.Matrix([1, 0])
    assert lie_bracket(X, Y, [x, y]) == sp.Matrix([0, -1])


def test_lie_bracket_jacobi_identity() -> None:
    q = [x, y, z]
    A = sp.Matrix([y * z, sp.sin(x), x**2])
    B = sp.Matrix([z, x * y, sp.cos(y)])
    C = sp.Matrix([1, z**2, x * y * z])

    def br(u: sp.Matrix, v: sp.Matrix) -> sp.Matrix:
        return lie_bracket(u, v, q)

    total = br(A, br(B, C)) + br(B, br(C, A)) + br(C, br(A, B))
    assert matrix_is_zero(total)


def test_anholonomity_disk_frame() -> None:
    # seed 002 O9: only nonzero bracket [X1, X2] = -R sin(phi) d_x + R cos(phi) d_y
    phi, theta, R = sp.symbols("phi theta R", positive=True)
    q = [phi, theta, x, y]
    X = sp.Matrix(
        [[1, 0, 0, 0], [0, 1, 0, 0], [0, R * sp.cos(phi), 1, 0], [0, R * sp.sin(phi), 0, 1]]
    )
    Rk = anholonomity(X, q)
    assert is_zero(Rk[0, 1, 2] + R * sp.sin(phi))
    assert is_zero(Rk[0, 1, 3] - R * sp.cos(phi))
    assert is_zero(Rk[0, 1, 0]) and is_zero(Rk[0, 1, 1])
    assert is_zero(Rk[1, 0, 2] - R * sp.sin(phi))
    for i in range(4):
        for j in range(4):
            if {i, j} != {0, 1}:
                assert all(is_zero(Rk[i, j, k]) for k in range(4))


def test_anholonomity_reconstructs_brackets() -> None:
    q = [x, y, z]
    X = sp.Matrix([[1, 0, 0], [x * z, 1, 0], [y, sp.sin(x), 1]])
    Rk = anholonomity(X, q)
    for i in range(3):
        for j in range(3):
            lhs = lie_bracket(X[:, i], X[:, j], q)
            rhs = sum((Rk[i, j, k] * X[:, k] for k in range(3)), sp.zeros(3, 1))
            assert matrix_is_zero(lhs - rhs)


def test_anholonomity_rejects_non_square() -> None:
    with pytest.raises(ValueError, match="square"):
        anholonomity(sp.Matrix([[1], [0], [y]]), [x, y, z])


@pytest.fixture(scope="module")
def particle_data() -> tuple:
    a = sp.Symbol("a", real=True)
    G = sp.Matrix([[1, 0, 0], [0, 1, a], [0, a, 1]])
    E = sp.Matrix([[1, 0], [0, 1], [y, 0]])
    return a, G, E


def test_projector_properties(particle_data: tuple) -> None:
    a, G, E = particle_data
    P = orthogonal_projector(G, E)
    assert matrix_is_zero(P * P - P)
    assert matrix_is_zero(P * E - E)
    assert matrix_is_zero(G * P - P.T * G)  # G-self-adjoint, i.e. orthogonal
    # D-perp of seed 004 Section 4.1: (1-a^2) y d_x + a d_y - d_z is killed by P
    assert matrix_is_zero(P * sp.Matrix([(1 - a**2) * y, a, -1]))


def test_reduced_metric_particle(particle_data: tuple) -> None:
    a, G, E = particle_data
    K = reduced_metric(G, E)
    assert matrix_is_zero(K - sp.Matrix([[1 + y**2, a * y], [a * y, 1]]))


def test_C_matches_projected_bracket(particle_data: tuple) -> None:
    # the definition P[e_i, e_j] = C^k_ij e_k, for all ordered pairs (also checks skewness)
    a, G, E = particle_data
    q = [x, y, z]
    C = constraint_coefficients(G, E, q)
    P = orthogonal_projector(G, E)
    for i in range(2):
        for j in range(2):
            lhs = P * lie_bracket(E[:, i], E[:, j], q)
            rhs = sum((C[i, j, k] * E[:, k] for k in range(2)), sp.zeros(3, 1))
            assert matrix_is_zero(lhs - rhs)


def test_bracket_pairings_shape_and_values(particle_data: tuple) -> None:
    a, G, E = particle_data
    B = bracket_pairings(G, E, [x, y, z])
    # [e_x, e_y] = -d_z; <<-d_z, e_x>> = -(y + 0) ... G e_x = (1, a y, y); -d_z . G e_x = -y
    assert tuple(B.shape) == (2, 2, 2)
    assert is_zero(B[0, 1, 0] + y)
    assert is_zero(B[0, 1, 1] + a)
    assert is_zero(B[1, 0, 1] - a)


def test_bad_inputs() -> None:
    with pytest.raises(TypeError, match="q"):
        lie_bracket(sp.Matrix([1, 0]), sp.Matrix([0, 1]), ["x", "y"])
    with pytest.raises(ValueError, match="x must be a column"):
        lie_bracket(sp.Matrix([1, 0, 0]), sp.Matrix([0, 1]), [x, y])
    with pytest.raises(ValueError, match="metric must be"):
        reduced_metric(sp.eye(2), sp.Matrix([[1], [0], [0]]))
    with pytest.raises(TypeError, match="metric"):
        reduced_metric("not a matrix", sp.Matrix([[1], [0]]))
