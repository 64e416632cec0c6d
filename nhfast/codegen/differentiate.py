"""Derivatives of indexed programs, generated from the program itself.

Two program transforms of an :class:`~nhfast.codegen.indexed.IndexedProgram`:

* :func:`jvp_program` -- forward mode: every statement gets a tangent statement, so the new
  program's ``rhs`` is ``(X(x), DX(x) dx)`` (the variational equations); same cost order as
  the program itself.
* :func:`with_divergence` (:func:`divergence_block`) -- the trace of ``dX/dx`` (Liouville's
  integral), in ``O(n)`` work per lane for programs of ``scalar``/``reduce``/``vector``/
  ``unrolled`` statements.

The divergence uses that the Jacobian of every vector handle ``h`` with respect to a state
vector ``x`` is *diagonal plus low rank plus explicit*::

    dh[i]/dx[k] = delta_ik D[i] + sum_q T_q[i] (grad_x q)[k] + sum_u W_u[i] M_u[i, k],

where ``q`` runs over the lane scalars ``h`` depends on (scalar handles and components of
vectors), ``grad_x q`` is a length-``n`` vector (an element-wise expression, emitted as a
``vector`` statement unless it is small enough to inline, and built in topological order
from the gradients of earlier lane scalars: forward mode over the lane scalars, linear in
their number), and ``M_u`` is the
explicit (sparse) Jacobian of an ``unrolled`` vector ``u`` with respect to the components of
``x`` (e.g. the Hessian of a potential).  ``D``, ``T_q`` and ``W_u`` are element-wise
expressions found by the chain rule through the element-wise statements.  The trace of an
output block ``F`` aligned with ``x`` is then the single reduction
``sum_i (D_F + sum_q T_F,q grad q + sum_u W_F,u diag M_u)[i]``; a state scalar's diagonal
entry is a forward-mode derivative.  No step ever forms an ``n x n`` matrix (except the
explicit Jacobians of ``unrolled`` statements, which are as sparse as the formulas).

``matvec`` and ``solve`` statements have dense Jacobians (``H``, ``K^-1``) and no such rule:
their tangents are exact (a ``matvec`` of the tangent; a second ``solve`` with the same
``K``), and their divergence is available column by column (``columns=True``: ``n``
forward-mode passes, ``O(n)`` times the program's work and code).
"""

from __future__ import annotations

import sympy as sp

from nhfast.codegen.indexed import IndexedProgram, Statement

__all__: list[str] = []

_ZERO = sp.Integer(0)
_BASIC_KINDS = frozenset({"scalar", "reduce", "vector", "unrolled"})
#: Element-wise derivative data of at most this many operations is inlined where used
#: instead of stored as a vector (``n`` doubles per lane each).
_INLINE = 20


# ------------------------------------------------------------------------ helpers ----


class _Emitter:
    """Appends derivative statements to ``prog`` under fresh names."""

    def __init__(self, prog: IndexedProgram) -> None:
        self.prog = prog
        taken = {str(s) for s in prog.inputs}
        taken |= {t.name for st in prog.statements for t in _targets(st)}
        taken |= {str(c) for c in prog.owners}
        self.taken = taken

    def fresh(self, base: str) -> str:
        base = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in base)
        if not base or base[0].isdigit() or base.startswith("nh_"):
            base = "d" + base
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def vector(self, base: str, expr: sp.Expr, inline: int = 0) -> sp.Expr:
        """``expr`` (element-wise) as a handle; zero, atoms and expressions of at most
        ``inline`` operations are returned unchanged (recomputed where used: cheaper than
        storing ``n`` values per lane)."""
        if expr == 0 or expr.is_Atom or (inline and sp.count_ops(expr) <= inline):
            return expr
        return self.prog.vector(self.fresh(base), expr)

    def scalar(self, base: str, expr: sp.Expr) -> sp.Expr:
        if expr == 0 or expr.is_Atom:
            return expr
        return self.prog.scalar(self.fresh(base), expr)

    def reduce(self, base: str, expr: sp.Expr) -> sp.Expr:
        if expr == 0:
            return _ZERO
        return self.prog.reduce(self.fresh(base), expr)

    def unrolled(self, base: str, exprs: list[sp.Expr]) -> sp.Expr:
        """An ``unrolled`` vector of ``exprs``; zero when every entry is."""
        if all(e == 0 for e in exprs):
            return _ZERO
        return self.prog.unrolled(self.fresh(base), exprs)

    def component(self, expr: sp.Expr, j: int) -> sp.Expr:
        """Entry ``j`` of the element-wise expression ``expr`` (a lane-level expression)."""
        prog = self.prog
        rep: dict[sp.Symbol, sp.Expr] = {
            v: prog.components(v)[j] for v in expr.free_symbols if v in prog.vectors
        }
        if prog.index in expr.free_symbols:
            rep[prog.index] = sp.Integer(j)
        return expr.xreplace(rep) if rep else expr


