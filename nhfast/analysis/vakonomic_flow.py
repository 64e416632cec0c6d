"""Numerical vakonomic flows, and nonholonomic vs vakonomic motions from the same initial data.

The vakonomic flow is ``X_{h_2}`` on ``(M_2, omega_2)`` in the Darboux coordinates
``(q, phat)`` (Martinez, Cortes & de Leon 2000, Sections V-VI), integrated with the symplectic
Gauss-Legendre schemes (``midpoint``, ``gauss4``, ``gauss6``); ``h_2`` is not separable, so
``leapfrog`` is refused.  Initial data ``(q0, qdot0, mu0)``: ``qdot0`` in D, ``mu0`` the
coordinate multipliers of :mod:`nhfast.symbolic.vakonomic._forms` (default 0), mapped to
``phat0 = g qdot0 + W^T mu0``.  If D is integrable, NH and VAK motions coincide for every
``mu0`` (a :class:`~nhfast.errors.HolonomicConstraintsWarning` says so); otherwise they
separate unless special multipliers are chosen (e.g. ``mu = -p_a`` for the vertical disk,
Crampin & Mestdag 2010, Thm. 2).

References: Crampin & Mestdag (2010), "Anholonomic frames in constrained dynamics"; Martínez, Cortés
& de León (2000), "The geometrical theory of constraints applied to the dynamics of vakonomic
mechanical systems: the vakonomic bracket".
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from nhfast._cache import memo
from nhfast._validate import params_rows, real_array
from nhfast.analysis.drift import constraint_residual, energy_error
from nhfast.analysis.result import Check
from nhfast.errors import HolonomicConstraintsWarning
from nhfast.integrate import integrate
from nhfast.symbolic.vakonomic import (
    constraint_one_forms,
    is_integrable,
    nonholonomic_coordinate_equations,
    vakonomic_hamiltonian,
    vakonomic_hamiltonian_field,
)

__all__ = [
    "integrate_vakonomic",
    "compare_nonholonomic_vakonomic",
]

SYMPLECTIC = ("midpoint", "gauss4", "gauss6")


def _checked(system: Any) -> Any:
    from nhfast.symbolic.systems import NonholonomicSystem

    if not isinstance(system, NonholonomicSystem):
        raise TypeError(f"system must be a NonholonomicSystem, got {type(system).__name__}")
    return system


def _one_forms(system: Any) -> sp.Matrix:
    _checked(system)
    return memo(system, "vakonomic.one_forms", lambda: constraint_one_forms(system))


def _integrable(system: Any) -> bool:
    return bool(memo(system, "vakonomic.integrable", lambda: is_integrable(_checked(system))))


def vakonomic_field(system: Any, form: str = "linear") -> Any:
    """``X_{h_2}`` on ``(M_2, omega_2)`` for :func:`integrate_vakonomic` (memoised per system).

    Parameters
    ----------
    system : NonholonomicSystem
    form : {"linear", "symbolic"}
        ``linear``: :func:`~nhfast.symbolic.vakonomic.vakonomic_hamiltonian_field` (linear
        solves in the kernels); ``symbolic``: the explicit ``h_2`` of
        :func:`~nhfast.symbolic.vakonomic.vakonomic_hamiltonian`.

    Returns
    -------
    nhfast.vectorfield.VectorField
    """
    if form not in ("linear", "symbolic"):
        raise ValueError(f"form must be 'linear' or 'symbolic', got {form!r}")
    _checked(system)
    if form == "symbolic":
        return memo(
            system,
            "vakonomic.field.symbolic",
            lambda: vakonomic_hamiltonian(system).hamiltonian_system(),
        )
    return memo(system, "vakonomic.field.linear", lambda: vakonomic_hamiltonian_field(system))


def _nonholonomic_field(system: Any) -> Any:
    return memo(
        system,
        "nonholonomic.coordinate_field",
        lambda: nonholonomic_coordinate_equations(system).as_vector_field(),
    )


def _numeric(system: Any, key: str, expr: sp.Matrix) -> Any:
    return memo(
        system,
        f"vakonomic.numeric.{key}",
        lambda: sp.lambdify([*system.q, *system.params], expr, modules="numpy"),
    )


def _rows(value: Any, width: int, name: str, lanes: int | None = None) -> np.ndarray:
    a = real_array(value, name, (1, 2))
    if a.ndim == 1:
        a = a[None, :]
    if a.shape[1] != width:
        raise ValueError(f"{name} must have shape ({width},) or (n_traj, {width}), got {a.shape}")
    if lanes is not None and a.shape[0] not in (1, lanes):
        raise ValueError(f"{name} has {a.shape[0]} rows, expected 1 or {lanes}")
    return a


def _params(system: Any, params: Any) -> np.ndarray:
    return params_rows(params, system.params, 1)[0]


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
        Multipliers (coordinate multipliers, the system's constraint basis); default 0.
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
            "(lambda = D^-1 W g^-1 phat on M_2)"
        )


@dataclass
class VakonomicTrajectory:
    """A batch of vakonomic motions.

    Attributes
    ----------
    t : ndarray (n_t,)
    q, qdot, p_hat : ndarray (n_traj, n_t, n)
    mu : ndarray (n_traj, n_t, m)
        Coordinate multipliers on ``M_2``.
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
        Multipliers ``E(L) = reaction^b W_b`` (the reaction sign of ``vakonomic._forms``).
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


