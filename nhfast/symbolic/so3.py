"""Coordinates on SO(3): unit quaternions and the Cayley (Gibbs-Rodrigues) chart.

A :class:`~nhfast.symbolic.liegroup.LieGroupSystem` on ``SO(3)`` integrates the body angular
velocity ``omega`` (and advected vectors); the attitude ``R`` itself follows from
``Rdot = R hat(omega)``.  A chart gives coordinates for ``R`` with their kinematics, so the
attitude can be carried as advected states::

    chart = so3_chart("quaternion")
    system = LieGroupSystem(..., advected=[*gamma, *chart.coordinates],
                            advected_rhs=lambda w: [*gamma_dot(w), *chart.kinematics(w)])

``hat(omega)`` is the usual hat map (``hat(omega) v = omega x v``), as in
:func:`nhfast.symbolic.liegroup.so3_structure_constants`.

* ``"quaternion"`` -- ``q = (q0, q1, q2, q3)``, ``qdot = q (x) (0, omega) / 2``; no singular
  set (``R(q)`` is written for any ``q != 0``, divided by ``|q|^2``, and ``|q|`` is a first
  integral of the kinematics); the domain is ``|q|^2 > 0``.
* ``"cayley"`` -- ``c = tan(theta/2) axis`` with ``R = (I - hat c)^-1 (I + hat c)``; the chart
  misses the rotations by ``pi``, where ``|c|`` grows without bound, so its domain stops a
  trajectory at the rotation angle ``max_angle`` (``|c|^2 < tan(max_angle/2)^2``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy as sp

__all__ = ["so3_chart"]  # returns an SO3Chart


def _hat(v: Sequence[Any]) -> sp.Matrix:
    return sp.Matrix([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])


@dataclass(frozen=True)
class SO3Chart:
    """Coordinates on SO(3) with their kinematics and their domain.

    Attributes
    ----------
    kind : str
        ``"quaternion"`` or ``"cayley"``.
    coordinates : list of sympy.Symbol
    rotation : sympy.Matrix
        ``R`` (3 x 3) in the coordinates: body vectors to space, ``Rdot = R hat(omega)``.
    domain : dict
        Conditions ``expr > 0`` where the chart holds (a ``VectorField`` domain).
    """

    kind: str
    coordinates: list[sp.Symbol]
    rotation: sp.Matrix
    domain: dict[str, sp.Expr] = field(default_factory=dict)

    def kinematics(self, omega: Sequence[Any]) -> list[sp.Expr]:
        """The coordinates' time derivatives for the body angular velocity ``omega``.

        Parameters
        ----------
        omega : sequence of 3 sympy expressions

        Returns
        -------
        list of sympy.Expr
        """
        w = list(omega)
        if len(w) != 3:
            raise ValueError(f"omega must have 3 components, got {len(w)}")
        if self.kind == "quaternion":
            q0, q1, q2, q3 = self.coordinates
            half = sp.Rational(1, 2)
            return [
                -half * (q1 * w[0] + q2 * w[1] + q3 * w[2]),
                half * (q0 * w[0] + q2 * w[2] - q3 * w[1]),
                half * (q0 * w[1] + q3 * w[0] - q1 * w[2]),
                half * (q0 * w[2] + q1 * w[1] - q2 * w[0]),
            ]
        c = sp.Matrix(self.coordinates)
        wv = sp.Matrix(w)
        cdot = (wv + c.cross(wv) + c * (c.T * wv)[0]) / 2
        return list(cdot)


def so3_chart(
    kind: str = "quaternion", prefix: str | None = None, max_angle: Any = None
) -> SO3Chart:
    """A chart of SO(3) for the attitude of a rigid body (see the module docstring).

    Parameters
    ----------
    kind : {"quaternion", "cayley"}
    prefix : str, optional
        Names of the coordinates: ``prefix0..3`` (default ``q``) or ``prefix1..3``
        (default ``c``).
    max_angle : number, optional
        ``"cayley"`` only: the largest rotation angle kept in the domain, in ``(0, pi)``
        (default ``0.95 pi``; the chart's coordinates grow like ``tan(angle / 2)``).

    Returns
    -------
    SO3Chart

    Raises
    ------
    ValueError
        For an unknown ``kind``, or a ``max_angle`` outside ``(0, pi)``.
    """
    if kind == "quaternion":
        if max_angle is not None:
            raise ValueError("max_angle applies to kind='cayley' only (quaternions cover SO(3))")
        q = list(sp.symbols(f"{prefix or 'q'}0:4", real=True))
        q0, v = q[0], sp.Matrix(q[1:])
        n2 = sum(x**2 for x in q)
        rot = ((q0**2 - (v.T * v)[0]) * sp.eye(3) + 2 * v * v.T + 2 * q0 * _hat(v)) / n2
        return SO3Chart("quaternion", q, rot, {"quaternion: |q|^2 > 0": n2})
    if kind == "cayley":
        angle = sp.Rational(19, 20) * sp.pi if max_angle is None else sp.sympify(max_angle)
        if not (angle.is_number and 0 < float(angle) < float(sp.pi)):
            raise ValueError(f"max_angle must be a number in (0, pi), got {max_angle!r}")
        c = list(sp.symbols(f"{prefix or 'c'}1:4", real=True))
        cv = sp.Matrix(c)
        c2 = (cv.T * cv)[0]
        rot = ((1 - c2) * sp.eye(3) + 2 * cv * cv.T + 2 * _hat(cv)) / (1 + c2)
        bound = sp.Float(float(sp.tan(angle / 2)) ** 2, 17)
        name = f"Cayley chart: rotation angle < {float(angle):.4g} (|c|^2 < tan(angle/2)^2)"
        return SO3Chart("cayley", c, rot, {name: bound - c2})
    raise ValueError(f"kind must be 'quaternion' or 'cayley', got {kind!r}")
