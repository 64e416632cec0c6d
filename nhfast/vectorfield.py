"""Vector fields and Hamiltonian systems: the symbolic objects the numeric core integrates."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import sympy as sp
from sympy.core.function import AppliedUndef

from nhfast import _keys
from nhfast._abi import HAS
from nhfast._cache import memo, peek
from nhfast._kernels import (
    CompiledSystem,
    InputCheck,
    compile_kernels,
    compile_recipe,
    compile_taylor,
    load_compiled,
    recipe_key,
)
from nhfast.codegen import (
    DerivSpec,
    IndexedProgram,
    KernelSet,
    SolveSpec,
    kernel_set_digest,
    unprintable,
    unroll_pays,
)
from nhfast.codegen.numpy_backend import numpy_rows
from nhfast.errors import CompilationError

#: Kernel families a compiled system may carry besides the vector field itself.
COMPANIONS = ("jacobian", "divergence", "observables", "dHdq", "dHdp")


@dataclass(frozen=True)
class LinearSolve:
    """Auxiliary unknowns defined by a linear system, solved numerically in the kernels.

    The right-hand side (and observables) of a :class:`VectorField` may use ``unknowns``;
    the generated code computes ``matrix`` and ``rhs`` lane by lane and solves
    ``matrix @ unknowns = rhs`` (Cholesky when ``spd``, else LU with partial pivoting), so
    no symbolic inverse is ever formed. A lane whose matrix is singular (or not positive
    definite) gets NaN, which the integrators report as a non-finite state.

    Parameters
    ----------
    unknowns : sequence of sympy.Symbol
    matrix : sympy.Matrix
        Square, of the size of ``unknowns``; may use states, params, time and the unknowns
        of earlier solves.
    rhs : sequence of sympy.Expr
    spd : bool
        The matrix is symmetric positive definite (a kinetic-energy metric, say).
    """

    unknowns: Sequence[sp.Symbol]
    matrix: Any
    rhs: Sequence[sp.Expr]
    spd: bool = True


def deriv_symbol(k: int, a: int, j: int) -> sp.Symbol:
    """Symbol of d u_a / d x_j for the unknowns u of solve k (see ``with_divergence``)."""
    return sp.Symbol(f"nh_d{k}_{a}_{j}")


def _solve_specs(solves: Sequence[Any], known: set) -> list[SolveSpec]:
    """Validate the user's solves (anything with unknowns/matrix/rhs) in order."""
    specs = []
    known = set(known)
    for k, ls in enumerate(solves):
        try:
            unknowns, matrix, rhs = ls.unknowns, ls.matrix, ls.rhs
        except AttributeError:
            raise TypeError(
                f"solves[{k}] must have unknowns, matrix and rhs (a LinearSolve)"
            ) from None
        unknowns = _symbols(unknowns, f"solves[{k}].unknowns")
        r = len(unknowns)
        mat = sp.Matrix(matrix)
        if mat.shape != (r, r):
            raise ValueError(
                f"solves[{k}].matrix must be {r}x{r} for {r} unknowns, got {mat.shape}"
            )
        rhs = _exprs(rhs, f"solves[{k}].rhs")
        if len(rhs) != r:
            raise ValueError(f"solves[{k}].rhs has {len(rhs)} entries for {r} unknowns")
        clash = set(unknowns) & known
        if clash:
            names = ", ".join(sorted(map(str, clash)))
            raise ValueError(
                f"solves[{k}].unknowns reuse states, params or earlier unknowns: {names}"
            )
        _check_symbols(
            f"solves[{k}]",
            [sp.sympify(e) for e in [*mat, *rhs]],
            known,
            "neither states, params, time nor earlier unknowns",
            "",
        )
        specs.append(
            SolveSpec(tuple(unknowns), tuple(mat), tuple(rhs), bool(getattr(ls, "spd", True)))
        )
        known |= set(unknowns)
    return specs


def _symbols(arg: Any, name: str) -> list[sp.Symbol]:
    if isinstance(arg, sp.Symbol):
        arg = [arg]
    try:
        items = list(arg)
    except TypeError:
        raise TypeError(
            f"{name} must be a sequence of sympy Symbols, got {type(arg).__name__}"
        ) from None
    for s in items:
        if not isinstance(s, sp.Symbol):
            raise TypeError(
                f"{name} must contain sympy Symbols only, got {s!r} ({type(s).__name__})"
            )
    if len(set(items)) != len(items):
        dup = sorted({str(s) for s in items if items.count(s) > 1})
        raise ValueError(f"{name} lists a symbol more than once: {', '.join(dup)}")
    return items


_NONFINITE = (sp.zoo, sp.nan, sp.oo, -sp.oo)


def _exprs(arg: Any, name: str, labels: Sequence[str] | None = None) -> list[sp.Expr]:
    """``arg`` as SymPy scalar expressions, each finite and free of complex constants.

    ``labels`` names the items in messages (default ``name[i]``).
    """
    if isinstance(arg, sp.MatrixBase):
        arg = list(arg)
    try:
        items = [sp.sympify(e) for e in arg]
    except (TypeError, sp.SympifyError) as exc:
        raise TypeError(f"{name} must be a sequence of sympy expressions: {exc}") from None
    for i, e in enumerate(items):
        if not isinstance(e, sp.Expr):
            raise TypeError(f"{name} must contain scalar expressions, got {e!r}")
        label = labels[i] if labels is not None else f"{name}[{i}]"
        bad = [str(c) for c in _NONFINITE if e.has(c)]
        if bad:
            raise ValueError(
                f"{label} is not finite ({', '.join(bad)}): {e} (a division by zero or an "
                "infinite limit: write the expression so that it is finite)"
            )
        if e.has(sp.I):
            raise ValueError(
                f"{label} has complex constants (I): {e} (nhfast integrates real systems: "
                "split it into real and imaginary parts as separate states)"
            )
    return items


