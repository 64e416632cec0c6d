"""Indexed vector programs: structured code generation for families such as Veselova on SO(n).

Fully unrolled SymPy expressions of an ``n``-indexed family grow like ``n^2`` (``2n``
components, each a sum of ``n`` terms), and so do CSE and compile times.  An
:class:`IndexedProgram` keeps the index: it is a straight-line list of statements over
per-lane scalars and length-``n`` vectors,

* ``scalar``   -- ``s = f(scalars, components)``                      (no index),
* ``reduce``   -- ``s = sum_i f_i(vectors[i], scalars)``               (a dot product),
* ``vector``   -- ``v[i] = f(vectors[i], scalars)``                    (element-wise),
* ``unrolled`` -- ``v[k] = f_k(scalars, components)`` for ``k < n``    (explicit components),

and named outputs (kernel families such as ``rhs``, ``observables``, ``divergence``), each a
list of blocks: a vector expression (``n`` rows) or a scalar expression (one row).  Expressions
are ordinary SymPy expressions in the handles returned by the builder methods; a vector handle
stands for its ``i``-th element inside element-wise expressions.

:func:`generate_structured_c` renders a program to C99 kernels of the kernel ABI
(``csrc/nh_abi.h``) in one of two shapes.  *Looped* (the default for ``n >``
:data:`UNROLL_MAX_N`): the lanes are taken in chunks of 64 with a stack workspace (no
allocation per call); in every chunk, consecutive indexed statements are fused into one loop
``for i < n { for l < L { ... } }`` (lanes innermost, struct-of-arrays), element-wise
temporaries used only inside their loop stay in registers, reductions accumulate into
per-lane work arrays.  Work and code size per output component are ``O(n)`` and ``O(1)``:
the source does not grow with ``n`` except through explicit ``unrolled`` statements.
*Unrolled* (small ``n``): one loop over the lanes with the index loops expanded in the source,
every intermediate a register.  In both shapes a division by a vector ``v`` becomes a
multiplication by its reciprocal, formed once per component and lane (and kept in the
workspace for later loops), and reciprocals of loaded per-lane scalars are shared within a
loop body; the results agree with the direct expressions to round-off.
:meth:`IndexedProgram.to_sympy` gives the unrolled SymPy expressions of the same program (for
symbolic checks at small ``n``), and :class:`StructuredNumpyKernel` evaluates it with NumPy
(the backend used without a C compiler).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import sympy as sp

from nhfast._abi import ABI_VERSION, HAS, SYMBOL
from nhfast.codegen.ckernels import _PREAMBLE, _Printer

__all__ = [
    "IndexedProgram",
    "Statement",
    "StructuredNumpyKernel",
    "generate_structured_c",
    "structured_numpy_kernels",
]

_KINDS = ("scalar", "reduce", "vector", "unrolled")
_INDEXED = frozenset({"reduce", "vector"})


@dataclass(frozen=True)
class Statement:
    """One assignment of an :class:`IndexedProgram`.

    Attributes
    ----------
    kind : {"scalar", "reduce", "vector", "unrolled"}
    target : sympy.Symbol
        The handle defined by the statement (a scalar or a vector handle).
    exprs : tuple of sympy.Expr
        One expression (``scalar``, ``reduce``, ``vector``) or ``n`` (``unrolled``).
    """

    kind: str
    target: sp.Symbol
    exprs: tuple[sp.Expr, ...]


@dataclass(frozen=True)
class _Input:
    """A block of the state or parameter vector (or the time)."""

    where: str  # "x", "par" or "t"
    offset: int
    vector: bool


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
        self._inputs: dict[sp.Symbol, _Input] = {}
        self._vectors: set[sp.Symbol] = set()
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
        offset = self._n_state if where == "x" else self._n_par
        self._inputs[sym] = _Input(where, offset, True)
        self._components[sym] = comps
        for k, c in enumerate(comps):
            self._owner[c] = (sym, k)
        if where == "x":
            self._n_state += self.n
            self._state_order += comps
        else:
            self._n_par += self.n
            self._param_order += comps
        return sym

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
        self._inputs[sym] = _Input("x", self._n_state, False)
        self._n_state += 1
        self._state_order.append(sym)
        return sym

    def param_scalar(self, name: str) -> sp.Symbol:
        """Next entry of the parameter vector (a scalar); returns its symbol."""
        sym = self._new(name, vector=False)
        self._inputs[sym] = _Input("par", self._n_par, False)
        self._n_par += 1
        self._param_order.append(sym)
        return sym

    def time_symbol(self, name: str = "t") -> sp.Symbol:
        """The time of each lane, as a scalar symbol."""
        if self.time is None:
            self.time = self._new(name, vector=False)
            self._inputs[self.time] = _Input("t", 0, False)
        return self.time

    def components(self, vector: sp.Symbol) -> list[sp.Symbol]:
        """The ``n`` component symbols of a vector handle (for ``scalar``/``unrolled`` use).

        Inputs have the component symbols given at creation; for temporaries fresh symbols
        are made (the generated code then stores the vector).
        """
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
        defined = set(self._inputs) | {s.target for s in self.statements}
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
            checked += self._check([b], indexed=self._is_indexed(b), what=f"output {family!r}")
        if names and len(names) != len(blocks):
            raise ValueError(f"output {family!r}: {len(names)} names for {len(blocks)} blocks")
        self.outputs[family] = checked
        self.output_names[family] = list(names)

    def _is_indexed(self, expr: sp.Expr) -> bool:
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
        new._names = set(self._names)
        new._state_order = list(self._state_order)
        new._param_order = list(self._param_order)
        new.statements = list(self.statements)
        return new

    # --------------------------------------------------------------- properties ----
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
        return sum(self.n if self._is_indexed(b) else 1 for b in self.outputs[family])

    # --------------------------------------------------------------- unrolling ----
    def to_sympy(self, family: str) -> list[sp.Expr]:
        """Unrolled SymPy expressions of output ``family`` in the state/param symbols.

        The size grows like ``n^2`` for dot-product structure; meant for symbolic checks at
        small ``n`` and for the generic (unrolled) code path.
        """
        if family not in self.outputs:
            raise ValueError(f"the program has no output {family!r}; has {sorted(self.outputs)}")
        need = _needed(self, self.outputs[family])
        val: dict[sp.Symbol, sp.Expr] = {}
        vec: dict[sp.Symbol, list[sp.Expr]] = {}
        for sym, inp in self._inputs.items():
            if inp.vector:
                vec[sym] = list(self._components[sym])
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

        for st in self.statements:
            if st.target not in need:
                continue
            if st.kind == "scalar":
                val[st.target] = lane(st.exprs[0])
            elif st.kind == "reduce":
                val[st.target] = sp.Add(*[element(st.exprs[0], k) for k in range(self.n)])
            elif st.kind == "vector":
                vec[st.target] = [element(st.exprs[0], k) for k in range(self.n)]
            else:
                vec[st.target] = [lane(e) for e in st.exprs]
        out: list[sp.Expr] = []
        for b in self.outputs[family]:
            if self._is_indexed(b):
                out += [element(b, k) for k in range(self.n)]
            else:
                out.append(lane(b))
        return out


def _component_values(prog: IndexedProgram, e: sp.Expr, vec: dict) -> dict:
    rep = {}
    for s in e.free_symbols:
        if s in prog._owner:
            v, k = prog._owner[s]
            if v in vec:
                rep[s] = vec[v][k]
    return rep


def _deps(prog: IndexedProgram, exprs: Sequence[sp.Expr]) -> set[sp.Symbol]:
    """Handles (scalars and vectors, via components too) used by ``exprs``."""
    out: set[sp.Symbol] = set()
    for e in exprs:
        for s in sp.sympify(e).free_symbols:
            out.add(prog._owner[s][0] if s in prog._owner else s)
    return out


def _needed(prog: IndexedProgram, exprs: Sequence[sp.Expr]) -> set[sp.Symbol]:
    """Statement targets needed (transitively) by ``exprs``."""
    need = _deps(prog, exprs)
    for st in reversed(prog.statements):
        if st.target in need:
            need |= _deps(prog, st.exprs)
    return need


# ---------------------------------------------------------------------------------------------
# C rendering
# ---------------------------------------------------------------------------------------------


@dataclass
class _Step:
    """A statement (or an output block) placed in a loop group."""

    kind: str  # scalar / reduce / vector / unrolled / out_vec / out_scalar
    target: sp.Symbol | None
    exprs: tuple[sp.Expr, ...]
    row: int = 0  # first output row of an output block


def _steps(prog: IndexedProgram, family: str) -> list[_Step]:
    blocks = prog.outputs[family]
    need = _needed(prog, blocks)
    steps = [_Step(st.kind, st.target, st.exprs) for st in prog.statements if st.target in need]
    row = 0
    for b in blocks:
        if prog._is_indexed(b):
            steps.append(_Step("out_vec", None, (b,), row))
            row += prog.n
        else:
            steps.append(_Step("out_scalar", None, (b,), row))
            row += 1
    return steps


def _groups(prog: IndexedProgram, steps: list[_Step]) -> list[tuple[bool, list[_Step]]]:
    """Fuse consecutive steps into loops: (indexed, steps).

    A loop cannot use a reduction finished in the same loop, nor the components (fixed
    entries) of a vector built in the same loop: both start a new loop.
    """
    groups: list[tuple[bool, list[_Step]]] = []
    cur: list[_Step] = []
    cur_indexed = False
    for st in steps:
        indexed = st.kind in _INDEXED or st.kind == "out_vec"
        uses = _deps(prog, st.exprs)
        owners = {prog._owner[s][0] for e in st.exprs for s in e.free_symbols if s in prog._owner}
        brk = not cur or indexed != cur_indexed
        if not brk:
            brk = any((s.kind == "reduce" and s.target in uses) or s.target in owners for s in cur)
        if brk:
            if cur:
                groups.append((cur_indexed, cur))
            cur, cur_indexed = [], indexed
        cur.append(st)
    if cur:
        groups.append((cur_indexed, cur))
    return groups


class _Layout:
    """Where every scalar and stored vector lives (work array offsets in units of L)."""

    def __init__(self, prog: IndexedProgram, groups: list[tuple[bool, list[_Step]]]) -> None:
        self.off: dict[sp.Symbol, int] = {}
        self.length: dict[int, int] = {}  # offset -> 1 (scalar) or n (stored vector)
        size = 0
        group_of: dict[sp.Symbol, int] = {}
        for g, (_, steps) in enumerate(groups):
            for st in steps:
                if st.target is not None:
                    group_of[st.target] = g
        stored: set[sp.Symbol] = set()
        for g, (_, steps) in enumerate(groups):
            for st in steps:
                for s in st.exprs:
                    for sym in s.free_symbols:
                        if sym in prog._owner:  # component access needs memory
                            v = prog._owner[sym][0]
                            if v in group_of:
                                stored.add(v)
                        elif sym in group_of and group_of[sym] != g:
                            stored.add(sym)
        for _, steps in groups:
            for st in steps:
                t = st.target
                if t is None:
                    continue
                if st.kind == "unrolled" or (st.kind == "vector" and t in stored):
                    self.off[t] = size
                    self.length[size] = prog.n
                    size += prog.n
                elif st.kind == "reduce" or (st.kind == "scalar" and t in stored):
                    self.off[t] = size
                    self.length[size] = 1
                    size += 1
        self.size = size


def _cname(sym: sp.Symbol, table: dict[sp.Symbol, str]) -> str:
    if sym not in table:
        table[sym] = f"nh_q{len(table)}"
    return table[sym]


#: Small ``n`` (up to this bound) get fully unrolled kernels: one loop over the lanes, the
#: index loops expanded in the source with constant indices, all per-lane values in registers.
UNROLL_MAX_N = 16

#: Lanes per chunk of the looped kernels (the integrators' block size) and the cap on the
#: per-call stack workspace (in doubles, 64 KiB); larger workspaces come from one malloc.
_CHUNK = 64
_STACK_DOUBLES = 8192


#: Lane loops carry no dependence (lane ``l`` reads and writes only lane ``l``; ``ld >=
#: nlanes``): say so, or gcc versions each loop with one alias check per pair of output rows
#: and gives up vectorising beyond ten pairs.
_LANE_PRAGMA = """\
#if defined(__clang__)
#define NH_LANES _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define NH_LANES _Pragma("GCC ivdep")
#else
#define NH_LANES
#endif
"""


def _is_reciprocal(e: sp.Expr, bases: set[sp.Symbol]) -> bool:
    return isinstance(e, sp.Pow) and e.base in bases and e.exp.is_Integer and bool(e.exp < 0)


def _with_reciprocals(prog: IndexedProgram, family: str) -> IndexedProgram:
    """A copy of ``prog`` where element-wise divisions by a vector use its stored reciprocal.

    Every ``v**(-k)`` (``v`` a vector handle, ``k > 0``) in an element-wise statement or
    output block becomes ``r**k`` with a new vector statement ``r = 1/v`` placed before the
    first use: one division per component and lane per kernel call (stored in the workspace
    when several loops use it) instead of one per occurrence.
    """
    vectors = set(prog._vectors)
    exprs = [e for st in prog.statements if st.kind in _INDEXED for e in st.exprs]
    exprs += [b for b in prog.outputs[family] if prog._is_indexed(b)]
    found: set[sp.Symbol] = set()
    for e in exprs:
        found |= {p.base for p in e.atoms(sp.Pow) if _is_reciprocal(p, vectors)}
    if not found:
        return prog
    new = prog.copy()
    inv: dict[sp.Symbol, sp.Symbol] = {}
    for v in sorted(found, key=str):
        name = f"nh_inv_{v.name}"
        k = 0
        while name in new._names:
            k += 1
            name = f"nh_inv{k}_{v.name}"
        inv[v] = new._new(name, vector=True)

    def rewrite(e: sp.Expr) -> sp.Expr:
        return e.replace(
            lambda u: _is_reciprocal(u, set(inv)),
            lambda u: inv[u.base] ** (-u.exp),
        )

    statements: list[Statement] = []
    placed: set[sp.Symbol] = set()

    def place(e: sp.Expr) -> None:
        for v in sorted({p.base for p in e.atoms(sp.Pow) if _is_reciprocal(p, set(inv))}, key=str):
            if v not in placed:
                placed.add(v)
                statements.append(Statement("vector", inv[v], (1 / v,)))

    for st in prog.statements:
        if st.kind in _INDEXED:
            for e in st.exprs:
                place(e)
            st = Statement(st.kind, st.target, tuple(rewrite(e) for e in st.exprs))
        statements.append(st)
    blocks = []
    for b in prog.outputs[family]:
        if prog._is_indexed(b):
            place(b)
            b = rewrite(b)
        blocks.append(b)
    new.statements = statements
    new.outputs[family] = blocks
    return new


class _Emitter:
    """How values are addressed in one of the two kernel shapes.

    ``looped``: lanes in chunks of ``chunk``, index loops outside lane loops, workspace
    ``nh_ws[(off + i) * chunk + l]``, inputs through the chunk pointers ``nh_x`` etc.
    ``unrolled``: one loop over all lanes, index loops expanded, workspace in per-lane locals.
    """

    def __init__(self, prog: IndexedProgram, lay: _Layout, unrolled: bool, chunk: int) -> None:
        self.prog = prog
        self.lay = lay
        self.unrolled = unrolled
        self.chunk = chunk
        self.arrays: set[str] = set()

    def array(self, where: str) -> str:
        self.arrays.add(where)
        if self.unrolled:
            return where
        return {"x": "nh_x", "par": "nh_p", "t": "nh_t"}[where]

    def ws(self, off: int, idx: str | int) -> str:
        if self.unrolled:
            return f"nh_w{off + int(idx)}"
        # one array per workspace entry: gcc then sees that stores into a stored vector do
        # not alias the accumulators of the same loop (no run-time alias check to fail)
        if idx == 0 or idx == "0":
            return f"nh_ws{off}[l]"
        if isinstance(idx, int):
            return f"nh_ws{off}[{idx * self.chunk} + l]"
        return f"nh_ws{off}[{idx} * {self.chunk} + l]"

    def load(self, sym: sp.Symbol, idx: str | int) -> str:
        """C expression of ``sym`` at lane ``l`` (and index ``idx`` for vectors)."""
        prog = self.prog
        if sym == prog.index:
            return f"{float(idx)!r}" if self.unrolled else "(double)i"
        if sym in prog._owner:
            v, k = prog._owner[sym]
            return self.elem(v, k)
        if sym in prog._vectors:
            return self.elem(sym, idx)
        if sym in prog._inputs:
            inp = prog._inputs[sym]
            if inp.where == "t":
                return f"{self.array('t')}[l]"
            return f"{self.array(inp.where)}[{inp.offset} * ld + l]"
        return self.ws(self.lay.off[sym], 0)

    def elem(self, v: sp.Symbol, idx: str | int) -> str:
        if v in self.prog._inputs:
            inp = self.prog._inputs[v]
            arr = self.array(inp.where)
            if isinstance(idx, int):
                return f"{arr}[{inp.offset + idx} * ld + l]"
            return f"{arr}[({inp.offset} + {idx}) * ld + l]"
        return self.ws(self.lay.off[v], idx)

    def out(self, row: int, idx: str | int) -> str:
        if isinstance(idx, int):
            return f"out[{row + idx} * ld + l]" if self.unrolled else f"nh_o[{row + idx} * ld + l]"
        return f"nh_o[({row} + {idx}) * ld + l]"


def _render_body(
    em: _Emitter, steps: list[_Step], printer: _Printer, tag: str, idx: str | int, ind: str
) -> tuple[list[str], list[str]]:
    """Loads and statements of one loop body: (lines, reduction initialisations)."""
    lay = em.lay
    local: dict[sp.Symbol, str] = {}  # handles defined in this loop body -> C local
    loads: dict[sp.Symbol, str] = {}
    recips: dict[sp.Symbol, str] = {}  # loaded C local -> its reciprocal
    table: dict[sp.Symbol, str] = {}
    head: list[str] = []
    body: list[str] = []
    pre: list[str] = []
    for s_i, st in enumerate(steps):
        exprs = list(st.exprs)
        syms = set().union(*(e.free_symbols for e in exprs))
        rename: dict[sp.Symbol, sp.Symbol] = {}
        for sym in sorted(syms, key=str):
            if sym in local:
                rename[sym] = sp.Symbol(local[sym])
                continue
            if sym not in loads:
                loads[sym] = _cname(sym, table)
                head.append(f"{ind}const double {loads[sym]} = {em.load(sym, idx)};")
            rename[sym] = sp.Symbol(loads[sym])
        exprs = [e.xreplace(rename) for e in exprs]
        # divisions by a loaded value: one reciprocal per loop body, shared by all steps
        loaded = {sp.Symbol(c) for c in loads.values()}
        for e in exprs:
            for p in e.atoms(sp.Pow):
                if _is_reciprocal(p, loaded) and p.base not in recips:
                    recips[p.base] = f"{p.base.name}_r"
                    head.append(f"{ind}const double {recips[p.base]} = 1.0 / {p.base.name};")
        if recips:
            rb = set(recips)
            exprs = [
                e.replace(
                    lambda u, rb=rb: _is_reciprocal(u, rb),
                    lambda u: sp.Symbol(recips[u.base]) ** (-u.exp),
                )
                for e in exprs
            ]
        prefix = f"nh_c{tag}_{s_i}_"
        repl, red = sp.cse(exprs, symbols=sp.numbered_symbols(prefix), order="none")
        for sym, e in repl:
            body.append(f"{ind}const double {sym} = {printer.doprint(e)};")
        codes = [printer.doprint(e) if e != 0 else "0.0" for e in red]
        t = st.target
        if st.kind in ("scalar", "vector"):
            local[t] = _cname(t, table) + "_v"
            body.append(f"{ind}const double {local[t]} = {codes[0]};")
            if t in lay.off:
                body.append(
                    f"{ind}{em.ws(lay.off[t], idx if st.kind == 'vector' else 0)} = {local[t]};"
                )
        elif st.kind == "reduce":
            pre.append(em.ws(lay.off[t], 0))
            body.append(f"{ind}{em.ws(lay.off[t], 0)} += {codes[0]};")
        elif st.kind == "unrolled":
            for k, code in enumerate(codes):
                body.append(f"{ind}{em.ws(lay.off[t], k)} = {code};")
        elif st.kind == "out_vec":
            body.append(f"{ind}{em.out(st.row, idx)} = {codes[0]};")
        else:
            body.append(f"{ind}{em.out(st.row, 0)} = {codes[0]};")
    return head + body, pre


def _render_group_looped(
    em: _Emitter, indexed: bool, steps: list[_Step], printer: _Printer, tag: str
) -> list[str]:
    """One fused loop of a chunk: ``for i { for l { ... } }`` or ``for l { ... }``."""
    ind = "                " if indexed else "            "
    lines, pre = _render_body(em, steps, printer, tag, "i" if indexed else 0, ind)
    out = []
    if pre:
        out += [
            "        NH_LANES",
            "        for (int64_t l = 0; l < L; ++l) {",
            *[f"            {w} = 0.0;" for w in pre],
            "        }",
        ]
    if indexed:
        return out + [
            f"        for (int64_t i = 0; i < {em.prog.n}; ++i) {{",
            "            NH_LANES",
            "            for (int64_t l = 0; l < L; ++l) {",
            *lines,
            "            }",
            "        }",
        ]
    return out + [
        "        NH_LANES",
        "        for (int64_t l = 0; l < L; ++l) {",
        *lines,
        "        }",
    ]


def _render_group_unrolled(
    em: _Emitter, indexed: bool, steps: list[_Step], printer: _Printer, tag: str
) -> list[str]:
    """One group inside the lane loop, the index loop expanded (``{ ... }`` per index)."""
    if not indexed:
        lines, _ = _render_body(em, steps, printer, tag, 0, "            ")
        return ["        {", *lines, "        }"]
    out: list[str] = []
    for k in range(em.prog.n):
        lines, pre = _render_body(em, steps, printer, f"{tag}_{k}", k, "            ")
        if k == 0:
            out += [f"        {w} = 0.0;" for w in pre]
        out += ["        {", *lines, "        }"]
    return out


def _kernel(prog: IndexedProgram, family: str, printer: _Printer, unrolled: bool) -> str:
    prog = _with_reciprocals(prog, family)
    groups = _groups(prog, _steps(prog, family))
    lay = _Layout(prog, groups)
    size = lay.size
    chunk = _CHUNK
    if size and not unrolled:
        chunk = max(8, min(_CHUNK, _STACK_DOUBLES // size // 8 * 8))
    em = _Emitter(prog, lay, unrolled, chunk)
    render = _render_group_unrolled if unrolled else _render_group_looped
    body: list[str] = []
    for g, (indexed, steps) in enumerate(groups):
        kinds = ", ".join(st.kind for st in steps)
        body.append(f"        /* {'indexed' if indexed else 'lane'} group {g}: {kinds} */")
        body += render(em, indexed, steps, printer, str(g))
    lines = [
        f"NH_EXPORT int {SYMBOL[family]}(void *ctx, const double *restrict t, "
        "const double *restrict x, const double *restrict par, double *restrict out, "
        "int64_t nlanes, int64_t ld) {",
        "    (void)ctx; (void)t; (void)x; (void)par;",
        "    if (nlanes < 0 || ld < nlanes) return -1;",
    ]
    if unrolled:
        lines += ["    NH_LANES", "    for (int64_t l = 0; l < nlanes; ++l) {"]
        if size:
            lines.append(f"        double {', '.join(f'nh_w{k}' for k in range(size))};")
        lines += [*body, "    }", "    return 0;", "}", ""]
        return "\n".join(lines)
    heap = size * chunk > _STACK_DOUBLES
    if heap:  # a very large workspace: one allocation per call, reused by every chunk
        lines += [
            "    if (nlanes == 0) return 0;",
            f"    double *restrict nh_ws = (double *)malloc(sizeof(double) * {size * chunk});",
            "    if (!nh_ws) return -2;",
            *[f"    double *restrict nh_ws{o} = nh_ws + {o * chunk};" for o in lay.length],
        ]
    elif size:
        lines += [f"    double nh_ws{o}[{k * chunk}];" for o, k in lay.length.items()]
    lines.append(f"    for (int64_t l0 = 0; l0 < nlanes; l0 += {chunk}) {{")
    lines.append(f"        const int64_t L = nlanes - l0 < {chunk} ? nlanes - l0 : {chunk};")
    for where in ("t", "x", "par"):
        if where in em.arrays:
            lines.append(f"        const double *restrict {em.array(where)} = {where} + l0;")
    lines.append("        double *restrict nh_o = out + l0;")
    lines += [*body, "    }"]
    if heap:
        lines.append("    free(nh_ws);")
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)


def generate_structured_c(prog: IndexedProgram, unroll: bool | None = None) -> str:
    """C99 source of the kernel library of ``prog`` (all its output families).

    The library follows the kernel ABI of :func:`nhfast.codegen.generate_c` (same exported
    names, same ``nh_info``), so :mod:`nhfast._jit` compiles, caches and loads it unchanged.

    Parameters
    ----------
    prog : IndexedProgram
        The program; needs an ``rhs`` output with ``n_state`` rows.
    unroll : bool, optional
        Emit fully unrolled kernels (one loop over the lanes, the index loops expanded in
        the source: fastest for small ``n``, code size ``O(n)``) instead of looped kernels
        (index loops over chunks of lanes, code size ``O(1)`` in ``n``).  Default: unrolled
        for ``n <=`` :data:`UNROLL_MAX_N`.

    Raises
    ------
    ValueError
        If the program has no ``rhs`` output, the ``rhs`` has the wrong size, or an
        expression has no C equivalent.
    """
    if "rhs" not in prog.outputs:
        raise ValueError("the program needs an 'rhs' output")
    if prog.n_out("rhs") != prog.n_state:
        raise ValueError(f"'rhs' has {prog.n_out('rhs')} rows for {prog.n_state} states")
    if unroll is None:
        unroll = prog.n <= UNROLL_MAX_N
    elif not isinstance(unroll, bool):
        raise TypeError(f"unroll must be a bool or None, got {unroll!r}")
    printer = _Printer()
    n_obs = prog.n_out("observables") if "observables" in prog.outputs else 0
    flags = sum(HAS[k] for k in prog.outputs)
    info = [ABI_VERSION, prog.n_state, prog.n_params, n_obs, flags, 0]
    shape = "unrolled" if unroll else "looped"
    parts = [
        _PREAMBLE.format(abi=ABI_VERSION),
        "#include <stdlib.h>\n",
        _LANE_PRAGMA,
        f"/* structured kernels ({shape}): n = {prog.n}, {len(prog.statements)} statements */\n"
        f"static const int64_t nh_info_data[{len(info)}] = {{{', '.join(map(str, info))}}};\n"
        "NH_EXPORT const int64_t *nh_info(void) { return nh_info_data; }\n",
    ]
    for family in prog.outputs:
        try:
            parts.append(_kernel(prog, family, printer, unroll))
        except NotImplementedError as exc:
            raise ValueError(f"kernel {family!r}: expression has no C equivalent: {exc}") from exc
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# NumPy evaluation (backend without a compiler, and a check of the C rendering)
# ---------------------------------------------------------------------------------------------


def _lambdify(args: list[sp.Symbol], exprs: Sequence[sp.Expr]) -> Callable:
    return sp.lambdify(args, list(exprs), modules="numpy")


class StructuredNumpyKernel:
    """One output family of an :class:`IndexedProgram`, evaluated with NumPy.

    Callable as ``kernel(t, x, par, out, nlanes, ld)`` on flat struct-of-arrays buffers (the
    convention of ``nhfast._core.python_kernel_capsule``); vectors are ``(n, nlanes)`` arrays.
    """

    def __init__(self, prog: IndexedProgram, family: str) -> None:
        self.prog = prog
        self.family = family
        self.nin = prog.n_state
        self.npar = prog.n_params
        self.nout = prog.n_out(family)
        self.error: BaseException | None = None
        need = _needed(prog, prog.outputs[family])
        self._plan = []
        for st in prog.statements:
            if st.target in need:
                args = sorted(set().union(*(e.free_symbols for e in st.exprs)), key=str)
                self._plan.append((st.kind, st.target, args, _lambdify(args, st.exprs)))
        self._out = []
        for b in prog.outputs[family]:
            args = sorted(b.free_symbols, key=str)
            self._out.append((prog._is_indexed(b), args, _lambdify(args, [b])))

    def _values(self, args: list[sp.Symbol], env: dict, nl: int) -> list[np.ndarray]:
        prog = self.prog
        vals = []
        for s in args:
            if s == prog.index:
                vals.append(np.arange(prog.n, dtype=float)[:, None])
            elif s in prog._owner:
                v, k = prog._owner[s]
                vals.append(env[v][k])
            else:
                vals.append(env[s])
        return vals

    def evaluate(self, t: np.ndarray, x: np.ndarray, par: np.ndarray) -> np.ndarray:
        """Outputs for ``x`` of shape (n_state, nl), ``par`` (n_params, nl), ``t`` (nl,)."""
        prog = self.prog
        n = prog.n
        nl = x.shape[1]
        env: dict[sp.Symbol, np.ndarray] = {}
        for sym, inp in prog._inputs.items():
            src = x if inp.where == "x" else par
            if inp.where == "t":
                env[sym] = np.asarray(t, dtype=float)
            elif inp.vector:
                env[sym] = src[inp.offset : inp.offset + n]
            else:
                env[sym] = src[inp.offset]
        for kind, target, args, f in self._plan:
            got = f(*self._values(args, env, nl))
            if kind == "reduce":
                env[target] = np.sum(np.broadcast_to(got[0], (n, nl)), axis=0)
            elif kind == "vector":
                env[target] = np.broadcast_to(got[0], (n, nl))
            elif kind == "scalar":
                env[target] = np.broadcast_to(got[0], (nl,))
            else:
                env[target] = np.stack([np.broadcast_to(g, (nl,)) for g in got])
        rows = []
        for indexed, args, f in self._out:
            got = f(*self._values(args, env, nl))[0]
            rows.append(np.broadcast_to(got, (n, nl) if indexed else (1, nl)))
        return np.concatenate(rows, axis=0)

    def __call__(self, t, x, par, out, nl: int, ld: int) -> None:
        """Evaluate on lanes ``0..nl-1`` of flat SoA buffers with lane stride ``ld``."""
        tv = np.asarray(t)[:nl]
        xv = _rows(x, self.nin, nl, ld)
        pv = _rows(par, self.npar, nl, ld) if self.npar else np.zeros((0, nl))
        ov = _rows(out, self.nout, nl, ld)
        ov[:, :nl] = self.evaluate(tv, xv, pv)


def _rows(buf, k: int, nl: int, ld: int) -> np.ndarray:
    a = np.asarray(buf)
    return np.lib.stride_tricks.as_strided(a, shape=(k, nl), strides=(ld * a.itemsize, a.itemsize))


def structured_numpy_kernels(prog: IndexedProgram) -> dict[str, StructuredNumpyKernel]:
    """A :class:`StructuredNumpyKernel` for every output family of ``prog``."""
    return {family: StructuredNumpyKernel(prog, family) for family in prog.outputs}
