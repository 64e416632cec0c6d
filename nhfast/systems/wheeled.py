"""The unicycle and the two-wheeled carriage (pure SymPy).

Sources
-------
* Unicycle: Jóźwikowski & Respondek (2019), Example 6.1.  ``Q = SE(2) x S^1`` with
  coordinates ``(x, y, phi, theta)``; it is the vertical rolling disk of García-Naranjo &
  Marrero (2020), (3.7)-(3.8), with the two inertias named the other way round (Jóźwikowski &
  Respondek: ``J`` about ``d/dphi``, ``I`` about ``d/dtheta``).
* Two-wheeled carriage: Crampin & Mestdag (2010), Section 7.2, coordinates
  ``(psi1, psi2, x, y, theta)``; the same system as Jóźwikowski & Respondek (2019), Example 6.2,
  where the wheel angles enter through ``theta_1 = (psi_1 + psi_2)/2``,
  ``theta_2 = (psi_1 - psi_2)/2`` with the opposite orientation (Jóźwikowski & Respondek's
  constraints are Crampin & Mestdag's with ``psi -> -psi``), ``phi`` is Crampin & Mestdag's
  ``theta``, ``I = J_2`` and ``w = c``.

References: Jóźwikowski & Respondek (2019), "A comparison of vakonomic and nonholonomic dynamics
with applications to non-invariant Chaplygin systems"; Crampin & Mestdag (2010), "Anholonomic
frames in constrained dynamics"; García-Naranjo & Marrero (2020), "The geometry of nonholonomic
Chaplygin systems revisited".

Conventions: coordinates are ``Symbol(name, real=True)``, inertias, masses and lengths
``positive=True``; the offset ``l`` of the centre of mass from the axle is ``real`` (``l = 0`` is a
case of its own and ``l -> -l`` is a symmetry).

Misprint (followed here is the mathematics, not the print): Crampin & Mestdag (2010), Sec. 7.2,
print
``[X_1, X_2] = +(R^2/2c)(sin(theta) X_3 - cos(theta) X_4)``; the bracket of the printed fields is
``-(R^2/2c)(sin(theta) X_3 - cos(theta) X_4)``.  The sign propagates into the printed
``X^C_alpha(v^a)``, ``X^C_alpha(L)``, ``p_a R^a_12 = K(v^1 - v^2)`` (correct: ``-K(v^1 - v^2)``),
the nonholonomic equations ``Gamma^1 = +K(...)``, ``Gamma^2 = +K(...)`` (correct: ``-K(...)``)
and ``H`` (correct: ``H = +(m R^2 + 2 J_2)/(2R)``).  With the correct sign the carriage obeys
Jóźwikowski & Respondek (2019), (6.2a)-(6.2b), ``alphadot = X omega^2``,
``omegadot = -Y alpha omega``.
"""

from __future__ import annotations

from typing import Any

import sympy as sp

from nhfast.symbolic.systems import ChaplyginSystem, NonholonomicSystem
from nhfast.systems._common import Potential, potential_expr, with_frame

__all__ = [
    "unicycle",
    "two_wheeled_carriage",
]


