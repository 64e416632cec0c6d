"""Report renderers, drift checks, the progress bar and the example library of the command.

The drift figures are compared with an independent NumPy computation on the trajectories and
with the exact solution of the harmonic oscillator; the library's claims with the seed formulas
(seed 004 Thm 4.3, Section 4.1), including a deliberately wrong claim that must FAIL.
"""

from __future__ import annotations

import io
import json
import sys

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import nhfast as nh
from nhfast.analysis.drift import constraint_residual, energy_error
from nhfast.analysis.report import read_json, render_text, verdict, write_json, write_report
from nhfast.analysis.result import Check, Report
from nhfast.experiments._progress import Progress
from nhfast.experiments.catalogue import (
    EXAMPLES,
    Expectation,
    build_example,
    get_example,
)
from nhfast.experiments.checks import symbolic_checks
from nhfast.integrate import IntegrationResult
from nhfast.systems.veselova_body import default_inertia

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _report() -> Report:
    t = np.linspace(0.0, 2.0, 21)
    return Report(
        "test report",
        system={"name": "toy", "parameters": {"a": 1.5}},
        settings={"method": "rk4", "h": 0.01},
        checks=[
            Check(
                "energy conservation",
                True,
                "conserved: max 1e-12",
                {"max |dE|/|E0|": 1e-12, "threshold": 1e-8, "failed trajectories": 0},
                {"t": t, "max |dE|/|E0|": 1e-12 * (1 + t), "median |dE|/|E0|": 1e-13 * t},
                {"max over time |dE|/|E0|": np.geomspace(1e-14, 1e-12, 40)},
            ),
            Check(
                "measure defect",
                False,
                "not preserved: max |defect| 0.3",
                {"max |defect|": 0.3, "note": "x", "nan figure": float("nan")},
                {"t": t, "max |defect|": np.sin(t)},
                {"final defect": np.linspace(-0.3, 0.3, 30)},
            ),
            Check("undecided thing", None, "not decided", {"reason": "no data"}),
        ],
        timings={"integrate": 0.5, "codegen + compile": 1.25},
    )


# ------------------------------------------------------------------------------------------
# renderers
# ------------------------------------------------------------------------------------------


def test_verdict_words():
    assert [verdict(v) for v in (True, False, None, np.bool_(True))] == [
        "PASS",
        "FAIL",
        "----",
        "PASS",
    ]


def test_text_table_verdicts_first_then_figures():
    text = render_text(_report())
    lines = text.splitlines()
    assert lines[0] == "test report"
    assert "Verdicts: 1 pass, 1 fail, 1 undecided" in text
    i_pass = next(i for i, s in enumerate(lines) if s.strip().startswith("PASS  energy"))
    i_fail = next(i for i, s in enumerate(lines) if s.strip().startswith("FAIL  measure defect"))
    i_none = next(i for i, s in enumerate(lines) if s.strip().startswith("----  undecided"))
    i_fig = lines.index("Figures")
    assert max(i_pass, i_fail, i_none) < i_fig < lines.index("Timings [s]")
    # every figure name appears in the table
    for c in _report().checks:
        for k in c.figures:
            assert k in text
    assert "1.000e-12" in text and "1.25" in text


def test_text_table_clips_long_values_but_json_keeps_them(tmp_path):
    long = "x" * 500
    rep = Report("t", checks=[Check("c", True, "y" * 500, {"sigma": long})])
    text = render_text(rep)
    assert long not in text and "y" * 500 not in text
    assert "  PASS  c: " + "y" * 297 + "...\n" in text
    assert (
        json.loads(write_json(rep, tmp_path / "r.json").read_text())["checks"][0]["figures"][
            "sigma"
        ]
        == long
    )


def test_render_text_rejects_non_report():
    with pytest.raises(TypeError, match="report must be a Report"):
        render_text({"title": "x"})