def _trajectory(res: Any, n: int, m: int, method: str) -> dict[str, Any]:
    """The fields both trajectory records read off an integration result the same way."""
    obs = res.observables
    return {
        "t": res.t,
        "q": res.y[:, :, :n],
        "energy": obs["energy"],
        "constraint": _stack(obs, "constraint", m),
        "method": method,
        "result": res,
    }


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
        Initial coordinate multipliers.  With ``qdot0``: any values (default 0).  With
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
        See :func:`vakonomic_field` (``linear`` scales to large systems).
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
    if method == "leapfrog":
        raise ValueError(
            "method='leapfrog' does not apply to vakonomic flows: h_2(q, phat) is not "
            "separable (it mixes q and phat through g^-1 and the multipliers); use "
            "'midpoint', 'gauss4' or 'gauss6' (symplectic implicit Runge-Kutta)"
        )
    m = _one_forms(system).rows  # also checks the type of system
    n = system.dim
    par = _params(system, params)
    field_ = vakonomic_field(system, form)
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
        qdot=_stack(obs, "qdot", n),
        p_hat=res.y[:, :, n:],
        mu=_stack(obs, "lambda", m),
        **_trajectory(res, n, m, method),
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
    m = _one_forms(system).rows  # also checks the type of system
    n = system.dim
    par = _params(system, params)
    x0 = vakonomic_initial_state(system, q0, qdot0, None, par)
    q = x0[:, :n]
    qd = np.broadcast_to(_rows(qdot0, n, "qdot0"), q.shape)
    res = integrate(
        _nonholonomic_field(system),
        np.concatenate([q, qd], axis=1),
        t_eval,
        method=method,
        params=par if par.size else None,
        **options,
    )
    return NonholonomicTrajectory(
        qdot=res.y[:, :, n:],
        reaction=_stack(res.observables, "reaction", m),
        **_trajectory(res, n, m, method),
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


def _drift_checks(label: str, result: Any, m: int, threshold: float, e_scale: float) -> list:
    """Energy and constraint drift of one flow (:mod:`nhfast.analysis.drift`), named ``label``."""
    energy = energy_error(result, "energy", threshold * e_scale, relative=False)
    energy.name = f"{label} energy drift"
    zero = {f"constraint_{i + 1}": 0.0 for i in range(m)}
    constraint = constraint_residual(result, zero, threshold)
    constraint.name = f"{label} constraint drift"
    return [energy, constraint]


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
    system, t_eval, q0, qdot0, mu0, params
        As for :func:`integrate_vakonomic`: ``qdot0`` the initial velocity in D, ``mu0`` the
        initial multipliers of the VAK motion (default 0).
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
    _checked(system)
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
    m = nh.constraint.shape[-1]
    checks = [
        *_drift_checks("nonholonomic", nh.result, m, threshold, e_scale),
        *_drift_checks("vakonomic (h_2)", vak.result, m, threshold, e_scale),
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
