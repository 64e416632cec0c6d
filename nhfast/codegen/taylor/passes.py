"""Passes over the Taylor tape: products fused (:func:`fused`), the values of the current
order only (:func:`current_only`) and the placement of the work values (:func:`layout`).

They read the typed lines of :mod:`.tape` (operation, output, named work values); the C text
is made from their result by :mod:`.render`.
"""

from __future__ import annotations

from dataclasses import dataclass

from nhfast.codegen.taylor.build import LANE
from nhfast.codegen.taylor.frontends import state_runs
from nhfast.codegen.taylor.tape import Line, Tape, Val, call, join, line

#: At most this many products (and distinct operands) in one nht_prods (taylor_ops.h).
GROUP_PRODUCTS = 3
GROUP_OPERANDS = 4


def fused(tape: Tape) -> list[Line]:
    """The tape's operations with products of vector values that share an operand in one
    ``nht_prods`` each, which loads the shared coefficients once (taylor_ops.h).

    A product joins the group of an earlier one when it has the same components, shares an
    operand with the group, and no operation between them writes one of its operands (it is
    then moved up to the group: its own output is new there, nothing before it reads it). An
    operation other than a product counts as writing every work value it names; a product
    already moved up to an earlier group wrote its output there. Tapes with
    linear solves (lines that are not single operations) are left as they are.

    Veselova n = 16 (the squares of gamma and m with gamma m in one group, the products of
    gamma with two scalars in another): with :func:`layout`, a kernel call of the vector pass
    measured markedly faster at n = 16 and 64 (see benchmarks/NOTES.md). The one-lane pass,
    whose blocks of components are its vectors, gains nothing or loses a little; it keeps the
    groups for the same sums, so that a lane's bits do not depend on its pass.
    """
    if tape.solve_ws or len(tape.products) < 2:
        return list(tape.ops)
    prods = tape.products
    joined: set[int] = set()
    out: list[Line] = []
    for p, op in enumerate(tape.ops):
        if p in joined:
            continue
        if p not in prods:
            out.append(op)
            continue
        group = [p]
        operands = {prods[p][1], prods[p][2]}
        written = {prods[p][0].name}
        for q in range(p + 1, len(tape.ops)):
            if len(group) == GROUP_PRODUCTS:
                break
            if q in joined:  # moved up to an earlier group: written before this one
                continue
            if q in prods:
                o, a, b = prods[q]
                mine = {a, b}
                shares = bool(mine & operands) and len(mine | operands) <= GROUP_OPERANDS
                if shares and not {a.name, b.name} & written:
                    group.append(q)
                    operands |= mine
                    written.add(o.name)
                    continue
                written.add(o.name)
            else:
                written.update(tape.ops[q].names)
        if len(group) == 1:
            out.append(op)
            continue
        joined.update(group[1:])
        out.append(group_call(tape, [prods[g] for g in group]))
    return out


def group_call(tape: Tape, members: list[tuple[Val, Val, Val]]) -> Line:
    """One ``nht_prods`` call for products ``(out, a, b)`` of vector values."""
    n = tape.n
    ops: list[Val] = []
    for _, a, b in members:
        for v in (a, b):
            if v not in ops:
                ops.append(v)
    outs = [o.strided() for o, _, _ in members]
    outs += outs[:1] * (GROUP_PRODUCTS - len(outs))
    idx = [str(ops.index(v)) for _, a, b in members for v in (a, b)]
    idx += ["0"] * (2 * GROUP_PRODUCTS - len(idx))
    args = [v.arg(True) for v in ops + ops[:1] * (GROUP_OPERANDS - len(ops))]
    return call(
        "nht_prods",
        n,
        f"NHT(nht_prods)(k, {n}, {len(members)}, ",
        join((o,) for o in outs),
        f", {len(ops)}, ",
        join(args),
        f", {', '.join(idx)});",
        conv=n * len(members),
    )


def current_only(tape: Tape, states: list[tuple[Val, int]]) -> set[str]:
    """Work values needed at the current order only: every operation that names them reads
    (or writes) their coefficient k alone, so one row serves every order (``js = 0``).

    Most values of a right-hand side are such (the terms of sums, products that feed a linear
    combination): kept at every order they made the work of Veselova n = 16 237 values per
    order, 15 kB per order of a pass of 8 lanes, of which 44 are needed. States, operands of
    convolutions, the outputs of recurrences on their own earlier coefficients (quotients,
    powers, functions) and anything named by a line that is not a single known operation
    keep their rows.
    """
    keep = {v.name for v, _ in states}
    seen: set[str] = set()
    for op in tape.ops:
        names = op.names
        seen.update(names)
        if op.reads_order_k:
            continue
        written_alone = op.writes_order_k and names[0] == op.output
        keep.update(names[1:] if written_alone else names)
    for ld in tape.load:
        keep.update(ld.names)
    return seen - keep