def _targets(st: Statement) -> tuple[sp.Symbol, ...]:
    """Every handle ``st`` defines (a ``solve`` may also define its log-determinant)."""
    logdet = getattr(st, "logdet", None)
    return (st.target,) if logdet is None else (st.target, logdet)


def _check_kinds(
    prog: IndexedProgram, need: set[sp.Symbol], what: str, allowed: frozenset[str]
) -> None:
    for st in prog.statements:
        if need & set(_targets(st)) and st.kind not in allowed:
            raise NotImplementedError(
                f"{what}: statement {st.target} of kind {st.kind!r} is not supported "
                f"(no O(n) rule for its Jacobian)"
            )


def _prune(new: IndexedProgram, keep: set[sp.Symbol]) -> None:
    """Drop appended statements (targets not in ``keep``) that no output needs."""
    need = new.needed([b for blocks in new.outputs.values() for b in blocks])
    new.statements = [st for st in new.statements if st.target in keep or need & set(_targets(st))]


# ------------------------------------------------------------------- forward mode ----


class _Forward:
    """Forward-mode tangents of the statements of ``em.prog``.

    ``tan`` maps handles (inputs and statement targets) to their tangent: a scalar
    expression for scalars, an element-wise expression (usually a vector handle) for vectors;
    absent means zero.
    """

    def __init__(
        self,
        em: _Emitter,
        seeds: dict[sp.Symbol, sp.Expr],
        prefix: str,
        need: set[sp.Symbol] | None = None,
    ) -> None:
        self.em = em
        self.need = need if need is not None else set()
        self.prog = em.prog
        self.tan: dict[sp.Symbol, sp.Expr] = {k: v for k, v in seeds.items() if v != 0}
        self.prefix = prefix

    def _sym_tangent(self, s: sp.Symbol, elementwise: bool) -> sp.Expr:
        prog = self.prog
        if s in prog.owners:
            v, j = prog.owners[s]
            t = self.tan.get(v, _ZERO)
            return self.em.component(t, j) if t != 0 else _ZERO
        if s in prog.vectors and not elementwise:  # pragma: no cover - programs forbid it
            raise ValueError(f"vector {s} in a lane-level expression")
        return self.tan.get(s, _ZERO)

    def tangent(self, f: sp.Expr, elementwise: bool) -> sp.Expr:
        """Directional derivative of ``f`` (element-wise or lane-level)."""
        out = _ZERO
        for s in sorted(f.free_symbols, key=str):
            t = self._sym_tangent(s, elementwise)
            if t != 0:
                out += sp.diff(f, s) * t
        return out

    def statement(self, st: Statement) -> None:
        name = f"{self.prefix}{st.target.name}"
        em = self.em
        if st.kind == "scalar":
            t = self.tangent(st.exprs[0], False)
            t = em.scalar(name, t)
        elif st.kind == "reduce":
            t = em.reduce(name, self.tangent(st.exprs[0], True))
        elif st.kind == "vector":
            t = em.vector(name, self.tangent(st.exprs[0], True))
        elif st.kind == "unrolled":
            t = em.unrolled(name, [self.tangent(e, False) for e in st.exprs])
        else:
            t = self._special(st, name)
        if t != 0:
            self.tan[st.target] = t

    def _special(self, st: Statement, name: str) -> sp.Expr:
        """Tangents of the dense statements (``matvec``, ``solve``)."""
        em = self.em
        prog = self.prog
        if st.kind == "matvec":
            df = self.tangent(st.exprs[0], True)
            if df == 0:
                return _ZERO
            return prog.matvec(em.fresh(name), st.matrices[0], df, transpose=st.transpose)
        if st.kind == "solve":
            # K x = b  =>  K dx = db - dK x (the same K: a second solve)
            if st.logdet is not None and st.logdet in self.need:
                raise NotImplementedError(
                    f"forward mode: the log-determinant {st.logdet} of solve {st.target} "
                    "has no tangent rule (it would need K^-1)"
                )
            x = st.target
            b, d = st.exprs[0], st.exprs[1]
            rhs = self.tangent(b, True) - self.tangent(d, True) * x
            for t, (left, m, right) in enumerate(st.terms):
                dl = self.tangent(left, True)
                dr = self.tangent(right, True)
                for coef, r in ((dl, right), (left, dr)):
                    if coef == 0 or r == 0:
                        continue
                    if m is None:  # rank one: (l r^T x)_i = l_i sum_j r_j x_j
                        rx = em.reduce(f"{name}_rx{t}", r * x)
                    else:
                        rx = prog.matvec(em.fresh(f"{name}_mx{t}"), m, r * x)
                    rhs -= coef * rx
            if rhs == 0:
                return _ZERO
            terms = [tuple(term) for term in st.terms]
            return prog.solve(em.fresh(name), rhs, d, terms)
        raise NotImplementedError(
            f"forward mode: statement {st.target} of kind {st.kind!r} is not supported"
        )

    def block(self, b: sp.Expr, base: str) -> sp.Expr:
        """Tangent of an output block; element-wise blocks stay element-wise."""
        indexed = self.prog.is_indexed(b)
        t = self.tangent(b, indexed)
        if indexed and not self.prog.is_indexed(t):
            t = self.prog.vector(self.em.fresh(base), t)
        return t


