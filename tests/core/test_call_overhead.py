"""One trajectory costs one trajectory: no lane padding, fast input checks, same results.

Functional tests only (timings are in ``benchmarks/bench_call_overhead.py``): the driver calls
the kernels for the block's own lanes (not a multiple of 8), a trajectory alone equals the same
trajectory in any batch and block bit for bit, the cached input checks decide without running
the system's own checks when every value passes, and every bad input still gets the message
of the system's own check.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import nhfast as nh
from nhfast import _core, _validate
from nhfast.integrate import METHODS, input_checks


class LaneRecorder:
    """A NumPy-backend kernel of x' = -x that records the lanes of each call."""

    nin, npar, nout = 1, 0, 1

    def __init__(self) -> None:
        self.error = None
        self.calls: list[tuple[int, int]] = []

    def __call__(self, t, x, par, out, nl, ld) -> None:
        self.calls.append((nl, ld))
        xa, oa = np.asarray(x), np.asarray(out)
        oa[:nl] = -xa[:nl]


def _run_recorded(ntraj: int, block: int, method: str) -> tuple[LaneRecorder, np.ndarray]:
    rec = LaneRecorder()
    t = np.array([0.0, 0.5, 1.0])
    x0 = np.linspace(1.0, 2.0, ntraj).reshape(ntraj, 1)
    par = np.zeros((1, 0))
    y = np.empty((ntraj, t.size, 1))
    status = np.zeros(ntraj, dtype=np.int32)
    stats = np.zeros((ntraj, _core.NSTATS), dtype=np.int64)
    _core.integrate_batch(
        _core.python_kernel_capsule(), rec, 1, 0, 0, METHODS[method], t, x0, par, y, status,
        stats, 1e-8, 1e-10, 0.1, 0.0, 10_000, 1e-14, 100, 1, block,
    )  # fmt: skip
    assert np.all(status == 0)
    return rec, y


@pytest.mark.parametrize("method", ["rk4", "dop853", "gauss4"])
def test_single_trajectory_evaluates_one_lane(method):
    """The kernel is asked for 1 lane (the SoA stride stays padded to 8), never for 8."""
    rec, y = _run_recorded(1, 64, method)
    assert rec.calls and {nl for nl, _ in rec.calls} == {1}
    assert {ld for _, ld in rec.calls} == {8}
    # x' = -x: the solution is x0 exp(-t)
    np.testing.assert_allclose(y[0, :, 0], np.exp(-np.array([0.0, 0.5, 1.0])), rtol=1e-5)


