"""Chart-free and unreduced forms of the multi-dimensional Veselova system (seed 004 Section 4.2).

Setting (seed 004 (4.3)-(4.8)): ``Q = SO(n)``, body angular velocity ``Omega = g^{-1} gdot``,
Killing metric ``(xi, eta)_kappa = -1/2 tr(xi eta)``, inertia ``I(u ^ v) = (Au) ^ (Av)``
(``I Omega = A Omega A``, ``A = diag(a_1..a_n)``), constraint ``omega_ij = 0`` for
``i, j < n`` with ``omega = gdot g^{-1}`` (4.7), shape map ``gamma = g^{-1} e_n`` (the last
*row* of ``g``, (4.8)); ``U = U(gamma)``.  Write ``c = (A gamma, gamma)``.

Three numerical descriptions are provided here (the hemisphere chart itself is
:func:`nhfast.systems.examples.veselova`):

* :func:`veselova_embedded` -- ``T*S^{n-1}`` embedded in ``R^{2n}`` with states
  ``(gamma, m)``, ``|gamma| = 1``, ``gamma . m = 0``.  ``m`` is the covector ``p`` written as a
  vector of ``gamma^perp`` (round metric): ``p_k = m . d gamma/d s_k``.  Since this is the
  cotangent lift of the chart, ``ds dp`` is the Liouville volume of ``T*S^{n-1}`` and the
  seed's density ``c^{(2-n)/2}`` (Theorem 4.3, Theorem 3.21(ii)) applies verbatim.
* :func:`veselova_unreduced` -- ``(g, Omega)`` on ``SO(n) x so(n)`` with a Lagrange multiplier
  (Lagrange-d'Alembert), for any ``n`` but meant for ``n <= 5``.
* maps between the forms: :func:`chart_to_embedded`, :func:`embedded_to_chart`,
  :func:`embedded_velocity`, :func:`embedded_momentum`, :func:`embedded_to_unreduced`,
  :func:`unreduced_to_gamma`, :func:`unreduced_to_embedded`.

Derivation of the embedded equations (derived here, not printed in the seed; checked in
``tests/symbolic/test_veselova_forms.py`` against the chart equations (3.17) with (4.12),
(4.14) and against the unreduced form).  The Hamiltonian is ``H = (A^{-1} m, m)/(2c) + U``
(on the constraint manifold it equals the chart ``N/(2c) + U`` of the digest, Section 4.3(a),
with ``m_k = p_k - s_k (s.p)``, ``m_n = -(s.p) gamma_n``).  The Dirac bracket of
``T*S^{n-1} = {|gamma|^2 = 1, gamma.m = 0}`` gives the Hamiltonian part and the gyroscopic
force of the phi-simple system, ``F = -p <dphi, sdot> + dphi <p, sdot>`` with
``phi = -1/2 ln c`` (Theorem 4.3), is added as the covector ``P_gamma F`` in the ``m``
equation.  Almost everything cancels and::

    gammadot = v := P_gamma A^{-1} m / c,       mdot = -(m . v) gamma - P_gamma grad U(gamma),

with ``P_gamma x = x - (gamma.x) gamma/|gamma|^2``.  (The velocity is ``v``; conversely
``m = c A v - (A gamma, v) A gamma``; no linear solve is needed for any ``n``.)  Off the
constraint manifold the field is extended so that ``|gamma|^2`` and ``gamma . m`` are *exact*
first integrals (``gamma . v = 0`` identically, and ``gamma . mdot = -m . v``); this choice
matters for the density below.

Invariant density in the embedded coordinates.  Let ``F1 = |gamma|^2 - 1``,
``F2 = gamma . m`` and ``M = {F1 = F2 = 0}``.  At points of ``M`` the Lebesgue volume of
``R^{2n}`` factors as ``dgamma dm = 1/2 mu_L ^ dF1 ^ dF2``, where ``mu_L`` is the Liouville
volume of ``T*S^{n-1}`` (an orthonormal basis ``w_i`` of ``gamma^perp`` gives the symplectic
basis ``(w_i, -(m.w_i) gamma)``, ``(0, w_i)`` of ``TM``; with the normals ``(gamma, 0)``,
``(0, gamma)`` it has determinant 1, and ``dF1 ^ dF2`` evaluates to 2 on the normals).  Because
the extended field preserves ``F1`` and ``F2`` exactly, ``L_X (dF1 ^ dF2) = d(X F1) ^ dF2 + ...
= 0``, so on ``M``: ``div_{dgamma dm}(rho X) = div_{mu_L}(rho X)`` for any ``rho``.  The chart
map ``(s, p) -> (gamma, m)`` is the cotangent lift of the chart, hence maps ``ds dp`` to
``mu_L``; so the seed's ``rho = c^{(2-n)/2}`` is invariant and the *ambient* divergence
identity ``div(rho X) = 0`` holds at every point of ``M`` -- including ``gamma_n <= 0`` where
the chart does not exist.  (For a velocity description ``(gamma, v)`` the density w.r.t. the
round measure would be ``c^{(n-2)/2}`` instead (digest 4.3(b)); and a different extension of
the field off ``M`` would add ``tr`` of the normal linearisation to the ambient divergence.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import sympy as sp

from nhfast.vectorfield import LinearSolve, VectorField

__all__ = [
    "veselova_embedded",
    "veselova_unreduced",
    "omega_pairs",
    "chart_to_embedded",
    "embedded_to_chart",
    "embedded_velocity",
    "embedded_momentum",
    "embedded_to_unreduced",
    "unreduced_to_gamma",
    "unreduced_to_embedded",
]

Potential = Callable[[list], Any] | sp.Expr | None


def _check_n(n: Any, hi: int | None = None) -> int:
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if n < 3:
        raise ValueError(f"n must be >= 3 for the Veselova system, got {n}")
    if hi is not None and n > hi:
        raise ValueError(f"n must be <= {hi} here, got {n}")
    return n


def _params(n: int) -> list[sp.Symbol]:
    # same symbols as nhfast.systems.examples.veselova, so parameter vectors are shared
    return list(sp.symbols(f"a1:{n + 1}", positive=True))


def _potential(potential: Potential, gamma: list[sp.Symbol]) -> sp.Expr:
    if potential is None:
        return sp.Integer(0)
    if callable(potential) and not isinstance(potential, sp.Basic):
        return sp.sympify(potential(list(gamma)))
    return sp.sympify(potential)


def veselova_embedded(n: int, potential: Potential = None) -> VectorField:
    """Veselova system on ``T*S^{n-1}`` embedded in ``R^{2n}``, valid on the whole sphere.

    States ``(gamma_1..gamma_n, m_1..m_n)`` with ``|gamma| = 1`` and ``gamma . m = 0``;
    ``m`` is the momentum covector as a vector of ``gamma^perp`` (``p_k = m . u_k``,
    ``u_k = d gamma/d s_k``).  Equations (see the module docstring for the derivation)::

        gammadot = P_gamma A^{-1} m / c,
        mdot     = -(m . gammadot) gamma - P_gamma grad U,
        P_gamma x = x - (gamma . x) gamma / |gamma|^2,    c = (A gamma, gamma).

    All expressions are ``O(n)`` (after common subexpressions); no linear solve is needed.

    Parameters
    ----------
    n : int
        ``n >= 3``.
    potential : callable or sympy.Expr, optional
        ``U(gamma)``; a callable receives the list of ``gamma`` symbols.

    Returns
    -------
    VectorField
        Params ``(a1..an)`` (as in :func:`nhfast.systems.examples.veselova`); observables
        ``energy`` (``(A^{-1} m, m)/(2c) + U``), ``gamma_norm`` (``gamma . gamma``),
        ``momentum_constraint`` (``gamma . m``) and ``log_density``
        (``(2-n)/2 ln c``: the log of the invariant density with respect to the Liouville
        volume of ``T*S^{n-1}``, equivalently ``ds dp`` in any chart, and -- on the
        constraint manifold -- with respect to Lebesgue ``dgamma dm`` for *this* extension of
        the field; see the module docstring).

    See Also
    --------
    nhfast.systems.veselova_body.structured.veselova_structured : the same field with looped
        (``O(n)``-size) generated code, for large ``n``.
    """
    n = _check_n(n)
    gam = list(sp.symbols(f"gamma1:{n + 1}", real=True))
    m = list(sp.symbols(f"m1:{n + 1}", real=True))
    a = _params(n)
    U = _potential(potential, gam)
    c = sp.Add(*[a[k] * gam[k] ** 2 for k in range(n)])
    r2 = sp.Add(*[g**2 for g in gam])
    w = [m[k] / a[k] for k in range(n)]  # A^{-1} m
    gw = sp.Add(*[gam[k] * w[k] for k in range(n)])
    v = [(w[k] - gw / r2 * gam[k]) / c for k in range(n)]
    mv = sp.Add(*[m[k] * v[k] for k in range(n)])
    dU = [sp.diff(U, g) for g in gam]
    gdU = sp.Add(*[gam[k] * dU[k] for k in range(n)])
    mdot = [-mv / r2 * gam[k] - (dU[k] - gdU / r2 * gam[k]) for k in range(n)]
    energy = sp.Add(*[m[k] * w[k] for k in range(n)]) / (2 * c) + U
    obs = {
        "energy": energy,
        "gamma_norm": r2,
        "momentum_constraint": sp.Add(*[gam[k] * m[k] for k in range(n)]),
        "log_density": sp.Rational(2 - n, 2) * sp.log(c),
    }
    return VectorField(
        states=[*gam, *m],
        rhs=[*v, *mdot],
        params=a,
        observables=obs,
        name=f"veselova_embedded_{n}",
    )


def omega_pairs(n: int) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, of the ``Omega`` states of :func:`veselova_unreduced`."""
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def veselova_unreduced(n: int, potential: Potential = None) -> VectorField:
    """Unreduced Veselova system on ``SO(n) x so(n)`` (Lagrange-d'Alembert with a multiplier).

    States: the entries of ``g`` (row-major, ``n*n``) and ``Omega_ij``, ``i < j`` (order of
    :func:`omega_pairs`).  Equations (seed 004 (4.3)-(4.7); Euler-Poincare-Suslov)::

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
    n = _check_n(n, hi=6)
    a = _params(n)
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
    U0 = _potential(potential, gsym)
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


# ------------------------------------------------------------------------------------------
# maps between the forms (NumPy, vectorised over leading axes)
# ------------------------------------------------------------------------------------------


def chart_to_embedded(s: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hemisphere chart (4.9) ``(s, p)`` to the embedded ``(gamma, m)``.

    ``gamma = (s, sqrt(1 - |s|^2))``; ``m`` is the unique vector with ``m . gamma = 0`` and
    ``m . u_k = p_k`` (``u_k = e_k - (gamma_k/gamma_n) e_n``, (4.10)):
    ``m_k = p_k - s_k (s.p)``, ``m_n = -(s.p) gamma_n``.

    Parameters
    ----------
    s, p : ndarray, shape (..., n-1)

    Returns
    -------
    gamma, m : ndarray, shape (..., n)
    """
    s = np.asarray(s, dtype=float)
    p = np.asarray(p, dtype=float)
    gn = np.sqrt(1.0 - np.sum(s**2, axis=-1))
    sp_ = np.sum(s * p, axis=-1)
    gamma = np.concatenate([s, gn[..., None]], axis=-1)
    m = np.concatenate([p - s * sp_[..., None], (-sp_ * gn)[..., None]], axis=-1)
    return gamma, m


