"""Render an :class:`~nhfast.codegen.indexed.IndexedProgram` to C99 kernels of the kernel ABI.

Two shapes (``nh_abi.h`` calling convention in both). *Looped* (``n >`` :data:`UNROLL_MAX_N`):
lanes in chunks of 64 with a stack workspace; consecutive indexed statements fused into one
loop ``for i < n { for l < L { ... } }`` (lanes innermost), reductions into per-lane work
arrays; code size ``O(1)`` in ``n``. *Unrolled* (small ``n``): one loop over the lanes with
the index loops expanded, every intermediate a register. In both, a division by a vector
becomes a multiplication by its reciprocal, formed once per component and lane; results
agree with the direct expressions to round-off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import sympy as sp

from nhfast._abi import SYMBOL
from nhfast.codegen._printer import (
    CPrinter,
    banner,
    info_table,
    input_hash,
    kernel_head,
    preamble,
)
from nhfast.codegen.indexed import INDEXED_KINDS, IndexedProgram, Statement, is_reciprocal

# IndexedProgram and Statement (now in indexed.py) are re-exported for the importers of this
# module's former contents; new code imports them from ``nhfast.codegen``.
__all__ = [
    "UNROLL_MAX_N",
    "IndexedProgram",
    "Statement",
    "generate_structured_c",
    "program_digest",
]


@dataclass
class _Step:
    """A statement (or an output block) placed in a loop group."""

    kind: str  # scalar / reduce / vector / unrolled / out_vec / out_scalar
    target: sp.Symbol | None
    exprs: tuple[sp.Expr, ...]
    row: int = 0  # first output row of an output block


def _steps(prog: IndexedProgram, family: str) -> list[_Step]:
    blocks = prog.outputs[family]
    need = prog.needed(blocks)
    steps = [_Step(st.kind, st.target, st.exprs) for st in prog.statements if st.target in need]
    row = 0
    for b in blocks:
        if prog.is_indexed(b):
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
        indexed = st.kind in INDEXED_KINDS or st.kind == "out_vec"
        uses = prog.deps(st.exprs)
        owners = {prog.owners[s][0] for e in st.exprs for s in e.free_symbols if s in prog.owners}
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
                        if sym in prog.owners:  # component access needs memory
                            v = prog.owners[sym][0]
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
        if sym in prog.owners:
            v, k = prog.owners[sym]
            return self.elem(v, k)
        if sym in prog.vectors:
            return self.elem(sym, idx)
        if sym in prog.inputs:
            inp = prog.inputs[sym]
            if inp.where == "t":
                return f"{self.array('t')}[l]"
            return f"{self.array(inp.where)}[{inp.offset} * ld + l]"
        return self.ws(self.lay.off[sym], 0)

    def elem(self, v: sp.Symbol, idx: str | int) -> str:
        if v in self.prog.inputs:
            inp = self.prog.inputs[v]
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
    em: _Emitter, steps: list[_Step], printer: CPrinter, tag: str, idx: str | int, ind: str
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
                if is_reciprocal(p, loaded) and p.base not in recips:
                    recips[p.base] = f"{p.base.name}_r"
                    head.append(f"{ind}const double {recips[p.base]} = 1.0 / {p.base.name};")
        if recips:
            rb = set(recips)
            exprs = [
                e.replace(
                    lambda u, rb=rb: is_reciprocal(u, rb),
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
    em: _Emitter, indexed: bool, steps: list[_Step], printer: CPrinter, tag: str
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
    em: _Emitter, indexed: bool, steps: list[_Step], printer: CPrinter, tag: str
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


def _kernel(prog: IndexedProgram, family: str, printer: CPrinter, unrolled: bool) -> str:
    prog = prog.with_reciprocals(family)
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
    lines = kernel_head(family)
    if unrolled:
        lines += ["    NH_LANES", "    for (int64_t l = 0; l < nlanes; ++l) {"]
        if size:
            lines.append(f"        double {', '.join(f'nh_w{k}' for k in range(size))};")
        lines += [*body, "    }", "    return NH_OK;", "}", ""]
        return "\n".join(lines)
    heap = size * chunk > _STACK_DOUBLES
    if heap:  # a very large workspace: one allocation per call, reused by every chunk
        lines += [
            "    if (nlanes == 0) return NH_OK;",
            f"    double *restrict nh_ws = (double *)malloc(sizeof(double) * {size * chunk});",
            "    if (!nh_ws) return NH_ERR_NOMEM;",
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
    lines += ["    return NH_OK;", "}", ""]
    return "\n".join(lines)


def _legend(prog: IndexedProgram) -> list[tuple[str, object]]:
    """Input slots of the kernels (``x[a:b]``, ``par[k]``, ``t``) -> the program's handles.

    One line per input handle (a vector as one range), so the legend does not grow with ``n``.
    """
    legend: list[tuple[str, object]] = []
    for sym, inp in prog.inputs.items():
        if inp.where == "t":
            legend.append(("t", sym))
        elif inp.vector:
            comps = prog.components(sym)
            span = f"{inp.where}[{inp.offset}:{inp.offset + prog.n}]"
            legend.append((span, f"{sym} = ({comps[0]}, ..., {comps[-1]})"))
        else:
            legend.append((f"{inp.where}[{inp.offset}]", sym))
    return legend


def _input(prog: IndexedProgram, shape: str) -> list[object]:
    """Everything of ``prog`` the generated source depends on, flat (for the input hash)."""
    items: list[object] = [shape, prog.n, "time", prog.time, "states", *prog.state_symbols]
    items += ["params", *prog.param_symbols]
    for sym, inp in prog.inputs.items():
        items += [sym, inp.where, inp.offset, inp.vector]
    for st in prog.statements:
        items += [st.kind, st.target, *st.exprs]
    for family, blocks in prog.outputs.items():
        items += [family, *blocks]
    return items


def _shape(prog: IndexedProgram, unroll: bool | None) -> str:
    if unroll is None:
        unroll = prog.n <= UNROLL_MAX_N
    elif not isinstance(unroll, bool):
        raise TypeError(f"unroll must be a bool or None, got {unroll!r}")
    return "unrolled" if unroll else "looped"


def program_digest(prog: IndexedProgram, unroll: bool | None = None) -> str:
    """SHA-256 of everything of ``prog`` its generated source depends on (the banner's hash).

    ``unroll`` as in :func:`generate_structured_c`. Cheap next to generating the source: a
    cache of generated sources can be keyed on it.
    """
    return input_hash(_input(prog, _shape(prog, unroll)))


def generate_structured_c(
    prog: IndexedProgram,
    unroll: bool | None = None,
    provenance: Mapping[str, object] | None = None,
) -> str:
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
    provenance : mapping, optional
        Shown in the banner of the source: ``"system"``, the name of the system.

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
    printer = CPrinter()
    n_obs = prog.n_out("observables") if "observables" in prog.outputs else 0
    shape = "unrolled" if unroll else "looped"
    sizes = ", ".join(f"{SYMBOL[f]} ({prog.n_out(f)} outputs)" for f in prog.outputs)
    parts = [
        banner(
            generator="nhfast.codegen.generate_structured_c",
            regenerate="nhfast.codegen.generate_structured_c(program), e.g. through the "
            "system's compile()",
            digest=input_hash(_input(prog, shape)),
            legend=_legend(prog),
            provenance=provenance,
            details=f"Structured kernels ({shape}): n = {prog.n}, "
            f"{len(prog.statements)} statements; {sizes}.",
        ),
        preamble(),
        _LANE_PRAGMA,
        info_table(prog.n_state, prog.n_params, n_obs, prog.outputs, 0),
    ]
    for family in prog.outputs:
        try:
            parts.append(_kernel(prog, family, printer, unroll))
        except NotImplementedError as exc:
            raise ValueError(f"kernel {family!r}: expression has no C equivalent: {exc}") from exc
    return "\n".join(parts)
