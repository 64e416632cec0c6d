"""Named inertia operators of a rigid body on ``SO(n)``: each formula written once.

* ``"a-omega-a"`` -- ``I(Om) = A Om A``, ``A = diag(a)``: the inertia of García-Naranjo &
  Marrero (2020), (4.5), ``I(u ^ v) = (Au) ^ (Av)``;
* ``"physical"`` -- ``I(Om) = J Om + Om J``, ``J = diag(j)``: a physical body with mass tensor
  ``J`` (the two agree only for ``n = 3``; Remark 4.2);
* ``"pairwise"`` -- ``I(Om)_ij = H_ij Om_ij``: one moment of inertia per pair ``(i, j)`` (``H``
  symmetric; its diagonal is unused).

A formula is a function of ``Om`` and the parameter matrix written with ``@`` and
:func:`hadamard`, so the same line serves the matrix-level engine
(:class:`~nhfast.symbolic.rigid_body.RigidBody`), explicit SymPy matrices (the Lie-algebra
derivation) and batched NumPy arrays (numerical checks).

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from nhfast.symbolic import rigid_body as rb


def hadamard(H: Any, Om: Any) -> Any:
    """The entrywise product ``H o Om`` of NumPy arrays, SymPy matrices or matrix expressions."""
    if isinstance(H, np.ndarray) or isinstance(Om, np.ndarray):
        return H * Om
    if isinstance(H, sp.MatrixBase) and isinstance(Om, sp.MatrixBase):
        return H.multiply_elementwise(Om)
    return sp.HadamardProduct(H, Om)


@dataclass(frozen=True)
class Inertia:
    """One named inertia operator ``I(Om)`` with its parameter declaration."""

    name: str
    formula: str
    operator: Callable[[Any, Any], Any]
    param: rb.Param

    def symbols(self, n: int) -> list[sp.Symbol]:
        """The parameter symbols (``a1..an`` or ``j1..jn``) of a diagonal parameter matrix."""
        if self.param.kind != "diagonal":
            raise ValueError(f"inertia {self.name!r} has no diagonal parameter matrix")
        return list(sp.symbols(f"{self.param.name}1:{n + 1}", positive=self.param.positive))

    def explicit(self, n: int) -> tuple[Callable[[sp.Matrix], sp.Matrix], list[sp.Symbol]]:
        """``Om -> I(Om)`` on explicit ``n x n`` SymPy matrices, and its parameter symbols."""
        p = self.symbols(n)
        P = sp.diag(*p)
        return (lambda Om: sp.Matrix(self.operator(Om, P))), p

    def numpy(self, params: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        """NumPy ``Om -> I(Om)`` on ``(..., n, n)`` arrays for a batch of parameter vectors."""
        p = np.asarray(params, dtype=float)
        if self.param.kind == "diagonal":
            P = p[..., :, None] * np.eye(p.shape[-1])
        else:
            n = int(round(np.sqrt(p.shape[-1])))
            P = p.reshape(*p.shape[:-1], n, n)
        return lambda Om: self.operator(Om, P)


INERTIAS: dict[str, Inertia] = {
    i.name: i
    for i in (
        Inertia(
            "a-omega-a",
            "I(Om) = A Om A, A = diag(a)",
            lambda Om, A: A @ Om @ A,
            rb.diagonal("a", positive=True),
        ),
        Inertia(
            "physical",
            "I(Om) = J Om + Om J, J = diag(j)",
            lambda Om, J: J @ Om + Om @ J,
            rb.diagonal("j", positive=True),
        ),
        Inertia(
            "pairwise",
            "I(Om)_ij = H_ij Om_ij, H symmetric",
            hadamard,
            rb.symmetric("H"),
        ),
    )
}

#: Former names (the error says the new one).
_RENAMED = {"seed": "a-omega-a"}


def named_inertia(name: str) -> Inertia:
    """The named inertia operator (see :data:`INERTIAS`).

    Raises
    ------
    ValueError
        If ``name`` is not one of the names of :data:`INERTIAS`.
    """
    if isinstance(name, str) and name in _RENAMED:
        raise ValueError(f"inertia {name!r} is now called {_RENAMED[name]!r}")
    if not isinstance(name, str) or name not in INERTIAS:
        raise ValueError(f"inertia must be one of {sorted(INERTIAS)}, got {name!r}")
    return INERTIAS[name]
