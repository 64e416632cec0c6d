"""The common call's fast path and lazily computed observables (issue 12, item 4).

The fast path (``nhfast._fastpath.CallPlan``) must give the arrays the full checks give and
never accept what they refuse; observables computed on first access must equal those of an
independent evaluation of the same kernel family on the result's states.
"""

from __future__ import annotations

import copy
import pickle
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import nhfast as nh
from nhfast._abi import LANE
from nhfast._fastpath import call_plan


@pytest.fixture(scope="module")
def pendulum():
    q, p = sp.symbols("q p")
    g = sp.Symbol("g", positive=True)
    return nh.VectorField(
        [q, p], [p, -g * sp.sin(q)], params=[g],
        observables={"energy": p**2 / 2 - g * sp.cos(q), "q2": q**2},
        domain={"|q| < 3": 9 - q**2}, name="pendulum",
    )  # fmt: skip


def test_fast_and_full_paths_give_the_same_result(pendulum):
    x0 = np.array([0.5, 0.1])
    fast = nh.integrate(pendulum, x0, [0.0, 2.0], params=np.array([9.81]))
    full = nh.integrate(pendulum, [0.5, 0.1], (0.0, 2.0), params=[9.81])  # lists: full checks
    assert call_plan(pendulum).inputs(x0, [0.0, 2.0], np.array([9.81])) is not None
    assert call_plan(pendulum).inputs([0.5, 0.1], (0.0, 2.0), [9.81]) is None
    np.testing.assert_array_equal(fast.y, full.y)
    np.testing.assert_array_equal(fast.observables["energy"], full.observables["energy"])


@settings(max_examples=60, deadline=None)
@given(
    q=st.sampled_from([0.0, 2.9, 3.0, -3.5, np.nan, np.inf, 1e308]),
    g=st.sampled_from([9.81, 0.0, -1.0, np.nan, np.inf, 1e-300]),
    rows=st.sampled_from([1, 3]),
)
def test_fast_path_never_accepts_what_the_checks_refuse(pendulum, q, g, rows):
    x = np.tile([q, 0.2], (rows, 1))
    par = np.array([g])
    plan = call_plan(pendulum)
    try:
        pendulum.check_inputs(x, par.reshape(1, -1), "x0")
        ok = bool(np.all(np.isfinite(x))) and bool(np.isfinite(g))
    except ValueError:
        ok = False
    got = plan.inputs(x if rows > 1 else x[0], [0.0, 1.0], par)
    if not ok:
        assert got is None
        with pytest.raises((ValueError, TypeError)):
            nh.integrate(pendulum, x, [0.0, 1.0], params=par)
    elif got is not None:
        np.testing.assert_array_equal(got[0], x)


