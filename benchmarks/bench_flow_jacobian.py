"""Flow-map Jacobians of a structured field: accuracy and time per way of laying out lanes.

System: the Veselova body on SO(8) with the physical inertia (structured program, 16 states on
``T*S^7``); its invariant density ``rho = (det K)^(-1/2)`` makes
``log rho(x_t) + log det DPhi_t|_T - log rho(x_0)`` vanish exactly, so its size is the error
of the flow-map determinant.  Layouts of :func:`nhfast.analysis.flow_jacobian`: the default
(one tangent column per lane, all lanes of a trajectory stepping with the base) and all
columns in one lane (``columns = n_state``).

``pytest benchmarks/bench_flow_jacobian.py --benchmark-disable`` runs it in seconds.
"""

from __future__ import annotations

import numpy as np
import pytest

from nhfast.analysis import flow_jacobian
from nhfast.analysis.measure import LogTerm, manifold_log_det
from nhfast.systems import veselova
from nhfast.systems.rigid_bodies import rigid_body_params

N = 8
T = 20.0


def _states(k: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    g = rng.normal(size=(k, N))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    m = rng.normal(size=(k, N))
    m -= g * np.sum(g * m, axis=1, keepdims=True)
    return np.hstack([g, m])


@pytest.mark.parametrize("columns", [None, 2 * N], ids=["lanes", "one-lane"])
def test_flow_jacobian_veselova8(benchmark, columns):
    vf = veselova(N, form="structured", inertia="physical")
    par = rigid_body_params(N, "physical")
    x0 = _states(4)
    pars = np.tile(par, (4, 1))
    kw = dict(rtol=1e-13, atol=1e-15, columns=columns)
    flow_jacobian(vf, x0[:1], [0.0, 0.1], par, **kw)  # build and compile outside the timing
    x, M = benchmark(lambda: flow_jacobian(vf, x0, [0.0, T], par, **kw))
    ld, _ = manifold_log_det(vf, x0, x[:, -1], M[:, -1], pars)
    logr = (-0.5 * LogTerm("log_det_metric")).values(
        vf, np.vstack([x0, x[:, -1]]), np.vstack([pars, pars])
    )
    defect = float(np.abs(ld + logr[4:] - logr[:4]).max())
    benchmark.extra_info.update({"n": N, "t": T, "max |weighted log det|": defect})
    assert defect < 1e-10
