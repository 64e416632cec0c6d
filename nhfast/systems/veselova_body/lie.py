"""The Veselova body from the Lie algebra: reduced data by brackets of left-trivialised fields, and
the body equations on ``so(3)`` as a Lie-group (Euler-Poincaré-Suslov) system."""

from __future__ import annotations

import sympy as sp

from nhfast.symbolic._util import Simplifier, simplifier, sphere_normal, zeros3
from nhfast.symbolic.frames import coefficients_from_pairings
from nhfast.symbolic.liegroup import LieGroupSystem, so3_structure_constants
from nhfast.symbolic.systems import ReducedChaplyginSystem
from nhfast.systems._common import Potential, potential_expr
from nhfast.systems.veselova_body.formulas import (
    chart_symbols,
    check_dimension,
    inertia_symbols,
    killing,
    wedge,
)

__all__ = ["veselova_left_trivialised", "veselova_body_so3"]


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

    Parameters
    ----------
    n : int
        ``n >= 3``.
    compute_C : bool, optional
        Solve ``C K = B`` (``LUsolve``) for ``C``; if False, ``C`` is left zero and only
        ``K`` and ``extra["B"]`` are meaningful.  Default: True for ``n = 3`` only (the exact
        symbolic solve is slow for ``n >= 4``; since ``K`` is invertible, checking
        ``C K = B`` for a candidate ``C`` is equivalent and cheap).
    simplify : bool or callable

    Returns
    -------
    ReducedChaplyginSystem
        With ``extra["B"]`` (``B[i, j, l] = <<[X_i, X_j], X_l>>``) and ``extra["brackets"]``.
    """
    check_dimension(n)
    s, a = chart_symbols(n), inertia_symbols(n)
    r = n - 1
    if compute_C is None:
        compute_C = n == 3
    gn = sp.Dummy("gamma_n", positive=True)  # gamma_n as a symbol; d gamma_n/ds_k = -s_k/gamma_n

    def simp(expr: sp.Expr) -> sp.Expr:
        if simplify is True:
            return sphere_normal(expr, s, gn)
        return simplifier(simplify)(expr)

    g = sp.Matrix([*s, gn])
    A = sp.diag(*a)
    e = [sp.eye(n)[:, i] for i in range(n)]
    u = [e[i] - g[i] / gn * e[n - 1] for i in range(r)]
    X = [wedge(g, u[i]) for i in range(r)]

    def dds(Z: sp.Matrix, k: int) -> sp.Matrix:  # total derivative in s_k on the sphere
        return Z.diff(s[k]) + Z.diff(gn) * (-s[k] / gn)

    def deriv(Y: sp.Matrix, Z: sp.Matrix) -> sp.Matrix:  # Y[Z] with Y[gamma] = -Y gamma
        dg = -Y * g
        return sum((dds(Z, k) * dg[k] for k in range(r)), sp.zeros(n, n))

    def metric(Y1: sp.Matrix, Y2: sp.Matrix) -> sp.Expr:
        return killing(A * Y1 * A, Y2)

    K = sp.Matrix(r, r, lambda k, l_: simp(metric(X[k], X[l_])))
    B = zeros3(r, r, r)
    brackets = {}
    for i in range(r):
        for j in range(i + 1, r):
            br = X[i] * X[j] - X[j] * X[i] + deriv(X[i], X[j]) - deriv(X[j], X[i])
            br = br.applyfunc(simp)
            brackets[(i, j)] = br
            for l_ in range(r):
                B[i, j, l_] = simp(metric(br, X[l_]))
                B[j, i, l_] = -B[i, j, l_]
    C = coefficients_from_pairings(K, B, simplify=simp) if compute_C else zeros3(r, r, r)
    root = sp.sqrt(1 - sum(si**2 for si in s))
    K = K.subs(gn, root)
    B = B.applyfunc(lambda x: sp.sympify(x).subs(gn, root))
    C = C.applyfunc(lambda x: sp.sympify(x).subs(gn, root))
    brackets = {key: val.subs(gn, root) for key, val in brackets.items()}
    return ReducedChaplyginSystem(
        s=s,
        K=K,
        C=C,
        params=a,
        name=f"veselova_lt_{n}",
        extra={"gamma": [*s, root], "B": B, "brackets": brackets},
    )


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
