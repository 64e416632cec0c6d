"""Renderers for a :class:`~nhfast.analysis.result.Report`: text table, JSON, PNG plots, index.

Only the records are read, so every check renders the same way:

* :func:`render_text` -- the terminal table: verdicts first, then every figure, settings and
  timings;
* :func:`write_json` -- ``report.json`` with every field of every check (series and samples
  included);
* :func:`write_plots` -- one PNG per check with ``series`` (value vs time, log scale where
  positive) and one per check with ``samples`` (histogram of the per-trajectory or per-sample
  values); matplotlib is
  imported lazily and drawn with the Agg canvas (no pyplot, no global backend switch);
* :func:`write_report` -- all of the above plus ``report.md``, an index of the files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nhfast.analysis.result import Check, Report

__all__ = [
    "verdict",
    "render_text",
    "write_json",
    "read_json",
    "write_plots",
    "write_report",
    "PlotOutcome",
]

_VERDICT = {True: "PASS", False: "FAIL", None: "----"}
#: Longest statement (characters) in the text table; ``report.json`` keeps them whole.
STATEMENT_WIDTH = 300
_PLOT_NAME = re.compile(r"^\d\d_[a-z0-9_]+_(series|hist)\.png$")  # names written by write_plots


def verdict(holds: bool | None) -> str:
    """``"PASS"``, ``"FAIL"`` or ``"----"`` (not decided)."""
    return _VERDICT[None if holds is None else bool(holds)]


def _fmt(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if v == 0 or (1e-3 <= abs(v) < 1e5):
            return f"{v:.6g}"
        return f"{v:.3e}"
    if isinstance(value, dict):
        return ", ".join(f"{k} = {_fmt(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple, np.ndarray)):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return str(value)


def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [
        fmt.format(*header).rstrip(),
        "  ".join("-" * w for w in widths),
        *(fmt.format(*r).rstrip() for r in rows),
    ]


def render_text(report: Report) -> str:
    """The report as a plain-text table for the terminal.

    Parameters
    ----------
    report : Report

    Returns
    -------
    str
        Title; one line per check ``PASS/FAIL/---- name: statement``; then the figures of
        every check, the system, the settings and the timings (long statements and values are
        clipped with ``...``; ``report.json`` has them in full).
    """
    if not isinstance(report, Report):
        raise TypeError(f"report must be a Report, got {type(report).__name__}")
    out = [report.title, "=" * len(report.title), ""]
    counts = {v: sum(verdict(c.holds) == v for c in report.checks) for v in _VERDICT.values()}
    out.append(
        f"Verdicts: {counts['PASS']} pass, {counts['FAIL']} fail, {counts['----']} undecided"
    )
    for c in report.checks:
        out.append(f"  {verdict(c.holds)}  {c.name}: {_clip(c.statement, STATEMENT_WIDTH)}")
    rows = [[c.name, str(k), _clip(_fmt(v))] for c in report.checks for k, v in c.figures.items()]
    if rows:
        out += ["", "Figures", *_table(rows, ["check", "figure", "value"])]
    for heading, mapping in (("System", report.system), ("Settings", report.settings)):
        if mapping:
            out += ["", heading, *_table([[k, _fmt(v)] for k, v in mapping.items()], ["", ""])[2:]]
    if report.timings:
        rows = [[k, f"{v:.2f}"] for k, v in report.timings.items()]
        out += ["", "Timings [s]", *_table(rows, ["", ""])[2:]]
    return "\n".join(out) + "\n"


def write_json(report: Report, path: str | Path) -> Path:
    """Write ``report.to_dict()`` as JSON (non-finite floats as strings, see ``jsonable``)."""
    path = Path(path)
    path.write_text(json.dumps(report.to_dict(), indent=1, allow_nan=False) + "\n")
    return path


def read_json(path: str | Path) -> Report:
    """Read a report written by :func:`write_json` back (arrays as NumPy arrays)."""
    data = json.loads(Path(path).read_text())

    def arrays(d: dict[str, Any]) -> dict[str, np.ndarray]:
        return {k: np.array([float(x) for x in v]) for k, v in d.items()}

    checks = [
        Check(
            c["name"],
            c["holds"],
            c["statement"],
            c["figures"],
            arrays(c["series"]),
            arrays(c["samples"]),
        )
        for c in data["checks"]
    ]
    return Report(data["title"], data["system"], data["settings"], checks, data["timings"])


def _md_cell(text: str) -> str:
    """Text for a Markdown table cell (pipes escaped)."""
    return text.replace("|", "\\|")


def _clip(text: str, width: int = 70) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:60] or "check"


class PlotOutcome:
    """Files written by :func:`write_plots`, or why none were.

    Attributes
    ----------
    files : list of (Path, str)
        Each PNG with a one-line description.
    skipped : str
        Empty, or the reason plots were skipped (e.g. matplotlib is not installed).
    """

    def __init__(self, files: list[tuple[Path, str]], skipped: str = "") -> None:
        self.files = files
        self.skipped = skipped


def _series_plot(
    check: Check, path: Path, figure_cls: Any, canvas_cls: Any
) -> tuple[Path, str] | None:
    t = np.asarray(check.series.get("t", []), dtype=float)
    curves = {k: np.asarray(v, dtype=float) for k, v in check.series.items() if k != "t"}
    curves = {k: v for k, v in curves.items() if v.shape == t.shape and t.size > 0}
    if not curves:
        return None
    fig = figure_cls(figsize=(6.4, 4.0))
    canvas_cls(fig)
    ax = fig.add_subplot()
    finite = [v[np.isfinite(v)] for v in curves.values()]
    logscale = all(np.all(v >= 0) for v in finite) and any(np.any(v > 0) for v in finite)
    for k, v in curves.items():
        if logscale:  # zeros (e.g. at t = 0) cannot be shown on a log axis
            ax.semilogy(t[v > 0], v[v > 0], label=k)
        else:
            ax.plot(t, v, label=k)
    threshold = check.figures.get("threshold")
    if isinstance(threshold, (int, float)) and not isinstance(threshold, bool) and logscale:
        ax.axhline(float(threshold), color="k", linestyle="--", linewidth=1, label="threshold")
    ax.set_xlabel("t")
    ax.set_title(check.name, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path, f"{check.name}: {', '.join(curves)} vs t"


def _histogram(
    check: Check, path: Path, figure_cls: Any, canvas_cls: Any
) -> tuple[Path, str] | None:
    samples = {k: np.asarray(v, dtype=float) for k, v in check.samples.items()}
    samples = {k: v[np.isfinite(v)] for k, v in samples.items()}
    samples = {k: v for k, v in samples.items() if v.size > 0}
    if not samples:
        return None
    fig = figure_cls(figsize=(6.4, 4.0))
    canvas_cls(fig)
    ax = fig.add_subplot()
    for k, v in samples.items():
        if np.all(v > 0) and v.max() > 10 * v.min():
            ax.hist(np.log10(v), bins="auto", alpha=0.6, label=f"log10 {k}")
        else:
            ax.hist(v, bins="auto", alpha=0.6, label=k)
    ax.set_ylabel("count")
    ax.set_xlabel("value per trajectory or sample point (log10 where marked)")
    ax.set_title(check.name, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path, f"{check.name}: histogram of {', '.join(samples)}"


def write_plots(report: Report, directory: str | Path) -> PlotOutcome:
    """PNG plots of every check's ``series`` and ``samples``.

    Parameters
    ----------
    report : Report
    directory : str or Path
        Existing directory.

    Returns
    -------
    PlotOutcome
        The files written; ``skipped`` says why there are none when matplotlib is missing.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        return PlotOutcome([], f"plots skipped: matplotlib is not available ({exc})")
    directory = Path(directory)
    files = []
    for i, check in enumerate(report.checks, start=1):
        stem = f"{i:02d}_{_slug(check.name)}"
        for suffix, draw in (("series", _series_plot), ("hist", _histogram)):
            made = draw(check, directory / f"{stem}_{suffix}.png", Figure, FigureCanvasAgg)
            if made is not None:
                files.append(made)
    return PlotOutcome(files)


