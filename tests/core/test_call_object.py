"""The call object of nh.integrate (nhfast._call.Call): kept per (system, plain options)."""

from __future__ import annotations

import gc
import warnings
import weakref

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
from nhfast._cache import peek
from nhfast.errors import ToleranceWarning

q, p = sp.symbols("q p")
k = sp.Symbol("k", nonnegative=True)  # not positive: no prepared call, every call runs Call


def _oscillator(name: str = "osc") -> nh.VectorField:
    return nh.VectorField([q, p], [p, -k * q], params=[k], name=name)


X0, T, PAR = np.array([1.0, 0.0]), [0.0, 0.5], np.array([2.0])


def test_one_call_object_per_plain_options() -> None:
    vf = _oscillator()
    a = nh.integrate(vf, X0, T, params=PAR, rtol=1e-9)
    calls = dict(peek(vf, "calls"))
    assert len(calls) == 1
    b = nh.integrate(vf, X0, T, params=PAR, rtol=1e-9)
    assert dict(peek(vf, "calls")) == calls  # the same object, not a new one
    np.testing.assert_array_equal(a.y, b.y)
    nh.integrate(vf, X0, T, params=PAR, rtol=1e-8)
    assert len(peek(vf, "calls")) == 2
    # 1 and 1.0 are other options (a prepared call compares types too)
    nh.integrate(vf, X0, T, params=PAR, method="rk4", h=0.1)
    nh.integrate(vf, X0, T, params=PAR, method="rk4", h=np.float64(0.1))  # not plain: not kept
    assert len(peek(vf, "calls")) == 3


def test_events_are_not_kept() -> None:
    vf = _oscillator()
    res = nh.integrate(vf, X0, [0.0, 4.0], params=PAR, dense=True, events=[(q, -1, False)])
    assert res.events.count[0] >= 1
    assert peek(vf, "calls") is None


def test_a_kept_call_does_not_keep_its_system_alive() -> None:
    vf = _oscillator("transient")
    nh.integrate(vf, X0, T, params=PAR)
    assert peek(vf, "calls")
    ref = weakref.ref(vf)
    del vf
    gc.collect()
    assert ref() is None


def test_a_kept_call_warns_every_call_at_the_callers_line() -> None:
    vf = _oscillator()
    for _ in range(2):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            nh.integrate(vf, X0, T, params=PAR, rtol=1e-30)
        tol = [w for w in got if issubclass(w.category, ToleranceWarning)]
        assert len(tol) == 1 and tol[0].filename == __file__


def test_bad_options_raise_on_every_call() -> None:
    vf = _oscillator()
    for _ in range(2):
        with pytest.raises(ValueError, match="h \\(the step size\\) is required"):
            nh.integrate(vf, X0, T, params=PAR, method="rk4")
        with pytest.raises(TypeError, match="dense must be True or False"):
            nh.integrate(vf, X0, T, params=PAR, dense="yes")
