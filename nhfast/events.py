"""Events along trajectories: the user's event functions and the watch on a system's domain.

An event function g(t, x, p) fires where it crosses zero over a step; the core locates the
crossing on the step's polynomial (DOP853's continuous extension or the Taylor series) and
records it. The conditions ``expr > 0`` of a system's ``domain`` (a chart's domain) are
watched the same way, as internal terminal events: a trajectory that leaves the domain stops
at the crossing with status ``"left_domain"`` instead of failing later as a step-size
underflow or a non-finite state. This module checks the events, compiles their kernel and
turns the core's records into :class:`EventRecord` and the per-lane statuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from nhfast import _abi, _core
from nhfast._cache import memo
from nhfast._kernels import compile_kernels, load_compiled
from nhfast._memory import check as check_memory
from nhfast.codegen.ckernels import KernelSet
from nhfast.codegen.numpy_backend import numpy_rows
from nhfast.errors import CompilationError
from nhfast.vectorfield import VectorField, check_printable, checked_exprs

__all__ = [
    "EventRecord",
]

#: (expressions, direction int32, terminal int32) of the event functions handed to the core.
EventSpec = tuple[list[sp.Expr], np.ndarray, np.ndarray]


@dataclass
class EventRecord:
    """Events found along each trajectory (see ``events`` of :func:`nhfast.integrate`).

    Attributes
    ----------
    t : ndarray, shape (n_traj, max_events)
        Event times in time order per trajectory (NaN after the last one).
    which : ndarray of int32, shape (n_traj, max_events)
        Index of the event function of each record (-1 after the last one).
    y : ndarray, shape (n_traj, max_events, n_state)
        States at the events (from the continuous extension).
    count : ndarray of int64, shape (n_traj,)
        Events found per trajectory; above ``max_events`` only the first ones are kept.
    """

    t: np.ndarray
    which: np.ndarray
    y: np.ndarray
    count: np.ndarray

    @classmethod
    def empty(cls, ntraj: int, width: int, n: int) -> EventRecord:
        """A record with room for ``width`` events per trajectory, none found yet.

        Raises
        ------
        nhfast.errors.InsufficientMemoryError
            If the record would not fit in the memory available.
        """
        check_memory(
            float(ntraj) * width * (8.0 * n + 12.0),
            f"the event record ({ntraj} trajectories x {width} events x {n} states)",
            "lower max_events (events past it are counted, not stored)",
        )
        t = np.empty((ntraj, width))
        t.fill(np.nan)
        which = np.empty((ntraj, width), dtype=np.int32)
        which.fill(-1)
        y = np.empty((ntraj, width, n))
        y.fill(np.nan)
        return cls(t=t, which=which, y=y, count=np.zeros(ntraj, dtype=np.int64))

    @classmethod
    def concatenate(cls, parts: Sequence[EventRecord]) -> EventRecord:
        """The records of ``parts``' trajectories in order, as wide as the widest part."""
        width = max(p.t.shape[1] for p in parts)
        out = cls.empty(sum(p.t.shape[0] for p in parts), width, parts[0].y.shape[2])
        row = 0
        for p in parts:
            m, w = p.t.shape
            out.t[row : row + m, :w] = p.t
            out.which[row : row + m, :w] = p.which
            out.y[row : row + m, :w] = p.y
            out.count[row : row + m] = p.count
            row += m
        return out


@dataclass(frozen=True)
class DomainWatch:
    """The event functions handed to the core when the domain is watched.

    Attributes
    ----------
    spec : EventSpec
        The user's events followed by one terminal event per domain condition (falling).
    n_user : int
        Number of the user's events (the domain events are ``n_user, n_user + 1, ...``).
    """

    spec: EventSpec
    n_user: int