def _tangent_seeds(
    prog: IndexedProgram, new: IndexedProgram, em: _Emitter, prefix: str
) -> dict[sp.Symbol, sp.Expr]:
    """One tangent state input of ``new`` per state input of ``prog`` (same order and shape),
    named ``<prefix><name>``; returns ``{state: tangent}``."""
    seeds: dict[sp.Symbol, sp.Expr] = {}
    states = sorted((inp.offset, sym) for sym, inp in prog.inputs.items() if inp.where == "x")
    for _, sym in states:
        if prog.inputs[sym].vector:
            base = f"{prefix}{sym.name}"
            name = em.fresh(base)
            comps = sp.symbols(f"{name}1:{prog.n + 1}", real=True)
            while any(str(c) in em.taken for c in comps):
                name = em.fresh(base)
                comps = sp.symbols(f"{name}1:{prog.n + 1}", real=True)
            em.taken |= {str(c) for c in comps}
            seeds[sym] = new.state_vector(name, comps)
        else:
            seeds[sym] = new.state_scalar(em.fresh(f"{prefix}{sym.name}"))
    return seeds


def jvp_program(prog: IndexedProgram, family: str = "rhs", columns: int = 1) -> IndexedProgram:
    """The program with tangent states: ``rhs = (F(x), DF(x) dx)`` (variational equations).

    Forward mode: every statement the output ``family`` needs gets a tangent statement of the
    same kind (a reduction's tangent is a reduction, an element-wise vector's an element-wise
    vector, an ``unrolled`` vector's an ``unrolled`` vector), placed right after it, so the
    work per lane keeps the order of the program's (``O(n)`` for ``O(n)`` programs).  With
    ``columns = m`` one lane carries ``m`` tangents ``dx_1 .. dx_m`` of the same base state
    (``m`` tangent statements after each statement), so that an integrator steps the base
    and all its tangent columns together: ``M' = DF(x) M`` for an ``n_state x m`` block ``M``.

    Parameters
    ----------
    prog : IndexedProgram
        The program; it is not modified.
    family : str
        The output to differentiate (default ``"rhs"``).
    columns : int
        Number of tangent columns per lane (default 1).

    Returns
    -------
    IndexedProgram
        States: the states of ``prog``, then, per column, one tangent input per state input
        in the same order and shape (``d_<name>`` for one column, ``d<c>_<name>`` for column
        ``c = 1..m`` otherwise; a vector for a vector, ``..1, ..2`` its components);
        parameters and time unchanged.  Output ``rhs``: the blocks of ``family`` followed by
        their tangents ``DF(x) dx_c``, column after column.  The other outputs of ``prog``
        are kept (they read the original states only), except that ``divergence`` of
        ``family = "rhs"`` becomes ``m + 1`` times the original (the variational system's
        trace) and is dropped for other families.

    Raises
    ------
    ValueError
        If ``prog`` has no output ``family``, or ``columns`` is not a positive int.
    NotImplementedError
        For statement kinds without a tangent rule.
    """
    if family not in prog.outputs:
        raise ValueError(f"the program has no output {family!r}; has {sorted(prog.outputs)}")
    if isinstance(columns, bool) or not isinstance(columns, int) or columns < 1:
        raise ValueError(f"columns must be a positive int, got {columns!r}")
    new = prog.copy()
    em = _Emitter(new)
    prefixes = ["d_"] if columns == 1 else [f"d{c}_" for c in range(1, columns + 1)]
    blocks = prog.outputs[family]
    need = prog.needed(blocks)
    fws = [_Forward(em, _tangent_seeds(prog, new, em, pre), pre, need) for pre in prefixes]
    order: list[Statement] = []
    for st in prog.statements:
        order.append(st)
        if not need & set(_targets(st)):
            continue
        before = len(new.statements)
        for fw in fws:
            fw.statement(st)
        order += new.statements[before:]
    tangents = [
        fw.block(b, f"{pre}out{k}")
        for pre, fw in zip(prefixes, fws, strict=True)
        for k, b in enumerate(blocks)
    ]
    order += new.statements[len(order) :]
    new.statements = order
    names = prog.output_names.get(family, [])
    tangent_names = [f"{pre}{n}" for pre in prefixes for n in names]
    new.output("rhs", [*blocks, *tangents], names=[*names, *tangent_names])
    if "divergence" in new.outputs:
        if family == "rhs":
            new.output("divergence", [(columns + 1) * d for d in prog.outputs["divergence"]])
        else:
            del new.outputs["divergence"]
            new.output_names.pop("divergence", None)
    _prune(new, {st.target for st in prog.statements})
    return new


