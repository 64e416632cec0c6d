"""Ensembles on Dask against one process (issue 13): overhead of the distributed path.

The problem: Veselova n = 8 (the structured O(n) kernel of :mod:`bench_large_n`,
``a_i = 1 + i/n``), t = 10, DOP853 at rtol 1e-10, states only (``observables=False``). Two
ways of running the same trajectories on the same machine:

- ``local``: one process, ``nhfast.integrate(..., threads=2)``;
- ``cluster``: a ``LocalCluster`` of 2 single-threaded worker processes (with the slower
  housekeeping of ``nhfast run --workers``, :data:`nhfast.cli.QUIET_DASK`),
  :func:`nhfast.distributed.integrate_ensemble` with ``chunk`` trajectories per task, the
  result gathered into the client's memory (the same arrays, bit for bit).

``overhead`` in ``extra_info`` is ``cluster / local - 1`` of the wall times (the issue's goal:
under 15 %), ``cpu_overhead`` the same for CPU seconds (client, scheduler and workers against
the local process: steadier than wall time on a loaded machine); ``per_chunk_overhead_s`` is
the wall time of a run with one output time (no integration steps) divided by its number of
chunks: scheduling, (de)serialisation, input checks and gathering of one task.

By default (CI, ``pytest benchmarks --benchmark-disable``) 512 trajectories run in chunks of
64 and 256. ``NHFAST_BENCH_DISTRIBUTED_LANES=N`` sets the number of trajectories and
``NHFAST_BENCH_FULL=1`` runs 10^6 with chunks of 10^4, 5 * 10^4 and 2.5 * 10^5 (about a
minute of CPU per run: some 50 us per trajectory).
"""

from __future__ import annotations

import logging
import os
import time

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
    from nhfast.systems.veselova_body import veselova_structured

    vf = veselova_structured(N)
    vf.compile(())
    return vf, inertia(N), initial_states(N, LANES, seed=N)


@pytest.fixture(scope="module")
def client():
    import dask

    from nhfast.cli import QUIET_DASK  # the housekeeping intervals of `nhfast run --workers`

    with dask.config.set(QUIET_DASK), distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
        silence_logs=logging.ERROR,
    ) as cluster, distributed.Client(cluster) as c:  # fmt: skip
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

    def cluster_cpu() -> float:
        """CPU seconds so far of the workers, the scheduler and this client."""
        workers = client.run(time.process_time)
        return (
            sum(workers.values())
            + client.run_on_scheduler(time.process_time)
            + (time.process_time())
        )

    def run():
        t0, c0 = time.perf_counter(), cluster_cpu()
        out["r"] = integrate_ensemble(
            vf, x0, [0.0, T_END], params=a, rtol=RTOL, atol=ATOL, observables=False,
            client=client, chunk=chunk,
        )  # fmt: skip
        out["seconds"], out["cpu"] = time.perf_counter() - t0, cluster_cpu() - c0

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
