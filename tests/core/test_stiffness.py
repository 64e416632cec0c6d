"""Stiffness detection of the adaptive explicit pairs (Hairer's test, DOP853/DOPRI5 codes).

After an accepted step, ``h |f(t+h, y1) - f(t+h, Y)| / |y1 - Y|`` (``Y`` the last stage, at
``c = 1``) estimates ``h |lambda|``; 15 estimates above the pair's stability bound (6.1 for
DOP853, 3.25 for DOPRI5) declare the trajectory stiff. Checked here: stiff problems stop
early with status ``"stiff"`` and a message that names the trajectories, the time reached and
an implicit method; nonstiff problems are never flagged, even with the test after every
step, and the check never changes a trajectory it does not stop (bit for bit).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
from nhfast import _abi, _core
from nhfast.errors import IntegrationError, IntegrationWarning
from nhfast.systems import veselova
from nhfast.systems.veselova_body import join_state

STIFF = _abi.LANE["stiff"]
ROBERTSON_K = [0.04, 3e7, 1e4]


@pytest.fixture(scope="module")
def robertson() -> nh.VectorField:
    """Robertson's chemical kinetics (Hairer & Wanner, Solving ODEs II, IV.1 (1.4))."""
    y1, y2, y3, k1, k2, k3 = sp.symbols("y1 y2 y3 k1 k2 k3")
    rhs = [-k1 * y1 + k3 * y2 * y3, k1 * y1 - k3 * y2 * y3 - k2 * y2**2, k2 * y2**2]
    return nh.VectorField(states=[y1, y2, y3], rhs=rhs, params=[k1, k2, k3], name="robertson")


@pytest.fixture(scope="module")
def relaxation() -> nh.VectorField:
    """y' = -lam (y - cos t): stiff for large lam (Hairer & Wanner II, IV.1 (1.1))."""
    y, lam, t = sp.symbols("y lam t")
    return nh.VectorField(states=[y], rhs=[-lam * (y - sp.cos(t))], params=[lam], time=t)


def _cpu(fn):
    t0 = time.process_time()
    out = fn()
    return out, time.process_time() - t0


@pytest.mark.parametrize("method", ["dop853", "dopri5"])
def test_robertson_fails_fast_as_stiff(robertson, method):
    robertson.compile()  # compile outside the timed call
    x0 = [1.0, 0.0, 0.0]
    t = [0.0, 1e5]

    def run():
        with pytest.raises(IntegrationError) as info:
            nh.integrate(robertson, x0, t, method=method, params=ROBERTSON_K)
        return info.value

    err, cpu = _cpu(run)
    assert cpu < 0.5  # before the test: ~37 s of CPU to "maximum number of steps reached"
    assert list(err.status) == [STIFF]
    msg = str(err)
    assert "stiff" in msg and "#0 at t=" in msg and "Radau" in msg and "BDF" in msg
    assert "stiffness_check=False" in msg
    res = err.result
    # the time reached is early in the span, past the initial transient (~1e-3)
    assert 1e-3 < res.t_reached[0] < 1e3
    assert f"t={res.t_reached[0]:.6g}" in msg
    # stopped at Hairer's NSTIFF = 1000th step plus 14 more positive tests, not at 10^7 steps
    assert 1000 + 14 <= res.stats["steps"][0] < 5000
    assert np.array_equal(res.y[0, 0], x0) and np.isnan(res.y[0, 1]).all()


def test_robertson_without_the_check_runs_into_the_budget(robertson):
    """The check is what stops the run: off, the same call uses up its step budget."""
    with pytest.raises(IntegrationError, match="maximum number of steps") as info:
        nh.integrate(
            robertson,
            [1.0, 0.0, 0.0],
            [0.0, 1e5],
            params=ROBERTSON_K,
            max_steps=20_000,
            stiffness_check=False,
        )
    assert list(info.value.status) == [_abi.LANE["max_steps"]]


