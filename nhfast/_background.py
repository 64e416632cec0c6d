"""Builds that run beside the caller: kernels that only make later calls faster.

A Taylor kernel unrolled for one order gives the same bits as the general kernel (the same
operations in the same order), only sooner; a call that would wait for its compiler runs on
the general kernel and asks for the unrolled one here, so that no call in a loop over
tolerances compiles (:func:`nhfast._fastpath.taylor_kernel`).  Each job runs once, in a
daemon thread (an interpreter that exits does not wait for it; the kernel cache publishes
atomically, so an interrupted build leaves nothing behind).  ``NHFAST_BACKGROUND_BUILDS=0``
runs the jobs in the caller instead.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable

__all__: list[str] = []

_lock = threading.Lock()
_jobs: dict[Hashable, threading.Thread] = {}
_local = threading.local()


def enabled() -> bool:
    """Whether jobs run in the background (``NHFAST_BACKGROUND_BUILDS`` is not ``0``)."""
    return os.environ.get("NHFAST_BACKGROUND_BUILDS", "1").strip() != "0"


def in_background() -> bool:
    """Whether the current thread runs a background job (its stages print nothing)."""
    return getattr(_local, "active", False)


def _run(job: Callable[[], object]) -> None:
    _local.active = True
    try:
        job()
    except Exception:  # noqa: BLE001 - a failed speed-up: the caller keeps the general kernel
        pass


def submit(key: Hashable, job: Callable[[], object]) -> bool:
    """Run ``job()`` once per ``key``; returns True if it started now.

    The job's exceptions are dropped (it only makes later calls faster; the same build in the
    caller would raise them).  Without background builds the job runs here and now.
    """
    with _lock:
        if key in _jobs:
            return False
        if not enabled():
            _jobs[key] = threading.current_thread()
            run_here = True
        else:
            thread = threading.Thread(target=_run, args=(job,), name="nhfast-build", daemon=True)
            _jobs[key] = thread
            run_here = False
    if run_here:
        _run(job)
        _local.active = False
    else:
        thread.start()
    return True


def pending() -> list[Hashable]:
    """Keys of the jobs still running."""
    with _lock:
        return [k for k, t in _jobs.items() if t.is_alive() and t is not threading.current_thread()]


def wait(timeout: float | None = None) -> bool:
    """Wait for the running jobs (benchmarks, tests: the kernels they build in place before a
    timing); returns True if none is left."""
    with _lock:
        threads = [t for t in _jobs.values() if t is not threading.current_thread()]
    for t in threads:
        t.join(timeout)
    return not pending()
