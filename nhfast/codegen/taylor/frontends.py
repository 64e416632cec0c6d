"""The front ends of the Taylor tape: a :class:`~nhfast.codegen.KernelSet` (unrolled
expressions, its ``rhs`` family and solves; joint CSE first) and an
:class:`~nhfast.codegen.IndexedProgram` (the statements of its ``rhs`` output; vectors stay
vectors, so the code is ``O(1)`` in ``n``), with the states' loads and integration."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sympy as sp

from nhfast.codegen.ckernels import KernelSet
from nhfast.codegen.indexed import IndexedProgram
from nhfast.codegen.taylor.build import LANE, Builder, factors, pair_key
from nhfast.codegen.taylor.tape import Line, Tape, Val, call, code, line


def _pair_counts(b: Builder, exprs: Sequence[sp.Expr]) -> dict[tuple[sp.Expr, sp.Expr], int]:
    """How many products of ``exprs`` have each pair of non-constant factors."""
    counts: dict[tuple[sp.Expr, sp.Expr], int] = {}
    for e in exprs:
        for sub in sp.preorder_traversal(sp.sympify(e)):
            if not isinstance(sub, sp.Mul):
                continue
            fs = factors(
                [
                    f
                    for f in sub.args
                    if not b.is_const(f)
                    and not (isinstance(f, sp.Pow) and f.exp.is_number and f.exp.is_negative)
                ]
            )
            if len(fs) < 2:
                continue
            seen = set()
            for i in range(len(fs)):
                for j in range(i + 1, len(fs)):
                    seen.add(pair_key(fs[i], fs[j]))
            for key in seen:
                counts[key] = counts.get(key, 0) + 1
    return counts


def _time_var(b: Builder, sym: sp.Symbol) -> None:
    """The time as a variable: t^[0] = t, t^[1] = 1, then 0."""
    tv = b.t.new_var(False)
    b.bound[sym] = tv
    b.t.ops.append(  # not counted by the cost model (a kernel with time has no size)
        code(
            "{ double *d_ = (double *)&",
            tv.ref(),
            "[k * NHT_TOT]; for (int l = 0; l < NHT_LANES; ++l) "
            f"d_[l] = k == 0 ? t[l0 + {LANE}] : (k == 1 ? 1.0 : 0.0); }}",
        )
    )


def _runs(n: int, joins: Callable[[int], bool]) -> list[tuple[int, int]]:
    """``(first row, rows)`` of the runs of rows ``0 .. n-1``: row ``r`` joins the run of row
    ``r - 1`` when ``joins(r)``."""
    runs: list[tuple[int, int]] = []
    for r in range(n):
        if runs and joins(r):
            r0, m = runs[-1]
            runs[-1] = (r0, m + 1)
        else:
            runs.append((r, 1))
    return runs


def state_runs(states: list[tuple[Val, int]]) -> list[tuple[int, int]]:
    """``(first row, rows)`` of the runs of consecutive components of one state variable."""
    return _runs(len(states), lambda r: states[r - 1] == (states[r][0], states[r][1] - 1))


def _finish(b: Builder, states: list[tuple[Val, int]], rhs: Sequence[Val]) -> None:
    """Order 0 of the states from ``x``, and ``x^[k+1] = f^[k] / (k + 1)`` every order: a run
    of components of a state vector whose right-hand sides are the same run of one work
    variable in one ``nht_integv`` (a loop over the run; a call of ``nht_integ`` per component
    was a measurable share of the one-lane pass of Veselova n = 64)."""
    t = b.t
    for r0, m in state_runs(states):
        v, c0 = states[r0]
        if m > 1:  # one lane, ld = 1 (its state packed): a copy
            t.load.append(
                code(
                    "if (NHT_LANES == 1 && ld == 1) memcpy((double *)&",
                    v.ref(),
                    f"[{c0}], x + {r0}, {m} * sizeof(double)); else",
                )
            )
        t.load.append(
            code(
                f"for (int64_t r = {r0}; r < {r0 + m}; ++r) {{ double *d_ = (double *)&",
                v.ref(),
                f"[{c0 - r0} + r]; for (int l = 0; l < NHT_LANES; ++l) d_[l] = x[r * ld + l0 + "
                f"{LANE}]; }}",
            )
        )

    def integrated_with(r: int) -> bool:
        """Whether row r's state and right-hand side continue those of row r - 1."""
        f0, f1 = rhs[r - 1], rhs[r]
        return (
            states[r - 1] == (states[r][0], states[r][1] - 1)
            and f0.comp is not None
            and not f0.const
            and not f1.const
            and f1.name == f0.name
            and f1.comp == f0.comp + 1
        )

    for r, m in _runs(len(states), integrated_with):
        (v, c), f = states[r], rhs[r]
        if m > 1:
            t.ops.append(
                call(
                    "nht_integv",
                    m,
                    f"NHT(nht_integv)(k, {m}, ",
                    v.strided(f" + {c}"),
                    ", ",
                    f.strided(f" + {f.comp}"),
                    ");",
                )
            )
        else:
            t.ops.append(
                call(
                    "nht_integ",
                    1,
                    "NHT(nht_integ)(k, ",
                    v.strided(),
                    f", {c}, ",
                    f.arg(False),
                    f", {int(f.const)});",
                )
            )


