"""Vakonomic equations of a system with linear constraints, in coordinates and in a frame.

Coordinates (Martinez, Cortes & de Leon 2000, eq. (4)): states ``(q, qdot, lambda)``; the saddle
system in ``(qddot, lambdadot)``::

    [ g  W^T ] [ qddot     ]   [ F - K^T lambda                  ]
    [ W   0  ] [ lambdadot ] = [ -(d W_iA / d q^B) qdot^A qdot^B ]

is solved symbolically for small systems, else recorded as a
:class:`~nhfast.vectorfield.LinearSolve` (its determinant is ``det g det(-W g^-1 W^T)``).  The
nonholonomic equations are the same system with ``-W^T lambda`` and no ``K`` term.

Adapted frame (Crampin & Mestdag 2010, Section 4; Mestdag & Crampin 2010, eq. (4.2)): states
``(q, v_alpha, mu_a)`` on ``C = {v^a = 0}``, with ``[X_i, X_j] = R^k_ij X_k`` and
``gf_ij = g(X_i, X_j)``::

    gf_ab vdot^b + h_a   = mu_b R^b_{alpha beta} v^beta
    mudot_a = gf_{a beta} vdot^beta + h_a - mu_b R^b_{a alpha} v^alpha
    h_i = (X_k(gf_ij) - 1/2 X_i(gf_jk)) v^j v^k + R^l_ik gf_lj v^j v^k + X_i(U)

Multiplier signs: see :mod:`nhfast.symbolic.vakonomic._forms` (the one convention).

References: Crampin & Mestdag (2010), "Anholonomic frames in constrained dynamics"; Mestdag &
Crampin (2010), "Nonholonomic systems as restricted Euler-Lagrange systems"; Martínez, Cortés & de
León (2000), "The geometrical theory of constraints applied to the dynamics of vakonomic mechanical
systems: the vakonomic bracket".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import sympy as sp

from nhfast._validate import params_rows
from nhfast.symbolic import frames as _fr
from nhfast.symbolic._util import Simplifier, fresh_symbols, simplifier
from nhfast.symbolic.equations import EquationsOfMotion
from nhfast.symbolic.vakonomic._forms import (
    check_system,
    completed_frame,
    constraint_one_forms,
    forces,
    frame_to_coordinate_multipliers,
    normal,
    taken_names,
    velocity_symbols,
)
from nhfast.vectorfield import LinearSolve

__all__ = [
    "vakonomic_equations",
    "vakonomic_frame_equations",
]

SolveMode = Literal["auto", "symbolic", "linear"]
#: Largest ``n + m`` (coordinate form) or ``r`` (frame form) solved symbolically by "auto".
SMALL = 6


def _use_symbolic(solve: str, size: int) -> bool:
    if solve not in ("auto", "symbolic", "linear"):
        raise ValueError(f"solve must be 'auto', 'symbolic' or 'linear', got {solve!r}")
    return solve == "symbolic" or (solve == "auto" and size <= SMALL)


def _coordinate_equations(
    system: Any, vakonomic: bool, solve: SolveMode, simplify: Simplifier, kind: str
) -> EquationsOfMotion:
    system = check_system(system)
    simp = simplifier(system._simp(simplify) if simplify == "default" else simplify)
    q = list(system.q)
    n = len(q)
    w = constraint_one_forms(system)
    m = w.rows
    g = system.metric
    U = system.potential
    qd = velocity_symbols(system)
    taken = taken_names(system) | {str(s) for s in qd}
    lam = fresh_symbols([f"lambda_{i + 1}" for i in range(m)], taken)
    qdd = fresh_symbols([f"{a}_ddot" for a in q], taken)
    F = forces(g, U, q, qd)
    # tangency: (d W_iA / d q^B) qdot^A qdot^B
    tang = [
        sum((sp.diff(w[i, A], q[B]) * qd[A] * qd[B] for A in range(n) for B in range(n)), 0)
        for i in range(m)
    ]
    if vakonomic:
        # K_iA = (d_B W_iA - d_A W_iB) qdot^B ; first rows: g qddot + W^T lambdadot = F - K^T lam
        rows = []
        for A in range(n):
            kt = sum(
                (
                    lam[i] * (sp.diff(w[i, A], q[B]) - sp.diff(w[i, B], q[A])) * qd[B]
                    for i in range(m)
                    for B in range(n)
                ),
                sp.Integer(0),
            )
            rows.append(F[A] - kt)
        mat = sp.Matrix(sp.BlockMatrix([[g, w.T], [w, sp.zeros(m, m)]]))
        lamd = fresh_symbols([f"lambda_{i + 1}_dot" for i in range(m)], taken)
        unknowns = [*qdd, *lamd]
    else:
        rows = list(F)
        mat = sp.Matrix(sp.BlockMatrix([[g, -w.T], [w, sp.zeros(m, m)]]))
        unknowns = [*qdd, *lam]
    rhs_vec = [*rows, *[-t for t in tang]]
    solves: list[LinearSolve] = []
    if _use_symbolic(solve, n + m):
        sol = mat.LUsolve(sp.Matrix(rhs_vec))
        vals = [simp(e) for e in sol]
    else:
        solves.append(LinearSolve(unknowns=unknowns, matrix=mat, rhs=rhs_vec, spd=False))
        vals = list(unknowns)
    energy = simp((sp.Matrix(qd).T * g * sp.Matrix(qd))[0, 0] / 2 + U)
    obs: dict[str, sp.Expr] = {
        f"constraint_{i + 1}": sum((w[i, A] * qd[A] for A in range(n)), sp.Integer(0))
        for i in range(m)
    }
    if vakonomic:
        states = [*q, *qd, *lam]
        rhs = [*qd, *vals[:n], *vals[n:]]
    else:
        states = [*q, *qd]
        rhs = [*qd, *vals[:n]]
        obs.update({f"reaction_{i + 1}": vals[n + i] for i in range(m)})
    return EquationsOfMotion(
        states=states,
        rhs=rhs,
        params=list(system.params),
        energy=energy,
        constraints=[obs[f"constraint_{i + 1}"] for i in range(m)],
        observables=obs,
        solves=solves,
        kind=kind,
    )


def vakonomic_equations(
    system: Any, solve: SolveMode = "auto", simplify: Simplifier | str = "default"
) -> EquationsOfMotion:
    """Vakonomic equations in coordinates, multipliers as states (Martinez et al. 2000, (4)).

    Parameters
    ----------
    system : NonholonomicSystem
        Uses ``metric``, ``potential`` and the constraint 1-forms (see
        :func:`constraint_one_forms`).
    solve : {"auto", "symbolic", "linear"}
        ``symbolic``: solve the saddle system for ``(qddot, lambdadot)`` with ``LUsolve``;
        ``linear``: record it as a :class:`~nhfast.vectorfield.LinearSolve` (LU in the
        kernels); ``auto``: symbolic when ``n + m <= 6``.
    simplify : bool or callable or "default"
        Applied to the symbolic solution (default: the system's).

    Returns
    -------
    EquationsOfMotion
        States ``(q, qdot, lambda)`` (names ``<q>_dot``, ``lambda_i``; the coordinate
        multipliers of ``_forms``, ``calL = L + lambda^i Phi_i``); energy
        ``1/2 qdot g qdot + U``; observables ``constraint_i = W_i qdot``.  On
        ``{W qdot = 0}`` (the final constraint submanifold ``P_2``) every multiplier value is
        admissible initial data.
    """
    kind = "vakonomic (coordinates, Martinez-Cortes-de Leon (4))"
    return _coordinate_equations(system, True, solve, simplify, kind)


def nonholonomic_coordinate_equations(
    system: Any, solve: SolveMode = "auto", simplify: Simplifier | str = "default"
) -> EquationsOfMotion:
    """Lagrange-d'Alembert equations in ``(q, qdot)``, multipliers eliminated.

    ``E_A(L) = lambda_b W_bA`` with ``W qdot = 0``; the reaction multipliers are the
    observables ``reaction_b`` (reaction sign of ``_forms``).  Same conventions and ``solve``
    modes as :func:`vakonomic_equations`; needs no frame, so it has no chart singularities.

    Returns
    -------
    EquationsOfMotion
        States ``(q, qdot)``.
    """
    return _coordinate_equations(
        system, False, solve, simplify, "nonholonomic (Lagrange-d'Alembert, coordinates)"
    )


@dataclass
class FrameVakonomicEquations:
    """Vakonomic equations in an adapted frame (Crampin & Mestdag 2010), with the conversion maps.

    Attributes
    ----------
    equations : EquationsOfMotion
        States ``(q, v_alpha, mu_a)`` (names ``v_1..v_r``, ``mu_1..mu_m``; the frame
        multipliers of ``_forms``).
    full_frame : sympy.Matrix
        ``n x n``: the frame of D followed by the completion.
    R : sympy.NDimArray
        ``R[i, j, k] = R^k_ij`` of the full frame.
    frame_metric : sympy.Matrix
        ``gf_ij = g(X_i, X_j)``.
    Lambda : sympy.Matrix
        ``m x m`` with ``theta^a = Lambda^a_i W_i``; coordinate multipliers
        ``lambda = -Lambda^T mu``.
    one_forms : sympy.Matrix
        The coordinate 1-forms ``W`` that ``lambda`` refers to.
    q : list of sympy.Symbol
    params : list of sympy.Symbol
    """

    equations: EquationsOfMotion
    full_frame: sp.Matrix
    R: Any
    frame_metric: sp.Matrix
    Lambda: sp.Matrix
    one_forms: sp.Matrix
    q: list
    params: list

    def as_vector_field(self) -> Any:
        """The :class:`~nhfast.vectorfield.VectorField` of :attr:`equations`."""
        return self.equations.as_vector_field()

    def _num(self, expr: sp.Matrix, q: np.ndarray, params: Any) -> np.ndarray:
        f = sp.lambdify([*self.q, *self.params], expr, modules="numpy")
        par = params_rows(params, self.params, 1)[0]
        return np.asarray(f(*q, *par), dtype=float)

    def from_coordinates(self, q: Any, qdot: Any, lam: Any, params: Any = None) -> np.ndarray:
        """State ``(q, v_alpha, mu)`` of this form from ``(q, qdot, lambda)``.

        Raises
        ------
        ValueError
            If ``qdot`` is not in D (``|v^a| > 1e-9 (1 + |qdot|)``) or shapes are wrong.
        """
        q = np.asarray(q, dtype=float)
        qdot = np.asarray(qdot, dtype=float)
        lam = np.asarray(lam, dtype=float)
        n = self.full_frame.rows
        r = n - self.Lambda.rows
        if q.shape != (n,) or qdot.shape != (n,) or lam.shape != (self.Lambda.rows,):
            raise ValueError(
                f"q, qdot must have shape ({n},) and lam ({self.Lambda.rows},); got "
                f"{q.shape}, {qdot.shape}, {lam.shape}"
            )
        X = self._num(self.full_frame, q, params)
        v = np.linalg.solve(X, qdot)
        if np.max(np.abs(v[r:]), initial=0.0) > 1e-9 * (1 + np.max(np.abs(qdot))):
            raise ValueError(f"qdot is not in D: transverse quasi-velocities {v[r:]}")
        Lam = self._num(self.Lambda, q, params)
        mu = np.linalg.solve(-Lam.T, lam)  # inverse of frame_to_coordinate_multipliers
        return np.concatenate([q, v[:r], mu])

    def to_coordinates(
        self, state: Any, params: Any = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(q, qdot, lambda)`` from a state ``(q, v_alpha, mu)``."""
        state = np.asarray(state, dtype=float)
        n, m = self.full_frame.rows, self.Lambda.rows
        r = n - m
        q, v, mu = state[:n], state[n : n + r], state[n + r :]
        X = self._num(self.full_frame, q, params)
        Lam = self._num(self.Lambda, q, params)
        return q, X[:, :r] @ v, frame_to_coordinate_multipliers(Lam, mu)


def vakonomic_frame_equations(
    system: Any,
    complement: Any = None,
    solve: SolveMode = "auto",
    simplify: Simplifier | str = "default",
) -> FrameVakonomicEquations:
    """Vakonomic equations in an adapted anholonomic frame (Mestdag & Crampin 2010, (4.2)).

    Parameters
    ----------
    system : NonholonomicSystem
        ``system.frame`` gives ``X_alpha`` (spanning D).
    complement : sympy.Matrix, optional
        ``n x m`` fields ``X_a`` completing the frame (default: coordinate fields, see
        :meth:`NonholonomicSystem.completed_frame`).  The multipliers ``mu_a`` are the
        components of the covector in the coframe ``theta^a`` dual to ``X_a``.
    solve : {"auto", "symbolic", "linear"}
        How ``gf_{alpha beta} vdot^beta = ...`` is solved (``auto``: symbolic for ``r <= 6``).
    simplify : bool or callable or "default"

    Returns
    -------
    FrameVakonomicEquations
        States ``(q, v_1..v_r, mu_1..mu_m)``; energy ``1/2 gf_{alpha beta} v v + U``.
    """
    system = check_system(system)
    simp = simplifier(system._simp(simplify) if simplify == "default" else simplify)
    q = list(system.q)
    n, r = system.dim, system.rank
    m = n - r
    full = completed_frame(system, complement)
    R = _fr.anholonomity(full, q, simplify=simp)
    gf = (full.T * system.metric * full).applyfunc(simp)
    U = system.potential
    taken = taken_names(system)
    v = fresh_symbols([f"v_{i + 1}" for i in range(r)], taken)
    mu = fresh_symbols([f"mu_{a + 1}" for a in range(m)], taken)

    def along(k: int, f: sp.Expr) -> sp.Expr:  # X_k(f)
        return sum((full[A, k] * sp.diff(f, q[A]) for A in range(n)), sp.Integer(0))

    def h(i: int) -> sp.Expr:
        out = along(i, U)
        for j in range(r):
            for k in range(r):
                c = along(k, gf[i, j]) - sp.Rational(1, 2) * along(i, gf[j, k])
                c += sum((R[i, k, s] * gf[s, j] for s in range(n)), sp.Integer(0))
                if c != 0:
                    out += c * v[j] * v[k]
        return out

    hs = [h(i) for i in range(n)]
    rhs_a = []
    for al in range(r):
        force = sum(
            (mu[a] * R[al, be, r + a] * v[be] for a in range(m) for be in range(r)),
            sp.Integer(0),
        )
        rhs_a.append(force - hs[al])
    gaa = gf[:r, :r]
    solves: list[LinearSolve] = []
    if _use_symbolic(solve, r):
        vdot = [simp(e) for e in gaa.LUsolve(sp.Matrix(rhs_a))]
    else:
        vdot_syms = fresh_symbols([f"v_{i + 1}_dot" for i in range(r)], taken)
        solves.append(LinearSolve(unknowns=vdot_syms, matrix=gaa, rhs=rhs_a, spd=True))
        vdot = list(vdot_syms)
    mudot = []
    for a in range(m):
        e = hs[r + a] + sum((gf[r + a, be] * vdot[be] for be in range(r)), sp.Integer(0))
        e -= sum(
            (mu[b] * R[r + a, al, r + b] * v[al] for b in range(m) for al in range(r)),
            sp.Integer(0),
        )
        mudot.append(simp(e))
    qdot = [simp(sum((full[A, al] * v[al] for al in range(r)), sp.Integer(0))) for A in range(n)]
    energy = simp(
        sum((gf[i, j] * v[i] * v[j] for i in range(r) for j in range(r)), sp.Integer(0)) / 2 + U
    )
    w = constraint_one_forms(system, complement)
    # theta^a = Lambda^a_i W_i with theta^a(X_b) = delta^a_b and W(X_alpha) = 0, so
    # Lambda = (W X_comp)^-1: an m x m solve (a symbolic inverse of W W^T takes minutes on the
    # carriage)
    Lam = (w * full[:, r:]).LUsolve(sp.eye(m)).applyfunc(normal)
    eqs = EquationsOfMotion(
        states=[*q, *v, *mu],
        rhs=[*qdot, *vdot, *mudot],
        params=list(system.params),
        energy=energy,
        solves=solves,
        kind="vakonomic (adapted frame, Crampin-Mestdag)",
    )
    return FrameVakonomicEquations(
        equations=eqs,
        full_frame=full,
        R=R,
        frame_metric=gf,
        Lambda=Lam,
        one_forms=w,
        q=q,
        params=list(system.params),
    )
