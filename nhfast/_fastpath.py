"""The common call of :func:`nhfast.integrate`, checked in one compiled pass.

A per-system :class:`CallPlan` (built once, kept in the system's memo) holds what every call
needs: sizes, the parameters' sign rules, the compiled domain kernel. :meth:`CallPlan.inputs`
accepts the usual arguments -- float64 arrays of the right shape, ``t_eval`` of two floats or
a float64 array -- when every value certainly passes the full checks, and returns None
otherwise: the caller then runs the full checks of :mod:`nhfast._validate` and the system,
which raise the errors (so the messages do not depend on the path). Results are the same
arrays either way.

The plan also keeps the :class:`nhfast._core.PreparedCall` of the last checked call that
can have one (``prepared``): a call with the same options runs it first, and its inputs,
outputs and core run in one compiled pass.
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from nhfast import _background, _core
from nhfast._cache import memo, peek
from nhfast.codegen import cost_order, unroll_pays
from nhfast.events import DomainWatch, domain_watch, event_kernel
from nhfast.vectorfield import VectorField

__all__: list[str] = []

_FLOAT = np.dtype(float)
_all = np.logical_and.reduce


#: The parameter rows of a system without parameters.
NO_PARAMS = np.zeros((1, 0))
NO_PARAMS.flags.writeable = False


class CallPlan:
    """What :func:`nhfast.integrate` needs of ``system`` on every call (see module doc)."""

    def __init__(self, system: VectorField) -> None:
        self.n = system.n_state
        self.npar = system.n_params
        params = list(system.params)
        # a positive parameter passes its check when the row's minimum is > 0; any other
        # assumption (nonnegative, nonzero, ...) is left to the full checks
        self.positive = bool(params) and all(p.is_positive for p in params)
        self.free = all(
            not (p.is_positive or p.is_nonnegative or p.is_nonzero or p.is_negative) for p in params
        )
        self.domain = bool(getattr(system, "domain", None))
        self.domain_conditions = list(system.domain.values()) if self.domain else []
        self._domain_kernel: tuple[Any, Any] | None = None
        self._taylor: dict[tuple[int, float, float], tuple[Any, Any]] = {}
        self._watch: tuple[DomainWatch | None] | None = None
        self._rhs: dict[tuple[str, ...], tuple[Any, Any, Any, int]] = {}
        #: The :class:`nhfast._core.PreparedCall` of the last checked call that had one
        #: (set by :func:`nhfast.integrate`; None before).
        self.prepared: Any = None
        #: The method of ``prepared`` (only a Taylor call depends on the kernels chosen here).
        self.prepared_method: str | None = None
        # weakly: the plan lives in the system's memo, which must not keep the system alive
        self._system = weakref.ref(system)

    def _owner(self) -> VectorField:
        """The system of this plan (held weakly)."""
        system = self._system()
        if system is None:
            raise ReferenceError("the system of this call plan is gone")
        return system

    def rhs_kernel(self, wanted: tuple[str, ...]) -> tuple[Any, Any, Any, int]:
        """The integrator's rhs (``CompiledSystem.integrator_rhs``) from the library that also
        holds the families ``wanted`` (``system.compile(wanted)``, looked up once)."""
        got = self._rhs.get(wanted)
        if got is None:
            got = self._rhs[wanted] = self._owner().compile(wanted).integrator_rhs()
        return got

    def taylor_kernel(
        self, order: int, rtol: float, atol: float, events: bool
    ) -> tuple[Any, Any, int]:
        """:func:`taylor_kernel` of the system, looked up once per ``(order, rtol, atol,
        events)`` (a few kept)."""
        key = (order, rtol, atol, events)
        got = self._taylor.get(key)
        if got is None:
            if len(self._taylor) >= 64:  # a sweep over tolerances: keep the table small
                self._taylor.clear()
            got = self._taylor[key] = taylor_kernel(self._owner(), order, rtol, atol, events)
        return got

    def forget_kernels(self) -> None:
        """Drop the Taylor kernels chosen so far and a prepared Taylor call (a faster kernel is
        there now: the next call chooses again); a prepared call of another method stays."""
        self._taylor = {}
        if self.prepared_method == "taylor":
            self.prepared = None

    def domain_watch(self) -> DomainWatch | None:
        """The domain's conditions as terminal events, without the user's (see
        :func:`nhfast.events.domain_watch`); None without a domain."""
        if self._watch is None:
            self._watch = (domain_watch(self._owner(), None),)
        return self._watch[0]

    def domain_kernel(self) -> tuple[Any, Any]:
        """(capsule, ctx) of the compiled kernel of the domain conditions."""
        if self._domain_kernel is None:
            self._domain_kernel = event_kernel(self._owner(), self.domain_conditions)
        return self._domain_kernel

    def inputs(
        self, x0: Any, t_eval: Any, params: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``(x, t, par)`` as the full checks would return them, or None (run those)."""
        n, npar = self.n, self.npar
        if type(x0) is not np.ndarray or x0.dtype != _FLOAT or not x0.flags.c_contiguous:
            return None
        if x0.ndim == 1:
            if x0.shape[0] != n:
                return None
            x = x0.reshape(1, n)
        elif x0.ndim == 2 and x0.shape[1] == n and x0.shape[0] > 0:
            x = x0
        else:
            return None
        if type(t_eval) is list and len(t_eval) == 2:
            t0, t1 = t_eval
            if type(t0) is not float or type(t1) is not float:
                return None
            if not (math.isfinite(t0) and math.isfinite(t1) and t0 != t1):
                return None
            t = np.array(t_eval)
        else:
            return None
        if npar == 0:
            if params is not None:
                return None
            par = NO_PARAMS
        else:
            if type(params) is not np.ndarray or params.dtype != _FLOAT:
                return None
            if not params.flags.c_contiguous or not (self.positive or self.free):
                return None
            if params.shape == (npar,):
                par = params.reshape(1, npar)
            elif params.ndim == 2 and params.shape == (x.shape[0], npar):
                par = params
            else:
                return None
        # states finite; parameters finite (and > 0 when they are positive symbols)
        if not _core.plain_inputs(x, par, self.positive):
            return None
        if self.domain and not self._inside(x, t, par):
            return None
        return x, t, par

    def _inside(self, x: np.ndarray, t: np.ndarray, par: np.ndarray) -> bool:
        """Whether every state is inside the domain (the compiled kernel of its conditions)."""
        cap, ctx = self.domain_kernel()
        m = len(self.domain_conditions)
        rows = x.shape[0]
        if ctx is None and par.shape[0] == 1:  # compiled: one call, one time for every row
            return _core.all_positive_rows(cap, ctx, m, t[:1], x, par[0])
        vals = np.empty((rows, m))
        times = np.full(rows, t[0]) if rows > 1 else t[:1]
        _core.eval_rows(cap, ctx, m, times, x, par, 1, vals, threads=1)
        return bool(_all(vals > 0, axis=None))

    def rows_inside(self, t: np.ndarray, y: np.ndarray, par: np.ndarray) -> bool:
        """Whether the output rows ``y`` (one trajectory, shape (1, n_t, n)) are certainly
        inside the domain (False: let :func:`nhfast.events.domain_outputs` look)."""
        cap, ctx = self.domain_kernel()
        if ctx is not None or y.shape[0] != 1:
            return False
        m = len(self.domain_conditions)
        return _core.all_positive_rows(cap, ctx, m, t, y[0], par[0])


