"""Every code block of the documentation pages (``docs/**/*.md``) runs as written, the API
reference lists every public name, and the version agrees with the changelog.

The rules are README's (``tests/test_readme.py``): Python blocks run each in a fresh
interpreter; the ``nhfast`` command lines of bash blocks run as shell commands; install commands,
the test and benchmark runs and the documentation build itself are what CI executes (``.ci/run``).
The gallery's scripts (``docs/examples``) run when the documentation is built.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

pytestmark = pytest.mark.skipif(not DOCS.is_dir(), reason="docs/ is not beside the tests")

#: Lines of bash blocks that CI runs itself (.ci/run).
CI_RUNS = (
    "python -m pip install",
    "pytest",
    "NHFAST_BENCH_FULL=",
    "python benchmarks/",
    "python tools/wheel-check",
    "sphinx-build",
)


#: Directories of pages the build generates (API stubs, the gallery's pages).
GENERATED = ("auto_examples", "generated")


def pages(suffix: str = ".md") -> list[Path]:
    """The documentation's own pages with ``suffix``, not those the build generates."""
    return sorted(p for p in DOCS.rglob("*" + suffix) if not any(g in p.parts for g in GENERATED))


def blocks(lang: str) -> list[tuple[str, str]]:
    """(``page:line``, code) of every fenced block of ``lang`` in the documentation pages."""
    out = []
    for page in pages():
        text = page.read_text()
        for m in re.finditer(r"^```" + lang + r"\n(.*?)^```", text, flags=re.M | re.S):
            line = text[: m.start()].count("\n") + 1
            out.append((f"{page.relative_to(DOCS)}:{line}", m.group(1)))
    return out


def commands() -> list[tuple[str, str]]:
    out = []
    for where, code in blocks("bash"):
        page, line0 = where.rsplit(":", 1)
        for k, line in enumerate(code.splitlines()):
            cmd = line.split("#", 1)[0].strip()
            if cmd and not cmd.startswith(CI_RUNS):
                out.append((f"{page}:{int(line0) + 1 + k}", cmd))
    return out


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("NHFAST_CACHE_DIR", str(tmp_path / "cache"))
    env["MPLBACKEND"] = "Agg"
    return env


def test_pages_have_code() -> None:
    assert len(blocks("python")) >= 10
    for page in pages(".rst"):
        # rst pages hold no code: code lives in the Markdown pages, where this test finds it
        assert ".. code-block::" not in page.read_text(), page


@pytest.mark.parametrize(("where", "code"), blocks("python"), ids=lambda v: str(v)[:40])
def test_python_block_runs(where: str, code: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"docs/{where} failed:\n{proc.stderr[-3000:]}"
    assert len(proc.stdout) < 20_000, f"docs/{where} prints {len(proc.stdout)} characters"


@pytest.mark.parametrize(("where", "cmd"), commands(), ids=lambda v: str(v)[:40])
def test_command_runs(where: str, cmd: str, tmp_path: Path) -> None:
    argv = shlex.split(cmd)
    if argv[0] != "nhfast":
        pytest.fail(f"docs/{where}: no rule to run {cmd!r}")
    argv = [sys.executable, "-m", "nhfast", *argv[1:]]
    proc = subprocess.run(
        argv, cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, f"docs/{where}: {cmd}\n{proc.stderr[-3000:]}"


def test_api_reference_lists_every_public_name() -> None:
    """Each name of an ``__all__`` is in ``docs/api/index.rst`` (under one of its modules)."""
    import importlib
    import pkgutil

    import nhfast

    listed: dict[str, set[str]] = {}
    module = ""
    for line in (DOCS / "api" / "index.rst").read_text().splitlines():
        if line.startswith(".. currentmodule::"):
            module = line.split("::", 1)[1].strip()
        elif line.startswith("   ") and line.strip() and not line.strip().startswith(":"):
            listed.setdefault(module, set()).add(line.strip())
    documented = {
        id(getattr(importlib.import_module(m), n)) for m, ns in listed.items() for n in ns
    }
    missing = []
    mods = [nhfast] + [
        importlib.import_module(i.name)
        for i in pkgutil.walk_packages(nhfast.__path__, "nhfast.")
        if not i.name.endswith("__main__")
    ]
    for mod in mods:
        for name in getattr(mod, "__all__", ()):
            if name != "__version__" and id(getattr(mod, name)) not in documented:
                missing.append(f"{mod.__name__}.{name}")
    assert not missing, "not in docs/api/index.rst: " + ", ".join(sorted(missing))


def test_version_agrees_with_changelog(tmp_path: Path) -> None:
    import nhfast

    text = (ROOT / "CHANGELOG.md").read_text()
    latest = re.search(r"^## (\d+\.\d+\.\d+\S*)", text, flags=re.M)
    assert latest, "CHANGELOG.md has no version heading"
    assert latest.group(1) == nhfast.__version__
    proc = subprocess.run(
        [sys.executable, "-m", "nhfast", "--version"],
        cwd=tmp_path,  # the installed nhfast, not the source tree in the working directory
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["nhfast", nhfast.__version__]
