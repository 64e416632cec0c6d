"""Numerical vakonomic flows, and nonholonomic vs vakonomic motions from the same initial data.

The vakonomic flow is integrated in Hamiltonian form, ``X_{h_2}`` on ``(M_2, omega_2)`` in the
Darboux coordinates ``(q, phat)`` (seed 003 Sections V-VI), with the symplectic Gauss-Legendre
schemes of the core (``midpoint``, ``gauss4``, ``gauss6``).  ``h_2`` mixes ``q`` and ``phat``
(it is not ``T(phat) + V(q)``), so the leapfrog (Stormer-Verlet) scheme does not apply; asking
for it raises ``ValueError``.  Explicit schemes are accepted as non-symplectic references.

Initial data are ``(q0, qdot0, mu0)`` with ``qdot0`` in D and multipliers ``mu0`` in seed 003's
sign and the system's constraint basis (``calL = L + mu^i W_i qdot``; default 0), mapped to
``phat0 = g qdot0 + W^T mu0`` (the Legendre map of seed 003 Section V).  On the Lagrangian side
every ``mu0`` is admissible (the final constraint submanifold ``P_2 = {W qdot = 0}`` leaves the
multipliers free); given ``phat0`` instead, ``mu0`` must equal ``lambda(q0, phat0)``, else the
point is not on ``M_2``.

When do the motions coincide?  If D is integrable (holonomic constraints) the multipliers drop out
of the equations for ``q`` (``R^a_{alpha beta} = 0``), so NH and VAK motions coincide for every
``mu0`` (a :class:`HolonomicConstraintsWarning` says so).  Otherwise seed 001 Thm 2 (weak
consistency with ``phi = 0``) says only that at ``mu = 0`` the VAK acceleration equals the NH one
*at that instant*; the multipliers then evolve (``mudot = lambda_NH``) and the motions separate
unless special multipliers are chosen: e.g. for the vertical disk (a Chaplygin system with
``p_a R^a_{alpha beta} v^beta = 0``) the section ``mu = -p_a`` in the cartesian basis (seed 003's
``(A, B) = (0, 0)``, seed 002's ``mu_a = dL/dxdot^a``) gives exactly the NH motion (digest C2).
"""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from nhfast.analysis.result import Check
from nhfast.errors import HolonomicConstraintsWarning

__all__ = [
    "HolonomicConstraintsWarning",
    "VakonomicTrajectory",
    "NonholonomicTrajectory",
    "NHVakComparison",
    "vakonomic_initial_state",
    "integrate_vakonomic",
    "integrate_nonholonomic",
    "compare_nonholonomic_vakonomic",
]

SYMPLECTIC = ("midpoint", "gauss4", "gauss6")


@dataclass
class _Cache:
    hamiltonian: Any = None
    vak_fields: dict = field(default_factory=dict)
    nh_field: Any = None
    one_forms: Any = None
    integrable: bool | None = None
    num: dict = field(default_factory=dict)


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _cache(system: Any) -> _Cache:
    from nhfast.symbolic.systems import NonholonomicSystem

    if not isinstance(system, NonholonomicSystem):
        raise TypeError(f"system must be a NonholonomicSystem, got {type(system).__name__}")
    c = _CACHE.get(system)
    if c is None:
        c = _CACHE[system] = _Cache()
    return c


def _hamiltonian(system: Any) -> Any:
    c = _cache(system)
    if c.hamiltonian is None:
        from nhfast.symbolic.vakonomic.constraint_algorithm import vakonomic_hamiltonian

        c.hamiltonian = vakonomic_hamiltonian(system)
    return c.hamiltonian


def _one_forms(system: Any) -> sp.Matrix:
    c = _cache(system)
    if c.one_forms is None:
        from nhfast.symbolic.vakonomic.equations import constraint_one_forms

        c.one_forms = constraint_one_forms(system)
    return c.one_forms


def _integrable(system: Any) -> bool:
    c = _cache(system)
    if c.integrable is None:
        from nhfast.symbolic.vakonomic.equations import is_integrable

        c.integrable = is_integrable(system)
    return bool(c.integrable)


