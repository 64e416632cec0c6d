"""Derivatives in the index-free algebra: gradients of dot products, traces of Jacobians.

A vector ``F = sum_t k_t(s) node_t`` of the algebra (:class:`~nhfast.symbolic.rigid_body.
algebra.VecPoly`, coefficients in the dot products ``s``) has the Jacobian trace ::

    tr dF/dy = sum_t k_t sum_i d(node_t)_i / dy_i
               + sum_t sum_s dk_t/ds  (grad_y s) . node_t,

and each term is again a dot product: ``sum_i d(node)_i/dy_i`` is ``c sum_i (node / y)_i`` for
``y`` met ``c`` times in the node's element-wise product, and ``grad_y s`` is the sum of the
nodes :func:`~nhfast.symbolic.rigid_body.algebra.extract` finds.  Through the per-lane
reciprocal ``rb_iD = 1 / D`` (``D = sum_u d_u(s) P_u``) the chain rule adds
``d(iD)_i = -iD_i^2 dD_i``.  So the divergence of a rigid body's field is a closed formula in
``O(1)`` dot products, ``O(n)`` per lane, as a hand derivation writes it, instead of a
differentiated program.
"""

from __future__ import annotations

import sympy as sp

from nhfast.symbolic._rational import derivative, normal
from nhfast.symbolic.rigid_body.algebra import Node, Scalars, VecPoly, extract

__all__: list[str] = []


class Calculus:
    """Gradients and Jacobian traces over one derivation's dot products.

    Parameters
    ----------
    scalars : Scalars
        The registry of the dot products.
    reciprocal : tuple of (str, VecPoly), optional
        ``(name, D)`` of a per-lane vector ``name = 1 / D`` element-wise.
    opaque : mapping of str to set of str, optional
        Vectors whose dependence on the named vectors is not in the algebra (e.g. the
        gradient of a potential given by components, on ``gamma``): a derivative through one
        raises ``NotImplementedError``.
    """

    def __init__(
        self,
        scalars: Scalars,
        reciprocal: tuple[str, VecPoly] | None = None,
        opaque: dict[str, set[str]] | None = None,
    ) -> None:
        self.scalars = scalars
        self.reciprocal = reciprocal
        self.opaque = dict(opaque or {})
        self._grads: dict[tuple[sp.Symbol, str], VecPoly] = {}

    # ----------------------------------------------------------------- helpers ----
    def _check(self, node: Node, y: str) -> None:
        for name, over in self.opaque.items():
            if y in over and name in node.names():
                raise NotImplementedError(f"{name!r} depends on {y!r} outside the algebra")
        for _, kid in node.kids:
            if y in kid.names() or (self.reciprocal and self.reciprocal[0] in kid.names()):
                raise NotImplementedError(
                    f"the derivative of a matrix product of {y!r} has no O(n) trace rule"
                )

    def _dot(self, poly: VecPoly, node: Node) -> sp.Expr:
        return poly.dot(node, self.scalars)

    def _coefficient_grad(self, coef: sp.Expr, y: str) -> VecPoly:
        """``grad_y`` of a coefficient: ``sum_s dk/ds grad_y s``."""
        out = VecPoly()
        for s in sorted(sp.sympify(coef).free_symbols & set(self.scalars.nodes), key=str):
            g = self.grad(s, y)
            if g.terms:
                out = out + g.scaled(derivative(coef, s))
        return out

    def _reciprocal_grad(self, weight: Node, y: str) -> VecPoly:
        """``grad_y sum_i weight_i iD_i`` through ``iD = 1 / D``: ``-sum_i weight_i iD_i^2
        grad_y D_i``."""
        name, D = self.reciprocal  # type: ignore[misc]
        w2 = weight.times(Node((name, name)))
        out = VecPoly()
        for p, d in D.terms.items():
            self._check(p, y)
            wp = w2.times(p)
            # d_u(s) P_u: the coefficient's dependence ...
            g = self._coefficient_grad(d, y)
            if g.terms:
                out = out - g.scaled(self.scalars.of(wp))
            # ... and the element-wise one of P_u
            c = p.group.count(y)
            if c:
                out = out + VecPoly.of(w2.times(p.without(y)), -c * d)
        return out

    # -------------------------------------------------------------------- API ----
    def grad(self, s: sp.Symbol, y: str) -> VecPoly:
        """``grad_y s`` of the dot product ``s`` (a vector of the algebra)."""
        key = (s, y)
        if key not in self._grads:
            node = self.scalars.nodes[s]
            self._check(node, y)
            out = VecPoly()
            for z in extract(node, y):
                out = out + VecPoly.of(z)
            if self.reciprocal is not None and self.reciprocal[0] != y:
                for m in extract(node, self.reciprocal[0]):
                    out = out + self._reciprocal_grad(m, y)
            self._grads[key] = out
        return self._grads[key]

    def diagonal_sum(self, node: Node, y: str) -> sp.Expr:
        """``sum_i d(node)_i / dy_i``."""
        self._check(node, y)
        out = sp.Integer(0)
        c = node.group.count(y)
        if c:
            out += c * self.scalars.of(node.without(y))
        if self.reciprocal is not None:
            name = self.reciprocal[0]
            k = node.group.count(name)
            if k:
                # k occurrences of iD, each: sum_i rest_i d(iD)_i/dy_i
                rest = node.without(name)
                name_, D = self.reciprocal
                w2 = rest.times(Node((name_, name_)))
                for p, d in D.terms.items():
                    g = self._coefficient_grad(d, y)
                    out -= k * self._dot(g, w2.times(p))
                    cp = p.group.count(y)
                    if cp:
                        out -= k * cp * d * self.scalars.of(w2.times(p.without(y)))
        return out

    def trace(self, field: VecPoly, y: str) -> sp.Expr:
        """``tr dF/dy`` of a vector ``F`` with respect to the vector named ``y``."""
        out = []
        for node, coef in field.terms.items():
            out.append(coef * self.diagonal_sum(node, y))
            g = self._coefficient_grad(coef, y)
            if g.terms:
                out.append(self._dot(g, node))
        return normal(sp.Add(*out))
