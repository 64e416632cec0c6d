"""Generated Taylor kernels (``nh_taylor``) against an independent high-precision oracle.

The oracle computes the normalised Taylor coefficients ``x^[k]`` of the solution of
``x' = f(t, x, p)`` through ``(t0, x0)`` by Picard iteration on truncated power series in
``tau = t - t0``, at 40 significant digits (mpmath):
``x_{m+1}(tau) = x0 + int_0^tau f(t0 + s, x_m(s)) ds``; after ``m`` iterations the
coefficients up to order ``m`` are exact. ``f`` is evaluated on series by walking its SymPy
tree; an elementary function ``g`` of a series ``a = a0 + u`` (``u(0) = 0``) is composed from
its closed-form Taylor expansion about ``a0``, ``g(a) = sum_j g^(j)(a0)/j! u^j`` (binomial
series for every power, ``exp(a0) u^j/j!``, ``log``'s alternating series, ``sin/cos(a0 +
j pi/2)/j!``). It shares nothing with the recurrences of the generated code (which propagate
``g' = g_a a'`` order by order), and is itself checked against closed forms and against
SymPy's Lie derivatives ``x^[k+1] = (L^k f)/(k+1)!``, ``L = d/dt + f . grad``.

The kernels: :func:`nhfast.codegen.generate_taylor_c` of a :class:`KernelSet` (``rhs``
family, with linear solves) or of an :class:`IndexedProgram` (its ``rhs`` output), compiled
by :func:`nhfast._jit.build` and called through ctypes (ABI: ``nh_taylor`` in ``nh_abi.h``,
struct-of-arrays, ``coef[(k * n + i) * ld + l]``).

Tolerance: the coefficients of order ``k`` are compared norm-wise, ``max_i |got - want| <=
RTOL * max_i |want|`` per order (round-off in a coefficient is relative to the size of the
terms that make it, which the largest component of the same order measures).
"""

from __future__ import annotations

import ctypes
import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import mpmath
import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nhfast.codegen as cg
from nhfast import _jit
from nhfast._abi import ERR, INFO
from nhfast.codegen import IndexedProgram, KernelSet, SolveSpec

MP = mpmath.MPContext()
MP.dps = 40
RTOL = 1e-12
NH_HAS_TAYLOR = 64  # nh_abi.h (taylor_spec.md section 1)
MAX_ORDER = 100  # NH_TAYLOR_MAX_ORDER

needs_generator = pytest.mark.skipif(
    not hasattr(cg, "generate_taylor_c"), reason="nhfast.codegen.generate_taylor_c not there yet"
)

# ------------------------------------------------------------------------------ oracle ----

Series = list  # truncated power series: coefficients (mpf) of tau^0 .. tau^(len-1)


def _mul(a: Series, b: Series) -> Series:
    m = len(a)
    return [MP.fsum(a[j] * b[k - j] for j in range(k + 1)) for k in range(m)]


def _const(c, m: int) -> Series:
    return [MP.mpf(c)] + [MP.zero] * (m - 1)


def _compose(g: Sequence, u: Series) -> Series:
    """``sum_j g[j] u^j`` (``u[0] = 0``, so ``len(u)`` terms suffice), by Horner."""
    m = len(u)
    r = _const(g[m - 1], m)
    for j in range(m - 2, -1, -1):
        r = _mul(r, u)
        r[0] += g[j]
    return r


def _taylor_of(name: str, a0, m: int, e=None) -> list:
    """Coefficients ``g^(j)(a0) / j!``, ``j < m``, of an elementary function ``g``."""
    if name == "pow":
        return [MP.binomial(e, j) * MP.power(a0, e - j) for j in range(m)]
    if name == "exp":
        return [MP.exp(a0) / MP.factorial(j) for j in range(m)]
    if name == "log":
        return [MP.log(a0)] + [(-1) ** (j + 1) / (j * MP.power(a0, j)) for j in range(1, m)]
    if name == "sin":
        return [MP.sin(a0 + j * MP.pi / 2) / MP.factorial(j) for j in range(m)]
    if name == "cos":
        return [MP.cos(a0 + j * MP.pi / 2) / MP.factorial(j) for j in range(m)]
    if name in ("sinh", "cosh"):
        odd, even = (MP.cosh(a0), MP.sinh(a0)) if name == "sinh" else (MP.sinh(a0), MP.cosh(a0))
        return [(odd if j % 2 else even) / MP.factorial(j) for j in range(m)]
    if name in _MPMATH:  # derivatives by mpmath's high-precision numerical differentiation
        return MP.taylor(getattr(MP, _MPMATH[name]), a0, m - 1)
    raise NotImplementedError(name)


# the rest of the functions: mpmath names; tan etc. as compositions of the oracle's own series
_MPMATH = {"atan": "atan", "asin": "asin", "acos": "acos", "asinh": "asinh", "acosh": "acosh",
           "atanh": "atanh", "tan": "tan", "cot": "cot", "sec": "sec", "csc": "csc",
           "tanh": "tanh"}  # fmt: skip


