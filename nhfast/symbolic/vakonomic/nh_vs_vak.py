"""Is every nonholonomic trajectory vakonomic?  The coordinate route (pure SymPy).

Jóźwikowski & Respondek (2019), "A comparison of vakonomic and nonholonomic dynamics with
applications to non-invariant Chaplygin systems", Sec. 3 and Thm. 4.8; the multiplier ODE along
the NH flow used below is derived here from the paper's Lemma 4.10 (not stated in the paper in
this form).  With constraint 1-forms ``W`` and the nonholonomic (NH) equations
``E(L) = W^T lambda``,
``W qdot = 0``, the vakonomic (VAK) equations of ``L + mu_a W_a(qdot)`` are
``E(L) + W^T mudot + K^T mu = 0``, ``K_ai = dW_a(qdot, d/dq^i)``.  Along an NH trajectory
the VAK residual ``W^T (lambda + mudot) + K^T mu`` vanishes iff
``mudot = -lambda - (K S)^T mu`` (``W S = I``) and ``(K e)^T mu = 0`` (``e`` a frame of D).
:func:`vakonomic_test` propagates the algebraic condition along the NH flow until the stacked
conditions on ``mu`` stop growing; :func:`unconstrained_test` checks ``lambda = 0``;
:func:`vakonomic_is_nonholonomic` is the pointwise test for given multipliers.  The frame
route is :mod:`~.consistency`.

Signs: ``mu`` are the coordinate vakonomic multipliers of :mod:`~._forms` (there called
``lambda``); here ``lambda`` is the NH reaction.  Parameter relations (``l = 0``, ``XY = 1`` for
the carriage) are imposed with ``subs=`` after all derivatives are taken.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import sympy as sp

from nhfast.symbolic._util import Simplifier, generic_point, simplifier
from nhfast.symbolic.vakonomic._forms import (
    INTEGRABLE_NOTE,
    SymbolicVerdict,
    check_system,
    constraint_one_forms,
    euler_lagrange,
    is_integrable,
    nonzero,
    normal,
    normal_forms,
    numerator,
    quasi_velocity_symbols,
    subs_map,
)

__all__ = [
    "vakonomic_is_nonholonomic",
]


@dataclass
class NonholonomicData:
    """The NH flow on ``C`` in states ``(q, v)`` (``qdot = e v``) and the VAK objects along it.

    Attributes
    ----------
    q, v : list of sympy.Symbol
        Coordinates and quasi-velocities of the frame ``e`` of D (``system.frame``).
    params : list of sympy.Symbol
    frame : sympy.Matrix
        ``e`` (``n x r``).
    forms : sympy.Matrix
        ``W`` (``k x n``).
    right_inverse : sympy.Matrix
        ``S`` with ``W S = I`` (``n x k``): the inverse of a block of coordinate columns of
        ``W`` with constant determinant when there is one, else ``W^T (W W^T)^{-1}``.
    qdot, vdot : sympy.Matrix
        The NH vector field: ``qdot = e v``; ``vdot`` from ``e^T E(L) = 0``.
    multipliers : sympy.Matrix
        NH multipliers ``lambda`` (``k``) with ``E(L) = W^T lambda``.
    K : sympy.Matrix
        ``K_ai = domega^a(qdot, d/dq^i)`` on C (``k x n``).
    KE, KS : sympy.Matrix
        ``K e`` (``k x r``) and ``K S`` (``k x k``): the VAK condition is ``KE^T mu = 0`` and
        the multiplier ODE ``mudot = -lambda - KS^T mu``.
    energy : sympy.Expr
        ``1/2 v^T (e^T G e) v + U``.
    """

    q: list[sp.Symbol]
    v: list[sp.Symbol]
    params: list[sp.Symbol]
    frame: sp.Matrix
    forms: sp.Matrix
    right_inverse: sp.Matrix
    qdot: sp.Matrix
    vdot: sp.Matrix
    multipliers: sp.Matrix
    K: sp.Matrix
    KE: sp.Matrix
    KS: sp.Matrix
    energy: sp.Expr

    def flow(self, f: Any) -> sp.Expr:
        """Derivative ``Gamma(f)`` of a function of ``(q, v)`` along the NH field."""
        f = sp.sympify(f)
        out = sum((sp.diff(f, a) * self.qdot[i] for i, a in enumerate(self.q)), sp.Integer(0))
        out += sum((sp.diff(f, b) * self.vdot[i] for i, b in enumerate(self.v)), sp.Integer(0))
        return out


def _right_inverse(W: sp.Matrix, system: Any) -> sp.Matrix:
    """A right inverse ``S`` of ``W`` (``W S = I``).

    Preferably ``S = I_dep W_dep^{-1}`` for a block of ``k`` coordinate columns with a constant
    non-zero determinant (valid everywhere, and simple); otherwise ``W^T (W W^T)^{-1}``.
    """
    k, n = W.shape
    for dep in combinations(range(n), k):
        block = W[:, list(dep)]
        det = sp.cancel(block.det())
        if det != 0 and not (det.free_symbols & set(system.q)):
            S = sp.zeros(n, k)
            inv = block.inv()
            for row, a in enumerate(dep):
                S[a, :] = inv[row, :]
            return S
    return W.T * (W * W.T).inv()


def nonholonomic_data(
    system: Any,
    velocities: Sequence[sp.Symbol] | None = None,
    simplify: Simplifier | str = "fast",
) -> NonholonomicData:
    """NH flow, NH multipliers and the VAK multiplier data in raw coordinates.

    The multiplier data follow the ODE derived here from Jóźwikowski & Respondek (2019),
    Lemma 4.10 (not stated in the paper in this form).

    Parameters
    ----------
    system : NonholonomicSystem
    velocities : list of sympy.Symbol, optional
        Names for the quasi-velocities of ``system.frame`` (default ``v_1..v_r``).
    simplify : bool, callable or str, optional
        ``"fast"`` (default): ``cancel`` only (trigonometric identities are left to the zero
        tests); ``"default"``: the system's simplifier; or a bool / callable.

    Returns
    -------
    NonholonomicData

    Raises
    ------
    TypeError
        If ``system`` is not a NonholonomicSystem.
    ValueError
        If the system has no constraints.
    """
    system = check_system(system)
    simp = normal if simplify == "fast" else simplifier(system._simp(simplify))
    q, e, G, U = system.q, system.frame, system.metric, system.potential
    n, r = system.dim, system.rank
    v = quasi_velocity_symbols(system, r, velocities)
    W = constraint_one_forms(system)
    k = W.rows
    vv = sp.Matrix(v)
    qdot = (e * vv).applyfunc(simp)
    edot = sp.zeros(n, r)
    for b in range(n):
        edot += sp.diff(e, q[b]) * qdot[b]
    # NH: e^T E(L)(e a + edot v) = 0  ->  Kr a = -e^T E(L)(edot v)
    base = euler_lagrange(G, U, q, qdot, edot * vv)
    Kr = (e.T * G * e).applyfunc(simp)
    vdot = Kr.LUsolve(-(e.T * base)).applyfunc(simp)
    EL = (G * e * vdot + base).applyfunc(simp)
    S = _right_inverse(W, system).applyfunc(simp)
    lam = (S.T * EL).applyfunc(simp)
    Kmat = sp.zeros(k, n)
    for a in range(k):
        for i in range(n):
            Kmat[a, i] = simp(
                sum(
                    ((sp.diff(W[a, i], q[j]) - sp.diff(W[a, j], q[i])) * qdot[j] for j in range(n)),
                    sp.Integer(0),
                )
            )
    KE = (Kmat * e).applyfunc(simp)
    KS = (Kmat * S).applyfunc(simp)
    energy = simp((vv.T * Kr * vv)[0, 0] / 2 + U)
    return NonholonomicData(
        q=list(q),
        v=v,
        params=list(system.params),
        frame=e,
        forms=W,
        right_inverse=S,
        qdot=qdot,
        vdot=vdot,
        multipliers=lam,
        K=Kmat,
        KE=KE,
        KS=KS,
        energy=energy,
    )


def unconstrained_test(
    system: Any, subs: Mapping[Any, Any] | None = None, data: NonholonomicData | None = None
) -> SymbolicVerdict:
    """Is every NH trajectory a solution of the free Euler-Lagrange equations?

    Jóźwikowski & Respondek (2019), Thm. 4.8(a) / (4.10), (5.5): an NH trajectory is
    unconstrained iff its NH multiplier ``lambda`` vanishes along it.  For all trajectories:
    ``lambda(q, v) == 0``.

    Parameters
    ----------
    system : NonholonomicSystem
    subs : dict, optional
        Parameter values or relations imposed before deciding.
    data : NonholonomicData, optional
        Precomputed :func:`nonholonomic_data` (saves time).

    Returns
    -------
    SymbolicVerdict
        ``conditions["multipliers"]`` = ``lambda``; ``obstruction`` its non-zero components.
    """
    system = check_system(system)
    data = data or nonholonomic_data(system)
    sm = subs_map(system, subs)
    lam = normal_forms(data.multipliers, sm)
    bad = nonzero(lam)
    holds = not bad
    statement = (
        "every nonholonomic trajectory is unconstrained: the NH multipliers vanish identically"
        if holds
        else f"not unconstrained: {len(bad)} NH multiplier component(s) do not vanish"
    )
    return SymbolicVerdict(
        name="nonholonomic trajectories are unconstrained "
        "(Jóźwikowski & Respondek (2019), Thm. 4.8(a))",
        holds=holds,
        statement=statement,
        conditions={"multipliers": lam},
        obstruction=bad,
        integrable=is_integrable(system),
        data={"nh": data},
    )


def _with_multipliers(
    system: Any, mu: Sequence[Any], data: NonholonomicData | None
) -> tuple[Any, NonholonomicData, sp.Matrix]:
    """The checked system, its data and ``mu`` as a ``k x 1`` column (one per constraint)."""
    system = check_system(system)
    data = data or nonholonomic_data(system)
    k = data.forms.rows
    mu_m = sp.Matrix([sp.sympify(x) for x in mu])
    if mu_m.shape != (k, 1):
        raise ValueError(f"mu must have k = {k} entries (one per constraint), got {len(mu_m)}")
    return system, data, mu_m


def vakonomic_residual(
    system: Any,
    mu: Sequence[Any],
    mudot: Sequence[Any] | None = None,
    data: NonholonomicData | None = None,
    simplify: bool = True,
) -> sp.Matrix:
    """Raw VAK residual ``W^T (lambda + mudot) + K^T mu`` on the NH states ``(q, v)``.

    Parameters
    ----------
    system : NonholonomicSystem
    mu : list of sympy.Expr
        Multipliers of ``L + mu_a omega^a(qdot)`` as functions of ``(q, v)`` (``k`` entries).
    mudot : list of sympy.Expr, optional
        Their time derivatives; default ``Gamma(mu)`` (``mu`` a function on C).
    data : NonholonomicData, optional

    Returns
    -------
    sympy.Matrix
        The covector (``n`` components in ``dq``); zero iff the NH motion through each state
        is, with these multipliers, a VAK motion.
    """
    system, data, mu_m = _with_multipliers(system, mu, data)
    k = data.forms.rows
    if mudot is None:
        md = sp.Matrix([data.flow(x) for x in mu_m])
    else:
        md = sp.Matrix([sp.sympify(x) for x in mudot])
        if md.shape != (k, 1):
            raise ValueError(f"mudot must have k = {k} entries, got {len(md)}")
    res = data.forms.T * (data.multipliers + md) + data.K.T * mu_m
    if simplify:
        res = res.applyfunc(normal)
    return res


def vakonomic_is_nonholonomic(
    system: Any,
    mu: Sequence[Any],
    subs: Mapping[Any, Any] | None = None,
    data: NonholonomicData | None = None,
) -> SymbolicVerdict:
    """Is a VAK motion with multipliers ``mu`` nonholonomic?

    Jóźwikowski & Respondek (2019), Thm. 4.8(c), (4.12)/(5.7).

    The condition is pointwise: ``mu_a domega^a(qdot, e_j) = 0`` for every field ``e_j`` of D,
    i.e. ``KE^T mu = 0``.

    Parameters
    ----------
    system : NonholonomicSystem
    mu : list of sympy.Expr
        Multipliers (``k``) of ``L + mu_a omega^a(qdot)``: symbols, constants or functions of
        ``(q, v)`` with ``v`` the symbols of ``data.v``.
    subs : dict, optional
    data : NonholonomicData, optional

    Returns
    -------
    SymbolicVerdict
        ``conditions["(4.12)"]`` = ``KE^T mu`` (``r`` entries).
    """
    system, data, mu_m = _with_multipliers(system, mu, data)
    cond = normal_forms(data.KE.T * mu_m, subs_map(system, subs))
    bad = nonzero(cond)
    integ = is_integrable(system)
    holds = not bad
    if integ:
        statement = INTEGRABLE_NOTE
    elif holds:
        statement = "the vakonomic motions with these multipliers are nonholonomic"
    else:
        statement = "not nonholonomic: mu_a domega^a(qdot, e_j) does not vanish"
    return SymbolicVerdict(
        name="vakonomic motion is nonholonomic (Jóźwikowski & Respondek (2019), Thm. 4.8(c))",
        holds=holds,
        statement=statement,
        conditions={"(4.12)": cond},
        obstruction=bad,
        integrable=integ,
    )


def _numeric(mat: sp.Matrix, pt: dict) -> np.ndarray:
    m = mat.subs(pt).evalf(30)
    if not m.rows:
        return np.zeros((0, 0))
    return np.array(m.tolist(), dtype=complex).real


def _rank(arr: np.ndarray) -> int:
    """Numerical rank after scaling every row to unit max-norm (rows of a constraint stack
    may be rescaled freely, and their magnitudes differ by many orders)."""
    if arr.size == 0:
        return 0
    scale = np.abs(arr).max(axis=1, keepdims=True)
    keep = scale[:, 0] > 0
    if not np.any(keep):
        return 0
    a = arr[keep] / scale[keep]
    return int(np.linalg.matrix_rank(a, tol=1e-9 * np.sqrt(a.shape[1])))


def vakonomic_test(
    system: Any,
    subs: Mapping[Any, Any] | None = None,
    data: NonholonomicData | None = None,
    points: int = 3,
) -> SymbolicVerdict:
    """Is every NH trajectory vakonomic?  Question (Q1), in coordinates.

    Question (Q1) of Jóźwikowski & Respondek (2019).  Along the NH flow the multiplier must solve
    ``mudot = -lambda - KS^T mu`` (derived here from the paper's Lemma 4.10; not stated in the
    paper in this form) and satisfy ``A_0 mu = c_0`` with ``A_0 = KE^T``, ``c_0 = 0``
    (Thm. 4.8(c)).  Differentiating
    ``A_j mu - c_j`` along the flow gives ``A_{j+1} = Gamma(A_j) - A_j KS^T`` and
    ``c_{j+1} = Gamma(c_j) + A_j lambda``.  The stack is extended until its rank (at generic
    points of ``(q, v, params)``) stops growing.  If the stacked system is consistent, the set
    ``{(x, mu): A mu = c}`` is invariant and over every state, so each NH trajectory is VAK
    (the answer to Q1 is yes); the returned ``multiplier`` solves it (free components, e.g.
    multipliers of closed constraint forms, set to 0).  Otherwise the non-vanishing remainders
    are the obstruction: a trajectory is VAK only where they vanish.

    Parameters
    ----------
    system : NonholonomicSystem
    subs : dict, optional
        Parameter relations imposed before the algebra (after the derivatives), e.g.
        ``{l: 0}``.
    data : NonholonomicData, optional
    points : int
        Number of generic points used for the ranks.

    Returns
    -------
    SymbolicVerdict
        ``conditions["A_j mu - c_j"]``: the stacked conditions with multiplier symbols
        ``data["mu"]``; ``data["multiplier"]``: a multiplier section ``mu(q, v)`` when it
        holds; ``data["steps"]``: number of derivative steps; ``data["undetermined"]``: number
        of undetermined multiplier directions.
    """
    system = check_system(system)
    data = data or nonholonomic_data(system)
    sm = subs_map(system, subs)
    k = data.forms.rows
    mu = [sp.Symbol(f"mu_{a + 1}", real=True) for a in range(k)]
    integ = is_integrable(system)

    def S(x: Any) -> sp.Expr:
        return normal(sp.sympify(x).subs(sm)) if sm else normal(x)

    KSt = data.KS.T.applyfunc(S)
    lam = data.multipliers.applyfunc(S)
    qd = data.qdot.applyfunc(S)
    vd = data.vdot.applyfunc(S)
    mu_m = sp.Matrix(mu)
    mudot = -lam - KSt * mu_m

    def flow(f: sp.Expr) -> sp.Expr:  # d/dt along the NH flow and the multiplier ODE
        out = sum((sp.diff(f, a) * qd[i] for i, a in enumerate(data.q)), sp.Integer(0))
        out += sum((sp.diff(f, b) * vd[i] for i, b in enumerate(data.v)), sp.Integer(0))
        out += sum((sp.diff(f, m) * mudot[i] for i, m in enumerate(mu)), sp.Integer(0))
        return out

    # Rows are affine in mu.  A row may be rescaled by any generically non-zero function: the
    # derivative of f * row is f * row' + f' * row, and row is already in the stack.  So each
    # row is replaced by its numerator (polynomial, no gcd computations).
    rows_expr = [numerator(x) for x in data.KE.T.applyfunc(S) * mu_m]
    rows_expr = [x for x in rows_expr if x != 0]
    free = [*data.q, *data.v, *(p for p in data.params if p not in sm)]
    pts = [generic_point(free, seed=20 + i, low=5, high=30) for i in range(points)]

    def split(rows: list[sp.Expr]) -> tuple[sp.Matrix, sp.Matrix]:
        Am = sp.Matrix(len(rows), k, lambda i, a: sp.diff(rows[i], mu[a]))
        cm = sp.Matrix([-x.subs({m: 0 for m in mu}) for x in rows])
        return Am, cm

    def ranks(rows: list[sp.Expr]) -> tuple[int, int]:
        if not rows:
            return 0, 0
        Am, cm = split(rows)
        f = sp.lambdify(free, Am.row_join(cm), "numpy")
        vals = [np.asarray(f(*(float(p[x]) for x in free)), dtype=float) for p in pts]
        ra = max(_rank(v[:, :k]) for v in vals)
        rb = max(_rank(v) for v in vals)
        return ra, rb

    stack = list(rows_expr)
    newest = list(rows_expr)
    ra, rb = ranks(stack)
    steps = 0
    for _ in range(k + 2):
        if not newest:
            break
        cand = [numerator(flow(x)) for x in newest]
        cand = [x for x in cand if x != 0]
        steps += 1
        ra2, rb2 = ranks(stack + cand)
        if (ra2, rb2) == (ra, rb):
            break
        stack += cand
        newest = cand
        ra, rb = ra2, rb2
    conds = stack
    sol = {m: sp.Integer(0) for m in mu}
    remainder: list[sp.Expr] = []
    if stack:
        Aall, call = split(stack)
        # choose independent rows / pivot columns at a generic point, solve, substitute
        An = _numeric(Aall, pts[0])
        rows: list[int] = []
        for i in range(Aall.rows):
            if _rank(An[rows + [i], :]) > len(rows):
                rows.append(i)
        cols: list[int] = []
        for j in range(k):
            if rows and _rank(An[np.ix_(rows, cols + [j])]) > len(cols):
                cols.append(j)
        if rows:
            sub = Aall.extract(rows, cols)
            vals = sub.LUsolve(call.extract(rows, [0]))
            for j, col in enumerate(cols):
                sol[mu[col]] = sp.factor(normal(vals[j]))
        rest = [i for i in range(Aall.rows) if i not in rows]
        at = {m: sol[m] for m in mu}
        remainder = [numerator(stack[i].subs(at)) for i in rest]
    # remainders are canonical trig polynomials (see _numerator): zero iff structurally zero
    obstruction = [sp.factor(x) for x in remainder if x != 0]
    holds = not obstruction and ra == rb
    if integ:
        statement = INTEGRABLE_NOTE
    elif holds:
        statement = (
            "every nonholonomic trajectory is vakonomic: the multiplier conditions are "
            f"consistent after {steps} derivative step(s)"
        )
    else:
        statement = (
            "not every nonholonomic trajectory is vakonomic: the multiplier conditions are "
            f"inconsistent ({len(obstruction)} obstruction(s))"
        )
    return SymbolicVerdict(
        name="every nonholonomic trajectory is vakonomic (Jóźwikowski & Respondek (2019), (Q1))",
        holds=holds,
        statement=statement,
        conditions={"A_j mu - c_j": conds},
        obstruction=obstruction,
        integrable=integ,
        data={
            "mu": mu,
            "multiplier": [sol[m] for m in mu] if holds else None,
            "steps": steps,
            "undetermined": k - ra,
            "nh": data,
        },
    )
