"""One configuration of :func:`nhfast.integrate.integrate` for one system: the call object.

A :class:`Call` is built once per ``(system, options)`` -- the options being every argument
but the inputs ``x0``, ``t_eval``, ``params`` -- and kept in the system's memo when the option
values are plain (numbers, strings, None). It owns the checks of the options (with the
functions of :mod:`nhfast._validate`), the choice of kernels, the core's arguments, the result
and the failure report; :meth:`Call.run` checks the inputs and runs the core. A run the core
can repeat on its own leaves a :class:`nhfast._core.PreparedCall` in the system's
:class:`~nhfast._fastpath.CallPlan`: the next call with the same options goes there first and
the core checks only the inputs, which no call object knows in advance.
"""

from __future__ import annotations

import math
import warnings
import weakref
from functools import partial
from typing import Any

import numpy as np

from nhfast import _abi
from nhfast._cache import memo, peek
from nhfast._fastpath import NO_PARAMS, CallPlan, call_plan, checks_its_own_inputs, taylor_kernel
from nhfast._kernels import InputChecks
from nhfast._memory import check as check_memory
from nhfast._result import IntegrationResult, conclude
from nhfast._validate import (
    flag,
    optional_order,
    output_times,
    params_rows,
    positive,
    positive_ints,
    state_rows,
)
from nhfast.errors import ToleranceWarning
from nhfast.events import (
    EventRecord,
    domain_boundary,
    domain_exits,
    domain_outputs,
    domain_watch,
    event_kernel,
    event_spec,
)
from nhfast.vectorfield import VectorField

__all__: list[str] = []

METHODS = _abi.METHODS
ADAPTIVE = _abi.ADAPTIVE
#: Measure-preserving methods for phi-simple Chaplygin systems (``nhfast.hamiltonised``).
HAMILTONISED = ("hamiltonised-midpoint", "hamiltonised-gauss4", "hamiltonised-gauss6")
#: Batches up to this many trajectories get the state where each stopped from the run itself
#: (``x_end``, n doubles per trajectory); larger ones rerun the few that failed the way a
#: trajectory at the boundary of its domain fails (:data:`_BOUNDARY_KINDS`) to get it.
X_END_ROWS = 4096
_BOUNDARY_KINDS = (_abi.LANE["step_underflow"], _abi.LANE["nonfinite"])
#: Hairer's NSTIFF (DOP853/DOPRI5 codes): the stiffness test of the adaptive methods runs
#: after every NSTIFF-th accepted step, and after every step once it found an estimate above
#: the method's stability bound (see ``stiffness_check`` of :func:`nhfast.integrate`).
NSTIFF = 1000
#: The smallest relative tolerance an adaptive method is given (4 ulp of 1): below it the
#: error of a step is round-off, which no step size controls (a run asked for 1e-30 ends less
#: accurate than at 1e-15, after many more steps).
TOL_FLOOR = 4 * 2.220446049250313e-16
#: Option values a call object is kept for, and a prepared call compares, by type and value.
_PLAIN = frozenset({float, int, bool, str, type(None)})
#: Call objects kept per system (a sweep over tolerances must not grow the memo unbounded).
_KEPT = 32

_CORE: Any = None


def core_module() -> Any:
    """``nhfast._core``, imported on the first call (not at import time)."""
    global _CORE
    if _CORE is None:
        from nhfast import _core

        _CORE = _core
    return _CORE


def check_method(system: Any, method: Any) -> None:
    """The method is one of :data:`METHODS` and ``system`` a vector field that can take it."""
    if not isinstance(method, str) or method not in METHODS:
        if isinstance(method, str) and method in HAMILTONISED:
            raise ValueError(
                f"method {method!r} is nhfast.integrate_hamiltonised(system, x0, t_eval, "
                f"method={method.removeprefix('hamiltonised-')!r}, ...), for a phi-simple "
                "Chaplygin system; integrate takes vector fields"
            )
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    if not isinstance(system, VectorField):
        raise TypeError(
            f"system must be a VectorField or HamiltonianSystem, got {type(system).__name__}"
        )
    if method == "leapfrog":
        why = memo(system, "separability", lambda: (system.separability(),))[0]
        if why is not None:
            raise ValueError(f"method='leapfrog' needs a separable partitioned system: {why}")