_FUNCTIONS = {"exp", "log", "sin", "cos", "sinh", "cosh", *_MPMATH}


def _apply(name: str, a: Series, e=None) -> Series:
    u = [MP.zero, *a[1:]]
    return _compose(_taylor_of(name, a[0], len(a), e), u)


def _number(e: sp.Expr):
    if isinstance(e, sp.Float):
        return MP.mpf(float(e))  # the double the C source holds
    if isinstance(e, sp.Rational):
        return MP.mpf(int(e.p)) / int(e.q)
    return MP.mpf(str(sp.N(e, 50)))  # pi, E, ...


def _evaluate(expr: sp.Expr, leaves: dict, m: int, memo: dict) -> Series:
    if expr in memo:
        return memo[expr]
    if expr in leaves:
        r = leaves[expr]
    elif expr.is_Number or expr.is_NumberSymbol:
        r = _const(_number(expr), m)
    elif isinstance(expr, sp.Add):
        parts = [_evaluate(a, leaves, m, memo) for a in expr.args]
        r = [MP.fsum(p[k] for p in parts) for k in range(m)]
    elif isinstance(expr, sp.Mul):
        r = _const(1, m)
        for a in expr.args:
            r = _mul(r, _evaluate(a, leaves, m, memo))
    elif isinstance(expr, sp.Pow):
        base = _evaluate(expr.base, leaves, m, memo)
        ex = expr.exp
        if ex.is_Integer and ex >= 0:
            r = _const(1, m)
            for _ in range(int(ex)):
                r = _mul(r, base)
        elif not ex.free_symbols:
            r = _apply("pow", base, _number(ex))
        else:  # b**e with a non-constant exponent: exp(e log b)
            lg = _mul(_evaluate(ex, leaves, m, memo), _apply("log", base))
            r = _apply("exp", lg)
    elif isinstance(expr, sp.Abs):
        (arg,) = expr.args
        v = _evaluate(arg, leaves, m, memo)
        r = [MP.sign(v[0]) * c for c in v]
    elif isinstance(expr, sp.Function) and type(expr).__name__ in _FUNCTIONS:
        (arg,) = expr.args
        r = _apply(type(expr).__name__, _evaluate(arg, leaves, m, memo))
    else:
        raise NotImplementedError(f"oracle: {type(expr).__name__} in {expr}")
    memo[expr] = r
    return r


@dataclass
class System:
    """``x' = rhs(t, x, p)`` as SymPy expressions (the oracle's input)."""

    states: list
    rhs: list
    params: list = field(default_factory=list)
    time: sp.Symbol | None = None


def oracle(sys: System, t0: float, x0: Sequence[float], p0: Sequence[float], order: int):
    """Normalised Taylor coefficients, shape ``(order + 1, n)``, as mpf."""
    n = len(sys.states)
    x = [[MP.mpf(float(v))] for v in x0]
    for m in range(1, order + 1):  # x holds orders < m exactly; make order m exact
        leaves = {s: xi + [MP.zero] * (m - len(xi)) for s, xi in zip(sys.states, x, strict=True)}
        leaves.update({s: _const(float(v), m) for s, v in zip(sys.params, p0, strict=True)})
        if sys.time is not None:
            leaves[sys.time] = [MP.mpf(float(t0)), MP.one] + [MP.zero] * (m - 2)
            leaves[sys.time] = leaves[sys.time][:m]
        memo: dict = {}
        f = [_evaluate(sp.sympify(e), leaves, m, memo) for e in sys.rhs]
        x = [[x[i][0]] + [f[i][k - 1] / k for k in range(1, m + 1)] for i in range(n)]
    return [[x[i][k] for i in range(n)] for k in range(order + 1)]


def lie_oracle(sys: System, t0, x0, p0, order: int):
    """The same coefficients from SymPy Lie derivatives (small orders only)."""
    subs = dict(zip(sys.states, [sp.Float(v, 50) for v in x0], strict=True))
    subs.update(zip(sys.params, [sp.Float(v, 50) for v in p0], strict=True))
    if sys.time is not None:
        subs[sys.time] = sp.Float(t0, 50)
    out = [[sp.Float(v, 50) for v in x0]]
    g = [sp.sympify(e) for e in sys.rhs]
    for k in range(order):
        out.append([sp.N(gi.xreplace(subs), 45) / math.factorial(k + 1) for gi in g])
        g = [
            sum((gi.diff(s) * fi for s, fi in zip(sys.states, sys.rhs, strict=True)), sp.S(0))
            + (gi.diff(sys.time) if sys.time is not None else 0)
            for gi in g
        ]
    return out