def _component(v: Val, c: int) -> Val:
    """Component ``c`` of a vector value (a scalar value unchanged)."""
    return Val(v.const, False, v.name, c) if v.vector else v


def kernel_set_tape(ks: KernelSet) -> tuple[Tape, list[tuple[Val, int]]]:
    """The tape of the ``rhs`` family of ``ks`` and its states (work value, component)."""
    if "rhs" in ks.needs_derivs:
        raise ValueError(
            "the Taylor method cannot expand a right-hand side that uses derivatives of its "
            "solves' unknowns"
        )
    tape = Tape(1)
    b = Builder(tape, None)
    for k, s in enumerate(ks.params):
        b.params[s] = k
    states = []
    for s in ks.states:
        v = tape.new_var(False)
        b.bound[s] = v
        states.append((v, 0))
    if ks.time is not None:
        _time_var(b, ks.time)
    for si, sv in enumerate(ks.solves):
        _solve_spec(b, si, sv)
    rhs = [sp.sympify(e) for e in ks.kernels["rhs"]]
    repl, reduced = sp.cse(rhs, symbols=sp.numbered_symbols("nh_tc"), order="none")
    for sym, e in repl:
        b.bound[sym] = b.value(e, False)
    _finish(b, states, [b.value(e, False) for e in reduced])
    return tape, states


def _solve_spec(b: Builder, si: int, sv) -> None:
    """Unknowns of ``sv.matrix * u = sv.rhs`` (a KernelSet solve): LU of ``M^[0]`` at order 0,
    then ``M^[0] u^[k] = b^[k] - sum_{j >= 1} M^[j] u^[k-j]``."""
    t = b.t
    r = sv.r
    mats = [b.value(sp.sympify(e), False) for e in sv.matrix]
    rhs = [b.value(sp.sympify(e), False) for e in sv.rhs]
    us = [t.new_var(False) for _ in range(r)]
    A, v, piv = f"S{si}_A", f"S{si}_b", f"S{si}_p"
    t.solve_ws.append((f"S{si}", r * r + r, r))
    lines = [code(f"/* linear solve {si}: {r} unknowns */"), code("if (k == 0) {")]
    lines += [code(f"  {A}[{ab}] = ", m.ref(), f"[{m.comp or 0}];") for ab, m in enumerate(mats)]
    lines += [code(f"  nh_lu_factor({r}, NHT_LANES, (double *){A}, {piv});"), code("}")]
    for a, f in enumerate(rhs):
        op = "nht_setc" if f.const else "nht_copy"
        lines.append(call(op, 1, f"NHT({op})(k, {v}, 0, {a}, ", f.arg(False), ");"))
    for a in range(r):
        for c in range(r):
            m = mats[a * r + c]
            if not m.const:
                lines.append(
                    call(
                        "nht_submul",
                        1,
                        f"NHT(nht_submul)(k, 1, {v} + {a}, 0, ",
                        m.arg(False),
                        ", ",
                        us[c].arg(False),
                        ", 1);",
                    )
                )
    lines.append(code(f"nh_lu_solve({r}, NHT_LANES, (const double *){A}, {piv}, (double *){v});"))
    lines += [code(u.ref(), f"[k * NHT_TOT] = {v}[{a}];") for a, u in enumerate(us)]
    t.ops += lines
    for u, sym in zip(us, sv.unknowns, strict=True):
        b.bound[sym] = u


