"""Rigid bodies on SO(n) from the matrix-level engine: the Veselova (LR) and Suslov families.

The inertia is one of the named operators of :mod:`nhfast.systems.inertia` (``"a-omega-a"``,
``"physical"``, ``"pairwise"``); any other is a :class:`~nhfast.symbolic.rigid_body.RigidBody`
away.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import sympy as sp

from nhfast.structured_field import StructuredVectorField
from nhfast.symbolic import rigid_body as rb
from nhfast.systems.inertia import named_inertia

__all__ = [
    "rigid_body",
    "suslov_rigid_body",
    "rigid_body_params",
]


def _named(inertia: str) -> tuple[str, Callable[..., Any], tuple[rb.Param, ...]]:
    spec = named_inertia(inertia)
    return spec.name, spec.operator, (spec.param,)


def rigid_body(
    n: int,
    inertia: str = "physical",
    constraint: str = "space_fixed",
    potential: Callable[[list[sp.Symbol]], Any] | sp.Expr | None = None,
    matrix_potential: Callable[..., Any] | None = None,
    axis: bool = False,
) -> rb.RigidBody:
    """The description (:class:`~nhfast.symbolic.rigid_body.RigidBody`) of a named body.

    Parameters
    ----------
    n : int
        ``n >= 3``.
    inertia : {"a-omega-a", "physical", "pairwise"}
    constraint : {"space_fixed", "body_fixed"}
        Veselova (LR) or Suslov family.
    potential, matrix_potential : callable or sympy.Expr, optional
        As for :class:`~nhfast.symbolic.rigid_body.RigidBody`: ``U([gamma1, ...])`` of the
        components, or ``matrix_potential(gamma, *params)`` at matrix level.
    axis : bool
        ``body_fixed`` only: the constraint axis is a parameter vector ``e`` (after the
        inertia's parameters) instead of ``e_n``; ``e_n`` is an eigenvector of the named
        inertias, so only a tilted axis gives non-trivial free motion.
    """
    inertia, fn, params = _named(inertia)
    if constraint not in ("space_fixed", "body_fixed"):
        raise ValueError(f"constraint must be 'space_fixed' or 'body_fixed', got {constraint!r}")
    if axis and constraint != "body_fixed":
        raise ValueError("axis=True needs constraint='body_fixed'")
    if axis:
        params = (*params, rb.vector("axis"))
        inner = fn

        def fn(Om: Any, *p: Any) -> Any:
            return inner(Om, *p[:-1])

        if matrix_potential is not None:
            pot = matrix_potential

            def matrix_potential(gamma: Any, *p: Any) -> Any:
                return pot(gamma, *p[:-1])

    con = (
        rb.space_fixed() if constraint == "space_fixed" else rb.body_fixed("axis" if axis else None)
    )
    family = "veselova" if constraint == "space_fixed" else "suslov"
    return rb.RigidBody(
        n,
        fn,
        params,
        potential=potential,
        matrix_potential=matrix_potential,
        constraint=con,
        name=f"{family}_{inertia.replace('-', '_')}_{n}",
    )


def suslov_rigid_body(
    n: int, inertia: str = "physical", potential: Any = None, axis: bool = True
) -> StructuredVectorField:
    """The n-dimensional Suslov problem (``Omega in e ^ R^n``, ``e`` fixed in the body).

    With ``axis=True`` (default) ``e`` is the last parameter vector (see
    :func:`rigid_body_params` with ``axis=True``), so the free motion is not trivial; with
    ``axis=False`` it is ``e_n``.

    Parameters
    ----------
    n : int
        ``n >= 3``.
    inertia : {"a-omega-a", "physical", "pairwise"}
    potential : callable or sympy.Expr, optional
        ``U([gamma1, ..., gamma_n])`` of the components, or an expression in ``gamma1..``.
    axis : bool
        The constraint axis is a parameter vector (default) or ``e_n``.

    Returns
    -------
    StructuredVectorField
        States ``(gamma, m)``, parameters as in :func:`rigid_body_params`.
    """
    body = rigid_body(n, inertia, "body_fixed", potential=potential, axis=axis)
    return body.vector_field()


def rigid_body_params(
    n: int,
    inertia: str = "physical",
    rng: np.random.Generator | None = None,
    axis: bool = False,
) -> np.ndarray:
    """A parameter vector for a named inertia (distinct moments: a generic body).

    Without ``rng``: ``a_i = j_i = 1 + i/n`` and ``H_ij = j_i + j_j`` (the physical body's pair
    moments, so "pairwise" and "physical" agree); with ``rng``: random positive moments
    (``H`` symmetric with entries in ``[1, 2]``).  With ``axis=True`` a unit Suslov axis
    follows (``e_n`` tilted towards ``e_1``, or random with ``rng``).

    Parameters
    ----------
    n : int
        ``n >= 3``.
    inertia : {"a-omega-a", "physical", "pairwise"}
    rng : numpy.random.Generator, optional
        Draw random moments instead of the fixed ones.
    axis : bool
        Append a unit Suslov axis (the parameters of ``suslov_rigid_body(..., axis=True)``).

    Returns
    -------
    ndarray
        ``n`` moments (``n * n`` for ``"pairwise"``), then ``n`` axis entries with ``axis``.
    """
    if axis:
        if rng is None:
            e = np.zeros(n)
            e[-1], e[0] = 1.0, 0.5
        else:
            e = rng.normal(size=n)
        base = rigid_body_params(n, inertia, rng)
        return np.concatenate([base, e / np.linalg.norm(e)])
    inertia = _named(inertia)[0]
    if rng is None:
        d = 1.0 + np.arange(1, n + 1) / n
    else:
        d = 1.0 + rng.random(n)
    if inertia != "pairwise":
        return d
    if rng is None:
        H = d[:, None] + d[None, :]
    else:
        H = 1.0 + rng.random((n, n))
        H = (H + H.T) / 2
    return H.ravel()
