"""Generate the C99 kernel library of a :class:`KernelSet` from its SymPy expressions.

Each kernel family (``rhs``, ``jacobian``, ...) becomes one exported function of the kernel
ABI (``nh_abi.h``): a loop over the lanes of a block in struct-of-arrays layout,
with one joint common-subexpression elimination over all outputs of the family. The order of
the arguments comes only from the caller's lists of states and parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import sympy as sp

from nhfast._abi import (
    DERIVE_SYMBOL,
    DERIVED_COUNT_SYMBOL,
    HAS,
    RHS_DERIVED_SYMBOL,
    SYMBOL,
)
from nhfast._keys import expression_digest
from nhfast.codegen._printer import (
    CPrinter,
    banner,
    info_table,
    kernel_head,
    preamble,
)
from nhfast.codegen.hoist import hoist_parameters

__all__ = [
    "KernelSet",
    "generate_c",
]


@dataclass(frozen=True)
class SolveSpec:
    """Auxiliary unknowns u with ``matrix * u = rhs``, solved numerically in the kernel.

    ``matrix`` (row-major, r*r entries) and ``rhs`` may use states, params, time and the
    unknowns of earlier solves. ``spd`` selects Cholesky (symmetric positive definite) over
    LU with partial pivoting.
    """

    unknowns: tuple[sp.Symbol, ...]
    matrix: tuple[sp.Expr, ...]
    rhs: tuple[sp.Expr, ...]
    spd: bool = True

    @property
    def r(self) -> int:
        return len(self.unknowns)


@dataclass(frozen=True)
class DerivSpec:
    """Derivatives du/dx_j of a solve's unknowns: ``matrix * du[:, j] = columns[j]``.

    ``symbols[a][j]`` stands for du_a/dx_j in the expressions of later phases.
    """

    symbols: tuple[tuple[sp.Symbol, ...], ...]
    columns: tuple[tuple[sp.Expr, ...], ...]


@dataclass
class KernelSet:
    """The expressions of one system, ready to be turned into kernels.

    Parameters
    ----------
    states, params : sequence of sympy.Symbol
        Argument order of the state and parameter vectors.
    time : sympy.Symbol or None
        Symbol of the time variable, if any expression depends on it.
    kernels : mapping of str to sequence of sympy.Expr
        Output expressions of each kernel family (keys from ``nhfast._abi.SYMBOL``).
    n_q : int
        Number of positions for Hamiltonian systems (0 otherwise).
    solves : sequence of SolveSpec
        Linear systems solved, in order, before the outputs are computed.
    derivs : sequence of DerivSpec, optional
        One per solve: the derivative solves needed by the kernels in ``needs_derivs``.
    needs_derivs : frozenset of str
        Kernel families whose expressions use the derivative symbols.
    """

    states: Sequence[sp.Symbol]
    params: Sequence[sp.Symbol]
    time: sp.Symbol | None
    kernels: Mapping[str, Sequence[sp.Expr]]
    n_q: int = 0
    solves: Sequence[SolveSpec] = ()
    derivs: Sequence[DerivSpec] = ()
    needs_derivs: frozenset = frozenset()
    n_obs: int = field(init=False)

    def __post_init__(self) -> None:
        unknown = set(self.kernels) - set(SYMBOL)
        if unknown:
            raise ValueError(f"unknown kernel families {sorted(unknown)}; known: {sorted(SYMBOL)}")
        if self.needs_derivs and len(self.derivs) != len(self.solves):
            raise ValueError("derivs must hold one DerivSpec per solve")
        self.n_obs = len(self.kernels.get("observables", ()))

    @property
    def flags(self) -> int:
        return sum(HAS[k] for k in self.kernels)

    def phases(self, name: str) -> list[tuple[str, int]]:
        """Order of the work in kernel ``name``: ("solve", k), ("deriv", k), ("out", -1)."""
        plan: list[tuple[str, int]] = []
        for k in range(len(self.solves)):
            plan.append(("solve", k))
            if name in self.needs_derivs:
                plan.append(("deriv", k))
        plan.append(("out", -1))
        return plan


class _Workspace:
    """Offsets (in units of nlanes doubles) of the solve buffers inside a kernel."""

    def __init__(self, ks: KernelSet, with_derivs: bool) -> None:
        n = len(ks.states)
        self.mat: list[int] = []
        self.vec: list[int] = []
        self.der: list[int] = []
        self.piv: list[int] = []
        off = 0
        npiv = 0
        for sv in ks.solves:
            self.mat.append(off)
            off += sv.r * sv.r
            self.vec.append(off)
            off += sv.r
            self.der.append(off)
            off += n * sv.r if with_derivs else 0
            self.piv.append(npiv)
            npiv += 0 if sv.spd else sv.r
        self.size = off
        self.npiv = npiv


def _symbol_loads(
    ks: KernelSet, ws: _Workspace | None, phase: tuple[str, int], derivs: bool
) -> dict:
    """Symbols known at a phase of a kernel: symbol -> (C local name, C expression at lane l)."""
    loads: dict[sp.Symbol, tuple[str, str]] = {}
    if ks.time is not None:
        loads[ks.time] = ("nh_t", "t[l]")
    for i, s in enumerate(ks.states):
        loads[s] = (f"nh_x{i}", f"x[{i} * ld + l]")
    for k, s in enumerate(ks.params):
        loads[s] = (f"nh_p{k}", f"par[{k} * ld + l]")
    if ws is None:
        return loads
    kind, at = phase
    nsolve = len(ks.solves)
    known_u = {"solve": at, "deriv": at + 1}.get(kind, nsolve)  # solves whose unknowns are known
    known_d = at if kind in ("solve", "deriv") else nsolve  # solves whose derivatives are known
    n = len(ks.states)
    for k in range(known_u):
        sv = ks.solves[k]
        for a, u in enumerate(sv.unknowns):
            loads[u] = (f"nh_u{k}_{a}", f"nh_ws[({ws.vec[k]} + {a}) * L + l]")
    if derivs:
        for k in range(known_d):
            r = ks.solves[k].r
            for a in range(r):
                for j in range(n):
                    loads[ks.derivs[k].symbols[a][j]] = (
                        f"nh_d{k}_{a}_{j}",
                        f"nh_ws[({ws.der[k]} + {j * r + a}) * L + l]",
                    )
    return loads


def _lane_loop(
    targets: Sequence[str], exprs: Sequence[sp.Expr], loads: dict, printer: CPrinter, what: str
) -> list[str]:
    """A loop over lanes assigning ``targets[j] = exprs[j]`` with one joint CSE."""
    exprs = [sp.sympify(e) for e in exprs]
    repl, reduced = sp.cse(exprs, symbols=sp.numbered_symbols("nh_c"), order="none")
    used: set[sp.Symbol] = set()
    for e in reduced:
        used |= e.free_symbols
    for _, e in repl:
        used |= e.free_symbols
    unknown = {s for s in used if not str(s).startswith("nh_c")} - set(loads)
    if unknown:
        names = ", ".join(sorted(map(str, unknown)))
        raise ValueError(f"{what} uses symbols that are not known there: {names}")
    names = {s: sp.Symbol(loads[s][0]) for s in used if s in loads}
    body = [f"        const double {names[s]} = {loads[s][1]};" for s in loads if s in names]
    for sym, e in repl:
        body.append(f"        const double {sym} = {printer.doprint(e.xreplace(names))};")
    for tgt, e in zip(targets, reduced, strict=True):
        code = "0.0" if e == 0 else printer.doprint(sp.sympify(e).xreplace(names))
        body.append(f"        {tgt} = {code};")
    return ["    for (int64_t l = 0; l < nlanes; ++l) {", *body, "    }"]


def _kernel_source(
    name: str, exprs: Sequence[sp.Expr], ks: KernelSet, printer: CPrinter, symbol: str = ""
) -> str:
    """One exported kernel: solve phases, then a loop over lanes for the outputs."""
    use_ws = bool(ks.solves)
    ws = _Workspace(ks, name in ks.needs_derivs) if use_ws else None
    n = len(ks.states)
    lines = kernel_head(name, symbol)
    if ws is not None:
        lines += [
            "    if (nlanes == 0) return NH_OK;",
            "    const int64_t L = nlanes;",
            f"    double *nh_ws = (double *)malloc(sizeof(double) * (size_t)({ws.size} * L));",
            "    int64_t *nh_piv = (int64_t *)malloc(sizeof(int64_t) * "
            f"(size_t)({ws.npiv} * L + 1));",
            "    if (!nh_ws || !nh_piv) { free(nh_ws); free(nh_piv); return NH_ERR_NOMEM; }",
        ]
    for kind, k in ks.phases(name):
        loads = _symbol_loads(ks, ws, (kind, k), name in ks.needs_derivs)
        if kind == "solve":
            sv = ks.solves[k]
            r = sv.r
            mat = f"nh_ws + {ws.mat[k]} * L"
            vec = f"nh_ws + {ws.vec[k]} * L"
            targets = [f"nh_ws[({ws.mat[k]} + {e}) * L + l]" for e in range(r * r)]
            targets += [f"nh_ws[({ws.vec[k]} + {a}) * L + l]" for a in range(r)]
            lines.append(f"    /* linear solve {k}: {r} unknowns */")
            lines += _lane_loop(targets, [*sv.matrix, *sv.rhs], loads, printer, f"solve {k}")
            if sv.spd:
                lines.append(f"    nh_chol_factor({r}, L, {mat});")
                lines.append(f"    nh_chol_solve({r}, L, {mat}, {vec});")
            else:
                piv = f"nh_piv + {ws.piv[k]} * L"
                lines.append(f"    nh_lu_factor({r}, L, {mat}, {piv});")
                lines.append(f"    nh_lu_solve({r}, L, {mat}, {piv}, {vec});")
        elif kind == "deriv":
            sv = ks.solves[k]
            r = sv.r
            cols = ks.derivs[k].columns
            targets = [
                f"nh_ws[({ws.der[k]} + {j * r + a}) * L + l]" for j in range(n) for a in range(r)
            ]
            exprs_d = [cols[j][a] for j in range(n) for a in range(r)]
            lines.append(f"    /* derivatives of the unknowns of solve {k} */")
            lines += _lane_loop(targets, exprs_d, loads, printer, f"derivatives of solve {k}")
            mat = f"nh_ws + {ws.mat[k]} * L"
            for j in range(n):
                col = f"nh_ws + ({ws.der[k]} + {j * r}) * L"
                if sv.spd:
                    lines.append(f"    nh_chol_solve({r}, L, {mat}, {col});")
                else:
                    lines.append(
                        f"    nh_lu_solve({r}, L, {mat}, nh_piv + {ws.piv[k]} * L, {col});"
                    )
        else:
            targets = [f"out[{j} * ld + l]" for j in range(len(exprs))]
            lines += _lane_loop(targets, exprs, loads, printer, f"kernel {name!r}")
    if ws is not None:
        lines += ["    free(nh_ws);", "    free(nh_piv);"]
    lines += ["    return NH_OK;", "}", ""]
    return "\n".join(lines)


def _derived_split(ks: KernelSet) -> tuple[KernelSet, list[tuple[sp.Symbol, sp.Expr]]] | None:
    """The right-hand side on derived parameters (see :mod:`nhfast.codegen.hoist`), if any.

    Returns the kernel set of the variant (parameters extended by the derived symbols, the
    rhs family alone, its solves rewritten) and the derived symbols with their expressions;
    None when the rhs has no sub-expression of the parameters alone worth lifting.
    """
    if "rhs" not in ks.kernels or not ks.params or "rhs" in ks.needs_derivs:
        return None
    groups = [g for sv in ks.solves for g in (sv.matrix, sv.rhs)]
    groups.append(ks.kernels["rhs"])
    new, derived = hoist_parameters(groups, ks.params)
    if not derived:
        return None
    solves = [
        SolveSpec(sv.unknowns, tuple(new[2 * k]), tuple(new[2 * k + 1]), sv.spd)
        for k, sv in enumerate(ks.solves)
    ]
    variant = KernelSet(
        states=ks.states,
        params=[*ks.params, *(s for s, _ in derived)],
        time=ks.time,
        kernels={"rhs": new[-1]},
        n_q=ks.n_q,
        solves=solves,
    )
    return variant, derived


def _derived_sources(
    ks: KernelSet,
    variant: KernelSet,
    derived: Sequence[tuple[sp.Symbol, sp.Expr]],
    printer: CPrinter,
) -> list[str]:
    """``nh_derive``, ``nh_rhs_derived`` and ``nh_rhs`` (the derive-then-evaluate wrapper)."""
    npar, nd = len(ks.params), len(derived)
    loads = _symbol_loads(ks, None, ("out", -1), False)
    targets = [f"out[{j} * ld + l]" for j in range(nd)]
    derive = kernel_head("rhs", DERIVE_SYMBOL)
    derive += _lane_loop(targets, [e for _, e in derived], loads, printer, "derived parameters")
    derive += ["    return NH_OK;", "}", ""]
    fixed = _kernel_source("rhs", variant.kernels["rhs"], variant, printer, RHS_DERIVED_SYMBOL)
    wrapper = kernel_head("rhs") + [
        "    /* parameters extended by the derived ones, then the right-hand side on them */",
        "    if (nlanes == 0) return NH_OK;",
        f"    double *pe = (double *)malloc(sizeof(double) * (size_t)({npar + nd} * ld));",
        "    if (!pe) return NH_ERR_NOMEM;",
        f"    for (int64_t k = 0; k < {npar}; ++k)",
        "        for (int64_t l = 0; l < nlanes; ++l) pe[k * ld + l] = par[k * ld + l];",
        f"    int rc = {DERIVE_SYMBOL}(ctx, t, x, pe, pe + {npar} * ld, nlanes, ld);",
        f"    if (rc == NH_OK) rc = {RHS_DERIVED_SYMBOL}(ctx, t, x, pe, out, nlanes, ld);",
        "    free(pe);",
        "    return rc;",
        "}",
        "",
    ]
    count = (
        f"static const int64_t nh_derived_rows = {nd};\n"
        f"NH_EXPORT int64_t {DERIVED_COUNT_SYMBOL}(void) {{ return nh_derived_rows; }}\n"
    )
    return [count, "\n".join(derive), fixed, "\n".join(wrapper)]


def _legend(ks: KernelSet) -> list[tuple[str, object]]:
    """C names of the kernels' inputs and of the solves' unknowns -> the user's symbols."""
    legend: list[tuple[str, object]] = []
    if ks.time is not None:
        legend.append(("nh_t = t", ks.time))
    legend += [(f"nh_x{i} = x[{i}]", s) for i, s in enumerate(ks.states)]
    legend += [(f"nh_p{k} = par[{k}]", s) for k, s in enumerate(ks.params)]
    for k, sv in enumerate(ks.solves):
        legend += [(f"nh_u{k}_{a}", u) for a, u in enumerate(sv.unknowns)]
    return legend


