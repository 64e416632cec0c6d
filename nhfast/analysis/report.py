"""Renderers for a :class:`~nhfast.analysis.result.Report`: text table, JSON, PNG plots, index.

Only the records are read, so every check renders the same way:

* :func:`render_text` -- the terminal table: verdicts first, then every figure, settings and
  timings;
* :func:`write_json` -- ``report.json`` with every field of every check (series and samples
  included);
* :func:`write_plots` -- one PNG per check with ``series`` (:func:`series_figure`: value vs
  time, log scale where positive, y axis labelled, the clock ``t(tau)`` of a tau-flow on its
  own axis) and one per check with ``samples`` (:func:`histogram_figure`: one axis per sample
  set, ``log10 |value|`` with a floor or linear); matplotlib is imported lazily and drawn with
  the Agg canvas (no pyplot, no global backend switch);
* :func:`write_report` -- all of the above plus ``report.md``, an index of the files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nhfast._records import Check, jsonable

__all__ = ["Report"]


@dataclass
class Report:
    """A run: what was integrated, how, and every check made on it.

    Attributes
    ----------
    title
        Heading, e.g. ``"Veselova rigid body on SO(6)"``.
    system
        Description of the system (name, dimension, parameters) as figures.
    settings
        How it was run (method, tolerances, lanes, final time, threads, seed).
    checks
        The checks in the order they should be shown.
    timings
        Wall-clock seconds per stage (``"codegen"``, ``"compile"``, ``"integrate"``, ...).
    """

    title: str
    system: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def write(self, directory: str | Path, plots: bool = True) -> dict[str, Path]:
        """Write ``report.txt``, ``report.json``, the PNG plots and the index ``report.md``.

        Parameters
        ----------
        directory : str or Path
            Created if needed; PNG plots of an earlier report there are removed first.
        plots : bool
            Draw the PNG plots (Matplotlib).

        Returns
        -------
        dict of str to Path
            ``"text"``, ``"json"``, ``"index"`` and one entry per PNG (keyed by file name).

        Raises
        ------
        NotADirectoryError
            If ``directory`` exists and is not a directory.
        """
        return write_report(self, directory, plots)

    @classmethod
    def read(cls, path: str | Path) -> Report:
        """A report written by :meth:`write` (its ``report.json``), arrays as NumPy arrays.

        Parameters
        ----------
        path : str or Path
            The ``report.json`` file.

        Returns
        -------
        Report
        """
        return read_json(path)

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-ready types."""
        return {
            "title": self.title,
            "system": jsonable(self.system),
            "settings": jsonable(self.settings),
            "checks": [c.to_dict() for c in self.checks],
            "timings": jsonable(self.timings),
        }


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
    """Read a report written by :func:`write_json` back (arrays as NumPy arrays).

    Parameters
    ----------
    path : str or Path
        A ``report.json`` written by :func:`write_report`.

    Returns
    -------
    Report
    """
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


#: Line styles and markers cycled over the curves of one axis, so that equal curves (max and
#: median of one trajectory, say) stay distinguishable instead of hiding under each other.
_STYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D", "v", "x", "+", "*")
#: Floor of ``log10 |value|`` histograms: exact zeros are drawn at the floor, and the label says so.
HIST_FLOOR = 1e-17
_CLOCK = re.compile(r"\bt\(tau\)")  # curves of the clock t(tau) of a tau-flow
_TAU = re.compile(r"\btau\b")
_STAT = re.compile(r"^(max|median|mean|min|worst)\s+")


