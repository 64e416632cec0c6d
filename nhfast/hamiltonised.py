"""Measure-preserving integration of phi-simple Chaplygin systems by Hamiltonisation.

Seed 004 (Theorem 3.21, Corollary 3.22): a phi-simple Chaplygin system,
``C^k_ij = delta^k_i d_j phi - delta^k_j d_i phi``, becomes canonical Hamiltonian after the time
change ``dt = exp(-phi) dtau`` in the Darboux momenta ``ptilde = exp(phi) p``, with
``Htilde(s, ptilde) = H(s, exp(-phi) ptilde)``.  :func:`integrate_hamiltonised` integrates that
canonical system with a Gauss-Legendre scheme (symplectic, so the ``tau``-flow preserves
``ds dptilde`` and hence ``exp((r - 1) phi) ds dp`` along the ``t``-flow's orbits, and keeps
``Htilde`` within a bounded oscillation), integrates ``t(tau)`` alongside, and returns the states
in the original variables ``(s, p)`` at the requested physical times.

Outputs at requested times (the accuracy guarantee)
---------------------------------------------------
The ``tau`` grid ``tau_k = k h`` is never perturbed by the outputs.  For an output time ``t*``
the last grid node with ``t(tau_k) <= t*`` is continued by *one partial Gauss step* of length
``dtau in [0, h]``, with ``dtau`` found by Newton's method on ``t(tau_k + dtau) = t*`` (the
derivative is ``dt/dtau = exp(-phi)``).  The Newton iteration stops when
``|t(tau_k + dtau) - t*| <= 8 eps (|t*| + 1)``; the residual is returned as the observable
``time_residual``.  So the output is the Gauss-Legendre solution itself at a ``tau`` that hits
``t*`` to round-off: there is no interpolation error, and the error at the output is the
scheme's global error (order ``2 s``: 2 for ``midpoint``, 4 for ``gauss4``, 6 for ``gauss6``).
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from nhfast.errors import IntegrationWarning
from nhfast.integrate import IntegrationResult, integrate, report_failures
from nhfast.vectorfield import VectorField

__all__ = [
    "GAUSS_METHODS",
    "TimeChangedSystem",
    "time_changed_system",
    "integrate_hamiltonised",
]

#: Symplectic schemes usable for the ``tau``-flow, and their orders.
GAUSS_METHODS = {"midpoint": 2, "gauss4": 4, "gauss6": 6}

_EPS = np.finfo(float).eps


@dataclass
class TimeChangedSystem:
    """A Hamiltonised Chaplygin system ready for integration in ``tau``.

    Attributes
    ----------
    hamiltonised : nhfast.symbolic.chaplygin.HamiltonisedSystem
        ``(s, ptilde)``, ``Htilde``, ``phi`` and the ``tau``-equations.
    rank : int
        ``r``, the dimension of the shape space.
    tau_field : VectorField
        States ``(s, ptilde, t)``: the canonical ``tau``-equations and ``dt/dtau = exp(-phi)``;
        observables ``energy`` (``Htilde``) and ``phi``.
    step_field : VectorField
        ``tau_field`` with its right-hand side multiplied by one more parameter ``dtau`` (last):
        one Gauss step of size 1 of ``step_field`` is one Gauss step of size ``dtau`` of
        ``tau_field`` (Runge-Kutta schemes commute with this rescaling).
    name : str
    domain_field : VectorField or None
        The ``tau``-system carrying the chart's domain (checked on initial states only).
    """

    hamiltonised: Any
    rank: int
    tau_field: VectorField
    step_field: VectorField
    name: str = "hamiltonised"
    domain_field: VectorField | None = None
    _obs_index: dict = field(default_factory=dict, repr=False)

    @property
    def n_params(self) -> int:
        """Number of parameters of the system (not counting ``dtau``)."""
        return self.tau_field.n_params

    def phi(self, s: np.ndarray, params: np.ndarray) -> np.ndarray:
        """``phi(s)`` for rows ``s`` of shape ``(m, r)``; ``params`` of shape ``(m, n_params)``."""
        s = np.asarray(s, dtype=float)
        z = np.zeros((s.shape[0], self.tau_field.n_state))
        z[:, : self.rank] = s
        obs = self.tau_field.evaluate("observables", z, params=_rows(params, s.shape[0]))
        return obs[:, self._obs_index["phi"]]

    def hamiltonian(self, z: np.ndarray, params: np.ndarray) -> np.ndarray:
        """``Htilde`` at rows ``z = (s, ptilde, t)``."""
        obs = self.tau_field.evaluate("observables", z, params=_rows(params, z.shape[0]))
        return obs[:, self._obs_index["energy"]]

    def to_tilde(self, x: np.ndarray, params: np.ndarray) -> np.ndarray:
        """``(s, p) -> (s, ptilde = exp(phi) p)`` row-wise."""
        r = self.rank
        ph = self.phi(x[:, :r], params)
        return np.hstack([x[:, :r], np.exp(ph)[:, None] * x[:, r : 2 * r]])

    def from_tilde(self, z: np.ndarray, params: np.ndarray) -> np.ndarray:
        """``(s, ptilde) -> (s, p = exp(-phi) ptilde)`` row-wise (extra columns ignored)."""
        r = self.rank
        ph = self.phi(z[:, :r], params)
        return np.hstack([z[:, :r], np.exp(-ph)[:, None] * z[:, r : 2 * r]])


def _rows(params: np.ndarray, m: int) -> np.ndarray | None:
    if params is None or np.size(params) == 0:
        return None
    par = np.asarray(params, dtype=float)
    return np.broadcast_to(par, (m, par.shape[-1])) if par.ndim == 1 else par


_CACHE: dict[int, tuple[Any, TimeChangedSystem]] = {}


def time_changed_system(system: Any, phi: Any = None) -> TimeChangedSystem:
    """Build (once per system object) the ``tau``-system of a phi-simple Chaplygin system.

    Parameters
    ----------
    system : ChaplyginSystem, ReducedChaplyginSystem, HamiltonisedSystem or TimeChangedSystem
        A Chaplygin system is Hamiltonised with
        :func:`nhfast.symbolic.chaplygin.hamiltonise` (which finds ``phi`` with
        :func:`~nhfast.symbolic.chaplygin.phi_simple` unless ``phi`` is given).
    phi : sympy.Expr, optional
        ``phi(s)``; skips the phi-simplicity search.

    Returns
    -------
    TimeChangedSystem

    Raises
    ------
    TypeError
        If ``system`` is of another type.
    ValueError
        If the system is not phi-simple (the message gives the reason).
    """
    from nhfast.symbolic.chaplygin import HamiltonisedSystem, hamiltonise
    from nhfast.symbolic.systems import ChaplyginSystem, ReducedChaplyginSystem

    if isinstance(system, TimeChangedSystem):
        return system
    hit = _CACHE.get(id(system))
    if hit is not None and hit[0] is system and phi is None:
        return hit[1]
    domain: dict = {}
    if isinstance(system, HamiltonisedSystem):
        ham = system
    elif isinstance(system, (ChaplyginSystem, ReducedChaplyginSystem)):
        red = system.reduce() if isinstance(system, ChaplyginSystem) else system
        domain = dict(red.extra.get("domain", {}))
        try:
            ham = hamiltonise(red, phi=phi, simplify=False)
        except ValueError as exc:
            raise ValueError(
                f"system: the measure-preserving method needs a phi-simple Chaplygin system "
                f"(seed 004 Definition 3.19): {exc}"
            ) from None
    else:
        raise TypeError(
            "system must be a ChaplyginSystem, ReducedChaplyginSystem or HamiltonisedSystem "
            f"for the measure-preserving (Hamiltonised) method, got {type(system).__name__}"
        )
    taken = {str(x) for x in (*ham.q, *ham.p, *ham.params)}
    t_sym = sp.Symbol(_fresh_name("t_phys", taken), real=True)
    dtau = sp.Symbol(_fresh_name("dtau", taken), real=True)
    obs = {"energy": ham.hamiltonian, "phi": ham.phi}
    states = [*ham.q, *ham.p, t_sym]
    rhs = [*ham.rhs, ham.time_factor]
    kw: dict[str, Any] = {"solves": list(ham.solves)} if ham.solves else {}
    tau_field = VectorField(
        states=states,
        rhs=rhs,
        params=list(ham.params),
        observables=obs,
        name="hamiltonised tau-flow",
        **kw,
    )
    # the chart's domain is checked on x0 only (the chunks of the run must not re-check it)
    domain_field = VectorField(
        states=states,
        rhs=rhs,
        params=list(ham.params),
        name=str(getattr(system, "name", "")) or "system",
        domain=domain or None,
        **kw,
    )
    step_field = VectorField(
        states=states,
        rhs=[dtau * e for e in rhs],
        params=[*ham.params, dtau],
        name="hamiltonised partial step",
        **kw,
    )
    out = TimeChangedSystem(
        hamiltonised=ham,
        rank=len(ham.q),
        tau_field=tau_field,
        step_field=step_field,
        name=getattr(system, "name", "") or "hamiltonised",
        domain_field=domain_field,
        _obs_index={k: i for i, k in enumerate(obs)},
    )
    if phi is None:
        _CACHE[id(system)] = (system, out)
    return out


def _fresh_name(base: str, taken: set[str]) -> str:
    name = base
    while name in taken:
        name += "_"
    return name


def _check_args(
    tcs: TimeChangedSystem, x0: Any, t_eval: Any, h: Any, params: Any, method: str
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    if not isinstance(method, str) or method not in GAUSS_METHODS:
        raise ValueError(
            f"method must be one of {', '.join(GAUSS_METHODS)} (symplectic Gauss-Legendre "
            f"schemes for the tau-flow); got {method!r}"
        )
    n = 2 * tcs.rank
    try:
        x = np.asarray(x0, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"x0 must be an array of real numbers (s, p): {exc}") from None
    if x.ndim not in (1, 2) or x.shape[-1] != n:
        raise ValueError(
            f"x0 must have shape ({n},) or (n_traj, {n}) holding (s, p); got {x.shape}"
        )
    if not np.all(np.isfinite(x)):
        raise ValueError("x0 contains NaN or infinite values")
    x = np.ascontiguousarray(x.reshape(-1, n))
    try:
        t = np.asarray(t_eval, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"t_eval must be an array of real numbers: {exc}") from None
    if t.ndim != 1 or t.size < 1:
        raise ValueError(f"t_eval must be a non-empty 1-d array of times, got shape {t.shape}")
    if not np.all(np.isfinite(t)):
        raise ValueError("t_eval contains NaN or infinite values")
    if t.size > 1 and not np.all(np.diff(t) > 0):
        raise ValueError(
            "t_eval must be strictly increasing (the time change integrates forward in tau)"
        )
    if h is None:
        raise ValueError("h (the step size in tau, dt = exp(-phi) dtau) is required")
    try:
        hv = float(h)
    except (TypeError, ValueError):
        raise TypeError(f"h must be a positive number, got {h!r}") from None
    if not (math.isfinite(hv) and hv > 0):
        raise ValueError(f"h must be a positive finite number, got {h!r}")
    npar = tcs.n_params
    if npar == 0:
        if params is not None and np.size(params) != 0:
            raise ValueError(f"params given, but the system has no parameters ({np.shape(params)})")
        par = np.zeros((x.shape[0], 0))
    else:
        names = ", ".join(map(str, tcs.tau_field.params))
        if params is None:
            raise ValueError(f"params is required: missing values for {names}")
        try:
            par = np.asarray(params, dtype=float)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"params must be an array of real numbers: {exc}") from None
        if par.shape == (npar,):
            par = np.broadcast_to(par, (x.shape[0], npar))
        elif par.shape != (x.shape[0], npar):
            raise ValueError(
                f"params must have shape ({npar},) or ({x.shape[0]}, {npar}) for parameters "
                f"{names}; got {par.shape}"
            )
        if not np.all(np.isfinite(par)):
            raise ValueError("params contains NaN or infinite values")
        par = np.ascontiguousarray(par)
    return x, t, hv, par


def integrate_hamiltonised(
    system: Any,
    x0: Any,
    t_eval: Any,
    method: str = "gauss6",
    h: float | None = None,
    params: Any = None,
    threads: int = 1,
    observables: bool = True,
    *,
    phi: Any = None,
    max_steps: int = 10_000_000,
    tol: float = 1e-14,
    max_iter: int = 100,
    max_newton: int = 30,
    keep_failed: bool = False,
    block: int = 64,
    chunk: int | None = None,
) -> IntegrationResult:
    """Integrate a phi-simple Chaplygin system in Hamiltonised form (measure preserving).

    The canonical ``tau``-system ``(s, ptilde)`` with ``Htilde`` is integrated with a
    Gauss-Legendre scheme on the grid ``tau_k = k h``, with ``dt/dtau = exp(-phi)`` integrated
    alongside; outputs at the requested physical times are reached by one partial Gauss step
    from the last grid node (see the module docstring for the guarantee).

    Parameters
    ----------
    system : ChaplyginSystem, ReducedChaplyginSystem, HamiltonisedSystem or TimeChangedSystem
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
    phi : sympy.Expr, optional
        ``phi(s)`` if known (skips the phi-simplicity search).
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
        Bad arguments (naming the argument), or a system that is not phi-simple.
    IntegrationError
        A trajectory failed (non-finite state, stage iteration not converged, step budget,
        output time not reached) and ``keep_failed`` is False.
    """
    tcs = time_changed_system(system, phi=phi)
    x, t_out, hv, par = _check_args(tcs, x0, t_eval, h, params, method)
    for name, v in (("threads", threads), ("max_steps", max_steps), ("max_newton", max_newton)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    r = tcs.rank
    ntraj, nt = x.shape[0], t_out.size
    nz = 2 * r + 1
    npar = tcs.n_params
    dom = tcs.domain_field or tcs.tau_field
    dom.check_domain(np.hstack([x, np.zeros((ntraj, 1))]), par, "x0")
    z0 = np.hstack([tcs.to_tilde(x, par), np.full((ntraj, 1), t_out[0])])
    if chunk is None:
        chunk = int(min(2048, max(16, 4_000_000 // max(1, ntraj * nz))))
    elif not isinstance(chunk, numbers.Integral) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer, got {chunk!r}")

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
        g_now = tcs.tau_field.evaluate("rhs", z[active], params=par[active] if npar else None)
        need = (t_out[-1] - z[active, -1]) / (np.abs(g_now[:, -1]) * hv)
        need = need[np.isfinite(need)]
        est = int(np.ceil(1.1 * need.max())) + 2 if need.size else chunk
        nsteps = int(min(chunk, max(8, est)))
        grid = tau0 + hv * np.arange(nsteps + 1)
        res = _quiet(
            tcs.tau_field,
            z[active],
            grid,
            params=par[active] if npar else None,
            observables=False,
            keep_failed=True,
            **gauss,
        )
        steps[active] += nsteps
        evals[active] += res.stats["rhs_evals"]
        iters[active] += res.stats["iterations"]
        bad = res.status != 0
        status[active[bad]] = res.status[bad]
        jobs_lane, jobs_out, jobs_node, jobs_k = [], [], [], []
        for j, lane in enumerate(active):
            if bad[j]:
                continue
            tl = res.y[j, :, -1]
            if not np.all(np.diff(tl) > 0):
                status[lane] = 1  # dt/dtau = exp(-phi) must stay positive
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
            status[lanes[~ok]] = np.where(status[lanes[~ok]] == 0, 4, status[lanes[~ok]])
        z[active] = res.y[:, -1]
        tau0 = grid[-1]
        done = (nxt[active] >= nt) | (status[active] != 0)
        over = steps[active] >= max_steps
        status[active[over & ~done]] = 3
        active = active[~(done | over)]

    failed = status != 0
    zout[failed] = np.nan
    tau_out[failed] = np.nan
    flat = zout.reshape(ntraj * nt, nz)
    parr = np.repeat(par, nt, axis=0) if npar else np.zeros((ntraj * nt, 0))
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
    report_failures(out, failed, keep_failed)
    return out


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
    npar = tcs.n_params
    pp = par if npar else np.zeros((m, 0))

    def rate(zz: np.ndarray, rows: np.ndarray) -> np.ndarray:
        prm = pp[rows] if npar else None
        return tcs.tau_field.evaluate("rhs", zz, params=prm)[:, -1]

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
            params=np.hstack([pp[todo], dtau[todo, None]]),
            observables=False,
            keep_failed=True,
            h=1.0,
            **step_kw,
        )
        ev[todo] += res.stats["rhs_evals"] + 1
        end = res.y[:, -1]
        zz[todo] = end
        good = res.status == 0
        resid = end[:, -1] - targets[todo]
        conv = good & (np.abs(resid) <= tol_t[todo])
        ok[todo[conv]] = True
        keep = good & ~conv
        g = rate(np.where(good[:, None], end, nodes[todo]), todo)
        dtau[todo] = np.where(keep, dtau[todo] - resid / g, dtau[todo])
        todo = todo[keep]
    return zz, dtau, ok, ev