def embedded_to_chart(gamma: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`chart_to_embedded`: ``s = gamma_{1..n-1}``,
    ``p_k = m_k - gamma_k m_n / gamma_n`` (requires ``gamma_n > 0``).

    Raises
    ------
    ValueError
        If some ``gamma_n <= 0`` (outside the northern-hemisphere chart).
    """
    gamma = np.asarray(gamma, dtype=float)
    m = np.asarray(m, dtype=float)
    gn = gamma[..., -1]
    if np.any(gn <= 0):
        raise ValueError("gamma_n <= 0: the point is outside the northern-hemisphere chart")
    s = gamma[..., :-1]
    p = m[..., :-1] - s * (m[..., -1] / gn)[..., None]
    return s, p


def embedded_velocity(gamma: np.ndarray, m: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``v = gammadot = P_gamma A^{-1} m / (A gamma, gamma)``."""
    gamma, m, a = (np.asarray(x, dtype=float) for x in (gamma, m, a))
    c = np.sum(a * gamma**2, axis=-1)[..., None]
    w = m / a
    gw = np.sum(gamma * w, axis=-1)[..., None]
    r2 = np.sum(gamma**2, axis=-1)[..., None]
    return (w - gw / r2 * gamma) / c


def embedded_momentum(gamma: np.ndarray, v: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``m = c A v - (A gamma, v) A gamma`` (inverse of :func:`embedded_velocity` on ``M``).

    This is ``m = -I(gamma ^ v) gamma`` for ``Omega = gamma ^ v``: the Legendre map
    ``p_k = <<gamma ^ v, X_k>> = m . u_k`` with the lifts ``X_k = gamma ^ u_k`` (4.11).
    """
    gamma, v, a = (np.asarray(x, dtype=float) for x in (gamma, v, a))
    c = np.sum(a * gamma**2, axis=-1)[..., None]
    agv = np.sum(a * gamma * v, axis=-1)[..., None]
    return c * a * v - agv * a * gamma


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
    """Initial states of :func:`veselova_unreduced` from embedded ``(gamma, m)``.

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
    """``gamma = g^{-1} e_n = g^T e_n``: the last row of ``g`` (seed 004 (4.8))."""
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
