"""The first cache level: generated C keyed on the symbolic input, so a warm process skips CSE.

Issue 14, item 5: the kernel cache was keyed on the generated C only, so every new process ran
CSE and printing again (21 s for a 5000-term right-hand side on a cache hit). Now
:func:`nhfast._kernels.source_key` (a hash of the symbolic input, taken before code generation)
maps to the generated source in the same cache directory, and a slow stage says so on stderr.
A field's :meth:`~nhfast.VectorField.compile` keys that level on the field's recipe
(:func:`nhfast._kernels.recipe_key`), before the divergence or Jacobian is derived, so a warm
process takes no symbolic derivative either.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nhfast as nh
from nhfast import _jit, _progress
from nhfast._kernels import c_source, compile_kernels, load_compiled, source_key
from nhfast.codegen import KernelSet
from nhfast.vectorfield import LinearSolve, VectorField


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("NHFAST_CACHE_DIR", str(root))
    monkeypatch.setenv("NHFAST_BACKEND", "c")
    _jit.clear_memory_cache()
    yield root
    _jit.clear_memory_cache()


def _system(tag: int, name: str = "osc") -> nh.VectorField:
    x, v = sp.symbols("x v")
    k = sp.symbols("k", positive=True)
    rhs = [v, -k * x - sp.Rational(tag, 7) * v**3 + sp.sin(x) * sp.cos(v)]
    return nh.VectorField([x, v], rhs, params=[k], name=name)


def _sources(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.name.startswith("s"))


_BIG = """
def big_system(n_terms, n_state=10, seed=0):
    xs = sp.symbols(f"x0:{n_state}")
    ps = sp.symbols("a0:4")
    rng = random.Random(seed)
    fns = (sp.sin, sp.cos, lambda e: e, sp.exp)
    rows = [[] for _ in range(n_state)]
    for k in range(n_terms):
        a, b, c = (rng.randrange(n_state) for _ in range(3))
        coef = sp.Rational(rng.randint(1, 97), rng.randint(1, 13))
        f = fns[rng.randrange(4)]
        rows[k % n_state].append(coef * ps[k % 4] * xs[a] * f(xs[b] - xs[c] / 2))
    rhs = [sp.Add(*r) for r in rows]
    return nh.VectorField(list(xs), rhs, params=list(ps), name=f"big{n_terms}")
"""


def big_system(n_terms: int) -> nh.VectorField:
    """A right-hand side of ``n_terms`` products ``c a_k x_a f(x_b - x_c/2)`` (benchmark)."""
    scope = {"random": random, "sp": sp, "nh": nh}
    exec(_BIG, scope)
    return scope["big_system"](n_terms)


# A second process: builds a system; with NH_FORBID set, any CSE or C printing raises.
_WORKER = """
import json, os, sys
import numpy as np
import sympy as sp
if os.environ.get("NH_FORBID"):
    def forbidden(*a, **k):
        raise AssertionError("code generation ran in a warm process")
    sp.cse = forbidden
    from nhfast.codegen._printer import CPrinter
    CPrinter.doprint = forbidden
import random
import nhfast as nh
exec(os.environ["NH_BIG"])
vf = big_system(int(sys.argv[1]))
cs = vf.compile(())
y = cs.evaluate("rhs", np.linspace(0.1, 1.0, 10), params=[1.0, 2.0, 3.0, 4.0])
print(json.dumps({"generated": cs.generated, "hit": cs.cache_hit, "key": cs.key,
                  "timings": cs.timings, "y": y.tolist()}))
