"""Shared fixtures: a private kernel cache for the test session, and small systems."""

from __future__ import annotations

import os
import tempfile

import pytest
import sympy as sp

# Keep the user's cache untouched; every test session compiles into its own directory.
os.environ.setdefault("NHFAST_CACHE_DIR", tempfile.mkdtemp(prefix="nhfast-test-cache-"))

import nhfast as nh  # noqa: E402


@pytest.fixture(scope="session")
def oscillator() -> nh.HamiltonianSystem:
    """H = p^2/2 + w^2 q^2/2 with parameter w."""
    q, p, w = sp.symbols("q p w")
    return nh.HamiltonianSystem([q], [p], p**2 / 2 + w**2 * q**2 / 2, params=[w], name="oscillator")


@pytest.fixture(scope="session")
def kepler() -> nh.HamiltonianSystem:
    """Planar Kepler problem H = |p|^2/2 - 1/|q| (nonlinear, separable)."""
    x, y, px, py = sp.symbols("x y p_x p_y")
    H = (px**2 + py**2) / 2 - 1 / sp.sqrt(x**2 + y**2)
    return nh.HamiltonianSystem([x, y], [px, py], H, name="kepler")


@pytest.fixture(scope="session")
def pendulum() -> nh.HamiltonianSystem:
    th, p = sp.symbols("theta p")
    return nh.HamiltonianSystem([th], [p], p**2 / 2 - sp.cos(th), name="pendulum")


@pytest.fixture(scope="session")
def nonautonomous() -> nh.VectorField:
    """y' = y cos t, exact solution y = y0 exp(sin t)."""
    y, t = sp.symbols("y t")
    return nh.VectorField(states=[y], rhs=[y * sp.cos(t)], time=t, name="growth")


@pytest.fixture(scope="session")
def sleigh() -> nh.VectorField:
    """Chaplygin sleigh (contact point offset a, mass m, inertia J about the centre of mass)."""
    x, y, th, v, om = sp.symbols("x y theta v omega")
    a, m, J = sp.symbols("a m J", positive=True)
    rhs = [v * sp.cos(th), v * sp.sin(th), om, a * om**2, -m * a * v * om / (J + m * a**2)]
    energy = (m * v**2 + (J + m * a**2) * om**2) / 2
    # Reduced equations in the body velocities (v along the blade, omega); the knife edge at
    # distance a from the centre of mass forbids sideways slip of the contact point.
    return nh.VectorField(
        states=[x, y, th, v, om],
        rhs=rhs,
        params=[a, m, J],
        observables={"energy": energy},
        name="chaplygin sleigh",
    )
