"""Content keys and checksums (nhfast._keys): what each covers, and that they are kept apart."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import sympy as sp

import nhfast
from nhfast import _keys

PACKAGE = Path(nhfast.__file__).resolve().parent


def test_keys_of_different_kinds_never_coincide() -> None:
    fp, digest = "f" * 64, "d" * 64
    keys = {
        _keys.source_key(fp, "generate_c", digest, "s"),
        _keys.recipe_key(fp, ["generate_c", digest], "s"),
        _keys.taylor_key(fp, digest, "s", None),
        _keys.taylor_key(fp, digest, "s", 12),
    }
    assert len(keys) == 4
    assert _keys.source_key(fp, "generate_c", digest, "s") != _keys.source_key(
        fp, "generate_c", digest, "t"
    )


def test_expression_digest_sees_structure_not_dummy_indices() -> None:
    x = sp.Symbol("x")
    assert _keys.expression_digest([x + 1, 2]) == _keys.expression_digest([x + 1, 2])
    assert _keys.expression_digest([x + 1]) != _keys.expression_digest([x - 1])
    assert _keys.expression_digest([x, 1]) != _keys.expression_digest([x, "1"])
    d1, d2 = sp.Dummy("u"), sp.Dummy("u")
    assert _keys.expression_digest([d1 * x]) == _keys.expression_digest([d2 * x])


def test_code_fingerprint_follows_the_bytes(tmp_path: Path) -> None:
    f = tmp_path / "gen.py"
    f.write_text("a = 1\n")
    first = _keys.code_fingerprint([f], ["1.0"])
    assert first == _keys.code_fingerprint([f], ["1.0"])
    assert first != _keys.code_fingerprint([f], ["1.1"])
    f.write_text("a = 2\n")
    assert first != _keys.code_fingerprint([f], ["1.0"])
    gone = tmp_path / "gone.py"
    assert _keys.code_fingerprint([gone], strict=True) is None
    assert _keys.code_fingerprint([gone]) is not None


def test_library_key_covers_headers_and_toolchain() -> None:
    base = _keys.library_key("int f;", {"h.h": b"#define A 1"}, ["cc -O2"])
    assert base != _keys.library_key("int f;", {"h.h": b"#define A 2"}, ["cc -O2"])
    assert base != _keys.library_key("int f;", {"h.h": b"#define A 1"}, ["cc -O3"])
    assert base != _keys.library_key("int g;", {"h.h": b"#define A 1"}, ["cc -O2"])


def test_array_checksum_and_token() -> None:
    a = np.arange(12.0).reshape(3, 4)
    c = _keys.array_checksum(a)
    assert 0 <= c < 2**63 and c == _keys.array_checksum(a.copy(order="F"))
    b = a.copy()
    b[2, 3] = np.nextafter(b[2, 3], 20.0)
    assert _keys.array_checksum(b) != c
    assert _keys.array_token(a) != _keys.array_token(a.reshape(4, 3))
    assert _keys.array_token(None) is None


def test_only_the_keys_module_hashes() -> None:
    """One home for keys: no other module of the package imports hashlib."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_keys.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            if "hashlib" in names:
                offenders.append(str(path.relative_to(PACKAGE)))
    assert not offenders, f"use nhfast._keys instead of hashlib in {offenders}"
