"""Static HTML page of saved benchmark runs: nhfast against its anchors at equal error.

Reads pytest-benchmark, ``bench_work_precision.py`` and ``bench_derived_kernels.py`` JSON (others
are listed as skipped). Times are a call's median over its work (``extra_info["work"]``, else
``rhs_evals``, else ``lanes``). The speed-up is an anchor's time over one-thread nhfast's (same
method if it has it) at equal final-state error on log-log lines where both were measured, else
at nhfast's run of nearest error, else at equal settings (the row says which)."""

import argparse
import datetime as dt
import json
import math
import re
import statistics
import sys
from collections import Counter, defaultdict, namedtuple
from collections.abc import Iterator
from html import escape
from operator import attrgetter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

plt.rcParams.update({"font.size": 7, "axes.titlesize": 8})
HERE = Path(__file__).resolve().parent
DEFAULT_RESULTS, DEFAULT_OUT = HERE / "results", HERE.parent / "build" / "benchmark-dashboard"
REFERENCE, WP_KIND, DK_KIND = "nhfast", "nhfast-work-precision", "nhfast-derived-kernels"
ERROR_SLACK = 1.1  # a single measured point stands for errors within this factor of its own
KINDS = ("equal error", "nearest error", "equal settings")  # of comparison, best first
WP_GOAL_HEYOKA, WP_GOAL_SCIPY = {"many": 0.67, "one": 1.0}, 0.01  # nhfast / them (issue 12)
#: A sweep's nhfast runs against each anchor, both on 1 or 2 threads.
WP_ANCHORS = "heyoka-scalar 1, heyoka-batch 1, heyoka-batch 2, heyoka-ensemble 2, scipy 1"
WP_PAIRS = [(a.split()[0], int(a.split()[1])) for a in WP_ANCHORS.split(", ")]
WP_PAIRS = [(o, *a) for o in ("nhfast-dop853", "nhfast-taylor") for a in WP_PAIRS]
CSS = """body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1240px;padding:0 16px}
table{border-collapse:collapse;font-size:13px}th{background:#f3f3f3;position:sticky;top:0}
td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left;white-space:nowrap}
.box{overflow:auto;max-height:70vh;border:1px solid #ccc}img{max-width:100%}.note{color:#7a5b00}"""
Ratio = namedtuple("Ratio", "suite group anchor unit speedup kind detail")  # anchor / nhfast
#: A benchmark of a saved run (``fields``: pytest ``params``, ``extra_info``) and what it says.
Record = namedtuple("Record", "name suite group fields median run when is_rhs n lanes threads who "
                    "tolerance unit per_unit error")  # fmt: skip
Record.get = lambda self, key, default=None: self.fields.get(key, default)
Record.label = lambda r, tolerance=True, threads=True: " ".join(  # tool, method, tolerance, xN
    str(p) for p in (r.who, r.get("method"), tolerance and r.tolerance) if p
) + f" x{r.threads}" * (threads and r.threads > 1)  # fmt: skip


