"""The ``nhfast`` command: argument parsing and printing over library calls.

``run`` and ``check`` call :func:`nhfast.experiments.run_example` and write the report
(:meth:`nhfast.analysis.Report.write`); given ``FILE.py:FACTORY`` instead of a catalogue
name they load a system of the user's (:func:`nhfast.experiments.user.load_user_system`,
what the factory may return: :mod:`nhfast.experiments.spec`) and run it through the same checks
(:func:`nhfast.experiments.runner.run_instance`); ``examples`` lists
:data:`nhfast.experiments.EXAMPLES`; ``cache`` prints :func:`nhfast._jit.cache_info` or
:func:`nhfast._jit.clear_cache`. With ``--scheduler ADDRESS`` (an existing Dask cluster) or
``--workers N`` (a local one) the batch of ``run`` is integrated on the cluster, one task per
``--chunk`` trajectories (:func:`nhfast.distributed.integrate_ensemble`).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import logging
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO, TypeVar

from nhfast import _jit
from nhfast._validate import positive, positive_int
from nhfast._version import __version__
from nhfast.analysis.report import render_text, verdict
from nhfast.analysis.result import Report
from nhfast.errors import CompilationError, IntegrationError, SystemSpecError, UsageError
from nhfast.experiments import CHECKS, EXAMPLES, FIXED_STEP_H, get_example, run_example
from nhfast.experiments.catalogue import INERTIAS, STRUCTURED_N
from nhfast.experiments.runner import run_instance
from nhfast.experiments.user import is_target, load_user_system
from nhfast.integrate import METHODS

__all__: list[str] = []

_T = TypeVar("_T")


def _argument(parse: Callable[[str], _T], expected: str) -> Callable[[str], _T]:
    """An argparse ``type``: ``parse(text)``, or the error "expected <expected>, got <text>"."""

    def convert(text: str) -> _T:
        try:
            return parse(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None

    return convert


def _at_least_zero(value: int) -> int:
    if value < 0:
        raise ValueError(value)
    return value


POSITIVE_INT = _argument(lambda s: positive_int(int(s), "value"), "a positive integer")
NONNEG_INT = _argument(lambda s: _at_least_zero(int(s)), "an integer >= 0")
POSITIVE_FLOAT = _argument(lambda s: positive(float(s), "value"), "a positive finite number")


def _key_value(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with ``VALUE`` a Python literal (a string when it is not one)."""
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise ValueError(text)
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value


def _param_value(text: str) -> tuple[str, float]:
    key, value = _key_value(text)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(text)
    return key, float(value)


KEY_VALUE = _argument(_key_value, "KEY=VALUE with KEY a Python name")
PARAM_VALUE = _argument(_param_value, "NAME=VALUE with VALUE a number")

