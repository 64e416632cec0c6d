"""Large-n Veselova side by side: nhfast against SciPy, heyoka.py, numba and hand-written C.

The same work for every tool (issue 6, item 3): the embedded Veselova system on SO(n) (states
``(gamma, m)``, ``a_i = 1 + i/n``, :mod:`anchors.problem`), 1 and 10^4 trajectories, t = 10,
DOP853 at rtol 1e-10 (heyoka: tol 1e-10), plus fixed-step schemes (RK4 everywhere, nhfast's
Gauss-Legendre for the geometric comparison) and the cost of one right-hand side. Each
benchmark stores in ``extra_info``: system, n, lanes, tool, method, rtol, t_end, threads,
error (max abs final-state error against a reference at rtol 1e-13, itself checked against
the hand-written C DOP853) and rhs_evals where known.

By default (CI, ``pytest benchmarks --benchmark-disable``) only n = 4 with 1 and 64
trajectories runs; ``NHFAST_BENCH_FULL=1`` runs n in {4, 8, 16, 32} with 1 and 10^4
trajectories (about 15 minutes on 2 cores, mostly SciPy). Tools that are not installed
(heyoka, numba: the ``bench`` extra) are skipped.
"""

from __future__ import annotations

import os
import time
import tracemalloc

import numpy as np
import pytest
from anchors.problem import energy, inertia, initial_states, rhs_numpy

import nhfast as nh
from nhfast._abi import SYMBOL

FULL = os.environ.get("NHFAST_BENCH_FULL") == "1"
NS = [4, 8, 16, 32] if FULL else [4]
LANES = [1, 10_000] if FULL else [1, 64]
T_END = 10.0
RTOL = 1e-10
ATOL = 1e-12
REF_TOL = (1e-13, 1e-15)
H_FIXED = 0.01
ROUNDS = {1: 20, 64: 5, 10_000: 3}
SCIPY_MAX_LANES = 500


def nhfast_system(n: int) -> tuple[nh.VectorField, str]:
    """The structured O(n) Veselova kernel when it exists and agrees, else the embedded one."""
    from nhfast.systems import veselova

    try:
        from nhfast.systems import veselova
    except ImportError:
        return veselova(n, form="embedded"), "veselova_embedded"
    vf = veselova(n, form="structured")
    a = inertia(n)
    x = initial_states(n, 8, seed=99)
    if vf.n_state == 2 * n and np.allclose(
        vf.evaluate("rhs", x, params=a), rhs_numpy(x, a), rtol=1e-13, atol=1e-14
    ):
        return vf, "veselova_structured"
    return veselova(n, form="embedded"), "veselova_embedded"


class Problem:
    """One (n, lanes) case: system, parameters, initial states, reference final states."""

    def __init__(self, n: int, lanes: int, hand):
        self.n, self.lanes = n, lanes
        self.a = inertia(n)
        self.x0 = initial_states(n, lanes, seed=n)
        self.vf, self.formulation = nhfast_system(n)
        t0 = time.perf_counter()
        self.vf.compile(("observables",))
        self.build_seconds = time.perf_counter() - t0
        # the generated kernel against the independent NumPy transcription, on the constraint
        # manifold (|gamma| = 1, gamma . m = 0; speeds 0.5-2): off it the engine's field and the
        # paper's transcription are different extensions (both keep |gamma|, gamma . m exactly)
        x = initial_states(n, 16, seed=7)
        x[:, n:] *= np.linspace(0.5, 2.0, 16)[:, None]
        np.testing.assert_allclose(
            self.vf.evaluate("rhs", x, params=self.a), rhs_numpy(x, self.a), rtol=1e-12, atol=1e-14
        )
        ref = nh.integrate(
            self.vf, self.x0, [0.0, T_END], params=self.a, rtol=REF_TOL[0], atol=REF_TOL[1],
            observables=False,
        )  # fmt: skip
        self.ref = ref.y[:, -1]
        # the reference against a second, independent DOP853 (hand-written C) at the same tol
        check, _ = hand.dop853(self.x0[:64], self.a, T_END, *REF_TOL)
        err = np.max(np.abs(check - self.ref[:64]))
        assert err < 1e-11, f"reference and hand-written C disagree by {err:.3g}"

    def error(self, y: np.ndarray) -> float:
        """Max abs final-state error against the reference."""
        return float(np.max(np.abs(y - self.ref)))


