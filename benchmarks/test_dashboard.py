"""The benchmark page (benchmarks/dashboard.py) from small synthetic runs and the saved ones."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
_spec = importlib.util.spec_from_file_location("nhfast_bench_dashboard", HERE / "dashboard.py")
db = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = db
_spec.loader.exec_module(db)


def bench(name: str, group: str, median: float, **extra) -> dict:
    return {"name": name, "fullname": f"benchmarks/bench_fake.py::{name}", "group": group,
            "params": {}, "extra_info": extra, "stats": {"median": median}}  # fmt: skip


def write(path: Path, benchmarks: list, when: str = "2026-11-22T10:00:00+00:00") -> Path:
    path.write_text(json.dumps({"datetime": when, "benchmarks": benchmarks}), encoding="utf-8")
    return path


def nh(rtol: float, error: float, seconds: float, threads: int = 1) -> dict:
    """nhfast on 1000 lanes: ``seconds`` per trajectory."""
    return bench(f"test_nh[{rtol}-{threads}]", "wp", seconds * 1000, tool="nhfast",
                 method="dop853", lanes=1000, rtol=rtol, error=error, threads=threads)  # fmt: skip


SYNTHETIC = [
    nh(1e-8, 1e-8, 1.0),
    nh(1e-10, 1e-10, 2.0),
    nh(1e-10, 1e-10, 1.5, threads=2),  # not the reference: one thread only
    # one point at nhfast's mid error, timed on 10 of the 1000 trajectories: 4 x sqrt(2) each
    bench("test_one", "wp", 40 * math.sqrt(2), tool="one-point", method="taylor", lanes=10,
          batch_lanes=1000, rtol=1e-9, error=1e-9),
    # a line through (1e-7, 10) and (1e-11, 40): 10 sqrt(2) x nhfast at both of nhfast's errors
    bench("test_line[7]", "wp", 10_000, tool="line", lanes=1000, rtol=1e-7, error=1e-7),
    bench("test_line[11]", "wp", 40_000, tool="line", lanes=1000, rtol=1e-11, error=1e-11),
    bench("test_far", "wp", 3000, tool="far", lanes=1000, rtol=1e-14, error=1e-14),
    bench("test_no_error", "wp", 6000, tool="no-error", lanes=1000, rtol=1e-10),
    bench("test_rhs_nh", "rhs", 1.0, tool="nhfast", method="rhs", lanes=64, rhs_evals=1000,
          error=1e-16),
    bench("test_rhs_c", "rhs", 0.5, tool="hand-c", method="rhs", lanes=64, rhs_evals=1000,
          error=1e-16),
]  # fmt: skip


def test_speedups_at_equal_error_and_their_fallbacks(tmp_path: Path) -> None:
    records, runs, notes = db.load([write(tmp_path / "run.json", SYNTHETIC)])
    assert len(runs) == 1 and not notes
    ratios, _ = db.ratios(db.latest(records))
    got = {r.anchor: r for r in ratios}
    assert got["one-point"].kind == "equal error"
    assert got["one-point"].speedup == pytest.approx(4.0)
    assert got["line"].kind == "equal error"
    assert got["line"].speedup == pytest.approx(10 * math.sqrt(2))
    assert got["line"].detail == "error 1.0e-10 to 1.0e-08"
    # no overlap: against nhfast's most accurate run (2 s per trajectory), said so
    assert (got["far"].kind, got["far"].speedup) == ("nearest error", pytest.approx(1.5))
    assert "no overlap" in got["far"].detail
    # no error: equal settings, at the same rtol (nhfast 1e-10: 2 s per trajectory)
    assert (got["no-error"].kind, got["no-error"].speedup) == ("equal settings", 3.0)
    # a right-hand side's error is not a final-state error: per evaluation, equal settings
    assert (got["hand-c"].kind, got["hand-c"].unit) == ("equal settings", "rhs evaluation")
    assert got["hand-c"].speedup == pytest.approx(0.5)


def test_page_opens_with_the_headline(tmp_path: Path) -> None:
    index = db.build([write(tmp_path / "run.json", SYNTHETIC)], tmp_path / "out")
    page = index.read_text(encoding="utf-8")
    headline = page.index("nhfast against each anchor")
    assert headline < page.index("work_precision.png") < page.index("Every benchmark")
    row = page[page.index("<td>one-point</td>") :].split("</tr>")[0]
    assert "×4" in row and "equal error" in row
    assert "nearest error: no overlap" in page and "equal settings: rtol 1e-10" in page
    assert '<div class="box"><table>' in page  # the full table scrolls in its own box
    for png in ("work_precision.png", "threads.png"):
        assert (index.parent / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_fields_degrade_to_notes(tmp_path: Path) -> None:
    write(tmp_path / "bare.json", [
        {"name": "test_bare", "stats": {"median": 0.1}},
        {"name": "test_no_stats"},
        bench("test_only_nhfast", "g", 0.2, tool="nhfast"),
        bench("test_anchor_alone", "h", 0.2, tool="scipy"),
    ])  # fmt: skip
    (tmp_path / "other.json").write_text('[{"n": 4}]', encoding="utf-8")
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    index = db.build([tmp_path], tmp_path / "page.html")
    page = index.read_text(encoding="utf-8")
    assert index.name == "page.html"
    for note in ("other.json: not pytest-benchmark JSON", "broken.json: unreadable",
                 "without a name or positive median", "h: no one-thread nhfast benchmark",
                 "no benchmark records a final-state error",
                 "every benchmark is in one saved run only"):  # fmt: skip
        assert note in page
    assert "test_bare" in page and not list(tmp_path.glob("*.png"))


def test_history_across_runs(tmp_path: Path) -> None:
    write(tmp_path / "a.json", [nh(1e-8, 1e-8, 1.0)], "2026-11-20T10:00:00+00:00")
    write(tmp_path / "b.json", [nh(1e-8, 1e-8, 0.8)], "2026-11-22T10:00:00+00:00")
    records, runs, _ = db.load([tmp_path])
    (last,) = db.latest(records)
    assert last.run == "b.json" and [r["file"] for r in runs] == ["a.json", "b.json"]
    shown = dict(db.plots(db.latest(records), records, tmp_path))
    assert shown["History: median against the first saved run"] == "history.png"


@pytest.fixture(scope="module")
def saved_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page of benchmarks/results (else of the synthetic run), built once."""
    out = tmp_path_factory.mktemp("saved")
    runs = [RESULTS] if list(RESULTS.glob("*.json")) else [write(out / "run.json", SYNTHETIC)]
    return db.build(runs, out / "dash")


