"""Generate the Taylor-coefficient kernel ``nh_taylor`` of a system from its SymPy expressions.

The right-hand side is decomposed into a *tape* of elementary operations (automatic
differentiation of Taylor series: Moore 1966; Jorba & Zou 2005, Exp. Math. 14): sums,
products, quotients, integer and real powers, ``sqrt``, ``exp``, ``log``, ``sin``/``cos``
(``tan``, hyperbolic and inverse functions through them), reductions over an index, products
with parameter matrices and linear solves. Every operation gets the standard recurrence for
its ``k``-th normalised coefficient (``nhfast/codegen/include/taylor.h``); the kernel runs the
tape order by order, ``x^[k+1] = f^[k] / (k + 1)``, lanes innermost.

Sub-expressions of the parameters alone (``1/a_i``, a mass matrix's entries, ...) are
*constants*: they are computed once per kernel call, and an operation with a constant operand
uses its value only (no convolution). A linear solve ``M u = b`` factorises ``M^[0]`` once per
call and gets every further coefficient from
``M^[0] u^[k] = b^[k] - sum_{j >= 1} M^[j] u^[k-j]`` with that factorisation.

Two front ends build the tape: a :class:`~nhfast.codegen.KernelSet` (unrolled expressions, its
``rhs`` family and solves; joint CSE first) and an :class:`~nhfast.codegen.IndexedProgram`
(the statements of its ``rhs`` output; vectors stay vectors, so the code is ``O(1)`` in ``n``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import sympy as sp

from nhfast._abi import TAYLOR_MAX_ORDER
from nhfast._keys import expression_digest
from nhfast.codegen._printer import CPrinter, banner, preamble
from nhfast.codegen.ckernels import KernelSet, kernel_set_digest
from nhfast.codegen.indexed import IndexedProgram
from nhfast.codegen.structured import program_digest

__all__ = [
    "generate_taylor_c",
]

#: Work of a Taylor kernel call up to this many doubles lives on the stack (32 kB), beyond
#: it on the heap; pivots of its solves up to _STACK_PIVOTS entries likewise.
_STACK_DOUBLES = 4096
_STACK_PIVOTS = 256

#: Lanes per pass of a Taylor kernel (smaller remainders run in passes of 4, 2, 1 lanes).
TAYLOR_CHUNK = 8

_SUPPORTED = (
    "+, -, *, /, powers, sqrt, exp, log, sin, cos, tan, sinh, cosh, tanh, atan, asin, acos, "
    "asinh, acosh, atanh, Abs"
)


@dataclass(frozen=True)
class _Val:
    """A value of the tape: a work variable (coefficients to every order) or a constant.

    ``vector``: ``n`` components (else one). ``name``: the C array of its storage (lane
    values of type ``NHT_T``, coefficient ``j`` of component ``i`` at ``[j * nc + i]``; a
    constant at ``[i]``). ``comp``: a component view (a scalar) of a vector value.
    """

    const: bool
    vector: bool
    name: str
    comp: int | None = None

    def arg(self, n: int, in_vector_op: bool) -> str:
        """The ``nht_in`` of this value as an operand of an operation (vector or scalar)."""
        js = "0" if self.const else "NHT_TOT"
        if self.comp is not None:
            return f"(NHT(nht_in)){{{self.name} + {self.comp}, {js}, 0}}"
        is_ = "1" if (self.vector and in_vector_op) else "0"
        return f"(NHT(nht_in)){{{self.name}, {js}, {is_}}}"


class _Tape:
    """Work variables, constants and the per-order operations of one Taylor kernel."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.work: list[tuple[str, int]] = []  # (name, components)
        self.consts: list[tuple[str, int]] = []
        self.prep: list[str] = []  # constants, once per pass
        self.load: list[str] = []  # order 0 of the states
        self.ops: list[str] = []  # inside the loop over k
        self.solve_ws: list[tuple[str, int, int]] = []  # (name, values, pivots) per solve
        #: the products of vector values (op index -> output and operands; see :func:`_fused`)
        self.products: dict[int, tuple[_Val, _Val, _Val]] = {}
        self.memo: dict[tuple, _Val] = {}  # operations already on the tape (hash-consing)
        self.printer = CPrinter()

    def new_var(self, vector: bool) -> _Val:
        """A work variable: coefficient j of component i at ``W[j * NHT_TOT + offset + i]``."""
        off = sum(c for _, c in self.work)
        name = f"(W + {off})"
        self.work.append((name, self.n if vector else 1))
        return _Val(False, vector, name)

    def new_const(self, vector: bool) -> _Val:
        """A constant: component i at ``CST[offset + i]``."""
        off = sum(c for _, c in self.consts)
        name = f"(CST + {off})"
        self.consts.append((name, self.n if vector else 1))
        return _Val(True, vector, name)

    def nc(self, v: _Val) -> int:
        return self.n if v.vector else 1


def _is_int(e: sp.Expr) -> bool:
    return isinstance(e, sp.Integer)


#: Order-0 functions of ``nht_init`` (taylor_ops.h), by code.
_INIT = {
    "exp": 0,
    "sin": 1,
    "cos": 2,
    "sinh": 3,
    "cosh": 4,
    "atan": 5,
    "asin": 6,
    "acos": 7,
    "asinh": 8,
    "acosh": 9,
    "atanh": 10,
}

_LANE = "(l < nl ? l : nl - 1)"  # lane l of a pass: the pass's last lane pads it


