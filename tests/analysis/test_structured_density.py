"""Structured candidate densities at any n (issue 11 item 4).

The Veselova body on SO(n) with the physical inertia ``I(Om) = J Om + Om J`` (issue 11 engine,
``nhfast.systems.veselova(n, form="structured", inertia=...)``) lives on
``T*S^{n-1} = {|gamma| = 1, gamma.m = 0}``.
Digest seed004.md Section 4.4 / O18: for any inertia ``Theta = d sigma`` with
``sigma = -1/2 ln det K`` (the reduced metric), so ``rho = (det K_gamma)^(-1/2)`` should be an
invariant density of the Liouville volume.  Checked here with the structured observable
``log_det_metric`` (and independently with a dense NumPy assembly of ``K``), by
``X[sigma] = -div X`` on samples, by Liouville's integral along trajectories and by flow-map
determinants from finite differences of the flow; the perturbed exponent ``rho^1.1`` and
``rho = 1`` are rejected.  The Suslov body with a tilted axis (left-invariant constraint, axis not
an eigenvector of ``J``) has no density: its Liouville integral decreases without bound along
bounded trajectories (Kozlov's asymptotic dynamics of the Suslov problem).
"""

from __future__ import annotations

import numpy as np
import pytest

from nhfast.analysis.density import discover_density, monomials
from nhfast.analysis.measure import (
    LogDensity,
    LogTerm,
    check_measure,
    divergence_values,
    flow_map_determinant,
    liouville_field,
    validate_states,
)
from nhfast.integrate import integrate
from nhfast.systems import veselova
from nhfast.systems.inertia import named_inertia
from nhfast.systems.rigid_bodies import rigid_body_params, suslov_rigid_body


def _states(n: int, k: int, rng: np.random.Generator, axis: np.ndarray | None = None):
    """``k`` states on the constraint manifold: unit gamma, m orthogonal to b (gamma or axis)."""
    g = rng.normal(size=(k, n))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    b = g if axis is None else np.broadcast_to(axis, (k, n))
    m = rng.normal(size=(k, n))
    m -= b * np.sum(b * m, axis=1, keepdims=True) / np.sum(b * b, axis=1, keepdims=True)
    return np.hstack([g, m])


def _dense_log_det(n: int, j: np.ndarray):
    """``log det`` of the reduced metric on gamma^perp, assembled column by column in NumPy
    (``K w = -P I(gamma ^ w) gamma``; ``det(K + gamma gamma^T) = det K|_perp`` for unit
    gamma): independent of the engine's Woodbury formula and its observable."""
    op = named_inertia("physical").numpy(j)
    eye = np.eye(n)

    def log_det(x: np.ndarray, par: np.ndarray) -> np.ndarray:
        g = x[:, :n] / np.linalg.norm(x[:, :n], axis=1, keepdims=True)
        cols = []
        for k in range(n):
            w = np.broadcast_to(eye[k], g.shape)
            om = g[:, :, None] * w[:, None, :] - w[:, :, None] * g[:, None, :]
            col = -np.einsum("kij,kj->ki", op(om), g)
            cols.append(col - g * np.sum(g * col, axis=1, keepdims=True))
        K = np.stack(cols, axis=-1) + g[:, :, None] * g[:, None, :]
        return np.linalg.slogdet(K)[1]

    return log_det


@pytest.fixture(scope="module")
def physical8():
    n = 8
    vf = veselova(n, form="structured", inertia="physical")
    par = rigid_body_params(n, "physical")
    x = _states(n, 40, np.random.default_rng(11))
    return n, vf, par, x


def test_log_density_arithmetic_acts_on_log_rho():
    t = LogTerm("log_det_metric")
    rho = -0.5 * t
    assert isinstance(rho, LogDensity) and rho.terms == ((-0.5, t),)
    assert (rho**1.1).terms[0][0] == pytest.approx(-0.55, rel=1e-15)
    assert (rho * 2).terms[0][0] == -1.0 and (-rho).terms[0][0] == 0.5
    both = rho + LogTerm("q", log=True)
    assert [c for c, _ in both.terms] == [-0.5, 1.0] and str(both.terms[1][1]) == "log|q|"
    assert str(rho**1.1) == "-0.55*log_det_metric"
    with pytest.raises(TypeError, match="observable name or a callable"):
        LogTerm(3.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one term"):
        LogDensity([])
    with pytest.raises(TypeError, match="LogTerm"):
        LogDensity([(1.0, "log_det_metric")])


def test_log_det_metric_is_the_log_det_of_the_reduced_metric(physical8):
    n, vf, par, x = physical8
    pr = np.tile(par, (x.shape[0], 1))
    got = LogTerm("log_det_metric").values(vf, x, pr)
    want = _dense_log_det(n, par)(x, pr)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="no observable 'nope'"):
        LogTerm("nope").values(vf, x, pr)


LOG_DET = LogTerm("log_det_metric")  # X[t] exact: forward mode through the program


