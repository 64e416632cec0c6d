"""The reduced Veselova system on ``T*S^{n-1}`` in the northern-hemisphere chart.

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited".
"""

from __future__ import annotations

from nhfast.symbolic.systems import ReducedChaplyginSystem
from nhfast.systems._common import Potential, potential_expr
from nhfast.systems.veselova_body.formulas import (
    chart_symbols,
    check_dimension,
    gyroscopic_coefficients,
    hemisphere_gamma,
    inertia_quadratic,
    inertia_symbols,
    reduced_metric,
)

__all__: list[str] = []


def reduced_system(n: int, potential: Potential = None) -> ReducedChaplyginSystem:
    """Multi-dimensional Veselova system, ``I(u ^ v) = (Au) ^ (Av)``, reduced to ``T*S^{n-1}``.

    Closed forms of García-Naranjo & Marrero (2020) in the hemisphere chart (4.9), with
    ``c = (A gamma, gamma)``: the metric ``K`` (4.12) and the gyroscopic coefficients ``C``
    (4.14) (:mod:`nhfast.systems.veselova_body.formulas`).  Valid on ``gamma_n > 0`` only.

    Parameters
    ----------
    n : int
        ``n >= 3``; shape space ``S^{n-1}``, ``r = n - 1``.
    potential : sympy.Expr or callable, optional
        ``U(gamma)``; a callable receives the list ``gamma`` (length ``n``).

    Returns
    -------
    ReducedChaplyginSystem
        ``s = (s1..s_{n-1})``, params ``(a1..an)``, ``extra["gamma"]``, ``extra["c"]`` and
        ``extra["domain"]`` (the chart's domain ``1 - |s|^2 > 0``, checked by ``integrate``).
    """
    check_dimension(n)
    s, a = chart_symbols(n), inertia_symbols(n)
    g = hemisphere_gamma(s)
    domain = {"hemisphere chart: gamma_n > 0": 1 - sum(si**2 for si in s)}
    return ReducedChaplyginSystem(
        s=s,
        K=reduced_metric(s, a),
        C=gyroscopic_coefficients(s, a),
        potential=potential_expr(potential, [g]),
        params=a,
        name=f"veselova_{n}",
        extra={"gamma": g, "c": inertia_quadratic(a, g), "domain": domain},
    )
