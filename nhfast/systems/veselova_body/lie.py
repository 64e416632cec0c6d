"""The Veselova body from the Lie algebra: reduced data by brackets of left-trivialised fields (for
any inertia operator), and the body equations on ``so(3)`` as a Lie-group (Euler-Poincaré-Suslov)
system."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy as sp

from nhfast.symbolic._util import Simplifier
from nhfast.symbolic.lie_chaplygin import lie_chaplygin_system
from nhfast.symbolic.liegroup import LieGroupSystem, so3_structure_constants
from nhfast.symbolic.systems import ReducedChaplyginSystem
from nhfast.systems._common import Potential, potential_expr
from nhfast.systems.veselova_body.formulas import (
    chart_symbols,
    check_dimension,
    hemisphere_gamma,
    inertia_symbols,
    killing,
    wedge,
)

__all__ = [
    "veselova_left_trivialised",
    "veselova_chaplygin",
    "physical_inertia",
    "veselova_body_so3",
]


def veselova_left_trivialised(
    n: int, compute_C: bool | None = None, simplify: Simplifier = True
) -> ReducedChaplyginSystem:
    """Independent derivation of the Veselova reduced data from the Lie algebra.

    Uses only (4.3)-(4.5), (4.7)-(4.11) of García-Naranjo & Marrero (2020): the horizontal lifts
    ``X_i = gamma ^ u_i``, ``u_i = e_i - (gamma_i/gamma_n) e_n`` in the left trivialisation, the
    bracket of left-trivialised fields ``[Y, Z] = YZ - ZY + Y[Z] - Z[Y]`` with
    ``Y[gamma] = -Y gamma`` (so ``Y[f(s)] = sum_k df/ds_k (-Y gamma)_k``), and the metric
    ``<<Y1, Y2>> = (A Y1 A, Y2)_kappa``, ``(x, y)_kappa = -1/2 tr(x y)``.  Lemma 4.5 and the
    closed forms (4.12)-(4.14) are *not* used, so comparing with :func:`veselova` tests them.
    The work is done by :func:`~nhfast.symbolic.lie_chaplygin.lie_chaplygin_system` with the
    action ``Y -> (-Y gamma)_{1..n-1}`` (which also checks that the ``X_i`` are lifts of
    ``d/ds_i``).

    Parameters
    ----------
    n : int
        ``n >= 3``.
    compute_C : bool, optional
        Solve ``C K = B`` ((4.15)) for ``C``; if False, ``C`` is left zero and only ``K`` and
        ``extra["B"]`` are meaningful.  Default: True for ``n = 3`` only (keeps the cost of
        the default call low; ``C`` for ``n >= 4`` comes from the fraction-free solve of
        :func:`~nhfast.symbolic.lie_chaplygin.pairings_solution`, a few seconds).
    simplify : bool or callable
        Normal form for the entries (see
        :func:`~nhfast.symbolic.lie_chaplygin.lie_chaplygin_system`).

    Returns
    -------
    ReducedChaplyginSystem
        With ``extra["B"]`` (``B[i, j, l] = <<[X_i, X_j], X_l>>``), ``extra["brackets"]`` and
        ``extra["gamma"]``.
    """
    check_dimension(n)
    a = inertia_symbols(n)
    A = sp.diag(*a)
    return veselova_chaplygin(
        n,
        lambda Om: A * Om * A,
        params=a,
        simplify=simplify,
        name=f"veselova_lt_{n}",
        compute_C=n == 3 if compute_C is None else compute_C,
    )


def physical_inertia(j: Sequence[Any]) -> Callable[[sp.Matrix], sp.Matrix]:
    """The rigid-body inertia operator ``I(Omega) = J Omega + Omega J``, ``J = diag(j)``.

    This is the physical inertia of an ``n``-dimensional rigid body with mass tensor ``J``
    (Remark 4.2 of García-Naranjo & Marrero 2020: for ``n >= 4`` it is not of the form (4.5),
    ``I(Omega) = A Omega A``); ``I(e_a ^ e_b) = (j_a + j_b) e_a ^ e_b``.

    Parameters
    ----------
    j : list
        Diagonal of ``J`` (symbols or numbers).

    Returns
    -------
    callable
        ``Omega -> J Omega + Omega J`` on ``n x n`` matrices.
    """
    J = sp.diag(*j)
    return lambda Om: J * Om + Om * J


def veselova_chaplygin(
    n: int,
    inertia: Callable[[sp.Matrix], sp.Matrix] | None = None,
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
    (:func:`physical_inertia`) for which the paper's Theorem 4.3 does not apply.

    Parameters
    ----------
    n : int
        ``n >= 3``.
    inertia : callable, optional
        ``I(Omega)`` on ``n x n`` skew matrices, returning an ``n x n`` matrix; default
        ``A Omega A`` (4.5) with ``A = diag(a1..an)``.
    params : list of sympy.Symbol, optional
        The symbols of ``inertia`` (and of the potential); default ``a1..an`` (required with a
        symbolic custom inertia).
    potential : callable, optional
        ``U(gamma)``, receiving the list ``gamma(s)``.
    simplify, name, compute_C
        As for :func:`~nhfast.symbolic.lie_chaplygin.lie_chaplygin_system` (``name`` defaults
        to ``veselova_chaplygin_<n>``).

    Returns
    -------
    ReducedChaplyginSystem
        Shape ``s1..s<n-1>``; ``extra`` holds ``gamma``, ``B``, ``brackets``, ``lifts``.
    """
    check_dimension(n)
    s = chart_symbols(n)
    r = n - 1
    if inertia is None:
        a = inertia_symbols(n)
        A = sp.diag(*a)
        inertia = lambda Om: A * Om * A  # noqa: E731
        params = a if params is None else params
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
    return red


def veselova_body_so3(potential: Potential = None) -> LieGroupSystem:
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
    a = inertia_symbols(3)
    w = list(sp.symbols("omega1:4", real=True))
    g = list(sp.symbols("gamma1:4", real=True))
    U = potential_expr(potential, [g])
    gv, wv = sp.Matrix(g), sp.Matrix(w)
    dU = sp.Matrix([sp.diff(U, x) for x in g])
    return LieGroupSystem(
        so3_structure_constants(),
        sp.diag(a[1] * a[2], a[0] * a[2], a[0] * a[1]),
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
