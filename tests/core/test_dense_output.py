"""DOP853's continuous extension as the source of the outputs (``integrate(..., dense=True)``).

References are independent of the code under test: closed forms (harmonic oscillator), SciPy's
DOP853 and its ``dense_output`` (the same published interpolant, evaluated by SciPy on a step
of the same size), step-shortened runs (``dense=False``), and the interpolant's order (the
error at mid-step of one fixed step falls like h^8).
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import DOP853, solve_ivp

import nhfast as nh

MU = 1.3


@pytest.fixture(scope="module")
def oscillator():
    x, v, w = sp.symbols("x v w")
    return nh.VectorField([x, v], [v, -(w**2) * x], params=[w])


@pytest.fixture(scope="module")
def vanderpol():
    x, v = sp.symbols("x v")
    return nh.VectorField([x, v], [v, MU * (1 - x**2) * v - x])


def _vdp(_t, y):
    return np.array([y[1], MU * (1 - y[0] ** 2) * y[1] - y[0]])


def _oscillator_exact(x0, w, t):
    """Closed-form solution of x'' = -w^2 x, shape (n_traj, n_t, 2)."""
    c, s = np.cos(w * t), np.sin(w * t)
    x = x0[:, None, 0] * c + x0[:, None, 1] / w * s
    v = -x0[:, None, 0] * w * s + x0[:, None, 1] * c
    return np.stack([x, v], axis=-1)


def test_steps_do_not_depend_on_output_times(vanderpol):
    x0 = np.array([[1.2, -0.4], [0.1, 2.0], [-1.5, 0.3]])
    runs = {
        nt: nh.integrate(vanderpol, x0, np.linspace(0.0, 8.0, nt), rtol=1e-10, dense=True)
        for nt in (2, 200)
    }
    assert np.array_equal(runs[2].stats["steps"], runs[200].stats["steps"])
    assert np.array_equal(runs[2].stats["rejected"], runs[200].stats["rejected"])
    # the final states come from the same steps: bit-identical
    assert np.array_equal(runs[2].y[:, -1], runs[200].y[:, -1])
    # whereas step shortening needs at least one step per output interval
    short = nh.integrate(vanderpol, x0, np.linspace(0.0, 8.0, 200), rtol=1e-10)
    assert np.all(short.stats["steps"] >= 199)
    assert np.all(runs[200].stats["steps"] < short.stats["steps"] // 2)


def test_oscillator_closed_form(oscillator):
    rng = np.random.default_rng(3)
    x0 = rng.uniform(-1.0, 1.0, size=(6, 2))
    w = rng.uniform(0.5, 2.0, size=(6, 1))
    t = np.linspace(0.0, 10.0, 301)
    rtol = 1e-10
    res = nh.integrate(oscillator, x0, t, params=w, rtol=rtol, atol=1e-12, dense=True)
    for i in range(len(x0)):
        exact = _oscillator_exact(x0[i : i + 1], w[i, 0], t)[0]
        scale = np.max(np.abs(exact))
        assert np.max(np.abs(res.y[i] - exact)) < 20 * rtol * scale


def test_agrees_with_step_shortened_runs(vanderpol):
    rng = np.random.default_rng(4)
    x0 = rng.uniform(-2.0, 2.0, size=(5, 2))
    t = np.linspace(0.0, 10.0, 41)
    rtol = 1e-10
    dense = nh.integrate(vanderpol, x0, t, rtol=rtol, atol=1e-12, dense=True)
    short = nh.integrate(vanderpol, x0, t, rtol=rtol, atol=1e-12)
    scale = np.max(np.abs(short.y), axis=1, keepdims=True)
    assert np.max(np.abs(dense.y - short.y) / scale) < 10 * rtol
    assert np.array_equal(dense.y[:, 0], x0)


def test_agrees_with_scipy_dense_output(vanderpol):
    rng = np.random.default_rng(5)
    x0 = rng.uniform(-2.0, 2.0, size=(3, 2))
    t = np.linspace(0.0, 10.0, 57)
    res = nh.integrate(vanderpol, x0, t, rtol=1e-10, atol=1e-12, dense=True)
    for i in range(len(x0)):
        sol = solve_ivp(
            _vdp, (0.0, 10.0), x0[i], method="DOP853", rtol=1e-10, atol=1e-12, dense_output=True
        )
        ref = sol.sol(t).T
        assert np.max(np.abs(res.y[i] - ref)) < 1e-8


@pytest.mark.parametrize("h", [0.4, 0.1])
def test_one_step_interpolant_matches_scipy_to_roundoff(vanderpol, h):
    """One step of size h (rtol = atol = 1 accept it; hmax = h caps it) evaluated inside:
    SciPy's Dop853DenseOutput of the same step gives the same numbers up to round-off, which
    checks every coefficient of the extension."""
    y0 = np.array([1.2, -0.4])
    theta = np.array([0.1, 0.37, 0.5, 0.81, 0.99])
    t = np.concatenate([[0.0], theta * h, [h]])
    res = nh.integrate(vanderpol, y0, t, rtol=1.0, atol=1.0, h=h, hmax=h, dense=True)
    assert res.stats["steps"][0] == 1
    step = DOP853(_vdp, 0.0, y0, t_bound=h, first_step=h, max_step=h, rtol=1.0, atol=1.0)
    step.step()
    assert step.t == h
    ref = np.array([step.dense_output()(tt) for tt in t[1:-1]])
    assert np.max(np.abs(res.y[0, 1:-1] - ref)) < 2e-15
    assert np.max(np.abs(res.y[0, -1] - step.y)) < 2e-15


def test_interpolant_error_is_order_eight(oscillator):
    """Error at mid-step of one step of the oscillator against the closed form: halving h
    divides it by ~2^8 (local error of the degree-7 continuous extension)."""
    y0 = np.array([[1.0, 0.0]])
    errs = []
    for h in (1.6, 0.8, 0.4):
        t = np.array([0.0, 0.5 * h, h])
        res = nh.integrate(oscillator, y0, t, params=[1.0], rtol=1.0, atol=1.0, h=h, hmax=h,
                           dense=True)  # fmt: skip
        assert res.stats["steps"][0] == 1
        errs.append(np.max(np.abs(res.y[0, 1] - _oscillator_exact(y0, 1.0, t)[0, 1])))
    ratios = np.array(errs[:-1]) / np.array(errs[1:])
    assert np.all((ratios > 2**8 / 1.5) & (ratios < 2**8 * 1.5)), ratios


def test_backward_in_time(oscillator):
    x0 = np.array([[0.4, -0.9]])
    t = np.linspace(3.0, -5.0, 33)
    res = nh.integrate(oscillator, x0, t, params=[1.1], rtol=1e-11, atol=1e-13, dense=True)
    exact = _oscillator_exact(x0, 1.1, t - 3.0)
    assert np.max(np.abs(res.y - exact)) < 1e-9


def test_bit_identical_across_threads_and_blocks(vanderpol):
    rng = np.random.default_rng(6)
    x0 = rng.uniform(-2.0, 2.0, size=(37, 2))
    t = np.linspace(0.0, 6.0, 25)
    base = nh.integrate(vanderpol, x0, t, dense=True)
    for threads, block in ((2, 8), (1, 5), (2, 64)):
        other = nh.integrate(vanderpol, x0, t, dense=True, threads=threads, block=block)
        assert np.array_equal(base.y, other.y)
        for k in base.stats:
            assert np.array_equal(base.stats[k], other.stats[k]), k
    alone = nh.integrate(vanderpol, x0[17], t, dense=True)
    assert np.array_equal(alone.y[0], base.y[17])


def test_default_is_step_shortening(vanderpol):
    x0 = np.array([[1.2, -0.4]])
    t = np.linspace(0.0, 4.0, 9)
    assert np.array_equal(
        nh.integrate(vanderpol, x0, t).y, nh.integrate(vanderpol, x0, t, dense=False).y
    )


def test_dense_needs_dop853(vanderpol):
    with pytest.raises(ValueError, match="dop853"):
        nh.integrate(vanderpol, [1.0, 0.0], [0.0, 1.0], method="dopri5", dense=True)
    with pytest.raises(ValueError, match="dop853"):
        nh.integrate(vanderpol, [1.0, 0.0], [0.0, 1.0], method="rk4", h=0.1, dense=True)
    with pytest.raises(TypeError, match="dense"):
        nh.integrate(vanderpol, [1.0, 0.0], [0.0, 1.0], dense="yes")


# ----------------------------------------------------------------- events on the extension ----


def _zero_crossings(x0, w, t1):
    """Times in (0, t1] where x = A cos(w t - phi) of the oscillator crosses zero, with the
    sign of the crossing (+1 rising, -1 falling)."""
    phi = np.arctan2(x0[1] / w, x0[0])
    k = np.arange(-2, int(w * t1 / np.pi) + 3)
    t = (np.pi / 2 + phi + np.pi * k) / w
    keep = (t > 0) & (t <= t1)
    sign = np.where(k % 2 == 0, -1, 1)  # cos falls through zero at pi/2, rises at 3 pi/2
    return t[keep], sign[keep]


def test_oscillator_zero_crossings_closed_form(oscillator):
    x, v, _w = oscillator.states[0], oscillator.states[1], oscillator.params[0]
    rng = np.random.default_rng(7)
    x0 = rng.uniform(-1.0, 1.0, size=(4, 2))
    w = 1.3
    events = [(x, 0, False), (x, 1, False), (v, -1, False)]
    res = nh.integrate(oscillator, x0, [0.0, 12.0], params=[w], rtol=1e-11, atol=1e-13,
                       dense=True, events=events)  # fmt: skip
    ev = res.events
    for i in range(len(x0)):
        c = ev.count[i]
        times, which = ev.t[i, :c], ev.which[i, :c]
        assert np.all(np.diff(times) >= 0) and np.all(np.isnan(ev.t[i, c:]))
        exact, sign = _zero_crossings(x0[i], w, 12.0)
        assert np.max(np.abs(times[which == 0] - exact)) < 1e-9
        assert np.max(np.abs(times[which == 1] - exact[sign > 0])) < 1e-9
        # the state at an event is the solution there, and g vanishes to round-off on it
        ys = ev.y[i, :c]
        ref = _oscillator_exact(x0[i : i + 1], w, times)[0]
        assert np.max(np.abs(ys - ref)) < 1e-9
        assert np.max(np.abs(ys[which < 2, 0])) < 1e-14
        assert np.max(np.abs(ys[which == 2, 1])) < 1e-14
        # v falls through zero at the maxima of x (x > 0 there)
        assert np.all(ys[which == 2, 0] > 0)
    assert res.success


def test_terminal_event_stops_only_its_lane(oscillator):
    x = oscillator.states[0]
    # amplitudes 0.5, 1.0, 0.7, 1.2: only lanes 1 and 3 reach x = 0.9
    x0 = np.array([[0.0, 0.5], [0.0, 1.0], [0.0, 0.7], [0.0, 1.2]])
    t = np.linspace(0.0, 6.0, 31)
    plain = nh.integrate(oscillator, x0, t, params=[1.0], dense=True)
    res = nh.integrate(oscillator, x0, t, params=[1.0], dense=True,
                       events=[(x - 0.9, 1, True)])  # fmt: skip
    assert np.array_equal(res.status, [0, 0, 0, 0])
    for i in (0, 2):  # untouched: the events do not change the steps
        assert np.array_equal(res.y[i], plain.y[i])
        assert res.events.count[i] == 0 and res.t_reached[i] == 6.0
    for i in (1, 3):
        te = np.arcsin(0.9 / x0[i, 1])  # x = a sin t
        assert res.events.count[i] == 1
        assert abs(res.events.t[i, 0] - te) < 1e-9
        assert res.t_reached[i] == res.events.t[i, 0]
        before = t <= te
        assert np.array_equal(res.y[i, before], plain.y[i, before])
        assert np.all(np.isnan(res.y[i, ~before]))
        assert abs(res.events.y[i, 0, 0] - 0.9) < 1e-14


def test_leaving_a_chart():
    s1, s2, a, b = sp.symbols("s1 s2 a b")
    chart = 1 - s1**2 - s2**2
    drift = nh.VectorField([s1, s2], [a, b], params=[a, b], domain={"disk chart": chart})
    x0 = np.array([[0.1, -0.2], [0.0, 0.0], [-0.5, 0.3]])
    par = np.array([[1.0, 0.5], [0.2, -0.3], [0.0, 0.0]])  # the last one never leaves
    res = nh.integrate(drift, x0, [0.0, 3.0], params=par, dense=True,
                       events=[(chart, -1, True)])  # fmt: skip
    for i in range(2):  # |x0 + t v| = 1
        p, q = x0[i], par[i]
        A, B, C = q @ q, 2 * p @ q, p @ p - 1
        te = (-B + np.sqrt(B * B - 4 * A * C)) / (2 * A)
        assert abs(res.t_reached[i] - te) < 1e-12 * max(1.0, te)
        assert abs(np.hypot(*res.events.y[i, 0]) - 1.0) < 1e-14
    assert res.events.count[2] == 0 and res.t_reached[2] == 3.0


def test_poincare_section_henon_heiles():
    """Section x = 0, px > 0 of the Henon-Heiles system: the points lie on the section and on
    the energy level, and their times agree with SciPy's DOP853 events."""
    x, y, px, py = sp.symbols("x y px py")
    H = (px**2 + py**2) / 2 + (x**2 + y**2) / 2 + x**2 * y - y**3 / 3
    hh = nh.HamiltonianSystem([x, y], [px, py], H)
    x0 = np.array([[0.0, 0.1, 0.35, 0.1], [0.0, -0.2, 0.3, 0.05]])
    T = 150.0
    res = nh.integrate(hh, x0, [0.0, T], rtol=1e-11, atol=1e-13, dense=True,
                       events=[(x, 1, False)], max_events=200)  # fmt: skip
    f = sp.lambdify([(x, y, px, py)], hh.rhs)
    h = sp.lambdify([(x, y, px, py)], H)
    for i in range(len(x0)):
        c = res.events.count[i]
        assert 10 < c <= 200
        pts = res.events.y[i, :c]
        assert np.max(np.abs(pts[:, 0])) < 1e-14
        assert np.all(pts[:, 2] > 0)
        assert np.max(np.abs(h(pts.T) - h(x0[i]))) < 1e-10

        def section(_t, s):
            return s[0]

        section.direction = 1
        ref = solve_ivp(lambda _t, s: f(s), (0.0, T), x0[i], method="DOP853", rtol=1e-11,
                        atol=1e-13, events=section)  # fmt: skip
        ref_t = ref.t_events[0][ref.t_events[0] > 0]  # SciPy counts g = 0 at t0, nhfast not
        assert len(ref_t) == c
        assert np.max(np.abs(ref_t - res.events.t[i, :c])) < 1e-7


