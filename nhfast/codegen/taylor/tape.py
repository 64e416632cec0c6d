"""The typed Taylor IR: values, lines and the tape of one Taylor kernel.

A line of the tape is data: its operation (``op``, None for a line that is not a single call
of one), the work value it writes (``output``), the work values it names (:class:`Ref` parts,
each either an operand or output with its order stride, or a bare mention), and its size for
the cost model (``conv``, ``lin``). The passes (:mod:`.passes`) read those fields; the C text
is made last, by :meth:`Line.render`, with the work values placed by a layout.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from nhfast.codegen._printer import CPrinter

#: Operations whose k-th coefficient is a sum over the orders (a convolution).
CONVOLUTIONS = frozenset(
    "nht_mul nht_submul nht_sqr nht_div nht_pow nht_sqrt nht_chain nht_log nht_recip_cs".split()
)
#: Operations that read their operands at the current order only (taylor_ops.h).
READS_ORDER_K = frozenset(
    "nht_cmul nht_scale nht_axpy nht_lin2 nht_lin3 nht_lin4 nht_addc nht_sum nht_copy "
    "nht_setc nht_integ nht_integv nht_matvec".split()
)
#: Operations whose output (their first work value) they write at the current order only,
#: without reading its earlier orders; their other operands are read at every order.
WRITES_ORDER_K = frozenset("nht_mul nht_sqr nht_submul nht_abs".split())


@dataclass(frozen=True)
class Ref:
    """A work value named in a line. ``strided``: as ``name extra, NHT_TOT`` (an operand or
    output of an operation: coefficient j at ``j * NHT_TOT``; a layout that keeps one row of
    it renders the stride 0), else the bare ``name`` (the line indexes it itself)."""

    name: str
    strided: bool
    extra: str = ""


Part = str | Ref


@dataclass(frozen=True)
class Line:
    """One line of C of a Taylor kernel, as data.

    ``op``: the one operation the line calls (None: several calls or other code);
    ``output``: the work value it writes as ``(k, nc, out, NHT_TOT, ...)``, if any;
    ``conv``, ``lin``: components of convolutions and of other operations it adds to an
    order's work (``lin`` infinite for a line the cost model cannot count).
    """

    parts: tuple[Part, ...]
    op: str | None = None
    output: str | None = None
    conv: int = 0
    lin: float = 0.0

    @property
    def names(self) -> list[str]:
        """The work values the line names, in order (with repeats)."""
        return [p.name for p in self.parts if isinstance(p, Ref)]

    @property
    def bare_names(self) -> set[str]:
        """The work values the line names other than as strided operands or outputs."""
        return {p.name for p in self.parts if isinstance(p, Ref) and not p.strided}

    @property
    def reads_order_k(self) -> bool:
        """Whether the line reads its operands at the current order only."""
        return self.op in READS_ORDER_K

    @property
    def writes_order_k(self) -> bool:
        """Whether the line writes its output at the current order without reading it."""
        return self.op in WRITES_ORDER_K and self.output is not None

    def render(self, place: Mapping[str, str] | None = None, one_row: Iterable[str] = ()) -> str:
        """The C text, work value ``name`` at ``place[name]``; those of ``one_row`` have the
        stride 0 (one row serves every order)."""
        out = []
        for p in self.parts:
            if isinstance(p, str):
                out.append(p)
                continue
            name = p.name if place is None else place[p.name]
            if p.strided:
                out.append(f"{name}{p.extra}, {'0' if p.name in one_row else 'NHT_TOT'}")
            else:
                out.append(name)
        return "".join(out)


def line(
    *parts: Part | tuple,
    op: str | None = None,
    output: str | None = None,
    conv: int = 0,
    lin: float = 0.0,
) -> Line:
    """A :class:`Line` of ``parts`` (tuples of parts flattened, adjacent text joined)."""
    flat: list[Part] = []

    def add(p: Part | tuple) -> None:
        if isinstance(p, tuple):
            for q in p:
                add(q)
        elif isinstance(p, str) and flat and isinstance(flat[-1], str):
            flat[-1] += p
        elif not (isinstance(p, str) and not p):
            flat.append(p)

    for p in parts:
        add(p)
    return Line(tuple(flat), op, output, conv, lin)


def call(op: str, nc: int, *parts: Part | tuple, output: str | None = None, conv=None) -> Line:
    """A line of the one operation ``op`` over ``nc`` components (its size: ``nc`` components
    of a convolution or of another operation, or ``conv`` components of convolutions)."""
    if conv is not None:
        return line(*parts, op=op, output=output, conv=conv)
    if op in CONVOLUTIONS:
        return line(*parts, op=op, output=output, conv=nc)
    return line(*parts, op=op, output=output, lin=nc)


def code(*parts: Part | tuple, lin: float = math.inf) -> Line:
    """A line that is not a single operation (by default one the cost model cannot count)."""
    return line(*parts, lin=lin)


def join(items: Iterable[tuple], sep: str = ", ") -> tuple:
    """Part tuples ``items`` joined by ``sep``."""
    out: list = []
    for i, it in enumerate(items):
        if i:
            out.append(sep)
        out.append(it)
    return tuple(out)


@dataclass(frozen=True)
class Val:
    """A value of the tape: a work variable (coefficients to every order) or a constant.

    ``vector``: ``n`` components (else one). ``name``: the C array of its storage (lane
    values of type ``NHT_T``, coefficient ``j`` of component ``i`` at ``[j * nc + i]``; a
    constant at ``[i]``). ``comp``: a component view (a scalar) of a vector value.
    """

    const: bool
    vector: bool
    name: str
    comp: int | None = None

    def arg(self, in_vector_op: bool) -> tuple[Part, ...]:
        """The ``nht_in`` of this value as an operand of an operation (vector or scalar)."""
        if self.comp is not None:
            if self.const:
                return (f"(NHT(nht_in)){{{self.name} + {self.comp}, 0, 0}}",)
            return ("(NHT(nht_in)){", Ref(self.name, True, f" + {self.comp}"), ", 0}")
        is_ = "1" if (self.vector and in_vector_op) else "0"
        if self.const:
            return (f"(NHT(nht_in)){{{self.name}, 0, {is_}}}",)
        return ("(NHT(nht_in)){", Ref(self.name, True), f", {is_}}}")

    def ref(self) -> Part:
        """The bare name (a work value's mention, a constant's text)."""
        return self.name if self.const else Ref(self.name, False)

    def strided(self, extra: str = "") -> Part:
        """``name extra, NHT_TOT`` (a work value; a constant's own stride is 0)."""
        return f"{self.name}{extra}, 0" if self.const else Ref(self.name, True, extra)

    def key(self) -> str:
        """A sort key: name, then component."""
        return self.name + str(self.comp)


@dataclass
class Tape:
    """Work variables, constants and the per-order lines of one Taylor kernel."""

    n: int
    work: list[tuple[str, int]] = field(default_factory=list)  # (name, components)
    consts: list[tuple[str, int]] = field(default_factory=list)
    prep: list[Line] = field(default_factory=list)  # constants, once per pass
    load: list[Line] = field(default_factory=list)  # order 0 of the states
    ops: list[Line] = field(default_factory=list)  # inside the loop over k
    solve_ws: list[tuple[str, int, int]] = field(default_factory=list)  # (name, values, pivots)
    #: the products of vector values (op index -> output and operands; see passes.fused)
    products: dict[int, tuple[Val, Val, Val]] = field(default_factory=dict)
    memo: dict[tuple, Val] = field(default_factory=dict)  # operations on the tape already
    printer: CPrinter = field(default_factory=CPrinter)

    def new_var(self, vector: bool) -> Val:
        """A work variable: coefficient j of component i at ``W[j * NHT_TOT + offset + i]``."""
        off = sum(c for _, c in self.work)
        name = f"(W + {off})"
        self.work.append((name, self.n if vector else 1))
        return Val(False, vector, name)

    def new_const(self, vector: bool) -> Val:
        """A constant: component i at ``CST[offset + i]``."""
        off = sum(c for _, c in self.consts)
        name = f"(CST + {off})"
        self.consts.append((name, self.n if vector else 1))
        return Val(True, vector, name)

    def nc(self, v: Val) -> int:
        """Components of ``v``."""
        return self.n if v.vector else 1