# ------------------------------------------------------------------ checks of the oracle ----
def test_oracle_closed_forms():
    x, y, t = sp.symbols("x y t")
    # x' = x^2: x = x0 / (1 - x0 tau), x^[k] = x0^(k+1)
    c = oracle(System([x], [x**2]), 0.0, [0.75], [], 12)
    assert all(abs(c[k][0] - MP.mpf(0.75) ** (k + 1)) < MP.mpf(10) ** -35 for k in range(13))
    # y' = y cos t through (t0, y0): y = y0 exp(sin t - sin t0)
    t0, y0 = 0.4, 1.3
    c = oracle(System([y], [y * sp.cos(t)], time=t), t0, [y0], [], 10)
    ref = MP.taylor(lambda s: y0 * MP.exp(MP.sin(s) - MP.sin(t0)), t0, 10)
    assert all(abs(c[k][0] - ref[k]) < MP.mpf(10) ** -30 for k in range(11))
    # oscillator x' = y, y' = -x: rotation
    c = oracle(System([x, y], [y, -x]), 0.0, [1.0, 0.5], [], 9)
    for k in range(10):
        ex = MP.taylor(lambda s: MP.cos(s) + 0.5 * MP.sin(s), 0, 9)[k]
        assert abs(c[k][0] - ex) < MP.mpf(10) ** -30
    # a real power and a log: x' = x^(1/2) ... x = (sqrt(x0) + tau/2)^2
    c = oracle(System([x], [sp.sqrt(x)]), 0.0, [2.0], [], 6)
    assert abs(c[1][0] - MP.sqrt(2)) < MP.mpf(10) ** -35
    assert abs(c[2][0] - MP.mpf(1) / 4) < MP.mpf(10) ** -35
    assert all(abs(c[k][0]) < MP.mpf(10) ** -35 for k in range(3, 7))


def test_oracle_matches_lie_derivatives():
    x, y, t, a = sp.symbols("x y t a")
    sys = System(
        [x, y],
        [sp.exp(-y) * sp.sin(x) + t / a, sp.log(1 + x**2) - y ** sp.Rational(3, 2) * sp.cos(t)],
        [a],
        t,
    )
    got = oracle(sys, 0.3, [0.7, 1.1], [1.7], 3)
    want = lie_oracle(sys, 0.3, [0.7, 1.1], [1.7], 3)
    for k in range(4):
        for i in range(2):
            assert abs(got[k][i] - MP.mpf(str(want[k][i]))) < MP.mpf(10) ** -30, (k, i)
    # the functions whose expansions come from mpmath.taylor, and Abs (real symbols)
    x, y = sp.symbols("x y", real=True)
    sys = System(
        [x, y],
        [
            sp.tan(x) + sp.asinh(y) - sp.acosh(2 + x**2) + sp.Abs(x - 2) * sp.cot(1 + y),
            sp.acos(x / 2) * sp.sec(y)
            + sp.tanh(y) * sp.atan(x)
            - sp.asin(y / 2) * sp.csc(1 + x)
            + sp.atanh(x / 3)
            - sp.cosh(x) * sp.sinh(y),
        ],
    )
    got = oracle(sys, 0.0, [0.3, -0.4], [], 3)
    want = lie_oracle(sys, 0.0, [0.3, -0.4], [], 3)
    for k in range(4):
        for i in range(2):
            assert abs(got[k][i] - MP.mpf(str(want[k][i]))) < MP.mpf(10) ** -25, (k, i)


# ------------------------------------------------------------------- calling the kernel ----
_TAYLOR = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_int64,
    ctypes.c_int64,
    ctypes.c_int64,
)
SENTINEL = 7.25


@functools.cache
def _library(code_id: int):
    code = _CODES[code_id]
    src = cg.generate_taylor_c(code)
    lib, _ = _jit.build(src, label="taylor test kernel")
    return lib


_CODES: dict[int, object] = {}


def build(code) -> object:
    """The loaded Taylor library of a KernelSet or IndexedProgram (memoised per object)."""
    _CODES[id(code)] = code
    return _library(id(code))


