"""Vakonomic equations of a system with linear constraints, in coordinates and in a frame.

Both forms start from the same :class:`~nhfast.symbolic.systems.NonholonomicSystem` as the
nonholonomic equations: ``L = 1/2 qdot^T g(q) qdot - U(q)`` and constraint 1-forms
``Phi_i = W_iA(q) qdot^A`` (rows of ``system.constraint_forms``; when the system was given by a
frame, the 1-forms are the rows of the inverse of the completed frame that annihilate D).

**Coordinates, seed 003 (4)**, multiplier sign of seed 003 (``calL = L + lambda^i Phi_i``)::

    E_A(L) + lambdadot^i W_iA + lambda^i K_iA = 0,     W_iA qdot^A = 0,
    E_A(L) = d/dt dL/dqdot^A - dL/dq^A,     K_iA = (d W_iA/dq^B - d W_iB/dq^A) qdot^B.

Differentiating the constraint gives the linear system in ``(qddot, lambdadot)``::

    [ g  W^T ] [ qddot     ]   [ F - K^T lambda              ]
    [ W   0  ] [ lambdadot ] = [ -(d W_iA / d q^B) qdot^A qdot^B ]

with ``F_A = -(d_C g_AB - 1/2 d_A g_BC) qdot^B qdot^C - d_A U``.  Its determinant is
``det g * det(-W g^{-1} W^T)`` (seed 003 (13): ``D = W g^{-1} W^T`` invertible), so it is solved
symbolically for small systems and otherwise recorded as a :class:`~nhfast.vectorfield.LinearSolve`
(LU), never as a symbolic inverse.  The nonholonomic (Lagrange-d'Alembert) equations are the same
system with ``-W^T lambda`` in the first row and no ``K`` term (seed 002 Section 2:
``E_A(L) = lambda_b W_bA``); they are offered for side-by-side comparisons.

**Frame, seeds 001 [S4-3] / 002 (4.2)**, multiplier sign of seed 002 (``L - mu_a v^a``): with an
adapted frame ``X = (X_alpha | X_a)`` (``X_alpha`` spanning D), quasi-velocities ``v = X^{-1}
qdot``, ``[X_i, X_j] = R^k_ij X_k`` and the frame metric ``gf_ij = g(X_i, X_j)``, on ``C =
{v^a = 0}``::

    gf_ab vdot^b + h_a   = mu_b R^b_{alpha beta} v^beta            (alpha rows, b, beta in D)
    mudot_a = gf_{a beta} vdot^beta + h_a - mu_b R^b_{a alpha} v^alpha
    h_i = (X_k(gf_ij) - 1/2 X_i(gf_jk)) v^j v^k + R^l_ik gf_lj v^j v^k + X_i(U)

(``Gamma(X_i^V L) - X_i^C L = gf_ij vdot^j + h_i``, digest A.2.4).  Since ``-mu_a theta^a =
lambda^i W_i`` for the coframe ``theta^a`` of the completion, the two multipliers are related by
``lambda = -Lambda^T mu`` where ``theta^a = Lambda^a_i W_i``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import sympy as sp

from nhfast.symbolic import frames as _fr
from nhfast.symbolic._util import Simplifier, as_matrix, generic_rank, is_zero, simplifier
from nhfast.symbolic.equations import EquationsOfMotion
from nhfast.vectorfield import LinearSolve

__all__ = [
    "SolveMode",
    "constraint_one_forms",
    "is_integrable",
    "velocity_symbols",
    "multiplier_symbols",
    "vakonomic_equations",
    "nonholonomic_coordinate_equations",
    "FrameVakonomicEquations",
    "vakonomic_frame_equations",
]

SolveMode = Literal["auto", "symbolic", "linear"]
#: Largest ``n + m`` (coordinate form) or ``r`` (frame form) solved symbolically by "auto".
SMALL = 6


def _check_system(system: Any) -> Any:
    from nhfast.symbolic.systems import NonholonomicSystem

    if not isinstance(system, NonholonomicSystem):
        raise TypeError(f"system must be a NonholonomicSystem, got {type(system).__name__}")
    if system.rank >= system.dim:
        raise ValueError(
            "system has no constraints (D = TQ): vakonomic and free motions coincide; "
            "give constraints or a frame of rank < dim"
        )
    return system


def _fresh(names: Sequence[str], taken: set[str]) -> list[sp.Symbol]:
    out = []
    for nm in names:
        cand = nm
        while cand in taken:
            cand = cand + "_"
        taken.add(cand)
        out.append(sp.Symbol(cand, real=True))
    return out


def _taken(system: Any) -> set[str]:
    return {str(s) for s in (*system.q, *system.params)}


def velocity_symbols(system: Any) -> list[sp.Symbol]:
    """Symbols ``<q>_dot`` for the velocities (fresh names, real)."""
    return _fresh([f"{a}_dot" for a in system.q], _taken(system))


def multiplier_symbols(system: Any, m: int, prefix: str = "lambda") -> list[sp.Symbol]:
    """Symbols ``<prefix>_1..<prefix>_m`` for the multipliers (fresh names, real)."""
    return _fresh([f"{prefix}_{i + 1}" for i in range(m)], _taken(system))


def constraint_one_forms(system: Any, complement: Any = None) -> sp.Matrix:
    """Constraint 1-forms ``W`` (``m x n``, ``D = ker W``) of a nonholonomic system.

    Parameters
    ----------
    system : NonholonomicSystem
    complement : sympy.Matrix, optional
        Used only when the system has no ``constraint_forms``: ``n x m`` fields completing the
        frame of D (default: ``system.completed_frame()``).  The 1-forms are then the last
        ``m`` rows of the inverse of the completed frame (the coframe ``theta^a``).

    Returns
    -------
    sympy.Matrix
    """
    system = _check_system(system)
    if system.constraint_forms is not None:
        return system.constraint_forms
    full = _full_frame(system, complement)
    r = system.rank
    inv = full.LUsolve(sp.eye(system.dim))
    return inv[r:, :].applyfunc(sp.simplify)


def _full_frame(system: Any, complement: Any) -> sp.Matrix:
    if complement is None:
        return system.completed_frame()
    comp = as_matrix(complement, "complement")
    if comp.shape != (system.dim, system.dim - system.rank):
        raise ValueError(
            f"complement must be {system.dim} x {system.dim - system.rank} "
            f"(fields completing the frame of D), got {comp.shape}"
        )
    full = sp.Matrix.hstack(system.frame, comp)
    if generic_rank(full, system.q + system.params) < system.dim:
        raise ValueError("complement: frame of D and complement are not independent")
    return full


def is_integrable(system: Any, simplify: Simplifier = True) -> bool:
    """True when D is involutive (``[D, D] in D``), i.e. the constraints are holonomic.

    Then every ``R^a_{alpha beta}`` vanishes, the multiplier terms drop out of the
    vakonomic equations for the motion in ``q`` (seed 001 [S4-3]), and nonholonomic and
    vakonomic motions coincide for every choice of initial multipliers.
    """
    system = _check_system(system)
    w = constraint_one_forms(system)
    simp = simplifier(simplify)
    for col in _fr.frame_brackets(system.frame, system.q).values():
        for e in w * col:
            if not is_zero(simp(e)):
                return False
    return True


def _use_symbolic(solve: str, size: int) -> bool:
    if solve not in ("auto", "symbolic", "linear"):
        raise ValueError(f"solve must be 'auto', 'symbolic' or 'linear', got {solve!r}")
    return solve == "symbolic" or (solve == "auto" and size <= SMALL)


def _forces(g: sp.Matrix, U: sp.Expr, q: list, qd: list) -> list[sp.Expr]:
    """``F_A = -(d_C g_AB - 1/2 d_A g_BC) qdot^B qdot^C - d_A U``."""
    n = len(q)
    out = []
    for A in range(n):
        f = -sp.diff(U, q[A])
        for B in range(n):
            for C in range(n):
                c = sp.diff(g[A, B], q[C]) - sp.Rational(1, 2) * sp.diff(g[B, C], q[A])
                if c != 0:
                    f -= c * qd[B] * qd[C]
        out.append(f)
    return out


def _coordinate_equations(
    system: Any, vakonomic: bool, solve: SolveMode, simplify: Simplifier, kind: str
) -> EquationsOfMotion:
    system = _check_system(system)
    simp = simplifier(system._simp(simplify) if simplify == "default" else simplify)
    q = list(system.q)
    n = len(q)
    w = constraint_one_forms(system)
    m = w.rows
    g = system.metric
    U = system.potential
    qd = velocity_symbols(system)
    taken = _taken(system) | {str(s) for s in qd}
    lam = _fresh([f"lambda_{i + 1}" for i in range(m)], taken)
    qdd = _fresh([f"{a}_ddot" for a in q], taken)
    F = _forces(g, U, q, qd)
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
        lamd = _fresh([f"lambda_{i + 1}_dot" for i in range(m)], taken)
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
    """Vakonomic equations in coordinates with the multipliers as states (seed 003 (4)).

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
        States ``(q, qdot, lambda)`` (names ``<q>_dot``, ``lambda_i``; seed 003's sign,
        ``calL = L + lambda^i Phi_i``); energy ``1/2 qdot g qdot + U``; observables
        ``constraint_i = W_i qdot``.  On ``{W qdot = 0}`` (the final constraint submanifold
        ``P_2`` of seed 003) every multiplier value is admissible initial data.
    """
    return _coordinate_equations(system, True, solve, simplify, "vakonomic (seed 003 (4))")


def nonholonomic_coordinate_equations(
    system: Any, solve: SolveMode = "auto", simplify: Simplifier | str = "default"
) -> EquationsOfMotion:
    """Lagrange-d'Alembert equations in ``(q, qdot)``, multipliers eliminated (seed 002 Section 2).

    ``E_A(L) = lambda_b W_bA`` with ``W qdot = 0``; the reaction multipliers are the
    observables ``reaction_b`` (seed 002's sign).  Same conventions and ``solve`` modes as
    :func:`vakonomic_equations`; needs no frame, so it has no chart singularities.

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
    """Vakonomic equations in an adapted frame (seeds 001/002), with the conversion maps.

    Attributes
    ----------
    equations : EquationsOfMotion
        States ``(q, v_alpha, mu_a)`` (names ``v_1..v_r``, ``mu_1..mu_m``; seed 002's sign).
    full_frame : sympy.Matrix
        ``n x n``: the frame of D followed by the completion.
    R : sympy.NDimArray
        ``R[i, j, k] = R^k_ij`` of the full frame.
    frame_metric : sympy.Matrix
        ``gf_ij = g(X_i, X_j)``.
    Lambda : sympy.Matrix
        ``m x m`` with ``theta^a = Lambda^a_i W_i``; coordinate multipliers (seed 003 sign)
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
        par = [] if params is None else list(np.atleast_1d(np.asarray(params, dtype=float)))
        if len(par) != len(self.params):
            raise ValueError(
                f"params must hold {len(self.params)} values "
                f"({', '.join(map(str, self.params))}), got {len(par)}"
            )
        return np.asarray(f(*q, *par), dtype=float)

    def from_coordinates(self, q: Any, qdot: Any, lam: Any, params: Any = None) -> np.ndarray:
        """State ``(q, v_alpha, mu)`` of this form from ``(q, qdot, lambda)`` (seed 003 sign).

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
        mu = np.linalg.solve(-Lam.T, lam)
        return np.concatenate([q, v[:r], mu])

    def to_coordinates(
        self, state: Any, params: Any = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(q, qdot, lambda)`` (seed 003 sign) from a state ``(q, v_alpha, mu)``."""
        state = np.asarray(state, dtype=float)
        n, m = self.full_frame.rows, self.Lambda.rows
        r = n - m
        q, v, mu = state[:n], state[n : n + r], state[n + r :]
        X = self._num(self.full_frame, q, params)
        Lam = self._num(self.Lambda, q, params)
        return q, X[:, :r] @ v, -Lam.T @ mu


def vakonomic_frame_equations(
    system: Any,
    complement: Any = None,
    solve: SolveMode = "auto",
    simplify: Simplifier | str = "default",
) -> FrameVakonomicEquations:
    """Vakonomic equations in an adapted anholonomic frame (seed 001 [S4-3], seed 002 (4.2)).

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
    system = _check_system(system)
    simp = simplifier(system._simp(simplify) if simplify == "default" else simplify)
    q = list(system.q)
    n, r = system.dim, system.rank
    m = n - r
    full = _full_frame(system, complement)
    R = _fr.anholonomity(full, q, simplify=simp)
    gf = (full.T * system.metric * full).applyfunc(simp)
    U = system.potential
    taken = _taken(system)
    v = _fresh([f"v_{i + 1}" for i in range(r)], taken)
    mu = _fresh([f"mu_{a + 1}" for a in range(m)], taken)

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
        vdot_syms = _fresh([f"v_{i + 1}_dot" for i in range(r)], taken)
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
    inv = full.LUsolve(sp.eye(n))
    theta = inv[r:, :]
    # theta = Lambda W  ->  Lambda = theta W^T (W W^T)^{-1}
    Lam = (theta * w.T * (w * w.T).inv()).applyfunc(sp.simplify)
    eqs = EquationsOfMotion(
        states=[*q, *v, *mu],
        rhs=[*qdot, *vdot, *mudot],
        params=list(system.params),
        energy=energy,
        solves=solves,
        kind="vakonomic (adapted frame, seed 001/002)",
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
