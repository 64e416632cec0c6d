"""The result of a batch run and the end of every run: observables, the failure report."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nhfast import _abi
from nhfast.errors import IntegrationError, IntegrationWarning
from nhfast.events import EventRecord
from nhfast.vectorfield import VectorField

__all__ = ["IntegrationResult"]

#: Per-lane status code (``NH_LANE_*`` in nh_abi.h) -> message.
STATUS = _abi.STATUS
_STATS = _abi.STATS


@dataclass
class IntegrationResult:
    """Trajectories of a batch.

    Attributes
    ----------
    t : ndarray, shape (n_t,)
        Output times.
    y : ndarray, shape (n_traj, n_t, n_state)
        States at the output times (NaN after a lane failed).
    observables : dict of str to ndarray of shape (n_traj, n_t)
        Values of the system's observables at the output times. :func:`integrate` leaves
        them to the first access of the attribute (one kernel call for every row then), so a
        run whose observables are never read does not pay for them; they are computed from
        ``y`` as it is at that access.
    status : ndarray of int32, shape (n_traj,)
        0 for success, else a code of ``nhfast.STATUS``.
    stats : dict of str to ndarray of int64, shape (n_traj,)
        ``steps``, ``rhs_evals``, ``rejected``, ``iterations`` per trajectory (made from
        the core's counters on the first access of the attribute, like ``observables``).
    method : str
    t_reached : ndarray of float, shape (n_traj,), optional
        Time each trajectory reached: the last output time when it finished (the time of its
        terminal event when one stopped it); after a failure, the time of the last accepted
        step (adaptive methods) or the last output time reached (fixed-step methods). None
        where the integrator does not report it.
    events : EventRecord, optional
        Events found (when ``events`` were given).
    """

    t: np.ndarray
    y: np.ndarray
    status: np.ndarray
    stats: dict[str, np.ndarray]
    method: str
    observables: dict[str, np.ndarray] = field(default_factory=dict)
    t_reached: np.ndarray | None = None
    events: EventRecord | None = None

    def __getattr__(self, name: str) -> Any:
        # reached only for an attribute not in the instance: one a run left to be computed on
        # first access (the observables, see defer_observables; the stats dict, from the
        # core's array ``_core_stats``)
        # (threads that read it at once may both build it: they return the one kept first)
        if name == "stats" and "_core_stats" in self.__dict__:
            stats = _stats_dict(self.__dict__["_core_stats"])
            return self.__dict__.setdefault("stats", stats)
        deferred = self.__dict__.get("_deferred")
        build = None if deferred is None else deferred.get(name)
        if build is not None:
            value = self.__dict__.setdefault(name, build(self))
            deferred.pop(name, None)
            return value
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def defer_observables(self, build: Any) -> None:
        """Compute ``observables`` with ``build(self)`` on the first access of the attribute."""
        self.__dict__.pop("observables", None)
        self.__dict__.setdefault("_deferred", {})["observables"] = build

    @classmethod
    def _from_core(
        cls,
        t: np.ndarray,
        y: np.ndarray,
        status: np.ndarray,
        stats: np.ndarray,
        method: str,
        t_reached: np.ndarray | None,
        events: EventRecord | None,
    ) -> IntegrationResult:
        """The result of a core run, ``stats`` the core's array (trajectories x ``_STATS``),
        made the dict of per-trajectory arrays on first access (one call costs less)."""
        res = object.__new__(cls)
        res.__dict__ = {
            "t": t, "y": y, "status": status, "method": method, "observables": {},
            "t_reached": t_reached, "events": events, "_core_stats": stats,
        }  # fmt: skip
        return res

    @classmethod
    def concatenate(cls, parts: Sequence[IntegrationResult]) -> IntegrationResult:
        """One result of the trajectories of ``parts`` in order (runs of chunks of a batch).

        :meth:`assemble` with the parts one after the other.

        Raises
        ------
        ValueError
            No parts, or parts with other output times or another method.
        """
        parts = list(parts)
        if not parts:
            raise ValueError("parts: at least one result to concatenate, got none")
        for i, p in enumerate(parts[1:], 1):
            if p.method != parts[0].method or not np.array_equal(p.t, parts[0].t):
                raise ValueError(
                    f"parts[{i}]: another method or other output times than parts[0] "
                    f"({p.method!r} against {parts[0].method!r})"
                )
        if len(parts) == 1:
            return parts[0]  # as before: the part itself
        starts = np.cumsum([0] + [p.y.shape[0] for p in parts[:-1]]).tolist()
        return cls.assemble(zip(starts, parts, strict=True), sum(p.y.shape[0] for p in parts))

    @classmethod
    def assemble(
        cls, parts: Iterable[tuple[int, IntegrationResult]], n_traj: int
    ) -> IntegrationResult:
        """One result of ``n_traj`` trajectories from parts that cover them, each placed at its
        first row, taken as they come (in any order: a part is copied in, and may go).

        The parts share the output times and the method; stats, observables, ``t_reached``
        and events are kept where every part has them (event records padded to the widest).

        Parameters
        ----------
        parts : iterable of (int, IntegrationResult)
            The first row of each part, and the part.
        n_traj : int
            Rows of the result: the parts must cover each once.

        Returns
        -------
        IntegrationResult

        Raises
        ------
        ValueError
            No parts, parts that do not cover the rows once, or parts with other output times
            or another method.
        """
        res, covered, events = None, np.zeros(n_traj, dtype=bool), []
        for start, p in parts:
            stop = start + p.y.shape[0]
            if res is None:
                res = cls._empty(p, n_traj)
            elif p.method != res.method or not np.array_equal(p.t, res.t):
                raise ValueError(
                    f"the part at row {start}: another method or other output times than the "
                    f"first ({p.method!r} against {res.method!r})"
                )
            if not 0 <= start <= stop <= n_traj or covered[start:stop].any():
                raise ValueError(f"the part at rows {start}:{stop} overlaps another or is outside "
                                 f"0:{n_traj}")  # fmt: skip
            covered[start:stop] = True
            res.y[start:stop], res.status[start:stop] = p.y, p.status
            for group, theirs in ((res.stats, p.stats), (res.observables, p.observables)):
                for k in [k for k in group if k not in theirs]:
                    del group[k]
                for k, v in group.items():
                    v[start:stop] = theirs[k]
            if res.t_reached is not None and p.t_reached is not None:
                res.t_reached[start:stop] = p.t_reached
            else:
                res.t_reached = None
            events.append((start, p.events))
        if res is None:
            raise ValueError("parts: at least one result to concatenate, got none")
        if not covered.all():
            got = int(covered.sum())
            raise ValueError(f"parts: they must cover the {n_traj} trajectories, got {got}")
        if all(e is not None for _, e in events):
            events.sort(key=lambda se: se[0])
            res.events = EventRecord.concatenate([e for _, e in events])
        return res

    @classmethod
    def _empty(cls, like: IntegrationResult, n_traj: int) -> IntegrationResult:
        """A result of ``n_traj`` trajectories shaped like ``like``, its arrays to be filled."""
        nt, n = like.y.shape[1:]
        obs = like.observables
        return cls(
            t=like.t,
            y=np.empty((n_traj, nt, n)),
            status=np.zeros(n_traj, dtype=np.int32),
            stats={k: np.zeros(n_traj, dtype=v.dtype) for k, v in like.stats.items()},
            method=like.method,
            observables={k: np.empty((n_traj, *np.shape(v)[1:])) for k, v in obs.items()},
            t_reached=None if like.t_reached is None else np.full(n_traj, np.nan),
        )

    def __getstate__(self) -> dict[str, Any]:
        for name in ["stats", *self.__dict__.get("_deferred", ())]:
            getattr(self, name)  # computed now: the builders do not pickle
        state = dict(self.__dict__)
        state.pop("_deferred", None)
        state.pop("_core_stats", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def success(self) -> bool:
        return bool(np.all(self.status == 0))

    @property
    def failed(self) -> np.ndarray:
        """Boolean mask of the trajectories that did not finish."""
        return self.status != 0


def _stats_dict(stats: np.ndarray) -> dict[str, np.ndarray]:
    """The core's stats (trajectories x :data:`_STATS`) as one contiguous array per name."""
    return dict(zip(_STATS, stats.T.copy(), strict=True))


def _domain_hint(status: np.ndarray, method: str) -> str:
    """What the failure message says when the domain was not watched and trajectories failed
    the way one that leaves its domain does (step-size underflow, a non-finite state)."""
    kinds = (_abi.LANE["step_underflow"], _abi.LANE["nonfinite"])
    if not np.any(np.isin(status, kinds)):
        return ""
    how = "dense=True" if method == "dop853" else "method='taylor' or 'dop853' with dense=True"
    return (
        ". The system has a domain: a trajectory that leaves it may fail this way; with "
        f"{how} (and watch_domain=True) it stops at the boundary with status 'left_domain'"
    )


def conclude(
    system: VectorField,
    res: IntegrationResult,
    par: np.ndarray,
    threads: int,
    wanted: bool,
    keep_failed: Any,
    note: str,
    hint: bool,
    stacklevel: int,
) -> None:
    """The end of a call of :func:`integrate`, after the domain's marks: observables on first
    access (``wanted``), and the report of the trajectories that failed (``note`` added; with
    ``hint``, a system with a domain not watched along the steps, what a failure like leaving
    it may mean), its warning at ``stacklevel`` from here."""
    if wanted:
        res.defer_observables(lambda r: observables_of(system, r, par, threads))
    status = res.status
    if status[0] if status.size == 1 else np.count_nonzero(status):
        if hint and getattr(system, "domain", None):
            note += _domain_hint(status, res.method)
        report_failures(res, status != 0, keep_failed, note, stacklevel=stacklevel)


def _stiff_note(res: IntegrationResult) -> str:
    """What the message of a failed run says about its stiff trajectories (or "")."""
    stiff = np.flatnonzero(res.status == _abi.LANE["stiff"])
    if stiff.size == 0:
        return ""
    shown = stiff[:5]
    if res.t_reached is not None:
        where = ", ".join(f"#{i} at t={res.t_reached[i]:.6g}" for i in shown)
    else:
        where = ", ".join(f"#{i}" for i in shown)
    more = f" and {stiff.size - shown.size} more" if stiff.size > shown.size else ""
    return (
        f". Stiff: {where}{more} (t_eval from {res.t[0]:.6g} to {res.t[-1]:.6g}). The explicit "
        f"method {res.method!r} is limited there by stability, not accuracy, and nhfast has no "
        "stiff solver (its implicit 'midpoint'/'gauss*' schemes solve the stages by fixed-point "
        "iteration, which needs small steps too): use an implicit method with Newton iterations "
        "and error control, e.g. scipy.integrate.solve_ivp(..., method='Radau' or 'BDF'), or a "
        "shorter t_eval span; stiffness_check=False turns the test off"
    )


def report_failures(
    res: IntegrationResult,
    failed: np.ndarray,
    keep_failed: bool,
    note: str = "",
    stacklevel: int = 3,
) -> None:
    """Raise ``IntegrationError`` naming how many lanes failed and why (``res.status``), or
    with ``keep_failed`` warn once (``IntegrationWarning``, at ``stacklevel``) and keep the
    result; ``note`` is added to the message (which domain conditions the lanes that left
    the domain crossed)."""
    if not np.any(failed):
        return
    status = res.status
    bad = np.flatnonzero(failed)
    kinds = ", ".join(
        f"{np.sum(status == c)} x {STATUS.get(int(c), c)}" for c in np.unique(status[bad])
    )
    msg = f"{bad.size} of {status.size} trajectories failed ({kinds}); first: #{bad[0]}"
    msg += _stiff_note(res) + note
    if not keep_failed:
        raise IntegrationError(msg, status, res)
    warnings.warn(msg + " (kept: see result.failed)", IntegrationWarning, stacklevel=stacklevel)


def observables_of(
    system: VectorField, res: IntegrationResult, par: np.ndarray, threads: int
) -> dict[str, np.ndarray]:
    from nhfast import _core

    cs = system.compile(("observables",))
    names = list(system.observables)
    ntraj, nt, n = res.y.shape
    rows = ntraj * nt
    # one trajectory: its output times are the rows' times (no broadcast copy)
    trow = res.t if ntraj == 1 else np.tile(res.t, ntraj)  # contiguous, also when nt = 1
    nobs = cs.n_out["observables"]
    out = np.empty((rows, nobs))
    cap, ctx = cs.kernels["observables"]
    _core.eval_rows(cap, ctx, nobs, trow, res.y.reshape(rows, n), par, nt, out, threads=threads)
    # observable j of trajectory i at time k is out[i * nt + k, j]: views, one per name
    return dict(zip(names, out.T.reshape(nobs, ntraj, nt), strict=True))