_EPILOG = (
    "A verdict PASS means the finding agrees with the claim of the source (e.g. 'no basic "
    "invariant measure' for the particle with a != 0 passes when the checks find none). "
    "Exit codes: 0 every decided check passed, 1 a check failed or the run could not finish, "
    "2 bad arguments. NHFAST_CACHE_DIR sets the kernel cache."
)


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "example",
        metavar="EXAMPLE",
        help=f"catalogue example: {', '.join(EXAMPLES)} (see nhfast examples); or a system of "
        "your own, FILE.py:FACTORY: FACTORY() returns a SystemSpec, a VectorField, a "
        "NonholonomicSystem or a ChaplyginSystem (nhfast.experiments.spec)",
    )
    p.add_argument(
        "--n",
        type=POSITIVE_INT,
        help="size of sized examples (veselova, suslov: SO(n)); for FILE.py:FACTORY passed "
        "as FACTORY(n=N)",
    )
    p.add_argument(
        "--arg",
        action="append",
        default=[],
        type=KEY_VALUE,
        metavar="KEY=VALUE",
        help="FILE.py:FACTORY only: keyword argument of the factory (VALUE a Python literal, "
        "else a string); repeatable",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        type=PARAM_VALUE,
        metavar="NAME=VALUE",
        help="FILE.py:FACTORY only: value of a parameter of the system (adds to or overrides "
        "SystemSpec.params); repeatable",
    )
    p.add_argument(
        "--inertia",
        choices=list(INERTIAS),
        help="veselova: inertia operator (a-omega-a: A Om A, the default; physical: "
        f"J Om + Om J; pairwise: H o Om). Above n = {STRUCTURED_N} (a-omega-a) and for physical "
        "and pairwise "
        "the checks run in their structured numerical form; the report says which form ran",
    )
    p.add_argument("--lanes", type=POSITIVE_INT, default=256, help="trajectories (256)")
    p.add_argument("--t", type=POSITIVE_FLOAT, help="final time (default: the example's)")
    p.add_argument("--method", choices=list(METHODS), default="dop853", help="integrator")
    p.add_argument("--threads", type=POSITIVE_INT, default=2, help="threads (2)")
    p.add_argument("--out", help="report directory (default: ./nhfast-report-EXAMPLE)")
    p.add_argument("--seed", type=NONNEG_INT, default=0, help="seed of the initial states (0)")
    p.add_argument(
        "--rtol", type=POSITIVE_FLOAT, default=1e-10, help="adaptive methods and measure checks"
    )
    p.add_argument(
        "--atol", type=POSITIVE_FLOAT, default=1e-12, help="adaptive methods and measure checks"
    )
    p.add_argument("--h", type=POSITIVE_FLOAT, help=f"fixed-step methods ({FIXED_STEP_H})")
    p.add_argument(
        "--drift-tol",
        type=POSITIVE_FLOAT,
        default=1e-7,
        help="threshold of the energy and constraint checks (1e-7)",
    )
    cluster = p.add_mutually_exclusive_group()
    cluster.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the batch on this Dask cluster (e.g. tcp://host:8786), one task per chunk",
    )
    cluster.add_argument(
        "--workers",
        type=POSITIVE_INT,
        metavar="N",
        help="run the batch on a local Dask cluster of N single-threaded worker processes",
    )
    p.add_argument(
        "--chunk",
        type=POSITIVE_INT,
        help="trajectories per block or Dask task (default: a tenth of the batch, >= 64)",
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--quiet", action="store_true", help="print only the verdict lines")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nhfast",
        description="Nonholonomic mechanics: run catalogue examples, check invariant measures "
        "and Hamiltonisation, write reports; kernel-cache housekeeping.",
    )
    parser.add_argument("--version", action="version", version=f"nhfast {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    r = sub.add_parser(
        "run",
        help="integrate a catalogue example or your own system (FILE.py:FACTORY), check "
        "energy/constraints/integrals and the claims, write a report",
        description="Integrate a batch of trajectories of a catalogue example and run every "
        "check: energy and constraint drift, the invariant measure and phi-simplicity of the "
        "Chaplygin reduction (symbolic, compared with the sources), the density claims along "
        "the trajectories and the Hamiltonisation checks (numerical); where the symbolic forms "
        f"do not exist or cost too much (veselova above n = {STRUCTURED_N}, --inertia physical or "
        "pairwise) "
        "their structured numerical counterparts, and each check's figure 'form' says which "
        "ran. Prints the verdicts and figures and writes report.txt, report.json, PNG plots and "
        "the index report.md. A system of your own: FILE.py:FACTORY, where FACTORY(...) "
        "(the --arg KEY=VALUE pairs as keywords) returns a nhfast.experiments.SystemSpec "
        "(the system with parameter values, an initial-state sampler and its claims: "
        "density, first integrals, constraints) or the "
        "system alone; a check whose data is not given is reported as 'not run: needs ...'.",
        epilog=_EPILOG,
    )
    _add_run_options(r)
    ch = sub.add_parser(
        "check",
        help="check one claim (measure or hamiltonisation)",
        description="Only the measure checks (symbolic and numerical) or only the "
        "Hamiltonisation checks of a catalogue example, with the same report files as run.",
        epilog=_EPILOG,
    )
    ch.add_argument("what", choices=["measure", "hamiltonisation"])
    _add_run_options(ch)
    sub.add_parser("examples", help="list the example catalogue")
    c = sub.add_parser("cache", help="kernel cache: where it is, how big, clear it")
    c.add_argument("action", choices=["info", "clear"])
    return parser