# --------------------------------------------------------------------- divergence ----


#: ``(D, {lane symbol: T}, {unrolled handle: W})`` of a vector's Jacobian (element-wise).
_Rep = tuple[sp.Expr, dict[sp.Symbol, sp.Expr], dict[sp.Symbol, sp.Expr]]


class _Structure:
    """The diagonal-plus-low-rank-plus-explicit Jacobians w.r.t. one state vector ``x``."""

    def __init__(self, em: _Emitter, x: sp.Symbol) -> None:
        self.em = em
        self.prog = em.prog
        self.x = x
        self.n = em.prog.n
        # vector handle -> (D, {lane symbol: T}, {unrolled handle: W}), element-wise exprs
        self.rep: dict[sp.Symbol, _Rep] = {x: (sp.Integer(1), {}, {})}
        # unrolled handle -> rows: list of {column: entry} (explicit part of its Jacobian)
        self.mat: dict[sp.Symbol, list[dict[int, sp.Expr]]] = {}
        self.grad: dict[sp.Symbol, sp.Expr] = {}  # lane symbol -> gradient (0 if absent)
        self._diag: dict[sp.Symbol, sp.Expr] = {}
        self.tag = x.name

    # lane symbols -----------------------------------------------------------------
    def is_lane_key(self, s: sp.Symbol) -> bool:
        """Whether ``s`` is a lane scalar that may depend on ``x``."""
        if s in self.prog.owners:
            v = self.prog.owners[s][0]
            return v in self.rep
        return s in self.grad

    def grad_of(self, q: sp.Symbol) -> sp.Expr:
        """``grad_x q`` (a vector handle or zero) for a lane key ``q``."""
        if q in self.grad:
            return self.grad[q]
        if q not in self.prog.owners:
            return _ZERO
        v, j = self.prog.owners[q]
        if v == self.x:
            e = [_ZERO] * self.n
            e[j] = sp.Integer(1)
            g = self.em.unrolled(f"e_{self.tag}_{j}", e)
        elif v in self.rep:
            E: dict[int, sp.Expr] = {}
            C: dict[sp.Symbol, sp.Expr] = {}
            self._add_row(E, C, v, j, sp.Integer(1))
            g = self._emit_grad(f"g_{self.tag}_{q.name}", E, C)
        else:
            g = _ZERO
        self.grad[q] = g
        return g

    def _add_row(
        self,
        E: dict[int, sp.Expr],
        C: dict[sp.Symbol, sp.Expr],
        v: sp.Symbol,
        j: int,
        coef: sp.Expr,
    ) -> None:
        """Add ``coef`` times row ``j`` of ``J_v`` to the explicit part ``E`` and the
        combination ``C`` of lane-scalar gradients."""
        em = self.em
        D, T, W = self.rep[v]
        if D != 0:
            E[j] = E.get(j, _ZERO) + coef * em.component(D, j)
        for q, t in T.items():
            C[q] = C.get(q, _ZERO) + coef * em.component(t, j)
        for u, w in W.items():
            cw = coef * em.component(w, j)
            for k, mkj in self.mat[u][j].items():
                E[k] = E.get(k, _ZERO) + cw * mkj

    def lin(self, f: sp.Expr) -> tuple[dict[int, sp.Expr], dict[sp.Symbol, sp.Expr]]:
        """Gradient of a lane-level expression: explicit entries and a combination of the
        gradients of lane scalars."""
        E: dict[int, sp.Expr] = {}
        C: dict[sp.Symbol, sp.Expr] = {}
        prog = self.prog
        for s in sorted(f.free_symbols, key=str):
            if s in prog.owners:
                v, j = prog.owners[s]
                if v == self.x:
                    E[j] = E.get(j, _ZERO) + sp.diff(f, s)
                elif v in self.rep:
                    self._add_row(E, C, v, j, sp.diff(f, s))
            elif s in self.grad and self.grad[s] != 0:
                C[s] = C.get(s, _ZERO) + sp.diff(f, s)
        return E, C

    def _emit_grad(self, base: str, E: dict[int, sp.Expr], C: dict[sp.Symbol, sp.Expr]) -> sp.Expr:
        """Store ``E + sum_q C[q] grad q`` (explicit entries as an ``unrolled`` vector)."""
        terms = _ZERO
        if any(e != 0 for e in E.values()):
            terms += self.em.unrolled(f"{base}_x", [E.get(k, _ZERO) for k in range(self.n)])
        for q, c in C.items():
            if c != 0:
                g = self.grad_of(q)
                if g != 0:
                    terms += c * g
        return self.em.vector(base, terms, _INLINE)

    # element-wise chain rule --------------------------------------------------------
    def chain(self, f: sp.Expr) -> _Rep:
        """``(D, T, W)`` of an element-wise expression ``f`` (expressions, not stored)."""
        D = _ZERO
        T: dict[sp.Symbol, sp.Expr] = {}
        W: dict[sp.Symbol, sp.Expr] = {}
        prog = self.prog
        for s in sorted(f.free_symbols, key=str):
            if s in self.rep and s in prog.vectors:
                d = sp.diff(f, s)
                if d == 0:
                    continue
                Ds, Ts, Ws = self.rep[s]
                D += d * Ds
                for q, t in Ts.items():
                    T[q] = T.get(q, _ZERO) + d * t
                for u, w in Ws.items():
                    W[u] = W.get(u, _ZERO) + d * w
            elif self.is_lane_key(s) and self.grad_of(s) != 0:
                T[s] = T.get(s, _ZERO) + sp.diff(f, s)
        T = {q: t for q, t in T.items() if t != 0}
        W = {u: w for u, w in W.items() if w != 0}
        return D, T, W

    def diag(self, u: sp.Symbol) -> sp.Expr:
        """``diag M_u`` as an ``unrolled`` vector (or zero)."""
        if u not in self._diag:
            rows = self.mat[u]
            self._diag[u] = self.em.unrolled(
                f"diag_{self.tag}_{u.name}", [rows[k].get(k, _ZERO) for k in range(self.n)]
            )
        return self._diag[u]

    # statements -------------------------------------------------------------------
    def statement(self, st: Statement) -> None:
        em = self.em
        name = st.target.name
        tag = self.tag
        if st.kind == "vector":
            D, T, W = self.chain(st.exprs[0])
            if D == 0 and not T and not W:
                return
            D = em.vector(f"D_{tag}_{name}", D, _INLINE)
            T = {q: em.vector(f"T_{tag}_{name}_{q.name}", t, _INLINE) for q, t in T.items()}
            W = {u: em.vector(f"W_{tag}_{name}_{u.name}", w, _INLINE) for u, w in W.items()}
            self.rep[st.target] = (D, T, W)
        elif st.kind == "reduce":
            D, T, W = self.chain(st.exprs[0])
            terms = D
            for q, t in T.items():
                coef = em.reduce(f"c_{tag}_{name}_{q.name}", t)
                terms += coef * self.grad_of(q)
            for u, w in W.items():
                y = em.vector(f"y_{tag}_{name}_{u.name}", w)
                z: dict[int, sp.Expr] = {}
                for i, row in enumerate(self.mat[u]):
                    if row:
                        yi = em.component(y, i)
                        for k, mik in row.items():
                            z[k] = z.get(k, _ZERO) + mik * yi
                terms += em.unrolled(
                    f"z_{tag}_{name}_{u.name}", [z.get(k, _ZERO) for k in range(self.n)]
                )
            g = em.vector(f"g_{tag}_{name}", terms, _INLINE)
            if g != 0:
                self.grad[st.target] = g
        elif st.kind == "scalar":
            E, C = self.lin(st.exprs[0])
            g = self._emit_grad(f"g_{tag}_{name}", E, C)
            if g != 0:
                self.grad[st.target] = g
        elif st.kind == "unrolled":
            rows: list[dict[int, sp.Expr]] = []
            coefs: dict[sp.Symbol, list[sp.Expr]] = {}
            for k, e in enumerate(st.exprs):
                E, C = self.lin(e)
                rows.append({j: v for j, v in E.items() if v != 0})
                for q, c in C.items():
                    if c != 0:
                        coefs.setdefault(q, [_ZERO] * self.n)[k] = c
            T = {}
            for q, cs in coefs.items():
                t = em.unrolled(f"T_{tag}_{name}_{q.name}", cs)
                if t != 0:
                    T[q] = t
            if not T and not any(rows):
                return
            self.mat[st.target] = rows
            self.rep[st.target] = (_ZERO, T, {st.target: sp.Integer(1)})
        else:
            raise NotImplementedError(
                f"with_divergence: statement {st.target} of kind {st.kind!r} is not supported"
            )

    def trace(self, block: sp.Expr) -> sp.Expr:
        """``sum_i dF[i]/dx[i]`` of an element-wise block ``F``, as one reduction."""
        D, T, W = self.chain(block)
        terms = D
        for q, t in T.items():
            terms += t * self.grad_of(q)
        for u, w in W.items():
            terms += w * self.diag(u)
        return self.em.reduce(f"tr_{self.tag}", terms)