def input_checks(system: VectorField) -> InputChecks | None:
    """The fast input checks of ``system``, built once per system (None: run its methods,
    for a class that overrides ``check_inputs``, ``check_params`` or ``check_domain``)."""

    def build() -> InputChecks | None:
        if checks_its_own_inputs(system):
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


def _floor_tolerances(method: str, rtol: float, atol: float) -> tuple[float, float, str]:
    """``rtol`` (and for Taylor, whose order ``atol`` sets too, ``atol``) raised to
    :data:`TOL_FLOOR`, and the warning that names them."""
    said = [f"rtol={rtol:g}"] if rtol < TOL_FLOOR else []
    if method == "taylor" and atol < TOL_FLOOR:
        said.append(f"atol={atol:g}")
    msg = (
        f"{' and '.join(said)} {'is' if len(said) == 1 else 'are'} below what double precision "
        f"can deliver with method={method!r}; using {TOL_FLOOR:.3g} (a step's error cannot be "
        "controlled below round-off)"
    )
    return max(rtol, TOL_FLOOR), (max(atol, TOL_FLOOR) if method == "taylor" else atol), msg


def _check_step_count(t: np.ndarray, h0: float, max_steps: int) -> None:
    """A fixed-step run of step ``h0`` over ``t`` takes at most ``max_steps`` steps."""
    if t.size == 2:  # one interval: the same count as below, without arrays
        t0, t1 = t.tolist()
        d = abs(t1 - t0) / h0 * (1 - 1e-12)  # floats: inf on overflow, as in NumPy
        nsteps = max(1.0, float(math.ceil(d))) if d < math.inf else math.inf
    elif t.size > 1:
        with np.errstate(over="ignore"):
            steps = np.maximum(1, np.ceil(np.abs(np.diff(t)) / h0 * (1 - 1e-12)))
        nsteps = float(np.sum(steps))  # may overflow to inf for a tiny h: compare as float
    else:
        return
    if not nsteps <= max_steps:
        count = f"{nsteps:.0f}" if nsteps < 1e15 else f"{nsteps:.3g}"
        raise ValueError(f"h={h0:g} needs {count} steps, more than max_steps={max_steps}")


_serial_warned = False


def _warn_serial() -> None:
    global _serial_warned
    if not _serial_warned:
        _serial_warned = True
        warnings.warn(
            "this build of nhfast has no OpenMP: threads > 1 runs serially",
            RuntimeWarning,
            stacklevel=4,
        )


