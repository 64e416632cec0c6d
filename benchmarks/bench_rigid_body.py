"""Rigid bodies on SO(n) from the matrix-level engine (issue 11): build time, rhs cost, ensembles.

The Veselova (LR) body ``nhfast.systems.rigid_bodies.rigid_body(n, inertia)``, states
``(gamma, m)``, three measurements:

* ``test_build_cold`` -- derive + generate + compile of the physical-inertia body
  (``I(Om) = J Om + Om J``) at n = 8, 16, 32, 64, each in a fresh Python process with an empty
  ``NHFAST_CACHE_DIR`` (SymPy's caches and nhfast's kernel cache both cold). ``extra_info``:
  ``derive_s`` (``rigid_body(n, "physical").vector_field()``: the SymPy derivation and its
  lowering to an indexed program), ``generate_s`` and ``compile_s`` (``CompiledSystem.timings``
  of ``vf.compile()``), ``total_s``, ``import_s`` (not in the total; the benchmark's own time
  is the whole child process), ``process_cpu_s`` (CPU seconds of the child and its compiler,
  imports included: the work, steadier than wall time on a shared machine).
* ``test_rhs_per_lane`` -- one right-hand side on 4096 lanes, called in a C loop (no Python
  per call): nhfast's generated kernel for the "physical" and "a-omega-a" (``A Om A``) inertias
  (Woodbury solve, ``O(n)``) at n = 8, 16, 32, 64 and for the "pairwise" inertia (one moment
  per pair ``(i, j)``, a dense per-lane solve) at n = 8, 16, 32; the hand-written C of the
  physical body (``anchors/hand_c/veselova_physical.c``, checked against the generated kernel
  to 1e-12 first) at the same ``n``; ``nhfast-looped``: the physical body's program rendered in
  the looped shape where the default (``n <= UNROLL_MAX_N``) is unrolled. Group
  ``rigid-rhs-<inertia>-n<n>``; ``extra_info``: ``rhs_evals`` (lane-evaluations per round),
  ``shape``.
* ``test_ensemble_physical`` (``-m slow``) -- 10^4 trajectories of the physical body at
  n = 32, DOP853 rtol 1e-10 (atol 1e-12), t = 10, one thread: time, relative energy drift,
  ``| |gamma|^2 - 1 |``, ``|gamma . m|`` over 11 output times, and the final-state error of the
  first 64 lanes against rtol 1e-13.

Run::

    pytest benchmarks/bench_rigid_body.py -m "not slow or slow" -p no:randomly \\
        --benchmark-json=benchmarks/results/rigid_body.json
    python benchmarks/bench_rigid_body.py benchmarks/results/rigid_body.json   # table, exponents

The second command prints the table (ns per lane, generated over hand-written ratios, stage
seconds) and the exponents ``p`` of ``cost ~ n^p`` from least-squares fits in log-log.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the anchors, as a script too
from anchors.problem import initial_states  # noqa: E402

NS = [8, 16, 32, 64]
NS_DENSE = [8, 16, 32]
LOOPED_NS = [8, 16]  # measured forced-looped (the default shape since UNROLL_MAX_N = 3)
BUILD_NS = [8, 16, 32, 64]
LANES = 4096
ROUNDS = 7
ROUND_SECONDS = 0.25  # one round: this long a C loop of calls on the same 4096 lanes
ENSEMBLE = dict(
    n=32,
    lanes=int(os.environ.get("NHFAST_BENCH_RIGID_LANES", 10_000)),
    t_end=10.0,
    rtol=1e-10,
    atol=1e-12,
)

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from nhfast import _jit
from nhfast.systems.rigid_bodies import rigid_body
t1 = time.perf_counter()
vf = rigid_body(int(sys.argv[1]), sys.argv[2]).vector_field()
t2 = time.perf_counter()
cs = vf.compile(())
t3 = time.perf_counter()
print(json.dumps(dict(
    import_s=t1 - t0, derive_s=t2 - t1, generate_s=cs.timings["generate"],
    compile_s=cs.timings["compile"], compile_call_s=t3 - t2, cache_hit=cs.cache_hit,
    generated=cs.generated, source_bytes=len(cs.source), compiler=" ".join(_jit.compiler_command()),
)))
"""


