"""Chaplygin reduction objects: gyroscopic coefficients, Theta, invariant measure, phi-simplicity,
Hamiltonisation (García-Naranjo and Marrero 2020, Sections 3.3-3.5).

Conventions (checked against the paper):

* ``C[i, j, k] = C^k_ij`` with ``P[hor d_i, hor d_j] = C^k_ij hor d_k`` (3.6).
* ``Theta = C^j_ji ds^i`` (3.27), i.e. ``Theta_i = sum_j C[j, i, j]`` -- mind the index order,
  the other order flips the sign of ``sigma``.
* Theorem 3.11: the basic measure ``exp(sigma) ds dp`` is invariant iff ``Theta = d sigma``
  (density ``exp(+sigma)``).
* phi-simple (Definition 3.19, (3.39)): ``C^k_ij = delta^k_i d_j phi - delta^k_j d_i phi``.
  Then ``Theta = (r - 1) d phi`` (Theorem 3.21(ii)).
* Hamiltonisation (Corollary 3.22 made explicit): ``dt = exp(-phi) dtau``,
  ``ptilde = exp(phi) p``, ``Htilde(s, ptilde) = H(s, exp(-phi) ptilde)``; in ``tau`` the
  equations are canonical in ``(s, ptilde)``.

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited".
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy as sp

from nhfast.symbolic._rational import (
    closed_form_defects,
    denominator_factors,
    derivative,
    is_rational,
    normal,
)
from nhfast.symbolic._util import (
    Simplifier,
    as_expr,
    as_symbol_list,
    fresh_symbols,
    is_zero,
    simplifier,
)
from nhfast.symbolic.equations import EquationsOfMotion, Inverse, inverse_or_solve

__all__ = [
    "gyroscopic_coefficients",
    "gyroscopic_tensor_vanishes",
    "theta_form",
    "MeasureResult",
    "invariant_measure",
    "PhiSimpleResult",
    "phi_simple",
    "HamiltonisedSystem",
    "hamiltonise",
    "reducing_multiplier",
]


def reduced_system(system: Any) -> Any:
    """The :class:`ReducedChaplyginSystem` of a Chaplygin system (itself if already reduced).

    Raises
    ------
    TypeError
        If ``system`` is neither.
    """
    from nhfast.symbolic.systems import ChaplyginSystem, ReducedChaplyginSystem

    if isinstance(system, ChaplyginSystem):
        return system.reduce()
    if isinstance(system, ReducedChaplyginSystem):
        return system
    raise TypeError(
        f"system must be a ChaplyginSystem or ReducedChaplyginSystem, got {type(system).__name__}"
    )


def gyroscopic_coefficients(system: Any, simplify: Simplifier = True) -> sp.NDimArray:
    """Gyroscopic coefficients ``C[i, j, k] = C^k_ij(s)`` ((3.6)).

    Parameters
    ----------
    system : ChaplyginSystem or ReducedChaplyginSystem
    simplify : bool or callable

    Returns
    -------
    sympy.NDimArray
        Shape ``(r, r, r)``.
    """
    return reduced_system(system).C


def gyroscopic_tensor_vanishes(C: sp.NDimArray) -> bool:
    """True when every ``C^k_ij`` is identically zero (``T = 0``).

    Parameters
    ----------
    C : sympy.NDimArray
        Gyroscopic coefficients ``C[i, j, k] = C^k_ij`` (:func:`gyroscopic_coefficients`).

    Returns
    -------
    bool
    """
    return all(is_zero(c) for c in sp.flatten(C))


def is_skew_symmetric(C: sp.NDimArray) -> bool:
    """True when ``C^k_ij = -C^k_ji`` exactly (Prop. 3.4)."""
    r = C.shape[0]
    return all(
        is_zero(C[i, j, k] + C[j, i, k]) for i in range(r) for j in range(i, r) for k in range(r)
    )


def theta_form(C: sp.NDimArray, simplify: Simplifier = True) -> list[sp.Expr]:
    """Components ``Theta_i = sum_j C^j_ji`` of the 1-form (3.27).

    Parameters
    ----------
    C : sympy.NDimArray
        ``C[i, j, k] = C^k_ij``.
    simplify : bool or callable

    Returns
    -------
    list of sympy.Expr
    """
    simp = simplifier(simplify)
    r = C.shape[0]
    return [simp(sum((C[j, i, j] for j in range(r)), sp.Integer(0))) for i in range(r)]


def exterior_derivative(
    form: Sequence[Any], s: Sequence[sp.Symbol], simplify: Simplifier = True
) -> sp.Matrix:
    """``(d alpha)_ij = d_i alpha_j - d_j alpha_i`` of a 1-form ``alpha = alpha_i ds^i``.

    Parameters
    ----------
    form : list of sympy.Expr
        Components ``alpha_i``.
    s : list of sympy.Symbol
        Coordinates.
    simplify : bool or callable

    Returns
    -------
    sympy.Matrix
        Antisymmetric ``r x r`` matrix.
    """
    s = as_symbol_list(s, "s")
    if len(form) != len(s):
        raise ValueError(f"form must have {len(s)} components, got {len(form)}")
    simp = simplifier(simplify)
    r = len(s)
    out = sp.zeros(r, r)
    for i in range(r):
        for j in range(i + 1, r):
            out[i, j] = simp(sp.diff(form[j], s[i]) - sp.diff(form[i], s[j]))
            out[j, i] = -out[i, j]
    return out


def is_closed(form: Sequence[Any], s: Sequence[sp.Symbol]) -> bool:
    """True when ``d alpha = 0`` identically."""
    return all(is_zero(e) for e in exterior_derivative(form, s, simplify=False))


def _generic_branch(expr: sp.Expr) -> sp.Expr:
    """Replace each Piecewise by its generic branch (first branch whose condition is not an Eq)."""

    def pick(pw: sp.Piecewise) -> sp.Expr:
        for e, cond in pw.args:
            if not isinstance(cond, sp.Equality):
                return e
        return pw.args[-1][0]

    return expr.replace(lambda x: isinstance(x, sp.Piecewise), pick)


def integrate_exact_form(
    form: Sequence[Any], s: Sequence[sp.Symbol], simplify: Simplifier = True
) -> sp.Expr:
    """A function ``sigma`` with ``d sigma = alpha``, verified by differentiating back.

    Integrates ``alpha_1`` in ``s^1``, then the remainder of ``alpha_2`` in ``s^2``, etc.
    (``sympy.integrate``); the additive constant is arbitrary.

    Parameters
    ----------
    form : list of sympy.Expr
    s : list of sympy.Symbol
    simplify : bool or callable

    Returns
    -------
    sympy.Expr

    Raises
    ------
    ValueError
        If the form is not closed or the result does not verify.
    """
    s = as_symbol_list(s, "s")
    if not is_closed(form, s):
        raise ValueError("form is not closed (d alpha != 0), so it has no potential")
    simp = simplifier(simplify)
    sigma = sp.Integer(0)
    for i, si in enumerate(s):
        rem = simp(sp.sympify(form[i]) - sp.diff(sigma, si))
        if rem != 0:
            # cancel: sympy returns e.g. (a3 - a1) log(c) / (2 (a1 - a3)), which is 0/0 at
            # a1 = a3 although the potential is fine there
            sigma = sigma + _generic_branch(sp.cancel(sp.integrate(rem, si)))
    sigma = simp(sigma)
    for i, si in enumerate(s):
        if not is_zero(sp.diff(sigma, si) - form[i]):
            raise ValueError(
                f"could not integrate the form: verification failed in component {i} ({si})"
            )
    return sigma


@dataclass
class MeasureResult:
    """Outcome of the basic-invariant-measure test (Theorem 3.11).

    Attributes
    ----------
    theta : list of sympy.Expr
        ``Theta_i``.
    d_theta : sympy.Matrix
        ``d Theta``.
    exact : bool
        Whether ``Theta`` is closed (locally exact).
    sigma : sympy.Expr or None
        ``Theta = d sigma`` when found.
    density : sympy.Expr or None
        ``exp(sigma)``, the density w.r.t. ``ds dp`` (momenta, not velocities), with the logs
        of ``sigma`` taken of absolute values: real on the whole chart
        (:func:`real_density`).
    reason : str
        Why there is no basic measure, or ``""``.
    """

    theta: list
    d_theta: sp.Matrix
    exact: bool
    sigma: sp.Expr | None = None
    density: sp.Expr | None = None
    reason: str = ""


def invariant_measure(system: Any, simplify: Simplifier = True) -> MeasureResult:
    """Test for a basic invariant measure ``exp(sigma) ds dp`` (Theorem 3.11).

    Parameters
    ----------
    system : ChaplyginSystem or ReducedChaplyginSystem
    simplify : bool or callable

    Returns
    -------
    MeasureResult
    """
    red = reduced_system(system)
    if simplify is True or simplify is False or simplify is None:
        fast = _rational_measure(red)
        if fast is not None:
            return fast
    th = theta_form(red.C, simplify=simplify)
    dth = exterior_derivative(th, red.s, simplify=simplify)
    if not all(is_zero(e) for e in dth):
        bad = next(
            (i, j)
            for i in range(red.rank)
            for j in range(i + 1, red.rank)
            if not is_zero(dth[i, j])
        )
        return MeasureResult(th, dth, False, reason=f"d Theta != 0: component {bad} = {dth[bad]}")
    try:
        sigma = integrate_exact_form(th, red.s, simplify=simplify)
    except ValueError as exc:
        return MeasureResult(th, dth, True, reason=str(exc))
    return MeasureResult(th, dth, True, sigma=sigma, density=real_density(sigma))


def _rational_measure(red: Any) -> MeasureResult | None:
    """:func:`invariant_measure` for gyroscopic coefficients rational in ``s`` and the
    parameters, without simplification: ``Theta`` in the gcd-free normal form of
    :mod:`nhfast.symbolic._rational`, ``d Theta = 0`` decided exactly there, and ``sigma``
    sought as ``sum_k c_k log f_k`` over the irreducible factors ``f_k`` of the
    denominators of ``Theta`` (constants ``c_k`` from exact values at rational points,
    then verified symbolically).  None where that does not apply (the caller then takes the
    general route); the result is the same measure."""
    C, s, r = red.C, list(red.s), red.rank
    if not all(is_rational(c) for c in sp.flatten(C)):
        return None
    th = [normal(sp.Add(*[C[j, i, j] for j in range(r)])) for i in range(r)]
    defects = closed_form_defects(th, s)
    if defects is None:  # pragma: no cover - th is rational when C is
        return None
    dth = sp.zeros(r, r)
    for (i, j), e in defects.items():
        dth[i, j], dth[j, i] = e, -e
    bad = min(defects, default=None)
    if bad is not None:
        return MeasureResult(th, dth, False, reason=f"d Theta != 0: component {bad} = {dth[bad]}")
    if all(t == 0 for t in th):
        return MeasureResult(th, dth, True, sigma=sp.Integer(0), density=sp.Integer(1))
    factors: list[sp.Expr] = []
    for t in th:
        for b in denominator_factors(t):
            for f, _ in sp.factor_list(b)[1]:
                if f.free_symbols & set(s) and f not in factors and -f not in factors:
                    factors.append(f)
    if not factors:
        return None
    logd = [[normal(derivative(f, x) / f) for f in factors] for x in s]
    symbols = sorted(set().union(*(t.free_symbols for t in th)) | set(s), key=str)
    rows, rhs = [], []
    rng = random.Random(5)
    tries = 0
    while len(rows) < len(factors) + 2 * r and tries < 20 * (len(factors) + 2):
        tries += 1
        pt = {x: sp.Rational(rng.randint(1, 60), rng.randint(61, 97)) for x in symbols}
        if any(f.xreplace(pt) == 0 for f in factors):
            continue
        try:
            vals = [[ld.xreplace(pt) for ld in row] for row in logd]
            tv = [t.xreplace(pt) for t in th]
        except ZeroDivisionError:  # pragma: no cover - a pole of a factor's derivative
            continue
        if any(not v.is_Rational for v in [*tv, *sp.flatten(vals)]):
            continue
        rows += vals
        rhs += tv
    try:
        sol, free = sp.Matrix(rows).gauss_jordan_solve(sp.Matrix(rhs))
    except ValueError:  # inconsistent: Theta is not a sum of logarithmic derivatives
        return None
    if free.shape[0]:
        sol = sol.xreplace({x: 0 for x in free})
    coef = list(sol)
    for i in range(r):
        check = th[i] - sp.Add(*[c * ld for c, ld in zip(coef, logd[i], strict=True)])
        if normal(check) != 0:
            return None
    sigma = sp.Add(*[c * sp.log(f) for c, f in zip(coef, factors, strict=True) if c != 0])
    return MeasureResult(th, dth, True, sigma=sigma, density=real_density(sigma))


def real_density(sigma: Any) -> sp.Expr:
    """``exp(sigma)`` with every ``log(u)`` in ``sigma`` taken as ``log|u|``.

    ``sympy.integrate`` writes a potential of ``du / u`` as ``log(u)``, which is complex where
    ``u < 0``; ``log|u|`` has the same differential wherever ``u != 0``, so its exponential is
    a density of the same measure, real on the whole chart whatever the sign of ``u`` there
    (a ``u`` SymPy knows to be positive is left as it is).

    Parameters
    ----------
    sigma : sympy.Expr
        A potential of ``Theta``.

    Returns
    -------
    sympy.Expr
    """
    real = sp.sympify(sigma).replace(sp.log, lambda u: sp.log(sp.Abs(u)))
    return sp.exp(real)


@dataclass
class PhiSimpleResult:
    """Outcome of the phi-simplicity test (Definition 3.19).

    Attributes
    ----------
    phi : sympy.Expr or None
        ``phi`` with ``C^k_ij = delta^k_i d_j phi - delta^k_j d_i phi``, if found.
    gradient : list of sympy.Expr or None
        The candidate ``d_j phi`` read off from ``C^i_ij``.
    reason : str
        Why the system is not phi-simple (empty when it is).
    """

    phi: sp.Expr | None
    gradient: list | None = None
    reason: str = ""

    @property
    def is_phi_simple(self) -> bool:
        """True when ``phi`` was found."""
        return self.phi is not None


def phi_simple(system: Any, simplify: Simplifier = True) -> PhiSimpleResult:
    """Decide phi-simplicity and return ``phi`` or a reason.

    Reads ``d_j phi = C^i_ij`` (any ``i != j``), checks the full identity
    ``C^k_ij = delta^k_i d_j phi - delta^k_j d_i phi`` (this contains hypothesis (H):
    ``C^k_ij = 0`` for distinct ``i, j, k`` and ``C^j_ij`` independent of ``j``), checks that the
    candidate gradient is closed, and integrates it.

    Parameters
    ----------
    system : ChaplyginSystem or ReducedChaplyginSystem
    simplify : bool or callable

    Returns
    -------
    PhiSimpleResult
    """
    red = reduced_system(system)
    simp = simplifier(simplify)
    C, s, r = red.C, red.s, red.rank
    if r < 2:
        return PhiSimpleResult(
            None, None, "r < 2: the gyroscopic tensor is trivially zero; any constant phi"
        )
    grad = [simp(C[1 if j == 0 else 0, j, 1 if j == 0 else 0]) for j in range(r)]
    for i in range(r):
        for j in range(r):
            for k in range(r):
                expect = (grad[j] if k == i else 0) - (grad[i] if k == j else 0)
                if not is_zero(C[i, j, k] - expect):
                    distinct = len({i, j, k}) == 3
                    why = (
                        "hypothesis (H) fails: C^k_ij != 0 for distinct i, j, k"
                        if distinct
                        else (
                            "C^j_ij depends on j (hypothesis (H) fails)"
                            if k in (i, j)
                            else "identity fails"
                        )
                    )
                    return PhiSimpleResult(
                        None, grad, f"not phi-simple: {why} at (i, j, k) = ({i}, {j}, {k})"
                    )
    if not is_closed(grad, s):
        return PhiSimpleResult(
            None, grad, "not phi-simple: the candidate d phi = (C^i_ij)_j is not closed"
        )
    try:
        phi = integrate_exact_form(grad, s, simplify=simplify)
    except ValueError as exc:
        return PhiSimpleResult(None, grad, f"phi-simple but phi could not be integrated: {exc}")
    return PhiSimpleResult(phi, grad, "")


def phi_simple_residuals(system: Any, phi: Any) -> dict[tuple[int, int, int], sp.Expr]:
    """Residuals of the phi-simple identity (Definition 3.19, (1.5)/(3.39)) for a given ``phi``.

    ``T(Y, Z) = Z[phi] Y - Y[phi] Z`` with ``T(d_i, d_j) = C^k_ij d_k`` reads
    ``C^k_ij = delta^k_i d_j phi - delta^k_j d_i phi``; by skew-symmetry only ``i < j`` is needed.

    Parameters
    ----------
    system : ChaplyginSystem or ReducedChaplyginSystem
    phi : sympy.Expr
        A function of the shape coordinates (and parameters).

    Returns
    -------
    dict
        ``{(i, j, k): C^k_ij - (delta^k_i d_j phi - delta^k_j d_i phi)}`` for ``i < j``
        (unsimplified; 0-based indices into ``system.s``).
    """
    red = reduced_system(system)
    phi = as_expr(phi, "phi")
    s, r = red.s, red.rank
    grad = [sp.diff(phi, x) for x in s]
    out = {}
    for i in range(r):
        for j in range(i + 1, r):
            for k in range(r):
                expect = (grad[j] if k == i else 0) - (grad[i] if k == j else 0)
                out[(i, j, k)] = red.C[i, j, k] - expect
    return out


def _generic_points(
    symbols: Sequence[sp.Symbol], count: int, seed: int = 0
) -> list[dict[sp.Symbol, sp.Rational]]:
    """``count`` reproducible generic rational points, respecting sign assumptions.

    Values are small (at most ``1/(len(symbols) + 2)`` in size), so that chart domains such as
    ``1 - |s|^2 > 0`` hold; positive (negative) symbols get positive (negative) values, other
    real symbols either sign.
    """
    rng = random.Random(seed)
    scale = 10 * (len(symbols) + 2)
    pts = []
    for _ in range(count):
        pt = {}
        for x in symbols:
            v = sp.Rational(rng.randint(1, 9), scale + rng.randint(0, 13))
            if x.is_negative or (not (x.is_positive or x.is_nonnegative) and rng.random() < 0.5):
                v = -v
            pt[x] = v
        pts.append(pt)
    return pts


_Point = dict[sp.Symbol, sp.Rational]


def _value_at(expr: sp.Expr, point: _Point) -> sp.Expr | None:
    """``expr`` at ``point``, exactly simplified; None where it is undefined or not real."""
    v = sp.sympify(expr).xreplace(point).doit()
    if v.free_symbols:
        return None
    try:
        v = sp.radsimp(sp.cancel(sp.expand(v)))
    except (TypeError, ValueError, NotImplementedError, ZeroDivisionError):
        return None
    if v.has(sp.zoo, sp.nan, sp.oo, -sp.oo):
        return None
    num = v.evalf(60)
    if not num.is_number or not num.is_finite or num.as_real_imag()[1] != 0:
        return None
    return v


def _vanishes_generically(
    expr: sp.Expr, points: list[_Point], extra: list[_Point]
) -> tuple[bool, _Point | None, sp.Expr | None]:
    """Zero test exactly at generic rational points (a nonzero value refutes).

    ``points`` are tried first; ``extra`` replace points where ``expr`` is undefined or not
    real.  Returns ``(vanishes, point, value)``; ``point``/``value`` witness a nonzero residual.
    A value counts as zero if it simplifies to 0 exactly, or (transcendental constants such as
    ``sin(1/7)``) is below ``1e-40`` in 60-digit arithmetic.  Without a usable point the full
    symbolic test :func:`~nhfast.symbolic._util.is_zero` decides.
    """
    e = sp.sympify(expr)
    if e == 0:
        return True, None, None
    used = 0
    for pt in [*points, *extra]:
        v = _value_at(e, pt)
        if v is None:
            continue
        used += 1
        if v != 0 and abs(v.evalf(60)) > sp.Float("1e-40", 60):
            return False, pt, v
        if used >= len(points):
            break
    if used == 0:  # no usable point: decide symbolically
        return is_zero(e), None, None
    return True, None, None


def verify_phi(system: Any, phi: Any, name: str = "phi") -> str:
    """Verify ``C^k_ij = delta^k_i d_j phi - delta^k_j d_i phi`` for a user-supplied ``phi``.

    Every residual of :func:`phi_simple_residuals` is first tested symbolically by cheap
    normal forms (``expand``, ``cancel``); one that does not reduce to 0 is evaluated exactly at
    four generic rational points of the shape coordinates and parameters (respecting their sign
    assumptions).  A nonzero value at any point refutes ``phi``.

    Parameters
    ----------
    system : ChaplyginSystem or ReducedChaplyginSystem
    phi : sympy.Expr
    name : str
        Argument name used in the error message.

    Returns
    -------
    str
        How the identity was verified (``"symbolically"`` or ``"exactly at generic rational
        points"``).

    Raises
    ------
    TypeError
        ``phi`` is not a SymPy expression.
    ValueError
        ``phi`` uses symbols that are neither shape coordinates nor parameters, or the identity
        fails; the message names the failing ``(i, j, k)`` and the residual.
    """
    red = reduced_system(system)
    phi = as_expr(phi, name)
    extra_syms = phi.free_symbols - set(red.s) - set(red.params)
    if extra_syms:
        raise ValueError(
            f"{name} uses {', '.join(sorted(map(str, extra_syms)))}, which are neither shape "
            f"coordinates ({', '.join(map(str, red.s))}) nor parameters"
        )
    if red.rank < 2:
        return "symbolically"
    residuals = phi_simple_residuals(red, phi)
    symbols = [*red.s, *red.params]
    points = _generic_points(symbols, 4)
    extra = _generic_points(symbols, 12, seed=1)
    how = "symbolically"
    for (i, j, k), res in residuals.items():
        quick = sp.sympify(res)
        for step in (sp.expand, sp.cancel):
            if quick == 0:
                break
            try:
                quick = step(quick)
            except (TypeError, ValueError, NotImplementedError):  # pragma: no cover
                break
        if quick == 0:
            continue
        ok, pt, val = _vanishes_generically(quick, points, extra)
        if ok:
            how = "exactly at generic rational points"
            continue
        s = red.s
        try:
            shown = sp.factor(sp.cancel(quick))
        except (TypeError, ValueError, NotImplementedError):  # pragma: no cover
            shown = quick
        where = f" (= {sp.N(val, 6)} at {pt})" if pt is not None else ""
        raise ValueError(
            f"{name}: the system is not phi-simple with this {name} (Definition 3.19): "
            f"C^k_ij - (delta^k_i d_j {name} - delta^k_j d_i {name}) = {shown} != 0 at "
            f"(i, j, k) = ({i}, {j}, {k}) (s^i = {s[i]}, s^j = {s[j]}, s^k = {s[k]}){where}; "
            f"call phi_simple(system) to find phi, or to learn why there is none"
        )
    return how


@dataclass
class HamiltonisedSystem:
    """Hamiltonised Chaplygin system (Theorem 3.21 / Corollary 3.22, made explicit).

    Attributes
    ----------
    q : list of sympy.Symbol
        Shape coordinates ``s``.
    p : list of sympy.Symbol
        Darboux momenta ``ptilde = exp(phi) p``.
    hamiltonian : sympy.Expr
        ``Htilde(s, ptilde) = H(s, exp(-phi) ptilde)`` (may use ``solves`` unknowns).
    phi : sympy.Expr
    time_factor : sympy.Expr
        ``dt/dtau = exp(-phi)``.
    rhs : list of sympy.Expr
        ``ds/dtau = dHtilde/dptilde``, ``dptilde/dtau = -dHtilde/ds``.
    params : list of sympy.Symbol
    solves : list of LinearSolve
    """

    q: list
    p: list
    hamiltonian: sp.Expr
    phi: sp.Expr
    time_factor: sp.Expr
    rhs: list
    params: list
    solves: list = field(default_factory=list)

    def equations(self) -> EquationsOfMotion:
        """The tau-time equations as :class:`EquationsOfMotion` (canonical in ``(q, p)``)."""
        return EquationsOfMotion(
            states=[*self.q, *self.p],
            rhs=list(self.rhs),
            params=list(self.params),
            energy=self.hamiltonian,
            constraints=None,
            observables={"time_factor": self.time_factor, "phi": self.phi},
            solves=list(self.solves),
            kind="hamiltonised",
        )

    def as_vector_field(self) -> Any:
        """Shortcut for ``self.equations().as_vector_field()``."""
        return self.equations().as_vector_field()

    def as_hamiltonian_system(self) -> Any:
        """``nhfast.vectorfield.HamiltonianSystem(q, p, Htilde)`` for symplectic integrators.

        The independent variable is ``tau``; ``time_factor`` (``dt/dtau``) and ``phi`` are
        passed as observables.  Lazy import; requires explicit equations (no ``solves``).
        """
        if self.solves:
            raise ValueError(
                "system: the Hamiltonian uses auxiliary linear solves (see .solves); "
                "use hamiltonise(..., inverse='symbolic') or .as_vector_field()"
            )
        from nhfast.vectorfield import HamiltonianSystem

        return HamiltonianSystem(
            self.q,
            self.p,
            self.hamiltonian,
            params=self.params,
            observables={"time_factor": self.time_factor, "phi": self.phi},
            name="hamiltonised",
        )


def hamiltonise(
    system: Any,
    phi: Any = None,
    momenta: Sequence[sp.Symbol] | None = None,
    inverse: Inverse = "auto",
    simplify: Simplifier = True,
) -> HamiltonisedSystem:
    """Canonical Hamiltonian system in ``tau`` for a phi-simple Chaplygin system.

    Parameters
    ----------
    system : ChaplyginSystem or ReducedChaplyginSystem
    phi : sympy.Expr, optional
        If omitted, :func:`phi_simple` is called; a ``ValueError`` (with its reason) is raised
        when the system is not phi-simple.  If given, it is verified with :func:`verify_phi`
        (``C^k_ij = delta^k_i d_j phi - delta^k_j d_i phi``) and a ``ValueError`` naming the
        failing ``(i, j, k)`` and the residual is raised when it does not hold.
    momenta : list of sympy.Symbol, optional
        Names for ``ptilde``.
    inverse : {"auto", "symbolic", "solve"}
    simplify : bool or callable

    Returns
    -------
    HamiltonisedSystem

    Raises
    ------
    ValueError
        The system is not phi-simple, or not with the given ``phi``.
    """
    red = reduced_system(system)
    simp = simplifier(simplify)
    if phi is None:
        res = phi_simple(red, simplify=simplify)
        if not res.is_phi_simple:
            raise ValueError(f"system: cannot Hamiltonise, {res.reason}")
        phi = res.phi
    else:
        phi = as_expr(phi, "phi")
        verify_phi(red, phi)
    s, K, r = red.s, red.K, red.rank
    taken = {str(x) for x in (*s, *red.params)}
    if momenta is None:
        pt = fresh_symbols([f"pt_{x}" for x in s], taken)
    else:
        pt = as_symbol_list(momenta, "momenta")
        if len(pt) != r:
            raise ValueError(f"momenta must have {r} symbols, got {len(pt)}")
    ptv = sp.Matrix(pt)
    w, solves = inverse_or_solve(
        K, ptv, inverse, [f"w_{i + 1}" for i in range(r)], taken | {str(x) for x in pt}, simp
    )
    e2 = sp.exp(-2 * phi)
    kin = (ptv.T * w)[0, 0]
    U = red.potential
    htilde = simp(sp.Rational(1, 2) * e2 * kin + U)
    sdot = [simp(e2 * w[i]) for i in range(r)]
    pdot = []
    for sa in s:
        dH = (
            -sp.diff(phi, sa) * e2 * kin
            - sp.Rational(1, 2) * e2 * (w.T * K.diff(sa) * w)[0, 0]
            + sp.diff(U, sa)
        )
        pdot.append(simp(-dH))
    return HamiltonisedSystem(
        q=list(s),
        p=pt,
        hamiltonian=htilde,
        phi=phi,
        time_factor=sp.exp(-phi),
        rhs=[*sdot, *pdot],
        params=list(red.params),
        solves=solves,
    )


def reducing_multiplier(system: Any, simplify: Simplifier = True) -> HamiltonisedSystem:
    """Chaplygin's reducing multiplier for a rank-2 Chaplygin system.

    For ``r = 2`` a basic invariant measure ``exp(sigma) ds dp`` (Theorem 3.11,
    ``Theta = d sigma``) is all that is needed: with ``phi = sigma / (r - 1) = sigma`` the
    system is phi-simple (Corollary 3.25: for r = 2, phi-simple iff Theta is exact) and the
    time change ``dt = exp(-phi) dtau`` with ``ptilde = exp(phi) p`` makes it Hamiltonian
    (Theorem 3.21).

    Parameters
    ----------
    system : ChaplyginSystem or ReducedChaplyginSystem
    simplify : bool or callable

    Returns
    -------
    HamiltonisedSystem

    Raises
    ------
    ValueError
        If ``r != 2`` or the system has no basic invariant measure (with the reason).
    """
    red = reduced_system(system)
    if red.rank != 2:
        raise ValueError(f"system: the reducing multiplier needs rank r = 2, got r = {red.rank}")
    measure = invariant_measure(red, simplify=simplify)
    if measure.sigma is None:
        raise ValueError(f"system: no basic invariant measure, so no multiplier: {measure.reason}")
    return hamiltonise(red, phi=measure.sigma, simplify=simplify)
