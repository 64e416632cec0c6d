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

_FLOAT = np.dtype(float)
_all = np.logical_and.reduce  # ndarray.all without its Python layer

__all__: list[str] = []


def positive(value: Any, name: str) -> float:
    """``value`` as a positive finite float, else ``TypeError``/``ValueError`` naming ``name``.

    Strings are refused (``h="0.1"`` is a mistake to point at, not to parse)."""
    if type(value) is float and 0.0 < value < math.inf:
        return value  # the common case (default tolerances) without a conversion
    if isinstance(value, str | bytes):
        raise TypeError(f"{name} must be a positive number, got the string {value!r}")
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


def positive_ints(**values: Any) -> None:
    """:func:`positive_int` for each keyword (``threads=..., block=...``), in order."""
    for v in values.values():  # the common case: plain ints >= 1, no call per value
        if type(v) is not int or v < 1:
            break
    else:
        return
    for name, value in values.items():
        positive_int(value, name)


def is_dask_array(a: Any) -> bool:
    """Whether ``a`` is a Dask array (by its interface: Dask need not be installed)."""
    return hasattr(a, "to_delayed") and hasattr(a, "chunks") and hasattr(a, "dask")


def flag(value: Any, name: str) -> bool:
    """``value`` as a bool (Python's or NumPy's), else ``TypeError`` naming ``name``."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__}")
    return bool(value)


def optional_order(value: Any, name: str, upper: int) -> int:
    """``value`` as an int in ``[1, upper]``, or 0 for None (an order chosen elsewhere)."""
    if value is None:
        return 0
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer or None, got {type(value).__name__}")
    if not 1 <= value <= upper:
        raise ValueError(f"{name} must be in [1, {upper}] or None, got {value}")
    return int(value)


def real_array(value: Any, name: str, ndims: Sequence[int] | None = None) -> np.ndarray:
    """``value`` as a finite float array with ``ndim`` in ``ndims``.

    Complex input is refused rather than silently truncated to its real part.
    """
    if type(value) is np.ndarray and value.dtype == _FLOAT:
        a = value  # fast path: already a float array (not complex, nothing to convert)
    else:
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
    if not _all(np.isfinite(a), axis=None):
        raise ValueError(f"{name} contains NaN or infinite values")
    return a


def state_rows(value: Any, n: int, name: str = "x0", what: str = "") -> np.ndarray:
    """One state ``(n,)`` or a batch ``(n_traj, n)`` as a C-contiguous ``(n_traj, n)`` array.

    ``what`` is appended to the shape in the message (e.g. ``" holding (s, p)"``).
    """
    x = real_array(value, name, (1, 2))
    if x.shape[-1] != n:
        raise ValueError(f"{name} must have shape ({n},) or (n_traj, {n}){what}; got {x.shape}")
    x = x.reshape(-1, n)
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


def output_times(value: Any, name: str = "t_eval", increasing: bool = False) -> np.ndarray:
    """Output times: a non-empty 1-d finite array, strictly monotonic (or increasing)."""
    if type(value) is list and len(value) == 2 and all(type(v) is float for v in value):
        t0, t1 = value  # fast path for the common [t0, t1] of Python floats
        if math.isfinite(t0) and math.isfinite(t1) and (t1 > t0 if increasing else t1 != t0):
            return np.array(value)
    t = real_array(value, name, (1,))
    if t.size < 1:
        raise ValueError(f"{name} must hold at least one time")
    if t.size == 2:  # the common [t0, t1]: two floats, no arrays
        t0, t1 = t.tolist()
        up, down = t1 > t0, t1 < t0
    else:
        dt = np.diff(t)
        up = bool((dt > 0).all())
        down = not up and bool((dt < 0).all())
    if increasing and not up:
        raise ValueError(f"{name} must be strictly increasing")
    if not (up or down):
        raise ValueError(f"{name} must be strictly monotonic")
    return t if t.flags.c_contiguous else np.ascontiguousarray(t)


def params_rows(
    params: Any,
    symbols: Sequence[Any],
    rows: int | tuple[int, ...],
    name: str = "params",
    full: bool = False,
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
    full : bool
        Always return ``(R, n_params)`` (a shared row repeated).

    Returns
    -------
    numpy.ndarray
        Shape ``(1, n_params)`` for one shared row, else ``(R, n_params)``; ``(1, 0)`` for a
        system without parameters.
    """
    if full:
        par = params_rows(params, symbols, rows, name)
        lead = (rows,) if isinstance(rows, numbers.Integral) else tuple(rows)
        size = int(np.prod(lead, dtype=np.int64))
        return np.ascontiguousarray(np.broadcast_to(par, (size, par.shape[1])))
    lead = (rows,) if isinstance(rows, numbers.Integral) else tuple(rows)
    npar = len(symbols)
    if npar == 0:
        if params is not None and np.size(params) != 0:
            raise ValueError(
                f"{name} given, but the system has no parameters (got shape {np.shape(params)})"
            )
        return np.zeros((1, 0))
    if params is None:
        names = ", ".join(map(str, symbols))
        raise ValueError(f"{name} is required: missing values for {names}")
    par = real_array(params, name)
    shape = par.shape
    if shape == (npar,) or shape == (*lead, npar):
        par = par.reshape(-1, npar)
        return par if par.flags.c_contiguous else np.ascontiguousarray(par)
    names = ", ".join(map(str, symbols))  # only for the message: str() of a symbol is slow
    raise ValueError(
        f"{name} must have shape ({npar},) or {(*lead, npar)} for parameters {names}; "
        f"got {par.shape}"
    )
