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
from nhfast.analysis.drift import constraint_residual, energy_error, integral_drift
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
from nhfast.experiments.instance import Instance
from nhfast.experiments.spec import to_instance
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
    name: Any,
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
    name : str or SystemSpec
        Catalogue name (see ``nhfast examples`` / :data:`nhfast.experiments.EXAMPLES`), or a
        system of your own: a :class:`~nhfast.experiments.spec.SystemSpec` or anything it
        takes as ``system`` (run through the same checks; ``n`` and ``inertia`` do not apply).
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
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    say = log or (lambda _msg: None)
    _check_families(checks)
    stage = _Stages(say)
    extra: dict[str, Any] = {}
    if not isinstance(name, str):
        if n is not None or inertia is not None:
            raise UsageError("n, inertia: only for catalogue examples, not for a SystemSpec")
        title = getattr(name, "title", None) or "system"
        with stage("build", f"building {title}"):
            inst = to_instance(name, name=title)
    else:
        example = get_example(name)
        with stage("build", f"building {name}" + (f" (n = {n})" if n is not None else "")):
            inst = example.build(n, inertia)
        if example.inertias:
            extra["inertia"] = inertia or example.inertias[0]
    return run_instance(
        inst,
        lanes=lanes,
        t_end=t_end,
        method=method,
        threads=threads,
        seed=seed,
        rtol=rtol,
        atol=atol,
        h=h,
        drift_tol=drift_tol,
        checks=checks,
        n_times=n_times,
        progress=progress,
        log=log,
        client=client,
        chunk=chunk,
        settings=extra,
        timings=stage.timings,
        started=(start_wall, start_cpu),
    )


def _check_families(checks: Sequence[str]) -> None:
    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise UsageError(f"checks: unknown {unknown}; choose from {', '.join(CHECKS)}")


def run_instance(
    inst: Instance,
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
    settings: dict[str, Any] | None = None,
    timings: dict[str, float] | None = None,
    started: tuple[float, float] | None = None,
) -> tuple[Report, IntegrationResult | None]:
    """Integrate a batch of a built :class:`Instance`, run the checks, collect a Report.

    The work of :func:`run_example` after the build, for catalogue entries and for a user's
    own system alike (:func:`nhfast.experiments.spec.to_instance`). A check family that needs
    data the instance does not hold (an energy observable, a density claim, a Chaplygin
    system, a chart sampler) is reported as a check with verdict ``----`` and the statement
    ``"not run: needs ..."``.

    Parameters
    ----------
    inst : Instance
    lanes, t_end, method, threads, seed, rtol, atol, h, drift_tol, checks, n_times, progress,
    log, client, chunk
        As for :func:`run_example`.
    settings : dict, optional
        More entries for the report's settings (first after ``"example"``).
    timings : dict, optional
        Timings already taken (e.g. the build); the run's are added.
    started : (float, float), optional
        ``time.perf_counter()`` and ``time.process_time()`` at the start, for the totals.

    Returns
    -------
    (Report, IntegrationResult or None)
    """
    _check_families(checks)
    if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 1:
        raise UsageError(f"lanes: expected an int >= 1, got {lanes!r}")
    start_wall, start_cpu = started or (time.perf_counter(), time.process_time())
    say = log or (lambda _msg: None)
    stage = _Stages(say)
    if timings:
        stage.timings.update(timings)
    timings = stage.timings
    name = inst.name
    structured = inst.form == STRUCTURED
    if "build" in timings:
        label = "build (structured program)" if structured else "build (symbolic)"
        timings[label] = timings.pop("build")
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
    settings = {
        "example": name,
        **(settings or {}),
        "trajectories": lanes,
        "final time": t_end,
        "threads": threads,
        "seed": seed,
    }
    if structured:
        settings["form of the checks"] = "structured numeric: only the structured field is built"
        if name == "veselova":
            settings["form of the checks"] += (
                f" (the symbolic forms run for the A Om A inertia with n <= {STRUCTURED_N})"
            )
    run = _Run(inst, x0, params, seed, t_end, rtol, atol, threads, set(checks), stage, settings)
    drift, res = [], None
    if "drift" in checks:
        drift, res = _drift_checks(run, method, h, drift_tol, n_times, progress, client, chunk, say)
    if structured:
        sym_measure, num_measure, sym_phi = _structured_checks(run)
    else:
        sym_measure, sym_phi = _symbolic_checks(run)
        num_measure = _numerical_measure_checks(run)
    num_ham = _chart_checks(run) if not structured else []

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


