"""Static HTML page of saved pytest-benchmark runs: nhfast against its anchors at equal error.

Usage::

    python benchmarks/dashboard.py [RESULTS ...] [--out DIR]

RESULTS are pytest-benchmark JSON files (``--benchmark-json``) or directories of them (default
``benchmarks/results``); other JSON is listed as skipped. ``DIR/index.html`` (default
``build/benchmark-dashboard``) opens with nhfast's speed-up against each anchor (the other
``extra_info["tool"]`` values of a benchmark group) and the work-precision plot, then time
against ``n``, lanes and threads, the history across saved runs, and the table of every benchmark.

Times are the median of one call divided by its work: ``extra_info["work"]``, else ``rhs_evals``
for a right-hand-side benchmark, else ``lanes`` (the trajectories actually timed). The speed-up
is the anchor's time over nhfast's (one thread, same method where nhfast has it). At equal
final-state error both times are read off log-log work-precision lines at an error where both
were measured; when the errors do not overlap, nhfast's run of nearest error is used, and
without errors the run at the same settings; the row says which.

A work-precision sweep (``benchmarks/bench_work_precision.py``: JSON with ``"kind":
"nhfast-work-precision"``) gets its own section, from the newest such file: a log-log
error-against-time figure per problem, nhfast's time over heyoka's and SciPy's at equal error
against the issue's goals, and heyoka's JIT seconds beside nhfast's generate + compile seconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import json
import math
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_RESULTS = HERE / "results"
DEFAULT_OUT = HERE.parent / "build" / "benchmark-dashboard"
REFERENCE = "nhfast"
COLOURS = {
    "nhfast": "#1f4e9c", "scipy": "#d62728", "scipy-batch": "#ff7f0e", "heyoka-batch": "#2ca02c",
    "heyoka-scalar": "#17becf", "numba": "#9467bd", "hand-c": "#8c564b",
    "numpy-lambdify": "#e377c2",
}  # fmt: skip
MARKERS = "osD^vP*Xph"
#: A single measured point stands for errors within this factor of its own (float noise).
ERROR_SLACK = 1.1


@dataclass(frozen=True)
class Record:
    """One benchmark of one saved run; ``fields`` joins pytest ``params`` and ``extra_info``."""

    name: str
    suite: str
    group: str
    fields: dict
    median: float
    run: str
    when: dt.datetime

    def get(self, key: str, default=None):
        return self.fields.get(key, default)

    @property
    def is_rhs(self) -> bool:
        return self.get("method") == "rhs" or self.get("unit") == "rhs/s"

    @property
    def unit(self) -> str:
        if self.is_rhs:
            return "rhs evaluation"
        return "trajectory" if "lanes" in self.fields or "work" in self.fields else "call"

    @property
    def per_unit(self) -> float:
        count = self.get("work") or (self.get("rhs_evals") if self.is_rhs else None)
        return self.median / float(count or self.get("lanes") or 1)

    @property
    def error(self) -> float | None:
        """The final-state error, or None (a right-hand side's error is not one)."""
        e = self.get("error")
        ok = isinstance(e, (int, float)) and math.isfinite(e) and e > 0 and not self.is_rhs
        return float(e) if ok else None

    @property
    def lanes(self) -> float | None:
        """The trajectories the benchmark stands for (SciPy may time fewer)."""
        lanes = self.get("batch_lanes", self.get("lanes"))
        return lanes if isinstance(lanes, (int, float)) else None

    @property
    def n(self) -> float | None:
        return self.get("n") if isinstance(self.get("n"), (int, float)) else None

    @property
    def threads(self) -> int:
        return int(self.get("threads") or 1)

    @property
    def tolerance(self) -> str:
        return " ".join(f"{k} {self.get(k):g}" for k in ("rtol", "h") if self.get(k) is not None)

    @property
    def who(self) -> str:
        return str(self.get("tool") or self.get("stage") or self.group)

    def label(self, tolerance: bool = True, threads: bool = True) -> str:
        parts = [self.who, str(self.get("method") or ""), self.tolerance if tolerance else ""]
        parts.append(f"{self.threads} threads" if threads and self.threads > 1 else "")
        return " ".join(p for p in parts if p)


# ------------------------------------------------------------------------- loading ----


def load(paths: Iterable[Path | str]) -> tuple[list[Record], list[dict], list[str]]:
    """Records, runs (file, date, commit, machine) and notes on what was skipped."""
    records, runs, notes = [], [], []
    files = []
    for p in map(Path, paths):
        files += sorted(p.glob("*.json")) if p.is_dir() else [p]
    for f in files:
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            notes.append(f"{f.name}: unreadable ({exc}); skipped.")
            continue
        if isinstance(data, dict) and data.get("kind") in (WP_KIND, DK_KIND):
            continue  # a work-precision sweep, derived kernels: sections of their own
        if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
            notes.append(f"{f.name}: not pytest-benchmark JSON; skipped.")
            continue
        try:
            when = dt.datetime.fromisoformat(data["datetime"])
        except (KeyError, TypeError, ValueError):
            when = dt.datetime.fromtimestamp(f.stat().st_mtime, dt.timezone.utc)
        when = when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)
        cpu = (data.get("machine_info") or {}).get("cpu") or {}
        commit = str((data.get("commit_info") or {}).get("id") or "")[:10]
        run = dict(file=f.name, when=when, commit=commit, cpu=cpu.get("brand_raw", "?"))
        runs.append(run | {"count": len(data["benchmarks"])})
        for b in data["benchmarks"]:
            median = (b.get("stats") or {}).get("median")
            name = b.get("fullname") or b.get("name")
            if not isinstance(median, (int, float)) or median <= 0 or not name:
                notes.append(f"{f.name}: a benchmark without a name or positive median; skipped.")
                continue
            fields = {**(b.get("params") or {}), **(b.get("extra_info") or {})}
            fields = {k: v for k, v in fields.items() if v is not None}
            suite = Path(name.split("::")[0]).stem if "::" in name else f.stem
            group = b.get("group") or name.split("::")[-1].split("[")[0]
            records.append(Record(name, suite, group, fields, float(median), f.name, when))
    runs.sort(key=lambda r: r["when"])
    return records, runs, notes


