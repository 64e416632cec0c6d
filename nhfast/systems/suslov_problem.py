"""The Suslov problem: a rigid body with the body-frame constraint ``Omega_3 = 0``, the classical
left-invariant example of an Euler-Poincaré-Suslov system on SO(3)."""

from __future__ import annotations

from typing import Any

import sympy as sp

from nhfast.symbolic.liegroup import LieGroupSystem, so3_structure_constants

__all__ = ["suslov"]


def suslov(inertia: Any = None) -> LieGroupSystem:
    """Suslov problem: rigid body in ``so(3)`` with the body-frame constraint ``Omega_3 = 0``.

    Parameters
    ----------
    inertia : sympy.Matrix, optional
        Default: ``[[I1, 0, I13], [0, I2, I23], [I13, I23, I3]]`` with parameters
        ``(I1, I2, I3, I13, I23)``.

    Returns
    -------
    LieGroupSystem
    """
    params: list[sp.Symbol] = []
    if inertia is None:
        I1, I2, I3 = sp.symbols("I1 I2 I3", positive=True)
        I13, I23 = sp.symbols("I13 I23", real=True)
        inertia = sp.Matrix([[I1, 0, I13], [0, I2, I23], [I13, I23, I3]])
        params = [I1, I2, I3, I13, I23]
    else:
        inertia = sp.Matrix(inertia)
        params = sorted(inertia.free_symbols, key=str)
    return LieGroupSystem(
        so3_structure_constants(),
        inertia,
        sp.Matrix([[0, 0, 1]]),
        params=params,
        name="suslov",
    )
