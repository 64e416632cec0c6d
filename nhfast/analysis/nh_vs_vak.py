"""Nonholonomic versus vakonomic dynamics along computed trajectories (batched, compiled core).

For given initial data ``(q0, v0)`` on the constraint submanifold, :func:`run_nonholonomic`
integrates, in one batch through :func:`nhfast.integrate.integrate`, the nonholonomic (NH) flow
together with the linear multiplier ODE derived here from Jóźwikowski & Respondek (2019), "A
comparison of vakonomic and nonholonomic dynamics with applications to non-invariant Chaplygin
systems", Lemma 4.10 (the paper does not state it in this form)::

    qdot = e(q) v,   vdot = a(q, v),                          (NH flow, raw coordinates)
    Phidot = -KS^T Phi,  Phi(0) = I,                          (fundamental matrix)
    mu_pdot = -lambda - KS^T mu_p,  mu_p(0) = 0,              (particular solution)

so that every solution of ``mudot = -lambda - KS^T mu`` is ``mu(t) = Phi(t) mu0 + mu_p(t)``.
The trajectory is vakonomic (VAK) iff some ``mu0`` makes ``KE^T mu(t) = 0`` for all t
(Thm. 4.8(c) there); :func:`vakonomic_check` solves the stacked condition over the output
times by least squares, per trajectory, and reports the residual.  :func:`unconstrained_check`
reports the NH multiplier ``lambda`` (zero iff the NH trajectory is a free Euler-Lagrange
solution, Thm. 4.8(a)).  :func:`vakonomic_is_nonholonomic_check` tests given VAK trajectory
samples ``(q, qdot, mu)`` pointwise (Thm. 4.8(c)).

Symbols and signs: :mod:`nhfast.symbolic.vakonomic.nh_vs_vak` (the convention of ``_forms``).

References: Crampin & Mestdag (2010), "Anholonomic frames in constrained dynamics"; Mestdag &
Crampin (2010), "Nonholonomic systems as restricted Euler-Lagrange systems".
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from nhfast._cache import memo
from nhfast._validate import params_rows
from nhfast.analysis.result import Check
from nhfast.integrate import integrate
from nhfast.symbolic.vakonomic import NonholonomicData, is_integrable, nonholonomic_data
from nhfast.symbolic.vakonomic._forms import INTEGRABLE_NOTE, check_system
from nhfast.symbolic.vakonomic.consistency import consistency_test, restriction_test
from nhfast.symbolic.vakonomic.nh_vs_vak import vakonomic_test
from nhfast.vectorfield import VectorField

__all__: list[str] = []


def multiplier_vector_field(system: Any, data: NonholonomicData | None = None) -> VectorField:
    """The NH flow with the multiplier ODE as extra states (see the module docstring).

    Parameters
    ----------
    system : NonholonomicSystem
    data : NonholonomicData, optional
        Precomputed :func:`nhfast.symbolic.vakonomic.nonholonomic_data`.

    Returns
    -------
    VectorField
        States ``q (n), v (r), Phi (k*k, row-major), mu_p (k)``; parameters
        ``system.params``; observables ``energy``, ``lam_a`` (NH multipliers) and ``A_j_a``
        (entries of ``KE^T``).
    """
    data = _data(system, data)
    n, r, k = len(data.q), len(data.v), data.forms.rows
    Phi = sp.Matrix(k, k, lambda a, b: sp.Symbol(f"Phi_{a + 1}_{b + 1}", real=True))
    mup = sp.Matrix([sp.Symbol(f"mup_{a + 1}", real=True) for a in range(k)])
    KSt = data.KS.T
    rhs = [*data.qdot, *data.vdot, *(-KSt * Phi), *(-data.multipliers - KSt * mup)]
    states = [*data.q, *data.v, *Phi, *mup]
    obs: dict[str, sp.Expr] = {"energy": data.energy}
    for a in range(k):
        obs[f"lam_{a + 1}"] = data.multipliers[a]
    At = data.KE.T
    for j in range(r):
        for a in range(k):
            obs[f"A_{j + 1}_{a + 1}"] = At[j, a]
    del n
    return VectorField(
        states=states,
        rhs=rhs,
        params=list(data.params),
        observables=obs,
        name="nonholonomic flow with vakonomic multiplier ODE",
    )


def _lambdified(data: NonholonomicData, exprs: sp.Matrix) -> Any:
    return sp.lambdify([*data.q, *data.v, *data.params], exprs, "numpy")


def initial_states(
    system: Any,
    q0: Any,
    qdot0: Any,
    params: Any = None,
    tol: float = 1e-10,
    data: NonholonomicData | None = None,
) -> np.ndarray:
    """Initial states ``(q0, v0)`` from natural velocities, checking that ``qdot0`` lies in D.

    Parameters
    ----------
    system : NonholonomicSystem
    q0, qdot0 : array_like, shape (n,) or (lanes, n)
    params : array_like, shape (p,) or (lanes, p), optional
    tol : float
        Largest accepted ``|W(q0) qdot0| / (1 + |qdot0|)``.
    data : NonholonomicData, optional

    Returns
    -------
    ndarray, shape (lanes, n + r)

    Raises
    ------
    ValueError
        If the shapes are wrong or a velocity is not in D (names the lane).
    """
    data = _data(system, data)
    n, r = len(data.q), len(data.v)
    q = np.atleast_2d(np.asarray(q0, dtype=float))
    qd = np.atleast_2d(np.asarray(qdot0, dtype=float))
    if q.ndim != 2 or q.shape[1] != n:
        raise ValueError(f"q0 must have shape ({n},) or (lanes, {n}), got {np.shape(q0)}")
    if qd.shape != q.shape:
        raise ValueError(f"qdot0 must have the shape of q0 {q.shape}, got {np.shape(qdot0)}")
    par = _params(data, params, q.shape[0])
    fW = sp.lambdify([*data.q, *data.params], data.forms, "numpy")
    fe = sp.lambdify([*data.q, *data.params], data.frame, "numpy")
    out = np.empty((q.shape[0], n + r))
    for i in range(q.shape[0]):
        out[i, :n] = q[i]
        out[i, n:] = _quasi_velocities(
            fW, fe, q[i], qd[i], par[i], tol, f"qdot0: velocity of lane {i}"
        )
    return out


def _quasi_velocities(
    fW: Any, fe: Any, q: np.ndarray, qd: np.ndarray, par: np.ndarray, tol: float, where: str
) -> np.ndarray:
    """``v`` with ``e(q) v = qdot``, after checking ``|W(q) qdot| <= tol (1 + |qdot|)``."""
    W = np.asarray(fW(*q, *par), dtype=float)
    viol = float(np.max(np.abs(W @ qd)))
    if viol > tol * (1 + float(np.max(np.abs(qd)))):
        raise ValueError(f"{where} is not in D: |W qdot| = {viol:.3g} > {tol:g} (1 + |qdot|)")
    e = np.asarray(fe(*q, *par), dtype=float)
    return np.linalg.lstsq(e, qd, rcond=None)[0]


def _params(data: NonholonomicData, params: Any, lanes: int) -> np.ndarray:
    """Parameter rows broadcast to ``(lanes, p)``."""
    par = params_rows(params, data.params, lanes)
    return np.broadcast_to(par, (lanes, par.shape[1]))


def _data(system: Any, data: NonholonomicData | None) -> NonholonomicData:
    """``data`` or the memoised :func:`~nhfast.symbolic.vakonomic.nonholonomic_data`."""
    if data is not None:
        return data
    return memo(check_system(system), "nonholonomic_data", lambda: nonholonomic_data(system))


def _integrable(system: Any) -> bool:
    return bool(memo(system, "vakonomic.integrable", lambda: is_integrable(system)))


@dataclass
class NonholonomicRun:
    """A batch of NH trajectories with the VAK multiplier data along them.

    Attributes
    ----------
    t : ndarray, shape (n_t,)
    q : ndarray, shape (lanes, n_t, n)
    v : ndarray, shape (lanes, n_t, r)
    fundamental : ndarray, shape (lanes, n_t, k, k)
        ``Phi(t)``.
    particular : ndarray, shape (lanes, n_t, k)
        ``mu_p(t)``.
    multipliers : ndarray, shape (lanes, n_t, k)
        NH multipliers ``lambda(t)``.
    condition : ndarray, shape (lanes, n_t, r, k)
        ``KE^T`` along the trajectories.
    energy : ndarray, shape (lanes, n_t)
    params : ndarray, shape (lanes, p)
    integrable : bool
        D is integrable (NH and VAK coincide).
    settings : dict
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    fundamental: np.ndarray
    particular: np.ndarray
    multipliers: np.ndarray
    condition: np.ndarray
    energy: np.ndarray
    params: np.ndarray
    integrable: bool
    settings: dict


