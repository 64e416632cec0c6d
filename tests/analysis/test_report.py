"""Report renderers, drift checks, the progress bar and the example library of the command.

The drift figures are compared with an independent NumPy computation on the trajectories and
with the exact solution of the harmonic oscillator; the library's claims with the seed formulas
(seed 004 Thm 4.3, Section 4.1), including a deliberately wrong claim that must FAIL.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from nhfast.analysis.report import render_text, verdict, write_json, write_report
from nhfast.analysis.result import Check, Report

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
    files = rep.write(tmp_path / "out")
    out = tmp_path / "out"
    assert {"text", "json", "index"} <= set(files)
    data = json.loads((out / "report.json").read_text())
    assert data == json.loads(json.dumps(rep.to_dict()))  # every field, JSON types only
    assert data["checks"][1]["figures"]["nan figure"] == "nan"
    back = Report.read(out / "report.json")
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


def test_rewriting_a_report_removes_stale_plots_only(tmp_path):
    write_report(_report(), tmp_path)
    assert len(list(tmp_path.glob("*.png"))) == 4
    (tmp_path / "mine.png").write_bytes(b"user file")
    rep = _report()
    rep.checks = rep.checks[2:]  # no series, no samples: no plots
    write_report(rep, tmp_path)
    assert [p.name for p in tmp_path.glob("*.png")] == ["mine.png"]


# ------------------------------------------------------------------------------------------
# plot contents (axes, labels, legends, scales): read from the figures, not from pixels
# ------------------------------------------------------------------------------------------


def _tau_check() -> Check:
    tau = np.linspace(0.0, 2.0, 11)
    err = np.full_like(tau, 1e-16)
    err[0] = 0.0
    return Check(
        "Htilde conserved along the tau-flow (gauss6, h = 0.01)",
        True,
        "ok",
        {"threshold": 1e-11},
        {"t": tau, "max |dHtilde|": err, "median |dHtilde|": err.copy(), "mean t(tau)": 3 * tau},
        {"max |dHtilde| per trajectory": np.array([0.0, 1e-16, 3e-16, 2e-13])},
    )


def test_series_plots_label_both_axes_and_tau_flows_put_the_clock_apart():
    from nhfast.analysis.report import series_figure

    fig = series_figure(_report().checks[0])
    (ax,) = fig.axes
    assert ax.get_xlabel() == "t" and ax.get_ylabel() == "|dE|/|E0|"
    assert ax.get_yscale() == "log"
    fig = series_figure(_tau_check())
    ax, clock = fig.axes
    assert clock.get_xlabel() == "tau" and ax.get_ylabel() == "|dHtilde|"
    assert clock.get_ylabel() == "t" and clock.get_yscale() == "linear"
    assert ax.get_yscale() == "log"
    labels = ax.get_legend_handles_labels()[1]
    assert "mean t(tau)" not in labels and "mean t(tau)" in clock.get_legend_handles_labels()[1]
    # equal curves (max = median) stay distinguishable: different line styles and markers
    lines = [ln for ln in ax.get_lines() if ln.get_label() in ("max |dHtilde|", "median |dHtilde|")]
    assert len(lines) == 2
    assert lines[0].get_linestyle() != lines[1].get_linestyle()
    assert lines[0].get_marker() != lines[1].get_marker()
    # a tau-flow without a clock curve still labels its axis tau
    c = _tau_check()
    del c.series["mean t(tau)"]
    assert series_figure(c).axes[-1].get_xlabel() == "tau"


def test_legend_lists_no_curve_without_data():
    from nhfast.analysis.report import series_figure

    t = np.linspace(0, 1, 5)
    c = Check("x", True, "", {}, {"t": t, "max |e|": 1e-12 * (1 + t), "median |e|": t * np.nan})
    (ax,) = series_figure(c).axes
    assert ax.get_legend_handles_labels()[1] == ["max |e|"]
    assert [ln.get_label() for ln in ax.get_lines()] == ["max |e|"]
    assert any("no data: median |e|" in txt.get_text() for txt in ax.texts)


def test_histograms_never_mix_log_and_linear_on_one_axis():
    """The measure check's samples: a signed final defect (tiny) and max |defect| per
    trajectory: each on its own axis, tiny values as log10 with a floor (not a bin at 0)."""
    from nhfast.analysis.report import HIST_FLOOR, histogram_figure

    rng = np.random.default_rng(0)
    tiny = rng.normal(size=50) * 1e-13
    c = Check("m", True, "", {}, {}, {"final defect": tiny, "ratio": rng.uniform(1, 2, 30)})
    fig = histogram_figure(c)
    assert len(fig.axes) == 2
    ax_log, ax_lin = fig.axes
    assert ax_log.get_xlabel() == f"log10 max(|final defect|, {HIST_FLOOR:.0e})"
    lo, hi = ax_log.get_xlim()
    assert -16 < lo and hi < -11  # log10 of 1e-13-sized values, not collapsed at 0
    assert (
        ax_lin.get_xlabel() == "ratio" and 0.9 < ax_lin.get_xlim()[0] < ax_lin.get_xlim()[1] < 2.1
    )
    assert all(ax.get_ylabel() == "count" for ax in fig.axes)
    # exact zeros go to the floor and the label says how many
    fig = histogram_figure(_tau_check())
    label = fig.axes[0].get_xlabel()  # nonnegative values: no extra |.|
    assert label.startswith(f"log10 max(max |dHtilde| per trajectory, {HIST_FLOOR:.0e})")
    assert "(1 zero(s) at the floor)" in label
    assert fig.axes[0].get_xlim()[0] < np.log10(HIST_FLOOR) + 0.5
