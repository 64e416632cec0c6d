"""Heisenberg system and its generalisation (Jóźwikowski & Respondek (2019), Ex. 6.3, 6.6).

Jóźwikowski & Respondek (2019), "A comparison of vakonomic and nonholonomic dynamics with
applications to non-invariant Chaplygin systems".

``Q = R^3`` (the Heisenberg group), constraint ``zdot = y xdot - x ydot``, i.e. the 1-form
``omega = -y dx + x dy + dz`` (``D = ker omega``), with the left-invariant frame
``e_1 = d/dx + y d/dz``, ``e_2 = d/dy - x d/dz``, ``d/dz`` and ``[e_1, e_2] = -2 d/dz``.
Frame velocities: ``alpha = xdot``, ``beta = ydot``, ``gamma = zdot - y xdot + x ydot``
(``gamma = 0`` on D).

* Example 6.3: ``L = 1/2 (alpha^2 + beta^2 + gamma^2)``.  Every NH trajectory (a straight line
  in D) is an unconstrained extremal, hence vakonomic (this refutes Fernandez-Bloch
  Prop. 3(5)).
* Example 6.6: ``L = f alpha^2 + g alpha beta + h beta^2 + Phi gamma^2 - U`` with ``f, g, h, U``
  functions of ``(x, y)`` and ``Phi`` of ``(x, y, z)``; again every NH trajectory is an
  unconstrained extremal.  (The paper prints ``- U(x, y) beta^2``; we checked both
  readings; here ``U`` is a potential, ``L = T - U``.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy as sp

from nhfast.symbolic._util import as_symbol_list
from nhfast.symbolic.systems import NonholonomicSystem
from nhfast.systems._common import with_frame

__all__: list[str] = []

Coefficient = sp.Expr | float | int | Callable[..., Any] | None


def heisenberg_symbols() -> tuple[sp.Symbol, sp.Symbol, sp.Symbol]:
    """The coordinates ``(x, y, z)`` used by the systems of this module (real symbols)."""
    return sp.symbols("x y z", real=True)


def _coef(value: Coefficient, default: Any, args: Sequence[sp.Symbol], name: str) -> sp.Expr:
    if value is None:
        return sp.sympify(default)
    if callable(value) and not isinstance(value, sp.Basic):
        value = value(*args)
    try:
        expr = sp.sympify(value, strict=True)
    except (sp.SympifyError, TypeError) as exc:
        raise TypeError(f"{name} must be a SymPy expression or a callable: {exc}") from exc
    x, y, z = heisenberg_symbols()
    allowed = set(args)
    bad = {s for s in expr.free_symbols if s in {x, y, z} and s not in allowed}
    if bad:
        raise ValueError(
            f"{name} may depend only on {', '.join(map(str, args))} among the coordinates, "
            f"got {', '.join(sorted(map(str, bad)))}"
        )
    return expr


def generalized_heisenberg(
    f: Coefficient = None,
    g: Coefficient = None,
    h: Coefficient = None,
    Phi: Coefficient = None,  # noqa: N803
    U: Coefficient = None,  # noqa: N803
    params: Sequence[sp.Symbol] = (),
) -> NonholonomicSystem:
    """Generalised Heisenberg system (Jóźwikowski & Respondek (2019), Example 6.6).

    ``L = f alpha^2 + g alpha beta + h beta^2 + Phi gamma^2 - U`` with ``alpha = xdot``,
    ``beta = ydot``, ``gamma = zdot - y xdot + x ydot``; constraint ``gamma = 0``.  The kinetic
    metric is ``G = B^T M B`` with ``(alpha, beta, gamma) = B qdot`` and
    ``M = [[2f, g, 0], [g, 2h, 0], [0, 0, 2 Phi]]``.

    Parameters
    ----------
    f, g, h : sympy.Expr or callable, optional
        Functions of ``(x, y)`` (a callable receives ``x, y``); defaults ``1/2, 0, 1/2``.
    Phi : sympy.Expr or callable, optional
        Function of ``(x, y, z)``; default ``1/2``.
    U : sympy.Expr or callable, optional
        Potential ``U(x, y)``; default 0.
    params : list of sympy.Symbol, optional
        Parameters appearing in the coefficients.

    Returns
    -------
    NonholonomicSystem
        ``q = (x, y, z)``, constraint form ``-y dx + x dy + dz``, frame ``(e_1, e_2)`` (so the
        quasi-velocities are ``(alpha, beta) = (xdot, ydot)``).

    Raises
    ------
    ValueError
        If a coefficient depends on a coordinate it may not depend on, or if the kinetic
        energy is not positive definite (``4 f h > g^2``, ``Phi > 0`` at generic points).
    """
    x, y, z = heisenberg_symbols()
    ps = as_symbol_list(params, "params", allow_empty=True)
    fe = _coef(f, sp.Rational(1, 2), [x, y], "f")
    ge = _coef(g, 0, [x, y], "g")
    he = _coef(h, sp.Rational(1, 2), [x, y], "h")
    pe = _coef(Phi, sp.Rational(1, 2), [x, y, z], "Phi")
    ue = _coef(U, 0, [x, y], "U")
    B = sp.Matrix([[1, 0, 0], [0, 1, 0], [-y, x, 1]])
    M = sp.Matrix([[2 * fe, ge, 0], [ge, 2 * he, 0], [0, 0, 2 * pe]])
    G = (B.T * M * B).applyfunc(sp.expand)
    W = sp.Matrix([[-y, x, 1]])
    system = NonholonomicSystem([x, y, z], G, ue, constraints=W, params=ps)
    return with_frame(system, sp.Matrix([[1, 0], [0, 1], [y, -x]]))


def heisenberg() -> NonholonomicSystem:
    """Heisenberg system, ``L = 1/2 (alpha^2 + beta^2 + gamma^2)``.

    Jóźwikowski & Respondek (2019), Example 6.3.

    Returns
    -------
    NonholonomicSystem
        ``q = (x, y, z)``, no parameters, metric ``diag(1, 1, 0) + omega^T omega`` with
        ``omega = (-y, x, 1)``; frame ``(e_1, e_2)``.
    """
    return generalized_heisenberg()
