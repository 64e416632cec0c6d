"""Hénon–Heiles and the FPU-beta chain as nhfast vector fields, with their initial states.

* Hénon–Heiles, states ``(x, y, p_x, p_y)``:
  ``H = (p_x^2 + p_y^2 + x^2 + y^2)/2 + x^2 y - y^3/3``.
* Fermi–Pasta–Ulam–Tsingou beta chain of ``k`` masses with fixed ends, states
  ``(q_1..q_k, p_1..p_k)``, parameter ``beta``: with ``d_i = q_{i+1} - q_i``
  (``q_0 = q_{k+1} = 0``), ``H = sum p_i^2/2 + sum_{i=0..k} (d_i^2/2 + beta d_i^4/4)``.

The right-hand sides are written as the forces ``f_i = d_i + beta d_i^3`` (``O(k)``
expressions, the same formulation as :mod:`anchors.heyoka_hh_fpu` and
:mod:`anchors.scipy_hh_fpu`).
"""

from __future__ import annotations

import numpy as np
import sympy as sp

import nhfast as nh

#: Energy of the Hénon–Heiles initial states (chaotic and regular orbits mixed).
HH_ENERGY = 0.125


def henon_heiles() -> nh.VectorField:
    """Hénon–Heiles (4 states, no parameters)."""
    x, y, px, py = sp.symbols("x y p_x p_y")
    rhs = [px, py, -x - 2 * x * y, -y - x**2 + y**2]
    H = (px**2 + py**2 + x**2 + y**2) / 2 + x**2 * y - y**3 / 3
    return nh.VectorField(
        states=[x, y, px, py], rhs=rhs, observables={"energy": H}, name="henon-heiles"
    )


def fpu_chain(k: int) -> nh.VectorField:
    """FPU-beta chain of ``k`` masses with fixed ends (``2k`` states, parameter ``beta``)."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 2:
        raise ValueError(f"k must be an int >= 2, got {k!r}")
    q = list(sp.symbols(f"q1:{k + 1}"))
    p = list(sp.symbols(f"p1:{k + 1}"))
    beta = sp.Symbol("beta")
    ext = [sp.Integer(0), *q, sp.Integer(0)]
    d = [ext[i + 1] - ext[i] for i in range(k + 1)]
    f = [di + beta * di**3 for di in d]
    rhs = [*p, *[f[i + 1] - f[i] for i in range(k)]]
    H = sum(pi**2 for pi in p) / 2 + sum(di**2 / 2 + beta * di**4 / 4 for di in d)
    return nh.VectorField(
        states=[*q, *p], rhs=rhs, params=[beta], observables={"energy": H}, name=f"fpu-{k}"
    )


def henon_heiles_states(lanes: int, seed: int = 0) -> np.ndarray:
    """States of energy :data:`HH_ENERGY` with ``x = 0``: ``y`` in ``[-0.25, 0.35]``, ``p_y``
    a random fraction of what the energy allows, ``p_x > 0`` from the energy."""
    if not isinstance(lanes, int) or lanes < 1:
        raise ValueError(f"lanes must be a positive int, got {lanes!r}")
    rng = np.random.default_rng(seed)
    y = rng.uniform(-0.25, 0.35, lanes)
    room = 2 * HH_ENERGY - y**2 + 2 * y**3 / 3
    py = rng.uniform(-0.9, 0.9, lanes) * np.sqrt(room)
    px = np.sqrt(room - py**2)
    return np.column_stack([np.zeros(lanes), y, px, py])


def fpu_states(k: int, lanes: int, seed: int = 0, scale: float = 0.3) -> np.ndarray:
    """Random displacements and momenta (normal, standard deviation ``scale``)."""
    if not isinstance(lanes, int) or lanes < 1:
        raise ValueError(f"lanes must be a positive int, got {lanes!r}")
    return np.random.default_rng(seed).normal(scale=scale, size=(lanes, 2 * k))
