"""Kernel evaluations per second and trajectories per second, next to SciPy, in one run.

Groups pair nhfast with ``scipy.integrate.solve_ivp`` doing the same work (DOP853, rtol 1e-10,
atol 1e-12, t in [0, 10], 11 outputs), so the ratio is visible in one table. Each benchmark
stores its throughput in ``extra_info`` (shown by ``benchmarks/dashboard.py``).
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import solve_ivp

import nhfast as nh

T_EVAL = np.linspace(0.0, 10.0, 11)
TOL = dict(rtol=1e-10, atol=1e-12)


def initial_states(vf: nh.VectorField, lanes: int, seed: int = 0) -> np.ndarray:
    """Bounded-energy initial states (Henon-Heiles below its escape energy 1/6)."""
    rng = np.random.default_rng(seed)
    return rng.uniform(-0.15, 0.15, size=(lanes, vf.n_state))


@pytest.mark.parametrize("lanes", [1, 1000, 100_000])
def test_rhs_evaluations(benchmark, system, lanes):
    """Kernel evaluations through ``CompiledSystem.evaluate`` (row-major in and out, so the
    figure includes the layout conversion; the rate inside integration is in ``traj-*``)."""
    name, vf, par = system
    benchmark.group = f"rhs-{name}-{lanes}"
    cs = vf.compile(("observables",))
    x = initial_states(vf, lanes)
    reps = max(1, 100_000 // lanes)

    def run():
        for _ in range(reps):
            cs.evaluate("rhs", x, params=par)

    benchmark.pedantic(run, rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(
        tool="nhfast", n=vf.n_state, lanes=lanes, work=lanes * reps, unit="rhs/s"
    )


@pytest.mark.parametrize("lanes", [1, 1000, 100_000])
def test_rhs_evaluations_numpy_lambdify(benchmark, system, lanes):
    """The same evaluations through sympy.lambdify on NumPy arrays (vectorised over lanes)."""
    name, vf, par = system
    benchmark.group = f"rhs-{name}-{lanes}"
    f = sp.lambdify([vf.states, vf.params], vf.rhs, modules="numpy", cse=True)
    x = initial_states(vf, lanes).T.copy()
    par = [] if par is None else list(par)
    reps = max(1, 100_000 // lanes)

    def run():
        for _ in range(reps):
            f(x, par)

    benchmark.pedantic(run, rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(
        tool="numpy-lambdify", n=vf.n_state, lanes=lanes, work=lanes * reps, unit="rhs/s"
    )


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("lanes", [1, 1000, 100_000])
def test_trajectories_nhfast(benchmark, system, lanes, threads):
    name, vf, par = system
    benchmark.group = f"traj-{name}-{lanes}"
    x0 = initial_states(vf, lanes)
    res = {}

    def run():
        res["r"] = nh.integrate(
            vf, x0, T_EVAL, method="dop853", params=par, threads=threads, observables=False, **TOL
        )

    benchmark.pedantic(run, rounds=3 if lanes > 1000 else 5, iterations=1, warmup_rounds=1)
    r = res["r"]
    benchmark.extra_info.update(
        tool="nhfast", n=vf.n_state, lanes=lanes, threads=threads, work=lanes, unit="traj/s",
        rhs_evals=int(r.stats["rhs_evals"].sum()),
    )  # fmt: skip


@pytest.mark.parametrize("lanes", [1, 1000, 100_000])
def test_trajectories_scipy(benchmark, system, lanes):
    """solve_ivp one trajectory at a time (a lambdified RHS); timed on at most 20 trajectories."""
    name, vf, par = system
    benchmark.group = f"traj-{name}-{lanes}"
    f = sp.lambdify([vf.states, vf.params], vf.rhs, modules="math", cse=True)
    k = min(lanes, 20)
    x0 = initial_states(vf, lanes)[:k]
    par = [] if par is None else list(par)

    def rhs(_t, y):
        return f(y, par)

    def run():
        for i in range(k):
            solve_ivp(rhs, (0, 10), x0[i], method="DOP853", t_eval=T_EVAL, **TOL)

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info.update(
        tool="scipy", n=vf.n_state, lanes=lanes, timed_lanes=k, work=k, unit="traj/s"
    )


@pytest.mark.parametrize("lanes", [1000])
def test_trajectories_scipy_vectorised_batch(benchmark, system, lanes):
    """solve_ivp on the whole batch as one big system (one shared step size, NumPy RHS)."""
    name, vf, par = system
    benchmark.group = f"traj-{name}-{lanes}"
    f = sp.lambdify([vf.states, vf.params], vf.rhs, modules="numpy", cse=True)
    n = vf.n_state
    x0 = initial_states(vf, lanes).T.reshape(-1)
    par = [] if par is None else list(par)

    def rhs(_t, y):
        return np.concatenate([np.broadcast_to(v, (lanes,)) for v in f(y.reshape(n, lanes), par)])

    def run():
        solve_ivp(rhs, (0, 10), x0, method="DOP853", t_eval=T_EVAL, **TOL)

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info.update(
        tool="scipy-batch", n=vf.n_state, lanes=lanes, work=lanes, unit="traj/s"
    )


def test_agreement_with_scipy(system):
    """Not a timing: the benchmarked nhfast and SciPy runs compute the same trajectories."""
    _, vf, par = system
    x0 = initial_states(vf, 3)
    r = nh.integrate(vf, x0, T_EVAL, method="dop853", params=par, **TOL)
    f = sp.lambdify([vf.states, vf.params], vf.rhs, modules="math")
    pl = [] if par is None else list(par)
    for i in range(3):
        ref = solve_ivp(
            lambda _t, y: f(y, pl),
            (0, 10),
            x0[i],
            method="DOP853",
            t_eval=T_EVAL,
            rtol=1e-12,
            atol=1e-13,
        )
        assert np.max(np.abs(r.y[i] - ref.y.T)) < 1e-8
