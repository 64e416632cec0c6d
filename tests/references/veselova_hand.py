"""Hand-derived programs of the Veselova body: independent references of the rigid-body engine.

Written by hand from the equations of the papers, not derived by
:mod:`nhfast.symbolic.rigid_body`: the tests check the engine's programs against these, and
the benchmarks time the engine's kernels against theirs (labelled as hand-derived).

* :func:`veselova_program` -- the seed inertia ``I(Om) = A Om A`` on the whole sphere, in the
  form of García-Naranjo & Marrero (2020) (``gammadot = v = P_gamma A^{-1} m / c``);
* :func:`physical_program` -- the physical inertia ``I(Om) = J Om + Om J``, by a rank-two
  Sherman-Morrison-Woodbury solve of ``K v = P_gamma m`` (the formulation of the hand-written
  C anchor ``benchmarks/anchors/hand_c/veselova_physical.c``).
"""

from __future__ import annotations

import sympy as sp

from nhfast.codegen.indexed import IndexedProgram
from nhfast.systems._common import Potential, potential_expr
from nhfast.systems.veselova_body.embedded import VESELOVA_OBSERVABLES
from nhfast.systems.veselova_body.formulas import (
    check_dimension,
    embedded_symbols,
    inertia_quadratic,
    inertia_symbols,
    log_density,
)


def veselova_program(n: int, potential: Potential = None) -> IndexedProgram:
    """The whole-sphere Veselova equations as an indexed program, derived by hand.

    The form of the module docstring, kept as the independent reference of the matrix-level
    engine (which ``veselova(n, form="structured")`` uses) and as the source of
    ``veselova(n, form="embedded")`` (its unrolled expressions are the simplest known).

    With the per-lane dot products ``c = (A gamma, gamma)``, ``r2 = |gamma|^2``,
    ``gw = gamma . w``, ``gm = gamma . m``, ``mw = m . w`` and ``mv = m . gammadot =
    (mw - gw gm / r2) / c``, two passes over the index evaluate the field: ``O(n)`` work per
    lane and ``O(1)`` code size (plus the gradient of a potential, unrolled).  Its divergence,
    with ``sia = (A^{-1} gamma, gamma)``, is
    ``-(n - 2) gw / (r2 c) - 2 gm / c^2 + gm sia / (r2^2 c)``, which on the constraint manifold
    is ``-d/dt ln c^{(2-n)/2}``.

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

    Raises
    ------
    ValueError
        If the potential depends on symbols other than ``gamma1..gamma<n>``.
    """
    n = check_dimension(n)
    gam_c, m_c = embedded_symbols(n)
    prog = IndexedProgram(n)
    g = prog.state_vector("gamma", gam_c)
    m = prog.state_vector("m", m_c)
    a = prog.param_vector("a", inertia_symbols(n))
    U = potential_expr(potential, [gam_c])
    if U.free_symbols - set(gam_c):
        extra = ", ".join(sorted(map(str, U.free_symbols - set(gam_c))))
        raise ValueError(f"potential may depend on gamma1..gamma{n} only, found {extra}")
    has_u = U != 0
    if has_u:
        dU = prog.unrolled("dU", [sp.diff(U, gk) for gk in gam_c])
        u_val = prog.scalar("U", U)
    c = prog.reduce("c", inertia_quadratic([a], [g]))
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
        "observables", [energy, r2, gm, log_density(n, c), r2 - 1], names=VESELOVA_OBSERVABLES
    )
    prog.output("divergence", [-(n - 2) * gw / (r2 * c) - 2 * gm / c**2 + gm * sia / (r2**2 * c)])
    return prog


def physical_program(n: int) -> IndexedProgram:
    """The Veselova body with ``I(Om) = J Om + Om J``, ``J = diag(j)``, no potential, by hand.

    With ``c = gamma . J gamma``, ``r2 = |gamma|^2``, the reduced metric plus ``gamma
    gamma^T`` is ``K w = (r2 J + c) w - (J gamma)(gamma . w) - gamma (J gamma . w) + gamma
    (gamma . w)``, i.e. ``K = D + U C V^T`` with ``D = r2 j + c``, ``U = [p, q]``,
    ``V = [q, p - q]``, ``C = -1``, ``p = J gamma``, ``q = gamma``; ``K v = f := m - (gamma .
    m)/r2 gamma`` by Sherman-Morrison-Woodbury (``S = -1 + V^T D^{-1} U``, ``t = S^{-1} V^T
    D^{-1} f``, ``v = D^{-1} (f - gamma (j t_1 + t_2))``), then ``gammadot = r2 v - gamma
    (gamma . v)`` and ``mdot = -(m . v) gamma``.

    Outputs ``rhs`` only.
    """
    n = check_dimension(n)
    prog = IndexedProgram(n)
    g = prog.state_vector("gamma", list(sp.symbols(f"gamma1:{n + 1}", real=True)))
    m = prog.state_vector("m", list(sp.symbols(f"m1:{n + 1}", real=True)))
    j = prog.param_vector("j", list(sp.symbols(f"j1:{n + 1}", positive=True)))
    r2 = prog.reduce("r2", g**2)
    c = prog.reduce("c", j * g**2)
    gm = prog.reduce("gm", g * m)
    s = prog.scalar("s", gm / r2)
    iD = prog.vector("iD", 1 / (r2 * j + c))
    f = prog.vector("f", m - s * g)
    aqq = prog.reduce("aqq", g * g * iD)
    apq = prog.reduce("apq", j * g * g * iD)
    app = prog.reduce("app", j * j * g * g * iD)
    gq = prog.reduce("gq", f * g * iD)
    gp = prog.reduce("gp", f * j * g * iD)
    s11, s12, s21, s22 = apq - 1, aqq, app - apq, apq - aqq - 1
    g1, g2 = gq, gp - gq
    idet = prog.scalar("idet", 1 / (s11 * s22 - s12 * s21))
    t1 = prog.scalar("t1", (s22 * g1 - s12 * g2) * idet)
    t2 = prog.scalar("t2", (s11 * g2 - s21 * g1) * idet)
    v = prog.vector("v", (f - g * (j * t1 + t2)) * iD)
    gv = prog.reduce("gv", g * v)
    mv = prog.reduce("mv", m * v)
    prog.output("rhs", [r2 * v - gv * g, -mv * g])
    return prog