def event_spec(system: VectorField, events: Any, dense: bool) -> EventSpec:
    """Check ``events``; returns (expressions, direction int32, terminal int32)."""
    if not dense:
        raise ValueError("events are located on the continuous extension: they need dense=True")
    try:
        items = [tuple(e) for e in events]
    except TypeError:
        raise TypeError("events must be a sequence of (expr, direction, terminal)") from None
    if not items or any(len(e) != 3 for e in items):
        raise ValueError("events must be a non-empty sequence of (expr, direction, terminal)")
    known = {*system.states, *system.params, *([system.time] if system.time is not None else [])}
    exprs, dirs, terms = [], [], []
    for k, (expr, direction, terminal) in enumerate(items):
        if isinstance(expr, str):
            obs = system.observables or {}
            if expr not in obs:
                raise ValueError(f"events[{k}]: {expr!r} is not an observable of the system")
            expr = obs[expr]
        try:
            expr = sp.sympify(expr)
        except (sp.SympifyError, TypeError):
            raise TypeError(f"events[{k}]: expected a SymPy expression, got {expr!r}") from None
        if not isinstance(expr, sp.Expr) or not expr.free_symbols <= known:
            raise ValueError(
                f"events[{k}]: the expression must use only states, parameters and time: {expr}"
            )
        (expr,) = checked_exprs([expr], "events", [f"events[{k}]"])  # finite, real
        check_printable([expr], f"events[{k}]")
        if direction not in (-1, 0, 1) or isinstance(direction, bool):
            raise ValueError(f"events[{k}]: direction must be -1, 0 or +1, got {direction!r}")
        if not isinstance(terminal, (bool, np.bool_)):
            raise TypeError(f"events[{k}]: terminal must be True or False, got {terminal!r}")
        exprs.append(expr)
        dirs.append(int(direction))
        terms.append(int(terminal))
    return exprs, np.array(dirs, dtype=np.int32), np.array(terms, dtype=np.int32)


def event_kernel(system: VectorField, exprs: list[sp.Expr]) -> tuple[Any, Any]:
    """The compiled kernel (capsule, ctx) of the event functions, built once per system.

    The functions depend on the states, parameters and time only: their library holds this
    one kernel (as an ``observables`` family), and nothing of the system's right-hand side
    (for a structured system, its unrolled expressions) is derived or compiled for it. The
    library travels with a pickled system (its C source, as the system's own kernels do): a
    worker loads it without generating code.
    """
    # the expressions themselves (hashable, their hash cached by SymPy): no printing per call
    key = tuple(exprs)

    def build() -> tuple[Any, Any]:
        shipped = memo(system, "shipped_events", dict).pop(key, None)
        cs = None
        if shipped is not None:
            try:
                cs = load_compiled(*shipped)
            except CompilationError:
                cs = None
        if cs is None:
            structured = getattr(system, "events_program", None)
            code = structured(list(exprs)) if structured is not None else None
            if code is None:
                code = KernelSet(
                    states=list(system.states),
                    params=list(system.params),
                    time=system.time,
                    kernels={"observables": list(exprs)},
                )
            cs = compile_kernels(code, name=f"{system.name} events")
        memo(system, "event_sets", dict)[key] = cs
        return cs.kernels["observables"]

    return memo(system, ("events", key), build)


def domain_watch(system: VectorField, user: EventSpec | None) -> DomainWatch | None:
    """The user's events (or none) followed by the domain conditions as terminal events
    (``expr`` falling through 0); None when the system has no domain. The caller watches
    with compiled kernels only (the core's event search does not take NumPy functions)."""
    domain = getattr(system, "domain", None)
    if not domain:
        return None
    exprs = list(domain.values())
    m = len(exprs)

    def alone() -> DomainWatch:
        return DomainWatch((exprs, np.full(m, -1, dtype=np.int32), np.ones(m, np.int32)), 0)

    if user is None:
        return memo(system, "domain_watch", alone)
    falling, terminal = alone().spec[1:]
    u_exprs, u_dirs, u_terms = user
    spec = (
        [*u_exprs, *exprs],
        np.concatenate([u_dirs, falling]),
        np.concatenate([u_terms, terminal]),
    )
    return DomainWatch(spec, len(u_exprs))