def run_nonholonomic(
    system: Any,
    x0: Any,
    t_eval: Any,
    params: Any = None,
    method: str = "dop853",
    rtol: float = 1e-11,
    atol: float = 1e-12,
    threads: int = 1,
    data: NonholonomicData | None = None,
) -> NonholonomicRun:
    """Integrate NH trajectories and the multiplier ODE in one batch (compiled core).

    Parameters
    ----------
    system : NonholonomicSystem
    x0 : array_like, shape (n + r,) or (lanes, n + r)
        Initial ``(q, v)``; ``v`` are the quasi-velocities of ``system.frame`` (use
        :func:`initial_states` to start from natural velocities).
    t_eval : array_like, shape (n_t,)
        Output times (the least-squares samples); ``t_eval[0]`` is the initial time.
    params : array_like, shape (p,) or (lanes, p), optional
        Values of ``system.params``.
    method, rtol, atol, threads
        Passed to :func:`nhfast.integrate.integrate`.
    data : NonholonomicData, optional

    Returns
    -------
    NonholonomicRun

    Raises
    ------
    ValueError
        If ``x0`` has the wrong shape.
    """
    given = data is not None
    data = _data(system, data)
    n, r, k = len(data.q), len(data.v), data.forms.rows
    x = np.asarray(x0, dtype=float)
    if x.ndim not in (1, 2) or x.shape[-1] != n + r:
        raise ValueError(
            f"x0 must have shape ({n + r},) or (lanes, {n + r}) = (q, v), got {x.shape}"
        )
    x = np.atleast_2d(x)
    lanes = x.shape[0]
    par = _params(data, params, lanes)
    eye = np.broadcast_to(np.eye(k).reshape(-1), (lanes, k * k))
    full = np.hstack([x, eye, np.zeros((lanes, k))])
    key = "nh_vs_vak.multiplier_field"
    vf = (
        multiplier_vector_field(system, data)
        if given
        else memo(system, key, lambda: multiplier_vector_field(system, data))
    )
    res = integrate(
        vf, full, t_eval, method=method, rtol=rtol, atol=atol,
        params=par if par.size else None, threads=threads,
    )  # fmt: skip
    y = res.y
    nt = y.shape[1]
    obs = res.observables
    lam = np.stack([obs[f"lam_{a + 1}"] for a in range(k)], axis=-1)
    cond = np.empty((lanes, nt, r, k))
    for j in range(r):
        for a in range(k):
            cond[:, :, j, a] = obs[f"A_{j + 1}_{a + 1}"]
    return NonholonomicRun(
        t=res.t,
        q=y[:, :, :n],
        v=y[:, :, n : n + r],
        fundamental=y[:, :, n + r : n + r + k * k].reshape(lanes, nt, k, k),
        particular=y[:, :, n + r + k * k :],
        multipliers=lam,
        condition=cond,
        energy=obs["energy"],
        params=np.array(par),
        integrable=_integrable(system),
        settings={"method": method, "rtol": rtol, "atol": atol, "lanes": lanes, "n_t": nt},
    )


