"""The kernel ABI in Python: constants read from the compiled core, never retyped.

``nhfast/codegen/include/nh_abi.h`` (kernel ABI) and ``csrc/nh_core.h`` (methods, statistics)
are the only definitions; :mod:`nhfast._core` exports their values and this module gives
them the names the rest of the package uses. ``tests/core/test_abi.py`` parses the headers
and checks both.
"""

from __future__ import annotations

from pathlib import Path

from nhfast import _core

__all__ = [
    "ABI_VERSION",
    "ADAPTIVE",
    "ERR",
    "FLAG_MACRO",
    "HAS",
    "INCLUDE_DIR",
    "INFO",
    "INFO_LEN",
    "LANE",
    "METHODS",
    "STATS",
    "STATUS",
    "STIFF",
    "SYMBOL",
    "TAYLOR_MAX_ORDER",
    "DERIVED_COUNT_SYMBOL",
    "DERIVE_SYMBOL",
    "RHS_DERIVED_SYMBOL",
]

#: Directory of the shipped C headers (``nh_abi.h``, ``linalg.h``) that generated kernels
#: include; the compile command gets ``-I`` of it and the cache key hashes its headers.
INCLUDE_DIR = Path(__file__).resolve().parent / "codegen" / "include"

#: ``NH_ABI_VERSION``: the version a kernel library reports in its info array.
ABI_VERSION: int = _core.ABI_VERSION
#: Length of a kernel library's info array, and the index of each entry (``NH_INFO_*``).
INFO_LEN: int = _core.INFO_LEN
INFO: dict[str, int] = dict(_core.INFO)
#: Kernel return codes: ``"ok"`` (``NH_OK``) and the negative ``NH_ERR_*``.
ERR: dict[str, int] = dict(_core.ERR)
#: Per-lane integration status ``NH_LANE_*``: ``"ok"``, ``"nonfinite"``, ``"step_underflow"``,
#: ``"max_steps"``, ``"not_converged"``, ``"interrupted"``, ``"stiff"``, ``"left_domain"``.
LANE: dict[str, int] = dict(_core.LANE)

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
HAS: dict[str, int] = {family: _core.HAS[c.lower()] for family, c in _FLAG.items()}
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
TAYLOR_MAX_ORDER: int = _core.TAYLOR_MAX_ORDER

#: Integration method name -> ``enum nh_method`` code.
METHODS: dict[str, int] = dict(_core.METHOD)
#: Methods with adaptive step-size control (``NH_ADAPTIVE_MASK``).
ADAPTIVE: frozenset[str] = frozenset(
    name for name, code in METHODS.items() if (_core.ADAPTIVE_MASK >> code) & 1
)
#: Per-lane status code -> message.
STATUS: dict[int, str] = {
    LANE["ok"]: "ok",
    LANE["nonfinite"]: "non-finite state",
    LANE["step_underflow"]: "step size underflow",
    LANE["max_steps"]: "maximum number of steps reached",
    LANE["not_converged"]: "implicit stage equations did not converge",
    LANE["interrupted"]: "interrupted before the end (the run was stopped by a signal)",
    LANE["stiff"]: "the problem became stiff (Hairer's stiffness test)",
    LANE["left_domain"]: "left its domain (a condition expr > 0 of the system's domain failed)",
}
#: Hairer's stiffness test (``NH_STIFF_*`` in nh_core.h): ``"positives"`` estimates of
#: h|lambda| above the method's stability bound declare a trajectory stiff; ``"reset"``
#: consecutive ones below reset the count.
STIFF: dict[str, int] = dict(_core.STIFF)
#: Names of the per-lane statistics, in the column order of the core (``NH_STAT_*``).
STATS: tuple[str, ...] = tuple(
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
)
