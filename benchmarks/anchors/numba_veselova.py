"""Numba anchor: the embedded Veselova equations with lanes innermost, RK4 and DOP853.

What a user would write with numba: the ``O(n)`` right-hand side as loops over components
with the lane loop innermost (arrays ``[2n, B]`` for a block of ``B`` lanes), a fixed-step RK4
and a DOP853 with a step size per lane (Hairer's error norm, controller and starting step;
SciPy's coefficients), blocks of 64 lanes one after the other. Compilation (``cache=True``)
happens on the first call (cached on disk by numba next to this file); :func:`warm_up`
triggers it outside the timed region.
"""

from __future__ import annotations

import numba
import numpy as np
from scipy.integrate._ivp import dop853_coefficients as _d

BLOCK = 64
_S = _d.N_STAGES
_A = np.ascontiguousarray(_d.A[:_S, :_S], dtype=float)
_B = np.ascontiguousarray(_d.B[:_S], dtype=float)
_E3 = np.ascontiguousarray(_d.E3, dtype=float)
_E5 = np.ascontiguousarray(_d.E5, dtype=float)


@numba.njit(fastmath=False, cache=True)
def rhs_block(a, ia, x, f):
    """``f[2n, B] = F(x[2n, B])`` for one block of lanes."""
    n = a.shape[0]
    nl = x.shape[1]
    c = np.zeros(nl)
    r2 = np.zeros(nl)
    gw = np.zeros(nl)
    mw = np.zeros(nl)
    gm = np.zeros(nl)
    for k in range(n):
        ak = a[k]
        iak = ia[k]
        for ln in range(nl):
            g = x[k, ln]
            p = x[n + k, ln]
            w = p * iak
            c[ln] += ak * g * g
            r2[ln] += g * g
            gw[ln] += g * w
            mw[ln] += p * w
            gm[ln] += g * p
    for ln in range(nl):
        ir2 = 1.0 / r2[ln]
        c[ln] = 1.0 / c[ln]  # now 1/c
        gw[ln] = gw[ln] * ir2  # now s = (gamma.w)/r2
        mw[ln] = (mw[ln] - gw[ln] * gm[ln]) * c[ln] * ir2  # now (m . gammadot)/r2
    for k in range(n):
        iak = ia[k]
        for ln in range(nl):
            g = x[k, ln]
            f[k, ln] = (x[n + k, ln] * iak - gw[ln] * g) * c[ln]
            f[n + k, ln] = -mw[ln] * g


@numba.njit(cache=True)
def rhs_rows(a, x):
    """Right-hand side on rows ``x[lanes, 2n]`` (for the agreement checks)."""
    xs = np.ascontiguousarray(x.T)
    f = np.empty_like(xs)
    rhs_block(a, 1.0 / a, xs, f)
    return np.ascontiguousarray(f.T)


@numba.njit(cache=True)
def rk4(a, x0, h, nsteps):
    """``nsteps`` RK4 steps of size ``h`` for rows ``x0[lanes, 2n]``; returns (y, evaluations)."""
    ntraj, N = x0.shape
    ia = 1.0 / a
    y = np.empty_like(x0)
    x = np.empty((N, BLOCK))
    k = np.empty((N, BLOCK))
    xs = np.empty((N, BLOCK))
    acc = np.empty((N, BLOCK))
    w = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)
    cs = (0.0, 0.5, 0.5, 1.0)
    for g0 in range(0, ntraj, BLOCK):
        m = min(BLOCK, ntraj - g0)
        for ln in range(BLOCK):
            g = g0 + (ln if ln < m else 0)
            for i in range(N):
                x[i, ln] = x0[g, i]
        for _ in range(nsteps):
            for s in range(4):
                if s == 0:
                    rhs_block(a, ia, x, k)
                else:
                    hc = cs[s] * h
                    for i in range(N):
                        for ln in range(BLOCK):
                            xs[i, ln] = x[i, ln] + hc * k[i, ln]
                    rhs_block(a, ia, xs, k)
                ws = w[s] * h
                for i in range(N):
                    for ln in range(BLOCK):
                        acc[i, ln] = ws * k[i, ln] if s == 0 else acc[i, ln] + ws * k[i, ln]
            for i in range(N):
                for ln in range(BLOCK):
                    x[i, ln] += acc[i, ln]
        for ln in range(m):
            for i in range(N):
                y[g0 + ln, i] = x[i, ln]
    return y, 4 * nsteps * ntraj


