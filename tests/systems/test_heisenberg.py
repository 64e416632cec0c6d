"""Heisenberg and generalised Heisenberg systems, seed 000 Examples 6.3 and 6.6."""

from __future__ import annotations

import pytest
import sympy as sp

from nhfast.symbolic.frames import lie_bracket
from nhfast.symbolic.systems import NonholonomicSystem
from nhfast.symbolic.vakonomic import (
    nonholonomic_data,
    unconstrained_test,
    vakonomic_equations,
    vakonomic_is_nonholonomic,
    vakonomic_test,
)
from nhfast.systems.heisenberg import generalized_heisenberg, heisenberg, heisenberg_symbols


def test_bracket_is_minus_two_dz():
    """O-H1: [e1, e2] = -2 d/dz."""
    sys_ = heisenberg()
    col = lie_bracket(sys_.frame[:, 0], sys_.frame[:, 1], sys_.q)
    assert list(col) == [0, 0, -2]
    assert list(sys_.constraint_forms * sys_.frame) == [0, 0]


def test_nh_lines_unconstrained_and_vakonomic():
    """O-H2, O-H4: NH motions are straight lines with multiplier 0, unconstrained, VAK."""
    sys_ = heisenberg()
    data = nonholonomic_data(sys_)
    assert list(data.vdot) == [0, 0]
    assert list(data.multipliers) == [0]
    assert unconstrained_test(sys_, data=data).holds
    vt = vakonomic_test(sys_, data=data)
    assert vt.holds and vt.data["multiplier"] == [0]


def test_vakonomic_circles_are_not_nonholonomic():
    """O-H3 / Thm. 4.8(c): a VAK motion with constant mu != 0 is not NH (R != 0)."""
    sys_ = heisenberg()
    mu = sp.Symbol("mu", real=True)
    verdict = vakonomic_is_nonholonomic(sys_, [mu])
    assert not verdict.holds
    assert all(sp.simplify(c.subs(mu, 0)) == 0 for c in verdict.conditions["(4.12)"])
    assert vakonomic_is_nonholonomic(sys_, [0]).holds


def test_generalized_heisenberg_every_nh_trajectory_is_unconstrained():
    """O-G1 with concrete non-constant f, g, h, Phi, U (and a parameter)."""
    x, y, z = heisenberg_symbols()
    a = sp.Symbol("a", positive=True)
    sys_ = generalized_heisenberg(
        f=1 + x**2, g=x * y, h=1 + a * y**2, Phi=1 + x**2 + z**2, U=x**3 * y, params=[a]
    )
    data = nonholonomic_data(sys_)
    ut = unconstrained_test(sys_, data=data)
    assert ut.holds, ut.obstruction
    assert vakonomic_test(sys_, data=data).holds
    assert any(e != 0 for e in data.vdot)  # the NH equations are not trivial here


def test_cross_term_breaks_it():
    """O-G2 (negative control): L = 1/2 (alpha^2 + beta^2 + gamma^2) + a alpha gamma.

    Then NH trajectories are neither unconstrained nor (Prop. 6.5) vakonomic.  The raw EL
    residual along NH, E(L) = W^T lambda (E = d/dt dL/dqdot - dL/dq), is
    2 a^2 xdot ydot (-y, x, 1): for the digest's a = 1 its (-2 y xdot ydot, 2 x xdot ydot,
    2 xdot ydot).  Independently (Hamel form in the frame (e1, e2, d/dz), [e1, e2] = -2 d/dz):
    alphadot = 2 a alpha beta, betadot = -2 a alpha^2 and the d/dz component is
    d/dt(a alpha) = 2 a^2 alpha beta."""
    x, y, z = heisenberg_symbols()
    a = sp.Symbol("a", real=True)
    B = sp.Matrix([[1, 0, 0], [0, 1, 0], [-y, x, 1]])
    M = sp.Matrix([[1, 0, a], [0, 1, 0], [a, 0, 1]])
    sys_ = NonholonomicSystem(
        [x, y, z], B.T * M * B, constraints=sp.Matrix([[-y, x, 1]]), params=[a]
    )
    data = nonholonomic_data(sys_)
    xd, yd = data.v  # the frame (e1, e2): quasi-velocities (xdot, ydot)
    assert list(data.frame[:2, :]) == [1, 0, 0, 1]
    assert [sp.simplify(e) for e in data.vdot] == [2 * a * xd * yd, -2 * a * xd**2]
    residual = (data.forms.T * data.multipliers).applyfunc(sp.simplify)
    expected = 2 * a**2 * xd * yd * sp.Matrix([-y, x, 1])
    assert (residual - expected).applyfunc(sp.simplify) == sp.zeros(3, 1)
    digest = sp.Matrix([-2 * y * xd * yd, 2 * x * xd * yd, 2 * xd * yd])
    assert residual.subs(a, 1) == digest
    for a_val in (sp.Rational(1, 2), 1):
        sub = {a: a_val}
        assert not unconstrained_test(sys_, subs=sub, data=data).holds
        assert not vakonomic_test(sys_, subs=sub, data=data).holds
    assert unconstrained_test(sys_, subs={a: 0}, data=data).holds  # the control


