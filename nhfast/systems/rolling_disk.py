"""The vertical rolling disk in two conventions, and the particle with the contact distribution.

The two papers name the disk angles oppositely:

* Mestdag & Crampin (2010): ``q = (x, y, phi, theta)``, ``phi`` the *heading*, ``theta`` the
  *rolling* angle; mass ``M``, inertia ``I`` about the axle and ``J`` about the vertical, radius
  ``R``; frame ``X_1 = d/dphi``, ``X_2 = d/dtheta + R cos(phi) d/dx + R sin(phi) d/dy``
  (``vertical_rolling_disk(convention="mestdag-crampin")``).
* Martínez, Cortés & de León (2000), Example VII.4: ``q = (x, y, theta, phi)``, ``theta`` the
  *heading*, ``phi`` the *rolling* angle; unit mass, ``I1`` for ``theta``, ``I2`` for ``phi``;
  the constraint basis matters for the multipliers, so both the paper's *rotated* one and the
  *cartesian* one are offered (``vertical_rolling_disk(convention="martinez")``).

Multiplier signs: Mestdag & Crampin write the vakonomic Lagrangian ``L - mu_a v^a``, Martínez
et al. ``L + lambda^i Phi_i``; for the same 1-forms ``mu_a = -lambda^a``
(:mod:`nhfast.symbolic.vakonomic.equations` documents which it uses where).

The particle of Martínez et al., Example VIII.6 (:func:`contact_particle`): ``Q = R^3``, unit
metric, ``D = ker(dz - y dx)`` (the contact distribution), with the rescaled bases ``x Phi``
(chart ``x != 0``) and ``z Phi`` (chart ``z != 0``).

Every constructor returns a :class:`~nhfast.symbolic.systems.NonholonomicSystem` that holds
both the constraint 1-forms (``constraint_forms``) and the paper's frame of D (``frame``).

References: Mestdag & Crampin (2010), "Nonholonomic systems as restricted Euler-Lagrange systems";
Martínez, Cortés & de León (2000), "The geometrical theory of constraints applied to the dynamics of
vakonomic mechanical systems: the vakonomic bracket".
"""

from __future__ import annotations

from typing import Literal

import sympy as sp

from nhfast.symbolic.systems import NonholonomicSystem
from nhfast.systems._common import with_frame

__all__ = ["contact_particle"]


def mestdag_crampin_disk() -> NonholonomicSystem:
    """Vertical rolling disk of Mestdag & Crampin (2010), ``q = (x, y, phi, theta)``.

    ``phi`` is the heading, ``theta`` the rolling angle.  Parameters ``(M, I, J, R)``: mass,
    inertia about the axle (``theta``), inertia about the vertical (``phi``), radius.

    Returns
    -------
    NonholonomicSystem
        ``metric = diag(M, M, J, I)``, ``constraint_forms`` rows ``v^x = xdot - R cos(phi)
        thetadot`` and ``v^y = ydot - R sin(phi) thetadot``; ``frame`` columns ``X_1 = d/dphi``
        and ``X_2 = d/dtheta + R cos(phi) d/dx + R sin(phi) d/dy`` (Mestdag & Crampin, Section 5).
    """
    x, y, phi, th = sp.symbols("x y phi theta", real=True)
    M, I, J, R = sp.symbols("M I J R", positive=True)  # noqa: E741
    g = sp.diag(M, M, J, I)
    w = sp.Matrix([[1, 0, 0, -R * sp.cos(phi)], [0, 1, 0, -R * sp.sin(phi)]])
    sys = NonholonomicSystem([x, y, phi, th], g, 0, constraints=w, params=[M, I, J, R])
    frame = sp.Matrix([[0, R * sp.cos(phi)], [0, R * sp.sin(phi)], [1, 0], [0, 1]])
    return with_frame(sys, frame)


def martinez_disk(
    basis: Literal["rotated", "cartesian"] = "rotated",
) -> NonholonomicSystem:
    """Vertical rolling disk of Martínez, Cortés & de León (2000), Example VII.4,
    ``q = (x, y, theta, phi)``.

    ``theta`` is the heading, ``phi`` the rolling angle; unit mass; parameters ``(I1, I2, R)``.

    Parameters
    ----------
    basis : {"rotated", "cartesian"}
        Constraint basis: the paper's ``(xdot sin(theta) - ydot cos(theta), xdot cos(theta) +
        ydot sin(theta) - R phidot)`` or ``(xdot - R cos(theta) phidot, ydot - R sin(theta)
        phidot)``.  The multipliers depend on the basis (Section VIII there).

    Returns
    -------
    NonholonomicSystem
        ``metric = diag(1, 1, I1, I2)``; ``frame`` columns ``d/dtheta`` and
        ``d/dphi + R cos(theta) d/dx + R sin(theta) d/dy``.

    Raises
    ------
    ValueError
        If ``basis`` is not one of the two names.
    """
    if basis not in ("rotated", "cartesian"):
        raise ValueError(f"basis must be 'rotated' or 'cartesian', got {basis!r}")
    x, y, th, phi = sp.symbols("x y theta phi", real=True)
    I1, I2, R = sp.symbols("I1 I2 R", positive=True)
    g = sp.diag(1, 1, I1, I2)
    c, s = sp.cos(th), sp.sin(th)
    if basis == "rotated":
        w = sp.Matrix([[s, -c, 0, 0], [c, s, 0, -R]])
    else:
        w = sp.Matrix([[1, 0, 0, -R * c], [0, 1, 0, -R * s]])
    sys = NonholonomicSystem([x, y, th, phi], g, 0, constraints=w, params=[I1, I2, R])
    frame = sp.Matrix([[0, R * c], [0, R * s], [1, 0], [0, 1]])
    return with_frame(sys, frame)


def contact_particle(
    basis: Literal["plain", "x", "z"] = "plain",
) -> NonholonomicSystem:
    """Particle of Martínez, Cortés & de León (2000), Example VIII.6: ``Q = R^3``, unit metric,
    constraint ``zdot - y xdot = 0`` (``D = ker(dz - y dx)``, the contact distribution).

    Parameters
    ----------
    basis : {"plain", "x", "z"}
        Constraint 1-form ``Phi = dz - y dx`` itself, or the rescaled ``x Phi`` (chart
        ``U = {x != 0}``) or ``z Phi`` (chart ``V = {z != 0}``) of the paper.

    Returns
    -------
    NonholonomicSystem
        Unit metric, no parameters, ``frame`` columns ``d/dx + y d/dz`` and ``d/dy``.

    Raises
    ------
    ValueError
        If ``basis`` is not one of the three names.
    """
    if basis not in ("plain", "x", "z"):
        raise ValueError(f"basis must be 'plain', 'x' or 'z', got {basis!r}")
    x, y, z = sp.symbols("x y z", real=True)
    factor = {"plain": sp.Integer(1), "x": x, "z": z}[basis]
    w = sp.Matrix([[-y * factor, 0, factor]])
    sys = NonholonomicSystem([x, y, z], sp.eye(3), 0, constraints=w)
    frame = sp.Matrix([[1, 0], [0, 1], [y, 0]])
    return with_frame(sys, frame)