def _new_figure(size: tuple[float, float]) -> Any:
    """A matplotlib ``Figure`` on the Agg canvas (lazy import; no pyplot, no backend switch)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)
    return fig


def _quantity(names: Sequence[str]) -> str:
    """A y-axis label for curves: their common quantity (``max |dE|``, ``median |dE|`` ->
    ``|dE|``), else the names joined."""
    bare = list(dict.fromkeys(_STAT.sub("", k) for k in names))
    return _clip(", ".join(bare), 60)


def _draw_curves(
    ax: Any, t: np.ndarray, curves: dict[str, np.ndarray], logscale: bool
) -> list[str]:
    """Plot ``curves`` (each with a different line style and marker); return the names that
    had nothing to draw (no finite, or on a log axis no positive, value)."""
    empty: list[str] = []
    k = 0
    every = max(1, t.size // 12)
    n = max(1, len(curves))
    for name, v in curves.items():
        keep = np.isfinite(v) & (v > 0) if logscale else np.isfinite(v)
        if not np.any(keep):
            empty.append(name)
            continue
        ax.plot(
            t[keep], v[keep], label=name, linestyle=_STYLES[k % len(_STYLES)],
            marker=_MARKERS[k % len(_MARKERS)], markersize=4,
            markevery=((k * every) // n, every),  # staggered: equal curves show all markers
            linewidth=1.4, alpha=0.85, zorder=3 + k,
        )  # fmt: skip
        k += 1
    if logscale:
        ax.set_yscale("log")
    return empty


def series_figure(check: Check) -> Any:
    """The time-series figure of a check (``None`` when it has no series to draw).

    Curves are the ``series`` other than ``"t"``; on a log axis when all values are >= 0 and
    some > 0.  The y axis is labelled with the curves' quantity, the x axis ``t`` -- or
    ``tau`` for a tau-flow (a curve named ``t(tau)`` or ``tau`` in the check's name), whose
    clock ``t(tau)`` is drawn on its own linear axis below instead of on the errors' log
    axis.  Curves without data (all NaN) are left out of the legend and named in a note.

    Parameters
    ----------
    check : Check
        Its ``series``: ``"t"`` (or ``"tau"``) and the curves over it.

    Returns
    -------
    matplotlib.figure.Figure or None
        None when there is no series to draw.
    """
    t = np.asarray(check.series.get("t", []), dtype=float)
    curves = {k: np.asarray(v, dtype=float) for k, v in check.series.items() if k != "t"}
    curves = {k: v for k, v in curves.items() if v.shape == t.shape and t.size > 0}
    if not curves:
        return None
    clock = {k: v for k, v in curves.items() if _CLOCK.search(k)}
    main = {k: v for k, v in curves.items() if k not in clock}
    tau = bool(clock) or _TAU.search(check.name) is not None
    xname = "tau" if tau else "t"
    fig = _new_figure((6.4, 5.2 if clock and main else 4.0))
    if clock and main:
        ax, axc = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    else:
        ax, axc = fig.add_subplot(), None
        if not main:
            main, clock = clock, {}
    finite = [v[np.isfinite(v)] for v in main.values()]
    logscale = all(np.all(v >= 0) for v in finite) and any(np.any(v > 0) for v in finite)
    empty = _draw_curves(ax, t, main, logscale)
    threshold = check.figures.get("threshold")
    if isinstance(threshold, (int, float)) and not isinstance(threshold, bool) and logscale:
        ax.axhline(float(threshold), color="k", linestyle="--", linewidth=1, label="threshold")
    ax.set_ylabel(_quantity([k for k in main if k not in empty] or list(main)))
    ax.set_title(check.name, fontsize=10)
    ax.grid(True, alpha=0.3)
    if empty:
        ax.text(0.01, 0.01, "no data: " + ", ".join(empty), transform=ax.transAxes,
                fontsize=7, va="bottom")  # fmt: skip
    if ax.get_legend_handles_labels()[1]:
        ax.legend(fontsize=8)
    bottom = ax
    if axc is not None:
        empty_c = _draw_curves(axc, t, clock, False)
        axc.set_ylabel("t")
        axc.grid(True, alpha=0.3)
        if axc.get_legend_handles_labels()[1]:
            axc.legend(fontsize=8)
        if empty_c:
            axc.text(0.01, 0.01, "no data: " + ", ".join(empty_c), transform=axc.transAxes,
                     fontsize=7, va="bottom")  # fmt: skip
        bottom = axc
    bottom.set_xlabel(xname)
    fig.tight_layout()
    return fig


def _log_histogram(v: np.ndarray) -> bool:
    """Whether ``|v|`` is better shown as ``log10``: it spans more than two decades, or is tiny
    (so that a linear axis would put it all in a bin at 0)."""
    nz = np.abs(v[v != 0])
    return bool(nz.size > 0 and (nz.max() > 100 * nz.min() or nz.max() < 1e-6))


def histogram_figure(check: Check) -> Any:
    """The histogram figure of a check's ``samples`` (``None`` when there are none).

    One axis per sample set, so that no axis mixes ``log10`` and linear values: a set that
    spans more than two decades or is tiny is drawn as ``log10 max(|v|, HIST_FLOOR)``
    (labelled so, with the count at the floor), any other set linearly.

    Parameters
    ----------
    check : Check
        Its ``samples``: one set of values per name (per trajectory or per sampled state).

    Returns
    -------
    matplotlib.figure.Figure or None
        None when there are no samples.
    """
    samples = {k: np.asarray(v, dtype=float) for k, v in check.samples.items()}
    samples = {k: v[np.isfinite(v)] for k, v in samples.items()}
    samples = {k: v for k, v in samples.items() if v.size > 0}
    if not samples:
        return None
    n = len(samples)
    fig = _new_figure((6.4, 1.0 + 2.6 * n))
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    for ax, (k, v) in zip(axes, samples.items(), strict=True):
        if _log_histogram(v):
            a = np.abs(v)
            floor = min(HIST_FLOOR, float(a[a > 0].min()))
            at_floor = int(np.sum(a < floor))
            ax.hist(np.log10(np.maximum(a, floor)), bins="auto", alpha=0.8)
            shown = k if np.all(v >= 0) else f"|{k}|"
            label = f"log10 max({shown}, {floor:.0e})"
            if at_floor:
                label += f" ({at_floor} zero(s) at the floor)"
        else:
            ax.hist(v, bins="auto", alpha=0.8)
            label = k
        ax.set_xlabel(_clip(label, 80))
        ax.set_ylabel("count")
    axes[0].set_title(check.name, fontsize=10)
    fig.tight_layout()
    return fig


def _series_plot(check: Check, path: Path) -> tuple[Path, str] | None:
    fig = series_figure(check)
    if fig is None:
        return None
    fig.savefig(path, dpi=100)
    names = [k for k in check.series if k != "t"]
    x = "tau" if fig.axes[-1].get_xlabel() == "tau" else "t"
    return path, f"{check.name}: {', '.join(names)} vs {x}"


def _histogram(check: Check, path: Path) -> tuple[Path, str] | None:
    fig = histogram_figure(check)
    if fig is None:
        return None
    fig.savefig(path, dpi=100)
    return path, f"{check.name}: histogram of {', '.join(check.samples)}"


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
        import matplotlib.backends.backend_agg  # noqa: F401
        import matplotlib.figure  # noqa: F401
    except ImportError as exc:
        return PlotOutcome([], f"plots skipped: matplotlib is not available ({exc})")
    directory = Path(directory)
    files = []
    for i, check in enumerate(report.checks, start=1):
        stem = f"{i:02d}_{_slug(check.name)}"
        for suffix, draw in (("series", _series_plot), ("hist", _histogram)):
            made = draw(check, directory / f"{stem}_{suffix}.png")
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
