"""Euler-Poincare-Suslov equations for left-invariant kinetic energy on a Lie group.

A Lie algebra ``g`` with basis ``e_1..e_N`` and structure constants ``[e_i, e_j] = c_ij^k e_k``;
body velocity ``Omega = g^{-1} gdot`` with components ``Omega_i``; kinetic energy
``1/2 Omega^T I Omega``; constraints ``<a_alpha, Omega> = 0`` given by the rows ``a_alpha`` of an
annihilator matrix (constant: a left-invariant constraint, as in the Suslov problem; or depending
on advected variables such as ``gamma = g^{-1} e_n``, as in the Veselova problem, which is an LR
system).  The Euler-Poincare-Suslov equations (Lagrange-d'Alembert, left trivialisation) are::

    d/dt (I Omega) = ad*_Omega (I Omega) + F + A^T lambda,     A Omega = 0,
    (ad*_Omega M)_k = sum_{i,j} Omega_i c_ik^j M_j              (<ad*_xi mu, eta> = <mu, [xi, eta]>)

(for ``so(3)`` with ``[e_i, e_j] = eps_ijk e_k`` this is ``Mdot = M x Omega``).  The accelerations
and multipliers come from the saddle-point system ::

    [ I   -A^T ] [Omegadot]   [ ad*_Omega I Omega + F ]
    [ A    0   ] [ lambda ] = [ -Adot Omega           ]

solved numerically in the generated kernels (:class:`nhfast.vectorfield.LinearSolve`, LU), so no
symbolic inverse of ``I`` is formed.  ``Adot`` is the chain-rule derivative through the advected
states.

The equations above are the standard Euler-Poincare-Suslov form, derived here from
Lagrange-d'Alembert.  Examples: :func:`nhfast.systems.suslov` (a left-invariant constraint) and
:func:`nhfast.systems.veselova` with ``form="so3"`` (the Veselova constraint, García-Naranjo &
Marrero 2020, (4.3)-(4.7)).

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sympy as sp

from nhfast.symbolic._util import fresh_name
from nhfast.vectorfield import LinearSolve, VectorField

__all__ = [
    "LieGroupSystem",
    "son_structure_constants",
]


def so3_structure_constants() -> sp.MutableDenseNDimArray:
    """``c_ij^k = eps_ijk``: ``so(3)`` in the hat basis (``[e_i, e_j] = eps_ijk e_k``)."""
    c = sp.MutableDenseNDimArray.zeros(3, 3, 3)
    for i in range(3):
        for j in range(3):
            for k in range(3):
                c[i, j, k] = sp.LeviCivita(i, j, k)
    return c


def son_structure_constants(n: int) -> sp.MutableDenseNDimArray:
    """Structure constants of ``so(n)`` in the basis ``E_(i,j) = e_i ^ e_j`` (``i < j``,
    row-major order, ``i < j``), with the matrix
    commutator ``[X, Y] = XY - YX``.

    Parameters
    ----------
    n : int
        ``n >= 2``.

    Returns
    -------
    sympy.MutableDenseNDimArray
        ``c[a, b, d]`` with ``[E_a, E_b] = c[a, b, d] E_d``.
    """
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    N = len(pairs)

    def E(p: tuple[int, int]) -> sp.Matrix:
        m = sp.zeros(n, n)
        m[p[0], p[1]], m[p[1], p[0]] = 1, -1
        return m

    c = sp.MutableDenseNDimArray.zeros(N, N, N)
    for x, px in enumerate(pairs):
        for y, py in enumerate(pairs):
            br = E(px) * E(py) - E(py) * E(px)
            for z, (i, j) in enumerate(pairs):
                c[x, y, z] = br[i, j]
    return c


class LieGroupSystem:
    """Euler-Poincare-Suslov system: left-invariant metric and constraints on a Lie group.

    Parameters
    ----------
    structure_constants : array_like, shape (N, N, N)
        ``c[i, j, k] = c_ij^k`` with ``[e_i, e_j] = c_ij^k e_k``; checked for skew-symmetry and
        the Jacobi identity.
    inertia : sympy.Matrix, shape (N, N)
        Symmetric positive definite (may contain parameters).
    constraint_subspace : sympy.Matrix, shape (k, N)
        The constraint subspace ``D = {Omega : A Omega = 0}``, given by its annihilator: the
        rows ``a_alpha`` of ``A`` (linearly independent).  May depend on ``advected`` states.
    velocities : sequence of sympy.Symbol, optional
        Symbols of ``Omega_1..Omega_N`` (default ``Omega1..OmegaN``); needed to write
        ``advected_rhs``, ``force`` or ``observables`` in terms of ``Omega``.
    params : sequence of sympy.Symbol, optional
    advected : sequence of sympy.Symbol, optional
        Extra states carried along (e.g. ``gamma = g^{-1} e_n``).
    advected_rhs : sequence of sympy.Expr or callable, optional
        Their time derivatives (a callable receives the list of velocity symbols).
    force : sequence of sympy.Expr or callable, optional
        Body-frame generalised force ``F`` (components in the dual basis); e.g. for
        ``U(gamma)`` on ``SO(3)`` with ``gammadot = gamma x Omega`` it is ``gamma x grad U``.
    potential : sympy.Expr, optional
        Potential energy, used only for the ``energy`` observable (it should be the one whose
        force is ``force``).
    observables : mapping of str to sympy.Expr, optional
        Extra observables.
    name : str, optional

    Raises
    ------
    ValueError
        On inconsistent shapes, a non-Lie bracket or a non-symmetric inertia.
    """

    def __init__(
        self,
        structure_constants: Any,
        inertia: Any,
        constraint_subspace: Any,
        *,
        velocities: Sequence[sp.Symbol] | None = None,
        params: Sequence[sp.Symbol] = (),
        advected: Sequence[sp.Symbol] = (),
        advected_rhs: Sequence[Any] | Callable[[list], Sequence[Any]] = (),
        force: Sequence[Any] | Callable[[list], Sequence[Any]] | None = None,
        potential: Any = 0,
        observables: Mapping[str, Any] | None = None,
        name: str = "euler_poincare_suslov",
    ) -> None:
        c = sp.MutableDenseNDimArray(structure_constants)
        if len(c.shape) != 3 or len(set(c.shape)) != 1:
            raise ValueError(f"structure_constants must have shape (N, N, N), got {c.shape}")
        N = c.shape[0]
        self._check_lie(c, N)
        inertia_m = sp.Matrix(inertia)
        if inertia_m.shape != (N, N):
            raise ValueError(f"inertia must be {N}x{N}, got {inertia_m.shape}")
        if any(sp.simplify(e) != 0 for e in inertia_m - inertia_m.T):
            raise ValueError("inertia must be symmetric")
        A = sp.Matrix(constraint_subspace)
        if A.cols != N or A.rows < 1 or A.rows >= N:
            raise ValueError(
                f"constraint_subspace must be a k x {N} annihilator matrix with 1 <= k < {N}, "
                f"got {A.shape}"
            )
        if velocities is None:
            velocities = list(sp.symbols(f"Omega1:{N + 1}", real=True))
        velocities = list(velocities)
        if len(velocities) != N:
            raise ValueError(f"velocities must have {N} symbols, got {len(velocities)}")
        advected = list(advected)
        adv_rhs = advected_rhs(velocities) if callable(advected_rhs) else advected_rhs
        adv_rhs = [sp.sympify(e) for e in adv_rhs]
        if len(adv_rhs) != len(advected):
            raise ValueError(
                f"advected_rhs has {len(adv_rhs)} entries for {len(advected)} advected states"
            )
        if force is None:
            F = [sp.Integer(0)] * N
        else:
            F = [sp.sympify(e) for e in (force(velocities) if callable(force) else force)]
        if len(F) != N:
            raise ValueError(f"force must have {N} components, got {len(F)}")
        self.c, self.N, self.inertia, self.annihilator = c, N, inertia_m, A
        self.velocities, self.params = velocities, list(params)
        self.advected, self.advected_rhs, self.force = advected, adv_rhs, F
        self.potential = sp.sympify(potential)
        self.extra_observables = dict(observables or {})
        self.name = name

    @staticmethod
    def _check_lie(c: sp.MutableDenseNDimArray, N: int) -> None:
        for i in range(N):
            for j in range(N):
                for k in range(N):
                    if sp.simplify(c[i, j, k] + c[j, i, k]) != 0:
                        raise ValueError(
                            f"structure_constants are not skew: c[{i},{j},{k}] != -c[{j},{i},{k}]"
                        )
        for i in range(N):
            for j in range(N):
                for k in range(N):
                    for m in range(N):
                        jac = sum(
                            c[i, j, l_] * c[l_, k, m]
                            + c[j, k, l_] * c[l_, i, m]
                            + c[k, i, l_] * c[l_, j, m]
                            for l_ in range(N)
                        )
                        if sp.simplify(jac) != 0:
                            raise ValueError(
                                f"structure_constants violate the Jacobi identity at "
                                f"(i, j, k) = ({i}, {j}, {k})"
                            )

    def momentum(self) -> list[sp.Expr]:
        """``M = I Omega``."""
        return list(self.inertia * sp.Matrix(self.velocities))

    def coadjoint(self) -> list[sp.Expr]:
        """``(ad*_Omega M)_k = sum_{i,j} Omega_i c_ik^j M_j`` with ``M = I Omega``."""
        M, W, c, N = self.momentum(), self.velocities, self.c, self.N
        return [
            sp.Add(*[W[i] * c[i, k, j] * M[j] for i in range(N) for j in range(N)])
            for k in range(N)
        ]

    def energy(self) -> sp.Expr:
        """``1/2 Omega^T I Omega + U``."""
        W = sp.Matrix(self.velocities)
        return (W.T * self.inertia * W)[0, 0] / 2 + self.potential

    def as_vector_field(self) -> VectorField:
        """The equations as a :class:`VectorField`: states ``Omega`` then the advected states.

        Observables: ``energy``, ``constraint`` (``sum_alpha (a_alpha . Omega)^2``) and the
        user's.

        Returns
        -------
        VectorField
        """
        N, A, k = self.N, self.annihilator, self.annihilator.rows
        W = sp.Matrix(self.velocities)
        taken = {str(s) for s in [*self.velocities, *self.advected, *self.params]}
        acc = [sp.Symbol(fresh_name(f"dOmega{i + 1}", taken), real=True) for i in range(N)]
        lam = [sp.Symbol(fresh_name(f"lambda{a + 1}", taken), real=True) for a in range(k)]
        Adot = sp.zeros(k, N)
        for x, xdot in zip(self.advected, self.advected_rhs, strict=True):
            Adot += A.diff(x) * xdot
        top = sp.Matrix([e + f for e, f in zip(self.coadjoint(), self.force, strict=True)])
        bottom = -Adot * W
        mat = sp.zeros(N + k, N + k)
        mat[:N, :N] = self.inertia
        mat[:N, N:] = -A.T
        mat[N:, :N] = A
        solve = LinearSolve(
            unknowns=[*acc, *lam], matrix=mat, rhs=[*top, *bottom], spd=False
        )  # fmt: skip
        obs = {
            "energy": self.energy(),
            "constraint": sp.Add(*[e**2 for e in A * W]),
            **self.extra_observables,
        }
        return VectorField(
            states=[*self.velocities, *self.advected],
            rhs=[*acc, *self.advected_rhs],
            params=self.params,
            observables=obs,
            solves=[solve],
            name=self.name,
        )
