"""An unusable kernel cache (a file, a read-only directory): one warning, a private cache, a run.

Issue 14, item 3: ``NHFAST_CACHE_DIR`` naming a file used to raise ``FileExistsError``, a
read-only directory ``PermissionError: ... .tmp-...``; the CLI printed a traceback. Below them,
fault injection (issue 14, beyond the list): builds killed by PID, corrupted entries, four
racing processes, a full disk (a small tmpfs, where it can be mounted).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
from nhfast import _jit, _progress
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
    monkeypatch.setattr(_progress, "THRESHOLD", float("inf"))  # a slow compile: no extra line
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


# ---------------------------------------------------------------------------------------------
# Fault injection (issue 14, beyond the list): killed builds, corrupted entries, racing
# processes, a full disk. Afterwards every run succeeds with the same numbers and the cache
# holds no debris: no build directory once the builders are gone, no half entry.
# ---------------------------------------------------------------------------------------------

_SYSTEM = """
def fault_run(tag, n_terms):
    xs = sp.symbols("x0:4")
    rows = [[] for _ in xs]
    for k in range(n_terms):
        a, b = k % 4, (3 * k + 1) % 4
        c = sp.Rational(k % 7 + 1, k % 5 + 2)
        rows[a].append(c * sp.sin(xs[b] + sp.Float(tag) * k / n_terms))
    rhs = [sp.Add(*r) - xs[i] for i, r in enumerate(rows)]
    vf = nh.VectorField(list(xs), rhs, name=f"fault{tag}")
    x0 = np.full((2, 4), 0.1)
    res = nh.integrate(vf, x0, [0.0, 0.5], method="rk4", h=0.05, observables=False)
    return repr(res.y.ravel().tolist())
"""
_BUILDER = (
    "import sys\nimport numpy as np\nimport sympy as sp\nimport nhfast as nh\n"
    + _SYSTEM
    + "print(fault_run(float(sys.argv[1]), int(sys.argv[2])))\n"
)


def _fault_run(tag: float, n_terms: int) -> str:
    """The builder's run, in this process (a new field each time: its memo starts empty)."""
    scope = {"np": np, "sp": sp, "nh": nh}
    exec(_SYSTEM, scope)
    return scope["fault_run"](tag, n_terms)


def _builder_env(root: Path) -> dict[str, str]:
    env = {**os.environ, "NHFAST_CACHE_DIR": str(root), "NHFAST_BACKEND": "c"}
    env.pop("NHFAST_CFLAGS", None)
    return env


def _spawn(root: Path, tag: float, n_terms: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _BUILDER, str(tag), str(n_terms)],
        env=_builder_env(root),
        cwd=root.parent,  # outside the source tree
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the compiler it runs is in it
    )


