"""Helpers shared by the example constructors: the potential argument and a paper's frame of D."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy as sp

from nhfast.symbolic._util import generic_rank, matrix_is_zero, simplifier
from nhfast.symbolic.charts import given_frame_domain
from nhfast.symbolic.systems import NonholonomicSystem

__all__: list[str] = []

#: A potential: an expression, a callable of the coordinates, or None (no potential).
Potential = sp.Expr | Callable[..., Any] | None


def potential_expr(potential: Any, args: Sequence[Any]) -> sp.Expr:
    """``potential`` as an expression; a callable receives ``*args``.

    Parameters
    ----------
    potential : sympy.Expr, number, callable or None
        None means ``U = 0``.
    args : sequence
        Arguments of a callable ``potential`` (e.g. the coordinates, or ``[gamma]`` to pass one
        list).

    Returns
    -------
    sympy.Expr
    """
    if potential is None:
        return sp.Integer(0)
    if callable(potential) and not isinstance(potential, sp.Basic):
        return sp.sympify(potential(*args))
    return sp.sympify(potential)


def with_frame(system: NonholonomicSystem, frame: sp.Matrix) -> NonholonomicSystem:
    """Replace the frame of D computed from the 1-forms by ``frame`` (a paper's frame), and
    the frame's singular set (``frame_domain``) by that of ``frame``.

    Raises
    ------
    ValueError
        If the columns of ``frame`` are not annihilated by the constraint 1-forms, or are not
        independent at generic points.
    """
    w = system.constraint_forms
    if w is None or not matrix_is_zero(w * frame):
        raise ValueError("frame: its columns are not annihilated by the constraint 1-forms")
    if generic_rank(frame, system.q + system.params) < system.rank:
        raise ValueError("frame: columns are not independent at generic points")
    system.frame = frame
    # the singular set of the new frame replaces that of the coordinate frame
    system.dependent = None
    system.frame_domain = given_frame_domain(frame, system.q, simplifier(system.simplify))
    return system
