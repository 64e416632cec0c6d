"""Index-free linear algebra over per-lane vectors: the calculus of the rigid-body engine.

A SymPy matrix expression built from column vectors (``MatrixSymbol(name, n, 1)``), diagonal
matrices (``DiagMatrix(vector)``), symmetric parameter matrices (``MatrixSymbol(name, n, n)``),
transposes, sums, products, scalars and Hadamard products with a parameter matrix is expanded
here into a sum of *terms*, each a scalar coefficient times a vector-valued *tree*:

* a :class:`Node` is ``group o prod_k op_k(child_k)``: an element-wise product of vectors
  (``group``, a sorted tuple of names, repeats allowed) and of matrix-vector products of
  parameter matrices with child nodes (``o`` is the element-wise product);
* a scalar (``b^T X c``, a dot product) is the sum over the index of a node; every node of its
  tree can serve as the root (edges carry transposed matrices when re-rooted), and the least
  serialisation over all roots is its canonical key, so that ``b^T J c`` and ``c^T J b`` are one
  scalar and cancel where they should.

The dimension ``n`` stays a symbol throughout: a derivation costs the same at ``n = 4`` and
``n = 64``.  :class:`Lowering` turns the result into statements of an
:class:`~nhfast.codegen.IndexedProgram` (element-wise vectors, reductions, matrix-vector
products), one statement per distinct node or scalar.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sympy as sp
from sympy.matrices.expressions import (
    DiagMatrix,
    HadamardProduct,
    Identity,
    MatAdd,
    MatMul,
    MatPow,
    MatrixExpr,
    MatrixSymbol,
    Transpose,
    ZeroMatrix,
)
from sympy.matrices.expressions.matexpr import MatrixElement
from sympy.matrices.expressions.trace import Trace

from nhfast.symbolic._rational import derivative, normal

__all__: list[str] = []

#: The symbolic dimension of every vector and matrix in a derivation.
DIM = sp.Symbol("n", integer=True, positive=True)

Op = tuple[str, str]  # ("M", name): a symmetric parameter matrix


#: Prefix of the name of an element-wise reciprocal: ``~a`` is ``1 / a`` (a parameter vector,
#: so that ``a o ~a`` cancels and reductions with it are canonical).
INVERSE = "~"


def inverse(name: str) -> str:
    """The name of the element-wise reciprocal of the vector ``name``."""
    return name[1:] if name.startswith(INVERSE) else INVERSE + name


def _cancelled(group: tuple[str, ...]) -> tuple[str, ...]:
    """``group`` sorted, each ``x`` and ``~x`` pair removed."""
    if not any(nm.startswith(INVERSE) for nm in group):
        return tuple(sorted(group))
    out = list(group)
    for nm in group:
        if nm.startswith(INVERSE) and nm in out and nm[1:] in out:
            out.remove(nm)
            out.remove(nm[1:])
    return tuple(sorted(out))


@dataclass(frozen=True, order=True)
class Node:
    """``group o prod_k M_k(child_k)`` element-wise (see the module docstring).

    A name ``~x`` in ``group`` is the reciprocal of ``x`` (see :func:`inverse`); the two cancel.
    """

    group: tuple[str, ...] = ()
    kids: tuple[tuple[Op, Node], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "group", _cancelled(self.group))

    def names(self) -> set[str]:
        """Every vector name in the tree."""
        out = set(self.group)
        for _, kid in self.kids:
            out |= kid.names()
        return out

    def count(self, name: str) -> int:
        """Occurrences of ``name`` in the tree."""
        return self.group.count(name) + sum(kid.count(name) for _, kid in self.kids)

    def times(self, other: Node) -> Node:
        """Element-wise product of two nodes (groups merge, kids join)."""
        return Node(tuple(sorted(self.group + other.group)), tuple(sorted(self.kids + other.kids)))

    def without(self, name: str) -> Node:
        """This node with one ``name`` removed from its root group."""
        g = list(self.group)
        g.remove(name)
        return Node(tuple(g), self.kids)


ONE = Node()


def leaf(*names: str) -> Node:
    """The node ``names[0] o names[1] o ...``."""
    return Node(tuple(sorted(names)))


# ------------------------------------------------------------------------------------------
# scalars: canonical keys by re-rooting
# ------------------------------------------------------------------------------------------


def _adjacency(root: Node) -> tuple[list[tuple[str, ...]], dict[int, list[tuple[Op, int]]]]:
    groups: list[tuple[str, ...]] = []
    adj: dict[int, list[tuple[Op, int]]] = {}

    def walk(node: Node) -> int:
        k = len(groups)
        groups.append(node.group)
        adj[k] = []
        for op, kid in node.kids:
            j = walk(kid)
            adj[k].append((op, j))
            adj[j].append((op, k))  # symmetric matrices: the transpose is the matrix
        return k

    walk(root)
    return groups, adj


def _rooted(groups: list[tuple[str, ...]], adj: Mapping, at: int, parent: int = -1) -> Node:
    kids = tuple(sorted((op, _rooted(groups, adj, j, at)) for op, j in adj[at] if j != parent))
    return Node(groups[at], kids)


def _rerooted(root: Node) -> list[Node]:
    groups, adj = _adjacency(root)
    return [_rooted(groups, adj, k) for k in range(len(groups))]


def canonical_scalar(node: Node) -> Node:
    """The canonical representative of ``sum_i node_i`` (least over every re-rooting)."""
    return min(_rerooted(node))


def extract(node: Node, name: str) -> list[Node]:
    """``d/d name`` of the scalar ``sum_i node_i``: one vector node per occurrence of ``name``.

    ``sum_i node_i = sum_i name_i z_i`` for each occurrence (the others held fixed); a group
    holding ``name`` ``k`` times contributes ``k`` copies (the product rule).
    """
    res: list[Node] = []
    for r in _rerooted(node):
        k = r.group.count(name)
        if k:
            res += [r.without(name)] * k
    return res


# ------------------------------------------------------------------------------------------
# polynomials: vectors and scalars
# ------------------------------------------------------------------------------------------


@dataclass
class Scalars:
    """Registry of the scalar reductions met in a derivation (canonical node -> symbol)."""

    symbols: dict[Node, sp.Symbol] = field(default_factory=dict)
    nodes: dict[sp.Symbol, Node] = field(default_factory=dict)
    zero: Callable[[Node], bool] = lambda node: False

    def of(self, node: Node) -> sp.Expr:
        """The symbol of ``sum_i node_i`` (0 if the registry's ``zero`` rule says so)."""
        key = canonical_scalar(node)
        if self.zero(key):
            return sp.Integer(0)
        if key == ONE:  # sum_i 1
            return DIM
        if key not in self.symbols:
            sym = sp.Symbol(f"rb_s{len(self.symbols)}", real=True)
            self.symbols[key] = sym
            self.nodes[sym] = key
        return self.symbols[key]


@dataclass
class VecPoly:
    """``sum_k coef_k node_k``: a vector as a linear combination of nodes."""

    terms: dict[Node, sp.Expr] = field(default_factory=dict)

    @classmethod
    def of(cls, node: Node, coef: Any = 1) -> VecPoly:
        """One term."""
        return cls({node: sp.sympify(coef)})

    def __add__(self, other: VecPoly) -> VecPoly:
        out = dict(self.terms)
        for k, c in other.terms.items():
            out[k] = out.get(k, 0) + c
        return VecPoly(out).cleaned()

    def __neg__(self) -> VecPoly:
        return VecPoly({k: -c for k, c in self.terms.items()})

    def __sub__(self, other: VecPoly) -> VecPoly:
        return self + (-other)

    def scaled(self, s: Any) -> VecPoly:
        """``s * self`` for a scalar expression ``s``."""
        return VecPoly({k: s * c for k, c in self.terms.items()}).cleaned()

    def cleaned(self) -> VecPoly:
        """Coefficients in :func:`normal` form, zero terms dropped."""
        out = {}
        for k, c in self.terms.items():
            c = normal(c)
            if c != 0:
                out[k] = c
        return VecPoly(out)

    def dot(self, node: Node, scalars: Scalars) -> sp.Expr:
        """``node . self`` as a scalar expression."""
        return normal(sp.Add(*[c * scalars.of(node.times(k)) for k, c in self.terms.items()]))

    def times(self, node: Node) -> VecPoly:
        """Element-wise product with ``node``."""
        out: dict[Node, sp.Expr] = {}
        for k, c in self.terms.items():
            key = k.times(node)
            out[key] = out.get(key, 0) + c
        return VecPoly(out).cleaned()

    def product(self, other: VecPoly) -> VecPoly:
        """Element-wise product of two vectors."""
        out: dict[Node, sp.Expr] = {}
        for k1, c1 in self.terms.items():
            for k2, c2 in other.terms.items():
                key = k1.times(k2)
                out[key] = out.get(key, 0) + c1 * c2
        return VecPoly(out).cleaned()

    def reduce(self, scalars: Scalars) -> sp.Expr:
        """``sum_i self_i`` as a scalar expression."""
        return normal(sp.Add(*[c * scalars.of(k) for k, c in self.terms.items()]))

    def subs(self, rep: Mapping[sp.Symbol, Any]) -> VecPoly:
        """Substitute in the coefficients."""
        return VecPoly({k: sp.sympify(c).xreplace(rep) for k, c in self.terms.items()}).cleaned()


# ------------------------------------------------------------------------------------------
# expansion of SymPy matrix expressions
# ------------------------------------------------------------------------------------------

Factor = tuple[str, str]  # ("v"|"r"|"d"|"M", name)
Flat = list[tuple[sp.Expr, tuple[Factor, ...]]]


def _flat(e: Any, symmetric: set[str]) -> Flat:
    if isinstance(e, MatAdd):
        return [t for a in e.args for t in _flat(a, symmetric)]
    if isinstance(e, MatMul):
        coef, mats = e.as_coeff_matrices()
        out: Flat = [(sp.sympify(coef), ())]
        for m in mats:
            out = [(c1 * c2, f1 + f2) for c1, f1 in out for c2, f2 in _flat(m, symmetric)]
        return out
    if isinstance(e, MatrixSymbol):
        rows, cols = e.shape
        if cols == 1:
            return [(sp.Integer(1), (("v", e.name),))]
        if rows == 1:
            return [(sp.Integer(1), (("r", e.name),))]
        if e.name not in symmetric:
            raise ValueError(f"matrix {e.name!r} is not a declared symmetric parameter matrix")
        return [(sp.Integer(1), (("M", e.name),))]
    if isinstance(e, Transpose):
        flip = {"v": "r", "r": "v", "d": "d", "M": "M"}
        return [
            (c, tuple((flip[k], nm) for k, nm in reversed(f))) for c, f in _flat(e.arg, symmetric)
        ]
    if isinstance(e, DiagMatrix):
        arg = e.args[0]
        if not (isinstance(arg, MatrixSymbol) and arg.shape[1] == 1):
            raise ValueError(f"DiagMatrix of {arg!r}: only DiagMatrix(vector) is supported")
        return [(sp.Integer(1), (("d", arg.name),))]
    if isinstance(e, Identity):
        return [(sp.Integer(1), ())]
    if isinstance(e, ZeroMatrix):
        return []
    if isinstance(e, HadamardProduct):
        return _hadamard(e, symmetric)
    if isinstance(e, MatPow) and e.exp.is_Integer and e.exp > 0:
        out = [(sp.Integer(1), ())]
        for _ in range(int(e.exp)):
            out = [(c1 * c2, f1 + f2) for c1, f1 in out for c2, f2 in _flat(e.base, symmetric)]
        return out
    if isinstance(e, MatrixExpr):
        raise ValueError(
            f"unsupported matrix operation {type(e).__name__} in {e}; use sums, products, "
            "transposes, DiagMatrix(vector), symmetric parameter matrices, scalars and "
            "HadamardProduct(parameter matrix, ...)"
        )
    return [(sp.sympify(e), ())]


def _hadamard(e: HadamardProduct, symmetric: set[str]) -> Flat:
    mats = [a for a in e.args if isinstance(a, MatrixSymbol) and a.name in symmetric]
    rest = [a for a in e.args if a not in mats]
    if len(mats) != 1 or len(rest) != 1:
        raise ValueError(
            f"{e}: a Hadamard product must have one symmetric parameter matrix and one other factor"
        )
    out: Flat = []
    for c, f in _flat(rest[0], symmetric):
        cut = [p for p in range(len(f) - 1) if f[p][0] == "v" and f[p + 1][0] == "r"]
        if len(cut) != 1:
            raise ValueError(f"{e}: the Hadamard factor must be a sum of outer products u w^T")
        left, right = f[: cut[0] + 1], f[cut[0] + 1 :]
        if any(k not in "vd" for k, _ in left) or any(k not in "rd" for k, _ in right):
            raise ValueError(
                f"{e}: the outer products in a Hadamard product must be of element-wise vectors"
            )
        # (u w^T) o H = diag(u) H diag(w)
        out.append(
            (
                c,
                tuple(("d", nm) for _, nm in left)
                + (("M", mats[0].name),)
                + tuple(("d", nm) for _, nm in right),
            )
        )
    return out


def _split(f: tuple[Factor, ...]) -> list[tuple[Factor, ...]]:
    """A flat chain cut at every outer product ``... v | r ...`` into its segments."""
    cuts = [p + 1 for p in range(len(f) - 1) if f[p][0] == "v" and f[p + 1][0] == "r"]
    bounds = [0, *cuts, len(f)]
    return [f[bounds[k] : bounds[k + 1]] for k in range(len(bounds) - 1)]


def _row_node(seg: tuple[Factor, ...]) -> Node:
    """A segment ``r ... v`` (a dot product) as the node summed over the index."""
    return _chain_node(tuple(("d" if k == "r" else k, nm) for k, nm in seg))


def _parse_vector(f: tuple[Factor, ...]) -> tuple[Node, list[Node]]:
    """A flat vector-valued chain -> (head node, scalar nodes)."""
    if not f or f[-1][0] != "v":
        raise ValueError("internal: a vector chain must end with a column vector")
    segs = _split(f)
    return _chain_node(segs[0]), [_row_node(seg) for seg in segs[1:]]


def _chain_node(seg: Iterable[Factor]) -> Node:
    """``f_1 f_2 ... f_k`` (diagonals, matrices, ending in a vector) as a node."""
    node = ONE
    for kind, nm in reversed(list(seg)):
        if kind in ("v", "d"):
            node = Node(tuple(sorted((*node.group, nm))), node.kids)
        elif kind == "M":
            node = Node((), ((("M", nm), node),))
        else:
            raise ValueError("internal: a row vector inside a vector chain")
    return node


def expand_vector(e: Any, scalars: Scalars, symmetric: Iterable[str] = ()) -> VecPoly:
    """A vector-valued (``n x 1``) SymPy matrix expression as a :class:`VecPoly`.

    Raises
    ------
    ValueError
        If the expression is not ``n x 1`` or uses an unsupported operation.
    """
    if not isinstance(e, MatrixExpr) or e.shape[1] != 1 or e.shape[0] == 1:
        raise ValueError(f"expected an n x 1 matrix expression, got {e!r}")
    out = VecPoly()
    for c, f in _flat(e, set(symmetric)):
        head, scs = _parse_vector(f)
        coef = c
        for s in scs:
            coef = coef * scalars.of(s)
        out = out + VecPoly.of(head, coef)
    return out


def expand_scalar(e: Any, scalars: Scalars, symmetric: Iterable[str] = ()) -> sp.Expr:
    """A scalar built from dot products, expanded: a ``1 x 1`` matrix expression (e.g.
    ``chi.T * gamma``) or an expression in ``sp.trace`` of such (``sp.trace(chi.T*gamma)**2``).

    Dot products become reduction symbols; anything else (numbers, scalar parameters,
    functions of those) is kept.
    """
    sym = set(symmetric)

    def one(m: MatrixExpr) -> sp.Expr:
        total = sp.Integer(0)
        for c, f in _flat(m, sym):
            if not f or f[0][0] != "r" or f[-1][0] != "v":
                raise ValueError(f"{m}: a 1 x 1 expression must be row-vector ... vector")
            total += c * _segments(f, scalars)
        return total

    if isinstance(e, MatrixExpr):
        if e.shape != (1, 1):
            raise ValueError(f"a potential must be a scalar or 1 x 1, got shape {e.shape}")
        return sp.expand(one(e))
    e = sp.sympify(e)
    rep = {}
    for a in e.atoms(Trace):
        if a.arg.shape != (1, 1):
            raise ValueError(f"{a}: only traces of 1 x 1 expressions (dot products) are supported")
        rep[a] = one(a.arg)
    if e.atoms(MatrixElement) or e.atoms(sp.Sum):
        raise ValueError(
            f"{e}: write dot products as sp.trace(u.T * w) (or return a 1 x 1 matrix "
            "expression), not as [0, 0] elements, which SymPy expands into index sums"
        )
    out = e.xreplace(rep)
    if out.atoms(MatrixExpr):
        raise ValueError(f"{e}: a matrix expression outside sp.trace(...) in a scalar")
    return sp.expand(out)


def _segments(f: tuple[Factor, ...], scalars: Scalars) -> sp.Expr:
    """``f`` is ``r ... v (r ... v)*``: the product of its scalars."""
    return sp.Mul(*[scalars.of(_row_node(seg)) for seg in _split(f)])


def gradient(expr: sp.Expr, name: str, scalars: Scalars) -> VecPoly:
    """``d expr / d name`` for a scalar expression in reduction symbols (a vector)."""
    out = VecPoly()
    for sym in sorted(expr.free_symbols & set(scalars.nodes), key=str):
        node = scalars.nodes[sym]
        if name not in node.names():
            continue
        dexpr = derivative(expr, sym)
        for z in extract(node, name):
            out = out + VecPoly.of(z, dexpr)
    return out


def _substituted(node: Node, name: str, value: VecPoly) -> VecPoly:
    """``node`` with every occurrence of the vector ``name`` replaced by ``value``."""
    rest = list(node.group)
    count = rest.count(name)
    for _ in range(count):
        rest.remove(name)
    out = VecPoly.of(Node(tuple(rest)))
    for _ in range(count):
        out = out.product(value)
    for op, kid in node.kids:
        if name in kid.names():
            inner = _substituted(kid, name, value)
            applied = VecPoly({Node((), ((op, k),)): c for k, c in inner.terms.items()})
        else:
            applied = VecPoly.of(Node((), ((op, kid),)))
        out = out.product(applied)
    return out


def substitute(poly: VecPoly, name: str, value: VecPoly, scalars: Scalars) -> VecPoly:
    """``poly`` with the vector ``name`` replaced by ``value``, in its nodes and in the dot
    products of its coefficients (a vector expression no longer naming ``name``)."""
    out: dict[Node, sp.Expr] = {}
    for node, coef in poly.terms.items():
        c = substitute_scalar(coef, name, value, scalars)
        for k, ck in _substituted(node, name, value).terms.items():
            out[k] = out.get(k, 0) + c * ck
    return VecPoly(out).cleaned()  # expanded once, at the end


def substitute_scalar(expr: Any, name: str, value: VecPoly, scalars: Scalars) -> sp.Expr:
    """A scalar expression in reduction symbols with the vector ``name`` replaced by ``value``."""
    expr = sp.sympify(expr)
    rep = {}
    for sym in expr.free_symbols & set(scalars.nodes):
        node = scalars.nodes[sym]
        if name in node.names():
            rep[sym] = _substituted(node, name, value).reduce(scalars)
    return normal(expr.xreplace(rep)) if rep else expr


# ------------------------------------------------------------------------------------------
# lowering to an IndexedProgram
# ------------------------------------------------------------------------------------------


class Lowering:
    """Emit nodes, scalars and vectors of a derivation as statements of a program.

    Parameters
    ----------
    prog : IndexedProgram
        The program to append to.
    handles : mapping of str to sympy.Symbol
        Vector name -> vector handle of ``prog`` (inputs, or vectors defined earlier).
    matrices : mapping of str to sympy.Symbol
        Parameter-matrix name -> matrix handle of ``prog``.
    scalars : Scalars
        The registry whose symbols appear in coefficients.
    """

    def __init__(
        self,
        prog: Any,
        handles: Mapping[str, sp.Symbol],
        matrices: Mapping[str, sp.Symbol],
        scalars: Scalars,
        scalar_values: Mapping[sp.Symbol, sp.Expr] | None = None,
    ) -> None:
        self.prog = prog
        self.handles = dict(handles)
        self.matrices = dict(matrices)
        self.scalars = scalars
        self.values: dict[sp.Symbol, sp.Expr] = dict(scalar_values or {})
        self._matvec: dict[tuple[Op, Node], sp.Symbol] = {}
        self._count = 0

    def name(self, stem: str) -> str:
        """A fresh statement name."""
        self._count += 1
        return f"rb_{stem}{self._count}"

    def node(self, node: Node) -> sp.Expr:
        """The element-wise expression of ``node`` (matrix-vector products emitted)."""
        out = sp.Integer(1)
        for nm in node.group:
            base = inverse(nm) if nm.startswith(INVERSE) else nm
            if base not in self.handles:
                raise ValueError(f"internal: vector {base!r} has no handle yet")
            out *= self.handles[base] if base == nm else 1 / self.handles[base]
        for op, kid in node.kids:
            key = (op, kid)
            if key not in self._matvec:
                self._matvec[key] = self.prog.matvec(
                    self.name("mv"), self.matrices[op[1]], self.node(kid)
                )
            out *= self._matvec[key]
        return out

    def scalar(self, expr: Any) -> sp.Expr:
        """``expr`` (in reduction symbols) with every reduction emitted; returns an expression
        in scalar handles."""
        expr = sp.sympify(expr).xreplace({DIM: self.prog.n})
        rep = {}
        for sym in sorted(expr.free_symbols & set(self.scalars.nodes), key=str):
            if sym not in self.values:
                self.values[sym] = self.prog.reduce(
                    self.name("s"), self.node(self.scalars.nodes[sym])
                )
            rep[sym] = self.values[sym]
        for sym in expr.free_symbols - set(rep):
            if sym in self.values:  # a scalar parameter
                rep[sym] = self.values[sym]
        return expr.xreplace(rep)

    def coefficient(self, expr: Any) -> sp.Expr:
        """A per-lane coefficient: a scalar statement unless it is a number or one handle."""
        e = self.scalar(expr)
        if e.is_Number or e.is_Symbol:
            return e
        if e.is_Mul and len(e.args) == 2 and e.args[0].is_Number and e.args[1].is_Symbol:
            return e
        return self.prog.scalar(self.name("k"), e)

    def vector(self, poly: VecPoly) -> sp.Expr:
        """The element-wise expression of ``poly``."""
        return sp.Add(*[self.coefficient(c) * self.node(k) for k, c in poly.terms.items()])
