"""Argument checks shared by every front end: one function, one message per kind of mistake.

Each check names the argument it was given, what was expected and what arrived, and raises
``TypeError`` for a value of the wrong kind and ``ValueError`` for one of the wrong size.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["positive", "positive_int", "real_array", "params_rows"]


def positive(value: Any, name: str) -> float:
    """``value`` as a positive finite float, else ``TypeError``/``ValueError`` naming ``name``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a positive number, got {value!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return v


def positive_int(value: Any, name: str, upper: int | None = None) -> int:
    """``value`` as an int in ``[1, upper]``, else ``ValueError`` naming ``name``."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if upper is not None and value > upper:
        raise ValueError(f"{name} must be at most {upper}, got {value!r}")
    return int(value)


def real_array(value: Any, name: str, ndims: Sequence[int] | None = None) -> np.ndarray:
    """``value`` as a finite float array with ``ndim`` in ``ndims``.

    Complex input is refused rather than silently truncated to its real part.
    """
    if np.iscomplexobj(value):
        raise TypeError(f"{name} must be real, got complex values")
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of real numbers: {exc}") from None
    if ndims is not None and a.ndim not in ndims:
        raise ValueError(
            f"{name} must have {' or '.join(map(str, ndims))} dimension(s), got shape {a.shape}"
        )
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return a


def params_rows(
    params: Any, symbols: Sequence[Any], rows: int | tuple[int, ...], name: str = "params"
) -> np.ndarray:
    """Parameter values as a C-contiguous ``(1, n_params)`` or ``(R, n_params)`` array.

    Parameters
    ----------
    params : array_like or None
        One row of values, shape ``(n_params,)``, or one row per point, shape
        ``(*rows, n_params)``.
    symbols : sequence
        The system's parameter symbols (their names go into the messages).
    rows : int or tuple of int
        The leading shape of the points the parameters go with (``R = prod(rows)``).
    name : str
        The argument's name in messages.

    Returns
    -------
    numpy.ndarray
        Shape ``(1, n_params)`` for one shared row, else ``(R, n_params)``; ``(1, 0)`` for a
        system without parameters.
    """
    lead = (rows,) if isinstance(rows, numbers.Integral) else tuple(rows)
    npar = len(symbols)
    if npar == 0:
        if params is not None and np.size(params) != 0:
            raise ValueError(
                f"{name} given, but the system has no parameters (got shape {np.shape(params)})"
            )
        return np.zeros((1, 0))
    names = ", ".join(map(str, symbols))
    if params is None:
        raise ValueError(f"{name} is required: missing values for {names}")
    par = real_array(params, name)
    if par.shape == (npar,):
        return np.ascontiguousarray(par.reshape(1, npar))
    if par.shape == (*lead, npar):
        return np.ascontiguousarray(par.reshape(-1, npar))
    raise ValueError(
        f"{name} must have shape ({npar},) or {(*lead, npar)} for parameters {names}; "
        f"got {par.shape}"
    )
