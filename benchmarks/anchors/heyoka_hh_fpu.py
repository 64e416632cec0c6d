"""heyoka.py anchor for Hénon–Heiles and the FPU-beta chain, and runners for any equations.

:func:`henon_heiles_equations` and :func:`fpu_equations` write the systems of
:mod:`anchors.nhfast_hh_fpu` in heyoka's expression system (the FPU forces
``f_i = d_i + beta d_i^3`` once each, ``beta`` as ``par[0]``). The runners take any list of
``(state, rhs)`` pairs (also :func:`anchors.heyoka_veselova.equations`): heyoka's Taylor
method in scalar mode (one trajectory at a time), batch mode (``taylor_adaptive_batch``, one
SIMD vector of trajectories per call), ensemble mode (``ensemble_propagate_until_batch``
over threads: a copy of the integrator per batch) and batch mode on threads (a copy per
thread), and a long-double scalar run for references. Building an integrator
JIT-compiles it; its wall time is :attr:`Anchor.compile_seconds`.
"""

from __future__ import annotations

import re
import time
from copy import deepcopy
from dataclasses import dataclass
from typing import Any

import heyoka as hy
import numpy as np


def henon_heiles_equations() -> list[tuple[Any, Any]]:
    """``[(state, rhs)]`` for ``(x, y, p_x, p_y)``."""
    x, y, px, py = hy.make_vars("x", "y", "px", "py")
    return [(x, px), (y, py), (px, -x - 2.0 * x * y), (py, -y - x * x + y * y)]


def fpu_equations(k: int) -> list[tuple[Any, Any]]:
    """``[(state, rhs)]`` for ``(q_1..q_k, p_1..p_k)``, ``beta = par[0]``."""
    q = list(hy.make_vars(*[f"q{i}" for i in range(1, k + 1)]))
    p = list(hy.make_vars(*[f"p{i}" for i in range(1, k + 1)]))
    beta = hy.par[0]
    d = [q[0]] + [q[i + 1] - q[i] for i in range(k - 1)] + [-q[k - 1]]
    f = [di + beta * di * di * di for di in d]
    return list(zip(q + p, p + [f[i + 1] - f[i] for i in range(k)], strict=True))


@dataclass
class Anchor:
    """A compiled heyoka integrator and the seconds its construction (JIT) took."""

    ta: Any
    compile_seconds: float
    batch_size: int
    n_params: int


def _npar(eqs) -> int:
    pars = [int(re.sub(r"\D", "", str(s))) for _, rhs in eqs for s in hy.get_params(rhs)]
    return max(pars) + 1 if pars else 0


def scalar_integrator(eqs, tol: float, compact_mode: bool = False) -> Anchor:
    """``taylor_adaptive`` for one trajectory (state and parameters set per run)."""
    npar = _npar(eqs)
    t0 = time.perf_counter()
    ta = hy.taylor_adaptive(
        eqs, np.zeros(len(eqs)), tol=tol, pars=np.ones(npar), compact_mode=compact_mode
    )
    return Anchor(ta, time.perf_counter() - t0, 1, npar)


def batch_integrator(
    eqs, tol: float, batch_size: int | None = None, compact_mode: bool = False
) -> Anchor:
    """``taylor_adaptive_batch`` over ``batch_size`` lanes (``hy.recommended_simd_size()``)."""
    bs = int(batch_size or hy.recommended_simd_size())
    npar = _npar(eqs)
    t0 = time.perf_counter()
    ta = hy.taylor_adaptive_batch(
        eqs, np.zeros((len(eqs), bs)), tol=tol, pars=np.ones((npar, bs)),
        compact_mode=compact_mode,
    )  # fmt: skip
    return Anchor(ta, time.perf_counter() - t0, bs, npar)


def run_scalar(anchor: Anchor, x0: np.ndarray, par, t_end: float) -> tuple[np.ndarray, int]:
    """Integrate rows ``x0[lanes, d]`` one by one; (final states, Taylor steps)."""
    ta = anchor.ta
    y = np.empty_like(x0)
    steps = 0
    if anchor.n_params:
        ta.pars[:] = par
    for i, row in enumerate(x0):
        ta.time = 0.0
        ta.state[:] = row
        out = ta.propagate_until(t_end)
        if out[0] != hy.taylor_outcome.time_limit:
            raise RuntimeError(f"heyoka scalar: trajectory {i} ended with {out[0]}")
        steps += int(out[3])
        y[i] = ta.state
    return y, steps


def _blocks(x0: np.ndarray, bs: int):
    """``(first row, rows, state block padded with copies of its first row)``."""
    for b0 in range(0, x0.shape[0], bs):
        rows = x0[b0 : b0 + bs]
        block = np.empty((x0.shape[1], bs))
        block[:, : rows.shape[0]] = rows.T
        block[:, rows.shape[0] :] = rows[:1].T
        yield b0, rows.shape[0], block