def cold_build(n: int, inertia: str = "physical") -> dict:
    """Derive, generate and compile in a fresh process with an empty kernel cache."""
    with tempfile.TemporaryDirectory(prefix="nhfast-rb-cold-") as tmp:
        env = dict(os.environ, NHFAST_CACHE_DIR=tmp)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, str(n), inertia],
            capture_output=True, text=True, cwd=tmp, env=env, check=False,
        )  # fmt: skip
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"cold build of n = {n} failed:\n{proc.stderr}")
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    rec["total_s"] = rec["derive_s"] + rec["generate_s"] + rec["compile_s"]
    # CPU seconds of the child and the compiler it ran, imports included: the work, steadier
    # than wall time on a shared machine
    rec["process_cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return rec


@pytest.mark.parametrize("n", BUILD_NS, ids=lambda n: f"n{n}")
def test_build_cold(benchmark, n):
    """One cold derive + generate + compile (one round: a second one would hit the cache)."""
    benchmark.group = "rigid-build"
    out = {}

    def run():
        out["rec"] = cold_build(n)

    benchmark.pedantic(run, rounds=1, iterations=1)
    rec = out["rec"]
    assert not rec["cache_hit"] and rec["generated"]
    benchmark.extra_info.update(
        system="veselova_physical", n=n, tool="nhfast", stage="derive+generate+compile",
        loadavg=os.getloadavg()[0], **rec,
    )  # fmt: skip


# ------------------------------------------------------------ cost of one RHS ----


@pytest.fixture(scope="session")
def hand():
    from anchors.hand_c.physical import HandPhysical

    return HandPhysical()


_SYSTEMS: dict[tuple[int, str], object] = {}


def compiled(n: int, inertia: str):
    """The compiled body (once per session; the kernel cache is the benchmarks' private one)."""
    from nhfast.systems.rigid_bodies import rigid_body

    key = (n, inertia)
    if key not in _SYSTEMS:
        vf = rigid_body(n, inertia).vector_field()
        _SYSTEMS[key] = (vf, vf.compile(()))
    return _SYSTEMS[key]


def lanes_soa(n: int, inertia: str, lanes: int = LANES) -> tuple[np.ndarray, np.ndarray]:
    """States ``xs[2n, lanes]`` (|gamma| in [0.5, 2], gamma . m = 0) and per-lane parameters."""
    from nhfast.systems.rigid_bodies import rigid_body_params

    rng = np.random.default_rng(1000 + n)
    x = initial_states(n, lanes, seed=n) * rng.uniform(0.5, 2.0, size=(lanes, 1))
    p = rigid_body_params(n, inertia, rng=rng)
    par = np.repeat(p[:, None], lanes, axis=1)
    return np.ascontiguousarray(x.T), np.ascontiguousarray(par)


def dense_check(xs: np.ndarray, par: np.ndarray, f: np.ndarray, inertia: str) -> float:
    """Relative difference of ``f`` to the dense ``O(n^4)`` route: ``Omega`` from
    :func:`~nhfast.systems.rigid_body_maps.angular_velocity`, ``gammadot = -Omega gamma``,
    ``mdot = -(gammadot . m) / r2 gamma`` (any inertia: ``[M, Omega] gamma + M gammadot =
    Omega m`` and ``P_gamma Omega m = 0`` on ``gamma . m = 0``)."""
    from nhfast.systems.rigid_body_maps import angular_velocity

    n = xs.shape[0] // 2
    g, m = xs[:n].T, xs[n:].T
    om = angular_velocity(g, m, par[:, 0], inertia)
    gdot = -np.einsum("lij,lj->li", om, g)
    r2 = np.sum(g * g, axis=1, keepdims=True)
    mdot = -np.sum(gdot * m, axis=1, keepdims=True) / r2 * g
    ref = np.concatenate([gdot, mdot], axis=1).T
    return float(np.max(np.abs(f - ref)) / np.max(np.abs(ref)))


CASES = (
    [(n, "physical", "hand-c") for n in NS]
    + [(n, "physical", "nhfast") for n in NS]
    + [(n, "physical", "nhfast-looped") for n in LOOPED_NS]
    + [(n, "a-omega-a", "nhfast") for n in NS]
    + [(n, "pairwise", "nhfast") for n in NS_DENSE]
)


@pytest.mark.parametrize(
    ("n", "inertia", "tool"), CASES, ids=lambda v: f"n{v}" if isinstance(v, int) else v
)
def test_rhs_per_lane(benchmark, hand, n, inertia, tool):
    """One right-hand side on 4096 lanes, called ``reps`` times in a C loop."""
    from nhfast import _jit
    from nhfast._abi import SYMBOL
    from nhfast.codegen.structured import generate_structured_c

    vf, cs = compiled(n, inertia)
    xs, par = lanes_soa(n, inertia)
    engine = cs._keepalive.address(SYMBOL["rhs"])
    f_engine = hand.repeat_kernel(engine, None, xs, par, 1)
    lib = None
    if tool == "nhfast-looped":  # the looped shape where the default is unrolled
        if "Structured kernels (unrolled)" not in cs.source:
            pytest.skip(f"the default shape at n = {n} is looped already")
        lib, _ = _jit.build(generate_structured_c(vf.program, unroll=False))
        engine = lib.address(SYMBOL["rhs"])
        f_looped = hand.repeat_kernel(engine, None, xs, par, 1)
        np.testing.assert_allclose(f_looped, f_engine, rtol=1e-12, atol=1e-14)
    if tool == "hand-c":
        ctx, keep = hand.abi_context(n)
        address = hand.rhs_abi_address
        f = hand.repeat_kernel(address, ctx, xs, par, 1)
        # the anchor and the generated kernel agree before either is timed
        err = float(np.max(np.abs(f - f_engine)) / np.max(np.abs(f_engine)))
        assert err < 1e-12, f"hand-written C and generated kernel differ by {err:.3g}"
    else:
        ctx, keep, address = None, None, engine
        err = dense_check(xs[:, :16], par[:, :16], f_engine[:, :16], inertia)
        assert err < 1e-11, f"generated kernel and dense NumPy route differ by {err:.3g}"
    t0 = time.perf_counter()
    hand.repeat_kernel(address, ctx, xs, par, 3)
    reps = max(1, round(ROUND_SECONDS * 3 / (time.perf_counter() - t0)))
    if tool == "hand-c":
        shape = "hand-written"
    elif tool == "nhfast-looped":
        shape = "looped (forced)"
    else:
        shape = "unrolled" if "Structured kernels (unrolled)" in cs.source else "looped"
    benchmark.group = f"rigid-rhs-{inertia}-n{n}"
    cpu: list[float] = []

    def run():
        c0 = time.process_time()
        hand.repeat_kernel(address, ctx, xs, par, reps)
        cpu.append(time.process_time() - c0)

    benchmark.pedantic(run, rounds=ROUNDS, iterations=1, warmup_rounds=1)
    del keep, lib
    benchmark.extra_info.update(
        system=f"veselova_{inertia}", inertia=inertia, n=n, lanes=LANES, tool=tool,
        method="rhs", rtol=None, t_end=None, threads=1, rhs_evals=reps * LANES,
        relative_difference_to_generated=err, cpu_seconds=min(cpu[1:] or cpu),
        formulation="hand-written" if tool == "hand-c" else "rigid_body engine",
        shape=shape,
        loadavg=os.getloadavg()[0],
    )  # fmt: skip


# ------------------------------------------------------------------- ensemble ----


@pytest.mark.slow
def test_ensemble_physical(benchmark):
    """10^4 trajectories of the physical body at n = 32: DOP853 rtol 1e-10, t = 10."""
    import nhfast as nh
    from nhfast.systems.rigid_bodies import rigid_body_params

    n, lanes, t_end = ENSEMBLE["n"], ENSEMBLE["lanes"], ENSEMBLE["t_end"]
    vf, _ = compiled(n, "physical")
    j = rigid_body_params(n, "physical")
    x0 = initial_states(n, lanes, seed=n)
    t_eval = np.linspace(0.0, t_end, 11)
    benchmark.group = f"rigid-dop853-n{n}-lanes{lanes}"
    out = {}

    def run():
        c0 = time.process_time()
        out["r"] = nh.integrate(
            vf, x0, t_eval, params=j, rtol=ENSEMBLE["rtol"], atol=ENSEMBLE["atol"]
        )
        out["cpu"] = time.process_time() - c0

    benchmark.pedantic(run, rounds=1, iterations=1, warmup_rounds=0)
    r = out["r"]
    assert np.all(r.status == 0)
    obs = r.observables
    e0 = obs["energy"][:, :1]
    ref = nh.integrate(vf, x0[:64], [0.0, t_end], params=j, rtol=1e-13, atol=1e-15)
    benchmark.extra_info.update(
        system="veselova_physical", n=n, lanes=lanes, tool="nhfast", method="dop853",
        rtol=ENSEMBLE["rtol"], atol=ENSEMBLE["atol"], t_end=t_end, threads=1,
        cpu_seconds=out["cpu"], rhs_evals=int(r.stats["rhs_evals"].sum()),
        energy_drift=float(np.max(np.abs(obs["energy"] - e0) / e0)),
        gamma_norm_residual=float(np.max(np.abs(obs["gamma_norm"] - 1.0))),
        momentum_constraint_residual=float(np.max(np.abs(obs["momentum_constraint"]))),
        error=float(np.max(np.abs(r.y[:64, -1] - ref.y[:, -1]))), error_lanes=64,
        loadavg=os.getloadavg()[0],
    )  # fmt: skip


# -------------------------------------------------------------------- summary ----


def exponent(ns, values) -> float:
    """Least-squares slope of ``log values`` against ``log ns``."""
    return float(np.polyfit(np.log(ns), np.log(values), 1)[0])


def summarise(path: Path) -> str:
    """Table of a saved run: ns per lane, ratios, build stages, exponents, ensemble figures."""
    data = json.loads(Path(path).read_text())
    rhs: dict[tuple[str, str], dict[int, float]] = {}
    best: dict[tuple[str, str], dict[int, float]] = {}
    build, ens = [], []
    for b in data["benchmarks"]:
        x = b["extra_info"]
        if x.get("method") == "rhs":
            key = (x["tool"], x["inertia"])
            rhs.setdefault(key, {})[x["n"]] = 1e9 * b["stats"]["median"] / x["rhs_evals"]
            least = x.get("cpu_seconds") or b["stats"]["min"]
            best.setdefault(key, {})[x["n"]] = 1e9 * least / x["rhs_evals"]
        elif x.get("stage"):
            build.append(x)
        elif x.get("method") == "dop853":
            ens.append((b["stats"]["median"], x))
    cols = [
        ("physical", ("nhfast", "physical")),
        ("looped", ("nhfast-looped", "physical")),
        ("hand-c", ("hand-c", "physical")),
        ("a-omega-a", ("nhfast", "a-omega-a")),
        ("pairwise", ("nhfast", "pairwise")),
    ]

    def fmt(v, w=9, spec=".1f"):
        return f"{v:{w}{spec}}" if v is not None else f"{'-':>{w}}"

    lines = [
        f"rhs per lane (ns; median of {ROUNDS} rounds, 4096 lanes); ratio = physical / hand-c, "
        "looped/h = looped / hand-c; [the same from the least CPU time of a round]"
    ]
    lines.append(
        f"{'n':>4} " + " ".join(f"{c:>9}" for c, _ in cols) + f" {'ratio':>6} {'looped/h':>8}"
    )
    for n in NS:
        med = [rhs.get(k, {}).get(n) for _, k in cols]
        low = [best.get(k, {}).get(n) for _, k in cols]

        def ratio(v, i, j):
            return v[i] / v[j] if v[i] and v[j] else None

        lines.append(
            f"{n:4d} " + " ".join(fmt(v) for v in med)
            + f" {fmt(ratio(med, 0, 2), 6, '.2f')} {fmt(ratio(med, 1, 2), 8, '.2f')}"
            + f"  [{fmt(ratio(low, 0, 2), 4, '.2f')} {fmt(ratio(low, 1, 2), 4, '.2f')}]"
        )  # fmt: skip
    looped = rhs.get(("nhfast-looped", "physical"), {})
    if looped:  # the looped shape throughout: forced where the default unrolls
        rhs[("nhfast", "physical, looped")] = {
            n: looped.get(n, v) for n, v in rhs.get(("nhfast", "physical"), {}).items()
        }
    lines.append("exponents p of ns/lane ~ n^p (log-log least squares):")
    for key, vals in sorted(rhs.items()):
        ns = sorted(vals)
        if len(ns) >= 2:
            whole = exponent(ns, [vals[k] for k in ns])
            tail = exponent(ns[-3:], [vals[k] for k in ns[-3:]])
            lines.append(
                f"  {key[0]:13s} {key[1]:17s} n = {ns}: p = {whole:.2f} (last three n: {tail:.2f})"
            )
    if build:
        lines.append(
            "cold build, physical (wall s): n, derive, generate, compile, total, source bytes; "
            "CPU s of the whole child process (imports and compiler included)"
        )
        for x in sorted(build, key=lambda x: x["n"]):
            lines.append(
                f"  {x['n']:3d} {x['derive_s']:7.2f} {x['generate_s']:7.2f} {x['compile_s']:7.2f}"
                f" {x['total_s']:7.2f} {x['source_bytes']:8d}; {x.get('process_cpu_s', 0):7.2f}"
            )
    for median, x in ens:
        lines.append(
            f"ensemble n = {x['n']}, {x['lanes']} lanes, DOP853 rtol {x['rtol']:g}, t = "
            f"{x['t_end']:g}: {median:.2f} s wall ({x['cpu_seconds']:.2f} s CPU), "
            f"{x['rhs_evals'] / x['lanes']:.0f} rhs per lane, energy drift "
            f"{x['energy_drift']:.2e}, ||gamma|^2 - 1| {x['gamma_norm_residual']:.2e}, "
            f"|gamma.m| {x['momentum_constraint_residual']:.2e}, error (64 lanes vs rtol "
            f"1e-13) {x['error']:.2e}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    default = Path(__file__).resolve().parent / "results" / "rigid_body.json"
    print(summarise(Path(sys.argv[1]) if len(sys.argv) > 1 else default))
