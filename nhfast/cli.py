"""The ``nhfast`` command: run and check library examples, write reports, demo, cache."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import time
from collections.abc import Sequence

import numpy as np
import sympy as sp

from nhfast.errors import UsageError


def sleigh_system():
    """Chaplygin sleigh in body velocities: v along the blade, angular velocity omega.

    Contact point (x, y) at distance a behind the centre of mass along the blade, mass m,
    inertia J about the centre of mass. The knife edge forbids sideways slip; energy
    E = (m v^2 + (J + m a^2) omega^2)/2 is conserved and every motion tends to a straight
    line with omega -> 0 and v -> sqrt(2E/m) (Chaplygin 1911; Bloch, Nonholonomic Mechanics
    and Control, 1.7).
    """
    import nhfast as nh

    x, y, th, v, om = sp.symbols("x y theta v omega")
    a, m, J = sp.symbols("a m J", positive=True)
    rhs = [v * sp.cos(th), v * sp.sin(th), om, a * om**2, -m * a * v * om / (J + m * a**2)]
    energy = (m * v**2 + (J + m * a**2) * om**2) / 2
    return nh.VectorField(
        [x, y, th, v, om], rhs, params=[a, m, J], observables={"energy": energy}, name="sleigh"
    )


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)
    fmt = lambda r: "  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True))  # noqa: E731
    return "\n".join([fmt(header), line, *map(fmt, rows)])


def demo(lanes: int, t_end: float, threads: int, scipy_lanes: int) -> int:
    """Integrate a batch of Chaplygin sleighs with every method and print a table."""
    import nhfast as nh

    vf = sleigh_system()
    rng = np.random.default_rng(0)
    x0 = np.column_stack([np.zeros((lanes, 3)), rng.normal(size=(lanes, 2))])
    par = np.column_stack(
        [rng.uniform(0.2, 1.0, lanes), rng.uniform(0.5, 2.0, lanes), rng.uniform(0.5, 2.0, lanes)]
    )
    t = np.linspace(0.0, t_end, 101)
    t0 = time.perf_counter()
    cs = vf.compile(("observables",))
    print(
        f"nhfast {nh.__version__}: Chaplygin sleigh, {lanes} trajectories to t = {t_end:g}, "
        f"{threads} thread(s); kernels: {cs.backend} backend, "
        f"{'cache hit' if cs.cache_hit else 'compiled'} in {time.perf_counter() - t0:.2f} s"
    )
    ref = nh.integrate(
        vf, x0, t, method="dop853", params=par, rtol=1e-13, atol=1e-13, threads=threads
    )
    rows = []
    runs = [
        ("dop853", dict(rtol=1e-10, atol=1e-12)),
        ("dopri5", dict(rtol=1e-8, atol=1e-10)),
        ("rk4", dict(h=0.01)),
        ("gauss4", dict(h=0.05)),
        ("gauss6", dict(h=0.1)),
    ]
    for method, kw in runs:
        t0 = time.perf_counter()
        res = nh.integrate(vf, x0, t, method=method, params=par, threads=threads, **kw)
        wall = time.perf_counter() - t0
        e = res.observables["energy"]
        drift = np.max(np.abs(e - e[:, :1]) / e[:, :1])
        err = np.max(np.abs(res.y[:, -1] - ref.y[:, -1]))
        rows.append(
            [
                method,
                ", ".join(f"{k}={v:g}" for k, v in kw.items()),
                f"{wall * 1e3:.1f}",
                f"{np.mean(res.stats['steps']):.0f}",
                f"{np.mean(res.stats['rhs_evals']):.0f}",
                f"{drift:.1e}",
                f"{err:.1e}",
            ]
        )
    print()
    print(
        _table(
            rows,
            [
                "method",
                "settings",
                "time [ms]",
                "steps/traj",
                "f evals/traj",
                "max |dE/E|",
                "error",
            ],
        )
    )
    e0 = ref.observables["energy"][:, 0]
    vlim = ref.y[:, -1, 3] / np.sqrt(2 * e0 / par[:, 1])
    print(
        f"\nerror: max |x(T) - x_ref(T)| against dop853 at rtol 1e-13.\n"
        f"Chaplygin's asymptotics: v(T)/sqrt(2E/m) = {np.median(vlim):.6f} (median; -> 1), "
        f"|omega(T)| <= {np.max(np.abs(ref.y[:, -1, 4])):.1e}"
    )
    if scipy_lanes > 0:
        from scipy.integrate import solve_ivp

        f = sp.lambdify([vf.states, vf.params], vf.rhs)
        k = min(scipy_lanes, lanes)
        t0 = time.perf_counter()
        for i in range(k):
            solve_ivp(
                lambda _t, y, p=par[i]: f(y, p), (0, t_end), x0[i], method="DOP853",
                t_eval=t, rtol=1e-10, atol=1e-12,
            )  # fmt: skip
        per_scipy = (time.perf_counter() - t0) / k
        t0 = time.perf_counter()
        nh.integrate(vf, x0, t, method="dop853", params=par, threads=threads, observables=False)
        per_nh = (time.perf_counter() - t0) / lanes
        print(
            f"SciPy solve_ivp(DOP853) on {k} trajectories: {per_scipy * 1e3:.1f} ms each; "
            f"nhfast: {per_nh * 1e6:.1f} us each ({per_scipy / per_nh:.0f}x)"
        )
    return 0


def cache(action: str) -> int:
    from nhfast import _jit

    root = _jit.cache_dir()
    entries = sorted(root.glob("k*")) if root.exists() else []
    if action == "info":
        size = sum(f.stat().st_size for e in entries for f in e.iterdir() if f.is_file())
        print(f"cache: {root}\nentries: {len(entries)}\nsize: {size / 1e6:.2f} MB")
    else:
        for e in entries:
            shutil.rmtree(e, ignore_errors=True)
        print(f"removed {len(entries)} entries from {root}")
    return 0


# ---------------------------------------------------------------------------------------------
# run / check: build an example, integrate a batch, check, report
# ---------------------------------------------------------------------------------------------

FIXED_STEP_H = 0.01  # default step of the fixed-step methods


def _integrate_in_chunks(
    vf,
    x0: np.ndarray,
    t_eval: np.ndarray,
    params: np.ndarray | None,
    method: str,
    threads: int,
    rtol: float,
    atol: float,
    h: float | None,
    progress: bool | None,
):
    """``nhfast.integrate`` over blocks of lanes, with a progress bar; failed lanes kept."""
    import warnings

    from nhfast.errors import IntegrationWarning
    from nhfast.experiments._progress import Progress
    from nhfast.integrate import IntegrationResult, integrate

    lanes = x0.shape[0]
    chunk = max(64 * threads, -(-lanes // 10))
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
    if len(parts) == 1:
        return parts[0]
    return IntegrationResult(
        t=parts[0].t,
        y=np.concatenate([p.y for p in parts]),
        status=np.concatenate([p.status for p in parts]),
        stats={k: np.concatenate([p.stats[k] for p in parts]) for k in parts[0].stats},
        method=method,
        observables={
            k: np.concatenate([p.observables[k] for p in parts]) for k in parts[0].observables
        },
    )


CHECKS = ("drift", "symbolic", "measure", "hamiltonisation")


HAMILTONISATION_LANES = 8  # trajectories of the Hamiltonisation flow checks (chart samples)
MEASURE_LANES = 1024  # at most this many trajectories (the first ones) for the measure checks


def _measure_checks(inst, x0, t_end, params, rtol, atol, threads) -> list:
    """Numerical checks of the example's measure claims (``check_measure``, DOP853)."""
    from nhfast.analysis.measure import check_measure
    from nhfast.analysis.result import Check

    out = []
    for k, claim in enumerate(inst.measure_claims):
        inner = check_measure(
            inst.vector_field,
            claim.density,
            x0,
            t=t_end,
            params=params,
            rtol=rtol,
            atol=atol,
            threads=threads,
            # Liouville's formula (variational equations) validates ell once; the same
            # trajectories and ell serve the later densities
            n_jacobian=4 if k == 0 else 0,
        )
        expect = "invariant" if claim.invariant else "not invariant"
        if inner.holds is None:
            holds, statement = None, inner.statement
        else:
            holds = inner.holds == claim.invariant
            found = "invariant" if inner.holds else "not invariant"
            how = "as expected" if holds else f"but expected {expect}"
            statement = f"{found}, {how} ({claim.source}): {inner.statement}"
        figures = {"expected": expect, "claimed by": claim.source, **inner.figures}
        out.append(
            Check(
                f"measure {claim.label} (numerical)",
                holds,
                statement,
                figures,
                inner.series,
                inner.samples,
            )
        )
    return out


