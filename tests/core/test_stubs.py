"""The stub of the compiled core (nhfast/_core.pyi) matches the module: ``mypy.stubtest``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_core_stub_passes_stubtest(tmp_path):
    pytest.importorskip("mypy.stubtest", reason="mypy is not installed (pip install nhfast[test])")
    stub = ROOT / "nhfast" / "_core.pyi"
    if not stub.exists():
        pytest.skip("not run from a source tree (no nhfast/_core.pyi next to the tests)")
    env = dict(os.environ, MYPY_CACHE_DIR=str(tmp_path / "mypy_cache"), MYPYPATH=str(ROOT))
    cmd = [sys.executable, "-m", "mypy.stubtest", "nhfast._core"]
    cmd += ["--mypy-config-file", str(ROOT / "pyproject.toml")]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success" in proc.stdout


def test_stub_names_the_capsules_and_kernels_precisely():
    """No ``Any`` in the stub: capsules are ``CapsuleType``, Python kernels a protocol."""
    import nhfast._core

    text = Path(nhfast._core.__file__).with_name("_core.pyi").read_text()  # the installed stub
    assert "Any" not in text
    assert "CapsuleType" in text and "class _PythonKernel(Protocol)" in text
