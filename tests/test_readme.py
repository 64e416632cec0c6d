"""Every code block of README.md runs as written.

Python blocks run each in a fresh interpreter; the ``nhfast`` command lines of the bash blocks
run as shell commands. Install commands (pip), the test command itself and the benchmark runs
are what CI executes from README.md directly (``.ci/run``), so they are not repeated here.
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
README = ROOT / "README.md"

pytestmark = pytest.mark.skipif(not README.exists(), reason="README.md is not beside the tests")

#: Lines of bash blocks that CI runs itself after the tests (.ci/run: installs, the test suite,
#: the benchmarks, the dashboard built from their results, and the wheel check).
CI_RUNS = (
    "python -m pip install",
    "pytest",
    "NHFAST_BENCH_FULL=",
    "python benchmarks/",
    "python tools/wheel-check",
)


def blocks(lang: str) -> list[tuple[int, str]]:
    """(line number, code) of every fenced block of ``lang`` in README.md."""
    text = README.read_text() if README.exists() else ""
    out = []
    for m in re.finditer(r"^```" + lang + r"\n(.*?)^```", text, flags=re.M | re.S):
        out.append((text[: m.start()].count("\n") + 1, m.group(1)))
    return out


def commands() -> list[tuple[int, str]]:
    out = []
    for line0, code in blocks("bash"):
        for k, line in enumerate(code.splitlines()):
            cmd = line.split("#", 1)[0].strip()
            if cmd and not cmd.startswith(CI_RUNS):
                out.append((line0 + 1 + k, cmd))
    return out


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("NHFAST_CACHE_DIR", str(tmp_path / "cache"))
    env["MPLBACKEND"] = "Agg"
    return env


def test_readme_has_the_two_commands() -> None:
    text = README.read_text()
    assert re.search(r'^python -m pip install "\.\[test\]" && pytest tests', text, re.M)
    assert re.search(r"^python -m pip install \. && nhfast ", text, re.M)


@pytest.mark.parametrize(("line", "code"), blocks("python"), ids=lambda v: str(v)[:12])
def test_python_block_runs(line: int, code: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"README.md block at line {line} failed:\n{proc.stderr[-3000:]}"
    assert len(proc.stdout) < 20_000, f"block at line {line} prints {len(proc.stdout)} characters"


@pytest.mark.parametrize(("line", "cmd"), commands(), ids=lambda v: str(v)[:40])
def test_command_runs(line: int, cmd: str, tmp_path: Path) -> None:
    argv = shlex.split(cmd)
    if argv[0] == "nhfast":
        argv = [sys.executable, "-m", "nhfast", *argv[1:]]
    else:
        pytest.fail(f"README.md line {line}: no rule to run {cmd!r}")
    proc = subprocess.run(
        argv, cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, f"README.md line {line}: {cmd}\n{proc.stderr[-3000:]}"