def record(name: str, suite: str, group: str, f: dict, median: float, run: str, when) -> Record:
    num = {k: v for k, v in f.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    rhs = f.get("method") == "rhs" or f.get("unit") == "rhs/s"
    e = num.get("error")  # a right-hand side's error is not a final-state error
    work = "rhs evaluation" if rhs else "trajectory" if {"lanes", "work"} & f.keys() else "call"
    tolerance = " ".join(f"{k} {f[k]:g}" for k in ("rtol", "h") if k in f)
    count = f.get("work") or rhs and f.get("rhs_evals") or f.get("lanes") or 1
    lanes = num.get("batch_lanes" if "batch_lanes" in f else "lanes")  # SciPy may time fewer
    return Record(name, suite, group, f, median, run, when, rhs, num.get("n"), lanes,
                  int(f.get("threads") or 1), str(f.get("tool") or f.get("stage") or group),
                  tolerance, work, median / float(count),
                  float(e) if e and math.isfinite(e) and e > 0 and not rhs else None)  # fmt: skip


def documents(paths) -> Iterator[tuple[Path, object]]:
    """(file, its JSON or the error reading it) of every file, and every ``*.json`` of a folder."""
    for p in map(Path, paths):
        for f in sorted(p.glob("*.json")) if p.is_dir() else [p]:
            try:
                yield f, json.loads(f.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                yield f, exc


def load(paths) -> tuple[list[Record], list[dict], list[str]]:
    """Records, runs (file, date, commit, CPU, count) and notes on what was skipped."""
    records, runs, notes = [], [], []
    for f, data in documents(paths):
        doc = data if isinstance(data, dict) else {}
        bad = f"unreadable ({data})" if isinstance(data, Exception) else "not pytest-benchmark JSON"
        if not isinstance(benchmarks := doc.get("benchmarks"), list):
            if doc.get("kind") not in (WP_KIND, DK_KIND):  # sweeps: sections of their own
                notes.append(f"{f.name}: {bad}; skipped.")
            continue
        try:
            when = dt.datetime.fromisoformat(doc["datetime"])
        except (KeyError, TypeError, ValueError):
            when = dt.datetime.fromtimestamp(f.stat().st_mtime, dt.timezone.utc)
        when = when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)
        cpu = ((doc.get("machine_info") or {}).get("cpu") or {}).get("brand_raw", "?")
        commit = str((doc.get("commit_info") or {}).get("id") or "")[:10]
        runs.append(dict(file=f.name, when=when, commit=commit, cpu=cpu, count=len(benchmarks)))
        for b in benchmarks:
            median, name = (b.get("stats") or {}).get("median"), b.get("fullname") or b.get("name")
            if not isinstance(median, (int, float)) or median <= 0 or not name:
                notes.append(f"{f.name}: a benchmark without a name or positive median; skipped.")
                continue
            fields = {**(b.get("params") or {}), **(b.get("extra_info") or {})}
            suite = Path(name.split("::")[0]).stem if "::" in name else f.stem
            group = b.get("group") or name.split("::")[-1].split("[")[0]
            fields = {k: v for k, v in fields.items() if v is not None}
            records.append(record(name, suite, group, fields, float(median), f.name, when))
    return records, sorted(runs, key=lambda r: r["when"]), notes


def latest(records: list[Record]) -> list[Record]:
    """The newest record of every benchmark, in suite, group and name order."""
    last = {r.name: r for r in sorted(records, key=lambda r: r.when)}
    return sorted(last.values(), key=lambda r: (r.suite, r.group, r.name))


def time_at(points: list[tuple[float, float]], error: float) -> float | None:
    """Time at ``error`` on the log-log line through ``(error, time)`` points, or None outside."""
    lo, hi = (pts := sorted(points))[0][0], pts[-1][0]
    if not lo / ERROR_SLACK <= error <= hi * ERROR_SLACK:
        return None
    x, y = np.log([e for e, _ in pts]), np.log([t for _, t in pts])
    return float(np.exp(np.interp(math.log(min(max(error, lo), hi)), x, y)))


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


def ratios(records: list[Record]) -> tuple[list[Ratio], list[str]]:
    """Every anchor of every group against one-thread nhfast of the same method; notes."""
    groups: dict = defaultdict(list)
    for r in records:
        groups[r.suite, r.group].append(r)
    out, notes = [], []
    for (suite, name), group in sorted(groups.items()):
        ours = [r for r in group if r.get("tool") == REFERENCE and r.threads == 1]
        anchors = sorted({r.get("tool") for r in group} - {None, REFERENCE})
        if anchors and not ours:
            notes.append(f"{suite} / {name}: no one-thread nhfast benchmark, so no ratio.")
        for anchor in anchors if ours else []:
            theirs = [r for r in group if r.get("tool") == anchor]
            same = [r for r in ours if r.get("method") in {t.get("method") for t in theirs}] or ours
            a = min(theirs, key=lambda r: r.per_unit)
            if found := equal_error(same, theirs):
                kind, (speedup, detail) = KINDS[0], found
            elif a.error and any(r.error for r in same):  # nhfast's run nearest in log error
                n = min(
                    [r for r in same if r.error], key=lambda r: abs(math.log(r.error / a.error))
                )
                kind, speedup = KINDS[1], a.per_unit / n.per_unit
                detail = f"no overlap: nhfast {n.error:.1e} ({n.tolerance}), {anchor} {a.error:.1e}"
            else:
                keys = [k for k in ("rtol", "atol", "h") if k in a.fields]
                match = [r for r in same if all(r.get(k) == a.get(k) for k in keys)]
                why = "one right-hand side" if group[0].is_rhs else "no final-state error recorded"
                n = min(match, key=lambda r: r.per_unit) if match else None
                kind, speedup = KINDS[2], a.per_unit / n.per_unit if n else math.nan
                detail = f"{a.tolerance or why}" if n else f"no nhfast run at {a.tolerance}"
            out.append(Ratio(suite, name, anchor, group[0].unit, speedup, kind, detail))
    if not any(r.get("tool") for r in records):
        notes.append("No benchmark carries extra_info['tool']: no comparison with anchors.")
    return out, notes


def natural(text: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(text))]


