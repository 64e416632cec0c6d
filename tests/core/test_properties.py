"""Property tests (hypothesis) of ``nhfast.integrate`` over random systems and arguments.

Every call either returns a result that agrees with SciPy's ``solve_ivp`` (DOP853 at tight
tolerance) or raises one of nhfast's documented exceptions: ``ValueError``/``TypeError`` with a
message naming the argument, or an exception of ``nhfast.errors``. Never a crash (the test
process would die), a hang (a signal stops the run: runs are interruptible), or NaN in a
result that reports success.

Well-formed systems: ``x_i' = c_i + sum_j a_ij x_j + sum_j b_ij x_j x_(i+j mod n)
+ s_i sin(x_i + w_i t) + r_i cos t - d x_i^3`` with all coefficients parameters (one compiled
kernel per dimension, random polynomial/trig fields through the parameter values; the cubic
damping, d = +1 forward in time and -1 backward, keeps solutions bounded), and a few
structurally random fields drawn from a small grammar (one compile each). The default suite
runs a few dozen examples of each property; ``-m slow`` runs the large profile.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import threading
import warnings
from functools import cache

import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

import nhfast as nh
from nhfast import errors

#: Exceptions nhfast documents for bad input or failed runs.
DOCUMENTED = (
    ValueError,
    TypeError,
    errors.IntegrationError,
    errors.CompilationError,
    errors.ConstraintAlgorithmError,
)
#: Seconds a single call may take before it counts as a hang: four times more under the
#: sanitizers (tools/sanitize: the core and kernels at -O1 with ASan and UBSan run several
#: times slower; a valid extreme of 2.7 million DOP853 steps takes 5 s in the usual build).
LIMIT = 20.0 * (4 if "ASAN_OPTIONS" in os.environ else 1)
FAST = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
LARGE = settings(FAST, max_examples=400, derandomize=False, database=None)


class Hang(Exception):
    """A call ran longer than LIMIT seconds."""


@contextlib.contextmanager
def time_limit(seconds: float = LIMIT):
    """Raise ``Hang`` in the main thread after ``seconds`` (the core polls for signals)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def alarm(signum, frame):
        raise Hang(f"call did not return within {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# --------------------------------------------------------------- the systems ----


@cache
def family(n: int) -> nh.VectorField:
    """The parametrised polynomial/trig field of dimension n (see the module docstring)."""
    x = sp.symbols(f"x0:{n}")
    t = sp.Symbol("t")
    c = sp.symbols(f"c0:{n}")
    a = sp.symbols(f"a0:{n * n}")
    b = sp.symbols(f"b0:{n * n}")
    s = sp.symbols(f"s0:{n}")
    w = sp.symbols(f"w0:{n}")
    r = sp.symbols(f"r0:{n}")
    d = sp.Symbol("d")
    rhs = []
    for i in range(n):
        f = c[i] + s[i] * sp.sin(x[i] + w[i] * t) + r[i] * sp.cos(t) - d * x[i] ** 3
        f += sum(a[i * n + j] * x[j] + b[i * n + j] * x[j] * x[(i + j) % n] for j in range(n))
        rhs.append(f)
    params = [*c, *a, *b, *s, *w, *r, d]
    return nh.VectorField(states=list(x), rhs=rhs, params=params, time=t, name=f"family{n}")


def family_numpy(n: int, p: np.ndarray):
    """The same field in NumPy, for SciPy (written independently of the symbolic layer)."""
    c, a, b = p[:n], p[n : n + n * n].reshape(n, n), p[n + n * n : n + 2 * n * n].reshape(n, n)
    s, w, r = p[n + 2 * n * n : -1].reshape(3, n)
    d = p[-1]
    rot = np.array([[(i + j) % n for j in range(n)] for i in range(n)])

    def f(t, x):
        return (
            c
            + a @ x
            + (b * x[None, :] * x[rot]).sum(1)
            + s * np.sin(x + w * t)
            + r * np.cos(t)
            - d * x**3
        )

    return f


def n_params(n: int) -> int:
    return 2 * n * n + 4 * n + 1


coef = st.one_of(st.just(0.0), st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False))


@st.composite
def times(draw):
    t0 = draw(st.floats(-3.0, 3.0, allow_nan=False))
    span = draw(st.floats(0.05, 2.0))
    sign = draw(st.sampled_from([1.0, -1.0]))
    k = draw(st.integers(1, 6))
    inner = sorted(
        draw(st.lists(st.floats(0.01, 0.99), min_size=k - 1, max_size=k - 1, unique=True))
    )
    rel = np.array([0.0, *inner, 1.0])
    t = t0 + sign * span * rel
    # distinct fractions can round to one time (0.99 and 0.99 + 1e-17, times 1.5): not an
    # input the integrators accept (t_eval must be strictly monotonic)
    assume(np.all(sign * np.diff(t) > 0))
    return t


