"""Static HTML dashboard of saved pytest-benchmark runs.

Usage::

    python benchmarks/dashboard.py [RESULTS_DIR_OR_JSON ...] [--out DIR] [--baseline TOOL ...]

Every argument is a pytest-benchmark JSON file (``--benchmark-json`` or ``--benchmark-save``
output) or a directory whose ``*.json`` files are read (default: ``benchmarks/results``). The
page ``DIR/index.html`` (default ``build/benchmark-dashboard``) shows the machine, the saved runs,
a table of the latest result of every benchmark and PNG plots (matplotlib, Agg backend) stored in
``DIR/img`` and referenced by relative paths:

* time against the state dimension ``n`` and against the number of lanes (trajectories per call);
* work-precision: time against the final-state ``error``, one line per tool and method;
* throughput against ``threads``, with the ideal linear scaling;
* history: each benchmark's median across the saved runs (dates and commits).

Plots are grouped by whatever fields the benchmarks carry in ``params`` and ``extra_info``:
panels by the configuration (suite, unit of work, ``system``, ``n``, ``lanes``, ``rtol``,
``atol``, ``t_end``, ``h`` minus the plotted ones), lines by ``tool``, ``method``, ``stage``,
``threads`` and any other pytest parameter; a plot whose fields are absent is left out with a
note on the page, and each suite (benchmark module) gets its own images. A tool keeps its colour
on the whole page.

Times are per unit of work: the median of one benchmark call divided by ``extra_info["work"]``
(else, for a right-hand-side benchmark -- ``unit`` ``rhs/s`` or ``method`` ``rhs`` --
``rhs_evals``; else ``timed_lanes``; else ``lanes``; else 1), so that a tool timed on fewer
trajectories than it stands for (``bench_core``'s SciPy loop) is compared fairly. The ``error``
of a right-hand-side benchmark is not a final-state error and stays out of the work-precision
plot.
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import json
import math
import re
import shutil
import statistics
import sys
import textwrap
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

__all__ = [
    "Record",
    "Run",
    "Panel",
    "PlotSpec",
    "Note",
    "load_run",
    "load_runs",
    "latest_records",
    "previous_record",
    "matching_baseline",
    "Grouping",
    "config_fields",
    "extra_params",
    "group_points",
    "format_seconds",
    "format_number",
    "plot_sections",
    "render_png",
    "render_html",
    "build_dashboard",
    "main",
]

HERE = Path(__file__).resolve().parent
DEFAULT_RESULTS = HERE / "results"
DEFAULT_OUT = HERE.parent / "build" / "benchmark-dashboard"
DEFAULT_BASELINES = ("scipy", "hand-c")
PAGE_TITLE = "nhfast benchmarks"

#: Fields that describe what was run (as opposed to what was measured, such as ``error``).
CONFIG_FIELDS = (
    "system",
    "n",
    "lanes",
    "tool",
    "method",
    "rtol",
    "atol",
    "t_end",
    "threads",
    "stage",
    "h",
)
#: Measured fields: never used for grouping, even when they are pytest parameters. (Other
#: pytest parameters distinguish lines; other ``extra_info`` fields are not used for grouping.)
RESULT_FIELDS = frozenset(
    {"error", "rhs_evals", "work", "timed_lanes", "seconds", "source_chars", "n_state", "solves"}
)
#: Fields that make the lines of one panel, in label order.
SERIES_FIELDS = ("tool", "method", "stage", "threads")
#: Fields in which a benchmark may differ from its baseline in the speed-up column.
TOOL_FIELDS = frozenset({"tool", "method", "threads"})
#: Fields that vary along one work-precision line (one point per tolerance or step).
TOLERANCE_FIELDS = ("rtol", "atol", "h")
MAX_PANELS = 9
#: At most this many lines in one history panel (a larger group is split over panels).
MAX_LINES = 8
UNIT_NOUNS = {"traj/s": "trajectory", "rhs/s": "right-hand-side evaluation"}
FIELD_PREFIX = {
    "suite": "suite",
    "system": "system",
    "per": "per",
    "lanes": "lanes",
    "threads": "threads",
}
COLOURS = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#7f7f7f",
    "#bcbd22",
)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


# --------------------------------------------------------------------------------------------
# Loading


@dataclass(eq=False)
class Record:
    """One benchmark of one saved run.

    Attributes
    ----------
    name, fullname : str
        pytest-benchmark's ``name`` (``test_x[params]``) and ``fullname`` (``path::name``); the
        full name identifies a benchmark across runs.
    group : str or None
        The benchmark group.
    fields : dict
        ``params`` updated by ``extra_info`` (``extra_info`` wins on a clash); lists become
        tuples so that values can be grouped.
    param_keys : frozenset of str
        The pytest parameter names (configuration fields even when not in
        :data:`CONFIG_FIELDS`).
    stats : dict
        pytest-benchmark's statistics in seconds (``min``, ``max``, ``median``, ``rounds``, ...).
    run : Run
        The saved run the record belongs to.
    """

    name: str
    fullname: str
    group: str | None
    fields: dict[str, Any]
    param_keys: frozenset[str]
    stats: dict[str, Any]
    run: Run

    @property
    def median(self) -> float:
        """Median time of one benchmark call, in seconds."""
        return float(self.stats["median"])

    @property
    def suite(self) -> str:
        """The benchmark module's stem (``bench_core``), or ``""`` when the name has no path."""
        return Path(self.fullname.split("::", 1)[0]).stem if "::" in self.fullname else ""

    @property
    def base_name(self) -> str:
        """The test function's name without its parameters."""
        return self.name.split("[", 1)[0]

    @property
    def is_rhs_evaluation(self) -> bool:
        """Whether the benchmark times right-hand-side evaluations rather than integrations.

        Either ``unit`` is ``rhs/s`` (``bench_core``) or ``method`` is ``rhs``
        (``bench_large_n``'s kernel benchmark, whose ``error`` is that of one evaluation).
        """
        return self.fields.get("unit") == "rhs/s" or self.fields.get("method") == "rhs"

    @property
    def work(self) -> float:
        """Units of work in one call.

        ``work`` if recorded; else, for a right-hand-side benchmark, ``rhs_evals``; else
        ``timed_lanes`` (trajectories actually timed), else ``lanes``, else 1.
        """
        keys = ["work", "timed_lanes", "lanes"]
        if self.is_rhs_evaluation:
            keys.insert(1, "rhs_evals")
        for key in keys:
            value = self.fields.get(key)
            if value is not None:
                return float(value)
        return 1.0

    @property
    def unit_noun(self) -> str:
        """One unit of work in words: ``trajectory``, ``benchmark call``, ..."""
        unit = self.fields.get("unit")
        if isinstance(unit, str) and unit:
            return UNIT_NOUNS.get(unit, unit[:-2] if unit.endswith("/s") else unit)
        if self.is_rhs_evaluation:
            return UNIT_NOUNS["rhs/s"]
        if any(self.fields.get(k) is not None for k in ("work", "timed_lanes", "lanes")):
            return "trajectory"
        return "benchmark call"

    @property
    def rate_unit(self) -> str:
        """Unit of :attr:`throughput`: ``extra_info["unit"]``, else ``traj/s``, ``rhs/s`` or
        ``calls/s``."""
        unit = self.fields.get("unit")
        if isinstance(unit, str) and unit:
            return unit
        nouns = {v: k for k, v in UNIT_NOUNS.items()}
        return nouns.get(self.unit_noun, "calls/s")

    @property
    def time_per_unit(self) -> float:
        """Median seconds per unit of work (see :attr:`work`)."""
        return self.median / self.work

    @property
    def throughput(self) -> float:
        """Units of work per second at the median time."""
        return self.work / self.median

    @property
    def configuration(self) -> str:
        """Tool, method, stage and thread count, e.g. ``nhfast dop853 2 threads``."""
        return _series_label(self, ("tool", "method", "stage", "threads"), fallback="")


