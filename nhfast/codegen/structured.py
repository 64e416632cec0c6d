"""Render an :class:`~nhfast.codegen.indexed.IndexedProgram` to C99 kernels of the kernel ABI.

Two shapes (``nh_abi.h`` calling convention in both). *Looped* (``n >`` :data:`UNROLL_MAX_N`):
lanes in chunks of 64 with a stack workspace; consecutive indexed statements fused into one
loop ``for i < n { for l < L { ... } }`` (lanes innermost), reductions into per-lane work
arrays; code size ``O(1)`` in ``n``. *Unrolled* (small ``n``): one loop over the lanes with
the index loops expanded, every intermediate a register. In both, a division by a vector
becomes a multiplication by its reciprocal, formed once per component and lane; results
agree with the direct expressions to round-off.

Dense statements (``matvec``, ``solve``) are loops over ``i, j`` in both shapes: in the
looped shape with lanes innermost over the chunk (the system matrix of a ``solve`` in an
``n (n + 1)`` workspace per lane, on the heap when large), in the unrolled shape per lane
on local arrays (not expanded in the source). A ``solve`` is Gaussian elimination with
partial pivoting (``nh_dense_solve``, emitted into the source of programs that solve).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import sympy as sp

from nhfast._abi import SYMBOL
from nhfast._keys import expression_digest
from nhfast.codegen._printer import (
    CPrinter,
    banner,
    info_table,
    kernel_head,
    preamble,
)
from nhfast.codegen.indexed import (
    DENSE_KINDS,
    INDEXED_KINDS,
    IndexedProgram,
    Statement,
    is_reciprocal,
)

# IndexedProgram and Statement (now in indexed.py) are re-exported for the importers of this
# module's former contents; new code imports them from ``nhfast.codegen``.
__all__ = [
    "IndexedProgram",
    "generate_structured_c",
]


@dataclass
class _Step:
    """A statement (or an output block) placed in a loop group."""

    kind: str  # scalar / reduce / vector / unrolled / matvec / solve / out_vec / out_scalar
    target: sp.Symbol | None
    exprs: tuple[sp.Expr, ...]
    row: int = 0  # first output row of an output block
    stmt: Statement | None = None  # the dense statement (matvec, solve)

    @property
    def targets(self) -> tuple[sp.Symbol, ...]:
        if self.stmt is not None:
            return self.stmt.targets
        return () if self.target is None else (self.target,)


def _steps(prog: IndexedProgram, family: str) -> list[_Step]:
    blocks = prog.outputs[family]
    need = prog.needed(blocks)
    steps = [
        _Step(st.kind, st.target, st.exprs, stmt=st if st.kind in DENSE_KINDS else None)
        for st in prog.statements
        if need & set(st.targets)
    ]
    row = 0
    for b in blocks:
        if prog.is_indexed(b):
            steps.append(_Step("out_vec", None, (b,), row))
            row += prog.n
        else:
            steps.append(_Step("out_scalar", None, (b,), row))
            row += 1
    return steps


def _mode(st: _Step) -> str:
    if st.kind in DENSE_KINDS:
        return "dense"
    if st.kind in INDEXED_KINDS or st.kind == "out_vec":
        return "indexed"
    return "lane"


def _groups(prog: IndexedProgram, steps: list[_Step]) -> list[tuple[str, list[_Step]]]:
    """Fuse steps into loops: (mode, steps), mode ``lane``/``indexed``/``dense``.

    A loop cannot use a reduction finished in the same loop, nor the components (fixed
    entries) of a vector built in the same loop. A dense step (``matvec``, ``solve``) is a
    group of its own. Each loop takes, in program order, every step of its mode whose inputs
    are ready, so independent reductions share one pass over the index wherever they stand in
    the program (the order of the statements does not decide the number of passes).
    """
    defined = {t for st in steps for t in st.targets}
    info = []
    for st in steps:
        uses = prog.deps(st.exprs) & defined
        owners = {prog.owners[s][0] for e in st.exprs for s in e.free_symbols if s in prog.owners}
        info.append((st, _mode(st), uses, owners & defined))
    groups: list[tuple[str, list[_Step]]] = []
    done: set[sp.Symbol] = set()
    remaining = list(range(len(steps)))
    while remaining:
        mode = info[remaining[0]][1]
        cur: list[_Step] = []
        here: dict[sp.Symbol, _Step] = {}
        changed = True
        while changed:
            changed = False
            for k in list(remaining):
                st, m, uses, owners = info[k]
                if m != mode or (mode == "dense" and cur):
                    continue
                ok = all(u in done or u in here for u in uses) and all(o in done for o in owners)
                if ok and any(here[u].kind == "reduce" for u in uses if u in here):
                    ok = False
                if not ok:
                    continue
                cur.append(st)
                for t in st.targets:
                    here[t] = st
                remaining.remove(k)
                changed = True
                if mode == "dense":
                    break
            if mode == "dense":
                break
        groups.append((mode, cur))
        done |= set(here)
    return groups


class _Layout:
    """Where every scalar and stored vector lives (work array offsets in units of L)."""

    def __init__(
        self, prog: IndexedProgram, groups: list[tuple[str, list[_Step]]], unrolled: bool
    ) -> None:
        self.off: dict[sp.Symbol, int] = {}
        self.length: dict[int, int] = {}  # offset -> 1 (scalar), n (vector), n (n + 1)
        self.system: dict[sp.Symbol, int] = {}  # solve target -> its system matrix (looped)
        size = 0
        group_of: dict[sp.Symbol, int] = {}
        for g, (_, steps) in enumerate(groups):
            for st in steps:
                for t in st.targets:
                    group_of[t] = g
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
                if st.kind in DENSE_KINDS:  # results of dense steps are always stored
                    self.off[t] = size
                    self.length[size] = prog.n
                    size += prog.n
                    logdet = st.stmt.logdet if st.stmt is not None else None
                    if logdet is not None:
                        self.off[logdet] = size
                        self.length[size] = 1
                        size += 1
                    if st.kind == "solve" and not unrolled:
                        self.system[t] = size
                        self.length[size] = prog.n * (prog.n + 1)
                        size += prog.n * (prog.n + 1)
                elif st.kind == "unrolled" or (st.kind == "vector" and t in stored):
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
#: The looped shape, whose lane loops vectorise, measured faster already at n = 4 (Veselova,
#: by hand and from the rigid-body engine, 4096 lanes) and compiles far less C; so only n <= 3
#: is unrolled (see benchmarks/NOTES.md).
UNROLL_MAX_N = 3

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
        self.full_chunks: set[int] = set()  # chunk sizes of specialised dense solves

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
            for p in sorted(e.atoms(sp.Pow), key=str):  # stable order: same source
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


#: Per-lane dense solve used by ``solve`` statements (both shapes; the unrolled shape calls
#: it lane by lane with ``L = nl = 1``).
_DENSE_SOLVE = """\
/* Solve K x = b per lane, lanes 0..nl-1 innermost. A holds [K | b] (n x (n + 1)), entry
 * (i, j) of lane l at A[(i * (n + 1) + j) * L + l]; it is overwritten. Gaussian elimination
 * with partial pivoting; x[i * L + l] gets the solution and logdet[l] (unless NULL)
 * log|det K|. A lane with a zero or non-finite pivot, or a non-finite solution, gets NaN
 * in both. nh_dense_solve is the generic entry; large n get one copy per chunk size
 * specialised on constant n, L and nl (full chunks: lane loops about twice as fast). */
