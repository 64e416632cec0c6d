"""The benchmark dashboard (benchmarks/dashboard.py) on fake saved runs and on the real ones.

The fake runs follow a cost model whose numbers the tests recompute independently: the median of
one call is ``BASE[tool] * n**1.5 * lanes * (1 + log10(1/rtol)) / speed(threads)`` and the final
error is ``ERROR_FACTOR[tool] * rtol``; the second run is a day later with nhfast 20 % faster.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import math
import shutil
import struct
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "benchmarks" / "dashboard.py"
RESULTS = ROOT / "benchmarks" / "results"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _load_dashboard() -> Any:
    spec = importlib.util.spec_from_file_location("nhfast_benchmark_dashboard", DASHBOARD)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


db = _load_dashboard()

# --------------------------------------------------------------------------------------------
# Fake runs

BASE = {"nhfast": 2e-7, "scipy": 4e-5, "hand-c": 1e-7, "heyoka-batch": 3e-7}
METHOD = {"nhfast": "dop853", "scipy": "DOP853", "hand-c": "dop853", "heyoka-batch": "taylor"}
ERROR_FACTOR = {"nhfast": 3.0, "scipy": 5.0, "hand-c": 3.0, "heyoka-batch": 0.5}
NS = (8, 32)
LANES = (1, 100)
RTOLS = (1e-6, 1e-10)
CONFIGS = [("nhfast", 1), ("nhfast", 2), ("scipy", 1), ("hand-c", 1), ("heyoka-batch", 1)]
MACHINE = {
    "node": "fake-host",
    "machine": "x86_64",
    "system": "Linux",
    "release": "6.0",
    "python_implementation": "CPython",
    "python_version": "3.11.7",
    "python_compiler": "GCC 12.2.0",
    "cpu": {"brand_raw": "Fake CPU 9000", "count": 2, "hz_advertised_friendly": "2.7 GHz"},
}
SUITE = "benchmarks/bench_large_n.py::"
DAY1 = dt.datetime(2026, 11, 20, 10, 0, tzinfo=dt.timezone.utc)
DAY2 = DAY1 + dt.timedelta(days=1)


def speed(tool: str, threads: int) -> float:
    return 1.0 if threads == 1 else 1.8


def model_median(tool: str, n: int, lanes: int, rtol: float, threads: int, run: int) -> float:
    t = BASE[tool] * n**1.5 * lanes * (1.0 + math.log10(1.0 / rtol)) / speed(tool, threads)
    return t * (0.8 if run == 2 and tool == "nhfast" else 1.0)


def bench_name(tool: str, n: int, lanes: int, rtol: float, threads: int) -> str:
    return f"test_large_n[{tool}-n{n}-l{lanes}-r{rtol:g}-t{threads}]"


def entry(tool: str, n: int, lanes: int, rtol: float, threads: int, run: int) -> dict:
    median = model_median(tool, n, lanes, rtol, threads, run)
    name = bench_name(tool, n, lanes, rtol, threads)
    return {
        "group": f"large-n-{n}",
        "name": name,
        "fullname": SUITE + name,
        "params": {"tool": tool, "n": n, "lanes": lanes},
        "param": f"{tool}-{n}-{lanes}",
        "extra_info": {
            "system": "fpu",
            "n": n,
            "lanes": lanes,
            "tool": tool,
            "method": METHOD[tool],
            "rtol": rtol,
            "t_end": 10.0,
            "threads": threads,
            "error": ERROR_FACTOR[tool] * rtol,
            "rhs_evals": 1000 * lanes,
        },
        "stats": {
            "min": 0.9 * median,
            "max": 1.2 * median,
            "mean": 1.05 * median,
            "stddev": 0.1 * median,
            "rounds": 5,
            "median": median,
            "iqr": 0.1 * median,
        },
    }


def fake_run(run: int) -> dict:
    when = DAY1 if run == 1 else DAY2
    benches = [
        entry(tool, n, lanes, rtol, threads, run)
        for tool, threads in CONFIGS
        for n in NS
        for lanes in LANES
        for rtol in RTOLS
    ]
    if run == 1:  # a benchmark that the second run no longer has
        benches.append(entry("nhfast", 4, 1, 1e-6, 1, run))
    else:  # and one that is new in the second run
        benches.append(entry("nhfast", 64, 1, 1e-6, 1, run))
    return {
        "machine_info": MACHINE,
        "commit_info": {
            "id": f"{run:040x}",
            "time": when.isoformat(),
            "dirty": run == 2,
            "project": "main",
            "branch": "main",
        },
        "benchmarks": benches,
        "datetime": when.isoformat(),
        "version": "5.3.1",
    }


def small_run() -> dict:
    """nhfast alone at n = 8, rtol 1e-6, without errors: two small figures (lanes, threads)."""
    data = fake_run(1)
    data["benchmarks"] = [
        e
        for e in data["benchmarks"]
        if e["params"]["tool"] == "nhfast"
        and e["params"]["n"] == 8
        and e["extra_info"]["rtol"] == 1e-6
    ]
    for e in data["benchmarks"]:
        del e["extra_info"]["error"]
    return data


def write_runs(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for run in (2, 1):  # written newest first: order must come from the datetimes
        (directory / f"run{run}.json").write_text(json.dumps(fake_run(run)), encoding="utf-8")
    return directory


# --------------------------------------------------------------------------------------------
# Page checks


class PageParser(HTMLParser):
    """Collects tag balance errors, images and table rows (cell texts)."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.doctype: str | None = None
        self.images: list[dict[str, str]] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.headers: dict[str, list[str]] = {}
        self.table: str | None = None
        self.cell: list[str] | None = None
        self.text: list[str] = []

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        if tag not in self.VOID:
            self.stack.append(tag)
        if tag == "img":
            self.images.append(attributes)
        elif tag == "table":
            self.table = attributes.get("id", f"table{len(self.tables)}")
            self.tables[self.table] = []
            self.headers[self.table] = []
        elif tag == "tr" and self.table is not None:
            self.tables[self.table].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID:
            self.errors.append(f"end tag for void element <{tag}>")
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> does not close <{self.stack[-1] if self.stack else ''}>")
            return
        self.stack.pop()
        if tag in ("td", "th") and self.cell is not None and self.table is not None:
            text = "".join(self.cell).strip()
            if tag == "th":
                self.headers[self.table].append(text)
            else:
                self.tables[self.table][-1].append(text)
            self.cell = None
        elif tag == "tr" and self.table is not None and not self.tables[self.table][-1]:
            self.tables[self.table].pop()  # the header row
        elif tag == "table":
            self.table = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self.cell is not None:
            self.cell.append(data)