"""


def _worker(root: Path, n_terms: int, forbid: bool) -> dict:
    env = {**os.environ, "NHFAST_CACHE_DIR": str(root), "NH_BIG": _BIG}
    env.pop("NH_FORBID", None)
    if forbid:
        env["NH_FORBID"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", _WORKER, str(n_terms)],
        env=env,
        cwd=root.parent,  # outside the source tree
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_second_process_does_no_code_generation(cache):
    cold = _worker(cache, 40, forbid=False)
    assert cold["generated"] and not cold["hit"]
    assert len(_sources(cache)) == 1
    warm = _worker(cache, 40, forbid=True)  # sympy.cse and the C printer raise there
    assert not warm["generated"] and warm["hit"]
    assert warm["key"] == cold["key"]
    assert warm["y"] == cold["y"]
    # and the numbers are those of the expressions
    vf = big_system(40)
    x = np.linspace(0.1, 1.0, 10)
    subs = dict(zip(vf.states, x, strict=True)) | dict(
        zip(vf.params, [1.0, 2.0, 3.0, 4.0], strict=True)
    )
    expect = [float(f.evalf(subs=subs)) for f in vf.rhs]
    np.testing.assert_allclose(warm["y"], expect, rtol=1e-12)


def test_warm_compile_in_process_reuses_the_source(cache):
    cs1 = _system(3).compile(())
    assert cs1.generated
    _jit.clear_memory_cache()
    cs2 = _system(3).compile(())  # a new field: its memo is empty, the disk cache is not
    assert not cs2.generated and cs2.cache_hit and cs2.source == cs1.source
    x = [[0.3, -0.2], [1.0, 0.5]]
    np.testing.assert_array_equal(
        cs1.evaluate("rhs", x, params=[2.0]), cs2.evaluate("rhs", x, params=[2.0])
    )


_coef = st.integers(1, 5)
_perm = st.permutations(range(3))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    a=st.tuples(_coef, _perm, st.permutations(range(2)), st.sampled_from(["sys", "sys2"])),
    b=st.tuples(_coef, _perm, st.permutations(range(2)), st.sampled_from(["sys", "sys2"])),
)
def test_different_systems_get_different_keys(a, b):
    """Coefficient, state order, parameter order, name: any change gives another key."""

    def kernel_set(coef, state_order, param_order, _name):
        x = sp.symbols("x0:3")
        p = sp.symbols("p0:2")
        rhs = [coef * p[0] * x[1], -x[0] + p[1] * x[2] ** 2, sp.sin(x[0]) - x[2]]
        states = [x[i] for i in state_order]
        rows = [rhs[i] for i in state_order]  # the same field, states listed in another order
        return KernelSet(states, [p[i] for i in param_order], None, {"rhs": rows})

    ka, kb = kernel_set(*a), kernel_set(*b)
    key_a, key_b = source_key(ka, a[3]), source_key(kb, b[3])
    assert (key_a == key_b) == (a == b)
    if key_a == key_b:
        assert c_source(ka, a[3]) == c_source(kb, b[3])
    assert source_key(kernel_set(*a), a[3]) == key_a  # stable for equal input


def test_key_sees_assumptions_floats_families_and_time():
    x, v, t = sp.symbols("x v t")
    xr = sp.Symbol("x", real=True)

    def key(states, rhs, time=None, kernels=None):
        fams = {"rhs": rhs, **(kernels or {})}
        return source_key(KernelSet(states, [], time, fams), "s")

    base = key([x, v], [v, -x])
    others = {
        key([xr, v], [v, -xr]),  # same names, other assumptions
        key([x, v], [v, -1.0 * x]),  # Float coefficient
        key([x, v], [v, -x], time=t),
        key([x, v], [v, -x], kernels={"divergence": [sp.Integer(0)]}),
        key([x, v], [v, -x], kernels={"observables": [x]}),
    }
    assert base not in others and len(others) == 5
    assert key([x, v], [v, -x + 0 * t]) == base  # -x + 0*t is -x: the same input


def test_corrupted_source_entry_is_detected_and_regenerated(cache):
    cs = _system(5).compile(())
    (entry,) = _sources(cache)
    good = (entry / "kernel.c").read_text()
    assert good == cs.source
    bad = good.replace("nh_x0", "nh_x1", 1)  # same length, still C: only the hash tells
    (entry / "kernel.c").write_text(bad)
    _jit.clear_memory_cache()
    cs2 = _system(5).compile(())
    assert cs2.generated and cs2.source == good
    assert _sources(cache) == [entry] and (entry / "kernel.c").read_text() == good
    # metadata cut short, and an entry of another system under this key
    for damage in ("meta", "swap"):
        if damage == "meta":
            (entry / "meta.json").write_text("{")
        else:
            other = _system(6, name="other").compile(())
            (oentry,) = (p for p in _sources(cache) if p != entry)
            (entry / "kernel.c").write_text(other.source)
            (entry / "meta.json").write_text((oentry / "meta.json").read_text())
        _jit.clear_memory_cache()
        cs3 = _system(5).compile(())
        assert cs3.generated and cs3.source == good, damage
    assert not [p for p in cache.iterdir() if ".corrupt-" in p.name or p.name.startswith(".tmp")]
    x = [[0.1, 0.2]]
    np.testing.assert_array_equal(
        cs.evaluate("rhs", x, params=[1.5]), cs3.evaluate("rhs", x, params=[1.5])
    )


def test_cache_info_and_clear_count_the_sources(cache):
    _system(7).compile(())
    info = _jit.cache_info()
    assert (info.entries, info.sources) == (2, 1)
    assert info.size >= sum(f.stat().st_size for f in _sources(cache)[0].iterdir())
    done = _jit.clear_cache()
    assert done.removed == 2 and not done.failed
    assert list(cache.iterdir()) == []
    _jit.clear_memory_cache()
    assert _system(7).compile(()).generated


def test_progress_line_for_a_slow_stage(cache, monkeypatch, capsys):
    monkeypatch.setattr(_progress, "THRESHOLD", 0.0)
    _system(8, name="slowpoke").compile(())
    err = capsys.readouterr().err.splitlines()
    gen = [line for line in err if line.startswith("nhfast: generating C for 'slowpoke'")]
    comp = [line for line in err if line.startswith("nhfast: compiling C for 'slowpoke'")]
    assert len(gen) == 1 and len(comp) == 1, err
    assert "(CSE, 2 expressions)... " in gen[0] and gen[0].endswith(" s")
    float(gen[0].rsplit(" ", 2)[-2])
    _jit.clear_memory_cache()
    _system(8, name="slowpoke").compile(())  # warm: nothing generated, nothing compiled
    assert capsys.readouterr().err == ""


def test_progress_stage_quiet_below_threshold_and_one_line_above(monkeypatch, capsys):
    with _progress.stage("quick"):
        pass
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(_progress, "THRESHOLD", 0.05)
    with _progress.stage("slow"):
        time.sleep(0.3)  # the label shows when the threshold passes, the time at the end
    assert capsys.readouterr().err.count("\n") == 1
    with pytest.raises(KeyError), _progress.stage("broken"):
        time.sleep(0.1)
        raise KeyError("x")
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("nhfast: broken... failed after ")


def test_compiled_system_travels_as_its_source(cache):
    cs = _system(9).compile(("observables",))
    blob = pickle.dumps(cs)
    assert b"sympy" not in blob.replace(b"sympy.core.symbol", b"")  # only the param symbols
    _jit.clear_memory_cache()
    back = pickle.loads(blob)
    assert back.backend == "c" and not back.generated and back.cache_hit
    assert back.check is None and back.meta() == cs.meta()
    x = np.array([[0.4, -0.1], [0.2, 0.3]])
    for kind in ("rhs", "observables"):
        np.testing.assert_array_equal(
            back.evaluate(kind, x, params=[1.25]), cs.evaluate(kind, x, params=[1.25])
        )
    with pytest.raises(ValueError, match="meta lacks"):
        load_compiled(cs.source, {"name": "x"})
    bad = cs.meta() | {"abi": -1}
    with pytest.raises(nh.errors.CompilationError, match="ABI"):
        load_compiled(cs.source, bad)


def test_numpy_backend_still_works_and_pickles(cache, monkeypatch):
    monkeypatch.setenv("NHFAST_BACKEND", "numpy")
    vf = _system(10)
    cs = compile_kernels(vf.kernel_set([]), vf.name)
    assert cs.backend == "numpy" and cs.source is None
    assert not cache.exists() or not _sources(cache)  # nothing generated, nothing cached
    back = pickle.loads(pickle.dumps(cs))
    x = np.array([[0.4, -0.1]])
    y = cs.evaluate("rhs", x, params=[2.0])
    np.testing.assert_array_equal(back.evaluate("rhs", x, params=[2.0]), y)
    monkeypatch.setenv("NHFAST_BACKEND", "c")
    ref = _system(10).compile(()).evaluate("rhs", x, params=[2.0])
    np.testing.assert_allclose(back.evaluate("rhs", x, params=[2.0]), ref, rtol=1e-13)
    # C source handed to a process without a compiler: the code, if given, else a clear error
    c = _system(10).compile(())
    monkeypatch.setenv("NHFAST_BACKEND", "numpy")
    alt = load_compiled(c.source, c.meta(), code=vf.kernel_set([]))
    assert alt.backend == "numpy"
    np.testing.assert_allclose(alt.evaluate("rhs", x, params=[2.0]), ref, rtol=1e-13)
    with pytest.raises(nh.errors.CompilationError, match="NumPy backend"):
        load_compiled(c.source, c.meta())


# A second process compiling fields with companions; with NH_FORBID set, deriving any kernel
# (kernel_set, sympy.diff, the field's divergence/Jacobian), CSE or printing C raises.
_COMPANIONS = """
import json, os, sys
import numpy as np
import sympy as sp
import random
import nhfast as nh
from nhfast.vectorfield import LinearSolve, VectorField
exec(os.environ["NH_BIG"])
big = big_system(int(sys.argv[1]))
vf = nh.VectorField(big.states, big.rhs, params=big.params, name=big.name,
                    observables={"r2": sum(s**2 for s in big.states)})
