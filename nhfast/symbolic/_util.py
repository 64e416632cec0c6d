"""Private helpers shared by the symbolic layer: argument checks, simplification, zero tests.

Nothing here is public API.  Every check raises a ``TypeError`` / ``ValueError`` whose message
names the offending argument (and symbol, where there is one).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import sympy as sp
from sympy.core.function import AppliedUndef

Simplifier = bool | Callable[[sp.Expr], sp.Expr] | None


def as_symbol_list(arg: Any, name: str, *, allow_empty: bool = False) -> list[sp.Symbol]:
    """Return ``arg`` as a list of distinct SymPy symbols, in the user's order."""
    if isinstance(arg, (str, bytes)) or not isinstance(arg, Iterable):
        raise TypeError(f"{name} must be a list of SymPy symbols, got {type(arg).__name__}")
    out = list(arg)
    for item in out:
        if not isinstance(item, sp.Symbol):
            raise TypeError(
                f"{name} must contain only SymPy Symbols; {item!r} is a {type(item).__name__}"
            )
    if not out and not allow_empty:
        raise ValueError(f"{name} must not be empty")
    seen: set[sp.Symbol] = set()
    for item in out:
        if item in seen:
            raise ValueError(f"{name} contains the symbol {item} twice")
        seen.add(item)
    return out


def fresh_name(name: str, taken: set[str]) -> str:
    """``name``, suffixed with ``_`` until it clashes with no name in ``taken``; added to it."""
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def fresh_symbols(names: Sequence[str], taken: set[str], prefix: str = "") -> list[sp.Symbol]:
    """Real symbols named ``names`` (``prefix_name`` with a prefix), made unique against
    ``taken`` by :func:`fresh_name` (``taken`` is updated with the names given out)."""
    full = [f"{prefix}_{nm}" if prefix else nm for nm in names]
    return [sp.Symbol(fresh_name(nm, taken), real=True) for nm in full]


def as_matrix(arg: Any, name: str) -> sp.Matrix:
    """Return ``arg`` as an (immutable-content) SymPy Matrix or raise ``TypeError``."""
    if isinstance(arg, sp.MatrixBase):
        return sp.Matrix(arg)
    if isinstance(arg, (str, bytes)) or not isinstance(arg, Iterable):
        raise TypeError(f"{name} must be a SymPy Matrix (or nested list), got {type(arg).__name__}")
    try:
        return sp.Matrix(arg)
    except (TypeError, ValueError, sp.SympifyError) as exc:
        raise TypeError(f"{name} could not be converted to a SymPy Matrix: {exc}") from exc


def as_column(arg: Any, name: str, n: int) -> sp.Matrix:
    """``arg`` (a row or a column) as an ``n x 1`` SymPy Matrix, else ``ValueError`` naming
    ``name``."""
    m = as_matrix(arg, name)
    if m.shape == (1, n):
        m = m.T
    if m.shape != (n, 1):
        raise ValueError(f"{name} must be a column with {n} components, got shape {m.shape}")
    return m


def as_expr(arg: Any, name: str) -> sp.Expr:
    """Sympify ``arg`` strictly (no strings) or raise ``TypeError``."""
    if isinstance(arg, str):
        raise TypeError(f"{name} must be a SymPy expression, not a string")
    try:
        expr = sp.sympify(arg, strict=True)
    except (sp.SympifyError, TypeError) as exc:
        raise TypeError(f"{name} must be a SymPy expression: {exc}") from exc
    if not isinstance(expr, sp.Expr):
        raise TypeError(f"{name} must be a scalar SymPy expression, got {type(expr).__name__}")
    return expr


def check_declared(obj: Any, name: str, declared: Iterable[sp.Symbol]) -> None:
    """Raise ``ValueError`` if ``obj`` contains a free symbol that is not in ``declared``."""
    extra = set(getattr(obj, "free_symbols", set())) - set(declared)
    if extra:
        names = ", ".join(sorted(str(s) for s in extra))
        raise ValueError(
            f"{name} contains undeclared symbol(s) {names}; declare them in q or params"
        )


def simplifier(how: Simplifier) -> Callable[[sp.Expr], sp.Expr]:
    """Map the user-facing ``simplify`` argument to a callable."""
    if how is None or how is False:
        return lambda e: e
    if how is True:
        return simplify_expr
    if callable(how):
        return how
    raise TypeError(f"simplify must be a bool, None or a callable, got {type(how).__name__}")


def simplify_expr(expr: sp.Expr) -> sp.Expr:
    """Cheap-first simplification: ``cancel`` for rational expressions, ``simplify`` otherwise."""
    expr = sp.sympify(expr)
    if expr.is_number and expr == 0:
        return expr
    if expr.has(sp.sin, sp.cos, sp.tan, sp.exp, sp.log, sp.Pow):
        return sp.simplify(expr)
    return sp.factor(sp.cancel(expr))