def figure(path: Path, records, x: str, keys=(), line=Record.label, y=None, n=2, **kw) -> bool:
    """A PNG of ``(r.x, y(r) or time per unit of work)`` by panel (suite and ``keys``; at least
    ``n`` x values) and line (`` xN``: N threads, dotted); ``kw``: cols, log, xlabel, ylabel."""
    panels: dict = defaultdict(lambda: defaultdict(list))
    for r in [r for r in records if getattr(r, x) is not None]:
        vals = {**r.fields, "n": r.n, "lanes": r.lanes, "rhs": r.is_rhs or None}
        title = [r.suite] + [f"{k}={vals[k]}" for k in (*keys, "rhs") if vals.get(k) is not None]
        panels[" ".join(title)][line(r)].append((getattr(r, x), y(r) if y else r.per_unit))
    panels = {k: v for k, v in panels.items() if len({p for q in v.values() for p, _ in q}) >= n}
    if not panels:
        return False
    base = {k: re.sub(r" x\d+$", "", k) for lines in panels.values() for k in lines}
    labels, cols = sorted(set(base.values())), kw.get("cols", 4)  # a colour per line but threads
    cols, scale = min(cols, len(panels)), "log" if kw.get("log", True) else "linear"
    fig = plt.figure(figsize=(3.7 * cols, 3 * (rows := -(-len(panels) // cols))))
    for at, title in enumerate(sorted(panels, key=natural), 1):
        ax = fig.add_subplot(rows, cols, at, title=title, xscale=scale, yscale=scale)
        for k, pts in sorted(panels[title].items(), key=lambda kv: natural(kv[0])):
            i = labels.index(base[k])
            style = "osD^v"[i // 10 % 5] + ("-" if base[k] == k else ":")
            ax.plot(*zip(*sorted(pts), strict=True), style, color=f"C{i % 10}", label=k)
        ax.set(xlabel=kw.get("xlabel", x), ylabel=kw.get("ylabel", "seconds per unit of work"))
        ax.grid(True, which="both", alpha=0.25)
    fig.tight_layout()
    lines = {h.get_label(): h for ax in fig.axes for h in ax.get_lines()}
    fig.legend(lines.values(), lines, loc="center left", bbox_to_anchor=(1, 0.5))
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return True


def plots(rs: list[Record], history: list[Record], out: Path) -> list[tuple[str, str]]:
    """Write the figures; return (heading, PNG file name or ``note:`` and why not)."""
    first = {r.name: r.median for r in sorted(history, key=lambda r: r.when, reverse=True)}
    runs_of = Counter(name for name, _ in {(r.name, r.run) for r in history})
    cfg = [(r.suite, r.group, r.label(threads=False)) for r in rs]  # at 1 and more threads:
    threaded = Counter(c for c, _ in set(zip(cfg, [r.threads for r in rs], strict=True)))
    s = [  # heading, PNG, figure's arguments, why no figure
        ("Work-precision: time per trajectory against final-state error", "work_precision.png",
         dict(x="error", keys=("system", "n", "lanes", "t_end"), xlabel="final-state error",
              line=lambda r: r.label(tolerance=False), n=1, ylabel="seconds per trajectory"),
         "no benchmark records a final-state error"),
        ("Time against n", "time_vs_n.png", dict(x="n", keys=("system", "lanes", "t_end")),
         "no benchmark group varies a numeric 'n'"),
        ("Time against lanes (trajectories per call)", "time_vs_lanes.png",
         dict(x="lanes", keys=("system", "n", "t_end")), "no benchmark group varies 'lanes'"),
        ("Time against threads", "threads.png", dict(x="threads", keys=("system", "n", "lanes"),
         records=[r for r, c in zip(rs, cfg, strict=True) if threaded[c] > 1],
         line=lambda r: f"{r.group} {r.label(threads=False)}"), "no benchmark varies 'threads'"),
        ("History: median against the first saved run", "history.png",
         dict(records=[r for r in history if runs_of[r.name] > 1], x="when", log=False,
              line=lambda r: r.name.split("::")[-1], y=lambda r: r.median / first[r.name],
              ylabel="median / first median"),
         "every benchmark is in one saved run only; history needs two or more"),
    ]  # fmt: skip
    return [(h, p if figure(out / p, **{"records": rs, **a}) else "note:" + w) for h, p, a, w in s]


def wp_frontier(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The (error, seconds) points no other point beats in both, by falling error."""
    front: list[tuple[float, float]] = []
    for e, t in sorted(points, key=lambda p: (p[1], p[0])):
        if e > 0 and math.isfinite(e) and (not front or e < front[-1][0]):
            front.append((e, t))
    return sorted(front)


def wp_ratios(doc: dict) -> list[dict]:
    """nhfast's time / each anchor's at equal error on the log-log frontiers, against the goal."""
    pts: dict = defaultdict(list)
    for r in doc.get("runs", []):
        key = (r["problem"], r["n"], r["lanes"], r["impl"], r["threads"])
        pts[key].append((r["error"], r["per_trajectory_seconds"]))
    out = []
    cases = sorted({k[:3] for k in pts})
    for case, (ours, anchor, threads) in [(c, p) for c in cases for p in WP_PAIRS]:
        a, b = (pts.get((*case, who, threads)) for who in (ours, anchor))
        if not a or not b:
            continue
        a, b = wp_frontier(a), wp_frontier(b)
        many = "one" if case[2] == 1 else "many"
        goal = WP_GOAL_SCIPY if anchor == "scipy" else WP_GOAL_HEYOKA[many]
        row = dict(problem=case[0], n=case[1], lanes=case[2], nhfast=ours, threads=threads)
        out.append(row | dict(anchor=anchor, goal=goal, ratio=math.nan, met=None))
        found = [(e, time_at(a, e), time_at(b, e)) for e in sorted({e for e, _ in a + b})]
        if pairs := [(e, ta / tb) for e, ta, tb in found if ta and tb] if a and b else []:
            rs = [q for _, q in pairs]
            mean = math.exp(statistics.fmean(map(math.log, rs)))
            out[-1] |= dict(ratio=mean, least=min(rs), greatest=max(rs), met=mean <= goal)
            out[-1]["errors"] = pairs[0][0], pairs[-1][0]
        else:
            span = [f"{f[0][0]:.1e}..{f[-1][0]:.1e}" if f else "" for f in (a, b)]
            note = f"no overlap: nhfast {span[0]}, {anchor} {span[1]}"
            out[-1]["note"] = note if a and b else "no errors"
    return out


def wp_compile(doc: dict) -> list[dict]:
    """heyoka's JIT seconds [least, greatest] over the tolerances, nhfast's (cold) compile's."""
    rows: dict = {}
    for c in doc.get("compile", []) + doc.get("nhfast_compile", []):
        row = rows.setdefault((c["problem"], c["n"]), dict(problem=c["problem"], n=c["n"]))
        span = row.setdefault(c["impl"], [math.inf, 0.0])
        span[:] = min(span[0], c["seconds"]), max(span[1], c["seconds"])
    modes = {(c["problem"], c["n"]): c.get("compact_mode") for c in doc.get("compile", [])}
    return [rows[k] | {"heyoka compact mode": modes.get(k)} for k in sorted(rows)]


def wp_text(doc: dict) -> str:
    """The ratios and compile seconds as plain text (for the terminal)."""
    lines = ["  ".join(f"{k} {fmt(v)}" for k, v in r.items()) for r in wp_ratios(doc)]
    for c in wp_compile(doc):
        cells = [f"{k} {v[0]:.3g}..{v[1]:.3g}" for k, v in c.items() if isinstance(v, list)]
        lines.append(f"compile seconds {c['problem']} n={c['n']}: " + ", ".join(cells))
    return "\n".join(lines + [f"skipped {s['impl']}: {s['reason']}" for s in doc["skipped"]])


def fmt(x, kind: str = "g") -> str:
    """``g``: 3 digits, ``s``: seconds with a unit, ``x``: a speed-up; – for none; yes, no; a..b."""
    if isinstance(x, (tuple, list)):  # a span
        return "..".join(fmt(v, kind) for v in x)
    if x is None or not isinstance(x, (int, float)) or isinstance(x, bool):
        return "–" if x is None else "yes" if x is True else "no" if x is False else str(x)
    if not math.isfinite(x) or (isinstance(x, int) and kind == "g"):
        return str(x) if math.isfinite(x) else "–"
    if kind == "s":
        scale = next(s for s in (1, 1e-3, 1e-6, 1e-9) if abs(x) >= s or s == 1e-9)
        return f"{x / scale:.3g} " + {1: "s", 1e-3: "ms", 1e-6: "µs", 1e-9: "ns"}[scale]
    return f"×{x:.0f}" if kind == "x" and x >= 100 else ("×" * (kind == "x")) + f"{x:.3g}"


def table(rows: list[dict], box: bool = True) -> str:
    """An HTML table of dicts, a column per key, in a scrolling box."""
    head = list(dict.fromkeys(k for r in rows for k in r))
    cells = ["".join(f"<td>{escape(fmt(r.get(k)))}</td>" for k in head) for r in rows]
    t = "".join(f"<th>{escape(h)}</th>" for h in head) + "".join(f"<tr>{c}" for c in cells)
    return f'<div class="box"><table><tr>{t}</table></div>' if box else f"<table><tr>{t}</table>"


def build(paths, out: Path) -> Path:
    """Write ``out/index.html`` (or ``out`` itself when it ends in ``.html``) and its PNGs."""
    index = Path(out) if Path(out).suffix == ".html" else Path(out) / "index.html"
    index.parent.mkdir(parents=True, exist_ok=True)
    for old in index.parent.glob("*.png"):
        old.unlink()
    records, runs, notes = load(paths := list(paths))
    rs, more = ratios(recs := latest(records))
    figs = []
    for h, f in plots(recs, records, index.parent):
        body = f"<p class=note>{escape(f[5:])}</p>" if f[:5] == "note:" else f'<img src="{f}">'
        figs.append(f"<h2>{escape(h)}</h2>{body}")
    rows, same = [], attrgetter("anchor", "unit", "kind")
    for r in sorted(rs, key=lambda r: (KINDS.index(r.kind), r.anchor)):
        m = [q.speedup for q in rs if same(q) == same(r) and q.speedup > 0]  # the anchor's
        mark = " †" * (r.kind != KINDS[0])
        mean = fmt(statistics.geometric_mean(m), "x") + mark if m else "–"
        rows.append({"Anchor": r.anchor, "nhfast speed-up": fmt(r.speedup, "x") + mark})
        rows[-1] |= {"Over the anchor's configurations": mean, "Work": f"per {r.unit}"}
        rows[-1] |= {"Configuration": f"{r.suite} / {r.group}", "At": f"{r.kind}: {r.detail}"}
    every = [{"Suite / group": f"{r.suite} / {r.group}", "Benchmark": r.name.split("::")[-1]}
             | {k: r.get(k.lower()) for k in ("Tool", "Method", "n", "Threads")}
             | {"Lanes": r.lanes, "Tolerance": r.tolerance or None, "Error": r.error,
                "Median": fmt(r.median, "s"), "Run": Path(r.run).stem,
                "Per unit of work": f"{fmt(r.per_unit, 's')} / {r.unit}"}
             for r in recs]  # fmt: skip
    docs = [(f.name, d) for f, d in documents(paths) if isinstance(d, dict)]
    docs.sort(key=lambda fd: str(fd[1].get("datetime")))  # the newest sweep of each kind last
    sweep, kernels, e = "", "", lambda x: escape(str(x))  # noqa: E731
    for name, doc in [(f, d) for f, d in docs if d.get("kind") == WP_KIND][-1:]:
        m = ", ".join(f"{k} {v}" for k, v in doc.get("machine_info", {}).items())
        sweep = f"<h2>Work-precision sweep: nhfast against heyoka and SciPy</h2><p>{e(name)}, "
        sweep += f"{e(m)}; error against {e(doc.get('reference'))} over {e(doc.get('err_lanes'))} "
        sweep += "trajectories. Ratio: nhfast's time ÷ the anchor's at equal error (frontiers).</p>"
        runs_ = [record(r["problem"], r["problem"], "", r | {"tool": r["impl"], "work": 1},
                        r["per_trajectory_seconds"], name, None) for r in doc["runs"]]  # fmt: skip
        for p in sorted({r.suite for r in runs_}):
            png = f"{Path(name).stem}_{re.sub(r'[^a-z0-9]+', '_', p.lower())}.png"
            figure(index.parent / png, [r for r in runs_ if r.suite == p], "error",
                   ("n", "lanes", "t_end"), lambda r: r.label(tolerance=False), n=1, cols=3,
                   xlabel="final-state error", ylabel="seconds per trajectory")  # fmt: skip
            sweep += f'<img src="{png}" alt="work-precision {e(p)}">'
        for r in (wp := wp_ratios(doc)):
            r["ratio"] = fmt(r["ratio"]) + "×" * (r["met"] is not None)
        skipped = sorted({f"{s['impl']}: {s['reason']}" for s in doc.get("skipped", [])})
        sweep += f"<h3>Time ratios at equal error</h3>{table(wp)}<h3>Compile seconds: heyoka's JIT"
        sweep += f" per tolerance (min..max), nhfast's cold</h3>{table(wp_compile(doc), False)}"
        sweep += f"<p class=note>{e('; '.join(skipped))}</p>"
    for _, doc in [(f, d) for f, d in docs if d.get("kind") == DK_KIND][-1:]:
        dk = [{k: v for k, v in r.items() if not isinstance(v, dict)}  # sizes: a column each
              | {f"{k} {s}": x for k, v in r.items() if isinstance(v, dict) for s, x in v.items()}
              for r in doc.get("rows", [])]  # fmt: skip
        kernels = "<h2>Derived kernels (veselova(n, form='structured')) over hand-derived ones</h2>"
        kernels += f"<p>Goal: ratio ≤ {e(doc.get('goal'))}; {e(doc.get('datetime'))}, "
        kernels += f"{e((doc.get('machine_info') or {}).get('cpu'))}</p>{table(dk)}"
    saved = [r | {"when": f"{r['when']:%Y-%m-%d %H:%M} UTC"} for r in runs]
    index.write_text(
        f'<!DOCTYPE html><html lang="en"><meta charset="utf-8"><style>{CSS}</style><title>nhfast '
        "benchmarks</title><h1>nhfast benchmarks</h1><h2>nhfast against each anchor</h2><p>The "
        "anchor's time ÷ nhfast's for the same work (medians) at equal final-state error, on "
        f"log-log work-precision lines; † marks the rows compared otherwise.</p>{table(rows)}"
        f"{figs[0]}{sweep}{''.join(figs[1:])}{kernels}<h2>Every benchmark (latest run)</h2>"
        f"{table(every)}<h2>Saved runs</h2>{table(saved, box=False)}<h2>Notes</h2><p class=note>"
        + "<br>".join(map(escape, notes + more)),
        encoding="utf-8",
    )
    return index


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="*", type=Path, default=[DEFAULT_RESULTS], help="JSON")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder or .html file")
    args = ap.parse_args(argv)
    if missing := [p for p in args.results if not p.exists()]:
        print(f"dashboard: no such file or directory: {missing[0]}", file=sys.stderr)
        return 2
    print(build(args.results, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
