"""Initial states for checks on sampled trajectories.

Three sources, all returning an array of shape ``(n_samples, n_state)``:

* user-given states, validated by :func:`check_states` (shape, finite values, the chart's
  domain, the constraint manifold);
* :func:`sample_box`: uniform in a box of the state space (rejecting points outside the
  domain) and, where the system has constraints, projected onto the constraint manifold;
* :func:`sample_energy_shell`: as :func:`sample_box`, then the momenta (velocities) are rescaled
  so that the ``energy`` observable takes a given value (kinetic energy quadratic in them).

Constraints.  A system "has a constraint manifold" when it is an ``EquationsOfMotion`` with
``constraints`` (functions that vanish), or a ``VectorField`` with observables named
``constraint`` or ``*_constraint`` (must vanish; a sum of squares counts as one equation per
square) or ``gamma_norm`` (must equal 1: the advected Poisson vector of a rigid body, or the
embedded sphere of :func:`nhfast.systems.veselova` with ``form="embedded"``).

Every function accepts a ``VectorField`` or anything :func:`as_vector_field` converts.

Example
-------
>>> from nhfast.systems import veselova
>>> from nhfast.analysis.sampling import as_vector_field, sample_box
>>> vf = as_vector_field(veselova(3))
>>> x0 = sample_box(vf, 16, low=[-0.5, -0.5, -1, -1], high=[0.5, 0.5, 1, 1], seed=1)
>>> x0.shape
(16, 4)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import sympy as sp

from nhfast._validate import params_rows, positive_int
from nhfast.codegen.numpy_backend import numpy_rows
from nhfast.vectorfield import VectorField

__all__ = [
    "sample_box",
    "sample_energy_shell",
    "project_to_constraints",
]


def as_vector_field(system: Any) -> VectorField:
    """The :class:`~nhfast.vectorfield.VectorField` of a system description.

    Parameters
    ----------
    system : VectorField, EquationsOfMotion, ChaplyginSystem, ReducedChaplyginSystem, \
