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
(``csrc/nh_abi.h``): for every kernel, consecutive indexed statements are fused into one loop
``for i < n { for l < nlanes { ... } }`` (lanes innermost, struct-of-arrays), element-wise
temporaries used only inside their loop stay in registers, reductions accumulate into
per-lane work arrays.  Work and code size per output component are ``O(n)`` and ``O(1)``:
the source does not grow with ``n`` except through explicit ``unrolled`` statements.
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
                    size += prog.n
                elif st.kind in ("scalar", "reduce"):
                    self.off[t] = size
                    size += 1
        self.size = size


def _cname(sym: sp.Symbol, table: dict[sp.Symbol, str]) -> str:
    if sym not in table:
        table[sym] = f"nh_q{len(table)}"
    return table[sym]


def _load(prog: IndexedProgram, lay: _Layout, sym: sp.Symbol) -> str:
    """C expression of ``sym`` at lane ``l`` (and index ``i`` for vectors)."""
    if sym == prog.index:
        return "(double)i"
    if sym in prog._owner:
        v, k = prog._owner[sym]
        return _elem(prog, lay, v, str(k))
    if sym in prog._vectors:
        return _elem(prog, lay, sym, "i")
    if sym in prog._inputs:
        inp = prog._inputs[sym]
        if inp.where == "t":
            return "t[l]"
        arr = "x" if inp.where == "x" else "par"
        return f"{arr}[{inp.offset} * ld + l]"
    return f"nh_ws[{lay.off[sym]} * L + l]"


def _elem(prog: IndexedProgram, lay: _Layout, v: sp.Symbol, idx: str) -> str:
    if v in prog._inputs:
        inp = prog._inputs[v]
        arr = "x" if inp.where == "x" else "par"
        return f"{arr}[({inp.offset} + {idx}) * ld + l]"
    return f"nh_ws[({lay.off[v]} + {idx}) * L + l]"


def _render_group(
    prog: IndexedProgram,
    lay: _Layout,
    indexed: bool,
    steps: list[_Step],
    printer: _Printer,
    tag: str,
) -> list[str]:
    """One fused loop: loads of earlier results first, then each step (with its own CSE)."""
    ind = "            " if indexed else "        "
    local: dict[sp.Symbol, str] = {}  # handles defined in this loop body -> C local
    loads: dict[sp.Symbol, str] = {}
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
                head.append(f"{ind}const double {loads[sym]} = {_load(prog, lay, sym)};")
            rename[sym] = sp.Symbol(loads[sym])
        prefix = f"nh_c{tag}_{s_i}_"
        repl, red = sp.cse(
            [e.xreplace(rename) for e in exprs], symbols=sp.numbered_symbols(prefix), order="none"
        )
        for sym, e in repl:
            body.append(f"{ind}const double {sym} = {printer.doprint(e)};")
        codes = [printer.doprint(e) if e != 0 else "0.0" for e in red]
        t = st.target
        if st.kind in ("scalar", "vector"):
            local[t] = _cname(t, table) + "_v"
            body.append(f"{ind}const double {local[t]} = {codes[0]};")
            if t in lay.off:
                idx = "i" if st.kind == "vector" else "0"
                body.append(f"{ind}nh_ws[({lay.off[t]} + {idx}) * L + l] = {local[t]};")
        elif st.kind == "reduce":
            pre.append(f"        nh_ws[{lay.off[t]} * L + l] = 0.0;")
            body.append(f"{ind}nh_ws[{lay.off[t]} * L + l] += {codes[0]};")
        elif st.kind == "unrolled":
            for k, code in enumerate(codes):
                body.append(f"{ind}nh_ws[({lay.off[t]} + {k}) * L + l] = {code};")
        elif st.kind == "out_vec":
            body.append(f"{ind}out[({st.row} + i) * ld + l] = {codes[0]};")
        else:
            body.append(f"{ind}out[{st.row} * ld + l] = {codes[0]};")
    lines = []
    if pre:
        lines += ["    for (int64_t l = 0; l < L; ++l) {", *pre, "    }"]
    if indexed:
        lines += [
            f"    for (int64_t i = 0; i < {prog.n}; ++i) {{",
            "        for (int64_t l = 0; l < L; ++l) {",
            *head,
            *body,
            "        }",
            "    }",
        ]
    else:
        lines += ["    for (int64_t l = 0; l < L; ++l) {", *head, *body, "    }"]
    return lines


def _kernel(prog: IndexedProgram, family: str, printer: _Printer) -> str:
    groups = _groups(prog, _steps(prog, family))
    lay = _Layout(prog, groups)
    lines = [
        f"NH_EXPORT int {SYMBOL[family]}(void *ctx, const double *restrict t, "
        "const double *restrict x, const double *restrict par, double *restrict out, "
        "int64_t nlanes, int64_t ld) {",
        "    (void)ctx; (void)t; (void)x; (void)par;",
        "    if (nlanes < 0 || ld < nlanes) return -1;",
        "    if (nlanes == 0) return 0;",
        "    const int64_t L = nlanes;",
    ]
    if lay.size:
        lines += [
            f"    double *restrict nh_ws = (double *)malloc(sizeof(double) * (size_t)({lay.size} "
            "* L));",
            "    if (!nh_ws) return -2;",
        ]
    for g, (indexed, steps) in enumerate(groups):
        kinds = ", ".join(st.kind for st in steps)
        lines.append(f"    /* {'indexed loop' if indexed else 'lane loop'} {g}: {kinds} */")
        lines += _render_group(prog, lay, indexed, steps, printer, str(g))
    if lay.size:
        lines.append("    free(nh_ws);")
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)


def generate_structured_c(prog: IndexedProgram) -> str:
    """C99 source of the kernel library of ``prog`` (all its output families).

    The library follows the kernel ABI of :func:`nhfast.codegen.generate_c` (same exported
    names, same ``nh_info``), so :mod:`nhfast._jit` compiles, caches and loads it unchanged.

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
    printer = _Printer()
    n_obs = prog.n_out("observables") if "observables" in prog.outputs else 0
    flags = sum(HAS[k] for k in prog.outputs)
    info = [ABI_VERSION, prog.n_state, prog.n_params, n_obs, flags, 0]
    parts = [
        _PREAMBLE.format(abi=ABI_VERSION),
        "#include <stdlib.h>\n",
        f"/* structured kernels: n = {prog.n}, {len(prog.statements)} statements */\n"
        f"static const int64_t nh_info_data[{len(info)}] = {{{', '.join(map(str, info))}}};\n"
        "NH_EXPORT const int64_t *nh_info(void) { return nh_info_data; }\n",
    ]
    for family in prog.outputs:
        try:
            parts.append(_kernel(prog, family, printer))
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