#if defined(__GNUC__)
#define NH_DENSE_INLINE static inline __attribute__((always_inline))
#else
#define NH_DENSE_INLINE static inline
#endif
NH_DENSE_INLINE void nh_dense_solve_body(int64_t n, int64_t L, int64_t nl, double *restrict A,
                                         double *restrict x, double *restrict logdet) {
    const int64_t m = n + 1;
    int64_t piv[nl];
    double big[nl], inv[nl], lsum[nl], f[nl];
    int ok[nl];
    for (int64_t l = 0; l < nl; ++l) {
        lsum[l] = 0.0;
        ok[l] = 1;
    }
    for (int64_t j = 0; j < n; ++j) {
        double *restrict ajj = A + (j * m + j) * L;
        for (int64_t l = 0; l < nl; ++l) {
            big[l] = fabs(ajj[l]);
            piv[l] = j;
        }
        for (int64_t i = j + 1; i < n; ++i) {
            const double *restrict aij = A + (i * m + j) * L;
            for (int64_t l = 0; l < nl; ++l) {
                const double v = fabs(aij[l]);
                if (v > big[l]) {
                    big[l] = v;
                    piv[l] = i;
                }
            }
        }
        for (int64_t k = j; k < m; ++k) { /* swap rows j and piv[l] (no-op when equal) */
            double *restrict ajk = A + (j * m + k) * L;
            for (int64_t l = 0; l < nl; ++l) {
                const int64_t q = (piv[l] * m + k) * L + l;
                const double t = ajk[l];
                ajk[l] = A[q];
                A[q] = t;
            }
        }
        for (int64_t l = 0; l < nl; ++l) {
            const double d = ajj[l];
            const int good = d != 0.0 && isfinite(d);
            ok[l] &= good;
            inv[l] = good ? 1.0 / d : 0.0;
        }
        if (logdet)
            for (int64_t l = 0; l < nl; ++l) lsum[l] += ok[l] ? log(fabs(ajj[l])) : 0.0;
        for (int64_t l = 0; l < nl; ++l) ajj[l] = inv[l]; /* used by the back substitution */
        const double *restrict aj = A + j * m * L;
        for (int64_t i = j + 1; i < n; ++i) {
            double *restrict ai = A + i * m * L;
            for (int64_t l = 0; l < nl; ++l) f[l] = ai[j * L + l] * inv[l];
            for (int64_t k = j + 1; k < m; ++k)
                for (int64_t l = 0; l < nl; ++l) ai[k * L + l] -= f[l] * aj[k * L + l];
        }
    }
    for (int64_t i = n - 1; i >= 0; --i) {
        const double *restrict ai = A + i * m * L;
        for (int64_t l = 0; l < nl; ++l) f[l] = ai[n * L + l];
        for (int64_t k = i + 1; k < n; ++k)
            for (int64_t l = 0; l < nl; ++l) f[l] -= ai[k * L + l] * x[k * L + l];
        for (int64_t l = 0; l < nl; ++l) x[i * L + l] = f[l] * ai[i * L + l];
    }
    for (int64_t l = 0; l < nl; ++l) {
        int good = ok[l] && isfinite(lsum[l]);
        for (int64_t i = 0; i < n; ++i) good = good && isfinite(x[i * L + l]);
        if (!good) {
            for (int64_t i = 0; i < n; ++i) x[i * L + l] = NAN;
            lsum[l] = NAN;
        }
        if (logdet) logdet[l] = lsum[l];
    }
}