def latest(records: list[Record]) -> list[Record]:
    """The newest record of every benchmark, in suite, group and name order."""
    last: dict[str, Record] = {}
    for r in sorted(records, key=lambda r: r.when):
        last[r.name] = r
    return sorted(last.values(), key=lambda r: natural((r.suite, r.group, r.name)))


# --------------------------------------------------------------------- comparisons ----


def time_at(points: list[tuple[float, float]], error: float) -> float | None:
    """Time at ``error`` on the log-log line through ``(error, time)`` points, or None outside."""
    pts = sorted(points)
    lo, hi = pts[0][0], pts[-1][0]
    if not lo / ERROR_SLACK <= error <= hi * ERROR_SLACK:
        return None
    x = np.log([e for e, _ in pts])
    y = np.log([t for _, t in pts])
    return float(np.exp(np.interp(math.log(min(max(error, lo), hi)), x, y)))


@dataclass(frozen=True)
class Ratio:
    """An anchor against nhfast in one group: ``speedup`` = anchor's time / nhfast's time.

    ``kind`` is "equal error", "nearest error" (the errors do not overlap) or "equal settings"
    (no final-state error to compare); ``detail`` says which errors or settings."""

    suite: str
    group: str
    anchor: str
    unit: str
    speedup: float
    kind: str
    detail: str


def equal_error(ours: list[Record], theirs: list[Record]) -> tuple[float, str] | None:
    """Speed-up and the errors at which both work-precision lines are measured, or None."""
    a_pts = [(r.error, r.per_unit) for r in theirs if r.error]
    n_pts = [(r.error, r.per_unit) for r in ours if r.error]
    pairs: dict[float, float] = {}
    for e in [e for e, _ in n_pts + a_pts] if a_pts and n_pts else []:
        ta, tn = time_at(a_pts, e), time_at(n_pts, e)
        if ta and tn and not any(abs(math.log(e / k)) < 0.01 for k in pairs):
            pairs[e] = ta / tn
    if not pairs:
        return None
    lo, hi, errors = min(pairs.values()), max(pairs.values()), sorted(pairs)
    at = f"{errors[0]:.1e}" + (f" to {errors[-1]:.1e}" if len(errors) > 1 else "")
    return math.sqrt(lo * hi), f"error {at}"


def compare(group: list[Record]) -> tuple[list[Ratio], list[str]]:
    """Every anchor of one benchmark group against one-thread nhfast of the same method."""
    g = group[0]
    ours = [r for r in group if r.get("tool") == REFERENCE and r.threads == 1]
    anchors = sorted({r.get("tool") for r in group if r.get("tool") not in (None, REFERENCE)})
    if anchors and not ours:
        return [], [f"{g.suite} / {g.group}: no one-thread nhfast benchmark, so no ratio."]
    out = []
    for anchor in anchors:
        theirs = [r for r in group if r.get("tool") == anchor]
        same = [r for r in ours if r.get("method") in {t.get("method") for t in theirs}] or ours
        a = min(theirs, key=lambda r: r.per_unit)
        found = equal_error(same, theirs)
        if found:
            kind, (speedup, detail) = "equal error", found
        elif a.error and any(r.error for r in same):  # nhfast's run nearest in log error
            n = min((r for r in same if r.error), key=lambda r: abs(math.log(r.error / a.error)))
            kind, speedup = "nearest error", a.per_unit / n.per_unit
            detail = f"no overlap: nhfast {n.error:.1e} ({n.tolerance}), {anchor} {a.error:.1e}"
        else:
            keys = [k for k in ("rtol", "atol", "h") if k in a.fields]
            match = [r for r in same if all(r.get(k) == a.get(k) for k in keys)]
            why = "one right-hand side" if g.is_rhs else "no final-state error recorded"
            n = min(match, key=lambda r: r.per_unit) if match else None
            kind, speedup = "equal settings", a.per_unit / n.per_unit if n else math.nan
            detail = f"{a.tolerance or why}" if n else f"no nhfast run at {a.tolerance}"
        out.append(Ratio(g.suite, g.group, anchor, g.unit, speedup, kind, detail))
    return out, []


