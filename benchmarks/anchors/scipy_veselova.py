"""SciPy anchor: ``solve_ivp`` with a right-hand side lambdified from nhfast's SymPy expressions.

What a user without nhfast would write: take the expressions of
:func:`nhfast.systems.veselova` (``(n, form="embedded")``), ``sympy.lambdify`` them (with common
subexpressions) to a NumPy function of one state, and call
``scipy.integrate.solve_ivp(method="DOP853")`` once per trajectory.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import sympy as sp
from scipy.integrate import solve_ivp

from nhfast.vectorfield import VectorField


def lambdified_rhs(vf: VectorField) -> tuple[Callable, float]:
    """``f(t, y, a) -> ndarray`` for ``solve_ivp``, and the seconds lambdify took."""
    t0 = time.perf_counter()
    g = sp.lambdify([vf.states, vf.params], vf.rhs, modules="numpy", cse=True)

    def f(t: float, y: np.ndarray, a: np.ndarray) -> np.ndarray:
        return np.array(g(y, a))

    return f, time.perf_counter() - t0


def integrate(
    f: Callable, x0: np.ndarray, a: np.ndarray, t_end: float, rtol: float, atol: float
) -> tuple[np.ndarray, int]:
    """Integrate rows ``x0[lanes, 2n]`` one by one with DOP853; (final states, evaluations)."""
    y = np.empty_like(x0)
    nfev = 0
    for i, row in enumerate(x0):
        sol = solve_ivp(f, (0.0, t_end), row, method="DOP853", rtol=rtol, atol=atol, args=(a,))
        if sol.status != 0:
            raise RuntimeError(f"solve_ivp failed on trajectory {i}: {sol.message}")
        y[i] = sol.y[:, -1]
        nfev += int(sol.nfev)
    return y, nfev