def test_observables_on_first_access_equal_an_independent_evaluation(pendulum):
    x0 = np.array([[0.5, 0.1], [1.0, -0.3], [2.0, 0.0]])
    res = nh.integrate(pendulum, x0, np.linspace(0, 3, 7), params=np.array([9.81]))
    assert "observables" not in vars(res)  # not computed by the call
    want = pendulum.evaluate("observables", res.y, params=[9.81])
    got = res.observables
    np.testing.assert_allclose(got["energy"], want[..., 0], rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(got["q2"], want[..., 1], rtol=1e-15, atol=1e-15)
    assert res.observables is got  # computed once


def test_results_pickle_and_copy_with_their_observables(pendulum):
    res = nh.integrate(pendulum, np.array([0.5, 0.1]), [0.0, 1.0], params=np.array([9.81]))
    back = pickle.loads(pickle.dumps(res))
    np.testing.assert_array_equal(back.observables["energy"], res.observables["energy"])
    res2 = nh.integrate(pendulum, np.array([0.5, 0.1]), [0.0, 1.0], params=np.array([9.81]))
    dup = copy.deepcopy(res2)
    np.testing.assert_array_equal(dup.observables["q2"], res2.observables["q2"])
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        res2.nothing  # noqa: B018


def test_stats_are_made_on_first_access_and_survive_pickle_and_copy(pendulum):
    """``stats`` is the core's array, made a dict of per-trajectory arrays on first access;
    the same values in a pickled or copied result, whether read before or not."""
    x0 = np.array([[0.5, 0.1], [1.0, -0.3], [2.0, 0.0]])
    res = nh.integrate(pendulum, x0, [0.0, 2.0], params=np.array([9.81]), method="taylor")
    assert "stats" not in vars(res)
    back = pickle.loads(pickle.dumps(res))  # before the first access
    dup = copy.copy(res)
    stats = res.stats
    assert list(stats) == ["steps", "rhs_evals", "rejected", "iterations"]
    assert all(v.shape == (3,) and v.dtype == np.int64 for v in stats.values())
    assert np.all(stats["steps"] > 0) and res.stats is stats  # made once
    for other in (back, dup, copy.deepcopy(res)):
        assert list(other.stats) == list(stats)
        for k in stats:
            np.testing.assert_array_equal(other.stats[k], stats[k])
    assert "stats=" in repr(res)


def test_deferred_attributes_read_from_threads_at_once(pendulum):
    """Threads that read a deferred attribute while it is being built all get it (the same
    object), none an error: the builder here sleeps, so every thread finds it unbuilt."""
    res = nh.integrate(pendulum, np.array([[0.5, 0.1], [1.0, -0.3]]), [0.0, 1.0],
                       params=np.array([9.81]))  # fmt: skip
    calls = []

    def slow(r):
        calls.append(1)
        time.sleep(0.05)
        return {"energy": r.y[..., 0] * 0 + len(calls)}

    res.defer_observables(slow)
    start = threading.Barrier(4)

    def read(_):
        start.wait()
        return res.observables, res.stats

    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(read, range(4)))
    assert all(g[0] is got[0][0] and g[1] is got[0][1] for g in got)
    assert list(got[0][1]) == ["steps", "rhs_evals", "rejected", "iterations"]


def test_no_observables_wanted(pendulum):
    res = nh.integrate(
        pendulum, np.array([0.5, 0.1]), [0.0, 1.0], params=np.array([9.81]), observables=False
    )
    assert res.observables == {}


def test_one_output_time_for_several_trajectories(pendulum):
    """t_eval of one time: the rows' times are contiguous (a broadcast view is not)."""
    x0 = np.array([[0.5, 0.1], [1.0, -0.3]])
    for method, kw in [("dop853", {}), ("rk4", {"h": 0.1})]:
        res = nh.integrate(pendulum, x0, [0.0], params=np.array([9.81]), method=method, **kw)
        assert res.success and res.y.shape == (2, 1, 2)
        np.testing.assert_array_equal(res.y[:, 0], x0)
        np.testing.assert_allclose(res.observables["q2"][:, 0], x0[:, 0] ** 2, rtol=1e-15)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=6),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=0, max_size=4),
    st.booleans(),
)
def test_plain_inputs_is_the_finite_and_positive_test(xs, ps, positive):
    from nhfast import _core

    x = np.array([xs])
    par = np.array([ps]).reshape(1, len(ps))
    want = bool(np.all(np.isfinite(x)) and np.all(np.isfinite(par)))
    if positive:
        want = want and bool(np.all(par > 0))
    assert _core.plain_inputs(x, par, positive) is want


def test_domain_rows_with_one_time_for_every_row(pendulum):
    """``all_positive_rows`` with one time for all rows, as the fast path calls it."""
    from nhfast import _core

    plan = call_plan(pendulum)
    cap, ctx = plan.domain_kernel()
    rows = np.array([[0.5, 0.0], [2.9, 1.0], [-2.0, 3.0]])
    par = np.array([9.81])
    assert _core.all_positive_rows(cap, ctx, 1, np.array([0.0]), rows, par)
    assert not _core.all_positive_rows(cap, ctx, 1, np.array([0.0]), rows * 1.1, par)
    with pytest.raises(ValueError, match="t does not match"):
        _core.all_positive_rows(cap, ctx, 1, np.zeros(2), rows, par)
    # a trajectory's output rows outside the domain: rows_inside says so, the call marks it
    y = rows[None] * 1.1
    assert not plan.rows_inside(np.zeros(3), y, par[None])
    res = nh.integrate(pendulum, [2.9, 3.0], [0.0, 1.0], params=par, method="rk4", h=0.01,
                       keep_failed=True)  # fmt: skip
    assert res.status[0] == LANE["left_domain"]