def call(lib, t, x, par, order: int, ld: int | None = None, nlanes: int | None = None):
    """Run ``nh_taylor`` on lanes given as rows ``x[l]``; returns ``(rc, coef[k, i, l])``."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    x = np.atleast_2d(np.asarray(x, dtype=float))
    par = np.asarray(par, dtype=float).reshape(len(x), -1)
    L = len(x) if nlanes is None else nlanes
    ld = len(x) if ld is None else ld
    n, npar = x.shape[1], par.shape[1]
    tb = np.full(ld, np.nan)
    xb = np.full((n, ld), np.nan)
    pb = np.full((max(npar, 1), ld), np.nan)
    tb[: len(x)] = t
    xb[:, : len(x)] = x.T
    pb[:npar, : len(x)] = par.T
    coef = np.full(((max(order, 0) + 1) * n, ld), SENTINEL)
    rc = _TAYLOR(lib.address("nh_taylor"))(
        None, tb.ctypes.data, xb.ctypes.data, pb.ctypes.data, coef.ctypes.data, order, L, ld
    )
    return rc, coef.reshape(max(order, 0) + 1, n, ld)


def compare(got: np.ndarray, want, what: str = "") -> None:
    """``got[k, i]`` (float) against ``want[k][i]`` (mpf), norm-wise per order."""
    for k, row in enumerate(want):
        w = np.array([float(v) for v in row])
        scale = np.max(np.abs(w))
        err = np.max(np.abs(got[k] - w))
        assert err <= RTOL * scale, f"{what} order {k}: error {err:.3g}, scale {scale:.3g}"


def check_system(code, sys: System, lanes, order: int) -> None:
    """Kernel of ``code`` against the oracle of ``sys`` on ``lanes = [(t0, x0, p0), ...]``."""
    lib = build(code)
    info = ctypes.cast(lib.address("nh_info"), ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_int64)))
    arr = info()
    assert arr[INFO["nstate"]] == len(sys.states)
    assert arr[INFO["nparam"]] == len(sys.params)
    assert arr[INFO["nobs"]] == 0 and arr[INFO["nq"]] == 0
    assert arr[INFO["flags"]] == NH_HAS_TAYLOR
    t = [la[0] for la in lanes]
    x = [la[1] for la in lanes]
    p = [la[2] for la in lanes]
    ld = len(lanes) + 3  # not a multiple of 8: the kernel must not rely on it
    rc, coef = call(lib, t, x, p, order, ld=ld)
    assert rc == ERR["ok"]
    assert np.all(coef[:, :, len(lanes) :] == SENTINEL), "wrote beyond nlanes"
    assert np.array_equal(coef[0, :, : len(lanes)], np.asarray(x, dtype=float).T)
    for lane, (t0, x0, p0) in enumerate(lanes):
        want = oracle(sys, t0, x0, p0, order)
        compare(coef[:, :, lane], want, f"lane {lane}")
    # lanes never interact: lane 1 alone (ld = 1) is bit-identical to lane 1 in the block
    rc, alone = call(lib, t[1:2], x[1:2], p[1:2], order)
    assert rc == ERR["ok"]
    assert np.array_equal(alone[:, :, 0], coef[:, :, 1])


# --------------------------------------------------------------- unrolled (KernelSet) ----
x, y, z, w, t = sp.symbols("x y z w t", real=True)
a, b, c = sp.symbols("a b c", positive=True)


def _ks(sys: System, solves: Sequence[SolveSpec] = ()) -> KernelSet:
    return KernelSet(sys.states, sys.params, sys.time, {"rhs": sys.rhs}, solves=solves)


def _lanes(rng, n: int, npar: int, k: int = 4, lo=-1.0, hi=1.0, plo=0.5, phi=2.0, tt=False):
    return [
        (
            float(rng.uniform(-1, 2)) if tt else 0.0,
            rng.uniform(lo, hi, n),
            rng.uniform(plo, phi, npar),
        )
        for _ in range(k)
    ]


# name -> (system, lane sampler options); each covers a group of elementary operations
UNROLLED: dict[str, tuple[System, dict]] = {
    "add_sub_mul": (System([x, y, z], [x * y - 2 * y + 3, -x + y * x * z, z - x * y * z - 1]), {}),
    "division": (System([x, y], [x / (2 + y**2) - 1 / (3 + x), (x - y) / (x + 3) * y]), {}),
    "integer_powers": (
        System([x, y], [x**3 - y**-2 + x**2, x**2 * y**-3 + 1 - (x * y) ** 5]),
        {"lo": 0.5, "hi": 1.5},
    ),
    "real_powers": (
        System(
            [x, y],
            [x ** sp.Rational(3, 2) + y**0.7, (x * y) ** sp.Rational(-1, 3) - x ** sp.Float(-2.5)],
        ),
        {"lo": 0.5, "hi": 2.0},
    ),
    "sqrt_exp_log": (
        System(
            [x, y],
            [sp.sqrt(x) * sp.exp(-y), sp.log(x + y) - sp.sqrt(1 + x * y) + sp.exp(x)],
        ),
        {"lo": 0.3, "hi": 1.5},
    ),
    "sin_cos": (
        System([x, y], [y + sp.cos(3 * x), -sp.sin(x) + sp.cos(x) * sp.sin(y) * y]),
        {"lo": -2.0, "hi": 2.0},
    ),
    "nested_functions": (
        System(
            [x, y],
            [
                sp.exp(x) * sp.sin(y) * sp.log(2 + x) / (1 + sp.cos(x) ** 2),
                sp.cos(x * y) * sp.sqrt(2 + sp.sin(x)) + sp.exp(sp.sin(sp.cos(y))) * x**2,
            ],
        ),
        {},
    ),
    "more_functions": (
        System(
            [x, y],
            [
                sp.tan(x) + sp.sinh(y) * sp.cosh(x) - sp.tanh(x * y) + sp.Abs(x - 2) * y,
                sp.atan(x * y)
                + sp.asin(x / 2)
                - sp.acos(y / 3)
                + sp.asinh(x) * sp.atanh(y / 2)
                + sp.acosh(2 + y**2)
                + sp.cot(1 + x**2)
                - sp.sec(y)
                + sp.csc(2 + x / 2),
            ],
        ),
        {},
    ),
    "time_dependent": (
        System(
            [x, y],
            [y * sp.cos(t) + t**2 - 1, -x * sp.exp(-t / 3) + sp.sin(2 * t) * x * y + 1 / (2 + t)],
            time=t,
        ),
        {"tt": True},
    ),
    "parameters": (
        System(
            [x, y],
            [
                x / a - b * y * c**2 + 1 / (a * b) + sp.sqrt(a) * sp.exp(b),
                x * a**1.5 - sp.log(c) * y**2 + sp.sin(a) / (1 + b * x**2),
            ],
            [a, b, c],
        ),
        {},
    ),
    "parameter_exponent": (
        System([x, y], [x**a - y, y ** (b + 1) * x], [a, b]),
        {"lo": 0.5, "hi": 1.5},
    ),
    "constant_and_missing_states": (
        System([x, y, z], [sp.Integer(2), a * t + 1, x * 0 + y], [a], t),
        {"tt": True},
    ),
    "henon_heiles": (
        System([x, y, z, w], [z, w, -x - 2 * x * y, -y - x**2 + y**2]),
        {"lo": -0.4, "hi": 0.4},
    ),
    # sums of 2 to 6 terms: one fused pass of up to four (nht_lin2..4), then nht_axpy
    "long_sums": (
        System(
            [x, y, z],
            [
                x + 2 * y - z + x * y / 2 - 3 * y**2 + x * z,
                x - y + 2 * z,
                -x * y + 5 * z - 0.25 * x + a * y,
            ],
            [a],
        ),
        {},
    ),
    # cubes of scalar values: one fused operation each (nht_cube), its square reused by a
    # later a**2; a cube whose square came first (a product then)
    "cubes": (
        System(
            [x, y, z],
            [
                (x - y) ** 3 + a * z**3,
                (y + z) ** 3 - (y + z) ** 2 * x + x**3 * y,
                z**2 * y - z**3 + (x - y) ** 2,
            ],
            [a],
        ),
        {},
    ),
}


#: Larger kernels (2-8 s to compile each at -O3) run only with -m slow.
SLOW = {"more_functions", "nested_functions", "parameter_exponent", "henon_heiles"}


@needs_generator
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in sorted(UNROLLED)]
)
def test_unrolled_kernel_matches_oracle(name):
    sys, opts = UNROLLED[name]
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    lanes = _lanes(rng, len(sys.states), len(sys.params), **opts)
    check_system(_ks(sys), sys, lanes, order=10)


@needs_generator
def test_cubes_are_fused_and_match_the_oracle_to_order_24():
    """``a**3`` of a scalar value is one operation (``nht_cube``: the square's loads serve
    the product), right at orders where its pair loop runs several rounds."""
    sys, opts = UNROLLED["cubes"]
    src = cg.generate_taylor_c(_ks(sys))
    passes = [body.split("\n}\n")[0] for body in src.split("int NHT(nht_pass)(")[1:]]
    assert len(passes) == 2  # a vector of lanes, one lane
    for body in passes:  # (x-y)^3, z^3, (y+z)^3, x^3: once each
        assert sum("NHT(nht_cube)" in line for line in body.splitlines()) == 4
    lanes = _lanes(np.random.default_rng(5), 3, 1, **opts)
    check_system(_ks(sys), sys, lanes, order=24)


# ---------------------------------------------------------------- linear solves ----
u1, u2, w1 = sp.symbols("u1 u2 w1")
q1, q2, p1, p2 = sp.symbols("q1 q2 p1 p2")
_M = sp.Matrix([[2 + q1**2, sp.cos(q1 - q2) / 2], [sp.cos(q1 - q2) / 2, 1 + q2**2 * a]])
_B = sp.Matrix([p1 + sp.sin(t), p2 * q1])
_RHS_U = [u1, u2, -q1 + u1 * u2 * a, -sp.sin(q2) * u1 + u2**2]


def _solve_case(spd: bool) -> tuple[KernelSet, System]:
    sv = SolveSpec((u1, u2), tuple(_M), tuple(_B), spd=spd)
    ks = KernelSet([q1, q2, p1, p2], [a], t, {"rhs": _RHS_U}, solves=(sv,))
    u = _M.LUsolve(_B)  # the oracle gets u = M^-1 b substituted
    sys = System([q1, q2, p1, p2], [e.xreplace({u1: u[0], u2: u[1]}) for e in _RHS_U], [a], t)
    return ks, sys


@needs_generator
@pytest.mark.parametrize("spd", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_kernel_with_linear_solve(spd):
    ks, sys = _solve_case(spd)
    rng = np.random.default_rng(11)
    lanes = _lanes(rng, 4, 1, k=5, tt=True)
    check_system(ks, sys, lanes, order=10)


@needs_generator
@pytest.mark.slow
def test_chained_solves():
    """A second solve whose matrix and right-hand side use the first solve's unknown."""
    s1 = SolveSpec((u1,), (2 + x**2,), (y,))
    s2 = SolveSpec((w1,), (1 + u1**2 + sp.exp(y),), (x - u1,), spd=False)
    rhs = [w1 + u1 * y, -x * w1]
    ks = KernelSet([x, y], [], None, {"rhs": rhs}, solves=(s1, s2))
    uu = y / (2 + x**2)
    ww = (x - uu) / (1 + uu**2 + sp.exp(y))
    sys = System([x, y], [e.xreplace({w1: ww}).xreplace({u1: uu}) for e in rhs])
    check_system(ks, sys, _lanes(np.random.default_rng(12), 2, 0), order=9)


