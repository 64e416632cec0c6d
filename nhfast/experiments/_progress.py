"""A small text progress bar on stderr for runs that take more than a few seconds, and a
heartbeat for stages that cannot count their work.

No dependency: the bar redraws one line with a carriage return, at most a few times per
second, and only when the stream is a terminal (or when ``enabled=True``). Finished runs
leave a single summary line. :class:`Heartbeat` says every few seconds that a stage (a
symbolic derivation, a compiler call) is still running, so a long run is never silent.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

__all__ = ["Progress", "Heartbeat", "HEARTBEAT_INTERVAL"]

#: Seconds between two lines of a :class:`Heartbeat`.
HEARTBEAT_INTERVAL = 5.0


class Progress:
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

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Heartbeat:
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

    def __enter__(self) -> Heartbeat:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
