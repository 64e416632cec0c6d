"""One line on stderr for a slow stage of the work: ``nhfast: <what>... 12.3 s``.

A stage (code generation, a compiler call) that ends within :data:`THRESHOLD` seconds prints
nothing. A slower one prints its label as soon as it passes the threshold, so a long stage is
not silent, and its duration when it ends, on the same line.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from nhfast._background import in_background

__all__ = ["THRESHOLD", "stage"]

#: Seconds after which a stage is announced on stderr.
THRESHOLD = 2.0


def _write(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # closed or absent stderr: stay quiet
        pass


@contextmanager
def stage(label: str) -> Iterator[None]:
    """Time the body; if it takes longer than :data:`THRESHOLD`, say so on stderr.

    Parameters
    ----------
    label : str
        What the stage does, e.g. ``"generating C for 'sleigh' (CSE, 5 expressions)"``.
    """
    threshold = math.inf if in_background() else THRESHOLD  # a background build is silent
    start = time.perf_counter()
    lock = threading.Lock()
    state = {"shown": False, "done": False}

    def announce() -> None:
        with lock:
            if not state["done"]:
                _write(f"nhfast: {label}... ")
                state["shown"] = True

    timer = None
    if threshold < 3600.0:  # an infinite (or huge) threshold: never announce
        timer = threading.Timer(max(threshold, 0.0), announce)
        timer.daemon = True
        timer.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        if timer is not None:
            timer.cancel()
        elapsed = time.perf_counter() - start
        end = f"{elapsed:.1f} s" if ok else f"failed after {elapsed:.1f} s"
        with lock:
            state["done"] = True
            if state["shown"]:
                _write(f"{end}\n")
            elif elapsed > threshold:
                _write(f"nhfast: {label}... {end}\n")
