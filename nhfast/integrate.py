"""Public front end of the batch integrators: argument checks, layout, threads, results."""

from __future__ import annotations

import math
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from nhfast import _abi
from nhfast._cache import memo, peek
from nhfast._fastpath import NO_PARAMS as _NO_PARAMS
from nhfast._fastpath import CallPlan, call_plan, taylor_kernel
from nhfast._kernels import InputChecks
from nhfast._memory import check as check_memory
from nhfast._validate import (
    output_times,
    params_rows,
    positive,
    positive_ints,
    state_rows,
)
from nhfast.errors import IntegrationError, IntegrationWarning, ToleranceWarning
from nhfast.events import (
    DomainWatch,
    EventRecord,
    domain_boundary,
    domain_exits,
    domain_outputs,
    domain_watch,
    event_kernel,
    event_spec,
)
from nhfast.vectorfield import VectorField

#: Method name -> code of ``enum nh_method`` (csrc/nh_core.h); ADAPTIVE: error-controlled ones.
METHODS = _abi.METHODS
ADAPTIVE = _abi.ADAPTIVE
#: Measure-preserving methods for phi-simple Chaplygin systems (``nhfast.hamiltonised``).
HAMILTONISED = ("hamiltonised-midpoint", "hamiltonised-gauss4", "hamiltonised-gauss6")
#: Per-lane status code (``NH_LANE_*`` in nh_abi.h) -> message.
STATUS = _abi.STATUS
_STATS = _abi.STATS
#: Batches up to this many trajectories get the state where each stopped from the run itself
#: (``x_end``, n doubles per trajectory); larger ones rerun the few that failed the way a
#: trajectory at the boundary of its domain fails (:data:`_BOUNDARY_KINDS`) to get it.
X_END_ROWS = 4096
_BOUNDARY_KINDS = (_abi.LANE["step_underflow"], _abi.LANE["nonfinite"])
#: Hairer's NSTIFF (DOP853/DOPRI5 codes): the stiffness test of the adaptive methods runs
#: after every NSTIFF-th accepted step, and after every step once it found an estimate above
#: the method's stability bound (see ``stiffness_check`` of :func:`integrate`).
NSTIFF = 1000


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

        The parts share the output times and the method; stats, observables, ``t_reached``
        and events are joined where every part has them (event records padded to the widest).

        Raises
        ------
        ValueError
            No parts, or parts with other output times or another method.
        """
        parts = list(parts)
        if not parts:
            raise ValueError("parts: at least one result to concatenate, got none")
        first = parts[0]
        for i, p in enumerate(parts[1:], 1):
            if p.method != first.method or not np.array_equal(p.t, first.t):
                raise ValueError(
                    f"parts[{i}]: another method or other output times than parts[0] "
                    f"({p.method!r} against {first.method!r})"
                )
        if len(parts) == 1:
            return first
        obs_names = [k for k in first.observables if all(k in p.observables for p in parts)]
        res = cls(
            t=first.t,
            y=np.concatenate([p.y for p in parts]),
            status=np.concatenate([p.status for p in parts]),
            stats={k: np.concatenate([p.stats[k] for p in parts]) for k in first.stats},
            method=first.method,
            observables={k: np.concatenate([p.observables[k] for p in parts]) for k in obs_names},
        )
        if all(p.t_reached is not None for p in parts):
            res.t_reached = np.concatenate([p.t_reached for p in parts])
        if all(p.events is not None for p in parts):
            res.events = EventRecord.concatenate([p.events for p in parts])
        return res

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


_CORE: Any = None


def _core_module() -> Any:
    """``nhfast._core``, imported on the first call (not at import time)."""
    global _CORE
    if _CORE is None:
        from nhfast import _core

        _CORE = _core
    return _CORE


def _check_system(system, method: str) -> None:
    if not isinstance(system, VectorField):
        raise TypeError(
            f"system must be a VectorField or HamiltonianSystem, got {type(system).__name__}"
        )
    if method == "leapfrog":
        why = memo(system, "separability", lambda: (system.separability(),))[0]
        if why is not None:
            raise ValueError(f"method='leapfrog' needs a separable partitioned system: {why}")


def _plain_checks(system: VectorField) -> bool:
    """Whether ``system`` checks its inputs with :class:`VectorField`'s own methods (then
    :class:`nhfast._kernels.InputChecks` may decide for it; else its methods always run)."""
    cls = type(system)
    return all(
        getattr(cls, m) is getattr(VectorField, m)
        for m in ("check_inputs", "check_params", "check_domain")
    )


def input_checks(system: VectorField) -> InputChecks | None:
    """The fast input checks of ``system``, built once per system (None: run its methods)."""

    def build() -> InputChecks | None:
        if not _plain_checks(system):
            return None
        return InputChecks(list(system.states), list(system.params), dict(system.domain or {}))

    return memo(system, "input_checks", build)


def check_inputs(system: VectorField, x: np.ndarray, par: np.ndarray, name: str = "x0") -> None:
    """``system.check_inputs(x, par, name)``, decided by the cached :func:`input_checks` when
    every value passes (no NumPy call per parameter or per domain condition); any doubt runs
    the system's own checks, which raise the error (so the messages are the same)."""
    checks = input_checks(system)
    if checks is None or not checks.accept(x, par):
        system.check_inputs(x, par, name)


