"""The Veselova body from the Lie algebra: reduced data by brackets of left-trivialised fields (for
any inertia operator), and the body equations on ``so(3)`` as a Lie-group (Euler-Poincaré-Suslov)
system.

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sympy as sp

from nhfast.symbolic._util import Simplifier
from nhfast.symbolic.lie_chaplygin import lie_chaplygin_system
from nhfast.symbolic.liegroup import LieGroupSystem, so3_structure_constants
from nhfast.symbolic.systems import ReducedChaplyginSystem
from nhfast.systems._common import Potential, potential_expr
from nhfast.systems.inertia import named_inertia
from nhfast.systems.veselova_body.formulas import (
    chart_symbols,
    check_dimension,
    hemisphere_gamma,
    killing,
    wedge,
)

__all__: list[str] = []


def lie_algebra_system(
    n: int,
    inertia: str | Callable[[sp.Matrix], sp.Matrix] = "a-omega-a",
    params: Sequence[sp.Symbol] | None = None,
    potential: Potential = None,
    simplify: Simplifier = True,
    name: str | None = None,
    compute_C: bool = True,
) -> ReducedChaplyginSystem:
    """The Veselova body on ``SO(n)`` with any inertia operator, as a Lie-Chaplygin system.

    Lifts ``X_k = gamma ^ u_k`` (4.11) in the hemisphere chart (4.9), the metric
    ``<<Y1, Y2>> = (I(Y1), Y2)_kappa`` of the Lagrangian (4.4), the action
    ``Y[gamma] = -Y gamma`` (so ``pi_* Y = (-Y gamma)_{1..n-1}``, Lemma B.2), passed to
    :func:`~nhfast.symbolic.lie_chaplygin.lie_chaplygin_system`: ``K`` (4.12 for (4.5)), ``B``
    (4.13) and ``C`` from (4.15) for any inertia, e.g. the physical one
    (``inertia="physical"``) for which the paper's Theorem 4.3 does not apply.

    Parameters
    ----------
    n : int
        ``n >= 3``.
    inertia : str or callable, optional
        A name of :data:`nhfast.systems.inertia.INERTIAS` with a diagonal parameter matrix
        (default ``"a-omega-a"``, (4.5)), or ``I(Omega)`` on ``n x n`` skew matrices, returning
        an ``n x n`` matrix.
    params : list of sympy.Symbol, optional
        The symbols of ``inertia`` (and of the potential); default: those of the named inertia
        (required with a symbolic custom inertia).
    potential : callable, optional
        ``U(gamma)``, receiving the list ``gamma(s)``.
    simplify, name, compute_C
        As for :func:`~nhfast.symbolic.lie_chaplygin.lie_chaplygin_system` (``name`` defaults
        to ``veselova_chaplygin_<n>``).

    Returns
    -------
    ReducedChaplyginSystem
        Shape ``s1..s<n-1>``; ``extra`` holds ``gamma``, ``B``, ``brackets``, ``lifts`` and
        the chart's ``domain`` ``1 - |s|^2 > 0`` (``integrate`` stops at the equator).
    """
    check_dimension(n)
    s = chart_symbols(n)
    r = n - 1
    if isinstance(inertia, str):
        inertia, named = named_inertia(inertia).explicit(n)
        params = named if params is None else params
    ps = list(params or [])
    gamma = hemisphere_gamma(s)
    g = sp.Matrix(gamma)
    e = sp.eye(n)
    u = [e[:, i] - g[i] / g[n - 1] * e[:, n - 1] for i in range(r)]
    X = [wedge(g, u[i]) for i in range(r)]

    def metric(Y1: sp.Matrix, Y2: sp.Matrix) -> sp.Expr:
        return sp.expand(killing(sp.Matrix(inertia(Y1)), Y2))

    def action(Y: sp.Matrix) -> list[sp.Expr]:
        dg = -Y * g
        return [dg[k] for k in range(r)]

    U = potential_expr(potential, [gamma])
    red = lie_chaplygin_system(
        s,
        X,
        metric,
        potential=U,
        params=ps,
        action=action,
        simplify=simplify,
        name=name or f"veselova_chaplygin_{n}",
        compute_C=compute_C,
    )
    red.extra["gamma"] = gamma
    # the chart's domain (as in the closed-form chart): gamma_n = sqrt(1 - |s|^2) > 0
    red.extra["domain"] = {"hemisphere chart: gamma_n > 0": 1 - sum(si**2 for si in s)}
    return red


def so3_system(potential: Potential = None) -> LieGroupSystem:
    """Veselova's body equations on ``so(3)`` (hat basis, ``omega``) with advected ``gamma``.

    ``I omegadot = I omega x omega + gamma x grad U + lambda gamma``, ``gammadot = gamma x omega``,
    ``(omega, gamma) = 0`` (García-Naranjo & Marrero 2020, Section 4.2); the inertia of (4.5)
    in the hat basis is ``I = diag(a2 a3, a1 a3, a1 a2)``.  The hat map ``Omega = omega^`` has
    ``Omega_12 = -omega_3``, ``Omega_13 = omega_2``, ``Omega_23 = -omega_1``.

    Parameters
    ----------
    potential : callable, optional
        ``U(gamma)``, receiving the list of ``gamma`` symbols.

    Returns
    -------
    LieGroupSystem
        Params ``(a1, a2, a3)``; states ``(omega1..3, gamma1..3)``.
    """
    inertia, a = named_inertia("a-omega-a").explicit(3)
    w = list(sp.symbols("omega1:4", real=True))
    hat = [sp.Matrix([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]]).diff(x) for x in w]
    # the inertia of (4.5) in the hat basis: I_kl = (I(E_k), E_l)_kappa
    metric = sp.Matrix(3, 3, lambda k, j: sp.factor(killing(inertia(hat[k]), hat[j])))
    g = list(sp.symbols("gamma1:4", real=True))
    U = potential_expr(potential, [g])
    gv, wv = sp.Matrix(g), sp.Matrix(w)
    dU = sp.Matrix([sp.diff(U, x) for x in g])
    return LieGroupSystem(
        so3_structure_constants(),
        metric,
        sp.Matrix([g]),
        velocities=w,
        params=a,
        advected=g,
        advected_rhs=list(gv.cross(wv)),
        force=list(gv.cross(dU)),
        potential=U,
        observables={"gamma_norm": sum(x**2 for x in g)},
        name="veselova_body_so3",
    )
