"""What an installed nhfast carries and how it behaves as a user gets it (a wheel, or the tree).

Fast checks of the installed package: one version, the files that the run-time compiler and
type checkers read, the NumPy backend without a compiler (one warning), kernels in the user
cache with one. ``tools/wheel-check`` runs these (and the whole suite) against a wheel built
from the sdist, in a fresh virtual environment, from outside the source tree.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import nhfast
from nhfast import _jit
from nhfast._version import __version__

PACKAGE = Path(nhfast.__file__).resolve().parent

#: Integrates x'' = -w^2 x with the backend that the environment gives; prints a JSON summary.
CHILD = """
import json, sys, warnings
import numpy as np, sympy as sp
import nhfast as nh
from nhfast import _jit

q, p, w = sp.symbols("q p w")
errors = []
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for omega in (1.0, 2.0):
        ham = nh.HamiltonianSystem([q], [p], p**2 / 2 + w**2 * q**2 / 2, params=[w])
        t = np.linspace(0.0, 2.0, 5)
        res = nh.integrate(ham, [1.0, 0.0], t, params=[omega], rtol=1e-10, atol=1e-12)
        errors.append(float(np.max(np.abs(res.y[0, :, 0] - np.cos(omega * t)))))
cache = _jit.cache_dir()
json.dump({
    "backend": _jit.backend(),
    "warnings": [f"{type(m.message).__name__}: {m.message}" for m in caught
                 if issubclass(m.category, nh.BackendWarning)],
    "errors": errors,
    "cache": str(cache),
    "libraries": sorted(str(f) for f in cache.rglob("*") if f.suffix in (".so", ".dylib", ".dll")),
}, sys.stdout)
"""


def _run_child(env: dict[str, str], cwd: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _child_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The test's environment with a private home and cache, and no cache override."""
    env = {k: v for k, v in os.environ.items() if k not in ("NHFAST_CACHE_DIR", "NHFAST_BACKEND")}
    home = tmp_path / "home"
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), LOCALAPPDATA=str(home))
    env.update(extra)
    return env


def test_version_comes_from_one_place():
    assert nhfast.__version__ == __version__
    assert importlib.metadata.version("nhfast") == __version__


def test_version_flag(tmp_path):
    # cwd outside the source tree: "python -m" puts cwd first on sys.path
    out = subprocess.run(
        [sys.executable, "-m", "nhfast", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"nhfast {__version__}"


def _headers_named_in_sources() -> set[str]:
    """Every header that a string of the installed sources names (``"x.h"``, ``#include "x.h"``)."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.update(re.findall(r'^([\w]+\.h)$|#include "([\w]+\.h)"', node.value))
    return {n for pair in names for n in pair if n}


def test_headers_of_generated_kernels_are_installed():
    named = _headers_named_in_sources()
    assert {"nh_abi.h", "linalg.h"} <= named
    shipped = set(_jit.headers())
    assert named <= shipped, f"not installed: {sorted(named - shipped)}"


def test_typing_files_are_installed():
    """``py.typed`` and the stub beside the compiled core (``mypy.stubtest`` checks the stub)."""
    import nhfast._core as core

    assert (PACKAGE / "py.typed").is_file()
    assert (Path(core.__file__).parent / "_core.pyi").is_file()


def test_without_compiler_numpy_backend_and_one_warning(tmp_path):
    env = _child_env(tmp_path, CC=str(tmp_path / "no-such-compiler"))
    env["NHFAST_CACHE_DIR"] = str(tmp_path / "cache")
    got = _run_child(env, tmp_path)
    assert got["backend"] == "numpy"
    assert len(got["warnings"]) == 1, got["warnings"]
    assert got["warnings"][0].startswith("BackendWarning: no C compiler found (set CC)")
    assert max(got["errors"]) < 1e-8
    assert got["libraries"] == []


@pytest.mark.skipif(
    os.environ.get("NHFAST_BACKEND", "").lower() == "numpy", reason="NumPy backend forced"
)
def test_with_compiler_kernels_go_to_the_user_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("CC", raising=False)
    if _jit.compiler_command() is None:
        pytest.skip("no C compiler on this machine")
    env = _child_env(tmp_path)
    env.pop("CC", None)
    got = _run_child(env, tmp_path)
    assert got["backend"] == "c"
    assert got["warnings"] == []
    assert max(got["errors"]) < 1e-8
    assert Path(got["cache"]).is_relative_to(tmp_path / "home")
    assert got["libraries"], "no kernel library in the user cache"