def parse_page(index: Path) -> PageParser:
    parser = PageParser()
    parser.feed(index.read_text(encoding="utf-8"))
    parser.close()
    assert parser.doctype is not None and parser.doctype.lower() == "doctype html"
    assert not parser.errors, parser.errors
    assert parser.stack == [], f"unclosed tags: {parser.stack}"
    return parser


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG file"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def check_images(index: Path, page: PageParser) -> list[Path]:
    paths = []
    for img in page.images:
        src = img["src"]
        assert src and not src.startswith(("/", "http:", "https:", "file:")) and ".." not in src
        assert img.get("alt"), f"image {src} has no alt text"
        path = index.parent / src
        assert path.is_file(), f"missing image {src}"
        assert path.stat().st_size > 10_000, f"{src} is suspiciously small"
        width, height = png_size(path)
        assert width >= 400 and height >= 300
        paths.append(path)
    return paths


def cell(page: PageParser, benchmark: str, column: str) -> str:
    headers = page.headers["latest"]
    rows = [r for r in page.tables["latest"] if r and r[0] == benchmark]
    assert len(rows) == 1, f"{benchmark}: {len(rows)} rows"
    return rows[0][headers.index(column)]


def number(text: str) -> float:
    return float(text.replace(",", "").replace("×", "").replace("%", "").strip())