q, p = sp.symbols("q0:2"), sp.symbols("p0:2")
k = sp.Symbol("k", positive=True)
ham = nh.HamiltonianSystem(q, p, (p[0]**2 + p[1]**2) / 2 + k * q[0]**4 + sp.cos(q[0] - q[1]),
                           params=[k], name="ham")
x, y, u = sp.symbols("x y u")
solved = nh.VectorField([x, y], [u, -x * u], params=[k], name="solved",
                        solves=[LinearSolve([u], sp.Matrix([[1 + x**2]]), [y * k])])
if os.environ.get("NH_FORBID"):
    def forbidden(*a, **kw):
        raise AssertionError("a kernel was derived or generated in a warm process")
    for attr in ("kernel_set", "divergence", "jacobian", "total_derivatives"):
        setattr(VectorField, attr, forbidden)
    setattr(nh.HamiltonianSystem, "kernel_set", forbidden)
    sp.diff = sp.cse = forbidden
    from nhfast.codegen._printer import CPrinter
    CPrinter.doprint = forbidden
    print("NH-FORBIDDEN")
out = {}
jobs = [(vf, ("divergence", "observables"), [1.0, 2.0, 3.0, 4.0]),
        (vf, ("jacobian",), [1.0, 2.0, 3.0, 4.0]),
        (ham, ("divergence", "observables", "jacobian", "dHdq", "dHdp"), [1.5]),
        (solved, ("divergence", "jacobian"), [0.7])]
