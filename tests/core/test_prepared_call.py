"""A call like the last checked one runs in one compiled pass (``_core.PreparedCall``).

``nhfast.integrate`` keeps, per system, the :class:`nhfast._core.PreparedCall` of its last
checked call; a later call with the same options and inputs of the common kinds runs the core
without the Python front end. These tests hold it to the full path: the same arrays bit for
bit (states, status, statistics, times reached, observables), the same errors and warnings for
every input it must refuse, and the full path (never a stale answer) for every option that
differs from the prepared one, down to its type (``threads=True`` is not ``threads=1``).
"""

from __future__ import annotations

import importlib
import threading
import warnings

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import nhfast as nh
from nhfast import _background
from nhfast._abi import LANE
from nhfast._fastpath import call_plan
from nhfast.errors import IntegrationError, IntegrationWarning

#: The module (the package's attribute ``integrate`` is its function).
nhi = importlib.import_module("nhfast._call")


def _pendulum(name: str = "pendulum") -> nh.VectorField:
    q, p = sp.symbols("q p")
    g = sp.Symbol("g", positive=True)
    return nh.VectorField(
        [q, p], [p, -g * sp.sin(q)], params=[g],
        observables={"energy": p**2 / 2 - g * sp.cos(q)},
        domain={"|q| < 3": 9 - q**2}, name=name,
    )  # fmt: skip


def _oscillator() -> nh.VectorField:
    """x'' = -k x with a parameter of no sign (k may be negative: x grows)."""
    x, v, k = sp.symbols("x v k")
    return nh.VectorField([x, v], [v, -k * x], params=[k], name="oscillator")


def _henon_heiles() -> nh.VectorField:
    x, y, px, py = sp.symbols("x y px py")
    return nh.VectorField(
        [x, y, px, py], [px, py, -x - 2 * x * y, -y - x**2 + y**2],
        observables={"energy": (px**2 + py**2 + x**2 + y**2) / 2 + x**2 * y - y**3 / 3},
        name="henon-heiles", split=2,
    )  # fmt: skip


@pytest.fixture(scope="module")
def pendulum():
    return _pendulum()


@pytest.fixture(scope="module")
def hh():
    return _henon_heiles()


def _full(system, x0, t_eval, **kw):
    """The same call through the full checks (lists are not among the prepared kinds)."""
    par = kw.pop("params", None)
    return nh.integrate(
        system, np.asarray(x0).tolist(), list(np.asarray(t_eval).tolist()),
        params=None if par is None else np.asarray(par).tolist(), **kw,
    )  # fmt: skip


def _same(a, b) -> None:
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.t, b.t)
    np.testing.assert_array_equal(a.status, b.status)
    np.testing.assert_array_equal(a.t_reached, b.t_reached)
    assert list(a.stats) == list(b.stats)
    for k in a.stats:
        np.testing.assert_array_equal(a.stats[k], b.stats[k])
    assert a.method == b.method
    assert list(a.observables) == list(b.observables)
    for k in a.observables:
        np.testing.assert_array_equal(a.observables[k], b.observables[k])
    assert a.events is None and b.events is None


def _prepared(system):
    plan = call_plan(system)
    return None if plan is None else plan.prepared


CALLS = [
    ("taylor", {"rtol": 1e-11, "atol": 1e-11}),
    ("dop853", {}),
    ("dop853", {"dense": True}),
    ("dopri5", {"rtol": 1e-8}),
    ("rk4", {"h": 0.01}),
    ("gauss4", {"h": 0.05}),
    ("leapfrog", {"h": 0.01}),
    ("taylor", {"h": 0.05, "order": 8}),
]


