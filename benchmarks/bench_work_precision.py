"""Work-precision: final-state error against time for nhfast and heyoka at equal error (issues
12, 30).

Implementations (``impl``): nhfast DOP853 and Taylor (``nh.integrate(method=...)``, one and two
threads), heyoka's Taylor method in scalar mode (a loop over trajectories), batch mode (one SIMD
vector per call, in a loop written as a speed-minded user would: the batches laid out in one
transpose, :func:`anchors.heyoka_hh_fpu.run_batch`; on one thread timed in a worker thread,
where heyoka's batch integrator ran 25-35 % faster than in the main thread; also on two threads,
a copy of the integrator per thread; batch sizes 4 and 8 both run at each tolerance, the faster
kept) and ensemble mode (``ensemble_propagate_until_batch`` on two threads), and SciPy's
``solve_ivp`` DOP853 with a lean NumPy right-hand side (timed on a few trajectories, reported per
trajectory). Problems: the Veselova body on SO(n) as a user constructs it,
``nhfast.systems.veselova(n, form="structured", inertia=inertia)`` (the rigid-body engine's
derivation), with the inertia ``A Om A`` (``veselova``) and the physical one ``J Om + Om J``
(``veselova-physical``), ``n`` = 4 to 64 (:mod:`anchors.problem`; heyoka on the same ``O(n)``
equations with the moments folded in as numbers), Hénon–Heiles and an FPU-beta chain of 32
masses (:mod:`anchors.nhfast_hh_fpu`), each at N = 1, 1000 and 10^4 trajectories.
Every implementation sweeps its tolerance (``rtol = atol = tol``; heyoka ``tol``); each run
records seconds, final-state error and steps. The error is the max abs difference, over the
first :data:`ERR_LANES` trajectories, from a long-double heyoka Taylor run at tol 1e-19 (itself
checked against nhfast DOP853 at rtol 1e-14). Times at equal error are read off the log-log
work-precision frontiers (``dashboard.wp_ratios``). t_final: Veselova 10, Hénon–Heiles 50, FPU
10; at N = 10^4 a shorter one for Veselova n = 32 (2), n = 64 (1) and FPU (2) keeps the sweep
within 15 minutes (:data:`T_FINAL_BIG`; the same t for every implementation of a case). heyoka
runs in compact mode from 64 states on (its JIT of the unrolled code takes minutes there).

* ``pytest benchmarks --benchmark-disable`` (CI) runs a smoke version in a few seconds: small
  problems, two tolerances, 1 and 16 trajectories; it asserts finite errors that fall with the
  tolerance.
* ``python benchmarks/bench_work_precision.py [--out FILE]`` (or ``NHFAST_BENCH_WP=1 pytest
  benchmarks/bench_work_precision.py -m slow``) runs the full sweep and writes
  ``benchmarks/results/work_precision.json`` (about 15 minutes on 2 cores). heyoka's JIT and
  nhfast's generate + compile seconds (cold cache) are recorded per implementation.

nhfast's Taylor rows run when ``method="taylor"`` works, else they are skipped with the reason.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from anchors import nhfast_hh_fpu as nf  # noqa: E402
from anchors import scipy_hh_fpu as sh  # noqa: E402
from anchors.machine import cpu_name  # noqa: E402
from anchors.problem import inertia, initial_states, rhs_numpy, rhs_numpy_physical  # noqa: E402

import nhfast as nh  # noqa: E402
from nhfast._core import taylor_order  # noqa: E402

FULL = os.environ.get("NHFAST_BENCH_WP") == "1"
RESULT = HERE / "results" / "work_precision.json"
TOLS = [1e-9, 1e-11, 1e-13, 1e-15]
#: heyoka's (and nhfast Taylor's) errors lie one to two decades below their tolerance: two
#: looser tolerances give their work-precision lines an overlap with DOP853's.
TAYLOR_TOLS = [1e-6, 1e-7, *TOLS]
ERR_LANES = 32
REF_TOL = 1e-19
CHECK_TOL = (1e-14, 1e-16)
SCIPY_LANES = 4
FPU_MASSES = 32
#: (problem, n) -> t_final; the same t for every implementation and N.
T_FINAL = {"veselova": 10.0, "veselova-physical": 10.0, "henon-heiles": 50.0, "fpu": 10.0}
#: N = 10^4 at large n: a shorter t_final keeps the sweep within its budget (all impls alike).
T_FINAL_BIG = {("veselova", 32): 2.0, ("veselova", 64): 1.0, ("veselova-physical", 32): 2.0,
               ("veselova-physical", 64): 1.0, ("fpu", FPU_MASSES): 2.0}  # fmt: skip
#: heyoka's compact mode (JIT of seconds, not minutes) from this many states on.
COMPACT_FROM = 64
#: heyoka's batch sizes tried at every tolerance (the faster kept): 4 and 8 (AVX-512's).
BATCH_SIZES = [4, 8]


# -------------------------------------------------------------------------- cases ----


def _bench_large_n():
    spec = importlib.util.spec_from_file_location("nhfast_bench_large_n", HERE / "bench_large_n.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@dataclass
class Case:
    """One (problem, n, N): systems for every tool, initial states, reference final states."""

    problem: str
    n: int
    lanes: int
    t_end: float
    x0: np.ndarray
    par: np.ndarray | None
    vf: nh.VectorField
    formulation: str
    numpy_rhs: Callable
    numpy_args: tuple
    ref: np.ndarray = field(repr=False, default=None)
    ref_check: float = float("nan")

    @property
    def dim(self) -> int:
        return self.x0.shape[1]

    def equations(self):
        from anchors import heyoka_hh_fpu as hh
        from anchors import heyoka_veselova as hv

        if self.problem in VESELOVA:
            return hv.equations(self.n, VESELOVA[self.problem], self.par)
        return hh.henon_heiles_equations() if self.problem == "henon-heiles" else (
            hh.fpu_equations(self.n)
        )  # fmt: skip

    def error(self, y: np.ndarray) -> float:
        """Max abs final-state error over the first :data:`ERR_LANES` trajectories (of those
        in ``y``: SciPy is timed on fewer)."""
        k = min(self.ref.shape[0], y.shape[0])
        return float(np.max(np.abs(y[:k] - self.ref[:k])))


_SYSTEMS: dict = {}


VESELOVA = {"veselova": "a-omega-a", "veselova-physical": "physical"}


def _veselova_user_field(problem: str, n: int) -> tuple[nh.VectorField, str]:
    """What a user constructs: ``veselova(n, form="structured", inertia=inertia)`` (the engine's
    equations; heyoka gets the same ``O(n)`` formulation,
    :func:`anchors.heyoka_veselova.equations`)."""
    from nhfast.systems import veselova

    inertia = VESELOVA[problem]
    return veselova(
        n, form="structured", inertia=inertia
    ), f"veselova({n}, form='structured', inertia={inertia!r})"


def system(problem: str, n: int) -> tuple[nh.VectorField, str]:
    """The nhfast field of a problem (one per process: compiled once)."""
    if (problem, n) not in _SYSTEMS:
        if problem in VESELOVA:
            _SYSTEMS[problem, n] = _veselova_user_field(problem, n)
        elif problem == "henon-heiles":
            _SYSTEMS[problem, n] = nf.henon_heiles(), "henon_heiles"
        else:
            _SYSTEMS[problem, n] = nf.fpu_chain(n), "fpu_chain"
    return _SYSTEMS[problem, n]


def make_case(problem: str, n: int, lanes: int, t_end: float, heyoka_ref: bool = True) -> Case:
    """Build a case and its reference (heyoka long double; nhfast DOP853 without heyoka)."""
    vf, formulation = system(problem, n)
    if problem in VESELOVA:
        a = inertia(n)
        rhs = rhs_numpy if VESELOVA[problem] == "a-omega-a" else rhs_numpy_physical
        x0, par, f, args = initial_states(n, lanes, seed=n), a, _numpy_rhs(rhs), (a,)
    elif problem == "henon-heiles":
        x0, par, f, args = nf.henon_heiles_states(lanes, seed=1), None, sh.henon_heiles_rhs, ()
    else:
        x0, par = nf.fpu_states(n, lanes, seed=n), np.array([1.0])
        f, args = sh.fpu_rhs, (1.0,)
    c = Case(problem, n, lanes, t_end, x0, par, vf, formulation, f, args)
    k = min(lanes, ERR_LANES)
    check = nh.integrate(
        vf, x0[:k], [0.0, t_end], params=par, rtol=CHECK_TOL[0], atol=CHECK_TOL[1],
        observables=False,
    ).y[:, -1]  # fmt: skip
    if heyoka_ref:
        from anchors import heyoka_hh_fpu as hh

        c.ref = hh.reference(c.equations(), x0[:k], [] if par is None else par, t_end, REF_TOL)
        c.ref_check = float(np.max(np.abs(check - c.ref)))
    else:
        c.ref = check
    return c


def _numpy_rhs(rhs: Callable) -> Callable:
    """``f(t, y, a)`` for ``solve_ivp`` from ``rhs(y, a)``."""

    def f(t: float, y: np.ndarray, a: np.ndarray) -> np.ndarray:
        return rhs(y, a)

    return f


# ------------------------------------------------------------------ implementations ----


def best_time(run: Callable, budget: float = 0.3, most: int = 50) -> tuple[float, object]:
    """Least wall time of up to ``most`` calls (repeated while the total stays under
    ``budget`` seconds); returns (seconds, the last result). A run of 0.1 s gets three or
    four calls; one of 50 us (one trajectory) gets 50, so its minimum is not one of the first
    calls of a cold cache (five calls left the one-trajectory cells 1.3-1.5x noisy)."""
    times, out, total = [], None, 0.0
    while len(times) < most and (not times or total < budget):
        t0 = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - t0)
        total += times[-1]
    return min(times), out


def taylor_available(c: Case) -> str | None:
    """None when ``nh.integrate(method="taylor")`` works on this case, else why not."""
    try:
        r = nh.integrate(
            c.vf, c.x0[:1], [0.0, 1e-3], method="taylor", params=c.par, rtol=1e-9, atol=1e-9,
            observables=False,
        )  # fmt: skip
        if not np.all(np.isfinite(r.y)):
            return "method='taylor' returned non-finite states"
    except Exception as exc:  # noqa: BLE001 - any failure means: not there yet
        return f"method='taylor' unavailable: {type(exc).__name__}: {exc}"[:200]
    return None


def run_nhfast(c: Case, method: str, tol: float, threads: int) -> dict:
    def go():
        return nh.integrate(
            c.vf, c.x0, [0.0, c.t_end], method=method, params=c.par, rtol=tol, atol=tol,
            threads=threads, observables=False,
        )  # fmt: skip

    go()  # untimed: the first call at a tolerance may compile (a kernel unrolled for its order)
    sec, r = best_time(go)
    steps = r.stats.get("steps", r.stats.get("accepted")) if isinstance(r.stats, dict) else None
    return dict(seconds=sec, y=r.y[:, -1], steps=None if steps is None else int(np.sum(steps)))


@functools.cache
def _worker():
    """One worker thread, kept for the sweep (see :func:`run_heyoka`)."""
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="heyoka")


def run_heyoka(c: Case, mode: str, anchor, threads: int = 2) -> dict:
    from anchors import heyoka_hh_fpu as hh

    par = [] if c.par is None or not anchor.n_params else c.par
    if mode == "scalar":
        go = lambda: hh.run_scalar(anchor, c.x0, par, c.t_end)  # noqa: E731
    elif mode == "batch" and threads == 1:
        # in one worker thread: heyoka's batch integrator ran 25-35 % slower in the main
        # thread (Veselova n = 16, 1000 trajectories, tol 1e-11: 12.6 against 9.4 ms, every
        # time; the scalar integrator and nhfast are the same in either), the sweeps' "fast"
        # and "slow" heyoka of before. Timed in the worker, at heyoka's best.
        sec, (y, steps) = (
            _worker().submit(best_time, lambda: hh.run_batch(anchor, c.x0, par, c.t_end)).result()
        )
        return dict(seconds=sec, y=y, steps=steps)
    elif mode == "batch":
        hh.thread_copies(anchor, threads)  # made once, like nhfast's compiled kernels
        go = lambda: hh.run_threads(anchor, c.x0, par, c.t_end, threads)  # noqa: E731
    else:
        go = lambda: hh.run_ensemble(anchor, c.x0, par, c.t_end, threads)  # noqa: E731
    sec, (y, steps) = best_time(go)
    return dict(seconds=sec, y=y, steps=steps)


def run_scipy(c: Case, tol: float, lanes: int) -> dict:
    """SciPy on the first ``lanes`` trajectories (below rtol 2.2e-14 SciPy raises rtol to
    that, with a warning, silenced here: its errors say what it reached)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "At least one element of `rtol`", UserWarning)
        return _run_scipy(c, tol, lanes)