DISCOVERY_SAMPLES = 256  # states where X[sigma] = -div X is imposed (no integration)
DISCOVERY_SPREAD = 1e-8  # max - min of sigma_fit - sigma_claimed: "equal up to a constant"


def _discovery_check(inst, seed, params):
    """Density discovery (``discover_density``) compared with the example's claims."""
    from nhfast.analysis.density import discover_density
    from nhfast.analysis.result import Check

    vf = inst.vector_field
    variables = inst.density_variables or vf.states[: vf.split or vf.n_state // 2]
    x = inst.sample(DISCOVERY_SAMPLES, seed + 1)
    fit = discover_density(vf, x, params=params, variables=list(variables))
    inner = fit.to_check()
    name = f"density discovery: exp(sigma({', '.join(map(str, variables))})) (numerical)"
    if inst.expected is None:
        return Check(name, inner.holds, inner.statement, inner.figures)
    want, source = inst.expected.basic_measure, inst.expected.source
    figures = {"expected": "exists" if want else "none", **inner.figures}
    if fit.exists != want:
        found = "found" if fit.exists else "none found"
        statement = f"{found}, but expected {'one' if want else 'none'} ({source}): "
        return Check(name, False, statement + fit.statement, figures)
    if not fit.exists or inst.log_density is None:
        found = "found" if fit.exists else "none found"
        return Check(name, True, f"{found}, as expected ({source}): {fit.statement}", figures)
    # the fitted sigma must be the claimed log density up to an additive constant
    label = next((c.label for c in inst.measure_claims if c.invariant), str(inst.log_density))
    args = [vf.states, vf.params]
    par = np.broadcast_to(np.zeros(0) if params is None else params, (len(x), vf.n_params))
    f_fit = sp.lambdify(args, fit.sigma, "numpy")
    f_claim = sp.lambdify(args, inst.log_density, "numpy")
    diff = np.array([f_fit(xi, pi) - f_claim(xi, pi) for xi, pi in zip(x, par, strict=True)])
    spread = float(np.max(diff) - np.min(diff))
    figures["spread of sigma_fit - sigma_claimed on the samples"] = spread
    if spread <= DISCOVERY_SPREAD:
        statement = (
            f"found ({fit.kind}, relative residual {fit.residual:.1e}): equal to the claimed "
            f"density {label} up to a constant factor (spread of log rho {spread:.1e} on "
            f"{len(x)} samples), as {source} says"
        )
        return Check(name, True, statement, figures)
    statement = (
        f"found ({fit.kind}), but it differs from the claimed density {label}: spread of "
        f"log rho {spread:.1e} > {DISCOVERY_SPREAD:g} ({fit.statement})"
    )
    return Check(name, False, statement, figures)


def _hamiltonisation_checks(inst, seed, params) -> list:
    """Numerical Hamiltonisation checks in the Chaplygin chart (``hamiltonisation_report``)."""
    from nhfast.analysis.hamiltonisation import hamiltonisation_report
    from nhfast.analysis.result import Check

    if inst.chart_sampler is None or inst.chaplygin is None:
        return []
    x0 = inst.chart_sampler(np.random.default_rng(seed), HAMILTONISATION_LANES)
    rep = hamiltonisation_report(inst.chaplygin, x0, inst.chart_t, params=params)
    # the symbolic phi-simplicity test is already in the report (compared with the seeds)
    inner = [c for c in rep.checks if "(symbolic)" not in c.name]
    if inst.expected is None:
        return inner
    # verdict: agreement with the claim (a system claimed not phi-simple must fail them)
    want, source = inst.expected.phi_simple, inst.expected.source
    out = []
    for c in inner:
        if c.holds is None:
            out.append(c)
            continue
        holds = c.holds == want
        found = "holds" if c.holds else "fails"
        how = "as expected" if holds else f"but expected it to {'hold' if want else 'fail'}"
        # a check that holds as claimed speaks for itself; otherwise say what was expected
        statement = c.statement if (holds and want) else f"{found}, {how} ({source}): {c.statement}"
        out.append(
            Check(
                c.name,
                holds,
                statement,
                {"expected": "holds" if want else "fails", **c.figures},
                c.series,
                c.samples,
            )
        )
    return out


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
    log=None,
):
    """Build a library example, integrate a batch, run the checks and collect a Report.

    Parameters
    ----------
    name : str
        Library name (see ``nhfast examples`` / :data:`nhfast.experiments.catalogue.EXAMPLES`).
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
        Step of the fixed-step methods (default 0.01).
    drift_tol : float
        Threshold of the energy and constraint checks.
    checks : sequence of str
        Any of ``"drift"`` (energy and constraints along the batch), ``"symbolic"`` (measure
        and phi-simplicity of the Chaplygin reduction against the seeds), ``"measure"``
        (symbolic measure test and the numerical test of every density claim of the example),
        ``"hamiltonisation"`` (symbolic phi-simplicity and the numerical Hamiltonisation
        checks in the Chaplygin chart).
    n_times : int
        Number of output times of the drift run.
    progress : bool, optional
        Draw a progress bar on stderr (default: when stderr is a terminal).
    log : callable, optional
        Receives one line per stage (e.g. ``print``).

    Returns
    -------
    (Report, IntegrationResult or None)
        The integration of the drift run (None without ``"drift"``).
    """
    from nhfast.analysis.drift import constraint_residual, energy_error
    from nhfast.analysis.result import Report
    from nhfast.experiments.catalogue import get_example, symbolic_checks
    from nhfast.integrate import ADAPTIVE

    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise UsageError(f"checks: unknown {unknown}; choose from {', '.join(CHECKS)}")
    say = log or (lambda _msg: None)
    timings: dict[str, float] = {}

    @contextlib.contextmanager
    def stage(label: str, message: str | None = None):
        if message:
            say(f"{message} ...")
        t0 = time.perf_counter()
        yield
        timings[label] = time.perf_counter() - t0
        if message:
            say(f"  done in {timings[label]:.1f} s")

    start_wall, start_cpu = time.perf_counter(), time.process_time()
    with stage("build (symbolic)"):
        inst = get_example(name).build(n)
    t_end = inst.t_end if t_end is None else t_end
    if method not in ADAPTIVE and h is None:
        h = FIXED_STEP_H
    vf = inst.vector_field
    if method == "leapfrog" and "drift" in checks and vf.separability() is not None:
        raise UsageError(
            f"--method: leapfrog needs a separable system; {name}: {vf.separability()}"
        )
    params = inst.params if inst.params.size else None
    x0 = inst.sample(lanes, seed)
    say(f"{inst.title}: {vf.n_state} states, {lanes} trajectories to t = {t_end:g}")
    settings: dict = {
        "example": name,
        "trajectories": lanes,
        "final time": t_end,
        "threads": threads,
        "seed": seed,
    }

    drift, sym_measure, sym_phi, num_measure, num_ham = [], [], [], [], []
    res = None
    if "drift" in checks:
        t0 = time.perf_counter()
        cs = vf.compile(("observables",))
        timings["codegen + compile" if not cs.cache_hit else "kernels (cache hit)"] = (
            time.perf_counter() - t0
        )
        say(
            f"kernels: {cs.backend} backend, {'cache hit' if cs.cache_hit else 'compiled'} "
            f"in {time.perf_counter() - t0:.2f} s"
        )
        t_eval = np.linspace(0.0, t_end, n_times)
        with stage("integrate", f"integrating ({method})"):
            res = _integrate_in_chunks(
                vf, x0, t_eval, params, method, threads, rtol, atol, h, progress
            )
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
        if method in ADAPTIVE:
            settings.update({"rtol": rtol, "atol": atol})
        else:
            # integrate splits each output interval into equal substeps of at most h
            dt = t_end / (n_times - 1)
            settings["h"] = h
            settings["effective step"] = dt / max(1.0, np.ceil(dt / h * (1 - 1e-12)))

    if {"symbolic", "measure", "hamiltonisation"} & set(checks):
        with stage("symbolic checks", "symbolic checks of the Chaplygin reduction"):
            sym = symbolic_checks(inst)
        sym_measure = [c for c in sym if "measure" in c.name]
        sym_phi = [c for c in sym if "phi-simple" in c.name]
        if not ({"symbolic", "measure"} & set(checks)):
            sym_measure = []
        if not ({"symbolic", "hamiltonisation"} & set(checks)):
            sym_phi = []

    if "measure" in checks and inst.measure_claims:
        m = min(lanes, MEASURE_LANES)
        msg = f"measure checks: {len(inst.measure_claims)} densities along {m} trajectories"
        with stage("measure checks", msg):
            num_measure = _measure_checks(inst, x0[:m], t_end, params, rtol, atol, threads)
        settings["measure checks"] = (
            f"dop853, rtol {rtol:g}, atol {atol:g}, t = {t_end:g}, first {m} trajectories"
        )
        with stage("density discovery", "density discovery on sampled states"):
            num_measure.append(_discovery_check(inst, seed, params))
        settings["density discovery"] = f"{DISCOVERY_SAMPLES} sampled states (seed {seed + 1})"

    if "hamiltonisation" in checks and inst.chart_sampler is not None:
        msg = f"Hamiltonisation checks: {HAMILTONISATION_LANES} trajectories in the chart"
        with stage("Hamiltonisation checks", msg):
            num_ham = _hamiltonisation_checks(inst, seed, params)
        settings["Hamiltonisation checks"] = (
            f"{HAMILTONISATION_LANES} chart trajectories, t = tau = {inst.chart_t:g}"
        )

    timings["total (wall clock)"] = time.perf_counter() - start_wall
    timings["total (CPU, all threads)"] = time.process_time() - start_cpu
    report = Report(
        inst.title,
        system={"name": vf.name, **inst.description},
        settings=settings,
        checks=[*drift, *sym_measure, *num_measure, *sym_phi, *num_ham],
        timings=timings,
    )
    return report, res


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def _nonneg_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return v


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (np.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text!r}")
    return v