@pytest.mark.parametrize("method", ["dop853", "dopri5"])
def test_stiff_linear_problem_is_flagged_only_where_stiff(relaxation, method):
    """Lanes with lam = 1e6 are stiff, lanes with lam = 1 are not: only the former stop, and
    the others are bit-identical to a run without the check."""
    lam = np.array([[1.0], [1e6], [1.0], [1e6], [2.0]])
    x0 = np.zeros((5, 1))
    t = np.linspace(0.0, 2.0, 5)
    kw = dict(method=method, params=lam, rtol=1e-8, atol=1e-10, threads=2, block=2)
    with pytest.warns(IntegrationWarning, match="stiff") as rec:
        res = nh.integrate(relaxation, x0, t, keep_failed=True, **kw)
    assert list(res.status) == [0, STIFF, 0, STIFF, 0]
    msg = str(rec[0].message)
    assert "2 of 5 trajectories failed" in msg and "#1 at t=" in msg and "#3 at t=" in msg
    assert np.all(res.t_reached[[1, 3]] < 0.01)  # stopped early, at ~1e3 steps of ~6e-6
    assert np.all(res.t_reached[[0, 2, 4]] == t[-1])
    ref = nh.integrate(
        relaxation, x0[[0, 2, 4]], t, stiffness_check=False, **kw | {"params": lam[[0, 2, 4]]}
    )
    assert np.array_equal(res.y[[0, 2, 4]], ref.y)
    for k in res.stats:
        assert np.array_equal(res.stats[k][[0, 2, 4]], ref.stats[k])
    # lam = 1: closed form lam (lam cos t + sin t) / (1 + lam^2) - lam^2 e^-(lam t) / (1 + lam^2)
    exact = (np.cos(t) + np.sin(t)) / 2 - np.exp(-t) / 2
    assert np.allclose(res.y[0, :, 0], exact, rtol=0, atol=1e-7)


def _batch(system, x0, t, method, params, nstiff, rtol, atol):
    """Call the core directly (nstiff=1: the test after every accepted step)."""
    cs = system.compile()
    cap, ctx = cs.kernels["rhs"]
    x = np.ascontiguousarray(np.atleast_2d(x0), dtype=float)
    ntraj, n = x.shape
    par = np.ascontiguousarray(np.atleast_2d(params if params is not None else np.empty(0)))
    par = par.reshape(par.shape[0], system.n_params)
    t = np.asarray(t, dtype=float)
    y = np.empty((ntraj, t.size, n))
    status = np.zeros(ntraj, dtype=np.int32)
    stats = np.zeros((ntraj, _core.NSTATS), dtype=np.int64)
    t_end = np.zeros(ntraj)
    _core.integrate_batch(
        cap, ctx, n, system.n_params, 0, _core.METHOD[method], t, x, par, y, status, stats,
        rtol, atol, 0.0, 0.0, 10**7, 1e-14, 100, 1, 64, nstiff=nstiff, t_end=t_end,
    )  # fmt: skip
    return y, status, stats, t_end


def _nonstiff_cases(oscillator, kepler, sleigh):
    rng = np.random.default_rng(7)
    e = 0.9  # eccentric Kepler orbit: steps vary by orders of magnitude
    kep0 = np.array([[1 - e, 0.0, 0.0, np.sqrt((1 + e) / (1 - e))], [1.0, 0.0, 0.0, 1.0]])
    g = rng.normal(size=3)
    g /= np.linalg.norm(g)
    m = rng.normal(size=3)
    m -= m.dot(g) * g
    ves = veselova(3, form="structured")
    return [
        (oscillator, rng.normal(size=(4, 2)), np.linspace(0, 200, 11), [[3.0]]),
        (kepler, kep0, np.linspace(0, 40 * np.pi, 11), None),
        (sleigh, rng.normal(size=(3, 5)), np.linspace(0, 50, 11), [[0.5, 1.0, 0.3]]),
        (ves, join_state(g, m), np.linspace(0, 30, 11), [[1.0, 1.7, 2.4]]),
    ]