def write_report(report: Report, directory: str | Path, plots: bool = True) -> dict[str, Path]:
    """Write ``report.txt``, ``report.json``, the PNG plots and the index ``report.md``.

    Parameters
    ----------
    report : Report
    directory : str or Path
        Created if needed. PNG files named like this function's plots (``NN_<check>_series.png``,
        ``NN_<check>_hist.png``) left there by an earlier report are removed first.
    plots : bool
        Draw the PNG plots.

    Returns
    -------
    dict of str to Path
        ``"text"``, ``"json"``, ``"index"`` and one entry per PNG (keyed by file name).
    """
    if not isinstance(report, Report):
        raise TypeError(f"report must be a Report, got {type(report).__name__}")
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"directory: {directory} exists and is not a directory")
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.iterdir():  # plots of an earlier report here would mislead
        if _PLOT_NAME.match(old.name) and old.is_file():
            old.unlink()
    text = directory / "report.txt"
    text.write_text(render_text(report))
    files = {"text": text, "json": write_json(report, directory / "report.json")}
    outcome = write_plots(report, directory) if plots else PlotOutcome([], "plots not requested")
    index = [f"# {report.title}", "", "| verdict | check | statement |", "|---|---|---|"]
    for c in report.checks:
        index.append(f"| {verdict(c.holds)} | {_md_cell(c.name)} | {_md_cell(c.statement)} |")
    index += [
        "",
        "## Files",
        "",
        "- `report.txt`: the table printed on the terminal (verdicts, figures, settings, timings)",
        "- `report.json`: every figure, time series and per-trajectory sample of every check",
    ]
    for path, what in outcome.files:
        index.append(f"- `{path.name}`: {what}")
        files[path.name] = path
    if outcome.skipped:
        index.append(f"- no PNG plots: {outcome.skipped}")
    md = directory / "report.md"
    md.write_text("\n".join(index) + "\n")
    files["index"] = md
    return files
