"""Progress on stderr, so that no stage of the work is silent for long.

* :func:`stage`: one line for a slow stage (code generation, a compiler call), ``nhfast:
  <what>... 12.3 s``. A stage that ends within :data:`THRESHOLD` seconds prints nothing; a
  slower one prints its label as soon as it passes the threshold and its duration when it
  ends, on the same line.
* :class:`Progress`: a text bar for a job of equal units (blocks of trajectories), redrawn on
  one line at most a few times per second, only on a terminal (or when ``enabled=True``),
  leaving one summary line.
* :class:`Heartbeat`: every few seconds, that a stage which cannot count its work (a symbolic
  derivation) is still running.

No dependency beyond the standard library.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import TextIO, TypeVar

from nhfast._background import in_background

__all__: list[str] = []

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


#: Seconds between two lines of a :class:`Heartbeat`.
HEARTBEAT_INTERVAL = 5.0


_C = TypeVar("_C", bound="_Closing")


class _Closing:
    """A context manager whose exit calls ``close()``."""

    def close(self) -> None:  # pragma: no cover - every subclass has its own
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Progress(_Closing):
    """Progress of a job made of ``total`` equal units (e.g. blocks of trajectories).

    Parameters
    ----------
    total : int
        Number of units, ``>= 1``.
    description : str
        Shown before the bar.
    stream : file-like, optional
        Where to draw; default ``sys.stderr``.
    enabled : bool, optional
        Draw or not; default: only if ``stream`` is a terminal.
    width : int
        Characters of the bar itself.
    min_interval : float
        Smallest time in seconds between two redraws.

    Examples
    --------
    >>> with Progress(4, "integrating", enabled=False) as bar:
    ...     for _ in range(4):
    ...         bar.update()
    """

    def __init__(
        self,
        total: int,
        description: str = "",
        stream: TextIO | None = None,
        enabled: bool | None = None,
        width: int = 30,
        min_interval: float = 0.2,
    ) -> None:
        if not isinstance(total, int) or isinstance(total, bool) or total < 1:
            raise ValueError(f"total must be an int >= 1, got {total!r}")
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"width must be an int >= 1, got {width!r}")
        self.total = total
        self.description = description
        self.stream = sys.stderr if stream is None else stream
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty()) if callable(isatty) else False
        self.enabled = enabled
        self.width = width
        self.min_interval = min_interval
        self.done = 0
        self._start = time.perf_counter()
        self._last_draw = -float("inf")

    @property
    def elapsed(self) -> float:
        """Seconds since the bar was created."""
        return time.perf_counter() - self._start

    def line(self) -> str:
        """The current bar as text (without carriage return)."""
        frac = self.done / self.total
        filled = int(round(frac * self.width))
        bar = "#" * filled + "." * (self.width - filled)
        eta = ""
        if 0 < self.done < self.total:
            eta = f", ~{self.elapsed * (self.total - self.done) / self.done:.0f} s left"
        head = f"{self.description} " if self.description else ""
        return f"{head}[{bar}] {self.done}/{self.total} {self.elapsed:.1f} s{eta}"

    def update(self, units: int = 1) -> None:
        """Mark ``units`` more units as done and redraw if due."""
        self.done = min(self.total, self.done + units)
        now = time.perf_counter()
        if self.enabled and (now - self._last_draw >= self.min_interval or self.done == self.total):
            self._last_draw = now
            self.stream.write("\r" + self.line())
            self.stream.flush()

    def close(self) -> None:
        """Redraw the bar a last time and end its line (nothing happens when disabled)."""
        if self.enabled:
            self.stream.write("\r" + self.line() + "\n")
            self.stream.flush()
            self.enabled = False


class Heartbeat(_Closing):
    """Say ``"  ... <label>: still running, 12 s"`` every ``interval`` seconds until closed.

    A daemon thread writes through ``say`` (e.g. ``print``); nothing is said by a stage that
    ends within ``interval``.

    Parameters
    ----------
    say : callable
        Receives each line.
    label : str
        What is running.
    interval : float
        Seconds between lines, ``> 0``.

    Examples
    --------
    >>> lines = []
    >>> with Heartbeat(lines.append, "work", interval=60.0):
    ...     pass
    >>> lines
    []
    """

    def __init__(
        self, say: Callable[[str], object], label: str, interval: float = HEARTBEAT_INTERVAL
    ) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be > 0, got {interval!r}")
        self.say = say
        self.label = label
        self.interval = float(interval)
        self.beats = 0
        self._start = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.beats += 1
            try:
                self.say(f"  ... {self.label}: still running, {self.elapsed:.0f} s")
            except (OSError, ValueError):  # closed stream: stay quiet
                return

    @property
    def elapsed(self) -> float:
        """Seconds since the heartbeat started."""
        return time.perf_counter() - self._start

    def close(self) -> None:
        """Stop (and wait for) the thread."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
