"""The one memo (nhfast._cache) and the shared argument checks (nhfast._validate)."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
from nhfast import _cache
from nhfast._validate import output_times, params_rows, positive_ints, state_rows


class Owner:
    """Unhashable, like a dataclass VectorField."""

    __hash__ = None  # type: ignore[assignment]


def test_memo_is_per_object_and_goes_with_the_object():
    a, b = Owner(), Owner()
    calls = []

    def build(tag):
        calls.append(tag)
        return [tag]

    first = _cache.memo(a, "k", lambda: build("a"))
    assert _cache.memo(a, "k", lambda: build("again")) is first
    assert _cache.memo(b, "k", lambda: build("b")) == ["b"]
    assert calls == ["a", "b"]
    ref = _cache._MEMO[id(a)][0]
    assert ref() is a and id(b) in _cache._MEMO
    del a
    gc.collect()
    # a's entry went with a (other tests' owners may be collected here too: count only ours)
    assert ref() is None and all(r is not ref for r, _ in _cache._MEMO.values())
    assert _cache._MEMO[id(b)][0]() is b
    _cache.forget(b, "k")
    assert _cache.memo(b, "k", lambda: build("b2")) == ["b2"]


def test_compiled_kernels_are_memoised_and_released():
    x, y = sp.symbols("x y")
    vf = nh.VectorField([x, y], [y, -x], name="memo oscillator")
    cs = vf.compile(("observables", "divergence"))
    assert vf.compile(("divergence",)) is cs
    assert nh.VectorField([x, y], [y, -x]).compile(()) is not cs  # equal, but another field
    n = len(_cache._MEMO)
    del vf
    gc.collect()
    assert len(_cache._MEMO) < n  # the compiled kernels did not keep their field alive
    # the kernels still evaluate (their input check holds the field weakly)
    np.testing.assert_allclose(cs.evaluate("rhs", [[1.0, 2.0]]), [[2.0, -1.0]])


def test_shared_checks():
    assert state_rows([1, 2], 2).shape == (1, 2)
    with pytest.raises(ValueError, match=r"x0 must have shape \(3,\) or \(n_traj, 3\) holding"):
        state_rows([1, 2], 3, what=" holding (s, p)")
    with pytest.raises(ValueError, match="t_eval must be strictly increasing"):
        output_times([0, 2, 1], increasing=True)
    with pytest.raises(ValueError, match="t_eval must be strictly monotonic"):
        output_times([0, 2, 1])
    np.testing.assert_array_equal(output_times([2, 1, 0]), [2, 1, 0])
    w = sp.Symbol("w")
    assert params_rows([1.5], [w], 3).shape == (1, 1)
    full = params_rows([1.5], [w], 3, full=True)
    assert full.shape == (3, 1) and full.flags.c_contiguous
    assert params_rows(None, [], (2, 4), full=True).shape == (8, 0)
    with pytest.raises(ValueError, match="block must be a positive integer"):
        positive_ints(threads=1, block=0)