def test_saved_results(saved_page: Path) -> None:
    if not list(RESULTS.glob("*.json")):
        pytest.skip("no saved results in benchmarks/results")
    records, _, _ = db.load([RESULTS])
    latest = db.latest(records)
    page = saved_page.read_text(encoding="utf-8")
    assert page.count("<tr>") >= len(latest)
    ratios = {(r.group, r.anchor): r for r in db.ratios(latest)[0]}
    pick = [r for r in latest if r.group == "dop853-n8-lanes10000" and r.threads == 1]
    if pick:  # numba runs nhfast's DOP853 at rtol 1e-10: same error, so the plain time ratio
        numba = next(r for r in pick if r.get("tool") == "numba")
        ours = next(r for r in pick if r.get("tool") == "nhfast" and r.get("rtol") == 1e-10)
        ratio = ratios["dop853-n8-lanes10000", "numba"]
        assert ratio.kind == "equal error"
        assert ratio.speedup == pytest.approx(numba.median / ours.median, rel=1e-3)


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write(tmp_path / "run.json", SYNTHETIC)
    assert db.main([str(run), "--out", str(tmp_path / "dash")]) == 0
    assert (tmp_path / "dash" / "index.html").exists()
    assert db.main([str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_headless_chromium_screenshot(saved_page: Path, tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium)")
    shot = tmp_path / "shot.png"
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           f"--screenshot={shot}", "--window-size=1280,900", saved_page.as_uri()]  # fmt: skip
    subprocess.run(cmd, capture_output=True, timeout=180, check=False)
    assert shot.exists(), "chromium wrote no screenshot"
    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (900, 1280)
    dark = (pixels.mean(axis=2) < 0.5).mean()
    assert pixels.std() > 0.05 and 0.005 < dark < 0.5  # text on a light page, not a blank one
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50


def wp_run(impl: str, threads: int, error: float, seconds: float, lanes: int = 1000) -> dict:
    """One run of a work-precision sweep: ``seconds`` per trajectory."""
    return dict(problem="veselova", n=4, lanes=lanes, t_end=10.0, impl=impl, threads=threads,
                tol=error, seconds=seconds * lanes, timed_lanes=lanes,
                per_trajectory_seconds=seconds, error=error, steps=10)  # fmt: skip


WP_DOC = {
    "kind": "nhfast-work-precision", "datetime": "2026-11-23T12:00:00+00:00",
    "machine_info": {"cpu": "test cpu", "cores": 2, "heyoka": "7"}, "err_lanes": 32,
    "reference": "long double", "runs": [
        wp_run("nhfast-dop853", 1, 1e-8, 1.0), wp_run("nhfast-dop853", 1, 1e-10, 2.0),
        wp_run("nhfast-dop853", 1, 1e-9, 5.0),  # beaten by the 1e-10 run: off the frontier
        # through (1e-7, 10) and (1e-11, 40): 10 sqrt(2) x nhfast's time at 1e-8 and 1e-10
        wp_run("heyoka-batch", 1, 1e-7, 10.0), wp_run("heyoka-batch", 1, 1e-11, 40.0),
        wp_run("nhfast-dop853", 2, 1e-8, 0.5), wp_run("heyoka-ensemble", 2, 1e-14, 1.0),
        wp_run("scipy", 1, 1e-8, 300.0), wp_run("scipy", 1, 1e-10, 600.0),
        wp_run("nhfast-dop853", 1, 1e-9, 1.0, lanes=1),
        wp_run("heyoka-scalar", 1, 1e-9, 0.5, lanes=1),
    ],
    "compile": [dict(problem="veselova", n=4, impl="heyoka-batch", tol=t, seconds=s,
                     compact_mode=False, order=12) for t, s in ((1e-9, 0.3), (1e-15, 0.9))],
    "nhfast_compile": [dict(problem="veselova", n=4, impl="nhfast-dop853", seconds=0.5)],
    "skipped": [dict(problem="veselova", n=4, lanes=1000, impl="nhfast-taylor", threads=1,
                     reason="method='taylor' unavailable")],
}  # fmt: skip


def test_work_precision_ratios_at_equal_error() -> None:
    assert db.wp_frontier([(1e-8, 1.0), (1e-9, 5.0), (1e-10, 2.0)]) == [(1e-10, 2.0), (1e-8, 1.0)]
    got = {(r["lanes"], r["threads"], r["anchor"]): r for r in db.wp_ratios(WP_DOC)}
    batch = got[1000, 1, "heyoka-batch"]
    assert batch["ratio"] == pytest.approx(1 / (10 * math.sqrt(2)))
    assert batch["errors"] == (1e-10, 1e-8) and batch["met"] and batch["goal"] == 0.67
    scipy = got[1000, 1, "scipy"]
    assert scipy["ratio"] == pytest.approx(1 / 300) and scipy["met"]
    ens = got[1000, 2, "heyoka-ensemble"]
    assert ens["met"] is None and "no overlap" in ens["note"]
    one = got[1, 1, "heyoka-scalar"]  # one trajectory: goal 1.0, nhfast twice as slow
    assert (one["goal"], one["ratio"], one["met"]) == (1.0, pytest.approx(2.0), False)
    assert "nhfast-dop853 0.5..0.5" in db.wp_text(WP_DOC)
    (row,) = db.wp_compile(WP_DOC)
    assert row["heyoka-batch"] == [0.3, 0.9] and row["nhfast-dop853"] == [0.5, 0.5]


def test_work_precision_section(tmp_path: Path) -> None:
    (tmp_path / "wp.json").write_text(json.dumps(WP_DOC), encoding="utf-8")
    write(tmp_path / "run.json", SYNTHETIC)
    records, runs, notes = db.load([tmp_path])
    assert len(runs) == 1 and not notes  # the sweep is not a pytest-benchmark run, nor skipped
    page = db.build([tmp_path], tmp_path / "out").read_text(encoding="utf-8")
    section = page[page.index("Work-precision sweep") : page.index("Every benchmark")]
    assert "wp_veselova.png" in section and "Time ratios at equal error" in section
    assert "0.0707×" in section and "no overlap" in section and "heyoka compact mode" in section
    assert "method=&#x27;taylor&#x27; unavailable" in section
    png = tmp_path / "out" / "wp_veselova.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