class Subset:
    """The first ``k`` trajectories of a :class:`Problem` (for tools timed on a subset)."""

    def __init__(self, p: Problem, k: int):
        self.n, self.lanes, self.ref = p.n, k, p.ref[:k]

    def error(self, y: np.ndarray) -> float:
        return float(np.max(np.abs(y - self.ref)))


_PROBLEMS: dict[tuple[int, int], Problem] = {}


@pytest.fixture(scope="session")
def hand():
    from anchors.hand_c import HandC

    return HandC()


@pytest.fixture(params=NS, ids=lambda n: f"n{n}")
def n(request):
    return request.param


@pytest.fixture(params=LANES, ids=lambda k: f"lanes{k}")
def lanes(request):
    return request.param


@pytest.fixture
def problem(n, lanes, hand) -> Problem:
    key = (n, lanes)
    if key not in _PROBLEMS:
        _PROBLEMS[key] = Problem(n, lanes, hand)
    return _PROBLEMS[key]


def measure(benchmark, run, out: dict, rounds: int, warmup_rounds: int = 1) -> None:
    """``benchmark.pedantic(run)``, also keeping the least process (CPU) time of the rounds in
    ``out["cpu_seconds"]``: on a loaded machine the CPU time of a one-thread run is a steadier
    measure of its work than wall time (for threads > 1 it is the sum over threads)."""
    cpu: list[float] = []

    def timed():
        c0 = time.process_time()
        run()
        cpu.append(time.process_time() - c0)

    benchmark.pedantic(timed, rounds=rounds, iterations=1, warmup_rounds=warmup_rounds)
    out["cpu_seconds"] = min(cpu[warmup_rounds:] or cpu)


def record(
    benchmark, out: dict, p, tool: str, method: str, rtol, threads: int, y, rhs_evals, **kw
) -> None:
    """Fill ``extra_info`` with the fields the dashboard reads."""
    benchmark.extra_info.update(
        system="veselova",
        n=p.n,
        lanes=p.lanes,
        tool=tool,
        method=method,
        rtol=rtol,
        t_end=T_END,
        threads=threads,
        error=p.error(y),
        rhs_evals=None if rhs_evals is None else int(rhs_evals),
        loadavg=os.getloadavg()[0],
        cpu_seconds=out.get("cpu_seconds"),
        **kw,
    )


def rounds(lanes: int) -> int:
    return ROUNDS.get(lanes, 3)


# --------------------------------------------------------------------- DOP853 ----


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rtol", [1e-10, 1e-12])
def test_dop853_nhfast(benchmark, problem, threads, rtol):
    p = problem
    if threads == 2 and p.lanes == 1:
        pytest.skip("one trajectory runs on one thread")
    benchmark.group = f"dop853-n{p.n}-lanes{p.lanes}"
    out = {}

    def run():
        out["r"] = nh.integrate(
            p.vf, p.x0, [0.0, T_END], params=p.a, rtol=rtol, atol=rtol * ATOL / RTOL,
            threads=threads, observables=False,
        )  # fmt: skip

    measure(benchmark, run, out, rounds(p.lanes))
    r = out["r"]
    record(
        benchmark, out, p, "nhfast", "dop853", rtol, threads, r.y[:, -1],
        r.stats["rhs_evals"].sum(), formulation=p.formulation, build_seconds=p.build_seconds,
        bytes_per_lane=(r.y.nbytes + p.x0.nbytes + r.status.nbytes + 32) / p.lanes,
    )  # fmt: skip


@pytest.mark.parametrize("mode", ["heyoka-batch", "heyoka-scalar"])
def test_taylor_heyoka(benchmark, problem, mode):
    pytest.importorskip("heyoka")
    from anchors import heyoka_veselova as hv

    p = problem
    x = initial_states(p.n, 4, seed=5)
    np.testing.assert_allclose(hv.rhs_rows(p.n, x, p.a), rhs_numpy(x, p.a), rtol=1e-12, atol=1e-14)
    if mode == "heyoka-batch":
        anchor, go = hv.batch_integrator(p.n, RTOL), hv.run_batch
    else:
        anchor, go = hv.scalar_integrator(p.n, RTOL), hv.run_scalar
    benchmark.group = f"dop853-n{p.n}-lanes{p.lanes}"
    out = {}

    def run():
        out["r"] = go(anchor, p.x0, p.a, T_END)

    measure(benchmark, run, out, rounds(p.lanes))
    y, steps = out["r"]
    record(
        benchmark, out, p, mode, "taylor", RTOL, 1, y, None, taylor_steps=steps,
        compile_seconds=anchor.compile_seconds, batch_size=anchor.batch_size,
    )  # fmt: skip