for i, (field, comps, par) in enumerate(jobs):
    if str(i) not in sys.argv[2].split(","):
        continue
    cs = field.compile(comps)
    X = np.linspace(0.1, 0.9, 2 * field.n_state).reshape(2, field.n_state)
    vals = {c: cs.evaluate(c, X, params=par).tolist() for c in ("rhs", *comps)}
    out[i] = {"generated": cs.generated, "meta": repr(cs.meta()), "vals": vals}
print(json.dumps(out))
"""


def _companions_worker(
    root: Path, n_terms: int, forbid: bool, jobs: str = "0,1,2,3"
) -> tuple[dict, str]:
    env = {**os.environ, "NHFAST_CACHE_DIR": str(root), "NH_BIG": _BIG, "NHFAST_BACKEND": "c"}
    env.pop("NH_FORBID", None)
    if forbid:
        env["NH_FORBID"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", _COMPANIONS, str(n_terms), jobs],
        env=env,
        cwd=root.parent,  # outside the source tree
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stdout


def test_warm_process_takes_no_derivative_for_companions(cache):
    cold, _ = _companions_worker(cache, 30, forbid=False)
    assert all(job["generated"] for job in cold.values())
    warm, stdout = _companions_worker(cache, 30, forbid=True)
    assert "NH-FORBIDDEN" in stdout  # the derivation and generation paths did raise there
    assert not any(job["generated"] for job in warm.values())
    assert warm == {i: {**job, "generated": False} for i, job in cold.items()}  # bit for bit
    # the cold numbers are those of the expressions (divergence of the big field, H's Jacobian)
    vf = big_system(30)
    X = np.linspace(0.1, 0.9, 20).reshape(2, 10)
    par = dict(zip(vf.params, [1.0, 2.0, 3.0, 4.0], strict=True))
    div = vf.divergence().subs(par)
    expect = [float(div.subs(dict(zip(vf.states, row, strict=True)))) for row in X]
    np.testing.assert_allclose(np.ravel(cold["0"]["vals"]["divergence"]), expect, rtol=1e-12)


def _fields() -> list[VectorField]:
    x, v, u = sp.symbols("x v u")
    k = sp.Symbol("k", positive=True)
    q, p = sp.symbols("q0:2"), sp.symbols("p0:2")
    solve = LinearSolve([u], sp.Matrix([[1 + x**2]]), [v * k])
    return [
        nh.VectorField([x, v], [v, -k * sp.sin(x)], params=[k], observables={"e": v**2}),
        nh.VectorField([x, v], [u, -x * u], params=[k], solves=[solve]),
        nh.HamiltonianSystem(q, p, p[0] ** 2 / 2 + p[1] ** 2 / 2 + k * q[0] ** 2 * q[1] ** 2, [k]),
        _system(2).with_divergence(),
    ]


def test_recipe_shape_is_that_of_the_kernels_and_the_key_sees_the_recipe():
    keys = set()
    for f in _fields():
        ham = isinstance(f, nh.HamiltonianSystem)
        combos = [(), ("divergence",), ("jacobian", "observables"), ("divergence", "jacobian")]
        combos += [("dHdp", "dHdq", "divergence")] if ham else []
        if f.name.endswith("with divergence"):
            combos = combos[:1]
        for comps in combos:
            key, shape = f._kernel_recipe(list(comps))
            ks = f.kernel_set(list(comps))
            expect = {
                "n_out": {fam: len(e) for fam, e in ks.kernels.items()},
                "n_state": len(ks.states),
                "params": tuple(ks.params),
                "n_obs": ks.n_obs,
                "flags": ks.flags,
                "n_q": ks.n_q,
            }
            assert shape == expect, (f.name, comps)
            assert list(shape["n_out"]) == list(ks.kernels)  # in the same order
            assert f._kernel_recipe(list(comps))[0] == key  # stable
            keys.add(key)
    assert len(keys) == 14  # every field and companion set its own key
    x, v = sp.symbols("x v")
    k = sp.Symbol("k", positive=True)
    base = nh.VectorField([x, v], [v, -k * x], params=[k], name="a")
    others = [
        nh.VectorField([x, v], [v, -k * x], params=[k], name="b"),
        nh.VectorField([x, v], [v, -k * x - v / 9], params=[k], name="a"),
        nh.VectorField([v, x], [-k * x, v], params=[k], name="a"),
        nh.VectorField([x, v], [v, -k * x], params=[k], name="a", observables={"e": v}),
        nh.VectorField([x, v], [v, -k * x], params=[k], name="a", time=sp.Symbol("t")),
    ]
    ref = base._kernel_recipe(["divergence"])[0]
    assert len({ref, *(o._kernel_recipe(["divergence"])[0] for o in others)}) == 6
    # a subclass (its kernels may be derived otherwise) and unknown companions: no recipe

    class Custom(nh.VectorField):
        pass

    assert Custom([x, v], [v, -k * x], params=[k])._kernel_recipe(["divergence"]) is None
    assert base._kernel_recipe(["dHdq"]) is None and base._kernel_recipe(["bogus"]) is None
    with pytest.raises(ValueError, match="exists only for a HamiltonianSystem"):
        base.compile(("dHdq",))


@pytest.mark.slow
def test_5000_term_rhs_cold_and_warm(cache, capsys):
    """The benchmark of issue 14: a warm process does no generation (figures printed)."""
    cold = _worker(cache, 5000, forbid=False)
    warm = _worker(cache, 5000, forbid=True)
    assert cold["generated"] and not warm["generated"] and warm["y"] == cold["y"]
    with capsys.disabled():
        print(f"\n5000 terms: cold {cold['timings']}, warm {warm['timings']}")
    # with the default companions (observables, divergence): no derivative in the warm process
    t0 = time.perf_counter()
    cold_c, _ = _companions_worker(cache, 5000, forbid=False, jobs="0")
    t1 = time.perf_counter()
    warm_c, _ = _companions_worker(cache, 5000, forbid=True, jobs="0")
    t2 = time.perf_counter()
    assert warm_c == {i: {**job, "generated": False} for i, job in cold_c.items()}
    with capsys.disabled():
        print(f"5000 terms with companions: cold process {t1 - t0:.1f} s, warm {t2 - t1:.1f} s")
