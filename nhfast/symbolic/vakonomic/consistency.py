"""Is the nonholonomic field a restricted Euler-Lagrange field?  The frame route (pure SymPy).

In an adapted frame ``X = [X_alpha | X_a]`` (``X_alpha`` spanning D) with
``[X_i, X_j] = R^k_ij X_k`` and quasi-velocities ``v = X^{-1} qdot``, a section
``phi_a(q, v^alpha)`` makes the NH field the restriction of the Euler-Lagrange field of
``Ltilde = L - Phi_a v^a`` (and the NH motions vakonomic with frame multipliers ``mu = phi``)
iff, identically on ``C = {v^a = 0}`` (Crampin & Mestdag 2010, Cor. 1; Mestdag & Crampin 2010,
Prop. 2)::

    phi_a R^a_{alpha beta} v^beta = 0,                             (algebraic, "(S5-2)")
    Gamma(phi_a) + phi_b R^b_{a alpha} v^alpha - lambda_a = 0.     (differential, "(S5-3)")

The quoted names are the keys of ``SymbolicVerdict.conditions`` for the two conditions of
Crampin & Mestdag (2010), Sec. 5.

:func:`consistency_test` returns both residuals; :func:`restriction_test` also builds
``Ltilde`` in coordinates and checks its Euler-Lagrange equations on the NH motions.  All
algebra is over rational functions with the :func:`~._forms.normal` form (no ``simplify``), which
is what makes the five-dimensional carriage take seconds.  Signs: frame multipliers of
:mod:`~._forms` (``L - mu_a v^a``).

References: Crampin & Mestdag (2010), "Anholonomic frames in constrained dynamics"; Mestdag &
Crampin (2010), "Nonholonomic systems as restricted Euler-Lagrange systems".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sympy as sp

from nhfast.symbolic import frames as _fr
from nhfast.symbolic._util import as_symbol_list
from nhfast.symbolic.vakonomic._forms import (
    INTEGRABLE_NOTE,
    SymbolicVerdict,
    check_system,
    completed_frame,
    is_integrable,
    nonzero,
    normal,
    normal_forms,
    quasi_velocity_symbols,
    subs_map,
)
from nhfast.symbolic.vakonomic.nh_vs_vak import nonholonomic_data

__all__: list[str] = []


@dataclass
class FrameData:
    """An adapted frame ``X = [X_alpha | X_a]`` and the NH objects in it (Crampin & Mestdag 2010).

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
        NH accelerations ``Gamma^alpha(q, v^alpha)`` (Crampin & Mestdag 2010, Sec. 3).
    multipliers : sympy.Matrix
        ``lambda_a = Gamma(XV_a L) - XC_a L`` on C (Crampin & Mestdag 2010, Sec. 3),
        ``n - r`` entries.
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
        return sp.sympify(f).xreplace({b: sp.Integer(0) for b in self.v[self.r :]})

    def complete_lift(self, i: int, f: Any) -> sp.Expr:
        """``XC_i(f) = X^j_i d f/d q^j - R^j_ik v^k d f/d v^j``.

        Crampin & Mestdag (2010), Sec. 2.2.
        """
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
    """The adapted-frame objects of Crampin & Mestdag (2010) for ``system``.

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
    system = check_system(system)
    simp = normal
    n, r = system.dim, system.rank
    X = completed_frame(system, complement)
    q = system.q
    v = quasi_velocity_symbols(system, n, velocities)
    R = _fr.anholonomity(X, q, simplify=simp)
    vv = sp.Matrix(v)
    u = X * vv
    L = simp(((u.T * system.metric * u)[0, 0]) / 2 - system.potential)
    fd = FrameData(
        q=list(q), v=v, X=X, R=R, lagrangian=L, gamma=sp.zeros(r, 1),
        multipliers=sp.zeros(n - r, 1), momenta=sp.zeros(n - r, 1), r=r,
    )  # fmt: skip
    # Crampin & Mestdag (2010), Sec. 3: g_ab Gamma^b = XC_a(L) - v^b XC_b(XV_a L), on C
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


def hamel_field(
    fd: FrameData, lagrangian: Any = None, point: Mapping[Any, Any] | None = None
) -> sp.Matrix:
    """Unconstrained Euler-Lagrange field in the frame (Crampin & Mestdag 2010, Prop. 1).

    ``Gamma = v^i XC_i + Gamma^i XV_i`` with ``Gamma(XV_i L) - XC_i L = 0`` for all ``i``,
    i.e. ``g_ij Gamma^j = XC_i(L) - v^j XC_j(XV_i L)`` (their Sec. 2.2), ``g_ij = d^2 L/dv^i dv^j``,
    on all of ``TQ`` (no restriction to C).

    Parameters
    ----------
    fd : FrameData
    lagrangian : sympy.Expr, optional
        ``L(q, v)`` in the symbols ``fd.q``, ``fd.v`` (all ``n``); default ``fd.lagrangian``.
        Must be regular (``det g != 0``).
    point : dict, optional
        Values substituted (after differentiating) before the linear solve: the field at one
        point (say exact rationals for ``q``, ``v`` and the parameters), for expressions too
        large to solve symbolically.

    Returns
    -------
    sympy.Matrix
        ``Gamma^i(q, v)``, ``n`` entries, in the normal form of :func:`~._forms.normal`
        (without ``point``), or their values at ``point``.

    Raises
    ------
    ValueError
        If ``L`` is singular (``det g = 0`` identically).
    """
    L = fd.lagrangian if lagrangian is None else sp.sympify(lagrangian)
    v, n = fd.v, len(fd.q)
    at = (lambda e: sp.sympify(e).subs(point)) if point is not None else normal
    g = sp.Matrix(n, n, lambda i, j: at(sp.diff(L, v[i], v[j])))
    if normal(g.det()) == 0:
        raise ValueError("lagrangian is singular: det(d^2 L / dv^i dv^j) = 0")
    rhs = sp.zeros(n, 1)
    for i in range(n):
        pi = sp.diff(L, v[i])
        t = fd.complete_lift(i, L) - sum(
            (v[j] * fd.complete_lift(j, pi) for j in range(n)), sp.Integer(0)
        )
        rhs[i] = at(t)
    sol = g.LUsolve(rhs)
    return sol.applyfunc(normal) if point is None else sol


def vakonomic_frame_field(fd: FrameData, mu: Sequence[Any], rates: Sequence[Any]) -> sp.Matrix:
    """Accelerations of the vakonomic field with multiplier values ``mu`` and rates ``A``.

    Crampin & Mestdag 2010, Sec. 4, Prop. 3: on ``C x R^(n-r)`` a VAK field is
    ``Gamma_hat = v^alpha XC_alpha + Gamma^i XV_i + A_a d/dmu_a`` with (``L`` the frame
    Lagrangian, everything on C)::

        Gamma_hat(XV_alpha L) - XC_alpha L = mu_a R^a_{alpha beta} v^beta,
        Gamma_hat(XV_a L) - XC_a L = mu_b R^b_{a alpha} v^alpha + A_a.

    ``A_a`` is free; ``Gamma^a = 0`` (tangency to C) fixes it.  This is the general field, so
    it can be compared with the tangent one of
    :func:`~nhfast.symbolic.vakonomic.vakonomic_frame_equations` and with the paper's formulas
    for an arbitrary ``A``.

    Parameters
    ----------
    fd : FrameData
    mu : sequence of sympy.Expr
        ``n - r`` multiplier values (symbols, or a section ``phi_a(q, v^alpha)``).
    rates : sequence of sympy.Expr
        ``n - r`` values ``A_a = Gamma_hat(mu_a)``.

    Returns
    -------
    sympy.Matrix
        ``Gamma^i`` for ``i = 1..n`` (the last ``n - r`` vanish iff the field is tangent to C).

    Raises
    ------
    ValueError
        If ``mu`` or ``rates`` do not have ``n - r`` entries.
    """
    n, r = len(fd.q), fd.r
    mu_ = [sp.sympify(x) for x in mu]
    A = [sp.sympify(x) for x in rates]
    for name, val in (("mu", mu_), ("rates", A)):
        if len(val) != n - r:
            raise ValueError(f"{name} must have n - r = {n - r} entries, got {len(val)}")
    L, v = fd.lagrangian, fd.v
    g = sp.Matrix(n, n, lambda i, j: fd.on_C(sp.diff(L, v[i], v[j])))
    rhs = sp.zeros(n, 1)
    for i in range(n):
        pi = sp.diff(L, v[i])
        t = fd.complete_lift(i, L) - sum(
            (v[al] * fd.complete_lift(al, pi) for al in range(r)), sp.Integer(0)
        )
        t += sum(
            (mu_[a - r] * fd.R[i, al, a] * v[al] for a in range(r, n) for al in range(r)),
            sp.Integer(0),
        )
        if i >= r:
            t += A[i - r]
        rhs[i] = normal(fd.on_C(t))
    return g.LUsolve(rhs).applyfunc(normal)


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
    """Strong consistency of a section ``phi_a`` (Crampin & Mestdag 2010, Cor. 1).

    Residuals on ``C`` (both must vanish identically), the algebraic condition
    ``phi_a R^a_{alpha beta} v^beta`` (one per ``alpha``) and the differential condition
    ``Gamma(phi_a) + phi_b R^b_{a alpha} v^alpha - lambda_a`` (one per ``a``) of Sec. 5 there.
    Then every NH motion is VAK with multipliers ``mu_a = phi_a`` of ``L - mu_a v^a``, and the NH
    field is the restriction of the Euler-Lagrange field of ``L - Phi_a v^a``.

    Parameters
    ----------
    system : NonholonomicSystem
    section : list of sympy.Expr, optional
        ``phi_a(q, v^alpha)`` in the symbols ``fd.v[:r]`` (get them from :func:`frame_data`);
        default the momenta ``p_a = XV_a L`` on C (the Chaplygin choice).
    complement : sympy.Matrix, optional
        See :func:`frame_data`.
    subs : dict, optional
        Parameter relations imposed before deciding.
    fd : FrameData, optional
        Precomputed frame data (must match ``complement``).

    Returns
    -------
    SymbolicVerdict
        ``conditions``: ``"(S5-2)"`` the algebraic residuals (``r`` entries) and ``"(S5-3)"``
        the differential ones (``n - r``);
        ``data["section"]``, ``data["frame"]``.
    """
    system = check_system(system)
    fd = fd or frame_data(system, complement)
    n, r = len(fd.q), fd.r
    sm = subs_map(system, subs)
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
    s2 = normal_forms(s2, sm)
    s3 = normal_forms(s3, sm)
    bad = nonzero(s2 + s3)
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
        name="strong consistency (Crampin & Mestdag 2010, Cor. 1)",
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
    """Is the NH system a restricted Euler-Lagrange system?  Mestdag & Crampin 2010, Prop. 2.

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
    system = check_system(system)
    fd = fd or frame_data(system, complement)
    cons = consistency_test(system, section, subs=subs, fd=fd)
    simp = normal
    sm = subs_map(system, subs)
    q, n, r = fd.q, len(fd.q), fd.r
    if velocities is None:
        qd = [sp.Symbol(f"qdot_{a}", real=True) for a in q]
    else:
        qd = as_symbol_list(velocities, "velocities")
        if len(qd) != n:
            raise ValueError(f"velocities must have n = {n} symbols, got {len(qd)}")
    qdm = sp.Matrix(qd)
    Xinv = fd.X.LUsolve(sp.eye(n)).applyfunc(simp)
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
    el = normal_forms(el, sm)
    hess = sp.hessian(Lt, qd).subs(on)
    hdet = simp(hess.det().subs(sm)) if n <= 5 else None
    bad_el = nonzero(el)
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
    if hdet is not None and holds and not nonzero([hdet]):
        statement += " (but Ltilde is singular on C)"
    conditions = dict(cons.conditions)
    conditions["EL(Ltilde) on NH"] = el
    return SymbolicVerdict(
        name="restriction of an Euler-Lagrange system (Mestdag & Crampin 2010, Prop. 2)",
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