@dataclass(eq=False)
class Run:
    """One saved pytest-benchmark JSON file.

    Attributes
    ----------
    path : Path
        The file.
    datetime : datetime.datetime
        When the run was made (UTC when the file gives no zone).
    commit : dict
        ``commit_info`` (``id``, ``branch``, ``dirty``, ...).
    machine : dict
        ``machine_info``.
    version : str
        The pytest-benchmark version that wrote the file.
    records : list of Record
        Its benchmarks.
    """

    path: Path
    datetime: dt.datetime
    commit: dict[str, Any]
    machine: dict[str, Any]
    version: str
    records: list[Record] = field(default_factory=list)

    @property
    def label(self) -> str:
        """Date, time and short commit id, e.g. ``2026-11-22 02:33 e0d614b``."""
        commit = str(self.commit.get("id") or "")[:7]
        dirty = "+dirty" if commit and self.commit.get("dirty") else ""
        return f"{self.datetime:%Y-%m-%d %H:%M} {commit}{dirty}".strip()

    @property
    def cpu(self) -> str:
        """CPU brand and core count, e.g. ``Intel(R) Xeon(R) Processor, 2 cores``."""
        cpu = self.machine.get("cpu") or {}
        brand = cpu.get("brand_raw") or self.machine.get("processor") or "unknown CPU"
        count = cpu.get("count")
        return f"{brand}, {count} cores" if count else str(brand)


def _parse_datetime(text: Any, path: Path) -> dt.datetime:
    if not isinstance(text, str):
        raise ValueError(f"{path}: 'datetime' must be an ISO 8601 string, got {text!r}")
    try:
        stamp = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"{path}: 'datetime' is not ISO 8601: {text!r}") from exc
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)


def _hashable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return value


def _parse_record(entry: Any, run: Run, index: int) -> Record:
    where = f"{run.path}: benchmarks[{index}]"
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be an object, got {type(entry).__name__}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where} has no 'name' string")
    stats = entry.get("stats")
    median = stats.get("median") if isinstance(stats, dict) else None
    if isinstance(median, bool) or not isinstance(median, (int, float)) or not median > 0:
        raise ValueError(
            f"{where} ({name}): 'stats.median' must be a positive number of seconds, got {median!r}"
        )
    if not math.isfinite(median):
        raise ValueError(f"{where} ({name}): 'stats.median' must be finite, got {median!r}")
    fields: dict[str, Any] = {}
    param_keys: frozenset[str] = frozenset()
    for key in ("params", "extra_info"):
        part = entry.get(key) or {}
        if not isinstance(part, dict):
            raise ValueError(f"{where} ({name}): '{key}' must be an object, got {part!r}")
        fields.update({k: _hashable(v) for k, v in part.items()})
        if key == "params":
            param_keys = frozenset(part)
    rec = Record(
        name=name,
        fullname=str(entry.get("fullname") or name),
        group=entry.get("group"),
        fields=fields,
        param_keys=param_keys,
        stats=dict(stats),
        run=run,
    )
    try:
        work = rec.work
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where} ({name}): the work per call must be a number") from exc
    if not (math.isfinite(work) and work > 0):
        raise ValueError(f"{where} ({name}): the work per call must be positive, got {work!r}")
    return rec


def load_run(path: str | Path) -> Run:
    """Read one pytest-benchmark JSON file.

    Parameters
    ----------
    path : str or Path
        The file.

    Returns
    -------
    Run

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If it is not JSON or not in pytest-benchmark's format (a ``machine_info`` object, an ISO
        ``datetime`` and a ``benchmarks`` list whose entries have a positive ``stats.median``).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"benchmark results file not found: {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise ValueError(f"{path}: not a pytest-benchmark file (expected a 'benchmarks' list)")
    machine = data.get("machine_info")
    if not isinstance(machine, dict):
        raise ValueError(f"{path}: not a pytest-benchmark file (expected a 'machine_info' object)")
    run = Run(
        path=path,
        datetime=_parse_datetime(data.get("datetime"), path),
        commit=dict(data.get("commit_info") or {}),
        machine=machine,
        version=str(data.get("version", "")),
    )
    run.records = [_parse_record(e, run, i) for i, e in enumerate(data["benchmarks"])]
    return run


def _is_benchmark_file(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and "benchmarks" in data and "machine_info" in data


def load_runs(paths: Iterable[str | Path]) -> tuple[list[Run], list[str]]:
    """Read saved runs from files and directories, oldest first.

    Parameters
    ----------
    paths : iterable of str or Path
        JSON files (each must be a pytest-benchmark file) and directories (their ``*.json``
        files; one that is not a pytest-benchmark file is skipped and reported). A file reached
        twice is read once.

    Returns
    -------
    runs : list of Run
        Sorted by datetime, then path.
    skipped : list of str
        One sentence per skipped file.

    Raises
    ------
    FileNotFoundError
        If a path does not exist.
    ValueError
        If no path was given, no benchmark file was found, or a file is malformed.
    """
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("paths: expected at least one results file or directory")
    runs: list[Run] = []
    skipped: list[str] = []
    for path in paths:
        if path.is_dir():
            for file in sorted(path.glob("*.json")):
                if _is_benchmark_file(file):
                    runs.append(load_run(file))
                else:
                    skipped.append(f"{file} is not a pytest-benchmark file and was skipped.")
        elif path.exists():
            runs.append(load_run(path))
        else:
            raise FileNotFoundError(f"benchmark results path not found: {path}")
    if not runs:
        where = ", ".join(str(p) for p in paths)
        raise ValueError(f"paths: no pytest-benchmark JSON file found in {where}")
    unique = {run.path.resolve(): run for run in reversed(runs)}  # a file named twice counts once
    runs = sorted(unique.values(), key=lambda r: (r.datetime, str(r.path)))
    return runs, skipped


def latest_records(runs: Sequence[Run]) -> list[Record]:
    """The newest record of every benchmark (by full name) in ``runs`` (sorted oldest first)."""
    latest: dict[str, Record] = {}
    for run in runs:
        for rec in run.records:
            latest[rec.fullname] = rec
    return sorted(
        latest.values(),
        key=lambda r: (_sort_value(r.suite), _sort_value(r.group or ""), _sort_value(r.name)),
    )


def previous_record(runs: Sequence[Run], rec: Record) -> Record | None:
    """The same benchmark (by full name) in the newest run before ``rec``'s, or None."""
    found = None
    for run in runs:
        if run is rec.run:
            return found
        found = next((o for o in run.records if o.fullname == rec.fullname), found)
    return found


