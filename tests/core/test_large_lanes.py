"""10^6 lanes of Veselova n = 8 for t = 1 (issue 6, item 4): memory stays bounded.

Two ways through the public API: one call with only the initial and final times (memory is
the caller's arrays, ``x0`` plus ``y[lanes, 2, n]``, about 400 bytes per lane at n = 8: the
core's work buffers are per block of lanes, not per lane), and a streamed run that integrates
chunks of lanes and keeps only reduced observables. Both check the physics on every lane
(energy, ``|gamma| = 1``, ``gamma . m = 0``) and that lanes are independent of the batch
(a sample re-integrated alone gives the same bits).
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
from references.states import sphere_states

import nhfast as nh

N = 8
LANES = 1_000_000
T = [0.0, 1.0]


def _system():
    try:
        from nhfast.systems import veselova
    except ImportError:  # pragma: no cover - until the structured kernel exists
        from nhfast.systems import veselova

        return veselova(N, form="embedded")
    return veselova(N, form="structured")


def _states(lanes: int, seed: int) -> np.ndarray:
    """States on |gamma| = 1, gamma . m = 0 of the Veselova body at n = N."""
    return sphere_states(N, lanes, seed)


def _energy(x: np.ndarray, a: np.ndarray) -> np.ndarray:
    g, m = x[:, :N], x[:, N:]
    return np.sum(m * m / a, axis=1) / (2.0 * np.sum(a * g * g, axis=1))


@pytest.fixture(scope="module")
def setup():
    vf = _system()
    vf.compile(())
    return vf, 1.0 + np.arange(1, N + 1) / N


def _check_physics(x0: np.ndarray, y: np.ndarray, a: np.ndarray) -> None:
    e0 = _energy(x0, a)
    assert np.max(np.abs(_energy(y, a) - e0) / e0) < 1e-8
    assert np.max(np.abs(np.sum(y[:, :N] ** 2, axis=1) - 1.0)) < 1e-9
    assert np.max(np.abs(np.sum(y[:, :N] * y[:, N:], axis=1))) < 1e-9


@pytest.mark.slow
def test_one_call_million_lanes(setup):
    vf, a = setup
    x0 = _states(LANES, seed=11)
    tracemalloc.start()
    t0 = time.perf_counter()
    r = nh.integrate(vf, x0, T, params=a, observables=False, threads=2)
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert r.success
    assert r.y.shape == (LANES, 2, 2 * N)
    outputs = r.y.nbytes + r.status.nbytes + sum(v.nbytes for v in r.stats.values())
    # peak over the call: the output arrays (and the per-lane stats copy), nothing per step
    assert peak < 1.2 * (outputs + r.stats["steps"].nbytes * 4) + 16e6, (peak, outputs)
    _check_physics(x0, r.y[:, -1], a)
    sample = np.random.default_rng(0).choice(LANES, 50, replace=False)
    alone = nh.integrate(vf, x0[sample], T, params=a, observables=False)
    assert np.array_equal(alone.y, r.y[sample])
    print(f"\n10^6 lanes n={N} t=1: {seconds:.2f} s, peak {peak / LANES:.0f} B/lane in the call")


def test_streamed_million_lanes(setup):
    """Chunks of 10^5 lanes, reduced to the largest energy error: memory is per chunk."""
    vf, a = setup
    chunk = 100_000
    worst = 0.0
    evals = 0
    tracemalloc.start()
    for c in range(LANES // chunk):
        x0 = _states(chunk, seed=100 + c)
        r = nh.integrate(vf, x0, T, params=a, observables=False, threads=2)
        assert r.success
        y = r.y[:, -1]
        _check_physics(x0, y, a)
        e0 = _energy(x0, a)
        worst = max(worst, float(np.max(np.abs(_energy(y, a) - e0) / e0)))
        evals += int(r.stats["rhs_evals"].sum())
        del r, y, x0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # one chunk's arrays at a time: x0 (128 B/lane), y (256 B/lane), stats, temporaries
    assert peak < chunk * 1200, peak
    assert worst < 1e-8
    assert evals > LANES * 12  # every lane took at least one DOP853 step