def vakonomic_check(run: NonholonomicRun, tol: float = 1e-7) -> Check:
    """Is each NH trajectory of ``run`` vakonomic?

    The test is derived here from Jóźwikowski & Respondek (2019), Lemma 4.10 (not stated in the
    paper in this form).

    Per trajectory, solve ``A(t_s) Phi(t_s) mu0 = -A(t_s) mu_p(t_s)`` over all output times by
    least squares (``A = KE^T``).  ``residual`` is the root-mean-square of the stacked
    residual, ``scale`` the rms of the right-hand side, ``relative = residual / scale`` (guarded:
    NaN when ``scale`` is 0).  A trajectory is declared VAK when
    ``residual <= tol * (1 + scale)``.

    Parameters
    ----------
    run : NonholonomicRun
    tol : float
        Threshold (the integration error of the run sets the floor).

    Returns
    -------
    Check
        ``samples``: ``residual``, ``relative residual``, ``scale``, ``vakonomic`` (bool),
        ``undetermined`` (dimension of the set of initial multipliers: multipliers of closed
        constraint forms are not determined); ``series``: ``t`` and the largest pointwise
        residual over the lanes; ``figures``: ``mu0`` of the first lane among others.
    """
    if not isinstance(run, NonholonomicRun):
        raise TypeError(f"run must be a NonholonomicRun, got {type(run).__name__}")
    A, Phi, mup = run.condition, run.fundamental, run.particular
    lanes, nt, r, k = A.shape
    res = np.empty(lanes)
    scale = np.empty(lanes)
    undet = np.empty(lanes, dtype=int)
    pointwise = np.empty((lanes, nt))
    mu0s = np.empty((lanes, k))
    for i in range(lanes):
        M = np.einsum("tja,tab->tjb", A[i], Phi[i]).reshape(nt * r, k)
        b = -np.einsum("tja,ta->tj", A[i], mup[i]).reshape(nt * r)
        mu0, *_ = np.linalg.lstsq(M, b, rcond=None)
        rr = M @ mu0 - b
        res[i] = np.sqrt(np.mean(rr**2))
        scale[i] = np.sqrt(np.mean(b**2))
        pointwise[i] = np.max(np.abs(rr.reshape(nt, r)), axis=1)
        sv = np.linalg.svd(M, compute_uv=False)
        undet[i] = int(k - np.sum(sv > 1e-8 * max(1.0, float(sv.max(initial=0.0)))))
        mu0s[i] = mu0
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(scale > 0, res / scale, np.nan)
    ok = res <= tol * (1 + scale)
    holds = bool(np.all(ok))
    if run.integrable:
        statement = INTEGRABLE_NOTE
    elif holds:
        statement = (
            f"vakonomic: all {lanes} trajectories, max residual {res.max():.2g} "
            f"<= {tol:g} (1 + scale)"
        )
    else:
        statement = (
            f"not vakonomic: {int(np.sum(~ok))} of {lanes} trajectories, max residual "
            f"{res.max():.2g} > {tol:g} (1 + scale)"
        )
    return Check(
        name="nonholonomic trajectory is vakonomic (test derived here from Jóźwikowski & "
        "Respondek (2019), Lemma 4.10)",
        holds=holds,
        statement=statement,
        figures={
            "lanes": lanes,
            "max residual": float(res.max()),
            "max relative residual": float(np.nanmax(rel)) if np.any(np.isfinite(rel)) else None,
            "threshold": tol,
            "mu0 (lane 0)": mu0s[0].tolist(),
            "undetermined (lane 0)": int(undet[0]),
            "integrable": run.integrable,
        },
        series={"t": run.t, "max pointwise residual": pointwise.max(axis=0)},
        samples={
            "residual": res,
            "relative residual": rel,
            "scale": scale,
            "vakonomic": ok,
            "undetermined": undet,
            "mu0": mu0s,
        },
    )


