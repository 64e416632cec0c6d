"""Hamiltonisation checks (seed 004 Sections 3.4-4.2; digest seed004.md oracles O3, O4, O5,
O16, O19, O20): phi-simplicity symbolically and fitted on samples, closedness of
exp(phi) Omega_nh, and the Hamiltonised tau-flow against the original flow."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from nhfast.analysis.hamiltonisation import (
    conformal_closedness,
    fit_phi_gradient,
    gyroscopic_function,
    hamiltonisation_report,
    hamiltonised_flow_checks,
    phi_simplicity,
    phi_simplicity_on_samples,
    summary,
)
from nhfast.symbolic.equations import chaplygin_equations
from nhfast.systems import (
    chaplygin_sleigh,
    holonomic_particle,
    nonholonomic_particle,
    veselova,
)

SLEIGH = np.array([1.0, 0.5, 0.4])  # m, I, b


@functools.cache
def ves(n: int):
    return veselova(n, lambda g: 1 - g[-1])


def ves_samples(n: int, m: int = 12, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.hstack([rng.uniform(-0.4, 0.4, (m, n - 1)), rng.uniform(-1, 1, (m, n - 1))])


# ----------------------------------------------------------------- phi-simplicity


@pytest.mark.parametrize("n", [3, 4, 5])
def test_veselova_is_phi_simple_with_the_papers_phi(n):
    chk = phi_simplicity(ves(n))
    assert chk.holds is True and chk.figures["gyroscopic tensor T = 0"] is False
    s = ves(n).s
    a = ves(n).params
    phi = sp.sympify(chk.figures["phi"], locals={str(x): x for x in [*s, *a]})
    c = a[-1] + sum((a[k] - a[-1]) * s[k] ** 2 for k in range(n - 1))  # (A gamma, gamma)
    expected = -sp.log(c) / 2  # Theorem 4.3
    for sk in s:
        assert sp.simplify(sp.diff(phi - expected, sk)) == 0


@pytest.mark.parametrize("n", [3, 4, 5])
def test_veselova_fit_on_samples(n):
    a = np.linspace(1.0, 2.5, n)
    x = ves_samples(n)
    chk = phi_simplicity_on_samples(gyroscopic_function(ves(n)), x[:, : n - 1], a)
    assert chk.holds is True
    assert chk.figures["max phi-simple form residual"] < 1e-14
    # the fitted gradient is d phi = -(a_k - a_n) s_k / c (Theorem 4.3)
    s = x[:, : n - 1]
    g, res = fit_phi_gradient(gyroscopic_function(ves(n))(s, a))
    c = a[-1] + np.sum((a[:-1] - a[-1]) * s**2, axis=1)
    np.testing.assert_allclose(g, -(a[:-1] - a[-1]) * s / c[:, None], atol=1e-14)
    assert np.max(res) < 1e-14


def test_sleigh_is_not_phi_simple():
    sleigh = chaplygin_sleigh()  # G = x-translations, r = 2, valid where sin(theta) != 0
    chk = phi_simplicity(sleigh)
    assert chk.holds is False and "not closed" in chk.statement
    rng = np.random.default_rng(3)
    s = np.column_stack([rng.uniform(-1, 1, 10), rng.uniform(0.4, 2.7, 10)])  # (y, theta)
    num = phi_simplicity_on_samples(gyroscopic_function(sleigh), s, SLEIGH)
    assert num.holds is False
    # r = 2: every skew C has the phi-simple form pointwise; only closedness fails, and the
    # curl of the fitted d phi is d Theta = b m cos(theta) / ((I + m b^2) sin^2 theta)
    assert num.figures["max phi-simple form residual"] < 1e-14
    m, I, b = SLEIGH  # noqa: E741
    curl = np.abs(b * m * np.cos(s[:, 1]) / ((I + m * b**2) * np.sin(s[:, 1]) ** 2))
    np.testing.assert_allclose(num.samples["closedness residual"], curl, rtol=1e-6)


def test_particle_oracles():
    """O3 (C at a = 0.3, y = 0.5), O4 (a = 0: phi = -1/2 ln(1 + y^2)), O5 (a != 0: not)."""
    C = gyroscopic_function(nonholonomic_particle(a=sp.Rational(3, 10)))(np.array([[0.0, 0.5]]))
    assert C[0, 0, 1, 0] == pytest.approx(-0.370672097760, abs=1e-12)  # C^x_xy
    assert C[0, 0, 1, 1] == pytest.approx(-0.244399185336, abs=1e-12)  # C^y_xy
    chk0 = phi_simplicity(nonholonomic_particle(a=0))
    y = sp.Symbol("y", real=True)
    assert chk0.holds
    phi = sp.sympify(chk0.figures["phi"], locals={"y": y})
    assert sp.simplify(phi + sp.log(1 + y**2) / 2) == 0
    assert phi_simplicity(nonholonomic_particle(a=sp.Rational(3, 10))).holds is False
    assert phi_simplicity(nonholonomic_particle()).holds is False  # symbolic a


def test_holonomic_particle_has_zero_tensor_and_is_hamiltonian_as_is():
    hol = holonomic_particle(potential=lambda x, y: x * y + y**2)
    chk = phi_simplicity(hol)
    assert chk.holds and chk.figures["gyroscopic tensor T = 0"] is True
    assert chk.figures["phi"] == "0"
    red = hol.reduce()
    assert all(sp.simplify(c) == 0 for c in sp.flatten(red.C))
    # the reduced equations are Hamilton's equations of their energy
    eq = chaplygin_equations(red, simplify=False)
    s, p = eq.states[:2], eq.states[2:]
    canon = [sp.diff(eq.energy, q) for q in p] + [-sp.diff(eq.energy, q) for q in s]
    assert all(sp.simplify(f - g) == 0 for f, g in zip(eq.rhs, canon, strict=True))
    x = np.random.default_rng(2).uniform(-1, 1, (6, 4))
    cc = conformal_closedness(hol, x, [0.3])
    assert cc.holds and cc.figures["max |d Omega_nh| (control)"] == 0


@settings(max_examples=40, deadline=None)
@given(
    r=st.integers(2, 6),
    seed=st.integers(0, 2**32 - 1),
    bump=st.floats(1e-3, 1.0),
)
def test_fit_recovers_gradient_and_detects_other_tensors(r, seed, bump):
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(3, r))
    eye = np.eye(r)
    C = np.einsum("ki,mj->mijk", eye, g) - np.einsum("kj,mi->mijk", eye, g)
    fit, res = fit_phi_gradient(C)
    np.testing.assert_allclose(fit, g, atol=1e-12)
    assert np.max(res) < 1e-12
    bad = C.copy()
    if r >= 3:  # hypothesis (H): C^k_ij = 0 for distinct i, j, k
        bad[:, 0, 1, 2] += bump
        bad[:, 1, 0, 2] -= bump
    else:  # r = 2: break skew-symmetry, which no gradient can produce
        bad[:, 0, 1, 0] += bump
    assert np.min(fit_phi_gradient(bad)[1]) > 0.1 * bump


# ------------------------------------------------------ closedness of exp(phi) Omega_nh


@pytest.mark.parametrize("n", [3, 4])
def test_conformal_closedness_veselova(n):
    x = ves_samples(n, seed=n)
    a = np.linspace(1.0, 3.0, n)
    chk = conformal_closedness(ves(n), x, a)
    assert chk.holds is True
    assert chk.figures["max |exp(-phi) d(exp(phi) Omega_nh)|"] < 1e-13
    assert chk.figures["max |d Omega_nh| (control)"] > 1e-2  # Omega_nh itself is not closed


def test_conformal_closedness_fails_for_sleigh_and_particle():
    x = np.array([[0.1, 1.0, 0.3, -0.2], [0.4, 2.0, -0.5, 0.7]])
    chk = conformal_closedness(chaplygin_sleigh(), x, SLEIGH)
    assert chk.holds is False and chk.figures["max |d(d phi)| (candidate d phi closed?)"] > 0.1
    chk = conformal_closedness(nonholonomic_particle(), x, [0.5])
    assert chk.holds is False


# ------------------------------------------------------------------ flow checks


def test_flow_checks_veselova():
    x0 = np.array([[0.1, 0.2, 0.3, -0.2], [0.0, -0.1, 0.6, 0.3]])
    checks = hamiltonised_flow_checks(ves(3), x0, 4.0, [1.0, 2.0, 3.0], h=0.02)
    assert [c.holds for c in checks] == [True, True, True]
    energy, sympl, orbit = checks
    assert energy.figures["max relative energy error"] < 1e-13
    assert sympl.figures["max |M^T J M - J|"] < 1e-12
    assert sympl.figures["t-flow defect max |M^T J M - J| (control)"] > 1e-3
    assert orbit.figures["max state difference"] < 1e-10
    assert len(orbit.series["t"]) == 21 and orbit.samples["max |d(s, p)| per trajectory"].size == 2


def test_flow_checks_detect_a_coarse_step():
    """The thresholds can fail: gauss4 with a large step misses the orbit tolerance."""
    x0 = np.array([[0.1, 0.2, 0.9, -0.7]])
    checks = hamiltonised_flow_checks(ves(3), x0, 4.0, [1.0, 2.0, 5.0], method="midpoint",
                                      h=0.2, n_out=3)  # fmt: skip
    assert checks[2].holds is False
    assert checks[1].holds is True  # still symplectic


def test_flow_checks_reject_sleigh():
    with pytest.raises(ValueError, match="phi-simple"):
        hamiltonised_flow_checks(chaplygin_sleigh(), [0.1, 1.0, 0.3, -0.2], 1.0, SLEIGH)


# ----------------------------------------------------------------------- reports


def test_reports_state_the_verdicts():
    rep = hamiltonisation_report(
        nonholonomic_particle(a=0, potential=lambda x, y: x**2 / 2), [[0.1, 0.2, 0.3, -0.2]], 2.0
    )
    assert rep.checks[-1].holds is True and "Hamiltonisable" in rep.checks[-1].statement
    json.dumps(rep.to_dict())
    rep = hamiltonisation_report(chaplygin_sleigh(), [[0.1, 1.0, 0.3, -0.2]], 1.0, SLEIGH)
    assert rep.checks[-1].holds is False
    assert "not Hamiltonisable" in rep.checks[-1].statement
    text = summary(rep)
    assert text.count("FAILS") == 4 and "HOLDS" not in text


def test_bad_input():
    with pytest.raises(TypeError, match="system must be a ChaplyginSystem"):
        phi_simplicity(object())
    with pytest.raises(ValueError, match="x contains NaN"):
        conformal_closedness(ves(3), [[0.1, np.nan, 0, 0]], [1, 2, 3])
    with pytest.raises(ValueError, match=r"x must have shape \(m, 4\)"):
        conformal_closedness(ves(3), [[0.1, 0.2, 0.3]], [1, 2, 3])
    with pytest.raises(ValueError, match="params is required"):
        gyroscopic_function(ves(3))([[0.1, 0.2]])
    with pytest.raises(ValueError, match=r"C must have shape \(m, r, r, r\)"):
        fit_phi_gradient(np.zeros((2, 3, 3, 2)))
    with pytest.raises(ValueError, match="h must be a positive"):
        phi_simplicity_on_samples(gyroscopic_function(ves(3)), [[0.1, 0.2]], [1, 2, 3], h=0)
    with pytest.raises(ValueError, match="x0: 1 state.*outside the domain"):
        hamiltonised_flow_checks(ves(3), [0.9, 0.9, 0, 0], 1.0, [1, 2, 3])


@pytest.mark.slow
def test_flow_checks_veselova_5_with_numeric_solves():
    """r = 4: the Hamiltonised field uses numeric linear solves, so the flow Jacobian is taken
    by central differences; every check must still hold."""
    x0 = ves_samples(5, m=2, seed=11) * np.array([1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5])
    checks = hamiltonised_flow_checks(ves(5), x0, 2.0, np.linspace(1.0, 2.5, 5), h=0.02,
                                      n_out=5)  # fmt: skip
    assert all(c.holds for c in checks), summary(checks)
    assert checks[1].figures["jacobian"].startswith("central differences")
