"""What machine a benchmark ran on."""

from __future__ import annotations

from pathlib import Path


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or ``"?"``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"
