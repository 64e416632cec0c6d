"""The Taylor method of the core (``method="taylor"``) driven by hand-written Taylor kernels.

Kernels with known coefficient recurrences (harmonic oscillator, exponential growth, the
blow-up y' = y^2) are compiled with :func:`nhfast._jit.build`; results are compared with the
closed-form solutions, the step sizes with Jorba & Zou's rule, fixed-step errors with the
order of the series. Every kernel checks its arguments like a generated one.
"""

from __future__ import annotations

import _thread
import math
import signal
import threading

import numpy as np
import pytest

import nhfast as nh
from nhfast import _abi, _core, _jit
from nhfast._kernels import CompiledSystem

HEAD = """
#include "nh_abi.h"
#include <math.h>
#define N {n}
static const int64_t nh_info_data[NH_INFO_LEN] = {{NH_ABI_VERSION, N, {npar}, 0,
                                                   NH_HAS_TAYLOR, 0}};
NH_EXPORT const int64_t *nh_info(void) {{ return nh_info_data; }}
#define C(k, i) coef[((k) * N + (i)) * ld + l]
NH_EXPORT int nh_taylor(void *ctx, const double *t, const double *x, const double *par,
                        double *coef, int64_t order, int64_t nl, int64_t ld) {{
    (void)ctx; (void)t; (void)par;
    if (nl < 0 || ld < nl) return NH_ERR_SIZE;
    if (order < 1 || order > NH_TAYLOR_MAX_ORDER) return NH_ERR_ARG;
    for (int64_t l = 0; l < nl; ++l) {{
        for (int i = 0; i < N; ++i) C(0, i) = x[i * ld + l];
        for (int64_t k = 0; k < order; ++k) {{
{body}
        }}
    }}
    return NH_OK;
}}
/* event functions: g0 = x0, g1 = x1 (plain kernel ABI) */
NH_EXPORT int nh_event(void *ctx, const double *t, const double *x, const double *par,
                       double *out, int64_t nl, int64_t ld) {{
    (void)ctx; (void)t; (void)par;
    if (nl < 0 || ld < nl) return NH_ERR_SIZE;
    for (int64_t l = 0; l < nl; ++l) {{
        out[l] = x[l];
        out[ld + l] = x[(N > 1) * ld + l];
    }}
    return NH_OK;
}}
"""

#: x' = v, v' = -w^2 x (par[0] = w)
OSC = """
            const double w = par[l];
            C(k + 1, 0) = C(k, 1) / (double)(k + 1);
            C(k + 1, 1) = -w * w * C(k, 0) / (double)(k + 1);"""
#: y' = a y (par[0] = a)
EXP = """
            C(k + 1, 0) = par[l] * C(k, 0) / (double)(k + 1);"""
#: y' = y^2: (y^2)^[k] = sum_j y^[j] y^[k-j]
BLOWUP = """
            double s = 0.0;
            for (int64_t j = 0; j <= k; ++j) s += C(j, 0) * C(k - j, 0);
            C(k + 1, 0) = s / (double)(k + 1);"""


def kernel(name: str, body: str, n: int, npar: int) -> tuple[object, object]:
    """(Taylor capsule, event capsule) of a hand-written kernel library."""
    lib, _ = _jit.build(HEAD.format(n=n, npar=npar, body=body), label=f"test taylor {name}")
    assert lib.info[_abi.INFO["flags"]] == _abi.HAS["taylor"]
    return (
        _core.taylor_capsule(lib.address("nh_taylor")),
        _core.kernel_capsule(lib.address("nh_event")),
    )


@pytest.fixture(scope="module")
def osc():
    return kernel("oscillator", OSC, 2, 1)


@pytest.fixture(scope="module")
def expo():
    return kernel("exponential", EXP, 1, 1)


@pytest.fixture(scope="module")
def blowup():
    return kernel("blow-up", BLOWUP, 1, 0)


