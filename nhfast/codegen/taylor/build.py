"""Decompose SymPy expressions into the lines of a Taylor :class:`~.tape.Tape`."""

from __future__ import annotations

import sympy as sp

from nhfast.codegen.taylor.tape import Tape, Val, call, code, line

_SUPPORTED = (
    "+, -, *, /, powers, sqrt, exp, log, sin, cos, tan, sinh, cosh, tanh, atan, asin, acos, "
    "asinh, acosh, atanh, Abs"
)


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

LANE = "(l < nl ? l : nl - 1)"  # lane l of a pass: the pass's last lane pads it


class Builder:
    """Decompose SymPy expressions into the operations of a :class:`Tape`."""

    def __init__(self, tape: Tape, index: sp.Symbol | None) -> None:
        self.t = tape
        self.index = index
        self.bound: dict[sp.Symbol, Val] = {}  # handles (states, targets, unknowns, time)
        self.params: dict[sp.Symbol, int] = {}  # scalar parameter symbol -> row
        self.param_vectors: dict[sp.Symbol, int] = {}  # vector parameter handle -> first row
        self.views: dict[sp.Symbol, tuple[sp.Symbol, int]] = {}  # component -> (handle, k)
        self.memo: dict[tuple[sp.Expr, bool], Val] = {}
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
    def const(self, e: sp.Expr, vec: bool) -> Val:
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
        text = self.t.printer.doprint(e.xreplace(names))
        body = " ".join([*decl, f"c_[l] = {text};"])
        loop = f"for (int l = 0; l < NHT_LANES; ++l) {{ {body} }}"
        if vec:
            self.t.prep.append(
                line(
                    f"for (int64_t i = 0; i < {self.t.n}; ++i) "
                    f"{{ double *c_ = (double *)&{c.name}[i]; {loop} }}"
                )
            )
        else:
            self.t.prep.append(
                line(
                    "{ const int64_t i = 0; (void)i; "
                    f"double *c_ = (double *)&{c.name}[0]; {loop} }}"
                )
            )
        self.memo[key] = c
        return c

    # ------------------------------------------------------------------- values ----
    def value(self, e: sp.Expr, vec: bool) -> Val:
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

    def _value(self, e: sp.Expr, vec: bool) -> Val:
        if isinstance(e, sp.Symbol):
            if e in self.bound:
                return self.bound[e]
            if e in self.views:
                h, k = self.views[e]
                base = self.bound[h]
                return Val(base.const, False, base.name, k) if base.vector else base
            raise ValueError(f"symbol {e} is not a state, parameter or defined value")
        if isinstance(e, sp.Add):
            return self._add(e, vec)
        if isinstance(e, sp.Mul):
            return self._mul(e, vec)
        if isinstance(e, sp.Pow):
            return self._pow(e.base, e.exp, vec)
        return self._function(e, vec)

    def _op(self, op: str, vector: bool, *args: object) -> Val:
        """``out = op(args)`` as a new work variable (or the same operation's earlier one).

        ``args`` are operand values or C text.
        """
        key = (op, vector, "", *args)
        if key in self.t.memo:
            return self.t.memo[key]
        out = self.t.new_var(vector)
        nc = self.t.nc(out)
        rest = [(", ", a.arg(vector) if isinstance(a, Val) else str(a)) for a in args]
        if op in ("nht_mul", "nht_sqr") and vector:
            self.t.products[len(self.t.ops)] = (out, args[0], args[-1])
        self.t.ops.append(
            call(op, nc, f"NHT({op})(k, {nc}, ", out.strided(), *rest, ");", output=out.name)
        )
        self.t.memo[key] = out
        return out

    def _add(self, e: sp.Add, vec: bool) -> Val:
        consts: list[sp.Expr] = []
        terms: list[tuple[float, Val]] = []
        for term in e.args:
            if self.is_const(term):
                consts.append(term)
                continue
            coeff, rest = term.as_coeff_Mul()
            terms.append((float(coeff), self.value(rest, vec)))
        terms.sort(key=lambda cv: cv[1].key())
        cval = self.value(sp.Add(*consts), vec) if consts else None
        vector = any(v.vector for _, v in terms) or bool(cval and cval.vector)
        key = ("add", vector, cval, *terms)
        if key in self.t.memo:
            return self.t.memo[key]
        out = self.t.new_var(vector)
        nc = self.t.nc(out)
        # the first up to four terms in one pass (nht_lin2..4), any further ones added after
        head, rest = (terms[:4], terms[4:]) if len(terms) > 1 else (terms, [])
        args = [(f", {c!r}, ", v.arg(vector)) for c, v in head]
        op = "nht_scale" if len(head) == 1 else f"nht_lin{len(head)}"
        o = out.name
        self.t.ops.append(
            call(op, nc, f"NHT({op})(k, {nc}, ", out.strided(), *args, ");", output=o)
        )
        for c, v in rest:
            self.t.ops.append(
                call(
                    "nht_axpy",
                    nc,
                    f"NHT(nht_axpy)(k, {nc}, ",
                    out.strided(),
                    f", {c!r}, ",
                    v.arg(vector),
                    ");",
                    output=o,
                )
            )
        if cval is not None:  # (the output named bare: kept at every order)
            self.t.ops.append(
                call(
                    "nht_addc",
                    nc,
                    f"if (k == 0) NHT(nht_addc)({nc}, ",
                    out.ref(),
                    ", ",
                    cval.arg(vector),
                    ");",
                )
            )
        self.t.memo[key] = out
        return out

    def _mul(self, e: sp.Mul, vec: bool) -> Val:
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
        expanded = factors(num)
        if len(expanded) > 2:
            return self._times_const(c, self._shared_product(expanded, vec), vec)
        vals = sorted((self.value(f, vec) for f in num), key=Val.key)
        acc = vals[0]
        for v in vals[1:]:
            if v == acc:  # a * a: the square's recurrence does half the work
                acc = self._op("nht_sqr", acc.vector, acc)
            else:
                acc = self._op("nht_mul", acc.vector or v.vector, acc, v)
        return self._times_const(c, acc, vec)

    def _shared_product(self, factors: list[sp.Expr], vec: bool) -> Val:
        """A product of three or more factors, paired so that products are shared: first a
        pair whose product the tape already has, else the pair met in most products of the
        program (:attr:`pairs`), else the first two in a fixed order."""
        items: list[tuple[sp.Expr | None, Val]] = [
            (f, self.value(f, vec)) for f in sorted(factors, key=sp.default_sort_key)
        ]

        def ordered(a: Val, b: Val) -> tuple[Val, Val]:
            return (a, b) if a.key() <= b.key() else (b, a)

        def mul(a: Val, b: Val) -> Val:
            if a == b:
                return self._op("nht_sqr", a.vector, a)
            x, y = ordered(a, b)
            return self._op("nht_mul", x.vector or y.vector, x, y)

        def known(a: Val, b: Val) -> bool:
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
                        count = self.pairs.get(pair_key(fi, fj), 0)
                    sc = (count, int(known(vi, vj)))
                    if sc > score:
                        best, score = (i, j), sc
            i, j = best
            prod = mul(items[i][1], items[j][1])
            items = [it for k, it in enumerate(items) if k not in (i, j)] + [(None, prod)]
        return items[0][1]

    def _times_const(self, c: sp.Expr, v: Val, vec: bool) -> Val:
        if c == 1:
            return v
        if c.is_number:
            return self._op("nht_scale", v.vector, repr(float(c)), v)
        cv = self.value(c, vec)
        return self._op("nht_cmul", v.vector or cv.vector, cv, v)

    def _pow(self, base: sp.Expr, ex: sp.Expr, vec: bool) -> Val:
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

    def _shifted_reciprocal(self, base: sp.Add, vec: bool) -> Val | None:
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

    def _int_pow(self, a: Val, m: int) -> Val:
        if m == 1:
            return a
        if m == 3 and not a.vector and ("nht_sqr", False, "", a) not in self.t.memo:
            return self._cube(a)
        sq = self._op("nht_sqr", a.vector, self._int_pow(a, m // 2))
        return sq if m % 2 == 0 else self._op("nht_mul", a.vector, sq, a)

    def _cube(self, a: Val) -> Val:
        """``a**3`` of a scalar value and its square, in one operation (``nht_cube``: the
        square's operands serve the product too); both are on the tape as ``a*a`` and
        ``(a*a)*a`` for later uses."""
        sq, out = self.t.new_var(False), self.t.new_var(False)
        self.t.ops.append(  # a square and a product: two convolutions
            call(
                "nht_cube",
                1,
                "NHT(nht_cube)(k, 1, ",
                out.strided(),
                ", ",
                sq.ref(),
                ", ",
                a.arg(False),
                ");",
                output=out.name,
                conv=2,
            )
        )
        self.t.memo[("nht_sqr", False, "", a)] = sq
        self.t.memo[("nht_mul", False, "", sq, a)] = out
        return out

    def _chain_op(self, fname: str, a: Val, e: Val | None, sign: float) -> Val:
        """``out = F(a)`` with ``out' = sign * a' * e`` (``e`` None: ``e = out``, exp)."""
        vector = a.vector or bool(e and e.vector)
        key = ("chain", fname, a, e)
        if key in self.t.memo:
            return self.t.memo[key]
        out = self.t.new_var(vector)
        nc = self.t.nc(out)
        ev = out if e is None else e
        av = a.arg(vector)
        self.t.ops.append(  # counted as other operations, as its order 0 (nht_init)
            code(
                f"if (k == 0) NHT(nht_init)({nc}, ",
                out.ref(),
                ", ",
                av,
                f", {_INIT[fname]}); else NHT(nht_chain)(k, {nc}, ",
                out.strided(),
                ", ",
                av,
                ", ",
                ev.arg(vector),
                f", {sign!r});",
                lin=nc,
            )
        )
        self.t.memo[key] = out
        return out

    def _pair(self, arg: sp.Expr, vec: bool, hyperbolic: bool) -> tuple[Val, Val]:
        """(sin a, cos a) or (sinh a, cosh a): each one's derivative uses the other."""
        a = self.value(arg, vec)
        key = ("pair", hyperbolic, a)
        if key in self.t.memo:
            return self.t.memo[key]  # type: ignore[return-value]
        s = self.t.new_var(a.vector)
        c = self.t.new_var(a.vector)
        nc = self.t.nc(s)
        ai = a.arg(a.vector)
        fs, fc = ("sinh", "cosh") if hyperbolic else ("sin", "cos")
        sign_c = 1.0 if hyperbolic else -1.0
        self.t.ops.append(  # counted as other operations, as its order 0 (nht_init)
            code(
                f"if (k == 0) {{ NHT(nht_init)({nc}, ",
                s.ref(),
                ", ",
                ai,
                f", {_INIT[fs]}); NHT(nht_init)({nc}, ",
                c.ref(),
                ", ",
                ai,
                f", {_INIT[fc]}); }} else {{ NHT(nht_chain)(k, {nc}, ",
                s.strided(),
                ", ",
                ai,
                ", ",
                c.arg(a.vector),
                f", 1.0); NHT(nht_chain)(k, {nc}, ",
                c.strided(),
                ", ",
                ai,
                ", ",
                s.arg(a.vector),
                f", {sign_c!r}); }}",
                lin=nc,
            )
        )
        self.t.memo[key] = (s, c)  # type: ignore[assignment]
        return s, c

    def _function(self, e: sp.Expr, vec: bool) -> Val:
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


def pair_key(a: sp.Expr, b: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    return (a, b) if sp.default_sort_key(a) <= sp.default_sort_key(b) else (b, a)


def factors(num: list[sp.Expr]) -> list[sp.Expr]:
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