def _run_scipy(c: Case, tol: float, lanes: int) -> dict:
    sec, (y, nfev) = best_time(
        lambda: sh.integrate(c.numpy_rhs, c.x0[:lanes], c.t_end, tol, tol, c.numpy_args),
        budget=0.0,
        most=1,
    )
    return dict(seconds=sec, y=y, steps=nfev, timed_lanes=lanes)


def impls_for(lanes: int) -> list[tuple[str, int]]:
    """(impl, threads) measured at ``lanes`` trajectories."""
    out = [("nhfast-dop853", 1), ("nhfast-taylor", 1), ("heyoka-scalar", 1)]
    if lanes > 1:
        out += [("nhfast-dop853", 2), ("nhfast-taylor", 2), ("heyoka-batch", 1)]
        out += [("heyoka-batch", 2), ("heyoka-ensemble", 2)]
    if lanes >= 10_000:
        out.remove(("heyoka-scalar", 1))  # per trajectory the same as at N = 1000
    out.append(("scipy", 1))  # per trajectory: the same few timed at every N
    return out


def sweep_case(
    c: Case,
    tols: list[float],
    taylor_tols: list[float],
    taylor_reason: str | None,
    out: dict,
    log=print,
    impls: set | None = None,
) -> None:
    """Every implementation and tolerance on one case; appends to ``out['runs']``,
    ``out['compile']`` and ``out['skipped']``."""
    from anchors import heyoka_hh_fpu as hh

    compact = c.dim >= COMPACT_FROM
    eqs = c.equations()
    key = dict(problem=c.problem, n=c.n, lanes=c.lanes, t_end=c.t_end)
    anchors: dict = {}
    known = {(k["problem"], k["n"], k["impl"], k["tol"]) for k in out["compile"]}
    for impl, threads in impls_for(c.lanes):
        if impls and impl not in impls:
            continue
        if impl == "nhfast-taylor" and taylor_reason:
            out["skipped"].append(dict(key, impl=impl, threads=threads, reason=taylor_reason))
            continue
        taylor = impl.startswith("heyoka") or impl == "nhfast-taylor"
        for tol in taylor_tols if taylor else tols:
            extra = {}
            if impl.startswith("nhfast"):
                res = run_nhfast(c, impl.split("-")[1], tol, threads)
            elif impl == "scipy":
                res = run_scipy(c, tol, min(c.lanes, SCIPY_LANES))
            else:
                mode = impl.split("-")[1]
                kind = "scalar" if mode == "scalar" else "batch"  # ensemble: batch's copies
                sizes = [1] if kind == "scalar" else BATCH_SIZES
                best = None
                for bs in sizes:
                    if (kind, tol, bs) not in anchors:
                        if kind == "scalar":
                            anchor = hh.scalar_integrator(eqs, tol, compact_mode=compact)
                        else:
                            anchor = hh.batch_integrator(eqs, tol, batch_size=bs,
                                                         compact_mode=compact)  # fmt: skip
                        anchors[kind, tol, bs] = anchor
                        name = f"heyoka-{kind}"
                        if (c.problem, c.n, name, tol) not in known:  # heyoka caches JIT
                            out["compile"].append(
                                dict(problem=c.problem, n=c.n, impl=name, tol=tol,
                                     seconds=anchor.compile_seconds, compact_mode=compact,
                                     order=int(anchor.ta.order), batch_size=bs)
                            )  # fmt: skip
                    anchor = anchors[kind, tol, bs]
                    res = run_heyoka(c, mode, anchor, threads)
                    if best is None or res["seconds"] < best[0]["seconds"]:
                        best = (res, anchor)
                res, anchor = best
                extra = dict(compact_mode=compact, batch_size=anchor.batch_size)
            timed = res.pop("timed_lanes", c.lanes)
            y = res.pop("y")
            row = dict(
                key, impl=impl, threads=threads, tol=tol, seconds=res["seconds"],
                timed_lanes=timed, per_trajectory_seconds=res["seconds"] / timed,
                error=c.error(y), steps=res["steps"], **extra,
            )  # fmt: skip
            out["runs"].append(row)
            log(
                f"{c.problem:12s} n={c.n:<3d} N={c.lanes:<6d} {impl:16s} x{threads} tol={tol:.0e}"
                f"  {row['seconds']:9.4f} s  err {row['error']:.2e}"
            )