def run(cap, x0, t, par, *, rtol=1e-12, atol=1e-12, h=0.0, hmax=0.0, order=0, threads=1,
        block=64, max_steps=10**7, events=None, dense=False, order_auto=0):  # fmt: skip
    """_core.integrate_batch with the Taylor method; returns (y, status, stats, t_end)."""
    x0 = np.ascontiguousarray(np.atleast_2d(x0), dtype=float)
    t = np.ascontiguousarray(t, dtype=float)
    par = np.ascontiguousarray(par, dtype=float)  # (1 or ntraj, npar)
    ntraj, n = x0.shape
    y = np.empty((ntraj, t.size, n))
    status = np.zeros(ntraj, dtype=np.int32)
    stats = np.zeros((ntraj, _core.NSTATS), dtype=np.int64)
    t_end = np.zeros(ntraj)
    _core.integrate_batch(
        None, None, n, par.shape[1], 0, _abi.METHODS["taylor"], t, x0, par, y, status, stats,
        rtol, atol, h, hmax, max_steps, 1e-14, 100, threads, block, t_end=t_end,
        dense=dense, events=events, taylor=cap, order=order, order_auto=order_auto,
    )  # fmt: skip
    return y, status, stats, t_end


def osc_exact(x0, w, t):
    x0 = np.atleast_2d(x0)
    w = np.asarray(w).reshape(-1, 1)
    c, s = np.cos(w * t), np.sin(w * t)
    x = x0[:, :1] * c + x0[:, 1:] / w * s
    v = -x0[:, :1] * w * s + x0[:, 1:] * c
    return np.stack([x, v], axis=-1)


@pytest.mark.parametrize("tol", [1e-9, 1e-12, 1e-15])
def test_oscillator_error_follows_the_tolerance(osc, tol):
    """Final-state error of a few tol over ~3 periods; the order is heyoka's rule."""
    x0 = np.array([[1.0, 0.0], [0.3, -0.7], [2.0, 1.0]])
    w = np.array([1.0, 1.3, 0.7])
    t = np.linspace(0.0, 20.0, 7)
    y, status, stats, t_end = run(osc[0], x0, t, w[:, None], rtol=tol, atol=tol)
    assert np.all(status == 0) and np.all(t_end == 20.0)
    err = np.abs(y - osc_exact(x0, w, t)).max()
    scale = np.abs(x0).max() * 2
    assert err <= 20 * tol * scale, err
    assert err > 0.0
    # one kernel call per step, counted as one evaluation
    assert np.all(stats[:, 0] == stats[:, 1]) and np.all(stats[:, 2] == 0)


def test_order_from_the_tolerance_and_steps(expo):
    """y' = 0 has all-zero coefficients: one step lands on the final time. For y' = a y the
    step is Jorba & Zou's rule over the last three orders: from |y^[k]| = |a|^k |y| / k!,
    min over k = p-2, p-1, p (Jorba & Zou take p-1, p; see csrc/taylor.c, jz_steps)."""
    t = np.array([0.0, 3.0])
    y, status, stats, _ = run(expo[0], [[1.0]], t, [[0.0]])
    assert status[0] == 0 and stats[0, 0] == 1 and y[0, 1, 0] == 1.0
    for tol in (1e-9, 1e-15):
        p = max(2, math.ceil(-0.5 * math.log(tol) + 1))
        a = 1e-3  # relative regime (|y| = 1 >> atol); one step well inside [0, 3]?
        # |y^[k]| = a^k/k!, rho_k = (k!)^(1/k) / a; h = min_k rho_k e^-2 e^-0.7/(p-1)
        rho = min(math.factorial(k) ** (1 / k) / a for k in (p - 2, p - 1, p))
        h = rho * math.exp(-2) * math.exp(-0.7 / (p - 1))
        # 10.5 h: 10 steps of h and a shorter last one; the rule over p-1, p alone (h about
        # 6 % longer) takes 10 steps
        t = np.array([0.0, 10.5 * h])
        y, status, stats, _ = run(expo[0], [[1.0]], t, [[a]], rtol=tol, atol=tol)
        assert status[0] == 0 and stats[0, 0] == 11
        assert abs(y[0, 1, 0] - math.exp(a * 10.5 * h)) <= 4 * tol * math.exp(a * 10.5 * h)


