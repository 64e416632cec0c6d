"""Run-time compilation and the content-hash kernel cache."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
from nhfast import _jit
from nhfast.codegen import KernelSet, generate_c
from nhfast.errors import CompilationError


def _fresh_system(tag: float) -> nh.VectorField:
    """A system whose source (hence cache key) is unique to ``tag``."""
    x, v = sp.symbols("x v")
    return nh.VectorField([x, v], [v, -sp.Float(tag) * x - v**3])


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("NHFAST_CACHE_DIR", str(tmp_path / "cache"))
    _jit.clear_memory_cache()
    yield tmp_path / "cache"
    _jit.clear_memory_cache()


def _entries(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.name.startswith("k"))


def test_abi_version_matches_core():
    from nhfast import _core
    from nhfast._abi import ABI_VERSION

    assert _core.ABI_VERSION == ABI_VERSION


def test_second_compile_is_a_cache_hit(cache):
    src = generate_c(_fresh_system(1.25).kernel_set())
    lib, hit = _jit.build(src)
    assert not hit
    assert len(_entries(cache)) == 1
    mtime = (lib.path / "kernel.so").stat().st_mtime_ns if os.name != "nt" else None
    _jit.clear_memory_cache()  # force the disk path
    lib2, hit2 = _jit.build(src)
    assert hit2 and lib2.path == lib.path
    if mtime is not None:
        assert (lib2.path / "kernel.so").stat().st_mtime_ns == mtime  # never rewritten
    assert len(_entries(cache)) == 1
    assert not [p for p in cache.iterdir() if p.name.startswith(".tmp")]


def test_key_depends_on_source_and_flags(cache, monkeypatch):
    a = generate_c(_fresh_system(1.5).kernel_set())
    b = generate_c(_fresh_system(1.75).kernel_set())
    assert _jit.cache_key(a)[0] != _jit.cache_key(b)[0]
    k1 = _jit.cache_key(a)[0]
    monkeypatch.setenv("NHFAST_CFLAGS", "-O1")
    assert _jit.cache_key(a)[0] != k1


def test_key_depends_on_the_shipped_headers(cache, monkeypatch, tmp_path):
    """A changed nh_abi.h (or linalg.h) gives a new key; the headers' location does not."""
    src = generate_c(_fresh_system(1.875).kernel_set())
    key, command = _jit.cache_key(src)
    assert f"-I{_jit.INCLUDE_DIR}" in command
    assert set(_jit.headers()) >= {"nh_abi.h", "linalg.h"}
    moved = tmp_path / "include"
    moved.mkdir()
    for name, text in _jit.headers().items():
        (moved / name).write_bytes(text)
    monkeypatch.setattr(_jit, "INCLUDE_DIR", moved)
    assert _jit.cache_key(src)[0] == key
    abi = moved / "nh_abi.h"
    abi.write_bytes(abi.read_bytes() + b"/* changed */\n")
    assert _jit.cache_key(src)[0] != key


def test_generated_source_needs_the_shipped_abi_header(cache, monkeypatch, tmp_path):
    """Kernels include nh_abi.h from the include directory handed to the compiler."""
    src = generate_c(_fresh_system(2.375).kernel_set())
    monkeypatch.setattr(_jit, "INCLUDE_DIR", tmp_path / "empty")
    with pytest.raises(CompilationError, match="nh_abi.h"):
        _jit.build(src)


_RACE = """
import sys, time
import sympy as sp
import nhfast as nh
start = float(sys.argv[1])
x, v = sp.symbols("x v")
vf = nh.VectorField([x, v], [v, -sp.Float(2.125) * x - v**3])
time.sleep(max(0.0, start - time.time()))  # both processes compile at the same moment
res = nh.integrate(vf, [1.0, 0.0], [0.0, 1.0], method="rk4", h=0.01, observables=False)
print(vf.compile(()).path, repr(float(res.y[0, -1, 0])))
"""


def test_two_processes_racing_on_one_key(cache):
    env = {**os.environ, "NHFAST_CACHE_DIR": str(cache)}
    start = str(time.time() + 3.0)
    procs = [
        # cwd outside the source tree: "python -c" puts cwd first on sys.path
        subprocess.Popen([sys.executable, "-c", _RACE, start], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=cache.parent)
        for _ in range(2)
    ]  # fmt: skip
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    assert outs[0][0] == outs[1][0]  # same entry, same numbers
    assert len(_entries(cache)) == 1
    assert _jit._valid(_entries(cache)[0])
    assert not [p for p in cache.iterdir() if p.name.startswith(".tmp")]