def domain_exits(
    system: VectorField,
    watch: DomainWatch,
    record: EventRecord,
    status: np.ndarray,
    t_final: float,
    t_reached: np.ndarray,
    user: EventSpec | None,
    par: np.ndarray | None = None,
) -> tuple[EventRecord | None, str]:
    """Mark the lanes a domain event stopped (status ``left_domain``, in place) and strip the
    internal records.

    ``record`` has one column more than the user asked for (a domain event is terminal, so
    it adds at most one record per lane). Returns the user's record (None without user
    events) and the sentence of the failure message naming the conditions crossed.
    """
    nuser = watch.n_user
    cnt = record.count
    if user is None and not np.count_nonzero(cnt):  # no lane met the boundary: nothing to do
        return None, ""
    cap = record.t.shape[1]
    # a lane a terminal event stopped ends with status 0 before the final output time
    stopped = (status == 0) & (t_reached != t_final)
    last = np.minimum(cnt, cap) - 1
    rows = np.arange(cnt.size)
    kept = stopped & (cnt > 0) & (cnt <= cap)
    which = np.where(kept, record.which[rows, np.maximum(last, 0)], -1)
    if user is not None and np.any(user[2]):
        # the user's terminal events stop lanes too: the last record tells which one did
        left = kept & (which >= nuser)
    else:  # only a domain event can have stopped a lane
        left = stopped & (cnt > 0)
    hit = np.flatnonzero(left)
    cond = which[hit] - nuser  # -1: the record was not kept (more than max_events)
    status[hit] = _abi.LANE["left_domain"]
    note = ""
    if hit.size:
        labels = list(system.domain)
        exprs = list(system.domain.values())
        parts = []
        for i, j in zip(hit[:5].tolist(), cond[:5].tolist(), strict=True):
            what = f"domain[{labels[j]!r}] ({exprs[j]} > 0)" if j >= 0 else "a domain condition"
            how = "reached 0"
            if j >= 0 and par is not None:  # at the recorded state: 0 to round-off, or NaN
                row = par[min(i, par.shape[0] - 1)][None, :]
                state = record.y[i, np.minimum(cnt[i], cap) - 1][None, :]
                if np.isnan(system.domain_values(state, row)[0, j]):
                    how = "turned NaN"
            parts.append(f"#{i}: {what} {how} at t = {t_reached[i]:.6g}")
        more = f" and {hit.size - 5} more" if hit.size > 5 else ""
        note = f". {system.name!r} left its domain: " + "; ".join(parts) + more
    if user is None:
        return None, note
    inner = hit[cond >= 0]  # the internal record is the lane's last kept one
    slot = last[inner]
    record.t[inner, slot] = np.nan
    record.which[inner, slot] = -1
    record.y[inner, slot] = np.nan
    cnt[hit] -= 1
    m = cap - 1
    out = EventRecord(
        t=record.t[:, :m].copy(),
        which=record.which[:, :m].copy(),
        y=record.y[:, :m].copy(),
        count=cnt,
    )
    return out, note


#: A failed trajectory whose last state has a domain condition at most this much above 0
#: (relative to ``max(1, |value at x0|)``) stopped at the domain's boundary.
BOUNDARY_RTOL = 1e-6
#: Output rows per call of the domain's kernel in :func:`domain_outputs` (bounds its
#: temporaries: times and values of a chunk, never a copy of all outputs).
OUTPUT_CHUNK_ROWS = 1 << 16


def domain_values(system: VectorField, x: np.ndarray, par: np.ndarray) -> np.ndarray:
    """Values of the system's domain conditions at the rows of ``x`` (and ``par``), shape
    ``(rows, conditions)`` (NumPy, the function :meth:`VectorField.check_domain` uses)."""
    f = memo(
        system,
        "domain",
        lambda: numpy_rows([*system.states, *system.params], list(system.domain.values())),
    )
    return f(x, par if system.n_params else x[:, :0])


def domain_boundary(
    system: VectorField,
    x0: np.ndarray,
    x_end: np.ndarray,
    par: np.ndarray,
    status: np.ndarray,
    t_reached: np.ndarray,
    lanes: np.ndarray | None = None,
) -> str:
    """Mark the failed lanes that stopped at the boundary of the domain (status
    ``left_domain``, in place) and return the sentence of the failure message naming the
    conditions.

    A trajectory that runs into the boundary where the equations are singular (a chart's
    coordinates, ``1/x`` or ``sqrt(x)`` as ``x -> 0``) shrinks its steps until they underflow,
    or meets a non-finite value, before it can cross: the state where it stopped
    (``x_end``) then has a condition within ``BOUNDARY_RTOL * max(1, |value at x0|)`` of 0.
    ``x_end`` has a row per trajectory, or with ``lanes`` (indices of trajectories) a row per
    entry of ``lanes``.
    """
    kinds = (_abi.LANE["step_underflow"], _abi.LANE["nonfinite"])
    if lanes is None:
        lanes = np.arange(status.size)
    at = np.flatnonzero(np.isin(status[lanes], kinds) & np.all(np.isfinite(x_end), axis=1))
    cand = lanes[at]
    if cand.size == 0:
        return ""
    p = par[cand] if par.shape[0] > 1 else par
    end = domain_values(system, x_end[at], p)
    start = domain_values(system, x0[cand], p)
    near = end <= BOUNDARY_RTOL * np.maximum(1.0, np.abs(start))
    hit = np.flatnonzero(np.any(near, axis=1))
    if hit.size == 0:
        return ""
    lanes = cand[hit]
    labels = list(system.domain)
    exprs = list(system.domain.values())
    parts = []
    for i, k in zip(lanes[:5].tolist(), hit[:5].tolist(), strict=True):
        j = int(np.argmax(near[k]))
        why = _abi.STATUS[int(status[i])]
        parts.append(
            f"#{i}: domain[{labels[j]!r}] ({exprs[j]} > 0) fell to {end[k, j]:.3g} at "
            f"t = {t_reached[i]:.6g} ({why} there)"
        )
    status[lanes] = _abi.LANE["left_domain"]
    more = f" and {lanes.size - 5} more" if lanes.size > 5 else ""
    return f". {system.name!r} reached the boundary of its domain: " + "; ".join(parts) + more