def test_write_report_files_json_roundtrip_and_pngs(tmp_path):
    rep = _report()
    files = write_report(rep, tmp_path / "out")
    out = tmp_path / "out"
    assert {"text", "json", "index"} <= set(files)
    data = json.loads((out / "report.json").read_text())
    assert data == json.loads(json.dumps(rep.to_dict()))  # every field, JSON types only
    assert data["checks"][1]["figures"]["nan figure"] == "nan"
    back = read_json(out / "report.json")
    for c0, c1 in zip(rep.checks, back.checks, strict=True):
        assert (c0.name, c0.holds, c0.statement) == (c1.name, c1.holds, c1.statement)
        for k, v in c0.series.items():
            np.testing.assert_array_equal(c1.series[k], v)
        for k, v in c0.samples.items():
            np.testing.assert_array_equal(c1.samples[k], v)
    assert back.timings == rep.timings
    pngs = sorted(out.glob("*.png"))
    # two checks have series and samples; the undecided one has neither
    assert len(pngs) == 4
    import matplotlib.image as mpimg

    for p in pngs:
        raw = p.read_bytes()
        assert raw[:8] == PNG_SIGNATURE and len(raw) > 1000
        img = mpimg.imread(p)
        assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    index = (out / "report.md").read_text()
    for p in pngs:
        assert f"`{p.name}`" in index
    assert "`report.json`" in index and "`report.txt`" in index
    assert "| FAIL | measure defect |" in index
    assert (out / "report.txt").read_text() == render_text(rep)


