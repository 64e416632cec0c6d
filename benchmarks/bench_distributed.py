"""Ensembles on Dask against one process (issue 13): overhead of the distributed path.

The problem: Veselova n = 8 (the structured O(n) kernel of :mod:`bench_large_n`,
``a_i = 1 + i/n``), t = 10, DOP853 at rtol 1e-10, states only (``observables=False``). Two
ways of running the same trajectories on the same machine:

- ``local``: one process, ``nhfast.integrate(..., threads=2)``;
- ``cluster``: a ``LocalCluster`` of 2 single-threaded worker processes (with the slower
  housekeeping of ``nhfast run --workers``, :data:`nhfast.cli.QUIET_DASK`, and the workers'
  statistical profiler off: :func:`dask_settings`),
  :func:`nhfast.distributed.integrate_ensemble` with ``chunk`` trajectories per task, the
  result gathered into the client's memory (the same arrays, bit for bit).

``overhead`` in ``extra_info`` is ``cluster / local - 1`` of the wall times (the issue's goal:
under 15 %), ``cpu_overhead`` the same for CPU seconds (client, scheduler and workers against
the local process: steadier than wall time on a loaded machine; a ``LocalCluster``'s scheduler
lives in the client's process, counted once); ``per_chunk_overhead_s`` is
the wall time of a run with one output time (no integration steps) divided by its number of
chunks: scheduling, (de)serialisation, input checks and gathering of one task.

By default (CI, ``pytest benchmarks --benchmark-disable``) 512 trajectories run in chunks of
64 and 256. ``NHFAST_BENCH_DISTRIBUTED_LANES=N`` sets the number of trajectories and
``NHFAST_BENCH_FULL=1`` runs 10^6 with chunks of 10^4, 5 * 10^4 and 2.5 * 10^5 (about a
minute of CPU per run: some 50 us per trajectory).

``python benchmarks/bench_distributed.py [LANES [REPS [CHUNK,...]]]`` interleaves the runs
(local, cluster with Dask's default profiler on, cluster at each chunk; REPS times; medians)
and writes ``benchmarks/results/distributed.json``.

Figures (2026-11-23, 10^6 trajectories, 2 shared cores under a load of 4-6 from other jobs:
wall times noisy, CPU steady; one interleaved run, medians of 2; ``results/distributed.json``):

=============================================  ==========  ======  =========  ======
run                                            wall s      vs      CPU s      vs
=============================================  ==========  ======  =========  ======
local, threads=2                               70.2        --      44.7       --
cluster, chunk 5e4, before (profiler on,       77.4        +10 %   51.3       +15 %
results relayed by the scheduler)
cluster, chunk 1e4                             59.9        -15 %   47.2       +5.6 %
cluster, chunk 5e4                             60.5        -14 %   45.9       +2.7 %
cluster, chunk 2.5e5                           59.1        -16 %   46.1       +3.2 %
=============================================  ==========  ======  =========  ======

Where the CPU went before (10^5 trajectories, per-thread CPU from /proc, the integrator timed
inside the tasks): the tasks' integrator as in one process (4.36 s against 4.3 s locally, no
oversubscription: ``threads=1`` spawns no OpenMP team); the workers' event-loop threads 0.45 s,
almost all the statistical profiler Dask runs by default (an idle worker burns 0.03 CPU s/s
with it, 0.004 without: a cost per second of wall time, so it grows on a loaded machine,
whatever the chunk count); the client process (client and scheduler) 0.22 s. The earlier
figures of +27-33 % also counted the client's process twice (the scheduler lives in it).
Moving data: a run with one output time (no steps) takes 2.18 / 1.60 / 1.36 s at chunks of
1e4 / 5e4 / 2.5e5 (192 MB in, 192 MB out): about 8.6 ms per chunk on top of 1.3 s for the
bytes. Best chunk: 5e4 (20 tasks; 1e4 pays the per-chunk cost, 2.5e5 leaves a worker idle
at the end).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from anchors.problem import inertia, initial_states

import nhfast as nh
from nhfast.distributed import integrate_ensemble

distributed = pytest.importorskip("distributed")  # the 'distributed' extra

FULL = os.environ.get("NHFAST_BENCH_FULL") == "1"
LANES = int(os.environ.get("NHFAST_BENCH_DISTRIBUTED_LANES", 1_000_000 if FULL else 512))
CHUNKS = [10_000, 50_000, 250_000] if FULL else [max(1, LANES // 8), max(1, LANES // 2)]
N = 8
T_END = 10.0
RTOL = 1e-10
ATOL = 1e-12
_LOCAL: dict[str, object] = {}  # the local run: "seconds" (the least of its runs), "y"


@pytest.fixture(scope="module")
def problem():
    from nhfast.systems import veselova

    vf = veselova(N, form="structured")
    vf.compile(())
    return vf, inertia(N), initial_states(N, LANES, seed=N)


def dask_settings() -> dict[str, object]:
    """The housekeeping of ``nhfast run --workers`` (:data:`nhfast.cli.QUIET_DASK`), without
    the workers' statistical profiler: sampling every thread's stack 100 times a second, it
    costs each worker 3 % of a core, idle or busy (0.03 CPU s/s against 0.004 without)."""
    from nhfast.cli import QUIET_DASK

    return {**QUIET_DASK, "distributed.worker.profile.enabled": False}


@contextlib.contextmanager
def local_cluster() -> Iterator[Any]:
    """A client of 2 single-threaded worker processes."""
    import dask

    with dask.config.set(dask_settings()), distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
        silence_logs=logging.ERROR,
    ) as cluster, distributed.Client(cluster) as c:  # fmt: skip
        yield c


def cluster_cpu(client: Any) -> float:
    """CPU seconds so far of the workers, the scheduler and this client (a LocalCluster's
    scheduler runs in the client's process: counted once)."""
    workers = client.run(time.process_time)
    here = time.process_time()
    if client.run_on_scheduler(os.getpid) != os.getpid():
        here += client.run_on_scheduler(time.process_time)
    return sum(workers.values()) + here


@pytest.fixture(scope="module")
def client():
    with local_cluster() as c:
        yield c


def run_local(problem) -> nh.IntegrationResult:
    vf, a, x0 = problem
    t0, c0 = time.perf_counter(), time.process_time()
    r = nh.integrate(
        vf, x0, [0.0, T_END], params=a, rtol=RTOL, atol=ATOL, threads=2, observables=False
    )
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    _LOCAL["seconds"] = min(seconds, _LOCAL.get("seconds", seconds))
    _LOCAL["cpu"] = min(cpu, _LOCAL.get("cpu", cpu))
    _LOCAL["y"] = r.y
    return r


def info(benchmark, **kw) -> None:
    benchmark.extra_info.update(
        system="veselova", n=N, lanes=LANES, method="dop853", rtol=RTOL, t_end=T_END,
        loadavg=os.getloadavg()[0], **kw,
    )  # fmt: skip


def test_local_threads2(benchmark, problem):
    benchmark.group = f"distributed-n{N}-lanes{LANES}"
    out = {}

    def run():
        out["r"] = run_local(problem)

    benchmark.pedantic(run, rounds=1, iterations=1)
    info(benchmark, tool="nhfast", threads=2, workers=0, seconds=_LOCAL["seconds"])


@pytest.mark.parametrize("chunk", CHUNKS)
def test_cluster(benchmark, problem, client, chunk):
    benchmark.group = f"distributed-n{N}-lanes{LANES}"
    vf, a, x0 = problem
    out = {}

    def run():
        t0, c0 = time.perf_counter(), cluster_cpu(client)
        out["r"] = integrate_ensemble(
            vf, x0, [0.0, T_END], params=a, rtol=RTOL, atol=ATOL, observables=False,
            client=client, chunk=chunk,
        )  # fmt: skip
        out["seconds"], out["cpu"] = time.perf_counter() - t0, cluster_cpu(client) - c0

    integrate_ensemble(vf, x0[:2], [0.0, T_END], params=a, client=client, chunk=1)  # warm up
    benchmark.pedantic(run, rounds=1, iterations=1)
    if "y" not in _LOCAL:
        run_local(problem)
    np.testing.assert_array_equal(out["r"].y, _LOCAL["y"])  # bit for bit
    chunks = -(-LANES // chunk)
    info(
        benchmark, tool="nhfast-dask", threads=1, workers=2, chunk=chunk, chunks=chunks,
        seconds=out["seconds"], local_seconds=_LOCAL["seconds"],
        overhead=out["seconds"] / _LOCAL["seconds"] - 1, cpu_seconds=out["cpu"],
        local_cpu_seconds=_LOCAL["cpu"], cpu_overhead=out["cpu"] / _LOCAL["cpu"] - 1,
    )  # fmt: skip


@pytest.mark.parametrize("chunk", CHUNKS[:1])
def test_per_chunk_overhead(benchmark, problem, client, chunk):
    """One output time: no steps, only the cost of moving a chunk through the cluster."""
    benchmark.group = f"distributed-overhead-n{N}"
    vf, a, x0 = problem
    chunks = -(-LANES // chunk)
    out = {}

    def run():
        t0 = time.perf_counter()
        out["r"] = integrate_ensemble(
            vf, x0, [0.0], params=a, observables=False, client=client, chunk=chunk
        )
        out["seconds"] = time.perf_counter() - t0

    benchmark.pedantic(run, rounds=1, iterations=1, warmup_rounds=1)
    np.testing.assert_array_equal(out["r"].y[:, 0], x0)
    info(
        benchmark, tool="nhfast-dask", workers=2, chunk=chunk, chunks=chunks,
        seconds=out["seconds"], per_chunk_overhead_s=out["seconds"] / chunks,
    )  # fmt: skip


# ------------------------------------------------------- interleaved figures (script) ----
RESULTS = Path(__file__).resolve().parent / "results"


def _profiler(dask_worker: Any, on: bool) -> None:
    """Start or stop a worker's statistical profiler (Dask's default: on)."""
    for name in ("profile", "profile-cycle"):
        pc = dask_worker.periodic_callbacks.get(name)
        if pc is not None:
            pc.start() if on else pc.stop()


def main(argv: list[str]) -> int:
    """``python benchmarks/bench_distributed.py [LANES [REPS [CHUNK,...]]]``: local and
    cluster runs interleaved (local, cluster with the profiler on, cluster at each chunk, ...;
    medians over REPS), the per-chunk overhead, written to ``results/distributed.json``."""
    from anchors.problem import inertia, initial_states

    from nhfast.systems import veselova

    lanes = int(argv[1]) if len(argv) > 1 else 1_000_000
    reps = int(argv[2]) if len(argv) > 2 else 2
    chunks = [int(c) for c in argv[3].split(",")] if len(argv) > 3 else [10_000, 50_000, 250_000]
    vf = veselova(N, form="structured")
    vf.compile(())
    a, x0 = inertia(N), initial_states(N, lanes, seed=N)
    runs: dict[str, list[list[float]]] = {}

    def note(name: str, seconds: float, cpu: float) -> None:
        runs.setdefault(name, []).append([seconds, cpu])
        print(f"{name:22s} {seconds:8.2f} s wall {cpu:8.2f} s CPU load {os.getloadavg()[0]:.1f}")

    with local_cluster() as client:
        integrate_ensemble(vf, x0[:2], [0.0, T_END], params=a, client=client, chunk=1)
        plan = [(chunks[len(chunks) // 2], True)] + [(c, False) for c in chunks]
        for _ in range(reps):
            t0, c0 = time.perf_counter(), time.process_time()
            ref = nh.integrate(
                vf, x0, [0.0, T_END], params=a, rtol=RTOL, atol=ATOL, threads=2,
                observables=False,
            ).y  # fmt: skip
            note("local", time.perf_counter() - t0, time.process_time() - c0)
            for chunk, profiler in plan:
                client.run(_profiler, on=profiler)
                t0, c0 = time.perf_counter(), cluster_cpu(client)
                y = integrate_ensemble(
                    vf, x0, [0.0, T_END], params=a, rtol=RTOL, atol=ATOL, observables=False,
                    client=client, chunk=chunk,
                ).y  # fmt: skip
                name = f"cluster-{chunk}" + ("-profiler" if profiler else "")
                note(name, time.perf_counter() - t0, cluster_cpu(client) - c0)
                if not np.array_equal(y, ref):
                    raise AssertionError(f"{name}: not the local result bit for bit")
                del y
            client.run(_profiler, on=False)
        per_chunk = {}
        for chunk in chunks:  # one output time: no steps, only moving chunks through
            best = min(
                _timed(lambda c=chunk: integrate_ensemble(
                    vf, x0, [0.0], params=a, observables=False, client=client, chunk=c))
                for _ in range(3)
            )  # fmt: skip
            per_chunk[chunk] = best / -(-lanes // chunk)
            print(f"per-chunk overhead at chunk {chunk}: {per_chunk[chunk] * 1e3:.2f} ms")
    med = {k: [statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)]
           for k, v in runs.items()}  # fmt: skip
    wall0, cpu0 = med["local"]
    summary = {
        k: {"wall_s": s, "cpu_s": c, "overhead": s / wall0 - 1, "cpu_overhead": c / cpu0 - 1}
        for k, (s, c) in med.items()
    }
    for k, v in summary.items():
        print(f"{k:22s} wall {v['overhead']:+7.1%}  CPU {v['cpu_overhead']:+7.1%}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "system": "veselova", "n": N, "lanes": lanes, "method": "dop853", "rtol": RTOL,
        "t_end": T_END, "reps": reps, "workers": 2, "local_threads": 2, "runs": runs,
        "median": summary, "per_chunk_overhead_s": per_chunk,
    }  # fmt: skip
    (RESULTS / "distributed.json").write_text(json.dumps(out, indent=1))
    return 0


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
