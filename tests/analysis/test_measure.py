"""Invariant-measure checks on sampled trajectories (seed 004 Sections 3.3, 4.1, 4.2)."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from nhfast.analysis.measure import check_measure
from nhfast.analysis.result import Check
from nhfast.analysis.sampling import as_vector_field, sample_box
from nhfast.symbolic.chaplygin import invariant_measure
from nhfast.systems import (
    chaplygin_sleigh,
    holonomic_particle,
    nonholonomic_particle,
    suslov,
    veselova,
)


def _chart(n: int):
    """Chart form, random A (seeded by n), 6 states well inside the hemisphere."""
    vf = as_vector_field(veselova(n))
    a = np.random.default_rng(1000 + n).uniform(0.5, 3.0, size=n)
    r = n - 1
    s = vf.states[:r]
    c = sum(a[k] * s[k] ** 2 for k in range(r)) + a[-1] * (1 - sum(x**2 for x in s))
    x0 = sample_box(vf, 6, [-0.35] * r + [-0.5] * r, [0.35] * r + [0.5] * r, params=a, seed=n)
    return vf, a, c, x0


@pytest.fixture(scope="module")
def chart3():
    return _chart(3)


@pytest.mark.parametrize("n", [3, 4])
def test_veselova_chart_density_preserved_liouville_not(n):
    vf, a, c, x0 = _chart(n)
    seed_density = c ** sp.Rational(2 - n, 2)
    ok = check_measure(vf, seed_density, x0, t=1.0, params=a, n_jacobian=3)
    assert isinstance(ok, Check)
    assert ok.holds is True, ok.statement
    assert ok.figures["max |log det DPhi - ell|"] < 1e-10  # Liouville's formula on the run
    liou = check_measure(vf, None, x0, t=1.0, params=a, n_jacobian=0)
    assert liou.holds is False, liou.statement
    assert liou.figures["max |defect|"] > 1e3 * liou.figures["threshold"]
    # the wrong exponent (digest V13) is not invariant either
    wrong = check_measure(vf, c ** sp.Rational(n - 2, 2), x0, t=1.0, params=a, n_jacobian=0)
    assert wrong.holds is False


@pytest.mark.parametrize("n", [5, 6])
def test_veselova_embedded_density_preserved_liouville_not(n):
    """Whole-sphere form; density c^((2-n)/2) w.r.t. dgamma dm on the constraint manifold."""
    vf = veselova(n, form="embedded", potential=lambda g: g[0] * g[1])
    a = np.random.default_rng(2000 + n).uniform(0.5, 3.0, size=n)
    x0 = sample_box(vf, 6, -1, 1, seed=n, params=a)
    rho = sp.exp(vf.observables["log_density"])
    ok = check_measure(vf, rho, x0, t=2.0, params=a, n_jacobian=2)
    assert ok.holds is True, ok.statement
    liou = check_measure(vf, None, x0, t=2.0, params=a, n_jacobian=0)
    assert liou.holds is False, liou.statement


@pytest.mark.slow
@pytest.mark.parametrize("n", [5, 6])
def test_veselova_chart_large_n(n):
    vf, a, c, x0 = _chart(n)
    ok = check_measure(vf, c ** sp.Rational(2 - n, 2), x0, t=1.0, params=a, n_jacobian=2)
    assert ok.holds is True, ok.statement
    assert check_measure(vf, None, x0, t=1.0, params=a, n_jacobian=0).holds is False


def test_liouville_defect_matches_scipy(chart3):
    """For rho = 1 the defect is ell(t) = int div X: compare with SciPy DOP853."""
    vf, a, _, x0 = chart3
    chk = check_measure(vf, None, x0[:2], t=[0.0, 0.5, 1.0], params=a, n_jacobian=0)
    args = [*vf.states, *vf.params]
    f = sp.lambdify(args, vf.rhs, "numpy")
    div = sp.lambdify(args, vf.divergence(), "numpy")

    def rhs(_t, y):
        return [*f(*y[:-1], *a), div(*y[:-1], *a)]

    for k in range(2):
        sol = solve_ivp(rhs, (0, 1), [*x0[k], 0.0], method="DOP853", rtol=1e-13, atol=1e-14)
        assert abs(chk.samples["final defect"][k] - sol.y[-1, -1]) < 1e-9


def test_check_record_shapes(chart3):
    vf, a, c, x0 = chart3
    t = np.linspace(0, 0.5, 7)
    chk = check_measure(vf, 1 / sp.sqrt(c), x0, t=t, params=a, n_jacobian=2)
    assert set(chk.series) >= {"t", "max |defect|", "median |defect|", "error estimate"}
    for v in chk.series.values():
        assert np.shape(v) == (7,)
    assert chk.samples["final defect"].shape == (x0.shape[0],)
    assert chk.figures["threshold"] >= 10 * 1e-10  # safety * rtol * G with G >= 1
    assert chk.to_dict()["holds"] is True


def test_sampler_callable(chart3):
    vf, a, c, _ = chart3
    sampler = partial(sample_box, n=5, low=[-0.3, -0.3, -1, -1], high=[0.3, 0.3, 1, 1], params=a)
    chk = check_measure(vf, 1 / sp.sqrt(c), sampler, t=0.5, params=a, n_jacobian=1)
    assert chk.holds is True and chk.figures["n_trajectories"] == 5


def test_threshold_follows_the_tolerance(chart3):
    vf, a, c, x0 = chart3
    loose = check_measure(vf, 1 / sp.sqrt(c), x0, t=1.0, params=a, rtol=1e-6, atol=1e-8)
    tight = check_measure(vf, 1 / sp.sqrt(c), x0, t=1.0, params=a, rtol=1e-11, atol=1e-13)
    assert loose.holds and tight.holds
    assert loose.figures["threshold"] > 1e3 * tight.figures["threshold"]


def test_particle_non_basic_measure():
    """Seed 004 Section 4.1: with U_a = 1/4 ln(1 + (1-a^2) y^2), exp(a x + p_y^2) is invariant."""
    y = sp.Symbol("y", real=True)
    a = sp.Rational(1, 2)
    vf = as_vector_field(nonholonomic_particle(a=a, potential=sp.log(1 + (1 - a**2) * y**2) / 4))
    x, _, _, py = vf.states
    x0 = sample_box(vf, 6, -1, 1, seed=1)
    ok = check_measure(vf, sp.exp(a * x + py**2), x0, t=2.0)
    assert ok.holds is True, ok.statement
    assert check_measure(vf, None, x0, t=2.0, n_jacobian=0).holds is False
    basic = check_measure(vf, 1 / sp.sqrt(1 + y**2), x0, t=2.0, n_jacobian=0)
    assert basic.holds is False  # for a != 0 there is no basic measure
    # the non-basic measure is specific to U_a
    other = as_vector_field(nonholonomic_particle(a=a, potential=y**2 / 2))
    assert check_measure(other, sp.exp(a * x + py**2), x0, t=2.0, n_jacobian=0).holds is False


def test_particle_geometry_measure_with_potential():
    """a = 0: the basic measure (1+y^2)^(-1/2) survives any potential (Corollary 3.14)."""
    xs, y = sp.symbols("x y", real=True)
    system = nonholonomic_particle(a=0, potential=xs**2 / 2 + y**2 + sp.sin(xs * y) / 3)
    vf = as_vector_field(system)
    x0 = sample_box(vf, 6, -1, 1, seed=2)
    chk = check_measure(system, "geometry", x0, t=2.0)
    assert chk.holds is True, chk.statement
    found = sp.sympify(chk.figures["density"], locals={"y": y})
    assert sp.simplify(found - 1 / sp.sqrt(1 + y**2)) == 0
    assert check_measure(vf, None, x0, t=2.0, n_jacobian=0).holds is False


def test_sleigh_liouville_not_preserved():
    system = chaplygin_sleigh()
    vf = as_vector_field(system)
    p = [1.0, 0.5, 0.3]
    x0 = sample_box(vf, 6, [-1, 1.0, -1, -1], [1, 2.1, 1, 1], seed=3, params=p)
    chk = check_measure(vf, None, x0, t=0.5, params=p)
    assert chk.holds is False, chk.statement
    with pytest.raises(ValueError, match="density: the result holds no density"):
        check_measure(system, invariant_measure(system), x0, t=0.5, params=p)


def test_holonomic_particle_preserves_liouville():
    y = sp.Symbol("y", real=True)
    vf = as_vector_field(holonomic_particle(potential=y**2))
    x0 = sample_box(vf, 6, -1, 1, seed=4)
    chk = check_measure(vf, None, x0, t=2.0, params=[0.4])
    assert chk.holds is True, chk.statement


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(k=st.floats(1e-3, 1e3), perm_seed=st.integers(0, 2**16))
def test_constant_multiple_and_lane_order(chart3, k, perm_seed):
    vf, a, c, x0 = chart3
    rho = c ** sp.Rational(-1, 2)
    base = check_measure(vf, rho, x0, t=0.5, params=a, n_jacobian=0)
    scaled = check_measure(vf, sp.Float(k) * rho, x0, t=0.5, params=a, n_jacobian=0)
    assert scaled.holds is True
    np.testing.assert_allclose(
        scaled.samples["final defect"], base.samples["final defect"], rtol=0, atol=1e-13
    )
    perm = np.random.default_rng(perm_seed).permutation(x0.shape[0])
    shuffled = check_measure(vf, rho, x0[perm], t=0.5, params=a, n_jacobian=0)
    np.testing.assert_allclose(
        shuffled.samples["final defect"], base.samples["final defect"][perm], rtol=0, atol=1e-15
    )


def test_bad_input(chart3):
    vf, a, c, x0 = chart3
    s1 = vf.states[0]
    with pytest.raises(ValueError, match="density must be positive and finite on the samples"):
        check_measure(vf, s1, x0, t=0.5, params=a)
    with pytest.raises(ValueError, match="density uses z"):
        check_measure(vf, 1 + sp.Symbol("z") ** 2, x0, t=0.5, params=a)
    with pytest.raises(TypeError, match="density must be"):
        check_measure(vf, object(), x0, t=0.5, params=a)
    bad = x0.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="samples contains NaN"):
        check_measure(vf, None, bad, t=0.5, params=a)
    with pytest.raises(ValueError, match="samples must have shape"):
        check_measure(vf, None, x0[:, :3], t=0.5, params=a)
    off = x0.copy()
    off[0, :2] = [0.9, 0.9]
    with pytest.raises(ValueError, match="samples: 1 state.*outside the domain"):
        check_measure(vf, None, off, t=0.5, params=a)
    with pytest.raises(ValueError, match="t must be"):
        check_measure(vf, None, x0, t=[0.5, 0.1], params=a)
    with pytest.raises(ValueError, match="t must be"):
        check_measure(vf, None, x0, t=-1.0, params=a)
    with pytest.raises(ValueError, match="params must have shape"):
        check_measure(vf, None, x0, t=0.5, params=[1.0])
    with pytest.raises(ValueError, match="safety"):
        check_measure(vf, None, x0, t=0.5, params=a, safety=0.5)
    with pytest.raises(ValueError, match="samples is required"):
        check_measure(vf, None, None, t=0.5, params=a)


def test_samples_off_the_constraint_distribution():
    """Suslov: states are body velocities with the constraint Omega_3 = 0."""
    vf = as_vector_field(suslov())
    p = [2.0, 3.0, 4.0, 0.3, -0.2]
    x0 = sample_box(vf, 4, -1, 1, seed=5, params=p)
    x0[2, 2] = 1e-3
    with pytest.raises(ValueError, match="samples: 1 state.*off the constraint manifold"):
        check_measure(vf, None, x0, t=0.5, params=p)


def test_density_that_turns_negative_along_the_run_is_undecided():
    vf = as_vector_field(nonholonomic_particle(a=0))
    xs = vf.states[0]
    x0 = np.array([[-1.0, 0.0, -1.0, 0.0], [0.5, 0.1, 0.2, 0.3]])
    chk = check_measure(vf, xs + 1.05, x0, t=1.0, n_jacobian=0)
    assert chk.holds is None
    assert "not finite along 1 trajectory" in chk.statement