@pytest.mark.parametrize("ntraj, block", [(3, 64), (10, 3), (20, 9)])
def test_block_evaluates_its_own_lanes(ntraj, block):
    """A block of w = min(block, ntraj) slots calls the kernels for w lanes (not w rounded up
    to a multiple of 8); the stride is the rounded width."""
    rec, _ = _run_recorded(ntraj, block, "rk4")
    w = min(block, ntraj)
    assert {nl for nl, _ in rec.calls} == {w}
    assert {ld for _, ld in rec.calls} == {-(-w // 8) * 8}


@pytest.mark.parametrize(
    "method, kw",
    [
        ("dop853", {"h": 0.02}),
        ("dopri5", {"h": 0.02}),
        ("rk4", {"h": 0.02}),
        ("gauss4", {"h": 0.02}),
        ("leapfrog", {"h": 0.02}),
        # adaptive Taylor at an odd order (13, from rtol 1e-10) and an even one: the series
        # summed in vectors of lanes and lane by lane (csrc/taylor.c, horner_block/_lane)
        ("taylor", {}),
        ("taylor", {"order": 12}),
    ],
)
def test_alone_equals_batch_for_every_block(kepler, method, kw):
    """A trajectory alone equals itself inside batches with blocks of 1..9 and 64 lanes (tail
    blocks and blocks narrower than a chunk included), bit for bit, statistics too."""
    rng = np.random.default_rng(12)
    x0 = np.column_stack(
        [1 + 0.1 * rng.normal(size=11), 0.1 * rng.normal(size=11)]
        + [0.1 * rng.normal(size=11), 1 + 0.1 * rng.normal(size=11)]
    )
    t = np.linspace(0.0, 1.0, 3)
    alone = [nh.integrate(kepler, x0[i], t, method=method, **kw) for i in (0, 5, 10)]
    for block in (1, 2, 3, 5, 7, 8, 9, 64):
        batch = nh.integrate(kepler, x0, t, method=method, block=block, **kw)
        for res, i in zip(alone, (0, 5, 10), strict=True):
            assert np.array_equal(res.y[0], batch.y[i]), (block, i)
            assert np.array_equal(res.t_reached[0], batch.t_reached[i])
            for k in res.stats:
                assert res.stats[k][0] == batch.stats[k][i], (block, i, k)


def test_single_trajectory_observables_match_batch(sleigh):
    """The one-trajectory observables (no broadcast copy of the times) equal the batch's."""
    x0 = np.array([[0.0, 0.0, 0.1, 1.0, 0.3], [0.1, 0.2, 0.3, 0.5, -0.2]])
    par = np.array([0.5, 1.0, 1.2])
    t = [0.0, 0.7]
    batch = nh.integrate(sleigh, x0, t, params=par)
    for i in range(2):
        one = nh.integrate(sleigh, x0[i], t, params=par)
        assert np.array_equal(one.y[0], batch.y[i])
        assert one.observables["energy"].shape == (1, 2)
        assert np.array_equal(one.observables["energy"][0], batch.observables["energy"][i])
    # and the energy is the formula's (a second formulation, at the initial state)
    a, m, J = par
    v, om = x0[:, 3], x0[:, 4]
    expected = (m * v**2 + (J + m * a**2) * om**2) / 2
    np.testing.assert_allclose(batch.observables["energy"][:, 0], expected, rtol=1e-14)


# ---------------------------------------------------------------- input checks ----

q, p = sp.symbols("q p")
k = sp.Symbol("k", positive=True)
c = sp.Symbol("c", nonnegative=True)
d = sp.Symbol("d", nonzero=True)
e = sp.Symbol("e", negative=True)
g = sp.Symbol("g")


@pytest.fixture(scope="module")
def guarded() -> nh.VectorField:
    """Parameters of every kind of assumption and a domain condition (|q| < 1)."""
    return nh.VectorField(
        [q, p],
        [p, -k * q + c * p + d * e * g * q],
        params=[k, c, d, e, g],
        domain={"chart": 1 - q**2},
        name="guarded",
    )


GOOD = np.array([2.0, 0.0, -1.0, -0.5, 0.0])


def _reference_message(vf, x, par) -> str | None:
    """The message of the system's own check (vectorfield.py), or None when it passes."""
    xr = np.atleast_2d(np.asarray(x, dtype=float))
    pr = np.atleast_2d(np.asarray(par, dtype=float))
    try:
        vf.check_inputs(xr, pr, "x0")
    except ValueError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize(
    "x, par",
    [
        ([0.5, 0.0], [0.0, 0.0, -1.0, -0.5, 0.0]),  # k positive: 0 refused
        ([0.5, 0.0], [2.0, -1e-300, -1.0, -0.5, 0.0]),  # c nonnegative
        ([0.5, 0.0], [2.0, 0.0, 0.0, -0.5, 0.0]),  # d nonzero
        ([0.5, 0.0], [2.0, 0.0, 1.0, 0.0, 0.0]),  # e negative: checked as nonzero
        ([1.5, 0.0], GOOD),  # outside the domain
        ([1.0, 0.0], GOOD),  # on its boundary (1 - q^2 = 0 is not > 0)
        ([[0.5, 0.0], [0.2, 0.1], [-1.0, 0.0]], GOOD),  # third row outside
        ([[0.5, 0.0], [0.2, 0.1]], [GOOD, [1.0, 0.0, -2.0, -1.0, 0.0]]),  # good rows pass
        ([[0.5, 0.0], [0.2, 0.1]], [GOOD, [1.0, -2.0, 1.0, -1.0, 3.0]]),  # c < 0 in row 1
    ],
)
def test_bad_inputs_keep_their_messages(guarded, x, par):
    expected = _reference_message(guarded, x, par)
    if expected is None:
        nh.integrate(guarded, x, [0.0, 0.1], params=par, method="rk4", h=0.05)
        return
    with pytest.raises(ValueError) as info:
        nh.integrate(guarded, x, [0.0, 0.1], params=par, method="rk4", h=0.05)
    assert str(info.value) == expected


@settings(max_examples=40, deadline=None)
@given(
    q0=st.floats(-1.5, 1.5),
    kk=st.sampled_from([-1.0, 0.0, 1e-300, 2.0]),
    cc=st.sampled_from([-1.0, -0.0, 0.0, 3.0]),
    dd=st.sampled_from([-2.0, 0.0, 5e-324, 1.0]),
    ee=st.sampled_from([-1.0, 0.0, 1.0]),
)
def test_fast_checks_agree_with_the_system(guarded, q0, kk, cc, dd, ee):
    """Whatever the values, integrate raises exactly when the system's own check does, with
    its message (the cached checks never accept what the system refuses)."""
    x, par = [q0, 0.25], [kk, cc, dd, ee, 0.5]
    expected = _reference_message(guarded, x, par)
    checks = input_checks(guarded)
    if checks.accept(np.array([x]), np.array([par])):
        assert expected is None
    if expected is None:
        # (watch_domain off: a state near the boundary may leave it during the step)
        nh.integrate(guarded, x, [0.0, 0.05], params=par, method="rk4", h=0.05, watch_domain=False)
    else:
        with pytest.raises(ValueError) as info:
            nh.integrate(guarded, x, [0.0, 0.05], params=par, method="rk4", h=0.05)
        assert str(info.value) == expected


def test_fast_path_skips_the_system_checks(guarded, monkeypatch):
    """Good inputs are accepted by the cached checks: the system's own check does not run;
    a bad one runs it (which raises)."""
    calls = []
    own = guarded.check_inputs

    def spy(x, par, name="x0"):
        calls.append(x.shape)
        own(x, par, name)

    monkeypatch.setattr(guarded, "check_inputs", spy)
    nh.integrate(guarded, [0.5, 0.0], [0.0, 0.1], params=GOOD, method="rk4", h=0.05)
    assert calls == []
    with pytest.raises(ValueError, match="outside the domain"):
        nh.integrate(guarded, [2.0, 0.0], [0.0, 0.1], params=GOOD, method="rk4", h=0.05)
    assert calls == [(1, 2)]


def test_overridden_checks_always_run():
    """A subclass with its own check_params is never decided by the cached checks."""
    seen = []

    class Picky(nh.VectorField):
        def check_params(self, params, name="params"):
            seen.append(np.array(params))
            if np.any(np.asarray(params) > 10):
                raise ValueError("picky: too large")

    vf = Picky([q], [-g * q], params=[g], name="picky")
    assert input_checks(vf) is None
    with pytest.raises(ValueError, match="picky: too large"):
        nh.integrate(vf, [1.0], [0.0, 0.1], params=[11.0], method="rk4", h=0.1)
    assert len(seen) == 1


def test_output_times_fast_path(monkeypatch):
    """[t0, t1] of Python floats skips the array checks; everything else still goes
    through them, with the same messages."""
    calls = []
    real = _validate.real_array

    def counting(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(_validate, "real_array", counting)
    t = _validate.output_times([0.0, 0.5])
    assert calls == [] and t.dtype == float and t.tolist() == [0.0, 0.5]
    assert _validate.output_times([1.0, -2.0]).tolist() == [1.0, -2.0]
    for bad, msg in [
        ([0.0, 0.0], "strictly monotonic"),
        ([0.0, float("nan")], "NaN or infinite"),
        ([0.0, float("inf")], "NaN or infinite"),
    ]:
        with pytest.raises(ValueError, match=msg):
            _validate.output_times(bad)
    with pytest.raises(ValueError, match="strictly increasing"):
        _validate.output_times([1.0, 0.5], increasing=True)
    assert calls  # the bad ones took the full path


@pytest.mark.parametrize(
    "t, h, max_steps, count",
    [([0.0, 1.0], 1e-3, 10, "1000"), ([0.0, 1e10], 1e-300, 10, "inf"), ([2.0, 0.0], 0.3, 6, "7")],
)
def test_step_budget_message_for_one_interval(oscillator, t, h, max_steps, count):
    """The one-interval step count (floats, no arrays) gives the general path's message."""
    with pytest.raises(ValueError) as info:
        nh.integrate(oscillator, [1.0, 0.0], t, params=[1.0], method="rk4", h=h,
                     max_steps=max_steps)  # fmt: skip
    assert str(info.value) == f"h={h:g} needs {count} steps, more than max_steps={max_steps}"
    # the same interval split in two (general path) counts the sum of both halves' steps
    mid = (t[0] + t[1]) / 2
    with pytest.raises(ValueError, match="more than max_steps"):
        nh.integrate(oscillator, [1.0, 0.0], [t[0], mid, t[1]], params=[1.0], method="rk4",
                     h=h, max_steps=max_steps)  # fmt: skip


def test_positive_fast_path_keeps_messages(oscillator):
    for kw, exc, msg in [
        ({"rtol": "1e-3"}, TypeError, "rtol must be a positive number, got the string"),
        ({"atol": -1.0}, ValueError, "atol must be a positive finite number"),
        ({"rtol": float("inf")}, ValueError, "rtol must be a positive finite number"),
        ({"threads": 0}, ValueError, "threads must be a positive integer"),
        ({"block": True}, ValueError, "block must be a positive integer"),
        ({"max_steps": 2.0}, ValueError, "max_steps must be a positive integer"),
    ]:
        with pytest.raises(exc, match=msg):
            nh.integrate(oscillator, [1.0, 0.0], [0.0, 1.0], params=[1.0], **kw)