def _split_nonzero(
    domain: Mapping[str, Any] | None, nonzero: Sequence[str]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``domain`` with its ``sp.Ne(expr, 0)`` values replaced by ``expr``, and the labels of
    the ``expr != 0`` conditions (those and the ones ``nonzero`` names)."""
    if isinstance(nonzero, str):
        raise TypeError(f"nonzero must be a sequence of domain labels, got the string {nonzero!r}")
    dom = dict(domain or {})
    labels = list(nonzero)
    for k, v in dom.items():
        if isinstance(v, sp.Ne):
            lhs, rhs = v.args
            dom[k] = lhs if rhs == 0 else lhs - rhs
            if k not in labels:
                labels.append(k)
    unknown = [k for k in labels if k not in dom]
    if unknown:
        raise ValueError(
            f"nonzero names {', '.join(map(repr, unknown))}, not a label of domain "
            f"({', '.join(map(repr, dom)) or 'empty'})"
        )
    return dom, tuple(labels)


def checked_exprs(arg: Any, name: str, labels: Sequence[str] | None = None) -> list[sp.Expr]:
    """``arg`` as SymPy scalar expressions, each finite and real (see ``VectorField``); the
    errors name ``labels`` (default ``name[i]``)."""
    return _exprs(arg, name, labels)


def check_printable(exprs: Sequence[sp.Expr], label: str) -> None:
    """Raise ValueError naming the functions of ``exprs`` the kernels' C cannot write (at
    construction, not when a kernel is first compiled)."""
    bad = unprintable(exprs)
    if bad:
        raise ValueError(
            f"{label} uses functions that C99 has no equivalent of: {', '.join(bad)} (write "
            "them with elementary functions, or as states of their own differential equation)"
        )


def _assumptions(s: sp.Symbol) -> str:
    given = getattr(s, "_assumptions_orig", None)
    if given is None:
        given = s.assumptions0
    return "Symbol({!r}{})".format(str(s), "".join(f", {k}={v}" for k, v in sorted(given.items())))


def _check_symbols(
    label: str,
    exprs: Sequence[sp.Expr],
    known: set,
    what: str = "neither states, params nor time",
    fix: str = " (add them to params=, or define them by solves=)",
) -> None:
    """Raise ValueError naming the symbols of ``exprs`` not in ``known`` (states, params, ...).

    A symbol whose name matches a known one but whose assumptions differ is a different
    SymPy symbol; the message then lists both.
    """
    missing = set().union(*(e.free_symbols for e in exprs)) - known if exprs else set()
    if not missing:
        return
    by_name = {str(k): k for k in known}
    twins = sorted((m for m in missing if str(m) in by_name), key=str)
    if twins:
        pairs = "; ".join(
            f"uses {_assumptions(m)}, declared {_assumptions(by_name[str(m)])}" for m in twins
        )
        raise ValueError(
            f"{label} uses a symbol whose name matches a declared one but whose assumptions "
            f"differ: {pairs} (create both with the same sp.Symbol arguments)"
        )
    names = ", ".join(sorted(map(str, missing)))
    raise ValueError(f"{label} uses symbols that are {what}: {names}{fix}")


@dataclass
class VectorField:
    """An ODE system x' = f(t, x; params) given by SymPy expressions.

    Parameters
    ----------
    states : sequence of sympy.Symbol
        State variables, in the order of the state vector.
    rhs : sequence of sympy.Expr
        Right-hand side, one expression per state.
    params : sequence of sympy.Symbol, optional
        Parameters, in the order of the parameter vector given to ``integrate``.
    observables : mapping of str to sympy.Expr, optional
        Scalar functions of (t, x, params) evaluated along trajectories (energy, constraints,
        densities, ...).
    time : sympy.Symbol, optional
        Symbol of time, for non-autonomous right-hand sides.
    split : int, optional
        For partitioned systems a' = F(b), b' = G(a): the number of components of ``a``
        (positions). Needed by ``method="leapfrog"``.
    name : str, optional
        Label used in reports.
    solves : sequence of LinearSolve, optional
        Auxiliary unknowns (velocities from momenta, say) that ``rhs`` and ``observables``
        may use, solved numerically in the generated code.
    domain : mapping of str to sympy.Expr, optional
        Conditions ``expr > 0`` (functions of states and params) that define where the
        equations hold, e.g. ``{"hemisphere chart": 1 - s1**2 - s2**2}``; ``integrate``
        rejects initial states outside it, naming the condition. A value ``sp.Ne(expr, 0)``
        is a condition ``expr != 0`` (the singular set of a frame, ``det = 0``, say): its
        label is added to ``nonzero``.
    nonzero : sequence of str, optional
        Labels of ``domain`` conditions that mean ``expr != 0`` rather than ``expr > 0``:
        the domain is the side of the singular set ``expr = 0`` where the trajectory starts.
        ``integrate`` orients each such condition by its sign at the initial states
        (:meth:`oriented`), so that crossing ``expr = 0`` either way stops the trajectory
        with status ``"left_domain"``.

    Raises
    ------
    ValueError
        If ``rhs`` has the wrong length, or an expression uses a symbol that is neither a
        state, a parameter nor the time symbol.
    """

    states: Sequence[sp.Symbol]
    rhs: Sequence[sp.Expr]
    params: Sequence[sp.Symbol] = ()
    observables: Mapping[str, sp.Expr] | None = None
    time: sp.Symbol | None = None
    split: int | None = None
    name: str = "system"
    solves: Sequence[Any] = ()
    domain: Mapping[str, sp.Expr] | None = None
    nonzero: Sequence[str] = ()

    def __post_init__(self) -> None:
        self.states = _symbols(self.states, "states")
        if not self.states:
            raise ValueError("states must not be empty")
        self.rhs = _exprs(self.rhs, "rhs")
        self.params = _symbols(self.params, "params")
        if len(self.rhs) != len(self.states):
            raise ValueError(f"rhs has {len(self.rhs)} expressions for {len(self.states)} states")
        if self.time is not None and not isinstance(self.time, sp.Symbol):
            raise TypeError(f"time must be a sympy Symbol or None, got {self.time!r}")
        clash = set(self.states) & set(self.params)
        if clash or (self.time is not None and self.time in set(self.states) | set(self.params)):
            raise ValueError(f"a symbol is both a state and a parameter/time: {clash or self.time}")
        obs = dict(self.observables or {})
        for k in obs:
            if not isinstance(k, str) or not k.isidentifier():
                raise ValueError(f"observables: names must be identifiers, got {k!r}")
        labels = [f"observables[{k!r}]" for k in obs]
        self.observables = dict(zip(obs, _exprs(obs.values(), "observables", labels), strict=True))
        known = (
            set(self.states) | set(self.params) | ({self.time} if self.time is not None else set())
        )
        self._solve_specs = _solve_specs(list(self.solves), known)
        self.solves = tuple(self.solves)
        for k, sv in enumerate(self._solve_specs):
            known |= set(sv.unknowns)
            # derivatives of the unknowns, as used by with_divergence()
            known |= {deriv_symbol(k, a, j) for a in range(sv.r) for j in range(len(self.states))}
        dom, nonzero = _split_nonzero(self.domain, self.nonzero)
        labels = [f"domain[{k!r}]" for k in dom]
        self.domain = dict(zip(dom, _exprs(dom.values(), "domain", labels), strict=True))
        self.nonzero = nonzero
        groups = (
            ("rhs", self.rhs),
            ("observables", list(self.observables.values())),
            ("domain", list(self.domain.values())),
        )
        for label, exprs in groups:
            _check_symbols(label, exprs, known)
            undefined = set().union(*(e.atoms(AppliedUndef) for e in exprs)) if exprs else set()
            if undefined:
                names = ", ".join(sorted(map(str, undefined)))
                raise ValueError(
                    f"{label} uses undefined functions, which have no C equivalent and no "
                    f"NumPy value: {names} (write them as expressions of the states and params)"
                )
            check_printable(exprs, label)
        if self.split is not None and not (0 < int(self.split) < len(self.states)):
            raise ValueError(f"split must lie in 1..{len(self.states) - 1}, got {self.split}")

    # ------------------------------------------------------------------ symbolic ----
    @property
    def n_state(self) -> int:
        return len(self.states)

    @property
    def n_params(self) -> int:
        return len(self.params)

    def _deriv_symbols_used(self) -> set:
        if not self._solve_specs:
            return set()
        used = set().union(*(sp.sympify(e).free_symbols for e in self.rhs))
        for e in self.observables.values():
            used |= e.free_symbols
        return {u for u in used if str(u).startswith("nh_d")}

    def with_divergence(self, name: str = "ell") -> VectorField:
        """The system with one more state ``ell`` and ``ell' = div X`` (Liouville's integral).

        Along a trajectory ``ell(t) = int_0^t div X``, so that ``exp(-ell)`` is the Jacobian
        determinant factor of the coordinate volume; a density ``rho`` is invariant iff
        ``log rho(x(t)) + ell(t) - log rho(x(0))`` stays zero. Works with ``solves`` (the
        divergence is differentiated through them implicitly).
        """
        taken = {str(x) for x in [*self.states, *self.params]}
        ell = sp.Symbol(name) if name not in taken else sp.Dummy(name)
        if self._solve_specs:
            _, D = self.total_derivatives()
            div = sp.Add(*[D(f, i) for i, f in enumerate(self.rhs)])
        else:
            div = self.divergence()
        return VectorField(
            states=[*self.states, ell],
            rhs=[*self.rhs, div],
            params=self.params,
            observables=self.observables,
            time=self.time,
            name=f"{self.name} with divergence",
            solves=self.solves,
            domain=self.domain or None,
            nonzero=self.nonzero,
        )

    def check_domain(self, x: np.ndarray, params: np.ndarray, name: str = "x0") -> None:
        """Raise ``ValueError`` if a row of ``x`` (with its ``params`` row, or the single row)
        violates a ``domain`` condition."""
        if not self.domain:
            return
        vals = self.domain_values(x, params)
        for j, (label, expr) in enumerate(self.domain.items()):
            nz = label in self.nonzero
            bad = np.flatnonzero(~(np.abs(vals[:, j]) > 0 if nz else vals[:, j] > 0))
            if bad.size:
                raise ValueError(
                    f"{name}: {bad.size} state(s) outside the domain of {self.name!r}: "
                    f"condition {label!r} ({expr} {'!=' if nz else '>'} 0) fails at row "
                    f"{bad[0]} (value {vals[bad[0], j]:.3g})"
                )

    def sides(self, x: np.ndarray, params: np.ndarray, name: str = "x0") -> np.ndarray:
        """Signs (+1 or -1) of the ``nonzero`` conditions at the rows of ``x``, shape
        ``(rows, len(domain))`` (+1 for the conditions ``expr > 0``).

        Raises
        ------
        ValueError
            If a row violates a condition: ``expr > 0`` fails, or ``expr = 0`` (or not finite)
            for a ``nonzero`` one (a state on the singular set), naming it.
        """
        self.check_domain(x, params, name)
        vals = self.domain_values(x, params)
        nz = np.array([k in self.nonzero for k in self.domain], dtype=bool)
        return np.where(nz, np.sign(vals), 1.0).astype(int)

    def oriented(self, x: np.ndarray, params: np.ndarray, name: str = "x0") -> VectorField:
        """The field whose ``nonzero`` conditions ``expr != 0`` are oriented by the initial
        states ``x``: ``expr > 0`` or ``-expr > 0``, the side of ``expr = 0`` where the rows
        of ``x`` lie (``self`` when there are no such conditions).

        ``integrate`` runs each side as its own batch, so that the crossing of the singular
        set either way stops a trajectory (status ``"left_domain"``).

        Raises
        ------
        ValueError
            If a row of ``x`` lies on a singular set (``expr = 0`` or not finite), or the rows
            lie on different sides of one, naming the condition.
        """
        if not self.nonzero:
            return self
        side = self.sides(x, params, name)
        for j, label in enumerate(self.domain):
            col = side[:, j]
            if np.any(col != col[0]):
                raise ValueError(
                    f"{name}: the initial states lie on both sides of the singular set of "
                    f"{self.name!r}: condition {label!r} ({self.domain[label]} != 0) is "
                    f"positive at row {int(np.argmax(col > 0))} and negative at row "
                    f"{int(np.argmax(col < 0))}"
                )
        return self.on_side(tuple(side[0].tolist()))

    def on_side(self, signs: tuple[int, ...]) -> VectorField:
        """The field with the domain's conditions multiplied by ``signs`` (one +1 or -1 per
        condition, +1 for those not in ``nonzero``) and all of them ``expr > 0``; built once
        per ``signs`` (the right-hand side and its kernels are shared by content).

        Raises
        ------
        ValueError
            If ``signs`` has the wrong length, a value other than +1 / -1, or flips a
            condition ``expr > 0``.
        """
        labels = list(self.domain)
        if len(signs) != len(labels) or any(
            s not in (1, -1) or (s == -1 and k not in self.nonzero)
            for k, s in zip(labels, signs, strict=True)
        ):
            raise ValueError(
                f"signs must be +1 or -1 for each of the {len(labels)} domain conditions "
                f"(-1 only for the nonzero ones), got {signs}"
            )
        if not self.nonzero:
            return self

        def build() -> VectorField:
            dom = {}
            for (k, e), s in zip(self.domain.items(), signs, strict=True):
                if k in self.nonzero:
                    dom[f"{k} ({'>' if s > 0 else '<'} 0 side)"] = e if s > 0 else -e
                else:
                    dom[k] = e
            return VectorField(
                states=self.states,
                rhs=self.rhs,
                params=self.params,
                observables=self.observables,
                time=self.time,
                split=self.split,
                name=self.name,
                solves=self.solves,
                domain=dom,
            )

        return memo(self, ("on side", tuple(signs)), build)

    def domain_values(self, x: np.ndarray, params: np.ndarray) -> np.ndarray:
        """The domain's conditions (``expr`` of ``expr > 0``) at the rows of ``x``, shape
        ``(rows, len(domain))`` (NaN where an expression is not defined)."""
        x = np.atleast_2d(np.asarray(x, dtype=float))
        par = np.atleast_2d(np.asarray(params, dtype=float)) if self.n_params else x[:, :0]
        f = memo(
            self,
            "domain",
            lambda: numpy_rows([*self.states, *self.params], list(self.domain.values())),
        )
        return f(x, par)

    def check_inputs(self, x: np.ndarray, params: np.ndarray, name: str = "x0") -> None:
        """:meth:`check_params` and :meth:`check_domain` for states ``x`` and their params."""
        self.check_params(params, "params")
        self.check_domain(x, params, name)

    def check_params(self, params: np.ndarray, name: str = "params") -> None:
        """Raise ``ValueError`` if a parameter value contradicts its SymPy assumptions.

        Symbols declared ``positive=True`` (or ``nonnegative``, ``nonzero``) were used that way
        when the equations were simplified, so a value breaking the assumption would give a
        silently wrong vector field.
        """
        if not self.n_params:
            return
        par = np.atleast_2d(np.asarray(params, dtype=float))
        rules = (
            ("positive", lambda v: v > 0, "> 0"),
            ("nonnegative", lambda v: v >= 0, ">= 0"),
            ("nonzero", lambda v: v != 0, "!= 0"),
        )
        for k, sym in enumerate(self.params):
            col = par[:, k]
            for assumption, ok, text in rules:
                if getattr(sym, f"is_{assumption}") and not np.all(ok(col)):
                    row = int(np.flatnonzero(~ok(col))[0])
                    raise ValueError(
                        f"{name}: parameter {sym} of {self.name!r} is declared {assumption} "
                        f"(must be {text}); got {col[row]!r} in row {row}"
                    )

    def _no_solves(self, what: str) -> None:
        if self._solve_specs:
            raise ValueError(
                f"the symbolic {what} of a system with solves= involves the solves' inverse "
                f"matrices; evaluate it numerically with evaluate({what!r}, ...)"
            )

    def jacobian(self) -> sp.Matrix:
        """Jacobian matrix df_i/dx_j (systems without ``solves``)."""
        self._no_solves("jacobian")
        return sp.Matrix(self.rhs).jacobian(sp.Matrix(self.states))

    def divergence(self) -> sp.Expr:
        """Divergence sum_i df_i/dx_i with respect to the coordinate volume (no ``solves``)."""
        self._no_solves("divergence")
        return sp.Add(*[sp.diff(f, x) for f, x in zip(self.rhs, self.states, strict=True)])

    def total_derivatives(self) -> tuple[list[DerivSpec], Any]:
        """Derivative solves and the total derivative D_j through the solves' unknowns.

        du_k/dx_j solves K_k du_k/dx_j = D_j b_k - (D_j K_k) u_k, where D_j differentiates
        through the unknowns of earlier solves.
        """
        n = self.n_state
        derivs: list[DerivSpec] = []
        chain: list[tuple[sp.Symbol, list[sp.Symbol]]] = []  # unknown -> [du/dx_j]

        def D(e: sp.Expr, j: int) -> sp.Expr:
            e = sp.sympify(e)
            out = sp.diff(e, self.states[j])
            for u, du in chain:
                if u in e.free_symbols:
                    out += sp.diff(e, u) * du[j]
            return out

        for k, sv in enumerate(self._solve_specs):
            r = sv.r
            syms = [[deriv_symbol(k, a, j) for j in range(n)] for a in range(r)]
            K = sp.Matrix(r, r, list(sv.matrix))
            u = sp.Matrix(sv.unknowns)
            cols = []
            for j in range(n):
                dK = K.applyfunc(lambda e, j=j: D(e, j))
                col = sp.Matrix([D(b, j) for b in sv.rhs]) - dK * u
                cols.append(tuple(col))
            derivs.append(DerivSpec(tuple(map(tuple, syms)), tuple(cols)))
            chain += [(sv.unknowns[a], syms[a]) for a in range(r)]
        return derivs, D

    def separability(self) -> str | None:
        """Why ``leapfrog`` does not apply, or None when the system is partitioned-separable."""
        if self.split is None:
            return "no split= given (a partitioned system a' = F(b), b' = G(a) is needed)"
        k = self.split
        a, b = set(self.states[:k]), set(self.states[k:])
        for i, f in enumerate(self.rhs):
            bad = f.free_symbols & (a if i < k else b)
            if bad:
                part = "position" if i < k else "momentum"
                return (
                    f"the {part} equation d{self.states[i]}/dt depends on "
                    f"{', '.join(sorted(map(str, bad)))} (H is not separable as T(p) + V(q))"
                )
        return None

    def variational(self) -> VectorField:
        """The system augmented with its variational equations M' = (df/dx) M, M(0) = I.

        States are x followed by the rows of M (row-major). For a partitioned system the
        augmented system is partitioned too: (a, rows of M for a) then (b, rows of M for b).
        For a field with ``solves`` the augmented field keeps them, and ``df/dx`` is the
        total derivative through their unknowns (implicit differentiation,
        ``K du/dx = db/dx - (dK/dx) u``, see :meth:`total_derivatives`), solved numerically
        in the generated kernels with the factorisation of ``K``.

        Raises
        ------
        ValueError
            For a field whose right-hand side already uses derivatives of its solves'
            unknowns (a :meth:`with_divergence` field with ``solves``): its Jacobian would
            need second derivatives of the unknowns.
        """
        n = self.n_state
        if self._solve_specs:
            J = self._total_jacobian()
        else:
            J = self.jacobian()
        M = sp.Matrix(n, n, lambda i, j: sp.Symbol(f"M_{i}_{j}"))
        unknowns = [u for sv in self._solve_specs for u in sv.unknowns]
        taken = {str(s) for s in [*self.states, *self.params, *unknowns, self.time]}
        if any(str(s) in taken for s in M):
            M = sp.Matrix(n, n, lambda i, j: sp.Dummy(f"M_{i}_{j}"))
        dM = J * M
        groups = self._variational_groups()
        states: list[sp.Symbol] = []
        rhs: list[sp.Expr] = []
        for g in groups:
            states += [self.states[i] for i in g]
            rhs += [self.rhs[i] for i in g]
            for i in g:
                states += list(M.row(i))
                rhs += list(dM.row(i))
        if self._solve_specs:
            rhs = self._renumber_derivs(rhs, states)
        split = None if self.split is None else self.split * (n + 1)
        return VectorField(
            states=states,
            rhs=rhs,
            params=self.params,
            time=self.time,
            split=split,
            name=f"{self.name} (variational)",
            solves=self.solves,
        )

    def _total_jacobian(self) -> sp.Matrix:
        """``D_j f_i`` through the solves' unknowns (uses the symbols :func:`deriv_symbol`)."""
        if self._deriv_symbols_used() & set().union(*(e.free_symbols for e in self.rhs)):
            raise ValueError(
                f"the variational equations of {self.name!r} would need second derivatives of "
                "its solves' unknowns: its right-hand side already uses their first derivatives "
                "(a with_divergence() field); take variational() of the field without them"
            )
        n = self.n_state
        _, D = self.total_derivatives()
        return sp.Matrix(n, n, lambda i, j: D(self.rhs[i], j))

    def _renumber_derivs(
        self, exprs: Sequence[sp.Expr], states: Sequence[sp.Symbol]
    ) -> list[sp.Expr]:
        """Rename ``du/dx_j`` (index j among this field's states) to the index of ``x_j``
        among ``states`` (a field that holds these states, possibly in another order, and
        whose other states the solves do not depend on)."""
        pos = {s: i for i, s in enumerate(states)}
        rename = {
            deriv_symbol(k, a, j): deriv_symbol(k, a, pos[x])
            for k, sv in enumerate(self._solve_specs)
            for a in range(sv.r)
            for j, x in enumerate(self.states)
            if pos[x] != j
        }
        return [sp.sympify(e).xreplace(rename) for e in exprs] if rename else list(exprs)

    def _variational_groups(self) -> list[list[int]]:
        """State indices in the order of the augmented system: (positions, momenta) for a
        partitioned system, else all at once."""
        rows = list(range(self.n_state))
        return [rows[: self.split], rows[self.split :]] if self.split is not None else [rows]

    def variational_initial(self, x0: np.ndarray) -> np.ndarray:
        """Initial states for :meth:`variational` from states ``x0`` of shape (..., n)."""
        x0 = np.asarray(x0, dtype=float)
        n = self.n_state
        eye = np.broadcast_to(np.eye(n), (*x0.shape[:-1], n, n))
        groups = self._variational_groups()
        parts = []
        for g in groups:
            for_g = [x0[..., g]]
            for i in g:
                for_g.append(eye[..., i, :])
            parts.append(np.concatenate(for_g, axis=-1))
        return np.concatenate(parts, axis=-1)

    def variational_split(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Split outputs of :meth:`variational` into states (..., n) and M (..., n, n)."""
        y = np.asarray(y)
        n = self.n_state
        groups = self._variational_groups()
        x = np.empty((*y.shape[:-1], n))
        M = np.empty((*y.shape[:-1], n, n))
        pos = 0
        for g in groups:
            x[..., g] = y[..., pos : pos + len(g)]
            pos += len(g)
            for i in g:
                M[..., i, :] = y[..., pos : pos + n]
                pos += n
        return x, M

    def kernel_set(self, companions: Iterable[str] = ()) -> KernelSet:
        """Expressions of the vector field and the requested companion kernels."""
        kernels: dict[str, list[sp.Expr]] = {"rhs": list(self.rhs)}
        companions = list(companions)
        derivs: list[DerivSpec] = []
        need: set[str] = set()
        D = None
        dsyms = self._deriv_symbols_used()
        if dsyms and {"jacobian", "divergence"} & set(companions):
            raise ValueError(
                "the Jacobian or divergence of a field that already uses derivatives of its "
                "solves' unknowns (a with_divergence() field) would need second derivatives"
            )
        if self._solve_specs and ({"jacobian", "divergence"} & set(companions) or dsyms):
            derivs, D = self.total_derivatives()
        if dsyms & set().union(*(sp.sympify(e).free_symbols for e in self.rhs)):
            need.add("rhs")
        if self.observables and dsyms & set().union(
            *(e.free_symbols for e in self.observables.values())
        ):
            need.add("observables")
        n = self.n_state
        for c in companions:
            if c == "jacobian":
                if D is None:
                    kernels[c] = list(self.jacobian())
                else:
                    kernels[c] = [D(f, j) for f in self.rhs for j in range(n)]
                    need.add(c)
            elif c == "divergence":
                if D is None:
                    kernels[c] = [self.divergence()]
                else:
                    kernels[c] = [sp.Add(*[D(f, i) for i, f in enumerate(self.rhs)])]
                    need.add(c)
            elif c == "observables":
                kernels[c] = list(self.observables.values())
            elif c in ("dHdq", "dHdp"):
                raise ValueError(f"companion {c!r} exists only for a HamiltonianSystem")
            else:
                raise ValueError(f"unknown companion {c!r}; known: {', '.join(COMPANIONS)}")
        return KernelSet(
            self.states, self.params, self.time, kernels, n_q=0,
            solves=self._solve_specs, derivs=derivs, needs_derivs=frozenset(need),
        )  # fmt: skip

    def _recipe_digests(self) -> list[str]:
        """Digests of what :meth:`kernel_set` derives the kernels from (no derivative taken)."""
        obs = self.observables
        base = KernelSet(
            self.states, self.params, self.time,
            {"rhs": list(self.rhs), "observables": list(obs.values())}, solves=self._solve_specs,
        )  # fmt: skip
        return [kernel_set_digest(base), f"observables={list(obs)!r}", f"split={self.split!r}"]

    def _kernel_sizes(self) -> dict[str, int]:
        """Outputs of each kernel family :meth:`kernel_set` may build."""
        n = self.n_state
        return {"rhs": n, "jacobian": n * n, "divergence": 1, "observables": len(self.observables)}

    def _kernel_recipe(self, companions: Sequence[str]) -> tuple[str, dict[str, Any]] | None:
        """First-level cache key and shape of ``kernel_set(companions)``, without building it.

        The key (:func:`nhfast._kernels.recipe_key`) hashes the field's description (states,
        params, time, rhs, observables, solves, split, name), the companions and the code
        that derives the kernels from them (this module): a warm process then loads the
        generated C without taking a derivative. None for a subclass that may derive its
        kernels otherwise, or for companions :meth:`kernel_set` rejects.
        """
        fingerprint = _derivation_fingerprint()
        if type(self) not in (VectorField, HamiltonianSystem) or fingerprint is None:
            return None
        sizes = self._kernel_sizes()
        comps = list(companions)
        if any(c not in sizes for c in comps) or len(set(comps)) != len(comps):
            return None
        order = [c for c in comps if c not in ("dHdq", "dHdp")]
        order += [c for c in ("dHdq", "dHdp") if c in comps]  # kernel_set's order
        n_out = {"rhs": sizes["rhs"], **{c: sizes[c] for c in order}}
        shape = {
            "n_out": n_out,
            "n_state": self.n_state,
            "params": tuple(self.params),
            "n_obs": n_out.get("observables", 0),
            "flags": sum(HAS[k] for k in n_out),
            "n_q": len(getattr(self, "q", ())) if type(self) is HamiltonianSystem else 0,
        }
        parts = [
            type(self).__qualname__,
            fingerprint,
            *self._recipe_digests(),
            f"companions={comps!r}",
        ]
        return recipe_key(parts, self.name), shape

    # ------------------------------------------------------------------- numeric ----
    def compile(self, companions: Iterable[str] = ("observables", "divergence")) -> CompiledSystem:
        """Generate, compile (or fetch from the cache) and load the kernels.

        Compiled kernels are kept for the life of the field: a later call asking for a
        subset of the companions gets the same :class:`~nhfast._kernels.CompiledSystem`.

        Parameters
        ----------
        companions : iterable of str
            Kernel families besides the vector field: any of ``"jacobian"``,
            ``"divergence"``, ``"observables"`` (and ``"dHdq"``, ``"dHdp"`` for a
            :class:`HamiltonianSystem`).

        Returns
        -------
        nhfast._kernels.CompiledSystem
        """
        wanted = frozenset(companions)
        built: dict[frozenset, CompiledSystem] = memo(self, "kernels", dict)
        for have, cs in list(built.items()):
            if wanted <= have:
                return cs
        for have, (source, meta) in list(shipped_kernels(self).items()):
            if wanted <= have:
                cs = load_shipped(self, have, source, meta)
                if cs is not None:
                    return built.setdefault(have, cs)
        comps = sorted(wanted)
        recipe = self._kernel_recipe(comps)
        if recipe is None:
            cs = compile_kernels(self.kernel_set(comps), self.name, input_check(self))
        else:
            key, shape = recipe
            cs = compile_recipe(
                key, shape, lambda: self.kernel_set(comps), self.name, input_check(self)
            )
        return built.setdefault(wanted, cs)

    def compile_taylor(self, order: int | None = None) -> CompiledSystem:
        """Generate, compile (or fetch from the cache) and load the Taylor kernel.

        The kernel gives the normalised Taylor coefficients of the solution through a state,
        from recurrences generated for the right-hand side's elementary operations (see
        :func:`nhfast.codegen.generate_taylor_c`); ``nhfast.integrate(...,
        method="taylor")`` uses it. Kept for the life of the field.

        Parameters
        ----------
        order : int, optional
            The order the integrator will ask for. For a small right-hand side (see
            :func:`nhfast.codegen.unroll_pays`) the kernel then also has a pass unrolled for
            that order, one library per order; otherwise, and without ``order``, the general
            kernel (any order).

        Returns
        -------
        nhfast._kernels.CompiledSystem
            With the kernel family ``"taylor"``.

        Raises
        ------
        ValueError
            If the right-hand side uses a function the Taylor method cannot expand.
        """
        general = memo(self, "taylor", lambda: compile_taylor(self._taylor_code(), self.name))
        if order is None or not unroll_pays(general.taylor_size, order):
            return general
        return memo(
            self,
            ("taylor", order),
            lambda: compile_taylor(self._taylor_code(), self.name, order=order),
        )

    def taylor_kernel_ready(self, order: int) -> CompiledSystem | None:
        """The Taylor kernel unrolled for ``order`` if this process or the kernel cache has it
        (loaded now), else None: never generates or compiles (see
        :func:`nhfast._fastpath.taylor_kernel`)."""
        got = peek(self, ("taylor", order))
        if got is not None:
            return got
        found = compile_taylor(self._taylor_code(), self.name, order=order, cached_only=True)
        if found is None:
            return None
        return memo(self, ("taylor", order), lambda: found)

    def _taylor_code(self) -> KernelSet | IndexedProgram:
        """What the Taylor kernel expands: the right-hand side and its solves."""
        return self.kernel_set(())

    # ---------------------------------------------------------------- pickling ----
    def __getstate__(self) -> dict[str, Any]:
        """The symbolic description and, for every kernel set compiled so far, its C source
        and metadata (see :func:`kernels_to_ship`): a worker that unpickles the field loads
        or compiles that source on first use instead of generating it again."""
        state = dict(self.__dict__)
        state["_shipped_kernels"] = kernels_to_ship(self, memo(self, "kernels", dict))
        # the event functions' libraries (nhfast.events.event_kernel), by their expressions
        events = dict(memo(self, "shipped_events", dict))
        for key, cs in memo(self, "event_sets", dict).items():
            if cs.backend == "c" and cs.source is not None:
                events[key] = (cs.source, cs.meta())
        if events:
            state["_shipped_events"] = events
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        shipped = state.pop("_shipped_kernels", {})
        events = state.pop("_shipped_events", {})
        self.__dict__.update(state)
        if shipped:
            memo(self, "shipped", dict).update(shipped)
        if events:
            memo(self, "shipped_events", dict).update(events)

    def evaluate(self, kind: str, x, t=0.0, params=None) -> np.ndarray:
        """Evaluate a kernel family (``"rhs"``, ``"jacobian"``, ...) at states ``x``.

        ``x`` has shape (..., n_state); the result has shape (..., n_out) (for the Jacobian
        (..., n_state, n_state)).
        """
        fams = () if kind == "rhs" else (kind,)
        return self.compile(fams).evaluate(kind, x, t=t, params=params)


@lru_cache(maxsize=1)
def _derivation_fingerprint() -> str | None:
    """Hash of this module's code (how the fields derive their kernels), or None if unreadable
    (then no recipe key: a stale source could be served)."""
    return _keys.code_fingerprint([Path(__file__)], strict=True)


#: Kernel sets as they travel with a pickled field: companions -> (C source, metadata).
Shipped = dict[frozenset, tuple[str, dict[str, Any]]]


def kernels_to_ship(owner: Any, built: Mapping[frozenset, CompiledSystem]) -> Shipped:
    """C source and metadata of the compiled kernel sets ``built`` of ``owner`` (those of
    the C backend; NumPy kernels are rebuilt from the symbolic description), with the sets
    ``owner`` itself received when it was unpickled and has not loaded yet."""
    out: Shipped = dict(memo(owner, "shipped", dict))
    for have, cs in built.items():
        if cs.backend == "c" and cs.source is not None:
            out[have] = (cs.source, cs.meta())
    return out


def shipped_kernels(owner: Any) -> Shipped:
    """The kernel sets ``owner`` received with its pickle (see :func:`kernels_to_ship`)."""
    return memo(owner, "shipped", dict)


def load_shipped(
    owner: VectorField, have: frozenset, source: str, meta: dict[str, Any]
) -> CompiledSystem | None:
    """Load (from this process's kernel cache) or compile a shipped kernel set of ``owner``.

    Returns None, and forgets the shipped set, when it cannot be used here (no C compiler,
    another ABI): the caller then generates the kernels from the symbolic description, which
    gives the NumPy backend with a ``BackendWarning`` when there is no compiler.
    """
    try:
        cs = load_compiled(source, meta)
    except CompilationError:
        shipped_kernels(owner).pop(have, None)
        return None
    cs.check = input_check(owner)
    shipped_kernels(owner).pop(have, None)
    return cs


def input_check(vf: VectorField) -> InputCheck:
    """``vf.check_inputs`` through a weak reference (compiled kernels are memoised on ``vf``)."""
    ref = weakref.WeakMethod(vf.check_inputs)

    def check(x: np.ndarray, params: np.ndarray, name: str) -> None:
        method = ref()
        if method is not None:
            method(x, params, name)

    return check


class HamiltonianSystem(VectorField):
    """Canonical Hamiltonian system q' = dH/dp, p' = -dH/dq.

    Parameters
    ----------
    q, p : sequence of sympy.Symbol
        Positions and conjugate momenta (same length).
    H : sympy.Expr
        The Hamiltonian.
    params : sequence of sympy.Symbol, optional
    observables : mapping of str to sympy.Expr, optional
        Extra observables; ``"energy"`` (= H) is always included.
    time : sympy.Symbol, optional
    name : str, optional
    """

    def __init__(
        self,
        q: Sequence[sp.Symbol],
        p: Sequence[sp.Symbol],
        H: sp.Expr,
        params: Sequence[sp.Symbol] = (),
        observables: Mapping[str, sp.Expr] | None = None,
        time: sp.Symbol | None = None,
        name: str = "hamiltonian",
    ) -> None:
        q = _symbols(q, "q")
        p = _symbols(p, "p")
        if len(q) != len(p) or not q:
            raise ValueError(
                f"q and p must be non-empty and of equal length, got {len(q)} and {len(p)}"
            )
        (H,) = _exprs([H], "H", ["H"])
        known = {*q, *p, *_symbols(params, "params"), *([time] if time is not None else [])}
        _check_symbols("H", [H], known)
        self.q, self.p, self.H = q, p, H
        rhs = [sp.diff(H, pi) for pi in p] + [-sp.diff(H, qi) for qi in q]
        obs = {"energy": H, **dict(observables or {})}
        super().__init__(
            states=[*q, *p],
            rhs=rhs,
            params=params,
            observables=obs,
            time=time,
            split=len(q),
            name=name,
        )

    def _recipe_digests(self) -> list[str]:
        ham = KernelSet(self.states, self.params, self.time, {"rhs": [self.H]}, n_q=len(self.q))
        return [*super()._recipe_digests(), kernel_set_digest(ham)]

    def _kernel_sizes(self) -> dict[str, int]:
        return {**super()._kernel_sizes(), "dHdq": len(self.q), "dHdp": len(self.p)}

    def kernel_set(self, companions: Iterable[str] = ()) -> KernelSet:
        plain = [c for c in companions if c not in ("dHdq", "dHdp")]
        ks = super().kernel_set(plain)
        kernels = dict(ks.kernels)
        if "dHdq" in companions:
            kernels["dHdq"] = [sp.diff(self.H, qi) for qi in self.q]
        if "dHdp" in companions:
            kernels["dHdp"] = [sp.diff(self.H, pi) for pi in self.p]
        return KernelSet(
            ks.states, ks.params, ks.time, kernels, n_q=len(self.q),
            solves=ks.solves, derivs=ks.derivs, needs_derivs=ks.needs_derivs,
        )  # fmt: skip
