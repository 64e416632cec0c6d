"""Example library: vertical rolling disk, nonholonomic particle, Chaplygin sleigh, Veselova SO(n).

All coordinates are ``Symbol(name, real=True)`` and physical parameters ``positive=True`` (the
particle's coupling ``a`` is only ``real``).  A potential may be given as an expression in those
symbols or as a callable that receives the coordinate symbols (Veselova: the list ``gamma``).

Sources: seed 004 Section 3.1 (disk), Section 4.1 (particle), Section 4.2 (Veselova:
(4.5), (4.9)-(4.14)); seed 002 (disk, ``phi`` heading, ``theta`` rolling angle).

Chaplygin sleigh (not worked out in the seeds; seed 002 only names it).  Coordinates
``(x, y, theta)`` of the contact point and heading; the centre of mass is at distance ``b``
ahead of the contact point; constraint ``-sin(theta) xdot + cos(theta) ydot = 0``.  With
``G = R^2`` (all translations) it is *not* a G-Chaplygin system: ``rank D + dim G = 2 + 2 > 3``,
so ``T_qQ = D (+) g.q`` fails (``ChaplyginSystem`` raises).  With ``G = R`` (x-translations) the
splitting holds where ``sin(theta) != 0``; this local Chaplygin structure, with shape
``(y, theta)``, is what :func:`chaplygin_sleigh` returns.  What the mathematics then says
(computed here and tested): ``K = diag(m / sin^2 theta, I + m b^2)``,
``Theta = b m / ((I + m b^2) sin theta) dy + cot(theta) dtheta`` and
``d Theta = b m cos(theta) / ((I + m b^2) sin^2 theta) dy ^ dtheta != 0`` for ``b != 0``: no
basic invariant measure, and (``r = 2``, seed 004 Cor. 3.25) not phi-simple.  For ``b = 0``
``Theta = d ln(sin theta)`` is exact (phi-simple).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy as sp

from nhfast.symbolic import frames as _fr
from nhfast.symbolic._util import Simplifier, simplifier, sphere_normal, zeros3
from nhfast.symbolic.systems import ChaplyginSystem, NonholonomicSystem, ReducedChaplyginSystem

__all__ = [
    "vertical_rolling_disk",
    "nonholonomic_particle",
    "holonomic_particle",
    "chaplygin_sleigh",
    "veselova",
    "veselova_left_trivialised",
    "veselova_coordinates",
    "veselova_hemisphere_gamma",
]


def _pot(potential: Any, args: list) -> Any:
    if potential is None:
        return sp.Integer(0)
    if callable(potential) and not isinstance(potential, sp.Basic):
        return potential(*args)
    return potential


def vertical_rolling_disk(potential: Any = None) -> ChaplyginSystem:
    """Vertical rolling disk, seed 004 (3.7)-(3.8): ``Q = R^2 x T^2``, ``q = (x, y, phi, theta)``.

    ``L = 1/2 (m (xdot^2 + ydot^2) + I phidot^2 + J thetadot^2)``; constraints
    ``xdot = R cos(phi) thetadot``, ``ydot = R sin(phi) thetadot``; ``G = R^2`` translations,
    shape ``(phi, theta)``.

    Parameters
    ----------
    potential : sympy.Expr or callable, optional
        ``U(phi, theta)``.

    Returns
    -------
    ChaplyginSystem
        Parameters ``(m, R, I, J)``.
    """
    x, y, phi, th = sp.symbols("x y phi theta", real=True)
    m, R, I, J = sp.symbols("m R I J", positive=True)  # noqa: E741
    G = sp.diag(m, m, I, J)
    W = sp.Matrix([[1, 0, 0, -R * sp.cos(phi)], [0, 1, 0, -R * sp.sin(phi)]])
    return ChaplyginSystem(
        [x, y, phi, th],
        G,
        _pot(potential, [phi, th]),
        constraints=W,
        shape=[phi, th],
        group=[x, y],
        params=[m, R, I, J],
    )


def nonholonomic_particle(a: Any = None, potential: Any = None) -> ChaplyginSystem:
    """Nonholonomic particle of seed 004 Section 4.1.

    ``Q = R^3``, ``L = 1/2 (xdot^2 + ydot^2 + zdot^2) + a ydot zdot - U(x, y)``, constraint
    ``zdot = y xdot``; ``G = R`` (z-translations), shape ``(x, y)``.

    Parameters
    ----------
    a : sympy.Expr or number, optional
        Coupling (``|a| < 1``); default: the parameter symbol ``a``.
    potential : sympy.Expr or callable, optional
        ``U(x, y)``.

    Returns
    -------
    ChaplyginSystem
    """
    x, y, z = sp.symbols("x y z", real=True)
    params: list[sp.Symbol] = []
    if a is None:
        a = sp.Symbol("a", real=True)
        params.append(a)
    a = sp.sympify(a)
    G = sp.Matrix([[1, 0, 0], [0, 1, a], [0, a, 1]])
    W = sp.Matrix([[-y, 0, 1]])
    return ChaplyginSystem(
        [x, y, z], G, _pot(potential, [x, y]), constraints=W, shape=[x, y], group=[z], params=params
    )


def holonomic_particle(potential: Any = None) -> ChaplyginSystem:
    """Particle metric of Section 4.1 with the *integrable* constraint ``zdot = y xdot + x ydot``.

    ``D = ker d(z - x y)`` is integrable, so the gyroscopic tensor must vanish (seed 004
    Prop. 3.5).  Parameter ``a`` as in :func:`nonholonomic_particle`.

    Returns
    -------
    ChaplyginSystem
    """
    x, y, z = sp.symbols("x y z", real=True)
    a = sp.Symbol("a", real=True)
    G = sp.Matrix([[1, 0, 0], [0, 1, a], [0, a, 1]])
    W = sp.Matrix([[-y, -x, 1]])
    return ChaplyginSystem(
        [x, y, z], G, _pot(potential, [x, y]), constraints=W, shape=[x, y], group=[z], params=[a]
    )


def chaplygin_sleigh(as_chaplygin: bool = True, potential: Any = None) -> NonholonomicSystem:
    """Chaplygin sleigh: ``q = (x, y, theta)`` (contact point, heading), parameters ``(m, I, b)``.

    ``T = 1/2 m ((xdot - b sin(theta) thetadot)^2 + (ydot + b cos(theta) thetadot)^2)
    + 1/2 I thetadot^2`` (``I`` about the centre of mass), constraint
    ``-sin(theta) xdot + cos(theta) ydot = 0``.

    Parameters
    ----------
    as_chaplygin : bool, optional
        True: a :class:`ChaplyginSystem` with ``G`` = x-translations, shape ``(y, theta)``
        (valid where ``sin(theta) != 0``).  False: a plain :class:`NonholonomicSystem`.
    potential : sympy.Expr or callable, optional
        ``U(y, theta)`` (must not depend on ``x`` for the Chaplygin form).

    Returns
    -------
    NonholonomicSystem or ChaplyginSystem
    """
    x, y, th = sp.symbols("x y theta", real=True)
    m, I, b = sp.symbols("m I b", positive=True)  # noqa: E741
    G = sp.Matrix(
        [
            [m, 0, -m * b * sp.sin(th)],
            [0, m, m * b * sp.cos(th)],
            [-m * b * sp.sin(th), m * b * sp.cos(th), I + m * b**2],
        ]
    )
    W = sp.Matrix([[-sp.sin(th), sp.cos(th), 0]])
    U = _pot(potential, [y, th])
    if as_chaplygin:
        return ChaplyginSystem(
            [x, y, th], G, U, constraints=W, shape=[y, th], group=[x], params=[m, I, b]
        )
    return NonholonomicSystem([x, y, th], G, U, constraints=W, params=[m, I, b])


# ------------------------------------------------------------------------------------------
# Veselova on SO(n), seed 004 Section 4.2
# ------------------------------------------------------------------------------------------


def _veselova_symbols(n: int) -> tuple[list[sp.Symbol], list[sp.Symbol]]:
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if n < 3:
        raise ValueError(f"n must be >= 3 for the Veselova system, got {n}")
    s = list(sp.symbols(f"s1:{n}", real=True))
    a = list(sp.symbols(f"a1:{n + 1}", positive=True))
    return s, a


def veselova_hemisphere_gamma(s: list[sp.Symbol]) -> list[sp.Expr]:
    """``gamma(s)`` of the northern-hemisphere chart (4.9): ``gamma_n = sqrt(1 - |s|^2)``."""
    return [*s, sp.sqrt(1 - sum(si**2 for si in s))]


def veselova(n: int, potential: Any = None) -> ReducedChaplyginSystem:
    """Multi-dimensional Veselova system, ``I(u ^ v) = (Au) ^ (Av)``, reduced to ``T*S^{n-1}``.

    Closed forms of seed 004 in the hemisphere chart (4.9), with ``c = (A gamma, gamma)``:
    ``K_kl = c (a_l delta_kl + a_n gamma_k gamma_l / gamma_n^2)
    - gamma_k gamma_l (a_n - a_k)(a_n - a_l)``
    (4.12) and ``C^k_ij = (-gamma_j (a_j - a_n) delta_ik + gamma_i (a_i - a_n) delta_jk) / c``
    (4.14).  Valid on ``gamma_n > 0`` only.

    Parameters
    ----------
    n : int
        ``n >= 3``; shape space ``S^{n-1}``, ``r = n - 1``.
    potential : sympy.Expr or callable, optional
        ``U(gamma)``; a callable receives the list ``gamma`` (length ``n``).

    Returns
    -------
    ReducedChaplyginSystem
        ``s = (s1..s_{n-1})``, params ``(a1..an)``, ``extra["gamma"]``, ``extra["c"]`` and
        ``extra["domain"]`` (the chart's domain ``1 - |s|^2 > 0``, checked by ``integrate``).
    """
    s, a = _veselova_symbols(n)
    g = veselova_hemisphere_gamma(s)
    r = n - 1
    c = sum(a[k] * g[k] ** 2 for k in range(n))
    an, gn2 = a[-1], 1 - sum(si**2 for si in s)
    K = sp.Matrix(
        r,
        r,
        lambda k, l_: (
            c * (a[l_] * (1 if k == l_ else 0) + an * s[k] * s[l_] / gn2)
            - s[k] * s[l_] * (an - a[k]) * (an - a[l_])
        ),
    )
    C = zeros3(r, r, r)
    for i in range(r):
        for j in range(r):
            for k in range(r):
                C[i, j, k] = (
                    -s[j] * (a[j] - an) * (1 if i == k else 0)
                    + s[i] * (a[i] - an) * (1 if j == k else 0)
                ) / c
    U = _pot(potential, [g])
    domain = {"hemisphere chart: gamma_n > 0": 1 - sum(si**2 for si in s)}
    return ReducedChaplyginSystem(
        s=s,
        K=K,
        C=C,
        potential=U,
        params=a,
        name=f"veselova_{n}",
        extra={"gamma": g, "c": c, "domain": domain},
    )


def _wedge(u: sp.Matrix, v: sp.Matrix) -> sp.Matrix:
    return u * v.T - v * u.T


def _killing(x: sp.Matrix, y: sp.Matrix) -> sp.Expr:
    return -sp.Rational(1, 2) * (x * y).trace()


def veselova_left_trivialised(
    n: int, compute_C: bool | None = None, simplify: Simplifier = True
) -> ReducedChaplyginSystem:
    """Independent derivation of the Veselova reduced data from the Lie algebra.

    Uses only (4.3)-(4.5), (4.7)-(4.11) of seed 004: the horizontal lifts
    ``X_i = gamma ^ u_i``, ``u_i = e_i - (gamma_i/gamma_n) e_n`` in the left trivialisation, the
    bracket of left-trivialised fields ``[Y, Z] = YZ - ZY + Y[Z] - Z[Y]`` with
    ``Y[gamma] = -Y gamma`` (so ``Y[f(s)] = sum_k df/ds_k (-Y gamma)_k``), and the metric
    ``<<Y1, Y2>> = (A Y1 A, Y2)_kappa``, ``(x, y)_kappa = -1/2 tr(x y)``.  Lemma 4.5 and the
    closed forms (4.12)-(4.14) are *not* used, so comparing with :func:`veselova` tests them.

    Parameters
    ----------
    n : int
        ``n >= 3``.
    compute_C : bool, optional
        Solve ``C K = B`` (``LUsolve``) for ``C``; if False, ``C`` is left zero and only
        ``K`` and ``extra["B"]`` are meaningful.  Default: True for ``n = 3`` only (the exact
        symbolic solve is slow for ``n >= 4``; since ``K`` is invertible, checking
        ``C K = B`` for a candidate ``C`` is equivalent and cheap).
    simplify : bool or callable

    Returns
    -------
    ReducedChaplyginSystem
        With ``extra["B"]`` (``B[i, j, l] = <<[X_i, X_j], X_l>>``) and ``extra["brackets"]``.
    """
    s, a = _veselova_symbols(n)
    r = n - 1
    if compute_C is None:
        compute_C = n == 3
    gn = sp.Dummy("gamma_n", positive=True)  # gamma_n as a symbol; d gamma_n/ds_k = -s_k/gamma_n

    def simp(expr: sp.Expr) -> sp.Expr:
        if simplify is True:
            return sphere_normal(expr, s, gn)
        return simplifier(simplify)(expr)

    g = sp.Matrix([*s, gn])
    A = sp.diag(*a)
    e = [sp.eye(n)[:, i] for i in range(n)]
    u = [e[i] - g[i] / gn * e[n - 1] for i in range(r)]
    X = [_wedge(g, u[i]) for i in range(r)]

    def dds(Z: sp.Matrix, k: int) -> sp.Matrix:  # total derivative in s_k on the sphere
        return Z.diff(s[k]) + Z.diff(gn) * (-s[k] / gn)

    def deriv(Y: sp.Matrix, Z: sp.Matrix) -> sp.Matrix:  # Y[Z] with Y[gamma] = -Y gamma
        dg = -Y * g
        return sum((dds(Z, k) * dg[k] for k in range(r)), sp.zeros(n, n))

    def metric(Y1: sp.Matrix, Y2: sp.Matrix) -> sp.Expr:
        return _killing(A * Y1 * A, Y2)

    K = sp.Matrix(r, r, lambda k, l_: simp(metric(X[k], X[l_])))
    B = zeros3(r, r, r)
    brackets = {}
    for i in range(r):
        for j in range(i + 1, r):
            br = X[i] * X[j] - X[j] * X[i] + deriv(X[i], X[j]) - deriv(X[j], X[i])
            br = br.applyfunc(simp)
            brackets[(i, j)] = br
            for l_ in range(r):
                B[i, j, l_] = simp(metric(br, X[l_]))
                B[j, i, l_] = -B[i, j, l_]
    C = _fr.coefficients_from_pairings(K, B, simplify=simp) if compute_C else zeros3(r, r, r)
    root = sp.sqrt(1 - sum(si**2 for si in s))
    K = K.subs(gn, root)
    B = B.applyfunc(lambda x: sp.sympify(x).subs(gn, root))
    C = C.applyfunc(lambda x: sp.sympify(x).subs(gn, root))
    brackets = {key: val.subs(gn, root) for key, val in brackets.items()}
    return ReducedChaplyginSystem(
        s=s,
        K=K,
        C=C,
        params=a,
        name=f"veselova_lt_{n}",
        extra={"gamma": [*s, root], "B": B, "brackets": brackets},
    )


def _plane_rotation(n: int, i: int, j: int, c: sp.Expr, sn: sp.Expr) -> sp.Matrix:
    h = sp.eye(n)
    h[i, i] = h[j, j] = c
    h[i, j] = -sn
    h[j, i] = sn
    return h


class _SphereTrigNormal:
    """Normal form for rational functions of ``s``, ``gamma_n``, ``cos(alpha_i)``, ``sin(alpha_i)``.

    Uses ``gamma_n^2 = 1 - |s|^2`` and ``sin^2 + cos^2 = 1`` (a Groebner basis: leading terms in
    distinct variables), rationalising denominators in ``gamma_n``; trigonometric functions only
    occur in numerators here (``h`` is orthogonal, so ``h^{-1} = h^T``).
    """

    def __init__(self, s: list[sp.Symbol], alpha: list[sp.Symbol]) -> None:
        self.s, self.alpha = s, alpha
        self.gn = sp.Dummy("gn", positive=True)
        self.c = [sp.Dummy(f"c{i}") for i in range(len(alpha))]
        self.sn = [sp.Dummy(f"sn{i}") for i in range(len(alpha))]
        self.base = sp.expand(1 - sum(si**2 for si in s))

    def to_poly_vars(self, e: sp.Expr) -> sp.Expr:
        from nhfast.symbolic._util import sqrt_to_symbol

        e = sqrt_to_symbol(e, self.s, self.gn)
        rep = {}
        for a, c, sn in zip(self.alpha, self.c, self.sn, strict=True):
            rep[sp.cos(a)] = c
            rep[sp.sin(a)] = sn
        return e.xreplace(rep)

    def from_poly_vars(self, e: sp.Expr) -> sp.Expr:
        rep = {self.gn: sp.sqrt(self.base)}
        for a, c, sn in zip(self.alpha, self.c, self.sn, strict=True):
            rep[c] = sp.cos(a)
            rep[sn] = sp.sin(a)
        return e.xreplace(rep)

    def normal(self, e: sp.Expr) -> sp.Expr:
        g = self.gn
        rel = g**2 - self.base
        num, den = sp.fraction(sp.cancel(sp.together(e)))

        def red(p: sp.Expr) -> sp.Expr:
            p = sp.rem(sp.expand(p), rel, g)
            for c, sn in zip(self.c, self.sn, strict=True):
                p = sp.rem(sp.expand(p), sn**2 + c**2 - 1, sn)
            return sp.expand(p)

        num, den = red(num), red(den)
        d1 = den.coeff(g, 1)
        if d1 != 0:
            d0 = den.coeff(g, 0)
            num = red(num * (d0 - d1 * g))
            den = red(d0**2 - d1**2 * self.base)
        return sp.cancel(num / den)

    def __call__(self, e: Any) -> sp.Expr:
        return self.from_poly_vars(self.normal(self.to_poly_vars(sp.sympify(e))))


def veselova_coordinates(
    n: int = 3, potential: Callable[[list], Any] | None = None
) -> ChaplyginSystem:
    """Unreduced Veselova system on ``SO(n)`` in honest coordinates, as a :class:`ChaplyginSystem`.

    ``g = h(alpha) sigma(s)``: ``h`` a product of plane rotations of ``SO(n-1)`` (one angle per
    plane ``(i, j)``, ``i < j < n``), ``sigma(s) = R(gamma(s))^T`` with ``R`` the rotation in the
    ``(e_n, gamma)`` plane taking ``e_n`` to ``gamma`` (so ``g^{-1} e_n = gamma``).  Metric
    ``G_ab = (A Omega_a A, Omega_b)_kappa`` with ``Omega_a = g^{-1} d_a g`` (4.3)-(4.5);
    constraints ``omega_ij = ((d_a g) g^{-1})_ij qdot^a = 0``, ``i < j < n`` (4.7).  Reducing
    this system is an independent derivation of K and C.  For ``n >= 4`` (non-abelian
    ``SO(n-1)``) pass ``at={alpha_i: 0}`` to :meth:`ChaplyginSystem.reduce`; the symbolic cost
    grows quickly with ``n`` (``n = 3`` takes seconds).

    Parameters
    ----------
    n : int
    potential : callable, optional
        ``U(gamma)``.

    Returns
    -------
    ChaplyginSystem
        ``q = alpha + s``, shape ``s``, group ``alpha``; its ``simplify`` is a normal form for
        rational functions of ``s``, ``gamma_n`` and ``cos/sin(alpha)``.
    """
    s, a = _veselova_symbols(n)
    planes = [(i, j) for i in range(n - 1) for j in range(i + 1, n - 1)]
    alpha = list(sp.symbols(f"alpha1:{len(planes) + 1}", real=True))
    nf = _SphereTrigNormal(s, alpha)
    gn = nf.gn
    gam = sp.Matrix([*s, gn])
    en = sp.eye(n)[:, n - 1]
    Km = gam * en.T - en * gam.T
    Rg = sp.eye(n) + Km + Km * Km / (1 + gn)
    sigma = Rg.applyfunc(nf.normal).T
    h = sp.eye(n)
    for (i, j), c, sn in zip(planes, nf.c, nf.sn, strict=True):
        h = h * _plane_rotation(n, i, j, c, sn)
    gmat = h * sigma

    def d(mat: sp.Matrix, qa: sp.Symbol) -> sp.Matrix:
        if qa in s:
            return mat.diff(qa) + mat.diff(gn) * (-qa / gn)
        k = alpha.index(qa)
        c, sn = nf.c[k], nf.sn[k]
        return mat.diff(c) * (-sn) + mat.diff(sn) * c

    q = [*alpha, *s]
    A = sp.diag(*a)
    ginv = gmat.T
    dg = [d(gmat, qa) for qa in q]
    omegas = [(ginv * x).applyfunc(nf.normal) for x in dg]
    N = len(q)
    G = sp.Matrix(N, N, lambda i, j: nf.normal(_killing(A * omegas[i] * A, omegas[j])))
    W = sp.Matrix([[nf.normal((x * ginv)[i, j]) for x in dg] for (i, j) in planes])
    G = G.applyfunc(nf.from_poly_vars)
    W = W.applyfunc(nf.from_poly_vars)
    U = _pot(potential, [[*s, sp.sqrt(nf.base)]])
    return ChaplyginSystem(q, G, U, constraints=W, shape=s, group=alpha, params=a, simplify=nf)
