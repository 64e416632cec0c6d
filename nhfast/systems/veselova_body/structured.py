"""Whole-sphere Veselova system on SO(n) for large ``n``, with structured (looped) kernels.

The equations are those of :func:`nhfast.systems.veselova_body.forms.veselova_embedded` (seed 004
Section 4.2 in the embedded, chart-free variables ``(gamma, m)`` on ``T*S^{n-1}`` in
``R^{2n}``; derivation in that module's docstring), written as an
:class:`~nhfast.codegen.structured.IndexedProgram` so that the generated C loops over the
index: with ``w = A^{-1} m`` and the per-lane dot products

    ``c = (A gamma, gamma)``, ``r2 = |gamma|^2``, ``gw = gamma . w``, ``gm = gamma . m``,
    ``mw = m . w``,

the vector field is

    ``gammadot_k = (w_k - gw gamma_k / r2) / c``,
    ``mdot_k = -(mv / r2) gamma_k - (dU_k - (gamma . dU) gamma_k / r2)``,
    ``mv = m . gammadot = (mw - gw gm / r2) / c``,

two passes over the index per evaluation (one for the dot products, one for the outputs):
``O(n)`` work per lane, ``O(1)`` code size (plus the gradient of a potential, unrolled).

Conservation.  ``gammadot = S gamma`` with the skew matrix ``S = (w gamma^T - gamma w^T) /
(r2 c)``, so ``|gamma|^2`` is an exact quadratic first integral of the extended field, and so
is ``gamma . m`` (``d/dt (gamma . m) = mv - mv = 0`` identically).  Gauss-Legendre schemes
(``midpoint``, ``gauss4``, ``gauss6``) preserve all quadratic first integrals, so both stay at
their initial values up to round-off and the stage-iteration tolerance; explicit Runge-Kutta
schemes drift at the level of their local error (see :func:`project_to_constraints`).

Divergence (derived here; checked in ``tests/test_veselova_large.py`` against the symbolic
divergence of ``veselova_embedded``), with ``sia = (A^{-1} gamma, gamma)``::

    div X = -(n - 2) gw / (r2 c) - 2 gm / c^2 + gm sia / (r2^2 c),

which on the constraint manifold (``r2 = 1``, ``gm = 0``) is ``-(n-2) gw / c =
-d/dt log c^{(2-n)/2}``: the density ``c^{(2-n)/2}`` (seed 004 Theorem 4.3 with
``sigma = (r - 1) phi``, ``phi = -1/2 log c``) is invariant with respect to Lebesgue measure
``dgamma dm`` restricted as explained in :mod:`nhfast.systems.veselova_body.forms`, i.e. with
respect to the Liouville volume of ``T*S^{n-1}`` -- on the whole sphere.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from nhfast.codegen.structured import IndexedProgram
from nhfast.structured_field import StructuredVectorField
from nhfast.systems.veselova_body.forms import Potential, _check_n, _params, _potential

__all__ = [
    "veselova_structured",
    "veselova_program",
    "split_state",
    "join_state",
    "project_to_constraints",
    "VESELOVA_OBSERVABLES",
]

#: Observables of :func:`veselova_structured`, in order.
VESELOVA_OBSERVABLES = (
    "energy",
    "gamma_norm",
    "momentum_constraint",
    "log_density",
    "sphere_defect",
)


def veselova_program(n: int, potential: Potential = None) -> IndexedProgram:
    """The indexed program of the whole-sphere Veselova system (see the module docstring).

    Parameters
    ----------
    n : int
        ``n >= 3``.
    potential : callable or sympy.Expr, optional
        ``U(gamma)``; a callable receives the list of the ``n`` symbols ``gamma1..gamma<n>``.
        Its gradient is emitted component by component (unrolled).

    Returns
    -------
    IndexedProgram
        Outputs ``rhs``, ``observables`` (:data:`VESELOVA_OBSERVABLES`) and ``divergence``.
    """
    n = _check_n(n)
    gam_c = list(sp.symbols(f"gamma1:{n + 1}", real=True))
    m_c = list(sp.symbols(f"m1:{n + 1}", real=True))
    prog = IndexedProgram(n)
    g = prog.state_vector("gamma", gam_c)
    m = prog.state_vector("m", m_c)
    a = prog.param_vector("a", _params(n))
    U = _potential(potential, gam_c)
    if U.free_symbols - set(gam_c):
        extra = ", ".join(sorted(map(str, U.free_symbols - set(gam_c))))
        raise ValueError(f"potential may depend on gamma1..gamma{n} only, found {extra}")
    has_u = U != 0
    if has_u:
        dU = prog.unrolled("dU", [sp.diff(U, gk) for gk in gam_c])
        u_val = prog.scalar("U", U)
    c = prog.reduce("c", a * g**2)
    r2 = prog.reduce("r2", g**2)
    gw = prog.reduce("gw", g * m / a)
    gm = prog.reduce("gm", g * m)
    mw = prog.reduce("mw", m**2 / a)
    sia = prog.reduce("sia", g**2 / a)
    gdU = prog.reduce("gdU", g * dU) if has_u else sp.Integer(0)
    mv = prog.scalar("mv", (mw - gw * gm / r2) / c)
    # per-lane coefficients, so that the element-wise loop has one division (by a_i)
    ic = prog.scalar("ic", 1 / c)
    kv = prog.scalar("kv", gw / (r2 * c))
    km = prog.scalar("km", (mv - gdU) / r2)
    v = m / a * ic - kv * g
    mdot = -km * g
    if has_u:
        mdot = mdot - dU
    prog.output("rhs", [v, mdot])
    energy = mw / (2 * c) + (u_val if has_u else 0)
    prog.output(
        "observables",
        [energy, r2, gm, sp.Rational(2 - n, 2) * sp.log(c), r2 - 1],
        names=VESELOVA_OBSERVABLES,
    )
    prog.output("divergence", [-(n - 2) * gw / (r2 * c) - 2 * gm / c**2 + gm * sia / (r2**2 * c)])
    return prog


def veselova_structured(n: int, potential: Potential = None) -> StructuredVectorField:
    """Whole-sphere Veselova system on SO(n) with structured kernels (any ``n >= 3``).

    Same equations, states, parameters and observables as
    :func:`nhfast.systems.veselova_body.forms.veselova_embedded`, but the generated C loops over
    the index (``O(n)`` work per lane and ``O(1)`` code size), so ``n = 64`` builds in about a
    second.  Pass it to :func:`nhfast.integrate` unchanged.

    Parameters
    ----------
    n : int
        ``n >= 3``.
    potential : callable or sympy.Expr, optional
        ``U(gamma)``; a callable receives the list of symbols ``gamma1..gamma<n>``.

    Returns
    -------
    StructuredVectorField
        States ``(gamma_1..gamma_n, m_1..m_n)`` (``|gamma| = 1``, ``gamma . m = 0``; ``m`` is
        the momentum as a vector of ``gamma^perp``, see :func:`join_state`), params
        ``(a_1..a_n)`` (``I(u ^ v) = (Au) ^ (Av)``), observables ``energy``
        (``(A^{-1} m, m) / (2c) + U``), ``gamma_norm`` (``|gamma|^2``),
        ``momentum_constraint`` (``gamma . m``), ``log_density`` (``(2-n)/2 log c``, the log
        of the invariant density w.r.t. the Liouville volume of ``T*S^{n-1}``) and
        ``sphere_defect`` (``|gamma|^2 - 1``); companions ``observables`` and
        ``divergence`` (``with_divergence()`` adds Liouville's integral as a state).

    Examples
    --------
    >>> import numpy as np, nhfast as nh
    >>> vf = veselova_structured(32)
    >>> a = np.linspace(1.0, 2.0, 32)
    >>> x0 = join_state(np.eye(32)[-1], 0.1 * np.eye(32)[0])
    >>> res = nh.integrate(vf, x0, [0.0, 1.0], params=a)  # doctest: +SKIP
    """
    n = _check_n(n)
    prog = veselova_program(n, potential)
    gam = prog.state_symbols[:n]
    a = prog.param_symbols
    domain = {
        "gamma != 0": sp.Add(*[gk**2 for gk in gam]),
        "(A gamma, gamma) > 0": sp.Add(*[ak * gk**2 for ak, gk in zip(a, gam, strict=True)]),
    }
    return StructuredVectorField(prog, name=f"veselova_structured_{n}", domain=domain)


def split_state(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(gamma, m)`` from states of shape ``(..., 2n)`` (no copy)."""
    x = np.asarray(x)
    if x.ndim == 0 or x.shape[-1] % 2:
        raise ValueError(f"x must have an even last dimension 2n, got shape {x.shape}")
    n = x.shape[-1] // 2
    return x[..., :n], x[..., n:]


def join_state(gamma: np.ndarray, m: np.ndarray) -> np.ndarray:
    """States ``(..., 2n)`` from ``gamma`` and ``m`` of shape ``(..., n)``."""
    gamma = np.asarray(gamma, dtype=float)
    m = np.asarray(m, dtype=float)
    if gamma.shape != m.shape or gamma.ndim == 0:
        raise ValueError(
            f"gamma and m must have the same shape (..., n), got {gamma.shape}, {m.shape}"
        )
    return np.concatenate([gamma, m], axis=-1)


def project_to_constraints(x: np.ndarray) -> np.ndarray:
    """Project states onto ``|gamma| = 1``, ``gamma . m = 0``.

    ``gamma -> gamma / |gamma|`` and ``m -> m - (gamma . m) gamma`` (orthogonal projection,
    after normalising).  For explicit schemes between output intervals; the Gauss-Legendre
    schemes do not need it.

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
