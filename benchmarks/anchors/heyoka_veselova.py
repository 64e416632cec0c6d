"""heyoka.py anchor: the embedded Veselova equations in heyoka's expression system.

The ``O(n)`` formulation (``c``, ``|gamma|^2``, ``gamma.w``, ``m.w``, ``gamma.m`` as sums, the
parameters ``a_k`` as runtime parameters ``par[k]``), integrated by heyoka's Taylor method in
scalar mode (:func:`scalar_integrator`, one trajectory at a time) and in batch mode
(:func:`batch_integrator`, ``batch_size`` trajectories per SIMD vector, the recommended size by
default). Building an integrator JIT-compiles it; its wall time is recorded in
:attr:`Anchor.compile_seconds`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import heyoka as hy
import numpy as np


def equations(n: int, inertia: str = "a-omega-a", values: Any = None) -> list[tuple[Any, Any]]:
    """``[(state, rhs)]`` for the states ``(gamma_1..gamma_n, m_1..m_n)``.

    Parameters
    ----------
    n : int
    inertia : {"a-omega-a", "physical"}
        ``I(Om) = A Om A`` or ``J Om + Om J`` (the moments as ``par[k]``).
    values : array_like, optional
        The moments as numbers folded into the expressions (reciprocals precomputed), as a
        user with fixed moments writes them; then no runtime parameters.
    """
    g = list(hy.make_vars(*[f"g{k}" for k in range(n)]))
    m = list(hy.make_vars(*[f"m{k}" for k in range(n)]))
    if values is None:
        a = [hy.par[k] for k in range(n)]
        inv = [1.0 / a[k] for k in range(n)]
    else:
        vals = [float(x) for x in values]
        a = [hy.expression(x) for x in vals]
        inv = [hy.expression(1.0 / x) for x in vals]
    c = hy.sum([a[k] * g[k] * g[k] for k in range(n)])
    r2 = hy.sum([g[k] * g[k] for k in range(n)])
    if inertia == "a-omega-a":
        w = [m[k] * inv[k] for k in range(n)]
        s = hy.sum([g[k] * w[k] for k in range(n)]) / r2
        mw = hy.sum([m[k] * w[k] for k in range(n)])
        gm = hy.sum([g[k] * m[k] for k in range(n)])
        q = (mw - s * gm) / (c * r2)  # (m . gammadot) / r2
        v = [(w[k] - s * g[k]) / c for k in range(n)]
        mdot = [-q * g[k] for k in range(n)]
        return list(zip(g + m, v + mdot, strict=True))
    if inertia != "physical":
        raise ValueError(f"inertia must be 'a-omega-a' or 'physical', got {inertia!r}")
    # K w = (r2 J + c) w - gamma (J gamma . w) on gamma^perp: w = D^-1 (m + beta gamma)
    d = [1.0 / (r2 * a[k] + c) for k in range(n)]
    gd = [g[k] * d[k] for k in range(n)]
    md = [m[k] * d[k] for k in range(n)]
    beta = -hy.sum([g[k] * md[k] for k in range(n)]) / hy.sum([g[k] * gd[k] for k in range(n)])
    v = [md[k] + beta * gd[k] for k in range(n)]
    mv = hy.sum([m[k] * v[k] for k in range(n)])
    return list(zip(g + m, [r2 * v[k] for k in range(n)] + [-mv * g[k] for k in range(n)],
                    strict=True))  # fmt: skip


@dataclass
class Anchor:
    """A compiled heyoka integrator and the seconds its construction (JIT) took."""

    ta: Any
    compile_seconds: float
    batch_size: int


def scalar_integrator(n: int, tol: float, compact_mode: bool = False) -> Anchor:
    """``taylor_adaptive`` for one trajectory (state and parameters set per run)."""
    t0 = time.perf_counter()
    ta = hy.taylor_adaptive(
        equations(n), np.zeros(2 * n), tol=tol, pars=np.ones(n), compact_mode=compact_mode
    )
    return Anchor(ta, time.perf_counter() - t0, 1)


def batch_integrator(
    n: int, tol: float, batch_size: int | None = None, compact_mode: bool = False
) -> Anchor:
    """``taylor_adaptive_batch`` over ``batch_size`` lanes (``hy.recommended_simd_size()``)."""
    bs = int(batch_size or hy.recommended_simd_size())
    t0 = time.perf_counter()
    ta = hy.taylor_adaptive_batch(
        equations(n),
        np.zeros((2 * n, bs)),
        tol=tol,
        pars=np.ones((n, bs)),
        compact_mode=compact_mode,
    )
    return Anchor(ta, time.perf_counter() - t0, bs)


def run_scalar(
    anchor: Anchor, x0: np.ndarray, a: np.ndarray, t_end: float
) -> tuple[np.ndarray, int]:
    """Integrate rows ``x0[lanes, 2n]`` one by one; returns (final states, Taylor steps)."""
    ta = anchor.ta
    y = np.empty_like(x0)
    steps = 0
    ta.pars[:] = a
    for i, row in enumerate(x0):
        ta.time = 0.0
        ta.state[:] = row
        out = ta.propagate_until(t_end)
        if out[0] != hy.taylor_outcome.time_limit:
            raise RuntimeError(f"heyoka scalar: trajectory {i} ended with {out[0]}")
        steps += int(out[3])
        y[i] = ta.state
    return y, steps


def run_batch(
    anchor: Anchor, x0: np.ndarray, a: np.ndarray, t_end: float
) -> tuple[np.ndarray, int]:
    """Integrate rows ``x0[lanes, 2n]`` in batches of ``batch_size`` (the last batch padded
    with copies of its first row); returns (final states, Taylor steps summed over lanes).
    The loop of :func:`anchors.heyoka_hh_fpu.run_batch`."""
    from anchors.heyoka_hh_fpu import run_batch as lean

    return lean(anchor, x0, a, t_end)


def rhs_rows(n: int, x: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Evaluate heyoka's right-hand side on rows ``x[lanes, 2n]`` (a compiled function of the
    same expressions, for the agreement checks)."""
    eqs = equations(n)
    cf = hy.cfunc([rhs for _, rhs in eqs], vars=[s for s, _ in eqs])
    return cf(np.ascontiguousarray(np.atleast_2d(x).T), pars=np.repeat(a[:, None], len(x), 1)).T