def program_tape(prog: IndexedProgram) -> tuple[Tape, list[tuple[Val, int]]]:
    """The tape of the ``rhs`` output of ``prog`` and its states (work value, component)."""
    tape = Tape(prog.n)
    b = Builder(tape, prog.index)
    n = prog.n
    states: list[tuple[Val, int]] = []
    for sym, inp in prog.inputs.items():
        if inp.where != "par":
            continue
        if inp.matrix:
            for k, c in enumerate(prog.components(sym)):
                b.params[c] = inp.offset + k
        elif inp.vector:
            b.param_vectors[sym] = inp.offset
            for k, c in enumerate(prog.components(sym)):
                b.views[c] = (sym, k)
        else:
            b.params[sym] = inp.offset
    xs = sorted((inp.offset, str(s), s) for s, inp in prog.inputs.items() if inp.where == "x")
    for _, _, sym in xs:
        inp = prog.inputs[sym]
        v = tape.new_var(inp.vector)
        b.bound[sym] = v
        if inp.vector:
            for k, c in enumerate(prog.components(sym)):
                b.views[c] = (sym, k)
            states += [(v, k) for k in range(n)]
        else:
            states.append((v, 0))
    if prog.time is not None:
        _time_var(b, prog.time)
    blocks = prog.outputs["rhs"]
    need = prog.needed(blocks)
    b.pairs = _pair_counts(
        b,
        [e for st in prog.statements if need & set(st.targets) for e in st.exprs] + list(blocks),
    )
    for si, st in enumerate(prog.statements):
        if not need & set(st.targets):
            continue
        b.bound[st.target] = _statement(b, prog, st, si)
        if st.target in prog.vectors:
            for k, c in enumerate(prog.components(st.target)):
                b.views[c] = (st.target, k)
    outs: list[Val] = []
    for blk in blocks:
        if prog.is_indexed(blk):
            v = b.value(blk, True)
            outs += [_component(v, k) for k in range(n)]
        else:
            outs.append(b.value(blk, False))
    _finish(b, states, outs)
    return tape, states


def _statement(b: Builder, prog: IndexedProgram, st, si: int) -> Val:
    """The value of statement ``st`` (number ``si``) of ``prog``."""
    if st.kind == "scalar":
        return b.value(st.exprs[0], False)
    if st.kind == "reduce":
        return _reduce(b, b.value(st.exprs[0], True))
    if st.kind == "vector":
        return b.value(st.exprs[0], True)
    if st.kind == "unrolled":
        return _unrolled(b, [b.value(e, False) for e in st.exprs])
    if st.kind == "matvec":
        return _matvec(b, prog, st)
    if st.kind == "solve":
        return _dense_solve(b, prog, st, si)
    raise ValueError(f"unknown statement kind {st.kind!r}")  # pragma: no cover


def _reduce(b: Builder, a: Val) -> Val:
    """``sum_i a_i`` (``n a`` for a scalar ``a``)."""
    t, n = b.t, b.t.n
    if a.const:
        c = t.new_const(False)
        if a.vector:
            t.prep.append(
                line(
                    f"{{ NHT_T s_ = {a.name}[0]; for (int64_t i = 1; i < {n}; ++i) "
                    f"s_ += {a.name}[i]; {c.name}[0] = s_; }}"
                )
            )
        else:
            t.prep.append(line(f"{c.name}[0] = {float(n)!r} * {a.name}[0];"))
        return c
    if not a.vector:
        return b._op("nht_scale", False, repr(float(n)), a)
    key = ("sum", a)
    if key not in t.memo:
        out = t.new_var(False)
        t.ops.append(
            call(
                "nht_sum",
                n,
                f"NHT(nht_sum)(k, {n}, ",
                out.strided(),
                ", ",
                a.arg(True),
                ");",
                output=out.name,
            )
        )
        t.memo[key] = out
    return t.memo[key]


