"""Argument checks shared by the public front ends (one message per kind of mistake)."""

from __future__ import annotations

import math
from typing import Any


def positive(value: Any, name: str) -> float:
    """``value`` as a positive finite float, else ``TypeError``/``ValueError`` naming ``name``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a positive number, got {value!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return v
