"""Systems pickle at any time and travel as their kernels' C source (issue 13, item 1).

A field pickled after its first use carries the generated C of every kernel set it compiled;
the copy loads (or compiles) that source in its own process's cache on first use, with no
SymPy generation, and integrates bit for bit like the original. Without a C compiler the copy
falls back to the NumPy backend (from its symbolic description) with a BackendWarning.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
from nhfast.systems import veselova

T = np.linspace(0.0, 1.0, 5)


def solved_field() -> nh.VectorField:
    """A field with a linear solve and a domain: q' = v, M(q) v = p, p' = -q."""
    q, p, v, k = sp.symbols("q p v k")
    k = sp.Symbol("k", positive=True)
    return nh.VectorField(
        states=[q, p],
        rhs=[v, -k * q],
        params=[k],
        observables={"energy": p * v / 2 + k * q**2 / 2},
        solves=[nh.LinearSolve([v], sp.Matrix([[1 + q**2]]), [p])],
        domain={"small q": 4 - q**2},
        name="solved",
    )


CASES = {
    "sleigh": lambda fx: (fx["sleigh"], np.array([0.0, 0.0, 0.1, 1.0, 0.3]), [0.5, 1.0, 2.0]),
    "oscillator": lambda fx: (fx["oscillator"], np.array([1.0, 0.0]), [1.3]),
    "solved": lambda fx: (solved_field(), np.array([0.5, 0.2]), [2.0]),
    "structured": lambda fx: (
        veselova(4, form="structured"),
        np.array([0.6, 0.0, 0.8, 0.0, 0.0, 1.0, 0.0, 0.0]),
        1.0 + np.arange(1, 5) / 4,
    ),
}


@pytest.fixture(params=list(CASES))
def case(request, sleigh, oscillator):
    system, x, par = CASES[request.param]({"sleigh": sleigh, "oscillator": oscillator})
    x0 = x * np.linspace(0.8, 1.2, 3)[:, None]
    return system, x0, np.asarray(par, dtype=float)


def assert_same(a: nh.IntegrationResult, b: nh.IntegrationResult) -> None:
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.status, b.status)
    assert a.stats.keys() == b.stats.keys()
    for k in a.stats:
        np.testing.assert_array_equal(a.stats[k], b.stats[k])
    assert list(a.observables) == list(b.observables)
    for k in a.observables:
        np.testing.assert_array_equal(a.observables[k], b.observables[k])


def test_round_trip_before_and_after_use(case) -> None:
    system, x0, par = case
    fresh = pickle.loads(pickle.dumps(system))  # before any compile
    ref = nh.integrate(system, x0, T, params=par)
    used = pickle.loads(pickle.dumps(system))  # after use: carries the C source
    assert used.compile(("observables",)).generated is False
    assert_same(nh.integrate(fresh, x0, T, params=par), ref)
    assert_same(nh.integrate(used, x0, T, params=par), ref)
    again = pickle.loads(pickle.dumps(used))  # a copy of a copy keeps the source
    assert_same(nh.integrate(again, x0, T, params=par), ref)
    assert list(used.observables) == list(system.observables)
    assert used.name == system.name and used.params == system.params


def test_unpickled_field_keeps_its_input_checks() -> None:
    vf = solved_field()
    nh.integrate(vf, [0.5, 0.2], T, params=[2.0])
    copy = pickle.loads(pickle.dumps(vf))
    with pytest.raises(ValueError, match="small q"):
        nh.integrate(copy, [3.0, 0.2], T, params=[2.0])
    with pytest.raises(ValueError, match="positive"):
        copy.evaluate("rhs", [0.5, 0.2], params=[-1.0])


_CHILD = textwrap.dedent(
    """
    import pickle, sys, warnings
    import numpy as np
    import nhfast as nh
    import nhfast.codegen as codegen
    from nhfast import _kernels, vectorfield, structured_field

    def generation(*args, **kwargs):
        raise AssertionError("SymPy code generation ran in the worker")

    if sys.argv[2] == "no-generation":
        codegen.generate_c = codegen.generate_structured_c = generation
        _kernels.c_source = generation
        vectorfield.VectorField.kernel_set = generation
        structured_field.StructuredVectorField.kernel_set = generation
    with open(sys.argv[1], "rb") as f:
        system, x0, t, par = pickle.load(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = nh.integrate(system, x0, t, params=par)
    cs = system.compile(("observables",))
    np.savez(sys.argv[1] + ".npz", y=res.y, **res.observables)
    print(cs.backend, cs.generated, [w.category.__name__ for w in caught])
    """
)


def run_child(tmp_path: Path, payload: bytes, mode: str, env_extra: dict) -> tuple[str, dict]:
    path = tmp_path / "system.pkl"
    path.write_bytes(payload)
    env = {**os.environ, "NHFAST_CACHE_DIR": str(tmp_path / "fresh-cache"), **env_extra}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), mode],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    data = np.load(str(path) + ".npz")
    return out.stdout.strip(), {k: data[k] for k in data.files}


@pytest.mark.parametrize("which", ["sleigh", "structured"])
def test_worker_with_fresh_cache_compiles_the_shipped_source(tmp_path, which, sleigh) -> None:
    """A new process with an empty kernel cache builds the shipped C without SymPy and
    gets the original's trajectories bit for bit."""
    system, x, par = CASES[which]({"sleigh": sleigh, "oscillator": None})
    x0 = x * np.linspace(0.8, 1.2, 3)[:, None]
    ref = nh.integrate(system, x0, T, params=par)
    payload = pickle.dumps((system, x0, T, np.asarray(par, dtype=float)))
    line, got = run_child(tmp_path, payload, "no-generation", {})
    assert line.startswith("c False"), line
    np.testing.assert_array_equal(got["y"], ref.y)
    for k, v in ref.observables.items():
        np.testing.assert_array_equal(got[k], v)
    assert any((tmp_path / "fresh-cache").iterdir())  # compiled into the worker's own cache


def test_worker_without_compiler_falls_back_to_numpy(tmp_path, sleigh) -> None:
    x0 = np.array([[0.0, 0.0, 0.1, 1.0, 0.3]])
    par = np.array([0.5, 1.0, 2.0])
    ref = nh.integrate(sleigh, x0, T, params=par)
    payload = pickle.dumps((sleigh, x0, T, par))
    line, got = run_child(tmp_path, payload, "generation allowed", {"CC": "/nonexistent/cc"})
    assert line.startswith("numpy"), line
    assert "BackendWarning" in line
    np.testing.assert_allclose(got["y"], ref.y, rtol=1e-9, atol=1e-12)