def nhfast_compile_seconds(problem: str, n: int, taylor: bool) -> dict:
    """Generate + compile seconds of the field in a fresh process and an empty kernel cache
    (the field construction, SymPy, is not counted); ``{impl: seconds}``."""
    env = dict(os.environ, NHFAST_CACHE_DIR=tempfile.mkdtemp(prefix="nhfast-wp-cold-"))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--cold-compile", problem, str(n)]
    cmd += ["--taylor"] if taylor else []
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def _cold_compile(problem: str, n: int, taylor: bool) -> dict:
    t0 = time.perf_counter()
    vf, _ = system(problem, n)
    out = {"nhfast-construct": time.perf_counter() - t0}
    t0 = time.perf_counter()
    vf.compile(())
    out["nhfast-dop853"] = time.perf_counter() - t0
    if taylor and hasattr(vf, "compile_taylor"):
        t0 = time.perf_counter()
        general = vf.compile_taylor()
        out["nhfast-taylor"] = time.perf_counter() - t0
        # a small right-hand side also gets a kernel unrolled per order (what integrate
        # compiles on the first call at a tolerance): the largest of those, where any
        unrolled = []
        for tol in TAYLOR_TOLS:
            t0 = time.perf_counter()
            if vf.compile_taylor(taylor_order(0, tol, tol)) is not general:
                unrolled.append(time.perf_counter() - t0)
        if unrolled:
            out["nhfast-taylor-unrolled"] = max(unrolled)
    return out