# ----------------------------------------------------------- structured (IndexedProgram) ----
def _program_elementwise() -> IndexedProgram:
    """scalar, reduce, vector and unrolled statements, a time-dependent scalar, n = 3."""
    prog = IndexedProgram(3)
    g = prog.state_vector("g")
    m = prog.state_vector("m")
    al = prog.param_vector("al", positive=True)
    k = prog.param_scalar("k")
    tt = prog.time_symbol("t")
    g1, g2, g3 = prog.components(g)
    m1, m2, m3 = prog.components(m)
    q = prog.reduce("q", al * g**2)  # (A g, g)
    s = prog.reduce("s", g * m)
    r = prog.scalar("r", 1 / q + k * sp.cos(tt) + g1 * m2)
    cr = prog.unrolled("cr", [g2 * m3 - g3 * m2, g3 * m1 - g1 * m3, g1 * m2 - g2 * m1])
    v = prog.vector("v", m / al - s * g * r + sp.sqrt(al) * cr)
    w = prog.vector("w", sp.exp(-(g**2)) * sp.sin(m) + g / (1 + q) - k * g**3)
    prog.output("rhs", [v, w])
    return prog


def _program_dense() -> IndexedProgram:
    """matvec (and its transpose) and a dense solve K y = f, K = diag(d) + l M r^T + u u^T."""
    prog = IndexedProgram(3)
    g = prog.state_vector("g")
    m = prog.state_vector("m")
    d = prog.param_vector("d", positive=True)
    H = prog.param_matrix("H")
    Mt = prog.param_matrix("Mt")
    hv = prog.matvec("hv", H, g * m)
    ht = prog.matvec("ht", H, m, transpose=True)
    q = prog.reduce("q", g**2)
    ysol = prog.solve(
        "ysol",
        m + g * q,
        diag=d + 2 + g**2,
        terms=[(g / 2, Mt, g / 2), (g / 3, None, m / 3)],
    )
    prog.output("rhs", [ysol - ht / 4, hv / 3 - g * q + ysol * m])
    return prog


