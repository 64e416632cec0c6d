"""Shared fixtures: a private kernel cache for the test session, and small systems."""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np
import pytest
import sympy as sp

# The hand-written references of tests/references (independent of the package's derivations).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

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


def _veselova_closed_form(s: np.ndarray, p: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, float]:
    """Reduced Veselova field and energy on the hemisphere chart, U = 0 (digest seed004.md
    4.3(a) closed forms), written independently of the symbolic layer."""
    an, ak = a[-1], a[:-1]
    c = an + np.sum((ak - an) * s**2)  # (A gamma, gamma)
    b = 1 / an + np.sum((1 / ak - 1 / an) * s**2)
    s1, s2, q1 = np.sum(s * p), np.sum(s * p / ak), np.sum(p**2 / ak)
    N = q1 + b * s1**2 - 2 * s1 * s2
    sdot = (p / ak + s * (b * s1 - s2) - s1 * s / ak) / c
    dphi = -(ak - an) * s / c
    dN = 2 * (1 / ak - 1 / an) * s * s1**2 + 2 * b * s1 * p - 2 * p * s2 - 2 * s1 * p / ak
    dH = dN / (2 * c) - N * (ak - an) * s / c**2
    pdot = -dH - p * (dphi @ sdot) + dphi * (p @ sdot)
    return np.concatenate([sdot, pdot]), N / (2 * c)


@pytest.fixture(scope="session")
def veselova_closed_form():
    """``f(s, p, a) -> (rhs, energy)``: the reduced Veselova field in closed form (oracle)."""
    return _veselova_closed_form


@pytest.fixture(scope="module")
def client():
    """A Dask client on a LocalCluster of two single-threaded worker processes, one per test
    module (the modules of nhfast.distributed need dask[distributed])."""
    import logging

    from distributed import Client, LocalCluster

    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=logging.CRITICAL,
    ) as cluster, Client(cluster) as c:  # fmt: skip
        yield c