NonholonomicSystem or any object with ``as_vector_field()``
        Chaplygin systems give the reduced equations (3.17) on ``T*S`` (states ``s, p``);
        other nonholonomic systems the almost-Poisson equations on ``D*`` (states ``q, p``).
        The equations are built with ``simplify=False`` (symbolic simplification of the
        right-hand sides costs minutes for Veselova with ``n >= 4`` and buys nothing numerically;
        joint CSE in the code generator takes care of repeated subexpressions), and for
        ``r >= 3`` with the velocities ``K^{-1} p`` as a numerical linear solve.

    Returns
    -------
    VectorField

    Raises
    ------
    TypeError
        If ``system`` is none of these.
    """
    if isinstance(system, VectorField):
        return system
    from nhfast.symbolic.systems import (
        ChaplyginSystem,
        NonholonomicSystem,
        ReducedChaplyginSystem,
    )

    if isinstance(system, (ChaplyginSystem, ReducedChaplyginSystem)):
        from nhfast.symbolic.equations import chaplygin_equations

        r = len(system.shape if isinstance(system, ChaplyginSystem) else system.s)
        inverse = "symbolic" if r <= 2 else "solve"
        return chaplygin_equations(system, inverse=inverse, simplify=False).as_vector_field()
    if isinstance(system, NonholonomicSystem):
        from nhfast.symbolic.equations import almost_poisson_equations

        return almost_poisson_equations(system, simplify=False).as_vector_field()
    conv = getattr(system, "as_vector_field", None)
    if callable(conv):
        vf = conv()
        if isinstance(vf, VectorField):
            return vf
    raise TypeError(
        "system must be a VectorField, EquationsOfMotion, ChaplyginSystem, "
        f"ReducedChaplyginSystem, NonholonomicSystem or LieGroupSystem, got {type(system).__name__}"
    )


def _split_squares(expr: sp.Expr) -> list[sp.Expr]:
    """``sum e_i^2`` -> ``[e_i]`` (each must vanish); anything else -> ``[expr]``."""
    terms = sp.Add.make_args(sp.sympify(expr))
    if all(isinstance(t, sp.Pow) and t.exp == 2 for t in terms):
        return [t.base for t in terms]
    return [sp.sympify(expr)]


def constraint_functions(system: Any) -> dict[str, sp.Expr]:
    """Functions of the states (and params) that vanish on the system's constraint manifold.

    Parameters
    ----------
    system
        A ``VectorField`` or an ``EquationsOfMotion`` (whose ``constraints`` are used).

    Returns
    -------
    dict of str to sympy.Expr
        Empty when the system has no constraint manifold (see the module docstring for the
        naming rule).
    """
    from nhfast.symbolic.equations import EquationsOfMotion

    out: dict[str, sp.Expr] = {}
    if isinstance(system, EquationsOfMotion):
        for k, e in enumerate(system.constraints or []):
            out[f"constraints[{k}]"] = sp.sympify(e)
        system = system.as_vector_field()
    if not isinstance(system, VectorField):
        return out
    for name, expr in (system.observables or {}).items():
        if name == "constraint" or name.endswith("_constraint"):
            parts = _split_squares(expr)
            for k, e in enumerate(parts):
                out[name if len(parts) == 1 else f"{name}[{k}]"] = e
        elif name == "gamma_norm":
            out[name] = expr - 1
    return out


def check_params(vf: VectorField, params: Any, n_rows: int, name: str = "params") -> np.ndarray:
    """Validate parameter values; return them as an array of shape ``(n_rows, n_params)``.

    Raises
    ------
    TypeError, ValueError
        Missing, non-numeric, non-finite or wrongly shaped values (naming ``name``).
    """
    return params_rows(params, vf.params, n_rows, name, full=True)


def _optional_params(vf: VectorField, params: Any, n_rows: int, exprs: Sequence[sp.Expr]) -> Any:
    """``params`` as rows, or zeros when none are given and ``exprs`` do not use them."""
    if params is None and vf.n_params:
        used = set().union(*(sp.sympify(e).free_symbols for e in exprs)) if exprs else set()
        if not used & set(vf.params):
            return np.zeros((n_rows, vf.n_params))
    return check_params(vf, params, n_rows)


def _eval(vf: VectorField, exprs: Sequence[sp.Expr], x: np.ndarray, par: np.ndarray) -> np.ndarray:
    """Evaluate expressions row-wise: result of shape ``(rows, len(exprs))``."""
    return numpy_rows([*vf.states, *vf.params], exprs)(x, par)


def _domain_ok(vf: VectorField, x: np.ndarray, par: np.ndarray) -> np.ndarray:
    if not vf.domain:
        return np.ones(x.shape[0], dtype=bool)
    vals = _eval(vf, list(vf.domain.values()), x, par)
    # a condition expr != 0 (a frame's singular set) holds on both of its sides
    nz = np.array([k in getattr(vf, "nonzero", ()) for k in vf.domain])
    return np.all(np.where(nz, np.abs(vals) > 0, vals > 0), axis=1)


def check_states(
    system: Any,
    x: Any,
    params: Any = None,
    name: str = "samples",
    constraint_tol: float = 1e-8,
) -> tuple[np.ndarray, np.ndarray]:
    """Validate states of ``system``: shape, finite values, domain, constraint manifold.

    Parameters
    ----------
    system
        A ``VectorField`` (or anything :func:`as_vector_field` converts).
    x : array_like, shape (n_samples, n_state) or (n_state,)
    params : array_like, shape (n_params,) or (n_samples, n_params), optional
    name : str
        Argument name used in error messages.
    constraint_tol : float
        A constraint function ``F`` counts as satisfied where
        ``|F| <= constraint_tol * (1 + |x|^2)``.

    Returns
    -------
    x, params : ndarray
        Shapes ``(n_samples, n_state)`` and ``(n_samples, n_params)``.

    Raises
    ------
    TypeError, ValueError
        Naming ``name`` (or ``"params"``) and what was expected.
    """
    vf = as_vector_field(system)
    arr, par = state_rows(vf, x, params, name)
    cons = constraint_functions(system if not isinstance(system, VectorField) else vf)
    if cons:
        vals = _eval(vf, list(cons.values()), arr, par)
        on_manifold({label: vals[:, j] for j, label in enumerate(cons)}, arr, name, constraint_tol)
    return arr, par


def state_rows(
    vf: VectorField, x: Any, params: Any, name: str, list_states: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """The checks of :func:`check_states` before the constraints: shape, finite values,
    parameters, domain.  ``list_states``: name the states in the shape error."""
    try:
        arr = np.array(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of real numbers: {exc}") from None
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != vf.n_state or arr.shape[0] == 0:
        states = f" for the states {', '.join(map(str, vf.states))}" if list_states else ""
        raise ValueError(
            f"{name} must have shape (n_samples, {vf.n_state}){states}; got {np.shape(x)}"
        )
    bad = np.flatnonzero(~np.all(np.isfinite(arr), axis=1))
    if bad.size:
        raise ValueError(f"{name} contains NaN or infinite values (first at row {bad[0]})")
    par = check_params(vf, params, arr.shape[0])
    vf.check_domain(arr, par, name)
    return arr, par


def on_manifold(
    values: Mapping[str, np.ndarray], x: np.ndarray, name: str, constraint_tol: float
) -> None:
    """The constraint check of :func:`check_states`: every ``values[label]`` (one per row of
    ``x``) within ``constraint_tol * (1 + |x|^2)`` of zero, else a ``ValueError``."""
    scale = 1.0 + np.sum(x**2, axis=1)
    for label, vals in values.items():
        off = np.flatnonzero(~(np.abs(vals) <= constraint_tol * scale))
        if off.size:
            raise ValueError(
                f"{name}: {off.size} state(s) off the constraint manifold: {label} = "
                f"{vals[off[0]]:.3g} at row {off[0]} (must vanish; "
                "use sampling.project_to_constraints)"
            )


def project_to_constraints(
    system: Any, x: Any, params: Any = None, tol: float = 1e-13, max_iter: int = 50
) -> np.ndarray:
    """Project states onto the constraint manifold ``F(x) = 0`` (minimum-norm Gauss-Newton).

    Each step solves ``x <- x - J^T (J J^T)^{-1} F(x)`` with ``J = dF/dx``; linear constraints
    (in the velocities) are met after one step.

    Parameters
    ----------
    system
        A ``VectorField`` (or anything :func:`as_vector_field` converts).
    x : array_like, shape (n_samples, n_state)
    params : array_like, optional
    tol : float
        Stop when ``max |F| <= tol * (1 + |x|^2)``.
    max_iter : int

    Returns
    -------
    ndarray, shape (n_samples, n_state)
        Unchanged when the system has no constraints.

    Raises
    ------
    ValueError
        If the iteration does not converge (naming the first row).
    """
    vf = as_vector_field(system)
    cons = constraint_functions(system if not isinstance(system, VectorField) else vf)
    x = np.array(x, dtype=float, ndmin=2)
    if not cons:
        return x
    F = list(cons.values())
    par = _optional_params(vf, params, x.shape[0], F)
    J = [sp.diff(f, s) for f in F for s in vf.states]
    k, n = len(F), vf.n_state
    for _ in range(max_iter):
        fv = _eval(vf, F, x, par)
        if np.all(np.abs(fv) <= tol * (1.0 + np.sum(x**2, axis=1))[:, None]):
            return x
        jv = _eval(vf, J, x, par).reshape(-1, k, n)
        jjt = jv @ np.swapaxes(jv, 1, 2)
        lam = np.linalg.solve(jjt, fv[:, :, None])
        x = x - (np.swapaxes(jv, 1, 2) @ lam)[:, :, 0]
    fv = _eval(vf, F, x, par)
    row = int(np.argmax(np.max(np.abs(fv), axis=1)))
    raise ValueError(f"x: projection onto the constraints did not converge (row {row})")


def _box(vf: VectorField, low: Any, high: Any) -> tuple[np.ndarray, np.ndarray]:
    lo = np.broadcast_to(np.asarray(low, dtype=float), (vf.n_state,)).copy()
    hi = np.broadcast_to(np.asarray(high, dtype=float), (vf.n_state,)).copy()
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo <= hi)):
        raise ValueError(
            f"low/high must be finite bounds with low <= high for the {vf.n_state} states "
            f"{', '.join(map(str, vf.states))}; got low={low!r}, high={high!r}"
        )
    return lo, hi


def sample_box(
    system: Any,
    n: int,
    low: Any,
    high: Any,
    *,
    seed: int = 0,
    params: Any = None,
    project: bool = True,
    max_rounds: int = 100,
) -> np.ndarray:
    """States drawn uniformly in the box ``low <= x <= high`` (inside the system's domain).

    Parameters
    ----------
    system
        A ``VectorField`` (or anything :func:`as_vector_field` converts).
    n : int
        Number of states.
    low, high : array_like, shape (n_state,) or scalar
    seed : int
        Seed of ``numpy.random.default_rng``.
    params : array_like, shape (n_params,), optional
        Needed when the domain or the constraints depend on parameters.
    project : bool
        Project onto the constraint manifold (:func:`project_to_constraints`) if there is one.
    max_rounds : int
        Rejection rounds before giving up (the box may miss the domain).

    Returns
    -------
    ndarray, shape (n, n_state)

    Raises
    ------
    ValueError
        Bad bounds, or too few states of the box inside the domain.
    """
    vf = as_vector_field(system)
    n = positive_int(n, "n")
    lo, hi = _box(vf, low, high)
    if params is not None and np.ndim(params) != 1:
        raise ValueError(f"params must have shape ({vf.n_params},) here, got {np.shape(params)}")
    rng = np.random.default_rng(seed)
    got: list[np.ndarray] = []
    count = 0
    for _ in range(max_rounds):
        x = rng.uniform(lo, hi, size=(max(n, 16), vf.n_state))
        par = _optional_params(vf, params, x.shape[0], list((vf.domain or {}).values()))
        x = x[_domain_ok(vf, x, par)]
        got.append(x)
        count += x.shape[0]
        if count >= n:
            break
    else:
        raise ValueError(
            f"low/high: only {count} of {n} states fell inside the domain of {vf.name!r} "
            f"({', '.join(vf.domain)}) after {max_rounds} rounds"
        )
    x = np.concatenate(got)[:n]
    if project:
        x = project_to_constraints(system, x, params)
    return x


def _momentum_indices(vf: VectorField, momenta: Any) -> list[int]:
    n = vf.n_state
    if momenta is None:
        if vf.split is not None:
            return list(range(vf.split, n))
        if n % 2:
            raise ValueError(
                f"momenta: cannot guess which of the {n} states are momenta; pass their indices"
            )
        return list(range(n // 2, n))
    idx = [int(i) for i in np.atleast_1d(momenta)]
    if not idx or any(i < 0 or i >= n for i in idx) or len(set(idx)) != len(idx):
        raise ValueError(f"momenta must be distinct state indices in 0..{n - 1}, got {momenta!r}")
    return idx


def sample_energy_shell(
    system: Any,
    n: int,
    energy: float,
    low: Any,
    high: Any,
    *,
    seed: int = 0,
    params: Any = None,
    momenta: Any = None,
) -> np.ndarray:
    """States on the energy shell ``E(x) = energy``.

    Draws with :func:`sample_box` (so on the constraint manifold), then rescales the momenta
    ``x[momenta] <- lam * x[momenta]`` with ``lam = sqrt((energy - U) / (E(x) - U))``,
    ``U = E(x with momenta 0)``; exact when the kinetic energy is a quadratic form in the
    momenta (checked on the draws).  Points with ``U >= energy`` are rejected.

    Parameters
    ----------
    system
        Needs an ``energy`` observable.
    n : int
    energy : float
    low, high : array_like
        Box of the first draw.
    seed : int
    params : array_like, shape (n_params,), optional
    momenta : sequence of int, optional
        Indices of the momentum (velocity) states; default ``split:`` or the second half.

    Returns
    -------
    ndarray, shape (n, n_state)

    Raises
    ------
    ValueError
        No ``energy`` observable, a kinetic energy that is not quadratic, or too few points
        below the energy level.
    """
    vf = as_vector_field(system)
    n = positive_int(n, "n")
    if "energy" not in (vf.observables or {}):
        raise ValueError(f"system: {vf.name!r} has no 'energy' observable")
    e_target = float(energy)
    if not np.isfinite(e_target):
        raise ValueError(f"energy must be finite, got {energy!r}")
    idx = _momentum_indices(vf, momenta)
    expr = vf.observables["energy"]
    if vf.solves:
        raise ValueError("system: energy shells need an energy without solves= unknowns")
    out: list[np.ndarray] = []
    count, s = 0, int(seed)
    for _ in range(100):
        x = sample_box(vf, max(n, 16), low, high, seed=s, params=params)
        s += 1
        par = check_params(vf, params, x.shape[0])
        x0 = x.copy()
        x0[:, idx] = 0.0
        x2 = x.copy()
        x2[:, idx] *= 2.0
        e1, u, e2 = (_eval(vf, [expr], y, par)[:, 0] for y in (x, x0, x2))
        t1, t2 = e1 - u, e2 - u
        if not np.allclose(t2, 4.0 * t1, rtol=1e-9, atol=1e-12 * (1 + np.abs(u).max())):
            raise ValueError("system: the energy is not quadratic in the momenta given")
        ok = (t1 > 0) & (u < e_target)
        x = x[ok]
        x[:, idx] *= np.sqrt((e_target - u[ok]) / t1[ok])[:, None]
        ok2 = _domain_ok(vf, x, check_params(vf, params, x.shape[0]))
        out.append(x[ok2])
        count += int(ok2.sum())
        if count >= n:
            return np.concatenate(out)[:n]
    raise ValueError(f"energy: only {count} of {n} draws lie below the level {e_target}")