def test_order_auto_at_the_tolerance_order_is_the_tolerance_rule(osc):
    """order_auto = p0 (the tolerance's order) is the rule at p0, bit for bit."""
    x0 = np.array([[1.0, 0.0], [0.3, -0.7], [2.0, 1.0]])
    t = np.linspace(0.0, 20.0, 9)
    for tol in (1e-9, 1e-13):
        p0 = _core.taylor_order(0, tol, tol)
        a = run(osc[0], x0, t, [[1.3]], rtol=tol, atol=tol)
        b = run(osc[0], x0, t, [[1.3]], rtol=tol, atol=tol, order_auto=p0)
        assert all(np.array_equal(u, v) for u, v in zip(a, b, strict=True))


def test_order_auto_steps_and_accuracy(osc, expo):
    """Above p0 the radius shrinks by exp(-2 (p0 + 1) / p) (the rule's truncation error at
    p0 + 1): the step of y' = a y by that rule, and on the oscillator fewer, longer steps
    with an error at most that of the rule at p0 (plus round-off)."""
    tol = 1e-10
    p0 = _core.taylor_order(0, tol, tol)
    for p in (p0 + 2, 2 * p0):
        a = 1e-3  # relative regime: |y^[k]| = a^k / k!
        rho = min(math.factorial(k) ** (1 / k) / a for k in (p - 2, p - 1, p))
        h = rho * math.exp(-2 * (p0 + 1) / p) * math.exp(-0.7 / (p - 1))
        t = np.array([0.0, 6.5 * h])  # six steps of h and a shorter last one
        y, status, stats, _ = run(expo[0], [[1.0]], t, [[a]], rtol=tol, atol=tol, order_auto=p)
        assert status[0] == 0 and stats[0, 0] == 7
        assert abs(y[0, 1, 0] - math.exp(a * 6.5 * h)) <= 4 * tol * math.exp(a * 6.5 * h)
    x0 = np.array([[1.0, 0.0], [0.3, -0.7], [2.0, 1.0]])
    t = np.array([0.0, 60.0])
    exact = osc_exact(x0, [1.3], t)
    y0, _, s0, _ = run(osc[0], x0, t, [[1.3]], rtol=tol, atol=tol)
    err0 = np.abs(y0 - exact).max()
    for p in (p0 + 2, 2 * p0):
        y, status, stats, _ = run(osc[0], x0, t, [[1.3]], rtol=tol, atol=tol, order_auto=p)
        assert np.all(status == 0) and np.all(stats[:, 0] < s0[:, 0])
        assert np.abs(y - exact).max() <= err0 + 1e-13


@pytest.mark.parametrize("p", [2, 4, 6])
def test_fixed_step_convergence_order(osc, p):
    """Fixed order p, fixed step h: the error falls by 2^p when h halves."""
    t = np.array([0.0, 2.0])
    errs = []
    for h in (0.1, 0.05, 0.025):
        y, status, stats, _ = run(osc[0], [[1.0, 0.0]], t, [[1.0]], h=h, order=p)
        assert status[0] == 0 and stats[0, 0] == round(2.0 / h)
        errs.append(np.abs(y[0, 1] - osc_exact([[1.0, 0.0]], [1.0], 2.0)[0, 0]).max())
    ratios = [errs[0] / errs[1], errs[1] / errs[2]]
    for r in ratios:
        assert abs(math.log2(r) - p) < 0.35, (p, errs, ratios)


def test_outputs_come_from_the_series(osc):
    """Many output times change no step: each output equals the closed form to tol, the
    final state and the step count are bit-identical to a run with only the end point."""
    x0 = np.array([[1.0, 0.5]])
    t_many = np.linspace(0.0, 10.0, 401)
    y1, s1, st1, _ = run(osc[0], x0, t_many, [[1.2]])
    y2, s2, st2, _ = run(osc[0], x0, t_many[[0, -1]], [[1.2]])
    assert s1[0] == s2[0] == 0
    assert np.array_equal(y1[0, -1], y2[0, -1]) and np.array_equal(st1, st2)
    assert st1[0, 0] < 100  # far fewer steps than output times
    assert np.abs(y1 - osc_exact(x0, [1.2], t_many)).max() < 2e-11


