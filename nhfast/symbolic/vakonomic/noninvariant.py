"""Non-invariant Chaplygin systems: the paper's own criterion for "NH trajectory is VAK".

Jóźwikowski & Respondek (2019), "A comparison of vakonomic and nonholonomic dynamics with
applications to non-invariant Chaplygin systems", Sections 2-4.  The package's other route
(:mod:`~.nh_vs_vak`) decides the question through the multiplier ODE in raw coordinates, an
algorithm derived here from the paper's Lemma 4.10 (not stated in the paper); this module
implements the paper's objects themselves:

* (3.1) the admissible variation ``delta v = wdot + C(v, w)`` in an anholonomic frame
  (:func:`admissible_variation`);
* the tensors of a (not necessarily ``G``-invariant) Chaplygin system ``Q -> M = Q/G``
  (:func:`chaplygin_bundle`): the curvature ``R`` (4.1), the non-invariance tensor ``B`` (4.2),
  the vertical and horizontal derivatives ``FL`` (4.3), ``HL`` (4.4) of the Lagrangian, read
  off the frame structure functions as in Prop. 4.5;
* Lemma 4.6 (4.6)-(4.8): the generator ODE ``bdot + B(X, b) + R(X, Y) = 0`` of a vakonomic
  variation (:func:`generator_equation`);
* Prop. 4.9 (4.16): the linear ODE of the vakonomic multiplier (:func:`multiplier_equation`)
  and the change of multiplier convention to the package's raw coordinate multipliers
  (:func:`coordinate_multipliers`);
* Thm. 4.8(b) (4.11) (= (5.6) for Lie groups, Remark 5.7): both sides of the integral
  criterion along a computed NH trajectory, with the generator ODE integrated alongside
  (:func:`integral_criterion`), and over the admissible pairs spanned by a family of
  generators (:func:`admissible_pair_residuals`);
* Sec. 5, left-invariant constraints ``d`` on a Lie group with a complement ``d'`` and a
  Lagrangian that need not be invariant (:func:`left_invariant_constraint`): (5.3)
  (:func:`lie_generator_equation`), the integrands of (5.6)
  (:func:`lie_integral_criterion_integrands`), Lemma 5.4 (5.8) (:func:`euler_poincare_suslov`)
  and (5.9)/(5.10) (:func:`lie_vakonomic_equations`).

Conventions
-----------
* The frame is a square ``n x n`` matrix whose **columns** are the fields: the first ``m``
  are the horizontal lifts ``e~_i`` of a frame ``e_i`` of ``M`` (so they span ``HQ`` and their
  base components depend on the base coordinates only), the last ``k`` the fundamental fields
  ``e~_alpha`` of a basis ``e_alpha`` of ``g`` (zero base components).
* Frame velocities ``qdot = frame . (y, a)``: ``y`` horizontal (base velocity ``X = y``), ``a``
  vertical; ``HQ = {a = 0}`` and the connection form is ``omega(Z) = a`` (the paper's (4.5)).
* Structure functions ``[e_b, e_c] = C^a_bc e_a`` (the paper's (2.3)); arrays follow
  :mod:`nhfast.symbolic.frames`: ``C[b, c, a] = C^a_bc``, ``R[i, j, alpha] = R^alpha_ij``,
  ``B[i, beta, alpha] = B^alpha_{i beta}`` (Prop. 4.5).
* Multiplier: the paper writes ``L~ = L - <lambda, omega(Z)>`` (Thm. 4.8(c)); the package's raw
  multipliers ``mu`` of ``L + mu_a W_a(qdot)`` are converted by :func:`coordinate_multipliers`.

Misprints of the paper (followed here is the mathematics): the printed (4.8) lost the dot of
``bdot``; Cor. 4.11/4.12 print "FL lambda" for ``FL - lambda``.  With ``FL - lambda`` Cor. 4.12
must read ``<d/dt (FL - lambda), b> = -<lambda, B(X, b)>`` (derived here from (4.16) and
Remark 4.4); the printed right-hand side ``+<lambda, B(X, b)>`` is correct only for
``lambda - FL``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from nhfast.symbolic._util import (
    Simplifier,
    as_column,
    as_expr,
    as_matrix,
    as_symbol_list,
    fresh_name,
    simplifier,
)
from nhfast.symbolic.frames import anholonomity

__all__ = [
    "chaplygin_bundle",
    "integral_criterion",
    "euler_poincare_suslov",
    "lie_vakonomic_equations",
]


def admissible_variation(
    frame: Any,
    q: Sequence[sp.Symbol],
    path: Any,
    v: Any,
    w: Any,
    t: sp.Symbol,
    simplify: Simplifier = False,
) -> tuple[sp.Matrix, sp.Matrix]:
    """The admissible variation (3.1) of Jóźwikowski & Respondek (2019) in an anholonomic frame.

    Along a curve ``q(t)`` with frame velocities ``v(t)`` (``qdot = A(q) v``) and a generator
    ``xi(t) = A(q) w(t)``, Jóźwikowski & Respondek (2019), (3.1) reads::

        delta_xi gamma ~ (q, v, A(q) w, wdot^d + C^d_ab(q) v^a w^b),

    with the structure functions ``[e_b, e_c] = C^a_bc e_a`` of (2.3).

    Parameters
    ----------
    frame : sympy.Matrix
        ``A(q)`` (``n x n``, columns the frame fields ``e_b``).
    q : list of sympy.Symbol
        Coordinates.
    path : sympy.Matrix
        ``q(t)`` (``n`` expressions in ``t``).
    v, w : sympy.Matrix
        Frame components ``v(t)`` of the velocity and ``w(t)`` of the generator.
    t : sympy.Symbol
        Time.
    simplify : bool or callable, optional
        Applied to the structure functions.

    Returns
    -------
    (sympy.Matrix, sympy.Matrix)
        The ``q'``-part ``A(q(t)) w`` (the generator, Prop. 3.1(iii)) and the ``v'``-part
        ``wdot + C(q(t))(v, w)``: the variation of the frame velocities.
    """
    q = as_symbol_list(q, "q")
    n = len(q)
    A = as_matrix(frame, "frame")
    if A.shape != (n, n):
        raise ValueError(f"frame must be {n} x {n}, got shape {A.shape}")
    qt = as_column(path, "path", n)
    vc = as_column(v, "v", n)
    wc = as_column(w, "w", n)
    C = anholonomity(A, q, simplify=simplify)
    on_path = dict(zip(q, qt, strict=True))
    dv = sp.Matrix(
        [
            sp.diff(wc[d], t)
            + sum(
                (
                    C[a, b, d].subs(on_path) * vc[a] * wc[b]
                    for a in range(n)
                    for b in range(n)
                    if C[a, b, d] != 0
                ),
                sp.Integer(0),
            )
            for d in range(n)
        ]
    )
    return A.subs(on_path) * wc, dv


@dataclass
class ChaplyginBundle:
    """A (not necessarily invariant) Chaplygin system in an adapted frame.

    Jóźwikowski & Respondek (2019), Sec. 4.

    Attributes
    ----------
    q : list of sympy.Symbol
        Coordinates of ``Q``; ``base`` are those of ``M``, ``fibre`` the others.
    base, fibre : list of sympy.Symbol
    frame : sympy.Matrix
        ``(e~_1..e~_m | e~_1..e~_k)``: horizontal lifts, then fundamental fields.
    rank : int
        ``m = dim M`` (the rank of ``HQ``); ``k = n - m = dim g``.
    y, a : list of sympy.Symbol
        Horizontal and vertical frame velocities, ``qdot = frame . (y, a)``.
    params : list of sympy.Symbol
        Parameters (everything else free in the data).
    structure : sympy.MutableDenseNDimArray
        ``C[b, c, a] = C^a_bc`` of the whole frame (the paper's (2.3)).
    curvature : sympy.MutableDenseNDimArray
        ``R[i, j, alpha] = R^alpha_ij`` (Jóźwikowski & Respondek (2019), (4.1), Prop. 4.5),
        ``m x m x k``.
    noninvariance : sympy.MutableDenseNDimArray
        ``B[i, beta, alpha] = B^alpha_{i beta}`` (Jóźwikowski & Respondek (2019), (4.2), Prop. 4.5),
        ``m x k x k``; identically zero iff ``HQ`` is ``G``-invariant (Remark 4.3).
    lagrangian : sympy.Expr
        ``L(q, y, a)`` in the frame velocities.
    FL, HL : sympy.Matrix
        Vertical derivative (4.3) ``FL_beta = dL/da^beta (q, y, 0)`` and horizontal derivative
        (4.4) ``HL_beta = e~_beta(L)(q, y, 0)`` at fixed frame velocities (Prop. 4.5:
        ``dL/dg^alpha A^alpha_beta(g)``), ``k`` entries, functions of ``(q, y)``.
    """

    q: list[sp.Symbol]
    base: list[sp.Symbol]
    fibre: list[sp.Symbol]
    frame: sp.Matrix
    rank: int
    y: list[sp.Symbol]
    a: list[sp.Symbol]
    params: list[sp.Symbol]
    structure: sp.MutableDenseNDimArray
    curvature: sp.MutableDenseNDimArray
    noninvariance: sp.MutableDenseNDimArray
    lagrangian: sp.Expr
    FL: sp.Matrix
    HL: sp.Matrix

    @property
    def dim_group(self) -> int:
        """``k = dim g``."""
        return len(self.q) - self.rank

    @property
    def horizontal_velocity(self) -> sp.Matrix:
        """``qdot = frame[:, :m] . y`` on ``HQ``.

        Jóźwikowski & Respondek (2019), (4.5) with ``a = 0``.
        """
        return self.frame[:, : self.rank] * sp.Matrix(self.y)

    def R(self, X: Any, Y: Any) -> sp.Matrix:
        """``R(q)(X, Y)^alpha = R^alpha_ij X^i Y^j`` (``k`` entries)."""
        m, k = self.rank, self.dim_group
        Xc, Yc = as_column(X, "X", m), as_column(Y, "Y", m)
        return sp.Matrix(
            [
                sum(
                    (self.curvature[i, j, al] * Xc[i] * Yc[j] for i in range(m) for j in range(m)),
                    sp.Integer(0),
                )
                for al in range(k)
            ]
        )

    def B(self, X: Any, b: Any) -> sp.Matrix:
        """``B(q)(X, b)^alpha = B^alpha_{i beta} X^i b^beta`` (``k`` entries)."""
        m, k = self.rank, self.dim_group
        Xc, bc = as_column(X, "X", m), as_column(b, "b", k)
        return sp.Matrix(
            [
                sum(
                    (
                        self.noninvariance[i, be, al] * Xc[i] * bc[be]
                        for i in range(m)
                        for be in range(k)
                    ),
                    sp.Integer(0),
                )
                for al in range(k)
            ]
        )

    def total_derivative(self, f: Any, ydot: Any) -> sp.Expr:
        """``d/dt f(q, y)`` along a horizontal curve: ``qdot = frame_H y``, ``y' = ydot``."""
        f = sp.sympify(f)
        yd = as_column(ydot, "ydot", self.rank)
        qd = self.horizontal_velocity
        out = sum((sp.diff(f, c) * qd[i] for i, c in enumerate(self.q)), sp.Integer(0))
        return out + sum((sp.diff(f, c) * yd[i] for i, c in enumerate(self.y)), sp.Integer(0))


def chaplygin_bundle(
    q: Sequence[sp.Symbol],
    frame: Any,
    rank: int,
    lagrangian: Any,
    velocities: Sequence[sp.Symbol],
    base: Sequence[sp.Symbol],
    params: Sequence[sp.Symbol] = (),
    names: tuple[str, str] = ("y", "a"),
    simplify: Simplifier = True,
) -> ChaplyginBundle:
    """The tensors ``R``, ``B``, ``FL``, ``HL`` of a non-invariant Chaplygin system.

    Jóźwikowski & Respondek (2019), Sec. 4.

    ``R`` and ``B`` are the vertical blocks of the frame structure functions (Prop. 4.5)::

        [e~_i, e~_j] = C^k_ij e~_k + R^alpha_ij e~_alpha,
        [e~_i, e~_beta] = B^alpha_{i beta} e~_alpha,

    i.e. (4.1) ``R(X, Y) = omega([X~, Y~] - lift[X, Y])`` and (4.2) ``B(X, b) = omega([X~, b~])``.
    ``FL`` (4.3) and ``HL`` (4.4) are computed from ``L(q, frame . (y, a))`` as in Prop. 4.5.

    Parameters
    ----------
    q : list of sympy.Symbol
        Coordinates of ``Q``.
    frame : sympy.Matrix
        ``n x n``; first ``rank`` columns the horizontal lifts of a frame of ``M`` (base
        components depending on ``base`` only), then the fundamental fields of a basis of ``g``
        (zero base components).
    rank : int
        ``m = dim M``.
    lagrangian : sympy.Expr
        ``L(q, qdot)``.
    velocities : list of sympy.Symbol
        The symbols ``qdot`` used in ``lagrangian``.
    base : list of sympy.Symbol
        The coordinates of ``M`` among ``q`` (the others are fibre coordinates).
    params : list of sympy.Symbol, optional
        Parameters (kept as symbols).
    names : (str, str), optional
        Prefixes of the horizontal and vertical frame-velocity symbols.
    simplify : bool or callable, optional
        Applied to the structure functions and to ``FL``, ``HL``.

    Returns
    -------
    ChaplyginBundle

    Raises
    ------
    ValueError
        If the frame is not square and invertible, a fundamental field has a base component, or
        a horizontal field has base components depending on fibre coordinates.
    """
    q = as_symbol_list(q, "q")
    base = as_symbol_list(base, "base")
    qd = as_symbol_list(velocities, "velocities")
    n = len(q)
    if len(qd) != n:
        raise ValueError(f"velocities must have {n} symbols, got {len(qd)}")
    missing = [s for s in base if s not in q]
    if missing:
        raise ValueError(f"base coordinates {missing} are not among q")
    A = as_matrix(frame, "frame")
    if A.shape != (n, n):
        raise ValueError(f"frame must be {n} x {n}, got shape {A.shape}")
    m = int(rank)
    if len(base) != m or not 0 < m < n:
        raise ValueError(f"rank must equal len(base) = {len(base)} and lie in 1..{n - 1}")
    if sp.cancel(A.det()) == 0:
        raise ValueError("frame is singular")
    fibre = [s for s in q if s not in base]
    bidx = [q.index(s) for s in base]
    for col in range(m, n):
        bad = [q[r] for r in bidx if sp.simplify(A[r, col]) != 0]
        if bad:
            raise ValueError(
                f"frame column {col} is not vertical: it has components along {bad} (base)"
            )
    for col in range(m):
        for r in bidx:
            dep = sp.sympify(A[r, col]).free_symbols & set(fibre)
            if dep:
                raise ValueError(
                    f"frame column {col} is not the lift of a field on M: its "
                    f"{q[r]}-component depends on {sorted(dep, key=str)}"
                )
    simp = simplifier(simplify)
    taken = {str(s) for s in [*q, *qd, *params]}
    y = [sp.Symbol(fresh_name(f"{names[0]}{i + 1}", taken), real=True) for i in range(m)]
    a = [sp.Symbol(fresh_name(f"{names[1]}{al + 1}", taken), real=True) for al in range(n - m)]
    C = anholonomity(A, q, simplify=simp)
    k = n - m
    R = sp.MutableDenseNDimArray.zeros(m, m, k)
    B = sp.MutableDenseNDimArray.zeros(m, k, k)
    for i in range(m):
        for al in range(k):
            for j in range(m):
                R[i, j, al] = C[i, j, m + al]
            for be in range(k):
                B[i, be, al] = C[i, m + be, m + al]
    L = as_expr(lagrangian, "lagrangian")
    Lf = L.subs(dict(zip(qd, A * sp.Matrix([*y, *a]), strict=True)), simultaneous=True)
    on_h = {s: 0 for s in a}
    FL = sp.Matrix([simp(sp.diff(Lf, s).subs(on_h)) for s in a])
    dLq = [sp.diff(Lf, c).subs(on_h) for c in q]
    HL = sp.Matrix(
        [simp(sum((A[c, m + be] * dLq[c] for c in range(n)), sp.Integer(0))) for be in range(k)]
    )
    return ChaplyginBundle(
        q=q,
        base=base,
        fibre=fibre,
        frame=A,
        rank=m,
        y=y,
        a=a,
        params=list(params),
        structure=C,
        curvature=R,
        noninvariance=B,
        lagrangian=Lf,
        FL=FL,
        HL=HL,
    )


def generator_equation(bundle: ChaplyginBundle, X: Any, Y: Any, b: Any, bdot: Any) -> sp.Matrix:
    """Left-hand side of (4.8): ``bdot + B(q)(X, b) + R(q)(X, Y)``.

    Jóźwikowski & Respondek (2019), (4.8).

    Lemma 4.6: along a horizontal curve with base velocity ``X``, the generator
    ``xi = Y~ + b~`` has vertical variation (4.6) ``bdot + B(X, b)`` from ``b~`` and (4.7)
    ``R(X, Y)`` from ``Y~``; ``delta_xi X~`` is vakonomic (tangent to ``HQ``) iff the sum (4.8)
    vanishes (printed without the dot on ``b``).

    Parameters
    ----------
    bundle : ChaplyginBundle
    X, Y : sympy.Matrix
        Base velocity and horizontal generator (``m`` components in the frame of ``M``).
    b, bdot : sympy.Matrix
        Vertical generator (``k`` components in the basis of ``g``) and its time derivative.

    Returns
    -------
    sympy.Matrix
        ``k`` entries; zero iff the variation is vakonomic.
    """
    k = bundle.dim_group
    return as_column(bdot, "bdot", k) + bundle.B(X, b) + bundle.R(X, Y)


def multiplier_equation(
    bundle: ChaplyginBundle, lam: Any, lamdot: Any, ydot: Any, simplify: bool = True
) -> sp.Matrix:
    """Left-hand side of the multiplier's linear ODE (Jóźwikowski & Respondek 2019, (4.16)).

    Prop. 4.9: a horizontal curve is a vakonomic extremal of ``L~ = L - <lambda, omega(Z)>`` iff
    (4.15) holds and, for every ``beta``::

        HL_beta - d/dt (FL_beta - lambda_beta) + (FL_alpha - lambda_alpha) B^alpha_{i beta} y^i = 0.

    ``d/dt FL`` is taken along ``qdot = frame_H y``, ``y' = ydot`` (e.g. the NH equations).
    With ``lambda = 0`` this is Thm. 4.8(a) (4.10).

    Parameters
    ----------
    bundle : ChaplyginBundle
    lam, lamdot : sympy.Matrix
        ``lambda`` (``k`` components in the dual basis of ``g``) and its derivative.
    ydot : sympy.Matrix
        ``m`` expressions for ``dy/dt``.
    simplify : bool, optional
        Cancel the result.

    Returns
    -------
    sympy.Matrix
        ``k`` entries.
    """
    k, m = bundle.dim_group, bundle.rank
    lm, ld = as_column(lam, "lam", k), as_column(lamdot, "lamdot", k)
    y = sp.Matrix(bundle.y)
    P = bundle.FL - lm
    out = []
    for be in range(k):
        e = bundle.HL[be] - bundle.total_derivative(bundle.FL[be], ydot) + ld[be]
        e += sum(
            (P[al] * bundle.noninvariance[i, be, al] * y[i] for al in range(k) for i in range(m)),
            sp.Integer(0),
        )
        out.append(sp.cancel(e) if simplify else e)
    return sp.Matrix(out)


def coordinate_multipliers(bundle: ChaplyginBundle, forms: Any, lam: Any) -> sp.Matrix:
    """The package's raw multipliers ``mu`` for Jóźwikowski & Respondek's ``lambda``.

    Jóźwikowski & Respondek: ``L~ = L - <lambda, omega(qdot)>`` with ``omega(qdot) = a``
    (the vertical frame velocities); the package (:mod:`~._forms`): ``L + mu_a W_a(qdot)`` with
    constraint 1-forms
    ``W`` (``k x n``, annihilating ``HQ``).  On any ``qdot``, ``W qdot = N a`` with
    ``N = W . frame_V`` (``k x k``), hence ``mu = -N^{-T} lambda``.

    Parameters
    ----------
    bundle : ChaplyginBundle
    forms : sympy.Matrix
        ``W``.
    lam : sympy.Matrix
        ``lambda`` (``k``).

    Returns
    -------
    sympy.Matrix
        ``mu`` (``k``).

    Raises
    ------
    ValueError
        If ``W`` does not annihilate the horizontal frame fields.
    """
    k, m = bundle.dim_group, bundle.rank
    W = as_matrix(forms, "forms")
    if W.shape != (k, len(bundle.q)):
        raise ValueError(f"forms must be {k} x {len(bundle.q)}, got shape {W.shape}")
    if any(sp.simplify(e) != 0 for e in W * bundle.frame[:, :m]):
        raise ValueError("forms do not annihilate the horizontal frame fields")
    N = (W * bundle.frame[:, m:]).applyfunc(sp.simplify)
    return -(N.T.LUsolve(as_column(lam, "lam", k))).applyfunc(sp.simplify)


@dataclass
class IntegralCriterion:
    """Both sides of (4.11) for one generator pair, along one NH trajectory.

    Jóźwikowski & Respondek (2019), (4.11).

    Attributes
    ----------
    t : numpy.ndarray
        ``(t0, t1)``.
    q1, y1 : numpy.ndarray
        End state of the trajectory.
    b1 : numpy.ndarray
        ``b(t1)`` of the solution of (4.8) with ``b(t0) = 0``.  (4.11) quantifies over pairs
        with ``b(t1) = 0`` as well.
    hl_integral : float
        ``int <HL, b> dt`` (left-hand side of (4.11)).
    fl_integral : float
        ``int <FL, R(X, Y)> dt`` (right-hand side of (4.11)).
    fl_b1 : float
        ``<FL, b>(t1)`` (the boundary term of Remark 4.7 / (4.17)).
    extra : numpy.ndarray
        Integrals of the ``extra`` integrands.
    """

    t: np.ndarray
    q1: np.ndarray
    y1: np.ndarray
    b1: np.ndarray
    hl_integral: float
    fl_integral: float
    fl_b1: float
    extra: np.ndarray

    @property
    def residual(self) -> float:
        """``int <HL, b> - int <FL, R(X, Y)>``: zero for every admissible pair vanishing at
        both ends iff the NH trajectory is vakonomic (Thm. 4.8(b))."""
        return self.hl_integral - self.fl_integral


def integral_criterion(
    bundle: ChaplyginBundle,
    ydot: Any,
    q0: Sequence[float],
    y0: Sequence[float],
    t_span: tuple[float, float],
    Y: Callable[[float], Sequence[float]],
    values: Mapping[sp.Symbol, Any] | None = None,
    extra: Sequence[Any] = (),
    rtol: float = 1e-13,
    atol: float = 1e-14,
) -> IntegralCriterion:
    """Evaluate the integral criterion (4.11) for one horizontal generator.

    Jóźwikowski & Respondek (2019), Thm. 4.8(b) (4.11) (= (5.6) via Remark 5.7).

    Integrates, with SciPy DOP853, the horizontal motion ``qdot = frame_H y``, ``y' = ydot``
    (the NH equations in the frame velocities), the generator ODE (4.8)
    ``bdot = -B(X, b) - R(X, Y(t))`` from ``b(t0) = 0``, and the two sides of (4.11)::

        int_I <HL, b> dt        and        int_I <FL, R(X, Y)> dt.

    For a pair with ``b(t1) = 0`` too, an NH trajectory is vakonomic iff the two agree for every
    such pair.  Otherwise Lemma 4.10 / (4.17) relates the difference to boundary terms.

    Parameters
    ----------
    bundle : ChaplyginBundle
    ydot : sympy.Matrix
        ``m`` expressions in ``(q, y)`` (and parameters).
    q0, y0 : sequence of float
        Initial state.
    t_span : (float, float)
    Y : callable
        ``t -> Y(t)`` (``m`` numbers), the horizontal generator in the frame of ``M``.
    values : dict, optional
        Numeric values of the parameters.
    extra : sequence of sympy.Expr, optional
        Further integrands in ``(q, y, b)``; ``b`` is given by the symbols ``bundle.a`` (the
        vertical components).
    rtol, atol : float, optional
        DOP853 tolerances.

    Returns
    -------
    IntegralCriterion

    Raises
    ------
    ValueError
        If a parameter has no value, or the integration fails.
    """
    from scipy.integrate import solve_ivp

    n, m, k = len(bundle.q), bundle.rank, bundle.dim_group
    vals = dict(values or {})
    b_sym = list(bundle.a)
    Ysym = [sp.Symbol(f"_Y{i}", real=True) for i in range(m)]
    yv = sp.Matrix(bundle.y)
    bv = sp.Matrix(b_sym)
    Yv = sp.Matrix(Ysym)
    parts = [
        *bundle.horizontal_velocity,
        *as_column(ydot, "ydot", m),
        *(-bundle.B(yv, bv) - bundle.R(yv, Yv)),
        (bundle.HL.T * bv)[0, 0],
        (bundle.FL.T * bundle.R(yv, Yv))[0, 0],
        *[sp.sympify(e) for e in extra],
    ]
    parts = [sp.sympify(e).subs(vals) for e in parts]
    args = [*bundle.q, *bundle.y, *b_sym, *Ysym]
    free = set().union(*(e.free_symbols for e in parts)) - set(args)
    if free:
        raise ValueError(f"no values for {sorted(free, key=str)}")
    fun = sp.lambdify(args, parts, modules="numpy")
    ne = len(extra)

    def rhs(t: float, s: np.ndarray) -> np.ndarray:
        Yt = np.asarray(Y(t), dtype=float)
        return np.array(fun(*s[: n + m + k], *Yt), dtype=float)

    s0 = np.concatenate([np.asarray(q0, float), np.asarray(y0, float), np.zeros(k + 2 + ne)])
    sol = solve_ivp(rhs, t_span, s0, method="DOP853", rtol=rtol, atol=atol)
    if not sol.success:
        raise ValueError(f"integration failed: {sol.message}")
    end = sol.y[:, -1]
    q1, y1, b1 = end[:n], end[n : n + m], end[n + m : n + m + k]
    fl = sp.lambdify([*bundle.q, *bundle.y], list(bundle.FL.subs(vals)), modules="numpy")
    fl1 = np.array(fl(*q1, *y1), dtype=float)
    return IntegralCriterion(
        t=np.array(t_span, dtype=float),
        q1=q1,
        y1=y1,
        b1=b1,
        hl_integral=float(end[n + m + k]),
        fl_integral=float(end[n + m + k + 1]),
        fl_b1=float(fl1 @ b1),
        extra=end[n + m + k + 2 :],
    )


def admissible_pair_residuals(
    bundle: ChaplyginBundle,
    ydot: Any,
    q0: Sequence[float],
    y0: Sequence[float],
    t_span: tuple[float, float],
    basis: Sequence[Callable[[float], Sequence[float]]],
    values: Mapping[sp.Symbol, Any] | None = None,
    rtol: float = 1e-13,
    atol: float = 1e-14,
    rank_tol: float = 1e-10,
) -> np.ndarray:
    """Thm. 4.8(b) (4.11) on the admissible pairs spanned by a finite family of generators.

    For each ``Y_r`` of ``basis`` the pair ``(Y_r, b_r)`` with ``b_r(t0) = 0`` is computed by
    :func:`integral_criterion`.  ``b(t1)`` and both sides of (4.11) are linear in ``Y``, so the
    combinations ``sum c_r Y_r`` whose ``b`` also vanishes at ``t1`` (the pairs (4.11) quantifies
    over) are the null space of the ``k x len(basis)`` matrix of the ``b_r(t1)``.

    Parameters
    ----------
    bundle, ydot, q0, y0, t_span, values, rtol, atol
        As in :func:`integral_criterion`.
    basis : sequence of callable
        Horizontal generators ``t -> Y(t)`` vanishing at ``t0`` and ``t1``.
    rank_tol : float, optional
        Singular values below ``rank_tol`` times the largest count as zero.

    Returns
    -------
    numpy.ndarray
        ``int <HL, b> - int <FL, R(X, Y)>`` for an orthonormal basis of the admissible
        combinations (empty if there are none); all zero (to the integration tolerance) when the
        NH trajectory is vakonomic.
    """
    runs = [
        integral_criterion(bundle, ydot, q0, y0, t_span, Y, values=values, rtol=rtol, atol=atol)
        for Y in basis
    ]
    M = np.array([r.b1 for r in runs]).T
    res = np.array([r.residual for r in runs])
    _, sv, vt = np.linalg.svd(M)
    rank = int(np.sum(sv > rank_tol * max(sv.max(initial=0.0), 1.0)))
    return np.asarray(vt[rank:] @ res)


# -- Sec. 5: left-invariant constraints on a Lie group, L not necessarily invariant ------------


@dataclass
class LeftInvariantConstraint:
    """A Lie group ``H``, a constraint subspace ``d`` of ``h`` and a complement.

    Jóźwikowski & Respondek (2019), Sec. 5.

    Attributes
    ----------
    structure : sympy.MutableDenseNDimArray
        ``c[b, c, a] = c^a_bc`` with ``[E_b, E_c] = c^a_bc E_a``.
    d_basis, complement : sympy.Matrix
        ``N x m`` and ``N x k``: columns span ``d`` and ``d'`` (``h = d + d'``).
    eta : list of sympy.Symbol
        Components of ``eta`` in the basis ``E`` (left trivialisation, (5.1)).
    group : list of sympy.Symbol
        Coordinates ``h`` of ``H`` (empty for a left-invariant ``L``).
    frame : sympy.Matrix or None
        Left-invariant frame ``A(h)`` (columns ``E_b`` as vector fields), ``hdot = A(h) eta``.
    lagrangian : sympy.Expr
        ``L(h, eta)``.
    mu, rho : sympy.Matrix
        ``mu = dL/deta`` and ``rho = h^*(dL/dh)``, ``rho_c = E_c(L)`` at fixed ``eta`` (``N``).
    """

    structure: sp.MutableDenseNDimArray
    d_basis: sp.Matrix
    complement: sp.Matrix
    eta: list[sp.Symbol]
    group: list[sp.Symbol]
    frame: sp.Matrix | None
    lagrangian: sp.Expr
    mu: sp.Matrix
    rho: sp.Matrix

    @property
    def dim(self) -> int:
        """``N = dim h``."""
        return len(self.eta)

    def bracket(self, x: Any, y: Any) -> sp.Matrix:
        """``[x, y]^a = c^a_bc x^b y^c``."""
        N = self.dim
        xc, yc = as_column(x, "x", N), as_column(y, "y", N)
        c = self.structure
        return sp.Matrix(
            [
                sum(
                    (c[b, e, a] * xc[b] * yc[e] for b in range(N) for e in range(N) if c[b, e, a]),
                    sp.Integer(0),
                )
                for a in range(N)
            ]
        )

    def ad_star(self, x: Any, phi: Any) -> sp.Matrix:
        """``(ad*_x phi)_g = c^a_bg x^b phi_a``, i.e. ``<ad*_x phi, xi> = <phi, [x, xi]>``."""
        N = self.dim
        xc, pc = as_column(x, "x", N), as_column(phi, "phi", N)
        c = self.structure
        return sp.Matrix(
            [
                sum((c[b, g, a] * xc[b] * pc[a] for a in range(N) for b in range(N)), sp.Integer(0))
                for g in range(N)
            ]
        )

    def _split(self, x: Any) -> tuple[sp.Matrix, sp.Matrix]:
        full = self.d_basis.row_join(self.complement)
        coef = full.LUsolve(as_column(x, "x", self.dim))
        m = self.d_basis.cols
        return self.d_basis * coef[:m, :], self.complement * coef[m:, :]

    def P(self, x: Any) -> sp.Matrix:
        """Projection ``P: h -> d`` along ``d'``."""
        return self._split(x)[0]

    def P_prime(self, x: Any) -> sp.Matrix:
        """Projection ``P': h -> d'`` along ``d``."""
        return self._split(x)[1]

    def annihilator(self, lam: Any) -> sp.Matrix:
        """The covector in ``Ann(d)`` with components ``lam`` on the basis of ``d'``."""
        k = self.complement.cols
        full = self.d_basis.row_join(self.complement)
        rhs = sp.zeros(self.d_basis.cols, 1).col_join(as_column(lam, "lam", k))
        return full.T.LUsolve(rhs)

    def total_derivative(self, f: Any, etadot: Any) -> sp.Expr:
        """``d/dt f(h, eta)`` with ``hdot = A(h) eta`` (5.1) and ``eta' = etadot``."""
        f = sp.sympify(f)
        ed = as_column(etadot, "etadot", self.dim)
        out = sum((sp.diff(f, e) * ed[i] for i, e in enumerate(self.eta)), sp.Integer(0))
        if self.group and self.frame is not None:
            hd = self.frame * sp.Matrix(self.eta)
            out += sum((sp.diff(f, s) * hd[i] for i, s in enumerate(self.group)), sp.Integer(0))
        return out


def left_invariant_constraint(
    structure: Any,
    d_basis: Any,
    complement: Any,
    lagrangian: Any,
    eta: Sequence[sp.Symbol],
    group: Sequence[sp.Symbol] = (),
    frame: Any = None,
) -> LeftInvariantConstraint:
    """The data ``d``, ``d'``, ``mu = dL/deta``, ``rho = h^*(dL/dh)`` of a Lie group system.

    Jóźwikowski & Respondek (2019), Sec. 5.

    Parameters
    ----------
    structure : sympy.NDimArray
        ``N x N x N`` structure constants ``c[b, c, a] = c^a_bc`` (e.g. from
        :func:`nhfast.symbolic.frames.anholonomity` of a left-invariant frame); checked for
        antisymmetry.
    d_basis, complement : sympy.Matrix
        Columns spanning ``d`` and a complement ``d'`` (together a basis of ``h``).
    lagrangian : sympy.Expr
        ``L(h, eta)``.
    eta : list of sympy.Symbol
        The ``N`` components of ``eta``.
    group : list of sympy.Symbol, optional
        Coordinates of ``H`` when ``L`` depends on ``h`` (needs ``frame``).
    frame : sympy.Matrix, optional
        The left-invariant frame ``A(h)`` (``N x N``) in the coordinates ``group``.

    Returns
    -------
    LeftInvariantConstraint

    Raises
    ------
    ValueError
        If shapes disagree, the structure constants are not antisymmetric, ``d + d'`` is not
        ``h``, or ``L`` depends on ``group`` without a ``frame``.
    """
    eta = as_symbol_list(eta, "eta")
    N = len(eta)
    c = sp.MutableDenseNDimArray(structure)
    if c.shape != (N, N, N):
        raise ValueError(f"structure must be {N} x {N} x {N}, got {c.shape}")
    for b in range(N):
        for e in range(N):
            for a in range(N):
                if sp.simplify(c[b, e, a] + c[e, b, a]) != 0:
                    raise ValueError(f"structure constants not antisymmetric at ({b}, {e}, {a})")
    D = as_matrix(d_basis, "d_basis")
    Dp = as_matrix(complement, "complement")
    if D.rows != N or Dp.rows != N or D.cols + Dp.cols != N:
        raise ValueError(f"d_basis and complement must be N x m and N x (N - m) with N = {N}")
    if sp.simplify(D.row_join(Dp).det()) == 0:
        raise ValueError("d_basis and complement do not span h")
    L = as_expr(lagrangian, "lagrangian")
    grp = as_symbol_list(group, "group", allow_empty=True)
    A = None if frame is None else as_matrix(frame, "frame")
    if grp and (A is None or A.shape != (N, N)):
        raise ValueError(f"a frame of shape {N} x {N} is needed when L depends on the group")
    mu = sp.Matrix([sp.diff(L, e) for e in eta])
    if grp and A is not None:
        dLh = sp.Matrix([sp.diff(L, s) for s in grp])
        rho = (A.T * dLh).applyfunc(sp.cancel)
    else:
        rho = sp.zeros(N, 1)
    return LeftInvariantConstraint(
        structure=c,
        d_basis=D,
        complement=Dp,
        eta=eta,
        group=grp,
        frame=A,
        lagrangian=L,
        mu=mu,
        rho=rho,
    )


def lie_generator_equation(data: LeftInvariantConstraint, a: Any, b: Any, bdot: Any) -> sp.Matrix:
    """``bdot + P'[eta, a] + P'[eta, b]`` in ``d'`` (``N`` components).

    Jóźwikowski & Respondek (2019), (5.3).

    ``xi = a + b`` (``a`` in ``d``, ``b`` in ``d'``) generates a vakonomic variation along
    ``eta(t)`` in ``d`` iff this vanishes (Prop. 5.2; splitting-free: ``xidot + [eta, xi]`` in
    ``d``).  ``eta`` is ``data.eta`` (substitute its values afterwards).
    """
    eta = sp.Matrix(data.eta)
    return (
        as_column(bdot, "bdot", data.dim)
        + data.P_prime(data.bracket(eta, a))
        + data.P_prime(data.bracket(eta, b))
    )


def lie_integral_criterion_integrands(
    data: LeftInvariantConstraint, a: Any, b: Any
) -> tuple[sp.Expr, sp.Expr]:
    """The two integrands of Jóźwikowski & Respondek (2019), Thm. 5.3(b) (5.6).

    Returns ``(<rho + ad*_eta P* mu, b>, <ad*_eta P'^* mu, a>)`` =
    ``(rho(b) + mu(P[eta, b]), mu(P'[eta, a]))``; an NH trajectory is vakonomic iff their
    integrals agree for all ``(a, b)`` vanishing at the ends and related by (5.3).
    """
    eta = sp.Matrix(data.eta)
    bc = as_column(b, "b", data.dim)
    lhs = (data.rho.T * bc)[0, 0] + (data.mu.T * data.P(data.bracket(eta, bc)))[0, 0]
    rhs = (data.mu.T * data.P_prime(data.bracket(eta, a)))[0, 0]
    return lhs, rhs


def _psi(data: LeftInvariantConstraint, etadot: Any, lam_h: sp.Matrix) -> sp.Matrix:
    """``rho - d/dt(mu) + ad*_eta (mu - lambda)`` (the covector of (5.5), (5.8), (5.9))."""
    mudot = sp.Matrix([data.total_derivative(e, etadot) for e in data.mu])
    return data.rho - mudot + data.ad_star(sp.Matrix(data.eta), data.mu - lam_h)


def euler_poincare_suslov(data: LeftInvariantConstraint, etadot: Any) -> sp.Matrix:
    """``<rho - mudot + ad*_eta mu, a_r> = 0`` on the basis ``a_r`` of ``d``.

    Jóźwikowski & Respondek (2019), Lemma 5.4 (5.8).

    Parameters
    ----------
    data : LeftInvariantConstraint
        The group data and the constraint subspace ``d`` (:func:`left_invariant_constraint`).
    etadot : sequence of sympy.Expr
        The body velocity's time derivative, in the basis of the algebra.

    Returns
    -------
    sympy.Matrix
        ``m`` entries; with ``eta`` in ``d`` these are the NH (Euler-Poincare-Suslov) equations.
    """
    psi = _psi(data, etadot, sp.zeros(data.dim, 1))
    return (data.d_basis.T * psi).applyfunc(sp.cancel)


def lie_vakonomic_equations(
    data: LeftInvariantConstraint, etadot: Any, lam: Any, lamdot: Any
) -> tuple[sp.Matrix, sp.Matrix]:
    """The vakonomic equations for ``L~ = L - <lambda, P' eta>``, ``lambda`` in ``Ann(d)``.

    Jóźwikowski & Respondek (2019), Lemma 5.4 (5.9), (5.10).

    Parameters
    ----------
    data : LeftInvariantConstraint
    etadot : sympy.Matrix
        ``N`` components of ``d eta/dt``.
    lam, lamdot : sympy.Matrix
        ``lambda`` and its derivative by their components on the basis of ``d'``.

    Returns
    -------
    (sympy.Matrix, sympy.Matrix)
        (5.9) ``<rho - mudot + ad*_eta (mu - lambda), a_r>`` (``m`` entries, basis of ``d``) and
        (5.10) ``<rho - d/dt(mu - lambda) + ad*_eta (mu - lambda), b_s>`` (``k`` entries, basis
        of ``d'``).
    """
    lam_h = data.annihilator(lam)
    lamd_h = data.annihilator(lamdot)
    psi = _psi(data, etadot, lam_h)
    e59 = (data.d_basis.T * psi).applyfunc(sp.cancel)
    e510 = (data.complement.T * (psi + lamd_h)).applyfunc(sp.cancel)
    return e59, e510