@dataclasses.dataclass
class _Run:
    """What every check family of one run shares."""

    inst: Instance
    x0: np.ndarray
    params: np.ndarray | None
    seed: int
    t_end: float
    rtol: float
    atol: float
    threads: int
    checks: set[str]
    stage: _Stages
    settings: dict[str, Any]

    def wants(self, *families: str) -> bool:
        """Whether any of ``families`` was asked for."""
        return bool(self.checks & set(families))


def _drift_checks(
    run: _Run,
    method: str,
    h: float | None,
    drift_tol: float,
    n_times: int,
    progress: bool | None,
    client: Any,
    chunk: int | None,
    say: Callable[[str], object],
) -> tuple[list[Check], IntegrationResult]:
    """Integrate the batch; energy, constraints and claimed first integrals along it."""
    inst, vf, settings, lanes = run.inst, run.inst.vector_field, run.settings, len(run.x0)
    t0 = time.perf_counter()
    say("kernels: generating and compiling (or loading from the cache) ...")
    # a structured instance with a Liouville field integrates that one (its library serves
    # every check; the extra state ell is dropped from the result)
    field = inst.liouville if inst.liouville is not None else vf
    cs = field.compile(("observables",))
    run.stage.timings["codegen + compile" if not cs.cache_hit else "kernels (cache hit)"] = (
        time.perf_counter() - t0
    )
    say(
        f"kernels: {cs.backend} backend, {'cache hit' if cs.cache_hit else 'compiled'} "
        f"in {time.perf_counter() - t0:.2f} s"
    )
    t_eval = np.linspace(0.0, run.t_end, n_times)
    with run.stage("integrate", f"integrating ({method})"):
        x0 = run.x0
        start = x0 if field is vf else np.concatenate([x0, np.zeros((lanes, 1))], axis=1)
        res = integrate_in_chunks(
            field, start, t_eval, run.params, method, run.threads, run.rtol, run.atol, h,
            progress, client, chunk,
        )  # fmt: skip
        if field is not vf:
            res = dataclasses.replace(res, y=res.y[..., : vf.n_state])
    if inst.energy and inst.energy in res.observables:
        drift = [energy_error(res, inst.energy, threshold=drift_tol)]
    else:
        drift = [_not_run("energy conservation", NEEDS["energy"])]
    if inst.constraints:
        drift.append(constraint_residual(res, inst.constraints, threshold=drift_tol))
    for integral, source in inst.integrals.items():
        drift.append(integral_drift(res, integral, source, threshold=drift_tol))
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
        settings.update({"rtol": run.rtol, "atol": run.atol})
    else:
        # integrate splits each output interval into equal substeps of at most h
        assert h is not None
        dt = run.t_end / (n_times - 1)
        settings["h"] = h
        settings["effective step"] = dt / max(1.0, np.ceil(dt / h * (1 - 1e-12)))
    return drift, res


def _structured_checks(run: _Run) -> tuple[list[Check], list[Check], list[Check]]:
    """The structured numerical forms: pointwise measure, measure claims, phi-simplicity."""
    inst, params, seed = run.inst, run.params, run.seed
    sym_measure: list[Check] = []
    num_measure: list[Check] = []
    sym_phi: list[Check] = []
    invariant_observable = any(c.invariant and c.observable for c in inst.measure_claims)
    if run.wants("symbolic", "measure") and not invariant_observable:
        sym_measure = [_not_run("basic invariant measure (structured numeric)", NEEDS["rho"])]
    elif run.wants("symbolic", "measure"):
        msg = (
            f"invariant measure, structured: div(rho X) = 0 on {STRUCTURED_SAMPLES} sampled states"
        )
        with run.stage("pointwise measure check", msg):
            sym_measure = [pointwise_measure_check(inst, seed, params)]
    if run.wants("measure") and not inst.measure_claims:
        num_measure = [_not_run("measure claims (structured numeric)", NEEDS["claims"])]
    elif run.wants("measure"):
        m = min(len(run.x0), STRUCTURED_LANES)
        msg = (
            f"measure checks, structured: {len(inst.measure_claims)} densities along "
            f"{m} trajectories"
        )
        with run.stage("measure checks", msg):
            num_measure = structured_measure_checks(
                inst, run.x0[:m], run.t_end, params, run.rtol, run.atol, run.threads
            )
        run.settings["measure checks"] = (
            f"structured, dop853, rtol {run.rtol:g}, atol {run.atol:g}, t = {run.t_end:g}, "
            f"first {num_measure[0].figures['trajectories']} trajectories"
        )
    hamiltonisable = invariant_observable and inst.expected is not None
    if run.wants("symbolic", "hamiltonisation") and not hamiltonisable:
        sym_phi = [_not_run("phi-simple, Hamiltonisable (structured numeric)", NEEDS["phi"])]
    elif run.wants("symbolic", "hamiltonisation"):
        msg = (
            "phi-simplicity, structured: tau-field against the Hamiltonian field of Htilde "
            f"on {STRUCTURED_SAMPLES} sampled states"
        )
        with run.stage("Hamiltonisation check", msg):
            sym_phi = [structured_hamiltonisation_check(inst, seed, params)]
        run.settings["Hamiltonisation checks"] = (
            "structured: pointwise on sampled states (the chart checks need the Chaplygin "
            f"chart system, built for the A Om A inertia with n <= {STRUCTURED_N} only)"
        )
    return sym_measure, num_measure, sym_phi


