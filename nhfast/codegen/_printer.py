"""C99 printing shared by the kernel generators: expression printer, preamble and banner.

Every generated library starts with :func:`banner` (generator, versions, system, a hash of
the SymPy input, how to regenerate it, and a legend from C names to the user's symbols) and
:func:`preamble` (the shipped ABI header instead of local definitions).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from importlib import metadata

import sympy as sp
from sympy.printing.c import C99CodePrinter

from nhfast._abi import ABI_VERSION, FLAG_MACRO, SYMBOL

__all__: list[str] = []

#: Constants SymPy's C printer may emit that C99 does not define.
_MATH_CONSTANTS = {
    "M_PI": "3.14159265358979323846",
    "M_E": "2.71828182845904523536",
    "M_SQRT2": "1.41421356237309504880",
    "M_LN2": "0.69314718055994530942",
    "M_LN10": "2.30258509299404568402",
    "M_1_PI": "0.31830988618379067154",
    "M_2_PI": "0.63661977236758134308",
    "M_PI_2": "1.57079632679489661923",
    "M_PI_4": "0.78539816339744830962",
    "M_SQRT1_2": "0.70710678118654752440",
    "M_2_SQRTPI": "1.12837916709551257390",
}


class CPrinter(C99CodePrinter):
    """C99 printer that expands small integer powers into products."""

    def __init__(self) -> None:
        super().__init__({"strict": True})

    def _print_Pow(self, expr: sp.Pow) -> str:
        base, exp = expr.args
        if exp.is_Integer and 1 < abs(int(exp)) <= 8:
            factor = f"({self._print(base)})"
            prod = "*".join([factor] * abs(int(exp)))
            return f"({prod})" if exp > 0 else f"(1.0/({prod}))"
        if exp == -1:
            return f"(1.0/({self._print(base)}))"
        if exp == sp.Rational(-1, 2):
            return f"(1.0/sqrt({self._print(base)}))"
        return super()._print_Pow(expr)


def unprintable(exprs: Iterable[sp.Expr]) -> list[str]:
    """The functions of ``exprs`` that C99 (this printer) cannot write, e.g. ``besselj``:
    looked up among the printer's known functions and print methods (nothing is printed)."""
    printer = _probe_printer()
    bad = set()
    for e in exprs:
        for f in sp.sympify(e).atoms(sp.Function):
            name = type(f).__name__
            if name in printer.known_functions:
                continue
            if any(hasattr(printer, f"_print_{c.__name__}") for c in type(f).__mro__[:-1]
                   if c.__name__ not in ("Function", "Application", "Expr", "Basic")):  # fmt: skip
                continue
            bad.add(name)
    return sorted(bad)


@lru_cache(maxsize=1)
def _probe_printer() -> CPrinter:
    return CPrinter()


def preamble(*headers: str) -> str:
    """Includes of a kernel library: C headers, the shipped ``nh_abi.h`` and ``headers``.

    The library refuses to compile against an ``nh_abi.h`` of another ABI version than the
    one it was generated for.
    """
    lines = ["#include <math.h>", "#include <stdint.h>", "#include <stdlib.h>"]
    lines += ['#include "nh_abi.h"', *[f'#include "{h}"' for h in headers]]
    lines += [
        f"#if NH_ABI_VERSION != {ABI_VERSION}",
        f'#error "generated for nhfast kernel ABI {ABI_VERSION}: regenerate this file"',
        "#endif",
    ]
    for name, value in _MATH_CONSTANTS.items():
        lines += [f"#ifndef {name}", f"#define {name} {value}", "#endif"]
    return "\n".join(lines) + "\n"


def flags_expr(families: Iterable[str]) -> str:
    """The ``NH_HAS_*`` bits of ``families`` as a C expression (``0`` for none)."""
    macros = [FLAG_MACRO[f] for f in families]
    return " | ".join(macros) if macros else "0"


def info_table(n_state: int, n_params: int, n_obs: int, families: Iterable[str], n_q: int) -> str:
    """The exported ``nh_info`` of a library, in ``NH_INFO_*`` order."""
    entries = ["NH_ABI_VERSION", str(n_state), str(n_params), str(n_obs), flags_expr(families)]
    entries.append(str(n_q))
    return (
        f"static const int64_t nh_info_data[NH_INFO_LEN] = {{{', '.join(entries)}}};\n"
        "NH_EXPORT const int64_t *nh_info(void) { return nh_info_data; }\n"
    )


def kernel_head(family: str, symbol: str = "") -> list[str]:
    """First lines of the exported function of kernel ``family`` (signature, size check).

    ``symbol`` overrides the exported name (default: the family's ``SYMBOL``).
    """
    return [
        f"NH_EXPORT int {symbol or SYMBOL[family]}(void *ctx, const double *restrict t, "
        "const double *restrict x, const double *restrict par, double *restrict out, "
        "int64_t nlanes, int64_t ld) {",
        "    (void)ctx; (void)t; (void)x; (void)par;",
        "    if (nlanes < 0 || ld < nlanes) return NH_ERR_SIZE;",
    ]


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def _comment_safe(text: str) -> str:
    """``text`` on one line, unable to end or nest the C comment it is printed in."""
    text = repr(str(text))[1:-1]  # no newlines; backslashes doubled
    return text.replace("*/", "* /").replace("/*", "/ *")


def banner(
    *,
    generator: str,
    regenerate: str,
    digest: str,
    legend: Sequence[tuple[str, object]],
    provenance: Mapping[str, object] | None = None,
    details: str = "",
) -> str:
    """The comment at the top of a generated library.

    Parameters
    ----------
    generator : str
        The function that wrote the file (``"nhfast.codegen.generate_c"``).
    regenerate : str
        How to get the file again.
    digest : str
        :func:`nhfast._keys.expression_digest` of the SymPy input.
    legend : sequence of (str, object)
        C name (``"nh_x0 = x[0]"``) and the user's symbol it stands for.
    provenance : mapping, optional
        ``"system"``: name of the system the kernels belong to.
    details : str
        One more line about the kernels (shape, sizes).
    """
    system = (provenance or {}).get("system", "unnamed")
    width = max((len(c) for c, _ in legend), default=0)
    lines = [
        f"Generated by nhfast {_version('nhfast')} ({generator}) with SymPy {sp.__version__};"
        f" kernel ABI {ABI_VERSION}.",
        f"System: {system}",
        f"Input hash (sha256 of the SymPy input): {digest}",
        f"A build artefact: do not edit; regenerate with {regenerate}.",
    ]
    if details:
        lines.append(details)
    lines.append("Legend (C name: symbol):")
    lines += [f"  {c.ljust(width)} : {sym}" for c, sym in legend]
    body = "\n".join(f" * {_comment_safe(line)}".rstrip() for line in lines)
    return f"/*\n{body}\n */\n"
