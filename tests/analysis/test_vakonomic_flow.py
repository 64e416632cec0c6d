"""Numerical vakonomic flows (nhfast.analysis.vakonomic_flow).

Oracles: digest seed002_003.md V6, V15, V16 (seed 003 disk), C2 (NH = VAK for the special
multipliers), the Lagrangian form (q, qdot, lambda) and the frame form (q, v, mu) integrated
independently with DOP853, and SciPy's DOP853 on the Hamiltonian form.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from nhfast.analysis.result import Check
from nhfast.analysis.vakonomic_flow import (
    compare_nonholonomic_vakonomic,
    integrate_vakonomic,
    vakonomic_field,
    vakonomic_initial_state,
)
from nhfast.errors import HolonomicConstraintsWarning
from nhfast.integrate import integrate
from nhfast.symbolic.systems import NonholonomicSystem
from nhfast.symbolic.vakonomic import vakonomic_equations, vakonomic_frame_equations
from nhfast.systems import (
    contact_particle,
    holonomic_particle,
    two_constraint_system,
    vertical_rolling_disk,
)

I1, I2, RAD = 0.7, 1.3, 0.5
PAR = [I1, I2, RAD]
TH0, PH0, THD0, PHD0 = 0.3, 0.1, 0.8, 1.7
QDOT0 = [RAD * np.cos(TH0) * PHD0, RAD * np.sin(TH0) * PHD0, THD0, PHD0]
Q0 = [0.0, 0.0, TH0, PH0]


@functools.cache
def disk() -> NonholonomicSystem:
    return vertical_rolling_disk(convention="martinez")


@functools.cache
def t3() -> NonholonomicSystem:
    return two_constraint_system()


def _multipliers(a: float, b: float) -> list[float]:
    """V6 at t = 0: lambda = A sin(theta) - B cos(theta), mu = A cos + B sin - R phidot."""
    return [
        a * np.sin(TH0) - b * np.cos(TH0),
        a * np.cos(TH0) + b * np.sin(TH0) - RAD * PHD0,
    ]


def test_disk_regression_V16_and_conservation_V15_V6() -> None:
    t = np.linspace(0.0, 10.0, 21)
    A, B = 0.4, -0.25
    tr = integrate_vakonomic(
        disk(), t, Q0, qdot0=QDOT0, mu0=_multipliers(A, B), params=PAR, method="gauss6", h=5e-3
    )
    final = np.concatenate([tr.q[0, -1], tr.qdot[0, -1, 2:]])
    expected = [0.9516653, -0.36569174, 10.90812023, 16.22544367, 0.93091376, 1.66963]
    np.testing.assert_allclose(final, expected, atol=1e-7)
    # V15: h_2, phat_x = A, phat_y = B conserved; phat_phi = (I2+R^2) phidot - R(A cos + B sin)
    assert np.ptp(tr.energy) < 1e-12
    np.testing.assert_allclose(tr.p_hat[0, :, 0], A, atol=1e-12)
    np.testing.assert_allclose(tr.p_hat[0, :, 1], B, atol=1e-12)
    th, phd = tr.q[0, :, 2], tr.qdot[0, :, 3]
    pphi = (I2 + RAD**2) * phd - RAD * (A * np.cos(th) + B * np.sin(th))
    np.testing.assert_allclose(pphi, pphi[0], atol=1e-11)
    # V6: closed-form multipliers along the motion
    np.testing.assert_allclose(tr.mu[0, :, 0], A * np.sin(th) - B * np.cos(th), atol=1e-11)
    np.testing.assert_allclose(
        tr.mu[0, :, 1], A * np.cos(th) + B * np.sin(th) - RAD * phd, atol=1e-11
    )
    assert np.abs(tr.constraint).max() < 1e-13


def test_special_multipliers_give_the_nonholonomic_motion_C2_V7() -> None:
    """(A, B) = (0, 0) reproduces NH (state at T = 10 from V16); mu0 = 0 does not."""
    t = np.linspace(0.0, 10.0, 11)
    cmp = compare_nonholonomic_vakonomic(disk(), t, Q0, QDOT0, mu0=_multipliers(0, 0), params=PAR)
    assert all(isinstance(c, Check) for c in cmp.checks)
    assert all(c.holds for c in cmp.checks), [c.statement for c in cmp.checks]
    np.testing.assert_allclose(
        cmp.nonholonomic.q[0, -1], [0.64456735, 1.47338292, 8.3, 17.1], atol=1e-7
    )
    assert cmp.separation.max() < 1e-9 and not cmp.integrable
    zero = compare_nonholonomic_vakonomic(disk(), t, Q0, QDOT0, params=PAR)
    coincide = [c for c in zero.checks if c.name.endswith("coincide")][0]
    assert coincide.holds is False and zero.separation[0, -1] > 1e-2
    # drift checks still hold for both flows
    assert all(c.holds for c in zero.checks if "drift" in c.name)


def test_weak_consistency_at_mu_zero() -> None:
    """At mu = 0 the VAK and NH accelerations coincide at the initial instant (seed 001)."""
    from nhfast.symbolic.vakonomic import nonholonomic_coordinate_equations

    S = disk()
    vak = vakonomic_equations(S).as_vector_field()
    nh = nonholonomic_coordinate_equations(S).as_vector_field()
    x_v = np.array([*Q0, *QDOT0, 0.0, 0.0])
    x_n = np.array([*Q0, *QDOT0])
    a_v = vak.evaluate("rhs", x_v, params=PAR)[4:8]
    a_n = nh.evaluate("rhs", x_n, params=PAR)[4:]
    np.testing.assert_allclose(a_v, a_n, atol=1e-14)


def test_three_forms_give_the_same_trajectory() -> None:
    """(a) coordinates, (b) frame and (c) Hamiltonian on T3 (non-constant metric, m = 2)."""
    S = t3()
    par = [0.8]
    q0 = np.array([0.3, -0.2, 0.5])
    # a velocity in D = ker [[1, 0, y], [0, 1, x]]: qdot = s (-y, -x, 1)
    qd0 = 0.9 * np.array([-q0[1], -q0[0], 1.0])
    lam0 = np.array([0.35, -0.6])
    t = np.linspace(0.0, 3.0, 7)
    ham = integrate_vakonomic(S, t, q0, qdot0=qd0, mu0=lam0, params=par, method="gauss6", h=2e-3)
    coord = integrate(
        vakonomic_equations(S).as_vector_field(),
        np.concatenate([q0, qd0, lam0]),
        t,
        method="dop853",
        rtol=1e-12,
        atol=1e-13,
        params=par,
    )
    np.testing.assert_allclose(ham.q[0], coord.y[0, :, :3], atol=1e-9)
    np.testing.assert_allclose(ham.qdot[0], coord.y[0, :, 3:6], atol=1e-9)
    np.testing.assert_allclose(ham.mu[0], coord.y[0, :, 6:], atol=1e-9)
    fe = vakonomic_frame_equations(S)
    x0 = fe.from_coordinates(q0, qd0, lam0, params=par)
    frame = integrate(
        fe.as_vector_field(), x0, t, method="dop853", rtol=1e-12, atol=1e-13, params=par
    )
    for k in range(t.size):
        q, qd, lam = fe.to_coordinates(frame.y[0, k], params=par)
        np.testing.assert_allclose(q, coord.y[0, k, :3], atol=1e-9)
        np.testing.assert_allclose(qd, coord.y[0, k, 3:6], atol=1e-9)
        np.testing.assert_allclose(lam, coord.y[0, k, 6:], atol=1e-9)
    # the coordinate form keeps W qdot = 0 and the energy to the tolerance
    assert np.abs(coord.observables["constraint_1"]).max() < 1e-9
    assert np.ptp(coord.observables["energy"]) < 1e-9


def test_hamiltonian_form_against_scipy_dop853() -> None:
    from scipy.integrate import solve_ivp

    S = t3()
    par = [0.8]
    q0 = np.array([0.1, 0.4, -0.3])
    qd0 = 0.7 * np.array([-q0[1], -q0[0], 1.0])
    t = np.linspace(0.0, 2.0, 5)
    ham = integrate_vakonomic(
        S, t, q0, qdot0=qd0, mu0=[0.2, 0.1], params=par, method="gauss4", h=1e-3
    )
    vf = ham.result  # IntegrationResult of the HamiltonianSystem
    x0 = vakonomic_initial_state(S, q0, qd0, [0.2, 0.1], par)[0]
    field = vakonomic_field(S, "symbolic")  # explicit h_2 of the symbolic algorithm (no solves)
    f = sp.lambdify([*field.states, *field.params], field.rhs, modules="numpy")
    sol = solve_ivp(
        lambda _t, x: np.asarray(f(*x, *par), dtype=float),
        (t[0], t[-1]),
        x0,
        method="DOP853",
        t_eval=t,
        rtol=1e-12,
        atol=1e-13,
    )
    np.testing.assert_allclose(vf.y[0], sol.y.T, atol=1e-9)


def test_batch_of_lanes() -> None:
    t = np.linspace(0.0, 2.0, 3)
    mus = np.array([_multipliers(0, 0), _multipliers(0.4, -0.25), [0.0, 0.0]])
    tr = integrate_vakonomic(disk(), t, Q0, qdot0=QDOT0, mu0=mus, params=PAR, h=1e-2)
    assert tr.q.shape == (3, 3, 4) and tr.mu.shape == (3, 3, 2)
    single = integrate_vakonomic(disk(), t, Q0, qdot0=QDOT0, mu0=mus[1], params=PAR, h=1e-2)
    np.testing.assert_allclose(tr.q[1], single.q[0], atol=1e-14)


def test_holonomic_constraints_coincide_for_any_multiplier() -> None:
    S = holonomic_particle()
    q0 = [0.2, -0.1, 0.3]
    qd0 = [0.5, 0.4, 0.4 * 0.2 + 0.5 * (-0.1)]  # zdot = y xdot + x ydot
    t = np.linspace(0.0, 2.0, 5)
    with pytest.warns(HolonomicConstraintsWarning, match="coincide"):
        cmp = compare_nonholonomic_vakonomic(S, t, q0, qd0, mu0=[1.7], params=[0.3])
    assert cmp.integrable and cmp.separation.max() < 1e-9


# ------------------------------------------------------------------------ bad input ----
def test_bad_input() -> None:
    t = np.linspace(0.0, 1.0, 3)
    with pytest.raises(ValueError, match="leapfrog.*not separable"):
        integrate_vakonomic(disk(), t, Q0, qdot0=QDOT0, params=PAR, method="leapfrog", h=0.1)
    with pytest.raises(ValueError, match="qdot0 is not in D"):
        integrate_vakonomic(disk(), t, Q0, qdot0=[1.0, 0, 0, 0], params=PAR, h=0.1)
    with pytest.raises(ValueError, match="mu0 must have shape"):
        integrate_vakonomic(disk(), t, Q0, qdot0=QDOT0, mu0=[0.0], params=PAR, h=0.1)
    with pytest.raises(ValueError, match="exactly one of qdot0"):
        integrate_vakonomic(disk(), t, Q0, params=PAR, h=0.1)
    with pytest.raises(ValueError, match="params must have shape"):
        integrate_vakonomic(disk(), t, Q0, qdot0=QDOT0, params=[1.0], h=0.1)
    with pytest.raises(TypeError, match="NonholonomicSystem"):
        integrate_vakonomic("disk", t, Q0, qdot0=QDOT0)
    # a point (q, phat) with multipliers that are not lambda(q, phat): not on M_2
    x0 = vakonomic_initial_state(disk(), Q0, QDOT0, [0.1, 0.2], PAR)[0]
    ok = integrate_vakonomic(
        disk(), t, Q0, p_hat0=x0[4:], mu0=[0.1, 0.2], params=PAR, h=0.1
    )  # consistent
    assert ok.mu.shape == (1, 3, 2)
    with pytest.raises(ValueError, match="mu0 is not on the final constraint submanifold"):
        integrate_vakonomic(disk(), t, Q0, p_hat0=x0[4:], mu0=[0.1, 0.3], params=PAR, h=0.1)
    # the chart x Phi of seed 003 VIII.6 degenerates at x = 0 (D = x^2 (1 + y^2))
    S = contact_particle("x")
    with pytest.raises(ValueError, match="q0: the constraint basis degenerates"):
        integrate_vakonomic(S, t, [0.0, 0.3, 0.1], qdot0=[1.0, 0.0, 0.3], h=0.1)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    a=st.floats(-1.0, 1.0),
    b=st.floats(-1.0, 1.0),
    thd=st.floats(-1.5, 1.5),
    phd=st.floats(-2.0, 2.0),
)
def test_disk_first_integrals_for_any_multipliers(
    a: float, b: float, thd: float, phd: float
) -> None:
    """V6/V15 for arbitrary (A, B) and velocities: phat_x = A, phat_y = B, h_2 conserved, and
    the multipliers follow the closed form along the gauss6 solution."""
    qd = [RAD * np.cos(TH0) * phd, RAD * np.sin(TH0) * phd, thd, phd]
    mu0 = [
        a * np.sin(TH0) - b * np.cos(TH0),
        a * np.cos(TH0) + b * np.sin(TH0) - RAD * phd,
    ]
    t = np.linspace(0.0, 3.0, 7)
    tr = integrate_vakonomic(disk(), t, Q0, qdot0=qd, mu0=mu0, params=PAR, h=1e-2)
    np.testing.assert_allclose(tr.p_hat[0, :, :2], np.broadcast_to([a, b], (7, 2)), atol=1e-12)
    assert np.ptp(tr.energy) < 1e-11 * (1 + abs(tr.energy[0, 0]))
    th, phdt = tr.q[0, :, 2], tr.qdot[0, :, 3]
    np.testing.assert_allclose(tr.mu[0, :, 0], a * np.sin(th) - b * np.cos(th), atol=1e-11)
    np.testing.assert_allclose(
        tr.mu[0, :, 1], a * np.cos(th) + b * np.sin(th) - RAD * phdt, atol=1e-11
    )


@pytest.mark.parametrize("which", ["disk", "t3"])
def test_linear_solve_field_equals_symbolic_hamiltonian(which: str) -> None:
    """vakonomic_hamiltonian_field (no inverses) == X_{h_2} of the symbolic algorithm."""
    S, par = (disk(), PAR) if which == "disk" else (t3(), [0.8])
    lin, sym = vakonomic_field(S, "linear"), vakonomic_field(S, "symbolic")
    rng = np.random.default_rng(3)
    x = rng.uniform(-0.6, 0.6, size=(6, 2 * S.dim))
    np.testing.assert_allclose(
        lin.evaluate("rhs", x, params=par), sym.evaluate("rhs", x, params=par), atol=1e-12
    )
    a = lin.evaluate("observables", x, params=par)
    b = sym.evaluate("observables", x, params=par)
    names_l, names_s = list(lin.observables), list(sym.observables)
    for k in names_l:
        np.testing.assert_allclose(a[:, names_l.index(k)], b[:, names_s.index(k)], atol=1e-12)


def test_particle_P12_and_chart_independence() -> None:
    """Seed 003 VIII.6: phat_x, phat_z, h_2 conserved, zdot = y xdot; the bases Phi, x Phi and
    z Phi give the same motion when the multipliers are related by Lambda-bar (P1, P11)."""
    q0 = np.array([0.4, -0.3, 0.7])
    xd, yd = 0.6, -0.5
    qd0 = np.array([xd, yd, q0[1] * xd])
    lam_plain = 0.45
    t = np.linspace(0.0, 4.0, 9)
    runs = {}
    for basis, factor in (("plain", 1.0), ("x", q0[0]), ("z", q0[2])):
        S = contact_particle(basis)
        runs[basis] = integrate_vakonomic(
            S, t, q0, qdot0=qd0, mu0=[lam_plain / factor], method="gauss6", h=5e-3
        )
    tr = runs["plain"]
    assert np.ptp(tr.p_hat[0, :, 0]) < 1e-12 and np.ptp(tr.p_hat[0, :, 2]) < 1e-12
    assert np.ptp(tr.energy[0]) < 1e-12
    y = tr.q[0, :, 1]
    np.testing.assert_allclose(tr.qdot[0, :, 2], y * tr.qdot[0, :, 0], atol=1e-12)
    px, py, pz = tr.p_hat[0].T
    np.testing.assert_allclose(tr.qdot[0, :, 0], (px + y * pz) / (1 + y**2), atol=1e-12)
    np.testing.assert_allclose(tr.qdot[0, :, 1], py, atol=1e-12)
    for basis in ("x", "z"):
        np.testing.assert_allclose(runs[basis].q, tr.q, atol=1e-10)
        np.testing.assert_allclose(runs[basis].p_hat, tr.p_hat, atol=1e-10)
        # the multipliers transform with the basis: lambda_phi = lambda / x, lambda_psi = lambda / z
        k = 0 if basis == "x" else 2
        np.testing.assert_allclose(
            runs[basis].mu[0, :, 0] * tr.q[0, :, k], tr.mu[0, :, 0], atol=1e-9
        )


def test_seed002_disk_special_section_is_nonholonomic() -> None:
    """Seed 002's disk: mu_a(002) = M xdot^a, i.e. lambda(003 sign) = -M (xdot, ydot), gives
    the NH motion (O13 / digest C2); NH from the coordinate equations (DOP853)."""
    S = vertical_rolling_disk(convention="mestdag-crampin")
    M, I, J, R = 1.7, 0.9, 0.6, 0.4  # noqa: E741
    phi0, thd0, phd0 = 0.2, 1.1, -0.7
    q0 = [0.1, -0.2, phi0, 0.3]
    qd0 = [R * np.cos(phi0) * thd0, R * np.sin(phi0) * thd0, phd0, thd0]
    t = np.linspace(0.0, 5.0, 11)
    cmp = compare_nonholonomic_vakonomic(
        S, t, q0, qd0, mu0=[-M * qd0[0], -M * qd0[1]], params=[M, I, J, R]
    )
    assert all(c.holds for c in cmp.checks), [c.statement for c in cmp.checks]
    # O2: the contact point moves on a circle of radius |R u_theta / u_phi|
    x, y = cmp.nonholonomic.q[0, :, 0], cmp.nonholonomic.q[0, :, 1]
    cx = q0[0] - thd0 / phd0 * R * np.sin(phi0)
    cy = q0[1] + thd0 / phd0 * R * np.cos(phi0)
    np.testing.assert_allclose(np.hypot(x - cx, y - cy), abs(R * thd0 / phd0), atol=1e-10)
