"""The velocity of a rigid body from its momentum: a bordered low-rank solve in the algebra.

The velocity ``w`` of ``Omega = b ^ w`` is the solution in ``b^perp`` of ``K_b w = P_b m``,
with the reduced metric ``K_b w = -I(b ^ w) b`` split by the derivation into a diagonal part
and rank-one terms, ``K_b w = D o w + sum_r u_r (z_r . w)``.  On ``b^perp`` a term with
``z_r = b`` vanishes, and the part of any ``u_r`` along ``b`` only moves the multiplier of
the constraint ``b . w = 0``; so, with the kept terms ``r`` and one multiplier ``beta``,

    w = D^{-1} (m + beta b - sum_r alpha_r u_r),   alpha_r = z_r . w,   b . w = 0,

a linear system of ``R + 1`` unknowns whose entries are dot products.  They are formed in the
algebra of :mod:`nhfast.symbolic.rigid_body.algebra`, where ``D = sigma P`` with ``P`` a
product of parameter vectors gives ``D^{-1} = sigma^{-1} (~P)`` (parameter reciprocals, which
cancel against ``P`` in the dot products: for ``I(Om) = A Om A`` the entry ``(A b) .
D^{-1} (A b)`` is ``1`` exactly), so the system is solved by Cramer's rule in closed form and
simplified; any other ``D`` is the per-lane vector ``rb_iD = 1 / D``.  Terms of ``w`` that
vanish with the momentum constraint ``b . m`` are dropped when ``b . w = 0`` still holds
identically without them, which keeps ``|b|^2`` and ``b . m`` exact first integrals of the
field off the constraint manifold as on it.

The determinant of the reduced metric on ``b^perp`` follows from the same system:
``det(K_b|b^perp) = |det D| |det S| / |b|^2`` with ``S`` the system's matrix.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import sympy as sp

from nhfast.symbolic.rigid_body.algebra import DIM, Node, Scalars, VecPoly, inverse, leaf

__all__: list[str] = []

#: The name of the per-lane vector ``1 / D`` when ``D`` is not a scalar times parameters.
RECIPROCAL = "rb_iD"


@dataclass
class Velocity:
    """The solved velocity and what its lowering needs.

    Attributes
    ----------
    w : VecPoly
        The velocity, in the momentum ``m``, ``b``, the parameters and :data:`RECIPROCAL`.
    reciprocal : VecPoly or None
        ``D``, when ``w`` names :data:`RECIPROCAL` (``1 / D`` element-wise); else ``None``.
    log_det : sympy.Expr
        ``log det(K_b | b^perp)`` less the sum in :attr:`log_det_sum` (in reduction symbols and
        the dimension :data:`~nhfast.symbolic.rigid_body.algebra.DIM`).
    log_det_sum : VecPoly
        A vector whose ``sum_i log|.|`` completes :attr:`log_det`.
    rank : int
        Kept rank-one terms (the system has ``rank + 1`` unknowns).
    """

    w: VecPoly
    reciprocal: VecPoly | None
    log_det: sp.Expr
    log_det_sum: VecPoly
    rank: int


def _simplified(e: sp.Expr) -> sp.Expr:
    return sp.cancel(sp.together(e))


def kept_terms(b: str, rank: list[tuple[VecPoly, Node]]) -> list[tuple[VecPoly, Node]]:
    """The rank-one terms ``u_r z_r^T`` that act on ``b^perp`` modulo ``b``: terms with
    ``z_r = b`` dropped, and the part of each ``u_r`` along ``b``."""
    bn = leaf(b)
    kept: list[tuple[VecPoly, Node]] = []
    for u, z in rank:
        if z == bn:  # u (b . w) = 0 on b^perp
            continue
        u = VecPoly({k: c for k, c in u.terms.items() if k != bn})  # along b: the multiplier
        if u.terms:
            kept.append((u, z))
    return kept


def scales(diag: VecPoly) -> list[sp.Expr]:
    """Candidates for the ``scale`` of :func:`bordered_solve`: 1 and the coefficients of
    ``D``."""
    out = [sp.Integer(1)]
    for c in diag.terms.values():
        c = sp.sympify(c)
        if c not in out and c != 0:
            out.append(c)
    return out


def bordered_solve(
    b: str,
    diag: VecPoly,
    rank: list[tuple[VecPoly, Node]],
    scalars: Scalars,
    invertible: AbstractSet[str],
    scale: sp.Expr | int = 1,
) -> Velocity:
    """Solve ``K_b w = P_b m``, ``b . w = 0`` (see the module docstring).

    Parameters
    ----------
    b : str
        The constraint vector's name.
    diag : VecPoly
        ``D`` (the diagonal part of ``K_b``).
    rank : list of (VecPoly, Node)
        The terms ``u_r z_r^T``.
    scalars : Scalars
        The derivation's registry of dot products.
    invertible : set of str
        Parameter vectors that may be inverted element-wise.
    scale : sympy.Expr
        Where ``D`` is not a scalar times parameters: the per-lane reciprocal is that of
        ``D / scale`` (a scalar of ``D`` taken out, e.g. so that ``|b|^2 D^{-1}`` in the
        field is one reciprocal, without a product).

    Raises
    ------
    ValueError
        If ``D`` is zero or the system is singular for every state.
    """
    if not diag.terms:
        raise ValueError("the reduced metric has no diagonal part; not supported")
    bn = leaf(b)
    (p0, sigma), *more = diag.terms.items()
    monomial = not more and not p0.kids and set(p0.group) <= set(invertible)
    if monomial:
        inv = Node(tuple(inverse(nm) for nm in p0.group))

        def dinv(y: VecPoly) -> VecPoly:
            return y.times(inv).scaled(1 / sigma)

        log_det = DIM * sp.log(sp.Abs(sigma))
        log_sum = VecPoly.of(p0)
        reciprocal = None
    else:
        # D = scale * D~, 1/D~ the per-lane vector: the scale goes into the coefficients
        rec = leaf(RECIPROCAL)
        scale = sp.sympify(scale)

        def dinv(y: VecPoly) -> VecPoly:
            return y.times(rec).scaled(1 / scale)

        log_det = DIM * sp.log(sp.Abs(scale))
        reciprocal = VecPoly({k: _simplified(c / scale) for k, c in diag.terms.items()})
        log_sum = reciprocal
    kept = kept_terms(b, rank)
    size = len(kept) + 1
    mat = sp.zeros(size, size)
    rhs = sp.zeros(size, 1)
    f = VecPoly.of(leaf("m"))
    b_poly = VecPoly.of(bn)
    rows = [z for _, z in kept] + [bn]
    cols = [dinv(u) for u, _ in kept] + [dinv(b_poly)]
    df = dinv(f)
    for r, z in enumerate(rows):
        for q, col in enumerate(cols):
            entry = col.dot(z, scalars)
            # alpha_r + sum_q (z_r . D^-1 u_q) alpha_q - (z_r . D^-1 b) beta; last row b . w
            sign = -1 if q == size - 1 else 1
            mat[r, q] = sign * entry + (1 if (r == q and r < size - 1) else 0)
        rhs[r] = df.dot(z, scalars)
    det = _simplified(mat.det(method="berkowitz"))
    if det == 0:
        raise ValueError("the reduced metric's bordered system is singular")
    adj = mat.adjugate(method="berkowitz")
    sol = [_simplified((adj[q, :] * rhs)[0, 0] / det) for q in range(size)]
    alpha, beta = sol[:-1], sol[-1]
    inner = f + b_poly.scaled(beta)
    for (u, _), a in zip(kept, alpha, strict=True):
        inner = inner - u.scaled(a)
    w = dinv(inner)
    w = VecPoly({k: _simplified(c) for k, c in w.terms.items()}).cleaned()
    bm = scalars.of(leaf(b, "m"))
    if bm != 0:
        lean = w.subs({bm: 0})
        if lean.terms and _simplified(lean.dot(bn, scalars)) == 0:
            w = VecPoly({k: _simplified(c) for k, c in lean.terms.items()}).cleaned()
    r2b = scalars.of(leaf(b, b))
    log_det = log_det + sp.log(sp.Abs(det)) - sp.log(r2b)
    return Velocity(w, reciprocal, log_det, log_sum, len(kept))
