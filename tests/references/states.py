"""Sample states of the rigid bodies' ``(gamma, m)`` (shared by tests)."""

from __future__ import annotations

import numpy as np


def sphere_states(n: int, lanes: int, seed: int) -> np.ndarray:
    """Rows ``(gamma, m)`` with ``|gamma| = 1`` and ``gamma . m = 0``, shape ``(lanes, 2 n)``."""
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(lanes, n))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    m = rng.normal(size=(lanes, n))
    m -= np.sum(m * g, axis=1, keepdims=True) * g
    return np.hstack([g, m])
