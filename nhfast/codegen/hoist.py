"""Sub-expressions of the parameters alone, lifted out of a kernel's expressions.

A vector field evaluated thousands of times per trajectory often repeats work that depends
only on its parameters: ``1/a_i``, ``(a_i - a_j)/(a_i + a_j)``, the entries of a constant
mass matrix. :func:`hoist_parameters` replaces each maximal such sub-expression by a
*derived parameter* symbol; the generated library computes the derived parameters once per
trajectory (``nh_derive``) and the integrator's right-hand side reads them like parameters
(see ``nh_abi.h``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sympy as sp

__all__: list[str] = []


def _trivial(e: sp.Expr) -> bool:
    """Whether computing ``e`` is as cheap as loading it (an atom or its negative)."""
    if e.is_Atom:
        return True
    return bool(e.is_Mul and len(e.args) == 2 and e.args[0] == -1 and e.args[1].is_Atom)


class _Hoister:
    def __init__(self, params: Iterable[sp.Symbol], prefix: str) -> None:
        self.params = frozenset(params)
        self.names = sp.numbered_symbols(prefix)
        self.derived: dict[sp.Expr, sp.Symbol] = {}
        self.memo: dict[sp.Basic, sp.Basic] = {}

    def _param_only(self, e: sp.Basic) -> bool:
        return isinstance(e, sp.Expr) and e.free_symbols <= self.params

    def _lift(self, e: sp.Expr) -> sp.Expr:
        """The derived-parameter symbol standing for ``e`` (or ``e`` if it is trivial)."""
        if _trivial(e) or not e.free_symbols:
            return e
        sym = self.derived.get(e)
        if sym is None:
            sym = self.derived[e] = next(self.names)
        return sym

    def walk(self, e: sp.Basic) -> sp.Basic:
        hit = self.memo.get(e)
        if hit is not None:
            return hit
        out = self._walk(e)
        self.memo[e] = out
        return out

    def _walk(self, e: sp.Basic) -> sp.Basic:
        if e.is_Atom or not e.args:
            return e
        if self._param_only(e) and not isinstance(e, sp.Tuple):
            return self._lift(e)
        if e.is_Add or e.is_Mul:
            # numbers stay with the state part: -x/a and x/a share the symbol of 1/a
            fixed = [a for a in e.args if self._param_only(a) and not a.is_Number]
            rest = [self.walk(a) for a in e.args if not self._param_only(a) or a.is_Number]
            if len(fixed) > 1:
                fixed = [self._lift(e.func(*fixed))]
            else:
                fixed = [self._lift(a) for a in fixed]
            return e.func(*fixed, *rest)
        return e.func(*[self.walk(a) for a in e.args])


def hoist_parameters(
    groups: Sequence[Sequence[sp.Expr]], params: Sequence[sp.Symbol], prefix: str = "nh_dpar"
) -> tuple[list[list[sp.Expr]], list[tuple[sp.Symbol, sp.Expr]]]:
    """Replace the maximal sub-expressions of ``params`` alone by derived-parameter symbols.

    Parameters
    ----------
    groups : sequence of sequences of sympy.Expr
        The expressions, in groups (e.g. a solve's matrix, its right-hand side, the outputs);
        one derived symbol serves every occurrence in every group.
    params : sequence of sympy.Symbol
        The parameters. Time, states and any other symbol make an expression non-constant.
    prefix : str
        Name prefix of the derived symbols (``nh_dpar0``, ``nh_dpar1``, ...).

    Returns
    -------
    groups : list of lists of sympy.Expr
        The expressions with the derived symbols in place; equal to the input in value.
    derived : list of (sympy.Symbol, sympy.Expr)
        Each derived symbol and its expression in ``params``, in order of first appearance.
        Atoms and negated atoms are never lifted (loading them costs as much), nor are
        Boolean conditions; numeric factors and terms stay in place (``x/a`` and ``-x/a``
        share the symbol of ``1/a``).

    Examples
    --------
    >>> import sympy as sp
    >>> a, b, x = sp.symbols("a b x")
    >>> rhs = x / a + 2 * b * x**2 - x * sp.sqrt(a * b) / a
    >>> (out,), derived = hoist_parameters([[rhs]], [a, b])
    >>> derived
    [(nh_dpar0, 1/a), (nh_dpar1, sqrt(a*b)/a)]
    >>> out
    [2*b*x**2 + nh_dpar0*x - nh_dpar1*x]
    """
    h = _Hoister(params, prefix)
    new = [[h.walk(sp.sympify(e)) for e in g] for g in groups]
    derived = [(s, e) for e, s in h.derived.items()]
    used: set[sp.Basic] = set()
    for g in new:
        for e in g:
            used |= e.free_symbols
    # a lifted sub-expression later absorbed into a larger one is not needed
    derived = [(s, e) for s, e in derived if s in used]
    return new, derived
