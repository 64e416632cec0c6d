"""Limits of the compiled core: any thread count is safe, every integer is range-checked.

A team of threads is never larger than the work or ``_core.MAX_THREADS`` (huge ``threads`` once
crashed the interpreter inside OpenMP), and an integer that does not fit its C type is refused
with a ``ValueError`` naming the argument and its range (not a bare ``OverflowError``).
"""

from __future__ import annotations

import numpy as np
import pytest

import nhfast as nh
from nhfast import _core

HUGE_THREADS = [40_000, 100_000]


@pytest.fixture(scope="module")
def sleigh_inputs():
    rng = np.random.default_rng(7)
    x0 = np.column_stack([rng.normal(size=(300, 3)), rng.normal(size=(300, 2))])
    return x0, np.array([0.5, 1.0, 1.2])


def test_max_threads_is_bounded():
    assert 1 <= _core.MAX_THREADS <= 256
    assert 0 < _core.POLL_SECONDS < 0.5


@pytest.mark.parametrize("threads", HUGE_THREADS)
def test_integrate_with_huge_threads(oscillator, threads):
    """The example of the report: four lanes, rk4, observables computed after the run."""
    t = [0.0, 1.0]
    ref = nh.integrate(oscillator, np.ones((4, 2)), t, method="rk4", h=0.1, params=[1.0])
    res = nh.integrate(
        oscillator, np.ones((4, 2)), t, method="rk4", h=0.1, params=[1.0], threads=threads
    )
    assert np.array_equal(res.y, ref.y)


@pytest.mark.parametrize("threads", HUGE_THREADS)
def test_many_blocks_and_observables_with_huge_threads(sleigh, sleigh_inputs, threads):
    """More blocks than MAX_THREADS (block=1) and the observables path (eval_rows)."""
    x0, par = sleigh_inputs
    t = np.linspace(0.0, 1.0, 3)
    kw = dict(method="dopri5", params=par, observables=True, block=1)
    ref = nh.integrate(sleigh, x0, t, **kw)
    res = nh.integrate(sleigh, x0, t, threads=threads, **kw)
    assert np.array_equal(res.y, ref.y)
    assert np.array_equal(res.observables["energy"], ref.observables["energy"])


@pytest.mark.parametrize("threads", HUGE_THREADS)
def test_evaluate_with_huge_threads(sleigh, sleigh_inputs, threads):
    """CompiledSystem.evaluate (eval_soa) over many chunks of lanes."""
    x0, par = sleigh_inputs
    cs = sleigh.compile()
    x = np.tile(x0, (40, 1))  # 12000 lanes: three chunks of the default 4096
    ref = cs.evaluate("rhs", x, params=par)
    assert np.array_equal(cs.evaluate("rhs", x, params=par, threads=threads), ref)
    v, om = x[:, 3], x[:, 4]
    a, m, J = par
    assert np.allclose(ref[:, 2], om) and np.allclose(ref[:, 3], a * om**2)
    energy = cs.evaluate("observables", x, params=par, threads=threads)
    assert np.allclose(energy[:, 0], (m * v**2 + (J + m * a**2) * om**2) / 2)


@pytest.mark.parametrize(
    "kw,name",
    [
        ({"threads": 2**31}, "threads"),
        ({"threads": 10**20}, "threads"),
        ({"max_steps": 10**20}, "max_steps"),
        ({"block": 10**20}, "block"),
        ({"block": 2**31}, "block"),
    ],
)
def test_huge_integers_name_the_argument(oscillator, kw, name):
    with pytest.raises(ValueError, match=rf"^{name} must be an integer in \[1, \d+\], got \d+"):
        nh.integrate(
            oscillator, np.ones((4, 2)), [0.0, 1.0], method="rk4", h=0.1, params=[1.0], **kw
        )


def test_largest_accepted_integers_work(oscillator):
    """At the top of each range: block is clamped to the lanes, max_steps is only a bound."""
    ref = nh.integrate(oscillator, np.ones((4, 2)), [0.0, 1.0], method="dopri5", params=[1.0])
    res = nh.integrate(
        oscillator,
        np.ones((4, 2)),
        [0.0, 1.0],
        method="dopri5",
        params=[1.0],
        threads=2**31 - 1,
        block=2**31 - 1,
        max_steps=2**63 - 1,
    )
    assert np.array_equal(res.y, ref.y)


def test_fixed_step_count_beyond_any_integer(oscillator):
    """A step count too large for int64 is a failed lane (max_steps), never an overflow."""
    cs = oscillator.compile()
    cap, ctx = cs.kernels["rhs"]
    t = np.array([0.0, 1.0])
    x0 = np.ones((2, 2))
    y = np.empty((2, 2, 2))
    status = np.zeros(2, dtype=np.int32)
    stats = np.zeros((2, _core.NSTATS), dtype=np.int64)
    _core.integrate_batch(
        cap, ctx, 2, 1, 1, _core.METHOD["rk4"], t, x0, np.ones((1, 1)), y, status, stats,
        1e-6, 1e-9, 1e-300, 0.0, 2**63 - 1, 1e-12, 50,
    )  # fmt: skip
    assert list(status) == [_core.LANE["max_steps"]] * 2
    assert np.array_equal(y[:, 0], x0) and np.isnan(y[:, 1]).all()


def _core_args(sleigh):
    cs = sleigh.compile()
    cap, ctx = cs.kernels["rhs"]
    x = np.ones((4, 5))
    par = np.ones((1, 3))
    return cap, ctx, x, par


@pytest.mark.parametrize(
    "kw,name",
    [
        ({"threads": 2**31}, "threads"),
        ({"threads": 0}, "threads"),
        ({"chunk": 10**20}, "chunk"),
        ({"chunk": 0}, "chunk"),
    ],
)
def test_eval_soa_range_checks(sleigh, kw, name):
    cap, ctx, x, par = _core_args(sleigh)
    out = np.empty((5, 4))
    with pytest.raises(ValueError, match=rf"^{name} must be an integer in"):
        _core.eval_soa(
            cap,
            ctx,
            np.zeros(4),
            np.ascontiguousarray(x.T),
            np.ascontiguousarray(np.ones((3, 4))),
            out,
            **kw,
        )


@pytest.mark.parametrize(
    "kw,name",
    [
        ({"threads": 2**31}, "threads"),
        ({"block": 10**20}, "block"),
        ({"nout": -1}, "nout"),
        ({"rows_per_par": 10**20}, "rows_per_par"),
    ],
)
def test_eval_rows_range_checks(sleigh, kw, name):
    cap, ctx, x, par = _core_args(sleigh)
    args = {"nout": 5, "rows_per_par": 1, **kw}
    out = np.empty((4, 5))
    with pytest.raises(ValueError, match=rf"^{name} must be an integer in"):
        _core.eval_rows(
            cap, ctx, args.pop("nout"), np.zeros(4), x, par, args.pop("rows_per_par"), out, **args
        )


def test_integer_arguments_must_be_integers(sleigh):
    cap, ctx, x, par = _core_args(sleigh)
    with pytest.raises(TypeError, match="threads must be an integer, got float"):
        _core.eval_rows(cap, ctx, 5, np.zeros(4), x, par, 1, np.empty((4, 5)), threads=2.0)