def ratios(records: list[Record]) -> tuple[list[Ratio], list[str]]:
    groups: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in records:
        groups[r.suite, r.group].append(r)
    out, notes = [], []
    for key in sorted(groups):
        rs, ns = compare(groups[key])
        out += rs
        notes += ns
    if not any(r.get("tool") for r in records):
        notes.append("No benchmark carries extra_info['tool']: no comparison with anchors.")
    return out, notes


# --------------------------------------------------------------------------- plots ----


def style(rec: Record, label: str, seen: dict, by_line: bool) -> dict:
    """A tool keeps its colour on the whole page (or each line has one); method and tolerance
    pick the marker; more than one thread is dashed."""
    key = label if by_line else rec.who
    cs, ms = seen.setdefault("colour", {}), seen.setdefault("marker", {})
    colour = (None if by_line else COLOURS.get(key)) or cs.setdefault(key, f"C{len(cs) % 10}")
    marker = ms.setdefault((rec.get("method"), rec.tolerance), MARKERS[len(ms) % len(MARKERS)])
    return {"color": colour, "marker": marker, "ls": "--" if rec.threads > 1 else "-"}


def figure(panels: dict, path: Path, xlabel: str, ylabel: str, linear: bool = False) -> None:
    """One PNG, a panel per key; a panel maps a line label to ``(x, y, record)`` points.
    ``linear``: linear axes and a colour per line (else a colour per tool, log axes)."""
    cols = min(4, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.0 * rows), squeeze=False)
    handles, seen = {}, {}
    keys = sorted(panels, key=natural)
    common = len({k[0] for k in keys}) == 1
    for ax, key in zip(axes.flat, keys, strict=False):
        lines = panels[key]
        for label, pts in sorted(lines.items()):
            pts.sort(key=lambda p: p[0])
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            kw = style(pts[0][2], label, seen, by_line=linear)
            handles.setdefault(label, ax.plot(xs, ys, ms=4, lw=1.2, **kw)[0])
        if xlabel == "threads":
            top = max(p[0] for ps in lines.values() for p in ps)
            ax.plot([1, top], [1, top], "k:", lw=1)
        ax.set_title(" ".join(t for t in map(str, key[common:]) if t), fontsize=9)
        ax.set_xscale("linear" if linear else "log")
        xs = sorted({p[0] for ps in lines.values() for p in ps})
        if xlabel in ("n", "lanes", "threads") and len(xs) <= 8:
            ax.set_xticks(xs, [f"{x:g}" for x in xs], minor=False)
            ax.set_xticks([], minor=True)
        ax.set_yscale("linear" if linear else "log")
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
        if not linear and ax.get_ylim()[1] > 10 * ax.get_ylim()[0]:  # labels on decades only
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.grid(True, which="both", alpha=0.25)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.tight_layout()
    if len(handles) <= 30:
        fig.legend(
            handles.values(), handles, loc="center left", bbox_to_anchor=(1, 0.5), fontsize=7
        )
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)