def test_dop853_numba(benchmark, problem):
    pytest.importorskip("numba")
    from anchors import numba_veselova as nv

    p = problem
    t0 = time.perf_counter()
    nv.warm_up()
    jit = time.perf_counter() - t0
    x = initial_states(p.n, 4, seed=5)
    np.testing.assert_allclose(nv.rhs_rows(p.a, x), rhs_numpy(x, p.a), rtol=1e-12, atol=1e-14)
    benchmark.group = f"dop853-n{p.n}-lanes{p.lanes}"
    out = {}

    def run():
        out["r"] = nv.integrate_dop853(p.x0, p.a, T_END, RTOL, ATOL)

    measure(benchmark, run, out, rounds(p.lanes))
    y, ev = out["r"]
    record(benchmark, out, p, "numba", "dop853", RTOL, 1, y, ev, jit_seconds=jit)


def test_dop853_hand_c(benchmark, problem, hand):
    p = problem
    x = initial_states(p.n, 4, seed=5)
    np.testing.assert_allclose(hand.rhs(x, p.a), rhs_numpy(x, p.a), rtol=1e-12, atol=1e-14)
    benchmark.group = f"dop853-n{p.n}-lanes{p.lanes}"
    out = {}

    def run():
        out["r"] = hand.dop853(p.x0, p.a, T_END, RTOL, ATOL)

    measure(benchmark, run, out, rounds(p.lanes))
    y, ev = out["r"]
    record(benchmark, out, p, "hand-c", "dop853", RTOL, 1, y, ev)


# ----------------------------------------------------------------- fixed step ----


@pytest.mark.parametrize("method", ["rk4", "gauss4", "gauss6"])
def test_fixed_nhfast(benchmark, problem, method):
    p = problem
    benchmark.group = f"fixed-n{p.n}-lanes{p.lanes}"
    h = H_FIXED if method == "rk4" else 10 * H_FIXED
    out = {}

    def run():
        out["r"] = nh.integrate(
            p.vf, p.x0, [0.0, T_END], method=method, params=p.a, h=h, observables=False
        )

    measure(benchmark, run, out, rounds(p.lanes))
    r = out["r"]
    y = r.y[:, -1]
    drift = float(np.max(np.abs(energy(y, p.a) - energy(p.x0, p.a))))
    record(
        benchmark, out, p, "nhfast", method, None, 1, y, r.stats["rhs_evals"].sum(), h=h,
        energy_error=drift,
    )  # fmt: skip


def test_fixed_numba(benchmark, problem):
    pytest.importorskip("numba")
    from anchors import numba_veselova as nv

    p = problem
    nv.warm_up()
    benchmark.group = f"fixed-n{p.n}-lanes{p.lanes}"
    nsteps = round(T_END / H_FIXED)
    out = {}

    def run():
        out["r"] = nv.integrate_rk4(p.x0, p.a, H_FIXED, nsteps)

    measure(benchmark, run, out, rounds(p.lanes))
    y, ev = out["r"]
    drift = float(np.max(np.abs(energy(y, p.a) - energy(p.x0, p.a))))
    record(benchmark, out, p, "numba", "rk4", None, 1, y, ev, h=H_FIXED, energy_error=drift)


def test_fixed_hand_c(benchmark, problem, hand):
    p = problem
    benchmark.group = f"fixed-n{p.n}-lanes{p.lanes}"
    nsteps = round(T_END / H_FIXED)
    out = {}

    def run():
        out["r"] = hand.rk4(p.x0, p.a, H_FIXED, nsteps)

    measure(benchmark, run, out, rounds(p.lanes))
    y, ev = out["r"]
    drift = float(np.max(np.abs(energy(y, p.a) - energy(p.x0, p.a))))
    record(benchmark, out, p, "hand-c", "rk4", None, 1, y, ev, h=H_FIXED, energy_error=drift)


# ------------------------------------------------------------ cost of one RHS ----

