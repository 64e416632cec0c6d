"""Velocity and momentum of a constrained rigid body on SO(n), vectorised (NumPy).

For the Veselova (``Omega in gamma ^ R^n``) and Suslov (``Omega in e ^ R^n``) families the
constrained body angular velocity is ``Omega = b ^ v`` with ``v . b = 0`` (``b = gamma`` or the
axis ``e``), and the state's momentum is ``m = -I(b ^ v) b`` (the Legendre map of the reduced
system; ``m . b = 0`` since ``I(b ^ v)`` is skew).  These maps go between the velocity form
``(gamma, v)`` and the momentum form ``(gamma, m)`` of the states nhfast integrates:

* :func:`momentum_of_velocity` -- ``m = -I(b ^ v) b``;
* :func:`velocity_of_momentum` -- ``v`` in ``b^perp`` solving ``-P_b I(b ^ v) b = P_b m``;
* :func:`angular_velocity` -- ``Omega = b ^ v`` of a state ``(gamma, m)``.

The inertia is a name of :data:`nhfast.systems.inertia.INERTIAS` with its parameter vectors
(the layout of :func:`~nhfast.systems.rigid_bodies.rigid_body_params`), or a NumPy callable
``Om -> I(Om)`` on arrays of shape ``(..., n, n)``.  The named inertias all act entrywise,
``I(Om)_ij = h_ij Om_ij`` (``a_i a_j``, ``j_i + j_j``, ``H_ij``), positive on ``so(n)`` iff
every pair moment ``h_ij`` (``i != j``) is (checked: a single moment may vanish, as ``j_3`` of
the flat body ``I = diag(1, 2, 3)`` does), so the momentum costs
``O(n^2)`` per state and the velocity one dense ``n x n`` solve (``O(n^3)``); a callable inertia
is applied to the ``n`` wedges ``b ^ e_k`` at once.  Every argument broadcasts over leading
(batch) dimensions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nhfast.systems.inertia import named_inertia

__all__ = ["angular_velocity", "momentum_of_velocity", "velocity_of_momentum"]

Inertia = str | Callable[[np.ndarray], np.ndarray]


def _pair_moments(inertia: str, params: Any, n: int) -> np.ndarray:
    """``h`` with ``I(Om)_ij = h_ij Om_ij`` for a named inertia, shape ``(..., n, n)``."""
    spec = named_inertia(inertia)
    if params is None:
        raise ValueError(f"params is required for the named inertia {spec.name!r}")
    p = np.asarray(params, dtype=float)
    size = n * n if spec.param.kind == "symmetric" else n
    if p.ndim == 0 or p.shape[-1] != size:
        raise ValueError(
            f"params of inertia {spec.name!r} at n = {n} must have last dimension {size}, "
            f"got shape {p.shape}"
        )
    if spec.name == "a-omega-a":
        h = p[..., :, None] * p[..., None, :]
    elif spec.name == "physical":
        h = p[..., :, None] + p[..., None, :]
    else:
        h = p.reshape(*p.shape[:-1], n, n)
    # positive on so(n) iff every pair moment h_ij (i != j) is: single moments may vanish
    off = h[..., ~np.eye(n, dtype=bool)]
    if not np.all(off > 0):
        raise ValueError(
            f"params: inertia {spec.name!r} ({spec.formula}) must be positive on so(n), i.e. "
            f"every pair moment h_ij (i != j) > 0; the smallest is {off.min():.3g}"
        )
    return h


def _axis(gamma: np.ndarray, constraint: str, axis: Any) -> np.ndarray:
    if constraint == "space_fixed":
        if axis is not None:
            raise ValueError("axis applies to constraint='body_fixed' only")
        return gamma
    if constraint != "body_fixed":
        raise ValueError(f"constraint must be 'space_fixed' or 'body_fixed', got {constraint!r}")
    n = gamma.shape[-1]
    e = np.eye(n)[-1] if axis is None else np.asarray(axis, dtype=float)
    if e.shape[-1] != n:
        raise ValueError(f"axis must have last dimension {n}, got shape {e.shape}")
    return np.broadcast_to(e, np.broadcast_shapes(e.shape, gamma.shape))


def _vectors(gamma: Any, w: Any, wname: str) -> tuple[np.ndarray, np.ndarray]:
    g = np.asarray(gamma, dtype=float)
    x = np.asarray(w, dtype=float)
    if g.ndim == 0 or g.shape[-1] < 3:
        raise ValueError(f"gamma must have a last dimension n >= 3, got shape {g.shape}")
    if x.shape[-1:] != g.shape[-1:]:
        raise ValueError(f"{wname} must have last dimension {g.shape[-1]}, got shape {x.shape}")
    if not (np.all(np.isfinite(g)) and np.all(np.isfinite(x))):
        raise ValueError(f"gamma and {wname} must be finite")
    return g, x


def _wedge(u: np.ndarray, w: np.ndarray) -> np.ndarray:
    return u[..., :, None] * w[..., None, :] - w[..., :, None] * u[..., None, :]


def _metric(b: np.ndarray, inertia: Inertia, params: Any) -> np.ndarray:
    """``K_b`` with ``K_b v = -I(b ^ v) b`` (``(..., n, n)``)."""
    n = b.shape[-1]
    if callable(inertia):
        eye = np.eye(n)
        wedges = _wedge(b[..., None, :], eye)  # (..., k, n, n): b ^ e_k
        cols = -np.einsum("...kij,...j->...ik", np.asarray(inertia(wedges)), b)
        return cols
    h = _pair_moments(inertia, params, n)
    # m_i = -sum_j h_ij (b_i v_j - v_i b_j) b_j
    diag = np.einsum("...ij,...j->...i", h, b * b)
    return diag[..., :, None] * np.eye(n) - b[..., :, None] * h * b[..., None, :]


def momentum_of_velocity(
    gamma: Any,
    v: Any,
    params: Any = None,
    inertia: Inertia = "physical",
    constraint: str = "space_fixed",
    axis: Any = None,
) -> np.ndarray:
    """The momentum ``m = -I(b ^ v) b`` of the velocity ``v`` at ``gamma``.

    Parameters
    ----------
    gamma, v : array_like, shape (..., n)
        ``v`` is taken as given (its component along ``b`` adds nothing: ``b ^ b = 0``).
    params : array_like, optional
        The named inertia's parameters, shape ``(..., n)`` (``(..., n * n)`` for
        ``"pairwise"``); unused for a callable inertia.
    inertia : str or callable
        A name of :data:`nhfast.systems.inertia.INERTIAS`, or ``Om -> I(Om)`` on
        ``(..., n, n)`` NumPy arrays.
    constraint : {"space_fixed", "body_fixed"}
        Veselova (``b = gamma``) or Suslov (``b`` = ``axis``).
    axis : array_like, optional
        The Suslov axis (default ``e_n``).

    Returns
    -------
    ndarray, shape (..., n)

    Raises
    ------
    ValueError
        On shapes that do not match, non-finite values, an unknown inertia or constraint.
    """
    g, x = _vectors(gamma, v, "v")
    b = _axis(g, constraint, axis)
    return np.einsum("...ij,...j->...i", _metric(b, inertia, params), x)


def velocity_of_momentum(
    gamma: Any,
    m: Any,
    params: Any = None,
    inertia: Inertia = "physical",
    constraint: str = "space_fixed",
    axis: Any = None,
) -> np.ndarray:
    """The velocity ``v`` (in ``b^perp``) of the momentum ``m`` at ``gamma``.

    Solves ``(K_b + b b^T) v = P_b m`` with ``K_b v = -I(b ^ v) b`` (on ``b^perp`` this is
    ``K_b v = P_b m``; the ``b b^T`` term fixes ``v . b = 0``), one dense solve per state.

    Parameters
    ----------
    gamma, m : array_like, shape (..., n)
    params, inertia, constraint, axis
        As for :func:`momentum_of_velocity`.

    Returns
    -------
    ndarray, shape (..., n)

    Raises
    ------
    ValueError
        As for :func:`momentum_of_velocity`; also where ``K_b`` is singular on ``b^perp``
        (an inertia that is not positive there).
    """
    g, mm = _vectors(gamma, m, "m")
    b = _axis(g, constraint, axis)
    r2 = np.sum(b * b, axis=-1, keepdims=True)
    if np.any(r2 == 0):
        raise ValueError("gamma (or the axis) must not vanish")
    rhs = mm - b * np.sum(b * mm, axis=-1, keepdims=True) / r2
    k = _metric(b, inertia, params) + b[..., :, None] * b[..., None, :]
    k, rhs = np.broadcast_arrays(k, rhs[..., None])
    try:
        return np.linalg.solve(k, rhs)[..., 0]
    except np.linalg.LinAlgError as exc:
        raise ValueError(
            "the reduced metric K_b is singular at some state: the inertia is not positive on "
            "b^perp there"
        ) from exc


def angular_velocity(
    gamma: Any,
    m: Any,
    params: Any = None,
    inertia: Inertia = "physical",
    constraint: str = "space_fixed",
    axis: Any = None,
) -> np.ndarray:
    """The body angular velocity ``Omega = b ^ v`` of states ``(gamma, m)``.

    Parameters
    ----------
    gamma, m, params, inertia, constraint, axis
        As for :func:`velocity_of_momentum`.

    Returns
    -------
    ndarray, shape (..., n, n)
        Skew matrices.
    """
    v = velocity_of_momentum(gamma, m, params, inertia, constraint, axis)
    b = _axis(np.asarray(gamma, dtype=float), constraint, axis)
    return _wedge(b, v)
