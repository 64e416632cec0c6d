"""An unusable kernel cache (a file, a read-only directory): one warning, a private cache, a run.

Issue 14, item 3: ``NHFAST_CACHE_DIR`` naming a file used to raise ``FileExistsError``, a
read-only directory ``PermissionError: ... .tmp-...``; the CLI printed a traceback.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
from nhfast import _jit
from nhfast.cli import main


def _system(tag: float) -> nh.VectorField:
    """A system whose source (hence cache key) is unique to ``tag``."""
    x, v = sp.symbols("x v")
    return nh.VectorField([x, v], [v, -sp.Float(tag) * x - v**3])


def _run(vf: nh.VectorField) -> np.ndarray:
    return nh.integrate(vf, [[1.0, 0.0], [0.5, 0.1]], [0.0, 0.5, 1.0]).y


@pytest.fixture
def fresh(monkeypatch):
    """No library loaded, no directory warned about, no fallback made yet."""
    monkeypatch.setattr(_jit, "_warned_roots", set())
    monkeypatch.setattr(_jit, "_fallback_root", None)
    monkeypatch.setenv("NHFAST_BACKEND", "c")
    _jit.clear_memory_cache()
    yield
    _jit.clear_memory_cache()


def _read_only(monkeypatch, root: Path) -> None:
    """Make ``root`` read-only; as root the mode bits do not bind, so refuse access too."""
    root.chmod(0o555)
    monkeypatch.setattr(  # restored before tmp_path is cleaned
        _jit.os,
        "access",
        lambda p, mode, _real=os.access, **kw: (
            False if Path(p) == root and mode & os.W_OK else _real(p, mode, **kw)
        ),
    )


def test_cache_dir_that_is_a_file_falls_back_with_one_warning(tmp_path, monkeypatch, fresh):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("NHFAST_CACHE_DIR", str(blocker))
    with pytest.warns(_jit.CacheWarning, match="NHFAST_CACHE_DIR") as rec:
        y1 = _run(_system(1.25))
    assert str(blocker) in str(rec[0].message) and "FileExistsError" in str(rec[0].message)
    fallback = _jit._fallback_root
    assert fallback is not None and fallback.is_dir() and fallback != blocker
    assert any(p.name.startswith("k") for p in fallback.iterdir())
    with warnings.catch_warnings():
        warnings.simplefilter("error", _jit.CacheWarning)  # once per directory
        _jit.clear_memory_cache()
        y2 = _run(_system(1.25))
        _run(_system(1.5))
    assert _jit._fallback_root == fallback  # one private cache per process
    np.testing.assert_array_equal(y1, y2)
    assert blocker.read_text() == "x"


def test_read_only_cache_dir_falls_back_and_still_serves_its_entries(tmp_path, monkeypatch, fresh):
    root = tmp_path / "cache"
    monkeypatch.setenv("NHFAST_CACHE_DIR", str(root))
    y_ref = _run(_system(2.25))  # publishes one entry while writable
    before = sorted(p.name for p in root.iterdir())
    _read_only(monkeypatch, root)
    try:
        _jit.clear_memory_cache()
        with pytest.warns(_jit.CacheWarning, match=rf"{root}.*PermissionError.*NHFAST_CACHE_DIR"):
            np.testing.assert_array_equal(_run(_system(2.25)), y_ref)  # served from root
            _run(_system(2.5))  # new: built in the private cache
        assert sorted(p.name for p in root.iterdir()) == before  # nothing written, no .tmp-*
        assert any(p.name.startswith("k") for p in _jit._fallback_root.iterdir())
    finally:
        root.chmod(0o755)


def test_cli_run_with_unusable_cache_has_no_traceback(tmp_path, monkeypatch, capsys, fresh):
    blocker = tmp_path / "cache-file"
    blocker.write_text("")
    monkeypatch.setenv("NHFAST_CACHE_DIR", str(blocker))
    monkeypatch.delenv("NHFAST_DEBUG", raising=False)
    argv = ["check", "measure", "sleigh", "--lanes", "4", "--no-plots", "--quiet"]
    code = main([*argv, "--out", str(tmp_path / "rep")])
    err = capsys.readouterr().err
    assert code == 0
    assert "Traceback" not in err
    assert f"nhfast: warning: CacheWarning: the kernel cache {blocker}" in err
    assert "NHFAST_CACHE_DIR" in err and err.count("\n") == 1


def test_cli_bad_cflags_is_one_line(tmp_path, monkeypatch, capsys, fresh):
    monkeypatch.setenv("NHFAST_CFLAGS", "-O2 '-DX")
    monkeypatch.delenv("NHFAST_DEBUG", raising=False)
    argv = ["check", "measure", "sleigh", "--lanes", "4", "--no-plots", "--quiet"]
    code = main([*argv, "--out", str(tmp_path / "rep")])
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip().splitlines() == [
        'nhfast: error: ValueError: NHFAST_CFLAGS="-O2 \'-DX" cannot be split into compiler '
        "flags (No closing quotation): fix its shell quoting"
    ]