def natural(key) -> list:
    """Sort key in which ``n=8`` comes before ``n=16``."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", str(key))]


def panels_by(records, x: str, keys=(), line=Record.label, y=None, min_x: int = 2) -> dict:
    """Points ``(r.x, y(r), r)`` by panel (suite, the ``keys`` fields) and line label; only
    panels with ``min_x`` distinct x values. ``y`` defaults to the time per unit of work."""
    vals = {"system": lambda r: r.get("system"), "n": lambda r: r.n and f"n={r.n}",
            "lanes": lambda r: r.lanes and f"lanes={r.lanes}",
            "t": lambda r: r.get("t_end") and f"t={r.get('t_end')}"}  # fmt: skip
    out: dict = defaultdict(lambda: defaultdict(list))
    for r in records:
        if getattr(r, x) is not None:
            title = (r.suite, *(vals[k](r) or "" for k in keys), "rhs" if r.is_rhs else "")
            out[title][line(r)].append((getattr(r, x), y(r) if y else r.per_unit, r))
    return {k: v for k, v in out.items() if len({p[0] for ps in v.values() for p in ps}) >= min_x}


def plots(records: list[Record], history: list[Record], out: Path) -> list[tuple[str, str]]:
    """Write the figures; return (heading, PNG file name or ``note:`` and why not)."""

    def same(r: Record) -> tuple:  # one configuration at any number of threads
        return r.suite, r.group, r.who, r.get("method"), r.tolerance

    one = {same(r): r.median for r in records if "threads" in r.fields and r.threads == 1}
    scaled = [r for r in records if same(r) in one and r.threads > 1]
    scaled += [r for r in records if r.threads == 1 and same(r) in {same(q) for q in scaled}]
    first: dict[str, float] = {}
    for r in sorted(history, key=lambda r: r.when):
        first.setdefault(r.name, r.median)
    runs_of = defaultdict(set)
    for r in history:
        runs_of[r.name].add(r.run)
    specs = [
        ("Work-precision: time per trajectory against final-state error", "work_precision.png",
         panels_by(records, "error", ("system", "n", "lanes", "t"),
                   lambda r: r.label(tolerance=False), min_x=1),
         "final-state error", "seconds per trajectory", "no benchmark records a final-state error"),
        ("Time against n", "time_vs_n.png", panels_by(records, "n", ("system", "lanes", "t")),
         "n", "seconds per unit of work", "no benchmark group varies a numeric 'n'"),
        ("Time against lanes (trajectories per call)", "time_vs_lanes.png",
         panels_by(records, "lanes", ("system", "n", "t")),
         "lanes", "seconds per unit of work", "no benchmark group varies 'lanes'"),
        ("Threads: speed-up over one thread (dotted: ideal)", "threads.png",
         panels_by(scaled, "threads", (), lambda r: f"{r.group} {r.label(threads=False)}",
                   lambda r: one[same(r)] / r.median),
         "threads", "speed-up over one thread", "no benchmark ran at one and more 'threads'"),
        ("History: median against the first saved run", "history.png",
         panels_by([r for r in history if len(runs_of[r.name]) > 1], "when", (),
                   lambda r: r.name.split("::")[-1], lambda r: r.median / first[r.name]),
         "run date", "median / first median",
         "every benchmark is in one saved run only; history needs two or more"),
    ]  # fmt: skip
    shown = []
    for heading, png, panels, xlabel, ylabel, why in specs:
        if panels:
            figure(panels, out / png, xlabel, ylabel, linear=png in ("threads.png", "history.png"))
        shown.append((heading, png if panels else "note:" + why))
    return shown


# ------------------------------------------------------------ work-precision sweep ----

WP_KIND = "nhfast-work-precision"
DK_KIND = "nhfast-derived-kernels"


def dk_section(paths: Iterable[Path | str]) -> str:
    """HTML table of the newest derived-kernels run (bench_derived_kernels.py): the engine's
    kernels over the hand-derived ones, per step or call, with their sizes; empty if none."""
    docs = []
    for p in map(Path, paths):
        for f in sorted(p.glob("*.json")) if p.is_dir() else [p]:
            try:
                data = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and data.get("kind") == DK_KIND:
                docs.append(data)
    if not docs:
        return ""
    doc = max(docs, key=lambda d: str(d.get("datetime", "")))
    rows = []
    for r in doc.get("rows", []):
        es, hs = r.get("engine_size", {}), r.get("hand_size", {})
        ratio = r.get("ratio", math.nan)
        ok = ratio <= doc.get("goal", 1.15)
        rows.append([td(r["inertia"]), td(r["n"]), td(r["kernel"]), td(fmt(r["engine_ns"])),
                     td(fmt(r["hand_ns"])), td(f"{ratio:.2f}", "win num" if ok else "loss num"),
                     td(f"{es.get('taylor_conv')} / {hs.get('taylor_conv')} / "
                        f"{r.get('heyoka_decomposition')}")])  # fmt: skip
    head = ["Inertia", "n", "Kernel", "Engine (ns)", "Hand-derived (ns)", "Ratio",
            "Taylor convolutions per order (engine / hand / heyoka decomposition)"]  # fmt: skip
    cpu = (doc.get("machine_info") or {}).get("cpu", "?")
    return (
        "<h2>Derived kernels against hand-derived ones</h2><p>What a user constructs "
        '(veselova(n, form="structured")) over the hand-derived programs of tests/references, per '
        f"trajectory-step (taylor, dop853) or per lane-call; goal {doc.get('goal')}; "
        f"{html.escape(str(doc.get('datetime', '')))} on {html.escape(str(cpu))}.</p>"
        + table(head, rows)
    )


#: nhfast's goal against heyoka: time at equal error at most this times heyoka's (issue 12).
WP_GOAL_HEYOKA = {"many": 0.67, "one": 1.0}
#: ... and against SciPy per trajectory.
WP_GOAL_SCIPY = 0.01
WP_COLOURS = {
    "nhfast-dop853": "#1f4e9c", "nhfast-taylor": "#6a3d9a", "heyoka-scalar": "#17becf",
    "heyoka-batch": "#2ca02c", "heyoka-ensemble": "#98df8a", "scipy": "#d62728",
}  # fmt: skip


def wp_documents(paths: Iterable[Path | str]) -> list[tuple[str, dict]]:
    """(file name, document) of every work-precision sweep among ``paths``, oldest first."""
    files = []
    for p in map(Path, paths):
        files += sorted(p.glob("*.json")) if p.is_dir() else [p]
    out = []
    for f in files:
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("kind") == WP_KIND:
            out.append((f.name, data))
    return sorted(out, key=lambda fd: str(fd[1].get("datetime", "")))


def wp_frontier(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The (error, seconds) points no other point beats in both, by falling error."""
    front: list[tuple[float, float]] = []
    for e, t in sorted(points, key=lambda p: (p[1], p[0])):
        if e > 0 and math.isfinite(e) and (not front or e < front[-1][0]):
            front.append((e, t))
    return sorted(front)