def test_corrupted_library_is_detected_and_rebuilt(cache):
    src = generate_c(_fresh_system(3.5).kernel_set())
    lib, _ = _jit.build(src)
    so = lib.path / "kernel.so"
    data = bytearray(so.read_bytes())
    data[len(data) // 2] ^= 0xFF
    entry = lib.path
    _jit.clear_memory_cache()
    # Make the damaged copy visible under the entry name (as a crashed disk would leave it).
    os.rename(entry, entry.with_name("moved"))
    entry.mkdir()
    (entry / "kernel.so").write_bytes(bytes(data))
    (entry / "meta.json").write_text((entry.with_name("moved") / "meta.json").read_text())
    lib2, hit = _jit.build(src)
    assert not hit
    assert _jit._valid(lib2.path) and lib2.path == entry
    assert (lib2.path / "kernel.so").read_bytes() != bytes(data)
    # moved aside atomically, then removed: no debris
    assert not [p for p in cache.iterdir() if ".corrupt-" in p.name or p.name.startswith(".tmp")]


def test_truncated_metadata_is_rebuilt(cache):
    src = generate_c(_fresh_system(3.75).kernel_set())
    lib, _ = _jit.build(src)
    _jit.clear_memory_cache()
    (lib.path / "meta.json").write_text("{")
    lib2, hit = _jit.build(src)
    assert not hit and _jit._valid(lib2.path)


def test_compile_failure_raises_with_command_and_stderr(cache):
    with pytest.raises(nh.CompilationError) as info:
        _jit.build("this is not C;\n")
    err = info.value
    assert err.command and "kernel.c" in " ".join(err.command)
    assert "error" in err.stderr.lower()
    assert not [p for p in cache.iterdir() if p.name.startswith(".tmp")]


def test_missing_compiler_falls_back_to_numpy_with_one_warning(cache, monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/compiler-nhfast")
    monkeypatch.setattr(_jit, "_warned_no_compiler", False)
    vf = _fresh_system(4.5)
    with pytest.warns(nh.BackendWarning):
        res = nh.integrate(
            vf, [1.0, 0.0], np.linspace(0, 2, 5), method="dop853", rtol=1e-11, atol=1e-12
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vf2 = _fresh_system(4.75)
        nh.integrate(vf2, [1.0, 0.0], [0.0, 1.0], method="rk4", h=0.1)
    assert vf.compile(()).backend == "numpy"
    monkeypatch.delenv("CC")
    ref = nh.integrate(
        _fresh_system(4.5),
        [1.0, 0.0],
        np.linspace(0, 2, 5),
        method="dop853",
        rtol=1e-11,
        atol=1e-12,
    )
    assert np.allclose(res.y, ref.y, rtol=0, atol=1e-13)
    assert not list(cache.glob("k*")) or all(_jit._valid(p) for p in _entries(cache))


def test_numpy_backend_every_method_and_companion(monkeypatch, kepler):
    monkeypatch.setenv("NHFAST_BACKEND", "numpy")
    x, y, px, py = kepler.states
    ham = nh.HamiltonianSystem([x, y], [px, py], kepler.H, observables={"L": x * py - y * px})
    x0 = np.array([[1.0, 0.0, 0.0, 1.1], [0.9, 0.1, -0.1, 1.0]])
    for m in nh.METHODS:
        if m == "taylor":  # no Taylor kernels without a C compiler: a clear error instead
            with pytest.raises(CompilationError, match="C compiler"):
                nh.integrate(ham, x0, [0.0, 1.0], method=m)
            continue
        a = nh.integrate(ham, x0, [0.0, 0.5, 1.0], method=m, h=0.05)
        monkeypatch.setenv("NHFAST_BACKEND", "c")
        b = nh.integrate(
            kepler.__class__([x, y], [px, py], kepler.H, observables={"L": x * py - y * px}),
            x0,
            [0.0, 0.5, 1.0],
            method=m,
            h=0.05,
        )
        monkeypatch.setenv("NHFAST_BACKEND", "numpy")
        assert np.allclose(a.y, b.y, rtol=0, atol=1e-12), m
        assert np.allclose(a.observables["L"], b.observables["L"], atol=1e-12)
    cs = ham.compile(("jacobian", "divergence", "dHdq", "dHdp"))
    assert cs.backend == "numpy"
    jac = cs.evaluate("jacobian", x0)
    assert jac.shape == (2, 4, 4)
    assert np.allclose(cs.evaluate("divergence", x0), 0.0, atol=1e-14)


def test_numpy_backend_error_surfaces(monkeypatch):
    monkeypatch.setenv("NHFAST_BACKEND", "numpy")
    x = sp.Symbol("x")
    vf = nh.VectorField([x], [x])
    cs = vf.compile(())

    def boom(*args):
        raise ZeroDivisionError("from the kernel")

    cs.kernels["rhs"][1]._f = boom
    with pytest.raises(RuntimeError, match="NumPy-backend kernel raised") as info:
        nh.integrate(vf, [1.0], [0.0, 1.0], method="rk4", h=0.1)
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_kernel_set_rejects_unknown_family():
    x = sp.Symbol("x")
    with pytest.raises(ValueError, match="unknown kernel families"):
        KernelSet([x], [], None, {"hessian": [x]})
