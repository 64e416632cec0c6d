"""Plain records shared by every check and by the report renderers.

A check (measure, Hamiltonisation, drift, ...) returns a :class:`Check`; a run collects checks in
a :class:`Report`. Renderers (text table, JSON, PNG plots) only read these records, so a new
check needs no change to the renderers.
"""

from __future__ import annotations

from nhfast._records import Check, jsonable  # noqa: F401 (re-exported)
from nhfast.analysis.report import Report

__all__ = [
    "Check",
    "Report",
]