def _vak_field(system: Any, form: str) -> Any:
    if form not in ("linear", "symbolic"):
        raise ValueError(f"form must be 'linear' or 'symbolic', got {form!r}")
    c = _cache(system)
    if form not in c.vak_fields:
        if form == "symbolic":
            c.vak_fields[form] = _hamiltonian(system).hamiltonian_system()
        else:
            from nhfast.symbolic.vakonomic.constraint_algorithm import vakonomic_hamiltonian_field

            c.vak_fields[form] = vakonomic_hamiltonian_field(system)
    return c.vak_fields[form]


def _numeric(system: Any, key: str, expr: sp.Matrix) -> Any:
    c = _cache(system)
    if key not in c.num:
        c.num[key] = sp.lambdify([*system.q, *system.params], expr, modules="numpy")
    return c.num[key]


def _rows(value: Any, width: int, name: str, lanes: int | None = None) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an array of real numbers, got {value!r}") from None
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] != width:
        raise ValueError(f"{name} must have shape ({width},) or (n_traj, {width}), got {a.shape}")
    if lanes is not None and a.shape[0] not in (1, lanes):
        raise ValueError(f"{name} has {a.shape[0]} rows, expected 1 or {lanes}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return a


def _params(system: Any, params: Any) -> np.ndarray:
    npar = len(system.params)
    if npar == 0:
        if params is not None and np.size(params) != 0:
            raise ValueError("params given, but the system has no parameters")
        return np.zeros(0)
    if params is None:
        raise ValueError(f"params is required: values for {', '.join(map(str, system.params))}")
    p = np.asarray(params, dtype=float)
    if p.shape != (npar,):
        raise ValueError(
            f"params must have shape ({npar},) for {', '.join(map(str, system.params))}, "
            f"got {p.shape}"
        )
    return p


def _eval(fn: Any, q: np.ndarray, par: np.ndarray) -> np.ndarray:
    """Evaluate a lambdified matrix function row by row: result (n_rows, *shape)."""
    return np.array([np.asarray(fn(*row, *par), dtype=float) for row in q])


def vakonomic_initial_state(
    system: Any, q0: Any, qdot0: Any, mu0: Any = None, params: Any = None
) -> np.ndarray:
    """``(q0, phat0)`` with ``phat0 = g qdot0 + W^T mu0``, after checking the data.

    Parameters
    ----------
    system : NonholonomicSystem
    q0, qdot0 : array_like, shape (n,) or (n_traj, n)
    mu0 : array_like, shape (m,) or (n_traj, m), optional
        Multipliers (seed 003 sign, the system's constraint basis); default 0.
    params : array_like, shape (n_params,)

    Returns
    -------
    numpy.ndarray, shape (n_traj, 2 n)

    Raises
    ------
    ValueError
        If ``qdot0`` is not in D (names ``qdot0``), ``mu0`` has the wrong shape (names
        ``mu0``), or the constraint basis degenerates at ``q0`` (``D = W g^-1 W^T`` singular
        there, names ``q0``).
    """
    Wsym = _one_forms(system)
    n, m = system.dim, Wsym.rows
    q = _rows(q0, n, "q0")
    qd = _rows(qdot0, n, "qdot0")
    mu = np.zeros((1, m)) if mu0 is None else _rows(mu0, m, "mu0")
    k = max(q.shape[0], qd.shape[0], mu.shape[0])
    for arr, name in ((q, "q0"), (qd, "qdot0"), (mu, "mu0")):
        if arr.shape[0] not in (1, k):
            raise ValueError(f"{name} has {arr.shape[0]} rows, expected 1 or {k}")
    q, qd, mu = (np.broadcast_to(a, (k, a.shape[1])) for a in (q, qd, mu))
    par = _params(system, params)
    W = _eval(_numeric(system, "W", Wsym), q, par)
    g = _eval(_numeric(system, "g", system.metric), q, par)
    res = np.einsum("kia,ka->ki", W, qd)
    scale = 1.0 + np.abs(qd).max(axis=1)
    bad = np.flatnonzero(np.abs(res).max(axis=1) > 1e-9 * scale)
    if bad.size:
        raise ValueError(
            f"qdot0 is not in D: constraint residual W qdot0 = {res[bad[0]]} at row {bad[0]} "
            "(vakonomic and nonholonomic motions need velocities in D)"
        )
    D = np.einsum("kia,kab,kjb->kij", W, np.linalg.inv(g), W)
    cond = np.linalg.cond(D)
    bad = np.flatnonzero(~(cond < 1e10))
    if bad.size:
        raise ValueError(
            f"q0: the constraint basis degenerates at row {bad[0]} (D = W g^-1 W^T singular, "
            f"condition number {cond[bad[0]]:.3g}); use another basis or chart"
        )
    ph = np.einsum("kab,kb->ka", g, qd) + np.einsum("kia,ki->ka", W, mu)
    return np.concatenate([q, ph], axis=1)


def _check_on_M2(system: Any, x: np.ndarray, mu0: Any, par: np.ndarray) -> None:
    """Raise unless ``mu0 = lambda(q, phat) = D^-1 W g^-1 phat`` (the point is on ``M_2``)."""
    n, m = system.dim, _one_forms(system).rows
    q, ph = x[:, :n], x[:, n:]
    W = _eval(_numeric(system, "W", _one_forms(system)), q, par)
    g = _eval(_numeric(system, "g", system.metric), q, par)
    ginv_ph = np.linalg.solve(g, ph[:, :, None])[:, :, 0]
    ginv_wt = np.linalg.solve(g, W.transpose(0, 2, 1))
    D = np.einsum("kia,kaj->kij", W, ginv_wt)
    lam = np.linalg.solve(D, np.einsum("kia,ka->ki", W, ginv_ph)[:, :, None])[:, :, 0]
    mu = np.broadcast_to(_rows(mu0, m, "mu0", x.shape[0]), lam.shape)
    err = np.abs(mu - lam).max(axis=1)
    bad = np.flatnonzero(err > 1e-9 * (1 + np.abs(lam).max(axis=1)))
    if bad.size:
        raise ValueError(
            f"mu0 is not on the final constraint submanifold M_2: at row {bad[0]} the "
            f"multipliers must be lambda(q0, phat0) = {lam[bad[0]]}, got {mu[bad[0]]} "
            "(seed 003: lambda = D^-1 W g^-1 phat on M_2)"
        )


@dataclass
class VakonomicTrajectory:
    """A batch of vakonomic motions.

    Attributes
    ----------
    t : ndarray (n_t,)
    q, qdot, p_hat : ndarray (n_traj, n_t, n)
    mu : ndarray (n_traj, n_t, m)
        Multipliers (seed 003 sign) on ``M_2``.
    energy : ndarray (n_traj, n_t)
        ``h_2``.
    constraint : ndarray (n_traj, n_t, m)
        ``W qdot`` (zero up to round-off: on ``M_2`` the velocity lies in D by construction).
    method : str
    result : IntegrationResult
    """

    t: np.ndarray
    q: np.ndarray
    qdot: np.ndarray
    p_hat: np.ndarray
    mu: np.ndarray
    energy: np.ndarray
    constraint: np.ndarray
    method: str
    result: Any


@dataclass
class NonholonomicTrajectory:
    """A batch of nonholonomic motions (Lagrange-d'Alembert in coordinates).

    Attributes
    ----------
    t : ndarray (n_t,)
    q, qdot : ndarray (n_traj, n_t, n)
    reaction : ndarray (n_traj, n_t, m)
        Multipliers ``E(L) = reaction^b W_b`` (seed 002 sign).
    energy : ndarray (n_traj, n_t)
    constraint : ndarray (n_traj, n_t, m)
        ``W qdot`` along the numerical solution (drifts at the level of the tolerance).
    method : str
    result : IntegrationResult
    """

    t: np.ndarray
    q: np.ndarray
    qdot: np.ndarray
    reaction: np.ndarray
    energy: np.ndarray
    constraint: np.ndarray
    method: str
    result: Any


def _stack(obs: dict, prefix: str, count: int) -> np.ndarray:
    return np.stack([obs[f"{prefix}_{i + 1}"] for i in range(count)], axis=-1)


def integrate_vakonomic(
    system: Any,
    t_eval: Any,
    q0: Any,
    qdot0: Any = None,
    mu0: Any = None,
    p_hat0: Any = None,
    params: Any = None,
    method: str = "gauss6",
    h: float | None = None,
    form: str = "linear",
    **options: Any,
) -> VakonomicTrajectory:
    """Integrate vakonomic motions in Hamiltonian form ``X_{h_2}(q, phat)``.

    Parameters
    ----------
    system : NonholonomicSystem
    t_eval : array_like
        Output times.
    q0 : array_like, shape (n,) or (n_traj, n)
    qdot0 : array_like, optional
        Initial velocities in D (give ``qdot0`` or ``p_hat0``).
    mu0 : array_like, shape (m,) or (n_traj, m), optional
        Initial multipliers (seed 003 sign).  With ``qdot0``: any values (default 0).  With
        ``p_hat0``: checked to equal ``lambda(q0, p_hat0)`` (the point must lie on ``M_2``).
    p_hat0 : array_like, optional
        Initial ``phat`` (a point of ``M_2`` is ``(q, phat)``).
    params : array_like, shape (n_params,)
    method : str
        ``midpoint``, ``gauss4``, ``gauss6`` (symplectic; default) or an explicit scheme of
        :func:`nhfast.integrate.integrate` (reference).  ``leapfrog`` is refused.
    h : float, optional
        Step size (required by the fixed-step schemes).
    form : {"linear", "symbolic"}
        ``linear``: :func:`~nhfast.symbolic.vakonomic.constraint_algorithm.vakonomic_hamiltonian_field`
        (linear solves in the kernels, no symbolic inverse; scales to large systems);
        ``symbolic``: ``h_2`` from the symbolic constraint algorithm
        (:func:`~nhfast.symbolic.vakonomic.constraint_algorithm.vakonomic_hamiltonian`).
    **options
        Passed to :func:`nhfast.integrate.integrate` (``rtol``, ``atol``, ``tol``, ...).

    Returns
    -------
    VakonomicTrajectory

    Raises
    ------
    ValueError
        ``method='leapfrog'`` (``h_2`` is not separable); both or neither of ``qdot0`` and
        ``p_hat0``; bad initial data (see :func:`vakonomic_initial_state`); ``mu0`` off ``M_2``.
    """
    from nhfast.integrate import integrate

    if method == "leapfrog":
        raise ValueError(
            "method='leapfrog' does not apply to vakonomic flows: h_2(q, phat) is not "
            "separable (it mixes q and phat through g^-1 and the multipliers); use "
            "'midpoint', 'gauss4' or 'gauss6' (symplectic implicit Runge-Kutta)"
        )
    m = _one_forms(system).rows  # also checks the type of system
    n = system.dim
    par = _params(system, params)
    field_ = _vak_field(system, form)
    if (qdot0 is None) == (p_hat0 is None):
        raise ValueError("give exactly one of qdot0 (velocities in D) and p_hat0")
    if qdot0 is not None:
        x0 = vakonomic_initial_state(system, q0, qdot0, mu0, par)
    else:
        q = _rows(q0, n, "q0")
        ph = _rows(p_hat0, n, "p_hat0", q.shape[0])
        k = max(q.shape[0], ph.shape[0])
        x0 = np.concatenate([np.broadcast_to(q, (k, n)), np.broadcast_to(ph, (k, n))], axis=1)
        if mu0 is not None:
            _check_on_M2(system, x0, mu0, par)
    kw = dict(options)
    if h is not None:
        kw["h"] = h
    res = integrate(field_, x0, t_eval, method=method, params=par if par.size else None, **kw)
    obs = res.observables
    return VakonomicTrajectory(
        t=res.t,
        q=res.y[:, :, :n],
        qdot=_stack(obs, "qdot", n),
        p_hat=res.y[:, :, n:],
        mu=_stack(obs, "lambda", m),
        energy=obs["energy"],
        constraint=_stack(obs, "constraint", m),
        method=method,
        result=res,
    )


def integrate_nonholonomic(
    system: Any,
    t_eval: Any,
    q0: Any,
    qdot0: Any,
    params: Any = None,
    method: str = "dop853",
    **options: Any,
) -> NonholonomicTrajectory:
    """Integrate nonholonomic motions (Lagrange-d'Alembert in ``(q, qdot)``).

    Parameters
    ----------
    system : NonholonomicSystem
    t_eval, q0, qdot0, params
        As for :func:`integrate_vakonomic` (``qdot0`` must lie in D).
    method : str
        Any method of :func:`nhfast.integrate.integrate` but ``leapfrog``.
    **options
        Passed to :func:`nhfast.integrate.integrate` (``rtol``, ``atol``, ``h``, ...).

    Returns
    -------
    NonholonomicTrajectory
    """
    from nhfast.integrate import integrate
    from nhfast.symbolic.vakonomic.equations import nonholonomic_coordinate_equations

    m = _one_forms(system).rows  # also checks the type of system
    n = system.dim
    par = _params(system, params)
    x0 = vakonomic_initial_state(system, q0, qdot0, None, par)
    q = x0[:, :n]
    qd = np.broadcast_to(_rows(qdot0, n, "qdot0"), q.shape)
    c = _cache(system)
    if c.nh_field is None:
        c.nh_field = nonholonomic_coordinate_equations(system).as_vector_field()
    res = integrate(
        c.nh_field,
        np.concatenate([q, qd], axis=1),
        t_eval,
        method=method,
        params=par if par.size else None,
        **options,
    )
    obs = res.observables
    return NonholonomicTrajectory(
        t=res.t,
        q=res.y[:, :, :n],
        qdot=res.y[:, :, n:],
        reaction=_stack(obs, "reaction", m),
        energy=obs["energy"],
        constraint=_stack(obs, "constraint", m),
        method=method,
        result=res,
    )


@dataclass
class NHVakComparison:
    """Nonholonomic and vakonomic motions from the same ``(q0, qdot0)``.

    Attributes
    ----------
    nonholonomic : NonholonomicTrajectory
    vakonomic : VakonomicTrajectory
    separation : ndarray (n_traj, n_t)
        ``max_A |q_NH^A - q_VAK^A|``.
    integrable : bool
        D is integrable: the two motions must coincide for every ``mu0``.
    checks : list of Check
        Energy and constraint drift of each, and whether the motions coincide.
    """

    nonholonomic: NonholonomicTrajectory
    vakonomic: VakonomicTrajectory
    separation: np.ndarray
    integrable: bool
    checks: list

    @property
    def t(self) -> np.ndarray:
        """Output times."""
        return self.vakonomic.t


def _drift_check(name: str, t: np.ndarray, values: np.ndarray, threshold: float) -> Check:
    v = np.asarray(values)
    if v.ndim == 3:
        dev = np.abs(v).max(axis=2)
        what = "max |W qdot|"
    else:
        dev = np.abs(v - v[:, :1])
        what = "max |E(t) - E(0)|"
    per_t = dev.max(axis=0)
    worst = float(dev.max())
    ok = bool(worst <= threshold)
    verdict = "holds" if ok else "fails"
    return Check(
        name=name,
        holds=ok,
        statement=f"{verdict}: {what} = {worst:.3g} {'<=' if ok else '>'} threshold "
        f"{threshold:.1e}",
        figures={what: worst, "threshold": threshold},
        series={"t": t, what: per_t},
        samples={"final": dev[:, -1]},
    )


def compare_nonholonomic_vakonomic(
    system: Any,
    t_eval: Any,
    q0: Any,
    qdot0: Any,
    mu0: Any = None,
    params: Any = None,
    vak_method: str = "gauss6",
    h: float | None = None,
    nh_method: str = "dop853",
    rtol: float = 1e-12,
    atol: float = 1e-12,
    threshold: float = 1e-8,
    form: str = "linear",
) -> NHVakComparison:
    """Integrate NH and VAK motions from the same initial data, side by side, with drift checks.

    Parameters
    ----------
    system : NonholonomicSystem
    t_eval : array_like
    q0, qdot0 : array_like, shape (n,) or (n_traj, n)
        Initial configuration and velocity in D.
    mu0 : array_like, shape (m,) or (n_traj, m), optional
        Initial multipliers of the VAK motion (seed 003 sign, system's basis); default 0.
    params : array_like, optional
    vak_method : str
        Scheme for ``X_{h_2}`` (default ``gauss6``; ``leapfrog`` is refused).
    h : float, optional
        Step of the fixed-step VAK scheme (default ``(t_end - t_0) / 2000``).
    nh_method : str
        Scheme for the NH equations (default ``dop853`` with ``rtol``, ``atol``).
    rtol, atol : float
    threshold : float
        Drift threshold of the checks (relative to ``1 + |E(0)|`` for energies).
    form : {"linear", "symbolic"}
        Construction of ``X_{h_2}``, see :func:`integrate_vakonomic`.

    Returns
    -------
    NHVakComparison

    Warns
    -----
    HolonomicConstraintsWarning
        When D is integrable (then the two motions coincide for every ``mu0``).
    """
    _cache(system)
    t = np.asarray(t_eval, dtype=float)
    if h is None and vak_method not in ("dopri5", "dop853"):
        h = float(abs(t[-1] - t[0])) / 2000 if t.size > 1 else 1e-2
    vak_opts: dict[str, Any] = {}
    if vak_method in ("dopri5", "dop853"):
        vak_opts.update(rtol=rtol, atol=atol)
    vak = integrate_vakonomic(
        system,
        t,
        q0,
        qdot0=qdot0,
        mu0=mu0,
        params=params,
        method=vak_method,
        h=h,
        form=form,
        **vak_opts,
    )
    nh_opts: dict[str, Any] = {"rtol": rtol, "atol": atol}
    if nh_method not in ("dopri5", "dop853"):
        nh_opts = {"h": h}
    nh = integrate_nonholonomic(system, t, q0, qdot0, params=params, method=nh_method, **nh_opts)
    sep = np.abs(nh.q - vak.q).max(axis=2)
    integrable = _integrable(system)
    if integrable:
        warnings.warn(
            "the constraints are integrable (holonomic): nonholonomic and vakonomic motions "
            "coincide for every choice of multipliers",
            HolonomicConstraintsWarning,
            stacklevel=2,
        )
    e_scale = 1.0 + float(np.abs(nh.energy[:, 0]).max())
    checks = [
        _drift_check("nonholonomic energy drift", nh.t, nh.energy, threshold * e_scale),
        _drift_check("nonholonomic constraint drift", nh.t, nh.constraint, threshold),
        _drift_check("vakonomic energy drift (h_2)", vak.t, vak.energy, threshold * e_scale),
        _drift_check("vakonomic constraint drift", vak.t, vak.constraint, threshold),
    ]
    worst = float(sep.max())
    same = worst <= threshold * (1.0 + float(np.abs(nh.q).max()))
    expect = (
        "expected for every mu0 (D integrable)"
        if integrable
        else "depends on the multipliers (D not integrable)"
    )
    checks.append(
        Check(
            name="nonholonomic and vakonomic motions coincide",
            holds=same,
            statement=(
                f"{'coincide' if same else 'differ'}: max |q_NH - q_VAK| = {worst:.3g}; {expect}"
            ),
            figures={"max separation": worst, "integrable": integrable},
            series={"t": vak.t, "max separation": sep.max(axis=0)},
            samples={"final separation": sep[:, -1]},
        )
    )
    return NHVakComparison(
        nonholonomic=nh, vakonomic=vak, separation=sep, integrable=integrable, checks=checks
    )