@dataclass
class Layout:
    """The lines of a pass with its work values placed: ``rows`` values per order (the
    values kept at every order, ``W[k * NHT_TOT + offset + i]``) and ``slots`` values of
    one row (``WT[offset + i]``, shared by values whose lines do not overlap)."""

    start: list[str]
    ops: list[str]
    out: list[str]
    rows: int
    slots: int


def _out_lines(states: list[tuple[Val, int]], n_state: int) -> list[Line]:
    """The coefficients of the states out, per run of components of one state vector."""
    out = [
        line("/* coefficients out: coef[(k * n_state + row) * ld + lane]; a run of"),
        line(" * components of one state vector in one copy for one lane with ld = 1 */"),
    ]
    for r0, m in state_runs(states):
        v, c0 = states[r0]
        if m > 1:
            out.append(
                line(
                    f"if (NHT_LANES == 1 && ld == 1) memcpy(coef + k * {n_state} + {r0}, "
                    "(const double *)&",
                    v.ref(),
                    f"[k * NHT_TOT + {c0}], {m} * sizeof(double)); else",
                )
            )
        out.append(
            line(
                f"for (int64_t r = {r0}; r < {r0 + m}; ++r) {{ const double *s_ = "
                "(const double *)&",
                v.ref(),
                f"[k * NHT_TOT + {c0 - r0} + r]; "
                f"double *d_ = coef + (k * {n_state} + r) * ld + l0; "
                "if (nl == NHT_LANES) memcpy(d_, s_, sizeof(NHT_T)); "
                "else for (int64_t l = 0; l < nl; ++l) d_[l] = s_[l]; }",
            )
        )
    return out


def layout(
    tape: Tape,
    states: list[tuple[Val, int]],
    ops: list[Line],
    n_state: int,
    n_par: int,
    one_row: bool = True,
) -> Layout:
    """The pass's lines (:func:`nhfast.codegen.taylor.render.pass_body`) around its
    operations ``ops`` (the tape's, products grouped by :func:`fused`), with the values of
    the current order only (:func:`current_only`) in a few shared slots.

    Kept at every order, Veselova n = 16 had 237 values per order, 15 kB per order in a pass
    of 8 lanes, of which 44 are needed at earlier orders; the other 193 now share 65 slots
    (a value's slot is free again after its last line). With the groups, a kernel call of the
    vector pass measured faster at n = 16 and 64, and the layout alone gains a little at
    n = 16 (see benchmarks/NOTES.md). The one-lane pass, whose work fits the first-level
    cache, keeps every value at every order (``one_row`` false): there one row was mostly
    slower; the operations, and so a lane's bits, are the same in either layout.
    """
    start = [
        line("/* the parameters, then the constants: once per pass */"),
        line(
            f"for (int64_t r = 0; r < {n_par}; ++r) {{ double *d_ = (double *)&PAR[r]; "
            f"for (int l = 0; l < NHT_LANES; ++l) d_[l] = par[r * ld + l0 + {LANE}]; }}"
        ),
        *tape.prep,
        line("/* order 0 of the states */"),
        *tape.load,
    ]
    out = _out_lines(states, n_state)
    single = current_only(tape, states) if one_row else set()
    for ln in (*start, *ops, *out):  # every mention of such a value carries its stride
        single -= ln.bare_names
    # the values of every order, packed; the others in slots reused once their lines end
    place: dict[str, str] = {}
    rows = 0
    for name, nc in tape.work:
        if name not in single:
            place[name] = f"(W + {rows})"
            rows += nc
    span: dict[str, list[int]] = {}
    for i, ln in enumerate(ops):
        for name in ln.names:
            if name in single:
                span.setdefault(name, [i, i])[1] = i
    size = dict(tape.work)
    free: dict[int, list[tuple[int, int]]] = {}  # size -> (last line of its value, offset)
    slots = 0
    for name, (first, last) in sorted(span.items(), key=lambda kv: kv[1][0]):
        pool = free.setdefault(size[name], [])
        reuse = next((j for j, (end, _) in enumerate(pool) if end < first), None)
        if reuse is None:
            off, slots = slots, slots + size[name]
        else:
            off = pool.pop(reuse)[1]
        pool.append((last, off))
        place[name] = f"(WT + {off})"

    def render(lines: list[Line]) -> list[str]:
        return [ln.render(place, single) for ln in lines]

    return Layout(render(start), render(ops), render(out), rows, slots)
