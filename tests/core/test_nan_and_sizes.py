"""Bad input that used to pass silently (issue 35): conditions and events that turn NaN,
tolerances below double precision, allocations beyond the memory, constants C cannot write.

References are closed forms: along ``x = x0 - c t`` the condition ``sqrt(x) - 0.1 > 0`` fails
at ``x = 0.01`` (before ``sqrt`` turns NaN at ``x = 0``); ``sqrt(x - 1) + 1 > 0`` never
crosses zero but turns NaN at ``x = 1``; along ``x = sin t`` the event ``sqrt(x) - 0.5`` crosses
zero where ``sin t = 1/4``, twice a period, NaN between.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import nhfast as nh
from nhfast import _abi
from nhfast.errors import InsufficientMemoryError, IntegrationError, ToleranceWarning

LEFT = _abi.LANE["left_domain"]
WATCHED = [("taylor", {}), ("dop853", {"dense": True}), ("dop853", {}), ("rk4", {"h": 1e-3})]


def _line(condition):
    x, y, c = sp.symbols("x y c")
    return nh.VectorField([x, y], [-c, x], params=[c], domain={"cond": condition(x)},
                          name="line")  # fmt: skip


@pytest.mark.parametrize(("method", "kw"), WATCHED)
def test_a_condition_that_turns_nan_has_failed(method, kw):
    """``sqrt(x - 1) + 1 > 0`` is positive wherever it is defined: it fails only by turning
    NaN, at x = 1 (t = 1 from x0 = 2); every method stops there, as left_domain."""
    field = _line(lambda x: sp.sqrt(x - 1) + 1)
    res = nh.integrate(field, [[2.0, 0.0]], [0.0, 3.0], params=[1.0], method=method,
                       keep_failed=True, rtol=1e-12, atol=1e-12, **kw)  # fmt: skip
    assert res.status.tolist() == [LEFT]
    if method == "taylor" or kw.get("dense"):
        assert res.t_reached[0] == pytest.approx(1.0, abs=1e-9)  # the edge of the NaN stretch
    else:
        assert res.t_reached[0] <= 3.0


@pytest.mark.parametrize(("method", "kw"), WATCHED[:2])
def test_a_condition_is_watched_before_its_nan(method, kw):
    field = _line(lambda x: sp.sqrt(x) - sp.Rational(1, 10))
    with pytest.raises(IntegrationError) as err:
        nh.integrate(field, [[1.0, 0.0]], [0.0, 2.0], params=[1.0], method=method,
                     rtol=1e-12, atol=1e-12, **kw)  # fmt: skip
    res = err.value.result
    assert res.status.tolist() == [LEFT]
    assert res.t_reached[0] == pytest.approx(0.99, abs=1e-9)


@pytest.fixture(scope="module")
def circle():
    """x' = y, y' = -x from (0, 1): x = sin t."""
    x, y = sp.symbols("x y")
    return nh.VectorField([x, y], [y, -x], name="circle")


@pytest.mark.parametrize(("method", "kw"), WATCHED[:2])
@pytest.mark.parametrize("direction", [0, 1, -1])
def test_events_after_a_nan_stretch_are_found(circle, method, kw, direction):
    """``sqrt(x) - 0.5`` along x = sin t, t in [0, 4 pi]: NaN on sin t < 0, zero at
    sin t = 1/4: rising at asin(1/4) + 2 pi k, falling at pi - asin(1/4) + 2 pi k. Entering
    its NaN stretch from below zero is no crossing (NaN counts as below zero)."""
    x = circle.states[0]
    res = nh.integrate(circle, [0.0, 1.0], [0.0, 4 * math.pi], method=method,
                       events=[(sp.sqrt(x) - 0.5, direction, False)], max_events=10,
                       rtol=1e-12, atol=1e-12, **kw)  # fmt: skip
    a = math.asin(0.25)
    rising = [a, a + 2 * math.pi]
    falling = [math.pi - a, 3 * math.pi - a]
    want = sorted({0: rising + falling, 1: rising, -1: falling}[direction])
    got = res.events.t[0][: res.events.count[0]]
    np.testing.assert_allclose(got, want, atol=1e-9)


@pytest.mark.parametrize(("method", "kw"), WATCHED[:2])
def test_an_event_function_entering_nan_from_above_is_a_crossing(circle, method, kw):
    """``sqrt(x) + 0.5`` is positive where defined: it crosses (falling) only where it turns
    NaN, at sin t = 0 (t = pi), and rises back at t = 2 pi."""
    x = circle.states[0]
    res = nh.integrate(circle, [0.0, 1.0], [0.0, 2.5 * math.pi], method=method,
                       events=[(sp.sqrt(x) + 0.5, 0, False)], max_events=10, rtol=1e-12,
                       atol=1e-12, **kw)  # fmt: skip
    got = res.events.t[0][: res.events.count[0]]
    np.testing.assert_allclose(got, [math.pi, 2 * math.pi], atol=1e-7)


@settings(max_examples=15, deadline=None)
@given(shift=st.floats(0.05, 0.95), speed=st.floats(0.3, 3.0))
def test_nan_edges_located_for_any_speed(shift, speed):
    """A condition sqrt(x - shift) + 1 > 0 along x = 1 - speed t fails at t = (1 - shift) /
    speed, by Taylor and dense DOP853 alike (the NaN edge, to round-off of the bisection)."""
    field = _line(lambda x: sp.sqrt(x - shift) + 1)
    want = (1.0 - shift) / speed
    for method, kw in WATCHED[:2]:
        res = nh.integrate(field, [[1.0, 0.0]], [0.0, 2.0 / speed + 1.0], params=[speed],
                           method=method, keep_failed=True, rtol=1e-12, atol=1e-12,
                           **kw)  # fmt: skip
        assert res.status[0] == LEFT
        assert res.t_reached[0] == pytest.approx(want, abs=1e-9 * (1 + want))


@pytest.mark.parametrize("method", ["taylor", "dop853", "dopri5"])
def test_a_tolerance_below_double_precision_is_raised_saying_so(circle, method):
    with pytest.warns(ToleranceWarning, match=r"rtol=1e-30 .* below what double precision"):
        res = nh.integrate(circle, [0.0, 1.0], [0.0, 10.0], method=method, rtol=1e-30,
                           atol=1e-30)  # fmt: skip
    ref = nh.integrate(circle, [0.0, 1.0], [0.0, 10.0], method=method, rtol=1e-14, atol=1e-14)
    exact = [math.sin(10.0), math.cos(10.0)]
    assert np.max(np.abs(res.y[0, -1] - exact)) <= 10 * max(
        np.max(np.abs(ref.y[0, -1] - exact)), 1e-15
    )


def test_an_event_record_beyond_memory_is_refused(circle, monkeypatch):
    monkeypatch.setenv("NHFAST_MEMORY_LIMIT", str(2 * 10**9))
    x = circle.states[0]
    x0 = np.tile([0.0, 1.0], (1000, 1))
    with pytest.raises(InsufficientMemoryError, match=r"event record .* needs 28 GB, more than"):
        nh.integrate(circle, x0, [0.0, 1.0], method="taylor", events=[(x, 0, False)],
                     max_events=10**6)  # fmt: skip


def test_an_output_beyond_memory_is_refused(circle, monkeypatch):
    monkeypatch.setenv("NHFAST_MEMORY_LIMIT", str(10**8))
    with pytest.raises(InsufficientMemoryError, match=r"output of 100 trajectories x 100001"):
        nh.integrate(circle, np.tile([0.0, 1.0], (100, 1)), np.linspace(0, 1, 100_001))


def test_complex_and_special_functions_are_named_at_construction(circle):
    x = circle.states[0]
    with pytest.raises(ValueError, match=r"events\[0\] has complex constants"):
        nh.integrate(circle, [0.0, 1.0], [0.0, 1.0], method="taylor",
                     events=[(x - sp.I, 0, False)])  # fmt: skip
    with pytest.raises(ValueError, match=r"events\[0\] uses functions .*besselj"):
        nh.integrate(circle, [0.0, 1.0], [0.0, 1.0], method="taylor",
                     events=[(sp.besselj(0, x), 0, False)])  # fmt: skip
    with pytest.raises(ValueError, match=r"rhs uses functions that C99 .*besselj"):
        nh.VectorField([x], [sp.besselj(0, x)])


@pytest.mark.slow
@pytest.mark.parametrize("method", ["taylor", "dop853"])
def test_large_n_rigid_body_needs_no_recursion(method):
    """n = 10^4: the domain check, generation and integration have no recursion in n."""
    from nhfast.systems import veselova

    n = 10_000
    vf = veselova(n, form="structured", inertia="physical")
    g = np.zeros(n)
    g[-1] = 1.0
    m = np.zeros(n)
    m[0] = 0.1
    res = nh.integrate(vf, np.r_[g, m], [0.0, 0.1], params=1 + np.arange(1, n + 1) / n,
                       method=method)  # fmt: skip
    assert res.success


def test_domain_check_of_thousands_of_terms():
    """The domain check evaluates a sum of 6000 squares (a rigid body's |gamma|^2 at n = 6000)
    without Python's compiler recursing through it."""
    xs = sp.symbols("x1:6001")
    field = nh.VectorField(
        list(xs), [-x for x in xs], domain={"x != 0": sp.Add(*[x**2 for x in xs])}
    )
    field.check_domain(np.ones((2, 6000)), np.zeros((1, 0)))
    with pytest.raises(ValueError, match="outside the domain"):
        field.check_domain(np.zeros((1, 6000)), np.zeros((1, 0)))


@settings(max_examples=15, deadline=None)
@given(level=st.floats(0.1, 0.9), t_end=st.floats(3.0, 13.0))
def test_events_through_nan_stretches_for_any_level(circle, level, t_end):
    """Property: ``sqrt(x) - level`` along x = sin t crosses zero exactly where sin t =
    level^2, before and after every NaN stretch (sin t < 0), with Taylor and dense DOP853."""
    x = circle.states[0]
    a = math.asin(level**2)
    want = sorted(
        r for k in range(4) for r in (a + 2 * math.pi * k, math.pi - a + 2 * math.pi * k)
        if r < t_end
    )  # fmt: skip
    for method, kw in WATCHED[:2]:
        res = nh.integrate(circle, [0.0, 1.0], [0.0, t_end], method=method,
                           events=[(sp.sqrt(x) - level, 0, False)], max_events=20,
                           rtol=1e-12, atol=1e-12, **kw)  # fmt: skip
        got = res.events.t[0][: res.events.count[0]]
        np.testing.assert_allclose(got, want, atol=1e-8)


def test_a_rigid_body_beyond_memory_is_refused(monkeypatch):
    """n = 10^7: the program's symbols alone would take tens of GB; refused with the size."""
    from nhfast.systems import veselova

    monkeypatch.setenv("NHFAST_MEMORY_LIMIT", str(4 * 10**9))
    with pytest.raises(InsufficientMemoryError, match=r"rigid body at n = 10000000 .* needs 9"):
        veselova(10**7, form="structured", inertia="physical")


def test_the_command_refuses_a_run_beyond_memory(monkeypatch, capsys, tmp_path):
    from nhfast.cli import main

    monkeypatch.setenv("NHFAST_MEMORY_LIMIT", str(10**8))
    code = main(["run", "veselova", "--n", "3000", "--out", str(tmp_path / "r"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert "InsufficientMemoryError" in err and "needs" in err and "Traceback" not in err


def test_the_command_names_an_unreachable_scheduler_at_once(capsys):
    import time

    from nhfast.cli import main

    t0 = time.perf_counter()
    with pytest.raises(SystemExit) as exc:
        main(["run", "particle", "--scheduler", "tcp://127.0.0.1:1"])
    assert exc.value.code == 2
    assert time.perf_counter() - t0 < 10
    assert "--scheduler: cannot reach 'tcp://127.0.0.1:1'" in capsys.readouterr().err