@numba.njit(cache=True)
def dop853(a, x0, t_end, rtol, atol, max_steps, A, Bw, E3, E5):
    """DOP853 from 0 to ``t_end`` for rows ``x0[lanes, 2n]``; returns (y, evaluations, ok).

    Evaluations are counted for the lanes still integrating (a finished lane idles until its
    block is done)."""
    ntraj, N = x0.shape
    S = Bw.shape[0]
    ia = 1.0 / a
    y = np.empty_like(x0)
    K = np.empty((S + 1, N, BLOCK))
    x = np.empty((N, BLOCK))
    xs = np.empty((N, BLOCK))
    h = np.empty(BLOCK)
    t = np.empty(BLOCK)
    hu = np.empty(BLOCK)
    e3 = np.empty(BLOCK)
    e5 = np.empty(BLOCK)
    d0 = np.empty(BLOCK)
    d1 = np.empty(BLOCK)
    d2 = np.empty(BLOCK)
    steps = np.zeros(BLOCK, dtype=np.int64)
    act = np.zeros(BLOCK, dtype=np.bool_)
    evals = 0
    ok_all = True
    for g0 in range(0, ntraj, BLOCK):
        m = min(BLOCK, ntraj - g0)
        for ln in range(BLOCK):
            g = g0 + (ln if ln < m else 0)
            for i in range(N):
                x[i, ln] = x0[g, i]
        rhs_block(a, ia, x, K[0])
        d0[:] = 0.0
        d1[:] = 0.0
        d2[:] = 0.0
        for i in range(N):
            for ln in range(BLOCK):
                sc = atol + rtol * abs(x[i, ln])
                d0[ln] += (x[i, ln] / sc) ** 2
                d1[ln] += (K[0, i, ln] / sc) ** 2
        for ln in range(BLOCK):
            d0[ln] = np.sqrt(d0[ln] / N)
            d1[ln] = np.sqrt(d1[ln] / N)
            hh = 1e-6 if (d0[ln] < 1e-5 or d1[ln] < 1e-5) else 0.01 * d0[ln] / d1[ln]
            hu[ln] = min(hh, t_end)
        for i in range(N):
            for ln in range(BLOCK):
                xs[i, ln] = x[i, ln] + hu[ln] * K[0, i, ln]
        rhs_block(a, ia, xs, K[1])
        for i in range(N):
            for ln in range(BLOCK):
                sc = atol + rtol * abs(x[i, ln])
                d2[ln] += ((K[1, i, ln] - K[0, i, ln]) / sc) ** 2
        for ln in range(BLOCK):
            dd2 = np.sqrt(d2[ln] / N) / hu[ln]
            mx = max(d1[ln], dd2)
            h1 = max(1e-6, hu[ln] * 1e-3) if mx <= 1e-15 else (0.01 / mx) ** (1.0 / 8.0)
            h[ln] = min(100.0 * hu[ln], h1)
            t[ln] = 0.0
            steps[ln] = 0
            act[ln] = ln < m
        evals += 2 * m
        live = m
        while live > 0:
            for ln in range(BLOCK):
                rest = t_end - t[ln]
                hu[ln] = 0.0 if not act[ln] else (rest if h[ln] >= rest * (1.0 - 1e-12) else h[ln])
            for s in range(1, S + 1):
                for i in range(N):
                    for ln in range(BLOCK):
                        xs[i, ln] = 0.0
                for j in range(s):
                    wj = A[s, j] if s < S else Bw[j]
                    if wj == 0.0:
                        continue
                    for i in range(N):
                        for ln in range(BLOCK):
                            xs[i, ln] += wj * K[j, i, ln]
                for i in range(N):
                    for ln in range(BLOCK):
                        xs[i, ln] = x[i, ln] + hu[ln] * xs[i, ln]
                rhs_block(a, ia, xs, K[s])
                evals += live
            # xs now holds the new state, K[S] its derivative (FSAL)
            e3[:] = 0.0
            e5[:] = 0.0
            for i in range(N):
                for ln in range(BLOCK):
                    s3 = 0.0
                    s5 = 0.0
                    for j in range(S + 1):
                        s3 += E3[j] * K[j, i, ln]
                        s5 += E5[j] * K[j, i, ln]
                    sc = atol + rtol * max(abs(x[i, ln]), abs(xs[i, ln]))
                    e3[ln] += (s3 / sc) ** 2
                    e5[ln] += (s5 / sc) ** 2
            for ln in range(BLOCK):
                if not act[ln]:
                    continue
                den = e5[ln] + 0.01 * e3[ln]
                err = abs(hu[ln]) * e5[ln] / np.sqrt(den * N) if den > 0.0 else 0.0
                if np.isfinite(err) and err <= 1.0:
                    fac = 10.0 if err == 0.0 else 0.9 * err ** (-1.0 / 8.0)
                    hn = hu[ln] * min(10.0, max(0.2, fac))
                    t[ln] = t_end if hu[ln] == t_end - t[ln] else t[ln] + hu[ln]
                    for i in range(N):
                        x[i, ln] = xs[i, ln]
                        K[0, i, ln] = K[S, i, ln]
                    h[ln] = hn
                    if t[ln] >= t_end:
                        act[ln] = False
                        live -= 1
                else:
                    fac = max(0.2, 0.9 * err ** (-1.0 / 8.0)) if np.isfinite(err) else 0.2
                    h[ln] = hu[ln] * fac
                steps[ln] += 1
                if act[ln] and (steps[ln] >= max_steps or h[ln] < 1e-14 * t_end):
                    act[ln] = False
                    live -= 1
                    ok_all = False
        for ln in range(m):
            for i in range(N):
                y[g0 + ln, i] = x[i, ln]
    return y, evals, ok_all


