"""The unreduced Veselova system on SO(n): Lagrange-d'Alembert with a multiplier, in coordinates.

Nothing of the Chaplygin reduction is used, so both forms are independent references for the
reduced data (García-Naranjo & Marrero 2020, Section 4.2, (4.3)-(4.8)):
:func:`unreduced_field` integrates ``(g, Omega)`` on ``SO(n) x so(n)``;
:func:`coordinate_system` writes the system in coordinates of ``SO(n)`` as a
:class:`~nhfast.symbolic.systems.ChaplyginSystem`.  Maps to and from the embedded states follow.

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited".
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp

from nhfast.symbolic._util import sqrt_to_symbol
from nhfast.symbolic.systems import ChaplyginSystem
from nhfast.systems._common import Potential, potential_expr
from nhfast.systems.veselova_body.embedded import embedded_momentum, embedded_velocity
from nhfast.systems.veselova_body.formulas import (
    chart_symbols,
    check_dimension,
    inertia_symbols,
    killing,
)
from nhfast.vectorfield import LinearSolve, VectorField

__all__ = [
    "embedded_to_unreduced",
]


def omega_pairs(n: int) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, of the ``Omega`` states of :func:`unreduced_field`."""
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def unreduced_field(n: int, potential: Potential = None) -> VectorField:
    """Unreduced Veselova system on ``SO(n) x so(n)`` (Lagrange-d'Alembert with a multiplier).

    States: the entries of ``g`` (row-major, ``n*n``) and ``Omega_ij``, ``i < j`` (order of
    :func:`omega_pairs`).  Equations ((4.3)-(4.7); Euler-Poincare-Suslov)::

        gdot = g Omega,
        I Omegadot = [I Omega, Omega] + grad U(gamma) ^ gamma + lambda,   gamma = g^T e_n,
        lambda = sum_{i<j<n} Lambda_ij g^T (e_i ^ e_j) g      (reaction, annihilates D),
        (g Omegadot g^T)_ij = 0,  i < j < n                     (derivative of (4.7)).

    With ``I Omega = A Omega A`` diagonal in the basis ``e_k ^ e_l`` (entries ``a_k a_l``), the
    multipliers solve the SPD Schur system ``L^T I^{-1} L Lambda = -L^T I^{-1} rhs`` of size
    ``(n-1)(n-2)/2``, a :class:`LinearSolve` (solved numerically in the kernels).  Nothing of the
    Chaplygin reduction is used, so this is an independent reference.

    Parameters
    ----------
    n : int
        ``3 <= n <= 6`` (the symbolic size grows like ``n^4``).
    potential : callable or sympy.Expr, optional
        ``U(gamma)``; a callable receives a list of ``n`` symbols standing for ``gamma``.

    Returns
    -------
    VectorField
        Params ``(a1..an)``; observables ``energy`` (``1/2 (I Omega, Omega)_kappa + U``),
        ``constraint`` (``sum_{i<j<n} omega_ij^2``, ``omega = g Omega g^T``) and
        ``orthogonality`` (``|g^T g - 1|_F^2``).
    """
    n = check_dimension(n, hi=6)
    a = inertia_symbols(n)
    G = sp.Matrix(n, n, lambda i, j: sp.Symbol(f"g{i + 1}_{j + 1}", real=True))
    pairs = omega_pairs(n)
    om = {p: sp.Symbol(f"Omega{p[0] + 1}_{p[1] + 1}", real=True) for p in pairs}
    W = sp.zeros(n, n)
    for (i, j), sym in om.items():
        W[i, j] = sym
        W[j, i] = -sym
    A = sp.diag(*a)
    gam = [G[n - 1, k] for k in range(n)]
    gsym = [sp.Dummy(f"gamma{k + 1}") for k in range(n)]
    U0 = potential_expr(potential, [gsym])
    back = dict(zip(gsym, gam, strict=True))
    U = U0.xreplace(back)
    dU = sp.Matrix([sp.diff(U0, gs).xreplace(back) for gs in gsym])
    gv = sp.Matrix(gam)
    IW = A * W * A
    F = IW * W - W * IW + dU * gv.T - gv * dU.T  # [I Omega, Omega] + grad U ^ gamma
    inertia = {p: a[p[0]] * a[p[1]] for p in pairs}
    mult = [(i, j) for (i, j) in pairs if j < n - 1]
    Lam = [sp.Symbol(f"Lambda{i + 1}_{j + 1}", real=True) for (i, j) in mult]
    rows = [G.row(i).T for i in range(n)]

    def wedge_entry(u: sp.Matrix, w: sp.Matrix, k: int, l_: int) -> sp.Expr:
        return u[k] * w[l_] - w[k] * u[l_]

    # L[(k,l), alpha] = (r_i ^ r_j)_kl for alpha = (i, j): the body-frame reaction directions
    L = {(p, al): wedge_entry(rows[al[0]], rows[al[1]], *p) for p in pairs for al in mult}
    nm = len(mult)
    S = sp.Matrix(
        nm,
        nm,
        lambda x, y: sp.Add(*[L[(p, mult[x])] * L[(p, mult[y])] / inertia[p] for p in pairs]),
    )
    b = [-sp.Add(*[L[(p, al)] * F[p] / inertia[p] for p in pairs]) for al in mult]
    Wdot = {
        p: (F[p] + sp.Add(*[L[(p, al)] * lam for al, lam in zip(mult, Lam, strict=True)]))
        / inertia[p]
        for p in pairs
    }
    Gdot = G * W
    omega = G * W * G.T
    energy = sp.Rational(1, 2) * sp.Add(*[inertia[p] * om[p] ** 2 for p in pairs]) + U
    ortho = G.T * G - sp.eye(n)
    obs = {
        "energy": energy,
        "constraint": sp.Add(*[omega[i, j] ** 2 for (i, j) in mult]),
        "orthogonality": sp.Add(*[e**2 for e in ortho]),
    }
    return VectorField(
        states=[*G, *[om[p] for p in pairs]],
        rhs=[*Gdot, *[Wdot[p] for p in pairs]],
        params=a,
        observables=obs,
        solves=[LinearSolve(unknowns=Lam, matrix=S, rhs=b, spd=True)],
        name=f"veselova_unreduced_{n}",
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


def coordinate_system(n: int = 3, potential: Potential = None) -> ChaplyginSystem:
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
    check_dimension(n)
    s, a = chart_symbols(n), inertia_symbols(n)
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
    G = sp.Matrix(N, N, lambda i, j: nf.normal(killing(A * omegas[i] * A, omegas[j])))
    W = sp.Matrix([[nf.normal((x * ginv)[i, j]) for x in dg] for (i, j) in planes])
    G = G.applyfunc(nf.from_poly_vars)
    W = W.applyfunc(nf.from_poly_vars)
    U = potential_expr(potential, [[*s, sp.sqrt(nf.base)]])
    return ChaplyginSystem(q, G, U, constraints=W, shape=s, group=alpha, params=a, simplify=nf)


# ------------------------------------------------------------------------------------------
# maps from and to the embedded states (NumPy, vectorised over leading axes)
# ------------------------------------------------------------------------------------------


def _frame_with_last_row(gamma: np.ndarray) -> np.ndarray:
    """A rotation ``g`` with last row ``gamma`` (a signed Householder reflection)."""
    n = gamma.shape[-1]
    en = np.zeros(n)
    en[-1] = 1.0
    if gamma[-1] <= 0:
        u = gamma - en  # H e_n = gamma
        flip = np.ones(n)
        flip[0] = -1.0
    else:
        u = gamma + en  # H e_n = -gamma
        flip = np.ones(n)
        flip[-1] = -1.0
    H = np.eye(n) - 2.0 * np.outer(u, u) / (u @ u)
    return flip[:, None] * H


def embedded_to_unreduced(gamma: np.ndarray, m: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Initial states of :func:`unreduced_field` from embedded ``(gamma, m)``.

    ``g`` is a rotation with ``g^{-1} e_n = gamma`` (4.8) (any one: the system is
    ``SO(n-1)``-invariant); ``Omega = gamma ^ v`` with ``v = gammadot`` (Prop. 4.4).

    Parameters
    ----------
    gamma, m : ndarray, shape (..., n)
    a : ndarray, shape (n,) or (..., n)

    Returns
    -------
    ndarray, shape (..., n*n + n(n-1)/2)
    """
    gamma = np.asarray(gamma, dtype=float)
    m = np.asarray(m, dtype=float)
    n = gamma.shape[-1]
    v = embedded_velocity(gamma, m, a)
    lead = gamma.shape[:-1]
    gf = gamma.reshape(-1, n)
    vf = np.broadcast_to(v, gamma.shape).reshape(-1, n)
    pairs = omega_pairs(n)
    out = np.empty((gf.shape[0], n * n + len(pairs)))
    for r in range(gf.shape[0]):
        g = _frame_with_last_row(gf[r])
        W = np.outer(gf[r], vf[r]) - np.outer(vf[r], gf[r])
        out[r, : n * n] = g.ravel()
        out[r, n * n :] = [W[i, j] for (i, j) in pairs]
    return out.reshape(*lead, out.shape[-1])


def _split_unreduced(x: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=float)
    pairs = omega_pairs(n)
    if x.shape[-1] != n * n + len(pairs):
        raise ValueError(f"x must have shape (..., {n * n + len(pairs)}), got {x.shape}")
    g = x[..., : n * n].reshape(*x.shape[:-1], n, n)
    W = np.zeros((*x.shape[:-1], n, n))
    for k, (i, j) in enumerate(pairs):
        W[..., i, j] = x[..., n * n + k]
        W[..., j, i] = -x[..., n * n + k]
    return g, W


def unreduced_to_gamma(x: np.ndarray, n: int) -> np.ndarray:
    """``gamma = g^{-1} e_n = g^T e_n``: the last row of ``g`` ((4.8))."""
    g, _ = _split_unreduced(x, n)
    return g[..., n - 1, :]


def unreduced_to_embedded(x: np.ndarray, n: int, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(gamma, m)`` from unreduced states: ``gamma = g^T e_n``, ``v = gammadot = -Omega gamma``,
    ``m`` by :func:`embedded_momentum`.
    """
    g, W = _split_unreduced(x, n)
    gamma = g[..., n - 1, :]
    v = -np.einsum("...ij,...j->...i", W, gamma)
    return gamma, embedded_momentum(gamma, v, a)
