"""Density discovery: fit ``sigma`` with ``X[sigma] = -div X`` on sampled states.

A density ``rho = exp(sigma)`` is invariant under ``x' = X(x)`` iff ``div(rho X) = 0``, i.e.
``X[sigma] = -div X`` pointwise.  :func:`discover_density` evaluates ``X`` and ``div X`` with the
generated kernels on the samples (no integration: the residual of a true density is at roundoff
level) and fits ``sigma`` in two stages:

1. **Linear basis.**  ``sigma = sum_k c_k b_k`` over the basis (default: the monomials of degree
   ``1..degree`` in ``variables`` and the logarithms ``log(P**2) = 2 log|P|`` of each variable
   and of each polynomial factor of the right-hand side in ``variables``, which catch densities
   such as ``1/|a|`` of ``a' = a b, b' = -a**2``; or the user's SymPy functions).  Least squares
   (``numpy.linalg.lstsq``) on ``sum_k c_k X[b_k](x_i) = -div X(x_i)``.
2. **Log of a quadratic form.**  ``sigma = alpha log Q`` with ``Q = sum_m q_m m`` over *all*
   monomials ``m`` of degree ``0..2`` in ``variables`` -- the constant and linear ones included:
   in the hemisphere chart of Veselova ``(A gamma, gamma) = a_n + sum_k (a_k - a_n) s_k^2`` is an
   inhomogeneous quadratic in ``s`` (``gamma_n^2 = 1 - |s|^2``), so homogeneous forms in ``s``
   cannot find it.  ``X[sigma] = -div X`` times ``Q`` is ``alpha X[Q] + div X Q = 0``: linear
   and homogeneous in ``(w, q)`` with ``w = alpha q'`` (``q'`` the non-constant part, since
   ``X[1] = 0``).  The null space of ``[X[m'] | div X m]`` is computed by SVD and the pencil
   ``w = alpha q'`` solved in it; ``Q`` must keep one sign on the samples.

Residuals are relative: ``||X[sigma] + div X|| / ||div X||`` over the samples.  A fit counts when
it is below ``tol`` (default ``1e-8``: evaluations are pointwise in double precision, so a member
of the basis leaves about ``1e-13`` times the conditioning of the fit, while a wrong basis leaves
order-one residuals).  Coefficients are snapped to rationals (denominator <= ``max_denominator``)
only when each is within ``1e-9`` relative of one *and* the snapped closed form still passes on
the hold-out samples (a quarter of the samples, never used in the fit).  If ``div X`` vanishes
on all samples the answer is the constant density.

**Structured candidates.**  At large ``n`` (a
:class:`~nhfast.structured_field.StructuredVectorField`) the basis holds
:class:`~nhfast.analysis.measure.LogTerm` objects: compiled observables such as
``log_det_metric`` (``X[t]`` by forward mode through the program) or NumPy callables (``X[t]``
by differences along the flow); ``div X`` and ``X`` come from the generated kernels, so nothing
is unrolled into SymPy.  The fit is returned as a
:class:`~nhfast.analysis.measure.LogDensity` (``DensityFit.log_density``) that
:func:`~nhfast.analysis.measure.check_measure` accepts.  E.g. the Veselova body with the
physical inertia at ``n = 32``::

    fit = discover_density(veselova_rigid_body(32), x, basis=["log_det_metric"], params=j)
    fit.coefficients        # {'log_det_metric': -0.5}: rho = (det K_gamma)^(-1/2)

A density found is **singular** where a factor ``P`` of ``rho`` (in ``log|P|`` or in the base
``Q`` of ``Q**alpha``) vanishes: ``rho`` vanishes or blows up on the hypersurface ``P = 0``.
Such hypersurfaces are listed in ``DensityFit.singular`` (and in the statement) when ``P``
changes sign on the samples, i.e. the hypersurface crosses the sampled region, or comes close
to zero there (``min |P| < 1e-3 max |P|``: for factors not split further, such as ``Q`` with
floating-point coefficients).

Example
-------
>>> import numpy as np
>>> from nhfast.systems import veselova
>>> from nhfast.analysis.sampling import as_vector_field, sample_box
>>> from nhfast.analysis.density import discover_density
>>> vf = as_vector_field(veselova(3))
>>> a = [1.0, 2.0, 3.0]
>>> x = sample_box(vf, 200, [-0.5, -0.5, -1, -1], [0.5, 0.5, 1, 1], params=a)
>>> fit = discover_density(vf, x, params=a)
>>> fit.exists, fit.density            # (A gamma, gamma)^(-1/2) up to a constant factor
(True, 1/sqrt(-2*s1**2/3 - s2**2/3 + 1))
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import scipy.linalg
import sympy as sp

from nhfast._validate import positive_int
from nhfast.analysis.measure import (
    LogDensity,
    LogTerm,
    divergence_values,
    field_values,
    validate_states,
)
from nhfast.analysis.result import Check
from nhfast.analysis.sampling import as_vector_field
from nhfast.codegen.numpy_backend import numpy_rows
from nhfast.structured_field import StructuredVectorField
from nhfast.vectorfield import VectorField

__all__ = [
    "DensityFit",
    "discover_density",
]


@dataclass
class DensityFit:
    """Outcome of :func:`discover_density`.

    Attributes
    ----------
    exists : bool
        A density was found in the basis (residual below ``tolerance``).
    sigma : sympy.Expr or None
        ``log rho`` (closed form).
    density : sympy.Expr or None
        ``rho = exp(sigma)`` (a power of ``Q`` for the log-quadratic stage).
    kind : str
        ``"basis"``, ``"log-quadratic"``, ``"constant"`` or ``""``.
    residual : float
        Relative residual of the fit on the fitting samples.
    holdout_residual : float
        Relative residual of the returned closed form on the hold-out samples.
    tolerance : float
    snapped : bool
        Whether the coefficients were snapped to rationals.
    null_dimension : int
        Dimension of the set of exact fits (above 1: first integrals in the basis; the
        minimum-norm fit is returned).
    residuals : dict
        Relative residual of every stage tried.
    statement : str
    basis : list of sympy.Expr
    singular : list of sympy.Expr
        Factors ``P`` of the density that change sign on the samples: ``rho`` vanishes
        (positive exponent) or blows up (negative exponent) on each hypersurface ``P = 0``,
        so the invariant measure is singular there.
    log_density : LogDensity or None
        The fit as a :class:`~nhfast.analysis.measure.LogDensity` when the basis had
        :class:`~nhfast.analysis.measure.LogTerm` members (``sigma`` then shows them as
        symbols named by their labels); :func:`~nhfast.analysis.measure.check_measure`
        accepts the fit itself as ``density``.
    coefficients : dict
        Fitted coefficient of each basis function (by its label), for the basis stage.
    """

    exists: bool
    sigma: sp.Expr | None
    density: sp.Expr | None
    kind: str
    residual: float
    holdout_residual: float
    tolerance: float
    snapped: bool = False
    null_dimension: int = 0
    residuals: dict[str, float] = field(default_factory=dict)
    statement: str = ""
    basis: list = field(default_factory=list)
    singular: list[sp.Expr] = field(default_factory=list)
    log_density: LogDensity | None = None
    coefficients: dict[str, float] = field(default_factory=dict)

    def to_check(self, name: str = "density discovery") -> Check:
        """The fit as a :class:`~nhfast.analysis.result.Check` (``holds`` = ``exists``)."""
        figures = {
            "kind": self.kind,
            "sigma": str(self.sigma),
            "density": str(self.density),
            "residual": self.residual,
            "holdout residual": self.holdout_residual,
            "tolerance": self.tolerance,
            "snapped": self.snapped,
            "null dimension": self.null_dimension,
            "basis size": len(self.basis),
            "singular on": ", ".join(f"{p} = 0" for p in self.singular) or "nowhere sampled",
            **{f"residual ({k})": v for k, v in self.residuals.items()},
        }
        return Check(name=name, holds=self.exists, statement=self.statement, figures=figures)


def monomials(variables: list[sp.Symbol], degree: int, constant: bool = False) -> list[sp.Expr]:
    """Monomials of degree ``1..degree`` (``0..degree`` with ``constant``) in ``variables``."""
    out: list[sp.Expr] = [sp.Integer(1)] if constant else []
    for d in range(1, degree + 1):
        for combo in itertools.combinations_with_replacement(variables, d):
            out.append(sp.Mul(*combo))
    return out


class _Evaluator:
    """Values, and derivatives along ``X``, of expressions on a fixed set of samples."""

    def __init__(self, vf: VectorField, x: np.ndarray, par: np.ndarray) -> None:
        self.vf, self.x, self.par = vf, x, par
        p = par if par.shape[1] else None
        if isinstance(vf, StructuredVectorField):
            self.f = field_values(vf, x, par)
            self.div = divergence_values(vf, x, par)
        else:
            cs = vf.compile(("divergence",))
            self.f = cs.evaluate("rhs", x, params=p)
            self.div = cs.evaluate("divergence", x, params=p)[:, 0]
        self.args = [*vf.states, *vf.params]

    def values(self, exprs: list[Any]) -> np.ndarray:
        """Values of SymPy expressions and :class:`LogTerm` objects: (n_samples, len)."""
        out = np.empty((self.x.shape[0], len(exprs)))
        sym = [k for k, e in enumerate(exprs) if not isinstance(e, LogTerm)]
        if sym:
            out[:, sym] = numpy_rows(self.args, [exprs[k] for k in sym])(self.x, self.par)
        for k, e in enumerate(exprs):
            if isinstance(e, LogTerm):
                out[:, k] = e.values(self.vf, self.x, self.par)
        return out

    def along(self, exprs: list[Any]) -> np.ndarray:
        """``X[e](x_i)`` for each expression (or LogTerm): shape (n_samples, len(exprs))."""
        out = np.empty((self.x.shape[0], len(exprs)))
        sym = [k for k, e in enumerate(exprs) if not isinstance(e, LogTerm)]
        if sym:
            grads = [sp.diff(exprs[k], s) for k in sym for s in self.vf.states]
            g = self.values(grads).reshape(self.x.shape[0], len(sym), self.vf.n_state)
            out[:, sym] = np.einsum("ikn,in->ik", g, self.f)
        for k, e in enumerate(exprs):
            if isinstance(e, LogTerm):
                out[:, k] = e.along(self.vf, self.x, self.par, self.f)
        return out

    def subset(self, rows: np.ndarray) -> _Evaluator:
        new = object.__new__(_Evaluator)
        new.vf, new.x, new.par = self.vf, self.x[rows], self.par[rows]
        new.f, new.div, new.args = self.f[rows], self.div[rows], self.args
        return new


def _rel(res: np.ndarray, div: np.ndarray) -> float:
    scale = float(np.linalg.norm(div))
    return float(np.linalg.norm(res)) / scale if scale > 0 else float(np.linalg.norm(res))


def _snap(values: np.ndarray, max_den: int) -> np.ndarray | None:
    out = []
    for v in values:
        fr = Fraction(float(v)).limit_denominator(max_den)
        if abs(float(fr) - v) > 1e-9 * max(1.0, abs(v)):
            return None
        out.append(fr)
    return np.array(out, dtype=object)


def _rational(v: Any) -> sp.Expr:
    if isinstance(v, Fraction):
        return sp.Rational(v.numerator, v.denominator)
    return sp.Float(float(v), 17)


def _shown(expr: sp.Expr) -> sp.Expr:
    """``expr`` for statements: its floats to 12 significant digits (a fit is good to about
    ``1e-13`` relative; more digits print noise)."""
    return expr.xreplace({f: sp.Float(f, 12) for f in expr.atoms(sp.Float)})


def _residual_of(ev: _Evaluator, sigma: sp.Expr) -> float:
    return _rel(ev.along([sigma])[:, 0] + ev.div, ev.div)


def _symbolic(b: Any) -> sp.Expr:
    """A basis function as a SymPy expression (a :class:`LogTerm` as a symbol of its label)."""
    return sp.Symbol(b.label, real=True) if isinstance(b, LogTerm) else b


def _fit_basis(
    ev: _Evaluator,
    hold: _Evaluator,
    basis: list[Any],
    tol: float,
    max_den: int,
    along: tuple[np.ndarray, np.ndarray],
):
    """Least squares in the basis; returns ``(sigma, res, snapped, null_dim, coef, hres)``
    (``hres`` the hold-out residual of the returned coefficients).  ``along``: ``X[b_k]`` on
    the fitting and on the hold-out samples."""
    A, Ah = along
    b = -ev.div
    scale = np.linalg.norm(A, axis=0)
    scale[scale == 0] = 1.0
    c, *_ = np.linalg.lstsq(A / scale, b, rcond=None)
    c = c / scale
    sv = np.linalg.svd(A / scale, compute_uv=False)
    null_dim = int(np.sum(sv <= 1e-10 * sv[0])) if sv.size else 0
    res = _rel(A @ c - b, b)
    hres = _rel(Ah @ c + hold.div, hold.div)
    terms = [_symbolic(bk) for bk in basis]
    sigma = sp.Add(*[_rational(ck) * bk for ck, bk in zip(c, terms, strict=True)])
    coef = np.asarray(c, dtype=float)
    snapped = False
    if res <= tol:
        cmax = np.abs(c).max()
        small = np.abs(c) <= 1e-10 * cmax
        if small.any():  # round-off of the fit: dropped when the hold-out still passes
            kept = np.where(small, 0.0, c)
            h_kept = _rel(Ah @ kept + hold.div, hold.div)
            if h_kept <= tol:
                c, coef, hres = kept, kept, h_kept
                sigma = sp.Add(*[_rational(ck) * bk for ck, bk in zip(c, terms, strict=True)])
        rc = _snap(np.where(small, 0.0, c), max_den)
        if rc is not None:
            rcf = np.array([float(v) for v in rc])
            h_snap = _rel(Ah @ rcf + hold.div, hold.div)
            if h_snap <= tol:
                cand = sp.Add(*[_rational(ck) * bk for ck, bk in zip(rc, terms, strict=True)])
                sigma, snapped, coef, hres = cand, True, rcf, h_snap
    return sigma, res, snapped, null_dim, coef, hres


def _fit_log_quadratic(
    ev: _Evaluator, hold: _Evaluator, variables: list[sp.Symbol], tol: float, max_den: int
):
    mons = monomials(variables, 2, constant=True)
    nonconst = mons[1:]
    Aw = ev.along(nonconst)  # X[m'] -> coefficients w = alpha q'
    Bq = ev.div[:, None] * ev.values(mons)  # div X m -> coefficients q
    Mx = np.hstack([Aw, Bq])
    colscale = np.linalg.norm(Mx, axis=0)
    colscale[colscale == 0] = 1.0
    _, sv, vt = np.linalg.svd(Mx / colscale, full_matrices=False)
    if sv.size == 0:
        return None, np.inf, False, 0
    k = max(1, int(np.sum(sv <= 1e-9 * sv[0])))
    N = (vt[-k:].T) / colscale[:, None]  # null-space basis in original coefficients
    nw = len(nonconst)
    Nw, Nq = N[:nw], N[nw:]
    Nq1 = Nq[1:]  # non-constant part of q
    # pencil Nw y = alpha Nq1 y.  Candidates: finite eigenvalues of the projected square pencil
    # (QZ copes with directions where Nq1 y = 0, which give infinite eigenvalues); for each, the
    # best y is the smallest right singular vector of Nw - alpha Nq1 (eigenspaces may be
    # larger than one dimension, e.g. Q + lambda (|gamma|^2 - 1) on a sphere).
    with np.errstate(all="ignore"):
        alphas = list(scipy.linalg.eigvals(Nq1.T @ Nw, Nq1.T @ Nq1))
        alphas += _alphas_without_integrals(Nw, Nq, Nq1)
    best = (None, np.inf, False, k)
    for alpha in alphas:
        if not np.isfinite(alpha) or abs(alpha.imag) > 1e-8 * max(1.0, abs(alpha)):
            continue
        alpha = float(alpha.real)
        if abs(alpha) < 1e-12:
            continue
        y = np.linalg.svd(Nw - alpha * Nq1)[2][-1]
        q = Nq @ y
        if np.allclose(q, 0):
            continue
        qv = ev.values(mons) @ q
        if not (np.all(qv > 0) or np.all(qv < 0)):
            continue
        if qv[0] < 0:
            q = -q
        q = q / q[np.argmax(np.abs(q))]
        Q = sp.Add(*[_rational(qi) * m for qi, m in zip(q, mons, strict=True)])
        sigma = alpha * sp.log(Q)
        res = _residual_of(ev, sigma)
        if res < best[1]:
            best = (sigma, res, False, k)
            if res <= tol:
                snapped_sigma, snapped = _snap_log_quadratic(
                    hold, alpha, q, mons, sigma, tol, max_den
                )
                best = (snapped_sigma, res, snapped, k)
    return best


def _alphas_without_integrals(Nw: np.ndarray, Nq: np.ndarray, Nq1: np.ndarray) -> list[Any]:
    """Exponents of the pencil ``Nw y = alpha Nq1 y`` with first integrals in the span taken out.

    A first integral ``F`` among the monomials gives null vectors ``(w, q) = (F, 0)``, which
    make the projected pencil singular (``det(A - lambda B) = 0`` for every ``lambda``; e.g.
    ``|gamma|^2`` for the Chaplygin ball sampled off the sphere).  Restrict ``y`` to the
    complement of ``ker Nq`` and project the equation onto the complement of ``Nw ker Nq``.
    """
    if Nq.shape[1] < 2:
        return []
    _, sq, vq = np.linalg.svd(Nq)
    rank = int(np.sum(sq > 1e-9 * sq[0])) if sq.size and sq[0] > 0 else 0
    if rank == 0 or rank == Nq.shape[1]:
        return []
    Y1, Y0 = vq[:rank].T, vq[rank:].T
    F = Nw @ Y0
    uf, sf, _ = np.linalg.svd(F, full_matrices=False)
    uf = uf[:, sf > 1e-9 * max(sf[0], 1e-300)] if sf.size else uf[:, :0]
    P = np.eye(Nw.shape[0]) - uf @ uf.T
    A, B = P @ Nw @ Y1, P @ Nq1 @ Y1
    return list(scipy.linalg.eigvals(B.T @ A, B.T @ B))


def _snap_log_quadratic(
    hold: _Evaluator,
    alpha: float,
    q: np.ndarray,
    mons: list[sp.Expr],
    sigma: sp.Expr,
    tol: float,
    max_den: int,
) -> tuple[sp.Expr, bool]:
    """Snap the exponent and the coefficients of ``Q`` separately, each kept only if the
    closed form still passes on the hold-out samples; ``snapped`` refers to the exponent."""
    a_expr: sp.Expr = sp.Float(alpha, 17)
    fa = _snap(np.array([alpha]), 24)
    snapped = False
    if fa is not None:
        a_expr, snapped = _rational(fa[0]), True
    q_expr = sp.Add(*[_rational(qi) * m for qi, m in zip(q, mons, strict=True)])
    rq = _snap(np.where(np.abs(q) <= 1e-10, 0.0, q), max_den)
    if rq is not None:
        cand = sp.Add(*[_rational(qi) * m for qi, m in zip(rq, mons, strict=True)])
        if _residual_of(hold, a_expr * sp.log(cand)) <= tol:
            q_expr = cand
    out = a_expr * sp.log(q_expr)
    if snapped and _residual_of(hold, out) > tol:
        return sigma, False
    return out, snapped


def discover_density(
    system: Any,
    samples: Any,
    basis: Any = None,
    params: Any = None,
    *,
    variables: Any = None,
    degree: int = 2,
    log_quadratic: bool | None = None,
    tol: float = 1e-8,
    max_denominator: int = 1000,
    holdout: float = 0.25,
    seed: int = 0,
    log_terms: bool = True,
) -> DensityFit:
    """Find an invariant density ``exp(sigma)`` with ``sigma`` in a function basis.

    Parameters
    ----------
    system : VectorField, EquationsOfMotion, ChaplyginSystem, ReducedChaplyginSystem, ...
        Converted with :func:`nhfast.analysis.sampling.as_vector_field`; the density refers to
        its coordinate volume (``ds dp`` for a Chaplygin system).
    samples : array_like, shape (n_samples, n_state), or callable ``sampler(vf)``
        Points where ``X[sigma] = -div X`` is imposed; use a few times more samples than
        basis functions (the log-quadratic stage has about ``(r+1)(r+2)`` unknowns).
    basis : sequence of sympy.Expr, LogTerm or str, optional
        Functions of the states (and params) for ``sigma`` (constants are dropped: they do
        not change the measure up to a factor).  A
        :class:`~nhfast.analysis.measure.LogTerm` (or the name of an observable of the
        system, read as ``LogTerm(name)``) is a structured candidate term, e.g.
        ``LogTerm("log_det_metric")``: its coefficient is fitted like any other, ``X[t]``
        comes from generated code (see ``LogTerm``), and the result's ``log_density`` holds
        the fit.  Default: monomials of degree ``1..degree`` in ``variables``, and with
        ``log_terms`` the ``log(P**2)`` terms; for a
        :class:`~nhfast.structured_field.StructuredVectorField` (whose SymPy form is not
        unrolled): its observables whose names start with ``log``.
    params : array_like, shape (n_params,) or (n_samples, n_params), optional
    variables : sequence of sympy.Symbol or "all", optional
        Coordinates of the default basis and of the quadratic form: default the shape
        coordinates (the first ``split`` states, else the first half).
    degree : int
        Degree of the default polynomial basis.
    log_quadratic : bool, optional
        Also try ``sigma = alpha log Q`` (see the module docstring).  Default: yes, unless
        the basis has structured terms or the field is structured.
    tol : float
        Relative residual below which a fit counts.
    max_denominator : int
        Largest denominator when snapping coefficients to rationals.
    holdout : float
        Fraction of samples kept out of the fit to verify the closed form.
    seed : int
        Seed of the hold-out split.
    log_terms : bool
        Add ``log(P**2)`` (``2 log|P|``) to the default basis for each variable ``P`` and each
        polynomial factor ``P`` of the right-hand side in ``variables`` (a term is left out
        if ``P`` vanishes at a sample, or if the samples are too few for it).

    Returns
    -------
    DensityFit

    Raises
    ------
    TypeError, ValueError
        Bad ``samples`` (see ``check_states``), ``basis`` (not expressions of the states and
        params), ``variables``, ``degree``, ``tol``, ``holdout``.
    """
    vf = as_vector_field(system)
    if callable(samples):
        samples = samples(vf)
    x, par = validate_states(system, samples, params, "samples")
    degree = positive_int(degree, "degree")
    if not (isinstance(tol, float | int) and 0 < tol < 1):
        raise ValueError(f"tol must be a number in (0, 1), got {tol!r}")
    if not (isinstance(holdout, float | int) and 0 < holdout < 1):
        raise ValueError(f"holdout must lie in (0, 1), got {holdout!r}")
    vars_ = _variables(vf, variables)
    fns = _basis(vf, basis, vars_, degree)
    structured = isinstance(vf, StructuredVectorField) or any(isinstance(f, LogTerm) for f in fns)
    if log_quadratic is None:
        log_quadratic = not structured
    n = x.shape[0]
    n_unknown = max(len(fns), 2 * len(monomials(vars_, 2, True)) if log_quadratic else 0)
    if n < 4 or int(n * (1 - holdout)) < n_unknown + 2:
        raise ValueError(
            f"samples: {n} states are too few for {n_unknown} unknowns; give at least "
            f"{int(np.ceil((n_unknown + 2) / (1 - holdout)))}"
        )
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    nh = max(2, int(round(holdout * n)))
    full = _Evaluator(vf, x, par)
    ev, hold = full.subset(perm[nh:]), full.subset(perm[:nh])
    if basis is None and log_terms and not structured:
        room = int(n * (1 - holdout)) - 2 - len(fns)
        fns = fns + _log_terms(full, vars_)[: max(room, 0)]

    div_scale = float(np.abs(full.div).max())
    if div_scale <= 1e3 * np.finfo(float).eps * (1 + np.abs(full.f).max()):
        return DensityFit(
            True, sp.Integer(0), sp.Integer(1), "constant", 0.0, 0.0, tol,
            statement="div X vanishes on the samples: the coordinate (Liouville) measure is "
            f"invariant (max |div X| = {div_scale:.1e})", basis=fns,
        )  # fmt: skip

    residuals: dict[str, float] = {}
    candidates = []
    fit_coef: np.ndarray | None = None
    basis_hres = float("nan")
    if fns:
        A_all = full.along(fns)  # one evaluation of the gradients on all samples
        sigma, res, snapped, nd, fit_coef, basis_hres = _fit_basis(
            ev, hold, fns, tol, max_denominator, (A_all[perm[nh:]], A_all[perm[:nh]])
        )
        residuals["basis"] = res
        candidates.append(("basis", sigma, res, snapped, nd))
    if log_quadratic and vars_:
        sigma, res, snapped, nd = _fit_log_quadratic(ev, hold, vars_, tol, max_denominator)
        residuals["log-quadratic"] = res
        if sigma is not None:
            candidates.append(("log-quadratic", sigma, res, snapped, nd))
    for kind, sigma, res, snapped, nd in candidates:
        if res <= tol:
            hres = basis_hres if kind == "basis" else _residual_of(hold, sigma)
            if hres <= tol:
                rho = sp.powsimp(sp.exp(sigma)) if kind == "basis" else _power(sigma)
                sing = _singular_factors(full, sigma)
                singular = [p for p, _ in sing]
                where = ""
                if sing:
                    where = "; singular: " + ", ".join(
                        f"rho ~ |{p}|**({e}) {'blows up' if e < 0 else 'vanishes'} on {p} = 0"
                        for p, e in sing
                    )
                log_density, coefficients = None, {}
                if kind == "basis" and fit_coef is not None:
                    coefficients = {
                        str(_symbolic(f)): float(c) for f, c in zip(fns, fit_coef, strict=True)
                    }
                    if structured:
                        log_density = _as_log_density(vf, fns, fit_coef)
                return DensityFit(
                    True, sigma, rho, kind, res, hres, tol, snapped, nd, residuals,
                    f"found ({kind}): rho = {_shown(rho)}, relative residual {res:.1e} (hold-out "
                    f"{hres:.1e}) <= {tol:.0e}{where}", fns, singular, log_density,
                    coefficients,
                )  # fmt: skip
    best = min((c[2] for c in candidates), default=np.inf)
    what = f"polynomials of degree <= {degree} in {', '.join(map(str, vars_))}"
    n_log = sum(isinstance(f, sp.log) for f in fns)
    if basis is None and n_log:
        what += f" plus {n_log} terms log|P| (P a variable or a factor of the right-hand side)"
    if basis is not None or structured:
        what = f"the {len(fns)} functions " + ", ".join(str(_symbolic(f)) for f in fns[:6])
        what += ", ..." if len(fns) > 6 else ""
    if log_quadratic:
        what += " or alpha log Q with Q quadratic in " + ", ".join(map(str, vars_))
    coefficients = {}
    if fit_coef is not None:
        coefficients = {str(_symbolic(f)): float(c) for f, c in zip(fns, fit_coef, strict=True)}
    return DensityFit(
        False, None, None, "", float(best), float("nan"), tol, False, 0, residuals,
        f"no invariant density exp(sigma) with sigma in {what}: smallest relative residual "
        f"{best:.2e} > {tol:.0e}", fns, coefficients=coefficients,
    )  # fmt: skip


def _as_log_density(vf: VectorField, fns: list[Any], coef: np.ndarray) -> LogDensity:
    """The fitted ``sigma`` as a LogDensity (SymPy members as NumPy callables)."""
    args = [*vf.states, *vf.params]
    terms = []
    for f, c in zip(fns, coef, strict=True):
        if c == 0:
            continue
        if not isinstance(f, LogTerm):
            rows = numpy_rows(args, [f])
            f = LogTerm(lambda x, p, rows=rows: rows(x, p)[:, 0], label=str(f))
        terms.append((float(c), f))
    return LogDensity(terms or [(0.0, fns[0])])


def _log_terms(ev: _Evaluator, vars_: list[sp.Symbol]) -> list[sp.Expr]:
    """``log(P**2)`` for each variable and each polynomial factor of the right-hand side in
    ``vars_`` (no expansion or factorisation: the factors as the expressions hold them), kept
    only where ``P`` is nonzero at every sample and ``X[log P**2]`` is finite there."""
    vset = set(vars_)
    factors: list[sp.Expr] = list(vars_)
    seen = {sp.expand(v) for v in vars_}
    for e in ev.vf.rhs:
        for f in sp.Mul.make_args(e):
            base = f.base if isinstance(f, sp.Pow) else f
            if not base.free_symbols or not base.free_symbols <= vset:
                continue
            if base.is_number or not base.is_polynomial(*vars_):
                continue
            key = sp.expand(base)
            if key in seen or sp.expand(-base) in seen:
                continue
            seen.add(key)
            factors.append(base)
            if len(factors) >= 3 * len(vars_) + 4:
                break
    if not factors:
        return []
    vals = ev.values(factors)
    terms = [sp.log(p**2) for p in factors]
    with np.errstate(all="ignore"):
        der = ev.along(terms)
    ok = np.all(vals != 0, axis=0) & np.all(np.isfinite(der), axis=0)
    return [t for t, k in zip(terms, ok, strict=True) if k]


def _singular_factors(ev: _Evaluator, sigma: sp.Expr) -> list[tuple[sp.Expr, sp.Expr]]:
    """Factors ``P`` of ``exp(sigma)`` (inside its logarithms) that change sign or vanish on
    the samples, or come within ``1e-3`` of their largest size to zero, each with its exponent
    ``e`` (``rho ~ |P|**e`` near ``P = 0``)."""
    states = set(ev.vf.states)
    expo: dict[sp.Expr, sp.Expr] = {}
    for term in sp.Add.make_args(sigma):
        coeff, rest = term.as_independent(*states)
        if not isinstance(rest, sp.log):
            continue
        num, den = sp.fraction(sp.together(rest.args[0]))
        for part, sign in ((num, 1), (den, -1)):
            facs = [(part, 1)]
            # factor only small exact polynomials (factoring floats, or many terms, can take
            # minutes); a part left whole counts as singular when it nearly vanishes below
            if not part.has(sp.Float) and len(sp.Add.make_args(sp.expand(part))) <= 12:
                try:
                    facs = sp.factor_list(part)[1]
                except (sp.PolynomialError, sp.CoercionFailed, NotImplementedError):
                    pass
            for f, m in facs:
                if not (f.free_symbols & states):
                    continue
                key = next((q for q in expo if sp.expand(f - q) == 0 or sp.expand(f + q) == 0), f)
                expo[key] = expo.get(key, sp.Integer(0)) + coeff * m * sign
    out = []
    for p, e in expo.items():
        if e == 0:
            continue
        with np.errstate(all="ignore"):
            v = ev.values([p])[:, 0]
        a = np.abs(v[np.isfinite(v)])
        near_zero = a.size > 0 and a.min() < 1e-3 * a.max()
        if np.any(v == 0) or (np.nanmin(v) < 0 < np.nanmax(v)) or near_zero:
            out.append((p, _readable_exponent(e)))
    return out


def _readable_exponent(e: sp.Expr) -> sp.Expr:
    """A float exponent as a small rational when it is one (to ``1e-9``), else as a float of
    six significant digits (never SymPy's guess of radicals for an arbitrary float)."""
    if not isinstance(e, sp.Float):
        return e
    fr = _snap(np.array([float(e)]), 1000)
    return _rational(fr[0]) if fr is not None else sp.Float(float(f"{float(e):.6g}"), 6)


def _power(sigma: sp.Expr) -> sp.Expr:
    """``alpha log Q -> Q**alpha``."""
    alpha, lg = sigma.as_coeff_Mul()
    if isinstance(lg, sp.log):
        return lg.args[0] ** alpha
    return sp.exp(sigma)


def _variables(vf: VectorField, variables: Any) -> list[sp.Symbol]:
    if variables is None:
        k = vf.split if vf.split is not None else vf.n_state // 2
        return list(vf.states[:k])
    if isinstance(variables, str):
        if variables != "all":
            raise ValueError(f"variables must be a list of states or 'all', got {variables!r}")
        return list(vf.states)
    out = list(variables)
    bad = [v for v in out if v not in set(vf.states)]
    if bad or not out:
        raise ValueError(
            f"variables must be states of the system ({', '.join(map(str, vf.states))}), "
            f"got {', '.join(map(str, bad)) or 'none'}"
        )
    return out


def _basis(vf: VectorField, basis: Any, vars_: list[sp.Symbol], degree: int) -> list[Any]:
    if basis is None:
        if isinstance(vf, StructuredVectorField):
            logs = [LogTerm(k) for k in (vf.observables or {}) if k.startswith("log")]
            if not logs:
                raise ValueError(
                    f"{vf.name!r} is structured and has no log observable: give a basis "
                    "(LogTerm objects or SymPy functions of a few states)"
                )
            return logs
        return monomials(vars_, degree)
    if isinstance(basis, (str, LogTerm)) or not np.iterable(basis):
        basis = [basis]
    names = set(vf.observables or {})
    out: list[tuple[int, Any]] = []
    fns = []
    for k, b in enumerate(basis):
        if isinstance(b, LogTerm) or (isinstance(b, str) and b in names):
            out.append((k, b if isinstance(b, LogTerm) else LogTerm(b)))
            continue
        try:
            fns.append((k, sp.sympify(b)))
        except (TypeError, sp.SympifyError) as exc:
            raise TypeError(
                f"basis[{k}] must be a SymPy expression, a LogTerm or an observable name: {exc}"
            ) from None
    known = set(vf.states) | set(vf.params)
    for k, f in fns:
        if not isinstance(f, sp.Expr):
            raise TypeError(f"basis[{k}] must be a scalar expression, got {f!r}")
        extra = f.free_symbols - known
        if extra:
            raise ValueError(
                f"basis[{k}] = {f} uses {', '.join(sorted(map(str, extra)))}, which are "
                "neither states nor params"
            )
        if not (f.free_symbols & set(vf.states)):
            continue  # constants do not change the measure up to a factor
        out.append((k, f))
    if not out:
        raise ValueError("basis contains no function of the states")
    return [f for _, f in sorted(out, key=lambda kf: kf[0])]