def test_backward_in_time(osc):
    t = np.array([0.0, -5.0, -7.5])
    y, status, _, t_end = run(osc[0], [[1.0, 0.0]], t, [[1.0]])
    assert status[0] == 0 and t_end[0] == -7.5
    assert np.abs(y - osc_exact([[1.0, 0.0]], [1.0], t)).max() < 1e-11


def test_hmax_is_honoured(osc):
    t = np.array([0.0, 10.0])
    _, status, stats, _ = run(osc[0], [[1.0, 0.0]], t, [[1.0]], hmax=0.25)
    assert status[0] == 0 and stats[0, 0] == 40


def test_blowup_stops_its_lane_with_a_status(blowup):
    """y' = y^2, y(0) = 1 blows up at t = 1: the lane fails (steps shrink to nothing or the
    series overflows) near t = 1; the other lane (y0 = 0.1, blow-up at 10) finishes."""
    t = np.array([0.0, 2.0])
    y, status, _, t_end = run(blowup[0], [[1.0], [0.1]], t, np.zeros((1, 0)))
    assert status[0] in (
        _abi.LANE["step_underflow"],
        _abi.LANE["nonfinite"],
        _abi.LANE["max_steps"],
    )
    # the numerical solution's own blow-up time: 1 to the tolerance
    assert abs(t_end[0] - 1.0) < 1e-9 and np.isnan(y[0, 1, 0])
    assert status[1] == 0 and abs(y[1, 1, 0] - 0.1 / (1 - 0.2)) < 1e-12 * 0.125


def test_nonfinite_lanes_in_whole_vectors(expo, blowup):
    """Lanes fail as non-finite in whole vectors of lanes as alone: series whose
    coefficients overflow (y' = y^2 from 1e300: y^[1] = 1e600) at their first step, and a
    fixed step whose sum overflows (y' = y, h = 1e200); the other lanes of the block go on."""
    nonfinite = _abi.LANE["nonfinite"]
    x0 = np.array([[1e300]] * 4 + [[0.1]] * 5)
    y, status, _, t_end = run(blowup[0], x0, [0.0, 2.0], np.zeros((1, 0)))
    assert np.all(status[:4] == nonfinite) and np.all(t_end[:4] == 0.0)
    assert np.all(np.isnan(y[:4, 1])) and np.all(status[4:] == 0)
    assert np.allclose(y[4:, 1, 0], 0.1 / (1 - 0.2), rtol=1e-12, atol=0)
    for lanes in (1, 9):
        y, status, _, t_end = run(expo[0], np.ones((lanes, 1)), [0.0, 1e201], [[1.0]], h=1e200,
                                  order=4)  # fmt: skip
        assert np.all(status == nonfinite) and np.all(t_end == 0.0)
        assert np.all(np.isnan(y[:, 1]))


@pytest.mark.parametrize("lanes", [1, 9])
def test_max_steps(osc, lanes):
    """Every lane stops at the step budget, alone and in whole vectors of lanes."""
    x0 = np.column_stack([np.linspace(0.5, 1.5, lanes), np.zeros(lanes)])
    _, status, stats, t_end = run(osc[0], x0, [0.0, 100.0], [[1.0]], max_steps=5)
    assert np.all(status == _abi.LANE["max_steps"]) and np.all(stats[:, 0] == 5)
    assert np.all(t_end < 100.0)


@pytest.mark.parametrize("lanes", [1, 9])
def test_landing_on_the_final_time(expo, lanes):
    """A step lands on the final time only within 1e-12 of its length, in whole vectors of
    lanes as alone: with the fixed step h a span of h (1 + 5e-10) takes two steps, a span of
    h (1 + 5e-13) one."""
    h = 0.25
    x0 = np.ones((lanes, 1))
    for stretch, steps in [(5e-10, 2), (5e-13, 1)]:
        t1 = h * (1 + stretch)
        y, status, stats, t_end = run(expo[0], x0, [0.0, t1], [[0.3]], h=h, order=12)
        assert np.all(status == 0) and np.all(stats[:, 0] == steps) and np.all(t_end == t1)
        assert np.allclose(y[:, 1, 0], np.exp(0.3 * t1), rtol=1e-14, atol=0)