_DENSE = _program_dense()


def _program_products() -> IndexedProgram:
    """Products of vector values that share operands, n = 5 (a block of 4 components and one
    more): the squares of g and m with g m (one ``nht_prods``); g times two scalars of the
    current order (a second group) and the product of m with a third (alone: no shared
    operand); u g, whose u is written after the first group (it cannot join it); terms of sums
    and linear combinations kept for the current order only, in shared slots."""
    prog = IndexedProgram(5)
    g = prog.state_vector("g")
    m = prog.state_vector("m")
    al = prog.param_vector("al", positive=True)
    c = prog.reduce("c", al * g**2)
    r2 = prog.reduce("r2", g**2)
    gw = prog.reduce("gw", g * m / al)
    mw = prog.reduce("mw", m**2 / al)
    kv = prog.scalar("kv", gw / (r2 * c))
    km = prog.scalar("km", (mw - gw * kv) / r2)
    u = prog.vector("u", 1 + g * m / 4)
    prog.output("rhs", [m / al / c - kv * g + u * g / 8, -km * g - u * m / 4])
    return prog


_PRODUCTS = _program_products()


def _program_shifted(materialised: bool = False) -> IndexedProgram:
    """``1 / (j + s)`` with ``j`` a parameter vector and ``s`` a per-lane scalar (the physical
    rigid body's reciprocal diagonal), n = 5: ``nht_recip_cs`` keeps no vector of the sum;
    ``materialised``: the sum as a vector statement first (the general division)."""
    prog = IndexedProgram(5)
    g = prog.state_vector("g")
    m = prog.state_vector("m")
    j = prog.param_vector("j", positive=True)
    r2 = prog.reduce("r2", g**2)
    s = prog.scalar("s", prog.reduce("c", j * g**2) / r2 + 1)
    if materialised:
        d = prog.vector("d", j + s)
        iD = prog.vector("iD", 1 / d)
    else:
        iD = prog.vector("iD", 1 / (j + s))
    beta = prog.scalar("beta", -prog.reduce("gmi", g * m * iD) / prog.reduce("ggi", g**2 * iD))
    prog.output("rhs", [m * iD + beta * g * iD, -prog.reduce("mmi", m**2 * iD) * g])
    return prog


_SHIFTED = _program_shifted()


