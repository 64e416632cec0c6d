"""The kernel ABI has one definition: the C headers. Python reads it, never retypes it.

The shipped ``nh_abi.h`` and ``csrc/nh_core.h`` are parsed here with regular expressions and
compared with what the compiled core exports and with the names ``nhfast._abi`` gives them,
so a constant changed or added on one side only fails this test.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from references.veselova_hand import veselova_program

import nhfast as nh
from nhfast import _abi, _core
from nhfast.codegen import KernelSet, generate_c, generate_structured_c

ROOT = Path(__file__).resolve().parents[2]
ABI_H = _abi.INCLUDE_DIR / "nh_abi.h"
CORE_H = ROOT / "csrc" / "nh_core.h"

_DEFINE = re.compile(r"^#define\s+(NH_\w+)\s+(.+?)\s*(?:/\*.*)?$", re.MULTILINE)
_ENUM = re.compile(r"enum\s+nh_method\s*\{(.*?)\}", re.DOTALL)
_ENTRY = re.compile(r"(NH_\w+)\s*=\s*(-?\d+)")


def header_constants(*paths: Path) -> dict[str, int]:
    """Every integer ``#define NH_*`` and enum entry of the headers (macros evaluated)."""
    values: dict[str, int] = {}
    for path in paths:
        text = path.read_text()
        enum = _ENUM.search(text)
        if enum:
            values.update({k: int(v) for k, v in _ENTRY.findall(enum.group(1))})
        for name, body in _DEFINE.findall(text):
            if name.endswith("_H") or "(" in name:
                continue  # include guards
            expr = re.sub(r"\bNH_\w+\b", lambda m: str(values[m.group(0)]), body)
            if re.fullmatch(r"[\d\s()<>|&+\-*]+", expr):
                values[name] = int(eval(expr, {"__builtins__": {}}))  # noqa: S307 - digits only
    return values


def core_constants() -> dict[str, int]:
    """What ``nhfast._core`` exports, under the C names."""
    out = {"NH_ABI_VERSION": _core.ABI_VERSION, "NH_INFO_LEN": _core.INFO_LEN}
    out["NH_N_METHODS"] = _core.N_METHODS
    out["NH_NSTATS"] = _core.NSTATS
    out["NH_ADAPTIVE_MASK"] = _core.ADAPTIVE_MASK
    out["NH_TAYLOR_MAX_ORDER"] = _core.TAYLOR_MAX_ORDER
    for key, value in _core.ERR.items():
        out["NH_OK" if key == "ok" else f"NH_ERR_{key.upper()}"] = value
    groups = {"LANE": _core.LANE, "INFO": _core.INFO, "HAS": _core.HAS, "STAT": _core.STAT}
    groups["STIFF"] = _core.STIFF
    for group, table in groups.items():
        out.update({f"NH_{group}_{key.upper()}": value for key, value in table.items()})
    out.update({f"NH_{key.upper()}": value for key, value in _core.METHOD.items()})
    return out


# nh_core.h (the method enum, the stats columns) is compiled into the core and not shipped: the
# agreement is checked in a source tree, where csrc/ stands beside the tests.
pytestmark = pytest.mark.skipif(
    not CORE_H.exists(), reason="csrc/ is not beside the tests (installed package)"
)
HEADER = header_constants(ABI_H, CORE_H) if CORE_H.exists() else {}


def test_headers_are_parsed():
    assert HEADER["NH_ABI_VERSION"] >= 1
    assert HEADER["NH_LANE_NOT_CONVERGED"] == 4 and HEADER["NH_GAUSS6"] == 6  # spot checks
    assert len(HEADER) > 30


def test_core_exports_every_header_constant():
    """Same names, same values: nothing retyped, nothing missing, nothing extra."""
    assert core_constants() == HEADER