def _add_run_options(p: argparse.ArgumentParser) -> None:
    from nhfast.experiments.catalogue import EXAMPLES
    from nhfast.integrate import METHODS

    p.add_argument(
        "example",
        choices=list(EXAMPLES),
        metavar="EXAMPLE",
        help=f"library example: {', '.join(EXAMPLES)} (see nhfast examples)",
    )
    p.add_argument("--n", type=_positive_int, help="size of sized examples (veselova: SO(n))")
    p.add_argument("--lanes", type=_positive_int, default=256, help="trajectories (256)")
    p.add_argument("--t", type=_positive_float, help="final time (default: the example's)")
    p.add_argument("--method", choices=list(METHODS), default="dop853", help="integrator")
    p.add_argument("--threads", type=_positive_int, default=2, help="threads (2)")
    p.add_argument("--out", help="report directory (default: ./nhfast-report-EXAMPLE)")
    p.add_argument("--seed", type=_nonneg_int, default=0, help="seed of the initial states (0)")
    p.add_argument(
        "--rtol", type=_positive_float, default=1e-10, help="adaptive methods and measure checks"
    )
    p.add_argument(
        "--atol", type=_positive_float, default=1e-12, help="adaptive methods and measure checks"
    )
    p.add_argument("--h", type=_positive_float, help=f"fixed-step methods ({FIXED_STEP_H})")
    p.add_argument(
        "--drift-tol",
        type=_positive_float,
        default=1e-7,
        help="threshold of the energy and constraint checks (1e-7)",
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--quiet", action="store_true", help="print only the verdict lines")


def _run_command(parser: argparse.ArgumentParser, args: argparse.Namespace, checks) -> int:
    from pathlib import Path

    from nhfast.analysis.report import render_text, verdict, write_report
    from nhfast.errors import CompilationError, IntegrationError
    from nhfast.experiments.catalogue import get_example

    example = get_example(args.example)
    if args.n is not None and example.n_default is None:
        parser.error(f"argument --n: example {args.example!r} has no size parameter")
    if args.n is not None and args.n < example.n_min:
        parser.error(f"argument --n: example {args.example!r} needs n >= {example.n_min}")
    out = Path(args.out) if args.out else Path(f"nhfast-report-{args.example}")
    if out.exists() and not out.is_dir():
        parser.error(f"argument --out: {out} exists and is not a directory")
    log = (lambda _m: None) if args.quiet else print
    try:
        report, _ = run_example(
            args.example,
            n=args.n,
            lanes=args.lanes,
            t_end=args.t,
            method=args.method,
            threads=args.threads,
            seed=args.seed,
            rtol=args.rtol,
            atol=args.atol,
            h=args.h,
            drift_tol=args.drift_tol,
            checks=checks,
            log=log,
        )
    except UsageError as exc:
        parser.error(f"argument {exc}")
    except (CompilationError, IntegrationError, ArithmeticError, ValueError) as exc:
        # a run that cannot finish (compiler, integrator, a check rejecting its data): one
        # line, exit code 1; NHFAST_DEBUG=1 shows the traceback
        if os.environ.get("NHFAST_DEBUG"):
            raise
        print(f"nhfast: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    try:
        files = write_report(report, out, plots=not args.no_plots)
    except OSError as exc:
        print(f"nhfast: error: cannot write the report to {out}: {exc}", file=sys.stderr)
        return 1
    written = time.perf_counter() - t0
    if args.quiet:
        for c in report.checks:
            print(f"{verdict(c.holds)}  {c.name}: {c.statement}")
    else:
        print()
        print(render_text(report), end="")  # the same text as report.txt
        print(f"\nreport: {files['index']} ({len(files)} files, written in {written:.1f} s)")
    return 1 if any(c.holds is False for c in report.checks) else 0


_EPILOG = (
    "A verdict PASS means the finding agrees with the claim of the source (e.g. 'no basic "
    "invariant measure' for the particle with a != 0 passes when the checks find none). "
    "Exit codes: 0 every decided check passed, 1 a check failed or the run could not finish, "
    "2 bad arguments. NHFAST_CACHE_DIR sets the kernel cache."
)


def examples_command() -> int:
    """Print the library, one line per example."""
    from nhfast.experiments.catalogue import EXAMPLES

    width = max(len(k) for k in EXAMPLES)
    for name, ex in EXAMPLES.items():
        print(f"{name:<{width}}  {ex.summary}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nhfast`` command; returns the exit code.

    Exit codes: 0 success (every decided check passed), 1 a check failed or the run could not
    finish (compiler, integration, file system), 2 bad arguments.
    """
    parser = argparse.ArgumentParser(
        prog="nhfast",
        description="Nonholonomic mechanics: run library examples, check invariant measures "
        "and Hamiltonisation, write reports; kernel-cache housekeeping.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    r = sub.add_parser(
        "run",
        help="integrate a library example, check energy/constraints and the seeds' claims, "
        "write a report",
        description="Integrate a batch of trajectories of a library example and run every "
        "check: energy and constraint drift, the invariant measure and phi-simplicity of the "
        "Chaplygin reduction (symbolic, compared with the seeds), the density claims along "
        "the trajectories and the Hamiltonisation checks (numerical). Prints the verdicts and "
        "figures and writes report.txt, report.json, PNG plots and the index report.md.",
        epilog=_EPILOG,
    )
    _add_run_options(r)
    ch = sub.add_parser(
        "check",
        help="check one claim (measure or hamiltonisation)",
        description="Only the measure checks (symbolic and numerical) or only the "
        "Hamiltonisation checks of a library example, with the same report files as run.",
        epilog=_EPILOG,
    )
    ch.add_argument("what", choices=["measure", "hamiltonisation"])
    _add_run_options(ch)
    sub.add_parser("examples", help="list the example library")
    d = sub.add_parser("demo", help="integrate a batch of Chaplygin sleighs and print a table")
    d.add_argument("--lanes", type=int, default=2000, help="number of trajectories")
    d.add_argument("--t", type=float, default=20.0, help="final time")
    d.add_argument("--threads", type=int, default=2)
    d.add_argument(
        "--scipy", type=int, default=20, help="trajectories timed through SciPy (0: skip)"
    )
    c = sub.add_parser("cache", help="kernel cache: where it is, how big, clear it")
    c.add_argument("action", choices=["info", "clear"])
    args = parser.parse_args(argv)
    if args.command == "run":
        return _run_command(parser, args, CHECKS)
    if args.command == "check":
        return _run_command(parser, args, (args.what,))
    if args.command == "examples":
        return examples_command()
    if args.command == "demo":
        if args.lanes < 1 or args.t <= 0 or args.threads < 1:
            parser.error("--lanes and --threads must be >= 1 and --t > 0")
        return demo(args.lanes, args.t, args.threads, args.scipy)
    return cache(args.action)


if __name__ == "__main__":
    sys.exit(main())