@pytest.mark.parametrize("method, kw", CALLS)
def test_prepared_and_full_paths_agree_bit_for_bit(hh, method, kw, monkeypatch):
    """The second call takes the prepared path (the full checks are not reached: they would
    raise) and returns what the full path returns, for one trajectory and for a batch, with
    output times as two floats and as an increasing or decreasing array."""
    x1 = np.array([0.1, -0.05, 0.2, 0.3])
    xb = np.array([[0.1, -0.05, 0.2, 0.3], [0.0, 0.1, 0.35, -0.1], [0.2, 0.2, -0.1, 0.1]])
    times = [[0.0, 3.0], np.linspace(0.0, 3.0, 7), np.array([2.0, 1.0, -0.5]), np.array([1.5])]
    for x0 in (x1, xb):
        for t in times:
            want = _full(hh, x0, t, method=method, **kw)
            nh.integrate(hh, x0, t, method=method, **kw)  # prepares (it may run the checks)
            assert _prepared(hh) is not None
            with monkeypatch.context() as m:
                m.setattr(nhi, "state_rows", _refuse)
                got = nh.integrate(hh, x0, t, method=method, **kw)
            _same(got, want)


def _refuse(*args, **kwargs):
    raise AssertionError("the full checks ran")


def test_parameters_rows_domain_and_observables(pendulum, monkeypatch):
    """One parameter row or one per trajectory, a domain checked at the initial states
    (``watch_domain=False``: a prepared call), observables computed on first access."""
    x0 = np.array([[0.5, 0.1], [1.0, -0.3], [2.0, 0.0]])
    for par in (np.array([9.81]), np.array([[9.81], [1.0], [4.0]])):
        kw = dict(params=par, watch_domain=False, method="taylor", rtol=1e-10, atol=1e-10)
        want = _full(pendulum, x0, [0.0, 2.0], **kw)
        nh.integrate(pendulum, x0, [0.0, 2.0], **kw)
        with monkeypatch.context() as m:
            m.setattr(nhi, "state_rows", _refuse)
            got = nh.integrate(pendulum, x0, [0.0, 2.0], **kw)
        assert "observables" not in vars(got)
        _same(got, want)
        e = got.observables["energy"]
        np.testing.assert_allclose(e - e[:, :1], 0.0, atol=1e-8)


@pytest.mark.parametrize(
    "x0, params, t_eval, match",
    [
        (np.array([np.nan, 0.1]), np.array([9.81]), [0.0, 1.0], "NaN or infinite"),
        (np.array([0.5, 0.1]), np.array([-9.81]), [0.0, 1.0], "g"),
        (np.array([0.5, 0.1]), np.array([np.inf]), [0.0, 1.0], "params"),
        (np.array([3.5, 0.1]), np.array([9.81]), [0.0, 1.0], r"\|q\| < 3"),
        (np.array([0.5, 0.1]), np.array([9.81]), [1.0, 1.0], "monotonic"),
        (np.array([0.5, 0.1]), np.array([9.81]), np.array([0.0, 2.0, 1.0]), "monotonic"),
        (np.array([0.5, 0.1]), np.array([9.81]), np.array([0.0, np.nan]), "NaN"),
        (np.array([0.5, 0.1, 0.0]), np.array([9.81]), [0.0, 1.0], "shape"),
        (np.array([[0.5, 0.1]]), np.array([[9.81], [1.0]]), [0.0, 1.0], "params"),
        (np.array([0.5, 0.1]), None, [0.0, 1.0], "params"),
        (np.array([0.5, 0.1]), np.array([9.81, 1.0]), [0.0, 1.0], "params"),
    ],
)
def test_inputs_it_refuses_get_the_full_checks_errors(x0, params, t_eval, match):
    """Each bad input, after a prepared call, raises the error of the full checks."""
    system = _pendulum("refusals")
    kw = dict(method="dop853", watch_domain=False)
    nh.integrate(system, np.array([0.5, 0.1]), [0.0, 1.0], params=np.array([9.81]), **kw)
    assert _prepared(system) is not None
    with pytest.raises((ValueError, TypeError), match=match) as fast:
        nh.integrate(system, x0, t_eval, params=params, **kw)
    fresh = _pendulum("refusals")
    with pytest.raises(type(fast.value)) as full:
        nh.integrate(fresh, x0, t_eval, params=params, **kw)
    assert str(fast.value) == str(full.value)


