"""Tangent lanes of a structured field: tangent columns that step with their base state.

The variational equations ``M' = DX(x) M`` of a
:class:`~nhfast.structured_field.StructuredVectorField` are integrated in lanes that each carry
the base state ``x`` and ``m`` tangent columns (the forward-mode program
:func:`nhfast.codegen.differentiate.jvp_program` with ``columns = m``); a trajectory's Jacobian
spans ``ceil(n_state / m)`` lanes (balanced: every lane gets the same number of columns, the
last padded with zero columns).  Every column steps with its base state, in one of two ways:

* several lanes per trajectory (the default, ``m = 1``): the tangent columns are scaled by
  :data:`TANGENT_SCALE` (``2^-200``, a power of two: scaling and unscaling are exact, and the
  variational equations are linear in them).  Their entries are then far below ``atol``, so
  the step-size control of every lane sees the base state only: all lanes of a trajectory take
  the same steps and hold bit-identical base states, and the columns keep the SIMD width of
  many lanes and the small kernel of one column.  Their error is not controlled by itself,
  only through the base's steps.
* one lane per trajectory (``m = n_state``): the columns are not scaled and the step-size
  control covers ``(x, M)``; the generated code, and its compile time, grow with ``m``, and
  one lane per trajectory leaves the SIMD lanes of the kernels idle.

The tangent field is integrated without its own domain watch (which would compile its whole
right-hand side a second time, for the event library): :func:`check_domain` evaluates the
base field's domain conditions at the output rows, as ``integrate`` does for these methods.
"""

from __future__ import annotations

import numpy as np

from nhfast._abi import LANE
from nhfast._cache import memo
from nhfast._validate import positive_int
from nhfast.codegen.differentiate import jvp_program
from nhfast.codegen.numpy_backend import numpy_rows
from nhfast.errors import IntegrationError
from nhfast.structured_field import StructuredVectorField

__all__: list[str] = []


#: Factor of the tangent columns when a trajectory spans several lanes (see the module
#: docstring): ``2^-200``, so that ``TANGENT_SCALE |M|`` stays far below any usable ``atol``.
TANGENT_SCALE = 2.0**-200


def column_split(n: int, columns: int | None) -> tuple[int, int]:
    """``(m, lanes)``: tangent columns per lane and lanes per trajectory for ``n`` columns.

    Parameters
    ----------
    n : int
        Number of columns (``n_state``).
    columns : int or None
        At most this many columns per lane (None: one).

    Raises
    ------
    ValueError
        If ``columns`` is not a positive int.
    """
    cap = 1 if columns is None else positive_int(columns, "columns")
    lanes = -(-n // min(cap, n))
    return -(-n // lanes), lanes


def tangent_field(vf: StructuredVectorField, m: int) -> StructuredVectorField:
    """The field of states ``(x, dx_1, .., dx_m)`` and right-hand side
    ``(X(x), DX(x) dx_1, .., DX(x) dx_m)``; built once per field and ``m`` (cached on ``vf``).

    Raises
    ------
    NotImplementedError
        For programs with statements without a tangent rule.
    """
    return memo(
        vf,
        ("tangent field", m),
        lambda: StructuredVectorField(
            jvp_program(vf.program, "rhs", columns=m),
            name=f"{vf.name}_jvp{m}",
            domain=vf.domain or None,
        ),
    )


def tangent_initial(x0: np.ndarray, m: int, lanes: int) -> np.ndarray:
    """Initial lanes ``(x0, e_j ..)``: shape ``(k lanes, n + m n)``, trajectory-major; the
    tangents scaled by :data:`TANGENT_SCALE` when ``lanes > 1``."""
    k, n = x0.shape
    eye = np.zeros((lanes * m, n))
    eye[:n] = np.eye(n) * (TANGENT_SCALE if lanes > 1 else 1.0)  # column j: lane j // m
    cols = eye.reshape(lanes, m * n)
    return np.concatenate([np.repeat(x0, lanes, axis=0), np.tile(cols, (k, 1))], axis=1)


def tangent_split(y: np.ndarray, k: int, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``(x, M)`` from integrated lanes ``y`` of shape ``(k lanes, n_t, n + m n)`` started
    by :func:`tangent_initial`.

    Returns
    -------
    x : ndarray, shape (k, n_t, n)
        The base states of the first lane of each trajectory.
    M : ndarray, shape (k, n_t, n, n)
        ``M[..., :, j]``: tangent column ``j`` (unscaled).
    """
    lanes = y.shape[0] // k
    nt = y.shape[1]
    y = y.reshape(k, lanes, nt, n + m * n)
    cols = y[..., n:].reshape(k, lanes, nt, m, n)  # (k, lane, t, slot, state)
    cols = np.transpose(cols, (0, 2, 1, 3, 4)).reshape(k, nt, lanes * m, n)[:, :, :n]
    if lanes > 1:
        cols = cols / TANGENT_SCALE
    return y[:, 0, :, :n], np.swapaxes(cols, -1, -2)


def check_domain(
    vf: StructuredVectorField, x: np.ndarray, times: np.ndarray, par: np.ndarray
) -> None:
    """Raise where a base trajectory ``x`` (k, n_t, n_state) has an output row outside the
    domain of ``vf`` (a condition ``expr > 0`` fails).

    Raises
    ------
    IntegrationError
        Naming the first such trajectory, the condition and the output time; ``status``
        ``left_domain`` for those trajectories.
    """
    if not vf.domain:
        return
    k, nt, n = x.shape
    names = list(vf.domain)
    rows = numpy_rows([*vf.states, *vf.params], list(vf.domain.values()))
    pr = np.repeat(par, nt, axis=0) if vf.n_params else np.zeros((k * nt, 0))
    vals = np.asarray(rows(x.reshape(k * nt, n), pr)).reshape(k, nt, len(names))
    outside = ~np.all(vals > 0, axis=2)
    hit = np.flatnonzero(outside.any(axis=1))
    if not hit.size:
        return
    j = int(hit[0])
    i = int(np.argmax(outside[j]))
    c = int(np.argmax(~(vals[j, i] > 0)))
    status = np.where(outside.any(axis=1), LANE["left_domain"], LANE["ok"]).astype(np.int32)
    raise IntegrationError(
        f"{hit.size} of {k} trajectories left the domain of {vf.name!r}; first: #{j}: "
        f"domain[{names[c]!r}] ({vf.domain[names[c]]} > 0) is {vals[j, i, c]:.3g} at the "
        f"output time t = {times[i]:.6g}",
        status,
    )