def _validate_catalogue_arguments(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> None:
    """Arguments of ``run``/``check`` for a catalogue entry (parser.error when they do not fit)."""
    if args.example not in EXAMPLES:
        parser.error(
            f"argument EXAMPLE: invalid choice: {args.example!r} (choose from "
            f"{', '.join(EXAMPLES)}, or give a system of your own as FILE.py:FACTORY)"
        )
    example = get_example(args.example)
    if args.n is not None and example.n_default is None:
        parser.error(f"argument --n: example {args.example!r} has no size parameter")
    if args.n is not None and args.n < example.n_min:
        parser.error(f"argument --n: example {args.example!r} needs n >= {example.n_min}")
    if args.inertia is not None and args.inertia not in example.inertias:
        parser.error(f"argument --inertia: example {args.example!r} has no inertia option")
    for option in ("arg", "param"):
        if getattr(args, option):
            parser.error(f"argument --{option}: only for a system of your own (FILE.py:FACTORY)")


def _run(args: argparse.Namespace, checks: Sequence[str], client: Any) -> Report:
    """The report of ``run``/``check``: a catalogue entry, or a user's FILE.py:FACTORY."""
    options = dict(
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
        log=None if args.quiet else print,
        client=client,
        chunk=args.chunk,
    )
    if not is_target(args.example):
        report, _ = run_example(args.example, n=args.n, inertia=args.inertia, **options)
        return report
    log = print if not args.quiet else (lambda _msg: None)
    kwargs = dict(args.arg)
    if args.n is not None:
        kwargs["n"] = args.n
    t0 = time.perf_counter()
    log(f"building {args.example} ...")
    inst = load_user_system(args.example, kwargs, dict(args.param))
    build = time.perf_counter() - t0
    log(f"  done in {build:.1f} s")
    report, _ = run_instance(
        inst, settings=_user_settings(kwargs, args.param), timings={"build": build}, **options
    )
    return report


def _user_settings(kwargs: dict[str, Any], params: list[tuple[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if kwargs:
        out["factory arguments"] = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    if params:
        out["parameters given"] = ", ".join(f"{k}={v:g}" for k, v in params)
    return out


def run_command(
    parser: argparse.ArgumentParser, args: argparse.Namespace, checks: Sequence[str]
) -> int:
    """``nhfast run`` / ``nhfast check``: run the example, print and write the report."""
    user = is_target(args.example)
    if user and args.inertia is not None:
        parser.error("argument --inertia: only for catalogue examples (veselova)")
    if not user:
        _validate_catalogue_arguments(parser, args)
    stem = args.example.rpartition(":")[2] if user else args.example
    out = Path(args.out) if args.out else Path(f"nhfast-report-{stem}")
    if out.exists() and not out.is_dir():
        parser.error(f"argument --out: {out} exists and is not a directory")
    try:
        # only the drift run's batch goes to the cluster (``check`` has none)
        cluster = _dask_client(parser, args) if "drift" in checks else contextlib.nullcontext()
        with cluster as client:
            report = _run(args, checks, client)
    except SystemSpecError as exc:
        # a user's file, factory or return value that does not fit: one line, exit code 2
        if os.environ.get("NHFAST_DEBUG"):
            raise
        print(f"nhfast: error: {exc}", file=sys.stderr)
        return 2
    except UsageError as exc:
        parser.error(f"argument {exc}")
    except (
        CompilationError,
        IntegrationError,
        ArithmeticError,
        ValueError,
        OSError,
        MemoryError,
    ) as exc:
        # a run that cannot finish (compiler, integrator, a check rejecting its data, the file
        # system): one line, exit code 1; NHFAST_DEBUG=1 shows the traceback
        if os.environ.get("NHFAST_DEBUG"):
            raise
        print(f"nhfast: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    try:
        files = report.write(out, plots=not args.no_plots)
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


#: Slower housekeeping of a local Dask cluster: its idle processes take some 6 % of a core
#: instead of 15 % (measured on 2 workers), which a batch on a few cores feels.
QUIET_DASK = {
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "1s",
    # Dask's sampling profiler reads every thread's stack 100 times a second: ~3 % of a core
    # per worker, growing with wall time (the CLI's cluster has no dashboard to show it)
    "distributed.worker.profile.enabled": False,
}


#: Seconds to reach a scheduler (the port answered a TCP connection first).
SCHEDULER_TIMEOUT = 10


def _unreachable(address: str, timeout: float = 3.0) -> str:
    """Why a TCP scheduler address cannot be reached ('' if it answers, or is not TCP)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme not in ("tcp", "tls"):
        return ""
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        return f"{exc}"
    if host is None or port is None:
        return "expected HOST:PORT (e.g. tcp://127.0.0.1:8786)"
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return ""
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__


@contextlib.contextmanager
def _dask_client(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Iterator[Any]:
    """The Dask client of ``--scheduler`` / ``--workers`` (a LocalCluster), or None."""
    if args.scheduler is None and args.workers is None:
        yield None
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        option = "--scheduler" if args.scheduler is not None else "--workers"
        parser.error(
            f"argument {option}: needs dask.distributed (pip install 'nhfast[distributed]')"
        )
    if args.scheduler is not None:
        reason = _unreachable(args.scheduler)
        if reason:
            parser.error(f"argument --scheduler: cannot reach {args.scheduler!r}: {reason}")
        with Client(args.scheduler, timeout=SCHEDULER_TIMEOUT) as client:
            yield client
        return
    import dask

    with (
        dask.config.set(QUIET_DASK),
        LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def examples_command() -> int:
    """``nhfast examples``: the catalogue, one line per example."""
    width = max(len(k) for k in EXAMPLES)
    for name, ex in EXAMPLES.items():
        print(f"{name:<{width}}  {ex.summary}")
    return 0


def cache_command(action: str) -> int:
    """``nhfast cache info`` / ``nhfast cache clear``."""
    if action == "info":
        info = _jit.cache_info()
        where = "" if info.is_directory else " (not a directory: nothing can be cached there)"
        print(
            f"cache: {info.path}{where}\n"
            f"entries: {info.entries} ({info.sources} generated sources, "
            f"{info.entries - info.sources} compiled libraries)\n"
            f"size: {info.size / 1e6:.2f} MB"
        )
        if info.builds:
            print(
                f"build directories: {info.builds} ({info.stale_builds} abandoned: older than "
                "an hour or left by a process that has ended; 'nhfast cache clear' removes them)"
            )
        return 0
    done = _jit.clear_cache()
    builds = done.stale_builds_removed
    also = f" and {builds} abandoned build directories" if builds else ""
    print(f"removed {done.removed} entries{also} from {done.path}")
    for path, reason in done.failed:
        print(f"nhfast: error: cannot remove {path}: {reason}", file=sys.stderr)
    return 1 if done.failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nhfast`` command; returns the exit code.

    Exit codes: 0 success (every decided check passed), 1 a check failed or the run could not
    finish (compiler, integration, file system), 2 bad arguments.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        if not os.environ.get("NHFAST_DEBUG"):
            warnings.showwarning = _show_warning
        if args.command == "run":
            return run_command(parser, args, CHECKS)
        if args.command == "check":
            return run_command(parser, args, (args.what,))
        if args.command == "examples":
            return examples_command()
        return cache_command(args.action)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """Warnings as one line ``nhfast: warning: <Category>: <message>`` (no source line)."""
    print(f"nhfast: warning: {category.__name__}: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