def test_fixed_step_count_is_checked_against_max_steps(hh):
    x0 = np.array([0.1, 0.0, 0.2, 0.3])
    kw = dict(method="rk4", h=0.1, max_steps=21)
    nh.integrate(hh, x0, [0.0, 1.0], **kw)
    assert _prepared(hh) is not None
    with pytest.raises(ValueError, match="needs 30 steps, more than max_steps=21"):
        nh.integrate(hh, x0, [0.0, 3.0], **kw)
    with pytest.raises(ValueError, match="needs 30 steps, more than max_steps=21"):
        nh.integrate(hh, x0, np.linspace(0.0, 3.0, 4), **kw)
    ok = nh.integrate(hh, x0, np.linspace(0.0, 2.0, 4), **kw)  # 7 steps per interval
    assert ok.success and ok.stats["steps"][0] == 21


def test_failures_raise_or_warn_at_the_callers_line():
    """A failed trajectory in a prepared call: IntegrationError, or with ``keep_failed`` an
    IntegrationWarning that points at the caller's line (as the full path's does)."""
    system = _oscillator()
    x0 = np.array([[1.0, 0.0], [1.0, 0.0]])
    par = np.array([[1.0], [-400.0]])  # the second grows like exp(20 t): max_steps ends it
    kw = dict(method="dop853", max_steps=200, keep_failed=True)
    for _ in range(2):  # the second call is the prepared one
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = nh.integrate(system, x0, [0.0, 10.0], params=par, **kw)
        assert [w.category for w in caught] == [IntegrationWarning]
        assert caught[0].filename == __file__
        assert res.status.tolist() == [0, LANE["max_steps"]]
    assert _prepared(system) is not None
    with pytest.raises(IntegrationError, match=r"1 of 2 trajectories failed \(1 x "):
        nh.integrate(system, x0, [0.0, 10.0], params=par, method="dop853", max_steps=200)


OPTION_CHANGES = [
    ("threads", True),  # a bool is not the int 1: the full checks refuse it
    ("threads", 2),
    ("threads", 2**40),  # refused by the core's range check (no prepared call is made)
    ("block", 1),
    ("rtol", 1e-6),
    ("atol", np.float64(1e-12)),  # the same value, another type: the full path (same result)
    ("max_steps", 5),
    ("hmax", 0.01),
    ("stiffness_check", False),
    ("dense", True),
    ("observables", False),
    ("keep_failed", True),
    ("watch_domain", False),
    ("order", 6),
    ("method", "dopri5"),
]


@pytest.mark.parametrize("name, value", OPTION_CHANGES)
def test_a_changed_option_takes_the_full_path(hh, name, value):
    """After a prepared call, a call that changes one option gives what a fresh system
    gives for it (result or error), and the prepared call is then the new one's."""
    x0 = np.array([0.1, -0.05, 0.2, 0.3])
    base = dict(method="taylor" if name == "order" else "dop853")
    nh.integrate(hh, x0, [0.0, 2.0], **base)
    # a Taylor kernel built in the background drops a prepared Taylor call when it lands
    # (the next call chooses again): let every build land, then prepare
    _background.wait()
    nh.integrate(hh, x0, [0.0, 2.0], **base)
    first = _prepared(hh)
    assert first is not None
    kw = {**base, name: value}
    fresh = _henon_heiles()
    try:
        want = nh.integrate(fresh, x0, [0.0, 2.0], **kw)
    except (ValueError, TypeError, IntegrationError) as exc:
        with pytest.raises(type(exc)) as got:
            nh.integrate(hh, x0, [0.0, 2.0], **kw)
        assert str(got.value) == str(exc)
        return
    _same(nh.integrate(hh, x0, [0.0, 2.0], **kw), want)
    assert _prepared(hh) is not first or name == "atol"  # atol: not a plain float


