"""Frames, Lie brackets and the objects built from them (pure SymPy).

Conventions (those of Crampin & Mestdag (2010), "Anholonomic frames in constrained dynamics",
and García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems revisited"):

* A vector field on ``Q`` with coordinates ``q`` is a SymPy column ``Matrix`` of its components.
* A *frame* is a ``Matrix`` whose **columns** are the fields ``X_i = X^a_i d/dq^a``.
* Lie bracket ``[X, Y]^a = X^b d_b Y^a - Y^b d_b X^a`` (Jacobi-Lie convention).
* Three-index objects are returned as a SymPy ``MutableDenseNDimArray`` indexed ``[i, j, k]``
  for the quantity written ``X^k_ij`` (two lower indices first, the upper index last):
  ``R[i, j, k] = R^k_ij`` with ``[X_i, X_j] = R^k_ij X_k`` and ``C[i, j, k] = C^k_ij`` with
  ``P[e_i, e_j] = C^k_ij e_k``.
* ``K_ij = <<e_i, e_j>>`` is the reduced metric of a frame ``e`` of D;
  ``B_ijl = <<[e_i, e_j], e_l>>``.
  Then ``C^k_ij K_kl = B_ijl`` (García-Naranjo & Marrero (2020), (4.15)), which is how ``C`` is
  computed: a linear solve with the r x r matrix ``K`` (``LUsolve``), never a symbolic inverse of a
  large matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy as sp

from nhfast.symbolic._util import (
    Simplifier,
    as_column,
    as_matrix,
    as_symbol_list,
    simplifier,
    zeros3,
)

__all__ = [
    "frame_brackets",
    "anholonomity",
    "reduced_metric",
]


def lie_bracket(x: Any, y: Any, q: Sequence[sp.Symbol]) -> sp.Matrix:
    """Jacobi-Lie bracket of two vector fields given as coordinate columns.

    Parameters
    ----------
    x, y : sympy.Matrix
        Components ``X^a(q)``, ``Y^a(q)`` (column or row of length ``len(q)``).
    q : list of sympy.Symbol
        The coordinates.

    Returns
    -------
    sympy.Matrix
        Column ``[X, Y]^a = X^b d_b Y^a - Y^b d_b X^a``.
    """
    q = as_symbol_list(q, "q")
    n = len(q)
    xc = as_column(x, "x", n)
    yc = as_column(y, "y", n)
    return yc.jacobian(q) * xc - xc.jacobian(q) * yc


def _frame(frame: Any, q: Sequence[sp.Symbol], name: str = "frame") -> sp.Matrix:
    e = as_matrix(frame, name)
    if e.rows != len(q):
        raise ValueError(
            f"{name} must have len(q) = {len(q)} rows (one column per field), got {e.rows}"
        )
    if e.cols == 0:
        raise ValueError(f"{name} must have at least one column")
    return e


def frame_brackets(frame: Any, q: Sequence[sp.Symbol]) -> dict[tuple[int, int], sp.Matrix]:
    """All brackets ``[X_i, X_j]`` for ``i < j`` of the columns of ``frame``.

    Parameters
    ----------
    frame : sympy.Matrix
        ``n x m`` matrix whose columns are the fields.
    q : list of sympy.Symbol
        Coordinates.

    Returns
    -------
    dict
        ``{(i, j): column}`` for ``0 <= i < j < m``.
    """
    q = as_symbol_list(q, "q")
    e = _frame(frame, q)
    jac = [e[:, i].jacobian(q) for i in range(e.cols)]
    out: dict[tuple[int, int], sp.Matrix] = {}
    for i in range(e.cols):
        for j in range(i + 1, e.cols):
            out[(i, j)] = jac[j] * e[:, i] - jac[i] * e[:, j]
    return out


def _skew_array(
    r: int, m: int, values: dict[tuple[int, int], sp.Matrix]
) -> sp.MutableDenseNDimArray:
    arr = zeros3(r, r, m)
    for (i, j), col in values.items():
        for k in range(m):
            arr[i, j, k] = col[k]
            arr[j, i, k] = -col[k]
    return arr


def anholonomity(
    frame: Any, q: Sequence[sp.Symbol], simplify: Simplifier = True
) -> sp.MutableDenseNDimArray:
    """Object of anholonomity of a (square) frame: ``[X_i, X_j] = R^k_ij X_k``.

    Solved column by column with ``LUsolve`` (Crampin & Mestdag (2010), Sec. 1:
    ``R^k_ij = Xbar^k_l (X^s_i d_s X^l_j - X^s_j d_s X^l_i)``), without forming ``X^{-1}``.

    Parameters
    ----------
    frame : sympy.Matrix
        Square ``n x n`` matrix whose columns are the frame fields.
    q : list of sympy.Symbol
        Coordinates.
    simplify : bool or callable, optional
        Simplification applied to every component.

    Returns
    -------
    sympy.MutableDenseNDimArray
        ``R[i, j, k] = R^k_ij``, antisymmetric in ``(i, j)``.
    """
    q = as_symbol_list(q, "q")
    e = _frame(frame, q)
    if e.rows != e.cols:
        raise ValueError(
            f"frame must be square for the object of anholonomity, got shape {e.shape}"
        )
    simp = simplifier(simplify)
    brackets = frame_brackets(e, q)
    pairs = sorted(brackets)
    if not pairs:
        return zeros3(e.cols, e.cols, e.cols)
    rhs = sp.Matrix.hstack(*(brackets[p] for p in pairs))
    sol = e.LUsolve(rhs)
    cols = {p: sol[:, c].applyfunc(simp) for c, p in enumerate(pairs)}
    return _skew_array(e.cols, e.cols, cols)


def reduced_metric(metric: Any, frame: Any, simplify: Simplifier = True) -> sp.Matrix:
    """Reduced metric ``K_ij = <<e_i, e_j>> = (E^T G E)_ij`` of a frame ``E`` of D.

    Parameters
    ----------
    metric : sympy.Matrix
        ``n x n`` kinetic-energy metric ``G`` (``T = 1/2 qdot^T G qdot``).
    frame : sympy.Matrix
        ``n x r`` matrix whose columns span D.
    simplify : bool or callable, optional
        Simplification applied entrywise.

    Returns
    -------
    sympy.Matrix
        Symmetric ``r x r`` matrix ``K``.
    """
    g = as_matrix(metric, "metric")
    e = as_matrix(frame, "frame")
    if g.shape != (e.rows, e.rows):
        raise ValueError(f"metric must be {e.rows} x {e.rows} to match frame, got {g.shape}")
    simp = simplifier(simplify)
    k = e.T * g * e
    r = e.cols
    out = sp.zeros(r, r)
    for i in range(r):
        for j in range(i, r):
            out[i, j] = out[j, i] = simp(k[i, j])
    return out


def bracket_pairings(
    metric: Any, frame: Any, q: Sequence[sp.Symbol], simplify: Simplifier = True
) -> sp.MutableDenseNDimArray:
    """``B[i, j, l] = <<[e_i, e_j], e_l>>`` for the columns of ``frame``.

    García-Naranjo & Marrero (2020), (4.13)/(4.15).

    Parameters
    ----------
    metric : sympy.Matrix
        ``n x n`` metric.
    frame : sympy.Matrix
        ``n x r`` frame of D.
    q : list of sympy.Symbol
        Coordinates.
    simplify : bool or callable, optional
        Simplification applied entrywise.

    Returns
    -------
    sympy.MutableDenseNDimArray
        Shape ``(r, r, r)``, antisymmetric in ``(i, j)``.
    """
    q = as_symbol_list(q, "q")
    e = _frame(frame, q)
    g = as_matrix(metric, "metric")
    if g.shape != (e.rows, e.rows):
        raise ValueError(f"metric must be {e.rows} x {e.rows}, got {g.shape}")
    simp = simplifier(simplify)
    ge = g * e
    vals = {p: (col.T * ge).T.applyfunc(simp) for p, col in frame_brackets(e, q).items()}
    return _skew_array(e.cols, e.cols, vals)


def coefficients_from_pairings(
    k: sp.Matrix, b: sp.MutableDenseNDimArray, simplify: Simplifier = True
) -> sp.MutableDenseNDimArray:
    """Solve ``C^k_ij K_kl = B_ijl`` for ``C`` by ``LUsolve`` with ``K``.

    García-Naranjo & Marrero (2020), (4.15).

    Parameters
    ----------
    k : sympy.Matrix
        Symmetric invertible ``r x r`` matrix ``K``.
    b : sympy.NDimArray
        ``B[i, j, l]``, antisymmetric in ``(i, j)``.
    simplify : bool or callable, optional
        Simplification applied entrywise.

    Returns
    -------
    sympy.MutableDenseNDimArray
        ``C[i, j, k] = C^k_ij``.
    """
    k = as_matrix(k, "K")
    r = k.rows
    if k.shape != (r, r) or tuple(b.shape) != (r, r, r):
        raise ValueError(f"K must be r x r and B r x r x r; got {k.shape} and {tuple(b.shape)}")
    simp = simplifier(simplify)
    pairs = [(i, j) for i in range(r) for j in range(i + 1, r)]
    if not pairs:
        return zeros3(r, r, r)
    rhs = sp.Matrix(r, len(pairs), lambda l_, c: b[pairs[c][0], pairs[c][1], l_])
    # K symmetric: C^k_ij K_kl = B_ijl  <=>  K c_ij = b_ij.
    sol = k.LUsolve(rhs)
    vals = {p: sol[:, c].applyfunc(simp) for c, p in enumerate(pairs)}
    return _skew_array(r, r, vals)


def constraint_coefficients(
    metric: Any, frame: Any, q: Sequence[sp.Symbol], simplify: Simplifier = True
) -> sp.MutableDenseNDimArray:
    """Coefficients ``C^k_ij`` defined by ``P[e_i, e_j] = C^k_ij e_k``.

    García-Naranjo & Marrero (2020), (3.6).  ``P`` is the metric-orthogonal projector onto
    ``D = span(e_i)``.  Because ``<<P Z, e_l>> = <<Z, e_l>>``, ``C`` solves
    ``C^k_ij K_kl = B_ijl`` ((4.15) there).

    Parameters
    ----------
    metric : sympy.Matrix
        ``n x n`` metric ``G``.
    frame : sympy.Matrix
        ``n x r`` frame of D (columns).
    q : list of sympy.Symbol
        Coordinates.
    simplify : bool or callable, optional
        Simplification applied to ``K``, ``B`` and ``C``.

    Returns
    -------
    sympy.MutableDenseNDimArray
        ``C[i, j, k] = C^k_ij``.
    """
    k = reduced_metric(metric, frame, simplify=simplify)
    b = bracket_pairings(metric, frame, q, simplify=simplify)
    return coefficients_from_pairings(k, b, simplify=simplify)


def orthogonal_projector(metric: Any, frame: Any, simplify: Simplifier = True) -> sp.Matrix:
    """Metric-orthogonal projector onto ``D = span(columns of frame)``.

    ``P = E K^{-1} E^T G`` with ``K = E^T G E``, computed as ``E * K.LUsolve(E^T G)``.

    Parameters
    ----------
    metric : sympy.Matrix
        ``n x n`` metric ``G``.
    frame : sympy.Matrix
        ``n x r`` frame of D.
    simplify : bool or callable, optional
        Simplification applied entrywise.

    Returns
    -------
    sympy.Matrix
        ``n x n`` matrix with ``P^2 = P``, ``P E = E`` and ``G P = P^T G``.
    """
    g = as_matrix(metric, "metric")
    e = as_matrix(frame, "frame")
    if g.shape != (e.rows, e.rows):
        raise ValueError(f"metric must be {e.rows} x {e.rows}, got {g.shape}")
    k = reduced_metric(g, e, simplify=simplify)
    simp = simplifier(simplify)
    return (e * k.LUsolve(e.T * g)).applyfunc(simp)


def is_skew(arr: sp.NDimArray) -> bool:
    """True when ``arr[i, j, k] = -arr[j, i, k]`` exactly for all indices."""
    from nhfast.symbolic._util import is_zero

    r = arr.shape[0]
    return all(
        is_zero(arr[i, j, k] + arr[j, i, k])
        for i in range(r)
        for j in range(i, r)
        for k in range(arr.shape[2])
    )