def _events(ntraj, direction, terminal, cap=64):
    rec = (
        np.full((ntraj, cap), np.nan),
        np.full((ntraj, cap), -1, dtype=np.int32),
        np.full((ntraj, cap, 2), np.nan),
        np.zeros(ntraj, dtype=np.int64),
    )
    return np.array(direction, dtype=np.int32), np.array(terminal, dtype=np.int32), rec


def test_events_on_the_series(osc):
    """x = cos t crosses zero at pi/2 + k pi (either way); v = -sin t rises through zero at
    pi and 3 pi (direction +1: not at 2 pi, where it falls)."""
    direction, terminal, rec = _events(1, [0, 1], [0, 0])
    ev = (osc[1], None, direction, terminal, *rec)
    y, status, _, _ = run(osc[0], [[1.0, 0.0]], [0.0, 10.0], [[1.0]], events=ev)
    t_ev, which, y_ev, count = rec
    assert status[0] == 0
    x_roots = [math.pi / 2 + k * math.pi for k in range(3)]  # 7 pi / 2 > 10
    v_rising = [math.pi, 3 * math.pi]  # -sin t: < 0 on (0, pi), > 0 on (pi, 2 pi)
    want = sorted([(r, 0) for r in x_roots] + [(r, 1) for r in v_rising])
    assert count[0] == len(want)
    got = list(zip(t_ev[0, : count[0]], which[0, : count[0]], strict=True))
    for (tg, jg), (tw, jw) in zip(got, want, strict=True):
        assert jg == jw and abs(tg - tw) < 1e-12
    # states at the events from the series: the zero component is ~0, the other +-1
    for k in range(count[0]):
        assert abs(y_ev[0, k, which[0, k]]) < 1e-12


def test_terminal_event_stops_its_own_lane(osc):
    """A falling zero of x, terminal: the lane with x0 = 1 stops at pi/2; the lane starting
    at x0 = -1 rises first (falls only at 3 pi / 2); the output rows after the stop are NaN."""
    direction, terminal, rec = _events(2, [-1, 1], [1, 0])
    ev = (osc[1], None, direction, terminal, *rec)
    t = np.array([0.0, 1.0, 2.0, 4.0, 6.0])
    y, status, _, t_end = run(osc[0], [[1.0, 0.0], [-1.0, 0.0]], t, [[1.0]], events=ev)
    assert np.all(status == 0)
    assert abs(t_end[0] - math.pi / 2) < 1e-12 and abs(t_end[1] - 1.5 * math.pi) < 1e-12
    assert np.all(np.isnan(y[0, 2:])) and np.all(np.isfinite(y[0, :2]))
    assert np.all(np.isnan(y[1, 4:])) and np.all(np.isfinite(y[1, :4]))
    assert abs(y[0, 1, 0] - math.cos(1.0)) < 1e-12


def test_bit_identical_across_threads_and_blocks(osc):
    rng = np.random.default_rng(7)
    x0 = rng.normal(size=(150, 2))
    w = rng.uniform(0.5, 2.0, size=(150, 1))
    t = np.linspace(0.0, 5.0, 11)
    ref = None
    for threads, block in [(1, 64), (2, 64), (1, 1), (2, 3), (1, 3)]:
        out = run(osc[0], x0, t, w, rtol=1e-10, atol=1e-10, threads=threads, block=block)
        if ref is None:
            ref = out
            continue
        for a, b in zip(ref, out, strict=True):
            assert np.array_equal(a, b)