def taylor_kernel(
    system: VectorField, order: int, rtol: float, atol: float, events: bool = False
) -> tuple[Any, Any, int]:
    """(capsule, ctx, order_auto) of a Taylor run of ``system`` with ``order`` (0: from the
    tolerance), ``rtol``, ``atol`` and ``events`` (whether the run locates events, the
    domain's included): the core's ``order_auto`` and the kernel ``system.compile_taylor(p)``
    for the order ``p`` the run takes (with a pass unrolled for it where that pays; its
    ``nh_taylor`` takes any order).

    Only the general kernel is ever compiled inside a call: a kernel unrolled for ``p`` that
    neither this process nor the cache has is built in the background
    (:mod:`nhfast._background`) while the run takes the general one, which gives the same
    bits; when it is built, the system's :class:`CallPlan` forgets its choices of kernel (and
    its prepared call), so the next call takes it.

    ``order_auto`` is the order of least work (:func:`nhfast.codegen.cost_order`), or 0 (the
    tolerance's order) with a given ``order`` or with events: they are found where their
    function changes sign between the ends of a step, and the longer steps of a higher order
    would miss more pairs of crossings inside one."""
    compile_taylor = getattr(system, "compile_taylor", None)
    if compile_taylor is None:
        raise TypeError(f"method='taylor': {type(system).__name__} has no Taylor kernels")
    p = _core.taylor_order(order, rtol, atol)
    general = compile_taylor()
    auto = 0 if order or events else cost_order(general.taylor_size, system.n_state, p)
    want = auto or p
    ready_fn = getattr(system, "taylor_kernel_ready", None)
    if general.source is None or not unroll_pays(general.taylor_size, want):
        ready = general
    elif ready_fn is None:
        ready = compile_taylor(want)
    else:
        ready = ready_fn(want)
        if ready is None:
            ref = weakref.ref(system)

            def job() -> None:
                _build_unrolled(ref, want)

            memo(system, ("taylor-build", want), lambda: _background.submit(object(), job) or True)
            ready = peek(system, ("taylor", want)) or general  # built here if not in background
    return (*ready.kernels["taylor"], auto)


def _build_unrolled(ref: weakref.ref, order: int) -> None:
    """Build the system's Taylor kernel unrolled for ``order``, then let its plan choose again."""
    system = ref()
    if system is None:
        return
    system.compile_taylor(order)
    plan = peek(system, "call_plan")
    if plan is not None and plan[0] is not None:
        plan[0].forget_kernels()


def checks_its_own_inputs(system: VectorField) -> bool:
    """Whether the class of ``system`` overrides ``check_inputs``, ``check_params`` or
    ``check_domain`` (then only its own methods decide, never the cached checks)."""
    cls = type(system)
    return any(
        getattr(cls, m) is not getattr(VectorField, m)
        for m in ("check_inputs", "check_params", "check_domain")
    )


def call_plan(system: VectorField) -> CallPlan | None:
    """The system's :class:`CallPlan`, built once; None for a system whose checks are its own
    (a class that overrides ``check_inputs``, ``check_params`` or ``check_domain``)."""
    plan = peek(system, "call_plan")
    if plan is not None:
        return plan[0]

    def build() -> CallPlan | None:
        return (None if checks_its_own_inputs(system) else CallPlan(system),)  # None is a value

    return memo(system, "call_plan", build)[0]
