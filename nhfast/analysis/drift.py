"""Drift checks on an integration: energy error and constraint residuals along trajectories.

Both checks read the observables stored in an :class:`nhfast.integrate.IntegrationResult`
(``result.observables[name]`` of shape ``(n_traj, n_t)``) and return a
:class:`nhfast.analysis.result.Check` with

* ``series``: the worst and the median value over the trajectories at every output time
  (for the plots "error vs time"),
* ``samples``: the largest value along each trajectory (for the histograms),
* ``figures``: the maximum, the median of the per-trajectory maxima, the value at the final
  time, the threshold and the number of trajectories that failed (those are left out).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from nhfast._validate import positive as _threshold
from nhfast.analysis.result import Check
from nhfast.integrate import IntegrationResult

__all__ = ["energy_error", "constraint_residual"]


def _observable(result: IntegrationResult, name: str, argument: str) -> np.ndarray:
    if not isinstance(result, IntegrationResult):
        raise TypeError(f"result must be an IntegrationResult, got {type(result).__name__}")
    if name not in result.observables:
        have = ", ".join(sorted(result.observables)) or "none (integrate(..., observables=True)?)"
        raise KeyError(f"{argument}: no observable {name!r} in the result; available: {have}")
    values = np.asarray(result.observables[name], dtype=float)
    if values.shape != result.y.shape[:2]:
        raise ValueError(
            f"{argument}: observable {name!r} has shape {values.shape}, "
            f"expected (n_traj, n_t) = {result.y.shape[:2]}"
        )
    return values


def _summarise(
    name: str,
    errors: np.ndarray,
    result: IntegrationResult,
    threshold: float,
    what: str,
    series_names: tuple[str, str],
    sample_name: str,
) -> Check:
    """Build the Check from per-trajectory, per-time errors (rows of failed lanes dropped)."""
    ok = ~result.failed
    n_failed = int(np.count_nonzero(~ok))
    err = errors[ok]
    figures: dict[str, object] = {"threshold": threshold, "trajectories": int(errors.shape[0])}
    figures["failed trajectories"] = n_failed
    if err.shape[0] == 0:
        return Check(name, False, f"no trajectory finished ({n_failed} failed)", figures)
    per_traj = np.max(err, axis=1)
    worst = float(np.max(per_traj))
    figures.update(
        {
            f"max {what}": worst,
            f"median over trajectories of max {what}": float(np.median(per_traj)),
            f"max {what} at final time": float(np.max(err[:, -1])),
        }
    )
    holds = bool(worst <= threshold) and n_failed == 0
    if n_failed:
        statement = f"{n_failed} trajectories failed; max {what} {worst:.1e} on the others"
    elif holds:
        statement = f"conserved: max {what} {worst:.1e} <= threshold {threshold:.1e}"
    else:
        statement = f"drifts: max {what} {worst:.1e} > threshold {threshold:.1e}"
    series = {
        "t": np.asarray(result.t, dtype=float),
        series_names[0]: np.max(err, axis=0),
        series_names[1]: np.median(err, axis=0),
    }
    return Check(name, holds, statement, figures, series, {sample_name: per_traj})


def energy_error(
    result: IntegrationResult,
    observable: str = "energy",
    threshold: float = 1e-8,
    relative: bool = True,
) -> Check:
    """Energy error ``|E(t) - E(0)|`` (divided by ``|E(0)|`` if ``relative``) along every lane.

    Parameters
    ----------
    result : IntegrationResult
        With the energy among ``result.observables``.
    observable : str
        Name of the energy observable.
    threshold : float
        The check holds when the largest error over all times and trajectories is at most
        this and no trajectory failed.
    relative : bool
        Relative error; lanes with ``E(0) = 0`` fall back to the absolute error.

    Returns
    -------
    Check
        ``series``: ``"t"``, ``"max |dE|/|E0|"``, ``"median |dE|/|E0|"`` (``|dE|`` when
        absolute); ``samples``: ``"max over time |dE|/|E0|"``.
    """
    threshold = _threshold(threshold, "threshold")
    e = _observable(result, observable, "observable")
    err = np.abs(e - e[:, :1])
    label = "|dE|"
    if relative:
        scale = np.abs(e[:, :1])
        scale = np.where(scale > 0, scale, 1.0)
        err = err / scale
        label = "|dE|/|E0|"
    return _summarise(
        f"energy conservation ({observable})",
        err,
        result,
        threshold,
        label,
        (f"max {label}", f"median {label}"),
        f"max over time {label}",
    )


def constraint_residual(
    result: IntegrationResult,
    constraints: Mapping[str, float],
    threshold: float = 1e-8,
) -> Check:
    """Largest constraint residual ``max_c |g_c(x(t)) - target_c|`` along every lane.

    Parameters
    ----------
    result : IntegrationResult
        With every constraint function among ``result.observables``.
    constraints : mapping of str to float
        Observable name -> the value it must keep (e.g. ``{"gamma_norm": 1.0,
        "momentum_constraint": 0.0}``).
    threshold : float
        The check holds when the largest residual is at most this and no trajectory failed.

    Returns
    -------
    Check
        ``series``: ``"t"``, ``"max residual"``, ``"median residual"`` and, per constraint,
        ``"max |<name> - target|"``; ``samples``: ``"max over time residual"``.
    """
    threshold = _threshold(threshold, "threshold")
    if not isinstance(constraints, Mapping) or not constraints:
        raise ValueError(
            "constraints must be a non-empty mapping of observable name to target value, "
            f"got {constraints!r}"
        )
    parts = {}
    for name, target in constraints.items():
        try:
            tv = float(target)
        except (TypeError, ValueError):
            raise TypeError(
                f"constraints: target of {name!r} must be a number, got {target!r}"
            ) from None
        parts[name] = np.abs(_observable(result, name, "constraints") - tv)
    err = np.max(np.stack(list(parts.values())), axis=0)
    names = ", ".join(f"{k} = {float(v):g}" for k, v in constraints.items())
    check = _summarise(
        f"constraints ({names})",
        err,
        result,
        threshold,
        "residual",
        ("max residual", "median residual"),
        "max over time residual",
    )
    ok = ~result.failed
    if np.any(ok):
        for name, e in parts.items():
            check.series[f"max |{name} - target|"] = np.max(e[ok], axis=0)
            check.figures[f"max |{name} - target|"] = float(np.max(e[ok]))
    return check


def integral_drift(
    result: IntegrationResult,
    observable: str,
    claimed_by: str = "",
    threshold: float = 1e-8,
) -> Check:
    """Change ``|I(t) - I(0)| / max(1, |I(0)|)`` of a claimed first integral along every lane.

    The scale ``max(1, |I(0)|)`` keeps integrals that start near zero (a momentum, a velocity
    component) from dividing by it.

    Parameters
    ----------
    result : IntegrationResult
        With ``observable`` among ``result.observables``.
    observable : str
        Name of the first integral.
    claimed_by : str
        Who claims it is conserved (for the statement and the figure ``"claimed by"``).
    threshold : float
        The check holds when the largest change is at most this and no trajectory failed.

    Returns
    -------
    Check
        Named ``"first integral <observable>"``; ``series``: ``"t"``, ``"max |dI|"``,
        ``"median |dI|"``; ``samples``: ``"max over time |dI|"``.
    """
    threshold = _threshold(threshold, "threshold")
    values = _observable(result, observable, "observable")
    err = np.abs(values - values[:, :1]) / np.maximum(1.0, np.abs(values[:, :1]))
    check = _summarise(
        f"first integral {observable}",
        err,
        result,
        threshold,
        "|dI|",
        ("max |dI|", "median |dI|"),
        "max over time |dI|",
    )
    if not claimed_by:
        return check
    figures = {"claimed by": claimed_by, **check.figures}
    statement = f"{check.statement} (claimed by {claimed_by})"
    return Check(check.name, check.holds, statement, figures, check.series, check.samples)
