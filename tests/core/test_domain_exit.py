"""Leaving a chart's domain: status ``"left_domain"`` at the crossing (issue 12, item 3).

The conditions ``expr > 0`` of a system's ``domain`` are watched as internal terminal events
(``taylor``, and ``dop853`` with ``dense=True``). References are closed forms: on
``x' = -1`` the condition ``x > 0`` fails at ``t = x0``; past it the right-hand side
(``sqrt(x)``) is not defined, which without the watch ends a trajectory as a non-finite state.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq

import nhfast as nh
from nhfast import _abi
from nhfast.codegen import IndexedProgram
from nhfast.errors import IntegrationError, IntegrationWarning
from nhfast.structured_field import StructuredVectorField

LEFT = _abi.LANE["left_domain"]
WATCHED = [("taylor", {}), ("dop853", {"dense": True})]
UNWATCHED = [("dop853", {}), ("dopri5", {}), ("rk4", {"h": 0.01}), ("gauss4", {"h": 0.01})]


@pytest.fixture(scope="module")
def smooth():
    """x' = -c, y' = x: defined everywhere; x > 0 fails at t = x0 / c."""
    x, y, c = sp.symbols("x y c")
    return nh.VectorField([x, y], [-c, x], params=[c], domain={"x > 0": x}, name="smooth")


@pytest.fixture(scope="module")
def chart():
    """x' = -c, y' = sqrt(x): y is not defined past x = 0, and y'' = -c / (2 sqrt(x)) blows
    up there (a chart's equations singular at its boundary)."""
    x, y, c = sp.symbols("x y c")
    return nh.VectorField([x, y], [-c, sp.sqrt(x)], params=[c], domain={"x > 0": x}, name="chart")


def _exact_y(x0, y0, c, t):
    """y(t) of the chart for x(t) = x0 - c t: y0 + (2 / 3c) (x0^1.5 - x(t)^1.5)."""
    return y0 + 2.0 / (3.0 * c) * (x0**1.5 - (x0 - c * t) ** 1.5)


@pytest.mark.parametrize(("method", "kw"), WATCHED)
def test_crossing_status_time_and_message(smooth, method, kw):
    x0 = np.array([[1.0, 0.0], [3.0, 0.5], [0.25, 1.0]])
    c = np.array([[1.0], [1.0], [0.5]])
    with pytest.raises(IntegrationError) as err:
        nh.integrate(smooth, x0, [0.0, 2.0], params=c, method=method, rtol=1e-12, **kw)
    msg = str(err.value)
    assert "left its domain" in msg and "domain['x > 0'] (x > 0) reached 0 at t = 1" in msg
    res = err.value.result
    assert res.status.tolist() == [LEFT, 0, LEFT]
    assert nh.STATUS[LEFT].startswith("left its domain")
    # the crossing time, located to round-off: x0 / c
    np.testing.assert_allclose(res.t_reached[[0, 2]], [1.0, 0.5], rtol=0, atol=1e-12)
    assert res.t_reached[1] == 2.0
    # the trajectory inside is finished and right (y = y0 + x0 t - t^2 / 2); the others NaN
    np.testing.assert_allclose(res.y[1, -1], [1.0, 0.5 + 6.0 - 2.0], rtol=1e-12)
    assert np.all(np.isnan(res.y[[0, 2], -1]))


@pytest.mark.parametrize(("method", "kw"), [*WATCHED, ("dop853", {}), ("dopri5", {})])
def test_singular_boundary_is_named_not_underflow(chart, method, kw):
    """Steps shrink towards the singular boundary and underflow before crossing: the last
    state lies on the boundary, so the status says the trajectory left its domain."""
    x0 = np.array([[1.0, 0.0], [3.0, 0.5]])
    with pytest.raises(IntegrationError) as err:
        nh.integrate(chart, x0, [0.0, 2.0], params=[1.0], method=method, rtol=1e-10, **kw)
    res = err.value.result
    assert res.status.tolist() == [LEFT, 0]
    assert abs(res.t_reached[0] - 1.0) < 1e-6
    msg = str(err.value)
    assert "reached the boundary of its domain" in msg or "reached 0 at t = 1" in msg
    assert "domain['x > 0']" in msg and "step size underflow" not in msg.split(";")[0][:40]
    np.testing.assert_allclose(res.y[1, -1], [1.0, _exact_y(3.0, 0.5, 1.0, 2.0)], rtol=1e-9)


@pytest.mark.parametrize(("method", "kw"), UNWATCHED)
def test_unwatched_steps_checked_at_the_outputs(smooth, method, kw):
    """Methods without domain events: an output row outside ends the trajectory there."""
    t = np.linspace(0.0, 2.0, 9)  # x0 = 1.1 crosses at 1.1, between outputs 1.0 and 1.25
    x0 = np.array([[1.1, 0.0], [3.0, 0.0]])
    with pytest.warns(IntegrationWarning, match="left its domain between output times"):
        res = nh.integrate(smooth, x0, t, params=[1.0], method=method, keep_failed=True, **kw)
    assert res.status.tolist() == [LEFT, 0]
    assert res.t_reached[0] == 1.0
    assert np.all(np.isnan(res.y[0, 5:])) and np.all(np.isfinite(res.y[0, :5]))
    np.testing.assert_allclose(res.y[0, 4], [0.1, 1.1 - 0.5], rtol=1e-9)
    # without the watch the trajectory goes on outside the domain (the equations allow it)
    off = nh.integrate(smooth, x0, t, params=[1.0], method=method, watch_domain=False, **kw)
    assert off.success and off.y[0, -1, 0] < 0
    np.testing.assert_array_equal(off.y[1], res.y[1])


@pytest.mark.parametrize(("method", "kw"), WATCHED)
def test_keep_failed_warns_and_reports_per_lane(smooth, method, kw):
    x0 = np.array([[0.5, 0.0], [2.0, 0.0]])
    with pytest.warns(IntegrationWarning, match="left its domain"):
        res = nh.integrate(
            smooth, x0, np.linspace(0, 1, 5), params=[1.0], method=method, keep_failed=True, **kw
        )
    assert res.failed.tolist() == [True, False]
    assert res.status[0] == LEFT
    # outputs before the crossing are kept and right
    np.testing.assert_allclose(res.y[0, 1], [0.25, 0.5 * 0.25 - 0.25**2 / 2], rtol=1e-9)
    assert np.all(np.isnan(res.y[0, 3:]))


@pytest.mark.parametrize(("method", "kw"), WATCHED)
def test_lanes_inside_bit_identical_to_unwatched(smooth, method, kw):
    x0 = np.column_stack([np.linspace(2.5, 4.0, 7), np.linspace(-1, 1, 7)])
    t = np.linspace(0.0, 2.0, 9)
    on = nh.integrate(smooth, x0, t, params=[1.0], method=method, **kw)
    off = nh.integrate(smooth, x0, t, params=[1.0], method=method, watch_domain=False, **kw)
    assert np.array_equal(on.y, off.y)
    assert np.array_equal(on.stats["steps"], off.stats["steps"])
    assert on.events is None and off.events is None


def test_unwatched_exit_fails_with_a_hint(chart):
    with pytest.raises(IntegrationError) as err:
        nh.integrate(chart, [0.5, 0.0], [0.0, 1.0], params=[1.0], watch_domain=False)
    msg = str(err.value)
    assert err.value.result.status[0] == _abi.LANE["step_underflow"]
    assert "has a domain" in msg and "dense=True" in msg and "left_domain" in msg


def test_watch_domain_is_checked(chart):
    with pytest.raises(TypeError, match="watch_domain must be True or False"):
        nh.integrate(chart, [1.0, 0.0], [0.0, 0.5], params=[1.0], method="taylor", watch_domain=1)


@pytest.mark.parametrize(("method", "kw"), WATCHED)
def test_with_user_events(smooth, method, kw):
    """The user's records keep their shape and exclude the internal domain record."""
    x, y = smooth.states
    x0 = np.array([[1.0, 0.0], [3.0, 0.0]])
    half = [(x - 0.5, -1, False)]
    res = nh.integrate(
        smooth, x0, [0.0, 2.0], params=[1.0], method=method, events=half, max_events=3,
        keep_failed=True, **kw,
    )  # fmt: skip
    assert res.status.tolist() == [LEFT, 0]
    assert res.events.t.shape == (2, 3) and res.events.y.shape == (2, 3, 2)
    assert res.events.count.tolist() == [1, 0]
    np.testing.assert_allclose(res.events.t[0, 0], 0.5, atol=1e-12)
    assert res.events.which[0].tolist() == [0, -1, -1]
    assert np.all(np.isnan(res.events.t[0, 1:]))
    # a terminal user event that comes first ends the lane as a success
    stop = [(x - 0.5, -1, True)]
    res = nh.integrate(smooth, x0, [0.0, 2.0], params=[1.0], method=method, events=stop, **kw)
    assert res.status.tolist() == [0, 0]
    np.testing.assert_allclose(res.t_reached, [0.5, 2.0], atol=1e-12)
    # a terminal user event beyond the boundary: the domain comes first
    late = [(x + 0.5, -1, True)]
    res = nh.integrate(
        smooth, x0, [0.0, 4.0], params=[1.0], method=method, events=late, keep_failed=True, **kw
    )
    assert res.status.tolist() == [LEFT, LEFT]
    np.testing.assert_allclose(res.t_reached, [1.0, 3.0], atol=1e-12)
    assert res.events.count.tolist() == [0, 0]


def test_which_condition_is_named():
    """Two conditions: the message names the one each trajectory crossed."""
    x, y = sp.symbols("x y")
    vf = nh.VectorField(
        [x, y], [-1 + 0 * y, -2 + 0 * x], domain={"x > 0": x, "y > 0": y}, name="box"
    )
    x0 = np.array([[1.0, 5.0], [5.0, 1.0]])  # x leaves at t = 1; y at t = 0.5
    with pytest.raises(IntegrationError) as err:
        nh.integrate(vf, x0, [0.0, 3.0], method="taylor")
    msg = str(err.value)
    assert "#0: domain['x > 0'] (x > 0) reached 0 at t = 1" in msg
    assert "#1: domain['y > 0'] (y > 0) reached 0 at t = 0.5" in msg


@settings(max_examples=25, deadline=None)
@given(
    x0=st.floats(0.05, 3.0),
    c=st.floats(0.2, 5.0),
    t_end=st.floats(0.05, 3.0),
)
def test_exit_iff_boundary_before_the_end(smooth, x0, c, t_end):
    t_cross = x0 / c
    if abs(t_cross - t_end) < 1e-6:
        return
    res = nh.integrate(
        smooth, [x0, 0.0], [0.0, t_end], params=[c], method="taylor", keep_failed=True
    ) if t_cross < t_end else nh.integrate(
        smooth, [x0, 0.0], [0.0, t_end], params=[c], method="taylor"
    )  # fmt: skip
    if t_cross < t_end:
        assert res.status[0] == LEFT
        assert abs(res.t_reached[0] - t_cross) <= 1e-11 * max(1.0, t_cross)
    else:
        assert res.status[0] == 0
        np.testing.assert_allclose(res.y[0, -1, 0], x0 - c * t_end, rtol=1e-12, atol=1e-14)


def test_structured_field_domain_watch():
    """A structured field's domain is watched through a small kernel of the conditions only
    (its right-hand side is not unrolled): x' = v, v' = -k v leaves the ball |x| < 1 where
    |x0 + v0 (1 - exp(-k t)) / k| = 1 (the root from SciPy's brentq)."""
    n = 24
    prog = IndexedProgram(n)
    x = prog.state_vector("x")
    v = prog.state_vector("v")
    k = prog.param_scalar("k")
    prog.output("rhs", [v, -k * v])
    comps = prog.components(x)
    vf = StructuredVectorField(
        prog, name="damped particle", domain={"|x| < 1": 1 - sp.Add(*[c**2 for c in comps])}
    )
    x0 = np.concatenate([np.full(n, 0.1), np.linspace(-1, 1, n) + 0.3])
    kk = 0.4

    def radius(t):
        xt = x0[:n] + x0[n:] * (1 - np.exp(-kk * t)) / kk
        return xt @ xt - 1

    t_cross = brentq(radius, 0.0, 5.0, xtol=1e-15)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IntegrationWarning)
        res = nh.integrate(vf, x0, [0.0, 5.0], params=[kk], method="taylor", keep_failed=True)
    assert res.status[0] == LEFT
    np.testing.assert_allclose(res.t_reached[0], t_cross, rtol=1e-12)