def _symbolic_checks(run: _Run) -> tuple[list[Check], list[Check]]:
    """The symbolic measure and phi-simplicity tests of the Chaplygin reduction."""
    sym_measure: list[Check] = []
    sym_phi: list[Check] = []
    if not run.wants("symbolic", "measure", "hamiltonisation"):
        return sym_measure, sym_phi
    if run.inst.chaplygin is None:
        if run.wants("symbolic", "measure"):
            sym_measure = [_not_run("basic invariant measure (symbolic)", NEEDS["chaplygin"])]
        if run.wants("symbolic", "hamiltonisation"):
            sym_phi = [_not_run("phi-simple, Hamiltonisable (symbolic)", NEEDS["chaplygin"])]
        return sym_measure, sym_phi
    with run.stage("symbolic checks", "symbolic checks of the Chaplygin reduction"):
        sym = symbolic_checks(run.inst)
    if run.wants("symbolic", "measure"):
        sym_measure = [c for c in sym if "measure" in c.name]
    if run.wants("symbolic", "hamiltonisation"):
        sym_phi = [c for c in sym if "phi-simple" in c.name]
    return sym_measure, sym_phi


def _numerical_measure_checks(run: _Run) -> list[Check]:
    """The density claims along trajectories and density discovery on sampled states."""
    if not run.wants("measure"):
        return []
    inst = run.inst
    out: list[Check] = []
    if inst.measure_claims:
        m = min(len(run.x0), MEASURE_LANES)
        msg = f"measure checks: {len(inst.measure_claims)} densities along {m} trajectories"
        with run.stage("measure checks", msg):
            out = measure_checks(
                inst, run.x0[:m], run.t_end, run.params, run.rtol, run.atol, run.threads
            )
        run.settings["measure checks"] = (
            f"dop853, rtol {run.rtol:g}, atol {run.atol:g}, t = {run.t_end:g}, first {m} "
            "trajectories"
        )
    else:
        out = [_not_run("measure claims (numerical)", NEEDS["claims"])]
    with run.stage("density discovery", "density discovery on sampled states"):
        out.append(discovery_check(inst, run.seed, run.params))
    run.settings["density discovery"] = f"{DISCOVERY_SAMPLES} sampled states (seed {run.seed + 1})"
    return out


def _chart_checks(run: _Run) -> list[Check]:
    """The numerical Hamiltonisation checks in the Chaplygin chart."""
    if not run.wants("hamiltonisation"):
        return []
    inst = run.inst
    if inst.chart_sampler is None or inst.chaplygin is None:
        return [_not_run("Hamiltonisation in the Chaplygin chart (numerical)", NEEDS["chart"])]
    msg = f"Hamiltonisation checks: {HAMILTONISATION_LANES} trajectories in the chart"
    with run.stage("Hamiltonisation checks", msg):
        out = hamiltonisation_checks(inst, run.seed, run.params)
    run.settings["Hamiltonisation checks"] = (
        f"{HAMILTONISATION_LANES} chart trajectories, t = tau = {inst.chart_t:g}"
    )
    return out


#: What a check family needs, for the statement "not run: needs ..." of a check that did not run.
NEEDS = {
    "energy": "an energy observable of the vector field (SystemSpec(energy=...))",
    "claims": (
        "a claimed density: SystemSpec(density=...) for an invariant one, or "
        "measure_claims=[MeasureClaim(...)]"
    ),
    "chaplygin": (
        "a ChaplyginSystem (the symbolic tests are of its reduction; SystemSpec(system=...) "
        "with a ChaplyginSystem)"
    ),
    "chart": (
        "a ChaplyginSystem integrated in its reduced chart, with a sampler of chart states "
        "(SystemSpec(system=ChaplyginSystem(...)))"
    ),
    "rho": "a claimed invariant density given by an observable (MeasureClaim(observable=...))",
    "phi": (
        "a claimed invariant density given by an observable and a claim about "
        "phi-simplicity (Expectation)"
    ),
}


def _not_run(name: str, needs: str) -> Check:
    """A check that could not run: verdict ``----``, statement ``"not run: needs ..."``."""
    return Check(name, None, f"not run: needs {needs}", {"form": "not run"})


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
