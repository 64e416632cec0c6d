"""Allocations sized by the user's arguments, checked against the memory available first.

An output of ``n_traj x n_t x n_state`` doubles, an event record of ``max_events`` per
trajectory, a system of ``n = 10^5``: each is estimated before it is allocated, and refused
with :class:`~nhfast.errors.InsufficientMemoryError` (the size it needs and the size there is)
instead of being killed by the operating system minutes later.
"""

from __future__ import annotations

import os

from nhfast.errors import InsufficientMemoryError

__all__: list[str] = []

#: Allocations below this many bytes are not checked (reading the memory available costs
#: tens of microseconds, more than a small call).
SMALL = 1 << 26

#: Override of the available bytes (tests; a job's memory limit): ``NHFAST_MEMORY_LIMIT``.
_ENV = "NHFAST_MEMORY_LIMIT"


def available() -> int | None:
    """Bytes this process may still allocate: ``NHFAST_MEMORY_LIMIT``, else ``MemAvailable``
    of ``/proc/meminfo``, else free physical pages; None if nothing tells."""
    env = os.environ.get(_ENV)
    if env:
        try:
            return int(float(env))
        except ValueError:
            raise ValueError(f"{_ENV}={env!r} must be a number of bytes") from None
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def describe(nbytes: float) -> str:
    """``nbytes`` in readable units."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{nbytes:.0f} bytes"


def check(nbytes: float, what: str, fix: str = "") -> None:
    """Raise if ``nbytes`` exceed the memory available.

    Parameters
    ----------
    nbytes : float
        The estimate (a float: products of sizes may exceed any integer type).
    what : str
        What needs it, with the arguments that size it (``"the output y of 10^6
        trajectories x 1001 times x 128 states"``).
    fix : str
        How to ask for less.
    """
    if nbytes < SMALL:
        return
    have = available()
    if have is None or nbytes <= have:
        return
    raise InsufficientMemoryError(
        f"{what} needs {describe(nbytes)}, more than the {describe(have)} of memory "
        f"available{': ' + fix if fix else ''}"
    )