static void nh_dense_solve(int64_t n, int64_t L, int64_t nl, double *restrict A,
                           double *restrict x, double *restrict logdet) {
    nh_dense_solve_body(n, L, nl, A, x, logdet);
}
"""

#: From this ``n`` on, full chunks of the looped kernels call a copy of the dense solve
#: specialised on ``n`` and the chunk size (twice as fast at ``n = 32, 64``; below, the
#: generic one is as fast and the specialised copies would only cost compile time).
_DENSE_CONST_N = 24


def _dense_full(n: int, chunk: int) -> str:
    """The dense solve specialised on ``n`` and full chunks of ``chunk`` lanes."""
    return (
        f"static void nh_dense_solve_c{chunk}(double *restrict A, double *restrict x, "
        "double *restrict logdet) {\n"
        f"    nh_dense_solve_body({n}, {chunk}, {chunk}, A, x, logdet);\n"
        "}\n"
    )


def _num(e: sp.Expr) -> str:
    return repr(float(e))


def _product(factors: list[str]) -> str:
    """C product of ``factors`` (C expressions), dropping the factors ``1.0``."""
    kept = [f for f in factors if f != "1.0"]
    return " * ".join(kept) if kept else "1.0"


def _render_dense(em: _Emitter, st: _Step) -> list[str]:
    """One ``matvec`` or ``solve``: ``i, j`` loops (lanes innermost in the looped shape)."""
    prog, lay, n = em.prog, em.lay, em.prog.n
    stmt = st.stmt
    assert stmt is not None
    m = n + 1
    lines: list[str] = []
    local: dict[sp.Symbol, str] = {}  # unrolled: vector operand -> per-lane local array

    def op(e: sp.Expr, idx: str) -> str:
        if e.is_Number:
            return _num(e)
        if e in prog.vectors:
            if not em.unrolled:
                return em.elem(e, idx)
            if e not in local:
                local[e] = f"nh_e{len(local)}"
                vals = ", ".join(em.elem(e, k) for k in range(n))
                lines.append(f"            const double {local[e]}[{n}] = {{{vals}}};")
            return f"{local[e]}[{idx}]"
        return em.load(e, 0)

    def mat(h: sp.Symbol, i: str, j: str) -> str:
        return em.elem(h, f"({i} * {n} + {j})")

    t = stmt.target
    if stmt.kind == "matvec":
        h = stmt.matrices[0]
        e = op(stmt.exprs[0], "j")
        hij = mat(h, "j", "i") if stmt.transpose else mat(h, "i", "j")
        if em.unrolled:
            return [
                "        {",
                *lines,
                f"            double nh_dx[{n}];",
                f"            for (int64_t i = 0; i < {n}; ++i) {{",
                "                double s = 0.0;",
                f"                for (int64_t j = 0; j < {n}; ++j) s += {hij} * {e};",
                "                nh_dx[i] = s;",
                "            }",
                *[f"            {em.ws(lay.off[t], k)} = nh_dx[{k}];" for k in range(n)],
                "        }",
            ]
        ti = em.ws(lay.off[t], "i")
        return [
            f"        for (int64_t i = 0; i < {n}; ++i) {{",
            "            NH_LANES",
            f"            for (int64_t l = 0; l < L; ++l) {ti} = 0.0;",
            f"            for (int64_t j = 0; j < {n}; ++j) {{",
            "                NH_LANES",
            f"                for (int64_t l = 0; l < L; ++l) {ti} += {hij} * {e};",
            "            }",
            "        }",
        ]
    # solve: assemble [K | rhs], then nh_dense_solve
    terms = []
    for left, h, right in stmt.terms:
        if left == 0 or right == 0:
            continue
        factors = [op(left, "i"), "1.0" if h is None else mat(h, "i", "j"), op(right, "j")]
        terms.append(_product(factors))
    kij = " + ".join(terms) if terms else "0.0"
    diag = None if stmt.exprs[1] == 0 else op(stmt.exprs[1], "i")
    rhs = op(stmt.exprs[0], "i")
    logdet = stmt.logdet
    if em.unrolled:
        dl = ["            double nh_dl;"] if logdet is not None else []
        body = [
            f"            for (int64_t i = 0; i < {n}; ++i) {{",
            f"                for (int64_t j = 0; j < {n}; ++j) nh_dA[i * {m} + j] = {kij};",
            *([f"                nh_dA[i * {m + 1}] += {diag};"] if diag else []),
            f"                nh_dA[i * {m} + {n}] = {rhs};",
            "            }",
        ]
        return [
            "        {",
            f"            double nh_dA[{n * m}], nh_dx[{n}];",
            *dl,
            *lines,
            *body,
            f"            nh_dense_solve({n}, 1, 1, nh_dA, nh_dx, "
            f"{'&nh_dl' if logdet is not None else 'NULL'});",
            *[f"            {em.ws(lay.off[t], k)} = nh_dx[{k}];" for k in range(n)],
            *([f"            {em.ws(lay.off[logdet], 0)} = nh_dl;"] if logdet is not None else []),
            "        }",
        ]
    sa = lay.system[t]
    out = [
        f"        for (int64_t i = 0; i < {n}; ++i) {{",
        f"            for (int64_t j = 0; j < {n}; ++j) {{",
        "                NH_LANES",
        f"                for (int64_t l = 0; l < L; ++l) {em.ws(sa, f'(i * {m} + j)')} = {kij};",
        "            }",
        "            NH_LANES",
        "            for (int64_t l = 0; l < L; ++l) {",
        *([f"                {em.ws(sa, f'(i * {m + 1})')} += {diag};"] if diag else []),
        f"                {em.ws(sa, f'(i * {m} + {n})')} = {rhs};",
        "            }",
        "        }",
    ]
    ld = f"nh_ws{lay.off[logdet]}" if logdet is not None else "NULL"
    args = f"nh_ws{sa}, nh_ws{lay.off[t]}, {ld}"
    c = em.chunk
    if n < _DENSE_CONST_N:
        out.append(f"        nh_dense_solve({n}, {c}, L, {args});")
    else:
        em.full_chunks.add(c)
        out += [
            f"        if (L == {c}) nh_dense_solve_c{c}({args});",
            f"        else nh_dense_solve({n}, {c}, L, {args});",
        ]
    return out


def _kernel(
    prog: IndexedProgram, family: str, printer: CPrinter, unrolled: bool, full: set[int]
) -> str:
    """Source of the kernel of ``family``; adds to ``full`` the chunk sizes of specialised
    dense solves it calls."""
    prog = prog.with_dense_operands().with_reciprocals(family)
    groups = _groups(prog, _steps(prog, family))
    lay = _Layout(prog, groups, unrolled)
    size = lay.size
    chunk = _CHUNK
    if size and not unrolled:
        chunk = max(8, min(_CHUNK, _STACK_DOUBLES // size // 8 * 8))
    em = _Emitter(prog, lay, unrolled, chunk)
    em.full_chunks = full
    render = _render_group_unrolled if unrolled else _render_group_looped
    body: list[str] = []
    for g, (mode, steps) in enumerate(groups):
        kinds = ", ".join(st.kind for st in steps)
        body.append(f"        /* {mode} group {g}: {kinds} */")
        if mode == "dense":
            body += _render_dense(em, steps[0])
        else:
            body += render(em, mode == "indexed", steps, printer, str(g))
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
        elif inp.vector or inp.matrix:
            comps = prog.components(sym)
            span = f"{inp.where}[{inp.offset}:{inp.offset + len(comps)}]"
            what = "row-major n x n matrix " if inp.matrix else ""
            legend.append((span, f"{what}{sym} = ({comps[0]}, ..., {comps[-1]})"))
        else:
            legend.append((f"{inp.where}[{inp.offset}]", sym))
    return legend


def _input(prog: IndexedProgram, shape: str) -> list[object]:
    """Everything of ``prog`` the generated source depends on, flat (for the input hash).

    Matrix inputs and dense statements add items of their own (the items of programs
    without them, and so their digests, are unchanged).
    """
    items: list[object] = [shape, prog.n, "time", prog.time, "states", *prog.state_symbols]
    items += ["params", *prog.param_symbols]
    for sym, inp in prog.inputs.items():
        items += [sym, inp.where, inp.offset, inp.vector]
        if inp.matrix:
            items += ["matrix"]
    for st in prog.statements:
        items += [st.kind, st.target, *st.exprs]
        if st.kind in DENSE_KINDS:
            items += ["matrices", *st.matrices, "transpose", st.transpose, "logdet", st.logdet]
    for family, blocks in prog.outputs.items():
        items += [family, *blocks]
    return items


def _shape(prog: IndexedProgram, unroll: bool | None) -> str:
    if unroll is None:
        dense = any(st.kind in DENSE_KINDS for st in prog.statements)
        unroll = prog.n <= UNROLL_MAX_N and not dense
    elif not isinstance(unroll, bool):
        raise TypeError(f"unroll must be a bool or None, got {unroll!r}")
    return "unrolled" if unroll else "looped"


def program_digest(prog: IndexedProgram, unroll: bool | None = None) -> str:
    """SHA-256 of everything of ``prog`` its generated source depends on (the banner's hash).

    ``unroll`` as in :func:`generate_structured_c`. Cheap next to generating the source: a
    cache of generated sources can be keyed on it.
    """
    return expression_digest(_input(prog, _shape(prog, unroll)))


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
        for ``n <=`` :data:`UNROLL_MAX_N` and no ``matvec``/``solve`` in the program (their
        per-lane code in the unrolled shape reads the ``n^2`` matrix entries with lane
        stride ``ld``: several times slower than the looped shape at ``n = 8, 16``).
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
    shape = _shape(prog, unroll)
    unroll = shape == "unrolled"
    printer = CPrinter()
    n_obs = prog.n_out("observables") if "observables" in prog.outputs else 0
    sizes = ", ".join(f"{SYMBOL[f]} ({prog.n_out(f)} outputs)" for f in prog.outputs)
    parts = [
        banner(
            generator="nhfast.codegen.generate_structured_c",
            regenerate="nhfast.codegen.generate_structured_c(program), e.g. through the "
            "system's compile()",
            digest=expression_digest(_input(prog, shape)),
            legend=_legend(prog),
            provenance=provenance,
            details=f"Structured kernels ({shape}): n = {prog.n}, "
            f"{len(prog.statements)} statements; {sizes}.",
        ),
        preamble(),
        _LANE_PRAGMA,
        info_table(prog.n_state, prog.n_params, n_obs, prog.outputs, 0),
    ]
    kernels: list[str] = []
    full: set[int] = set()
    for family in prog.outputs:
        try:
            kernels.append(_kernel(prog, family, printer, unroll, full))
        except NotImplementedError as exc:
            raise ValueError(f"kernel {family!r}: expression has no C equivalent: {exc}") from exc
    if any(st.kind == "solve" for st in prog.statements):
        parts.append(_DENSE_SOLVE)
        parts += [_dense_full(prog.n, c) for c in sorted(full)]
    return "\n".join(parts + kernels)