def unicycle(potential: Potential = None, as_chaplygin: bool = True) -> NonholonomicSystem:
    """Unicycle rolling without slipping, Jóźwikowski & Respondek (2019), Example 6.1.

    ``Q = SE(2) x S^1``, ``q = (x, y, phi, theta)``: contact point, heading, rolling angle.
    ``L = 1/2 [m (xdot^2 + ydot^2) + J phidot^2 + I thetadot^2] - U`` (Jóźwikowski & Respondek
    (2019), Lagrangian of Example 6.1), constraints ``xdot = R cos(phi) thetadot``, ``ydot = R
    sin(phi) thetadot``, i.e. the 1-forms ``omega^1 = cos(phi) dx + sin(phi) dy - R dtheta``
    (``alpha = R thetadot``) and ``omega^2 = -sin(phi) dx + cos(phi) dy`` (``beta = 0``).

    The unicycle is an ``R^2``-Chaplygin system (translations of the contact point), shape
    ``(phi, theta)``: literally the vertical rolling disk of García-Naranjo & Marrero (2020),
    (3.7)-(3.8) (there the inertias are named the other way round).  Nonholonomic equations
    (Jóźwikowski & Respondek (2019), (5.8) for Example 6.1, with a ``G``-invariant potential
    ``U(phi, theta)``):
    ``(m R^2 + I) alphadot = -R U_theta``, ``J phiddot = -U_phi``; for ``U = 0``
    ``alphadot = 0``, ``phiddot = 0``.

    Parameters
    ----------
    potential : sympy.Expr or callable, optional
        ``U``; a callable receives ``(x, y, phi, theta)``.  The Chaplygin form needs
        ``U = U(phi, theta)`` (``ChaplyginSystem`` raises ``ValueError`` otherwise).
    as_chaplygin : bool, optional
        True: a :class:`ChaplyginSystem` (group ``(x, y)``, shape ``(phi, theta)``, frame the
        horizontal lifts ``d/dphi``, ``d/dtheta + R cos(phi) d/dx + R sin(phi) d/dy``, so the
        quasi-velocities are ``(phidot, thetadot)``).  False: a :class:`NonholonomicSystem` with
        Jóźwikowski & Respondek's left-invariant frame of D, ``d_1 = e_1 + (1/R) d/dtheta``, ``d_2 =
        d/dphi`` (``e_1 = cos(phi) d/dx + sin(phi) d/dy``), whose quasi-velocities are
        ``(alpha, phidot)``.

    Returns
    -------
    NonholonomicSystem or ChaplyginSystem
        Parameters ``(m, R, I, J)``.
    """
    x, y, phi, th = sp.symbols("x y phi theta", real=True)
    m, R, I, J = sp.symbols("m R I J", positive=True)  # noqa: E741
    q = [x, y, phi, th]
    params = [m, R, I, J]
    G = sp.diag(m, m, J, I)
    W = sp.Matrix(
        [
            [sp.cos(phi), sp.sin(phi), 0, -R],
            [-sp.sin(phi), sp.cos(phi), 0, 0],
        ]
    )
    U = potential_expr(potential, q)
    if as_chaplygin:
        return ChaplyginSystem(q, G, U, constraints=W, shape=[phi, th], group=[x, y], params=params)
    system = NonholonomicSystem(q, G, U, constraints=W, params=params)
    frame = sp.Matrix([[sp.cos(phi), 0], [sp.sin(phi), 0], [0, 1], [1 / R, 0]])
    return with_frame(system, frame)


def two_wheeled_carriage(
    potential: Potential = None,
    l: Any = None,  # noqa: E741
    as_chaplygin: bool = True,
) -> NonholonomicSystem:
    """Two-wheeled carriage of Crampin & Mestdag (2010), Sec. 7.2.

    The same system as Jóźwikowski & Respondek (2019), Example 6.2.
    ``Q = S^1 x S^1 x SE(2)``, ``q = (psi1, psi2, x, y, theta)``: wheel angles, the point
    ``(x, y)`` where the symmetry axis meets the axle, heading.  Lagrangian (Crampin & Mestdag
    (2010), Sec. 7.2)::

        L = 1/2 m (u_x^2 + u_y^2) + m0 l u_theta (cos(theta) u_y - sin(theta) u_x)
            + 1/2 J u_theta^2 + 1/2 J2 (u_psi1^2 + u_psi2^2) - U,

    ``m = m0 + 2 m1``; constraints ``u_x = -(R/2) cos(theta)(u_psi1 + u_psi2)``,
    ``u_y = -(R/2) sin(theta)(u_psi1 + u_psi2)``, ``u_theta = (R/2c)(u_psi2 - u_psi1)``.

    Parameters: ``m0`` body mass, ``m1`` wheel mass, ``l`` distance of the centre of mass from
    the axle, ``J`` moment of inertia of the whole system about the vertical through
    ``(x, y)``, ``J2`` axial moment of inertia of a wheel, ``R`` wheel radius, ``c`` half the
    axle length.  The kinetic energy is positive definite iff ``m J > m0^2 l^2``.

    The carriage is an ``SE(2)``-Chaplygin system, shape ``(psi1, psi2)``; the horizontal lifts
    are Crampin & Mestdag's
    ``X_1 = d/dpsi1 - (R/2)(cos(theta) d/dx + sin(theta) d/dy + (1/c) d/dtheta)`` and
    ``X_2 = d/dpsi2 - (R/2)(cos(theta) d/dx + sin(theta) d/dy - (1/c) d/dtheta)`` with
    ``[X_1, X_2] = -(R^2/2c)(sin(theta) d/dx - cos(theta) d/dy)`` (the paper prints ``+``, see the
    module docstring).  In these quasi-velocities ``L_c = 1/2 P (v1^2 + v2^2) - Q v1 v2`` and
    (corrected sign) ``Gamma^1 = -K (v1 - v2)(Q v1 - P v2)/(P^2 - Q^2)``,
    ``Gamma^2 = -K (v1 - v2)(P v1 - Q v2)/(P^2 - Q^2)``, ``K = m0 l R^3/(4 c^2)``.

    Parameters
    ----------
    potential : sympy.Expr or callable, optional
        ``U``; a callable receives ``(psi1, psi2, x, y, theta)``.  The Chaplygin form needs
        ``U = U(psi1, psi2)``.
    l : sympy.Expr or number, optional
        Value of the offset (e.g. ``0``); default: the parameter symbol ``l``.
    as_chaplygin : bool, optional
        True: a :class:`ChaplyginSystem` (group ``(x, y, theta)``, shape ``(psi1, psi2)``,
        quasi-velocities ``(psi1dot, psi2dot)``).  False: a :class:`NonholonomicSystem` with the
        frame of Jóźwikowski & Respondek (2019), Example 6.2 translated to these coordinates,
        ``d_1 = e_1 - (1/R)(d/dpsi1 + d/dpsi2)``, ``d_2 = d/dtheta + (c/R)(d/dpsi2 - d/dpsi1)``,
        whose quasi-velocities are the forward speed ``alpha = cos(theta) xdot + sin(theta)
        ydot`` and ``omega = thetadot``; there Jóźwikowski & Respondek (2019), (6.2a)-(6.2b) read
        ``alphadot = X omega^2``, ``omegadot = -Y alpha omega``.

    Returns
    -------
    NonholonomicSystem or ChaplyginSystem
        Parameters ``(m0, m1, l, J, J2, R, c)`` (without ``l`` when a value is given).
    """
    psi1, psi2, x, y, th = sp.symbols("psi1 psi2 x y theta", real=True)
    m0, m1, J, J2, R, c = sp.symbols("m0 m1 J J2 R c", positive=True)
    params = [m0, m1]
    if l is None:
        l = sp.Symbol("l", real=True)  # noqa: E741
        params.append(l)
    l = sp.sympify(l)  # noqa: E741
    params += [J, J2, R, c]
    m = m0 + 2 * m1
    q = [psi1, psi2, x, y, th]
    a = m0 * l
    G = sp.Matrix(
        [
            [J2, 0, 0, 0, 0],
            [0, J2, 0, 0, 0],
            [0, 0, m, 0, -a * sp.sin(th)],
            [0, 0, 0, m, a * sp.cos(th)],
            [0, 0, -a * sp.sin(th), a * sp.cos(th), J],
        ]
    )
    half = R / 2
    W = sp.Matrix(
        [
            [half * sp.cos(th), half * sp.cos(th), 1, 0, 0],
            [half * sp.sin(th), half * sp.sin(th), 0, 1, 0],
            [R / (2 * c), -R / (2 * c), 0, 0, 1],
        ]
    )
    U = potential_expr(potential, q)
    if as_chaplygin:
        return ChaplyginSystem(
            q, G, U, constraints=W, shape=[psi1, psi2], group=[x, y, th], params=params
        )
    system = NonholonomicSystem(q, G, U, constraints=W, params=params)
    frame = sp.Matrix(
        [
            [-1 / R, -c / R],
            [-1 / R, c / R],
            [sp.cos(th), 0],
            [sp.sin(th), 0],
            [0, 1],
        ]
    )
    return with_frame(system, frame)