@pytest.mark.parametrize(("method", "kw"), [*WATCHED, ("dop853", {}), ("dopri5", {})])
def test_large_batch_reruns_its_boundary_candidates(chart, method, kw, monkeypatch):
    """Above X_END_ROWS trajectories the run keeps no x_end: the trajectories that failed the
    way a boundary stop fails run again for their last states; the verdict is the same."""
    integrate_module = __import__("sys").modules["nhfast._call"]
    x0 = np.array([[1.0, 0.0], [3.0, 0.5], [0.5, 0.1], [2.5, 0.0]])
    c = np.array([[1.0], [1.0], [1.0], [2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IntegrationWarning)
        ref = nh.integrate(chart, x0, [0.0, 2.0], params=c, method=method, rtol=1e-10,
                           keep_failed=True, **kw)  # fmt: skip
        monkeypatch.setattr(integrate_module, "X_END_ROWS", 0)
        big = nh.integrate(chart, x0, [0.0, 2.0], params=c, method=method, rtol=1e-10,
                           keep_failed=True, **kw)  # fmt: skip
    assert ref.status.tolist() == [LEFT, 0, LEFT, LEFT]
    np.testing.assert_array_equal(big.status, ref.status)
    np.testing.assert_array_equal(big.y, ref.y)
    np.testing.assert_array_equal(big.t_reached, ref.t_reached)


@pytest.mark.parametrize(("method", "kw"), UNWATCHED[:2])
def test_output_check_in_chunks(smooth, method, kw, monkeypatch):
    """The output rows are checked chunk by chunk (views of y where the finished
    trajectories are consecutive): the same lanes are marked with any chunk size."""
    from nhfast import events

    rng = np.random.default_rng(5)
    x0 = np.column_stack([rng.uniform(0.2, 4.0, 23), rng.uniform(-1, 1, 23)])
    t = np.linspace(0.0, 2.0, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IntegrationWarning)
        ref = nh.integrate(smooth, x0, t, params=[1.0], method=method, keep_failed=True, **kw)
        monkeypatch.setattr(events, "OUTPUT_CHUNK_ROWS", 7)
        got = nh.integrate(smooth, x0, t, params=[1.0], method=method, keep_failed=True, **kw)
    assert np.array_equal(ref.status == LEFT, x0[:, 0] < 2.0)
    np.testing.assert_array_equal(got.status, ref.status)
    np.testing.assert_array_equal(got.y, ref.y)
    np.testing.assert_array_equal(got.t_reached, ref.t_reached)
