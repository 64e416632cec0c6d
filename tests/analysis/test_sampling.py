"""Initial states: boxes, energy shells, constraint manifolds, validation."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from nhfast.analysis.sampling import (
    as_vector_field,
    check_states,
    constraint_functions,
    project_to_constraints,
    sample_box,
    sample_energy_shell,
)
from nhfast.symbolic.equations import chaplygin_equations
from nhfast.systems import nonholonomic_particle, suslov, veselova
from nhfast.vectorfield import VectorField

SUSLOV_I = [2.0, 3.0, 4.0, 0.3, -0.2]


@pytest.fixture(scope="module")
def chart3() -> VectorField:
    return as_vector_field(veselova(3))


@pytest.fixture(scope="module")
def suslov_vf() -> VectorField:
    return as_vector_field(suslov())


def test_conversions_give_the_same_field(chart3):
    eq = chaplygin_equations(veselova(3), simplify=False)
    vf2 = as_vector_field(eq)
    assert [str(s) for s in vf2.states] == [str(s) for s in chart3.states]
    x = np.array([[0.1, -0.2, 0.3, 0.7]])
    a = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(
        vf2.evaluate("rhs", x, params=a), chart3.evaluate("rhs", x, params=a), rtol=1e-13
    )
    with pytest.raises(TypeError, match="system must be"):
        as_vector_field(3.0)


def test_box_is_inside_the_box_and_the_domain(chart3):
    lo, hi = [-0.9, -0.9, -1, -1], [0.9, 0.9, 1, 1]
    x = sample_box(chart3, 200, lo, hi, seed=4, params=[1, 2, 3])
    assert x.shape == (200, 4)
    assert np.all(x >= lo) and np.all(x <= hi)
    assert np.all(1 - x[:, 0] ** 2 - x[:, 1] ** 2 > 0)  # the hemisphere chart
    # reproducible by seed, different for another seed
    np.testing.assert_array_equal(x, sample_box(chart3, 200, lo, hi, seed=4, params=[1, 2, 3]))
    assert not np.allclose(x, sample_box(chart3, 200, lo, hi, seed=5, params=[1, 2, 3]))


def test_box_outside_domain_raises(chart3):
    with pytest.raises(ValueError, match="low/high"):
        sample_box(chart3, 5, [2, 2, 0, 0], [3, 3, 1, 1], params=[1, 2, 3], max_rounds=3)
    with pytest.raises(ValueError, match="low/high"):
        sample_box(chart3, 5, [1, 0, 0, 0], [0, 1, 1, 1])
    with pytest.raises(ValueError, match="n must be"):
        sample_box(chart3, 0, -0.1, 0.1)


def test_constraint_projection_embedded_sphere():
    vf = veselova(4, form="embedded")
    cons = constraint_functions(vf)
    assert set(cons) == {"gamma_norm", "momentum_constraint"}
    x = sample_box(vf, 50, -1, 1, seed=2)
    g, m = x[:, :4], x[:, 4:]
    np.testing.assert_allclose(np.sum(g**2, axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.sum(g * m, axis=1), 0.0, atol=1e-12)
    check_states(vf, x, [1.0, 2.0, 3.0, 4.0])  # passes


def test_suslov_constraint_is_linear_in_velocities(suslov_vf):
    x = sample_box(suslov_vf, 20, -1, 1, seed=1, params=SUSLOV_I)
    np.testing.assert_allclose(x[:, 2], 0.0, atol=1e-15)  # Omega_3 = 0
    x2 = x.copy()
    x2[3, 2] = 0.01
    with pytest.raises(ValueError, match="samples: 1 state.*off the constraint manifold"):
        check_states(suslov_vf, x2, SUSLOV_I)
    np.testing.assert_allclose(project_to_constraints(suslov_vf, x2, SUSLOV_I), x, atol=1e-15)


def test_energy_shell_hits_the_level():
    y = sp.Symbol("y", real=True)
    vf = as_vector_field(nonholonomic_particle(a=sp.Rational(1, 3), potential=y**2 / 2))
    x = sample_energy_shell(vf, 64, 1.5, -1, 1, seed=7)
    e = vf.compile(("observables",)).evaluate("observables", x)[:, 0]
    np.testing.assert_allclose(e, 1.5, rtol=1e-13)
    with pytest.raises(ValueError, match="energy: only 0"):
        sample_energy_shell(vf, 4, -1.0, -1, 1)


def test_energy_shell_on_constraint_manifold():
    vf = veselova(3, form="embedded", potential=lambda g: g[0])
    a = [1.0, 2.0, 3.0]
    x = sample_energy_shell(vf, 32, 2.0, -1, 1, seed=3, params=a)
    obs = vf.compile(("observables",)).evaluate("observables", x, params=a)
    names = list(vf.observables)
    np.testing.assert_allclose(obs[:, names.index("energy")], 2.0, rtol=1e-12)
    np.testing.assert_allclose(obs[:, names.index("momentum_constraint")], 0.0, atol=1e-12)


def test_check_states_bad_input(chart3):
    a = [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match=r"samples must have shape \(n_samples, 4\)"):
        check_states(chart3, np.zeros((3, 5)), a)
    with pytest.raises(ValueError, match="samples contains NaN"):
        check_states(chart3, [[0.1, 0.1, np.nan, 0.0]], a)
    with pytest.raises(ValueError, match="samples: 1 state.*outside the domain"):
        check_states(chart3, [[0.1, 0.1, 0, 0], [0.9, 0.9, 0, 0]], a)
    with pytest.raises(ValueError, match="params is required"):
        check_states(chart3, [[0.1, 0.1, 0, 0]])
    with pytest.raises(ValueError, match=r"params must have shape \(3,\)"):
        check_states(chart3, [[0.1, 0.1, 0, 0]], [1.0, 2.0])
    with pytest.raises(TypeError, match="samples must be an array of real numbers"):
        check_states(chart3, [["a", 0, 0, 0]], a)