KERNEL_LANES = 64  # one block of the integrators, in cache
KERNEL_EVALS = 2_000_000  # lane-evaluations per round


@pytest.mark.parametrize("tool", ["nhfast", "hand-c"])
def test_rhs_kernel(benchmark, n, hand, tool):
    """One right-hand side on a block of 64 lanes, called in a C loop (no Python per call)."""
    vf, formulation = nhfast_system(n)
    cs = vf.compile(())
    a = inertia(n)
    xs = np.ascontiguousarray(initial_states(n, KERNEL_LANES, seed=3).T)
    par = np.ascontiguousarray(np.repeat(a[:, None], KERNEL_LANES, axis=1))
    if tool == "nhfast":
        address, ctx, keep = cs._keepalive.address(SYMBOL["rhs"]), None, None
    else:
        address = hand.rhs_abi_address
        ctx, keep = hand.abi_context(a)
    reps = max(1, KERNEL_EVALS // KERNEL_LANES // n)
    f = hand.repeat_kernel(address, ctx, xs, par, 1)
    np.testing.assert_allclose(f.T, rhs_numpy(xs.T, a), rtol=1e-12, atol=1e-14)
    benchmark.group = f"rhs-n{n}"
    benchmark.pedantic(
        hand.repeat_kernel, args=(address, ctx, xs, par, reps), rounds=7, iterations=1,
        warmup_rounds=1,
    )  # fmt: skip
    del keep
    evals = reps * KERNEL_LANES
    benchmark.extra_info.update(
        system="veselova", n=n, lanes=KERNEL_LANES, tool=tool, method="rhs", rtol=None,
        t_end=None, threads=1, error=float(np.max(np.abs(f.T - rhs_numpy(xs.T, a)))),
        rhs_evals=evals, formulation=formulation if tool == "nhfast" else "hand-written",
        flops_per_rhs=16 * n + 8,
    )  # fmt: skip


def test_memory_per_lane(benchmark):
    """Peak Python-side memory (tracemalloc: NumPy buffers) of a DOP853 run, per lane."""
    n, lanes = 8, 20_000 if FULL else 2_000
    vf, formulation = nhfast_system(n)
    a = inertia(n)
    x0 = initial_states(n, lanes, seed=1)
    vf.compile(())
    benchmark.group = "memory"
    out = {}

    def run():
        tracemalloc.start()
        r = nh.integrate(vf, x0, [0.0, 1.0], params=a, observables=False)
        out["peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        out["r"] = r

    benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(
        system="veselova", n=n, lanes=lanes, tool="nhfast", method="dop853", rtol=1e-10,
        t_end=1.0, threads=1, error=None, rhs_evals=int(out["r"].stats["rhs_evals"].sum()),
        bytes_per_lane=out["peak"] / lanes, formulation=formulation,
    )  # fmt: skip


# ---------------------------------------------------------------------- SciPy ----


def test_dop853_scipy(benchmark, problem):
    """Last in the file: the slowest tool (about 10 ms per trajectory)."""
    from anchors import scipy_veselova as sv

    p = problem
    f, seconds = sv.lambdified_rhs(p.vf)
    x = initial_states(p.n, 4, seed=5)
    np.testing.assert_allclose(
        np.array([f(0.0, row, p.a) for row in x]), rhs_numpy(x, p.a), rtol=1e-12, atol=1e-14
    )
    benchmark.group = f"dop853-n{p.n}-lanes{p.lanes}"
    # SciPy integrates one trajectory per call, so its time is linear in the lanes: for 10^4
    # trajectories the first SCIPY_MAX_LANES are timed (extra_info: lanes, per_lane_seconds)
    k = min(p.lanes, SCIPY_MAX_LANES)
    out = {"sec": []}

    def run():
        t0 = time.perf_counter()
        out["r"] = sv.integrate(f, p.x0[:k], p.a, T_END, RTOL, ATOL)
        out["sec"].append(time.perf_counter() - t0)

    many = k > 100
    measure(benchmark, run, out, 1 if many else 3, warmup_rounds=0 if many else 1)
    y, nfev = out["r"]
    sub = Subset(p, k)
    record(
        benchmark, out, sub, "scipy", "dop853", RTOL, 1, y, nfev, lambdify_seconds=seconds,
        batch_lanes=p.lanes, per_lane_seconds=min(out["sec"]) / k,
    )  # fmt: skip