def carriage_constants(system: NonholonomicSystem) -> dict[str, sp.Expr]:
    """Derived constants of the carriage in terms of its parameters.

    Crampin & Mestdag (2010), Sec. 7.2: ``P = (R^2/4c^2)(J + m c^2) + J2``,
    ``Q = (R^2/4c^2)(J - m c^2)``, ``K = m0 l R^3/(4 c^2)``, ``Khat = 2 c K / R^2``,
    ``H = (m R^2 + 2 J2)/(2R)`` (sign corrected); Jóźwikowski & Respondek (2019), (6.2):
    ``X = m0 l R^2/(m R^2 + 2 I)``, ``Y = m0 l R^2/(J R^2 + 2 I w^2)`` with ``I = J2``,
    ``w = c``; and ``m = m0 + 2 m1``.

    Parameters
    ----------
    system : NonholonomicSystem
        A system returned by :func:`two_wheeled_carriage` (gives the symbols, and ``l``).

    Returns
    -------
    dict of str to sympy.Expr
        Keys ``m, P, Q, K, Khat, H, X, Y, l``.
    """
    names = {str(p): p for p in system.params}
    m0, m1, J, J2, R, c = (names[k] for k in ("m0", "m1", "J", "J2", "R", "c"))
    if "l" in names:
        l = names["l"]  # noqa: E741
    else:  # recover the value from the metric entry G[4, 3] = m0 l cos(theta)
        th = system.q[4]
        l = sp.simplify(system.metric[4, 3] / (m0 * sp.cos(th)))  # noqa: E741
    m = m0 + 2 * m1
    K = m0 * l * R**3 / (4 * c**2)
    return {
        "m": m,
        "l": l,
        "P": R**2 / (4 * c**2) * (J + m * c**2) + J2,
        "Q": R**2 / (4 * c**2) * (J - m * c**2),
        "K": K,
        "Khat": 2 * c * K / R**2,
        "H": (m * R**2 + 2 * J2) / (2 * R),
        "X": m0 * l * R**2 / (m * R**2 + 2 * J2),
        "Y": m0 * l * R**2 / (J * R**2 + 2 * J2 * c**2),
    }
