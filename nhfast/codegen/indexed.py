"""Indexed vector programs: the intermediate form of structured kernels (Veselova on SO(n)).

Fully unrolled SymPy expressions of an ``n``-indexed family grow like ``n^2`` (``2n``
components, each a sum of ``n`` terms), and so do CSE and compile times.  An
:class:`IndexedProgram` keeps the index: it is a straight-line list of statements over
per-lane scalars and length-``n`` vectors,

* ``scalar``   -- ``s = f(scalars, components)``                      (no index),
* ``reduce``   -- ``s = sum_i f_i(vectors[i], scalars)``               (a dot product),
* ``vector``   -- ``v[i] = f(vectors[i], scalars)``                    (element-wise),
* ``unrolled`` -- ``v[k] = f_k(scalars, components)`` for ``k < n``    (explicit components),
* ``matvec``   -- ``v[i] = sum_j H[i, j] f(vectors[j], scalars)``      (dense, ``O(n^2)``),
* ``solve``    -- ``K v = f`` with ``K = diag(d) + sum_t l_t M_t r_t``  (dense LU, ``O(n^3)``),

and named outputs (kernel families such as ``rhs``, ``observables``, ``divergence``), each a
list of blocks: a vector expression (``n`` rows) or a scalar expression (one row).  Expressions
are ordinary SymPy expressions in the handles returned by the builder methods; a vector handle
stands for its ``i``-th element inside element-wise expressions.  :meth:`IndexedProgram.to_sympy`
gives the unrolled SymPy expressions of a program (for symbolic checks at small ``n``);
:mod:`nhfast.codegen.structured` renders it to C and :mod:`nhfast.codegen.numpy_backend`
evaluates it with NumPy.  ``H`` and ``M_t`` are ``n x n`` parameter matrices
(:meth:`IndexedProgram.param_matrix`); ``matvec`` and ``solve`` are the per-lane dense linear
algebra of inertia operators without diagonal-plus-low-rank structure.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import sympy as sp

from nhfast._abi import SYMBOL

__all__ = [
    "IndexedProgram",
]

#: Statement kinds that loop over the index.
INDEXED_KINDS = frozenset({"reduce", "vector"})

#: Statement kinds of per-lane dense linear algebra (all their expressions are element-wise).
DENSE_KINDS = frozenset({"matvec", "solve"})


@dataclass(frozen=True)
class Statement:
    """One assignment of an :class:`IndexedProgram`.

    Attributes
    ----------
    kind : {"scalar", "reduce", "vector", "unrolled", "matvec", "solve"}
    target : sympy.Symbol
        The handle defined by the statement (a scalar or a vector handle).
    exprs : tuple of sympy.Expr
        One expression (``scalar``, ``reduce``, ``vector``; ``matvec``: the element-wise
        operand), ``n`` (``unrolled``), or for ``solve`` the element-wise
        ``(rhs, diag, left_1, right_1, left_2, right_2, ...)``.
    matrices : tuple of (sympy.Symbol or None)
        ``matvec``: ``(H,)``; ``solve``: the matrix handle of each term (``None``: the
        rank-one term ``left right^T``). Empty for the other kinds.
    transpose : bool
        ``matvec`` with ``H^T``.
    logdet : sympy.Symbol or None
        ``solve``: the scalar handle set to ``log|det K|`` (a second target), if any.
    """

    kind: str
    target: sp.Symbol
    exprs: tuple[sp.Expr, ...]
    matrices: tuple[sp.Symbol | None, ...] = ()
    transpose: bool = False
    logdet: sp.Symbol | None = None

    @property
    def targets(self) -> tuple[sp.Symbol, ...]:
        """Every handle the statement defines (``target``, and ``logdet`` of a solve)."""
        return (self.target,) if self.logdet is None else (self.target, self.logdet)

    @property
    def terms(self) -> list[tuple[sp.Expr, sp.Symbol | None, sp.Expr]]:
        """``solve``: the terms ``(left, M, right)`` of ``K`` (besides the diagonal)."""
        if self.kind != "solve":
            return []
        e = self.exprs
        return [(e[2 + 2 * t], m, e[3 + 2 * t]) for t, m in enumerate(self.matrices)]


@dataclass(frozen=True)
class Input:
    """Where an input handle lives: a block of the state or parameter vector, or the time."""

    where: str  # "x", "par" or "t"
    offset: int
    vector: bool
    matrix: bool = False  # an n x n parameter matrix (n * n entries, row-major)


class IndexedProgram:
    """A straight-line program over per-lane scalars and length-``n`` vectors.

    Parameters
    ----------
    n : int
        Length of every vector (the range of the index ``i``), ``n >= 1``.

    Examples
    --------
    >>> prog = IndexedProgram(3)
    >>> x = prog.state_vector("x")
    >>> a = prog.param_vector("a")
    >>> q = prog.reduce("q", a * x**2)          # (A x, x)
    >>> prog.output("rhs", [-a * x / q])
    """

    def __init__(self, n: int) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        self.n = n
        self.index = sp.Symbol("nh_index", integer=True, nonnegative=True)
        self._inputs: dict[sp.Symbol, Input] = {}
        self._vectors: set[sp.Symbol] = set()
        self._matrices: set[sp.Symbol] = set()
        self._components: dict[sp.Symbol, list[sp.Symbol]] = {}
        self._owner: dict[sp.Symbol, tuple[sp.Symbol, int]] = {}  # component -> (vector, k)
        self._state_order: list[sp.Symbol] = []  # component symbols, in state order
        self._param_order: list[sp.Symbol] = []
        self._n_state = 0
        self._n_par = 0
        self.time: sp.Symbol | None = None
        self.statements: list[Statement] = []
        self.outputs: dict[str, list[sp.Expr]] = {}
        self.output_names: dict[str, list[str]] = {}
        #: Scalar blocks ``expr`` of a system's domain conditions ``expr > 0``, in the index
        #: (not a kernel family: :meth:`nhfast.structured_field.StructuredVectorField.
        #: events_program` makes them one when the domain is watched).
        self.domain_blocks: list[sp.Expr] = []
        self._names: set[str] = set()

    # ------------------------------------------------------------------ building ----
    def _new(self, name: str, vector: bool) -> sp.Symbol:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"name must be an identifier, got {name!r}")
        if name in self._names:
            raise ValueError(f"name {name!r} is already defined in this program")
        self._names.add(name)
        sym = sp.Symbol(name, real=True)
        if vector:
            self._vectors.add(sym)
        return sym

    def _input_vector(
        self, name: str, where: str, components: Sequence[sp.Symbol] | None, positive: bool
    ) -> sp.Symbol:
        sym = self._new(name, vector=True)
        if components is None:
            components = sp.symbols(f"{name}1:{self.n + 1}", real=True, positive=positive or None)
        comps = list(components)
        if len(comps) != self.n or not all(isinstance(c, sp.Symbol) for c in comps):
            raise ValueError(f"components of {name!r} must be {self.n} sympy Symbols")
        taken = set(self._owner) | set(self._inputs)
        if taken & set(comps):
            raise ValueError(f"components of {name!r} reuse symbols already defined")
        self._append_input(sym, where, comps, vector=True)
        self._components[sym] = comps
        for k, c in enumerate(comps):
            self._owner[c] = (sym, k)
        return sym

    def _append_input(
        self, sym: sp.Symbol, where: str, entries: list[sp.Symbol], vector: bool
    ) -> None:
        """Place ``entries`` (those of ``sym``) next in the state (``"x"``) or parameter vector."""
        offset = self._n_state if where == "x" else self._n_par
        self._inputs[sym] = Input(where, offset, vector)
        if where == "x":
            self._n_state += len(entries)
            self._state_order += entries
        else:
            self._n_par += len(entries)
            self._param_order += entries

    def state_vector(self, name: str, components: Sequence[sp.Symbol] | None = None) -> sp.Symbol:
        """Next ``n`` entries of the state vector; returns the vector handle.

        ``components`` names the ``n`` scalar symbols (default ``name1..name<n>``) used by
        :meth:`to_sympy` and by ``scalar``/``unrolled`` statements (see :meth:`components`).
        """
        return self._input_vector(name, "x", components, positive=False)

    def param_vector(
        self, name: str, components: Sequence[sp.Symbol] | None = None, positive: bool = False
    ) -> sp.Symbol:
        """Next ``n`` entries of the parameter vector; returns the vector handle."""
        return self._input_vector(name, "par", components, positive=positive)

    def state_scalar(self, name: str) -> sp.Symbol:
        """Next entry of the state vector (a scalar); returns its symbol."""
        sym = self._new(name, vector=False)
        self._append_input(sym, "x", [sym], vector=False)
        return sym

    def param_scalar(self, name: str) -> sp.Symbol:
        """Next entry of the parameter vector (a scalar); returns its symbol."""
        sym = self._new(name, vector=False)
        self._append_input(sym, "par", [sym], vector=False)
        return sym

    def param_matrix(
        self,
        name: str,
        components: Sequence[sp.Symbol] | Sequence[Sequence[sp.Symbol]] | None = None,
    ) -> sp.Symbol:
        """Next ``n * n`` entries of the parameter vector: an ``n x n`` matrix, row-major.

        Returns the matrix handle, usable in :meth:`matvec` and :meth:`solve` (not in
        expressions). ``components`` names the entries, flat row-major or as ``n`` rows
        (default ``name_i_j``, ``i, j`` from 1); they serve :meth:`to_sympy` and may appear
        in ``scalar``/``unrolled`` statements (see :meth:`components`).
        """
        n = self.n
        if components is None:
            comps = [
                sp.Symbol(f"{name}_{i + 1}_{j + 1}", real=True) for i in range(n) for j in range(n)
            ]
        else:
            comps = list(components)
            if len(comps) == n and all(not isinstance(c, sp.Basic) for c in comps):
                comps = [c for row in comps for c in row]
            comps = list(comps)
        if len(comps) != n * n or not all(isinstance(c, sp.Symbol) for c in comps):
            raise ValueError(f"components of {name!r} must be {n * n} sympy Symbols")
        if len(set(comps)) != n * n or (set(self._owner) | set(self._inputs)) & set(comps):
            raise ValueError(f"components of {name!r} reuse symbols already defined")
        sym = self._new(name, vector=False)
        self._matrices.add(sym)
        self._inputs[sym] = Input("par", self._n_par, False, matrix=True)
        self._n_par += n * n
        self._param_order += comps
        self._components[sym] = comps
        for k, c in enumerate(comps):
            self._owner[c] = (sym, k)
        return sym

    def time_symbol(self, name: str = "t") -> sp.Symbol:
        """The time of each lane, as a scalar symbol."""
        if self.time is None:
            self.time = self._new(name, vector=False)
            self._inputs[self.time] = Input("t", 0, False)
        return self.time

    def components(self, vector: sp.Symbol) -> list[sp.Symbol]:
        """The ``n`` component symbols of a vector handle (for ``scalar``/``unrolled`` use).

        Inputs have the component symbols given at creation; for temporaries fresh symbols
        are made (the generated code then stores the vector). For a matrix handle: its
        ``n * n`` entries, row-major.
        """
        if vector in self._matrices:
            return list(self._components[vector])
        if vector not in self._vectors:
            raise ValueError(f"{vector!r} is not a vector handle of this program")
        if vector not in self._components:
            comps = [sp.Symbol(f"nh_{vector.name}_{k}", real=True) for k in range(self.n)]
            self._components[vector] = comps
            for k, c in enumerate(comps):
                self._owner[c] = (vector, k)
        return list(self._components[vector])

    def _check(self, exprs: Sequence[sp.Expr], indexed: bool, what: str) -> tuple[sp.Expr, ...]:
        out = []
        defined = set(self._inputs) | {t for s in self.statements for t in s.targets}
        for e in exprs:
            e = sp.sympify(e)
            if not isinstance(e, sp.Expr):
                raise TypeError(f"{what}: expected a scalar sympy expression, got {e!r}")
            for s in e.free_symbols:
                if s == self.index:
                    if not indexed:
                        raise ValueError(f"{what}: the index is only defined in indexed loops")
                elif s in self._owner:
                    if self._owner[s][0] not in defined:
                        raise ValueError(f"{what}: component {s} of an undefined vector")
                elif s not in defined:
                    raise ValueError(f"{what}: symbol {s} is not defined in this program")
                elif s in self._matrices:
                    raise ValueError(
                        f"{what}: matrix {s} used in an expression (use matvec or solve, "
                        "or its components())"
                    )
                elif s in self._vectors and not indexed:
                    raise ValueError(
                        f"{what}: vector {s} used outside an element-wise expression "
                        "(reduce it to a scalar, or use its components())"
                    )
            out.append(e)
        return tuple(out)

    def scalar(self, name: str, expr: sp.Expr) -> sp.Symbol:
        """``name = expr`` per lane (scalars, components of vectors, time)."""
        exprs = self._check([expr], indexed=False, what=f"scalar {name!r}")
        sym = self._new(name, vector=False)
        self.statements.append(Statement("scalar", sym, exprs))
        return sym

    def reduce(self, name: str, expr: sp.Expr) -> sp.Symbol:
        """``name = sum_i expr[i]`` per lane (``expr`` element-wise in vectors)."""
        exprs = self._check([expr], indexed=True, what=f"reduce {name!r}")
        sym = self._new(name, vector=False)
        self.statements.append(Statement("reduce", sym, exprs))
        return sym

    def vector(self, name: str, expr: sp.Expr) -> sp.Symbol:
        """Element-wise ``name[i] = expr[i]``; returns the vector handle."""
        exprs = self._check([expr], indexed=True, what=f"vector {name!r}")
        sym = self._new(name, vector=True)
        self.statements.append(Statement("vector", sym, exprs))
        return sym

    def unrolled(self, name: str, exprs: Sequence[sp.Expr]) -> sp.Symbol:
        """A vector given by ``n`` explicit component expressions (one joint CSE)."""
        exprs = list(exprs)
        if len(exprs) != self.n:
            raise ValueError(f"unrolled {name!r} needs {self.n} expressions, got {len(exprs)}")
        checked = self._check(exprs, indexed=False, what=f"unrolled {name!r}")
        sym = self._new(name, vector=True)
        self.statements.append(Statement("unrolled", sym, checked))
        return sym

    def _matrix(self, m: object, what: str) -> sp.Symbol:
        if not isinstance(m, sp.Symbol) or m not in self._matrices:
            raise ValueError(f"{what}: {m!r} is not a matrix handle of this program")
        return m

    def matvec(self, name: str, H: sp.Symbol, expr: sp.Expr, transpose: bool = False) -> sp.Symbol:
        """``name[i] = sum_j H[i, j] expr[j]`` per lane (``H^T`` with ``transpose``).

        ``expr`` is element-wise (vectors, scalars, the index), evaluated at ``j``; ``H`` a
        matrix handle (:meth:`param_matrix`). ``O(n^2)`` per lane. Returns the vector handle.
        """
        what = f"matvec {name!r}"
        self._matrix(H, what)
        if not isinstance(transpose, bool):
            raise TypeError(f"{what}: transpose must be a bool, got {transpose!r}")
        exprs = self._check([expr], indexed=True, what=what)
        sym = self._new(name, vector=True)
        self.statements.append(Statement("matvec", sym, exprs, (H,), transpose))
        return sym

    def solve(
        self,
        name: str,
        rhs: sp.Expr,
        diag: sp.Expr = 0,
        terms: Sequence[tuple[sp.Expr, sp.Symbol | None, sp.Expr]] = (),
        logdet: str | None = None,
    ) -> sp.Symbol | tuple[sp.Symbol, sp.Symbol]:
        """The solution ``x`` of the dense per-lane system ``K x = rhs``.

        ``K[i, j] = delta_ij diag[i] + sum_t left_t[i] M_t[i, j] right_t[j]`` for the terms
        ``(left_t, M_t, right_t)``; ``M_t`` a matrix handle (:meth:`param_matrix`) or ``None``
        for the rank-one term ``left_t right_t^T``. ``rhs``, ``diag``, ``left_t``, ``right_t``
        are element-wise expressions. ``K`` need not be symmetric: the kernels use LU with
        partial pivoting (``O(n^3)`` per lane, ``n (n + 1)`` doubles of workspace); a lane
        with a zero or non-finite pivot gets NaN in ``x`` (and in ``logdet``).

        Parameters
        ----------
        name : str
            Name of the solution vector.
        rhs, diag : sympy.Expr
            Right-hand side and diagonal (element-wise).
        terms : sequence of (sympy.Expr, sympy.Symbol or None, sympy.Expr)
            The terms of ``K`` besides the diagonal.
        logdet : str, optional
            Also define the scalar ``logdet = log|det K|`` under this name.

        Returns
        -------
        sympy.Symbol or (sympy.Symbol, sympy.Symbol)
            The vector handle ``x``, or ``(x, logdet handle)`` when ``logdet`` is given.
        """
        what = f"solve {name!r}"
        exprs: list[sp.Expr] = [rhs, diag]
        mats: list[sp.Symbol | None] = []
        for term in terms:
            if not isinstance(term, tuple | list) or len(term) != 3:
                raise ValueError(f"{what}: a term is (left, M or None, right), got {term!r}")
            left, m, right = term
            mats.append(None if m is None else self._matrix(m, what))
            exprs += [left, right]
        checked = self._check(exprs, indexed=True, what=what)
        if logdet is not None and (logdet == name or logdet in self._names):
            raise ValueError(f"name {logdet!r} is already defined in this program")
        sym = self._new(name, vector=True)
        ld = None if logdet is None else self._new(logdet, vector=False)
        self.statements.append(Statement("solve", sym, checked, tuple(mats), False, ld))
        return sym if ld is None else (sym, ld)

    def output(self, family: str, blocks: Sequence[sp.Expr], names: Sequence[str] = ()) -> None:
        """Define kernel family ``family`` as the concatenation of ``blocks``.

        A block containing a vector handle is element-wise (``n`` rows), otherwise it is one
        row.  ``names`` optionally labels the blocks (observables).
        """
        if family not in SYMBOL:
            raise ValueError(f"unknown kernel family {family!r}; known: {sorted(SYMBOL)}")
        blocks = list(blocks)
        if not blocks:
            raise ValueError(f"output {family!r} needs at least one block")
        checked = []
        for b in blocks:
            b = sp.sympify(b)
            checked += self._check([b], indexed=self.is_indexed(b), what=f"output {family!r}")
        if names and len(names) != len(blocks):
            raise ValueError(f"output {family!r}: {len(names)} names for {len(blocks)} blocks")
        self.outputs[family] = checked
        self.output_names[family] = list(names)

    def is_indexed(self, expr: sp.Expr) -> bool:
        """Whether ``expr`` is element-wise (uses a vector handle or the index)."""
        return bool(sp.sympify(expr).free_symbols & (self._vectors | {self.index}))

    def copy(self) -> IndexedProgram:
        """An independent copy (statements and outputs can be appended to it)."""
        new = copy.copy(self)
        for attr in (
            "_inputs",
            "_components",
            "_owner",
            "outputs",
            "output_names",
        ):
            setattr(new, attr, dict(getattr(self, attr)))
        new._vectors = set(self._vectors)
        new._matrices = set(self._matrices)
        new._names = set(self._names)
        new._state_order = list(self._state_order)
        new._param_order = list(self._param_order)
        new.statements = list(self.statements)
        new.domain_blocks = list(self.domain_blocks)
        return new

    # --------------------------------------------------------------- properties ----
    @property
    def inputs(self) -> Mapping[sp.Symbol, Input]:
        """Input handles (state/parameter scalars and vectors, the time) -> where they live."""
        return self._inputs

    @property
    def vectors(self) -> AbstractSet[sp.Symbol]:
        """All vector handles (inputs and temporaries)."""
        return self._vectors

    @property
    def matrices(self) -> AbstractSet[sp.Symbol]:
        """All matrix handles (parameter matrices)."""
        return self._matrices

    @property
    def owners(self) -> Mapping[sp.Symbol, tuple[sp.Symbol, int]]:
        """Component symbol -> (its vector handle, its position)."""
        return self._owner

    @property
    def n_state(self) -> int:
        """Length of the state vector."""
        return self._n_state

    @property
    def n_params(self) -> int:
        """Length of the parameter vector."""
        return self._n_par

    @property
    def state_symbols(self) -> list[sp.Symbol]:
        """Scalar symbols of the state vector, in order (components of state vectors)."""
        return list(self._state_order)

    @property
    def param_symbols(self) -> list[sp.Symbol]:
        """Scalar symbols of the parameter vector, in order."""
        return list(self._param_order)

    def n_out(self, family: str) -> int:
        """Number of rows of output ``family``."""
        return sum(self.n if self.is_indexed(b) else 1 for b in self.outputs[family])

    # --------------------------------------------------------------- unrolling ----
    def to_sympy(self, family: str) -> list[sp.Expr]:
        """Unrolled SymPy expressions of output ``family`` in the state/param symbols.

        The size grows like ``n^2`` for dot-product structure; meant for symbolic checks at
        small ``n`` and for the generic (unrolled) code path.
        """
        if family not in self.outputs:
            raise ValueError(f"the program has no output {family!r}; has {sorted(self.outputs)}")
        need = self.needed(self.outputs[family])
        val: dict[sp.Symbol, sp.Expr] = {}
        vec: dict[sp.Symbol, list[sp.Expr]] = {}
        for sym, inp in self._inputs.items():
            if inp.vector or inp.matrix:
                vec[sym] = list(self._components[sym])  # a matrix: flat, row-major
            else:
                val[sym] = sym

        def element(e: sp.Expr, k: int) -> sp.Expr:
            rep = {v: vec[v][k] for v in e.free_symbols if v in vec}
            rep.update({s: val[s] for s in e.free_symbols if s in val})
            rep.update(_component_values(self, e, vec))
            if self.index in e.free_symbols:
                rep[self.index] = sp.Integer(k)
            return e.xreplace(rep)

        def lane(e: sp.Expr) -> sp.Expr:
            rep = {s: val[s] for s in e.free_symbols if s in val}
            rep.update(_component_values(self, e, vec))
            return e.xreplace(rep)

        n = self.n
        for st in self.statements:
            if not need & set(st.targets):
                continue
            if st.kind == "scalar":
                val[st.target] = lane(st.exprs[0])
            elif st.kind == "reduce":
                val[st.target] = sp.Add(*[element(st.exprs[0], k) for k in range(n)])
            elif st.kind == "vector":
                vec[st.target] = [element(st.exprs[0], k) for k in range(n)]
            elif st.kind == "matvec":
                h = vec[st.matrices[0]]
                e = [element(st.exprs[0], j) for j in range(n)]
                pos = [
                    [j * n + i if st.transpose else i * n + j for j in range(n)] for i in range(n)
                ]
                vec[st.target] = [
                    sp.Add(*[h[pos[i][j]] * e[j] for j in range(n)]) for i in range(n)
                ]
            elif st.kind == "solve":
                K = sp.diag(*[element(st.exprs[1], i) for i in range(n)])
                for left, m, right in st.terms:
                    lv = [element(left, i) for i in range(n)]
                    rv = [element(right, j) for j in range(n)]
                    h = [sp.Integer(1)] * (n * n) if m is None else vec[m]
                    K += sp.Matrix(
                        [[lv[i] * h[i * n + j] * rv[j] for j in range(n)] for i in range(n)]
                    )
                if st.target in need:
                    rhs = sp.Matrix([element(st.exprs[0], i) for i in range(n)])
                    vec[st.target] = list(K.LUsolve(rhs))
                if st.logdet in need:  # unevaluated: evaluation asks costly assumptions
                    det = sp.Abs(K.det(method="berkowitz"), evaluate=False)
                    val[st.logdet] = sp.log(det, evaluate=False)
            else:
                vec[st.target] = [lane(e) for e in st.exprs]
        out: list[sp.Expr] = []
        for b in self.outputs[family]:
            if self.is_indexed(b):
                out += [element(b, k) for k in range(self.n)]
            else:
                out.append(lane(b))
        return out

    def deps(self, exprs: Sequence[sp.Expr]) -> set[sp.Symbol]:
        """Handles (scalars and vectors, via components too) used by ``exprs``."""
        out: set[sp.Symbol] = set()
        for e in exprs:
            for s in sp.sympify(e).free_symbols:
                out.add(self._owner[s][0] if s in self._owner else s)
        return out

    def needed(self, exprs: Sequence[sp.Expr]) -> set[sp.Symbol]:
        """Statement targets needed (transitively) by ``exprs``.

        A statement is needed when any of its :attr:`Statement.targets` is in the set.
        """
        need = self.deps(exprs)
        for st in reversed(self.statements):
            if need & set(st.targets):
                need |= self.deps(st.exprs) | {m for m in st.matrices if m is not None}
        return need

    def with_reciprocals(self, family: str) -> IndexedProgram:
        """A copy where element-wise divisions by a vector use its stored reciprocal.

        Every ``v**(-k)`` (``v`` a vector handle, ``k > 0``) in an element-wise statement or
        block of output ``family`` becomes ``r**k`` with a new vector statement ``r = 1/v``
        placed before the first use: one division per component and lane instead of one per
        occurrence (operands of ``matvec``/``solve`` included). Returns ``self`` when there is
        nothing to rewrite.
        """
        elementwise = INDEXED_KINDS | DENSE_KINDS
        exprs = [e for st in self.statements if st.kind in elementwise for e in st.exprs]
        exprs += [b for b in self.outputs[family] if self.is_indexed(b)]
        found: set[sp.Symbol] = set()
        for e in exprs:
            found |= {p.base for p in e.atoms(sp.Pow) if is_reciprocal(p, self._vectors)}
        if not found:
            return self
        new = self.copy()
        inv: dict[sp.Symbol, sp.Symbol] = {}
        for v in sorted(found, key=str):
            name = f"nh_inv_{v.name}"
            k = 0
            while name in new._names:
                k += 1
                name = f"nh_inv{k}_{v.name}"
            inv[v] = new._new(name, vector=True)
        bases = set(inv)

        def rewrite(e: sp.Expr) -> sp.Expr:
            return e.replace(lambda u: is_reciprocal(u, bases), lambda u: inv[u.base] ** (-u.exp))

        statements: list[Statement] = []
        placed: set[sp.Symbol] = set()

        def place(e: sp.Expr) -> None:
            for v in sorted({p.base for p in e.atoms(sp.Pow) if is_reciprocal(p, bases)}, key=str):
                if v not in placed:
                    placed.add(v)
                    statements.append(Statement("vector", inv[v], (1 / v,)))

        for st in self.statements:
            if st.kind in elementwise:
                for e in st.exprs:
                    place(e)
                st = dataclasses.replace(st, exprs=tuple(rewrite(e) for e in st.exprs))
            statements.append(st)
        blocks = []
        for b in self.outputs[family]:
            if self.is_indexed(b):
                place(b)
                b = rewrite(b)
            blocks.append(b)
        new.statements = statements
        new.outputs[family] = blocks
        return new

    def with_dense_operands(self) -> IndexedProgram:
        """A copy where every operand of a ``matvec``/``solve`` is a handle or a number.

        An element-wise operand that is not a vector handle, a scalar handle or a number
        becomes a new ``vector`` statement (``scalar`` if it uses no vector and no index)
        placed just before its dense statement, so the dense loops read stored values.
        Returns ``self`` when there is nothing to rewrite.
        """

        def plain(e: sp.Expr) -> bool:
            return e.is_Number or (isinstance(e, sp.Symbol) and e != self.index)

        if all(plain(e) for st in self.statements if st.kind in DENSE_KINDS for e in st.exprs):
            return self
        new = self.copy()
        statements: list[Statement] = []
        for st in self.statements:
            if st.kind in DENSE_KINDS and not all(plain(e) for e in st.exprs):
                ops = []
                for k, e in enumerate(st.exprs):
                    if plain(e):
                        ops.append(e)
                        continue
                    name = f"nh_op{k}_{st.target.name}"
                    while name in new._names:
                        name = f"nh_{name}"
                    kind = "vector" if self.is_indexed(e) else "scalar"
                    sym = new._new(name, vector=kind == "vector")
                    statements.append(Statement(kind, sym, (e,)))
                    ops.append(sym)
                st = dataclasses.replace(st, exprs=tuple(ops))
            statements.append(st)
        new.statements = statements
        return new


def _component_values(prog: IndexedProgram, e: sp.Expr, vec: dict) -> dict:
    rep = {}
    for s in e.free_symbols:
        if s in prog._owner:
            v, k = prog._owner[s]
            if v in vec:
                rep[s] = vec[v][k]
    return rep


def is_reciprocal(e: sp.Expr, bases: AbstractSet[sp.Symbol]) -> bool:
    """Whether ``e`` is ``b**(-k)`` for a symbol ``b`` in ``bases`` and an integer ``k > 0``."""
    return isinstance(e, sp.Pow) and e.base in bases and e.exp.is_Integer and bool(e.exp < 0)