def wp_equal_error(
    ours: list[tuple[float, float]], theirs: list[tuple[float, float]]
) -> tuple[float, float, float, float, float] | None:
    """(geometric-mean ratio ours/theirs, least, greatest, lowest and highest error) at equal
    error on the log-log frontiers, over the errors both reach; None without overlap."""
    a, b = wp_frontier(ours), wp_frontier(theirs)
    if not a or not b:
        return None
    lo = max(a[0][0], b[0][0]) / ERROR_SLACK
    hi = min(a[-1][0], b[-1][0]) * ERROR_SLACK
    errors = sorted({e for e, _ in a + b if lo <= e <= hi})
    ratios = []
    for e in errors:
        ta, tb = time_at(a, e), time_at(b, e)
        if ta and tb:
            ratios.append((e, ta / tb))
    if not ratios:
        return None
    rs = [r for _, r in ratios]
    mean = math.exp(statistics.fmean(map(math.log, rs)))
    return mean, min(rs), max(rs), ratios[0][0], ratios[-1][0]


def wp_ratios(doc: dict) -> list[dict]:
    """nhfast's time over each anchor's at equal final-state error, per case: one-thread
    nhfast against heyoka scalar and batch and SciPy, two-thread nhfast against heyoka's
    batch mode on two threads and its ensemble (two threads). ``goal``: the issue's bound on
    the ratio; ``met``: whether it holds (None without an overlap of errors)."""
    pts: dict = defaultdict(list)
    for r in doc.get("runs", []):
        key = (r["problem"], r["n"], r["lanes"], r["impl"], r["threads"])
        pts[key].append((r["error"], r["per_trajectory_seconds"]))
    cases = sorted({k[:3] for k in pts}, key=natural)
    pairs = [(("heyoka-scalar", 1), 1), (("heyoka-batch", 1), 1), (("heyoka-batch", 2), 2),
             (("heyoka-ensemble", 2), 2), (("scipy", 1), 1)]  # fmt: skip
    out = []
    for case in cases:
        for ours in ("nhfast-dop853", "nhfast-taylor"):
            for (anchor, at), threads in pairs:
                a, b = pts.get((*case, ours, threads)), pts.get((*case, anchor, at))
                if not a or not b:
                    continue
                if anchor == "scipy":
                    goal = WP_GOAL_SCIPY
                else:
                    goal = WP_GOAL_HEYOKA["one" if case[2] == 1 else "many"]
                found = wp_equal_error(a, b)
                row = dict(problem=case[0], n=case[1], lanes=case[2], nhfast=ours,
                           threads=threads, anchor=anchor, goal=goal)  # fmt: skip
                if found:
                    mean, lo, hi, e0, e1 = found
                    row |= dict(ratio=mean, least=lo, greatest=hi, errors=(e0, e1),
                                met=mean <= goal)  # fmt: skip
                else:
                    ea, eb = wp_frontier(a), wp_frontier(b)
                    row |= dict(
                        ratio=math.nan,
                        met=None,
                        note=(
                            f"no overlap: nhfast {ea[0][0]:.1e}..{ea[-1][0]:.1e}, "
                            f"{anchor} {eb[0][0]:.1e}..{eb[-1][0]:.1e}"
                            if ea and eb
                            else "no errors"
                        ),
                    )
                out.append(row)
    return out


def wp_compile(doc: dict) -> list[dict]:
    """heyoka's JIT seconds (least and greatest over the tolerances) beside nhfast's
    generate + compile seconds (cold cache), per problem and n."""
    rows: dict = {}
    for c in doc.get("compile", []):
        key = (c["problem"], c["n"])
        row = rows.setdefault(key, dict(problem=c["problem"], n=c["n"]))
        span = row.setdefault(c["impl"], [math.inf, 0.0])
        span[0], span[1] = min(span[0], c["seconds"]), max(span[1], c["seconds"])
        row["compact_mode"] = c.get("compact_mode")
    for c in doc.get("nhfast_compile", []):
        rows.setdefault((c["problem"], c["n"]), dict(problem=c["problem"], n=c["n"]))[c["impl"]] = [
            c["seconds"],
            c["seconds"],
        ]
    return [rows[k] for k in sorted(rows, key=natural)]


