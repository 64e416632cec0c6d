"""Density discovery from X[sigma] = -div X on samples (seed 004 Sections 3.3, 4.1, 4.2)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from nhfast.analysis.density import DensityFit, discover_density, monomials
from nhfast.analysis.measure import LogTerm, check_measure
from nhfast.analysis.sampling import as_vector_field, sample_box
from nhfast.systems import (
    chaplygin_sleigh,
    holonomic_particle,
    nonholonomic_particle,
    veselova,
)
from nhfast.vectorfield import VectorField


def _c_chart(s: list, a: np.ndarray) -> sp.Expr:
    """(A gamma, gamma) in the hemisphere chart, exact for integer a."""
    a = [sp.Integer(int(v)) for v in a]
    return sp.expand(
        sum(a[k] * s[k] ** 2 for k in range(len(s))) + a[-1] * (1 - sum(x**2 for x in s))
    )


def _proportional(found: sp.Expr, expected: sp.Expr, symbols: list) -> bool:
    """found / expected is a nonzero constant (as polynomials: found * e0 - expected * f0 = 0)."""
    at0 = {x: 0 for x in symbols}
    f0, e0 = found.subs(at0), expected.subs(at0)
    return f0 != 0 and sp.expand(found * e0 - expected * f0) == 0


@pytest.mark.parametrize("n", [3, 4, 5, pytest.param(6, marks=pytest.mark.slow)])
def test_veselova_chart_recovers_seed_density_exactly(n):
    """Random integer A: the fit snaps to (A gamma, gamma)^((2-n)/2) exactly (up to a factor)."""
    rng = np.random.default_rng(100 + n)
    a = rng.integers(1, 10, size=n).astype(float)
    while np.all(a[:-1] == a[-1]):  # c constant: nothing to find
        a = rng.integers(1, 10, size=n).astype(float)
    vf = as_vector_field(veselova(n))
    r = n - 1
    x = sample_box(vf, 12 * (r + 1) * (r + 2), [-0.6] * r + [-1] * r, [0.6] * r + [1] * r,
                   params=a, seed=n)  # fmt: skip
    fit = discover_density(vf, x, params=a)
    assert fit.exists, fit.statement
    assert fit.kind == "log-quadratic" and fit.snapped
    assert fit.residual < 1e-12
    base, exponent = fit.density.as_base_exp()
    assert exponent == sp.Rational(2 - n, 2)
    assert _proportional(base, _c_chart(vf.states[:r], a), vf.states[:r])
    if n > 4:
        return
    # the closed form passes the trajectory check too
    chk = check_measure(vf, fit, x[:4], t=0.5, params=a, n_jacobian=0)
    assert chk.holds is True, chk.statement


@pytest.mark.parametrize("n", [7, pytest.param(8, marks=pytest.mark.slow)])
def test_veselova_embedded_recovers_density_random_real_a(n):
    """Whole-sphere form, random real A: Q proportional to (A gamma, gamma), exponent (2-n)/2."""
    rng = np.random.default_rng(200 + n)
    a = rng.uniform(0.5, 4.0, size=n)
    vf = veselova(n, form="embedded")
    x = sample_box(vf, 3 * (n + 1) * (n + 2), -1, 1, seed=n)
    fit = discover_density(vf, x, params=a)
    assert fit.exists, fit.statement
    base, exponent = fit.density.as_base_exp()
    assert exponent == sp.Rational(2 - n, 2)
    gam = vf.states[:n]
    c = sum(sp.Float(a[k]) * gam[k] ** 2 for k in range(n))
    # compare as coefficient vectors in the monomial basis of degree <= 2
    mons = monomials(gam, 2, constant=True)
    poly_b, poly_c = sp.Poly(base, *gam), sp.Poly(c, *gam)
    vb = np.array([float(poly_b.coeff_monomial(m)) for m in mons])
    vc = np.array([float(poly_c.coeff_monomial(m)) for m in mons])
    # on the sphere Q is only determined up to multiples of |gamma|^2 - 1: compare on samples
    qb = sp.lambdify(gam, base)(*x[:, :n].T)
    qc = sp.lambdify(gam, c)(*x[:, :n].T)
    ratio = qb / qc
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-9)
    assert np.linalg.norm(vb) > 0 and np.linalg.norm(vc) > 0


def test_sleigh_has_no_density_in_the_basis():
    vf = as_vector_field(chaplygin_sleigh())
    p = [1.0, 0.5, 0.3]
    x = sample_box(vf, 200, [-1, 0.3, -1, -1], [1, 2.8, 1, 1], params=p, seed=3)
    fit = discover_density(vf, x, params=p)
    assert fit.exists is False
    assert fit.density is None
    assert fit.residual > 1e-3  # far above the tolerance, not a borderline case
    assert "no invariant density" in fit.statement
    assert "terms log|P|" in fit.statement  # the default basis says what it tried
    chk = fit.to_check()
    assert chk.holds is False and chk.figures["residual"] == fit.residual


def test_user_basis():
    """A user basis: log(1 + y^2) finds the particle's basic density (a = 0), log sin(theta)
    does not find one for the sleigh (b > 0: d Theta != 0)."""
    xs, y = sp.symbols("x y", real=True)
    vf = as_vector_field(nonholonomic_particle(a=0, potential=xs * y))
    yy = vf.states[1]
    x = sample_box(vf, 60, -1, 1, seed=8)
    fit = discover_density(vf, x, basis=[sp.log(1 + yy**2), yy, sp.Integer(3)])
    assert fit.exists and fit.kind == "basis" and fit.snapped
    assert sp.expand(fit.sigma + sp.log(1 + yy**2) / 2) == 0
    assert len(fit.basis) == 2  # the constant was dropped
    sleigh = as_vector_field(chaplygin_sleigh())
    th = sleigh.states[1]
    p = [1.0, 0.5, 0.3]
    xs_ = sample_box(sleigh, 60, [-1, 0.3, -1, -1], [1, 2.8, 1, 1], params=p, seed=4)
    fit = discover_density(sleigh, xs_, basis=[sp.log(sp.sin(th)), th], params=p,
                           log_quadratic=False)  # fmt: skip
    assert not fit.exists and fit.residual > 1e-3


def test_particle_non_basic_density_needs_momenta():
    """Seed 004 Section 4.1: exp(a x + p_y^2) for U_a; none in the shape coordinates alone."""
    y = sp.Symbol("y", real=True)
    a = sp.Rational(1, 2)
    vf = as_vector_field(nonholonomic_particle(a=a, potential=sp.log(1 + (1 - a**2) * y**2) / 4))
    xs, _, _, py = vf.states
    x = sample_box(vf, 200, -1, 1, seed=3)
    fit = discover_density(vf, x, variables="all")
    assert fit.exists and fit.kind == "basis" and fit.snapped
    assert sp.expand(fit.sigma - (a * xs + py**2)) == 0
    assert discover_density(vf, x).exists is False


def test_particle_a_zero_basic_density():
    xs, y = sp.symbols("x y", real=True)
    vf = as_vector_field(nonholonomic_particle(a=0, potential=xs**2 + sp.cos(y)))
    x = sample_box(vf, 200, -1, 1, seed=5)
    fit = discover_density(vf, x)
    # found as alpha log Q, or (since the default basis has log(P**2) for the factor
    # P = 1 + y^2 of the right-hand side) as -log(P**2)/4: the same density either way
    assert fit.exists and fit.kind in ("log-quadratic", "basis")
    assert fit.singular == []
    y_ = vf.states[1]
    assert sp.simplify(fit.density - (1 + y_**2) ** sp.Rational(-1, 2)) == 0


def test_holonomic_gives_constant_density():
    vf = as_vector_field(holonomic_particle())
    x = sample_box(vf, 50, -1, 1, seed=6)
    fit = discover_density(vf, x, params=[0.3])
    assert fit.exists and fit.kind == "constant" and fit.density == 1


@settings(max_examples=5, deadline=None)
@given(scale=st.floats(0.1, 10.0), seed=st.integers(0, 1000))
def test_recovery_does_not_depend_on_sample_scale(scale, seed):
    """Property: scaling the momenta of the samples (same shape points) gives the same density."""
    vf = as_vector_field(veselova(3))
    a = np.array([2.0, 5.0, 3.0])
    x = sample_box(vf, 120, [-0.6, -0.6, -1, -1], [0.6, 0.6, 1, 1], params=a, seed=seed)
    x[:, 2:] *= scale
    fit = discover_density(vf, x, params=a)
    assert fit.exists
    s = vf.states[:2]
    base, exponent = fit.density.as_base_exp()
    assert exponent == sp.Rational(-1, 2)
    assert _proportional(base, _c_chart(s, a), s)


def test_bad_input():
    vf = as_vector_field(veselova(3))
    a = [1.0, 2.0, 3.0]
    x = sample_box(vf, 60, [-0.5, -0.5, -1, -1], [0.5, 0.5, 1, 1], params=a)
    with pytest.raises(ValueError, match="samples: 10 states are too few"):
        discover_density(vf, x[:10], params=a)
    with pytest.raises(ValueError, match="basis\\[0\\].*neither states nor params"):
        discover_density(vf, x, basis=[sp.Symbol("z")], params=a)
    with pytest.raises(ValueError, match="basis contains no function of the states"):
        discover_density(vf, x, basis=[sp.Integer(2)], params=a)
    with pytest.raises(ValueError, match="variables must be states"):
        discover_density(vf, x, variables=[sp.Symbol("q")], params=a)
    with pytest.raises(ValueError, match="tol must be"):
        discover_density(vf, x, tol=2.0, params=a)
    bad = x.copy()
    bad[0, 0] = np.inf
    with pytest.raises(ValueError, match="samples contains NaN"):
        discover_density(vf, bad, params=a)
    with pytest.raises(ValueError, match="samples must have shape"):
        discover_density(vf, x[:, :2], params=a)
    assert isinstance(discover_density(vf, x, params=a, log_quadratic=False), DensityFit)


def _div_rho_x(states: list, rhs: list, rho: sp.Expr) -> sp.Expr:
    """div(rho X), simplified: zero iff rho is an invariant density (independent of the fit)."""
    return sp.simplify(sum(sp.diff(rho * f, s) for f, s in zip(rhs, states, strict=True)))


def test_log_abs_density_found_by_default_and_reported_singular():
    """a' = a b, b' = -a^2 (issue 11): rho = 1/|a| with the default basis, singular on a = 0."""
    a, b = sp.symbols("a b", real=True)
    vf = VectorField([a, b], [a * b, -(a**2)], name="ab")
    x = np.random.default_rng(1).uniform(-1, 1, (200, 2))
    fit = discover_density(vf, x)
    assert fit.exists and fit.kind == "basis" and fit.snapped, fit.statement
    assert sp.expand(fit.sigma + sp.log(a**2) / 2) == 0
    assert sp.simplify(fit.density - 1 / sp.Abs(a)) == 0
    assert _div_rho_x([a, b], vf.rhs, 1 / a) == 0  # independent: div(X / a) = 0 for a != 0
    assert fit.singular == [a]
    assert "blows up on a = 0" in fit.statement
    assert fit.to_check().figures["singular on"] == "a = 0"
    # without the log terms the polynomial basis misses it (the residual 0.67)
    fit0 = discover_density(vf, x, log_terms=False, log_quadratic=False)
    assert not fit0.exists and fit0.residual > 0.1
    # a sample on a = 0 drops log(a^2) from the basis instead of producing NaN
    x0 = x.copy()
    x0[0, 0] = 0.0
    fit1 = discover_density(vf, x0, log_quadratic=False)
    assert all(f != sp.log(a**2) for f in fit1.basis)
    assert np.isfinite(fit1.residual)


def test_log_abs_of_rhs_factor():
    """X = P * (Hamiltonian field of x^2 + y^2) with P = 1 + x - y^2: rho = 1/|P| is found from
    the factor P of the right-hand side and reported singular on P = 0 (it crosses the box);
    a positive factor 2 + x^2 + y^2 gives a density that is nowhere singular."""
    x_, y_ = sp.symbols("x y", real=True)
    for P, crosses in ((1 + x_ - y_**2, True), (2 + x_**2 + y_**2 + x_ * y_, False)):
        rhs = [P * y_, -P * x_]
        vf = VectorField([x_, y_], rhs, name="P-scaled rotation")
        x = np.random.default_rng(2).uniform(-1, 1, (150, 2))
        fit = discover_density(vf, x, variables="all", log_quadratic=False)
        assert fit.exists, fit.statement
        assert _div_rho_x([x_, y_], rhs, 1 / P) == 0
        ratio = sp.simplify(fit.density * P)
        assert (
            ratio.free_symbols == set()
            or sp.simplify(ratio**2 - 1) == 0
            or (sp.simplify(sp.Abs(P) * fit.density) == 1)
        )
        if crosses:
            assert len(fit.singular) == 1 and sp.expand(fit.singular[0] ** 2 - P**2) == 0
            assert "blows up" in fit.statement
        else:
            assert fit.singular == [] and "singular" not in fit.statement


def test_an_irrational_density_prints_readably():
    """``rho = |x|**(pi/3)`` of ``x' = x, y' = -(1 + pi/3) y``: the coefficients of the basis
    members that do not belong are exactly 0 (not round-off), the fitted one prints with 12
    digits in the statement, and the singular factor's exponent as a short float."""
    x, y = sp.symbols("x y")
    c = sp.pi / 3
    vf = VectorField([x, y], [x, -(1 + c) * y], name="linear")
    rng = np.random.default_rng(1)
    pts = rng.uniform(0.5, 2, (40, 2)) * rng.choice([-1, 1], (40, 2))
    fit = discover_density(vf, pts, basis=[sp.log(x**2), y**2, x * y])
    assert fit.exists, fit.statement
    assert fit.coefficients["y**2"] == 0.0 and fit.coefficients["x*y"] == 0.0
    assert fit.coefficients["log(x**2)"] == pytest.approx(float(c) / 2, rel=1e-12)
    assert fit.sigma.free_symbols == {x}
    assert "rho = (x**2)**0.523598775598, " in fit.statement
    assert "|x|**(1.04720) vanishes on x = 0" in fit.statement


def test_a_log_term_label_names_its_quantity():
    """``LogTerm(..., log=True, label="P")`` prints ``log|P|``: the label names the quantity,
    the log stays visible."""
    assert str(LogTerm("q", log=True, label="P")) == "log|P|"
    assert str(LogTerm("q", log=True)) == "log|q|"
    assert str(LogTerm("q", label="P")) == "P"