def _pairs(prog: IndexedProgram, family: str) -> list[tuple[sp.Expr, sp.Symbol]]:
    """Output blocks of ``family`` and the state input holding the same rows."""
    at = {inp.offset: sym for sym, inp in prog.inputs.items() if inp.where == "x"}
    pairs = []
    row = 0
    for b in prog.outputs[family]:
        size = prog.n if prog.is_indexed(b) else 1
        sym = at.get(row)
        if sym is None or (prog.n if prog.inputs[sym].vector else 1) != size:
            raise NotImplementedError(
                f"divergence of {family!r}: output rows {row}..{row + size - 1} do not "
                "coincide with one state input (blocks must align with the state layout)"
            )
        pairs.append((b, sym))
        row += size
    return pairs


def divergence_block(
    prog: IndexedProgram, family: str = "rhs", columns: bool = False
) -> tuple[IndexedProgram, sp.Expr]:
    """The trace of ``d(family)/d(state)`` as one scalar expression of a new program.

    Parameters
    ----------
    prog : IndexedProgram
        Not modified.  Its output ``family`` must have ``n_state`` rows, made of blocks that
        each coincide with one state input (a vector block with a state vector, a scalar block
        with a state scalar).
    family : str
        The output whose divergence is formed (default ``"rhs"``).
    columns : bool
        Form the trace column by column instead: ``n`` forward-mode passes per state vector,
        seeded with the unit vectors (``O(n)`` times the work of the program and ``O(n)``
        statements).  The only way for programs with ``matvec``/``solve`` statements (a
        ``solve`` then costs ``n`` more solves); also an independent check of the default.

    Returns
    -------
    (IndexedProgram, sympy.Expr)
        A copy of ``prog`` with the statements that compute the trace appended, and the
        lane-level expression of the trace in its handles (e.g. for an output block, or
        for a state that integrates it).

    Raises
    ------
    ValueError
        If ``family`` is missing or has not ``n_state`` rows.
    NotImplementedError
        If the blocks do not align with the state inputs, or (unless ``columns``) for the
        statement kinds ``matvec`` and ``solve``, which have no ``O(n)`` trace rule (their
        Jacobians are dense: the trace needs the diagonal of ``H`` products or of ``K^-1``).
    """
    if family not in prog.outputs:
        raise ValueError(f"the program has no output {family!r}; has {sorted(prog.outputs)}")
    if prog.n_out(family) != prog.n_state:
        raise ValueError(
            f"divergence of {family!r}: {prog.n_out(family)} rows for {prog.n_state} states"
        )
    pairs = _pairs(prog, family)
    need = prog.needed(prog.outputs[family])
    if not columns:
        _check_kinds(prog, need, "with_divergence", _BASIC_KINDS)
    new = prog.copy()
    em = _Emitter(new)
    total = _ZERO
    for b, sym in pairs:
        bneed = prog.needed([b])
        todo = [s for s in prog.statements if bneed & set(_targets(s))]
        if prog.inputs[sym].vector and prog.is_indexed(b) and not columns:
            st = _Structure(em, sym)
            for s in todo:
                st.statement(s)
            total += st.trace(b)
            continue
        vector = prog.inputs[sym].vector
        for j in range(prog.n if vector else 1):
            # column j of the Jacobian by forward mode, seeded with e_j (or 1)
            seed: sp.Expr = sp.Integer(1)
            if vector and prog.n > 1:
                e = [sp.Integer(int(k == j)) for k in range(prog.n)]
                seed = em.unrolled(f"e_{sym.name}_{j}", e)
            prefix = f"s_{sym.name}_{j}_" if vector else f"s_{sym.name}_"
            fw = _Forward(em, {sym: seed}, prefix, bneed)
            for s in todo:
                fw.statement(s)
            t = fw.tangent(b, prog.is_indexed(b))
            if prog.is_indexed(b):
                t = em.component(t, j)
            total += t
    return new, total


