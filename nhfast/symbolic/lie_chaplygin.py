"""Chaplygin systems given by Lie-algebra data: horizontal lifts as algebra-valued functions of the
shape variables and a metric on the algebra (García-Naranjo & Marrero 2020, Section 4.2).

The configuration space is a matrix Lie group ``Q = G`` with velocities left-trivialised
(``T_g G = g``), a symmetry group acting on the left and the shape map ``pi: G -> S``.  A vector
field invariant under the left action has a left trivialisation that depends on ``g`` only
through ``s = pi(g)``, so the horizontal lifts ``X_k = hor d/ds^k`` are algebra-valued functions
``X_k(s)`` ((4.11) for the Veselova body: ``X_k = gamma ^ u_k``).  From them:

* the reduced metric ``K_kl = <<X_k, X_l>>`` ((3.19); (4.12) for Veselova);
* the bracket of left-trivialised fields ``[Y, Z] = [Y, Z]_g + Y[Z] - Z[Y]`` (the proof of
  Lemma 4.5 in Appendix B.1, (B.1)), where ``Y[Z]`` is the derivative of ``Z(s)`` along the
  shape vector ``pi_* Y``.  For the lifts themselves ``pi_* X_i = d/ds^i``, hence
  ``X_i[Z] = dZ/ds^i`` and ``[X_i, X_j] = [X_i, X_j]_g + dX_j/ds^i - dX_i/ds^j``;
* ``B_ijl = <<[X_i, X_j], X_l>>`` ((4.13) for Veselova) and the gyroscopic coefficients from
  ``sum_k C^k_ij K_kl = B_ijl`` ((4.15), i.e. (3.6) with the projector written out).

The result is a :class:`~nhfast.symbolic.systems.ReducedChaplyginSystem`, so
:func:`~nhfast.symbolic.chaplygin.theta_form`, :func:`~nhfast.symbolic.chaplygin.invariant_measure`
and :func:`~nhfast.symbolic.chaplygin.phi_simple` apply to it unchanged.

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy as sp
from sympy.polys.domains import QQ
from sympy.polys.matrices import DomainMatrix
from sympy.polys.polyerrors import CoercionFailed, PolynomialError

from nhfast.symbolic._util import Simplifier, as_expr, as_matrix, as_symbol_list, zeros3
from nhfast.symbolic.frames import coefficients_from_pairings
from nhfast.symbolic.systems import ReducedChaplyginSystem

__all__ = [
    "lie_chaplygin_system",
]

Element = sp.Matrix
Bracket = Callable[[Element, Element], Element]
Metric = Callable[[Element, Element], Any]
Action = Callable[[Element], Sequence[Any]]


def matrix_commutator(x: Element, y: Element) -> Element:
    """The bracket ``[x, y] = x y - y x`` of a matrix Lie algebra."""
    return x * y - y * x


def _normal(simplify: Simplifier) -> Callable[[Any], sp.Expr]:
    """``True``: ``cancel(expand(.))`` (a rational normal form); a callable is used as given;
    ``False``/``None``: no simplification."""
    if simplify is True:
        return lambda e: sp.cancel(sp.expand(e))
    if simplify is None or simplify is False:
        return sp.sympify
    if callable(simplify):
        return simplify
    raise TypeError(f"simplify must be a bool, None or a callable, got {type(simplify).__name__}")


class _Radical:
    """A square root ``w = sqrt(P)`` of a polynomial ``P`` of the shape coordinates, handled as a
    symbol with ``w^2 = P`` and ``dw/ds = (dP/ds) / (2 w)`` (e.g. ``gamma_n`` of (4.9)).

    Rational functions of ``s`` and ``w`` reduce to ``(n0 + n1 w) / d`` with ``n0, n1, d`` free of
    ``w``: since ``w`` is not rational in ``s``, the form is zero iff ``n0 = n1 = 0``."""

    def __init__(self, base: sp.Expr) -> None:
        self.base = sp.expand(base)
        self.w = sp.Dummy("w", positive=True)
        self.rel = self.w**2 - self.base

    def to_symbol(self, expr: sp.Expr) -> sp.Expr:
        def is_root(x: sp.Expr) -> bool:
            return (
                x.is_Pow and x.exp.is_Rational and x.exp.q == 2 and sp.expand(x.base) == self.base
            )

        return sp.sympify(expr).replace(is_root, lambda x: self.w ** (2 * x.exp))

    def diff(self, expr: sp.Expr, x: sp.Symbol) -> sp.Expr:
        return sp.diff(expr, x) + sp.diff(expr, self.w) * sp.diff(self.base, x) / (2 * self.w)

    def reduce(self, expr: sp.Expr) -> sp.Expr:
        e = sp.expand(expr)
        if not e.has(self.w):
            return sp.cancel(e)
        w, base = self.w, self.base

        def is_wpow(x: sp.Expr) -> bool:
            return x.is_Pow and x.base == w and x.exp.is_Integer

        def lower(x: sp.Expr) -> sp.Expr:  # w^k = P^(k // 2) w^(k % 2)
            k = int(x.exp)
            return base ** (k // 2) * w ** (k % 2)

        e = sp.expand(e.replace(is_wpow, lower))
        if e.has(w**-1) or not e.is_polynomial(w) or sp.degree(e, w) > 1:
            num, den = sp.fraction(sp.cancel(e))  # w in a denominator: rationalise
            rel = self.rel
            num = sp.rem(sp.expand(num), rel, w)
            den = sp.rem(sp.expand(den), rel, w)
            d0, d1 = sp.expand(den).coeff(w, 0), sp.expand(den).coeff(w, 1)
            if d1 != 0:
                num = sp.rem(sp.expand(num * (d0 - d1 * w)), rel, w)
                den = sp.expand(d0**2 - d1**2 * base)
            e = sp.expand(num) / den
            parts = [sp.expand(num).coeff(w, 0) / den, sp.expand(num).coeff(w, 1) / den]
        else:
            parts = [e.coeff(w, 0), e.coeff(w, 1)]
        return sp.cancel(parts[0]) + sp.cancel(parts[1]) * w

    def back(self, expr: sp.Expr) -> sp.Expr:
        return sp.sympify(expr).xreplace({self.w: sp.sqrt(self.base)})


def _find_radical(mats: list[sp.Matrix], s: list[sp.Symbol]) -> _Radical | None:
    """The one square root of a polynomial in ``s`` occurring in ``mats``, if exactly one does."""
    bases = set()
    for m in mats:
        for x in m.atoms(sp.Pow):
            if x.exp.is_Rational and x.exp.q == 2 and x.base.free_symbols & set(s):
                bases.add(sp.expand(x.base))
    if len(bases) != 1:
        return None
    base = bases.pop()
    try:
        sp.Poly(base, *s)
    except PolynomialError:
        return None
    return _Radical(base)


def _fractions(entries: list[sp.Expr], dom: Any) -> tuple[list[Any], Any] | None:
    """``entries = nums / den`` with ring elements ``nums`` and one common denominator ``den``
    of ``dom`` (a polynomial ring); None when an entry is not a rational function there."""
    ring = dom.ring
    fracs = []
    for e in entries:
        for attempt in (e, None):
            num, den = sp.fraction(attempt if attempt is not None else sp.together(e))
            try:
                fracs.append((ring.from_expr(num), ring.from_expr(den)))
                break
            except (ValueError, TypeError, CoercionFailed, PolynomialError):
                if attempt is None:
                    return None
    common = ring.one
    for _, d in fracs:
        common = common.lcm(d)
    return [n * common.exquo(d) for n, d in fracs], common


def pairings_solution(
    K: sp.Matrix, B: Any, symbols: Sequence[sp.Symbol] = ()
) -> sp.MutableDenseNDimArray | None:
    """Exact fraction-free solution of ``sum_k C^k_ij K_kl = B_ijl`` ((4.15)).

    When every entry of ``K`` and ``B`` is a rational function of ``symbols`` (the shape
    coordinates and parameters; other free symbols are appended), ``K`` and ``B`` are scaled to
    polynomial matrices over ``QQ[symbols]`` and the system is solved there
    (``DomainMatrix.solve_den``, characteristic-polynomial method); each ``C^k_ij`` is then
    reduced by one polynomial gcd.  This is much faster than ``LUsolve`` on expressions for the
    large rational entries of generic-inertia Lie-group systems.

    Parameters
    ----------
    K : sympy.Matrix
        Symmetric invertible ``r x r`` matrix.
    B : sympy.NDimArray
        ``B[i, j, l]``, antisymmetric in ``(i, j)``.
    symbols : list of sympy.Symbol
        Polynomial generators (order matters only for speed).

    Returns
    -------
    sympy.MutableDenseNDimArray or None
        ``C[i, j, k] = C^k_ij`` as cancelled quotients of expanded polynomials, or None when the
        entries are not rational in the symbols (e.g. a square root survives); then use
        :func:`~nhfast.symbolic.frames.coefficients_from_pairings`.
    """
    r = K.rows
    pairs = [(i, j) for i in range(r) for j in range(i + 1, r)]
    C = zeros3(r, r, r)
    if not pairs:
        return C
    k_entries = [sp.sympify(e) for e in K]
    b_entries = [sp.sympify(B[i, j, m]) for m in range(r) for (i, j) in pairs]
    gens = list(symbols)
    free = set().union(*(e.free_symbols for e in [*k_entries, *b_entries]))
    gens += sorted(free - set(gens), key=str)
    if not gens:
        gens = [sp.Dummy("x")]
    dom = QQ[tuple(gens)]
    pk, pb = _fractions(k_entries, dom), _fractions(b_entries, dom)
    if pk is None or pb is None:
        return None
    (knum, kden), (bnum, bden) = pk, pb
    npairs = len(pairs)
    Kd = DomainMatrix([[knum[a * r + b] for b in range(r)] for a in range(r)], (r, r), dom)
    Bd = DomainMatrix(
        [[bnum[m * npairs + c] for c in range(npairs)] for m in range(r)], (r, npairs), dom
    )
    # (Knum / kden) C = Bnum / bden  =>  C = kden Knum^-1 Bnum / bden
    sol, den = Kd.solve_den(Bd, method="charpoly")
    # every C^k_ij has the denominator den * bden: split it into factors once, then cancel
    # each entry by trial division by them (exact division is far cheaper than a gcd per entry)
    scale, factors = _denominator_factors(den, bden, kden)
    for c, (i, j) in enumerate(pairs):
        for m in range(r):
            num = sol[m, c].element * kden
            if not num:
                continue
            p, q = _cancel_by_factors(num, scale, factors)
            val = p.as_expr() / q.as_expr()
            C[i, j, m] = val
            C[j, i, m] = -val
    return C


def _denominator_factors(den: Any, bden: Any, kden: Any) -> tuple[Any, list[tuple[Any, int]]]:
    """``den * bden = scale prod f^k``: the irreducible factors of the small ``bden`` and
    ``kden`` divided out of ``den`` as often as they go; what remains of ``den`` is one more
    factor (factoring it outright is slow in many variables; if it is reducible, entries may
    keep a common factor, which changes no value)."""
    scale = den.ring.domain.one
    small: list[Any] = []
    for poly in (bden, kden):
        c, fl = poly.factor_list()
        small += [f for f, _ in fl if f not in small]
    out: dict[Any, int] = {}
    rest = den
    for f in small:
        while True:
            quo, rem = rest.div(f)
            if rem:
                break
            rest = quo
            out[f] = out.get(f, 0) + 1
    c, fl = bden.factor_list()
    scale = scale * c
    for f, k in fl:
        out[f] = out.get(f, 0) + k
    if rest.is_ground:
        scale = scale * rest.LC
    else:
        lc = rest.LC
        scale = scale * lc
        rest = rest.quo_ground(lc)
        out[rest] = out.get(rest, 0) + 1
    return scale, list(out.items())


def _cancel_by_factors(num: Any, scale: Any, factors: list[tuple[Any, int]]) -> tuple[Any, Any]:
    """``num / (scale prod f^k)`` in lowest terms: each factor ``f`` (irreducible) divides out
    of ``num`` as often as it divides it, at most ``k`` times; the rest is the denominator
    (made monic: its leading coefficient moves to the numerator)."""
    p, q = num, num.ring.one
    for f, k in factors:
        left = k
        while left:
            quo, rem = p.div(f)
            if rem:
                break
            p, left = quo, left - 1
        if left:
            q = q * f**left
    lc = q.LC * scale
    return p.quo_ground(lc), q.quo_ground(q.LC)


def _as_elements(lifts: Any) -> list[sp.Matrix]:
    if isinstance(lifts, (str, bytes, sp.MatrixBase)) or not isinstance(lifts, Sequence):
        raise TypeError(
            f"lifts must be a list of SymPy matrices (one per shape coordinate), "
            f"got {type(lifts).__name__}"
        )
    out = [as_matrix(x, f"lifts[{k}]") for k, x in enumerate(lifts)]
    shapes = {x.shape for x in out}
    if len(shapes) > 1:
        raise ValueError(f"lifts must all have the same shape, got {sorted(shapes)}")
    return out


def lie_chaplygin_system(
    shape: Sequence[sp.Symbol],
    lifts: Sequence[Any],
    metric: Metric,
    potential: Any = 0,
    params: Sequence[sp.Symbol] = (),
    bracket: Bracket | None = None,
    action: Action | None = None,
    simplify: Simplifier = True,
    name: str = "lie_chaplygin",
    compute_C: bool = True,
) -> ReducedChaplyginSystem:
    """Reduced data ``(K, C)`` of a Chaplygin system on a Lie group from Lie-algebra data.

    Follows García-Naranjo & Marrero (2020), Section 4.2 and Appendix B, for any algebra,
    lifts and metric: ``K_kl = <<X_k, X_l>>`` ((3.19), (4.12)), the left-trivialised bracket
    ``[X_i, X_j] = [X_i, X_j]_g + X_i[X_j] - X_j[X_i]`` ((B.1)), ``B_ijl = <<[X_i, X_j], X_l>>``
    ((4.13)) and ``sum_k C^k_ij K_kl = B_ijl`` ((4.15)).

    Parameters
    ----------
    shape : list of sympy.Symbol
        Shape coordinates ``s^1..s^r``.
    lifts : list of sympy.Matrix
        ``X_k(s)``, the left trivialisation of ``hor d/ds^k`` (4.11): algebra elements as
        explicit matrices (or column vectors with a custom ``bracket``), functions of ``shape``
        and ``params`` only.
    metric : callable
        ``metric(Y1, Y2)``: the kinetic metric on the algebra, e.g.
        ``lambda Y1, Y2: killing(I(Y1), Y2)`` for an inertia operator ``I``.  Must be symmetric.
    potential : sympy.Expr, optional
        Reduced potential ``U(s)``.
    params : list of sympy.Symbol, optional
        Parameters (every other free symbol of the data must be among them).
    bracket : callable, optional
        Lie bracket of the algebra; default :func:`matrix_commutator` (``XY - YX``).
    action : callable, optional
        ``action(Y)`` gives the ``r`` components of ``pi_* Y`` in ``d/ds^1..d/ds^r`` (the
        infinitesimal action on the shape space, a function of ``s``); then
        ``Y[Z] = sum_k action(Y)_k dZ/ds^k`` for every algebra-valued ``Z(s)``, and the lifts are
        checked to be lifts (``action(X_k) = d/ds^k``).  For the Veselova body
        ``gamma = g^{-1} e_n``, so ``Y[gamma] = -Y gamma`` and ``action(Y) = (-Y gamma)_{1..r}``
        (Lemma B.2).  Default: the lifts are trusted to satisfy ``pi_* X_k = d/ds^k``, so
        ``X_i[Z] = dZ/ds^i``.
    simplify : bool or callable, optional
        Normal form applied to the entries of ``K``, the brackets and ``B``; True: ``cancel``.
    name : str, optional
    compute_C : bool, optional
        If False, ``C`` is left zero (only ``K`` and ``extra["B"]`` are meaningful).

    Returns
    -------
    ReducedChaplyginSystem
        ``K``, ``C`` (``C[i, j, k] = C^k_ij``), with ``extra["B"]`` (``B[i, j, l]``),
        ``extra["brackets"]`` (``{(i, j): [X_i, X_j]}`` for ``i < j``), ``extra["lifts"]`` and,
        when the lifts hold a square root ``sqrt(P)`` of a polynomial of the shape coordinates
        (a hemisphere chart), ``extra["domain"]``: the chart's domain ``P > 0``, carried to the
        equations of motion so that ``integrate`` stops at its boundary.

    Raises
    ------
    TypeError
        Wrong argument types.
    ValueError
        Lifts of different shapes or of the wrong number, an asymmetric ``metric``, lifts
        that ``action`` does not map to the coordinate fields, undeclared symbols, or a
        ``K`` that is not positive definite.

    Notes
    -----
    ``C`` is computed by :func:`pairings_solution` (fraction-free, over ``QQ[s, params]``)
    when ``K`` and ``B`` are rational in the symbols, else by ``LUsolve``
    (:func:`~nhfast.symbolic.frames.coefficients_from_pairings`).
    """
    s = as_symbol_list(shape, "shape")
    ps = as_symbol_list(params, "params", allow_empty=True)
    X = _as_elements(lifts)
    r = len(s)
    if len(X) != r:
        raise ValueError(f"lifts must have one element per shape coordinate ({r}), got {len(X)}")
    if not callable(metric):
        raise TypeError(f"metric must be a callable of two algebra elements, got {metric!r}")
    br = matrix_commutator if bracket is None else bracket
    if not callable(br):
        raise TypeError(f"bracket must be callable, got {type(br).__name__}")
    norm = _normal(simplify)
    rad = _find_radical(X, s) if simplify is True else None
    if rad is not None:
        X = [x.applyfunc(rad.to_symbol) for x in X]
        norm = rad.reduce

    def to_sym(e: Any) -> sp.Expr:
        return rad.to_symbol(e) if rad is not None else sp.sympify(e)

    def d(Z: sp.Matrix, m: int) -> sp.Matrix:  # dZ/ds^m
        return Z.applyfunc(lambda e: rad.diff(e, s[m])) if rad is not None else Z.diff(s[m])

    def pushforward(Y: sp.Matrix) -> list[sp.Expr]:
        if action is None:
            raise AssertionError  # pragma: no cover - only called with an action
        comps = list(action(Y))
        if len(comps) != r:
            raise ValueError(f"action must return {r} components, got {len(comps)}")
        return [to_sym(as_expr(c, "action(Y)")) for c in comps]

    pf: list[list[sp.Expr]] = []
    if action is not None:
        for k, Xk in enumerate(X):
            got = pushforward(Xk)
            for m in range(r):
                if norm(got[m] - (1 if m == k else 0)) != 0:
                    raise ValueError(
                        f"lifts[{k}] is not a lift of d/ds^{k + 1}: component {m + 1} of "
                        f"action(lifts[{k}]) is {norm(got[m])}, expected {int(m == k)}"
                    )
            pf.append(got)

    def along(i: int, Z: sp.Matrix) -> sp.Matrix:  # X_i[Z]
        if action is None:
            return d(Z, i)
        return sum((d(Z, m) * pf[i][m] for m in range(r)), sp.zeros(*Z.shape))

    def pair(Y1: sp.Matrix, Y2: sp.Matrix) -> sp.Expr:
        return norm(to_sym(as_expr(metric(Y1, Y2), "metric(Y1, Y2)")))

    K = sp.zeros(r, r)
    for k in range(r):
        for m in range(r):
            K[k, m] = pair(X[k], X[m])
    for k in range(r):
        for m in range(k + 1, r):
            if norm(K[k, m] - K[m, k]) != 0:
                raise ValueError(
                    f"metric is not symmetric: <<X_{k + 1}, X_{m + 1}>> != <<X_{m + 1}, X_{k + 1}>>"
                )
            K[m, k] = K[k, m]
    brackets: dict[tuple[int, int], sp.Matrix] = {}
    B = zeros3(r, r, r)
    for i in range(r):
        for j in range(i + 1, r):
            b = as_matrix(br(X[i], X[j]), "bracket(X, Y)") + along(i, X[j]) - along(j, X[i])
            b = b.applyfunc(lambda e: norm(to_sym(e)))
            brackets[(i, j)] = b
            for m in range(r):
                B[i, j, m] = pair(b, X[m])
                B[j, i, m] = -B[i, j, m]
    gens = [*s, *ps] + ([rad.w] if rad is not None else [])
    C = pairings_solution(K, B, gens) if compute_C else zeros3(r, r, r)
    if C is None:
        C = coefficients_from_pairings(K, B, simplify=simplify)
    elif rad is not None:
        C = C.applyfunc(lambda e: rad.reduce(e) if e.has(rad.w) else e)
    domain: dict[str, Any] = {}
    if rad is not None:
        # the chart is where the root is real and nonzero: sqrt(P) with P > 0 (a hemisphere
        # chart, P = 1 - |s|^2); the equations blow up at P = 0 (the equator)
        domain = {f"chart: {rad.base} > 0 (sqrt({rad.base}) real, nonzero)": rad.base}
        K = K.applyfunc(rad.back)
        B = B.applyfunc(rad.back)
        C = C.applyfunc(rad.back)
        brackets = {key: val.applyfunc(rad.back) for key, val in brackets.items()}
        X = [x.applyfunc(rad.back) for x in X]
    return ReducedChaplyginSystem(
        s=s,
        K=K,
        C=C,
        potential=potential,
        params=ps,
        name=name,
        extra={"B": B, "brackets": brackets, "lifts": X, **({"domain": domain} if domain else {})},
    )