def _unrolled(b: Builder, vals: list[Val]) -> Val:
    t = b.t
    if all(v.const for v in vals):
        c = t.new_const(True)
        t.prep += [line(f"{c.name}[{i}] = {v.name}[{v.comp or 0}];") for i, v in enumerate(vals)]
        return c
    out = t.new_var(True)
    for i, v in enumerate(vals):
        op = "nht_setc" if v.const else "nht_copy"
        t.ops.append(call(op, 1, f"NHT({op})(k, ", out.strided(), f", {i}, ", v.arg(False), ");"))
    return out


def _matrix_ptr(prog: IndexedProgram, m: sp.Symbol, transpose: bool) -> tuple[str, int, int]:
    """(lane values, row stride, column stride) of parameter matrix ``m`` in a pass."""
    n = prog.n
    hi, hj = (n, 1) if not transpose else (1, n)
    return f"PAR + {prog.inputs[m].offset}", hi, hj


def _matvec(b: Builder, prog: IndexedProgram, st) -> Val:
    t, n = b.t, b.t.n
    a = b.value(st.exprs[0], True)
    h, hi, hj = _matrix_ptr(prog, st.matrices[0], st.transpose)
    if a.const:
        c = t.new_const(True)
        t.prep.append(
            line(
                f"{{ const int64_t k = 0; NHT(nht_matvec)(k, {n}, {c.name}, 0, {h}, {hi}, {hj}, ",
                a.arg(True),
                "); }",
            )
        )
        return c
    out = t.new_var(True)
    t.ops.append(
        call(
            "nht_matvec",
            n,
            f"NHT(nht_matvec)(k, {n}, ",
            out.strided(),
            f", {h}, {hi}, {hj}, ",
            a.arg(True),
            ");",
            output=out.name,
        )
    )
    return out


