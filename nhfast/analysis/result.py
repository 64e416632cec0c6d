"""Plain records shared by every check and by the report renderers.

A check (measure, Hamiltonisation, drift, ...) returns a :class:`Check`; a run collects checks in
a :class:`Report`. Renderers (text table, JSON, PNG plots) only read these records, so a new
check needs no change to the renderers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nhfast._records import Check, jsonable

__all__ = [
    "Check",
    "Report",
]


@dataclass
class Report:
    """A run: what was integrated, how, and every check made on it.

    Attributes
    ----------
    title
        Heading, e.g. ``"Veselova rigid body on SO(6)"``.
    system
        Description of the system (name, dimension, parameters) as figures.
    settings
        How it was run (method, tolerances, lanes, final time, threads, seed).
    checks
        The checks in the order they should be shown.
    timings
        Wall-clock seconds per stage (``"codegen"``, ``"compile"``, ``"integrate"``, ...).
    """

    title: str
    system: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-ready types."""
        return {
            "title": self.title,
            "system": jsonable(self.system),
            "settings": jsonable(self.settings),
            "checks": [c.to_dict() for c in self.checks],
            "timings": jsonable(self.timings),
        }