def _input(ks: KernelSet) -> list[object]:
    """Everything of ``ks`` the generated source depends on, flat (for the input hash)."""
    items: list[object] = ["states", *ks.states, "params", *ks.params, "time", ks.time]
    for name, exprs in ks.kernels.items():
        items += [name, len(exprs), *exprs]
    items += ["n_q", ks.n_q, "needs_derivs", sorted(ks.needs_derivs)]
    for sv in ks.solves:
        items += ["solve", sv.spd, *sv.unknowns, *sv.matrix, *sv.rhs]
    for dv in ks.derivs:
        items += ["deriv", *[s for row in dv.symbols for s in row]]
        items += [e for col in dv.columns for e in col]
    return items


def kernel_set_digest(ks: KernelSet) -> str:
    """SHA-256 of everything of ``ks`` its generated source depends on (the banner's input hash).

    Cheap next to :func:`generate_c` (no CSE, no printing): a cache of generated sources
    can be keyed on it.
    """
    return expression_digest(_input(ks))


def generate_c(ks: KernelSet, provenance: Mapping[str, object] | None = None) -> str:
    """Return the C99 source of the kernel library for ``ks``.

    Parameters
    ----------
    ks : KernelSet
        The expressions.
    provenance : mapping, optional
        Shown in the banner of the source: ``"system"``, the name of the system.

    Returns
    -------
    str
        The source: a banner comment (versions, system, input hash, legend of the C names),
        ``#include "nh_abi.h"`` (and ``linalg.h`` with solves; both ship in
        ``nhfast/codegen/include``), ``nh_info`` and one exported function per family. When
        the rhs has sub-expressions of the parameters alone, also ``nh_derive`` (the derived
        parameters), ``nh_rhs_derived`` (the rhs reading them after the parameters) and
        ``nh_derived_count`` (see ``nh_abi.h``); ``nh_rhs`` keeps the plain contract.

    Raises
    ------
    ValueError
        If an expression contains a function that has no C equivalent, or a symbol that is
        not known where it is used.
    """
    printer = CPrinter()
    sizes = ", ".join(f"{SYMBOL[name]} ({len(e)} outputs)" for name, e in ks.kernels.items())
    parts = [
        banner(
            generator="nhfast.codegen.generate_c",
            regenerate="nhfast.codegen.generate_c(kernel_set), e.g. through the system's compile()",
            digest=kernel_set_digest(ks),
            legend=_legend(ks),
            provenance=provenance,
            details=f"Kernels: {sizes}; {len(ks.solves)} linear solves.",
        ),
        preamble(*(["linalg.h"] if ks.solves else [])),
        info_table(len(ks.states), len(ks.params), ks.n_obs, ks.kernels, ks.n_q),
    ]
    split = _derived_split(ks)
    for name, exprs in ks.kernels.items():
        try:
            if name == "rhs" and split is not None:
                parts += _derived_sources(ks, *split, printer)
            else:
                parts.append(_kernel_source(name, exprs, ks, printer))
        except NotImplementedError as exc:  # PrintMethodNotImplementedError
            raise ValueError(f"kernel {name!r}: expression has no C equivalent: {exc}") from exc
    return "\n".join(parts)