def _positive(value, name: str) -> float:
    """:func:`positive` with a fast path for a float (the default tolerances)."""
    if type(value) is float and 0.0 < value < math.inf:
        return value
    return positive(value, name)


def _plain_ints(*values: Any) -> bool:
    """Whether every value is a plain int >= 1 (then :func:`positive_ints` passes)."""
    for v in values:
        if type(v) is not int or v < 1:
            return False
    return True


def _positive_ints(**values) -> None:
    """:func:`positive_ints` with a fast path for plain positive ints."""
    if not _plain_ints(*values.values()):
        positive_ints(**values)


def integrate(
    system: VectorField,
    x0,
    t_eval,
    method: str = "dop853",
    rtol: float = 1e-10,
    atol: float = 1e-12,
    params=None,
    h: float | None = None,
    threads: int = 1,
    observables: bool = True,
    *,
    max_steps: int = 10_000_000,
    hmax: float | None = None,
    tol: float = 1e-14,
    max_iter: int = 100,
    keep_failed: bool = False,
    block: int = 64,
    stiffness_check: bool = True,
    dense: bool = False,
    events: Any = None,
    max_events: int = 100,
    order: int | None = None,
    watch_domain: bool = True,
) -> IntegrationResult:
    """Integrate a batch of trajectories of ``system`` in the compiled core.

    Parameters
    ----------
    system : VectorField or HamiltonianSystem
    x0 : array_like, shape (n_state,) or (n_traj, n_state)
        Initial states.
    t_eval : array_like, shape (n_t,)
        Strictly monotonic output times; ``t_eval[0]`` is the initial time.
    method : {"rk4", "dopri5", "dop853", "taylor", "leapfrog", "midpoint", "gauss4", "gauss6"}
        Adaptive embedded pairs (``dopri5``, ``dop853``), the adaptive Taylor-series method
        (``taylor``: the series of the solution to order ``order`` from the system's Taylor
        kernel, ``system.compile_taylor()``, one kernel call per step; step size per
        trajectory from the last three coefficients by Jorba & Zou's rule, 2005, who take
        two, as heyoka does: the third guards series that vanish, or nearly, at two orders
        in a row, such as x'' = -x^3 from (0, 1); where all three vanish, the highest
        non-zero order from ``order/2`` on, or one step to the end if there is none), or
        fixed-step schemes; ``leapfrog``
        (Stormer-Verlet) needs a separable partitioned system, the Gauss-Legendre schemes
        (``midpoint``, ``gauss4``, ``gauss6``) are symplectic for Hamiltonian systems.
        A phi-simple Chaplygin system in Hamiltonised form (measure preserving) runs with
        :func:`nhfast.integrate_hamiltonised`; a batch on a Dask cluster with
        :func:`nhfast.distributed.integrate_ensemble`.
    rtol, atol : float
        Tolerances of the adaptive methods (``taylor``: with ``order`` None, the order
        ``p0 = ceil(1 - ln(min(rtol, atol)) / 2)``, at least 2, as heyoka; a right-hand side
        with few products runs at the higher order of least work of
        :func:`nhfast.codegen.cost_order` with the accuracy of ``p0 + 1``; runs with events,
        the domain's included, keep ``p0``).
    params : array_like, shape (n_params,) or (n_traj, n_params)
        Parameter values, required when the system has parameters.
    h : float, optional
        Step size of the fixed-step methods (required there); initial step of the adaptive
        ones (automatic when None). Each output interval is split into equal substeps of at
        most ``h``. ``taylor``: a fixed step size (None: adaptive), the outputs in between
        from the series; only the last step is shortened, to land on ``t_eval[-1]``.
    threads : int
        Threads over blocks of lanes (results do not depend on it).
    observables : bool
        Evaluate the system's observables at the output times.
    max_steps : int
        Step budget per trajectory (adaptive: accepted + rejected steps).
    hmax : float, optional
        Largest step of the adaptive methods (and of ``taylor``).
    tol, max_iter : float, int
        Implicit schemes: stage-iteration tolerance (relative to 1 + max|x|) and cap.
    keep_failed : bool
        If True, failed trajectories give an ``IntegrationWarning`` and NaN rows instead of
        an ``IntegrationError``.
    block : int
        Lanes per block (the unit of vectorisation and of threading): at most, since a block
        takes no more than keep its work (stages or Taylor series) within 64 kB, one chunk of
        8 lanes at least; results do not depend on it.
    stiffness_check : bool
        Adaptive methods: stop a trajectory that becomes stiff (status ``"stiff"``) instead
        of letting it creep to ``max_steps``. Hairer's test (DOP853/DOPRI5 codes; Hairer &
        Wanner, Solving ODEs II, IV.2): after an accepted step, ``h * |f(t+h, y1) - f(t+h,
        Y)| / |y1 - Y|`` (``Y`` the last stage) estimates ``h |lambda|``; 15 estimates above
        the method's stability bound (6.1 for dop853, 3.25 for dopri5), with fewer than 6
        consecutive ones below in between, declare stiffness. The test runs from every
        1000th accepted step on (Hairer's NSTIFF) and only reads the stages: results of the
        trajectories it does not stop are bit-identical with the check on or off.
    dense : bool
        ``method="dop853"`` only: take the states at the output times between ``t_eval[0]``
        and ``t_eval[-1]`` from DOP853's continuous extension (a polynomial of degree 7 per
        step from three more stages; Hairer, Norsett & Wanner, Solving ODEs I, II.6) instead
        of shortening the steps to land on them. The steps then do not depend on the output
        times (only the last step is shortened to end on ``t_eval[-1]``), many output times
        cost little, and the values agree with ``dense=False`` to the tolerance. Default
        False: every step that would pass an output time is shortened to it. ``taylor``
        always takes its outputs from the series (True and False give the same result).
    events : sequence of (expr, direction, terminal), optional
        Needs ``dense=True`` (not with ``taylor``, located on its series). ``expr``: a SymPy
        expression in the states, parameters (and the time symbol) or the name of one of the
        system's observables; an event fires where it crosses zero over a step, rising
        (``direction`` +1: from < 0 to >= 0), falling (-1) or either way (0), in the order of
        integration. Event times are located on the continuous extension (``taylor``: the
        series) to round-off (bracketing Illinois/bisection iterations per
        lane); the records go to ``result.events`` (:class:`EventRecord`). A ``terminal``
        event ends its trajectory there (status 0, ``t_reached`` the event time, later output
        rows NaN); the other trajectories go on. Two roots of the same function within one
        step are not seen.
    max_events : int
        Event records kept per trajectory.
    order : int, optional
        ``method="taylor"`` only: the order of the series, 1 to
        ``nhfast._abi.TAYLOR_MAX_ORDER`` (100); None: from the tolerance (see ``rtol``).
        With a fixed order the step is ``min_k (eps s / |x^[k]|)^(1/k) exp(-0.7/(order-1))``
        over k = order - 2 .. order (``eps s``: ``atol``, or ``rtol |x|`` where that is
        larger).
    watch_domain : bool
        Watch the conditions ``expr > 0`` of the system's ``domain`` (a chart's domain) along
        the trajectories; a trajectory that leaves it ends with status ``"left_domain"``,
        reported as a failure that names the condition (no effect without a domain):

        * ``taylor``, and ``dop853`` with ``dense=True``: each condition is an internal
          terminal event (``expr`` falling through 0, after the user's ``events``), located
          on the step's polynomial: the trajectory stops at the crossing (``t_reached`` the
          crossing time, later output rows NaN); ``result.events`` shows only the user's
          events. Trajectories that stay inside are bit-identical to ``watch_domain=False``.
        * the other methods: the output rows are checked; a trajectory with a row outside
          gets that row and the later ones NaN, ``t_reached`` the last output time inside.
        * every method: a trajectory that runs into a boundary where the equations are
          singular (its steps underflow, or a value becomes non-finite, before it can cross)
          and whose last state has a condition within ``nhfast.events.BOUNDARY_RTOL`` (1e-6,
          relative to ``max(1, |value at x0|)``) of 0 gets ``"left_domain"`` instead.

        (A lane with more than ``max_events`` records of the user's events that ends at one
        of the user's terminal events and a domain crossing at once counts as ended by the
        user's event.)
    Returns
    -------
    IntegrationResult

    Raises
    ------
    TypeError, ValueError
        On bad arguments, naming the argument.
    IntegrationError
        When a trajectory fails (non-finite state, step underflow, step budget, an implicit
        solve that does not converge, stiffness, leaving the domain) and ``keep_failed`` is
        False.
    """
    # a call like the last checked one of this system: one compiled pass (_core.PreparedCall)
    entry = peek(system, "call_plan")
    prepared = None if entry is None or entry[0] is None else entry[0].prepared
    if prepared is not None:
        res = prepared(
            x0, t_eval, params, method, rtol, atol, h, threads, observables, max_steps, hmax,
            tol, max_iter, keep_failed, block, stiffness_check, dense, events, max_events,
            order, watch_domain,
        )  # fmt: skip
        if res is not None:
            return res
    _core = _core_module()  # the compiled core loads on first use
    if not isinstance(method, str) or method not in METHODS:
        if isinstance(method, str) and method in HAMILTONISED:
            raise ValueError(
                f"method {method!r} is nhfast.integrate_hamiltonised(system, x0, t_eval, "
                f"method={method.removeprefix('hamiltonised-')!r}, ...), for a phi-simple "
                "Chaplygin system; integrate takes vector fields"
            )
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    _check_system(system, method)
    plan = call_plan(system)
    n, npar = (system.n_state, system.n_params) if plan is None else (plan.n, plan.npar)
    fast = None if plan is None else plan.inputs(x0, t_eval, params)
    if fast is None:  # the full checks, which name what is wrong
        x = state_rows(x0, n, "x0")
        t = output_times(t_eval, "t_eval")
        par = params_rows(params, system.params, x.shape[0], "params")
        check_inputs(system, x, par, "x0")
    else:
        x, t, par = fast
    ntraj = x.shape[0]
    rtol_in, atol_in, tol_in = rtol, atol, tol
    rtol = _positive(rtol, "rtol")
    atol = _positive(atol, "atol")
    if method in ADAPTIVE and (rtol < TOL_FLOOR or (method == "taylor" and atol < TOL_FLOOR)):
        rtol, atol = _floor_tolerances(method, rtol, atol)
    tol = _positive(tol, "tol")
    # the integers first: the step count of a fixed-step method is compared with max_steps
    if not _plain_ints(threads, max_steps, max_iter, block):
        _positive_ints(threads=threads, max_steps=max_steps, max_iter=max_iter, block=block)
    if method in ADAPTIVE:
        h0 = 0.0 if h is None else _positive(h, "h")
    else:
        if h is None:
            raise ValueError(f"h (the step size) is required for the fixed-step method {method!r}")
        h0 = _positive(h, "h")
        if t.size == 2:  # one interval: the same count as below, without arrays
            t0, t1 = t.tolist()
            d = abs(t1 - t0) / h0 * (1 - 1e-12)  # floats: inf on overflow, as in NumPy
            nsteps = max(1.0, float(math.ceil(d))) if d < math.inf else math.inf
            if not nsteps <= max_steps:
                count = f"{nsteps:.0f}" if nsteps < 1e15 else f"{nsteps:.3g}"
                raise ValueError(f"h={h0:g} needs {count} steps, more than max_steps={max_steps}")
        elif t.size > 1:
            with np.errstate(over="ignore"):
                steps = np.maximum(1, np.ceil(np.abs(np.diff(t)) / h0 * (1 - 1e-12)))
            nsteps = float(np.sum(steps))  # may overflow to inf for a tiny h: compare as float
            if not nsteps <= max_steps:
                count = f"{nsteps:.0f}" if nsteps < 1e15 else f"{nsteps:.3g}"
                raise ValueError(f"h={h0:g} needs {count} steps, more than max_steps={max_steps}")
    hm = 0.0 if hmax is None else positive(hmax, "hmax")
    if not isinstance(dense, (bool, np.bool_)):
        raise TypeError(f"dense must be True or False, got {type(dense).__name__}")
    taylor = method == "taylor"
    if dense and method != "dop853" and not taylor:
        raise ValueError(
            f"dense=True needs method='dop853' (its continuous extension), got {method!r}"
        )
    torder = _taylor_order(order, method)
    ev_spec = None if events is None else event_spec(system, events, bool(dense) or taylor)
    if ev_spec is not None:
        _positive_ints(max_events=max_events)
    if not isinstance(watch_domain, (bool, np.bool_)):
        raise TypeError(f"watch_domain must be True or False, got {type(watch_domain).__name__}")
    if not isinstance(stiffness_check, (bool, np.bool_)):
        raise TypeError(
            f"stiffness_check must be True or False, got {type(stiffness_check).__name__}"
        )

    if threads > 1 and not _core.HAVE_OPENMP:
        _warn_serial()
    wanted = ("observables",) if observables and system.observables else ()
    watched = bool(watch_domain) and bool(getattr(system, "domain", None))
    tcap = derive = None
    nderived = tauto = 0
    if taylor:
        located = ev_spec is not None or watched  # events: the tolerance's order
        if plan is None:
            tcap, ctx, tauto = taylor_kernel(system, torder, rtol, atol, located)
        else:
            tcap, ctx, tauto = plan.taylor_kernel(torder, rtol, atol, located)
        cap = None
    else:
        cap, ctx, derive, nderived = (
            system.compile(wanted).integrator_rhs() if plan is None else plan.rhs_kernel(wanted)
        )
    # the domain's conditions as events: with a compiled kernel (ctx None) and a polynomial
    dom = None
    if watch_domain and (dense or taylor) and ctx is None:
        dom = (
            plan.domain_watch()
            if plan is not None and ev_spec is None
            else domain_watch(system, ev_spec)
        )
    n_obs = len(system.observables) if wanted else 0
    check_memory(
        float(ntraj) * t.size * (n + n_obs) * 8.0,
        f"the output of {ntraj} trajectories x {t.size} output times x {n} states"
        + (f" (+ {n_obs} observables)" if n_obs else ""),
        "ask for fewer output times or trajectories per call (nhfast.integrate_ensemble "
        "streams chunks to a store)",
    )
    y = np.empty((ntraj, t.size, n))
    status = np.zeros(ntraj, dtype=np.int32)
    stats = np.zeros((ntraj, _core.NSTATS), dtype=np.int64)
    t_reached = t[:1].copy() if ntraj == 1 else np.full(ntraj, t[0])
    # the state where each trajectory stopped, to tell a stop at the domain's boundary: for
    # a small batch from the run itself; a large one reruns its candidates (see below)
    x_end = np.empty((ntraj, n)) if watched and ntraj <= X_END_ROWS else None
    split = system.split or 0
    nstiff = NSTIFF if stiffness_check and method in ADAPTIVE and not taylor else 0
    record = None
    ev_args = None
    spec = ev_spec if dom is None else dom.spec
    if spec is not None:
        ev_cap, ev_ctx = (
            plan.domain_kernel()  # the domain's conditions alone: the plan's kernel
            if plan is not None and ev_spec is None
            else event_kernel(system, spec[0])
        )
        # the domain events are terminal: at most one more record per lane
        width = (max_events if ev_spec is not None else 0) + (dom is not None)
        record = EventRecord.empty(ntraj, width, n)
        ev_args = (ev_cap, ev_ctx, spec[1], spec[2], record.t, record.which, record.y,
                   record.count)  # fmt: skip
    if plan is not None and ev_spec is None and ctx is None:
        options = (method, rtol_in, atol_in, h, threads, observables, max_steps, hmax, tol_in,
                   max_iter, keep_failed, block, stiffness_check, dense, events, max_events,
                   order, watch_domain)  # fmt: skip
        core = (cap, ctx, n, npar, split, METHODS[method], rtol, atol, h0, hm, int(max_steps),
                tol, int(max_iter), int(threads), int(block), nstiff, bool(dense), tcap,
                torder, derive, nderived, tauto)  # fmt: skip
        _prepare(plan, system, options, core, method, watched, dom, bool(wanted), threads,
                 keep_failed)  # fmt: skip
    # positional (nstiff, t_end, dense, events, taylor, order, x_end, derive, nderived,
    # order_auto): keywords cost the call measurably (benchmarks/NOTES.md)
    _core.integrate_batch(
        cap, ctx, n, npar, split, METHODS[method], t, x, par, y, status, stats,
        rtol, atol, h0, hm, int(max_steps), tol, int(max_iter), int(threads), int(block),
        nstiff, t_reached, bool(dense), ev_args, tcap, torder, x_end, derive, nderived, tauto,
    )  # fmt: skip
    note = ""
    if dom is not None:
        if ev_spec is None and not (record.count[0] if ntraj == 1 else record.count.any()):
            record = None  # the domain alone was watched and no lane met its boundary
        else:
            record, note = domain_exits(system, dom, record, status, t[-1], t_reached, ev_spec, par)
    failed = status[0] if ntraj == 1 else np.count_nonzero(status)
    if watched and failed:
        if x_end is not None:
            note += domain_boundary(system, x, x_end, par, status, t_reached)
        else:
            lanes = np.flatnonzero(np.isin(status, _BOUNDARY_KINDS))
            if lanes.size:
                # their run again, with x_end (the same bits: a trajectory's arithmetic does
                # not depend on the batch it is in)
                m = lanes.size
                sub = None
                if ev_args is not None:
                    rec = EventRecord.empty(m, width, n)  # as wide as the run's record
                    sub = (*ev_args[:4], rec.t, rec.which, rec.y, rec.count)
                xe = np.empty((m, n))
                _core.integrate_batch(
                    cap, ctx, n, npar, split, METHODS[method], t, np.ascontiguousarray(x[lanes]),
                    par[lanes] if par.shape[0] > 1 else par, np.empty((m, t.size, n)),
                    np.zeros(m, dtype=np.int32), np.zeros((m, _core.NSTATS), dtype=np.int64),
                    rtol, atol, h0, hm, int(max_steps), tol, int(max_iter), int(threads),
                    int(block), nstiff=nstiff, t_end=np.full(m, t[0]), dense=bool(dense),
                    events=sub, taylor=tcap, order=torder, x_end=xe, derive=derive,
                    nderived=nderived, order_auto=tauto,
                )  # fmt: skip
                note += domain_boundary(system, x, xe, par, status, t_reached, lanes)
    if watched and dom is None:
        if plan is None:
            note += domain_outputs(system, t, y, par, status, t_reached, threads)
        elif failed or not plan.rows_inside(t, y, par):
            dk = plan.domain_kernel()
            note += domain_outputs(system, t, y, par, status, t_reached, threads, dk)
    res = IntegrationResult._from_core(t, y, status, stats, method, t_reached, record)
    _conclude(system, res, par, threads, wanted, keep_failed, note, dom is None, 4)
    return res


