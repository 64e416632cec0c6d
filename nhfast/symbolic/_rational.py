"""Rational functions as one expanded numerator over powers of polynomial factors.

:func:`normal` writes a rational function of symbols as ``N / prod_b b^k``: ``N`` an expanded
polynomial, each ``b`` an expanded monic polynomial (or a symbol) and ``k > 0``.  Sums are put
over the least common multiple of their factors' powers, products add the powers, and
``1 / p`` of a polynomial adds ``p`` (made monic) as a factor; no gcd is ever computed, so the
form is exact but need not be reduced (``N`` is zero iff the function is).  The arithmetic
runs in SymPy's sparse polynomial rings over ``QQ`` (``sympy.polys.rings``), many times
faster than ``expand`` / ``together`` / ``cancel`` on expressions, and denominators are never
expanded into every term of a sum.

Expressions that are not rational in their symbols (square roots, functions, floats) go
through an expression-level version of the same form.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import sympy as sp
from sympy.core.sorting import default_sort_key
from sympy.polys.domains import QQ
from sympy.polys.rings import PolyElement, PolyRing
from sympy.polys.rings import ring as poly_ring


class _NotRational(Exception):
    """The expression is not a rational function of its symbols over ``QQ``."""


@lru_cache(maxsize=512)
def _ring(gens: tuple[sp.Symbol, ...]) -> PolyRing:
    return poly_ring(gens, QQ)[0]


Den = dict[PolyElement, int]


def _den_product(R: PolyRing, den: Mapping[PolyElement, int]) -> PolyElement:
    out = R.one
    for b, k in den.items():
        if k:
            out = out * b**k
    return out


def _to_ring(e: sp.Expr, R: PolyRing, index: Mapping[sp.Symbol, int]) -> tuple[PolyElement, Den]:
    """``e = num / prod b^k`` in ``R``; raises :class:`_NotRational`."""
    if e.is_Symbol:
        return R.gens[index[e]], {}
    if e.is_Rational:
        return R(QQ(int(e.p), int(e.q))), {}
    if e.is_Add:
        parts = [_to_ring(a, R, index) for a in e.args]
        den: Den = {}
        for _, d in parts:
            for b, k in d.items():
                if k > den.get(b, 0):
                    den[b] = k
        num = R.zero
        for n, d in parts:
            if d != den:
                n = n * _den_product(R, {b: k - d.get(b, 0) for b, k in den.items()})
            num += n
        return num, den
    if e.is_Mul:
        num = R.one
        den = {}
        for a in e.args:
            n, d = _to_ring(a, R, index)
            num = num * n
            for b, k in d.items():
                den[b] = den.get(b, 0) + k
        return num, den
    if e.is_Pow and e.exp.is_Integer:
        n, d = _to_ring(e.base, R, index)
        k = int(e.exp)
        if k >= 0:
            return n**k, {b: j * k for b, j in d.items()}
        k = -k
        if not n:
            raise ZeroDivisionError("division by a polynomial that is identically zero")
        num = _den_product(R, d) ** k
        out: Den = {}
        if len(n) == 1:  # a monomial: its variables are the factors
            ((monom, coeff),) = n.terms()
            for i, m in enumerate(monom):
                if m:
                    out[R.gens[i]] = m * k
            return num.quo_ground(coeff**k), out
        lc = n.LC
        out[n.quo_ground(lc)] = k
        return num.quo_ground(lc**k), out
    raise _NotRational


def _ring_parts(e: sp.Expr) -> tuple[PolyRing, PolyElement, Den] | None:
    gens = tuple(sorted(e.free_symbols, key=default_sort_key))
    if not gens or not all(g.is_Symbol for g in gens):
        return None
    R = _ring(gens)
    try:
        n, d = _to_ring(e, R, {g: i for i, g in enumerate(gens)})
    except _NotRational:
        return None
    return R, n, d


def _from_ring(n: PolyElement, d: Den) -> sp.Expr:
    if not n:
        return sp.Integer(0)
    return n.as_expr() * sp.Mul(*[b.as_expr() ** (-k) for b, k in d.items() if k])


@lru_cache(maxsize=65536)
def normal(e: Any) -> sp.Expr:
    """``e`` as one expanded numerator over a product of powers of expanded polynomials.

    Exact; no gcd is computed (see the module docstring).  Raises ``ZeroDivisionError`` on a
    division by an identically zero polynomial.
    """
    e = sp.sympify(e)
    if e.is_Number or e.is_Symbol:
        return e
    parts = _ring_parts(e)
    if parts is None:
        n, d = _expr_parts(e)
        n = _expanded(n)
        if n == 0:
            return sp.Integer(0)
        return n * sp.Mul(*[b ** (-k) for b, k in d.items() if k])
    return _from_ring(parts[1], parts[2])


def numerator_denominator(e: Any) -> tuple[sp.Expr, sp.Expr]:
    """``(N, D)`` with ``e = N / D``: the expanded numerator and the product of the factors of
    :func:`normal` (not reduced, not expanded)."""
    e = sp.sympify(e)
    parts = _ring_parts(e)
    if parts is None:
        n, d = _expr_parts(e)
        return _expanded(n), sp.Mul(*[b**k for b, k in d.items() if k])
    _, n, d = parts
    return n.as_expr(), sp.Mul(*[b.as_expr() ** k for b, k in d.items() if k])


def is_rational(e: Any) -> bool:
    """True when ``e`` is a rational function of its symbols over ``QQ``."""
    e = sp.sympify(e)
    return e.is_Rational or _ring_parts(e) is not None


def denominator_factors(e: Any) -> list[sp.Expr]:
    """The polynomial factors of the denominator of :func:`normal` (each once, not
    necessarily irreducible); ``[]`` for a polynomial or what is not rational."""
    parts = _ring_parts(sp.sympify(e))
    if parts is None:
        return []
    return [b.as_expr() for b, k in parts[2].items() if k]


def _ring_derivative(
    R: PolyRing, n: PolyElement, d: Den, xg: PolyElement
) -> tuple[PolyElement, Den]:
    moving = [(b, k, b.diff(xg)) for b, k in d.items() if k]
    moving = [(b, k, db) for b, k, db in moving if db]
    # d(n / prod b^k) = (n' prod_m b - n sum_m k_m b_m' prod_{m' != m} b_m') / (prod b^k prod_m b)
    whole = R.one
    for b, _, _ in moving:
        whole = whole * b
    num = n.diff(xg) * whole
    for i, (_, k, db) in enumerate(moving):
        others = R.one
        for j, (b2, _, _) in enumerate(moving):
            if j != i:
                others = others * b2
        num -= n * db * others * k
    den = dict(d)
    for b, _, _ in moving:
        den[b] += 1
    return num, den


def _ring_sub(R: PolyRing, u: tuple[PolyElement, Den], v: tuple[PolyElement, Den]) -> PolyElement:
    """The numerator of ``u - v`` over the lcm of their factors."""
    den: Den = dict(u[1])
    for b, k in v[1].items():
        den[b] = max(den.get(b, 0), k)
    nu = u[0] * _den_product(R, {b: k - u[1].get(b, 0) for b, k in den.items()})
    nv = v[0] * _den_product(R, {b: k - v[1].get(b, 0) for b, k in den.items()})
    return nu - nv


def closed_form_defects(
    form: list[Any], s: list[sp.Symbol]
) -> dict[tuple[int, int], sp.Expr] | None:
    """``{(i, j): d_i alpha_j - d_j alpha_i}`` for the pairs ``i < j`` where it is not
    identically zero, computed in one polynomial ring (empty: ``alpha`` is closed); None
    when a component is not rational in its symbols."""
    exprs = [sp.sympify(a) for a in form]
    gens = tuple(
        sorted(set().union(*(e.free_symbols for e in exprs)) | set(s), key=default_sort_key)
    )
    R = _ring(gens)
    index = {g: i for i, g in enumerate(gens)}
    try:
        parts = [_to_ring(e, R, index) for e in exprs]
    except _NotRational:
        return None
    grads = [[_ring_derivative(R, n, d, R.gens[index[x]]) for x in s] for n, d in parts]
    out = {}
    for i in range(len(s)):
        for j in range(i + 1, len(s)):
            if _ring_sub(R, grads[j][i], grads[i][j]):
                out[(i, j)] = normal(derivative(exprs[j], s[i]) - derivative(exprs[i], s[j]))
    return out


@lru_cache(maxsize=65536)
def derivative(e: Any, x: sp.Symbol) -> sp.Expr:
    """``d e / d x`` in :func:`normal` form, by the quotient rule on the numerator and the
    factors (SymPy's ``diff`` of a large expression is much slower)."""
    e = sp.sympify(e)
    if x not in e.free_symbols:
        return sp.Integer(0)
    parts = _ring_parts(e)
    if parts is None:
        n, d = _expr_parts(e)
        den = sp.Mul(*[b**k for b, k in d.items() if k])
        terms = [sp.diff(n, x) / den]
        for b, k in d.items():
            db = sp.diff(b, x)
            if k and db != 0:
                terms.append(-k * n * db / (den * b))
        return normal(sp.Add(*terms))
    R, n, d = parts
    num, den = _ring_derivative(R, n, d, R.gens[R.symbols.index(x)])
    return _from_ring(num, den)


# ------------------------------------------------------------------------------------------
# the same form on expressions, for what is not rational in its symbols
# ------------------------------------------------------------------------------------------


def _expanded(e: sp.Expr) -> sp.Expr:
    return sp.expand(e, deep=True, power_base=False, power_exp=False, log=False)


def _monomial_factors(e: sp.Expr) -> tuple[sp.Expr, dict[sp.Expr, int]]:
    """An expanded polynomial ``e`` as ``(c, {base: k})`` with ``e = c prod base^k``."""
    if e.is_Add:
        if e.could_extract_minus_sign():
            return sp.Integer(-1), {-e: 1}
        return sp.Integer(1), {e: 1}
    c, rest = e.as_coeff_Mul()
    out: dict[sp.Expr, int] = {}
    for f in sp.Mul.make_args(rest):
        if f == 1:
            continue
        base, k = f.as_base_exp()
        if k.is_Integer:
            out[base] = out.get(base, 0) + int(k)
        else:
            out[f] = out.get(f, 0) + 1
    return c, out


def _expr_den(den: Mapping[sp.Expr, int]) -> sp.Expr:
    return sp.Mul(*[b**k for b, k in den.items() if k])


def _expr_parts(e: sp.Expr) -> tuple[sp.Expr, dict[sp.Expr, int]]:
    """``e = num / prod base^k`` on expressions (``num`` not yet expanded)."""
    if e.is_Add:
        parts = [_expr_parts(a) for a in e.args]
        den: dict[sp.Expr, int] = {}
        for _, d in parts:
            for b, k in d.items():
                den[b] = max(den.get(b, 0), k)
        return sp.Add(
            *[n * _expr_den({b: k - d.get(b, 0) for b, k in den.items()}) for n, d in parts]
        ), den
    if e.is_Mul:
        nums = []
        den = {}
        for a in e.args:
            n, d = _expr_parts(a)
            nums.append(n)
            for b, k in d.items():
                den[b] = den.get(b, 0) + k
        return sp.Mul(*nums), den
    if e.is_Pow and e.exp.is_Integer:
        n, d = _expr_parts(e.base)
        k = int(e.exp)
        if k >= 0:
            return n**k, {b: j * k for b, j in d.items()}
        n = _expanded(n)
        if n == 0:
            raise ZeroDivisionError("division by an expression that expands to zero")
        c, bases = _monomial_factors(n)
        return _expr_den(d) ** (-k) / c ** (-k), {b: j * (-k) for b, j in bases.items()}
    return e, {}
