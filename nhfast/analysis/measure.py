"""Invariant-measure checks on sampled trajectories (García-Naranjo and Marrero 2020, Sec. 3.3).

For ``x' = X(x)`` and ``ell(t) = int_0^t div X(x(s)) ds`` (Liouville's integral: the coordinate
volume of a small ball around ``x(0)`` grows by ``exp(ell(t))``), a density ``rho > 0`` is
invariant, ``L_X(rho dx) = 0``, iff along every trajectory::

    defect(t) = log rho(x(t)) + ell(t) - log rho(x(0)) = 0.

:func:`check_measure` integrates a batch with ``ell`` as one more state
(``VectorField.with_divergence``), evaluates ``log rho`` with a generated observable kernel and
returns a :class:`~nhfast.analysis.result.Check`.  Independently, for a few trajectories, it
integrates the variational equations ``M' = DX M`` and compares ``log |det M(t)|`` with
``ell(t)`` (Liouville's formula), which tests the divergence and its integration.

Example
-------
>>> import numpy as np
>>> from nhfast.systems import veselova
>>> from nhfast.analysis.sampling import as_vector_field, sample_box
>>> from nhfast.analysis.measure import check_measure
>>> vf = as_vector_field(veselova(3))
>>> s1, s2, a = vf.states[0], vf.states[1], [1.0, 2.0, 3.0]
>>> c = 1 * s1**2 + 2 * s2**2 + 3 * (1 - s1**2 - s2**2)
>>> x0 = sample_box(vf, 8, [-0.4, -0.4, -1, -1], [0.4, 0.4, 1, 1], params=a)
>>> chk = check_measure(vf, c ** (-1 / 2), x0, t=1.0, params=a)
>>> chk.holds
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import sympy as sp

from nhfast._cache import memo
from nhfast._validate import output_times, positive
from nhfast.analysis.result import Check
from nhfast.analysis.sampling import as_vector_field, check_states
from nhfast.integrate import integrate
from nhfast.vectorfield import VectorField

__all__ = [
    "check_measure",
    "density_expression",
    "density_kernel",
    "liouville_field",
    "variational_field",
]

_EPS = float(np.finfo(float).eps)


def density_expression(density: Any, system: Any, vf: VectorField) -> tuple[sp.Expr, str]:
    """Resolve a density argument to a SymPy expression in the states (and params).

    Parameters
    ----------
    density : None, sympy.Expr, number, "geometry", MeasureResult or DensityFit
        ``None``: the constant density (Liouville measure of the coordinates).
        ``"geometry"``: the basic measure derived by
        :func:`nhfast.symbolic.chaplygin.invariant_measure` (Chaplygin systems only).
        A ``MeasureResult`` / ``DensityFit``: its ``density``.
    system
        The system as given by the user (for ``"geometry"``).
    vf : VectorField
        The vector field whose states the density must use.

    Returns
    -------
    expr : sympy.Expr
    label : str

    Raises
    ------
    ValueError
        No measure in the ``MeasureResult``, or symbols that are neither states nor params.
    TypeError
        Anything else.
    """
    if density is None:
        return sp.Integer(1), "Liouville (constant density)"
    if isinstance(density, str):
        if density != "geometry":
            raise ValueError(f"density: the only string accepted is 'geometry', got {density!r}")
        from nhfast.symbolic.chaplygin import invariant_measure

        try:
            density = invariant_measure(system)
        except TypeError:
            raise TypeError(
                "density='geometry' needs a ChaplyginSystem or ReducedChaplyginSystem as system, "
                f"got {type(system).__name__}"
            ) from None
    if hasattr(density, "density") and not isinstance(density, sp.Basic):
        if density.density is None:
            why = getattr(density, "reason", "") or getattr(density, "statement", "")
            raise ValueError(f"density: the result holds no density ({why})")
        density = density.density
    try:
        expr = sp.sympify(density)
    except (sp.SympifyError, TypeError):
        raise TypeError(
            f"density must be a SymPy expression, None, 'geometry' or a MeasureResult; "
            f"got {type(density).__name__}"
        ) from None
    if not isinstance(expr, sp.Expr):
        raise TypeError(f"density must be a scalar expression, got {expr!r}")
    extra = expr.free_symbols - set(vf.states) - set(vf.params)
    if extra:
        raise ValueError(
            f"density uses {', '.join(sorted(map(str, extra)))}, which are neither states "
            f"({', '.join(map(str, vf.states))}) nor params"
        )
    return expr, f"density {expr}"


def liouville_field(vf: VectorField) -> VectorField:
    """``vf`` with the Liouville state ``ell`` (last), ``ell' = div X``; cached on ``vf``."""
    return memo(vf, "liouville field", lambda: vf.with_divergence("nh_ell"))


