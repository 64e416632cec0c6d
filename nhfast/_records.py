"""The verdict record every check returns, symbolic or numerical, and its JSON conversion.

It sits at the bottom of the package so that the symbolic tests (``nhfast.symbolic``) and the
trajectory checks (``nhfast.analysis``) return one record type; renderers only read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__: list[str] = []


def jsonable(value: Any) -> Any:
    """Convert NumPy scalars/arrays, SymPy objects and nested containers to JSON types.

    Parameters
    ----------
    value
        Any figure stored in a :class:`Check` or :class:`Report`.

    Returns
    -------
    object
        Built from ``dict``, ``list``, ``str``, ``int``, ``float``, ``bool`` and ``None``;
        non-finite floats become the strings ``"nan"``, ``"inf"``, ``"-inf"``.
    """
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if np.isfinite(v):
            return v
        return "nan" if np.isnan(v) else ("inf" if v > 0 else "-inf")
    if value is None or isinstance(value, str):
        return value
    return str(value)


@dataclass
class Check:
    """The outcome of one check, with the figures behind it.

    Attributes
    ----------
    name
        What was checked, readable without the code, e.g.
        ``"invariant density (A gamma, gamma)^(-2)"``.
    holds
        The verdict: ``True`` (holds), ``False`` (fails) or ``None`` (not decided).
    statement
        One plain sentence giving the verdict and its reason, e.g.
        ``"preserved: max |defect| 3.1e-12 <= threshold 1.0e-08"``.
    figures
        Scalar figures (floats, ints, strings) for tables and JSON.
    series
        Time series for plots: ``"t"`` (times) plus named arrays of the same length, e.g.
        ``{"t": t, "max |defect|": d}``.
    samples
        Per-trajectory values for histograms, e.g. ``{"final defect": d}``.
    """

    name: str
    holds: bool | None
    statement: str
    figures: dict[str, Any] = field(default_factory=dict)
    series: dict[str, np.ndarray] = field(default_factory=dict)
    samples: dict[str, np.ndarray] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-ready types."""
        return jsonable(
            {
                "name": self.name,
                "holds": self.holds,
                "statement": self.statement,
                "figures": self.figures,
                "series": self.series,
                "samples": self.samples,
            }
        )
