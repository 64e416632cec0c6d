"""The Veselova rigid body on SO(n): each formula of its geometry, once.

``Q = SO(n)``, inertia ``I(u ^ v) = (Au) ^ (Av)`` with ``A = diag(a_1..a_n)``, Killing metric
``(x, y)_kappa = -1/2 tr(x y)``, shape ``gamma = g^{-1} e_n`` on ``S^{n-1}``, and
``c = (A gamma, gamma)`` (García-Naranjo & Marrero 2020, Section 4.2, (4.3)-(4.14)).  The reduced
system is phi-simple with ``phi = -1/2 ln c`` and has the invariant density ``c^{(2-n)/2}``
with respect to the Liouville volume of ``T*S^{n-1}`` (their Theorem 4.3).

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited".
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp

from nhfast.symbolic._util import zeros3

__all__: list[str] = []


def check_dimension(n: Any, hi: int | None = None) -> int:
    """``n`` checked: an int with ``3 <= n`` (and ``n <= hi`` if given).

    Raises
    ------
    TypeError
        If ``n`` is not an int.
    ValueError
        If ``n < 3`` or ``n > hi``.
    """
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if n < 3:
        raise ValueError(f"n must be >= 3 for the Veselova system, got {n}")
    if hi is not None and n > hi:
        raise ValueError(f"n must be <= {hi} here, got {n}")
    return n


def inertia_symbols(n: int) -> list[sp.Symbol]:
    """The parameters ``a1..an`` (positive), shared by every form so parameter vectors agree."""
    return list(sp.symbols(f"a1:{n + 1}", positive=True))


def embedded_symbols(n: int) -> tuple[list[sp.Symbol], list[sp.Symbol]]:
    """The embedded states ``(gamma1..gamma<n>, m1..m<n>)`` (real)."""
    return list(sp.symbols(f"gamma1:{n + 1}", real=True)), list(
        sp.symbols(f"m1:{n + 1}", real=True)
    )


def chart_symbols(n: int) -> list[sp.Symbol]:
    """The hemisphere-chart coordinates ``s1..s<n-1>`` (real)."""
    return list(sp.symbols(f"s1:{n}", real=True))


def hemisphere_gamma(s: list[sp.Symbol]) -> list[sp.Expr]:
    """``gamma(s)`` of the northern-hemisphere chart (4.9): ``gamma_n = sqrt(1 - |s|^2)``."""
    return [*s, sp.sqrt(1 - sum(si**2 for si in s))]


def inertia_quadratic(a: list[Any], gamma: list[Any]) -> sp.Expr:
    """``c = (A gamma, gamma) = sum_k a_k gamma_k^2``."""
    return sp.Add(*[ak * gk**2 for ak, gk in zip(a, gamma, strict=True)])


def reduced_metric(s: list[sp.Symbol], a: list[sp.Symbol]) -> sp.Matrix:
    """The reduced metric (4.12) in the hemisphere chart.

    ``K_kl = c (a_l delta_kl + a_n s_k s_l / gamma_n^2) - s_k s_l (a_n - a_k)(a_n - a_l)``.
    """
    r = len(s)
    c = inertia_quadratic(a, hemisphere_gamma(s))
    an, gn2 = a[-1], 1 - sum(si**2 for si in s)
    return sp.Matrix(
        r,
        r,
        lambda k, l_: (
            c * (a[l_] * (1 if k == l_ else 0) + an * s[k] * s[l_] / gn2)
            - s[k] * s[l_] * (an - a[k]) * (an - a[l_])
        ),
    )


def gyroscopic_coefficients(s: list[sp.Symbol], a: list[sp.Symbol]) -> sp.MutableDenseNDimArray:
    """The gyroscopic coefficients (4.14) in the hemisphere chart.

    ``C^k_ij = (-s_j (a_j - a_n) delta_ik + s_i (a_i - a_n) delta_jk) / c``, stored as
    ``C[i, j, k]``.
    """
    r = len(s)
    c = inertia_quadratic(a, hemisphere_gamma(s))
    an = a[-1]
    C = zeros3(r, r, r)
    for i in range(r):
        for j in range(r):
            for k in range(r):
                C[i, j, k] = (
                    -s[j] * (a[j] - an) * (1 if i == k else 0)
                    + s[i] * (a[i] - an) * (1 if j == k else 0)
                ) / c
    return C


def phi(c: sp.Expr) -> sp.Expr:
    """``phi = -1/2 ln c`` of the phi-simple structure (Theorem 4.3)."""
    return -sp.log(c) / 2


def density_exponent(n: int) -> sp.Rational:
    """``(2 - n)/2``: the invariant density is ``c^{(2-n)/2}`` (Theorem 4.3, ``r = n - 1``)."""
    return sp.Rational(2 - n, 2)


def log_density(n: int, c: sp.Expr) -> sp.Expr:
    """``(2 - n)/2 ln c``, the log of the invariant density w.r.t. the Liouville volume."""
    return density_exponent(n) * sp.log(c)


def wedge(u: sp.Matrix, v: sp.Matrix) -> sp.Matrix:
    """``u ^ v = u v^T - v u^T`` in ``so(n)``."""
    return u * v.T - v * u.T


def killing(x: sp.Matrix, y: sp.Matrix) -> sp.Expr:
    """The Killing pairing ``(x, y)_kappa = -1/2 tr(x y)``."""
    return -sp.Rational(1, 2) * (x * y).trace()


def default_inertia(n: int) -> np.ndarray:
    """Default ``a_i = 1 + i/n``, ``i = 1..n`` (distinct, so the body is generic)."""
    return 1.0 + np.arange(1, n + 1) / n