@needs_generator
def test_a_product_moved_up_does_not_block_a_later_group():
    """The physical rigid body's tape: m (1/D) joins gamma (1/D) in the first group, and its
    output, written there, does not keep m (m/D) out of the second group with gamma (gamma/D)
    and m (gamma/D) (three products sharing operands in one pass); the oracle's coefficients
    to order 10."""
    from nhfast.systems.rigid_bodies import rigid_body

    prog = rigid_body(5, "physical").program()
    src = cg.generate_taylor_c(prog)
    groups = [ln for ln in src.splitlines() if "NHT(nht_prods)(k, 5, " in ln]
    sizes = sorted(int(ln.split("NHT(nht_prods)(k, 5, ")[1].split(",")[0]) for ln in groups)
    assert sizes == [2, 2, 3, 3], sizes  # two groups, in the vector and the one-lane pass
    sys = _program_system(prog)
    lanes = [(0.0, np.r_[g, m], p) for g, m, p in _body_lanes(np.random.default_rng(41), 5, 4)]
    check_system(prog, sys, lanes, 10)


def _body_lanes(rng, n: int, k: int):
    for _ in range(k):
        g = rng.normal(size=n)
        g /= np.linalg.norm(g)
        m = rng.normal(size=n)
        m -= (m @ g) * g
        yield g, m, 1 + rng.random(n)


@needs_generator
def test_shifted_reciprocal_matches_the_oracle_and_the_general_division():
    """``1 / (j + s)`` (``nht_recip_cs``) gives the oracle's coefficients to order 14, and
    those of the division by the materialised vector ``j + s`` (the same recurrence; later
    products may take their operands in another order, so to round-off, not bit for bit)."""
    src = cg.generate_taylor_c(_SHIFTED)
    assert "NHT(nht_recip_cs)(k, 5, " in src
    general = _program_shifted(materialised=True)
    assert "nht_recip_cs" not in cg.generate_taylor_c(general)
    sys = _program_system(_SHIFTED)
    check_system(_SHIFTED, sys, _program_lanes(_SHIFTED, np.random.default_rng(29), k=9), 14)
    rng = np.random.default_rng(37)
    t = np.zeros(6)
    xs = rng.uniform(-1, 1, (6, 10))
    ps = rng.uniform(0.5, 1.5, (6, 5))
    rc1, c1 = call(build(_SHIFTED), t, xs, ps, 14)
    rc2, c2 = call(build(general), t, xs, ps, 14)
    assert rc1 == rc2 == ERR["ok"]
    np.testing.assert_allclose(c1, c2, rtol=1e-13, atol=1e-15)


@needs_generator
def test_shared_products_are_grouped_and_match_the_oracle():
    """Grouped products (``nht_prods``: each operand's coefficients loaded once for all) and
    values of one row in shared slots give the oracle's coefficients, to order 12 (several
    rounds of each group's pair loop); the layout keeps fewer values per order than it has."""
    src = cg.generate_taylor_c(_PRODUCTS)
    groups = [ln for ln in src.splitlines() if "NHT(nht_prods)(k, 5, " in ln]
    assert len(groups) == 2 * 2, groups  # two groups, in the vector and the one-lane pass
    assert "NHT(nht_prods)(k, 5, 3, " in groups[0]
    kept = int(re.search(r"\((\d+) values per order, (\d+) of the current", src).group(1))
    assert kept < sum(1 for ln in src.splitlines() if "NHT(" in ln)
    sys = _program_system(_PRODUCTS)
    check_system(_PRODUCTS, sys, _program_lanes(_PRODUCTS, np.random.default_rng(23), k=11), 12)


def _program_system(prog: IndexedProgram) -> System:
    return System(prog.state_symbols, prog.to_sympy("rhs"), prog.param_symbols, prog.time)


def _program_lanes(prog: IndexedProgram, rng, k: int = 4):
    lanes = []
    for _ in range(k):
        xs = rng.uniform(-1, 1, prog.n_state)
        ps = rng.uniform(0.5, 1.5, prog.n_params)
        t0 = float(rng.uniform(-1, 1)) if prog.time is not None else 0.0
        lanes.append((t0, xs, ps))
    return lanes


@needs_generator
@pytest.mark.parametrize("which", [pytest.param("elementwise", marks=pytest.mark.slow), "dense"])
def test_structured_kernel_matches_oracle(which):
    prog = _program_elementwise() if which == "elementwise" else _DENSE
    sys = _program_system(prog)
    lanes = _program_lanes(prog, np.random.default_rng(21 if which == "dense" else 22))
    check_system(prog, sys, lanes, order=8)