def _conclude(
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
        res.defer_observables(lambda r: _observables(system, r, par, threads))
    status = res.status
    if status[0] if status.size == 1 else np.count_nonzero(status):
        if hint and getattr(system, "domain", None):
            note += _domain_hint(status, res.method)
        report_failures(res, status != 0, keep_failed, note, stacklevel=stacklevel)


#: Option values a prepared call compares by type and value.
_PLAIN = frozenset({float, int, bool, str, type(None)})


def _prepare(
    plan: CallPlan,
    system: VectorField,
    options: tuple[Any, ...],
    core: tuple[Any, ...],
    method: str,
    watched: bool,
    dom: DomainWatch | None,
    wanted: bool,
    threads: int,
    keep_failed: Any,
) -> None:
    """Keep the :class:`nhfast._core.PreparedCall` of a checked call in ``plan`` (the next
    call with the same ``options`` and inputs of the common kinds skips the Python front
    end), when its option values are plain and its inputs' rules the plan's: parameters
    positive or unconstrained symbols, a domain of at most 16 conditions, ``watched`` (along
    the steps by the core's events ``dom``, else on the output rows) or not."""
    if not all(type(v) in _PLAIN for v in options) or not (plan.positive or plan.free):
        return
    ndom = len(plan.domain_conditions)
    if ndom > 16:
        return
    kernel = None
    if ndom:
        kernel, dctx = plan.domain_kernel()
        if dctx is not None:
            return
    watch_rows = watched and dom is None
    events = None if dom is None else (dom.spec[1], dom.spec[2])
    finish = partial(_finish_prepared, weakref.ref(system), wanted, threads, keep_failed)
    try:
        plan.prepared = _core_module().PreparedCall(
            options, core, plan.positive, kernel, ndom, method not in ADAPTIVE, watch_rows,
            events, X_END_ROWS, IntegrationResult, method, finish, wanted,
        )  # fmt: skip
    except (TypeError, ValueError):  # the core's own checks refuse these (its call says why)
        plan.prepared = None


def _finish_prepared(
    system_ref: weakref.ref,
    wanted: bool,
    threads: int,
    keep_failed: Any,
    res: IntegrationResult,
    x0: np.ndarray,
    params: np.ndarray | None,
    failed: int,
    outside: int,
    x_end: np.ndarray | None,
    record: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None,
) -> None:
    """What :func:`integrate` does after the core run of a prepared call with ``failed``
    trajectories that failed or ``outside`` that left the domain (an output row outside it,
    or a domain event in ``record``, the arrays of an :class:`EventRecord`; ``x_end``: the
    states where they stopped, when the domain is watched), or observables wanted: the
    domain's marks, observables on first access, and the report of failed trajectories."""
    system = system_ref()
    par = _NO_PARAMS if params is None else params.reshape(-1, system.n_params)
    note = ""
    status, t_reached = res.status, res.t_reached
    if record is not None and outside:  # the domain's events stopped trajectories
        rec = EventRecord(*record)
        watch = call_plan(system).domain_watch()
        _, note = domain_exits(system, watch, rec, status, res.t[-1], t_reached, None, par)
    failed = np.count_nonzero(status)  # with the lanes the domain's events stopped
    if x_end is not None and failed:
        x = x0.reshape(-1, system.n_state)
        note += domain_boundary(system, x, x_end, par, status, t_reached)
    if x_end is not None and record is None and (failed or outside):
        dk = call_plan(system).domain_kernel()
        note += domain_outputs(system, res.t, res.y, par, status, t_reached, threads, dk)
    _conclude(system, res, par, threads, wanted, keep_failed, note, record is None, 5)


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


#: The smallest relative tolerance an adaptive method is given (4 ulp of 1): below it the
#: error of a step is round-off, which no step size controls (a run asked for 1e-30 ends less
#: accurate than at 1e-15, after many more steps).
TOL_FLOOR = 4 * 2.220446049250313e-16


def _floor_tolerances(method: str, rtol: float, atol: float) -> tuple[float, float]:
    """``rtol`` (and for Taylor, whose order ``atol`` sets too, ``atol``) raised to
    :data:`TOL_FLOOR`, with a :class:`~nhfast.errors.ToleranceWarning` naming them."""
    said = [f"rtol={rtol:g}"] if rtol < TOL_FLOOR else []
    if method == "taylor" and atol < TOL_FLOOR:
        said.append(f"atol={atol:g}")
    warnings.warn(
        f"{' and '.join(said)} {'is' if len(said) == 1 else 'are'} below what double precision "
        f"can deliver with method={method!r}; using {TOL_FLOOR:.3g} (a step's error cannot be "
        "controlled below round-off)",
        ToleranceWarning,
        stacklevel=3,
    )
    return max(rtol, TOL_FLOOR), (max(atol, TOL_FLOOR) if method == "taylor" else atol)


def _taylor_order(order: Any, method: str) -> int:
    """The ``order`` argument as the core's (0: from the tolerance); checks it."""
    if order is None:
        return 0
    if method != "taylor":
        raise ValueError(f"order applies to method='taylor' only, got method={method!r}")
    if isinstance(order, (bool, np.bool_)) or not isinstance(order, (int, np.integer)):
        raise TypeError(f"order must be an integer or None, got {type(order).__name__}")
    if not 1 <= order <= _abi.TAYLOR_MAX_ORDER:
        raise ValueError(f"order must be in [1, {_abi.TAYLOR_MAX_ORDER}] or None, got {order}")
    return int(order)


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


_serial_warned = False


def _warn_serial() -> None:
    global _serial_warned
    if not _serial_warned:
        _serial_warned = True
        warnings.warn(
            "this build of nhfast has no OpenMP: threads > 1 runs serially",
            RuntimeWarning,
            stacklevel=3,
        )


def _observables(
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
