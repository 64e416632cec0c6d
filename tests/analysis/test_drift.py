"""Drift checks on integration results: energy error and constraint residuals (analysis.drift)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import nhfast as nh
from nhfast.analysis.drift import constraint_residual, energy_error
from nhfast.integrate import IntegrationResult

# ------------------------------------------------------------------------------------------
# drift checks
# ------------------------------------------------------------------------------------------


def _result(obs: dict[str, np.ndarray], status=None) -> IntegrationResult:
    n_traj, n_t = next(iter(obs.values())).shape
    return IntegrationResult(
        t=np.linspace(0, 1, n_t),
        y=np.zeros((n_traj, n_t, 2)),
        status=np.zeros(n_traj, np.int32) if status is None else np.asarray(status, np.int32),
        stats={"steps": np.ones(n_traj, np.int64)},
        method="rk4",
        observables=obs,
    )


@settings(max_examples=40, deadline=None)
@given(
    hnp.arrays(
        float,
        st.tuples(st.integers(1, 6), st.integers(2, 8)),
        elements=st.floats(-1e3, 1e3).filter(lambda v: abs(v) > 1e-3),
    )
)
def test_energy_error_figures_match_numpy(e):
    chk = energy_error(_result({"energy": e}), threshold=1.0)
    rel = np.abs(e - e[:, :1]) / np.abs(e[:, :1])
    assert chk.figures["max |dE|/|E0|"] == pytest.approx(rel.max(), rel=1e-15, abs=0)
    assert chk.holds == bool(rel.max() <= 1.0)
    np.testing.assert_array_equal(chk.series["max |dE|/|E0|"], rel.max(axis=0))
    np.testing.assert_array_equal(chk.samples["max over time |dE|/|E0|"], rel.max(axis=1))
    assert chk.series["t"].shape == chk.series["max |dE|/|E0|"].shape


def test_energy_error_on_oscillator_rk4(oscillator):
    # rk4 energy error of the oscillator per step is known in closed form:
    # E_{k+1}/E_k = |R(i w h)|^2, R(z) = 1 + z + z^2/2 + z^3/6 + z^4/24
    w, h, steps = 2.0, 0.05, 200
    t = np.linspace(0.0, steps * h, steps + 1)
    res = nh.integrate(oscillator, [[1.0, 0.0], [0.0, 3.0]], t, method="rk4", h=h, params=[w])
    z = 1j * w * h
    amp = abs(1 + z + z**2 / 2 + z**3 / 6 + z**4 / 24) ** 2
    exact = np.abs(amp ** np.arange(steps + 1) - 1)
    chk = energy_error(res, threshold=1e-3)
    np.testing.assert_allclose(chk.series["max |dE|/|E0|"], exact, rtol=1e-7, atol=1e-15)
    assert chk.holds is True and exact.max() < 1e-3
    tight = energy_error(res, threshold=exact.max() / 2)
    assert tight.holds is False and "drifts" in tight.statement


def test_energy_error_absolute_and_zero_energy():
    e = np.array([[0.0, 1e-3, -2e-3], [2.0, 2.0, 2.5]])
    chk = energy_error(_result({"energy": e}), relative=True, threshold=0.5)
    # lane 0 has E0 = 0: absolute error; lane 1 relative
    np.testing.assert_allclose(chk.samples["max over time |dE|/|E0|"], [2e-3, 0.25])
    chk_abs = energy_error(_result({"energy": e}), relative=False, threshold=0.5)
    np.testing.assert_allclose(chk_abs.samples["max over time |dE|"], [2e-3, 0.5])


def test_failed_lanes_are_excluded_and_fail_the_check():
    e = np.array([[1.0, 1.0], [1.0, np.nan]])
    chk = energy_error(_result({"energy": e}, status=[0, 1]), threshold=1e-3)
    assert chk.holds is False and chk.figures["failed trajectories"] == 1
    assert chk.figures["max |dE|/|E0|"] == 0.0
    assert "1 trajectories failed" in chk.statement
    none = energy_error(_result({"energy": e}, status=[1, 1]), threshold=1e-3)
    assert none.holds is False and "no trajectory finished" in none.statement


def test_constraint_residual_per_constraint():
    g = np.array([[1.0, 1.0 + 1e-9, 1.0 - 3e-9], [1.0, 1.0, 1.0]])
    m = np.array([[0.0, 2e-9, 0.0], [0.0, -5e-9, 1e-10]])
    res = _result({"gamma_norm": g, "momentum_constraint": m})
    chk = constraint_residual(res, {"gamma_norm": 1.0, "momentum_constraint": 0.0}, 1e-8)
    assert chk.holds is True
    assert chk.figures["max residual"] == pytest.approx(5e-9, rel=1e-12)
    assert chk.figures["max |gamma_norm - target|"] == pytest.approx(3e-9, rel=1e-6)
    np.testing.assert_allclose(chk.samples["max over time residual"], [3e-9, 5e-9], rtol=1e-6)
    assert not constraint_residual(res, {"gamma_norm": 1.0}, 1e-9).holds


def test_drift_bad_input():
    res = _result({"energy": np.ones((2, 3))})
    with pytest.raises(KeyError, match="observable: no observable 'H'.*available: energy"):
        energy_error(res, "H")
    with pytest.raises(ValueError, match="threshold must be a positive"):
        energy_error(res, threshold=-1)
    with pytest.raises(TypeError, match="threshold must be a positive number"):
        energy_error(res, threshold="x")
    with pytest.raises(TypeError, match="result must be an IntegrationResult"):
        energy_error({"energy": 1})
    with pytest.raises(ValueError, match="constraints must be a non-empty mapping"):
        constraint_residual(res, {})
    with pytest.raises(TypeError, match="constraints: target of 'energy' must be a number"):
        constraint_residual(res, {"energy": "one"})
