"""Heisenberg and generalised Heisenberg systems, seed 000 Examples 6.3 and 6.6."""

from __future__ import annotations

import pytest
import sympy as sp

from nhfast.symbolic.frames import lie_bracket
from nhfast.symbolic.systems import NonholonomicSystem
from nhfast.symbolic.vakonomic import (
    nonholonomic_data,
    unconstrained_test,
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

    Then NH trajectories are neither unconstrained nor (Prop. 6.5) vakonomic."""
    x, y, z = heisenberg_symbols()
    a = sp.Rational(1, 2)
    B = sp.Matrix([[1, 0, 0], [0, 1, 0], [-y, x, 1]])
    M = sp.Matrix([[1, 0, a], [0, 1, 0], [a, 0, 1]])
    sys_ = NonholonomicSystem([x, y, z], B.T * M * B, constraints=sp.Matrix([[-y, x, 1]]))
    data = nonholonomic_data(sys_)
    assert not unconstrained_test(sys_, data=data).holds
    assert not vakonomic_test(sys_, data=data).holds


def test_bad_coefficients():
    x, y, z = heisenberg_symbols()
    with pytest.raises(ValueError, match="f may depend only on x, y"):
        generalized_heisenberg(f=1 + z**2)
    with pytest.raises(ValueError, match="positive definite|singular"):
        generalized_heisenberg(Phi=-1)
    with pytest.raises(TypeError, match="g must be"):
        generalized_heisenberg(g="x")