class Call:
    """One configuration of :func:`nhfast.integrate.integrate` for ``system``, checked once.

    Parameters
    ----------
    system : VectorField
    options : tuple
        The option values of :func:`nhfast.integrate.integrate` in the order of its
        signature after ``params`` (``method`` first, ``h`` before ``threads``).

    Raises
    ------
    TypeError, ValueError
        On a bad option, naming it.
    """

    def __init__(self, system: VectorField, options: tuple[Any, ...]) -> None:
        (method, rtol, atol, h, threads, observables, max_steps, hmax, tol, max_iter,
         keep_failed, block, stiffness_check, dense, events, max_events, order,
         watch_domain) = options  # fmt: skip
        check_method(system, method)
        # weakly: a kept call lives in the system's memo, which must not keep the system alive
        self._system = weakref.ref(system)
        self.options, self.method = options, method
        self.plan: CallPlan | None = call_plan(system)
        self.warning = ""
        self.rtol, self.atol = positive(rtol, "rtol"), positive(atol, "atol")
        if method in ADAPTIVE and (
            self.rtol < TOL_FLOOR or (method == "taylor" and self.atol < TOL_FLOOR)
        ):
            self.rtol, self.atol, self.warning = _floor_tolerances(method, self.rtol, self.atol)
        self.tol = positive(tol, "tol")
        positive_ints(threads=threads, max_steps=max_steps, max_iter=max_iter, block=block)
        self.threads, self.max_steps, self.max_iter = int(threads), int(max_steps), int(max_iter)
        self.block = int(block)
        self.fixed = method not in ADAPTIVE
        if self.fixed and h is None:
            raise ValueError(f"h (the step size) is required for the fixed-step method {method!r}")
        self.h0 = 0.0 if h is None else positive(h, "h")
        self.hmax = 0.0 if hmax is None else positive(hmax, "hmax")
        self.dense = flag(dense, "dense")
        self.taylor = method == "taylor"
        if self.dense and method != "dop853" and not self.taylor:
            raise ValueError(
                f"dense=True needs method='dop853' (its continuous extension), got {method!r}"
            )
        if order is not None and method != "taylor":
            raise ValueError(f"order applies to method='taylor' only, got method={method!r}")
        self.order = optional_order(order, "order", _abi.TAYLOR_MAX_ORDER)
        located = self.dense or self.taylor
        self.events = None if events is None else event_spec(system, events, located)
        if self.events is not None:
            positive_ints(max_events=max_events)
        self.max_events = max_events
        watch = flag(watch_domain, "watch_domain")
        stiff = flag(stiffness_check, "stiffness_check")
        self.wanted = ("observables",) if observables and system.observables else ()
        self.watched = watch and bool(getattr(system, "domain", None))
        self.watch_steps = watch and (self.dense or self.taylor)
        self.nstiff = NSTIFF if stiff and method in ADAPTIVE and not self.taylor else 0
        self.keep_failed = keep_failed
        plan = self.plan
        # a prepared call takes plain option values and the plan's rules for the inputs
        self.preparable = (
            plan is not None
            and self.events is None
            and _plain(options)
            and (plan.positive or plan.free)
            and len(plan.domain_conditions) <= 16
        )
        self.static = (
            system.n_state, system.n_params, system.split or 0, METHODS[method], self.rtol,
            self.atol, self.h0, self.hmax, self.max_steps, self.tol, self.max_iter,
            self.threads, self.block, self.nstiff, self.dense,
        )  # fmt: skip

    @property
    def system(self) -> VectorField:
        """The system of this call (held weakly)."""
        system = self._system()
        if system is None:
            raise ReferenceError("the system of this call is gone")
        return system

    # ----------------------------------------------------------------------- kernels ----
    def _rhs(self) -> tuple[Any, Any, Any, Any, int, int]:
        """(rhs capsule, ctx, Taylor capsule, derive capsule, nderived, order_auto), looked up
        per run: the plan may have a faster Taylor kernel since the last."""
        system, plan = self.system, self.plan
        if self.taylor:
            located = self.events is not None or self.watched  # events: the tolerance's order
            args = (self.order, self.rtol, self.atol, located)
            tcap, ctx, tauto = (
                taylor_kernel(system, *args) if plan is None else plan.taylor_kernel(*args)
            )
            return None, ctx, tcap, None, 0, tauto
        cap, ctx, derive, nderived = (
            system.compile(self.wanted).integrator_rhs()
            if plan is None
            else plan.rhs_kernel(self.wanted)
        )
        return cap, ctx, None, derive, nderived, 0

    def _events(self, ctx: Any, ntraj: int, n: int) -> tuple[Any, Any, Any, int]:
        """(domain watch, record, the core's event arguments, record width) of a run."""
        system, plan, spec = self.system, self.plan, self.events
        dom = None
        if self.watch_steps and ctx is None:  # with a compiled kernel and a polynomial
            dom = (
                plan.domain_watch()
                if plan is not None and spec is None
                else domain_watch(system, spec)
            )
        spec = spec if dom is None else dom.spec
        if spec is None:
            return dom, None, None, 0
        ev_cap, ev_ctx = (
            plan.domain_kernel()  # the domain's conditions alone: the plan's kernel
            if plan is not None and self.events is None
            else event_kernel(system, spec[0])
        )
        # the domain events are terminal: at most one more record per lane
        width = (self.max_events if self.events is not None else 0) + (dom is not None)
        record = EventRecord.empty(ntraj, width, n)
        ev_args = (ev_cap, ev_ctx, spec[1], spec[2], record.t, record.which, record.y,
                   record.count)  # fmt: skip
        return dom, record, ev_args, width

    # --------------------------------------------------------------------------- run ----
    def inputs(self, x0: Any, t_eval: Any, params: Any) -> tuple[np.ndarray, ...]:
        """``(x, t, par)``: the inputs checked (the plan's checks, else the full ones, which
        name what is wrong)."""
        system, plan = self.system, self.plan
        fast = None if plan is None else plan.inputs(x0, t_eval, params)
        if fast is not None:
            return fast
        x = state_rows(x0, system.n_state, "x0")
        t = output_times(t_eval, "t_eval")
        par = params_rows(params, system.params, x.shape[0], "params")
        check_inputs(system, x, par, "x0")
        return x, t, par

    def core_args(self, cap: Any, ctx: Any) -> tuple[Any, ...]:
        """The core's arguments of this call that do not depend on the inputs."""
        return (cap, ctx, *self.static)

    def run(self, x0: Any, t_eval: Any, params: Any) -> IntegrationResult:
        """Check the inputs, run the core, mark the domain's exits, report failures.

        Parameters
        ----------
        x0, t_eval, params
            As for :func:`nhfast.integrate.integrate`.

        Returns
        -------
        IntegrationResult
        """
        core = core_module()
        x, t, par = self.inputs(x0, t_eval, params)
        if self.warning:
            warnings.warn(self.warning, ToleranceWarning, stacklevel=3)
        if self.fixed:
            _check_step_count(t, self.h0, self.max_steps)
        if self.threads > 1 and not core.HAVE_OPENMP:
            _warn_serial()
        system, plan = self.system, self.plan
        n, ntraj = system.n_state, x.shape[0]
        cap, ctx, tcap, derive, nderived, tauto = self._rhs()
        dom, record, ev_args, width = self._events(ctx, ntraj, n)
        n_obs = len(system.observables) if self.wanted else 0
        check_memory(
            float(ntraj) * t.size * (n + n_obs) * 8.0,
            f"the output of {ntraj} trajectories x {t.size} output times x {n} states"
            + (f" (+ {n_obs} observables)" if n_obs else ""),
            "ask for fewer output times or trajectories per call (nhfast.integrate_ensemble "
            "streams chunks to a store)",
        )
        y = np.empty((ntraj, t.size, n))
        status = np.zeros(ntraj, dtype=np.int32)
        stats = np.zeros((ntraj, core.NSTATS), dtype=np.int64)
        t_reached = t[:1].copy() if ntraj == 1 else np.full(ntraj, t[0])
        # the state where each trajectory stopped, to tell a stop at the domain's boundary: for
        # a small batch from the run itself; a large one reruns its candidates (see below)
        x_end = np.empty((ntraj, n)) if self.watched and ntraj <= X_END_ROWS else None
        args = self.core_args(cap, ctx)
        tail = (tcap, self.order, derive, nderived, tauto)
        if self.preparable and ctx is None:
            self._prepare((*args, *tail), dom)
        # positional: keywords cost the call measurably (benchmarks/NOTES.md)
        core.integrate_batch(
            *args[:6], t, x, par, y, status, stats, *args[6:16], t_reached, args[16], ev_args,
            tcap, self.order, x_end, derive, nderived, tauto,
        )  # fmt: skip
        note = ""
        if dom is not None:
            if self.events is None and not (record.count[0] if ntraj == 1 else record.count.any()):
                record = None  # the domain alone was watched and no lane met its boundary
            else:
                record, note = domain_exits(
                    system, dom, record, status, t[-1], t_reached, self.events, par
                )
        failed = status[0] if ntraj == 1 else np.count_nonzero(status)
        if self.watched and failed:
            if x_end is None:
                x_end, lanes = self._rerun_boundary(args, tail, t, x, par, status, ev_args, width)
            else:
                lanes = None
            if x_end is not None:
                note += domain_boundary(system, x, x_end, par, status, t_reached, lanes)
        if self.watched and dom is None:
            if plan is None:
                note += domain_outputs(system, t, y, par, status, t_reached, self.threads)
            elif failed or not plan.rows_inside(t, y, par):
                dk = plan.domain_kernel()
                note += domain_outputs(system, t, y, par, status, t_reached, self.threads, dk)
        res = IntegrationResult._from_core(t, y, status, stats, self.method, t_reached, record)
        conclude(system, res, par, self.threads, bool(self.wanted), self.keep_failed, note,
                 dom is None, 5)  # fmt: skip
        return res

    def _rerun_boundary(
        self,
        args: tuple[Any, ...],
        tail: tuple[Any, ...],
        t: np.ndarray,
        x: np.ndarray,
        par: np.ndarray,
        status: np.ndarray,
        ev_args: Any,
        width: int,
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The states where the lanes that failed as at a boundary stopped: their run again,
        with ``x_end`` (the same bits: a trajectory's arithmetic does not depend on the batch
        it is in). ``(None, None)`` when there are none."""
        lanes = np.flatnonzero(np.isin(status, _BOUNDARY_KINDS))
        if not lanes.size:
            return None, None
        m, n = lanes.size, self.system.n_state
        sub = None
        if ev_args is not None:
            rec = EventRecord.empty(m, width, n)  # as wide as the run's record
            sub = (*ev_args[:4], rec.t, rec.which, rec.y, rec.count)
        xe = np.empty((m, n))
        tcap, order, derive, nderived, tauto = tail
        core_module().integrate_batch(
            *args[:6], t, np.ascontiguousarray(x[lanes]),
            par[lanes] if par.shape[0] > 1 else par, np.empty((m, t.size, n)),
            np.zeros(m, dtype=np.int32), np.zeros((m, core_module().NSTATS), dtype=np.int64),
            *args[6:15], nstiff=args[15], t_end=np.full(m, t[0]), dense=args[16], events=sub,
            taylor=tcap, order=order, x_end=xe, derive=derive, nderived=nderived,
            order_auto=tauto,
        )  # fmt: skip
        return xe, lanes

    def _prepare(self, core: tuple[Any, ...], dom: Any) -> None:
        """Keep the :class:`nhfast._core.PreparedCall` of this call in the plan (the next call
        with the same options and inputs of the common kinds skips the Python front end),
        when its option values are plain and its inputs' rules the plan's: parameters
        positive or unconstrained symbols, a domain of at most 16 conditions, watched along
        the steps by the core's events ``dom``, else on the output rows, or not."""
        plan = self.plan
        ndom = len(plan.domain_conditions)
        kernel = None
        if ndom:
            kernel, dctx = plan.domain_kernel()
            if dctx is not None:
                return
        watch_rows = self.watched and dom is None
        events = None if dom is None else (dom.spec[1], dom.spec[2])
        finish = partial(_finish_prepared, weakref.ref(self.system), bool(self.wanted),
                         self.threads, self.keep_failed)  # fmt: skip
        plan.prepared_method = self.method
        try:
            plan.prepared = core_module().PreparedCall(
                self.options, core, plan.positive, kernel, ndom, self.fixed, watch_rows,
                events, X_END_ROWS, IntegrationResult, self.method, finish, bool(self.wanted),
            )  # fmt: skip
        except (TypeError, ValueError):  # the core's own checks refuse these (its call says why)
            plan.prepared = None


def _plain(options: tuple[Any, ...]) -> bool:
    for v in options:
        if type(v) not in _PLAIN:
            return False
    return True


def call_for(system: Any, options: tuple[Any, ...]) -> Call:
    """The :class:`Call` of ``(system, options)``: kept in the system's memo when every option
    value is plain, else built for this call."""
    events = options[14]
    if not isinstance(system, VectorField) or events is not None or not _plain(options):
        return Call(system, options)  # events (a sequence) or an option of another type
    calls: dict[tuple[Any, ...], Call] | None = peek(system, "calls")
    if calls is None:
        calls = memo(system, "calls", dict)
    key = (*options, *map(type, options))  # 1 and 1.0 and True are other options
    call = calls.get(key)
    if call is None:
        if len(calls) >= _KEPT:
            calls.clear()
        call = calls[key] = Call(system, options)
    return call


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
    """What :meth:`Call.run` does after the core run of a prepared call with ``failed``
    trajectories that failed or ``outside`` that left the domain (an output row outside it,
    or a domain event in ``record``, the arrays of an :class:`EventRecord`; ``x_end``: the
    states where they stopped, when the domain is watched), or observables wanted: the
    domain's marks, observables on first access, and the report of failed trajectories."""
    system = system_ref()
    par = NO_PARAMS if params is None else params.reshape(-1, system.n_params)
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
    conclude(system, res, par, threads, wanted, keep_failed, note, record is None, 5)