# --------------------------------------------------------------------------------------------
# Comparison and grouping


def config_fields(records: Sequence[Record]) -> list[str]:
    """The :data:`CONFIG_FIELDS` present in ``records``, in that order."""
    return [k for k in CONFIG_FIELDS if any(k in r.fields for r in records)]


def extra_params(records: Sequence[Record]) -> list[str]:
    """pytest parameters of ``records`` outside :data:`CONFIG_FIELDS` and
    :data:`RESULT_FIELDS` (sorted); they tell lines apart."""
    keys = {k for r in records for k in r.param_keys}
    return sorted(keys - set(CONFIG_FIELDS) - RESULT_FIELDS)


def _comparison_key(rec: Record, keys: Sequence[str]) -> tuple:
    return (rec.suite, rec.unit_noun, *(rec.fields.get(k) for k in keys))


def matching_baseline(rec: Record, candidates: Sequence[Record], baseline: str) -> Record | None:
    """The record of tool ``baseline`` that ``rec`` is compared with, or None.

    It has the same suite, unit of work and :data:`CONFIG_FIELDS` except tool, method and
    threads (a benchmark without a ``tool`` has no baseline).
    Among several, the preference is: same method (case-insensitive) and thread count, then same
    method, then same thread count, then the fastest per unit of work (the strictest comparison).

    Parameters
    ----------
    rec : Record
        The benchmark.
    candidates : sequence of Record
        Records to search (usually the latest ones).
    baseline : str
        The baseline's ``tool``.
    """
    if rec.fields.get("tool") is None:
        return None
    keys = [k for k in config_fields([rec, *candidates]) if k not in TOOL_FIELDS]
    own = _comparison_key(rec, keys)
    matches = [
        c
        for c in candidates
        if c.fields.get("tool") == baseline and _comparison_key(c, keys) == own
    ]
    if not matches:
        return None
    method = str(rec.fields.get("method", "")).lower()
    threads = rec.fields.get("threads")

    def preference(c: Record) -> tuple[int, int, float]:
        same_method = str(c.fields.get("method", "")).lower() == method
        same_threads = c.fields.get("threads") == threads
        return (not same_method, not same_threads, c.time_per_unit)

    return min(matches, key=preference)


def _series_label(rec: Record, series: Sequence[str], fallback: str | None = None) -> str:
    parts: list[str] = []
    for key in series:
        value = rec.fields.get(key)
        if value is None:
            continue
        if key == "threads":
            parts.append(f"{value} thread" + ("" if value == 1 else "s"))
        elif str(value) not in parts:  # a parameter repeating the tool, say
            parts.append(str(value))
    if parts:
        return " ".join(parts)
    return rec.base_name if fallback is None else fallback


def _format_value(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int) and abs(value) >= 1000:
        return f"{value:,}"
    return f"{value:g}"


def _describe(key: str, value: Any) -> str:
    return f"{FIELD_PREFIX.get(key, f'{key} =')} {_format_value(value)}".strip()


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _sort_value(value: Any) -> tuple:
    """Numbers first, then strings in natural order (``n4`` before ``n20``), then None."""
    if value is None:
        return (2, ())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, (float(value),))
    parts = re.split(r"(\d+)", str(value))
    return (1, tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts))


@dataclass
class Panel:
    """The points of one subplot.

    Attributes
    ----------
    key : tuple of (str, value)
        The panel's configuration (suite, system, lanes, ...).
    series : dict
        ``series[label] = [(x, y, record), ...]`` sorted by x.
    title : str
        The configuration fields that differ between panels.
    y_label : str
        Axis label (depends on the unit of work of the panel's records).
    """

    key: tuple[tuple[str, Any], ...]
    series: dict[str, list[tuple[float, float, Record]]]
    title: str = ""
    y_label: str = ""

    @property
    def records(self) -> list[Record]:
        """The records behind the points (one per point)."""
        return [r for pts in self.series.values() for _, _, r in pts]


@dataclass
class Grouping:
    """Panels of one plot and what the caption must say about them.

    Attributes
    ----------
    panels : list of Panel
        Panels in key order.
    shared : dict of str to list of str
        Per suite, the panel fields with one value across the suite's panels, described.
    n_bad : int
        Records with no usable y value (left out).
    n_merged : int
        Records that fell on the same line at the same x as another (their fields differ only
        outside the configuration fields) and were merged into the median.
    """

    panels: list[Panel]
    shared: dict[str, list[str]]
    n_bad: int
    n_merged: int

    def caption(self, text: str) -> str:
        """``text`` followed by the counts of left-out or merged points."""
        if self.n_bad:
            text += f" {self.n_bad} benchmark(s) without a positive finite value are not shown."
        if self.n_merged:
            text += (
                f" {self.n_merged} benchmark(s) share a line and an x value with another one "
                "(they differ only in fields the dashboard does not group by) and are shown as "
                "the median."
            )
        return text


