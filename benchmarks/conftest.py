"""Benchmark fixtures: the systems measured and a private kernel cache."""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np
import pytest
import sympy as sp

os.environ.setdefault("NHFAST_CACHE_DIR", tempfile.mkdtemp(prefix="nhfast-bench-cache-"))
# the anchors of bench_large_n.py live next to this file (pytest runs with --import-mode=importlib)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import nhfast as nh  # noqa: E402


def henon_heiles() -> nh.HamiltonianSystem:
    """4 states: H = (px^2 + py^2 + x^2 + y^2)/2 + x^2 y - y^3/3."""
    x, y, px, py = sp.symbols("x y p_x p_y")
    H = (px**2 + py**2 + x**2 + y**2) / 2 + x**2 * y - y**3 / 3
    return nh.HamiltonianSystem([x, y], [px, py], H, name="henon-heiles")


def fpu_chain(k: int = 10) -> nh.HamiltonianSystem:
    """2k states: Fermi-Pasta-Ulam-Tsingou beta chain with fixed ends, parameter beta."""
    q = sp.symbols(f"q0:{k}")
    p = sp.symbols(f"p0:{k}")
    beta = sp.Symbol("beta")
    ext = [0, *q, 0]
    V = sum(
        (ext[i + 1] - ext[i]) ** 2 / 2 + beta * (ext[i + 1] - ext[i]) ** 4 / 4 for i in range(k + 1)
    )
    H = sum(pi**2 for pi in p) / 2 + V
    return nh.HamiltonianSystem(q, p, H, params=[beta], name=f"fpu-{2 * k}")


SYSTEMS = {"n4": henon_heiles, "n20": fpu_chain}


@pytest.fixture(scope="session", params=sorted(SYSTEMS))
def system(request):
    vf = SYSTEMS[request.param]()
    vf.compile(("observables",))
    par = np.array([1.0]) if vf.n_params else None
    return request.param, vf, par
