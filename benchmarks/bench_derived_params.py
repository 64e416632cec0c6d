"""Derived parameters: the integrator's rhs with sub-expressions of the parameters computed
once per trajectory, against the plain rhs that computes them in every evaluation (issue 12).

The unrolled Veselova body ``veselova(n, form="embedded")`` (its rhs divides by every ``a_i``) at
n = 4 and 8, a batch of 256 trajectories with their own inertia, t in [0, 10]; ``dop853`` at
tol 1e-10 and ``rk4`` with h = 0.01, one thread. Both variants come from the same compiled
library (``nh_rhs`` and ``nh_rhs_derived``) and give bit-identical trajectories (checked
here). ``extra_info``: ``n``, ``method``, ``part`` (``plain`` or ``derived``) and
``n_derived``; group ``derived-<n>-<method>``.

Run::

    NHFAST_CACHE_DIR=... pytest benchmarks/bench_derived_params.py -p no:randomly \\
        --benchmark-json=benchmarks/results/derived_params.json
"""

from __future__ import annotations

import numpy as np
import pytest

from nhfast import _core
from nhfast._abi import METHODS
from nhfast.systems import veselova

N_TRAJ = 256
T_EVAL = np.linspace(0.0, 10.0, 3)
METHOD_H = {"dop853": 0.0, "rk4": 0.01}


def _states(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(N_TRAJ, n))
    g /= np.linalg.norm(g, axis=1)[:, None]
    m = rng.normal(size=(N_TRAJ, n))
    m -= (m * g).sum(axis=1)[:, None] * g
    par = np.linspace(1.0, 2.0, n)[None, :] * (1.0 + 0.2 * rng.random((N_TRAJ, 1)))
    return np.ascontiguousarray(np.hstack([g, m])), np.ascontiguousarray(par)


@pytest.fixture(scope="module", params=[4, 8])
def body(request):
    n = request.param
    cs = veselova(n, form="embedded").compile()
    assert cs.derived is not None
    return n, cs, *_states(n)


def _run(cs, n, x0, par, method, derived):
    if derived:
        cap, ctx, der, nd = cs.integrator_rhs()
    else:
        (cap, ctx), der, nd = cs.kernels["rhs"], None, 0
    y = np.empty((N_TRAJ, T_EVAL.size, 2 * n))
    status = np.zeros(N_TRAJ, np.int32)
    stats = np.zeros((N_TRAJ, _core.NSTATS), np.int64)
    _core.integrate_batch(
        cap, ctx, 2 * n, n, 0, METHODS[method], T_EVAL, x0, par, y, status, stats,
        1e-10, 1e-10, METHOD_H[method], 0.0, 10**7, 1e-12, 50, 1, 64, derive=der, nderived=nd,
    )  # fmt: skip
    assert not status.any()
    return y


@pytest.mark.parametrize("method", list(METHOD_H))
@pytest.mark.parametrize("part", ["plain", "derived"])
def test_batch(benchmark, body, method, part):
    n, cs, x0, par = body
    benchmark.group = f"derived-{n}-{method}"
    benchmark.extra_info.update(
        n=n, method=method, part=part, n_derived=cs.derived[2], trajectories=N_TRAJ
    )
    y = benchmark.pedantic(
        _run, args=(cs, n, x0, par, method, part == "derived"), rounds=5, iterations=1
    )
    np.testing.assert_array_equal(y, _run(cs, n, x0, par, method, part != "derived"))
