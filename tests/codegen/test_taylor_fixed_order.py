"""Taylor kernels with a pass unrolled for one order (``compile_taylor(order)``).

The unrolled pass runs the same operations in the same order as the general one, so every
trajectory must come out bit for bit the same, in the one-lane and the vector passes, and the
library must still take any other order (through its general pass). Only small right-hand
sides get one (``unroll_pays``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
import nhfast.codegen.taylor.cost as taylor_cost
from nhfast import _abi, _core
from nhfast._core import taylor_order
from nhfast.codegen import generate_taylor_c, unroll_pays
from nhfast.codegen.taylor import TaylorSize, cost_order, generate_taylor, unrolled_terms

TOL = 1e-13  # order 16


def henon_heiles(name: str) -> nh.VectorField:
    x, y, px, py = sp.symbols("x y p_x p_y")
    return nh.VectorField([x, y, px, py], [px, py, -x - 2 * x * y, -y - x**2 + y**2], name=name)


def chain(k: int, name: str) -> nh.VectorField:
    """An FPU-beta chain of k masses: a right-hand side too large to unroll."""
    q, p = list(sp.symbols(f"q1:{k + 1}")), list(sp.symbols(f"p1:{k + 1}"))
    ext = [sp.Integer(0), *q, sp.Integer(0)]
    d = [ext[i + 1] - ext[i] for i in range(k + 1)]
    f = [di + di**3 for di in d]
    return nh.VectorField([*q, *p], [*p, *[f[i + 1] - f[i] for i in range(k)]], name=name)


def states(lanes: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-0.3, 0.3, (lanes, 4))
    return np.ascontiguousarray(x)


def test_order_from_the_tolerance_matches_the_core():
    """The core's order rule (``nh_taylor_order``, which integrate also compiles for): heyoka's
    ``ceil(-ln(min(rtol, atol)) / 2 + 1)``, clamped to [2, 100]; a given order wins."""
    for tol, p in [(1e-6, 8), (1e-9, 12), (1e-13, 16), (1e-15, 19), (1e-300, 100)]:
        assert taylor_order(0, tol, 1.0) == p
        assert taylor_order(0, 1.0, tol) == p
    assert taylor_order(7, 1e-13, 1e-13) == 7
    assert taylor_order(0, 10.0, 10.0) == 2


def test_unroll_pays_for_small_right_hand_sides_only():
    small = generate_taylor(henon_heiles("hh small").kernel_set(())).size
    large = generate_taylor(chain(12, "chain 12").kernel_set(())).size
    assert unroll_pays(small, 16)
    assert not unroll_pays(large, 16)
    assert unrolled_terms(small, 16) < unrolled_terms(small, 20) < unrolled_terms(large, 16)
    assert unrolled_terms(None, 4) == float("inf")
    assert not unroll_pays(TaylorSize(0, float("inf")), 2)


def test_a_cached_source_keeps_its_tapes_size(tmp_path, monkeypatch):
    """The size stored with a cached Taylor source is its tape's, and a process that loads the
    source from the cache gets it from there (the C is not read for it)."""
    from nhfast import _jit
    from nhfast._cache import forget

    monkeypatch.setenv("NHFAST_CACHE_DIR", str(tmp_path))
    field = henon_heiles("hh stored size")
    want = generate_taylor(field.kernel_set(())).size
    assert field.compile_taylor().taylor_size == want
    forget(field)  # as a new process: the kernel comes from the cache
    loaded = field.compile_taylor()
    assert loaded.generated is False and loaded.taylor_size == want
    metas = [json.loads(m.read_text()) for m in _jit.cache_dir().glob("s*/meta.json")]
    assert [TaylorSize.from_meta(m["taylor_size"]) for m in metas if "taylor_size" in m] == [want]
    unknown = TaylorSize(3, float("inf"))
    assert TaylorSize.from_meta(json.loads(json.dumps(unknown.as_meta()))) == unknown
    assert TaylorSize.from_meta("conv=3") is None


@pytest.mark.parametrize("lanes", [1, 3, 13])
def test_unrolled_pass_is_bit_identical(monkeypatch, lanes):
    x0, t = states(lanes), np.linspace(0.0, 20.0, 7)
    unrolled = henon_heiles(f"hh unrolled {lanes}")
    cs = unrolled.compile_taylor(16)
    assert cs is not unrolled.compile_taylor()
    assert "nht_pass_vu(" in cs.source and "nht_pass_1u(" in cs.source
    a = nh.integrate(unrolled, x0, t, method="taylor", rtol=TOL, atol=TOL, observables=False)
    monkeypatch.setattr(taylor_cost, "UNROLL_TERMS", 0)
    general = henon_heiles(f"hh general {lanes}")
    assert general.compile_taylor(16) is general.compile_taylor()
    b = nh.integrate(general, x0, t, method="taylor", rtol=TOL, atol=TOL, observables=False)
    assert a.success and b.success
    assert np.array_equal(a.y, b.y)
    assert np.array_equal(a.stats["steps"], b.stats["steps"])


def _core_run(cap, x0, t_end, order):
    x0 = np.ascontiguousarray(x0)
    ntraj, n = x0.shape
    t = np.array([0.0, t_end])
    y = np.empty((ntraj, 2, n))
    status = np.zeros(ntraj, dtype=np.int32)
    stats = np.zeros((ntraj, _core.NSTATS), dtype=np.int64)
    _core.integrate_batch(
        None, None, n, 0, 0, _abi.METHODS["taylor"], t, x0, np.zeros((1, 0)), y, status, stats,
        1e-12, 1e-12, 0.0, 0.0, 10**6, 1e-14, 100, 1, 64, taylor=cap, order=order,
    )  # fmt: skip
    assert not status.any()
    return y


@pytest.mark.parametrize("order", [5, 16, 21])
def test_a_fixed_order_library_takes_any_order(order):
    field = henon_heiles("hh any order")
    fixed = field.compile_taylor(16).kernels["taylor"][0]
    general = field.compile_taylor().kernels["taylor"][0]
    x0 = states(11, seed=5)
    assert np.array_equal(_core_run(fixed, x0, 3.0, order), _core_run(general, x0, 3.0, order))


def test_one_lane_pass_unrolled_only_when_small(monkeypatch):
    monkeypatch.setattr(taylor_cost, "UNROLL_TERMS_ONE_LANE", 0)
    src = generate_taylor_c(henon_heiles("hh vector only").kernel_set(()), order=16)
    assert "nht_pass_vu(" in src and "nht_pass_1u(" not in src


def test_large_right_hand_side_gets_the_general_kernel():
    field = chain(12, "chain general")
    assert field.compile_taylor(16) is field.compile_taylor()


@pytest.mark.parametrize("order", [0, 101, True, 2.0])
def test_generate_rejects_a_bad_order(order):
    with pytest.raises(ValueError, match="order"):
        generate_taylor_c(henon_heiles("hh bad order").kernel_set(()), order=order)


def test_integrate_compiles_the_order_it_runs_at():
    """integrate at a tolerance builds (once, in the background: see the next test) the
    kernel unrolled for the order it runs at: the cost model's (above the tolerance's p0 for
    this small right-hand side), p0 with events."""
    from nhfast import _background
    from nhfast._cache import peek

    field = henon_heiles("hh integrate order")
    x0 = states(2)
    size = field.compile_taylor().taylor_size
    for tol, p0 in [(1e-6, 8), (1e-12, 15)]:
        p = cost_order(size, 4, p0)
        assert p0 < p <= 2 * p0
        assert peek(field, ("taylor", p)) is None
        res = nh.integrate(field, x0, [0.0, 1.0], method="taylor", rtol=tol, atol=tol)
        assert _background.wait(60)
        assert res.success and peek(field, ("taylor", p)) is not None
        assert peek(field, ("taylor", p0)) is None
        x = field.states[0]
        res = nh.integrate(field, x0, [0.0, 1.0], method="taylor", rtol=tol, atol=tol,
                           events=[(x - 5.0, 0, False)])  # fmt: skip
        assert _background.wait(60)
        assert res.success and peek(field, ("taylor", p0)) is not None
    nh.integrate(field, x0, [0.0, 1.0], method="taylor", order=11, h=0.1)
    assert _background.wait(60)
    assert peek(field, ("taylor", 11)) is not None


def test_no_compiler_inside_a_loop_over_tolerances(monkeypatch, tmp_path):
    """After the first call (which compiles the general kernel), calls at new tolerances
    compile nothing themselves: the kernel unrolled for a new order is built in the
    background, and the calls' states are bit for bit those of the unrolled kernel (the same
    operations) before and after it is there. With NHFAST_BACKGROUND_BUILDS=0 the call builds
    it itself."""
    import threading

    from nhfast import _background, _jit
    from nhfast._cache import peek

    compiled_in: list[str] = []
    original = _jit._compile_into

    def spy(*args, **kwargs):
        compiled_in.append(threading.current_thread().name)
        return original(*args, **kwargs)

    monkeypatch.setattr(_jit, "_compile_into", spy)
    monkeypatch.setenv("NHFAST_CACHE_DIR", str(tmp_path))  # cold: nothing compiled before
    field = henon_heiles("hh loop over tolerances")
    x0 = states(5, seed=3)
    first = nh.integrate(field, x0, [0.0, 2.0], method="taylor", rtol=1e-6, atol=1e-6)
    assert compiled_in and compiled_in[0] == threading.current_thread().name
    compiled_in.clear()
    runs = {}
    for tol in (1e-9, 1e-12, 1e-9):
        runs.setdefault(tol, []).append(
            nh.integrate(field, x0, [0.0, 2.0], method="taylor", rtol=tol, atol=tol).y
        )
    assert threading.current_thread().name not in compiled_in  # only background builds
    assert _background.wait(60)
    size = field.compile_taylor().taylor_size
    for tol, p0 in [(1e-9, 12), (1e-12, 15)]:
        assert peek(field, ("taylor", cost_order(size, 4, p0))) is not None
        again = nh.integrate(field, x0, [0.0, 2.0], method="taylor", rtol=tol, atol=tol).y
        for y in runs[tol]:
            assert np.array_equal(y, again)
    assert first.success
    monkeypatch.setenv("NHFAST_BACKGROUND_BUILDS", "0")
    compiled_in.clear()
    field2 = henon_heiles("hh loop, builds in the call")
    nh.integrate(field2, x0, [0.0, 2.0], method="taylor", rtol=1e-8, atol=1e-8)
    p = cost_order(field2.compile_taylor().taylor_size, 4, 11)
    assert peek(field2, ("taylor", p)) is not None
    assert set(compiled_in) == {threading.current_thread().name}


def test_cost_order_against_its_model():
    """The order of least work per unit time, by brute force over the model's formula: above
    p0 (never above 2 p0), where the rule at p0 + 1 asks for no less than round-off; p0 among
    the candidates beyond; a small kernel's order above a large one's; p0 when the cost is
    not known."""
    import math

    def model(conv, lin, n, p0, p):
        a = taylor_cost.STEP_TERMS + taylor_cost.STEP_TERMS_PER_STATE * n
        w = a + (lin + taylor_cost.HORNER_WEIGHT * n) * p + conv * p * (p + 1) / 2
        pe = p0 + 1 if p > p0 else p0
        return w * math.exp(2 * pe / p + 0.7 / (p - 1))

    for conv, lin, n in [(3, 6, 4), (0, 2, 2), (31, 53, 8), (391, 833, 128), (66, 193, 64)]:
        src = TaylorSize(conv, lin)
        for p0 in (2, 8, 12, 17):
            p = cost_order(src, n, p0)
            assert p0 < p <= 2 * p0  # above p0: the accuracy of the rule at p0 + 1
            best = min(model(conv, lin, n, p0, q) for q in range(p0 + 1, 2 * p0 + 1))
            assert model(conv, lin, n, p0, p) == best
        for p0 in (18, 19):  # the rule at p0 + 1 asks for less than round-off: p0 competes
            p = cost_order(src, n, p0)
            assert p == min(range(p0, 2 * p0 + 1), key=lambda q: model(conv, lin, n, p0, q))
    small, large = TaylorSize(3, 6), TaylorSize(391, 833)
    assert cost_order(small, 4, 12) > cost_order(large, 128, 12) >= 12
    assert cost_order(TaylorSize(3, float("inf")), 4, 12) == 12
    assert cost_order(None, 4, 12) == 12
