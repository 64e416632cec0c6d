"""Charts of SO(3): the kinematics reproduce ``Rdot = R hat(omega)`` (SciPy DOP853 on the
matrix equation as the independent computation), ``R`` is a rotation, the Cayley chart's domain
stops a body before its coordinates blow up, and the quaternion chart carries the attitude of a
:class:`~nhfast.symbolic.LieGroupSystem` run by nhfast."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import solve_ivp

import nhfast as nh
from nhfast.symbolic import LieGroupSystem, so3_chart, so3_structure_constants


def _hat(w: np.ndarray) -> np.ndarray:
    return np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])


@pytest.mark.parametrize("kind", ["quaternion", "cayley"])
def test_kinematics_follow_the_rotation(kind: str) -> None:
    chart = so3_chart(kind)
    w = sp.symbols("w1:4")
    f = sp.lambdify([chart.coordinates, w], chart.kinematics(w))
    rot = sp.lambdify([chart.coordinates], chart.rotation)
    rng = np.random.default_rng(4)
    x0 = 0.4 * rng.normal(size=len(chart.coordinates))
    if kind == "quaternion":
        x0 /= np.linalg.norm(x0)

    def omega(t: float) -> np.ndarray:
        return np.array([np.sin(t), 0.5, np.cos(2 * t)])

    k = len(x0)

    def rhs(t: float, y: np.ndarray) -> np.ndarray:
        r = y[k:].reshape(3, 3)
        return np.concatenate([f(y[:k], omega(t)), (r @ _hat(omega(t))).ravel()])

    r0 = np.array(rot(x0), dtype=float)
    np.testing.assert_allclose(r0 @ r0.T, np.eye(3), atol=1e-14)
    assert np.linalg.det(r0) == pytest.approx(1.0, abs=1e-14)
    sol = solve_ivp(rhs, [0, 1.0], np.concatenate([x0, r0.ravel()]), method="DOP853",
                    rtol=1e-12, atol=1e-12)  # fmt: skip
    end = np.array(rot(sol.y[:k, -1]), dtype=float)
    np.testing.assert_allclose(end, sol.y[k:, -1].reshape(3, 3), atol=1e-11)


def test_cayley_domain_stops_before_a_half_turn() -> None:
    """A steady spin about e3 reaches the angle ``max_angle`` at ``t = max_angle / |omega|``:
    the field stops there, leaving its domain, with the chart's condition named."""
    chart = so3_chart("cayley", max_angle=sp.pi / 2)
    vf = nh.VectorField(chart.coordinates, chart.kinematics([0, 0, 1]), domain=chart.domain,
                        name="spin")  # fmt: skip
    res = nh.integrate(vf, [0.0, 0.0, 0.0], [0.0, 3.0], keep_failed=True, method="taylor")
    assert res.status[0] != 0
    assert res.t_reached[0] == pytest.approx(np.pi / 2, rel=1e-8)
    with pytest.raises(nh.IntegrationError, match="Cayley chart"):
        nh.integrate(vf, [0.0, 0.0, 0.0], [0.0, 3.0], method="taylor")


def test_quaternion_attitude_of_the_veselova_body() -> None:
    """Veselova's body on so(3) (``omega . gamma = 0``, ``gammadot = gamma x omega``) with its
    attitude carried as a quaternion, run by nhfast: the advected ``gamma`` stays the body's
    view ``R^T e3`` of the vertical, to the accuracy of the run."""
    chart = so3_chart("quaternion")
    g = list(sp.symbols("gamma1:4", real=True))

    def advected_rhs(w: list) -> list:
        return [*sp.Matrix(g).cross(sp.Matrix(w)), *chart.kinematics(w)]

    system = LieGroupSystem(
        so3_structure_constants(), sp.diag(1, 2, 3), sp.Matrix([g]),
        advected=[*g, *chart.coordinates], advected_rhs=advected_rhs, name="veselova_attitude",
    )  # fmt: skip
    vf = system.as_vector_field()
    rot = sp.lambdify([chart.coordinates], chart.rotation)
    q0 = np.array([0.5, 0.5, -0.5, 0.5])
    gamma0 = np.array(rot(q0), dtype=float).T @ np.array([0.0, 0.0, 1.0])
    w0 = np.cross(gamma0, [0.3, -1.0, 0.7])  # omega . gamma = 0
    res = nh.integrate(vf, np.concatenate([w0, gamma0, q0]), np.linspace(0, 10, 6),
                       rtol=1e-12, atol=1e-12)  # fmt: skip
    for y in res.y[0]:
        r = np.array(rot(y[6:]), dtype=float)
        np.testing.assert_allclose(y[3:6], r.T @ [0.0, 0.0, 1.0], atol=1e-10)
    assert np.abs(res.y[0, -1, 3:6] - gamma0).max() > 0.1  # the body turned