def test_minus_u_beta_squared_both_readings():
    """Ex. 6.6 prints L = f alpha^2 + g alpha beta + h beta^2 + Phi gamma^2 - U(x, y) beta^2
    (probably a typo for a potential - U).  Both readings give Q1 yes with every NH trajectory
    unconstrained (O-G1); the two readings are different systems (different NH equations)."""
    x, y, z = heisenberg_symbols()
    f, g, h, Phi = 1 + x**2, x * y / 3, 2 + y**2, 1 + x**2 + z**2
    U = -(x**2) * y**2 - x**2  # U <= 0, so h - U > 0 in the kinetic reading
    readings = {
        "potential": generalized_heisenberg(f=f, g=g, h=h, Phi=Phi, U=U),  # ... - U
        "kinetic": generalized_heisenberg(f=f, g=g, h=h - U, Phi=Phi),  # ... + (h - U) beta^2
    }
    vdot = {}
    for name, sys_ in readings.items():
        data = nonholonomic_data(sys_)
        ut = unconstrained_test(sys_, data=data)
        assert ut.holds, (name, ut.obstruction)
        assert vakonomic_test(sys_, data=data).holds, name
        vdot[name] = data.vdot
    pairs = zip(vdot["potential"], vdot["kinetic"], strict=True)
    assert any(sp.simplify(p - q) != 0 for p, q in pairs)


def test_multiplier_equation_is_fdot_zero_not_f_zero():
    """Ex. 6.3 prints the multiplier equation (5.10) as "f = 0"; it is fdot = 0.  In the package's
    vakonomic equations (L + mu (zdot - y xdot + x ydot), seed 000's lambda = f omega up to the
    sign convention) mudot = 0 identically, mu = const != 0 is admissible and gives the circles
    xddot = 2 mu ydot, yddot = -2 mu xdot (O-H3); only (4.12) along an NH motion forces f = 0."""
    sys_ = heisenberg()
    eq = vakonomic_equations(sys_)
    x, y, z = sys_.q
    xd, yd, zd, mu = eq.states[3:]
    on_d = {zd: y * xd - x * yd}
    acc = [sp.simplify(sp.sympify(e).subs(on_d)) for e in eq.rhs[3:]]
    assert acc[0] == 2 * mu * yd and acc[1] == -2 * mu * xd
    assert acc[3] == 0  # fdot = 0
    assert sp.simplify(acc[2] - (y * acc[0] - x * acc[1])) == 0  # zddot from the constraint
    # "f = 0" read as an equation of motion would exclude mu != 0; the VAK field is regular there
    assert any(sp.diff(e, mu) != 0 for e in acc[:2])
    assert not vakonomic_is_nonholonomic(sys_, [sp.Rational(7, 10)]).holds
    assert vakonomic_is_nonholonomic(sys_, [0]).holds


def test_bad_coefficients():
    x, y, z = heisenberg_symbols()
    with pytest.raises(ValueError, match="f may depend only on x, y"):
        generalized_heisenberg(f=1 + z**2)
    with pytest.raises(ValueError, match="positive definite|singular"):
        generalized_heisenberg(Phi=-1)
    with pytest.raises(TypeError, match="g must be"):
        generalized_heisenberg(g="x")