@pytest.mark.parametrize("method", ["dop853", "dopri5"])
@pytest.mark.parametrize("tol", [1e-3, 1e-6, 1e-11])
def test_nonstiff_systems_are_never_flagged(oscillator, kepler, sleigh, method, tol):
    """Oscillator, eccentric Kepler, sleigh, Veselova body: with the test after every accepted
    step no lane is flagged, and the outputs and counters equal those without the test."""
    for system, x0, t, params in _nonstiff_cases(oscillator, kepler, sleigh):
        on = _batch(system, x0, t, method, params, 1, tol, tol * 1e-2)
        off = _batch(system, x0, t, method, params, 0, tol, tol * 1e-2)
        # (at rtol 1e-3 dopri5 lets the circular Kepler orbit spiral into the singularity, a
        # step underflow as in scipy's RK45: a real failure, but not stiffness)
        assert STIFF not in on[1], (system.name, on[1])
        assert on[2][:, 0].min() >= 10  # each lane tested after each of >= 10 accepted steps
        for a, b in zip(on, off, strict=True):
            assert np.array_equal(a, b, equal_nan=True), system.name
        ok = on[1] == 0
        assert ok.sum() >= len(ok) - 1 and np.all(on[3][ok] == t[-1])


def test_public_default_is_bit_identical_to_off(kepler):
    """Through nhfast.integrate (Hairer's NSTIFF = 1000): a long nonstiff run with more than
    1000 steps per lane is unflagged and bit-identical to stiffness_check=False."""
    x0 = np.array([[0.1, 0.0, 0.0, np.sqrt(19.0)], [1.0, 0.0, 0.0, 1.0]])
    t = np.linspace(0, 200 * np.pi, 7)
    on = nh.integrate(kepler, x0, t, rtol=1e-11, atol=1e-13)
    off = nh.integrate(kepler, x0, t, rtol=1e-11, atol=1e-13, stiffness_check=False)
    assert on.stats["steps"].min() > 2000
    assert np.array_equal(on.y, off.y) and on.success
    for k in on.stats:
        assert np.array_equal(on.stats[k], off.stats[k])
    for k in on.observables:
        assert np.array_equal(on.observables[k], off.observables[k])


def test_fixed_step_methods_ignore_the_check(relaxation):
    """The test belongs to the explicit pairs; rk4 with a stable step is untouched by it."""
    t = np.linspace(0.0, 0.01, 3)
    kw = dict(method="rk4", h=1e-6, params=[1e6])
    a = nh.integrate(relaxation, [0.0], t, **kw)
    b = nh.integrate(relaxation, [0.0], t, stiffness_check=False, **kw)
    assert a.success and np.array_equal(a.y, b.y)


@pytest.mark.parametrize("bad", [1, "yes", None, 1.0])
def test_stiffness_check_must_be_a_bool(oscillator, bad):
    with pytest.raises(TypeError, match="stiffness_check"):
        nh.integrate(oscillator, [1.0, 0.0], [0.0, 1.0], params=[1.0], stiffness_check=bad)


def test_core_checks_nstiff_and_t_end(oscillator):
    cs = oscillator.compile()
    cap, ctx = cs.kernels["rhs"]
    t = np.array([0.0, 1.0])
    x0 = np.ones((2, 2))
    y = np.empty((2, 2, 2))
    status = np.zeros(2, dtype=np.int32)
    stats = np.zeros((2, _core.NSTATS), dtype=np.int64)
    args = (cap, ctx, 2, 1, 1, _core.METHOD["dop853"], t, x0, np.ones((1, 1)), y, status, stats)
    args += (1e-6, 1e-9, 0.0, 0.0, 1000, 1e-12, 50)
    with pytest.raises(ValueError, match="nstiff"):
        _core.integrate_batch(*args, nstiff=-1)
    with pytest.raises(ValueError, match="t_end"):
        _core.integrate_batch(*args, t_end=np.zeros(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _core.integrate_batch(*args, nstiff=1, t_end=np.zeros(2))
    assert (status == 0).all()