def run_batch(anchor: Anchor, x0: np.ndarray, par, t_end: float) -> tuple[np.ndarray, int]:
    """Integrate rows ``x0[lanes, d]`` in batches of ``batch_size``; (final states, Taylor
    steps summed over lanes).

    As a heyoka user who minds speed would write it: the batches are laid out (lanes last)
    in one transpose before the loop and read back in one after it, the loop sets the state,
    propagates and checks each lane's outcome. (Building each batch in the loop, as this
    anchor did before, added 2.5 us per batch: 0.3 ms of Veselova n = 4's 1.5 ms for 1000
    trajectories at tol 1e-6.)
    """
    ta, bs = anchor.ta, anchor.batch_size
    lanes, d = x0.shape
    nb = -(-lanes // bs)
    xs = np.empty((nb * bs, d))
    xs[:lanes] = x0
    xs[lanes:] = x0[:1]  # the last batch padded with copies of the first row
    xs = np.ascontiguousarray(xs.reshape(nb, bs, d).transpose(0, 2, 1))
    ys = np.empty_like(xs)
    if np.size(par):
        ta.pars[:] = np.asarray(par, dtype=float).reshape(-1, 1)
    state, limit = ta.state, hy.taylor_outcome.time_limit
    steps = 0
    for b in range(nb):
        ta.set_time(0.0)
        state[:] = xs[b]
        ta.propagate_until(t_end)
        for row, res in enumerate(ta.propagate_res, start=b * bs):
            if row >= lanes:  # the padding of the last batch
                break
            if res[0] != limit:
                raise RuntimeError(f"heyoka batch: trajectory {row} ended with {res[0]}")
            steps += int(res[3])
        ys[b] = state
    return ys.transpose(0, 2, 1).reshape(nb * bs, d)[:lanes].copy(), steps


def run_ensemble(
    anchor: Anchor, x0: np.ndarray, par, t_end: float, threads: int = 2
) -> tuple[np.ndarray, int]:
    """``ensemble_propagate_until_batch`` over the batches of :func:`run_batch`, on
    ``threads`` threads (each batch a copy of the integrator); same returns."""
    ta, bs = anchor.ta, anchor.batch_size
    blocks = list(_blocks(x0, bs))
    ta.set_time(0.0)
    if anchor.n_params:
        ta.pars[:] = np.asarray(par, dtype=float).reshape(-1, 1)

    def gen(tint, i):
        tint.set_time(0.0)
        tint.state[:] = blocks[i][2]
        return tint

    res = hy.ensemble_propagate_until_batch(ta, t_end, len(blocks), gen, max_workers=threads)
    y = np.empty_like(x0)
    steps = 0
    for (b0, k, _), (tint, *_rest) in zip(blocks, res, strict=True):
        for lane, r in enumerate(tint.propagate_res[:k]):
            if r[0] != hy.taylor_outcome.time_limit:
                raise RuntimeError(f"heyoka ensemble: trajectory {b0 + lane} ended with {r[0]}")
            steps += int(r[3])
        y[b0 : b0 + k] = tint.state[:, :k].T
    return y, steps


def thread_copies(anchor: Anchor, threads: int) -> list[Anchor]:
    """``threads`` copies of the integrator, made on the first call and kept on the anchor."""
    copies = anchor.__dict__.setdefault("copies", [])
    while len(copies) < threads:
        copies.append(Anchor(deepcopy(anchor.ta), 0.0, anchor.batch_size, anchor.n_params))
    return copies


def run_threads(
    anchor: Anchor, x0: np.ndarray, par, t_end: float, threads: int = 2
) -> tuple[np.ndarray, int]:
    """:func:`run_batch` on ``threads`` Python threads (heyoka releases the GIL while it
    integrates), each on its own copy of the integrator (made once, kept on the anchor) and a
    contiguous share of the batches; same returns."""
    from concurrent.futures import ThreadPoolExecutor

    copies = thread_copies(anchor, threads)
    bs = anchor.batch_size
    nb = -(-x0.shape[0] // bs)
    cuts = [bs * (nb * i // threads) for i in range(threads + 1)]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        parts = list(pool.map(
            lambda i: run_batch(copies[i], x0[cuts[i] : cuts[i + 1]], par, t_end)
            if cuts[i + 1] > cuts[i] else (x0[:0], 0),
            range(threads),
        ))  # fmt: skip
    return np.concatenate([y for y, _ in parts]), sum(s for _, s in parts)


def reference(eqs, x0: np.ndarray, par, t_end: float, tol: float = 1e-19) -> np.ndarray:
    """Final states of rows ``x0`` by a long-double (x87 extended) scalar Taylor run at
    ``tol`` (compact mode), rounded to double."""
    ld = np.longdouble
    npar = _npar(eqs)
    pars = np.asarray(par if npar else np.ones(0), dtype=ld).reshape(-1)
    ta = hy.taylor_adaptive(
        eqs, np.zeros(len(eqs), dtype=ld), tol=ld(tol), pars=pars, fp_type=ld,
        compact_mode=True,
    )  # fmt: skip
    y = np.empty_like(x0)
    for i, row in enumerate(x0):
        ta.time = ld(0.0)
        ta.state[:] = row.astype(ld)
        out = ta.propagate_until(ld(t_end))
        if out[0] != hy.taylor_outcome.time_limit:
            raise RuntimeError(f"heyoka reference: trajectory {i} ended with {out[0]}")
        y[i] = ta.state.astype(float)
    return y


def rhs_rows(eqs, x: np.ndarray, par) -> np.ndarray:
    """heyoka's right-hand side on rows ``x[lanes, d]`` (a compiled function of the same
    expressions, for the agreement checks)."""
    x = np.atleast_2d(x)
    cf = hy.cfunc([rhs for _, rhs in eqs], vars=[s for s, _ in eqs])
    npar = _npar(eqs)
    pars = np.repeat(np.asarray(par, dtype=float).reshape(-1, 1), len(x), 1) if npar else None
    kw = {"pars": pars} if npar else {}
    return cf(np.ascontiguousarray(x.T), **kw).T