def cold_heyoka_cache() -> None:
    """An empty on-disk JIT cache for heyoka (a fresh directory) and an empty in-memory one:
    the first build of each integrator is then a cold JIT, like nhfast's cold compile."""
    import heyoka as hy

    hy.llvm_state.set_diskcache_path(tempfile.mkdtemp(prefix="heyoka-wp-cold-"))
    hy.llvm_state.clear_memcache()


def heyoka_jit(full: bool = True) -> list[dict]:
    """Cold JIT seconds of every heyoka integrator of the sweep (scalar and batch, every
    tolerance of :data:`TAYLOR_TOLS`), each with emptied caches."""
    from anchors import heyoka_hh_fpu as hh

    out, seen = [], set()
    for problem, n, _lanes, t_end in plan(full):
        if (problem, n) in seen:
            continue
        seen.add((problem, n))
        c = make_case(problem, n, 1, t_end, heyoka_ref=False)
        compact = c.dim >= COMPACT_FROM
        for kind, build in (("scalar", hh.scalar_integrator), ("batch", hh.batch_integrator)):
            for tol in TAYLOR_TOLS if full else [1e-6, 1e-8, 1e-11]:
                cold_heyoka_cache()
                anchor = build(c.equations(), tol, compact_mode=compact)
                out.append(
                    dict(problem=problem, n=n, impl=f"heyoka-{kind}", tol=tol,
                         seconds=anchor.compile_seconds, compact_mode=compact,
                         order=int(anchor.ta.order))
                )  # fmt: skip
                print(out[-1])
    return out