def wp_text(doc: dict) -> str:
    """The ratio and compile tables as plain text (for the terminal)."""
    lines = ["problem       n    N      nhfast          thr anchor           ratio   goal  met"]
    for r in wp_ratios(doc):
        met = {True: "yes", False: "NO", None: "-"}[r["met"]]
        ratio = f"{r['ratio']:7.3f}" if math.isfinite(r["ratio"]) else "    n/a"
        anchor = r["anchor"] + (" x2" if r["threads"] > 1 else "")
        lines.append(
            f"{r['problem']:12s} {r['n']:3d} {r['lanes']:6d} {r['nhfast']:15s} {r['threads']:3d} "
            f"{anchor:15s} {ratio} {r['goal']:6.2f}  {met} {r.get('note', '')}"
        )
    lines.append("compile seconds (heyoka JIT per tolerance: least..greatest; nhfast cold cache)")
    for c in wp_compile(doc):
        cells = [f"{k} {v[0]:.3g}..{v[1]:.3g}" for k, v in c.items() if isinstance(v, list)]
        lines.append(f"  {c['problem']} n={c['n']}: " + ", ".join(cells))
    for s in doc.get("skipped", [])[:1]:
        lines.append(f"skipped {s['impl']}: {s['reason']}")
    return "\n".join(lines)


