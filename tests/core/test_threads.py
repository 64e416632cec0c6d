"""Threads and lane independence: results do not depend on how lanes are scheduled."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nhfast as nh


@pytest.mark.parametrize("method", ["dop853", "gauss4", "rk4"])
def test_threads_give_same_bits(sleigh, method):
    rng = np.random.default_rng(3)
    x0 = np.column_stack([rng.normal(size=(1000, 3)), rng.normal(size=(1000, 2))])
    par = np.array([0.5, 1.0, 1.2])
    t = np.linspace(0.0, 5.0, 6)
    r1 = nh.integrate(sleigh, x0, t, method=method, params=par, h=0.05, threads=1)
    r2 = nh.integrate(sleigh, x0, t, method=method, params=par, h=0.05, threads=2)
    assert np.array_equal(r1.y, r2.y)
    for k in r1.stats:
        assert np.array_equal(r1.stats[k], r2.stats[k])


@settings(max_examples=15, deadline=None)
@given(
    lane=st.integers(0, 199),
    block=st.sampled_from([1, 7, 64, 256]),
    method=st.sampled_from(["dopri5", "dop853", "midpoint", "leapfrog"]),
)
def test_lane_result_independent_of_batch(kepler, lane, block, method):
    """A trajectory computed alone equals the same trajectory inside any batch, bit for bit."""
    rng = np.random.default_rng(4)
    x0 = np.column_stack(
        [
            1 + 0.1 * rng.normal(size=200),
            0.1 * rng.normal(size=200),
            0.1 * rng.normal(size=200),
            1 + 0.1 * rng.normal(size=200),
        ]
    )
    t = np.linspace(0.0, 3.0, 4)
    batch = nh.integrate(kepler, x0, t, method=method, h=0.01, block=block)
    alone = nh.integrate(kepler, x0[lane], t, method=method, h=0.01)
    assert np.array_equal(batch.y[lane], alone.y[0])
