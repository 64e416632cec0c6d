"""The experiment runner: a run's figures against an independent integration, the progress
bar, the chunked integration and the check families."""

from __future__ import annotations

import numpy as np
import pytest

import nhfast as nh
from nhfast.experiments import build_example, integrate_in_chunks, run_example


def test_run_veselova_drift_and_constraints(capsys):
    report, res = run_example(
        "veselova", n=3, lanes=8, t_end=1.0, threads=1, checks=("drift",), progress=True
    )
    assert "integrating [" in capsys.readouterr().err  # the progress bar, forced on
    assert [c.name for c in report.checks] == [
        "energy conservation (energy)",
        "constraints (gamma_norm = 1, momentum_constraint = 0)",
    ]
    assert all(c.holds for c in report.checks)
    assert report.system["parameters"] == pytest.approx({"a1": 4 / 3, "a2": 5 / 3, "a3": 2.0})
    g = res.y[:, :, :3]
    resid = np.abs(np.sum(g**2, axis=2) - 1).max()
    assert report.checks[1].figures["max |gamma_norm - target|"] == pytest.approx(resid, abs=1e-16)
    with pytest.raises(ValueError, match="checks: unknown"):
        run_example("veselova", n=3, checks=("energy",))


def test_run_example_matches_direct_integration():
    """The figures of a run are those of an independent integration of the same states."""
    report, res = run_example("particle-a0", lanes=5, t_end=2.0, threads=1, seed=7)
    inst = build_example("particle-a0")
    ref = nh.integrate(inst.vector_field, inst.sample(5, 7), np.linspace(0, 2, 201))
    np.testing.assert_allclose(res.y, ref.y, rtol=0, atol=1e-12)
    e = ref.observables["energy"]
    drift = np.max(np.abs(e - e[:, :1]) / np.abs(e[:, :1]))
    assert report.checks[0].figures["max |dE|/|E0|"] == pytest.approx(drift, rel=0, abs=1e-15)


def test_chunks_give_the_one_call_result():
    """Blocks of lanes (here 3 of 64, 64 and 2) concatenate to the result of one call."""
    inst = build_example("particle-a0")
    x0 = inst.sample(130, 3)
    t = np.linspace(0.0, 1.0, 11)
    parts = integrate_in_chunks(
        inst.vector_field, x0, t, inst.params, "rk4", 1, 1e-10, 1e-12, 0.05, progress=False
    )
    whole = nh.integrate(inst.vector_field, x0, t, method="rk4", h=0.05, params=inst.params)
    np.testing.assert_array_equal(parts.y, whole.y)
    np.testing.assert_array_equal(parts.status, whole.status)
    for k in whole.stats:
        np.testing.assert_array_equal(parts.stats[k], whole.stats[k])
    for k in whole.observables:
        np.testing.assert_array_equal(parts.observables[k], whole.observables[k])


def test_check_families_select_the_checks():
    report, res = run_example("disk", lanes=4, t_end=1.0, threads=1, checks=("symbolic",))
    assert res is None
    assert [c.name for c in report.checks] == [
        "basic invariant measure (symbolic)",
        "phi-simple, Hamiltonisable (symbolic)",
    ]
    assert "method" not in report.settings


def test_leapfrog_on_a_system_that_is_not_separable_is_a_usage_error():
    from nhfast.errors import UsageError

    with pytest.raises(UsageError, match="--method: leapfrog needs a separable system"):
        run_example("veselova", n=3, lanes=2, method="leapfrog", checks=("drift",))