METHOD_H = {
    "dop853": None,
    "dopri5": None,
    "taylor": None,
    "rk4": 2e-3,
    "gauss4": 1e-2,
    "gauss6": 2e-2,
}


@st.composite
def wellformed(draw):
    n = draw(st.integers(1, 3))
    ntraj = draw(st.integers(1, 3))
    per_lane = draw(st.booleans())
    rows = ntraj if per_lane else 1
    p = np.array(draw(st.lists(coef, min_size=rows * n_params(n), max_size=rows * n_params(n))))
    p = p.reshape(rows, n_params(n))
    t = draw(times())
    p[:, -1] = 1.0 if t[-1] >= t[0] else -1.0  # damping in the direction of integration
    x0 = np.array(draw(st.lists(st.floats(-2.0, 2.0), min_size=ntraj * n, max_size=ntraj * n)))
    method = draw(st.sampled_from(sorted(METHOD_H)))
    return {
        "n": n,
        "x0": x0.reshape(ntraj, n),
        "t": t,
        "params": p if per_lane else p[0],
        "method": method,
        "threads": draw(st.integers(1, 3)),
        "block": draw(st.sampled_from([1, 2, 8, 64])),
    }


def scipy_reference(f, x0, t):
    if t.size == 1:
        return x0[None, :]
    sol = solve_ivp(f, (t[0], t[-1]), x0, method="DOP853", t_eval=t, rtol=1e-12, atol=1e-13)
    # no reference where SciPy cannot integrate (x' = 1e-159 + sin x - x^3 from 0: "Required
    # step size is less than spacing between numbers"); nhfast's run was checked before
    assume(sol.status == 0)
    return sol.y.T


def check_wellformed(case):
    n, x0, t, method = case["n"], case["x0"], case["t"], case["method"]
    system = family(n)
    kw = {"method": method, "params": case["params"], "threads": case["threads"]}
    kw["block"] = case["block"]
    if METHOD_H[method] is not None:
        kw["h"] = METHOD_H[method]
    else:
        kw.update(rtol=1e-11, atol=1e-12)
    event(f"method={method}")
    try:
        with time_limit():
            res = nh.integrate(system, x0, t, **kw)
    except errors.IntegrationError as exc:
        # documented; with the damping this should not happen: say which lanes and why
        event("IntegrationError")
        raise AssertionError(f"well-formed run failed: {exc}") from exc
    assert res.success and np.isfinite(res.y).all()
    assert res.y.shape == (x0.shape[0], t.size, n)
    prow = np.atleast_2d(case["params"])
    # accuracy of the method: adaptive at rtol 1e-11, rk4/Gauss O(h^4)/O(h^6) with small h
    tol = 1e-7 if METHOD_H[method] is None else 1e-6
    for lane in range(x0.shape[0]):
        f = family_numpy(n, prow[lane % prow.shape[0]])
        ref = scipy_reference(f, x0[lane], t)
        scale = max(1.0, float(np.max(np.abs(ref))))
        assert np.allclose(res.y[lane], ref, rtol=0, atol=tol * scale), (lane, res.y[lane], ref)


@FAST
@given(case=wellformed())
def test_wellformed_agree_with_scipy(case):
    check_wellformed(case)


@pytest.mark.slow
@LARGE
@given(case=wellformed())
def test_wellformed_agree_with_scipy_large(case):
    check_wellformed(case)


# ------------------------------------------------- structurally random fields ----

X = sp.symbols("y0:2")
T = sp.Symbol("tau")
K = sp.symbols("k0:2")
LEAVES = [X[0], X[1], T, K[0], K[1], sp.Integer(1), sp.Rational(1, 2)]


def expressions(depth: int = 2):
    leaf = st.sampled_from(LEAVES)
    if depth == 0:
        return leaf
    sub = expressions(depth - 1)
    return st.one_of(
        leaf,
        st.builds(sp.Add, sub, sub),
        st.builds(sp.Mul, sub, sub),
        st.builds(sp.sin, sub),
        st.builds(sp.cos, sub),
    )


