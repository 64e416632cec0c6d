"""The term ``phi_b R^b_{a alpha} v^alpha`` of the consistency condition (S5-3).

Crampin and Mestdag (2010), Cor. 1 (digest ``spec/seed001.md`` Sec. 2.6): a section
``phi_a(q, v^alpha)`` is strongly consistent iff, on ``C = {v^a = 0}``,

    (S5-2)  phi_a R^a_{alpha beta} v^beta = 0,
    (S5-3)  Gamma(phi_a) + phi_b R^b_{a alpha} v^alpha - lambda_a = 0,

with ``[X_i, X_j] = R^k_ij X_k`` in the adapted frame ``X = [X_alpha | X_a]``.  For a Chaplygin
system in the frame of horizontal lifts and fundamental fields ``R^b_{a alpha} = 0`` ([S6-1]),
which is the frame of every worked example, so the term is zero there.  Here the complement
field does not commute with ``D``: ``Q = R^3``, ``L = |qdot|^2 / 2 - U``, ``D`` spanned by

    X1 = d_x + z d_z,   X2 = d_y + x d_z,   complement X3 = d_z,

with the coframe ``theta^1 = dx``, ``theta^2 = dy``, ``theta^3 = dz - z dx - x dy``.  By hand:
``[X3, X1] = d_z`` (``R^3_31 = 1``), ``[X3, X2] = 0``, ``[X1, X2] = (1 - x) d_z``
(``R^3_12 = 1 - x``, non-integrable), so the term is ``phi_3 v^1``.

Independent oracles (no frame calculus):

* Closed form for the momentum section ``phi = p_3 = zdot = z v1 + x v2`` (the default): the NH
  reaction is ``lambda = E_z(L) = zddot + U_z``, ``Gamma(p_3) = zddot``, hence
  ``(S5-3) = zdot v1 - U_z``.
* For any section: by Thm. 1 of Crampin and Mestdag (2010) the conditions are the Euler-Lagrange
  equations of ``Ltilde = L - Phi_a theta^a(qdot)`` on the NH motions.  Expanding
  ``E(Phi theta(qdot))`` on ``C`` gives ``<E(Ltilde), X_beta> = -(S5-2)_beta`` and
  ``<E(Ltilde), X_a> = -(S5-3)_a``; ``E(Ltilde)`` is computed here in coordinates from ``Ltilde``
  with the NH accelerations derived by hand from ``E(L) = lambda theta^3`` and
  ``zdot = z xdot + x ydot``.
"""

from __future__ import annotations

import pytest
import sympy as sp

from nhfast.symbolic.systems import NonholonomicSystem
from nhfast.symbolic.vakonomic import consistency_test, frame_data

X, Y, Z = sp.symbols("x y z", real=True)
K = sp.Symbol("k", positive=True)
POTENTIALS = {"free": sp.Integer(0), "field": K * Y * Z + X**2 / 2}


def _system(U: sp.Expr):
    frame = sp.Matrix([[1, 0], [0, 1], [Z, X]])
    params = [K] if K in U.free_symbols else []
    sys_ = NonholonomicSystem([X, Y, Z], sp.eye(3), potential=U, frame=frame, params=params)
    return sys_, frame_data(sys_, complement=sp.Matrix([0, 0, 1]))


def _nh_accelerations(U: sp.Expr, v1: sp.Symbol, v2: sp.Symbol) -> tuple[list, sp.Expr]:
    """``qddot`` and ``lambda`` on ``C`` from ``E(L) = lambda theta^3``, by hand."""
    Ux, Uy, Uz = (sp.diff(U, c) for c in (X, Y, Z))
    zd = Z * v1 + X * v2
    lam = (Uz + zd * v1 + v1 * v2 - Z * Ux - X * Uy) / (1 + X**2 + Z**2)
    return [-lam * Z - Ux, -lam * X - Uy, lam - Uz], lam


