"""Where the time goes from a symbolic system to a loaded kernel: Veselova on SO(n), n = 3..10.

Three stages, each its own benchmark (one round, one iteration: they are slow and the
later ones are not repeatable without undoing caches):

* ``symbolic``: ``veselova(n)`` (closed forms (4.12)-(4.14) of seed 004) and
  ``chaplygin_equations`` (``simplify=False``, as the numeric tests use it; for ``r = n - 1 > 3``
  the velocities come from a linear solve recorded in ``solves``);
* ``codegen``: ``nhfast.codegen.generate_c(vf.kernel_set(("observables",)))``;
* ``compile``: ``nhfast._jit.build(source)`` in a fresh, empty ``NHFAST_CACHE_DIR`` (so the
  C compiler really runs; the in-memory cache is cleared too).

Each stores ``seconds`` (and sizes) in ``benchmark.extra_info``; run the stages of one ``n``
in file order (``pytest benchmarks/bench_geometry.py``) so that code generation and compilation
reuse the stage before instead of re-deriving it.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import pytest

from nhfast import _jit
from nhfast.codegen import generate_c
from nhfast.symbolic.equations import chaplygin_equations
from nhfast.systems import veselova

NS = list(range(3, 11))
_STAGE: dict[tuple[str, int], Any] = {}


def _derive(n: int) -> Any:
    eq = chaplygin_equations(veselova(n), simplify=False)
    return eq.as_vector_field()


def _vector_field(n: int) -> Any:
    if ("vf", n) not in _STAGE:
        _STAGE["vf", n] = _derive(n)
    return _STAGE["vf", n]


def _source(n: int) -> str:
    if ("src", n) not in _STAGE:
        _STAGE["src", n] = generate_c(_vector_field(n).kernel_set(("observables",)))
    return _STAGE["src", n]


@pytest.mark.parametrize("n", NS)
def test_symbolic(benchmark: Any, n: int) -> None:
    """``veselova(n)`` + ``chaplygin_equations`` + ``as_vector_field``."""
    benchmark.group = "geometry-symbolic"
    t0 = time.perf_counter()
    vf = benchmark.pedantic(_derive, args=(n,), rounds=1, iterations=1)
    seconds = time.perf_counter() - t0
    _STAGE["vf", n] = vf
    benchmark.extra_info.update(
        stage="symbolic", n=n, seconds=seconds, n_state=vf.n_state, solves=len(vf.solves)
    )


@pytest.mark.parametrize("n", NS)
def test_codegen(benchmark: Any, n: int) -> None:
    """C source of the right-hand side and the observables (energy)."""
    benchmark.group = "geometry-codegen"
    vf = _vector_field(n)

    def run() -> str:
        return generate_c(vf.kernel_set(("observables",)))

    t0 = time.perf_counter()
    src = benchmark.pedantic(run, rounds=1, iterations=1)
    seconds = time.perf_counter() - t0
    _STAGE["src", n] = src
    benchmark.extra_info.update(stage="codegen", n=n, seconds=seconds, source_chars=len(src))


@pytest.mark.parametrize("n", NS)
def test_compile(benchmark: Any, n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The C compiler on the generated source, in an empty cache directory."""
    benchmark.group = "geometry-compile"
    src = _source(n)
    with tempfile.TemporaryDirectory(prefix=f"nhfast-bench-geom-{n}-") as tmp:
        monkeypatch.setenv("NHFAST_CACHE_DIR", tmp)
        _jit.clear_memory_cache()
        t0 = time.perf_counter()
        lib, hit = benchmark.pedantic(_jit.build, args=(src,), rounds=1, iterations=1)
        seconds = time.perf_counter() - t0
        assert not hit, "the kernel came from a cache: nothing was compiled"
        assert os.listdir(tmp)
    benchmark.extra_info.update(stage="compile", n=n, seconds=seconds, cache_hit=hit)
