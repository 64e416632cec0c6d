"""Rigid bodies on SO(n) from the matrix-level engine: Veselova (LR) and Suslov families.

Three inertia operators are named (any other is a :class:`~nhfast.symbolic.rigid_body.RigidBody`
away):

* ``"seed"`` -- ``I(Om) = A Om A``, ``A = diag(a)``: the inertia of García-Naranjo & Marrero
  (2020), ``I(u ^ v) = (Au) ^ (Av)``;
* ``"physical"`` -- ``I(Om) = J Om + Om J``, ``J = diag(j)``: a physical body with mass tensor
  ``J`` (the two agree only for ``n = 3``);
* ``"pairwise"`` -- ``I(Om)_ij = H_ij Om_ij``: one moment of inertia per pair ``(i, j)`` (``H``
  symmetric; its diagonal is unused): no diagonal-plus-low-rank structure, a dense solve.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import sympy as sp

from nhfast.structured_field import StructuredVectorField
from nhfast.symbolic import rigid_body as rb

__all__ = [
    "INERTIAS",
    "rigid_body",
    "veselova_rigid_body",
    "suslov_rigid_body",
    "rigid_body_params",
    "inertia_operator",
    "omega_from_state",
]

#: Named inertia operators: name -> (matrix-level callable, parameter declarations).
INERTIAS: dict[str, tuple[Callable[..., Any], tuple[rb.Param, ...]]] = {
    "seed": (lambda Om, A: A * Om * A, (rb.diagonal("a", positive=True),)),
    "physical": (lambda Om, J: J * Om + Om * J, (rb.diagonal("j", positive=True),)),
    "pairwise": (lambda Om, H: sp.HadamardProduct(H, Om), (rb.symmetric("H"),)),
}


def _named(inertia: str) -> tuple[Callable[..., Any], tuple[rb.Param, ...]]:
    if inertia not in INERTIAS:
        raise ValueError(f"inertia must be one of {sorted(INERTIAS)}, got {inertia!r}")
    return INERTIAS[inertia]


def rigid_body(
    n: int,
    inertia: str = "physical",
    constraint: str = "space_fixed",
    potential: Callable[..., Any] | None = None,
    component_potential: Callable[[list[sp.Symbol]], Any] | None = None,
    axis: bool = False,
) -> rb.RigidBody:
    """The description (:class:`~nhfast.symbolic.rigid_body.RigidBody`) of a named body.

    Parameters
    ----------
    n : int
        ``n >= 3``.
    inertia : {"seed", "physical", "pairwise"}
    constraint : {"space_fixed", "body_fixed"}
        Veselova (LR) or Suslov family.
    potential, component_potential : callable, optional
        As for :class:`~nhfast.symbolic.rigid_body.RigidBody` (``potential(gamma, *params)``
        at matrix level, or ``component_potential([gamma1, ...])``).
    axis : bool
        ``body_fixed`` only: the constraint axis is a parameter vector ``e`` (after the
        inertia's parameters) instead of ``e_n``; ``e_n`` is an eigenvector of the named
        inertias, so only a tilted axis gives non-trivial free motion.
    """
    fn, params = _named(inertia)
    if constraint not in ("space_fixed", "body_fixed"):
        raise ValueError(f"constraint must be 'space_fixed' or 'body_fixed', got {constraint!r}")
    if axis and constraint != "body_fixed":
        raise ValueError("axis=True needs constraint='body_fixed'")
    if axis:
        params = (*params, rb.vector("axis"))
        inner = fn

        def fn(Om: Any, *p: Any) -> Any:
            return inner(Om, *p[:-1])

        if potential is not None:
            pot = potential

            def potential(gamma: Any, *p: Any) -> Any:
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
        component_potential=component_potential,
        constraint=con,
        name=f"{family}_{inertia}_{n}",
    )


def veselova_rigid_body(
    n: int, inertia: str = "physical", potential: Any = None
) -> StructuredVectorField:
    """Veselova body on SO(n) (``Omega in gamma ^ R^n``) with a named inertia; structured kernels.

    Parameters
    ----------
    n : int
        ``n >= 3``.
    inertia : {"seed", "physical", "pairwise"}
    potential : callable, optional
        ``U([gamma1, ..., gamma_n])`` of the components.

    Returns
    -------
    StructuredVectorField
        States ``(gamma, m)``, parameters as in :func:`rigid_body_params`; observables
        :data:`nhfast.symbolic.rigid_body.OBSERVABLES`.
    """
    return rigid_body(n, inertia, "space_fixed", component_potential=potential).vector_field()


def suslov_rigid_body(
    n: int, inertia: str = "physical", potential: Any = None, axis: bool = True
) -> StructuredVectorField:
    """The n-dimensional Suslov problem (``Omega in e ^ R^n``, ``e`` fixed in the body).

    With ``axis=True`` (default) ``e`` is the last parameter vector (see
    :func:`rigid_body_params` with ``axis=True``), so the free motion is not trivial; with
    ``axis=False`` it is ``e_n``.
    """
    body = rigid_body(n, inertia, "body_fixed", component_potential=potential, axis=axis)
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
    """
    if axis:
        if rng is None:
            e = np.zeros(n)
            e[-1], e[0] = 1.0, 0.5
        else:
            e = rng.normal(size=n)
        base = rigid_body_params(n, inertia, rng)
        return np.concatenate([base, e / np.linalg.norm(e)])
    _named(inertia)
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


def inertia_operator(inertia: str, params: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """NumPy ``Om -> I(Om)`` (on ``(..., n, n)`` arrays) of a named inertia."""
    _named(inertia)
    p = np.asarray(params, dtype=float)
    if inertia == "seed":
        return lambda Om: p[..., :, None] * Om * p[..., None, :]
    if inertia == "physical":
        return lambda Om: p[..., :, None] * Om + Om * p[..., None, :]
    n = int(round(np.sqrt(p.shape[-1])))
    H = p.reshape(*p.shape[:-1], n, n)
    return lambda Om: H * Om


def omega_from_state(
    gamma: np.ndarray,
    m: np.ndarray,
    params: np.ndarray,
    inertia: str = "physical",
    constraint: str = "space_fixed",
    axis: np.ndarray | None = None,
) -> np.ndarray:
    """The body angular velocity ``Omega = b ^ v`` of states ``(gamma, m)`` (NumPy, dense).

    ``params`` are the inertia's parameters; ``axis`` the Suslov axis (default ``e_n``).

    Solves ``-P_b I(b ^ v) b = m``, ``v . b = 0`` by assembling the reduced metric column by
    column (an independent, ``O(n^4)`` route, for checks).

    Returns
    -------
    ndarray, shape (..., n, n)
    """
    gamma = np.asarray(gamma, dtype=float)
    m = np.asarray(m, dtype=float)
    n = gamma.shape[-1]
    op = inertia_operator(inertia, params)
    e = np.eye(n)[-1] if axis is None else np.asarray(axis, dtype=float)
    b = gamma if constraint == "space_fixed" else np.broadcast_to(e, gamma.shape)
    eye = np.eye(n)

    def wedge(u: np.ndarray, w: np.ndarray) -> np.ndarray:
        return u[..., :, None] * w[..., None, :] - w[..., :, None] * u[..., None, :]

    cols = []
    for k in range(n):
        ek = np.broadcast_to(eye[k], b.shape)
        cols.append(-np.einsum("...ij,...j->...i", op(wedge(b, ek)), b))
    K = np.stack(cols, axis=-1) + b[..., :, None] * b[..., None, :]
    r2 = np.sum(b * b, axis=-1, keepdims=True)
    f = m - b * np.sum(b * m, axis=-1, keepdims=True) / r2
    v = np.linalg.solve(K, f[..., None])[..., 0]
    return wedge(b, v)