def test_unknown_keyword_is_refused_after_a_prepared_call(hh):
    x0 = np.array([0.1, -0.05, 0.2, 0.3])
    nh.integrate(hh, x0, [0.0, 1.0])
    assert _prepared(hh) is not None
    with pytest.raises(TypeError, match="unexpected keyword argument 'chunk'"):
        nh.integrate(hh, x0, [0.0, 1.0], chunk=10)


def test_threads_share_one_prepared_call(hh):
    """Python threads that run the same prepared call at once get their own results."""
    rng = np.random.default_rng(3)
    starts = [rng.uniform(-0.2, 0.2, (5, 4)) for _ in range(8)]
    kw = dict(method="taylor", rtol=1e-12, atol=1e-12, threads=1)
    want = [_full(hh, x0, [0.0, 5.0], **kw).y for x0 in starts]
    nh.integrate(hh, starts[0], [0.0, 5.0], **kw)
    got: dict[int, np.ndarray] = {}
    barrier = threading.Barrier(4)

    def run(k: int) -> None:
        barrier.wait()
        for i in range(k, len(starts), 4):
            for _ in range(20):
                got[i] = nh.integrate(hh, starts[i], [0.0, 5.0], **kw).y

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, y in enumerate(want):
        np.testing.assert_array_equal(got[i], y)


def test_no_prepared_call_for_unplain_options_or_events():
    x0 = np.array([0.5, 0.1])
    par = np.array([9.81])
    system = _pendulum("unprepared")
    nh.integrate(system, x0, [0.0, 1.0], params=par, rtol=np.float64(1e-9))
    assert _prepared(system) is None  # an option that is not a plain value
    q, p = system.states
    nh.integrate(system, x0, [0.0, 1.0], params=par, method="taylor", events=[(q, 0, False)])
    assert _prepared(system) is None  # the user's events


@settings(max_examples=40, deadline=None)
@given(
    calls=st.lists(
        st.tuples(
            st.sampled_from(["taylor", "dop853", "rk4"]),
            st.sampled_from([1e-8, 1e-11]),
            st.sampled_from([1, 3]),
            st.sampled_from([[0.0, 1.5], "array", "reversed"]),
            st.booleans(),
        ),
        min_size=2,
        max_size=6,
    )
)
def test_any_sequence_of_calls_gives_the_full_paths_results(calls):
    """Whatever the order of calls (options and input kinds changing or repeating), each
    result equals the full path's on a system that never prepared a call."""
    system = _henon_heiles()
    rng = np.random.default_rng(len(calls))
    for method, tol, rows, times, obs in calls:
        x0 = rng.uniform(-0.2, 0.2, (rows, 4))
        t = {"array": np.linspace(0.0, 1.5, 4), "reversed": np.array([1.5, 0.0])}.get(
            times if isinstance(times, str) else "", times
        )
        kw = dict(method=method, rtol=tol, atol=tol, observables=obs)
        if method == "rk4":
            kw["h"] = 0.05
        got = nh.integrate(system, x0[0] if rows == 1 else x0, t, **kw)
        _same(got, _full(_henon_heiles(), x0[0] if rows == 1 else x0, t, **kw))


def _reciprocal() -> nh.VectorField:
    """x' = -1/x with the domain x > 0: x reaches 0 at t = x0^2 / 2, where x' is singular
    (a trajectory stops at the boundary: its steps underflow or its state is not finite)."""
    x = sp.Symbol("x")
    return nh.VectorField([x], [-1 / x], domain={"x > 0": x}, name="reciprocal")