def test_abi_module_agrees_with_headers():
    assert _abi.ABI_VERSION == HEADER["NH_ABI_VERSION"]
    assert _abi.INFO_LEN == HEADER["NH_INFO_LEN"] == len(_abi.INFO)
    assert {f"NH_INFO_{k.upper()}": v for k, v in _abi.INFO.items()} == {
        k: v for k, v in HEADER.items() if k.startswith("NH_INFO_") and k != "NH_INFO_LEN"
    }
    assert _abi.ERR["ok"] == HEADER["NH_OK"]
    assert {k: HEADER[m] for k, m in _abi.FLAG_MACRO.items()} == _abi.HAS
    assert set(_abi.HAS) == set(_abi.SYMBOL)
    assert sorted(_abi.HAS.values()) == sorted(v for k, v in HEADER.items() if "_HAS_" in k)
    assert {k: HEADER[f"NH_{k.upper()}"] for k in _abi.METHODS} == _abi.METHODS
    assert len(_abi.METHODS) == HEADER["NH_N_METHODS"]
    mask = HEADER["NH_ADAPTIVE_MASK"]
    assert _abi.ADAPTIVE == {k for k, v in _abi.METHODS.items() if (mask >> v) & 1}
    assert _abi.ADAPTIVE == {"dopri5", "dop853", "taylor"}
    assert _abi.TAYLOR_MAX_ORDER == HEADER["NH_TAYLOR_MAX_ORDER"]
    assert _abi.SYMBOL["taylor"] == "nh_taylor" and _abi.FLAG_MACRO["taylor"] == "NH_HAS_TAYLOR"
    lanes = {v for k, v in HEADER.items() if k.startswith("NH_LANE_")}
    assert set(_abi.STATUS) == lanes
    columns = sorted((v, k) for k, v in HEADER.items() if k.startswith("NH_STAT_"))
    assert len(_abi.STATS) == len(columns) == HEADER["NH_NSTATS"]
    names = ["NH_STAT_STEPS", "NH_STAT_RHS", "NH_STAT_REJECTED", "NH_STAT_ITER"]
    assert [k for _, k in columns] == names
    assert _abi.STATS == ("steps", "rhs_evals", "rejected", "iterations")
    assert {f"NH_STIFF_{k.upper()}": v for k, v in _abi.STIFF.items()} == {
        k: v for k, v in HEADER.items() if k.startswith("NH_STIFF_")
    }
    # Hairer's counts (DOP853/DOPRI5 codes): 15 estimates above the bound, 6 below reset
    assert _abi.STIFF == {"positives": 15, "reset": 6}


def test_taylor_capsules_are_named_after_their_signature():
    """A Taylor kernel travels in a capsule named ``nh_taylor_fn``: a plain kernel capsule is
    refused where a Taylor kernel is expected (and an address of 0 never becomes one)."""
    assert _core.TAYLOR_CAPSULE == b"nh_taylor_fn" and _core.KERNEL_CAPSULE == b"nh_kernel_fn"
    with pytest.raises(ValueError, match="NULL"):
        _core.taylor_capsule(0)


def test_public_tables_come_from_the_abi():
    assert nh.METHODS is _abi.METHODS and nh.STATUS is _abi.STATUS


def test_the_abi_header_is_the_only_definition():
    """No other C file defines what nh_abi.h defines (csrc includes it)."""
    abi_names = set(header_constants(ABI_H)) | {"NH_EXPORT"}
    for path in [*(ROOT / "csrc").glob("*.[ch]"), *_abi.INCLUDE_DIR.glob("*.h")]:
        if path == ABI_H:
            continue
        defined = set(re.findall(r"^#define\s+(NH_\w+)", path.read_text(), re.MULTILINE))
        assert not defined & abi_names, f"{path.name} redefines {sorted(defined & abi_names)}"
    assert not (ROOT / "csrc" / "nh_abi.h").exists()


@pytest.mark.parametrize("generator", ["unrolled", "structured"])
def test_generated_sources_include_the_abi_header(generator, sleigh):
    if generator == "unrolled":
        src = generate_c(sleigh.kernel_set())
    else:
        src = generate_structured_c(veselova_program(3))
    assert '#include "nh_abi.h"' in src
    assert "#define NH_EXPORT" not in src and "#define NH_" not in src.replace("NH_LANES", "")
    assert re.search(r"return -?\d+;", src) is None  # return codes by name
    assert "NH_ERR_SIZE" in src and "return NH_OK;" in src
    assert "nh_info_data[NH_INFO_LEN] = {NH_ABI_VERSION," in src
    assert f"#if NH_ABI_VERSION != {_abi.ABI_VERSION}" in src


def test_kernel_set_flags_use_the_header_bits(sleigh):
    ks: KernelSet = sleigh.kernel_set(["jacobian"])
    src = generate_c(ks)
    assert "NH_HAS_RHS | NH_HAS_JAC" in src
    assert ks.flags == HEADER["NH_HAS_RHS"] | HEADER["NH_HAS_JAC"]
