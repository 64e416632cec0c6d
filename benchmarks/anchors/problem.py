"""The benchmark problem: embedded Veselova on SO(n) with ``a_i = 1 + i/n``.

States ``x = (gamma_1..gamma_n, m_1..m_n)`` as in
:func:`nhfast.systems.veselova` (``(n, form="embedded")``); with ``w = A^{-1} m``,
``c = (A gamma, gamma)`` and ``r2 = |gamma|^2``::

    gammadot = (w - (gamma.w)/r2 gamma) / c,      mdot = -(m . gammadot)/r2 gamma.

:func:`rhs_numpy` is an independent ``O(n)`` NumPy transcription of these equations, used to
check every anchor (and nhfast's generated kernel) on random states.
"""

from __future__ import annotations

import numpy as np


def inertia(n: int) -> np.ndarray:
    """Parameters ``a_i = 1 + i/n``, ``i = 1..n`` (the issue's choice)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 3:
        raise ValueError(f"n must be an int >= 3, got {n!r}")
    return 1.0 + np.arange(1, n + 1) / n


def initial_states(n: int, lanes: int, seed: int = 0, speed: float = 1.0) -> np.ndarray:
    """Random states on the constraint manifold ``|gamma| = 1``, ``gamma . m = 0``.

    Parameters
    ----------
    n : int
        Dimension of the sphere's ambient space (``SO(n)``).
    lanes : int
        Number of trajectories.
    seed : int
        Seed of the random generator.
    speed : float
        ``|m|`` of every state (``|m| = 1`` turns a trajectory by about one radian per unit of
        time, so ``t = 10`` visits both hemispheres).

    Returns
    -------
    ndarray, shape (lanes, 2 n)
    """
    if not isinstance(lanes, int) or lanes < 1:
        raise ValueError(f"lanes must be a positive int, got {lanes!r}")
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(lanes, n))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    m = rng.normal(size=(lanes, n))
    m -= np.sum(m * g, axis=1, keepdims=True) * g
    m *= speed / np.linalg.norm(m, axis=1, keepdims=True)
    return np.hstack([g, m])


def rhs_numpy(x: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Right-hand side on rows ``x[..., 2n]`` (NumPy, ``O(n)`` per row)."""
    x = np.asarray(x, dtype=float)
    n = a.shape[0]
    if x.shape[-1] != 2 * n:
        raise ValueError(f"x must have shape (..., {2 * n}), got {x.shape}")
    g, m = x[..., :n], x[..., n:]
    w = m / a
    c = np.sum(a * g * g, axis=-1, keepdims=True)
    r2 = np.sum(g * g, axis=-1, keepdims=True)
    v = (w - np.sum(g * w, axis=-1, keepdims=True) / r2 * g) / c
    mdot = -np.sum(m * v, axis=-1, keepdims=True) / r2 * g
    return np.concatenate([v, mdot], axis=-1)


def rhs_numpy_physical(x: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Right-hand side of the physical inertia ``I(Om) = J Om + Om J`` on rows ``x[..., 2n]``
    (NumPy, ``O(n)`` per row): with ``D = |gamma|^2 j + (J gamma, gamma)``,
    ``v = D^{-1} (m + beta gamma)``, ``beta`` from ``gamma . v = 0``; ``gammadot =
    |gamma|^2 v``, ``mdot = -(m . v) gamma``."""
    x = np.asarray(x, dtype=float)
    n = j.shape[0]
    if x.shape[-1] != 2 * n:
        raise ValueError(f"x must have shape (..., {2 * n}), got {x.shape}")
    g, m = x[..., :n], x[..., n:]
    r2 = np.sum(g * g, axis=-1, keepdims=True)
    iD = 1.0 / (r2 * j + np.sum(j * g * g, axis=-1, keepdims=True))
    gd, md = g * iD, m * iD
    beta = -np.sum(g * md, axis=-1, keepdims=True) / np.sum(g * gd, axis=-1, keepdims=True)
    v = md + beta * gd
    mdot = -np.sum(m * v, axis=-1, keepdims=True) * g
    return np.concatenate([r2 * v, mdot], axis=-1)


def energy(x: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``H = (A^{-1} m, m) / (2 c)`` on rows ``x[..., 2n]``."""
    n = a.shape[0]
    g, m = x[..., :n], x[..., n:]
    return np.sum(m * m / a, axis=-1) / (2.0 * np.sum(a * g * g, axis=-1))
