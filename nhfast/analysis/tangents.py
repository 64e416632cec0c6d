"""Tangent lanes of a structured field: a base state and tangent columns in one lane.

The variational equations ``M' = DX(x) M`` of a
:class:`~nhfast.structured_field.StructuredVectorField` are integrated in lanes that each carry
the base state ``x`` and ``m`` tangent columns (the forward-mode program
:func:`nhfast.codegen.differentiate.jvp_program` with ``columns = m``), so that the columns
step with their base: an adaptive integrator controls one error norm over ``(x, M)`` and every
column sees the same steps and the same base states.  ``m = n_state`` (the default of
:func:`nhfast.analysis.measure.flow_jacobian`) puts the whole Jacobian in one lane; smaller
``m`` splits it into ``ceil(n_state / m)`` lanes per trajectory (balanced: every lane gets the
same number of columns, the last padded with zero columns), which step together only for
fixed-step methods.

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


def column_split(n: int, columns: int | None) -> tuple[int, int]:
    """``(m, lanes)``: tangent columns per lane and lanes per trajectory for ``n`` columns.

    Parameters
    ----------
    n : int
        Number of columns (``n_state``).
    columns : int or None
        At most this many columns per lane (None: all ``n``).

    Raises
    ------
    ValueError
        If ``columns`` is not a positive int.
    """
    if columns is None:
        return n, 1
    lanes = -(-n // min(positive_int(columns, "columns"), n))
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
    """Initial lanes ``(x0, e_j ..)``: shape ``(k lanes, n + m n)``, trajectory-major."""
    k, n = x0.shape
    eye = np.zeros((lanes * m, n))
    eye[:n] = np.eye(n)  # column j of the identity in lane j // m, slot j % m
    cols = eye.reshape(lanes, m * n)
    return np.concatenate([np.repeat(x0, lanes, axis=0), np.tile(cols, (k, 1))], axis=1)


def tangent_split(y: np.ndarray, k: int, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``(x, M)`` from integrated lanes ``y`` of shape ``(k lanes, n_t, n + m n)``.

    Returns
    -------
    x : ndarray, shape (k, n_t, n)
        The base states of the first lane of each trajectory.
    M : ndarray, shape (k, n_t, n, n)
        ``M[..., :, j]``: tangent column ``j``.
    """
    lanes = y.shape[0] // k
    nt = y.shape[1]
    y = y.reshape(k, lanes, nt, n + m * n)
    cols = y[..., n:].reshape(k, lanes, nt, m, n)  # (k, lane, t, slot, state)
    cols = np.transpose(cols, (0, 2, 1, 3, 4)).reshape(k, nt, lanes * m, n)[:, :, :n]
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