def with_divergence(
    prog: IndexedProgram, family: str = "rhs", columns: bool = False
) -> IndexedProgram:
    """A copy of ``prog`` with output ``divergence`` = trace of ``d(family)/d(state)``.

    Generated from the program (see the module docstring): ``O(n)`` work per lane and a
    number of statements independent of ``n`` for programs of ``scalar``, ``reduce`` and
    ``vector`` statements (``unrolled`` statements add their explicit Jacobians, as sparse
    as their formulas).  Replaces an existing ``divergence`` output.

    Parameters
    ----------
    prog : IndexedProgram
        Not modified; ``family`` must have ``n_state`` rows aligned with the state inputs.
    family : str
        Default ``"rhs"``.
    columns : bool
        Column-by-column trace (see :func:`divergence_block`); needed for ``matvec`` and
        ``solve`` statements.

    Returns
    -------
    IndexedProgram

    Raises
    ------
    ValueError, NotImplementedError
        As :func:`divergence_block`.

    Examples
    --------
    >>> import sympy as sp
    >>> from nhfast.codegen import IndexedProgram
    >>> prog = IndexedProgram(3)
    >>> x = prog.state_vector("x")
    >>> q = prog.reduce("q", x**2)
    >>> prog.output("rhs", [x * q])
    >>> div = with_divergence(prog).to_sympy("divergence")[0]
    >>> sp.expand(div - 5 * sum(c**2 for c in prog.components(x)))
    0

    The variational system of :func:`jvp_program` has twice the divergence:

    >>> jvp = jvp_program(prog)
    >>> d2 = with_divergence(jvp).to_sympy("divergence")[0]
    >>> sp.expand(d2 - 2 * div)
    0
    """
    new, expr = divergence_block(prog, family, columns)
    new.output("divergence", [expr])
    _prune(new, {st.target for st in prog.statements})
    return new