def test_interrupt_stops_a_long_run(osc):
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            # ~1e12 steps; the step budget ends the run (a failing test, no hang) if the
            # interrupt never arrives
            run(osc[0], np.ones((4, 2)), [0.0, 1e12], [[1.0]], max_steps=3 * 10**7)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, old)
    y, status, _, _ = run(osc[0], [[1.0, 0.0]], [0.0, 1.0], [[1.0]])  # still usable
    assert status[0] == 0


def test_bad_order_and_missing_kernel(osc):
    with pytest.raises(ValueError, match="order"):
        run(osc[0], [[1.0, 0.0]], [0.0, 1.0], [[1.0]], order=_abi.TAYLOR_MAX_ORDER + 1)
    with pytest.raises(ValueError, match="order"):
        run(osc[0], [[1.0, 0.0]], [0.0, 1.0], [[1.0]], order=-1)
    with pytest.raises(ValueError, match="Taylor kernel"):
        run(None, [[1.0, 0.0]], [0.0, 1.0], [[1.0]])
    with pytest.raises(TypeError, match="nh_taylor_fn"):
        run(osc[1], [[1.0, 0.0]], [0.0, 1.0], [[1.0]])  # a plain kernel capsule


@pytest.fixture
def oscillator_field(osc, monkeypatch):
    """A VectorField whose compile_taylor (the coordinator's) returns the hand-written kernel."""
    import sympy as sp

    x, v, w = sp.symbols("x v w")
    field = nh.VectorField([x, v], [v, -(w**2) * x], params=[w], name="taylor oscillator")
    cs = CompiledSystem(
        backend="c", kernels={"taylor": (osc[0], None)}, n_out={"taylor": 2}, n_state=2,
        params=(w,), flags=_abi.HAS["taylor"],
    )  # fmt: skip
    monkeypatch.setattr(type(field), "compile_taylor", lambda self, order=None: cs, raising=False)
    return field


def test_integrate_front_end(oscillator_field):
    t = np.linspace(0.0, 6.0, 13)
    res = nh.integrate(oscillator_field, [1.0, 0.0], t, method="taylor", params=[1.0],
                       rtol=1e-13, atol=1e-13, observables=False)  # fmt: skip
    assert res.success and res.method == "taylor"
    assert np.abs(res.y - osc_exact([[1.0, 0.0]], [1.0], t)).max() < 1e-12
    fixed = nh.integrate(oscillator_field, [1.0, 0.0], t, method="taylor", params=[1.0],
                         order=4, h=0.5, observables=False)  # fmt: skip
    assert fixed.stats["steps"][0] == 12
    ev = nh.integrate(oscillator_field, [1.0, 0.0], t, method="taylor", params=[1.0],
                      events=[(sp_x(oscillator_field), -1, True)], observables=False)  # fmt: skip
    assert abs(ev.t_reached[0] - math.pi / 2) < 1e-11
    # dense is accepted: the outputs come from the series either way
    dense = nh.integrate(oscillator_field, [1.0, 0.0], t, method="taylor", params=[1.0],
                         rtol=1e-13, atol=1e-13, observables=False, dense=True)  # fmt: skip
    assert np.array_equal(dense.y, res.y)


def test_integrate_needs_taylor_kernels():
    class NoTaylor(nh.VectorField):
        compile_taylor = None

    import sympy as sp

    x = sp.Symbol("x")
    with pytest.raises(TypeError, match="Taylor"):
        nh.integrate(NoTaylor([x], [-x], name="no taylor"), [1.0], [0.0, 1.0], method="taylor")


def sp_x(field):
    return field.states[0]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"order": 0}, "order"),
        ({"order": 101}, "order"),
        ({"order": 2.5}, "order"),
        ({"order": True}, "order"),
    ],
)
def test_integrate_rejects_bad_order(oscillator_field, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        nh.integrate(oscillator_field, [1.0, 0.0], [0.0, 1.0], method="taylor", params=[1.0],
                     **kwargs)  # fmt: skip


def test_order_only_for_taylor(oscillator_field):
    with pytest.raises(ValueError, match="order"):
        nh.integrate(oscillator_field, [1.0, 0.0], [0.0, 1.0], params=[1.0], order=5)
