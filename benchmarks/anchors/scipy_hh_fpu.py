"""SciPy anchor for Hénon–Heiles and the FPU-beta chain: lean NumPy right-hand sides.

What a careful user without nhfast writes: a few NumPy array operations per call (no
SymPy), given to ``scipy.integrate.solve_ivp(method="DOP853")`` one trajectory at a time.
The functions also accept rows ``x[..., d]`` (used to check the other anchors).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.integrate import solve_ivp


def henon_heiles_rhs(t: float, y: np.ndarray) -> np.ndarray:
    """``(p_x, p_y, -x - 2 x y, -y - x^2 + y^2)``."""
    x, q, px, py = y[..., 0], y[..., 1], y[..., 2], y[..., 3]
    return np.stack([px, py, -x - 2.0 * x * q, -q - x * x + q * q], axis=-1)


def fpu_rhs(t: float, y: np.ndarray, beta: float) -> np.ndarray:
    """FPU-beta chain with fixed ends: ``q' = p``, ``p_i' = f_{i+1} - f_i``,
    ``f_i = d_i + beta d_i^3``, ``d_i = q_{i+1} - q_i`` (``q_0 = q_{k+1} = 0``)."""
    k = y.shape[-1] // 2
    q, p = y[..., :k], y[..., k:]
    pad = [(0, 0)] * (q.ndim - 1) + [(1, 1)]
    d = np.diff(np.pad(q, pad), axis=-1)
    f = d + beta * d * d * d
    return np.concatenate([p, np.diff(f, axis=-1)], axis=-1)


def integrate(
    f: Callable, x0: np.ndarray, t_end: float, rtol: float, atol: float, args: tuple = ()
) -> tuple[np.ndarray, int]:
    """Integrate rows ``x0[lanes, d]`` one by one with DOP853; (final states, evaluations)."""
    y = np.empty_like(x0)
    nfev = 0
    for i, row in enumerate(x0):
        sol = solve_ivp(f, (0.0, t_end), row, method="DOP853", rtol=rtol, atol=atol, args=args)
        if sol.status != 0:
            raise RuntimeError(f"solve_ivp failed on trajectory {i}: {sol.message}")
        y[i] = sol.y[:, -1]
        nfev += int(sol.nfev)
    return y, nfev
