"""Code generation + compile time of whole-sphere Veselova vs n: unrolled vs structured kernels.

Two code paths for the same equations (seed 004 Section 4.2 in the embedded variables):

* ``unrolled``: ``veselova(n, form="embedded")`` -> ``generate_c`` (joint CSE over fully unrolled
  scalar expressions, ``O(n^2)`` code) -> ``nhfast._jit.build``;
* ``structured``: ``veselova(n, form="structured")`` -> ``generate_structured_c`` (loops over the
  index, ``O(1)`` code) -> ``nhfast._jit.build``.

Kernels: ``rhs``, ``observables``, ``divergence`` in both paths.  Every compile runs in a fresh,
empty ``NHFAST_CACHE_DIR`` (and with the in-memory cache cleared), so the C compiler really runs.
Also measured: the time per lane of one ``rhs`` evaluation on 4096 lanes (kernel only).

Run as a script to measure n = 3, 4, 8, 16, 32, 64 and write
``benchmarks/results/codegen_scaling.json`` and ``.png``::

    python benchmarks/bench_codegen_scaling.py [--max-unrolled-seconds 120]

The unrolled path is skipped for an ``n`` whose projected time (the previous ``n``'s time
scaled by ``(n / n_prev)^2``) exceeds the limit; the JSON says so.  Under pytest
(``pytest benchmarks/bench_codegen_scaling.py``) a small subset runs as pytest-benchmark cases.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nhfast import _jit
from nhfast.codegen import generate_c
from nhfast.codegen.structured import generate_structured_c
from nhfast.systems import veselova

NS = (3, 4, 8, 16, 32, 64)
COMPANIONS = ("divergence", "observables")
RESULTS = Path(__file__).resolve().parent / "results"


def _fresh_build(source: str) -> tuple[Any, float]:
    """Compile ``source`` in an empty cache directory; seconds of ``_jit.build``."""
    old = os.environ.get("NHFAST_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="nhfast-codegen-bench-") as tmp:
        os.environ["NHFAST_CACHE_DIR"] = tmp
        _jit.clear_memory_cache()
        try:
            t0 = time.perf_counter()
            lib, hit = _jit.build(source)
            seconds = time.perf_counter() - t0
        finally:
            if old is None:
                os.environ.pop("NHFAST_CACHE_DIR", None)
            else:
                os.environ["NHFAST_CACHE_DIR"] = old
        assert not hit
        # a fresh library handle that stays valid after the directory is gone (mapped)
        return lib, seconds


def _rhs_seconds_per_lane(lib: Any, n: int, lanes: int = 4096, repeat: int = 15) -> float:
    """Best time per lane of the library's ``nh_rhs`` on ``lanes`` lanes (kernel only)."""
    from nhfast import _core

    rng = np.random.default_rng(0)
    g = rng.normal(size=(n, lanes))
    g /= np.linalg.norm(g, axis=0)
    m = rng.normal(size=(n, lanes))
    m -= np.sum(m * g, axis=0) * g
    x = np.ascontiguousarray(np.concatenate([g, m]))
    par = np.ascontiguousarray(rng.uniform(0.5, 2.0, size=(n, lanes)))
    t = np.zeros(lanes)
    out = np.empty((2 * n, lanes))
    cap = _core.kernel_capsule(lib.address("nh_rhs"))
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        _core.eval_soa(cap, None, t, x, par, out)
        best = min(best, time.perf_counter() - t0)
    return best / lanes


def measure(path: str, n: int) -> dict[str, Any]:
    """Stages of one code path at one ``n``: system, codegen, compile (+ rhs speed)."""
    t0 = time.perf_counter()
    if path == "unrolled":
        vf = veselova(n, form="embedded")
        t1 = time.perf_counter()
        source = generate_c(vf.kernel_set(COMPANIONS))
    elif path == "structured":
        vf = veselova(n, form="structured")
        t1 = time.perf_counter()
        source = generate_structured_c(vf.program)
    else:
        raise ValueError(f"path must be 'unrolled' or 'structured', got {path!r}")
    t2 = time.perf_counter()
    lib, compile_s = _fresh_build(source)
    rec = {
        "path": path,
        "n": n,
        "system_s": t1 - t0,
        "codegen_s": t2 - t1,
        "compile_s": compile_s,
        "source_bytes": len(source),
        "rhs_ns_per_lane": 1e9 * _rhs_seconds_per_lane(lib, n),
    }
    rec["total_s"] = rec["system_s"] + rec["codegen_s"] + rec["compile_s"]
    return rec