def is_zero(expr: Any) -> bool:
    """Exact symbolic zero test: ``cancel`` first, then ``simplify``, then ``radsimp``."""
    expr = sp.sympify(expr)
    if expr == 0:
        return True
    for step in (sp.expand, sp.cancel, sp.simplify):
        try:
            expr = step(expr)
        except (TypeError, ValueError, NotImplementedError):  # pragma: no cover - defensive
            continue
        if expr == 0:
            return True
    return bool(sp.simplify(sp.radsimp(expr)) == 0)


def matrix_is_zero(mat: Iterable[Any]) -> bool:
    """True when every entry of ``mat`` is symbolically zero."""
    return all(is_zero(e) for e in mat)


def generic_point(
    symbols: Sequence[sp.Symbol], seed: int = 0, low: int = 1, high: int = 5, den: int = 17
) -> dict[sp.Symbol, sp.Rational]:
    """A reproducible pseudo-random rational point ``{symbol: value}`` with values in (0, 1/3).

    Small positive values keep square roots such as ``sqrt(1 - s1**2 - s2**2)`` real and
    masses positive, which is what a "generic point" means for the systems in this package.
    """
    rng = random.Random(seed)
    return {s: sp.Rational(rng.randint(low, high), den + rng.randint(0, 7)) for s in symbols}


def numeric_rank(mat: sp.Matrix, subs: dict[sp.Symbol, Any]) -> int:
    """Rank of ``mat`` at the point ``subs`` (floats when possible, exact otherwise)."""
    m = mat.subs(subs)
    if m.free_symbols or m.atoms(AppliedUndef):  # symbols, or undefined functions like Delta(1/5)
        return int(m.rank(simplify=True))
    arr = np.array(m.evalf(30).tolist(), dtype=complex)
    if arr.size == 0:
        return 0
    return int(np.linalg.matrix_rank(arr, tol=1e-10 * max(1.0, float(np.abs(arr).max()))))


def generic_rank(mat: sp.Matrix, symbols: Sequence[sp.Symbol], tries: int = 3) -> int:
    """Largest rank of ``mat`` over a few generic rational points of ``symbols``."""
    best = 0
    for seed in range(tries):
        best = max(best, numeric_rank(mat, generic_point(symbols, seed=seed)))
        if best == min(mat.shape):
            break
    return best


def _sphere_base(s: Sequence[sp.Symbol]) -> sp.Expr:
    return 1 - sum(si**2 for si in s)


def sqrt_to_symbol(expr: Any, s: Sequence[sp.Symbol], gn: sp.Symbol) -> sp.Expr:
    """Replace every power ``(1 - |s|^2)^(k/2)`` in ``expr`` by ``gn**k``."""
    base = sp.expand(_sphere_base(s))

    def match(x: Any) -> bool:
        return (
            isinstance(x, sp.Pow)
            and x.exp.is_Rational
            and x.exp.q == 2
            and sp.expand(x.base - base) == 0
        )

    return sp.sympify(expr).replace(match, lambda x: gn ** (2 * x.exp))


def sphere_normal(expr: Any, s: Sequence[sp.Symbol], gn: sp.Symbol | None = None) -> sp.Expr:
    """Normal form of a rational function of ``s`` and ``gamma_n = sqrt(1 - |s|^2)``.

    Writes ``expr`` as ``(n0 + n1 gamma_n) / d`` with ``n0, n1, d`` polynomials in ``s`` (and
    parameters), using ``gamma_n^2 = 1 - |s|^2``.  Since ``gamma_n`` is not a rational function
    of ``s``, the form is zero iff ``n0 = n1 = 0``; this makes exact zero tests on the
    hemisphere chart fast and complete.  If ``gn`` is None, ``sqrt(1 - |s|^2)`` is expected in
    ``expr`` and is put back in the result.
    """
    back = gn is None
    g = sp.Dummy("gn", positive=True) if gn is None else gn
    base = sp.expand(_sphere_base(s))
    e = sqrt_to_symbol(expr, s, g) if back else sp.sympify(expr)
    num, den = sp.fraction(sp.cancel(sp.together(e)))
    rel = g**2 - base
    num = sp.rem(sp.expand(num), rel, g)
    den = sp.rem(sp.expand(den), rel, g)
    d1 = sp.expand(den).coeff(g, 1)
    if d1 != 0:
        d0 = sp.expand(den).coeff(g, 0)
        conj = d0 - d1 * g
        num = sp.rem(sp.expand(num * conj), rel, g)
        den = sp.expand(d0**2 - d1**2 * base)
    n0, n1 = sp.expand(num).coeff(g, 0), sp.expand(num).coeff(g, 1)
    out = sp.cancel(n0 / den) + sp.cancel(n1 / den) * g
    return out.subs(g, sp.sqrt(base)) if back else out


def is_zero_on_sphere(expr: Any, s: Sequence[sp.Symbol]) -> bool:
    """Exact zero test for rational functions of ``s`` and ``sqrt(1 - |s|^2)``."""
    return sphere_normal(expr, s) == 0


def zeros3(d0: int, d1: int, d2: int) -> sp.MutableDenseNDimArray:
    """A ``(d0, d1, d2)`` array of SymPy zeros (``NDimArray.zeros`` stores Python ints)."""
    return sp.MutableDenseNDimArray([sp.Integer(0)] * (d0 * d1 * d2), (d0, d1, d2))
