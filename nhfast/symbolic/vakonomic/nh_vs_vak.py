"""Nonholonomic versus vakonomic dynamics: symbolic tests for *all* trajectories (pure SymPy).

Three independent routes (seeds 000, 001, 002; digests ``spec/seed000.md``, ``seed001.md``,
``seed002_003.md``):

* **Raw coordinates** (seed 000, Sec. 2.3 and the derived algorithm of Sec. 2.7).  With the
  constraint 1-forms ``omega^a = W_ai dq^i`` and ``E_i(L) = d/dt dL/dqdot^i - dL/dq^i``, the
  nonholonomic (NH) equations are ``E(L) = W^T lambda``, ``W qdot = 0``, and the vakonomic (VAK)
  equations of ``L + mu_a omega^a(qdot)`` are ``E(L) + W^T mudot + K^T mu = 0`` with
  ``K_ai = domega^a(qdot, d/dq^i)``.  Along an NH trajectory the VAK residual is
  ``W^T (lambda + mudot) + K^T mu``; it vanishes iff

      mudot = -lambda - (K S)^T mu      (S any right inverse of W, W S = I)
      (K e)^T mu = 0                    (e the frame of D; Thm. 4.8(c) / (5.7) of seed 000).

  :func:`vakonomic_test` decides "every NH trajectory is VAK" (question Q1 of seed 000) by
  propagating the algebraic condition along the NH flow with the multiplier ODE until the
  stacked linear conditions on ``mu`` stop growing (a constraint algorithm for this linear
  problem): consistent conditions give a multiplier section ``mu(q, v)`` for every trajectory;
  inconsistent ones give the obstruction.  :func:`unconstrained_test` checks ``lambda == 0``
  (the NH trajectory solves the free Euler-Lagrange equations, Thm. 4.8(a)).
  :func:`vakonomic_is_nonholonomic` is the pointwise test (4.12)/(5.7) for given multipliers.

* **Frame form** (seed 001, Cor. 1; seed 002, Prop. 2).  In an adapted frame
  ``X = [X_alpha | X_a]`` (``X_alpha`` spanning D) with ``[X_i, X_j] = R^k_ij X_k`` and
  quasi-velocities ``v = X^{-1} qdot``, a section ``phi_a(q, v^alpha)`` makes the NH field the
  restriction of the Euler-Lagrange field of ``Ltilde = L - Phi_a v^a`` (and the NH motions
  vakonomic with multipliers ``phi``) iff, identically on ``C = {v^a = 0}``,

      (S5-2)  phi_a R^a_{alpha beta} v^beta = 0,
      (S5-3)  Gamma(phi_a) + phi_b R^b_{a alpha} v^alpha - lambda_a = 0.

  :func:`consistency_test` returns both residuals; :func:`restriction_test` also builds
  ``Ltilde`` in natural coordinates and checks its Euler-Lagrange equations directly on the NH
  motions (a second, frame-free route), with the Hessian determinant (regularity).

Sign conventions.  Raw multipliers enter as ``L + mu_a omega^a(qdot)``; seed 000's
``L - <lambda, omega(Z)>`` has ``lambda = -mu``; seed 001/002's ``L - mu_a v^a`` with
``v^a = omega^a(qdot)`` has ``mu(001) = -mu``.  The NH multipliers are those of
``E(L) = W^T lambda`` (seed 002 Sec. 2: ``d/dt dL/dqdot - dL/dq = lambda_b a^b``).

Every function takes a :class:`nhfast.symbolic.systems.NonholonomicSystem`
(``L = 1/2 qdot^T G qdot - U``).  Parameter relations (``l = 0``, ``XY = 1`` for the carriage,
which makes the kinetic energy indefinite on ``TQ`` and is therefore not accepted by the
system's constructor) are imposed with ``subs=`` *after* all derivatives are taken.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from nhfast.symbolic import frames as _fr
from nhfast.symbolic._util import (
    Simplifier,
    as_matrix,
    as_symbol_list,
    generic_point,
    is_zero,
    simplifier,
)

__all__ = [
    "SymbolicVerdict",
    "NonholonomicData",
    "constraint_forms",
    "is_integrable",
    "nonholonomic_data",
    "unconstrained_test",
    "vakonomic_test",
    "vakonomic_residual",
    "vakonomic_is_nonholonomic",
    "FrameData",
    "frame_data",
    "consistency_test",
    "restriction_test",
]

INTEGRABLE_NOTE = (
    "D is integrable: the nonholonomic and vakonomic principles coincide "
    "(seed 000, Prop. 3.12), every nonholonomic trajectory is vakonomic"
)


@dataclass
class SymbolicVerdict:
    """Outcome of a symbolic test that holds for all trajectories or fails with an obstruction.

    Attributes
    ----------
    name : str
        What was tested.
    holds : bool
        True iff every condition vanishes identically (after ``subs``).
    statement : str
        One sentence with the verdict and its reason.
    conditions : dict of str to list of sympy.Expr
        The expressions that must vanish identically, grouped by name.
    obstruction : list of sympy.Expr
        The conditions that do not vanish (empty when ``holds``).
    integrable : bool
        True when D is integrable (then NH and VAK coincide).
    data : dict
        Further results, e.g. ``"multiplier"`` (a multiplier section) or ``"lagrangian"``.
    """

    name: str
    holds: bool
    statement: str
    conditions: dict[str, list[sp.Expr]] = field(default_factory=dict)
    obstruction: list[sp.Expr] = field(default_factory=list)
    integrable: bool = False
    data: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.holds


def _check_system(system: Any) -> Any:
    from nhfast.symbolic.systems import NonholonomicSystem

    if not isinstance(system, NonholonomicSystem):
        raise TypeError(f"system must be a NonholonomicSystem, got {type(system).__name__}")
    if system.rank == system.dim:
        raise ValueError("system has no constraints (D = TQ): nothing to compare")
    return system


def _subs_map(system: Any, subs: Mapping[Any, Any] | None) -> dict[sp.Symbol, sp.Expr]:
    if subs is None:
        return {}
    if not isinstance(subs, Mapping):
        raise TypeError(f"subs must be a mapping {{parameter: value}}, got {type(subs).__name__}")
    out = {}
    for k, val in subs.items():
        if k not in system.params:
            raise ValueError(f"subs: {k} is not a parameter of the system ({system.params})")
        out[k] = sp.sympify(val)
    return out


def constraint_forms(system: Any) -> sp.Matrix:
    """The constraint 1-forms ``W`` (``k x n``, rows ``omega^a``, ``D = ker W``) of ``system``.

    The system's own forms when it was built from them; otherwise a basis of the annihilator of
    its frame (``W e = 0``), found from the completed frame ``[e | f]`` as the last ``k`` rows of
    its inverse.

    Parameters
    ----------
    system : NonholonomicSystem

    Returns
    -------
    sympy.Matrix
    """
    system = _check_system(system)
    if system.constraint_forms is not None:
        return system.constraint_forms
    X = system.completed_frame()
    inv = X.inv()
    simp = _fast
    return inv[system.rank :, :].applyfunc(simp)


def is_integrable(system: Any) -> bool:
    """True when the constraint distribution D is involutive (Frobenius: integrable).

    Test: ``W [e_i, e_j] == 0`` for all pairs of frame fields (seed 000, Prop. 3.13).
    """
    system = _check_system(system)
    W = constraint_forms(system)
    for col in _fr.frame_brackets(system.frame, system.q).values():
        if not all(is_zero(x) for x in W * col):
            return False
    return True


# ----------------------------------------------------------------------------------------------
# raw-coordinate route (seed 000)
# ----------------------------------------------------------------------------------------------


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


def _velocity_symbols(system: Any, names: Sequence[sp.Symbol] | None, r: int) -> list[sp.Symbol]:
    if names is not None:
        v = as_symbol_list(names, "velocities")
        if len(v) != r:
            raise ValueError(f"velocities must have rank D = {r} symbols, got {len(v)}")
        taken = set(system.q) | set(system.params)
        if set(v) & taken:
            raise ValueError("velocities clash with coordinates or parameters")
        return v
    taken_names = {str(s) for s in (*system.q, *system.params)}
    out = []
    for i in range(r):
        nm = f"v_{i + 1}"
        while nm in taken_names:
            nm += "_"
        out.append(sp.Symbol(nm, real=True))
    return out


def euler_lagrange_mechanical(
    metric: sp.Matrix, potential: sp.Expr, q: Sequence[sp.Symbol], qdot: Any, qddot: Any
) -> sp.Matrix:
    """``E_i(L) = (G qddot)_i + (d_k G_ij - 1/2 d_i G_jk) qdot^j qdot^k + d_i U`` for
    ``L = 1/2 qdot^T G qdot - U`` evaluated at given velocity and acceleration columns."""
    n = len(q)
    qd = sp.Matrix(qdot)
    qdd = sp.Matrix(qddot)
    out = metric * qdd
    for i in range(n):
        t = sp.Integer(0)
        for j in range(n):
            for k in range(n):
                c = sp.diff(metric[i, j], q[k]) - sp.diff(metric[j, k], q[i]) / 2
                if c != 0:
                    t += c * qd[j] * qd[k]
        out[i] += t + sp.diff(potential, q[i])
    return out


def _right_inverse(W: sp.Matrix, system: Any) -> sp.Matrix:
    """A right inverse ``S`` of ``W`` (``W S = I``).

    Preferably ``S = I_dep W_dep^{-1}`` for a block of ``k`` coordinate columns with a constant
    non-zero determinant (valid everywhere, and simple); otherwise ``W^T (W W^T)^{-1}``.
    """
    from itertools import combinations

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
    """NH flow, NH multipliers and the VAK multiplier data in raw coordinates (seed 000, 2.7).

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
    system = _check_system(system)
    simp = _fast if simplify == "fast" else simplifier(system._simp(simplify))
    q, e, G, U = system.q, system.frame, system.metric, system.potential
    n, r = system.dim, system.rank
    v = _velocity_symbols(system, velocities, r)
    W = constraint_forms(system)
    k = W.rows
    vv = sp.Matrix(v)
    qdot = (e * vv).applyfunc(simp)
    edot = sp.zeros(n, r)
    for b in range(n):
        edot += sp.diff(e, q[b]) * qdot[b]
    # NH: e^T E(L)(e a + edot v) = 0  ->  Kr a = -e^T E(L)(edot v)
    base = euler_lagrange_mechanical(G, U, q, qdot, edot * vv)
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