def test_plots_skipped_without_matplotlib(tmp_path, monkeypatch):
    for mod in ("matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)  # import raises ImportError
    files = write_report(_report(), tmp_path)
    assert not list(tmp_path.glob("*.png"))
    assert set(files) == {"text", "json", "index"}
    assert (
        "no PNG plots: plots skipped: matplotlib is not available"
        in (tmp_path / "report.md").read_text()
    )


def test_write_report_bad_directory(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(NotADirectoryError, match="directory"):
        write_report(_report(), f)


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


# ------------------------------------------------------------------------------------------
# progress bar
# ------------------------------------------------------------------------------------------


def test_progress_draws_only_when_enabled():
    buf = io.StringIO()
    with Progress(3, "work", stream=buf, enabled=True, min_interval=0.0) as bar:
        for _ in range(3):
            bar.update()
    text = buf.getvalue()
    assert "work [" in text and "3/3" in text and text.endswith("\n")
    quiet = io.StringIO()  # not a terminal: disabled by default
    with Progress(3, stream=quiet) as bar:
        bar.update(5)
    assert quiet.getvalue() == "" and bar.done == 3
    assert "#" * 30 in bar.line()


@pytest.mark.parametrize("total", [0, -1, 1.5, True])
def test_progress_bad_total(total):
    with pytest.raises(ValueError, match="total must be an int >= 1"):
        Progress(total)


# ------------------------------------------------------------------------------------------
# library
# ------------------------------------------------------------------------------------------


def test_veselova_defaults_and_sampler_on_constraint_manifold():
    inst = build_example("veselova", 5)
    np.testing.assert_allclose(inst.params, [1 + i / 5 for i in range(1, 6)])
    np.testing.assert_allclose(default_inertia(4), [1.25, 1.5, 1.75, 2.0])
    x0 = inst.sample(50, seed=3)
    gamma, m = x0[:, :5], x0[:, 5:]
    np.testing.assert_allclose(np.sum(gamma**2, axis=1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(np.sum(gamma * m, axis=1), 0.0, atol=1e-14)
    vf = inst.vector_field
    obs = sp.lambdify([vf.states, vf.params], [vf.observables["energy"]])
    energy = np.array([obs(x, inst.params)[0] for x in x0])
    np.testing.assert_allclose(energy, 0.5, rtol=1e-13)
    np.testing.assert_array_equal(x0, inst.sample(50, seed=3))
    assert not np.array_equal(x0, inst.sample(50, seed=4))
    # log_density is the seed's (2 - n)/2 ln (A gamma, gamma)
    a = sp.symbols("a1:6", positive=True)
    g = vf.states[:5]
    expect = sp.Rational(-3, 2) * sp.log(sum(a[k] * g[k] ** 2 for k in range(5)))
    assert sp.simplify(inst.log_density - expect) == 0


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_every_example_builds_and_samples(name):
    ex = get_example(name)
    inst = ex.build()
    x0 = inst.sample(7, seed=1)
    assert x0.shape == (7, inst.vector_field.n_state) and np.all(np.isfinite(x0))
    assert inst.params.shape == (inst.vector_field.n_params,)
    assert inst.energy in inst.vector_field.observables
    for c in inst.constraints:
        assert c in inst.vector_field.observables
    assert ex.summary and "\n" not in ex.summary


def test_library_bad_input():
    with pytest.raises(KeyError, match="example: unknown 'nope'; choose one of veselova"):
        get_example("nope")
    with pytest.raises(ValueError, match="n: example 'veselova' needs an int n >= 3"):
        build_example("veselova", 2)
    with pytest.raises(ValueError, match="n: example 'disk' has no size parameter"):
        build_example("disk", 4)
    with pytest.raises(ValueError, match="lanes must be an int >= 1"):
        build_example("disk").sample(0)


@pytest.mark.parametrize("name", ["particle", "particle-a0", "disk", "sleigh"])
def test_symbolic_checks_agree_with_the_seeds(name):
    checks = symbolic_checks(build_example(name))
    assert [c.name for c in checks] == [
        "basic invariant measure (symbolic)",
        "phi-simple, Hamiltonisable (symbolic)",
    ]
    assert all(c.holds is True for c in checks), [c.statement for c in checks]


def test_symbolic_checks_veselova_3():
    checks = symbolic_checks(build_example("veselova", 3))
    assert all(c.holds is True for c in checks)
    assert "-1/2 ln (A gamma, gamma)" in checks[0].statement  # (2-n)/2 with n = 3


def test_symbolic_check_fails_on_a_wrong_claim():
    # the digest's misprint trap: exponent +(n-2)/2 instead of (2-n)/2 must be rejected; and
    # a claim "not phi-simple" for a phi-simple system must be rejected too
    inst = build_example("veselova", 3)
    c = inst.chaplygin.extra["c"]
    inst.expected = Expectation(True, sp.log(c) / 2, False, None, "a wrong claim")
    measure, phi = symbolic_checks(inst)
    assert measure.holds is False and "disagrees with a wrong claim" in measure.statement
    assert phi.holds is False and "disagrees with a wrong claim: phi-simple" in phi.statement


def test_veselova_chart_sampler_inside_the_chart_at_energy_one_half():
    from nhfast.systems.veselova_body import chart_to_embedded

    inst = build_example("veselova", 4)
    x = inst.chart_sampler(np.random.default_rng(0), 30)
    s, p = x[:, :3], x[:, 3:]
    assert np.all(np.linalg.norm(s, axis=1) < 0.4)
    gamma, m = chart_to_embedded(s, p)  # the independent map back to the embedded form
    vf = inst.vector_field
    energy = sp.lambdify([vf.states, vf.params], vf.observables["energy"])
    e = np.array([energy(np.concatenate(gm), inst.params) for gm in zip(gamma, m, strict=True)])
    np.testing.assert_allclose(e, 0.5, rtol=1e-12)


def test_rewriting_a_report_removes_stale_plots_only(tmp_path):
    write_report(_report(), tmp_path)
    assert len(list(tmp_path.glob("*.png"))) == 4
    (tmp_path / "mine.png").write_bytes(b"user file")
    rep = _report()
    rep.checks = rep.checks[2:]  # no series, no samples: no plots
    write_report(rep, tmp_path)
    assert [p.name for p in tmp_path.glob("*.png")] == ["mine.png"]
