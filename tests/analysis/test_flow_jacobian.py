"""Flow-map Jacobians and determinants to the accuracy of the integration (issue 32 item 3).

``flow_jacobian`` carries the base state and every tangent column in one lane (the tangent
columns step with their base), ``flow_map_determinant`` returns an error estimate (Richardson
extrapolation of the differences, or a second variational run).  References: the matrix
exponential of a linear flow, SciPy's DOP853 on the variational equations of the unrolled
SymPy field, and the invariant density ``rho = (det K)^(-1/2)`` of the Veselova body with the
physical inertia (García-Naranjo & Marrero 2020, Thm 3.11: ``rho(x_t) det DPhi_t = rho(x_0)``
on ``T*S^{n-1}``).
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import solve_ivp
from scipy.linalg import expm

import nhfast.analysis as nha
from nhfast._abi import LANE
from nhfast.analysis import flow_jacobian, flow_map_determinant
from nhfast.analysis.measure import LogTerm, manifold_log_det
from nhfast.analysis.tangents import (
    TANGENT_SCALE,
    column_split,
    tangent_initial,
    tangent_split,
)
from nhfast.systems import veselova
from nhfast.systems.rigid_bodies import rigid_body_params
from nhfast.vectorfield import VectorField

A = np.array([[0.1, 1.0, 0.0], [-1.0, -0.3, 0.5], [0.2, 0.0, -0.4]])
RHO = -0.5 * LogTerm("log_det_metric")


@pytest.fixture(scope="module")
def linear():
    u = sp.symbols("u0:3")
    k = sp.Symbol("k")
    rhs = list(k * sp.Matrix(A.tolist()) * sp.Matrix(u))
    return VectorField(states=list(u), rhs=rhs, params=[k], name="linear_flowjac")


def _sphere_states(n: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(k, n))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    m = rng.normal(size=(k, n))
    m -= g * np.sum(g * m, axis=1, keepdims=True)
    return np.hstack([g, m])


@pytest.fixture(scope="module")
def body8():
    n = 8
    vf = veselova(n, form="structured", inertia="physical")
    par = rigid_body_params(n, "physical")
    return vf, par, _sphere_states(n, 3, 7)


def test_flow_jacobian_is_public():
    assert "flow_jacobian" in nha.__all__
    assert nha.flow_jacobian is flow_jacobian


def test_linear_flow_is_the_matrix_exponential(linear):
    x0 = np.random.default_rng(0).normal(size=(2, 3))
    times = np.linspace(0.0, 3.0, 4)
    x, M = flow_jacobian(linear, x0, times, [0.7], rtol=1e-12, atol=1e-14)
    assert x.shape == (2, 4, 3) and M.shape == (2, 4, 3, 3)
    for j, t in enumerate(times):
        E = expm(0.7 * t * A)
        np.testing.assert_allclose(M[:, j], np.broadcast_to(E, (2, 3, 3)), rtol=0, atol=1e-10)
        np.testing.assert_allclose(x[:, j], x0 @ E.T, rtol=0, atol=1e-10)
    # fixed steps: rk4's global error O(h^4) with h = 1e-2 at t = 3
    _, M4 = flow_jacobian(linear, x0, times, [0.7], method="rk4", h=1e-2)
    err = np.abs(M4[:, -1] - expm(2.1 * A)).max()
    _, M8 = flow_jacobian(linear, x0, times, [0.7], method="rk4", h=2e-2)
    err2 = np.abs(M8[:, -1] - expm(2.1 * A)).max()
    assert 1e-13 < err < 1e-8 and 12 < err2 / err < 20  # fourth order: 16


def test_linear_determinant_and_its_estimates(linear):
    x0 = np.random.default_rng(1).normal(size=(2, 3))
    exact = 0.7 * 2.0 * np.trace(A)
    var = flow_map_determinant(linear, x0, 2.0, [0.7])
    assert var.route == "variational" and np.all(np.isnan(var.step))
    assert np.all(np.abs(var.log_det - exact) <= var.error) and np.all(var.error < 1e-11)
    np.testing.assert_allclose(var.ell, exact, rtol=1e-12)
    for step in (None, 1e-3):
        fd = flow_map_determinant(linear, x0, 2.0, [0.7], step=step, route="differences")
        assert fd.route == "differences"
        assert np.all(np.abs(fd.log_det - exact) <= fd.error)
    # the automatic step beats the single default step of the former versions (1e-4, no
    # extrapolation: about 1e-9 here)
    auto = flow_map_determinant(linear, x0, 2.0, [0.7], route="differences")
    assert np.all(auto.error < 1e-8)
    assert np.all(np.isin(auto.step, nha.measure.AUTO_STEPS))


def _scipy_variational(vf, x0: np.ndarray, par: np.ndarray, T: float) -> np.ndarray:
    """``DPhi_T(x0)`` by SciPy's DOP853 on ``(x, M)``, the Jacobian from the unrolled SymPy
    right-hand side (independent of the forward-mode program and of the core)."""
    u = vf.unrolled()
    J = sp.Matrix(u.rhs).jacobian(u.states)
    f = sp.lambdify([u.states, u.params], [u.rhs, J], "numpy")
    n = len(u.states)

    def rhs(_t, y):
        fx, Jx = f(y[:n], par)
        return np.concatenate(
            [np.asarray(fx, float), (np.asarray(Jx, float) @ y[n:].reshape(n, n)).ravel()]
        )

    y0 = np.concatenate([x0, np.eye(n).ravel()])
    sol = solve_ivp(rhs, (0.0, T), y0, method="DOP853", rtol=1e-13, atol=1e-15)
    assert sol.success
    return sol.y[n:, -1].reshape(n, n)


def test_structured_jacobian_matches_scipy():
    n = 4
    vf = veselova(n, form="structured", inertia="physical")
    par = rigid_body_params(n, "physical")
    x0 = _sphere_states(n, 1, 3)
    _, M = flow_jacobian(vf, x0, [0.0, 3.0], par, rtol=1e-13, atol=1e-15)
    ref = _scipy_variational(vf, x0[0], par, 3.0)
    scale = np.abs(ref).max()
    assert scale > 1.0
    np.testing.assert_allclose(M[0, -1], ref, rtol=0, atol=1e-10 * scale)
    # grouped columns (three lanes of three, one slot padded), all columns in one lane
    for columns in (3, 8):
        _, Mg = flow_jacobian(vf, x0, [0.0, 3.0], par, rtol=1e-13, atol=1e-15, columns=columns)
        np.testing.assert_allclose(Mg[0, -1], ref, rtol=0, atol=1e-10 * scale)


def test_weighted_determinant_of_the_veselova_body_is_one(body8):
    """t = 20, rtol 1e-13: rho(x_t) det DPhi_t / rho(x_0) = 1 to 1e-10, with the lanes of a
    trajectory stepping together and with one lane (the former lane per column, each with its
    own steps, missed by 5e-10 here)."""
    vf, par, x0 = body8
    k = x0.shape[0]
    pars = np.tile(par, (k, 1))
    for columns in (None, vf.n_state):  # lanes stepping together; one lane
        x, M = flow_jacobian(vf, x0, [0.0, 20.0], par, rtol=1e-13, atol=1e-15, columns=columns)
        ld, transverse = manifold_log_det(vf, x0, x[:, -1], M[:, -1], pars)
        logr = RHO.values(vf, np.vstack([x0, x[:, -1]]), np.vstack([pars, pars]))
        weighted = ld + logr[k:] - logr[:k]
        assert np.abs(weighted).max() < 1e-10
        assert np.abs(ld).max() > 1e-2  # the volume itself changes
        assert np.abs(transverse).max() < 1e-10
    fm = flow_map_determinant(vf, x0, 20.0, par, density=RHO)
    assert fm.route == "variational"
    assert np.all(np.abs(fm.defect) <= fm.error) and np.all(fm.error < 1e-10)
    np.testing.assert_allclose(fm.ambient_log_det, fm.ell, rtol=0, atol=1e-10)


def test_fixed_steps_share_the_base_state_across_lanes(body8):
    """Grouped columns with rk4: every lane takes the same steps, so the base states of the
    lanes agree to the last bit and the Jacobian is the one-lane Jacobian."""
    vf, par, x0 = body8
    n = vf.n_state
    m, lanes = column_split(n, 5)
    assert (m, lanes) == (4, 4)
    from nhfast.analysis.tangents import tangent_field
    from nhfast.integrate import integrate

    y0 = tangent_initial(x0[:1], m, lanes)
    res = integrate(
        tangent_field(vf, m),
        y0,
        [0.0, 2.0],
        params=np.tile(par, (lanes, 1)),
        method="rk4",
        h=1e-2,
        observables=False,
    )
    base = res.y[:, -1, :n]
    assert np.array_equal(base, np.broadcast_to(base[0], base.shape))
    _, Mg = tangent_split(res.y, 1, n, m)
    _, M1 = flow_jacobian(vf, x0[:1], [0.0, 2.0], par, method="rk4", h=1e-2, columns=n)
    np.testing.assert_allclose(Mg[0, -1], M1[0, -1], rtol=0, atol=1e-13 * np.abs(M1).max())


def test_richardson_estimate_bounds_the_error(body8):
    """Differences of the flow (independent of the variational equations): at t = 10 the
    error of a single central difference at step 1e-4 is 1e-5 to 1e-3 here; the extrapolated
    value is within its estimate, and the automatic ladder is far more accurate."""
    vf, par, x0 = body8
    given = flow_map_determinant(vf, x0, 10.0, par, density=RHO, step=1e-4)
    auto = flow_map_determinant(vf, x0, 10.0, par, density=RHO, route="differences")
    for fm in (given, auto):
        assert fm.route == "differences"
        assert np.all(np.abs(fm.defect) <= fm.error), (fm.defect, fm.error)
    assert np.all(auto.error < given.error)
    assert np.abs(auto.defect).max() < 1e-6


def test_bad_arguments_raise(linear):
    x0 = np.zeros((1, 3)) + 0.5
    with pytest.raises(ValueError, match="h must be a positive"):
        flow_jacobian(linear, x0, 1.0, [1.0], method="rk4", h=-0.1)
    with pytest.raises(TypeError, match="h must be a positive number"):
        flow_jacobian(linear, x0, 1.0, [1.0], h="0.1")
    with pytest.raises(ValueError, match="columns must be a positive integer"):
        flow_jacobian(linear, x0, 1.0, [1.0], columns=0)
    with pytest.raises(ValueError, match="t must be"):
        flow_jacobian(linear, x0, -1.0, [1.0])
    with pytest.raises(ValueError, match="route must be"):
        flow_map_determinant(linear, x0, 1.0, [1.0], route="exact")
    with pytest.raises(ValueError, match="step must be a positive"):
        flow_map_determinant(linear, x0, 1.0, [1.0], step=0.0)
    with pytest.raises(ValueError, match="not with route='variational'"):
        flow_map_determinant(linear, x0, 1.0, [1.0], step=1e-4, route="variational")
    with pytest.raises(ValueError, match="h is required"):
        flow_map_determinant(linear, x0, 1.0, [1.0], method="rk4")


def test_leaving_the_domain_raises_naming_the_condition():
    """The tangent field is integrated without its own watch; the base field's domain is
    checked at the output rows (a rotation leaves {s > 0} at t = pi / 2)."""
    from nhfast.codegen.indexed import IndexedProgram
    from nhfast.errors import IntegrationError
    from nhfast.structured_field import StructuredVectorField

    prog = IndexedProgram(2)
    s = prog.state_scalar("s")
    u = prog.state_scalar("u")
    prog.output("rhs", [-u, s])
    vf = StructuredVectorField(prog, name="rotation_flowjac", domain={"s > 0": s})
    x, M = flow_jacobian(vf, [[1.0, 0.0]], [0.0, 1.0, 1.5], rtol=1e-12, atol=1e-14)
    c, d = np.cos(1.5), np.sin(1.5)
    np.testing.assert_allclose(M[0, -1], [[c, -d], [d, c]], rtol=0, atol=1e-11)
    with pytest.raises(IntegrationError, match=r"domain\['s > 0'\].*t = 2") as err:
        flow_jacobian(vf, [[1.0, 0.0], [0.5, 0.0]], [0.0, 1.0, 2.0], rtol=1e-12, atol=1e-14)
    assert err.value.status.tolist() == [LANE["left_domain"]] * 2


def test_column_split_balances_the_lanes():
    assert column_split(16, None) == (1, 16)  # one column per lane by default
    assert column_split(10, 4) == (4, 3) and column_split(10, 100) == (10, 1)
    y0 = tangent_initial(np.arange(6.0).reshape(2, 3), 2, 2)  # 3 columns: 2 + 1 and a pad
    assert y0.shape == (4, 3 + 2 * 3)
    assert np.abs(y0[:, 3:]).max() == TANGENT_SCALE  # several lanes: scaled
    M = tangent_split(y0[:, None, :], 2, 3, 2)[1]
    np.testing.assert_array_equal(M[:, 0], np.broadcast_to(np.eye(3), (2, 3, 3)))
    one = tangent_initial(np.ones((1, 3)), 3, 1)  # one lane: not scaled
    np.testing.assert_array_equal(one[0, 3:], np.eye(3).ravel())


def test_adaptive_lanes_of_a_trajectory_take_the_same_steps(body8):
    """Scaled tangents (the default split, one column per lane) leave the step-size control
    to the base: DOP853 takes the same steps in every lane, the base states agree to the bit;
    unscaled, the lanes drift apart."""
    from nhfast.analysis.tangents import tangent_field
    from nhfast.integrate import integrate

    vf, par, x0 = body8
    n = vf.n_state
    y0 = tangent_initial(x0[:1], 1, n)
    kw = dict(params=np.tile(par, (n, 1)), rtol=1e-13, atol=1e-15, observables=False)
    res = integrate(tangent_field(vf, 1), y0, [0.0, 20.0], **kw)
    base = res.y[:, -1, :n]
    assert np.array_equal(base, np.broadcast_to(base[0], base.shape))
    assert np.ptp(res.stats["steps"]) == 0
    y0[:, n:] /= TANGENT_SCALE
    drift = integrate(tangent_field(vf, 1), y0, [0.0, 20.0], **kw).y[:, -1, :n]
    assert np.abs(drift - drift[0]).max() > 0
