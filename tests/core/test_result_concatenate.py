"""``IntegrationResult.concatenate``: chunks of a batch joined give the batch's own run.

A trajectory's arithmetic does not depend on the batch it is in, so the runs of chunks,
concatenated, must equal one run of every trajectory bit for bit: states, status, stats,
observables, ``t_reached`` and event records.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
from nhfast import IntegrationResult


def oscillator() -> nh.VectorField:
    x, v, w = sp.symbols("x v w")
    return nh.VectorField(
        [x, v], [v, -(w**2) * x], params=[w], observables={"energy": (v**2 + w**2 * x**2) / 2}
    )


def assert_same(a: IntegrationResult, b: IntegrationResult) -> None:
    np.testing.assert_array_equal(a.t, b.t)
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.status, b.status)
    assert a.method == b.method
    assert set(a.stats) == set(b.stats)
    for k in a.stats:
        np.testing.assert_array_equal(a.stats[k], b.stats[k])
    assert set(a.observables) == set(b.observables)
    for k in a.observables:
        np.testing.assert_array_equal(a.observables[k], b.observables[k])
    np.testing.assert_array_equal(a.t_reached, b.t_reached)


@pytest.mark.parametrize("method", ["dop853", "taylor", "rk4"])
def test_chunks_concatenated_are_the_whole_run(method: str) -> None:
    rng = np.random.default_rng(3)
    x0 = rng.normal(size=(23, 2))
    w = rng.uniform(0.5, 2.0, size=(23, 1))
    t = np.linspace(0.0, 3.0, 7)
    kw = dict(method=method, h=0.01 if method == "rk4" else None)
    whole = nh.integrate(oscillator(), x0, t, params=w, **kw)
    cuts = [0, 5, 6, 17, 23]
    parts = [
        nh.integrate(oscillator(), x0[a:b], t, params=w[a:b], **kw)
        for a, b in zip(cuts, cuts[1:], strict=False)
    ]
    assert_same(IntegrationResult.concatenate(parts), whole)


def test_event_records_are_joined_and_padded() -> None:
    """Parts with records of another width: the joined record is the widest, NaN-padded."""
    x = sp.Symbol("x")
    vf = oscillator()
    x0 = np.array([[1.0, 0.0], [0.5, 0.2], [0.0, 1.0]])
    w = np.array([[1.0], [2.0], [3.0]])
    t = [0.0, 10.0]
    whole = nh.integrate(vf, x0, t, params=w, dense=True, events=[(x, 0, False)], max_events=40)
    a = nh.integrate(vf, x0[:1], t, params=w[:1], dense=True, events=[(x, 0, False)],
                     max_events=40)  # fmt: skip
    b = nh.integrate(vf, x0[1:], t, params=w[1:], dense=True, events=[(x, 0, False)],
                     max_events=40)  # fmt: skip
    joined = IntegrationResult.concatenate([a, b])
    assert_same(joined, whole)
    np.testing.assert_array_equal(joined.events.count, whole.events.count)
    np.testing.assert_array_equal(joined.events.t, whole.events.t)
    np.testing.assert_array_equal(joined.events.which, whole.events.which)
    np.testing.assert_array_equal(joined.events.y, whole.events.y)
    narrow = nh.integrate(vf, x0[1:], t, params=w[1:], dense=True, events=[(x, 0, False)],
                          max_events=5)  # fmt: skip
    mixed = IntegrationResult.concatenate([a, narrow])
    assert mixed.events.t.shape == (3, 40)
    assert np.all(np.isnan(mixed.events.t[1:, 5:])) and np.all(mixed.events.which[1:, 5:] == -1)
    np.testing.assert_array_equal(mixed.events.t[1:, :5], narrow.events.t)


def test_parts_must_match() -> None:
    vf = oscillator()
    a = nh.integrate(vf, [1.0, 0.0], [0.0, 1.0], params=[1.0])
    with pytest.raises(ValueError, match="parts: at least one"):
        IntegrationResult.concatenate([])
    b = nh.integrate(vf, [1.0, 0.0], [0.0, 2.0], params=[1.0])
    with pytest.raises(ValueError, match=r"parts\[1\]: another method or other output times"):
        IntegrationResult.concatenate([a, b])
    c = nh.integrate(vf, [1.0, 0.0], [0.0, 1.0], params=[1.0], method="taylor")
    with pytest.raises(ValueError, match=r"parts\[1\]"):
        IntegrationResult.concatenate([a, c])
    assert IntegrationResult.concatenate([a]) is a


def test_assemble_takes_parts_in_any_order() -> None:
    """Parts placed at their first rows, arriving out of order, give the batch's own run; parts
    that overlap or leave rows uncovered are refused."""
    vf = oscillator()
    x0 = np.array([[1.0, 0.0], [0.5, 0.2], [0.0, 1.0], [0.3, -0.4]])
    w = np.array([[1.0], [2.0], [3.0], [4.0]])
    t = np.linspace(0.0, 2.0, 5)
    whole = nh.integrate(vf, x0, t, params=w)
    runs = {s: nh.integrate(vf, x0[s : s + 2], t, params=w[s : s + 2]) for s in (0, 2)}
    assert_same(IntegrationResult.assemble([(2, runs[2]), (0, runs[0])], 4), whole)
    with pytest.raises(ValueError, match="overlaps another"):
        IntegrationResult.assemble([(0, runs[0]), (1, runs[2])], 4)
    with pytest.raises(ValueError, match="must cover the 4 trajectories, got 2"):
        IntegrationResult.assemble([(0, runs[0])], 4)
    with pytest.raises(ValueError, match="outside 0:3"):
        IntegrationResult.assemble([(0, runs[0]), (2, runs[2])], 3)