def domain_outputs(
    system: VectorField,
    t: np.ndarray,
    y: np.ndarray,
    par: np.ndarray,
    status: np.ndarray,
    t_reached: np.ndarray,
    threads: int = 1,
    kernel: tuple[Any, Any] | None = None,
) -> str:
    """Mark the finished lanes with an output row outside the domain (status ``left_domain``,
    in place; that row and later ones NaN, ``t_reached`` the last output time inside) and
    return the sentence of the failure message naming the conditions.

    For the methods whose steps are not watched by the domain events (fixed-step methods,
    adaptive ones without ``dense``): a trajectory that crosses the boundary where the
    equations are still defined would otherwise go on, silently, outside its chart. The
    conditions are evaluated by the compiled kernel of the domain's expressions, one call for
    all rows (``kernel``: that kernel, when the caller has it at hand).
    """
    exprs = list(system.domain.values())
    cap, ctx = event_kernel(system, exprs) if kernel is None else kernel
    ntraj, nt, n = y.shape
    if ntraj == 1 and status[0] == 0 and ctx is None:  # one trajectory: its rows in place
        if _core.all_positive_rows(cap, ctx, len(exprs), t, y.reshape(nt, n), par[0]):
            return ""
    ok = np.flatnonzero(status == 0)
    if ok.size == 0:
        return ""
    m = len(exprs)
    labels = list(system.domain)
    parts: list[str] = []
    nbad = 0
    # chunks of trajectories: the temporaries (times, values) stay small for any batch, and
    # a chunk of consecutive finished trajectories is a view of y, not a copy
    step = max(1, OUTPUT_CHUNK_ROWS // nt)
    for c0 in range(0, ok.size, step):
        lanes = ok[c0 : c0 + step]
        first, last = int(lanes[0]), int(lanes[-1])
        if last - first + 1 == lanes.size:
            rows = y[first : last + 1].reshape(lanes.size * nt, n)
            p = par[first : last + 1] if par.shape[0] > 1 else par
        else:
            rows = y[lanes].reshape(lanes.size * nt, n)
            p = par[lanes] if par.shape[0] > 1 else par
        trow = np.tile(t, lanes.size)  # contiguous (a broadcast view is not when nt = 1)
        vals = np.empty((rows.shape[0], m))
        _core.eval_rows(cap, ctx, m, trow, rows, p, nt, vals, threads=threads)
        outside = ~(vals > 0).reshape(lanes.size, nt, m)
        bad = np.flatnonzero(np.any(outside, axis=(1, 2)))
        nbad += bad.size
        for k in bad.tolist():
            i = int(lanes[k])
            row, j = np.argwhere(outside[k])[0]  # the first output row outside, its condition
            if len(parts) < 5:
                parts.append(
                    f"#{i}: domain[{labels[j]!r}] ({exprs[j]} > 0) is "
                    f"{vals[k * nt + row, j]:.3g} at the output time t = {t[row]:.6g}"
                )
            status[i] = _abi.LANE["left_domain"]
            y[i, row:] = np.nan
            t_reached[i] = t[row - 1] if row > 0 else t[0]
    if nbad == 0:
        return ""
    more = f" and {nbad - 5} more" if nbad > 5 else ""
    return (
        f". {system.name!r} left its domain between output times (steps not watched: use "
        "method='taylor' or dense=True to stop at the crossing): " + "; ".join(parts) + more
    )
