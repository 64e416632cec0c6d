"""The ``<HL, b>`` side of the integral criterion, on a system where ``HL`` does not vanish.

Jóźwikowski and Respondek (2019), Theorem 4.8(b), (4.11): an NH trajectory is vakonomic iff
``int <HL, b> dt = int <FL, R(X, Y)> dt`` for every pair ``(Y, b)`` vanishing at both ends and
related by the generator equation (4.8) ``bdot + B(X, b) + R(X, Y) = 0``.  ``HL`` (4.4), the
derivative of ``L`` along the fibre at fixed frame velocities, vanishes for ``G``-invariant data,
so it is zero in the paper's examples (unicycle, carriage) and in the package's other tests.

Here ``L`` is not invariant: ``Q = R^3`` with coordinates ``(x, y, z)``, ``G = R`` acting by
``z``-translations, ``HQ = span{e1 = d_x, e2 = d_y + x d_z}`` (fundamental field ``d_z``) and

    L = (xdot^2 + ydot^2 + zdot^2) / 2 - g z       (a particle in a constant field along z).

By hand (Prop. 4.5, adapted frame velocities ``qdot = y1 e1 + y2 e2 + a d_z``):
``[e1, e2] = d_z`` so ``R^1_12 = 1``; ``B = 0`` (the frame does not depend on ``z``);
``FL = dL/da|_(a=0) = zdot = x y2``; ``HL = d_z L = -g`` (a non-zero constant).
The NH equations (d'Alembert, ``E(L)(e_i) = 0`` with ``zdot = x ydot``) are
``y1dot = 0``, ``y2dot = -x (y1 y2 + g) / (1 + x^2)``.

Two independent oracles:

* Trajectories with ``y1 y2 = -g`` are straight lines with ``zddot = -g``: free Euler-Lagrange
  solutions (Thm. 4.8(a)), hence vakonomic.  Along them ``b``, ``int <HL, b>`` and
  ``int <FL, R(X, Y)>`` are polynomials in ``t`` for polynomial ``Y`` and are integrated in closed
  form; Lemma 4.10 (4.17) with ``lambda = 0`` gives ``int <HL, b> - int <FL, R> = <FL, b>(t1)``, so
  the residual vanishes on pairs with ``b(t1) = 0`` -- but only if ``<HL, b>`` enters with its
  sign: with the opposite sign the residual is ``2 g int b dt``.
* On any NH trajectory and any ``Y`` vanishing at both ends, the residual is the first variation
  of the action ``d/d eps S[q + eps xi]`` along the generator ``xi = Y1 e1 + Y2 e2 + b d_z``
  (Remark 4.7 (4.9) for the ``b``-part, d'Alembert's principle for the ``Y``-part), computed here
  in coordinates from ``L`` itself with an independent integration of the NH equations.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from numpy.polynomial import Polynomial as P
from scipy.integrate import solve_ivp

from nhfast.symbolic.vakonomic import (
    admissible_pair_residuals,
    chaplygin_bundle,
    integral_criterion,
    left_invariant_constraint,
    lie_integral_criterion_integrands,
)

X, Y, Z = sp.symbols("x y z", real=True)
XD, YD, ZD = sp.symbols("x_d y_d z_d", real=True)
G_ = sp.Symbol("g", positive=True)
FRAME = sp.Matrix([[1, 0, 0], [0, 1, 0], [0, X, 1]])  # columns e1, e2 | d_z
T1 = 2.0
GVAL = 1.5

# DOP853 at rtol 1e-13 (package) and 1e-12 (oracle) on O(1) data over t in [0, 2]: the integrals
# agree to ~1e-10; the sign of <HL, b> moves them by 2 g |int b| > 0.1.
TOL = 1e-8


@pytest.fixture(scope="module")
def bundle():
    L = (XD**2 + YD**2 + ZD**2) / 2 - G_ * Z
    bd = chaplygin_bundle([X, Y, Z], FRAME, 2, L, [XD, YD, ZD], base=[X, Y], params=[G_])
    y1, y2 = bd.y
    ydot = sp.Matrix([0, -X * (y1 * y2 + G_) / (1 + X**2)])  # NH equations, by hand
    return bd, ydot


def test_tensors_by_hand(bundle) -> None:
    """R = 1, B = 0, FL = x y2, HL = -g (module docstring); HL is not zero."""
    bd, _ = bundle
    y1, y2 = bd.y
    assert sp.simplify(bd.curvature[0, 1, 0] - 1) == 0
    assert sp.simplify(bd.curvature[1, 0, 0] + 1) == 0
    assert all(sp.simplify(e) == 0 for e in sp.flatten(bd.noninvariance))
    assert sp.simplify(bd.FL[0] - X * y2) == 0
    assert sp.simplify(bd.HL[0] + G_) == 0


# ------------------------------------------------------ unconstrained (vakonomic) trajectory


def _line_data(u: float, v: float, x0: float):
    """Closed forms along ``x = x0 + u t``, ``y2 = v`` for ``Y1 = t (T - t)``,
    ``Y2 = t^2 (T - t)``: ``b`` (from (4.8), b(0) = 0), ``int HL b``, ``int FL R(X, Y)``."""
    t = P([0, 1])
    Y1 = t * (T1 - t)
    Y2 = t * t * (T1 - t)
    b = -(u * Y2 - v * Y1).integ()  # bdot = -R(X, Y) = -(u Y2 - v Y1), b(0) = 0
    hl = (-GVAL * b).integ()(T1)
    FLt = (x0 + u * t) * v
    fl = (FLt * (u * Y2 - v * Y1)).integ()(T1)
    return (lambda s: [Y1(s), Y2(s)]), b(T1), hl, fl, FLt(T1)


def test_integral_criterion_closed_form_on_a_free_trajectory(bundle) -> None:
    """Thm. 4.8(b) sides along the free line ``y1 y2 = -g``: both integrals equal their closed
    forms, ``int HL b = -g int b != 0``, and (4.17) with ``lambda = 0`` gives the residual
    ``<FL, b>(t1)``."""
    bd, ydot = bundle
    u, v, x0 = 1.2, -GVAL / 1.2, 0.3
    Yf, b1, hl, fl, fl1 = _line_data(u, v, x0)
    res = integral_criterion(bd, ydot, [x0, -0.2, 0.1], [u, v], (0.0, T1), Yf, values={G_: GVAL})
    assert abs(res.y1[1] - v) < 1e-12  # y2 stays constant: the trajectory is the line
    assert abs(res.b1[0] - b1) < TOL
    assert abs(hl) > 0.1  # HL = -g matters
    assert abs(res.hl_integral - hl) < TOL
    assert abs(res.fl_integral - fl) < TOL
    assert abs(res.residual - fl1 * b1) < TOL  # (4.17), lambda = 0
    assert abs(res.residual - res.fl_b1) < TOL
    assert abs(res.fl_b1) > 0.1


def test_free_trajectory_is_vakonomic_and_hl_sign_matters(bundle) -> None:
    """(4.11) holds on every admissible pair (``b(t1) = 0``) along the free line: the residuals
    vanish; a generator with ``b(t1) = 0`` has ``int b != 0``, so with ``-<HL, b>`` the
    residual would be ``2 g int b``, far from 0."""
    bd, ydot = bundle
    u, v = 0.8, -GVAL / 0.8
    basis = [
        lambda t: [np.sin(np.pi * t / T1), 0.0],
        lambda t: [0.0, np.sin(np.pi * t / T1)],
        lambda t: [np.sin(2 * np.pi * t / T1), 0.0],
        lambda t: [0.0, t * np.sin(2 * np.pi * t / T1)],
    ]
    q0, y0 = [0.4, 0.0, 0.0], [u, v]
    resid = admissible_pair_residuals(bd, ydot, q0, y0, (0.0, T1), basis, values={G_: GVAL})
    assert len(resid) >= 2
    assert np.max(np.abs(resid)) < TOL
    # b_k(t1) and int b_k dt for each generator: b is linear in Y, bdot = -(u Y2 - v Y1)
    ints = []
    for Yf in basis:
        sol = solve_ivp(
            lambda t, s, Yf=Yf: [-(u * Yf(t)[1] - v * Yf(t)[0]), s[0]],
            (0.0, T1), [0.0, 0.0], rtol=1e-12, atol=1e-14, method="DOP853",
        )  # fmt: skip
        ints.append(sol.y[:, -1])
    Bm = np.array(ints).T  # rows: b(t1), int b
    _, sv, vt = np.linalg.svd(Bm[:1])
    null = vt[1:]  # combinations with b(t1) = 0
    int_b = null @ Bm[1]
    assert np.max(np.abs(2 * GVAL * int_b)) > 0.1  # the flipped sign would be visible


# ------------------------------------------------------------------ generic NH trajectory


def test_residual_is_the_first_variation_of_the_action(bundle) -> None:
    """On a generic NH trajectory (``y1 y2 != -g``, not vakonomic) the residual
    ``int <HL, b> - int <FL, R(X, Y)>`` equals ``d/d eps S[q + eps xi]``,
    ``xi = (Y1, Y2, x Y2 + b)``, ``Y(t0) = Y(t1) = 0``, ``b(t0) = 0``:
    ``int [-g xi_z + xdot xi_xdot + ydot xi_ydot + zdot xi_zdot] dt`` (L is quadratic)."""
    bd, ydot = bundle
    w = np.pi / T1
    Yf = lambda t: [np.sin(w * t), t * np.sin(2 * w * t)]  # noqa: E731
    Yd = lambda t: [w * np.cos(w * t), np.sin(2 * w * t) + 2 * w * t * np.cos(2 * w * t)]  # noqa: E731
    q0, y0 = [0.3, -0.1, 0.2], [0.7, 0.9]

    def rhs(t, s):
        x, _, _, xd, yd, b, _ = s
        y1, y2 = Yf(t)
        y1d, y2d = Yd(t)
        ydd = -x * (xd * yd + GVAL) / (1 + x**2)  # NH, by hand
        zd = x * yd
        bd_ = -(xd * y2 - yd * y1)  # (4.8), B = 0, R_12 = 1
        xi_z = x * y2 + b
        xi_zd = xd * y2 + x * y2d + bd_
        dS = -GVAL * xi_z + xd * y1d + yd * y2d + zd * xi_zd
        return [xd, yd, zd, 0.0, ydd, bd_, dS]

    sol = solve_ivp(rhs, (0.0, T1), [*q0, *y0, 0.0, 0.0], method="DOP853", rtol=1e-12, atol=1e-14)
    dS = sol.y[-1, -1]
    res = integral_criterion(bd, ydot, q0, y0, (0.0, T1), Yf, values={G_: GVAL})
    assert np.allclose(res.q1, sol.y[:3, -1], atol=1e-10)
    assert abs(res.b1[0] - sol.y[5, -1]) < TOL
    assert abs(res.residual - dS) < TOL
    assert abs(res.hl_integral) > 0.1  # the <HL, b> side is not negligible
    # the trajectory is not vakonomic: (4.11) fails on some admissible pair
    basis = [
        lambda t: [np.sin(w * t), 0.0],
        lambda t: [0.0, np.sin(w * t)],
        lambda t: [np.sin(2 * w * t), 0.0],
        lambda t: [0.0, np.sin(2 * w * t)],
    ]
    resid = admissible_pair_residuals(bd, ydot, q0, y0, (0.0, T1), basis, values={G_: GVAL})
    assert np.max(np.abs(resid)) > 1e-2


# ---------------------------------------------------------- Lie-group form (5.6), (5.11d)


def test_lie_group_integrands_carry_rho() -> None:
    """Remark 5.7: the same system as a left-invariant constraint on the Heisenberg group
    (``E1 = d_x``, ``E2 = d_y + x d_z``, ``E3 = d_z``, ``[E1, E2] = E3``, ``d = span{E1, E2}``,
    ``d' = span{E3}``) with ``L(h, eta)`` depending on ``h`` through ``-g z``.  (5.6): the left
    integrand ``rho(b) + mu(P[eta, b]) = <HL, b>`` (5.11d) is ``-g B`` for ``b = B E3`` (``E3``
    is central), the right one ``mu(P'[eta, a]) = <FL, R(X, Y)>`` is
    ``x eta2 (eta1 F - eta2 E)`` for ``a = E E1 + F E2``; both agree with the bundle's."""
    from nhfast.symbolic.frames import anholonomity

    eta = list(sp.symbols("eta1:4", real=True))
    c = anholonomity(FRAME, [X, Y, Z])
    qd = FRAME * sp.Matrix(eta)
    L = (qd.dot(qd)) / 2 - G_ * Z
    D = sp.Matrix([[1, 0], [0, 1], [0, 0]])
    Dp = sp.Matrix([0, 0, 1])
    data = left_invariant_constraint(c, D, Dp, L, eta, group=[X, Y, Z], frame=FRAME)
    E, F, B = sp.symbols("E F B", real=True)
    lhs, rhs = lie_integral_criterion_integrands(data, D * sp.Matrix([E, F]), Dp * B)
    on_d = {eta[2]: 0}
    assert sp.simplify(lhs.subs(on_d) + G_ * B) == 0
    assert sp.simplify(rhs.subs(on_d) - X * eta[1] * (eta[0] * F - eta[1] * E)) == 0
    Lq = (XD**2 + YD**2 + ZD**2) / 2 - G_ * Z
    bd = chaplygin_bundle([X, Y, Z], FRAME, 2, Lq, [XD, YD, ZD], base=[X, Y], params=[G_])
    to_eta = dict(zip(bd.y, eta[:2], strict=True))
    hl_b = (bd.HL.T * sp.Matrix([B]))[0, 0].subs(to_eta)
    fl_r = (bd.FL.T * bd.R(bd.y, [E, F]))[0, 0].subs(to_eta)
    assert sp.simplify(lhs.subs(on_d) - hl_b) == 0
    assert sp.simplify(rhs.subs(on_d) - fl_r) == 0