def machine_info() -> dict:
    import heyoka as hy

    cpu = cpu_name()
    try:
        commit = subprocess.run(
            ["git", "-C", str(HERE), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        commit = ""
    return dict(
        cpu=cpu, cores=os.cpu_count(), platform=platform.platform(), python=sys.version.split()[0],
        numpy=np.__version__, heyoka=hy.__version__, nhfast=nh.__version__,
        heyoka_simd=int(hy.recommended_simd_size()), loadavg_start=os.getloadavg()[0],
        commit=commit,
    )  # fmt: skip


def plan(full: bool) -> list[tuple[str, int, int, float]]:
    """(problem, n, N, t_final) of the sweep."""
    if not full:
        return [("veselova", 4, 1, 2.0), ("veselova", 4, 16, 2.0),
                ("veselova-physical", 4, 16, 2.0), ("henon-heiles", 2, 16, 5.0),
                ("fpu", 8, 16, 2.0)]  # fmt: skip
    cases = []
    for problem, ns in (("veselova", [4, 8, 16, 32, 64]),
                        ("veselova-physical", [4, 8, 16, 32, 64]), ("henon-heiles", [2]),
                        ("fpu", [FPU_MASSES])):  # fmt: skip
        for n in ns:
            for lanes in (1, 1000, 10_000):
                t = T_FINAL[problem]
                if lanes == 10_000:
                    t = T_FINAL_BIG.get((problem, n), t)
                cases.append((problem, n, lanes, t))
    return cases


def sweep(full: bool = True, log=print, impls: set | None = None) -> dict:
    """The whole sweep (or only ``impls``); returns the JSON document."""
    tols = TOLS if full else [1e-8, 1e-11]
    taylor_tols = TAYLOR_TOLS if full else [1e-6, 1e-8, 1e-11]
    out = dict(
        kind="nhfast-work-precision", version=1,
        datetime=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        machine_info=machine_info(), tolerances=tols, taylor_tolerances=taylor_tols,
        err_lanes=ERR_LANES,
        reference=f"heyoka long double (x87) Taylor, tol {REF_TOL:g}, compact mode",
        scipy_lanes=SCIPY_LANES, runs=[], compile=[], nhfast_compile=[], skipped=[],
        cases=[],
    )  # fmt: skip
    t_start = time.perf_counter()
    cold_heyoka_cache()
    reason = None
    for problem, n, lanes, t_end in plan(full):
        c = make_case(problem, n, lanes, t_end)
        if not out["cases"] or (problem, n) != (out["cases"][-1]["problem"], out["cases"][-1]["n"]):
            reason = taylor_available(c)
            if full:
                cold = nhfast_compile_seconds(problem, n, reason is None)
                for impl, sec in cold.items():
                    out["nhfast_compile"].append(dict(problem=problem, n=n, impl=impl, seconds=sec))
        out["cases"].append(
            dict(problem=problem, n=n, lanes=lanes, t_end=t_end, dim=c.dim,
                 formulation=c.formulation, reference_vs_nhfast_dop853=c.ref_check)
        )  # fmt: skip
        sweep_case(c, tols, taylor_tols, reason, out, log, impls)
    out["machine_info"]["loadavg_end"] = os.getloadavg()[0]
    out["sweep_seconds"] = time.perf_counter() - t_start
    return out


def load_dashboard():
    spec = importlib.util.spec_from_file_location(
        "nhfast_bench_dashboard_wp", HERE / "dashboard.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


# -------------------------------------------------------------------------- tests ----


@pytest.fixture(scope="module")
def smoke() -> dict:
    pytest.importorskip("heyoka")
    return sweep(full=False, log=lambda s: None)


def test_smoke_errors_finite_and_fall_with_tolerance(smoke: dict) -> None:
    runs = smoke["runs"]
    assert runs and all(np.isfinite(r["error"]) and r["seconds"] > 0 for r in runs)
    for case in smoke["cases"]:  # the two references agree to far below the tolerances
        assert case["reference_vs_nhfast_dop853"] < 1e-12, case
    groups: dict = {}
    for r in runs:
        groups.setdefault((r["problem"], r["n"], r["lanes"], r["impl"], r["threads"]), []).append(r)
    for key, rs in groups.items():
        rs.sort(key=lambda r: -r["tol"])
        loose, tight = rs[0], rs[-1]
        # three decades tighter: the error falls by at least ten (and stays near the tol)
        assert tight["error"] < loose["error"] / 10, key
        assert loose["error"] < 1e3 * loose["tol"], key


def test_smoke_ratios_at_equal_error(smoke: dict) -> None:
    db = load_dashboard()
    table = db.wp_ratios(smoke)
    compared = [r for r in table if r["met"] is not None]
    for row in compared:
        assert row["ratio"] > 0 and np.isfinite(row["ratio"]), row
        # the mean of the pointwise ratios lies between their extremes (up to its rounding)
        slack = 1e-12 * row["greatest"]
        assert row["least"] - slack <= row["ratio"] <= row["greatest"] + slack, row
    for row in table:
        assert row in compared or "no overlap" in row["note"], row
    # every case has an equal-error comparison with heyoka, and one with SciPy where it ran
    for case in smoke["cases"]:
        here = [r for r in compared if (r["problem"], r["n"], r["lanes"]) == (
            case["problem"], case["n"], case["lanes"])]  # fmt: skip
        assert any(r["anchor"].startswith("heyoka") for r in here), case
    assert smoke["compile"] and all(c["seconds"] > 0 for c in smoke["compile"])


@pytest.mark.slow
def test_full_sweep() -> None:
    """``NHFAST_BENCH_WP=1 pytest benchmarks/bench_work_precision.py -m slow``."""
    if not FULL:
        pytest.skip("set NHFAST_BENCH_WP=1 to run the full sweep (about 15 minutes)")
    pytest.importorskip("heyoka")
    doc = sweep(full=True)
    RESULT.write_text(json.dumps(doc, indent=1), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="work-precision sweep: nhfast against heyoka")
    ap.add_argument("--out", type=Path, default=RESULT)
    ap.add_argument("--smoke", action="store_true", help="the small CI sweep only")
    ap.add_argument("--only", default="", help="comma-separated problems to run")
    ap.add_argument("--impls", default="", help="comma-separated implementations to run")
    ap.add_argument(
        "--merge",
        action="store_true",
        help="keep the runs of --out for the implementations not run now",
    )
    ap.add_argument("--jit-only", action="store_true",
                    help="only re-measure heyoka's cold JIT seconds into --out")  # fmt: skip
    ap.add_argument("--cold-compile", nargs=2, metavar=("PROBLEM", "N"), help=argparse.SUPPRESS)
    ap.add_argument("--taylor", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.cold_compile:
        print(json.dumps(_cold_compile(args.cold_compile[0], int(args.cold_compile[1]),
                                       args.taylor)))  # fmt: skip
        return 0
    global plan
    if args.only:
        keep, full_plan = set(args.only.split(",")), plan
        plan = lambda full: [p for p in full_plan(full) if p[0] in keep]  # noqa: E731
    if args.jit_only:
        doc = json.loads(args.out.read_text(encoding="utf-8"))
        doc["compile"] = heyoka_jit(full=not args.smoke)
        doc["jit_measured"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        args.out.write_text(json.dumps(doc, indent=1), encoding="utf-8")
        print(load_dashboard().wp_text(doc))
        return 0
    impls = set(args.impls.split(",")) if args.impls else None
    doc = sweep(full=not args.smoke, impls=impls)
    if args.merge and args.out.exists():
        old = json.loads(args.out.read_text(encoding="utf-8"))
        ran = {(r["problem"], r["n"], r["impl"]) for r in doc["runs"] + doc["skipped"]}
        for k in ("runs", "skipped"):
            doc[k] = [r for r in old[k] if (r["problem"], r["n"], r["impl"]) not in ran] + doc[k]
        have = {(c["problem"], c["n"], c["impl"]) for c in doc["nhfast_compile"]}
        doc["nhfast_compile"] += [c for c in old["nhfast_compile"]
                                  if (c["problem"], c["n"], c["impl"]) not in have]  # fmt: skip
        have = {(c["problem"], c["n"], c["impl"], c["tol"]) for c in doc["compile"]}
        doc["compile"] += [c for c in old["compile"]
                           if (c["problem"], c["n"], c["impl"], c["tol"]) not in have]  # fmt: skip
        doc["merged_from"] = old.get("datetime")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print(load_dashboard().wp_text(doc))
    print(f"wrote {args.out} ({doc['sweep_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