def density_kernel(vf: VectorField, rho: sp.Expr) -> VectorField:
    """A field on the states of ``vf`` whose observables are ``density`` and ``log_density``.

    Only its observable kernel is used (the right-hand side is zero): ``log rho`` is evaluated
    by generated code on all output rows at once.
    """
    return VectorField(
        states=vf.states,
        rhs=[sp.Integer(0)] * vf.n_state,
        params=vf.params,
        observables={"density": rho, "log_density": sp.log(rho)},
        time=vf.time,
        name=f"{vf.name} (density)",
    )


def variational_field(vf: VectorField) -> tuple[VectorField, Callable, Callable]:
    """Variational equations ``M' = DX M`` of ``vf``, also for fields with ``solves``; cached.

    Returns
    -------
    field : VectorField
    initial : callable
        ``x0 (k, n) -> y0`` (with ``M(0) = I``).
    split : callable
        ``y (..., N) -> (x (..., n), M (..., n, n))``.
    """
    field = memo(vf, "variational field", lambda: _variational(vf))
    if not vf.solves:
        return field, vf.variational_initial, vf.variational_split
    n = vf.n_state

    def initial(x0: np.ndarray) -> np.ndarray:
        x0 = np.asarray(x0, dtype=float)
        eye = np.broadcast_to(np.eye(n).reshape(-1), (*x0.shape[:-1], n * n))
        return np.concatenate([x0, eye], axis=-1)

    def split(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        y = np.asarray(y)
        return y[..., :n], y[..., n:].reshape(*y.shape[:-1], n, n)

    return field, initial, split


def _variational(vf: VectorField) -> VectorField:
    if not vf.solves:
        return vf.variational()
    n = vf.n_state
    _, D = vf.total_derivatives()
    M = sp.Matrix(n, n, lambda i, j: sp.Dummy(f"M_{i}_{j}"))
    dX = sp.Matrix(n, n, lambda i, j: D(vf.rhs[i], j))
    return VectorField(
        states=[*vf.states, *M],
        rhs=[*vf.rhs, *(dX * M)],
        params=vf.params,
        time=vf.time,
        name=f"{vf.name} (variational)",
        solves=vf.solves,
    )


def _times(t: Any) -> np.ndarray:
    """A final time ``T`` (51 outputs on ``[0, T]``) or increasing output times."""
    if np.ndim(t) == 0:
        return np.linspace(0.0, positive(t, "t"), 51)
    arr = output_times(t, "t", increasing=True)
    if arr.size < 2:
        raise ValueError(f"t must hold at least 2 times, got shape {arr.shape}")
    return arr


def _log_density(
    dk: VectorField, x: np.ndarray, t: np.ndarray, par: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(density, log density)`` at states ``x`` of shape (n_traj, n_t, n)."""
    cs = dk.compile(("observables",))
    ntraj, nt, _ = x.shape
    p = np.broadcast_to(par[:, None, :], (ntraj, nt, par.shape[1])) if par.shape[1] else None
    out = cs.evaluate("observables", x, t=np.broadcast_to(t, (ntraj, nt)), params=p)
    return out[..., 0], out[..., 1]


def _run(
    lf: VectorField,
    dk: VectorField,
    x0: np.ndarray,
    t: np.ndarray,
    par: np.ndarray,
    kw: dict,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y0 = np.concatenate([x0, np.zeros((x0.shape[0], 1))], axis=1)
    res = integrate(lf, y0, t, params=par if par.shape[1] else None, observables=False, **kw)
    _, logr = _log_density(dk, res.y[:, :, :-1], t, par)
    ell = res.y[:, :, -1]
    return logr - logr[:, :1] + ell, logr, ell


def check_measure(
    system: Any,
    density: Any = None,
    samples: Any = None,
    t: Any = 1.0,
    params: Any = None,
    *,
    method: str = "dop853",
    rtol: float = 1e-10,
    atol: float = 1e-12,
    n_jacobian: int = 4,
    safety: float = 10.0,
    name: str | None = None,
    threads: int = 1,
) -> Check:
    """Check whether ``rho dx`` is invariant along sampled trajectories of ``system``.

    Parameters
    ----------
    system : VectorField, EquationsOfMotion, ChaplyginSystem, ReducedChaplyginSystem, ...
        Converted with :func:`nhfast.analysis.sampling.as_vector_field`; the density refers
        to that field's coordinate volume (``ds dp`` for a Chaplygin system).
    density : None, sympy.Expr, "geometry", MeasureResult or DensityFit
        Candidate density (see :func:`density_expression`); ``None`` = Liouville.
    samples : array_like of shape (n_traj, n_state), or callable
        Initial states, or ``sampler(vf) -> array`` (e.g. a ``functools.partial`` of
        :func:`nhfast.analysis.sampling.sample_box`).  Validated by ``check_states``.
    t : float or array_like
        Final time (51 equally spaced output times) or increasing output times from ``t[0]``.
    params : array_like, shape (n_params,) or (n_traj, n_params), optional
    method, rtol, atol
        Integrator (see :func:`nhfast.integrate.integrate`); the verdict threshold follows from
        ``rtol`` as documented in the module docstring.
    n_jacobian : int
        Trajectories (the first ones) that also get the variational equations (0 to skip).
    safety : float
        Factor of the threshold rule (>= 1).
    name : str, optional
        Name of the check (default from the density).
    threads : int

    Returns
    -------
    Check
        ``holds``: the density is preserved (``None`` if the Liouville-formula check failed);
        ``series``: ``t``, ``max |defect|``, ``median |defect|``, ``error estimate`` and
        ``max |log det DPhi - ell|``; ``samples``: ``final defect`` (signed) and
        ``max |defect|`` per trajectory; ``figures``: the raw numbers behind the verdict.

    Raises
    ------
    TypeError, ValueError
        Bad ``system``, ``density`` (wrong symbols, not positive on the samples),
        ``samples`` (shape, NaN, off the domain or the constraint manifold), ``t``, ``params``.

    Notes
    -----
    Verdict threshold (the rule)::

        threshold = safety * max(E, rtol * G, 100 * eps * (1 + S))

    * ``E``: the measured integration error of the defect, ``max |defect(rtol) - defect(rtol_ref)|``
      with a second run at ``rtol_ref = rtol / 1000`` (``atol`` likewise).  For an invariant density
      the defect of the first run *is* integration error, and ``E`` estimates it a posteriori (the
      reference run is about a thousand times more accurate);
    * ``rtol * G``: the a-priori size of that error, ``G = max_t ||DPhi_t||_2`` (at least 1) the
      growth factor of perturbations measured on the Jacobian lanes (a local error ``rtol`` relative
      to the states grows at most by ``G`` in the states and hence in ``log rho``, ``ell``);
    * ``100 eps (1 + S)``: roundoff of the sum, ``S = max |log rho| + max |ell|``;
    * ``safety`` (default 10).

    A density that is *not* invariant gives a defect that does not shrink with the tolerance, so it
    lies far above this threshold.  If the Liouville-formula figure ``max |log det DPhi - ell|``
    itself exceeds the threshold, the integration is not trusted and the verdict is ``None``.
    """
    vf = as_vector_field(system)
    rho, label = density_expression(density, system, vf)
    if samples is None:
        raise ValueError("samples is required: an array (n_traj, n_state) or a sampler(vf)")
    if callable(samples):
        samples = samples(vf)
    x0, par = check_states(system, samples, params, "samples")
    times = _times(t)
    if not (isinstance(n_jacobian, int) and n_jacobian >= 0):
        raise ValueError(f"n_jacobian must be a non-negative int, got {n_jacobian!r}")
    try:
        safety = float(safety)
    except (TypeError, ValueError):
        raise TypeError(f"safety must be a number >= 1, got {safety!r}") from None
    if not safety >= 1:
        raise ValueError(f"safety must be a number >= 1, got {safety!r}")

    dk = density_kernel(vf, rho)
    rho0, _ = _log_density(dk, x0[:, None, :], times[:1], par)
    rho0 = rho0[:, 0]
    bad = np.flatnonzero(~(np.isfinite(rho0) & (rho0 > 0)))
    if bad.size:
        raise ValueError(
            f"density must be positive and finite on the samples: {rho} = {rho0[bad[0]]:.3g} "
            f"at sample row {bad[0]} ({bad.size} bad row(s))"
        )

    kw = dict(method=method, rtol=rtol, atol=atol, threads=threads)
    lf = liouville_field(vf)
    defect, logr, ell = _run(lf, dk, x0, times, par, kw)
    rtol_ref = max(rtol / 1000.0, 1e-14)
    kw_ref = dict(kw, rtol=rtol_ref, atol=atol / 1000.0)
    defect_ref, _, _ = _run(lf, dk, x0, times, par, kw_ref)
    err = np.abs(defect - defect_ref)

    nj = min(n_jacobian, x0.shape[0])
    growth, liou = 1.0, np.full(times.size, np.nan)
    if nj:
        var, init, split = variational_field(vf)
        pj = par[:nj] if par.shape[1] else None
        res = integrate(var, init(x0[:nj]), times, params=pj, **kw)
        _, M = split(res.y)
        sign, logdet = np.linalg.slogdet(M)
        liou_all = np.abs(logdet - ell[:nj])
        liou_all[sign <= 0] = np.inf
        liou = liou_all.max(axis=0)
        growth = max(1.0, float(np.linalg.norm(M, ord=2, axis=(-2, -1)).max()))

    absd = np.abs(defect)
    S = float(np.nanmax(np.abs(logr)) + np.abs(ell).max())
    E = float(np.nanmax(err)) if np.isfinite(err).any() else 0.0
    threshold = safety * max(E, rtol * growth, 100 * _EPS * (1 + S))
    max_def = float(np.nanmax(absd)) if np.isfinite(absd).any() else float("nan")
    liou_max = float(np.nanmax(liou)) if nj else float("nan")
    nonfinite = np.flatnonzero(~np.all(np.isfinite(defect), axis=1))
    if nonfinite.size:
        holds = None
        statement = (
            f"undecided: log rho is not finite along {nonfinite.size} trajectory(ies) (first "
            f"#{nonfinite[0]}): the density is not positive on the whole run"
        )
    elif nj and not liou_max <= threshold:
        holds = None
        statement = (
            f"undecided: Liouville's formula fails on the run (max |log det DPhi - ell| "
            f"{liou_max:.2e} > threshold {threshold:.2e}); the integration is not trusted"
        )
    else:
        holds = max_def <= threshold
        verb = "preserved" if holds else "not preserved"
        rel = "<=" if holds else ">"
        statement = f"{verb}: max |defect| {max_def:.2e} {rel} threshold {threshold:.2e}"
    figures = {
        "density": str(rho),
        "system": vf.name,
        "n_trajectories": int(x0.shape[0]),
        "n_times": int(times.size),
        "t_final": float(times[-1]),
        "method": method,
        "rtol": float(rtol),
        "atol": float(atol),
        "rtol_reference": float(rtol_ref),
        "max |defect|": max_def,
        "median final |defect|": float(np.median(absd[:, -1])),
        "threshold": float(threshold),
        "error estimate E": E,
        "growth factor G": float(growth),
        "scale S": S,
        "safety": safety,
        "jacobian trajectories": int(nj),
        "max |log det DPhi - ell|": liou_max,
        "max |ell|": float(np.abs(ell).max()),
    }
    return Check(
        name=name or f"invariant measure: {label}",
        holds=holds,
        statement=statement,
        figures=figures,
        series={
            "t": times,
            "max |defect|": absd.max(axis=0),
            "median |defect|": np.median(absd, axis=0),
            "error estimate": err.max(axis=0),
            "max |log det DPhi - ell|": liou,
        },
        samples={"final defect": defect[:, -1].copy(), "max |defect|": absd.max(axis=1)},
    )