# -------------------------------------------------------------------------- the ABI ----
@needs_generator
def test_order_limits_and_empty_block():
    sys = System([x], [x**2])
    lib = build(_ks_quadratic())
    for bad in (0, -1, MAX_ORDER + 1):
        rc, _ = call(lib, [0.0], [[0.5]], [[]], bad)
        assert rc == ERR["arg"], bad
    rc, _ = call(lib, [0.0], [[0.5]], [[]], 3, nlanes=0)
    assert rc == ERR["ok"]
    # order 100 of x' = x^2 at x0 = 1/2: x^[k] = 2^-(k+1); every operation is exact in binary
    rc, coef = call(lib, [0.0, 0.0], [[0.5], [-0.25]], [[], []], MAX_ORDER)
    assert rc == ERR["ok"]
    k = np.arange(MAX_ORDER + 1)
    np.testing.assert_allclose(coef[:, 0, 0], 0.5 ** (k + 1), rtol=1e-14, atol=0)
    np.testing.assert_allclose(coef[:, 0, 1], (-0.25) ** (k + 1), rtol=1e-14, atol=0)
    assert sys.rhs == [x**2]


@functools.cache
def _ks_quadratic() -> KernelSet:
    return KernelSet([x], [], None, {"rhs": [x**2]})


@needs_generator
def test_nonfinite_lane_does_not_disturb_the_others():
    sys, _ = UNROLLED["sqrt_exp_log"]
    lib = build(_KS_SQRT)
    xs = np.array([[0.5, 0.7], [np.nan, 0.3], [1.2, 0.4], [-1.0, 0.2]])  # sqrt(-1): NaN too
    rc, coef = call(lib, np.zeros(4), xs, np.zeros((4, 0)), 8, ld=5)
    assert rc == ERR["ok"]
    assert not np.all(np.isfinite(coef[1:, :, 1])) and not np.all(np.isfinite(coef[1:, :, 3]))
    for lane in (0, 2):
        rc, alone = call(lib, [0.0], xs[lane : lane + 1], [[]], 8)
        assert np.array_equal(alone[:, :, 0], coef[:, :, lane])
    compare(coef[:, :, 2], oracle(sys, 0.0, xs[2], [], 8))


_KS_SQRT = _ks(UNROLLED["sqrt_exp_log"][0])


@needs_generator
@pytest.mark.parametrize("which", ["sqrt_exp_log", "solve", "dense", "products", "shifted"])
def test_lanes_bit_identical_in_any_chunk(which):
    """13 lanes (the kernels work in chunks of up to 8 lanes: 8 + 4 + 1) at a stride of 16:
    every lane equals the same lane computed alone, bit for bit."""
    if which == "solve":
        code, sys = _solve_case(True)
    elif which in ("dense", "products", "shifted"):
        code = {"dense": _DENSE, "products": _PRODUCTS, "shifted": _SHIFTED}[which]
        sys = System(code.state_symbols, [], code.param_symbols, code.time)
    else:
        sys = UNROLLED[which][0]
        code = _ks(sys)
    lib = build(code)
    rng = np.random.default_rng(31)
    k = 13
    t = rng.uniform(-1, 1, k)
    xs = rng.uniform(0.3, 1.2, (k, len(sys.states)))  # in the domain of sqrt and log
    ps = rng.uniform(0.5, 1.5, (k, len(sys.params)))
    rc, coef = call(lib, t, xs, ps, 12, ld=16)
    assert rc == ERR["ok"] and np.all(np.isfinite(coef[:, :, :k]))
    for lane in range(k):
        rc, alone = call(lib, t[lane], xs[lane : lane + 1], ps[lane : lane + 1], 12)
        assert np.array_equal(alone[:, :, 0], coef[:, :, lane]), lane


@needs_generator
def test_unsupported_function_is_a_clear_error():
    with pytest.raises(ValueError, match="Taylor"):
        cg.generate_taylor_c(_ks(System([x], [sp.gamma(x)])))
    with pytest.raises(ValueError, match="rhs"):
        cg.generate_taylor_c(KernelSet([x], [], None, {"observables": [x]}))


# ------------------------------------------------------------ random polynomial systems ----
_POLY_STATES = sp.symbols("s0:3", real=True)


@st.composite
def polynomial_systems(draw):
    n = draw(st.integers(1, 3))
    xs = _POLY_STATES[:n]
    rhs = []
    for _ in range(n):
        terms = draw(st.integers(1, 4))
        e = sp.Integer(draw(st.integers(-3, 3)))
        for _ in range(terms):
            coef = sp.Rational(draw(st.integers(-5, 5)), draw(st.integers(1, 4)))
            mono = sp.Integer(1)
            for s in xs:
                mono *= s ** draw(st.integers(0, 3))
            e += coef * mono
        rhs.append(e)
    x0 = [draw(st.integers(-8, 8)) / 8 for _ in range(n)]
    return System(list(xs), rhs), x0


@needs_generator
@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,  # the same systems every run: their kernels come from the cache
    suppress_health_check=[HealthCheck.too_slow],
)
@given(polynomial_systems())
def test_random_polynomial_systems(case):
    sys, x0 = case
    ks = _ks(sys)
    lib, _ = _jit.build(cg.generate_taylor_c(ks), label="taylor hypothesis kernel")
    order = 8
    rc, coef = call(lib, [0.0], [x0], [[]], order)
    assert rc == ERR["ok"]
    want = oracle(sys, 0.0, x0, [], order)
    compare(coef[:, :, 0], want, str(sys.rhs))
