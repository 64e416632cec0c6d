"""Frames of a constraint distribution ``D = ker W`` and their singular sets (pure SymPy).

A frame built from constraint 1-forms is a choice: the *coordinate frame*
``e = [I; -W_dep^{-1} W_free]`` (quasi-velocities = velocities of the free coordinates) is
singular where the block ``W_dep`` of the dependent coordinates is; the *regular frame* of one
constraint ``a dq^i + b dq^j = 0`` (the normalised complement of the row) is singular only
where ``a = b = 0``.  Every frame comes with its singular set, written as ``domain`` conditions
of the equations of motion: ``sp.Ne(expr, 0)`` for ``expr != 0`` (a determinant, whose sign
on the start's side ``integrate`` keeps) and ``expr`` for ``expr > 0`` (a sum of squares).

Reference: Crampin & Mestdag (2010), "Anholonomic frames in constrained dynamics", Sec. 3
(frames of D and quasi-velocities).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import combinations
from typing import Any

import sympy as sp

from nhfast.symbolic._util import as_symbol_list, generic_point, numeric_rank

__all__: list[str] = []  # helpers of NonholonomicSystem and the equations of motion

#: Names accepted by ``NonholonomicSystem(frame=...)`` (with ``constraints``).
FRAMES = ("coordinates", "regular")
#: Largest block whose determinant is formed symbolically for the domain.
MAX_DET = 3

Simp = Callable[[sp.Expr], sp.Expr]


def frame_kind(frame: Any, constraints: Any, dependent: Any) -> str | None:
    """``"coordinates"`` or ``"regular"`` for a frame built from ``constraints``; None when
    ``frame`` is a matrix (or absent without constraints).

    Raises
    ------
    ValueError
        An unknown frame name, a frame name without constraints, or ``dependent`` with
        anything but the coordinate frame of ``constraints``.
    """
    if isinstance(frame, str):
        if frame not in FRAMES:
            raise ValueError(
                f"frame must be a matrix whose columns span D or one of "
                f"{', '.join(map(repr, FRAMES))}, got {frame!r}"
            )
        if constraints is None:
            raise ValueError(
                f"frame={frame!r} builds a frame of ker(constraints): give constraints"
            )
        kind: str | None = frame
    elif frame is None and constraints is not None:
        kind = "coordinates"
    else:
        kind = None
    if dependent is not None and kind != "coordinates":
        raise ValueError(
            "dependent names the dependent coordinates of the coordinate frame: it needs "
            f"constraints and frame=None or 'coordinates' (got frame={frame!r})"
        )
    return kind


def dependent_columns(
    w: sp.Matrix, q: list[sp.Symbol], declared: list[sp.Symbol], dependent: Any
) -> list[int]:
    """Indices of the dependent coordinates: ``dependent`` (checked), or else the last ``k``
    coordinates whose block of ``w`` is generically invertible.

    Raises
    ------
    ValueError
        ``dependent`` not ``k`` distinct coordinates of ``q``, or with a singular block.
    """
    n, k = w.cols, w.rows
    pt = generic_point(declared, seed=11)
    if dependent is None:
        for dep in reversed(list(combinations(range(n), k))):
            if numeric_rank(w[:, list(dep)], pt) == k:
                return list(dep)
        raise ValueError("constraints: no invertible k x k block found")  # pragma: no cover
    syms = as_symbol_list(dependent, "dependent")
    if len(syms) != k or len(set(syms)) != k:
        raise ValueError(
            f"dependent must be {k} distinct coordinate(s) (one per constraint), got "
            f"{', '.join(map(str, syms))}"
        )
    missing = [a for a in syms if a not in q]
    if missing:
        raise ValueError(f"dependent contains {', '.join(map(str, missing))}, which is not in q")
    dep = sorted(q.index(a) for a in syms)
    pts = [pt, generic_point(declared, seed=12), generic_point(declared, seed=13)]
    if all(numeric_rank(w[:, dep], p) < k for p in pts):
        raise ValueError(
            f"dependent: the block of constraints in the columns of "
            f"{', '.join(str(q[a]) for a in dep)} is singular at generic points (these "
            "velocities cannot be solved for)"
        )
    return dep


#: Largest expression (``count_ops``) that :func:`cancel_removable` rewrites.
MAX_CANCEL_OPS = 400


def cancel_removable(e: sp.Expr) -> sp.Expr:
    """``e`` as one quotient with the common factors of numerator and denominator cancelled
    (``together``, ``cancel``, with functions such as ``tan(theta)`` as generators): a
    removable ``0/0`` of a symbolic solve (a pivot such as ``tan(theta)`` that cancels
    analytically) is not left for the generated code to evaluate.  Expressions without
    a variable denominator, or larger than ``MAX_CANCEL_OPS`` operations, are returned as they
    are (the cost stays bounded)."""
    e = sp.sympify(e)
    if not e.free_symbols or sp.count_ops(e) > MAX_CANCEL_OPS:
        return e
    divides = any(
        p.exp.is_negative and p.base.free_symbols for p in e.atoms(sp.Pow) if p.exp.is_number
    )
    if not divides:
        return e
    num, den = sp.fraction(sp.together(e))
    return sp.cancel(num / den)


def _normal(e: sp.Expr, simp: Simp) -> sp.Expr:
    """``simp(e)`` with a removable ``0/0`` of the solve cancelled (:func:`cancel_removable`)."""
    return cancel_removable(simp(e))


def coordinate_frame(w: sp.Matrix, dep: list[int], simp: Simp) -> sp.Matrix:
    """``e = [I; -W_dep^{-1} W_free]`` (rows in the order of ``q``), one column per free
    coordinate."""
    n = w.cols
    free = [a for a in range(n) if a not in dep]
    h = w[:, dep].LUsolve(-w[:, free])
    e = sp.zeros(n, len(free))
    for c, a in enumerate(free):
        e[a, c] = 1
    for row, a in enumerate(dep):
        for c in range(len(free)):
            e[a, c] = _normal(h[row, c], simp)
    return e


def denominators(entries: Sequence[sp.Expr], q: Sequence[sp.Symbol]) -> list[sp.Expr]:
    """The distinct denominators (of ``together``) of ``entries`` that depend on ``q``."""
    qs, out = set(q), []
    for e in entries:
        den = sp.fraction(sp.together(e))[1]
        if den.free_symbols & qs and den not in out:
            out.append(den)
    return out


def block_domain(
    w: sp.Matrix, dep: list[int], q: list[sp.Symbol], simp: Simp, frame: sp.Matrix | None = None
) -> dict[str, Any]:
    """``{label: sp.Ne(det W_dep, 0)}``, or empty when the determinant is constant.

    For a block larger than ``MAX_DET`` the determinant is not formed: the condition is the
    product of the denominators of the entries of ``frame`` (whose zero set holds the
    singular set) ``!= 0``, or empty when they are constant.
    """
    names = ", ".join(str(q[a]) for a in dep)
    if len(dep) > MAX_DET:
        dens = denominators(list(frame) if frame is not None else [], q)
        if not dens:
            return {}
        prod = sp.Mul(*dens)
        label = f"coordinate frame ({names} dependent): denominators {prod} != 0"
        return {label: sp.Ne(prod, 0)}
    det = simp(w[:, dep].det())
    if not sp.sympify(det).free_symbols & set(q):
        return {}
    return {f"coordinate frame ({names} dependent): det W_dep = {det} != 0": sp.Ne(det, 0)}


def _row_pair(w: sp.Matrix) -> tuple[int, int]:
    if w.rows != 1:
        raise ValueError(
            f"frame='regular' is offered for one constraint row, got {w.rows}: name the "
            "dependent coordinates instead (dependent=[...])"
        )
    cols = [a for a in range(w.cols) if not (w[0, a] == 0 or sp.simplify(w[0, a]) == 0)]
    if len(cols) != 2:
        raise ValueError(
            "frame='regular' is offered for a constraint a dq^i + b dq^j = 0 with two entries "
            f"that are not identically zero, got {len(cols)}: name the dependent coordinates "
            "instead (dependent=[...])"
        )
    return cols[0], cols[1]


def _norm2(w: sp.Matrix, simp: Simp) -> sp.Expr:
    i, j = _row_pair(w)
    n2 = simp(w[0, i] ** 2 + w[0, j] ** 2)
    return sp.trigsimp(n2) if n2.has(sp.sin, sp.cos, sp.tan) else n2


def regular_frame(w: sp.Matrix, q: Sequence[sp.Symbol], simp: Simp) -> sp.Matrix:
    """The normalised complement ``(b, -a) / sqrt(a^2 + b^2)`` of the row ``(a, b)`` in its two
    columns, followed by the coordinate fields of the other coordinates (in the order of
    ``q``)."""
    i, j = _row_pair(w)
    a, b = w[0, i], w[0, j]
    n2 = _norm2(w, simp)
    norm = sp.sqrt(n2)
    n = w.cols
    first = sp.zeros(n, 1)
    first[i] = _normal(b / norm, simp)
    first[j] = _normal(-a / norm, simp)
    cols = [first] + [sp.eye(n)[:, c] for c in range(n) if c not in (i, j)]
    return sp.Matrix.hstack(*cols)


def regular_domain(w: sp.Matrix, q: Sequence[sp.Symbol], simp: Simp) -> dict[str, Any]:
    """``{label: a^2 + b^2}`` (``> 0``), or empty when ``a^2 + b^2`` is free of ``q``."""
    n2 = _norm2(w, simp)
    if not n2.free_symbols & set(q):
        return {}
    return {f"regular frame: |w|^2 = {n2} > 0": n2}


def given_frame_domain(e: sp.Matrix, q: Sequence[sp.Symbol], simp: Simp) -> dict[str, Any]:
    """The singular set of a given frame: its entries' denominators ``!= 0`` and, for at most
    ``MAX_DET`` columns, its Gram determinant ``det(E^T E) > 0`` (full rank)."""
    qs = set(q)
    out: dict[str, Any] = {}
    seen: set = set()
    for entry in e:
        den = sp.denom(entry)
        if den.free_symbols & qs and den not in seen:
            seen.add(den)
            out[f"frame: denominator {den} != 0"] = sp.Ne(den, 0)
    if e.cols <= MAX_DET and not seen:
        gram = simp((e.T * e).det())
        if sp.sympify(gram).free_symbols & qs:
            out[f"frame: Gram determinant {gram} > 0"] = gram
    return out