@settings(FAST, max_examples=8)
@given(
    f0=expressions(),
    f1=expressions(),
    x0=st.lists(st.floats(-1.0, 1.0), min_size=2, max_size=2),
    k=st.lists(st.floats(-1.0, 1.0), min_size=2, max_size=2),
    method=st.sampled_from(["dop853", "dopri5"]),
)
def test_random_fields_agree_with_scipy(f0, f1, x0, k, method):
    """Fields from a grammar of +, *, sin, cos over the states, time and parameters (damped
    by -y^3 so that they stay bounded); compiled one by one."""
    rhs = [f0 - X[0] ** 3, f1 - X[1] ** 3]
    system = nh.VectorField(states=list(X), rhs=rhs, params=list(K), time=T)
    t = np.linspace(0.0, 1.0, 5)
    with time_limit(60.0):
        res = nh.integrate(system, x0, t, params=k, method=method, rtol=1e-11, atol=1e-12)
    assert res.success and np.isfinite(res.y).all()
    fn = sp.lambdify((T, X, K), rhs, "numpy")
    ref = scipy_reference(lambda tt, xx: np.array(fn(tt, xx, k), dtype=float), np.array(x0), t)
    assert np.allclose(res.y[0], ref, rtol=0, atol=1e-7 * max(1.0, np.abs(ref).max()))


# ------------------------------------------------------------- malformed calls ----

BAD_NUMBERS = [0.0, -1.0, math.nan, math.inf, -math.inf, "1e-3", None, 1j, [1e-3]]


@st.composite
def malformed(draw):
    """A well-formed call with one argument (or the system) broken; returns (kwargs, names)
    where names are the argument names the message may mention."""
    n = draw(st.integers(1, 2))
    system = family(n)
    kw = {
        "x0": np.zeros((2, n)),
        "t_eval": np.array([0.0, 0.5, 1.0]),
        "params": np.zeros(n_params(n)),
        "method": draw(st.sampled_from(["dop853", "dopri5", "rk4", "gauss4"])),
    }
    if kw["method"] in ("rk4", "gauss4"):
        kw["h"] = 0.05
    kind = draw(
        st.sampled_from(
            [
                "x0_shape", "x0_value", "x0_dtype", "params_shape", "params_value",
                "params_missing", "params_dtype", "t_order", "t_value", "t_shape", "t_dtype",
                "h", "tol", "ints", "method", "system", "stiffness_check", "max_steps_tiny_h",
            ]
        )
    )  # fmt: skip
    names: tuple[str, ...]
    if kind == "x0_shape":
        kw["x0"] = draw(
            st.sampled_from(
                [np.zeros((2, n + 1)), np.zeros((1, 2, n)), np.zeros(0), np.zeros((0, n + 2))]
            )
        )
        names = ("x0",)
    elif kind == "x0_value":
        x = np.zeros((2, n))
        x[draw(st.integers(0, 1)), draw(st.integers(0, n - 1))] = draw(
            st.sampled_from([math.nan, math.inf, -math.inf])
        )
        kw["x0"], names = x, ("x0",)
    elif kind == "x0_dtype":
        kw["x0"] = draw(
            st.sampled_from([np.zeros((2, n), complex) + 1j, [["a"] * n] * 2, {"x": 1}, "x0"])
        )
        names = ("x0",)
    elif kind == "params_shape":
        kw["params"] = draw(
            st.sampled_from(
                [
                    np.zeros(n_params(n) + 1),
                    np.zeros((3, n_params(n))),
                    np.zeros((2, 2, n_params(n))),
                    np.zeros(0),
                ]
            )
        )
        names = ("params",)
    elif kind == "params_value":
        p = np.zeros(n_params(n))
        p[draw(st.integers(0, n_params(n) - 1))] = draw(st.sampled_from([math.nan, math.inf]))
        kw["params"], names = p, ("params",)
    elif kind == "params_missing":
        kw["params"], names = None, ("params",)
    elif kind == "params_dtype":
        kw["params"] = draw(
            st.sampled_from([np.zeros(n_params(n), complex) + 1j, ["p"] * n_params(n)])
        )
        names = ("params",)
    elif kind == "t_order":
        kw["t_eval"] = draw(
            st.sampled_from([[0.0, 1.0, 0.5], [0.0, 0.0], [1.0, 2.0, 2.0], [0.0, 1.0, -1.0]])
        )
        names = ("t_eval",)
    elif kind == "t_value":
        kw["t_eval"] = draw(st.sampled_from([[0.0, math.nan], [0.0, math.inf], [-math.inf, 0.0]]))
        names = ("t_eval",)
    elif kind == "t_shape":
        kw["t_eval"] = draw(st.sampled_from([[], [[0.0, 1.0]], np.zeros((2, 2))]))
        names = ("t_eval",)
    elif kind == "t_dtype":
        kw["t_eval"] = draw(st.sampled_from([[0.0, 1j], ["0", "x"], "t"]))
        names = ("t_eval",)
    elif kind == "h":
        kw["h"] = draw(st.sampled_from([0.0, -0.1, math.nan, math.inf, "0.1", 1j]))
        names = ("h",)
    elif kind == "tol":
        name = draw(st.sampled_from(["rtol", "atol", "tol", "hmax"]))
        kw[name], names = draw(st.sampled_from(BAD_NUMBERS)), (name,)
        if kw[name] is None and name == "hmax":
            kw[name] = -1.0  # hmax=None is the documented default
    elif kind == "ints":
        name = draw(st.sampled_from(["threads", "max_steps", "max_iter", "block"]))
        bad = [0, -1, 1.5, "2", None, 2**63, 10**20, True, 2.0]
        if name in ("threads", "block"):  # int32 in the core; max_steps, max_iter: int64
            bad.append(2**31)
        kw[name] = draw(st.sampled_from(bad))
        names = (name,)
    elif kind == "method":
        kw["method"] = draw(
            st.sampled_from(["euler", "DOP853", "", 3, None, "leapfrog", "hamiltonised-gauss4"])
        )
        kw.pop("h", None)
        names = ("method",)
    elif kind == "system":
        system = draw(st.sampled_from([None, "family", sp.Symbol("x"), 3.0]))
        names = ("system",)
    elif kind == "stiffness_check":
        kw["stiffness_check"], names = (
            draw(st.sampled_from([1, "no", None, 0.0])),
            ("stiffness_check",),
        )
    else:  # fixed step with a step count beyond the budget
        kw["method"], kw["h"], names = (
            "rk4",
            draw(st.sampled_from([1e-300, 1e-12])),
            ("h", "max_steps"),
        )
    return system, kw, kind, names