def test_events_bit_identical_across_threads_and_blocks(vanderpol):
    x = vanderpol.states[0]
    rng = np.random.default_rng(8)
    x0 = rng.uniform(-2.0, 2.0, size=(21, 2))
    t = np.linspace(0.0, 8.0, 9)
    kw = {"dense": True, "events": [(x, 0, False), (x - 1.5, 1, True)]}
    base = nh.integrate(vanderpol, x0, t, **kw)
    assert np.all(base.events.count >= 2) and np.any(base.t_reached < 8.0)
    for threads, block in ((2, 4), (1, 64)):
        other = nh.integrate(vanderpol, x0, t, threads=threads, block=block, **kw)
        assert np.array_equal(base.y, other.y, equal_nan=True)
        for k in ("t", "which", "y", "count"):
            a, b = getattr(base.events, k), getattr(other.events, k)
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), k


def test_event_records_beyond_max_events_are_counted(oscillator):
    x = oscillator.states[0]
    res = nh.integrate(oscillator, [1.0, 0.0], [0.0, 20.0], params=[1.0], dense=True,
                       events=[(x, 0, False)], max_events=3)  # fmt: skip
    exact, _ = _zero_crossings(np.array([1.0, 0.0]), 1.0, 20.0)
    assert res.events.count[0] == exact.size > 3
    assert np.max(np.abs(res.events.t[0] - exact[:3])) < 1e-9


def test_event_arguments(oscillator):
    x = oscillator.states[0]
    with pytest.raises(ValueError, match="dense=True"):
        nh.integrate(oscillator, [1.0, 0.0], [0.0, 1.0], params=[1.0], events=[(x, 0, False)])
    with pytest.raises(ValueError, match="direction"):
        nh.integrate(oscillator, [1.0, 0.0], [0.0, 1.0], params=[1.0], dense=True,
                     events=[(x, 2, False)])  # fmt: skip
    with pytest.raises(ValueError, match="observable"):
        nh.integrate(oscillator, [1.0, 0.0], [0.0, 1.0], params=[1.0], dense=True,
                     events=[("nope", 0, False)])  # fmt: skip
    with pytest.raises(ValueError, match="states, parameters"):
        nh.integrate(oscillator, [1.0, 0.0], [0.0, 1.0], params=[1.0], dense=True,
                     events=[(sp.Symbol("zz"), 0, False)])  # fmt: skip
