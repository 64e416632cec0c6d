"""What ``nhfast run`` and ``nhfast check`` do: build an example, integrate, check, report.

:func:`run_example` builds a catalogue example, integrates a batch of trajectories in blocks
with a progress bar (:func:`integrate_in_chunks`; on a Dask cluster with ``client=``, through
:func:`nhfast.distributed.integrate_ensemble`), runs the checks of
:mod:`nhfast.experiments.checks` and collects everything, with timings, in a
:class:`~nhfast.analysis.result.Report`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from nhfast._progress import Heartbeat, Progress
from nhfast.analysis.drift import constraint_residual, energy_error
from nhfast.analysis.result import Check, Report
from nhfast.distributed import integrate_ensemble
from nhfast.errors import IntegrationWarning, UsageError
from nhfast.experiments.catalogue import STRUCTURED, STRUCTURED_N, get_example
from nhfast.experiments.checks import (
    DISCOVERY_SAMPLES,
    FORM,
    HAMILTONISATION_LANES,
    MEASURE_LANES,
    STRUCTURED_LANES,
    STRUCTURED_SAMPLES,
    discovery_check,
    hamiltonisation_checks,
    measure_checks,
    pointwise_measure_check,
    structured_hamiltonisation_check,
    structured_measure_checks,
    symbolic_checks,
)
from nhfast.integrate import ADAPTIVE, IntegrationResult, integrate
from nhfast.vectorfield import VectorField

__all__ = [
    "run_example",
]

#: The check families of :func:`run_example`.
CHECKS = ("drift", "symbolic", "measure", "hamiltonisation")
FIXED_STEP_H = 0.01  # default step of the fixed-step methods


def integrate_in_chunks(
    vf: VectorField,
    x0: np.ndarray,
    t_eval: np.ndarray,
    params: np.ndarray | None,
    method: str,
    threads: int,
    rtol: float,
    atol: float,
    h: float | None,
    progress: bool | None,
    client: Any = None,
    chunk: int | None = None,
) -> IntegrationResult:
    """``nhfast.integrate`` over blocks of lanes, with a progress bar; failed lanes are kept.

    The blocks hold at least ``64 * threads`` lanes and there are at most about ten, so the bar
    moves without slowing the run; failures are kept (``keep_failed``) for the report to count.
    With a Dask ``client`` the blocks (``chunk`` lanes each) are tasks on its cluster
    (:func:`nhfast.distributed.integrate_ensemble`, one thread per task) and the bar counts
    finished chunks; the result is the same bit for bit.
    """
    lanes = x0.shape[0]
    if client is not None:
        chunk = chunk or max(64, -(-lanes // 10))
        with Progress(-(-lanes // chunk), "integrating", enabled=progress) as bar:

            def advance(done: int, total: int) -> None:
                bar.update(done - bar.done)

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", IntegrationWarning)  # failures are reported
                return integrate_ensemble(
                    vf, x0, t_eval, method=method, rtol=rtol, atol=atol, params=params, h=h,
                    client=client, chunk=chunk, keep_failed=True, progress=advance,
                )  # fmt: skip
    chunk = chunk or max(64 * threads, -(-lanes // 10))
    starts = list(range(0, lanes, chunk))
    parts = []
    with Progress(len(starts), "integrating", enabled=progress) as bar:
        for s in starts:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", IntegrationWarning)  # failures are reported
                parts.append(
                    integrate(
                        vf,
                        x0[s : s + chunk],
                        t_eval,
                        method=method,
                        rtol=rtol,
                        atol=atol,
                        params=params,
                        h=h,
                        threads=threads,
                        keep_failed=True,
                    )
                )
            bar.update()
    return IntegrationResult.concatenate(parts)


class _Stages:
    """Wall-clock time of each stage of a run, announced through ``say``."""

    def __init__(self, say: Callable[[str], object]) -> None:
        self.say = say
        self.timings: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, label: str, message: str | None = None) -> Iterator[None]:
        if message:
            self.say(f"{message} ...")
        t0 = time.perf_counter()
        # a stage that is announced is never silent for long: a line every few seconds
        with Heartbeat(self.say, label) if message else contextlib.nullcontext():
            yield
        self.timings[label] = time.perf_counter() - t0
        if message:
            self.say(f"  done in {self.timings[label]:.1f} s")


def run_example(
    name: str,
    n: int | None = None,
    lanes: int = 256,
    t_end: float | None = None,
    method: str = "dop853",
    threads: int = 2,
    seed: int = 0,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    h: float | None = None,
    drift_tol: float = 1e-7,
    checks: Sequence[str] = CHECKS,
    n_times: int = 201,
    progress: bool | None = None,
    log: Callable[[str], object] | None = None,
    client: Any = None,
    chunk: int | None = None,
    inertia: str | None = None,
) -> tuple[Report, IntegrationResult | None]:
    """Build a catalogue example, integrate a batch, run the checks and collect a Report.

    Parameters
    ----------
    name : str
        Catalogue name (see ``nhfast examples`` / :data:`nhfast.experiments.EXAMPLES`).
    n : int, optional
        Size of sized examples (Veselova: SO(n)).
    lanes : int
        Number of trajectories.
    t_end : float, optional
        Final time; default the example's.
    method : str
        Integrator of the drift run (``nhfast.integrate``); the measure checks always use
        DOP853 because their threshold follows from ``rtol``.
    threads : int
        Threads of the integrator.
    seed : int
        Seed of the initial-state samplers.
    rtol, atol : float
        Tolerances of the adaptive methods.
    h : float, optional
        Step of the fixed-step methods (default ``FIXED_STEP_H`` = 0.01).
    drift_tol : float
        Threshold of the energy and constraint checks.
    checks : sequence of str
        Any of ``"drift"`` (energy and constraints along the batch), ``"symbolic"`` (measure
        and phi-simplicity of the Chaplygin reduction against the sources), ``"measure"``
        (symbolic measure test and the numerical test of every density claim of the example),
        ``"hamiltonisation"`` (symbolic phi-simplicity and the numerical Hamiltonisation
        checks in the Chaplygin chart).
    n_times : int
        Number of output times of the drift run.
    progress : bool, optional
        Draw a progress bar on stderr (default: when stderr is a terminal).
    log : callable, optional
        Receives one line per stage (e.g. ``print``).
    client : distributed.Client, optional
        Run the drift batch on this Dask cluster, one task per ``chunk`` trajectories (the
        other checks stay in this process).
    chunk : int, optional
        Trajectories per block or task (default: about a tenth of the batch, at least 64).
    inertia : str, optional
        Inertia operator of examples that have one (Veselova: ``"a-omega-a"``, ``"physical"``,
        ``"pairwise"``; default the example's first). Instances built in the structured form
        (Veselova with the ``A Om A`` inertia above ``n = STRUCTURED_N``, the other inertias always)
        run every check in its structured numerical form; each check's figure ``"form"`` says
        which form ran.

    Returns
    -------
    (Report, IntegrationResult or None)
        The integration of the drift run (None without ``"drift"``).

    Raises
    ------
    UsageError
        For an unknown check, or ``method="leapfrog"`` on a system that is not separable.
    """
    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise UsageError(f"checks: unknown {unknown}; choose from {', '.join(CHECKS)}")
    say = log or (lambda _msg: None)
    stage = _Stages(say)
    timings = stage.timings

    start_wall, start_cpu = time.perf_counter(), time.process_time()
    example = get_example(name)
    with stage("build", f"building {name}" + (f" (n = {n})" if n is not None else "")):
        inst = example.build(n, inertia)
    structured = inst.form == STRUCTURED
    timings["build (structured program)" if structured else "build (symbolic)"] = timings.pop(
        "build"
    )
    t_end = inst.t_end if t_end is None else t_end
    if method not in ADAPTIVE and h is None:
        h = FIXED_STEP_H
    vf = inst.vector_field
    if method == "leapfrog" and "drift" in checks and vf.separability() is not None:
        raise UsageError(
            f"--method: leapfrog needs a separable system; {name}: {vf.separability()}"
        )
    params = inst.params if inst.params.size else None
    with stage("initial states"):  # a structured sampler compiles the kernels (energy)
        x0 = inst.sample(lanes, seed)
    say(f"{inst.title}: {vf.n_state} states, {lanes} trajectories to t = {t_end:g}")
    settings: dict = {
        "example": name,
        "trajectories": lanes,
        "final time": t_end,
        "threads": threads,
        "seed": seed,
    }
    if example.inertias:
        settings["inertia"] = inertia or example.inertias[0]
    if structured:
        settings["form of the checks"] = (
            "structured numeric: only the structured field is built (the symbolic forms run "
            f"for the A Om A inertia with n <= {STRUCTURED_N})"
        )

    drift, sym_measure, sym_phi, num_measure, num_ham = [], [], [], [], []
    res = None
    if "drift" in checks:
        t0 = time.perf_counter()
        say("kernels: generating and compiling (or loading from the cache) ...")
        # a structured instance with a Liouville field integrates that one (its library serves
        # every check; the extra state ell is dropped from the result)
        field = inst.liouville if inst.liouville is not None else vf
        cs = field.compile(("observables",))
        timings["codegen + compile" if not cs.cache_hit else "kernels (cache hit)"] = (
            time.perf_counter() - t0
        )
        say(
            f"kernels: {cs.backend} backend, {'cache hit' if cs.cache_hit else 'compiled'} "
            f"in {time.perf_counter() - t0:.2f} s"
        )
        t_eval = np.linspace(0.0, t_end, n_times)
        with stage("integrate", f"integrating ({method})"):
            start = x0 if field is vf else np.concatenate([x0, np.zeros((lanes, 1))], axis=1)
            res = integrate_in_chunks(
                field,
                start,
                t_eval,
                params,
                method,
                threads,
                rtol,
                atol,
                h,
                progress,
                client,
                chunk,
            )
            if field is not vf:
                res = dataclasses.replace(res, y=res.y[..., : vf.n_state])
        drift = [energy_error(res, inst.energy, threshold=drift_tol)]
        if inst.constraints:
            drift.append(constraint_residual(res, inst.constraints, threshold=drift_tol))
        settings.update(
            {
                "method": method,
                "output times": n_times,
                "drift threshold": drift_tol,
                "failed trajectories": int(np.count_nonzero(res.failed)),
                "mean steps per trajectory": float(np.mean(res.stats["steps"])),
            }
        )
        if client is not None:
            settings["Dask workers"] = len(client.scheduler_info().get("workers", {}))
            settings["chunk"] = chunk or max(64, -(-lanes // 10))
        if method in ADAPTIVE:
            settings.update({"rtol": rtol, "atol": atol})
        else:
            # integrate splits each output interval into equal substeps of at most h
            dt = t_end / (n_times - 1)
            settings["h"] = h
            settings["effective step"] = dt / max(1.0, np.ceil(dt / h * (1 - 1e-12)))

    if structured:
        if {"symbolic", "measure"} & set(checks) and inst.measure_claims:
            msg = (
                f"invariant measure, structured: div(rho X) = 0 on {STRUCTURED_SAMPLES} "
                "sampled states"
            )
            with stage("pointwise measure check", msg):
                sym_measure = [pointwise_measure_check(inst, seed, params)]
        if "measure" in checks and inst.measure_claims:
            m = min(lanes, STRUCTURED_LANES)
            msg = (
                f"measure checks, structured: {len(inst.measure_claims)} densities along "
                f"{m} trajectories"
            )
            with stage("measure checks", msg):
                num_measure = structured_measure_checks(
                    inst, x0[:m], t_end, params, rtol, atol, threads
                )
            settings["measure checks"] = (
                f"structured, dop853, rtol {rtol:g}, atol {atol:g}, t = {t_end:g}, first "
                f"{num_measure[0].figures['trajectories']} trajectories"
            )
        if {"symbolic", "hamiltonisation"} & set(checks) and inst.measure_claims:
            msg = (
                "phi-simplicity, structured: tau-field against the Hamiltonian field of Htilde "
                f"on {STRUCTURED_SAMPLES} sampled states"
            )
            with stage("Hamiltonisation check", msg):
                sym_phi = [structured_hamiltonisation_check(inst, seed, params)]
            settings["Hamiltonisation checks"] = (
                "structured: pointwise on sampled states (the chart checks need the Chaplygin "
                f"chart system, built for the A Om A inertia with n <= {STRUCTURED_N} only)"
            )
    elif {"symbolic", "measure", "hamiltonisation"} & set(checks):
        with stage("symbolic checks", "symbolic checks of the Chaplygin reduction"):
            sym = symbolic_checks(inst)
        if {"symbolic", "measure"} & set(checks):
            sym_measure = [c for c in sym if "measure" in c.name]
        if {"symbolic", "hamiltonisation"} & set(checks):
            sym_phi = [c for c in sym if "phi-simple" in c.name]

    if "measure" in checks and inst.measure_claims and not structured:
        m = min(lanes, MEASURE_LANES)
        msg = f"measure checks: {len(inst.measure_claims)} densities along {m} trajectories"
        with stage("measure checks", msg):
            num_measure = measure_checks(inst, x0[:m], t_end, params, rtol, atol, threads)
        settings["measure checks"] = (
            f"dop853, rtol {rtol:g}, atol {atol:g}, t = {t_end:g}, first {m} trajectories"
        )
        with stage("density discovery", "density discovery on sampled states"):
            num_measure.append(discovery_check(inst, seed, params))
        settings["density discovery"] = f"{DISCOVERY_SAMPLES} sampled states (seed {seed + 1})"

    if "hamiltonisation" in checks and inst.chart_sampler is not None:
        msg = f"Hamiltonisation checks: {HAMILTONISATION_LANES} trajectories in the chart"
        with stage("Hamiltonisation checks", msg):
            num_ham = hamiltonisation_checks(inst, seed, params)
        settings["Hamiltonisation checks"] = (
            f"{HAMILTONISATION_LANES} chart trajectories, t = tau = {inst.chart_t:g}"
        )

    timings["total (wall clock)"] = time.perf_counter() - start_wall
    timings["total (CPU, all threads)"] = time.process_time() - start_cpu
    every = [*drift, *sym_measure, *num_measure, *sym_phi, *num_ham]
    report = Report(
        inst.title,
        system={"name": vf.name, **inst.description},
        settings=settings,
        checks=[_with_form(c, structured) for c in every],
        timings=timings,
    )
    return report, res


def _with_form(check: Check, structured: bool) -> Check:
    """The check with the figure ``"form"`` (first) saying which form of it ran."""
    if "form" in check.figures:
        return check
    if structured:
        form, name = FORM["structured"], f"{check.name} (structured numeric)"
    else:
        form, name = FORM["symbolic" if "(symbolic)" in check.name else "numeric"], check.name
    figures = {"form": form, **check.figures}
    return Check(name, check.holds, check.statement, figures, check.series, check.samples)