def _is_cos_power(e: Any) -> bool:
    return bool(e.is_Pow and isinstance(e.base, sp.cos) and e.exp.is_Integer and int(e.exp) >= 2)


def _cos_power_to_sin(e: sp.Pow) -> sp.Expr:
    arg, k = e.base.args[0], int(e.exp)
    return (1 - sp.sin(arg) ** 2) ** (k // 2) * sp.cos(arg) ** (k % 2)


def _fast(expr: Any) -> sp.Expr:
    """Normal form: ``cancel``, with ``cos(u)^2 -> 1 - sin(u)^2`` (exact for trig polynomials).

    After the replacement a polynomial in ``sin(u), cos(u)`` is at most linear in ``cos(u)``,
    which makes the representation canonical, so identities such as ``sin^2 + cos^2 = 1`` are
    recognised without ``simplify``.
    """
    e = sp.cancel(sp.expand(sp.sympify(expr)))
    if e.has(sp.cos):
        e = sp.cancel(sp.expand(e.replace(_is_cos_power, _cos_power_to_sin)))
    return e


def _numerator(expr: Any) -> sp.Expr:
    """Numerator of ``expr`` over a common denominator, expanded and trig-normalised."""
    num, _ = sp.fraction(sp.together(sp.sympify(expr)))
    num = sp.expand(num)
    if num.has(sp.cos):
        num = sp.expand(num.replace(_is_cos_power, _cos_power_to_sin))
    return num


def _apply(exprs: Sequence[Any], subs: dict, simp: Any) -> list[sp.Expr]:
    return [simp(sp.sympify(x).subs(subs)) if subs else simp(sp.sympify(x)) for x in exprs]


def _nonzero(exprs: Sequence[sp.Expr]) -> list[sp.Expr]:
    return [x for x in exprs if not is_zero(x)]


def unconstrained_test(
    system: Any, subs: Mapping[Any, Any] | None = None, data: NonholonomicData | None = None
) -> SymbolicVerdict:
    """Is every NH trajectory a solution of the free Euler-Lagrange equations?

    Seed 000, Thm. 4.8(a) / (4.10), (5.5): an NH trajectory is unconstrained iff its NH
    multiplier ``lambda`` vanishes along it.  For all trajectories: ``lambda(q, v) == 0``.

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
    system = _check_system(system)
    data = data or nonholonomic_data(system)
    simp = _fast
    sm = _subs_map(system, subs)
    lam = _apply(data.multipliers, sm, simp)
    bad = _nonzero(lam)
    holds = not bad
    statement = (
        "every nonholonomic trajectory is unconstrained: the NH multipliers vanish identically"
        if holds
        else f"not unconstrained: {len(bad)} NH multiplier component(s) do not vanish"
    )
    return SymbolicVerdict(
        name="nonholonomic trajectories are unconstrained (seed 000, Thm. 4.8(a))",
        holds=holds,
        statement=statement,
        conditions={"multipliers": lam},
        obstruction=bad,
        integrable=is_integrable(system),
        data={"nh": data},
    )


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
    system = _check_system(system)
    data = data or nonholonomic_data(system)
    k = data.forms.rows
    mu_m = sp.Matrix([sp.sympify(x) for x in mu])
    if mu_m.shape != (k, 1):
        raise ValueError(f"mu must have k = {k} entries (one per constraint), got {len(mu_m)}")
    if mudot is None:
        md = sp.Matrix([data.flow(x) for x in mu_m])
    else:
        md = sp.Matrix([sp.sympify(x) for x in mudot])
        if md.shape != (k, 1):
            raise ValueError(f"mudot must have k = {k} entries, got {len(md)}")
    res = data.forms.T * (data.multipliers + md) + data.K.T * mu_m
    if simplify:
        res = res.applyfunc(_fast)
    return res


def vakonomic_is_nonholonomic(
    system: Any,
    mu: Sequence[Any],
    subs: Mapping[Any, Any] | None = None,
    data: NonholonomicData | None = None,
) -> SymbolicVerdict:
    """Is a VAK motion with multipliers ``mu`` nonholonomic?  Seed 000 Thm. 4.8(c), (4.12)/(5.7).

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
    system = _check_system(system)
    data = data or nonholonomic_data(system)
    k = data.forms.rows
    mu_m = sp.Matrix([sp.sympify(x) for x in mu])
    if mu_m.shape != (k, 1):
        raise ValueError(f"mu must have k = {k} entries (one per constraint), got {len(mu_m)}")
    simp = _fast
    cond = _apply(data.KE.T * mu_m, _subs_map(system, subs), simp)
    bad = _nonzero(cond)
    integ = is_integrable(system)
    holds = not bad
    if integ:
        statement = INTEGRABLE_NOTE
    elif holds:
        statement = "the vakonomic motions with these multipliers are nonholonomic"
    else:
        statement = "not nonholonomic: mu_a domega^a(qdot, e_j) does not vanish"
    return SymbolicVerdict(
        name="vakonomic motion is nonholonomic (seed 000, Thm. 4.8(c))",
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
    """Is every NH trajectory vakonomic?  Seed 000 question (Q1), decided in raw coordinates.

    Along the NH flow the multiplier must solve ``mudot = -lambda - KS^T mu`` (seed 000, 2.7)
    and satisfy ``A_0 mu = c_0`` with ``A_0 = KE^T``, ``c_0 = 0`` (Thm. 4.8(c)).  Differentiating
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
    system = _check_system(system)
    data = data or nonholonomic_data(system)
    sm = _subs_map(system, subs)
    k = data.forms.rows
    mu = [sp.Symbol(f"mu_{a + 1}", real=True) for a in range(k)]
    integ = is_integrable(system)

    def S(x: Any) -> sp.Expr:
        return _fast(sp.sympify(x).subs(sm)) if sm else _fast(x)

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
    rows_expr = [_numerator(x) for x in data.KE.T.applyfunc(S) * mu_m]
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
        cand = [_numerator(flow(x)) for x in newest]
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
                sol[mu[col]] = sp.factor(_fast(vals[j]))
        rest = [i for i in range(Aall.rows) if i not in rows]
        at = {m: sol[m] for m in mu}
        remainder = [_numerator(stack[i].subs(at)) for i in rest]
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
        name="every nonholonomic trajectory is vakonomic (seed 000, Q1)",
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


# ----------------------------------------------------------------------------------------------
# frame route (seeds 001 and 002)
# ----------------------------------------------------------------------------------------------


@dataclass
class FrameData:
    """An adapted frame ``X = [X_alpha | X_a]`` and the NH objects of seed 001 in it.

    Attributes
    ----------
    q : list of sympy.Symbol
    v : list of sympy.Symbol
        All ``n`` quasi-velocities; the first ``r`` belong to D, ``C = {v^a = 0}``.
    X : sympy.Matrix
        Square frame (columns).
    R : sympy.NDimArray
        ``R[i, j, k] = R^k_ij``, ``[X_i, X_j] = R^k_ij X_k``.
    lagrangian : sympy.Expr
        ``L(q, v) = 1/2 (X v)^T G (X v) - U``.
    gamma : sympy.Matrix
        NH accelerations ``Gamma^alpha(q, v^alpha)`` ([S3-5]).
    multipliers : sympy.Matrix
        ``lambda_a = Gamma(XV_a L) - XC_a L`` on C ([S3-6]), ``n - r`` entries.
    momenta : sympy.Matrix
        ``p_a = XV_a L`` on C.
    r : int
    """

    q: list[sp.Symbol]
    v: list[sp.Symbol]
    X: sp.Matrix
    R: Any
    lagrangian: sp.Expr
    gamma: sp.Matrix
    multipliers: sp.Matrix
    momenta: sp.Matrix
    r: int

    def on_C(self, f: Any) -> sp.Expr:
        """``f`` restricted to ``C`` (``v^a = 0``)."""
        return sp.sympify(f).subs({b: 0 for b in self.v[self.r :]})

    def complete_lift(self, i: int, f: Any) -> sp.Expr:
        """``XC_i(f) = X^j_i d f/d q^j - R^j_ik v^k d f/d v^j`` ([S2.2-1])."""
        f = sp.sympify(f)
        n = len(self.q)
        out = sum((self.X[j, i] * sp.diff(f, self.q[j]) for j in range(n)), sp.Integer(0))
        for j in range(n):
            dfj = sp.diff(f, self.v[j])
            if dfj == 0:
                continue
            out -= sum((self.R[i, kk, j] * self.v[kk] for kk in range(n)), sp.Integer(0)) * dfj
        return out

    def flow(self, f: Any) -> sp.Expr:
        """``Gamma(f) = v^alpha XC_alpha(f) + Gamma^alpha XV_alpha(f)``, then restricted to C."""
        f = sp.sympify(f)
        out = sum((self.v[a] * self.complete_lift(a, f) for a in range(self.r)), sp.Integer(0))
        out += sum((self.gamma[a] * sp.diff(f, self.v[a]) for a in range(self.r)), sp.Integer(0))
        return self.on_C(out)


def frame_data(
    system: Any,
    complement: Any = None,
    velocities: Sequence[sp.Symbol] | None = None,
) -> FrameData:
    """Seed 001's adapted-frame objects for ``system``.

    Parameters
    ----------
    system : NonholonomicSystem
        ``system.frame`` gives ``X_alpha``.
    complement : sympy.Matrix, optional
        ``n x (n - r)`` fields ``X_a`` completing the frame (for a Chaplygin system: the
        fundamental fields of the symmetry group, which makes ``phi_a = p_a`` the natural
        section).  Default: coordinate fields (``system.completed_frame()``).
    velocities : list of sympy.Symbol, optional
        Names of all ``n`` quasi-velocities.

    Returns
    -------
    FrameData

    Raises
    ------
    ValueError
        If ``complement`` has the wrong shape or does not complete the frame.
    """
    system = _check_system(system)
    simp = _fast
    n, r = system.dim, system.rank
    if complement is None:
        X = system.completed_frame()
    else:
        F = as_matrix(complement, "complement")
        if F.shape != (n, n - r):
            raise ValueError(f"complement must be a {n} x {n - r} matrix, got shape {F.shape}")
        X = system.frame.row_join(F)
        pt = generic_point(system.q + system.params, seed=3)
        if _rank(_numeric(X, pt)) < n:
            raise ValueError("complement does not complete the frame of D to a frame of TQ")
    q = system.q
    if velocities is None:
        taken = {str(s) for s in (*q, *system.params)}
        v = []
        for i in range(n):
            nm = f"v_{i + 1}"
            while nm in taken:
                nm += "_"
            v.append(sp.Symbol(nm, real=True))
    else:
        v = as_symbol_list(velocities, "velocities")
        if len(v) != n:
            raise ValueError(f"velocities must have n = {n} symbols, got {len(v)}")
    R = _fr.anholonomity(X, q, simplify=simp)
    vv = sp.Matrix(v)
    u = X * vv
    L = simp(((u.T * system.metric * u)[0, 0]) / 2 - system.potential)
    fd = FrameData(
        q=list(q), v=v, X=X, R=R, lagrangian=L, gamma=sp.zeros(r, 1),
        multipliers=sp.zeros(n - r, 1), momenta=sp.zeros(n - r, 1), r=r,
    )  # fmt: skip
    # [S3-5]: g_ab Gamma^b = XC_a(L) - v^b XC_b(XV_a L), on C
    g = sp.Matrix(r, r, lambda a, b: fd.on_C(sp.diff(L, v[a], v[b])))
    rhs = sp.zeros(r, 1)
    for a in range(r):
        pa = sp.diff(L, v[a])
        t = fd.complete_lift(a, L) - sum(
            (v[b] * fd.complete_lift(b, pa) for b in range(r)), sp.Integer(0)
        )
        rhs[a] = simp(fd.on_C(t))
    fd.gamma = g.LUsolve(rhs).applyfunc(simp)
    lam = sp.zeros(n - r, 1)
    mom = sp.zeros(n - r, 1)
    for idx, a in enumerate(range(r, n)):
        pa = sp.diff(L, v[a])
        mom[idx] = simp(fd.on_C(pa))
        lam[idx] = simp(fd.flow(pa) - fd.on_C(fd.complete_lift(a, L)))
    fd.multipliers = lam
    fd.momenta = mom
    return fd


def _section(fd: FrameData, section: Any) -> sp.Matrix:
    n, r = len(fd.q), fd.r
    if section is None:
        return fd.momenta
    phi = sp.Matrix([sp.sympify(x) for x in section])
    if phi.shape != (n - r, 1):
        raise ValueError(
            f"section must have n - r = {n - r} entries (one per complement field), got {len(phi)}"
        )
    bad = set().union(*(x.free_symbols for x in phi)) & set(fd.v[r:])
    if bad:
        raise ValueError(
            "section must be a function on C of (q, v^alpha); it depends on "
            f"{', '.join(map(str, sorted(bad, key=str)))}"
        )
    return phi


def consistency_test(
    system: Any,
    section: Sequence[Any] | None = None,
    complement: Any = None,
    subs: Mapping[Any, Any] | None = None,
    fd: FrameData | None = None,
) -> SymbolicVerdict:
    """Seed 001 Cor. 1 (strong consistency) / seed 002 Prop. 2 for a section ``phi_a``.

    Residuals on ``C`` (both must vanish identically):
    ``(S5-2)_alpha = phi_a R^a_{alpha beta} v^beta`` and
    ``(S5-3)_a = Gamma(phi_a) + phi_b R^b_{a alpha} v^alpha - lambda_a``.
    Then every NH motion is VAK with multipliers ``mu_a = phi_a`` of ``L - mu_a v^a``, and the NH
    field is the restriction of the Euler-Lagrange field of ``L - Phi_a v^a``.

    Parameters
    ----------
    system : NonholonomicSystem
    section : list of sympy.Expr, optional
        ``phi_a(q, v^alpha)`` in the symbols ``fd.v[:r]`` (get them from :func:`frame_data`);
        default the momenta ``p_a = XV_a L`` on C (the Chaplygin choice of seeds 001/002).
    complement : sympy.Matrix, optional
        See :func:`frame_data`.
    subs : dict, optional
        Parameter relations imposed before deciding.
    fd : FrameData, optional
        Precomputed frame data (must match ``complement``).

    Returns
    -------
    SymbolicVerdict
        ``conditions`` ``"(S5-2)"`` (``r`` entries) and ``"(S5-3)"`` (``n - r``);
        ``data["section"]``, ``data["frame"]``.
    """
    system = _check_system(system)
    fd = fd or frame_data(system, complement)
    n, r = len(fd.q), fd.r
    simp = _fast
    sm = _subs_map(system, subs)
    phi = _section(fd, section)
    v = fd.v
    s2 = []
    for al in range(r):
        t = sum(
            (phi[a - r] * fd.R[al, b, a] * v[b] for a in range(r, n) for b in range(r)),
            sp.Integer(0),
        )
        s2.append(fd.on_C(t))
    s3 = []
    for a in range(r, n):
        t = fd.flow(phi[a - r]) - fd.multipliers[a - r]
        t += sum(
            (phi[b - r] * fd.R[a, al, b] * v[al] for b in range(r, n) for al in range(r)),
            sp.Integer(0),
        )
        s3.append(fd.on_C(t))
    s2 = _apply(s2, sm, simp)
    s3 = _apply(s3, sm, simp)
    bad = _nonzero(s2 + s3)
    integ = is_integrable(system)
    holds = not bad
    if holds:
        statement = (
            "strongly consistent: the NH motions are VAK with multipliers phi and the NH field "
            "is the restriction of the Euler-Lagrange field of L - Phi_a v^a"
        )
    else:
        statement = f"not consistent for this section: {len(bad)} residual(s) do not vanish"
    if integ:
        statement += f" ({INTEGRABLE_NOTE})"
    return SymbolicVerdict(
        name="strong consistency (seed 001, Cor. 1)",
        holds=holds,
        statement=statement,
        conditions={"(S5-2)": s2, "(S5-3)": s3},
        obstruction=bad,
        integrable=integ,
        data={"section": list(phi), "frame": fd},
    )


def restriction_test(
    system: Any,
    section: Sequence[Any] | None = None,
    complement: Any = None,
    subs: Mapping[Any, Any] | None = None,
    fd: FrameData | None = None,
    velocities: Sequence[sp.Symbol] | None = None,
) -> SymbolicVerdict:
    """Is the NH system the restriction of an Euler-Lagrange system?  Seed 002, Prop. 2.

    Runs :func:`consistency_test` and, independently of the frame calculus, builds
    ``Ltilde(q, qdot) = L - Phi_a(q, qdot) v^a(q, qdot)`` (``Phi_a`` the extension of ``phi_a``
    constant along the ``v^a``; ``v = X^{-1} qdot``), and evaluates its Euler-Lagrange
    expressions ``d/dt dLtilde/dqdot - dLtilde/dq`` on the NH motions (``qdot = e v``,
    ``qddot`` from the NH flow).  The verdict needs both routes to agree.

    Parameters
    ----------
    system, section, complement, subs, fd
        As for :func:`consistency_test`.
    velocities : list of sympy.Symbol, optional
        Names of the natural velocities ``qdot`` in ``Ltilde`` (default ``qdot_<q>``).

    Returns
    -------
    SymbolicVerdict
        ``conditions`` as in :func:`consistency_test` plus ``"EL(Ltilde) on NH"`` (``n``);
        ``data["lagrangian"]`` = ``Ltilde``, ``data["velocities"]``, ``data["hessian_det"]``
        (``det d^2 Ltilde / dqdot^2`` on C; regular where it is non-zero).
    """
    system = _check_system(system)
    fd = fd or frame_data(system, complement)
    cons = consistency_test(system, section, subs=subs, fd=fd)
    simp = _fast
    sm = _subs_map(system, subs)
    q, n, r = fd.q, len(fd.q), fd.r
    if velocities is None:
        qd = [sp.Symbol(f"qdot_{a}", real=True) for a in q]
    else:
        qd = as_symbol_list(velocities, "velocities")
        if len(qd) != n:
            raise ValueError(f"velocities must have n = {n} symbols, got {len(qd)}")
    qdm = sp.Matrix(qd)
    Xinv = fd.X.inv().applyfunc(simp)
    vq = (Xinv * qdm).applyfunc(simp)  # v(q, qdot)
    phi = sp.Matrix(cons.data["section"])
    to_natural = {fd.v[i]: vq[i] for i in range(r)}
    Phi = phi.applyfunc(lambda x: sp.sympify(x).subs(to_natural))
    L = (qdm.T * system.metric * qdm)[0, 0] / 2 - system.potential
    Lt = L - sum((Phi[a - r] * vq[a] for a in range(r, n)), sp.Integer(0))
    # EL on NH motions, through the raw NH data (frame-free)
    nh = nonholonomic_data(system)
    on = {qd[i]: nh.qdot[i] for i in range(n)}
    edot = sp.zeros(n, r)
    for b in range(n):
        edot += sp.diff(nh.frame, q[b]) * nh.qdot[b]
    qdd = nh.frame * nh.vdot + edot * sp.Matrix(nh.v)
    el = []
    for i in range(n):
        p_i = sp.diff(Lt, qd[i])
        dt = sum((sp.diff(p_i, q[j]) * qd[j] for j in range(n)), sp.Integer(0))
        dt += sum((sp.diff(p_i, qd[j]) * qdd[j] for j in range(n)), sp.Integer(0))
        el.append((dt - sp.diff(Lt, q[i])).subs(on))
    el = _apply(el, sm, simp)
    hess = sp.hessian(Lt, qd).subs(on)
    hdet = simp(hess.det().subs(sm)) if n <= 5 else None
    bad_el = _nonzero(el)
    holds = cons.holds and not bad_el
    if cons.holds != (not bad_el):  # pragma: no cover - the two routes must agree
        raise RuntimeError(
            "restriction_test: frame route and Euler-Lagrange route disagree "
            f"(frame: {cons.holds}, EL: {not bad_el})"
        )
    statement = (
        "the NH field is the restriction to C of the Euler-Lagrange field of Ltilde = L - Phi_a v^a"
        if holds
        else "not a restricted Euler-Lagrange system for this section"
    )
    if hdet is not None and holds and is_zero(hdet):
        statement += " (but Ltilde is singular on C)"
    conditions = dict(cons.conditions)
    conditions["EL(Ltilde) on NH"] = el
    return SymbolicVerdict(
        name="restriction of an Euler-Lagrange system (seed 002, Prop. 2)",
        holds=holds,
        statement=statement,
        conditions=conditions,
        obstruction=cons.obstruction + bad_el,
        integrable=cons.integrable,
        data={
            "lagrangian": simp(Lt.subs(sm)),
            "velocities": qd,
            "hessian_det": hdet,
            "section": cons.data["section"],
            "frame": fd,
        },
    )