# --------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def fake_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_runs(tmp_path_factory.mktemp("results"))


@pytest.fixture(scope="module")
def rendered(fake_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("dashboard")
    index = db.build_dashboard([fake_dir], out, baselines=("scipy", "hand-c"))
    return index, parse_page(index)


@pytest.fixture(scope="module")
def runs(fake_dir: Path) -> list:
    loaded, skipped = db.load_runs([fake_dir])
    assert skipped == []
    return loaded


# --------------------------------------------------------------------------------------------
# Loading


def test_runs_sorted_by_datetime_and_latest_per_benchmark(runs: list) -> None:
    assert [r.path.name for r in runs] == ["run1.json", "run2.json"]
    again, _ = db.load_runs([runs[1].path, runs[0].path.parent, runs[1].path])
    assert [r.path.name for r in again] == ["run1.json", "run2.json"]
    assert runs[0].datetime == DAY1 and runs[1].datetime == DAY2
    latest = db.latest_records(runs)
    expected = {e["fullname"] for run in (1, 2) for e in fake_run(run)["benchmarks"]}
    assert {r.fullname for r in latest} == expected
    dropped = next(r for r in latest if r.name == bench_name("nhfast", 4, 1, 1e-6, 1))
    assert dropped.run is runs[0]
    assert all(r.run is runs[1] for r in latest if r is not dropped)


def test_record_fields_work_and_previous(runs: list) -> None:
    rec = next(r for r in runs[1].records if r.name == bench_name("scipy", 32, 100, 1e-10, 1))
    assert rec.fields["method"] == "DOP853" and rec.fields["n"] == 32
    assert rec.work == 100 and rec.unit_noun == "trajectory" and rec.rate_unit == "traj/s"
    assert rec.time_per_unit == pytest.approx(model_median("scipy", 32, 100, 1e-10, 1, 2) / 100)
    assert rec.suite == "bench_large_n" and rec.base_name == "test_large_n"
    prev = db.previous_record(runs, rec)
    assert prev is not None and prev.run is runs[0] and prev.fullname == rec.fullname
    assert db.previous_record(runs, prev) is None


def test_speedup_pairs_same_configuration(runs: list) -> None:
    latest = db.latest_records(runs)
    for tool, threads in CONFIGS:
        for n in NS:
            for lanes in LANES:
                for rtol in RTOLS:
                    rec = next(
                        r for r in latest if r.name == bench_name(tool, n, lanes, rtol, threads)
                    )
                    ref = db.matching_baseline(rec, latest, "scipy")
                    assert ref is not None
                    assert ref.name == bench_name("scipy", n, lanes, rtol, 1)
    lonely = next(r for r in latest if r.name == bench_name("nhfast", 64, 1, 1e-6, 1))
    assert db.matching_baseline(lonely, latest, "scipy") is None
    assert db.matching_baseline(lonely, latest, "numba") is None


# --------------------------------------------------------------------------------------------
# The page


def test_page_is_valid_html5_with_existing_png_images(rendered: tuple[Path, Any]) -> None:
    index, page = rendered
    images = check_images(index, page)
    names = {p.name for p in images}
    assert {
        "time-vs-n.png",
        "time-vs-lanes.png",
        "work-precision.png",
        "throughput-vs-threads.png",
        "history.png",
    } <= names
    text = "".join(page.text)
    assert "nhfast benchmarks" in text and "Fake CPU 9000, 2 cores" in text
    assert "left out" not in text  # every plot has its fields in the fake runs
    html_text = index.read_text(encoding="utf-8")
    assert '<html lang="en">' in html_text and '<meta charset="utf-8">' in html_text


def test_saved_runs_table(rendered: tuple[Path, Any]) -> None:
    _, page = rendered
    rows = page.tables["saved-runs"]
    assert [r[0] for r in rows] == ["run1.json", "run2.json"]
    assert rows[1][2] == f"{2:040x}"[:12] + " (dirty)"
    assert [r[-1] for r in rows] == [str(len(fake_run(1)["benchmarks"]))] * 2


def test_latest_table_rows_speedups_and_changes(rendered: tuple[Path, Any]) -> None:
    _, page = rendered
    headers = page.headers["latest"]
    assert "Speed-up vs scipy" in headers and "Speed-up vs hand-c" in headers
    names = [r[0] for r in page.tables["latest"]]
    expected = {e["name"] for run in (1, 2) for e in fake_run(run)["benchmarks"]}
    assert len(names) == len(expected) and set(names) == expected
    for tool, threads in CONFIGS:
        for n in NS:
            for lanes in LANES:
                for rtol in RTOLS:
                    name = bench_name(tool, n, lanes, rtol, threads)
                    own = model_median(tool, n, lanes, rtol, threads, 2)
                    for base in ("scipy", "hand-c"):
                        ref = model_median(base, n, lanes, rtol, 1, 2)
                        shown = number(cell(page, name, f"Speed-up vs {base}"))
                        assert shown == pytest.approx(ref / own, rel=5e-3)  # 3 digits shown
                    change = number(cell(page, name, "Change vs previous run"))
                    assert change == pytest.approx(-20.0 if tool == "nhfast" else 0.0, abs=0.05)
                    rate = number(cell(page, name, "Throughput").split()[0])
                    assert rate == pytest.approx(lanes / own, rel=5e-3)
    old = bench_name("nhfast", 4, 1, 1e-6, 1)
    assert cell(page, old, "Run").startswith("2026-11-20")
    assert cell(page, old, "Change vs previous run") == ""
    new = bench_name("nhfast", 64, 1, 1e-6, 1)
    assert cell(page, new, "Speed-up vs scipy") == ""
    assert cell(page, new, "Tool") == "nhfast dop853 1 thread"


def test_plot_points_follow_the_model(runs: list) -> None:
    sections = dict(db.plot_sections(runs))
    spec = sections["Time against n"]
    assert isinstance(spec, db.PlotSpec)
    assert len(spec.panels) == len(LANES) * len(RTOLS)  # n on the axis, threads in the lines
    for panel in spec.panels:
        key = dict(panel.key)
        assert panel.y_label == "time per trajectory"
        for tool, threads in CONFIGS:
            label = f"{tool} {METHOD[tool]} {threads} thread" + ("s" if threads > 1 else "")
            pts = panel.series[label]
            ns = [x for x, _, _ in pts]
            assert set(NS) <= set(ns)
            for x, y, _ in pts:
                if x in NS:
                    expected = model_median(tool, int(x), key["lanes"], key["rtol"], threads, 2)
                    assert y == pytest.approx(expected / key["lanes"], rel=1e-12)

    wp = sections["Work-precision"]
    assert isinstance(wp, db.PlotSpec)
    keys = {(dict(p.key)["n"], dict(p.key)["lanes"]) for p in wp.panels}
    assert len(keys) == len(wp.panels)
    assert keys == {(n, lanes) for n in NS for lanes in LANES} | {(4, 1), (64, 1)}
    for panel in wp.panels:
        key = dict(panel.key)
        if key["n"] not in NS:
            continue
        pts = panel.series["heyoka-batch taylor 1 thread"]
        assert [x for x, _, _ in pts] == pytest.approx(sorted(0.5 * r for r in RTOLS))
        for x, y, _ in pts:
            rtol = x / 0.5
            expected = model_median("heyoka-batch", key["n"], key["lanes"], rtol, 1, 2)
            assert y == pytest.approx(expected / key["lanes"], rel=1e-12)

    th = sections["Throughput against threads"]
    assert isinstance(th, db.PlotSpec) and th.ideal_scaling
    for panel in th.panels:
        key = dict(panel.key)
        pts = panel.series["nhfast dop853"]
        assert [x for x, _, _ in pts] == [1.0, 2.0]
        for x, y, _ in pts:
            med = model_median("nhfast", key["n"], key["lanes"], key["rtol"], int(x), 2)
            assert y == pytest.approx(key["lanes"] / med, rel=1e-12)

    hist = sections["History"]
    assert isinstance(hist, db.PlotSpec) and len(hist.x_ticks) == 2
    lines = [pts for panel in hist.panels for pts in panel.series.values()]
    assert all(len(panel.series) <= db.MAX_LINES for panel in hist.panels)
    # every benchmark present in both runs has one line with both runs' points
    assert len(lines) == len(CONFIGS) * len(NS) * len(LANES) * len(RTOLS)
    assert all([p[0] for p in pts] == [1, 2] for pts in lines)


def test_core_style_results_skip_plots_with_notes(tmp_path: Path) -> None:
    """bench_core-like records: no n, no error, one run; those plots become notes."""
    data = fake_run(1)
    for e in data["benchmarks"]:
        for key in ("n", "error", "method", "rtol", "t_end"):
            e["extra_info"].pop(key)
        e["params"].pop("n")
        e["fullname"] = e["fullname"].replace("bench_large_n", "bench_core")
    (tmp_path / "core.json").write_text(json.dumps(data), encoding="utf-8")
    (tmp_path / "notes.json").write_text(json.dumps({"comment": "not a benchmark"}))
    index = db.build_dashboard([tmp_path], tmp_path / "out", baselines=("scipy", "numba"))
    page = parse_page(index)
    check_images(index, page)
    text = " ".join(page.text)
    assert "Time against the state dimension n: no benchmark records a numeric 'n'" in text
    assert "Work-precision: no integration benchmark records a final-state 'error'" in text
    assert "History: only one saved run" in text
    # without n and rtol, 41 records fall on 10 (tool, lanes, threads) points in both plots
    assert text.count("31 benchmark(s) share a line and an x value with another one") == 2
    assert "notes.json is not a pytest-benchmark file" in text
    assert "Baseline tool 'numba' is not among the tools" in text
    assert "Speed-up vs numba" not in page.headers["latest"]
    assert {Path(i["src"]).name for i in page.images} == {
        "time-vs-lanes.png",
        "throughput-vs-threads.png",
    }


def test_geometry_style_records_plot_time_per_call_by_stage(tmp_path: Path) -> None:
    """bench_geometry-like records: n and a stage, no tool, no lanes."""
    data = fake_run(1)
    data["benchmarks"] = []
    for stage, factor in (("symbolic", 1.0), ("codegen", 0.1), ("compile", 0.5)):
        for n in (3, 4, 5, 6):
            name = f"test_{stage}[{n}]"
            data["benchmarks"].append(
                {
                    "group": f"geometry-{stage}",
                    "name": name,
                    "fullname": f"benchmarks/bench_geometry.py::{name}",
                    "params": {"n": n},
                    "extra_info": {"stage": stage, "n": n, "seconds": factor * n**3},
                    "stats": {"median": factor * n**3, "rounds": 1},
                }
            )
    (tmp_path / "geometry.json").write_text(json.dumps(data), encoding="utf-8")
    runs, _ = db.load_runs([tmp_path / "geometry.json"])
    sections = dict(db.plot_sections(runs))
    spec = sections["Time against n"]
    assert isinstance(spec, db.PlotSpec) and len(spec.panels) == 1
    (panel,) = spec.panels
    assert panel.y_label == "time per benchmark call"
    assert set(panel.series) == {"symbolic", "codegen", "compile"}
    for label, factor in (("symbolic", 1.0), ("codegen", 0.1), ("compile", 0.5)):
        assert [(x, y) for x, y, _ in panel.series[label]] == [
            (float(n), factor * n**3) for n in (3, 4, 5, 6)
        ]
    assert isinstance(sections["Time against lanes"], db.Note)
    assert "numeric 'lanes'" in sections["Time against lanes"].text
    assert isinstance(sections["Throughput against threads"], db.Note)
    latest = db.latest_records(runs)
    assert [r.name for r in latest[:4]] == [f"test_codegen[{n}]" for n in (3, 4, 5, 6)]
    assert {r.configuration for r in latest} == {"symbolic", "codegen", "compile"}


def test_large_n_conventions(tmp_path: Path) -> None:
    """bench_large_n's records: a kernel benchmark (method 'rhs', work in rhs_evals, error of
    one evaluation), fixed-step runs (h, no rtol), a run without error, a 'mode' parameter."""
    data = fake_run(1)
    benches = [entry("nhfast", n, 64, 1e-10, 1, 1) for n in NS]
    for n in NS:
        for tool in ("heyoka-batch", "heyoka-scalar"):
            e = entry("heyoka-batch", n, 64, 1e-10, 1, 1)
            e["name"] = f"test_taylor_heyoka[n{n}-lanes64-{tool}]"
            e["fullname"] = SUITE + e["name"]
            e["params"] = {"n": n, "lanes": 64, "mode": tool}
            e["extra_info"]["tool"] = tool
            e["stats"]["median"] *= 2 if tool == "heyoka-scalar" else 1
            benches.append(e)
        for tool, factor in (("nhfast", 1.0), ("hand-c", 0.8)):
            name = f"test_rhs_kernel[n{n}-{tool}]"
            benches.append(
                {
                    "group": f"rhs-n{n}",
                    "name": name,
                    "fullname": SUITE + name,
                    "params": {"n": n, "tool": tool},
                    "extra_info": {
                        "system": "veselova", "n": n, "lanes": 64, "tool": tool,
                        "method": "rhs", "rtol": None, "t_end": None, "threads": 1,
                        "error": 1e-16, "rhs_evals": 64_000,
                    },
                    "stats": {"median": factor * 1e-6 * n * 64_000, "rounds": 7},
                }
            )  # fmt: skip
        fixed = entry("nhfast", n, 64, 1e-10, 1, 1)
        fixed["name"] = f"test_fixed_nhfast[n{n}-lanes64-rk4]"
        fixed["fullname"] = SUITE + fixed["name"]
        fixed["params"] = {"n": n, "lanes": 64, "method": "rk4"}
        fixed["extra_info"].update(method="rk4", rtol=None, h=0.01, error=1e-9)
        benches.append(fixed)
    memory = entry("nhfast", 8, 2000, 1e-10, 1, 1)
    memory["name"] = "test_memory_per_lane"
    memory["fullname"] = SUITE + memory["name"]
    memory["params"] = {}
    memory["extra_info"]["error"] = None
    benches.append(memory)
    data["benchmarks"] = benches
    (tmp_path / "large.json").write_text(json.dumps(data), encoding="utf-8")
    runs, _ = db.load_runs([tmp_path / "large.json"])
    kernel = next(r for r in runs[0].records if r.name == "test_rhs_kernel[n8-nhfast]")
    assert kernel.is_rhs_evaluation and kernel.work == 64_000
    assert kernel.unit_noun == "right-hand-side evaluation" and kernel.rate_unit == "rhs/s"
    assert kernel.time_per_unit == pytest.approx(8e-6)
    latest = db.latest_records(runs)
    ref = db.matching_baseline(kernel, latest, "hand-c")
    assert ref is not None and ref.name == "test_rhs_kernel[n8-hand-c]"
    dop = next(r for r in latest if r.name == bench_name("nhfast", 8, 64, 1e-10, 1))
    assert db.matching_baseline(dop, latest, "hand-c") is None  # no hand-c DOP853 here

    sections = dict(db.plot_sections(runs))
    wp = sections["Work-precision"]
    assert isinstance(wp, db.PlotSpec)
    plotted = {r.name for panel in wp.panels for r in panel.records}
    assert not any(name.startswith(("test_rhs_kernel", "test_memory")) for name in plotted)
    assert {r.name for r in latest if r.name.startswith("test_fixed")} <= plotted
    (panel,) = [p for p in wp.panels if dict(p.key)["n"] == 8]  # DOP853 and RK4 together
    assert set(panel.series) == {
        "nhfast dop853 1 thread",
        "nhfast rk4 1 thread",
        "heyoka-batch taylor 1 thread",
        "heyoka-scalar taylor 1 thread",
    }
    tn = sections["Time against n"]
    assert isinstance(tn, db.PlotSpec)
    kinds = {dict(p.key)["per"] for p in tn.panels}
    assert kinds == {"trajectory", "right-hand-side evaluation"}
    rhs_panel = next(p for p in tn.panels if dict(p.key)["per"] != "trajectory")
    assert rhs_panel.y_label == "time per right-hand-side evaluation"
    assert [(x, y) for x, y, _ in rhs_panel.series["hand-c rhs 1 thread"]] == [
        (float(n), pytest.approx(0.8e-6 * n)) for n in NS
    ]
    assert "per right-hand-side evaluation" in rhs_panel.title


def test_rebuild_replaces_stale_images(tmp_path: Path) -> None:
    stale = tmp_path / "out" / "img" / "old-plot.png"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(PNG_SIGNATURE)
    (tmp_path / "small.json").write_text(json.dumps(small_run()), encoding="utf-8")
    index = db.build_dashboard([tmp_path / "small.json"], tmp_path / "out")
    assert not stale.exists()
    page = parse_page(index)
    names = {p.name for p in check_images(index, page)}
    assert names == {"time-vs-lanes.png", "throughput-vs-threads.png"}
    assert "different machines" not in " ".join(page.text)
    other = small_run()
    other["machine_info"] = {**MACHINE, "node": "another-host"}
    other["datetime"] = DAY2.isoformat()
    (tmp_path / "other.json").write_text(json.dumps(other), encoding="utf-8")
    index = db.build_dashboard([tmp_path / "small.json", tmp_path / "other.json"], tmp_path / "out")
    page = parse_page(index)
    assert "The saved runs come from 2 different machines" in " ".join(page.text)
    assert {p.name for p in check_images(index, page)} == names | {"history.png"}


# --------------------------------------------------------------------------------------------
# Command line and bad input


def test_command_line_script(tmp_path: Path) -> None:
    out = tmp_path / "page"
    (tmp_path / "small.json").write_text(json.dumps(small_run()), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(DASHBOARD), str(tmp_path / "small.json"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()) == out / "index.html"
    check_images(out / "index.html", parse_page(out / "index.html"))


def test_main_reports_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert db.main([str(tmp_path / "missing.json"), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "dashboard: error: benchmark results path not found" in err and "missing.json" in err


def test_bad_inputs_raise_specific_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="paths: expected at least one"):
        db.load_runs([])
    with pytest.raises(FileNotFoundError, match="nope.json"):
        db.load_runs([tmp_path / "nope.json"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no pytest-benchmark JSON file found"):
        db.load_runs([empty])
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json: not valid JSON"):
        db.load_run(bad)
    bad.write_text(json.dumps({"machine_info": {}}))
    with pytest.raises(ValueError, match="expected a 'benchmarks' list"):
        db.load_run(bad)
    data = fake_run(1)
    data["datetime"] = "yesterday"
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="'datetime' is not ISO 8601"):
        db.load_run(bad)
    data = fake_run(1)
    data["benchmarks"][3]["stats"]["median"] = 0.0
    bad.write_text(json.dumps(data))
    name = data["benchmarks"][3]["name"]
    with pytest.raises(ValueError, match=r"benchmarks\[3\].*'stats.median' must be a positive"):
        db.load_run(bad)
    data["benchmarks"][3]["stats"]["median"] = 1.0
    data["benchmarks"][3]["extra_info"]["lanes"] = 0
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="work per call must be positive") as info:
        db.load_run(bad)
    assert name in str(info.value)
    afile = tmp_path / "file"
    afile.write_text("")
    with pytest.raises(ValueError, match="out_dir: expected a directory"):
        db.build_dashboard([tmp_path / "bad.json"], afile)
    with pytest.raises(TypeError, match="baselines"):
        db.build_dashboard([tmp_path / "bad.json"], tmp_path / "o", baselines="scipy")


def test_missing_matplotlib_is_a_clear_import_error(
    fake_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        db.build_dashboard([fake_dir], tmp_path / "o")
    assert not (tmp_path / "o" / "index.html").exists()


# --------------------------------------------------------------------------------------------
# Properties


records_strategy = st.lists(
    st.tuples(
        st.sampled_from(["nhfast", "scipy", "numba"]),
        st.sampled_from([4, 16, 64]),
        st.sampled_from([1, 10, 1000]),
        st.floats(1e-6, 10.0),
    ),
    min_size=1,
    max_size=25,
    unique_by=lambda t: t[:3],
)


@settings(max_examples=40, deadline=None)
@given(records_strategy)
def test_grouping_keeps_every_point_once(rows: list[tuple[str, int, int, float]]) -> None:
    run = db.Run(Path("x.json"), DAY1, {}, {}, "")
    run.records = [
        db.Record(
            name=f"t[{tool}-{n}-{lanes}]",
            fullname=f"b/bench_x.py::t[{tool}-{n}-{lanes}]",
            group=None,
            fields={"tool": tool, "n": n, "lanes": lanes},
            param_keys=frozenset(),
            stats={"median": median},
            run=run,
        )
        for tool, n, lanes, median in rows
    ]
    grouping = db.group_points(
        run.records,
        lambda r: float(r.fields["n"]),
        lambda r: r.time_per_unit,
        ("tool",),
        exclude=("n",),
    )
    assert grouping.n_bad == 0 and grouping.n_merged == 0
    panels = grouping.panels
    seen = []
    for panel in panels:
        lanes = dict(panel.key)["lanes"]
        for label, pts in panel.series.items():
            xs = [x for x, _, _ in pts]
            assert xs == sorted(xs) and len(set(xs)) == len(xs)
            for x, y, rec in pts:
                assert (rec.fields["tool"], rec.fields["n"], rec.fields["lanes"]) == (
                    label,
                    x,
                    lanes,
                )
                assert y == rec.median / lanes
                seen.append(rec)
    assert sorted(id(r) for r in seen) == sorted(id(r) for r in run.records)


@given(st.floats(1e-12, 1e12) | st.sampled_from([9.996e-4, 9.9996e-7, 0.9996, 999.6e-9]))
def test_number_formats_keep_three_significant_digits(value: float) -> None:
    assert number(db.format_number(value)) == pytest.approx(value, rel=5e-3)
    text = db.format_seconds(value)
    magnitude, unit = text.split()
    scale = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}[unit]
    assert float(magnitude) * scale == pytest.approx(value, rel=5e-3)
    assert unit == "ns" or float(magnitude) >= 1.0
    assert unit == "s" or float(magnitude) < 1000.0
    assert "e" not in magnitude or unit in ("s", "ns")


# --------------------------------------------------------------------------------------------
# Real results and a browser


def test_real_saved_results_render(tmp_path: Path) -> None:
    files = sorted(RESULTS.glob("*.json"))
    if not files:
        pytest.skip("no saved benchmark results in benchmarks/results")
    index = db.build_dashboard([RESULTS], tmp_path)
    page = parse_page(index)
    assert check_images(index, page)
    runs, _ = db.load_runs([RESULTS])
    assert len(page.tables["latest"]) == len(db.latest_records(runs))


def test_browser_screenshot(rendered: tuple[Path, Any], tmp_path: Path) -> None:
    browser = next(
        (
            shutil.which(b)
            for b in ("chromium", "chromium-browser", "google-chrome", "chrome")
            if shutil.which(b)
        ),
        None,
    )
    if browser is None:
        pytest.skip("no headless Chromium or Chrome on PATH")
    index, _ = rendered
    shot = tmp_path / "page.png"
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1400,4000",
            f"--screenshot={shot}",
            index.resolve().as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert png_size(shot) == (1400, 4000)
    assert shot.stat().st_size > 50_000  # a page with tables and plots, not a blank canvas
