"""Public front end of the batch integrators: :func:`integrate`.

A call runs the :class:`nhfast._core.PreparedCall` of the last checked call of the system
with the same options when there is one (inputs, outputs and core in one compiled pass);
otherwise it gets or builds the call object of ``(system, options)``
(:class:`nhfast._call.Call`: the options checked once, the kernels, the core's arguments, the
result and the failure report) and runs it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nhfast._cache import peek
from nhfast._call import (  # noqa: F401 - the call's constants, importable from here as before
    ADAPTIVE,
    HAMILTONISED,
    METHODS,
    NSTIFF,
    TOL_FLOOR,
    X_END_ROWS,
    call_for,
    check_inputs,
    input_checks,
)
from nhfast._result import STATUS, IntegrationResult, report_failures  # noqa: F401
from nhfast.vectorfield import VectorField


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
    runs = _sides(system, x0, params)
    if runs is not None and len(runs) > 1:  # initial states on both sides of a singular set
        return _integrate_sides(
            runs, x0, t_eval, params,
            dict(method=method, rtol=rtol, atol=atol, h=h, threads=threads,
                 observables=observables, max_steps=max_steps, hmax=hmax, tol=tol,
                 max_iter=max_iter, block=block, stiffness_check=stiffness_check, dense=dense,
                 events=events, max_events=max_events, order=order, watch_domain=watch_domain),
            keep_failed,
        )  # fmt: skip
    if runs is not None:
        system = runs[0][2]
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
    options = (method, rtol, atol, h, threads, observables, max_steps, hmax, tol, max_iter,
               keep_failed, block, stiffness_check, dense, events, max_events, order,
               watch_domain)  # fmt: skip
    return call_for(system, options).run(x0, t_eval, params)


def _sides(system: Any, x0: Any, params: Any) -> list[tuple[int, int, Any]] | None:
    """Runs ``(start, stop, field)`` of consecutive initial states on one side of every
    ``expr != 0`` domain condition, with the field oriented to that side
    (:meth:`VectorField.on_side`); None when the system has no such condition, or when
    ``x0`` / ``params`` are malformed (the call's own checks then name the argument)."""
    if not getattr(system, "nonzero", ()):
        return None
    try:
        x = np.atleast_2d(np.asarray(x0, dtype=float))
        par = np.atleast_2d(np.asarray([] if params is None else params, dtype=float))
    except (TypeError, ValueError):
        return None
    if x.ndim != 2 or x.shape[1] != system.n_state:
        return None
    if system.n_params and (par.shape[1] != system.n_params or par.shape[0] not in (1, len(x))):
        return None
    side = system.sides(x, par if system.n_params else x[:, :0])
    cuts = [0, *(np.flatnonzero(np.any(side[1:] != side[:-1], axis=1)) + 1).tolist(), len(x)]
    bounds = zip(cuts[:-1], cuts[1:], strict=True)
    return [(a, b, system.on_side(tuple(side[a].tolist()))) for a, b in bounds]


def _integrate_sides(
    runs: list[tuple[int, int, Any]],
    x0: Any,
    t_eval: Any,
    params: Any,
    options: dict[str, Any],
    keep_failed: bool,
) -> IntegrationResult:
    """Each run of initial states on one side of the singular sets as its own batch (the
    field oriented to that side), assembled in the order of ``x0``; failures reported once."""
    import warnings

    from nhfast.errors import IntegrationWarning

    x = np.atleast_2d(np.asarray(x0, dtype=float))
    par = None if params is None else np.atleast_2d(np.asarray(params, dtype=float))
    parts, notes = [], []
    for a, b, field in runs:
        p = params if par is None or par.shape[0] == 1 else par[a:b]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", IntegrationWarning)
            part = integrate(field, x[a:b], t_eval, params=p, keep_failed=True, **options)
        notes += [f"rows {a}:{b}: {w.message}" for w in caught]
        parts.append((a, part))
    res = IntegrationResult.assemble(parts, x.shape[0])
    note = ""
    if notes:
        note = (
            ". The initial states lie on both sides of a singular set and ran as separate "
            "batches (trajectory numbers within each): " + " | ".join(notes)
        )
    report_failures(res, res.failed, keep_failed, note, stacklevel=4)
    return res
