"""Constraint 1-forms, the integrability test, fresh symbols and THE multiplier sign convention.

Everything in :mod:`nhfast.symbolic.vakonomic` starts from a
:class:`~nhfast.symbolic.systems.NonholonomicSystem` with ``L = 1/2 qdot^T g(q) qdot - U(q)``
and constraint 1-forms ``W`` (``m x n``, rows ``W_i``, ``D = ker W``).

Sign convention (the only one in this subpackage; the papers' signs are converted here)
-----------------------------------------------------------------------------------------
* **Vakonomic multipliers in coordinates**, ``lambda_i``: ``calL = L + lambda_i W_i(qdot)``
  (Martinez, Cortes & de Leon 2000, eq. (4)).  The equations are
  ``E(L) + W^T lambdadot + K^T lambda = 0`` with ``E_A(L) = d/dt dL/dqdot^A - dL/dq^A`` and
  ``K_iA = (d_B W_iA - d_A W_iB) qdot^B``.  Jozwikowski & Respondek (2019) write
  ``L - <lambda, omega(qdot)>``: their multiplier is ``-lambda``.  The NH-vs-VAK tests call the
  same multipliers ``mu`` (there ``lambda`` names the nonholonomic reaction, as in that paper).
* **Vakonomic multipliers in an adapted frame**, ``mu_a``: ``calL = L - mu_a v^a`` with
  ``v^a = theta^a(qdot)`` the transverse quasi-velocities (Crampin & Mestdag 2010, Section 4;
  Mestdag & Crampin 2010, eq. (4.2)).  With ``theta = Lambda W`` (``Lambda`` as in
  :class:`~nhfast.symbolic.vakonomic.equations.FrameVakonomicEquations`),
  ``lambda = -Lambda^T mu`` (:func:`frame_to_coordinate_multipliers`).
* **Nonholonomic (reaction) multipliers**: ``E(L) = W^T lambda`` (Mestdag & Crampin 2010,
  Section 2).

References: Jóźwikowski & Respondek (2019), "A comparison of vakonomic and nonholonomic dynamics
with applications to non-invariant Chaplygin systems"; Crampin & Mestdag (2010), "Anholonomic frames
in constrained dynamics"; Mestdag & Crampin (2010), "Nonholonomic systems as restricted
Euler-Lagrange systems"; Martínez, Cortés & de León (2000), "The geometrical theory of constraints
applied to the dynamics of vakonomic mechanical systems: the vakonomic bracket".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy as sp

from nhfast._records import Check
from nhfast.symbolic import frames as _fr
from nhfast.symbolic._util import as_matrix, as_symbol_list, fresh_symbols, generic_rank, is_zero

__all__: list[str] = []

INTEGRABLE_NOTE = (
    "D is integrable: the nonholonomic and vakonomic principles coincide "
    "(Jozwikowski & Respondek 2019, Prop. 3.12), every nonholonomic trajectory is vakonomic"
)


@dataclass
class SymbolicVerdict(Check):
    """Outcome of a symbolic test that holds for all trajectories or fails with an obstruction.

    A :class:`~nhfast.analysis.result.Check` (the one verdict record of nhfast) with the
    symbolic evidence attached; ``figures`` is filled from it for reports.

    Attributes
    ----------
    name : str
        What was tested.
    holds : bool
        True iff every condition vanishes identically (after ``subs``).
    statement : str
        One sentence with the verdict and its reason.
    conditions : dict of str to list of sympy.Expr
        The expressions that must vanish identically, grouped by name.
    obstruction : list of sympy.Expr
        The conditions that do not vanish (empty when ``holds``).
    integrable : bool
        True when D is integrable (then NH and VAK coincide).
    data : dict
        Further results, e.g. ``"multiplier"`` (a multiplier section) or ``"lagrangian"``.
    """

    conditions: dict[str, list[sp.Expr]] = field(default_factory=dict)
    obstruction: list[sp.Expr] = field(default_factory=list)
    integrable: bool = False
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.figures = {
            "conditions": sum(len(v) for v in self.conditions.values()),
            "obstruction": [str(e) for e in self.obstruction],
            "integrable": self.integrable,
            **self.figures,
        }

    def __bool__(self) -> bool:
        return bool(self.holds)


# -- arguments and symbols ------------------------------------------------------------------------


def check_system(system: Any) -> Any:
    """``system`` if it is a NonholonomicSystem with constraints, else raise."""
    from nhfast.symbolic.systems import NonholonomicSystem

    if not isinstance(system, NonholonomicSystem):
        raise TypeError(f"system must be a NonholonomicSystem, got {type(system).__name__}")
    if system.rank >= system.dim:
        raise ValueError(
            "system has no constraints (D = TQ): vakonomic, nonholonomic and free motions "
            "coincide; give constraints or a frame of rank < dim"
        )
    return system


def taken_names(system: Any) -> set[str]:
    """Names of the coordinates and parameters of ``system``."""
    return {str(s) for s in (*system.q, *system.params)}


def velocity_symbols(system: Any) -> list[sp.Symbol]:
    """Symbols ``<q>_dot`` for the velocities (fresh names, real)."""
    return fresh_symbols([f"{a}_dot" for a in system.q], taken_names(system))


def multiplier_symbols(system: Any, m: int, prefix: str = "lambda") -> list[sp.Symbol]:
    """Symbols ``<prefix>_1..<prefix>_m`` for the multipliers (fresh names, real)."""
    return fresh_symbols([f"{prefix}_{i + 1}" for i in range(m)], taken_names(system))


def quasi_velocity_symbols(
    system: Any, count: int, names: Sequence[sp.Symbol] | None = None
) -> list[sp.Symbol]:
    """``v_1..v_count`` (fresh) or the given ``names``, checked for number and clashes."""
    if names is None:
        return fresh_symbols([f"v_{i + 1}" for i in range(count)], taken_names(system))
    v = as_symbol_list(names, "velocities")
    if len(v) != count:
        raise ValueError(f"velocities must have {count} symbols, got {len(v)}")
    if set(v) & (set(system.q) | set(system.params)):
        raise ValueError("velocities clash with coordinates or parameters")
    return v


def subs_map(system: Any, subs: Mapping[Any, Any] | None) -> dict[sp.Symbol, sp.Expr]:
    """Parameter relations ``{parameter: value}``, checked against ``system.params``."""
    if subs is None:
        return {}
    if not isinstance(subs, Mapping):
        raise TypeError(f"subs must be a mapping {{parameter: value}}, got {type(subs).__name__}")
    out = {}
    for k, val in subs.items():
        if k not in system.params:
            raise ValueError(f"subs: {k} is not a parameter of the system ({system.params})")
        out[k] = sp.sympify(val)
    return out


# -- normal form for rational functions of sin and cos ----------------------------------------


def _is_cos_power(e: Any) -> bool:
    return bool(e.is_Pow and isinstance(e.base, sp.cos) and e.exp.is_Integer and int(e.exp) >= 2)


def _cos_power_to_sin(e: sp.Pow) -> sp.Expr:
    arg, k = e.base.args[0], int(e.exp)
    return (1 - sp.sin(arg) ** 2) ** (k // 2) * sp.cos(arg) ** (k % 2)


def _trig_polynomial(e: sp.Expr) -> sp.Expr:
    """Expanded, with ``cos(u)^k`` (``k >= 2``) rewritten through ``1 - sin(u)^2``."""
    e = sp.expand(e)
    if e.has(sp.cos):
        e = sp.expand(e.replace(_is_cos_power, _cos_power_to_sin))
    return e


def numerator(expr: Any) -> sp.Expr:
    """Numerator of ``expr`` over a common denominator, expanded and trig-normalised."""
    num, _ = sp.fraction(sp.together(sp.sympify(expr)))
    return _trig_polynomial(num)


def normal(expr: Any) -> sp.Expr:
    """Normal form ``p / q`` of a rational function of the symbols, ``sin`` and ``cos``.

    Numerator and denominator are expanded with ``cos(u)^2 -> 1 - sin(u)^2`` (so each is at
    most linear in every ``cos(u)``, a canonical form for trigonometric polynomials) and their
    gcd is cancelled as polynomials.  No ``simplify``: fast on large expressions, and an
    expression built from rational functions of ``sin``/``cos`` vanishes iff its normal
    form is ``0``.
    """
    num, den = sp.fraction(sp.together(sp.sympify(expr)))
    c, p, q = sp.cancel((_trig_polynomial(num), _trig_polynomial(den)))
    return c * p / q


def _rational_in_trig(e: sp.Expr) -> bool:
    """Only symbols, ``sin``/``cos`` of symbols and integer powers: the normal form is canonical."""
    funcs = e.atoms(sp.Function)
    return all(isinstance(f, (sp.sin, sp.cos)) and f.args[0].is_Symbol for f in funcs) and all(
        p.exp.is_Integer for p in e.atoms(sp.Pow)
    )


def vanishes(expr: Any) -> bool:
    """Exact zero test: the :func:`normal` form, falling back to ``simplify`` only when the
    expression is not a rational function of the symbols, ``sin`` and ``cos``."""
    e = normal(expr)
    if e == 0:
        return True
    return False if _rational_in_trig(e) else is_zero(e)


def normal_forms(exprs: Sequence[Any], subs: Mapping[Any, Any] | None = None) -> list[sp.Expr]:
    """:func:`normal` of each expression, after the parameter relations ``subs``."""
    return [normal(sp.sympify(x).subs(subs)) if subs else normal(x) for x in exprs]


def nonzero(exprs: Sequence[Any]) -> list[sp.Expr]:
    """The expressions that do not vanish identically (see :func:`vanishes`)."""
    return [x for x in exprs if not vanishes(x)]


# -- constraint 1-forms and integrability -----------------------------------------------------


def completed_frame(system: Any, complement: Any = None) -> sp.Matrix:
    """``[frame of D | complement]`` (``n x n``); default complement: coordinate fields."""
    n, m = system.dim, system.dim - system.rank
    if complement is None:
        return system.completed_frame()
    comp = as_matrix(complement, "complement")
    if comp.shape != (n, m):
        raise ValueError(
            f"complement must be {n} x {m} (fields completing the frame of D), got shape "
            f"{comp.shape}"
        )
    full = sp.Matrix.hstack(system.frame, comp)
    if generic_rank(full, system.q + system.params) < n:
        raise ValueError(
            "complement: frame of D and complement are not independent (it does not complete "
            "the frame of D to a frame of TQ)"
        )
    return full


def constraint_one_forms(system: Any, complement: Any = None) -> sp.Matrix:
    """Constraint 1-forms ``W`` (``m x n``, ``D = ker W``) of a nonholonomic system.

    Parameters
    ----------
    system : NonholonomicSystem
    complement : sympy.Matrix, optional
        Used only when the system has no ``constraint_forms``: ``n x m`` fields completing the
        frame of D (default: ``system.completed_frame()``).  The 1-forms are then the last
        ``m`` rows of the inverse of the completed frame (the coframe ``theta^a``).

    Returns
    -------
    sympy.Matrix
    """
    system = check_system(system)
    if system.constraint_forms is not None:
        return system.constraint_forms
    full = completed_frame(system, complement)
    inv = full.LUsolve(sp.eye(system.dim))
    return inv[system.rank :, :].applyfunc(normal)


def is_integrable(system: Any) -> bool:
    """True when D is involutive (``W [X_i, X_j] = 0`` for the fields of D), i.e. holonomic.

    Then every ``R^a_{alpha beta}`` vanishes, the multipliers drop out of the vakonomic
    equations for ``q``, and nonholonomic and vakonomic motions coincide for every choice of
    multipliers (Jozwikowski & Respondek 2019, Props. 3.12-3.13).
    """
    system = check_system(system)
    w = constraint_one_forms(system)
    return all(
        vanishes(e) for col in _fr.frame_brackets(system.frame, system.q).values() for e in w * col
    )


def frame_to_coordinate_multipliers(Lambda: Any, mu: Any) -> Any:
    """Coordinate multipliers ``lambda = -Lambda^T mu`` of frame multipliers ``mu``.

    The one conversion between the two forms of the convention above (``-mu_a theta^a =
    lambda_i W_i``); works for SymPy matrices and NumPy arrays alike.
    """
    return -(Lambda.T @ mu)


# -- mechanics in coordinates --------------------------------------------------------------------


def forces(g: sp.Matrix, U: sp.Expr, q: Sequence[sp.Symbol], qd: Sequence[Any]) -> list[sp.Expr]:
    """``F_A = -(d_C g_AB - 1/2 d_A g_BC) qdot^B qdot^C - d_A U``, so ``E(L) = g qddot - F``."""
    n = len(q)
    out = []
    for A in range(n):
        f = -sp.diff(U, q[A])
        for B in range(n):
            for C in range(n):
                c = sp.diff(g[A, B], q[C]) - sp.Rational(1, 2) * sp.diff(g[B, C], q[A])
                if c != 0:
                    f -= c * qd[B] * qd[C]
        out.append(f)
    return out


def euler_lagrange(
    g: sp.Matrix, U: sp.Expr, q: Sequence[sp.Symbol], qdot: Any, qddot: Any
) -> sp.Matrix:
    """``E(L) = g qddot - F`` for ``L = 1/2 qdot^T g qdot - U`` at given velocity and
    acceleration columns."""
    return g * sp.Matrix(qddot) - sp.Matrix(forces(g, U, q, list(qdot)))