def wp_figures(doc: dict, out: Path, stem: str) -> list[str]:
    """One log-log PNG per problem (a panel per n and N): seconds per trajectory against
    final-state error, a line per implementation and thread count; the PNG names."""
    panels: dict = defaultdict(lambda: defaultdict(list))
    for r in doc.get("runs", []):
        label = r["impl"] + (f" x{r['threads']}" if r["threads"] > 1 else "")
        t_end = r.get("t_end")
        title = f"n={r['n']} N={r['lanes']}" + (f" t={t_end:g}" if t_end is not None else "")
        panels[r["problem"]][title].append((label, r["error"], r["per_trajectory_seconds"]))
    names = []
    for problem in sorted(panels):
        keys = sorted(panels[problem], key=natural)
        cols = min(3, len(keys))
        rows = math.ceil(len(keys) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.8 * cols, 3.0 * rows), squeeze=False)
        handles = {}
        order = sorted({label for pts in panels[problem].values() for label, _, _ in pts})
        for ax, key in zip(axes.flat, keys, strict=False):
            lines = defaultdict(list)
            for label, e, t in panels[problem][key]:
                if e > 0 and math.isfinite(e):
                    lines[label].append((e, t))
            for label, ps in sorted(lines.items()):
                ps.sort()
                i = order.index(label)  # one colour and marker per line on the whole figure
                colour = WP_COLOURS.get(label.split(" ")[0], f"C{i % 10}")
                h = ax.plot(
                    [p[0] for p in ps],
                    [p[1] for p in ps],
                    marker=MARKERS[i % 10],
                    ms=4,
                    lw=1.2,
                    color=colour,
                    ls="--" if " x" in label else "-",
                )
                handles.setdefault(label, h[0])
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{problem} {key}", fontsize=9)
            ax.set_xlabel("final-state error", fontsize=8)
            ax.set_ylabel("seconds per trajectory", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(True, which="both", alpha=0.25)
        for ax in list(axes.flat)[len(keys) :]:
            ax.set_visible(False)
        fig.tight_layout()
        fig.legend(handles.values(), handles, loc="center left", bbox_to_anchor=(1, 0.5),
                   fontsize=7)  # fmt: skip
        name = f"{stem}_{re.sub(r'[^a-z0-9]+', '_', problem.lower())}.png"
        fig.savefig(out / name, dpi=90, bbox_inches="tight")
        plt.close(fig)
        names.append(name)
    return names


def wp_section(paths: Iterable[Path | str], out: Path) -> str:
    """HTML of the newest work-precision sweep: figures, ratios at equal error, compile
    times; empty when there is none."""
    docs = wp_documents(paths)
    if not docs:
        return ""
    name, doc = docs[-1]
    m = doc.get("machine_info", {})
    parts = [
        "<h2>Work-precision sweep: nhfast against heyoka and SciPy</h2>",
        f"<p class=sub>{html.escape(name)}, {html.escape(str(doc.get('datetime', '?')))}, "
        f"{html.escape(str(m.get('cpu', '?')))} ({m.get('cores', '?')} cores), heyoka "
        f"{html.escape(str(m.get('heyoka', '?')))}; error: max abs over the first "
        f"{doc.get('err_lanes', '?')} trajectories against {html.escape(str(doc.get('reference')))}"
        ". Ratio = nhfast's time ÷ the anchor's at equal final-state error (log-log "
        "frontiers; geometric mean over the errors both reach); below the goal is met.</p>",
    ]
    for png in wp_figures(doc, out, Path(name).stem):
        parts.append(f'<img src="{png}" alt="work-precision {html.escape(png)}">')
    rows = []
    for r in wp_ratios(doc):
        ok = r["met"]
        cls = "settings" if ok is None else ("win" if ok else "loss")
        ratio = fmt(r["ratio"]) + "×" if math.isfinite(r["ratio"]) else "–"
        at = (f"{r['errors'][0]:.1e} to {r['errors'][1]:.1e} (×{fmt(r['least'])}–"
              f"{fmt(r['greatest'])})" if "errors" in r else r.get("note", ""))  # fmt: skip
        rows.append([td(r["problem"]), td(r["n"], "num"), td(r["lanes"], "num"),
                     td(r["nhfast"]), td(r["threads"], "num"), td(r["anchor"]),
                     td(ratio, cls + " num"), td(f"≤ {r['goal']:g}", "num"), td(at)])  # fmt: skip
    head = ["Problem", "n", "N", "nhfast", "Threads", "Anchor", "Time ratio", "Goal", "At errors"]
    parts.append("<h3>Time ratios at equal error</h3>" + table(head, rows, box=True))
    impls = sorted({k for c in wp_compile(doc) for k, v in c.items() if isinstance(v, list)})
    crow = []
    for c in wp_compile(doc):
        cells = [td(c["problem"]), td(c["n"], "num")]
        for k in impls:
            v = c.get(k)
            cells.append(td("–" if v is None else (fmt(v[0], "s") if v[0] == v[1] else
                            f"{fmt(v[0], 's')} – {fmt(v[1], 's')}"), "num"))  # fmt: skip
        crow.append(cells + [td("yes" if c.get("compact_mode") else "no")])
    parts.append(
        "<h3>heyoka JIT (per tolerance) and nhfast generate + compile (cold cache)</h3>"
        + table(["Problem", "n", *impls, "heyoka compact mode"], crow)
    )
    skipped = sorted({f"{s['impl']}: {s['reason']}" for s in doc.get("skipped", [])})
    if skipped:
        items = "".join(f"<li>{html.escape(s)}</li>" for s in skipped)
        parts.append(f"<ul class=note>{items}</ul>")
    return "".join(parts)


# ---------------------------------------------------------------------------- page ----

CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1240px;padding:0 16px;color:#222}
h1{margin:.6em 0 .1em}h2{margin:1.4em 0 .4em;font-size:1.2em}p.sub{color:#555;margin:0 0 1em}
table{border-collapse:collapse;font-size:13px}
td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3;position:sticky;top:0}
td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
.box{max-width:100%;overflow:auto;max-height:70vh;border:1px solid #ccc}.box td{white-space:nowrap}
.win{color:#0a6b2e;font-weight:600}.loss{color:#b3261e}.settings{color:#777;font-style:italic}
img{max-width:100%}.note{color:#7a5b00}
"""


def fmt(x, kind: str = "g") -> str:
    if isinstance(x, int) and not isinstance(x, bool) and kind == "g":
        return str(x)
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
        return str(x) if x not in (None, "") and not isinstance(x, float) else "–"
    if kind == "s":
        for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6)):
            if abs(x) >= scale:
                return f"{x / scale:.3g} {unit}"
        return f"{x / 1e-9:.3g} ns"
    text = f"{x:.0f}" if kind == "x" and x >= 100 else f"{x:.3g}"
    return "×" + text if kind == "x" else text


def table(head: list[str], rows: list[list[str]], box: bool = False) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(row) + "</tr>" for row in rows)
    t = f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="box">{t}</div>' if box else t


def td(text, cls: str = "", tip: str = "") -> str:
    attrs = (f' class="{cls}"' if cls else "") + (f' title="{html.escape(tip)}"' if tip else "")
    return f"<td{attrs}>{html.escape(str(text))}</td>"


def speed_cell(r: Ratio, speedup: float, tip: str = "") -> str:
    """A speed-up: green or red at equal error, grey and marked † otherwise."""
    eq = r.kind == "equal error"
    cls = ("win" if speedup >= 1 else "loss") if eq else "settings"
    return td(fmt(speedup, "x") + ("" if eq else " †"), cls + " num", tip)


def headline(rs: list[Ratio]) -> str:
    """One row per anchor, work and kind of comparison, over the configurations."""
    rows = defaultdict(list)
    for r in rs:
        rows[r.anchor, r.unit, r.kind].append(r)
    out = []
    order = {"equal error": 0, "nearest error": 1, "equal settings": 2}
    for (anchor, unit, kind), group in sorted(rows.items(), key=lambda kv: order[kv[0][2]]):
        xs = [r.speedup for r in group if math.isfinite(r.speedup)]
        mid = math.exp(statistics.fmean(map(math.log, xs))) if xs else math.nan
        span = f"{fmt(min(xs), 'x')} to {fmt(max(xs), 'x')}" if len(xs) > 1 else ""
        details = sorted({r.detail for r in group})
        said = kind + ("" if kind == "equal error" else ": " + "; ".join(details[:3]))
        where = ", ".join(sorted({r.group for r in group}))
        suites = ", ".join(sorted({r.suite for r in group}))
        out.append([td(anchor), td(suites), td(f"per {unit}"), speed_cell(group[0], mid, where)])
        out[-1] += [td(span, "num"), td(len(group), "num"), td(said)]
    head = ["Anchor", "Suite", "Work", "nhfast speed-up", "Range", "Configs", "Compared at"]
    return table(head, out)


def matrix(rs: list[Ratio]) -> str:
    """Speed-ups per benchmark group (rows) and anchor (columns); the basis in the tooltip."""
    anchors = sorted({r.anchor for r in rs})
    cells = {(r.suite, r.group, r.anchor): r for r in rs}
    rows = []
    for suite, group in sorted({(r.suite, r.group) for r in rs}, key=natural):
        row = [td(f"{suite} / {group}")]
        for a in anchors:
            r = cells.get((suite, group, a))
            row.append(speed_cell(r, r.speedup, f"{r.kind}: {r.detail}") if r else td(""))
        rows.append(row)
    return table(["Configuration", *anchors], rows, box=True)


COLUMNS = {
    "Suite / group": lambda r: td(f"{r.suite} / {r.group}"),
    "Benchmark": lambda r: td(r.name.split("::")[-1]),
    "Tool": lambda r: td(r.get("tool", "–")),
    "Method": lambda r: td(r.get("method", "–")),
    "n": lambda r: td(fmt(r.get("n")), "num"),
    "Lanes": lambda r: td(fmt(r.lanes), "num"),
    "Tolerance": lambda r: td(r.tolerance or "–"),
    "Threads": lambda r: td(fmt(r.get("threads")), "num"),
    "Error": lambda r: td(fmt(r.error), "num"),
    "Median": lambda r: td(fmt(r.median, "s"), "num"),
    "Per unit of work": lambda r: td(f"{fmt(r.per_unit, 's')} / {r.unit}", "num"),
    "Run": lambda r: td(Path(r.run).stem),
}


def build(paths: Iterable[Path | str], out: Path) -> Path:
    """Write ``out/index.html`` (or ``out`` itself when it ends in ``.html``) and its PNGs."""
    out = Path(out)
    index = out if out.suffix == ".html" else out / "index.html"
    index.parent.mkdir(parents=True, exist_ok=True)
    for old in index.parent.glob("*.png"):
        old.unlink()
    paths = list(paths)
    records, runs, notes = load(paths)
    recs = latest(records)
    rs, more = ratios(recs)
    notes += more
    figs = plots(recs, records, index.parent)
    last = runs[-1] if runs else None
    sub = (
        f"{len(recs)} benchmarks from {len(runs)} saved runs; latest "
        f"{last['when']:%Y-%m-%d %H:%M} UTC on {html.escape(last['cpu'])}"
        if last
        else "No pytest-benchmark results found."
    )
    parts = [
        f"<h1>nhfast benchmarks</h1><p class=sub>{sub}</p>",
        "<h2>nhfast against each anchor</h2><p>Speed-up = the anchor's time ÷ nhfast's for "
        "the same work (median of the rounds; geometric mean over the configurations); above "
        "×1 nhfast is faster. At equal final-state error both times are read off log-log "
        "work-precision lines at the same error; † marks rows without an equal-error "
        "comparison (their reason is given).</p>",
        headline(rs) if rs else "<p class=note>No anchor to compare with.</p>",
    ]
    for i, (heading, fig) in enumerate(figs):
        body = (
            f"<p class=note>{html.escape(fig[5:])}</p>"
            if fig.startswith("note:")
            else f'<img src="{fig}" alt="{html.escape(heading)}">'
        )
        parts.append(f"<h2>{html.escape(heading)}</h2>{body}")
        if i == 0 and rs:
            parts.append("<h2>Speed-up per configuration</h2>" + matrix(rs))
    parts.append(wp_section(paths, index.parent))
    parts.append(dk_section(paths))
    full = table(list(COLUMNS), [[cell(r) for cell in COLUMNS.values()] for r in recs], box=True)
    parts.append("<h2>Every benchmark (latest run)</h2>" + full)
    for r in runs:
        r["when"] = f"{r['when']:%Y-%m-%d %H:%M} UTC"
    rows = [[td(v) for v in r.values()] for r in runs]
    parts.append(
        "<h2>Saved runs</h2>" + table(["File", "Date", "Commit", "CPU", "Benchmarks"], rows)
    )
    if notes:
        items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
        parts.append(f"<h2>Notes</h2><ul class=note>{items}</ul>")
    page = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>nhfast '
        f"benchmarks</title><style>{CSS}</style></head><body>{''.join(parts)}</body></html>"
    )
    index.write_text(page, encoding="utf-8")
    return index


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "results",
        nargs="*",
        type=Path,
        default=[DEFAULT_RESULTS],
        help="pytest-benchmark JSON files or directories (default: %(default)s)",
    )
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT,
                    help="output directory, or an .html file (default: %(default)s)")  # fmt: skip
    args = ap.parse_args(argv)
    missing = [p for p in args.results if not p.exists()]
    if missing:
        print(f"dashboard: no such file or directory: {missing[0]}", file=sys.stderr)
        return 2
    print(build(args.results, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