def _messages_and_results(system, x0, t, keep, call, **kw):
    """(result or None, the warning's or error's message) of ``call(system, x0, t, **kw)``."""
    if keep:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = call(system, x0, t, keep_failed=True, **kw)
        return res, [str(w.message) for w in caught]
    with pytest.raises(IntegrationError) as err:
        call(system, x0, t, **kw)
    return err.value.result if hasattr(err.value, "result") else None, [str(err.value)]


@pytest.mark.parametrize(
    "make, x0, par, method, kw",
    [
        (_pendulum, [[0.5, 0.1], [2.9, 3.0], [1.0, -0.3]], [9.81], "rk4", {"h": 0.01}),
        (_pendulum, [[2.9, 3.0]], [9.81], "dop853", {}),
        (_pendulum, [[0.5, 0.1], [2.95, 1.0]], [[9.81], [1.0]], "gauss4", {"h": 0.02}),
        (_reciprocal, [[1.0], [0.5], [2.0]], None, "dop853", {}),
        (_reciprocal, [[0.5]], None, "dopri5", {}),
        # along the steps: the domain's conditions as the core's terminal events
        (_pendulum, [[0.5, 0.1], [2.9, 3.0], [1.0, -0.3]], [9.81], "taylor", {}),
        (_pendulum, [[2.9, 3.0]], [9.81], "dop853", {"dense": True}),
        (_pendulum, [[2.95, 1.0], [0.5, 0.1]], [[1.0], [9.81]], "taylor", {"rtol": 1e-12}),
        (_reciprocal, [[1.0], [0.5], [2.0]], None, "taylor", {}),
        (_reciprocal, [[0.5]], None, "dop853", {"dense": True}),
    ],
)
@pytest.mark.parametrize("keep", [True, False])
def test_watched_domain_in_a_prepared_call(make, x0, par, method, kw, keep, monkeypatch):
    """A domain watched in a prepared call, on the output rows (methods without domain
    events: a trajectory that passes outside between output times is marked ``left_domain``
    at the first row outside; one that stops at a singular boundary, x' = -1/x, at the state
    where it stopped) or along the steps (Taylor, dense DOP853: it stops at the crossing):
    the same statuses, rows, times reached, events and message as the full path, also for
    one trajectory."""
    x0, t = np.array(x0), np.linspace(0.0, 1.5, 7)
    par = None if par is None else np.array(par)
    opts = dict(params=None if par is None else par[:1].reshape(-1), method=method, **kw)
    system = make()
    inside = np.array([[0.5, 0.1]]) if make is _pendulum else np.array([[2.0]])
    nh.integrate(system, inside, t, keep_failed=keep, **{**opts, "params": opts["params"]})
    assert _prepared(system) is not None
    opts["params"] = par
    with monkeypatch.context() as m:
        m.setattr(nhi, "state_rows", _refuse)
        got, got_msg = _messages_and_results(system, x0, t, keep, nh.integrate, **opts)
    want, want_msg = _messages_and_results(make(), x0, t, keep, _full, **opts)
    assert got_msg == want_msg and got_msg
    assert "left its domain" in got_msg[0]
    if keep:
        _same(got, want)
        assert LANE["left_domain"] in got.status


def test_a_landed_taylor_kernel_keeps_a_prepared_call_of_another_method():
    """A Taylor kernel that lands in the background makes the plan choose its Taylor kernels
    again; a prepared call of another method does not depend on them and stays."""
    system = _henon_heiles()
    x0 = np.array([0.1, -0.05, 0.2, 0.3])
    nh.integrate(system, x0, [0.0, 1.0], method="dop853")
    prepared = _prepared(system)
    assert prepared is not None
    call_plan(system).forget_kernels()
    assert _prepared(system) is prepared
    nh.integrate(system, x0, [0.0, 1.0], method="taylor", rtol=1e-11, atol=1e-11)
    _background.wait()
    nh.integrate(system, x0, [0.0, 1.0], method="taylor", rtol=1e-11, atol=1e-11)
    assert _prepared(system) is not None
    call_plan(system).forget_kernels()
    assert _prepared(system) is None