def test_discover_finds_minus_half_log_det_metric(physical8):
    """X[sigma] = -div X with sigma in the structured basis: the coefficient is -1/2."""
    n, vf, par, x = physical8
    fit = discover_density(vf, x, basis=[LOG_DET], params=par)
    assert fit.exists and fit.kind == "basis" and fit.snapped, fit.statement
    assert fit.coefficients == {"log_det_metric": -0.5}
    assert fit.residual < 1e-13 and fit.holdout_residual < 1e-13
    assert isinstance(fit.log_density, LogDensity)
    # differences along the flow agree (no forward-mode library)
    by_diff = LogTerm("log_det_metric", derivative="differences")
    fit2 = discover_density(vf, x, basis=[by_diff], params=par)
    assert fit2.exists and fit2.coefficients == {"log_det_metric": -0.5}
    assert 1e-16 < fit2.residual < 1e-9
    # the perturbed exponent and rho = 1 leave an order-one residual of X[sigma] = -div X
    pr = np.tile(par, (x.shape[0], 1))
    div = divergence_values(vf, x, pr)
    for c in (-0.55, 0.0):
        res = (c * LOG_DET).along(vf, x, pr) + div
        assert np.linalg.norm(res) / np.linalg.norm(div) > 0.09


@pytest.mark.slow
def test_exact_derivative_of_a_structured_observable():
    """Forward mode through the program (n = 4): roundoff-level residual, the structured
    default basis (log observables), names in the basis, and agreement with differences."""
    n = 4
    vf = veselova(n, form="structured", inertia="physical")
    par = rigid_body_params(n, "physical", rng=np.random.default_rng(4))
    x = _states(n, 30, np.random.default_rng(12))
    fit = discover_density(vf, x, basis=["log_det_metric"], params=par)
    assert fit.exists and fit.coefficients == {"log_det_metric": -0.5}, fit.statement
    assert fit.residual < 1e-13
    default = discover_density(vf, x, params=par)
    assert default.exists and default.coefficients == {"log_det_metric": -0.5}
    pr = np.tile(par, (x.shape[0], 1))
    exact = LogTerm("log_det_metric", derivative="exact").along(vf, x, pr)
    diff = LogTerm("log_det_metric", derivative="differences").along(vf, x, pr)
    np.testing.assert_allclose(diff, exact, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(exact, 2 * divergence_values(vf, x, pr), rtol=1e-12, atol=1e-13)
    with pytest.raises(ValueError, match="no exact derivative"):
        LogTerm(lambda y, p: y[:, 0], derivative="exact").along(vf, x, pr)


def test_discover_with_an_independent_numpy_term(physical8):
    """A callable LogTerm (dense NumPy log det K; X[t] by differences along the flow) gives
    the same density: independent of the engine's observable and of forward mode."""
    n, vf, par, x = physical8
    term = LogTerm(_dense_log_det(n, par), label="logdetK")
    fit = discover_density(vf, x, basis=[term], params=par, tol=1e-8)
    assert fit.exists, fit.statement
    assert fit.coefficients == {"logdetK": -0.5}
    assert fit.residual < 1e-9


def test_check_measure_accepts_the_fit_and_rejects_perturbations(physical8):
    n, vf, par, x = physical8
    fit = discover_density(vf, x, basis=[LOG_DET], params=par)
    x0 = x[:6]
    good = check_measure(vf, fit, x0, t=2.0, params=par, n_jacobian=0)
    assert good.holds is True, good.statement
    assert good.figures["max |defect|"] < 1e-11
    rho = fit.log_density
    for bad in (rho**1.1, None):
        chk = check_measure(vf, bad, x0, t=2.0, params=par, n_jacobian=0)
        assert chk.holds is False, chk.statement
        assert chk.figures["max |defect|"] > 1e4 * chk.figures["threshold"]


def test_flow_map_determinant_on_the_manifold(physical8):
    """det DPhi_T from central differences of the flow (2 * 2n trajectories) on T*S^{n-1}
    equals rho(x_0) / rho(x_T) for rho = (det K)^(-1/2), not for rho^1.1 or rho = 1."""
    n, vf, par, x = physical8
    rho = -0.5 * LogTerm("log_det_metric")
    fm = flow_map_determinant(vf, x[:2], 2.0, par, density=rho, step=3e-5)
    assert fm.route == "differences" and np.all(np.abs(fm.defect) <= fm.error)
    assert np.abs(fm.defect).max() < 1e-6
    # the constraints are first integrals of the ambient field: manifold = ambient determinant
    assert np.abs(fm.transverse).max() < 1e-6
    np.testing.assert_allclose(fm.log_det, fm.ambient_log_det, atol=1e-6)
    # Liouville's formula: the ambient determinant is exp(ell)
    np.testing.assert_allclose(fm.ambient_log_det, fm.ell, atol=1e-6)
    perturbed = flow_map_determinant(vf, x[:2], 2.0, par, density=rho**1.1, step=3e-5)
    assert np.abs(perturbed.defect).max() > 1e3 * np.abs(fm.defect).max()
    assert np.abs(fm.log_det).max() > 1e4 * np.abs(fm.defect).max()  # rho = 1


def test_validate_states_checks_the_manifold_numerically(physical8):
    n, vf, par, x = physical8
    validate_states(vf, x, par)
    off = x.copy()
    off[3, n] += 0.1 * off[3, 0]  # gamma . m != 0
    with pytest.raises(ValueError, match="momentum_constraint"):
        validate_states(vf, off, par)
    with pytest.raises(ValueError, match="off the constraint manifold"):
        check_measure(vf, None, off, t=1.0, params=par)


def _suslov_no_density(n: int, t_final: float, deriv: str = "auto") -> None:
    vf = suslov_rigid_body(n, "physical")
    par = rigid_body_params(n, "physical", axis=True)
    axis = par[n:]
    x = _states(n, 60, np.random.default_rng(5), axis=axis)
    m = list(vf.states[n:])
    basis = [LogTerm("log_det_metric", derivative=deriv), LogTerm("energy", derivative=deriv)]
    basis += monomials(m[:4], 2)
    fit = discover_density(vf, x, basis=basis, params=par)
    assert not fit.exists and fit.residual > 0.1, fit.statement
    assert "no invariant density" in fit.statement
    # no continuous positive density at all: on the compact invariant set (sphere x energy
    # shell) |log rho| is bounded, yet Liouville's integral decreases without bound
    lf = liouville_field(vf)
    times = np.array([0.0, t_final / 2, t_final])
    y0 = np.hstack([x[:3], np.zeros((3, 1))])
    res = integrate(lf, y0, times, params=par, rtol=1e-10, atol=1e-12)
    ell = res.y[:, :, -1]
    # steady decrease: the second half loses at least half as much as the first
    assert np.all(ell[:, 1] < -2.0) and np.all(ell[:, 2] - ell[:, 1] < 0.5 * ell[:, 1])
    energy = res.observables["energy"]
    np.testing.assert_allclose(energy, np.broadcast_to(energy[:, :1], energy.shape), rtol=1e-8)
    assert np.abs(res.y[:, :, : 2 * n]).max() < 10.0


def test_suslov_with_tilted_axis_has_no_density():
    _suslov_no_density(4, 80.0, "differences")


@pytest.mark.slow
@pytest.mark.parametrize("n", [16, 32])
def test_suslov_with_tilted_axis_has_no_density_large_n(n):
    _suslov_no_density(n, 80.0)


@pytest.mark.slow
@pytest.mark.parametrize("n", [16, 32])
def test_physical_density_large_n(n):
    """Issue 11 item 4 at n = 16 and 32: found on samples, confirmed by Liouville's integral
    (with the forward-mode variational lanes) and by flow-map determinants; rho^1.1 and
    rho = 1 rejected."""
    vf = veselova(n, form="structured", inertia="physical")
    par = rigid_body_params(n, "physical", rng=np.random.default_rng(n))
    x = _states(n, 40, np.random.default_rng(n + 1))
    fit = discover_density(vf, x, basis=["log_det_metric"], params=par)
    assert fit.exists and fit.coefficients == {"log_det_metric": -0.5}, fit.statement
    assert fit.residual < 1e-12
    callable_fit = discover_density(
        vf, x, basis=[LogTerm(_dense_log_det(n, par), label="t")], params=par
    )
    assert callable_fit.exists and callable_fit.coefficients == {"t": -0.5}
    good = check_measure(vf, fit, x[:4], t=2.0, params=par, n_jacobian=2)
    assert good.holds is True, good.statement
    for bad in (fit.log_density**1.1, None):
        chk = check_measure(vf, bad, x[:4], t=2.0, params=par, n_jacobian=0)
        assert chk.holds is False
        assert chk.figures["max |defect|"] > 1e4 * chk.figures["threshold"]
    rho = fit.log_density
    fm = flow_map_determinant(vf, x[:2], 2.0, par, density=rho, step=3e-5)
    assert np.abs(fm.defect).max() < 1e-6
    np.testing.assert_allclose(fm.ambient_log_det, fm.ell, atol=1e-6)
    bad = flow_map_determinant(vf, x[:2], 2.0, par, density=rho**1.1, step=3e-5)
    assert np.abs(bad.defect).max() > 1e3 * np.abs(fm.defect).max()


@pytest.mark.slow
def test_seed_inertia_log_det_metric_is_a_power_of_c():
    """Seed inertia (digest 4.4): sigma = -1/2 log det K = -(n-2)/2 ln (A gamma, gamma) + const."""
    n = 32
    vf = veselova(n, form="structured", inertia="a-omega-a")
    a = rigid_body_params(n, "a-omega-a")
    x = _states(n, 12, np.random.default_rng(2))
    ld = LogTerm("log_det_metric").values(vf, x, np.tile(a, (12, 1)))
    c = np.sum(a * x[:, :n] ** 2, axis=1)
    rest = ld - (n - 2) * np.log(c)
    assert np.ptp(rest) < 1e-11

    def log_c(y: np.ndarray, p: np.ndarray) -> np.ndarray:
        return np.log(np.sum(p * y[:, :n] ** 2, axis=1))

    fit = discover_density(vf, x, basis=[LogTerm(log_c)], params=a)
    assert fit.exists and fit.coefficients == {"log_c": (2 - n) / 2}, fit.statement
