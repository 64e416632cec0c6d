"""Nonholonomic equations of motion as plain SymPy output.

Three forms (García-Naranjo & Marrero (2020), Sec. 2.2 and (3.17); Crampin & Mestdag (2010),
Secs. 2.2 and 3):

(a) :func:`almost_poisson_equations` -- on ``D*`` with states ``(q, p)``, ``p_i = <<qdot, e_i>>``::

        qdot^a = rho_i^a dH/dp_i,
        pdot_i = -rho_i^a dH/dq^a - C^k_ij p_k dH/dp_j,      H = 1/2 K^{ij} p_i p_j + U.

(b) :func:`hamel_equations` -- Lagrange-d'Alembert in quasi-velocities ``v`` (``qdot = rho v``),
    the Euler-Lagrange equations in a frame of Crampin & Mestdag (2010), Sec. 2.2, restricted to
    the constraint submanifold ``v^a = 0`` (their Sec. 3)::

        K_ij vdot^j = 1/2 e_i(K_jk) v^j v^k - e_k(K_ij) v^k v^j - R^m_ik g_ml v^k v^l - e_i(U),

    with ``R`` the object of anholonomity of the frame ``e`` completed by coordinate fields and
    ``g`` the frame metric of the completed frame.  This route never uses ``C`` or the
    projector, so comparing (a) and (b) is a genuine check.

(c) :func:`chaplygin_equations` -- the reduced equations (3.17) of García-Naranjo & Marrero
    (2020) on ``T*S``::

        sdot^i = dH/dp_i,   pdot_i = -dH/ds^i - C^k_ij p_k dH/dp_j.

Linear solves.  For ``r <= 3`` (``inverse="auto"``) ``v = K^{-1} p`` is formed with ``LUsolve``
and the right-hand side is explicit.  For larger ``r`` the right-hand side is written in terms of
auxiliary symbols (``v_1..v_r`` for the velocities, ``a_1..a_r`` for the Hamel accelerations)
that are defined by linear systems recorded in ``EquationsOfMotion.solves``: a list of
:class:`LinearSolve` ``(unknowns, matrix, rhs)`` meaning ``matrix * unknowns = rhs``, to be
solved numerically in order (later solves may use earlier unknowns).
:meth:`EquationsOfMotion.explicit` eliminates them symbolically if ever wanted.

References: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited"; Crampin & Mestdag (2010), "Anholonomic frames in constrained dynamics".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import sympy as sp

from nhfast.symbolic import frames as _fr
from nhfast.symbolic._util import Simplifier, as_symbol_list, fresh_symbols, simplifier
from nhfast.symbolic.charts import cancel_removable
from nhfast.vectorfield import LinearSolve  # one definition, shared with the code generator

__all__ = [
    "LinearSolve",
    "EquationsOfMotion",
    "almost_poisson_equations",
    "hamel_equations",
    "chaplygin_equations",
]

Inverse = Literal["auto", "symbolic", "solve"]
SMALL_R = 3


@dataclass
class EquationsOfMotion:
    """First-order ODE ``d states/dt = rhs`` with parameters, energy and optional extras.

    Attributes
    ----------
    states : list of sympy.Symbol
    rhs : list of sympy.Expr
        Same length as ``states``; may contain the unknowns of ``solves``.
    params : list of sympy.Symbol
    energy : sympy.Expr
        Conserved energy (a function of states and params, possibly of ``solves`` unknowns).
    constraints : list of sympy.Expr or None
        Constraint functions that must stay zero (None when the state space already is the
        constraint submanifold, as for all forms produced here).
    observables : dict
        Further named expressions (e.g. ``{"time_factor": ...}``).
    solves : list of LinearSolve
        Auxiliary linear systems (see module docstring); empty for explicit equations.
    domain : dict
        Conditions ``expr > 0`` where the equations hold (a chart's domain, say), or
        ``sp.Ne(expr, 0)`` for ``expr != 0`` (a frame's singular set; see ``VectorField``).
    kind : str
        Which construction produced the equations.
    """

    states: list
    rhs: list
    params: list
    energy: sp.Expr
    constraints: list | None = None
    observables: dict = field(default_factory=dict)
    solves: list = field(default_factory=list)
    kind: str = ""
    domain: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.states) != len(self.rhs):
            raise ValueError(
                f"states and rhs must have equal length, got {len(self.states)} and {len(self.rhs)}"
            )

    def as_vector_field(self) -> Any:
        """Build a ``nhfast.vectorfield.VectorField`` (lazy import).

        ``observables`` gets ``{"energy": self.energy, **self.observables}``; auxiliary linear
        solves are passed on as ``solves=`` and solved numerically in the generated kernels.
        """
        from nhfast.vectorfield import VectorField

        obs = {"energy": self.energy, **self.observables}
        kwargs: dict[str, Any] = {"solves": list(self.solves)} if self.solves else {}
        return VectorField(
            states=self.states,
            rhs=self.rhs,
            params=self.params,
            observables=obs,
            domain=self.domain or None,
            **kwargs,
        )

    def explicit(self, simplify: Simplifier = False) -> EquationsOfMotion:
        """Eliminate the auxiliary unknowns symbolically (``LUsolve``); may be expensive."""
        simp = simplifier(simplify)
        rhs = list(self.rhs)
        energy = self.energy
        obs = dict(self.observables)
        subs: dict[sp.Symbol, sp.Expr] = {}
        for ls in self.solves:
            mat = ls.matrix.subs(subs)
            vec = sp.Matrix([sp.sympify(e).subs(subs) for e in ls.rhs])
            sol = mat.LUsolve(vec)
            subs.update({u: simp(sol[i]) for i, u in enumerate(ls.unknowns)})
        rhs = [simp(sp.sympify(e).subs(subs)) for e in rhs]
        energy = simp(sp.sympify(energy).subs(subs))
        obs = {k: sp.sympify(v).subs(subs) for k, v in obs.items()}
        return replace(self, rhs=rhs, energy=energy, observables=obs, solves=[])

    def lambdify(self) -> Callable[..., np.ndarray]:
        """NumPy function ``f(x, params=()) -> xdot`` (linear solves done with NumPy)."""
        base = list(self.states) + list(self.params)
        steps = []
        known = list(base)
        for ls in self.solves:
            steps.append(
                (sp.lambdify(known, ls.matrix, "numpy"), sp.lambdify(known, list(ls.rhs), "numpy"))
            )
            known = known + list(ls.unknowns)
        frhs = sp.lambdify(known, list(self.rhs), "numpy")

        def f(x: Sequence[float], params: Sequence[float] = ()) -> np.ndarray:
            args = [*x, *params]
            for fm, fb in steps:
                u = np.linalg.solve(
                    np.asarray(fm(*args), dtype=float), np.asarray(fb(*args), dtype=float)
                )
                args.extend(u.tolist())
            return np.asarray(frhs(*args), dtype=float)

        return f

    def energy_function(self) -> Callable[..., float]:
        """NumPy function ``E(x, params=())``."""
        tmp = replace(self, rhs=[self.energy] + [sp.Integer(0)] * (len(self.states) - 1))
        f = tmp.lambdify()
        return lambda x, params=(): float(f(x, params)[0])


def use_inverse(inverse: Inverse, r: int) -> bool:
    """Whether ``r x r`` velocities come from a symbolic inverse (else a kernel linear solve).

    ``"auto"`` takes the inverse up to ``SMALL_R`` and solves above.
    """
    if inverse not in ("auto", "symbolic", "solve"):
        raise ValueError(f"inverse must be 'auto', 'symbolic' or 'solve', got {inverse!r}")
    return inverse == "symbolic" or (inverse == "auto" and r <= SMALL_R)


def inverse_or_solve(
    K: sp.Matrix,
    rhs: Sequence[sp.Expr] | sp.Matrix,
    inverse: Inverse,
    names: Sequence[str],
    taken: set[str],
    simplify: Simplifier = True,
) -> tuple[sp.Matrix, list[LinearSolve]]:
    """``K^{-1} rhs``, symbolic (``LUsolve``) or as auxiliary unknowns with a recorded solve.

    Parameters
    ----------
    K : sympy.Matrix
        ``r x r`` matrix.
    rhs : list of sympy.Expr or sympy.Matrix
        ``r`` right-hand sides.
    inverse : {"auto", "symbolic", "solve"}
        See :func:`use_inverse`.
    names : list of str
        Names of the ``r`` unknowns when the solve is recorded (made unique against ``taken``).
    taken : set of str
        Names in use; updated with the names given out.
    simplify : bool or callable
        Applied to the symbolic solution.

    Returns
    -------
    solution : sympy.Matrix
        ``K^{-1} rhs``, or the column of unknowns.
    solves : list of LinearSolve
        Empty, or the one ``K * unknowns = rhs``.
    """
    b = sp.Matrix(rhs)
    if use_inverse(inverse, K.rows):
        return K.LUsolve(b).applyfunc(simplifier(simplify)), []
    unknowns = fresh_symbols(names, taken)
    return sp.Matrix(unknowns), [LinearSolve(unknowns=unknowns, matrix=K, rhs=list(b))]


def reduced_almost_poisson(
    q: Sequence[sp.Symbol],
    rho: sp.Matrix,
    K: sp.Matrix,
    C: Any,
    potential: sp.Expr,
    params: Sequence[sp.Symbol] = (),
    momenta: Sequence[sp.Symbol] | None = None,
    inverse: Inverse = "auto",
    simplify: Simplifier = True,
    kind: str = "almost_poisson",
) -> EquationsOfMotion:
    """Almost-Poisson equations from raw data ``(q, rho, K, C, U)``.

    Parameters
    ----------
    q : list of sympy.Symbol
        Base coordinates (``n``).
    rho : sympy.Matrix
        ``n x r`` frame ``e_i = rho_i^a d/dq^a``.
    K : sympy.Matrix
        ``r x r`` reduced metric.
    C : sympy.NDimArray
        ``C[i, j, k] = C^k_ij``.
    potential : sympy.Expr
        ``U(q)``.
    params : list of sympy.Symbol, optional
    momenta : list of sympy.Symbol, optional
        Names for ``p_1..p_r`` (default ``p_<coordinate or index>``).
    inverse : {"auto", "symbolic", "solve"}
        ``auto``: symbolic ``K^{-1} p`` (via ``LUsolve``) for ``r <= 3``, a recorded linear
        solve otherwise.
    simplify : bool or callable
    kind : str

    Returns
    -------
    EquationsOfMotion
        States ``q + p``.
    """
    q = as_symbol_list(q, "q")
    params = as_symbol_list(params, "params", allow_empty=True)
    r = K.rows
    if rho.shape != (len(q), r):
        raise ValueError(f"rho must be {len(q)} x {r}, got {rho.shape}")
    simp = simplifier(simplify)
    taken = {str(s) for s in (*q, *params)}
    if momenta is None:
        names = (
            [str(q[a]) for a in range(r)]
            if rho == sp.eye(len(q))[:, :r]
            else [str(i + 1) for i in range(r)]
        )
        p = fresh_symbols(names, taken, prefix="p")
    else:
        p = as_symbol_list(momenta, "momenta")
        if len(p) != r:
            raise ValueError(f"momenta must have {r} symbols, got {len(p)}")
        if {str(s) for s in p} & taken:
            raise ValueError("momenta clash with q or params")
    pv = sp.Matrix(p)
    v, solves = inverse_or_solve(
        K, pv, inverse, [f"v_{i + 1}" for i in range(r)], taken | {str(s) for s in p}, simp
    )
    U = sp.sympify(potential)
    dHdq = [-sp.Rational(1, 2) * (v.T * K.diff(qa) * v)[0, 0] + sp.diff(U, qa) for qa in q]
    qdot = [simp((rho[a, :] * v)[0, 0]) for a in range(len(q))]
    pdot = []
    for i in range(r):
        term = -sum((rho[a, i] * dHdq[a] for a in range(len(q))), sp.Integer(0))
        term -= sum((C[i, j, k] * p[k] * v[j] for j in range(r) for k in range(r)), sp.Integer(0))
        pdot.append(simp(term))
    energy = simp(sp.Rational(1, 2) * (pv.T * v)[0, 0] + U)
    return EquationsOfMotion(
        states=[*q, *p],
        rhs=[*qdot, *pdot],
        params=list(params),
        energy=energy,
        constraints=None,
        solves=solves,
        kind=kind,
    )


def almost_poisson_equations(
    system: Any,
    momenta: Sequence[sp.Symbol] | None = None,
    inverse: Inverse = "auto",
    simplify: Simplifier | str = "default",
) -> EquationsOfMotion:
    """Nonholonomic equations in almost-Poisson form on ``D*``.

    García-Naranjo & Marrero (2020), Prop. 2.1.

    Parameters
    ----------
    system : NonholonomicSystem
        Uses ``system.frame`` as ``e_i = rho_i^a d/dq^a``; ``C`` from ``P[e_i, e_j] = C^k_ij e_k``.
    momenta : list of sympy.Symbol, optional
        Symbols for ``p_i = <<qdot, e_i>>``.
    inverse : {"auto", "symbolic", "solve"}
        See module docstring.
    simplify : bool or callable

    Returns
    -------
    EquationsOfMotion
        ``states = q + p``, energy ``H = 1/2 K^{ij} p_i p_j + U``.
    """
    from nhfast.symbolic.systems import NonholonomicSystem

    if not isinstance(system, NonholonomicSystem):
        raise TypeError(f"system must be a NonholonomicSystem, got {type(system).__name__}")
    simplify = system._simp(simplify)
    K = system.reduced_metric(simplify=simplify)
    C = _fr.coefficients_from_pairings(
        K, system.bracket_pairings(simplify=simplify), simplify=simplify
    )
    eq = reduced_almost_poisson(
        system.q,
        system.frame,
        K,
        C,
        system.potential,
        system.params,
        momenta=momenta,
        inverse=inverse,
        simplify=simplify,
    )
    eq.domain = _frame_domain(system)
    return eq


def _frame_domain(system: Any) -> dict:
    """The domain of a system's frame (``chart_domain``): the singular set of the coordinate
    or given frame of a ``NonholonomicSystem``; for a ``ChaplyginSystem`` the frame is made of
    the horizontal lifts, singular where the splitting determinant vanishes."""
    chart_domain = getattr(system, "chart_domain", None)
    return dict(chart_domain()) if callable(chart_domain) else {}


def hamel_equations(
    system: Any,
    velocities: Sequence[sp.Symbol] | None = None,
    inverse: Inverse = "auto",
    simplify: Simplifier | str = "default",
) -> EquationsOfMotion:
    """Lagrange-d'Alembert (Hamel) equations in quasi-velocities (Crampin & Mestdag 2010, Sec. 3).

    Parameters
    ----------
    system : NonholonomicSystem
        The frame ``e`` of D gives ``qdot = e v``; it is completed by coordinate fields
        (``system.completed_frame()``) to compute the object of anholonomity ``R``.
    velocities : list of sympy.Symbol, optional
        Names of ``v^1..v^r``.
    inverse : {"auto", "symbolic", "solve"}
        For ``r > 3`` (auto) the accelerations are auxiliary unknowns ``a_i`` with
        ``K a = f(q, v)`` recorded in ``solves``.
    simplify : bool or callable

    Returns
    -------
    EquationsOfMotion
        ``states = q + v``; energy ``1/2 v^T K v + U``.
    """
    from nhfast.symbolic.systems import NonholonomicSystem

    if not isinstance(system, NonholonomicSystem):
        raise TypeError(f"system must be a NonholonomicSystem, got {type(system).__name__}")
    simplify = system._simp(simplify)
    simp = simplifier(simplify)
    q, e, r = system.q, system.frame, system.rank
    taken = {str(s) for s in (*q, *system.params)}
    if velocities is None:
        v = fresh_symbols([str(i + 1) for i in range(r)], taken, prefix="v")
    else:
        v = as_symbol_list(velocities, "velocities")
        if len(v) != r:
            raise ValueError(f"velocities must have {r} symbols, got {len(v)}")
    X = system.completed_frame()
    g = (X.T * system.metric * X).applyfunc(simp)  # frame metric, g[:r,:r] = K
    K = g[:r, :r]

    def along(col: int, f: sp.Expr) -> sp.Expr:  # e_col(f)
        return sum((X[a, col] * sp.diff(f, q[a]) for a in range(len(q))), sp.Integer(0))

    # R^m_{ik} for i<k<r from [e_i, e_k] = R^m_ik X_m (LUsolve with the completed frame)
    brackets = _fr.frame_brackets(e, q)
    pairs = sorted(brackets)
    Rcols: dict[tuple[int, int], sp.Matrix] = {}
    if pairs:
        sol = X.LUsolve(sp.Matrix.hstack(*(brackets[pr] for pr in pairs)))
        # the pivots of the completed frame may leave a removable 0/0 (tan(theta)/tan(theta))
        Rcols = {
            pr: sol[:, c].applyfunc(lambda x: cancel_removable(simp(x)))
            for c, pr in enumerate(pairs)
        }

    def R(m: int, i: int, k: int) -> sp.Expr:
        if i == k:
            return sp.Integer(0)
        return Rcols[(i, k)][m] if i < k else -Rcols[(k, i)][m]

    U = system.potential
    n = len(q)
    f = []
    for i in range(r):
        t = sp.Integer(0)
        for j in range(r):
            for k in range(r):
                t += sp.Rational(1, 2) * along(i, K[j, k]) * v[j] * v[k]
                t -= along(k, K[i, j]) * v[k] * v[j]
        for k in range(r):
            for l_ in range(r):
                t -= sum((R(m, i, k) * g[m, l_] for m in range(n)), sp.Integer(0)) * v[k] * v[l_]
        t -= along(i, U)
        f.append(cancel_removable(simp(t)))
    acc, solves = inverse_or_solve(
        K, f, inverse, [f"a_{i + 1}" for i in range(r)], taken | {str(s) for s in v}, simp
    )
    vv = sp.Matrix(v)
    qdot = [simp((e[a, :] * vv)[0, 0]) for a in range(n)]
    energy = simp(sp.Rational(1, 2) * (vv.T * K * vv)[0, 0] + U)
    return EquationsOfMotion(
        states=[*q, *v],
        rhs=[*qdot, *list(acc)],
        params=list(system.params),
        energy=energy,
        constraints=None,
        solves=solves,
        kind="hamel",
        domain=_frame_domain(system),
    )


def chaplygin_equations(
    system: Any,
    momenta: Sequence[sp.Symbol] | None = None,
    inverse: Inverse = "auto",
    simplify: Simplifier | str = "default",
) -> EquationsOfMotion:
    """Reduced equations on ``T*S`` of a G-Chaplygin system (García-Naranjo & Marrero 2020, (3.17)).

    Parameters
    ----------
    system : ChaplyginSystem or ReducedChaplyginSystem
        A ``ChaplyginSystem`` is reduced first (``system.reduce()``).
    momenta : list of sympy.Symbol, optional
        Symbols for ``p_i = <<qdot, hor d/ds^i>> = K_ij sdot^j``.
    inverse : {"auto", "symbolic", "solve"}
    simplify : bool or callable

    Returns
    -------
    EquationsOfMotion
        ``states = s + p``, ``sdot = dH/dp``, ``pdot_i = -dH/ds^i - C^k_ij p_k dH/dp_j``.
    """
    from nhfast.symbolic.systems import ChaplyginSystem, ReducedChaplyginSystem

    if isinstance(system, ChaplyginSystem):
        simplify = system._simp(simplify)
        system = system.reduce(simplify=simplify)
    elif simplify == "default":
        simplify = True
    if not isinstance(system, ReducedChaplyginSystem):
        raise TypeError(
            "system must be a ChaplyginSystem or ReducedChaplyginSystem, "
            f"got {type(system).__name__}"
        )
    r = system.rank
    eq = reduced_almost_poisson(
        system.s,
        sp.eye(r),
        system.K,
        system.C,
        system.potential,
        system.params,
        momenta=momenta,
        inverse=inverse,
        simplify=simplify,
        kind="chaplygin",
    )
    eq.domain = dict(system.extra.get("domain", {}))  # a chart's domain travels along
    return eq