class _Builder:
    """Decompose SymPy expressions into the operations of a :class:`_Tape`."""

    def __init__(self, tape: _Tape, index: sp.Symbol | None) -> None:
        self.t = tape
        self.index = index
        self.bound: dict[sp.Symbol, _Val] = {}  # handles (states, targets, unknowns, time)
        self.params: dict[sp.Symbol, int] = {}  # scalar parameter symbol -> row
        self.param_vectors: dict[sp.Symbol, int] = {}  # vector parameter handle -> first row
        self.views: dict[sp.Symbol, tuple[sp.Symbol, int]] = {}  # component -> (handle, k)
        self.memo: dict[tuple[sp.Expr, bool], _Val] = {}
        #: unordered pairs of non-constant factors -> how many products of the program have
        #: both (see :func:`_pair_counts`)
        self.pairs: dict[tuple[sp.Expr, sp.Expr], int] = {}

    # ---------------------------------------------------------------- classifying ----
    def _const_symbol(self, s: sp.Symbol) -> bool:
        if s == self.index or s in self.params or s in self.param_vectors:
            return True
        if s in self.bound:
            return self.bound[s].const
        if s in self.views:
            h = self.views[s][0]
            return h in self.param_vectors or (h in self.bound and self.bound[h].const)
        return False

    def is_const(self, e: sp.Expr) -> bool:
        return all(self._const_symbol(s) for s in e.free_symbols)

    def is_vector(self, e: sp.Expr) -> bool:
        for s in e.free_symbols:
            if s == self.index or s in self.param_vectors:
                return True
            if s in self.bound and self.bound[s].vector:
                return True
        return False

    def _accessor(self, s: sp.Symbol) -> str:
        """C expression of constant symbol ``s`` at lane ``l`` (component ``i``) of a pass."""
        if s == self.index:
            return "(double)i"
        if s in self.param_vectors:
            return f"((const double *)&PAR[{self.param_vectors[s]} + i])[l]"
        if s in self.params:
            return f"((const double *)&PAR[{self.params[s]}])[l]"
        if s in self.bound:
            v = self.bound[s]
            if v.comp is not None:
                return f"((const double *)&{v.name}[{v.comp}])[l]"
            return f"((const double *)&{v.name}[{'i' if v.vector else 0}])[l]"
        h, k = self.views[s]
        if h in self.param_vectors:
            return f"((const double *)&PAR[{self.param_vectors[h] + k}])[l]"
        v = self.bound[h]
        return f"((const double *)&{v.name}[{k if v.vector else 0}])[l]"

    # ---------------------------------------------------------------- constants ----
    def const(self, e: sp.Expr, vec: bool) -> _Val:
        vec = vec and self.is_vector(e)
        key = (e, vec)
        if key in self.memo:
            return self.memo[key]
        c = self.t.new_const(vec)
        names: dict[sp.Symbol, sp.Symbol] = {}
        decl: list[str] = []
        for s in sorted(e.free_symbols, key=str):
            cname = f"nh_s{len(names)}"
            names[s] = sp.Symbol(cname, real=True)
            decl.append(f"const double {cname} = {self._accessor(s)};")
        code = self.t.printer.doprint(e.xreplace(names))
        body = " ".join([*decl, f"c_[l] = {code};"])
        loop = f"for (int l = 0; l < NHT_LANES; ++l) {{ {body} }}"
        if vec:
            self.t.prep.append(
                f"for (int64_t i = 0; i < {self.t.n}; ++i) "
                f"{{ double *c_ = (double *)&{c.name}[i]; {loop} }}"
            )
        else:
            self.t.prep.append(
                f"{{ const int64_t i = 0; (void)i; double *c_ = (double *)&{c.name}[0]; {loop} }}"
            )
        self.memo[key] = c
        return c

    # ------------------------------------------------------------------- values ----
    def value(self, e: sp.Expr, vec: bool) -> _Val:
        """The tape value of ``e`` (``vec``: an element-wise expression of an indexed loop)."""
        e = sp.sympify(e)
        key = (e, vec)
        if key in self.memo:
            return self.memo[key]
        if self.is_const(e):
            return self.const(e, vec)
        out = self._value(e, vec)
        self.memo[key] = out
        return out

    def _value(self, e: sp.Expr, vec: bool) -> _Val:
        if isinstance(e, sp.Symbol):
            if e in self.bound:
                return self.bound[e]
            if e in self.views:
                h, k = self.views[e]
                base = self.bound[h]
                return _Val(base.const, False, base.name, k) if base.vector else base
            raise ValueError(f"symbol {e} is not a state, parameter or defined value")
        if isinstance(e, sp.Add):
            return self._add(e, vec)
        if isinstance(e, sp.Mul):
            return self._mul(e, vec)
        if isinstance(e, sp.Pow):
            return self._pow(e.base, e.exp, vec)
        return self._function(e, vec)

    def _op(self, op: str, vector: bool, *args: object, pre: str = "") -> _Val:
        """``out = op(args)`` as a new work variable (or the same operation's earlier one).

        ``args`` are operand values or C text; ``pre`` guards the call (``"if (k > 0) "``).
        """
        key = (op, vector, pre, *args)
        if key in self.t.memo:
            return self.t.memo[key]
        out = self.t.new_var(vector)
        nc = self.t.nc(out)
        text = [a.arg(self.t.n, vector) if isinstance(a, _Val) else str(a) for a in args]
        rest = "".join(f", {a}" for a in text)
        if op in ("nht_mul", "nht_sqr") and vector and not pre:
            self.t.products[len(self.t.ops)] = (out, args[0], args[-1])
        self.t.ops.append(f"{pre}NHT({op})(k, {nc}, {out.name}, NHT_TOT{rest});")
        self.t.memo[key] = out
        return out

    def _add(self, e: sp.Add, vec: bool) -> _Val:
        consts: list[sp.Expr] = []
        terms: list[tuple[float, _Val]] = []
        for term in e.args:
            if self.is_const(term):
                consts.append(term)
                continue
            coeff, rest = term.as_coeff_Mul()
            terms.append((float(coeff), self.value(rest, vec)))
        terms.sort(key=lambda cv: cv[1].name + str(cv[1].comp))
        cval = self.value(sp.Add(*consts), vec) if consts else None
        vector = any(v.vector for _, v in terms) or bool(cval and cval.vector)
        key = ("add", vector, cval, *terms)
        if key in self.t.memo:
            return self.t.memo[key]
        out = self.t.new_var(vector)
        nc = self.t.nc(out)
        # the first up to four terms in one pass (nht_lin2..4), any further ones added after
        head, rest = (terms[:4], terms[4:]) if len(terms) > 1 else (terms, [])
        args = "".join(f", {c!r}, {v.arg(self.t.n, vector)}" for c, v in head)
        op = "nht_scale" if len(head) == 1 else f"nht_lin{len(head)}"
        self.t.ops.append(f"NHT({op})(k, {nc}, {out.name}, NHT_TOT{args});")
        for c, v in rest:
            self.t.ops.append(
                f"NHT(nht_axpy)(k, {nc}, {out.name}, NHT_TOT, {c!r}, {v.arg(self.t.n, vector)});"
            )
        if cval is not None:
            self.t.ops.append(
                f"if (k == 0) NHT(nht_addc)({nc}, {out.name}, {cval.arg(self.t.n, vector)});"
            )
        self.t.memo[key] = out
        return out

    def _mul(self, e: sp.Mul, vec: bool) -> _Val:
        const_f: list[sp.Expr] = []
        num: list[sp.Expr] = []
        den: list[sp.Expr] = []
        for f in e.args:
            if self.is_const(f):
                const_f.append(f)
            elif isinstance(f, sp.Pow) and f.exp.is_number and f.exp.is_negative:
                den.append(sp.Pow(f.base, -f.exp))
            else:
                num.append(f)
        c = sp.Mul(*const_f)
        if den:
            d = self.value(sp.Mul(*den), vec)
            if num:
                a = self.value(sp.Mul(*num), vec)
                q = self._op("nht_div", a.vector or d.vector, a, 0, d)
            else:
                a = self.value(c, vec)
                flag = 2 if c == 1 else 1  # 2: a reciprocal (see nht_div)
                c = sp.Integer(1)
                q = self._op("nht_div", a.vector or d.vector, a, flag, d)
            return self._times_const(c, q, vec)
        expanded = _factors(num)
        if len(expanded) > 2:
            return self._times_const(c, self._shared_product(expanded, vec), vec)
        vals = sorted((self.value(f, vec) for f in num), key=lambda v: v.name + str(v.comp))
        acc = vals[0]
        for v in vals[1:]:
            if v == acc:  # a * a: the square's recurrence does half the work
                acc = self._op("nht_sqr", acc.vector, acc)
            else:
                acc = self._op("nht_mul", acc.vector or v.vector, acc, v)
        return self._times_const(c, acc, vec)

    def _shared_product(self, factors: list[sp.Expr], vec: bool) -> _Val:
        """A product of three or more factors, paired so that products are shared: first a
        pair whose product the tape already has, else the pair met in most products of the
        program (:attr:`pairs`), else the first two in a fixed order."""
        items: list[tuple[sp.Expr | None, _Val]] = [
            (f, self.value(f, vec)) for f in sorted(factors, key=sp.default_sort_key)
        ]

        def ordered(a: _Val, b: _Val) -> tuple[_Val, _Val]:
            return (a, b) if a.name + str(a.comp) <= b.name + str(b.comp) else (b, a)

        def mul(a: _Val, b: _Val) -> _Val:
            if a == b:
                return self._op("nht_sqr", a.vector, a)
            x, y = ordered(a, b)
            return self._op("nht_mul", x.vector or y.vector, x, y)

        def known(a: _Val, b: _Val) -> bool:
            if a == b:
                return ("nht_sqr", a.vector, "", a) in self.t.memo
            x, y = ordered(a, b)
            return ("nht_mul", x.vector or y.vector, "", x, y) in self.t.memo

        while len(items) > 1:
            best, score = (0, 1), (-1, -1)
            for i in range(len(items)):
                for j in range(i + 1, len(items)):
                    (fi, vi), (fj, vj) = items[i], items[j]
                    count = 0
                    if fi is not None and fj is not None:
                        count = self.pairs.get(_pair_key(fi, fj), 0)
                    sc = (count, int(known(vi, vj)))
                    if sc > score:
                        best, score = (i, j), sc
            i, j = best
            prod = mul(items[i][1], items[j][1])
            items = [it for k, it in enumerate(items) if k not in (i, j)] + [(None, prod)]
        return items[0][1]

    def _times_const(self, c: sp.Expr, v: _Val, vec: bool) -> _Val:
        if c == 1:
            return v
        if c.is_number:
            return self._op("nht_scale", v.vector, repr(float(c)), v)
        cv = self.value(c, vec)
        return self._op("nht_cmul", v.vector or cv.vector, cv, v)

    def _pow(self, base: sp.Expr, ex: sp.Expr, vec: bool) -> _Val:
        if base == sp.E:
            return self._function(sp.exp(ex, evaluate=False), vec)
        if not self.is_const(ex) or not ex.is_number:  # b^e = exp(e log b)
            return self._function(sp.exp(ex * sp.log(base), evaluate=False), vec)
        if ex == -1 and isinstance(base, sp.Add) and vec:
            shifted = self._shifted_reciprocal(base, vec)
            if shifted is not None:
                return shifted
        a = self.value(base, vec)
        if isinstance(ex, sp.Integer):
            m = int(ex)
            if m == 0:
                return self.const(sp.Integer(1), vec)
            if m < 0:
                one = self.const(sp.Integer(1), False)
                return self._op("nht_div", a.vector, one, 2, self._int_pow(a, -m))
            return self._int_pow(a, m)
        if ex == sp.Rational(1, 2):
            return self._op("nht_sqrt", a.vector, a)
        if ex == sp.Rational(-1, 2):
            one = self.const(sp.Integer(1), False)
            return self._op("nht_div", a.vector, one, 2, self._op("nht_sqrt", a.vector, a))
        return self._op("nht_pow", a.vector, a, repr(float(ex)))

    def _shifted_reciprocal(self, base: sp.Add, vec: bool) -> _Val | None:
        """``1 / (c + s)`` with ``c`` a constant vector and ``s`` a per-lane scalar
        (``nht_recip_cs``: the sum is never made a vector), or None for any other base."""
        const = [t for t in base.args if self.is_const(t)]
        rest = [t for t in base.args if not self.is_const(t)]
        if not const or not rest:
            return None
        c = self.value(sp.Add(*const), vec)
        s = self.value(sp.Add(*rest), vec)
        if not c.vector or s.vector or c.comp is not None or s.comp is not None:
            return None
        return self._op("nht_recip_cs", True, c, s)

    def _int_pow(self, a: _Val, m: int) -> _Val:
        if m == 1:
            return a
        if m == 3 and not a.vector and ("nht_sqr", False, "", a) not in self.t.memo:
            return self._cube(a)
        sq = self._op("nht_sqr", a.vector, self._int_pow(a, m // 2))
        return sq if m % 2 == 0 else self._op("nht_mul", a.vector, sq, a)

    def _cube(self, a: _Val) -> _Val:
        """``a**3`` of a scalar value and its square, in one operation (``nht_cube``: the
        square's operands serve the product too); both are on the tape as ``a*a`` and
        ``(a*a)*a`` for later uses."""
        sq, out = self.t.new_var(False), self.t.new_var(False)
        self.t.ops.append(
            f"NHT(nht_cube)(k, 1, {out.name}, NHT_TOT, {sq.name}, {a.arg(self.t.n, False)});"
        )
        self.t.memo[("nht_sqr", False, "", a)] = sq
        self.t.memo[("nht_mul", False, "", sq, a)] = out
        return out

    def _chain_op(self, fname: str, a: _Val, e: _Val | None, sign: float) -> _Val:
        """``out = F(a)`` with ``out' = sign * a' * e`` (``e`` None: ``e = out``, exp)."""
        vector = a.vector or bool(e and e.vector)
        key = ("chain", fname, a, e)
        if key in self.t.memo:
            return self.t.memo[key]
        out = self.t.new_var(vector)
        nc = self.t.nc(out)
        ev = out if e is None else e
        n = self.t.n
        self.t.ops.append(
            f"if (k == 0) NHT(nht_init)({nc}, {out.name}, {a.arg(n, vector)}, {_INIT[fname]}); "
            f"else NHT(nht_chain)(k, {nc}, {out.name}, NHT_TOT, {a.arg(n, vector)}, "
            f"{ev.arg(n, vector)}, {sign!r});"
        )
        self.t.memo[key] = out
        return out

    def _pair(self, arg: sp.Expr, vec: bool, hyperbolic: bool) -> tuple[_Val, _Val]:
        """(sin a, cos a) or (sinh a, cosh a): each one's derivative uses the other."""
        a = self.value(arg, vec)
        key = ("pair", hyperbolic, a)
        if key in self.t.memo:
            return self.t.memo[key]  # type: ignore[return-value]
        s = self.t.new_var(a.vector)
        c = self.t.new_var(a.vector)
        nc = self.t.nc(s)
        n = self.t.n
        ai = a.arg(n, a.vector)
        fs, fc = ("sinh", "cosh") if hyperbolic else ("sin", "cos")
        sign_c = 1.0 if hyperbolic else -1.0
        self.t.ops.append(
            f"if (k == 0) {{ NHT(nht_init)({nc}, {s.name}, {ai}, {_INIT[fs]}); "
            f"NHT(nht_init)({nc}, {c.name}, {ai}, {_INIT[fc]}); }} else {{ "
            f"NHT(nht_chain)(k, {nc}, {s.name}, NHT_TOT, {ai}, {c.arg(n, a.vector)}, 1.0); "
            f"NHT(nht_chain)(k, {nc}, {c.name}, NHT_TOT, {ai}, {s.arg(n, a.vector)}, "
            f"{sign_c!r}); }}"
        )
        self.t.memo[key] = (s, c)  # type: ignore[assignment]
        return s, c

    def _function(self, e: sp.Expr, vec: bool) -> _Val:
        f = e.func
        if not isinstance(e, sp.Function) or len(e.args) != 1:
            raise ValueError(
                f"the Taylor method cannot expand {e} ({type(e).__name__}); it supports "
                f"{_SUPPORTED} (use method='dop853' for this system)"
            )
        (arg,) = e.args
        if f is sp.exp:
            return self._chain_op("exp", self.value(arg, vec), None, 1.0)
        if f is sp.log:
            a = self.value(arg, vec)
            return self._op("nht_log", a.vector, a)
        if f in (sp.sin, sp.cos):
            s, c = self._pair(arg, vec, hyperbolic=False)
            return s if f is sp.sin else c
        if f in (sp.sinh, sp.cosh):
            s, c = self._pair(arg, vec, hyperbolic=True)
            return s if f is sp.sinh else c
        rewrite = {
            sp.tan: lambda a: sp.sin(a) / sp.cos(a),
            sp.cot: lambda a: sp.cos(a) / sp.sin(a),
            sp.sec: lambda a: 1 / sp.cos(a),
            sp.csc: lambda a: 1 / sp.sin(a),
            sp.tanh: lambda a: sp.sinh(a) / sp.cosh(a),
        }
        if f in rewrite:
            return self.value(rewrite[f](arg), vec)
        inverse = {  # o' = sign * a' * e(a)
            sp.atan: (1 / (1 + arg**2), 1.0),
            sp.asin: (1 / sp.sqrt(1 - arg**2), 1.0),
            sp.acos: (1 / sp.sqrt(1 - arg**2), -1.0),
            sp.asinh: (1 / sp.sqrt(1 + arg**2), 1.0),
            sp.acosh: (1 / sp.sqrt(arg**2 - 1), 1.0),
            sp.atanh: (1 / (1 - arg**2), 1.0),
        }
        if f in inverse:
            de, sign = inverse[f]
            return self._chain_op(f.__name__, self.value(arg, vec), self.value(de, vec), sign)
        if f is sp.Abs:
            a = self.value(arg, vec)
            return self._op("nht_abs", a.vector, a)
        raise ValueError(
            f"the Taylor method cannot expand {e}: {f.__name__} is not supported; it supports "
            f"{_SUPPORTED} (use method='dop853' for this system)"
        )


# ---------------------------------------------------------------------- front ends ----
def _pair_key(a: sp.Expr, b: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    return (a, b) if sp.default_sort_key(a) <= sp.default_sort_key(b) else (b, a)


def _factors(num: list[sp.Expr]) -> list[sp.Expr]:
    """The factors of a product, squares written out when there is more than one factor
    (``m**2 x`` is ``m, m, x``, so that ``m x`` can be shared; a cube stays one factor, its
    fused operation)."""
    if len(num) < 2:
        return list(num)
    out: list[sp.Expr] = []
    for f in num:
        if isinstance(f, sp.Pow) and f.exp == 2:
            out += [f.base, f.base]
        else:
            out.append(f)
    return out


def _pair_counts(b: _Builder, exprs: Sequence[sp.Expr]) -> dict[tuple[sp.Expr, sp.Expr], int]:
    """How many products of ``exprs`` have each pair of non-constant factors."""
    counts: dict[tuple[sp.Expr, sp.Expr], int] = {}
    for e in exprs:
        for sub in sp.preorder_traversal(sp.sympify(e)):
            if not isinstance(sub, sp.Mul):
                continue
            fs = _factors(
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
                    seen.add(_pair_key(fs[i], fs[j]))
            for key in seen:
                counts[key] = counts.get(key, 0) + 1
    return counts


def _time_var(b: _Builder, sym: sp.Symbol) -> None:
    """The time as a variable: t^[0] = t, t^[1] = 1, then 0."""
    tv = b.t.new_var(False)
    b.bound[sym] = tv
    b.t.ops.append(
        f"{{ double *d_ = (double *)&{tv.name}[k * NHT_TOT]; for (int l = 0; l < NHT_LANES; ++l) "
        f"d_[l] = k == 0 ? t[l0 + {_LANE}] : (k == 1 ? 1.0 : 0.0); }}"
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


def _state_runs(states: list[tuple[_Val, int]]) -> list[tuple[int, int]]:
    """``(first row, rows)`` of the runs of consecutive components of one state variable."""
    return _runs(len(states), lambda r: states[r - 1] == (states[r][0], states[r][1] - 1))


def _finish(b: _Builder, states: list[tuple[_Val, int]], rhs: Sequence[_Val]) -> None:
    """Order 0 of the states from ``x``, and ``x^[k+1] = f^[k] / (k + 1)`` every order: a run
    of components of a state vector whose right-hand sides are the same run of one work
    variable in one ``nht_integv`` (a loop over the run; a call of ``nht_integ`` per component
    was a measurable share of the one-lane pass of Veselova n = 64)."""
    t = b.t
    for r0, m in _state_runs(states):
        v, c0 = states[r0]
        if m > 1:  # one lane, ld = 1 (its state packed): a copy
            t.load.append(
                f"if (NHT_LANES == 1 && ld == 1) memcpy((double *)&{v.name}[{c0}], x + {r0}, "
                f"{m} * sizeof(double)); else"
            )
        t.load.append(
            f"for (int64_t r = {r0}; r < {r0 + m}; ++r) {{ double *d_ = (double *)&{v.name}"
            f"[{c0 - r0} + r]; for (int l = 0; l < NHT_LANES; ++l) d_[l] = x[r * ld + l0 + "
            f"{_LANE}]; }}"
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
                f"NHT(nht_integv)(k, {m}, {v.name} + {c}, NHT_TOT, {f.name} + {f.comp}, NHT_TOT);"
            )
        else:
            t.ops.append(
                f"NHT(nht_integ)(k, {v.name}, NHT_TOT, {c}, {f.arg(t.n, False)}, {int(f.const)});"
            )


def _component(v: _Val, c: int) -> _Val:
    """Component ``c`` of a vector value (a scalar value unchanged)."""
    return _Val(v.const, False, v.name, c) if v.vector else v


def _kernel_set_tape(ks: KernelSet) -> tuple[_Tape, list[tuple[_Val, int]]]:
    if "rhs" in ks.needs_derivs:
        raise ValueError(
            "the Taylor method cannot expand a right-hand side that uses derivatives of its "
            "solves' unknowns"
        )
    tape = _Tape(1)
    b = _Builder(tape, None)
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


def _solve_spec(b: _Builder, si: int, sv) -> None:
    """Unknowns of ``sv.matrix * u = sv.rhs`` (a KernelSet solve): LU of ``M^[0]`` at order 0,
    then ``M^[0] u^[k] = b^[k] - sum_{j >= 1} M^[j] u^[k-j]``."""
    t = b.t
    r = sv.r
    mats = [b.value(sp.sympify(e), False) for e in sv.matrix]
    rhs = [b.value(sp.sympify(e), False) for e in sv.rhs]
    us = [t.new_var(False) for _ in range(r)]
    A, v, piv = f"S{si}_A", f"S{si}_b", f"S{si}_p"
    t.solve_ws.append((f"S{si}", r * r + r, r))
    lines = [f"/* linear solve {si}: {r} unknowns */", "if (k == 0) {"]
    lines += [f"  {A}[{ab}] = {m.name}[{m.comp or 0}];" for ab, m in enumerate(mats)]
    lines += [f"  nh_lu_factor({r}, NHT_LANES, (double *){A}, {piv});", "}"]
    for a, f in enumerate(rhs):
        op = "nht_setc" if f.const else "nht_copy"
        lines.append(f"NHT({op})(k, {v}, 0, {a}, {f.arg(1, False)});")
    for a in range(r):
        for c in range(r):
            m = mats[a * r + c]
            if not m.const:
                lines.append(
                    f"NHT(nht_submul)(k, 1, {v} + {a}, 0, {m.arg(1, False)}, "
                    f"{us[c].arg(1, False)}, 1);"
                )
    lines.append(f"nh_lu_solve({r}, NHT_LANES, (const double *){A}, {piv}, (double *){v});")
    lines += [f"{u.name}[k * NHT_TOT] = {v}[{a}];" for a, u in enumerate(us)]
    t.ops += lines
    for u, sym in zip(us, sv.unknowns, strict=True):
        b.bound[sym] = u


def _program_tape(prog: IndexedProgram) -> tuple[_Tape, list[tuple[_Val, int]]]:
    tape = _Tape(prog.n)
    b = _Builder(tape, prog.index)
    n = prog.n
    states: list[tuple[_Val, int]] = []
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
        if st.kind == "scalar":
            val = b.value(st.exprs[0], False)
        elif st.kind == "reduce":
            val = _reduce(b, b.value(st.exprs[0], True))
        elif st.kind == "vector":
            val = b.value(st.exprs[0], True)
        elif st.kind == "unrolled":
            val = _unrolled(b, [b.value(e, False) for e in st.exprs])
        elif st.kind == "matvec":
            val = _matvec(b, prog, st)
        elif st.kind == "solve":
            val = _dense_solve(b, prog, st, si)
        else:  # pragma: no cover - IndexedProgram knows no other kinds
            raise ValueError(f"unknown statement kind {st.kind!r}")
        b.bound[st.target] = val
        if st.target in prog.vectors:
            for k, c in enumerate(prog.components(st.target)):
                b.views[c] = (st.target, k)
    outs: list[_Val] = []
    for blk in blocks:
        if prog.is_indexed(blk):
            v = b.value(blk, True)
            outs += [_component(v, k) for k in range(n)]
        else:
            outs.append(b.value(blk, False))
    _finish(b, states, outs)
    return tape, states


def _reduce(b: _Builder, a: _Val) -> _Val:
    """``sum_i a_i`` (``n a`` for a scalar ``a``)."""
    t, n = b.t, b.t.n
    if a.const:
        c = t.new_const(False)
        if a.vector:
            t.prep.append(
                f"{{ NHT_T s_ = {a.name}[0]; for (int64_t i = 1; i < {n}; ++i) "
                f"s_ += {a.name}[i]; {c.name}[0] = s_; }}"
            )
        else:
            t.prep.append(f"{c.name}[0] = {float(n)!r} * {a.name}[0];")
        return c
    if not a.vector:
        return b._op("nht_scale", False, repr(float(n)), a)
    key = ("sum", a)
    if key not in t.memo:
        out = t.new_var(False)
        t.ops.append(f"NHT(nht_sum)(k, {n}, {out.name}, NHT_TOT, {a.arg(n, True)});")
        t.memo[key] = out
    return t.memo[key]


def _unrolled(b: _Builder, vals: list[_Val]) -> _Val:
    t = b.t
    if all(v.const for v in vals):
        c = t.new_const(True)
        t.prep += [f"{c.name}[{i}] = {v.name}[{v.comp or 0}];" for i, v in enumerate(vals)]
        return c
    out = t.new_var(True)
    for i, v in enumerate(vals):
        op = "nht_setc" if v.const else "nht_copy"
        t.ops.append(f"NHT({op})(k, {out.name}, NHT_TOT, {i}, {v.arg(t.n, False)});")
    return out


def _matrix_ptr(prog: IndexedProgram, m: sp.Symbol, transpose: bool) -> tuple[str, int, int]:
    """(lane values, row stride, column stride) of parameter matrix ``m`` in a pass."""
    n = prog.n
    hi, hj = (n, 1) if not transpose else (1, n)
    return f"PAR + {prog.inputs[m].offset}", hi, hj


def _matvec(b: _Builder, prog: IndexedProgram, st) -> _Val:
    t, n = b.t, b.t.n
    a = b.value(st.exprs[0], True)
    h, hi, hj = _matrix_ptr(prog, st.matrices[0], st.transpose)
    if a.const:
        c = t.new_const(True)
        t.prep.append(
            f"{{ const int64_t k = 0; NHT(nht_matvec)(k, {n}, {c.name}, 0, {h}, {hi}, {hj}, "
            f"{a.arg(n, True)}); }}"
        )
        return c
    out = t.new_var(True)
    t.ops.append(
        f"NHT(nht_matvec)(k, {n}, {out.name}, NHT_TOT, {h}, {hi}, {hj}, {a.arg(n, True)});"
    )
    return out


def _dense_solve(b: _Builder, prog: IndexedProgram, st, si: int) -> _Val:
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
    vin = v.arg(n, True)
    L: list[str] = [f"/* dense solve {st.target}: n = {n} */", "if (k == 0) {"]
    L.append(f"  for (int64_t e = 0; e < {n * n}; ++e) {A}[e] = NHT_ZERO;")
    L.append(
        f"  {{ const NHT(nht_in) d_ = {d.arg(n, True)}; for (int64_t i = 0; i < {n}; ++i) "
        f"{A}[i * {n + 1}] += NHT_ROW(d_, 0, i)[0]; }}"
    )
    pq: list[tuple[_Val, _Val]] = []
    for lv, m, rgt in terms:
        h = "" if m is None else f" * PAR[{prog.inputs[m].offset} + i * {n} + j]"
        L.append(
            f"  {{ const NHT(nht_in) l_ = {lv.arg(n, True)}, r_ = {rgt.arg(n, True)}; "
            f"for (int64_t i = 0; i < {n}; ++i) for (int64_t j = 0; j < {n}; ++j) "
            f"{A}[i * {n} + j] += NHT_ROW(l_, 0, i)[0]{h} * NHT_ROW(r_, 0, j)[0]; }}"
        )
        pq.append((t.new_var(True), t.new_var(m is not None)))
    L += [f"  nh_lu_factor({n}, NHT_LANES, (double *){A}, {piv});", "}"]
    # right-hand side: f^[k] - sum_{j>=1} d^[j] v^[k-j] - sum_t (l_t Q_t)^[k], v^[k] = 0
    fz = f.arg(n, True)
    rhs0 = "(k == 0 ? NHT_ROW(f_, 0, i)[0] : NHT_ZERO)" if f.const else "NHT_ROW(f_, k, i)[0]"
    L.append(
        f"{{ const NHT(nht_in) f_ = {fz}; for (int64_t i = 0; i < {n}; ++i) {rv}[i] = {rhs0}; }}"
    )
    if not d.const:
        L.append(f"NHT(nht_submul)(k, {n}, {rv}, 0, {d.arg(n, True)}, {vin}, 1);")
    for (lv, m, rgt), (P, Q) in zip(terms, pq, strict=True):
        L.append(f"for (int64_t i = 0; i < {n}; ++i) {P.name}[k * NHT_TOT + i] = NHT_ZERO;")
        if not rgt.const:
            L.append(f"NHT(nht_submul)(k, {n}, {P.name}, NHT_TOT, {rgt.arg(n, True)}, {vin}, 1);")
            L.append(f"NHT(nht_scale)(k, {n}, {P.name}, NHT_TOT, -1.0, {P.arg(n, True)});")
        L.append(_q_from_p(prog, m, P, Q, n))
        if lv.const:  # only l^[0] Q^[k]
            L.append(
                f"{{ const NHT(nht_in) l_ = {lv.arg(n, True)}, q_ = {Q.arg(n, True)}; "
                f"for (int64_t i = 0; i < {n}; ++i) {rv}[i] -= l_.p[i * l_.is] * "
                "NHT_ROW(q_, k, i)[0]; }"
            )
        else:
            L.append(f"NHT(nht_submul)(k, {n}, {rv}, 0, {lv.arg(n, True)}, {Q.arg(n, True)}, 0);")
    L.append(f"nh_lu_solve({n}, NHT_LANES, (const double *){A}, {piv}, (double *){rv});")
    L.append(f"for (int64_t i = 0; i < {n}; ++i) {v.name}[k * NHT_TOT + i] = {rv}[i];")
    for (_, m, rgt), (P, Q) in zip(terms, pq, strict=True):  # P^[k], Q^[k] with v^[k]
        L.append(
            f"{{ const NHT(nht_in) r_ = {rgt.arg(n, True)}; for (int64_t i = 0; i < {n}; ++i) "
            f"{P.name}[k * NHT_TOT + i] += NHT_ROW(r_, 0, i)[0] * {v.name}[k * NHT_TOT + i]; }}"
        )
        L.append(_q_from_p(prog, m, P, Q, n))
    t.ops += L
    return v


def _q_from_p(prog: IndexedProgram, m, P: _Val, Q: _Val, n: int) -> str:
    if m is None:
        return f"NHT(nht_sum)(k, {n}, {Q.name}, NHT_TOT, {P.arg(n, True)});"
    h, hi, hj = _matrix_ptr(prog, m, False)
    return f"NHT(nht_matvec)(k, {n}, {Q.name}, NHT_TOT, {h}, {hi}, {hj}, {P.arg(n, True)});"


# ------------------------------------------------------------------- fixed order ----
#: Operations whose k-th coefficient is a sum over the orders (a convolution).
_CONVOLUTIONS = frozenset(
    "nht_mul nht_submul nht_sqr nht_div nht_pow nht_sqrt nht_chain nht_log nht_recip_cs".split()
)
#: The source comment that records a kernel's size (see :func:`unrolled_terms`).
_COST_TAG = "nht-cost:"
_OP = re.compile(r"NHT\((nht_\w+)\)\(k?,? ?(\d+)?")
_COST = re.compile(re.escape(_COST_TAG) + r" conv=(\d+) lin=(\d+|inf)")

#: A pass for one fixed order is generated when its unrolled convolutions have at most this
#: many terms per lane; the one-lane pass only up to :data:`UNROLL_TERMS_ONE_LANE`. Larger
#: unrolled code runs out of the instruction cache, and compiles in seconds. Both bounds were
#: measured against the loops on Henon-Heiles and Veselova n = 4, 8 (one lane: a faster
#: kernel call did not make a faster integration); see benchmarks/NOTES.md.
UNROLL_TERMS = 2000
UNROLL_TERMS_ONE_LANE = 1000


def _tape_cost(tape: _Tape) -> tuple[int, float]:
    """(components of convolutions, components of other operations) per order; the second is
    infinite for a tape with lines that are not single operations (solves)."""
    conv, lin = 0, 0.0
    if tape.solve_ws:
        return conv, math.inf
    for op in tape.ops:
        m = _OP.search(op)
        if m is None:
            return conv, math.inf
        nc = int(m.group(2) or 1)
        if m.group(1) == "nht_cube":  # a square and a product
            conv += 2 * nc
        elif m.group(1) in _CONVOLUTIONS:
            conv += nc
        else:
            lin += nc
    return conv, lin


def _terms(conv: int, lin: float, order: int) -> float:
    """Terms per lane of ``order`` orders: a convolution at order k has about k + 1."""
    return conv * order * (order + 1) / 2 + lin * order


def taylor_size(source: str) -> tuple[int, float]:
    """The size of the Taylor kernel ``source`` per order and lane, as recorded in it:
    ``(convolutions, other operations)``, each counted per component (``inf`` operations
    for a kernel with linear solves; ``(0, inf)`` if the source does not say)."""
    m = _COST.search(source)
    if m is None:
        return 0, math.inf
    return int(m.group(1)), float(m.group(2))


def unrolled_terms(source: str, order: int) -> float:
    """Terms per lane of the Taylor kernel ``source`` with its loops over the orders unrolled at
    ``order`` (a convolution at order k has about k + 1; inf if the source does not say)."""
    m = _COST.search(source)
    if m is None:
        return math.inf
    return _terms(int(m.group(1)), float(m.group(2)), order)


#: The cost model of :func:`cost_order`, in kernel terms per lane and step: the step's own
#: work (norms, step size, bookkeeping) STEP_TERMS + STEP_TERMS_PER_STATE n, and
#: HORNER_WEIGHT per term of the series' sum (n p). The weights were measured on Henon-Heiles
#: (a batch and one trajectory alike); see benchmarks/NOTES.md.
STEP_TERMS = 256
STEP_TERMS_PER_STATE = 16
HORNER_WEIGHT = 2


def cost_order(source: str | None, n_state: int, p0: int) -> int:
    """The order of least work per unit time for the Taylor kernel ``source`` (its recorded
    size), with the accuracy of the tolerance's order ``p0``.

    Jorba & Zou (2005) take p0 = ceil(1 - ln(eps) / 2) and steps of ``exp(-2)`` times the
    radius of convergence: the best order when a step costs about ``p^2`` convolution terms.
    Where the convolutions are few (a small right-hand side) the step's other work counts,
    and a higher order with longer steps does less. At an order ``p > p0`` the core shrinks
    the radius by ``exp(-2 (p0 + 1) / p)`` (the truncation error of the rule at ``p0 + 1``;
    see ``_core.integrate_batch``'s ``order_auto``), so a unit of time takes about
    ``exp(2 (p0 + 1) / p + 0.7 / (p - 1))`` steps of ``W(p) = A + (lin + HORNER_WEIGHT n) p +
    conv p (p + 1) / 2`` terms (``A``: the step's own work, :data:`STEP_TERMS`), and the run
    ends with the error of the rule at ``p0 + 1``: of a tolerance ``e^2`` tighter.

    Returns the order above ``p0``, up to ``min(2 p0, TAYLOR_MAX_ORDER)``, that minimises
    their product: ``p0 + 1`` is among them, the rule of Jorba & Zou at that tighter
    tolerance, so the one chosen reaches that accuracy in at most the rule's time (the bound
    ``2 p0`` keeps steps short enough that the series' terms do not grow far beyond the
    state: a harmonic oscillator at 3 p0 lost digits to round-off). Where the rule at ``p0 +
    1`` would ask for less than double round-off (``exp(-2 (p0 + 1)) < 2^-52``) the extra
    accuracy is out of reach, and ``p0`` competes with the orders above it on time alone.
    ``p0`` when the source does not record its size (kernels with linear solves).

    On the Veselova bodies, comparing ``p0`` with the orders above it on time alone kept
    ``p0`` for every one; the orders above it cut the final errors several-fold for little
    more time (see benchmarks/NOTES.md).

    Parameters
    ----------
    source : str or None
        C source of a Taylor kernel (:func:`generate_taylor_c`); None: not known.
    n_state : int
        Its number of states.
    p0 : int
        The order of the tolerance (``_core.taylor_order``), at least 2.

    Returns
    -------
    int
    """
    m = None if source is None else _COST.search(source)
    if m is None or m.group(2) == "inf" or p0 < 2:
        return p0
    conv, lin = int(m.group(1)), float(m.group(2))
    a = STEP_TERMS + STEP_TERMS_PER_STATE * n_state
    b = lin + HORNER_WEIGHT * n_state

    def work(p: int) -> float:
        pe = p0 + 1 if p > p0 else p0
        return (a + b * p + conv * p * (p + 1) / 2) * math.exp(2 * pe / p + 0.7 / (p - 1))

    top = min(2 * p0, TAYLOR_MAX_ORDER)
    if top == p0:
        return p0
    reachable = math.exp(-2 * (p0 + 1)) >= 2.0**-52
    return min(range(p0 + 1 if reachable else p0, top + 1), key=work)


def unroll_pays(source: str, order: int) -> bool:
    """Whether a Taylor kernel for the fixed ``order`` is worth generating beside ``source``
    (the general kernel of the same system): at most :data:`UNROLL_TERMS` terms."""
    return unrolled_terms(source, order) <= UNROLL_TERMS


# ------------------------------------------------------------------------ rendering ----
_WORK_NAME = re.compile(r"\(W \+ \d+\)")
#: At most this many products (and distinct operands) in one nht_prods (taylor_ops.h).
GROUP_PRODUCTS = 3
GROUP_OPERANDS = 4


def _fused(tape: _Tape) -> list[str]:
    """The tape's operations with products of vector values that share an operand in one
    ``nht_prods`` each, which loads the shared coefficients once (taylor_ops.h).

    A product joins the group of an earlier one when it has the same components, shares an
    operand with the group, and no operation between them writes one of its operands (it is
    then moved up to the group: its own output is new there, nothing before it reads it). An
    operation other than a product counts as writing every work value it names; a product
    already moved up to an earlier group wrote its output there. Tapes with
    linear solves (lines that are not single operations) are left as they are.

    Veselova n = 16 (the squares of gamma and m with gamma m in one group, the products of
    gamma with two scalars in another): with :func:`_layout`, a kernel call of the vector pass
    measured markedly faster at n = 16 and 64 (see benchmarks/NOTES.md). The one-lane pass,
    whose blocks of components are its vectors, gains nothing or loses a little; it keeps the
    groups for the same sums, so that a lane's bits do not depend on its pass.
    """
    if tape.solve_ws or len(tape.products) < 2:
        return list(tape.ops)
    n = tape.n
    prods = tape.products
    joined: set[int] = set()
    out: list[str] = []
    for p, line in enumerate(tape.ops):
        if p in joined:
            continue
        if p not in prods:
            out.append(line)
            continue
        group = [p]
        operands = {prods[p][1].arg(n, True), prods[p][2].arg(n, True)}
        written = {prods[p][0].name}
        for q in range(p + 1, len(tape.ops)):
            if len(group) == GROUP_PRODUCTS:
                break
            if q in joined:  # moved up to an earlier group: written before this one
                continue
            if q in prods:
                o, a, b = prods[q]
                mine = {a.arg(n, True), b.arg(n, True)}
                shares = bool(mine & operands) and len(mine | operands) <= GROUP_OPERANDS
                if shares and not {a.name, b.name} & written:
                    group.append(q)
                    operands |= mine
                    written.add(o.name)
                    continue
                written.add(o.name)
            else:
                written.update(_WORK_NAME.findall(tape.ops[q]))
        if len(group) == 1:
            out.append(line)
            continue
        joined.update(group[1:])
        out.append(_group_call(tape, [prods[g] for g in group]))
    return out


#: Operations that read their operands at the current order only (taylor_ops.h).
_READS_ORDER_K = frozenset(
    "nht_cmul nht_scale nht_axpy nht_lin2 nht_lin3 nht_lin4 nht_addc nht_sum nht_copy "
    "nht_setc nht_integ nht_integv nht_matvec".split()
)
#: Operations whose output (their first work value) they write at the current order only,
#: without reading its earlier orders; their other operands are read at every order.
_WRITES_ORDER_K = frozenset("nht_mul nht_sqr nht_submul nht_abs".split())
#: A line of one operation (and nothing else), and the output of the operations that write
#: theirs as ``(k, nc, out, NHT_TOT, ...)``.
_ONE_OP = re.compile(r"(?:if \(k [^)]*\) )?NHT\((nht_\w+)\)\([^;]*\);")
_OUTPUT = re.compile(r"(?:if \(k [^)]*\) )?NHT\(nht_\w+\)\(k, \d+, (\(W \+ \d+\)), NHT_TOT, ")


def _current_only(tape: _Tape, states: list[tuple[_Val, int]]) -> set[str]:
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
    for line in tape.ops:
        names = _WORK_NAME.findall(line)
        seen.update(names)
        one = _ONE_OP.fullmatch(line)
        op = one.group(1) if one else None
        if op in _READS_ORDER_K:
            continue
        out = _OUTPUT.match(line) if op in _WRITES_ORDER_K else None
        written_alone = out.group(1) if out and names[0] == out.group(1) else None
        keep.update(names[1:] if written_alone else names)
    for line in tape.load:
        keep.update(_WORK_NAME.findall(line))
    return seen - keep


def _group_call(tape: _Tape, members: list[tuple[_Val, _Val, _Val]]) -> str:
    """One ``nht_prods`` call for products ``(out, a, b)`` of vector values."""
    n = tape.n
    ops: list[str] = []
    for _, a, b in members:
        for v in (a, b):
            if v.arg(n, True) not in ops:
                ops.append(v.arg(n, True))
    outs = [f"{o.name}, NHT_TOT" for o, _, _ in members]
    outs += outs[:1] * (GROUP_PRODUCTS - len(outs))
    idx = [str(ops.index(v.arg(n, True))) for _, a, b in members for v in (a, b)]
    idx += ["0"] * (2 * GROUP_PRODUCTS - len(idx))
    args = ops + ops[:1] * (GROUP_OPERANDS - len(ops))
    return (
        f"NHT(nht_prods)(k, {n}, {len(members)}, {', '.join(outs)}, {len(ops)}, "
        f"{', '.join(args)}, {', '.join(idx)});"
    )


@dataclass
class _Layout:
    """The lines of a pass with its work values placed: ``rows`` values per order (the
    values kept at every order, ``W[k * NHT_TOT + offset + i]``) and ``slots`` values of
    one row (``WT[offset + i]``, shared by values whose lines do not overlap)."""

    start: list[str]
    ops: list[str]
    out: list[str]
    rows: int
    slots: int


def _layout(
    tape: _Tape,
    states: list[tuple[_Val, int]],
    ops: list[str],
    n_state: int,
    n_par: int,
    one_row: bool = True,
) -> _Layout:
    """The pass's lines (:func:`_pass`) around its operations ``ops`` (the tape's, products
    grouped by :func:`_fused`), with the values of the current order only
    (:func:`_current_only`) in a few shared slots.

    Kept at every order, Veselova n = 16 had 237 values per order, 15 kB per order in a pass
    of 8 lanes, of which 44 are needed at earlier orders; the other 193 now share 65 slots
    (a value's slot is free again after its last line). With the groups, a kernel call of the
    vector pass measured faster at n = 16 and 64, and the layout alone gains a little at
    n = 16 (see benchmarks/NOTES.md). The one-lane pass, whose work fits the first-level
    cache, keeps every value at every order (``one_row`` false): there one row was mostly
    slower; the operations, and so a lane's bits, are the same in either layout.
    """
    start = [
        "/* the parameters, then the constants: once per pass */",
        f"for (int64_t r = 0; r < {n_par}; ++r) {{ double *d_ = (double *)&PAR[r]; "
        f"for (int l = 0; l < NHT_LANES; ++l) d_[l] = par[r * ld + l0 + {_LANE}]; }}",
        *tape.prep,
        "/* order 0 of the states */",
        *tape.load,
    ]
    out = ["/* coefficients out: coef[(k * n_state + row) * ld + lane]; a run of",
           " * components of one state vector in one copy for one lane with ld = 1 */"]  # fmt: skip
    for r0, m in _state_runs(states):
        v, c0 = states[r0]
        if m > 1:
            out.append(
                f"if (NHT_LANES == 1 && ld == 1) memcpy(coef + k * {n_state} + {r0}, "
                f"(const double *)&{v.name}[k * NHT_TOT + {c0}], {m} * sizeof(double)); else"
            )
        out.append(
            f"for (int64_t r = {r0}; r < {r0 + m}; ++r) {{ const double *s_ = "
            f"(const double *)&{v.name}[k * NHT_TOT + {c0 - r0} + r]; "
            f"double *d_ = coef + (k * {n_state} + r) * ld + l0; "
            "if (nl == NHT_LANES) memcpy(d_, s_, sizeof(NHT_T)); "
            "else for (int64_t l = 0; l < nl; ++l) d_[l] = s_[l]; }"
        )
    one_row = _current_only(tape, states) if one_row else set()
    for line in (*start, *ops, *out):  # every mention of such a value carries its stride
        one_row -= set(_WORK_NAME.findall(_WITH_STRIDE.sub("", line)))
    ops = [_WITH_STRIDE.sub(lambda m: _no_stride(m, one_row), line) for line in ops]
    # the values of every order, packed; the others in slots reused once their lines end
    place: dict[str, str] = {}
    rows = 0
    for name, nc in tape.work:
        if name not in one_row:
            place[name] = f"(W + {rows})"
            rows += nc
    span: dict[str, list[int]] = {}
    for i, line in enumerate(ops):
        for name in _WORK_NAME.findall(line):
            if name in one_row:
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

    def move(lines: list[str]) -> list[str]:
        return [_WORK_NAME.sub(lambda m: place[m.group(0)], line) for line in lines]

    return _Layout(move(start), move(ops), move(out), rows, slots)


_WITH_STRIDE = re.compile(r"(\(W \+ \d+\))((?: \+ \d+)?), NHT_TOT\b")


def _no_stride(m: re.Match, names: set[str]) -> str:
    return f"{m.group(1)}{m.group(2)}, 0" if m.group(1) in names else m.group(0)


def _pass(lay: _Layout, tape: _Tape, n_par: int, fixed: int | None = None) -> list[str]:
    """The body of one pass over ``nl`` lanes (a template: NHT_T, NHT(), NHT_LANES); with
    ``fixed``, the pass for that order only (a constant: its loops unroll completely)."""
    nconst = sum(c for _, c in tape.consts)
    order = "order" if fixed is None else "order_arg"
    lines = [
        "static NHT_NOINLINE int NHT(nht_pass)(const double *restrict t, const double *restrict x, "
        f"const double *restrict par, double *restrict coef, int64_t {order}, int64_t ld, "
        "int64_t l0, int64_t nl, NHT_T *restrict W, int64_t *restrict piv) {",
        "    (void)t; (void)par; (void)piv;",
        *([] if fixed is None else [f"    const int64_t order = {fixed}; (void)order_arg;"]),
        f"    enum {{ NHT_TOT = {max(lay.rows, 1)} }};",
        "    const size_t P1 = (size_t)(order + 1);",
        f"    NHT_T *restrict WT = W + (size_t){lay.rows} * P1;",
        f"    NHT_T *restrict PAR = WT + {lay.slots};",
        f"    NHT_T *restrict CST = PAR + {n_par};",
        "    (void)WT; (void)PAR; (void)CST;",
    ]
    off = n_par + nconst
    poff = 0
    for sname, nv, np_ in tape.solve_ws:
        lines.append(f"    NHT_T *restrict {sname}_A = PAR + {off};")
        lines.append(f"    NHT_T *restrict {sname}_b = {sname}_A + {nv - np_};")
        lines.append(f"    int64_t *restrict {sname}_p = piv + (size_t){poff} * NHT_LANES;")
        off += nv
        poff += np_
    lines += [f"    {s}" for s in lay.start]
    if fixed is not None:
        lines.append('    _Pragma("GCC unroll 64")')
    lines.append("    for (int64_t k = 0; k < order; ++k) {")
    lines += [f"        {s}" for s in lay.ops]
    lines.append("    }")
    lines.append("    for (int64_t k = 0; k <= order; ++k) {")
    lines += [f"        {s}" for s in lay.out]
    lines += ["    }", "    return NH_OK;", "}", ""]
    return lines


def _instances(
    body: list[str],
    scalar: str,
    vector: str,
    one_lane: bool = True,
    body_one: list[str] | None = None,
) -> list[str]:
    """``body`` instantiated, with vector extensions, for NHT_VW lanes (``f##vector``) and for
    one lane (names ``f##scalar``, from ``body_one`` if given: the same operations with their
    work values placed otherwise, see :func:`_layout`; unless not ``one_lane``). The vector
    pass comes first: placed after the larger one-lane pass (register blocks), the FPU
    chain's vector pass, the same instructions, ran markedly slower (see benchmarks/NOTES.md)."""
    one = [
        "#define NHT_T double",
        f"#define NHT(f) f##{scalar}",
        "#define NHT_LANES 1",
        "#define NHT_ZERO 0.0",
        *(body if body_one is None else body_one),
        "#undef NHT_T",
        "#undef NHT",
        "#undef NHT_LANES",
        "#undef NHT_ZERO",
    ]
    return [
        "#if NHT_HAVE_VEC",
        "#define NHT_T nht_vw",
        f"#define NHT(f) f##{vector}",
        "#define NHT_LANES NHT_VW",
        "#define NHT_ZERO ((nht_vw){0.0})",
        *body,
        "#undef NHT_T",
        "#undef NHT",
        "#undef NHT_LANES",
        "#undef NHT_ZERO",
        "#endif",
        *(one if one_lane else []),
    ]


def _render(tape: _Tape, states: list[tuple[_Val, int]], n_state: int, n_par: int,
            head: str, uses_linalg: bool, fixed: int | None) -> str:  # fmt: skip
    nconst = sum(c for _, c in tape.consts)
    solve_v = sum(v for _, v, _ in tape.solve_ws)
    solve_p = sum(p for _, _, p in tape.solve_ws)
    conv, lin = _tape_cost(tape)
    ops = _fused(tape)
    lay = _layout(tape, states, ops, n_state, n_par)  # vector passes
    lay1 = _layout(tape, states, ops, n_state, n_par, one_row=False)  # one lane
    passes = _instances(_pass(lay, tape, n_par), "_1", "_v", body_one=_pass(lay1, tape, n_par))
    args_v = "t, x, par, coef, order, ld, l0, nl, (nht_vw *)W, piv"
    args_1 = "t, x, par, coef, order, ld, l0, 1, W, piv"
    pick_v = pick_1 = ""  # the unrolled passes at their order, if any
    if fixed is not None:
        one_lane = _terms(conv, lin, fixed) <= UNROLL_TERMS_ONE_LANE
        passes += _instances(
            _pass(lay, tape, n_par, fixed), "_1u", "_vu", one_lane, _pass(lay1, tape, n_par, fixed)
        )
        pick_v = f"order == {fixed} ? nht_pass_vu({args_v}) : "
        if one_lane:
            pick_1 = f"order == {fixed} ? nht_pass_1u({args_1}) : "
    lines = [
        head,
        *([] if fixed is None else [f"#define NHT_FIXED_ORDER {fixed}"]),
        preamble(*(["linalg.h"] if uses_linalg else []), "taylor.h"),
        f"static const int64_t nh_info_data[NH_INFO_LEN] = "
        f"{{NH_ABI_VERSION, {n_state}, {n_par}, 0, NH_HAS_TAYLOR, 0}};",
        "NH_EXPORT const int64_t *nh_info(void) { return nh_info_data; }",
        "",
        f"/* {len(tape.work)} work variables ({lay.rows} values per order, {lay.slots} of the "
        f"current order only), {len(tape.consts)} constants ({nconst} values), "
        f"{len(tape.ops)} operations per order */",
        f"/* {_COST_TAG} conv={conv} lin={'inf' if math.isinf(lin) else int(lin)} */",
        *passes,
        "",
        "NH_EXPORT int nh_taylor(void *ctx, const double *restrict t, const double *restrict x, "
        "const double *restrict par, double *restrict coef, int64_t order, int64_t nlanes, "
        "int64_t ld) {",
        "    (void)ctx;",
        "    if (nlanes < 0 || ld < nlanes) return NH_ERR_SIZE;",
        "    if (order < 1 || order > NH_TAYLOR_MAX_ORDER) return NH_ERR_ARG;",
        "    if (nlanes == 0) return NH_OK;",
        f"    const size_t rest_v = {lay.slots + n_par + nconst + solve_v};",
        f"    const size_t nv = (size_t){lay.rows} * (size_t)(order + 1) + rest_v;",
        f"    const size_t nv1 = (size_t){lay1.rows} * (size_t)(order + 1) + rest_v - {lay.slots};",
        "    /* the work of a small system on the stack (no allocation per step), else the heap:",
        "     * nv values of NHT_VW lanes for the vector pass, nv1 of one lane alone */",
        "    const size_t nvv = (size_t)NHT_VW * nv;",
        "    const size_t nw = nlanes >= 2 && nvv > nv1 ? nvv : nv1;",
        f"    double stack_w[{_STACK_DOUBLES} + 8];",
        f"    const int on_stack = nw <= {_STACK_DOUBLES};",
        "    void *mem = on_stack ? NULL : malloc(sizeof(double) * (nw + 8));",
        "    double *base = on_stack ? stack_w : (double *)mem;",
        "    double *W = base ? (double *)(((uintptr_t)base + 63) & ~(uintptr_t)63) : NULL;",
        *(
            [
                f"    int64_t piv[{solve_p} * 8 + 1];",
                "    if (!W) return NH_ERR_NOMEM;",
            ]
            if solve_p * 8 + 1 <= _STACK_PIVOTS
            else [
                f"    int64_t *piv = (int64_t *)malloc(sizeof(int64_t) * ({solve_p} * 8 + 1));",
                "    if (!W || !piv) { free(mem); free(piv); return NH_ERR_NOMEM; }",
            ]
        ),
        "    int rc = NH_OK;",
        "    for (int64_t l0 = 0; l0 < nlanes && rc == NH_OK;) {",
        "        const int64_t rest = nlanes - l0;",
        "#if NHT_HAVE_VEC",
        "        if (rest >= 2) {",
        "            const int64_t nl = rest < NHT_VW ? rest : NHT_VW;",
        f"            rc = {pick_v}nht_pass_v({args_v});",
        "            l0 += nl;",
        "            continue;",
        "        }",
        "#endif",
        f"        rc = {pick_1}nht_pass_1({args_1});",
        "        l0 += 1;",
        "    }",
        "    free(mem);",
        *([] if solve_p * 8 + 1 <= _STACK_PIVOTS else ["    free(piv);"]),
        "    return rc;",
        "}",
        "",
    ]
    return "\n".join(lines)


def taylor_digest(code: KernelSet | IndexedProgram) -> str:
    """SHA-256 of what the Taylor kernel of ``code`` depends on (the ``rhs`` and its solves)."""
    if isinstance(code, IndexedProgram):
        return expression_digest(["taylor", "program", program_digest(code)])
    return expression_digest(["taylor", "kernel_set", kernel_set_digest(code)])


def generate_taylor_c(
    code: KernelSet | IndexedProgram,
    provenance: Mapping[str, object] | None = None,
    order: int | None = None,
) -> str:
    """Return the C99 source of the Taylor-coefficient kernel library of ``code``.

    Parameters
    ----------
    code : KernelSet or IndexedProgram
        The system: its ``rhs`` family (and the solves it uses) is expanded.
    provenance : mapping, optional
        Shown in the banner: ``"system"``, the system's name.
    order : int, optional
        Also a pass for this order alone, its loops over the orders unrolled (straight-line
        code with constant offsets; the same operations in the same order, so the same
        results). ``nh_taylor`` takes it when called with that order and the general pass
        otherwise. Worth it for small right-hand sides only (:func:`unroll_pays`).

    Returns
    -------
    str
        The source: a banner, ``nh_info`` (flags ``NH_HAS_TAYLOR``) and ``nh_taylor`` (see
        ``nh_abi.h``: ``coef[(k * n_state + i) * ld + l]`` is the ``k``-th normalised Taylor
        coefficient of component ``i`` of lane ``l``, ``k = 0..order``).

    Raises
    ------
    ValueError
        If the right-hand side uses a function the Taylor method cannot expand (the message
        names it and lists the supported ones), or derivatives of a solve's unknowns.
    """
    if isinstance(code, IndexedProgram):
        if "rhs" not in code.outputs:
            raise ValueError("the program has no 'rhs' output")
        tape, states = _program_tape(code)
        n_state, n_par = code.n_state, code.n_params
        linalg = any(st.kind == "solve" for st in code.statements)
    else:
        if "rhs" not in code.kernels:
            raise ValueError("the kernel set has no 'rhs' family")
        tape, states = _kernel_set_tape(code)
        n_state, n_par = len(code.states), len(code.params)
        linalg = bool(code.solves)
    head = banner(
        generator="nhfast.codegen.generate_taylor_c",
        regenerate="nhfast.codegen.generate_taylor_c(code), e.g. through compile_taylor()",
        digest=taylor_digest(code),
        legend=[],
        provenance=provenance,
        details=f"Taylor kernel: {len(tape.work)} work variables, {len(tape.consts)} "
        f"constants, {len(tape.ops)} operations per order.",
    )
    if order is not None and not (
        isinstance(order, int) and not isinstance(order, bool) and 1 <= order <= TAYLOR_MAX_ORDER
    ):
        raise ValueError(f"order must be an int in [1, {TAYLOR_MAX_ORDER}] or None, got {order!r}")
    return _render(tape, states, n_state, n_par, head, linalg, order)