def integrate_dop853(
    x0: np.ndarray, a: np.ndarray, t_end: float, rtol: float, atol: float, max_steps: int = 10**6
) -> tuple[np.ndarray, int]:
    """DOP853 from 0 to ``t_end``: (final states ``[lanes, 2n]``, lane-evaluations)."""
    y, ev, ok = dop853(
        np.ascontiguousarray(a, dtype=float), np.ascontiguousarray(x0, dtype=float),
        float(t_end), float(rtol), float(atol), int(max_steps), _A, _B, _E3, _E5,
    )  # fmt: skip
    if not ok:
        raise RuntimeError("numba DOP853: a lane used up max_steps or its step underflowed")
    return y, int(ev)


def integrate_rk4(x0: np.ndarray, a: np.ndarray, h: float, nsteps: int) -> tuple[np.ndarray, int]:
    """``nsteps`` RK4 steps of size ``h``: (final states ``[lanes, 2n]``, lane-evaluations)."""
    a = np.ascontiguousarray(a, dtype=float)
    y, ev = rk4(a, np.ascontiguousarray(x0, dtype=float), float(h), int(nsteps))
    return y, int(ev)


def warm_up(n: int = 4) -> None:
    """Compile the kernels (numba specialises on types only, so one size serves all ``n``)."""
    a = 1.0 + np.arange(1, n + 1) / n
    x0 = np.zeros((1, 2 * n))
    x0[0, 0] = 1.0
    x0[0, n + 1] = 0.5
    integrate_dop853(x0, a, 0.1, 1e-6, 1e-8)
    integrate_rk4(x0, a, 0.01, 2)
    rhs_rows(a, x0)
