"""Velocity <-> momentum maps of the constrained rigid body: inverse to each other for every
inertia and constraint (hypothesis), equal to the paper's closed forms for ``I(Om) = A Om A``
(García-Naranjo & Marrero 2020, (4.11)), consistent with the engine's vector field
(``gammadot = -Omega gamma``), and positive on the operator, not on each moment."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nhfast.systems import (
    angular_velocity,
    momentum_of_velocity,
    rigid_body_params,
    suslov_rigid_body,
    velocity_of_momentum,
)
from nhfast.systems.inertia import named_inertia
from nhfast.systems.veselova_body.embedded import embedded_momentum, embedded_velocity


def _gamma_m(n: int, k: int, rng: np.random.Generator, constraint: str):
    g = rng.normal(size=(k, n))
    m = rng.normal(size=(k, n))
    if constraint == "space_fixed":
        m -= np.sum(m * g, axis=1, keepdims=True) * g / np.sum(g * g, axis=1, keepdims=True)
    else:
        m[:, -1] = 0.0
    return g, m


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(3, 9),
    inertia=st.sampled_from(["a-omega-a", "physical", "pairwise", "callable"]),
    constraint=st.sampled_from(["space_fixed", "body_fixed"]),
    seed=st.integers(0, 2**31),
)
def test_maps_are_inverse(n: int, inertia: str, constraint: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    g, m = _gamma_m(n, 4, rng, constraint)
    if inertia == "callable":  # a user's operator: the physical one, written in NumPy
        j = 1.0 + rng.random(n)
        op, p = (lambda Om: j[:, None] * Om + Om * j[None, :]), None
    else:
        op, p = inertia, rigid_body_params(n, inertia, rng)
    v = velocity_of_momentum(g, m, p, op, constraint)
    b = g if constraint == "space_fixed" else np.eye(n)[-1]
    np.testing.assert_allclose(np.sum(v * b, axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(momentum_of_velocity(g, v, p, op, constraint), m, atol=1e-11)
    om = angular_velocity(g, m, p, op, constraint)
    np.testing.assert_allclose(om, -np.swapaxes(om, -1, -2), atol=0)


def test_closed_forms_of_the_a_omega_a_body() -> None:
    """``m = c A v - (A gamma, v) A gamma`` and ``v = P_gamma A^-1 m / c`` on ``|gamma| = 1``."""
    rng = np.random.default_rng(3)
    n = 7
    g, m = _gamma_m(n, 5, rng, "space_fixed")
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    m -= np.sum(m * g, axis=1, keepdims=True) * g
    a = rigid_body_params(n, "a-omega-a")
    v = velocity_of_momentum(g, m, a, "a-omega-a")
    np.testing.assert_allclose(v, embedded_velocity(g, m, a), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(momentum_of_velocity(g, v, a, "a-omega-a"),
                               embedded_momentum(g, v, a), atol=1e-12)  # fmt: skip


def test_suslov_flat_body_is_positive_on_the_operator() -> None:
    """``I = diag(1, 2, 3)`` in 3D is ``j = (2, 1, 0)`` for ``J Om + Om J``: one moment is 0,
    but every pair sum ``j_i + j_k`` is positive, so the operator is and the maps work."""
    j = np.array([2.0, 1.0, 0.0])
    rng = np.random.default_rng(5)
    g, m = _gamma_m(3, 4, rng, "body_fixed")
    v = velocity_of_momentum(g, m, j, "physical", "body_fixed")
    assert np.all(np.isfinite(v))
    np.testing.assert_allclose(momentum_of_velocity(g, v, j, "physical", "body_fixed"), m,
                               atol=1e-13)  # fmt: skip


@pytest.mark.parametrize("inertia", ["a-omega-a", "physical", "pairwise"])
def test_engine_field_moves_gamma_by_omega(inertia: str) -> None:
    """The Suslov field's ``gammadot`` is ``-Omega gamma`` with ``Omega`` from the maps (the
    tilted axis of ``suslov_rigid_body``)."""
    n = 5
    vf = suslov_rigid_body(n, inertia).compile()
    p = rigid_body_params(n, inertia, axis=True)
    e = p[-n:]
    rng = np.random.default_rng(6)
    g = rng.normal(size=(4, n))
    m = rng.normal(size=(4, n))
    m -= np.sum(m * e, axis=1, keepdims=True) * e
    f = vf.evaluate("rhs", np.hstack([g, m]), params=p)
    om = angular_velocity(g, m, p[:-n], inertia, "body_fixed", axis=e)
    np.testing.assert_allclose(f[:, :n], -np.einsum("kij,kj->ki", om, g), atol=1e-12)


def test_bad_inputs_name_the_argument() -> None:
    g = np.ones((2, 4))
    with pytest.raises(ValueError, match="m must have last dimension 4"):
        velocity_of_momentum(g, np.ones((2, 3)), np.ones(4))
    with pytest.raises(ValueError, match="params of inertia 'physical' at n = 4"):
        momentum_of_velocity(g, g, np.ones(3))
    with pytest.raises(ValueError, match="params is required"):
        momentum_of_velocity(g, g)
    with pytest.raises(ValueError, match="constraint must be"):
        angular_velocity(g, g, np.ones(4), constraint="sideways")
    with pytest.raises(ValueError, match="inertia must be one of"):
        angular_velocity(g, g, np.ones(4), inertia="heavy")
    with pytest.raises(ValueError, match=r"positive on so\(n\).*smallest is -0.5"):
        velocity_of_momentum(g, g, np.array([1.0, 1.0, 1.0, -1.5]), "physical")
    with pytest.raises(ValueError, match="not positive on b\\^perp"):
        velocity_of_momentum(g, g, None, lambda Om: 0.0 * Om)  # the zero operator
    assert named_inertia("physical").name == "physical"