def run(ns: tuple[int, ...] = NS, max_unrolled_seconds: float = 120.0) -> dict[str, Any]:
    """Measure both paths for every ``n``; skip unrolled ones projected over the limit."""
    records: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    prev: tuple[int, float] | None = None
    for n in ns:
        records.append(measure("structured", n))
        print(_line(records[-1]), flush=True)
        projected = None if prev is None else prev[1] * (n / prev[0]) ** 2
        if projected is not None and projected > max_unrolled_seconds:
            skipped.append({"path": "unrolled", "n": n, "projected_s": projected})
            print(f"unrolled   n={n:3d}: skipped (projected {projected:.0f} s)", flush=True)
            continue
        rec = measure("unrolled", n)
        records.append(rec)
        prev = (n, rec["total_s"])
        print(_line(rec), flush=True)
    return {
        "benchmark": "codegen_scaling",
        "system": "Veselova on SO(n), whole sphere (embedded gamma, m); kernels rhs, "
        "observables, divergence",
        "machine": {"platform": platform.platform(), "processor": platform.processor()},
        "compiler": " ".join(_jit.compiler_command() or ["none"]),
        "flags": _jit.compile_flags(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "max_unrolled_seconds": max_unrolled_seconds,
        "records": records,
        "skipped": skipped,
    }


def _line(r: dict[str, Any]) -> str:
    return (
        f"{r['path']:10s} n={r['n']:3d}: system {r['system_s']:7.3f} s  codegen "
        f"{r['codegen_s']:7.3f} s  compile {r['compile_s']:7.3f} s  source "
        f"{r['source_bytes']:9d} B  rhs {r['rhs_ns_per_lane']:8.1f} ns/lane"
    )


def plot(data: dict[str, Any], path: Path) -> None:
    """Log-log plot of total time, source size and rhs cost vs n for both paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    styles = {"unrolled": ("tab:red", "o"), "structured": ("tab:blue", "s")}
    for name, (color, marker) in styles.items():
        recs = [r for r in data["records"] if r["path"] == name]
        if not recs:
            continue
        ns = [r["n"] for r in recs]
        kw = {"color": color, "marker": marker}
        axes[0].loglog(ns, [r["total_s"] for r in recs], label=name, **kw)
        axes[0].loglog(
            ns, [r["compile_s"] for r in recs], alpha=0.4, ls="--",
            label=f"{name}: compile only", **kw,
        )  # fmt: skip
        axes[1].loglog(ns, [r["source_bytes"] for r in recs], label=name, **kw)
        axes[2].loglog(ns, [r["rhs_ns_per_lane"] for r in recs], label=name, **kw)
    for s in data["skipped"]:
        axes[0].axvline(s["n"], color="tab:red", ls=":", alpha=0.5)
    axes[0].axhline(60, color="grey", ls=":", lw=1)
    axes[0].axhline(5, color="grey", ls=":", lw=1)
    axes[0].set(xlabel="n", ylabel="seconds", title="system + codegen + compile")
    axes[1].set(xlabel="n", ylabel="bytes", title="generated C source")
    axes[2].set(xlabel="n", ylabel="ns per lane", title="one rhs evaluation (4096 lanes)")
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ns_all = sorted({r["n"] for r in data["records"]})
    for ax in axes:
        ax.set_xticks(ns_all)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Veselova on SO(n), whole sphere: unrolled vs structured kernels")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ------------------------------------------------------------------ pytest-benchmark ----


@pytest.mark.parametrize(("path", "n"), [("structured", 8), ("structured", 32), ("unrolled", 8)])
def test_codegen_compile(benchmark: Any, path: str, n: int) -> None:
    """One fresh codegen + compile (one round: the compile is not repeatable in a cache)."""
    benchmark.group = "codegen-scaling"
    rec = benchmark.pedantic(measure, args=(path, n), rounds=1, iterations=1)
    benchmark.extra_info.update(rec)
    assert rec["source_bytes"] > 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-unrolled-seconds", type=float, default=120.0)
    ap.add_argument("--ns", type=int, nargs="*", default=list(NS))
    ap.add_argument("--replot", action="store_true", help="only redraw the PNG from the JSON")
    args = ap.parse_args(argv)
    if args.replot:
        data = json.loads((RESULTS / "codegen_scaling.json").read_text())
    else:
        data = run(tuple(args.ns), args.max_unrolled_seconds)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "codegen_scaling.json").write_text(json.dumps(data, indent=1))
    plot(data, RESULTS / "codegen_scaling.png")
    print(f"wrote {RESULTS / 'codegen_scaling.json'} and .png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
