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

Structured densities
--------------------
At large ``n`` a density is not written as a SymPy expression in the states (for the rigid
bodies of :mod:`nhfast.symbolic.rigid_body` the unrolled ``log det K`` has ``O(n^3)`` terms).
A :class:`LogDensity` is a linear combination ``log rho = sum_k c_k t_k(x)`` of
:class:`LogTerm` objects: a compiled observable of the system (``LogTerm("log_det_metric")``,
``O(n)`` per lane from the program's own statements), the logarithm of one
(``LogTerm("q", log=True)``), or any NumPy callable ``f(x, params) -> (k,)`` (e.g. a quadratic
form with a per-lane inverse).  Arithmetic reads as on ``log rho``: ``-0.5 * LogTerm(...)`` is
``rho = exp(-1/2 t)``; ``rho ** 1.1`` scales every coefficient (a perturbed exponent).
:func:`check_measure` accepts one as ``density``; :func:`nhfast.analysis.density.discover_density`
accepts :class:`LogTerm` objects (or observable names) in its basis and fits their coefficients.

For a :class:`~nhfast.structured_field.StructuredVectorField` without a ``divergence`` output the
divergence is generated from the program (:func:`nhfast.codegen.differentiate.with_divergence`);
the Jacobian lanes integrate the forward-mode variational program
(:func:`nhfast.codegen.differentiate.jvp_program`; the tangent columns step with their base,
see :mod:`nhfast.analysis.tangents`), instead of unrolled SymPy variational equations.

Constraint manifolds
--------------------
A system with a constraint manifold ``F(x) = 0`` (e.g. ``T*S^{n-1} = {|gamma|^2 = 1,
gamma.m = 0}`` embedded in ``R^{2n}``) is integrated in the ambient space.  When ``F`` are first
integrals of the ambient field (they are for the rigid bodies: ``|gamma|^2`` and ``b.m`` are
conserved off the manifold too), ``L_X dF = 0`` and ``dx = sigma ^ dF`` with ``sigma`` the
Gelfand-Leray form of the level sets, so the ambient defect along a trajectory on the manifold is
the defect of ``rho sigma`` on the manifold.  ``sigma`` is the Liouville volume of the level set
up to the factor ``|det {F_i, F_j}|^(1/2)`` (a constant, ``|gamma|^2 = 1``, for ``T*S^{n-1}``).
:func:`flow_map_determinant` measures the flow on the manifold directly, with an error
estimate (see there).

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from nhfast._cache import memo
from nhfast._kernels import compile_kernels
from nhfast._validate import output_times, positive
from nhfast.analysis.result import Check
from nhfast.analysis.sampling import (
    as_vector_field,
    check_params,
    check_states,
    on_manifold,
    state_rows,
)
from nhfast.analysis.tangents import (
    check_domain,
    column_split,
    tangent_field,
    tangent_initial,
    tangent_split,
)
from nhfast.codegen.differentiate import jvp_program, with_divergence
from nhfast.codegen.numpy_backend import numpy_rows
from nhfast.integrate import ADAPTIVE, integrate
from nhfast.structured_field import StructuredVectorField
from nhfast.vectorfield import VectorField

__all__ = [
    "FlowMapDeterminant",
    "check_measure",
    "flow_jacobian",
    "flow_map_determinant",
]

_EPS = float(np.finfo(float).eps)


# --------------------------------------------------------------- structured densities ----


class LogTerm:
    """One function ``t(x)`` of the state, a term of ``log rho`` (see the module docstring).

    Parameters
    ----------
    source : str or callable
        The name of an observable of the system (evaluated by its compiled observable
        kernel), or ``f(x, params) -> values`` with ``x`` of shape ``(k, n_state)``,
        ``params`` of shape ``(k, n_params)`` and values of shape ``(k,)`` (NumPy, per lane).
    log : bool
        ``t = log |source|`` instead of ``source`` (``rho = |q|**c`` for
        ``c * LogTerm("q", log=True)``).
    label : str, optional
        Name of the quantity (default: the observable's name or the callable's ``__name__``);
        statements print ``log|label|`` when ``log`` is set, else ``label``.
    derivative : {"auto", "exact", "differences"}
        How ``X[t]`` is computed (see Notes): ``"auto"`` exact where a rule exists, else
        differences; ``"exact"`` raises ``ValueError`` where there is no rule;
        ``"differences"`` never compiles the forward-mode observable kernels (one library
        fewer, about ``1e-12`` relative error instead of roundoff).

    Notes
    -----
    ``X[t]`` (needed by :func:`nhfast.analysis.density.discover_density`) is exact for an
    observable of a :class:`~nhfast.structured_field.StructuredVectorField` (forward-mode
    derivative of the observables' program, :func:`nhfast.codegen.differentiate.jvp_program`)
    or of a plain field (SymPy gradient).  Otherwise (callables, programs with statements
    without a tangent rule such as the log-determinant of a dense solve) it is a fourth-order
    central difference along the flow direction,
    ``X[t](x) ~ (t(x - 2hX) - 8 t(x - hX) + 8 t(x + hX) - t(x + 2hX)) / 12h`` with
    ``h |X| = 1e-3 (1 + |x|)`` (truncation about ``1e-12``, roundoff about ``1e-13`` relative);
    the points ``x +- hX`` leave a constraint manifold at second order, so ``t`` must be
    defined near it.

    Examples
    --------
    >>> rho = -0.5 * LogTerm("log_det_metric")          # rho = (det K)^(-1/2)
    >>> str(rho ** 1.1)
    '-0.55*log_det_metric'
    """

    def __init__(
        self,
        source: str | Callable,
        *,
        log: bool = False,
        label: str | None = None,
        derivative: str = "auto",
    ) -> None:
        if not (isinstance(source, str) or callable(source)):
            raise TypeError(
                "LogTerm source must be an observable name or a callable f(x, params), got "
                f"{type(source).__name__}"
            )
        if derivative not in ("auto", "exact", "differences"):
            raise ValueError(
                f"derivative must be 'auto', 'exact' or 'differences', got {derivative!r}"
            )
        self.derivative = derivative
        self.source = source
        self.log = bool(log)
        base = label or (source if isinstance(source, str) else getattr(source, "__name__", "f"))
        self.label = f"log|{base}|" if self.log else str(base)

    def __repr__(self) -> str:
        return f"LogTerm({self.label!r})"

    def __str__(self) -> str:
        return self.label

    def __mul__(self, c: Any) -> LogDensity:
        return LogDensity([(c, self)])

    __rmul__ = __mul__

    def __neg__(self) -> LogDensity:
        return LogDensity([(-1.0, self)])

    def __add__(self, other: Any) -> LogDensity:
        return LogDensity([(1.0, self)]) + other

    def _source_values(self, vf: VectorField, x: np.ndarray, par: np.ndarray) -> np.ndarray:
        if isinstance(self.source, str):
            names = list(vf.observables or {})
            if self.source not in names:
                raise ValueError(
                    f"LogTerm: {vf.name!r} has no observable {self.source!r}; it has "
                    f"{', '.join(names) or 'none'}"
                )
            return _evaluate(vf, "observables", x, par)[:, names.index(self.source)]
        v = np.asarray(self.source(x, par), dtype=float)
        if v.shape != (x.shape[0],):
            raise ValueError(
                f"LogTerm {self.label}: the callable must return shape ({x.shape[0]},), "
                f"got {v.shape}"
            )
        return v

    def values(self, vf: VectorField, x: Any, par: Any) -> np.ndarray:
        """``t`` at the rows ``x`` (shape ``(k, n_state)``; params ``(k, n_params)``)."""
        x = np.atleast_2d(np.asarray(x, dtype=float))
        par = np.asarray(par, dtype=float).reshape(x.shape[0], -1)
        v = self._source_values(vf, x, par)
        if self.log:
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.log(np.abs(v))
        return v

    def along(self, vf: VectorField, x: Any, par: Any, f: Any = None) -> np.ndarray:
        """``X[t]`` at the rows ``x`` (``f``: the field's values there; computed if None)."""
        x = np.atleast_2d(np.asarray(x, dtype=float))
        par = np.asarray(par, dtype=float).reshape(x.shape[0], -1)
        f = field_values(vf, x, par) if f is None else np.asarray(f, dtype=float)
        if isinstance(self.source, str) and self.derivative != "differences":
            d = _observable_derivative(vf, self.source, x, par, f)
            if d is not None:
                return d / self._source_values(vf, x, par) if self.log else d
        if self.derivative == "exact":
            raise ValueError(
                f"LogTerm {self.label}: no exact derivative rule on {vf.name!r} (a callable, "
                "or a program statement without a tangent rule); use derivative='auto'"
            )
        return derivative_along(lambda y: self.values(vf, y, par), x, f)


class LogDensity:
    """A candidate density given by its logarithm ``log rho = sum_k c_k t_k(x)``.

    Parameters
    ----------
    terms : LogTerm, or sequence of (coefficient, LogTerm)
        The terms (a bare :class:`LogTerm` is ``log rho = t``).

    Notes
    -----
    ``c * d``, ``d * c``, ``-d``, ``d + e`` act on ``log rho``; ``d ** a`` is ``rho ** a``
    (all coefficients times ``a``).  Accepted by :func:`check_measure` as ``density``;
    :class:`~nhfast.analysis.density.DensityFit` holds one as ``log_density`` when its basis
    had :class:`LogTerm` members.
    """

    def __init__(self, terms: Any) -> None:
        if isinstance(terms, LogTerm):
            terms = [(1.0, terms)]
        out: list[tuple[float, LogTerm]] = []
        for item in terms:
            try:
                c, t = item
                c = float(c)
            except (TypeError, ValueError):
                raise TypeError(
                    f"LogDensity terms must be (coefficient, LogTerm) pairs, got {item!r}"
                ) from None
            if not isinstance(t, LogTerm):
                raise TypeError(f"LogDensity terms must hold LogTerm objects, got {t!r}")
            if not np.isfinite(c):
                raise ValueError(f"LogDensity coefficient of {t} must be finite, got {c}")
            out.append((c, t))
        if not out:
            raise ValueError("LogDensity needs at least one term")
        self.terms: tuple[tuple[float, LogTerm], ...] = tuple(out)

    def __repr__(self) -> str:
        return f"LogDensity({str(self)!r})"

    def __str__(self) -> str:
        parts = [f"{c:.15g}*{t}" for c, t in self.terms]
        return " + ".join(parts).replace("+ -", "- ")

    def __mul__(self, a: Any) -> LogDensity:
        a = float(a)
        return LogDensity([(a * c, t) for c, t in self.terms])

    __rmul__ = __mul__

    def __pow__(self, a: Any) -> LogDensity:
        return self * a

    def __neg__(self) -> LogDensity:
        return self * -1.0

    def __add__(self, other: Any) -> LogDensity:
        if isinstance(other, LogTerm):
            other = LogDensity(other)
        if not isinstance(other, LogDensity):
            return NotImplemented
        return LogDensity([*self.terms, *other.terms])

    def values(self, vf: VectorField, x: Any, par: Any) -> np.ndarray:
        """``log rho`` at the rows ``x``."""
        return sum(c * t.values(vf, x, par) for c, t in self.terms)  # type: ignore[return-value]

    def along(self, vf: VectorField, x: Any, par: Any, f: Any = None) -> np.ndarray:
        """``X[log rho]`` at the rows ``x``."""
        x = np.atleast_2d(np.asarray(x, dtype=float))
        par = np.asarray(par, dtype=float).reshape(x.shape[0], -1)
        f = field_values(vf, x, par) if f is None else f
        return sum(c * t.along(vf, x, par, f) for c, t in self.terms)  # type: ignore[return-value]


# ------------------------------------------------------------ finite differences ----

#: Relative step of the fourth-order central differences of functions of the state.
DIFFERENCE_STEP = 1e-3


def _per_row(h: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``h`` of shape (k,) broadcast against values ``v`` of shape (k, ...)."""
    return h.reshape(h.shape + (1,) * (np.ndim(v) - 1))


def _central4(v: list[np.ndarray], h: np.ndarray) -> np.ndarray:
    """``(f(-2h) - 8 f(-h) + 8 f(h) - f(2h)) / 12h`` from the values ``v`` at ``-2, -1, 1, 2``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray((v[0] - 8 * v[1] + 8 * v[2] - v[3]) / (12 * _per_row(h, v[0])))


def derivative_along(
    fn: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    f: np.ndarray,
    step: float = DIFFERENCE_STEP,
) -> np.ndarray:
    """``X[fn]`` at the rows ``x``: fourth-order central difference along the field values ``f``.

    ``X[fn](x) ~ (fn(x - 2hX) - 8 fn(x - hX) + 8 fn(x + hX) - fn(x + 2hX)) / 12h`` with
    ``h |X| = step (1 + |x|)`` (truncation ``O(step^4)``, about ``1e-12`` at the default).  The
    points ``x +- hX`` leave a constraint manifold at second order, so ``fn`` must be defined
    near it.

    Parameters
    ----------
    fn : callable
        ``fn(y) -> values`` for states ``y`` of shape (k, n) (row ``i`` a point near
        ``x[i]``); values of shape (k,) or (k, ...).
    x : ndarray, shape (k, n)
        The states.
    f : ndarray, shape (k, n)
        The field ``X`` at ``x``.
    step : float
        Relative step.

    Returns
    -------
    ndarray, shape of ``fn(x)``
        The derivative; zero on rows where ``X = 0``.
    """
    x = np.asarray(x, dtype=float)
    f = np.asarray(f, dtype=float)
    speed = np.linalg.norm(f, axis=1)
    scale = step * (1.0 + np.linalg.norm(x, axis=1)) / np.maximum(speed, 1e-300)
    h = np.where(speed > 0, scale, 0.0)
    d = h[:, None] * f
    out = _central4([np.asarray(fn(x + j * d), dtype=float) for j in (-2, -1, 1, 2)], h)
    return np.where(_per_row(speed > 0, out), out, 0.0)


def jacobian_by_differences(
    fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray, step: float = DIFFERENCE_STEP
) -> np.ndarray:
    """Jacobian of ``fn`` at the rows ``x`` by fourth-order central differences.

    Column ``j`` is ``(fn(x - 2h e_j) - 8 fn(x - h e_j) + 8 fn(x + h e_j) - fn(x + 2h e_j))
    / 12h`` with ``h = step (1 + |x|)`` per row: ``4 n`` calls of ``fn``.

    Parameters
    ----------
    fn : callable
        ``fn(y) -> values`` for states ``y`` of shape (k, n) (row ``i`` a point near
        ``x[i]``); values of shape (k,) (the Jacobian is then the gradient) or (k, ...).
    x : ndarray, shape (k, n)
        The states.
    step : float
        Relative step.

    Returns
    -------
    ndarray, shape (k, ..., n)
        ``d fn(x)[i, ...] / d x_j`` in the last axis.
    """
    x = np.asarray(x, dtype=float)
    h = step * (1.0 + np.linalg.norm(x, axis=1))
    cols = []
    for j in range(x.shape[1]):
        d = np.zeros_like(x)
        d[:, j] = h
        cols.append(_central4([np.asarray(fn(x + s * d), dtype=float) for s in (-2, -1, 1, 2)], h))
    if not cols:
        return np.zeros((x.shape[0], 0))
    return np.stack(cols, axis=-1)


def divergence_by_differences(
    fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray, step: float = DIFFERENCE_STEP
) -> np.ndarray:
    """``div X = trace DX`` at the rows ``x``, from :func:`jacobian_by_differences`.

    Parameters
    ----------
    fn, x, step
        As for :func:`jacobian_by_differences`; ``fn`` is the field (values of shape (k, n)).

    Returns
    -------
    ndarray, shape (k,)
    """
    return np.asarray(np.trace(jacobian_by_differences(fn, x, step), axis1=-2, axis2=-1))


def hamiltonised_fields(
    rhs: Callable[[np.ndarray], np.ndarray],
    phi: Callable[[np.ndarray], np.ndarray],
    energy: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    step: float = DIFFERENCE_STEP,
) -> tuple[np.ndarray, np.ndarray]:
    """The tau-field of ``x' = X`` on ``T*S^{n-1}`` and the Hamiltonian field of ``Htilde``.

    For states ``x = (gamma, m)`` in ``R^2n`` with ``|gamma| = 1``, ``gamma . m = 0``, the
    rescaling ``mtilde = exp(phi) m``, ``dt = exp(-phi) dtau`` (García-Naranjo & Marrero 2020,
    Thm 3.21) gives the tau-field ``Y = (exp(-phi) gammadot, mdot + X[phi] m)`` in
    ``(gamma, mtilde)``; ``Z`` is the Hamiltonian field of ``Htilde(gamma, mtilde) =
    E(gamma, exp(-phi) mtilde)`` on ``T*S^{n-1}`` (Dirac bracket of ``|gamma|^2 = 1``,
    ``gamma . mtilde = 0`` in ``T*R^n``)::

        gamma' = P_gamma dH/dm,   m' = -dH/dgamma + (gamma . dH/dgamma - m . dH/dm) gamma
                                        + (gamma . dH/dm) m

    ``Y = Z`` iff the system is Hamiltonised by ``phi``.  ``X[phi]`` by
    :func:`derivative_along`, ``dHtilde`` by :func:`jacobian_by_differences`.

    Parameters
    ----------
    rhs : callable
        ``X``: states (k, 2n) -> (k, 2n).
    phi : callable
        States (k, 2n) -> (k,).
    energy : callable
        ``E``: states (k, 2n) -> (k,).
    x : ndarray, shape (k, 2n)
        States on the constraint manifold.
    step : float
        Relative step of the differences.

    Returns
    -------
    Y, Z : ndarray, shape (k, 2n)
        Both in the coordinates ``(gamma, mtilde)`` at the images of ``x``.
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[1] // 2

    def htilde(states: np.ndarray) -> np.ndarray:
        back = states.copy()
        back[..., n:] *= np.exp(-phi(states))[..., None]
        return np.asarray(energy(back))

    X = np.asarray(rhs(x), dtype=float)
    ph = phi(x)
    g, m = x[:, :n], x[:, n:]
    Y = np.hstack(
        [np.exp(-ph)[:, None] * X[:, :n], X[:, n:] + derivative_along(phi, x, X, step)[:, None] * m]
    )
    y = np.hstack([g, np.exp(ph)[:, None] * m])
    grad = jacobian_by_differences(htilde, y, step)
    hg, hm, mt = grad[:, :n], grad[:, n:], y[:, n:]

    def dot(u: np.ndarray, w: np.ndarray) -> np.ndarray:
        return np.asarray(np.sum(u * w, axis=1, keepdims=True))

    Z = np.hstack([hm - dot(g, hm) * g, -hg + (dot(g, hg) - dot(mt, hm)) * g + dot(g, hm) * mt])
    return Y, Z


def _tangent_observables(vf: VectorField) -> tuple[Any, list[str]] | None:
    """Compiled ``(D obs) dx`` of a structured field's observables (None without a rule)."""
    if not isinstance(vf, StructuredVectorField):
        return None
    prog = vf.program
    names = list(prog.output_names.get("observables", ()))
    try:
        jp = jvp_program(prog, "observables")
    except NotImplementedError:
        return None
    blocks = jp.outputs["rhs"]
    tangents = blocks[len(names) :]
    states = [s for s, inp in sorted(jp.inputs.items(), key=lambda kv: kv[1].offset)]
    states = [s for s in states if jp.inputs[s].where == "x"]
    n_orig = len([s for s in prog.inputs if prog.inputs[s].where == "x"])
    # a program whose rhs has one row per state (the kernels need it; never integrated) and
    # whose observables are the tangents
    jp.output("observables", tangents, names=[f"d_{k}" for k in names])
    jp.output("rhs", [*prog.outputs["rhs"], *states[n_orig:]])
    cs = compile_kernels(jp, f"{vf.name}_observable_tangents")
    return cs, names


def _observable_derivative(
    vf: VectorField, name: str, x: np.ndarray, par: np.ndarray, f: np.ndarray
) -> np.ndarray | None:
    """Exact ``X[obs]`` where a rule exists (structured: forward mode; plain: SymPy)."""
    p = par if vf.n_params else None
    if isinstance(vf, StructuredVectorField):
        tan = memo(vf, "observable tangents", lambda: _tangent_observables(vf))
        if tan is None:
            return None
        cs, names = tan
        return cs.evaluate("observables", np.concatenate([x, f], axis=1), params=p)[
            :, names.index(name)
        ]
    expr = vf.observables[name]
    grads = memo(
        vf,
        ("observable gradient", name),
        lambda: numpy_rows([*vf.states, *vf.params], [sp.diff(expr, s) for s in vf.states]),
    )
    return np.einsum("in,in->i", grads(x, par), f)


def divergence_field(vf: VectorField) -> VectorField:
    """``vf`` with a ``divergence`` companion (cached on ``vf``).

    A plain :class:`~nhfast.vectorfield.VectorField` has one (SymPy); a
    :class:`~nhfast.structured_field.StructuredVectorField` without a ``divergence`` output gets
    one generated from its program (:func:`nhfast.codegen.differentiate.with_divergence`,
    ``O(n)`` per lane).

    Raises
    ------
    NotImplementedError
        For programs with statements without an ``O(n)`` trace rule (a dense solve).
    """
    if not isinstance(vf, StructuredVectorField) or "divergence" in vf.program.outputs:
        return vf

    def build() -> VectorField:
        return StructuredVectorField(
            with_divergence(vf.program), name=f"{vf.name}_div", domain=vf.domain or None
        )

    return memo(vf, "divergence field", build)


def _evaluation_field(vf: VectorField) -> tuple[VectorField, int]:
    """The compiled field that evaluates ``vf``: for a structured field its Liouville field
    (one library for the field, its divergence, its observables and the integration with
    ``ell``; the states padded with ``ell = 0``), else ``vf`` itself."""
    if isinstance(vf, StructuredVectorField):
        try:
            return liouville_field(vf), 1
        except NotImplementedError:
            return vf, 0
    return vf, 0


def _evaluate(
    vf: VectorField, family: str, x: np.ndarray, par: Any, threads: int = 1
) -> np.ndarray:
    """Kernel ``family`` of :func:`_evaluation_field` at states ``x`` (..., n_state): for the
    Liouville field, ``ell = 0`` appended and its rhs row ``div X`` kept (last)."""
    ef, pad = _evaluation_field(vf)
    if pad:
        x = np.concatenate([x, np.zeros((*x.shape[:-1], pad))], axis=-1)
    if isinstance(ef, StructuredVectorField):
        cs = ef.compile()
    else:
        cs = ef.compile((family,) if family != "rhs" else ())
    return np.asarray(cs.evaluate(family, x, params=par if vf.n_params else None, threads=threads))


def kernel_values(
    vf: VectorField, family: str, x: Any, par: Any = None, threads: int = 1
) -> np.ndarray:
    """A generated kernel family of ``vf`` at states ``x``.

    A structured field is evaluated through the library of its Liouville field
    (:func:`liouville_field`: one library for the field, its divergence, its observables and
    the integration with ``ell``) where it has one.

    Parameters
    ----------
    vf : VectorField
    family : str
        ``"rhs"``, ``"observables"``, ``"divergence"`` (a family the field generates).
    x : array_like, shape (..., n_state)
        The states.
    par : array_like, optional
        Parameters: shape (n_params,) for every state, or one row per state.
    threads : int

    Returns
    -------
    ndarray, shape (..., n_out)
        The kernel's outputs (for ``"rhs"``: ``X(x)``, shape (..., n_state)).
    """
    x = np.asarray(x, dtype=float)
    out = _evaluate(vf, family, x, par, threads)
    return out[..., : vf.n_state] if family == "rhs" else out


def expression_values(vf: VectorField, exprs: Any, x: Any, par: Any = None) -> np.ndarray:
    """SymPy expressions in the states and params of ``vf`` at the rows ``x`` (NumPy rows, no
    compilation).

    Parameters
    ----------
    vf : VectorField
    exprs : sequence of sympy.Expr
    x : array_like, shape (k, n_state)
    par : array_like, shape (n_params,) or (k, n_params), optional

    Returns
    -------
    ndarray, shape (k, len(exprs))
    """
    x = np.atleast_2d(np.asarray(x, dtype=float))
    par = np.zeros((1, 0)) if par is None else np.atleast_2d(np.asarray(par, dtype=float))
    return np.asarray(numpy_rows([*vf.states, *vf.params], list(exprs))(x, par))


def field_values(vf: VectorField, x: Any, par: Any) -> np.ndarray:
    """``X(x)`` at the rows ``x`` (compiled kernel)."""
    x = np.atleast_2d(np.asarray(x, dtype=float))
    par = np.asarray(par, dtype=float).reshape(x.shape[0], -1)
    return kernel_values(vf, "rhs", x, par)


def divergence_values(vf: VectorField, x: Any, par: Any) -> np.ndarray:
    """``div X`` at the rows ``x``: generated (see :func:`divergence_field`), or, for programs
    without a trace rule, :func:`divergence_by_differences` of ``X`` (``4 n_state``
    evaluations per row at ``h = 1e-3 (1 + |x|)``; about ``1e-11`` relative)."""
    x = np.atleast_2d(np.asarray(x, dtype=float))
    par = np.asarray(par, dtype=float).reshape(x.shape[0], -1)
    p = par if vf.n_params else None
    _, pad = _evaluation_field(vf)
    if pad:
        return _evaluate(vf, "rhs", x, par)[:, vf.n_state]
    if not isinstance(vf, StructuredVectorField):
        return vf.compile(("divergence",)).evaluate("divergence", x, params=p)[:, 0]
    return divergence_by_differences(lambda y: field_values(vf, y, par), x)


def constraint_values(vf: VectorField, x: Any, par: Any) -> dict[str, np.ndarray]:
    """Values of the constraint functions at the rows ``x`` (they vanish on the manifold).

    The naming rule of :func:`nhfast.analysis.sampling.constraint_functions`, evaluated by the
    compiled observable kernel (observables ``constraint``, ``*_constraint``; ``gamma_norm``
    minus one), so that a structured field's observables are never unrolled.
    """
    x = np.atleast_2d(np.asarray(x, dtype=float))
    par = np.asarray(par, dtype=float).reshape(x.shape[0], -1)
    names = list(vf.observables or {})
    picked = [k for k in names if k == "constraint" or k.endswith("_constraint")]
    picked += [k for k in names if k == "gamma_norm"]
    if not picked:
        return {}
    vals = _evaluate(vf, "observables", x, par)
    return {k: vals[:, names.index(k)] - (1.0 if k == "gamma_norm" else 0.0) for k in picked}


def validate_states(
    system: Any, x: Any, params: Any = None, name: str = "samples", constraint_tol: float = 1e-8
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~nhfast.analysis.sampling.check_states` that stays ``O(n)`` for structured fields.

    For a :class:`~nhfast.structured_field.StructuredVectorField` the constraint functions are
    evaluated by the compiled observable kernel (:func:`constraint_values`) instead of
    unrolling the observables into SymPy (tens of seconds at ``n = 32``); otherwise this is
    ``check_states``.  Same arguments, returns and errors.
    """
    vf = as_vector_field(system)
    if not isinstance(vf, StructuredVectorField):
        return check_states(system, x, params, name, constraint_tol)
    arr, par = state_rows(vf, x, params, name, list_states=False)
    on_manifold(constraint_values(vf, arr, par), arr, name, constraint_tol)
    return arr, par


def flow_jacobian(
    system: Any,
    x0: Any,
    t: Any,
    params: Any = None,
    *,
    method: str = "dop853",
    rtol: float = 1e-10,
    atol: float = 1e-12,
    h: float | None = None,
    columns: int | None = None,
    threads: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """States and flow-map Jacobians ``DPhi_t(x0)`` from the variational equations.

    The tangent columns of ``M' = DX(x) M``, ``M(0) = I``, step with their base state, so that
    ``det DPhi_t`` is as accurate as the integration.  A
    :class:`~nhfast.structured_field.StructuredVectorField` integrates the forward-mode program
    :func:`nhfast.codegen.differentiate.jvp_program` (``O(n)`` work per column, no SymPy; built
    once per field and number of columns, cached on the field), ``columns`` tangent columns
    per lane: by default one per lane, scaled so that every lane of a trajectory takes the
    base state's steps (bit-identical base states; :mod:`nhfast.analysis.tangents`), or all
    ``n_state`` in one lane, their error controlled with the base's.  Any other field
    integrates the variational field of :func:`variational_field` (SymPy), one lane per
    trajectory.

    Parameters
    ----------
    system
        A ``VectorField`` (or anything :func:`~nhfast.analysis.sampling.as_vector_field`
        converts).
    x0 : array_like, shape (k, n_state)
        Initial states (validated: finite, in the domain, on the constraint manifold).
    t : float or array_like
        Final time (51 output times on ``[0, t]``) or increasing output times.
    params : array_like, shape (n_params,) or (k, n_params), optional
    method, rtol, atol, threads
        As for :func:`nhfast.integrate.integrate`.
    h : float, optional
        Step size of the fixed-step methods (required there, e.g. ``method="rk4"``); initial
        step of the adaptive ones.
    columns : int, optional
        Structured fields only: at most this many tangent columns per lane (default one).
        With several lanes per trajectory (``columns < n_state``) the columns are left out of
        the step-size control (which needs ``atol`` far above ``2^-200 |M|``); with
        ``columns >= n_state`` one lane carries them all under the control (the most accurate
        Jacobian, but slower to compile and to run).

    Returns
    -------
    x : ndarray, shape (k, n_t, n_state)
        The trajectories.
    M : ndarray, shape (k, n_t, n_state, n_state)
        ``DPhi_t(x0)`` at the output times (``M[:, 0]`` is the identity).

    Raises
    ------
    TypeError, ValueError
        Bad ``system``, ``x0``, ``t``, ``params``, ``h`` (not a positive finite number) or
        ``columns`` (not a positive int).
    IntegrationError
        As for :func:`~nhfast.integrate.integrate`; for a trajectory that leaves the field's
        domain (its conditions checked at the output rows), naming the condition.
    NotImplementedError
        For a structured program with statements without a tangent rule.

    Examples
    --------
    >>> import numpy as np, sympy as sp
    >>> from nhfast import VectorField
    >>> from nhfast.analysis import flow_jacobian
    >>> u, v = sp.symbols("u v")
    >>> vf = VectorField([u, v], [v, -u])
    >>> x, M = flow_jacobian(vf, [[1.0, 0.0]], [0.0, np.pi / 2], rtol=1e-12)
    >>> np.round(M[0, -1], 8) + 0.0
    array([[ 0.,  1.],
           [-1.,  0.]])
    """
    vf = as_vector_field(system)
    x0, par = validate_states(vf, x0, params, "x0")
    times = _times(t)
    if h is not None:
        h = positive(h, "h")
    kw = dict(method=method, rtol=rtol, atol=atol, h=h, threads=threads)
    n = vf.n_state
    if isinstance(vf, StructuredVectorField):
        m, lanes = column_split(n, columns)
        k = x0.shape[0]
        p = np.repeat(par, lanes, axis=0) if vf.n_params else None
        y0 = tangent_initial(x0, m, lanes)
        field = tangent_field(vf, m)
        res = integrate(field, y0, times, params=p, observables=False, watch_domain=False, **kw)
        x, M = tangent_split(res.y, k, n, m)
        check_domain(vf, x, times, par)
        return x, M
    if columns is not None:
        column_split(n, columns)  # validated; a plain field always runs in one lane
    var, init, split = variational_field(vf)
    res = integrate(var, init(x0), times, params=par if vf.n_params else None, **kw)
    x, M = split(res.y)
    return x, M


def _gradients(vf: VectorField, x: np.ndarray, par: np.ndarray) -> np.ndarray:
    """``dF/dx`` of the constraint functions, shape (k, c, n): fourth-order differences."""

    def constraints(y: np.ndarray) -> np.ndarray:
        vals = list(constraint_values(vf, y, par).values())
        return np.stack(vals, axis=1) if vals else np.zeros((y.shape[0], 0))

    return jacobian_by_differences(constraints, x).reshape(x.shape[0], -1, vf.n_state)


def manifold_log_det(
    system: Any, x0: Any, xt: Any, M: Any, params: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """``log |det|`` of the flow map restricted to the constraint manifold ``F = 0``.

    With ``G = dF/dx`` (``c x n``), ``V_0`` an orthonormal basis of ``ker G(x_0)`` (the
    tangent space) and ``W = G^T (G G^T)^{-1}`` (``dF(W) = 1``)::

        det DPhi|_T = det[M V_0, W(x_t)] / det[V_0, W(x_0)],

    the Jacobian of ``Phi: {F = 0} -> {F = 0}`` for the Gelfand-Leray volumes ``dx / dF`` at
    both ends (``M V_0`` is tangent at ``x_t`` since the manifold is invariant; the ratio does
    not depend on the choice of ``W`` modulo tangent vectors).  If ``F`` are first integrals of
    the ambient flow, ``dF(x_t) M W(x_0) = 1`` and the ratio equals ``det M``.

    Parameters
    ----------
    system
        The field; its constraint functions as in :func:`constraint_values`.
    x0, xt : array_like, shape (k, n_state)
    M : array_like, shape (k, n_state, n_state)
        ``DPhi_t(x0)`` (ambient).
    params : array_like, optional

    Returns
    -------
    log_det : ndarray, shape (k,)
    transverse : ndarray, shape (k,)
        ``max |dF(x_t) M W(x_0) - 1|``: how far ``F`` are from ambient first integrals (zero
        up to the error of ``M`` when they are).
    """
    vf = as_vector_field(system)
    x0 = np.atleast_2d(np.asarray(x0, dtype=float))
    xt = np.atleast_2d(np.asarray(xt, dtype=float))
    M = np.asarray(M, dtype=float).reshape(x0.shape[0], vf.n_state, vf.n_state)
    par = check_params(vf, params, x0.shape[0])
    G0, Gt = _gradients(vf, x0, par), _gradients(vf, xt, par)
    c = G0.shape[1]
    if c == 0:
        sign, ld = np.linalg.slogdet(M)
        return np.where(sign != 0, ld, -np.inf), np.zeros(x0.shape[0])
    V0 = np.linalg.svd(G0)[2][:, c:, :].transpose(0, 2, 1)
    W0 = np.swapaxes(G0, 1, 2) @ np.linalg.inv(G0 @ np.swapaxes(G0, 1, 2))
    Wt = np.swapaxes(Gt, 1, 2) @ np.linalg.inv(Gt @ np.swapaxes(Gt, 1, 2))
    _, num = np.linalg.slogdet(np.concatenate([M @ V0, Wt], axis=2))
    _, den = np.linalg.slogdet(np.concatenate([V0, W0], axis=2))
    transverse = np.abs(Gt @ M @ W0 - np.eye(c)).max(axis=(1, 2))
    return num - den, transverse


@dataclass
class FlowMapDeterminant:
    """Outcome of :func:`flow_map_determinant`.

    Attributes
    ----------
    t : float
    x0, xt : ndarray, shape (k, n_state)
    log_det : ndarray, shape (k,)
        ``log |det DPhi_t|`` on the constraint manifold (:func:`manifold_log_det`).
    ambient_log_det : ndarray, shape (k,)
        ``log |det DPhi_t|`` in the ambient coordinates.
    transverse : ndarray, shape (k,)
        See :func:`manifold_log_det`.
    defect : ndarray or None
        ``log det DPhi_t + log rho(x_t) - log rho(x_0)`` for the given density (zero for an
        invariant one: ``rho(x_t) det DPhi_t = rho(x_0)``).
    step : ndarray, shape (k,)
        Relative finite-difference step ``h / (1 + |x_0|)`` of the extrapolated value (the
        smaller of its two steps), per trajectory; NaN for the variational route.
    ell : ndarray, shape (k,)
        Liouville's integral ``int_0^t div X`` along the unperturbed trajectories (NaN when
        the divergence is not generated); ``ambient_log_det - ell`` tests the pair.
    error : ndarray, shape (k,)
        Estimated error of ``log_det`` (and of ``ambient_log_det`` and ``defect``), per
        trajectory: for the differences, the Richardson estimate (see
        :func:`flow_map_determinant`) plus ``n_state rtol ||DPhi_t||_2`` (the integration
        error of the flow, the same at every step); for the variational route, the change
        from a second run at ten times the tolerances (fixed-step methods: twice the step);
        both plus the roundoff ``100 eps (1 + |log_det| + ||DPhi_t||_2)`` (perturbations,
        roundoff among them, grow by at most ``||DPhi_t||_2``).
    route : str
        ``"variational"`` or ``"differences"``.
    """

    t: float
    x0: np.ndarray
    xt: np.ndarray
    log_det: np.ndarray
    ambient_log_det: np.ndarray
    transverse: np.ndarray
    defect: np.ndarray | None
    step: np.ndarray
    ell: np.ndarray
    error: np.ndarray
    route: str


#: Relative steps of the automatic difference ladder (halving from the first).
AUTO_STEPS = tuple(1e-3 / 2**j for j in range(7))


def _variational_route(
    vf: VectorField, x0: np.ndarray, T: float, par: np.ndarray, kw: dict[str, Any]
) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """``(x_T, [M_T, M_T of the check run], ell_T)``: :func:`flow_jacobian` at ``kw`` and at
    ten times the tolerances (fixed-step methods: twice the step)."""
    times = np.array([0.0, T])
    fixed = kw["method"] not in ADAPTIVE or (kw["method"] == "taylor" and kw["h"] is not None)
    if fixed and kw["h"] is None:
        raise ValueError(f"h is required for the fixed-step method {kw['method']!r}")
    if fixed:
        check = dict(kw, h=2 * kw["h"])
    else:
        check = dict(kw, rtol=10 * kw["rtol"], atol=10 * kw["atol"])
    x, M = flow_jacobian(vf, x0, times, par, **kw)
    _, M2 = flow_jacobian(vf, x0, times, par, **check)
    try:
        _, ell = liouville_integral(vf, x0, times, par if vf.n_params else None, **kw)
        ell = ell[:, -1]
    except NotImplementedError:
        ell = np.full(x0.shape[0], np.nan)
    return x[:, -1], [M[:, -1], M2[:, -1]], ell


def _richardson(D: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Richardson extrapolation of central differences over a halving ladder.

    ``D`` (levels, ..., k): values at ``steps`` (``steps[j+1] = steps[j] / 2``), each
    ``D_j = D + c s_j^2 + O(s_j^4)``.  ``R_j = D_j + (D_j - D_{j-1}) / 3`` removes the
    ``s^2`` term.  With two levels the estimate is ``|D_1 - D_0| / 3`` (the removed term:
    the error of ``D_1``, an upper bound for ``R_1`` while the ``s^2`` term dominates);
    with more, ``|R_j - R_{j-1}|`` (the ``s^4`` term of ``R_{j-1}``, fifteen times that of
    ``R_j``, or the integration noise), and per trajectory the level with the smallest
    estimate is returned.

    Returns
    -------
    value, error : ndarray, shape (..., k)
    step : ndarray, shape (k,)
        The smaller step of the chosen level.
    """
    R = D[1:] + (D[1:] - D[:-1]) / 3.0
    if len(D) == 2:
        return R[0], np.abs(D[1] - D[0]) / 3.0, np.full(D.shape[-1], steps[1])
    est = np.abs(R[1:] - R[:-1])  # level j + 2 of D
    worst = est.reshape(est.shape[0], -1, est.shape[-1]).max(axis=1)  # (levels, k)
    pick = np.where(np.isfinite(worst), worst, np.inf).argmin(axis=0)
    cols = np.arange(D.shape[-1])
    value = np.moveaxis(R[1:], 0, -1)[..., cols, pick]
    error = np.moveaxis(est, 0, -1)[..., cols, pick]
    return value, error, np.asarray(steps)[pick + 2]


def flow_map_determinant(
    system: Any,
    x0: Any,
    t: float,
    params: Any = None,
    *,
    density: Any = None,
    route: str = "auto",
    step: float | None = None,
    method: str = "dop853",
    rtol: float = 1e-13,
    atol: float = 1e-15,
    h: float | None = None,
    threads: int = 1,
) -> FlowMapDeterminant:
    """``det DPhi_t`` on the constraint manifold, with an error estimate.

    Two routes to the ambient Jacobian ``M = DPhi_t(x_0)``:

    * ``"variational"`` -- :func:`flow_jacobian` (the tangent columns step with their base:
      as accurate as the integration); error estimate from a second run at ten times the
      tolerances (twice the step for fixed-step methods), a conservative bound, plus
      roundoff (see :class:`FlowMapDeterminant`).
    * ``"differences"`` -- independent of the variational equations and of the divergence:
      central differences of the flow, ``(Phi_t(x_0 + s e_j) - Phi_t(x_0 - s e_j)) / 2s``
      (``s = step (1 + |x_0|)``), whose ``log det`` is ``D(s) = log det + c s^2 + O(s^4)``.
      Richardson extrapolation over halved steps removes the ``s^2`` term and estimates the
      error: with ``step`` given, over ``2 step`` and ``step`` (estimate ``|D(step) -
      D(2 step)| / 3``); with ``step=None`` over the ladder :data:`AUTO_STEPS` (``1e-3`` to
      ``1.6e-5``, all in one batch), choosing per trajectory the step whose estimate
      ``|R_j - R_{j-1}|`` is smallest (truncation ``O(s^4)`` against the integration error,
      ``O(rtol / s)``).  ``2 n_state`` perturbed trajectories per step and initial state.

    The perturbed states leave the constraint manifold, which is harmless when its functions
    are first integrals of the ambient field (checked: ``transverse``).  The determinant on
    the manifold ``{F = 0}`` (dimension ``n_state - c``) is then the ratio of Gelfand-Leray
    volumes of :func:`manifold_log_det`; for ``T*S^{n-1} = {|gamma|^2 = 1, gamma.m = 0}``
    that volume is the Liouville volume up to a constant (``{|gamma|^2, gamma.m} = 2``).

    Parameters
    ----------
    system, params
        As for :func:`flow_jacobian`.
    x0 : array_like, shape (k, n_state)
        On the constraint manifold.
    t : float
        Final time.
    density : optional
        As for :func:`check_measure`; gives ``defect``.
    route : {"auto", "variational", "differences"}
        ``"auto"``: the variational route where the field has variational equations (every
        plain field; a structured one with a tangent rule for every statement), else the
        differences; the differences whenever ``step`` is given.
    step : float, optional
        Relative difference step (see above; differences only).
    method, rtol, atol, h, threads
        As for :func:`nhfast.integrate.integrate` (tight tolerances by default; ``h`` the
        step of fixed-step methods).

    Returns
    -------
    FlowMapDeterminant
        With ``error`` (the estimate) and ``route``.

    Raises
    ------
    TypeError, ValueError
        Bad ``system``, ``x0``, ``t``, ``params``, ``step``, ``h`` or ``route`` (or
        ``step`` with ``route="variational"``); a fixed-step method without ``h``.
    NotImplementedError
        ``route="variational"`` for a structured program without a tangent rule.
    """
    vf = as_vector_field(system)
    x0, par = validate_states(vf, x0, params, "x0")
    T = positive(t, "t")
    if route not in ("auto", "variational", "differences"):
        raise ValueError(f"route must be 'auto', 'variational' or 'differences', got {route!r}")
    if step is not None:
        step = positive(step, "step")
        if route == "variational":
            raise ValueError("step is a difference step: not with route='variational'")
    if h is not None:
        h = positive(h, "h")
    kw: dict[str, Any] = dict(method=method, rtol=rtol, atol=atol, h=h, threads=threads)
    if route == "auto":
        route = "differences" if step is not None or not _has_variational(vf) else "variational"
    k = x0.shape[0]
    if route == "variational":
        xt, Ms, ell = _variational_route(vf, x0, T, par, kw)
        steps = np.full(k, np.nan)
    else:
        ladder = np.array([2 * step, step] if step is not None else AUTO_STEPS)
        xt, ell, Ms = _differenced_ladder(vf, x0, T, par, ladder, kw)
    amb, ld, trs = [], [], []
    for M in Ms:
        sign, a = np.linalg.slogdet(M)
        amb.append(np.where(sign != 0, a, -np.inf))
        m_ld, m_tr = manifold_log_det(vf, x0, xt, M, par)
        ld.append(m_ld)
        trs.append(m_tr)
    D = np.stack([np.stack(ld), np.stack(amb)], axis=1)  # (levels, 2, k)
    if route == "variational":
        (ld_v, amb_v), err = D[0], np.abs(D[0] - D[1]).max(axis=0)
        tr = trs[0]
    else:
        (ld_v, amb_v), err, steps = _richardson(D, ladder)
        # plus the integration error of the flow itself, common to all steps (invisible to
        # the extrapolation): columns off by rtol ||DPhi|| move log det by n times that
        err = err.max(axis=0) + vf.n_state * rtol * np.linalg.norm(Ms[0], ord=2, axis=(-2, -1))
        tr = np.stack(trs)[np.searchsorted(-ladder, -steps), np.arange(k)]
    growth = np.linalg.norm(Ms[0], ord=2, axis=(-2, -1))  # roundoff grows by at most this
    err = err + 100 * _EPS * (1.0 + np.abs(ld_v) + growth)
    defect = None
    if density is not None:
        logrho = _log_density_function(vf, density, system)
        both = logrho(np.stack([x0, xt], axis=1), np.array([0.0, T]), par)
        defect = ld_v + both[:, 1] - both[:, 0]
    return FlowMapDeterminant(T, x0, xt, ld_v, amb_v, tr, defect, steps, ell, err, route)


def _has_variational(vf: VectorField) -> bool:
    """Whether :func:`flow_jacobian` can integrate ``vf``'s variational equations."""
    if not isinstance(vf, StructuredVectorField):
        return True
    try:
        tangent_field(vf, column_split(vf.n_state, None)[0])
    except NotImplementedError:
        return False
    return True


def _differenced_ladder(
    vf: VectorField,
    x0: np.ndarray,
    T: float,
    par: np.ndarray,
    ladder: np.ndarray,
    kw: dict[str, Any],
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """``(x_T, ell_T, [M_T at each step])``: central differences of the flow at every
    relative step of ``ladder``, all perturbed trajectories in one batch (with the Liouville
    field where it exists)."""
    k, n = x0.shape
    scale = 1.0 + np.linalg.norm(x0, axis=1)
    dirs = np.concatenate([sgn * s * np.eye(n) for s in ladder for sgn in (-1.0, 1.0)])
    y0 = (x0[:, None, :] + scale[:, None, None] * dirs[None]).reshape(-1, n)
    y0 = np.concatenate([x0, y0])
    p = np.concatenate([par, np.repeat(par, len(dirs), axis=0)]) if vf.n_params else None
    field, pad = vf, 0
    try:
        field, pad = liouville_field(vf), 1
    except NotImplementedError:
        pass
    y0 = np.concatenate([y0, np.zeros((y0.shape[0], pad))], axis=1)
    res = integrate(field, y0, np.array([0.0, T]), params=p, observables=False, **kw)
    ell = res.y[:k, -1, n] if pad else np.full(k, np.nan)
    ends = res.y[k:, -1, :n].reshape(k, len(ladder), 2, n, n)  # (k, level, sign, i, state)
    Ms = []
    for j, s in enumerate(ladder):
        D = (ends[:, j, 1] - ends[:, j, 0]) / (2 * s * scale[:, None, None])
        Ms.append(np.swapaxes(D, 1, 2))  # M[:, state, i]
    return res.y[:k, -1, :n], ell, Ms


def _differenced_flow(
    vf: VectorField,
    x0: np.ndarray,
    times: np.ndarray,
    par: np.ndarray,
    step: float,
    order: int,
    kw: dict[str, Any],
    liouville: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The flow of ``vf`` from ``x0`` and its Jacobian by central differences of the flow.

    One batch integrates ``x0`` and ``x0 + j h e_i`` (``h = step (1 + |x0|)``; ``j = +-1`` for
    ``order`` 2, ``+-1, +-2`` for ``order`` 4); with ``liouville``, through
    :func:`liouville_field` where it exists (``ell`` from the unperturbed rows).

    Returns
    -------
    x : ndarray, shape (k, n_t, n)
        The unperturbed trajectories.
    ell : ndarray, shape (k, n_t)
        Liouville's integral along them (NaN without a Liouville field).
    M : ndarray, shape (k, n_t, n, n)
        ``DPhi_t(x0)``.
    """
    if order not in (2, 4):
        raise ValueError(f"order must be 2 or 4, got {order!r}")
    k, n = x0.shape
    offsets = (-1, 1) if order == 2 else (-2, -1, 1, 2)
    h = step * (1.0 + np.linalg.norm(x0, axis=1))
    dirs = np.concatenate([j * np.eye(n) for j in offsets])  # (len(offsets) n, n)
    y0 = np.concatenate([x0, (x0[:, None, :] + h[:, None, None] * dirs[None]).reshape(-1, n)])
    rep = len(dirs)
    p = np.concatenate([par, np.repeat(par, rep, axis=0)]) if vf.n_params else None
    field, pad = vf, 0
    if liouville:
        try:
            field, pad = liouville_field(vf), 1
        except NotImplementedError:
            pass
    y0 = np.concatenate([y0, np.zeros((y0.shape[0], pad))], axis=1)
    res = integrate(field, y0, times, params=p, observables=False, **kw)
    ell = res.y[:k, :, n] if pad else np.full((k, times.size), np.nan)
    ends = res.y[k:, :, :n].reshape(k, len(offsets), n, times.size, n)  # (k, j, i, t, state)
    v = [ends[:, m] for m in range(len(offsets))]
    D = _central4(v, h) if order == 4 else (v[1] - v[0]) / (2 * _per_row(h, v[0]))
    return res.y[:k, :, :n], ell, np.transpose(D, (0, 2, 3, 1))  # M: (k, t, state, i)


def flow_log_det_by_differences(
    system: Any,
    x0: Any,
    t: Any,
    params: Any = None,
    *,
    step: float = 1e-4,
    order: int = 4,
    **options: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """Ambient ``log |det DPhi_t(x0)|`` by central differences of the flow (no divergence).

    The flow's Jacobian from ``order n_state`` perturbed trajectories per initial state (the
    code of :func:`flow_map_determinant`): truncation ``O(step^order)`` plus the integration
    error over the step, ``O(rtol / step)``.

    Parameters
    ----------
    system, x0, t, params
        As for :func:`flow_jacobian`.
    step : float
        Relative step ``h / (1 + |x0|)``.
    order : {2, 4}
        Order of the central differences.
    **options
        Options of :func:`nhfast.integrate.integrate` (default ``method="dop853"``,
        ``rtol = atol = 1e-12``).

    Returns
    -------
    x : ndarray, shape (k, n_t, n_state)
        The trajectories from ``x0``.
    log_det : ndarray, shape (k, n_t)
        ``log |det DPhi_t(x0)|`` (NaN where the determinant vanishes).
    """
    vf = as_vector_field(system)
    x0, par = validate_states(vf, x0, params, "x0")
    kw = {"method": "dop853", "rtol": 1e-12, "atol": 1e-12, **options}
    x, _, M = _differenced_flow(vf, x0, _times(t), par, float(step), order, kw)
    sign, logdet = np.linalg.slogdet(M)
    return x, np.where(sign != 0, logdet, np.nan)


def liouville_integral(
    system: Any, x0: Any, t: Any, params: Any = None, **options: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Trajectories and Liouville's integral ``ell(t) = int_0^t div X`` along them.

    Integrates :func:`liouville_field` (``ell`` as one more state, ``ell(0) = 0``).  A
    structured field whose program has no ``O(n)`` trace rule (a dense solve) has no such field:
    there ``ell`` is the 8-point Gauss-Legendre quadrature of ``div X`` on each output interval
    (the trajectory through the nodes, ``div X`` there by :func:`divergence_values`).

    Parameters
    ----------
    system, x0, t
        As for :func:`flow_jacobian` (``x0`` is not validated).
    params : array_like, shape (n_params,) or (k, n_params), optional
    **options
        Options of :func:`nhfast.integrate.integrate` (``method``, ``rtol``, ``atol``,
        ``threads``).

    Returns
    -------
    x : ndarray, shape (k, n_t, n_state)
    ell : ndarray, shape (k, n_t)
    """
    vf = as_vector_field(system)
    x0 = np.atleast_2d(np.asarray(x0, dtype=float))
    try:
        field = liouville_field(vf)
    except NotImplementedError:
        return _liouville_by_quadrature(vf, x0, _times(t), params, options)
    y0 = np.concatenate([x0, np.zeros((x0.shape[0], 1))], axis=1)
    res = integrate(field, y0, _times(t), params=params, observables=False, **options)
    return res.y[:, :, :-1], res.y[:, :, -1]


#: Gauss-Legendre nodes and weights on [0, 1] for :func:`_liouville_by_quadrature`.
_GAUSS = (
    (np.polynomial.legendre.leggauss(8)[0] + 1.0) / 2.0,
    np.polynomial.legendre.leggauss(8)[1] / 2.0,
)


def _liouville_by_quadrature(
    vf: VectorField, x0: np.ndarray, t: np.ndarray, params: Any, options: dict
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`liouville_integral` without a Liouville field: ``ell`` by Gauss-Legendre
    quadrature of ``div X`` over each output interval (error ``O(h^16)`` in the interval
    ``h``, so the divergence's own accuracy decides)."""
    nodes, weights = _GAUSS
    dt = np.diff(t)
    inner = (t[:-1, None] + dt[:, None] * nodes[None, :]).ravel()
    times = np.sort(np.concatenate([t, inner]))
    res = integrate(vf, x0, times, params=params, observables=False, **options)
    k, n = x0.shape
    at_nodes = np.searchsorted(times, inner)
    xs = res.y[:, at_nodes, :].reshape(-1, n)
    par = np.zeros((1, 0)) if params is None else np.asarray(params, dtype=float)
    par = np.broadcast_to(par.reshape(-1, par.shape[-1] if par.ndim else 0), (k, vf.n_params))
    rows = np.repeat(par, at_nodes.size, axis=0)
    div = divergence_values(vf, xs, rows).reshape(k, t.size - 1, nodes.size)
    pieces = (div * weights[None, None, :]).sum(axis=2) * dt[None, :]
    ell = np.concatenate([np.zeros((k, 1)), np.cumsum(pieces, axis=1)], axis=1)
    return res.y[:, np.searchsorted(times, t), :], ell


def _structured_density(density: Any) -> LogDensity | None:
    """The :class:`LogDensity` of a density argument, if it is one (or holds one)."""
    if isinstance(density, LogTerm):
        return LogDensity(density)
    if isinstance(density, LogDensity):
        return density
    held = getattr(density, "log_density", None)
    if isinstance(held, LogDensity):
        return held
    return None


def _log_density_function(vf: VectorField, density: Any, system: Any) -> Callable:
    """``log_rho(x (k, n_t, n), t (n_t,), par (k, p)) -> (k, n_t)`` for a density argument."""
    ld = _structured_density(density)
    if ld is not None:

        def structured(x: np.ndarray, t: np.ndarray, par: np.ndarray) -> np.ndarray:
            k, nt, n = x.shape
            pr = np.repeat(par, nt, axis=0)
            return ld.values(vf, x.reshape(k * nt, n), pr).reshape(k, nt)

        return structured
    rho, _ = density_expression(density, system, vf)
    if not (rho.free_symbols & set(vf.states)):  # a constant (Lebesgue): nothing to compile
        value = sp.lambdify(vf.params, rho, "numpy")

        def constant(x: np.ndarray, t: np.ndarray, par: np.ndarray) -> np.ndarray:
            k, nt, _ = x.shape
            rho_lane = np.asarray(value(*par.T) if vf.n_params else value(), dtype=float)
            with np.errstate(invalid="ignore", divide="ignore"):
                logs = np.where(rho_lane > 0, np.log(np.abs(rho_lane)), np.nan)
            return np.broadcast_to(np.reshape(logs, (-1, 1)), (k, nt)).copy()

        return constant
    dk = density_kernel(vf, rho)

    def symbolic(x: np.ndarray, t: np.ndarray, par: np.ndarray) -> np.ndarray:
        return _log_density(dk, x, t, par)[1]

    return symbolic


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
    return memo(vf, "liouville field", lambda: divergence_field(vf).with_divergence("nh_ell"))


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
    """Variational equations ``M' = DX M`` of ``vf`` (:meth:`VectorField.variational`, which
    differentiates through ``solves`` implicitly); cached on ``vf``.

    Returns
    -------
    field : VectorField
    initial : callable
        ``x0 (k, n) -> y0`` (with ``M(0) = I``).
    split : callable
        ``y (..., N) -> (x (..., n), M (..., n, n))``.
    """
    field = memo(vf, "variational field", vf.variational)
    return field, vf.variational_initial, vf.variational_split


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
    vf: VectorField,
    logrho: Callable,
    x0: np.ndarray,
    t: np.ndarray,
    par: np.ndarray,
    kw: dict,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x, ell = liouville_integral(vf, x0, t, par if par.shape[1] else None, **kw)
    logr = logrho(x, t, par)
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
    density : None, sympy.Expr, "geometry", MeasureResult, DensityFit, LogTerm or LogDensity
        Candidate density (see :func:`density_expression`); ``None`` = Liouville.  A
        :class:`LogDensity` (or a ``DensityFit`` holding one) gives ``log rho`` through the
        system's compiled observables or NumPy callables (see the module docstring): e.g.
        ``-0.5 * LogTerm("log_det_metric")`` for ``rho = (det K)^(-1/2)``.
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
        Trajectories (the first ones) that also get the variational equations (0 to skip;
        :func:`flow_jacobian`: for a structured field ``n_state`` forward-mode lanes each,
        stepping together).
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
    structured = _structured_density(density)
    if structured is not None:
        rho, label = structured, f"log density {structured}"
    else:
        rho, label = density_expression(density, system, vf)
    if samples is None:
        raise ValueError("samples is required: an array (n_traj, n_state) or a sampler(vf)")
    if callable(samples):
        samples = samples(vf)
    x0, par = validate_states(system, samples, params, "samples")
    times = _times(t)
    if not (isinstance(n_jacobian, int) and n_jacobian >= 0):
        raise ValueError(f"n_jacobian must be a non-negative int, got {n_jacobian!r}")
    try:
        safety = float(safety)
    except (TypeError, ValueError):
        raise TypeError(f"safety must be a number >= 1, got {safety!r}") from None
    if not safety >= 1:
        raise ValueError(f"safety must be a number >= 1, got {safety!r}")

    logrho = _log_density_function(vf, density, system)
    if structured is None and rho.free_symbols & set(vf.states):
        rho0, _ = _log_density(density_kernel(vf, rho), x0[:, None, :], times[:1], par)
        rho0 = rho0[:, 0]
        bad = np.flatnonzero(~(np.isfinite(rho0) & (rho0 > 0)))
    else:  # log rho (a structured density, or a constant: no kernel)
        with np.errstate(invalid="ignore"):
            rho0 = logrho(x0[:, None, :], times[:1], par)[:, 0]
        bad = np.flatnonzero(~np.isfinite(rho0))
    if bad.size:
        what = "positive and finite" if structured is None else "finite (log rho)"
        if structured is None and not rho.free_symbols & set(vf.states):  # its value, shown
            rho0 = np.atleast_1d(sp.lambdify(vf.params, rho, "numpy")(*par.T)) * np.ones(len(x0))
        raise ValueError(
            f"density must be {what} on the samples: {rho} = {rho0[bad[0]]:.3g} "
            f"at sample row {bad[0]} ({bad.size} bad row(s))"
        )

    kw = dict(method=method, rtol=rtol, atol=atol, threads=threads)
    defect, logr, ell = _run(vf, logrho, x0, times, par, kw)
    rtol_ref = max(rtol / 1000.0, 1e-14)
    kw_ref = dict(kw, rtol=rtol_ref, atol=atol / 1000.0)
    defect_ref, _, _ = _run(vf, logrho, x0, times, par, kw_ref)
    err = np.abs(defect - defect_ref)

    nj = min(n_jacobian, x0.shape[0])
    growth, liou = 1.0, np.full(times.size, np.nan)
    if nj:
        _, M = flow_jacobian(vf, x0[:nj], times, par[:nj], **kw)
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
