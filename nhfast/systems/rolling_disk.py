"""The vertical rolling disk in the conventions of seeds 002 and 003, and seed 003's particle.

The two papers name the disk angles oppositely (digest seed002_003.md, "Notation traps"):

* **Seed 002** (Mestdag-Crampin): ``q = (x, y, phi, theta)``, ``phi`` the *heading*, ``theta``
  the *rolling* angle; mass ``M``, inertia ``I`` about the axle (for ``theta``) and ``J`` about the
  vertical (for ``phi``), radius ``R``.
  ``L = 1/2 M (xdot^2 + ydot^2) + 1/2 I thetadot^2 + 1/2 J phidot^2`` (2.2); constraint forms
  ``v^x = xdot - R cos(phi) thetadot``, ``v^y = ydot - R sin(phi) thetadot``; frame of D
  ``X_1 = d/dphi``, ``X_2 = d/dtheta + R cos(phi) d/dx + R sin(phi) d/dy`` (Section 5).
* **Seed 003** (Martinez-Cortes-de Leon, Example VII.4): ``q = (x, y, theta, phi)``, ``theta``
  the *heading*, ``phi`` the *rolling* angle; unit mass, ``I1`` for ``theta``, ``I2`` for
  ``phi``. ``L = 1/2 (xdot^2 + ydot^2 + I1 thetadot^2 + I2 phidot^2)``; the constraint basis
  matters for the multipliers, so both are offered: the *rotated* one of the paper,
  ``xdot sin(theta) - ydot cos(theta)`` and ``xdot cos(theta) + ydot sin(theta) - R phidot``,
  and the *cartesian* one ``xdot - R cos(theta) phidot``, ``ydot - R sin(theta) phidot``.
  Frame of D: ``d/dtheta``, ``d/dphi + R cos(theta) d/dx + R sin(theta) d/dy``.

Multiplier signs: seed 002 writes the vakonomic Lagrangian ``L - mu_a v^a`` (4.2), seed 003
``L + lambda^i Phi_i``; for the same 1-forms ``mu_a(002) = -lambda^a(003)``.  The vakonomic code
of nhfast (:mod:`nhfast.symbolic.vakonomic.equations`) uses seed 003's sign for coordinate multipliers
and seed 002's for the frame form; both are documented there.

Seed 003's particle (Example VIII.6): ``Q = R^3``, ``L = 1/2 (xdot^2 + ydot^2 + zdot^2)``,
``Phi = zdot - y xdot``, with the rescaled bases ``x Phi`` (chart ``x != 0``) and ``z Phi``
(chart ``z != 0``).

Every constructor returns a :class:`~nhfast.symbolic.systems.NonholonomicSystem` that holds
both the constraint 1-forms (``constraint_forms``) and the paper's frame of D (``frame``).
"""

from __future__ import annotations

from typing import Literal

import sympy as sp

from nhfast.symbolic._util import is_zero
from nhfast.symbolic.systems import NonholonomicSystem

__all__ = ["rolling_disk_seed002", "rolling_disk_seed003", "vakonomic_particle_seed003"]


def _with_frame(system: NonholonomicSystem, frame: sp.Matrix) -> NonholonomicSystem:
    """Replace the frame computed from the 1-forms by the paper's frame (checked to span D)."""
    w = system.constraint_forms
    assert w is not None
    prod = w * frame
    if not all(is_zero(e) for e in prod):  # pragma: no cover - guards the constructors below
        raise ValueError("internal error: the frame does not lie in the kernel of the 1-forms")
    system.frame = frame
    return system


def rolling_disk_seed002() -> NonholonomicSystem:
    """Vertical rolling disk of seed 002 (Mestdag-Crampin), ``q = (x, y, phi, theta)``.

    ``phi`` is the heading, ``theta`` the rolling angle.  Parameters ``(M, I, J, R)``: mass,
    inertia about the axle (``theta``), inertia about the vertical (``phi``), radius.

    Returns
    -------
    NonholonomicSystem
        ``metric = diag(M, M, J, I)``, ``constraint_forms`` rows ``v^x = xdot - R cos(phi)
        thetadot`` and ``v^y = ydot - R sin(phi) thetadot``; ``frame`` columns ``X_1 = d/dphi``
        and ``X_2 = d/dtheta + R cos(phi) d/dx + R sin(phi) d/dy`` (seed 002 Section 5).
    """
    x, y, phi, th = sp.symbols("x y phi theta", real=True)
    M, I, J, R = sp.symbols("M I J R", positive=True)  # noqa: E741
    g = sp.diag(M, M, J, I)
    w = sp.Matrix([[1, 0, 0, -R * sp.cos(phi)], [0, 1, 0, -R * sp.sin(phi)]])
    sys = NonholonomicSystem([x, y, phi, th], g, 0, constraints=w, params=[M, I, J, R])
    frame = sp.Matrix([[0, R * sp.cos(phi)], [0, R * sp.sin(phi)], [1, 0], [0, 1]])
    return _with_frame(sys, frame)


def rolling_disk_seed003(
    basis: Literal["rotated", "cartesian"] = "rotated",
) -> NonholonomicSystem:
    """Vertical rolling disk of seed 003 Example VII.4, ``q = (x, y, theta, phi)``.

    ``theta`` is the heading, ``phi`` the rolling angle; unit mass; parameters ``(I1, I2, R)``.

    Parameters
    ----------
    basis : {"rotated", "cartesian"}
        Constraint basis: the paper's ``(xdot sin(theta) - ydot cos(theta), xdot cos(theta) +
        ydot sin(theta) - R phidot)`` or ``(xdot - R cos(theta) phidot, ydot - R sin(theta)
        phidot)``.  The multipliers depend on the basis (seed 003 Section VIII).

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
    return _with_frame(sys, frame)


def vakonomic_particle_seed003(
    basis: Literal["plain", "x", "z"] = "plain",
) -> NonholonomicSystem:
    """Particle of seed 003 Example VIII.6: ``Q = R^3``, constraint ``zdot - y xdot = 0``.

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
    return _with_frame(sys, frame)