def _el_ltilde_on_nh(U: sp.Expr, phi: sp.Expr, v1: sp.Symbol, v2: sp.Symbol) -> list[sp.Expr]:
    """``E_i(Ltilde)``, ``Ltilde = L - Phi theta^3(qdot)``, ``Phi = phi(q, xdot, ydot)``, on the NH
    motions through ``(q, v1, v2)``."""
    qd = sp.symbols("xd yd zd", real=True)
    q = [X, Y, Z]
    Phi = phi.subs({v1: qd[0], v2: qd[1]}, simultaneous=True)
    th3 = qd[2] - Z * qd[0] - X * qd[1]
    Lt = sum(v**2 for v in qd) / 2 - U - Phi * th3
    qdd, _ = _nh_accelerations(U, v1, v2)
    on = {qd[0]: v1, qd[1]: v2, qd[2]: Z * v1 + X * v2}
    out = []
    for i in range(3):
        p = sp.diff(Lt, qd[i])
        dt = sum(sp.diff(p, q[j]) * qd[j] + sp.diff(p, qd[j]) * qdd[j] for j in range(3))
        out.append(sp.cancel((dt - sp.diff(Lt, q[i])).subs(on, simultaneous=True)))
    return out


@pytest.mark.parametrize("which", sorted(POTENTIALS))
def test_frame_data_by_hand(which: str) -> None:
    """``R`` of the module docstring, and the NH reaction ``lambda = zddot + U_z``."""
    U = POTENTIALS[which]
    _, fd = _system(U)
    v1, v2 = fd.v[:2]
    R = fd.R
    assert sp.cancel(R[2, 0, 2] - 1) == 0 and sp.cancel(R[0, 2, 2] + 1) == 0  # R^3_31 = 1
    assert all(sp.cancel(R[2, 1, k]) == 0 for k in range(3))  # [X3, X2] = 0
    assert sp.cancel(R[0, 1, 2] - (1 - X)) == 0  # R^3_12 = 1 - x
    _, lam = _nh_accelerations(U, v1, v2)
    assert sp.cancel(fd.multipliers[0] - lam) == 0
    assert sp.cancel(fd.momenta[0] - (Z * v1 + X * v2)) == 0


@pytest.mark.parametrize("which", sorted(POTENTIALS))
def test_s5_3_closed_form_for_the_momentum_section(which: str) -> None:
    """Default section ``phi = p_3 = zdot``: ``(S5-3) = zdot v1 - U_z`` exactly (the term
    ``phi_3 R^3_31 v^1 = zdot v1`` is what remains of ``Gamma(p_3) - lambda = -U_z``)."""
    U = POTENTIALS[which]
    sys_, fd = _system(U)
    v1, v2 = fd.v[:2]
    ct = consistency_test(sys_, fd=fd)
    s3 = ct.conditions["(S5-3)"]
    assert len(s3) == 1
    zd = Z * v1 + X * v2
    assert sp.cancel(s3[0] - (zd * v1 - sp.diff(U, Z))) == 0
    assert sp.cancel(s3[0] - (-zd * v1 - sp.diff(U, Z))) != 0  # the term is not zero here
    assert not ct.holds


@pytest.mark.parametrize("which", sorted(POTENTIALS))
@pytest.mark.parametrize("section", ["momentum", "other", "constant"])
def test_s5_conditions_are_euler_lagrange_of_ltilde(which: str, section: str) -> None:
    """Thm. 1 / Cor. 2 of Crampin and Mestdag (2010): ``(S5-3)_3 = -<E(Ltilde), X3>`` and
    ``(S5-2)_beta = -<E(Ltilde), X_beta>`` on the NH motions, for several sections."""
    U = POTENTIALS[which]
    sys_, fd = _system(U)
    v1, v2 = fd.v[:2]
    phi = {
        "momentum": Z * v1 + X * v2,
        "other": X * v2 - Y * v1**2 + 3,
        "constant": sp.Integer(2),
    }[section]
    ct = consistency_test(sys_, section=[phi], fd=fd)
    el = _el_ltilde_on_nh(U, phi, v1, v2)
    X1 = [1, 0, Z]
    X2 = [0, 1, X]
    s2 = ct.conditions["(S5-2)"]
    assert sp.cancel(s2[0] + sum(a * b for a, b in zip(X1, el, strict=True))) == 0
    assert sp.cancel(s2[1] + sum(a * b for a, b in zip(X2, el, strict=True))) == 0
    assert sp.cancel(ct.conditions["(S5-3)"][0] + el[2]) == 0
    # the R^b_{a alpha} term, phi v1, is present in the residual
    assert sp.cancel(phi * v1) != 0