def check_malformed(system, kw, kind, names):
    event(kind)
    try:
        with time_limit(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = nh.integrate(system, **kw)
    except DOCUMENTED as exc:
        msg = str(exc)
        if isinstance(exc, (ValueError, TypeError)) and not isinstance(
            exc, errors.IntegrationError
        ):
            assert any(re.search(rf"\b{re.escape(nm)}\b", msg) for nm in names), (kind, names, msg)
        return
    # Every value drawn above is invalid (numeric strings for h, rtol, ... included): accepting
    # it is a bug.
    raise AssertionError(f"{kind}: {kw} was accepted (status {res.status})")


@settings(FAST, max_examples=60)
@given(case=malformed())
def test_malformed_calls_raise_documented_errors(case):
    check_malformed(*case)


@pytest.mark.slow
@settings(LARGE, max_examples=1000)
@given(case=malformed())
def test_malformed_calls_raise_documented_errors_large(case):
    check_malformed(*case)


# ---------------------------------------------- valid extremes: never a crash ----


@st.composite
def extremes(draw):
    n = draw(st.integers(1, 2))
    kw = {
        "x0": np.array(draw(st.lists(st.floats(-1e3, 1e3), min_size=n, max_size=n))),
        "params": np.array(
            draw(st.lists(st.floats(-1e3, 1e3), min_size=n_params(n), max_size=n_params(n)))
        ),
        "method": draw(st.sampled_from(sorted(METHOD_H))),
        "threads": draw(st.sampled_from([1, 2, 2**31 - 1])),
        "block": draw(st.sampled_from([1, 7, 2**31 - 1])),
        "max_steps": draw(st.sampled_from([1, 10, 10_000, 2**63 - 1])),
        "keep_failed": draw(st.booleans()),
    }
    span = draw(st.sampled_from([1e-300, 1e-8, 1.0, 1e3, 1e300]))
    kw["t_eval"] = np.array([0.0, span])
    if METHOD_H[kw["method"]] is not None:
        kw["h"] = draw(st.sampled_from([1e-3, 0.5, 1e300]))
    else:
        kw["rtol"] = draw(st.sampled_from([1e-14, 1e-6, 0.5, 1e3]))
        kw["atol"] = draw(st.sampled_from([1e-300, 1e-12, 1.0]))
    return n, kw


@settings(FAST, max_examples=40)
@given(case=extremes())
def test_valid_extremes_finish_or_fail_cleanly(case):
    """Huge parameters, spans, steps and tolerances, threads/blocks/max_steps at their bounds:
    a result (NaN only in rows of lanes reported failed) or a documented exception."""
    n, kw = case
    assume(not (kw["max_steps"] > 10**6 and kw["t_eval"][-1] > 1e3))  # 10^7 steps: too slow
    try:
        with time_limit(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = nh.integrate(family(n), **kw)
    except DOCUMENTED as exc:
        event(type(exc).__name__)
        return
    event("result")
    ok = ~res.failed
    assert np.isfinite(res.y[ok]).all()
    assert kw["keep_failed"] or ok.all()
    for k, v in res.observables.items():
        assert np.isfinite(v[ok]).all(), k
