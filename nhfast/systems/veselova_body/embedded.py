"""The Veselova system on the whole sphere: ``T*S^{n-1}`` embedded in ``R^{2n}``.

States ``(gamma, m)`` with ``|gamma| = 1``, ``gamma . m = 0``; ``m`` is the momentum covector
written as a vector of ``gamma^perp``.  With ``c = (A gamma, gamma)``, ``w = A^{-1} m`` and
``P_gamma x = x - (gamma . x) gamma / |gamma|^2``, on the constraint manifold::

    gammadot = v := P_gamma w / c,      mdot = -(m . v) gamma - P_gamma grad U(gamma)

No program is written by hand here: :func:`structured_program` has the matrix-level rigid-body
engine (:class:`~nhfast.symbolic.rigid_body.RigidBody`, ``I(Om) = A Om A``, space-fixed
constraint) derive it and adds the observables :data:`VESELOVA_OBSERVABLES`.
:func:`structured_field` compiles that program with looped kernels, :func:`unrolled_field`
unrolls it into SymPy expressions.  The rest are NumPy maps: chart to embedding and back,
velocity and momentum, splitting and joining states, projection onto the constraints.

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited".
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from nhfast.codegen.structured import IndexedProgram
from nhfast.structured_field import StructuredVectorField
from nhfast.symbolic import rigid_body as rb
from nhfast.systems._common import Potential, potential_expr
from nhfast.systems.inertia import named_inertia
from nhfast.systems.veselova_body.formulas import (
    check_dimension,
    embedded_symbols,
    inertia_quadratic,
    inertia_symbols,
    log_density,
)
from nhfast.vectorfield import VectorField

__all__ = [
    "chart_to_embedded",
    "embedded_to_chart",
    "project_to_constraints",
]

#: Observables of :func:`structured_field`, in order (:func:`unrolled_field` has the first
#: four).
VESELOVA_OBSERVABLES = (
    "energy",
    "gamma_norm",
    "momentum_constraint",
    "log_density",
    "sphere_defect",
)


def structured_program(n: int, potential: Potential = None) -> IndexedProgram:
    """The whole-sphere Veselova equations derived by the matrix-level engine.

    :class:`~nhfast.symbolic.rigid_body.RigidBody` with the inertia ``I(Om) = A Om A`` of
    García-Naranjo & Marrero (2020), (4.5), and the space-fixed constraint derives
    ``gammadot = |gamma|^2 v`` and
    ``mdot = -(m . v) gamma - |gamma|^2 P_gamma grad U`` with ``v = (A^{-1} m - (gamma .
    A^{-1} m) / |gamma|^2 gamma) / c`` from the reduced metric (a closed-form solve, ``O(n)``
    per lane); its ``divergence`` is generated from the program.  The observables are
    :data:`VESELOVA_OBSERVABLES` and the engine's ``log_det_metric``.
    """
    n = check_dimension(n)
    gam_c, _ = embedded_symbols(n)
    U = potential_expr(potential, [gam_c])
    if U.free_symbols - set(gam_c):
        extra = ", ".join(sorted(map(str, U.free_symbols - set(gam_c))))
        raise ValueError(f"potential may depend on gamma1..gamma{n} only, found {extra}")

    spec = named_inertia("a-omega-a")
    body = rb.RigidBody(
        n,
        spec.operator,
        [spec.param],
        potential=U if U != 0 else None,
        constraint=rb.space_fixed(),
        name=f"veselova_{n}",
    )
    prog = body.program()
    by_name = {s.name: s for s in prog.inputs}
    g, a = by_name["gamma"], by_name["a"]
    blocks = prog.outputs["observables"]  # energy, |gamma|^2, gamma . m, log det K
    c = prog.reduce("c", inertia_quadratic([a], [g]))
    prog.output(
        "observables",
        [*blocks[:3], log_density(n, c), blocks[1] - 1, blocks[3]],
        names=(*VESELOVA_OBSERVABLES, "log_det_metric"),
    )
    prog.domain_blocks = [blocks[1], c]  # the conditions of structured_field's domain
    return prog


def structured_field(n: int, potential: Potential = None) -> StructuredVectorField:
    """Whole-sphere Veselova system on SO(n) with structured kernels (any ``n >= 3``).

    The equations derived by the matrix-level engine (:func:`structured_program`); the
    generated C loops
    over the index (``O(n)`` work per lane and ``O(1)`` code size), so ``n = 64`` builds in
    seconds.  Pass it to :func:`nhfast.integrate` unchanged.

    Parameters
    ----------
    n : int
        ``n >= 3``.
    potential : callable or sympy.Expr, optional
        ``U(gamma)``; a callable receives the list of symbols ``gamma1..gamma<n>``.

    Returns
    -------
    StructuredVectorField
        States ``(gamma_1..gamma_n, m_1..m_n)`` (``|gamma| = 1``, ``gamma . m = 0``; see
        :func:`join_state`), params ``(a_1..a_n)`` (``I(u ^ v) = (Au) ^ (Av)``), observables
        ``energy`` (``(A^{-1} m, m) / (2c) + U``), ``gamma_norm`` (``|gamma|^2``),
        ``momentum_constraint`` (``gamma . m``), ``log_density`` (``(2-n)/2 ln c``, the log
        of the invariant density w.r.t. the Liouville volume of ``T*S^{n-1}``),
        ``sphere_defect`` (``|gamma|^2 - 1``) and ``log_det_metric`` (``log det K`` of the
        reduced metric on ``gamma^perp``); companions ``observables`` and
        ``divergence`` (``with_divergence()`` adds Liouville's integral as a state).

    Examples
    --------
    >>> import numpy as np, nhfast as nh
    >>> vf = structured_field(32)
    >>> a = np.linspace(1.0, 2.0, 32)
    >>> x0 = join_state(np.eye(32)[-1], 0.1 * np.eye(32)[0])
    >>> res = nh.integrate(vf, x0, [0.0, 1.0], params=a)  # doctest: +SKIP
    """
    n = check_dimension(n)
    prog = structured_program(n, potential)
    gam = prog.state_symbols[:n]
    a = prog.param_symbols
    domain = {
        "gamma != 0": sp.Add(*[gk**2 for gk in gam]),
        "(A gamma, gamma) > 0": inertia_quadratic(a, gam),
    }
    return StructuredVectorField(prog, name=f"veselova_structured_{n}", domain=domain)


def unrolled_field(n: int, potential: Potential = None) -> VectorField:
    """The whole-sphere Veselova system as a plain :class:`VectorField` (unrolled expressions).

    The equations of :func:`structured_program` (the rigid-body engine), unrolled into SymPy
    (``O(n)`` expressions after common subexpressions; no linear solve), for symbolic work and
    small ``n``; for large ``n`` use :func:`structured_field`.

    Parameters
    ----------
    n : int
        ``n >= 3``.
    potential : callable or sympy.Expr, optional
        ``U(gamma)``; a callable receives the list of ``gamma`` symbols.

    Returns
    -------
    VectorField
        States ``(gamma_1..gamma_n, m_1..m_n)``, params ``(a1..an)`` (as in
        :func:`nhfast.systems.veselova`); observables ``energy``
        (``(A^{-1} m, m)/(2c) + U`` on the manifold), ``gamma_norm`` (``gamma . gamma``),
        ``momentum_constraint`` (``gamma . m``) and ``log_density`` (``(2-n)/2 ln c``: the log
        of the invariant density with respect to the Liouville volume of ``T*S^{n-1}``,
        equivalently ``ds dp`` in any chart, and -- on the constraint manifold -- with respect
        to Lebesgue ``dgamma dm`` for this extension of the field).
    """
    prog = structured_program(n, potential)
    values = prog.to_sympy("observables")
    names = VESELOVA_OBSERVABLES[:4]
    gam, a = prog.state_symbols[:n], prog.param_symbols
    # the engine's parameter symbols as the catalogue's (positive a1..an)
    rename = dict(zip(a, inertia_symbols(n), strict=True))
    return VectorField(
        states=prog.state_symbols,
        rhs=[e.xreplace(rename) for e in prog.to_sympy("rhs")],
        params=list(rename.values()),
        observables={k: e.xreplace(rename) for k, e in zip(names, values[:4], strict=True)},
        name=f"veselova_embedded_{n}",
        domain={"gamma != 0": sp.Add(*[g**2 for g in gam])},
    )


# ------------------------------------------------------------------------------------------
# maps (NumPy, vectorised over leading axes)
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
    """Inverse of :func:`chart_to_embedded` (requires ``gamma_n > 0``).

    ``s = gamma_{1..n-1}``, ``p_k = m_k - gamma_k m_n / gamma_n``.

    Parameters
    ----------
    gamma, m : ndarray, shape (..., n)
        Embedded states on the northern hemisphere.

    Returns
    -------
    s, p : ndarray, shape (..., n - 1)
        Chart coordinates and momenta.

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


def split_state(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(gamma, m)`` from states of shape ``(..., 2n)`` (no copy).

    Parameters
    ----------
    x : ndarray, shape (..., 2n)

    Returns
    -------
    gamma, m : ndarray, shape (..., n)
        Views of ``x``.
    """
    x = np.asarray(x)
    if x.ndim == 0 or x.shape[-1] % 2:
        raise ValueError(f"x must have an even last dimension 2n, got shape {x.shape}")
    n = x.shape[-1] // 2
    return x[..., :n], x[..., n:]


def join_state(gamma: np.ndarray, m: np.ndarray) -> np.ndarray:
    """States ``(..., 2n)`` from ``gamma`` and ``m`` of shape ``(..., n)``.

    Parameters
    ----------
    gamma, m : ndarray, shape (..., n)

    Returns
    -------
    ndarray, shape (..., 2n)
    """
    gamma = np.asarray(gamma, dtype=float)
    m = np.asarray(m, dtype=float)
    if gamma.shape != m.shape or gamma.ndim == 0:
        raise ValueError(
            f"gamma and m must have the same shape (..., n), got {gamma.shape}, {m.shape}"
        )
    return np.concatenate([gamma, m], axis=-1)


def project_to_constraints(x: np.ndarray) -> np.ndarray:
    """Project states onto ``|gamma| = 1``, ``gamma^T m = 0``.

    ``gamma -> gamma / |gamma|`` and ``m -> m - (gamma . m) gamma`` (orthogonal projection,
    after normalising).  For explicit schemes between output intervals; the Gauss-Legendre
    schemes (which keep the quadratic first integrals ``|gamma|^2`` and ``gamma . m``) do not
    need it.

    Raises
    ------
    ValueError
        If some ``gamma`` is zero.
    """
    gamma, m = split_state(np.asarray(x, dtype=float))
    norm = np.linalg.norm(gamma, axis=-1, keepdims=True)
    if np.any(norm == 0):
        raise ValueError("x: gamma = 0 cannot be projected onto the sphere")
    g = gamma / norm
    mp = m - np.sum(g * m, axis=-1, keepdims=True) * g
    return join_state(g, mp)