def group_points(
    records: Sequence[Record],
    x_of: Callable[[Record], float | None],
    y_of: Callable[[Record], float],
    series_fields: Sequence[str],
    exclude: Sequence[str] = (),
    min_points: int = 1,
) -> Grouping:
    """Split ``records`` into panels and lines for a plot of ``y_of`` against ``x_of``.

    Records without a positive finite x are left out silently (the field is absent); records
    with a non-positive or non-finite y are counted.

    Parameters
    ----------
    records : sequence of Record
        Candidates.
    x_of, y_of : callable
        x and y of a record.
    series_fields : sequence of str
        Fields whose values make the lines of a panel (the benchmark function's name when none
        is present).
    exclude : sequence of str
        Configuration fields kept out of the panel key (the x field and fields that vary along a
        line, such as ``rtol`` in a work-precision plot).
    min_points : int
        Panels none of whose lines has this many points are dropped (before titles and shared
        fields are worked out).

    Returns
    -------
    Grouping
        Panels in key order (points with the same x on one line merged into their median) and
        what the caption must say.
    """
    usable = []
    n_bad = 0
    for rec in records:
        x = x_of(rec)
        if x is None or not math.isfinite(x) or x <= 0:
            continue
        y = y_of(rec)
        if not (math.isfinite(y) and y > 0):
            n_bad += 1
            continue
        usable.append((x, y, rec))
    recs = [r for _, _, r in usable]
    skip = {*series_fields, *exclude}
    keys = ["suite", "per", *(k for k in config_fields(recs) if k not in skip)]
    series_fields = [*series_fields, *(k for k in extra_params(recs) if k not in exclude)]

    def value(rec: Record, key: str) -> Any:
        if key == "suite":
            return rec.suite
        return rec.unit_noun if key == "per" else rec.fields.get(key)

    grouped: dict[tuple, dict[str, dict[float, list[tuple[float, Record]]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for x, y, rec in usable:
        key = tuple((k, value(rec, k)) for k in keys)
        grouped[key][_series_label(rec, series_fields)][x].append((y, rec))
    kept = [
        key
        for key in sorted(grouped, key=lambda kk: tuple(_sort_value(v) for _, v in kk))
        if any(len(line) >= min_points for line in grouped[key].values())
    ]
    shown: dict[str, set[str]] = {}
    shared: dict[str, list[str]] = {}
    for suite in {key[0][1] for key in kept}:
        seen = {k: {dict(key)[k] for key in kept if key[0][1] == suite} for k in keys[1:]}
        shown[suite] = {k for k in keys[1:] if len(seen[k]) > 1}
        shared[suite] = [
            _describe(k, v)
            for k in keys[2:]  # not the unit of work: the y axis says it
            if len(seen[k]) == 1 and (v := next(iter(seen[k]))) not in (None, "")
        ]
    panels = []
    n_merged = 0
    for key in kept:
        n_merged += sum(len(ys) - 1 for line in grouped[key].values() for ys in line.values())
        series = {
            label: [(x, statistics.median(y for y, _ in pts[x]), pts[x][0][1]) for x in sorted(pts)]
            for label, pts in sorted(grouped[key].items())
        }
        suite = key[0][1]
        title = ", ".join(
            _describe(k, v) for k, v in key if k in shown[suite] and v not in (None, "")
        )
        panels.append(Panel(key=key, series=series, title=title))
    return Grouping(panels, shared, n_bad, n_merged)


# --------------------------------------------------------------------------------------------
# Plot specifications


@dataclass
class PlotSpec:
    """A figure to draw: panels sharing axes kinds, and the text around it.

    Attributes
    ----------
    slug : str
        File stem of the PNG (``time-vs-n``; ``-2``, ``-3`` ... are added when the panels fill
        several images).
    caption : str
        What the plot shows, for a reader who has not seen the code.
    panels : list of Panel
        The subplots.
    x_label : str
        Axis label.
    x_log, y_log : bool
        Logarithmic axes.
    ideal_scaling : bool
        Draw a dashed line of linear scaling from each line's first point.
    y_time : bool
        The y axis is in seconds (else a rate).
    x_data_ticks : bool
        Put the x ticks at the measured values (n, lanes, threads) rather than at decades.
    x_ticks : list of str, optional
        Category labels at x = 1, 2, ... (history).
    shared : dict of str to list of str
        Per suite, the configuration shared by all its points (added to its caption).
    """

    slug: str
    caption: str
    panels: list[Panel]
    x_label: str
    x_log: bool = True
    y_log: bool = True
    ideal_scaling: bool = False
    x_ticks: list[str] | None = None
    y_time: bool = True
    x_data_ticks: bool = True
    shared: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Note:
    """A plot that was left out, and why."""

    text: str


def _y_label(records: Sequence[Record], kind: str) -> str:
    nouns = {r.unit_noun for r in records}
    if kind == "time":
        noun = nouns.pop() if len(nouns) == 1 else "unit of work"
        return f"time per {noun}"
    units = {r.rate_unit for r in records}
    return units.pop() if len(units) == 1 else "units of work per second"


def _label_panels(panels: list[Panel], kind: str) -> None:
    for panel in panels:
        panel.y_label = _y_label(panel.records, kind)


def _field_of(name: str) -> Callable[[Record], float | None]:
    return lambda rec: _number(rec.fields.get(name))


def _time_vs(records: Sequence[Record], name: str, title: str, why: str) -> PlotSpec | Note:
    if not any(_number(r.fields.get(name)) is not None for r in records):
        return Note(
            f"{title}: no benchmark records a numeric '{name}' in params or extra_info, "
            "so this plot is left out."
        )
    grouping = group_points(
        records,
        _field_of(name),
        lambda r: r.time_per_unit,
        SERIES_FIELDS,
        exclude=(name,),
        min_points=2,
    )
    panels = grouping.panels
    if not panels:
        return Note(
            f"{title}: no tool was measured at two or more values of '{name}' in the same "
            "configuration, so this plot is left out."
        )
    _label_panels(panels, "time")
    caption = (
        f"{title} (log-log). Median wall-clock time of one benchmark call divided by the "
        f"trajectories (or other units of work) it covers; one line per tool and method, lower "
        f"is better. {why}"
    )
    slug = f"time-vs-{name}"
    return PlotSpec(slug, grouping.caption(caption), panels, x_label=name, shared=grouping.shared)


def _work_precision(records: Sequence[Record]) -> PlotSpec | Note:
    title = "Work-precision"
    with_error = [
        r for r in records if r.fields.get("error") is not None and not r.is_rhs_evaluation
    ]
    if not with_error:
        return Note(
            f"{title}: no integration benchmark records a final-state 'error' in extra_info, so "
            "this plot is left out."
        )
    grouping = group_points(
        with_error,
        _field_of("error"),
        lambda r: r.time_per_unit,
        SERIES_FIELDS,
        exclude=("error", *TOLERANCE_FIELDS),
    )
    grouping.n_bad += sum(
        1 for r in with_error if (e := _number(r.fields.get("error"))) is None or e <= 0
    )
    panels = grouping.panels
    if not panels:
        return Note(f"{title}: no benchmark has a positive finite error, so this plot is left out.")
    _label_panels(panels, "time")
    caption = (
        f"{title} (log-log): time per trajectory against the error of the final state, one "
        "point per tolerance (rtol) and one line per tool and method. Down and to the left is "
        "better: at a given error, the lowest line is the fastest tool; at a given time, the "
        "leftmost is the most accurate."
    )
    return PlotSpec(
        "work-precision",
        grouping.caption(caption),
        panels,
        x_label="final-state error",
        x_data_ticks=False,
        shared=grouping.shared,
    )


def _threads(records: Sequence[Record], cores: int | None) -> PlotSpec | Note:
    title = "Throughput against threads"
    if not any(_number(r.fields.get("threads")) is not None for r in records):
        return Note(f"{title}: no benchmark records 'threads', so this plot is left out.")
    series = tuple(k for k in SERIES_FIELDS if k != "threads")
    grouping = group_points(
        records,
        _field_of("threads"),
        lambda r: r.throughput,
        series,
        exclude=("threads",),
        min_points=2,
    )
    panels = grouping.panels
    if not panels:
        return Note(
            f"{title}: no tool was measured at two or more thread counts in the same "
            "configuration, so this plot is left out."
        )
    _label_panels(panels, "rate")
    machine = f" The machine has {cores} cores." if cores else ""
    caption = (
        f"{title}: units of work (trajectories or evaluations) per second at the median time, "
        "higher is better. Dashed: ideal linear scaling from the smallest thread count; the "
        f"gap to it is the parallel overhead.{machine}"
    )
    return PlotSpec(
        "throughput-vs-threads",
        grouping.caption(caption),
        panels,
        x_label="threads",
        x_log=False,
        y_log=False,
        ideal_scaling=True,
        y_time=False,
        shared=grouping.shared,
    )


def _distinguishing_labels(records: Sequence[Record]) -> list[str]:
    """Short labels naming the configuration fields in which ``records`` differ.

    Tool, method and threads come first (``nhfast dop853 2 threads``), then the other fields
    (``lanes 1000, rtol = 1e-06``); the benchmark names are used when these do not tell the
    records apart.
    """
    if len(records) == 1:
        return [records[0].configuration or records[0].name]
    candidates = config_fields(records) + extra_params(records)
    keys = [k for k in candidates if len({r.fields.get(k) for r in records}) > 1]
    head = [k for k in ("tool", "method", "stage", "threads") if k in keys]
    tail = [k for k in keys if k not in head]
    labels = []
    for rec in records:
        parts = [_series_label(rec, head, fallback="")] if head else []
        parts += [_describe(k, rec.fields[k]) for k in tail if rec.fields.get(k) is not None]
        labels.append(", ".join(p for p in parts if p))
    if len(set(labels)) < len(labels) or not all(labels):
        return [r.name for r in records]
    return labels


def _history(runs: Sequence[Run]) -> PlotSpec | Note:
    title = "History"
    if len(runs) < 2:
        return Note(f"{title}: only one saved run, so there is no history to plot yet.")
    position = {id(run): i + 1 for i, run in enumerate(runs)}
    counts: dict[str, int] = defaultdict(int)
    for run in runs:
        for rec in run.records:
            counts[rec.fullname] += 1
    repeated = [r for run in runs for r in run.records if counts[r.fullname] >= 2]
    if not repeated:
        return Note(f"{title}: no benchmark appears in two or more saved runs.")
    grouped: dict[tuple, dict[str, list[tuple[float, float, Record]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for rec in repeated:
        key = (("suite", rec.suite), ("group", rec.group or rec.base_name))
        grouped[key][rec.fullname].append((position[id(rec.run)], rec.time_per_unit, rec))
    panels = []
    for key in sorted(grouped, key=lambda kk: tuple(_sort_value(v) for _, v in kk)):
        lines = [sorted(pts, key=lambda p: p[0]) for pts in grouped[key].values()]
        labels = _distinguishing_labels([pts[-1][2] for pts in lines])
        labelled = sorted(zip(labels, lines, strict=True), key=lambda item: _sort_value(item[0]))
        group = str(key[1][1])
        parts = math.ceil(len(labelled) / MAX_LINES)
        for k in range(parts):
            chunk = dict(labelled[k * MAX_LINES : (k + 1) * MAX_LINES])
            part = f" ({k + 1} of {parts})" if parts > 1 else ""
            panels.append(Panel(key=key, series=chunk, title=group + part))
    _label_panels(panels, "time")
    caption = (
        f"{title}: the median of each benchmark that appears in two or more saved runs, per "
        "unit of work, at each run (oldest on the left, labelled by date and commit). One panel "
        "per benchmark group; a rising line is a slow-down."
    )
    ticks = [run.label.replace(" ", "\n", 1) for run in runs]
    return PlotSpec("history", caption, panels, x_label="saved run", x_log=False, x_ticks=ticks)


def plot_sections(runs: Sequence[Run]) -> list[tuple[str, PlotSpec | Note]]:
    """The dashboard's plots (or notes saying why one is left out), with section titles.

    Parameters
    ----------
    runs : sequence of Run
        Saved runs, oldest first; all but the history use the latest record of each benchmark.
    """
    latest = latest_records(runs)
    cores = (runs[-1].machine.get("cpu") or {}).get("count")
    return [
        (
            "Time against n",
            _time_vs(
                latest,
                "n",
                "Time against the state dimension n",
                "The slope shows how the cost grows with the size of the system.",
            ),
        ),
        (
            "Time against lanes",
            _time_vs(
                latest,
                "lanes",
                "Time against the number of lanes",
                "Lanes are the trajectories integrated in one call. A falling line is the gain "
                "of batching (fixed costs shared, SIMD over lanes); a flat line means the cost "
                "grows linearly with the batch.",
            ),
        ),
        ("Work-precision", _work_precision(latest)),
        ("Throughput against threads", _threads(latest, cores)),
        ("History", _history(runs)),
    ]


# --------------------------------------------------------------------------------------------
# Drawing


def _matplotlib() -> SimpleNamespace:
    """matplotlib's object API (no pyplot state) with the Agg canvas, imported on first use."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
        from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator
    except ImportError as exc:
        raise ImportError(
            "the benchmark dashboard draws its plots with matplotlib, which is not installed: "
            "pip install matplotlib"
        ) from exc
    return SimpleNamespace(
        Figure=Figure,
        FigureCanvasAgg=FigureCanvasAgg,
        Line2D=Line2D,
        FuncFormatter=FuncFormatter,
        LogLocator=LogLocator,
        NullLocator=NullLocator,
    )


class _Styles:
    """Line styles stable across a page: one colour per tool (per label for lines without a
    tool), and per line of a tool a marker and a dash pattern."""

    LINESTYLES = ("-", "--", "-.", ":")

    def __init__(self) -> None:
        self._colours: dict[str, str] = {}
        self._variants: dict[str, dict[str, tuple[str, str]]] = defaultdict(dict)

    def __call__(self, label: str, tool: str | None = None) -> tuple[str, str, str]:
        key = label if tool is None else f"tool:{tool}"
        if key not in self._colours:
            self._colours[key] = COLOURS[len(self._colours) % len(COLOURS)]
        variants = self._variants[key]
        if label not in variants:
            j = len(variants)
            variants[label] = (MARKERS[j % len(MARKERS)], self.LINESTYLES[j % len(self.LINESTYLES)])
        return (self._colours[key], *variants[label])


def _log_y_axis(ax: Any, mpl: SimpleNamespace, values: Sequence[float], fmt: Any) -> None:
    ax.set_yscale("log")
    span = math.log10(max(values) / min(values)) if values else 0.0
    if span < 0.6:
        subs: Sequence[float] = range(1, 10)
    elif span <= 2.5:
        subs = (1.0, 2.0, 5.0)
    else:
        subs = (1.0,)
    ax.yaxis.set_major_locator(mpl.LogLocator(base=10.0, subs=subs, numticks=12))
    ax.yaxis.set_major_formatter(mpl.FuncFormatter(fmt))
    ax.yaxis.set_minor_locator(mpl.NullLocator())


def _seconds_tick(value: float, _pos: Any) -> str:
    return format_seconds(value) if value > 0 else "0"


def _number_tick(value: float, _pos: Any) -> str:
    return format_number(value)


def _draw_panel(
    ax: Any, spec: PlotSpec, panel: Panel, styles: Any, mpl: SimpleNamespace
) -> list[tuple[str, Any]]:
    handles: list[tuple[str, Any]] = []
    ys_all: list[float] = []
    for label, pts in panel.series.items():
        tool = pts[0][2].fields.get("tool")
        colour, marker, linestyle = styles(label, None if tool is None else str(tool))
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        (line,) = ax.plot(
            xs, ys, marker=marker, color=colour, linestyle=linestyle, linewidth=1.4, markersize=5
        )
        handles.append((label, line))
        ys_all += ys
        if spec.ideal_scaling and len(pts) >= 2:
            ideal = [ys[0] * x / xs[0] for x in xs]
            ax.plot(xs, ideal, linestyle="--", color=colour, alpha=0.6, linewidth=1.0)
            ys_all += ideal
    y_fmt = _seconds_tick if spec.y_time else _number_tick
    if spec.y_log:
        _log_y_axis(ax, mpl, ys_all, y_fmt)
    else:
        ax.set_ylim(0.0, 1.08 * max(ys_all))
        ax.yaxis.set_major_formatter(mpl.FuncFormatter(y_fmt))
    xs_all = sorted({p[0] for pts in panel.series.values() for p in pts})
    if spec.x_ticks is not None:
        ax.set_xticks(range(1, len(spec.x_ticks) + 1), spec.x_ticks, fontsize=7)
        ax.set_xlim(0.6, len(spec.x_ticks) + 0.4)
    else:
        if spec.x_log:
            ax.set_xscale("log")
        if spec.x_data_ticks and len(xs_all) <= 10:
            ax.set_xticks(xs_all, [format_number(x) for x in xs_all])
        else:
            ax.xaxis.set_major_formatter(mpl.FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.xaxis.set_minor_locator(mpl.NullLocator())
        if len(xs_all) == 1:  # one point: widen the axis around it
            x = xs_all[0]
            ax.set_xlim(*((x / 3, x * 3) if spec.x_log else (x - 1, x + 1)))
    ax.set_xlabel(spec.x_label, fontsize=9)
    ax.set_ylabel(panel.y_label, fontsize=9)
    ax.set_title(textwrap.fill(panel.title, 60), fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(True, which="major", alpha=0.3)
    return handles


def render_png(spec: PlotSpec, panels: Sequence[Panel], path: Path, styles: Any = None) -> Path:
    """Draw ``panels`` of ``spec`` into a PNG file (matplotlib's Agg backend).

    The panels share one legend below them; a line keeps its colour, marker and line style in
    every panel (and, with a shared ``styles``, in every figure).

    Parameters
    ----------
    spec : PlotSpec
        Axes kinds and labels.
    panels : sequence of Panel
        1 to :data:`MAX_PANELS` subplots.
    path : Path
        The PNG to write.
    styles : callable, optional
        ``styles(label, tool) -> (colour, marker, linestyle)``; a fresh palette by default.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    ValueError
        If there are no panels or more than :data:`MAX_PANELS`.
    """
    if not 0 < len(panels) <= MAX_PANELS:
        raise ValueError(f"panels: expected 1 to {MAX_PANELS} panels, got {len(panels)}")
    mpl = _matplotlib()
    styles = styles or _Styles()
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    n_entries = len({label for panel in panels for label in panel.series}) + spec.ideal_scaling
    legend_cols = min(n_entries, 3 if ncols > 1 else 2)
    # A fixed layout in inches (cheaper than matplotlib's layout engines): room for the y tick
    # labels and label on the left of each panel, two title lines above, tick labels and the
    # x label below, and the shared legend at the bottom.
    axis_w = 4.6 if spec.x_ticks is not None and len(spec.x_ticks) > 4 else 3.6
    axis_h, gap_w, gap_h = 2.5, 1.05, 1.1
    left, right, top = 0.9, 0.2, 0.5
    bottom = 0.65 + (0.15 if spec.x_ticks is not None else 0.0)
    bottom += 0.22 * math.ceil(n_entries / legend_cols) + 0.1
    width = left + right + ncols * axis_w + (ncols - 1) * gap_w
    height = top + bottom + nrows * axis_h + (nrows - 1) * gap_h
    fig = mpl.Figure(figsize=(width, height), dpi=100)
    fig.subplots_adjust(
        left=left / width,
        right=1.0 - right / width,
        top=1.0 - top / height,
        bottom=bottom / height,
        wspace=gap_w / axis_w,
        hspace=gap_h / axis_h,
    )
    mpl.FigureCanvasAgg(fig)
    legend: dict[str, Any] = {}
    for i, panel in enumerate(panels):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        for label, handle in _draw_panel(ax, spec, panel, styles, mpl):
            legend.setdefault(label, handle)
    if spec.ideal_scaling:
        legend["ideal linear scaling (dashed)"] = mpl.Line2D(
            [], [], color="grey", linestyle="--", alpha=0.8
        )
    fig.legend(
        list(legend.values()),
        list(legend),
        loc="lower center",
        bbox_to_anchor=(0.5, 0.05 / height),
        ncols=legend_cols,
        fontsize=8,
        frameon=False,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


# --------------------------------------------------------------------------------------------
# Page


def format_seconds(seconds: float) -> str:
    """Three significant digits with a readable unit (``1.77 s``, ``8.61 ms``, ``242 µs``)."""
    rounded = float(f"{seconds:.3g}")  # 999.7 µs is written 1 ms, not 1e+03 µs
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if rounded >= scale:
            return f"{rounded / scale:.3g} {unit}"
    return f"{rounded / 1e-9:.3g} ns"


def format_number(value: float) -> str:
    """Three significant digits without an exponent below 10^9 (``56,400``, ``1.85``)."""
    rounded = float(f"{value:.3g}")
    if 1e3 <= abs(rounded) < 1e9:
        return f"{rounded:,.0f}"
    return f"{rounded:g}"


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 100em; padding: 0 1em;
       color: #222; line-height: 1.45; }
h1 { margin-bottom: 0.2em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.nowrap { white-space: nowrap; }
div.scroll { overflow-x: auto; }
th { background: #f0f0f0; }
figure { margin: 1.2em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { max-width: 60em; font-size: 0.95em; }
p.note { color: #6a4a00; background: #fff6dd; padding: 0.4em 0.8em;
         border-left: 4px solid #e0a800; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
dt { font-weight: bold; }
"""


def _machine_items(run: Run) -> list[tuple[str, str]]:
    m = run.machine
    cpu = m.get("cpu") or {}
    items = [
        ("CPU", run.cpu),
        ("Clock", cpu.get("hz_advertised_friendly") or ""),
        ("Architecture", m.get("machine") or cpu.get("arch") or ""),
        ("System", f"{m.get('system', '')} {m.get('release', '')}".strip()),
        (
            "Python",
            f"{m.get('python_implementation', '')} {m.get('python_version', '')} "
            f"({m.get('python_compiler', '')})".replace(" ()", "").strip(),
        ),
        ("Host", m.get("node") or ""),
        ("pytest-benchmark", run.version),
    ]
    return [(k, str(v)) for k, v in items if v]


def _commit_text(commit: dict[str, Any]) -> str:
    text = str(commit.get("id") or "")[:12]
    return f"{text} (dirty)" if text and commit.get("dirty") else text


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], table_id: str) -> list[str]:
    out = ['<div class="scroll">', f'<table id="{table_id}">', "<thead><tr>"]
    out += [f"<th>{_esc(h)}</th>" for h in headers]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(row) + "</tr>")
    out.append("</tbody></table>")
    out.append("</div>")
    return out


def _td(text: str, numeric: bool = False, nowrap: bool = False) -> str:
    if numeric:
        return f'<td class="num">{_esc(text)}</td>'
    return f'<td class="nowrap">{_esc(text)}</td>' if nowrap else f"<td>{_esc(text)}</td>"


def _latest_table(
    runs: Sequence[Run], latest: Sequence[Record], baselines: Sequence[str]
) -> list[str]:
    headers = ["Benchmark", "Group", "Tool", "Median per call", "Rounds", "Throughput"]
    headers += [f"Speed-up vs {b}" for b in baselines]
    headers += ["Change vs previous run", "Run"]
    rows = []
    for rec in latest:
        cells = [
            _td(rec.name),
            _td(rec.group or "", nowrap=True),
            _td(rec.configuration, nowrap=True),
            _td(format_seconds(rec.median), True),
            _td(str(rec.stats.get("rounds", "")), True),
            _td(f"{format_number(rec.throughput)} {rec.rate_unit}", True),
        ]
        for base in baselines:
            ref = matching_baseline(rec, latest, base)
            ratio = ref.time_per_unit / rec.time_per_unit if ref else None
            cells.append(_td(f"{format_number(ratio)}×" if ratio else "", True))
        prev = previous_record(runs, rec)
        change = f"{100.0 * (rec.time_per_unit / prev.time_per_unit - 1.0):+.1f} %" if prev else ""
        cells += [_td(change, True), _td(rec.run.label, nowrap=True)]
        rows.append(cells)
    return _table(headers, rows, "latest")


def render_html(
    runs: Sequence[Run],
    figures: Sequence[tuple[str, list[tuple[str, str, str]] | Note]],
    baselines: Sequence[str],
    notes: Sequence[str] = (),
    title: str = PAGE_TITLE,
) -> str:
    """The dashboard page as an HTML5 string.

    Parameters
    ----------
    runs : sequence of Run
        Saved runs, oldest first.
    figures : sequence of (section title, images or Note)
        ``images`` is a list of ``(relative PNG path, alt text, caption)``.
    baselines : sequence of str
        Tools with a speed-up column (those present in the latest results).
    notes : sequence of str
        Sentences shown under the title (skipped files, absent baselines).
    title : str
        Page title.
    """
    latest = latest_records(runs)
    newest = runs[-1]
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_esc(title)}</title>",
        f"<style>{STYLE}</style>",
        "</head>",
        "<body>",
        "<header>",
        f"<h1>{_esc(title)}</h1>",
        f"<p>{len(runs)} saved run(s), {len(latest)} benchmark(s); newest run "
        f"{_esc(newest.label)}. Page generated {generated}.</p>",
    ]
    out += [f'<p class="note">{_esc(n)}</p>' for n in notes]
    out += ["</header>", "<main>", '<section id="machine">', "<h2>Machine of the newest run</h2>"]
    out.append("<dl>")
    for key, value in _machine_items(newest):
        out.append(f"<dt>{_esc(key)}</dt><dd>{_esc(value)}</dd>")
    out += ["</dl>", "</section>", '<section id="runs">', "<h2>Saved runs</h2>"]
    run_rows = [
        [
            _td(run.path.name),
            _td(f"{run.datetime:%Y-%m-%d %H:%M:%S %Z}".strip()),
            _td(_commit_text(run.commit)),
            _td(str(run.commit.get("branch", ""))),
            _td(run.cpu),
            _td(str(len(run.records)), True),
        ]
        for run in runs
    ]
    out += _table(
        ["File", "Date", "Commit", "Branch", "Machine", "Benchmarks"], run_rows, "saved-runs"
    )
    out += ["</section>", '<section id="latest-results">', "<h2>Latest results</h2>"]
    out.append(
        "<p>The newest result of every benchmark. <em>Median per call</em> is the median wall "
        "time of one timed call; <em>throughput</em> divides the units of work of that call "
        "(trajectories or right-hand-side evaluations) by it. <em>Speed-up vs</em> a baseline "
        "tool is the baseline's time per unit of work over this one's, in the same "
        "configuration (system, n, lanes, tolerance; method and threads may differ): above 1 is "
        "faster than the baseline. <em>Change</em> compares the time per unit of work with the "
        "previous saved run of the same benchmark: + is slower.</p>"
    )
    out += _latest_table(runs, latest, baselines)
    out += ["</section>", '<section id="plots">', "<h2>Plots</h2>"]
    for heading, content in figures:
        anchor = heading.lower().replace(" ", "-")
        out += [f'<section id="{_esc(anchor)}">', f"<h3>{_esc(heading)}</h3>"]
        if isinstance(content, Note):
            out.append(f'<p class="note">{_esc(content.text)}</p>')
        else:
            for src, alt, caption in content:
                out += [
                    "<figure>",
                    f'<img src="{_esc(src)}" alt="{_esc(alt)}">',
                    f"<figcaption>{_esc(caption)}</figcaption>",
                    "</figure>",
                ]
        out.append("</section>")
    out += ["</section>", "</main>", "</body>", "</html>", ""]
    return "\n".join(out)


def _image_chunks(spec: PlotSpec) -> list[tuple[str, str, list[Panel]]]:
    """``(file name, suite, panels)`` per image: one suite per image, at most
    :data:`MAX_PANELS` panels each."""
    suites: dict[str, list[Panel]] = defaultdict(list)
    for panel in spec.panels:
        suites[str(panel.key[0][1])].append(panel)
    chunks = []
    for suite, panels in suites.items():
        for i in range(0, len(panels), MAX_PANELS):
            chunks.append((suite, panels[i : i + MAX_PANELS]))
    out = []
    for k, (suite, panels) in enumerate(chunks, start=1):
        name = f"{spec.slug}.png" if len(chunks) == 1 else f"{spec.slug}-{k}.png"
        out.append((name, suite, panels))
    return out


def build_dashboard(
    paths: Iterable[str | Path] = (DEFAULT_RESULTS,),
    out_dir: str | Path = DEFAULT_OUT,
    baselines: Sequence[str] = DEFAULT_BASELINES,
    title: str = PAGE_TITLE,
) -> Path:
    """Render the dashboard of saved runs into ``out_dir/index.html`` and ``out_dir/img/*.png``.

    Parameters
    ----------
    paths : iterable of str or Path
        pytest-benchmark JSON files and directories of them.
    out_dir : str or Path
        Output directory (created; its ``img`` folder is rewritten).
    baselines : sequence of str
        Tools (``extra_info["tool"]``) to compare with in the table, when present.
    title : str
        Page title.

    Returns
    -------
    Path
        The written ``index.html``.

    Raises
    ------
    FileNotFoundError, ValueError
        Unreadable or malformed inputs (see :func:`load_runs`); ``out_dir`` an existing file.
    ImportError
        If matplotlib is not installed.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"out_dir: expected a directory, but {out_dir} is a file")
    if isinstance(baselines, str):
        raise TypeError("baselines: expected a sequence of tool names, not one string")
    runs, notes = load_runs(paths)
    _matplotlib()  # fail before writing anything when matplotlib is missing
    latest = latest_records(runs)
    tools = {r.fields.get("tool") for r in latest}
    present = [b for b in baselines if b in tools]
    notes += [
        f"Baseline tool '{b}' is not among the tools of the latest results, so the table has no "
        "speed-up column for it."
        for b in baselines
        if b not in tools
    ]
    machines = {(run.machine.get("node"), run.cpu) for run in runs}
    if len(machines) > 1:
        notes.append(
            f"The saved runs come from {len(machines)} different machines (see the saved runs); "
            "their timings are not comparable with each other."
        )
    img = out_dir / "img"
    if img.exists():
        shutil.rmtree(img)
    img.mkdir(parents=True)
    styles = _Styles()
    figures: list[tuple[str, list[tuple[str, str, str]] | Note]] = []
    for heading, spec in plot_sections(runs):
        if isinstance(spec, Note):
            figures.append((heading, spec))
            continue
        images = []
        chunks = _image_chunks(spec)
        several = len({suite for _, suite, _ in chunks}) > 1
        for name, suite, chunk in chunks:
            render_png(spec, chunk, img / name, styles)
            titles = "; ".join(p.title for p in chunk if p.title)
            caption = spec.caption
            if spec.shared.get(suite):
                caption += " All points: " + ", ".join(spec.shared[suite]) + "."
            if several and suite:
                caption = f"Suite {suite}. {caption}"
            alt = heading + (f" ({suite})" if several and suite else "")
            images.append((f"img/{name}", alt + (f": {titles}" if titles else ""), caption))
        figures.append((heading, images))
    index = out_dir / "index.html"
    index.write_text(render_html(runs, figures, present, notes, title), encoding="utf-8")
    return index


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``dashboard.py [RESULTS_DIR_OR_JSON ...] [--out DIR] [--baseline TOOL]``."""
    parser = argparse.ArgumentParser(
        description="Render saved pytest-benchmark JSON runs into a static HTML dashboard."
    )
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        default=[DEFAULT_RESULTS],
        help=f"JSON files or directories of them (default: {DEFAULT_RESULTS})",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default: {DEFAULT_OUT})"
    )
    parser.add_argument(
        "--baseline",
        action="append",
        default=None,
        metavar="TOOL",
        help="tool to compare with in the table; repeatable (default: scipy and hand-c)",
    )
    parser.add_argument("--title", default=PAGE_TITLE, help="page title")
    args = parser.parse_args(argv)
    try:
        index = build_dashboard(
            args.paths, args.out, tuple(args.baseline or DEFAULT_BASELINES), args.title
        )
    except (FileNotFoundError, ValueError, ImportError) as exc:
        print(f"dashboard: error: {exc}", file=sys.stderr)
        return 1
    print(index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
