"""The kernel ABI in Python: constants read from the C headers, never retyped.

``nhfast/codegen/include/nh_abi.h`` (kernel ABI) and ``csrc/nh_core.h`` (methods, statistics,
the core's own status codes) are the only definitions. The kernel ABI is read from the shipped
``nh_abi.h`` itself, so the code generators (:mod:`nhfast.codegen`) and the symbolic layer
import without the compiled core; the core's constants (``METHODS``, ``ADAPTIVE``, ``STATS``,
``STIFF``, and ``ERR``, ``LANE``, ``STATUS``, which add the core's codes to the kernels') come
from :mod:`nhfast._core` on first use. ``tests/core/test_abi.py`` parses the headers and checks
both.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

__all__: list[str] = []

#: Directory of the shipped C headers (``nh_abi.h``, ``linalg.h``) that generated kernels
#: include; the compile command gets ``-I`` of it and the cache key hashes its headers.
INCLUDE_DIR = Path(__file__).resolve().parent / "codegen" / "include"

_DEFINE = re.compile(r"^#define\s+(NH_\w+)\s+\(?(-?\d+)\)?\s*(?:/\*.*)?$", re.MULTILINE)


def _kernel_abi() -> dict[str, int]:
    """Every integer ``#define NH_* value`` of the shipped ``nh_abi.h``."""
    text = (INCLUDE_DIR / "nh_abi.h").read_text(encoding="utf-8")
    return {name: int(value) for name, value in _DEFINE.findall(text)}


def _group(defines: dict[str, int], prefix: str, skip: tuple[str, ...] = ()) -> dict[str, int]:
    """``{"name": value}`` of the macros ``NH_<prefix>_<NAME>``, lower-cased, in value order."""
    found = {
        k[len(prefix) :].lower(): v
        for k, v in defines.items()
        if k.startswith(prefix) and k[len(prefix) :] not in skip
    }
    return dict(sorted(found.items(), key=lambda kv: abs(kv[1])))


_KERNEL = _kernel_abi()
#: ``NH_ABI_VERSION``: the version a kernel library reports in its info array.
ABI_VERSION: int = _KERNEL["NH_ABI_VERSION"]
#: Length of a kernel library's info array, and the index of each entry (``NH_INFO_*``).
INFO_LEN: int = _KERNEL["NH_INFO_LEN"]
INFO: dict[str, int] = _group(_KERNEL, "NH_INFO_", skip=("LEN",))
#: Kernel return codes: ``"ok"`` (``NH_OK``) and the negative ``NH_ERR_*`` of the kernel ABI
#: (:data:`ERR` adds the core's).
KERNEL_ERR: dict[str, int] = {"ok": _KERNEL["NH_OK"], **_group(_KERNEL, "NH_ERR_")}

#: Kernel family -> suffix of its ``NH_HAS_*`` flag and of its key in ``_core.HAS``.
_FLAG = {
    "rhs": "RHS",
    "jacobian": "JAC",
    "divergence": "DIV",
    "observables": "OBS",
    "dHdq": "DHDQ",
    "dHdp": "DHDP",
    "taylor": "TAYLOR",
}
#: Bits of the ``flags`` entry of a kernel library's info array, per kernel family.
HAS: dict[str, int] = {family: _KERNEL[f"NH_HAS_{c}"] for family, c in _FLAG.items()}
#: C macro of each family's bit, for generated sources (``NH_HAS_RHS`` ...).
FLAG_MACRO: dict[str, str] = {family: f"NH_HAS_{c}" for family, c in _FLAG.items()}
#: Exported C symbol of each kernel family.
SYMBOL: dict[str, str] = {family: f"nh_{family}" for family in _FLAG}

#: Optional exports of a library whose right-hand side reads derived parameters (see
#: ``nh_abi.h``): their count, the kernel computing them, and the rhs on the extended block.
DERIVED_COUNT_SYMBOL = "nh_derived_count"
DERIVE_SYMBOL = "nh_derive"
RHS_DERIVED_SYMBOL = "nh_rhs_derived"

#: ``NH_TAYLOR_MAX_ORDER``: the largest order of the Taylor method (its kernel's ``order``).
TAYLOR_MAX_ORDER: int = _KERNEL["NH_TAYLOR_MAX_ORDER"]

#: The core's constants, resolved from :mod:`nhfast._core` on first use (module
#: ``__getattr__``): a missing or broken core fails there, with the import's own error.
_CORE_NAMES = ("METHODS", "ADAPTIVE", "ERR", "LANE", "STATUS", "STIFF", "STATS")


@cache
def _core_constants() -> dict[str, Any]:
    from nhfast import _core

    lane = dict(_core.LANE)
    methods = dict(_core.METHOD)
    return {
        #: Integration method name -> ``enum nh_method`` code.
        "METHODS": methods,
        #: Methods with adaptive step-size control (``NH_ADAPTIVE_MASK``).
        "ADAPTIVE": frozenset(
            name for name, code in methods.items() if (_core.ADAPTIVE_MASK >> code) & 1
        ),
        #: Return codes: the kernels' (:data:`KERNEL_ERR`) and the core's (``interrupted``).
        "ERR": dict(_core.ERR),
        #: Per-lane integration status ``NH_LANE_*``: ``"ok"``, ``"nonfinite"``,
        #: ``"step_underflow"``, ``"max_steps"``, ``"not_converged"``, ``"interrupted"``,
        #: ``"stiff"``, ``"left_domain"``.
        "LANE": lane,
        #: Per-lane status code -> message.
        "STATUS": {
            lane["ok"]: "ok",
            lane["nonfinite"]: "non-finite state",
            lane["step_underflow"]: "step size underflow",
            lane["max_steps"]: "maximum number of steps reached",
            lane["not_converged"]: "implicit stage equations did not converge",
            lane["interrupted"]: "interrupted before the end (the run was stopped by a signal)",
            lane["stiff"]: "the problem became stiff (Hairer's stiffness test)",
            lane["left_domain"]: (
                "left its domain (a condition expr > 0 of the system's domain failed)"
            ),
        },
        #: Hairer's stiffness test (``NH_STIFF_*`` in nh_core.h): ``"positives"`` estimates of
        #: h|lambda| above the method's stability bound declare a trajectory stiff;
        #: ``"reset"`` consecutive ones below reset the count.
        "STIFF": dict(_core.STIFF),
        #: Names of the per-lane statistics, in the column order of the core (``NH_STAT_*``).
        "STATS": tuple(
            name
            for _, name in sorted(
                (_core.STAT[c], name)
                for c, name in (
                    ("steps", "steps"),
                    ("rhs", "rhs_evals"),
                    ("rejected", "rejected"),
                    ("iter", "iterations"),
                )
            )
        ),
    }


if TYPE_CHECKING:  # the core's constants, for type checkers (values: _core_constants)
    METHODS: dict[str, int]
    ADAPTIVE: frozenset[str]
    ERR: dict[str, int]
    LANE: dict[str, int]
    STATUS: dict[int, str]
    STIFF: dict[str, int]
    STATS: tuple[str, ...]


def __getattr__(name: str) -> Any:
    if name in _CORE_NAMES:
        return _core_constants()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