def unconstrained_check(run: NonholonomicRun, tol: float = 1e-7) -> Check:
    """Is each NH trajectory of ``run`` a free Euler-Lagrange solution?

    Jóźwikowski & Respondek (2019), Thm. 4.8(a).

    The NH multiplier ``lambda(t)`` (``E(L) = W^T lambda``) must vanish; the figure is
    ``max_t |lambda(t)|`` per trajectory, declared zero when ``<= tol``.

    Returns
    -------
    Check
        ``samples``: ``max |lambda|``, ``unconstrained`` (bool).
    """
    if not isinstance(run, NonholonomicRun):
        raise TypeError(f"run must be a NonholonomicRun, got {type(run).__name__}")
    m = np.max(np.abs(run.multipliers), axis=(1, 2))
    ok = m <= tol
    holds = bool(np.all(ok))
    statement = (
        f"unconstrained: max |lambda| {m.max():.2g} <= {tol:g} on all {m.size} trajectories"
        if holds
        else f"not unconstrained: {int(np.sum(~ok))} of {m.size} trajectories have "
        f"max |lambda| > {tol:g} (largest {m.max():.2g})"
    )
    return Check(
        name="nonholonomic trajectory is unconstrained (Jozwikowski & Respondek 2019, Thm. 4.8(a))",
        holds=holds,
        statement=statement,
        figures={"lanes": int(m.size), "max |lambda|": float(m.max()), "threshold": tol},
        series={"t": run.t, "max |lambda|": np.max(np.abs(run.multipliers), axis=(0, 2))},
        samples={"max |lambda|": m, "unconstrained": ok},
    )


