"""Measure-preserving integration of a Hamiltonised (phi-simple Chaplygin) system.

After the time change ``dt = exp(-phi) dtau`` a phi-simple Chaplygin system is canonical in the
Darboux momenta ``ptilde = exp(phi) p`` (Garcia-Naranjo and Marrero 2020, Theorem 3.21 and
Corollary 3.22); :func:`nhfast.symbolic.time_change.time_changed_system` builds that system.
:func:`integrate_hamiltonised` runs it with a Gauss-Legendre scheme on the grid ``tau_k = k h``
(symplectic: ``ds dptilde`` is preserved, hence ``exp((r - 1) phi) ds dp`` along the orbits),
integrates ``t(tau)`` alongside and returns ``(s, p)`` at the requested physical times.

Outputs: an output time ``t*`` is reached from the last grid node before it by one partial
Gauss step of length ``dtau in [0, h]``, found by Newton's method on ``t(tau_k + dtau) = t*``
to ``8 eps (|t*| + 1)`` (the observable ``time_residual``). The grid is never perturbed and
there is no interpolation: the error at an output is the scheme's global error (order 2, 4
or 6 for ``midpoint``, ``gauss4``, ``gauss6``).

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited".
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from nhfast._abi import LANE
from nhfast._validate import (
    output_times,
    params_rows,
    positive,
    positive_int,
    positive_ints,
    state_rows,
)
from nhfast.errors import IntegrationWarning
from nhfast.integrate import IntegrationResult, integrate, report_failures
from nhfast.symbolic.time_change import TimeChangedSystem

__all__ = [
    "TimeChangedSystem",
    "integrate_hamiltonised",
]

#: Symplectic schemes usable for the ``tau``-flow, and their orders.
GAUSS_METHODS = {"midpoint": 2, "gauss4": 4, "gauss6": 6}

_EPS = np.finfo(float).eps


def integrate_hamiltonised(
    system: TimeChangedSystem,
    x0: Any,
    t_eval: Any,
    method: str = "gauss6",
    h: float | None = None,
    params: Any = None,
    threads: int = 1,
    observables: bool = True,
    *,
    max_steps: int = 10_000_000,
    tol: float = 1e-14,
    max_iter: int = 100,
    max_newton: int = 30,
    keep_failed: bool = False,
    block: int = 64,
    chunk: int | None = None,
) -> IntegrationResult:
    """Integrate a Hamiltonised Chaplygin system (measure preserving).

    The canonical ``tau``-system ``(s, ptilde)`` with ``Htilde`` is integrated with a
    Gauss-Legendre scheme on the grid ``tau_k = k h``, with ``dt/dtau = exp(-phi)`` integrated
    alongside; outputs at the requested physical times are reached by one partial Gauss step
    from the last grid node (see the module docstring for the guarantee).
    ``nhfast.integrate_hamiltonised`` (the package's function) also takes a Chaplygin system
    and converts it with :func:`nhfast.symbolic.time_change.time_changed_system`.

    Parameters
    ----------
    system : TimeChangedSystem
    x0 : array_like, shape (2 r,) or (n_traj, 2 r)
        Initial states ``(s, p)`` in the original momenta ``p_i = K_ij sdot^j``.
    t_eval : array_like, shape (n_t,)
        Strictly increasing physical output times; ``t_eval[0]`` is the initial time.
    method : {"gauss6", "gauss4", "midpoint"}
    h : float
        Step size in ``tau`` (required).  In physical time a step lasts ``exp(-phi) h``.
    params : array_like, shape (n_params,) or (n_traj, n_params)
    threads : int
    observables : bool
        Return the observables ``energy`` (``Htilde``, equal to ``H``), ``phi``, ``tau`` and
        ``time_residual`` (``t(tau) - t_eval``, round-off sized) at the outputs.
    max_steps : int
        Budget of ``tau`` steps per trajectory.
    tol, max_iter : float, int
        Stage iteration of the Gauss schemes (see :func:`nhfast.integrate.integrate`).
    max_newton : int
        Newton iterations for each output's partial step.
    keep_failed : bool
        Keep failed trajectories as NaN rows (with a warning) instead of raising.
    block : int
    chunk : int, optional
        ``tau`` steps per call of the core (default: memory-bounded automatic choice).

    Returns
    -------
    IntegrationResult
        ``y[traj, time, :] = (s, p)``; ``method = "hamiltonised-<method>"``; ``stats`` count
        ``tau`` steps (``steps``) and all right-hand-side evaluations (``rhs_evals``),
        including the partial output steps.

    Raises
    ------
    TypeError, ValueError
        Bad arguments (naming the argument).
    IntegrationError
        A trajectory failed (non-finite state, stage iteration not converged, step budget,
        output time not reached, the chart's domain left) and ``keep_failed`` is False.

    Notes
    -----
    The chart's domain (conditions on the shape coordinates and parameters) is watched at
    the ``tau`` grid: a trajectory with a grid state outside it (a condition ``expr != 0``
    changing sign from ``x0``), or failing within one step of its boundary while heading to
    it, ends with status ``"left_domain"``, naming the condition.
    """
    tcs = system
    if not isinstance(tcs, TimeChangedSystem):
        raise TypeError(
            "system must be a TimeChangedSystem (see nhfast.symbolic.time_change), "
            f"got {type(tcs).__name__}"
        )
    if not isinstance(method, str) or method not in GAUSS_METHODS:
        raise ValueError(
            f"method must be one of {', '.join(GAUSS_METHODS)} (symplectic Gauss-Legendre "
            f"schemes for the tau-flow); got {method!r}"
        )
    r = tcs.rank
    x = state_rows(x0, 2 * r, "x0", " holding (s, p)")
    t_out = output_times(t_eval, "t_eval", increasing=True)
    if h is None:
        raise ValueError("h (the step size in tau, dt = exp(-phi) dtau) is required")
    hv = positive(h, "h")
    ntraj, nt = x.shape[0], t_out.size
    par = params_rows(params, tcs.tau_field.params, ntraj, "params", full=True)
    positive(tol, "tol")
    positive_ints(
        threads=threads, max_steps=max_steps, max_iter=max_iter, max_newton=max_newton, block=block
    )
    nz = 2 * r + 1
    dom = tcs.domain_field or tcs.tau_field
    dom.check_inputs(np.hstack([x, np.zeros((ntraj, 1))]), par, "x0")
    watch = _DomainWatch(dom, x, par, r)
    z0 = np.hstack([tcs.to_tilde(x, par), np.full((ntraj, 1), t_out[0])])
    if chunk is None:
        chunk = int(min(2048, max(16, 4_000_000 // max(1, ntraj * nz))))
    else:
        chunk = positive_int(chunk, "chunk")

    zout = np.full((ntraj, nt, nz), np.nan)
    tau_out = np.full((ntraj, nt), np.nan)
    zout[:, 0] = z0
    tau_out[:, 0] = 0.0
    status = np.zeros(ntraj, dtype=np.int32)
    steps = np.zeros(ntraj, dtype=np.int64)
    evals = np.zeros(ntraj, dtype=np.int64)
    iters = np.zeros(ntraj, dtype=np.int64)
    nxt = np.ones(ntraj, dtype=np.int64)  # index of the next output to produce, per lane
    active = np.flatnonzero(nxt < nt)
    z = z0.copy()
    tau0 = 0.0
    gauss = dict(method=method, h=hv, tol=tol, max_iter=max_iter, threads=threads, block=block)
    while active.size:
        # steps to the last output if dt/dtau stayed as it is now (+10 %), within [8, chunk]
        g_now = tcs.tau_field.evaluate("rhs", z[active], params=par[active])
        need = (t_out[-1] - z[active, -1]) / (np.abs(g_now[:, -1]) * hv)
        need = need[np.isfinite(need)]
        est = int(np.ceil(1.1 * need.max())) + 2 if need.size else chunk
        nsteps = int(min(chunk, max(8, est)))
        grid = tau0 + hv * np.arange(nsteps + 1)
        res = _quiet(
            tcs.tau_field,
            z[active],
            grid,
            params=par[active],
            observables=False,
            keep_failed=True,
            **gauss,
        )
        steps[active] += nsteps
        evals[active] += res.stats["rhs_evals"]
        iters[active] += res.stats["iterations"]
        bad = res.status != LANE["ok"]
        status[active[bad]] = res.status[bad]
        left = watch.left(res.y, active, grid, bad)
        status[active[left]] = LANE["left_domain"]
        bad |= left
        jobs_lane, jobs_out, jobs_node, jobs_k = [], [], [], []
        for j, lane in enumerate(active):
            if bad[j]:
                continue
            tl = res.y[j, :, -1]
            if not np.all(np.diff(tl) > 0):
                status[lane] = LANE["nonfinite"]  # dt/dtau = exp(-phi) must stay positive
                continue
            while nxt[lane] < nt and t_out[nxt[lane]] < tl[-1]:
                k = int(np.searchsorted(tl, t_out[nxt[lane]], side="right")) - 1
                jobs_lane.append(lane)
                jobs_out.append(nxt[lane])
                jobs_node.append(res.y[j, k])
                jobs_k.append(k)
                nxt[lane] += 1
        if jobs_lane:
            lanes = np.asarray(jobs_lane)
            outs = np.asarray(jobs_out)
            nodes = np.asarray(jobs_node)
            zz, dt_tau, ok, ev = _partial_steps(
                tcs, nodes, t_out[outs], par[lanes], gauss, max_newton, hv
            )
            zout[lanes, outs] = zz
            tau_out[lanes, outs] = grid[np.asarray(jobs_k)] + dt_tau
            np.add.at(evals, lanes, ev)
            prev = status[lanes[~ok]]
            status[lanes[~ok]] = np.where(prev == LANE["ok"], LANE["not_converged"], prev)
        z[active] = res.y[:, -1]
        tau0 = grid[-1]
        done = (nxt[active] >= nt) | (status[active] != LANE["ok"])
        over = steps[active] >= max_steps
        status[active[over & ~done]] = LANE["max_steps"]
        active = active[~(done | over)]

    failed = status != LANE["ok"]
    zout[failed] = np.nan
    tau_out[failed] = np.nan
    flat = zout.reshape(ntraj * nt, nz)
    parr = np.repeat(par, nt, axis=0)
    y = np.full((ntraj * nt, 2 * r), np.nan)
    fin = np.all(np.isfinite(flat), axis=1)
    if np.any(fin):
        y[fin] = tcs.from_tilde(flat[fin], parr[fin])
    out = IntegrationResult(
        t=t_out,
        y=y.reshape(ntraj, nt, 2 * r),
        status=status,
        stats={"steps": steps, "rhs_evals": evals, "rejected": np.zeros_like(steps),
               "iterations": iters},
        method=f"hamiltonised-{method}",
    )  # fmt: skip
    if observables:
        energy = np.full(ntraj * nt, np.nan)
        phis = np.full(ntraj * nt, np.nan)
        if np.any(fin):
            energy[fin] = tcs.hamiltonian(flat[fin], parr[fin])
            phis[fin] = tcs.phi(flat[fin, :r], parr[fin])
        out.observables = {
            "energy": energy.reshape(ntraj, nt),
            "phi": phis.reshape(ntraj, nt),
            "tau": tau_out,
            "time_residual": zout[:, :, -1] - t_out[None, :],
        }
    report_failures(out, failed, keep_failed, watch.note())
    return out


class _DomainWatch:
    """The chart's domain along the tau-grid of each chunk: a lane whose state leaves it
    (a condition ``expr > 0`` fails, or ``expr != 0`` changes sign from its value at ``x0``)
    ends with status ``"left_domain"``. Watched when the conditions depend on the shape
    coordinates and the parameters only (the same in the tilde variables)."""

    def __init__(self, dom: Any, x: np.ndarray, par: np.ndarray, r: int) -> None:
        names = set(dom.states[:r]) | set(dom.params)
        self.dom = dom if dom.domain and all(
            e.free_symbols <= names for e in dom.domain.values()
        ) else None  # fmt: skip
        self.hits: list[str] = []
        if self.dom is None:
            return
        self.par = par
        nz = np.array([k in dom.nonzero for k in dom.domain], dtype=bool)
        start = dom.domain_values(np.hstack([x, np.zeros((x.shape[0], 1))]), par)
        self.sign = np.where(nz, np.sign(start), 1.0)

    def left(
        self, y: np.ndarray, lanes: np.ndarray, grid: np.ndarray, bad: np.ndarray
    ) -> np.ndarray:
        """Mask over ``lanes`` of those whose grid states ``y`` (lanes, nodes, n) leave."""
        out = np.zeros(lanes.size, dtype=bool)
        if self.dom is None:
            return out
        labels = list(self.dom.domain)
        for j, lane in enumerate(lanes.tolist()):
            rows = y[j][np.all(np.isfinite(y[j]), axis=1)]
            if rows.shape[0] == 0:
                continue
            vals = self.dom.domain_values(rows, self.par[lane][None, :]) * self.sign[lane]
            outside = ~(vals > 0)
            how = "left"
            if not outside.any() and bad[j] and rows.shape[0] > 1:
                # failed (non-finite, no convergence) within one step of the boundary, heading
                # to it: the next value, extrapolated linearly, is not inside
                outside = np.zeros_like(outside)
                outside[-1] = 2 * vals[-1] - vals[-2] <= 0
                how = "ran into the boundary of"
            if outside.any():
                k, c = np.argwhere(outside)[0]
                out[j] = True
                if len(self.hits) < 5:
                    self.hits.append(
                        f"#{lane}: {how} domain[{labels[c]!r}] at tau = {grid[k]:.6g} "
                        f"(t = {rows[k, -1]:.6g})"
                    )
        return out

    def note(self) -> str:
        if not self.hits:
            return ""
        return f". {self.dom.name!r} left its domain: " + "; ".join(self.hits)


def _quiet(*args: Any, **kwargs: Any) -> IntegrationResult:
    """``integrate(..., keep_failed=True)`` without its warning (failures are collected)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IntegrationWarning)
        return integrate(*args, **kwargs)


def _partial_steps(
    tcs: TimeChangedSystem,
    nodes: np.ndarray,
    targets: np.ndarray,
    par: np.ndarray,
    gauss: dict,
    max_newton: int,
    h: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One partial Gauss step per row from ``nodes`` to the physical time ``targets``.

    Newton on ``dtau``: ``dtau <- dtau - (t(dtau) - t*) / (dt/dtau)(z(dtau))``.  Returns the end
    states, ``dtau``, a convergence mask and the right-hand-side evaluations per row.
    """
    m = nodes.shape[0]

    def rate(zz: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return tcs.tau_field.evaluate("rhs", zz, params=par[rows])[:, -1]

    dtau = (targets - nodes[:, -1]) / rate(nodes, np.arange(m))
    dtau = np.clip(dtau, 0.0, h)
    zz = nodes.copy()
    ok = np.zeros(m, dtype=bool)
    ev = np.ones(m, dtype=np.int64)  # the rate() evaluation at the nodes
    tol_t = 8 * _EPS * (np.abs(targets) + 1.0)
    todo = np.flatnonzero(targets > nodes[:, -1])
    zz[targets <= nodes[:, -1]] = nodes[targets <= nodes[:, -1]]
    ok[targets <= nodes[:, -1]] = True
    dtau[targets <= nodes[:, -1]] = 0.0
    step_kw = {k: v for k, v in gauss.items() if k != "h"}
    for _ in range(max_newton):
        if todo.size == 0:
            break
        res = _quiet(
            tcs.step_field,
            nodes[todo],
            np.array([0.0, 1.0]),
            params=np.hstack([par[todo], dtau[todo, None]]),
            observables=False,
            keep_failed=True,
            h=1.0,
            **step_kw,
        )
        ev[todo] += res.stats["rhs_evals"] + 1
        end = res.y[:, -1]
        zz[todo] = end
        good = res.status == LANE["ok"]
        resid = end[:, -1] - targets[todo]
        conv = good & (np.abs(resid) <= tol_t[todo])
        ok[todo[conv]] = True
        keep = good & ~conv
        g = rate(np.where(good[:, None], end, nodes[todo]), todo)
        dtau[todo] = np.where(keep, dtau[todo] - resid / g, dtau[todo])
        todo = todo[keep]
    return zz, dtau, ok, ev