def _finish(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return out.strip().splitlines()[-1]


def _wait_group_gone(pgid: int, timeout: float = 60.0) -> None:
    """Wait until the process group we started is empty (an orphaned compiler finishes)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.killpg(pgid, signal.SIGKILL)


def _no_debris(root: Path) -> None:
    """Every entry is whole (valid), and no build directory of an ended process is left."""
    names = sorted(p.name for p in root.iterdir())
    assert not [n for n in names if n.startswith(".tmp-") or ".corrupt-" in n], names
    for p in root.iterdir():
        if p.name.startswith("k"):
            assert _jit._valid(p), p
        elif p.name.startswith("s"):
            key = json.loads((p / "meta.json").read_text())["key"]
            assert _jit.cached_source(key) is not None, p


def _kill_during_builds(
    root: Path, tag: float, n_terms: int, delays: list[float], orphans: bool = False
) -> list[str]:
    """Start a builder per delay and SIGKILL it (its PID) that long after its build began.

    With ``orphans`` the compiler it started runs on to its end (writing into the killed
    build's directory); else the builder's process group goes too.
    """
    outcomes = []
    for delay in delays:
        proc = _spawn(root, tag, n_terms)
        started = time.monotonic()
        while time.monotonic() - started < 120 and proc.poll() is None:
            if any(p.name.startswith(".tmp-") for p in root.glob(".tmp-*")):
                break  # a build directory exists: generation or compilation is under way
            time.sleep(0.01)
        time.sleep(delay)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            outcomes.append("killed")
        else:
            outcomes.append("finished")
        proc.communicate(timeout=60)
        if not orphans:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the group of the builder we started
            except ProcessLookupError:
                pass
        _wait_group_gone(proc.pid)
    return outcomes


@pytest.fixture
def faults(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("NHFAST_CACHE_DIR", str(root))
    monkeypatch.setenv("NHFAST_BACKEND", "c")
    monkeypatch.setattr(_jit, "_warned_roots", set())
    monkeypatch.setattr(_jit, "_fallback_root", None)
    _jit.clear_memory_cache()
    yield root
    _jit.clear_memory_cache()


def test_builds_killed_mid_way_leave_no_debris(faults, monkeypatch, tmp_path):
    root = faults
    rng = random.Random(1414)
    delay = rng.uniform(0.0, 0.4)
    # until one builder is killed before it finishes; each try is another system (a finished
    # try leaves its entry in the cache, so the same system again would be a cache hit) and
    # waits a quarter as long (a quiet machine compiles 60 terms in well under 0.4 s)
    for tag in (0.5, 0.625, 0.75, 0.875):
        if _kill_during_builds(root, tag, 60, [delay]) == ["killed"]:
            break
        delay /= 4
    else:
        pytest.fail("no builder could be killed mid-way")
    info = _jit.cache_info()
    assert info.stale_builds == info.builds  # their owners are gone: abandoned, to be swept
    y = _finish(_spawn(root, tag, 60))  # sweeps the build directories of the killed one
    _no_debris(root)
    monkeypatch.setenv("NHFAST_CACHE_DIR", str(tmp_path / "reference"))
    _jit.clear_memory_cache()
    assert y == _fault_run(tag, 60)  # an independent build, in this process
    monkeypatch.setenv("NHFAST_CACHE_DIR", str(root))
    done = _jit.clear_cache()
    assert not done.failed and list(root.iterdir()) == []


def test_corrupted_entries_are_rebuilt_with_the_same_numbers(faults):
    root = faults
    y0 = _fault_run(0.75, 30)
    (lib,) = root.glob("k*")
    (src,) = root.glob("s*")
    so = lib / "kernel.so"

    def rewrite(path: Path, data: bytes) -> None:
        path.unlink()  # a new file: this process has the old library mapped
        path.write_bytes(data)

    damages = {
        "truncated library": lambda: rewrite(so, so.read_bytes()[: so.stat().st_size // 2]),
        "empty library": lambda: rewrite(so, b""),
        "garbage source": lambda: (src / "kernel.c").write_bytes(os.urandom(4000)),
        "garbage source metadata": lambda: (src / "meta.json").write_text("\x00garbage"),
        "source entry is a file": lambda: (shutil.rmtree(src), src.write_text("junk")),
        "library entry is a file": lambda: (rewrite(so, b""), shutil.rmtree(lib),
                                            lib.write_text("junk")),
        "library metadata gone": lambda: (lib / "meta.json").unlink(),
    }  # fmt: skip
    for what, damage in damages.items():
        damage()
        _jit.clear_memory_cache()
        assert _fault_run(0.75, 30) == y0, what
        _no_debris(root)
        assert len(list(root.glob("k*"))) == len(list(root.glob("s*"))) == 1, what


def test_a_library_that_passes_its_checksum_but_does_not_load_is_rebuilt(faults):
    """Consistent damage (library and checksum both rewritten): dlopen fails, then a rebuild.

    Before: ``OSError: .../kernel.so: file too short`` from ctypes. Checked in a new process
    (this one would get its already loaded library back from dlopen, by name).
    """
    y0 = _fault_run(0.625, 20)
    (lib,) = faults.glob("k*")
    bogus = b"\x7fELF not really"
    (lib / "kernel.so").unlink()  # never rewrite a library this process has mapped
    (lib / "kernel.so").write_bytes(bogus)
    meta = json.loads((lib / "meta.json").read_text())
    meta["sha256"] = hashlib.sha256(bogus).hexdigest()
    (lib / "meta.json").write_text(json.dumps(meta))
    assert _jit._valid(lib)
    assert _finish(_spawn(faults, 0.625, 20)) == y0
    assert (lib / "kernel.so").read_bytes() != bogus and _jit._valid(lib)
    _no_debris(faults)


def test_four_processes_racing_on_one_system(faults):
    root = faults
    procs = [_spawn(root, 1.25, 60) for _ in range(4)]
    outs = [_finish(p) for p in procs]
    assert len(set(outs)) == 1
    assert len(list(root.glob("k*"))) == 1 and len(list(root.glob("s*"))) == 1
    _no_debris(root)


def _mount_small_tmpfs(path: Path) -> None:
    path.mkdir()
    try:
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(path)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (not permitted?): {proc.stderr.strip()}")


def _fill(disk: Path, leave: int) -> Path:
    """Fill ``disk`` until fewer than ``leave`` bytes are free."""
    filler = disk / "filler"
    with open(filler, "wb") as fh:
        try:
            while shutil.disk_usage(disk).free > leave:
                fh.write(b"\0" * max(4096, min(1 << 20, shutil.disk_usage(disk).free - leave)))
                fh.flush()
        except OSError:
            pass
    return filler


@pytest.mark.parametrize("leave", [0, 12_000])
def test_full_disk_falls_back_and_leaves_no_half_entries(tmp_path, monkeypatch, leave):
    disk = tmp_path / "small"
    _mount_small_tmpfs(disk)
    try:
        root = disk / "cache"
        root.mkdir()
        monkeypatch.setenv("NHFAST_CACHE_DIR", str(root))
        monkeypatch.setenv("NHFAST_BACKEND", "c")
        monkeypatch.setattr(_jit, "_warned_roots", set())
        monkeypatch.setattr(_jit, "_fallback_root", None)
        monkeypatch.setattr(_progress, "THRESHOLD", float("inf"))
        _jit.clear_memory_cache()
        filler = _fill(disk, leave)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            y_full = _run(_system(4.25 + leave))
        messages = [str(w.message) for w in rec if issubclass(w.category, _jit.CacheWarning)]
        assert messages and str(root) in messages[0] and "NHFAST_CACHE_DIR" in messages[0]
        assert "No space left on device" in messages[0], messages
        print(messages)
        assert not list(root.glob(".tmp-*"))  # the failed build cleaned up after itself
        for p in root.iterdir():  # whatever got published is whole
            assert not p.name.startswith("k") or _jit._valid(p)
        filler.unlink()  # room again: a later process uses the cache normally
        monkeypatch.setattr(_jit, "_warned_roots", set())  # as in a new process
        monkeypatch.setattr(_jit, "_fallback_root", None)
        _jit.clear_memory_cache()
        with warnings.catch_warnings():
            warnings.simplefilter("error", _jit.CacheWarning)
            y_later = _run(_system(4.25 + leave))
        np.testing.assert_array_equal(y_full, y_later)
        _no_debris(root)
        assert list(root.glob("k*")) and list(root.glob("s*"))
    finally:
        _jit.clear_memory_cache()
        subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=30)


def test_compiler_out_of_space_falls_back(faults, monkeypatch):
    """The compiler, not Python, hits the full disk: the cache's fault, not the source's."""
    root = faults
    real = subprocess.run

    def full_disk(cmd, *args, **kwargs):
        if "-o" in cmd and str(root) in cmd[cmd.index("-o") + 1]:
            msg = f"/usr/bin/ld: final link failed: {os.strerror(errno.ENOSPC)}\n"
            return subprocess.CompletedProcess(cmd, 1, "", msg)
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(_jit.subprocess, "run", full_disk)
    with pytest.warns(_jit.CacheWarning, match=rf"{root}.*No space left on device"):
        y = _run(_system(6.5))
    monkeypatch.setattr(_jit.subprocess, "run", real)
    assert not list(root.glob(".tmp-*")) and not list(root.glob("k*"))
    monkeypatch.setattr(_jit, "_warned_roots", set())
    monkeypatch.setattr(_jit, "_fallback_root", None)
    _jit.clear_memory_cache()
    np.testing.assert_array_equal(_run(_system(6.5)), y)
    _no_debris(root)


@pytest.mark.slow
def test_many_random_kills_then_identical_results(faults):
    """Kills at random times from process start to the end of the build (any stage)."""
    root = faults
    rng = random.Random(4141)
    outcomes = []
    for i in range(12):
        if i % 2:  # at a random time from the start of the process: any stage
            proc = _spawn(root, 2.5, 400)
            time.sleep(rng.uniform(0.0, 12.0))
            outcomes.append("finished" if proc.poll() is not None else "killed")
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=600)
            _wait_group_gone(proc.pid)  # its compiler, orphaned, runs to its end
        else:  # during the build, the orphaned compiler running on
            outcomes += _kill_during_builds(root, 2.5, 400, [rng.uniform(0, 3)], orphans=True)
        if rng.random() < 0.3:  # sometimes a clear in between
            assert not _jit.clear_cache().failed
    ref = _finish(_spawn(root.parent / "reference", 2.5, 400))
    assert _finish(_spawn(root, 2.5, 400)) == ref
    _no_debris(root)
    assert not _jit.clear_cache().failed and list(root.iterdir()) == []
    assert "killed" in outcomes
    print(f"outcomes: {outcomes}")