def _samples(arr: Any, name: str, last: int, shape: Sequence[int] | None = None) -> np.ndarray:
    a = np.asarray(arr, dtype=float)
    if a.ndim != 3 or a.shape[-1] != last:
        raise ValueError(f"{name} must have shape (lanes, n_t, {last}), got {a.shape}")
    if shape is not None and a.shape[:2] != tuple(shape):
        raise ValueError(f"{name} must have shape {(*shape, last)}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return a


def vakonomic_is_nonholonomic_check(
    system: Any,
    q: Any,
    qdot: Any,
    mu: Any,
    params: Any = None,
    tol: float = 1e-8,
    data: NonholonomicData | None = None,
) -> Check:
    """Is a VAK trajectory with multipliers ``mu`` nonholonomic?

    Jóźwikowski & Respondek (2019), Thm. 4.8(c).

    Pointwise test ``mu_a domega^a(qdot, e_j) = 0`` for the fields ``e_j`` of D on samples of
    the trajectories (multipliers of ``L + mu_a omega^a(qdot)``).

    Parameters
    ----------
    system : NonholonomicSystem
    q, qdot : array_like, shape (lanes, n_t, n)
        Positions and natural velocities; the velocities must lie in D.
    mu : array_like, shape (lanes, n_t, k)
    params : array_like, shape (p,) or (lanes, p), optional
    tol : float
        A trajectory is NH when ``max_t |KE^T mu| <= tol (1 + max_t |mu|)``.
    data : NonholonomicData, optional

    Returns
    -------
    Check
        ``samples["max |condition|"]`` per trajectory.

    Raises
    ------
    ValueError
        Wrong shapes, non-finite values, or velocities not in D.
    """
    data = _data(system, data)
    n, k = len(data.q), data.forms.rows
    qa = _samples(q, "q", n)
    qd = _samples(qdot, "qdot", n, qa.shape[:2])
    ma = _samples(mu, "mu", k, qa.shape[:2])
    lanes, nt, _ = qa.shape
    par = _params(data, params, lanes)
    fW = sp.lambdify([*data.q, *data.params], data.forms, "numpy")
    fe = sp.lambdify([*data.q, *data.params], data.frame, "numpy")
    fA = _lambdified(data, data.KE.T)
    worst = np.empty(lanes)
    for i in range(lanes):
        m = 0.0
        for s in range(nt):
            where = f"qdot: velocity of lane {i} at sample {s}"
            v = _quasi_velocities(fW, fe, qa[i, s], qd[i, s], par[i], 1e-8, where)
            A = np.asarray(fA(*qa[i, s], *v, *par[i]), dtype=float)
            m = max(m, float(np.max(np.abs(A @ ma[i, s]))))
        worst[i] = m
    size = 1 + np.max(np.abs(ma), axis=(1, 2))
    ok = worst <= tol * size
    holds = bool(np.all(ok))
    integ = _integrable(system)
    if integ:
        statement = INTEGRABLE_NOTE
    elif holds:
        statement = f"nonholonomic: max |KE^T mu| {worst.max():.2g} on all {lanes} trajectories"
    else:
        statement = (
            f"not nonholonomic: {int(np.sum(~ok))} of {lanes} trajectories violate "
            f"mu_a domega^a(qdot, e_j) = 0 (largest {worst.max():.2g})"
        )
    return Check(
        name="vakonomic trajectory is nonholonomic (Jozwikowski & Respondek 2019, Thm. 4.8(c))",
        holds=holds,
        statement=statement,
        figures={"lanes": lanes, "max |condition|": float(worst.max()), "integrable": integ},
        samples={"max |condition|": worst, "nonholonomic": ok},
    )


#: The routes of :func:`nonholonomic_is_vakonomic`: name -> the evidence it gives.
ROUTES: dict[str, str] = {
    "coordinates": "symbolic, for every trajectory: the multiplier conditions (derived here "
    "from Jóźwikowski & Respondek (2019), Lemma 4.10 and Thm. 4.8(c); not stated in the paper "
    "in this form) propagated along the NH flow until their rank stops growing",
    "frame": "symbolic, sufficient: strong consistency of a multiplier section in an adapted "
    "frame (Crampin & Mestdag 2010, Cor. 1); default section the Chaplygin momenta",
    "restriction": "symbolic, sufficient: the frame route and, independently, the "
    "Euler-Lagrange expressions of L - Phi_a v^a on the NH motions (Mestdag & Crampin 2010, "
    "Prop. 2)",
    "trajectories": "numeric, per trajectory: NH flow and multiplier ODE integrated in one "
    "batch, the condition KE^T mu(t) = 0 solved for mu(0) by least squares over the output "
    "times (derived here from Jóźwikowski & Respondek (2019), Lemma 4.10; not stated in the "
    "paper in this form)",
}


def _route_call(route: str) -> Any:
    def trajectories(system: Any, tol: float = 1e-7, **options: Any) -> Check:
        return vakonomic_check(run_nonholonomic(system, **options), tol=tol)

    calls = {
        "coordinates": vakonomic_test,
        "frame": consistency_test,
        "restriction": restriction_test,
        "trajectories": trajectories,
    }
    return calls[route], (run_nonholonomic if route == "trajectories" else calls[route])


def nonholonomic_is_vakonomic(system: Any, route: str = "coordinates", **options: Any) -> Check:
    """Is (every) nonholonomic motion of ``system`` vakonomic?  One question, several routes.

    Jóźwikowski & Respondek (2019) ask (Q1): is every NH trajectory a VAK one, for
    some multipliers?  The routes answer it with different evidence:

    ``"coordinates"`` (default)
        Symbolic, decides for every trajectory. ``options``: ``subs`` (parameter relations,
        e.g. ``{l: 0}``), ``data``, ``points``.
    ``"frame"``
        Symbolic and sufficient: strong consistency of a multiplier section (Crampin &
        Mestdag 2010, Cor. 1). ``options``: ``section``, ``complement``, ``subs``, ``fd``.
        ``holds`` False says only that this section does not work.
    ``"restriction"``
        As ``"frame"``, confirmed by the Euler-Lagrange expressions of ``L - Phi_a v^a`` on
        the NH motions (Mestdag & Crampin 2010, Prop. 2). ``options``: as ``"frame"`` and
        ``velocities``.
    ``"trajectories"``
        Numeric, per trajectory of a batch (compiled core). ``options``: ``x0`` (``(q, v)``,
        ``v`` the quasi-velocities of ``system.frame``), ``t_eval``, ``params``, ``method``,
        ``rtol``, ``atol``, ``threads``, ``data`` and ``tol`` (the verdict's threshold).

    The integral criterion of Thm. 4.8(b) concerns one generator pair along one trajectory:
    :func:`nhfast.symbolic.vakonomic.integral_criterion`. The converse question (is a VAK
    motion NH?) is :func:`nhfast.symbolic.vakonomic.vakonomic_is_nonholonomic`.

    Parameters
    ----------
    system : NonholonomicSystem
        With constraint 1-forms and a frame of D.
    route : str
        One of :data:`ROUTES`.
    **options
        The route's own arguments, listed above.

    Returns
    -------
    Check
        ``holds`` and ``statement``; a symbolic route returns a
        :class:`~nhfast.symbolic.vakonomic.SymbolicVerdict` (conditions, obstruction, and
        ``data["multiplier"]`` where found), the numeric route per-trajectory ``samples``
        (``residual``, ``mu0``, ``vakonomic``).

    Raises
    ------
    ValueError
        For an unknown route.
    TypeError
        For an option the route does not take (the message lists the ones it does).
    """
    if not isinstance(route, str) or route not in ROUTES:
        raise ValueError(f"route must be one of {sorted(ROUTES)}, got {route!r}")
    call, signature_of = _route_call(route)
    takes = [p for p in inspect.signature(signature_of).parameters if p != "system"]
    if route == "trajectories":
        takes.append("tol")
    unknown = sorted(set(options) - set(takes))
    if unknown:
        raise TypeError(f"route {route!r} takes the options {takes}; got {unknown}")
    return call(system, **options)