def _dense_solve(b: Builder, prog: IndexedProgram, st, si: int) -> Val:
    """``K v = f`` with ``K = diag(d) + sum_t l_t M_t r_t^T`` per lane: LU of ``K^[0]`` at
    order 0; at order k the part of ``(K v)^[k]`` without ``v^[k]`` goes to the right-hand
    side (``P_t = r_t v`` and ``Q_t = M_t P_t`` kept to every order), then one solve."""
    t, n = b.t, b.t.n
    f = b.value(st.exprs[0], True)
    d = b.value(st.exprs[1], True)
    terms = [(b.value(lft, True), m, b.value(rgt, True)) for lft, m, rgt in st.terms]
    v = t.new_var(True)
    A, rv, piv = f"S{si}_A", f"S{si}_b", f"S{si}_p"
    t.solve_ws.append((f"S{si}", n * n + n, n))
    vin = v.arg(True)
    L: list[Line] = [code(f"/* dense solve {st.target}: n = {n} */"), code("if (k == 0) {")]
    L.append(code(f"  for (int64_t e = 0; e < {n * n}; ++e) {A}[e] = NHT_ZERO;"))
    L.append(
        code(
            "  { const NHT(nht_in) d_ = ",
            d.arg(True),
            f"; for (int64_t i = 0; i < {n}; ++i) {A}[i * {n + 1}] += NHT_ROW(d_, 0, i)[0]; }}",
        )
    )
    pq: list[tuple[Val, Val]] = []
    for lv, m, rgt in terms:
        h = "" if m is None else f" * PAR[{prog.inputs[m].offset} + i * {n} + j]"
        L.append(
            code(
                "  { const NHT(nht_in) l_ = ",
                lv.arg(True),
                ", r_ = ",
                rgt.arg(True),
                "; "
                f"for (int64_t i = 0; i < {n}; ++i) for (int64_t j = 0; j < {n}; ++j) "
                f"{A}[i * {n} + j] += NHT_ROW(l_, 0, i)[0]{h} * NHT_ROW(r_, 0, j)[0]; }}",
            )
        )
        pq.append((t.new_var(True), t.new_var(m is not None)))
    L += [code(f"  nh_lu_factor({n}, NHT_LANES, (double *){A}, {piv});"), code("}")]
    # right-hand side: f^[k] - sum_{j>=1} d^[j] v^[k-j] - sum_t (l_t Q_t)^[k], v^[k] = 0
    rhs0 = "(k == 0 ? NHT_ROW(f_, 0, i)[0] : NHT_ZERO)" if f.const else "NHT_ROW(f_, k, i)[0]"
    L.append(
        code(
            "{ const NHT(nht_in) f_ = ",
            f.arg(True),
            f"; for (int64_t i = 0; i < {n}; ++i) {rv}[i] = {rhs0}; }}",
        )
    )
    if not d.const:
        L.append(
            call(
                "nht_submul",
                n,
                f"NHT(nht_submul)(k, {n}, {rv}, 0, ",
                d.arg(True),
                ", ",
                vin,
                ", 1);",
            )
        )
    for (lv, m, rgt), (P, Q) in zip(terms, pq, strict=True):
        L.append(
            code(f"for (int64_t i = 0; i < {n}; ++i) ", P.ref(), "[k * NHT_TOT + i] = NHT_ZERO;")
        )
        if not rgt.const:
            L.append(
                call(
                    "nht_submul",
                    n,
                    f"NHT(nht_submul)(k, {n}, ",
                    P.strided(),
                    ", ",
                    rgt.arg(True),
                    ", ",
                    vin,
                    ", 1);",
                    output=P.name,
                )
            )
            L.append(
                call(
                    "nht_scale",
                    n,
                    f"NHT(nht_scale)(k, {n}, ",
                    P.strided(),
                    ", -1.0, ",
                    P.arg(True),
                    ");",
                    output=P.name,
                )
            )
        L.append(_q_from_p(prog, m, P, Q, n))
        if lv.const:  # only l^[0] Q^[k]
            L.append(
                code(
                    "{ const NHT(nht_in) l_ = ",
                    lv.arg(True),
                    ", q_ = ",
                    Q.arg(True),
                    "; "
                    f"for (int64_t i = 0; i < {n}; ++i) {rv}[i] -= l_.p[i * l_.is] * "
                    "NHT_ROW(q_, k, i)[0]; }",
                )
            )
        else:
            L.append(
                call(
                    "nht_submul",
                    n,
                    f"NHT(nht_submul)(k, {n}, {rv}, 0, ",
                    lv.arg(True),
                    ", ",
                    Q.arg(True),
                    ", 0);",
                )
            )
    L.append(code(f"nh_lu_solve({n}, NHT_LANES, (const double *){A}, {piv}, (double *){rv});"))
    L.append(code(f"for (int64_t i = 0; i < {n}; ++i) ", v.ref(), f"[k * NHT_TOT + i] = {rv}[i];"))
    for (_, m, rgt), (P, Q) in zip(terms, pq, strict=True):  # P^[k], Q^[k] with v^[k]
        L.append(
            code(
                "{ const NHT(nht_in) r_ = ",
                rgt.arg(True),
                f"; for (int64_t i = 0; i < {n}; ++i) ",
                P.ref(),
                "[k * NHT_TOT + i] += NHT_ROW(r_, 0, i)[0] * ",
                v.ref(),
                "[k * NHT_TOT + i]; }",
            )
        )
        L.append(_q_from_p(prog, m, P, Q, n))
    t.ops += L
    return v


def _q_from_p(prog: IndexedProgram, m, P: Val, Q: Val, n: int) -> Line:
    if m is None:
        return call(
            "nht_sum",
            n,
            f"NHT(nht_sum)(k, {n}, ",
            Q.strided(),
            ", ",
            P.arg(True),
            ");",
            output=Q.name,
        )
    h, hi, hj = _matrix_ptr(prog, m, False)
    return call(
        "nht_matvec",
        n,
        f"NHT(nht_matvec)(k, {n}, ",
        Q.strided(),
        f", {h}, {hi}, {hj}, ",
        P.arg(True),
        ");",
        output=Q.name,
    )
